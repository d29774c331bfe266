/* SPDX-License-Identifier: Apache-2.0
 * tier_dirty: the dirty-bytes bound of write-back (tier_dirty.h). Buckets are
 * kept sorted by inode (binary search on every write's admission); their levels
 * in a small array each. */
#include "tier_dirty.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LEVELS_MAX 257 /* TIER_DIRPOL_MAX directories + the bucket's own entry */

struct dlevel {
    uint64_t dir;
    bool decides;
    uint64_t bound;
    uint64_t base;           /* pending bytes of the last complete pass */
    uint64_t cur;            /* pending bytes being gathered by this pass */
    uint64_t written;        /* bytes charged since the start */
    uint64_t confirmed;      /* bytes confirmed since the start */
    uint64_t w_mark;         /* written when the pass before the last complete one began */
    uint64_t c_mark;         /* confirmed when the last complete pass began */
    uint64_t w_pass, c_pass; /* written/confirmed when this pass began */
    uint64_t w_prev;         /* written when the last complete pass began */
    uint64_t held_total, held_us;
};

struct dbucket {
    uint64_t bucket;
    uint32_t tenant;
    bool seen;   /* a pass began on it since the last sweep */
    bool held;   /* a writer was held since the last pass began */
    bool kicked; /* the uploader was asked for a pass since the last one ended */
    bool passed; /* a pass completed (base is known) */
    bool dirs;   /* some level is a directory */
    struct dlevel *lv;
    size_t nlv;
};

struct tier_dirty {
    pthread_mutex_t mu;
    struct dbucket *b; /* sorted by bucket */
    size_t nb, capb;
    size_t nbounded; /* read without the lock (tier_dirty_any) */
};

int tier_dirty_new(struct tier_dirty **out)
{
    struct tier_dirty *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    pthread_mutex_init(&d->mu, NULL);
    *out = d;
    return 0;
}

void tier_dirty_free(struct tier_dirty *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nb; i++)
        free(d->b[i].lv);
    free(d->b);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* Index of @p bucket, or where it would go (*found false). Under the lock. */
static size_t bfind(const struct tier_dirty *d, uint64_t bucket, bool *found)
{
    size_t lo = 0, hi = d->nb;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->b[mid].bucket < bucket)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < d->nb && d->b[lo].bucket == bucket;
    return lo;
}

static struct dbucket *bget(struct tier_dirty *d, uint64_t bucket)
{
    bool found;
    size_t i = bfind(d, bucket, &found);
    return found ? &d->b[i] : NULL;
}

/* A level of @p b by its directory: levels are sorted by dir, so a write's
 * lookup costs O(depth * log levels) under the lock, however many directory
 * policies a (hostile) tenant gives its bucket. */
static struct dlevel *lget(struct dbucket *b, uint64_t dir)
{
    size_t lo = 0, hi = b->nlv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->lv[mid].dir < dir)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->nlv && b->lv[lo].dir == dir ? &b->lv[lo] : NULL;
}

static int level_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct dlevel *)a)->dir, y = ((const struct dlevel *)b)->dir;
    return x < y ? -1 : x > y;
}

static void bremove(struct tier_dirty *d, size_t i)
{
    free(d->b[i].lv);
    memmove(&d->b[i], &d->b[i + 1], (d->nb - i - 1) * sizeof(d->b[0]));
    d->nb--;
    __atomic_store_n(&d->nbounded, d->nb, __ATOMIC_RELAXED);
}

