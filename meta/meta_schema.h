/* SPDX-License-Identifier: Apache-2.0
 * meta_schema: every table, key and value layout of s3nfs's metadata, and
 * the schema version, in one place. Only meta/'s typed record modules encode
 * and decode them (named after each table below).
 *
 * Byte order: keys are big-endian (so the engine's bytewise order is numeric
 * order); values are fixed-layout structs in host byte order (the store is
 * not portable between architectures of different endianness; the version
 * record is big-endian so a foreign store is refused, not misread).
 *
 * Tables (LMDB: named databases of one environment, directory
 * <data_dir>/meta):
 *   meta      "version" -> be32 schema version; "next_ino" -> be64 next inode
 *             number; "commit_seq" -> be64 batch counter (written by every
 *             group commit so each commit syncs)
 *   inodes    be64 ino -> struct meta_inode (meta_inode.c, with inline,
 *             objmeta, orphans, roots and meta/next_ino)
 *   dirents   be64 dir + name bytes -> struct meta_dirent (meta_dirent.c,
 *             with dircookie)
 *   dircookie be64 dir + be64 cookie -> be64 ino + name bytes (readdir order:
 *             a cookie is 2^63 | hash63(name), probed +1 on collision, so it
 *             is stable for the entry's life and across restarts; at most
 *             META_COOKIE_MAX: a value above wraps to 2^63, so that NFS can
 *             map every cookie below 2^63 (nfs_dir.c). Stores made before
 *             that rule may hold one of the 3 top values: NFS skips such an
 *             entry, logged)
 *   dirpath   be64 dir -> key path of the directory relative to its bucket,
 *             ending in '/' ("" for the bucket itself); only for directories
 *             inside a bucket
 *   keyidx    be64 bucket + meta_keyenc(key) -> struct meta_keyval + tail
 *             (meta_keyidx.c, with dirpath).
 *             Files are indexed by their key "a/b/c", directories by "a/b/".
 *             LMDB keys are limited to 511 bytes: a key of up to
 *             META_KEY_VERBATIM bytes is stored verbatim; a longer key is
 *             stored as its first META_KEY_HEAD bytes + be64 hash of the whole
 *             key, and the value carries the rest of the key. Order is exact
 *             binary order except among keys sharing their first
 *             META_KEY_HEAD (495) bytes.
 *   extents   be64 ino + be64 file offset -> struct meta_extent (meta_extent.c,
 *             with xcrc). An extent
 *             covers [offset, offset + vlen) of the file; extents never
 *             overlap; bytes covered by no extent read as zeros. (Pending
 *             UNSTABLE writes are not here until committed: core/core_pend.c.)
 *   inline    be64 ino -> file bytes (files stored inline) or symlink target
 *   free      the extent store's free-space map (meta_free.c): be32 dev + be64
 *             offset -> be64 length of a free range, and a marker record
 *             (records' meaning: store/store_int.h)
 *   roots     be32 tenant -> be64 root directory inode
 *   usage     be32 tenant + be64 ino (0 = the tenant) -> struct meta_usage
 *             (meta_usage.c).
 *             Tenants and buckets always have one; directories only when a
 *             limit was set on them.
 *   mpu       be64 bucket + be64 upload id -> struct meta_mpu + key + meta blob
 *             (meta_mpu.c, with mpupart)
 *   mpupart   be64 upload id + be32 part number -> struct meta_part + extents
 *   orphans   be64 ino -> (empty): unlinked inodes still held open; reclaimed
 *             at the next open after a crash
 *   objmeta   be64 ino -> u8 etag length + etag + opaque metadata blob (an
 *             object's S3 metadata; for a bucket's inode, no ETag and the S3
 *             front end's bucket configuration: s3api/s3_authz.c)
 *   xcrc      be32 dev + be64 offset of an extent -> u32 CRC32C of each
 *             META_BCRC_BLOCK bytes of its stored data (last block partial).
 *             Written in the txn that makes the extent used, deleted in the
 *             one that frees it; lets a small read verify only the blocks it
 *             touches. An extent without a record is verified whole.
 *   t_tenants t_users t_keys t_exports t_qos t_config: generic records
 *             (meta_record.c), layouts owned by tenants/, qos/, nfs/, server/.
 *   vkeys     be64 bucket + meta_keyenc(key) -> struct meta_keyval + tail, the
 *             encoding of keyidx (meta_keyidx.c): the keys of a bucket that have
 *             a version chain (versioned buckets); meta_keyval.ino is the
 *             chain's id (taken from meta/next_ino), type 0.
 *   versions  be64 chain -> struct meta_vchain + key bytes: the chain's header;
 *             be64 chain + be64 ~vseq -> struct meta_version: one version of
 *             the key, newest first (vseq from meta/next_ino, so increasing
 *             in commit order) (meta_version.c, with vino)
 *   vino      be64 ino -> be64 chain + be64 vseq: the version an inode holds
 *             (a current file with a version record, or a noncurrent version,
 *             which is an inode without a directory entry)
 *   xref      be32 dev + be64 offset of an extent -> be32 number of inodes
 *             whose extent maps hold it (>= 2; no record: one). Versions of a
 *             file changed in place over NFS share their unchanged extents;
 *             an extent is freed when its last holder lets it go
 *             (meta_extent.c)
 *   bucketcfg be64 bucket + u8 kind -> value (meta_bucket.c): kind 1 struct
 *             meta_bucketcfg (versioning, object lock); kinds 2.. opaque blobs
 *             of the front ends (2: the S3 lifecycle configuration)
 *   dirty     be64 ino -> struct meta_dirty: files whose ETag is unknown or
 *             whose open version is to be sealed, for the background worker
 *             (core_bg.c) (meta_inode.c)
 *   tierst    be64 ino -> struct meta_tierst + key bytes: the copy of a file that
 *             the tier's uploader made on a remote (tier_upload.c): which remote,
 *             which key, the inode's change counter the copy was made from, its
 *             size, remote ETag and time, and the file's last read (for eviction
 *             by age, kept across restarts) (meta_tier.c). A record whose file is
 *             gone, or whose key no longer names the file, is a remote copy to
 *             delete.
 *
 * Version history: 1 = initial layout. Compatible additions within version 1
 * (older stores read as before): meta_mpu.mode (was padding, 0 = 0600); a
 * bucket inode's objmeta record (absent = no configuration); a part's
 * checksum after its ETag in meta_part.etag (zeros before: none).
 * 2 = vkeys, versions, vino, xref, bucketcfg, dirty (a version 1 store is
 * upgraded at open: the new tables start empty).
 * 3 = tierst (a version 1 or 2 store is upgraded at open: it starts empty).
 *     Compatible addition: meta_tierst.read_s (was padding: 0 = no read time known;
 *     older builds ignore it, and write 0 in the records they write).
 * 4 = the inode flag META_I_EVICTED (nothing to upgrade; a build that does not know
 *     the flag would read an evicted file as zeros, so it must refuse the store). */
