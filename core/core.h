/* SPDX-License-Identifier: Apache-2.0
 * core: the namespace core, the one implementation of every semantic that
 * both front ends (S3, NFS) and the admin API share.
 *
 * The core owns the metadata store (through meta/) and the extent store
 * (through store/), and wires the two together at open (meta's commit hooks).
 * Front ends never touch either directly; the layers that only persist rows
 * of their own (tenants, QoS, settings) use meta's generic records
 * (meta_record.h) on the core's store (core_meta).
 *
 * Threads: every call is synchronous and may be made from any thread
 * concurrently. Calls may block on disk (io_uring completions, the group
 * commit of the single LMDB writer) but never on the network, so front ends
 * run them on the worker pool (srv_work.h), not on an event-loop thread.
 * Metadata changes of one call commit in one LMDB transaction (tree, key
 * index, usage), batched with other calls' changes by the writer thread.
 *
 * Errors: 0 or a negative code from common/srv_err.h. Every call documents
 * the errors it can produce; -EIO / SRV_ECORRUPT may come from any call that
 * touches disk and are logged where they arise.
 *
 * Names: a name is a byte string (not NUL-terminated, length given) of 1..255
 * bytes without '/' or NUL, not "." or "..". */
#ifndef CORE_H
#define CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct core;

#define CORE_MAX_GIDS 16
#define CORE_NAME_MAX 255
#define CORE_KEY_MAX 1024
#define CORE_ETAG_MAX 80

/* A principal: who is asking. Every request becomes one. */
struct core_principal {
    uint32_t tenant;  /* tenant id; 0 is never a valid tenant */
    uint64_t user;    /* user id within the tenant (0 = anonymous / NFS) */
    uint32_t uid;     /* POSIX identity used for permission checks */
    uint32_t gid;
    uint32_t ngids;
    uint32_t gids[CORE_MAX_GIDS];
    uint32_t flags;   /* CORE_P_* */
    /* S3: permission bits of the regular files (objects) a call creates
     * (core_upload_commit, core_mpu_create for its completion); buckets
     * (core_bucket_create) get them with a search bit wherever a read bit is.
     * 0: owner only (0600 for objects, 0700 for buckets). Directories inside
     * a bucket (implicit ones, "k/" markers) are 0755 whatever it says. */
    uint32_t fmode;
};
#define CORE_P_SUPER 0x1    /* bypasses permission bits (admin, tenant root user) */
#define CORE_P_READONLY 0x2 /* every change answers -EROFS (read-only export) */
/* The caller's thread must not wait for another operation (an event-loop
 * thread): a call that would wait (core_getattr while a setattr holds the
 * inode, core_read_pieces on bytes not yet verified in memory or the page
 * cache) returns -EWOULDBLOCK at once, having changed nothing, and the
 * caller runs it again on a thread that may wait. Other calls ignore it. */
#define CORE_P_NOWAIT 0x4
/* Set by the S3 front end, ignored by the core (it checks only the POSIX bits
 * of the identity above): the request is unsigned (no user; uid and gids are
 * the tenant's anonymous ids and must never earn POSIX access) ... */
#define CORE_P_ANON 0x8
/* ... or comes from a tenant admin (tenants/: tenant_admin). */
#define CORE_P_TADMIN 0x10
/* The caller may reach noncurrent versions by inode number (the S3 front end reads
 * them by version id). Without it, an inode that became a noncurrent version is gone
 * (SRV_ESTALE), as a replaced file is: NFS handles never reach old versions. */
#define CORE_P_VERSIONS 0x20
/* A read of the tier's own (the uploader copying the file): not a use of the file, so
 * it does not make the file look recently read for eviction. */
#define CORE_P_TIER 0x40
/* The cache mode's own import of remote names (core_cmode.c): passes the refusal of
 * writes in a read-only cache bucket. Front ends never set it. */
#define CORE_P_FILL 0x80
/* core_read_pieces only: verify an extent not known verified only if all its
 * pages are in the page cache already (a CPU cost, no disk read); otherwise
 * answer -EWOULDBLOCK, having read nothing (NFS's small READs then use
 * core_read, which reads and checks only the CRC blocks they touch). */
#define CORE_P_CACHED 0x100

enum core_ftype { CORE_REG = 1, CORE_DIR = 2, CORE_LNK = 3 };

struct core_attr {
    uint64_t ino;    /* stable 64-bit inode number (NFS fileid) */
    uint32_t gen;    /* generation: (ino, gen) never names two different files */
    uint32_t tenant;
    enum core_ftype type;
    uint32_t mode;   /* permission bits incl. setuid/setgid/sticky, no type bits */
    uint32_t nlink;
    uint32_t uid, gid;
    uint64_t size;
    uint64_t used;   /* bytes of store space held (pending UNSTABLE writes included) */
    struct timespec atime, mtime, ctime, btime;
    uint64_t change; /* bumped on every change of data or attributes */
    uint64_t parent; /* first parent directory (0 for tenant roots) */
    uint32_t flags;  /* CORE_A_* */
    uint64_t bucket; /* inode of the bucket it lies in (a bucket's own; 0 for tenant roots) */
};
#define CORE_A_IMPLICIT 0x1 /* directory created implicitly by an S3 PUT of a deeper key */
#define CORE_A_BUCKET 0x2   /* directory is a bucket (top level of a tenant root) */
#define CORE_A_TROOT 0x4    /* directory is a tenant root */
#define CORE_A_EVICTED                                                                             \
    0x100 /* (read only) the tier evicted its data: reads recall it (its                           \
           * local bytes: what recalls brought back; docs/tiering.md) */

/* setattr: fields named by mask are applied */
#define CORE_SET_MODE 0x01
#define CORE_SET_UID 0x02
#define CORE_SET_GID 0x04
#define CORE_SET_SIZE 0x08
#define CORE_SET_ATIME 0x10 /* to .atime */
#define CORE_SET_MTIME 0x20 /* to .mtime */
#define CORE_SET_ATIME_NOW 0x40
#define CORE_SET_MTIME_NOW 0x80
struct core_setattr {
    uint32_t mask;
    uint32_t mode, uid, gid;
    uint64_t size;
    struct timespec atime, mtime;
    bool guard;                 /* NFS sattrguard3: fail with SRV_EPRECOND unless ctime matches */
    struct timespec guard_ctime;
};

enum core_createhow { CORE_CREATE_UNCHECKED = 0, CORE_CREATE_GUARDED = 1, CORE_CREATE_EXCLUSIVE = 2 };

/* ---- lifecycle ---- */

struct core_config {
    const char *data_dir;     /* created if missing; holds meta/ and data files */
    uint64_t data_file_size;  /* most bytes per data file: files grow up to it (default 4 GiB) */
    uint64_t data_file_initial; /* bytes a data file has from the start (0: data_file_size) */
    uint32_t data_files;      /* number of data files (default 1) */
    const char *const *devices; /* NULL-terminated list of block devices, or NULL */
    uint64_t map_size;        /* LMDB map size (default 16 GiB) */
    uint32_t inline_max;      /* files up to this size live inline in LMDB (default 4096) */
    uint32_t commit_max_batch; /* most operations in one group commit (default 256) */
    bool data_write_cache;     /* write data through the page cache (store_config.write_cache) */
    bool meta_mem;            /* metadata in memory, not in LMDB (tests: kept for the life
                               * of the process under data_dir, so a reopen finds it) */
    uint32_t settle_ms;       /* a file NFS changed is settled (its MD5 ETag computed, its
                               * version sealed) once unchanged this long (0: at once) */
    bool bg_worker;           /* run the background worker that settles files (else only
                               * core_bg_run does) */
};

