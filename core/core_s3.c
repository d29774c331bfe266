/* SPDX-License-Identifier: Apache-2.0
 * core_s3: the object view used by S3: buckets (top-level directories of a
 * tenant root), key lookup/delete/metadata, key-ordered listing from the
 * per-bucket key index, whole-object uploads streamed into fresh extents.
 *
 * Key rules: 1..1024 bytes, no NUL, no empty, "." or ".." segment, no
 * segment over 255 bytes (SRV_EBADNAME). A key ending in '/' names a
 * directory. Committing "a/b/c" creates missing "a" and "a/b" as implicit
 * directories (CORE_A_IMPLICIT), removed again when an S3 delete leaves them
 * empty; a file where a directory is needed (or the reverse) is SRV_ECLASH.
 *
 * Permissions: creating or deleting needs write+search on the parent
 * directory, reading an object needs read on it (directory search bits along
 * the key are not checked for S3). Bucket create/delete is authorized by the
 * front end (tenants/), not by the tenant root's mode bits.
 *
 * ETags: the S3 front end computes them for uploads. A file changed through
 * NFS has its ETag dropped; the first core_key_lookup after the change
 * recomputes the MD5 of its content (files up to CORE_ETAG_MD5_MAX bytes)
 * and stores it, unless the file changed meanwhile. Until then, and for
 * larger files, it reports "<16 hex ino><16 hex change>-1": multipart form,
 * which S3 clients do not treat as an MD5.
 * Thread: any. */
#include "core_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "srv_err.h"
#include "srv_log.h"

#define CORE_ETAG_MD5_MAX (256ull << 20)
#define EMPTY_MD5 "d41d8cd98f00b204e9800998ecf8427e"

/* ---- keys ---- */

int core__key_check(const char *key, size_t len, bool *isdir)
{
    if (len == 0 || len > CORE_KEY_MAX)
        return SRV_EBADNAME;
    if (memchr(key, '\0', len))
        return SRV_EBADNAME;
    *isdir = key[len - 1] == '/';
    size_t end = *isdir ? len - 1 : len;
    size_t s = 0;
    if (end == 0)
        return SRV_EBADNAME;
    while (s <= end) {
        const char *sl = memchr(key + s, '/', end - s);
        size_t e = sl ? (size_t)(sl - key) : end;
        size_t n = e - s;
        if (n == 0 || n > CORE_NAME_MAX)
            return SRV_EBADNAME;
        if ((n == 1 && key[s] == '.') || (n == 2 && key[s] == '.' && key[s + 1] == '.'))
            return SRV_EBADNAME;
        s = e + 1;
    }
    return 0;
}

static void etag_synth(const struct meta_inode *r, uint64_t ino, char *etag)
{
    if (r->type == CORE_DIR || r->size == 0)
        snprintf(etag, CORE_ETAG_MAX + 1, "%s", EMPTY_MD5);
    else
        snprintf(etag, CORE_ETAG_MAX + 1, "%016" PRIx64 "%016" PRIx64 "-1", ino, r->change);
}

