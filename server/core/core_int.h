/* SPDX-License-Identifier: Apache-2.0
 * core_int: private declarations shared by the core's files. Nothing outside
 * server/core/ may include this header.
 *
 * Helpers named core__*_t take the caller's LMDB txn (read or write) and
 * never commit; write helpers run only inside writer ops (meta_submit).
 * Thread: any thread that holds a txn. */
#ifndef CORE_INT_H
#define CORE_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "meta.h"
#include "store.h"

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
};

static inline MDB_dbi core__dbi(struct core *c, enum meta_dbi d)
{
    return meta_dbi(c->meta, d);
}

/* ---- core_txn.c: records ---- */
void core__now(struct timespec *ts);
int core__ino_get(struct core *c, MDB_txn *t, uint64_t ino, struct meta_inode *out);
int core__ino_put(struct core *c, MDB_txn *t, uint64_t ino, const struct meta_inode *rec);
/** Inode for principal access: SRV_ESTALE when missing or another tenant's or wrong gen. */
int core__ino_get_p(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t ino,
                    uint32_t gen, struct meta_inode *out);
void core__attr_fill(const struct meta_inode *r, uint64_t ino, struct core_attr *out);
void core__touch(struct meta_inode *r, bool mtime, bool ctime);
int core__ino_alloc(struct core *c, MDB_txn *t, uint64_t *ino);
/** Permission check of @p want (CORE_MAY_*) on @p r. @return 0, -EACCES. */
int core__perm(const struct core_principal *p, const struct meta_inode *r, uint32_t want);
bool core__in_group(const struct core_principal *p, uint32_t gid);
/** Name rules of core.h. @return 0, SRV_EBADNAME, -ENAMETOOLONG. */
int core__name_check(const char *name, size_t len);
/** S3 bucket naming rules. @return 0, SRV_EBADNAME. */
int core__bucket_name_check(const char *name, size_t len);

int core__dirent_get(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                     struct meta_dirent *out);
int core__dirent_add(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                     uint64_t ino, uint32_t type);
int core__dirent_del(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len);

/** Key path of directory @p dir inside its bucket ("" for the bucket, else
 * ending in '/'); @p buf holds CORE_KEY_MAX + 1 bytes. @return 0, -ENOENT. */
int core__dirpath_get(struct core *c, MDB_txn *t, uint64_t dir, char *buf, size_t *len);
int core__dirpath_put(struct core *c, MDB_txn *t, uint64_t dir, const char *path, size_t len);
/** Key of @p name in directory @p dir (+ '/' for a directory). @return 0,
 * -ENAMETOOLONG (key over CORE_KEY_MAX), -ENOENT (dir not in a bucket). */
int core__key_of(struct core *c, MDB_txn *t, uint64_t dir, const char *name, size_t len,
                 bool isdir, char *buf, size_t *klen);

int core__kidx_get(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen,
                   uint64_t *ino, uint32_t *type);
int core__kidx_put(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen,
                   uint64_t ino, uint32_t type);
int core__kidx_del(struct core *c, MDB_txn *t, uint64_t bucket, const char *key, size_t klen);
/** Decode a keyidx entry into the full key (buf >= CORE_KEY_MAX + 1). @return key length. */
size_t core__kidx_decode(const MDB_val *k, const MDB_val *v, char *buf, struct meta_keyval *kv);

/* objmeta */
int core__objmeta_put(struct core *c, MDB_txn *t, uint64_t ino, const char *etag,
                      const void *meta, size_t metalen);
/** @param meta may be NULL (etag only). */
int core__objmeta_get(struct core *c, MDB_txn *t, uint64_t ino, char *etag, void **meta,
                      size_t *metalen);

/* ---- core_quota.c ---- */
/** Charge (or credit, negative) usage along tenant, bucket and quota'd dirs
 * from @p dir upwards. With @p enforce, a positive delta over a limit answers
 * -EDQUOT and changes nothing. */
int core__usage_charge(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t dir,
                       int64_t dbytes, int64_t dinodes, bool enforce);
int core__usage_move(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t bucket, uint64_t from,
                     uint64_t to, int64_t bytes, int64_t inodes);
int core__usage_create(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t ino);
int core__usage_delete(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t ino);
int core__quota_load(struct core *c);

/* ---- core_ns.c: tree changes shared by NFS and S3 ---- */
/** Create a node @p name in @p dir (checks perms, quotas, names; updates
 * dirents, key index, parent). @p target for symlinks. */
int core__node_create(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, enum core_ftype type, uint32_t mode,
                      uint32_t aflags, const char *target, size_t tlen, uint64_t *ino,
                      struct meta_inode *rec);
/** Remove entry @p name from @p dir (file, symlink, or empty dir when @p isdir). */
int core__node_unlink(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, bool isdir, bool s3);
/** Drop an inode whose last link went away (orphan if referenced). */
int core__entry_remove(struct core *c, MDB_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec);
int core__ino_release(struct core *c, MDB_txn *t, uint64_t ino, struct meta_inode *rec);
/** Free all data of @p ino (extents via the store limbo, inline bytes). */
int core__data_drop(struct core *c, MDB_txn *t, uint64_t ino, uint64_t from);

/* ---- core_upload.c ---- */
/** Abort every multipart upload of @p bucket (its parts' space is freed). */
int core__mpu_drop_bucket(struct core *c, MDB_txn *t, uint32_t tenant, uint64_t bucket);

/* ---- core_data.c ---- */
int core__extent_get(const MDB_val *v, struct store_extent *e, uint32_t *vlen);

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
/** Record a free of @p e in op txn @p t (and its block CRCs) and drop it from the cache. */
int core__extent_free(struct core *c, MDB_txn *t, const struct store_extent *e);
/** Record reserved @p e as used in op txn @p t, with its block CRCs (may be NULL). */
int core__extent_use(struct core *c, MDB_txn *t, const struct store_extent *e,
                     const uint32_t *bcrc, uint32_t nb);
/** CRC32C of each META_BCRC_BLOCK of @p buf into @p out. @return block count. */
uint32_t core__bcrc_compute(const void *buf, uint32_t len, uint32_t *out);
/** Block CRCs of @p e into @p out (META_BCRC_MAX). @return count, 0 when none. */
uint32_t core__bcrc_get(struct core *c, MDB_txn *t, const struct store_extent *e, uint32_t *out);
/** Read [from, from + len) of extent @p e: with block CRCs through the store's
 * buffered fd, verifying only the blocks touched; else core__extent_read.
 * @return 0, -EIO, SRV_ECORRUPT (logged, counted). */
int core__extent_pread(struct core *c, const struct store_extent *e, const uint32_t *bcrc,
                       uint32_t nb, uint32_t from, void *buf, size_t len, uint64_t epoch);

/* ---- refs ---- */
bool core__ref_held(struct core *c, uint64_t ino);

#endif
