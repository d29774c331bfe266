/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_path.c: path normalisation as export records
 * (no flags: "." refused) and MOUNT (SRV_PATH_DOT_SKIP) use it, and the
 * whole-component prefix test of export resolution. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "srv_path.h"

struct norm_case {
    const char *in;
    unsigned flags;
    int rc;
    const char *out;
};

static void test_table(void **state)
{
    (void)state;
    static const struct norm_case cases[] = {
        {"/", 0, 0, "/"},
        {"//", 0, 0, "/"},
        {"/a", 0, 0, "/a"},
        {"/a/", 0, 0, "/a"},
        {"//a//b///", 0, 0, "/a/b"},
        {"/a/b/c", SRV_PATH_DOT_SKIP, 0, "/a/b/c"},
        {"/datasets/train", 0, 0, "/datasets/train"},
        /* "." : refused for export records, dropped for MOUNT */
        {"/a/./b", 0, -EINVAL, NULL},
        {"/.", 0, -EINVAL, NULL},
        {"/a/./b", SRV_PATH_DOT_SKIP, 0, "/a/b"},
        {"/./", SRV_PATH_DOT_SKIP, 0, "/"},
        {"/a/.", SRV_PATH_DOT_SKIP, 0, "/a"},
        /* names that only start with dots are names */
        {"/.hidden/..x/...", 0, 0, "/.hidden/..x/..."},
        /* ".." never, with or without the flag */
        {"/a/../b", 0, -EINVAL, NULL},
        {"/..", SRV_PATH_DOT_SKIP, -EINVAL, NULL},
        {"/a/..", SRV_PATH_DOT_SKIP, -EINVAL, NULL},
        /* relative or empty */
        {"", 0, -EINVAL, NULL},
        {"a/b", SRV_PATH_DOT_SKIP, -EINVAL, NULL},
        {"./a", SRV_PATH_DOT_SKIP, -EINVAL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[64];
        int rc = srv_path_norm(cases[i].in, out, sizeof(out), cases[i].flags);
        if (rc != cases[i].rc)
            fail_msg("'%s' flags %u: rc %d, wanted %d", cases[i].in, cases[i].flags, rc,
                     cases[i].rc);
        if (cases[i].out)
            assert_string_equal(out, cases[i].out);
    }
    assert_int_equal(srv_path_norm(NULL, (char[8]){0}, 8, 0), -EINVAL);
}

static void test_lengths(void **state)
{
    (void)state;
    char out[6];
    assert_int_equal(srv_path_norm("/abcd", out, 6, 0), 0); /* 5 bytes + NUL */
    assert_string_equal(out, "/abcd");
    assert_int_equal(srv_path_norm("//abcd//", out, 6, 0), 0);
    assert_string_equal(out, "/abcd");
    assert_int_equal(srv_path_norm("/abcde", out, 6, 0), -ENAMETOOLONG);
    assert_int_equal(srv_path_norm("/ab/cd", out, 6, 0), -ENAMETOOLONG);
    assert_int_equal(srv_path_norm("/", out, 2, 0), 0);
    assert_string_equal(out, "/");
    assert_int_equal(srv_path_norm("/", out, 1, 0), -ENAMETOOLONG);
    assert_int_equal(srv_path_norm("/./.", out, 1, SRV_PATH_DOT_SKIP), -ENAMETOOLONG);
}

static void test_within(void **state)
{
    (void)state;
    assert_int_equal(srv_path_within("/", "/"), 1);
    assert_int_equal(srv_path_within("/a", "/"), 1);
    assert_int_equal(srv_path_within("/a/b", "/"), 1);
    assert_int_equal(srv_path_within("/a", "/a"), 2);
    assert_int_equal(srv_path_within("/a/b", "/a"), 3);
    assert_string_equal("/a/b/c" + srv_path_within("/a/b/c", "/a"), "b/c");
    /* whole components only, byte for byte (case matters) */
    assert_int_equal(srv_path_within("/ab", "/a"), -1);
    assert_int_equal(srv_path_within("/a", "/ab"), -1);
    assert_int_equal(srv_path_within("/a", "/a/b"), -1);
    assert_int_equal(srv_path_within("/A/b", "/a"), -1);
    assert_int_equal(srv_path_within("/a-b", "/a"), -1);
    assert_int_equal(srv_path_within("", "/"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_within),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
