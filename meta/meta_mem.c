/* SPDX-License-Identifier: Apache-2.0
 * meta_mem: the in-memory engine of meta (struct meta__backend), for tests:
 * the reference implementation of the backend contract of meta.h.
 *
 * Each table is a persistent treap (ordered by bytewise key order): a change
 * copies the path from the root to the changed node and shares the rest, so
 * every committed state (a version: one root per table) stays intact while
 * readers hold it. Nodes and the key/value blobs they point at are reference
 * counted (atomically: a reader may drop the last reference to an old
 * version). A read txn holds the version current when it began. A write txn
 * holds its own roots, copied from the current version; a nested txn starts
 * from its parent's roots and on commit hands its roots to the parent, on
 * abort drops them, so it aborts alone; the top-level commit publishes the
 * roots as the new current version. Nodes a write txn drops are freed only
 * when the top-level txn ends, so values it read stay valid until then. One
 * write txn at a time (a mutex held from begin to end).
 *
 * A store is kept in a process-wide registry under its name (the configured
 * directory) and survives meta_env_close: a later meta_env_open of the same
 * name finds it, as a restarted daemon finds its LMDB files. Nothing reaches
 * disk, so sync has nothing to do. Memory exhaustion aborts (tests only).
 * Thread: as meta.h. */
#include "meta_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define MEM_KEY_MAX 511 /* as LMDB, so the same keys fit both engines */

struct mblob {
    atomic_uint refs;
    uint32_t klen, vlen;
    unsigned char b[]; /* key bytes, then value bytes */
};

struct mnode {
    struct mnode *l, *r;
    atomic_uint refs;
    uint32_t prio;
    struct mblob *blob;
};

struct mver {
    atomic_uint refs;
    struct mnode *root[META_DBI__COUNT];
};

struct mstore {
    struct mstore *next;      /* registry */
    char *name;
    bool open;                /* an env uses it */
    pthread_mutex_t mu;       /* guards cur */
    struct mver *cur;
    pthread_mutex_t wmu;      /* held by the write txn in progress */
    uint32_t rng;             /* treap priorities (under wmu) */
};

struct mtxn {
    struct meta_txn base;
    struct mstore *st;
    struct mver *ver;                    /* read txn: its version */
    struct mnode *root[META_DBI__COUNT]; /* write txn: its tables */
    struct mtxn *parent;                 /* nested write txn: the txn it was begun in */
    struct mtxn *top;                    /* write txn: the top-level one (self if none) */
    struct mnode **dead;                 /* top: nodes dropped, freed at its end */
    size_t ndead, capdead;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mstore *reg;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    SRV_ASSERT(p != NULL);
    return p;
}

/* ---- nodes ---- */

static struct mblob *blob_new(const void *k, size_t kl, const void *v, size_t vl)
{
    struct mblob *b = xmalloc(sizeof(*b) + kl + vl);
    atomic_init(&b->refs, 1);
    b->klen = (uint32_t)kl;
    b->vlen = (uint32_t)vl;
    memcpy(b->b, k, kl);
    if (vl)
        memcpy(b->b + kl, v, vl);
    return b;
}

