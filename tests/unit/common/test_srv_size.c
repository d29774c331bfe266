/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_size.c: the SIZE syntax of the config file and
 * s3nfsctl, its errors, and that formatting reads back. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "srv_size.h"

static uint64_t size_of(const char *s)
{
    uint64_t v = 0xdead;
    assert_int_equal(srv_size_parse(s, &v), 0);
    return v;
}

static void test_parse_units(void **state)
{
    (void)state;
    assert_true(size_of("0") == 0);
    assert_true(size_of("4096") == 4096);
    assert_true(size_of("64k") == 64 << 10);
    assert_true(size_of("64K") == 64 << 10);
    assert_true(size_of("64KiB") == 64 << 10);
    assert_true(size_of("64kb") == 64 << 10);
    assert_true(size_of("16M") == 16ULL << 20);
    assert_true(size_of("4 GiB") == 4ULL << 30);
    assert_true(size_of("5T") == 5ULL << 40);
    assert_true(size_of("5tib") == 5ULL << 40);
    assert_true(size_of("12B") == 12);
    assert_true(size_of("12 b") == 12);
    assert_true(size_of("18446744073709551615") == UINT64_MAX);
    assert_true(size_of("16777215T") == 16777215ULL << 40);
}

static void test_parse_errors(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(srv_size_parse("", &v), -EINVAL);
    assert_int_equal(srv_size_parse("-1", &v), -EINVAL);
    assert_int_equal(srv_size_parse(" 5", &v), -EINVAL);
    assert_int_equal(srv_size_parse("+5", &v), -EINVAL);
    assert_int_equal(srv_size_parse("lots", &v), -EINVAL);
    assert_int_equal(srv_size_parse("5X", &v), -EINVAL);
    assert_int_equal(srv_size_parse("5KiBs", &v), -EINVAL);
    assert_int_equal(srv_size_parse("5Bx", &v), -EINVAL);
    assert_int_equal(srv_size_parse("5 K B", &v), -EINVAL);
    assert_int_equal(srv_size_parse("18446744073709551616", &v), -ERANGE);
    assert_int_equal(srv_size_parse("16777216T", &v), -ERANGE);
    assert_int_equal(srv_size_parse("99999999999999999999T", &v), -ERANGE);
    assert_true(v == 7); /* untouched on error */
}

static void test_format_roundtrip(void **state)
{
    (void)state;
    static const struct {
        uint64_t v;
        const char *text;
    } cases[] = {
        {0, "0"},           {1, "1"},           {4097, "4097"},
        {1024, "1KiB"},     {65536, "64KiB"},   {3ULL << 20, "3MiB"},
        {4ULL << 30, "4GiB"}, {5ULL << 40, "5TiB"}, {(1ULL << 40) + 1024, "1073741825KiB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        srv_size_format(cases[i].v, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
        assert_true(size_of(buf) == cases[i].v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_units),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_format_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
