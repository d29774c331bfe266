/* SPDX-License-Identifier: Apache-2.0
 * s3_get: streamed GET bodies, after their head was decided (s3_resp.c).
 * With TLS (or when zero-copy does not apply) the body streams as 1 MiB
 * core_reads, two in flight on workers, appended to the output in offset
 * order while it holds less than S3_OUT_LOW (read-ahead keeps the socket
 * busy during a read). Without TLS it goes zero-copy: evbuffer file segments
 * (sendfile from the store's buffered fd) described by core_read_pieces, in
 * windows of S3_ZC_WIN bytes, up to S3_ZC_INFLIGHT being prepared on
 * workers, appended in offset order while the output holds less than
 * S3_ZC_OUT. A window keeps its pieces (and their store read token) until
 * libevent has sent or dropped its last byte: the cleanup callbacks of its
 * segments and references count it down, on the loop thread. Data read cold
 * (verified now, so sent from memory) goes in windows of S3_RCHUNK with the
 * output below S3_OUT_LOW, as the copy path does, so a cold GET holds no more
 * memory than it did. A body that fails after its head was sent cuts the
 * connection (the only honest signal left).
 * QoS shaping: a GET larger than the smallest burst on its QoS path was
 * admitted with its first piece only (s3__op_done); each later piece is
 * admitted before its bytes are read (get_credit), so the body leaves at the
 * admitted rate.
 * Thread: the connection's loop; reads and windows are prepared on workers. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"

#define S3_ZC_WIN S3_ZC_ONE
#define S3_ZC_GRID (1u << 20) /* extents are cut on this grid of file offsets */
#define S3_ZC_OUT (12u << 20)

static void zc_pump(struct s3_ctx *x);
static void stream_cut(struct s3_ctx *x, uint64_t at, int rc);

/* QoS shaping: the next piece of a shaped GET was decided. */
static void get_piece_go(struct s3_ctx *x)
{
    if (x->qos.err) { /* a piece waited too long: the head is out, cut */
        stream_cut(x, x->get.off, x->qos.err);
        return;
    }
    s3__qos_piece_got(x);
    s3__get_pump(x);
}

/* Bytes the GET may read (and then send) now: all when it is not shaped;
 * else its admitted bytes, admitting the next piece when they are spent.
 * 0: the piece waits (get_piece_go pumps again), or the GET was cut. */
static uint64_t get_credit(struct s3_ctx *x)
{
    if (!x->qos.shaped || !x->get.ref_held)
        return UINT64_MAX; /* one window without a hold is never cut */
    while (x->qos.credit == 0) {
        if (x->qos.waiting)
            return 0;
        if (x->qos.left == 0) /* read again after a retry: admit the rest anew */
            x->qos.left = x->get.end - x->get.next;
        int rc = s3__qos_admit_piece(x, QOS_READ, x->qos.left, true, get_piece_go);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            stream_cut(x, x->get.off, rc);
            return 0;
        }
        s3__qos_piece_got(x);
    }
    return x->qos.credit;
}

static void get_spent(struct s3_ctx *x, uint64_t n)
{
    if (x->qos.shaped)
        x->qos.credit -= n < x->qos.credit ? n : x->qos.credit;
}

static void stream_end_work(struct s3_ctx *x)
{
    if (x->get.ref_held)
        core_unref(x->core, x->get.ino);
    x->get.ref_held = false;
}

static void stream_end_done(struct s3_ctx *x)
{
    s3__ctx_finish(x);
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
    r->rc = core_read(x->core, &x->p, x->get.ino, r->off, r->buf, r->len, &r->n, &eof);
}

static void free_chunk(const void *data, size_t len, void *arg)
{
    free((void *)data);
}

static void stream_read_done(struct s3_ctx *x, void *arg)
{
    struct s3_rslot *r = arg;
    r->done = true;
    s3__get_pump(x);
}

void s3__get_pump(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    if (c->dead)
        return;
    if (x->get.zc) {
        zc_pump(x);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (x->get.rs_count > 0 && x->get.rs[x->get.rs_head].done) {
        struct s3_rslot *r = &x->get.rs[x->get.rs_head];
        if (r->rc || r->n != r->len) {
            stream_cut(x, r->off, r->rc);
            return;
        }
        evbuffer_add_reference(out, r->buf, r->n, free_chunk, NULL);
        r->buf = NULL;
        r->done = false;
        x->get.off += r->n;
        x->bytes_out += r->n;
        x->get.rs_head = (x->get.rs_head + 1) % S3_READS_INFLIGHT;
        x->get.rs_count--;
    }
    if (x->get.off >= x->get.end && x->get.rs_count == 0) {
        s3__get_end(x);
        return;
    }
    /* the write callback calls again once the client caught up */
    while (x->get.rs_count < S3_READS_INFLIGHT && x->get.next < x->get.end &&
           evbuffer_get_length(out) + (size_t)x->get.rs_count * S3_RCHUNK < S3_OUT_LOW) {
        uint64_t credit = get_credit(x);
        if (credit == 0)
            return; /* the next piece waits for QoS (or the GET was cut) */
        int i = (x->get.rs_head + x->get.rs_count) % S3_READS_INFLIGHT;
        struct s3_rslot *r = &x->get.rs[i];
        uint64_t len = x->get.end - x->get.next;
        if (len > credit)
            len = credit;
        get_spent(x, len > S3_RCHUNK ? S3_RCHUNK : len);
        r->off = x->get.next;
        r->len = (size_t)(len > S3_RCHUNK ? S3_RCHUNK : len);
        r->rc = 0;
        r->done = false;
        x->get.next += r->len;
        x->get.rs_count++;
        s3__ctx_submit_arg(x, stream_read_work, stream_read_done, r);
    }
}

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

void s3__zwin_drop(struct s3_zwin *w)
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
    w->rc = core_read_pieces(x->core, &x->p, x->get.ino, w->off, w->len, &w->ps);
}

