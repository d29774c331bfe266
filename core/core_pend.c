/* SPDX-License-Identifier: Apache-2.0
 * core_pend: pending (uncommitted) UNSTABLE writes, kept in memory per inode
 * (the data sub-module, core_data_int.h), and usage as clients see it.
 *
 * An UNSTABLE write stores its data in fresh extents (written, not synced)
 * and records them here, as an overlay on the inode's committed extent map;
 * a small write to an inline file keeps the whole new inline content here
 * instead. Readers (core_read, attributes) see the overlay; core_commit, a
 * stable write, a setattr, core_sync/core_close, or the overlay growing past
 * CORE_PEND_INO_MAX (one inode) / CORE_PEND_TOTAL_MAX (all) flush it: the
 * data is synced, then one writer op puts the extents into the map (freeing
 * the committed extents they shadow) and updates size, times and usage. A
 * crash loses what was not flushed; its space was only reserved, so it is
 * free again after restart.
 *
 * Rules that keep this consistent:
 *  - a committed extent is either wholly shadowed by pending extents or
 *    overlaps none (a write's new extents cover every extent it overlaps);
 *  - readers take a store read token, then the pending snapshot, then their
 *    read txn: anything acknowledged before the read started is in one of the
 *    two, and a flush in between shows the same extents in both;
 *  - a pending extent that a later write replaces is released through the
 *    store's limbo (store_release), so readers that saw it finish first; one
 *    replaced while a flush carries it is left to that flush (it becomes a
 *    committed extent shadowed by the newer one, freed by the next flush);
 *  - a writer plans on a snapshot (ver, cver) and inserts only if the extents
 *    it based its data on are still the effective ones (rechecked when either
 *    version moved); a setattr (size, times) holds the record exclusively and
 *    commits the pending data in its own op;
 *  - an inode whose data is dropped (unlink, replace) has its pending data
 *    released once the dropping op committed (core__pend_reap); a flush that
 *    finds the inode gone releases it too.
 * One flush runs at a time per inode; new writes go on meanwhile. An inode
 * past CORE_PEND_INO_MAX is handed to a background flusher thread; a writer
 * flushes it itself only past four times that (the flusher cannot keep up).
 * Thread: all functions are thread-safe; none holds a lock across a
 * meta_submit, so ops may read pending records on the writer thread. */
#include "core_data_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define MD5_KEEP_MAX 1024          /* records kept for their running MD5 or their writer */
#define MD5_KEEP_MIN (1ull << 20)  /* ... of files at least this large */

static atomic_uint md5_kept; /* records kept only for their MD5 (approximate bound) */

void core__pend_init(struct core *c)
{
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        pthread_mutex_init(&c->data->pend[i].mu, NULL);
        c->data->pend[i].head = NULL;
    }
    pthread_mutex_init(&c->data->dead_mu, NULL);
    pthread_mutex_init(&c->data->fl_mu, NULL);
    pthread_cond_init(&c->data->fl_cv, NULL);
}

static void pend_destroy(struct core__pend *p)
{
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->ext.v);
    free(p->inl);
    if (p->md5ctx)
        EVP_MD_CTX_free(p->md5ctx);
    free(p);
}

void core__pend_fini(struct core *c)
{
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        struct core__pend *p = c->data->pend[i].head;
        while (p) {
            struct core__pend *n = p->next;
            for (size_t j = 0; j < p->ext.n; j++)
                store_unreserve(c->store, &p->ext.v[j].e);
            core__resv_set(c, &p->resv, 0);
            pend_destroy(p);
            p = n;
        }
        c->data->pend[i].head = NULL;
        pthread_mutex_destroy(&c->data->pend[i].mu);
    }
    pthread_mutex_destroy(&c->data->dead_mu);
    pthread_mutex_destroy(&c->data->fl_mu);
    pthread_cond_destroy(&c->data->fl_cv);
    free(c->data->dead);
    c->data->dead = NULL;
}

