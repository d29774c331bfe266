/* SPDX-License-Identifier: Apache-2.0
 * core_data: file data: reads, writes, truncation.
 *
 * Layout: a file is either inline (META_I_INLINE: its first bytes live in the
 * inline DBI, at most inline_max of them; the rest up to size reads as zeros)
 * or a list of extents keyed by file offset (meta_schema.h). Extents never
 * overlap; bytes no extent covers read as zeros (holes). New data lands in
 * fresh extents cut on the 1 MiB grid of file offsets (STORE_EXTENT_MAX).
 *
 * Writes are copy-on-write: an existing extent the write touches is rewritten
 * whole (read, patched) into a NEW extent that replaces it in the same txn
 * that frees the old one, so a crash leaves either the old or the new bytes.
 * The data is written and synced on the calling thread (concurrent syncs
 * coalesce in the store, and run while the writer commits other batches);
 * the writer op then checks that the extents it replaces are still the ones
 * it read (optimistic concurrency; -EAGAIN internally, retried), so data is
 * always durable before the metadata that points at it commits.
 *
 * Stability: no write is buffered in memory. DATA_SYNC/FILE_SYNC writes are
 * durable on return (committed = CORE_FILE_SYNC). An UNSTABLE write returns
 * once its metadata commit is done (visible to every reader, and it survives a
 * crash of the process) but before that commit is synced (committed =
 * CORE_UNSTABLE); core_commit waits for the next durable group commit, which
 * covers it. Its data is synced before the metadata commits either way, so
 * no commit ever points at unsynced data.
 *
 * Truncation is metadata only: an extent cut by a truncate keeps its stored
 * bytes and CRC, and only its visible length (vlen) shrinks.
 * Thread: any. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define WRITE_RETRIES 32

int core__extent_get(const MDB_val *v, struct store_extent *e, uint32_t *vlen)
{
    struct meta_extent me;
    if (v->mv_size != sizeof(me))
        return SRV_ECORRUPT;
    memcpy(&me, v->mv_data, sizeof(me));
    e->dev = me.dev;
    e->len = me.len;
    e->off = me.off;
    e->crc = me.crc;
    *vlen = me.vlen;
    if (me.vlen > me.len)
        return SRV_ECORRUPT;
    return 0;
}

struct fext {
    uint64_t foff;
    uint32_t vlen;
    struct store_extent e;
    uint32_t nb;                   /* block CRCs (0 = none loaded / known) */
    uint32_t bcrc[META_BCRC_MAX];
};

struct fext_list {
    struct fext *v;
    size_t n, cap;
};

static int fext_push(struct fext_list *l, const struct fext *x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct fext *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = *x;
    return 0;
}

static void xkey(uint8_t *k, uint64_t ino, uint64_t foff)
{
    meta_be64_put(k, ino);
    meta_be64_put(k + 8, foff);
}

/* Extents of @p ino overlapping [lo, hi), in file order. */
static int overlaps(struct core *c, MDB_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                    struct fext_list *out, bool want_crc)
{
    MDB_cursor *cur;
    MDB_val k, v;
    uint8_t sk[16];
    uint64_t start = lo;
    int rc;

    out->n = 0;
    if (hi <= lo)
        return 0;
    rc = mdb_cursor_open(t, core__dbi(c, META_DBI_EXTENTS), &cur);
    if (rc)
        return meta_err(rc);
    xkey(sk, ino, lo);
    k.mv_data = sk;
    k.mv_size = 16;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    bool exact = rc == 0 && k.mv_size == 16 && memcmp(k.mv_data, sk, 16) == 0;
    if (!exact && (rc == 0 || rc == MDB_NOTFOUND)) {
        int prc = mdb_cursor_get(cur, &k, &v, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
        if (prc == 0 && k.mv_size == 16 && meta_be64_get(k.mv_data) == ino) {
            struct store_extent e;
            uint32_t vlen;
            uint64_t foff = meta_be64_get((uint8_t *)k.mv_data + 8);
            if (core__extent_get(&v, &e, &vlen) == 0 && foff < lo && foff + vlen > lo)
                start = foff;
        }
    } else if (rc != 0) {
        mdb_cursor_close(cur);
        return meta_err(rc);
    }
    xkey(sk, ino, start);
    k.mv_data = sk;
    k.mv_size = 16;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 16 || meta_be64_get(k.mv_data) != ino)
            break;
        struct fext x;
        x.foff = meta_be64_get((uint8_t *)k.mv_data + 8);
        if (x.foff >= hi)
            break;
        rc = core__extent_get(&v, &x.e, &x.vlen);
        if (rc)
            break;
        if (x.foff + x.vlen <= lo)
            continue;
        x.nb = want_crc ? core__bcrc_get(c, t, &x.e, x.bcrc) : 0;
        rc = fext_push(out, &x);
        if (rc)
            break;
    }
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND)
        rc = 0;
    else if (rc > 0)
        rc = meta_err(rc);
    return rc;
}

