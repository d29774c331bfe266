/* SPDX-License-Identifier: Apache-2.0
 * s3_resp: the response of a request (headers, S3 error documents, the
 * status line and head, sending it with the body or starting a streamed GET)
 * and the special answers of a connection that has no request context.
 * Small responses are built in the connection's direct buffer and written
 * straight to the socket when nothing else is queued.
 * Thread: the connection's loop (s3__resp_* setters also on a worker, for
 * the context they own). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"

/* Request id: 8 hex digits of the server instance, 12 of a sequence number. */
void s3__reqid_make(struct s3_server *srv, char out[24])
{
    static const char hx[] = "0123456789ABCDEF";
    uint64_t seq = (uint64_t)atomic_fetch_add(&srv->seq, 1) & UINT64_C(0xFFFFFFFFFFFF);
    for (int i = 0; i < 8; i++)
        out[i] = hx[(srv->instance >> (28 - 4 * i)) & 15];
    for (int i = 0; i < 12; i++)
        out[8 + i] = hx[(seq >> (44 - 4 * i)) & 15];
    out[20] = '\0';
}

void s3__resp_hdr(struct s3_ctx *x, const char *name, const char *val)
{
    char buf[512];
    size_t nl = strlen(name), vl = strlen(val);
    if (nl + vl + 4 > sizeof(buf)) {
        evbuffer_add(x->out.hdrs, name, nl);
        evbuffer_add(x->out.hdrs, ": ", 2);
        evbuffer_add(x->out.hdrs, val, vl);
        evbuffer_add(x->out.hdrs, "\r\n", 2);
        return;
    }
    memcpy(buf, name, nl);
    memcpy(buf + nl, ": ", 2);
    memcpy(buf + nl + 2, val, vl);
    memcpy(buf + nl + 2 + vl, "\r\n", 2);
    evbuffer_add(x->out.hdrs, buf, nl + vl + 4);
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
    evbuffer_add_printf(x->out.hdrs, "%s: ", name);
    va_start(ap, fmt);
    evbuffer_add_vprintf(x->out.hdrs, fmt, ap);
    va_end(ap);
    evbuffer_add(x->out.hdrs, "\r\n", 2);
}

const char *s3__resource(struct s3_ctx *x)
{
    return x->req && x->req->raw_path ? x->req->raw_path : "/";
}

/* Make the response an S3 error document; @p err is the internal error
 * behind it (for the metrics and the log). */
static void resp_error(struct s3_ctx *x, int err, const char *code, int status, const char *msg)
{
    x->out.err = err ? err : -EIO;
    x->out.status = status;
    evbuffer_drain(x->out.body, evbuffer_get_length(x->out.body));
    /* headers of a half-built success response must not leak into the error */
    evbuffer_drain(x->out.hdrs, evbuffer_get_length(x->out.hdrs));
    x->get.stream = false;
    s3__resp_header(x, "Content-Type", "application/xml");
    if (!x->out.head)
        s3__error_xml(x->out.body, code, msg, s3__resource(x), x->reqid);
    if (err == -EIO || err == SRV_ECORRUPT || x->out.status >= 500)
        srv_log(WARN, S3, "req=%s tenant=%u %s %s: %s (%s)", x->reqid, x->p.tenant,
                x->req ? x->req->method : "-", s3__resource(x), code, msg);
}

void s3__resp_err(struct s3_ctx *x, int err, const char *msg)
{
    const char *code = NULL;
    int status = 0;
    /* An unsigned request reaches any tenant's buckets (TENANT:BUCKET): were
     * a missing bucket NoSuchBucket where one it may not use is AccessDenied,
     * anybody could list other tenants' bucket names by guessing. */
    if ((x->id.flags & CORE_P_ANON) &&
        (err == SRV_ENOBUCKET || (err == -ENOENT && x->rt.key == NULL))) {
        err = -EACCES;
        msg = NULL;
    }
    char why[CORE_KEY_MAX + 160];
    if (!msg && (err == SRV_EIMPORT || err == SRV_EIMPORTFAIL)) {
        /* a cache bucket's directory could not be imported: say which (core.h) */
        const char *dk = core_cache_import_failed();
        snprintf(why, sizeof(why), "%s while importing prefix '%s'%s from the remote tier: %s",
                 err == SRV_EIMPORT ? "the remote is unreachable"
                                    : "the remote has been unreachable for tier_recall_fail_ms",
                 dk, dk[0] ? "" : " (the bucket's root)",
                 err == SRV_EIMPORT ? "retry" : "retry once it is back");
        msg = why;
    }
    s3__error_map(err, x->rt.key != NULL, &code, &status);
    resp_error(x, err, code, status, msg ? msg : srv_strerror(err));
    if (err == SRV_ETHROTTLE) /* SlowDown: QoS; SDKs back off by this */
        s3__resp_header(x, "Retry-After", "1");
}

