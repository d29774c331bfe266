/* SPDX-License-Identifier: Apache-2.0
 * core_resv: byte reservations and rename marks (the quota sub-module,
 * core_quota_int.h).
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
#include "core_quota_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

/* ---- byte reservations ---- */

int core__quota_init(struct core *c)
{
    struct core__quota *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    pthread_mutex_init(&q->resv_mu, NULL);
    pthread_mutex_init(&q->mv_mu, NULL);
    pthread_cond_init(&q->mv_cv, NULL);
    atomic_store(&q->ndirquota, 0);
    atomic_store(&q->mv_gen, 0);
    atomic_store(&q->mv_busy, 0);
    c->quota = q;
    return 0;
}

void core__quota_fini(struct core *c)
{
    struct core__quota *q = c->quota;
    if (!q)
        return;
    for (int i = 0; i < CORE_RESV_BUCKETS; i++) {
        while (q->resv[i]) {
            struct core__rent *e = q->resv[i];
            q->resv[i] = e->next;
            free(e);
        }
    }
    pthread_mutex_destroy(&q->resv_mu);
    pthread_mutex_destroy(&q->mv_mu);
    pthread_cond_destroy(&q->mv_cv);
    free(q);
    c->quota = NULL;
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
    struct core__rent **pp = &c->quota->resv[h >> 56];
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
    if (rc || atomic_load(&c->quota->ndirquota) == 0)
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
    if (atomic_load(&c->quota->ndirquota) == 0)
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
    pthread_mutex_lock(&c->quota->resv_mu);
    rc = resv_pin(c, h);
    if (rc == 0 && bytes && (rc = resv_take(c, h, bytes, NULL)) != 0)
        resv_unpin(c, h);
    pthread_mutex_unlock(&c->quota->resv_mu);
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
    pthread_mutex_lock(&c->quota->resv_mu);
    rc = resv_pin(c, h);
    if (rc == 0) {
        for (uint32_t i = 0; i < h->n; i++)
            (*rent_slot(c, tenant, rkey(h, i)))->bytes += bytes;
        h->bytes = bytes;
    }
    pthread_mutex_unlock(&c->quota->resv_mu);
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
    pthread_mutex_lock(&c->quota->resv_mu);
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
    pthread_mutex_unlock(&c->quota->resv_mu);
}

void core__resv_set(struct core *c, struct core__resv *h, uint64_t bytes)
{
    if (!h->n)
        return;
    pthread_mutex_lock(&c->quota->resv_mu);
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
    pthread_mutex_unlock(&c->quota->resv_mu);
}

uint64_t core__resv_other(struct core *c, uint32_t tenant, uint64_t ino,
                          const struct core__resv *own)
{
    uint64_t v = 0;
    pthread_mutex_lock(&c->quota->resv_mu);
    struct core__rent *e = *rent_slot(c, tenant, ino);
    if (e)
        v = e->bytes;
    pthread_mutex_unlock(&c->quota->resv_mu);
    if (own && own->tenant == tenant)
        for (uint32_t i = 0; i < own->n; i++)
            if (rkey(own, i) == ino)
                return v > own->bytes ? v - own->bytes : 0;
    return v;
}

/* ---- rename marks ---- */

static struct core__mvslot *mv_slot(struct core *c, uint64_t bucket)
{
    return &c->quota->mv_slot[(bucket * 0x9e3779b97f4a7c15ull) >> 58];
}

int core__quota_rename_begin(struct core *c, uint32_t tenant, uint64_t fromdir,
                             const char *fromname, size_t fromlen, uint64_t todir,
                             struct core__mv *mv)
{
    struct meta_txn *t;
    struct meta_dirent de;
    struct meta_inode d, r;
    memset(mv, 0, sizeof(*mv));
    if (atomic_load(&c->quota->ndirquota) == 0)
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
    pthread_mutex_lock(&c->quota->mv_mu);
    mv_slot(c, d.bucket)->busy++;
    mv_slot(c, d.bucket)->gen++;
    atomic_fetch_add(&c->quota->mv_busy, 1);
    atomic_fetch_add(&c->quota->mv_gen, 1);
    pthread_mutex_unlock(&c->quota->mv_mu);
    return 0;
}

void core__quota_rename_end(struct core *c, struct core__mv *mv)
{
    if (!mv->on)
        return;
    pthread_mutex_lock(&c->quota->mv_mu);
    struct core__mvslot *s = mv_slot(c, mv->bucket);
    s->busy--;
    s->gen++;
    atomic_fetch_sub(&c->quota->mv_busy, 1);
    atomic_fetch_add(&c->quota->mv_gen, 1);
    if (s->busy == 0)
        pthread_cond_broadcast(&c->quota->mv_cv);
    pthread_mutex_unlock(&c->quota->mv_mu);
    mv->on = false;
}

bool core__mv_same_slow(struct core *c, const struct core__mvtok *k, uint64_t bucket)
{
    if (!k->slot)
        return false;
    pthread_mutex_lock(&c->quota->mv_mu);
    struct core__mvslot *s = mv_slot(c, bucket);
    bool same = s->busy == 0 && s->gen == k->sgen;
    pthread_mutex_unlock(&c->quota->mv_mu);
    return same;
}

int core__resv_follow(struct core *c, uint64_t ino, uint64_t bucket, uint64_t bytes,
                      struct core__resv *h, struct core__mvtok *k)
{
    struct meta_txn *t;
    struct meta_inode r;
    struct core__resv nh;
    pthread_mutex_lock(&c->quota->mv_mu);
    struct core__mvslot *s = mv_slot(c, bucket);
    while (s->busy)
        pthread_cond_wait(&c->quota->mv_cv, &c->quota->mv_mu);
    /* every rename of the bucket begun before is committed (or failed) */
    k->sgen = s->gen;
    k->gen = atomic_load(&c->quota->mv_gen);
    k->slot = true;
    pthread_mutex_unlock(&c->quota->mv_mu);
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
    pthread_mutex_lock(&c->quota->resv_mu);
    rc = resv_pin(c, &nh);
    if (rc == 0 && (rc = resv_take(c, &nh, bytes, nh.tenant == h->tenant ? h : NULL)) != 0)
        resv_unpin(c, &nh);
    if (rc == 0) {
        resv_unpin(c, h); /* its bytes leave the old records (those kept: taken again) */
        *h = nh;
    }
    pthread_mutex_unlock(&c->quota->resv_mu);
    return rc;
}