static int extent_put(struct core *c, MDB_txn *t, uint64_t ino, const struct fext *x)
{
    uint8_t k[16];
    struct meta_extent me = {.dev = x->e.dev, .len = x->e.len, .off = x->e.off, .crc = x->e.crc,
                             .vlen = x->vlen};
    xkey(k, ino, x->foff);
    return meta_put(t, core__dbi(c, META_DBI_EXTENTS), k, 16, &me, sizeof(me), 0);
}

static int extent_del(struct core *c, MDB_txn *t, uint64_t ino, uint64_t foff)
{
    uint8_t k[16];
    xkey(k, ino, foff);
    return meta_del(t, core__dbi(c, META_DBI_EXTENTS), k, 16);
}

static int inline_get(struct core *c, MDB_txn *t, uint64_t ino, MDB_val *v)
{
    uint8_t k[8];
    meta_be64_put(k, ino);
    int rc = meta_get(t, core__dbi(c, META_DBI_INLINE), k, 8, v);
    if (rc == -ENOENT) {
        v->mv_size = 0;
        v->mv_data = NULL;
        return 0;
    }
    return rc;
}

static int inline_put(struct core *c, MDB_txn *t, uint64_t ino, const void *buf, size_t len)
{
    uint8_t k[8];
    meta_be64_put(k, ino);
    if (len == 0) {
        int rc = meta_del(t, core__dbi(c, META_DBI_INLINE), k, 8);
        return rc == -ENOENT ? 0 : rc;
    }
    return meta_put(t, core__dbi(c, META_DBI_INLINE), k, 8, buf, len, 0);
}

/* Forget the S3 ETag of a file changed through the POSIX view (recomputed lazily). */
static int etag_forget(struct core *c, MDB_txn *t, uint64_t ino)
{
    char etag[CORE_ETAG_MAX + 1];
    void *meta = NULL;
    size_t ml = 0;
    int rc = core__objmeta_get(c, t, ino, etag, &meta, &ml);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && etag[0])
        rc = core__objmeta_put(c, t, ino, "", meta, ml);
    free(meta);
    return rc;
}

/* ---- truncate (inside setattr's op) ---- */

