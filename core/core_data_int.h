/* SPDX-License-Identifier: Apache-2.0
 * core_data_int: the data sub-module of the core (the middle one, see
 * core_int.h): the extent maps of files and the store's side of each commit
 * (core_extent.c), reads, writes and truncation (core_data.c), pending
 * UNSTABLE writes and their flushes (core_pend.c), the verified-extent read
 * cache (core_cache.c) and zero-copy read pieces (core_zc.c). It may call the
 * quota sub-module, never the namespace one.
 * Thread: see each function. */
#ifndef CORE_DATA_INT_H
#define CORE_DATA_INT_H

#include "core_quota_int.h"

#define CORE_WLOCKS 64
#define CORE_PEND_SHARDS 64
#define CORE_PEND_INO_MAX (64ull << 20)   /* pending bytes of one inode before it is flushed */
#define CORE_PEND_TOTAL_MAX (1ull << 30)  /* pending bytes of all inodes before all are flushed */
#define CORE_MD5_INLINE_MAX (16ull << 20) /* files hashed while written (ETag known at commit) */
#define CORE_CACHE_BYTES (256ull << 20)

/* One extent of a file: [foff, foff + vlen) of the file is stored in e. */
struct core__fext {
    uint64_t foff;
    uint32_t vlen;
    uint32_t flags;                /* CORE_FX_* (pending extents) */
    struct store_extent e;
    uint32_t nb;                   /* block CRCs (0 = none loaded / known) */
    uint32_t bcrc[META_BCRC_MAX];
};
#define CORE_FX_FLUSHING 0x1 /* pending extent carried by a flush in flight */

struct core__fext_list {
    struct core__fext *v;
    size_t n, cap;
};

struct core__pend;
struct core__pshard {
    pthread_mutex_t mu;
    struct core__pend *head;
};

/* The sub-module's state (c->data). */
struct core__data {
    struct core__cache *cache;
    pthread_mutex_t wlock[CORE_WLOCKS]; /* writers that lost a race retry under these */
    /* pending (uncommitted UNSTABLE) writes, core_pend.c */
    struct core__pshard pend[CORE_PEND_SHARDS];
    atomic_uint_fast64_t pend_count;   /* inodes with a pending record */
    atomic_uint_fast64_t pend_total;   /* pending bytes not being flushed, all inodes */
    pthread_mutex_t dead_mu;
    uint64_t *dead;                    /* inodes whose data was dropped (see core__pend_dead) */
    size_t ndead, capdead;
    /* background flusher (inodes past CORE_PEND_INO_MAX) */
    pthread_mutex_t fl_mu;
    pthread_cond_t fl_cv;
    uint64_t fl_q[64];
    unsigned fl_n;
    bool fl_stop, fl_running;
    pthread_t fl_thread;
    /* versions (core_vdata.c) */
    atomic_bool shared; /* some extent may be held by several inodes (xref) */
    pthread_mutex_t vb_mu;
    uint64_t *vb; /* buckets that may have versioning or object lock */
    size_t nvb, capvb;
    atomic_uint nvb_any; /* nvb, read without the lock */
    struct core__tier *tier; /* eviction and recall (core_tier.c) */
};

/* ---- core_tier.c: eviction and recall of the remote tier ---- */
struct core__tier;
/** Set up / tear down c->data->tier (the recall threads stop). @return 0, -ENOMEM. */
int core__tier_init(struct core *c);
void core__tier_fini(struct core *c);
/** A read of file @p ino (for eviction by age). Cheap: a few atomics. */
void core__tier_note_read(struct core *c, uint64_t ino);
/** A recalled chunk's bytes kept in memory for the file's readers (core_tier.c): if
 * extent @p e (dev, offset, length and CRC) is one a recall wrote lately, a reference
 * to its bytes (*@p bytes: e->len of them, never changed while referenced), else NULL;
 * @p n: the bytes the caller will send from it (counted in the stats). Give it back
 * with core__tier_mem_put. Never blocks on I/O. */
