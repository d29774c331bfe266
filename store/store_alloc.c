/* SPDX-License-Identifier: Apache-2.0
 * store_alloc: the extent allocator, the persistent free map and the limbo.
 *
 * In memory, free space is a set of ranges held in two treaps: one ordered
 * by (dev, off) to coalesce neighbours, one by (len, dev, off) for best fit.
 * Reservations (handed out by store_alloc, not yet committed) sit in a third
 * treap by (dev, off) so they can be checked, shrunk and given back; they
 * are memory only, so after a restart their space is free again.
 *
 * The persistent free map (DBI "free", layout in store_int.h) changes only in
 * the caller's write txn: store_txn_use splits a free range, store_txn_free
 * inserts one and merges it with its neighbours. The in-memory side follows
 * at store_txn_done: uses drop their reservation, frees enter the limbo
 * tagged with the current read epoch and become allocatable once every
 * reader whose token is <= that tag has called store_read_end. With
 * write_cache they then wait on the drop list until an allocating thread
 * has dropped their pages from the page cache (drop_some), so the write
 * that reuses the space finds cached only pages something still holds.
 *
 * Allocation tries, per thread, to continue right after that thread's last
 * extent (a sequential writer gets contiguous space), else takes the smallest
 * free range that fits (best fit), else grows a data file (store__grow) and
 * tries again. It fails with -ENOSPC only when no free range is large enough
 * and no file can grow. Space a growth (or a new device) added is free in
 * memory at once; map_catch_up records it in the next write txn that uses
 * space, before that use, so a use never points past what the map covers.
 * Thread: everything under one mutex (a.mu); map calls run in the caller's
 * txn, which its metadata store already serializes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"
#include "store_int.h"

/* ---- byte order helpers ---- */

void store__put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

void store__put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

uint32_t store__get_be32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | p[i];
    return v;
}

uint64_t store__get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---- treap ---- */

typedef int (*tcmp_fn)(const struct store__tnode *a, const struct store__tnode *b);

#define RANGE_OF_OFF(n) ((struct store__range *)((char *)(n)-offsetof(struct store__range, by_off)))
#define RANGE_OF_SIZE(n)                                                                           \
    ((struct store__range *)((char *)(n)-offsetof(struct store__range, by_size)))

static int cmp_off(const struct store__tnode *a, const struct store__tnode *b)
{
    const struct store__range *x = RANGE_OF_OFF(a), *y = RANGE_OF_OFF(b);
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return 0;
}

static int cmp_size(const struct store__tnode *a, const struct store__tnode *b)
{
    const struct store__range *x = RANGE_OF_SIZE(a), *y = RANGE_OF_SIZE(b);
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return 0;
}

/* Split @p t into nodes < key (*l) and >= key (*r). */
static void t_split(struct store__tnode *t, const struct store__tnode *key, tcmp_fn cmp,
                    struct store__tnode **l, struct store__tnode **r)
{
    if (!t) {
        *l = *r = NULL;
    } else if (cmp(t, key) < 0) {
        t_split(t->r, key, cmp, &t->r, r);
        *l = t;
    } else {
        t_split(t->l, key, cmp, l, &t->l);
        *r = t;
    }
}

static struct store__tnode *t_merge(struct store__tnode *l, struct store__tnode *r)
{
    if (!l)
        return r;
    if (!r)
        return l;
    if (l->prio > r->prio) {
        l->r = t_merge(l->r, r);
        return l;
    }
    r->l = t_merge(l, r->l);
    return r;
}

static struct store__tnode *t_insert(struct store__tnode *t, struct store__tnode *n, tcmp_fn cmp)
{
    if (!t) {
        n->l = n->r = NULL;
        return n;
    }
    if (n->prio > t->prio) {
        t_split(t, n, cmp, &n->l, &n->r);
        return n;
    }
    if (cmp(n, t) < 0)
        t->l = t_insert(t->l, n, cmp);
    else
        t->r = t_insert(t->r, n, cmp);
    return t;
}

