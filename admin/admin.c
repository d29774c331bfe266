/* SPDX-License-Identifier: Apache-2.0
 * admin: the admin listener (see admin.h): its own event_base and thread, an
 * evhttp server (over OpenSSL bufferevents when TLS is on), /healthz, /metrics
 * and the credential checks for /api/v1 (and /metrics with metrics_auth).
 *
 * The token is never stored: the configuration carries its SHA-256, and a
 * request's token is hashed and compared in constant time.
 * Thread: the admin thread runs every handler; start/stop from main. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "admin_int.h"
#include "srv_addr.h"
#include "srv_err.h"
#include "srv_listen.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_tls.h"

static const struct admin_err_info admin_errs[] = {
#define ADMIN_ERR_ROW(name, code, status) {code, status},
    ADMIN_ERR_MAP(ADMIN_ERR_ROW)
#undef ADMIN_ERR_ROW
};

static void send_error(struct evhttp_request *req, int status, const char *code, const char *msg)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    /* code and msg are ours (static or escaped by the caller), never raw input. */
    evbuffer_add_printf(b, "{\"error\":\"%s\",\"message\":\"", code);
    for (const char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\\')
            evbuffer_add_printf(b, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            evbuffer_add_printf(b, "\\u%04x", (unsigned char)*p);
        else
            evbuffer_add(b, p, 1);
    }
    evbuffer_add_printf(b, "\"}\n");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
}

const struct admin_err_info *admin__err_table(size_t *n)
{
    *n = sizeof(admin_errs) / sizeof(admin_errs[0]);
    return admin_errs;
}

int admin__error(struct evhttp_request *req, enum admin_err e, const char *msg)
{
    send_error(req, admin_errs[e].status, admin_errs[e].code, msg);
    return admin_errs[e].status;
}

int admin__error_of(struct evhttp_request *req, int err, const char *msg)
{
    const struct srv_err_info *e = srv_err_info(err);
    send_error(req, e->admin_http, e->admin, msg ? msg : e->msg);
    return e->admin_http;
}

/* Authenticate an API request. @return 0 (who set), 401 (no credentials) or
 * 403 (credentials given but wrong; *why says how). */
static int authenticate(struct admin *a, struct evhttp_request *req, struct admin_caller *who,
                        const char **why)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    *why = "credentials needed: Authorization: Bearer TOKEN, or AWS4-HMAC-SHA256 with an "
           "admin user's access key";
    if (!h || !*h)
        return 401;
    if (strncasecmp(h, "AWS4-HMAC-SHA256 ", 17) == 0)
        return admin__sigv4_check(a, req, h + 17, who, why) == 0 ? 0 : 403;
    if (strncasecmp(h, "Bearer ", 7) != 0)
        return 401;
    const char *tok = h + 7;
    while (*tok == ' ')
        tok++;
    uint8_t d[32];
    SHA256((const unsigned char *)tok, strlen(tok), d);
    if (!a->cfg.have_token || CRYPTO_memcmp(d, a->cfg.token_sha256, 32) != 0) {
        *why = "wrong bearer token";
        return 403;
    }
    memset(who, 0, sizeof(*who));
    snprintf(who->name, sizeof(who->name), "token");
    return 0;
}

/* Check the credentials of a request to @p path that needs them. @return true
 * (who set), or false with 401 or 403 sent and *status set. */
static bool admit(struct admin *a, struct evhttp_request *req, const char *path,
                  struct admin_caller *who, int *status)
{
    const char *why;
    *status = authenticate(a, req, who, &why);
    if (*status == 401) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"s3nfs-admin\"");
        admin__error(req, ADMIN_E_UNAUTHORIZED, why);
        srv_log(INFO, ADMIN, "401 %s from an unauthenticated client", path);
        return false;
    }
    if (*status == 403) {
        admin__error_of(req, -EACCES, why);
        srv_log(INFO, ADMIN, "403 %s: %s", path, why);
        return false;
    }
    return true;
}

static void send_text(struct evhttp_request *req, int status, const char *ctype,
                      struct evbuffer *body)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    evhttp_send_reply(req, status, NULL, body);
}

static void handle(struct evhttp_request *req, void *arg)
{
    struct admin *a = arg;
    uint64_t t0 = srv_now_us();
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const char *op = "other";
    int status = 200;

    if (!path || !*path)
        path = "/";
    if (strcmp(path, "/healthz") == 0) {
        op = "healthz";
        if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
            status = admin__error(req, ADMIN_E_METHOD_NOT_ALLOWED, "use GET");
            goto out;
        }
        struct evbuffer *b = evbuffer_new();
        bool ready = __atomic_load_n(&a->ready, __ATOMIC_ACQUIRE);
        evbuffer_add_printf(b, ready ? "ok\n" : "starting\n");
        status = ready ? 200 : 503;
        send_text(req, status, "text/plain; charset=utf-8", b);
        evbuffer_free(b);
        goto out;
    }
    if (strcmp(path, "/metrics") == 0) {
        op = "metrics";
        if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
            status = admin__error(req, ADMIN_E_METHOD_NOT_ALLOWED, "use GET");
            goto out;
        }
        struct admin_caller who;
        if (a->cfg.metrics_auth) {
            if (!admit(a, req, path, &who, &status))
                goto out;
            if (who.tenant != 0) {
                status =
                    admin__error_of(req, -EACCES,
                                    "/metrics shows every tenant: it needs a system admin's "
                                    "credentials (the admin token or a bootstrap admin's key)");
                srv_log(INFO, ADMIN, "403 %s: %s is not a system admin", path, who.name);
                goto out;
            }
        }
        struct evbuffer *b = evbuffer_new();
        srv_metrics_render(b);
        send_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", b);
        evbuffer_free(b);
        goto out;
    }
    if (strncmp(path, "/api/v1/", 8) == 0 || strcmp(path, "/api/v1") == 0) {
        op = "api";
        struct admin_caller who;
        if (!admit(a, req, path, &who, &status))
            goto out;
        admin__api(a, req, path + 7, &who);
        status = 0; /* logged by the API */
        goto out;
    }
    status = admin__error_of(req, -ENOENT, "no such resource");
