/* SPDX-License-Identifier: Apache-2.0
 * store: extents on local NVMe (preallocated data files or whole block
 * devices), an extent allocator, and the io_uring data path.
 *
 * Space has three states: free, reserved (handed out by store_alloc, not yet
 * committed) and used. The persistent free-space map, (dev, offset) -> length
 * records, lives in the metadata store of the layer above, behind struct
 * store_map (meta/meta_free.c keeps it in the "free" table, see
 * meta_schema.h); the in-memory allocator is rebuilt from it at open, so space
 * reserved by writes that never committed is free again after a restart.
 * Changes to the persistent map are made in the caller's write transaction
 * through a struct store_txn (store_txn_*()), so an extent becomes used in the
 * same transaction as the metadata that points at it; the caller tells the
 * store how that transaction ended (store_txn_done). The store never sees the
 * metadata engine.
 *
 * Freed extents are not reusable at once: they pass through a limbo tagged
 * with the current read epoch and become allocatable only when every reader
 * that started before the free has finished (store_read_begin/end), so a
 * reader holding an old extent map never sees another file's bytes. With
 * write_cache, a freed extent then has its page-cache pages dropped (the
 * forget callback, POSIX_FADV_DONTNEED; see store_set_forget) on the next
 * allocating thread before its space is allocatable, so a write that reuses
 * it can go through the page cache (store_write).
 *
 * Every extent carries a CRC32C of its bytes (kept by the caller in the
 * extent map); store_read checks it and answers SRV_ECORRUPT on mismatch,
 * counting it. I/O uses io_uring with O_DIRECT when buffer, offset and length
 * are aligned to STORE_ALIGN, else a bounce buffer.
 * Thread: all calls are thread-safe. */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ALIGN 4096u
#define STORE_EXTENT_MAX (1u << 20) /* 1 MiB: the largest single extent */

struct store;
struct store_txn;

struct store_extent {
    uint32_t dev;    /* data file / device index */
    uint32_t len;    /* bytes of data (<= STORE_EXTENT_MAX) */
    uint64_t off;    /* byte offset in the device, STORE_ALIGN-aligned */
    uint32_t crc;    /* CRC32C of the len data bytes */
    uint32_t flags;  /* STORE_X_*, set by the write that made it (not persisted) */
};
/* The write went through the page cache (store_config.write_cache): its bytes
 * are cached, in dirty pages until store_writeback(). */
#define STORE_X_CACHED 0x1u

struct store_config {
    const char *dir;               /* data files are dir/data.NNN */
    uint64_t file_size;            /* most bytes per data file (files grow up to it) */
    uint64_t file_initial;         /* bytes a data file has at least from open (preallocated);
                                    * 0: file_size (no growth while under it) */
    uint32_t nfiles;
    const char *const *devices;    /* NULL-terminated block devices instead of files, or
                                    * NULL; when set, dir/file_size/nfiles are ignored */
    bool write_cache;              /* write through the page cache (buffered pwrite; see
                                    * store_writeback) instead of O_DIRECT when no other
                                    * such write is under way on the device (the file
                                    * system serializes them): the bytes stay cached for
                                    * a first read (STORE_X_CACHED); durable at store_sync() */
};

/* One record of the persistent free map (found = 0: none). */
struct store_map_rec {
    int found;
    uint32_t dev;
    uint64_t off, len;
};

/* The persistent free map inside one transaction of the metadata store: @c txn is
 * that store's (opaque here); the functions read and change records in it. Each
 * returns 0 or a negative error: -ENOSPC (metadata store full), -EIO, SRV_ECORRUPT
 * (a malformed record; logged). */
struct store_map {
    void *txn;
    /** The records just below and at or above (@p dev, @p off) in (dev, off) order. */
    int (*near)(void *txn, uint32_t dev, uint64_t off, struct store_map_rec *below,
                struct store_map_rec *above);
    /** Put record (@p dev, @p off) -> @p len (replacing one with that key). */
    int (*put)(void *txn, uint32_t dev, uint64_t off, uint64_t len);
    /** Delete record (@p dev, @p off) (-EIO when missing). */
    int (*del)(void *txn, uint32_t dev, uint64_t off);
    /** The records from (@p dev, @p off) on, in (dev, off) order, until @p cb returns
     * nonzero (then its result). */
    int (*scan)(void *txn, uint32_t dev, uint64_t off,
                int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len), void *arg);
};

