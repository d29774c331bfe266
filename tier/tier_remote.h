/* SPDX-License-Identifier: Apache-2.0
 * tier_remote: what the daemon checks about a remote before it stores or
 * uses one: the endpoint's form, where its host name leads (a tenant's remote
 * must not reach this host's own loopback, link-local, unspecified or
 * interface addresses: server-side request forgery), and whether the remote
 * answers with the bucket and the credentials given (tier_s3's CHECK).
 *
 * The records themselves (names, owners, sealed secrets) are kept by tenants/
 * (tenants_remote.c); this module holds no state.
 * Thread: any. tier_remote_resolve() and tier_remote_check() block (name
 * resolution; a private event loop that runs one request): call them where
 * blocking is fine (the admin thread, a worker), never on a front end's loop. */
#ifndef TIER_REMOTE_H
#define TIER_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "srv_addr.h"

struct tier_s3_config;

#define TIER_REMOTE_HOST_MAX 256
#define TIER_REMOTE_ADDR_MAX 64 /* a numeric address as text, NUL included */

/** An endpoint "http[s]://host[:port]" taken apart. */
struct tier_endpoint {
    bool https;
    char host[TIER_REMOTE_HOST_MAX]; /* without brackets for IPv6 literals */
    int port;                        /* 80 / 443 when not given */
};

/** Parse @p ep ("http://h", "https://h:9000", "http://[::1]:80"; a trailing '/' is
 * allowed, a path is not). Pure.
 * @param[out] why on error, a message for people (@p whylen bytes; may be NULL).
 * @return 0, -EINVAL. */
int tier_endpoint_parse(const char *ep, struct tier_endpoint *out, char *why, size_t whylen);

/** Resolve the host the client for @p cfg would connect to (the endpoint's host, or
 * bucket.host with virtual-host addressing), blocking. Unless @p allow_private,
 * refuse when any address it resolves to is loopback, link-local, unspecified,
 * multicast or one of this host's interface addresses.
 * @param[out] addr the first address as numeric text (@p addrlen >=
 *             TIER_REMOTE_ADDR_MAX): connect there (tier_s3_config.connect_host) so
 *             that the name cannot lead elsewhere between this check and the connect.
 * @param[out] why on error, a message for people.
 * @return 0, -EINVAL (malformed endpoint), -EHOSTUNREACH (does not resolve),
 *         -EACCES (refused: @p why names the address and why). */
int tier_remote_resolve(const struct tier_s3_config *cfg, bool allow_private, char *addr,
                        size_t addrlen, char *why, size_t whylen);

/** Check that the remote of @p cfg answers: a client on a private event loop runs
 * TIER_S3_CHECK (list one key under the prefix) and waits for it; the timeouts of
 * @p cfg bound the wait.
 * @param[out] why on error, the client's message for people ("cannot connect to
 *             ...", "the remote refused the credentials (...)").
 * @return 0, or the client's error (tier_s3.h: -ECONNREFUSED, -EHOSTUNREACH,
 *         -ETIMEDOUT, SRV_ETLS, SRV_EAUTH, -EACCES, SRV_ENOBUCKET, -EINVAL, ...). */
int tier_remote_check(const struct tier_s3_config *cfg, char *why, size_t whylen);

#endif
