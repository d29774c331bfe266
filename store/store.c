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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"
#include "srv_size.h"
#include "store_int.h"

int store__no_direct;
uint64_t store__grow_min = STORE_GROW_MIN;

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

/* Free bytes (and, when @p size is given, the size) of the file system holding
 * @p fd; 0 when unknown. */
static uint64_t fs_free_of(int fd, uint64_t *size)
{
    struct statvfs v;
    if (fstatvfs(fd, &v) != 0)
        return 0;
    if (size)
        *size = (uint64_t)v.f_blocks * v.f_frsize;
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Extend data file @p d so that [from, to) is allocated, then make the new length
 * durable (fsync), so the free map never covers bytes a crash could take away.
 * @return 0, -ENOSPC (file system full; nothing logged), -EIO (fsync), -errno. */
static int file_extend(struct store_dev *d, uint64_t from, uint64_t to)
{
    int err = 0;
    if (fallocate(d->fd_buf, 0, (off_t)from, (off_t)(to - from)) != 0) {
        err = errno;
        if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
            /* No native fallocate: size the file, then let glibc write the blocks. */
            struct stat st;
            if (fstat(d->fd_buf, &st) == 0 && (uint64_t)st.st_size < to &&
                ftruncate(d->fd_buf, (off_t)to) != 0)
                err = errno;
            else
                err = posix_fallocate(d->fd_buf, (off_t)from, (off_t)(to - from));
            if (err == EOPNOTSUPP || err == EINVAL)
                err = 0; /* sparse but sized: the best this filesystem can do */
        }
    }
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        return -ENOSPC;
    if (err) {
        srv_log(ERROR, STORE, "extend %s to %" PRIu64 " bytes: %s", d->path, to, strerror(err));
        return -err;
    }
    if (fsync(d->fd_buf) != 0) {
        srv_log(ERROR, STORE, "fsync %s after extending it: %s", d->path, strerror(errno));
        return -EIO;
    }
    return 0;
}

