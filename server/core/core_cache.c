/* SPDX-License-Identifier: Apache-2.0
 * core_cache: a read cache of whole, CRC-verified extents.
 *
 * The store verifies an extent's CRC by reading all of it, so a small read
 * costs a whole extent; the cache keeps verified extents (LRU, bounded bytes)
 * so repeated and sequential small reads, and warm re-reads, are served from
 * memory. Extents are immutable while mapped (writes are copy-on-write), so an
 * entry can only go stale when its space is freed and reused: every free
 * invalidates the entry and bumps an epoch, and a reader inserts only if no
 * free happened since it looked the extent up (core__cache_epoch before the
 * metadata read), so a freed extent never re-enters the cache.
 * Thread: all calls are thread-safe (sharded mutexes). */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define SHARDS 16
#define BUCKETS 1024 /* per shard */

struct centry {
    uint32_t dev, len, crc;
    uint64_t off;
    char *data;
    struct centry *hnext;        /* hash chain */
    struct centry *prev, *next;  /* LRU, most recent first */
};

struct cshard {
    pthread_mutex_t mu;
    struct centry *h[BUCKETS];
    struct centry *head, *tail;
    uint64_t bytes, cap;
};

struct core__cache {
    struct cshard s[SHARDS];
    atomic_uint_fast64_t epoch;
    atomic_uint_fast64_t hits, misses;
};

static uint64_t hkey(uint32_t dev, uint64_t off)
{
    uint64_t h = off / STORE_ALIGN * 0x9e3779b97f4a7c15ull ^ ((uint64_t)dev << 48);
    return h ^ (h >> 29);
}

int core__cache_init(struct core *c, uint64_t bytes)
{
    struct core__cache *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&k->s[i].mu, NULL);
        k->s[i].cap = bytes / SHARDS;
    }
    c->cache = k;
    return 0;
}

void core__cache_fini(struct core *c)
{
    struct core__cache *k = c->cache;
    if (!k)
        return;
    for (int i = 0; i < SHARDS; i++) {
        struct centry *e = k->s[i].head;
        while (e) {
            struct centry *n = e->next;
            free(e->data);
            free(e);
            e = n;
        }
        pthread_mutex_destroy(&k->s[i].mu);
    }
    free(k);
    c->cache = NULL;
}

uint64_t core__cache_epoch(struct core *c)
{
    return c->cache ? atomic_load(&c->cache->epoch) : 0;
}

static void lru_unlink(struct cshard *s, struct centry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        s->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(struct cshard *s, struct centry *e)
{
    e->prev = NULL;
    e->next = s->head;
    if (s->head)
        s->head->prev = e;
    s->head = e;
    if (!s->tail)
        s->tail = e;
}

static void entry_drop(struct cshard *s, struct centry *e)
{
    struct centry **pp = &s->h[hkey(e->dev, e->off) / SHARDS % BUCKETS];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    lru_unlink(s, e);
    s->bytes -= e->len;
    free(e->data);
    free(e);
}

void core__cache_invalidate(struct core *c, const struct store_extent *x)
{
    struct core__cache *k = c->cache;
    if (!k)
        return;
    atomic_fetch_add(&k->epoch, 1);
    uint64_t h = hkey(x->dev, x->off);
    struct cshard *s = &k->s[h % SHARDS];
    pthread_mutex_lock(&s->mu);
    for (struct centry *e = s->h[h / SHARDS % BUCKETS]; e; e = e->hnext)
        if (e->dev == x->dev && e->off == x->off) {
            entry_drop(s, e);
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

/* Copy [from, from + len) of a cached extent. @return true on a hit. */
static bool cache_get(struct core__cache *k, const struct store_extent *x, uint32_t from,
                      void *buf, size_t len)
{
    uint64_t h = hkey(x->dev, x->off);
    struct cshard *s = &k->s[h % SHARDS];
    bool hit = false;
    pthread_mutex_lock(&s->mu);
    for (struct centry *e = s->h[h / SHARDS % BUCKETS]; e; e = e->hnext) {
        if (e->dev != x->dev || e->off != x->off)
            continue;
        if (e->len == x->len && e->crc == x->crc) {
            memcpy(buf, e->data + from, len);
            lru_unlink(s, e);
            lru_push(s, e);
            hit = true;
        }
        break;
    }
    pthread_mutex_unlock(&s->mu);
    return hit;
}

static void cache_put(struct core__cache *k, const struct store_extent *x, char *data,
                      uint64_t epoch)
{
    uint64_t h = hkey(x->dev, x->off);
    struct cshard *s = &k->s[h % SHARDS];
    struct centry *e = calloc(1, sizeof(*e));
    if (!e) {
        free(data);
        return;
    }
    e->dev = x->dev;
    e->off = x->off;
    e->len = x->len;
    e->crc = x->crc;
    e->data = data;
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&k->epoch) != epoch || x->len > s->cap) {
        pthread_mutex_unlock(&s->mu);
        free(data);
        free(e);
        return;
    }
    for (struct centry *o = s->h[h / SHARDS % BUCKETS]; o; o = o->hnext)
        if (o->dev == x->dev && o->off == x->off) {
            entry_drop(s, o);
            break;
        }
    while (s->bytes + x->len > s->cap && s->tail)
        entry_drop(s, s->tail);
    e->hnext = s->h[h / SHARDS % BUCKETS];
    s->h[h / SHARDS % BUCKETS] = e;
    lru_push(s, e);
    s->bytes += x->len;
    pthread_mutex_unlock(&s->mu);
}

int core__extent_read(struct core *c, const struct store_extent *x, uint32_t from, void *buf,
                      size_t len, uint64_t epoch)
{
    struct core__cache *k = c->cache;
    if (!k)
        return store_read(c->store, x, from, buf, len);
    if (cache_get(k, x, from, buf, len)) {
        atomic_fetch_add(&k->hits, 1);
        return 0;
    }
    atomic_fetch_add(&k->misses, 1);
    char *data = malloc(x->len ? x->len : 1);
    if (!data)
        return store_read(c->store, x, from, buf, len);
    int rc = store_read(c->store, x, 0, data, x->len);
    if (rc) {
        free(data);
        return rc;
    }
    memcpy(buf, data + from, len);
    cache_put(k, x, data, epoch);
    return 0;
}
