/* SPDX-License-Identifier: Apache-2.0
 * srv_metrics: per-(protocol, operation, tenant) counters and latency
 * histograms, rendered in Prometheus text exposition format 0.0.4.
 *
 * Series live in a fixed open-addressing table of atomic pointers. Recording
 * finds (or inserts, with one compare-and-swap) its series and bumps atomic
 * counters: no lock on the hot path. Series are never removed. When the table
 * is full, new label sets fold into one overflow series per protocol
 * (op="other", tenant="0") and a counter says how often that happened.
 *
 * Families: s3nfs_ops_total, s3nfs_op_errors_total, s3nfs_bytes_in_total,
 * s3nfs_bytes_out_total (counters) and s3nfs_op_latency_seconds (histogram),
 * each labelled {proto, op, tenant}. Render callbacks append extra families.
 * Thread: any. */
#include "srv_metrics.h"

#include <event2/buffer.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define METRICS_SLOTS 4096 /* power of two */
#define METRICS_OP_MAX 47
#define METRICS_RENDERERS_MAX 32

/* Upper bounds in microseconds; the last bucket is +Inf. */
static const uint64_t bucket_us[] = {
    100,    250,    500,     1000,    2500,    5000,     10000,   25000,
    50000,  100000, 250000,  500000,  1000000, 2500000,  5000000, 10000000,
};
#define NBUCKETS (sizeof(bucket_us) / sizeof(bucket_us[0]))

struct series {
    enum srv_proto proto;
    uint32_t tenant;
    char op[METRICS_OP_MAX + 1];
    atomic_uint_fast64_t ops, errors, bytes_in, bytes_out, lat_sum_us;
    atomic_uint_fast64_t buckets[NBUCKETS + 1];
};

static _Atomic(struct series *) slots[METRICS_SLOTS];
static _Atomic(struct series *) overflow[3];
static atomic_uint_fast64_t overflowed;

static pthread_mutex_t renderers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    srv_metrics_render_cb cb;
    void *arg;
} renderers[METRICS_RENDERERS_MAX];
static int nrenderers;

uint64_t srv_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint32_t hash_key(enum srv_proto proto, const char *op, uint32_t tenant)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = op; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ (uint32_t)proto) * 16777619u;
    for (int i = 0; i < 4; i++)
        h = (h ^ ((tenant >> (8 * i)) & 0xff)) * 16777619u;
    return h;
}

static bool series_is(const struct series *s, enum srv_proto proto, const char *op,
                      uint32_t tenant)
{
    return s->proto == proto && s->tenant == tenant && strncmp(s->op, op, METRICS_OP_MAX) == 0;
}

static struct series *series_new(enum srv_proto proto, const char *op, uint32_t tenant)
{
    struct series *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->proto = proto;
    s->tenant = tenant;
    snprintf(s->op, sizeof(s->op), "%s", op);
    return s;
}

static struct series *overflow_series(enum srv_proto proto)
{
    unsigned i = (unsigned)proto < 3 ? (unsigned)proto : 0;
    struct series *s = atomic_load(&overflow[i]);
    if (s)
        return s;
    struct series *n = series_new(proto, "other", 0);
    if (!n)
        return NULL;
    if (!atomic_compare_exchange_strong(&overflow[i], &s, n)) {
        free(n);
        return s;
    }
    return n;
}

static struct series *series_find(enum srv_proto proto, const char *op, uint32_t tenant)
{
    uint32_t h = hash_key(proto, op, tenant);
    struct series *fresh = NULL;

    for (uint32_t probe = 0; probe < METRICS_SLOTS; probe++) {
        _Atomic(struct series *) *slot = &slots[(h + probe) & (METRICS_SLOTS - 1)];
        struct series *s = atomic_load_explicit(slot, memory_order_acquire);
        if (s) {
            if (series_is(s, proto, op, tenant)) {
                free(fresh);
                return s;
            }
            continue;
        }
        if (!fresh) {
            fresh = series_new(proto, op, tenant);
            if (!fresh)
                return overflow_series(proto);
        }
        struct series *expected = NULL;
        if (atomic_compare_exchange_strong(slot, &expected, fresh))
            return fresh;
        if (series_is(expected, proto, op, tenant)) {
            free(fresh);
            return expected;
        }
    }
    free(fresh);
    atomic_fetch_add(&overflowed, 1);
    return overflow_series(proto);
}

