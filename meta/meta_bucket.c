/* SPDX-License-Identifier: Apache-2.0
 * meta_bucket: per-bucket configuration records (meta_bucket.h).
 * Thread: any thread holding the txn. */
#include "meta_bucket.h"

#include <errno.h>
#include <string.h>

#include "meta_int.h"

static void bkey(uint8_t *k, uint64_t bucket, uint8_t kind)
{
    meta_be64_put(k, bucket);
    k[8] = kind;
}

int meta_bucketcfg_get(struct meta_txn *t, uint64_t bucket, uint8_t kind, const void **val,
                       size_t *len)
{
    uint8_t k[9];
    struct meta_val v;
    bkey(k, bucket, kind);
    int rc = meta__get(t, META_DBI_BUCKETCFG, k, 9, &v);
    if (rc)
        return rc;
    *val = v.data;
    *len = v.len;
    return 0;
}

int meta_bucketcfg_put(struct meta_txn *t, uint64_t bucket, uint8_t kind, const void *val,
                       size_t len)
{
    uint8_t k[9];
    if (len == 0)
        return -EINVAL;
    bkey(k, bucket, kind);
    return meta__put(t, META_DBI_BUCKETCFG, k, 9, val, len, 0);
}

int meta_bucketcfg_del(struct meta_txn *t, uint64_t bucket, uint8_t kind)
{
    uint8_t k[9];
    bkey(k, bucket, kind);
    return meta__del(t, META_DBI_BUCKETCFG, k, 9);
}

struct bscan {
    uint8_t kind;
    meta_bucketcfg_cb cb;
    void *arg;
};

static int bcfg_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct bscan *s = arg;
    if (klen != 9)
        return 0;
    uint8_t kind = ((const uint8_t *)key)[8];
    if (s->kind && kind != s->kind)
        return 0;
    return s->cb(s->arg, meta_be64_get(key), kind, val, vlen);
}

int meta_bucketcfg_scan(struct meta_txn *t, uint8_t kind, meta_bucketcfg_cb cb, void *arg)
{
    struct bscan s = {kind, cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_BUCKETCFG, &r, bcfg_ent, &s);
}
