/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for tenants/tenants_net.c: parsing client ranges and matching
 * IPv4, IPv6 and IPv4-mapped client addresses. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tenants.h"

static struct sockaddr_in v4(const char *a)
{
    struct sockaddr_in s;
    memset(&s, 0, sizeof(s));
    s.sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
    return s;
}

static struct sockaddr_in6 v6(const char *a)
{
    struct sockaddr_in6 s;
    memset(&s, 0, sizeof(s));
    s.sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
    return s;
}

static void test_parse(void **state)
{
    (void)state;
    struct tenant_net n;
    char buf[64];
    assert_int_equal(tenants_net_parse("10.0.0.0/8", &n), 0);
    assert_int_equal(n.family, AF_INET);
    assert_int_equal(n.prefix, 8);
    assert_int_equal(tenants_net_parse("127.0.0.1", &n), 0);
    assert_int_equal(n.prefix, 32);
    assert_int_equal(tenants_net_parse("::1", &n), 0);
    assert_int_equal(n.family, AF_INET6);
    assert_int_equal(n.prefix, 128);
    /* Host bits are cleared. */
    assert_int_equal(tenants_net_parse("10.1.2.3/8", &n), 0);
    tenants_net_format(&n, buf, sizeof(buf));
    assert_string_equal(buf, "10.0.0.0/8");
    assert_int_equal(tenants_net_parse("fd00:1:2:3::9/48", &n), 0);
    tenants_net_format(&n, buf, sizeof(buf));
    assert_string_equal(buf, "fd00:1:2::/48");
    assert_int_equal(tenants_net_parse("0.0.0.0/0", &n), 0);
    assert_int_equal(n.prefix, 0);
    assert_int_equal(tenants_net_parse("192.168.1.0/25", &n), 0);

    assert_int_equal(tenants_net_parse("10.0.0.0/33", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("::/129", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("10.0.0.0/", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("10.0.0.0/-1", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("10.0.0.0/8x", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("10.0.0/8", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("host.example", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("", &n), -EINVAL);
    assert_int_equal(tenants_net_parse("/8", &n), -EINVAL);
    assert_int_equal(tenants_net_parse(NULL, &n), -EINVAL);
}

static void test_match(void **state)
{
    (void)state;
    struct tenant_net n;
    struct sockaddr_in a;
    struct sockaddr_in6 b;

    assert_int_equal(tenants_net_parse("127.0.0.0/8", &n), 0);
    a = v4("127.0.0.1");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&a));
    a = v4("127.255.1.2");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&a));
    a = v4("128.0.0.1");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&a));
    b = v6("::ffff:127.0.0.5"); /* IPv4-mapped */
    assert_true(tenants_net_match(&n, (struct sockaddr *)&b));
    b = v6("::1");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&b));

    assert_int_equal(tenants_net_parse("192.168.1.128/25", &n), 0);
    a = v4("192.168.1.200");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&a));
    a = v4("192.168.1.127");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&a));

    assert_int_equal(tenants_net_parse("::1", &n), 0);
    b = v6("::1");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&b));
    b = v6("::2");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&b));
    a = v4("127.0.0.1");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&a));

    assert_int_equal(tenants_net_parse("fd00::/8", &n), 0);
    b = v6("fdff:1::1");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&b));
    b = v6("fe00::1");
    assert_false(tenants_net_match(&n, (struct sockaddr *)&b));

    assert_int_equal(tenants_net_parse("0.0.0.0/0", &n), 0);
    a = v4("8.8.8.8");
    assert_true(tenants_net_match(&n, (struct sockaddr *)&a));
    assert_false(tenants_net_match(NULL, (struct sockaddr *)&a));
    assert_false(tenants_net_match(&n, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