void srv_metrics_op(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bytes_in,
                    uint64_t bytes_out, uint64_t latency_us, int err)
{
    struct series *s = series_find(proto, op ? op : "unknown", tenant);
    if (!s)
        return;
    atomic_fetch_add_explicit(&s->ops, 1, memory_order_relaxed);
    if (err)
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
    if (bytes_in)
        atomic_fetch_add_explicit(&s->bytes_in, bytes_in, memory_order_relaxed);
    if (bytes_out)
        atomic_fetch_add_explicit(&s->bytes_out, bytes_out, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->lat_sum_us, latency_us, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && latency_us > bucket_us[b])
        b++;
    atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
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

/* Label values escaped as the exposition format asks (\\, \", \n). */
static void labels(struct evbuffer *out, const struct series *s)
{
    char esc[2 * METRICS_OP_MAX + 1];
    size_t j = 0;
    for (const char *p = s->op; *p && j + 2 < sizeof(esc); p++) {
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
    evbuffer_add_printf(out, "proto=\"%s\",op=\"%s\",tenant=\"%u\"", proto_name(s->proto), esc,
                        s->tenant);
}

typedef void (*series_fn)(struct evbuffer *out, const struct series *s, const void *ctx);

static void each_series(struct evbuffer *out, series_fn fn, const void *ctx)
{
    for (size_t i = 0; i < METRICS_SLOTS; i++) {
        struct series *s = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (s)
            fn(out, s, ctx);
    }
    for (size_t i = 0; i < 3; i++) {
        struct series *s = atomic_load_explicit(&overflow[i], memory_order_acquire);
        if (s)
            fn(out, s, ctx);
    }
}

struct counter_ctx {
    const char *name;
    size_t offset;
};

static void render_counter(struct evbuffer *out, const struct series *s, const void *ctx)
{
    const struct counter_ctx *c = ctx;
    const atomic_uint_fast64_t *v = (const atomic_uint_fast64_t *)((const char *)s + c->offset);
    evbuffer_add_printf(out, "%s{", c->name);
    labels(out, s);
    evbuffer_add_printf(out, "} %llu\n", (unsigned long long)atomic_load(v));
}

static void render_histogram(struct evbuffer *out, const struct series *s, const void *ctx)
{
    uint64_t cum = 0;
    for (size_t b = 0; b <= NBUCKETS; b++) {
        cum += atomic_load(&s->buckets[b]);
        evbuffer_add_printf(out, "s3nfs_op_latency_seconds_bucket{");
        labels(out, s);
        if (b < NBUCKETS)
            evbuffer_add_printf(out, ",le=\"%g\"} %llu\n", (double)bucket_us[b] / 1e6,
                                (unsigned long long)cum);
        else
            evbuffer_add_printf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    evbuffer_add_printf(out, "s3nfs_op_latency_seconds_sum{");
    labels(out, s);
    evbuffer_add_printf(out, "} %.6f\n", (double)atomic_load(&s->lat_sum_us) / 1e6);
    evbuffer_add_printf(out, "s3nfs_op_latency_seconds_count{");
    labels(out, s);
    evbuffer_add_printf(out, "} %llu\n", (unsigned long long)cum);
}

void srv_metrics_render(struct evbuffer *out)
{
    static const struct {
        struct counter_ctx c;
        const char *help;
    } counters[] = {
        {{"s3nfs_ops_total", offsetof(struct series, ops)}, "Operations finished."},
        {{"s3nfs_op_errors_total", offsetof(struct series, errors)},
         "Operations that finished with an error."},
        {{"s3nfs_bytes_in_total", offsetof(struct series, bytes_in)},
         "Payload bytes received from clients."},
        {{"s3nfs_bytes_out_total", offsetof(struct series, bytes_out)},
         "Payload bytes sent to clients."},
    };

    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s counter\n", counters[i].c.name,
                            counters[i].help, counters[i].c.name);
        each_series(out, render_counter, &counters[i].c);
    }
    evbuffer_add_printf(out, "# HELP s3nfs_op_latency_seconds Operation latency.\n"
                             "# TYPE s3nfs_op_latency_seconds histogram\n");
    each_series(out, render_histogram, NULL);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_metrics_series_overflow_total Operations recorded in an "
                        "overflow series because the series table was full.\n"
                        "# TYPE s3nfs_metrics_series_overflow_total counter\n"
                        "s3nfs_metrics_series_overflow_total %llu\n",
                        (unsigned long long)atomic_load(&overflowed));

    pthread_mutex_lock(&renderers_lock);
    for (int i = 0; i < nrenderers; i++)
        renderers[i].cb(renderers[i].arg, out);
    pthread_mutex_unlock(&renderers_lock);
}
