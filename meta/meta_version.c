/* SPDX-License-Identifier: Apache-2.0
 * meta_version: version chains and the inode -> version map (meta_version.h).
 * A version's key is its chain id and the complement of its vseq, so a scan
 * of a chain meets the newest version first; the header's key is the chain
 * id alone, so it sorts before its versions.
 * Thread: any thread holding the txn. */
#include "meta_version.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"

static void vkey(uint8_t *k, uint64_t chain, uint64_t vseq)
{
    meta_be64_put(k, chain);
    meta_be64_put(k + 8, ~vseq);
}

int meta_vchain_get(struct meta_txn *t, uint64_t chain, struct meta_vchain *h, const char **key)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_VERSIONS, chain, &v);
    if (rc)
        return rc;
    if (v.len < sizeof(*h))
        return SRV_ECORRUPT;
    memcpy(h, v.data, sizeof(*h));
    if (v.len != sizeof(*h) + h->keylen || h->keylen == 0 || h->keylen > META_KEY_MAX)
        return SRV_ECORRUPT;
    if (key)
        *key = (const char *)v.data + sizeof(*h);
    return 0;
}

int meta_vchain_put(struct meta_txn *t, uint64_t chain, const struct meta_vchain *h,
                    const char *key)
{
    uint8_t v[sizeof(*h) + META_KEY_MAX];
    if (h->keylen == 0 || h->keylen > META_KEY_MAX)
        return -EINVAL;
    memcpy(v, h, sizeof(*h));
    memcpy(v + sizeof(*h), key, h->keylen);
    return meta__put64(t, META_DBI_VERSIONS, chain, v, sizeof(*h) + h->keylen);
}

int meta_vchain_del(struct meta_txn *t, uint64_t chain)
{
    return meta__del64(t, META_DBI_VERSIONS, chain);
}

int meta_version_get(struct meta_txn *t, uint64_t chain, uint64_t vseq, struct meta_version *out)
{
    uint8_t k[16];
    vkey(k, chain, vseq);
    return meta__get_fixed(t, META_DBI_VERSIONS, k, 16, out, sizeof(*out));
}

int meta_version_put(struct meta_txn *t, uint64_t chain, uint64_t vseq,
                     const struct meta_version *v)
{
    uint8_t k[16];
    vkey(k, chain, vseq);
    return meta__put(t, META_DBI_VERSIONS, k, 16, v, sizeof(*v), 0);
}

int meta_version_del(struct meta_txn *t, uint64_t chain, uint64_t vseq)
{
    uint8_t k[16];
    vkey(k, chain, vseq);
    return meta__del(t, META_DBI_VERSIONS, k, 16);
}

struct vscan {
    meta_version_cb cb;
    void *arg;
};

static int version_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct vscan *s = arg;
    struct meta_version v;
    if (klen != 16)
        return 0; /* the header */
    uint64_t vseq = ~meta_be64_get((const uint8_t *)key + 8);
    if (vlen != sizeof(v))
        return s->cb(s->arg, vseq, NULL);
    memcpy(&v, val, sizeof(v));
    return s->cb(s->arg, vseq, &v);
}

int meta_version_scan(struct meta_txn *t, uint64_t chain, uint64_t after, meta_version_cb cb,
                      void *arg)
{
    uint8_t pk[8], sk[16];
    struct vscan s = {cb, arg};
    meta_be64_put(pk, chain);
    struct meta_range r = {.prefix = pk, .plen = 8};
    if (after) {
        vkey(sk, chain, after);
        r.start = sk;
        r.slen = 16;
        r.after = true;
    }
    return meta__scan(t, META_DBI_VERSIONS, &r, version_ent, &s);
}

int meta_vino_get(struct meta_txn *t, uint64_t ino, uint64_t *chain, uint64_t *vseq)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_VINO, ino, &v);
    if (rc)
        return rc;
    if (v.len != 16)
        return SRV_ECORRUPT;
    *chain = meta_be64_get(v.data);
    *vseq = meta_be64_get((const uint8_t *)v.data + 8);
    return 0;
}

int meta_vino_put(struct meta_txn *t, uint64_t ino, uint64_t chain, uint64_t vseq)
{
    uint8_t v[16];
    meta_be64_put(v, chain);
    meta_be64_put(v + 8, vseq);
    return meta__put64(t, META_DBI_VINO, ino, v, 16);
}

int meta_vino_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_VINO, ino);
}

/* ---- whole-table scans (the store check) ---- */

struct vall {
    meta_vchain_cb ccb;
    meta_vall_cb vcb;
    meta_vino_cb icb;
    void *arg;
};

static int vall_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct vall *s = arg;
    if (klen == 8) {
        struct meta_vchain h;
        if (vlen < sizeof(h))
            return s->ccb(s->arg, meta_be64_get(key), NULL, NULL);
        memcpy(&h, val, sizeof(h));
        if (vlen != sizeof(h) + h.keylen || h.keylen == 0 || h.keylen > META_KEY_MAX)
            return s->ccb(s->arg, meta_be64_get(key), NULL, NULL);
        return s->ccb(s->arg, meta_be64_get(key), &h, (const char *)val + sizeof(h));
    }
    if (klen != 16)
        return 0;
    struct meta_version v;
    uint64_t chain = meta_be64_get(key), vseq = ~meta_be64_get((const uint8_t *)key + 8);
    if (vlen != sizeof(v))
        return s->vcb(s->arg, chain, vseq, NULL);
    memcpy(&v, val, sizeof(v));
    return s->vcb(s->arg, chain, vseq, &v);
}

int meta_versions_scan(struct meta_txn *t, meta_vchain_cb ccb, meta_vall_cb vcb, void *arg)
{
    struct vall s = {ccb, vcb, NULL, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_VERSIONS, &r, vall_ent, &s);
}

static int vino_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct vall *s = arg;
    if (klen != 8 || vlen != 16)
        return 0;
    return s->icb(s->arg, meta_be64_get(key), meta_be64_get(val),
                  meta_be64_get((const uint8_t *)val + 8));
}

int meta_vino_scan(struct meta_txn *t, meta_vino_cb cb, void *arg)
{
    struct vall s = {NULL, NULL, cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_VINO, &r, vino_ent, &s);
}
