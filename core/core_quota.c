/* SPDX-License-Identifier: Apache-2.0
 * core_quota: usage and hard limits per tenant, bucket and directory.
 *
 * Tenants (ino 0) and buckets always have a usage record; a directory has one
 * only while a limit is set on it. Every change charges the tenant, the
 * bucket and each quota'd directory on the parent chain inside the change's
 * own txn, so usage is exact after any crash. The parent walk is skipped
 * while no directory quota exists. A hard link is charged where its inode
 * was created; its bytes are credited where its last link goes.
 *
 * Byte reservations close the gap between admitting a write and committing
 * it. Data is written before its op commits (NFS UNSTABLE writes stay pending
 * in memory until COMMIT), so admission checks committed usage plus the bytes
 * reserved by every write admitted and not committed yet, and reserves its
 * own under the same lock (resv_mu). A write keeps its reservation until the
 * op that charges its bytes committed (visible to any read txn begun after
 * the release), so admission never misses bytes: they are either committed
 * or still reserved. Only records with a byte limit are tracked (a limit set
 * while writes are pending counts them from their next write on). S3 uploads
 * hold their size unchecked while their op runs; the op enforces the limit on
 * committed usage plus everyone else's reservations (an object that replaces
 * another is charged net). Every limited record of a chain is reserved on,
 * however deep (the first CORE_RESV_KEYS keys inline, the rest on the heap).
 * A multipart completion holds its bytes on the limited directories of its
 * key while its op runs (its parts are charged to the tenant and bucket
 * already).
 *
 * Renames change chains. One that does (to another directory, or of a hard
 * link made elsewhere), while directory quotas exist, first marks its bucket
 * (a slot of mv_slot, and the global mv_busy / mv_gen), then commits the
 * pending writes it moves, so its op moves their bytes, and checks them, as
 * committed usage; the op refuses to run (-EAGAIN, begun again) if it would
 * still move pending data. A write notes mv_gen before it reads its file's
 * chain and, under its pend record's mu just before it becomes pending,
 * checks that no rename started or ended since (two loads); else it waits
 * until its bucket is unmarked (every such rename committed or failed) and
 * moves its reservation to the chain the file has then, checking the records
 * new to it (-EDQUOT). A write that became pending before the mark is
 * committed by the rename; one after it re-reserved: the chain a pending
 * byte's reservation names is always the one its commit charges.
 * Thread: txn helpers inside writer ops; the public calls from any thread. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

static uint64_t add_clamped(uint64_t v, int64_t d)
{
    if (d < 0 && (uint64_t)(-d) > v)
        return 0;
    return v + (uint64_t)d;
}

/* Apply a delta to one record; @p create makes a missing record. Enforcing
 * counts the bytes reserved on the record by holders other than @p own. */
static int usage_apply(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino, int64_t db,
                       int64_t di, bool enforce, bool create, const struct core__resv *own)
{
    struct meta_usage u;
    int rc = meta_usage_get(t, tenant, ino, &u);
    if (rc == -ENOENT) {
        if (!create)
            return 0;
        memset(&u, 0, sizeof(u));
    } else if (rc) {
        return rc;
    }
    u.bytes = add_clamped(u.bytes, db);
    u.inodes = add_clamped(u.inodes, di);
    if (enforce && db > 0 && u.bytes_limit &&
        (u.bytes > u.bytes_limit ||
         core__resv_other(c, tenant, ino, own) > u.bytes_limit - u.bytes))
        return -EDQUOT;
    if (enforce && di > 0 && u.inodes_limit && u.inodes > u.inodes_limit)
        return -EDQUOT;
    return meta_usage_put(t, tenant, ino, &u);
}

/* Quota'd directories strictly below the bucket on the chain from @p dir. */
static int dirs_apply(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir, uint64_t bucket,
                      int64_t db, int64_t di, bool enforce, const struct core__resv *own)
{
    uint64_t cur = dir;
    int depth = 0;
    if (atomic_load(&c->ndirquota) == 0)
        return 0;
    while (cur && cur != bucket && depth++ < 1024) {
        struct meta_inode r;
        int rc = usage_apply(c, t, tenant, cur, db, di, enforce, false, own);
        if (rc)
            return rc;
        rc = meta_inode_get(t, cur, &r);
        if (rc)
            return rc;
        cur = r.parent;
    }
    return 0;
}

