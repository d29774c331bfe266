/* SPDX-License-Identifier: Apache-2.0
 * meta_int: private to meta/: the engine interface (struct meta__backend,
 * implemented by meta_lmdb.c and meta_mem.c), the state shared by meta_env.c
 * and meta_writer.c, and the raw key/value access and the one scan primitive
 * the typed record modules are written over. Nothing outside meta/ (but its
 * own unit tests, and the core's crash checker, which audits the raw extent,
 * free and CRC tables) may include this header.
 * Thread: fields are documented with the lock or thread that owns them. */
#ifndef META_INT_H
#define META_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "meta.h"

/* ---- raw access (typed modules only) ---- */

/** A value as the engine holds it: valid until its txn ends or writes again. */
struct meta_val {
    const void *data;
    size_t len;
};

#define META_NOOVERWRITE 0x1 /* meta__put: -EEXIST when the key exists */

/** @return 0, -ENOENT, -EIO. */
int meta__get(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
              struct meta_val *v);
/** @return 0, -EEXIST (META_NOOVERWRITE), -ENOSPC, -EIO, -EINVAL (key too long or empty). */
int meta__put(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen, const void *val,
              size_t vlen, unsigned flags);
/** @return 0, -ENOENT, -EIO. */
int meta__del(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen);

/* The same for a record keyed by one be64 number (an inode, a directory). */
int meta__get64(struct meta_txn *t, enum meta_dbi tb, uint64_t id, struct meta_val *v);
int meta__put64(struct meta_txn *t, enum meta_dbi tb, uint64_t id, const void *val, size_t vlen);
int meta__del64(struct meta_txn *t, enum meta_dbi tb, uint64_t id);
/** A record of exactly @p size bytes, copied into @p out.
 * @return 0, -ENOENT, SRV_ECORRUPT (another size), -EIO. */
int meta__get_fixed(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen, void *out,
                    size_t size);

/** What meta__scan visits: the keys starting with @c prefix (plen 0: every key), in
 * bytewise order from the first key >= @c start (NULL: the prefix's first), skipping
 * a key equal to @c start when @c after (paging: continue after the last key seen);
 * with @c reverse, backwards from the last key < @c start (NULL: the prefix's last). */
struct meta_range {
    const void *prefix;
    size_t plen;
    const void *start;
    size_t slen;
    bool after;
    bool reverse;
};
/** One record of a scan; @p key and @p val are valid during the call only, and the
 * callback must not write the txn (collect, then change).
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_scan_cb)(void *arg, const void *key, size_t klen, const void *val,
                            size_t vlen);
/** The one scan primitive under every typed scan.
 * @return 0 at the end of the range, the callback's first nonzero result, -EIO. */
int meta__scan(struct meta_txn *t, enum meta_dbi tb, const struct meta_range *r, meta_scan_cb cb,
               void *arg);

/** A growing list of ids, for the typed modules that hand a caller every id of a scan
 * (start it zeroed). */
struct meta__ids {
    uint64_t *v;
    size_t n, cap;
};
/** Append @p id to @p l. @return 0, -ENOMEM. */
int meta__ids_push(struct meta__ids *l, uint64_t id);
/** Hand @p l to the caller (*@p ids, to free(); *@p n) after a scan that ended with
 * @p rc: on an error, free it and hand out NULL, 0. @return @p rc. */
int meta__ids_take(struct meta__ids *l, int rc, uint64_t **ids, size_t *n);

/** Engines: whether @p key (@p klen bytes) starts with @p r's prefix (plen 0: any key;
 * the prefix may then be NULL). */
bool meta__in_prefix(const struct meta_range *r, const void *key, size_t klen);

/** Bytewise key order (the engines' order). */
int meta__keycmp(const void *a, size_t al, const void *b, size_t bl);

#define META_KEY_LIMIT 512 /* more than the longest key of every engine */

/** Engines: where a scan of @p r starts: forward at the first key >= *@p seek,
 * reverse at the last key < *@p seek; *@p seek NULL: the table's first (last)
 * key. @p buf (META_KEY_LIMIT bytes) may hold the seek key. */
