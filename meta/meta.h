/* SPDX-License-Identifier: Apache-2.0
 * meta: the metadata store of s3nfs behind an opaque transaction, and its
 * single writer thread. Only meta/ knows the engine (LMDB, or an ordered map
 * in memory for tests); every layer above sees struct meta_txn and the typed
 * record modules (meta_inode.h, meta_dirent.h, meta_keyidx.h, meta_extent.h,
 * meta_usage.h, meta_mpu.h, meta_record.h, meta_free.h), never raw keys.
 *
 * meta_env_open() opens (creating if new) the store, its tables (meta_schema.h)
 * and checks the schema version: a store written by an unknown or newer
 * version is refused (SRV_EBADVERSION, logged with both versions).
 *
 * Transactions:
 *  - read: meta_rtxn_begin / meta_rtxn_end, on the calling thread; a snapshot
 *    of the last committed batch, unchanged while it lasts.
 *  - writer ops: meta_submit() queues an operation closure and blocks until
 *    the group commit carrying it is durable. Exactly one writer thread runs
 *    every op. It takes up to max_batch queued ops into one batch transaction
 *    and runs each in a nested (op) transaction, so an op that fails (returns
 *    nonzero) aborts only its own changes.
 *  - standalone write: meta_wtxn_begin / _commit / _abort, for setup before
 *    the ops that depend on it (the core initializes the store's free map
 *    with one); serialized with the writer's batches; durable no later than
 *    the next batch.
 *
 * Commit hooks: meta never calls the layers that keep state beside it (the
 * extent store). The layer above both (the core) registers hooks at open
 * (meta_env_set_hooks) that the writer runs as each batch moves on, and an op
 * notes what they need (meta_txn_note: e.g. "extent X becomes used"):
 *   join     after an op's changes joined the batch, in the batch txn: apply
 *            the op's notes (the store's free-map records); nonzero fails the
 *            op, and the batch is dropped and run again without it;
 *   prepare  every op ran, before the commit: sync data files if an op
 *            carried META_OP_DATA; returns a token held until the batch is
 *            durable (the store's read token keeping its frees in limbo);
 *   end      the commit returned (or the batch was dropped): finish the
 *            per-batch state join built;
 *   release  the batch is durable (or failed after prepare): drop the token.
 * Per-batch state lives in a slot the hooks own (no pointer is kept as a key
 * across a commit).
 *
 * Durability: committed batches are acknowledged (their submitters woken)
 * only once durable. The LMDB engine runs with MDB_NOMETASYNC, so a commit
 * syncs its pages once and writes its meta page unsynced; the meta page is
 * durable once an fdatasync that began after the commit returned has ended: a
 * syncer thread starts one at once while the writer goes on with the next
 * batch, and the next commit's own sync counts too, whichever ends first.
 * Until then the token prepare took is held, so a power cut can never bring
 * back metadata pointing at reused space. Readers may see a committed batch
 * shortly before it is acknowledged. A commit that finds the file system full
 * fails its ops with -ENOSPC and leaves everything as it was (the next batch
 * tries again); a failed sync of the metadata or data files ends the process
 * (SRV_FATAL: CRIT log line, exit SRV_EXIT_FATAL), since the kernel reports
 * lost pages only once.
 *
 * Backend contract (what a replacement engine, e.g. a distributed key-value
 * store, must give; meta_mem.c is the reference in memory):
 *  - tables of byte keys in bytewise order (shorter first on a common prefix),
 *    get / put (optionally refusing to overwrite) / delete, and an ordered
 *    scan forward or backward from a key within a prefix;
 *  - read transactions that see one committed state for their whole life,
 *    concurrently with the writer and with each other;
 *  - one write transaction at a time, with nested transactions that commit
 *    into their parent or abort alone; a commit is atomic (all of a batch or
 *    nothing is ever visible, before or after a crash);
 *  - a sync that makes every commit that returned before it began durable, and
 *    ends the process when it cannot; a commit refused for lack of room leaves
 *    the store as it was;
 *  - values a get or scan returns stay valid until the transaction ends or
 *    writes again.
 *
 * Errors: -ENOENT (no such record), -EEXIST, -ENOSPC (store full: logged
 * critical), -EIO (engine failure: logged), SRV_ECORRUPT (malformed record:
 * logged), -ENOMEM.
 * Thread: all calls are thread-safe; op closures run on the writer thread. */
#ifndef META_H
#define META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta_schema.h"

struct meta_env;
struct meta_txn;

/** Operation closure run by the writer inside its own op txn @p txn.
 * @return 0 to keep its changes, nonzero (a negative error) to drop them. */
typedef int (*meta_op_fn)(struct meta_txn *txn, void *arg);

#define META_OP_DATA 0x1  /* the operation points at data written since the last sync */
#define META_OP_EARLY 0x2 /* answer once committed (visible, survives a process crash),
                           * before it is durable; a later op without it waits for both */

