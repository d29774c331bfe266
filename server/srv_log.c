/* SPDX-License-Identifier: Apache-2.0
 * srv_log: leveled logging, one line per event, each line one write(2).
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

void srv_log_write(enum srv_log_level lvl, enum srv_subsys sub, const char *file, int line,
                   const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    size_t len;
    int n;
    int saved_errno = errno;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, ((int)lvl >= 0 && lvl <= SRV_LOG_DEBUG) ? level_tags[lvl]
                                                                              : "?",
                 srv_log_subsys_name((int)sub));
    len = (size_t)n;

    /* Keep room for the "(file:line)" suffix, the ellipsis and the newline. */
    const size_t reserve = 96;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(buf + len, sizeof(buf) - len - reserve, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t room = sizeof(buf) - len - reserve - 1;
    size_t mlen = (size_t)n;
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
        n = snprintf(buf + len, sizeof(buf) - len - 1, " (%.60s:%d)", base_name(file), line);
        if (n > 0)
            len += (size_t)n < sizeof(buf) - len - 1 ? (size_t)n : sizeof(buf) - len - 2;
    }
    buf[len++] = '\n';

    int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
    ssize_t w;
    do {
        w = write(fd, buf, len);
    } while (w < 0 && errno == EINTR);
    errno = saved_errno;
}
