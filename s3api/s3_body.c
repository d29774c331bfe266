/* SPDX-License-Identifier: Apache-2.0
 * s3_body: request bodies. Documents (XML ops) collect in memory, bounded,
 * and are checked before the op runs (signed SHA-256, Content-MD5,
 * x-amz-checksum-*). Upload bodies (STREAM ops) stream: payload bytes (after
 * HTTP chunked and aws-chunked decoding) fill a page-aligned chunk buffer of
 * up to S3_WCHUNK bytes, which goes to two workers (one hashes, one calls
 * core_upload_write) while the connection fills a second one; while both are
 * taken the socket is not read (TCP back-pressure: at most two chunks per
 * connection). A plain-TCP body with a Content-Length is read straight into
 * the chunk with recv() (no bufferevent, no copy; aws-chunked framing is
 * decoded in place), the others go through the bufferevent and are copied in.
 * Nothing is visible until the op commits after the last byte, so a client
 * that disconnects mid-upload leaves nothing behind.
 * QoS shaping: a body larger than the smallest burst on its QoS path (tenant,
 * bucket, directories, user) is admitted in pieces (s3__body_credit); the
 * socket is read only as far as the admitted bytes, and not at all while the
 * next piece waits, so the client is held to the rate by TCP back-pressure
 * and nothing is buffered beyond the usual; meanwhile the client's end of
 * input is watched for, so an upload that can no longer complete leaves the
 * queue when its client goes (on_body_hup).
 * Thread: the connection's loop; the hash and write steps on workers, each
 * reading only the chunk in flight. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"

static void stream_hash_work(struct s3_ctx *x);
static void stream_write_work(struct s3_ctx *x);
static void stream_write_done(struct s3_ctx *x);
static void stream_begin_done(struct s3_ctx *x);
static void on_body_readable(evutil_socket_t fd, short what, void *arg);
static uint64_t body_left(const struct s3_conn *c);

/* The body failed with internal error @p err (the first failure counts). @return -1. */
int s3__body_fail(struct s3_ctx *x, int err, const char *msg)
{
    if (!x->in.err) {
        x->in.err = err;
        x->in.errmsg = msg;
    }
    return -1;
}

/* The body failed with S3-only error @p e. @return -1. */
int s3__body_fail_s3(struct s3_ctx *x, enum s3_err e, const char *msg)
{
    if (!x->in.err)
        x->in.s3err = e;
    return s3__body_fail(x, SRV_EBADREQ, msg);
}

/* Make the response the body's failure. */
void s3__body_fail_resp(struct s3_ctx *x)
{
    if (x->in.s3err)
        s3__resp_s3err(x, x->in.s3err, x->in.errmsg);
    else
        s3__resp_err(x, x->in.err, x->in.errmsg);
}

/* The client's end of input came while a piece of its upload waits (EV_CLOSED:
 * the socket is not read meanwhile, so end of input would only be seen once
 * the bytes before it were read, at the admitted rate). When the bytes still
 * queued in the socket and the input are fewer than the body still expects,
 * it can never end: the connection closes now, which withdraws the piece
 * from the queue, instead of admitting and reading those bytes first. A body
 * that is all there (a client that half-closes after sending it) goes on. */
static void on_body_hup(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    (void)what;
    c->nest++;
    struct s3_ctx *x = c->x;
    int inq = 0;
    if (!c->dead && c->bev && x && c->state == S3_CS_BODY && x->qos.waiting &&
        ioctl(fd, FIONREAD, &inq) == 0 && inq >= 0 &&
        (uint64_t)inq + evbuffer_get_length(bufferevent_get_input(c->bev)) < body_left(c)) {
        srv_log(INFO, S3, "req=%s tenant=%u peer=%s client closed the connection mid-request",
                x->reqid, x->p.tenant, c->peer);
        s3__conn_close(c);
    }
    s3__conn_leave(c);
}