#ifndef META_SCHEMA_H
#define META_SCHEMA_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define META_SCHEMA_VERSION 4u
#define META_SCHEMA_OLDEST 1u /* older versions this build upgrades at open */

#define META_NAME_MAX 255  /* bytes of a directory entry's name */
#define META_KEY_MAX 1024  /* bytes of an S3 key in the key index */
#define META_ETAG_MAX 80   /* bytes of an ETag in objmeta */

enum meta_dbi {
    META_DBI_META = 0,
    META_DBI_INODES,
    META_DBI_DIRENTS,
    META_DBI_DIRCOOKIE,
    META_DBI_DIRPATH,
    META_DBI_KEYIDX,
    META_DBI_EXTENTS,
    META_DBI_INLINE,
    META_DBI_FREE,
    META_DBI_ROOTS,
    META_DBI_USAGE,
    META_DBI_MPU,
    META_DBI_MPUPART,
    META_DBI_ORPHANS,
    META_DBI_OBJMETA,
    META_DBI_XCRC,
    META_DBI_T_TENANTS,
    META_DBI_T_USERS,
    META_DBI_T_KEYS,
    META_DBI_T_EXPORTS,
    META_DBI_T_QOS,
    META_DBI_T_CONFIG,
    META_DBI_VKEYS,
    META_DBI_VERSIONS,
    META_DBI_VINO,
    META_DBI_XREF,
    META_DBI_BUCKETCFG,
    META_DBI_DIRTY,
    META_DBI_TIERST,
    META_DBI__COUNT
};

/* DBI names, indexed by enum meta_dbi. */
#define META_DBI_NAMES                                                                             \
    {                                                                                              \
        "meta", "inodes", "dirents", "dircookie", "dirpath", "keyidx", "extents", "inline",        \
            "free", "roots", "usage", "mpu", "mpupart", "orphans", "objmeta", "xcrc", "t_tenants", \
            "t_users", "t_keys", "t_exports", "t_qos", "t_config", "vkeys", "versions", "vino",    \
            "xref", "bucketcfg", "dirty", "tierst"                                                 \
    }

/* ---- inodes ---- */
#define META_INODE_REC_VER 1
#define META_I_INLINE 0x100 /* data lives in the inline DBI (not extents) */
#define META_I_EVICTED                                                                             \
    0x1000 /* the tier evicted its data: its extents (if any) are recalled parts; the rest is      \
            * on the remote (its tierst record); used keeps the bytes it held (core/core_tier.c)   \
            */
