/* SPDX-License-Identifier: Apache-2.0
 * store: opening the data files or block devices, and the data path
 * (write with CRC32C, read with CRC check, sync, stats).
 *
 * Each device is opened twice: once with O_DIRECT for the io_uring data path
 * (buffered when the filesystem refuses O_DIRECT, e.g. tmpfs; logged), once
 * buffered for store_extent_fd (sendfile). Writes are padded with zeros to
 * STORE_ALIGN; callers' buffers that are not aligned go through an aligned
 * bounce buffer. A write bumps its device's generation; store_sync
 * fdatasyncs only devices whose generation moved, and concurrent syncs of one
 * device coalesce behind its sync mutex.
 * Thread: all functions are thread-safe; store_open/store_close are not
 * concurrent with anything else on the same store. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <linux/fs.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"
#include "store_int.h"

int store__no_direct;

static void dev_close(struct store_dev *d)
{
    if (d->fd >= 0 && d->fd != d->fd_buf)
        close(d->fd);
    if (d->fd_buf >= 0)
        close(d->fd_buf);
    d->fd = d->fd_buf = -1;
    free(d->path);
    d->path = NULL;
}

/* Make a data file at least @p want bytes, preallocated. @return 0, -ENOSPC, -errno. */
static int file_prealloc(struct store_dev *d, uint64_t want)
{
    if (fallocate(d->fd_buf, 0, 0, (off_t)want) == 0)
        return 0;
    int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
        /* No native fallocate: size the file, then let glibc write the blocks. */
        if (ftruncate(d->fd_buf, (off_t)want) != 0)
            err = errno;
        else
            err = posix_fallocate(d->fd_buf, 0, (off_t)want);
        if (err == EOPNOTSUPP || err == EINVAL)
            err = 0; /* sparse but sized: the best this filesystem can do */
    }
    if (err == 0)
        return 0;
    srv_log(ERROR, STORE, "preallocate %s to %" PRIu64 " bytes: %s", d->path, want, strerror(err));
    return err == ENOSPC || err == EDQUOT || err == EFBIG ? -ENOSPC : -err;
}

