/* SPDX-License-Identifier: Apache-2.0
 * core_int: private declarations shared by the core's files. Nothing outside
 * core/ may include this header.
 *
 * Helpers that take a struct meta_txn use the caller's txn (read or write) and
 * never commit; write helpers run only inside writer ops (meta_submit).
 * Thread: any thread that holds a txn. */
#ifndef CORE_INT_H
#define CORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "meta.h"
#include "meta_dirent.h"
#include "meta_extent.h"
#include "meta_free.h"
#include "meta_inode.h"
#include "meta_keyidx.h"
#include "meta_mpu.h"
#include "meta_usage.h"
#include "store.h"

_Static_assert(CORE_NAME_MAX == META_NAME_MAX, "names: core and meta agree");
_Static_assert(CORE_KEY_MAX == META_KEY_MAX, "keys: core and meta agree");
_Static_assert(CORE_ETAG_MAX == META_ETAG_MAX, "ETags: core and meta agree");

#define CORE_FILE_MAX (1ull << 50) /* largest file offset accepted (-EFBIG beyond) */
#define CORE_SYMLINK_MAX 4096
#define CORE_MAY_R 4
#define CORE_MAY_W 2
#define CORE_MAY_X 1

struct core__ref {
    uint64_t ino;
    uint32_t count;
    struct core__ref *next;
};
#define CORE_REF_BUCKETS 1024
#define CORE_WLOCKS 64
#define CORE_PEND_SHARDS 64
#define CORE_PEND_INO_MAX (64ull << 20)   /* pending bytes of one inode before it is flushed */
#define CORE_PEND_TOTAL_MAX (1ull << 30)  /* pending bytes of all inodes before all are flushed */
#define CORE_MD5_INLINE_MAX (16ull << 20) /* files hashed while written (ETag known at commit) */

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
int core__fext_push(struct core__fext_list *l, const struct core__fext *x);
/** Pending extents @p pend (sorted) and the committed extents @p com they do not
 * shadow (the overlay rule of core_pend.c), in file order, into @p out.
 * @return 0, -ENOMEM. */
int core__fext_merge(const struct core__fext_list *pend, const struct core__fext_list *com,
                     struct core__fext_list *out);

/* A holder's byte reservation (core_quota.c): the usage records with a byte
 * limit it counts against (key 0 = the tenant, else a bucket or directory
 * inode; each key pinned in the table while held) and the bytes it holds.
 * The first CORE_RESV_KEYS keys live inline, any more in @c more (heap, owned
 * by the holder, freed when it holds nothing: n == 0 implies more == NULL). */
#define CORE_RESV_KEYS 8
struct core__resv {
    uint32_t tenant;
    uint32_t n;
    uint64_t key[CORE_RESV_KEYS];
    uint64_t *more; /* keys n >= CORE_RESV_KEYS */
    uint64_t bytes;
};
/* One usage record's reservations, in the table (resv_mu). */
struct core__rent {
    uint32_t tenant;
    uint32_t holders;
    uint64_t ino;
    uint64_t bytes;
    struct core__rent *next;
};
#define CORE_RESV_BUCKETS 256

/* Cross-directory renames while directory quotas exist (core_quota.c): a
 * rename marks its bucket's slot busy from before it commits the pending
 * writes it moves until its op committed; a write admitted meanwhile on its
 * file's old chain re-reserves on the new one before it becomes pending. */
#define CORE_MV_SLOTS 64
struct core__mvslot {
    uint32_t busy;                 /* renames of buckets of this slot in progress */
    uint64_t gen;                  /* bumped as each starts and ends */
};
/* What a write saw of those renames before it read its file's chain. */
struct core__mvtok {
    uint64_t gen;                  /* c->mv_gen */
    bool slot;                     /* sgen is set (the write followed a rename) */
    uint64_t sgen;                 /* its bucket's slot gen */
};
/* A rename's mark (core__quota_rename_begin / _end). */
struct core__mv {
    bool on;
    uint32_t slot;
    uint32_t tenant;
    uint64_t bucket;
};

struct core__pend;
struct core__pshard {
    pthread_mutex_t mu;
    struct core__pend *head;
};

struct core {
    struct core_config cfg;
    char *data_dir;
    struct meta_env *meta;
    struct store *store;
    uint64_t verifier;

    pthread_mutex_t ref_mu;
    struct core__ref *refs[CORE_REF_BUCKETS];