#define META_I_VLOCK 0x2000 /* its version has (or had) retention or a legal hold: check it */
#define META_I_VSEALED 0x4000 /* its version is sealed: a change makes a new version first */
#define META_I_VREC                                                                                \
    0x8000 /* it holds a version (vino); without a directory entry (nlink 0)                       \
            * it is a noncurrent version */
/* flags also carry CORE_A_* in the low byte */

struct meta_inode {
    uint8_t rec_ver;  /* META_INODE_REC_VER */
    uint8_t type;     /* enum core_ftype */
    uint16_t flags;   /* CORE_A_* | META_I_* */
    uint32_t mode;    /* permission bits only */
    uint32_t nlink;
    uint32_t uid, gid;
    uint32_t gen;
    uint32_t tenant;
    uint32_t nchild;  /* directories: number of entries */
    uint64_t size;
    uint64_t used;    /* data bytes held (extent lengths + inline bytes) */
    uint64_t change;
    uint64_t parent;
    uint64_t bucket;  /* bucket inode (self for a bucket, 0 for a tenant root) */
    uint64_t verf;    /* exclusive-create verifier (0 = none) */
    int64_t atime_s, mtime_s, ctime_s, btime_s;
    uint32_t atime_ns, mtime_ns, ctime_ns, btime_ns;
};

/* ---- dirents ---- */
struct meta_dirent {
    uint64_t ino;
    uint64_t cookie;
    uint32_t type;
    uint32_t pad;
};
#define META_COOKIE_BASE (1ull << 63)
#define META_COOKIE_MAX (UINT64_MAX - 3) /* probing wraps to META_COOKIE_BASE past it */

/* ---- key index ---- */
#define META_KEY_VERBATIM 503u /* 8 + 503 = 511, LMDB's key limit */
#define META_KEY_HEAD 495u     /* long keys: head + be64 hash */
#define META_KEYENC_MAX 503u
struct meta_keyval {
    uint64_t ino;
    uint32_t type;     /* enum core_ftype */
    uint32_t taillen;  /* bytes of key beyond META_KEY_HEAD stored after this struct */
};

/* ---- extents ---- */
struct meta_extent {
    uint32_t dev;
    uint32_t len;  /* bytes stored (covered by crc) */
    uint64_t off;
    uint32_t crc;
    uint32_t vlen; /* bytes of the file it covers (<= len; a shrinking truncate replaces the
                    * extent holding the new end by a cut copy, older stores may have < len) */
};

#define META_BCRC_BLOCK 16384u
#define META_BCRC_MAX 64u /* blocks of a STORE_EXTENT_MAX extent */

/* ---- usage ---- */
struct meta_usage {
    uint64_t bytes, inodes;
    uint64_t bytes_limit, inodes_limit; /* 0 = none */
};

/* ---- multipart ---- */
struct meta_mpu {
    uint32_t tenant;
    uint32_t uid, gid;
    uint32_t keylen;
    uint32_t metalen;
    uint32_t mode; /* permission bits of the object it completes into (0 in uploads made
                    * before it was recorded: then 0600) */
    int64_t init_s;
    uint32_t init_ns;
    uint32_t pad2;
    /* followed by key bytes, then meta bytes */
};
struct meta_part {
    uint64_t size;
    int64_t mtime_s;
    uint32_t mtime_ns;
    uint32_t nextents;
    char etag[88]; /* NUL-terminated; when at most 40 bytes, bytes 41.. may hold the part's
                    * additional checksum "A:base64", NUL-terminated (zeros in older records) */
    /* followed by nextents struct meta_extent; extent i covers part bytes
     * [sum of previous lengths, + len) */
};

/* ---- versions ---- */
struct meta_vchain {
    uint64_t bucket;
    uint64_t null_vseq; /* vseq of the chain's null version, 0: none */
    uint32_t keylen;    /* followed by the key bytes */
    uint32_t pad;
};
#define META_V_NULL 0x1   /* the "null" version (suspended or never-versioned puts) */
#define META_V_DMARK 0x2  /* a delete marker (ino 0) */
#define META_V_HOLD 0x4   /* legal hold on */
#define META_V_SEALED 0x8 /* content final: an NFS change makes a new version first */
#define META_LOCK_NONE 0
#define META_LOCK_GOVERNANCE 1
#define META_LOCK_COMPLIANCE 2
struct meta_version {
    uint64_t ino;    /* the inode holding the version's data and metadata; 0: delete marker */
    uint64_t rand;   /* second half of the version id (0 for the null version) */
    uint32_t flags;  /* META_V_* */
    uint32_t uid;    /* who made it (the owner of a delete marker) */
    int64_t mtime_s; /* when it was made */
    uint32_t mtime_ns;
    uint32_t lock;    /* META_LOCK_*: retention mode */
    int64_t until_s;  /* retained until (seconds since the epoch), with lock */
    int64_t noncur_s; /* when it stopped being the current version (0: current) */
};