int core__truncate_t(struct core *c, MDB_txn *t, uint64_t ino, struct meta_inode *r,
                     uint64_t newsize)
{
    int64_t freed = 0;
    int rc = 0;
    if (r->flags & META_I_INLINE) {
        MDB_val v;
        rc = inline_get(c, t, ino, &v);
        if (rc)
            return rc;
        if (newsize < v.mv_size) {
            void *copy = malloc(newsize ? newsize : 1);
            if (!copy)
                return -ENOMEM;
            memcpy(copy, v.mv_data, newsize);
            freed = (int64_t)(v.mv_size - newsize);
            rc = inline_put(c, t, ino, copy, newsize);
            free(copy);
        }
    } else if (newsize < r->size) {
        struct fext_list l = {0};
        rc = overlaps(c, t, ino, newsize, UINT64_MAX, &l, false);
        for (size_t i = 0; i < l.n && rc == 0; i++) {
            struct fext *x = &l.v[i];
            if (x->foff >= newsize) {
                rc = core__extent_free(c, t, &x->e);
                if (rc == 0)
                    rc = extent_del(c, t, ino, x->foff);
                freed += x->e.len;
            } else {
                x->vlen = (uint32_t)(newsize - x->foff);
                rc = extent_put(c, t, ino, x);
            }
        }
        free(l.v);
        if (rc == 0 && newsize == 0) {
            /* an empty file starts inline again */
            struct fext_list rest = {0};
            rc = overlaps(c, t, ino, 0, UINT64_MAX, &rest, false);
            if (rc == 0 && rest.n == 0)
                r->flags |= META_I_INLINE;
            free(rest.v);
        }
    }
    if (rc)
        return rc;
    if (freed) {
        r->used = r->used > (uint64_t)freed ? r->used - (uint64_t)freed : 0;
        rc = core__usage_charge(c, t, r->tenant, r->parent, -freed, 0, false);
        if (rc)
            return rc;
    }
    r->size = newsize;
    return etag_forget(c, t, ino);
}

/* ---- read ---- */

int core_read(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
              void *buf, size_t len, size_t *n, bool *eof)
{
    MDB_txn *t = NULL;
    struct meta_inode r;
    struct fext_list l = {0};
    uint64_t token = store_read_begin(c->store);
    uint64_t epoch = core__cache_epoch(c);
    uint64_t end;
    int rc;

    *n = 0;
    *eof = false;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        goto out;
    rc = core__ino_get_p(c, t, p, ino, 0, &r);
    if (rc)
        goto out;
    if (r.type == CORE_DIR) {
        rc = -EISDIR;
        goto out;
    }
    if (r.type != CORE_REG) {
        rc = -EINVAL;
        goto out;
    }
    if (p->uid != r.uid && (rc = core__perm(p, &r, CORE_MAY_R)) != 0)
        goto out;
    if (off >= r.size) {
        *eof = true;
        goto out;
    }
    if (len == 0)
        goto out;
    end = r.size - off < len ? r.size : off + len;
    memset(buf, 0, end - off);
    if (r.flags & META_I_INLINE) {
        MDB_val v;
        rc = inline_get(c, t, ino, &v);
        if (rc)
            goto out;
        if (off < v.mv_size) {
            size_t m = (end < v.mv_size ? end : v.mv_size) - off;
            memcpy(buf, (const char *)v.mv_data + off, m);
        }
    } else {
        rc = overlaps(c, t, ino, off, end, &l, true);
        if (rc)
            goto out;
    }
    meta_rtxn_end(t);
    t = NULL;
    for (size_t i = 0; i < l.n; i++) {
        struct fext *x = &l.v[i];
        uint64_t s = x->foff > off ? x->foff : off;
        uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
        if (e <= s)
            continue;
        rc = core__extent_pread(c, &x->e, x->bcrc, x->nb, (uint32_t)(s - x->foff),
                                (char *)buf + (s - off), (size_t)(e - s), epoch);
        if (rc) {
            srv_log(ERROR, STORE, "read ino=%llu off=%llu: %s", (unsigned long long)ino,
                    (unsigned long long)s, srv_strerror(rc));
            goto out;
        }
    }
    *n = (size_t)(end - off);
    *eof = end >= r.size;
    atomic_fetch_add(&c->bytes_read, *n);
out:
    meta_rtxn_end(t);
    store_read_end(c->store, token);
    free(l.v);
    return rc;
}

/* ---- write ---- */

enum wmode { W_INLINE, W_CONVERT, W_EXTENTS };

struct write_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t ino;
    uint64_t off;
    const void *buf;
    size_t len;
    enum wmode mode;
    uint64_t exp_change;
    uint64_t lo, hi;          /* range the new extents cover */
    uint64_t epoch;           /* cache epoch before the extent map was read */
    struct fext_list olds;    /* extents replaced */
    struct fext_list news;    /* extents written */
    struct core_attr *pre, *post;
};

