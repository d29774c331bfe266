/* SPDX-License-Identifier: Apache-2.0
 * tier_remote: endpoint parsing, address classification (the SSRF rule for
 * tenants' remotes) and the reachability check of a remote. See
 * tier_remote.h. Thread: any; resolve and check block. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "srv_err.h"
#include "tier_remote.h"
#include "tier_s3.h"

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    if (!why || !whylen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

int tier_endpoint_parse(const char *ep, struct tier_endpoint *out, char *why, size_t whylen)
{
    const char *h;
    memset(out, 0, sizeof(*out));
    if (!ep) {
        say(why, whylen, "an endpoint is required");
        return -EINVAL;
    }
    if (strncasecmp(ep, "http://", 7) == 0) {
        h = ep + 7;
        out->port = 80;
    } else if (strncasecmp(ep, "https://", 8) == 0) {
        h = ep + 8;
        out->https = true;
        out->port = 443;
    } else {
        say(why, whylen, "endpoint '%s' must start with http:// or https://", ep);
        return -EINVAL;
    }
    const char *end = h + strcspn(h, "/?#");
    if (*end && strcmp(end, "/") != 0) {
        say(why, whylen, "endpoint '%s' must not have a path or query (the bucket is separate)",
            ep);
        return -EINVAL;
    }
    if (memchr(h, '@', (size_t)(end - h))) {
        say(why, whylen, "endpoint '%s' must not carry user information", ep);
        return -EINVAL;
    }
    const char *hs = h, *he, *colon;
    if (*h == '[') {
        hs = h + 1;
        he = memchr(hs, ']', (size_t)(end - hs));
        if (!he) {
            say(why, whylen, "endpoint '%s': unclosed '['", ep);
            return -EINVAL;
        }
        if (he + 1 < end && he[1] != ':') {
            say(why, whylen, "endpoint '%s': bad host", ep);
            return -EINVAL;
        }
        colon = he + 1 < end ? he + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        he = colon ? colon : end;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= sizeof(out->host)) {
        say(why, whylen, "endpoint '%s': bad host", ep);
        return -EINVAL;
    }
    for (const char *p = hs; p < he; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c >= 0x7f || c == '%' || c == '\\') {
            say(why, whylen, "endpoint '%s': bad character in the host", ep);
            return -EINVAL;
        }
    }
    memcpy(out->host, hs, hl);
    out->host[hl] = '\0';
    if (colon) {
        char *e;
        long p = strtol(colon + 1, &e, 10);
        if (colon[1] < '0' || colon[1] > '9' || e != end || p < 1 || p > 65535) {
            say(why, whylen, "endpoint '%s': bad port", ep);
            return -EINVAL;
        }
        out->port = (int)p;
    }
    return 0;
}

static uint32_t v4_of(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The IPv4 address an IPv6 one carries (mapped, compatible, NAT64), or false. */
static bool embedded_v4(const struct sockaddr *sa, uint32_t *v4)
{
    if (sa->sa_family == AF_INET) {
        *v4 = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        return true;
    }
    if (sa->sa_family != AF_INET6)
        return false;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t zero[12];
    if (memcmp(b, mapped, 12) && memcmp(b, nat64, 12) && memcmp(b, zero, 12))
        return false;
    *v4 = v4_of(b + 12);
    return true;
}

/* Is @p sa one of this host's interface addresses? */
static bool is_local(const struct sockaddr *sa)
{
    struct ifaddrs *ifs = NULL;
    bool found = false;
    uint32_t want4 = 0;
    bool v4 = embedded_v4(sa, &want4);
    if (getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        uint32_t have4;
        if (v4 && embedded_v4(i->ifa_addr, &have4) && i->ifa_addr->sa_family == AF_INET)
            found = have4 == want4;
        else if (!v4 && sa->sa_family == AF_INET6 && i->ifa_addr->sa_family == AF_INET6)
            found = memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
                           &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

int tier_remote_resolve(const struct tier_s3_config *cfg, bool allow_private, char *addr,
                        size_t addrlen, char *why, size_t whylen)
{
    struct tier_endpoint ep;
    int rc = tier_endpoint_parse(cfg->endpoint, &ep, why, whylen);
    if (rc)
        return rc;
    char name[TIER_REMOTE_HOST_MAX + 256];
    if (cfg->virtual_host && cfg->bucket)
        snprintf(name, sizeof(name), "%s.%s", cfg->bucket, ep.host);
    else
        snprintf(name, sizeof(name), "%s", ep.host);
    char port[8];
    snprintf(port, sizeof(port), "%d", ep.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gr = getaddrinfo(name, port, &hints, &ai);
    if (gr != 0 || !ai) {
        say(why, whylen, "cannot resolve '%s': %s", name, gai_strerror(gr));
        return -EHOSTUNREACH;
    }
    rc = 0;
    for (struct addrinfo *a = ai; a && rc == 0; a = a->ai_next) {
        char text[TIER_REMOTE_ADDR_MAX];
        if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), NULL, 0, NI_NUMERICHOST) !=
            0) {
            say(why, whylen, "cannot use an address of '%s'", name);
            rc = -EHOSTUNREACH;
            break;
        }
        if (a == ai) {
            if (strlen(text) >= addrlen) {
                rc = -EINVAL;
                break;
            }
            memcpy(addr, text, strlen(text) + 1);
        }
        if (allow_private)
            continue;
        enum srv_addr_class c = srv_addr_classify(a->ai_addr);
        if (c == SRV_ADDR_REMOTE && is_local(a->ai_addr))
            c = SRV_ADDR_LOCAL;
        if (c != SRV_ADDR_REMOTE) {
            say(why, whylen,
                "'%s' resolves to %s (%s): a tenant's remote may not reach this host or "
                "its local networks (the operator may allow it: tier_allow_private_remotes)",
                name, text, srv_addr_class_name(c));
            rc = -EACCES;
        }
    }
    freeaddrinfo(ai);
    return rc;
}

/* ---- the check, on a private loop ---- */

struct check {
    struct event_base *base;
    bool done;
    int err;
    char msg[320];
};

static void check_done(void *arg, struct tier_s3_result *res)
{
    struct check *k = arg;
    k->err = res->err;
    snprintf(k->msg, sizeof(k->msg), "%s", res->message);
    k->done = true;
    event_base_loopbreak(k->base);
}

int tier_remote_check(const struct tier_s3_config *cfg, char *why, size_t whylen)
{
    struct check k = {0};
    struct tier_s3 *s3 = NULL;
    k.base = event_base_new();
    if (!k.base) {
        say(why, whylen, "out of memory");
        return -ENOMEM;
    }
    int rc = tier_s3_new(cfg, k.base, &s3, why, whylen);
    if (rc)
        goto out;
    struct tier_s3_op op = {.code = TIER_S3_CHECK, .done = check_done, .arg = &k};
    rc = tier_s3_start(s3, &op, NULL);
    if (rc) {
        say(why, whylen, "cannot start the check: %s", srv_strerror(rc));
        goto out;
    }
    while (!k.done)
        if (event_base_loop(k.base, EVLOOP_ONCE) < 0)
            break;
    if (!k.done) {
        tier_s3_free(s3); /* runs the done callback with -ECANCELED */
        s3 = NULL;
    }
    rc = k.err;
    if (rc)
        say(why, whylen, "%s", k.msg[0] ? k.msg : srv_strerror(rc));
out:
    tier_s3_free(s3);
    event_base_free(k.base);
    return rc;
}
