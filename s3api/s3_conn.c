/* SPDX-License-Identifier: Apache-2.0
 * s3_conn: an HTTP/1.1 connection of the S3 listener on a libevent
 * bufferevent (plain TCP or OpenSSL on the same path). It lives on the loop
 * the listener handed it to. The input pump feeds the request parser what
 * the state allows (pipelined requests wait, parsed but unanswered, in the
 * input buffer); the parser's events start a request (s3_req.c) or end its
 * body; timeouts bound a request's headers and idle or stalled sockets; an
 * answer given before the client finished sending closes with a lingering
 * close.
 * Lifetime: a connection with work in flight is only marked dead when its
 * socket goes; the work's done callback frees it (nest counts callbacks on
 * the stack).
 * Thread: the connection's loop. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"

static void conn_free(struct s3_conn *c);
static void on_event_in(struct s3_conn *c, struct bufferevent *bev, short what);

/* rd_ev is added while reading is wanted and the input holds less than
 * S3_IN_HIGH (the bufferevent's read high-water mark, which a TLS connection
 * keeps: pipelined or unread body bytes beyond it wait in the socket). */
static void conn_rd_sync(struct s3_conn *c)
{
    if (!c->rd_ev)
        return;
    bool want = c->rd_on && !c->dead && c->bev &&
                evbuffer_get_length(bufferevent_get_input(c->bev)) < S3_IN_HIGH;
    if (want && !c->rd_armed)
        event_add(c->rd_ev, &c->rd_tv);
    else if (!want && c->rd_armed)
        event_del(c->rd_ev);
    c->rd_armed = want;
}

void s3__conn_read_enable(struct s3_conn *c)
{
    if (!c->bev)
        return;
    if (!c->rd_ev) {
        bufferevent_enable(c->bev, EV_READ);
        return;
    }
    c->rd_on = true;
    bool was = c->rd_armed;
    conn_rd_sync(c);
    if (was && c->rd_armed) /* added again: re-arms the timeout, as bufferevent_enable does */
        event_add(c->rd_ev, &c->rd_tv);
}

void s3__conn_read_disable(struct s3_conn *c)
{
    if (!c->bev)
        return;
    if (!c->rd_ev) {
        bufferevent_disable(c->bev, EV_READ);
        return;
    }
    c->rd_on = false;
    conn_rd_sync(c);
}

/* Leave a callback; the last one out frees a dead connection. */
void s3__conn_leave(struct s3_conn *c)
{
    if (--c->nest == 0 && c->dead && !c->work_inflight)
        conn_free(c);
}

/* The header timer is not re-armed per request: a request's start leaves it
 * pending and its end only records when the wait for the next headers began
 * (hdr_since); on_hdr_timeout, finding that less than the idle timeout ago,
 * waits the rest. Per request, an evtimer_del and an evtimer_add fewer.
 * libevent times its timers by the coarse monotonic clock (a tick of up to
 * 10 ms), so a timer may fire that much before srv_now_us says it is due:
 * within S3_HDR_TIMER_SLACK_US of the timeout it counts as due, as it did
 * when the timer was armed anew per request (and fires before the socket's
 * idle timeout, armed by the later read, closes without a 408). */
#define S3_HDR_TIMER_SLACK_US 20000
void s3__conn_hdr_timer(struct s3_conn *c)
{
    c->hdr_since = srv_now_us();
    if (!c->hdr_armed) {
        evtimer_add(c->hdr_timer, &c->idle);
        c->hdr_armed = true;
    }
}

static void conn_hdr_timer_stop(struct s3_conn *c)
{
    if (c->hdr_timer && c->hdr_armed)
        evtimer_del(c->hdr_timer);
    c->hdr_armed = false;
}

static void conn_free(struct s3_conn *c)
{
    struct s3_server *srv = c->srv;
    s3__ctx_free(c->x);
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
    if (c->hup_ev)
        event_free(c->hup_ev);
    if (c->rd_ev)
        event_free(c->rd_ev);
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
    srv_loop_conn_gone(c->loop);
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    free(c);
}

