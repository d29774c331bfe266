/* SPDX-License-Identifier: Apache-2.0
 * core_cmode: cache mode (namespace sub-module; core.h § cache mode,
 * docs/tiering.md § Cache mode). A cache bucket's directories are imported
 * from its remote when a listing or lookup reaches one not imported within
 * the bucket's ttl_s: the lister (the tier, wired by the daemon) lists the
 * remote directory, every page, and one txn per batch of names makes the
 * local directory match it:
 *  - a new object becomes a file already evicted: its size, ETag and time are
 *    the remote's and its tierst record names the object, so the recall path
 *    (core_tier.c) reads it through and the uploader sees nothing to copy;
 *  - an object whose ETag is not the one recorded: a clean local file (its
 *    change counter is its record's) drops its bytes and becomes evicted with
 *    the new size and ETag; a file changed locally and not uploaded yet keeps
 *    its content (local changes win, logged and counted: the uploader copies
 *    it over the remote's);
 *  - a local name the remote no longer has: a clean file is removed, a file
 *    with local changes kept (a conflict, counted), a file never uploaded kept
 *    (it is new here), an empty implicit directory removed;
 *  - a file whose record is newer than the listing's start (an upload that
 *    raced the listing) is left alone;
 *  - a file whose record names another key (renamed here, or its directory,
 *    not uploaded under its new key yet) is kept, and a remote name whose key
 *    a local file's record holds elsewhere (renamed away, or removed with its
 *    remote delete to send) is not imported again (find_held).
 * One import per directory at a time: other callers wait for it. A listing
 * that fails leaves what was imported before (served as it is, logged) and
 * answers only for a directory never imported, as a recall of a file does:
 * SRV_EIMPORT (retryable: S3 503, NFS JUKEBOX) until the remote has failed
 * for tier_recall_fail_ms in a row (core__tier_fail_ms), then SRV_EIMPORTFAIL
 * (S3 500, NFS EIO: an NFS client would retry JUKEBOX forever); the directory
 * that failed is core_cache_import_failed's (the S3 message names it). The time of each
 * directory's last import is kept in memory and in t_config (rec_*: written after
 * the import, read at the directory's first use after a start), so a restart does
 * not make every directory due at once; core_cache_invalidate drops them.
 * Thread: any; imports block (workers only: CORE_P_NOWAIT answers
 * -EWOULDBLOCK). */
#include "core_ns_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta_record.h"
#include "meta_tier.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "tier_cache.h"
#include "tier_policy.h"

#define APPLY_BATCH 1024 /* names per txn */
/* t_config: "cmdir/" be64 bucket be64 dir -> be32 the directory's gen | be64 start of
 * the listing that imported it (ms since the epoch) */
#define REC_PFX "cmdir/"
#define REC_PFX_LEN 6
#define REC_KEY_LEN (REC_PFX_LEN + 16)

void core_cache_listing_free(struct core_cache_listing *l)
{
    for (size_t i = 0; i < l->nobjs; i++)
        free(l->objs[i].name);
    for (size_t i = 0; i < l->ndirs; i++)
        free(l->dirs[i]);
    free(l->objs);
    free(l->dirs);
    memset(l, 0, sizeof(*l));
}

void core_cache_set_lister(struct core *c, core_cache_list_fn fn, void *arg)
{
    pthread_mutex_lock(&c->cm.mu);
    c->cm.list = fn;
    c->cm.list_arg = arg;
    pthread_mutex_unlock(&c->cm.mu);
}

void core_cache_set_meta(struct core *c, core_cache_meta_fn fn, void *arg)
{
    pthread_mutex_lock(&c->cm.mu);
    c->cm.meta = fn;
    c->cm.meta_arg = arg;
    pthread_mutex_unlock(&c->cm.mu);
}

struct reload {
    struct core__cment *v;
    size_t n, cap;
};

static int reload_cb(void *arg, uint32_t tenant, uint64_t bucket, const void *val, size_t len)
{
    struct reload *r = arg;
    struct tier_cache tc;
    (void)tenant;
    if (tier_cache_decode(val, len, &tc) != 0)
        return 0;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 8;
        void *nv = realloc(r->v, nc * sizeof(*r->v));
        if (!nv)
            return -ENOMEM;
        r->v = nv;
        r->cap = nc;
    }
    r->v[r->n++] = (struct core__cment){.bucket = bucket, .ttl_s = tc.ttl_s, .ro = tc.read_only};
    return 0;
}

int core_cache_reload(struct core *c)
{
    struct reload r = {0};
    int rc = core_bucket_blob_scan(c, CORE_BLOB_CACHE, reload_cb, &r);
    if (rc < 0) {
        free(r.v);
        return rc;
    }
    pthread_mutex_lock(&c->cm.mu);
    free(c->cm.v);
    c->cm.v = r.v;
    c->cm.n = r.n;
    pthread_mutex_unlock(&c->cm.mu);
    return 0;
}

/* mu held */
static const struct core__cment *cment(struct core *c, uint64_t bucket)
{
    for (size_t i = 0; i < c->cm.n; i++)
        if (c->cm.v[i].bucket == bucket)
            return &c->cm.v[i];
    return NULL;
}

bool core_cache_bucket(struct core *c, uint64_t bucket, bool *ro)
{
    pthread_mutex_lock(&c->cm.mu);
    const struct core__cment *e = cment(c, bucket);
    bool yes = e != NULL;
    if (ro)
        *ro = e && e->ro;
    pthread_mutex_unlock(&c->cm.mu);
    return yes;
}

