/* SPDX-License-Identifier: Apache-2.0
 * tier_settings: the settings of one file or directory from its bucket's tier
 * policies (tier_settings.h). Thread: any. */
#include "tier_settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "meta_bucket.h"
#include "meta_dirent.h"
#include "meta_inode.h"
#include "meta_schema.h"

#define KIND_TIER 3 /* core.h CORE_BLOB_TIER */
#define RO_MAX 1024 /* buckets with a read-only level, remembered */
#define DEPTH_MAX 4096
#define TYPE_DIR 2 /* enum core_ftype CORE_DIR */

static pthread_mutex_t ro_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ro_buckets[RO_MAX];
static size_t ro_n;
static bool ro_all;                /* more than RO_MAX: every tiered bucket is looked at */
static atomic_bool ro_none = true; /* no bucket has a read-only level (no lock taken) */

bool tier_settings_ro_maybe(uint64_t bucket)
{
    bool yes = false;
    if (atomic_load_explicit(&ro_none, memory_order_acquire))
        return false;
    pthread_mutex_lock(&ro_mu);
    yes = ro_all;
    for (size_t i = 0; i < ro_n && !yes; i++)
        yes = ro_buckets[i] == bucket;
    pthread_mutex_unlock(&ro_mu);
    return yes;
}

/* The settings of @p dir (a directory of @p bucket, or the bucket) from the
 * records, in @p t. */
static int resolve(struct meta_txn *t, uint64_t bucket, uint64_t dir, struct tier_effective *out)
{
    const void *v;
    size_t vl;
    struct tier_policy p;
    int rc = meta_bucketcfg_get(t, bucket, KIND_TIER, &v, &vl);
    if (rc)
        return rc;
    if (tier_policy_decode(v, vl, &p) != 0)
        return -ENOENT; /* a newer build's: not ours to act on */
    struct tier_dirpol *e = NULL;
    int n = 0;
    if (meta_bucketcfg_get(t, bucket, TIER_DIRS_KIND, &v, &vl) == 0) {
        e = malloc((TIER_DIRPOL_MAX + 1) * sizeof(*e));
        if (!e)
            return -ENOMEM;
        n = tier_dirs_decode(v, vl, e);
        if (n < 0)
            n = 0;
    }
    const struct tier_dirpol *be = NULL, *hit = NULL;
    for (int i = 0; i < n; i++)
        if (e[i].dir == bucket)
            be = &e[i];
    uint64_t d = dir;
    for (unsigned depth = 0; n && d && d != bucket && !hit && depth < DEPTH_MAX; depth++) {
        for (int i = 0; i < n; i++)
            if (e[i].dir == d)
                hit = &e[i];
        struct meta_inode r;
        if (hit || meta_inode_get(t, d, &r) != 0)
            break;
        d = r.parent;
    }
    tier_effective_of(&p, be, hit, out);
    free(e);
    return 0;
}

int tier_settings_of(struct meta_env *m, uint64_t ino, struct tier_effective *out)
{
    struct meta_txn *t;
    struct meta_inode r;
    int rc = meta_rtxn_begin(m, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc == 0 && !r.bucket)
        rc = -ENOENT;
    if (rc == 0)
        rc = resolve(t, r.bucket, r.type == TYPE_DIR ? ino : r.parent, out);
    meta_rtxn_end(t);
    return rc;
}

bool tier_settings_readonly(struct meta_env *m, uint64_t ino)
{
    struct meta_txn *t;
    struct meta_inode r;
    struct tier_effective e;
    bool ro = false;
    if (!m || meta_rtxn_begin(m, &t) != 0)
        return false;
    if (meta_inode_get(t, ino, &r) == 0 && r.bucket && tier_settings_ro_maybe(r.bucket) &&
        resolve(t, r.bucket, r.type == TYPE_DIR ? ino : r.parent, &e) == 0)
        ro = e.read_only;
    meta_rtxn_end(t);
    return ro;
}

bool tier_settings_readonly_key(struct meta_env *m, uint64_t bucket, const char *key, size_t keylen)
{
    struct meta_txn *t;
    struct tier_effective e;
    bool ro = false;
    if (!m || !tier_settings_ro_maybe(bucket) || meta_rtxn_begin(m, &t) != 0)
        return false;
    uint64_t dir = bucket;
    size_t off = 0;
    while (key && off < keylen) {
        const char *slash = memchr(key + off, '/', keylen - off);
        if (!slash)
            break;
        size_t len = (size_t)(slash - (key + off));
        struct meta_dirent de;
        if (len == 0 || meta_dirent_get(t, dir, key + off, len, &de) != 0 || de.type != TYPE_DIR)
            break;
        dir = de.ino;
        off += len + 1;
    }
    if (resolve(t, bucket, dir, &e) == 0)
        ro = e.read_only;
    meta_rtxn_end(t);
    return ro;
}

struct refresh {
    uint64_t v[RO_MAX];
    size_t n;
    bool all;
};

/* A bucket's settings blob: does any level of it say read-only (by itself or by
 * its preset)? */
static int refresh_cb(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    struct refresh *f = arg;
    struct tier_dirpol *e = malloc((TIER_DIRPOL_MAX + 1) * sizeof(*e));
    (void)kind;
    if (!e)
        return -ENOMEM;
    int n = tier_dirs_decode(val, len, e);
    bool ro = false;
    for (int i = 0; i < n && !ro; i++) {
        struct tier_dirpol pk;
        tier_preset_knobs(e[i].preset, &pk);
        ro = ((e[i].set & TIER_D_RO) && e[i].read_only) ||
             ((e[i].set & TIER_D_PRESET) && pk.read_only);
    }
    free(e);
    if (ro) {
        if (f->n < RO_MAX)
            f->v[f->n++] = bucket;
        else
            f->all = true;
    }
    return 0;
}

void tier_settings_refresh(struct meta_env *m)
{
    struct refresh *f = calloc(1, sizeof(*f));
    struct meta_txn *t;
    if (!f || !m || meta_rtxn_begin(m, &t) != 0) {
        free(f);
        return;
    }
    int rc = meta_bucketcfg_scan(t, TIER_DIRS_KIND, refresh_cb, f);
    meta_rtxn_end(t);
    if (rc == 0) {
        pthread_mutex_lock(&ro_mu);
        memcpy(ro_buckets, f->v, f->n * sizeof(f->v[0]));
        ro_n = f->n;
        ro_all = f->all;
        atomic_store_explicit(&ro_none, f->n == 0 && !f->all, memory_order_release);
        pthread_mutex_unlock(&ro_mu);
    }
    free(f);
}