void meta__scan_seek(const struct meta_range *r, unsigned char *buf, const void **seek,
                     size_t *slen);

/* ---- engines ---- */

/* The part of every txn meta itself uses; an engine's txn embeds it first. */
struct meta_txn {
    struct meta_env *env;
    struct meta__op *op; /* an op's txn: the op whose notes it collects; else NULL */
    bool write;
};

struct meta__backend {
    const char *name;
    /** Open the engine's store and tables; fills m->be. @return 0, -errno, -EIO. */
    int (*open)(struct meta_env *m, const struct meta_env_config *cfg);
    /** Sync and close (every txn ended, the writer stopped). */
    void (*close)(struct meta_env *m);
    int (*rtxn_begin)(struct meta_env *m, struct meta_txn **out);
    void (*rtxn_end)(struct meta_txn *t);
    /** meta_txn_snapshot of a read txn; NULL: the engine cannot tell (0). */
    uint64_t (*snapshot)(const struct meta_txn *t);
    /** A write txn, nested in @p parent when not NULL (which it must not write meanwhile).
     * A store left unusable by an earlier failure ends the process (SRV_FATAL). */
    int (*wtxn_begin)(struct meta_env *m, struct meta_txn *parent, struct meta_txn **out);
    /** Commit and free @p t. A commit that could not write because the file system is
     * full leaves the store as it was (-ENOSPC); one whose sync failed, or that left
     * the store unusable, ends the process (SRV_FATAL). @return 0, -ENOSPC, -EIO. */
    int (*wtxn_commit)(struct meta_txn *t);
    void (*wtxn_abort)(struct meta_txn *t);
    int (*get)(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
               struct meta_val *v);
    int (*put)(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
               const void *val, size_t vlen, unsigned flags);
    int (*del)(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen);
    int (*scan)(struct meta_txn *t, enum meta_dbi tb, const struct meta_range *r,
                meta_scan_cb cb, void *arg);
    /** Syncer thread: make every commit that returned before this call durable; a
     * failure ends the process (SRV_FATAL: the kernel reports lost pages only once). */
    void (*sync)(struct meta_env *m);
};

extern const struct meta__backend meta__lmdb;
extern const struct meta__backend meta__mem;

/* ---- env and writer ---- */

/* One queued operation; lives on the submitter's stack until done. */
struct meta__op {
    meta_op_fn fn;
    void *arg;
    unsigned flags;
    int rc;
    bool done;
    pthread_cond_t cv;     /* signalled (under the env lock) when done */
    struct meta__op *next;
    /* what the op noted for the join hook (writer thread only) */
    struct meta_note *notes;
    size_t nnotes, capnotes;
};

struct meta_env {
    const struct meta__backend *be;
    void *bs;                     /* the engine's state */
    uint32_t max_batch;
    struct meta_hooks hooks;
    bool has_hooks;
    uint64_t gen; /* meta_env_gen */

    pthread_mutex_t lock;      /* guards the queue, stop, stats, the pending batch */
    pthread_cond_t work_cv;    /* writer waits for ops */
    struct meta__op *head, *tail;
    bool stop;
    bool writer_running;
    pthread_t writer;

    /* writer thread only */
    uint64_t seq;                 /* commit_seq record */

    /* the last committed batch not yet known durable (lock): it is durable once a
     * sync that began after its commit returned has ended */
    pthread_cond_t sync_cv;       /* the syncer waits for a pending batch */
    struct meta__op *pend_ops;    /* its submitters still waiting */
    uint64_t pend_seq;            /* its commit_seq; 0: nothing pending */
    uint64_t pend_tok;            /* the token prepare gave it */
    bool pend_tok_held;
    bool sync_stop;
    bool syncer_running;
    pthread_t syncer;

    struct meta_stats stats;
};

int meta__writer_start(struct meta_env *m);
void meta__writer_stop(struct meta_env *m);

/** Map an LMDB return code to the internal error set (logs MAP_FULL and odd errors). */
int meta_err(int mdb_rc);
struct MDB_env;
/** The LMDB environment of @p m (white-box tests), NULL on another engine. */
struct MDB_env *meta__lmdb_env(struct meta_env *m);

#endif
