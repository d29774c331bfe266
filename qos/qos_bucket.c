/* SPDX-License-Identifier: Apache-2.0
 * qos_bucket: token bucket arithmetic (see qos_bucket.h). Pure: no clock,
 * no locks, no allocation. Thread: caller serialises. */
#include "qos_bucket.h"

#include <math.h>

void qos_bucket_init(struct qos_bucket *b, double rate, double burst, uint64_t now_us)
{
    b->rate = rate > 0 ? rate : 0;
    b->burst = burst > 0 ? burst : b->rate;
    b->tokens = b->burst;
    b->last_us = now_us;
}

void qos_bucket_refill(struct qos_bucket *b, uint64_t now_us)
{
    if (now_us <= b->last_us)
        return; /* clock went backwards or no time passed: nothing accrues */
    if (b->rate > 0) {
        b->tokens += b->rate * (double)(now_us - b->last_us) / 1e6;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
    }
    b->last_us = now_us;
}

void qos_bucket_set(struct qos_bucket *b, double rate, double burst, uint64_t now_us)
{
    qos_bucket_refill(b, now_us);
    bool was_unlimited = b->rate <= 0;
    b->rate = rate > 0 ? rate : 0;
    b->burst = burst > 0 ? burst : b->rate;
    if (was_unlimited || b->tokens > b->burst)
        b->tokens = b->burst;
}

static double need_of(const struct qos_bucket *b, double n)
{
    return n < b->burst ? n : b->burst;
}

bool qos_bucket_take(struct qos_bucket *b, double n, uint64_t now_us)
{
    if (b->rate <= 0)
        return true;
    qos_bucket_refill(b, now_us);
    /* Allow for floating-point residue so a wait computed by wait_us suffices. */
    if (b->tokens + 1e-6 < need_of(b, n))
        return false;
    b->tokens -= n;
    return true;
}

void qos_bucket_charge(struct qos_bucket *b, double n, uint64_t now_us)
{
    if (b->rate <= 0)
        return;
    qos_bucket_refill(b, now_us);
    b->tokens -= n;
}

uint64_t qos_bucket_wait_us(struct qos_bucket *b, double n, uint64_t now_us)
{
    if (b->rate <= 0)
        return 0;
    qos_bucket_refill(b, now_us);
    double missing = need_of(b, n) - b->tokens;
    if (missing <= 1e-6)
        return 0;
    return (uint64_t)ceil(missing * 1e6 / b->rate);
}

double qos_bucket_level(struct qos_bucket *b, uint64_t now_us)
{
    qos_bucket_refill(b, now_us);
    return b->tokens;
}
