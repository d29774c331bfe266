/* SPDX-License-Identifier: Apache-2.0
 * store_test_env: a data dir in a temp directory and a persistent free map
 * kept in memory with transactions (a txn changes a copy, committed back or
 * dropped; one at a time), as the store sees the one meta keeps (struct
 * store_map), shared by the store unit tests (header-only helpers). */
#ifndef STORE_TEST_ENV_H
#define STORE_TEST_ENV_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

/* Records sorted by (dev, off). */
struct fmap {
    struct store_map_rec *v;
    size_t n, cap;
};

struct tenv {
    char dir[64];
    struct fmap map;     /* committed */
    pthread_mutex_t wmu; /* held by the txn in progress: one at a time, as meta's writer */
    struct store_config cfg;
    struct store *s;
};

/* One transaction on the map: its own copy, and the store's side of it. */
struct ftxn {
    struct tenv *t;
    struct fmap work;
    struct store_map map;
    struct store_txn *st;
};

static inline int fmap_cmp(uint32_t dev, uint64_t off, const struct store_map_rec *r)
{
    if (dev != r->dev)
        return dev < r->dev ? -1 : 1;
    return off < r->off ? -1 : off > r->off;
}

/* Index of the first record >= (dev, off). */
static inline size_t fmap_lower(const struct fmap *m, uint32_t dev, uint64_t off)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fmap_cmp(dev, off, &m->v[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline int fmap_near(void *txn, uint32_t dev, uint64_t off, struct store_map_rec *below,
                            struct store_map_rec *above)
{
    struct fmap *m = &((struct ftxn *)txn)->work;
    size_t i = fmap_lower(m, dev, off);
    if (i < m->n)
        *above = m->v[i];
    if (i > 0)
        *below = m->v[i - 1];
    return 0;
}

static inline int fmap_put(void *txn, uint32_t dev, uint64_t off, uint64_t len)
{
    struct fmap *m = &((struct ftxn *)txn)->work;
    size_t i = fmap_lower(m, dev, off);
    if (i < m->n && fmap_cmp(dev, off, &m->v[i]) == 0) {
        m->v[i].len = len;
        return 0;
    }
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        struct store_map_rec *nv = realloc(m->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        m->v = nv;
        m->cap = nc;
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
    m->v[i] = (struct store_map_rec){1, dev, off, len};
    m->n++;
    return 0;
}

static inline int fmap_del(void *txn, uint32_t dev, uint64_t off)
{
    struct fmap *m = &((struct ftxn *)txn)->work;
    size_t i = fmap_lower(m, dev, off);
    if (i == m->n || fmap_cmp(dev, off, &m->v[i]) != 0)
        return -EIO;
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
    m->n--;
    return 0;
}

static inline int fmap_scan(void *txn, uint32_t dev, uint64_t off,
                            int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len),
                            void *arg)
{
    struct fmap *m = &((struct ftxn *)txn)->work;
    for (size_t i = fmap_lower(m, dev, off); i < m->n; i++) {
        int rc = cb(arg, m->v[i].dev, m->v[i].off, m->v[i].len);
        if (rc)
            return rc;
    }
    return 0;
}

/* Begin a txn on the map (and the store's side of it, when a store is open). */
static inline struct ftxn *tenv_txn(struct tenv *t)
{
    struct ftxn *x = calloc(1, sizeof(*x));
    if (!x)
        abort();
    pthread_mutex_lock(&t->wmu);
    x->t = t;
    x->work.n = x->work.cap = t->map.n;
    x->work.v = malloc((t->map.n ? t->map.n : 1) * sizeof(*x->work.v));
    if (!x->work.v)
        abort();
    if (t->map.n)
        memcpy(x->work.v, t->map.v, t->map.n * sizeof(*x->work.v));
    x->map = (struct store_map){.txn = x, .near = fmap_near, .put = fmap_put, .del = fmap_del,
                                .scan = fmap_scan};
    if (t->s && store_txn_begin(t->s, &x->map, &x->st) != 0)
        abort();
    return x;
}

/* The store's side of txn @p x, for a store opened in it. */
static inline void tenv_txn_attach(struct ftxn *x, struct store *s)
{
    if (store_txn_begin(s, &x->map, &x->st) != 0)
        abort();
}

/* Commit (@p commit) or abort @p x and tell the store. */
static inline void tenv_txn_end(struct ftxn *x, int commit)
{
    if (commit) {
        free(x->t->map.v);
        x->t->map = x->work;
    } else {
        free(x->work.v);
    }
    store_txn_done(x->st, commit);
    pthread_mutex_unlock(&x->t->wmu);
    free(x);
}

/* Forget every record: the map of a store that was never initialized. */
static inline void tenv_map_reset(struct tenv *t)
{
    free(t->map.v);
    memset(&t->map, 0, sizeof(t->map));
}

static inline void tenv_rmdir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(path);
}

/* Open (or reopen) the store; initializes a new free map. @return store_open's result. */
static inline int tenv_store_open(struct tenv *t)
{
    struct ftxn *x = tenv_txn(t);
    int rc = store_open(&t->s, &t->cfg, &x->map);
    if (rc == 0 && store_needs_init(t->s)) {
        tenv_txn_attach(x, t->s);
        rc = store_txn_init(x->st);
    }
    tenv_txn_end(x, rc == 0);
    return rc;
}

/* Open (or reopen) the store reading the map, writing nothing to it.
 * @return store_open's result. */
static inline int tenv_store_open_ro(struct tenv *t)
{
    struct ftxn *x = tenv_txn(t);
    int rc = store_open(&t->s, &t->cfg, &x->map);
    tenv_txn_end(x, 0);
    return rc;
}

static inline void tenv_store_close(struct tenv *t)
{
    store_close(t->s);
    t->s = NULL;
}

static struct tenv *tenv_new(uint32_t nfiles, uint64_t file_size)
{
    struct tenv *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->wmu, NULL);
    snprintf(t->dir, sizeof(t->dir), "/tmp/store-test-XXXXXX");
    if (!mkdtemp(t->dir))
        goto fail;
    t->cfg.dir = t->dir;
    t->cfg.file_size = file_size;
    t->cfg.nfiles = nfiles;
    if (tenv_store_open(t) != 0)
        goto fail;
    return t;
fail:
    fprintf(stderr, "tenv_new failed in %s\n", t->dir);
    abort();
}

