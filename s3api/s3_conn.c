/* SPDX-License-Identifier: Apache-2.0
 * s3_conn: the S3 listener and its HTTP/1.1 connections on libevent
 * bufferevents (plain TCP or OpenSSL on the same path).
 *
 * The listener accepts on loop 0 and hands each socket to srv_loop_next();
 * a connection then lives on that loop. Requests on a connection are handled
 * strictly one after another (pipelined requests wait, parsed but unanswered,
 * in the input buffer), so responses leave in request order.
 *
 * Per request: headers parsed (bounded, 431) -> authenticated (SigV4, on the
 * loop thread: the key lookup is an in-memory cache) -> routed -> admitted by
 * QoS -> the op's work runs on a worker (srv_work_submit). Upload bodies
 * stream: payload bytes (after HTTP chunked and aws-chunked decoding) fill a
 * page-aligned 4 MiB chunk buffer, which goes to two workers (one hashes, one
 * calls core_upload_write) while the connection fills a second one; while
 * both are taken the socket is not read (TCP back-pressure: at most two
 * chunks per connection). A plain-TCP body with a Content-Length is read
 * straight into the chunk with recv() (no bufferevent, no copy; aws-chunked
 * framing is decoded in place), the others go through the bufferevent and
 * are copied in. Large GETs stream the
 * same way backwards: 1 MiB core_reads, two in flight on workers, appended to
 * the output in offset order while it holds less than 4 MiB (read-ahead keeps
 * the socket busy during a read). Nothing is visible until the op commits
 * after the last byte, so a client that disconnects mid-upload leaves nothing
 * behind.
 *
 * Lifetime: a connection with work in flight is only marked dead when its
 * socket goes; the work's done callback frees it. s3_server_stop() closes
 * every connection on its own loop and waits until all are gone.
 * Thread: listener callbacks on loop 0, a connection on its loop; the worker
 * functions touch only their struct s3_ctx. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "s3_internal.h"
#include "s3_server.h"
#include "srv_err.h"
#include "srv_listen.h"
#include "srv_log.h"
#include "srv_tls.h"
#include "srv_loop.h"
#include "srv_metrics.h"
#include "qos_admit.h"
#include "tenants.h"

/* Upload bytes per worker write: amortizes the store's per-write cost
 * (measured ~1.4x the throughput of 1 MiB writes). */
#define S3_WCHUNK (4u << 20)
#define S3_RCHUNK (1u << 20)       /* GET bytes per worker read */
#define S3_FEED_SLICE (256u << 10) /* parser input per step while streaming a body */
#define S3_IN_HIGH (1u << 20)      /* libevent stops reading when input exceeds this */
#define S3_OUT_LOW (4u << 20)      /* next GET read while output is below this (read-ahead) */
#define S3_XML_BODY_MAX (4u << 20) /* DeleteObjects with 1000 long keys fits */
#define S3_MAX_IO (1u << 20)       /* most bytes one socket read or write moves */

struct s3_server {
    char *listen, *domain, *region, *tls_cert, *tls_key;
    size_t max_header_bytes;
    uint64_t max_object_size;
    int idle_timeout_s;
    int max_conns;
    struct core *core;
    struct tenants *tenants;
    struct evconnlistener *lev;
    SSL_CTX *ssl;
    atomic_int nconns;
    atomic_int ndetached; /* request contexts still cleaning up after their conn */
    atomic_uint_fast64_t seq;
    uint32_t instance;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct s3_conn *conns; /* all live connections (lock) */
    int stop_pending;      /* loops that still have to close their conns */
    atomic_bool stopping;
};

enum conn_state {
    CS_HEADERS = 0, /* reading a request's line and headers */
    CS_WAIT,        /* a worker or the op owns the request */
    CS_BODY,        /* reading the request body */
    CS_STREAM,      /* sending a streamed GET body */
};

struct s3_conn {
    struct s3_server *srv;
    struct srv_loop *loop;
    struct bufferevent *bev;
    struct s3_conn *prev, *next;
    struct s3_http http;
    struct s3_ctx *x;
    struct event *hdr_timer;
    enum conn_state state;
    char peer[64];
    bool closing;      /* close once the output is flushed */
    bool dead;         /* socket gone, free when no work is in flight */
    int work_inflight; /* worker jobs whose done callback has not run */
    bool in_pump;
    int nest;                /* callbacks on the stack: free only when it drops to 0 */
    struct evbuffer *direct; /* a small response being built (send_direct) */
    struct timeval idle;     /* idle timeout as a common timeout of the loop's base */
    struct evbuffer *spare[3]; /* emptied buffers of the last request, for the next one */
    struct event *body_ev;   /* the socket readable while an upload body is read directly */
    bool body_direct;        /* ... which it is now (the bufferevent does not read) */
    bool linger;             /* the client may still be sending: drain before closing */
    bool lingering;          /* answer sent, our side shut down, input read and dropped */
    uint64_t linger_until;   /* srv_now_us() when lingering gives up */
};

/* Lingering close (conn_done): at most this long in all, and this long
 * without input, reading and dropping what a refused client still sends. */
#define S3_LINGER_S 30
#define S3_LINGER_READ_S 5

static void conn_pump(struct s3_conn *c);
static void conn_close(struct s3_conn *c);
static void zwin_drop(struct s3_zwin *w);
static void ctx_finish(struct s3_ctx *x);
static void send_response(struct s3_ctx *x);
static void stream_pump(struct s3_ctx *x);
static void body_pump(struct s3_ctx *x);
static void body_ev_sync(struct s3_conn *c);

/* Request id: 8 hex digits of the server instance, 12 of a sequence number. */
static void reqid_make(struct s3_server *srv, char out[24])
{
    static const char hx[] = "0123456789ABCDEF";
    uint64_t seq = (uint64_t)atomic_fetch_add(&srv->seq, 1) & UINT64_C(0xFFFFFFFFFFFF);
    for (int i = 0; i < 8; i++)
        out[i] = hx[(srv->instance >> (28 - 4 * i)) & 15];
    for (int i = 0; i < 12; i++)
        out[8 + i] = hx[(seq >> (44 - 4 * i)) & 15];
    out[20] = '\0';
}

/* ---------------------------------------------------------------- responses */

void s3__resp_hdr(struct s3_ctx *x, const char *name, const char *val)
{
    char buf[512];
    size_t nl = strlen(name), vl = strlen(val);
    if (nl + vl + 4 > sizeof(buf)) {
        evbuffer_add(x->rhdrs, name, nl);
        evbuffer_add(x->rhdrs, ": ", 2);
        evbuffer_add(x->rhdrs, val, vl);
        evbuffer_add(x->rhdrs, "\r\n", 2);
        return;
    }
    memcpy(buf, name, nl);
    memcpy(buf + nl, ": ", 2);
    memcpy(buf + nl + 2, val, vl);
    memcpy(buf + nl + 2 + vl, "\r\n", 2);
    evbuffer_add(x->rhdrs, buf, nl + vl + 4);
}

void s3__resp_header(struct s3_ctx *x, const char *name, const char *fmt, ...)
{
    va_list ap;
    if (!strchr(fmt, '%')) { /* a constant value */
        s3__resp_hdr(x, name, fmt);
        return;
    }
    va_start(ap, fmt);
    if (fmt[0] == '%' && fmt[1] == 's' && fmt[2] == '\0') {
        s3__resp_hdr(x, name, va_arg(ap, const char *));
        va_end(ap);
        return;
    }
    char buf[512];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(buf)) {
        s3__resp_hdr(x, name, buf);
        return;
    }
    evbuffer_add_printf(x->rhdrs, "%s: ", name);
    va_start(ap, fmt);
    evbuffer_add_vprintf(x->rhdrs, fmt, ap);
    va_end(ap);
    evbuffer_add(x->rhdrs, "\r\n", 2);
}

static const char *resource_of(struct s3_ctx *x)
{
    return x->req && x->req->raw_path ? x->req->raw_path : "/";
}

/* Make the response an S3 error document; @p err is the internal error
 * behind it (for the metrics and the log). */
static void resp_error(struct s3_ctx *x, int err, const char *code, int status, const char *msg)
{
    x->err = err ? err : -EIO;
    x->status = status;
    evbuffer_drain(x->rbody, evbuffer_get_length(x->rbody));
    /* headers of a half-built success response must not leak into the error */
    evbuffer_drain(x->rhdrs, evbuffer_get_length(x->rhdrs));
    x->stream = false;
    s3__resp_header(x, "Content-Type", "application/xml");
    if (!x->head)
        s3__error_xml(x->rbody, code, msg, resource_of(x), x->reqid);
    if (err == -EIO || err == SRV_ECORRUPT || x->status >= 500)
        srv_log(WARN, S3, "req=%s tenant=%u %s %s: %s (%s)", x->reqid, x->p.tenant,
                x->req ? x->req->method : "-", resource_of(x), code, msg);
}