static int dev_open(struct store_dev *d, const char *path, int create, uint64_t file_size)
{
    int rc = 0;
    struct stat st;
    d->path = strdup(path);
    if (!d->path)
        return -ENOMEM;
    int created = 0;
    if (create) {
        d->fd_buf = open(path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0600);
        if (d->fd_buf >= 0)
            created = 1;
        else if (errno == EEXIST)
            d->fd_buf = open(path, O_RDWR | O_CLOEXEC);
    } else {
        d->fd_buf = open(path, O_RDWR | O_CLOEXEC);
    }
    if (d->fd_buf < 0) {
        rc = -errno;
        srv_log(ERROR, STORE, "open %s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(d->fd_buf, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if (S_ISBLK(st.st_mode)) {
        uint64_t bytes = 0;
        if (ioctl(d->fd_buf, BLKGETSIZE64, &bytes) != 0) {
            rc = -errno;
            srv_log(ERROR, STORE, "BLKGETSIZE64 %s: %s", path, strerror(errno));
            goto out;
        }
        d->is_blk = 1;
        d->size = bytes & ~(uint64_t)(STORE_ALIGN - 1);
    } else if (S_ISREG(st.st_mode)) {
        uint64_t want = file_size & ~(uint64_t)(STORE_ALIGN - 1);
        uint64_t have = (uint64_t)st.st_size;
        if (have < want) {
            rc = file_prealloc(d, want);
            if (rc < 0) {
                if (created)
                    unlink(path); /* do not leave a half-allocated file holding space */
                goto out;
            }
            have = want;
        }
        d->size = have & ~(uint64_t)(STORE_ALIGN - 1);
    } else {
        srv_log(ERROR, STORE, "%s is neither a regular file nor a block device", path);
        rc = -EINVAL;
        goto out;
    }
    if (d->size == 0) {
        srv_log(ERROR, STORE, "%s has no usable space", path);
        rc = -ENOSPC;
        goto out;
    }
    d->fd = store__no_direct ? -1 : open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
    if (d->fd >= 0) {
        d->direct = 1;
    } else {
        srv_log(INFO, STORE, "%s: O_DIRECT refused (%s), using buffered I/O", path,
                store__no_direct ? "disabled" : strerror(errno));
        d->fd = d->fd_buf;
        d->direct = 0;
    }
out:
    return rc;
}

/* Read the persistent free map into the allocator. @return 0, -EIO, SRV_ECORRUPT,
 * SRV_EBADVERSION, -EINVAL (device count changed), -ENOMEM. */
static int map_load(struct store *s, MDB_txn *rtxn)
{
    MDB_cursor *c = NULL;
    MDB_val k, v;
    int marker = 0, nrec = 0;
    uint32_t map_ndev = 0, max_dev = 0;
    int rc = mdb_cursor_open(rtxn, s->free_dbi, &c);
    if (rc != 0) {
        srv_log(ERROR, STORE, "free map cursor: %s", mdb_strerror(rc));
        return -EIO;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != STORE_KEY_LEN || v.mv_size != 8) {
            srv_log(ERROR, STORE, "free map: record with key %zu / value %zu bytes", k.mv_size,
                    v.mv_size);
            rc = SRV_ECORRUPT;
            goto out;
        }
        uint32_t dev = store__get_be32(k.mv_data);
        uint64_t off = store__get_be64((unsigned char *)k.mv_data + 4);
        uint64_t len = store__get_be64(v.mv_data);
        if (dev == STORE_MARKER_DEV) {
            uint32_t ver = (uint32_t)(len >> 32), ndev = (uint32_t)len;
            if (ver != STORE_MAP_VERSION) {
                srv_log(ERROR, STORE, "free map version %u, this build knows %u", ver,
                        STORE_MAP_VERSION);
                rc = SRV_EBADVERSION;
                goto out;
            }
            if (ndev > s->ndev) {
                srv_log(ERROR, STORE,
                        "free map covers %u devices, configuration has only %u: "
                        "removing data files or devices is not supported",
                        ndev, s->ndev);
                rc = -EINVAL;
                goto out;
            }
            map_ndev = ndev;
            marker = 1;
            continue;
        }
        if (dev >= s->ndev) {
            /* Judged at the end: the marker (last key) says whether devices were removed. */
            if (dev > max_dev)
                max_dev = dev;
            nrec++;
            continue;
        }
        if (len == 0 || off % STORE_ALIGN || len % STORE_ALIGN || off > s->devs[dev].size ||
            len > s->devs[dev].size - off) {
            srv_log(ERROR, STORE, "free map: bad range dev=%u off=%" PRIu64 " len=%" PRIu64, dev,
                    off, len);
            rc = SRV_ECORRUPT;
            goto out;
        }
        rc = store__alloc_add(s, dev, off, len);
        if (rc < 0)
            goto out;
        if (dev > max_dev)
            max_dev = dev;
        nrec++;
    }
    if (rc != MDB_NOTFOUND) {
        srv_log(ERROR, STORE, "free map scan: %s", mdb_strerror(rc));
        rc = -EIO;
        goto out;
    }
    rc = 0;
    if (marker) {
        /* Devices past the recorded count are new: store_txn_init adds them. */
        if (nrec && max_dev >= map_ndev) {
            srv_log(ERROR, STORE, "free map has ranges on device %u but covers %u devices", max_dev,
                    map_ndev);
            rc = SRV_ECORRUPT;
            goto out;
        }
        s->init_from = map_ndev;
    } else if (nrec && max_dev >= s->ndev) {
        srv_log(ERROR, STORE, "free map has ranges on device %u; configuration has %u devices",
                max_dev, s->ndev);
        rc = SRV_ECORRUPT;
        goto out;
    } else if (nrec == 0) {
        s->init_from = 0; /* a new store */
    } else {
        srv_log(WARN, STORE, "free map has no marker record; assuming it covers all devices");
        s->init_from = s->ndev;
    }
out:
    mdb_cursor_close(c);
    return rc;
}

