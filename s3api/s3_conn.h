/* SPDX-License-Identifier: Apache-2.0
 * s3_conn.h: what the files of the S3 connection layer share (not a public
 * API; the operations see only s3_internal.h). The layer is split by job,
 * as nginx splits a request, its body and its special responses:
 *   s3_listen.c  the listener: accept, hand-off to a loop, start and stop
 *   s3_conn.c    a connection: input pump, parser events, timeouts,
 *                lingering close, its lifetime
 *   s3_req.c     a request context: its start at the headers, QoS
 *                admission, the op's worker steps, completion and the log line
 *   s3_auth.c    authentication (SigV4 through s3_sigv4.c, keys from tenants)
 *   s3_body.c    request bodies: small documents in memory, the upload
 *                pipeline (chunks to workers, direct socket reads)
 *   s3_get.c     streamed GET bodies: worker reads or zero-copy windows
 *   s3_resp.c    responses: headers, error documents, the head, sending,
 *                and the answers of a connection without a request
 * Thread: a connection and its context on the connection's loop; worker
 * functions touch only their struct s3_ctx. */
#ifndef S3_CONN_H
#define S3_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/util.h>
#include <openssl/ssl.h>

#include "s3_internal.h"

struct bufferevent;
struct evconnlistener;
struct event;
struct srv_loop;
struct tenants;

/* Upload bytes per worker write: amortizes the store's per-write cost
 * (measured ~1.4x the throughput of 1 MiB writes). */
#define S3_WCHUNK (4u << 20)
#define S3_RCHUNK (1u << 20)       /* GET bytes per worker read */
#define S3_FEED_SLICE (256u << 10) /* parser input per step while streaming a body */
#define S3_IN_HIGH (1u << 20)      /* libevent stops reading when input exceeds this */
#define S3_OUT_LOW (4u << 20)      /* next GET read while output is below this (read-ahead) */
#define S3_XML_BODY_MAX (4u << 20) /* DeleteObjects with 1000 long keys fits */
#define S3_MAX_IO (1u << 20)       /* most bytes one socket read or write moves */
#define S3_READ_CHUNK (16u << 10)  /* most bytes one read into a plain connection's input takes */
#define S3_SMALL_READ 4096u        /* reads up to this go through the loop's buffer */
#define S3_POLL_STEP_US ((uint64_t)5)    /* between two looks at the socket while polling */
#define S3_POLL_SPAN_US ((uint64_t)2000) /* most time one readable event keeps the loop polling */
#define S3_POLL_BUSY_US ((uint64_t)20)   /* a yield this long ran another thread: stop polling */
#define S3_POLL_BUSY_CHECK_US ((uint64_t)100000) /* between two looks at the machine's load */