void s3__resp_err(struct s3_ctx *x, int err, const char *msg)
{
    const char *code = NULL;
    int status = 0;
    s3__error_map(err, x->rt.key != NULL, &code, &status);
    resp_error(x, err, code, status, msg ? msg : srv_strerror(err));
}

void s3__resp_s3err(struct s3_ctx *x, enum s3_err e, const char *msg)
{
    const struct s3_err_info *i = s3__err_info(e);
    /* not an internal error: SRV_EBADREQ marks it failed in the metrics */
    resp_error(x, i->status >= 500 ? -EIO : SRV_EBADREQ, i->code, i->status, msg ? msg : i->msg);
}

void s3__resp_xml(struct s3_ctx *x)
{
    x->status = 200;
    s3__resp_header(x, "Content-Type", "application/xml");
    evbuffer_add_printf(x->rbody, S3_XML_HDR);
}

/* Append @p s to the head being built (bounded by the caller's sizing). */
static char *put_str(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

/* The status line and headers of x's response, onto @p out. */
static void write_head(struct s3_ctx *x, uint64_t clen, struct evbuffer *out)
{
    char head[512], *o = head;
    char date[32], num[24];
    s3__http_date_fmt(time(NULL), date);
    /* an answer before the whole request body arrived closes the connection
     * (ctx_finish): say so, or the client would send its next request into
     * the lingering close, where it is dropped */
    bool close = x->close_after || x->conn->closing || !x->req || !x->req->keep_alive ||
                 !x->body_complete;
    /* status text <= 40, date 29, request id 20 (twice): well under the buffer */
    o = put_str(o, "HTTP/1.1 ");
    s3__u64_dec(num, (uint64_t)(x->status > 0 && x->status < 1000 ? x->status : 500));
    o = put_str(o, num);
    *o++ = ' ';
    o = put_str(o, s3__status_text(x->status));
    o = put_str(o, "\r\nDate: ");
    o = put_str(o, date);
    o = put_str(o, "\r\nServer: s3nfs\r\nx-amz-request-id: ");
    o = put_str(o, x->reqid);
    o = put_str(o, "\r\nx-amz-id-2: ");
    o = put_str(o, x->reqid);
    o = put_str(o, "\r\n");
    if (x->status != 204 && x->status != 304) {
        s3__u64_dec(num, clen);
        o = put_str(o, "Content-Length: ");
        o = put_str(o, num);
        o = put_str(o, "\r\n");
    }
    if (close)
        o = put_str(o, "Connection: close\r\n");
    evbuffer_add(out, head, (size_t)(o - head));
    evbuffer_add_buffer(out, x->rhdrs);
    evbuffer_add(out, "\r\n", 2);
    if (close)
        x->conn->closing = true;
}

/* ---------------------------------------------------------------- context lifecycle */

static void ctx_cleanup_work(void *arg)
{
    struct s3_ctx *x = arg;
    if (x->up)
        core_upload_abort(x->up);
    x->up = NULL;
    if (x->ref_held)
        core_unref(x->core, x->ino);
    x->ref_held = false;
}

static void ctx_free_now(struct s3_ctx *x)
{
    if (x->body)
        evbuffer_free(x->body);
    free(x->cbuf[0]);
    free(x->cbuf[1]);
    if (x->rhdrs)
        evbuffer_free(x->rhdrs);
    if (x->rbody)
        evbuffer_free(x->rbody);
    if (x->md5)
        EVP_MD_CTX_free(x->md5);
    if (x->sha256)
        EVP_MD_CTX_free(x->sha256);
    s3__ck_free(&x->cks);
    if (x->ck) {
        s3__chunked_fini(x->ck);
        free(x->ck);
    }
    for (int i = 0; i < S3_READS_INFLIGHT; i++)
        free(x->rs[i].buf);
    for (int i = 0; i < S3_ZC_INFLIGHT; i++)
        if (x->zw[i]) /* prepared, never appended (no worker runs: the conn waited) */
            zwin_drop(x->zw[i]);
    s3__req_free(x->req);
    OPENSSL_cleanse(x->skey, sizeof(x->skey));
    free(x);
}

static void ctx_cleanup_done(void *arg)
{
    struct s3_ctx *x = arg;
    struct s3_server *srv = x->srv;
    ctx_free_now(x);
    pthread_mutex_lock(&srv->lock);
    atomic_fetch_sub(&srv->ndetached, 1);
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

/* Free a context; an open upload or a held inode are released on a worker. */
static void ctx_free(struct s3_ctx *x)
{
    if (!x)
        return;
    if (x->qos_waiting && qos_global())
        qos_cancel(qos_global(), x);
    x->qos_waiting = false;
    x->conn = NULL;
    if (x->up || x->ref_held) {
        atomic_fetch_add(&x->srv->ndetached, 1);
        srv_work_submit(x->loop, ctx_cleanup_work, ctx_cleanup_done, x);
        return;
    }
    ctx_free_now(x);
}

/* The request log line, one per request. Built with plain copies (no
 * printf) and only when INFO is on for S3; srv_log adds its prefix. It goes
 * through the loop thread's log buffer (srv_log_buffered: many lines per
 * write(2), written out within SRV_LOG_FLUSH_MS). */
static void ctx_log(struct s3_ctx *x)
{
    uint64_t lat = srv_now_us() - x->t_start;
    const char *op = x->rt.op ? x->rt.op->name : "Unknown";
    if (SRV_LOG_INFO <= srv_log_levels[SRV_SUB_S3]) {
        char line[1400], *o = line, num[24];
        const char *res = resource_of(x);
        size_t rl = strlen(res);
        if (rl > 1100)
            rl = 1100; /* srv_log cuts long lines anyway */
        o = put_str(o, "req=");
        o = put_str(o, x->reqid);
        o = put_str(o, " tenant=");
        s3__u64_dec(num, x->p.tenant);
        o = put_str(o, num);
        o = put_str(o, " peer=");
        o = put_str(o, x->conn ? x->conn->peer : "-");
        o = put_str(o, " op=");
        o = put_str(o, op);
        *o++ = ' ';
        o = put_str(o, x->req ? x->req->method : "-");
        *o++ = ' ';
        memcpy(o, res, rl);
        o += rl;
        o = put_str(o, " status=");
        s3__u64_dec(num, (uint64_t)(x->status > 0 ? x->status : 0));
        o = put_str(o, num);
        o = put_str(o, " in=");
        s3__u64_dec(num, x->bytes_in);
        o = put_str(o, num);
        o = put_str(o, " out=");
        s3__u64_dec(num, x->bytes_out);
        o = put_str(o, num);
        o = put_str(o, " us=");
        s3__u64_dec(num, lat);
        o = put_str(o, num);
        *o = '\0';
        srv_log_buffered(INFO, S3, "%s", line);
    }
    srv_metrics_op_bucket(SRV_PROTO_S3, op, x->p.tenant, x->bucket_ino, x->bytes_in, x->bytes_out,
                          lat, x->status >= 400 ? (x->err ? x->err : -EIO) : 0);
}

/* ---------------------------------------------------------------- worker plumbing */

struct work_call {
    struct s3_ctx *x;
    void (*work)(struct s3_ctx *);
    void (*done)(struct s3_ctx *);
    void (*work_arg)(struct s3_ctx *, void *); /* or these two, with arg */
    void (*done_arg)(struct s3_ctx *, void *);
    void *arg;
};

static void conn_free(struct s3_conn *c);

/* Leave a callback; the last one out frees a dead connection. */
static void conn_leave(struct s3_conn *c)
{
    if (--c->nest == 0 && c->dead && !c->work_inflight)
        conn_free(c);
}

static void tramp_work(void *arg)
{
    struct work_call *w = arg;
    if (w->work_arg)
        w->work_arg(w->x, w->arg);
    else
        w->work(w->x);
}

static void tramp_done(void *arg)
{
    struct work_call *w = arg;
    struct s3_ctx *x = w->x;
    struct s3_conn *c = x->conn;
    c->nest++;
    c->work_inflight--;
    if (!c->dead) {
        if (w->done_arg)
            w->done_arg(x, w->arg);
        else
            w->done(x);
    }
    free(w);
    conn_leave(c);
}

/* Run @p work on a worker, then @p done on the connection's loop (unless the
 * connection died meanwhile: then the context is released instead). */
static void ctx_submit(struct s3_ctx *x, void (*work)(struct s3_ctx *),
                       void (*done)(struct s3_ctx *))
{
    struct work_call *w = calloc(1, sizeof(*w));
    if (!w)
        abort();
    w->x = x;
    w->work = work;
    w->done = done;
    x->conn->work_inflight++;
    srv_work_submit(x->loop, tramp_work, tramp_done, w);
}

/* As ctx_submit, passing @p arg to both functions. */
static void ctx_submit_arg(struct s3_ctx *x, void (*work)(struct s3_ctx *, void *),
                           void (*done)(struct s3_ctx *, void *), void *arg)
{
    struct work_call *w = calloc(1, sizeof(*w));
    if (!w)
        abort();
    w->x = x;
    w->work_arg = work;
    w->done_arg = done;
    w->arg = arg;
    x->conn->work_inflight++;
    srv_work_submit(x->loop, tramp_work, tramp_done, w);
}

/* ---------------------------------------------------------------- connection basics */

static void hdr_timer_arm(struct s3_conn *c)
{
    evtimer_add(c->hdr_timer, &c->idle);
}

static void conn_free(struct s3_conn *c)
{
    struct s3_server *srv = c->srv;
    ctx_free(c->x);
    c->x = NULL;
    s3__http_fini(&c->http);
    if (c->hdr_timer)
        event_free(c->hdr_timer);
    if (c->bev)
        bufferevent_free(c->bev);
    if (c->direct)
        evbuffer_free(c->direct);
    if (c->body_ev)
        event_free(c->body_ev);
    for (int i = 0; i < 3; i++)
        if (c->spare[i])
            evbuffer_free(c->spare[i]);
    pthread_mutex_lock(&srv->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&srv->nconns, 1);
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    free(c);
}

static void conn_close(struct s3_conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->body_ev)
        event_del(c->body_ev);
    c->body_direct = false;
    if (c->bev) {
        bufferevent_free(c->bev);
        c->bev = NULL;
    }
    if (c->hdr_timer)
        evtimer_del(c->hdr_timer);
    if (!c->work_inflight && c->nest == 0)
        conn_free(c);
}

/* A response without a request context: malformed request, header limit, timeout. */
static void conn_fatal(struct s3_conn *c, enum s3_err e, const char *msg)
{
    const struct s3_err_info *ei = s3__err_info(e);
    int status = ei->status;
    const char *code = ei->code;
    if (!msg)
        msg = ei->msg;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    struct evbuffer *b = evbuffer_new();
    char reqid[24], date[32];
    reqid_make(c->srv, reqid);
    s3__error_xml(b, code, msg, NULL, reqid);
    s3__http_date_fmt(time(NULL), date);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: s3nfs\r\n"
                        "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                        status, s3__status_text(status), date, reqid, evbuffer_get_length(b));
    evbuffer_add_buffer(out, b);
    evbuffer_free(b);
    srv_log(INFO, S3, "req=%s tenant=0 peer=%s op=- status=%d %s: %s", reqid, c->peer, status, code,
            msg);
    srv_metrics_op(SRV_PROTO_S3, "BadRequest", 0, 0, 0, 0, SRV_EBADREQ);
    c->closing = true;
    c->linger = true;
    c->state = CS_WAIT;
    bufferevent_disable(c->bev, EV_READ);
}

/* Close a connection whose answer is flushed. When the client may still be
 * sending (a request answered before its body was read: an error found at
 * the headers or mid-body, a malformed request), only our direction is shut
 * down and the client's input is read and dropped until it closes, for at
 * most S3_LINGER_S seconds (S3_LINGER_READ_S without input): closing a
 * socket with unread input makes the kernel send a reset, which can destroy
 * the answer before the client has read it (clients that send the whole
 * body before reading, like botocore, would see a dropped connection
 * instead of the error). TLS connections close at once. */
static void conn_done(struct s3_conn *c)
{
    if (c->lingering)
        return;
    if (!c->linger || c->srv->ssl || !c->bev || c->dead ||
        shutdown(bufferevent_getfd(c->bev), SHUT_WR) != 0) {
        conn_close(c);
        return;
    }
    c->lingering = true;
    c->linger_until = srv_now_us() + (uint64_t)S3_LINGER_S * 1000000;
    if (c->body_ev)
        event_del(c->body_ev);
    c->body_direct = false;
    if (c->hdr_timer)
        evtimer_del(c->hdr_timer);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    struct timeval tv = {S3_LINGER_READ_S, 0};
    bufferevent_set_timeouts(c->bev, &tv, NULL);
    bufferevent_enable(c->bev, EV_READ);
}

/* Input while lingering: dropped; past the deadline the connection closes. */
static void conn_linger_read(struct s3_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (srv_now_us() > c->linger_until)
        conn_close(c);
}

/* ---------------------------------------------------------------- request completion */

static void ctx_finish(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    ctx_log(x);
    if (!x->body_complete) {
        c->closing = true; /* unread body bytes would be parsed as the next request */
        c->linger = true;
    }
    c->x = NULL;
    /* the next request on this connection reuses the three buffers, emptied */
    struct evbuffer **keep[3] = {&x->body, &x->rhdrs, &x->rbody};
    for (int i = 0; i < 3; i++)
        if (!c->spare[i] && *keep[i]) {
            evbuffer_drain(*keep[i], evbuffer_get_length(*keep[i]));
            c->spare[i] = *keep[i];
            *keep[i] = NULL;
        }
    ctx_free(x);
    c->state = CS_HEADERS;
    body_ev_sync(c);
    if (c->closing) {
        c->state = CS_WAIT;
        bufferevent_disable(c->bev, EV_READ);
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
            conn_done(c);
        return;
    }
    hdr_timer_arm(c);
    conn_pump(c);
}

static void stream_end_work(struct s3_ctx *x)
{
    if (x->ref_held)
        core_unref(x->core, x->ino);
    x->ref_held = false;
}

static void stream_end_done(struct s3_ctx *x)
{
    ctx_finish(x);
}

/* One slot of a streamed GET: the worker reads [off, off+len) into its own buffer. */
static void stream_read_work(struct s3_ctx *x, void *arg)
{
    struct s3_rslot *r = arg;
    bool eof = false;
    r->n = 0;
    r->buf = malloc(r->len);
    if (!r->buf) {
        r->rc = -ENOMEM;
        return;
    }
    r->rc = core_read(x->core, &x->p, x->ino, r->off, r->buf, r->len, &r->n, &eof);
}

static void free_chunk(const void *data, size_t len, void *arg)
{
    free((void *)data);
}

static void stream_read_done(struct s3_ctx *x, void *arg)
{
    struct s3_rslot *r = arg;
    r->done = true;
    stream_pump(x);
}

/* Streamed GET: append finished reads in offset order, keep up to
 * S3_READS_INFLIGHT reads running while the output is below its watermark. */
static void zc_pump(struct s3_ctx *x);
static void stream_end(struct s3_ctx *x);
static void stream_cut(struct s3_ctx *x, uint64_t at, int rc);

static void stream_pump(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (c->dead)
        return;
    if (x->zc) {
        zc_pump(x);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (x->rs_count > 0 && x->rs[x->rs_head].done) {
        struct s3_rslot *r = &x->rs[x->rs_head];
        if (r->rc || r->n != r->len) {
            stream_cut(x, r->off, r->rc);
            return;
        }
        evbuffer_add_reference(out, r->buf, r->n, free_chunk, NULL);
        r->buf = NULL;
        r->done = false;
        x->roff += r->n;
        x->bytes_out += r->n;
        x->rs_head = (x->rs_head + 1) % S3_READS_INFLIGHT;
        x->rs_count--;
    }
    if (x->roff >= x->rend && x->rs_count == 0) {
        stream_end(x);
        return;
    }
    /* the write callback calls again once the client caught up */
    while (x->rs_count < S3_READS_INFLIGHT && x->rnext < x->rend &&
           evbuffer_get_length(out) + (size_t)x->rs_count * S3_RCHUNK < S3_OUT_LOW) {
        int i = (x->rs_head + x->rs_count) % S3_READS_INFLIGHT;
        struct s3_rslot *r = &x->rs[i];
        uint64_t len = x->rend - x->rnext;
        r->off = x->rnext;
        r->len = (size_t)(len > S3_RCHUNK ? S3_RCHUNK : len);
        r->rc = 0;
        r->done = false;
        x->rnext += r->len;
        x->rs_count++;
        ctx_submit_arg(x, stream_read_work, stream_read_done, r);
    }
}

/* ---------------------------------------------------------------- zero-copy streaming
 * Without TLS a streamed GET goes out as evbuffer file segments (sendfile
 * from the store's buffered fd) described by core_read_pieces, in windows of
 * S3_ZC_WIN bytes, up to S3_ZC_INFLIGHT being prepared on workers, appended
 * in offset order while the output holds less than S3_ZC_OUT. A window keeps
 * its pieces (and their store read token) until libevent has sent or dropped
 * its last byte: the cleanup callbacks of its segments and references count
 * it down, on the loop thread. Data read cold (verified now, so sent from
 * memory) goes in windows of S3_RCHUNK with the output below S3_OUT_LOW, as
 * the copy path does, so a cold GET holds no more memory than it did. */
#define S3_ZC_WIN S3_ZC_ONE
#define S3_ZC_GRID (1u << 20) /* extents are cut on this grid of file offsets */
#define S3_ZC_OUT (12u << 20)

struct s3_zwin {
    struct core_pieces ps;
    uint64_t off, len;
    int rc;
    bool done;
    int refs; /* segments/references in an output buffer, + 1 while appending */
};

static void zwin_unref(struct s3_zwin *w)
{
    if (--w->refs == 0) {
        core_pieces_release(&w->ps);
        free(w);
    }
}

static void zwin_drop(struct s3_zwin *w)
{
    core_pieces_release(&w->ps);
    free(w);
}

static void zwin_seg_cleanup(struct evbuffer_file_segment const *seg, int flags, void *arg)
{
    zwin_unref(arg);
}

static void zwin_ref_cleanup(const void *data, size_t len, void *arg)
{
    zwin_unref(arg);
}

static const char zeros[64 << 10];

/* Append the pieces of @p w to @p out. @return 0, -ENOMEM. */
static int zwin_append(struct s3_zwin *w, struct evbuffer *out)
{
    int rc = 0;
    w->refs = 1;
    for (size_t i = 0; rc == 0 && i < w->ps.n; i++) {
        const struct core_piece *p = &w->ps.v[i];
        if (p->fd >= 0) {
            struct evbuffer_file_segment *seg =
                evbuffer_file_segment_new(p->fd, (ev_off_t)p->off, (ev_off_t)p->len,
                                          EVBUF_FS_DISABLE_MMAP | EVBUF_FS_DISABLE_LOCKING);
            if (!seg) {
                rc = -ENOMEM;
                break;
            }
            w->refs++;
            evbuffer_file_segment_add_cleanup_cb(seg, zwin_seg_cleanup, w);
            if (evbuffer_add_file_segment(out, seg, 0, (ev_off_t)p->len) != 0)
                rc = -ENOMEM;
            evbuffer_file_segment_free(seg);
        } else if (p->mem) {
            w->refs++;
            if (evbuffer_add_reference(out, p->mem, p->len, zwin_ref_cleanup, w) != 0) {
                w->refs--;
                rc = -ENOMEM;
            }
        } else {
            for (uint64_t left = p->len; rc == 0 && left;) {
                size_t k = left > sizeof(zeros) ? sizeof(zeros) : (size_t)left;
                if (evbuffer_add_reference(out, zeros, k, NULL, NULL) != 0)
                    rc = -ENOMEM;
                left -= k;
            }
        }
    }
    zwin_unref(w);
    return rc;
}

static void zwin_read_work(struct s3_ctx *x, void *arg)
{
    struct s3_zwin *w = arg;
    w->rc = core_read_pieces(x->core, &x->p, x->ino, w->off, w->len, &w->ps);
}

static void zwin_read_done(struct s3_ctx *x, void *arg)
{
    struct s3_zwin *w = arg;
    w->done = true;
    stream_pump(x);
}

static void stream_end(struct s3_ctx *x)
{
    x->conn->state = CS_WAIT;
    if (x->ref_held)
        ctx_submit(x, stream_end_work, stream_end_done);
    else
        ctx_finish(x);
}

/* A streamed body failed after its headers were sent: the only honest
 * signal left is to cut the connection. */
static void stream_cut(struct s3_ctx *x, uint64_t at, int rc)
{
    srv_log(WARN, S3, "req=%s tenant=%u GET %s: read failed at %" PRIu64 ": %s", x->reqid,
            x->p.tenant, resource_of(x), at, rc ? srv_strerror(rc) : "object shrank");
    x->err = rc ? rc : -EIO;
    ctx_log(x);
    conn_close(x->conn);
}

static void zc_pump(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (x->zw_count > 0 && x->zw[x->zw_head]->done) {
        struct s3_zwin *w = x->zw[x->zw_head];
        x->zw[x->zw_head] = NULL;
        x->zw_head = (x->zw_head + 1) % S3_ZC_INFLIGHT;
        x->zw_count--;
        if (w->rc || w->ps.len != w->len) {
            int rc = w->rc;
            zwin_drop(w);
            bool gone = rc == SRV_ESTALE || rc == -ENOENT || rc == 0;
            if (!x->zc_head && !x->ref_held && gone && x->get_again++ < 8) {
                /* replaced or removed since the lookup, nothing sent yet (and nothing
                 * else in flight): look the key up again, as the worker path does */
                c->state = CS_WAIT;
                ctx_submit(x, s3__get_again_work, send_response);
                return;
            }
            if (!x->zc_head) {
                /* nothing sent yet (and nothing else in flight): a proper error answer */
                s3__resp_err(x, rc ? rc : -EIO, rc ? NULL : "the object changed while it was read");
                c->state = CS_WAIT;
                send_response(x);
                return;
            }
            stream_cut(x, x->roff, rc);
            return;
        }
        if (!x->zc_head) {
            write_head(x, x->rend - x->roff, out);
            x->zc_head = true;
        }
        x->roff += w->len;
        x->bytes_out += w->len;
        x->zc_hot = w->ps.copied == 0;
        if (zwin_append(w, out) != 0) {
            stream_cut(x, x->roff, -ENOMEM);
            return;
        }
    }
    if (x->roff >= x->rend && x->zw_count == 0) {
        stream_end(x);
        return;
    }
    /* the write callback calls again once the output drained below S3_OUT_LOW */
    size_t win = x->zc_hot ? S3_ZC_WIN : S3_RCHUNK;
    size_t limit = x->zc_hot ? S3_ZC_OUT : S3_OUT_LOW;
    /* one window until the head is out: its failure can still be a clean error */
    while (x->zw_count < (x->zc_head ? S3_ZC_INFLIGHT : 1) && x->rnext < x->rend &&
           evbuffer_get_length(out) + (size_t)x->zw_count * win < limit) {
        struct s3_zwin *w = calloc(1, sizeof(*w));
        if (!w)
            abort();
        /* windows end on the 1 MiB grid extents are cut on: no extent is verified twice */
        uint64_t len = win - x->rnext % S3_ZC_GRID;
        if (!x->ref_held) /* a body of at most S3_ZC_ONE: one window holds it all */
            len = x->rend - x->rnext;
        if (len > x->rend - x->rnext)
            len = x->rend - x->rnext;
        w->off = x->rnext;
        w->len = len;
        x->rnext += len;
        x->zw[(x->zw_head + x->zw_count) % S3_ZC_INFLIGHT] = w;
        x->zw_count++;
        ctx_submit_arg(x, zwin_read_work, zwin_read_done, w);
    }
}

/* Send the response built in c->direct: straight to the socket when nothing
 * else is queued (the common small response then costs one write and no
 * change of the connection's epoll interest), the rest through the output. */
static void send_direct(struct s3_conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (!c->srv->ssl && evbuffer_get_length(out) == 0) {
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        while (evbuffer_get_length(c->direct) > 0)
            if (evbuffer_write(c->direct, fd) <= 0)
                break; /* full or failed: the bufferevent retries and reports */
    }
    if (evbuffer_get_length(c->direct) > 0)
        evbuffer_add_buffer(out, c->direct);
}

static void send_response(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (x->status == 0)
        x->status = 200;
    if (x->stream && x->status < 300) {
        bool body = !x->head && x->rend > x->roff;
        /* TLS encrypts in user space: it keeps the copy path. Zero-copy writes
         * the head with its first window (zc_pump). */
        x->zc = body && !x->srv->ssl;
        if (!x->zc)
            write_head(x, x->rend - x->roff, body ? bufferevent_get_output(c->bev) : c->direct);
        if (!body)
            send_direct(c);
        if (body) {
            c->state = CS_STREAM;
            stream_pump(x);
            return;
        }
        if (x->ref_held) {
            c->state = CS_WAIT;
            ctx_submit(x, stream_end_work, stream_end_done);
            return;
        }
        ctx_finish(x);
        return;
    }
    size_t n = evbuffer_get_length(x->rbody);
    write_head(x, x->head ? 0 : n, c->direct);
    if (!x->head) {
        x->bytes_out += n;
        evbuffer_add_buffer(c->direct, x->rbody);
    }
    send_direct(c);
    if (x->ref_held) {
        c->state = CS_WAIT;
        ctx_submit(x, stream_end_work, stream_end_done);
        return;
    }
    ctx_finish(x);
}

/* ---------------------------------------------------------------- QoS admission */

static void qos_go(void *arg, int err)
{
    struct s3_ctx *x = arg;
    struct s3_conn *c = x->conn;
    x->qos_waiting = false;
    c->nest++;
    if (err) {
        s3__resp_err(x, SRV_ETHROTTLE,
                     "please reduce your request rate (the tenant's QoS limit was reached)");
        send_response(x);
    } else {
        x->qos_next(x);
    }
    conn_leave(c);
}

/* Ask QoS before dispatching; @p next runs on this loop once admitted (maybe at once).
 * Throttled requests answer 503 SlowDown. */
static void ctx_admit(struct s3_ctx *x, enum qos_class cls, uint64_t bytes,
                      void (*next)(struct s3_ctx *))
{
    struct qos *q = qos_global();
    if (!q) {
        next(x);
        return;
    }
    x->qos_next = next;
    x->qos_waiting = true;
    int rc = qos_admit(q, &x->p, cls, bytes, srv_loop_base(x->loop), qos_go, x);
    if (rc) {
        /* go never runs: answer here */
        x->qos_waiting = false;
        s3__resp_err(x, SRV_ETHROTTLE,
                     "please reduce your request rate (the tenant's QoS queue is full)");
        send_response(x);
    }
}

/* An S3_OPF_READ_AFTER op (GetObject) is admitted once its size is known, with
 * the bytes it will send. */
static void op_done(struct s3_ctx *x)
{
    uint64_t n = x->stream ? x->rend - x->roff : evbuffer_get_length(x->rbody);
    if ((x->rt.op->flags & S3_OPF_READ_AFTER) && x->status < 300 && n > 0)
        ctx_admit(x, x->rt.op->qos, n, send_response);
    else
        send_response(x);
}

static void op_run(struct s3_ctx *x)
{
    ctx_submit(x, x->rt.op->work, op_done);
}

/* Run the op: its fast path first when it has one (GET/HEAD of an object:
 * metadata, and inline content, straight from the loop thread, as
 * core_key_peek reads only the LMDB map, so a small object costs no worker
 * round trip; only a body in extents goes to a worker). */
static void op_start(struct s3_ctx *x)
{
    if (!x->rt.op->fast) {
        op_run(x);
        return;
    }
    switch (x->rt.op->fast(x)) {
    case S3_FAST_DONE:
        op_done(x);
        break;
    case S3_FAST_DATA:
        ctx_submit(x, s3__get_data_work, op_done);
        break;
    default:
        op_run(x);
        break;
    }
}

/* ---------------------------------------------------------------- request bodies */

/* The body failed with internal error @p err (the first failure counts). @return -1. */
static int body_fail(struct s3_ctx *x, int err, const char *msg)
{
    if (!x->body_err) {
        x->body_err = err;
        x->body_errmsg = msg;
    }
    return -1;
}

/* The body failed with S3-only error @p e. @return -1. */
static int body_fail_s3(struct s3_ctx *x, enum s3_err e, const char *msg)
{
    if (!x->body_err)
        x->body_s3err = e;
    return body_fail(x, SRV_EBADREQ, msg);
}

/* Make the response the body's failure. */
static void body_fail_resp(struct s3_ctx *x)
{
    if (x->body_s3err)
        s3__resp_s3err(x, x->body_s3err, x->body_errmsg);
    else
        s3__resp_err(x, x->body_err, x->body_errmsg);
}

/* ---- upload chunks (STREAM ops) ---- */

/* The payload size the request announced (0 if it did not). */
static uint64_t upload_declared(const struct s3_ctx *x)
{
    if (x->aws_chunked)
        return x->decoded_len > 0 ? (uint64_t)x->decoded_len : 0;
    return x->req->has_clen ? x->req->content_length : 0;
}

/* Make the chunk being filled at least @p cap bytes (page-aligned, so the
 * store can write it with O_DIRECT as it is); its bytes are kept. */
static void chunk_grow(struct s3_ctx *x, size_t cap)
{
    int i = x->ccur;
    void *p = NULL;
    cap = (cap + 4095) & ~(size_t)4095;
    if (posix_memalign(&p, 4096, cap) != 0)
        abort();
    if (x->cfill)
        memcpy(p, x->cbuf[i], x->cfill);
    free(x->cbuf[i]);
    x->cbuf[i] = p;
    x->ccap[i] = cap;
}

/* Free bytes in the chunk being filled, making or growing it as needed (0:
 * it holds S3_WCHUNK bytes and must go to the workers first). The first
 * chunk of a small upload is only as large as the upload. */
static size_t chunk_space(struct s3_ctx *x)
{
    int i = x->ccur;
    if (x->cfill == x->ccap[i] && x->ccap[i] < S3_WCHUNK) {
        size_t want = S3_WCHUNK;
        uint64_t d = upload_declared(x);
        if (!x->cbuf[i] && !x->cbuf[i ^ 1] && d > 0 && d < S3_WCHUNK)
            want = (size_t)d;
        chunk_grow(x, want);
    }
    return x->ccap[i] - x->cfill;
}

/* Payload bytes the connection may take now without a third chunk. */
static size_t body_room(const struct s3_ctx *x)
{
    size_t cur = S3_WCHUNK - x->cfill;
    return x->writing ? cur : cur + S3_WCHUNK;
}

static void stream_hash_work(struct s3_ctx *x);
static void stream_write_work(struct s3_ctx *x);
static void stream_write_done(struct s3_ctx *x);

/* The filled chunk goes to two workers (hash, write); the other one fills next. */
static void chunk_ship(struct s3_ctx *x)
{
    x->wptr = x->cbuf[x->ccur];
    x->wlen = x->cfill;
    x->writing = true;
    x->chunk_jobs = 2;
    x->ccur ^= 1;
    x->cfill = 0;
    ctx_submit(x, stream_hash_work, stream_write_done);
    ctx_submit(x, stream_write_work, stream_write_done);
}

/* Decoded payload bytes. An upload's bytes may already be where they belong
 * (read straight into the chunk) or earlier in it (aws-chunked decoded in
 * place): then they are not copied, or moved down. */
static int payload_cb(void *arg, const char *data, size_t len)
{
    struct s3_ctx *x = arg;
    if (x->body_mode != S3_BODY_STREAM) {
        if (evbuffer_get_length(x->body) + len > x->body_limit)
            return body_fail(x, SRV_EBADREQ,
                             "the request body is larger than this operation accepts");
        evbuffer_add(x->body, data, len);
        return 0;
    }
    if (x->written + (x->writing ? x->wlen : 0) + x->cfill + len > x->srv->max_object_size)
        return body_fail(x, SRV_ETOOBIG, S3_MSG_TOO_LARGE);
    while (len > 0) {
        size_t space = chunk_space(x);
        if (space == 0) {
            if (x->writing) /* cannot happen: every feed is bounded by body_room() */
                return body_fail(x, -EIO, "upload buffer overrun");
            chunk_ship(x);
            continue;
        }
        size_t n = len < space ? len : space;
        unsigned char *dst = x->cbuf[x->ccur] + x->cfill;
        if ((const unsigned char *)data != dst)
            memmove(dst, data, n);
        x->cfill += n;
        data += n;
        len -= n;
    }
    return 0;
}

/* The aws-chunked decoder's verdict on what it was fed. */
static int ck_result(struct s3_ctx *x, int rc)
{
    if (rc == 0)
        return 0;
    if (x->body_err)
        return -1;
    if (rc == SRV_EAUTH)
        return body_fail(x, SRV_EAUTH, x->ck->d.err);
    return body_fail_s3(x, S3E_INCOMPLETE_BODY, x->ck->d.err);
}

/* Body bytes after HTTP framing (llhttp). */
static int http_body_cb(void *arg, const char *data, size_t len)
{
    struct s3_conn *c = arg;
    struct s3_ctx *x = c->x;
    if (!x)
        return -1;
    x->bytes_in += len;
    if (!x->aws_chunked)
        return payload_cb(x, data, len);
    if (x->req->chunked)
        return ck_result(x, s3__chunked_http_data(x->ck, data, len));
    return ck_result(x, srv_sigv4_chunked_feed(&x->ck->d, data, len));
}

/* HTTP chunk boundaries and trailer fields. An aws-chunked upload may carry
 * its framing in them (s3__chunked_http_frame); for every other body they
 * mean nothing and are dropped. No request, or one already answered: the
 * parser only runs for the request the connection is reading, but nothing
 * here may assume it. */
static int http_frame_cb(void *arg, const struct s3_http_frame *f)
{
    struct s3_conn *c = arg;
    struct s3_ctx *x = c->x;
    if (!x || !x->aws_chunked || !x->req->chunked)
        return 0;
    return ck_result(x, s3__chunked_http_frame(x->ck, f));
}

/* A chunk goes to two workers at once: one hashes (MD5, signed SHA-256,
 * additional checksum), one writes; both only read x->wptr. */
static void stream_hash_work(struct s3_ctx *x)
{
    EVP_DigestUpdate(x->md5, x->wptr, x->wlen);
    if (x->sha256)
        EVP_DigestUpdate(x->sha256, x->wptr, x->wlen);
    if (x->cks.algo)
        s3__ck_update(&x->cks, x->wptr, x->wlen);
}

static void stream_write_work(struct s3_ctx *x)
{
    x->write_rc = core_upload_write(x->up, x->wptr, x->wlen);
}

/* The upload failed: send the error response that is set. */
static void stream_fail(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    c->state = CS_WAIT;
    send_response(x);
}

static void stream_write_done(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (--x->chunk_jobs > 0)
        return;
    x->written += x->wlen;
    x->wptr = NULL;
    x->writing = false;
    if (x->write_rc) {
        s3__resp_err(x, x->write_rc, NULL);
        stream_fail(x);
        return;
    }
    body_pump(x);
    /* x may be finished and freed by now; c stays (nest) */
    if (!c->dead && c->x == x && c->state == CS_BODY)
        conn_pump(c);
}

/* STREAM ops: move payload to the worker, then finish. */
static void body_pump(struct s3_ctx *x)
{
    if (x->writing || x->conn->x != x)
        return;
    if (x->body_err) {
        body_fail_resp(x);
        stream_fail(x);
        return;
    }
    if (x->cfill >= S3_WCHUNK || (x->body_complete && x->cfill > 0)) {
        chunk_ship(x);
        return;
    }
    if (!x->body_complete)
        return;
    x->conn->state = CS_WAIT;
    if (x->aws_chunked && !x->ck->d.done) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY, "the aws-chunked body ended before its final chunk");
        stream_fail(x);
        return;
    }
    if (x->decoded_len >= 0 && (uint64_t)x->decoded_len != x->written) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY,
                       "x-amz-decoded-content-length does not match the payload");
        stream_fail(x);
        return;
    }
    ctx_submit(x, x->rt.op->finish, op_done);
}

