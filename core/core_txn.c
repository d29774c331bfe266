/* SPDX-License-Identifier: Apache-2.0
 * core_txn: record-level helpers of the namespace core over one LMDB txn:
 * inodes, directory entries (with stable readdir cookies), directory key
 * paths, the per-bucket key index and object metadata; permission and name
 * checks. Layouts are documented in meta/meta_schema.h.
 * Thread: any thread holding a txn; write helpers only inside writer ops. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "srv_err.h"
#include "srv_log.h"

void core__now(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
}

int core__ino_get(struct core *c, MDB_txn *t, uint64_t ino, struct meta_inode *out)
{
    uint8_t k[8];
    MDB_val v;
    meta_be64_put(k, ino);
    int rc = meta_get(t, core__dbi(c, META_DBI_INODES), k, 8, &v);
    if (rc)
        return rc;
    if (v.mv_size != sizeof(*out) || ((const uint8_t *)v.mv_data)[0] != META_INODE_REC_VER) {
        srv_log(ERROR, META, "inode %llu: malformed record (%zu bytes)", (unsigned long long)ino,
                v.mv_size);
        return SRV_ECORRUPT;
    }
    memcpy(out, v.mv_data, sizeof(*out));
    return 0;
}

int core__ino_put(struct core *c, MDB_txn *t, uint64_t ino, const struct meta_inode *rec)
{
    uint8_t k[8];
    meta_be64_put(k, ino);
    return meta_put(t, core__dbi(c, META_DBI_INODES), k, 8, rec, sizeof(*rec), 0);
}

int core__ino_get_p(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t ino,
                    uint32_t gen, struct meta_inode *out)
{
    int rc = core__ino_get(c, t, ino, out);
    if (rc == -ENOENT)
        return SRV_ESTALE;
    if (rc)
        return rc;
    if (out->tenant != p->tenant || (gen != 0 && gen != out->gen))
        return SRV_ESTALE;
    return 0;
}

int core__dir_get_p(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t dir,
                    uint32_t want, struct meta_inode *out)
{
    int rc = core__ino_get_p(c, t, p, dir, 0, out);
    if (rc)
        return rc;
    if (out->type != CORE_DIR)
        return -ENOTDIR;
    return want ? core__perm(p, out, want) : 0;
}

void core__attr_fill(const struct meta_inode *r, uint64_t ino, struct core_attr *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    out->gen = r->gen;
    out->tenant = r->tenant;
    out->type = (enum core_ftype)r->type;
    out->mode = r->mode;
    out->nlink = r->nlink;
    out->uid = r->uid;
    out->gid = r->gid;
    out->size = r->size;
    out->used = r->used;
    out->atime.tv_sec = r->atime_s;
    out->atime.tv_nsec = r->atime_ns;
    out->mtime.tv_sec = r->mtime_s;
    out->mtime.tv_nsec = r->mtime_ns;
    out->ctime.tv_sec = r->ctime_s;
    out->ctime.tv_nsec = r->ctime_ns;
    out->btime.tv_sec = r->btime_s;
    out->btime.tv_nsec = r->btime_ns;
    out->change = r->change;
    out->parent = r->parent;
    out->flags = r->flags & 0xff;
    out->bucket = r->bucket;
}

void core__touch(struct meta_inode *r, bool mtime, bool ctime)
{
    struct timespec now;
    core__now(&now);
    if (mtime) {
        r->mtime_s = now.tv_sec;
        r->mtime_ns = (uint32_t)now.tv_nsec;
    }
    if (ctime) {
        r->ctime_s = now.tv_sec;
        r->ctime_ns = (uint32_t)now.tv_nsec;
    }
    r->change++;
}

int core__ino_alloc(struct core *c, MDB_txn *t, uint64_t *ino)
{
    MDB_val v;
    uint8_t buf[8];
    int rc = meta_get(t, core__dbi(c, META_DBI_META), "next_ino", 8, &v);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    if (v.mv_size != 8)
        return SRV_ECORRUPT;
    *ino = meta_be64_get(v.mv_data);
    meta_be64_put(buf, *ino + 1);
    return meta_put(t, core__dbi(c, META_DBI_META), "next_ino", 8, buf, 8, 0);
}

bool core__in_group(const struct core_principal *p, uint32_t gid)
{
    if (p->gid == gid)
        return true;
    for (uint32_t i = 0; i < p->ngids && i < CORE_MAX_GIDS; i++)
        if (p->gids[i] == gid)
            return true;
    return false;
}

int core__perm(const struct core_principal *p, const struct meta_inode *r, uint32_t want)
{
    uint32_t bits;
    if (p->flags & CORE_P_SUPER) {
        /* super may execute only what some execute bit allows (as root) */
        if ((want & CORE_MAY_X) && r->type == CORE_REG && !(r->mode & 0111))
            return -EACCES;
        return 0;
    }
    if (p->uid == r->uid)
        bits = (r->mode >> 6) & 7;
    else if (core__in_group(p, r->gid))
        bits = (r->mode >> 3) & 7;
    else
        bits = r->mode & 7;
    return (bits & want) == want ? 0 : -EACCES;
}

