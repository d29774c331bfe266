/* SPDX-License-Identifier: Apache-2.0
 * core_cache: a read cache of whole, CRC-verified extents (the data
 * sub-module, core_data_int.h).
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
#include "core_data_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    c->data->cache = k;
    return 0;
}

void core__cache_fini(struct core *c)
{
    struct core__cache *k = c->data->cache;
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
    c->data->cache = NULL;
}

uint64_t core__cache_epoch(struct core *c)
{
    return c->data->cache ? atomic_load(&c->data->cache->epoch) : 0;
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
    struct core__cache *k = c->data->cache;
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
    struct core__cache *k = c->data->cache;
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

uint32_t core__bcrc_whole(const uint32_t *bcrc, uint32_t nb, uint32_t len)
{
    uint32_t crc = nb ? bcrc[0] : 0;
    for (uint32_t b = 1; b < nb; b++) {
        uint32_t bl = len - b * META_BCRC_BLOCK < META_BCRC_BLOCK ? len - b * META_BCRC_BLOCK
                                                                   : META_BCRC_BLOCK;
        crc = store_crc32c_combine(crc, bcrc[b], bl);
    }
    return crc;
}

int core__bcrc_verify(struct core *c, const struct store_extent *e, const uint32_t *bcrc,
                      uint32_t b0, uint32_t b1, const void *data)
{
    const char *d = data;
    uint32_t s = b0 * META_BCRC_BLOCK;
    for (uint32_t b = b0; b <= b1; b++) {
        uint32_t bo = b * META_BCRC_BLOCK;
        uint32_t bl = e->len - bo < META_BCRC_BLOCK ? e->len - bo : META_BCRC_BLOCK;
        uint32_t crc = store_crc32c(0, d + (bo - s), bl);
        if (crc != bcrc[b]) {
            atomic_fetch_add(&c->crc_errors, 1);
            srv_log(ERROR, STORE, "CRC mismatch dev=%u off=%llu block=%u: want %08x got %08x",
                    e->dev, (unsigned long long)e->off, b, bcrc[b], crc);
            return SRV_ECORRUPT;
        }
    }
    return 0;
}

int core__extent_pread(struct core *c, const struct store_extent *e, const uint32_t *bcrc,
                       uint32_t nb, uint32_t from, void *buf, size_t len, uint64_t epoch)
{
    if (len == 0)
        return 0;
    if (!bcrc || nb == 0 || (uint64_t)from + len > e->len)
        return core__extent_read(c, e, from, buf, len, epoch);
    int fd = store_extent_fd(c->store, e);
    if (fd < 0)
        return core__extent_read(c, e, from, buf, len, epoch);
    uint32_t b0 = from / META_BCRC_BLOCK;
    uint32_t b1 = (uint32_t)((from + len - 1) / META_BCRC_BLOCK);
    uint32_t s = b0 * META_BCRC_BLOCK;
    uint32_t end = (b1 + 1) * META_BCRC_BLOCK < e->len ? (b1 + 1) * META_BCRC_BLOCK : e->len;
    if (b1 >= nb)
        return core__extent_read(c, e, from, buf, len, epoch);
    bool direct = s == from && end == from + len;
    char *tmp = direct ? buf : malloc(end - s);
    int rc = 0;
    if (!tmp)
        return -ENOMEM;
    for (size_t got = 0; got < end - s;) {
        ssize_t r = pread(fd, tmp + got, end - s - got, (off_t)(e->off + s + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            srv_log(ERROR, STORE, "read dev=%u off=%llu len=%u: %s", e->dev,
                    (unsigned long long)(e->off + s), end - s, r < 0 ? strerror(errno) : "EOF");
            rc = -EIO;
            goto out;
        }
        got += (size_t)r;
    }
    rc = core__bcrc_verify(c, e, bcrc, b0, b1, tmp);
    if (rc)
        goto out;
    if (!direct)
        memcpy(buf, tmp + (from - s), len);
out:
    if (!direct)
        free(tmp);
    return rc;
}