void *core__tier_mem_get(struct core *c, const struct store_extent *e, uint64_t n,
                         const char **bytes);
/** Drop a reference core__tier_mem_get gave (any thread, a loop's included). */
void core__tier_mem_put(struct core *c, void *ref);
/** At a clean stop (core_close): write the reads this run saw into their files' tierst
 * records (read_s, raised only), so a restart loses none of them, not even those the
 * uploader's passes left for their grain. Files without a record are skipped. */
void core__tier_keep_reads(struct core *c);
/** Does the map of @p ino hold [lo, hi) without a gap (read txn @p t)? @return 0 or an error. */
int core__tier_resident(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi, bool *yes);
/** Evicted file @p ino (@p r, read outside any txn) is read at [lo, hi): join (or start) its
 * recall and wait until that range is in the map, at most the configured wait.
 * @return 0 (look again), -EWOULDBLOCK (@p nowait: nothing waited), SRV_ERECALL (not yet,
 * or the remote fails: retry later), SRV_EREMOTECHG, -EIO (the remote failed too long),
 * -ENOMEM. */
int core__tier_wait(struct core *c, uint64_t ino, const struct meta_inode *r, uint64_t lo,
                    uint64_t hi, bool nowait);
/** Start a background recall of the whole of evicted file @p ino (@p r, read outside any
 * txn) for a directory prefetch: its chunks go after those of every recall a reader waits
 * for, and a failure ends it. At most as many prefetches as GET slots (core_tier_config's
 * threads) run at once: waits up to @p wait_ms for one to end. Blocks (not on a loop).
 * @return 1 (started), 0 (a recall of the file runs already), -EBUSY (no slot within
 * @p wait_ms), SRV_ERECALL (no recall threads), -ENOMEM. */
int core__tier_prefetch(struct core *c, uint64_t ino, const struct meta_inode *r, uint32_t wait_ms);
/** Before a change of file @p ino's data: an evicted file is recalled whole first (waits
 * as core__tier_wait; with CORE_P_NOWAIT in @p p, -EWOULDBLOCK). @return 0 (local, or not
 * a regular file), or core__tier_wait's errors. */
int core__tier_local(struct core *c, const struct core_principal *p, uint64_t ino);
/** How long a remote may fail before the reads it would serve fail (core_tier_config's
 * fail_ms, tier_recall_fail_ms; 60000 before core_tier_start): a recall answers SRV_ERECALL
 * (retryable) until its remote has failed this long in a row, then -EIO; the imports of a
 * cache bucket's directories follow the same rule (core_cmode.c). */
uint32_t core__tier_fail_ms(struct core *c);
/** Does a recall keep the metadata its GETs' answers carry (core_tier_config.fetch_meta)
 * for a file of a cache bucket whose metadata was never asked? */
bool core__tier_gives_meta(struct core *c);

/* ---- core_extent.c: extent maps, the store's side of commits ---- */
/** Set up (c->data: pending records, read cache, write locks) / tear down the
 * sub-module's state. @return 0, -ENOMEM. */
int core__data_init(struct core *c);
void core__data_fini(struct core *c);
/** At open, once the store is open: give a new store (or new devices) their free
 * map, in a write txn of its own, and set meta's commit hooks that keep the
 * store's free map and limbo in step with each group commit.
 * @return 0, -ENOSPC, -EIO, -ENOMEM. */
int core__data_wire(struct core *c);
int core__fext_push(struct core__fext_list *l, const struct core__fext *x);
/** Pending extents @p pend (sorted) and the committed extents @p com they do not
 * shadow (the overlay rule of core_pend.c), in file order, into @p out.
 * @return 0, -ENOMEM. */
int core__fext_merge(const struct core__fext_list *pend, const struct core__fext_list *com,
                     struct core__fext_list *out);
