/* SPDX-License-Identifier: Apache-2.0
 * srv_metrics: counters and latency histograms for /metrics (Prometheus text).
 *
 * Front ends report each finished operation once; the registry keeps, per
 * (protocol, operation, tenant): requests, errors, bytes in/out and a latency
 * histogram, and the same per (protocol, operation, tenant, bucket) for
 * operations on a bucket (bounded: see srv_metrics.c). Recording is lock-free
 * on the hot path (atomics); rendering walks every series.
 * Thread: any. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

enum srv_proto { SRV_PROTO_S3 = 0, SRV_PROTO_NFS = 1, SRV_PROTO_ADMIN = 2 };

/** Record one finished operation. @p op is a static string ("GetObject", "READ").
 * @p err is the internal error (0 = success). */
void srv_metrics_op(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bytes_in,
                    uint64_t bytes_out, uint64_t latency_us, int err);
/** Add a gauge/counter provider called at render time (capacity, quota usage...). */
typedef void (*srv_metrics_render_cb)(void *arg, struct evbuffer *out);
void srv_metrics_add_renderer(srv_metrics_render_cb cb, void *arg);
/** Append every series in Prometheus text exposition format 0.0.4. */
void srv_metrics_render(struct evbuffer *out);
/** Monotonic microseconds, for latencies. */
uint64_t srv_now_us(void);
/** Monotonic milliseconds, for deadlines and backoff. */
int64_t srv_now_ms(void);

/* ---- extensions (backward compatible) ---- */
/** Remove a renderer added with the same @p cb and @p arg (no-op if absent). */
void srv_metrics_remove_renderer(srv_metrics_render_cb cb, void *arg);

/** srv_metrics_op for an operation on bucket inode @p bucket of @p tenant
 * (0 = none: counted per tenant only). Counted per tenant as srv_metrics_op
 * does, and in the per-bucket families, labelled with the bucket's name as
 * the namer gives it at render time. */
void srv_metrics_op_bucket(enum srv_proto proto, const char *op, uint32_t tenant, uint64_t bucket,
                           uint64_t bytes_in, uint64_t bytes_out, uint64_t latency_us, int err);
/** The namer calls @p add once for each bucket it knows ((tenant, bucket inode)
 * -> name, at most SRV_METRICS_BUCKET_NAME_MAX bytes; longer ones are skipped). */
#define SRV_METRICS_BUCKET_NAME_MAX 63
typedef void (*srv_metrics_name_fn)(void *ctx, uint32_t tenant, uint64_t bucket,
                                    const char *name);
typedef void (*srv_metrics_namer_cb)(void *arg, srv_metrics_name_fn add, void *ctx);
/** Set the bucket namer, called once per render (NULL: none). Per-bucket series
 * of a bucket it does not name (deleted, or no namer) are not rendered. */
void srv_metrics_set_bucket_namer(srv_metrics_namer_cb cb, void *arg);
/** Unset the namer if it is (@p cb, @p arg). */
void srv_metrics_clear_bucket_namer(srv_metrics_namer_cb cb, void *arg);

#endif
