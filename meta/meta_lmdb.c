/* SPDX-License-Identifier: Apache-2.0
 * meta_lmdb: the LMDB engine of meta (struct meta__backend): one environment
 * in a directory, one named database per table of meta_schema.h, MDB_NOTLS
 * read txns kept reset for reuse (mdb_txn_renew keeps the reader slot): one
 * per thread and environment, and a pool behind a mutex for the rest; nested
 * write txns for ops, and the syncer's own fd of the data file.
 *
 * Read txns: a thread's first read txn of an environment makes it a slot of
 * its own (struct rslot), which later read txns of that thread renew and
 * reset without a lock. Reset at the end of every read txn, a slot holds its
 * LMDB reader slot but no snapshot (a reset reader pins no page, and a renew
 * reads the newest committed txn id, so a read sees every commit that returned
 * before it began, whichever thread made it). A read txn begun while the
 * thread's slot is in use (nested), and every read txn once THREAD_SLOTS_MAX
 * threads have slots, comes from the pool instead. A slot is released (its
 * reader slot freed) when its thread exits (a pthread key's destructor) or
 * the environment closes, whichever comes first; slots_mu orders the two.
 * The only file of s3nfs, with meta_err's users in meta/, that knows LMDB.
 *
 * Durability: the environment runs with MDB_NOMETASYNC (one sync per commit,
 * the meta page written unsynced); the syncer makes a commit durable with an
 * fdatasync of its own fd that begins after the commit returned. Its own open
 * file: the kernel reports a failed write-back to every open file once, so an
 * error the syncer consumes is still seen by the sync inside the writer's next
 * commit (and the other way round).
 *
 * Failures: a commit that could not write its pages because the file system
 * is full (LMDB reports ENOSPC, or EIO for the short write of a full disk)
 * leaves the environment as it was: -ENOSPC, and the next batch tries again.
 * A failed sync (the syncer's, or the one inside a commit) ends the process
 * (SRV_FATAL). Which of the two a failed commit was is told by an fdatasync
 * of our own fd, which sees a write-back error of the file that happened since
 * its last sync; an environment LMDB marked unusable (MDB_PANIC: it could not
 * write a meta page) ends the process too.
 * Thread: as meta.h; a txn is used by one thread at a time. */
#include "meta_int.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"

#define RPOOL_MAX 64
/* LMDB reader slots of the environment (mdb_env_set_maxreaders): threads with
 * a slot of their own hold one each, reset or not; the pool holds up to
 * RPOOL_MAX, and every read txn in progress one. */
#define MAX_READERS 1024
#define THREAD_SLOTS_MAX (MAX_READERS / 2)

static const char *const dbi_names[META_DBI__COUNT] = META_DBI_NAMES;

struct rslot;

struct ltxn {
    struct meta_txn base;
    MDB_txn *txn;
    bool top;           /* a write txn not nested in another */
    struct rslot *slot; /* a read txn of a thread's slot (else the pool's or its own) */
};

/* A thread's read txn of one environment (see the header). */
struct rslot {
    struct ltxn t;               /* t.txn: reset between uses; NULL until the first */
    struct lstate *_Atomic s;    /* NULL once released by the environment's close */
    bool busy;                   /* a read txn of the thread uses it now */
    struct rslot *tnext;         /* the thread's slots (only its thread walks them) */
    struct rslot *enext, *eprev; /* the environment's slots (under slots_mu) */
};

struct lstate {
    MDB_env *env;
    MDB_dbi dbi[META_DBI__COUNT];
    int fd;                    /* the syncer's own fd of data.mdb */
    pthread_mutex_t rpool_mu;  /* reset read txns kept for reuse */
    struct ltxn *rpool[RPOOL_MAX];
    int nrpool;
    struct rslot *slots; /* threads' slots (under slots_mu) */
    size_t nslots;
};

static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
static pthread_key_t slots_key; /* armed with the thread's first slot: releases them at exit */
static _Thread_local struct rslot *my_slots;