int core__usage_charge_own(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                           int64_t dbytes, int64_t dinodes, bool enforce,
                           const struct core__resv *own)
{
    struct meta_inode d;
    int rc;
    if (dbytes == 0 && dinodes == 0)
        return 0;
    rc = usage_apply(c, t, tenant, 0, dbytes, dinodes, enforce, true, own);
    if (rc || dir == 0)
        return rc;
    rc = meta_inode_get(t, dir, &d);
    if (rc)
        return rc;
    if (d.flags & CORE_A_TROOT)
        return 0;
    rc = dirs_apply(c, t, tenant, dir, d.bucket, dbytes, dinodes, enforce, own);
    if (rc)
        return rc;
    return usage_apply(c, t, tenant, d.bucket, dbytes, dinodes, enforce, true, own);
}

int core__usage_charge(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                       int64_t dbytes, int64_t dinodes, bool enforce)
{
    return core__usage_charge_own(c, t, tenant, dir, dbytes, dinodes, enforce, NULL);
}

/* Charge a move of (bytes, inodes) from directory chain @p from to @p to, only on the
 * directory records (bucket and tenant are unchanged by a move inside a bucket). */
int core__usage_move(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket, uint64_t from,
                     uint64_t to, int64_t bytes, int64_t inodes)
{
    int rc = dirs_apply(c, t, tenant, from, bucket, -bytes, -inodes, false, NULL);
    if (rc)
        return rc;
    return dirs_apply(c, t, tenant, to, bucket, bytes, inodes, true, NULL);
}

int core__usage_create(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino)
{
    struct meta_usage u;
    memset(&u, 0, sizeof(u));
    return meta_usage_put(t, tenant, ino, &u);
}

int core__usage_delete(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino)
{
    (void)c;
    int rc = meta_usage_del(t, tenant, ino);
    return rc == -ENOENT ? 0 : rc;
}

/* A directory's usage record (not a tenant's or a bucket's) counts as a quota. */
struct dirquota_count {
    struct meta_txn *t;
    unsigned n;
};

static int dirquota_add(void *arg, uint32_t tenant, uint64_t ino, const struct meta_usage *u)
{
    struct dirquota_count *q = arg;
    struct meta_inode r;
    (void)tenant;
    (void)u;
    if (ino != 0 && meta_inode_get(q->t, ino, &r) == 0 && !(r.flags & CORE_A_BUCKET))
        q->n++;
    return 0;
}

int core__quota_load(struct core *c)
{
    struct dirquota_count q = {0};
    int rc = meta_rtxn_begin(c->meta, &q.t);
    if (rc)
        return rc;
    rc = meta_usage_scan(q.t, dirquota_add, &q);
    meta_rtxn_end(q.t);
    if (rc)
        return rc;
    atomic_store(&c->ndirquota, q.n);
    return 0;
}

/* ---- public calls ---- */

int core_usage_get(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out)
{
    struct meta_txn *t;
    struct meta_usage u;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    memset(out, 0, sizeof(*out));
    rc = meta_usage_get(t, tenant, ino, &u);
    if (rc == -ENOENT && ino != 0) {
        /* a directory without a limit: its usage is not tracked */
        struct meta_inode r;
        rc = meta_inode_get(t, ino, &r);
        if (rc == 0 && (r.tenant != tenant || r.type != CORE_DIR))
            rc = -ENOENT;
        memset(&u, 0, sizeof(u));
    }
    meta_rtxn_end(t);
    if (rc == 0) {
        /* acknowledged writes not committed yet count too (tenant and bucket
         * totals; a directory's limit counts committed data only) */
        int64_t pend = core__pend_usage(c, tenant, ino);
        out->bytes = (int64_t)u.bytes + pend > 0 ? (uint64_t)((int64_t)u.bytes + pend) : 0;
        out->inodes = u.inodes;
        out->bytes_limit = u.bytes_limit;
        out->inodes_limit = u.inodes_limit;
    }
    return rc;
}