static int bucket_get(struct core *c, MDB_txn *t, const struct core_principal *p,
                      uint64_t bucket, struct meta_inode *b)
{
    int rc = core__ino_get_p(c, t, p, bucket, 0, b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b->flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    return rc;
}

static int root_of(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t *root)
{
    uint8_t k[4];
    MDB_val v;
    meta_be32_put(k, tenant);
    int rc = meta_get(t, core__dbi(c, META_DBI_ROOTS), k, 4, &v);
    if (rc)
        return rc == -ENOENT ? -EACCES : rc;
    *root = meta_be64_get(v.mv_data);
    return 0;
}

/* ---- buckets ---- */

int core_bucket_list(struct core *c, const struct core_principal *p, core_bucket_cb cb, void *arg)
{
    MDB_txn *t;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    uint64_t root;
    uint8_t sk[8];
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = root_of(c, t, p->tenant, &root);
    if (rc)
        goto out;
    rc = mdb_cursor_open(t, core__dbi(c, META_DBI_DIRENTS), &cur);
    if (rc) {
        rc = meta_err(rc);
        goto out;
    }
    meta_be64_put(sk, root);
    k.mv_data = sk;
    k.mv_size = 8;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        struct meta_dirent de;
        struct meta_inode r;
        struct core_attr attr;
        if (k.mv_size <= 8 || meta_be64_get(k.mv_data) != root)
            break;
        if (v.mv_size != sizeof(de))
            continue;
        memcpy(&de, v.mv_data, sizeof(de));
        if (core__ino_get(c, t, de.ino, &r) != 0)
            continue;
        core__attr_fill(&r, de.ino, &attr);
        if (cb(arg, (const char *)k.mv_data + 8, k.mv_size - 8, &attr))
            break;
    }
    rc = (rc == 0 || rc == MDB_NOTFOUND) ? 0 : meta_err(rc);
out:
    if (cur)
        mdb_cursor_close(cur);
    meta_rtxn_end(t);
    return rc;
}

struct bucket_op {
    struct core *c;
    const struct core_principal *p;
    const char *name;
    size_t len;
    struct core_attr *out;
};

static int bucket_create_fn(MDB_txn *t, void *arg)
{
    struct bucket_op *a = arg;
    struct core_principal sp = *a->p;
    struct meta_inode r;
    uint64_t root, ino;
    int rc = root_of(a->c, t, a->p->tenant, &root);
    if (rc)
        return rc;
    sp.flags |= CORE_P_SUPER;
    rc = core__node_create(a->c, t, &sp, root, a->name, a->len, CORE_DIR, 0755, 0, NULL, 0, &ino,
                           &r);
    if (rc == 0 && a->out)
        core__attr_fill(&r, ino, a->out);
    return rc;
}

int core_bucket_create(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out)
{
    struct bucket_op a = {c, p, name, namelen, out};
    int rc = core__bucket_name_check(name, namelen);
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    return meta_submit(c->meta, bucket_create_fn, &a, 0);
}

static int bucket_delete_fn(MDB_txn *t, void *arg)
{
    struct bucket_op a2, *a = arg;
    struct core_principal sp = *a->p;
    uint64_t root;
    (void)a2;
    int rc = root_of(a->c, t, a->p->tenant, &root);
    if (rc)
        return rc;
    sp.flags |= CORE_P_SUPER;
    rc = core__node_unlink(a->c, t, &sp, root, a->name, a->len, true, true);
    if (rc == -ENOENT || rc == -ENOTDIR)
        return SRV_ENOBUCKET;
    return rc;
}

int core_bucket_delete(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen)
{
    struct bucket_op a = {c, p, name, namelen, NULL};
    if (namelen == 0 || namelen > CORE_NAME_MAX)
        return SRV_ENOBUCKET;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    return meta_submit(c->meta, bucket_delete_fn, &a, 0);
}

int core_bucket_lookup(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out)
{
    MDB_txn *t;
    struct meta_dirent de;
    struct meta_inode r;
    uint64_t root;
    if (namelen == 0 || namelen > CORE_NAME_MAX)
        return SRV_ENOBUCKET;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = root_of(c, t, p->tenant, &root);
    if (rc == 0)
        rc = core__dirent_get(c, t, root, name, namelen, &de);
    if (rc == 0)
        rc = core__ino_get(c, t, de.ino, &r);
    meta_rtxn_end(t);
    if (rc == -ENOENT || rc == -EACCES)
        return SRV_ENOBUCKET;
    if (rc == 0 && out)
        core__attr_fill(&r, de.ino, out);
    return rc;
}

/* ---- key lookup / delete / metadata ---- */

static int etag_compute(struct core *c, uint32_t tenant, uint64_t ino, uint64_t size,
                        uint64_t change, bool store, char *etag);

