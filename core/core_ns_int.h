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

/* The background worker (core_bg.c). */
struct core__bg {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stop (CLOCK_MONOTONIC waits) */
    bool stop, running;
    pthread_t thread;
    core_bg_io_fn io; /* mu */
    void *ioarg;
    core_bg_later_fn later; /* mu */
    void *laterarg;
};

/* The sub-module's state (c->ns). */
struct core__ns {
    pthread_mutex_t ref_mu;
    struct core__ref *refs[CORE_REF_BUCKETS];
    struct core__bg bg;
    struct core__pf *pf; /* directory prefetch (core_prefetch.c; NULL: not started) */
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
/* core__node_unlink's @p vflags */
#define CORE__UNL_VERSIONED 0x1 /* in a versioned bucket a file's removal is a delete marker */
#define CORE__UNL_NFS 0x2       /* ... refused (SRV_ELOCKED) while its version is locked */
/** Remove entry @p name from @p dir (file, symlink, or empty dir when @p isdir) with the
 * permission checks of both protocols; a bucket with versions left is not empty. With
 * CORE__UNL_VERSIONED a file of a versioned bucket is deleted as core__ver_delete_t does
 * (@p out: the marker; may be NULL). */
int core__node_unlink(struct core *c, struct meta_txn *t, const struct core_principal *p,
                      uint64_t dir, const char *name, size_t len, bool isdir, unsigned vflags,
                      struct core_delres *out);
/** Remove entry (dir, name) -> (ino, rec) without permission checks; an inode whose
 * last link went away is released (core__ino_release). */
int core__entry_remove(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec);
/** The first half of core__entry_remove: the entry, its key and its parent's counts go
 * (a bucket's uploads and configuration too), @p rec's nlink drops, but @p rec is neither
 * written nor released and usage is not charged: the caller decides (a file becoming a
 * noncurrent version). */
int core__entry_detach(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec);
/** Drop an inode whose last link went away (kept as an orphan if referenced); bytes of
 * its extents that another version still holds are charged back to its bucket. */
int core__ino_release(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *rec);

/* ---- core_cmode.c: cache mode ---- */
void core__cm_init(struct core *c);
void core__cm_fini(struct core *c);
/** Import directory @p dir from its cache bucket's remote if due (a no-op elsewhere).
 * @return 0, -EWOULDBLOCK (CORE_P_NOWAIT and due), SRV_EIMPORT or SRV_EIMPORTFAIL (never
 * imported and the remote cannot be listed: core.h § cache mode), or a store error. */
int core__cm_dir(struct core *c, const struct core_principal *p, uint64_t dir);
/** Import the directories on the way to @p key (as core__cm_dir each). */
int core__cm_key(struct core *c, const struct core_principal *p, uint64_t bucket, const char *key,
                 size_t len);
/** Key @p key of cache bucket @p bucket is looked up by S3 (HEAD, GET): if it is a file
 * whose content is its remote object's and whose metadata was never asked, ask the remote
 * and keep it: for a read from @p read_at (core_key_lookup_at; CORE_READ_NONE: none) whose
 * first byte is still remote, by the recall of that byte's chunk (its GET's answer carries
 * it), else by a HEAD (core_cache_meta_fn). A no-op elsewhere; failures leave it to the
 * next lookup (and to the read). @return 0, -EWOULDBLOCK (CORE_P_NOWAIT and it would ask). */
int core__cm_meta(struct core *c, const struct core_principal *p, uint64_t bucket, const char *key,
                  size_t len, int64_t read_at);
/** Import what a listing of @p prefix needs: the directories on the way, and with
 * @p recursive every directory under it. */
int core__cm_list(struct core *c, const struct core_principal *p, uint64_t bucket,
                  const char *prefix, size_t len, bool recursive);

/* ---- core_prefetch.c: directory prefetch on listing ---- */
struct core__pf;
/** Directory @p dir (@p d, read in @p t) is being listed: if its bucket is tiered, queue
 * it for the prefetch thread (deduplicated; dropped when the queue is full). Cheap: one
 * metadata read; never blocks on I/O (an event loop may call it). */
void core__pf_note(struct core *c, struct meta_txn *t, const struct meta_inode *d, uint64_t dir);
/** Stop the prefetch thread and free its state (core_close). */
void core__pf_fini(struct core *c);

/* ---- core_s3.c: keys, ETags ---- */
#define CORE_ETAG_MD5_MAX (256ull << 20) /* files whose MD5 ETag is computed when asked */
/** S3 key rules of core_s3.c; @p isdir: the key names a directory ("k/").
 * @return 0, SRV_EBADNAME. */
int core__key_check(const char *key, size_t len, bool *isdir);
/** The ETag of an object whose MD5 is unknown (core_s3.c): the empty MD5 for a
 * directory or an empty file, else "<16 hex ino><16 hex change>-1" into @p etag
 * (CORE_ETAG_MAX + 1 bytes). */
void core__etag_synth(const struct meta_inode *r, uint64_t ino, char *etag);
/** Directory holding @p key's last segment (the bucket for a top-level key); @p nameoff
 * where that segment starts. @return 0, -ENOENT, SRV_ECORRUPT. */
int core__parent_of_key(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                        bool isdir, uint64_t *dir, size_t *nameoff);
/** Remove empty implicit directories from @p key's parent upwards. */
int core__implicit_cleanup(struct core *c, struct meta_txn *t, const struct core_principal *p,
                           uint64_t bucket, const char *key, size_t klen, bool isdir);

/** The current version of @p key goes (core_key_delete): in a versioned bucket a delete
 * marker comes, its result in @p out (may be NULL). @return as core_key_delete. */
int core__key_delete(struct core *c, const struct core_principal *p, uint64_t bucket,
                     const char *key, size_t keylen, struct core_delres *out);

/* ---- core_version.c: versions, delete markers, object lock ----
 * The hooks of the tree's operations take the bucket's configuration from
 * core__ver_cfg and run inside the operation's op; see core_version.c. */
/** The versioning and lock configuration of @p bucket (zeroed: never versioned).
 * @return 0, SRV_ECORRUPT, -EIO. */
int core__ver_cfg(struct core *c, struct meta_txn *t, uint64_t bucket, struct meta_bucketcfg *cfg);
/** The configuration records of a deleted bucket go. */
int core__ver_bucket_drop(struct meta_txn *t, uint64_t bucket);
/** -ENOTEMPTY while @p bucket has versions, else 0 (or an error). */
int core__ver_bucket_busy(struct meta_txn *t, uint64_t bucket);
/** The id of version (@p vseq, @p v) into @p out (CORE_VID_MAX + 1 bytes). */
void core__vid_fmt(uint64_t vseq, const struct meta_version *v, char *out);
/** SRV_ELOCKED while the version file @p ino (@p r) holds is retained or on legal hold. */
int core__ver_check_t(struct meta_txn *t, uint64_t ino, const struct meta_inode *r);
/** The current file (@p ino, @p r) at @p key, entry (@p dir, @p d, @p name), leaves its
 * key (replaced, deleted) in a versioned bucket (@p cfg): it becomes a noncurrent
 * version, unless it is the null version of a suspended bucket (then it goes, as
 * core__entry_remove). @p r is written. @return 0, -EAGAIN (uncommitted writes: commit
 * them and run the op again), or an error. */
int core__ver_retire_t(struct core *c, struct meta_txn *t, const struct meta_bucketcfg *cfg,
                       uint64_t bucket, const char *key, size_t klen, uint64_t dir,
                       struct meta_inode *d, const char *name, size_t nlen, uint64_t ino,
                       struct meta_inode *r);
/** New file @p ino (@p r, flags set for the caller to write) is @p key's newest version,
 * retained as @p lk says (NULL: the bucket's default), sealed (an S3 object) or open.
 * @p vid (NULL or CORE_VID_MAX + 1 bytes) gets its id. */
int core__ver_add_t(struct core *c, struct meta_txn *t, const struct meta_bucketcfg *cfg,
                    uint64_t bucket, const char *key, size_t klen, uint64_t ino,
                    struct meta_inode *r, const struct core_lock *lk, bool sealed, char *vid);
/** Delete @p key without a version in a versioned bucket: its current file (@p ino, @p r
 * at @p dir/@p name; 0 when the key has none) is retired and a delete marker made (@p out).
 * @p nfs: refused while the file's version is locked. */
int core__ver_delete_t(struct core *c, struct meta_txn *t, const struct core_principal *p,
                       const struct meta_bucketcfg *cfg, uint64_t bucket, const char *key,
                       size_t klen, uint64_t dir, struct meta_inode *d, const char *name,
                       size_t nlen, uint64_t ino, struct meta_inode *r, bool nfs,
                       struct core_delres *out);
/** NFS CREATE made file @p ino (@p r, written by the caller) at @p dir/@p name: in a
 * versioned bucket, an open version of its key. */
int core__ver_created_t(struct core *c, struct meta_txn *t, uint64_t dir, const char *name,
                        size_t nlen, uint64_t ino, struct meta_inode *r);
/** Before an NFS change of file @p ino (@p r, written by the caller) in a versioned
 * bucket: a sealed version is kept in a clone sharing its data and the file becomes a
 * new open version (the null version of a suspended bucket changes in place).
 * @return 0, SRV_ELOCKED, or an error. */
int core__ver_open_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r);
/** The version id (out->vid: "" in a bucket never versioned, "null" or an id) and lock of
 * current file @p ino (@p r) of @p bucket, for core_key_lookup and the peek. */