struct quota_set_op {
    struct core *c;
    uint32_t tenant;
    uint64_t ino;
    uint64_t bl, il;
    bool created;
};

/* Sum the usage of a directory's subtree from the key index. */
struct usage_sum {
    struct core *c;
    struct meta_txn *t;
    size_t plen;
    struct meta_usage *u;
};

static int usage_add(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                     size_t *skip)
{
    struct usage_sum *s = arg;
    struct meta_inode r;
    (void)key;
    (void)skip;
    if (klen == s->plen)
        return 0; /* the directory itself */
    if (meta_inode_get(s->t, kv->ino, &r) != 0)
        return 0;
    s->u->inodes++;
    if (r.type != CORE_DIR)
        s->u->bytes += r.used;
    return 0;
}

static int subtree_usage(struct core *c, struct meta_txn *t, uint64_t bucket, uint64_t dir,
                         struct meta_usage *u)
{
    char path[CORE_KEY_MAX + 1];
    struct usage_sum s = {.c = c, .t = t, .u = u};
    int rc = meta_dirpath_get(t, dir, path, &s.plen);
    if (rc)
        return rc;
    return meta_keyidx_scan(t, bucket, path, s.plen, NULL, 0, usage_add, &s);
}

static int quota_set_fn(struct meta_txn *t, void *arg)
{
    struct quota_set_op *a = arg;
    struct core *c = a->c;
    struct meta_usage u;
    int rc = meta_usage_get(t, a->tenant, a->ino, &u);
    if (rc == -ENOENT) {
        if (a->ino == 0) {
            uint64_t root;
            rc = meta_root_get(t, a->tenant, &root);
            if (rc)
                return rc;
            memset(&u, 0, sizeof(u));
        } else {
            struct meta_inode r;
            rc = meta_inode_get(t, a->ino, &r);
            if (rc)
                return rc;
            if (r.tenant != a->tenant || r.type != CORE_DIR || (r.flags & CORE_A_TROOT))
                return -ENOENT;
            if (a->bl == 0 && a->il == 0)
                return 0; /* no record, no limit: nothing to do */
            memset(&u, 0, sizeof(u));
            rc = subtree_usage(c, t, r.bucket, a->ino, &u);
            if (rc)
                return rc;
            a->created = true;
        }
    } else if (rc) {
        return rc;
    }
    u.bytes_limit = a->bl;
    u.inodes_limit = a->il;
    return meta_usage_put(t, a->tenant, a->ino, &u);
}

int core_quota_set(struct core *c, uint32_t tenant, uint64_t ino, uint64_t bytes_limit,
                   uint64_t inodes_limit)
{
    struct quota_set_op a = {c, tenant, ino, bytes_limit, inodes_limit, false};
    /* count first so a concurrent change already walks the chain */
    atomic_fetch_add(&c->ndirquota, 1);
    int rc = meta_submit(c->meta, quota_set_fn, &a, 0);
    if (!a.created || rc != 0)
        atomic_fetch_sub(&c->ndirquota, 1);
    return rc;
}

static int admit_one(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino, uint64_t bytes,
                     uint64_t inodes)
{
    struct meta_usage u;
    int rc = meta_usage_get(t, tenant, ino, &u);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if ((bytes && u.bytes_limit &&
         u.bytes + core__resv_other(c, tenant, ino, NULL) + bytes > u.bytes_limit) ||
        (inodes && u.inodes_limit && u.inodes + inodes > u.inodes_limit))
        return -EDQUOT;
    return 0;
}

