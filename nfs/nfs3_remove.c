/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_REMOVE (RFC 1813 3.3.12): unlink a non-directory. Data of an
 * unlinked file stays readable to holders of core references until they go.
 * Status: NFS3_OK; NFS3ERR_NOENT; NFS3ERR_ISDIR (use RMDIR); NFS3ERR_ACCES;
 * NFS3ERR_PERM (sticky directory); NFS3ERR_NOTDIR; NFS3ERR_NAMETOOLONG;
 * NFS3ERR_INVAL (a name holding a NUL byte); NFS3ERR_ROFS; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO.
 * Both arms carry dir wcc. */
#include "nfs_int.h"

int nfs3_remove(struct nfs_req *r, void *args, void *res)
{
    REMOVE3args *a = args;
    REMOVE3res *o = res;
    struct core_attr dir;
    uint64_t dino;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->object.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->object.name, &len);
    if (rc == -EINVAL)
        rc = -ENOENT;
    if (rc == 0)
        rc = core_remove(r->srv->core, &r->p, dino, a->object.name, len);
    o->status = nfs_req_status(r, rc);
    nfs_attr_wcc(r, &dir, dino,
                 o->status == NFS3_OK ? &o->REMOVE3res_u.resok.dir_wcc
                                      : &o->REMOVE3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
