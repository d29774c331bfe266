/* SPDX-License-Identifier: Apache-2.0
 * bench_util: what the C load generators share (bench/core/bench_core.c,
 * bench/nfs/bench_nfs.c): a monotonic clock and the --only phase filter.
 * Header only, so bench/nfs/run.sh can keep building bench_nfs from its one
 * source file. Thread: any. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Is @p phase in the comma list @p only (NULL: every phase)? */
static inline bool bench_want(const char *only, const char *phase)
{
    if (!only)
        return true;
    size_t n = strlen(phase);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, phase, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

#endif