int store_open(struct store **out, const struct store_config *cfg, struct MDB_txn *rtxn,
               unsigned int free_dbi)
{
    int rc = 0;
    struct store *s = NULL;
    uint32_t ndev = 0;
    if (!out || !cfg || !rtxn)
        return -EINVAL;
    *out = NULL;
    if (cfg->devices) {
        while (cfg->devices[ndev] && ndev < STORE_MARKER_DEV)
            ndev++;
    } else {
        if (!cfg->dir || cfg->file_size < STORE_ALIGN)
            return -EINVAL;
        ndev = cfg->nfiles;
    }
    if (ndev == 0 || ndev >= STORE_MARKER_DEV)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->devs = calloc(ndev, sizeof(*s->devs));
    if (!s->devs) {
        free(s);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < ndev; i++) {
        s->devs[i].fd = s->devs[i].fd_buf = -1;
        pthread_mutex_init(&s->devs[i].sync_mu, NULL);
    }
    s->ndev = ndev;
    s->free_dbi = free_dbi;
    rc = store__alloc_init(s);
    if (rc < 0) {
        for (uint32_t i = 0; i < ndev; i++)
            pthread_mutex_destroy(&s->devs[i].sync_mu);
        free(s->devs);
        free(s);
        return rc;
    }
    for (uint32_t i = 0; i < ndev && rc == 0; i++) {
        if (cfg->devices) {
            rc = dev_open(&s->devs[i], cfg->devices[i], 0, 0);
        } else {
            char path[PATH_MAX];
            int n = snprintf(path, sizeof(path), "%s/data.%03u", cfg->dir, i);
            if (n < 0 || (size_t)n >= sizeof(path))
                rc = -ENAMETOOLONG;
            else
                rc = dev_open(&s->devs[i], path, 1, cfg->file_size);
        }
    }
    if (rc == 0)
        rc = map_load(s, rtxn);
    if (rc < 0) {
        store_close(s);
        return rc;
    }
    struct store_stats st;
    store_stats_get(s, &st);
    srv_log(INFO, STORE, "opened %u device(s), capacity=%" PRIu64 " free=%" PRIu64 "%s", ndev,
            st.capacity, st.free,
            s->init_from == 0     ? " (new store)"
            : s->init_from < ndev ? " (new devices)"
                                  : "");
    *out = s;
    return 0;
}

int store_needs_init(struct store *s)
{
    return s ? s->init_from < s->ndev : 0;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->ndev; i++) {
        dev_close(&s->devs[i]);
        pthread_mutex_destroy(&s->devs[i].sync_mu);
    }
    store__alloc_fini(s);
    free(s->devs);
    free(s);
}

/* Validate an extent's place. @return 0 or -EINVAL. */
static int extent_check(struct store *s, const struct store_extent *e, uint64_t size)
{
    if (e->dev >= s->ndev || e->off % STORE_ALIGN != 0 || e->off > s->devs[e->dev].size ||
        size > s->devs[e->dev].size - e->off) {
        srv_log(ERROR, STORE, "bad extent dev=%u off=%" PRIu64 " len=%u", e->dev, e->off, e->len);
        return -EINVAL;
    }
    return 0;
}

int store_write(struct store *s, struct store_extent *e, const void *buf, size_t len)
{
    return store_write_crc(s, e, buf, len, store_crc32c(0, buf, len));
}

struct crc_fixed {
    uint32_t crc;
};

static uint32_t crc_fixed_fn(void *arg)
{
    return ((struct crc_fixed *)arg)->crc;
}

int store_write_crc(struct store *s, struct store_extent *e, const void *buf, size_t len,
                    uint32_t crc)
{
    struct crc_fixed f = {crc};
    return store_write_cb(s, e, buf, len, crc_fixed_fn, &f);
}

int store_write_cb(struct store *s, struct store_extent *e, const void *buf, size_t len,
                   uint32_t (*crc_fn)(void *arg), void *arg)
{
    uint32_t crc = 0;
    if (!s || !e || (len && !buf) || len > STORE_EXTENT_MAX || e->len > STORE_EXTENT_MAX)
        return -EINVAL;
    uint64_t size = store__round_up(len ? len : 1);
    uint64_t have = 0;
    int reserved = store__alloc_is_reserved(s, e->dev, e->off, &have);
    if (!reserved)
        have = store__round_up(e->len ? e->len : 1);
    if (size > have || (!reserved && size != have)) {
        srv_log(
            ERROR, STORE,
            "write of %zu bytes does not fit extent dev=%u off=%" PRIu64 " (%" PRIu64 " bytes%s)",
            len, e->dev, e->off, have, reserved ? "" : ", committed: rewrite must keep the size");
        return -EINVAL;
    }
    int rc = extent_check(s, e, size);
    if (rc < 0)
        return rc;
    struct store_dev *d = &s->devs[e->dev];
    void *bounce = NULL; /* owned only when not the thread's scratch buffer */
    if (len) {
        const void *src = buf;
        size_t wlen = len;
        if (d->direct && (((uintptr_t)buf % STORE_ALIGN) != 0 || len % STORE_ALIGN != 0)) {
            void *tmp = store__bounce_get();
            if (!tmp) {
                if (posix_memalign(&bounce, STORE_ALIGN, size) != 0)
                    return -ENOMEM;
                tmp = bounce;
            }
            memcpy(tmp, buf, len);
            memset((char *)tmp + len, 0, size - len);
            src = tmp;
            wlen = size;
        }
        /* the CRC is computed while the write is in flight (the bytes do not change) */
        rc = store__io_write_during(d->fd, src, wlen, e->off, crc_fn, arg, &crc);
        if (rc < 0)
            goto out;
        __atomic_add_fetch(&d->wgen, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&s->bytes_written, len, __ATOMIC_RELAXED);
    }
    else
        crc = crc_fn(arg);
    if (reserved && size < have)
        (void)store__alloc_shrink(s, e, size);
    e->len = (uint32_t)len;
    e->crc = crc;
out:
    free(bounce);
    return rc;
}