/** Committed extents of @p ino overlapping [lo, hi), in file order (@p out is reset). */
int core__overlaps(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                   struct core__fext_list *out, bool want_crc);
/* What an op notes for the commit hooks (meta_txn_note): a struct store_extent
 * that becomes used, or free, when its batch commits. */
#define CORE_NOTE_USE 1
#define CORE_NOTE_FREE 2
/** In op txn @p t, an inode lets go of extent @p e: when it was the last holder (an
 * extent shared by versions has several, xref), record its free (and drop its block
 * CRCs and its cached bytes); otherwise count one holder less.
 * @return 0 (freed), 1 (still held by another inode: its bytes stay used), or an error. */
int core__extent_free(struct core *c, struct meta_txn *t, const struct store_extent *e);
/** Record reserved @p e as used in op txn @p t, with its block CRCs (may be NULL). */
int core__extent_use(struct meta_txn *t, const struct store_extent *e, const uint32_t *bcrc,
                     uint32_t nb);
/** CRC32C of each META_BCRC_BLOCK of @p buf into @p out. @return block count. */
uint32_t core__bcrc_compute(const void *buf, uint32_t len, uint32_t *out);
/** Block CRCs of @p e into @p out (META_BCRC_MAX). @return count, 0 when none. */
uint32_t core__bcrc_get(struct meta_txn *t, const struct store_extent *e, uint32_t *out);
/** Free all data of @p ino (extents via the store limbo, inline bytes).
 * @param[out] kept bytes of its extents other inodes still hold (NULL: not asked).
 * @return 0 or a meta error. */
int core__data_drop(struct core *c, struct meta_txn *t, uint64_t ino, uint64_t *kept);
/** Inside an op: note file @p ino (its inode @p r, as the op writes it back) for the
 * background worker with @p flags (META_DIRTY_*: added to those noted already), as
 * changed now. @return 0, -ENOSPC, -EIO. */
int core__dirty_note(struct meta_txn *t, uint64_t ino, const struct meta_inode *r, uint32_t flags);
/** Inside an op: @p flags of file @p ino's note are done (the note goes with its last
 * flag). @return 0, -ENOSPC, -EIO. */
int core__dirty_clear(struct meta_txn *t, uint64_t ino, uint32_t flags);
/** The inline bytes of @p ino, borrowed from @p t (length 0 when it has none).
 * @return 0 or a meta error. */
int core__inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len);

/* ---- core_vdata.c: the data side of versions ----
 * Versions of a file changed in place over NFS share the extents the change
 * did not touch: a clone copies the extent map (not the data) and counts one
 * more holder of each extent (xref); core__extent_free frees an extent only
 * when its last holder lets go. Store space (tenant and bucket usage) counts
 * an extent once; an inode's `used` and directory usage count what its map
 * holds. The versioned-bucket set remembers, in memory, every bucket that
 * may have versioning or object lock (a superset: marked before the op that
 * enables it commits, loaded at open), so paths of other buckets skip all
 * version work. */
/** Load the set and whether extents are shared, at open. @return 0 or a meta error. */
int core__vdata_load(struct core *c);
void core__vdata_fini(struct core *c);
/** Mark @p bucket (before an op that may enable versioning or lock on it). @return 0, -ENOMEM. */
int core__vb_mark(struct core *c, uint64_t bucket);
/** Whether @p bucket may have versioning or object lock (false: certainly not). */
bool core__vb_maybe(struct core *c, uint64_t bucket);
/** Whether a change of file @p r's data must first go through the namespace's
 * version step (core__ver_open_t): its content is a sealed version, it may be
 * locked, or it lies in a versioned bucket without a version of its own (read txn @p t). */
bool core__ver_guard(struct core *c, struct meta_txn *t, const struct meta_inode *r);
#define CORE__EVGUARD                                                                              \
    (-20900) /* core-internal: core__ver_guard said so (never returned                             \
              * by a public call) */