int core_quota_admit(struct core *c, const struct core_principal *p, uint64_t dir, uint64_t bytes,
                     uint64_t inodes)
{
    struct meta_txn *t;
    struct meta_inode d;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = admit_one(c, t, p->tenant, 0, bytes, inodes);
    if (rc || dir == 0)
        goto out;
    rc = core__ino_get_p(t, p, dir, 0, &d);
    if (rc || (d.flags & CORE_A_TROOT))
        goto out;
    rc = admit_one(c, t, p->tenant, d.bucket, bytes, inodes);
    if (rc || atomic_load(&c->ndirquota) == 0)
        goto out;
    for (uint64_t cur = dir; cur && cur != d.bucket && rc == 0;) {
        struct meta_inode r;
        rc = admit_one(c, t, p->tenant, cur, bytes, inodes);
        if (rc == 0 && (rc = meta_inode_get(t, cur, &r)) == 0)
            cur = r.parent;
    }
out:
    meta_rtxn_end(t);
    return rc;
}

/* ---- byte reservations ---- */

void core__resv_init(struct core *c)
{
    pthread_mutex_init(&c->resv_mu, NULL);
    memset(c->resv, 0, sizeof(c->resv));
    pthread_mutex_init(&c->mv_mu, NULL);
    pthread_cond_init(&c->mv_cv, NULL);
    memset(c->mv_slot, 0, sizeof(c->mv_slot));
    atomic_store(&c->mv_gen, 0);
    atomic_store(&c->mv_busy, 0);
}

void core__resv_fini(struct core *c)
{
    for (int i = 0; i < CORE_RESV_BUCKETS; i++) {
        while (c->resv[i]) {
            struct core__rent *e = c->resv[i];
            c->resv[i] = e->next;
            free(e);
        }
    }
    pthread_mutex_destroy(&c->resv_mu);
    pthread_mutex_destroy(&c->mv_mu);
    pthread_cond_destroy(&c->mv_cv);
}

/* Key @p i of @p h. */
static uint64_t rkey(const struct core__resv *h, uint32_t i)
{
    return i < CORE_RESV_KEYS ? h->key[i] : h->more[i - CORE_RESV_KEYS];
}

/* Forget @p h's keys (it holds nothing on them). */
static void keys_free(struct core__resv *h)
{
    free(h->more);
    h->more = NULL;
    h->n = 0;
}

/* Under resv_mu: the table slot of record (tenant, ino). */
static struct core__rent **rent_slot(struct core *c, uint32_t tenant, uint64_t ino)
{
    uint64_t h = (ino ^ ((uint64_t)tenant << 40)) * 0x9e3779b97f4a7c15ull;
    struct core__rent **pp = &c->resv[h >> 56];
    while (*pp && ((*pp)->tenant != tenant || (*pp)->ino != ino))
        pp = &(*pp)->next;
    return pp;
}

/* Under resv_mu: give back what @p h holds and unpin its records. */
static void resv_unpin(struct core *c, struct core__resv *h)
{
    for (uint32_t i = 0; i < h->n; i++) {
        struct core__rent **pp = rent_slot(c, h->tenant, rkey(h, i));
        struct core__rent *e = *pp;
        if (!e)
            continue;
        e->bytes = e->bytes > h->bytes ? e->bytes - h->bytes : 0;
        if (--e->holders == 0) {
            *pp = e->next;
            free(e);
        }
    }
    keys_free(h);
    h->bytes = 0;
}

/* Under resv_mu: pin @p h's records (holding nothing yet). @return 0, -ENOMEM. */
static int resv_pin(struct core *c, struct core__resv *h)
{
    h->bytes = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        struct core__rent **pp = rent_slot(c, h->tenant, rkey(h, i));
        if (!*pp) {
            struct core__rent *e = calloc(1, sizeof(*e));
            if (!e) {
                h->n = i;
                resv_unpin(c, h);
                return -ENOMEM;
            }
            e->tenant = h->tenant;
            e->ino = rkey(h, i);
            *pp = e;
        }
        (*pp)->holders++;
    }
    return 0;
}

/* Add record (h->tenant, @p ino) to @p h when it has a byte limit (every
 * limited record of a chain, however deep). @return 0, -ENOMEM, -EIO. */