struct wbatch {
    struct store_wreq *v;
    struct store__io io[STORE_WBATCH_MAX];
    bool copy[STORE_WBATCH_MAX];     /* bounced through io[i].buf */
    uint32_t crc[STORE_WBATCH_MAX];
    uint32_t (*crc_fn)(void *arg, size_t i);
    void *arg;
};

static void wbatch_prep(void *arg, size_t i)
{
    struct wbatch *w = arg;
    if (w->copy[i]) {
        memcpy(w->io[i].buf, w->v[i].buf, w->v[i].len);
        memset((char *)w->io[i].buf + w->v[i].len, 0, w->io[i].len - w->v[i].len);
    }
}

static void wbatch_during(void *arg, size_t i)
{
    struct wbatch *w = arg;
    w->crc[i] = w->crc_fn(w->arg, i);
}

int store_write_batch(struct store *s, struct store_wreq *v, size_t n,
                      uint32_t (*crc_fn)(void *arg, size_t i), void *arg)
{
    struct wbatch w;
    void *own[STORE_WBATCH_MAX] = {0}; /* staging allocated here (no thread buffer) */
    uint64_t have[STORE_WBATCH_MAX];
    int rc = 0;
    if (!s || !v || !crc_fn || n == 0 || n > STORE_WBATCH_MAX)
        return -EINVAL;
    memset(&w, 0, sizeof(w));
    w.v = v;
    w.crc_fn = crc_fn;
    w.arg = arg;
    for (size_t i = 0; i < n; i++) {
        struct store_wreq *r = &v[i];
        if (!r->e || !r->buf || r->len == 0 || r->len > STORE_EXTENT_MAX) {
            rc = -EINVAL;
            goto out;
        }
        uint64_t size = store__round_up(r->len);
        if (!store__alloc_is_reserved(s, r->e->dev, r->e->off, &have[i]) || size > have[i]) {
            srv_log(ERROR, STORE,
                    "batched write of %zu bytes does not fit reservation dev=%u off=%" PRIu64,
                    r->len, r->e->dev, r->e->off);
            rc = -EINVAL;
            goto out;
        }
        rc = extent_check(s, r->e, size);
        if (rc < 0)
            goto out;
        struct store_dev *d = &s->devs[r->e->dev];
        w.io[i].fd = d->fd;
        w.io[i].off = r->e->off;
        w.io[i].buf = (void *)r->buf;
        w.io[i].len = r->len;
        if (d->direct && (((uintptr_t)r->buf % STORE_ALIGN) != 0 || r->len % STORE_ALIGN != 0)) {
            void *st = store__stage_get(i);
            if (!st) {
                if (posix_memalign(&own[i], STORE_ALIGN, STORE_EXTENT_MAX) != 0) {
                    own[i] = NULL;
                    rc = -ENOMEM;
                    goto out;
                }
                st = own[i];
            }
            w.io[i].buf = st;
            w.io[i].len = size;
            w.copy[i] = true;
        }
    }
    rc = store__io_write_batch(w.io, n, wbatch_prep, wbatch_during, &w);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct store_wreq *r = &v[i];
        struct store_dev *d = &s->devs[r->e->dev];
        __atomic_add_fetch(&d->wgen, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&s->bytes_written, r->len, __ATOMIC_RELAXED);
        if (store__round_up(r->len) < have[i])
            (void)store__alloc_shrink(s, r->e, store__round_up(r->len));
        r->e->len = (uint32_t)r->len;
        r->e->crc = w.crc[i];
    }
out:
    for (size_t i = 0; i < n; i++)
        free(own[i]);
    return rc;
}

int store_sync(struct store *s)
{
    if (!s)
        return -EINVAL;
    for (uint32_t i = 0; i < s->ndev; i++) {
        struct store_dev *d = &s->devs[i];
        uint64_t need = __atomic_load_n(&d->wgen, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&d->sync_mu);
        if (d->sgen < need) {
            /* Everything written before this load is covered by the fdatasync below. */
            uint64_t now = __atomic_load_n(&d->wgen, __ATOMIC_ACQUIRE);
            /* a failed fdatasync may have dropped pages (the kernel reports it
             * once; a retry would succeed without them): never go on */
            if (fdatasync(d->fd) != 0)
                SRV_FATAL(STORE, "fdatasync %s: %s; data written since the last sync may be "
                          "lost, exiting so that a restart recovers from the last durable "
                          "state", d->path, strerror(errno));
            d->sgen = now;
        }
        pthread_mutex_unlock(&d->sync_mu);
    }
    return 0;
}

