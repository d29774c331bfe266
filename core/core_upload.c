/* SPDX-License-Identifier: Apache-2.0
 * core_upload: whole-object uploads and multipart uploads (the namespace
 * sub-module, core_ns_int.h).
 *
 * An upload streams into fresh 1 MiB extents as data arrives (nothing is
 * visible and the space is only reserved). Whole extents of a large write go
 * out back to back, up to STORE_WBATCH_MAX in flight (O_DIRECT, staged through
 * the thread's aligned buffers when the caller's bytes are not aligned), and
 * their block CRCs (the extent CRC is combined from them: one pass) are
 * computed while they are in flight; a partial extent collects in an aligned
 * buffer. Nothing is synced before the commit, which syncs the data once and
 * then links it at a key in
 * one writer op that replaces the old object (a new inode; the old one's
 * extents go through the store limbo, so readers that already hold them
 * finish reading the old bytes). Objects up to inline_max bytes are stored
 * inline. A multipart part is an upload persisted in the mpupart DBI;
 * completion links the parts' extents, in order and at their cumulative
 * offsets, into a new inode without copying. Parts' bytes are charged to the
 * bucket while the upload is open.
 * Thread: an upload handle is used by one thread at a time; the rest any. */
#include "core_ns_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "srv_err.h"
#include "srv_log.h"


struct upext {
    struct store_extent e;
    uint32_t nb;
    uint32_t bcrc[META_BCRC_MAX];
};

struct core_upload {
    struct core *c;
    struct core_principal p;
    struct core_putopt opt;
    struct core_lock lock;
    uint64_t bucket;
    uint64_t size;
    char *buf;
    size_t blen;
    struct upext *ext;
    size_t n, cap;
};

/* A batch of new extents being written: their bytes and where they go. */
struct up_batch {
    struct core_upload *u;
    const char *src[STORE_WBATCH_MAX];
    uint32_t len[STORE_WBATCH_MAX];
};

/* While extent i is in flight: its block CRCs, and its CRC combined from them. */
static uint32_t up_crc_fn(void *arg, size_t i)
{
    struct up_batch *b = arg;
    struct upext *x = &b->u->ext[b->u->n + i];
    x->nb = core__bcrc_compute(b->src[i], b->len[i], x->bcrc);
    return core__bcrc_whole(x->bcrc, x->nb, b->len[i]);
}

/* Write @p k (<= STORE_WBATCH_MAX) new extents of lengths @p len from @p src
 * (contiguous, in file order), appended to the upload's extents. */
static int up_write(struct core_upload *u, const char *src, const uint32_t *len, size_t k)
{
    struct store_extent e[STORE_WBATCH_MAX];
    struct store_wreq v[STORE_WBATCH_MAX];
    struct up_batch b = {.u = u};
    size_t got = 0;
    int rc = 0;
    if (u->n + k > u->cap) {
        size_t nc = u->cap ? u->cap * 2 : 8;
        while (nc < u->n + k)
            nc *= 2;
        struct upext *ne = realloc(u->ext, nc * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        u->ext = ne;
        u->cap = nc;
    }
    for (; got < k; got++) {
        const struct store_extent *prev = got ? &e[got - 1] : u->n ? &u->ext[u->n - 1].e : NULL;
        rc = store_alloc_near(u->c->store, prev, len[got], &e[got]);
        if (rc)
            break;
        core__cache_invalidate(u->c, &e[got]); /* space reused: no stale cached bytes */
        v[got] = (struct store_wreq){&e[got], src, len[got]};
        b.src[got] = src;
        b.len[got] = len[got];
        src += len[got];
    }
    if (rc == 0)
        rc = store_write_batch(u->c->store, v, k, up_crc_fn, &b);
    if (rc) {
        for (size_t i = 0; i < got; i++)
            store_unreserve(u->c->store, &e[i]);
        return rc;
    }
    for (size_t i = 0; i < k; i++) {
        core__zc_written(u->c, &e[i]);
        u->ext[u->n + i].e = e[i];
    }
    u->n += k;
    return 0;
}

static int up_flush(struct core_upload *u)
{
    if (u->blen == 0)
        return 0;
    uint32_t len = (uint32_t)u->blen;
    int rc = up_write(u, u->buf, &len, 1);
    if (rc == 0)
        u->blen = 0;
    return rc;
}

static void up_free(struct core_upload *u, bool unreserve)
{
    if (!u)
        return;
    if (unreserve)
        for (size_t i = 0; i < u->n; i++)
            store_unreserve(u->c->store, &u->ext[i].e);
    free(u->ext);
    free(u->buf);
    free(u);
}

int core_upload_begin(struct core *c, const struct core_principal *p, uint64_t bucket,
                      uint64_t size_hint, struct core_upload **out)
{
    struct meta_txn *t;
    struct meta_inode b;
    *out = NULL;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, p, bucket, 0, &b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b.flags & CORE_A_BUCKET)))
        rc = SRV_ENOBUCKET;
    if (rc == 0)
        rc = core__perm(p, &b, CORE_MAY_W | CORE_MAY_X);
    meta_rtxn_end(t);
    if (rc)
        return rc;
    if (size_hint != UINT64_MAX) {
        rc = core_quota_admit(c, p, bucket, size_hint, 1);
        if (rc)
            return rc;
    }
    struct core_upload *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    /* aligned: a full buffer goes to O_DIRECT as it is */
    if (posix_memalign((void **)&u->buf, STORE_ALIGN, STORE_EXTENT_MAX) != 0) {
        free(u);
        return -ENOMEM;
    }
    u->c = c;
    u->p = *p;
    u->bucket = bucket;
    *out = u;
    return 0;
}