int core_key_lookup(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen, struct core_objinfo *out)
{
    MDB_txn *t;
    struct meta_inode b, r;
    uint64_t ino;
    bool isdir;
    int rc = core__key_check(key, keylen, &isdir);
    memset(out, 0, sizeof(*out));
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_get(c, t, p, bucket, &b);
    if (rc)
        goto out;
    rc = core__kidx_readable(c, t, p, bucket, key, keylen, &ino, &r);
    if (rc)
        goto out;
    core__attr_fill(&r, ino, &out->attr);
    core__attr_pend(c, &out->attr);
    /* with writes pending the stored ETag (of the committed bytes) does not
     * fit what a GET returns: compute it, but store none (they may be lost) */
    bool pending = r.type == CORE_REG && core__pend_has_data(c, ino);
    rc = core__objmeta_get(c, t, ino, out->etag, &out->meta, &out->metalen);
    if (rc == -ENOENT)
        rc = 0;
    if (pending)
        out->etag[0] = '\0';
    bool compute = rc == 0 && out->etag[0] == '\0' && r.type == CORE_REG &&
                   out->attr.size > 0 && out->attr.size <= CORE_ETAG_MD5_MAX;
    if (rc == 0 && out->etag[0] == '\0')
        etag_synth(&r, ino, out->etag);
out:
    meta_rtxn_end(t);
    if (rc == 0 && compute) {
        char md5[CORE_ETAG_MAX + 1];
        if (etag_compute(c, r.tenant, ino, out->attr.size, r.change, !pending, md5) == 0)
            memcpy(out->etag, md5, sizeof(md5));
    }
    if (rc) {
        free(out->meta);
        out->meta = NULL;
        out->metalen = 0;
    }
    return rc;
}

struct etag_op {
    struct core *c;
    uint64_t ino;
    uint64_t change;
    const char *etag;
};

static int etag_set_fn(MDB_txn *t, void *arg)
{
    struct etag_op *a = arg;
    struct meta_inode r;
    char old[CORE_ETAG_MAX + 1];
    void *meta = NULL;
    size_t ml = 0;
    int rc = core__ino_get(a->c, t, a->ino, &r);
    if (rc)
        return rc;
    if (r.change != a->change)
        return -EAGAIN; /* changed meanwhile: keep no stale ETag */
    rc = core__objmeta_get(a->c, t, a->ino, old, &meta, &ml);
    if (rc == 0 || rc == -ENOENT)
        rc = core__objmeta_put(a->c, t, a->ino, a->etag, meta, ml);
    free(meta);
    return rc;
}

/* MD5 of a file's content, stored as its ETag if the file did not change. */
static int etag_compute(struct core *c, uint32_t tenant, uint64_t ino, uint64_t size,
                        uint64_t change, bool store, char *etag)
{
    struct core_principal sp;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int rc = 0;
    memset(&sp, 0, sizeof(sp));
    sp.tenant = tenant;
    sp.flags = CORE_P_SUPER;
    char *buf = malloc(STORE_EXTENT_MAX);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint64_t off = 0; off < size && rc == 0;) {
        size_t n = 0;
        bool eof = false;
        rc = core_read(c, &sp, ino, off, buf, STORE_EXTENT_MAX, &n, &eof);
        if (rc == 0 && n == 0)
            rc = -EAGAIN; /* shrank meanwhile */
        if (rc == 0)
            EVP_DigestUpdate(ctx, buf, n);
        off += n;
    }
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = -EIO;
    if (rc == 0) {
        for (unsigned int i = 0; i < mdlen; i++)
            snprintf(etag + 2 * i, 3, "%02x", md[i]);
        struct etag_op a = {c, ino, change, etag};
        if (store)
            rc = meta_submit(c->meta, etag_set_fn, &a, 0);
    }
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}