/* ---- persisted import times ---- */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rec_key(uint8_t k[REC_KEY_LEN], uint64_t bucket, uint64_t dir)
{
    memcpy(k, REC_PFX, REC_PFX_LEN);
    meta_be64_put(k + REC_PFX_LEN, bucket);
    meta_be64_put(k + REC_PFX_LEN + 8, dir);
}

/* The gen of directory @p dir, or 0 (gone, not a directory). */
static uint32_t dir_gen(struct core *c, uint64_t dir)
{
    struct meta_txn *t;
    struct meta_inode r;
    uint32_t gen = 0;
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return 0;
    if (meta_inode_get(t, dir, &r) == 0 && r.type == CORE_DIR)
        gen = r.gen;
    meta_rtxn_end(t);
    return gen;
}

/* Remember that @p dir was imported by a listing that began at monotonic @p at_ms. */
static void rec_put(struct core *c, uint64_t bucket, uint64_t dir, int64_t at_ms)
{
    uint8_t k[REC_KEY_LEN], v[12];
    rec_key(k, bucket, dir);
    meta_be32_put(v, dir_gen(c, dir));
    meta_be64_put(v + 4, (uint64_t)(wall_ms() - (srv_now_ms() - at_ms)));
    int rc = meta_record_put(c->meta, META_REC_CONFIG, k, sizeof(k), v, sizeof(v), 0);
    if (rc)
        srv_log(WARN, TIER, "cache: cannot keep the import time of bucket %llu dir %llu: %s",
                (unsigned long long)bucket, (unsigned long long)dir, srv_strerror(rc));
}

/* The monotonic time of @p dir's last import before this start, or 0 (none kept, or
 * kept for another directory of that inode number). */
static int64_t rec_get(struct core *c, uint64_t bucket, uint64_t dir)
{
    uint8_t k[REC_KEY_LEN];
    void *v = NULL;
    size_t vl = 0;
    int64_t at = 0;
    rec_key(k, bucket, dir);
    if (meta_record_get(c->meta, META_REC_CONFIG, k, sizeof(k), &v, &vl) != 0)
        return 0;
    uint32_t gen = dir_gen(c, dir);
    if (vl == 12 && gen && meta_be32_get(v) == gen) {
        int64_t age = wall_ms() - (int64_t)meta_be64_get((const uint8_t *)v + 4);
        at = srv_now_ms() - (age > 0 ? age : 0);
        if (at == 0)
            at = -1; /* 0 says "never" */
    }
    free(v);
    return at;
}

struct rec_scan {
    uint8_t (*keys)[REC_KEY_LEN];
    size_t n, cap;
    uint64_t bucket; /* 0: all */
};

static int rec_scan_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct rec_scan *r = arg;
    (void)val;
    (void)vlen;
    if (klen != REC_KEY_LEN || memcmp(key, REC_PFX, REC_PFX_LEN) != 0)
        return 1; /* past the records */
    if (r->bucket && meta_be64_get((const uint8_t *)key + REC_PFX_LEN) != r->bucket)
        return 1;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        void *nv = realloc(r->keys, nc * REC_KEY_LEN);
        if (!nv)
            return 1;
        r->keys = nv;
        r->cap = nc;
    }
    memcpy(r->keys[r->n++], key, REC_KEY_LEN);
    return 0;
}

/* Drop the kept import times of @p bucket (0: of every bucket). */
static void rec_drop(struct core *c, uint64_t bucket)
{
    uint8_t start[REC_KEY_LEN];
    size_t sl = REC_PFX_LEN;
    struct rec_scan r = {.bucket = bucket};
    memcpy(start, REC_PFX, REC_PFX_LEN);
    if (bucket) {
        meta_be64_put(start + REC_PFX_LEN, bucket);
        sl += 8;
    }
    meta_record_scan(c->meta, META_REC_CONFIG, start, sl, rec_scan_cb, &r);
    for (size_t i = 0; i < r.n; i++)
        meta_record_del(c->meta, META_REC_CONFIG, r.keys[i], REC_KEY_LEN);
    free(r.keys);
}

void core_cache_invalidate(struct core *c, uint64_t bucket)
{
    pthread_mutex_lock(&c->cm.mu);
    for (size_t i = 0; i < CORE_CM_HASH; i++)
        for (struct core__cdir *d = c->cm.h[i]; d; d = d->next)
            if (!bucket || d->bucket == bucket) {
                d->at_ms = 0;
                d->loaded = true; /* what was kept is dropped below */
            }
    pthread_mutex_unlock(&c->cm.mu);
    rec_drop(c, bucket);
}

void core_cache_stats_get(struct core *c, struct core_cache_stats *out)
{
    out->imports = atomic_load(&c->cm.imports);
    out->import_errors = atomic_load(&c->cm.import_errors);
    out->created = atomic_load(&c->cm.created);
    out->changed = atomic_load(&c->cm.changed);
    out->removed = atomic_load(&c->cm.removed);
    out->conflicts = atomic_load(&c->cm.conflicts);
    out->meta_heads = atomic_load(&c->cm.meta_heads);
    out->meta_recalls = atomic_load(&c->cm.meta_recalls);
}

void core__cm_init(struct core *c)
{
    pthread_mutex_init(&c->cm.mu, NULL);
    pthread_cond_init(&c->cm.cv, NULL);
}

void core__cm_fini(struct core *c)
{
    for (size_t i = 0; i < CORE_CM_HASH; i++) {
        while (c->cm.h[i]) {
            struct core__cdir *d = c->cm.h[i];
            c->cm.h[i] = d->next;
            free(d);
        }
    }
    free(c->cm.v);
    c->cm.v = NULL;
    c->cm.n = 0;
    pthread_mutex_destroy(&c->cm.mu);
    pthread_cond_destroy(&c->cm.cv);
}