/* Stop reading the socket while the next piece waits for admission (TCP
 * back-pressure on the client); a plain connection with body bytes still
 * to come watches for the client's end of input meanwhile (on_body_hup). */
static void body_pause(struct s3_conn *c)
{
    if (c->body_direct) {
        if (c->body_ev)
            event_del(c->body_ev);
    } else if (c->bev) {
        s3__conn_read_disable(c);
    }
    if (!c->bev || c->srv->ssl || !c->x || body_left(c) == 0)
        return;
    if (!c->hup_ev)
        c->hup_ev =
            event_new(srv_loop_base(c->loop), bufferevent_getfd(c->bev), EV_CLOSED, on_body_hup, c);
    if (c->hup_ev)
        event_add(c->hup_ev, NULL);
}

/* The next piece of a shaped body was decided: read on, or fail (it waited
 * too long: 503 SlowDown, the rest of the body is not read). */
static void body_piece_go(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (c->hup_ev)
        event_del(c->hup_ev);
    if (x->qos.err) {
        s3__body_fail(x, SRV_ETHROTTLE, s3__qos_why(x));
        s3__body_pump(x);
        return;
    }
    s3__qos_piece_got(x);
    if (!c->body_direct && c->bev)
        s3__conn_read_enable(c);
    s3__conn_pump(c);
}

size_t s3__body_credit(struct s3_ctx *x)
{
    if (!x->qos.shaped)
        return SIZE_MAX;
    while (x->qos.credit == 0) {
        if (x->qos.waiting || x->in.err)
            return 0;
        if (x->qos.left == 0)
            return SIZE_MAX; /* all admitted (the parser stops at the body's end) */
        uint64_t ask = x->qos.left == UINT64_MAX ? S3_WCHUNK : x->qos.left;
        int rc = s3__qos_admit_piece(x, x->rt.op->qos, ask, true, body_piece_go);
        if (rc == 0) {
            body_pause(x->conn);
            return 0;
        }
        if (rc < 0) {
            s3__body_fail(x, SRV_ETHROTTLE, s3__qos_why(x));
            return 0;
        }
        s3__qos_piece_got(x);
    }
    return x->qos.credit > SIZE_MAX ? SIZE_MAX : (size_t)x->qos.credit;
}

void s3__body_spent(struct s3_ctx *x, size_t n)
{
    if (x->qos.shaped)
        x->qos.credit -= n < x->qos.credit ? n : x->qos.credit;
}

/* The payload size the request announced (0 if it did not). */
static uint64_t upload_declared(const struct s3_ctx *x)
{
    if (x->in.aws_chunked)
        return x->in.decoded_len > 0 ? (uint64_t)x->in.decoded_len : 0;
    return x->req->has_clen ? x->req->content_length : 0;
}

/* Make the chunk being filled at least @p cap bytes (page-aligned, so the
 * store can write it with O_DIRECT as it is); its bytes are kept. */
static void chunk_grow(struct s3_ctx *x, size_t cap)
{
    int i = x->wr.ccur;
    void *p = NULL;
    cap = (cap + 4095) & ~(size_t)4095;
    if (posix_memalign(&p, 4096, cap) != 0)
        abort();
    if (x->wr.cfill)
        memcpy(p, x->wr.cbuf[i], x->wr.cfill);
    free(x->wr.cbuf[i]);
    x->wr.cbuf[i] = p;
    x->wr.ccap[i] = cap;
}

/* Free bytes in the chunk being filled, making or growing it as needed (0:
 * it holds S3_WCHUNK bytes and must go to the workers first). The first
 * chunk of a small upload is only as large as the upload. */
static size_t chunk_space(struct s3_ctx *x)
{
    int i = x->wr.ccur;
    if (x->wr.cfill == x->wr.ccap[i] && x->wr.ccap[i] < S3_WCHUNK) {
        size_t want = S3_WCHUNK;
        uint64_t d = upload_declared(x);
        if (!x->wr.cbuf[i] && !x->wr.cbuf[i ^ 1] && d > 0 && d < S3_WCHUNK)
            want = (size_t)d;
        chunk_grow(x, want);
    }
    return x->wr.ccap[i] - x->wr.cfill;
}

