/* SPDX-License-Identifier: Apache-2.0
 * tier_upload: the uploader of the remote tier. It copies every regular file
 * of a bucket with a tier policy (tier_policy.h) to the policy's remote as a
 * plain object (remote prefix + the file's bucket-relative key, its
 * Content-Type and user metadata), once the file has been unchanged for the
 * policy's upload_after_s, and deletes remote copies whose file is gone.
 *
 * What is to do is found by scanning, not queued: a file is uploaded when its
 * inode's change counter, its key or its bucket's remote differ from its
 * record in the tierst table (meta_tier.h), and a tierst record whose file is
 * gone (and whose key names no other file) is a remote copy to delete. So
 * nothing written is ever forgotten, after a crash or a SIGKILL included: the
 * next pass finds it. A scanner thread passes over the tiered buckets every
 * poll_ms; worker threads upload (small files in one PUT, larger ones as a
 * multipart upload with `parallel` parts in flight), confirm with a HEAD
 * (size, and the ETag when the remote gave one; an empty file's PUT answers the
 * known empty MD5, which confirms it without a HEAD), and record the copy in one
 * metadata op. A renamed file whose old copy holds its bytes (same change counter,
 * or its bytes hashed locally to the copy's ETag) is copied server-side to its new
 * key (CopyObject, or UploadPartCopy for large files), guarded by the old copy's
 * ETag (x-amz-copy-source-if-match), confirmed by a HEAD, then the old key deleted. A file that
 * changed while it was read is not recorded (its multipart upload is aborted) and goes again on a
 * later pass.
 *
 * Remotes are reached through the tier's S3 client (tier_s3.h) on one event
 * loop thread of the uploader's own; workers block on disk reads and wait for
 * the client with tier_s3_run(), so no front-end loop ever waits for a remote.
 * A retryable failure (remote down, 5xx, timeouts) backs the whole remote off
 * (exponential, with jitter, up to retry_max_ms); other failures back the file
 * off. Local writes never wait for the uploader (but past a dirty bound QoS holds
 * writers until uploads confirm: tier_dirty.h). At start, multipart uploads
 * left on a remote by an earlier run (begun before this start) are aborted.
 *
 * The daemon provides the bytes and the remotes through callbacks (the core's
 * read; tenants' remote records), so this module knows nothing above meta/.
 * Thread: every call is thread-safe. */
#ifndef TIER_UPLOAD_H
#define TIER_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier_dirty.h"
#include "tier_s3.h"

struct meta_env;
struct evbuffer;
struct tier_upload;

/** A remote as the uploader needs it: cfg points into the strings below. */
struct tier_upload_remote {
    struct tier_s3_config cfg;
    int parallel; /* parts of one file in flight */
    char endpoint[256], region[64], bucket[64], prefix[512], ca_file[512];
    char access_key[160], secret_key[160], connect_host[64];
};

/** Fill @p out for remote @p id (may block: name resolution). @return 0, -ENOENT (no
 * such remote), -EACCES (it may not be reached now), or another error. */
typedef int (*tier_upload_remote_fn)(void *arg, uint32_t id, struct tier_upload_remote *out);
/** Read [off, off + len) of file @p ino of @p tenant into @p buf (@p n: bytes read; fewer
 * at the end of the file). @return 0 or an error. */
typedef int (*tier_upload_read_fn)(void *arg, uint32_t tenant, uint64_t ino, uint64_t off,
                                   void *buf, size_t len, size_t *n);

/** Free file @p ino's local extents (its content: change counter @p change) and mark it
 * evicted (the core checks its copy is confirmed in the same txn). @return 0, -EAGAIN
 * (not evictable now), or another error. */
typedef int (*tier_upload_evict_fn)(void *arg, uint64_t ino, uint64_t change, uint64_t *freed);
/** When file @p ino was last read (seconds since the epoch; never earlier than the
 * truth), given @p stored_s, the time its tierst record holds (0: none). */
