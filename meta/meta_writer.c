/* SPDX-License-Identifier: Apache-2.0
 * meta_writer: the single LMDB writer thread and its group commit.
 *
 * Submitters queue an operation and sleep on its own condition variable (a
 * finished op wakes only its submitter). The writer takes up to
 * max_batch operations, opens one batch txn, runs each op in a child txn
 * (committed into the batch on success, aborted on failure), applies the
 * store-space changes each successful op recorded, syncs data files if an op
 * carried data, commits the batch (LMDB syncs it), tells the store, and wakes
 * every submitter of the batch with its own result.
 * Thread: the writer thread runs ops; meta_submit from any other thread. */
#include "meta_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"
#include "store.h"

static int rec_push(struct store_extent **arr, size_t *n, size_t *cap, const struct store_extent *e)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct store_extent *na = realloc(*arr, nc * sizeof(*na));
        if (!na)
            return -ENOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = *e;
    return 0;
}

int meta_extent_use(struct meta_env *m, MDB_txn *txn, const struct store_extent *e)
{
    struct meta__op *op = m->cur_op;
    SRV_ASSERT(op && m->cur_child == txn);
    return rec_push(&op->uses, &op->nuses, &op->cap_uses, e);
}

int meta_extent_free(struct meta_env *m, MDB_txn *txn, const struct store_extent *e)
{
    struct meta__op *op = m->cur_op;
    SRV_ASSERT(op && m->cur_child == txn);
    return rec_push(&op->frees, &op->nfrees, &op->cap_frees, e);
}

bool meta_on_writer(struct meta_env *m)
{
    return m->writer_running && pthread_equal(pthread_self(), m->writer);
}

static void op_reset_records(struct meta__op *op)
{
    free(op->uses);
    free(op->frees);
    op->uses = op->frees = NULL;
    op->nuses = op->nfrees = op->cap_uses = op->cap_frees = 0;
}

/* Apply one op's recorded store changes to the batch txn. */
static int apply_records(struct meta_env *m, MDB_txn *parent, struct meta__op *op,
                         bool *touched)
{
    int rc = 0;
    if (!m->store) {
        if (op->nuses || op->nfrees) {
            srv_log(ERROR, META, "op recorded extents but no store is attached");
            return -EIO;
        }
        return 0;
    }
    for (size_t i = 0; i < op->nuses && rc == 0; i++) {
        rc = store_txn_use(m->store, parent, &op->uses[i]);
        *touched = true;
    }
    for (size_t i = 0; i < op->nfrees && rc == 0; i++) {
        rc = store_txn_free(m->store, parent, &op->frees[i]);
        *touched = true;
    }
    if (rc > 0)
        rc = meta_err(rc);
    return rc;
}

/* Wake the submitters of a list of finished ops (m->lock held). */
static void ops_finish(struct meta_env *m, struct meta__op *list)
{
    for (struct meta__op *op = list, *next; op; op = next) {
        next = op->next;
        op_reset_records(op);
        op->done = true;
        pthread_cond_signal(&op->cv);
    }
    (void)m;
}

/* Everything committed so far is durable now: acknowledge the pending batch
 * and let the store reuse the space it freed. Writer thread only. */
static void pending_ack(struct meta_env *m)
{
    if (!m->pend_ops && !m->pend_tok_held)
        return;
    if (m->pend_tok_held && m->store)
        store_read_end(m->store, m->pend_tok);
    m->pend_tok_held = false;
    pthread_mutex_lock(&m->lock);
    ops_finish(m, m->pend_ops);
    m->pend_ops = NULL;
    pthread_mutex_unlock(&m->lock);
}

/* Make the last commit durable with an explicit sync, then acknowledge it. */
static void pending_sync(struct meta_env *m)
{
    if (!m->pend_ops && !m->pend_tok_held)
        return;
    int rc = mdb_env_sync(m->env, 1);
    if (rc) {
        rc = meta_err(rc);
        srv_log(CRIT, META, "metadata sync failed: %s", srv_strerror(rc));
        for (struct meta__op *op = m->pend_ops; op; op = op->next)
            if (op->rc == 0)
                op->rc = rc;
    }
    pending_ack(m);
}

static int bump_seq(struct meta_env *m, MDB_txn *parent)
{
    /* every batch changes at least this record, so every commit is a dirty
     * txn whose data sync also makes the previous meta page durable */
    uint8_t b[8];
    meta_be64_put(b, ++m->seq);
    return meta_put(parent, m->dbi[META_DBI_META], "commit_seq", 10, b, 8, 0);
}

