/* SPDX-License-Identifier: Apache-2.0
 * meta: the LMDB environment of s3nfs and its single writer thread.
 *
 * meta_env_open() opens (creating if new) the environment with MDB_NOTLS,
 * opens every named DBI of meta_schema.h and checks the schema version: a
 * store written by an unknown or newer version is refused (SRV_EBADVERSION,
 * logged with both versions).
 *
 * Writes: exactly one writer thread owns every write transaction. Callers
 * submit an operation closure with meta_submit() and block until the group
 * commit carrying it is durable. The writer takes up to max_batch queued
 * operations into one transaction and runs each in a nested child
 * transaction, so an operation that fails (returns nonzero) aborts only its
 * own changes. Store space changes (extents becoming used or free) are
 * recorded by the operation with meta_extent_use()/meta_extent_free() and
 * applied to the batch transaction after the child committed. Before the
 * batch commits, store_sync() runs if any operation carried META_OP_DATA (data
 * is durable before the metadata that points at it); after it, store_txn_done().
 *
 * Durability: the environment runs with MDB_NOMETASYNC, so a commit syncs its
 * pages once and writes its meta page unsynced. A committed batch is
 * acknowledged (its submitters woken) only once an fdatasync that began after
 * its commit returned has ended: a syncer thread starts one at once while the
 * writer goes on with the next batch, and the next commit's own sync counts
 * too, whichever ends first. Until then the space it freed stays in the
 * store's limbo (a read token), so a power cut can never bring back metadata
 * pointing at reused space. Readers may see a committed batch shortly before
 * it is acknowledged. A commit that finds the file system full fails its ops
 * with -ENOSPC and leaves everything as it was (the next batch tries again);
 * a failed sync of the metadata or data files ends the process (SRV_FATAL:
 * CRIT log line, exit SRV_EXIT_FATAL), since the kernel reports lost pages
 * only once.
 *
 * Reads: read-only transactions on the calling thread (meta_rtxn_begin).
 *
 * Errors: MDB_NOTFOUND -> -ENOENT, MDB_KEYEXIST -> -EEXIST, MDB_MAP_FULL ->
 * -ENOSPC (logged critical), other LMDB errors -> -EIO (logged).
 * Thread: all calls are thread-safe; operation closures run on the writer. */
#ifndef META_H
#define META_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta_schema.h"

struct meta_env;
struct store;
struct store_extent;

/** Operation closure run by the writer inside a child txn.
 * @return 0 to keep its changes, nonzero (a negative error) to drop them. */
typedef int (*meta_op_fn)(MDB_txn *txn, void *arg);

#define META_OP_DATA 0x1  /* the operation points at data written since the last sync */
#define META_OP_EARLY 0x2 /* answer once committed (visible, survives a process crash),
                           * before it is durable; a later op without it waits for both */

struct meta_stats {
    uint64_t commits;    /* batch transactions committed */
    uint64_t commit_ops; /* operations they carried */
};

/** Open the environment in directory @p dir (created if missing).
 * @param map_size LMDB map size in bytes. @param max_batch most ops per commit.
 * @return 0, SRV_EBADVERSION, -ENOSPC, -errno, -EIO. */
int meta_env_open(struct meta_env **out, const char *dir, uint64_t map_size, uint32_t max_batch);
/** Attach the extent store (for sync / txn hooks); NULL detaches. Call before
 * the first meta_submit that records extents. */
void meta_env_set_store(struct meta_env *m, struct store *s);
/** Stop the writer (after draining the queue) and close the environment. Safe on NULL. */
void meta_env_close(struct meta_env *m);

MDB_env *meta_env_mdb(struct meta_env *m);
MDB_dbi meta_dbi(struct meta_env *m, enum meta_dbi which);

/** Map an LMDB return code to the internal error set (logs MAP_FULL and odd errors). */
int meta_err(int mdb_rc);

/** Begin a read-only txn on the calling thread. @return 0, -EIO. */
int meta_rtxn_begin(struct meta_env *m, MDB_txn **out);
/** End a read-only txn. Safe on NULL. */
void meta_rtxn_end(MDB_txn *txn);

/** Run @p fn(txn, arg) on the writer thread and wait until it is durable
 * (a failed op returns as soon as its batch is done).
 * @return the op's own result, or the batch's commit error (-ENOSPC: the LMDB
 * map or the file system is full; -EIO). */
int meta_submit(struct meta_env *m, meta_op_fn fn, void *arg, unsigned flags);

/** From inside an op: extent @p e (reserved with store_alloc) becomes used
 * when the batch commits. @return 0, -ENOMEM. */
int meta_extent_use(struct meta_env *m, MDB_txn *txn, const struct store_extent *e);
/** From inside an op: used extent @p e is freed when the batch commits (it
 * then passes through the store's reader limbo). @return 0, -ENOMEM. */
int meta_extent_free(struct meta_env *m, MDB_txn *txn, const struct store_extent *e);

/** @return true when called on the writer thread (inside an op). */
bool meta_on_writer(struct meta_env *m);

void meta_stats_get(struct meta_env *m, struct meta_stats *out);

/* ---- small helpers over MDB_val ---- */
/** mdb_get mapped: @return 0, -ENOENT, -EIO. */
int meta_get(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen, MDB_val *val);
/** mdb_put mapped. @return 0, -EEXIST (with MDB_NOOVERWRITE), -ENOSPC, -EIO. */
int meta_put(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen, const void *val,
             size_t vlen, unsigned flags);
/** mdb_del mapped. @return 0, -ENOENT, -EIO. */
int meta_del(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen);

#endif
