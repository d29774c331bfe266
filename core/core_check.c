/* SPDX-License-Identifier: Apache-2.0
 * core_check: a consistency check of a whole store (core_check in core.h),
 * for `s3nfsd --check-store` and the crash tests. It reads every table in one
 * snapshot and compares what they say of each other:
 *  - space: the extents of files and of multipart parts, each counted once
 *    however many inodes share it, and the free ranges tile the devices
 *    without overlap; the holders of a shared extent are its xref count; block
 *    CRCs and xref records belong to used extents; the allocator agrees;
 *  - accounting: an inode's used bytes are its extents' and inline bytes; a
 *    bucket's usage is the bytes of its files, versions and parts, a shared
 *    extent once; a tenant's, its buckets';
 *  - versions: an unlinked file is a noncurrent version (or an orphan); each
 *    version record names an inode holding it (vino back) or is a delete
 *    marker; a chain has versions, its key in vkeys, its null version where
 *    the header says; only the newest version of a chain is a linked file.
 * Thread: any, with no op running (it is offline: run on a store just
 * opened). Sub-module: namespace (core_ns_int.h). */
#include "core_ns_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_tier.h"
#include "srv_err.h"

struct ck_ino {
    uint64_t ino, bucket;
    uint64_t used, held; /* recorded, counted (extents + inline bytes) */
    uint32_t tenant, nlink, flags;
    uint8_t type;
};

struct ck_x {
    uint32_t dev, len;
    uint64_t off;
    uint64_t bucket; /* of the holder */
    uint64_t owner;  /* inode, or upload id for a part */
    bool part;
};

struct ck_free {
    uint32_t dev;
    uint64_t off, len;
};

struct ck_bucket {
    uint64_t ino;
    uint32_t tenant;
    uint64_t bytes;
};

struct ck_up {
    uint64_t id, bucket;
};

struct ck {
    struct core *c;
    struct meta_txn *t;
    core_check_fn report;
    void *arg;
    unsigned problems;
    int err;
    struct ck_ino *in;
    size_t nin, cin;
    struct ck_x *xs;
    size_t nx, cx;
    struct ck_free *fr;
    size_t nfr, cfr;
    struct ck_bucket *bk;
    size_t nbk, cbk;
    struct ck_up *up;
    size_t nup, cup;
    /* the chain being scanned */
    uint64_t chain;
    bool have_chain;
    struct meta_vchain h;
    unsigned nver;
    uint64_t null_seen;
};

static void say(struct ck *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct ck *k, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    k->problems++;
    if (k->report)
        k->report(k->arg, msg);
}

static void *grow(void *p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return p;
    size_t nc = *cap ? *cap * 2 : 256;
    void *q = realloc(p, nc * sz);
    if (q)
        *cap = nc;
    return q;
}

#define PUSH(k, arr, n, cap)                                                                       \
    ({                                                                                             \
        void *q_ = grow((k)->arr, &(k)->cap, (k)->n, sizeof(*(k)->arr));                           \
        if (q_)                                                                                    \
            (k)->arr = q_;                                                                         \
        q_ ? &(k)->arr[(k)->n++] : NULL;                                                           \
    })

