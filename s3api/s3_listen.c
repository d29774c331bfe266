/* SPDX-License-Identifier: Apache-2.0
 * s3_listen: the S3 listener. It accepts on loop 0 and hands each socket to
 * srv_loop_for_fd() (round-robin, or by the CPU its packets
 * arrive on with loop_cpu_affinity), where it becomes a connection (s3_conn.c); past
 * s3_max_conns it answers 503 and closes; when accept fails (out of file
 * descriptors) it pauses. s3_server_stop() closes every connection on its
 * own loop and waits until all are gone.
 * Thread: s3_server_start/stop on the main thread, the listener's callbacks
 * on loop 0. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "s3_conn.h"
#include "s3_server.h"
#include "srv_err.h"
#include "srv_listen.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"
#include "srv_tls.h"

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct s3_server *srv = arg;
    if (srv->stopping) {
        evutil_closesocket(fd);
        return;
    }
    if (atomic_load(&srv->nconns) >= srv->max_conns) {
        char busy[200];
        int bl = snprintf(busy, sizeof(busy),
                          "HTTP/1.1 503 Service Unavailable\r\nx-amz-request-id: %08X%012" PRIX64
                          "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                          srv->instance,
                          (uint64_t)(atomic_fetch_add(&srv->seq, 1) & UINT64_C(0xFFFFFFFFFFFF)));
        ssize_t w = send(fd, busy, (size_t)bl, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        evutil_closesocket(fd);
        srv_log_limited(WARN, S3,
                        "req=- tenant=0 connection refused: %d connections open "
                        "(s3_max_conns)",
                        atomic_load(&srv->nconns));
        srv_metrics_op(SRV_PROTO_S3, "ConnRefused", 0, 0, 0, 0, SRV_ETHROTTLE);
        return;
    }
    struct s3_accepted *a = calloc(1, sizeof(*a));
    if (!a) {
        evutil_closesocket(fd);
        return;
    }
    a->srv = srv;
    a->fd = fd;
    a->loop = srv_loop_for_fd(fd);
    if (salen > 0 && (size_t)salen <= sizeof(a->sa))
        memcpy(&a->sa, sa, (size_t)salen);
    atomic_fetch_add(&srv->nconns, 1);
    if (srv_loop_call(a->loop, s3__conn_start, a) != 0) {
        atomic_fetch_sub(&srv->nconns, 1);
        srv_loop_conn_gone(a->loop);
        evutil_closesocket(fd);
        free(a);
    }
}

static int parse_listen(const char *s, struct sockaddr_storage *ss, int *len)
{
    char buf[300];
    if (!s || !*s)
        return -EINVAL;
    if (s[0] == ':')
        snprintf(buf, sizeof(buf), "0.0.0.0%s", s);
    else
        snprintf(buf, sizeof(buf), "%s", s);
    if (!strchr(buf, ':'))
        return -EINVAL;
    /* "localhost:9000" */
    if (strncmp(buf, "localhost:", 10) == 0) {
        char tmp[300];
        snprintf(tmp, sizeof(tmp), "127.0.0.1%s", buf + 9);
        snprintf(buf, sizeof(buf), "%s", tmp);
    }
    *len = (int)sizeof(*ss);
    memset(ss, 0, sizeof(*ss));
    if (evutil_parse_sockaddr_port(buf, (struct sockaddr *)ss, len) != 0)
        return -EINVAL;
    return 0;
}

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

static void render_poll(void *arg, struct evbuffer *out)
{
    struct s3_server *srv = arg;
    evbuffer_add_printf(out,
                        "# HELP s3nfs_s3_loop_poll_hits_total S3 requests an event-loop thread "
                        "found while polling for them (s3_loop_poll_us), without sleeping.\n"
                        "# TYPE s3nfs_s3_loop_poll_hits_total counter\n"
                        "s3nfs_s3_loop_poll_hits_total %llu\n",
                        (unsigned long long)atomic_load(&srv->poll_hits));
}

static void server_free(struct s3_server *srv)
{
    if (srv->metrics_on)
        srv_metrics_remove_renderer(render_poll, srv);
    if (srv->ssl)
        SSL_CTX_free(srv->ssl);
    free(srv->listen);
    free(srv->domain);
    free(srv->region);
    free(srv->anon_tenant);
    free(srv->tls_cert);
    free(srv->tls_key);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    free(srv);
}

static int tls_setup(struct s3_server *srv)
{
    char err[512];
    int rc = srv_tls_server_ctx(srv->tls_cert, srv->tls_key, &srv->ssl, err, sizeof(err));
    if (rc < 0)
        srv_log(ERROR, S3, "req=- tenant=0 %s", err);
    return rc == -ENOMEM ? rc : rc < 0 ? -EIO : 0;
}