out:
    srv_metrics_op(SRV_PROTO_ADMIN, op, 0, 0, 0, srv_now_us() - t0,
                   status >= 400 ? -EINVAL : 0);
}

static void *admin_main(void *arg)
{
    struct admin *a = arg;
    event_base_loop(a->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* evhttp's connection factory under TLS: every accepted socket gets an
 * OpenSSL bufferevent in the accepting state. It may not answer NULL (evhttp
 * would fall back to plain HTTP), so running out of memory here is fatal. */
static struct bufferevent *tls_bev(struct event_base *base, void *arg)
{
    struct admin *a = arg;
    SSL *ssl = SSL_new(a->ssl);
    struct bufferevent *bev =
        ssl ? bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE)
            : NULL;
    if (!bev) {
        srv_log(CRIT, ADMIN, "out of memory making a TLS connection");
        abort();
    }
    /* Clients that close without close_notify are common; not an error. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

static void free_admin(struct admin *a)
{
    if (a->bound)
        srv_listen_unguard(evhttp_bound_socket_get_listener(a->bound));
    if (a->http)
        evhttp_free(a->http);
    if (a->ssl)
        SSL_CTX_free(a->ssl);
    if (a->base)
        event_base_free(a->base);
    free(a);
}

int admin_start(struct admin **out, const struct admin_config *cfg, struct core *c,
                struct tenants *t, struct qos *q)
{
    int rc;
    char host[256];
    int port;
    struct admin *a;

    if (!cfg->listen || srv_addr_split_listen(cfg->listen, host, sizeof(host), &port) < 0)
        return -EINVAL;
    a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->cfg = *cfg;
    a->cfg.listen = NULL;
    a->cfg.tls_cert = a->cfg.tls_key = NULL;
    if (cfg->tls_cert && *cfg->tls_cert) {
        char err[512];
        rc = srv_tls_server_ctx(cfg->tls_cert, cfg->tls_key, &a->ssl, err, sizeof(err));
        if (rc < 0) {
            srv_log(ERROR, ADMIN, "%s", err);
            goto fail;
        }
    }
    a->core = c;
    a->tenants = t;
    a->qos = q;
    admin__qos_uids_sync(a);
    /* admin_stop() breaks the loop from another thread: the base must be
     * created with libevent's threading support on (idempotent). */
    if (evthread_use_pthreads() < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    a->base = event_base_new();
    a->http = a->base ? evhttp_new(a->base) : NULL;
    if (!a->http) {
        rc = -ENOMEM;
        goto fail;
    }
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(a->http, 64 * 1024);
    evhttp_set_max_body_size(a->http, 1024 * 1024);
    evhttp_set_timeout(a->http, 30);
    evhttp_set_gencb(a->http, handle, a);
    if (a->ssl)
        evhttp_set_bevcb(a->http, tls_bev, a);
    errno = 0;
    a->bound = evhttp_bind_socket_with_handle(a->http, *host ? host : "0.0.0.0", (uint16_t)port);
    if (!a->bound) {
        rc = errno ? -errno : -EADDRINUSE;
        srv_log(ERROR, ADMIN, "cannot listen on %s: %s", cfg->listen, strerror(-rc));
        goto fail;
    }
    /* evhttp listens with libevent's backlog of 128; listen(2) again sets ours. */
    listen(evhttp_bound_socket_get_fd(a->bound), srv_listen_backlog());
    rc = srv_listen_guard(evhttp_bound_socket_get_listener(a->bound), a->base, SRV_SUB_ADMIN,
                          "admin");
    if (rc < 0)
        goto fail;
    rc = -pthread_create(&a->thread, NULL, admin_main, a);
    if (rc < 0)
        goto fail;
    a->started = true;
    srv_log(INFO, ADMIN, "admin listener on %s%s%s", cfg->listen, a->ssl ? " with TLS" : "",
            cfg->metrics_auth ? " (/metrics needs credentials)" : "");
    *out = a;
    return 0;
fail:
    free_admin(a);
    return rc;
}

void admin_set_ready(struct admin *a, bool ready)
{
    if (a)
        __atomic_store_n(&a->ready, ready ? 1 : 0, __ATOMIC_RELEASE);
}

void admin_stop(struct admin *a)
{
    if (!a)
        return;
    if (a->started) {
        event_base_loopbreak(a->base);
        pthread_join(a->thread, NULL);
    }
    free_admin(a);
}
