/* SPDX-License-Identifier: Apache-2.0
 * srv_metrics: per-(protocol, operation, tenant) and per-(protocol, operation,
 * tenant, bucket) counters and latency histograms, rendered in Prometheus text
 * exposition format 0.0.4.
 *
 * Series live in fixed open-addressing tables of atomic pointers. Recording
 * finds (or inserts, with one compare-and-swap) its series and bumps atomic
 * counters: no lock on the hot path. Each series keeps METRICS_SHARDS copies
 * of its counters, each on cache lines of its own, and a recorder bumps the
 * copy of the CPU it runs on (rendering sums them): loop threads on two CPUs
 * recording the same (protocol, operation, tenant) for every request would
 * otherwise pass the counters' cache lines back and forth, eight atomic adds
 * a request. A thread that moves between CPUs meanwhile only shares a copy,
 * as the adds stay atomic. Series are never removed. An operation
 * on a bucket is recorded twice: in the tenant table and in the bucket table.
 *
 * Bounds. Tenant table: METRICS_SLOTS series; when full, new label sets fold
 * into one overflow series per protocol (op="other", tenant="0"). Bucket
 * table: at most METRICS_BUCKETS_MAX distinct (tenant, bucket) pairs get
 * series of their own, in the order first seen; operations on any later
 * bucket fold into bucket="_other" of their (protocol, operation, tenant)
 * (S3 bucket names never start with '_'). When the bucket table's
 * METRICS_BSLOTS series are used up, new label sets fold into one overflow
 * series per protocol (op="other", tenant="0", bucket="_other").
 * s3nfs_metrics_series_overflow_total (tenant table) and
 * s3nfs_metrics_bucket_series_overflow_total (bucket table) count the
 * operations folded because a table was full, and
 * s3nfs_metrics_bucket_overflow_total those folded past the bucket cap.
 *
 * Families: s3nfs_ops_total, s3nfs_op_errors_total, s3nfs_bytes_in_total,
 * s3nfs_bytes_out_total (counters) and s3nfs_op_latency_seconds (histogram),
 * each labelled {proto, op, tenant}; the same with the prefix s3nfs_bucket_
 * (s3nfs_bucket_ops_total, ..., s3nfs_bucket_op_latency_seconds) labelled
 * {proto, op, tenant, bucket}. The recorder knows a bucket by its inode; its
 * name comes from the namer at render time, and series of buckets the namer
 * does not name (deleted ones) are left out. Render callbacks append extra
 * families.
 * Thread: any. */
#include "srv_metrics.h"

#include <event2/buffer.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#define METRICS_SLOTS 4096    /* tenant series (power of two) */
#define METRICS_BSLOTS 16384  /* bucket series (power of two) */
#define METRICS_BUCKETS_MAX 1024
#define METRICS_BIDS 2048     /* (tenant, bucket) identities: twice the cap (power of two) */
#define METRICS_OP_MAX 47
#define METRICS_RENDERERS_MAX 32
#define BUCKET_OTHER UINT64_MAX
#define METRICS_SHARDS 4 /* counter copies per series (power of two) */

/* Upper bounds in microseconds; the last bucket is +Inf. */
static const uint64_t bucket_us[] = {
    100,    250,    500,     1000,    2500,    5000,     10000,   25000,
    50000,  100000, 250000,  500000,  1000000, 2500000,  5000000, 10000000,
};
#define NBUCKETS (sizeof(bucket_us) / sizeof(bucket_us[0]))

/* One copy of a series' counters (struct series, METRICS_SHARDS). */
struct series_ctr {
    _Alignas(64) atomic_uint_fast64_t ops;
    atomic_uint_fast64_t errors, bytes_in, bytes_out, lat_sum_us;
    atomic_uint_fast64_t buckets[NBUCKETS + 1];
};

struct series {
    enum srv_proto proto;
    uint32_t tenant;
    uint64_t bucket; /* bucket table only; BUCKET_OTHER = "_other" */
    char op[METRICS_OP_MAX + 1];
    struct series_ctr c[METRICS_SHARDS];
};

struct table {
    _Atomic(struct series *) *slots;
    uint32_t nslots;
    bool per_bucket;
    _Atomic(struct series *) overflow[3];
    atomic_uint_fast64_t overflowed;
};

static _Atomic(struct series *) tslots[METRICS_SLOTS];
static _Atomic(struct series *) bslots[METRICS_BSLOTS];
static struct table ttab = {.slots = tslots, .nslots = METRICS_SLOTS, .per_bucket = false};
static struct table btab = {.slots = bslots, .nslots = METRICS_BSLOTS, .per_bucket = true};