static void zwin_read_done(struct s3_ctx *x, void *arg)
{
    struct s3_zwin *w = arg;
    w->done = true;
    s3__get_pump(x);
}

void s3__get_end(struct s3_ctx *x)
{
    x->conn->state = S3_CS_WAIT;
    if (x->get.ref_held)
        s3__ctx_submit(x, stream_end_work, stream_end_done);
    else
        s3__ctx_finish(x);
}

/* A streamed body failed after its headers were sent: the only honest
 * signal left is to cut the connection. */
static void stream_cut(struct s3_ctx *x, uint64_t at, int rc)
{
    srv_log(WARN, S3, "req=%s tenant=%u GET %s: read failed at %" PRIu64 ": %s", x->reqid,
            x->p.tenant, s3__resource(x), at, rc ? srv_strerror(rc) : "object shrank");
    x->out.err = rc ? rc : -EIO;
    s3__ctx_log(x);
    s3__conn_close(x->conn);
}

static void zc_pump(struct s3_ctx *x)
{
    struct s3_conn *c = x->conn;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (x->get.zw_count > 0 && x->get.zw[x->get.zw_head]->done) {
        struct s3_zwin *w = x->get.zw[x->get.zw_head];
        x->get.zw[x->get.zw_head] = NULL;
        x->get.zw_head = (x->get.zw_head + 1) % S3_ZC_INFLIGHT;
        x->get.zw_count--;
        if (w->rc || w->ps.len != w->len) {
            int rc = w->rc;
            s3__zwin_drop(w);
            bool gone = rc == SRV_ESTALE || rc == -ENOENT || rc == 0;
            if (!x->get.zc_head && !x->get.ref_held && gone && x->get.again++ < 8) {
                /* replaced or removed since the lookup, nothing sent yet (and nothing
                 * else in flight): look the key up again, as the worker path does */
                c->state = S3_CS_WAIT;
                s3__ctx_submit(x, s3__get_again_work, s3__resp_send);
                return;
            }
            if (!x->get.zc_head) {
                /* nothing sent yet (and nothing else in flight): a proper error answer */
                s3__resp_err(x, rc ? rc : -EIO, rc ? NULL : "the object changed while it was read");
                c->state = S3_CS_WAIT;
                s3__resp_send(x);
                return;
            }
            stream_cut(x, x->get.off, rc);
            return;
        }
        if (!x->get.zc_head) {
            s3__resp_head(x, x->get.end - x->get.off, out);
            x->get.zc_head = true;
        }
        x->get.off += w->len;
        x->bytes_out += w->len;
        x->get.zc_hot = w->ps.copied == 0;
        if (zwin_append(w, out) != 0) {
            stream_cut(x, x->get.off, -ENOMEM);
            return;
        }
    }
    if (x->get.off >= x->get.end && x->get.zw_count == 0) {
        s3__get_end(x);
        return;
    }
    /* the write callback calls again once the output drained below S3_OUT_LOW */
    size_t win = x->get.zc_hot ? S3_ZC_WIN : S3_RCHUNK;
    size_t limit = x->get.zc_hot ? S3_ZC_OUT : S3_OUT_LOW;
    /* one window until the head is out: its failure can still be a clean error */
    while (x->get.zw_count < (x->get.zc_head ? S3_ZC_INFLIGHT : 1) && x->get.next < x->get.end &&
           evbuffer_get_length(out) + (size_t)x->get.zw_count * win < limit) {
        uint64_t credit = get_credit(x);
        if (credit == 0)
            return; /* the next piece waits for QoS (or the GET was cut) */
        struct s3_zwin *w = calloc(1, sizeof(*w));
        if (!w)
            abort();
        /* windows end on the 1 MiB grid extents are cut on: no extent is verified twice */
        uint64_t len = win - x->get.next % S3_ZC_GRID;
        if (!x->get.ref_held) /* a body of at most S3_ZC_ONE: one window holds it all */
            len = x->get.end - x->get.next;
        if (len > x->get.end - x->get.next)
            len = x->get.end - x->get.next;
        if (len > credit)
            len = credit;
        get_spent(x, len);
        w->off = x->get.next;
        w->len = len;
        x->get.next += len;
        x->get.zw[(x->get.zw_head + x->get.zw_count) % S3_ZC_INFLIGHT] = w;
        x->get.zw_count++;
        s3__ctx_submit_arg(x, zwin_read_work, zwin_read_done, w);
    }
}
