/* SPDX-License-Identifier: Apache-2.0
 * tenants_net: client address ranges of NFS exports.
 *
 * A range is an address and a prefix length; host bits are cleared when it
 * is parsed, so "10.1.2.3/8" and "10.0.0.0/8" are the same range. An
 * IPv4-mapped IPv6 client address (::ffff:a.b.c.d) matches IPv4 ranges, as a
 * dual-stack listener reports IPv4 clients that way. For the same reason two
 * ranges overlap when an IPv6 range holds the IPv4-mapped form of an IPv4
 * range's addresses (::/0 overlaps 10.0.0.0/8).
 * Thread: any (pure functions). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenants.h"

static void clear_host_bits(uint8_t *addr, size_t len, unsigned prefix)
{
    for (size_t i = 0; i < len; i++) {
        unsigned bits = prefix > 8 * i ? prefix - 8 * (unsigned)i : 0;
        if (bits >= 8)
            continue;
        addr[i] &= (uint8_t)(0xff00u >> bits);
    }
}

int tenants_net_parse(const char *s, struct tenant_net *out)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *slash;
    size_t hl;
    unsigned long prefix;
    struct tenant_net n;

    if (!s || !*s)
        return -EINVAL;
    memset(&n, 0, sizeof(n));
    slash = strchr(s, '/');
    hl = slash ? (size_t)(slash - s) : strlen(s);
    if (hl == 0 || hl >= sizeof(host))
        return -EINVAL;
    memcpy(host, s, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, n.addr) == 1) {
        n.family = AF_INET;
        prefix = 32;
    } else if (inet_pton(AF_INET6, host, n.addr) == 1) {
        n.family = AF_INET6;
        prefix = 128;
    } else {
        return -EINVAL;
    }
    if (slash) {
        const char *p = slash + 1;
        char *end;
        if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 3)
            return -EINVAL;
        unsigned long v = strtoul(p, &end, 10);
        if (v > prefix)
            return -EINVAL;
        prefix = v;
    }
    n.prefix = (uint8_t)prefix;
    clear_host_bits(n.addr, n.family == AF_INET ? 4 : 16, n.prefix);
    *out = n;
    return 0;
}

void tenants_net_format(const struct tenant_net *n, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(n->family, n->addr, a, sizeof(a))) {
        snprintf(buf, len, "?");
        return;
    }
    snprintf(buf, len, "%s/%u", a, n->prefix);
}

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;
    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff00u >> rest);
    return (a[full] & mask) == (b[full] & mask);
}

bool tenants_net_match(const struct tenant_net *n, const struct sockaddr *sa)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!n || !sa)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        if (n->family != AF_INET)
            return false;
        return prefix_eq(n->addr, (const uint8_t *)&in->sin_addr, n->prefix);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *a = in6->sin6_addr.s6_addr;
        if (n->family == AF_INET6)
            return prefix_eq(n->addr, a, n->prefix);
        if (n->family == AF_INET && memcmp(a, v4mapped, 12) == 0)
            return prefix_eq(n->addr, a + 12, n->prefix);
    }
    return false;
}

/* @p n as an IPv6 range: an IPv4 range becomes its IPv4-mapped form. */
static void net_as_v6(const struct tenant_net *n, uint8_t addr[16], unsigned *prefix)
{
    if (n->family == AF_INET6) {
        memcpy(addr, n->addr, 16);
        *prefix = n->prefix;
        return;
    }
    memset(addr, 0, 10);
    addr[10] = addr[11] = 0xff;
    memcpy(addr + 12, n->addr, 4);
    *prefix = 96u + n->prefix;
}

bool tenants_net_overlap(const struct tenant_net *a, const struct tenant_net *b)
{
    uint8_t aa[16], ba[16];
    unsigned ap, bp;
    net_as_v6(a, aa, &ap);
    net_as_v6(b, ba, &bp);
    /* Two prefixes share an address exactly when one contains the other. */
    return prefix_eq(aa, ba, ap < bp ? ap : bp);
}
