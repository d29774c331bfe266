/* SPDX-License-Identifier: Apache-2.0
 * tier_evict: which copied files to evict (free their local extents), from
 * what one pass of the uploader found. Pure: no state, no I/O.
 *
 * A candidate is a file whose remote copy is confirmed and current, not
 * pinned, not evicted yet. Two rules, each a policy's:
 *  - by age: a file not read for the policy's evict_after_s goes;
 *  - by watermark: while the store's used bytes are over the policy's high
 *    watermark, its files go least recently read first until the used bytes
 *    are under its low watermark (the bytes the age rule freed count);
 *    files of a higher eviction priority (a directory policy's) go before
 *    those of a lower one, whatever their last read.
 * Thread: any. */
#ifndef TIER_EVICT_H
#define TIER_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier_evict_cand {
    uint64_t ino, change;
    uint64_t bytes;     /* local bytes eviction frees */
    int64_t last_s;     /* last read (or change, or copy), seconds since the epoch */
    uint32_t after_s;   /* the policy's evict_after_s (0: not by age) */
    uint16_t high, low; /* the policy's watermarks, 1/100 % (0: none) */
    uint32_t group;     /* the policy's bucket, as a small index (watermark state) */
    uint8_t prio;       /* enum tier_evict_prio: higher goes first under a watermark */
    bool pick;          /* out: evict it */
};

/** Mark the candidates to evict. Sorts @p v by priority (highest first), then least
 * recently read first (ties: ino).
 * @p used and @p cap: the store's used bytes and capacity now (cap 0: no watermark
 * applies). @p ngroups: groups are 0 .. ngroups - 1 (at most 1024).
 * @return the number picked. */
size_t tier_evict_plan(struct tier_evict_cand *v, size_t n, int64_t now_s, uint64_t used,
                       uint64_t cap, uint32_t ngroups);

#endif