int core__ver_current(struct core *c, struct meta_txn *t, uint64_t bucket, uint64_t ino,
                      const struct meta_inode *r, struct core_objinfo *out);
/** When @p key has no file because its newest version is a delete marker: @p out describes
 * the marker (dmarker, vid, mtime). @return 0, -ENOENT (no marker), or an error. */
int core__ver_marker(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key,
                     size_t klen, struct core_objinfo *out);
/** The worker: the open version file @p ino holds is sealed (@p r written by the caller). */
int core__ver_seal_t(struct meta_txn *t, uint64_t ino, struct meta_inode *r);
/** NFS RENAME moved file @p ino (@p r, written by the caller) from @p okey to @p nkey (the
 * tree and index already changed): its version moves to the new key's chain as its newest;
 * the old key gets a delete marker when it keeps older versions. */
int core__ver_move_t(struct core *c, struct meta_txn *t, const struct core_principal *p,
                     const struct meta_bucketcfg *cfg, uint64_t bucket, const char *okey,
                     size_t oklen, const char *nkey, size_t nklen, uint64_t ino,
                     struct meta_inode *r);
/** meta_submit of an op that may retire the file at @p key: its uncommitted writes are
 * committed first, and again while the op answers -EAGAIN (8 tries, then -EIO). */
