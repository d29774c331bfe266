/* SPDX-License-Identifier: Apache-2.0
 * meta_inode: inode records, the inode counter, inline bytes, object
 * metadata, orphans, background work and tenant roots (meta_inode.h).
 * Thread: any thread holding the txn. */
#include "meta_inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"
#include "srv_log.h"

int meta_inode_get(struct meta_txn *t, uint64_t ino, struct meta_inode *out)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_INODES, ino, &v);
    if (rc)
        return rc;
    if (v.len != sizeof(*out) || ((const uint8_t *)v.data)[0] != META_INODE_REC_VER) {
        srv_log(ERROR, META, "inode %llu: malformed record (%zu bytes)", (unsigned long long)ino,
                v.len);
        return SRV_ECORRUPT;
    }
    memcpy(out, v.data, sizeof(*out));
    return 0;
}

int meta_inode_put(struct meta_txn *t, uint64_t ino, const struct meta_inode *rec)
{
    return meta__put64(t, META_DBI_INODES, ino, rec, sizeof(*rec));
}

int meta_inode_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_INODES, ino);
}

int meta_inode_alloc(struct meta_txn *t, uint64_t *ino)
{
    struct meta_val v;
    uint8_t buf[8];
    int rc = meta__get(t, META_DBI_META, "next_ino", 8, &v);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    if (v.len != 8)
        return SRV_ECORRUPT;
    *ino = meta_be64_get(v.data);
    meta_be64_put(buf, *ino + 1);
    return meta__put(t, META_DBI_META, "next_ino", 8, buf, 8, 0);
}

struct iscan {
    meta_inode_cb cb;
    void *arg;
};

static int inode_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct iscan *s = arg;
    struct meta_inode r;
    if (klen != 8)
        return 0;
    if (vlen != sizeof(r) || ((const uint8_t *)val)[0] != META_INODE_REC_VER)
        return s->cb(s->arg, meta_be64_get(key), NULL);
    memcpy(&r, val, sizeof(r));
    return s->cb(s->arg, meta_be64_get(key), &r);
}

int meta_inode_scan(struct meta_txn *t, meta_inode_cb cb, void *arg)
{
    struct iscan s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_INODES, &r, inode_ent, &s);
}

/* ---- inline bytes ---- */

int meta_inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len)
{
    struct meta_val v;
    int rc = meta__get64(t, META_DBI_INLINE, ino, &v);
    if (rc)
        return rc;
    *data = v.data;
    *len = v.len;
    return 0;
}

int meta_inline_put(struct meta_txn *t, uint64_t ino, const void *data, size_t len)
{
    return meta__put64(t, META_DBI_INLINE, ino, data, len);
}

int meta_inline_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_INLINE, ino);
}

/* ---- object metadata: u8 etag length + etag + blob ---- */

int meta_objmeta_get(struct meta_txn *t, uint64_t ino, char *etag, size_t etagsize, void **meta,
                     size_t *metalen)
{
    struct meta_val v;
    etag[0] = '\0';
    if (meta) {
        *meta = NULL;
        *metalen = 0;
    }
    int rc = meta__get64(t, META_DBI_OBJMETA, ino, &v);
    if (rc)
        return rc;
    const uint8_t *b = v.data;
    if (v.len < 1 || (size_t)b[0] + 1 > v.len || b[0] >= etagsize)
        return SRV_ECORRUPT;
    memcpy(etag, b + 1, b[0]);
    etag[b[0]] = '\0';
    if (meta) {
        size_t ml = v.len - 1 - b[0];
        if (ml) {
            *meta = malloc(ml);
            if (!*meta)
                return -ENOMEM;
            memcpy(*meta, b + 1 + b[0], ml);
            *metalen = ml;
        }
    }
    return 0;
}

