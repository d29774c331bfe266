/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READDIRPLUS (RFC 1813 3.3.17): directory entries with their
 * attributes and handles. A page is bounded twice, as the RFC says: by
 * dircount (bytes of fileid + name + cookie) and by maxcount (the whole
 * encoded reply). "." carries the directory's own handle; ".." carries no
 * handle or attributes (the client looks it up, and LOOKUP keeps it inside
 * the export). Cookies, verifiers and TOOSMALL as in READDIR (nfs_dir.c).
 * Status: NFS3_OK; NFS3ERR_NOTDIR; NFS3ERR_ACCES; NFS3ERR_BAD_COOKIE;
 * NFS3ERR_TOOSMALL; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include "nfs_int.h"

int nfs3_readdirplus(struct nfs_req *r, void *args, void *res)
{
    READDIRPLUS3args *a = args;
    return nfs_dir_page(r, &a->dir, a->cookie, a->cookieverf, a->maxcount, a->dircount, true,
                        res);
}