void s3__conn_close(struct s3_conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->x && c->x->qos.waiting) { /* a piece waiting for QoS: withdraw it now */
        qos_cancel(qos_global(), c->x);
        c->x->qos.waiting = false;
    }
    if (c->body_ev)
        event_del(c->body_ev);
    if (c->hup_ev)
        event_del(c->hup_ev);
    c->body_direct = false;
    if (c->rd_ev)
        event_del(c->rd_ev);
    c->rd_on = c->rd_armed = false;
    if (c->bev) {
        bufferevent_free(c->bev);
        c->bev = NULL;
    }
    conn_hdr_timer_stop(c);
    if (!c->work_inflight && c->nest == 0)
        conn_free(c);
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
void s3__conn_done(struct s3_conn *c)
{
    if (c->lingering)
        return;
    if (!c->linger || c->srv->ssl || !c->bev || c->dead ||
        shutdown(bufferevent_getfd(c->bev), SHUT_WR) != 0) {
        s3__conn_close(c);
        return;
    }
    c->lingering = true;
    c->linger_until = srv_now_us() + (uint64_t)S3_LINGER_S * 1000000;
    if (c->body_ev)
        event_del(c->body_ev);
    c->body_direct = false;
    conn_hdr_timer_stop(c);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    struct timeval tv = {S3_LINGER_READ_S, 0};
    bufferevent_set_timeouts(c->bev, &tv, NULL);
    c->rd_tv = tv;
    s3__conn_read_enable(c);
}

/* Input while lingering: dropped; past the deadline the connection closes. */
static void conn_linger_read(struct s3_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (srv_now_us() > c->linger_until)
        s3__conn_close(c);
}

/* Act on what the parser reported after a feed that started in state
 * @p before. @return true to keep feeding. */
bool s3__conn_event(struct s3_conn *c, int ev, enum s3_conn_state before)
{
    if (ev == S3_HTTP_HEADERS) {
        s3__req_headers(c);
        return true;
    }
    if (ev == S3_HTTP_DONE) {
        if (before == S3_CS_BODY && c->x)
            s3__req_message_done(c);
        else
            s3__conn_fatal(c, S3E_BAD_REQUEST, "unexpected message state");
        return true;
    }
    if (ev < 0 && !c->x) {
        if (ev == S3_HTTP_ETOOBIG)
            s3__conn_fatal(c, S3E_HEADERS_TOO_LARGE, NULL);
        else
            s3__conn_fatal(c, S3E_BAD_REQUEST, NULL);
        return false;
    }
    if (ev < 0) {
        /* the body went wrong: refused by its sink (EBODY, the reason is
         * already recorded), malformed framing, or trailer fields over the
         * header limit */
        struct s3_ctx *x = c->x;
        c->state = S3_CS_WAIT;
        if (ev == S3_HTTP_ETOOBIG)
            s3__body_fail_s3(x, S3E_HEADERS_TOO_LARGE,
                             "the trailer fields exceed the configured header limit");
        else
            s3__body_fail_s3(x, S3E_BAD_REQUEST, "malformed HTTP request body");
        s3__body_fail_resp(x);
        if (!x->wr.writing) /* else stream_write_done reports it (body_err) */
            s3__resp_send(x);
        return false;
    }
    return true;
}