struct bid {
    uint32_t tenant;
    uint64_t bucket;
};
static _Atomic(struct bid *) bids[METRICS_BIDS];
static atomic_uint nbids;
static atomic_uint_fast64_t bucket_folded;

static pthread_mutex_t renderers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    srv_metrics_render_cb cb;
    void *arg;
} renderers[METRICS_RENDERERS_MAX];
static int nrenderers;
static srv_metrics_namer_cb namer;
static void *namer_arg;

uint64_t srv_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t fnv_u64(uint32_t h, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        h = (h ^ (uint32_t)((v >> (8 * i)) & 0xff)) * 16777619u;
    return h;
}

static uint32_t hash_key(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bucket)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = op; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ (uint32_t)proto) * 16777619u;
    h = fnv_u64(h, tenant, 4);
    return bucket ? fnv_u64(h, bucket, 8) : h;
}

static bool series_is(const struct series *s, enum srv_proto proto, const char *op,
                      uint32_t tenant, uint64_t bucket)
{
    return s->proto == proto && s->tenant == tenant && s->bucket == bucket &&
           strncmp(s->op, op, METRICS_OP_MAX) == 0;
}

static struct series *series_new(enum srv_proto proto, const char *op, uint32_t tenant,
                                 uint64_t bucket)
{
    struct series *s = aligned_alloc(_Alignof(struct series), sizeof(*s));
    if (!s)
        return NULL;
    memset(s, 0, sizeof(*s));
    s->proto = proto;
    s->tenant = tenant;
    s->bucket = bucket;
    snprintf(s->op, sizeof(s->op), "%s", op);
    return s;
}

static struct series *overflow_series(struct table *tb, enum srv_proto proto)
{
    unsigned i = (unsigned)proto < 3 ? (unsigned)proto : 0;
    struct series *s = atomic_load(&tb->overflow[i]);
    if (s)
        return s;
    struct series *n = series_new(proto, "other", 0, tb->per_bucket ? BUCKET_OTHER : 0);
    if (!n)
        return NULL;
    if (!atomic_compare_exchange_strong(&tb->overflow[i], &s, n)) {
        free(n);
        return s;
    }
    return n;
}

/* The series of a label set; inserted when missing if @p insert (else NULL). */
static struct series *series_find(struct table *tb, enum srv_proto proto, const char *op,
                                  uint32_t tenant, uint64_t bucket, bool insert)
{
    uint32_t h = hash_key(proto, op, tenant, bucket);
    struct series *fresh = NULL;

    for (uint32_t probe = 0; probe < tb->nslots; probe++) {
        _Atomic(struct series *) *slot = &tb->slots[(h + probe) & (tb->nslots - 1)];
        struct series *s = atomic_load_explicit(slot, memory_order_acquire);
        if (s) {
            if (series_is(s, proto, op, tenant, bucket)) {
                free(fresh);
                return s;
            }
            continue;
        }
        if (!insert)
            return NULL;
        if (!fresh) {
            fresh = series_new(proto, op, tenant, bucket);
            if (!fresh)
                return overflow_series(tb, proto);
        }
        struct series *expected = NULL;
        if (atomic_compare_exchange_strong(slot, &expected, fresh))
            return fresh;
        if (series_is(expected, proto, op, tenant, bucket)) {
            free(fresh);
            return expected;
        }
    }
    free(fresh);
    if (!insert)
        return NULL;
    atomic_fetch_add(&tb->overflowed, 1);
    return overflow_series(tb, proto);
}

/* Whether (tenant, bucket) has series of its own: seen before, or admitted
 * now under the cap. Identities are never removed. */
static bool bucket_admit(uint32_t tenant, uint64_t bucket)
{
    uint32_t h = fnv_u64(fnv_u64(2166136261u, tenant, 4), bucket, 8);
    struct bid *fresh = NULL;
    bool counted = false, ok = false;

    for (uint32_t probe = 0; probe < METRICS_BIDS; probe++) {
        _Atomic(struct bid *) *slot = &bids[(h + probe) & (METRICS_BIDS - 1)];
        struct bid *b = atomic_load_explicit(slot, memory_order_acquire);
        if (b) {
            if (b->tenant == tenant && b->bucket == bucket) {
                ok = true;
                break;
            }
            continue;
        }
        if (!fresh) {
            counted = true;
            if (atomic_fetch_add(&nbids, 1) >= METRICS_BUCKETS_MAX)
                break; /* past the cap */
            fresh = malloc(sizeof(*fresh));
            if (!fresh)
                break;
            fresh->tenant = tenant;
            fresh->bucket = bucket;
        }
        struct bid *expected = NULL;
        if (atomic_compare_exchange_strong(slot, &expected, fresh))
            return true;
        if (expected->tenant == tenant && expected->bucket == bucket) {
            ok = true; /* another thread admitted it first */
            break;
        }
    }
    free(fresh);
    if (counted)
        atomic_fetch_sub(&nbids, 1);
    return ok;
}