int store_read(struct store *s, const struct store_extent *e, uint32_t from, void *buf, size_t len)
{
    if (!s || !e || (len && !buf) || e->len > STORE_EXTENT_MAX || from > e->len ||
        len > (size_t)(e->len - from))
        return -EINVAL;
    if (e->len == 0 || len == 0)
        return 0;
    uint64_t size = store__round_up(e->len);
    int rc = extent_check(s, e, size);
    if (rc < 0)
        return rc;
    struct store_dev *d = &s->devs[e->dev];
    void *bounce = NULL;
    unsigned char *data;
    int into_caller = from == 0 && len == e->len &&
                      (!d->direct || (((uintptr_t)buf % STORE_ALIGN) == 0 && len == size));
    if (into_caller) {
        data = buf;
    } else {
        data = store__bounce_get();
        if (!data) {
            if (posix_memalign(&bounce, STORE_ALIGN, size) != 0)
                return -ENOMEM;
            data = bounce;
        }
    }
    rc = store__io_read(d->fd, data, d->direct ? size : e->len, e->off);
    if (rc < 0)
        goto out;
    uint32_t crc = store_crc32c(0, data, e->len);
    if (crc != e->crc) {
        uint64_t n = __atomic_add_fetch(&s->crc_errors, 1, __ATOMIC_RELAXED);
        srv_log(ERROR, STORE,
                "CRC mismatch dev=%u off=%" PRIu64 " len=%u: want %08x got %08x (errors=%" PRIu64
                ")",
                e->dev, e->off, e->len, e->crc, crc, n);
        if (into_caller)
            memset(buf, 0, len); /* never hand out bytes that failed the check */
        rc = SRV_ECORRUPT;
        goto out;
    }
    if (!into_caller)
        memcpy(buf, data + from, len);
    __atomic_add_fetch(&s->bytes_read, len, __ATOMIC_RELAXED);
out:
    free(bounce);
    return rc;
}

int store_read_direct(struct store *s, const struct store_rreq *r, size_t n, store_rdone_fn done,
                      void *arg)
{
    struct store__io stack[16], *v = n <= 16 ? stack : calloc(n, sizeof(*v));
    int rc = 0;
    if (!s || (n && !r))
        return -EINVAL;
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct store_extent *e = r[i].e;
        if (!e || e->dev >= s->ndev || r[i].from % STORE_ALIGN || r[i].len % STORE_ALIGN ||
            (uintptr_t)r[i].buf % STORE_ALIGN || r[i].from > store__round_up(e->len) ||
            r[i].len > store__round_up(e->len) - r[i].from) {
            rc = -EINVAL;
            break;
        }
        rc = extent_check(s, e, store__round_up(e->len));
        v[i] = (struct store__io){s->devs[e->dev].fd, r[i].buf, r[i].len, e->off + r[i].from};
    }
    if (rc == 0)
        rc = store__io_read_batch(v, n, done, arg);
    if (rc == 0)
        for (size_t i = 0; i < n; i++)
            __atomic_add_fetch(&s->bytes_read, r[i].len, __ATOMIC_RELAXED);
    if (v != stack)
        free(v);
    return rc;
}

int store_extent_fd(struct store *s, const struct store_extent *e)
{
    if (!s || !e || e->dev >= s->ndev)
        return -EINVAL;
    return s->devs[e->dev].fd_buf;
}

void store_stats_get(struct store *s, struct store_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!s)
        return;
    for (uint32_t i = 0; i < s->ndev; i++)
        out->capacity += s->devs[i].size;
    pthread_mutex_lock(&s->a.mu);
    out->free = s->a.free_bytes;
    out->reserved = s->a.reserved_bytes;
    out->limbo = s->a.limbo_bytes;
    pthread_mutex_unlock(&s->a.mu);
    out->crc_errors = __atomic_load_n(&s->crc_errors, __ATOMIC_RELAXED);
    out->bytes_read = __atomic_load_n(&s->bytes_read, __ATOMIC_RELAXED);
    out->bytes_written = __atomic_load_n(&s->bytes_written, __ATOMIC_RELAXED);
}