/* Payload bytes the connection may take now without a third chunk. */
size_t s3__body_room(const struct s3_ctx *x)
{
    size_t cur = S3_WCHUNK - x->wr.cfill;
    return x->wr.writing ? cur : cur + S3_WCHUNK;
}

/* The filled chunk goes to two workers (hash, write); the other one fills next. */
static void chunk_ship(struct s3_ctx *x)
{
    x->wr.wptr = x->wr.cbuf[x->wr.ccur];
    x->wr.wlen = x->wr.cfill;
    x->wr.writing = true;
    x->wr.jobs = 2;
    x->wr.ccur ^= 1;
    x->wr.cfill = 0;
    s3__ctx_submit(x, stream_hash_work, stream_write_done);
    s3__ctx_submit(x, stream_write_work, stream_write_done);
}

/* Decoded payload bytes. An upload's bytes may already be where they belong
 * (read straight into the chunk) or earlier in it (aws-chunked decoded in
 * place): then they are not copied, or moved down. */
int s3__body_payload(void *arg, const char *data, size_t len)
{
    struct s3_ctx *x = arg;
    if (x->in.mode != S3_BODY_STREAM) {
        if (evbuffer_get_length(x->in.buf) + len > x->in.limit)
            return s3__body_fail(x, SRV_EBADREQ,
                                 "the request body is larger than this operation accepts");
        evbuffer_add(x->in.buf, data, len);
        return 0;
    }
    if (x->wr.written + (x->wr.writing ? x->wr.wlen : 0) + x->wr.cfill + len >
        x->srv->max_object_size)
        return s3__body_fail(x, SRV_ETOOBIG, S3_MSG_TOO_LARGE);
    while (len > 0) {
        size_t space = chunk_space(x);
        if (space == 0) {
            if (x->wr.writing) /* cannot happen: every feed is bounded by s3__body_room() */
                return s3__body_fail(x, -EIO, "upload buffer overrun");
            chunk_ship(x);
            continue;
        }
        size_t n = len < space ? len : space;
        unsigned char *dst = x->wr.cbuf[x->wr.ccur] + x->wr.cfill;
        if ((const unsigned char *)data != dst)
            memmove(dst, data, n);
        x->wr.cfill += n;
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
    if (x->in.err)
        return -1;
    if (rc == SRV_EAUTH)
        return s3__body_fail(x, SRV_EAUTH, x->in.ck->d.err);
    return s3__body_fail_s3(x, S3E_INCOMPLETE_BODY, x->in.ck->d.err);
}

/* Body bytes after HTTP framing (llhttp). */
int s3__body_http_data(void *arg, const char *data, size_t len)
{
    struct s3_conn *c = arg;
    struct s3_ctx *x = c->x;
    if (!x)
        return -1;
    x->bytes_in += len;
    if (x->in.form) { /* a browser form: only its file part is the payload */
        if (s3__form_feed(x->in.form, data, len) == 0)
            return 0;
        return x->in.err ? -1
                         : s3__body_fail(x, -EINVAL,
                                         x->in.form->why ? x->in.form->why
                                                         : "malformed multipart/form-data");
    }
    if (!x->in.aws_chunked)
        return s3__body_payload(x, data, len);
    if (x->req->chunked)
        return ck_result(x, s3__chunked_http_data(x->in.ck, data, len));
    return ck_result(x, srv_sigv4_chunked_feed(&x->in.ck->d, data, len));
}

/* HTTP chunk boundaries and trailer fields. An aws-chunked upload may carry
 * its framing in them (s3__chunked_http_frame); for every other body they
 * mean nothing and are dropped. No request, or one already answered: the
 * parser only runs for the request the connection is reading, but nothing
 * here may assume it. */
int s3__body_http_frame(void *arg, const struct s3_http_frame *f)
{
    struct s3_conn *c = arg;
    struct s3_ctx *x = c->x;
    if (!x || !x->in.aws_chunked || !x->req->chunked)
        return 0;
    return ck_result(x, s3__chunked_http_frame(x->in.ck, f));
}

/* A chunk goes to two workers at once: one hashes (MD5, signed SHA-256,
 * additional checksum), one writes; both only read x->wr.wptr. The MD5 of a
 * large chunk shares the multi-buffer hasher with the other uploads hashing
 * at that moment (srv_md5.h). */
static void stream_hash_work(struct s3_ctx *x)
{
    srv_md5_update(&x->in.md5, x->wr.wptr, x->wr.wlen);
    if (x->in.sha256)
        EVP_DigestUpdate(x->in.sha256, x->wr.wptr, x->wr.wlen);
    if (x->in.cks.algo)
        s3__ck_update(&x->in.cks, x->wr.wptr, x->wr.wlen);
}

static void stream_write_work(struct s3_ctx *x)
{
    x->wr.rc = core_upload_write(x->wr.up, x->wr.wptr, x->wr.wlen);
}

/* The upload failed: send the error response that is set. */
static void stream_fail(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    c->state = S3_CS_WAIT;
    s3__resp_send(x);
}

static void stream_write_done(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (--x->wr.jobs > 0)
        return;
    x->wr.written += x->wr.wlen;
    x->wr.wptr = NULL;
    x->wr.writing = false;
    if (x->wr.rc) {
        s3__resp_err(x, x->wr.rc, NULL);
        stream_fail(x);
        return;
    }
    s3__body_pump(x);
    /* x may be finished and freed by now; c stays (nest) */
    if (!c->dead && c->x == x && c->state == S3_CS_BODY)
        s3__conn_pump(c);
}

/* STREAM ops: move payload to the worker, then finish. */
void s3__body_pump(struct s3_ctx *x)
{
    if (x->wr.writing || x->conn->x != x)
        return;
    if (x->in.err) {
        s3__body_fail_resp(x);
        stream_fail(x);
        return;
    }
    if (x->wr.cfill >= S3_WCHUNK || (x->in.complete && x->wr.cfill > 0)) {
        chunk_ship(x);
        return;
    }
    if (!x->in.complete)
        return;
    x->conn->state = S3_CS_WAIT;
    if (x->in.aws_chunked && !x->in.ck->d.done) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY, "the aws-chunked body ended before its final chunk");
        stream_fail(x);
        return;
    }
    if (x->in.decoded_len >= 0 && (uint64_t)x->in.decoded_len != x->wr.written) {
        s3__resp_s3err(x, S3E_INCOMPLETE_BODY,
                       "x-amz-decoded-content-length does not match the payload");
        stream_fail(x);
        return;
    }
    s3__ctx_submit(x, x->rt.op->finish, s3__op_done);
}

