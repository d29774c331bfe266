/* SPDX-License-Identifier: Apache-2.0
 * core_tier: the core's side of the remote tier (data sub-module): eviction of
 * a copied file's extents, recall of an evicted file's bytes, and the last
 * read time of files (for eviction by age): in memory here, kept across restarts
 * in the files' tierst records (read_s), which the tier's uploader updates in its
 * passes when the time here is later by a grain (tier_upload.c), and core_close
 * at a clean stop (core__tier_keep_reads).
 *
 * An evicted file (META_I_EVICTED) keeps its inode, size, ETag, metadata and
 * `used` (the bytes it held: usage keeps counting them); its extent map holds
 * only what a recall brought back so far. Its bytes are on the remote under
 * its tierst record (meta_tier.h), which the eviction checked in the same txn
 * that freed the extents: the record's change counter is the inode's, its
 * size the file's, its remote ETag known, and no background work or pending
 * write is left on the file. So after a crash a file is either local or
 * evicted with a confirmed copy, and freed extents went through the store's
 * normal commit path (no leak, no double free).
 *
 * Versions: only a current file is evicted (a sealed version in a versioned
 * bucket included); an extent a noncurrent version shares with it loses this
 * holder only (xref), so the version keeps its bytes and the space stays used
 * until the version goes. Usage, which counted a shared extent once, then
 * counts the evicted file's used bytes on top (what a recall writes anew):
 * the shared bytes are charged to the bucket and tenant (never enforced).
 * A recall writes new extents, never the shared ones.
 * An evicted file never becomes a noncurrent version: the op that would
 * retire it answers -EAGAIN and its submit loop recalls it first
 * (core__tier_local), since the remote keeps one copy per key and the next
 * upload of the key replaces it.
 *
 * Recall: a read of a range the map does not hold joins the file's recall (one
 * per file, shared by every reader) and waits for the chunks it needs only;
 * chunks (cfg.chunk bytes, 8 MiB by default, or the file's tier policy's chunk size;
 * the first chunk's bytes of a file in 1 MiB pieces, see ch_of) are fetched by
 * recall threads, at most cfg.streams (or the policy's streams) of one file at once
 * (all threads by default), the whole file or, when the policy's whole_file is off,
 * only the chunks reads cover plus its read_ahead bytes, through the daemon's
 * fetch callback (the tier: ranged GETs checked against the recorded ETag and
 * size), written to new extents with their CRCs, and each chunk is put into the
 * map in a txn of its own, which also clears the flag once the whole file is
 * back. A remote that fails answers SRV_ERECALL (retryable: 503, JUKEBOX) until
 * fail_ms have passed, then -EIO; a remote copy that changed or went answers
 * SRV_EREMOTECHG, never its bytes. A read with CORE_P_NOWAIT (an event loop)
 * never waits: -EWOULDBLOCK, so the front end runs it again on a worker.
 *
 * Wake-ups: an event that makes chunks fetchable (a reader asks for one, a GET ends
 * and frees its slot, a prefetch is queued, a paced reader took a chunk) hands each
 * such chunk, claimed, to one idle recall thread (dispatch), each of which waits on a
 * condition of its own; a thread that ends a chunk takes the next one itself before
 * it goes idle. A reader waits on a condition of its own too, on its recall's list,
 * and is woken only when the chunk it waits for is in, the recall fails or ends, or at
 * the stop: one finished chunk wakes its readers, not every thread (a few small files
 * recalled at once would otherwise cost each one several wake-ups of every thread).
 * Thread: any; recall threads of its own. */
#include "core_data_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "meta_tier.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_metrics.h"

#define RC_CHUNK_DEF (8u * STORE_EXTENT_MAX)  /* bytes of one ranged GET (default) */
#define RC_CHUNK_MAX (64u * STORE_EXTENT_MAX) /* ... at most */
#define LR_SLOTS 65536u                       /* last-read table */
#define RM_KEEP_MS 3000                       /* a recalled chunk's bytes stay in memory */
#define RM_PACE_MS 1000                       /* see mem_pace */
#define RM_READERS 16                         /* files whose last read from memory is known */
#define RC_LAT_N CORE_TIER_LAT_N

enum { CH_TODO = 0, CH_BUSY, CH_DONE, CH_IDLE /* not asked for (whole_file off) */ };

struct recall {
    struct recall *next;
    uint64_t ino, size, change;
    uint64_t chunk;      /* bytes of one ranged GET: a multiple of STORE_EXTENT_MAX */
    uint32_t streams;    /* chunks of this recall fetched at once, at most */
    uint32_t read_ahead; /* bytes past a read's range to fetch (whole_file off) */
    bool whole_file;     /* every chunk (else only those reads ask for: CH_IDLE) */
    uint32_t nch, ndone;
    uint8_t *st;   /* per chunk: CH_* */
    uint32_t want; /* a chunk a reader waits for: fetched first (UINT32_MAX: none) */
    int err;       /* terminal: SRV_EREMOTECHG, -EIO, or 1: the recall ended (file local,
                    * changed or gone: readers look again) */
    int64_t fail_since_ms, retry_at_ms;
    unsigned fails; /* retryable failures in a row */
    unsigned busy;  /* chunks being fetched or written */
    unsigned fetching; /* ... of which being fetched (at most streams) */
    int waiters;
    int64_t touch_ms; /* the last read that wanted it */
    int64_t start_ns;
    bool bg; /* started by a directory prefetch (core__tier_prefetch): while no reader
              * waits, its chunks go after every other recall's, and a failure ends it */
    struct rwaiter *wl; /* the readers waiting (as many as waiters, or fewer: nowait) */
};

/* A reader waiting for a chunk of a recall (core__tier_wait), on the recall's list:
 * woken when that chunk is in, the recall fails or ends, or at the stop (its own
 * condition: no other reader wakes up for it). */
struct rwaiter {
    pthread_cond_t cv;
    struct rwaiter *next;
    uint32_t ch; /* the chunk it waits for */
};

/* A recall thread. An idle one is on the tier's idle list (newest first) and waits on
 * its own condition until a chunk is handed to it (dispatch), its timer (a retry or a
 * paced recall due, at most a second), or the stop. */
struct rworker {
    pthread_cond_t cv;
    pthread_t th;
    struct core *c;
    struct rworker *next; /* on k->idle */
    bool idle;
    struct recall *job; /* the chunk handed to it, claimed (CH_BUSY), or NULL */
    uint32_t ch;
    int64_t until_ms; /* when it looks for work by itself (idle) */
};

/* A recall thread's chunk buffer, kept from chunk to chunk (a fresh 8 MiB buffer is
 * a fresh mapping: its page faults and zeroing cost more than the copy into it). Each
 * is a mapping of its own (rbuf_get), never heap memory: chunk buffers are freed by
 * other threads than those that took them (readers drop the table's), and in malloc's
 * per-thread arenas the freed ones were carved up by small allocations and new ones
 * taken from fresh heap pages, so a recall faulted in and zeroed every byte it
 * fetched, and the daemon's heap grew by about the recalled bytes (issue 12, a 4 GiB
 * GET recall read by a client slower than the recall). */
struct rbuf {
    char *p;
    size_t cap;
};

/* A free chunk buffer in the pool: kept in its own first bytes. */
struct rfree {
    struct rfree *next;
    size_t cap;
};

/* A recalled chunk's bytes, kept in memory after its extents went into the map, for
 * the readers that wait for them (core__tier_mem_get): they send these bytes instead of
 * reading the extents back from the disk and verifying them (the recall wrote them with
 * O_DIRECT, so they are not in the page cache). They are the very bytes the extents'
 * CRCs were computed over and written from, never changed while the entry lives. */
struct rmem {
    struct rmem *next;
    atomic_int refs; /* the table's, while in it, and the readers' */
    struct rbuf b;
    int64_t t_ms;   /* when kept */
    int64_t hit_ms; /* when a reader first got it (0: not yet); mmu */
    uint64_t ino;
    uint32_t n;
    struct store_extent e[RC_CHUNK_MAX / STORE_EXTENT_MAX];
    uint32_t pos[RC_CHUNK_MAX / STORE_EXTENT_MAX]; /* each extent's bytes in b.p */
};

struct lr_slot {
    atomic_uint_fast64_t ino;
    atomic_int_fast64_t t;     /* last read of ino (seconds) */
    atomic_int_fast64_t floor; /* the latest read of an ino this slot forgot */
};