/* Request documents (and bodies of bodyless ops) are small and in memory:
 * verify the signed payload hash, Content-MD5 and an x-amz-checksum-* header
 * before acting. @return 0, or the error response is set. */
static int small_body_check(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->body);
    const unsigned char *p = evbuffer_pullup(x->body, (ssize_t)n);
    if (!p)
        p = (const unsigned char *)"";
    if (x->sha256) {
        char hex[65];
        srv_sigv4_sha256_hex(p, n, hex);
        if (!srv_sigv4_equal(hex, x->sig.payload_hash, 64)) {
            s3__resp_s3err(x, S3E_CONTENT_SHA256_MISMATCH, NULL);
            return -1;
        }
    }
    const char *cmd5 = s3__req_header(x->req, "content-md5");
    if (cmd5) {
        unsigned char want[64], md[EVP_MAX_MD_SIZE];
        unsigned int mdl = 0;
        size_t l = strlen(cmd5);
        EVP_Digest(p, n, md, &mdl, EVP_md5(), NULL);
        if (l > 80 || s3__b64_decode(cmd5, l, want) != 16) {
            s3__resp_s3err(x, S3E_INVALID_DIGEST, NULL);
            return -1;
        }
        if (memcmp(want, md, 16) != 0) {
            s3__resp_s3err(x, S3E_BAD_DIGEST, NULL);
            return -1;
        }
    }
    for (size_t i = 0; i < x->req->nhdrs; i++) {
        enum s3_ck_algo a = s3__ck_from_header(x->req->hdrs[i].name);
        if (!a)
            continue;
        struct s3_cksum ck;
        char got[100];
        s3__ck_init(&ck, a);
        s3__ck_update(&ck, p, n);
        s3__ck_final(&ck, got);
        if (strcmp(got, x->req->hdrs[i].val) != 0) {
            s3__resp_s3err(x, S3E_BAD_DIGEST,
                           s3__arena_printf(x->a,
                                            "the %s you specified did not match the "
                                            "calculated checksum",
                                            s3__ck_header(a)));
            return -1;
        }
    }
    return 0;
}