/* Open one data file or block device: its fds and length, nothing grown yet. */
static int dev_open(struct store_dev *d, const char *path, int create, uint64_t limit)
{
    int rc = 0;
    struct stat st;
    d->path = strdup(path);
    if (!d->path)
        return -ENOMEM;
    if (create) {
        d->fd_buf = open(path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0600);
        if (d->fd_buf >= 0)
            d->created = 1;
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
        d->file_len = d->limit = bytes & ~(uint64_t)(STORE_ALIGN - 1);
        if (d->limit == 0) {
            srv_log(ERROR, STORE, "%s has no usable space", path);
            rc = -ENOSPC;
            goto out;
        }
    } else if (S_ISREG(st.st_mode)) {
        d->file_len = (uint64_t)st.st_size & ~(uint64_t)(STORE_ALIGN - 1);
        d->limit = limit & ~(uint64_t)(STORE_ALIGN - 1);
    } else {
        srv_log(ERROR, STORE, "%s is neither a regular file nor a block device", path);
        rc = -EINVAL;
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

/* After the map is loaded: bring device @p i to its size for this run (at least
 * what the map covers, at least @p initial for a file) and make the space the
 * map does not cover yet free in memory. @return 0, -ENOSPC, -EINVAL, -EIO, -ENOMEM. */
static int dev_size_at_open(struct store *s, uint32_t i, uint64_t initial)
{
    struct store_dev *d = &s->devs[i];
    char a[32], b[32], c[32];
    uint64_t target = d->rec_size;
    if (d->is_blk) {
        if (d->file_len < d->rec_size) {
            srv_log(ERROR, STORE, "%s has %s, less than the %s the store uses: a block device "
                    "cannot shrink", d->path, srv_size_human(d->file_len, a, sizeof(a)),
                    srv_size_human(d->rec_size, b, sizeof(b)));
            return -EINVAL;
        }
        target = d->file_len;
    } else {
        uint64_t want = initial ? store__round_up(initial) : d->limit;
        if (want > d->limit)
            want = d->limit;
        if (target < want)
            target = want;
        if (d->rec_size > d->limit)
            srv_log(WARN, STORE, "%s holds %s, more than its limit %s: it keeps its size and "
                    "does not grow", d->path, srv_size_human(d->rec_size, a, sizeof(a)),
                    srv_size_human(d->limit, b, sizeof(b)));
        if (d->file_len > target)
            srv_log(INFO, STORE, "%s is %s long, the store uses %s of it (a growth not "
                    "recorded before a crash): the rest is used again when it grows", d->path,
                    srv_size_human(d->file_len, a, sizeof(a)), srv_size_human(target, b, sizeof(b)));
        if (d->file_len < d->rec_size)
            srv_log(WARN, STORE, "%s is %s long, shorter than the %s the store recorded: "
                    "extending it again", d->path, srv_size_human(d->file_len, a, sizeof(a)),
                    srv_size_human(d->rec_size, b, sizeof(b)));
        if (target == 0) {
            srv_log(ERROR, STORE, "%s: a data file needs at least %u bytes", d->path,
                    STORE_ALIGN);
            return -EINVAL;
        }
        if (d->file_len < target) {
            int rc = file_extend(d, d->file_len, target);
            if (rc == -ENOSPC)
                srv_log(ERROR, STORE, "cannot preallocate %s to %s: the file system has %s free",
                        d->path, srv_size_human(target, a, sizeof(a)),
                        srv_size_human(fs_free_of(d->fd_buf, NULL), c, sizeof(c)));
            if (rc < 0)
                return rc;
        }
    }
    d->size = target;
    if (target > d->rec_size)
        return store__alloc_grown(s, i, d->rec_size, target);
    return 0;
}

/* What map_load finds in the persistent free map. */
struct map_state {
    struct store *s;
    int marker, nrec;
    uint32_t map_ndev, max_dev, ver;
};

/* One marker or size record (dev STORE_MARKER_DEV, sorted last). */
static int map_marker_rec(void *arg, uint32_t dev, uint64_t off, uint64_t val)
{
    struct map_state *m = arg;
    struct store *s = m->s;
    (void)dev;
    if (off == 0) {
        m->ver = (uint32_t)(val >> 32);
        m->map_ndev = (uint32_t)val;
        m->marker = 1;
        if (m->ver != 1 && m->ver != STORE_MAP_VERSION) {
            srv_log(ERROR, STORE, "free map version %u, this build knows 1..%u", m->ver,
                    STORE_MAP_VERSION);
            return SRV_EBADVERSION;
        }
        if (m->map_ndev > s->ndev) {
            srv_log(ERROR, STORE,
                    "free map covers %u devices, configuration has only %u: "
                    "removing data files or devices is not supported",
                    m->map_ndev, s->ndev);
            return -EINVAL;
        }
    } else if (off - 1 < s->ndev && val % STORE_ALIGN == 0) {
        s->devs[off - 1].rec_size = val;
    } else {
        srv_log(ERROR, STORE, "free map: bad size record %" PRIu64 " = %" PRIu64, off, val);
        return SRV_ECORRUPT;
    }
    return 0;
}

/* One free range (or the first marker record: the end of the ranges). */
static int map_range_rec(void *arg, uint32_t dev, uint64_t off, uint64_t len)
{
    struct map_state *m = arg;
    struct store *s = m->s;
    if (dev == STORE_MARKER_DEV)
        return 1; /* read by map_marker_rec; nothing follows */
    if (dev >= s->ndev) {
        /* Judged at the end: the marker says whether devices were removed. */
        if (dev > m->max_dev)
            m->max_dev = dev;
        m->nrec++;
        return 0;
    }
    uint64_t cover = s->devs[dev].rec_size;
    if (len == 0 || off % STORE_ALIGN || len % STORE_ALIGN || off > cover || len > cover - off) {
        srv_log(ERROR, STORE, "free map: bad range dev=%u off=%" PRIu64 " len=%" PRIu64
                " (the map covers %" PRIu64 " bytes of it)", dev, off, len, cover);
        return SRV_ECORRUPT;
    }
    int rc = store__alloc_add(s, dev, off, len);
    if (rc < 0)
        return rc;
    if (dev > m->max_dev)
        m->max_dev = dev;
    m->nrec++;
    return 0;
}

struct frscan {
    int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len);
    void *arg;
    int rc;
};

static int free_range_ent(void *arg, uint32_t dev, uint64_t off, uint64_t len)
{
    struct frscan *f = arg;
    if (dev == STORE_MARKER_DEV)
        return 1; /* the ranges are over */
    f->rc = f->cb(f->arg, dev, off, len);
    return f->rc ? 1 : 0;
}

int store_map_free_ranges(const struct store_map *map,
                          int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len), void *arg)
{
    struct frscan f = {cb, arg, 0};
    int rc = map->scan(map->txn, 0, 0, free_range_ent, &f);
    return rc < 0 ? rc : f.rc;
}