static struct core__pshard *shard_of(struct core *c, uint64_t ino)
{
    return &c->data->pend[(ino * 0x9e3779b97f4a7c15ull) >> 58];
}

struct core__pend *core__pend_get(struct core *c, uint64_t ino, bool create)
{
    if (!create && atomic_load(&c->data->pend_count) == 0)
        return NULL;
    struct core__pshard *s = shard_of(c, ino);
    pthread_mutex_lock(&s->mu);
    struct core__pend *p = s->head;
    while (p && p->ino != ino)
        p = p->next;
    if (!p && create && (p = calloc(1, sizeof(*p))) != NULL) {
        p->ino = ino;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        p->next = s->head;
        s->head = p;
        atomic_fetch_add(&c->data->pend_count, 1);
    }
    if (p)
        p->users++;
    pthread_mutex_unlock(&s->mu);
    return p;
}

/* Whether an unused record can go: nothing pending, no MD5 worth keeping, and no
 * writes its writer has not acknowledged yet (core_pending_writes reports them: a
 * file past CORE_MD5_INLINE_MAX has no running MD5, yet its writer is still at it
 * after a flush of our own). */
static bool pend_idle(struct core__pend *p)
{
    if (p->ext.n || p->inl || p->flushing || p->excl)
        return false;
    return p->dead || ((!p->md5ctx || p->md5_bad) && p->ver == p->acked);
}