/* The HTTP message (body included) is complete. */
static void on_message_done(struct s3_conn *c)
{
    struct s3_ctx *x = c->x;
    x->body_complete = true;
    s3__http_next(&c->http);
    c->state = CS_WAIT;
    if (x->body_mode == S3_BODY_STREAM) {
        body_pump(x);
        return;
    }
    if (x->body_err) {
        body_fail_resp(x);
        send_response(x);
        return;
    }
    if (x->aws_chunked && !x->ck->d.done) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY, "aws-chunked body incomplete");
        send_response(x);
        return;
    }
    if (small_body_check(x)) {
        send_response(x);
        return;
    }
    if (x->rt.op->flags & S3_OPF_READ_AFTER)
        op_start(x); /* admitted in op_done */
    else
        ctx_admit(x, x->rt.op->qos, 0, op_start);
}

static void stream_begin_done(struct s3_ctx *x);

static void stream_start(struct s3_ctx *x)
{
    ctx_submit(x, x->rt.op->work, stream_begin_done);
}

static void stream_begin_done(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (x->status >= 300 || !x->up) {
        if (!x->status)
            s3__resp_err(x, -EIO, "upload could not start");
        send_response(x);
        return;
    }
    if (x->req->expect_continue)
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    c->state = CS_BODY;
    s3__http_resume(&c->http);
    conn_pump(c);
}