static int write_fn(MDB_txn *t, void *arg)
{
    struct write_op *a = arg;
    struct core *c = a->c;
    struct meta_inode r;
    int64_t delta = 0;
    uint64_t end = a->off + a->len;
    int rc = core__ino_get_p(c, t, a->p, a->ino, 0, &r);
    if (rc)
        return rc;
    if (r.type != CORE_REG)
        return r.type == CORE_DIR ? -EISDIR : -EINVAL;
    if (a->pre)
        core__attr_fill(&r, a->ino, a->pre);
    if (a->mode == W_INLINE) {
        MDB_val v;
        if (!(r.flags & META_I_INLINE))
            return -EAGAIN;
        rc = inline_get(c, t, a->ino, &v);
        if (rc)
            return rc;
        size_t nl = end > v.mv_size ? (size_t)end : v.mv_size;
        char *nb = calloc(1, nl ? nl : 1);
        if (!nb)
            return -ENOMEM;
        if (v.mv_size)
            memcpy(nb, v.mv_data, v.mv_size);
        memcpy(nb + a->off, a->buf, a->len);
        delta = (int64_t)nl - (int64_t)v.mv_size;
        rc = inline_put(c, t, a->ino, nb, nl);
        free(nb);
        if (rc)
            return rc;
    } else {
        if (a->mode == W_CONVERT) {
            MDB_val v;
            if (!(r.flags & META_I_INLINE) || r.change != a->exp_change)
                return -EAGAIN;
            rc = inline_get(c, t, a->ino, &v);
            if (rc)
                return rc;
            delta -= (int64_t)v.mv_size;
            rc = inline_put(c, t, a->ino, NULL, 0);
            if (rc)
                return rc;
            r.flags &= (uint16_t)~META_I_INLINE;
        } else {
            struct fext_list cur = {0};
            if (r.flags & META_I_INLINE)
                return -EAGAIN;
            rc = overlaps(c, t, a->ino, a->lo, a->hi, &cur, false);
            if (rc == 0 && cur.n != a->olds.n)
                rc = -EAGAIN;
            for (size_t i = 0; rc == 0 && i < cur.n; i++) {
                const struct fext *x = &cur.v[i], *y = &a->olds.v[i];
                if (x->foff != y->foff || x->vlen != y->vlen || x->e.dev != y->e.dev ||
                    x->e.off != y->e.off)
                    rc = -EAGAIN;
            }
            free(cur.v);
            if (rc)
                return rc;
            for (size_t i = 0; i < a->olds.n; i++) {
                struct fext *x = &a->olds.v[i];
                rc = core__extent_free(c, t, &x->e);
                if (rc == 0)
                    rc = extent_del(c, t, a->ino, x->foff);
                if (rc)
                    return rc;
                delta -= x->e.len;
            }
        }
        for (size_t i = 0; i < a->news.n; i++) {
            struct fext *x = &a->news.v[i];
            rc = core__extent_use(c, t, &x->e, x->bcrc, x->nb);
            if (rc == 0)
                rc = extent_put(c, t, a->ino, x);
            if (rc)
                return rc;
            delta += x->e.len;
        }
    }
    rc = core__usage_charge(c, t, r.tenant, r.parent, delta, 0, delta > 0);
    if (rc)
        return rc;
    r.used = (uint64_t)((int64_t)r.used + delta);
    if (end > r.size)
        r.size = end;
    core__touch(&r, true, true);
    rc = core__ino_put(c, t, a->ino, &r);
    if (rc == 0)
        rc = etag_forget(c, t, a->ino);
    if (rc == 0 && a->post)
        core__attr_fill(&r, a->ino, a->post);
    return rc;
}

/* Add new extents covering [s, e) (split on the 1 MiB grid) with content
 * from @p base (bytes of [bs, bs + blen)) overlaid by the write. */