typedef int64_t (*tier_upload_last_read_fn)(void *arg, uint64_t ino, int64_t stored_s);
/** File @p ino of @p tenant's size as clients see it now, writes not committed yet
 * included (NFS UNSTABLE). @return 0 or an error. */
typedef int (*tier_upload_size_fn)(void *arg, uint32_t tenant, uint64_t ino, uint64_t *size);
/** Does file @p ino have writes not committed yet (NFS UNSTABLE)? @p last_ns gets the
 * time of the last one (real time, ns). @return 1 (yes), 0 (no). */
typedef int (*tier_upload_pending_fn)(void *arg, uint64_t ino, int64_t *last_ns);
/** The local store's used bytes and capacity now. @return 0 or an error. */
typedef int (*tier_upload_capacity_fn)(void *arg, uint64_t *used, uint64_t *cap);

struct tier_upload_config {
    struct meta_env *meta;
    tier_upload_read_fn read;
    void *read_arg;
    tier_upload_remote_fn remote;
    void *remote_arg;
    uint32_t workers;       /* upload threads (0: 4) */
    uint32_t poll_ms;       /* period of the scanner's passes (0: 1000) */
    uint64_t part_size;     /* multipart part size; larger files go multipart (0: 8 MiB) */
    uint32_t retry_base_ms; /* first back-off (0: 1000) */
    uint32_t retry_max_ms;  /* longest back-off (0: 300000) */
    /* eviction (NULL evict: policies' eviction fields are not acted on) */
    tier_upload_evict_fn evict;
    tier_upload_last_read_fn last_read;
    tier_upload_capacity_fn capacity;
    tier_upload_size_fn size; /* for the dirty bound (NULL: the committed size) */
    /* a file with uncommitted writes (its writer still at it) is not due by its delay
     * until they have been quiet 2 s (NULL: not asked); a barrier or a hasten still
     * makes it due */
    tier_upload_pending_fn pending;
    /* a renamed file's copy is copied server-side to the new key: by one CopyObject up
     * to this size, larger by UploadPartCopy (0: 5 GiB, S3's CopyObject limit) */
    uint64_t copy_max;
    void *core_arg;           /* the four callbacks' argument */
    /* the dirty-bytes bound (tier_dirty.h; NULL: none): the scanner publishes
     * each bucket's levels and pending bytes there, uploads confirmed are taken
     * off, and a bucket past its bound has every pending file due at once
     * (its upload delay does not apply). Owned by the caller; must outlive the
     * uploader. */
    struct tier_dirty *dirty;
};

/** Start the scanner, the workers and the client loop. The first started uploader
 * is also the process's (tier_upload_default()).
 * @return 0, -EINVAL, -ENOMEM, -errno (threads). */
int tier_upload_start(struct tier_upload **out, const struct tier_upload_config *cfg);
/** Stop every thread (uploads in flight are cancelled; they go again after the next
 * start) and free. Safe on NULL. */
void tier_upload_stop(struct tier_upload *u);
/** The uploader started first and not stopped yet, or NULL. */
struct tier_upload *tier_upload_default(void);
/** The dirty bound the uploader was started with (cfg.dirty; NULL: none). */
struct tier_dirty *tier_upload_dirty(struct tier_upload *u);
/** Is file @p ino queued for upload or being uploaded (copied) now? Cheap (a lock held
 * briefly); for the core's background worker, which puts its MD5 of such a file off
 * until the upload is done (core_bg_set_later). Safe on NULL (false). */
bool tier_upload_busy(struct tier_upload *u, uint64_t ino);
/** Run a pass soon (a policy changed). */
void tier_upload_kick(struct tier_upload *u);
/** Remote @p id was changed in place (credentials, limits): its client is made again
 * from the stored remote at its next use, without aborting the multipart uploads in
 * flight (the old client is kept until the stop, for the requests that hold it). */