int meta_err(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return -ENOENT;
    case MDB_KEYEXIST:
        return -EEXIST;
    case MDB_MAP_FULL:
        srv_log(CRIT, META, "LMDB map is full: raise map_size; writes fail with ENOSPC");
        return -ENOSPC;
    case MDB_TXN_FULL:
        srv_log(ERROR, META, "LMDB transaction too large");
        return -ENOSPC;
    case ENOMEM:
        return -ENOMEM;
    default:
        if (rc > 0 && rc < 4096) {
            srv_log(ERROR, META, "LMDB: %s", mdb_strerror(rc));
            return -rc;
        }
        srv_log(ERROR, META, "LMDB error %d: %s", rc, mdb_strerror(rc));
        return -EIO;
    }
}

static struct lstate *ls(struct meta_env *m)
{
    return m->bs;
}

static MDB_txn *ltx(struct meta_txn *t)
{
    return ((struct ltxn *)t)->txn;
}

static MDB_dbi ldbi(struct meta_txn *t, enum meta_dbi tb)
{
    return ls(t->env)->dbi[tb];
}

MDB_env *meta__lmdb_env(struct meta_env *m)
{
    return m->be == &meta__lmdb ? ls(m)->env : NULL;
}

/* ---- threads' read slots ---- */

/* Take @p sl off its environment and free its txn (under slots_mu). */
static void slot_release(struct lstate *s, struct rslot *sl)
{
    if (sl->t.txn)
        mdb_txn_abort(sl->t.txn); /* frees the LMDB reader slot too */
    sl->t.txn = NULL;
    if (sl->eprev)
        sl->eprev->enext = sl->enext;
    else
        s->slots = sl->enext;
    if (sl->enext)
        sl->enext->eprev = sl->eprev;
    s->nslots--;
    atomic_store_explicit(&sl->s, NULL, memory_order_relaxed);
}

/* The thread ends: release its slots (pthread key destructor). */
static void slots_thread_exit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&slots_mu);
    for (struct rslot *sl = my_slots, *next; sl; sl = next) {
        next = sl->tnext;
        struct lstate *s = atomic_load_explicit(&sl->s, memory_order_relaxed);
        if (s)
            slot_release(s, sl);
        free(sl);
    }
    my_slots = NULL;
    pthread_mutex_unlock(&slots_mu);
}

static void slots_key_make(void)
{
    if (pthread_key_create(&slots_key, slots_thread_exit) != 0)
        slots_key = (pthread_key_t)-1;
}

/* A new slot of the calling thread for @p s, or NULL (no memory, or too many
 * threads have one: the caller uses the pool). Frees the thread's slots of
 * environments closed since. */
static struct rslot *slot_new(struct lstate *s)
{
    pthread_once(&slots_once, slots_key_make);
    if (slots_key == (pthread_key_t)-1)
        return NULL;
    struct rslot *sl = NULL;
    pthread_mutex_lock(&slots_mu);
    for (struct rslot **pp = &my_slots; *pp;) {
        struct rslot *d = *pp;
        if (atomic_load_explicit(&d->s, memory_order_relaxed)) {
            pp = &d->tnext;
            continue;
        }
        *pp = d->tnext;
        free(d);
    }
    if (s->nslots < THREAD_SLOTS_MAX && (sl = calloc(1, sizeof(*sl)))) {
        atomic_store_explicit(&sl->s, s, memory_order_relaxed);
        sl->t.slot = sl;
        sl->enext = s->slots;
        if (s->slots)
            s->slots->eprev = sl;
        s->slots = sl;
        s->nslots++;
        sl->tnext = my_slots;
        my_slots = sl;
    }
    pthread_mutex_unlock(&slots_mu);
    if (sl && pthread_getspecific(slots_key) == NULL)
        pthread_setspecific(slots_key, sl); /* any non-NULL value: the destructor walks my_slots */
    return sl;
}

