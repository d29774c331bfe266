/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_GETATTR (RFC 1813 3.3.1): attributes of an object.
 * Status: NFS3_OK; NFS3ERR_BADHANDLE (malformed handle); NFS3ERR_STALE
 * (deleted inode, forged or foreign handle, export gone); NFS3ERR_IO. */
#include "nfs_int.h"

int nfs3_getattr(struct nfs_req *r, void *args, void *res)
{
    GETATTR3args *a = args;
    GETATTR3res *o = res;
    struct core_attr at;
    uint64_t ino;

    o->status = nfs_req_fh(r, &a->object, &ino, &at);
    if (o->status == NFS3_OK)
        nfs_attr_fattr(r, &at, &o->GETATTR3res_u.resok.obj_attributes);
    return NFS_REQ_OK;
}