static struct store__tnode *t_remove(struct store__tnode *t, struct store__tnode *n, tcmp_fn cmp)
{
    if (!t)
        return NULL;
    if (t == n)
        return t_merge(t->l, t->r);
    if (cmp(n, t) < 0)
        t->l = t_remove(t->l, n, cmp);
    else
        t->r = t_remove(t->r, n, cmp);
    return t;
}

/* Smallest node >= key, or NULL. */
static struct store__tnode *t_ceil(struct store__tnode *t, const struct store__tnode *key,
                                   tcmp_fn cmp)
{
    struct store__tnode *best = NULL;
    while (t) {
        if (cmp(t, key) >= 0) {
            best = t;
            t = t->l;
        } else {
            t = t->r;
        }
    }
    return best;
}

/* Largest node < key, or NULL. */
static struct store__tnode *t_lower(struct store__tnode *t, const struct store__tnode *key,
                                    tcmp_fn cmp)
{
    struct store__tnode *best = NULL;
    while (t) {
        if (cmp(t, key) < 0) {
            best = t;
            t = t->r;
        } else {
            t = t->l;
        }
    }
    return best;
}

static void t_free_all(struct store__tnode *t)
{
    if (!t)
        return;
    t_free_all(t->l);
    t_free_all(t->r);
    free(RANGE_OF_OFF(t));
}

static uint32_t next_prio(struct store__alloc *a)
{
    /* xorshift32: priorities only need to be well spread. */
    uint32_t x = a->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    a->rng = x;
    return x;
}

/* ---- free ranges (caller holds a->mu) ---- */

static void range_link(struct store__alloc *a, struct store__range *r)
{
    r->by_off.prio = next_prio(a);
    r->by_size.prio = next_prio(a);
    a->root_off = t_insert(a->root_off, &r->by_off, cmp_off);
    a->root_size = t_insert(a->root_size, &r->by_size, cmp_size);
}

static void range_unlink(struct store__alloc *a, struct store__range *r)
{
    a->root_off = t_remove(a->root_off, &r->by_off, cmp_off);
    a->root_size = t_remove(a->root_size, &r->by_size, cmp_size);
}

/* The range at exactly (dev, off) in @p root, a (dev, off)-ordered treap (a->root_off or
 * a->resv), or NULL. */
static struct store__range *range_find_off(struct store__tnode *root, uint32_t dev, uint64_t off)
{
    struct store__range key = {.dev = dev, .off = off};
    struct store__tnode *n = t_ceil(root, &key.by_off, cmp_off);
    if (!n)
        return NULL;
    struct store__range *r = RANGE_OF_OFF(n);
    return r->dev == dev && r->off == off ? r : NULL;
}

/* Insert a free range, merging with adjacent ones. @return 0, -ENOMEM, SRV_ECORRUPT (the
 * range overlaps free space: a double free or a corrupt map). */
static int range_add(struct store__alloc *a, uint32_t dev, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    struct store__range key = {.dev = dev, .off = off};
    struct store__tnode *pn = t_lower(a->root_off, &key.by_off, cmp_off);
    struct store__tnode *nn = t_ceil(a->root_off, &key.by_off, cmp_off);
    struct store__range *prev = pn ? RANGE_OF_OFF(pn) : NULL;
    struct store__range *next = nn ? RANGE_OF_OFF(nn) : NULL;
    if (prev && prev->dev != dev)
        prev = NULL;
    if (next && next->dev != dev)
        next = NULL;
    if ((prev && prev->off + prev->len > off) || (next && off + len > next->off)) {
        srv_log(ERROR, STORE, "free range dev=%u off=%llu len=%llu overlaps free space", dev,
                (unsigned long long)off, (unsigned long long)len);
        return SRV_ECORRUPT;
    }
    a->free_bytes += len;
    if (prev && prev->off + prev->len == off) {
        range_unlink(a, prev);
        prev->len += len;
        if (next && next->off == off + len) {
            range_unlink(a, next);
            prev->len += next->len;
            free(next);
        }
        range_link(a, prev);
        return 0;
    }
    if (next && next->off == off + len) {
        range_unlink(a, next);
        next->off = off;
        next->len += len;
        range_link(a, next);
        return 0;
    }
    struct store__range *r = calloc(1, sizeof(*r));
    if (!r) {
        a->free_bytes -= len;
        return -ENOMEM;
    }
    r->dev = dev;
    r->off = off;
    r->len = len;
    range_link(a, r);
    return 0;
}