void tier_upload_remote_changed(struct tier_upload *u, uint32_t id);

enum tier_file_state {
    TIER_STATE_NONE = 0,  /* not in a tiered bucket */
    TIER_STATE_LOCAL,     /* only local (not uploaded yet, or changed since) */
    TIER_STATE_UPLOADING, /* being uploaded now */
    TIER_STATE_UPLOADED,  /* the remote holds this content under this key */
    TIER_STATE_EVICTED,   /* and the local extents were freed: reads recall it */
};
const char *tier_file_state_name(enum tier_file_state s);

struct tier_file_info {
    enum tier_file_state state;
    char etag[80];  /* UPLOADED, EVICTED: the remote's ETag */
    int64_t time_s; /* UPLOADED, EVICTED: when it was confirmed */
};
/** The state of file @p ino at @p key of @p bucket whose change counter is @p change.
 * A bucket the last pass did not find tiered answers TIER_STATE_NONE without reading
 * the store (so a new policy shows after one pass). Cheap enough for an event-loop
 * thread (a lock held briefly, one read transaction for tiered buckets).
 * @return 0, or a store error. */
int tier_upload_state(struct tier_upload *u, uint64_t bucket, uint64_t ino, uint64_t change,
                      const char *key, size_t keylen, struct tier_file_info *out);

/** What the last complete pass found in one bucket. */
struct tier_bucket_stats {
    bool tiered;            /* the bucket has a policy (at the last pass) */
    uint64_t passes;        /* complete passes that looked at it */
    uint64_t pending_files; /* files to upload (regardless of the delay) */
    uint64_t pending_bytes;
    int64_t oldest_s;         /* age of the oldest change not uploaded, seconds */
    uint64_t deletes_pending; /* remote copies to delete */
    uint64_t uploaded_files;  /* files whose copy is current */
    uint64_t uploading;       /* now */
    uint64_t remote_bytes;    /* bytes of the files whose copy is current */
    uint64_t local_bytes;     /* bytes held locally by the bucket's regular files */
    uint64_t evicted_files;   /* files evicted (their bytes on the remote only) */
    uint64_t evicted_bytes;
    uint64_t evictable_files; /* copied, not pinned, not evicted: may be evicted */
    uint64_t evictable_bytes;
    uint64_t evictions;       /* files this daemon evicted since it started */
    char last_error[256];     /* the last failure on this bucket's remote, or "" */
    int64_t last_error_s;
};
/** @return 0, -ENOENT (no pass looked at the bucket yet). */
int tier_upload_bucket_stats(struct tier_upload *u, uint64_t bucket, struct tier_bucket_stats *out);

/** Flush barrier: from now on every file of @p bucket changed before this moment is
 * due at once (its delay does not apply), and @p barrier names the moment.
 * @return 0. */
int tier_upload_flush(struct tier_upload *u, uint64_t bucket, uint64_t *barrier);
/** Make every file of @p bucket last changed at or before @p before_ns (real time, ns)
 * due at once, whatever the policy's delay (a lifecycle Transition wants it on the
 * remote now). No barrier to wait on: the caller looks at the file's state again.
 * @return 0, -ENOMEM. */
int tier_upload_hasten(struct tier_upload *u, uint64_t bucket, int64_t before_ns);
/** Is everything of @p bucket written before @p barrier uploaded (and every remote
 * delete before it sent)? Known only after a pass that began after the barrier.
 * @return 0, -EINVAL (not a barrier of this bucket). */
int tier_upload_flush_done(struct tier_upload *u, uint64_t bucket, uint64_t barrier, bool *done);

/** One object directly in a listed directory: @p name relative to it. @return 0 to go on. */
typedef int (*tier_list_obj_cb)(void *arg, const char *name, uint64_t size, const char *etag,
                                time_t mtime);