static int add_new(struct core *c, struct write_op *a, uint64_t s, uint64_t e, const void *base,
                   uint64_t bs, size_t blen, char *tmp)
{
    while (s < e) {
        uint64_t g = (s / STORE_EXTENT_MAX + 1) * STORE_EXTENT_MAX;
        uint64_t pe = e < g ? e : g;
        uint32_t n = (uint32_t)(pe - s);
        struct fext x = {.foff = s, .vlen = n};
        memset(tmp, 0, n);
        if (base) {
            uint64_t os = s > bs ? s : bs, oe = pe < bs + blen ? pe : bs + blen;
            if (oe > os)
                memcpy(tmp + (os - s), (const char *)base + (os - bs), oe - os);
        }
        uint64_t ws = s > a->off ? s : a->off, we = pe < a->off + a->len ? pe : a->off + a->len;
        if (we > ws)
            memcpy(tmp + (ws - s), (const char *)a->buf + (ws - a->off), we - ws);
        int rc = store_alloc_near(c->store, a->news.n ? &a->news.v[a->news.n - 1].e : NULL, n,
                                  &x.e);
        if (rc)
            return rc;
        core__cache_invalidate(c, &x.e); /* space reused: no stale cached bytes */
        rc = store_write(c->store, &x.e, tmp, n);
        if (rc == 0) {
            x.nb = core__bcrc_compute(tmp, n, x.bcrc);
            rc = fext_push(&a->news, &x);
        }
        if (rc) {
            store_unreserve(c->store, &x.e);
            return rc;
        }
        s = pe;
    }
    return 0;
}

static void news_release(struct core *c, struct write_op *a)
{
    for (size_t i = 0; i < a->news.n; i++)
        store_unreserve(c->store, &a->news.v[i].e);
    a->news.n = 0;
}

/* Plan and write the new extents (caller thread). */
static int write_prepare(struct core *c, struct write_op *a, MDB_txn *t, struct meta_inode *r,
                         char *tmp)
{
    uint64_t end = a->off + a->len;
    int rc;
    a->news.n = 0;
    a->olds.n = 0;
    if (r->flags & META_I_INLINE) {
        if (end <= c->cfg.inline_max) {
            a->mode = W_INLINE;
            return 0;
        }
        MDB_val v;
        rc = inline_get(c, t, a->ino, &v);
        if (rc)
            return rc;
        a->mode = W_CONVERT;
        a->exp_change = r->change;
        uint64_t L = v.mv_size;
        a->lo = L ? 0 : a->off;
        a->hi = end;
        if (L && L < a->off) {
            rc = add_new(c, a, 0, L, v.mv_data, 0, L, tmp);
            if (rc == 0)
                rc = add_new(c, a, a->off, end, NULL, 0, 0, tmp);
        } else {
            rc = add_new(c, a, a->lo, end > L ? end : L, v.mv_data, 0, L, tmp);
        }
        return rc;
    }
    a->mode = W_EXTENTS;
    rc = overlaps(c, t, a->ino, a->off, end, &a->olds, true);
    if (rc)
        return rc;
    a->lo = a->off;
    a->hi = end;
    uint64_t pos = a->off;
    char *old = NULL;
    for (size_t i = 0; i <= a->olds.n; i++) {
        uint64_t gs = i < a->olds.n ? a->olds.v[i].foff : end;
        if (gs > pos) {
            rc = add_new(c, a, pos, gs, NULL, 0, 0, tmp);
            if (rc)
                break;
        }
        if (i == a->olds.n)
            break;
        struct fext *o = &a->olds.v[i];
        uint64_t oe = o->foff + o->vlen;
        if (o->foff < a->lo)
            a->lo = o->foff;
        if (oe > a->hi)
            a->hi = oe;
        bool covered = o->foff >= a->off && oe <= end;
        if (!covered) {
            if (!old && !(old = malloc(STORE_EXTENT_MAX))) {
                rc = -ENOMEM;
                break;
            }
            rc = core__extent_pread(c, &o->e, o->bcrc, o->nb, 0, old, o->vlen, a->epoch);
            if (rc) {
                srv_log(ERROR, STORE, "write ino=%llu: reading extent at %llu: %s",
                        (unsigned long long)a->ino, (unsigned long long)o->foff,
                        srv_strerror(rc));
                break;
            }
        }
        rc = add_new(c, a, o->foff, oe, covered ? NULL : old, o->foff, o->vlen, tmp);
        if (rc)
            break;
        pos = oe;
    }
    free(old);
    return rc;
}