int core_upload_write(struct core_upload *u, const void *buf, size_t len)
{
    const char *b = buf;
    while (len > 0) {
        if (u->blen == 0 && len >= STORE_EXTENT_MAX) {
            /* whole extents straight from the caller's bytes, several in flight */
            uint32_t lens[STORE_WBATCH_MAX];
            size_t k = len / STORE_EXTENT_MAX;
            if (k > STORE_WBATCH_MAX)
                k = STORE_WBATCH_MAX;
            for (size_t i = 0; i < k; i++)
                lens[i] = STORE_EXTENT_MAX;
            int rc = up_write(u, b, lens, k);
            if (rc)
                return rc;
            b += k * STORE_EXTENT_MAX;
            len -= k * STORE_EXTENT_MAX;
            u->size += k * STORE_EXTENT_MAX;
            continue;
        }
        size_t room = STORE_EXTENT_MAX - u->blen;
        size_t m = len < room ? len : room;
        memcpy(u->buf + u->blen, b, m);
        u->blen += m;
        u->size += m;
        b += m;
        len -= m;
        if (u->blen == STORE_EXTENT_MAX) {
            int rc = up_flush(u);
            if (rc)
                return rc;
        }
    }
    return 0;
}

void core_upload_set_opt(struct core_upload *u, const struct core_putopt *o)
{
    u->opt = *o;
    if (o->lock) {
        u->lock = *o->lock;
        u->opt.lock = &u->lock;
    }
}

uint64_t core_upload_size(const struct core_upload *u)
{
    return u->size;
}

void core_upload_set_principal(struct core_upload *u, const struct core_principal *p)
{
    if (p->tenant == u->p.tenant)
        u->p = *p;
}

void core_upload_abort(struct core_upload *u)
{
    up_free(u, true);
}

/* ---- linking data at a key ---- */

int core__resolve_parent(struct core *c, struct meta_txn *t, const struct core_principal *p,
                         uint64_t bucket, const char *key, size_t klen, bool isdir, uint64_t *dir,
                         size_t *nameoff)
{
    size_t end = isdir ? klen - 1 : klen;
    size_t pos = 0;
    uint64_t cur = bucket;
    for (;;) {
        const char *sl = memchr(key + pos, '/', end - pos);
        if (!sl)
            break;
        size_t s = (size_t)(sl - key);
        uint64_t ino;
        uint32_t type;
        int rc = meta_keyidx_get(t, bucket, key, s + 1, &ino, &type);
        if (rc == 0) {
            cur = ino;
        } else if (rc == -ENOENT) {
            rc = meta_keyidx_get(t, bucket, key, s, &ino, &type);
            if (rc == 0)
                return SRV_ECLASH;
            if (rc != -ENOENT)
                return rc;
            struct meta_inode r;
            rc = core__node_create(c, t, p, cur, key + pos, s - pos, CORE_DIR, 0755,
                                   CORE_A_IMPLICIT, NULL, 0, &ino, &r);
            if (rc)
                return rc;
            cur = ino;
        } else {
            return rc;
        }
        pos = s + 1;
    }
    *dir = cur;
    *nameoff = pos;
    return 0;
}

static int etag_of(struct core *c, struct meta_txn *t, uint64_t ino, const struct meta_inode *r,
                   char *etag)
{
    int rc = meta_objmeta_get(t, ino, etag, CORE_ETAG_MAX + 1, NULL, NULL);
    if (rc && rc != -ENOENT)
        return rc;
    if (!etag[0])
        core__etag_synth(r, ino, etag);
    return 0;
}

static bool etag_eq(const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);
    if (al >= 2 && a[0] == '"' && a[al - 1] == '"') {
        a++;
        al -= 2;
    }
    if (bl >= 2 && b[0] == '"' && b[bl - 1] == '"') {
        b++;
        bl -= 2;
    }
    return al == bl && memcmp(a, b, al) == 0;
}

