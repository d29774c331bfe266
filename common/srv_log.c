/* SPDX-License-Identifier: Apache-2.0
 * srv_log: leveled logging, one line per event, each line one write(2) -
 * or, for srv_log_buffered() lines (the per-request access log), many lines
 * per write(2) from a per-thread buffer (see "per-thread buffers" below).
 *
 * A line is "<ISO-8601 UTC with ms> <LEVEL> <SUBSYS> <message>\n" (CRIT and
 * DEBUG lines also carry "(file:line)"). The whole line is formatted into a
 * stack buffer first and written with a single write(2) on an O_APPEND
 * descriptor, so lines of concurrent threads (and processes) never
 * interleave. Messages are made single-line: control characters become
 * spaces, and overlong messages are cut with "...".
 *
 * The destination descriptor is swapped atomically by srv_log_open() and
 * srv_log_reopen(); the old descriptor is closed after the swap. Levels are
 * one int per subsystem, read by the srv_log() macro before it evaluates its
 * arguments; they change only through the setters here (atomic stores).
 * Thread: any. */
#include "srv_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

int srv_log_levels[SRV_SUB__COUNT] = {
    SRV_LOG_INFO, SRV_LOG_INFO, SRV_LOG_INFO, SRV_LOG_INFO, SRV_LOG_INFO,
    SRV_LOG_INFO, SRV_LOG_INFO, SRV_LOG_INFO, SRV_LOG_INFO,
};

static const char *const level_names[] = {"crit", "error", "warn", "info", "debug"};
static const char *const level_tags[] = {"CRIT", "ERROR", "WARN", "INFO", "DEBUG"};
static const char *const subsys_names[SRV_SUB__COUNT] = {
    "SRV", "STORE", "TIER", "S3", "NFS", "META", "TENANT", "QOS", "ADMIN",
};

static int log_fd = STDERR_FILENO;
static pthread_mutex_t log_path_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_path; /* NULL: stderr */

const char *srv_log_level_name(int lvl)
{
    if (lvl < SRV_LOG_CRIT || lvl > SRV_LOG_DEBUG)
        return "?";
    return level_names[lvl];
}

const char *srv_log_subsys_name(int sub)
{
    if (sub < 0 || sub >= SRV_SUB__COUNT)
        return "?";
    return subsys_names[sub];
}

int srv_log_parse_level(const char *s)
{
    if (!s)
        return -1;
    for (int i = SRV_LOG_CRIT; i <= SRV_LOG_DEBUG; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return SRV_LOG_WARN;
    if (strcasecmp(s, "critical") == 0)
        return SRV_LOG_CRIT;
    return -1;
}

int srv_log_parse_subsys(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < SRV_SUB__COUNT; i++)
        if (strcasecmp(s, subsys_names[i]) == 0)
            return i;
    return -1;
}

void srv_log_set_level(enum srv_log_level lvl)
{
    for (int i = 0; i < SRV_SUB__COUNT; i++)
        __atomic_store_n(&srv_log_levels[i], (int)lvl, __ATOMIC_RELAXED);
}

void srv_log_set_subsys_level(enum srv_subsys sub, enum srv_log_level lvl)
{
    if ((int)sub < 0 || sub >= SRV_SUB__COUNT)
        return;
    __atomic_store_n(&srv_log_levels[sub], (int)lvl, __ATOMIC_RELAXED);
}

int srv_log_parse_spec(const char *spec, int levels[SRV_SUB__COUNT], char *bad, size_t badlen)
{
    char item[64];
    const char *p = spec;

    if (!spec || !*spec)
        return -EINVAL;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof(item))
            return -EINVAL;
        memcpy(item, p, n);
        item[n] = '\0';
        p += n;
        if (*p == ',')
            p++;
        char *eq = strchr(item, '=');
        if (!eq) {
            int lvl = srv_log_parse_level(item);
            if (lvl < 0)
                return -EINVAL;
            for (int i = 0; i < SRV_SUB__COUNT; i++)
                levels[i] = lvl;
            continue;
        }
        *eq = '\0';
        int sub = srv_log_parse_subsys(item);
        if (sub < 0) {
            if (bad)
                snprintf(bad, badlen, "%s", item);
            return -ENOENT;
        }
        int lvl = srv_log_parse_level(eq + 1);
        if (lvl < 0)
            return -EINVAL;
        levels[sub] = lvl;
    }
    return 0;
}

