/* SPDX-License-Identifier: Apache-2.0
 * meta_extent: extent maps and block CRCs (meta_extent.h).
 * Thread: any thread holding the txn. */
#include "meta_extent.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"

static void xkey(uint8_t *k, uint64_t ino, uint64_t foff)
{
    meta_be64_put(k, ino);
    meta_be64_put(k + 8, foff);
}

/* @return 0, SRV_ECORRUPT. */
static int extent_decode(const void *v, size_t vlen, struct meta_extent *x)
{
    if (vlen != sizeof(*x))
        return SRV_ECORRUPT;
    memcpy(x, v, sizeof(*x));
    return x->vlen > x->len ? SRV_ECORRUPT : 0;
}

int meta_extent_put(struct meta_txn *t, uint64_t ino, uint64_t foff, const struct meta_extent *x)
{
    uint8_t k[16];
    xkey(k, ino, foff);
    return meta__put(t, META_DBI_EXTENTS, k, 16, x, sizeof(*x), 0);
}

int meta_extent_del(struct meta_txn *t, uint64_t ino, uint64_t foff)
{
    uint8_t k[16];
    xkey(k, ino, foff);
    return meta__del(t, META_DBI_EXTENTS, k, 16);
}

struct xscan {
    uint64_t lo, hi;
    uint64_t start;   /* reverse step: the file offset the forward scan starts at */
    meta_extent_cb cb;
    void *arg;
    int rc;
    bool end;
};

/* The extent just before lo: does it reach past lo? */
static int prev_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct xscan *s = arg;
    struct meta_extent x;
    if (klen == 16 && extent_decode(val, vlen, &x) == 0) {
        uint64_t foff = meta_be64_get((const uint8_t *)key + 8);
        if (foff < s->lo && foff + x.vlen > s->lo)
            s->start = foff;
    }
    return 1; /* one step only */
}

static int fwd_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct xscan *s = arg;
    struct meta_extent x;
    if (klen != 16) {
        s->end = true;
        return 1;
    }
    uint64_t foff = meta_be64_get((const uint8_t *)key + 8);
    if (foff >= s->hi) {
        s->end = true;
        return 1;
    }
    int rc = extent_decode(val, vlen, &x);
    if (rc) {
        s->rc = rc;
        s->end = true;
        return 1;
    }
    if (foff + x.vlen <= s->lo)
        return 0;
    return s->cb(s->arg, foff, &x);
}

int meta_extent_scan(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                     meta_extent_cb cb, void *arg)
{
    uint8_t pk[8], sk[16];
    struct xscan s = {.lo = lo, .hi = hi, .start = lo, .cb = cb, .arg = arg};
    if (hi <= lo)
        return 0;
    meta_be64_put(pk, ino);
    xkey(sk, ino, lo);
    struct meta_range r = {.prefix = pk, .plen = 8, .start = sk, .slen = 16, .reverse = true};
    int rc = meta__scan(t, META_DBI_EXTENTS, &r, prev_ent, &s);
    if (rc < 0)
        return rc;
    xkey(sk, ino, s.start);
    r.reverse = false;
    rc = meta__scan(t, META_DBI_EXTENTS, &r, fwd_ent, &s);
    return s.end ? s.rc : rc;
}

/* ---- block CRCs ---- */

static void ckey(uint8_t *k, uint32_t dev, uint64_t off)
{
    meta_be32_put(k, dev);
    meta_be64_put(k + 4, off);
}

uint32_t meta_bcrc_get(struct meta_txn *t, uint32_t dev, uint64_t off, uint32_t len,
                       uint32_t *out)
{
    uint8_t k[12];
    struct meta_val v;
    ckey(k, dev, off);
    if (meta__get(t, META_DBI_XCRC, k, 12, &v) != 0)
        return 0;
    uint32_t nb = (uint32_t)(v.len / sizeof(uint32_t));
    if (v.len % sizeof(uint32_t) || nb > META_BCRC_MAX ||
        nb != (len + META_BCRC_BLOCK - 1) / META_BCRC_BLOCK)
        return 0; /* malformed: the caller verifies the whole extent instead */
    memcpy(out, v.data, v.len);
    return nb;
}

int meta_bcrc_put(struct meta_txn *t, uint32_t dev, uint64_t off, const uint32_t *bcrc,
                  uint32_t nb)
{
    uint8_t k[12];
    ckey(k, dev, off);
    return meta__put(t, META_DBI_XCRC, k, 12, bcrc, nb * sizeof(uint32_t), 0);
}

int meta_bcrc_del(struct meta_txn *t, uint32_t dev, uint64_t off)
{
    uint8_t k[12];
    ckey(k, dev, off);
    return meta__del(t, META_DBI_XCRC, k, 12);
}

/* ---- shared extents ---- */

uint32_t meta_xref_get(struct meta_txn *t, uint32_t dev, uint64_t off)
{
    uint8_t k[12];
    struct meta_val v;
    ckey(k, dev, off);
    if (meta__get(t, META_DBI_XREF, k, 12, &v) != 0 || v.len != 4)
        return 1;
    uint32_t n = meta_be32_get(v.data);
    return n < 2 ? 1 : n;
}

int meta_xref_set(struct meta_txn *t, uint32_t dev, uint64_t off, uint32_t holders)
{
    uint8_t k[12], v[4];
    ckey(k, dev, off);
    if (holders <= 1) {
        int rc = meta__del(t, META_DBI_XREF, k, 12);
        return rc == -ENOENT ? 0 : rc;
    }
    meta_be32_put(v, holders);
    return meta__put(t, META_DBI_XREF, k, 12, v, 4, 0);
}

static int xref_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key;
    (void)val;
    if (klen == 12 && vlen == 4)
        *(bool *)arg = true;
    return klen == 12 && vlen == 4 ? 1 : 0;
}

bool meta_xref_any(struct meta_txn *t)
{
    bool any = false;
    struct meta_range r = {0};
    meta__scan(t, META_DBI_XREF, &r, xref_ent, &any);
    return any;
}

struct xrscan {
    meta_xref_cb cb;
    void *arg;
};

static int xref_scan_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct xrscan *s = arg;
    if (klen != 12 || vlen != 4)
        return 0;
    return s->cb(s->arg, meta_be32_get(key), meta_be64_get((const uint8_t *)key + 4),
                 meta_be32_get(val));
}

int meta_xref_scan(struct meta_txn *t, meta_xref_cb cb, void *arg)
{
    struct xrscan s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_XREF, &r, xref_scan_ent, &s);
}

/* ---- whole-table scans (the store check) ---- */

struct xall {
    meta_extent_all_cb cb;
    void *arg;
};

static int xall_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct xall *s = arg;
    struct meta_extent x;
    if (klen != 16 || extent_decode(val, vlen, &x) != 0)
        return 0;
    return s->cb(s->arg, meta_be64_get(key), meta_be64_get((const uint8_t *)key + 8), &x);
}

int meta_extent_scan_all(struct meta_txn *t, meta_extent_all_cb cb, void *arg)
{
    struct xall s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_EXTENTS, &r, xall_ent, &s);
}

struct ball {
    meta_bcrc_cb cb;
    void *arg;
};

static int ball_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct ball *s = arg;
    (void)val;
    (void)vlen;
    if (klen != 12)
        return 0;
    return s->cb(s->arg, meta_be32_get(key), meta_be64_get((const uint8_t *)key + 4));
}

int meta_bcrc_scan(struct meta_txn *t, meta_bcrc_cb cb, void *arg)
{
    struct ball s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_XCRC, &r, ball_ent, &s);
}
