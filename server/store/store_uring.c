/* SPDX-License-Identifier: Apache-2.0
 * store_uring: synchronous positional reads and writes through io_uring.
 *
 * The core is synchronous and runs on worker threads, so each thread gets
 * its own small ring, created on first use and torn down when the thread
 * exits (pthread key destructor): no lock on the I/O path. One request is
 * submitted and waited for at a time; short transfers are continued. When
 * the kernel refuses io_uring (old kernel, seccomp), the store falls back to
 * pread/pwrite and says so once in the log.
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

#define RING_DEPTH 8

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static int ring_key_ok;
static int ring_broken; /* set once io_uring_queue_init failed: use pread/pwrite */

static void ring_destroy(void *p)
{
    struct io_uring *ring = p;
    io_uring_queue_exit(ring);
    free(ring);
}

static void ring_key_make(void)
{
    ring_key_ok = pthread_key_create(&ring_key, ring_destroy) == 0;
}

/* @return this thread's ring, or NULL to use the syscall fallback. */
static struct io_uring *ring_get(void)
{
    if (__atomic_load_n(&ring_broken, __ATOMIC_RELAXED))
        return NULL;
    pthread_once(&ring_once, ring_key_make);
    if (!ring_key_ok)
        return NULL;
    struct io_uring *ring = pthread_getspecific(ring_key);
    if (ring)
        return ring;
    ring = calloc(1, sizeof(*ring));
    if (!ring)
        return NULL;
    int rc = io_uring_queue_init(RING_DEPTH, ring, 0);
    if (rc < 0) {
        free(ring);
        if (!__atomic_exchange_n(&ring_broken, 1, __ATOMIC_RELAXED))
            srv_log(WARN, STORE, "io_uring unavailable (%d), using pread/pwrite", rc);
        return NULL;
    }
    if (pthread_setspecific(ring_key, ring) != 0) {
        ring_destroy(ring);
        return NULL;
    }
    return ring;
}

/* One transfer; @return bytes moved (may be short) or -errno. */
static ssize_t io_once(int wr, int fd, void *buf, size_t len, uint64_t off)
{
    struct io_uring *ring = ring_get();
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
            srv_log(ERROR, STORE, "%s fd=%d off=%llu len=%zu failed: %d", wr ? "write" : "read",
                    fd, (unsigned long long)off, len, (int)n);
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
