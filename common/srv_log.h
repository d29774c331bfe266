/* SPDX-License-Identifier: Apache-2.0
 * srv_log: leveled, structured logging, one line per event:
 *   2026-11-21T09:12:06.123Z INFO S3 req=... tenant=... message
 * The macro checks the level before it evaluates its arguments.
 * Never log secrets or Authorization headers.
 * Thread: any; lines from different threads never interleave. */
#ifndef SRV_LOG_H
#define SRV_LOG_H

#include <pthread.h>
#include <stddef.h>

enum srv_log_level { SRV_LOG_CRIT = 0, SRV_LOG_ERROR, SRV_LOG_WARN, SRV_LOG_INFO, SRV_LOG_DEBUG };
enum srv_subsys {
    SRV_SUB_SRV = 0,
    SRV_SUB_STORE,
    SRV_SUB_TIER,
    SRV_SUB_S3,
    SRV_SUB_NFS,
    SRV_SUB_META,
    SRV_SUB_TENANT,
    SRV_SUB_QOS,
    SRV_SUB_ADMIN,
    SRV_SUB__COUNT
};

extern int srv_log_levels[SRV_SUB__COUNT];

/** Set every subsystem's level. */
void srv_log_set_level(enum srv_log_level lvl);
/** Parse "error|warn|info|debug" (or "crit"). @return level or -1. */
int srv_log_parse_level(const char *s);
/** Send log lines to @p path (append) instead of stderr; NULL = stderr. @return 0, -errno. */
int srv_log_open(const char *path);
void srv_log_write(enum srv_log_level lvl, enum srv_subsys sub, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define srv_log(LVL, SUB, ...)                                                                     \
    do {                                                                                           \
        if ((int)(SRV_LOG_##LVL) <= srv_log_levels[SRV_SUB_##SUB])                                 \
            srv_log_write(SRV_LOG_##LVL, SRV_SUB_##SUB, __FILE__, __LINE__, __VA_ARGS__);          \
    } while (0)

/* Stays on in release builds; logs expression, file and line, then aborts. */
#define SRV_ASSERT(e)                                                                              \
    do {                                                                                           \
        if (!(e)) {                                                                                \
            srv_log_write(SRV_LOG_CRIT, SRV_SUB_SRV, __FILE__, __LINE__, "assertion failed: %s",   \
                          #e);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#include <stdlib.h>

/* ---- extensions (backward compatible) ---- */
/** Set the level of one subsystem. */
void srv_log_set_subsys_level(enum srv_subsys sub, enum srv_log_level lvl);
/** Parse a subsystem name ("srv", "s3", "nfs", ... case-insensitive). @return it or -1. */
int srv_log_parse_subsys(const char *s);
/** Apply a level spec: "info" (every subsystem) and/or "sub=level" items separated by
 * commas, e.g. "info,s3=debug,meta=warn". Nothing changes unless the whole spec parses.
 * @return 0, -EINVAL. */
int srv_log_apply_spec(const char *spec);
/** Parse a level spec (the syntax of srv_log_apply_spec) into @p levels without
 * applying it; subsystems the spec does not name keep their entry. @p levels may
 * be partly written on error.
 * @param[out] bad on -ENOENT, the unknown subsystem's name (may be NULL).
 * @return 0, -EINVAL (empty, malformed, or an unknown level), -ENOENT (an unknown
 * subsystem). */
int srv_log_parse_spec(const char *spec, int levels[SRV_SUB__COUNT], char *bad, size_t badlen);
/** @return "crit", "error", "warn", "info" or "debug" ("?" when out of range). */
const char *srv_log_level_name(int lvl);
/** @return "SRV", "S3", ... ("?" when out of range). */
const char *srv_log_subsys_name(int sub);
/** Reopen the current log file (after rotation); no-op on stderr. @return 0, -errno. */
int srv_log_reopen(void);

/* ---- buffered lines (backward compatible extension) ----
 * High-volume lines (the access log: one line per request) can go through a
 * per-thread buffer instead of one write(2) each. Same format and levels;
 * lines of one thread stay in order (an unbuffered line from that thread
 * first writes out its buffered ones); lines of different threads are ordered
 * by their timestamps, not by their place in the file. A buffer is written
 * out when full (32 KiB), every SRV_LOG_FLUSH_MS by a flusher thread, when its
 * thread ends, at exit() and before fork(). WARN and more severe lines are
 * never buffered, and a CRIT line first writes out every thread's buffer.
 * What a crash (SIGKILL, SIGSEGV) can lose: the buffered lines of the last
 * SRV_LOG_FLUSH_MS (at most 32 KiB per thread). */
#define SRV_LOG_FLUSH_MS 100

void srv_log_write_buffered(enum srv_log_level lvl, enum srv_subsys sub, const char *file,
                            int line, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define srv_log_buffered(LVL, SUB, ...)                                                            \
    do {                                                                                           \
        if ((int)(SRV_LOG_##LVL) <= srv_log_levels[SRV_SUB_##SUB])                                 \
            srv_log_write_buffered(SRV_LOG_##LVL, SRV_SUB_##SUB, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/** Write out every thread's buffered lines now (also registered with atexit()). */
void srv_log_flush(void);

/* ---- fatal errors ----
 * SRV_FATAL logs a CRIT line (every thread's buffered lines first) and ends the
 * process at once with SRV_EXIT_FATAL, running no atexit handler and no
 * shutdown. For states the daemon cannot safely go on from, e.g. an fsync or
 * fdatasync that failed: the kernel may have dropped the dirty pages it could
 * not write and reports that only once, so a later sync would succeed without
 * the lost bytes. A service manager (Restart=on-failure) starts it again, and
 * the start recovers from the last durable state. */
#define SRV_EXIT_FATAL 74 /* EX_IOERR */
void srv_log_fatal(enum srv_subsys sub, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
#define SRV_FATAL(SUB, ...) srv_log_fatal(SRV_SUB_##SUB, __FILE__, __LINE__, __VA_ARGS__)

/* ---- rate-limited lines (backward compatible extension) ----
 * For lines that an outside event can repeat without bound (accept failures
 * while out of file descriptors, refused connections): at most
 * SRV_LOG_RATE_PER_S lines per second pass one limiter; the others are
 * counted, and the next line that passes ends with "[K similar lines
 * suppressed]". A burst that stops while lines are being suppressed is
 * reported with the next line of that limiter, whenever it comes.
 * srv_log_limited() keeps one limiter per call site (a static in the macro);
 * srv_log_limited_by() takes the caller's (e.g. one per listener, so one
 * listener's flood does not hide another's lines). */
#define SRV_LOG_RATE_PER_S 5

struct srv_log_rate {
    pthread_mutex_t mu;
    long long sec;            /* CLOCK_MONOTONIC second of the current window (-1: none) */
    unsigned n;               /* lines passed in that second */
    unsigned long long skipped; /* lines suppressed since the last one that passed */
};
#define SRV_LOG_RATE_INIT {PTHREAD_MUTEX_INITIALIZER, -1, 0, 0}

/** Prepare a limiter in caller storage (same as SRV_LOG_RATE_INIT). */
void srv_log_rate_init(struct srv_log_rate *rl);
/** Release what srv_log_rate_init() set up. */
void srv_log_rate_fini(struct srv_log_rate *rl);
/** Write a line (already past the level check) if limiter @p rl lets one through now. */
void srv_log_write_limited(struct srv_log_rate *rl, enum srv_log_level lvl, enum srv_subsys sub,
                           const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#define srv_log_limited_by(RL, LVL, SUB, ...)                                                      \
    do {                                                                                           \
        if ((int)(SRV_LOG_##LVL) <= srv_log_levels[SRV_SUB_##SUB])                                 \
            srv_log_write_limited((RL), SRV_LOG_##LVL, SRV_SUB_##SUB, __FILE__, __LINE__,          \
                                  __VA_ARGS__);                                                    \
    } while (0)

#define srv_log_limited(LVL, SUB, ...)                                                             \
    do {                                                                                           \
        static struct srv_log_rate srv_log_rate_site_ = SRV_LOG_RATE_INIT;                         \
        srv_log_limited_by(&srv_log_rate_site_, LVL, SUB, __VA_ARGS__);                            \
    } while (0)

#endif