static int keys_add(struct core *c, struct meta_txn *t, struct core__resv *h, uint64_t ino)
{
    struct meta_usage u;
    int rc = meta_usage_get(t, h->tenant, ino, &u);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (!u.bytes_limit)
        return 0;
    for (uint32_t i = 0; i < h->n; i++)
        if (rkey(h, i) == ino)
            return 0;
    if (h->n >= CORE_RESV_KEYS) {
        uint64_t *nm = realloc(h->more, (h->n - CORE_RESV_KEYS + 1) * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        h->more = nm;
        h->more[h->n - CORE_RESV_KEYS] = ino;
    } else {
        h->key[h->n] = ino;
    }
    h->n++;
    return 0;
}

/* Limited records a write into directory @p dir counts against. */
static int keys_dir(struct core *c, struct meta_txn *t, uint64_t dir, struct core__resv *h)
{
    struct meta_inode d;
    int depth = 0;
    int rc = keys_add(c, t, h, 0);
    if (rc || dir == 0)
        return rc;
    rc = meta_inode_get(t, dir, &d);
    if (rc == -ENOENT)
        return 0; /* gone: the write's own checks fail it */
    if (rc || (d.flags & CORE_A_TROOT))
        return rc;
    rc = keys_add(c, t, h, d.bucket);
    if (rc || atomic_load(&c->ndirquota) == 0)
        return rc;
    for (uint64_t cur = dir; cur && cur != d.bucket && rc == 0 && depth++ < 1024;) {
        struct meta_inode r;
        rc = keys_add(c, t, h, cur);
        if (rc == 0 && (rc = meta_inode_get(t, cur, &r)) == 0)
            cur = r.parent;
    }
    return rc == -ENOENT ? 0 : rc;
}

/* Limited directories an object at @p key of @p bucket counts against (its
 * existing ancestors below the bucket; missing ones are created without limits). */
static int keys_key_dirs(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key,
                         size_t klen, struct core__resv *h)
{
    int rc = 0;
    if (atomic_load(&c->ndirquota) == 0)
        return 0;
    for (size_t s = 0; s + 1 < klen && rc == 0; s++) {
        uint64_t ino;
        uint32_t type;
        if (key[s] != '/')
            continue;
        rc = meta_keyidx_get(t, bucket, key, s + 1, &ino, &type);
        if (rc == -ENOENT)
            return 0;
        if (rc == 0)
            rc = keys_add(c, t, h, ino);
    }
    return rc;
}

/* Limited records an object at @p key of @p bucket counts against: the
 * tenant, the bucket and its directories. */
static int keys_key(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                    struct core__resv *h)
{
    int rc = keys_add(c, t, h, 0);
    if (rc == 0)
        rc = keys_add(c, t, h, bucket);
    if (rc == 0)
        rc = keys_key_dirs(c, t, bucket, key, klen, h);
    return rc;
}

/* Whether @p h holds record @p ino. */
static bool resv_has(const struct core__resv *h, uint64_t ino)
{
    for (uint32_t i = 0; i < h->n; i++)
        if (rkey(h, i) == ino)
            return true;
    return false;
}

/* Under resv_mu, @p h pinned: do @p bytes more fit on each of its records
 * (committed usage read now, so a reservation given back before is committed
 * and visible) but those @p skip holds already (may be NULL)? Then take them.
 * @return 0, -EDQUOT, -EIO. */
static int resv_take(struct core *c, struct core__resv *h, uint64_t bytes,
                     const struct core__resv *skip)
{
    struct meta_txn *t;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < h->n && rc == 0; i++) {
        struct meta_usage u;
        if (skip && resv_has(skip, rkey(h, i)))
            continue;
        int r = meta_usage_get(t, h->tenant, rkey(h, i), &u);
        if (r == -ENOENT || (r == 0 && !u.bytes_limit))
            continue;
        if (r) {
            rc = r;
            break;
        }
        uint64_t held = (*rent_slot(c, h->tenant, rkey(h, i)))->bytes;
        if (u.bytes > u.bytes_limit || held > u.bytes_limit - u.bytes ||
            bytes > u.bytes_limit - u.bytes - held)
            rc = -EDQUOT;
    }
    meta_rtxn_end(t);
    if (rc == 0) {
        for (uint32_t i = 0; i < h->n; i++)
            (*rent_slot(c, h->tenant, rkey(h, i)))->bytes += bytes;
        h->bytes = h->n ? bytes : 0;
    }
    return rc;
}

