/* SPDX-License-Identifier: Apache-2.0
 * meta_tier: records of the tier's remote copies (meta_tier.h, table tierst).
 * Thread: any thread that holds a txn. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "meta_tier.h"
#include "srv_err.h"

#define REC_MAX (sizeof(struct meta_tierst) + META_KEY_MAX)

size_t meta_tier_encode(const struct meta_tier_copy *c, void *buf, size_t buflen)
{
    size_t kl = strnlen(c->key, META_KEY_MAX + 1);
    if (kl == 0 || kl > META_KEY_MAX || buflen < sizeof(struct meta_tierst) + kl)
        return 0;
    struct meta_tierst st = c->st;
    st.rec_ver = META_TIERST_REC_VER;
    st.keylen = (uint32_t)kl;
    st.etag[META_ETAG_MAX - 1] = '\0';
    memcpy(buf, &st, sizeof(st));
    memcpy((char *)buf + sizeof(st), c->key, kl);
    return sizeof(st) + kl;
}

int meta_tier_decode(const void *val, size_t len, struct meta_tier_copy *out)
{
    if (len < sizeof(struct meta_tierst))
        return SRV_ECORRUPT;
    memcpy(&out->st, val, sizeof(out->st));
    size_t kl = out->st.keylen;
    if (out->st.rec_ver != META_TIERST_REC_VER || kl == 0 || kl > META_KEY_MAX ||
        len != sizeof(struct meta_tierst) + kl)
        return SRV_ECORRUPT;
    memcpy(out->key, (const char *)val + sizeof(out->st), kl);
    out->key[kl] = '\0';
    out->st.etag[META_ETAG_MAX - 1] = '\0';
    return 0;
}

int meta_tier_get(struct meta_txn *t, uint64_t ino, struct meta_tier_copy *out)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_TIERST, ino, &v);
    if (rc)
        return rc;
    return meta_tier_decode(v.data, v.len, out);
}

int meta_tier_put(struct meta_txn *t, uint64_t ino, const struct meta_tier_copy *c)
{
    char *buf = malloc(REC_MAX);
    if (!buf)
        return -ENOMEM;
    size_t n = meta_tier_encode(c, buf, REC_MAX);
    int rc = n ? meta__put64(t, META_DBI_TIERST, ino, buf, n) : -EINVAL;
    free(buf);
    return rc;
}

int meta_tier_note_read(struct meta_txn *t, uint64_t ino, int64_t read_s)
{
    if (read_s <= 0)
        return 0;
    uint32_t v = read_s > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)read_s;
    struct meta_tier_copy *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = meta_tier_get(t, ino, c);
    if (rc == 0 && c->st.read_s < v) {
        c->st.read_s = v;
        rc = meta_tier_put(t, ino, c);
    }
    free(c);
    return rc;
}

int meta_tier_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_TIERST, ino);
}

struct tscan {
    meta_tier_cb cb;
    void *arg;
    struct meta_tier_copy c;
};

static int tier_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct tscan *s = arg;
    if (klen != 8)
        return 0;
    bool ok = meta_tier_decode(val, vlen, &s->c) == 0;
    return s->cb(s->arg, meta_be64_get(key), ok ? &s->c : NULL);
}

int meta_tier_scan(struct meta_txn *t, uint64_t after, meta_tier_cb cb, void *arg)
{
    uint8_t sk[8];
    struct tscan *s = malloc(sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cb = cb;
    s->arg = arg;
    struct meta_range r = {0};
    if (after) {
        meta_be64_put(sk, after);
        r.start = sk;
        r.slen = 8;
        r.after = true;
    }
    int rc = meta__scan(t, META_DBI_TIERST, &r, tier_ent, s);
    free(s);
    return rc;
}
