/* SPDX-License-Identifier: Apache-2.0
 * core_prefetch: directory prefetch on listing (namespace sub-module; core.h §
 * directory prefetch, docs/tiering.md § Directory prefetch). When a directory of a
 * tiered bucket (a cache bucket's included) is listed (core_readdir at cookie 0,
 * core_list of the directory with delimiter '/', first page), the listing notes
 * the directory in a small queue (deduplicated, bounded; nothing else on the
 * caller's thread, which may be an event loop). One thread of its own takes the
 * directories in turn: when the directory's effective tier settings say
 * dir_prefetch, it collects the evicted regular files of at most CORE_PF_FILE_MAX
 * bytes (at most CORE_PF_FILES files and CORE_PF_BYTES bytes per listing) and
 * starts a background recall of each (core__tier_prefetch: after every recall a
 * reader waits for, at most as many at once as the recall has GET slots), unless
 * the store is too full (see room()). A prefetched file counts as read then (for
 * eviction by age). Thread: core_prefetch_note any; its own thread for the rest. */
#include "core_ns_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_bucket.h"
#include "meta_dirent.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tier_policy.h"
#include "tier_settings.h"

#define PF_QUEUE 64      /* directories waiting */
#define PF_WAIT_MS 1000u /* a wait for a free prefetch slot, before looking at stop again */

struct core__pf {
    struct core *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t q[PF_QUEUE]; /* a ring of directories to look at */
    size_t head, n;
    uint64_t cur; /* the directory being looked at (0: none) */
    bool stop;
    pthread_t thread;
    atomic_uint_fast64_t dirs, files, bytes, full, dropped;
};

/* Is @p dir queued or being looked at? (mu held) */
static bool queued(const struct core__pf *f, uint64_t dir)
{
    if (f->cur == dir)
        return true;
    for (size_t i = 0; i < f->n; i++)
        if (f->q[(f->head + i) % PF_QUEUE] == dir)
            return true;
    return false;
}

void core__pf_note(struct core *c, struct meta_txn *t, const struct meta_inode *d, uint64_t dir)
{
    struct core__pf *f = c->ns ? c->ns->pf : NULL;
    const void *v;
    size_t vl;
    if (!f || d->type != CORE_DIR || !d->bucket ||
        meta_bucketcfg_get(t, d->bucket, CORE_BLOB_TIER, &v, &vl) != 0)
        return; /* not a tiered bucket: nothing is ever evicted there */
    pthread_mutex_lock(&f->mu);
    if (!f->stop && !queued(f, dir)) {
        if (f->n < PF_QUEUE) {
            f->q[(f->head + f->n++) % PF_QUEUE] = dir;
            pthread_cond_signal(&f->cv);
        } else {
            atomic_fetch_add(&f->dropped, 1);
        }
    }
    pthread_mutex_unlock(&f->mu);
}

struct cand {
    uint64_t ino;
    struct meta_inode r;
};

struct collect {
    struct meta_txn *t;
    struct cand *v;
    size_t n;
    uint64_t bytes;
};

static int collect_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct collect *s = arg;
    struct meta_inode r;
    (void)cookie;
    (void)name;
    (void)len;
    if (meta_inode_get(s->t, ino, &r) != 0 || r.type != CORE_REG || !(r.flags & META_I_EVICTED) ||
        r.size == 0 || r.size > CORE_PF_FILE_MAX)
        return 0;
    if (s->n == CORE_PF_FILES || s->bytes + r.size > CORE_PF_BYTES)
        return 1; /* this listing's share is taken */
    s->v[s->n].ino = ino;
    s->v[s->n++].r = r;
    s->bytes += r.size;
    return 0;
}

/* May @p size more bytes come back now? Not past the bucket policy's high eviction
 * watermark (none: 90 %) of the store's capacity (as the uploader counts it: what the
 * data files may grow to, bounded by their file system's free space). */
static bool room(struct core *c, uint16_t high, uint64_t size)
{
    struct core_stats st;
    core_stats_get(c, &st);
    uint64_t cap = st.store_limit > st.store_capacity ? st.store_limit : st.store_capacity;
    if (st.fs_size && cap > st.store_capacity + st.fs_free)
        cap = st.store_capacity + st.fs_free;
    uint64_t used = st.store_capacity > st.store_free ? st.store_capacity - st.store_free : 0;
    uint64_t lim = cap / 10000 * (high ? high : 9000);
    return cap && used + size <= lim;
}

