/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_log.c: level and spec parsing, the line format
 * (ISO-8601 UTC, level, subsystem, message on one line), level filtering,
 * buffered lines (written out by srv_log_flush, by the flusher thread, by a
 * WARN line of the same thread in order, at thread exit; whole lines from
 * concurrent threads). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "srv_log.h"

#include "log_test_util.h"

static void test_parse_level(void **state)
{
    (void)state;
    assert_int_equal(srv_log_parse_level("error"), SRV_LOG_ERROR);
    assert_int_equal(srv_log_parse_level("WARN"), SRV_LOG_WARN);
    assert_int_equal(srv_log_parse_level("warning"), SRV_LOG_WARN);
    assert_int_equal(srv_log_parse_level("info"), SRV_LOG_INFO);
    assert_int_equal(srv_log_parse_level("debug"), SRV_LOG_DEBUG);
    assert_int_equal(srv_log_parse_level("crit"), SRV_LOG_CRIT);
    assert_int_equal(srv_log_parse_level("verbose"), -1);
    assert_int_equal(srv_log_parse_level(""), -1);
    assert_int_equal(srv_log_parse_level(NULL), -1);
    assert_string_equal(srv_log_level_name(SRV_LOG_WARN), "warn");
    assert_string_equal(srv_log_level_name(99), "?");
}

static void test_parse_subsys(void **state)
{
    (void)state;
    assert_int_equal(srv_log_parse_subsys("s3"), SRV_SUB_S3);
    assert_int_equal(srv_log_parse_subsys("NFS"), SRV_SUB_NFS);
    assert_int_equal(srv_log_parse_subsys("tenant"), SRV_SUB_TENANT);
    assert_int_equal(srv_log_parse_subsys("bogus"), -1);
    assert_string_equal(srv_log_subsys_name(SRV_SUB_QOS), "QOS");
}

static void test_apply_spec(void **state)
{
    (void)state;
    assert_int_equal(srv_log_apply_spec("warn,s3=debug,meta=error"), 0);
    assert_int_equal(srv_log_levels[SRV_SUB_S3], SRV_LOG_DEBUG);
    assert_int_equal(srv_log_levels[SRV_SUB_META], SRV_LOG_ERROR);
    assert_int_equal(srv_log_levels[SRV_SUB_NFS], SRV_LOG_WARN);
    /* A bad spec changes nothing. */
    assert_int_equal(srv_log_apply_spec("info,s3=loud"), -EINVAL);
    assert_int_equal(srv_log_levels[SRV_SUB_S3], SRV_LOG_DEBUG);
    assert_int_equal(srv_log_levels[SRV_SUB_NFS], SRV_LOG_WARN);
    assert_int_equal(srv_log_apply_spec("nope=info"), -EINVAL);
    assert_int_equal(srv_log_apply_spec(""), -EINVAL);
    assert_int_equal(srv_log_apply_spec("info,,s3=debug"), -EINVAL);
    srv_log_set_level(SRV_LOG_INFO);
    assert_int_equal(srv_log_levels[SRV_SUB_S3], SRV_LOG_INFO);
}

