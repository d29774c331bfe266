/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_ACCESS (RFC 1813 3.3.4): which of the asked ACCESS3_* rights the
 * caller has. The core answers in POSIX terms (read, write, search/execute);
 * this maps them: READ <- r; LOOKUP <- x on a directory; MODIFY, EXTEND <- w;
 * DELETE <- w on a directory; EXECUTE <- x on a non-directory. A read-only
 * export grants none of MODIFY, EXTEND, DELETE. Only asked bits come back.
 * Status: NFS3_OK; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include <unistd.h>

#include "nfs_int.h"

int nfs3_access(struct nfs_req *r, void *args, void *res)
{
    ACCESS3args *a = args;
    ACCESS3res *o = res;
    struct core_attr at;
    uint64_t ino;
    uint32_t granted = 0, out = 0;
    int rc;

    o->status = nfs_req_fh(r, &a->object, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = core_access(r->srv->core, &r->p, ino, R_OK | W_OK | X_OK, &granted);
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        nfs_attr_post(r, &at, &o->ACCESS3res_u.resfail.obj_attributes);
        return NFS_REQ_OK;
    }
    bool dir = at.type == CORE_DIR;
    bool ro = (r->p.flags & CORE_P_READONLY) != 0;
    if (granted & R_OK)
        out |= ACCESS3_READ;
    if ((granted & X_OK) && dir)
        out |= ACCESS3_LOOKUP;
    if ((granted & X_OK) && !dir)
        out |= ACCESS3_EXECUTE;
    if ((granted & W_OK) && !ro) {
        out |= ACCESS3_MODIFY | ACCESS3_EXTEND;
        if (dir)
            out |= ACCESS3_DELETE;
    }
    o->ACCESS3res_u.resok.access = out & a->access;
    nfs_attr_post(r, &at, &o->ACCESS3res_u.resok.obj_attributes);
    return NFS_REQ_OK;
}
