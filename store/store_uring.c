/* SPDX-License-Identifier: Apache-2.0
 * store_uring: synchronous positional reads and writes through io_uring, and
 * the pool of aligned scratch buffers.
 *
 * The core is synchronous and runs on worker threads, so each thread gets
 * its own small ring, created on first use and torn down when the thread
 * exits (pthread key destructor): no lock on the I/O path. One request is
 * submitted and waited for at a time; short transfers are continued. When
 * the kernel refuses io_uring (old kernel, seccomp), the store falls back to
 * pread/pwrite and says so once in the log.
 *
 * Unaligned callers' I/O goes through STORE_EXTENT_MAX-byte aligned scratch
 * buffers taken from one process-wide pool and given back after the I/O, so
 * the data path does not allocate per request. The pool parks at most
 * STORE_SCRATCH_KEEP free buffers and frees the rest: the memory it holds
 * follows the peak number of I/Os in flight, not the number of threads that
 * ever did one (a buffer per worker thread, kept for the thread's life, grew
 * the daemon's memory by a MiB or five per worker as load spread over its
 * many workers).
 * Thread: any. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "srv_log.h"
#include "store_int.h"

#define RING_DEPTH 32

struct tls_slot {
    struct io_uring ring;
    int ring_state; /* 0: not tried, 1: ready, -1: failed */
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_ok;
static int ring_broken; /* io_uring refused once (or disabled): use pread/pwrite */

static void tls_destroy(void *p)
{
    struct tls_slot *t = p;
    if (t->ring_state == 1)
        io_uring_queue_exit(&t->ring);
    free(t);
}

