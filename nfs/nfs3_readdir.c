/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READDIR (RFC 1813 3.3.16): one page of directory entries.
 * The core's cookies are stable across calls and restarts; a page holds as
 * many entries as fit in `count` bytes of encoded reply. The cookie verifier
 * is the core's per-directory verifier: a nonzero verifier that does not
 * match answers BAD_COOKIE (zero is accepted, as many clients send it).
 * Status: NFS3_OK; NFS3ERR_NOTDIR; NFS3ERR_ACCES; NFS3ERR_BAD_COOKIE;
 * NFS3ERR_TOOSMALL (not even one entry fits); NFS3ERR_STALE,
 * NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"

/* Fixed part of an encoded READDIR3resok: status, post_op_attr, verifier,
 * end-of-list marker, eof. */
#define RD_OVERHEAD (4 + 4 + 84 + 8 + 4 + 4)

struct rd_state {
    size_t budget;
    entry3 *head, **tail;
    unsigned n;
};

static size_t pad4(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

static int rd_cb(void *arg, const struct core_dirent *e)
{
    struct rd_state *st = arg;
    size_t sz = 4 + 8 + 4 + pad4(e->namelen) + 8;
    if (sz > st->budget)
        return 1;
    entry3 *en = calloc(1, sizeof(*en));
    char *name = en ? malloc(e->namelen + 1) : NULL;
    if (!name) {
        free(en);
        return 1;
    }
    memcpy(name, e->name, e->namelen);
    name[e->namelen] = '\0';
    en->fileid = e->ino;
    en->name = name;
    en->cookie = e->cookie;
    *st->tail = en;
    st->tail = &en->nextentry;
    st->budget -= sz;
    st->n++;
    return 0;
}

static void rd_free(entry3 *e)
{
    while (e) {
        entry3 *n = e->nextentry;
        free(e->name);
        free(e);
        e = n;
    }
}

int nfs3_readdir(struct nfs_req *r, void *args, void *res)
{
    READDIR3args *a = args;
    READDIR3res *o = res;
    struct core_attr dir;
    struct rd_state st = {0};
    uint64_t dino, verf = 0, cverf;
    bool eof = false;
    int rc;

    o->status = nfs_req_fh(r, &a->dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    st.tail = &st.head;
    uint32_t count = a->count < NFS_IO_MAX ? a->count : NFS_IO_MAX;
    if (dir.type != CORE_DIR) {
        rc = -ENOTDIR;
        goto out;
    }
    if (count <= RD_OVERHEAD) {
        o->status = NFS3ERR_TOOSMALL;
        nfs_attr_post(r, &dir, &o->READDIR3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
    st.budget = count - RD_OVERHEAD;
    rc = core_readdir(r->srv->core, &r->p, dino, a->cookie, false, rd_cb, &st, &eof, &verf);
    memcpy(&cverf, a->cookieverf, sizeof(cverf));
    if (rc == 0 && a->cookie != 0 && cverf != 0 && cverf != verf)
        rc = SRV_EBADCOOKIE;
    if (rc == 0 && st.n == 0 && !eof) {
        rd_free(st.head);
        o->status = NFS3ERR_TOOSMALL;
        nfs_attr_post(r, &dir, &o->READDIR3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
out:
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        rd_free(st.head);
        nfs_attr_post(r, &dir, &o->READDIR3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
    READDIR3resok *ok = &o->READDIR3res_u.resok;
    nfs_attr_post(r, &dir, &ok->dir_attributes);
    memcpy(ok->cookieverf, &verf, NFS3_COOKIEVERFSIZE);
    ok->reply.entries = st.head;
    ok->reply.eof = eof;
    return NFS_REQ_OK;
}