/** In an op: give inode @p to a copy of @p from's data: its extent map (each extent
 * held once more) or its inline bytes (copied). @param[out] copied bytes of new store
 * space that takes (inline bytes). @return 0 or a meta error. */
int core__data_clone(struct core *c, struct meta_txn *t, uint64_t from, uint64_t to,
                     uint64_t *copied);

/* ---- core_data.c: reads, writes, truncation ---- */
struct core__pend_batch;
/* A shrinking truncate cuts the extent holding the new end: a copy of its
 * first (new size - foff) bytes replaces it, so the space past the end is freed. */
struct core__cut {
    bool made;                     /* cut holds a reserved, written, synced extent */
    bool used;                     /* the op committed it (else the caller unreserves it) */
    struct core__fext old;         /* the extent it replaces */
    struct core__fext cut;
};
/** Caller thread, while holding the inode exclusively (core__pend_excl_begin):
 * prepare the cut for truncating to @p newsize with pending batch @p b applied.
 * Nothing to cut leaves cut->made false. @return 0, -ENOSPC, -EIO, SRV_ECORRUPT. */
int core__truncate_plan(struct core *c, uint64_t ino, uint64_t newsize,
                        const struct core__pend_batch *b, struct core__cut *cut);
/** Inside setattr's op: truncate @p ino (its inode @p r, written back by the caller) to
 * @p newsize, freeing the extents past it and swapping in @p cut (may be NULL) for
 * the one holding the new end. @return 0 or a meta / store error. */
int core__truncate_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                     uint64_t newsize, struct core__cut *cut);
/** core_write (core.h) of the data sub-module: answers CORE__EVGUARD, having written
 * nothing, when core__ver_guard says the file needs the namespace's version step first
 * (the public core_write, core_posix.c, takes it and tries again). */
int core__write(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                const void *buf, size_t len, enum core_stable stable, enum core_stable *committed,
                struct core_attr *pre, struct core_attr *post);
/** Inside an op: commit pending data @p b into inode @p r (caller writes r back). */
int core__pend_apply_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                       const struct core__pend_batch *b);

/* ---- core_cache.c: verified-extent read cache ---- */
int core__cache_init(struct core *c, uint64_t bytes);
void core__cache_fini(struct core *c);
/** Epoch to pass to core__extent_read; take it before reading the extent map. */
uint64_t core__cache_epoch(struct core *c);
/** Extent @p e was just written: if it was through the page cache
 * (STORE_X_CACHED), remember it as verified for zero-copy reads (core_zc.c),
 * then start its writeback. A no-op for O_DIRECT writes. */
void core__zc_written(struct core *c, const struct store_extent *e);
/** store_forget_fn (store_set_forget, arg the core): the extent that began at
 * (@p dev, @p off) was freed and nobody can read it any more: its remembered
 * mapping (core_zc.c) is let go, so that the store can drop its pages from
 * the page cache and the space is written through the page cache again. */
void core__zc_forget(void *arg, uint32_t dev, uint64_t off, uint64_t len);
/** Drop a freed extent from the cache (called wherever an extent is freed). */
void core__cache_invalidate(struct core *c, const struct store_extent *x);
/** store_read through the cache. @return as store_read. */
int core__extent_read(struct core *c, const struct store_extent *x, uint32_t from, void *buf,
                      size_t len, uint64_t epoch);
/** CRC32C of the @p len bytes whose @p nb block CRCs are @p bcrc. */
uint32_t core__bcrc_whole(const uint32_t *bcrc, uint32_t nb, uint32_t len);
/** Check blocks @p b0..@p b1 of @p e, whose bytes start at @p data (block b0).
 * @return 0, SRV_ECORRUPT (logged, counted). */
int core__bcrc_verify(struct core *c, const struct store_extent *e, const uint32_t *bcrc,
                      uint32_t b0, uint32_t b1, const void *data);
