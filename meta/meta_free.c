/* SPDX-License-Identifier: Apache-2.0
 * meta_free: the store's free map over a meta txn (meta_free.h). Errors the
 * store expects: a failed put is -ENOSPC (store full) or -EIO, a failed
 * delete -EIO (a missing record too: the map and the allocator disagree), a
 * malformed record SRV_ECORRUPT; each is logged.
 * Thread: any thread holding the txn. */
#include "meta_free.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"
#include "srv_log.h"

#define FKEY_LEN 12

static void fkey(uint8_t *k, uint32_t dev, uint64_t off)
{
    meta_be32_put(k, dev);
    meta_be64_put(k + 4, off);
}

static int rec_decode(const void *k, size_t kl, const void *v, size_t vl,
                      struct store_map_rec *r)
{
    if (kl != FKEY_LEN || vl != 8) {
        srv_log(ERROR, STORE, "free map: record with key %zu / value %zu bytes", kl, vl);
        return SRV_ECORRUPT;
    }
    r->found = 1;
    r->dev = meta_be32_get(k);
    r->off = meta_be64_get((const uint8_t *)k + 4);
    r->len = meta_be64_get(v);
    return 0;
}

static int free_put(void *txn, uint32_t dev, uint64_t off, uint64_t len)
{
    uint8_t k[FKEY_LEN], v[8];
    fkey(k, dev, off);
    meta_be64_put(v, len);
    int rc = meta__put(txn, META_DBI_FREE, k, FKEY_LEN, v, 8, 0);
    if (rc) {
        srv_log(ERROR, STORE, "free map put dev=%u off=%llu: %s", dev, (unsigned long long)off,
                srv_strerror(rc));
        return rc == -ENOSPC ? -ENOSPC : -EIO;
    }
    return 0;
}

static int free_del(void *txn, uint32_t dev, uint64_t off)
{
    uint8_t k[FKEY_LEN];
    fkey(k, dev, off);
    int rc = meta__del(txn, META_DBI_FREE, k, FKEY_LEN);
    if (rc) {
        srv_log(ERROR, STORE, "free map del dev=%u off=%llu: %s", dev, (unsigned long long)off,
                srv_strerror(rc));
        return -EIO;
    }
    return 0;
}

static int take_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    int rc = rec_decode(key, klen, val, vlen, arg);
    return rc ? rc : 1;
}

static int free_near(void *txn, uint32_t dev, uint64_t off, struct store_map_rec *below,
                     struct store_map_rec *above)
{
    uint8_t k[FKEY_LEN];
    fkey(k, dev, off);
    struct meta_range r = {.start = k, .slen = FKEY_LEN};
    int rc = meta__scan(txn, META_DBI_FREE, &r, take_one, above);
    if (rc == 0 || rc == 1) {
        r.reverse = true;
        rc = meta__scan(txn, META_DBI_FREE, &r, take_one, below);
    }
    if (rc == SRV_ECORRUPT)
        srv_log(ERROR, STORE, "free map: malformed record near dev=%u off=%llu", dev,
                (unsigned long long)off);
    return rc == 1 || rc == 0 ? 0 : rc == SRV_ECORRUPT ? rc : -EIO;
}

struct fscan {
    int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len);
    void *arg;
};

static int scan_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct fscan *s = arg;
    struct store_map_rec r;
    int rc = rec_decode(key, klen, val, vlen, &r);
    return rc ? rc : s->cb(s->arg, r.dev, r.off, r.len);
}

static int free_scan(void *txn, uint32_t dev, uint64_t off,
                     int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len), void *arg)
{
    uint8_t k[FKEY_LEN];
    struct fscan s = {cb, arg};
    fkey(k, dev, off);
    struct meta_range r = {.start = k, .slen = FKEY_LEN};
    return meta__scan(txn, META_DBI_FREE, &r, scan_ent, &s);
}

void meta_free_map(struct meta_txn *t, struct store_map *out)
{
    *out = (struct store_map){.txn = t, .near = free_near, .put = free_put, .del = free_del,
                              .scan = free_scan};
}