struct core__tier {
    pthread_mutex_t mu;
    pthread_cond_t bg_cv; /* a prefetch waits for fewer prefetches (core__tier_prefetch) */
    struct recall *head;
    struct rworker *threads;
    struct rworker *idle; /* idle recall threads, the latest first */
    uint32_t nthreads;
    uint32_t fetching; /* ranged GETs in flight, all recalls (at most cfg.threads) */
    bool stop;
    struct core_tier_config cfg;
    struct lr_slot *lr;
    int64_t t0_s;
    atomic_uint_fast64_t recalled_bytes, recalls, recall_errors, evictions, evicted_bytes;
    atomic_uint_fast64_t lat[RC_LAT_N + 1], lat_sum_us, lat_n;
    atomic_uint_fast64_t wakeups, wakeups_futile; /* core_tier_stats */
    /* recalled chunks in memory (struct rmem), newest first, and free buffers */
    pthread_mutex_t mmu;
    struct rmem *mem;
    size_t mem_bytes, mem_max;     /* buffer bytes the table holds, at most */
    atomic_uint nmem;              /* entries (0: readers skip the lock) */
    atomic_uint_fast64_t mem_sent; /* bytes readers got from the table */
    struct rfree *pool;            /* free chunk buffers, kept for reuse */
    size_t pool_bytes;             /* ... their bytes: at most mem_max */
    atomic_uint_fast64_t maps;     /* chunk buffers mapped (a fresh one faults in every page) */
    atomic_uint_fast64_t reuses;   /* chunks that took a buffer mapped already */
    atomic_uint_fast64_t live, live_bytes; /* chunk buffers mapped now, and their bytes */
    bool paced; /* a recall was held back for its reader (mem_pace): a first hit wakes */
    struct {
        uint64_t ino;
        int64_t ms;
    } rd[RM_READERS]; /* files readers took chunks of lately, and when (mem_read) */
};

static const double lat_bounds[RC_LAT_N] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,    2.5,   5,    10,  30,   60};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A condition whose timed waits count on srv_now_ms's clock (CLOCK_MONOTONIC). */
static void cv_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Wait on @p cv (@p mu held) until @p until_ms (srv_now_ms). @return 0 or ETIMEDOUT. */
static int cv_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t until_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(until_ms / 1000),
                          .tv_nsec = (long)(until_ms % 1000) * 1000000l};
    return pthread_cond_timedwait(cv, mu, &ts);
}

static void dispatch(struct core__tier *k);

static void rbuf_drop(struct core__tier *k, struct rbuf *b)
{
    if (b->p) {
        munmap(b->p, b->cap);
        atomic_fetch_sub(&k->live, 1);
        atomic_fetch_sub(&k->live_bytes, b->cap);
    }
    *b = (struct rbuf){0};
}

/* Give buffer @p b to the pool, or unmap it when the pool holds mem_max bytes (as many
 * as the table: a chunk pushed out of the table gives its buffer to the pool, and the
 * next chunk fetched takes it back, so a recall maps buffers while it starts only);
 * mmu held. */
static void pool_put(struct core__tier *k, struct rbuf *b)
{
    if (b->p && k->pool_bytes + b->cap <= k->mem_max) {
        struct rfree *f = (struct rfree *)(void *)b->p;
        f->next = k->pool;
        f->cap = b->cap;
        k->pool = f;
        k->pool_bytes += b->cap;
        *b = (struct rbuf){0};
    }
    rbuf_drop(k, b);
}

/* Unmap every buffer of the pool; mmu held. */
static void pool_drain(struct core__tier *k)
{
    while (k->pool) {
        struct rfree *f = k->pool;
        k->pool = f->next;
        k->pool_bytes -= f->cap;
        atomic_fetch_sub(&k->live, 1);
        atomic_fetch_sub(&k->live_bytes, f->cap);
        munmap(f, f->cap);
    }
}

/* A fresh chunk buffer of @p need bytes, or NULL: page-aligned, as O_DIRECT writes want
 * (STORE_ALIGN). Small pages: MADV_HUGEPAGE cut the faults of a recall's first buffers
 * 25-fold, but on a VM whose free 2 MiB blocks go back to the host (free page reporting)
 * zeroing a fresh huge page waits for the host to back it: 3 ms of CPU per MiB
 * recalled instead of 1 in some runs (issue 12, benchmarks.md). MAP_POPULATE: the
 * recall thread that maps it faults its pages in here, in one call, instead of the S3
 * client's one loop thread one page at a time under the socket reads of every GET in
 * flight (a fault per 4 KiB, each stalling all of them). */
static void *rbuf_map(size_t need)
{
    void *p =
        mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* A buffer for a chunk of @p len bytes of a recall whose chunks are @p want bytes: one
 * of STORE_EXTENT_MAX bytes for the first chunks (which come in pieces of that size),
 * else one of @p want bytes, so that the buffers the memory table holds are about the
 * size of what they hold, and the sizes stay few (the pool reuses them: a fresh buffer
 * is a fresh mapping, whose page faults and zeroing cost more than the copy into it). */
static char *rbuf_get(struct core__tier *k, struct rbuf *b, size_t len, size_t want)
{
    size_t need = len <= STORE_EXTENT_MAX ? STORE_EXTENT_MAX : want < len ? len : want;
    if (b->p && b->cap == need) {
        atomic_fetch_add_explicit(&k->reuses, 1, memory_order_relaxed);
        return b->p;
    }
    pthread_mutex_lock(&k->mmu);
    pool_put(k, b);
    for (struct rfree **pp = &k->pool; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap == need) {
            struct rfree *f = *pp;
            *pp = f->next;
            k->pool_bytes -= need;
            *b = (struct rbuf){(char *)f, need};
            break;
        }
    }
    pthread_mutex_unlock(&k->mmu);
    if (b->p) {
        atomic_fetch_add_explicit(&k->reuses, 1, memory_order_relaxed);
        return b->p;
    }
    void *p = rbuf_map(need);
    if (!p)
        return NULL;
    atomic_fetch_add(&k->maps, 1);
    atomic_fetch_add(&k->live, 1);
    atomic_fetch_add(&k->live_bytes, need);
    *b = (struct rbuf){p, need};
    return b->p;
}

