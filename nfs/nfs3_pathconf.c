/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_PATHCONF (RFC 1813 3.3.20): names up to 255 bytes, refused (not
 * truncated) beyond; case-sensitive and case-preserving; chown restricted to
 * the superuser; up to 65000 hard links.
 * Status: NFS3_OK; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include "nfs_int.h"

int nfs3_pathconf(struct nfs_req *r, void *args, void *res)
{
    PATHCONF3args *a = args;
    PATHCONF3res *o = res;
    struct core_attr at;
    uint64_t ino;

    o->status = nfs_req_fh(r, &a->object, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    PATHCONF3resok *ok = &o->PATHCONF3res_u.resok;
    nfs_attr_post(r, &at, &ok->obj_attributes);
    ok->linkmax = 65000;
    ok->name_max = CORE_NAME_MAX;
    ok->no_trunc = TRUE;
    ok->chown_restricted = TRUE;
    ok->case_insensitive = FALSE;
    ok->case_preserving = TRUE;
    return NFS_REQ_OK;
}