int srv_log_apply_spec(const char *spec)
{
    int levels[SRV_SUB__COUNT];

    for (int i = 0; i < SRV_SUB__COUNT; i++)
        levels[i] = __atomic_load_n(&srv_log_levels[i], __ATOMIC_RELAXED);
    if (srv_log_parse_spec(spec, levels, NULL, 0) < 0)
        return -EINVAL;
    for (int i = 0; i < SRV_SUB__COUNT; i++)
        __atomic_store_n(&srv_log_levels[i], levels[i], __ATOMIC_RELAXED);
    return 0;
}

static int open_log_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    return fd < 0 ? -errno : fd;
}

/* Point the log at @p fd. When a file is already open, dup2() replaces it under
 * the same descriptor number, so a writer that loaded the number concurrently
 * never writes to a closed (or reused) descriptor. Called under log_path_lock. */
static void swap_fd(int fd)
{
    int cur = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
    if (cur != STDERR_FILENO && fd != STDERR_FILENO) {
        if (dup2(fd, cur) >= 0) {
            close(fd);
            return;
        }
    }
    int old = __atomic_exchange_n(&log_fd, fd, __ATOMIC_ACQ_REL);
    if (old != STDERR_FILENO && old != fd)
        close(old);
}

int srv_log_open(const char *path)
{
    int rc = 0;

    srv_log_flush(); /* buffered lines belong to the old destination */
    pthread_mutex_lock(&log_path_lock);
    if (!path) {
        free(log_path);
        log_path = NULL;
        swap_fd(STDERR_FILENO);
        goto out;
    }
    char *copy = strdup(path);
    if (!copy) {
        rc = -ENOMEM;
        goto out;
    }
    int fd = open_log_file(path);
    if (fd < 0) {
        free(copy);
        rc = fd;
        goto out;
    }
    free(log_path);
    log_path = copy;
    swap_fd(fd);
out:
    pthread_mutex_unlock(&log_path_lock);
    return rc;
}

int srv_log_reopen(void)
{
    int rc = 0;

    srv_log_flush();
    pthread_mutex_lock(&log_path_lock);
    if (log_path) {
        int fd = open_log_file(log_path);
        if (fd < 0)
            rc = fd;
        else
            swap_fd(fd);
    }
    pthread_mutex_unlock(&log_path_lock);
    return rc;
}

/* Replace control characters (newlines above all) so one event stays one line. */
static void flatten(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            s[i] = ' ';
}

static const char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

static void put2(char *o, int v)
{
    o[0] = (char)('0' + v / 10 % 10);
    o[1] = (char)('0' + v % 10);
}

/* "YYYY-MM-DDTHH:MM:SS." of the last second this thread formatted: most lines
 * of a busy thread fall in the same second as the previous one. */
static _Thread_local struct {
    time_t sec;
    char text[20];
} ts_memo = {-1, ""};

/* "<timestamp> <LEVEL> <SUBSYS> " into @p buf (room for at least 64 bytes). */
static size_t put_prefix(char *buf, enum srv_log_level lvl, enum srv_subsys sub)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != ts_memo.sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char *o = ts_memo.text;
        int y = tm.tm_year + 1900;
        put2(o, y / 100 % 100);
        put2(o + 2, y % 100);
        o[4] = '-';
        put2(o + 5, tm.tm_mon + 1);
        o[7] = '-';
        put2(o + 8, tm.tm_mday);
        o[10] = 'T';
        put2(o + 11, tm.tm_hour);
        o[13] = ':';
        put2(o + 14, tm.tm_min);
        o[16] = ':';
        put2(o + 17, tm.tm_sec);
        o[19] = '.';
        ts_memo.sec = ts.tv_sec;
    }
    memcpy(buf, ts_memo.text, 20);
    int ms = (int)(ts.tv_nsec / 1000000);
    buf[20] = (char)('0' + ms / 100);
    put2(buf + 21, ms % 100);
    buf[23] = 'Z';
    buf[24] = ' ';
    size_t len = 25;
    const char *tag = ((int)lvl >= 0 && lvl <= SRV_LOG_DEBUG) ? level_tags[lvl] : "?";
    const char *sn = srv_log_subsys_name((int)sub);
    size_t tl = strlen(tag), sl = strlen(sn);
    memcpy(buf + len, tag, tl);
    len += tl;
    buf[len++] = ' ';
    memcpy(buf + len, sn, sl);
    len += sl;
    buf[len++] = ' ';
    return len;
}

/* Format one whole line (newline included) into @p buf (LOG_LINE_MAX bytes).
 * A format of exactly "%s" is copied without printf. @return its length. */
