/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_LOOKUP (RFC 1813 3.3.3): a name in a directory to a handle.
 * ".." of the export's root is the root itself, so a client can never
 * walk out of its export (the same rule a kernel server applies).
 * Status: NFS3_OK; NFS3ERR_NOENT; NFS3ERR_NOTDIR; NFS3ERR_ACCES (no search
 * permission); NFS3ERR_NAMETOOLONG; NFS3ERR_INVAL (a name holding a NUL
 * byte, nfs3_names_decode); NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. The directory's attributes come back in both arms. */
#include <string.h>

#include "nfs_int.h"

int nfs3_lookup(struct nfs_req *r, void *args, void *res)
{
    LOOKUP3args *a = args;
    LOOKUP3res *o = res;
    struct core_attr dir, obj;
    uint64_t dino;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->what.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->what.name, &len);
    if (rc == -EINVAL)
        rc = -ENOENT;
    if (rc == 0) {
        if (dino == r->exp.dir && len == 2 && memcmp(a->what.name, "..", 2) == 0)
            obj = dir;
        else
            rc = core_lookup(r->srv->core, &r->p, dino, a->what.name, len, &obj);
    }
    if (rc == 0)
        rc = nfs_req_mkfh(r, &obj, &o->LOOKUP3res_u.resok.object);
    o->status = nfs_req_status(r, rc);
    if (o->status == NFS3_OK) {
        nfs_attr_post(r, &obj, &o->LOOKUP3res_u.resok.obj_attributes);
        nfs_attr_post(r, &dir, &o->LOOKUP3res_u.resok.dir_attributes);
    } else {
        nfs_attr_post(r, &dir, &o->LOOKUP3res_u.resfail.dir_attributes);
    }
    return NFS_REQ_OK;
}