static void blob_unref(struct mblob *b)
{
    if (atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

static struct mnode *node_ref(struct mnode *n)
{
    if (n)
        atomic_fetch_add(&n->refs, 1);
    return n;
}

/* A new node of blob @p b (its reference taken) over children @p l and @p r (their
 * references taken). */
static struct mnode *node_new(struct mblob *b, uint32_t prio, struct mnode *l, struct mnode *r)
{
    struct mnode *n = xmalloc(sizeof(*n));
    n->l = l;
    n->r = r;
    n->prio = prio;
    n->blob = b;
    atomic_init(&n->refs, 1);
    return n;
}

/* A copy of @p n over children @p l and @p r (their references taken). */
static struct mnode *node_copy(const struct mnode *n, struct mnode *l, struct mnode *r)
{
    atomic_fetch_add(&n->blob->refs, 1);
    return node_new(n->blob, n->prio, l, r);
}

static void node_unref(struct mnode *n, struct mtxn *tx);

static void node_free(struct mnode *n)
{
    node_unref(n->l, NULL);
    node_unref(n->r, NULL);
    blob_unref(n->blob);
    free(n);
}

/* Drop a reference; the last one frees the node at once, or, inside write txn
 * @p tx, when its top-level txn ends (values it handed out stay valid). */
static void node_unref(struct mnode *n, struct mtxn *tx)
{
    if (!n || atomic_fetch_sub(&n->refs, 1) != 1)
        return;
    if (!tx) {
        node_free(n);
        return;
    }
    struct mtxn *top = tx->top;
    if (top->ndead == top->capdead) {
        top->capdead = top->capdead ? top->capdead * 2 : 64;
        struct mnode **nd = realloc(top->dead, top->capdead * sizeof(*nd));
        SRV_ASSERT(nd != NULL);
        top->dead = nd;
    }
    top->dead[top->ndead++] = n;
}

static int node_cmp(const void *k, size_t kl, const struct mnode *n)
{
    return meta__keycmp(k, kl, n->blob->b, n->blob->klen);
}

static const struct mnode *tree_find(const struct mnode *n, const void *k, size_t kl)
{
    while (n) {
        int c = node_cmp(k, kl, n);
        if (c == 0)
            return n;
        n = c < 0 ? n->l : n->r;
    }
    return NULL;
}

/* @p n with blob @p b put in (replacing the node of its key): a new tree (one new
 * reference); @p n is left as it was. */
static struct mnode *tree_put(const struct mnode *n, struct mblob *b, uint32_t prio)
{
    if (!n) {
        atomic_fetch_add(&b->refs, 1);
        return node_new(b, prio, NULL, NULL);
    }
    int c = node_cmp(b->b, b->klen, n);
    if (c == 0) {
        atomic_fetch_add(&b->refs, 1);
        return node_new(b, n->prio, node_ref(n->l), node_ref(n->r));
    }
    if (c < 0) {
        struct mnode *nl = tree_put(n->l, b, prio); /* fresh: ours to change */
        if (nl->prio > n->prio) {
            nl->r = node_copy(n, nl->r, node_ref(n->r));
            return nl;
        }
        return node_copy(n, nl, node_ref(n->r));
    }
    struct mnode *nr = tree_put(n->r, b, prio);
    if (nr->prio > n->prio) {
        nr->l = node_copy(n, node_ref(n->l), nr->l);
        return nr;
    }
    return node_copy(n, node_ref(n->l), nr);
}

/* Join trees @p a < @p b (both references consumed). */
static struct mnode *tree_merge(struct mnode *a, struct mnode *b, struct mtxn *tx)
{
    if (!a)
        return b;
    if (!b)
        return a;
    struct mnode *x;
    if (a->prio > b->prio) {
        x = node_copy(a, node_ref(a->l), tree_merge(node_ref(a->r), b, tx));
        node_unref(a, tx);
    } else {
        x = node_copy(b, tree_merge(a, node_ref(b->l), tx), node_ref(b->r));
        node_unref(b, tx);
    }
    return x;
}

/* @p n without key @p k, which it holds: a new tree (one new reference). */
static struct mnode *tree_del(const struct mnode *n, const void *k, size_t kl, struct mtxn *tx)
{
    int c = node_cmp(k, kl, n);
    if (c == 0)
        return tree_merge(node_ref(n->l), node_ref(n->r), tx);
    if (c < 0)
        return node_copy(n, tree_del(n->l, k, kl, tx), node_ref(n->r));
    return node_copy(n, node_ref(n->l), tree_del(n->r, k, kl, tx));
}

/* ---- versions ---- */

static void ver_unref(struct mver *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    for (int i = 0; i < META_DBI__COUNT; i++)
        node_unref(v->root[i], NULL);
    free(v);
}

static struct mver *ver_current(struct mstore *st)
{
    pthread_mutex_lock(&st->mu);
    struct mver *v = st->cur;
    atomic_fetch_add(&v->refs, 1);
    pthread_mutex_unlock(&st->mu);
    return v;
}

/* ---- engine ---- */

static int mopen(struct meta_env *m, const struct meta_env_config *cfg)
{
    struct mstore *st;
    int rc = 0;
    pthread_mutex_lock(&reg_mu);
    for (st = reg; st && strcmp(st->name, cfg->dir) != 0; st = st->next)
        ;
    if (!st) {
        st = calloc(1, sizeof(*st));
        if (st)
            st->name = strdup(cfg->dir);
        if (!st || !st->name) {
            free(st);
            rc = -ENOMEM;
            goto out;
        }
        st->cur = calloc(1, sizeof(*st->cur));
        if (!st->cur) {
            free(st->name);
            free(st);
            rc = -ENOMEM;
            goto out;
        }
        atomic_init(&st->cur->refs, 1);
        pthread_mutex_init(&st->mu, NULL);
        pthread_mutex_init(&st->wmu, NULL);
        st->rng = 0x9e3779b9u;
        st->next = reg;
        reg = st;
    } else if (st->open) {
        srv_log(ERROR, META, "in-memory store %s is already open", cfg->dir);
        rc = -EBUSY;
        goto out;
    }
    st->open = true;
    m->bs = st;
out:
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

static void mclose(struct meta_env *m)
{
    struct mstore *st = m->bs;
    pthread_mutex_lock(&reg_mu);
    st->open = false; /* kept for the next open of its name */
    pthread_mutex_unlock(&reg_mu);
    m->bs = NULL;
}

static struct mtxn *txn_new(struct meta_env *m)
{
    struct mtxn *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->base.env = m;
    t->st = m->bs;
    return t;
}

static int mrtxn_begin(struct meta_env *m, struct meta_txn **out)
{
    struct mtxn *t = txn_new(m);
    *out = NULL;
    if (!t)
        return -ENOMEM;
    t->ver = ver_current(t->st);
    *out = &t->base;
    return 0;
}

static void mrtxn_end(struct meta_txn *bt)
{
    struct mtxn *t = (struct mtxn *)bt;
    ver_unref(t->ver);
    free(t);
}

static int mwtxn_begin(struct meta_env *m, struct meta_txn *parent, struct meta_txn **out)
{
    struct mtxn *t = txn_new(m), *p = (struct mtxn *)parent;
    *out = NULL;
    if (!t)
        return -ENOMEM;
    t->base.write = true;
    if (p) {
        t->parent = p;
        t->top = p->top;
        for (int i = 0; i < META_DBI__COUNT; i++)
            t->root[i] = node_ref(p->root[i]);
    } else {
        t->top = t;
        pthread_mutex_lock(&t->st->wmu);
        struct mver *v = ver_current(t->st);
        for (int i = 0; i < META_DBI__COUNT; i++)
            t->root[i] = node_ref(v->root[i]);
        ver_unref(v);
    }
    *out = &t->base;
    return 0;
}

/* The end of a txn: drop its roots (abort) and, for a top-level one, free what
 * it dropped and let the next writer in. */
static void txn_finish(struct mtxn *t, bool drop_roots)
{
    if (drop_roots)
        for (int i = 0; i < META_DBI__COUNT; i++)
            node_unref(t->root[i], t);
    if (t->top == t) {
        for (size_t i = 0; i < t->ndead; i++)
            node_free(t->dead[i]);
        free(t->dead);
        pthread_mutex_unlock(&t->st->wmu);
    }
    free(t);
}

static int mwtxn_commit(struct meta_txn *bt)
{
    struct mtxn *t = (struct mtxn *)bt;
    if (t->parent) {
        struct mtxn *p = t->parent;
        for (int i = 0; i < META_DBI__COUNT; i++) {
            node_unref(p->root[i], p);
            p->root[i] = t->root[i];
        }
        txn_finish(t, false);
        return 0;
    }
    struct mver *v = calloc(1, sizeof(*v));
    SRV_ASSERT(v != NULL);
    atomic_init(&v->refs, 1);
    memcpy(v->root, t->root, sizeof(v->root));
    pthread_mutex_lock(&t->st->mu);
    struct mver *old = t->st->cur;
    t->st->cur = v;
    pthread_mutex_unlock(&t->st->mu);
    ver_unref(old);
    txn_finish(t, false);
    return 0;
}

static void mwtxn_abort(struct meta_txn *bt)
{
    txn_finish((struct mtxn *)bt, true);
}

static struct mnode *troot(struct meta_txn *bt, enum meta_dbi tb)
{
    struct mtxn *t = (struct mtxn *)bt;
    return bt->write ? t->root[tb] : t->ver->root[tb];
}

static int mget(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
                struct meta_val *v)
{
    const struct mnode *n = tree_find(troot(t, tb), key, klen);
    if (!n)
        return -ENOENT;
    v->data = n->blob->b + n->blob->klen;
    v->len = n->blob->vlen;
    return 0;
}

static int mput(struct meta_txn *bt, enum meta_dbi tb, const void *key, size_t klen,
                const void *val, size_t vlen, unsigned flags)
{
    struct mtxn *t = (struct mtxn *)bt;
    SRV_ASSERT(bt->write);
    if (klen == 0 || klen > MEM_KEY_MAX) {
        srv_log(ERROR, META, "in-memory store: key of %zu bytes refused", klen);
        return -EIO;
    }
    if ((flags & META_NOOVERWRITE) && tree_find(t->root[tb], key, klen))
        return -EEXIST;
    struct mstore *st = t->st;
    st->rng ^= st->rng << 13;
    st->rng ^= st->rng >> 17;
    st->rng ^= st->rng << 5;
    struct mblob *b = blob_new(key, klen, val, vlen);
    struct mnode *nr = tree_put(t->root[tb], b, st->rng);
    blob_unref(b);
    node_unref(t->root[tb], t);
    t->root[tb] = nr;
    return 0;
}

static int mdel(struct meta_txn *bt, enum meta_dbi tb, const void *key, size_t klen)
{
    struct mtxn *t = (struct mtxn *)bt;
    SRV_ASSERT(bt->write);
    if (!tree_find(t->root[tb], key, klen))
        return -ENOENT;
    struct mnode *nr = tree_del(t->root[tb], key, klen, t);
    node_unref(t->root[tb], t);
    t->root[tb] = nr;
    return 0;
}

struct mscan {
    const struct meta_range *r;
    const void *seek;
    size_t slen;
    meta_scan_cb cb;
    void *arg;
    int rc;
    bool stop;
};

static void visit(const struct mnode *n, struct mscan *s)
{
    const struct mblob *b = n->blob;
    const struct meta_range *r = s->r;
    if (!meta__in_prefix(r, b->b, b->klen)) {
        s->stop = true; /* left the prefix's keys */
        return;
    }
    if (!r->reverse && r->after && r->start &&
        meta__keycmp(b->b, b->klen, r->start, r->slen) == 0)
        return;
    s->rc = s->cb(s->arg, b->b, b->klen, b->b + b->klen, b->vlen);
    if (s->rc)
        s->stop = true;
}

/* In order, the keys >= seek. */
static void scan_fwd(const struct mnode *n, struct mscan *s)
{
    while (n && !s->stop) {
        bool in = !s->seek || meta__keycmp(n->blob->b, n->blob->klen, s->seek, s->slen) >= 0;
        if (in) {
            scan_fwd(n->l, s);
            if (!s->stop)
                visit(n, s);
        }
        n = n->r;
    }
}

/* In reverse order, the keys < seek. */
static void scan_rev(const struct mnode *n, struct mscan *s)
{
    while (n && !s->stop) {
        bool in = !s->seek || meta__keycmp(n->blob->b, n->blob->klen, s->seek, s->slen) < 0;
        if (in) {
            scan_rev(n->r, s);
            if (!s->stop)
                visit(n, s);
        }
        n = n->l;
    }
}

static int mscan(struct meta_txn *bt, enum meta_dbi tb, const struct meta_range *r,
                 meta_scan_cb cb, void *arg)
{
    unsigned char buf[META_KEY_LIMIT];
    struct mscan s = {.r = r, .cb = cb, .arg = arg};
    meta__scan_seek(r, buf, &s.seek, &s.slen);
    /* the tree stays whole while the callback runs, whatever it does */
    struct mnode *root = node_ref(troot(bt, tb));
    if (r->reverse)
        scan_rev(root, &s);
    else
        scan_fwd(root, &s);
    node_unref(root, bt->write ? (struct mtxn *)bt : NULL);
    return s.rc;
}

static void msync(struct meta_env *m)
{
    (void)m;
}

const struct meta__backend meta__mem = {
    .name = "memory",
    .open = mopen,
    .close = mclose,
    .rtxn_begin = mrtxn_begin,
    .rtxn_end = mrtxn_end,
    .wtxn_begin = mwtxn_begin,
    .wtxn_commit = mwtxn_commit,
    .wtxn_abort = mwtxn_abort,
    .get = mget,
    .put = mput,
    .del = mdel,
    .scan = mscan,
    .sync = msync,
};
