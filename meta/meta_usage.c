/* SPDX-License-Identifier: Apache-2.0
 * meta_usage: usage records (meta_usage.h).
 * Thread: any thread holding the txn. */
#include "meta_usage.h"

#include <string.h>

#include "meta_int.h"
#include "srv_err.h"

static size_t ukey(uint8_t *k, uint32_t tenant, uint64_t ino)
{
    meta_be32_put(k, tenant);
    meta_be64_put(k + 4, ino);
    return 12;
}

int meta_usage_get(struct meta_txn *t, uint32_t tenant, uint64_t ino, struct meta_usage *out)
{
    uint8_t k[12];
    return meta__get_fixed(t, META_DBI_USAGE, k, ukey(k, tenant, ino), out, sizeof(*out));
}

int meta_usage_put(struct meta_txn *t, uint32_t tenant, uint64_t ino, const struct meta_usage *u)
{
    uint8_t k[12];
    return meta__put(t, META_DBI_USAGE, k, ukey(k, tenant, ino), u, sizeof(*u), 0);
}

int meta_usage_del(struct meta_txn *t, uint32_t tenant, uint64_t ino)
{
    uint8_t k[12];
    return meta__del(t, META_DBI_USAGE, k, ukey(k, tenant, ino));
}

struct uscan {
    meta_usage_cb cb;
    void *arg;
};

static int usage_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct uscan *s = arg;
    struct meta_usage u;
    if (klen != 12)
        return 0;
    if (vlen == sizeof(u))
        memcpy(&u, val, sizeof(u));
    return s->cb(s->arg, meta_be32_get(key), meta_be64_get((const uint8_t *)key + 4),
                 vlen == sizeof(u) ? &u : NULL);
}

int meta_usage_scan(struct meta_txn *t, meta_usage_cb cb, void *arg)
{
    struct uscan s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_USAGE, &r, usage_ent, &s);
}