int core__resv_admit(struct core *c, uint32_t tenant, uint64_t dir, uint64_t bytes,
                     struct core__resv *h)
{
    struct meta_txn *t;
    memset(h, 0, sizeof(*h));
    h->tenant = tenant;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = keys_dir(c, t, dir, h);
    meta_rtxn_end(t);
    if (rc || h->n == 0) {
        keys_free(h);
        return rc;
    }
    pthread_mutex_lock(&c->resv_mu);
    rc = resv_pin(c, h);
    if (rc == 0 && bytes && (rc = resv_take(c, h, bytes, NULL)) != 0)
        resv_unpin(c, h);
    pthread_mutex_unlock(&c->resv_mu);
    return rc;
}

typedef int (*keys_fn)(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key,
                       size_t klen, struct core__resv *h);

/* Hold @p bytes, unchecked, on the records @p keys names for @p key. */
static int hold(struct core *c, uint32_t tenant, uint64_t bucket, const char *key, size_t klen,
                uint64_t bytes, struct core__resv *h, keys_fn keys)
{
    struct meta_txn *t;
    memset(h, 0, sizeof(*h));
    h->tenant = tenant;
    if (bytes == 0)
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = keys(c, t, bucket, key, klen, h);
    meta_rtxn_end(t);
    if (rc || h->n == 0) {
        keys_free(h);
        return rc;
    }
    pthread_mutex_lock(&c->resv_mu);
    rc = resv_pin(c, h);
    if (rc == 0) {
        for (uint32_t i = 0; i < h->n; i++)
            (*rent_slot(c, tenant, rkey(h, i)))->bytes += bytes;
        h->bytes = bytes;
    }
    pthread_mutex_unlock(&c->resv_mu);
    return rc;
}

int core__resv_hold_key(struct core *c, uint32_t tenant, uint64_t bucket, const char *key,
                        size_t klen, uint64_t bytes, struct core__resv *h)
{
    return hold(c, tenant, bucket, key, klen, bytes, h, keys_key);
}

int core__resv_hold_dirs(struct core *c, uint32_t tenant, uint64_t bucket, const char *key,
                         size_t klen, uint64_t bytes, struct core__resv *h)
{
    return hold(c, tenant, bucket, key, klen, bytes, h, keys_key_dirs);
}

void core__resv_move(struct core *c, struct core__resv *dst, struct core__resv *src,
                     uint64_t bytes)
{
    if (!dst->n && !src->n)
        return;
    pthread_mutex_lock(&c->resv_mu);
    resv_unpin(c, dst);
    if (src->n && bytes) {
        for (uint32_t i = 0; i < src->n; i++) {
            struct core__rent *e = *rent_slot(c, src->tenant, rkey(src, i));
            if (e)
                e->bytes = (e->bytes > src->bytes ? e->bytes - src->bytes : 0) + bytes;
        }
        *dst = *src; /* dst's keys were freed by resv_unpin; it owns src's now */
        dst->bytes = bytes;
        src->n = 0;
        src->more = NULL;
        src->bytes = 0;
    } else {
        resv_unpin(c, src);
    }
    pthread_mutex_unlock(&c->resv_mu);
}

void core__resv_set(struct core *c, struct core__resv *h, uint64_t bytes)
{
    if (!h->n)
        return;
    pthread_mutex_lock(&c->resv_mu);
    if (bytes == 0) {
        resv_unpin(c, h);
    } else {
        for (uint32_t i = 0; i < h->n; i++) {
            struct core__rent *e = *rent_slot(c, h->tenant, rkey(h, i));
            if (e)
                e->bytes = (e->bytes > h->bytes ? e->bytes - h->bytes : 0) + bytes;
        }
        h->bytes = bytes;
    }
    pthread_mutex_unlock(&c->resv_mu);
}

