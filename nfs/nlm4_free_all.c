/* SPDX-License-Identifier: Apache-2.0
 * NLM4_FREE_ALL: release every lock held by a client host (sent when the
 * client knows its previous incarnation's locks are void) and forget the
 * host (nlm_host.h) — only what the host holds from the address the call
 * comes from (nlm_host_release). No result. */
#include "nfs_int.h"

int nlm4_op_free_all(struct nfs_req *r, void *args, void *res)
{
    nlm4_notify *a = args;
    nlm_host_release(r, a->name ? a->name : "", "FREE_ALL");
    return NFS_REQ_OK;
}
