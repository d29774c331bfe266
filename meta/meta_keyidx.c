/* SPDX-License-Identifier: Apache-2.0
 * meta_keyidx: the per-bucket key index and directory key paths
 * (meta_keyidx.h).
 *
 * A scan runs the one scan primitive over the bucket's entries from the head
 * of its start key. Short keys come in exact order. Long keys sharing their
 * first META_KEY_HEAD bytes come in hash order: they are collected as a group
 * (up to GROUP_MAX; a larger group is delivered in parts, its order only
 * approximate: logged) and delivered sorted. A skip asked on a short key seeks
 * past the skipped keys (a new primitive scan from their successor); inside a
 * group, or for a skip longer than a head (a seek on a cut head could only go
 * backwards), the skipped keys are stepped over.
 * Thread: any thread holding the txn. */
#include "meta_keyidx.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"
#include "srv_log.h"

#define GROUP_MAX 100000

static size_t kkey(uint8_t *k, uint64_t bucket, const char *key, size_t klen)
{
    meta_be64_put(k, bucket);
    return 8 + meta_keyenc(key, klen, k + 8);
}

static bool kval_matches(const struct meta_val *v, const char *key, size_t klen)
{
    struct meta_keyval kv;
    if (v->len < sizeof(kv))
        return false;
    memcpy(&kv, v->data, sizeof(kv));
    if (klen <= META_KEY_VERBATIM)
        return kv.taillen == 0;
    if (kv.taillen != klen - META_KEY_HEAD || v->len != sizeof(kv) + kv.taillen)
        return false;
    return memcmp((const char *)v->data + sizeof(kv), key + META_KEY_HEAD, kv.taillen) == 0;
}

static int kidx_get(struct meta_txn *t, enum meta_dbi tb, uint64_t bucket, const char *key,
                    size_t klen, uint64_t *ino, uint32_t *type)
{
    uint8_t k[8 + META_KEYENC_MAX];
    struct meta_val v;
    struct meta_keyval kv;
    int rc = meta__get(t, tb, k, kkey(k, bucket, key, klen), &v);
    if (rc)
        return rc;
    if (!kval_matches(&v, key, klen))
        return -ENOENT;
    memcpy(&kv, v.data, sizeof(kv));
    *ino = kv.ino;
    if (type)
        *type = kv.type;
    return 0;
}

static int kidx_put(struct meta_txn *t, enum meta_dbi tb, uint64_t bucket, const char *key,
                    size_t klen, uint64_t ino, uint32_t type)
{
    uint8_t k[8 + META_KEYENC_MAX];
    uint8_t v[sizeof(struct meta_keyval) + META_KEY_MAX];
    struct meta_keyval kv = {.ino = ino, .type = type, .taillen = 0};
    struct meta_val old;
    size_t kl = kkey(k, bucket, key, klen);
    int rc = meta__get(t, tb, k, kl, &old);
    if (rc == 0 && !kval_matches(&old, key, klen)) {
        srv_log(WARN, META, "key index hash collision in bucket %llu: key refused",
                (unsigned long long)bucket);
        return SRV_EBADNAME;
    }
    if (klen > META_KEY_VERBATIM)
        kv.taillen = (uint32_t)(klen - META_KEY_HEAD);
    memcpy(v, &kv, sizeof(kv));
    if (kv.taillen)
        memcpy(v + sizeof(kv), key + META_KEY_HEAD, kv.taillen);
    return meta__put(t, tb, k, kl, v, sizeof(kv) + kv.taillen, 0);
}

static int kidx_del(struct meta_txn *t, enum meta_dbi tb, uint64_t bucket, const char *key,
                    size_t klen)
{
    uint8_t k[8 + META_KEYENC_MAX];
    struct meta_val v;
    size_t kl = kkey(k, bucket, key, klen);
    int rc = meta__get(t, tb, k, kl, &v);
    if (rc)
        return rc;
    if (!kval_matches(&v, key, klen))
        return -ENOENT;
    return meta__del(t, tb, k, kl);
}

int meta_keyidx_get(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                    uint64_t *ino, uint32_t *type)
{
    return kidx_get(t, META_DBI_KEYIDX, bucket, key, klen, ino, type);
}

int meta_keyidx_put(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen, uint64_t ino,
                    uint32_t type)
{
    return kidx_put(t, META_DBI_KEYIDX, bucket, key, klen, ino, type);
}

int meta_keyidx_del(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen)
{
    return kidx_del(t, META_DBI_KEYIDX, bucket, key, klen);
}

int meta_vkey_get(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                  uint64_t *chain)
{
    return kidx_get(t, META_DBI_VKEYS, bucket, key, klen, chain, NULL);
}