/** Open (creating if new) the store under cfg->data_dir; recovers after a crash
 * (space of uncommitted writes is free again, orphaned inodes are reclaimed).
 * @return 0, SRV_EBADVERSION (store of unknown/newer schema; logged with both
 *         versions), -ENOSPC (cannot preallocate data_file_initial), -errno from
 *         the filesystem. */
int core_open(struct core **out, const struct core_config *cfg);
/** Drain in-flight writes, commit every pending UNSTABLE write, sync and close.
 * Safe on NULL. */
void core_close(struct core *c);
/** Make every acknowledged change durable, pending UNSTABLE writes included
 * (flushes every inode's, then a group commit + data sync). */
int core_sync(struct core *c);

/* ---- store check ---- */

/** Called with one line of text for each problem core_check finds. */
typedef void (*core_check_fn)(void *arg, const char *problem);
/** Check the consistency of the whole store in one snapshot (`s3nfsd --check-store`, the
 * crash tests): space (extents of files, versions and parts each counted once, shared
 * ones matching their xref counts, free ranges, all tiling the devices; block CRCs and
 * xref records of used extents only; the allocator agreeing), accounting (inodes' used
 * bytes, buckets' and tenants' usage) and versions (unlinked files are versions or
 * orphans, version records and their inodes point at each other, chains and their keys,
 * null versions, only the newest version of a key linked). Run it with no op running
 * (a store just opened): writes in flight look like problems.
 * @return 0 (consistent), the number of problems found, -ENOMEM, -EIO. */
int core_check(struct core *c, core_check_fn report, void *arg);

/* ---- background work ---- */

/** Called with the byte count of each disk read of background work (the MD5 of
 * a file NFS changed) before it is issued: it may sleep to throttle it (the
 * daemon charges a system QoS class). @return 0, or an error that fails that
 * piece of work (it is tried again later). */
typedef int (*core_bg_io_fn)(void *arg, uint64_t bytes);
/** Set (NULL: remove) the hook; takes effect for the next read. */
void core_bg_set_io(struct core *c, core_bg_io_fn fn, void *arg);
/** Asked by the worker before it reads file @p ino to compute its MD5: true = not now
 * (the daemon: the tier's uploader is reading the same bytes, and the MD5 would take the
 * CPU from that upload); the file stays noted and is looked at again at the next pass.
 * Not asked by a pass with @p all (core_bg_run), nor for a file whose new version is to
 * be sealed (versioned buckets: sealing is not put off). */
typedef bool (*core_bg_later_fn)(void *arg, uint64_t ino);
/** Set (NULL: remove) that hook; takes effect for the next file. */
void core_bg_set_later(struct core *c, core_bg_later_fn fn, void *arg);
/** One pass of the background worker on the caller's thread: settle the files
 * NFS changed that have been quiet for settle_ms (@p all: every one), i.e.
 * compute and store the MD5 ETag of those whose MD5 is unknown, once their
 * writes are committed (a file with pending UNSTABLE writes waits). The
 * worker thread (cfg.bg_worker) runs one every settle_ms / 2 (50 ms .. 1 s).
 * @param[out] settled files settled (may be NULL).
 * @return 0, or the first error met (logged; the file is tried again later). */
int core_bg_run(struct core *c, bool all, unsigned *settled);

/* ---- tenants (the core keeps their roots; tenants/ keeps the rest) ---- */

/** Create tenant @p id (nonzero) with an empty root directory owned by uid/gid 0.
 * @return 0, -EEXIST. */
int core_tenant_create(struct core *c, uint32_t id);
/** Delete tenant @p id; only when its root holds no bucket. @return 0, -ENOENT, -ENOTEMPTY. */
int core_tenant_delete(struct core *c, uint32_t id);
/** @param[out] root inode number of the tenant's root. @return 0, -ENOENT. */
int core_tenant_root(struct core *c, uint32_t id, uint64_t *root);

/* ---- the POSIX view (NFS) ---- */

/** Attributes of @p ino. No permission check (as NFS GETATTR). @p gen 0 matches
 * any generation (callers without a handle, e.g. S3).
 * @return 0, SRV_ESTALE (no such inode, wrong gen, or another tenant's),
 *         -EWOULDBLOCK (CORE_P_NOWAIT and a setattr holds the inode). */
int core_getattr(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t gen,
                 struct core_attr *out);
/** Look up @p name in directory @p dir (needs search permission on dir).
 * ".." of a tenant root is the root itself; "." is dir.
 * @return 0, -ENOENT, -ENOTDIR, -EACCES, SRV_ESTALE, -ENAMETOOLONG. */
int core_lookup(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen, struct core_attr *out);
/* Which class of an inode's mode bits applies to a principal. */
enum core_pclass { CORE_PC_SUPER = 0, CORE_PC_OWNER, CORE_PC_GROUP, CORE_PC_OTHER };
/** The permission bits (4 read, 2 write, 1 search/execute) that @p p has on
 * an inode with attributes @p a: the one POSIX rule both protocols apply (the
 * owner's, the group's or the others' bits of a->mode; CORE_P_SUPER: all,
 * but execute on a regular file only where some execute bit is set).
 * @param[out] cls the class that applied (may be NULL). Pure, never fails. */
uint32_t core_perm_bits(const struct core_principal *p, const struct core_attr *a,
                        enum core_pclass *cls);
/** POSIX access check. @param mask bits of R_OK|W_OK|X_OK; @param[out] granted
 * the subset allowed. @return 0, SRV_ESTALE. */
int core_access(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t mask,
                uint32_t *granted);
/** Change attributes; truncate/extend on CORE_SET_SIZE (needs write permission),
 * chmod only by owner or super, chown only by super (or chgrp by owner to one
 * of its groups). @param[out] pre, post may be NULL (NFS wcc data).
 * @return 0, -EPERM, -EACCES, -EROFS, SRV_EPRECOND (guard), -EDQUOT, -EISDIR, SRV_ESTALE. */
int core_setattr(struct core *c, const struct core_principal *p, uint64_t ino,
                 const struct core_setattr *sa, struct core_attr *pre, struct core_attr *post);
/** Create regular file @p name in @p dir with @p mode (owner = principal).
 * UNCHECKED on an existing file truncates nothing and returns it; GUARDED
 * answers -EEXIST; EXCLUSIVE stores @p verf and a retry with the same verf
 * returns the same file (RFC 1813 3.3.8). In a tenant root, files are refused (-EACCES).
 * @return 0, -EEXIST, -EACCES, -ENOTDIR, -EDQUOT, -EROFS, SRV_EBADNAME, SRV_ESTALE. */
int core_create(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen, uint32_t mode, enum core_createhow how, uint64_t verf,
                struct core_attr *out);
/** Make a directory. In a tenant root this creates a bucket (bucket name rules apply,
 * SRV_EBADNAME otherwise). @return as core_create plus -EEXIST. */
int core_mkdir(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
               size_t namelen, uint32_t mode, struct core_attr *out);
/** Make a symbolic link to @p target (1..4096 bytes). @return as core_create. */
int core_symlink(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                 size_t namelen, const char *target, size_t targetlen, struct core_attr *out);
/** Read a symlink's target into @p buf (not NUL-terminated).
 * @return 0, -EINVAL (not a symlink), SRV_ESTALE, -ERANGE (buf too small). */
int core_readlink(struct core *c, const struct core_principal *p, uint64_t ino, char *buf,
                  size_t bufsize, size_t *len);
/** Hard link @p ino (a regular file of the same bucket) as @p name in @p dir.
 * @return 0, -EEXIST, -EXDEV (other bucket/tenant), -EPERM (directory), -EMLINK, ... */
int core_link(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t dir,
              const char *name, size_t namelen, struct core_attr *out);
/** Unlink a non-directory. Its data stays readable through core_ref() holders
 * until they unref. @return 0, -ENOENT, -EISDIR, -EACCES, -EPERM (sticky), -EROFS. */
