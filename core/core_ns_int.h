/* SPDX-License-Identifier: Apache-2.0
 * core_ns_int: the namespace sub-module of the core (the top one, see
 * core_int.h): tree changes shared by NFS and S3 and name rules (core_ns.c),
 * the POSIX view (core_posix.c), the object view and key rules (core_s3.c),
 * uploads and multipart (core_upload.c), and the lifecycle, tenant roots and
 * references held on inodes (core_main.c). It may call the data and quota
 * sub-modules; nothing below calls it.
 * Thread: see each function. */
#ifndef CORE_NS_INT_H
#define CORE_NS_INT_H

#include "core_data_int.h"

#define CORE_SYMLINK_MAX 4096

struct core__ref {
    uint64_t ino;
    uint32_t count;
    struct core__ref *next;
};
#define CORE_REF_BUCKETS 1024

/* The sub-module's state (c->ns). */
struct core__ns {
    pthread_mutex_t ref_mu;
    struct core__ref *refs[CORE_REF_BUCKETS];
};

/* ---- core_ns.c: tree changes shared by NFS and S3, names ---- */
/** Name rules of core.h. @return 0, SRV_EBADNAME, -ENAMETOOLONG. */
int core__name_check(const char *name, size_t len);
/** S3 bucket naming rules. @return 0, SRV_EBADNAME. */
int core__bucket_name_check(const char *name, size_t len);
/** Permission bits of an object an S3 principal with @p fmode creates (core_principal). */
static inline uint32_t core__file_mode(uint32_t fmode)
{
    return fmode ? fmode & 0777 : 0600;
}
/** ... and of a bucket: a search bit wherever a read bit is. */
static inline uint32_t core__bucket_mode(uint32_t fmode)
{
    uint32_t m = core__file_mode(fmode);
    return m | ((m & 0444) >> 2);
}
/** Key of @p name in directory @p dir (+ '/' for a directory). @return 0,
 * -ENAMETOOLONG (key over CORE_KEY_MAX), -ENOENT (dir not in a bucket). */
int core__key_of(struct meta_txn *t, uint64_t dir, const char *name, size_t len, bool isdir,
                 char *buf, size_t *klen);
/** Create a node @p name in @p dir (checks perms, quotas, names; updates
 * dirents, key index, parent). @p target for symlinks. */
int core__node_create(struct core *c, struct meta_txn *t, const struct core_principal *p,
                      uint64_t dir, const char *name, size_t len, enum core_ftype type,
                      uint32_t mode, uint32_t aflags, const char *target, size_t tlen,
                      uint64_t *ino, struct meta_inode *rec);
/** Remove entry @p name from @p dir (file, symlink, or empty dir when @p isdir). */
int core__node_unlink(struct core *c, struct meta_txn *t, const struct core_principal *p,
                      uint64_t dir, const char *name, size_t len, bool isdir, bool s3);
/** Remove entry (dir, name) -> (ino, rec) without permission checks; an inode whose
 * last link went away is released (core__ino_release). */
int core__entry_remove(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec);
/** Drop an inode whose last link went away (kept as an orphan if referenced). */
int core__ino_release(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *rec);

/* ---- core_s3.c: keys, ETags ---- */
#define CORE_ETAG_MD5_MAX (256ull << 20) /* files whose MD5 ETag is computed when asked */
/** S3 key rules of core_s3.c; @p isdir: the key names a directory ("k/").
 * @return 0, SRV_EBADNAME. */
int core__key_check(const char *key, size_t len, bool *isdir);
/** The ETag of an object whose MD5 is unknown (core_s3.c): the empty MD5 for a
 * directory or an empty file, else "<16 hex ino><16 hex change>-1" into @p etag
 * (CORE_ETAG_MAX + 1 bytes). */
void core__etag_synth(const struct meta_inode *r, uint64_t ino, char *etag);

/* ---- core_upload.c ---- */
/** Abort every multipart upload of @p bucket (its parts' space is freed). */
int core__mpu_drop_bucket(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket);

/* ---- core_main.c: references held on inodes ---- */
bool core__ref_held(struct core *c, uint64_t ino);

#endif