/* Take @p len bytes from the start of free range @p r. */
static void range_take_front(struct store__alloc *a, struct store__range *r, uint64_t len)
{
    range_unlink(a, r);
    a->free_bytes -= len;
    if (r->len == len) {
        free(r);
        return;
    }
    r->off += len;
    r->len -= len;
    range_link(a, r);
}

/* Queue @p l at @p q's tail. */
static void lq_push(struct store__lq *q, struct store__limbo *l)
{
    l->next = NULL;
    if (q->tail)
        q->tail->next = l;
    else
        q->head = l;
    q->tail = l;
    q->bytes += l->len;
}

/* Put @p l back at @p q's head (it was just popped). */
static void lq_unpop(struct store__lq *q, struct store__limbo *l)
{
    l->next = q->head;
    q->head = l;
    if (!q->tail)
        q->tail = l;
    q->bytes += l->len;
}

/* Take up to @p max entries off @p q's head, as a NULL-terminated list whose
 * bytes stay counted in @p q (the caller subtracts them); *@p n: how many. */
static struct store__limbo *lq_take(struct store__lq *q, size_t max, size_t *n)
{
    struct store__limbo *take = q->head, *last = NULL;
    *n = 0;
    for (struct store__limbo *l = take; l && *n < max; l = l->next, (*n)++)
        last = l;
    if (!last)
        return NULL;
    q->head = last->next;
    if (!q->head)
        q->tail = NULL;
    last->next = NULL;
    return take;
}

static void lq_free(struct store__lq *q)
{
    while (q->head) {
        struct store__limbo *l = q->head;
        q->head = l->next;
        free(l);
    }
    *q = (struct store__lq){0};
}

/* Move limbo entries no active reader can still see back to the free ranges
 * (through the drop list when a->drop: see drop_some). */
static void limbo_release(struct store__alloc *a)
{
    uint64_t oldest = a->rhead < a->rtail ? a->readers[a->rhead].epoch : UINT64_MAX;
    size_t n;
    while (a->limbo.head && a->limbo.head->tag < oldest) {
        struct store__limbo *l = lq_take(&a->limbo, 1, &n);
        a->limbo.bytes -= l->len;
        if (a->drop) {
            lq_push(&a->dropq, l);
            continue;
        }
        if (range_add(a, l->dev, l->off, l->len) == -ENOMEM) {
            /* Keep it in the limbo and retry later rather than leak it. */
            lq_unpop(&a->limbo, l);
            return;
        }
        free(l);
    }
}

/* Freed extents whose pages one drop_some call drops at most: a 1 GiB delete
 * is spread over the allocations that follow it rather than paid by one
 * (measured on this machine's ext4: about 10 us to unmap a verified 1 MiB
 * extent and 50-130 us to drop its clean pages, so 16 of them cost 1-2 ms;
 * allocations still take at most 1 MiB each, so the list drains quickly). */
#define DROP_BATCH 16

/* Caller holds a->mu, which this releases while it works: take up to @p max
 * entries off the drop list, drop their pages from the page cache
 * (store__drop_range: the forget callback, then POSIX_FADV_DONTNEED) and make
 * their space free. Until then nobody can allocate it, so no write can land
 * in it while its pages are being dropped, and a reused extent's range then
 * has pages in the page cache only where something still holds them (a
 * socket's send queue, a pipe; see cached_take in store.c). @return how many
 * became free. */
static size_t drop_some(struct store *s, size_t max)
{
    struct store__alloc *a = &s->a;
    size_t n;
    struct store__limbo *take = lq_take(&a->dropq, max, &n);
    if (!n)
        return 0;
    pthread_mutex_unlock(&a->mu);
    for (struct store__limbo *l = take; l; l = l->next)
        store__drop_range(s, l->dev, l->off, l->len);
    __atomic_add_fetch(&s->freed_dropped, n, __ATOMIC_RELAXED);
    pthread_mutex_lock(&a->mu);
    size_t done = 0;
    while (take) {
        struct store__limbo *l = take;
        take = l->next;
        a->dropq.bytes -= l->len;
        if (range_add(a, l->dev, l->off, l->len) == -ENOMEM) {
            lq_push(&a->dropq, l); /* dropped again later rather than leaked */
            continue;
        }
        free(l);
        done++;
    }
    return done;
}