int core_remove(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen);
/** Remove an empty directory; in a tenant root this deletes an empty bucket.
 * @return 0, -ENOENT, -ENOTDIR, -ENOTEMPTY, -EACCES, -EROFS. */
int core_rmdir(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
               size_t namelen);
/** Rename, atomically replacing an existing target (file over file, empty dir
 * over dir). Refuses moving a directory under itself (-EINVAL), across buckets
 * or tenants (-EXDEV), file over dir (-EISDIR) and dir over file (-ENOTDIR).
 * A directory rename updates the bucket's key index of its whole subtree in the
 * same transaction. Quotas: the moved bytes and inodes count on the new
 * path's directory limits (-EDQUOT past one). While directory quotas exist, a
 * file moved to another directory with UNSTABLE writes pending has them
 * committed first (for a directory: every file of its bucket with pending
 * writes), so they count there too rather than on the old path; writes into
 * the bucket that would become pending meanwhile wait until the rename is
 * over (see core_write).
 * @return 0, -EDQUOT, -EIO (that commit failed) or the errors named. */
int core_rename(struct core *c, const struct core_principal *p, uint64_t fromdir,
                const char *fromname, size_t fromlen, uint64_t todir, const char *toname,
                size_t tolen);

/* readdir: cookies are stable across calls and restarts; a cookie names the
 * position after an entry (its name hash order), so entries created or removed
 * concurrently never make a listing repeat or skip the others.
 * cookie 0 starts; "." and ".." are reported first with cookies 1 and 2; the
 * other entries' cookies lie in [CORE_COOKIE_MIN, CORE_COOKIE_MAX] (entries
 * made before CORE_COOKIE_MAX existed may have one of the 3 values above it).
 * Front ends that need smaller cookies map them (nfs/nfs_dir.c). */
#define CORE_COOKIE_MIN (1ull << 63)
#define CORE_COOKIE_MAX (UINT64_MAX - 3)
struct core_dirent {
    uint64_t ino;
    uint64_t cookie;
    const char *name; /* valid only during the callback */
    size_t namelen;
    const struct core_attr *attr; /* non-NULL when want_attr; valid during the callback */
};
/** @return 0 to continue, nonzero to stop (that entry is NOT consumed). */
typedef int (*core_dirent_cb)(void *arg, const struct core_dirent *e);
/** @param[out] eof true when the last entry was delivered.
 * @param[out] verf cookie verifier of this directory (changes never for a directory's
 *             life; SRV_EBADCOOKIE only when a cookie is malformed).
 * @return 0, -ENOTDIR, -EACCES, SRV_ESTALE, SRV_EBADCOOKIE. */
int core_readdir(struct core *c, const struct core_principal *p, uint64_t dir, uint64_t cookie,
                 bool want_attr, core_dirent_cb cb, void *arg, bool *eof, uint64_t *verf);

/** Read up to @p len bytes at @p off into @p buf. @param[out] n bytes read,
 * @param[out] eof true if the read reached the end of file.
 * @return 0, -EACCES, -EISDIR, SRV_ESTALE, -EIO/SRV_ECORRUPT (CRC mismatch; counted). */
int core_read(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
              void *buf, size_t len, size_t *n, bool *eof);

enum core_stable { CORE_UNSTABLE = 0, CORE_DATA_SYNC = 1, CORE_FILE_SYNC = 2 };
/** Write @p len bytes at @p off. Every write is copy-on-write into fresh
 * extents (or, for small inline files, a new inline copy).
 * UNSTABLE: the data is written (not synced) and the new extent mappings stay
 * pending in memory, per inode; reads (core_read, S3 GETs) and attributes
 * (size, mtime) see them at once; nothing is committed to LMDB. They become
 * durable and part of the committed map at core_commit of the inode (one
 * data sync + one metadata op), at a stable write or a size/mtime setattr of
 * the inode, at core_sync/core_close, or earlier when the inode's pending
 * data passes 64 MiB (or all inodes' 1 GiB). A crash loses the pending
 * writes of an inode since its last such point (in order: never a later one
 * without the earlier ones) and their space is free again after the restart;
 * the write verifier changes, so NFS clients resend them (*committed =
 * CORE_UNSTABLE). @c used and tenant/bucket usage include pending writes.
 * Quotas: a write reserves the bytes it adds (new space less what it replaces)
 * against every byte limit of its tenant, bucket and directories before any
 * data is written, counting committed usage and the reservations of all
 * writes admitted and not committed yet (pending ones keep theirs until
 * committed or dropped); past a limit it fails with -EDQUOT and changes
 * nothing. Concurrent writers never pass a limit together. Every limited
 * directory on the file's path counts, however deep. A write admitted while a
 * rename moves its file (or a directory above it) to another directory waits
 * for that rename before it becomes pending, then reserves on the new path
 * (-EDQUOT past a limit there, nothing written kept), so no interleaving
 * passes a limit.
 * DATA_SYNC/FILE_SYNC: the write and every pending write of the inode before
 * it are durable on return (*committed = CORE_FILE_SYNC).
 * A file written in order from offset 0 (up to 16 MiB) keeps a running MD5,
 * stored as its S3 ETag when committed.
 * The owner may write (and read) its file whatever
 * the mode bits (as knfsd's owner override: "tar x" of read-only files).
 * @param[out] committed how the data was actually stored (>= stable asked).
 * @return 0, -EACCES, -EISDIR, -EDQUOT, -ENOSPC, -EFBIG, -EROFS, SRV_ESTALE,
 *         -EIO (a stable write whose commit failed: the data stays pending). */
int core_write(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
               const void *buf, size_t len, enum core_stable stable, enum core_stable *committed,
               struct core_attr *pre, struct core_attr *post);
/** Make all UNSTABLE writes of @p ino durable (commits its pending writes in
 * one op; returns at once when none is pending).
 * @return 0, SRV_ESTALE, -EIO, -ENOSPC (LMDB map full; the writes stay pending). */
int core_commit(struct core *c, const struct core_principal *p, uint64_t ino);
/** Does @p ino have UNSTABLE writes its writer has not committed yet (core_commit),
 * including writes a flush of the server's own (past CORE_PEND_INO_MAX, a rename, a
 * sync) made durable meanwhile? @p last_ns (may be NULL) gets the time of the last
 * one (its mtime, real time in ns). The tier's uploader leaves a file alone while its
 * writer is at it. Never blocks on a flush. A file whose pending record went once
 * flushed (smaller than 1 MiB, or past the 1,024 records kept) reports 0; a larger one
 * keeps its record until its writer's COMMIT, with or without a running MD5.
 * @return 1 (yes), 0 (no). */
int core_pending_writes(struct core *c, uint64_t ino, int64_t *last_ns);
/** Write verifier: changes every time the core is opened (NFS writeverf3). */
uint64_t core_write_verifier(struct core *c);

/** Hold @p ino open: an unlinked file stays readable (core_read with its ino)
 * until the last unref; its space is reclaimed then, or at the next open after
 * a crash. @return 0, SRV_ESTALE. */
int core_ref(struct core *c, uint64_t ino);
void core_unref(struct core *c, uint64_t ino);

/* ---- the object view (S3) ---- */

/* Object lock of one version: retention (mode until a time) and legal hold. */
#define CORE_LOCK_NONE 0
#define CORE_LOCK_GOVERNANCE 1
#define CORE_LOCK_COMPLIANCE 2
struct core_lock {
    uint32_t mode; /* CORE_LOCK_*; retention applies while now < until */
    int64_t until; /* seconds since the epoch */
    bool hold;     /* legal hold */
};

#define CORE_VID_MAX 32 /* a version id: 32 lowercase hex digits, or "null" */

/** Object metadata kept with an inode (Content-Type, x-amz-meta-*, tags, ...)
 * as one opaque blob the S3 front end encodes; the core keeps it across NFS writes. */