int core__name_check(const char *name, size_t len)
{
    if (len == 0)
        return SRV_EBADNAME;
    if (len > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return SRV_EBADNAME;
    if (memchr(name, '/', len) || memchr(name, '\0', len))
        return SRV_EBADNAME;
    return 0;
}

int core__bucket_name_check(const char *n, size_t len)
{
    if (len < 3 || len > 63)
        return SRV_EBADNAME;
    bool all_digits_dots = true;
    int dots = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '.' && ch != '-')
            return SRV_EBADNAME;
        if ((i == 0 || i == len - 1) && !alnum)
            return SRV_EBADNAME;
        if (ch == '.') {
            dots++;
            if (i > 0 && (n[i - 1] == '.' || n[i - 1] == '-'))
                return SRV_EBADNAME;
            if (i + 1 < len && n[i + 1] == '-')
                return SRV_EBADNAME;
        }
        if (!(ch == '.' || (ch >= '0' && ch <= '9')))
            all_digits_dots = false;
    }
    if (all_digits_dots && dots == 3)
        return SRV_EBADNAME; /* looks like an IPv4 address */
    if (len >= 4 && memcmp(n, "xn--", 4) == 0)
        return SRV_EBADNAME;
    if (len >= 8 && memcmp(n + len - 8, "-s3alias", 8) == 0)
        return SRV_EBADNAME;
    return 0;
}

/* ---- directory entries ---- */

static size_t dkey(uint8_t *k, uint64_t dir, const char *name, size_t len)
{
    meta_be64_put(k, dir);
    memcpy(k + 8, name, len);
    return 8 + len;
}