/* mu held. @return the record of @p dir (made), or NULL (out of memory). */
static struct core__cdir *cdir(struct core *c, uint64_t bucket, uint64_t dir)
{
    size_t h = (size_t)((dir * 0x9e3779b97f4a7c15ull) >> 54) % CORE_CM_HASH;
    for (struct core__cdir *d = c->cm.h[h]; d; d = d->next)
        if (d->dir == dir)
            return d;
    struct core__cdir *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->dir = dir;
    d->bucket = bucket;
    d->next = c->cm.h[h];
    c->cm.h[h] = d;
    return d;
}

/* Is this conflict (file @p ino against the remote's @p etag, "" for a delete) not
 * reported yet? A conflict stays until the upload is done; it is logged and counted
 * once, not at every revalidation (a table of 256 slots: a conflict that loses its
 * slot is reported again). */
static bool conflict_new(struct core *c, uint64_t ino, const char *etag)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *e = etag; *e; e++)
        h = (h ^ (uint8_t)*e) * 1099511628211ull;
    h ^= ino * 0x9e3779b97f4a7c15ull;
    h |= 1;
    pthread_mutex_lock(&c->cm.mu);
    uint64_t *slot = &c->cm.conf_seen[h % 256];
    bool fresh = *slot != h;
    *slot = h;
    pthread_mutex_unlock(&c->cm.mu);
    if (fresh)
        atomic_fetch_add(&c->cm.conflicts, 1);
    return fresh;
}

/* ---- making the local directory match a listing ---- */

struct apply_op {
    struct core *c;
    struct core_principal sp; /* the bucket owner's, super, CORE_P_FILL */
    uint64_t bucket, dir;
    uint32_t remote;
    const char *dirkey;
    size_t dklen;
    int64_t start_s; /* the listing began then */
    const struct core_cache_listing *l;
    size_t from, to; /* objects [from, to) (then dirs when from == to == 0 and dirs) */
    bool dirs;
    bool revalidate;    /* the directory was imported before, or holds names */
    const char **names; /* every listed name, sorted (the removal pass) */
    size_t nnames;
    char **held; /* listed names not here whose remote key a local file holds, sorted */
    size_t nheld;
};