struct core_objinfo {
    struct core_attr attr;
    /* without quotes. A file changed through NFS gets the MD5 of its content
     * once settled (core_bg_run), or at its next core_key_lookup before (up to
     * 256 MiB; stored then); until then "<16 hex ino><16 hex change>-1"
     * (multipart form). */
    char etag[CORE_ETAG_MAX + 1];
    size_t metalen;
    void *meta;                   /* heap; free with free() */
    /* versions: "" in a bucket never versioned, else "null" or the version id */
    char vid[CORE_VID_MAX + 1];
    bool latest;           /* the key's current version (listings, version lookups) */
    bool dmarker;          /* a delete marker: only vid, attr.mtime and attr.uid set */
    int64_t noncur_s;      /* version listings: when it became noncurrent (0: current) */
    struct core_lock lock; /* this version's retention and legal hold */
};

/** Buckets of the principal's tenant, in name order. */
typedef int (*core_bucket_cb)(void *arg, const char *name, size_t namelen,
                              const struct core_attr *attr);
int core_bucket_list(struct core *c, const struct core_principal *p, core_bucket_cb cb, void *arg);
/** Create bucket @p name (S3 bucket naming rules), owned by the principal, mode 0755.
 * Who may create buckets is decided by the front end (tenants/), not by the
 * tenant root's mode bits (those apply to NFS MKDIR in the root).
 * @return 0, -EEXIST, SRV_EBADNAME, -EACCES (read-only principal), -EDQUOT. */
int core_bucket_create(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out);
/** Delete an empty bucket. @return 0, SRV_ENOBUCKET, -ENOTEMPTY, -EACCES. */
int core_bucket_delete(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen);
/** @return 0, SRV_ENOBUCKET. */
int core_bucket_lookup(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out);
/** As core_bucket_lookup, and the bucket's metadata blob: the S3 front end's
 * bucket configuration (ACL grants, policy, CORS, ...), opaque to the core,
 * kept with the bucket inode and dropped with it.
 * @param[out] out attr and meta/metalen (heap, NULL when none: free
 *             out->meta); etag unset. @return 0, SRV_ENOBUCKET, -ENOMEM, -EIO. */
int core_bucket_get(struct core *c, const struct core_principal *p, const char *name,
                    size_t namelen, struct core_objinfo *out);
/** Replace the metadata blob of bucket inode @p bucket and, when @p mode is
 * not negative, its permission bits (0777; setuid/setgid/sticky are kept),
 * in one transaction. Who may is decided by the front end (the bucket's
 * owner, an admin). @return 0, SRV_ENOBUCKET, -EACCES (read-only principal). */
int core_bucket_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                         const void *meta, size_t metalen, int mode);

/** Resolve key @p key in bucket inode @p bucket. A key ending in '/' names a
 * directory. Needs read permission on the object itself (directory search
 * bits along the key are not checked for S3).
 * @param[out] out metadata (free out->meta). @return 0, -ENOENT,
 * SRV_EBADNAME (key refused by naming rules), -EACCES. */
int core_key_lookup(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen, struct core_objinfo *out);
/** No read follows the lookup (core_key_lookup_at: an S3 HEAD). */
#define CORE_READ_NONE INT64_MIN
/** core_key_lookup for a read of the object's bytes that follows it (an S3 GET), from
 * byte @p read_at (>= 0), or of its last -@p read_at bytes (< 0, a suffix range), or
 * none (CORE_READ_NONE: as core_key_lookup). The difference is in cache buckets only:
 * the first lookup of an imported object whose bytes are still remote takes its
 * Content-Type and user metadata from the recall GET of the chunk that holds the read's
 * first byte (it waits for that chunk, which the read then finds back) instead of a HEAD
 * of its own (core_cache_set_meta, docs/tiering.md § Cache mode). */
int core_key_lookup_at(struct core *c, const struct core_principal *p, uint64_t bucket,
                       const char *key, size_t keylen, int64_t read_at, struct core_objinfo *out);
/** Delete the object at @p key; removes implicit parent directories left
 * empty. Deleting a missing key is 0 (S3 semantics). A key ending in '/' removes
 * an empty directory. @return 0, -ENOTEMPTY, -EACCES, SRV_EBADNAME. */
int core_key_delete(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen);
/** Replace the metadata blob of an existing key (CopyObject onto itself, tagging).
 * Needs ownership or write permission on the object.
 * @return 0, -ENOENT, -EACCES, SRV_EBADNAME, SRV_ENOBUCKET. */
int core_key_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *key, size_t keylen, const void *meta, size_t metalen);
/** As core_key_set_meta, and, when @p mode is not negative, the object's
 * permission bits (0777; setuid/setgid/sticky kept) in the same transaction
 * (an S3 ACL change, which NFS sees as a chmod). */
int core_key_set_meta_mode(struct core *c, const struct core_principal *p, uint64_t bucket,
                           const char *key, size_t keylen, const void *meta, size_t metalen,
                           int mode);

/* Key-ordered listing (binary order of keys), from the per-bucket key index. */
struct core_listent {
    const char *key; /* valid only during the callback */
    size_t keylen;
    bool is_prefix;  /* a common prefix (delimiter rolled up); other fields unset */
    const struct core_objinfo *info; /* for objects; meta not loaded (metalen 0) */
};
typedef int (*core_list_cb)(void *arg, const struct core_listent *e);
/** Order: exact binary order for every key. (The index stores keys longer than
 * 503 bytes as a 495-byte head + hash since LMDB keys are limited to 511 bytes;
 * keys sharing a head are sorted in memory while listing, up to 100,000 of them.)
 * List keys > @p after (exclusive; NULL = from the start) starting with
 * @p prefix; with a delimiter, keys sharing prefix..delimiter roll up into one
 * prefix entry. Stops after @p max entries (objects and prefixes) or when cb
 * returns nonzero. @param[out] truncated more entries follow the last one given.
 * Empty directories appear as their key "k/"; symbolic links are never listed
 * (they are not objects). @return 0, -EACCES. */
int core_list(struct core *c, const struct core_principal *p, uint64_t bucket, const char *prefix,
              size_t prefixlen, const char *after, size_t afterlen, const char *delim,
              size_t delimlen, uint32_t max, core_list_cb cb, void *arg, bool *truncated);

/* Options of the object a commit makes (core_upload_set_opt, core_mpu_complete). */
struct core_putopt {
    const struct core_lock *lock; /* its retention / legal hold (NULL: the bucket's default
                                   * retention, if any); needs object lock on the bucket */
    char *vid;                    /* NULL, or CORE_VID_MAX + 1 bytes: gets its version id
                                   * ("" in a bucket never versioned), filled on success */
};

/* Uploads: the data of a whole-object PUT (or a multipart part) streams into
 * fresh extents; nothing is visible until commit, which atomically replaces
 * the key (tree + key index + usage in one transaction, data synced first).
 * An abandoned upload's space is free again after abort or restart. */
struct core_upload;
/** @param size_hint expected size or UINT64_MAX if unknown (chunked).
 * @return 0, -EDQUOT (admission: the size alone would exceed a quota), -EACCES, SRV_ENOBUCKET. */
int core_upload_begin(struct core *c, const struct core_principal *p, uint64_t bucket,
                      uint64_t size_hint, struct core_upload **out);
/** Options for the commit of @p u (copied; @p o->vid must stay valid until then). */
void core_upload_set_opt(struct core_upload *u, const struct core_putopt *o);
/** Append bytes. @return 0, -ENOSPC, -EDQUOT, -EIO. On error the upload must be aborted. */
int core_upload_write(struct core_upload *u, const void *buf, size_t len);
/** Bytes appended so far. */
uint64_t core_upload_size(const struct core_upload *u);
/** Who commits the upload (owner, mode of what it makes), when it is known only once its
 * bytes are in: an S3 browser form names its signer in the body. Same tenant only. */