/* Look at directory @p dir: prefetch its small evicted files if its settings say so. */
static void prefetch_dir(struct core *c, struct core__pf *f, uint64_t dir)
{
    struct tier_effective e;
    struct tier_policy pol;
    const void *v;
    size_t vl;
    struct meta_inode d;
    if (tier_settings_of(c->meta, dir, &e) != 0 || !e.dir_prefetch)
        return;
    struct collect s = {.v = malloc(CORE_PF_FILES * sizeof(*s.v))};
    if (!s.v)
        return;
    int rc = meta_rtxn_begin(c->meta, &s.t);
    if (rc == 0) {
        rc = meta_inode_get(s.t, dir, &d);
        if (rc == 0)
            rc = meta_bucketcfg_get(s.t, d.bucket, CORE_BLOB_TIER, &v, &vl);
        if (rc == 0)
            rc = tier_policy_decode(v, vl, &pol);
        if (rc == 0)
            rc = meta_dirent_scan(s.t, dir, 0, collect_cb, &s);
        meta_rtxn_end(s.t);
    }
    if (rc < 0) {
        free(s.v);
        return;
    }
    atomic_fetch_add(&f->dirs, 1);
    for (size_t i = 0; i < s.n; i++) {
        if (!room(c, pol.evict_high, s.v[i].r.size)) {
            atomic_fetch_add(&f->full, s.n - i);
            break;
        }
        for (;;) {
            /* still evicted? (a reader may have recalled it since the listing: a recall
             * of the listing's snapshot would fetch the file again) */
            struct meta_txn *t;
            struct meta_inode now;
            rc = meta_rtxn_begin(c->meta, &t);
            if (rc == 0) {
                rc = meta_inode_get(t, s.v[i].ino, &now);
                meta_rtxn_end(t);
            }
            if (rc || !(now.flags & META_I_EVICTED) || now.change != s.v[i].r.change) {
                rc = 0;
                break; /* local again, changed or gone: nothing to prefetch */
            }
            s.v[i].r = now;
            rc = core__tier_prefetch(c, s.v[i].ino, &s.v[i].r, PF_WAIT_MS);
            pthread_mutex_lock(&f->mu);
            bool stop = f->stop;
            pthread_mutex_unlock(&f->mu);
            if (stop || rc != -EBUSY)
                break;
        }
        if (rc == 1) {
            core__tier_note_read(c, s.v[i].ino); /* not evicted by age before it is read */
            atomic_fetch_add(&f->files, 1);
            atomic_fetch_add(&f->bytes, s.v[i].r.size);
        } else if (rc < 0 && rc != SRV_ERECALL) {
            srv_log(WARN, TIER, "prefetch of ino=%llu: %s", (unsigned long long)s.v[i].ino,
                    srv_strerror(rc));
        }
        if (rc == -EBUSY || rc == SRV_ERECALL)
            break; /* stopping */
    }
    free(s.v);
}

static void *pf_main(void *arg)
{
    struct core__pf *f = arg;
    struct core *c = f->c;
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        if (!f->n) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        uint64_t dir = f->q[f->head];
        f->head = (f->head + 1) % PF_QUEUE;
        f->n--;
        f->cur = dir;
        pthread_mutex_unlock(&f->mu);
        prefetch_dir(c, f, dir);
        pthread_mutex_lock(&f->mu);
        f->cur = 0;
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int core_prefetch_start(struct core *c)
{
    if (c->ns->pf)
        return -EINVAL;
    struct core__pf *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->c = c;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int e = pthread_create(&f->thread, NULL, pf_main, f);
    if (e) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        free(f);
        return -e;
    }
    c->ns->pf = f; /* listings note directories from now on */
    return 0;
}

void core_prefetch_stop(struct core *c)
{
    struct core__pf *f = c->ns ? c->ns->pf : NULL;
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    bool was = f->stop;
    f->stop = true; /* listings still note nothing (the state stays until core_close) */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (!was)
        pthread_join(f->thread, NULL);
}

void core__pf_fini(struct core *c)
{
    struct core__pf *f = c->ns ? c->ns->pf : NULL;
    if (!f)
        return;
    core_prefetch_stop(c);
    c->ns->pf = NULL;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

void core_prefetch_stats_get(struct core *c, struct core_prefetch_stats *out)
{
    struct core__pf *f = c->ns ? c->ns->pf : NULL;
    memset(out, 0, sizeof(*out));
    if (!f)
        return;
    out->dirs = atomic_load(&f->dirs);
    out->files = atomic_load(&f->files);
    out->bytes = atomic_load(&f->bytes);
    out->full = atomic_load(&f->full);
    out->dropped = atomic_load(&f->dropped);
}
