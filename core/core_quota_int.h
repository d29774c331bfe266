/* SPDX-License-Identifier: Apache-2.0
 * core_quota_int: the quota sub-module of the core (the lowest of the three,
 * see core_int.h): usage and hard limits per tenant, bucket and directory
 * (core_quota.c), byte reservations of writes admitted and not committed yet,
 * and the marks cross-directory renames put on a bucket (core_resv.c). It
 * calls neither the data nor the namespace sub-module.
 * Thread: txn helpers inside writer ops; the rest from any thread. */
#ifndef CORE_QUOTA_INT_H
#define CORE_QUOTA_INT_H

#include "core_int.h"

/* A holder's byte reservation (core_resv.c): the usage records with a byte
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

/* Cross-directory renames while directory quotas exist (core_resv.c): a
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
    uint64_t gen;                  /* c->quota->mv_gen */
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

/* The sub-module's state (c->quota). */
struct core__quota {
    atomic_uint ndirquota;         /* directory quota records (0: skip the parent walk) */
    pthread_mutex_t resv_mu;       /* byte reservations; a leaf lock */
    struct core__rent *resv[CORE_RESV_BUCKETS];
    /* cross-directory renames in progress */
    atomic_uint_fast64_t mv_gen;   /* bumped as one starts and as one ends */
    atomic_uint mv_busy;           /* how many */
    pthread_mutex_t mv_mu;         /* mv_slot; may be taken under a pend record's mu */
    pthread_cond_t mv_cv;          /* a slot went idle */
    struct core__mvslot mv_slot[CORE_MV_SLOTS];
};

/* ---- core_quota.c: usage and limits ---- */
/** Charge (or credit, negative) usage along tenant, bucket and quota'd dirs
 * from @p dir upwards. With @p enforce, a positive delta over a limit answers
 * -EDQUOT and changes nothing. */
int core__usage_charge(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                       int64_t dbytes, int64_t dinodes, bool enforce);
int core__usage_move(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket,
                     uint64_t from, uint64_t to, int64_t bytes, int64_t inodes);
/** core__usage_charge whose enforcement also counts the bytes other holders
 * reserved on each limited record (all but @p own's, which may be NULL). */
int core__usage_charge_own(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                           int64_t dbytes, int64_t dinodes, bool enforce,
                           const struct core__resv *own);
/** Charge (never enforcing) store bytes only to the tenant and the bucket (when its record
 * still exists), not to directories: space versions hold outside the tree. */
int core__usage_charge_store(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket,
                             int64_t bytes);
/** Charge (never enforcing) only the quota'd directories on the chain from @p dir, not the
 * bucket or the tenant: bytes that stay in the store but leave or join the tree (a file
 * becoming a noncurrent version, or current again). */
int core__usage_charge_dirs(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t dir,
                            int64_t bytes, int64_t inodes);
int core__usage_create(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino);
int core__usage_delete(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t ino);
/** Committed usage and limits of (@p tenant, @p ino) as core_usage_get reports them
 * (a directory without a limit: zero), pending writes not counted.
 * @return 0, -ENOENT, or a meta error. */
int core__usage_committed(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out);
int core__quota_load(struct core *c);
/** Whether a directory quota exists (the parent walks and rename marks apply). */
static inline bool core__dirquotas(struct core *c)
{
    return atomic_load(&c->quota->ndirquota) != 0;
}

/* ---- core_resv.c: byte reservations ----
 * A write admitted against a byte limit reserves the bytes it would add, in
 * memory, on every limited record it counts against, and keeps them until its
 * data is committed (then usage has them) or dropped: committed usage plus all
 * reservations never passes a limit. Holders: an NFS write in flight, a
 * pending record (core__pend), an S3 upload being linked. A holder with n == 0
 * holds nothing. */
/** Set up (c->quota) / tear down the sub-module's state. @return 0, -ENOMEM. */
int core__quota_init(struct core *c);
void core__quota_fini(struct core *c);
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
/** @p dst gives back what it held and takes @p src's records with @p bytes
 * (never more than the two held together); @p src then holds nothing. */
void core__resv_move(struct core *c, struct core__resv *dst, struct core__resv *src,
                     uint64_t bytes);
/** Change what @p h holds to @p bytes on its records (0 releases them). */
void core__resv_set(struct core *c, struct core__resv *h, uint64_t bytes);
/** Bytes reserved on record (@p tenant, @p ino) by holders other than @p own. */
uint64_t core__resv_other(struct core *c, uint32_t tenant, uint64_t ino,
                          const struct core__resv *own);

/* ---- core_resv.c: rename marks ---- */
/** Start renaming @p fromname of @p fromdir to @p todir while directory
 * quotas exist, when that changes the chain of what it moves (another
 * directory, or a hard link made elsewhere): mark its bucket (@p mv->on; a
 * write into it that would become pending while the mark is on waits, then
 * re-reserves on its file's chain as it is then: core__resv_follow). The
 * rename then commits the pending writes it moves, so its usage move counts
 * their bytes on the new path. Whatever the result, end with
 * core__quota_rename_end. @return 0, or a meta error. */
int core__quota_rename_begin(struct core *c, uint32_t tenant, uint64_t fromdir,
                             const char *fromname, size_t fromlen, uint64_t todir,
                             struct core__mv *mv);
/** The rename's op is over (committed or not): lift @p mv's mark. */
void core__quota_rename_end(struct core *c, struct core__mv *mv);
/** Before a write reads its file's chain: what it saw of the renames. */
static inline void core__mv_begin(struct core *c, struct core__mvtok *k)
{
    k->gen = atomic_load(&c->quota->mv_gen);
    k->slot = false;
}
bool core__mv_same_slow(struct core *c, const struct core__mvtok *k, uint64_t bucket);
/** Under the write's pend record mu, just before it becomes pending: no
 * rename that may have moved a file of @p bucket started or ended since @p k
 * (else the write calls core__resv_follow first). Two loads when none ran. */
static inline bool core__mv_same(struct core *c, const struct core__mvtok *k, uint64_t bucket)
{
    if (atomic_load(&c->quota->mv_busy) == 0 && atomic_load(&c->quota->mv_gen) == k->gen)
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

#endif
