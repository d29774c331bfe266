/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for server/srv_metrics.c: counters and histogram buckets in the
 * Prometheus text rendering, label escaping, extra renderers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_renderer),
        cmocka_unit_test(test_now_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