/* Directory holding @p key's last segment (the bucket for a top-level key). */
static int parent_of_key(struct core *c, MDB_txn *t, uint64_t bucket, const char *key,
                         size_t klen, bool isdir, uint64_t *dir, size_t *nameoff)
{
    size_t end = isdir ? klen - 1 : klen;
    size_t i = end;
    while (i > 0 && key[i - 1] != '/')
        i--;
    *nameoff = i;
    if (i == 0) {
        *dir = bucket;
        return 0;
    }
    uint32_t type;
    int rc = core__kidx_get(c, t, bucket, key, i, dir, &type);
    if (rc == 0 && type != CORE_DIR)
        rc = SRV_ECORRUPT;
    return rc;
}

/* Remove empty implicit directories from @p key's parent upwards. */
static int implicit_cleanup(struct core *c, MDB_txn *t, const struct core_principal *p,
                            uint64_t bucket, const char *key, size_t klen, bool isdir)
{
    struct core_principal sp = *p;
    size_t end = isdir ? klen - 1 : klen;
    sp.flags |= CORE_P_SUPER;
    for (;;) {
        size_t i = end;
        while (i > 0 && key[i - 1] != '/')
            i--;
        if (i == 0)
            return 0;
        /* key[0, i) is the parent directory key "x/y/" */
        uint64_t dino, gp;
        uint32_t type;
        struct meta_inode r;
        size_t noff;
        int rc = core__kidx_get(c, t, bucket, key, i, &dino, &type);
        if (rc == -ENOENT)
            return 0;
        if (rc)
            return rc;
        rc = core__ino_get(c, t, dino, &r);
        if (rc)
            return rc;
        if (!(r.flags & CORE_A_IMPLICIT) || r.nchild > 0)
            return 0;
        rc = parent_of_key(c, t, bucket, key, i, true, &gp, &noff);
        if (rc)
            return rc;
        rc = core__node_unlink(c, t, &sp, gp, key + noff, i - 1 - noff, true, true);
        if (rc)
            return rc;
        end = i - 1;
    }
}

struct key_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    const char *key;
    size_t klen;
    bool isdir;
    const void *meta;
    size_t metalen;
};

static int key_delete_fn(MDB_txn *t, void *arg)
{
    struct key_op *a = arg;
    struct core *c = a->c;
    struct meta_inode b;
    uint64_t ino, dir;
    size_t noff;
    int rc = bucket_get(c, t, a->p, a->bucket, &b);
    if (rc)
        return rc;
    rc = core__kidx_get(c, t, a->bucket, a->key, a->klen, &ino, NULL);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    rc = parent_of_key(c, t, a->bucket, a->key, a->klen, a->isdir, &dir, &noff);
    if (rc)
        return rc;
    size_t nlen = (a->isdir ? a->klen - 1 : a->klen) - noff;
    rc = core__node_unlink(c, t, a->p, dir, a->key + noff, nlen, a->isdir, true);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    return implicit_cleanup(c, t, a->p, a->bucket, a->key, a->klen, a->isdir);
}

int core_key_delete(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen)
{
    struct key_op a = {c, p, bucket, key, keylen, false, NULL, 0};
    int rc = core__key_check(key, keylen, &a.isdir);
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    rc = meta_submit(c->meta, key_delete_fn, &a, 0);
    core__pend_reap(c);
    return rc;
}

static int key_meta_fn(MDB_txn *t, void *arg)
{
    struct key_op *a = arg;
    struct core *c = a->c;
    struct meta_inode b, r;
    char etag[CORE_ETAG_MAX + 1];
    uint64_t ino;
    int rc = bucket_get(c, t, a->p, a->bucket, &b);
    if (rc)
        return rc;
    rc = core__kidx_get(c, t, a->bucket, a->key, a->klen, &ino, NULL);
    if (rc)
        return rc;
    rc = core__ino_get(c, t, ino, &r);
    if (rc)
        return rc;
    if (!(a->p->flags & CORE_P_SUPER) && a->p->uid != r.uid &&
        core__perm(a->p, &r, CORE_MAY_W) != 0)
        return -EACCES;
    rc = core__objmeta_get(c, t, ino, etag, NULL, NULL);
    if (rc == -ENOENT)
        etag[0] = '\0';
    else if (rc)
        return rc;
    rc = core__objmeta_put(c, t, ino, etag, a->meta, a->metalen);
    if (rc)
        return rc;
    core__touch(&r, false, true);
    return core__ino_put(c, t, ino, &r);
}