void core_upload_set_principal(struct core_upload *u, const struct core_principal *p);
/** Link the data at @p key with @p etag (hex, no quotes) and metadata blob.
 * Creates implicit parents. If @p if_etag is non-NULL the existing object's ETag
 * must match ("*" = must exist); if @p if_none_match the key must not exist.
 * Frees @p u whatever the result. @param[out] out attributes of the new object (may be NULL).
 * @return 0, SRV_ECLASH (file/dir clash), SRV_EPRECOND, -EDQUOT, SRV_EBADNAME, -EACCES. */
int core_upload_commit(struct core_upload *u, const char *key, size_t keylen, const char *etag,
                       const void *meta, size_t metalen, const char *if_etag, bool if_none_match,
                       struct core_attr *out);
/** Drop an upload and free its space. Safe on NULL. */
void core_upload_abort(struct core_upload *u);

/** Multipart: persist an upload as part @p partno of multipart upload @p upload_id
 * (an opaque id from core_mpu_create) instead of linking it at a key. Frees @p u. */
int core_mpu_create(struct core *c, const struct core_principal *p, uint64_t bucket,
                    const char *key, size_t keylen, const void *meta, size_t metalen,
                    char *upload_id, size_t idsize);
/* @p cksum: the part's additional checksum as "A:base64" (A: one character naming
 * the algorithm, the front end's), kept with the part for a composite checksum at
 * completion; NULL, or too long for a part ETag over CORE_PART_ETAG_MAX: none. */
int core_mpu_part_commit(struct core_upload *u, const char *upload_id, uint32_t partno,
                         const char *etag, const char *cksum);
#define CORE_PART_ETAG_MAX 40  /* the longest part ETag a checksum is kept with */
#define CORE_PART_CKSUM_MAX 46 /* "A:" + base64 of a SHA-256 */
struct core_mpu_part {
    char cksum[CORE_PART_CKSUM_MAX + 1]; /* as given to core_mpu_part_commit, or "" */
    uint32_t partno;
    uint64_t size;
    char etag[CORE_ETAG_MAX + 1];
    struct timespec mtime;
};
typedef int (*core_part_cb)(void *arg, const struct core_mpu_part *part);
/** Parts of an upload in part order, starting after @p after_partno. */
int core_mpu_list_parts(struct core *c, const struct core_principal *p, uint64_t bucket,
                        const char *upload_id, uint32_t after_partno, core_part_cb cb, void *arg);
struct core_mpu_info {
    const char *key;
    size_t keylen;
    const char *upload_id;
    struct timespec initiated;
    uint32_t uid; /* who initiated it */
};
typedef int (*core_mpu_cb)(void *arg, const struct core_mpu_info *info);
/** Multipart uploads of a bucket, ordered by (key, upload id). */
int core_mpu_list(struct core *c, const struct core_principal *p, uint64_t bucket,
                  const char *prefix, size_t prefixlen, core_mpu_cb cb, void *arg);
/** Link the named parts, in order, into the object at the upload's key without
 * copying data. Each named part must exist with a matching ETag (SRV_EPRECOND
 * otherwise, -EINVAL for out-of-order part numbers). Parts not named are freed.
 * Parts count on the tenant and bucket from their upload on; the object's
 * bytes count on the limited directories of its key at completion (-EDQUOT
 * past one), held there while the op runs so that writes racing it count them.
 * @return 0, -ENOENT (no such upload), SRV_EPRECOND, -EINVAL, -EDQUOT, SRV_ECLASH. */
int core_mpu_complete(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *upload_id, const uint32_t *partnos, const char *const *etags,
                      size_t nparts, const char *final_etag, const struct core_putopt *opt,
                      struct core_attr *out);
/** The metadata blob given at core_mpu_create (free *meta; NULL when empty).
 * @return 0, -ENOENT (no such upload), -ENOMEM. */
int core_mpu_get_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *upload_id, void **meta, size_t *len);
/** Abort: frees every part. @return 0, -ENOENT. */
int core_mpu_abort(struct core *c, const struct core_principal *p, uint64_t bucket,
                   const char *upload_id);

/* ---- versions and object lock (core_version.c) ----
 * Versioning follows S3: a bucket is never versioned until versioning is
 * enabled; it is then enabled or suspended, never unversioned again. In a
 * versioned bucket each key has a chain of versions, newest first: data
 * versions and delete markers. Its current (newest) version, when that is a
 * data version, is the file in the tree: NFS, ListObjects and GET without a
 * version see it. Noncurrent versions are inodes without a directory entry:
 * they keep their extents (nothing is copied) and their metadata, and count
 * in the tenant's and bucket's bytes (not in inode counts or directory
 * quotas). Enabled: every new object, delete marker and NFS change gets a new
 * version id. Suspended: they become the "null" version, replacing the
 * previous null version. A file that predates versioning is its key's null
 * version.
 *
 * NFS in a versioned bucket: a CREATE makes a new version; the first change
 * (WRITE, size SETATTR) of a sealed version makes a new version first (the
 * old one keeps the data, sharing the unchanged extents with the new one);
 * the new version is open (its content changes with each write) until it is
 * sealed, once settled (core_bg_run: committed and unchanged for settle_ms);
 * a REMOVE makes a delete marker; a RENAME moves the current version to the
 * new key as a new version there (the old key gets a delete marker when it
 * has older versions); a LINK is refused (-EXDEV, as across file
 * systems). Old versions are not reachable over NFS.
 *
 * Object lock (only with versioning enabled, for good): a version under
 * retention (until a date; GOVERNANCE, or COMPLIANCE which nobody can
 * shorten) or legal hold cannot be deleted (SRV_ELOCKED), and the current
 * version of a key cannot be changed in place, removed or renamed over NFS
 * (SRV_ELOCKED: NFS3ERR_ACCES). An S3 PUT still makes a new version over
 * it. */
enum core_versioning { CORE_VERS_NONE = 0, CORE_VERS_ENABLED = 1, CORE_VERS_SUSPENDED = 2 };
struct core_bucket_vcfg {
    enum core_versioning versioning;
    bool objlock;                   /* object lock enabled */
    uint32_t lock_mode;             /* default retention of new versions: CORE_LOCK_*, ... */
    uint32_t lock_days, lock_years; /* ... for this long (one of the two) */
};
/** @return 0, SRV_ENOBUCKET. */
int core_bucket_vcfg_get(struct core *c, const struct core_principal *p, uint64_t bucket,
                         struct core_bucket_vcfg *out);
/** Set versioning to ENABLED or SUSPENDED (bucket owner or super).
 * @return 0, SRV_ENOBUCKET, -EACCES, -EINVAL (NONE), SRV_EBADSTATE (suspending a bucket
 * with object lock). */
int core_bucket_versioning_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                               enum core_versioning v);
/** Turn object lock on (for good) with the default retention of @p cfg (lock_mode NONE:
 * none; else days or years > 0). @p cfg->versioning ENABLED also enables versioning
 * (a bucket created with object lock); otherwise it must be enabled already.
 * @return 0, SRV_ENOBUCKET, -EACCES, SRV_EBADSTATE (versioning not enabled), -EINVAL. */
int core_bucket_objlock_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                            const struct core_bucket_vcfg *cfg);

/* Front-end blobs kept per bucket (deleted with it). */
#define CORE_BLOB_LIFECYCLE 2 /* the S3 lifecycle configuration */
#define CORE_BLOB_TIER 3      /* the tier policy (tier/tier_policy.h: its stored form) */
#define CORE_BLOB_CACHE 4     /* cache mode (tier/tier_cache.h: its stored form) */
#define CORE_BLOB_TIER_DIRS 5 /* its directories' tier policies (tier_policy.h TIER_DIRS_KIND) */
/** @param[out] val heap copy (free it). @return 0, -ENOENT, SRV_ENOBUCKET. */
int core_bucket_blob_get(struct core *c, const struct core_principal *p, uint64_t bucket,
                         uint8_t kind, void **val, size_t *len);
