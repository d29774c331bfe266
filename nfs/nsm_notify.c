/* SPDX-License-Identifier: Apache-2.0
 * SM_NOTIFY (NSM, X/Open XNFS): a client host rebooted (its status monitor
 * tells us, naming itself as mon_name): the locks its previous incarnation
 * held are released, so its processes do not block others forever, and the
 * host is forgotten (nlm_host.h) until it locks again.
 * No result. */
#include <string.h>

#include "nfs_int.h"
#include "srv_log.h"

int nsm_op_notify(struct nfs_req *r, void *args, void *res)
{
    stat_chge *a = args;
    const char *name = a->mon_name ? a->mon_name : "";
    size_t n = nfs_locks_free_host(r->srv->locks, name, strlen(name));
    nlm_block_forget_host(r->srv, name);
    nlm_block_retry(r->srv);
    nlm_host_forget(r->srv, name);
    srv_log(INFO, NFS, "req=%08x tenant=- SM_NOTIFY: %s rebooted (state %d, from %s): %zu locks "
            "released", r->call.xid, name, a->state, r->conn_peer, n);
    return NFS_REQ_OK;
}
