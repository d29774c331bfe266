/* SPDX-License-Identifier: Apache-2.0
 * store_int: declarations shared by the store's own files (store.c,
 * store_alloc.c, store_uring.c, store_crc32c.c). Nothing outside
 * store/ may include this header.
 *
 * Records of the persistent free map (struct store_map; encoded by
 * meta/meta_free.c as be32 dev | be64 off -> be64 len, see meta_schema.h):
 *   (dev, off) -> len   one per free range
 * plus one marker record:
 *   (0xffffffff, 0) -> STORE_MAP_VERSION << 32 | ndev
 * so a completely full store (no free range left) is not mistaken for a new
 * one, and devices added to the configuration later are recognized as new,
 * and (version 2) one size record per device:
 *   (0xffffffff, 1 + dev) -> bytes
 * the part of the device the map covers (its "recorded size"). A data file
 * grows on demand: the file is extended (fallocate, then fsync) first, its new
 * tail is free space at once in memory, and the tail's free range and the new
 * size record go into the next write txn that uses space (store_txn_use) or
 * into store_txn_init, so the map never covers bytes the file lacks. At open a
 * file longer than its recorded size (grown, not recorded: a crash between
 * the two) is used only up to the recorded size and grows again over its own
 * tail; a file shorter than it (truncated from outside) is extended back.
 * A version 1 map (no size records) covers each file's whole length at open
 * and is upgraded by store_txn_init. Thread: see each function. */
#ifndef STORE_INT_H
#define STORE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "store.h"

#define STORE_MARKER_DEV 0xffffffffu
#define STORE_MAP_VERSION 2u
#define STORE_GROW_MIN (64ull << 20) /* smallest growth step of a data file */

/* Intrusive treap link. */
struct store__tnode {
    struct store__tnode *l, *r;
    uint32_t prio;
};

/* One free range of a device; lives in both trees. */
struct store__range {
    struct store__tnode by_off;  /* ordered by (dev, off) */
    struct store__tnode by_size; /* ordered by (len, dev, off) */
    uint32_t dev;
    uint64_t off, len;
};

/* A freed extent waiting for older readers to finish. */
struct store__limbo {
    struct store__limbo *next;
    uint64_t tag; /* read epoch at the free */
    uint32_t dev;
    uint64_t off, len;
};

/* The store's part of one metadata write txn: what it changed in the
 * persistent map, applied at store_txn_done (owned by the caller). */
struct store_txn {
    struct store *s;
    struct store_map map;
    struct store__limbo *frees; /* frees (tag 0) and uses (tag 1) of this txn */
    uint64_t *grow;             /* per device: size this txn recorded (0: none) */
    int marker;                 /* this txn wrote the current marker record */
};

/* Readers currently active with a given epoch token. */
struct store__epoch {
    uint64_t epoch;
    uint64_t count;
};

/* A FIFO of limbo entries and the bytes they hold (store_alloc.c: lq_*). */
struct store__lq {
    struct store__limbo *head, *tail;
    uint64_t bytes;
};

struct store__alloc {
    pthread_mutex_t mu;
    struct store__tnode *root_off, *root_size;
    struct store__tnode *resv; /* reserved extents, by (dev, off) */
    uint32_t rng;              /* treap priorities */
    uint64_t free_bytes, reserved_bytes;
    struct store__lq limbo;       /* freed extents a reader may still see, by tag */
    uint64_t epoch;               /* current read epoch */
    struct store__epoch *readers; /* sorted by epoch, [rhead, rtail) */
    size_t rhead, rtail, rcap;
    uint64_t seq_gen; /* bumps per alloc; thread cursors compare it */
    uint64_t grow_gen; /* bumps when a data file grew (store__grow) */
    /* Freed extents out of the limbo whose page-cache pages are dropped
     * (store__drop_range) before their space is free again, FIFO; their
     * bytes are counted free. Only when drop is set (store write_cache). */
    struct store__lq dropq;
    int drop;
};

struct store_dev {
    int fd;     /* O_DIRECT when direct, else buffered */
    int fd_buf; /* buffered fd for sendfile/page-cache readers */
    int direct;
    int is_blk;
    uint64_t size;      /* usable bytes, multiple of STORE_ALIGN; only grows (atomic) */
    uint64_t limit;     /* most it may grow to (block devices: their size) */
    uint64_t rec_size;  /* bytes the persistent map covers (a.mu) */
    uint64_t file_len;  /* length found at open (aligned down) */
    int grow_failed;    /* the last growth failed (logged once; grow_mu) */
    int created;        /* store_open created the file (removed if the open fails) */
    char *path;
    pthread_mutex_t sync_mu;
    uint64_t wgen; /* bumped by each write (atomic) */
    int cached_writer; /* a write through the page cache is under way (atomic) */
    uint64_t sgen; /* wgen value covered by the last fdatasync (under sync_mu) */
};

struct store {
    struct store_dev *devs;
    uint32_t ndev;
    uint32_t map_ndev;  /* device count of the marker record (a.mu) */
    uint32_t map_ver;   /* version of the marker record, 0: none (a.mu) */
    pthread_mutex_t grow_mu; /* one data file growth at a time */
    struct store__alloc a;
    uint64_t crc_errors, bytes_read, bytes_written; /* atomics */
    uint64_t cached_writes, cached_zeroed, direct_writes; /* atomics: store_stats */
    uint64_t cached_dropped, freed_dropped;               /* atomics: store_stats */
    bool write_cache;                               /* store_config.write_cache */
    store_forget_fn forget;                         /* store_set_forget */
    void *forget_arg;
};