static void run_batch(struct meta_env *m, struct meta__op *batch)
{
    MDB_txn *parent = NULL, *child = NULL, *batch_id = NULL;
    struct meta__op *bad = NULL;
    bool any_data = false, touched = false, tok_held = false;
    uint64_t tok = 0;
    int brc;
    uint64_t nops = 0;

    brc = mdb_txn_begin(m->env, NULL, 0, &parent);
    if (brc) {
        parent = NULL;
        brc = meta_err(brc);
        goto finish;
    }
    batch_id = parent;
    brc = bump_seq(m, parent);
    if (brc)
        goto finish;
    for (struct meta__op *op = batch; op; op = op->next) {
        nops++;
        int rc = mdb_txn_begin(m->env, parent, 0, &child);
        if (rc) {
            brc = meta_err(rc);
            goto finish;
        }
        m->cur_op = op;
        m->cur_child = child;
        rc = op->fn(child, op->arg);
        m->cur_op = NULL;
        m->cur_child = NULL;
        if (rc == 0) {
            rc = mdb_txn_commit(child);
            if (rc)
                rc = meta_err(rc);
        } else {
            mdb_txn_abort(child);
        }
        child = NULL;
        if (rc == 0) {
            rc = apply_records(m, parent, op, &touched);
            if (rc) {
                /* the batch txn may hold a partial change: drop the batch, fail
                 * this op and run the others again in a new batch */
                srv_log(ERROR, META, "applying store changes failed: %s", srv_strerror(rc));
                op->rc = rc;
                bad = op;
                brc = rc;
                goto finish;
            }
            if (op->flags & META_OP_DATA)
                any_data = true;
        }
        op->rc = rc;
    }
    if (any_data && m->store) {
        brc = store_sync(m->store);
        if (brc) {
            srv_log(ERROR, META, "data sync failed before commit: %s", srv_strerror(brc));
            goto finish;
        }
    }
    /* Space this batch frees must not be reused before the batch is durable
     * (a power cut would bring back metadata pointing at it): a read token
     * taken now keeps the frees in the store's limbo until the ack. */
    if (m->store) {
        tok = store_read_begin(m->store);
        tok_held = true;
    }
    brc = mdb_txn_commit(parent);
    parent = NULL;
    if (brc)
        brc = meta_err(brc);
finish:
    if (parent)
        mdb_txn_abort(parent);
    if (m->store && touched)
        store_txn_done(m->store, batch_id, brc == 0);
    if (brc == 0) {
        /* this commit's data sync (MDB_NOMETASYNC) made the previous batch's
         * meta page durable: acknowledge that batch now */
        pending_ack(m);
    } else {
        if (tok_held)
            store_read_end(m->store, tok);
        tok_held = false;
        if (batch_id)
            m->seq--;
    }
    pthread_mutex_lock(&m->lock);
    if (brc == 0) {
        m->stats.commits++;
        m->stats.commit_ops += nops;
    }
    if (bad) {
        struct meta__op *again = NULL, *last = NULL;
        for (struct meta__op *op = batch, *next; op; op = next) {
            next = op->next;
            op_reset_records(op);
            if (op == bad) {
                op->done = true;
                pthread_cond_signal(&op->cv);
                continue;
            }
            op->rc = 1;
            op->next = NULL;
            if (last)
                last->next = op;
            else
                again = op;
            last = op;
        }
        if (again) {
            last->next = m->head;
            if (!m->head)
                m->tail = last;
            m->head = again;
        }
            pthread_mutex_unlock(&m->lock);
        return;
    }
    /* failed and META_OP_EARLY ops answer now; committed ones wait until durable */
    struct meta__op *ok = NULL, *fail = NULL;
    for (struct meta__op *op = batch, *next; op; op = next) {
        next = op->next;
        if (brc != 0 && (op->rc == 0 || op->rc == 1))
            op->rc = brc;
        if (op->rc == 0 && !(op->flags & META_OP_EARLY)) {
            op->next = ok;
            ok = op;
        } else {
            op->next = fail;
            fail = op;
        }
    }
    ops_finish(m, fail);
    pthread_mutex_unlock(&m->lock);
    if (brc == 0) {
        m->pend_ops = ok;
        m->pend_tok = tok;
        m->pend_tok_held = tok_held;
    }
}

static void *writer_main(void *arg)
{
    struct meta_env *m = arg;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        if (!m->head && (m->pend_ops || m->pend_tok_held)) {
            /* idle: make the last batch durable now instead of waiting */
            pthread_mutex_unlock(&m->lock);
            pending_sync(m);
            pthread_mutex_lock(&m->lock);
            continue;
        }
        while (!m->head && !m->stop)
            pthread_cond_wait(&m->work_cv, &m->lock);
        if (!m->head && m->stop)
            break;
        struct meta__op *batch = m->head, *last = m->head;
        uint32_t n = 1;
        while (last->next && n < m->max_batch) {
            last = last->next;
            n++;
        }
        m->head = last->next;
        if (!m->head)
            m->tail = NULL;
        last->next = NULL;
        pthread_mutex_unlock(&m->lock);
        run_batch(m, batch);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int meta__writer_start(struct meta_env *m)
{
    int rc = pthread_create(&m->writer, NULL, writer_main, m);
    if (rc)
        return -rc;
    m->writer_running = true;
    return 0;
}

void meta__writer_stop(struct meta_env *m)
{
    if (!m->writer_running)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_signal(&m->work_cv);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->writer, NULL);
    m->writer_running = false;
}

int meta_submit(struct meta_env *m, meta_op_fn fn, void *arg, unsigned flags)
{
    struct meta__op op;
    memset(&op, 0, sizeof(op));
    op.fn = fn;
    op.arg = arg;
    op.flags = flags;
    op.rc = 1; /* not run yet */
    pthread_cond_init(&op.cv, NULL);

    SRV_ASSERT(!meta_on_writer(m));
    pthread_mutex_lock(&m->lock);
    if (m->stop) {
        pthread_mutex_unlock(&m->lock);
        pthread_cond_destroy(&op.cv);
        return -EIO;
    }
    if (m->tail)
        m->tail->next = &op;
    else
        m->head = &op;
    m->tail = &op;
    pthread_cond_signal(&m->work_cv);
    while (!op.done)
        pthread_cond_wait(&op.cv, &m->lock);
    pthread_mutex_unlock(&m->lock);
    pthread_cond_destroy(&op.cv);
    if (op.rc == 1)
        op.rc = -EIO; /* never ran: the batch failed before it */
    return op.rc;
}