/* Parsing alone: nothing applied, unnamed subsystems kept, the unknown one named. */
static void test_parse_spec(void **state)
{
    (void)state;
    int lv[SRV_SUB__COUNT];
    char bad[16] = "";
    for (int i = 0; i < SRV_SUB__COUNT; i++)
        lv[i] = -7;
    assert_int_equal(srv_log_parse_spec("s3=debug,meta=error", lv, bad, sizeof(bad)), 0);
    assert_int_equal(lv[SRV_SUB_S3], SRV_LOG_DEBUG);
    assert_int_equal(lv[SRV_SUB_META], SRV_LOG_ERROR);
    assert_int_equal(lv[SRV_SUB_NFS], -7);
    assert_int_equal(srv_log_parse_spec("warn,nfs=crit", lv, NULL, 0), 0);
    assert_int_equal(lv[SRV_SUB_S3], SRV_LOG_WARN);
    assert_int_equal(lv[SRV_SUB_NFS], SRV_LOG_CRIT);
    assert_int_equal(srv_log_levels[SRV_SUB_NFS], SRV_LOG_INFO); /* not applied */
    assert_int_equal(srv_log_parse_spec("info,zz=debug", lv, bad, sizeof(bad)), -ENOENT);
    assert_string_equal(bad, "zz");
    assert_int_equal(srv_log_parse_spec("zz=loud", lv, NULL, 0), -ENOENT);
    assert_int_equal(srv_log_parse_spec("loud,zz=debug", lv, bad, sizeof(bad)), -EINVAL);
    assert_int_equal(srv_log_parse_spec("s3=loud", lv, bad, sizeof(bad)), -EINVAL);
    assert_int_equal(srv_log_parse_spec("", lv, bad, sizeof(bad)), -EINVAL);
    assert_int_equal(srv_log_parse_spec(NULL, lv, bad, sizeof(bad)), -EINVAL);
    assert_int_equal(srv_log_parse_spec("info,", lv, bad, sizeof(bad)), 0);
    assert_int_equal(srv_log_parse_spec(",info", lv, bad, sizeof(bad)), -EINVAL);
}

static int evaluated;
static const char *side_effect(void)
{
    evaluated++;
    return "x";
}

static void test_line_format_and_filter(void **state)
{
    (void)state;
    char path[32];
    log_to_temp(path);
    srv_log_set_level(SRV_LOG_INFO);
    srv_log_set_subsys_level(SRV_SUB_NFS, SRV_LOG_WARN);

    srv_log(INFO, S3, "req=%d tenant=%u hello\nworld", 7, 3u);
    evaluated = 0;
    srv_log(INFO, NFS, "filtered %s", side_effect());
    assert_int_equal(evaluated, 0); /* arguments not evaluated below the level */
    srv_log(WARN, NFS, "kept");
    assert_int_equal(srv_log_open(NULL), 0);

    char *text = slurp(path);
    /* Exactly two lines. */
    char *nl1 = strchr(text, '\n');
    assert_non_null(nl1);
    char *nl2 = strchr(nl1 + 1, '\n');
    assert_non_null(nl2);
    assert_string_equal(nl2 + 1, "");
    /* 2026-11-21T09:12:06.123Z INFO S3 req=7 tenant=3 hello world */
    assert_true(strlen(text) > 25);
    assert_true(text[4] == '-' && text[7] == '-' && text[10] == 'T' && text[13] == ':' &&
                text[16] == ':' && text[19] == '.' && text[23] == 'Z' && text[24] == ' ');
    assert_memory_equal(text + 25, "INFO S3 req=7 tenant=3 hello world\n", 35);
    assert_memory_equal(nl1 + 1 + 25, "WARN NFS kept\n", 14);
}

static void test_long_line_cut(void **state)
{
    (void)state;
    char path[32];
    log_to_temp(path);
    char *big = malloc(10000);
    memset(big, 'a', 9999);
    big[9999] = '\0';
    srv_log(ERROR, SRV, "%s", big);
    free(big);
    assert_int_equal(srv_log_reopen(), 0);
    srv_log(ERROR, SRV, "after reopen");
    assert_int_equal(srv_log_open(NULL), 0);
    char *text = slurp(path);
    char *nl = strchr(text, '\n');
    assert_non_null(nl);
    assert_true(nl - text < 4096);
    assert_memory_equal(nl - 3, "...", 3);
    assert_non_null(strstr(nl + 1, "ERROR SRV after reopen\n"));
}

enum { NTHREADS = 4, NLINES = 500, PAYLOAD = 300 };

static void *writer(void *arg)
{
    char payload[PAYLOAD + 1];
    int id = (int)(intptr_t)arg;
    memset(payload, 'a' + id, PAYLOAD);
    payload[PAYLOAD] = '\0';
    for (int i = 0; i < NLINES; i++)
        srv_log(INFO, SRV, "t=%d i=%04d %s", id, i, payload);
    return NULL;
}