/* The calling thread's slot for @p s, made on first use; NULL: none. */
static struct rslot *slot_of(struct lstate *s)
{
    for (struct rslot *sl = my_slots; sl; sl = sl->tnext)
        if (atomic_load_explicit(&sl->s, memory_order_relaxed) == s)
            return sl;
    return slot_new(s);
}

static void lclose(struct meta_env *m)
{
    struct lstate *s = ls(m);
    if (!s)
        return;
    pthread_mutex_lock(&slots_mu);
    while (s->slots)
        slot_release(s, s->slots);
    pthread_mutex_unlock(&slots_mu);
    for (int i = 0; i < s->nrpool; i++) {
        mdb_txn_abort(s->rpool[i]->txn);
        free(s->rpool[i]);
    }
    pthread_mutex_destroy(&s->rpool_mu);
    if (s->fd >= 0)
        close(s->fd);
    if (s->env) {
        mdb_env_sync(s->env, 1);
        mdb_env_close(s->env);
    }
    free(s);
    m->bs = NULL;
}

/* Allocate the blocks of LMDB's lock file in @p dir, which LMDB sized for
 * MAX_READERS reader slots but left sparse. A read txn takes its reader slot
 * by writing it through LMDB's shared mapping of that file, and a page first
 * written while the file system is full raises SIGBUS: with a slot per thread
 * (slot_new), a thread's first read on a full metadata file system killed the
 * daemon. Failing here only leaves that risk, so it is logged, not fatal. */
static void lock_file_allocate(const char *dir)
{
    char path[4096];
    struct stat st;
    if ((size_t)snprintf(path, sizeof(path), "%s/lock.mdb", dir) >= sizeof(path))
        return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    int e = fstat(fd, &st) != 0 ? errno : posix_fallocate(fd, 0, st.st_size);
    if (e)
        srv_log(WARN, META, "cannot allocate %s (%s): reads may fail hard if the file system fills",
                path, strerror(e));
    close(fd);
}

static int lopen(struct meta_env *m, const struct meta_env_config *cfg)
{
    struct lstate *s = calloc(1, sizeof(*s));
    MDB_txn *txn = NULL;
    char path[4096];
    int rc;

    if (!s)
        return -ENOMEM;
    s->fd = -1;
    pthread_mutex_init(&s->rpool_mu, NULL);
    m->bs = s;
    if (mkdir(cfg->dir, 0750) != 0 && errno != EEXIST) {
        rc = -errno;
        srv_log(ERROR, META, "cannot create %s: %s", cfg->dir, strerror(errno));
        goto out;
    }
    rc = mdb_env_create(&s->env);
    if (rc) {
        s->env = NULL;
        rc = meta_err(rc);
        goto out;
    }
    mdb_env_set_maxdbs(s->env, META_DBI__COUNT + 4);
    mdb_env_set_maxreaders(s->env, MAX_READERS);
    rc = mdb_env_set_mapsize(s->env, cfg->map_size ? cfg->map_size : (16ull << 30));
    if (rc) {
        rc = meta_err(rc);
        goto out;
    }
    /* MDB_NOMETASYNC: one sync per commit; a batch is acknowledged only once
     * a later sync (the syncer's or the next commit's) made its meta page
     * durable (meta_writer.c) */
    rc = mdb_env_open(s->env, cfg->dir, MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC, 0640);
    if (rc) {
        srv_log(ERROR, META, "cannot open LMDB environment %s: %s", cfg->dir, mdb_strerror(rc));
        rc = meta_err(rc);
        goto out;
    }
    lock_file_allocate(cfg->dir);
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc) {
        txn = NULL;
        rc = meta_err(rc);
        goto out;
    }
    for (int i = 0; i < META_DBI__COUNT; i++) {
        rc = mdb_dbi_open(txn, dbi_names[i], MDB_CREATE, &s->dbi[i]);
        if (rc) {
            srv_log(ERROR, META, "cannot open database %s: %s", dbi_names[i], mdb_strerror(rc));
            rc = meta_err(rc);
            goto out;
        }
    }
    rc = meta_err(mdb_txn_commit(txn));
    txn = NULL;
    if (rc)
        goto out;
    if ((size_t)snprintf(path, sizeof(path), "%s/data.mdb", cfg->dir) >= sizeof(path)) {
        rc = -ENAMETOOLONG;
        goto out;
    }
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        rc = -errno;
        srv_log(ERROR, META, "cannot open %s for syncing: %s", path, strerror(errno));
    }
