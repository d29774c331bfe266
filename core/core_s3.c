/* SPDX-License-Identifier: Apache-2.0
 * core_s3: the object view used by S3 (the namespace sub-module,
 * core_ns_int.h): buckets (top-level directories of a tenant root), key
 * lookup/delete/metadata, the key peek of GETs, key-ordered listing from the
 * per-bucket key index.
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
 * core_key_peek resolves bucket + key + metadata and, for an object whose
 * whole content is inline, the bytes, all in one read transaction. It never
 * touches the extent store, never waits for the writer thread and never
 * computes anything expensive (it answers -EAGAIN instead), so an event-loop
 * thread may call it: the only blocking it can do is a page fault on the LMDB
 * map, which is accepted for this path (docs/architecture.md).
 *
 * ETags: the S3 front end computes them for uploads. A file changed through
 * NFS has its ETag dropped (unless it was written in order, which gives its
 * MD5 at once); the background worker computes it once the file settled
 * (core_bg.c), and the first core_key_lookup before that recomputes the MD5
 * of its content (files up to CORE_ETAG_MD5_MAX bytes) and stores it, unless
 * the file changed meanwhile. Until then, it reports "<16 hex ino><16 hex
 * change>-1": multipart form, which S3 clients do not treat as an MD5.
 * Thread: any. */
#include "core_ns_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "srv_err.h"
#include "srv_log.h"

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

void core__etag_synth(const struct meta_inode *r, uint64_t ino, char *etag)
{
    if (r->type == CORE_DIR || r->size == 0)
        snprintf(etag, CORE_ETAG_MAX + 1, "%s", EMPTY_MD5);
    else
        snprintf(etag, CORE_ETAG_MAX + 1, "%016" PRIx64 "%016" PRIx64 "-1", ino, r->change);
}

/* The inode of @p key in @p bucket, which @p p may read. @return 0, -ENOENT,
 * SRV_ECORRUPT (index names a missing inode), -EACCES, or a meta error. */