int core__dirent_get(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                     struct meta_dirent *out)
{
    uint8_t k[8 + CORE_NAME_MAX];
    MDB_val v;
    if (len > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    int rc = meta_get(t, core__dbi(c, META_DBI_DIRENTS), k, dkey(k, dir, name, len), &v);
    if (rc)
        return rc;
    if (v.mv_size != sizeof(*out))
        return SRV_ECORRUPT;
    memcpy(out, v.mv_data, sizeof(*out));
    return 0;
}

_Static_assert(CORE_COOKIE_MIN == META_COOKIE_BASE && CORE_COOKIE_MAX == META_COOKIE_MAX,
               "core.h states the stored cookie range");

int core__dirent_add(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                     uint64_t ino, uint32_t type)
{
    uint8_t k[8 + CORE_NAME_MAX], ck[16];
    uint8_t cv[8 + CORE_NAME_MAX];
    struct meta_dirent de = {.ino = ino, .type = type};
    MDB_val v;
    uint64_t cookie = META_COOKIE_BASE | (meta_hash64(name, len) >> 1);
    if (cookie > META_COOKIE_MAX)
        cookie = META_COOKIE_BASE;
    int rc;

    meta_be64_put(ck, dir);
    for (;;) {
        meta_be64_put(ck + 8, cookie);
        rc = meta_get(t, core__dbi(c, META_DBI_DIRCOOKIE), ck, 16, &v);
        if (rc == -ENOENT)
            break;
        if (rc)
            return rc;
        cookie = cookie >= META_COOKIE_MAX ? META_COOKIE_BASE : cookie + 1;
    }
    de.cookie = cookie;
    rc = meta_put(t, core__dbi(c, META_DBI_DIRENTS), k, dkey(k, dir, name, len), &de, sizeof(de),
                  MDB_NOOVERWRITE);
    if (rc)
        return rc;
    meta_be64_put(cv, ino);
    memcpy(cv + 8, name, len);
    return meta_put(t, core__dbi(c, META_DBI_DIRCOOKIE), ck, 16, cv, 8 + len, 0);
}

int core__dirent_del(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len)
{
    uint8_t k[8 + CORE_NAME_MAX], ck[16];
    struct meta_dirent de;
    int rc = core__dirent_get(c, t, dir, name, len, &de);
    if (rc)
        return rc;
    rc = meta_del(t, core__dbi(c, META_DBI_DIRENTS), k, dkey(k, dir, name, len));
    if (rc)
        return rc;
    meta_be64_put(ck, dir);
    meta_be64_put(ck + 8, de.cookie);
    rc = meta_del(t, core__dbi(c, META_DBI_DIRCOOKIE), ck, 16);
    return rc == -ENOENT ? SRV_ECORRUPT : rc;
}

/* ---- directory key paths ---- */

int core__dirpath_get(struct core *c, MDB_txn *t, uint64_t dir, char *buf, size_t *len)
{
    uint8_t k[8];
    MDB_val v;
    meta_be64_put(k, dir);
    int rc = meta_get(t, core__dbi(c, META_DBI_DIRPATH), k, 8, &v);
    if (rc)
        return rc;
    if (v.mv_size > CORE_KEY_MAX)
        return SRV_ECORRUPT;
    if (v.mv_size)
        memcpy(buf, v.mv_data, v.mv_size);
    *len = v.mv_size;
    return 0;
}

int core__dirpath_put(struct core *c, MDB_txn *t, uint64_t dir, const char *path, size_t len)
{
    uint8_t k[8];
    meta_be64_put(k, dir);
    return meta_put(t, core__dbi(c, META_DBI_DIRPATH), k, 8, path, len, 0);
}

int core__key_of(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                 bool isdir, char *buf, size_t *klen)
{
    size_t dl;
    int rc = core__dirpath_get(c, t, dir, buf, &dl);
    if (rc)
        return rc;
    if (dl + len + (isdir ? 1 : 0) > CORE_KEY_MAX)
        return -ENAMETOOLONG;
    memcpy(buf + dl, name, len);
    dl += len;
    if (isdir)
        buf[dl++] = '/';
    *klen = dl;
    return 0;
}

/* ---- key index ---- */

static size_t kkey(uint8_t *k, uint64_t bucket, const char *key, size_t klen)
{
    meta_be64_put(k, bucket);
    return 8 + meta_keyenc(key, klen, k + 8);
}

static bool kval_matches(const MDB_val *v, const char *key, size_t klen)
{
    struct meta_keyval kv;
    if (v->mv_size < sizeof(kv))
        return false;
    memcpy(&kv, v->mv_data, sizeof(kv));
    if (klen <= META_KEY_VERBATIM)
        return kv.taillen == 0;
    if (kv.taillen != klen - META_KEY_HEAD || v->mv_size != sizeof(kv) + kv.taillen)
        return false;
    return memcmp((const char *)v->mv_data + sizeof(kv), key + META_KEY_HEAD, kv.taillen) == 0;
}

int core__kidx_get(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen,
                   uint64_t *ino, uint32_t *type)
{
    uint8_t k[8 + META_KEYENC_MAX];
    MDB_val v;
    struct meta_keyval kv;
    int rc = meta_get(t, core__dbi(c, META_DBI_KEYIDX), k, kkey(k, bucket, key, klen), &v);
    if (rc)
        return rc;
    if (!kval_matches(&v, key, klen))
        return -ENOENT;
    memcpy(&kv, v.mv_data, sizeof(kv));
    *ino = kv.ino;
    if (type)
        *type = kv.type;
    return 0;
}

int core__kidx_readable(struct core *c, MDB_txn *t, const struct core_principal *p,
                        uint64_t bucket, const char *key, size_t klen, uint64_t *ino,
                        struct meta_inode *r)
{
    int rc = core__kidx_get(c, t, bucket, key, klen, ino, NULL);
    if (rc)
        return rc;
    rc = core__ino_get(c, t, *ino, r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    return core__perm(p, r, CORE_MAY_R);
}

int core__inline_get(struct core *c, MDB_txn *t, uint64_t ino, MDB_val *v)
{
    uint8_t k[8];
    meta_be64_put(k, ino);
    int rc = meta_get(t, core__dbi(c, META_DBI_INLINE), k, 8, v);
    if (rc == -ENOENT) {
        v->mv_size = 0;
        rc = 0;
    }
    return rc;
}

int core__kidx_put(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen,
                   uint64_t ino, uint32_t type)
{
    uint8_t k[8 + META_KEYENC_MAX];
    uint8_t v[sizeof(struct meta_keyval) + CORE_KEY_MAX];
    struct meta_keyval kv = {.ino = ino, .type = type, .taillen = 0};
    MDB_val old;
    size_t kl = kkey(k, bucket, key, klen);
    int rc = meta_get(t, core__dbi(c, META_DBI_KEYIDX), k, kl, &old);
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
    return meta_put(t, core__dbi(c, META_DBI_KEYIDX), k, kl, v, sizeof(kv) + kv.taillen, 0);
}

int core__kidx_del(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen)
{
    uint8_t k[8 + META_KEYENC_MAX];
    MDB_val v;
    size_t kl = kkey(k, bucket, key, klen);
    int rc = meta_get(t, core__dbi(c, META_DBI_KEYIDX), k, kl, &v);
    if (rc)
        return rc;
    if (!kval_matches(&v, key, klen))
        return -ENOENT;
    return meta_del(t, core__dbi(c, META_DBI_KEYIDX), k, kl);
}

size_t core__kidx_decode(const MDB_val *k, const MDB_val *v, char *buf, struct meta_keyval *kv)
{
    size_t el = k->mv_size - 8;
    memset(kv, 0, sizeof(*kv));
    if (v->mv_size >= sizeof(*kv))
        memcpy(kv, v->mv_data, sizeof(*kv));
    if (kv->taillen == 0 || v->mv_size < sizeof(*kv) + kv->taillen ||
        kv->taillen > CORE_KEY_MAX - META_KEY_HEAD) {
        memcpy(buf, (const char *)k->mv_data + 8, el);
        return el;
    }
    memcpy(buf, (const char *)k->mv_data + 8, META_KEY_HEAD);
    memcpy(buf + META_KEY_HEAD, (const char *)v->mv_data + sizeof(*kv), kv->taillen);
    return META_KEY_HEAD + kv->taillen;
}

int core__kidx_scan(struct core *c, MDB_txn *t, uint64_t bucket, const char *prefix,
                    size_t plen, core__kidx_cb cb, void *arg)
{
    uint8_t sk[8 + META_KEYENC_MAX];
    char kb[CORE_KEY_MAX + 1];
    size_t hl = plen < META_KEY_HEAD ? plen : META_KEY_HEAD;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc;

    meta_be64_put(sk, bucket);
    memcpy(sk + 8, prefix, hl);
    rc = mdb_cursor_open(t, core__dbi(c, META_DBI_KEYIDX), &cur);
    if (rc)
        return meta_err(rc);
    k.mv_data = sk;
    k.mv_size = 8 + hl;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        struct meta_keyval kv;
        if (k.mv_size < 8 || meta_be64_get(k.mv_data) != bucket)
            break;
        size_t kl = core__kidx_decode(&k, &v, kb, &kv);
        if (kl < plen || memcmp(kb, prefix, plen) != 0) {
            if (memcmp(kb, prefix, kl < hl ? kl : hl) > 0)
                break; /* index order is exact on key heads */
            continue;
        }
        int res = cb(arg, kb, kl, &kv);
        if (res) {
            mdb_cursor_close(cur);
            return res;
        }
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND || rc == 0 ? 0 : meta_err(rc);
}

/* ---- object metadata ---- */

int core__objmeta_put(struct core *c, MDB_txn *t, uint64_t ino, const char *etag,
                      const void *meta, size_t metalen)
{
    uint8_t k[8];
    size_t el = etag ? strlen(etag) : 0;
    if (el > CORE_ETAG_MAX)
        el = CORE_ETAG_MAX;
    uint8_t *v = malloc(1 + el + metalen);
    if (!v)
        return -ENOMEM;
    v[0] = (uint8_t)el;
    if (el)
        memcpy(v + 1, etag, el);
    if (metalen)
        memcpy(v + 1 + el, meta, metalen);
    meta_be64_put(k, ino);
    int rc = meta_put(t, core__dbi(c, META_DBI_OBJMETA), k, 8, v, 1 + el + metalen, 0);
    free(v);
    return rc;
}

int core__objmeta_get(struct core *c, MDB_txn *t, uint64_t ino, char *etag, void **meta,
                      size_t *metalen)
{
    uint8_t k[8];
    MDB_val v;
    etag[0] = '\0';
    if (meta) {
        *meta = NULL;
        *metalen = 0;
    }
    meta_be64_put(k, ino);
    int rc = meta_get(t, core__dbi(c, META_DBI_OBJMETA), k, 8, &v);
    if (rc)
        return rc;
    const uint8_t *b = v.mv_data;
    if (v.mv_size < 1 || (size_t)b[0] + 1 > v.mv_size || b[0] > CORE_ETAG_MAX)
        return SRV_ECORRUPT;
    memcpy(etag, b + 1, b[0]);
    etag[b[0]] = '\0';
    if (meta) {
        size_t ml = v.mv_size - 1 - b[0];
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