    struct core__cache *cache;
    pthread_mutex_t wlock[CORE_WLOCKS]; /* writers that lost a race retry under these */
    atomic_uint_fast64_t bytes_written, bytes_read, crc_errors;
    atomic_uint ndirquota; /* directory quota records (0: skip the parent walk) */
    pthread_mutex_t resv_mu; /* byte reservations (core_quota.c); a leaf lock */
    struct core__rent *resv[CORE_RESV_BUCKETS];
    /* cross-directory renames in progress (core_quota.c) */
    atomic_uint_fast64_t mv_gen; /* bumped as one starts and as one ends */
    atomic_uint mv_busy;         /* how many */
    pthread_mutex_t mv_mu;       /* mv_slot; may be taken under a pend record's mu */
    pthread_cond_t mv_cv;        /* a slot went idle */
    struct core__mvslot mv_slot[CORE_MV_SLOTS];

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
};

/* ---- core_txn.c: records ---- */
void core__now(struct timespec *ts);
/** Inode for principal access: SRV_ESTALE when missing or another tenant's or wrong gen. */
int core__ino_get_p(struct meta_txn *t, const struct core_principal *p, uint64_t ino,
                    uint32_t gen, struct meta_inode *out);
/** Directory @p dir for principal access (core__ino_get_p with gen 0), checked to be a
 * directory and, when @p want (CORE_MAY_*) is not 0, to grant @p want to @p p.
 * @return 0, SRV_ESTALE, -ENOTDIR, -EACCES, or a meta error of meta_inode_get(). */
int core__dir_get_p(struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                    uint32_t want, struct meta_inode *out);
void core__attr_fill(const struct meta_inode *r, uint64_t ino, struct core_attr *out);
void core__touch(struct meta_inode *r, bool mtime, bool ctime);
/** Permission check of @p want (CORE_MAY_*) on @p r. @return 0, -EACCES. */
int core__perm(const struct core_principal *p, const struct meta_inode *r, uint32_t want);
bool core__in_group(const struct core_principal *p, uint32_t gid);
/** Name rules of core.h. @return 0, SRV_EBADNAME, -ENAMETOOLONG. */
int core__name_check(const char *name, size_t len);
/** S3 bucket naming rules. @return 0, SRV_EBADNAME. */
int core__bucket_name_check(const char *name, size_t len);

/** Key of @p name in directory @p dir (+ '/' for a directory). @return 0,
 * -ENAMETOOLONG (key over CORE_KEY_MAX), -ENOENT (dir not in a bucket). */
int core__key_of(struct meta_txn *t, uint64_t dir, const char *name, size_t len, bool isdir,
                 char *buf, size_t *klen);
/** The inode of @p key in @p bucket, which @p p may read. @return 0, -ENOENT,
 * SRV_ECORRUPT (index names a missing inode), -EACCES, or a meta error. */
int core__kidx_readable(struct meta_txn *t, const struct core_principal *p, uint64_t bucket,
                        const char *key, size_t klen, uint64_t *ino, struct meta_inode *r);
/** The inline bytes of @p ino, borrowed from @p t (length 0 when it has none).
 * @return 0 or a meta error. */
int core__inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len);

/* ---- core_quota.c ---- */
/** Charge (or credit, negative) usage along tenant, bucket and quota'd dirs
 * from @p dir upwards. With @p enforce, a positive delta over a limit answers
 * -EDQUOT and changes nothing. */
int core__usage_charge(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                       int64_t dbytes, int64_t dinodes, bool enforce);
int core__usage_move(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket, uint64_t from,
                     uint64_t to, int64_t bytes, int64_t inodes);
/** core__usage_charge whose enforcement also counts the bytes other holders
 * reserved on each limited record (all but @p own's, which may be NULL). */
int core__usage_charge_own(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                           int64_t dbytes, int64_t dinodes, bool enforce,
                           const struct core__resv *own);
int core__usage_create(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino);
int core__usage_delete(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino);
int core__quota_load(struct core *c);

/* Byte reservations. A write admitted against a byte limit reserves the bytes
 * it would add, in memory, on every limited record it counts against, and
 * keeps them until its data is committed (then usage has them) or dropped:
 * committed usage plus all reservations never passes a limit. Holders: an
 * NFS write in flight, a pending record (core__pend), an S3 upload being
 * linked. A holder with n == 0 holds nothing. */
void core__resv_init(struct core *c);
void core__resv_fini(struct core *c);
/** Reserve @p bytes for a write into directory @p dir of @p tenant: the
 * limited records on its chain (tenant, bucket, quota'd directories) must fit
 * committed usage + every reservation + @p bytes (checked and taken under one
 * lock, so concurrent writers never pass a limit together). No limit: @p h
 * holds nothing. @return 0, -EDQUOT, -ENOMEM, -EIO. */