/* ---------------------------------------------------------------- authentication */

static bool is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* @return 0 when the request is authenticated; otherwise the error response is set. */
static int ctx_auth(struct s3_ctx *x)
{
    struct s3_req *r = x->req;
    const char *authz = s3__req_header(r, "authorization");
    int rc;
    if (authz) {
        rc = srv_sigv4_parse_header(authz, &x->sig);
        if (rc == SRV_ENOTSUPP) {
            s3__resp_err(x, -EACCES, "only AWS Signature Version 4 is supported");
            return -1;
        }
        if (rc) {
            s3__resp_s3err(x, S3E_AUTH_HEADER_MALFORMED, NULL);
            return -1;
        }
    } else {
        rc = s3__sigv4_parse_query(r, &x->sig);
        if (rc == -ENOENT && s3__req_has_param(r, "AWSAccessKeyId")) {
            s3__resp_err(x, -EACCES,
                         "only AWS Signature Version 4 is supported (presigned URL is SigV2)");
            return -1;
        }
        if (rc == -ENOENT) {
            s3__resp_err(x, -EACCES, "anonymous access is not allowed");
            return -1;
        }
        if (rc) {
            s3__resp_s3err(x, S3E_AUTH_QUERY_MALFORMED, NULL);
            return -1;
        }
    }
    char secret[TENANT_SECRET_MAX + 1];
    rc = tenants_key_lookup(x->srv->tenants, x->sig.akey, secret, &x->p);
    if (rc == -ENOENT) {
        s3__resp_s3err(x, S3E_INVALID_ACCESS_KEY_ID, NULL);
        return -1;
    }
    if (rc) {
        s3__resp_err(x, -EACCES, "the access key or its user is disabled");
        return -1;
    }
    const char *why = NULL;
    rc = s3__sigv4_verify(x->a, r, &x->sig, secret, time(NULL), x->skey, &why);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc) {
        uint32_t tenant = x->p.tenant;
        memset(&x->p, 0, sizeof(x->p));
        x->p.tenant = tenant;
        if (rc == SRV_EAUTH)
            s3__resp_err(x, SRV_EAUTH, why);
        else if (rc == -ETIMEDOUT)
            s3__resp_s3err(x, S3E_REQUEST_TIME_TOO_SKEWED, why);
        else if (rc == -EACCES)
            s3__resp_err(x, -EACCES, why);
        else
            s3__resp_s3err(x, S3E_AUTH_HEADER_MALFORMED, why);
        return -1;
    }
    /* payload mode */
    const char *ph = x->sig.payload_hash;
    if (strcmp(ph, SRV_SIGV4_STREAMING_SIGNED) == 0 ||
        strcmp(ph, SRV_SIGV4_STREAMING_SIGNED_TRAILER) == 0 ||
        strcmp(ph, SRV_SIGV4_STREAMING_UNSIGNED_TRAILER) == 0) {
        enum srv_sigv4_chunk_mode m = strcmp(ph, SRV_SIGV4_STREAMING_SIGNED) == 0
                                          ? SRV_SIGV4_CHUNK_SIGNED
                                      : strcmp(ph, SRV_SIGV4_STREAMING_SIGNED_TRAILER) == 0
                                          ? SRV_SIGV4_CHUNK_SIGNED_TRAILER
                                          : SRV_SIGV4_CHUNK_UNSIGNED_TRAILER;
        x->ck = malloc(sizeof(*x->ck)); /* only these requests carry the decoder */
        if (!x->ck)
            abort();
        s3__chunked_init(x->ck, m, x->skey, &x->sig, payload_cb, x);
        x->aws_chunked = true;
        const char *dl = s3__req_header(r, "x-amz-decoded-content-length");
        if (dl) {
            char *end = NULL;
            unsigned long long v = strtoull(dl, &end, 10);
            if (!end || *end || end == dl) {
                s3__resp_err(x, -EINVAL, "x-amz-decoded-content-length is malformed");
                return -1;
            }
            x->decoded_len = (int64_t)v;
        }
    } else if (strcmp(ph, SRV_SIGV4_UNSIGNED_PAYLOAD) != 0) {
        if (!is_hex64(ph)) {
            s3__resp_err(x, -EINVAL,
                         "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-* or a "
                         "lower-case hex SHA-256");
            return -1;
        }
        x->sha256 = EVP_MD_CTX_new();
        if (!x->sha256)
            abort();
        EVP_DigestInit_ex(x->sha256, EVP_sha256(), NULL);
    }
    return 0;
}