static size_t format_line(char *buf, enum srv_log_level lvl, enum srv_subsys sub,
                          const char *file, int line, const char *fmt, va_list ap)
{
    size_t len = put_prefix(buf, lvl, sub);
    /* Keep room for the "(file:line)" suffix, the ellipsis and the newline. */
    const size_t reserve = 96;
    size_t room = LOG_LINE_MAX - len - reserve - 1;
    size_t mlen;
    if (fmt[0] == '%' && fmt[1] == 's' && fmt[2] == '\0') {
        const char *msg = va_arg(ap, const char *);
        mlen = strlen(msg ? msg : "(null)");
        memcpy(buf + len, msg ? msg : "(null)", mlen < room ? mlen : room);
    } else {
        int n = vsnprintf(buf + len, LOG_LINE_MAX - len - reserve, fmt, ap);
        mlen = n < 0 ? 0 : (size_t)n;
    }
    bool cut = mlen > room;
    if (cut)
        mlen = room;
    flatten(buf + len, mlen);
    len += mlen;
    if (cut) {
        memcpy(buf + len, "...", 3);
        len += 3;
    }
    if (lvl == SRV_LOG_CRIT || lvl == SRV_LOG_DEBUG) {
        int n = snprintf(buf + len, LOG_LINE_MAX - len - 1, " (%.60s:%d)", base_name(file), line);
        if (n > 0)
            len += (size_t)n < LOG_LINE_MAX - len - 1 ? (size_t)n : LOG_LINE_MAX - len - 2;
    }
    buf[len++] = '\n';
    return len;
}

static void write_all(const char *p, size_t len)
{
    int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to report a failing log */
        p += w;
        len -= (size_t)w;
    }
}

/* ---- per-thread buffers (srv_log_write_buffered) ----
 *
 * Each thread that logs buffered lines owns one buffer, registered in a
 * global list. The owner appends under the buffer's lock; the buffer is
 * written out (one write(2) of whole lines) when the next line would not fit,
 * when the owner logs an unbuffered line (so its lines stay in order), by the
 * flusher thread every SRV_LOG_FLUSH_MS, at thread exit, at exit() (atexit),
 * before fork() and before the destination changes. */

#define LOG_BUF_SIZE (32u << 10)

struct log_tbuf {
    pthread_mutex_t lock;
    struct log_tbuf *prev, *next; /* bufs_lock */
    size_t len;
    char data[LOG_BUF_SIZE];
};

static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_tbuf *bufs;
static bool flusher_running; /* bufs_lock */
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static pthread_key_t buf_key;
static _Thread_local struct log_tbuf *my_buf;

/* Caller holds b->lock. */
static void tbuf_flush(struct log_tbuf *b)
{
    if (b->len) {
        write_all(b->data, b->len);
        b->len = 0;
    }
}

static void flush_all_locked(bool try_only)
{
    for (struct log_tbuf *b = bufs; b; b = b->next) {
        if (try_only) {
            if (pthread_mutex_trylock(&b->lock) != 0)
                continue;
        } else {
            pthread_mutex_lock(&b->lock);
        }
        tbuf_flush(b);
        pthread_mutex_unlock(&b->lock);
    }
}

void srv_log_flush(void)
{
    pthread_mutex_lock(&bufs_lock);
    flush_all_locked(false);
    pthread_mutex_unlock(&bufs_lock);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, SRV_LOG_FLUSH_MS * 1000000L};
    for (;;) {
        nanosleep(&tick, NULL);
        srv_log_flush();
    }
    return NULL;
}

/* A thread that ends writes out and releases its buffer. */
static void tbuf_release(void *arg)
{
    struct log_tbuf *b = arg;
    pthread_mutex_lock(&bufs_lock);
    if (b->prev)
        b->prev->next = b->next;
    else
        bufs = b->next;
    if (b->next)
        b->next->prev = b->prev;
    pthread_mutex_unlock(&bufs_lock);
    pthread_mutex_lock(&b->lock);
    tbuf_flush(b);
    pthread_mutex_unlock(&b->lock);
    pthread_mutex_destroy(&b->lock);
    if (my_buf == b)
        my_buf = NULL;
    free(b);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&bufs_lock);
    flush_all_locked(false); /* the child must not write the parent's lines again */
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&bufs_lock);
}

static void fork_child(void)
{
    flusher_running = false; /* threads do not survive fork(): start it again when needed */
    pthread_mutex_unlock(&bufs_lock);
}

static void bufs_init(void)
{
    pthread_key_create(&buf_key, tbuf_release);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(srv_log_flush);
}

/* This thread's buffer (made on first use), or NULL when out of memory. */
static struct log_tbuf *tbuf_get(void)
{
    if (my_buf)
        return my_buf;
    pthread_once(&bufs_once, bufs_init);
    struct log_tbuf *b = malloc(sizeof(*b));
    if (!b)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    b->len = 0;
    b->prev = NULL;
    pthread_mutex_lock(&bufs_lock);
    b->next = bufs;
    if (bufs)
        bufs->prev = b;
    bufs = b;
    if (!flusher_running) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        flusher_running = pthread_create(&t, &at, flusher_main, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&bufs_lock);
    pthread_setspecific(buf_key, b);
    my_buf = b;
    return b;
}

