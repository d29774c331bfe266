/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for tenants/tenants_net.c: parsing client ranges and matching
 * IPv4, IPv6 and IPv4-mapped client addresses. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tenants.h"

/* Does range @p net (which must parse) admit client address @p addr (IPv6 when
 * it holds a ':')? */
static bool admits(const char *net, const char *addr)
{
    struct tenant_net n;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    assert_int_equal(tenants_net_parse(net, &n), 0);
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, addr, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, addr, &s4->sin_addr), 1);
    }
    return tenants_net_match(&n, (struct sockaddr *)&ss);
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
    static const struct {
        const char *net, *addr;
        bool in;
    } cases[] = {
        {"127.0.0.0/8", "127.0.0.1", true},
        {"127.0.0.0/8", "127.255.1.2", true},
        {"127.0.0.0/8", "128.0.0.1", false},
        {"127.0.0.0/8", "::ffff:127.0.0.5", true}, /* IPv4-mapped */
        {"127.0.0.0/8", "::1", false},
        {"192.168.1.128/25", "192.168.1.200", true},
        {"192.168.1.128/25", "192.168.1.127", false},
        {"::1", "::1", true},
        {"::1", "::2", false},
        {"::1", "127.0.0.1", false},
        {"fd00::/8", "fdff:1::1", true},
        {"fd00::/8", "fe00::1", false},
        {"0.0.0.0/0", "8.8.8.8", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool got = admits(cases[i].net, cases[i].addr);
        if (got != cases[i].in)
            fail_msg("%s admits %s: %d, expected %d", cases[i].net, cases[i].addr, got,
                     cases[i].in);
    }
    struct tenant_net n;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    assert_int_equal(tenants_net_parse("0.0.0.0/0", &n), 0);
    assert_false(tenants_net_match(NULL, (struct sockaddr *)&a));
    assert_false(tenants_net_match(&n, NULL));
}

static void test_overlap(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        bool overlap;
    } cases[] = {
        {"127.0.0.1", "127.0.0.1/32", true},
        {"127.0.0.0/8", "127.0.0.2/32", true}, /* one contains the other */
        {"127.0.0.2/32", "127.0.0.3/32", false},
        {"10.0.0.0/8", "10.1.0.0/16", true},
        {"10.0.0.0/16", "10.1.0.0/16", false},
        {"0.0.0.0/0", "192.168.1.0/24", true},
        {"192.168.1.0/25", "192.168.1.128/25", false},
        {"::1", "::1/128", true},
        {"::1", "127.0.0.1", false},
        {"fd00::/8", "fd12:3456::/32", true},
        {"::/0", "10.0.0.0/8", true},               /* holds the IPv4-mapped addresses */
        {"::ffff:10.0.0.0/104", "10.2.0.0/16", true},
        {"::ffff:10.0.0.0/104", "11.0.0.0/8", false},
        {"fd00::/8", "10.0.0.0/8", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tenant_net a, b;
        assert_int_equal(tenants_net_parse(cases[i].a, &a), 0);
        assert_int_equal(tenants_net_parse(cases[i].b, &b), 0);
        if (tenants_net_overlap(&a, &b) != cases[i].overlap ||
            tenants_net_overlap(&b, &a) != cases[i].overlap)
            fail_msg("%s and %s: overlap expected %d", cases[i].a, cases[i].b,
                     cases[i].overlap);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