int meta_objmeta_put(struct meta_txn *t, uint64_t ino, const char *etag, const void *meta,
                     size_t metalen)
{
    size_t el = etag ? strlen(etag) : 0;
    if (el > META_ETAG_MAX)
        el = META_ETAG_MAX;
    uint8_t *v = malloc(1 + el + metalen);
    if (!v)
        return -ENOMEM;
    v[0] = (uint8_t)el;
    if (el)
        memcpy(v + 1, etag, el);
    if (metalen)
        memcpy(v + 1 + el, meta, metalen);
    int rc = meta__put64(t, META_DBI_OBJMETA, ino, v, 1 + el + metalen);
    free(v);
    return rc;
}

int meta_objmeta_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_OBJMETA, ino);
}

/* ---- orphans ---- */

int meta_orphan_put(struct meta_txn *t, uint64_t ino)
{
    return meta__put64(t, META_DBI_ORPHANS, ino, "", 0);
}

int meta_orphan_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_ORPHANS, ino);
}

int meta_orphan_get(struct meta_txn *t, uint64_t ino)
{
    struct meta_val v;
    return meta__get64(t, META_DBI_ORPHANS, ino, &v);
}

static int orphan_add(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val;
    (void)vlen;
    return klen == 8 ? meta__ids_push(arg, meta_be64_get(key)) : 0;
}

int meta_orphan_list(struct meta_txn *t, uint64_t **inos, size_t *n)
{
    struct meta__ids l = {0};
    struct meta_range r = {0};
    return meta__ids_take(&l, meta__scan(t, META_DBI_ORPHANS, &r, orphan_add, &l), inos, n);
}

/* ---- background work ---- */

int meta_dirty_get(struct meta_txn *t, uint64_t ino, struct meta_dirty *out)
{
    uint8_t k[8];
    meta_be64_put(k, ino);
    return meta__get_fixed(t, META_DBI_DIRTY, k, 8, out, sizeof(*out));
}

int meta_dirty_put(struct meta_txn *t, uint64_t ino, const struct meta_dirty *d)
{
    return meta__put64(t, META_DBI_DIRTY, ino, d, sizeof(*d));
}

int meta_dirty_del(struct meta_txn *t, uint64_t ino)
{
    return meta__del64(t, META_DBI_DIRTY, ino);
}

struct dscan {
    meta_dirty_cb cb;
    void *arg;
};

static int dirty_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct dscan *s = arg;
    struct meta_dirty d;
    if (klen != 8 || vlen != sizeof(d))
        return 0;
    memcpy(&d, val, sizeof(d));
    return s->cb(s->arg, meta_be64_get(key), &d);
}

int meta_dirty_scan(struct meta_txn *t, uint64_t after, meta_dirty_cb cb, void *arg)
{
    uint8_t sk[8];
    struct dscan s = {cb, arg};
    struct meta_range r = {0};
    if (after) {
        meta_be64_put(sk, after);
        r.start = sk;
        r.slen = 8;
        r.after = true;
    }
    return meta__scan(t, META_DBI_DIRTY, &r, dirty_ent, &s);
}

/* ---- tenant roots ---- */

int meta_root_get(struct meta_txn *t, uint32_t tenant, uint64_t *root)
{
    uint8_t k[4];
    struct meta_val v;
    meta_be32_put(k, tenant);
    int rc = meta__get(t, META_DBI_ROOTS, k, 4, &v);
    if (rc)
        return rc;
    if (v.len != 8)
        return SRV_ECORRUPT;
    *root = meta_be64_get(v.data);
    return 0;
}

int meta_root_put(struct meta_txn *t, uint32_t tenant, uint64_t root)
{
    uint8_t k[4], v[8];
    meta_be32_put(k, tenant);
    meta_be64_put(v, root);
    return meta__put(t, META_DBI_ROOTS, k, 4, v, 8, 0);
}

int meta_root_del(struct meta_txn *t, uint32_t tenant)
{
    uint8_t k[4];
    meta_be32_put(k, tenant);
    return meta__del(t, META_DBI_ROOTS, k, 4);
}