/* ---- reservations (caller holds a->mu) ---- */

static struct store__range *resv_find(struct store__alloc *a, uint32_t dev, uint64_t off)
{
    return range_find_off(a->resv, dev, off);
}

/* The reservation of extent @p e, which the caller (@p what: "release",
 * "unreserve") must own; NULL, logged, when it is not reserved. */
static struct store__range *resv_owned(struct store__alloc *a, const struct store_extent *e,
                                       const char *what)
{
    struct store__range *r = resv_find(a, e->dev, e->off);
    if (!r)
        srv_log(ERROR, STORE, "%s of dev=%u off=%llu: not reserved", what, e->dev,
                (unsigned long long)e->off);
    return r;
}

/* Take reservation @p r out of the reservations (the caller frees it). */
static void resv_drop(struct store__alloc *a, struct store__range *r)
{
    a->resv = t_remove(a->resv, &r->by_off, cmp_off);
    a->reserved_bytes -= r->len;
}

/* ---- lifecycle ---- */

int store__alloc_init(struct store *s)
{
    struct store__alloc *a = &s->a;
    memset(a, 0, sizeof(*a));
    if (pthread_mutex_init(&a->mu, NULL) != 0)
        return -ENOMEM;
    a->rng = 0x9e3779b9u;
    a->epoch = 1;
    return 0;
}

void store__alloc_fini(struct store *s)
{
    struct store__alloc *a = &s->a;
    t_free_all(a->root_off);
    t_free_all(a->resv);
    lq_free(&a->limbo);
    lq_free(&a->dropq);
    free(a->readers);
    pthread_mutex_destroy(&a->mu);
}

int store__alloc_add(struct store *s, uint32_t dev, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&s->a.mu);
    int rc = range_add(&s->a, dev, off, len);
    pthread_mutex_unlock(&s->a.mu);
    return rc;
}

int store__alloc_grown(struct store *s, uint32_t dev, uint64_t from, uint64_t to)
{
    pthread_mutex_lock(&s->a.mu);
    int rc = range_add(&s->a, dev, from, to - from);
    s->a.grow_gen++;
    pthread_mutex_unlock(&s->a.mu);
    return rc;
}

/* ---- allocation ---- */

/* Per-thread hint: where this thread's last extent ended. Only a hint: it is
 * checked against the free tree before use. */
static _Thread_local struct {
    const struct store *s;
    uint32_t dev;
    uint64_t end;
} alloc_cursor;

/* Reserve @p len bytes: right after @p prev when given and free, else after this thread's
 * last extent, else the smallest free range that fits. */