/* Lines written concurrently by several threads come out whole. */
static void test_no_interleaving(void **state)
{
    (void)state;
    char path[32];
    srv_log_set_level(SRV_LOG_INFO);
    log_to_temp(path);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(srv_log_open(NULL), 0);

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int count[NTHREADS] = {0};
    while (fgets(line, sizeof(line), f)) {
        int id = -1, i = -1;
        char *p = strstr(line, " INFO SRV t=");
        assert_non_null(p);
        assert_int_equal(sscanf(p, " INFO SRV t=%d i=%d", &id, &i), 2);
        assert_true(id >= 0 && id < NTHREADS);
        char *pl = strstr(p, " i=");
        pl = strchr(pl + 1, ' ') + 1;
        assert_int_equal(strlen(pl), PAYLOAD + 1); /* payload + newline */
        for (int k = 0; k < PAYLOAD; k++)
            assert_int_equal(pl[k], 'a' + id);
        count[id]++;
    }
    fclose(f);
    unlink(path);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(count[i], NLINES);
}

/* Bytes in @p path (0 if absent). */
static long file_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Buffered lines: same format; written out by srv_log_flush; an unbuffered
 * line of the same thread comes after the buffered ones; a WARN through the
 * buffered call is written at once. */
static void test_buffered_order_and_flush(void **state)
{
    (void)state;
    char path[32];
    srv_log_set_level(SRV_LOG_INFO);
    log_to_temp(path);
    srv_log_buffered(INFO, S3, "req=%s first", "A1");
    srv_log_buffered(INFO, S3, "%s", "req=A2 second\nline");
    srv_log(INFO, SRV, "direct third");
    srv_log_buffered(INFO, S3, "req=A3 fourth");
    srv_log_buffered(WARN, S3, "req=A4 fifth (warn)");
    srv_log_buffered(INFO, S3, "req=A5 sixth");
    srv_log_flush();
    srv_log_buffered(DEBUG, S3, "filtered out");
    assert_int_equal(srv_log_open(NULL), 0);
    char *text = slurp(path);
    const char *want[] = {"INFO S3 req=A1 first\n", "INFO S3 req=A2 second line\n",
                          "INFO SRV direct third\n", "INFO S3 req=A3 fourth\n",
                          "WARN S3 req=A4 fifth (warn)\n", "INFO S3 req=A5 sixth\n"};
    char *p = text;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(p[4] == '-' && p[10] == 'T' && p[19] == '.' && p[23] == 'Z' && p[24] == ' ');
        assert_memory_equal(p + 25, want[i], strlen(want[i]));
        p = nl + 1;
    }
    assert_string_equal(p, "");
}

/* Nobody calls srv_log_flush: the flusher thread writes the lines out. */
static void test_buffered_flusher(void **state)
{
    (void)state;
    char path[32];
    srv_log_set_level(SRV_LOG_INFO);
    log_to_temp(path);
    srv_log_buffered(INFO, S3, "req=T1 by the timer");
    /* liveness only: the flusher runs every SRV_LOG_FLUSH_MS; allow far more */
    for (int i = 0; i < 3000 && file_size(path) == 0; i++)
        usleep(10000);
    assert_true(file_size(path) > 0);
    assert_int_equal(srv_log_open(NULL), 0);
    char *text = slurp(path);
    assert_non_null(strstr(text, "INFO S3 req=T1 by the timer\n"));
}

enum { BLINES = 3000 };

static void *buffered_writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < BLINES; i++)
        srv_log_buffered(INFO, S3, "req=b%d-%05d %0*d", id, i, 100 + id * 50, i);
    return NULL; /* the thread's exit writes out what is left */
}

/* Several threads, each more than a buffer's worth: every line whole, once,
 * and each thread's lines in order. */