/* Read the persistent free map into the allocator and each device's recorded
 * size. @return 0, -EIO, SRV_ECORRUPT, SRV_EBADVERSION, -EINVAL (device count
 * changed), -ENOMEM. */
static int map_load(struct store *s, const struct store_map *map)
{
    struct map_state m = {.s = s};
    int rc = map->scan(map->txn, STORE_MARKER_DEV, 0, map_marker_rec, &m);
    if (rc < 0)
        return rc;
    /* What each device's ranges must lie in: its size record (version 2), else
     * (version 1, or no marker) the whole file as found, as those versions
     * preallocated every file whole and put all of it in the map. */
    for (uint32_t d = 0; d < s->ndev; d++) {
        if (m.marker && d >= m.map_ndev)
            s->devs[d].rec_size = 0;
        else if (!m.marker || m.ver == 1)
            s->devs[d].rec_size = s->devs[d].file_len;
    }
    rc = map->scan(map->txn, 0, 0, map_range_rec, &m);
    if (rc < 0)
        return rc;
    if (m.marker) {
        if (m.nrec && m.max_dev >= m.map_ndev) {
            srv_log(ERROR, STORE, "free map has ranges on device %u but covers %u devices",
                    m.max_dev, m.map_ndev);
            return SRV_ECORRUPT;
        }
        s->map_ver = m.ver;
        s->map_ndev = m.map_ndev;
    } else if (m.nrec && m.max_dev >= s->ndev) {
        srv_log(ERROR, STORE, "free map has ranges on device %u; configuration has %u devices",
                m.max_dev, s->ndev);
        return SRV_ECORRUPT;
    } else if (m.nrec == 0) {
        for (uint32_t d = 0; d < s->ndev; d++)
            s->devs[d].rec_size = 0; /* a new store */
    } else {
        srv_log(WARN, STORE, "free map has no marker record; assuming it covers all devices");
        s->map_ver = 1;
        s->map_ndev = s->ndev;
    }
    return 0;
}

/* Whether writes may go through the page cache (store_config.write_cache):
 * data files only, on a file system that can zero a range in place
 * (write_cached needs FALLOC_FL_ZERO_RANGE), tried on a scratch file in @p dir.
 * Block devices are written with O_DIRECT: zeroing a range of a device
 * without a write-zeroes command writes the zeros. */
static bool write_cache_usable(const struct store_config *cfg)
{
    if (!cfg->write_cache)
        return false;
    if (cfg->devices) {
        srv_log(INFO, STORE, "data_write_cache: block devices are written with O_DIRECT");
        return false;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.zero-range-check", cfg->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && fallocate(fd, 0, 0, STORE_ALIGN) == 0 &&
              fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, STORE_ALIGN) == 0;
    int err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    if (!ok)
        srv_log(WARN, STORE,
                "data_write_cache: %s cannot zero a range in place (%s): writing "
                "with O_DIRECT",
                cfg->dir, strerror(err));
    return ok;
}

