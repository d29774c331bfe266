/* SPDX-License-Identifier: Apache-2.0
 * core_int: the base of the core's private headers: struct core and the few
 * helpers every sub-module uses (principals, permission bits, attributes).
 * Nothing outside core/ may include a core private header.
 *
 * The core is three sub-modules in layers, each with its own private header
 * that includes the one below it, and no calls upwards
 * (scripts/check-core-modules.sh checks both):
 *
 *   namespace  core_ns_int.h    POSIX ops, S3 ops, uploads, names, refs,
 *                               lifecycle, cache mode (core_ns.c core_posix.c
 *                               core_s3.c core_upload.c core_main.c
 *                               core_cmode.c core_prefetch.c)
 *   data       core_data_int.h  extents, pending writes, reads, writes,
 *                               truncation, read cache, zero-copy pieces
 *                               (core_extent.c core_data.c core_pend.c
 *                               core_cache.c core_zc.c)
 *   quota      core_quota_int.h usage, limits, reservations, rename marks
 *                               (core_quota.c core_resv.c)
 *   base       core_int.h       this header (core_perm.c)
 *
 * Each sub-module keeps its state in its own struct (c->quota, c->data,
 * c->ns), defined in its header, so a lower one cannot reach an upper one's.
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
#include "meta_bucket.h"
#include "meta_dirent.h"
#include "meta_extent.h"
#include "meta_free.h"
#include "meta_inode.h"
#include "meta_keyidx.h"
#include "meta_mpu.h"
#include "meta_usage.h"
#include "meta_version.h"
#include "store.h"

_Static_assert(CORE_NAME_MAX == META_NAME_MAX, "names: core and meta agree");
_Static_assert(CORE_KEY_MAX == META_KEY_MAX, "keys: core and meta agree");
_Static_assert(CORE_ETAG_MAX == META_ETAG_MAX, "ETags: core and meta agree");

#define CORE_FILE_MAX (1ull << 50) /* largest file offset accepted (-EFBIG beyond) */
#define CORE_MAY_R 4
#define CORE_MAY_W 2
#define CORE_MAY_X 1

struct core__quota; /* core_quota_int.h */
struct core__data;  /* core_data_int.h */
struct core__ns;    /* core_ns_int.h */

/* Cache-mode buckets (core_cmode.c keeps it; the base answers "read-only?" for every
 * sub-module). Under mu. */
struct core__cment {
    uint64_t bucket;
    uint32_t ttl_s;
    bool ro;
};
#define CORE_CM_HASH 1024
struct core__cdir { /* when a directory of a cache bucket was imported */
    struct core__cdir *next;
    uint64_t dir, bucket;
    int64_t at_ms; /* start of the listing that imported it (0: never) */
    bool busy;     /* an import runs */
    bool loaded;   /* its persisted import time was looked for (core_cmode.c) */
    bool once;     /* imported by this run (core_cache_invalidate leaves it) */
    /* never imported and failing: the start of the first failed listing in a row, and of
     * the last one (0: none failed since the last success) */
    int64_t fail_since_ms, fail_last_ms;
};
struct core__cm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct core__cment *v;
    size_t n;
    struct core__cdir *h[CORE_CM_HASH];
    core_cache_list_fn list;
    void *list_arg;
    core_cache_meta_fn meta; /* an imported object's metadata (NULL: none asked) */
    void *meta_arg;
    uint64_t conf_seen[256]; /* conflicts reported (file and remote ETag), not again */
    atomic_uint_fast64_t imports, import_errors, created, changed, removed, conflicts;
    atomic_uint_fast64_t meta_heads, meta_recalls; /* metadata asked by HEAD, by a recall */
};

struct core {
    struct core_config cfg;
    char *data_dir;
    struct meta_env *meta;
    struct store *store;
    uint64_t verifier;
    atomic_uint_fast64_t bytes_written, bytes_read, crc_errors;
    struct core__quota *quota;
    struct core__data *data;
    struct core__ns *ns;
    struct core__cm cm;
};

/* ---- core_perm.c ---- */
void core__now(struct timespec *ts);
/** Inode for principal access: SRV_ESTALE when missing or another tenant's or wrong gen,
 * or a noncurrent version and @p p lacks CORE_P_VERSIONS. */
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
/** Does @p bucket refuse changes by @p p (a read-only cache bucket, and @p p not the
 * cache's own import)? @return -EROFS or 0. */
int core__cm_ro(struct core *c, const struct core_principal *p, uint64_t bucket);
/** core__cm_ro for the bucket of inode @p ino (reads it in a txn of its own when some
 * read-only cache bucket exists). @return -EROFS, 0, or a store error. */
int core__cm_ro_ino(struct core *c, const struct core_principal *p, uint64_t ino);
/** If @p bucket is a cache bucket, make directory @p dir due for revalidation (the next
 * lookup or listing asks the remote). @return whether it is one. */
bool core__cm_stale(struct core *c, uint64_t bucket, uint64_t dir);
/** Is @p bucket a cache bucket? */
bool core__cm_is(struct core *c, uint64_t bucket);
struct meta_tier_copy;
/** Does file @p ino (in @p t) of a cache bucket still hold its remote object's content
 * (its tierst record, read into @p cp: the inode's change counter, an ETag), with no
 * metadata asked yet (an empty objmeta blob)? The check of both ways the remote's
 * Content-Type and user metadata come (a HEAD, core_cmode.c; a recall's GET,
 * core_tier.c), before asking and again in the txn that keeps them.
 * @param[out] oetag its objmeta ETag (@p oesize bytes). @param[out] change its change
 * counter. */
bool core__cm_meta_due(struct meta_txn *t, uint64_t ino, struct meta_tier_copy *cp, char *oetag,
                       size_t oesize, uint64_t *change);
/** Keep the remote object's metadata @p blob (@p len bytes, from a HEAD or a recall's
 * GET checked against ETag @p etag while @p ino was at change counter @p change) in
 * txn @p t, if still due (core__cm_meta_due) for that same content. @return 0 (kept or
 * no longer due), or an error. */
int core__cm_meta_keep(struct meta_txn *t, uint64_t ino, uint64_t change, const char *etag,
                       const void *blob, size_t len);

#endif
