/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READLINK (RFC 1813 3.3.5): the target of a symbolic link.
 * Status: NFS3_OK; NFS3ERR_INVAL (not a symlink); NFS3ERR_ACCES;
 * NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"

#define NFS_SYMLINK_MAX 4096

int nfs3_readlink(struct nfs_req *r, void *args, void *res)
{
    READLINK3args *a = args;
    READLINK3res *o = res;
    struct core_attr at;
    uint64_t ino;
    size_t len = 0;
    int rc;

    o->status = nfs_req_fh(r, &a->symlink, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    char *buf = malloc(NFS_SYMLINK_MAX + 1);
    rc = buf ? core_readlink(r->srv->core, &r->p, ino, buf, NFS_SYMLINK_MAX, &len) : -ENOMEM;
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        free(buf);
        nfs_attr_post(r, &at, &o->READLINK3res_u.resfail.symlink_attributes);
        return NFS_REQ_OK;
    }
    buf[len] = '\0';
    o->READLINK3res_u.resok.data = buf;
    nfs_attr_post(r, &at, &o->READLINK3res_u.resok.symlink_attributes);
    return NFS_REQ_OK;
}
