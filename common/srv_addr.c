/* SPDX-License-Identifier: Apache-2.0
 * srv_addr: listen addresses ("HOST:PORT", "[V6]:PORT", ":PORT"), parsed the
 * same way by the config table, the daemon and the admin listener.
 * Thread: any; pure functions. */
#include "srv_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_addr_split_listen(const char *value, char *host, size_t hostlen, int *port)
{
    const char *colon;
    const char *h = value;
    size_t hl;

    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = value + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
        if (hl == 0)
            return -EINVAL;
    } else {
        colon = strrchr(value, ':');
        if (!colon)
            return -EINVAL;
        hl = (size_t)(colon - value);
        if (memchr(value, ':', hl))
            return -EINVAL; /* bare IPv6 needs brackets */
    }
    if (hl >= hostlen)
        return -EINVAL;
    const char *ps = colon + 1;
    if (!*ps || strspn(ps, "0123456789") != strlen(ps) || strlen(ps) > 5)
        return -EINVAL;
    int p = atoi(ps);
    if (p < 1 || p > 65535)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = p;
    return 0;
}

int srv_addr_check_listen(const char *value, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (srv_addr_split_listen(value, host, sizeof(host), &port) < 0) {
        snprintf(err, errlen, "expected HOST:PORT, [IPV6]:PORT or :PORT with port 1..65535");
        return -EINVAL;
    }
    return 0;
}

static enum srv_addr_class classify_v4(uint32_t a)
{
    if ((a >> 24) == 127)
        return SRV_ADDR_LOOPBACK;
    if ((a >> 24) == 0)
        return SRV_ADDR_UNSPEC;
    if ((a >> 16) == 0xa9fe)
        return SRV_ADDR_LINKLOCAL;
    if ((a >> 28) == 0xe || a == 0xffffffffu)
        return SRV_ADDR_MULTICAST;
    return SRV_ADDR_REMOTE;
}

static uint32_t v4_of(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

enum srv_addr_class srv_addr_classify(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        return classify_v4(ntohl(s4->sin_addr.s_addr));
    }
    if (sa->sa_family != AF_INET6)
        return SRV_ADDR_UNSPEC;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t zero[16];
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(b, zero, 16) == 0)
        return SRV_ADDR_UNSPEC;
    if (memcmp(b, zero, 15) == 0 && b[15] == 1)
        return SRV_ADDR_LOOPBACK;
    if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0 || memcmp(b, zero, 12) == 0)
        return classify_v4(v4_of(b + 12)); /* mapped, NAT64 or IPv4-compatible */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return SRV_ADDR_LINKLOCAL;
    if (b[0] == 0xff)
        return SRV_ADDR_MULTICAST;
    return SRV_ADDR_REMOTE;
}

const char *srv_addr_class_name(enum srv_addr_class c)
{
    switch (c) {
    case SRV_ADDR_REMOTE:
        return "remote";
    case SRV_ADDR_LOOPBACK:
        return "loopback";
    case SRV_ADDR_LINKLOCAL:
        return "link-local";
    case SRV_ADDR_UNSPEC:
        return "unspecified";
    case SRV_ADDR_MULTICAST:
        return "multicast or broadcast";
    case SRV_ADDR_LOCAL:
        return "an address of this host";
    }
    return "?";
}