static void rmem_unref(struct core__tier *k, struct rmem *m)
{
    if (atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    pthread_mutex_lock(&k->mmu);
    pool_put(k, &m->b);
    pthread_mutex_unlock(&k->mmu);
    free(m);
}

/* Unlink entry *@p pp of the table onto @p drop; mmu held. */
static void mem_unlink(struct core__tier *k, struct rmem **pp, struct rmem **drop)
{
    struct rmem *m = *pp;
    *pp = m->next;
    k->mem_bytes -= m->b.cap;
    atomic_fetch_sub(&k->nmem, 1);
    m->next = *drop;
    *drop = m;
}

/* The last time a reader got a chunk of file @p ino from the table (0: not lately);
 * mmu held. Kept apart from the entries, which go once read when the table is full. */
static int64_t mem_last_read(const struct core__tier *k, uint64_t ino)
{
    for (uint32_t i = 0; i < RM_READERS; i++)
        if (k->rd[i].ino == ino && k->rd[i].ms)
            return k->rd[i].ms;
    return 0;
}

/* A reader got a chunk of file @p ino at @p now; mmu held. */
static void mem_read(struct core__tier *k, uint64_t ino, int64_t now)
{
    uint32_t old = 0;
    for (uint32_t i = 0; i < RM_READERS; i++) {
        if (k->rd[i].ino == ino) {
            k->rd[i].ms = now;
            return;
        }
        if (k->rd[i].ms < k->rd[old].ms)
            old = i;
    }
    k->rd[old].ino = ino;
    k->rd[old].ms = now;
}

/* Drop the table's entries kept before @p before_ms of files no reader took a chunk of
 * since then, then, while it holds more than mem_max bytes, the oldest a reader got
 * already, else the oldest; with @p all, every entry and the pool too. */
static void mem_prune(struct core__tier *k, int64_t before_ms, bool all)
{
    struct rmem *drop = NULL;
    pthread_mutex_lock(&k->mmu);
    for (struct rmem **pp = &k->mem; *pp;) {
        if (all || ((*pp)->t_ms < before_ms && mem_last_read(k, (*pp)->ino) < before_ms))
            mem_unlink(k, pp, &drop);
        else
            pp = &(*pp)->next;
    }
    while (k->mem_bytes > k->mem_max) {
        struct rmem **victim = NULL, **old = NULL; /* newest first: the last is the oldest */
        for (struct rmem **pp = &k->mem; *pp; pp = &(*pp)->next) {
            old = pp;
            if ((*pp)->hit_ms)
                victim = pp;
        }
        mem_unlink(k, victim ? victim : old, &drop);
    }
    pthread_mutex_unlock(&k->mmu);
    while (drop) { /* unused ones give their buffers to the pool */
        struct rmem *m = drop;
        drop = m->next;
        rmem_unref(k, m);
    }
    pthread_mutex_lock(&k->mmu);
    if (all || !k->mem)
        pool_drain(k);
    pthread_mutex_unlock(&k->mmu);
}

/* Whether recall @p r should wait before it fetches one more chunk: a reader is taking
 * its chunks from the memory table (one did in the last RM_PACE_MS), and the chunks it
 * has not taken yet, with those on their way, fill the table, so one more would push
 * out one it is about to read (and it would read that from the disk). A reader that
 * stops taking them lets the recall go on at full speed RM_PACE_MS later. mu held. */
static bool mem_pace(struct core__tier *k, const struct recall *r, int64_t now)
{
    if (atomic_load_explicit(&k->nmem, memory_order_relaxed) == 0)
        return false;
    size_t unread = 0;
    pthread_mutex_lock(&k->mmu);
    int64_t hit = mem_last_read(k, r->ino);
    for (struct rmem *m = k->mem; m; m = m->next)
        if (m->ino == r->ino && !m->hit_ms)
            unread += m->b.cap;
    /* its chunks being fetched or written land in the table too */
    bool pace = hit && now - hit < RM_PACE_MS && unread + (r->busy + 1) * r->chunk > k->mem_max;
    if (pace)
        k->paced = true; /* the reader's next first hit looks again (core__tier_mem_get) */
    pthread_mutex_unlock(&k->mmu);
    return pace;
}

/* Keep the bytes of a chunk whose extents @p x[i] with @p used[i] went into the map
 * (@p off: the chunk's file offset) in the memory table: the table takes buffer @p rb
 * (the recall thread gets another for its next chunk). */
static void mem_keep(struct core__tier *k, struct rbuf *rb, uint64_t ino,
                     const struct core__fext *x, size_t nx, const uint8_t *used, uint64_t off)
{
    if (k->mem_max == 0)
        return;
    struct rmem *m = calloc(1, sizeof(*m));
    if (!m)
        return;
    for (size_t i = 0; i < nx; i++) {
        if (!used[i])
            continue;
        m->e[m->n] = x[i].e;
        m->pos[m->n++] = (uint32_t)(x[i].foff - off);
    }
    if (m->n == 0) {
        free(m);
        return;
    }
    m->b = *rb;
    *rb = (struct rbuf){0};
    m->t_ms = srv_now_ms();
    m->ino = ino;
    atomic_init(&m->refs, 1);
    pthread_mutex_lock(&k->mmu);
    m->next = k->mem;
    k->mem = m;
    k->mem_bytes += m->b.cap;
    atomic_fetch_add(&k->nmem, 1);
    pthread_mutex_unlock(&k->mmu);
    mem_prune(k, m->t_ms - RM_KEEP_MS, false);
}

void *core__tier_mem_get(struct core *c, const struct store_extent *e, uint64_t n,
                         const char **bytes)
{
    struct core__tier *k = c->data ? c->data->tier : NULL;
    struct rmem *hit = NULL;
    bool kick = false;
    if (!k || atomic_load_explicit(&k->nmem, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&k->mmu);
    for (struct rmem *m = k->mem; m && !hit; m = m->next) {
        for (uint32_t i = 0; i < m->n; i++) {
            const struct store_extent *h = &m->e[i];
            if (h->dev == e->dev && h->off == e->off && h->len == e->len && h->crc == e->crc) {
                atomic_fetch_add(&m->refs, 1);
                *bytes = m->b.p + m->pos[i];
                hit = m;
                if (m->hit_ms == 0) {
                    /* a first hit: room for one more chunk of a paced recall, if any
                     * (set under mmu by mem_pace before it answered yes: not missed) */
                    m->hit_ms = srv_now_ms();
                    kick = k->paced;
                    k->paced = false;
                }
                mem_read(k, m->ino, srv_now_ms());
                break;
            }
        }
    }
    pthread_mutex_unlock(&k->mmu);
    if (!hit)
        return NULL;
    atomic_fetch_add(&k->mem_sent, n);
    if (kick) {
        pthread_mutex_lock(&k->mu);
        dispatch(k);
        pthread_mutex_unlock(&k->mu);
    }
    return hit;
}

void core__tier_mem_put(struct core *c, void *ref)
{
    if (ref)
        rmem_unref(c->data->tier, ref);
}

int core__tier_init(struct core *c)
{
    struct core__tier *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->lr = calloc(LR_SLOTS, sizeof(*k->lr));
    if (!k->lr) {
        free(k);
        return -ENOMEM;
    }
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->mmu, NULL);
    cv_init(&k->bg_cv);
    k->t0_s = (int64_t)time(NULL);
    c->data->tier = k;
    return 0;
}

void core__tier_fini(struct core *c)
{
    struct core__tier *k = c->data ? c->data->tier : NULL;
    if (!k)
        return;
    core_tier_stop(c);
    while (k->head) {
        struct recall *r = k->head;
        k->head = r->next;
        free(r->st);
        free(r);
    }
    mem_prune(k, INT64_MAX, true);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->mmu);
    pthread_cond_destroy(&k->bg_cv);
    free(k->lr);
    free(k);
    c->data->tier = NULL;
}

/* ---- last read times ---- */

static uint64_t lr_hash(uint64_t ino)
{
    ino ^= ino >> 33;
    ino *= 0xff51afd7ed558ccdull;
    ino ^= ino >> 33;
    return ino % LR_SLOTS;
}

void core__tier_note_read(struct core *c, uint64_t ino)
{
    struct lr_slot *s = &c->data->tier->lr[lr_hash(ino)];
    int64_t now = (int64_t)time(NULL);
    uint64_t had = atomic_load(&s->ino);
    if (had != ino) {
        /* the slot forgets its ino: remember its time as a floor for every ino it
         * may have held (never younger than the truth: eviction errs towards keeping) */
        int64_t ht = atomic_load(&s->t);
        int64_t f = atomic_load(&s->floor);
        while (ht > f && !atomic_compare_exchange_weak(&s->floor, &f, ht))
            ;
        atomic_store(&s->ino, ino);
    }
    atomic_store(&s->t, now);
}

int64_t core_tier_last_read(struct core *c, uint64_t ino, int64_t stored_s)
{
    struct core__tier *k = c->data->tier;
    struct lr_slot *s = &k->lr[lr_hash(ino)];
    int64_t t = atomic_load(&s->floor);
    if (atomic_load(&s->ino) == ino && atomic_load(&s->t) > t)
        t = atomic_load(&s->t);
    /* reads before this start: what the record kept, else not known (as at the start) */
    int64_t before = stored_s > 0 ? stored_s : k->t0_s;
    return t > before ? t : before;
}

#define LR_KEEP_BATCH 4096u /* read times written per metadata op at a stop */

struct keep_op {
    const uint64_t *ino;
    const int64_t *t;
    size_t n;
};

static int keep_fn(struct meta_txn *t, void *arg)
{
    const struct keep_op *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        int rc = meta_tier_note_read(t, a->ino[i], a->t[i]);
        if (rc && rc != -ENOENT && rc != SRV_ECORRUPT) /* no record (or unreadable): skip */
            return rc;
    }
    return 0;
}

void core__tier_keep_reads(struct core *c)
{
    struct core__tier *k = c->data ? c->data->tier : NULL;
    if (!k)
        return;
    uint64_t *inos = malloc(LR_KEEP_BATCH * sizeof(*inos));
    int64_t *ts = malloc(LR_KEEP_BATCH * sizeof(*ts));
    size_t n = 0, kept = 0;
    int rc = inos && ts ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i <= LR_SLOTS; i++) {
        if (i < LR_SLOTS) {
            uint64_t ino = atomic_load(&k->lr[i].ino);
            if (!ino)
                continue; /* (a slot's floor is what it forgot: not any one file's) */
            inos[n] = ino;
            ts[n++] = atomic_load(&k->lr[i].t);
        }
        if (n == LR_KEEP_BATCH || (i == LR_SLOTS && n)) {
            struct keep_op a = {inos, ts, n};
            rc = meta_submit(c->meta, keep_fn, &a, 0);
            kept += rc ? 0 : n;
            n = 0;
        }
    }
    if (rc)
        srv_log(WARN, TIER, "read times not kept at the stop: %s", srv_strerror(rc));
    else if (kept)
        srv_log(DEBUG, TIER, "read times of %zu files kept at the stop", kept);
    free(inos);
    free(ts);
}

struct needed {
    struct meta_txn *t;
    uint32_t remote;
    uint64_t ino;
};

static int needed_cb(void *arg, uint64_t ino, const struct meta_tier_copy *c)
{
    struct needed *n = arg;
    struct meta_inode r;
    if (c && c->st.remote == n->remote && meta_inode_get(n->t, ino, &r) == 0 &&
        (r.flags & META_I_EVICTED)) {
        n->ino = ino;
        return 1;
    }
    return 0;
}