enum meta_backend {
    META_BACKEND_LMDB = 0, /* LMDB environment in a directory (the daemon's) */
    META_BACKEND_MEM,      /* an ordered map in memory (tests): kept for the life of the
                            * process under its directory name, so a close and a new open
                            * of the same directory find it again; nothing reaches disk */
};

struct meta_env_config {
    const char *dir;           /* LMDB: the environment's directory (created if missing);
                                * memory: the name it is kept under */
    uint64_t map_size;         /* LMDB map size in bytes (0: 16 GiB); memory: unbounded */
    uint32_t max_batch;        /* most ops per group commit (0: 256) */
    enum meta_backend backend;
};

struct meta_stats {
    uint64_t commits;    /* batch transactions committed */
    uint64_t commit_ops; /* operations they carried */
};

/** Open the store and start its writer.
 * @return 0, SRV_EBADVERSION, -ENOSPC, -EINVAL (bad config), -errno, -EIO. */
int meta_env_open(struct meta_env **out, const struct meta_env_config *cfg);
/** Stop the writer (after draining the queue and acknowledging the last batch)
 * and close the store. Safe on NULL. */
void meta_env_close(struct meta_env *m);

/* ---- hooks (see the header) ---- */

#define META_NOTE_MAX 32 /* payload bytes of one note */

/** What an op noted with meta_txn_note, in the order it noted it. */
struct meta_note {
    uint32_t kind; /* the hook owner's code */
    uint32_t len;
    unsigned char data[META_NOTE_MAX];
};

struct meta_hooks {
    void *arg; /* passed to every hook */
    /** Writer thread: op @p notes (@p n of them) joined batch txn @p batch. *@p state is
     * NULL at the start of each batch; whatever join leaves there reaches end.
     * @return 0, or an error: the op fails with it, the batch is dropped and its other
     * ops run again in a new batch. */
    int (*join)(void *arg, void **state, struct meta_txn *batch, const struct meta_note *notes,
                size_t n);
    /** Writer thread: every op of the batch ran; it commits next. @p data: an op carried
     * META_OP_DATA. *@p token is handed to release once the batch is durable (or failed).
     * @return 0, or an error that fails the batch (release is not called then). */
    int (*prepare)(void *arg, bool data, uint64_t *token);
    /** Writer thread: the batch's commit returned @p rc (0: committed), or the batch was
     * dropped (rc != 0). Called once per batch, with what join left in state. */
    void (*end)(void *arg, void *state, int rc);
    /** Writer or syncer thread, no meta lock held: the batch prepare ran for is durable
     * (acknowledged next) or failed. */
    void (*release)(void *arg, uint64_t token);
};

/** Set the hooks (copied; NULL removes them). Call before the first op that notes, and
 * only while no op runs (at open and close). */
void meta_env_set_hooks(struct meta_env *m, const struct meta_hooks *h);

/** From inside an op: note @p len (<= META_NOTE_MAX) bytes of @p data under @p kind for
 * the join hook; dropped when the op fails. An op that notes while no hooks are set
 * fails its batch's apply (-EIO, logged). @return 0, -EINVAL (too long, not an op txn),
 * -ENOMEM. */
int meta_txn_note(struct meta_txn *t, uint32_t kind, const void *data, size_t len);

/* ---- transactions ---- */

/** Begin a read-only txn on the calling thread. @return 0, -EIO, -ENOMEM. */
int meta_rtxn_begin(struct meta_env *m, struct meta_txn **out);
/** End a read-only txn. Safe on NULL. */
void meta_rtxn_end(struct meta_txn *txn);

/** Which committed state read txn @p t sees: two read txns of one environment
 * with the same nonzero value see the same data (any commit between them makes
 * the value differ), so what was read in one holds for the other. 0: the engine
 * cannot tell (the memory engine); nothing may be assumed then.
 * @note Values of different environments are unrelated: pair it with
 * meta_env_gen(). */
uint64_t meta_txn_snapshot(const struct meta_txn *t);

/** A number no other environment opened by this process had or will have. */
uint64_t meta_env_gen(const struct meta_env *m);

/** Begin a standalone write txn (see the header); it waits for the writer's
 * batch in progress. Never call it from an op. @return 0, -EIO, -ENOMEM. */
int meta_wtxn_begin(struct meta_env *m, struct meta_txn **out);
/** Commit a standalone write txn (freed). @return 0, -ENOSPC, -EIO. */
int meta_wtxn_commit(struct meta_txn *txn);
/** Abort a standalone write txn (freed). Safe on NULL. */
void meta_wtxn_abort(struct meta_txn *txn);

/** Run @p fn(txn, arg) on the writer thread and wait until it is durable
 * (a failed op returns as soon as its batch is done).
 * @return the op's own result, or the batch's commit error (-ENOSPC: the store
 * or the file system is full; -EIO). */
int meta_submit(struct meta_env *m, meta_op_fn fn, void *arg, unsigned flags);

/** @return true when called on the writer thread (inside an op). */
bool meta_on_writer(struct meta_env *m);

void meta_stats_get(struct meta_env *m, struct meta_stats *out);

#endif