/* The counter copy this thread bumps: its CPU's (glibc reads the CPU from
 * the thread's rseq area, no system call); copy 0 when the CPU is unknown. */
static unsigned shard_of(void)
{
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : (unsigned)cpu & (METRICS_SHARDS - 1);
}

static void series_add(struct series *s, uint64_t bytes_in, uint64_t bytes_out, uint64_t latency_us,
                       int err, unsigned shard)
{
    if (!s)
        return;
    struct series_ctr *c = &s->c[shard];
    atomic_fetch_add_explicit(&c->ops, 1, memory_order_relaxed);
    if (err)
        atomic_fetch_add_explicit(&c->errors, 1, memory_order_relaxed);
    if (bytes_in)
        atomic_fetch_add_explicit(&c->bytes_in, bytes_in, memory_order_relaxed);
    if (bytes_out)
        atomic_fetch_add_explicit(&c->bytes_out, bytes_out, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->lat_sum_us, latency_us, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && latency_us > bucket_us[b])
        b++;
    atomic_fetch_add_explicit(&c->buckets[b], 1, memory_order_relaxed);
}

/* The sum of one counter over a series' copies (@p offset: its field in
 * struct series_ctr). */
static uint64_t series_sum(const struct series *s, size_t offset)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < METRICS_SHARDS; i++)
        v += atomic_load_explicit((const atomic_uint_fast64_t *)((const char *)&s->c[i] + offset),
                                  memory_order_relaxed);
    return v;
}

void srv_metrics_op_bucket(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bucket,
                           uint64_t bytes_in, uint64_t bytes_out, uint64_t latency_us, int err)
{
    if (!op)
        op = "unknown";
    unsigned shard = shard_of();
    series_add(series_find(&ttab, proto, op, tenant, 0, true), bytes_in, bytes_out, latency_us, err,
               shard);
    if (!bucket)
        return;
    if (bucket == BUCKET_OTHER)
        bucket--; /* not an inode the core hands out; keeps "_other" unambiguous */
    struct series *s = series_find(&btab, proto, op, tenant, bucket, false);
    if (!s) {
        if (!bucket_admit(tenant, bucket)) {
            atomic_fetch_add(&bucket_folded, 1);
            bucket = BUCKET_OTHER;
        }
        s = series_find(&btab, proto, op, tenant, bucket, true);
    }
    series_add(s, bytes_in, bytes_out, latency_us, err, shard);
}

void srv_metrics_op(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bytes_in,
                    uint64_t bytes_out, uint64_t latency_us, int err)
{
    srv_metrics_op_bucket(proto, op, tenant, 0, bytes_in, bytes_out, latency_us, err);
}

void srv_metrics_add_renderer(srv_metrics_render_cb cb, void *arg)
{
    pthread_mutex_lock(&renderers_lock);
    if (nrenderers < METRICS_RENDERERS_MAX) {
        renderers[nrenderers].cb = cb;
        renderers[nrenderers].arg = arg;
        nrenderers++;
    }
    pthread_mutex_unlock(&renderers_lock);
}

void srv_metrics_remove_renderer(srv_metrics_render_cb cb, void *arg)
{
    pthread_mutex_lock(&renderers_lock);
    for (int i = 0; i < nrenderers; i++) {
        if (renderers[i].cb == cb && renderers[i].arg == arg) {
            memmove(&renderers[i], &renderers[i + 1],
                    (size_t)(nrenderers - i - 1) * sizeof(renderers[0]));
            nrenderers--;
            break;
        }
    }
    pthread_mutex_unlock(&renderers_lock);
}

void srv_metrics_set_bucket_namer(srv_metrics_namer_cb cb, void *arg)
{
    pthread_mutex_lock(&renderers_lock);
    namer = cb;
    namer_arg = arg;
    pthread_mutex_unlock(&renderers_lock);
}