int store_open(struct store **out, const struct store_config *cfg, const struct store_map *map)
{
    int rc = 0;
    struct store *s = NULL;
    uint32_t ndev = 0;
    if (!out || !cfg || !map)
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
    pthread_mutex_init(&s->grow_mu, NULL);
    s->ndev = ndev;
    s->write_cache = write_cache_usable(cfg);
    rc = store__alloc_init(s);
    s->a.drop = s->write_cache;
    if (rc < 0) {
        for (uint32_t i = 0; i < ndev; i++)
            pthread_mutex_destroy(&s->devs[i].sync_mu);
        pthread_mutex_destroy(&s->grow_mu);
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
            if (n < 0 || (size_t)n >= sizeof(path)) {
                rc = -ENAMETOOLONG;
            } else {
                rc = dev_open(&s->devs[i], path, 1, cfg->file_size);
            }
        }
    }
    if (rc == 0)
        rc = map_load(s, map);
    for (uint32_t i = 0; i < ndev && rc == 0; i++)
        rc = dev_size_at_open(s, i, cfg->devices ? 0 : cfg->file_initial);
    if (rc < 0) {
        /* do not leave a data file this open created and could not size */
        for (uint32_t i = 0; i < ndev; i++)
            if (s->devs[i].created)
                unlink(s->devs[i].path);
        store_close(s);
        return rc;
    }
    struct store_stats st;
    store_stats_get(s, &st);
    char a[32], b[32], c[32];
    srv_log(INFO, STORE, "opened %u device(s): %s, may grow to %s, %s free%s", ndev,
            srv_size_human(st.capacity, a, sizeof(a)), srv_size_human(st.limit, b, sizeof(b)),
            srv_size_human(st.free, c, sizeof(c)),
            s->map_ver == 0 ? " (new store)" : s->map_ndev < ndev ? " (new devices)" : "");
    *out = s;
    return 0;
}

/* Pick the data file to grow for @p need bytes: the smallest one below its
 * limit (spreads data over the files), or -1. Caller holds grow_mu. */
static int grow_pick(struct store *s, uint64_t need)
{
    int best = -1;
    for (uint32_t i = 0; i < s->ndev; i++) {
        struct store_dev *d = &s->devs[i];
        uint64_t size = store__dev_size(d);
        if (d->is_blk || size >= d->limit || d->limit - size < need)
            continue;
        if (best < 0 || size < store__dev_size(&s->devs[best]))
            best = (int)i;
    }
    return best;
}

int store__grow(struct store *s, uint64_t need, uint64_t gen)
{
    char a[32], b[32], c[32];
    int rc = -ENOSPC;
    pthread_mutex_lock(&s->grow_mu);
    pthread_mutex_lock(&s->a.mu);
    int moved = s->a.grow_gen != gen;
    pthread_mutex_unlock(&s->a.mu);
    if (moved) {
        rc = 0; /* another thread grew a file meanwhile: try that space first */
        goto out;
    }
    for (int i; (i = grow_pick(s, need)) >= 0;) {
        struct store_dev *d = &s->devs[i];
        uint64_t size = store__dev_size(d);
        uint64_t step = size / 8 > store__grow_min ? size / 8 : store__grow_min;
        step = (step + STORE_EXTENT_MAX - 1) & ~(uint64_t)(STORE_EXTENT_MAX - 1);
        uint64_t to = d->limit - size < step ? d->limit : size + step;
        rc = file_extend(d, size, to);
        if (rc == -ENOSPC && to - size > STORE_EXTENT_MAX) {
            /* not a whole step left on the file system: take what this needs */
            to = size + STORE_EXTENT_MAX > d->limit ? d->limit : size + STORE_EXTENT_MAX;
            rc = file_extend(d, size, to);
        }
        if (rc == -EIO)
            SRV_FATAL(STORE, "fsync of %s failed after extending it; exiting", d->path);
        if (rc < 0) {
            if (!d->grow_failed)
                srv_log(ERROR, STORE, "cannot grow %s beyond %s (limit %s): %s, %s free on its "
                        "file system; writes that need new space fail with ENOSPC until space "
                        "is freed", d->path, srv_size_human(size, a, sizeof(a)),
                        srv_size_human(d->limit, b, sizeof(b)), strerror(-rc),
                        srv_size_human(fs_free_of(d->fd_buf, NULL), c, sizeof(c)));
            d->grow_failed = 1;
            break; /* another file is on the same file system: no better luck there */
        }
        if (d->grow_failed)
            srv_log(INFO, STORE, "%s grows again: space is back", d->path);
        d->grow_failed = 0;
        __atomic_store_n(&d->size, to, __ATOMIC_RELEASE);
        rc = store__alloc_grown(s, (uint32_t)i, size, to);
        srv_log(INFO, STORE, "grew %s from %s to %s (limit %s)", d->path,
                srv_size_human(size, a, sizeof(a)), srv_size_human(to, b, sizeof(b)),
                srv_size_human(d->limit, c, sizeof(c)));
        break;
    }
out:
    pthread_mutex_unlock(&s->grow_mu);
    return rc;
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
    pthread_mutex_destroy(&s->grow_mu);
    free(s->devs);
    free(s);
}

