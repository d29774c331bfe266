/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_metrics.c: counters and histogram buckets in the
 * Prometheus text rendering, label escaping, extra renderers, per-bucket
 * series (named at render time, independent per bucket, the bucket cap). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "srv_metrics.h"

static char *render(void)
{
    struct evbuffer *b = evbuffer_new();
    srv_metrics_render(b);
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    evbuffer_remove(b, s, n);
    s[n] = '\0';
    evbuffer_free(b);
    return s;
}

static void test_counters_and_histogram(void **state)
{
    (void)state;
    srv_metrics_op(SRV_PROTO_S3, "GetObject", 7, 10, 1000, 300, 0);
    srv_metrics_op(SRV_PROTO_S3, "GetObject", 7, 5, 24, 20000000, -2);
    srv_metrics_op(SRV_PROTO_NFS, "READ", 1, 0, 4096, 50, 0);
    char *s = render();
    assert_non_null(strstr(s, "# TYPE s3nfs_ops_total counter\n"));
    assert_non_null(strstr(s, "s3nfs_ops_total{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 2\n"));
    assert_non_null(
        strstr(s, "s3nfs_op_errors_total{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 1\n"));
    assert_non_null(
        strstr(s, "s3nfs_bytes_in_total{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 15\n"));
    assert_non_null(
        strstr(s, "s3nfs_bytes_out_total{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 1024\n"));
    assert_non_null(strstr(s, "s3nfs_ops_total{proto=\"nfs\",op=\"READ\",tenant=\"1\"} 1\n"));
    assert_non_null(strstr(s, "# TYPE s3nfs_op_latency_seconds histogram\n"));
    /* 300us falls in le=0.0005 (not 0.00025); 20s only in +Inf. */
    assert_non_null(strstr(s, "s3nfs_op_latency_seconds_bucket{proto=\"s3\",op=\"GetObject\","
                              "tenant=\"7\",le=\"0.00025\"} 0\n"));
    assert_non_null(strstr(s, "s3nfs_op_latency_seconds_bucket{proto=\"s3\",op=\"GetObject\","
                              "tenant=\"7\",le=\"0.0005\"} 1\n"));
    assert_non_null(strstr(s, "s3nfs_op_latency_seconds_bucket{proto=\"s3\",op=\"GetObject\","
                              "tenant=\"7\",le=\"10\"} 1\n"));
    assert_non_null(strstr(s, "s3nfs_op_latency_seconds_bucket{proto=\"s3\",op=\"GetObject\","
                              "tenant=\"7\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(
        s, "s3nfs_op_latency_seconds_count{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 2\n"));
    assert_non_null(strstr(
        s, "s3nfs_op_latency_seconds_sum{proto=\"s3\",op=\"GetObject\",tenant=\"7\"} 20.000300\n"));
    free(s);
}

/* Threads on every CPU record into one series at once (each bumps the
 * counter copy of its CPU, some move between CPUs meanwhile): every family
 * renders the sum of all copies. */
#define SHARD_THREADS 6
#define SHARD_OPS 5000

static void *shard_rec(void *arg)
{
    long i = (long)arg;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (i % 2 == 0 && ncpu > 0) { /* half pinned, one to each CPU in turn; half free */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)(i / 2 % ncpu), &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    for (int k = 0; k < SHARD_OPS; k++) {
        srv_metrics_op_bucket(SRV_PROTO_S3, "ShardOp", 11, 0, 1, 3, k % 2 ? 50 : 300000,
                              k % 5 == 0);
        if (k % 1000 == 0)
            sched_yield();
    }
    return NULL;
}

static void test_shards_sum(void **state)
{
    (void)state;
    pthread_t th[SHARD_THREADS];
    for (long i = 0; i < SHARD_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, shard_rec, (void *)i), 0);
    for (int i = 0; i < SHARD_THREADS; i++)
        pthread_join(th[i], NULL);
    char *s = render();
    const long n = (long)SHARD_THREADS * SHARD_OPS;
    char want[256];
    snprintf(want, sizeof(want), "s3nfs_ops_total{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %ld\n",
             n);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_op_errors_total{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %ld\n", n / 5);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_bytes_in_total{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %ld\n", n);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_bytes_out_total{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %ld\n", 3 * n);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_op_latency_seconds_bucket{proto=\"s3\",op=\"ShardOp\",tenant=\"11\","
             "le=\"0.0001\"} %ld\n",
             n / 2);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_op_latency_seconds_count{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %ld\n", n);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_op_latency_seconds_sum{proto=\"s3\",op=\"ShardOp\",tenant=\"11\"} %.6f\n",
             (double)(n / 2) * 300000 / 1e6 + (double)(n / 2) * 50 / 1e6);
    assert_non_null(strstr(s, want));
    free(s);
}

static void test_escape(void **state)
{
    (void)state;
    srv_metrics_op(SRV_PROTO_ADMIN, "a\"b", 2, 0, 0, 1, 0);
    char *s = render();
    assert_non_null(strstr(s, "s3nfs_ops_total{proto=\"admin\",op=\"a\\\"b\",tenant=\"2\"} 1\n"));
    free(s);
}

static void extra(void *arg, struct evbuffer *out)
{
    evbuffer_add_printf(out, "my_gauge %d\n", *(int *)arg);
}

static void test_renderer(void **state)
{
    (void)state;
    int v = 42;
    srv_metrics_add_renderer(extra, &v);
    char *s = render();
    assert_non_null(strstr(s, "my_gauge 42\n"));
    free(s);
    srv_metrics_remove_renderer(extra, &v);
    s = render();
    assert_null(strstr(s, "my_gauge"));
    free(s);
}