/** The free ranges of map @p map (not its other records), in (dev, off) order, to @p cb
 * until it returns nonzero (then its result). For checks of a store's consistency.
 * @return 0, the callback's result, or the map's error. */
int store_map_free_ranges(const struct store_map *map,
                          int (*cb)(void *arg, uint32_t dev, uint64_t off, uint64_t len),
                          void *arg);

/** Open data files/devices, creating missing files, and rebuild the allocator
 * from the free map @p map (over a read or write txn).
 * Data files start at cfg->file_initial bytes (preallocated) and grow on
 * demand up to cfg->file_size in steps (max(STORE_GROW_MIN, 1/8 of the file),
 * fallocate + fsync) when no free range fits an allocation; a file already
 * larger than the limit keeps its size. Raising file_size or file_initial on an
 * existing store adds the space (at once for file_initial, on demand for
 * file_size). Space the map does not cover yet (a new store, new devices, a
 * growth) is free at once in memory; store_txn_init, or the next store_txn_use,
 * records it. The map records the device count: fewer devices than recorded
 * is refused.
 * @return 0, -ENOSPC (cannot preallocate file_initial; logged with the file
 * system's free space), -EINVAL (bad config, device count changed or a block
 * device shrank, not a file/block device), SRV_ECORRUPT (malformed free map),
 * SRV_EBADVERSION, -ENOMEM, -EIO (fsync), -errno from open(). */
int store_open(struct store **out, const struct store_config *cfg, const struct store_map *map);
/** True when the free map lacks space the store has (a new store, new devices,
 * files grown at open, a version 1 map) and store_txn_init should run. */
int store_needs_init(struct store *s);

/** Begin the store's part of one write transaction of the metadata store, whose free
 * map @p map (copied) is: every store_txn_* call records in it, and store_txn_done
 * (exactly once) tells how the transaction ended and frees @p *out.
 * @return 0, -ENOMEM. */
int store_txn_begin(struct store *s, const struct store_map *map, struct store_txn **out);
/** Record in the transaction what the map lacks: the free ranges of space added
 * since it was written (new devices, growths), the size records and the marker.
 * The allocator already uses that space; if the transaction aborts, a later one
 * records it. @return 0, -EINVAL, SRV_ECORRUPT (map overlaps the new space),
 * -ENOSPC (metadata full), -EIO, -ENOMEM. */
int store_txn_init(struct store_txn *st);
void store_close(struct store *s);

/** Reserve @p len bytes (rounded up to STORE_ALIGN) as one extent of at most
 * STORE_EXTENT_MAX. Continues after this thread's previous extent when that
 * space is free, else takes the smallest free range that fits, else grows a
 * data file (see store_open) and takes space there.
 * @return 0, -ENOSPC (no free range is large enough and no file can grow: all
 * at their limit, or the file system is full), -EINVAL (len 0 or
 * > STORE_EXTENT_MAX), -ENOMEM. */
int store_alloc(struct store *s, uint32_t len, struct store_extent *out);
/** Like store_alloc, but first tries the space right after @p prev (the
 * file's previous extent; may be NULL) so a file written by several threads
 * stays contiguous. @return as store_alloc. */
int store_alloc_near(struct store *s, const struct store_extent *prev, uint32_t len,
                     struct store_extent *out);
/** Give back a reservation that will never be committed. */
void store_unreserve(struct store *s, const struct store_extent *e);
/** Give back a reservation that readers may still be reading (its bytes were
 * visible, e.g. an uncommitted write that a later one replaced): it passes
 * through the limbo like a committed free, so it is reused only after every
 * reader that started before this call has finished. */