/* Request documents (and bodies of bodyless ops) are small and in memory:
 * verify the signed payload hash, Content-MD5 and an x-amz-checksum-* header
 * before acting. @return 0, or the error response is set. */
int s3__body_check(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    const unsigned char *p = evbuffer_pullup(x->in.buf, (ssize_t)n);
    if (!p)
        p = (const unsigned char *)"";
    if (x->in.sha256) {
        char hex[65];
        srv_sigv4_sha256_hex(p, n, hex);
        if (!srv_sigv4_equal(hex, x->auth.sig.payload_hash, 64)) {
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

void s3__body_start(struct s3_ctx *x)
{
    s3__ctx_submit(x, x->rt.op->work, stream_begin_done);
}

static void stream_begin_done(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (x->out.status >= 300 || !x->wr.up) {
        if (!x->out.status)
            s3__resp_err(x, -EIO, "upload could not start");
        s3__resp_send(x);
        return;
    }
    if (x->req->expect_continue)
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    c->state = S3_CS_BODY;
    s3__http_resume(&c->http);
    s3__conn_pump(c);
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
bool s3__body_direct_ok(const struct s3_conn *c)
{
    const struct s3_ctx *x = c->x;
    /* a form is decoded from the bufferevent's bytes: its file part lands in the chunk */
    return !c->srv->ssl && x && x->in.mode == S3_BODY_STREAM && !x->in.err && !x->in.form &&
           body_left(c) > 0;
}

/* Leave direct body reading once the body is over (or the connection is):
 * the bufferevent reads the next request again. */
void s3__body_ev_sync(struct s3_conn *c)
{
    if (!c->body_direct || (!c->dead && c->state == S3_CS_BODY))
        return;
    c->body_direct = false;
    if (c->body_ev)
        event_del(c->body_ev);
    if (!c->dead && !c->closing && c->bev)
        s3__conn_read_enable(c);
}

/* From now on the body comes from the socket by recv() (the bufferevent stops
 * reading; what it already holds is fed first). */
void s3__body_direct_begin(struct s3_conn *c)
{
    if (!c->body_ev)
        c->body_ev = event_new(srv_loop_base(c->loop), bufferevent_getfd(c->bev),
                               EV_READ | EV_PERSIST, on_body_readable, c);
    if (!c->body_ev)
        abort();
    s3__conn_read_disable(c);
    c->body_direct = true;
}

/* Read the upload body straight into its chunk buffer and feed it to the
 * parser in place, until the socket is drained, the body is complete, or
 * both chunks are taken (then the read event is dropped: stream_write_done
 * comes back through s3__conn_pump). */
void s3__body_read(struct s3_conn *c)
{
    struct s3_ctx *x = c->x;
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (!c->body_direct)
        s3__body_direct_begin(c);
    while (!c->dead && c->state == S3_CS_BODY && c->x == x && !x->in.err) {
        uint64_t left = body_left(c);
        if (left == 0)
            break;
        if (s3__body_room(x) == 0) {
            event_del(c->body_ev); /* back-pressure: both chunks are taken */
            return;
        }
        size_t space = chunk_space(x);
        if (space == 0) { /* full, and the other chunk is free (s3__body_room) */
            chunk_ship(x);
            continue;
        }
        size_t want = left < space ? (size_t)left : space;
        size_t credit = s3__body_credit(x);
        if (credit == 0) { /* the next piece waits for admission (or was refused) */
            if (x->in.err)
                s3__body_pump(x);
            return;
        }
        if (want > credit)
            want = credit;
        ssize_t n = recv(fd, x->wr.cbuf[x->wr.ccur] + x->wr.cfill, want, 0);
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
                srv_log(INFO, S3, "req=%s tenant=%u peer=%s read failed mid-request: %s", x->reqid,
                        x->p.tenant, c->peer, strerror(errno));
            s3__conn_close(c);
            return;
        }
        s3__body_spent(x, (size_t)n);
        size_t used = 0;
        int ev = s3__http_feed(&c->http, (const char *)x->wr.cbuf[x->wr.ccur] + x->wr.cfill,
                               (size_t)n, &used);
        if (!s3__conn_event(c, ev, S3_CS_BODY))
            break;
    }
    s3__body_ev_sync(c);
}

static void on_body_readable(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (!c->dead && c->body_direct && c->state == S3_CS_BODY && c->x) {
        if (!(what & EV_TIMEOUT)) {
            s3__body_read(c);
        } else if (!c->x->wr.writing) { /* a write in flight is our turn, not the client's */
            srv_log(INFO, S3, "req=%s tenant=%u peer=%s connection timed out (read)", c->x->reqid,
                    c->x->p.tenant, c->peer);
            s3__conn_close(c);
        }
    }
    s3__conn_leave(c);
}