/** One sub-directory (a CommonPrefix), @p name without the directory nor the '/'. */
typedef int (*tier_list_dir_cb)(void *arg, const char *name);
/** List "directory" @p dirkey ("" or ending in '/', bucket-relative) of remote @p remote:
 * ListObjectsV2 with delimiter '/', every page (cache mode). Never sweeps the remote's
 * multipart uploads. Blocks (not on an event loop). @return 0, SRV_ERECALL (the remote is
 * down or failed: retry later), -ENOENT (no such remote), -EIO, or a callback's result. */
int tier_upload_list_dir(struct tier_upload *u, uint32_t remote, const char *dirkey,
                         tier_list_obj_cb obj, tier_list_dir_cb dir, void *arg);

/** What a recall's GET answer says of its object besides the bytes. */
struct tier_fetch_meta {
    void *blob; /* its Content-Type and user metadata: an S3 metadata blob
                 * (tier_objmeta_encode; free it) */
    size_t len;
    char etag[TIER_S3_ETAG_MAX]; /* the ETag the bytes were checked against (the record's) */
};
/** Read [off, off + len) of the remote copy of evicted file @p ino into @p buf (@p n:
 * bytes read), checked against its tierst record: the remote object must still have the
 * recorded ETag (If-Match) and size. With @p meta (may be NULL), on success, the object's
 * Content-Type and x-amz-meta-* from the same answer (a ranged GET's answer carries them
 * as a whole one's: no HEAD needed). Blocks: call it from a thread that may wait (not an
 * event loop). @return 0, SRV_ERECALL (the remote is down or failed: retry later),
 * SRV_EREMOTECHG (no record, or the object changed or is gone), or another error. */
int tier_upload_fetch(struct tier_upload *u, uint64_t ino, uint64_t off, void *buf, size_t len,
                      size_t *n, struct tier_fetch_meta *meta);

/** Content-Type and user metadata of object @p key (bucket-relative) of remote @p remote,
 * which must still have ETag @p etag: a HEAD (cache mode: what ListObjectsV2 does not
 * carry). @p blob gets a new S3 metadata blob (tier_objmeta_encode; free it). Blocks (not
 * on an event loop). @return 0, SRV_ERECALL (the remote is down or failed: retry later),
 * SRV_EREMOTECHG (the object changed or is gone), -ENOENT (no such remote), -EIO,
 * -ENOMEM. */
int tier_upload_head_meta(struct tier_upload *u, uint32_t remote, const char *key, const char *etag,
                          void **blob, size_t *len);

/** Append the uploader's Prometheus series to @p out (/metrics). */
void tier_upload_metrics(struct tier_upload *u, struct evbuffer *out);

/** Back-off before try @p tries (0-based) of something that failed: base * 2^tries,
 * at most max, scaled by a jitter factor in [0.5, 1.5) taken from @p rnd (any 32-bit
 * random number). Pure. */
uint64_t tier_backoff_ms(unsigned tries, uint32_t base_ms, uint32_t max_ms, uint32_t rnd);

/** Content-Type and user metadata of an S3 metadata blob (objmeta; format in
 * docs/on-disk-format.md): @p ctype gets the Content-Type ("" when none), @p kv up to
 * @p max user metadata pairs pointing into @p ctype-independent storage @p strs
 * (@p strslen bytes). Pure. @return the number of pairs, or -EINVAL (malformed). */
int tier_objmeta_parse(const void *blob, size_t len, char *ctype, size_t ctlen,
                       struct tier_s3_kv *kv, size_t max, char *strs, size_t strslen);
/** The inverse: an S3 metadata blob ("S3M1", then a Content-Type record when @p ctype is
 * not empty and one user metadata record per pair of @p kv; "S3M1" alone when there is
 * nothing) in @p blob (heap; free it). Pure. @return 0, -ENOMEM. */
int tier_objmeta_encode(const char *ctype, const struct tier_s3_kv *kv, size_t n, void **blob,
                        size_t *len);

#endif