/* store_alloc.c */
int store__alloc_init(struct store *s);
void store__alloc_fini(struct store *s);
/* Add a free range read from the map at open. @return 0, -ENOMEM, SRV_ECORRUPT (overlap). */
int store__alloc_add(struct store *s, uint32_t dev, uint64_t off, uint64_t len);
/* Shrink a reservation to @p newlen bytes (rounded); tail becomes free. @return 0 or -EINVAL
 * when (dev, off) is not a reservation. */
int store__alloc_shrink(struct store *s, const struct store_extent *e, uint64_t newlen);
/* Whether (dev, off) is currently reserved, and its reserved size. */
int store__alloc_is_reserved(struct store *s, uint32_t dev, uint64_t off, uint64_t *len);
void store__put_be32(unsigned char *p, uint32_t v);
void store__put_be64(unsigned char *p, uint64_t v);
uint32_t store__get_be32(const unsigned char *p);
uint64_t store__get_be64(const unsigned char *p);

/* store_uring.c: synchronous positional I/O through a per-thread io_uring
 * (pread/pwrite when io_uring is unavailable). Loops on short transfers.
 * @return 0, -EIO (or -errno). */
int store__io_read(int fd, void *buf, size_t len, uint64_t off);
int store__io_write(int fd, const void *buf, size_t len, uint64_t off);
/* store__io_write with pwrite, for a buffered fd: io_uring does not do a
 * buffered write inline, it hands it to a kernel worker thread (io-wq): a
 * hand-off per write and, measured here, about 10 % more CPU than pwrite. */
int store__io_pwrite(int fd, const void *buf, size_t len, uint64_t off);
/* store__io_write that calls @p fn(@p arg) into *@p out after submitting (before
 * waiting), or first when io_uring is not used. */
int store__io_write_during(int fd, const void *buf, size_t len, uint64_t off,
                           uint32_t (*fn)(void *arg), void *arg, uint32_t *out);
/* One read of a batch. */
struct store__io {
    int fd;
    void *buf;
    size_t len;
    uint64_t off;
};
/* Reads @p n requests, up to the ring's depth in one submission, and waits for
 * all of them (short reads are finished one by one); @p done (may be NULL) is
 * called for each as it completes. @return 0, -EIO, done's first nonzero. */
int store__io_read_batch(struct store__io *v, size_t n, int (*done)(void *arg, size_t idx),
                         void *arg);
/* Writes @p n requests with all of them in flight: @p prep(@p arg, i) (may be
 * NULL) runs just before request i is submitted (e.g. to fill its buffer),
 * then @p during(@p arg, i) (may be NULL) for every request while they are in
 * flight, then all are waited for (short writes are finished one by one).
 * Without io_uring (or past the ring's depth): during for all, then prep and
 * a pwrite for each. @return 0, -EIO. */
int store__io_write_batch(struct store__io *v, size_t n, void (*prep)(void *arg, size_t i),
                          void (*during)(void *arg, size_t i), void *arg);
/* Free scratch buffers the pool keeps for reuse; more are freed when given back. */
#define STORE_SCRATCH_KEEP 16
/* A STORE_EXTENT_MAX-byte, STORE_ALIGN-aligned scratch buffer for one I/O, from the
 * process-wide pool (or newly allocated); give it back with store__scratch_put().
 * @return the buffer, or NULL when out of memory. */
void *store__scratch_get(void);
/* Give back a buffer of store__scratch_get(): parked for reuse, or freed when the
 * pool already keeps STORE_SCRATCH_KEEP. NULL is ignored. */
void store__scratch_put(void *buf);
/* Scratch buffers allocated and not freed (handed out plus parked): for tests. */
size_t store__scratch_live(void);
/* Tests: 1 forces the pread/pwrite path, 0 allows io_uring again. */
void store__uring_disable(int disable);

/* store.c, tests: nonzero makes store_open skip O_DIRECT (the buffered path). */
extern int store__no_direct;
/* store.c, tests: the smallest growth step of a data file (default STORE_GROW_MIN). */
extern uint64_t store__grow_min;
/* store.c: grow a data file so that at least @p need more bytes are free, unless
 * the allocator's grow_gen moved past @p gen (another thread grew one: retry).
 * @return 0 (retry the allocation), -ENOSPC (every file at its limit, or the file
 * system full; logged once per file until a growth succeeds). */
int store__grow(struct store *s, uint64_t need, uint64_t gen);
/* store_alloc.c: add the free tail [from, to) of device @p dev that the map does
 * not cover yet (a growth). @return 0, -ENOMEM. */
int store__alloc_grown(struct store *s, uint32_t dev, uint64_t from, uint64_t to);

/* store.c: the space [off, off + len) of device @p dev, freed and seen by no
 * reader, is about to be free again: the forget callback lets go of what
 * keeps its pages (mappings), then its clean pages nobody holds leave the
 * page cache (POSIX_FADV_DONTNEED; a page a socket or pipe still holds
 * stays, and so do dirty ones). Called without a.mu. */
void store__drop_range(struct store *s, uint32_t dev, uint64_t off, uint64_t len);

/* store_crc32c.c: 0 forces the software CRC (tests); 1 restores auto-detection.
 * @return whether the hardware path is now used. */
int store__crc32c_hw(int enable);

/* A device's usable size now (it only grows, from any thread). */
static inline uint64_t store__dev_size(const struct store_dev *d)
{
    return __atomic_load_n(&d->size, __ATOMIC_ACQUIRE);
}

static inline uint64_t store__round_up(uint64_t v)
{
    return (v + STORE_ALIGN - 1) & ~(uint64_t)(STORE_ALIGN - 1);
}

#endif