int core_key_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *key, size_t keylen, const void *meta, size_t metalen)
{
    struct key_op a = {c, p, bucket, key, keylen, false, meta, metalen};
    int rc = core__key_check(key, keylen, &a.isdir);
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    return meta_submit(c->meta, key_meta_fn, &a, 0);
}

/* ---- listing ---- */

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int r = m ? memcmp(a, b, m) : 0;
    if (r)
        return r;
    return al < bl ? -1 : al > bl;
}

/* Smallest key greater than every key starting with @p s (length in/out);
 * false when none exists (s is all 0xff). */
static bool key_successor(char *s, size_t *len)
{
    while (*len > 0) {
        unsigned char ch = (unsigned char)s[*len - 1];
        if (ch != 0xff) {
            s[*len - 1] = (char)(ch + 1);
            return true;
        }
        (*len)--;
    }
    return false;
}

static void seek_to(MDB_val *k, uint8_t *sk, uint64_t bucket, const char *s, size_t len)
{
    size_t hl = len < META_KEY_HEAD ? len : META_KEY_HEAD;
    meta_be64_put(sk, bucket);
    if (hl)
        memcpy(sk + 8, s, hl);
    k->mv_data = sk;
    k->mv_size = 8 + hl;
}

/* State of one core_list call. */
struct lstate {
    struct core *c;
    MDB_txn *t;
    const char *prefix, *after, *delim;
    size_t prefixlen, afterlen, delimlen;
    uint32_t max, count;
    core_list_cb cb;
    void *arg;
    bool *truncated;
    char cp[CORE_KEY_MAX + 1];   /* prefix to seek past (LST_SEEK) */
    size_t cpl;
    char skip[CORE_KEY_MAX + 1]; /* the last rolled-up prefix */
    size_t skipl;
};

enum { LST_NEXT = 0, LST_STOP = 1, LST_SEEK = 2, LST_END = 3 };

/* Decide about one key in index order. @return LST_* */
static int list_entry(struct lstate *s, const char *kb, size_t kl, const struct meta_keyval *kv)
{
    if (kl < s->prefixlen || memcmp(kb, s->prefix, s->prefixlen) != 0) {
        /* the index order is exact on the first META_KEY_HEAD bytes only */
        size_t h = s->prefixlen < META_KEY_HEAD ? s->prefixlen : META_KEY_HEAD;
        return bytes_cmp(kb, kl < h ? kl : h, s->prefix, h) > 0 ? LST_END : LST_NEXT;
    }
    if (s->skipl && kl >= s->skipl && memcmp(kb, s->skip, s->skipl) == 0)
        return LST_NEXT; /* inside a prefix already rolled up */
    if (s->afterlen && bytes_cmp(kb, kl, s->after, s->afterlen) <= 0)
        return LST_NEXT;
    /* Symbolic links are not objects (GET answers NoSuchKey): never listed,
     * so a listing never names a key that cannot be read. */
    if (kv->type == CORE_LNK)
        return LST_NEXT;
    const char *dpos = NULL;
    if (s->delimlen && kl > s->prefixlen)
        dpos = memmem(kb + s->prefixlen, kl - s->prefixlen, s->delim, s->delimlen);
    if (dpos) {
        /* A prefix always has a visible entry in its range (a non-empty
         * directory has visible children). A prefix not after @p after was
         * delivered on an earlier page: skip its whole range. */
        s->cpl = (size_t)(dpos - kb) + s->delimlen;
        memcpy(s->cp, kb, s->cpl);
        memcpy(s->skip, kb, s->cpl);
        s->skipl = s->cpl;
        if (s->afterlen && bytes_cmp(s->cp, s->cpl, s->after, s->afterlen) <= 0)
            return LST_SEEK;
        if (s->count == s->max) {
            *s->truncated = true;
            return LST_STOP;
        }
        struct core_listent e = {.key = s->cp, .keylen = s->cpl, .is_prefix = true};
        if (s->cb(s->arg, &e))
            return LST_STOP;
        s->count++;
        return LST_SEEK;
    }
    struct meta_inode r;
    if (core__ino_get(s->c, s->t, kv->ino, &r) != 0 || (r.type == CORE_DIR && r.nchild > 0))
        return LST_NEXT; /* non-empty directories list through their children */
    if (s->count == s->max) {
        *s->truncated = true;
        return LST_STOP;
    }
    struct core_objinfo info;
    memset(&info, 0, sizeof(info));
    core__attr_fill(&r, kv->ino, &info.attr);
    core__attr_pend(s->c, &info.attr);
    bool pending = r.type == CORE_REG && core__pend_has_data(s->c, kv->ino);
    if (pending || core__objmeta_get(s->c, s->t, kv->ino, info.etag, NULL, NULL) != 0 ||
        !info.etag[0]) {
        /* unknown (or pending writes changed it): the placeholder of what a GET returns */
        struct meta_inode cur = r;
        cur.size = info.attr.size;
        cur.change = info.attr.change;
        etag_synth(&cur, kv->ino, info.etag);
    }
    struct core_listent e = {.key = kb, .keylen = kl, .is_prefix = false, .info = &info};
    if (s->cb(s->arg, &e))
        return LST_STOP;
    s->count++;
    return LST_NEXT;
}