static int alloc_do(struct store *s, const struct store_extent *prev, uint32_t len,
                    struct store_extent *out)
{
    if (!s || !out || len == 0 || len > STORE_EXTENT_MAX)
        return -EINVAL;
    struct store__alloc *a = &s->a;
    uint64_t size = store__round_up(len);
    int rc = 0;
    struct store__range *resv = calloc(1, sizeof(*resv));
    if (!resv)
        return -ENOMEM;
    pthread_mutex_lock(&a->mu);
again:
    limbo_release(a);
    if (a->dropq.head)
        (void)drop_some(s, DROP_BATCH);
    struct store__range *r = NULL;
    if (prev && prev->dev < s->ndev && prev->off % STORE_ALIGN == 0) {
        uint64_t next = prev->off + store__round_up(prev->len ? prev->len : 1);
        r = range_find_off(a->root_off, prev->dev, next);
        if (r && r->len < size)
            r = NULL;
    }
    if (!r && alloc_cursor.s == s) {
        r = range_find_off(a->root_off, alloc_cursor.dev, alloc_cursor.end);
        if (r && r->len < size)
            r = NULL;
    }
    if (!r) {
        struct store__range key = {.len = size, .dev = 0, .off = 0};
        struct store__tnode *n = t_ceil(a->root_size, &key.by_size, cmp_size);
        r = n ? RANGE_OF_SIZE(n) : NULL;
    }
    if (!r && a->dropq.head && drop_some(s, SIZE_MAX))
        goto again; /* freed space was waiting for its pages to be dropped */
    if (!r) {
        /* no free range fits: grow a data file (outside the lock: fallocate and
         * fsync take time) unless another thread's growth came first */
        uint64_t gen = a->grow_gen;
        pthread_mutex_unlock(&a->mu);
        rc = store__grow(s, size, gen);
        pthread_mutex_lock(&a->mu);
        if (rc == 0)
            goto again;
        goto out;
    }
    resv->dev = r->dev;
    resv->off = r->off;
    resv->len = size;
    range_take_front(a, r, size);
    resv->by_off.prio = next_prio(a);
    a->resv = t_insert(a->resv, &resv->by_off, cmp_off);
    a->reserved_bytes += size;
    alloc_cursor.s = s;
    alloc_cursor.dev = resv->dev;
    alloc_cursor.end = resv->off + size;
    out->dev = resv->dev;
    out->off = resv->off;
    out->len = len;
    out->crc = 0;
    resv = NULL;
out:
    pthread_mutex_unlock(&a->mu);
    free(resv);
    return rc;
}

int store_alloc(struct store *s, uint32_t len, struct store_extent *out)
{
    return alloc_do(s, NULL, len, out);
}

int store_alloc_near(struct store *s, const struct store_extent *prev, uint32_t len,
                     struct store_extent *out)
{
    return alloc_do(s, prev, len, out);
}

void store_unreserve(struct store *s, const struct store_extent *e)
{
    if (!s || !e)
        return;
    struct store__alloc *a = &s->a;
    pthread_mutex_lock(&a->mu);
    struct store__range *r = resv_owned(a, e, "unreserve");
    if (!r)
        goto out;
    resv_drop(a, r);
    if (range_add(a, r->dev, r->off, r->len) < 0)
        srv_log(ERROR, STORE, "unreserve dev=%u off=%llu: space lost until restart", r->dev,
                (unsigned long long)r->off);
    free(r);
out:
    pthread_mutex_unlock(&a->mu);
}

void store_release(struct store *s, const struct store_extent *e)
{
    if (!s || !e)
        return;
    struct store__alloc *a = &s->a;
    pthread_mutex_lock(&a->mu);
    struct store__range *r = resv_owned(a, e, "release");
    if (!r)
        goto out;
    struct store__limbo *l = calloc(1, sizeof(*l));
    if (!l) {
        /* keep it reserved: lost until restart rather than handed to a reader's view */
        srv_log(ERROR, STORE, "release dev=%u off=%llu: no memory, space lost until restart",
                r->dev, (unsigned long long)r->off);
        goto out;
    }
    resv_drop(a, r);
    l->dev = r->dev;
    l->off = r->off;
    l->len = r->len;
    l->tag = a->epoch++;
    lq_push(&a->limbo, l);
    free(r);
    limbo_release(a);
out:
    pthread_mutex_unlock(&a->mu);
}

int store__alloc_is_reserved(struct store *s, uint32_t dev, uint64_t off, uint64_t *len)
{
    pthread_mutex_lock(&s->a.mu);
    struct store__range *r = resv_find(&s->a, dev, off);
    if (r && len)
        *len = r->len;
    pthread_mutex_unlock(&s->a.mu);
    return r != NULL;
}

int store__alloc_shrink(struct store *s, const struct store_extent *e, uint64_t newlen)
{
    struct store__alloc *a = &s->a;
    uint64_t size = store__round_up(newlen ? newlen : 1);
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    struct store__range *r = resv_find(a, e->dev, e->off);
    if (!r || size > r->len) {
        rc = -EINVAL;
        goto out;
    }
    if (size < r->len) {
        uint64_t tail = r->len - size;
        if (range_add(a, r->dev, r->off + size, tail) == 0) {
            r->len = size;
            a->reserved_bytes -= tail;
        }
    }
out:
    pthread_mutex_unlock(&a->mu);
    return rc;
}

