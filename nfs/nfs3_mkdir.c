/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_MKDIR (RFC 1813 3.3.9): make a directory (in a tenant root: a
 * bucket, under the bucket naming rules).
 * Status: NFS3_OK; NFS3ERR_EXIST; NFS3ERR_ACCES; NFS3ERR_NOTDIR;
 * NFS3ERR_NAMETOOLONG; NFS3ERR_INVAL (name refused, e.g. a bad bucket name);
 * NFS3ERR_ROFS; NFS3ERR_DQUOT; NFS3ERR_NOSPC; NFS3ERR_STALE,
 * NFS3ERR_BADHANDLE; NFS3ERR_IO. Both arms carry dir wcc. */
#include "nfs_int.h"

int nfs3_mkdir(struct nfs_req *r, void *args, void *res)
{
    MKDIR3args *a = args;
    MKDIR3res *o = res;
    struct core_attr dir, obj;
    uint64_t dino;
    uint32_t mode = 0755;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->where.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->where.name, &len);
    if (a->attributes.mode.set_it)
        mode = a->attributes.mode.set_mode3_u.mode & 07777;
    if (rc == 0)
        rc = core_mkdir(r->srv->core, &r->p, dino, a->where.name, len, mode, &obj);
    if (rc == 0)
        rc = nfs_attr_apply_rest(r, &a->attributes, false, &obj);
    if (rc == 0) {
        MKDIR3resok *ok = &o->MKDIR3res_u.resok;
        rc = nfs_req_created(r, &obj, &ok->obj, &ok->obj_attributes);
    }
    o->status = nfs_req_status(r, rc);
    nfs_attr_wcc(r, &dir, dino,
                 o->status == NFS3_OK ? &o->MKDIR3res_u.resok.dir_wcc
                                      : &o->MKDIR3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