/* Write @p len bytes of whole lines now, after this thread's buffered lines. */
static void write_now(const char *line, size_t len)
{
    struct log_tbuf *b = my_buf;
    if (b) {
        pthread_mutex_lock(&b->lock);
        if (b->len && b->len + len <= LOG_BUF_SIZE) {
            memcpy(b->data + b->len, line, len); /* one write for both */
            b->len += len;
            tbuf_flush(b);
            pthread_mutex_unlock(&b->lock);
            return;
        }
        tbuf_flush(b);
        pthread_mutex_unlock(&b->lock);
    }
    write_all(line, len);
}

/* Write the formatted line @p buf of level @p lvl unbuffered. A CRIT line is usually
 * followed by abort(): everyone's buffered lines go out first (trylock: never wait on a
 * thread that may be stuck holding its lock). */
static void write_line(enum srv_log_level lvl, const char *buf, size_t len)
{
    if (lvl == SRV_LOG_CRIT) {
        pthread_mutex_lock(&bufs_lock);
        flush_all_locked(true);
        pthread_mutex_unlock(&bufs_lock);
    }
    write_now(buf, len);
}

void srv_log_write(enum srv_log_level lvl, enum srv_subsys sub, const char *file, int line,
                   const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    int saved_errno = errno;
    va_list ap;
    va_start(ap, fmt);
    size_t len = format_line(buf, lvl, sub, file, line, fmt, ap);
    va_end(ap);
    write_line(lvl, buf, len);
    errno = saved_errno;
}

void srv_log_write_buffered(enum srv_log_level lvl, enum srv_subsys sub, const char *file,
                            int line, const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    int saved_errno = errno;
    va_list ap;
    va_start(ap, fmt);
    size_t len = format_line(buf, lvl, sub, file, line, fmt, ap);
    va_end(ap);
    struct log_tbuf *b = lvl > SRV_LOG_WARN ? tbuf_get() : NULL;
    if (!b) {
        write_line(lvl, buf, len);
        errno = saved_errno;
        return;
    }
    pthread_mutex_lock(&b->lock);
    if (b->len + len > LOG_BUF_SIZE)
        tbuf_flush(b);
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    pthread_mutex_unlock(&b->lock);
    errno = saved_errno;
}

void srv_log_fatal(enum srv_subsys sub, const char *file, int line, const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t len = format_line(buf, SRV_LOG_CRIT, sub, file, line, fmt, ap);
    va_end(ap);
    write_line(SRV_LOG_CRIT, buf, len);
    /* no atexit handlers, no orderly shutdown: nothing more may reach the disk */
    _exit(SRV_EXIT_FATAL);
}

/* ---- rate-limited lines ---- */

void srv_log_rate_init(struct srv_log_rate *rl)
{
    pthread_mutex_init(&rl->mu, NULL);
    rl->sec = -1;
    rl->n = 0;
    rl->skipped = 0;
}

void srv_log_rate_fini(struct srv_log_rate *rl)
{
    pthread_mutex_destroy(&rl->mu);
}

/* Does @p rl let a line through now? On true, @p skipped is the number of
 * lines it suppressed since the last one it let through. */
static bool rate_take(struct srv_log_rate *rl, unsigned long long *skipped)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    bool pass;
    pthread_mutex_lock(&rl->mu);
    if (rl->sec != (long long)ts.tv_sec) {
        rl->sec = (long long)ts.tv_sec;
        rl->n = 0;
    }
    pass = rl->n < SRV_LOG_RATE_PER_S;
    if (pass) {
        rl->n++;
        *skipped = rl->skipped;
        rl->skipped = 0;
    } else {
        rl->skipped++;
    }
    pthread_mutex_unlock(&rl->mu);
    return pass;
}

void srv_log_write_limited(struct srv_log_rate *rl, enum srv_log_level lvl, enum srv_subsys sub,
                           const char *file, int line, const char *fmt, ...)
{
    unsigned long long skipped;
    int saved_errno = errno;
    if (!rate_take(rl, &skipped))
        return;
    /* Half a line: the suffix always fits after the message. */
    char msg[LOG_LINE_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (skipped)
        srv_log_write(lvl, sub, file, line, "%s [%llu similar lines suppressed]", msg, skipped);
    else
        srv_log_write(lvl, sub, file, line, "%s", msg);
    errno = saved_errno;
}
