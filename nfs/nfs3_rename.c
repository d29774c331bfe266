/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_RENAME (RFC 1813 3.3.14): atomic rename, replacing an existing
 * target (file over file, empty directory over directory) in one core
 * transaction, which is what the checkpoint "write tmp, rename over" pattern
 * relies on. Both directories must be in the same export (else XDEV).
 * Status: NFS3_OK; NFS3ERR_NOENT; NFS3ERR_EXIST / NFS3ERR_NOTEMPTY (target
 * directory not empty); NFS3ERR_ISDIR / NFS3ERR_NOTDIR (type mismatch);
 * NFS3ERR_XDEV (other export, bucket or tenant); NFS3ERR_INVAL (directory
 * into itself, "." or "..", a NUL byte in either name); NFS3ERR_ACCES; NFS3ERR_NAMETOOLONG;
 * NFS3ERR_ROFS; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO.
 * Both arms carry both directories' wcc. */
#include <string.h>

#include "nfs_int.h"

static bool dot_or_dotdot(const char *n)
{
    return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

int nfs3_rename(struct nfs_req *r, void *args, void *res)
{
    RENAME3args *a = args;
    RENAME3res *o = res;
    struct core_attr from, to;
    uint64_t fino, tino = 0;
    size_t flen, tlen;
    bool have_to = false;
    int rc;

    o->status = nfs_req_fh(r, &a->from.dir, &fino, &from);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    nfsstat3 st = nfs_req_fh(r, &a->to.dir, &tino, &to);
    if (st != NFS3_OK) {
        o->status = st;
        nfs_attr_wcc(r, &from, fino, &o->RENAME3res_u.resfail.fromdir_wcc);
        return NFS_REQ_OK;
    }
    have_to = true;
    rc = nfs_name_check(r, a->from.name, &flen);
    if (rc == 0)
        rc = nfs_name_check(r, a->to.name, &tlen);
    if (rc == 0 && (dot_or_dotdot(a->from.name) || dot_or_dotdot(a->to.name)))
        rc = -EINVAL;
    if (rc == 0)
        rc = core_rename(r->srv->core, &r->p, fino, a->from.name, flen, tino, a->to.name, tlen);
    o->status = nfs_req_status(r, rc);
    bool ok = o->status == NFS3_OK;
    nfs_attr_wcc(r, &from, fino,
                 ok ? &o->RENAME3res_u.resok.fromdir_wcc : &o->RENAME3res_u.resfail.fromdir_wcc);
    nfs_attr_wcc(r, have_to ? &to : NULL, tino,
                 ok ? &o->RENAME3res_u.resok.todir_wcc : &o->RENAME3res_u.resfail.todir_wcc);
    return NFS_REQ_OK;
}