/* ---------------------------------------------------------------- request start */

static void on_headers(struct s3_conn *c)
{
    struct s3_server *srv = c->srv;
    evtimer_del(c->hdr_timer);
    struct s3_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        abort();
    x->srv = srv;
    x->conn = c;
    x->loop = c->loop;
    x->core = srv->core;
    x->region = srv->region;
    x->req = s3__http_take_req(&c->http);
    x->a = &x->req->arena;
    x->t_start = srv_now_us();
    x->decoded_len = -1;
    struct evbuffer **take[3] = {&x->body, &x->rhdrs, &x->rbody};
    for (int i = 0; i < 3; i++) {
        *take[i] = c->spare[i] ? c->spare[i] : evbuffer_new();
        c->spare[i] = NULL;
        if (!*take[i])
            abort();
    }
    reqid_make(srv, x->reqid);
    x->head = strcmp(x->req->method, "HEAD") == 0;
    x->tls = srv->ssl != NULL;
    c->x = x;
    c->state = CS_WAIT;

    s3__route_req(x->a, x->req, srv->domain, &x->rt);
    if (ctx_auth(x)) {
        send_response(x);
        return;
    }
    if (x->rt.err) {
        if (x->rt.err == -EPERM) /* the router's mark for a method the resource has not */
            s3__resp_s3err(x, S3E_METHOD_NOT_ALLOWED, x->rt.errmsg);
        else
            s3__resp_err(x, x->rt.err, x->rt.errmsg);
        send_response(x);
        return;
    }
    const struct s3_req *r = x->req;
    x->body_mode = x->rt.op->body;
    uint64_t declared =
        x->aws_chunked && x->decoded_len >= 0 ? (uint64_t)x->decoded_len : r->content_length;
    if (x->body_mode == S3_BODY_STREAM && declared > srv->max_object_size) {
        s3__resp_err(x, SRV_ETOOBIG, S3_MSG_TOO_LARGE);
        send_response(x);
        return;
    }
    if (x->body_mode == S3_BODY_STREAM && !r->has_clen && !r->chunked) {
        s3__resp_s3err(x, S3E_MISSING_CONTENT_LENGTH, NULL);
        send_response(x);
        return;
    }
    x->body_limit = S3_XML_BODY_MAX;
    if (x->body_mode == S3_BODY_STREAM) {
        x->md5 = EVP_MD_CTX_new();
        if (!x->md5)
            abort();
        EVP_DigestInit_ex(x->md5, EVP_md5(), NULL);
        ctx_admit(x, x->rt.op->qos, declared, stream_start);
        return;
    }
    if (r->expect_continue && (r->content_length > 0 || r->chunked))
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    c->state = CS_BODY;
    s3__http_resume(&c->http);
}

