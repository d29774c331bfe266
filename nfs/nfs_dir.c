/* SPDX-License-Identifier: Apache-2.0
 * nfs_dir: one page of a directory listing, for READDIR (RFC 1813 3.3.16)
 * and READDIRPLUS (3.3.17) alike.
 *
 * The reply is encoded here as XDR bytes while the core walks the directory
 * (struct nfs_dirres), rather than built as a list of entry3/entryplus3
 * structs (two or three heap blocks per entry) that libtirpc would then
 * size and encode in two more passes: a 64 KiB page of a few hundred
 * entries costs one allocation and one pass.
 * What both procedures share, and so is written once here:
 *  - the directory handle is resolved; a non-directory answers NOTDIR;
 *  - TOOSMALL when the count cannot hold the fixed part of the reply (or
 *    READDIRPLUS's dircount is zero), or when not even one entry fits a
 *    page that is not the end of the directory;
 *  - the cookie verifier is the core's per-directory verifier: a nonzero
 *    verifier with a nonzero cookie that does not match answers BAD_COOKIE
 *    (zero is accepted, as many clients send it);
 *  - a failure carries the directory's attributes when it was resolved;
 *  - cookies on the wire are below 2^63 (see "cookies" below).
 * A page is bounded by count (READDIR) or maxcount (READDIRPLUS, with the
 * reply status counted too), and for READDIRPLUS also by dircount (bytes of
 * fileid + name + cookie). "." carries the directory's own handle; ".."
 * carries no handle or attributes (the client looks it up, and LOOKUP keeps
 * it inside the export).
 * Thread: worker. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"

/* Fixed part of an encoded READDIR(PLUS)3resok: status, post_op_attr,
 * verifier (the head), then end-of-list marker and eof (the tail). */
#define DIR_HEAD (4 + 4 + NFS_FATTR3_XDR + 8)
#define DIR_TAIL (4 + 4)

struct dir_page {
    struct nfs_req *r;
    bool plus;
    uint8_t *p, *end; /* write position; end leaves room for the tail */
    size_t dbudget;   /* READDIRPLUS: dircount bytes left */
    unsigned n;       /* entries encoded */
};

/* ---- cookies ----
 * The core's entry cookies are 2^63 and above (CORE_COOKIE_MIN..MAX, core.h).
 * A Linux client uses a cookie as the directory offset (telldir, seekdir,
 * getdents' d_off), a signed value: with the top bit set, seekdir back into a
 * directory fails with EINVAL. So on the wire every cookie is below 2^63:
 * 0, 1 ("."), 2 ("..") as the core's, and an entry's core cookie c as
 * c - CORE_COOKIE_MIN + WIRE_ENTRY_MIN, which keeps their order. A cookie of
 * 2^63 or more from a client is one handed out before this encoding (a
 * client that read the directory before an upgrade): it is the core's own
 * value, taken as is, so that client resumes where it stopped. */
#define WIRE_ENTRY_MIN 3u

static uint64_t cookie_to_wire(uint64_t core)
{
    return core < CORE_COOKIE_MIN ? core : core - CORE_COOKIE_MIN + WIRE_ENTRY_MIN;
}

static uint64_t cookie_from_wire(uint64_t wire)
{
    if (wire < WIRE_ENTRY_MIN || wire >= CORE_COOKIE_MIN)
        return wire;
    return wire - WIRE_ENTRY_MIN + CORE_COOKIE_MIN;
}

