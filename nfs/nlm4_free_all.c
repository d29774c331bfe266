/* SPDX-License-Identifier: Apache-2.0
 * NLM4_FREE_ALL: release every lock held by a client host (sent when the
 * client knows its previous incarnation's locks are void) and forget the
 * host (nlm_host.h). No result. */
#include <string.h>

#include "nfs_int.h"
#include "srv_log.h"

int nlm4_op_free_all(struct nfs_req *r, void *args, void *res)
{
    nlm4_notify *a = args;
    const char *name = a->name ? a->name : "";
    size_t n = nfs_locks_free_host(r->srv->locks, name, strlen(name));
    nlm_block_forget_host(r->srv, name);
    nlm_block_retry(r->srv);
    nlm_host_forget(r->srv, name);
    srv_log(INFO, NFS, "req=%08x tenant=- NLM FREE_ALL for %s from %s: %zu locks released",
            r->call.xid, name, r->conn_peer, n);
    return NFS_REQ_OK;
}