/* ---------------------------------------------------------------- input pump */

/* Act on what the parser reported after a feed that started in state
 * @p before. @return true to keep feeding. */
static bool conn_event(struct s3_conn *c, int ev, enum conn_state before)
{
    if (ev == S3_HTTP_HEADERS) {
        on_headers(c);
        return true;
    }
    if (ev == S3_HTTP_DONE) {
        if (before == CS_BODY && c->x)
            on_message_done(c);
        else
            conn_fatal(c, S3E_BAD_REQUEST, "unexpected message state");
        return true;
    }
    if (ev < 0 && !c->x) {
        if (ev == S3_HTTP_ETOOBIG)
            conn_fatal(c, S3E_HEADERS_TOO_LARGE, NULL);
        else
            conn_fatal(c, S3E_BAD_REQUEST, NULL);
        return false;
    }
    if (ev < 0) {
        /* the body went wrong: refused by its sink (EBODY, the reason is
         * already recorded), malformed framing, or trailer fields over the
         * header limit */
        struct s3_ctx *x = c->x;
        c->state = CS_WAIT;
        if (ev == S3_HTTP_ETOOBIG)
            body_fail_s3(x, S3E_HEADERS_TOO_LARGE,
                         "the trailer fields exceed the configured header limit");
        else
            body_fail_s3(x, S3E_BAD_REQUEST, "malformed HTTP request body");
        body_fail_resp(x);
        if (!x->writing) /* else stream_write_done reports it (body_err) */
            send_response(x);
        return false;
    }
    return true;
}

/* Upload body bytes still to come on the socket when the request has a
 * Content-Length; 0 otherwise. */
static uint64_t body_left(const struct s3_conn *c)
{
    const struct s3_req *r = c->x->req;
    if (r->chunked || !r->has_clen || c->http.body_bytes >= r->content_length)
        return 0;
    return r->content_length - c->http.body_bytes;
}

/* Whether this upload's body can be read straight from the socket into its
 * chunk: plain TCP, a Content-Length (the read never takes bytes of the next
 * request), bytes still to come. */
static bool body_direct_ok(const struct s3_conn *c)
{
    const struct s3_ctx *x = c->x;
    return !c->srv->ssl && x && x->body_mode == S3_BODY_STREAM && !x->body_err &&
           body_left(c) > 0;
}

/* Leave direct body reading once the body is over (or the connection is):
 * the bufferevent reads the next request again. */
static void body_ev_sync(struct s3_conn *c)
{
    if (!c->body_direct || (!c->dead && c->state == CS_BODY))
        return;
    c->body_direct = false;
    if (c->body_ev)
        event_del(c->body_ev);
    if (!c->dead && !c->closing && c->bev)
        bufferevent_enable(c->bev, EV_READ);
}

static void on_body_readable(evutil_socket_t fd, short what, void *arg);

/* From now on the body comes from the socket by recv() (the bufferevent stops
 * reading; what it already holds is fed first). */
static void body_direct_begin(struct s3_conn *c)
{
    if (!c->body_ev)
        c->body_ev = event_new(srv_loop_base(c->loop), bufferevent_getfd(c->bev),
                               EV_READ | EV_PERSIST, on_body_readable, c);
    if (!c->body_ev)
        abort();
    bufferevent_disable(c->bev, EV_READ);
    c->body_direct = true;
}

/* Read the upload body straight into its chunk buffer and feed it to the
 * parser in place, until the socket is drained, the body is complete, or
 * both chunks are taken (then the read event is dropped: stream_write_done
 * comes back through conn_pump). */
static void body_read(struct s3_conn *c)
{
    struct s3_ctx *x = c->x;
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (!c->body_direct)
        body_direct_begin(c);
    while (!c->dead && c->state == CS_BODY && c->x == x && !x->body_err) {
        uint64_t left = body_left(c);
        if (left == 0)
            break;
        if (body_room(x) == 0) {
            event_del(c->body_ev); /* back-pressure: both chunks are taken */
            return;
        }
        size_t space = chunk_space(x);
        if (space == 0) { /* full, and the other chunk is free (body_room) */
            chunk_ship(x);
            continue;
        }
        size_t want = left < space ? (size_t)left : space;
        ssize_t n = recv(fd, x->cbuf[x->ccur] + x->cfill, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            event_add(c->body_ev, &c->idle);
            return;
        }
        if (n <= 0) {
            if (n == 0)
                srv_log(INFO, S3,
                        "req=%s tenant=%u peer=%s client closed the connection mid-request",
                        x->reqid, x->p.tenant, c->peer);
            else
                srv_log(INFO, S3, "req=%s tenant=%u peer=%s read failed mid-request: %s",
                        x->reqid, x->p.tenant, c->peer, strerror(errno));
            conn_close(c);
            return;
        }
        size_t used = 0;
        int ev = s3__http_feed(&c->http, (const char *)x->cbuf[x->ccur] + x->cfill, (size_t)n,
                               &used);
        if (!conn_event(c, ev, CS_BODY))
            break;
    }
    body_ev_sync(c);
}

static void on_body_readable(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (!c->dead && c->body_direct && c->state == CS_BODY && c->x) {
        if (!(what & EV_TIMEOUT)) {
            body_read(c);
        } else if (!c->x->writing) { /* a write in flight is our turn, not the client's */
            srv_log(INFO, S3, "req=%s tenant=%u peer=%s connection timed out (read)", c->x->reqid,
                    c->x->p.tenant, c->peer);
            conn_close(c);
        }
    }
    conn_leave(c);
}