void s3__resp_s3err(struct s3_ctx *x, enum s3_err e, const char *msg)
{
    const struct s3_err_info *i = s3__err_info(e);
    /* not an internal error: SRV_EBADREQ marks it failed in the metrics */
    resp_error(x, i->status >= 500 ? -EIO : SRV_EBADREQ, i->code, i->status, msg ? msg : i->msg);
}

void s3__resp_xml(struct s3_ctx *x)
{
    x->out.status = 200;
    s3__resp_header(x, "Content-Type", "application/xml");
    evbuffer_add_printf(x->out.body, S3_XML_HDR);
}

/* The status line and headers of x's response, onto @p out. */
void s3__resp_head(struct s3_ctx *x, uint64_t clen, struct evbuffer *out)
{
    char head[512], *o = head;
    char date[32], num[24];
    s3__http_date_fmt(time(NULL), date);
    /* an answer before the whole request body arrived closes the connection
     * (s3__ctx_finish): say so, or the client would send its next request into
     * the lingering close, where it is dropped */
    bool close =
        x->out.close_after || x->conn->closing || !x->req || !x->req->keep_alive || !x->in.complete;
    /* status text <= 40, date 29, request id 20 (twice): well under the buffer */
    o = s3__put_str(o, "HTTP/1.1 ");
    s3__u64_dec(num, (uint64_t)(x->out.status > 0 && x->out.status < 1000 ? x->out.status : 500));
    o = s3__put_str(o, num);
    *o++ = ' ';
    o = s3__put_str(o, s3__status_text(x->out.status));
    o = s3__put_str(o, "\r\nDate: ");
    o = s3__put_str(o, date);
    o = s3__put_str(o, "\r\nServer: s3nfs\r\nx-amz-request-id: ");
    o = s3__put_str(o, x->reqid);
    o = s3__put_str(o, "\r\nx-amz-id-2: ");
    o = s3__put_str(o, x->reqid);
    o = s3__put_str(o, "\r\n");
    if (x->out.status != 204 && x->out.status != 304) {
        s3__u64_dec(num, clen);
        o = s3__put_str(o, "Content-Length: ");
        o = s3__put_str(o, num);
        o = s3__put_str(o, "\r\n");
    }
    if (close)
        o = s3__put_str(o, "Connection: close\r\n");
    evbuffer_add(out, head, (size_t)(o - head));
    evbuffer_add_buffer(out, x->out.hdrs);
    evbuffer_add(out, "\r\n", 2);
    if (close)
        x->conn->closing = true;
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

void s3__resp_send(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (x->out.status == 0)
        x->out.status = 200;
    if (x->get.stream && x->out.status < 300) {
        bool body = !x->out.head && x->get.end > x->get.off;
        /* TLS encrypts in user space: it keeps the copy path. Zero-copy writes
         * the head with its first window (zc_pump). */
        x->get.zc = body && !x->srv->ssl;
        if (!x->get.zc)
            s3__resp_head(x, x->get.end - x->get.off,
                          body ? bufferevent_get_output(c->bev) : c->direct);
        if (!body)
            send_direct(c);
        if (body) {
            c->state = S3_CS_STREAM;
            s3__get_pump(x);
            return;
        }
        s3__get_end(x);
        return;
    }
    size_t n = evbuffer_get_length(x->out.body);
    s3__resp_head(x, x->out.head ? 0 : n, c->direct);
    if (!x->out.head) {
        x->bytes_out += n;
        evbuffer_add_buffer(c->direct, x->out.body);
    }
    send_direct(c);
    s3__get_end(x);
}

/* A response without a request context: malformed request, header limit, timeout. */
void s3__conn_fatal(struct s3_conn *c, enum s3_err e, const char *msg)
{
    const struct s3_err_info *ei = s3__err_info(e);
    int status = ei->status;
    const char *code = ei->code;
    if (!msg)
        msg = ei->msg;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    struct evbuffer *b = evbuffer_new();
    char reqid[24], date[32];
    s3__reqid_make(c->srv, reqid);
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
    c->state = S3_CS_WAIT;
    s3__conn_read_disable(c);
}