void store_release(struct store *s, const struct store_extent *e);
/** In the transaction: mark reserved extent @p e used in the persistent map (after
 * recording, as store_txn_init, space the map lacks). If the txn aborts, @p e
 * stays reserved (store_unreserve it or use it again).
 * @return 0, -EINVAL (not a reservation), SRV_ECORRUPT (not free in the map),
 * -ENOSPC (metadata full), -EIO, -ENOMEM. */
int store_txn_use(struct store_txn *st, const struct store_extent *e);
/** In the transaction: mark used extent @p e free in the persistent map; it enters
 * the limbo when store_txn_done() reports the txn committed.
 * @return 0, -EINVAL (outside the devices), SRV_ECORRUPT (already free: a
 * double free), -ENOSPC (metadata full), -EIO, -ENOMEM. */
int store_txn_free(struct store_txn *st, const struct store_extent *e);
/** After the transaction committed (ok=1) or aborted (ok=0): move its frees to the
 * limbo, its uses to used space, what it recorded of grown space to the recorded
 * sizes, or forget them; frees @p st. Safe on NULL. */
void store_txn_done(struct store_txn *st, int ok);

/** Write @p len bytes at extent @p e (e->len = len; computes e->crc). Data is
 * not durable until store_sync(). A reserved extent may be written shorter
 * than it was reserved: the unused tail is given back. A committed extent may
 * be rewritten in place only with the same rounded size.
 * @return 0, -EIO, -EINVAL (does not fit), -ENOMEM. */
int store_write(struct store *s, struct store_extent *e, const void *buf, size_t len);
/** store_write with the CRC32C of the @p len bytes already known (e.g. combined
 * from block CRCs the caller computed): the data is not read again. */
int store_write_crc(struct store *s, struct store_extent *e, const void *buf, size_t len,
                    uint32_t crc);
/** store_write whose CRC32C is returned by @p crc_fn(@p arg), called once
 * while the write is in flight (so checksumming overlaps the I/O); @p buf
 * must not change until the call returns. */
int store_write_cb(struct store *s, struct store_extent *e, const void *buf, size_t len,
                   uint32_t (*crc_fn)(void *arg), void *arg);
/* One write of store_write_batch. */
struct store_wreq {
    struct store_extent *e;  /* reserved by store_alloc*; e->len and e->crc set on success */
    const void *buf;         /* must not change until the call returns */
    size_t len;              /* 1 .. STORE_EXTENT_MAX */
};
#define STORE_WBATCH_MAX 4
/** Write @p n (1 .. STORE_WBATCH_MAX) reserved extents back to back with all of
 * them in flight at once: each is submitted as soon as its bytes are ready
 * (copied first into one of the calling thread's aligned staging buffers when
 * O_DIRECT needs it), then @p crc_fn(@p arg, i) is called for each while the
 * writes are in flight and returns the CRC32C of request i's bytes. Not
 * durable until store_sync(). On error the extents' contents are undefined
 * (the caller gives them back with store_unreserve).
 * @return 0, -EINVAL (not a reservation, too long), -EIO, -ENOMEM. */
int store_write_batch(struct store *s, struct store_wreq *v, size_t n,
                      uint32_t (*crc_fn)(void *arg, size_t i), void *arg);
/** store_write_batch always with O_DIRECT (store_config.write_cache does not apply):
 * for a writer whose first readers take the bytes from its own memory (the tier's
 * recall), so that a copy into the page cache would be paid for nothing. */
int store_write_batch_direct(struct store *s, struct store_wreq *v, size_t n,
                             uint32_t (*crc_fn)(void *arg, size_t i), void *arg);
/** Start writing back the cached bytes of extent @p e, just written through the
 * page cache (STORE_X_CACHED; a no-op otherwise): store_sync() then mostly waits
 * for I/O already under way instead of starting it. A hint: durable only at
 * store_sync(). */
void store_writeback(struct store *s, const struct store_extent *e);
/** Flush data files to stable storage (fdatasync each dirty one). A failed
 * fdatasync ends the process (SRV_FATAL): the kernel may have dropped the
 * pages it could not write and reports that only once. @return 0, -EINVAL. */