/* Validate an extent's place. @return 0 or -EINVAL. */
static int extent_check(struct store *s, const struct store_extent *e, uint64_t size)
{
    if (e->dev >= s->ndev || e->off % STORE_ALIGN != 0 || e->off > store__dev_size(&s->devs[e->dev]) ||
        size > store__dev_size(&s->devs[e->dev]) - e->off) {
        srv_log(ERROR, STORE, "bad extent dev=%u off=%" PRIu64 " len=%u", e->dev, e->off, e->len);
        return -EINVAL;
    }
    return 0;
}

/* Whether any page of [@p off, @p off + @p len) of @p fd is in the page cache,
 * by cachestat(2) (Linux 6.5; the same number on every architecture). True
 * when unknown (no cachestat, an error). */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
static int no_cachestat; /* atomic: cachestat(2) is missing */

static bool range_cached(int fd, uint64_t off, uint64_t len)
{
    struct {
        uint64_t off, len;
    } range = {off, len};
    struct {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
    } cs;
    if (__atomic_load_n(&no_cachestat, __ATOMIC_RELAXED))
        return true;
    if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0) {
        if (errno == ENOSYS)
            __atomic_store_n(&no_cachestat, 1, __ATOMIC_RELAXED);
        return true;
    }
    return cs.nr_cache != 0;
}

/* Whether some page of [@p off, @p off + @p len) of device @p d is in the page
 * cache after dropping those it can (POSIX_FADV_DONTNEED): only folios the
 * range covers whole, clean and referenced by nothing but the page cache,
 * leave it; one a socket or pipe still holds (a sendfile of the extent that
 * had the space), a dirty one, one under writeback or mapped somewhere, and a
 * large folio that reaches outside the range stay. True when unknown. */
static bool range_held(struct store *s, struct store_dev *d, uint64_t off, uint64_t len)
{
    if (!range_cached(d->fd_buf, off, len))
        return false;
    if (posix_fadvise(d->fd_buf, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED) != 0 ||
        range_cached(d->fd_buf, off, len))
        return true;
    __atomic_add_fetch(&s->cached_dropped, 1, __ATOMIC_RELAXED);
    return false;
}

