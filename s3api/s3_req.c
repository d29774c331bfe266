/* SPDX-License-Identifier: Apache-2.0
 * s3_req: a request's context from its headers to its log line. Per
 * request: headers parsed (bounded, 431) -> authenticated (s3_auth.c, on the
 * loop thread) -> routed -> its body read (s3_body.c) -> admitted by QoS as
 * its op says (struct s3_op: class, flags) -> the op's fast path on the loop
 * or its work on a worker (srv_work_submit) -> the response sent
 * (s3_resp.c) -> logged and freed. Requests on a connection are handled
 * strictly one after another, so responses leave in request order.
 * Lifetime: a context whose connection died is released when its last
 * worker step returns; an open upload or a held inode are released on a
 * worker, and s3_server_stop waits for those (ndetached).
 * Thread: the connection's loop; the op's work on workers. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"

static void ctx_cleanup_work(void *arg)
{
    struct s3_ctx *x = arg;
    if (x->wr.up)
        core_upload_abort(x->wr.up);
    x->wr.up = NULL;
    if (x->get.ref_held)
        core_unref(x->core, x->get.ino);
    x->get.ref_held = false;
}

static void ctx_free_now(struct s3_ctx *x)
{
    if (x->in.buf)
        evbuffer_free(x->in.buf);
    free(x->wr.cbuf[0]);
    free(x->wr.cbuf[1]);
    if (x->out.hdrs)
        evbuffer_free(x->out.hdrs);
    if (x->out.body)
        evbuffer_free(x->out.body);
    if (x->in.sha256)
        EVP_MD_CTX_free(x->in.sha256);
    s3__ck_free(&x->in.cks);
    if (x->in.ck) {
        s3__chunked_fini(x->in.ck);
        free(x->in.ck);
    }
    for (int i = 0; i < S3_READS_INFLIGHT; i++)
        free(x->get.rs[i].buf);
    for (int i = 0; i < S3_ZC_INFLIGHT; i++)
        if (x->get.zw[i]) /* prepared, never appended (no worker runs: the conn waited) */
            s3__zwin_drop(x->get.zw[i]);
    s3__req_free(x->req);
    OPENSSL_cleanse(x->auth.skey, sizeof(x->auth.skey));
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
void s3__ctx_free(struct s3_ctx *x)
{
    if (!x)
        return;
    if (x->qos.waiting && qos_global())
        qos_cancel(qos_global(), x);
    x->qos.waiting = false;
    x->conn = NULL;
    if (x->wr.up || x->get.ref_held) {
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
void s3__ctx_log(struct s3_ctx *x)
{
    uint64_t lat = srv_now_us() - x->t_start;
    const char *op = x->rt.op ? x->rt.op->name : "Unknown";
    if (SRV_LOG_INFO <= srv_log_levels[SRV_SUB_S3]) {
        char line[1400], *o = line, num[24];
        const char *res = s3__resource(x);
        size_t rl = strlen(res);
        if (rl > 1100)
            rl = 1100; /* srv_log cuts long lines anyway */
        o = s3__put_str(o, "req=");
        o = s3__put_str(o, x->reqid);
        o = s3__put_str(o, " tenant=");
        s3__u64_dec(num, x->p.tenant);
        o = s3__put_str(o, num);
        o = s3__put_str(o, " peer=");
        o = s3__put_str(o, x->conn ? x->conn->peer : "-");
        o = s3__put_str(o, " op=");
        o = s3__put_str(o, op);
        *o++ = ' ';
        o = s3__put_str(o, x->req ? x->req->method : "-");
        *o++ = ' ';
        memcpy(o, res, rl);
        o += rl;
        o = s3__put_str(o, " status=");
        s3__u64_dec(num, (uint64_t)(x->out.status > 0 ? x->out.status : 0));
        o = s3__put_str(o, num);
        o = s3__put_str(o, " in=");
        s3__u64_dec(num, x->bytes_in);
        o = s3__put_str(o, num);
        o = s3__put_str(o, " out=");
        s3__u64_dec(num, x->bytes_out);
        o = s3__put_str(o, num);
        o = s3__put_str(o, " us=");
        s3__u64_dec(num, lat);
        o = s3__put_str(o, num);
        *o = '\0';
        srv_log_buffered(INFO, S3, "%s", line);
    }
    srv_metrics_op_bucket(SRV_PROTO_S3, op, x->p.tenant, x->bucket_ino, x->bytes_in, x->bytes_out,
                          lat, x->out.status >= 400 ? (x->out.err ? x->out.err : -EIO) : 0);
}

struct work_call {
    struct s3_ctx *x;
    void (*work)(struct s3_ctx *);
    void (*done)(struct s3_ctx *);
    void (*work_arg)(struct s3_ctx *, void *); /* or these two, with arg */
    void (*done_arg)(struct s3_ctx *, void *);
    void *arg;
};

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
    s3__conn_leave(c);
}

/* Run @p work on a worker, then @p done on the connection's loop (unless the
 * connection died meanwhile: then the context is released instead). */
void s3__ctx_submit(struct s3_ctx *x, void (*work)(struct s3_ctx *), void (*done)(struct s3_ctx *))
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

/* As s3__ctx_submit, passing @p arg to both functions. */
void s3__ctx_submit_arg(struct s3_ctx *x, void (*work)(struct s3_ctx *, void *),
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

void s3__ctx_finish(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    s3__ctx_log(x);
    if (!x->in.complete) {
        c->closing = true; /* unread body bytes would be parsed as the next request */
        c->linger = true;
    }
    c->x = NULL;
    /* the next request on this connection reuses the three buffers, emptied */
    struct evbuffer **keep[3] = {&x->in.buf, &x->out.hdrs, &x->out.body};
    for (int i = 0; i < 3; i++)
        if (!c->spare[i] && *keep[i]) {
            evbuffer_drain(*keep[i], evbuffer_get_length(*keep[i]));
            c->spare[i] = *keep[i];
            *keep[i] = NULL;
        }
    s3__ctx_free(x);
    c->state = S3_CS_HEADERS;
    s3__body_ev_sync(c);
    if (c->closing) {
        c->state = S3_CS_WAIT;
        s3__conn_read_disable(c);
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
            s3__conn_done(c);
        return;
    }
    s3__conn_hdr_timer(c);
    s3__conn_pump(c);
}

static void qos_go(void *arg, int err)
{
    struct s3_ctx *x = arg;
    struct s3_conn *c = x->conn;
    x->qos.waiting = false;
    x->qos.err = err;
    if (err == SRV_ETHROTTLE) {
        x->qos.refused = true;
        qos_last_refusal(&x->qos.refusal);
    }
    if (x->qos.sync) { /* inside qos_admit_piece: s3__qos_admit_piece reports it */
        x->qos.now = true;
        return;
    }
    if (!c || c->dead) /* the context is released with the connection */
        return;
    c->nest++;
    x->qos.next(x);
    s3__conn_leave(c);
}

/* Where a request's bytes of class @p cls land, for the bucket and directory
 * levels of QoS: the request's bucket and key, except the read side of a copy
 * in progress, which reads its source. */
static void ctx_scope(struct s3_ctx *x, enum qos_class cls, struct qos_scope *sc)
{
    memset(sc, 0, sizeof(*sc));
    if (cls == QOS_READ && x->copy.active && !x->copy.finished && x->copy.src_bucket) {
        sc->bucket = x->copy.src_bucket;
        sc->bucketlen = x->copy.src_bucketlen;
        sc->key = x->copy.src_key;
        sc->keylen = x->copy.src_keylen;
        return;
    }
    sc->bucket = x->rt.bucket;
    sc->bucketlen = x->rt.bucketlen;
    sc->key = x->rt.key;
    sc->keylen = x->rt.keylen;
    sc->memo = &x->qos.memo; /* looked up once per request */
}

/* The one place s3api asks QoS (with the request's scope: ctx_scope): admit a
 * piece of at most @p bytes of class @p cls for this request; its operation
 * is charged with its first piece (@p more false), later pieces are bytes
 * only. Every level on the request's path (tenant, bucket, directories,
 * user) is charged for each piece. The piece's size is in x->qos.piece (all
 * of @p bytes unless shaping cuts it to the smallest burst on the path).
 * @return 1: admitted now (@p next does not run); 0: waiting, @p next runs on
 *         this loop later with x->qos.err 0 (admitted) or SRV_ETHROTTLE (it
 *         waited longer than qos_max_wait_ms); SRV_ETHROTTLE (queue full) or
 *         -errno: refused now (@p next never runs). */
int s3__qos_admit_piece(struct s3_ctx *x, enum qos_class cls, uint64_t bytes, bool more,
                        void (*next)(struct s3_ctx *x))
{
    struct qos *q = qos_global();
    x->qos.piece = bytes;
    if (!q)
        return 1;
    x->qos.next = next;
    x->qos.sync = true;
    x->qos.now = false;
    x->qos.err = 0;
    x->qos.waiting = true;
    struct qos_scope sc;
    ctx_scope(x, cls, &sc);
    int rc = qos_admit_piece_at(q, &x->p, &sc, cls, bytes, more ? QOS_PIECE_MORE : 0, &x->qos.piece,
                                srv_loop_base(x->loop), qos_go, x);
    x->qos.sync = false;
    if (rc) {
        x->qos.waiting = false;
        if (rc == SRV_ETHROTTLE) {
            x->qos.refused = true;
            qos_last_refusal(&x->qos.refusal);
        }
        return rc;
    }
    if (!x->qos.now)
        return 0;
    return x->qos.err ? x->qos.err : 1;
}

/* Whether QoS may hold up requests of class @p cls of this request (a cap on
 * the class at some level of its path, or a capacity): GETs of those read no
 * data before their first piece is admitted. */
bool s3__qos_applies(struct s3_ctx *x, enum qos_class cls)
{
    struct qos *q = qos_global();
    if (!q)
        return false;
    struct qos_scope sc;
    ctx_scope(x, cls, &sc);
    return qos_applies_at(q, &x->p, &sc, cls);
}

const char *s3__qos_why(struct s3_ctx *x)
{
    char what[160] = "a QoS limit was reached";
    if (x->qos.refused)
        qos_refusal_format(&x->qos.refusal, what, sizeof(what));
    snprintf(x->qos.why, sizeof(x->qos.why), "please reduce your request rate (QoS: %s)", what);
    return x->qos.why;
}

void s3__qos_piece_got(struct s3_ctx *x)
{
    x->qos.credit += x->qos.piece;
    if (x->qos.left != UINT64_MAX)
        x->qos.left -= x->qos.piece < x->qos.left ? x->qos.piece : x->qos.left;
}

static void ctx_admit_done(struct s3_ctx *x)
{
    if (x->qos.err) {
        s3__resp_err(x, SRV_ETHROTTLE, s3__qos_why(x));
        s3__resp_send(x);
        return;
    }
    x->qos.then(x);
}

/* Admit the request's operation and the first piece of its @p bytes
 * (UINT64_MAX: a body of unknown length) before dispatching; @p next runs on
 * this loop once admitted (maybe at once). When shaping cuts the bytes, the
 * rest is admitted piece by piece as the body moves (x->qos.shaped, credit,
 * left). Throttled requests answer 503 SlowDown. */
void s3__ctx_admit(struct s3_ctx *x, enum qos_class cls, uint64_t bytes,
                   void (*next)(struct s3_ctx *))
{
    if (bytes == UINT64_MAX && !s3__qos_applies(x, cls))
        bytes = 0; /* a body of unknown length, nothing to shape it for */
    uint64_t ask = bytes == UINT64_MAX ? S3_WCHUNK : bytes;
    x->qos.then = next;
    int rc = s3__qos_admit_piece(x, cls, ask, false, ctx_admit_done);
    if (rc < 0) {
        /* next never runs: answer here */
        s3__resp_err(x, SRV_ETHROTTLE, s3__qos_why(x));
        s3__resp_send(x);
        return;
    }
    /* the piece's size is known now, admitted or not */
    x->qos.credit = x->qos.piece;
    x->qos.left = bytes == UINT64_MAX ? UINT64_MAX : bytes - x->qos.piece;
    x->qos.shaped = x->qos.left > 0;
    if (rc == 1)
        next(x);
}

/* ---- a copy's data (CopyObject, UploadPartCopy): admitted step by step ---- */

static void copy_pump(struct s3_ctx *x);

/* The copy failed with @p err: drop its upload and hold, then answer. */
static void copy_fail(struct s3_ctx *x, int err, const char *msg)
{
    x->copy.failed = true;
    if (err == SRV_ESTALE || err == -ENOENT)
        s3__resp_s3err(x, S3E_SERVICE_UNAVAILABLE,
                       "the copy source kept changing while it was read; please retry");
    else
        s3__resp_err(x, err, msg);
    s3__ctx_submit(x, s3__copy_end_work, s3__op_done);
}

/* A piece of the side x->copy.asking was admitted now or after waiting. */
static void copy_piece_got(struct s3_ctx *x)
{
    struct s3_ctx_copy *k = &x->copy;
    uint64_t got = x->qos.piece;
    uint64_t *credit = k->asking == QOS_READ ? &k->r_credit : &k->w_credit;
    uint64_t *left = k->asking == QOS_READ ? &k->r_left : &k->w_left;
    *credit += got;
    *left -= got < *left ? got : *left;
}

static void copy_piece_go(struct s3_ctx *x)
{
    if (x->qos.err) {
        copy_fail(x, SRV_ETHROTTLE, s3__qos_why(x));
        return;
    }
    copy_piece_got(x);
    copy_pump(x);
}

static void copy_step_done(struct s3_ctx *x)
{
    struct s3_ctx_copy *k = &x->copy;
    if (k->rc) {
        copy_fail(x, k->rc, NULL);
        return;
    }
    k->r_credit -= k->step < k->r_credit ? k->step : k->r_credit;
    k->w_credit -= k->step < k->w_credit ? k->step : k->w_credit;
    copy_pump(x);
}

/* Admit the next step, as a read and as a write of its bytes (pieces of at
 * most a burst when shaped; the whole copy at once when its bytes are not
 * capped), then copy it on a worker; at the end commit. The write operation
 * was charged before the op ran, the read one goes with the first read piece. */
static void copy_pump(struct s3_ctx *x)
{
    struct s3_ctx_copy *k = &x->copy;
    for (;;) {
        uint64_t rest = k->end - k->off;
        if (rest == 0) {
            s3__ctx_submit(x, s3__copy_end_work, s3__op_done);
            return;
        }
        if (k->r_credit && k->w_credit) {
            uint64_t step = k->r_credit < k->w_credit ? k->r_credit : k->w_credit;
            k->step = step < rest ? step : rest;
            s3__ctx_submit(x, s3__copy_step_work, copy_step_done);
            return;
        }
        bool rd = k->r_credit == 0;
        uint64_t *left = rd ? &k->r_left : &k->w_left;
        if (*left == 0)
            *left = rest; /* (a step copied less than admitted: admit what is left) */
        k->asking = rd ? QOS_READ : QOS_WRITE;
        int rc = s3__qos_admit_piece(x, k->asking, *left, rd ? k->r_started : true, copy_piece_go);
        if (rd)
            k->r_started = true;
        if (rc == 0)
            return; /* copy_piece_go goes on */
        if (rc < 0) {
            copy_fail(x, SRV_ETHROTTLE, s3__qos_why(x));
            return;
        }
        copy_piece_got(x);
    }
}

/* An S3_OPF_READ_AFTER op (GetObject) is admitted once its size is known, with
 * the bytes it will send. */
void s3__op_done(struct s3_ctx *x)
{
    if (x->copy.active && !x->copy.finished) {
        copy_pump(x); /* its data moves first, admitted step by step */
        return;
    }
    if (x->rt.bucket && !x->authz_done && x->out.status < 300) {
        /* fail closed: an operation on a bucket answered without a decision */
        srv_log(ERROR, S3, "req=%s tenant=%u %s answered without an access decision", x->reqid,
                x->p.tenant, x->rt.op->name);
        s3__resp_err(x, -EIO, "the request could not be authorized");
    }
    if (x->b.cfg.cors)
        s3__cors_actual(x);
    uint64_t n = x->get.stream ? x->get.end - x->get.off : evbuffer_get_length(x->out.body);
    /* an empty body is still one read operation */
    if ((x->rt.op->flags & S3_OPF_READ_AFTER) && x->out.status < 300)
        s3__ctx_admit(x, x->rt.op->qos, n, s3__resp_send);
    else
        s3__resp_send(x);
}

static void op_run(struct s3_ctx *x)
{
    s3__ctx_submit(x, x->rt.op->work, s3__op_done);
}

/* Run the op: its fast path first when it has one (GET/HEAD of an object:
 * metadata, and inline content, straight from the loop thread, as
 * core_key_peek reads only the LMDB map, so a small object costs no worker
 * round trip; only a body in extents goes to a worker). */
static void op_start(struct s3_ctx *x)
{
    /* a GET of a principal QoS applies to reads no data before its first piece */
    if (x->rt.op->flags & S3_OPF_READ_AFTER)
        x->qos.applies = s3__qos_applies(x, x->rt.op->qos);
    if (!x->rt.op->fast) {
        op_run(x);
        return;
    }
    switch (x->rt.op->fast(x)) {
    case S3_FAST_DONE:
        s3__op_done(x);
        break;
    case S3_FAST_DATA:
        s3__ctx_submit(x, s3__get_data_work, s3__op_done);
        break;
    default:
        op_run(x);
        break;
    }
}

void s3__req_headers(struct s3_conn *c)
{
    struct s3_server *srv = c->srv;
    /* the header timer stays pending (s3__conn_hdr_timer) */
    /* zeroed but for the 3 KiB of the signature's buffers, which only a parse
     * fills (5,080 bytes of calloc per request before) */
    struct s3_ctx *x = malloc(sizeof(*x));
    if (!x)
        abort();
    size_t sig_at = offsetof(struct s3_ctx, auth.sig), sig_end = sig_at + sizeof(x->auth.sig);
    memset(x, 0, sig_at);
    srv_sigv4_auth_reset(&x->auth.sig);
    memset((char *)x + sig_end, 0, sizeof(*x) - sig_end);
    x->srv = srv;
    x->conn = c;
    x->loop = c->loop;
    x->core = srv->core;
    x->tenants = srv->tenants;
    x->peer = c->sa;
    x->region = srv->region;
    x->req = s3__http_take_req(&c->http);
    x->a = &x->req->arena;
    x->t_start = srv_now_us();
    x->in.decoded_len = -1;
    struct evbuffer **take[3] = {&x->in.buf, &x->out.hdrs, &x->out.body};
    for (int i = 0; i < 3; i++) {
        *take[i] = c->spare[i] ? c->spare[i] : evbuffer_new();
        c->spare[i] = NULL;
        if (!*take[i])
            abort();
    }
    s3__reqid_make(srv, x->reqid);
    x->out.head = strcmp(x->req->method, "HEAD") == 0;
    x->tls = srv->ssl != NULL;
    c->x = x;
    c->state = S3_CS_WAIT;

    s3__route_req(x->a, x->req, srv->domain, &x->rt);
    if (s3__ctx_auth(x)) {
        s3__resp_send(x);
        return;
    }
    if (x->rt.err) {
        if (x->rt.err == -EPERM) /* the router's mark for a method the resource has not */
            s3__resp_s3err(x, S3E_METHOD_NOT_ALLOWED, x->rt.errmsg);
        else
            s3__resp_err(x, x->rt.err, x->rt.errmsg);
        s3__resp_send(x);
        return;
    }
    const struct s3_req *r = x->req;
    x->in.mode = x->rt.op->body;
    uint64_t declared = x->in.aws_chunked && x->in.decoded_len >= 0 ? (uint64_t)x->in.decoded_len
                                                                    : r->content_length;
    if (x->in.mode == S3_BODY_STREAM && declared > srv->max_object_size) {
        s3__resp_err(x, SRV_ETOOBIG, S3_MSG_TOO_LARGE);
        s3__resp_send(x);
        return;
    }
    if (x->in.mode == S3_BODY_STREAM && !r->has_clen && !r->chunked) {
        s3__resp_s3err(x, S3E_MISSING_CONTENT_LENGTH, NULL);
        s3__resp_send(x);
        return;
    }
    x->in.limit = S3_XML_BODY_MAX;
    if (x->in.mode == S3_BODY_STREAM) {
        srv_md5_init(&x->in.md5);
        /* admitted as the bytes read from the socket (framing included), in
         * pieces when shaped: s3__body_credit */
        s3__ctx_admit(x, x->rt.op->qos, r->has_clen ? r->content_length : UINT64_MAX,
                      s3__body_start);
        return;
    }
    if (r->expect_continue && (r->content_length > 0 || r->chunked))
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    c->state = S3_CS_BODY;
    s3__http_resume(&c->http);
}

/* The HTTP message (body included) is complete. */
void s3__req_message_done(struct s3_conn *c)
{
    struct s3_ctx *x = c->x;
    x->in.complete = true;
    s3__http_next(&c->http);
    c->state = S3_CS_WAIT;
    if (x->in.mode == S3_BODY_STREAM) {
        s3__body_pump(x);
        return;
    }
    if (x->in.err) {
        s3__body_fail_resp(x);
        s3__resp_send(x);
        return;
    }
    if (x->in.aws_chunked && !x->in.ck->d.done) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY, "aws-chunked body incomplete");
        s3__resp_send(x);
        return;
    }
    if (s3__body_check(x)) {
        s3__resp_send(x);
        return;
    }
    if (x->rt.op->flags & S3_OPF_READ_AFTER)
        op_start(x); /* admitted in s3__op_done */
    else
        s3__ctx_admit(x, x->rt.op->qos, 0, op_start);
}