out:
    if (txn)
        mdb_txn_abort(txn);
    if (rc)
        lclose(m);
    return rc;
}

static int lrtxn_begin(struct meta_env *m, struct meta_txn **out)
{
    struct lstate *s = ls(m);
    struct ltxn *t = NULL;
    struct rslot *sl = slot_of(s);
    if (sl && !sl->busy) {
        /* the thread's own: no lock; a renew takes the newest committed txn */
        int rc = sl->t.txn ? mdb_txn_renew(sl->t.txn) : MDB_BAD_TXN;
        if (rc) {
            if (sl->t.txn)
                mdb_txn_abort(sl->t.txn);
            sl->t.txn = NULL;
            sl->t.base.env = m;
            rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &sl->t.txn);
            if (rc) {
                sl->t.txn = NULL;
                *out = NULL;
                return meta_err(rc);
            }
        }
        sl->busy = true;
        *out = &sl->t.base;
        return 0;
    }
    pthread_mutex_lock(&s->rpool_mu);
    if (s->nrpool > 0)
        t = s->rpool[--s->nrpool];
    pthread_mutex_unlock(&s->rpool_mu);
    if (t) {
        if (mdb_txn_renew(t->txn) == 0) {
            *out = &t->base;
            return 0;
        }
        mdb_txn_abort(t->txn);
    } else {
        t = calloc(1, sizeof(*t));
        if (!t) {
            *out = NULL;
            return -ENOMEM;
        }
        t->base.env = m;
    }
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &t->txn);
    if (rc) {
        free(t);
        *out = NULL;
        return meta_err(rc);
    }
    *out = &t->base;
    return 0;
}

/* The id of the last txn committed when @p bt began: LMDB gives every write
 * txn that commits a new one. */
static uint64_t lsnapshot(const struct meta_txn *bt)
{
    return mdb_txn_id(((const struct ltxn *)bt)->txn);
}

static void lrtxn_end(struct meta_txn *bt)
{
    struct ltxn *t = (struct ltxn *)bt;
    struct lstate *s = ls(bt->env);
    mdb_txn_reset(t->txn);
    if (t->slot) {
        t->slot->busy = false;
        return;
    }
    pthread_mutex_lock(&s->rpool_mu);
    if (s->nrpool < RPOOL_MAX) {
        s->rpool[s->nrpool++] = t;
        t = NULL;
    }
    pthread_mutex_unlock(&s->rpool_mu);
    if (t) {
        mdb_txn_abort(t->txn);
        free(t);
    }
}

/* A sync of the LMDB file failed with @p err: what the kernel could not write
 * is lost and will not be reported again, so no later commit can be called
 * durable. Ends the process. */
static void sync_fatal(struct meta_env *m, int err)
{
    const char *dir = NULL;
    mdb_env_get_path(ls(m)->env, &dir);
    SRV_FATAL(META, "metadata sync of %s/data.mdb failed: %s; its state on disk is unknown, "
              "exiting so that a restart recovers from the last durable commit",
              dir ? dir : "?", strerror(err));
}