/* A data source for link_object: either an upload or multipart parts. */
struct link_src {
    const char *inl;          /* inline bytes (with inl_len) or NULL */
    size_t inl_len;
    const struct fextv {
        uint64_t foff;
        struct store_extent e;
    } *ext;
    size_t n;
    const struct upext *up;   /* block CRCs of ext[i] (uploads), or NULL */
    bool use;                 /* extents are reservations to mark used */
    uint64_t size;
};

struct link_args {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    const char *key;
    size_t klen;
    const char *etag;
    const void *meta;
    size_t metalen;
    const char *if_etag;
    bool if_none_match;
    struct core_attr *out;
    const struct core__resv *own;  /* the caller's reservation of these bytes, or NULL */
    const struct core_putopt *opt; /* lock, version id out; NULL: none */
};

static int link_object(struct meta_txn *t, const struct link_args *a, const struct link_src *src)
{
    struct core *c = a->c;
    struct meta_inode b, r;
    struct meta_dirent de;
    uint64_t dir, ino;
    size_t noff;
    bool isdir;
    int rc = core__key_check(a->key, a->klen, &isdir);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, a->p, a->bucket, 0, &b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b.flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    if (rc)
        return rc;
    if (isdir && src->size != 0)
        return -EINVAL;
    struct meta_bucketcfg vcfg;
    rc = core__ver_cfg(c, t, a->bucket, &vcfg);
    if (rc)
        return rc;
    const struct core_lock *lk = a->opt ? a->opt->lock : NULL;
    if (lk && !(vcfg.flags & META_BC_OBJLOCK))
        return SRV_EBADSTATE;
    bool versioned = vcfg.versioning != META_VERS_NONE && !isdir;
    if (a->opt && a->opt->vid)
        a->opt->vid[0] = '\0';
    rc = core__resolve_parent(c, t, a->p, a->bucket, a->key, a->klen, isdir, &dir, &noff);
    if (rc)
        return rc;
    const char *name = a->key + noff;
    size_t nlen = (isdir ? a->klen - 1 : a->klen) - noff;
    rc = meta_dirent_get(t, dir, name, nlen, &de);
    bool exists = rc == 0;
    if (rc && rc != -ENOENT)
        return rc;
    if (exists) {
        rc = meta_inode_get(t, de.ino, &r);
        if (rc)
            return rc;
        if ((r.type == CORE_DIR) != isdir)
            return SRV_ECLASH;
    }
    if (a->if_none_match && exists)
        return SRV_EPRECOND;
    if (a->if_etag) {
        char cur[CORE_ETAG_MAX + 1];
        if (!exists)
            return -ENOENT;
        if (strcmp(a->if_etag, "*") != 0) {
            rc = etag_of(c, t, de.ino, &r, cur);
            if (rc)
                return rc;
            if (!etag_eq(cur, a->if_etag))
                return SRV_EPRECOND;
        }
    }
    if (isdir) {
        if (exists) {
            ino = de.ino;
            r.flags &= (uint16_t)~CORE_A_IMPLICIT;
            core__touch(&r, false, true);
            rc = meta_inode_put(t, ino, &r);
        } else {
            rc = core__node_create(c, t, a->p, dir, name, nlen, CORE_DIR, 0755, 0, NULL, 0, &ino,
                                   &r);
        }
        if (rc == 0)
            rc = meta_objmeta_put(t, ino, a->etag, a->meta, a->metalen);
        if (rc == 0 && a->out)
            core__attr_fill(&r, ino, a->out);
        return rc;
    }
    if (exists) {
        struct meta_inode d;
        if (a->p->flags & CORE_P_READONLY)
            return -EACCES;
        rc = meta_inode_get(t, dir, &d);
        if (rc)
            return rc;
        rc = core__perm(a->p, &d, CORE_MAY_W | CORE_MAY_X);
        if (rc)
            return rc;
        if ((d.mode & 01000) && !(a->p->flags & CORE_P_SUPER) && a->p->uid != d.uid &&
            a->p->uid != r.uid)
            return -EACCES;
        if (versioned) /* the old object stays, as a noncurrent version */
            rc = core__ver_retire_t(c, t, &vcfg, a->bucket, a->key, a->klen, dir, &d, name, nlen,
                                    de.ino, &r);
        else
            rc = core__entry_remove(c, t, dir, &d, name, nlen, de.ino, &r);
        if (rc)
            return rc;
    }
    rc = core__node_create(c, t, a->p, dir, name, nlen, CORE_REG, core__file_mode(a->p->fmode), 0,
                           NULL, 0, &ino, &r);
    if (rc)
        return rc;
    uint64_t used = 0;
    if (src->inl) {
        if (src->inl_len) {
            rc = meta_inline_put(t, ino, src->inl, src->inl_len);
            if (rc)
                return rc;
        }
        used = src->inl_len;
    } else {
        r.flags &= (uint16_t)~META_I_INLINE;
        for (size_t i = 0; i < src->n; i++) {
            const struct store_extent *e = &src->ext[i].e;
            struct meta_extent me = {.dev = e->dev, .len = e->len, .off = e->off, .crc = e->crc,
                                     .vlen = e->len};
            if (src->use) {
                rc = core__extent_use(t, e, src->up ? src->up[i].bcrc : NULL,
                                      src->up ? src->up[i].nb : 0);
                if (rc)
                    return rc;
            }
            rc = meta_extent_put(t, ino, src->ext[i].foff, &me);
            if (rc)
                return rc;
            used += e->len;
        }
    }
    rc = core__usage_charge_own(c, t, a->p->tenant, dir, (int64_t)used, 0, true, a->own);
    if (rc)
        return rc;
    r.size = src->size;
    r.used = used;
    if (versioned) {
        rc = core__ver_add_t(c, t, &vcfg, a->bucket, a->key, a->klen, ino, &r, lk, true,
                             a->opt ? a->opt->vid : NULL);
        if (rc)
            return rc;
    }
    rc = meta_inode_put(t, ino, &r);
    if (rc == 0)
        rc = meta_objmeta_put(t, ino, a->etag, a->meta, a->metalen);
    if (rc == 0 && a->out)
        core__attr_fill(&r, ino, a->out);
    return rc;
}

