/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READDIRPLUS (RFC 1813 3.3.17): directory entries with their
 * attributes and handles. A page is bounded twice, as the RFC says: by
 * dircount (bytes of fileid + name + cookie) and by maxcount (the whole
 * encoded reply). "." carries the directory's own handle; ".." carries no
 * handle or attributes (the client looks it up, and LOOKUP keeps it inside
 * the export). Cookies and verifiers as in READDIR.
 * Status: NFS3_OK; NFS3ERR_NOTDIR; NFS3ERR_ACCES; NFS3ERR_BAD_COOKIE;
 * NFS3ERR_TOOSMALL; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"

#define RDP_OVERHEAD (4 + 4 + 84 + 8 + 4 + 4)

struct rdp_state {
    struct nfs_req *r;
    size_t budget, dbudget;
    entryplus3 *head, **tail;
    unsigned n;
};

static size_t pad4(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

static bool is_dotdot(const struct core_dirent *e)
{
    return e->namelen == 2 && e->name[0] == '.' && e->name[1] == '.';
}

static int rdp_cb(void *arg, const struct core_dirent *e)
{
    struct rdp_state *st = arg;
    bool full = e->attr && !is_dotdot(e);
    size_t dsz = 8 + 4 + pad4(e->namelen) + 8;
    size_t sz = 4 + dsz + 4 + (full ? 84 : 0) + 4 + (full ? 4 + NFS_FH_LEN : 0);
    if (sz > st->budget || dsz > st->dbudget)
        return 1;
    entryplus3 *en = calloc(1, sizeof(*en));
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
    if (full && nfs_req_mkfh(st->r, e->attr, &en->name_handle.post_op_fh3_u.handle) == 0) {
        en->name_handle.handle_follows = TRUE;
        nfs_attr_post(st->r, e->attr, &en->name_attributes);
    }
    *st->tail = en;
    st->tail = &en->nextentry;
    st->budget -= sz;
    st->dbudget -= dsz;
    st->n++;
    return 0;
}

static void rdp_free(entryplus3 *e)
{
    while (e) {
        entryplus3 *n = e->nextentry;
        free(e->name);
        free(e->name_handle.post_op_fh3_u.handle.data.data_val);
        free(e);
        e = n;
    }
}

int nfs3_readdirplus(struct nfs_req *r, void *args, void *res)
{
    READDIRPLUS3args *a = args;
    READDIRPLUS3res *o = res;
    struct core_attr dir;
    struct rdp_state st = {0};
    uint64_t dino, verf = 0, cverf;
    bool eof = false;
    int rc;

    o->status = nfs_req_fh(r, &a->dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    st.r = r;
    st.tail = &st.head;
    uint32_t maxcount = a->maxcount < NFS_IO_MAX ? a->maxcount : NFS_IO_MAX;
    if (dir.type != CORE_DIR) {
        rc = -ENOTDIR;
        goto out;
    }
    if (maxcount <= RDP_OVERHEAD || a->dircount == 0) {
        o->status = NFS3ERR_TOOSMALL;
        nfs_attr_post(r, &dir, &o->READDIRPLUS3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
    st.budget = maxcount - RDP_OVERHEAD;
    st.dbudget = a->dircount;
    rc = core_readdir(r->srv->core, &r->p, dino, a->cookie, true, rdp_cb, &st, &eof, &verf);
    memcpy(&cverf, a->cookieverf, sizeof(cverf));
    if (rc == 0 && a->cookie != 0 && cverf != 0 && cverf != verf)
        rc = SRV_EBADCOOKIE;
    if (rc == 0 && st.n == 0 && !eof) {
        rdp_free(st.head);
        o->status = NFS3ERR_TOOSMALL;
        nfs_attr_post(r, &dir, &o->READDIRPLUS3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
out:
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        rdp_free(st.head);
        nfs_attr_post(r, &dir, &o->READDIRPLUS3res_u.resfail.dir_attributes);
        return NFS_REQ_OK;
    }
    READDIRPLUS3resok *ok = &o->READDIRPLUS3res_u.resok;
    nfs_attr_post(r, &dir, &ok->dir_attributes);
    memcpy(ok->cookieverf, &verf, NFS3_COOKIEVERFSIZE);
    ok->reply.entries = st.head;
    ok->reply.eof = eof;
    return NFS_REQ_OK;
}
