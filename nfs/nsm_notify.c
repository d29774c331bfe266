/* SPDX-License-Identifier: Apache-2.0
 * SM_NOTIFY (NSM, X/Open XNFS): a client host rebooted (its status monitor
 * tells us, naming itself as mon_name): the locks its previous incarnation
 * held are released, so its processes do not block others forever, and the
 * host is forgotten (nlm_host.h) until it locks again — only what the host
 * holds from the address the notification comes from (nlm_host_release), so
 * nobody frees another host's locks by naming it.
 * No result. */
#include <stdio.h>

#include "nfs_int.h"

int nsm_op_notify(struct nfs_req *r, void *args, void *res)
{
    stat_chge *a = args;
    char what[48];
    snprintf(what, sizeof(what), "SM_NOTIFY (state %d)", a->state);
    nlm_host_release(r, a->mon_name ? a->mon_name : "", what);
    return NFS_REQ_OK;
}
