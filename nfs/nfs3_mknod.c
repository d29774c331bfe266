/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_MKNOD (RFC 1813 3.3.11): special files. The namespace holds only
 * regular files, directories and symbolic links (it is also an object
 * store), so: character and block devices answer NFS3ERR_BADTYPE (RFC: "type
 * not supported"); sockets and FIFOs answer NFS3ERR_NOTSUPP; any other type
 * (REG, DIR, LNK: those have their own procedures) answers NFS3ERR_BADTYPE.
 * The handle and the directory are still checked first (STALE/BADHANDLE),
 * then the name (NFS3ERR_INVAL when it holds a NUL byte, NAMETOOLONG), and
 * the reply carries the directory's wcc data. */
#include "nfs_int.h"
#include "srv_err.h"

int nfs3_mknod(struct nfs_req *r, void *args, void *res)
{
    MKNOD3args *a = args;
    MKNOD3res *o = res;
    struct core_attr dir;
    uint64_t dino;
    size_t len;

    o->status = nfs_req_fh(r, &a->where.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    int rc = nfs_name_check(r, a->where.name, &len);
    if (rc < 0)
        o->status = nfs_req_status(r, rc);
    else if (dir.type != CORE_DIR)
        o->status = NFS3ERR_NOTDIR;
    else if (r->p.flags & CORE_P_READONLY)
        o->status = NFS3ERR_ROFS;
    else if (a->what.type == NF3SOCK || a->what.type == NF3FIFO)
        o->status = NFS3ERR_NOTSUPP;
    else
        o->status = NFS3ERR_BADTYPE;
    r->err = SRV_ENOTSUPP;
    nfs_attr_wcc(r, &dir, dino, &o->MKNOD3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
