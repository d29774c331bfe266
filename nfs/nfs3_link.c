/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_LINK (RFC 1813 3.3.15): hard link a regular file into a
 * directory of the same bucket.
 * Status: NFS3_OK; NFS3ERR_EXIST; NFS3ERR_XDEV (other export, bucket or
 * tenant); NFS3ERR_PERM / NFS3ERR_ISDIR (directories cannot be linked);
 * NFS3ERR_MLINK; NFS3ERR_ACCES; NFS3ERR_NOTDIR; NFS3ERR_NAMETOOLONG;
 * NFS3ERR_INVAL (a name holding a NUL byte); NFS3ERR_ROFS; NFS3ERR_DQUOT; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO.
 * Both arms carry the file's attributes and the directory's wcc. */
#include "nfs_int.h"

int nfs3_link(struct nfs_req *r, void *args, void *res)
{
    LINK3args *a = args;
    LINK3res *o = res;
    struct core_attr file, dir, out;
    uint64_t ino, dino;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->file, &ino, &file);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    nfsstat3 st = nfs_req_fh(r, &a->link.dir, &dino, &dir);
    if (st != NFS3_OK) {
        o->status = st;
        nfs_attr_post(r, &file, &o->LINK3res_u.resfail.file_attributes);
        return NFS_REQ_OK;
    }
    rc = nfs_name_check(r, a->link.name, &len);
    if (rc == 0)
        rc = core_link(r->srv->core, &r->p, ino, dino, a->link.name, len, &out);
    o->status = nfs_req_status(r, rc);
    if (o->status == NFS3_OK) {
        nfs_attr_post(r, &out, &o->LINK3res_u.resok.file_attributes);
        nfs_attr_wcc(r, &dir, dino, &o->LINK3res_u.resok.linkdir_wcc);
    } else {
        nfs_attr_post(r, &file, &o->LINK3res_u.resfail.file_attributes);
        nfs_attr_wcc(r, &dir, dino, &o->LINK3res_u.resfail.linkdir_wcc);
    }
    return NFS_REQ_OK;
}