int store_sync(struct store *s);
/** Read extent bytes [from, from+len) into @p buf, verifying the whole
 * extent's CRC (reads the whole extent). @return 0, -EIO, SRV_ECORRUPT (logged,
 * counted; @p buf holds no extent bytes), -EINVAL (range outside the extent),
 * -ENOMEM. */
int store_read(struct store *s, const struct store_extent *e, uint32_t from, void *buf,
               size_t len);

/** One range of a batched direct read: bytes [from, from + len) of extent @p e
 * into @p buf. from, len and buf are STORE_ALIGN-aligned; len may run past
 * e->len up to its STORE_ALIGN-rounded size (the padding reads as zeros). */
struct store_rreq {
    const struct store_extent *e;
    uint32_t from;
    uint32_t len;
    void *buf;
};
/** Read @p n ranges with O_DIRECT (buffered on devices that refused it), all
 * submitted in one io_uring batch; no CRC check: the caller verifies (e.g.
 * with block CRCs), best in @p done (may be NULL), called with the range's
 * index as each one has arrived while the others are still in flight; the
 * batch still waits for every range. @return 0, the first nonzero result of
 * @p done, -EINVAL (unaligned, outside the extent), -EIO, -ENOMEM. */
typedef int (*store_rdone_fn)(void *arg, size_t idx);
int store_read_direct(struct store *s, const struct store_rreq *r, size_t n, store_rdone_fn done,
                      void *arg);

/** Epoch-based reader protection (see header). Call before opening the
 * read txn whose extent map will be read. @return a token for store_read_end. */
uint64_t store_read_begin(struct store *s);
void store_read_end(struct store *s, uint64_t token);

/** Called by the store for the space [@p off, @p off + @p len) of device @p dev
 * that a freed extent had, once no reader can see it any more (it left the
 * limbo) and before it can be allocated again, on a thread that allocates:
 * the caller drops whatever keeps that space's page-cache pages in use (a
 * mapping of the extent), so that the store can drop them from the page
 * cache and the space is written through the page cache again when reused
 * (store_config.write_cache). Must not call into the store's allocator. */
typedef void (*store_forget_fn)(void *arg, uint32_t dev, uint64_t off, uint64_t len);
/** Set the forget callback (before the store is used; NULL: none). */
void store_set_forget(struct store *s, store_forget_fn fn, void *arg);

/** Device fd of an extent (buffered, for sendfile at offset e->off; caller
 * checks CRC policy). The fd belongs to the store and stays open until
 * store_close: dup() it before handing it to anything that closes it (e.g.
 * evbuffer file segments). @return fd, -EINVAL. */
int store_extent_fd(struct store *s, const struct store_extent *e);

struct store_stats {
    uint64_t capacity;        /* bytes the data files/devices have now */
    uint64_t limit;           /* bytes they may grow to (>= capacity) */
    uint64_t free, reserved, limbo;
    uint64_t fs_size, fs_free; /* the file system holding the data files (0 for devices) */
    uint64_t crc_errors, bytes_read, bytes_written;
    uint64_t cached_writes; /* writes through the page cache (store_config.write_cache) */
    uint64_t cached_zeroed; /* ... of which zeroed their range first (some of it was cached;
                             * only on a device without O_DIRECT, else they go direct) */
    uint64_t direct_writes; /* writes with O_DIRECT */
    uint64_t cached_dropped; /* cached writes whose range had pages in the page cache that
                              * POSIX_FADV_DONTNEED dropped first (also in cached_writes) */
    uint64_t freed_dropped;  /* freed extents whose pages were dropped from the page cache
                              * before their space was allocated again (write_cache only) */
};
void store_stats_get(struct store *s, struct store_stats *out);

/** CRC32C (Castagnoli) of @p buf, continuing from @p crc (0 to start). */
uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len);
/** CRC32C of A || B from @p crc1 = CRC of A, @p crc2 = CRC of B and B's length
 * (fast for 16 KiB, a few µs for other lengths). */
uint32_t store_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2);

#endif