static int lwtxn_begin(struct meta_env *m, struct meta_txn *parent, struct meta_txn **out)
{
    struct ltxn *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return -ENOMEM;
    int rc = mdb_txn_begin(ls(m)->env, parent ? ltx(parent) : NULL, 0, &t->txn);
    if (rc == MDB_PANIC)
        SRV_FATAL(META, "the LMDB environment is unusable after an earlier failure; exiting");
    if (rc) {
        free(t);
        return meta_err(rc);
    }
    t->base.env = m;
    t->base.write = true;
    t->top = parent == NULL;
    *out = &t->base;
    return 0;
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
    if (fdatasync(ls(m)->fd) != 0)
        sync_fatal(m, errno);
    MDB_txn *probe = NULL;
    int rc = mdb_txn_begin(ls(m)->env, NULL, 0, &probe);
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

static int lwtxn_commit(struct meta_txn *bt)
{
    struct meta_env *m = bt->env;
    bool top = ((struct ltxn *)bt)->top;
    int rc = mdb_txn_commit(ltx(bt));
    free(bt);
    if (rc == 0)
        return 0;
    return top ? commit_failed(m, rc) : meta_err(rc);
}

static void lwtxn_abort(struct meta_txn *bt)
{
    mdb_txn_abort(ltx(bt));
    free(bt);
}

static int lget(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
                struct meta_val *v)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key}, d;
    int rc = mdb_get(ltx(t), ldbi(t, tb), &k, &d);
    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    if (rc)
        return meta_err(rc);
    v->data = d.mv_data;
    v->len = d.mv_size;
    return 0;
}

static int lput(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
                const void *val, size_t vlen, unsigned flags)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key};
    MDB_val v = {.mv_size = vlen, .mv_data = (void *)val};
    int rc = mdb_put(ltx(t), ldbi(t, tb), &k, &v, (flags & META_NOOVERWRITE) ? MDB_NOOVERWRITE : 0);
    if (rc == MDB_KEYEXIST)
        return -EEXIST;
    return meta_err(rc);
}

static int ldel(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key};
    int rc = mdb_del(ltx(t), ldbi(t, tb), &k, NULL);
    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    return meta_err(rc);
}

static int lscan(struct meta_txn *t, enum meta_dbi tb, const struct meta_range *r,
                 meta_scan_cb cb, void *arg)
{
    unsigned char buf[META_KEY_LIMIT];
    MDB_cursor *cur;
    MDB_val k, v;
    const void *seek;
    size_t slen;
    int rc = mdb_cursor_open(ltx(t), ldbi(t, tb), &cur);
    if (rc)
        return meta_err(rc);
    meta__scan_seek(r, buf, &seek, &slen);
    MDB_cursor_op step = r->reverse ? MDB_PREV : MDB_NEXT;
    if (!seek) {
        rc = mdb_cursor_get(cur, &k, &v, r->reverse ? MDB_LAST : MDB_FIRST);
    } else {
        k.mv_data = (void *)seek;
        k.mv_size = slen;
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        if (r->reverse && (rc == 0 || rc == MDB_NOTFOUND))
            rc = mdb_cursor_get(cur, &k, &v, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
        else if (rc == 0 && r->after && r->start &&
                 meta__keycmp(k.mv_data, k.mv_size, r->start, r->slen) == 0)
            rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, step)) {
        if (!meta__in_prefix(r, k.mv_data, k.mv_size))
            break;
        int res = cb(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
        if (res) {
            mdb_cursor_close(cur);
            return res;
        }
    }
    mdb_cursor_close(cur);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : meta_err(rc);
}

static void lsync(struct meta_env *m)
{
    if (fdatasync(ls(m)->fd) != 0)
        sync_fatal(m, errno);
}

const struct meta__backend meta__lmdb = {
    .name = "lmdb",
    .open = lopen,
    .close = lclose,
    .rtxn_begin = lrtxn_begin,
    .rtxn_end = lrtxn_end,
    .snapshot = lsnapshot,
    .wtxn_begin = lwtxn_begin,
    .wtxn_commit = lwtxn_commit,
    .wtxn_abort = lwtxn_abort,
    .get = lget,
    .put = lput,
    .del = ldel,
    .scan = lscan,
    .sync = lsync,
};
