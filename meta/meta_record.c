/* SPDX-License-Identifier: Apache-2.0
 * meta_record: generic records of tenants/, qos/, server/ and nfs/
 * (meta_record.h), each call one transaction.
 * Thread: any thread but the writer. */
#include "meta_record.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"

static int table_of(enum meta_rec_table tb, enum meta_dbi *dbi)
{
    if ((int)tb < 0 || tb >= META_REC__COUNT)
        return -EINVAL;
    *dbi = (enum meta_dbi)(META_DBI_T_TENANTS + (int)tb);
    return 0;
}

int meta_record_get(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen,
                    void **val, size_t *vlen)
{
    struct meta_txn *t;
    struct meta_val v;
    enum meta_dbi dbi;
    int rc = table_of(tb, &dbi);
    *val = NULL;
    *vlen = 0;
    if (rc)
        return rc;
    if (klen == 0 || klen > META_REC_KEY_MAX)
        return klen ? -ENAMETOOLONG : -EINVAL;
    rc = meta_rtxn_begin(m, &t);
    if (rc)
        return rc;
    rc = meta__get(t, dbi, key, klen, &v);
    if (rc == 0) {
        *val = malloc(v.len ? v.len : 1);
        if (!*val) {
            rc = -ENOMEM;
        } else {
            memcpy(*val, v.data, v.len);
            *vlen = v.len;
        }
    }
    meta_rtxn_end(t);
    return rc;
}

struct rec_op {
    enum meta_dbi dbi;
    const void *key;
    size_t klen;
    const void *val;
    size_t vlen;
    unsigned flags;
    bool del;
};

static int rec_fn(struct meta_txn *t, void *arg)
{
    struct rec_op *a = arg;
    if (a->del)
        return meta__del(t, a->dbi, a->key, a->klen);
    return meta__put(t, a->dbi, a->key, a->klen, a->val, a->vlen,
                     (a->flags & META_REC_NOOVERWRITE) ? META_NOOVERWRITE : 0);
}

int meta_record_put(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen,
                    const void *val, size_t vlen, unsigned flags)
{
    struct rec_op a = {.key = key, .klen = klen, .val = val, .vlen = vlen, .flags = flags};
    int rc = table_of(tb, &a.dbi);
    if (rc)
        return rc;
    if (klen == 0 || klen > META_REC_KEY_MAX)
        return klen ? -ENAMETOOLONG : -EINVAL;
    return meta_submit(m, rec_fn, &a, 0);
}

int meta_record_del(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen)
{
    struct rec_op a = {.key = key, .klen = klen, .del = true};
    int rc = table_of(tb, &a.dbi);
    if (rc)
        return rc;
    if (klen == 0 || klen > META_REC_KEY_MAX)
        return klen ? -ENOENT : -EINVAL;
    return meta_submit(m, rec_fn, &a, 0);
}

struct rec_scan {
    meta_record_cb cb;
    void *arg;
};

static int rec_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct rec_scan *s = arg;
    return s->cb(s->arg, key, klen, val, vlen) ? 1 : 0;
}

int meta_record_scan(struct meta_env *m, enum meta_rec_table tb, const void *start, size_t slen,
                     meta_record_cb cb, void *arg)
{
    struct meta_txn *t;
    enum meta_dbi dbi;
    struct rec_scan s = {cb, arg};
    int rc = table_of(tb, &dbi);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(m, &t);
    if (rc)
        return rc;
    struct meta_range r = {0};
    if (start && slen) {
        r.start = start;
        r.slen = slen > META_REC_KEY_MAX ? META_REC_KEY_MAX : slen;
    }
    rc = meta__scan(t, dbi, &r, rec_ent, &s);
    meta_rtxn_end(t);
    return rc == 1 ? 0 : rc;
}
