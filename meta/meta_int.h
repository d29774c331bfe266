/* SPDX-License-Identifier: Apache-2.0
 * meta_int: private state shared by meta_env.c and meta_writer.c.
 * Thread: fields are documented with the lock or thread that owns them. */
#ifndef META_INT_H
#define META_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "meta.h"

struct store_extent;

#define META_RPOOL_MAX 64

/* One queued operation; lives on the submitter's stack until done. */
struct meta__op {
    meta_op_fn fn;
    void *arg;
    unsigned flags;
    int rc;
    bool done;
    pthread_cond_t cv;     /* signalled (under the env lock) when done */
    struct meta__op *next;
    /* store changes recorded by the op (writer thread only) */
    struct store_extent *uses, *frees;
    size_t nuses, nfrees, cap_uses, cap_frees;
};

struct meta_env {
    MDB_env *env;
    MDB_dbi dbi[META_DBI__COUNT];
    struct store *store;
    uint32_t max_batch;

    pthread_mutex_t lock;      /* guards the queue, stop, stats, the pending batch */
    pthread_cond_t work_cv;    /* writer waits for ops */
    pthread_cond_t done_cv;    /* unused (each op has its own cv) */
    struct meta__op *head, *tail;
    bool stop;
    bool writer_running;
    pthread_t writer;

    /* writer thread only */
    struct meta__op *cur_op;
    MDB_txn *cur_child;
    uint64_t seq;                 /* commit_seq record */
    int fd;                       /* the syncer's own fd of the LMDB data file */

    /* the last committed batch not yet known durable (lock): its meta page
     * is durable once a sync that began after its commit returned has ended */
    pthread_cond_t sync_cv;       /* the syncer waits for a pending batch */
    struct meta__op *pend_ops;    /* its submitters still waiting */
    uint64_t pend_seq;            /* its commit_seq; 0: nothing pending */
    uint64_t pend_tok;            /* store read token keeping its frees in limbo */
    bool pend_tok_held;
    bool sync_stop;
    bool syncer_running;
    pthread_t syncer;

    struct meta_stats stats;

    /* reset read-only txns kept for reuse (mdb_txn_renew keeps the reader slot) */
    pthread_mutex_t rpool_mu;
    MDB_txn *rpool[META_RPOOL_MAX];
    int nrpool;
};

int meta__writer_start(struct meta_env *m);
void meta__writer_stop(struct meta_env *m);

#endif