void srv_metrics_clear_bucket_namer(srv_metrics_namer_cb cb, void *arg)
{
    pthread_mutex_lock(&renderers_lock);
    if (namer == cb && namer_arg == arg) {
        namer = NULL;
        namer_arg = NULL;
    }
    pthread_mutex_unlock(&renderers_lock);
}

/* ---- rendering ---- */

/* Bucket names of one render, sorted by (tenant, bucket). */
struct bname {
    uint32_t tenant;
    uint64_t bucket;
    char name[SRV_METRICS_BUCKET_NAME_MAX + 1];
};
struct names {
    struct bname *v;
    size_t n, cap;
};

static void names_add(void *ctx, uint32_t tenant, uint64_t bucket, const char *name)
{
    struct names *nm = ctx;
    size_t len = name ? strlen(name) : 0;
    if (!len || len > SRV_METRICS_BUCKET_NAME_MAX || !bucket)
        return;
    if (nm->n == nm->cap) {
        size_t nc = nm->cap ? 2 * nm->cap : 64;
        struct bname *nv = realloc(nm->v, nc * sizeof(*nv));
        if (!nv)
            return;
        nm->v = nv;
        nm->cap = nc;
    }
    struct bname *b = &nm->v[nm->n++];
    b->tenant = tenant;
    b->bucket = bucket;
    memcpy(b->name, name, len + 1);
}

static int bname_cmp(const void *a, const void *b)
{
    const struct bname *x = a, *y = b;
    if (x->tenant != y->tenant)
        return x->tenant < y->tenant ? -1 : 1;
    if (x->bucket != y->bucket)
        return x->bucket < y->bucket ? -1 : 1;
    return 0;
}

static const char *names_get(const struct names *nm, uint32_t tenant, uint64_t bucket)
{
    if (bucket == BUCKET_OTHER)
        return "_other";
    struct bname key = {.tenant = tenant, .bucket = bucket};
    const struct bname *b = nm->n ? bsearch(&key, nm->v, nm->n, sizeof(key), bname_cmp) : NULL;
    return b ? b->name : NULL;
}

static const char *proto_name(enum srv_proto p)
{
    switch (p) {
    case SRV_PROTO_S3:
        return "s3";
    case SRV_PROTO_NFS:
        return "nfs";
    case SRV_PROTO_ADMIN:
        return "admin";
    }
    return "unknown";
}

/* A label value escaped as the exposition format asks (\\, \", \n). */
static void escape(char *esc, size_t size, const char *v)
{
    size_t j = 0;
    for (const char *p = v; *p && j + 3 < size; p++) {
        if (*p == '\\' || *p == '"') {
            esc[j++] = '\\';
            esc[j++] = *p;
        } else if (*p == '\n') {
            esc[j++] = '\\';
            esc[j++] = 'n';
        } else {
            esc[j++] = *p;
        }
    }
    esc[j] = '\0';
}

static void labels(struct evbuffer *out, const struct series *s, const char *bucket)
{
    char op[2 * METRICS_OP_MAX + 3];
    escape(op, sizeof(op), s->op);
    evbuffer_add_printf(out, "proto=\"%s\",op=\"%s\",tenant=\"%u\"", proto_name(s->proto), op,
                        s->tenant);
    if (bucket) {
        char b[2 * SRV_METRICS_BUCKET_NAME_MAX + 3];
        escape(b, sizeof(b), bucket);
        evbuffer_add_printf(out, ",bucket=\"%s\"", b);
    }
}

struct render_ctx {
    const char *name; /* family (sample) name */
    size_t offset;    /* counter: its field */
    const struct names *names;
};

typedef void (*series_fn)(struct evbuffer *out, const struct series *s, const char *bucket,
                          const struct render_ctx *ctx);

static void each_series(struct table *tb, struct evbuffer *out, series_fn fn,
                        const struct render_ctx *ctx)
{
    for (size_t i = 0; i < tb->nslots + 3; i++) {
        struct series *s = atomic_load_explicit(i < tb->nslots ? &tb->slots[i]
                                                                : &tb->overflow[i - tb->nslots],
                                                memory_order_acquire);
        if (!s)
            continue;
        const char *bucket = NULL;
        if (tb->per_bucket && !(bucket = names_get(ctx->names, s->tenant, s->bucket)))
            continue; /* a bucket nobody names (deleted): left out */
        fn(out, s, bucket, ctx);
    }
}

static void render_counter(struct evbuffer *out, const struct series *s, const char *bucket,
                           const struct render_ctx *c)
{
    evbuffer_add_printf(out, "%s{", c->name);
    labels(out, s, bucket);
    evbuffer_add_printf(out, "} %llu\n", (unsigned long long)series_sum(s, c->offset));
}

