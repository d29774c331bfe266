/* SPDX-License-Identifier: Apache-2.0
 * meta_writer: the single writer thread, its group commit and the syncer.
 *
 * Submitters queue an operation and sleep on its own condition variable (a
 * finished op wakes only its submitter). The writer takes up to max_batch
 * operations, opens one batch txn, runs each op in a child txn (committed
 * into the batch on success, aborted on failure) and hands what each
 * successful op noted to the join hook, runs the prepare hook (data sync,
 * token), commits the batch and runs the end hook. Failed and META_OP_EARLY
 * ops are answered then; the others once the batch is durable. The writer
 * knows no other layer: what happens beside the metadata at commit is the
 * hooks' business (meta.h).
 *
 * Durability: the engine's commit syncs its pages but not the commit record
 * (LMDB: MDB_NOMETASYNC writes the meta page unsynced). That record is durable
 * once an engine sync that began after the commit returned has ended: the
 * next commit's own sync, or the syncer's. The committed batch stays pending
 * until then: the writer hands it to the syncer thread, which syncs at once
 * and acknowledges it, while the writer already runs the next batch; if the
 * writer's next commit returns first, it acknowledges it. At most one batch
 * is pending (each commit covers the one before).
 *
 * Failures: a commit that could not write its pages because the file system
 * is full leaves the store as it was: its ops fail with -ENOSPC and the next
 * batch tries again, so writes work again as soon as space is freed. A sync
 * that failed (the syncer's, or the one inside a commit) is fatal: the kernel
 * may have dropped the pages it could not write and reports that only once,
 * so a later sync would succeed without them; the process logs CRIT and exits
 * (SRV_FATAL) instead of lingering half alive. The engine tells the two apart
 * (meta_lmdb.c) and ends the process itself.
 * Thread: the writer thread runs ops; the syncer only syncs and wakes
 * submitters; meta_submit from any other thread. */
#include "meta_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