struct commit_op {
    struct link_args la;
    struct link_src src;
};

static int commit_fn(struct meta_txn *t, void *arg)
{
    struct commit_op *a = arg;
    return link_object(t, &a->la, &a->src);
}

int core_upload_commit(struct core_upload *u, const char *key, size_t keylen, const char *etag,
                       const void *meta, size_t metalen, const char *if_etag, bool if_none_match,
                       struct core_attr *out)
{
    struct core *c = u->c;
    struct commit_op a;
    struct core__resv hold = {0};
    struct fextv *xv = NULL;
    bool isdir;
    int rc = core__key_check(key, keylen, &isdir);
    if (rc)
        goto out;
    memset(&a, 0, sizeof(a));
    a.la = (struct link_args){c,       &u->p,   u->bucket,     key, keylen, etag,   meta,
                              metalen, if_etag, if_none_match, out, &hold,  &u->opt};
    a.src.size = u->size;
    if (u->n == 0 && u->blen <= c->cfg.inline_max) {
        a.src.inl = u->buf;
        a.src.inl_len = u->blen;
    } else {
        rc = up_flush(u);
        if (rc)
            goto out;
        xv = calloc(u->n, sizeof(*xv));
        if (!xv) {
            rc = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < u->n; i++) {
            xv[i].foff = (uint64_t)i * STORE_EXTENT_MAX;
            xv[i].e = u->ext[i].e;
        }
        a.src.ext = xv;
        a.src.up = u->ext;
        a.src.n = u->n;
        a.src.use = true;
    }
    /* data durable before the metadata; syncing here keeps the writer free */
    if (a.src.n)
        rc = store_sync(c->store);
    /* admissions of other writes count these bytes until the op committed */
    if (rc == 0)
        rc = core__resv_hold_key(c, u->p.tenant, u->bucket, key, keylen, u->size, &hold);
    if (rc == 0)
        rc = core__ver_submit(c, u->bucket, key, keylen, commit_fn, &a);
    core__resv_set(c, &hold, 0);
out:
    free(xv);
    up_free(u, rc != 0);
    return rc;
}

/* ---- multipart ---- */

static int mpu_id_parse(const char *s, uint64_t *id)
{
    uint64_t v = 0;
    if (!s || strlen(s) != 16)
        return -ENOENT;
    for (int i = 0; i < 16; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return -ENOENT;
        v = v << 4 | (uint64_t)d;
    }
    *id = v;
    return 0;
}

struct mpu_create_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    const char *key;
    size_t klen;
    const void *meta;
    size_t metalen;
    uint64_t id;
};