int core__ver_submit(struct core *c, uint64_t bucket, const char *key, size_t klen, meta_op_fn fn,
                     void *arg);

/* ---- core_bg.c: the background worker ---- */
/** Set up / tear down its state (c->ns->bg). @return 0. */
int core__bg_init(struct core *c);
void core__bg_fini(struct core *c);
/** Start the worker thread (when cfg.bg_worker) / stop it (safe when not started).
 * @return 0, -errno. */
int core__bg_start(struct core *c);
void core__bg_stop(struct core *c);
/** MD5 of the first @p size bytes of file @p ino (of @p tenant) into @p etag (33 bytes),
 * read through the background read function (@p hooked: each read passes the I/O hook
 * first, which may sleep: only on the worker's thread); with @p store, stored as its ETag
 * if the inode's change counter is still @p change. @return 0, -EAGAIN (it changed or
 * shrank), -ENOMEM, or a read error (the hook's included). */
int core__etag_compute(struct core *c, uint32_t tenant, uint64_t ino, uint64_t size,
                       uint64_t change, bool store, bool hooked, char *etag);

/* ---- core_upload.c ---- */
/** The parent directory of @p key, creating missing ones as implicit directories.
 * @return 0, SRV_ECLASH (a file where a directory is needed), or core__node_create's. */
int core__resolve_parent(struct core *c, struct meta_txn *t, const struct core_principal *p,
                         uint64_t bucket, const char *key, size_t klen, bool isdir, uint64_t *dir,
                         size_t *nameoff);
/** Abort every multipart upload of @p bucket (its parts' space is freed). */
int core__mpu_drop_bucket(struct core *c, struct meta_txn *t, uint32_t tenant, uint64_t bucket);

/* ---- core_main.c: references held on inodes ---- */
bool core__ref_held(struct core *c, uint64_t ino);

#endif