int meta_vkey_put(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen, uint64_t chain)
{
    return kidx_put(t, META_DBI_VKEYS, bucket, key, klen, chain, 0);
}

int meta_vkey_del(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen)
{
    return kidx_del(t, META_DBI_VKEYS, bucket, key, klen);
}

/* The whole key of an entry (buf >= META_KEY_MAX + 1). @return its length. */
static size_t kidx_decode(const void *k, size_t kl, const void *v, size_t vl, char *buf,
                          struct meta_keyval *kv)
{
    size_t el = kl - 8;
    memset(kv, 0, sizeof(*kv));
    if (vl >= sizeof(*kv))
        memcpy(kv, v, sizeof(*kv));
    if (kv->taillen == 0 || vl < sizeof(*kv) + kv->taillen ||
        kv->taillen > META_KEY_MAX - META_KEY_HEAD) {
        memcpy(buf, (const char *)k + 8, el);
        return el;
    }
    memcpy(buf, (const char *)k + 8, META_KEY_HEAD);
    memcpy(buf + META_KEY_HEAD, (const char *)v + sizeof(*kv), kv->taillen);
    return META_KEY_HEAD + kv->taillen;
}

/* ---- scan ---- */

struct gkey {
    char *key;
    size_t kl;
    struct meta_keyval kv;
};

struct kscan {
    enum meta_dbi tb;
    uint64_t bucket;
    const char *prefix, *from;
    size_t plen, flen, hl;
    meta_keyidx_cb cb;
    void *arg;
    int rc;                       /* the callback's result that stopped the scan */
    bool stop;                    /* stopped: by the callback or past the prefix */
    bool seek;                    /* scan again from seekk */
    char skip[META_KEY_MAX + 1];  /* keys starting with these bytes are skipped */
    size_t skipl;
    uint8_t seekk[8 + META_KEY_HEAD];
    size_t seekl;
    struct gkey *g;               /* long keys sharing the head ghead */
    size_t gn, gcap;
    uint8_t ghead[META_KEY_HEAD];
    char kb[META_KEY_MAX + 1];
};

static bool starts_with(const char *k, size_t kl, const char *p, size_t pl)
{
    return kl >= pl && memcmp(k, p, pl) == 0;
}

/* Offer one whole key to the callback. @return true to stop the primitive scan. */
static bool deliver(struct kscan *s, const char *kb, size_t kl, const struct meta_keyval *kv,
                    bool grouped)
{
    if (!starts_with(kb, kl, s->prefix, s->plen)) {
        /* the order is exact on heads: past the prefix's head, no key can match */
        if (meta__keycmp(kb, kl < s->hl ? kl : s->hl, s->prefix, s->hl) > 0) {
            s->stop = true;
            return true;
        }
        return false;
    }
    if (s->skipl && starts_with(kb, kl, s->skip, s->skipl))
        return false;
    if (s->from && meta__keycmp(kb, kl, s->from, s->flen) < 0)
        return false;
    size_t n = 0;
    int rc = s->cb(s->arg, kb, kl, kv, &n);
    if (rc) {
        s->rc = rc;
        s->stop = true;
        return true;
    }
    if (n == 0)
        return false;
    if (n > kl)
        n = kl;
    memcpy(s->skip, kb, n);
    s->skipl = n;
    if (grouped || n >= META_KEY_HEAD)
        return false;
    /* seek to the smallest key after every key starting with skip */
    size_t sl = n;
    memcpy(s->seekk + 8, s->skip, sl);
    while (sl > 0 && s->seekk[8 + sl - 1] == 0xff)
        sl--;
    if (sl == 0) {
        s->stop = true; /* no key can follow */
        return true;
    }
    s->seekk[8 + sl - 1]++;
    meta_be64_put(s->seekk, s->bucket);
    s->seekl = 8 + sl;
    s->seek = true;
    return true;
}

static int gkey_cmp(const void *x, const void *y)
{
    const struct gkey *a = x, *b = y;
    return meta__keycmp(a->key, a->kl, b->key, b->kl);
}

/* Deliver the collected group in key order and empty it. @return true to stop. */
static bool group_flush(struct kscan *s)
{
    bool stop = false;
    if (s->gn)
        qsort(s->g, s->gn, sizeof(*s->g), gkey_cmp);
    for (size_t i = 0; i < s->gn; i++) {
        if (!stop)
            stop = deliver(s, s->g[i].key, s->g[i].kl, &s->g[i].kv, true);
        free(s->g[i].key);
    }
    s->gn = 0;
    return stop;
}