/* ---- bucket configuration (bucketcfg kind 1) ---- */
#define META_BCFG_CORE 1
#define META_BCFG_LIFECYCLE 2
#define META_VERS_NONE 0 /* never versioned */
#define META_VERS_ENABLED 1
#define META_VERS_SUSPENDED 2
#define META_BC_OBJLOCK 0x1 /* object lock enabled (versioning stays enabled) */
struct meta_bucketcfg {
    uint32_t versioning; /* META_VERS_* */
    uint32_t flags;      /* META_BC_* */
    uint32_t lock;       /* default retention mode (META_LOCK_*), with ... */
    uint32_t lock_days;  /* ... this many days, or ... */
    uint32_t lock_years; /* ... years (one of the two is 0) */
    uint32_t pad;
};

/* ---- background work (dirty) ---- */
#define META_DIRTY_ETAG 0x1 /* the ETag is unknown: compute the MD5 */
#define META_DIRTY_SEAL 0x2 /* the file's current version is open: seal it */
struct meta_dirty {
    uint64_t bucket;
    uint64_t change; /* the inode's change counter when noted */
    int64_t since_s; /* when the file last changed */
    uint32_t since_ns;
    uint32_t flags; /* META_DIRTY_* */
};

/* ---- the tier's remote copies (tierst) ---- */
#define META_TIERST_REC_VER 1
struct meta_tierst {
    uint32_t rec_ver; /* META_TIERST_REC_VER */
    uint32_t remote;  /* the remote's id (tenants' records) */
    uint64_t bucket;  /* the bucket inode the file was in */
    uint64_t change;  /* the inode's change counter the copy was made from */
    uint64_t size;    /* bytes copied */
    int64_t time_s;   /* when the copy was confirmed (seconds since the epoch) */
    uint32_t keylen;  /* bytes of the bucket-relative key that follow this struct */
    uint32_t read_s;  /* the file's last client read known (seconds since the epoch; coarse:
                       * the uploader's passes and a clean stop write it, meta_tier_note_read);
                       * 0: none known (a record of an older build, whose field was padding) */
    char etag[META_ETAG_MAX]; /* the remote's ETag, NUL-terminated */
};

/* ---- big-endian helpers for keys ---- */
static inline void meta_be64_put(void *p, uint64_t v)
{
    uint8_t *b = p;
    for (int i = 7; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t meta_be64_get(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

static inline void meta_be32_put(void *p, uint32_t v)
{
    uint8_t *b = p;
    for (int i = 3; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint32_t meta_be32_get(const void *p)
{
    const uint8_t *b = p;
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

/** Walks an S3 object metadata blob (the opaque part of objmeta; s3api/s3_meta.c
 * writes it): "S3M1", then records of
 *   u8 type | be16 key length | key | be32 value length | value.
 * Calls @p cb for each record once the whole record is checked, in order; the
 * pointers go into @p blob. An empty blob has no records. Pure.
 * @return 0, or -EINVAL (bad magic or a truncated record; the records before it
 * were passed to @p cb). */
typedef void (*meta_objmeta_cb)(void *arg, int type, const unsigned char *k, size_t kl,
                                const unsigned char *v, size_t vl);

static inline int meta_objmeta_walk(const void *blob, size_t len, meta_objmeta_cb cb, void *arg)
{
    const unsigned char *p = blob, *end = p + len;
    if (len == 0 || !blob)
        return 0;
    if (len < 4 || memcmp(p, "S3M1", 4) != 0)
        return -EINVAL;
    p += 4;
    while (p < end) {
        if (end - p < 3)
            return -EINVAL;
        int type = p[0];
        size_t kl = ((size_t)p[1] << 8) | p[2];
        p += 3;
        if ((size_t)(end - p) < kl + 4)
            return -EINVAL;
        const unsigned char *k = p;
        p += kl;
        size_t vl = meta_be32_get(p);
        p += 4;
        if ((size_t)(end - p) < vl)
            return -EINVAL;
        cb(arg, type, k, kl, p, vl);
        p += vl;
    }
    return 0;
}

/** FNV-1a 64-bit hash (names, long keys). */
static inline uint64_t meta_hash64(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    /* final avalanche so short names spread over the whole range */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/** Encode @p key into @p out (>= META_KEYENC_MAX bytes). @return encoded length. */
static inline size_t meta_keyenc(const char *key, size_t len, uint8_t *out)
{
    if (len <= META_KEY_VERBATIM) {
        memcpy(out, key, len);
        return len;
    }
    memcpy(out, key, META_KEY_HEAD);
    meta_be64_put(out + META_KEY_HEAD, meta_hash64(key, len));
    return META_KEY_HEAD + 8;
}

#endif