int tier_dirty_pass_begin(struct tier_dirty *d, uint64_t bucket, uint32_t tenant,
                          const struct tier_dirty_level *lv, size_t n)
{
    bool any = false;
    if (n > LEVELS_MAX)
        n = LEVELS_MAX;
    for (size_t i = 0; i < n; i++)
        any = any || (lv[i].decides && lv[i].bound);
    pthread_mutex_lock(&d->mu);
    bool found;
    size_t at = bfind(d, bucket, &found);
    if (!any) {
        if (found)
            bremove(d, at);
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    /* the bucket's own level always exists (files with no deciding directory) */
    struct dlevel *nl = calloc(n + 1, sizeof(*nl));
    if (!nl) {
        pthread_mutex_unlock(&d->mu);
        return -ENOMEM;
    }
    if (!found) {
        if (d->nb == d->capb) {
            size_t nc = d->capb ? d->capb * 2 : 16;
            void *nv = realloc(d->b, nc * sizeof(*d->b));
            if (!nv) {
                free(nl);
                pthread_mutex_unlock(&d->mu);
                return -ENOMEM;
            }
            d->b = nv;
            d->capb = nc;
        }
        memmove(&d->b[at + 1], &d->b[at], (d->nb - at) * sizeof(d->b[0]));
        d->b[at] = (struct dbucket){.bucket = bucket};
        d->nb++;
        __atomic_store_n(&d->nbounded, d->nb, __ATOMIC_RELAXED);
    }
    struct dbucket *b = &d->b[at];
    size_t m = 0;
    bool own = false;
    for (size_t i = 0; i <= n; i++) {
        struct tier_dirty_level x;
        if (i < n) {
            x = lv[i];
        } else if (!own) {
            x = (struct tier_dirty_level){.dir = bucket};
        } else {
            break;
        }
        own = own || x.dir == bucket;
        struct dlevel *old = lget(b, x.dir);
        nl[m] = old ? *old : (struct dlevel){.dir = x.dir};
        nl[m].decides = x.decides || x.dir == bucket;
        nl[m].bound = x.decides ? x.bound : 0;
        nl[m].cur = 0;
        nl[m].w_pass = nl[m].written;
        nl[m].c_pass = nl[m].confirmed;
        m++;
    }
    qsort(nl, m, sizeof(nl[0]), level_cmp);
    free(b->lv);
    b->lv = nl;
    b->nlv = m;
    b->tenant = tenant;
    b->seen = true;
    b->dirs = m > 1;
    pthread_mutex_unlock(&d->mu);
    return 0;
}

void tier_dirty_pending(struct tier_dirty *d, uint64_t bucket, uint64_t level, uint64_t bytes)
{
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? lget(b, level) : NULL;
    if (l)
        l->cur += bytes;
    pthread_mutex_unlock(&d->mu);
}

void tier_dirty_pass_end(struct tier_dirty *d, uint64_t bucket)
{
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    if (b) {
        for (size_t i = 0; i < b->nlv; i++) {
            struct dlevel *l = &b->lv[i];
            /* Writes are counted from the pass before: a write acknowledged just
             * before this pass began may not show in the sizes the scan read yet
             * (an NFS UNSTABLE write whose metadata is still being committed);
             * the next pass sees it. Uploads are recorded in the same commit that
             * confirms them, so the scan saw every one confirmed before it. */
            l->base = l->cur;
            l->w_mark = b->passed ? l->w_prev : l->w_pass;
            l->w_prev = l->w_pass;
            l->c_mark = l->c_pass;
        }
        b->passed = true;
        b->held = false; /* the scan that just ended hastened it */
        b->kicked = false;
    }
    pthread_mutex_unlock(&d->mu);
}

void tier_dirty_sweep(struct tier_dirty *d)
{
    pthread_mutex_lock(&d->mu);
    for (size_t i = d->nb; i-- > 0;) {
        if (!d->b[i].seen)
            bremove(d, i);
        else
            d->b[i].seen = false;
    }
    pthread_mutex_unlock(&d->mu);
}

/* The level a write below @p dirs (innermost first) or a file whose nearest
 * directory with a policy is found among them belongs to. Under the lock. */
static struct dlevel *level_for(struct dbucket *b, const uint64_t *dirs, size_t ndirs)
{
    if (b->dirs) {
        for (size_t i = 0; i < ndirs; i++) {
            struct dlevel *l = lget(b, dirs[i]);
            if (l && l->dir != b->bucket)
                return l->decides ? l : lget(b, b->bucket);
        }
    }
    return lget(b, b->bucket);
}

uint64_t tier_dirty_level_of(struct tier_dirty *d, uint64_t bucket, uint64_t hit)
{
    uint64_t r = bucket;
    if (!hit)
        return r;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? lget(b, hit) : NULL;
    if (l && l->decides)
        r = hit;
    pthread_mutex_unlock(&d->mu);
    return r;
}

static uint64_t dirty_of(const struct dbucket *b, const struct dlevel *l)
{
    if (!b->passed)
        return l->written - l->w_pass; /* no pass completed: what was written since the first */
    uint64_t v = l->base + (l->written - l->w_mark);
    uint64_t c = l->confirmed - l->c_mark;
    return v > c ? v - c : 0;
}

void tier_dirty_confirmed(struct tier_dirty *d, uint64_t bucket, uint64_t level, uint64_t bytes)
{
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? lget(b, level) : NULL;
    if (l)
        l->confirmed += bytes;
    pthread_mutex_unlock(&d->mu);
}

bool tier_dirty_hasten(struct tier_dirty *d, uint64_t bucket)
{
    bool yes = false;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    if (b) {
        yes = b->held;
        for (size_t i = 0; i < b->nlv && !yes; i++)
            yes = b->lv[i].bound && dirty_of(b, &b->lv[i]) >= b->lv[i].bound;
    }
    pthread_mutex_unlock(&d->mu);
    return yes;
}

bool tier_dirty_kick(struct tier_dirty *d, uint64_t bucket)
{
    bool yes = false;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    if (b && !b->kicked)
        yes = b->kicked = true;
    pthread_mutex_unlock(&d->mu);
    return yes;
}

bool tier_dirty_any(struct tier_dirty *d)
{
    return d && __atomic_load_n(&d->nbounded, __ATOMIC_RELAXED) != 0;
}

bool tier_dirty_bounded(struct tier_dirty *d, uint64_t bucket, bool *dirs)
{
    if (!tier_dirty_any(d))
        return false;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    if (b && dirs)
        *dirs = b->dirs;
    pthread_mutex_unlock(&d->mu);
    return b != NULL;
}

int tier_dirty_check(struct tier_dirty *d, uint64_t bucket, const uint64_t *dirs, size_t ndirs,
                     uint64_t bytes, bool first)
{
    int r = 0;
    if (!tier_dirty_any(d) || bytes == 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? level_for(b, dirs, ndirs) : NULL;
    if (l && l->bound) {
        uint64_t v = dirty_of(b, l);
        if (v > 0 && (v >= l->bound || bytes > l->bound - v)) {
            r = 1;
            b->held = true;
            if (first)
                l->held_total++;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

void tier_dirty_charge(struct tier_dirty *d, uint64_t bucket, const uint64_t *dirs, size_t ndirs,
                       uint64_t bytes, uint64_t held_us)
{
    if (!tier_dirty_any(d))
        return;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? level_for(b, dirs, ndirs) : NULL;
    if (l) {
        l->written += bytes;
        l->held_us += held_us;
    }
    pthread_mutex_unlock(&d->mu);
}

static void stat_of(const struct dbucket *b, const struct dlevel *l, struct tier_dirty_stat *out)
{
    *out = (struct tier_dirty_stat){.bound = l->bound,
                                    .dirty = dirty_of(b, l),
                                    .held_total = l->held_total,
                                    .held_us = l->held_us,
                                    .charged = l->written,
                                    .confirmed = l->confirmed};
}

int tier_dirty_get(struct tier_dirty *d, uint64_t bucket, uint64_t level,
                   struct tier_dirty_stat *out)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&d->mu);
    struct dbucket *b = bget(d, bucket);
    struct dlevel *l = b ? lget(b, level) : NULL;
    if (l) {
        stat_of(b, l, out);
        rc = 0;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void tier_dirty_each(struct tier_dirty *d, tier_dirty_cb cb, void *arg)
{
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->nb; i++) {
        struct dbucket *b = &d->b[i];
        for (size_t k = 0; k < b->nlv; k++) {
            if (!b->lv[k].decides)
                continue;
            struct tier_dirty_stat st;
            stat_of(b, &b->lv[k], &st);
            cb(arg, b->bucket, b->tenant, b->lv[k].dir, &st);
        }
    }
    pthread_mutex_unlock(&d->mu);
}
