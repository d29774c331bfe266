/* SPDX-License-Identifier: Apache-2.0
 * qos_bucket: a token bucket with an injected clock.
 *
 * Tokens accrue at @c rate per second up to @c burst. A request of n tokens
 * is admitted when the bucket holds at least min(n, burst) tokens; it then
 * takes all n, so the level may go negative ("debt") and a request larger
 * than the burst still passes, later requests paying for it. Rate 0 means
 * unlimited. Time is passed in by the caller (microseconds, any monotonic
 * origin), so tests need no clock.
 * Thread: not thread-safe; the caller locks. */
#ifndef QOS_BUCKET_H
#define QOS_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

struct qos_bucket {
    double rate;   /* tokens per second; 0 = unlimited */
    double burst;  /* most tokens held */
    double tokens; /* may be negative (debt) */
    uint64_t last_us;
};

/** Start full. @p burst 0 = one second of @p rate. */
void qos_bucket_init(struct qos_bucket *b, double rate, double burst, uint64_t now_us);
/** Change rate/burst, keeping the current level (clamped to the new burst). */
void qos_bucket_set(struct qos_bucket *b, double rate, double burst, uint64_t now_us);
/** Add the tokens accrued since the last call. */
void qos_bucket_refill(struct qos_bucket *b, uint64_t now_us);
/** Admit @p n tokens now if possible. @return true (taken) or false (nothing taken). */
bool qos_bucket_take(struct qos_bucket *b, double n, uint64_t now_us);
/** Take @p n tokens whatever the level (it may go into debt). No-op when unlimited. */
void qos_bucket_charge(struct qos_bucket *b, double n, uint64_t now_us);
/** Microseconds until qos_bucket_take(@p n) would succeed (0 = now). */
uint64_t qos_bucket_wait_us(struct qos_bucket *b, double n, uint64_t now_us);
/** Level after refilling (for metrics and tests). */
double qos_bucket_level(struct qos_bucket *b, uint64_t now_us);

#endif