uint64_t core__resv_other(struct core *c, uint32_t tenant, uint64_t ino,
                          const struct core__resv *own)
{
    uint64_t v = 0;
    pthread_mutex_lock(&c->resv_mu);
    struct core__rent *e = *rent_slot(c, tenant, ino);
    if (e)
        v = e->bytes;
    pthread_mutex_unlock(&c->resv_mu);
    if (own && own->tenant == tenant)
        for (uint32_t i = 0; i < own->n; i++)
            if (rkey(own, i) == ino)
                return v > own->bytes ? v - own->bytes : 0;
    return v;
}

/* ---- renames with pending data ---- */

/* Inodes of @p tenant's @p bucket with pending data (heap array; free it). */
static size_t pend_inos(struct core *c, uint32_t tenant, uint64_t bucket, uint64_t **out)
{
    uint64_t *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < CORE_PEND_SHARDS; i++) {
        struct core__pshard *s = &c->pend[i];
        pthread_mutex_lock(&s->mu);
        for (struct core__pend *p = s->head; p; p = p->next) {
            pthread_mutex_lock(&p->mu);
            bool take = !p->dead && (p->ext.n || p->inl) && p->tenant == tenant &&
                        p->bucket == bucket;
            pthread_mutex_unlock(&p->mu);
            if (!take)
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                uint64_t *nv = realloc(v, nc * sizeof(*nv));
                if (!nv)
                    continue; /* the flush below then misses it; no worse than before */
                v = nv;
                cap = nc;
            }
            v[n++] = p->ino;
        }
        pthread_mutex_unlock(&s->mu);
    }
    *out = v;
    return n;
}

static int flush_ino(struct core *c, uint64_t ino)
{
    struct core__pend *pd = core__pend_get(c, ino, false);
    if (!pd)
        return 0;
    int rc = core__pend_flush(c, pd);
    core__pend_put(c, pd);
    return rc == SRV_ESTALE ? 0 : rc; /* gone meanwhile: nothing of it to move */
}

static struct core__mvslot *mv_slot(struct core *c, uint64_t bucket)
{
    return &c->mv_slot[(bucket * 0x9e3779b97f4a7c15ull) >> 58];
}

int core__quota_rename_begin(struct core *c, uint32_t tenant, uint64_t fromdir,
                             const char *fromname, size_t fromlen, uint64_t todir,
                             struct core__mv *mv)
{
    struct meta_txn *t;
    struct meta_dirent de;
    struct meta_inode d, r;
    memset(mv, 0, sizeof(*mv));
    if (atomic_load(&c->ndirquota) == 0)
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, fromdir, &d);
    if (rc == 0 && fromdir == todir) {
        /* within one directory only a hard link made elsewhere changes chain */
        rc = meta_dirent_get(t, fromdir, fromname, fromlen, &de);
        if (rc == 0)
            rc = meta_inode_get(t, de.ino, &r);
        if (rc == 0 && r.parent == fromdir)
            rc = -ENOENT;
    }
    meta_rtxn_end(t);
    if (rc || (d.flags & CORE_A_TROOT) || d.type != CORE_DIR)
        return rc == -ENOENT ? 0 : rc; /* the rename itself answers; buckets move no chain */
    /* mark first: a write that would become pending after this waits for the end */
    mv->on = true;
    mv->tenant = tenant;
    mv->bucket = d.bucket;
    pthread_mutex_lock(&c->mv_mu);
    mv_slot(c, d.bucket)->busy++;
    mv_slot(c, d.bucket)->gen++;
    atomic_fetch_add(&c->mv_busy, 1);
    atomic_fetch_add(&c->mv_gen, 1);
    pthread_mutex_unlock(&c->mv_mu);
    if (atomic_load(&c->pend_count) == 0)
        return 0;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_dirent_get(t, fromdir, fromname, fromlen, &de);
    meta_rtxn_end(t);
    if (rc)
        return rc == -ENOENT ? 0 : rc; /* the rename itself answers */
    if (de.type == CORE_REG)
        return flush_ino(c, de.ino);
    if (de.type != CORE_DIR)
        return 0;
    /* a directory: whatever of its subtree is pending, found by its bucket */
    uint64_t *v;
    size_t n = pend_inos(c, tenant, d.bucket, &v);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = flush_ino(c, v[i]);
    free(v);
    return rc;
}