static void tls_key_make(void)
{
    tls_key_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

static struct tls_slot *tls_get(void)
{
    pthread_once(&tls_once, tls_key_make);
    if (!tls_key_ok)
        return NULL;
    struct tls_slot *t = pthread_getspecific(tls_key);
    if (t)
        return t;
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    if (pthread_setspecific(tls_key, t) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

/* @return this thread's ring, or NULL to use the syscall fallback. */
static struct io_uring *ring_get(void)
{
    if (__atomic_load_n(&ring_broken, __ATOMIC_RELAXED))
        return NULL;
    struct tls_slot *t = tls_get();
    if (!t || t->ring_state < 0)
        return NULL;
    if (t->ring_state == 1)
        return &t->ring;
    int rc = io_uring_queue_init(RING_DEPTH, &t->ring, 0);
    if (rc < 0) {
        t->ring_state = -1;
        if (!__atomic_exchange_n(&ring_broken, 1, __ATOMIC_RELAXED))
            srv_log(WARN, STORE, "io_uring unavailable (%d), using pread/pwrite", rc);
        return NULL;
    }
    t->ring_state = 1;
    return &t->ring;
}

/* Stop using this thread's ring (its state is unknown after a failed submit). */
static void ring_drop(void)
{
    struct tls_slot *t = tls_get();
    if (t && t->ring_state == 1) {
        io_uring_queue_exit(&t->ring);
        t->ring_state = -1;
    }
}

void store__uring_disable(int disable)
{
    __atomic_store_n(&ring_broken, disable ? 1 : 0, __ATOMIC_RELAXED);
}

static struct {
    pthread_mutex_t mu;
    void *parked[STORE_SCRATCH_KEEP];
    size_t nparked;
    size_t live; /* allocated and not freed: handed out + parked */
} scratch = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *store__scratch_get(void)
{
    void *p = NULL;
    pthread_mutex_lock(&scratch.mu);
    if (scratch.nparked > 0) {
        p = scratch.parked[--scratch.nparked];
    } else if (posix_memalign(&p, STORE_ALIGN, STORE_EXTENT_MAX) == 0) {
        scratch.live++;
    } else {
        p = NULL;
    }
    pthread_mutex_unlock(&scratch.mu);
    return p;
}

void store__scratch_put(void *buf)
{
    if (!buf)
        return;
    pthread_mutex_lock(&scratch.mu);
    if (scratch.nparked < STORE_SCRATCH_KEEP) {
        scratch.parked[scratch.nparked++] = buf;
        buf = NULL;
    } else {
        scratch.live--;
    }
    pthread_mutex_unlock(&scratch.mu);
    free(buf);
}

size_t store__scratch_live(void)
{
    pthread_mutex_lock(&scratch.mu);
    size_t n = scratch.live;
    pthread_mutex_unlock(&scratch.mu);
    return n;
}

/* One transfer (@p wr: 0 read, 1 write, 2 write with pwrite); @return bytes
 * moved (may be short) or -errno. */
static ssize_t io_once(int wr, int fd, void *buf, size_t len, uint64_t off)
{
    struct io_uring *ring = wr == 2 ? NULL : ring_get();
    if (!ring) {
        ssize_t n = wr ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);
        return n < 0 ? -errno : n;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        return -EBUSY; /* cannot happen: one request in flight per thread */
    if (wr)
        io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
    else
        io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    int rc = io_uring_submit(ring);
    if (rc < 0)
        return rc;
    struct io_uring_cqe *cqe;
    do {
        rc = io_uring_wait_cqe(ring, &cqe);
    } while (rc == -EINTR);
    if (rc < 0)
        return rc;
    ssize_t res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

static int io_full(int wr, int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len) {
        ssize_t n = io_once(wr, fd, p, len, off);
        if (n == -EINTR || n == -EAGAIN)
            continue;
        if (n < 0) {
            srv_log(ERROR, STORE, "%s fd=%d off=%llu len=%zu failed: %d", wr ? "write" : "read", fd,
                    (unsigned long long)off, len, (int)n);
            return -EIO;
        }
        if (n == 0) {
            srv_log(ERROR, STORE, "%s fd=%d off=%llu len=%zu: unexpected end of device",
                    wr ? "write" : "read", fd, (unsigned long long)off, len);
            return -EIO;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int store__io_read(int fd, void *buf, size_t len, uint64_t off)
{
    return io_full(0, fd, buf, len, off);
}

int store__io_write(int fd, const void *buf, size_t len, uint64_t off)
{
    return io_full(1, fd, (void *)buf, len, off);
}

int store__io_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
    return io_full(2, fd, (void *)buf, len, off);
}

/* Submit what is queued, retrying while the kernel is busy or interrupted.
 * @return the number of requests taken, 0 or -errno when none was. */
static int ring_submit(struct io_uring *ring)
{
    int sub;
    do {
        sub = io_uring_submit(ring);
    } while (sub == -EINTR || sub == -EAGAIN || sub == -EBUSY);
    return sub;
}

/* Wait for one completion (retrying on EINTR) and consume it: @p data is its request's
 * user data, @p res its result. @return 0, or the wait's -errno (logged: the ring's state
 * is then unknown). */
static int ring_reap(struct io_uring *ring, uint64_t *data, int *res)
{
    struct io_uring_cqe *cqe;
    int w;
    do {
        w = io_uring_wait_cqe(ring, &cqe);
    } while (w == -EINTR);
    if (w < 0) {
        srv_log(ERROR, STORE, "io_uring wait failed: %d", w);
        return w;
    }
    *data = io_uring_cqe_get_data64(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return 0;
}

/* Check the result @p res of a ring read/write of [off, off+len) on @p fd.
 * @return the bytes it moved (0 when it is to be redone: EINTR, EAGAIN), or -EIO for a
 * failure (logged). */
static int res_check(int wr, int fd, size_t len, uint64_t off, int res)
{
    if (res == -EINTR || res == -EAGAIN)
        return 0;
    if (res < 0) {
        srv_log(ERROR, STORE, "%s fd=%d off=%llu len=%zu failed: %d", wr ? "write" : "read", fd,
                (unsigned long long)off, len, res);
        return -EIO;
    }
    return res;
}

/* Finish one request synchronously from where it stopped. */
static int io_rest(struct store__io *r, size_t done)
{
    if (done >= r->len)
        return 0;
    return io_full(0, r->fd, (unsigned char *)r->buf + done, r->len - done, r->off + done);
}

int store__io_read_batch(struct store__io *v, size_t n, int (*done)(void *arg, size_t idx),
                         void *arg)
{
    struct io_uring *ring = ring_get();
    int rc = 0;
    if (!ring) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            rc = io_rest(&v[i], 0);
            if (rc == 0 && done)
                rc = done(arg, i);
        }
        return rc;
    }
    for (size_t base = 0; base < n;) {
        size_t m = n - base < RING_DEPTH ? n - base : RING_DEPTH;
        size_t queued = 0;
        for (; queued < m; queued++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            if (!sqe)
                break;
            struct store__io *r = &v[base + queued];
            io_uring_prep_read(sqe, r->fd, r->buf, (unsigned)r->len, r->off);
            io_uring_sqe_set_data64(sqe, base + queued);
        }
        size_t sent = 0;
        while (sent < queued) {
            int sub = ring_submit(ring);
            if (sub <= 0) {
                /* the kernel took none of the rest: give this thread's ring up
                 * (after reaping what it took) and read synchronously */
                srv_log(WARN, STORE, "io_uring submit failed (%d), using pread", sub);
                break;
            }
            sent += (size_t)sub;
        }
        if (sent < queued) {
            for (size_t got = 0; got < sent; got++) {
                struct io_uring_cqe *cqe;
                if (io_uring_wait_cqe(ring, &cqe) < 0)
                    break;
                io_uring_cqe_seen(ring, cqe);
            }
            ring_drop();
            for (size_t i = base; i < n && rc == 0; i++) {
                rc = io_rest(&v[i], 0);
                if (rc == 0 && done)
                    rc = done(arg, i);
            }
            return rc;
        }
        for (size_t got = 0; got < queued; got++) {
            uint64_t idx;
            int res;
            if (ring_reap(ring, &idx, &res) < 0)
                return -EIO; /* cannot reap: the ring state is unknown, fail the read */
            if (rc)
                continue;
            res = res_check(0, v[idx].fd, v[idx].len, v[idx].off, res);
            if (res < 0) {
                rc = res;
                continue;
            }
            rc = io_rest(&v[idx], (size_t)res); /* redo or finish it */
            if (rc == 0 && done)
                rc = done(arg, idx);
        }
        if (rc)
            return rc;
        base += queued;
    }
    return 0;
}

int store__io_write_during(int fd, const void *buf, size_t len, uint64_t off,
                           uint32_t (*fn)(void *arg), void *arg, uint32_t *out)
{
    struct io_uring *ring = ring_get();
    struct io_uring_sqe *sqe = ring ? io_uring_get_sqe(ring) : NULL;
    if (!sqe) {
        *out = fn(arg);
        return io_full(1, fd, (void *)buf, len, off);
    }
    io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
    if (ring_submit(ring) <= 0) {
        /* not taken: this ring's state is unknown from here on */
        ring_drop();
        *out = fn(arg);
        return io_full(1, fd, (void *)buf, len, off);
    }
    *out = fn(arg);
    uint64_t data;
    int res;
    if (ring_reap(ring, &data, &res) < 0)
        return -EIO;
    res = res_check(1, fd, len, off, res);
    if (res < 0)
        return res;
    if ((size_t)res < len)
        return io_full(1, fd, (unsigned char *)buf + res, len - (size_t)res, off + (uint64_t)res);
    return 0;
}

int store__io_write_batch(struct store__io *v, size_t n, void (*prep)(void *arg, size_t i),
                          void (*during)(void *arg, size_t i), void *arg)
{
    struct io_uring *ring = n <= RING_DEPTH ? ring_get() : NULL;
    size_t prepped = 0, sent = 0;
    int rc = 0;
    if (ring) {
        for (; sent < n; sent++) {
            if (prep)
                prep(arg, sent);
            prepped = sent + 1;
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            if (!sqe)
                break; /* cannot happen: the ring is this thread's and idle */
            io_uring_prep_write(sqe, v[sent].fd, v[sent].buf, (unsigned)v[sent].len,
                                v[sent].off);
            io_uring_sqe_set_data64(sqe, sent);
            int sub = ring_submit(ring);
            if (sub <= 0) {
                /* not taken: finish the rest with pwrite, then drop the ring */
                srv_log(WARN, STORE, "io_uring submit failed (%d), using pwrite", sub);
                break;
            }
        }
    }
    /* checksums while the writes are in flight */
    for (size_t i = 0; during && i < n; i++)
        during(arg, i);
    for (size_t got = 0; got < sent; got++) {
        uint64_t idx;
        int res;
        if (ring_reap(ring, &idx, &res) < 0) {
            ring_drop();
            return -EIO;
        }
        if (idx >= n)
            continue;
        res = res_check(1, v[idx].fd, v[idx].len, v[idx].off, res);
        if (res < 0) {
            rc = res;
            continue;
        }
        /* a redo (0) or a short write is finished synchronously */
        if (rc == 0 && (size_t)res < v[idx].len)
            rc = io_full(1, v[idx].fd, (unsigned char *)v[idx].buf + res, v[idx].len - (size_t)res,
                         v[idx].off + (uint64_t)res);
    }
    if (ring && sent < n)
        ring_drop();
    for (size_t i = sent; i < n && rc == 0; i++) {
        if (prep && i >= prepped)
            prep(arg, i);
        rc = io_full(1, v[i].fd, v[i].buf, v[i].len, v[i].off);
    }
    return rc;
}