static int mpu_create_fn(struct meta_txn *t, void *arg)
{
    struct mpu_create_op *a = arg;
    struct meta_inode b;
    struct meta_mpu m;
    struct timespec now;
    int rc = core__ino_get_p(t, a->p, a->bucket, 0, &b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b.flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    if (rc)
        return rc;
    rc = core__perm(a->p, &b, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    core__now(&now);
    memset(&m, 0, sizeof(m));
    m.tenant = a->p->tenant;
    m.uid = a->p->uid;
    m.gid = a->p->gid;
    m.mode = core__file_mode(a->p->fmode);
    m.keylen = (uint32_t)a->klen;
    m.metalen = (uint32_t)a->metalen;
    m.init_s = now.tv_sec;
    m.init_ns = (uint32_t)now.tv_nsec;
    return meta_mpu_create(t, a->bucket, a->id, &m, a->key, a->meta);
}

int core_mpu_create(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen, const void *meta, size_t metalen,
                    char *upload_id, size_t idsize)
{
    struct mpu_create_op a = {c, p, bucket, key, keylen, meta, metalen, 0};
    bool isdir;
    int rc = core__key_check(key, keylen, &isdir);
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    if ((rc = core__cm_ro(c, p, bucket)) != 0)
        return rc;
    if (idsize < 17)
        return -ERANGE;
    do {
        if (getrandom(&a.id, sizeof(a.id), 0) != sizeof(a.id))
            return -EIO;
    } while (a.id == 0);
    rc = meta_submit(c->meta, mpu_create_fn, &a, 0);
    if (rc == 0)
        snprintf(upload_id, idsize, "%016" PRIx64, a.id);
    return rc;
}

/* Read an mpu record of @p p's tenant. @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
static int mpu_get(struct meta_txn *t, const struct core_principal *p, uint64_t bucket,
                   uint64_t id, struct meta_mpu *m, const char **key, const void **meta)
{
    int rc = meta_mpu_get(t, bucket, id, m, key, meta);
    if (rc == 0 && m->tenant != p->tenant)
        rc = -ENOENT;
    return rc;
}

/* Free the @p n extents @p ex (borrowed: may be unaligned) of a part. */
static int part_free_extents(struct core *c, struct meta_txn *t, const struct meta_extent *ex,
                             uint32_t n, uint64_t *bytes)
{
    for (uint32_t i = 0; i < n; i++) {
        struct meta_extent me;
        memcpy(&me, &ex[i], sizeof(me));
        struct store_extent e = {.dev = me.dev, .len = me.len, .off = me.off, .crc = me.crc};
        int rc = core__extent_free(c, t, &e);
        if (rc < 0)
            return rc; /* (a part's extents are never shared: 1 never comes back) */
        *bytes += me.len;
    }
    return 0;
}

struct part_op {
    struct core *c;
    struct core_upload *u;
    uint64_t id;
    uint32_t partno;
    const char *etag;
    const char *cksum;
    struct core__resv hold;        /* the part's bytes, reserved while the op runs */
};

static int part_commit_fn(struct meta_txn *t, void *arg)
{
    struct part_op *a = arg;
    struct core *c = a->c;
    struct core_upload *u = a->u;
    struct meta_mpu m;
    struct meta_part pt;
    const struct meta_extent *oex;
    const char *key;
    const void *meta;
    uint64_t freed = 0, bytes = 0;
    int rc = mpu_get(t, &u->p, u->bucket, a->id, &m, &key, &meta);
    if (rc)
        return rc;
    rc = meta_part_get(t, a->id, a->partno, &pt, &oex);
    if (rc == 0) {
        rc = part_free_extents(c, t, oex, pt.nextents, &freed);
        if (rc)
            return rc;
    } else if (rc != -ENOENT) {
        return rc;
    }
    rc = 0;
    struct meta_extent *v = calloc(u->n ? u->n : 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    struct timespec now;
    core__now(&now);
    memset(&pt, 0, sizeof(pt));
    pt.size = u->size;
    pt.mtime_s = now.tv_sec;
    pt.mtime_ns = (uint32_t)now.tv_nsec;
    pt.nextents = (uint32_t)u->n;
    snprintf(pt.etag, CORE_ETAG_MAX + 1, "%s", a->etag ? a->etag : "");
    /* the part's checksum after its ETag's NUL (meta_schema.h: struct meta_part) */
    size_t el = strlen(pt.etag);
    if (a->cksum && el <= CORE_PART_ETAG_MAX && strlen(a->cksum) <= CORE_PART_CKSUM_MAX)
        memcpy(pt.etag + CORE_PART_ETAG_MAX + 1, a->cksum, strlen(a->cksum) + 1);
    for (size_t i = 0; i < u->n && rc == 0; i++) {
        const struct store_extent *e = &u->ext[i].e;
        v[i] = (struct meta_extent){.dev = e->dev, .len = e->len, .off = e->off, .crc = e->crc,
                                    .vlen = e->len};
        bytes += e->len;
        rc = core__extent_use(t, e, u->ext[i].bcrc, u->ext[i].nb);
    }
    if (rc == 0)
        rc = meta_part_put(t, a->id, a->partno, &pt, v);
    free(v);
    if (rc)
        return rc;
    return core__usage_charge_own(c, t, u->p.tenant, u->bucket, (int64_t)bytes - (int64_t)freed,
                                  0, bytes > freed, &a->hold);
}

int core_mpu_part_commit(struct core_upload *u, const char *upload_id, uint32_t partno,
                         const char *etag, const char *cksum)
{
    struct part_op a = {u->c, u, 0, partno, etag, cksum, {0}};
    int rc = mpu_id_parse(upload_id, &a.id);
    if (rc == 0 && (partno < 1 || partno > 10000))
        rc = -EINVAL;
    if (rc == 0)
        rc = up_flush(u);
    if (rc == 0)
        rc = u->n ? store_sync(u->c->store) : 0;
    if (rc == 0) /* parts count on the tenant and the bucket */
        rc = core__resv_hold_key(u->c, u->p.tenant, u->bucket, "", 0, u->size, &a.hold);
    if (rc == 0)
        rc = meta_submit(u->c->meta, part_commit_fn, &a, 0);
    core__resv_set(u->c, &a.hold, 0);
    up_free(u, rc != 0);
    return rc;
}

int core_mpu_get_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *upload_id, void **meta, size_t *len)
{
    struct meta_txn *t;
    struct meta_mpu m;
    const char *key;
    const void *mv;
    uint64_t id;
    *meta = NULL;
    *len = 0;
    int rc = mpu_id_parse(upload_id, &id);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = mpu_get(t, p, bucket, id, &m, &key, &mv);
    if (rc == 0 && m.metalen) {
        *meta = malloc(m.metalen);
        if (*meta) {
            memcpy(*meta, mv, m.metalen);
            *len = m.metalen;
        } else {
            rc = -ENOMEM;
        }
    }
    meta_rtxn_end(t);
    return rc;
}

struct parts_scan {
    core_part_cb cb;
    void *arg;
};

static int part_ent(void *arg, uint32_t partno, const struct meta_part *pt,
                    const struct meta_extent *ext)
{
    struct parts_scan *s = arg;
    struct core_mpu_part part;
    (void)ext;
    if (!pt)
        return 0;
    memset(&part, 0, sizeof(part));
    part.partno = partno;
    part.size = pt->size;
    memcpy(part.etag, pt->etag, CORE_ETAG_MAX);
    part.etag[CORE_ETAG_MAX] = '\0';
    if (strnlen(pt->etag, CORE_ETAG_MAX) <= CORE_PART_ETAG_MAX) {
        const char *ck = pt->etag + CORE_PART_ETAG_MAX + 1;
        size_t cl = strnlen(ck, sizeof(pt->etag) - CORE_PART_ETAG_MAX - 1);
        if (cl <= CORE_PART_CKSUM_MAX)
            memcpy(part.cksum, ck, cl);
    }
    part.mtime.tv_sec = pt->mtime_s;
    part.mtime.tv_nsec = pt->mtime_ns;
    return s->cb(s->arg, &part) ? 1 : 0;
}

int core_mpu_list_parts(struct core *c, const struct core_principal *p, uint64_t bucket,
                        const char *upload_id, uint32_t after_partno, core_part_cb cb, void *arg)
{
    struct meta_txn *t;
    struct meta_mpu m;
    struct parts_scan s = {cb, arg};
    const char *key;
    const void *meta;
    uint64_t id;
    int rc = mpu_id_parse(upload_id, &id);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = mpu_get(t, p, bucket, id, &m, &key, &meta);
    if (rc == 0)
        rc = meta_part_scan(t, id, after_partno + 1, part_ent, &s);
    meta_rtxn_end(t);
    return rc == 1 ? 0 : rc;
}

struct mpu_ent {
    char *key;
    size_t klen;
    uint64_t id;
    struct timespec init;
    uint32_t uid;
};

static int mpu_ent_cmp(const void *x, const void *y)
{
    const struct mpu_ent *a = x, *b = y;
    int r = memcmp(a->key, b->key, a->klen < b->klen ? a->klen : b->klen);
    if (r)
        return r;
    if (a->klen != b->klen)
        return a->klen < b->klen ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The uploads of a bucket that core_mpu_list shows. */
struct mpu_list {
    uint32_t tenant;
    const char *prefix;
    size_t prefixlen;
    struct mpu_ent *v;
    size_t n, cap;
};

static int mpu_collect(void *arg, uint64_t id, const struct meta_mpu *m, const char *key,
                       const void *meta)
{
    struct mpu_list *l = arg;
    (void)meta;
    if (!m || m->tenant != l->tenant)
        return 0;
    if (l->prefixlen && (m->keylen < l->prefixlen || memcmp(key, l->prefix, l->prefixlen) != 0))
        return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        struct mpu_ent *ne = realloc(l->v, nc * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        l->v = ne;
        l->cap = nc;
    }
    struct mpu_ent *e = &l->v[l->n];
    e->key = malloc(m->keylen ? m->keylen : 1);
    if (!e->key)
        return -ENOMEM;
    memcpy(e->key, key, m->keylen);
    e->klen = m->keylen;
    e->id = id;
    e->init.tv_sec = m->init_s;
    e->init.tv_nsec = m->init_ns;
    e->uid = m->uid;
    l->n++;
    return 0;
}

int core_mpu_list(struct core *c, const struct core_principal *p, uint64_t bucket,
                  const char *prefix, size_t prefixlen, core_mpu_cb cb, void *arg)
{
    struct meta_txn *t;
    struct mpu_list l = {.tenant = p->tenant, .prefix = prefix, .prefixlen = prefixlen};
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_mpu_scan(t, bucket, mpu_collect, &l);
    meta_rtxn_end(t);
    if (rc == 0 && l.n)
        qsort(l.v, l.n, sizeof(*l.v), mpu_ent_cmp);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        char idbuf[17];
        snprintf(idbuf, sizeof(idbuf), "%016" PRIx64, l.v[i].id);
        struct core_mpu_info info = {l.v[i].key, l.v[i].klen, idbuf, l.v[i].init, l.v[i].uid};
        if (cb(arg, &info))
            break;
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].key);
    free(l.v);
    return rc;
}

/* The first part of an upload, its extents copied out. */
struct part_first {
    bool found;
    int rc;
    uint32_t partno;
    struct meta_part pt;
    struct meta_extent *ext;
};

static int part_take(void *arg, uint32_t partno, const struct meta_part *pt,
                     const struct meta_extent *ext)
{
    struct part_first *f = arg;
    f->found = true;
    f->partno = partno;
    if (!pt) {
        f->rc = SRV_ECORRUPT;
        return 1;
    }
    f->pt = *pt;
    f->ext = malloc(pt->nextents ? pt->nextents * sizeof(*ext) : 1);
    if (!f->ext)
        f->rc = -ENOMEM;
    else if (pt->nextents)
        memcpy(f->ext, ext, pt->nextents * sizeof(*ext));
    return 1;
}

/* Delete every part record of @p id, freeing extents of those not kept. */
static int parts_drop(struct core *c, struct meta_txn *t, uint64_t id, const uint32_t *keep,
                      size_t nkeep, uint64_t *freed, uint64_t *total)
{
    for (;;) {
        struct part_first f = {0};
        int rc = meta_part_scan(t, id, 0, part_take, &f);
        if (rc < 0)
            return rc;
        if (!f.found)
            return 0;
        rc = f.rc;
        bool kept = false;
        for (size_t i = 0; i < nkeep; i++)
            if (keep[i] == f.partno)
                kept = true;
        for (uint32_t i = 0; rc == 0 && i < f.pt.nextents; i++)
            *total += f.ext[i].len;
        if (rc == 0 && !kept)
            rc = part_free_extents(c, t, f.ext, f.pt.nextents, freed);
        if (rc == 0)
            rc = meta_part_del(t, id, f.partno);
        free(f.ext);
        if (rc)
            return rc;
    }
}

struct mpu_done_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    uint64_t id;
    const uint32_t *partnos;
    const char *const *etags;
    size_t nparts;
    const char *final_etag;
    struct core_attr *out;
    bool abort;
    const struct core__resv *hold; /* bytes held on the key's directories, or NULL */
    const struct core_putopt *opt;
};