int core__quota_rename_check(struct core *c, const struct core__mv *mv, uint64_t ino,
                             bool isdir, bool moves)
{
    if (!moves)
        return 0;
    if (!mv->on)
        return atomic_load(&c->ndirquota) ? -EAGAIN : 0; /* begin saw another entry or none */
    if (atomic_load(&c->pend_count) == 0)
        return 0;
    if (isdir) {
        /* nothing of the bucket may be pending (what begin flushed stays so:
         * the mark holds new pending writes back) */
        uint64_t *v;
        size_t n = pend_inos(c, mv->tenant, mv->bucket, &v);
        free(v);
        return n ? -EAGAIN : 0;
    }
    return core__pend_has_data(c, ino) ? -EAGAIN : 0;
}

void core__quota_rename_end(struct core *c, struct core__mv *mv)
{
    if (!mv->on)
        return;
    pthread_mutex_lock(&c->mv_mu);
    struct core__mvslot *s = mv_slot(c, mv->bucket);
    s->busy--;
    s->gen++;
    atomic_fetch_sub(&c->mv_busy, 1);
    atomic_fetch_add(&c->mv_gen, 1);
    if (s->busy == 0)
        pthread_cond_broadcast(&c->mv_cv);
    pthread_mutex_unlock(&c->mv_mu);
    mv->on = false;
}

bool core__mv_same_slow(struct core *c, const struct core__mvtok *k, uint64_t bucket)
{
    if (!k->slot)
        return false;
    pthread_mutex_lock(&c->mv_mu);
    struct core__mvslot *s = mv_slot(c, bucket);
    bool same = s->busy == 0 && s->gen == k->sgen;
    pthread_mutex_unlock(&c->mv_mu);
    return same;
}

int core__resv_follow(struct core *c, uint64_t ino, uint64_t bucket, uint64_t bytes,
                      struct core__resv *h, struct core__mvtok *k)
{
    struct meta_txn *t;
    struct meta_inode r;
    struct core__resv nh;
    pthread_mutex_lock(&c->mv_mu);
    struct core__mvslot *s = mv_slot(c, bucket);
    while (s->busy)
        pthread_cond_wait(&c->mv_cv, &c->mv_mu);
    /* every rename of the bucket begun before is committed (or failed) */
    k->sgen = s->gen;
    k->gen = atomic_load(&c->mv_gen);
    k->slot = true;
    pthread_mutex_unlock(&c->mv_mu);
    if (bytes == 0)
        return 0;
    memset(&nh, 0, sizeof(nh));
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc == 0) {
        nh.tenant = r.tenant;
        rc = keys_dir(c, t, r.parent, &nh);
    }
    meta_rtxn_end(t);
    if (rc) {
        keys_free(&nh);
        return rc == -ENOENT ? SRV_ESTALE : rc;
    }
    bool same = nh.n == h->n && (h->n == 0 || nh.tenant == h->tenant);
    for (uint32_t i = 0; i < nh.n && same; i++)
        same = resv_has(h, rkey(&nh, i));
    if (same) {
        keys_free(&nh); /* the chain's limited records did not change */
        return 0;
    }
    pthread_mutex_lock(&c->resv_mu);
    rc = resv_pin(c, &nh);
    if (rc == 0 && (rc = resv_take(c, &nh, bytes, nh.tenant == h->tenant ? h : NULL)) != 0)
        resv_unpin(c, &nh);
    if (rc == 0) {
        resv_unpin(c, h); /* its bytes leave the old records (those kept: taken again) */
        *h = nh;
    }
    pthread_mutex_unlock(&c->resv_mu);
    return rc;
}