void store__drop_range(struct store *s, uint32_t dev, uint64_t off, uint64_t len)
{
    if (s->forget)
        s->forget(s->forget_arg, dev, off, len);
    /* Only a hint: a page that stays is found by cached_take, and the write
     * that reuses the space goes O_DIRECT. */
    (void)posix_fadvise(s->devs[dev].fd_buf, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

void store_set_forget(struct store *s, store_forget_fn fn, void *arg)
{
    if (!s)
        return;
    s->forget = fn;
    s->forget_arg = arg;
}

/* Write through the page cache: the bytes stay cached for the first read
 * (an O_DIRECT write leaves nothing there). Bumps the device's write
 * generation. @return 0, -EIO. */
static int write_cached(struct store *s, struct store_dev *d, const void *buf, size_t len,
                        uint64_t off)
{
    /* The space may have held an extent whose page-cache pages were handed to
     * a socket by sendfile and are still referenced there (a send queue, a
     * local receiver's queue): a buffered write would change those bytes in
     * place under the send. On a device written with O_DIRECT such a write
     * never comes here (cached_take sends it to the O_DIRECT path when any
     * page of the range is cached). Without O_DIRECT the range is zeroed
     * first, which drops the pages it covers whole; a large folio it covers
     * only in part is zeroed in place and may stay (see cached_take).
     * When no page of the range is in the page cache, there is nothing to
     * drop: a page a socket still holds has left the page cache already, and
     * a page read in after this check (readahead for a neighbour) is held by
     * no socket, as nothing sends this space any more (the extent that had it
     * was freed, and space is reused only after every reader that could see
     * it finished: store limbo). Then the zeroing is skipped: on ext4 it
     * takes the inode lock, waits for every O_DIRECT write in flight to the
     * file and starts a journal transaction, so it cost more than the copy
     * and kept the file's one cached writer busy (issue 17). */
    uint64_t zlen = store__round_up(len);
    if (!d->direct && range_held(s, d, off, zlen)) {
        if (fallocate(d->fd_buf, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                      (off_t)zlen) != 0) {
            srv_log(ERROR, STORE, "zeroing %s at %" PRIu64 " before a write: %s", d->path, off,
                    strerror(errno));
            return -EIO;
        }
        __atomic_add_fetch(&s->cached_zeroed, 1, __ATOMIC_RELAXED);
    }
    int rc = store__io_pwrite(d->fd_buf, buf, len, off);
    if (rc < 0)
        return rc;
    __atomic_add_fetch(&d->wgen, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&s->cached_writes, 1, __ATOMIC_RELAXED);
    return 0;
}

void store_writeback(struct store *s, const struct store_extent *e)
{
    if (!s || !e || !(e->flags & STORE_X_CACHED) || e->dev >= s->ndev || e->len == 0)
        return;
    /* Only a hint: an error here is reported again by the fdatasync that
     * makes the bytes durable. */
    (void)sync_file_range(s->devs[e->dev].fd_buf, (off64_t)e->off, (off64_t)e->len,
                          SYNC_FILE_RANGE_WRITE);
}

/* Become the device's one writer through the page cache, if the store writes
 * that way and nobody else is: buffered writes to one file are serialized by
 * the file system (its inode lock), so a second one would wait where an
 * O_DIRECT write goes on in parallel. @return whether to write cached (then
 * cached_end() after). */
static bool cached_begin(struct store *s, struct store_dev *d)
{
    int idle = 0;
    return s->write_cache && __atomic_compare_exchange_n(&d->cached_writer, &idle, 1, false,
                                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void cached_end(struct store_dev *d)
{
    __atomic_store_n(&d->cached_writer, 0, __ATOMIC_RELEASE);
}

/* cached_begin for a write of [@p off, @p off + @p len), refused (then the
 * write goes O_DIRECT) on an O_DIRECT device when any page of the range is
 * in the page cache. Such a page may be one a socket still holds from a
 * sendfile of the extent that had the space before, and a buffered write
 * would change its bytes under the send: a GET body that is not the object
 * (its ETag not the MD5 of what was received). Zeroing the range first does
 * not prevent it: truncation drops the folios the range covers whole, but
 * zeroes a large folio it covers only in part in place (ext4 caches buffered
 * writes in large folios, up to 2 MiB, since Linux 6.16; the split that
 * follows fails while a socket holds the folio), and keeps it when dirty, for
 * the write to fill in place. An O_DIRECT write first drops every folio that
 * overlaps its range, whole, referenced or not (the socket keeps the old
 * one), and writes the disk. @return whether to write cached (then
 * cached_end() after). */
static bool cached_take(struct store *s, struct store_dev *d, uint64_t off, uint64_t len)
{
    if (!cached_begin(s, d))
        return false;
    if (d->direct && range_held(s, d, off, store__round_up(len ? len : 1))) {
        cached_end(d);
        return false;
    }
    return true;
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
    void *bounce = NULL; /* a scratch buffer, given back at the end */
    e->flags &= ~STORE_X_CACHED;
    if (len && cached_take(s, d, e->off, len)) {
        crc = crc_fn(arg);
        rc = write_cached(s, d, buf, len, e->off);
        cached_end(d);
        if (rc < 0)
            goto out;
        e->flags |= STORE_X_CACHED;
        __atomic_add_fetch(&s->bytes_written, len, __ATOMIC_RELAXED);
    } else if (len) {
        const void *src = buf;
        size_t wlen = len;
        if (d->direct && (((uintptr_t)buf % STORE_ALIGN) != 0 || len % STORE_ALIGN != 0)) {
            void *tmp = bounce = store__scratch_get();
            if (!tmp)
                return -ENOMEM;
            memcpy(tmp, buf, len);
            memset((char *)tmp + len, 0, size - len);
            src = tmp;
            wlen = size;
        }
        /* the CRC is computed while the write is in flight (the bytes do not change) */
        rc = store__io_write_during(d->fd, src, wlen, e->off, crc_fn, arg, &crc);
        if (rc < 0)
            goto out;
        __atomic_add_fetch(&s->direct_writes, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&d->wgen, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&s->bytes_written, len, __ATOMIC_RELAXED);
    } else
        crc = crc_fn(arg);
    if (reserved && size < have)
        (void)store__alloc_shrink(s, e, size);
    e->len = (uint32_t)len;
    e->crc = crc;
out:
    store__scratch_put(bounce);
    return rc;
}

struct wbatch {
    struct store_wreq *v;
    struct store__io io[STORE_WBATCH_MAX];
    bool copy[STORE_WBATCH_MAX];     /* bounced through io[i].buf */
    uint32_t crc[STORE_WBATCH_MAX];
    uint32_t (*crc_fn)(void *arg, size_t i);
    void *arg;
    size_t first; /* index of v[0] in the caller's requests (crc_fn's numbering) */
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
    w->crc[i] = w->crc_fn(w->arg, w->first + i);
}

/* A reservation that request @p r fits into, its place checked, or -EINVAL
 * (logged); *@p have is the reserved size. */
static int wreq_check(struct store *s, const struct store_wreq *r, uint64_t *have)
{
    if (!r->e || !r->buf || r->len == 0 || r->len > STORE_EXTENT_MAX)
        return -EINVAL;
    uint64_t size = store__round_up(r->len);
    if (!store__alloc_is_reserved(s, r->e->dev, r->e->off, have) || size > *have) {
        srv_log(ERROR, STORE,
                "batched write of %zu bytes does not fit reservation dev=%u off=%" PRIu64, r->len,
                r->e->dev, r->e->off);
        return -EINVAL;
    }
    return extent_check(s, r->e, size);
}

/* Request @p r was written: its extent takes its length and CRC, and gives
 * back what it reserved beyond them. */
static void wreq_done(struct store *s, struct store_wreq *r, uint64_t have, uint32_t crc)
{
    __atomic_add_fetch(&s->bytes_written, r->len, __ATOMIC_RELAXED);
    if (store__round_up(r->len) < have)
        (void)store__alloc_shrink(s, r->e, store__round_up(r->len));
    r->e->len = (uint32_t)r->len;
    r->e->crc = crc;
}

static int write_batch_direct(struct store *s, struct store_wreq *v, size_t n,
                              uint32_t (*crc_fn)(void *arg, size_t i), void *arg, size_t first);

/* store_write_batch through the page cache (write_cached), one request after
 * the other (a buffered write is a copy, with no I/O to overlap), while this
 * thread is the devices' cached writer; the rest through the O_DIRECT batch.
 * @return 0, or what write_batch_direct returns for the rest. */
static int write_batch_cached(struct store *s, struct store_wreq *v, size_t n,
                              uint32_t (*crc_fn)(void *arg, size_t i), void *arg)
{
    size_t i = 0;
    for (; i < n; i++) {
        struct store_wreq *r = &v[i];
        struct store_dev *d = &s->devs[r->e->dev];
        uint64_t have;
        int rc = wreq_check(s, r, &have);
        if (rc < 0)
            return rc;
        if (!cached_take(s, d, r->e->off, r->len))
            break;
        uint32_t crc = crc_fn(arg, i);
        rc = write_cached(s, d, r->buf, r->len, r->e->off);
        cached_end(d);
        if (rc < 0)
            return rc;
        wreq_done(s, r, have, crc);
        r->e->flags |= STORE_X_CACHED;
    }
    return i < n ? write_batch_direct(s, v + i, n - i, crc_fn, arg, i) : 0;
}

/* store_write_batch with O_DIRECT through io_uring: requests @p v are the
 * caller's from index @p first on (crc_fn's numbering). */
static int write_batch_direct(struct store *s, struct store_wreq *v, size_t n,
                              uint32_t (*crc_fn)(void *arg, size_t i), void *arg, size_t first)
{
    struct wbatch w;
    void *own[STORE_WBATCH_MAX] = {0}; /* scratch buffers for unaligned requests */
    uint64_t have[STORE_WBATCH_MAX];
    int rc = 0;
    memset(&w, 0, sizeof(w));
    w.v = v;
    w.crc_fn = crc_fn;
    w.arg = arg;
    w.first = first;
    for (size_t i = 0; i < n; i++) {
        struct store_wreq *r = &v[i];
        r->e->flags &= ~STORE_X_CACHED;
        rc = wreq_check(s, r, &have[i]);
        if (rc < 0)
            goto out;
        uint64_t size = store__round_up(r->len);
        struct store_dev *d = &s->devs[r->e->dev];
        w.io[i].fd = d->fd;
        w.io[i].off = r->e->off;
        w.io[i].buf = (void *)r->buf;
        w.io[i].len = r->len;
        if (d->direct && (((uintptr_t)r->buf % STORE_ALIGN) != 0 || r->len % STORE_ALIGN != 0)) {
            void *st = own[i] = store__scratch_get();
            if (!st) {
                rc = -ENOMEM;
                goto out;
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
        __atomic_add_fetch(&s->devs[r->e->dev].wgen, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&s->direct_writes, 1, __ATOMIC_RELAXED);
        wreq_done(s, r, have[i], w.crc[i]);
    }
out:
    for (size_t i = 0; i < n; i++)
        store__scratch_put(own[i]);
    return rc;
}

int store_write_batch_direct(struct store *s, struct store_wreq *v, size_t n,
                             uint32_t (*crc_fn)(void *arg, size_t i), void *arg)
{
    if (!s || !v || !crc_fn || n == 0 || n > STORE_WBATCH_MAX)
        return -EINVAL;
    return write_batch_direct(s, v, n, crc_fn, arg, 0);
}

int store_write_batch(struct store *s, struct store_wreq *v, size_t n,
                      uint32_t (*crc_fn)(void *arg, size_t i), void *arg)
{
    if (s && s->write_cache && v && crc_fn && n > 0 && n <= STORE_WBATCH_MAX)
        return write_batch_cached(s, v, n, crc_fn, arg);
    return store_write_batch_direct(s, v, n, crc_fn, arg); /* and its argument checks */
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
        data = bounce = store__scratch_get();
        if (!data)
            return -ENOMEM;
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
    store__scratch_put(bounce);
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
    for (uint32_t i = 0; i < s->ndev; i++) {
        uint64_t size = store__dev_size(&s->devs[i]);
        out->capacity += size;
        out->limit += s->devs[i].limit > size ? s->devs[i].limit : size;
    }
    for (uint32_t i = 0; i < s->ndev && !out->fs_size; i++)
        if (!s->devs[i].is_blk)
            out->fs_free = fs_free_of(s->devs[i].fd_buf, &out->fs_size);
    pthread_mutex_lock(&s->a.mu);
    out->free = s->a.free_bytes + s->a.dropq.bytes;
    out->reserved = s->a.reserved_bytes;
    out->limbo = s->a.limbo.bytes;
    pthread_mutex_unlock(&s->a.mu);
    out->crc_errors = __atomic_load_n(&s->crc_errors, __ATOMIC_RELAXED);
    out->bytes_read = __atomic_load_n(&s->bytes_read, __ATOMIC_RELAXED);
    out->bytes_written = __atomic_load_n(&s->bytes_written, __ATOMIC_RELAXED);
    out->cached_writes = __atomic_load_n(&s->cached_writes, __ATOMIC_RELAXED);
    out->cached_zeroed = __atomic_load_n(&s->cached_zeroed, __ATOMIC_RELAXED);
    out->direct_writes = __atomic_load_n(&s->direct_writes, __ATOMIC_RELAXED);
    out->cached_dropped = __atomic_load_n(&s->cached_dropped, __ATOMIC_RELAXED);
    out->freed_dropped = __atomic_load_n(&s->freed_dropped, __ATOMIC_RELAXED);
}