int core_tier_remote_needed(struct core *c, uint32_t remote, uint64_t *ino)
{
    struct needed n = {.remote = remote};
    int rc = meta_rtxn_begin(c->meta, &n.t);
    if (rc)
        return rc;
    rc = meta_tier_scan(n.t, 0, needed_cb, &n);
    meta_rtxn_end(n.t);
    if (rc < 0)
        return rc;
    if (ino)
        *ino = n.ino;
    return n.ino ? 1 : 0;
}

/* ---- eviction ---- */

struct evict_op {
    struct core *c;
    uint64_t ino, change;
    uint64_t freed;
};

static int evict_fn(struct meta_txn *t, void *arg)
{
    struct evict_op *a = arg;
    struct core *c = a->c;
    struct meta_inode r;
    struct meta_dirty d;
    int rc = meta_inode_get(t, a->ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ESTALE : rc;
    /* a noncurrent version (nlink 0) is never evicted; a current one is once sealed */
    if (r.type != CORE_REG || r.nlink == 0 || r.change != a->change ||
        (r.flags & (META_I_EVICTED | META_I_INLINE)) ||
        ((r.flags & META_I_VREC) && !(r.flags & META_I_VSEALED)))
        return -EAGAIN;
    struct meta_tier_copy *cp = malloc(sizeof(*cp));
    if (!cp)
        return -ENOMEM;
    rc = meta_tier_get(t, a->ino, cp);
    bool confirmed =
        rc == 0 && cp->st.change == r.change && cp->st.size == r.size && cp->st.etag[0] != '\0';
    free(cp);
    if (rc && rc != -ENOENT)
        return rc;
    if (!confirmed)
        return -EAGAIN; /* no confirmed copy of this content */
    rc = meta_dirty_get(t, a->ino, &d);
    if (rc == 0)
        return -EAGAIN; /* background work (its ETag, a seal) would read it */
    if (rc != -ENOENT)
        return rc;
    struct core__pend *pd = core__pend_get(c, a->ino, false);
    if (pd) {
        core__pend_put(c, pd);
        return -EAGAIN; /* uncommitted writes */
    }
    struct core__fext_list l = {0};
    uint64_t shared = 0;
    rc = core__overlaps(t, a->ino, 0, UINT64_MAX, &l, false);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        /* an extent another version shares loses this holder only (1): not freed */
        rc = core__extent_free(c, t, &l.v[i].e);
        if (rc == 0)
            a->freed += l.v[i].e.len;
        else if (rc == 1)
            shared += l.v[i].e.len;
        if (rc >= 0)
            rc = meta_extent_del(t, a->ino, l.v[i].foff);
    }
    free(l.v);
    /* usage counted a shared extent once; it stays with the version, and this file's used
     * bytes (on the remote, written anew by a recall) now count on top of it */
    if (rc == 0 && shared)
        rc = core__usage_charge_store(c, t, r.tenant, r.bucket, (int64_t)shared);
    if (rc)
        return rc;
    r.flags |= META_I_EVICTED; /* change, times and used stay: nothing a client sees changes */
    return meta_inode_put(t, a->ino, &r);
}

int core_tier_evict(struct core *c, uint64_t ino, uint64_t change, uint64_t *freed)
{
    struct evict_op a = {.c = c, .ino = ino, .change = change};
    if (freed)
        *freed = 0;
    int rc = meta_submit(c->meta, evict_fn, &a, 0);
    if (rc)
        return rc;
    atomic_fetch_add(&c->data->tier->evictions, 1);
    atomic_fetch_add(&c->data->tier->evicted_bytes, a.freed);
    if (freed)
        *freed = a.freed;
    srv_log(DEBUG, TIER, "evicted ino=%llu (%llu bytes freed)", (unsigned long long)ino,
            (unsigned long long)a.freed);
    return 0;
}

/* ---- recall ---- */

/* Do the committed extents in @p l cover [lo, hi) without a gap? */
static bool covers(const struct core__fext_list *l, uint64_t lo, uint64_t hi)
{
    uint64_t pos = lo;
    for (size_t i = 0; i < l->n && pos < hi; i++) {
        if (l->v[i].foff > pos)
            return false;
        if (l->v[i].foff + l->v[i].vlen > pos)
            pos = l->v[i].foff + l->v[i].vlen;
    }
    return pos >= hi;
}

int core__tier_resident(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi, bool *yes)
{
    struct core__fext_list l = {0};
    *yes = true;
    if (hi <= lo)
        return 0;
    int rc = core__overlaps(t, ino, lo, hi, &l, false);
    if (rc == 0)
        *yes = covers(&l, lo, hi);
    free(l.v);
    return rc;
}

struct install_op {
    struct core *c;
    uint64_t ino, change, foff;
    struct core__fext *x;
    size_t n;
    uint8_t *used; /* per extent: it went into the map */
    size_t nused;  /* bytes of those */
    bool last;     /* every other chunk of the recall is in: make the file whole too */
    bool whole;    /* ... done (make_whole ran in this txn) */
    const struct core_fetch_meta *fm; /* the object's metadata from the GET, or NULL */
};

/* The remote object's metadata the GET of a chunk brought (@p a->fm), kept as a HEAD's
 * would be (core_cmode.c's meta_fn): only while the file is still its remote object's
 * content, that content the one the GET was checked against, and no metadata kept yet. */
static int install_meta(struct meta_txn *t, struct install_op *a)
{
    return core__cm_meta_keep(t, a->ino, a->change, a->fm->etag, a->fm->blob, a->fm->len);
}

static int make_whole(struct meta_txn *t, struct core *c, uint64_t ino, struct meta_inode *r);