static int name_cmp(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static bool name_ok(const char *n)
{
    return n[0] && strchr(n, '/') == NULL && core__name_check(n, strlen(n)) == 0 &&
           strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

/* Is the record @p cp of the file named @p name in the directory being imported made for
 * another key (the file, or a directory above it, was renamed since its last upload: the
 * uploader copies it to its new key, then deletes the old one)? */
static bool moved(const struct apply_op *a, const struct meta_tier_copy *cp, const char *name)
{
    size_t nl = strlen(name);
    return cp->st.keylen != a->dklen + nl || memcmp(cp->key, a->dirkey, a->dklen) != 0 ||
           memcmp(cp->key + a->dklen, name, nl) != 0;
}

static bool is_held(const struct apply_op *a, const char *name)
{
    return a->nheld && bsearch(&name, a->held, a->nheld, sizeof(*a->held), name_cmp);
}

struct held_scan {
    struct apply_op *a;
    struct meta_txn *t;
    const char **want; /* listed names not here, sorted */
    size_t nwant;
};

/* A tierst record whose key is under the directory being imported but whose file is no
 * longer at that key (renamed away, or gone with its remote delete still to send): the
 * remote object (or sub-prefix) of that name is ours, in transit; not imported again. */
static int held_cb(void *arg, uint64_t ino, const struct meta_tier_copy *cp)
{
    struct held_scan *h = arg;
    struct apply_op *a = h->a;
    if (!cp || cp->st.bucket != a->bucket || cp->st.keylen <= a->dklen ||
        memcmp(cp->key, a->dirkey, a->dklen) != 0)
        return 0;
    uint64_t at = 0;
    uint32_t type = 0;
    if (meta_keyidx_get(h->t, a->bucket, cp->key, cp->st.keylen, &at, &type) == 0 && at == ino)
        return 0; /* at its key */
    char nm[CORE_NAME_MAX + 1];
    const char *rest = cp->key + a->dklen, *sl = strchr(rest, '/');
    size_t nl = sl ? (size_t)(sl - rest) : strlen(rest);
    if (nl == 0 || nl > CORE_NAME_MAX)
        return 0;
    memcpy(nm, rest, nl);
    nm[nl] = '\0';
    const char *k = nm;
    if (!bsearch(&k, h->want, h->nwant, sizeof(*h->want), name_cmp) || is_held(a, nm))
        return 0;
    char **nv = realloc(a->held, (a->nheld + 1) * sizeof(*a->held));
    if (!nv)
        return -ENOMEM;
    a->held = nv;
    if (!(a->held[a->nheld] = strdup(nm)))
        return -ENOMEM;
    a->nheld++;
    qsort(a->held, a->nheld, sizeof(*a->held), name_cmp);
    return 0;
}

/* A revalidation: the listed names that are not here and that a local file holds the
 * remote key of (held_cb), into a->held. Costs a scan of the tier records only when some
 * listed name is not here. */
static int find_held(struct apply_op *a)
{
    const struct core_cache_listing *l = a->l;
    struct held_scan h = {.a = a};
    int rc = meta_rtxn_begin(a->c->meta, &h.t);
    if (rc)
        return rc;
    h.want = malloc((l->nobjs + l->ndirs + 1) * sizeof(*h.want));
    if (!h.want) {
        meta_rtxn_end(h.t);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l->nobjs + l->ndirs; i++) {
        const char *nm = i < l->nobjs ? l->objs[i].name : l->dirs[i - l->nobjs];
        struct meta_dirent de;
        if (name_ok(nm) && meta_dirent_get(h.t, a->dir, nm, strlen(nm), &de) == -ENOENT)
            h.want[h.nwant++] = nm;
    }
    if (h.nwant) {
        qsort(h.want, h.nwant, sizeof(*h.want), name_cmp);
        rc = meta_tier_scan(h.t, 0, held_cb, &h);
    }
    meta_rtxn_end(h.t);
    free(h.want);
    return rc < 0 ? rc : 0;
}

/* Drop @p ino's bytes and make it an evicted copy of @p o. */
static int refresh(struct apply_op *a, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                   const struct core_cache_obj *o, struct meta_tier_copy *cp)
{
    struct core__fext_list l = {0};
    int rc = core__overlaps(t, ino, 0, UINT64_MAX, &l, false);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        rc = core__extent_free(a->c, t, &l.v[i].e);
        if (rc >= 0)
            rc = meta_extent_del(t, ino, l.v[i].foff);
    }
    free(l.v);
    if (rc)
        return rc;
    if (r->flags & META_I_INLINE) {
        rc = meta_inline_del(t, ino);
        if (rc && rc != -ENOENT)
            return rc;
        r->flags &= (uint16_t)~META_I_INLINE;
    }
    int64_t delta = (int64_t)o->size - (int64_t)r->used;
    if (delta) {
        rc = core__usage_charge(a->c, t, r->tenant, r->parent, delta, 0, false);
        if (rc)
            return rc;
    }
    r->size = o->size;
    r->used = o->size;
    if (o->size)
        r->flags |= META_I_EVICTED;
    else
        r->flags &= (uint16_t)~META_I_EVICTED;
    r->change++;
    core__touch(r, true, true);
    if (o->mtime_s > 0) {
        r->mtime_s = o->mtime_s;
        r->mtime_ns = 0;
    }
    rc = meta_inode_put(t, ino, r);
    if (rc == 0)
        rc = meta_objmeta_put(t, ino, o->etag, NULL, 0);
    if (rc)
        return rc;
    cp->st.change = r->change;
    cp->st.size = o->size;
    cp->st.remote = a->remote;
    cp->st.bucket = a->bucket;
    /* "confirmed" as of the listing: a second before it began, so that the next
     * listing (maybe within the same second) is newer than the record (an upload
     * confirmed after a listing began is what the next one leaves alone) */
    cp->st.time_s = a->start_s - 1;
    size_t el = strnlen(o->etag, sizeof(cp->st.etag) - 1);
    memcpy(cp->st.etag, o->etag, el);
    cp->st.etag[el] = '\0';
    return meta_tier_put(t, ino, cp);
}

static int apply_obj(struct apply_op *a, struct meta_txn *t, const struct core_cache_obj *o)
{
    struct core *c = a->c;
    size_t nl = strlen(o->name);
    if (!name_ok(o->name) || a->dklen + nl > CORE_KEY_MAX)
        return 0;
    struct meta_dirent de;
    struct meta_inode r;
    uint64_t ino;
    struct meta_tier_copy *cp = calloc(1, sizeof(*cp));
    if (!cp)
        return -ENOMEM;
    int rc = meta_dirent_get(t, a->dir, o->name, nl, &de);
    if (rc == 0) {
        rc = meta_inode_get(t, de.ino, &r);
        if (rc || r.type != CORE_REG)
            goto out; /* a directory or link of that name here: left alone */
        rc = meta_tier_get(t, de.ino, cp);
        if (rc == -ENOENT) {
            rc = 0;
            if (conflict_new(c, de.ino, o->etag))
                srv_log(WARN, TIER,
                        "cache: bucket %llu key '%s%s': a local file not uploaded yet and a "
                        "remote object: the local one wins",
                        (unsigned long long)a->bucket, a->dirkey, o->name);
            goto out;
        }
        if (rc || strcmp(cp->st.etag, o->etag) == 0 || cp->st.time_s >= a->start_s)
            goto out;
        struct core__pend *pd = core__pend_get(c, de.ino, false);
        bool pending = pd != NULL;
        if (pd)
            core__pend_put(c, pd);
        if (pending || r.change != cp->st.change || moved(a, cp, o->name)) {
            if (conflict_new(c, de.ino, o->etag))
                srv_log(WARN, TIER,
                        "cache: bucket %llu key '%s%s' changed on the remote (ETag %s) and "
                        "here (not uploaded yet): the local one wins",
                        (unsigned long long)a->bucket, a->dirkey, o->name, o->etag);
            goto out;
        }
        rc = refresh(a, t, de.ino, &r, o, cp);
        if (rc == 0)
            atomic_fetch_add(&c->cm.changed, 1);
        goto out;
    }
    if (rc != -ENOENT)
        goto out;
    rc = 0;
    if (is_held(a, o->name))
        goto out; /* ours, renamed or removed here: the uploader moves or deletes it */
    rc = core__node_create(c, t, &a->sp, a->dir, o->name, nl, CORE_REG, 0644, 0, NULL, 0, &ino, &r);
    if (rc)
        goto out;
    r.used = 0;
    memcpy(cp->key, a->dirkey, a->dklen);
    memcpy(cp->key + a->dklen, o->name, nl + 1);
    cp->st.keylen = (uint32_t)(a->dklen + nl);
    rc = refresh(a, t, ino, &r, o, cp);
    if (rc == 0)
        atomic_fetch_add(&c->cm.created, 1);
out:
    free(cp);
    return rc;
}

static int apply_dir(struct apply_op *a, struct meta_txn *t, const char *name)
{
    size_t nl = strlen(name);
    if (!name_ok(name) || a->dklen + nl + 1 > CORE_KEY_MAX)
        return 0;
    struct meta_dirent de;
    int rc = meta_dirent_get(t, a->dir, name, nl, &de);
    if (rc != -ENOENT)
        return rc == 0 ? 0 : rc; /* there already (a file of that name stays) */
    if (is_held(a, name))
        return 0; /* renamed or removed here, its files' remote keys not moved yet */
    uint64_t ino;
    struct meta_inode r;
    return core__node_create(a->c, t, &a->sp, a->dir, name, nl, CORE_DIR, 0755, CORE_A_IMPLICIT,
                             NULL, 0, &ino, &r);
}

static int apply_fn(struct meta_txn *t, void *arg)
{
    struct apply_op *a = arg;
    int rc = 0;
    if (a->dirs) {
        for (size_t i = 0; rc == 0 && i < a->l->ndirs; i++)
            rc = apply_dir(a, t, a->l->dirs[i]);
        return rc;
    }
    for (size_t i = a->from; rc == 0 && i < a->to; i++)
        rc = apply_obj(a, t, &a->l->objs[i]);
    return rc;
}

/* The removal pass: local names the listing does not have. */
struct gone {
    char *name;
    uint64_t ino;
};

struct gone_scan {
    struct apply_op *a;
    struct gone *v;
    size_t n, cap;
};

static int gone_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct gone_scan *g = arg;
    (void)cookie;
    char buf[CORE_NAME_MAX + 1];
    if (len > CORE_NAME_MAX)
        return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    const char *k = buf;
    if (bsearch(&k, g->a->names, g->a->nnames, sizeof(*g->a->names), name_cmp))
        return 0;
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        void *nv = realloc(g->v, nc * sizeof(*g->v));
        if (!nv)
            return -ENOMEM;
        g->v = nv;
        g->cap = nc;
    }
    g->v[g->n].name = strdup(buf);
    if (!g->v[g->n].name)
        return -ENOMEM;
    g->v[g->n++].ino = ino;
    return 0;
}