/* Names buckets 100 and 200 of tenant 9 and bucket 100 of tenant 8. */
static void namer9(void *arg, srv_metrics_name_fn add, void *ctx)
{
    (void)arg;
    add(ctx, 9, 200, "beta");
    add(ctx, 9, 100, "alpha");
    add(ctx, 8, 100, "other-tenant");
    add(ctx, 9, 300, ""); /* empty: ignored */
}

static void test_per_bucket(void **state)
{
    (void)state;
    srv_metrics_set_bucket_namer(namer9, NULL);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 100, 1000, 0, 300, 0);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 100, 500, 0, 300, 0);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 200, 7, 0, 300, -5);
    srv_metrics_op_bucket(SRV_PROTO_NFS, "WRITE", 9, 200, 4096, 0, 40, 0);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 8, 100, 1, 0, 1, 0);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 0, 3, 0, 1, 0); /* no bucket */
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 555, 3, 0, 1, 0); /* not named */
    char *s = render();
    /* the tenant families count every call */
    assert_non_null(strstr(s, "s3nfs_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\"} 5\n"));
    assert_non_null(
        strstr(s, "s3nfs_bytes_in_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\"} 1513\n"));
    /* each bucket its own series, by name */
    assert_non_null(strstr(s, "# TYPE s3nfs_bucket_ops_total counter\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\","
                              "bucket=\"alpha\"} 2\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_bytes_in_total{proto=\"s3\",op=\"PutObject\","
                              "tenant=\"9\",bucket=\"alpha\"} 1500\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_op_errors_total{proto=\"s3\",op=\"PutObject\","
                              "tenant=\"9\",bucket=\"alpha\"} 0\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\","
                              "bucket=\"beta\"} 1\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_op_errors_total{proto=\"s3\",op=\"PutObject\","
                              "tenant=\"9\",bucket=\"beta\"} 1\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_bytes_in_total{proto=\"nfs\",op=\"WRITE\","
                              "tenant=\"9\",bucket=\"beta\"} 4096\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"8\","
                              "bucket=\"other-tenant\"} 1\n"));
    assert_non_null(strstr(s, "# TYPE s3nfs_bucket_op_latency_seconds histogram\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_op_latency_seconds_bucket{proto=\"nfs\",op=\"WRITE\","
                              "tenant=\"9\",bucket=\"beta\",le=\"0.0001\"} 1\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_op_latency_seconds_count{proto=\"s3\","
                              "op=\"PutObject\",tenant=\"9\",bucket=\"alpha\"} 2\n"));
    /* a bucket nobody names is left out; no series of bucket 0 */
    assert_null(strstr(s, "bucket=\"555\""));
    assert_null(strstr(s, "bucket=\"\""));
    free(s);

    /* without a namer no per-bucket series is rendered, but they keep counting */
    srv_metrics_clear_bucket_namer(namer9, NULL);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 100, 1, 0, 1, 0);
    s = render();
    assert_null(strstr(s, "bucket=\"alpha\""));
    free(s);
    srv_metrics_set_bucket_namer(namer9, NULL);
    s = render();
    assert_non_null(strstr(s, "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\","
                              "bucket=\"alpha\"} 3\n"));
    free(s);
    srv_metrics_clear_bucket_namer(namer9, NULL);
}

static unsigned long long sample(const char *s, const char *line)
{
    const char *p = strstr(s, line);
    return p ? strtoull(p + strlen(line), NULL, 10) : 0;
}

/* Past the cap, new buckets fold into bucket="_other" of their tenant and op;
 * buckets seen before keep their own series. */
static void test_bucket_cap(void **state)
{
    (void)state;
    srv_metrics_set_bucket_namer(namer9, NULL);
    char *s = render();
    unsigned long long folded0 = sample(s, "\ns3nfs_metrics_bucket_overflow_total ");
    free(s);
    /* tenant 50: 5000 distinct buckets; the cap (1024) minus the 4 seen above admit */
    for (uint64_t b = 1; b <= 5000; b++)
        srv_metrics_op_bucket(SRV_PROTO_NFS, "GETATTR", 50, 1000 + b, 0, 0, 1, 0);
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", 9, 100, 1, 0, 1, 0); /* seen: own series */
    s = render();
    unsigned long long folded = sample(s, "\ns3nfs_metrics_bucket_overflow_total ") - folded0;
    /* buckets 100/200 of 9, 100 of 8 and 555 of 9 were admitted by the test before */
    assert_int_equal(folded, 5000 - (1024 - 4));
    assert_int_equal(sample(s, "s3nfs_bucket_ops_total{proto=\"nfs\",op=\"GETATTR\",tenant=\"50\","
                               "bucket=\"_other\"} "),
                     folded);
    assert_non_null(strstr(s, "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"9\","
                              "bucket=\"alpha\"} 4\n"));
    /* the tenant series still counts all of them */
    assert_non_null(
        strstr(s, "s3nfs_ops_total{proto=\"nfs\",op=\"GETATTR\",tenant=\"50\"} 5000\n"));
    assert_non_null(strstr(s, "# TYPE s3nfs_metrics_bucket_series_overflow_total counter\n"));
    free(s);
    srv_metrics_clear_bucket_namer(namer9, NULL);
}

static void test_now_monotonic(void **state)
{
    (void)state;
    uint64_t a = srv_now_us(), b = srv_now_us();
    assert_true(b >= a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_histogram),
        cmocka_unit_test(test_shards_sum),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_renderer),
        cmocka_unit_test(test_per_bucket),
        cmocka_unit_test(test_bucket_cap),
        cmocka_unit_test(test_now_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
