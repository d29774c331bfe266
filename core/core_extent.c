/* SPDX-License-Identifier: Apache-2.0
 * core_extent: the extent maps of files and the store's side of each group
 * commit (the data sub-module, core_data_int.h).
 *
 * An op never calls the store: it notes the extents it makes used or free
 * (CORE_NOTE_USE / CORE_NOTE_FREE, with meta_txn_note) and writes their block
 * CRCs; the commit hooks set at open apply the notes to the store's free map
 * in the batch txn through one store_txn per batch (join), tell the store how
 * the batch ended (end), sync the data files when an op carried data and take
 * a store read token (prepare) that is dropped once the batch is durable
 * (release), so space the batch freed is not reused before then.
 *
 * The effective extent map of a file is its committed extents (meta_extent.h)
 * with its pending ones laid over them (core_pend.c): a committed extent that
 * any pending one overlaps is shadowed whole.
 * Thread: txn helpers on the txn's thread (writes inside writer ops); the
 * hooks on the writer (release also on the syncer). */
#include "core_data_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

/* ---- state, wiring ---- */

int core__data_init(struct core *c)
{
    struct core__data *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    c->data = d;
    pthread_mutex_init(&d->vb_mu, NULL);
    core__pend_init(c);
    for (int i = 0; i < CORE_WLOCKS; i++)
        pthread_mutex_init(&d->wlock[i], NULL);
    int rc = core__tier_init(c);
    return rc ? rc : core__cache_init(c, CORE_CACHE_BYTES);
}

void core__data_fini(struct core *c)
{
    struct core__data *d = c->data;
    if (!d)
        return;
    core__tier_fini(c);
    core__pend_fini(c); /* what a failed flush left: lost, its space free at the next open */
    for (int i = 0; i < CORE_WLOCKS; i++)
        pthread_mutex_destroy(&d->wlock[i]);
    core__cache_fini(c);
    core__vdata_fini(c);
    free(d);
    c->data = NULL;
}

static int store_init_map(struct core *c)
{
    struct meta_txn *t;
    struct store_txn *st = NULL;
    struct store_map map;
    int rc = meta_wtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    meta_free_map(t, &map);
    rc = store_txn_begin(c->store, &map, &st);
    if (rc == 0)
        rc = store_txn_init(st);
    if (rc) {
        meta_wtxn_abort(t);
        store_txn_done(st, 0);
        return rc;
    }
    rc = meta_wtxn_commit(t);
    store_txn_done(st, rc == 0);
    return rc;
}

static int hook_join(void *arg, void **state, struct meta_txn *batch,
                     const struct meta_note *notes, size_t n)
{
    struct core *c = arg;
    struct store_txn *st = *state;
    int rc = 0;
    if (!st) {
        struct store_map map;
        meta_free_map(batch, &map);
        rc = store_txn_begin(c->store, &map, &st);
        if (rc)
            return rc;
        *state = st;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct store_extent e;
        if (notes[i].len != sizeof(e))
            return -EINVAL;
        memcpy(&e, notes[i].data, sizeof(e));
        rc = notes[i].kind == CORE_NOTE_USE ? store_txn_use(st, &e) : store_txn_free(st, &e);
    }
    return rc;
}

static int hook_prepare(void *arg, bool data, uint64_t *token)
{
    struct core *c = arg;
    if (data) {
        int rc = store_sync(c->store);
        if (rc) {
            srv_log(ERROR, META, "data sync failed before commit: %s", srv_strerror(rc));
            return rc;
        }
    }
    *token = store_read_begin(c->store);
    return 0;
}

static void hook_end(void *arg, void *state, int rc)
{
    (void)arg;
    store_txn_done(state, rc == 0);
}

static void hook_release(void *arg, uint64_t token)
{
    struct core *c = arg;
    store_read_end(c->store, token);
}

int core__data_wire(struct core *c)
{
    if (store_needs_init(c->store)) {
        int rc = store_init_map(c);
        if (rc)
            return rc;
    }
    struct meta_hooks hooks = {.arg = c, .join = hook_join, .prepare = hook_prepare,
                               .end = hook_end, .release = hook_release};
    meta_env_set_hooks(c->meta, &hooks);
    store_set_forget(c->store, core__zc_forget, c);
    return 0;
}

/* ---- extent lists and the effective map ---- */

int core__fext_push(struct core__fext_list *l, const struct core__fext *x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct core__fext *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = *x;
    return 0;
}

static bool overlaps_any(const struct core__fext_list *l, uint64_t s, uint64_t e)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].foff < e && l->v[i].foff + l->v[i].vlen > s)
            return true;
    return false;
}

int core__fext_merge(const struct core__fext_list *pend, const struct core__fext_list *com,
                     struct core__fext_list *out)
{
    size_t i = 0, j = 0;
    out->n = 0;
    while (i < pend->n || j < com->n) {
        if (j < com->n &&
            overlaps_any(pend, com->v[j].foff, com->v[j].foff + com->v[j].vlen)) {
            j++;
            continue;
        }
        const struct core__fext *x;
        if (j >= com->n || (i < pend->n && pend->v[i].foff < com->v[j].foff))
            x = &pend->v[i++];
        else
            x = &com->v[j++];
        int rc = core__fext_push(out, x);
        if (rc)
            return rc;
    }
    return 0;
}

/* Extents of @p ino overlapping [lo, hi), in file order. */
struct ovl {
    struct meta_txn *t;
    struct core__fext_list *out;
    bool want_crc;
};