struct remove_op {
    struct apply_op *a;
    struct gone *v;
    size_t n;
};

static int remove_fn(struct meta_txn *t, void *arg)
{
    struct remove_op *o = arg;
    struct apply_op *a = o->a;
    struct core *c = a->c;
    struct meta_tier_copy *cp = malloc(sizeof(*cp));
    if (!cp)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < o->n; i++) {
        struct meta_dirent de;
        struct meta_inode r, d;
        const char *nm = o->v[i].name;
        size_t nl = strlen(nm);
        rc = meta_dirent_get(t, a->dir, nm, nl, &de);
        if (rc == -ENOENT || (rc == 0 && de.ino != o->v[i].ino)) {
            rc = 0;
            continue;
        }
        if (rc == 0)
            rc = meta_inode_get(t, de.ino, &r);
        if (rc)
            break;
        if (r.type == CORE_DIR) {
            if ((r.flags & CORE_A_IMPLICIT) && r.nchild == 0) {
                rc = core__node_unlink(c, t, &a->sp, a->dir, nm, nl, true, 0, NULL);
                if (rc == -ENOTEMPTY || rc == -ENOENT)
                    rc = 0;
            }
            continue;
        }
        if (r.type != CORE_REG)
            continue;
        rc = meta_tier_get(t, de.ino, cp);
        if (rc == -ENOENT) {
            rc = 0; /* new here, not uploaded yet: it stays */
            continue;
        }
        if (rc)
            break;
        if (cp->st.time_s >= a->start_s)
            continue; /* uploaded while the remote was listed */
        if (moved(a, cp, nm))
            continue; /* renamed here (or its directory was), not uploaded under it yet */
        struct core__pend *pd = core__pend_get(c, de.ino, false);
        bool pending = pd != NULL;
        if (pd)
            core__pend_put(c, pd);
        if (pending || r.change != cp->st.change) {
            if (conflict_new(c, de.ino, ""))
                srv_log(WARN, TIER,
                        "cache: bucket %llu key '%s%s' deleted on the remote and changed here "
                        "(not uploaded yet): the local one wins",
                        (unsigned long long)a->bucket, a->dirkey, nm);
            continue;
        }
        rc = meta_inode_get(t, a->dir, &d);
        if (rc == 0)
            rc = core__entry_remove(c, t, a->dir, &d, nm, nl, de.ino, &r);
        if (rc == 0) {
            rc = meta_tier_del(t, de.ino);
            if (rc == -ENOENT)
                rc = 0;
        }
        if (rc == 0)
            atomic_fetch_add(&c->cm.removed, 1);
    }
    free(cp);
    return rc;
}