struct gkey {
    char *key;
    size_t kl;
    struct meta_keyval kv;
};

static int gkey_cmp(const void *x, const void *y)
{
    const struct gkey *a = x, *b = y;
    return bytes_cmp(a->key, a->kl, b->key, b->kl);
}

#define LIST_GROUP_MAX 100000

/* Keys longer than META_KEY_HEAD sharing one head are stored in hash order:
 * read the whole group (the cursor ends on the entry after it), sort it by
 * full key and feed it in order. @return LST_* or a negative error. */
static int list_group(struct lstate *s, MDB_cursor *cur, MDB_val *k, MDB_val *v, int *mrc)
{
    struct gkey *g = NULL;
    size_t n = 0, cap = 0;
    char head[META_KEY_HEAD];
    char kb[CORE_KEY_MAX + 1];
    int res = LST_NEXT;
    uint64_t bucket = meta_be64_get(k->mv_data);

    memcpy(head, (const char *)k->mv_data + 8, META_KEY_HEAD);
    for (*mrc = 0; *mrc == 0; *mrc = mdb_cursor_get(cur, k, v, MDB_NEXT)) {
        struct meta_keyval kv;
        if (k->mv_size <= 8 + META_KEY_HEAD || meta_be64_get(k->mv_data) != bucket ||
            memcmp((const char *)k->mv_data + 8, head, META_KEY_HEAD) != 0)
            break;
        size_t kl = core__kidx_decode(k, v, kb, &kv);
        if (n == cap) {
            if (cap >= LIST_GROUP_MAX) {
                srv_log(WARN, META, "listing: more than %d keys share a %u-byte head; their "
                        "order is approximate", LIST_GROUP_MAX, META_KEY_HEAD);
                break;
            }
            cap = cap ? cap * 2 : 64;
            struct gkey *ng = realloc(g, cap * sizeof(*ng));
            if (!ng) {
                res = -ENOMEM;
                goto out;
            }
            g = ng;
        }
        g[n].key = malloc(kl);
        if (!g[n].key) {
            res = -ENOMEM;
            goto out;
        }
        memcpy(g[n].key, kb, kl);
        g[n].kl = kl;
        g[n].kv = kv;
        n++;
    }
    if (n)
        qsort(g, n, sizeof(*g), gkey_cmp);
    for (size_t i = 0; i < n; i++) {
        res = list_entry(s, g[i].key, g[i].kl, &g[i].kv);
        if (res == LST_STOP || res == LST_END)
            break;
        res = LST_NEXT; /* LST_SEEK: the skip test drops the rest of the prefix */
    }
out:
    for (size_t i = 0; i < n; i++)
        free(g[i].key);
    free(g);
    return res;
}