struct s3_server {
    char *listen, *domain, *region, *tls_cert, *tls_key;
    char *anon_tenant; /* s3_server_config.anon_tenant, or NULL */
    size_t max_header_bytes;
    uint64_t max_object_size;
    int idle_timeout_s;
    int max_conns;
    int loop_poll_us;               /* s3_server_config.loop_poll_us (0: never poll) */
    atomic_uint_fast64_t poll_hits; /* requests found by polling (conn_poll_next) */
    bool metrics_on;                /* render_poll registered (s3_listen.c) */
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

enum s3_conn_state {
    S3_CS_HEADERS = 0, /* reading a request's line and headers */
    S3_CS_WAIT,        /* a worker or the op owns the request */
    S3_CS_BODY,        /* reading the request body */
    S3_CS_STREAM,      /* sending a streamed GET body */
};

/* Lingering close (s3__conn_done): at most this long in all, and this long
 * without input, reading and dropping what a refused client still sends. */
#define S3_LINGER_S 30
#define S3_LINGER_READ_S 5

struct s3_conn {
    struct s3_server *srv;
    struct srv_loop *loop;
    struct bufferevent *bev;
    struct s3_conn *prev, *next;
    struct s3_http http;
    struct s3_ctx *x;
    struct event *hdr_timer; /* pending while hdr_armed (s3__conn_hdr_timer) */
    bool hdr_armed;
    uint64_t hdr_since; /* srv_now_us when the connection began to wait for headers */
    enum s3_conn_state state;
    char peer[64];
    struct sockaddr_storage sa; /* the client's address */
    bool closing;               /* close once the output is flushed */
    bool dead;                  /* socket gone, free when no work is in flight */
    int work_inflight;          /* worker jobs whose done callback has not run */
    bool in_pump;
    int nest;                  /* callbacks on the stack: free only when it drops to 0 */
    struct evbuffer *direct;   /* a small response being built (s3_resp.c) */
    struct timeval idle;       /* idle timeout as a common timeout of the loop's base */
    struct evbuffer *spare[3]; /* emptied buffers of the last request, for the next one */
    struct event *body_ev;     /* the socket readable while an upload body is read directly */
    bool body_direct;          /* ... which it is now (the bufferevent does not read) */
    struct event *hup_ev;      /* the client's end of input while an upload's piece waits */
    bool linger;               /* the client may still be sending: drain before closing */
    bool lingering;            /* answer sent, our side shut down, input read and dropped */
    uint64_t linger_until;     /* srv_now_us() when lingering gives up */
    /* Plain TCP: the connection reads the socket into the bufferevent's input
     * itself (s3_conn.c, conn_sock_read); the bufferevent only writes. */
    struct event *rd_ev;  /* the socket readable, or rd_tv without input */
    struct timeval rd_tv; /* the read timeout: idle, or lingering's */
    bool rd_on;           /* reading wanted (s3__conn_read_enable) */
    bool rd_armed;        /* rd_ev added: wanted and the input under S3_IN_HIGH */
    bool big_reads;       /* the last read took more than S3_SMALL_READ: read in place */
};

/* An accepted socket on its way to its loop (s3_listen.c -> s3__conn_start). */
struct s3_accepted {
    struct s3_server *srv;
    struct srv_loop *loop;
    evutil_socket_t fd;
    struct sockaddr_storage sa;
};

/* Append @p s to the head or log line being built (bounded by the caller's sizing). */
static inline char *s3__put_str(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

/* ---------------------------------------------------------------- s3_resp.c */

/** Request id: 8 hex digits of the server instance, 12 of a sequence number. */
void s3__reqid_make(struct s3_server *srv, char out[24]);
/** The request's path as received, for error documents and logs ("/" without one). */
const char *s3__resource(struct s3_ctx *x);
/** Write the status line and headers of x's response, announcing @p clen body bytes,
 * onto @p out; marks the connection closing when the answer says so. */
void s3__resp_head(struct s3_ctx *x, uint64_t clen, struct evbuffer *out);
/** Send x's response (a streamed GET starts its body), then finish the request. */
void s3__resp_send(struct s3_ctx *x);
/** Answer a connection that has no request context (malformed request, header
 * limit, timeout) with @p e (@p msg NULL: its message) and close it after. */
void s3__conn_fatal(struct s3_conn *c, enum s3_err e, const char *msg);

/* ---------------------------------------------------------------- s3_auth.c */

/** Authenticate x's request (SigV4 header or presigned query, the key from
 * tenants) and set up its payload checks (aws-chunked decoder, SHA-256).
 * @return 0, or -1 with the error response set. */
int s3__ctx_auth(struct s3_ctx *x);

/* ---------------------------------------------------------------- s3_body.c */

/** The body failed with internal error @p err (the first failure counts). @return -1. */
int s3__body_fail(struct s3_ctx *x, int err, const char *msg);
/** The body failed with S3-only error @p e. @return -1. */
int s3__body_fail_s3(struct s3_ctx *x, enum s3_err e, const char *msg);
/** Make the response the body's failure. */
void s3__body_fail_resp(struct s3_ctx *x);
/** Payload bytes the connection may take now without a third chunk. */
size_t s3__body_room(const struct s3_ctx *x);
/** The HTTP parser's body and framing callbacks (argument: the connection). */
int s3__body_http_data(void *arg, const char *data, size_t len);
int s3__body_http_frame(void *arg, const struct s3_http_frame *f);
/** STREAM ops: move payload to the workers; after the last byte, finish the op. */
void s3__body_pump(struct s3_ctx *x);
/** Check a small body against the signed payload hash, Content-MD5 and an
 * x-amz-checksum-* header. @return 0, or -1 with the error response set. */
int s3__body_check(struct s3_ctx *x);
/** STREAM ops, once admitted: the op's first step, then read the body. */
void s3__body_start(struct s3_ctx *x);
/** Whether the upload's body can be read straight from the socket now. */
bool s3__body_direct_ok(const struct s3_conn *c);
/** From now on the body comes from the socket by recv() (the bufferevent stops reading). */
void s3__body_direct_begin(struct s3_conn *c);
/** Read the body from the socket into its chunk and feed the parser in place. */
void s3__body_read(struct s3_conn *c);
/** Leave direct body reading once the body (or the connection) is over. */
void s3__body_ev_sync(struct s3_conn *c);

/* ---------------------------------------------------------------- s3_get.c */

/** A streamed GET: append what is ready, keep reads or windows in flight. */
void s3__get_pump(struct s3_ctx *x);
/** The streamed body is out (or there was none): release the inode, finish. */
void s3__get_end(struct s3_ctx *x);
/** Drop a zero-copy window that was prepared but never appended. */
void s3__zwin_drop(struct s3_zwin *w);

/* ---------------------------------------------------------------- s3_req.c */

/** The parser has a request's headers: make its context, authenticate, route, start its body. */
void s3__req_headers(struct s3_conn *c);
/** The HTTP message (body included) is complete: check it, admit and run the op. */
void s3__req_message_done(struct s3_conn *c);
/** Run @p work on a worker, then @p done on the connection's loop (unless the
 * connection died meanwhile: then the context is released instead). */
void s3__ctx_submit(struct s3_ctx *x, void (*work)(struct s3_ctx *), void (*done)(struct s3_ctx *));
/** As s3__ctx_submit, passing @p arg to both functions. */
void s3__ctx_submit_arg(struct s3_ctx *x, void (*work)(struct s3_ctx *, void *),
                        void (*done)(struct s3_ctx *, void *), void *arg);
/** Ask QoS before dispatching (the operation and the first piece of @p bytes;
 * UINT64_MAX: a body of unknown length); @p next runs on this loop once
 * admitted (maybe at once). Throttled requests answer 503 SlowDown. */
void s3__ctx_admit(struct s3_ctx *x, enum qos_class cls, uint64_t bytes,
                   void (*next)(struct s3_ctx *));
/** The one place s3api asks QoS (s3_req.c), with the request's scope (its
 * bucket and key; a copy's read side: its source): a piece of at most @p bytes
 * (@p more: a later piece, bytes only), charged to every QoS level on the
 * path; x->qos.piece is its size.
 * @return 1 admitted now; 0 waiting (@p next runs later, x->qos.err says how it
 *         went); SRV_ETHROTTLE or -errno: refused, @p next never runs. */
int s3__qos_admit_piece(struct s3_ctx *x, enum qos_class cls, uint64_t bytes, bool more,
                        void (*next)(struct s3_ctx *x));
/** The SlowDown message for a request QoS refused: names the level (and its
 * id) or the daemon capacity that held it back (qos_refusal_format). Lives in
 * @p x. */
const char *s3__qos_why(struct s3_ctx *x);
/** Record the piece just admitted as credit (x->qos.piece). */
void s3__qos_piece_got(struct s3_ctx *x);
/** Whether QoS may hold up requests of class @p cls of the request's principal
 * at the levels of its scope (qos_applies_at). */
bool s3__qos_applies(struct s3_ctx *x, enum qos_class cls);
/** Shaped upload bodies: raw body bytes the connection may read now
 * (SIZE_MAX: not shaped). 0: none; the next piece is being admitted (reading
 * is paused until it is) or the body failed (throttled: x->in.err). */
size_t s3__body_credit(struct s3_ctx *x);
/** Shaped upload bodies: @p n raw body bytes were read. */
void s3__body_spent(struct s3_ctx *x, size_t n);
/** The op's work is done: admit an S3_OPF_READ_AFTER op, then send the response. */
void s3__op_done(struct s3_ctx *x);
/** The response is out: log, release the context, read the next request (or close). */
void s3__ctx_finish(struct s3_ctx *x);
/** Free a context; an open upload or a held inode are released on a worker. */
void s3__ctx_free(struct s3_ctx *x);
/** The request log line and the metrics of x. */
void s3__ctx_log(struct s3_ctx *x);

/* ---------------------------------------------------------------- s3_conn.c */

/** Set up a connection on the loop it was handed to (argument: struct s3_accepted). */
void s3__conn_start(void *arg);
/** Feed the parser what the connection has read, as its state allows. */
void s3__conn_pump(struct s3_conn *c);
/** Act on what the parser reported after a feed that started in state
 * @p before. @return true to keep feeding. */
bool s3__conn_event(struct s3_conn *c, int ev, enum s3_conn_state before);
/** Leave a callback; the last one out frees a dead connection. */
void s3__conn_leave(struct s3_conn *c);
/** The socket is gone (or must go): the connection is freed once nothing runs. */
void s3__conn_close(struct s3_conn *c);
/** Close a connection whose answer is flushed (lingering when the client may still send). */
void s3__conn_done(struct s3_conn *c);
/** Arm the timer that bounds the wait for a request's headers. */
void s3__conn_hdr_timer(struct s3_conn *c);
/** Read the socket into the connection's input (again), its read timeout re-armed:
 * bufferevent_enable(EV_READ) of a TLS connection, rd_ev of a plain one. */
void s3__conn_read_enable(struct s3_conn *c);
/** Stop reading the socket into the connection's input. */
void s3__conn_read_disable(struct s3_conn *c);

#endif