void s3__conn_pump(struct s3_conn *c)
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
        if (c->state == S3_CS_HEADERS) {
            /* a client that pipelines without reading gets no more answers
             * queued than the GET read-ahead allows; on_write resumes */
            if (avail == 0 || evbuffer_get_length(bufferevent_get_output(c->bev)) > S3_OUT_LOW)
                break;
        } else if (c->state == S3_CS_BODY) {
            struct s3_ctx *x = c->x;
            if (x->in.mode == S3_BODY_STREAM) {
                room = s3__body_room(x);
                if (room == 0)
                    break; /* both chunks taken: stream_write_done calls again */
                size_t credit = s3__body_credit(x);
                if (credit == 0)
                    break; /* the next piece waits for QoS, or the body failed */
                if (credit < room)
                    room = credit;
                if (s3__body_direct_ok(c)) {
                    if (!c->body_direct)
                        s3__body_direct_begin(c);
                    if (avail == 0) {
                        s3__body_read(c);
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
        if (c->state == S3_CS_BODY && n > S3_FEED_SLICE)
            n = S3_FEED_SLICE;
        if (n > room)
            n = room; /* decoded payload is never more than its input */
        size_t used = 0;
        enum s3_conn_state before = c->state;
        struct s3_ctx *bx = before == S3_CS_BODY ? c->x : NULL;
        int ev = s3__http_feed(&c->http, data, n, &used);
        if (bx && bx->in.mode == S3_BODY_STREAM)
            s3__body_spent(bx, used);
        if (used)
            evbuffer_drain(in, used);
        if (!s3__conn_event(c, ev, before))
            break;
        if (ev == S3_HTTP_HEADERS || ev == S3_HTTP_DONE)
            continue;
        if (avail > 0 && used == avail && c->body_direct && c->state == S3_CS_BODY)
            continue; /* the rest comes from the socket (s3__body_read) */
        if (n == 0 || used == avail)
            break; /* need more input */
    }
    if (!c->dead && c->state == S3_CS_BODY && c->x && c->x->in.mode == S3_BODY_STREAM)
        s3__body_pump(c->x);
    s3__body_ev_sync(c);
    conn_rd_sync(c); /* the input may have dropped under S3_IN_HIGH */
    c->in_pump = false;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (c->lingering)
        conn_linger_read(c);
    else
        s3__conn_pump(c);
    s3__conn_leave(c);
}

/* One read's bytes (S3_READ_CHUNK, allocated once per loop thread). */
static __thread uint8_t *rd_scratch;

/* Read into an empty input through this loop's buffer and copy what came
 * (a request, most often) into the input: reading into the input itself
 * makes it allocate room for a whole read, a 32 KiB chunk that malloc's
 * per-thread cache does not hold, freed again once the request is parsed;
 * the copy of a request's few hundred bytes takes a chunk it does hold. A
 * connection whose last read was larger (a PUT's body) reads in place, as
 * copying would cost more than the allocation. @return as srv_read_into. */
static ssize_t conn_read_small(struct evbuffer *in, evutil_socket_t fd, size_t want)
{
    if (!srv_thread_buf(&rd_scratch, S3_READ_CHUNK))
        return srv_read_into(in, fd, want);
    if (want > S3_READ_CHUNK)
        want = S3_READ_CHUNK;
    ssize_t n = srv_read_scratch(fd, &rd_scratch, want);
    if (n <= 0)
        return n;
    evbuffer_unfreeze(in, 0);
    int rc = evbuffer_add(in, rd_scratch, (size_t)n);
    evbuffer_freeze(in, 0);
    if (rc < 0) {
        errno = ENOMEM;
        return -1;
    }
    return n;
}

/* A plain connection's socket is readable (or rd_tv passed without input).
 * The bufferevent does not read it: libevent 2.1 asks the kernel how much is
 * readable (ioctl FIONREAD) before every read and reads at most 4 KiB, so a
 * small GET cost an ioctl besides its readv, the one syscall of four that did
 * no work. One readv of up to S3_READ_CHUNK bytes per readable event instead;
 * end of input, errors and the timeout go to on_event_in as the bufferevent
 * reported them (reading stopped first, as libevent does). */
static void conn_sock_read(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    if (c->dead || !c->bev)
        return;
    c->nest++;
    short ev = 0;
    if (what & EV_TIMEOUT) {
        ev = BEV_EVENT_READING | BEV_EVENT_TIMEOUT;
    } else {
        struct evbuffer *in = bufferevent_get_input(c->bev);
        size_t have = evbuffer_get_length(in);
        size_t want = have < S3_IN_HIGH ? S3_IN_HIGH - have : 0;
        if (want > S3_READ_CHUNK)
            want = S3_READ_CHUNK;
        ssize_t n = 0;
        if (want > 0 && have == 0 && !c->big_reads)
            n = conn_read_small(in, fd, want);
        else if (want > 0)
            n = srv_read_into(in, fd, want); /* ENOMEM: an error, as the socket's */
        if (n > 0)
            c->big_reads = (size_t)n > S3_SMALL_READ;
        if (n > 0 || want == 0) {
            if (c->lingering)
                conn_linger_read(c);
            else
                s3__conn_pump(c);
            conn_rd_sync(c);
        } else if (n == 0) {
            ev = BEV_EVENT_READING | BEV_EVENT_EOF;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            ev = BEV_EVENT_READING | BEV_EVENT_ERROR;
        }
    }
    if (ev) {
        s3__conn_read_disable(c);
        on_event_in(c, c->bev, ev);
    }
    s3__conn_leave(c);
}

/* Whether the machine has more runnable threads than CPUs (the running
 * count of /proc/loadavg, read at most every S3_POLL_BUSY_CHECK_US per
 * thread): then no CPU halts, and polling would only take CPU from others. */
static bool machine_busy(void)
{
    static __thread uint64_t checked;
    static __thread bool busy;
    static __thread long ncpu;
    uint64_t now = srv_now_us();
    if (checked && now - checked < S3_POLL_BUSY_CHECK_US)
        return busy;
    checked = now;
    busy = false;
    if (ncpu <= 0)
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return busy;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return busy;
    buf[n] = '\0';
    long running = 0; /* "0.20 0.83 1.09 2/345 12345": the 2 */
    if (sscanf(buf, "%*s %*s %*s %ld/", &running) == 1 && ncpu > 0)
        busy = running > ncpu;
    return busy;
}

/* Polling for the next request (s3_server_config.loop_poll_us;
 * docs/s3-compatibility.md).
 * At one request in flight the loop thread sleeps in epoll_wait between an
 * answer and the next request, and its CPU, idle, halts: waking a halted
 * vCPU is a large part of a small GET's time on a VM (docs/benchmarks.md).
 * So after answering, the loop looks at the socket every S3_POLL_STEP_US (a
 * MSG_PEEK recv; sched_yield between looks, so that a client on the same CPU
 * runs first) for up to loop_poll_us; a request that comes meanwhile is read
 * at once. A yield that let another thread run (it took longer than
 * S3_POLL_BUSY_US) ends the polling: the CPU is busy, not halting, so
 * sleeping costs nothing there; nor does it poll while the machine has
 * more runnable threads than CPUs (machine_busy). Only while nothing else
 * could need the loop: the connection is the loop's only one (of any
 * protocol), it waits for a request's headers with nothing of it in flight,
 * buffered or unsent, and no other event of the loop is active; at most
 * S3_POLL_SPAN_US per readable event, after which the loop runs its timers.
 * @return true: input came (the caller reads it); false: the loop sleeps. */
static bool conn_poll_next(struct s3_conn *c, evutil_socket_t fd, uint64_t span_end)
{
    struct s3_server *srv = c->srv;
    if (c->dead || c->closing || c->lingering || c->x || c->work_inflight ||
        c->state != S3_CS_HEADERS || !c->rd_armed || !c->bev ||
        evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 ||
        evbuffer_get_length(bufferevent_get_output(c->bev)) > 0 ||
        evbuffer_get_length(c->direct) > 0 || srv_loop_conns(c->loop) != 1 || machine_busy())
        return false;
    /* yielding between looks: whatever else could run on this CPU (the
     * client, perhaps) runs first; if something did, the CPU is not idle,
     * so polling on would only take CPU */
    uint64_t end = srv_now_us() + (uint64_t)srv->loop_poll_us;
    if (!srv_loop_poll_input(c->loop, fd, end < span_end ? end : span_end, S3_POLL_STEP_US,
                             S3_POLL_BUSY_US))
        return false;
    atomic_fetch_add_explicit(&srv->poll_hits, 1, memory_order_relaxed);
    return true;
}

/* rd_ev's callback: conn_sock_read, then, with loop_poll_us, the requests
 * found by polling (conn_poll_next). */
static void conn_sock_cb(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    if (c->srv->loop_poll_us <= 0 || (what & EV_TIMEOUT)) {
        conn_sock_read(fd, what, c);
        return;
    }
    c->nest++;
    conn_sock_read(fd, what, c);
    uint64_t span_end = srv_now_us() + S3_POLL_SPAN_US;
    bool polled = false;
    while (conn_poll_next(c, fd, span_end)) {
        polled = true;
        conn_sock_read(fd, EV_READ, c);
    }
    if (polled && !c->dead && c->rd_armed)
        event_add(c->rd_ev, &c->rd_tv); /* the idle timeout anew, as a readable event does */
    s3__conn_leave(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    if (c->state == S3_CS_STREAM && c->x)
        s3__get_pump(c->x);
    else if (c->closing && !c->work_inflight &&
             evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        s3__conn_done(c);
    else if (c->state == S3_CS_HEADERS && !c->closing &&
             evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        s3__conn_pump(c); /* pipelined requests held back while the output was full */
    s3__conn_leave(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct s3_conn *c = arg;
    c->nest++;
    on_event_in(c, bev, what);
    s3__conn_leave(c);
}

static void on_event_in(struct s3_conn *c, struct bufferevent *bev, short what)
{
    if (c->rd_ev && (what & BEV_EVENT_WRITING) && (what & BEV_EVENT_EOF) &&
        !(what & BEV_EVENT_ERROR)) {
        /* A plain bufferevent's write side reports end of file only when a
         * write returned 0: libevent 2.1's sendfile of a file segment (a GET
         * body) answers 0 when the socket takes nothing (EAGAIN). The socket
         * is fine: write on when it has room again. */
        bufferevent_enable(bev, EV_WRITE);
        return;
    }
    if (c->lingering) { /* end of input, an error or the linger timeout: done */
        s3__conn_close(c);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        struct s3_ctx *x = c->x;
        bool busy = x && (c->state == S3_CS_WAIT || c->state == S3_CS_STREAM || x->wr.writing);
        if ((what & BEV_EVENT_READING) && busy) {
            s3__conn_read_enable(c); /* our turn, not the client's */
            return;
        }
        srv_log(INFO, S3, "req=- tenant=%u peer=%s connection timed out (%s)", x ? x->p.tenant : 0,
                c->peer, (what & BEV_EVENT_READING) ? "read" : "write");
        if (x && c->state == S3_CS_STREAM)
            s3__ctx_log(x);
        s3__conn_close(c);
        return;
    }
    if (what & BEV_EVENT_EOF) {
        struct s3_ctx *x = c->x;
        if (x && x->in.complete && (c->state == S3_CS_WAIT || c->state == S3_CS_STREAM)) {
            /* half-close after a complete request: finish the answer, then close */
            c->closing = true;
            return;
        }
        if (x)
            srv_log(INFO, S3, "req=%s tenant=%u peer=%s client closed the connection mid-request",
                    x->reqid, x->p.tenant, c->peer);
        s3__conn_close(c);
        return;
    }
    if (what & BEV_EVENT_ERROR) {
        unsigned long e;
        while ((e = bufferevent_get_openssl_error(bev)) != 0)
            srv_log(DEBUG, S3, "req=- tenant=0 peer=%s TLS: %s", c->peer,
                    ERR_reason_error_string(e));
        s3__conn_close(c);
    }
}

static void on_hdr_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    c->hdr_armed = false;
    if (c->state != S3_CS_HEADERS || c->dead)
        return; /* a request is in progress: its end arms the timer again */
    uint64_t idle_us = (uint64_t)c->srv->idle_timeout_s * 1000000,
             waited = srv_now_us() - c->hdr_since;
    if (waited + S3_HDR_TIMER_SLACK_US < idle_us) {
        /* requests came and went since it was armed: the rest of this wait */
        uint64_t rest = idle_us - waited;
        struct timeval tv = {(time_t)(rest / 1000000), (suseconds_t)(rest % 1000000)};
        evtimer_add(c->hdr_timer, &tv);
        c->hdr_armed = true;
        return;
    }
    c->nest++;
    if (c->http.req) /* bytes of a request arrived, but not all its headers */
        s3__conn_fatal(c, S3E_REQUEST_TIMEOUT, NULL);
    else
        s3__conn_close(c);
    s3__conn_leave(c);
}

void s3__conn_start(void *arg)
{
    struct s3_accepted *a = arg;
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
        srv_loop_conn_gone(l);
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
        return;
    }
    struct s3_conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->srv = srv;
    c->loop = l;
    c->sa = a->sa;
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
    s3__http_init(&c->http, srv->max_header_bytes, s3__body_http_data, c);
    s3__http_set_frame_cb(&c->http, s3__body_http_frame);
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
    c->rd_tv = c->idle;
    bufferevent_set_timeouts(c->bev, &c->idle, &c->idle);
    bufferevent_setwatermark(c->bev, EV_READ, 0, S3_IN_HIGH);
    bufferevent_setwatermark(c->bev, EV_WRITE, S3_OUT_LOW, 0);
    /* libevent's default moves 16 KiB per callback: one epoll round per 16 KiB */
    bufferevent_set_max_single_write(c->bev, S3_MAX_IO);
    bufferevent_set_max_single_read(c->bev, S3_MAX_IO);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    if (!srv->ssl) {
        c->rd_ev = event_new(base, fd, EV_READ | EV_PERSIST, conn_sock_cb, c);
        if (!c->rd_ev)
            abort();
    }
    bufferevent_enable(c->bev, c->rd_ev ? EV_WRITE : EV_READ | EV_WRITE);
    s3__conn_read_enable(c);
    c->state = S3_CS_HEADERS;
    s3__conn_hdr_timer(c);
}