static int ovl_add(void *arg, uint64_t foff, const struct meta_extent *me)
{
    struct ovl *o = arg;
    struct core__fext x;
    x.flags = 0;
    x.foff = foff;
    x.vlen = me->vlen;
    x.e = (struct store_extent){me->dev, me->len, me->off, me->crc, 0};
    x.nb = o->want_crc ? core__bcrc_get(o->t, &x.e, x.bcrc) : 0;
    return core__fext_push(o->out, &x);
}

int core__overlaps(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                   struct core__fext_list *out, bool want_crc)
{
    struct ovl o = {t, out, want_crc};
    out->n = 0;
    return meta_extent_scan(t, ino, lo, hi, ovl_add, &o);
}

/* ---- extents becoming used or free, block CRCs ---- */

int core__extent_free(struct core *c, struct meta_txn *t, const struct store_extent *e)
{
    if (atomic_load(&c->data->shared)) {
        uint32_t holders = meta_xref_get(t, e->dev, e->off);
        if (holders > 1) {
            int rc = meta_xref_set(t, e->dev, e->off, holders - 1);
            return rc ? rc : 1;
        }
    }
    core__cache_invalidate(c, e);
    int rc = meta_bcrc_del(t, e->dev, e->off);
    if (rc && rc != -ENOENT)
        return rc;
    return meta_txn_note(t, CORE_NOTE_FREE, e, sizeof(*e));
}

int core__extent_use(struct meta_txn *t, const struct store_extent *e, const uint32_t *bcrc,
                     uint32_t nb)
{
    int rc = meta_txn_note(t, CORE_NOTE_USE, e, sizeof(*e));
    if (rc == 0 && bcrc && nb)
        rc = meta_bcrc_put(t, e->dev, e->off, bcrc, nb);
    return rc;
}

uint32_t core__bcrc_compute(const void *buf, uint32_t len, uint32_t *out)
{
    uint32_t nb = 0;
    for (uint32_t o = 0; o < len && nb < META_BCRC_MAX; o += META_BCRC_BLOCK) {
        uint32_t n = len - o < META_BCRC_BLOCK ? len - o : META_BCRC_BLOCK;
        out[nb++] = store_crc32c(0, (const char *)buf + o, n);
    }
    return nb;
}

uint32_t core__bcrc_get(struct meta_txn *t, const struct store_extent *e, uint32_t *out)
{
    return meta_bcrc_get(t, e->dev, e->off, e->len, out);
}

/* Up to DROP_STEP extents of a file, collected to be freed. */
#define DROP_STEP 64
struct drop_list {
    uint64_t foff[DROP_STEP];
    struct store_extent e[DROP_STEP];
    size_t n;
};

static int drop_collect(void *arg, uint64_t foff, const struct meta_extent *x)
{
    struct drop_list *l = arg;
    l->foff[l->n] = foff;
    l->e[l->n] = (struct store_extent){x->dev, x->len, x->off, x->crc, 0};
    return ++l->n == DROP_STEP ? 1 : 0;
}

int core__data_drop(struct core *c, struct meta_txn *t, uint64_t ino, uint64_t *kept)
{
    struct drop_list l;
    int rc;
    if (kept)
        *kept = 0;
    core__pend_dead(c, ino); /* pending writes go once this op committed */
    rc = meta_inline_del(t, ino);
    if (rc && rc != -ENOENT)
        return rc;
    rc = meta_dirty_del(t, ino);
    if (rc && rc != -ENOENT)
        return rc;
    for (;;) {
        l.n = 0;
        rc = meta_extent_scan(t, ino, 0, UINT64_MAX, drop_collect, &l);
        if (rc < 0)
            return rc;
        bool more = rc == 1;
        for (size_t i = 0; i < l.n; i++) {
            rc = core__extent_free(c, t, &l.e[i]);
            if (rc == 1 && kept)
                *kept += l.e[i].len;
            if (rc >= 0)
                rc = meta_extent_del(t, ino, l.foff[i]);
            if (rc)
                return rc;
        }
        if (!more)
            return 0;
    }
}

/* ---- background work notes ---- */

int core__dirty_note(struct meta_txn *t, uint64_t ino, const struct meta_inode *r, uint32_t flags)
{
    struct meta_dirty d;
    struct timespec now;
    int rc = meta_dirty_get(t, ino, &d);
    if (rc == -ENOENT || rc == SRV_ECORRUPT)
        memset(&d, 0, sizeof(d));
    else if (rc)
        return rc;
    core__now(&now);
    d.flags |= flags;
    d.bucket = r->bucket;
    d.change = r->change;
    d.since_s = now.tv_sec;
    d.since_ns = (uint32_t)now.tv_nsec;
    return meta_dirty_put(t, ino, &d);
}

int core__dirty_clear(struct meta_txn *t, uint64_t ino, uint32_t flags)
{
    struct meta_dirty d;
    int rc = meta_dirty_get(t, ino, &d);
    if (rc == -ENOENT)
        return 0;
    if (rc || !(d.flags & flags))
        return rc;
    d.flags &= ~flags;
    if (!d.flags)
        return meta_dirty_del(t, ino);
    return meta_dirty_put(t, ino, &d);
}

int core__inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len)
{
    int rc = meta_inline_get(t, ino, data, len);
    if (rc == -ENOENT) {
        *data = NULL;
        *len = 0;
        rc = 0;
    }
    return rc;
}