int core_write(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
               const void *buf, size_t len, enum core_stable stable, enum core_stable *committed,
               struct core_attr *pre, struct core_attr *post)
{
    struct write_op a = {.c = c, .p = p, .ino = ino, .off = off, .buf = buf, .len = len,
                         .pre = pre, .post = post};
    char *tmp = NULL;
    int rc = 0;
    if (committed)
        *committed = stable == CORE_UNSTABLE ? CORE_UNSTABLE : CORE_FILE_SYNC;
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    if (off > CORE_FILE_MAX || len > CORE_FILE_MAX - off)
        return -EFBIG;
    pthread_mutex_t *wl = &c->wlock[ino % CORE_WLOCKS];
    for (int attempt = 0; attempt < WRITE_RETRIES; attempt++) {
        MDB_txn *t = NULL;
        struct meta_inode r;
        /* after losing a race twice, serialize with the other losers of this inode */
        bool locked = attempt >= 2;
        if (locked)
            pthread_mutex_lock(wl);
        uint64_t token = store_read_begin(c->store);
        a.epoch = core__cache_epoch(c);
        rc = meta_rtxn_begin(c->meta, &t);
        if (rc == 0)
            rc = core__ino_get_p(c, t, p, ino, 0, &r);
        if (rc == 0 && r.type != CORE_REG)
            rc = r.type == CORE_DIR ? -EISDIR : -EINVAL;
        if (rc == 0 && p->uid != r.uid)
            rc = core__perm(p, &r, CORE_MAY_W);
        if (rc == 0 && len == 0) {
            /* a zero-length write only reports attributes */
            if (pre)
                core__attr_fill(&r, ino, pre);
            if (post)
                core__attr_fill(&r, ino, post);
            meta_rtxn_end(t);
            store_read_end(c->store, token);
            if (locked)
                pthread_mutex_unlock(wl);
            break;
        }
        if (rc == 0 && !tmp && !(tmp = malloc(STORE_EXTENT_MAX)))
            rc = -ENOMEM;
        if (rc == 0)
            rc = write_prepare(c, &a, t, &r, tmp);
        meta_rtxn_end(t);
        /* sync the data on this thread (concurrent syncs coalesce in the store)
         * so the writer's commit never waits for a data flush */
        if (rc == 0 && a.mode != W_INLINE)
            rc = store_sync(c->store);
        if (rc == 0)
            rc = meta_submit(c->meta, write_fn, &a, stable == CORE_UNSTABLE ? META_OP_EARLY : 0);
        store_read_end(c->store, token);
        if (locked)
            pthread_mutex_unlock(wl);
        if (rc)
            news_release(c, &a);
        if (rc != -EAGAIN)
            break;
    }
    if (rc == -EAGAIN) {
        srv_log(WARN, META, "write ino=%llu: gave up after %d conflicting retries",
                (unsigned long long)ino, WRITE_RETRIES);
        rc = -EIO;
    }
    if (rc == 0)
        atomic_fetch_add(&c->bytes_written, len);
    free(tmp);
    free(a.olds.v);
    free(a.news.v);
    return rc;
}

int core_commit(struct core *c, const struct core_principal *p, uint64_t ino)
{
    MDB_txn *t;
    struct meta_inode r;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__ino_get_p(c, t, p, ino, 0, &r);
    meta_rtxn_end(t);
    if (rc)
        return rc;
    /* UNSTABLE writes are committed already: wait until they are durable */
    return core_sync(c);
}