static int kidx_readable(struct meta_txn *t, const struct core_principal *p, uint64_t bucket,
                         const char *key, size_t klen, uint64_t *ino, struct meta_inode *r)
{
    int rc = meta_keyidx_get(t, bucket, key, klen, ino, NULL);
    if (rc)
        return rc;
    rc = meta_inode_get(t, *ino, r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    return core__perm(p, r, CORE_MAY_R);
}

static int bucket_get(struct core *c, struct meta_txn *t, const struct core_principal *p,
                      uint64_t bucket, struct meta_inode *b)
{
    int rc = core__ino_get_p(t, p, bucket, 0, b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b->flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    return rc;
}

static int root_of(struct meta_txn *t, uint32_t tenant, uint64_t *root)
{
    int rc = meta_root_get(t, tenant, root);
    return rc == -ENOENT ? -EACCES : rc;
}

/* ---- buckets ---- */

struct bucket_scan {
    struct meta_txn *t;
    core_bucket_cb cb;
    void *arg;
};

static int bucket_ent(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct bucket_scan *s = arg;
    struct meta_inode r;
    struct core_attr attr;
    (void)cookie;
    if (meta_inode_get(s->t, ino, &r) != 0)
        return 0;
    core__attr_fill(&r, ino, &attr);
    return s->cb(s->arg, name, len, &attr) ? 1 : 0;
}

int core_bucket_list(struct core *c, const struct core_principal *p, core_bucket_cb cb, void *arg)
{
    struct bucket_scan s = {NULL, cb, arg};
    uint64_t root;
    int rc = meta_rtxn_begin(c->meta, &s.t);
    if (rc)
        return rc;
    rc = root_of(s.t, p->tenant, &root);
    if (rc == 0)
        rc = meta_dirent_scan_names(s.t, root, bucket_ent, &s);
    meta_rtxn_end(s.t);
    return rc == 1 ? 0 : rc;
}

struct bucket_op {
    struct core *c;
    const struct core_principal *p;
    const char *name;
    size_t len;
    struct core_attr *out;
};

static int bucket_create_fn(struct meta_txn *t, void *arg)
{
    struct bucket_op *a = arg;
    struct core_principal sp = *a->p;
    struct meta_inode r;
    uint64_t root, ino;
    int rc = root_of(t, a->p->tenant, &root);
    if (rc)
        return rc;
    sp.flags |= CORE_P_SUPER;
    rc = core__node_create(a->c, t, &sp, root, a->name, a->len, CORE_DIR,
                           core__bucket_mode(a->p->fmode), 0, NULL, 0, &ino, &r);
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

static int bucket_delete_fn(struct meta_txn *t, void *arg)
{
    struct bucket_op a2, *a = arg;
    struct core_principal sp = *a->p;
    uint64_t root;
    (void)a2;
    int rc = root_of(t, a->p->tenant, &root);
    if (rc)
        return rc;
    sp.flags |= CORE_P_SUPER;
    rc = core__node_unlink(a->c, t, &sp, root, a->name, a->len, true, 0, NULL);
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

/* Bucket @p name of @p p's tenant: its inode number and record. */
static int bucket_find(struct meta_txn *t, const struct core_principal *p, const char *name,
                       size_t namelen, uint64_t *ino, struct meta_inode *r)
{
    struct meta_dirent de;
    uint64_t root;
    if (namelen == 0 || namelen > CORE_NAME_MAX)
        return SRV_ENOBUCKET;
    int rc = meta_root_get(t, p->tenant, &root);
    if (rc == 0)
        rc = meta_dirent_get(t, root, name, namelen, &de);
    if (rc == 0)
        rc = core__ino_get_p(t, p, de.ino, 0, r);
    if (rc == -ENOENT || rc == SRV_ESTALE || rc == -ENAMETOOLONG ||
        (rc == 0 && !(r->flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    if (rc == 0)
        *ino = de.ino;
    return rc;
}

int core_bucket_lookup(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out)
{
    struct meta_txn *t;
    struct meta_inode r;
    uint64_t ino = 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_find(t, p, name, namelen, &ino, &r);
    meta_rtxn_end(t);
    if (rc == 0 && out)
        core__attr_fill(&r, ino, out);
    return rc;
}

/* The blob of bucket @p ino into @p meta (heap, NULL when none). */
static int bucket_meta(struct meta_txn *t, uint64_t ino, void **meta, size_t *len)
{
    char etag[CORE_ETAG_MAX + 1];
    *meta = NULL;
    *len = 0;
    int rc = meta_objmeta_get(t, ino, etag, sizeof(etag), meta, len);
    return rc == -ENOENT ? 0 : rc;
}

int core_bucket_get(struct core *c, const struct core_principal *p, const char *name,
                    size_t namelen, struct core_objinfo *out)
{
    struct meta_txn *t;
    struct meta_inode r;
    uint64_t ino = 0;
    memset(out, 0, sizeof(*out));
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_find(t, p, name, namelen, &ino, &r);
    if (rc == 0)
        rc = bucket_meta(t, ino, &out->meta, &out->metalen);
    meta_rtxn_end(t);
    if (rc == 0)
        core__attr_fill(&r, ino, &out->attr);
    return rc;
}

/* Apply an S3 ACL's permission bits (@p mode < 0: none) to @p r. */
static void mode_apply(struct meta_inode *r, int mode)
{
    if (mode >= 0)
        r->mode = (r->mode & 07000) | ((uint32_t)mode & 0777);
}

struct set_meta_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    const void *meta;
    size_t metalen;
    int mode;
};

static int bucket_set_meta_fn(struct meta_txn *t, void *arg)
{
    struct set_meta_op *a = arg;
    struct meta_inode b;
    int rc = bucket_get(a->c, t, a->p, a->bucket, &b);
    if (rc)
        return rc;
    rc = meta_objmeta_put(t, a->bucket, NULL, a->meta, a->metalen);
    if (rc)
        return rc;
    mode_apply(&b, a->mode);
    core__touch(&b, false, true);
    return meta_inode_put(t, a->bucket, &b);
}

int core_bucket_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                         const void *meta, size_t metalen, int mode)
{
    struct set_meta_op a = {c, p, bucket, meta, metalen, mode};
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    return meta_submit(c->meta, bucket_set_meta_fn, &a, 0);
}

/* ---- key lookup / delete / metadata ---- */

int core_key_lookup(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen, struct core_objinfo *out)
{
    return core_key_lookup_at(c, p, bucket, key, keylen, CORE_READ_NONE, out);
}

int core_key_lookup_at(struct core *c, const struct core_principal *p, uint64_t bucket,
                       const char *key, size_t keylen, int64_t read_at, struct core_objinfo *out)
{
    struct meta_txn *t;
    struct meta_inode b, r;
    uint64_t ino;
    bool isdir;
    int rc = core__key_check(key, keylen, &isdir);
    memset(out, 0, sizeof(*out));
    if (rc)
        return rc;
    rc = core__cm_key(c, p, bucket, key, keylen);
    if (rc == 0)
        rc = core__cm_meta(c, p, bucket, key, keylen, read_at); /* the remote's metadata */
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_get(c, t, p, bucket, &b);
    if (rc)
        goto out;
    rc = kidx_readable(t, p, bucket, key, keylen, &ino, &r);
    if (rc == -ENOENT && !isdir && core__ver_marker(c, t, bucket, key, keylen, out) == 0)
        rc = -ENOENT; /* its newest version is a delete marker: out says which */
    if (rc)
        goto out;
    core__attr_fill(&r, ino, &out->attr);
    core__attr_pend(c, &out->attr);
    rc = core__ver_current(c, t, bucket, ino, &r, out);
    if (rc)
        goto out;
    /* with writes pending the stored ETag (of the committed bytes) does not
     * fit what a GET returns: compute it, but store none (they may be lost) */
    bool pending = r.type == CORE_REG && core__pend_has_data(c, ino);
    rc = meta_objmeta_get(t, ino, out->etag, CORE_ETAG_MAX + 1, &out->meta, &out->metalen);
    if (rc == -ENOENT)
        rc = 0;
    if (pending)
        out->etag[0] = '\0';
    bool compute = rc == 0 && out->etag[0] == '\0' && r.type == CORE_REG &&
                   out->attr.size > 0 && out->attr.size <= CORE_ETAG_MD5_MAX;
    if (rc == 0 && out->etag[0] == '\0')
        core__etag_synth(&r, ino, out->etag);
out:
    meta_rtxn_end(t);
    if (rc == 0 && compute) {
        char md5[CORE_ETAG_MAX + 1];
        if (core__etag_compute(c, r.tenant, ino, out->attr.size, r.change, !pending, false, md5) ==
            0)
            memcpy(out->etag, md5, sizeof(md5));
    }
    if (rc) {
        free(out->meta);
        out->meta = NULL;
        out->metalen = 0;
    }
    return rc;
}

int core__parent_of_key(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                        bool isdir, uint64_t *dir, size_t *nameoff)
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
    int rc = meta_keyidx_get(t, bucket, key, i, dir, &type);
    if (rc == 0 && type != CORE_DIR)
        rc = SRV_ECORRUPT;
    return rc;
}

int core__implicit_cleanup(struct core *c, struct meta_txn *t, const struct core_principal *p,
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
        int rc = meta_keyidx_get(t, bucket, key, i, &dino, &type);
        if (rc == -ENOENT)
            return 0;
        if (rc)
            return rc;
        rc = meta_inode_get(t, dino, &r);
        if (rc)
            return rc;
        if (!(r.flags & CORE_A_IMPLICIT) || r.nchild > 0)
            return 0;
        rc = core__parent_of_key(t, bucket, key, i, true, &gp, &noff);
        if (rc)
            return rc;
        rc = core__node_unlink(c, t, &sp, gp, key + noff, i - 1 - noff, true, 0, NULL);
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
    struct core_delres *out;
    int mode;
};

static int key_delete_fn(struct meta_txn *t, void *arg)
{
    struct key_op *a = arg;
    struct core *c = a->c;
    struct meta_inode b;
    uint64_t ino, dir;
    size_t noff;
    int rc = bucket_get(c, t, a->p, a->bucket, &b);
    if (rc)
        return rc;
    rc = meta_keyidx_get(t, a->bucket, a->key, a->klen, &ino, NULL);
    if (rc == -ENOENT && !a->isdir) {
        /* a versioned bucket marks even a key with no current version deleted */
        struct meta_bucketcfg cfg;
        rc = core__ver_cfg(c, t, a->bucket, &cfg);
        if (rc == 0 && cfg.versioning != META_VERS_NONE) {
            rc = core__perm(a->p, &b, CORE_MAY_W | CORE_MAY_X);
            if (rc == 0)
                rc = core__ver_delete_t(c, t, a->p, &cfg, a->bucket, a->key, a->klen, 0, NULL, NULL,
                                        0, 0, NULL, false, a->out);
            return rc;
        }
        return rc;
    }
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    rc = core__parent_of_key(t, a->bucket, a->key, a->klen, a->isdir, &dir, &noff);
    if (rc)
        return rc;
    size_t nlen = (a->isdir ? a->klen - 1 : a->klen) - noff;
    rc = core__node_unlink(c, t, a->p, dir, a->key + noff, nlen, a->isdir, CORE__UNL_VERSIONED,
                           a->out);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    return core__implicit_cleanup(c, t, a->p, a->bucket, a->key, a->klen, a->isdir);
}

int core__key_delete(struct core *c, const struct core_principal *p, uint64_t bucket,
                     const char *key, size_t keylen, struct core_delres *out)
{
    struct key_op a = {c, p, bucket, key, keylen, false, NULL, 0, out, -1};
    int rc = core__key_check(key, keylen, &a.isdir);
    if (rc == 0 && !(p->flags & CORE_P_READONLY))
        rc = core__cm_key(c, p, bucket, key, keylen); /* a cache bucket: the name is known */
    if (rc)
        return rc;
    return core__ver_submit(c, bucket, key, keylen, key_delete_fn, &a);
}

int core_key_delete(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen)
{
    return core_key_delete_v(c, p, bucket, key, keylen, NULL, 0, NULL);
}

static int key_meta_fn(struct meta_txn *t, void *arg)
{
    struct key_op *a = arg;
    struct core *c = a->c;
    struct meta_inode b, r;
    char etag[CORE_ETAG_MAX + 1];
    uint64_t ino;
    int rc = bucket_get(c, t, a->p, a->bucket, &b);
    if (rc)
        return rc;
    rc = meta_keyidx_get(t, a->bucket, a->key, a->klen, &ino, NULL);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc)
        return rc;
    if (!(a->p->flags & CORE_P_SUPER) && a->p->uid != r.uid &&
        core__perm(a->p, &r, CORE_MAY_W) != 0)
        return -EACCES;
    rc = meta_objmeta_get(t, ino, etag, CORE_ETAG_MAX + 1, NULL, NULL);
    if (rc == -ENOENT)
        etag[0] = '\0';
    else if (rc)
        return rc;
    rc = meta_objmeta_put(t, ino, etag, a->meta, a->metalen);
    if (rc)
        return rc;
    mode_apply(&r, a->mode);
    core__touch(&r, false, true);
    return meta_inode_put(t, ino, &r);
}

int core_key_set_meta_mode(struct core *c, const struct core_principal *p, uint64_t bucket,
                           const char *key, size_t keylen, const void *meta, size_t metalen,
                           int mode)
{
    struct key_op a = {c, p, bucket, key, keylen, false, meta, metalen, NULL, mode};
    int rc = core__key_check(key, keylen, &a.isdir);
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    if ((rc = core__cm_ro(c, p, bucket)) != 0)
        return rc;
    return meta_submit(c->meta, key_meta_fn, &a, 0);
}

int core_key_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *key, size_t keylen, const void *meta, size_t metalen)
{
    return core_key_set_meta_mode(c, p, bucket, key, keylen, meta, metalen, -1);
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

/* State of one core_list call. */
struct lstate {
    struct core *c;
    struct meta_txn *t;
    const char *prefix, *after, *delim;
    size_t prefixlen, afterlen, delimlen;
    uint32_t max, count;
    core_list_cb cb;
    void *arg;
    bool *truncated;
    char cp[CORE_KEY_MAX + 1]; /* the last rolled-up prefix */
};

/* Decide about one key of the prefix, in binary order. @return 1 to stop. */
static int list_entry(void *arg, const char *kb, size_t kl, const struct meta_keyval *kv,
                      size_t *skip)
{
    struct lstate *s = arg;
    if (s->afterlen && bytes_cmp(kb, kl, s->after, s->afterlen) <= 0)
        return 0;
    /* Symbolic links are not objects (GET answers NoSuchKey): never listed,
     * so a listing never names a key that cannot be read. */
    if (kv->type == CORE_LNK)
        return 0;
    const char *dpos = NULL;
    if (s->delimlen && kl > s->prefixlen)
        dpos = memmem(kb + s->prefixlen, kl - s->prefixlen, s->delim, s->delimlen);
    if (dpos) {
        /* A prefix always has a visible entry in its range (a non-empty
         * directory has visible children). The scan skips the rest of its
         * range; one not after @p after was delivered on an earlier page. */
        size_t cpl = (size_t)(dpos - kb) + s->delimlen;
        memcpy(s->cp, kb, cpl);
        *skip = cpl;
        if (s->afterlen && bytes_cmp(s->cp, cpl, s->after, s->afterlen) <= 0)
            return 0;
        if (s->count == s->max) {
            *s->truncated = true;
            return 1;
        }
        struct core_listent e = {.key = s->cp, .keylen = cpl, .is_prefix = true};
        if (s->cb(s->arg, &e))
            return 1;
        s->count++;
        return 0;
    }
    struct meta_inode r;
    if (meta_inode_get(s->t, kv->ino, &r) != 0 || (r.type == CORE_DIR && r.nchild > 0))
        return 0; /* non-empty directories list through their children */
    if (s->count == s->max) {
        *s->truncated = true;
        return 1;
    }
    struct core_objinfo info;
    memset(&info, 0, sizeof(info));
    core__attr_fill(&r, kv->ino, &info.attr);
    core__attr_pend(s->c, &info.attr);
    bool pending = r.type == CORE_REG && core__pend_has_data(s->c, kv->ino);
    if (pending ||
        meta_objmeta_get(s->t, kv->ino, info.etag, CORE_ETAG_MAX + 1, NULL, NULL) != 0 ||
        !info.etag[0]) {
        /* unknown (or pending writes changed it): the placeholder of what a GET returns */
        struct meta_inode cur = r;
        cur.size = info.attr.size;
        cur.change = info.attr.change;
        core__etag_synth(&cur, kv->ino, info.etag);
    }
    struct core_listent e = {.key = kb, .keylen = kl, .is_prefix = false, .info = &info};
    if (s->cb(s->arg, &e))
        return 1;
    s->count++;
    return 0;
}

int core_list(struct core *c, const struct core_principal *p, uint64_t bucket, const char *prefix,
              size_t prefixlen, const char *after, size_t afterlen, const char *delim,
              size_t delimlen, uint32_t max, core_list_cb cb, void *arg, bool *truncated)
{
    struct meta_txn *t;
    struct meta_inode b;
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
    /* a cache bucket: the remote's names first (a delimiter other than "/" lists the
     * whole subtree) */
    rc = core__cm_list(c, p, bucket, prefix, prefixlen, delimlen != 1 || delim[0] != '/');
    if (rc)
        return rc;
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
    if (!afterlen && delimlen == 1 && delim[0] == '/' &&
        (prefixlen == 0 || prefix[prefixlen - 1] == '/')) {
        /* a listing of a directory from its start: directory prefetch, in the background */
        uint64_t dino = bucket;
        uint32_t dtype = CORE_DIR;
        struct meta_inode dr;
        if ((prefixlen == 0 || meta_keyidx_get(t, bucket, prefix, prefixlen, &dino, &dtype) == 0) &&
            dtype == CORE_DIR && (dino == bucket || meta_inode_get(t, dino, &dr) == 0))
            core__pf_note(c, t, dino == bucket ? &b : &dr, dino);
    }
    rc = meta_keyidx_scan(t, bucket, prefix, prefixlen, afterlen ? after : NULL, afterlen,
                          list_entry, s);
    if (rc == 1)
        rc = 0;
out:
    meta_rtxn_end(t);
    free(s);
    return rc;
}

/* ---- key peek: the S3 GET fast path ---- */

/* The bucket half of a key peek (the tenant's root, the bucket's entry, its
 * inode and its metadata blob: four B-tree look-ups, about a tenth of a small
 * GET's instructions) is remembered by each thread for its last PEEK_MEMO
 * buckets, with the environment and the snapshot it was read in
 * (meta_txn_snapshot): a later peek whose read txn sees the same snapshot
 * would read the same records, so it takes them from here; any commit since
 * makes the snapshot differ and the bucket is read again. What is not in the
 * store (whether the bucket is in cache mode) is asked every time. A blob over
 * PEEK_MEMO_META bytes, and an engine without snapshots, are not remembered. */
#define PEEK_MEMO 4
#define PEEK_MEMO_META 1024

struct peek_memo {
    uint64_t env, snap;      /* meta_env_gen, meta_txn_snapshot; snap 0: unused */
    uint32_t tenant, pflags; /* the principal's, as bucket_find reads them */
    size_t namelen;
    char name[CORE_NAME_MAX];
    uint64_t ino;
    struct meta_inode b;
    size_t bmetalen;
    unsigned char bmeta[PEEK_MEMO_META];
};

static _Thread_local struct peek_memo peek_memo[PEEK_MEMO];
static _Thread_local unsigned peek_memo_next;

/* bucket_find and bucket_meta of @p name, from this thread's memo when it
 * holds them for @p t's snapshot. @return as bucket_find, -ENOMEM. */
static int bucket_peek(struct core *c, struct meta_txn *t, const struct core_principal *p,
                       const char *name, size_t namelen, uint64_t *ino, struct meta_inode *b,
                       void **bmeta, size_t *bmetalen)
{
    uint64_t env = meta_env_gen(c->meta), snap = meta_txn_snapshot(t);
    uint32_t pflags = p->flags & CORE_P_VERSIONS;
    bool memo = snap != 0 && namelen > 0 && namelen <= CORE_NAME_MAX;
    for (unsigned i = 0; memo && i < PEEK_MEMO; i++) {
        const struct peek_memo *m = &peek_memo[i];
        if (m->snap != snap || m->env != env || m->tenant != p->tenant || m->pflags != pflags ||
            m->namelen != namelen || memcmp(m->name, name, namelen) != 0)
            continue;
        *bmeta = NULL;
        *bmetalen = 0;
        if (m->bmetalen) {
            if (!(*bmeta = malloc(m->bmetalen)))
                return -ENOMEM;
            memcpy(*bmeta, m->bmeta, m->bmetalen);
            *bmetalen = m->bmetalen;
        }
        *ino = m->ino;
        *b = m->b;
        return 0;
    }
    int rc = bucket_find(t, p, name, namelen, ino, b);
    if (rc == 0)
        rc = bucket_meta(t, *ino, bmeta, bmetalen);
    if (rc == 0 && memo && *bmetalen <= PEEK_MEMO_META) {
        struct peek_memo *m = &peek_memo[peek_memo_next++ % PEEK_MEMO];
        m->env = env;
        m->snap = snap;
        m->tenant = p->tenant;
        m->pflags = pflags;
        m->namelen = namelen;
        memcpy(m->name, name, namelen);
        m->ino = *ino;
        m->b = *b;
        m->bmetalen = *bmetalen;
        if (*bmetalen)
            memcpy(m->bmeta, *bmeta, *bmetalen);
    }
    return rc;
}

int core_key_peek(struct core *c, const struct core_principal *p, const char *bucket,
                  size_t bucketlen, const char *key, size_t keylen, void *buf, size_t bufsize,
                  struct core_peek *out)
{
    struct meta_txn *t = NULL;
    struct meta_inode b, r;
    const void *vd;
    size_t vl;
    bool isdir;
    memset(out, 0, sizeof(*out));
    int rc = core__key_check(key, keylen, &isdir);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    /* bucket: as core_bucket_get, then core_key_lookup's check of it */
    rc = bucket_peek(c, t, p, bucket, bucketlen, &out->bucket, &b, &out->bmeta, &out->bmetalen);
    if (rc == 0 && core_cache_bucket(c, out->bucket, NULL))
        rc = -EAGAIN; /* a cache bucket: core_key_lookup asks the remote when due */
    if (rc)
        goto out;
    core__attr_fill(&b, out->bucket, &out->battr);
    uint64_t ino;
    rc = kidx_readable(t, p, out->bucket, key, keylen, &ino, &r);
    if (rc == -ENOENT && core__vb_maybe(c, out->bucket))
        rc = -EAGAIN; /* maybe a delete marker: core_key_lookup says */
    if (rc)
        goto out;
    core__attr_fill(&r, ino, &out->info.attr);
    rc = core__ver_current(c, t, out->bucket, ino, &r, &out->info);
    if (rc)
        goto out;
    if (r.type == CORE_REG && core__pend_any(c)) {
        /* pending writes: their size, times and ETag come from core_key_lookup */
        struct core__pend *pp = core__pend_get(c, ino, false);
        if (pp) {
            core__pend_put(c, pp);
            rc = -EAGAIN;
            goto out;
        }
    }
    rc = meta_objmeta_get(t, ino, out->info.etag, CORE_ETAG_MAX + 1, &out->info.meta,
                          &out->info.metalen);
    if (rc == -ENOENT)
        rc = 0;
    if (rc)
        goto out;
    if (!out->info.etag[0]) {
        if (r.type == CORE_REG && r.size > 0 && r.size <= CORE_ETAG_MD5_MAX) {
            rc = -EAGAIN; /* core_key_lookup computes and stores the MD5 */
            goto out;
        }
        core__etag_synth(&r, ino, out->info.etag);
    }
    if (r.type != CORE_REG || r.size == 0) {
        out->data = true;
        goto out;
    }
    if (!(r.flags & META_I_INLINE) || r.size > bufsize)
        goto out;
    rc = core__inline_get(t, ino, &vd, &vl);
    if (rc)
        goto out;
    size_t have = vl < r.size ? vl : (size_t)r.size;
    memcpy(buf, vd, have);
    memset((char *)buf + have, 0, (size_t)r.size - have);
    out->n = (size_t)r.size;
    out->data = true;
    atomic_fetch_add(&c->bytes_read, out->n);
out:
    meta_rtxn_end(t);
    if (rc) {
        free(out->info.meta);
        out->info.meta = NULL;
        out->info.metalen = 0;
        out->data = false;
    }
    return rc;
}
