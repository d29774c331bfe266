/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_EXPORT (RFC 1813 5.2.5): the exports this client may mount,
 * each with its admitted networks as groups ("10.0.0.0/8"). Exports that do
 * not admit the caller are not listed, so one tenant's exports are invisible
 * to another tenant's clients. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_log.h"

struct exp_state {
    exports *tail;
    int err;
};

static int exp_cb(void *arg, const struct tenant_export *e)
{
    struct exp_state *st = arg;
    struct exportnode *n = calloc(1, sizeof(*n));
    if (!n || !(n->ex_dir = strdup(e->path)))
        goto oom;
    *st->tail = n;
    st->tail = &n->ex_next;
    groups *gt = &n->ex_groups;
    for (uint32_t i = 0; i < e->nnets && i < TENANT_EXPORT_MAX_NETS; i++) {
        char addr[INET6_ADDRSTRLEN] = "?", buf[INET6_ADDRSTRLEN + 8];
        inet_ntop(e->nets[i].family, e->nets[i].addr, addr, sizeof(addr));
        snprintf(buf, sizeof(buf), "%s/%u", addr, e->nets[i].prefix);
        struct groupnode *g = calloc(1, sizeof(*g));
        if (!g || !(g->gr_name = strdup(buf))) {
            free(g);
            st->err = -ENOMEM;
            return 1;
        }
        *gt = g;
        gt = &g->gr_next;
    }
    return 0;
oom:
    free(n);
    st->err = -ENOMEM;
    return 1;
}

int mnt_export(struct nfs_req *r, void *args, void *res)
{
    exports *o = res;
    struct exp_state st = {o, 0};
    int rc = tenants_export_list(r->srv->tenants, (struct sockaddr *)&r->peer, exp_cb, &st);
    if (rc < 0 || st.err < 0) {
        r->err = rc < 0 ? rc : st.err;
        srv_log(WARN, NFS, "req=%08x tenant=- EXPORT list incomplete: %s", r->call.xid,
                rc < 0 ? "tenants error" : "out of memory");
    }
    return NFS_REQ_OK;
}