static int mpu_done_fn(struct meta_txn *t, void *arg)
{
    struct mpu_done_op *a = arg;
    struct core *c = a->c;
    struct meta_mpu m;
    const char *key;
    const void *meta;
    uint64_t freed = 0, total = 0;
    struct fextv *xv = NULL;
    size_t nx = 0, cx = 0;
    uint64_t size = 0;
    int rc = mpu_get(t, a->p, a->bucket, a->id, &m, &key, &meta);
    if (rc)
        return rc;
    /* copy the record: the txn changes below may move it */
    char *keyc = malloc(m.keylen + m.metalen + 1);
    if (!keyc)
        return -ENOMEM;
    memcpy(keyc, key, m.keylen + m.metalen);
    if (!a->abort) {
        for (size_t i = 1; i < a->nparts; i++) {
            if (a->partnos[i] <= a->partnos[i - 1]) {
                rc = -EINVAL;
                goto out;
            }
        }
        for (size_t i = 0; i < a->nparts; i++) {
            struct meta_part pt;
            const struct meta_extent *ex;
            rc = meta_part_get(t, a->id, a->partnos[i], &pt, &ex);
            if (rc == -ENOENT) {
                rc = SRV_EPRECOND;
                goto out;
            }
            if (rc)
                goto out;
            if (a->etags && a->etags[i] && !etag_eq(pt.etag, a->etags[i])) {
                rc = SRV_EPRECOND;
                goto out;
            }
            for (uint32_t j = 0; j < pt.nextents; j++) {
                struct meta_extent me;
                memcpy(&me, &ex[j], sizeof(me));
                if (nx == cx) {
                    cx = cx ? cx * 2 : 64;
                    struct fextv *nv = realloc(xv, cx * sizeof(*nv));
                    if (!nv) {
                        rc = -ENOMEM;
                        goto out;
                    }
                    xv = nv;
                }
                xv[nx].foff = size;
                xv[nx].e = (struct store_extent){me.dev, me.len, me.off, me.crc, 0};
                nx++;
                size += me.len;
            }
            if (pt.size != 0 && size == 0) {
                rc = SRV_ECORRUPT;
                goto out;
            }
        }
    }
    rc = parts_drop(c, t, a->id, a->abort ? NULL : a->partnos, a->abort ? 0 : a->nparts, &freed,
                    &total);
    if (rc)
        goto out;
    rc = meta_mpu_del(t, a->bucket, a->id);
    if (rc)
        goto out;
    rc = core__usage_charge(c, t, a->p->tenant, a->bucket, -(int64_t)total, 0, false);
    if (rc || a->abort)
        goto out;
    /* the object gets the permission bits asked for at the upload's creation
     * (uploads made before they were recorded: 0600) */
    struct core_principal lp = *a->p;
    lp.fmode = m.mode ? m.mode : core__file_mode(0);
    struct link_args la = {
        c,         &lp,  a->bucket, keyc,   m.keylen, a->final_etag, keyc + m.keylen,
        m.metalen, NULL, false,     a->out, a->hold,  a->opt};
    struct link_src src = {.ext = xv, .n = nx, .use = false, .size = size};
    if (nx == 0)
        src.inl = "";
    rc = link_object(t, &la, &src);
out:
    free(keyc);
    free(xv);
    return rc;
}