static int group_add(struct kscan *s, const char *kb, size_t kl, const struct meta_keyval *kv)
{
    if (s->gn == s->gcap) {
        size_t nc = s->gcap ? s->gcap * 2 : 64;
        struct gkey *ng = realloc(s->g, nc * sizeof(*ng));
        if (!ng)
            return -ENOMEM;
        s->g = ng;
        s->gcap = nc;
    }
    char *k = malloc(kl ? kl : 1);
    if (!k)
        return -ENOMEM;
    memcpy(k, kb, kl);
    s->g[s->gn++] = (struct gkey){k, kl, *kv};
    return 0;
}

static int kidx_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct kscan *s = arg;
    struct meta_keyval kv;
    if (klen <= 8 + META_KEY_HEAD) {
        if (s->gn && group_flush(s))
            return 1;
        size_t kl = kidx_decode(key, klen, val, vlen, s->kb, &kv);
        return deliver(s, s->kb, kl, &kv, false) ? 1 : 0;
    }
    if (s->gn && memcmp((const uint8_t *)key + 8, s->ghead, META_KEY_HEAD) != 0 &&
        group_flush(s))
        return 1;
    if (s->gn == GROUP_MAX) {
        srv_log(WARN, META, "listing: more than %d keys share a %u-byte head; their order is "
                "approximate", GROUP_MAX, META_KEY_HEAD);
        if (group_flush(s))
            return 1;
    }
    if (s->gn == 0)
        memcpy(s->ghead, (const uint8_t *)key + 8, META_KEY_HEAD);
    size_t kl = kidx_decode(key, klen, val, vlen, s->kb, &kv);
    int rc = group_add(s, s->kb, kl, &kv);
    if (rc) {
        s->rc = rc;
        s->stop = true;
        return 1;
    }
    return 0;
}

static int kidx_scan(struct meta_txn *t, enum meta_dbi tb, uint64_t bucket, const char *prefix,
                     size_t plen, const char *from, size_t flen, meta_keyidx_cb cb, void *arg)
{
    uint8_t pk[8];
    int rc = 0;
    struct kscan *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    *s = (struct kscan){.tb = tb,
                        .bucket = bucket,
                        .prefix = prefix ? prefix : "",
                        .plen = plen,
                        .from = from,
                        .flen = flen,
                        .cb = cb,
                        .arg = arg,
                        .hl = plen < META_KEY_HEAD ? plen : META_KEY_HEAD};
    /* the first key: the head of the later of from and the prefix */
    const char *first = from && meta__keycmp(from, flen, s->prefix, plen) > 0 ? from : s->prefix;
    size_t fl = first == from ? flen : plen;
    if (fl > META_KEY_HEAD)
        fl = META_KEY_HEAD;
    meta_be64_put(pk, bucket);
    meta_be64_put(s->seekk, bucket);
    memcpy(s->seekk + 8, first, fl);
    s->seekl = 8 + fl;
    do {
        s->seek = false;
        struct meta_range r = {.prefix = pk, .plen = 8, .start = s->seekk, .slen = s->seekl};
        rc = meta__scan(t, s->tb, &r, kidx_ent, s);
    } while (rc == 1 && s->seek);
    if (rc == 1 && s->stop)
        rc = s->rc;
    else if (rc == 0 && s->gn && group_flush(s))
        rc = s->rc;
    for (size_t i = 0; i < s->gn; i++)
        free(s->g[i].key);
    free(s->g);
    free(s);
    return rc;
}

int meta_keyidx_scan(struct meta_txn *t, uint64_t bucket, const char *prefix, size_t plen,
                     const char *from, size_t flen, meta_keyidx_cb cb, void *arg)
{
    return kidx_scan(t, META_DBI_KEYIDX, bucket, prefix, plen, from, flen, cb, arg);
}

int meta_vkey_scan(struct meta_txn *t, uint64_t bucket, const char *prefix, size_t plen,
                   const char *from, size_t flen, meta_keyidx_cb cb, void *arg)
{
    return kidx_scan(t, META_DBI_VKEYS, bucket, prefix, plen, from, flen, cb, arg);
}

/* ---- directory key paths ---- */

int meta_dirpath_get(struct meta_txn *t, uint64_t dir, char *buf, size_t *len)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_DIRPATH, dir, &v);
    if (rc)
        return rc;
    if (v.len > META_KEY_MAX)
        return SRV_ECORRUPT;
    if (v.len)
        memcpy(buf, v.data, v.len);
    *len = v.len;
    return 0;
}

int meta_dirpath_put(struct meta_txn *t, uint64_t dir, const char *path, size_t len)
{
    return meta__put64(t, META_DBI_DIRPATH, dir, path, len);
}

int meta_dirpath_del(struct meta_txn *t, uint64_t dir)
{
    return meta__del64(t, META_DBI_DIRPATH, dir);
}
