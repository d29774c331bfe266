/* SPDX-License-Identifier: Apache-2.0
 * admin: the admin HTTP listener (libevent evhttp) on its own thread.
 *
 *   GET /healthz   200 "ok" once the daemon is ready (503 "starting" before);
 *                  never needs credentials
 *   GET /metrics   Prometheus text (srv_metrics_render); with metrics_auth it
 *                  needs a system admin's credentials, as /api/v1 does
 *   /api/v1/...    JSON REST API (admin_api.c); needs "Authorization: Bearer
 *                  TOKEN" where SHA-256(TOKEN) equals the configured hash, or
 *                  SigV4 with an admin user's key (admin_sigv4.c); 401
 *                  without credentials, 403 with wrong ones
 * With tls_cert/tls_key every connection is HTTPS (OpenSSL bufferevents under
 * evhttp), with the same certificate checks as the S3 listener (srv_tls).
 * The admin thread calls tenants/ and the core directly: admin requests are
 * rare and may block on disk without holding up any front-end loop.
 * Thread: admin_start/admin_stop from the main thread; admin_set_ready any. */
#ifndef ADMIN_H
#define ADMIN_H

#include <stdbool.h>
#include <stdint.h>

struct admin;
struct core;
struct tenants;
struct qos;

struct admin_config {
    const char *listen;           /* "HOST:PORT" / "[V6]:PORT" / ":PORT" */
    uint8_t token_sha256[32];     /* SHA-256 of the bearer token */
    bool have_token;              /* false: /api/v1 answers 401 to everyone */
    const char *tls_cert;         /* PEM certificate chain; NULL or "" = plain HTTP */
    const char *tls_key;          /* PEM private key (required with tls_cert) */
    bool metrics_auth;            /* /metrics needs a system admin's credentials */
};

/** Bind and start the admin thread. @p c, @p t, @p q borrowed (may be NULL:
 * the API answers 503 for resources that need them).
 * @return 0, -EINVAL (bad address), -EADDRINUSE / -errno (bind), -EIO / -errno
 *         (TLS certificate or key cannot be loaded; logged), -ENOMEM. */
int admin_start(struct admin **out, const struct admin_config *cfg, struct core *c,
                struct tenants *t, struct qos *q);
/** Flip /healthz to 200 (true) or 503 (false). */
void admin_set_ready(struct admin *a, bool ready);
/** Stop the thread, close the listener, free. Safe on NULL. */
void admin_stop(struct admin *a);

#endif