/* The key of upload @p id and the data bytes of its parts @p partnos (those
 * that exist), read ahead of the completion op. @return 0, -ENOENT, -EIO. */
static int mpu_peek(struct core *c, const struct core_principal *p, uint64_t bucket, uint64_t id,
                    const uint32_t *partnos, size_t nparts, char *key, size_t *klen,
                    uint64_t *bytes)
{
    struct meta_txn *t;
    struct meta_mpu m;
    const char *k;
    const void *meta;
    *bytes = 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = mpu_get(t, p, bucket, id, &m, &k, &meta);
    if (rc == 0 && m.keylen > CORE_KEY_MAX)
        rc = SRV_ECORRUPT;
    if (rc == 0) {
        memcpy(key, k, m.keylen);
        *klen = m.keylen;
    }
    for (size_t i = 0; i < nparts && rc == 0; i++) {
        struct meta_part pt;
        const struct meta_extent *ex;
        if (meta_part_get(t, id, partnos[i], &pt, &ex) != 0)
            continue; /* the op answers for a missing or bad part */
        for (uint32_t j = 0; j < pt.nextents; j++) {
            struct meta_extent me;
            memcpy(&me, &ex[j], sizeof(me));
            *bytes += me.len;
        }
    }
    meta_rtxn_end(t);
    return rc;
}