static size_t pad4(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

static bool is_dotdot(const struct core_dirent *e)
{
    return e->namelen == 2 && e->name[0] == '.' && e->name[1] == '.';
}

static int dir_entry(void *arg, const struct core_dirent *e)
{
    struct dir_page *pg = arg;
    if (e->cookie > CORE_COOKIE_MAX) {
        /* Only in a store made before the core kept cookies at most
         * CORE_COOKIE_MAX (a 3 in 2^63 chance per entry): no wire cookie
         * below 2^63 is left for it. Renaming the entry gives it one. */
        srv_log_limited(ERROR, NFS, "req=%08x tenant=%u directory entry %.*s (inode %llu) has "
                        "cookie %llu, which NFS cannot express: left out of the listing (rename "
                        "it to list it)", pg->r->call.xid, pg->r->p.tenant, (int)e->namelen,
                        e->name, (unsigned long long)e->ino, (unsigned long long)e->cookie);
        return 0;
    }
    size_t npad = pad4(e->namelen);
    size_t dsz = 8 + 4 + npad + 8; /* fileid, name, cookie */
    bool full = pg->plus && e->attr && !is_dotdot(e);
    size_t sz = 4 + dsz;
    if (pg->plus)
        sz += 4 + (full ? NFS_FATTR3_XDR : 0) + 4 + (full ? 4 + NFS_FH_LEN : 0);
    if (sz > (size_t)(pg->end - pg->p) || (pg->plus && dsz > pg->dbudget))
        return 1;
    uint8_t *p = nfs_xdr_put32(pg->p, 1); /* value follows */
    p = nfs_xdr_put64(p, e->ino);
    p = nfs_xdr_put32(p, (uint32_t)e->namelen);
    memcpy(p, e->name, e->namelen);
    memset(p + e->namelen, 0, npad - e->namelen);
    p = nfs_xdr_put64(p + npad, cookie_to_wire(e->cookie));
    if (pg->plus) {
        p = nfs_xdr_put32(p, full); /* name_attributes */
        if (full)
            p = nfs_attr_encode(pg->r, e->attr, p);
        p = nfs_xdr_put32(p, full); /* name_handle */
        if (full) {
            p = nfs_xdr_put32(p, NFS_FH_LEN);
            nfs_req_fh_put(pg->r, e->attr, p);
            p += NFS_FH_LEN;
        }
        pg->dbudget -= dsz;
    }
    pg->p = p;
    pg->n++;
    return 0;
}

/* A failure reply: @p st and the directory's attributes when @p dir is set. */
static void dir_fail(struct nfs_req *r, struct nfs_dirres *out, nfsstat3 st,
                     const struct core_attr *dir)
{
    if (out->buf != out->fail)
        free(out->buf);
    out->status = st;
    uint8_t *p = nfs_xdr_put32(out->fail, (uint32_t)st);
    p = nfs_xdr_put32(p, dir != NULL);
    if (dir)
        p = nfs_attr_encode(r, dir, p);
    out->buf = out->fail;
    out->len = (size_t)(p - out->fail);
}

int nfs_dir_page(struct nfs_req *r, const nfs_fh3 *dirfh, uint64_t cookie,
                 const char cookieverf[NFS3_COOKIEVERFSIZE], uint32_t count, uint32_t dircount,
                 bool plus, struct nfs_dirres *out)
{
    struct core_attr dir;
    struct dir_page pg = {.r = r, .plus = plus, .dbudget = dircount};
    uint64_t dino, verf = 0, cverf;
    uint8_t *buf = NULL;
    bool eof = false;
    int rc = 0;

    nfsstat3 st = nfs_req_fh(r, dirfh, &dino, &dir);
    if (st != NFS3_OK) {
        dir_fail(r, out, st, NULL);
        return NFS_REQ_OK;
    }
    if (count > NFS_IO_MAX)
        count = NFS_IO_MAX;
    if (dir.type != CORE_DIR) {
        rc = -ENOTDIR;
        goto out;
    }
    if (count <= DIR_HEAD + DIR_TAIL || (plus && dircount == 0)) {
        dir_fail(r, out, NFS3ERR_TOOSMALL, &dir);
        return NFS_REQ_OK;
    }
    buf = malloc(count);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    out->buf = buf;
    pg.p = buf + DIR_HEAD;
    pg.end = buf + count - DIR_TAIL;
    rc = core_readdir(r->srv->core, &r->p, dino, cookie_from_wire(cookie), plus, dir_entry, &pg,
                      &eof, &verf);
    memcpy(&cverf, cookieverf, sizeof(cverf));
    if (rc == 0 && cookie != 0 && cverf != 0 && cverf != verf)
        rc = SRV_EBADCOOKIE;
    if (rc == 0 && pg.n == 0 && !eof) {
        dir_fail(r, out, NFS3ERR_TOOSMALL, &dir);
        return NFS_REQ_OK;
    }
out:
    if (rc) {
        dir_fail(r, out, nfs_req_status(r, rc), &dir);
        return NFS_REQ_OK;
    }
    uint8_t *p = nfs_xdr_put32(buf, NFS3_OK);
    p = nfs_xdr_put32(p, 1);
    p = nfs_attr_encode(r, &dir, p);
    memcpy(p, &verf, NFS3_COOKIEVERFSIZE);
    p = nfs_xdr_put32(pg.p, 0); /* no more entries */
    p = nfs_xdr_put32(p, eof);
    out->status = NFS3_OK;
    out->len = (size_t)(p - buf);
    return NFS_REQ_OK;
}

bool_t xdr_nfs_dirres(XDR *x, struct nfs_dirres *r)
{
    switch (x->x_op) {
    case XDR_ENCODE:
        if (!r->buf) {
            /* a result the procedure never filled (a call QoS refused) */
            enum_t st = (enum_t)r->status;
            u_int no = 0;
            return xdr_enum(x, &st) && xdr_u_int(x, &no);
        }
        return r->len <= UINT_MAX && XDR_PUTBYTES(x, (char *)r->buf, (u_int)r->len);
    case XDR_FREE:
        if (r->buf != r->fail)
            free(r->buf);
        r->buf = NULL;
        r->len = 0;
        return TRUE;
    default:
        return FALSE; /* never decoded by the server */
    }
}