static void render_histogram(struct evbuffer *out, const struct series *s, const char *bucket,
                             const struct render_ctx *c)
{
    uint64_t cum = 0;
    for (size_t b = 0; b <= NBUCKETS; b++) {
        cum += series_sum(s, offsetof(struct series_ctr, buckets) + b * sizeof(s->c[0].buckets[0]));
        evbuffer_add_printf(out, "%s_bucket{", c->name);
        labels(out, s, bucket);
        if (b < NBUCKETS)
            evbuffer_add_printf(out, ",le=\"%g\"} %llu\n", (double)bucket_us[b] / 1e6,
                                (unsigned long long)cum);
        else
            evbuffer_add_printf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    evbuffer_add_printf(out, "%s_sum{", c->name);
    labels(out, s, bucket);
    evbuffer_add_printf(out, "} %.6f\n",
                        (double)series_sum(s, offsetof(struct series_ctr, lat_sum_us)) / 1e6);
    evbuffer_add_printf(out, "%s_count{", c->name);
    labels(out, s, bucket);
    evbuffer_add_printf(out, "} %llu\n", (unsigned long long)cum);
}

/* The counter and histogram families of one table; @p prefix goes after "s3nfs_". */
static void render_table(struct table *tb, struct evbuffer *out, const char *prefix,
                         const char *what, const struct names *nm)
{
    static const struct {
        const char *name;
        size_t offset;
        const char *help;
    } counters[] = {
        {"ops_total", offsetof(struct series_ctr, ops), "Operations finished"},
        {"op_errors_total", offsetof(struct series_ctr, errors),
         "Operations that finished with an error"},
        {"bytes_in_total", offsetof(struct series_ctr, bytes_in), "Payload bytes received"},
        {"bytes_out_total", offsetof(struct series_ctr, bytes_out), "Payload bytes sent"},
    };
    char name[64];

    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        snprintf(name, sizeof(name), "s3nfs_%s%s", prefix, counters[i].name);
        evbuffer_add_printf(out, "# HELP %s %s, %s.\n# TYPE %s counter\n", name,
                            counters[i].help, what, name);
        struct render_ctx c = {name, counters[i].offset, nm};
        each_series(tb, out, render_counter, &c);
    }
    snprintf(name, sizeof(name), "s3nfs_%sop_latency_seconds", prefix);
    evbuffer_add_printf(out, "# HELP %s Operation latency, %s.\n# TYPE %s histogram\n", name,
                        what, name);
    struct render_ctx c = {name, 0, nm};
    each_series(tb, out, render_histogram, &c);
}

void srv_metrics_render(struct evbuffer *out)
{
    struct names nm = {0};

    pthread_mutex_lock(&renderers_lock);
    if (namer)
        namer(namer_arg, names_add, &nm);
    pthread_mutex_unlock(&renderers_lock);
    if (nm.n)
        qsort(nm.v, nm.n, sizeof(nm.v[0]), bname_cmp);

    render_table(&ttab, out, "", "per protocol, operation and tenant", &nm);
    render_table(&btab, out, "bucket_", "per protocol, operation, tenant and bucket", &nm);
    free(nm.v);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_metrics_series_overflow_total Operations recorded in an "
                        "overflow series because the series table was full.\n"
                        "# TYPE s3nfs_metrics_series_overflow_total counter\n"
                        "s3nfs_metrics_series_overflow_total %llu\n"
                        "# HELP s3nfs_metrics_bucket_series_overflow_total Operations recorded "
                        "in an overflow series because the bucket series table was full.\n"
                        "# TYPE s3nfs_metrics_bucket_series_overflow_total counter\n"
                        "s3nfs_metrics_bucket_series_overflow_total %llu\n"
                        "# HELP s3nfs_metrics_bucket_overflow_total Operations recorded under "
                        "bucket=\"_other\" because %d buckets already had series.\n"
                        "# TYPE s3nfs_metrics_bucket_overflow_total counter\n"
                        "s3nfs_metrics_bucket_overflow_total %llu\n",
                        (unsigned long long)atomic_load(&ttab.overflowed),
                        (unsigned long long)atomic_load(&btab.overflowed), METRICS_BUCKETS_MAX,
                        (unsigned long long)atomic_load(&bucket_folded));

    pthread_mutex_lock(&renderers_lock);
    for (int i = 0; i < nrenderers; i++)
        renderers[i].cb(renderers[i].arg, out);
    pthread_mutex_unlock(&renderers_lock);
}
