/* SPDX-License-Identifier: Apache-2.0
 * meta_writer: the single LMDB writer thread, its group commit and the syncer.
 *
 * Submitters queue an operation and sleep on its own condition variable (a
 * finished op wakes only its submitter). The writer takes up to
 * max_batch operations, opens one batch txn, runs each op in a child txn
 * (committed into the batch on success, aborted on failure), applies the
 * store-space changes each successful op recorded, syncs data files if an op
 * carried data, commits the batch and tells the store. Failed and
 * META_OP_EARLY ops are answered then; the others once the batch is durable.
 *
 * Durability (MDB_NOMETASYNC): a commit writes its pages, fdatasyncs them,
 * then writes its meta page without a sync. That meta page is durable once an
 * fdatasync of the file that began after the commit returned has ended: the
 * next commit's own sync, or the syncer's. The committed batch stays pending
 * until then: the writer hands it to the syncer thread, which fdatasyncs at
 * once and acknowledges it, while the writer already runs the next batch; if
 * the writer's next commit returns first, it acknowledges it. At most one
 * batch is pending (each commit covers the one before).
 *
 * Failures: a commit that could not write its pages because the file system
 * is full (LMDB reports ENOSPC, or EIO for the short write of a full disk)
 * leaves the environment as it was: its ops fail with -ENOSPC and the next
 * batch tries again, so writes work again as soon as space is freed. A sync
 * that failed (the syncer's, or the one inside a commit) is fatal: the kernel
 * may have dropped the pages it could not write and reports that only once,
 * so a later sync would succeed without them; the process logs CRIT and exits
 * (SRV_FATAL) instead of lingering half alive. Which of the two a failed
 * commit was is told by an fdatasync of the writer's own fd, which sees a
 * write-back error of the file that happened since its last sync.
 * Thread: the writer thread runs ops; the syncer only syncs and wakes
 * submitters; meta_submit from any other thread. */
#include "meta_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Detach the pending batch if a sync covering commit_seq @p upto has ended
 * (m->lock held): @return its ops, *tok and *held its read token. */
static struct meta__op *pending_take(struct meta_env *m, uint64_t upto, uint64_t *tok,
                                     bool *held)
{
    *held = false;
    if (m->pend_seq == 0 || m->pend_seq > upto)
        return NULL;
    struct meta__op *ops = m->pend_ops;
    *tok = m->pend_tok;
    *held = m->pend_tok_held;
    m->pend_ops = NULL;
    m->pend_seq = 0;
    m->pend_tok_held = false;
    return ops;
}

/* A sync of the LMDB file failed with @p err: what the kernel could not write
 * is lost and will not be reported again, so no later commit can be called
 * durable. Ends the process. */
static void sync_fatal(struct meta_env *m, int err)
{
    const char *dir = NULL;
    mdb_env_get_path(m->env, &dir);
    SRV_FATAL(META, "metadata sync of %s/data.mdb failed: %s; its state on disk is unknown, "
              "exiting so that a restart recovers from the last durable commit",
              dir ? dir : "?", strerror(err));
}

/* mdb_txn_commit failed with @p mdb_rc (nonzero). @return the ops' error:
 * -ENOSPC when the file system was full (the environment is unchanged and the
 * next batch tries again), else meta_err's mapping. A failed sync inside the
 * commit, or a poisoned environment (LMDB could not write its meta page), ends
 * the process. */
static int commit_failed(struct meta_env *m, int mdb_rc)
{
    if (mdb_rc != ENOSPC && mdb_rc != EIO && mdb_rc != EDQUOT && mdb_rc != EFBIG)
        return meta_err(mdb_rc);
    /* our own fd sees a write-back error since the last sync once, even when
     * the commit's sync consumed it on LMDB's fd: then pages were lost */
    if (fdatasync(m->fd) != 0)
        sync_fatal(m, errno);
    MDB_txn *probe = NULL;
    int rc = mdb_txn_begin(m->env, NULL, 0, &probe);
    if (rc == MDB_PANIC)
        SRV_FATAL(META, "metadata commit failed (%s) and left the LMDB environment unusable; "
                  "exiting so that a restart recovers from the last durable commit",
                  mdb_strerror(mdb_rc));
    if (rc == 0)
        mdb_txn_abort(probe);
    srv_log(ERROR, META, "metadata commit failed: %s (the file system holding the metadata is "
            "full?); changes fail with ENOSPC until space is freed", mdb_strerror(mdb_rc));
    return -ENOSPC;
}