static int apply(struct apply_op *a)
{
    struct core *c = a->c;
    const struct core_cache_listing *l = a->l;
    int rc = a->revalidate ? find_held(a) : 0;
    if (rc == 0 && l->ndirs) {
        a->dirs = true;
        rc = meta_submit(c->meta, apply_fn, a, 0);
        a->dirs = false;
    }
    for (size_t i = 0; rc == 0 && i < l->nobjs; i += APPLY_BATCH) {
        a->from = i;
        a->to = i + APPLY_BATCH < l->nobjs ? i + APPLY_BATCH : l->nobjs;
        rc = meta_submit(c->meta, apply_fn, a, 0);
    }
    if (rc)
        return rc;
    /* removals: the names listed, sorted; then the local names not among them */
    a->nnames = l->nobjs + l->ndirs;
    a->names = malloc((a->nnames ? a->nnames : 1) * sizeof(*a->names));
    if (!a->names)
        return -ENOMEM;
    for (size_t i = 0; i < l->nobjs; i++)
        a->names[i] = l->objs[i].name;
    for (size_t i = 0; i < l->ndirs; i++)
        a->names[l->nobjs + i] = l->dirs[i];
    qsort(a->names, a->nnames, sizeof(*a->names), name_cmp);
    struct gone_scan g = {.a = a};
    struct meta_txn *t;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc == 0) {
        rc = meta_dirent_scan(t, a->dir, 0, gone_cb, &g);
        meta_rtxn_end(t);
    }
    for (size_t i = 0; rc == 0 && i < g.n; i += APPLY_BATCH) {
        struct remove_op o = {a, g.v + i, g.n - i < APPLY_BATCH ? g.n - i : APPLY_BATCH};
        rc = meta_submit(c->meta, remove_fn, &o, 0);
    }
    for (size_t i = 0; i < g.n; i++)
        free(g.v[i].name);
    free(g.v);
    free(a->names);
    a->names = NULL;
    return rc;
}

static void held_free(struct apply_op *a)
{
    for (size_t i = 0; i < a->nheld; i++)
        free(a->held[i]);
    free(a->held);
    a->held = NULL;
    a->nheld = 0;
}

/* ---- importing a directory when it is due ---- */

/* The directory (its key, "" for the bucket's root) whose import last answered
 * SRV_EIMPORT or SRV_EIMPORTFAIL on this thread (core_cache_import_failed). */
static _Thread_local char failed_key[CORE_KEY_MAX + 1];

const char *core_cache_import_failed(void)
{
    return failed_key;
}

/* Import directory @p dir of cache bucket @p bucket unless fresh.
 * @return 0, -EWOULDBLOCK (NOWAIT and due), SRV_EIMPORT (never imported and the remote
 * cannot be listed now), SRV_EIMPORTFAIL (... and it has failed so for the recall's
 * tier_recall_fail_ms), or another error. */
static int import_dir(struct core *c, const struct core_principal *p, uint64_t bucket, uint64_t dir)
{
    /* the recall's rule (core_tier.c): retryable until the remote has failed fail_ms in a
     * row; a failure nobody retried within fail_ms starts over */
    int64_t fail_ms = (int64_t)core__tier_fail_ms(c);
    int64_t now = srv_now_ms();
    pthread_mutex_lock(&c->cm.mu);
    const struct core__cment *e = cment(c, bucket);
    if (!e) {
        pthread_mutex_unlock(&c->cm.mu);
        return 0;
    }
    uint32_t ttl_ms = e->ttl_s * 1000u;
    struct core__cdir *d = cdir(c, bucket, dir);
    if (!d) {
        pthread_mutex_unlock(&c->cm.mu);
        return -ENOMEM;
    }
    if (!d->loaded && !d->at_ms && !d->busy && !(p->flags & CORE_P_NOWAIT)) {
        /* the first use since the start: the import time an earlier run kept */
        d->loaded = true;
        pthread_mutex_unlock(&c->cm.mu);
        int64_t at = rec_get(c, bucket, dir);
        pthread_mutex_lock(&c->cm.mu);
        if (at && !d->at_ms && !d->busy)
            d->at_ms = at;
        now = srv_now_ms();
    }
    for (;;) {
        if (d->at_ms && (ttl_ms ? now - d->at_ms < (int64_t)ttl_ms : d->at_ms > now)) {
            pthread_mutex_unlock(&c->cm.mu);
            return 0; /* fresh (ttl 0: an import that began after this call did) */
        }
        if (p->flags & CORE_P_NOWAIT) {
            pthread_mutex_unlock(&c->cm.mu);
            return -EWOULDBLOCK;
        }
        if (!d->busy)
            break;
        pthread_cond_wait(&c->cm.cv, &c->cm.mu);
    }
    d->busy = true;
    bool had = d->at_ms != 0;
    bool once = d->once;
    core_cache_list_fn list = c->cm.list;
    void *list_arg = c->cm.list_arg;
    pthread_mutex_unlock(&c->cm.mu);

    struct apply_op a = {.c = c, .bucket = bucket, .dir = dir};
    char *dk = malloc(CORE_KEY_MAX + 2);
    struct core_cache_listing l = {0};
    int rc = dk ? 0 : -ENOMEM;
    struct meta_txn *t = NULL;
    if (rc == 0)
        rc = meta_rtxn_begin(c->meta, &t);
    if (rc == 0) {
        struct meta_inode b;
        const void *v;
        size_t vl, dl = 0;
        struct tier_policy pol;
        struct meta_inode di;
        rc = meta_inode_get(t, bucket, &b);
        if (rc == 0 && meta_inode_get(t, dir, &di) == 0 && di.nchild > 0)
            once = true; /* names here already (imported, made or moved here) */
        if (rc == 0)
            rc = meta_bucketcfg_get(t, bucket, CORE_BLOB_TIER, &v, &vl);
        if (rc == 0)
            rc = tier_policy_decode(v, vl, &pol);
        if (rc == 0)
            rc = dir == bucket ? 0 : meta_dirpath_get(t, dir, dk, &dl);
        if (rc == 0) {
            dk[dl] = '\0';
            a.dirkey = dk;
            a.dklen = dl;
            a.remote = pol.remote;
            a.sp = (struct core_principal){.tenant = b.tenant,
                                           .uid = b.uid,
                                           .gid = b.gid,
                                           .flags = CORE_P_SUPER | CORE_P_FILL};
        } else if (rc == -ENOENT) {
            rc = SRV_ERECALL; /* no tier policy (yet): nothing to list */
        }
        meta_rtxn_end(t);
    }
    int64_t start = srv_now_ms();
    a.start_s = (int64_t)time(NULL);
    if (rc == 0)
        rc = list ? list(list_arg, a.remote, a.dirkey, &l) : SRV_ERECALL;
    if (rc == 0) {
        a.l = &l;
        a.revalidate = had || once;
        rc = apply(&a);
        held_free(&a);
        atomic_fetch_add(&c->cm.imports, 1);
    } else {
        atomic_fetch_add(&c->cm.import_errors, 1);
        srv_log(WARN, TIER, "cache: listing '%s' of bucket %llu on remote %u: %s%s",
                a.dirkey ? a.dirkey : "", (unsigned long long)bucket, a.remote,
                rc == SRV_ERECALL ? "the remote cannot be listed now (retried at the next use)"
                                  : srv_strerror(rc),
                had ? " (serving what was imported before)" : "");
    }
    core_cache_listing_free(&l);
    if (rc == 0)
        rec_put(c, bucket, dir, start);
    bool down = rc == SRV_ERECALL || rc == -ENOENT; /* remote unreachable, remote gone */
    pthread_mutex_lock(&c->cm.mu);
    d->busy = false;
    if (rc == 0) {
        d->at_ms = start;
        d->once = true;
        d->fail_since_ms = d->fail_last_ms = 0;
    } else if (down && !had) {
        if (!d->fail_since_ms || start - d->fail_last_ms > fail_ms)
            d->fail_since_ms = start; /* the first failure, or nobody asked for fail_ms */
        d->fail_last_ms = start;
        rc = srv_now_ms() - d->fail_since_ms >= fail_ms ? SRV_EIMPORTFAIL : SRV_EIMPORT;
    }
    pthread_cond_broadcast(&c->cm.cv);
    pthread_mutex_unlock(&c->cm.mu);
    if (rc == SRV_EIMPORT || rc == SRV_EIMPORTFAIL)
        snprintf(failed_key, sizeof(failed_key), "%s", a.dirkey ? a.dirkey : "");
    free(dk);
    if (rc && had)
        return 0; /* the remote is down: serve what is here */
    return rc;
}