/* ---- read epochs ---- */

uint64_t store_read_begin(struct store *s)
{
    struct store__alloc *a = &s->a;
    pthread_mutex_lock(&a->mu);
    uint64_t e = a->epoch;
    if (a->rtail > a->rhead && a->readers[a->rtail - 1].epoch == e) {
        a->readers[a->rtail - 1].count++;
        goto out;
    }
    if (a->rtail == a->rcap) {
        /* Squeeze out finished epochs (a long reader at the front keeps those behind it). */
        size_t j = 0;
        for (size_t i = a->rhead; i < a->rtail; i++)
            if (a->readers[i].count)
                a->readers[j++] = a->readers[i];
        a->rhead = 0;
        a->rtail = j;
        if (a->rtail == a->rcap) {
            size_t ncap = a->rcap ? a->rcap * 2 : 16;
            struct store__epoch *n = realloc(a->readers, ncap * sizeof(*n));
            SRV_ASSERT(n != NULL);
            a->readers = n;
            a->rcap = ncap;
        }
    }
    a->readers[a->rtail].epoch = e;
    a->readers[a->rtail].count = 1;
    a->rtail++;
out:
    pthread_mutex_unlock(&a->mu);
    return e;
}

void store_read_end(struct store *s, uint64_t token)
{
    struct store__alloc *a = &s->a;
    pthread_mutex_lock(&a->mu);
    size_t lo = a->rhead, hi = a->rtail;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->readers[mid].epoch < token)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == a->rtail || a->readers[lo].epoch != token || a->readers[lo].count == 0) {
        srv_log(ERROR, STORE, "store_read_end: unknown reader token %llu",
                (unsigned long long)token);
        goto out;
    }
    a->readers[lo].count--;
    while (a->rhead < a->rtail && a->readers[a->rhead].count == 0)
        a->rhead++;
    if (a->rhead == a->rtail)
        a->rhead = a->rtail = 0;
    limbo_release(a);
out:
    pthread_mutex_unlock(&a->mu);
}

/* ---- persistent map ---- */

/* Put (dev, off) -> len. @return 0, -ENOSPC, -EIO. */
static int map_put(struct store_txn *st, uint32_t dev, uint64_t off, uint64_t len)
{
    return st->map.put(st->map.txn, dev, off, len);
}

static int map_del(struct store_txn *st, uint32_t dev, uint64_t off)
{
    return st->map.del(st->map.txn, dev, off);
}

/* Find the map records just below and at-or-above (dev, off). @return 0, -EIO, SRV_ECORRUPT. */
static int map_neighbours(struct store_txn *st, uint32_t dev, uint64_t off,
                          struct store_map_rec *below, struct store_map_rec *above)
{
    memset(below, 0, sizeof(*below));
    memset(above, 0, sizeof(*above));
    return st->map.near(st->map.txn, dev, off, below, above);
}

int store_txn_begin(struct store *s, const struct store_map *map, struct store_txn **out)
{
    struct store_txn *st = calloc(1, sizeof(*st));
    *out = NULL;
    if (!st)
        return -ENOMEM;
    st->grow = calloc(s->ndev, sizeof(*st->grow));
    if (!st->grow) {
        free(st);
        return -ENOMEM;
    }
    st->s = s;
    st->map = *map;
    *out = st;
    return 0;
}

/* Note in @p p what store_txn_done must do at the end of the txn: tag 1 a use of
 * [off, off+len) (its reservation becomes used space), tag 0 a free (to the limbo).
 * @return 0, -ENOMEM. */
static int pend_note(struct store_txn *p, uint32_t dev, uint64_t off, uint64_t len,
                     uint64_t tag)
{
    struct store__limbo *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->dev = dev;
    l->off = off;
    l->len = len;
    l->tag = tag;
    l->next = p->frees;
    p->frees = l;
    return 0;
}