int core__resv_admit(struct core *c, uint32_t tenant, uint64_t dir, uint64_t bytes,
                     struct core__resv *h);
/** Reserve @p bytes, without a limit check, on the limited records an object
 * at @p key of @p bucket counts against (its op enforces the limits itself,
 * counting others' reservations). @return 0, -ENOMEM, -EIO. */
int core__resv_hold_key(struct core *c, uint32_t tenant, uint64_t bucket, const char *key,
                        size_t klen, uint64_t bytes, struct core__resv *h);
/** core__resv_hold_key on the limited directories of @p key only (not the
 * tenant or the bucket): multipart completion, whose parts are charged to
 * both already. Nothing while no directory quota exists. @return 0, -ENOMEM, -EIO. */
int core__resv_hold_dirs(struct core *c, uint32_t tenant, uint64_t bucket, const char *key,
                         size_t klen, uint64_t bytes, struct core__resv *h);
/** Start renaming @p fromname of @p fromdir to @p todir while directory
 * quotas exist, when that changes the chain of what it moves (another
 * directory, or a hard link made elsewhere): mark its bucket (@p mv; a write
 * into it that would become pending while the mark is on waits, then
 * re-reserves on its file's chain as it is then: core__resv_follow), then
 * commit the pending (UNSTABLE) writes it carries (a file's own; for a
 * directory, every pending file of its bucket), so the rename's usage move
 * counts their bytes on the new path and enforces its limits. Whatever the
 * result, end with core__quota_rename_end. @return 0, or the flush's error
 * (-EIO, -ENOSPC). */
int core__quota_rename_begin(struct core *c, uint32_t tenant, uint64_t fromdir,
                             const char *fromname, size_t fromlen, uint64_t todir,
                             struct core__mv *mv);
/** Inside the rename's op, before it changes anything: @p ino (a directory
 * when @p isdir) is what it moves, to another parent when @p moves.
 * @return 0, or -EAGAIN when it would move pending writes or was not marked
 * (the entry changed since core__quota_rename_begin looked, or the first
 * directory quota appeared: end and begin again). */
int core__quota_rename_check(struct core *c, const struct core__mv *mv, uint64_t ino,
                             bool isdir, bool moves);
/** The rename's op is over (committed or not): lift @p mv's mark. */
void core__quota_rename_end(struct core *c, struct core__mv *mv);
/** Before a write reads its file's chain: what it saw of the renames. */
static inline void core__mv_begin(struct core *c, struct core__mvtok *k)
{
    k->gen = atomic_load(&c->mv_gen);
    k->slot = false;
}
bool core__mv_same_slow(struct core *c, const struct core__mvtok *k, uint64_t bucket);
/** Under the write's pend record mu, just before it becomes pending: no
 * rename that may have moved a file of @p bucket started or ended since @p k
 * (else the write calls core__resv_follow first). Two loads when none ran. */
static inline bool core__mv_same(struct core *c, const struct core__mvtok *k, uint64_t bucket)
{
    if (atomic_load(&c->mv_busy) == 0 && atomic_load(&c->mv_gen) == k->gen)
        return true;
    return core__mv_same_slow(c, k, bucket);
}
/** A write of @p bytes into file @p ino of @p bucket, reserved by @p h on its
 * chain as it was, followed a rename: wait until no rename of the bucket
 * runs, note it in @p k, then hold @p bytes on the file's chain as it is now
 * (records new to it checked as core__resv_admit does; on failure @p h is
 * unchanged). @return 0, -EDQUOT, SRV_ESTALE (file gone), -ENOMEM, -EIO. */
int core__resv_follow(struct core *c, uint64_t ino, uint64_t bucket, uint64_t bytes,
                      struct core__resv *h, struct core__mvtok *k);
/** @p dst gives back what it held and takes @p src's records with @p bytes
 * (never more than the two held together); @p src then holds nothing. */
void core__resv_move(struct core *c, struct core__resv *dst, struct core__resv *src,
                     uint64_t bytes);
/** Change what @p h holds to @p bytes on its records (0 releases them). */
void core__resv_set(struct core *c, struct core__resv *h, uint64_t bytes);
/** Bytes reserved on record (@p tenant, @p ino) by holders other than @p own. */
uint64_t core__resv_other(struct core *c, uint32_t tenant, uint64_t ino,
                          const struct core__resv *own);