/** Read [from, from + len) of extent @p e: with block CRCs through the store's
 * buffered fd, verifying only the blocks touched; else core__extent_read.
 * @return 0, -EIO, SRV_ECORRUPT (logged, counted). */
int core__extent_pread(struct core *c, const struct store_extent *e, const uint32_t *bcrc,
                       uint32_t nb, uint32_t from, void *buf, size_t len, uint64_t epoch);

/* ---- core_pend.c: pending UNSTABLE writes ----
 * Per inode, in memory: extents written but not committed (an overlay on the
 * committed extent map), or pending inline bytes; the size, mtime and change
 * they imply. See core_pend.c for the rules. */
struct core__pend_snap {
    bool exists;                   /* the inode has a pending record */
    bool has_ext;                  /* ... holding extents (committed inline data is shadowed) */
    uint64_t size;                 /* largest end written since the last setattr */
    struct timespec mtime;
    uint64_t change;
    char *inl;                     /* pending inline content (heap) or NULL */
    size_t inl_len;
    struct core__fext_list ext;    /* pending extents overlapping the range asked */
    bool data;                     /* pending data (extents or inline bytes) existed */
    int64_t udelta;                /* usage change it will make when committed */
    uint64_t ver, cver, tver;      /* versions at the snapshot */
};
void core__pend_init(struct core *c);
void core__pend_fini(struct core *c);
/** Get (optionally create) the record of @p ino with a use count; NULL if none. */
struct core__pend *core__pend_get(struct core *c, uint64_t ino, bool create);
void core__pend_put(struct core *c, struct core__pend *p);
/** Snapshot of @p p (may be NULL): extents overlapping [lo, hi), inline bytes.
 * Waits while a setattr holds the record exclusively when @p wait_excl. */
void core__pend_snap(struct core__pend *p, uint64_t lo, uint64_t hi, bool wait_excl,
                     struct core__pend_snap *s);
void core__pend_snap_free(struct core__pend_snap *s);
/** After the read txn began: no setattr committed since the snapshot (else
 * the snapshot and the txn may not fit together: take both again). */
bool core__pend_snap_valid(struct core__pend *p, const struct core__pend_snap *s);
/* Open a consistent read view of regular file @p ino for [off, off+len): a
 * snapshot of its pending (uncommitted UNSTABLE) bytes that is still valid
 * once the read txn is open, the txn, and the inode, checked readable by @p p.
 * @p ps must be zeroed first; whatever the result, the caller releases @p ps
 * (core__pend_snap_free) and @p *t (meta_rtxn_end).
 * With CORE_P_NOWAIT in @p p, -EWOULDBLOCK instead of waiting for a setattr.
 * @return 0, -ENOMEM, -EISDIR, -EINVAL (not a regular file), -EACCES,
 *         SRV_ESTALE, -EWOULDBLOCK, meta errors. */
int core__read_view(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                    uint64_t len, struct core__pend_snap *ps, struct meta_txn **t,
                    struct meta_inode *r);
/** Under p->mu: recompute p->udelta against the committed state. */
void core__pend_udelta(struct core *c, struct core__pend *p);
/** Whether any inode has pending writes. */
static inline bool core__pend_any(struct core *c)
{
    return atomic_load(&c->data->pend_count) != 0;
}
/** Whether @p ino has pending data (extents or inline bytes). */
bool core__pend_has_data(struct core *c, uint64_t ino);
/** Inodes of @p tenant's @p bucket with pending data, into a heap array @p *out (free
 * it). @return how many. */
size_t core__pend_bucket_inos(struct core *c, uint32_t tenant, uint64_t bucket, uint64_t **out);
/** Merge pending size/mtime/change of ino out->ino into @p out. */
void core__attr_pend(struct core *c, struct core_attr *out);
/** Write all pending data of @p p and commit it in one op; durable on return.
 * @return 0, SRV_ESTALE (inode gone: pending data dropped), -EIO, -ENOSPC. */