static void test_buffered_threads(void **state)
{
    (void)state;
    char path[32];
    srv_log_set_level(SRV_LOG_INFO);
    log_to_temp(path);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, buffered_writer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    /* no srv_log_flush: thread exit must have written everything */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int next[NTHREADS] = {0};
    while (fgets(line, sizeof(line), f)) {
        int id = -1, i = -1, pad = -1;
        char *p = strstr(line, " INFO S3 req=b");
        assert_non_null(p);
        assert_int_equal(sscanf(p, " INFO S3 req=b%d-%d %d", &id, &i, &pad), 3);
        assert_true(id >= 0 && id < NTHREADS);
        assert_int_equal(i, next[id]);
        assert_int_equal(pad, i);
        char *num = strrchr(p, ' ') + 1;
        assert_int_equal(strlen(num), (size_t)(100 + id * 50) + 1); /* + newline */
        next[id]++;
    }
    fclose(f);
    assert_int_equal(srv_log_open(NULL), 0);
    unlink(path);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(next[i], BLINES);
}

/* One call site, whatever the caller. */
static void burst_line(int i)
{
    srv_log_limited(WARN, NFS, "req=- tenant=- burst line %d", i);
}

/* A burst through one call site: at most SRV_LOG_RATE_PER_S lines per second
 * pass; the next line that passes reports how many were suppressed, so every
 * line is accounted for. Two call sites have separate limiters. */
static void test_rate_limited(void **state)
{
    (void)state;
    char path[32];
    srv_log_set_level(SRV_LOG_INFO);
    log_to_temp(path);
    enum { BURST = 1000 };
    for (int i = 0; i < BURST; i++)
        burst_line(i);
    srv_log_limited(WARN, NFS, "req=- tenant=- other site");
    evaluated = 0;
    srv_log_set_subsys_level(SRV_SUB_S3, SRV_LOG_ERROR);
    srv_log_limited(INFO, S3, "filtered %s", side_effect());
    assert_int_equal(evaluated, 0);
    srv_log_set_level(SRV_LOG_INFO);
    /* A new second: the same site passes again and reports the rest. */
    struct timespec pause = {1, 100000000};
    nanosleep(&pause, NULL);
    for (int i = 0; i < 2; i++)
        burst_line(BURST + i);
    assert_int_equal(srv_log_open(NULL), 0);
    char *text = slurp(path);
    unsigned long long skipped;
    int lines = count_lines(text, "burst line", &skipped);
    /* the burst may straddle a second boundary: at most two windows' worth */
    assert_true(lines >= SRV_LOG_RATE_PER_S + 1 && lines <= 2 * SRV_LOG_RATE_PER_S + 2);
    assert_int_equal((unsigned long long)lines + skipped, BURST + 2);
    assert_int_equal(count_lines(text, "other site", &skipped), 1);
    assert_int_equal(skipped, 0);
    assert_null(strstr(text, "filtered"));

    /* A limiter in caller storage. */
    struct srv_log_rate rl;
    srv_log_rate_init(&rl);
    log_to_temp(path);
    for (int i = 0; i < 50; i++)
        srv_log_limited_by(&rl, ERROR, SRV, "req=- tenant=- own limiter %d", i);
    assert_int_equal(srv_log_open(NULL), 0);
    srv_log_rate_fini(&rl);
    lines = count_lines(slurp(path), "own limiter", &skipped);
    assert_true(lines >= SRV_LOG_RATE_PER_S && lines <= 2 * SRV_LOG_RATE_PER_S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test(test_parse_subsys),
        cmocka_unit_test(test_apply_spec),
        cmocka_unit_test(test_parse_spec),
        cmocka_unit_test(test_line_format_and_filter),
        cmocka_unit_test(test_long_line_cut),
        cmocka_unit_test(test_no_interleaving),
        cmocka_unit_test(test_buffered_order_and_flush),
        cmocka_unit_test(test_buffered_flusher),
        cmocka_unit_test(test_buffered_threads),
        cmocka_unit_test(test_rate_limited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