/* Check an extent against the devices. @return its rounded size, or 0 when invalid. */
static uint64_t extent_size(struct store *s, const struct store_extent *e)
{
    if (!e || e->dev >= s->ndev || e->len > STORE_EXTENT_MAX || (e->off % STORE_ALIGN) != 0)
        return 0;
    uint64_t size = store__round_up(e->len ? e->len : 1);
    if (e->off + size > store__dev_size(&s->devs[e->dev]))
        return 0;
    return size;
}

/* In @p st: [off, off+len) of @p dev becomes free in the map, merged with the
 * free ranges right below and above it. @return 0, -EIO, -ENOSPC, SRV_ECORRUPT (it
 * overlaps a free range, logged as @p what). */
static int map_insert_free(struct store_txn *st, uint32_t dev, uint64_t off, uint64_t len,
                           const char *what)
{
    struct store_map_rec below, above;
    int rc = map_neighbours(st, dev, off, &below, &above);
    if (rc < 0)
        return rc;
    if (below.found && below.dev != dev)
        below.found = 0;
    if (above.found && above.dev != dev)
        above.found = 0;
    uint64_t start = off, total = len;
    if ((below.found && below.off + below.len > off) || (above.found && off + len > above.off)) {
        srv_log(ERROR, STORE, "%s dev=%u off=%llu size=%llu: already free in the map", what, dev,
                (unsigned long long)off, (unsigned long long)len);
        return SRV_ECORRUPT;
    }
    if (below.found && below.off + below.len == off) {
        start = below.off;
        total += below.len;
    }
    if (above.found && above.off == off + len) {
        rc = map_del(st, above.dev, above.off);
        if (rc < 0)
            return rc;
        total += above.len;
    }
    return map_put(st, dev, start, total);
}

/* Caller holds a->mu: whether the map lacks something this store has. */
static int map_behind(struct store *s)
{
    if (s->map_ver != STORE_MAP_VERSION || s->map_ndev != s->ndev)
        return 1;
    for (uint32_t d = 0; d < s->ndev; d++)
        if (store__dev_size(&s->devs[d]) > s->devs[d].rec_size)
            return 1;
    return 0;
}

/* In @p p: record what the map lacks (free tails of grown or new devices,
 * their size records, the marker). Runs on the txn's thread only, so what one
 * txn recorded (p->grow) is not recorded twice. @return as store_txn_init. */
static int map_catch_up(struct store_txn *p)
{
    struct store *s = p->s;
    struct store__alloc *a = &s->a;
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    if (!map_behind(s)) {
        pthread_mutex_unlock(&a->mu);
        return 0;
    }
    int marker = !p->marker && (s->map_ver != STORE_MAP_VERSION || s->map_ndev != s->ndev);
    /* a map written by version 1 has no size records: write every device's */
    int upgrade = marker && s->map_ver != STORE_MAP_VERSION;
    pthread_mutex_unlock(&a->mu);
    for (uint32_t d = 0; d < s->ndev && rc == 0; d++) {
        pthread_mutex_lock(&a->mu);
        uint64_t from = s->devs[d].rec_size > p->grow[d] ? s->devs[d].rec_size : p->grow[d];
        pthread_mutex_unlock(&a->mu);
        uint64_t to = store__dev_size(&s->devs[d]);
        if (to <= from) {
            if (upgrade)
                rc = map_put(p, STORE_MARKER_DEV, 1 + (uint64_t)d, from);
            continue;
        }
        rc = map_insert_free(p, d, from, to - from, "recording grown space");
        if (rc == 0)
            rc = map_put(p, STORE_MARKER_DEV, 1 + (uint64_t)d, to);
        if (rc == 0) {
            pthread_mutex_lock(&a->mu);
            p->grow[d] = to;
            pthread_mutex_unlock(&a->mu);
        }
    }
    if (rc == 0 && marker) {
        rc = map_put(p, STORE_MARKER_DEV, 0, (uint64_t)STORE_MAP_VERSION << 32 | s->ndev);
        if (rc == 0)
            p->marker = 1;
    }
    return rc;
}

int store_needs_init(struct store *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->a.mu);
    int behind = map_behind(s);
    pthread_mutex_unlock(&s->a.mu);
    return behind;
}

int store_txn_init(struct store_txn *st)
{
    if (!st)
        return -EINVAL;
    return map_catch_up(st);
}