/** Replace (@p len 0: delete) the blob (bucket owner or super).
 * @return 0, -ENOENT (deleting none), SRV_ENOBUCKET, -EACCES. */
int core_bucket_blob_put(struct core *c, const struct core_principal *p, uint64_t bucket,
                         uint8_t kind, const void *val, size_t len);
typedef int (*core_blob_cb)(void *arg, uint32_t tenant, uint64_t bucket, const void *val,
                            size_t len);
/** Every bucket's blob of @p kind, by bucket (@p val valid during the call).
 * @return 0, the callback's first nonzero result, -EIO. */
int core_bucket_blob_scan(struct core *c, uint8_t kind, core_blob_cb cb, void *arg);

/** Version @p vid ("null" or an id) of @p key, as core_key_lookup fills it (free out->meta);
 * a delete marker has out->dmarker (and only vid, attr.mtime, attr.uid). Needs read
 * permission on the version. @return 0, -ENOENT (no version of the key at all: no such
 * key), SRV_ENOVERSION, -EINVAL (malformed id), SRV_EBADNAME, -EACCES. */
int core_version_lookup(struct core *c, const struct core_principal *p, uint64_t bucket,
                        const char *key, size_t keylen, const char *vid, struct core_objinfo *out);

/** ListObjectVersions: the keys of @p bucket starting with @p prefix, in binary order,
 * after @p key_marker (NULL: from the start; with @p vid_marker, that key's versions
 * after that version come first), each key's versions newest first (latest set on
 * the current one): data versions (info->attr, etag, vid) and delete markers
 * (info->dmarker). A key of a bucket never versioned, or whose file predates
 * versioning, has the one version "null". Rolled up with @p delim as core_list.
 * Stops after @p max entries (versions and prefixes) or when cb returns nonzero.
 * @return 0, -EACCES, -EINVAL (@p vid_marker malformed, or without a key marker). */
int core_list_versions(struct core *c, const struct core_principal *p, uint64_t bucket,
                       const char *prefix, size_t prefixlen, const char *key_marker, size_t kmlen,
                       const char *vid_marker, const char *delim, size_t delimlen, uint32_t max,
                       core_list_cb cb, void *arg, bool *truncated);

#define CORE_DEL_BYPASS                                                                            \
    0x1 /* GOVERNANCE retention does not hold (x-amz-bypass-governance-retention) */
struct core_delres {
    char vid[CORE_VID_MAX + 1]; /* the version made (a delete marker) or deleted; "" none */
    bool dmarker;               /* it is a delete marker */
};
/** Delete @p key as core_key_delete does, or (@p vid) one version of it for good.
 * Without a version, in a versioned bucket: the current version becomes noncurrent
 * and a new delete marker becomes current (suspended: the null version, data or
 * marker, goes; the marker is the new null version), even for a key with no
 * version yet; out names the marker. With a version: that version goes for good
 * (its data freed once no other version shares it); deleting the current one
 * makes the next newest current (a data version goes back into the tree, with
 * implicit parents as needed). Refused while the version is retained (COMPLIANCE,
 * or GOVERNANCE without CORE_DEL_BYPASS) or on legal hold. @p out may be NULL.
 * Permission: as core_key_delete for the current version; for a version, write
 * and search permission on the bucket.
 * @return 0, SRV_ENOVERSION, -EINVAL (malformed id), SRV_ELOCKED, SRV_ECLASH (the
 * version to make current would make a file where a directory is, or the
 * reverse), -EACCES, -ENOTEMPTY, SRV_EBADNAME. */
int core_key_delete_v(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *key, size_t keylen, const char *vid, unsigned flags,
                      struct core_delres *out);
/** Set the retention of version @p vid (NULL: the current one) of @p key: lengthening
 * it, or GOVERNANCE to COMPLIANCE, always; shortening or removing GOVERNANCE only with
 * CORE_DEL_BYPASS; COMPLIANCE never. Needs object lock on the bucket.
 * @return 0, -ENOENT, SRV_ENOVERSION, SRV_ELOCKED, SRV_EBADSTATE (no object lock),
 * -EINVAL (a delete marker, a mode without a date), -EACCES. */
int core_version_retention_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                               const char *key, size_t keylen, const char *vid,
                               const struct core_lock *lk, unsigned flags);
/** Set or clear the legal hold of version @p vid (NULL: current). Errors as above. */
int core_version_hold_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                          const char *key, size_t keylen, const char *vid, bool on);
/** core_key_set_meta of version @p vid (NULL: the current one). Errors as
 * core_version_lookup, plus -EINVAL for a delete marker. */
int core_version_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                          const char *key, size_t keylen, const char *vid, const void *meta,
                          size_t metalen);
/** ... and its permission bits as core_key_set_meta_mode (@p mode -1: unchanged). */
int core_version_set_meta_mode(struct core *c, const struct core_principal *p, uint64_t bucket,
                               const char *key, size_t keylen, const char *vid, const void *meta,
                               size_t metalen, int mode);

/* ---- quotas, usage and admission ---- */

struct core_usage {
    uint64_t bytes, inodes;
    uint64_t bytes_limit, inodes_limit; /* 0 = unlimited */
};
/** Usage and limits of a tenant (ino 0) or of a bucket/directory inode. Tenant
 * and bucket bytes include acknowledged UNSTABLE writes not committed yet; a
 * directory's count has committed data only. Every byte limit check (here, in
 * core_write and in commits) counts committed usage plus the bytes reserved by
 * writes admitted and not committed yet. */
int core_usage_get(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out);
/** Set hard limits (0 = none) for a tenant (ino 0), a bucket or a directory.
 * A limit below current usage blocks new writes; it never deletes data. */
int core_quota_set(struct core *c, uint32_t tenant, uint64_t ino, uint64_t bytes_limit,
                   uint64_t inodes_limit);
/** Admission check before data is dispatched: would adding @p bytes and
 * @p inodes under directory @p dir exceed a tenant, bucket or directory quota
 * (bytes: with what pending and in-flight writes reserved)? Reserves nothing.
 * @return 0, -EDQUOT. The authoritative check repeats inside the commit txn. */
int core_quota_admit(struct core *c, const struct core_principal *p, uint64_t dir, uint64_t bytes,
                     uint64_t inodes);

/* ---- the metadata store, for the layers above that keep rows of their own ---- */
struct meta_env;
/** The core's metadata store: tenants/, qos/, nfs/ and server/ keep their records in it
 * through meta_record.h. Valid until core_close. */
struct meta_env *core_meta(struct core *c);

/* ---- metrics ---- */
struct core_stats {
    uint64_t commits, commit_ops;  /* group commits, operations they carried */
    uint64_t crc_errors;
    uint64_t bytes_written, bytes_read;
    uint64_t store_capacity, store_free;
    uint64_t store_limit;            /* bytes the data files may grow to */
    uint64_t fs_size, fs_free;       /* the file system holding the data files (0: devices) */
    uint64_t writes_cached, writes_zeroed, writes_direct; /* store_stats: extent writes by path */
    uint64_t writes_dropped; /* cached writes that first dropped their range's cached pages */
    uint64_t freed_dropped;  /* freed extents whose pages were dropped before reuse */
};
void core_stats_get(struct core *c, struct core_stats *out);

/* ---- the remote tier: eviction and recall (core_tier.c) ----
 * The tier (tier/, below the core) decides what to evict and holds the remote
 * copies; the core frees and brings back extents. An evicted file keeps its
 * metadata (size, ETag, times, usage); its reads wait for the range they need
 * (docs/tiering.md). */