/* The syncer: makes the last committed batch durable with one fdatasync that
 * begins after its commit returned, then acknowledges it, while the writer
 * goes on with the next batch. If the writer commits again first, that
 * commit's own sync covered the batch and the writer acknowledges it. */
static void *syncer_main(void *arg)
{
    struct meta_env *m = arg;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (m->pend_seq == 0 && !m->sync_stop)
            pthread_cond_wait(&m->sync_cv, &m->lock);
        if (m->pend_seq == 0)
            break;
        uint64_t upto = m->pend_seq, tok;
        bool held;
        pthread_mutex_unlock(&m->lock);
        if (fdatasync(m->fd) != 0)
            sync_fatal(m, errno);
        pthread_mutex_lock(&m->lock);
        struct meta__op *ops = pending_take(m, upto, &tok, &held);
        struct store *st = m->store;
        if (held && st) {
            /* the space it freed is free again when its submitters wake */
            pthread_mutex_unlock(&m->lock);
            store_read_end(st, tok);
            pthread_mutex_lock(&m->lock);
        }
        ops_finish(m, ops);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
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
    if (brc == MDB_PANIC)
        SRV_FATAL(META, "the LMDB environment is unusable after an earlier failure; exiting");
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
        brc = commit_failed(m, brc);
finish:
    if (parent)
        mdb_txn_abort(parent);
    if (m->store && touched)
        store_txn_done(m->store, batch_id, brc == 0);
    if (brc != 0) {
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
    struct meta__op *ok = NULL, *fail = NULL, *old = NULL;
    uint64_t old_tok = 0;
    bool old_held = false;
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
    if (brc == 0) {
        /* this commit's data sync (MDB_NOMETASYNC) began after the pending
         * batch's commit returned, so it made that batch's meta page durable:
         * acknowledge it; this batch is pending now and the syncer starts on it */
        old = pending_take(m, UINT64_MAX, &old_tok, &old_held);
        m->pend_ops = ok;
        m->pend_seq = m->seq;
        m->pend_tok = tok;
        m->pend_tok_held = tok_held;
        pthread_cond_signal(&m->sync_cv);
    }
    ops_finish(m, fail);
    if (old_held && m->store) {
        /* the space it freed is free again when its submitters wake */
        pthread_mutex_unlock(&m->lock);
        store_read_end(m->store, old_tok);
        pthread_mutex_lock(&m->lock);
    }
    ops_finish(m, old);
    pthread_mutex_unlock(&m->lock);
}

static void *writer_main(void *arg)
{
    struct meta_env *m = arg;
    pthread_mutex_lock(&m->lock);
    for (;;) {
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

/* Stop the sync thread (it acknowledges a pending batch first) and release
 * what it uses: its condition variable and its own fd of the LMDB file. */
static void syncer_stop(struct meta_env *m)
{
    pthread_mutex_lock(&m->lock);
    m->sync_stop = true;
    pthread_cond_signal(&m->sync_cv);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->syncer, NULL);
    m->syncer_running = false;
    pthread_cond_destroy(&m->sync_cv);
    close(m->fd);
}

int meta__writer_start(struct meta_env *m)
{
    const char *dir = NULL;
    char path[4096];
    int rc = mdb_env_get_path(m->env, &dir);
    if (rc)
        return meta_err(rc);
    /* the syncer's own open file: the kernel reports a failed write-back to
     * every open file once, so an error the syncer consumes is still seen by
     * the sync inside the writer's next commit (and the other way round) */
    if ((size_t)snprintf(path, sizeof(path), "%s/data.mdb", dir) >= sizeof(path))
        return -ENAMETOOLONG;
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        rc = -errno;
        srv_log(ERROR, META, "cannot open %s for syncing: %s", path, strerror(errno));
        return rc;
    }
    pthread_cond_init(&m->sync_cv, NULL);
    rc = pthread_create(&m->syncer, NULL, syncer_main, m);
    if (rc) {
        pthread_cond_destroy(&m->sync_cv);
        close(m->fd);
        return -rc;
    }
    m->syncer_running = true;
    rc = pthread_create(&m->writer, NULL, writer_main, m);
    if (rc) {
        syncer_stop(m);
        return -rc;
    }
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
    syncer_stop(m); /* it acknowledges the last batch before it ends */
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