int store_txn_use(struct store_txn *st, const struct store_extent *e)
{
    struct store *s = st->s;
    uint64_t size = extent_size(s, e);
    if (!size)
        return -EINVAL;
    uint64_t rsize = 0;
    if (!store__alloc_is_reserved(s, e->dev, e->off, &rsize) || rsize < size) {
        srv_log(ERROR, STORE, "txn_use dev=%u off=%llu len=%u: not a reservation", e->dev,
                (unsigned long long)e->off, e->len);
        return -EINVAL;
    }
    int rc = map_catch_up(st);
    if (rc < 0)
        return rc;
    struct store_map_rec below, above;
    rc = map_neighbours(st, e->dev, e->off, &below, &above);
    if (rc < 0)
        return rc;
    struct store_map_rec *r =
        (above.found && above.dev == e->dev && above.off == e->off) ? &above : &below;
    if (!r->found || r->dev != e->dev || r->off > e->off || r->off + r->len < e->off + size) {
        srv_log(ERROR, STORE, "txn_use dev=%u off=%llu size=%llu: not free in the map", e->dev,
                (unsigned long long)e->off, (unsigned long long)size);
        return SRV_ECORRUPT;
    }
    uint64_t rend = r->off + r->len, eend = e->off + size;
    uint32_t dev = r->dev;
    uint64_t roff = r->off;
    if (roff < e->off)
        rc = map_put(st, dev, roff, e->off - roff);
    else
        rc = map_del(st, dev, roff);
    if (rc == 0 && rend > eend)
        rc = map_put(st, dev, eend, rend - eend);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&s->a.mu);
    /* The reservation may be larger than the data (store_write did not shrink it):
     * the tail goes back now, the rest leaves "reserved" at commit. */
    struct store__range *rv = resv_find(&s->a, e->dev, e->off);
    if (rv && rv->len > size && range_add(&s->a, e->dev, e->off + size, rv->len - size) == 0) {
        s->a.reserved_bytes -= rv->len - size;
        rv->len = size;
    }
    rc = pend_note(st, e->dev, e->off, size, 1);
    pthread_mutex_unlock(&s->a.mu);
    return rc;
}

int store_txn_free(struct store_txn *st, const struct store_extent *e)
{
    struct store *s = st->s;
    uint64_t size = extent_size(s, e);
    if (!size)
        return -EINVAL;
    int rc = map_insert_free(st, e->dev, e->off, size, "txn_free (double free)");
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&s->a.mu);
    rc = pend_note(st, e->dev, e->off, size, 0);
    pthread_mutex_unlock(&s->a.mu);
    return rc;
}

void store_txn_done(struct store_txn *p, int ok)
{
    if (!p)
        return;
    struct store *s = p->s;
    struct store__alloc *a = &s->a;
    pthread_mutex_lock(&a->mu);
    if (ok) {
        /* what it recorded is in the map now; an aborted txn's growth stays
         * free in memory and is recorded by a later txn */
        for (uint32_t d = 0; d < s->ndev; d++)
            if (p->grow[d] > s->devs[d].rec_size)
                s->devs[d].rec_size = p->grow[d];
        if (p->marker) {
            if (s->map_ndev && s->map_ndev < s->ndev)
                srv_log(INFO, STORE, "added device(s) %u..%u to the free map", s->map_ndev,
                        s->ndev - 1);
            s->map_ver = STORE_MAP_VERSION;
            s->map_ndev = s->ndev;
        }
    }
    int freed = 0;
    while (p->frees) {
        struct store__limbo *l = p->frees;
        p->frees = l->next;
        if (!ok || l->tag == 1) {
            if (ok) {
                /* A committed use: the reservation becomes used space. */
                struct store__range *rv = resv_find(a, l->dev, l->off);
                if (rv) {
                    resv_drop(a, rv);
                    free(rv);
                }
            }
            free(l);
            continue;
        }
        l->tag = a->epoch;
        lq_push(&a->limbo, l);
        freed = 1;
    }
    if (freed)
        a->epoch++;
    free(p->grow);
    free(p);
    limbo_release(a);
    pthread_mutex_unlock(&a->mu);
}
