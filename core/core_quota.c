/* SPDX-License-Identifier: Apache-2.0
 * core_quota: usage and hard limits per tenant, bucket and directory (the
 * quota sub-module, core_quota_int.h; reservations and rename marks are in
 * core_resv.c).
 *
 * Tenants (ino 0) and buckets always have a usage record; a directory has one
 * only while a limit is set on it. Every change charges the tenant, the
 * bucket and each quota'd directory on the parent chain inside the change's
 * own txn, so usage is exact after any crash. The parent walk is skipped
 * while no directory quota exists. A hard link is charged where its inode
 * was created; its bytes are credited where its last link goes.
 * Thread: txn helpers inside writer ops; the public calls from any thread. */
#include "core_quota_int.h"

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
    if (atomic_load(&c->quota->ndirquota) == 0)
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

int core__usage_charge_store(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket,
                             int64_t bytes)
{
    if (bytes == 0)
        return 0;
    int rc = usage_apply(c, t, tenant, 0, bytes, 0, false, true, NULL);
    if (rc == 0 && bucket)
        rc = usage_apply(c, t, tenant, bucket, bytes, 0, false, false, NULL);
    return rc;
}

int core__usage_charge_dirs(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                            int64_t bytes, int64_t inodes)
{
    struct meta_inode d;
    if ((bytes == 0 && inodes == 0) || atomic_load(&c->quota->ndirquota) == 0 || dir == 0)
        return 0;
    int rc = meta_inode_get(t, dir, &d);
    if (rc || (d.flags & CORE_A_TROOT))
        return rc;
    return dirs_apply(c, t, tenant, dir, d.bucket, bytes, inodes, false, NULL);
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
    atomic_store(&c->quota->ndirquota, q.n);
    return 0;
}

/* ---- public calls ---- */

int core__usage_committed(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out)
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
        out->bytes = u.bytes;
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
    atomic_fetch_add(&c->quota->ndirquota, 1);
    int rc = meta_submit(c->meta, quota_set_fn, &a, 0);
    if (!a.created || rc != 0)
        atomic_fetch_sub(&c->quota->ndirquota, 1);
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
    if (rc || atomic_load(&c->quota->ndirquota) == 0)
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