int meta_txn_note(struct meta_txn *t, uint32_t kind, const void *data, size_t len)
{
    struct meta__op *op = t->op;
    if (!op || len > META_NOTE_MAX)
        return -EINVAL;
    if (op->nnotes == op->capnotes) {
        size_t nc = op->capnotes ? op->capnotes * 2 : 8;
        struct meta_note *nv = realloc(op->notes, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        op->notes = nv;
        op->capnotes = nc;
    }
    struct meta_note *n = &op->notes[op->nnotes++];
    n->kind = kind;
    n->len = (uint32_t)len;
    memcpy(n->data, data, len);
    return 0;
}

bool meta_on_writer(struct meta_env *m)
{
    return m->writer_running && pthread_equal(pthread_self(), m->writer);
}

static void op_reset_notes(struct meta__op *op)
{
    free(op->notes);
    op->notes = NULL;
    op->nnotes = op->capnotes = 0;
}

/* Hand one op's notes to the join hook, in the batch txn. */
static int join_notes(struct meta_env *m, struct meta_txn *parent, struct meta__op *op,
                      void **state)
{
    if (!op->nnotes)
        return 0;
    if (!m->has_hooks || !m->hooks.join) {
        srv_log(ERROR, META, "an op noted %zu record(s) but no commit hooks are set",
                op->nnotes);
        return -EIO;
    }
    return m->hooks.join(m->hooks.arg, state, parent, op->notes, op->nnotes);
}

/* The release hook of a batch's token, outside the lock (m->lock held on entry
 * and on return). */
static void token_release(struct meta_env *m, uint64_t tok)
{
    void (*release)(void *, uint64_t) = m->has_hooks ? m->hooks.release : NULL;
    void *arg = m->hooks.arg;
    if (!release)
        return;
    pthread_mutex_unlock(&m->lock);
    release(arg, tok);
    pthread_mutex_lock(&m->lock);
}

/* Wake the submitters of a list of finished ops (m->lock held). */
static void ops_finish(struct meta_env *m, struct meta__op *list)
{
    for (struct meta__op *op = list, *next; op; op = next) {
        next = op->next;
        op_reset_notes(op);
        op->done = true;
        pthread_cond_signal(&op->cv);
    }
    (void)m;
}

/* Detach the pending batch if a sync covering commit_seq @p upto has ended
 * (m->lock held): @return its ops, *tok and *held its token. */
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
        m->be->sync(m); /* returns only once the batch is durable */
        pthread_mutex_lock(&m->lock);
        struct meta__op *ops = pending_take(m, upto, &tok, &held);
        if (held)
            token_release(m, tok); /* e.g. the space it freed is free again when its
                                    * submitters wake */
        ops_finish(m, ops);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

static int bump_seq(struct meta_env *m, struct meta_txn *parent)
{
    /* every batch changes at least this record, so every commit is a dirty
     * txn whose data sync also makes the previous meta page durable */
    uint8_t b[8];
    meta_be64_put(b, ++m->seq);
    return meta__put(parent, META_DBI_META, "commit_seq", 10, b, 8, 0);
}

static void run_batch(struct meta_env *m, struct meta__op *batch)
{
    struct meta_txn *parent = NULL, *child = NULL;
    struct meta__op *bad = NULL;
    bool any_data = false, begun = false, tok_held = false;
    void *state = NULL;
    uint64_t tok = 0;
    int brc;
    uint64_t nops = 0;

    brc = m->be->wtxn_begin(m, NULL, &parent);
    if (brc) {
        parent = NULL;
        goto finish;
    }
    begun = true;
    brc = bump_seq(m, parent);
    if (brc)
        goto finish;
    for (struct meta__op *op = batch; op; op = op->next) {
        nops++;
        int rc = m->be->wtxn_begin(m, parent, &child);
        if (rc) {
            brc = rc;
            goto finish;
        }
        child->op = op;
        rc = op->fn(child, op->arg);
        if (rc == 0)
            rc = m->be->wtxn_commit(child);
        else
            m->be->wtxn_abort(child);
        child = NULL;
        if (rc == 0) {
            rc = join_notes(m, parent, op, &state);
            if (rc) {
                /* the batch txn may hold a partial change: drop the batch, fail
                 * this op and run the others again in a new batch */
                srv_log(ERROR, META, "applying an op's commit notes failed: %s",
                        srv_strerror(rc));
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
    /* e.g. data durable before the metadata that points at it, and the space
     * this batch frees kept from reuse until the batch is durable (a power cut
     * would bring back metadata pointing at it): the token is held until the ack */
    if (m->has_hooks && m->hooks.prepare) {
        brc = m->hooks.prepare(m->hooks.arg, any_data, &tok);
        if (brc)
            goto finish;
        tok_held = true;
    }
    brc = m->be->wtxn_commit(parent);
    parent = NULL;
finish:
    if (parent)
        m->be->wtxn_abort(parent);
    if (begun && m->has_hooks && m->hooks.end)
        m->hooks.end(m->hooks.arg, state, brc);
    if (brc != 0) {
        if (tok_held && m->hooks.release)
            m->hooks.release(m->hooks.arg, tok);
        tok_held = false;
        if (begun)
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
            op_reset_notes(op);
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
    if (old_held)
        token_release(m, old_tok); /* e.g. the space it freed is free again when its
                                    * submitters wake */
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
 * its condition variable. */
static void syncer_stop(struct meta_env *m)
{
    pthread_mutex_lock(&m->lock);
    m->sync_stop = true;
    pthread_cond_signal(&m->sync_cv);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->syncer, NULL);
    m->syncer_running = false;
    pthread_cond_destroy(&m->sync_cv);
}

int meta__writer_start(struct meta_env *m)
{
    pthread_cond_init(&m->sync_cv, NULL);
    int rc = pthread_create(&m->syncer, NULL, syncer_main, m);
    if (rc) {
        pthread_cond_destroy(&m->sync_cv);
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