void core__pend_put(struct core *c, struct core__pend *p)
{
    if (!p)
        return;
    struct core__pshard *s = shard_of(c, p->ino);
    pthread_mutex_lock(&s->mu);
    bool last = --p->users == 0;
    if (last) {
        pthread_mutex_lock(&p->mu);
        bool idle = pend_idle(p);
        bool md5_only = !idle && !p->ext.n && !p->inl && !p->flushing && !p->excl;
        if (md5_only && p->size < MD5_KEEP_MIN)
            idle = true; /* small files are written whole before their commit */
        if (md5_only && !idle && !p->md5_kept) {
            if (atomic_load(&md5_kept) >= MD5_KEEP_MAX) {
                idle = true;
            } else {
                p->md5_kept = true;
                atomic_fetch_add(&md5_kept, 1);
            }
        }
        pthread_mutex_unlock(&p->mu);
        if (idle) {
            struct core__pend **pp = &s->head;
            while (*pp != p)
                pp = &(*pp)->next;
            *pp = p->next;
            atomic_fetch_sub(&c->data->pend_count, 1);
            if (p->md5_kept)
                atomic_fetch_sub(&md5_kept, 1);
            core__resv_set(c, &p->resv, 0);
            pend_destroy(p);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void core__pend_release(struct core *c, struct core__fext *x)
{
    store_release(c->store, &x->e);
}

void core__pend_snap(struct core__pend *p, uint64_t lo, uint64_t hi, bool wait_excl,
                     struct core__pend_snap *s)
{
    memset(s, 0, sizeof(*s));
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    while (wait_excl && p->excl)
        pthread_cond_wait(&p->cv, &p->mu);
    s->exists = true;
    s->has_ext = p->ext.n > 0;
    s->size = p->size;
    s->mtime = p->mtime;
    s->change = p->change;
    s->ver = p->ver;
    s->cver = p->cver;
    s->tver = p->tver;
    s->data = p->ext.n || p->inl;
    s->udelta = s->data ? p->udelta : 0;
    if (p->inl && (s->inl = malloc(p->inl_len ? p->inl_len : 1)) != NULL) {
        memcpy(s->inl, p->inl, p->inl_len);
        s->inl_len = p->inl_len;
    } else if (p->inl) {
        s->exists = false; /* no memory: caller treats it as a failure */
    }
    for (size_t i = 0; i < p->ext.n; i++) {
        const struct core__fext *x = &p->ext.v[i];
        if (x->foff >= hi)
            break;
        if (x->foff + x->vlen <= lo)
            continue;
        if (core__fext_push(&s->ext, x) != 0) {
            s->exists = false;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

bool core__pend_snap_valid(struct core__pend *p, const struct core__pend_snap *s)
{
    if (!p)
        return true;
    pthread_mutex_lock(&p->mu);
    bool ok = !p->excl && p->tver == s->tver;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

void core__pend_snap_free(struct core__pend_snap *s)
{
    free(s->inl);
    free(s->ext.v);
    s->inl = NULL;
    s->ext.v = NULL;
    s->ext.n = s->ext.cap = 0;
}

static bool ts_after(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

void core__attr_pend(struct core *c, struct core_attr *out)
{
    if (out->type != CORE_REG || atomic_load(&c->data->pend_count) == 0)
        return;
    struct core__pend *p = core__pend_get(c, out->ino, false);
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    /* only while data is pending: once flushed, the inode record has it all */
    if (!p->dead && !p->excl && (p->ext.n || p->inl)) {
        if (p->size > out->size)
            out->size = p->size;
        if (ts_after(&p->mtime, &out->mtime)) {
            out->mtime = p->mtime;
            if (ts_after(&p->mtime, &out->ctime))
                out->ctime = p->mtime;
        }
        if (p->change > out->change)
            out->change = p->change;
        int64_t u = (int64_t)out->used + p->udelta;
        out->used = u > 0 ? (uint64_t)u : 0;
    }
    pthread_mutex_unlock(&p->mu);
    core__pend_put(c, p);
}

static void pend_udelta_calc(struct core *c, struct core__pend *p);

void core__pend_udelta(struct core *c, struct core__pend *p)
{
    pend_udelta_calc(c, p);
    /* what is left pending keeps its reservation; the rest is committed */
    core__resv_set(c, &p->resv, p->udelta > 0 ? (uint64_t)p->udelta : 0);
}

static void pend_udelta_calc(struct core *c, struct core__pend *p)
{
    struct meta_txn *t;
    struct meta_inode r;
    struct core__fext_list com = {0};
    struct store_extent *seen = NULL;
    size_t nseen = 0;
    int64_t d = 0;
    if (!p->ext.n && !p->inl) {
        p->udelta = 0;
        return;
    }
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return;
    if (meta_inode_get(t, p->ino, &r) != 0) {
        meta_rtxn_end(t);
        p->udelta = 0;
        return;
    }
    uint64_t inl = 0;
    if (r.flags & META_I_INLINE) {
        const void *vd;
        size_t vl;
        if (meta_inline_get(t, p->ino, &vd, &vl) == 0)
            inl = vl;
    }
    if (p->inl)
        d += (int64_t)p->inl_len - (int64_t)inl;
    if (p->ext.n) {
        if (r.flags & META_I_INLINE)
            d -= (int64_t)inl;
        seen = calloc(p->ext.n * 4 + 8, sizeof(*seen));
        size_t capseen = p->ext.n * 4 + 8;
        for (size_t i = 0; i < p->ext.n; i++) {
            const struct core__fext *x = &p->ext.v[i];
            d += x->e.len;
            if (r.flags & META_I_INLINE)
                continue;
            if (core__overlaps(t, p->ino, x->foff, x->foff + x->vlen, &com, false) != 0)
                continue;
            for (size_t j = 0; j < com.n; j++) {
                bool dup = false;
                for (size_t k = 0; k < nseen && !dup; k++)
                    dup = seen[k].dev == com.v[j].e.dev && seen[k].off == com.v[j].e.off;
                if (dup)
                    continue;
                if (atomic_load(&c->data->shared) &&
                    meta_xref_get(t, com.v[j].e.dev, com.v[j].e.off) > 1)
                    continue;        /* shadowed, but another version keeps it */
                d -= com.v[j].e.len; /* shadowed: freed when this commits */
                if (seen && nseen < capseen)
                    seen[nseen++] = com.v[j].e;
            }
        }
    }
    meta_rtxn_end(t);
    free(com.v);
    free(seen);
    p->udelta = d;
}

/* Usage the pending data of @p tenant (bucket @p bucket, 0 = whole tenant) adds. */
static int64_t pend_usage(struct core *c, uint32_t tenant, uint64_t bucket)
{
    struct cand {
        uint64_t ino;
        int64_t d;
    } *v = NULL;
    size_t n = 0, cap = 0;
    int64_t sum = 0;
    if (atomic_load(&c->data->pend_count) == 0)
        return 0;
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        struct core__pshard *s = &c->data->pend[i];
        pthread_mutex_lock(&s->mu);
        for (struct core__pend *p = s->head; p; p = p->next) {
            pthread_mutex_lock(&p->mu);
            if (!p->dead && (p->ext.n || p->inl) && p->udelta && p->tenant == tenant &&
                (bucket == 0 || p->bucket == bucket)) {
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    struct cand *nv = realloc(v, nc * sizeof(*nv));
                    if (nv) {
                        v = nv;
                        cap = nc;
                    }
                }
                if (n < cap)
                    v[n++] = (struct cand){p->ino, p->udelta};
            }
            pthread_mutex_unlock(&p->mu);
        }
        pthread_mutex_unlock(&s->mu);
    }
    /* only live files count: an unlinked one was credited when it went */
    struct meta_txn *t;
    if (n && meta_rtxn_begin(c->meta, &t) == 0) {
        for (size_t i = 0; i < n; i++) {
            struct meta_inode r;
            if (meta_inode_get(t, v[i].ino, &r) == 0 && r.nlink > 0)
                sum += v[i].d;
        }
        meta_rtxn_end(t);
    }
    free(v);
    return sum;
}

bool core__pend_has_data(struct core *c, uint64_t ino)
{
    struct core__pend *p = core__pend_get(c, ino, false);
    if (!p)
        return false;
    pthread_mutex_lock(&p->mu);
    bool has = !p->dead && (p->ext.n || p->inl);
    pthread_mutex_unlock(&p->mu);
    core__pend_put(c, p);
    return has;
}

int core_pending_writes(struct core *c, uint64_t ino, int64_t *last_ns)
{
    struct core__pend *p = core__pend_get(c, ino, false);
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    /* written since the writer's last COMMIT, even if a flush of our own (the 64 MiB
     * bound, a rename, a sync) committed it meanwhile: the writer is not done */
    bool has = !p->dead && (p->ext.n || p->inl || p->ver != p->acked);
    if (has && last_ns)
        *last_ns = (int64_t)p->mtime.tv_sec * 1000000000ll + p->mtime.tv_nsec;
    pthread_mutex_unlock(&p->mu);
    core__pend_put(c, p);
    return has ? 1 : 0;
}

size_t core__pend_bucket_inos(struct core *c, uint32_t tenant, uint64_t bucket, uint64_t **out)
{
    uint64_t *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        struct core__pshard *s = &c->data->pend[i];
        pthread_mutex_lock(&s->mu);
        for (struct core__pend *p = s->head; p; p = p->next) {
            pthread_mutex_lock(&p->mu);
            bool take = !p->dead && (p->ext.n || p->inl) && p->tenant == tenant &&
                        p->bucket == bucket;
            pthread_mutex_unlock(&p->mu);
            if (!take)
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                uint64_t *nv = realloc(v, nc * sizeof(*nv));
                if (!nv)
                    continue; /* the flush below then misses it; no worse than before */
                v = nv;
                cap = nc;
            }
            v[n++] = p->ino;
        }
        pthread_mutex_unlock(&s->mu);
    }
    *out = v;
    return n;
}

int core__pend_flush_ino(struct core *c, uint64_t ino)
{
    struct core__pend *pd = core__pend_get(c, ino, false);
    if (!pd)
        return 0;
    int rc = core__pend_flush(c, pd);
    core__pend_put(c, pd);
    return rc == SRV_ESTALE ? 0 : rc; /* gone meanwhile: nothing of it to move */
}

int core_usage_get(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out)
{
    int rc = core__usage_committed(c, tenant, ino, out);
    if (rc == 0) {
        /* acknowledged writes not committed yet count too (tenant and bucket
         * totals; a directory's limit counts committed data only) */
        int64_t pend = pend_usage(c, tenant, ino);
        out->bytes = (int64_t)out->bytes + pend > 0 ? (uint64_t)((int64_t)out->bytes + pend) : 0;
    }
    return rc;
}

void core__pend_batch_free(struct core__pend_batch *b)
{
    free(b->ext.v);
    free(b->inl);
    memset(b, 0, sizeof(*b));
}

/* Under p->mu: the MD5 of the content when it is known. */
static void md5_hex(struct core__pend *p, struct core__pend_batch *b)
{
    b->md5_ok = false;
    if (!p->md5ctx || p->md5_bad || p->md5_end != p->size)
        return;
    EVP_MD_CTX *cp = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (cp && EVP_MD_CTX_copy_ex(cp, p->md5ctx) == 1 && EVP_DigestFinal_ex(cp, md, &mdlen) == 1 &&
        mdlen == 16) {
        for (unsigned i = 0; i < 16; i++) {
            static const char hx[] = "0123456789abcdef";
            b->md5[2 * i] = hx[md[i] >> 4];
            b->md5[2 * i + 1] = hx[md[i] & 15];
        }
        b->md5[32] = '\0';
        b->md5_ok = true;
    }
    EVP_MD_CTX_free(cp);
}

/* Under p->mu: copy every pending change into @p b. @return 0, -ENOMEM. */
static int batch_take(struct core__pend *p, struct core__pend_batch *b)
{
    memset(b, 0, sizeof(*b));
    for (size_t i = 0; i < p->ext.n; i++)
        if (core__fext_push(&b->ext, &p->ext.v[i]) != 0)
            goto nomem;
    if (p->inl) {
        b->inl = malloc(p->inl_len ? p->inl_len : 1);
        if (!b->inl)
            goto nomem;
        memcpy(b->inl, p->inl, p->inl_len);
        b->inl_len = p->inl_len;
        b->inl_ver = p->inl_ver;
    }
    b->size = p->size;
    b->change = p->change;
    b->mtime = p->mtime;
    md5_hex(p, b);
    return 0;
nomem:
    core__pend_batch_free(b);
    return -ENOMEM;
}

/* Under p->mu: release every pending extent of @p p and of @p b that is not
 * in p (inode gone: nobody will commit them). */
static void drop_all(struct core *c, struct core__pend *p, const struct core__pend_batch *b)
{
    for (size_t i = 0; b && i < b->ext.n; i++) {
        bool inp = false;
        for (size_t j = 0; j < p->ext.n && !inp; j++)
            inp = p->ext.v[j].e.dev == b->ext.v[i].e.dev && p->ext.v[j].e.off == b->ext.v[i].e.off;
        if (!inp)
            store_release(c->store, &b->ext.v[i].e);
    }
    for (size_t j = 0; j < p->ext.n; j++)
        store_release(c->store, &p->ext.v[j].e);
    atomic_fetch_sub(&c->data->pend_total, p->unfl);
    p->ext.n = 0;
    p->bytes = p->unfl = 0;
    p->udelta = 0;
    core__resv_set(c, &p->resv, 0);
    free(p->inl);
    p->inl = NULL;
    p->inl_len = 0;
    p->dead = true;
    p->ver++;
}

struct flush_op {
    struct core *c;
    uint64_t ino;
    const struct core__pend_batch *b;
};

static int flush_fn(struct meta_txn *t, void *arg)
{
    struct flush_op *a = arg;
    struct meta_inode r;
    int rc = meta_inode_get(t, a->ino, &r);
    if (rc == -ENOENT)
        return SRV_ESTALE;
    if (rc)
        return rc;
    if (r.type != CORE_REG)
        return SRV_ESTALE;
    rc = core__pend_apply_t(a->c, t, a->ino, &r, a->b);
    if (rc == 0)
        rc = meta_inode_put(t, a->ino, &r);
    return rc;
}

/* @p client: a client's COMMIT, which acknowledges every write made before it. */
static int pend_flush(struct core *c, struct core__pend *p, bool client)
{
    struct core__pend_batch b;
    int rc;
    pthread_mutex_lock(&p->mu);
    while (p->flushing || p->excl)
        pthread_cond_wait(&p->cv, &p->mu);
    uint64_t ver = p->ver;
    if (p->dead || (!p->ext.n && !p->inl)) {
        if (client && ver > p->acked)
            p->acked = ver; /* all committed by flushes of our own */
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    rc = batch_take(p, &b);
    if (rc) {
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    p->flushing = true;
    for (size_t i = 0; i < p->ext.n; i++)
        p->ext.v[i].flags |= CORE_FX_FLUSHING;
    atomic_fetch_sub(&c->data->pend_total, p->unfl);
    p->unfl = 0;
    pthread_mutex_unlock(&p->mu);

    rc = b.ext.n ? store_sync(c->store) : 0;
    if (rc == 0) {
        struct flush_op a = {c, p->ino, &b};
        rc = meta_submit(c->meta, flush_fn, &a, 0);
    }

    pthread_mutex_lock(&p->mu);
    p->cver++;
    if (rc == 0 && client && ver > p->acked)
        p->acked = ver;
    if (rc == 0) {
        size_t j = 0;
        for (size_t i = 0; i < p->ext.n; i++) {
            struct core__fext *x = &p->ext.v[i];
            if (x->flags & CORE_FX_FLUSHING)
                p->bytes -= x->e.len; /* committed now */
            else
                p->ext.v[j++] = *x;
        }
        p->ext.n = j;
        if (p->inl && p->inl_ver == b.inl_ver) {
            free(p->inl);
            p->inl = NULL;
            p->inl_len = 0;
        }
        core__pend_udelta(c, p);
    } else if (rc == SRV_ESTALE) {
        drop_all(c, p, &b);
    } else {
        /* not committed: entries stay pending; those replaced meanwhile were
         * left to this flush, so nobody commits them now */
        for (size_t i = 0; i < b.ext.n; i++) {
            bool inp = false;
            for (size_t j = 0; j < p->ext.n && !inp; j++)
                inp = p->ext.v[j].e.dev == b.ext.v[i].e.dev &&
                      p->ext.v[j].e.off == b.ext.v[i].e.off;
            if (!inp)
                store_release(c->store, &b.ext.v[i].e);
        }
        for (size_t i = 0; i < p->ext.n; i++) {
            struct core__fext *x = &p->ext.v[i];
            if (x->flags & CORE_FX_FLUSHING) {
                x->flags &= ~(uint32_t)CORE_FX_FLUSHING;
                p->unfl += x->e.len;
                atomic_fetch_add(&c->data->pend_total, x->e.len);
            }
        }
        srv_log(ERROR, META, "flushing pending writes of ino=%llu: %s", (unsigned long long)p->ino,
                srv_strerror(rc));
    }
    p->flushing = false;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    core__pend_batch_free(&b);
    return rc;
}

int core__pend_flush(struct core *c, struct core__pend *p)
{
    return pend_flush(c, p, false);
}

int core__pend_commit(struct core *c, struct core__pend *p)
{
    return pend_flush(c, p, true);
}

int core__pend_flush_all(struct core *c)
{
    int rc = 0;
    if (atomic_load(&c->data->pend_count) == 0)
        return 0;
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        struct core__pshard *s = &c->data->pend[i];
        uint64_t *inos = NULL;
        size_t n = 0, cap = 0;
        pthread_mutex_lock(&s->mu);
        for (struct core__pend *p = s->head; p; p = p->next) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 16;
                uint64_t *ni = realloc(inos, nc * sizeof(*ni));
                if (!ni)
                    break;
                inos = ni;
                cap = nc;
            }
            inos[n++] = p->ino;
        }
        pthread_mutex_unlock(&s->mu);
        for (size_t j = 0; j < n; j++) {
            struct core__pend *p = core__pend_get(c, inos[j], false);
            if (!p)
                continue;
            int r = core__pend_flush(c, p);
            core__pend_put(c, p);
            if (r && r != SRV_ESTALE && rc == 0)
                rc = r;
        }
        free(inos);
    }
    return rc;
}

void core__pend_dead(struct core *c, uint64_t ino)
{
    if (atomic_load(&c->data->pend_count) == 0)
        return;
    struct core__pend *p = core__pend_get(c, ino, false);
    if (!p)
        return;
    core__pend_put(c, p);
    pthread_mutex_lock(&c->data->dead_mu);
    if (c->data->ndead == c->data->capdead) {
        size_t nc = c->data->capdead ? c->data->capdead * 2 : 16;
        uint64_t *nd = realloc(c->data->dead, nc * sizeof(*nd));
        if (nd) {
            c->data->dead = nd;
            c->data->capdead = nc;
        }
    }
    if (c->data->ndead < c->data->capdead)
        c->data->dead[c->data->ndead++] = ino;
    /* else: released at the next flush of the inode (it finds the inode gone) */
    pthread_mutex_unlock(&c->data->dead_mu);
}

void core__pend_reap(struct core *c)
{
    uint64_t *list;
    size_t n;
    pthread_mutex_lock(&c->data->dead_mu);
    list = c->data->dead;
    n = c->data->ndead;
    c->data->dead = NULL;
    c->data->ndead = c->data->capdead = 0;
    pthread_mutex_unlock(&c->data->dead_mu);
    for (size_t i = 0; i < n; i++) {
        struct meta_txn *t;
        struct meta_inode r;
        if (meta_rtxn_begin(c->meta, &t) != 0)
            break;
        int rc = meta_inode_get(t, list[i], &r);
        meta_rtxn_end(t);
        if (rc != -ENOENT)
            continue; /* still there (op failed, or an orphan still read) */
        struct core__pend *p = core__pend_get(c, list[i], false);
        if (!p)
            continue;
        pthread_mutex_lock(&p->mu);
        while (p->flushing || p->excl)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->dead)
            drop_all(c, p, NULL);
        pthread_mutex_unlock(&p->mu);
        core__pend_put(c, p);
    }
    free(list);
}

int core__pend_excl_begin(struct core *c, uint64_t ino, struct core__pend_batch *b,
                          struct core__pend **out)
{
    memset(b, 0, sizeof(*b));
    *out = NULL;
    struct core__pend *p = core__pend_get(c, ino, true);
    if (!p)
        return -ENOMEM;
    pthread_mutex_lock(&p->mu);
    while (p->flushing || p->excl)
        pthread_cond_wait(&p->cv, &p->mu);
    int rc = batch_take(p, b);
    if (rc == 0)
        p->excl = true;
    pthread_mutex_unlock(&p->mu);
    if (rc == 0 && b->ext.n && (rc = store_sync(c->store)) != 0) {
        pthread_mutex_lock(&p->mu);
        p->excl = false;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    if (rc) {
        core__pend_batch_free(b);
        core__pend_put(c, p);
        return rc;
    }
    *out = p;
    return 0;
}

void core__pend_excl_end(struct core *c, struct core__pend *p, struct core__pend_batch *b, int rc,
                         bool size_set, uint64_t size)
{
    if (!p) {
        core__pend_batch_free(b);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->cver++;
    p->tver++;
    if (rc == 0) {
        /* b held every pending change (no insert runs while excl) */
        size_t j = 0;
        for (size_t i = 0; i < p->ext.n; i++) {
            bool inb = false;
            for (size_t k = 0; k < b->ext.n && !inb; k++)
                inb = b->ext.v[k].e.dev == p->ext.v[i].e.dev &&
                      b->ext.v[k].e.off == p->ext.v[i].e.off;
            if (inb) {
                p->bytes -= p->ext.v[i].e.len;
                p->unfl -= p->ext.v[i].e.len;
                atomic_fetch_sub(&c->data->pend_total, p->ext.v[i].e.len);
            } else {
                p->ext.v[j++] = p->ext.v[i];
            }
        }
        p->ext.n = j;
        if (p->inl && b->inl && p->inl_ver == b->inl_ver) {
            free(p->inl);
            p->inl = NULL;
            p->inl_len = 0;
        }
        core__pend_udelta(c, p);
        if (!p->ext.n && !p->inl) {
            /* the inode record is authoritative again */
            p->size = 0;
            p->change = 0;
            memset(&p->mtime, 0, sizeof(p->mtime));
        }
        if (size_set) {
            /* the running MD5 no longer describes the content, unless it is
             * empty again (then a write from 0 starts a new one) */
            if (p->md5ctx)
                EVP_MD_CTX_free(p->md5ctx);
            p->md5ctx = NULL;
            p->md5_end = 0;
            p->md5_bad = size != 0;
        }
    } else if (rc == SRV_ESTALE) {
        drop_all(c, p, NULL);
    }
    p->excl = false;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    core__pend_batch_free(b);
    core__pend_put(c, p);
}

/* ---- background flusher ---- */

static void *flusher_main(void *arg)
{
    struct core *c = arg;
    pthread_mutex_lock(&c->data->fl_mu);
    for (;;) {
        while (!c->data->fl_n && !c->data->fl_stop)
            pthread_cond_wait(&c->data->fl_cv, &c->data->fl_mu);
        if (!c->data->fl_n)
            break;
        uint64_t ino = c->data->fl_q[0];
        memmove(c->data->fl_q, c->data->fl_q + 1, (c->data->fl_n - 1) * sizeof(c->data->fl_q[0]));
        c->data->fl_n--;
        pthread_mutex_unlock(&c->data->fl_mu);
        struct core__pend *p = core__pend_get(c, ino, false);
        if (p) {
            int rc = core__pend_flush(c, p);
            if (rc && rc != SRV_ESTALE)
                srv_log(WARN, META, "background flush of ino=%llu: %s (its commit retries)",
                        (unsigned long long)ino, srv_strerror(rc));
            core__pend_put(c, p);
        }
        pthread_mutex_lock(&c->data->fl_mu);
    }
    pthread_mutex_unlock(&c->data->fl_mu);
    return NULL;
}

void core__pend_flush_async(struct core *c, uint64_t ino)
{
    pthread_mutex_lock(&c->data->fl_mu);
    bool queued = false;
    for (unsigned i = 0; i < c->data->fl_n && !queued; i++)
        queued = c->data->fl_q[i] == ino;
    if (c->data->fl_running && !queued && c->data->fl_n < sizeof(c->data->fl_q) / sizeof(c->data->fl_q[0])) {
        c->data->fl_q[c->data->fl_n++] = ino;
        pthread_cond_signal(&c->data->fl_cv);
    }
    pthread_mutex_unlock(&c->data->fl_mu);
}

int core__pend_flusher_start(struct core *c)
{
    int rc = pthread_create(&c->data->fl_thread, NULL, flusher_main, c);
    if (rc)
        return -rc;
    pthread_mutex_lock(&c->data->fl_mu);
    c->data->fl_running = true;
    pthread_mutex_unlock(&c->data->fl_mu);
    return 0;
}

void core__pend_flusher_stop(struct core *c)
{
    pthread_mutex_lock(&c->data->fl_mu);
    bool running = c->data->fl_running;
    c->data->fl_running = false;
    c->data->fl_stop = true;
    pthread_cond_signal(&c->data->fl_cv);
    pthread_mutex_unlock(&c->data->fl_mu);
    if (running)
        pthread_join(c->data->fl_thread, NULL);
}