int core__pend_flush(struct core *c, struct core__pend *p);
/** core__pend_flush for a client's COMMIT: also records that the writer acknowledged
 * every write so far (core_pending_writes stops reporting them). */
int core__pend_commit(struct core *c, struct core__pend *p);
/** core__pend_flush of inode @p ino's pending data, if any (an inode gone meanwhile
 * had nothing left to commit: 0). @return 0, -EIO, -ENOSPC. */
int core__pend_flush_ino(struct core *c, uint64_t ino);
/** Queue @p ino for the background flusher (no-op when queued or the queue is full). */
void core__pend_flush_async(struct core *c, uint64_t ino);
/** Start / stop (after draining its queue) the background flusher. */
int core__pend_flusher_start(struct core *c);
void core__pend_flusher_stop(struct core *c);
/** Flush every inode's pending data. @return first error. */
int core__pend_flush_all(struct core *c);
/** Inside a writer op: the data of @p ino is being dropped (inode released). */
void core__pend_dead(struct core *c, uint64_t ino);
/** After an op that may have released inodes: drop pending data of inodes gone. */
void core__pend_reap(struct core *c);
/* The pending data one flush (or one setattr) commits. */
struct core__pend_batch {
    struct core__fext_list ext;    /* all pending extents at the snapshot */
    char *inl;                     /* pending inline content, or NULL */
    size_t inl_len;
    uint64_t inl_ver;
    uint64_t size, change;
    struct timespec mtime;
    bool md5_ok;                   /* written sequentially from 0: md5 is the content's */
    char md5[33];
};
void core__pend_batch_free(struct core__pend_batch *b);
/** Exclusive use (setattr): waits for flushes, blocks pending inserts until
 * core__pend_excl_end; @p b gets every pending change, for the op to apply. */
int core__pend_excl_begin(struct core *c, uint64_t ino, struct core__pend_batch *b,
                          struct core__pend **out);
/** @p rc: result of the op that applied @p b (0: committed, pending state reset);
 * @p size_set, @p size: the op set the file size to @p size. */
void core__pend_excl_end(struct core *c, struct core__pend *p, struct core__pend_batch *b, int rc,
                         bool size_set, uint64_t size);

/* The record itself (fields under mu unless noted). Extents are sorted by
 * foff and never overlap; a committed extent is either wholly shadowed by
 * pending extents or overlaps none. */
struct core__pend {
    uint64_t ino;
    struct core__pend *next;       /* shard chain (shard mu) */
    uint32_t users;                /* shard mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;             /* flushing / excl cleared */
    bool dead, flushing, excl;
    uint64_t ver;                  /* bumped by every pending change */
    uint64_t acked;                /* ver a client's COMMIT (core_commit) covered last */
    uint64_t cver;                 /* bumped by every committed change (flush, setattr) */
    uint64_t tver;                 /* bumped by every setattr */
    struct core__fext_list ext;
    char *inl;                     /* pending inline content (file inline, no extents) */
    size_t inl_len;
    uint64_t inl_ver;
    uint64_t size;                 /* largest end written since the last setattr */
    struct timespec mtime;
    uint64_t change;
    uint64_t bytes;                /* store bytes of ext */
    int64_t udelta;                /* usage change committing the pending data will make */
    uint32_t tenant;               /* of the inode (usage attribution) */
    uint64_t bucket;
    uint64_t unfl;                 /* ... of entries no flush carries */
    /* incremental MD5 while the file is written sequentially from offset 0 */
    void *md5ctx;                  /* EVP_MD_CTX or NULL */
    uint64_t md5_end;              /* bytes hashed */
    bool md5_bad;                  /* written out of order: no MD5 */
    bool md5_kept;                 /* counted among the records kept for their MD5 */
    struct core__resv resv;        /* max(0, udelta), reserved against the byte limits */
};
/** Release a pending extent nobody will commit (through the store limbo). */
void core__pend_release(struct core *c, struct core__fext *x);

#endif
