/* SPDX-License-Identifier: Apache-2.0
 * log_test_util: what the unit tests that read the log share (test_srv_log,
 * test_srv_listen): send the log to a temporary file, read it back, and count
 * lines, including the ones a rate limiter reported as suppressed.
 * Include after cmocka.h and srv_log.h. */
#ifndef LOG_TEST_UTIL_H
#define LOG_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Point the log at a new temporary file; its name goes to @p path. */
static void log_to_temp(char path[32])
{
    snprintf(path, 32, "/tmp/test_srv_log.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(srv_log_open(path), 0);
}

/* The whole file (at most 64 KiB), which is then removed. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    return buf;
}

/* Count the lines of @p text that contain @p needle; sum the "[K similar
 * lines suppressed]" counts of those lines into @p skipped. */
static int count_lines(const char *text, const char *needle, unsigned long long *skipped)
{
    int n = 0;
    *skipped = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[4096];
        snprintf(line, sizeof(line), "%.*s", (int)len, p);
        if (strstr(line, needle)) {
            n++;
            const char *s = strstr(line, " [");
            unsigned long long k;
            if (s && sscanf(s, " [%llu similar lines suppressed]", &k) == 1)
                *skipped += k;
        }
        p += len + (nl ? 1 : 0);
    }
    return n;
}

#endif