/** Read [off, off + len) of evicted file @p ino's remote copy into @p buf (@p n: bytes
 * read). Blocks (a recall thread calls it). @return 0, SRV_ERECALL (the remote is down
 * or failed: retry), SRV_EREMOTECHG (the copy changed or is gone), or another error. */
typedef int (*core_tier_fetch_fn)(void *arg, uint64_t ino, uint64_t off, void *buf, size_t len,
                                  size_t *n);
/** What a fetch's answer said of the remote object besides its bytes. */
struct core_fetch_meta {
    void *blob; /* Content-Type and user metadata, an S3 metadata blob (heap; the core
                 * frees it); "S3M1" alone when the answer had none */
    size_t len;
    char etag[CORE_ETAG_MAX + 1]; /* the ETag the bytes were checked against */
};
/** core_tier_fetch_fn that also fills @p meta from the same answer (on success). */
typedef int (*core_tier_fetch_meta_fn)(void *arg, uint64_t ino, uint64_t off, void *buf, size_t len,
                                       size_t *n, struct core_fetch_meta *meta);
/** The recall settings of one file (its tier policy's, tier_settings.h): bytes of one
 * ranged GET (0: core_tier_config's chunk), chunks of the file fetched at once (0, or
 * more than core_tier_config's streams: those), whole file on a first read or only the
 * range read plus read_ahead bytes. */
struct core_recall_knobs {
    uint32_t chunk, streams, read_ahead;
    bool whole_file;
};
/** Fill @p out for file @p ino. @return 0, or an error (the defaults apply). */
typedef int (*core_tier_knobs_fn)(void *arg, uint64_t ino, struct core_recall_knobs *out);
struct core_tier_config {
    core_tier_fetch_fn fetch;
    void *fetch_arg;
    /* a fetch with the object's metadata (fetch_arg too), for a file of a cache bucket
     * whose metadata was never asked (NULL: core_cache_set_meta's HEAD asks for it) */
    core_tier_fetch_meta_fn fetch_meta;
    core_tier_knobs_fn knobs; /* NULL: the defaults (whole file, chunk and streams below) */
    void *knobs_arg;
    uint32_t threads; /* chunks fetched at once, all recalls (0: 4); twice as many recall
                       * threads fetch, write and commit them */
    uint32_t wait_ms; /* longest wait of a read for its range (0: 10000) */
    uint32_t fail_ms; /* a remote failing this long fails reads with -EIO (0: 60000) */
    uint64_t chunk;   /* bytes of one ranged GET of a recall, rounded up to a multiple of
                       * 1 MiB, at most 64 MiB (0: 8 MiB) */
    uint32_t streams; /* chunks of one file's recall fetched at once (0, or more than
                       * threads: threads) */
};
/** Start the recall threads. Until then a read of an evicted file answers SRV_ERECALL.
 * @return 0, -EINVAL, -ENOMEM, -errno. */
int core_tier_start(struct core *c, const struct core_tier_config *cfg);
/** Stop them (core_close does too). */
void core_tier_stop(struct core *c);
/** Free the extents of file @p ino, whose content is the one of change counter @p change,
 * and mark it evicted, in one txn: only when its tierst record is a confirmed copy of this
 * very content and no background work or uncommitted write is pending on it. In a versioned
 * bucket only the current version, once sealed, is evicted (never a noncurrent one): it
 * lets go of its own hold on each extent, so one a noncurrent version shares stays (it is
 * not counted in @p freed, and its bytes are charged to the bucket's usage again: the file's
 * used bytes count on top of it). Such a file is recalled before it may become noncurrent.
 * @param[out] freed bytes freed (may be NULL). @return 0, -EAGAIN (not evictable now),
 * SRV_ESTALE (gone), or a store error. */
int core_tier_evict(struct core *c, uint64_t ino, uint64_t change, uint64_t *freed);
/** When file @p ino was last read, seconds since the epoch: the later of the reads this
 * run saw (never earlier than the truth) and @p stored_s, the time its tierst record
 * kept from earlier runs (meta_tierst.read_s); with none stored (0), reads before this
 * start count as at the start. */
int64_t core_tier_last_read(struct core *c, uint64_t ino, int64_t stored_s);
/** Does an evicted file need remote @p remote (its only copy of the bytes is there)?
 * @param[out] ino one such file. @return 1 (yes), 0 (no), or a store error. */
int core_tier_remote_needed(struct core *c, uint32_t remote, uint64_t *ino);
#define CORE_TIER_LAT_N 12
struct core_tier_stats {
    uint64_t recalled_bytes, recalls, recall_errors, evictions, evicted_bytes, active;
    uint64_t mem_read_bytes;                  /* bytes readers got from recalled chunks in memory */
    uint64_t buf_maps;                        /* chunk buffers mapped (the rest were reused) */
    uint64_t buf_reuses;                      /* chunks that took a buffer mapped already */
    uint64_t buf_live, buf_live_bytes;        /* chunk buffers mapped now, their bytes */
    double lat_bounds[CORE_TIER_LAT_N];       /* recall latency buckets (seconds) */
    uint64_t lat_counts[CORE_TIER_LAT_N + 1]; /* per bucket (not cumulative); last: +Inf */
    double lat_sum_s;
    uint64_t lat_n;
    /* recall threads and readers waiting for a recalled chunk woken by an event (not
     * their timer), and those of them that found nothing to do: no chunk handed to the
     * thread, the reader's chunk not back (each is woken for its own work only) */
    uint64_t wakeups, wakeups_futile;
};
void core_tier_stats_get(struct core *c, struct core_tier_stats *out);

/* ---- cache mode (core_cmode.c) ----
 * A bucket with a CORE_BLOB_CACHE blob (and a tier policy naming its remote) fronts
 * that remote: listing (core_list), lookup (core_key_lookup, core_lookup) and
 * core_readdir of a directory not imported within the bucket's ttl_s first list the
 * remote directory (through the lister the daemon sets) and make the local names
 * match it: new objects become evicted files (the recall reads them), objects whose
 * ETag changed are dropped to evicted again, objects gone from the remote are removed
 * unless local changes not uploaded yet exist (they win; logged and counted).
 * With CORE_P_NOWAIT a call that would list answers -EWOULDBLOCK (core_key_peek:
 * -EAGAIN). A bucket whose cache mode is read-only refuses changes with -EROFS. */
struct core_cache_obj {
    char *name; /* the name in the directory (no '/') */
    uint64_t size;
    char etag[CORE_ETAG_MAX + 1]; /* the remote's, without quotes */
    int64_t mtime_s;              /* LastModified (0: unknown) */
};
struct core_cache_listing {
    struct core_cache_obj *objs;
    size_t nobjs;
    char **dirs; /* names of the sub-directories (CommonPrefixes without '/') */
    size_t ndirs;
};
/** List directory @p dirkey ("" or "a/b/") of remote @p remote, every page, into
 * @p out (which the core frees with core_cache_listing_free). Blocks (a worker).
 * @return 0, SRV_ERECALL (retryable: the remote is down), or another error. */
typedef int (*core_cache_list_fn)(void *arg, uint32_t remote, const char *dirkey,
                                  struct core_cache_listing *out);
void core_cache_listing_free(struct core_cache_listing *l);
/** Set the lister (before serving; NULL: cache buckets answer SRV_EIMPORT for names
 * never imported and serve what they hold). A listing or lookup that needs a directory
 * never imported while its remote cannot be listed answers SRV_EIMPORT (retryable) until
 * the remote has failed for core_tier_config's fail_ms in a row, then SRV_EIMPORTFAIL. */