/* ---- where the front ends' calls reach the remote ---- */

int core__cm_dir(struct core *c, const struct core_principal *p, uint64_t dir)
{
    struct meta_txn *t;
    struct meta_inode d;
    pthread_mutex_lock(&c->cm.mu);
    bool any = c->cm.n > 0;
    pthread_mutex_unlock(&c->cm.mu);
    if (!any)
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, dir, &d);
    meta_rtxn_end(t);
    if (rc || d.type != CORE_DIR || d.bucket == 0)
        return 0; /* the call itself answers */
    return import_dir(c, p, d.bucket, dir);
}

/* Directory of key [0, len) (ending in '/'), or 0 when not there. */
static uint64_t dir_of(struct core *c, uint64_t bucket, const char *key, size_t len)
{
    if (len == 0)
        return bucket;
    struct meta_txn *t;
    uint64_t ino = 0;
    uint32_t type = 0;
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return 0;
    if (meta_keyidx_get(t, bucket, key, len, &ino, &type) != 0 || type != CORE_DIR)
        ino = 0;
    meta_rtxn_end(t);
    return ino;
}

/* Import the directories on the way to key [0, upto) (upto: just after a '/', or 0). */
static int import_path(struct core *c, const struct core_principal *p, uint64_t bucket,
                       const char *key, size_t upto)
{
    size_t pos = 0;
    for (;;) {
        uint64_t dir = dir_of(c, bucket, key, pos);
        if (!dir)
            return 0; /* not on the remote either (its parent was just imported) */
        int rc = import_dir(c, p, bucket, dir);
        if (rc || pos == upto)
            return rc;
        const char *sl = memchr(key + pos, '/', upto - pos);
        if (!sl)
            return 0;
        pos = (size_t)(sl - key) + 1;
    }
}

int core__cm_key(struct core *c, const struct core_principal *p, uint64_t bucket, const char *key,
                 size_t len)
{
    if (!core_cache_bucket(c, bucket, NULL))
        return 0;
    size_t upto = len;
    while (upto > 0 && key[upto - 1] != '/')
        upto--;
    return import_path(c, p, bucket, key, upto);
}

struct subdirs {
    uint64_t *v;
    size_t n, cap;
    struct meta_txn *t;
    const char *pfx; /* only names starting with it (NULL: all) */
    size_t pfxlen;
};

static int subdir_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct subdirs *s = arg;
    struct meta_inode r;
    (void)cookie;
    if (s->pfx && (len < s->pfxlen || memcmp(name, s->pfx, s->pfxlen) != 0))
        return 0;
    if (meta_inode_get(s->t, ino, &r) != 0 || r.type != CORE_DIR)
        return 0;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        void *nv = realloc(s->v, nc * sizeof(*s->v));
        if (!nv)
            return -ENOMEM;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = ino;
    return 0;
}

