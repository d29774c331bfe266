/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_RMDIR (RFC 1813 3.3.13): remove an empty directory (in a tenant
 * root: delete an empty bucket). "." and ".." are refused with INVAL.
 * Status: NFS3_OK; NFS3ERR_NOENT; NFS3ERR_NOTDIR; NFS3ERR_NOTEMPTY;
 * NFS3ERR_ACCES; NFS3ERR_INVAL; NFS3ERR_NAMETOOLONG; NFS3ERR_ROFS;
 * NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. Both arms carry dir wcc. */
#include <string.h>

#include "nfs_int.h"

int nfs3_rmdir(struct nfs_req *r, void *args, void *res)
{
    RMDIR3args *a = args;
    RMDIR3res *o = res;
    struct core_attr dir;
    uint64_t dino;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->object.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->object.name, &len);
    if (rc == 0 && (strcmp(a->object.name, ".") == 0 || strcmp(a->object.name, "..") == 0))
        rc = -EINVAL;
    if (rc == 0)
        rc = core_rmdir(r->srv->core, &r->p, dino, a->object.name, len);
    o->status = nfs_req_status(r, rc);
    nfs_attr_wcc(r, &dir, dino,
                 o->status == NFS3_OK ? &o->RMDIR3res_u.resok.dir_wcc
                                      : &o->RMDIR3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