static inline void tenv_free(struct tenv *t)
{
    if (t->s)
        store_close(t->s);
    free(t->map.v);
    pthread_mutex_destroy(&t->wmu);
    tenv_rmdir(t->dir);
    free(t);
}

/* Commit uses of @p n extents in one txn. @return 0 or the first error. */
static inline int tenv_use(struct tenv *t, const struct store_extent *e, size_t n)
{
    struct ftxn *x = tenv_txn(t);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = store_txn_use(x->st, &e[i]);
    tenv_txn_end(x, rc == 0);
    return rc;
}

/* Free @p n extents in one txn; commit when @p commit, else abort. */
static inline int tenv_free_ext(struct tenv *t, const struct store_extent *e, size_t n, int commit)
{
    struct ftxn *x = tenv_txn(t);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = store_txn_free(x->st, &e[i]);
    tenv_txn_end(x, rc == 0 && commit);
    return rc;
}

/* Number of free ranges in the persistent map (marker excluded). */
static inline int tenv_map_count(struct tenv *t)
{
    int n = 0;
    for (size_t i = 0; i < t->map.n; i++)
        if (t->map.v[i].dev != 0xffffffffu)
            n++;
    return n;
}

static inline uint64_t tenv_free_bytes(struct tenv *t)
{
    struct store_stats st;
    store_stats_get(t->s, &st);
    return st.free;
}

#endif