static struct ck_ino *ino_find(struct ck *k, uint64_t ino)
{
    size_t lo = 0, hi = k->nin;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k->in[mid].ino == ino)
            return &k->in[mid];
        if (k->in[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static struct ck_bucket *bucket_find(struct ck *k, uint64_t ino)
{
    for (size_t lo = 0, hi = k->nbk; lo < hi;) {
        size_t mid = (lo + hi) / 2;
        if (k->bk[mid].ino == ino)
            return &k->bk[mid];
        if (k->bk[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static uint64_t alen(uint64_t len)
{
    return (len + STORE_ALIGN - 1) / STORE_ALIGN * STORE_ALIGN;
}

/* ---- collecting ---- */

static int inode_ent(void *arg, uint64_t ino, const struct meta_inode *r)
{
    struct ck *k = arg;
    if (!r) {
        say(k, "inode %llu: malformed record", (unsigned long long)ino);
        return 0;
    }
    struct ck_ino *i = PUSH(k, in, nin, cin);
    if (!i)
        return -ENOMEM;
    *i = (struct ck_ino){ino, r->bucket, r->used, 0, r->tenant, r->nlink, r->flags, r->type};
    if (r->type == CORE_DIR && r->bucket == ino) {
        struct ck_bucket *b = PUSH(k, bk, nbk, cbk);
        if (!b)
            return -ENOMEM;
        *b = (struct ck_bucket){ino, r->tenant, 0};
    }
    return 0;
}

static int extent_ent(void *arg, uint64_t ino, uint64_t foff, const struct meta_extent *x)
{
    struct ck *k = arg;
    struct ck_ino *i = ino_find(k, ino);
    if (!i) {
        say(k, "extent of missing inode %llu at %llu", (unsigned long long)ino,
            (unsigned long long)foff);
        return 0;
    }
    i->held += x->len;
    struct ck_x *e = PUSH(k, xs, nx, cx);
    if (!e)
        return -ENOMEM;
    *e = (struct ck_x){x->dev, x->len, x->off, i->bucket, ino, false};
    return 0;
}

static int upload_ent(void *arg, uint64_t id, const struct meta_mpu *m, const char *key,
                      const void *meta)
{
    struct ck *k = arg;
    (void)m;
    (void)key;
    (void)meta;
    struct ck_up *u = PUSH(k, up, nup, cup);
    if (!u)
        return -ENOMEM;
    *u = (struct ck_up){id, 0};
    return 0;
}

static int up_cmp(const void *a, const void *b)
{
    const struct ck_up *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int part_ent(void *arg, uint64_t id, uint32_t partno, const struct meta_part *pt,
                    const struct meta_extent *ext)
{
    struct ck *k = arg;
    struct ck_up key = {id, 0};
    struct ck_up *u = k->nup ? bsearch(&key, k->up, k->nup, sizeof(key), up_cmp) : NULL;
    if (!pt) {
        say(k, "upload %llu part %u: malformed record", (unsigned long long)id, partno);
        return 0;
    }
    if (!u)
        say(k, "upload %llu part %u: no such upload", (unsigned long long)id, partno);
    for (uint32_t j = 0; j < pt->nextents; j++) {
        struct meta_extent x;
        memcpy(&x, (const char *)ext + j * sizeof(x), sizeof(x));
        struct ck_x *e = PUSH(k, xs, nx, cx);
        if (!e)
            return -ENOMEM;
        *e = (struct ck_x){x.dev, x.len, x.off, u ? u->bucket : 0, id, true};
    }
    return 0;
}

static int free_ent(void *arg, uint32_t dev, uint64_t off, uint64_t len)
{
    struct ck *k = arg;
    struct ck_free *f = PUSH(k, fr, nfr, cfr);
    if (!f)
        return -ENOMEM;
    *f = (struct ck_free){dev, off, len};
    return 0;
}

static int x_cmp(const void *a, const void *b)
{
    const struct ck_x *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int collect(struct ck *k)
{
    int rc = meta_inode_scan(k->t, inode_ent, k);
    if (rc == 0)
        rc = meta_extent_scan_all(k->t, extent_ent, k);
    for (size_t b = 0; b < k->nbk && rc == 0; b++) {
        size_t from = k->nup;
        rc = meta_mpu_scan(k->t, k->bk[b].ino, upload_ent, k);
        for (size_t j = from; j < k->nup; j++)
            k->up[j].bucket = k->bk[b].ino;
    }
    if (rc == 0) {
        if (k->nup)
            qsort(k->up, k->nup, sizeof(*k->up), up_cmp);
        rc = meta_part_scan_all(k->t, part_ent, k);
    }
    if (rc == 0) {
        struct store_map map;
        meta_free_map(k->t, &map);
        rc = store_map_free_ranges(&map, free_ent, k);
    }
    if (rc == 0)
        if (k->nx)
            qsort(k->xs, k->nx, sizeof(*k->xs), x_cmp);
    return rc;
}

/* ---- space ---- */

static const struct ck_x *x_find(struct ck *k, uint32_t dev, uint64_t off)
{
    struct ck_x key = {.dev = dev, .off = off};
    return k->nx ? bsearch(&key, k->xs, k->nx, sizeof(key), x_cmp) : NULL;
}

static int xref_ent(void *arg, uint32_t dev, uint64_t off, uint32_t holders)
{
    struct ck *k = arg;
    if (!x_find(k, dev, off))
        say(k, "xref of a free extent dev=%u off=%llu (%u holders)", dev, (unsigned long long)off,
            holders);
    return 0;
}

static int bcrc_ent(void *arg, uint32_t dev, uint64_t off)
{
    struct ck *k = arg;
    if (!x_find(k, dev, off))
        say(k, "block CRCs of a free extent dev=%u off=%llu", dev, (unsigned long long)off);
    return 0;
}

/* One distinct extent or free range, in (dev, off) order: overlaps with the one before. */
struct span {
    uint32_t dev;
    uint64_t off, end;
    bool used;
};

static void span_next(struct ck *k, struct span *prev, struct span cur)
{
    if (prev->end && prev->dev == cur.dev && prev->end > cur.off)
        say(k, "%s range dev=%u [%llu, %llu) overlaps %s range at %llu",
            prev->used ? "used" : "free", cur.dev, (unsigned long long)prev->off,
            (unsigned long long)prev->end, cur.used ? "used" : "free", (unsigned long long)cur.off);
    if (cur.dev != prev->dev || cur.end > prev->end || !prev->end)
        *prev = cur;
}

static void check_space(struct ck *k)
{
    uint64_t used = 0, freeb = 0;
    struct span prev = {0};
    size_t f = 0;
    for (size_t i = 0; i < k->nx;) {
        const struct ck_x *x = &k->xs[i];
        size_t j = i + 1;
        while (j < k->nx && k->xs[j].dev == x->dev && k->xs[j].off == x->off) {
            if (k->xs[j].len != x->len)
                say(k, "extent dev=%u off=%llu held with lengths %u and %u", x->dev,
                    (unsigned long long)x->off, x->len, k->xs[j].len);
            if (k->xs[j].bucket != x->bucket)
                say(k, "extent dev=%u off=%llu shared across buckets %llu and %llu", x->dev,
                    (unsigned long long)x->off, (unsigned long long)x->bucket,
                    (unsigned long long)k->xs[j].bucket);
            j++;
        }
        uint32_t holders = meta_xref_get(k->t, x->dev, x->off);
        if (holders != j - i)
            say(k, "extent dev=%u off=%llu: %zu holders, xref says %u (holder %s %llu)", x->dev,
                (unsigned long long)x->off, j - i, holders, x->part ? "upload" : "inode",
                (unsigned long long)x->owner);
        struct span s = {x->dev, x->off, x->off + alen(x->len), true};
        while (f < k->nfr &&
               (k->fr[f].dev < s.dev || (k->fr[f].dev == s.dev && k->fr[f].off < s.off))) {
            span_next(
                k, &prev,
                (struct span){k->fr[f].dev, k->fr[f].off, k->fr[f].off + k->fr[f].len, false});
            freeb += k->fr[f++].len;
        }
        span_next(k, &prev, s);
        used += alen(x->len);
        struct ck_bucket *b = bucket_find(k, x->bucket);
        if (b)
            b->bytes += x->len;
        else
            say(k, "extent dev=%u off=%llu of %s %llu outside any bucket", x->dev,
                (unsigned long long)x->off, x->part ? "upload" : "inode",
                (unsigned long long)x->owner);
        i = j;
    }
    for (; f < k->nfr; f++) {
        span_next(k, &prev,
                  (struct span){k->fr[f].dev, k->fr[f].off, k->fr[f].off + k->fr[f].len, false});
        freeb += k->fr[f].len;
    }
    int rc = meta_xref_scan(k->t, xref_ent, k);
    if (rc == 0)
        rc = meta_bcrc_scan(k->t, bcrc_ent, k);
    if (rc)
        k->err = rc;
    struct store_stats ss;
    store_stats_get(k->c->store, &ss);
    if (used + freeb != ss.capacity || ss.free != freeb || ss.reserved != 0)
        say(k,
            "space: used %llu + free (map) %llu != capacity %llu, or free (allocator) %llu, "
            "reserved %llu",
            (unsigned long long)used, (unsigned long long)freeb, (unsigned long long)ss.capacity,
            (unsigned long long)ss.free, (unsigned long long)ss.reserved);
}

/* ---- accounting ---- */

static int bk_tenant_cmp(const void *a, const void *b)
{
    const struct ck_bucket *x = a, *y = b;
    return x->tenant < y->tenant ? -1 : x->tenant > y->tenant;
}

static void check_usage(struct ck *k)
{
    for (size_t n = 0; n < k->nin; n++) {
        struct ck_ino *i = &k->in[n];
        const void *data;
        size_t len = 0;
        if (i->type == CORE_LNK || meta_inline_get(k->t, i->ino, &data, &len) != 0)
            len = 0; /* a symbolic link's target is not data: not counted */
        i->held += len;
        if ((i->flags & META_I_EVICTED) && i->held <= i->used && i->type == CORE_REG) {
            /* evicted: it holds what a recall brought back; used and usage keep the
             * bytes it held before (they are on the remote) */
            struct ck_bucket *eb = bucket_find(k, i->bucket);
            if (eb)
                eb->bytes += i->used - i->held;
            i->held = i->used;
            /* A change that is not content (rename, SETATTR of times or mode) moves the
             * counter past the record's until the uploader rewrites it; a content change
             * recalls the file first, which clears the evicted flag. */
            static struct meta_tier_copy cp; /* offline, one thread */
            struct meta_inode r;
            if (meta_tier_get(k->t, i->ino, &cp) != 0 || meta_inode_get(k->t, i->ino, &r) != 0 ||
                cp.st.change > r.change || cp.st.size != r.size || !cp.st.etag[0])
                say(k, "inode %llu: evicted without a confirmed remote copy of its content",
                    (unsigned long long)i->ino);
        }
        if (i->held != i->used)
            say(k, "inode %llu: used %llu, holds %llu bytes", (unsigned long long)i->ino,
                (unsigned long long)i->used, (unsigned long long)i->held);
        struct ck_bucket *b = i->type == CORE_DIR ? NULL : bucket_find(k, i->bucket);
        if (b)
            b->bytes += len; /* the extents were counted once each (check_space) */
    }
    for (size_t n = 0; n < k->nbk; n++) {
        struct meta_usage u;
        struct ck_bucket *b = &k->bk[n];
        if (meta_usage_get(k->t, b->tenant, b->ino, &u) != 0)
            say(k, "bucket %llu: no usage record", (unsigned long long)b->ino);
        else if (u.bytes != b->bytes)
            say(k, "bucket %llu: usage %llu bytes, holds %llu", (unsigned long long)b->ino,
                (unsigned long long)u.bytes, (unsigned long long)b->bytes);
    }
    if (k->nbk)
        qsort(k->bk, k->nbk, sizeof(*k->bk), bk_tenant_cmp); /* bucket_find no more */
    for (size_t n = 0; n < k->nbk;) {
        uint32_t tenant = k->bk[n].tenant;
        uint64_t sum = 0;
        for (; n < k->nbk && k->bk[n].tenant == tenant; n++)
            sum += k->bk[n].bytes;
        struct meta_usage u;
        if (meta_usage_get(k->t, tenant, 0, &u) != 0)
            say(k, "tenant %u: no usage record", tenant);
        else if (u.bytes != sum)
            say(k, "tenant %u: usage %llu bytes, its buckets hold %llu", tenant,
                (unsigned long long)u.bytes, (unsigned long long)sum);
    }
}

/* ---- inodes and versions ---- */

static void check_inodes(struct ck *k)
{
    for (size_t n = 0; n < k->nin; n++) {
        struct ck_ino *i = &k->in[n];
        uint64_t chain, vseq;
        struct meta_version v;
        if (i->flags & META_I_VREC) {
            if (meta_vino_get(k->t, i->ino, &chain, &vseq) != 0)
                say(k, "inode %llu: a version without a vino record", (unsigned long long)i->ino);
            else if (meta_version_get(k->t, chain, vseq, &v) != 0 || v.ino != i->ino)
                say(k, "inode %llu: vino names chain %llu version %llu, which is not it",
                    (unsigned long long)i->ino, (unsigned long long)chain,
                    (unsigned long long)vseq);
        } else if (i->nlink == 0 && meta_orphan_get(k->t, i->ino) != 0) {
            say(k, "inode %llu: unlinked, neither a version nor an orphan (leaked)",
                (unsigned long long)i->ino);
        }
    }
}

static int vino_ent(void *arg, uint64_t ino, uint64_t chain, uint64_t vseq)
{
    struct ck *k = arg;
    struct ck_ino *i = ino_find(k, ino);
    if (!i || !(i->flags & META_I_VREC))
        say(k, "vino %llu -> chain %llu version %llu: %s", (unsigned long long)ino,
            (unsigned long long)chain, (unsigned long long)vseq,
            i ? "the inode is not marked a version" : "no such inode");
    return 0;
}

static void chain_end(struct ck *k)
{
    if (!k->have_chain)
        return;
    if (k->nver == 0)
        say(k, "chain %llu: no versions", (unsigned long long)k->chain);
    if (k->h.null_vseq != k->null_seen)
        say(k, "chain %llu: the header's null version is %llu, the records' %llu",
            (unsigned long long)k->chain, (unsigned long long)k->h.null_vseq,
            (unsigned long long)k->null_seen);
    k->have_chain = false;
}

static int chain_ent(void *arg, uint64_t chain, const struct meta_vchain *h, const char *key)
{
    struct ck *k = arg;
    uint64_t got;
    chain_end(k);
    if (!h) {
        say(k, "chain %llu: malformed header", (unsigned long long)chain);
        return 0;
    }
    k->chain = chain;
    k->have_chain = true;
    k->h = *h;
    k->nver = 0;
    k->null_seen = 0;
    if (!bucket_find(k, h->bucket))
        say(k, "chain %llu: no bucket %llu", (unsigned long long)chain,
            (unsigned long long)h->bucket);
    else if (meta_vkey_get(k->t, h->bucket, key, h->keylen, &got) != 0 || got != chain)
        say(k, "chain %llu: its key %.*s does not lead to it", (unsigned long long)chain,
            (int)h->keylen, key);
    return 0;
}

static int version_ent(void *arg, uint64_t chain, uint64_t vseq, const struct meta_version *v)
{
    struct ck *k = arg;
    if (!k->have_chain || k->chain != chain) {
        say(k, "chain %llu version %llu: no chain header", (unsigned long long)chain,
            (unsigned long long)vseq);
        return 0;
    }
    bool newest = k->nver++ == 0;
    if (!v) {
        say(k, "chain %llu version %llu: malformed", (unsigned long long)chain,
            (unsigned long long)vseq);
        return 0;
    }
    if (v->flags & META_V_NULL) {
        if (k->null_seen)
            say(k, "chain %llu: two null versions", (unsigned long long)chain);
        k->null_seen = vseq;
    }
    if (!!(v->flags & META_V_DMARK) != (v->ino == 0)) {
        say(k, "chain %llu version %llu: a delete marker %s an inode", (unsigned long long)chain,
            (unsigned long long)vseq, v->ino ? "with" : "or a version without");
        return 0;
    }
    if (!v->ino)
        return 0;
    struct ck_ino *i = ino_find(k, v->ino);
    uint64_t c2, s2;
    if (!i)
        say(k, "chain %llu version %llu: inode %llu missing", (unsigned long long)chain,
            (unsigned long long)vseq, (unsigned long long)v->ino);
    else if (!(i->flags & META_I_VREC) || meta_vino_get(k->t, v->ino, &c2, &s2) != 0 ||
             c2 != chain || s2 != vseq)
        say(k, "chain %llu version %llu: inode %llu does not hold it", (unsigned long long)chain,
            (unsigned long long)vseq, (unsigned long long)v->ino);
    else if (!newest && i->nlink)
        say(k, "chain %llu version %llu: noncurrent, yet inode %llu is linked",
            (unsigned long long)chain, (unsigned long long)vseq, (unsigned long long)v->ino);
    else if (newest && !i->nlink)
        say(k, "chain %llu version %llu: current, yet inode %llu is unlinked",
            (unsigned long long)chain, (unsigned long long)vseq, (unsigned long long)v->ino);
    return 0;
}

static int vkey_ent(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                    size_t *skip)
{
    struct ck *k = arg;
    struct meta_vchain h;
    const char *hk;
    (void)skip;
    if (meta_vchain_get(k->t, kv->ino, &h, &hk) != 0 || h.keylen != klen ||
        memcmp(hk, key, klen) != 0)
        say(k, "vkey %.*s -> chain %llu: no such chain for it", (int)klen, key,
            (unsigned long long)kv->ino);
    return 0;
}

static int check_versions(struct ck *k)
{
    check_inodes(k);
    int rc = meta_vino_scan(k->t, vino_ent, k);
    if (rc == 0)
        rc = meta_versions_scan(k->t, chain_ent, version_ent, k);
    chain_end(k);
    for (size_t b = 0; b < k->nbk && rc == 0; b++)
        rc = meta_vkey_scan(k->t, k->bk[b].ino, "", 0, NULL, 0, vkey_ent, k);
    return rc;
}

int core_check(struct core *c, core_check_fn report, void *arg)
{
    struct ck k = {.c = c, .report = report, .arg = arg};
    int rc = meta_rtxn_begin(c->meta, &k.t);
    if (rc)
        return rc;
    rc = collect(&k);
    if (rc == 0) {
        check_space(&k);
        rc = k.err;
    }
    if (rc == 0)
        rc = check_versions(&k);
    if (rc == 0)
        check_usage(&k); /* last: sorts the buckets by tenant */
    meta_rtxn_end(k.t);
    free(k.in);
    free(k.xs);
    free(k.fr);
    free(k.bk);
    free(k.up);
    if (rc)
        return rc;
    return k.problems > (unsigned)INT32_MAX ? INT32_MAX : (int)k.problems;
}
