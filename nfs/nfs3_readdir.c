/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READDIR (RFC 1813 3.3.16): one page of directory entries.
 * The core's cookies are stable across calls and restarts (sent below 2^63);
 * a page holds as many entries as fit in `count` bytes of encoded reply. The
 * page, its cookies, the cookie verifier rule and TOOSMALL are nfs_dir.c's
 * (shared with READDIRPLUS).
 * Status: NFS3_OK; NFS3ERR_NOTDIR; NFS3ERR_ACCES; NFS3ERR_BAD_COOKIE;
 * NFS3ERR_TOOSMALL (not even one entry fits); NFS3ERR_STALE,
 * NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include "nfs_int.h"

int nfs3_readdir(struct nfs_req *r, void *args, void *res)
{
    READDIR3args *a = args;
    return nfs_dir_page(r, &a->dir, a->cookie, a->cookieverf, a->count, UINT32_MAX, false, res);
}