int s3_server_start(struct s3_server **out, const struct s3_server_config *cfg, struct core *c,
                    struct tenants *t)
{
    struct sockaddr_storage ss;
    int sslen = 0, rc = 0;
    *out = NULL;
    if (!cfg || !c || !t || srv_loops_count() < 1)
        return -EINVAL;
    if (parse_listen(cfg->listen, &ss, &sslen)) {
        srv_log(ERROR, S3, "req=- tenant=0 bad S3 listen address '%s'",
                cfg->listen ? cfg->listen : "");
        return -EINVAL;
    }
    if ((cfg->tls_cert && !cfg->tls_key) || (!cfg->tls_cert && cfg->tls_key))
        return -EINVAL;
    struct s3_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    srv->listen = xstrdup(cfg->listen);
    srv->domain = cfg->domain && *cfg->domain ? xstrdup(cfg->domain) : NULL;
    srv->region = xstrdup(cfg->region && *cfg->region ? cfg->region : "us-east-1");
    srv->anon_tenant = cfg->anon_tenant && *cfg->anon_tenant ? xstrdup(cfg->anon_tenant) : NULL;
    srv->tls_cert = xstrdup(cfg->tls_cert);
    srv->tls_key = xstrdup(cfg->tls_key);
    srv->max_header_bytes = cfg->max_header_bytes ? cfg->max_header_bytes : 64 * 1024;
    srv->max_object_size = cfg->max_object_size ? cfg->max_object_size : (5ull << 40);
    srv->idle_timeout_s = cfg->idle_timeout_s > 0 ? cfg->idle_timeout_s : 60;
    srv->max_conns = cfg->max_conns > 0 ? cfg->max_conns : 10000;
    srv->loop_poll_us = cfg->loop_poll_us > 0 ? cfg->loop_poll_us : 0;
    srv->core = c;
    srv->tenants = t;
    if (RAND_bytes((unsigned char *)&srv->instance, sizeof(srv->instance)) != 1)
        srv->instance = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    if (srv->tls_cert && (rc = tls_setup(srv)) != 0)
        goto fail;
    struct event_base *base = srv_loop_base(srv_loop_get(0));
    srv->lev = evconnlistener_new_bind(base, on_accept, srv,
                                       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                           LEV_OPT_THREADSAFE | LEV_OPT_CLOSE_ON_EXEC,
                                       srv_listen_backlog(), (struct sockaddr *)&ss, sslen);
    if (!srv->lev) {
        rc = -errno;
        if (rc == 0)
            rc = -EADDRINUSE;
        srv_log(ERROR, S3, "req=- tenant=0 cannot listen on %s: %s", srv->listen, strerror(-rc));
        goto fail;
    }
    /* accept failing (EMFILE and friends) pauses the listener instead of spinning */
    if ((rc = srv_listen_guard(srv->lev, base, SRV_SUB_S3, "S3")) < 0)
        goto fail;
    srv_metrics_add_renderer(render_poll, srv);
    srv->metrics_on = true;
    srv_log(INFO, S3, "req=- tenant=0 S3 listening on %s%s (region %s%s%s)", srv->listen,
            srv->ssl ? " with TLS" : "", srv->region, srv->domain ? ", virtual hosts under " : "",
            srv->domain ? srv->domain : "");
    *out = srv;
    return 0;
fail:
    if (srv->lev)
        evconnlistener_free(srv->lev);
    server_free(srv);
    return rc;
}

static void stop_listener(void *arg)
{
    struct s3_server *srv = arg;
    if (srv->lev) {
        srv_listen_unguard(srv->lev);
        evconnlistener_free(srv->lev);
    }
    srv->lev = NULL;
    pthread_mutex_lock(&srv->lock);
    srv->stop_pending--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

static void stop_conns(void *arg)
{
    struct s3_server *srv = arg;
    struct srv_loop *me = srv_loop_current();
    for (;;) {
        struct s3_conn *victim = NULL;
        pthread_mutex_lock(&srv->lock);
        for (struct s3_conn *c = srv->conns; c; c = c->next)
            if (c->loop == me && !c->dead) {
                victim = c;
                break;
            }
        pthread_mutex_unlock(&srv->lock);
        if (!victim)
            break;
        s3__conn_close(victim);
    }
    pthread_mutex_lock(&srv->lock);
    srv->stop_pending--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

void s3_server_stop(struct s3_server *srv)
{
    if (!srv)
        return;
    srv->stopping = true;
    int n = srv_loops_count();
    pthread_mutex_lock(&srv->lock);
    srv->stop_pending = 1 + n;
    pthread_mutex_unlock(&srv->lock);
    if (srv_loop_call(srv_loop_get(0), stop_listener, srv) != 0)
        stop_listener(srv);
    for (int i = 0; i < n; i++)
        if (srv_loop_call(srv_loop_get(i), stop_conns, srv) != 0) {
            pthread_mutex_lock(&srv->lock);
            srv->stop_pending--;
            pthread_mutex_unlock(&srv->lock);
        }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    bool clean = true;
    pthread_mutex_lock(&srv->lock);
    while (srv->stop_pending > 0 || atomic_load(&srv->nconns) > 0 ||
           atomic_load(&srv->ndetached) > 0) {
        if (pthread_cond_timedwait(&srv->cond, &srv->lock, &dl) == ETIMEDOUT) {
            clean = false;
            break;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    if (!clean) {
        /* Something is still running on a loop: leaking beats a use-after-free. */
        srv_log(WARN, S3, "req=- tenant=0 S3 server stop timed out (%d connections left)",
                atomic_load(&srv->nconns));
        return;
    }
    srv_log(INFO, S3, "req=- tenant=0 S3 listener %s stopped", srv->listen);
    server_free(srv);
}