static int install_fn(struct meta_txn *t, void *arg)
{
    struct install_op *a = arg;
    struct meta_inode r;
    a->nused = 0;
    memset(a->used, 0, a->n);
    int rc = meta_inode_get(t, a->ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ESTALE : rc;
    if (!(r.flags & META_I_EVICTED))
        return 1; /* local already */
    if (r.change != a->change || r.nlink == 0)
        return SRV_ESTALE; /* changed (it would have been recalled first) or going */
    /* each extent goes where the map holds nothing yet (an earlier recall, with the
     * same or another chunk size, may have brought part of this chunk back: extents
     * of recalls all sit on the STORE_EXTENT_MAX grid of file offsets) */
    struct core__fext_list l = {0};
    for (size_t i = 0; rc == 0 && i < a->n; i++) {
        struct core__fext *x = &a->x[i];
        rc = core__overlaps(t, a->ino, x->foff, x->foff + x->vlen, &l, false);
        bool empty = l.n == 0;
        free(l.v);
        l = (struct core__fext_list){0};
        if (rc || !empty)
            continue;
        struct meta_extent me = {
            .dev = x->e.dev, .len = x->e.len, .off = x->e.off, .crc = x->e.crc, .vlen = x->vlen};
        rc = core__extent_use(t, &x->e, x->bcrc, x->nb);
        if (rc == 0)
            rc = meta_extent_put(t, a->ino, x->foff, &me);
        if (rc == 0) {
            a->used[i] = 1;
            a->nused += x->vlen;
        }
    }
    if (rc == 0 && a->fm && a->fm->blob)
        rc = install_meta(t, a);
    /* the last chunk: the file is whole again in the same txn (one commit per small
     * file, not two) */
    a->whole = false;
    if (rc == 0 && a->last) {
        rc = make_whole(t, a->c, a->ino, &r);
        a->whole = rc == 0;
    }
    return rc;
}

struct whole_op {
    struct core *c;
    uint64_t ino, change;
};

/* Every chunk of a recall is in: if the map covers the file, it is an ordinary local
 * file again, and its used becomes what it holds now. Once per recall (it lists the
 * whole map: per chunk it would make a recall quadratic in the file's size). */
static int whole_fn(struct meta_txn *t, void *arg)
{
    struct whole_op *a = arg;
    struct meta_inode r;
    int rc = meta_inode_get(t, a->ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ESTALE : rc;
    if (!(r.flags & META_I_EVICTED) || r.change != a->change || r.nlink == 0)
        return 0; /* local already, or changed or going: nothing to do */
    return make_whole(t, a->c, a->ino, &r);
}

/* Evicted file @p r (current, as the recall knew it): if its map covers it, it is
 * local again and its used what it holds now (in txn @p t). */
static int make_whole(struct meta_txn *t, struct core *c, uint64_t ino, struct meta_inode *r)
{
    struct core__fext_list l = {0};
    int rc = core__overlaps(t, ino, 0, r->size, &l, false);
    if (rc == 0 && covers(&l, 0, r->size)) {
        uint64_t held = 0;
        for (size_t i = 0; i < l.n; i++)
            held += l.v[i].e.len;
        int64_t delta = (int64_t)held - (int64_t)r->used;
        r->flags &= (uint16_t)~META_I_EVICTED;
        r->used = held;
        rc = delta ? core__usage_charge(c, t, r->tenant, r->parent, delta, 0, false) : 0;
        if (rc == 0)
            rc = meta_inode_put(t, ino, r);
    }
    free(l.v);
    return rc;
}

/* Chunk geometry of a recall whose chunks are @p chunk bytes: its first @p chunk bytes
 * come in STORE_EXTENT_MAX pieces (so the first bytes of a file are back soon even
 * while all streams are busy with it), the rest in chunks of @p chunk bytes. Every
 * chunk starts on the STORE_EXTENT_MAX grid. */
static uint32_t ch_of(uint64_t chunk, uint64_t off)
{
    uint32_t head = (uint32_t)(chunk / STORE_EXTENT_MAX);
    if (off < chunk)
        return (uint32_t)(off / STORE_EXTENT_MAX);
    return head + (uint32_t)((off - chunk) / chunk);
}

static uint64_t ch_start(uint64_t chunk, uint32_t ch)
{
    uint32_t head = (uint32_t)(chunk / STORE_EXTENT_MAX);
    if (ch < head)
        return (uint64_t)ch * STORE_EXTENT_MAX;
    return chunk + (uint64_t)(ch - head) * chunk;
}

/* The GET of a chunk of @p r ended (@p r stays: its busy count holds it): another
 * thread may start the next one while this one writes and commits. */
static void fetched(struct core__tier *k, struct recall *r)
{
    pthread_mutex_lock(&k->mu);
    r->fetching--;
    k->fetching--;
    dispatch(k); /* its GET slot to the next chunk */
    pthread_mutex_unlock(&k->mu);
}

/* The extents of a chunk being written (store_write_batch): their bytes. */
struct rc_batch {
    struct core__fext *x;
    const char *src[STORE_WBATCH_MAX];
};

/* While extent i is in flight: its block CRCs, and its CRC combined from them (the
 * bytes are read once). */
static uint32_t rc_crc_fn(void *arg, size_t i)
{
    struct rc_batch *b = arg;
    struct core__fext *f = &b->x[i];
    f->nb = core__bcrc_compute(b->src[i], f->vlen, f->bcrc);
    return core__bcrc_whole(f->bcrc, f->nb, f->vlen);
}

/* Fetch chunk @p ch of @p rec's file and put it into the map (@p fdone: set once its
 * GET ended and fetched() counted it). @p last: every other chunk is in, so the txn
 * that puts this one in also makes the file whole (local) again; *@p whole says it did
 * (else the caller does it in a txn of its own, whole_fn).
 * @return 0, 1 (the file is local now), SRV_ESTALE (changed or gone: the recall ends),
 * SRV_ERECALL (retryable), SRV_EREMOTECHG, or another error. */
static int recall_chunk(struct core *c, uint64_t ino, uint64_t change, uint64_t size,
                        uint64_t chunk, uint32_t ch, uint64_t *got, struct recall *rec, bool *fdone,
                        struct rbuf *rb, bool last, bool *whole)
{
    struct core__tier *k = c->data->tier;
    uint64_t off = ch_start(chunk, ch), end = ch_start(chunk, ch + 1);
    size_t len = (size_t)((end < size ? end : size) - off);
    struct meta_txn *t;
    struct meta_inode r;
    bool have = false, want_meta = false;
    *got = 0;
    *whole = false;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc == 0 && !(r.flags & META_I_EVICTED))
        rc = 1;
    else if (rc == 0 && (r.change != change || r.nlink == 0))
        rc = SRV_ESTALE;
    else if (rc == 0)
        rc = core__tier_resident(t, ino, off, off + len, &have);
    else if (rc == -ENOENT)
        rc = SRV_ESTALE;
    if (rc == 0 && !have && k->cfg.fetch_meta && core__cm_is(c, r.bucket)) {
        /* a cache bucket's object whose metadata was never asked: this GET's answer
         * carries it (no HEAD of its own) */
        struct meta_tier_copy *cp = malloc(sizeof(*cp));
        char oetag[META_ETAG_MAX + 1];
        uint64_t ch2 = 0;
        want_meta =
            cp && core__cm_meta_due(t, ino, cp, oetag, sizeof(oetag), &ch2) && ch2 == change;
        free(cp);
    }
    meta_rtxn_end(t);
    if (rc || have)
        return rc; /* brought back before a crash or a restart */
    struct core__fext *x = calloc((len + STORE_EXTENT_MAX - 1) / STORE_EXTENT_MAX, sizeof(*x));
    char *buf = x ? rbuf_get(k, rb, len, chunk) : NULL;
    if (!buf) {
        free(x);
        return -ENOMEM;
    }
    size_t n = 0;
    struct core_fetch_meta fm = {0};
    if (want_meta)
        rc = k->cfg.fetch_meta(k->cfg.fetch_arg, ino, off, buf, len, &n, &fm);
    else
        rc = k->cfg.fetch(k->cfg.fetch_arg, ino, off, buf, len, &n);
    if (rc == 0 && n != len)
        rc = SRV_EREMOTECHG;
    fetched(k, rec);
    *fdone = true;
    /* the extents of the chunk, STORE_WBATCH_MAX of them in flight at once */
    size_t nx = 0;
    for (size_t pos = 0; rc == 0 && pos < len;) {
        struct store_wreq v[STORE_WBATCH_MAX];
        struct rc_batch b = {.x = &x[nx]};
        size_t nb = 0;
        for (; nb < STORE_WBATCH_MAX && pos < len; nb++) {
            uint32_t pl = len - pos < STORE_EXTENT_MAX ? (uint32_t)(len - pos) : STORE_EXTENT_MAX;
            struct core__fext *f = &x[nx];
            memset(f, 0, sizeof(*f));
            rc = store_alloc_near(c->store, nx ? &x[nx - 1].e : NULL, pl, &f->e);
            if (rc)
                break;
            nx++;
            core__cache_invalidate(c, &f->e);
            f->foff = off + pos;
            f->vlen = pl;
            b.src[nb] = buf + pos;
            v[nb] = (struct store_wreq){&f->e, buf + pos, pl};
            pos += pl;
        }
        /* O_DIRECT, whatever data_write_cache says: the chunk's readers take its bytes
         * from the memory table (mem_keep), so a copy into the page cache would cost CPU
         * (a copy, a mapping per extent, issue 12: 0.8 ms per MiB at 4 GiB) and memory
         * for nothing; later readers read and verify the extents from the disk */
        if (rc == 0)
            rc = store_write_batch_direct(c->store, v, nb, rc_crc_fn, &b);
        for (size_t i = 0; rc == 0 && i < nb; i++)
            core__zc_written(c, &b.x[i].e);
    }
    if (rc == 0)
        rc = store_sync(c->store);
    uint8_t used[RC_CHUNK_MAX / STORE_EXTENT_MAX];
    if (rc == 0) {
        struct install_op a = {.c = c,
                               .ino = ino,
                               .change = change,
                               .foff = off,
                               .x = x,
                               .n = nx,
                               .used = used,
                               .last = last,
                               .fm = rc == 0 && want_meta ? &fm : NULL};
        rc = meta_submit(c->meta, install_fn, &a, 0);
        *whole = rc == 0 && a.whole;
        if (rc == 0 || rc == 1) {
            for (size_t i = 0; i < nx; i++)
                if (rc == 1 || !used[i])
                    store_unreserve(c->store, &x[i].e);
            /* the table gets the chunk after its txn committed (only then is it known
             * which extents went into the map): a reader whose read view starts between
             * the commit (the batch may carry several chunks) and this finds the chunk
             * in the map but not in the table, and reads and verifies its extents from
             * the disk, written and synced before the commit: the right bytes, only
             * counted as read from the disk (readers that wait for the chunk are woken
             * after this, when it is CH_DONE) */
            if (rc == 0)
                mem_keep(k, rb, ino, x, nx, used, off);
            *got = rc == 1 ? 0 : a.nused;
            free(x);
            free(fm.blob);
            return rc;
        }
    }
    for (size_t i = 0; i < nx; i++)
        store_unreserve(c->store, &x[i].e);
    free(x);
    free(fm.blob);
    return rc;
}

static bool retryable(int rc)
{
    return rc == SRV_ERECALL || rc == -ENOMEM || rc == -ENOSPC || rc == -EAGAIN;
}

static void recall_free(struct core__tier *k, struct recall *r)
{
    /* mu held; only once nobody waits and no chunk is in flight */
    for (struct recall **pp = &k->head; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    free(r->st);
    free(r);
}

static void lat_note(struct core__tier *k, int64_t ns)
{
    double s = (double)ns / 1e9;
    size_t i = 0;
    while (i < RC_LAT_N && s > lat_bounds[i])
        i++;
    atomic_fetch_add(&k->lat[i], 1);
    atomic_fetch_add(&k->lat_sum_us, (uint64_t)(ns / 1000));
    atomic_fetch_add(&k->lat_n, 1);
}

/* ---- scheduling: which recall thread fetches what, and who is woken ---- */

/* Wake the readers waiting on @p r for chunk @p ch, or all of them (UINT32_MAX: the
 * recall failed, ended, or the daemon stops); k->mu held. */
static void wake_waiters(struct recall *r, uint32_t ch)
{
    for (struct rwaiter *w = r->wl; w; w = w->next)
        if (ch == UINT32_MAX || w->ch == ch)
            pthread_cond_signal(&w->cv);
}

/* Recall @p r ends with @p err (1: done or the file local; else terminal); k->mu held.
 * Its readers look again, and so do the prefetches waiting for fewer prefetches. */
static void recall_end(struct core__tier *k, struct recall *r, int err)
{
    r->err = err;
    wake_waiters(r, UINT32_MAX);
    if (r->bg)
        pthread_cond_broadcast(&k->bg_cv);
}

/* The chunk a recall thread should fetch now (k->mu held): of the recalls readers wait
 * for (or started) first, then of the prefetches nobody waits for (lower priority than
 * demand); a reader's wanted chunk first, else the file's first one to fetch. Drops the
 * recalls whose remote fails and that nobody asked for in fail_ms. @p next: when one
 * held back now (a retry, a paced recall) may go on (at most a second from @p now).
 * @return the recall, its chunk in @p ch; NULL: none. */
static struct recall *pick_chunk(struct core__tier *k, int64_t now, uint32_t *ch, int64_t *next)
{
    *next = now + 1000;
    if (k->fetching >= k->cfg.threads)
        return NULL; /* every GET slot busy: the end of a GET looks again (fetched) */
again:
    for (int pass = 0; pass < 2; pass++) {
        for (struct recall *r = k->head; r; r = r->next) {
            if (r->err || (r->bg && r->waiters == 0) != (pass == 1))
                continue;
            if (r->fails && now - r->touch_ms > (int64_t)k->cfg.fail_ms) {
                /* the remote fails and nobody asked for a while: drop it (the next read
                 * starts over) */
                recall_end(k, r, SRV_ERECALL);
                if (r->busy == 0 && r->waiters == 0) {
                    recall_free(k, r);
                    goto again; /* the list changed: look again */
                }
                continue;
            }
            if (r->retry_at_ms > now) {
                if (r->retry_at_ms < *next)
                    *next = r->retry_at_ms;
                continue;
            }
            if (r->fetching >= r->streams)
                continue; /* as many GETs in flight as it may have */
            if (r->want != UINT32_MAX && r->st[r->want] == CH_TODO) {
                *ch = r->want;
                return r;
            }
            const uint8_t *todo = memchr(r->st, CH_TODO, r->nch);
            if (!todo)
                continue;
            if (mem_pace(k, r, now)) {
                if (now + RM_PACE_MS < *next)
                    *next = now + RM_PACE_MS;
                continue; /* its reader has not taken the chunks in memory yet */
            }
            *ch = (uint32_t)(todo - r->st);
            return r;
        }
    }
    return NULL;
}

/* Chunk @p ch of @p r is being fetched from now on; k->mu held. */
static void claim(struct core__tier *k, struct recall *r, uint32_t ch)
{
    r->st[ch] = CH_BUSY;
    r->busy++;
    r->fetching++;
    k->fetching++;
}

/* Take recall thread @p w off the idle list (k->mu held). */
static void idle_unlink(struct core__tier *k, struct rworker *w)
{
    for (struct rworker **pp = &k->idle; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    w->idle = false;
}

/* Wake idle thread @p w (k->mu held): it runs @p r's chunk @p ch
 * (claimed), or with @p r NULL looks for work by itself. */
static void wake_worker(struct core__tier *k, struct rworker *w, struct recall *r, uint32_t ch)
{
    idle_unlink(k, w);
    w->job = r;
    w->ch = ch;
    pthread_cond_signal(&w->cv);
}

/* Hand each chunk that may be fetched now to an idle recall thread, one thread per
 * chunk (k->mu held). Called after every change that may make a chunk fetchable; a
 * thread ending a chunk takes its next one itself first. When none is fetchable but
 * one will be sooner than every idle thread looks by itself, one of them is woken to
 * set its timer by it. */
static void dispatch(struct core__tier *k)
{
    if (!k->idle || k->stop)
        return;
    int64_t now = srv_now_ms(), next;
    uint32_t ch;
    for (;;) {
        struct recall *r = pick_chunk(k, now, &ch, &next);
        if (!r)
            break;
        claim(k, r, ch);
        wake_worker(k, k->idle, r, ch);
        if (!k->idle)
            return;
    }
    for (struct rworker *w = k->idle; w; w = w->next)
        if (w->until_ms <= next)
            return;
    wake_worker(k, k->idle, NULL, 0);
}

/* Recall thread @p w has nothing to do: wait on the idle list until a chunk is handed
 * to it, @p until_ms, or the stop (k->mu held). */
static void worker_idle(struct core__tier *k, struct rworker *w, int64_t until_ms)
{
    w->job = NULL;
    w->idle = true;
    w->until_ms = until_ms;
    w->next = k->idle;
    k->idle = w;
    int e = 0;
    while (w->idle && !k->stop && e != ETIMEDOUT)
        e = cv_wait_until(&w->cv, &k->mu, until_ms);
    if (w->idle) { /* its timer, or the stop */
        idle_unlink(k, w);
    } else {
        atomic_fetch_add(&k->wakeups, 1);
        if (!w->job && !k->stop)
            atomic_fetch_add(&k->wakeups_futile, 1); /* to set its timer (dispatch) */
    }
}

static void *recall_main(void *arg)
{
    struct rworker *w = arg;
    struct core *c = w->c;
    struct core__tier *k = c->data->tier;
    struct rbuf rb = {0};
    bool pruned = false;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        /* a chunk handed to it (even at the stop: it was claimed), else one it finds */
        struct recall *pick = w->job;
        uint32_t ch = w->ch;
        w->job = NULL;
        if (!pick) {
            if (k->stop)
                break;
            int64_t now = srv_now_ms(), next;
            pick = pick_chunk(k, now, &ch, &next);
            if (!pick) {
                if (!k->head && !pruned) {
                    /* no recall left: its buffer to the pool, for the next recall, which
                     * gives it back with the pool (mem_prune) */
                    pthread_mutex_unlock(&k->mu);
                    pthread_mutex_lock(&k->mmu);
                    pool_put(k, &rb);
                    pthread_mutex_unlock(&k->mmu);
                    mem_prune(k, now - RM_KEEP_MS, false);
                    pthread_mutex_lock(&k->mu);
                    pruned = true;
                    continue; /* (a recall may have come meanwhile) */
                }
                worker_idle(k, w, next);
                pruned = false; /* (prunes again each time its timer wakes it) */
                continue;
            }
            claim(k, pick, ch);
            dispatch(k); /* more fetchable chunks: to the idle threads */
        }
        uint64_t ino = pick->ino, change = pick->change, size = pick->size, got = 0;
        uint64_t chunk = pick->chunk;
        /* every other chunk in already (a small file's only one): its txn makes the file
         * whole too (ndone only grows, so this holds at its end) */
        bool last = pick->ndone + 1 == pick->nch, whole = false;
        pthread_mutex_unlock(&k->mu);
        bool fdone = false;
        int rc =
            recall_chunk(c, ino, change, size, chunk, ch, &got, pick, &fdone, &rb, last, &whole);
        pthread_mutex_lock(&k->mu);
        if (!fdone) { /* it ended before a GET */
            pick->fetching--;
            k->fetching--;
        }
        if (rc == 0 && pick->ndone + 1 == pick->nch && !whole) {
            /* the last chunk: the file is made local before the chunk counts as done, so
             * a reader of the whole file never finds it all back but still evicted */
            pthread_mutex_unlock(&k->mu);
            struct whole_op wo = {c, ino, change};
            int wrc = meta_submit(c->meta, whole_fn, &wo, 0);
            pthread_mutex_lock(&k->mu);
            if (wrc && wrc != SRV_ESTALE)
                rc = wrc; /* retried like a failed chunk */
        }
        pick->busy--;
        atomic_fetch_add(&k->recalled_bytes, got);
        if (rc == 0 || rc == 1) {
            pick->st[ch] = CH_DONE;
            pick->ndone++;
            pick->fails = 0;
            pick->fail_since_ms = 0;
            if (rc == 1 || pick->ndone == pick->nch) {
                lat_note(k, mono_ns() - pick->start_ns);
                recall_end(k, pick, 1);
            } else if (!pick->whole_file && pick->busy == 0 && pick->waiters == 0 &&
                       !memchr(pick->st, CH_TODO, pick->nch)) {
                recall_end(k, pick, 1); /* all that was asked for is back: the rest stays
                                         * remote */
            } else {
                wake_waiters(pick, ch);
            }
        } else if (retryable(rc) && pick->bg && pick->waiters == 0) {
            pick->st[ch] = CH_TODO; /* a prefetch: not retried (the next listing may) */
            atomic_fetch_add(&k->recall_errors, 1);
            recall_end(k, pick, SRV_ERECALL);
        } else if (retryable(rc)) {
            pick->st[ch] = CH_TODO;
            int64_t now = srv_now_ms();
            if (!pick->fails++)
                pick->fail_since_ms = now;
            unsigned sh = pick->fails < 4 ? pick->fails : 4;
            pick->retry_at_ms = now + (100ll << sh);
            atomic_fetch_add(&k->recall_errors, 1);
            wake_waiters(pick, UINT32_MAX); /* the remote fails now: they answer it */
        } else {
            pick->st[ch] = CH_TODO;
            atomic_fetch_add(&k->recall_errors, 1);
            if (rc != SRV_ESTALE)
                srv_log(WARN, TIER, "recall of ino=%llu at %llu: %s", (unsigned long long)ino,
                        (unsigned long long)ch_start(chunk, ch), srv_strerror(rc));
            recall_end(k, pick, rc == SRV_ESTALE ? 1 : rc);
        }
        if (pick->err && pick->busy == 0 && pick->waiters == 0)
            recall_free(k, pick);
    }
    pthread_mutex_unlock(&k->mu);
    rbuf_drop(k, &rb);
    return NULL;
}

int core_tier_start(struct core *c, const struct core_tier_config *cfg)
{
    struct core__tier *k = c->data->tier;
    if (!cfg->fetch || k->threads)
        return -EINVAL;
    k->cfg = *cfg;
    if (!k->cfg.threads)
        k->cfg.threads = 4;
    if (!k->cfg.wait_ms)
        k->cfg.wait_ms = 10000;
    if (!k->cfg.fail_ms)
        k->cfg.fail_ms = 60000;
    if (!k->cfg.chunk)
        k->cfg.chunk = RC_CHUNK_DEF;
    if (k->cfg.chunk > RC_CHUNK_MAX)
        k->cfg.chunk = RC_CHUNK_MAX;
    k->cfg.chunk = (k->cfg.chunk + STORE_EXTENT_MAX - 1) / STORE_EXTENT_MAX * STORE_EXTENT_MAX;
    if (!k->cfg.streams || k->cfg.streams > k->cfg.threads)
        k->cfg.streams = k->cfg.threads;
    /* recalled chunks kept in memory for readers: twice as many as are fetched at once */
    k->mem_max = 2 * (size_t)k->cfg.threads *
                 (k->cfg.chunk > 2 * STORE_EXTENT_MAX ? k->cfg.chunk : 2 * STORE_EXTENT_MAX);
    /* twice as many threads as GETs in flight: while some write and commit the chunks
     * they fetched, others fetch the next ones */
    uint32_t nth = 2 * k->cfg.threads;
    struct rworker *ws = calloc(nth, sizeof(*ws));
    if (!ws)
        return -ENOMEM;
    pthread_mutex_lock(&k->mu);
    k->threads = ws;
    k->idle = NULL;
    k->stop = false;
    pthread_mutex_unlock(&k->mu);
    for (uint32_t i = 0; i < nth; i++) {
        ws[i].c = c;
        cv_init(&ws[i].cv);
        int e = pthread_create(&ws[i].th, NULL, recall_main, &ws[i]);
        if (e) {
            pthread_cond_destroy(&ws[i].cv);
            core_tier_stop(c);
            return -e;
        }
        k->nthreads++;
    }
    return 0;
}

void core_tier_stop(struct core *c)
{
    struct core__tier *k = c->data ? c->data->tier : NULL;
    if (!k || !k->threads)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    for (uint32_t i = 0; i < k->nthreads; i++)
        pthread_cond_signal(&k->threads[i].cv);
    for (struct recall *r = k->head; r; r = r->next)
        wake_waiters(r, UINT32_MAX);
    pthread_cond_broadcast(&k->bg_cv);
    pthread_mutex_unlock(&k->mu);
    for (uint32_t i = 0; i < k->nthreads; i++)
        pthread_join(k->threads[i].th, NULL);
    pthread_mutex_lock(&k->mu);
    struct rworker *ws = k->threads;
    uint32_t nth = k->nthreads;
    k->threads = NULL;
    k->idle = NULL;
    k->nthreads = 0;
    pthread_mutex_unlock(&k->mu);
    for (uint32_t i = 0; i < nth; i++)
        pthread_cond_destroy(&ws[i].cv);
    free(ws);
}

/* The recall settings of a new recall of file @p ino: its tier policy's (cfg.knobs),
 * where the policy leaves the chunk size or the streams (0) the daemon's
 * (core_tier_config); a file's streams are at most the threads (GET slots). */
static void recall_params(const struct core__tier *k, uint64_t ino, struct core_recall_knobs *kn)
{
    *kn = (struct core_recall_knobs){.whole_file = true};
    if (k->cfg.knobs && k->cfg.knobs(k->cfg.knobs_arg, ino, kn) != 0)
        *kn = (struct core_recall_knobs){.whole_file = true};
    if (!kn->chunk)
        kn->chunk = (uint32_t)k->cfg.chunk;
    if (!kn->streams || kn->streams > k->cfg.streams)
        kn->streams = k->cfg.streams;
}

/* The file's recall a read may join (k->mu held): not a failed one, nor one that
 * ended for an older content or brought back only a part (whole_file off). */
static struct recall *joinable(struct core__tier *k, uint64_t ino, const struct meta_inode *ri)
{
    struct recall *r = k->head;
    while (r && (r->ino != ino || (r->err && r->err != 1) ||
                 (r->err == 1 && (r->change != ri->change || !r->whole_file))))
        r = r->next;
    return r;
}

/* A new recall of file @p ri with settings @p kn, at the head of the list (k->mu held).
 * @return it, or NULL (no memory). */
static struct recall *recall_new(struct core__tier *k, uint64_t ino, const struct meta_inode *ri,
                                 const struct core_recall_knobs *kn)
{
    uint64_t chunk = kn->chunk;
    uint32_t streams = kn->streams;
    if (chunk < STORE_EXTENT_MAX || chunk > RC_CHUNK_MAX || chunk % STORE_EXTENT_MAX)
        chunk = RC_CHUNK_DEF; /* what recall_chunk can hold */
    if (streams == 0)
        streams = 1;
    struct recall *r = calloc(1, sizeof(*r));
    uint32_t nch = ri->size ? ch_of(chunk, ri->size - 1) + 1 : 0;
    if (r)
        r->st = calloc(nch ? nch : 1, 1);
    if (!r || !r->st) {
        free(r);
        return NULL;
    }
    if (!kn->whole_file)
        memset(r->st, CH_IDLE, nch ? nch : 1); /* only what reads ask for */
    r->ino = ino;
    r->size = ri->size;
    r->change = ri->change;
    r->nch = nch;
    r->chunk = chunk;
    r->streams = streams;
    r->read_ahead = kn->read_ahead;
    r->whole_file = kn->whole_file;
    r->want = UINT32_MAX;
    r->start_ns = mono_ns();
    r->touch_ms = srv_now_ms();
    r->next = k->head;
    k->head = r;
    atomic_fetch_add(&k->recalls, 1);
    return r;
}

/* Waits on @p cv (k->mu held) for at most @p left_ms, and never more than 200 ms, so
 * that a waiter re-checks its deadline and the stop flag. @return 0 or ETIMEDOUT. */
static int wait_done(struct core__tier *k, pthread_cond_t *cv, int64_t left_ms)
{
    return cv_wait_until(cv, &k->mu, srv_now_ms() + (left_ms < 200 ? left_ms : 200));
}

int core__tier_wait(struct core *c, uint64_t ino, const struct meta_inode *ri, uint64_t lo,
                    uint64_t hi, bool nowait)
{
    struct core__tier *k = c->data->tier;
    if (hi > ri->size)
        hi = ri->size;
    if (hi <= lo)
        hi = lo + 1;
    pthread_mutex_lock(&k->mu);
    if (!k->threads || k->stop) {
        pthread_mutex_unlock(&k->mu);
        return SRV_ERECALL; /* no recall running (starting or stopping) */
    }
    /* join the file's recall; a failed one (or one that ended for an older content) is
     * not joined: a new one starts (the old one goes once nobody uses it) */
    struct recall *r = joinable(k, ino, ri);
    if (!r) {
        /* a new recall: its tier policy's settings come from the metadata, not read
         * under k->mu; another read may start the file's recall meanwhile */
        pthread_mutex_unlock(&k->mu);
        struct core_recall_knobs kn;
        recall_params(k, ino, &kn);
        pthread_mutex_lock(&k->mu);
        if (!k->threads || k->stop) {
            pthread_mutex_unlock(&k->mu);
            return SRV_ERECALL;
        }
        r = joinable(k, ino, ri);
        if (!r)
            r = recall_new(k, ino, ri, &kn);
        if (!r) {
            pthread_mutex_unlock(&k->mu);
            return -ENOMEM;
        }
    }
    r->touch_ms = srv_now_ms(); /* (before a scan: asked for now, not dropped) */
    uint32_t c0 = ch_of(r->chunk, lo), c1 = ch_of(r->chunk, hi - 1);
    /* more: chunks this read made fetchable */
    bool more = false;
    if (!r->whole_file) { /* the range read and read_ahead bytes after it */
        uint64_t rend = hi - 1 + (uint64_t)r->read_ahead;
        uint32_t ra = ch_of(r->chunk, rend < r->size ? rend : r->size - 1);
        for (uint32_t i = c0; i <= ra && i < r->nch; i++) {
            if (r->st[i] == CH_IDLE) {
                r->st[i] = CH_TODO;
                more = true;
            }
        }
    }
    int64_t deadline = srv_now_ms() + k->cfg.wait_ms;
    int rc;
    /* its own condition, on the recall's list: only the chunk it waits for, the recall's
     * failure or end, or the stop wake it */
    struct rwaiter w = {.ch = UINT32_MAX};
    cv_init(&w.cv);
    w.next = r->wl;
    r->wl = &w;
    r->waiters++;
    if (more)
        dispatch(k); /* (its read-ahead: the loop below hands out what it waits for) */
    for (;;) {
        if (r->err) {
            rc = r->err == 1 ? 0 : r->err;
            break;
        }
        uint32_t todo = UINT32_MAX;
        for (uint32_t i = c0; i <= c1 && i < r->nch; i++)
            if (r->st[i] != CH_DONE) {
                todo = i;
                break;
            }
        if (todo == UINT32_MAX) {
            rc = 0;
            break;
        }
        if (r->st[todo] == CH_TODO && r->want != todo) {
            r->want = todo; /* fetched first, even past a reader's pacing */
            dispatch(k);
        }
        if (nowait) {
            rc = -EWOULDBLOCK;
            break;
        }
        int64_t now = srv_now_ms();
        r->touch_ms = now;
        if (r->fails) {
            /* the remote fails now: the client retries later, until it has failed for
             * fail_ms; then reads fail (an NFS client would retry JUKEBOX forever) */
            rc = now - r->fail_since_ms >= (int64_t)k->cfg.fail_ms ? -EIO : SRV_ERECALL;
            break;
        }
        if (now >= deadline || k->stop) {
            rc = SRV_ERECALL;
            break;
        }
        w.ch = todo;
        if (wait_done(k, &w.cv, deadline - now) != ETIMEDOUT) {
            atomic_fetch_add(&k->wakeups, 1);
            if (r->st[todo] != CH_DONE && !r->err && !r->fails && !k->stop)
                atomic_fetch_add(&k->wakeups_futile, 1); /* not for it */
        }
    }
    for (struct rwaiter **pp = &r->wl; *pp; pp = &(*pp)->next) {
        if (*pp == &w) {
            *pp = w.next;
            break;
        }
    }
    pthread_cond_destroy(&w.cv);
    r->waiters--;
    if (!r->err && !r->whole_file && r->waiters == 0 && r->busy == 0 &&
        !memchr(r->st, CH_TODO, r->nch))
        recall_end(k, r, 1); /* a partial recall nobody waits for: done */
    if (r->err && r->waiters == 0 && r->busy == 0)
        recall_free(k, r);
    pthread_mutex_unlock(&k->mu);
    if (rc == SRV_EREMOTECHG && core__cm_stale(c, ri->bucket, ri->parent))
        rc = SRV_ERECALL; /* a cache bucket: the remote changed it; the client's retry finds
                           * the new object once its directory is revalidated */
    return rc;
}

int core__tier_prefetch(struct core *c, uint64_t ino, const struct meta_inode *ri, uint32_t wait_ms)
{
    struct core__tier *k = c->data->tier;
    int64_t deadline = srv_now_ms() + wait_ms;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        if (!k->threads || k->stop) {
            pthread_mutex_unlock(&k->mu);
            return SRV_ERECALL;
        }
        if (joinable(k, ino, ri)) {
            pthread_mutex_unlock(&k->mu);
            return 0; /* on its way already (or just back) */
        }
        uint32_t n = 0;
        for (struct recall *r = k->head; r; r = r->next)
            n += r->bg && !r->err;
        int64_t now = srv_now_ms();
        if (n < k->cfg.threads)
            break;
        if (now >= deadline) {
            pthread_mutex_unlock(&k->mu);
            return -EBUSY;
        }
        wait_done(k, &k->bg_cv, deadline - now);
    }
    pthread_mutex_unlock(&k->mu);
    struct core_recall_knobs kn;
    recall_params(k, ino, &kn);
    kn.whole_file = true; /* a prefetch brings the whole (small) file */
    pthread_mutex_lock(&k->mu);
    int rc = 1;
    if (!k->threads || k->stop) {
        rc = SRV_ERECALL;
    } else if (!joinable(k, ino, ri)) {
        struct recall *r = recall_new(k, ino, ri, &kn);
        if (r) {
            r->bg = true;
            dispatch(k);
        } else {
            rc = -ENOMEM;
        }
    } else {
        rc = 0;
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

int core__tier_local(struct core *c, const struct core_principal *p, uint64_t ino)
{
    for (int tries = 0; tries < 1000; tries++) {
        struct meta_txn *t;
        struct meta_inode r;
        int rc = meta_rtxn_begin(c->meta, &t);
        if (rc)
            return rc;
        rc = meta_inode_get(t, ino, &r);
        meta_rtxn_end(t);
        if (rc == -ENOENT)
            return 0; /* the op itself answers */
        if (rc || r.type != CORE_REG || !(r.flags & META_I_EVICTED))
            return rc;
        rc = core__tier_wait(c, ino, &r, 0, r.size ? r.size : 1, (p->flags & CORE_P_NOWAIT) != 0);
        if (rc)
            return rc;
    }
    return SRV_ERECALL;
}

uint32_t core__tier_fail_ms(struct core *c)
{
    struct core__tier *k = c->data->tier;
    pthread_mutex_lock(&k->mu);
    uint32_t ms = k->cfg.fail_ms ? k->cfg.fail_ms : 60000; /* core_tier_start's default */
    pthread_mutex_unlock(&k->mu);
    return ms;
}

bool core__tier_gives_meta(struct core *c)
{
    struct core__tier *k = c->data->tier;
    pthread_mutex_lock(&k->mu);
    bool yes = k->threads && !k->stop && k->cfg.fetch_meta;
    pthread_mutex_unlock(&k->mu);
    return yes;
}

void core_tier_stats_get(struct core *c, struct core_tier_stats *out)
{
    struct core__tier *k = c->data->tier;
    memset(out, 0, sizeof(*out));
    out->recalled_bytes = atomic_load(&k->recalled_bytes);
    out->mem_read_bytes = atomic_load(&k->mem_sent);
    out->buf_maps = atomic_load(&k->maps);
    out->buf_reuses = atomic_load(&k->reuses);
    out->buf_live = atomic_load(&k->live);
    out->buf_live_bytes = atomic_load(&k->live_bytes);
    out->recalls = atomic_load(&k->recalls);
    out->recall_errors = atomic_load(&k->recall_errors);
    out->evictions = atomic_load(&k->evictions);
    out->evicted_bytes = atomic_load(&k->evicted_bytes);
    for (size_t i = 0; i < RC_LAT_N; i++) {
        out->lat_bounds[i] = lat_bounds[i];
        out->lat_counts[i] = atomic_load(&k->lat[i]);
    }
    out->lat_counts[RC_LAT_N] = atomic_load(&k->lat[RC_LAT_N]);
    out->lat_sum_s = (double)atomic_load(&k->lat_sum_us) / 1e6;
    out->lat_n = atomic_load(&k->lat_n);
    out->wakeups = atomic_load(&k->wakeups);
    out->wakeups_futile = atomic_load(&k->wakeups_futile);
    pthread_mutex_lock(&k->mu);
    for (struct recall *r = k->head; r; r = r->next)
        out->active += r->err == 0;
    pthread_mutex_unlock(&k->mu);
}