/* ---- core_ns.c: tree changes shared by NFS and S3 ---- */
/** Create a node @p name in @p dir (checks perms, quotas, names; updates
 * dirents, key index, parent). @p target for symlinks. */
int core__node_create(struct core *c, struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, enum core_ftype type, uint32_t mode,
                      uint32_t aflags, const char *target, size_t tlen, uint64_t *ino,
                      struct meta_inode *rec);
/** Remove entry @p name from @p dir (file, symlink, or empty dir when @p isdir). */
int core__node_unlink(struct core *c, struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, bool isdir, bool s3);
/** Drop an inode whose last link went away (orphan if referenced). */
int core__entry_remove(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec);
int core__ino_release(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *rec);
/** Free all data of @p ino (extents via the store limbo, inline bytes). */
int core__data_drop(struct core *c, struct meta_txn *t, uint64_t ino);

/* ---- core_upload.c ---- */
/** Abort every multipart upload of @p bucket (its parts' space is freed). */
int core__mpu_drop_bucket(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket);

/* ---- core_data.c ---- */
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
/** Committed extents of @p ino overlapping [lo, hi), in file order (@p out is reset). */
int core__overlaps(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                   struct core__fext_list *out, bool want_crc);

/* ---- core_cache.c: verified-extent read cache ---- */
#define CORE_CACHE_BYTES (256ull << 20)
int core__cache_init(struct core *c, uint64_t bytes);
void core__cache_fini(struct core *c);
/** Epoch to pass to core__extent_read; take it before reading the extent map. */
uint64_t core__cache_epoch(struct core *c);
/** Drop a freed extent from the cache (called wherever an extent is freed). */
void core__cache_invalidate(struct core *c, const struct store_extent *x);
/** store_read through the cache. @return as store_read. */
int core__extent_read(struct core *c, const struct store_extent *x, uint32_t from, void *buf,
                      size_t len, uint64_t epoch);
/* What an op notes for the commit hooks (meta_txn_note, core_main.c): a struct
 * store_extent that becomes used, or free, when its batch commits. */
#define CORE_NOTE_USE 1
#define CORE_NOTE_FREE 2
/** Record a free of @p e in op txn @p t (and its block CRCs) and drop it from the cache. */
int core__extent_free(struct core *c, struct meta_txn *t, const struct store_extent *e);
/** Record reserved @p e as used in op txn @p t, with its block CRCs (may be NULL). */
int core__extent_use(struct core *c, struct meta_txn *t, const struct store_extent *e,
                     const uint32_t *bcrc, uint32_t nb);
/** CRC32C of each META_BCRC_BLOCK of @p buf into @p out. @return block count. */
uint32_t core__bcrc_compute(const void *buf, uint32_t len, uint32_t *out);
/** CRC32C of the @p len bytes whose @p nb block CRCs are @p bcrc. */
uint32_t core__bcrc_whole(const uint32_t *bcrc, uint32_t nb, uint32_t len);
/** Block CRCs of @p e into @p out (META_BCRC_MAX). @return count, 0 when none. */
uint32_t core__bcrc_get(struct meta_txn *t, const struct store_extent *e, uint32_t *out);
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
 * @return 0, -ENOMEM, -EISDIR, -EINVAL (not a regular file), -EACCES,
 *         SRV_ESTALE, meta errors. */
int core__read_view(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                    uint64_t len, struct core__pend_snap *ps, struct meta_txn **t,
                    struct meta_inode *r);
/** Usage the pending data of @p tenant (bucket @p bucket, 0 = whole tenant) adds. */
int64_t core__pend_usage(struct core *c, uint32_t tenant, uint64_t bucket);
/** Under p->mu: recompute p->udelta against the committed state. */
void core__pend_udelta(struct core *c, struct core__pend *p);
/** Whether @p ino has pending data (extents or inline bytes). */
bool core__pend_has_data(struct core *c, uint64_t ino);
/** Merge pending size/mtime/change of ino out->ino into @p out. */
void core__attr_pend(struct core *c, struct core_attr *out);
/** Write all pending data of @p p and commit it in one op; durable on return.
 * @return 0, SRV_ESTALE (inode gone: pending data dropped), -EIO, -ENOSPC. */
int core__pend_flush(struct core *c, struct core__pend *p);
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
/** Inside an op: commit pending data @p b into inode @p r (caller writes r back). */
int core__pend_apply_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                       const struct core__pend_batch *b);

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


/* ---- refs ---- */
bool core__ref_held(struct core *c, uint64_t ino);

#endif