void core_cache_set_lister(struct core *c, core_cache_list_fn fn, void *arg);
/** The Content-Type and user metadata of object @p key (bucket-relative) of remote
 * @p remote, which must still have ETag @p etag, as an S3 metadata blob in @p blob (heap;
 * the core frees it). Blocks (a worker). @return 0, SRV_EREMOTECHG (the object changed or
 * is gone), SRV_ERECALL (the remote is down), or another error. */
typedef int (*core_cache_meta_fn)(void *arg, uint32_t remote, const char *key, const char *etag,
                                  void **blob, size_t *len);
/** Set it (before serving; NULL: imported objects show no metadata of the remote's).
 * core_key_lookup of a file of a cache bucket whose content is still its remote object's
 * and whose metadata blob is empty asks it once and keeps the answer (an empty answer is
 * kept as a blob without records, so it is not asked again). A recall of such a file
 * (core_tier_config.fetch_meta) keeps the metadata its GET's answer carries, in the txn
 * of the chunk, with the same checks; core_key_lookup_at of a read recalls the read's
 * first chunk for it instead of asking. */
void core_cache_set_meta(struct core *c, core_cache_meta_fn fn, void *arg);
/** Read the cache-mode blobs again (after one changed). @return 0 or a store error. */
int core_cache_reload(struct core *c);
/** Is @p bucket in cache mode? @param[out] ro read-only (may be NULL). */
bool core_cache_bucket(struct core *c, uint64_t bucket, bool *ro);
/** The key of the directory ("" for a bucket's root, else "a/b/") whose import made the
 * last core call of the calling thread answer SRV_EIMPORT or SRV_EIMPORTFAIL (a front end
 * names it in its message). Never NULL. */
const char *core_cache_import_failed(void);
/** Forget what was imported when of @p bucket (0: of every bucket): the next listing or
 * lookup asks the remote again. */
void core_cache_invalidate(struct core *c, uint64_t bucket);
struct core_cache_stats {
    uint64_t imports, import_errors, created, changed, removed, conflicts;
    uint64_t meta_heads, meta_recalls; /* S3 lookups whose metadata a HEAD asked, or the
                                        * recall of the read's first chunk brought */
};
void core_cache_stats_get(struct core *c, struct core_cache_stats *out);

/* ---- directory prefetch on listing (core_prefetch.c) ----
 * A listing of a directory of a tiered bucket (core_readdir at cookie 0; core_list with
 * delimiter "/", no start-after, and a prefix that is "" or ends in "/", naming an
 * existing directory) whose effective tier settings say dir_prefetch (tier_settings.h)
 * recalls, in the background, the directory's evicted files of at most
 * CORE_PF_FILE_MAX bytes, at most CORE_PF_FILES of them and CORE_PF_BYTES per listing,
 * while the store stays under the bucket policy's high eviction watermark (none: 90 %).
 * The recalls go after every recall a reader waits for. */
#define CORE_PF_FILE_MAX (1u << 20)  /* a file of at most this many bytes is prefetched */
#define CORE_PF_FILES 4096u          /* files per listing, at most */
#define CORE_PF_BYTES (256ull << 20) /* bytes per listing, at most */
/** Start the prefetch thread (after core_tier_start; until then listings queue nothing).
 * @return 0, -EINVAL (started), -ENOMEM, -errno. */
int core_prefetch_start(struct core *c);
/** Stop it (core_close does too). */
void core_prefetch_stop(struct core *c);
struct core_prefetch_stats {
    uint64_t dirs;    /* listings looked at whose settings say dir_prefetch */
    uint64_t files;   /* recalls started by them */
    uint64_t bytes;   /* ... of so many bytes */
    uint64_t full;    /* files not prefetched: the store was too full */
    uint64_t dropped; /* listings not looked at: the queue was full */
};
void core_prefetch_stats_get(struct core *c, struct core_prefetch_stats *out);

/* ==== fast S3 read paths (core_zc.c) ==================================== */

/** What core_key_peek found. */
struct core_peek {
    struct core_objinfo info; /* as core_key_lookup fills it (free info.meta) */
    uint64_t bucket;          /* the bucket's inode */
    struct core_attr battr;   /* the bucket's attributes */
    void *bmeta;              /* the bucket's metadata blob (core_bucket_get) or NULL: free
                               * it, also when the call failed after finding the bucket */
    size_t bmetalen;
    bool data;                /* the whole content is known: n bytes in the caller's
                               * buffer (0 for directories, empty or non-regular files) */
    size_t n;
};

/** core_bucket_lookup + core_key_lookup (+ the content when it is inline in
 * LMDB and fits @p bufsize) in one read transaction. It never touches the
 * extent store, never waits for the metadata writer and never computes an
 * ETag, so it may be called on an event-loop thread (it reads the LMDB map,
 * which can page-fault; accepted for this path, see docs/architecture.md).
 * When the content is in extents or larger than @p bufsize, it returns 0
 * with out->data false: read it with core_read / core_read_pieces.
 * @return 0, SRV_ENOBUCKET, SRV_EBADNAME, -ENOENT, -EACCES, SRV_ECORRUPT,
 *         -EAGAIN (pending UNSTABLE writes or an ETag to compute: use
 *         core_bucket_lookup + core_key_lookup on a worker instead). */
int core_key_peek(struct core *c, const struct core_principal *p, const char *bucket,
                  size_t bucketlen, const char *key, size_t keylen, void *buf, size_t bufsize,
                  struct core_peek *out);

/* A byte range of a file as pieces to send without a user-space copy. */
struct core_piece {
    int fd;          /* >= 0: bytes [off, off + len) of this fd (the store's; never close it,
                      * it stays open until core_close) */
    uint64_t off;
    uint64_t len;
    const void *mem; /* fd < 0: the bytes, or NULL for len zero bytes (a hole) */
};
struct core_pieces {
    struct core_piece *v;
    size_t n;
    uint64_t len;    /* bytes described (the range, cut at end of file) */
    bool eof;        /* the range reached end of file */
    uint64_t copied; /* bytes that had to be read and verified by this call (cold) */
    /* private */
    size_t cap;
    struct core *c;
    uint64_t token;
    bool has_token;
    void **bufs;
    size_t nbufs, capbufs;
    void **refs; /* recalled chunks in memory whose bytes pieces point to */
    size_t nrefs, caprefs;
};

/** Describe [off, off + len) of @p ino (as core_read would return it) as pieces:
 * holes and inline bytes as memory, extents as (fd, offset, length) of the
 * store's buffered fd when their bytes were verified against their CRC32C and
 * are resident in the page cache, else read (into the page cache) and
 * verified first, then handed out the same way. Exact guarantee: bytes sent
 * from an fd piece were verified when they entered the page cache, unless the
 * kernel evicted and re-read them between this call and the send (then they
 * go unchecked; such pages are unmapped by the eviction, so the next read
 * verifies them again). An extent stays known verified for as long as every
 * page of it stays in the page cache (no time limit). Until
 * core_pieces_release the pieces hold a store read token: extents freed
 * meanwhile are not reused (hold the window short: a token held long delays
 * the reuse of freed space). Needs read permission as core_read. On error
 * nothing is held. With CORE_P_NOWAIT, an extent that is not known verified
 * and mapped (it would be read from disk and checked now) or a setattr
 * holding the inode make it answer -EWOULDBLOCK; with CORE_P_CACHED, such an
 * extent that is not wholly in the page cache does.
 * @return 0, -EACCES, -EISDIR, -EINVAL (not a regular file), SRV_ESTALE,
 *         -EIO, SRV_ECORRUPT (CRC mismatch; logged, counted), -ENOMEM,
 *         -EWOULDBLOCK. */
int core_read_pieces(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                     uint64_t len, struct core_pieces *out);
/** Free the pieces and drop their store read token. Never blocks on I/O (may
 * run on a loop thread). Safe on released or zeroed pieces. */
void core_pieces_release(struct core_pieces *ps);

#endif