int core__cm_list(struct core *c, const struct core_principal *p, uint64_t bucket,
                  const char *prefix, size_t len, bool recursive)
{
    if (!core_cache_bucket(c, bucket, NULL))
        return 0;
    size_t upto = len;
    while (upto > 0 && prefix[upto - 1] != '/')
        upto--;
    int rc = import_path(c, p, bucket, prefix, upto);
    if (rc || !recursive)
        return rc;
    /* a listing without a delimiter: every directory under the prefix */
    uint64_t top = dir_of(c, bucket, prefix, upto);
    if (!top)
        return 0;
    struct subdirs s = {.pfx = prefix + upto, .pfxlen = len - upto};
    rc = meta_rtxn_begin(c->meta, &s.t);
    if (rc)
        return rc;
    rc = meta_dirent_scan(s.t, top, 0, subdir_cb, &s);
    meta_rtxn_end(s.t);
    s.pfx = NULL;
    for (size_t i = 0; rc == 0 && i < s.n; i++) {
        uint64_t d = s.v[i];
        rc = import_dir(c, p, bucket, d);
        if (rc)
            break;
        rc = meta_rtxn_begin(c->meta, &s.t);
        if (rc)
            break;
        rc = meta_dirent_scan(s.t, d, 0, subdir_cb, &s); /* appends: a breadth-first walk */
        meta_rtxn_end(s.t);
    }
    free(s.v);
    return rc;
}

/* ---- an imported object's metadata ---- */

struct meta_op {
    uint64_t ino, change;
    const char *etag; /* the remote's, as recorded */
    const void *blob;
    size_t len;
};

static int meta_fn(struct meta_txn *t, void *arg)
{
    struct meta_op *o = arg;
    return core__cm_meta_keep(t, o->ino, o->change, o->etag, o->blob, o->len);
}

/* A read from @p read_at (core_key_lookup_at) follows the lookup of file @p ino (change
 * @p change), whose metadata is due: if the read's first byte is still remote, wait for
 * the recall of the chunk that holds it, whose GET's answer brings the metadata
 * (core_tier.c keeps it in the chunk's txn). @return true when the recall answered
 * (no HEAD: a failure is the read's to answer too), false when a HEAD must ask (no read,
 * the byte is local, the recall brought no metadata). */
static bool meta_by_recall(struct core *c, uint64_t ino, uint64_t change, int64_t read_at)
{
    if (read_at == CORE_READ_NONE || !core__tier_gives_meta(c))
        return false;
    struct meta_txn *t;
    struct meta_inode r;
    bool have = true; /* the byte is local (or the file not what the lookup saw) */
    uint64_t off = 0;
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return false;
    if (meta_inode_get(t, ino, &r) == 0 && (r.flags & META_I_EVICTED) && r.change == change) {
        if (read_at >= 0)
            off = (uint64_t)read_at;
        else
            off = (uint64_t)-read_at < r.size ? r.size - (uint64_t)-read_at : 0;
        if (off >= r.size || core__tier_resident(t, ino, off, off + 1, &have) != 0)
            have = true; /* past the end (a 416): nothing to recall */
    }
    meta_rtxn_end(t);
    if (have)
        return false;
    if (core__tier_wait(c, ino, &r, off, off + 1, false) != 0)
        return true; /* the read waits again and answers */
    struct meta_tier_copy *cp = malloc(sizeof(*cp));
    char oetag[META_ETAG_MAX + 1];
    uint64_t ch = 0;
    bool due = true;
    if (cp && meta_rtxn_begin(c->meta, &t) == 0) {
        due = core__cm_meta_due(t, ino, cp, oetag, sizeof(oetag), &ch);
        meta_rtxn_end(t);
    }
    free(cp);
    return !due;
}

int core__cm_meta(struct core *c, const struct core_principal *p, uint64_t bucket, const char *key,
                  size_t len, int64_t read_at)
{
    if (!core_cache_bucket(c, bucket, NULL))
        return 0;
    pthread_mutex_lock(&c->cm.mu);
    core_cache_meta_fn fn = c->cm.meta;
    void *fn_arg = c->cm.meta_arg;
    pthread_mutex_unlock(&c->cm.mu);
    if (!fn || len == 0 || key[len - 1] == '/')
        return 0;
    struct meta_tier_copy *cp = malloc(sizeof(*cp));
    char oetag[META_ETAG_MAX + 1];
    uint64_t ino = 0, change = 0;
    uint32_t type = 0;
    bool due = false;
    struct meta_txn *t;
    if (!cp)
        return 0;
    if (meta_rtxn_begin(c->meta, &t) == 0) {
        due = meta_keyidx_get(t, bucket, key, len, &ino, &type) == 0 && type == CORE_REG &&
              core__cm_meta_due(t, ino, cp, oetag, sizeof(oetag), &change);
        meta_rtxn_end(t);
    }
    int rc = 0;
    if (due && (p->flags & CORE_P_NOWAIT)) {
        rc = -EWOULDBLOCK;
    } else if (due && meta_by_recall(c, ino, change, read_at)) {
        atomic_fetch_add(&c->cm.meta_recalls, 1);
    } else if (due) {
        atomic_fetch_add(&c->cm.meta_heads, 1);
        void *blob = NULL;
        size_t bl = 0;
        int frc = fn(fn_arg, cp->st.remote, cp->key, cp->st.etag, &blob, &bl);
        if (frc == 0) {
            struct meta_op o = {ino, change, cp->st.etag, blob, bl};
            frc = meta_submit(c->meta, meta_fn, &o, 0);
        }
        if (frc == SRV_EREMOTECHG) {
            struct meta_inode r;
            if (meta_rtxn_begin(c->meta, &t) == 0) {
                if (meta_inode_get(t, ino, &r) == 0)
                    core__cm_stale(c, bucket, r.parent); /* revalidated at the next use */
                meta_rtxn_end(t);
            }
        } else if (frc && frc != SRV_ERECALL) {
            srv_log(WARN, TIER, "cache: metadata of bucket %llu key '%.*s': %s",
                    (unsigned long long)bucket, (int)len, key, srv_strerror(frc));
        }
        free(blob);
    }
    free(cp);
    return rc;
}