int core_mpu_complete(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *upload_id, const uint32_t *partnos, const char *const *etags,
                      size_t nparts, const char *final_etag, const struct core_putopt *opt,
                      struct core_attr *out)
{
    struct mpu_done_op a = {c,      p,          bucket, 0,     partnos, etags,
                            nparts, final_etag, out,    false, NULL,    opt};
    struct core__resv hold = {0};
    char key[CORE_KEY_MAX + 1];
    size_t klen = 0;
    uint64_t bytes = 0;
    int rc = mpu_id_parse(upload_id, &a.id);
    if (rc)
        return rc;
    if (nparts == 0)
        return -EINVAL;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    rc = mpu_peek(c, p, bucket, a.id, partnos, nparts, key, &klen, &bytes);
    if (rc == 0 && core__dirquotas(c)) {
        /* the parts are charged to the tenant and bucket already; the key's
         * directories get the object's bytes in the op: hold them there
         * meanwhile, so writes admitted into those directories count them */
        rc = core__resv_hold_dirs(c, p->tenant, bucket, key, klen, bytes, &hold);
        a.hold = &hold;
    }
    if (rc == -ENOENT)
        return meta_submit(c->meta, mpu_done_fn, &a, 0); /* the op answers */
    if (rc == 0)
        rc = core__ver_submit(c, bucket, key, klen, mpu_done_fn, &a);
    core__resv_set(c, &hold, 0);
    return rc;
}

int core_mpu_abort(struct core *c, const struct core_principal *p, uint64_t bucket,
                   const char *upload_id)
{
    struct mpu_done_op a = {c, p, bucket, 0, NULL, NULL, 0, NULL, NULL, true, NULL, NULL};
    int rc = mpu_id_parse(upload_id, &a.id);
    if (rc)
        return rc;
    return meta_submit(c->meta, mpu_done_fn, &a, 0);
}

int core__mpu_drop_bucket(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket)
{
    uint64_t *ids;
    size_t n;
    uint64_t freed = 0, total = 0;
    int rc = meta_mpu_ids(t, bucket, &ids, &n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = parts_drop(c, t, ids[i], NULL, 0, &freed, &total);
        if (rc == 0)
            rc = meta_mpu_del(t, bucket, ids[i]);
    }
    free(ids);
    if (rc == 0 && total)
        rc = core__usage_charge(c, t, tenant, 0, -(int64_t)total, 0, false);
    return rc;
}