/* Move past every key starting with @p cp: seek to its successor when that is
 * exact (short prefixes), else step (the skip test in list_entry drops the
 * keys inside it; a seek on a truncated head could only go backwards).
 * @return an LMDB cursor result, or -1 when no key can follow. */
static int skip_prefix(MDB_cursor *cur, MDB_val *k, MDB_val *v, uint8_t *sk, uint64_t bucket,
                       char *cp, size_t cpl)
{
    if (cpl >= META_KEY_HEAD)
        return mdb_cursor_get(cur, k, v, MDB_NEXT);
    if (!key_successor(cp, &cpl))
        return -1;
    seek_to(k, sk, bucket, cp, cpl);
    return mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
}

int core_list(struct core *c, const struct core_principal *p, uint64_t bucket, const char *prefix,
              size_t prefixlen, const char *after, size_t afterlen, const char *delim,
              size_t delimlen, uint32_t max, core_list_cb cb, void *arg, bool *truncated)
{
    MDB_txn *t;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    struct meta_inode b;
    uint8_t sk[8 + META_KEY_HEAD];
    char kb[CORE_KEY_MAX + 1];
    struct lstate *s = NULL;
    int rc;

    *truncated = false;
    if (!prefix || !prefixlen) {
        prefix = "";
        prefixlen = 0;
    }
    if (!after)
        afterlen = 0;
    if (!delim)
        delimlen = 0;
    if (prefixlen > CORE_KEY_MAX)
        return 0;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_get(c, t, p, bucket, &b);
    if (rc)
        goto out;
    rc = core__perm(p, &b, CORE_MAY_R);
    if (rc)
        goto out;
    s = calloc(1, sizeof(*s));
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    *s = (struct lstate){.c = c, .t = t, .prefix = prefix, .after = after, .delim = delim,
                         .prefixlen = prefixlen, .afterlen = afterlen, .delimlen = delimlen,
                         .max = max, .cb = cb, .arg = arg, .truncated = truncated};
    rc = mdb_cursor_open(t, core__dbi(c, META_DBI_KEYIDX), &cur);
    if (rc) {
        rc = meta_err(rc);
        goto out;
    }
    if (afterlen && bytes_cmp(after, afterlen, prefix, prefixlen) > 0)
        seek_to(&k, sk, bucket, after, afterlen);
    else
        seek_to(&k, sk, bucket, prefix, prefixlen);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0) {
        struct meta_keyval kv;
        int res;
        if (k.mv_size < 8 || meta_be64_get(k.mv_data) != bucket)
            break;
        if (k.mv_size > 8 + META_KEY_HEAD) {
            res = list_group(s, cur, &k, &v, &rc);
            if (res < 0) {
                rc = res;
                goto out;
            }
            if (res == LST_STOP || res == LST_END)
                break;
            continue; /* the cursor already stands after the group */
        }
        size_t kl = core__kidx_decode(&k, &v, kb, &kv);
        res = list_entry(s, kb, kl, &kv);
        if (res == LST_STOP || res == LST_END)
            break;
        if (res == LST_SEEK) {
            rc = skip_prefix(cur, &k, &v, sk, bucket, s->cp, s->cpl);
            if (rc == -1)
                break;
            continue;
        }
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    if (rc == MDB_NOTFOUND || rc == 0 || rc == -1)
        rc = 0;
    else if (rc > 0 || rc < -30000)
        rc = meta_err(rc);
out:
    if (cur)
        mdb_cursor_close(cur);
    meta_rtxn_end(t);
    free(s);
    return rc;
}