static void conn_pump(struct s3_conn *c)
{
    if (c->dead || c->in_pump)
        return;
    c->in_pump = true;
    for (;;) {
        if (c->dead || c->closing)
            break;
        struct evbuffer *in = bufferevent_get_input(c->bev);
        size_t avail = evbuffer_get_length(in);
        size_t room = SIZE_MAX;
        if (c->state == CS_HEADERS) {
            /* a client that pipelines without reading gets no more answers
             * queued than the GET read-ahead allows; on_write resumes */
            if (avail == 0 || evbuffer_get_length(bufferevent_get_output(c->bev)) > S3_OUT_LOW)
                break;
        } else if (c->state == CS_BODY) {
            struct s3_ctx *x = c->x;
            if (x->body_mode == S3_BODY_STREAM) {
                room = body_room(x);
                if (room == 0)
                    break; /* both chunks taken: stream_write_done calls again */
                if (body_direct_ok(c)) {
                    if (!c->body_direct)
                        body_direct_begin(c);
                    if (avail == 0) {
                        body_read(c);
                        break;
                    }
                }
            }
        } else {
            break;
        }
        struct evbuffer_iovec v;
        const char *data = NULL;
        size_t n = 0;
        if (avail && evbuffer_peek(in, -1, NULL, &v, 1) >= 1) {
            data = v.iov_base;
            n = v.iov_len;
        }
        if (c->state == CS_BODY && n > S3_FEED_SLICE)
            n = S3_FEED_SLICE;
        if (n > room)
            n = room; /* decoded payload is never more than its input */
        size_t used = 0;
        enum conn_state before = c->state;
        int ev = s3__http_feed(&c->http, data, n, &used);
        if (used)
            evbuffer_drain(in, used);
        if (!conn_event(c, ev, before))
            break;
        if (ev == S3_HTTP_HEADERS || ev == S3_HTTP_DONE)
            continue;
        if (avail > 0 && used == avail && c->body_direct && c->state == CS_BODY)
            continue; /* the rest comes from the socket (body_read) */
        if (n == 0 || used == avail)
            break; /* need more input */
    }
    if (!c->dead && c->state == CS_BODY && c->x && c->x->body_mode == S3_BODY_STREAM)
        body_pump(c->x);
    body_ev_sync(c);
    c->in_pump = false;
}

/* ---------------------------------------------------------------- bufferevent callbacks */

static void on_read(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (c->lingering)
        conn_linger_read(c);
    else
        conn_pump(c);
    conn_leave(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (c->state == CS_STREAM && c->x)
        stream_pump(c->x);
    else if (c->closing && !c->work_inflight &&
             evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_done(c);
    else if (c->state == CS_HEADERS && !c->closing &&
             evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        conn_pump(c); /* pipelined requests held back while the output was full */
    conn_leave(c);
}

static void on_event_in(struct s3_conn *c, struct bufferevent *bev, short what);

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    on_event_in(c, bev, what);
    conn_leave(c);
}

static void on_event_in(struct s3_conn *c, struct bufferevent *bev, short what)
{
    if (c->lingering) { /* end of input, an error or the linger timeout: done */
        conn_close(c);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        struct s3_ctx *x = c->x;
        bool busy = x && (c->state == CS_WAIT || c->state == CS_STREAM || x->writing);
        if ((what & BEV_EVENT_READING) && busy) {
            bufferevent_enable(bev, EV_READ); /* our turn, not the client's */
            return;
        }
        srv_log(INFO, S3, "req=- tenant=%u peer=%s connection timed out (%s)", x ? x->p.tenant : 0,
                c->peer, (what & BEV_EVENT_READING) ? "read" : "write");
        if (x && c->state == CS_STREAM)
            ctx_log(x);
        conn_close(c);
        return;
    }
    if (what & BEV_EVENT_EOF) {
        struct s3_ctx *x = c->x;
        if (x && x->body_complete && (c->state == CS_WAIT || c->state == CS_STREAM)) {
            /* half-close after a complete request: finish the answer, then close */
            c->closing = true;
            return;
        }
        if (x)
            srv_log(INFO, S3, "req=%s tenant=%u peer=%s client closed the connection mid-request",
                    x->reqid, x->p.tenant, c->peer);
        conn_close(c);
        return;
    }
    if (what & BEV_EVENT_ERROR) {
        unsigned long e;
        while ((e = bufferevent_get_openssl_error(bev)) != 0)
            srv_log(DEBUG, S3, "req=- tenant=0 peer=%s TLS: %s", c->peer,
                    ERR_reason_error_string(e));
        conn_close(c);
    }
}

static void on_hdr_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    if (c->state != CS_HEADERS || c->dead)
        return;
    c->nest++;
    if (c->http.req) /* bytes of a request arrived, but not all its headers */
        conn_fatal(c, S3E_REQUEST_TIMEOUT, NULL);
    else
        conn_close(c);
    conn_leave(c);
}

/* ---------------------------------------------------------------- accepting */

struct accepted {
    struct s3_server *srv;
    struct srv_loop *loop;
    evutil_socket_t fd;
    struct sockaddr_storage sa;
};

static void conn_start(void *arg)
{
    struct accepted *a = arg;
    struct s3_server *srv = a->srv;
    struct srv_loop *l = a->loop;
    evutil_socket_t fd = a->fd;
    struct event_base *base = srv_loop_base(l);
    if (srv->stopping) {
        /* accepted just before the stop: never becomes a connection */
        evutil_closesocket(fd);
        free(a);
        pthread_mutex_lock(&srv->lock);
        atomic_fetch_sub(&srv->nconns, 1);
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
        return;
    }
    struct s3_conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->srv = srv;
    c->loop = l;
    if (a->sa.ss_family == AF_INET || a->sa.ss_family == AF_INET6) {
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (a->sa.ss_family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa;
            evutil_inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
            port = ntohs(s4->sin_port);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->sa;
            evutil_inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
            port = ntohs(s6->sin6_port);
        }
        snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
    } else {
        snprintf(c->peer, sizeof(c->peer), "local");
    }
    pthread_mutex_lock(&srv->lock);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    pthread_mutex_unlock(&srv->lock);

    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    evutil_make_socket_nonblocking(fd);
    if (srv->ssl) {
        SSL *ssl = SSL_new(srv->ssl);
        if (ssl)
            c->bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                    BEV_OPT_CLOSE_ON_FREE);
        if (c->bev)
            bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
        else if (ssl)
            SSL_free(ssl);
    } else {
        c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    free(a);
    s3__http_init(&c->http, srv->max_header_bytes, http_body_cb, c);
    s3__http_set_frame_cb(&c->http, http_frame_cb);
    c->hdr_timer = evtimer_new(base, on_hdr_timeout, c);
    c->direct = evbuffer_new();
    if (!c->bev || !c->hdr_timer || !c->direct) {
        srv_log(ERROR, S3, "req=- tenant=0 cannot set up a connection from %s", c->peer);
        if (!c->bev)
            evutil_closesocket(fd);
        c->dead = true;
        conn_free(c);
        return;
    }
    /* Every connection of a loop has the same idle timeout: as a common
     * timeout, re-arming it (after each read, per request) is a queue append
     * rather than a timer-heap update. */
    struct timeval tv = {srv->idle_timeout_s, 0};
    const struct timeval *common = event_base_init_common_timeout(base, &tv);
    c->idle = common ? *common : tv;
    bufferevent_set_timeouts(c->bev, &c->idle, &c->idle);
    bufferevent_setwatermark(c->bev, EV_READ, 0, S3_IN_HIGH);
    bufferevent_setwatermark(c->bev, EV_WRITE, S3_OUT_LOW, 0);
    /* libevent's default moves 16 KiB per callback: one epoll round per 16 KiB */
    bufferevent_set_max_single_write(c->bev, S3_MAX_IO);
    bufferevent_set_max_single_read(c->bev, S3_MAX_IO);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->state = CS_HEADERS;
    hdr_timer_arm(c);
}

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
        srv_log_limited(WARN, S3, "req=- tenant=0 connection refused: %d connections open "
                        "(s3_max_conns)", atomic_load(&srv->nconns));
        srv_metrics_op(SRV_PROTO_S3, "ConnRefused", 0, 0, 0, 0, SRV_ETHROTTLE);
        return;
    }
    struct accepted *a = calloc(1, sizeof(*a));
    if (!a) {
        evutil_closesocket(fd);
        return;
    }
    a->srv = srv;
    a->fd = fd;
    a->loop = srv_loop_next();
    if (salen > 0 && (size_t)salen <= sizeof(a->sa))
        memcpy(&a->sa, sa, (size_t)salen);
    atomic_fetch_add(&srv->nconns, 1);
    if (srv_loop_call(a->loop, conn_start, a) != 0) {
        atomic_fetch_sub(&srv->nconns, 1);
        evutil_closesocket(fd);
        free(a);
    }
}

/* ---------------------------------------------------------------- start / stop */

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

static void server_free(struct s3_server *srv)
{
    if (srv->ssl)
        SSL_CTX_free(srv->ssl);
    free(srv->listen);
    free(srv->domain);
    free(srv->region);
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

struct listen_setup {
    struct s3_server *srv;
    struct sockaddr_storage ss;
    int sslen;
    int rc;
    bool done;
};

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
    srv->tls_cert = xstrdup(cfg->tls_cert);
    srv->tls_key = xstrdup(cfg->tls_key);
    srv->max_header_bytes = cfg->max_header_bytes ? cfg->max_header_bytes : 64 * 1024;
    srv->max_object_size = cfg->max_object_size ? cfg->max_object_size : (5ull << 40);
    srv->idle_timeout_s = cfg->idle_timeout_s > 0 ? cfg->idle_timeout_s : 60;
    srv->max_conns = cfg->max_conns > 0 ? cfg->max_conns : 10000;
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
        conn_close(victim);
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
