/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_SYMLINK (RFC 1813 3.3.10): make a symbolic link. The target is
 * stored as given (1..4096 bytes); its mode is always 0777.
 * Status: NFS3_OK; NFS3ERR_EXIST; NFS3ERR_ACCES; NFS3ERR_NOTDIR;
 * NFS3ERR_NAMETOOLONG (name or target too long); NFS3ERR_INVAL (empty
 * target, or a NUL byte in the name or the target); NFS3ERR_ROFS; NFS3ERR_DQUOT; NFS3ERR_NOSPC; NFS3ERR_STALE,
 * NFS3ERR_BADHANDLE; NFS3ERR_IO. Both arms carry dir wcc. */
#include <string.h>

#include "nfs_int.h"

int nfs3_symlink(struct nfs_req *r, void *args, void *res)
{
    SYMLINK3args *a = args;
    SYMLINK3res *o = res;
    struct core_attr dir, obj;
    uint64_t dino;
    size_t len, tlen = 0;
    int rc;

    o->status = nfs_req_fh(r, &a->where.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->where.name, &len);
    const char *target = a->symlink.symlink_data;
    if (rc == 0) {
        tlen = target ? strlen(target) : 0;
        if (tlen == 0)
            rc = -EINVAL;
        else if (tlen > 4096)
            rc = -ENAMETOOLONG;
    }
    if (rc == 0)
        rc = core_symlink(r->srv->core, &r->p, dino, a->where.name, len, target, tlen, &obj);
    if (rc == 0) {
        SYMLINK3resok *ok = &o->SYMLINK3res_u.resok;
        rc = nfs_req_created(r, &obj, &ok->obj, &ok->obj_attributes);
    }
    o->status = nfs_req_status(r, rc);
    nfs_attr_wcc(r, &dir, dino,
                 o->status == NFS3_OK ? &o->SYMLINK3res_u.resok.dir_wcc
                                      : &o->SYMLINK3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
