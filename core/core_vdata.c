/* SPDX-License-Identifier: Apache-2.0
 * core_vdata: the data side of versions (the data sub-module,
 * core_data_int.h): clones of a file's data that share its extents, and the
 * in-memory set of buckets that may have versioning or object lock.
 *
 * A clone copies the extent records of a file into another inode and counts
 * one more holder of each extent in xref (meta_extent.h); the extent's block
 * CRCs (keyed by the extent) serve both. core__extent_free then frees an
 * extent only when its last holder lets it go, so shared space is freed
 * exactly once, whichever version goes first. Inline bytes are copied.
 *
 * The bucket set is a superset: a bucket is marked before the op that turns
 * versioning or object lock on commits (so no op of that bucket can miss
 * it), never unmarked while the process runs, and rebuilt at open from the
 * bucketcfg records; checks of unmarked buckets cost an atomic load.
 * Thread: the set is locked; the rest runs inside ops. */
#include "core_data_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

/* ---- the versioned-bucket set ---- */

int core__vb_mark(struct core *c, uint64_t bucket)
{
    struct core__data *d = c->data;
    int rc = 0;
    pthread_mutex_lock(&d->vb_mu);
    for (size_t i = 0; i < d->nvb; i++)
        if (d->vb[i] == bucket)
            goto out;
    if (d->nvb == d->capvb) {
        size_t nc = d->capvb ? d->capvb * 2 : 16;
        uint64_t *nv = realloc(d->vb, nc * sizeof(*nv));
        if (!nv) {
            rc = -ENOMEM;
            goto out;
        }
        d->vb = nv;
        d->capvb = nc;
    }
    d->vb[d->nvb++] = bucket;
    atomic_store(&d->nvb_any, (unsigned)d->nvb);
out:
    pthread_mutex_unlock(&d->vb_mu);
    return rc;
}

bool core__vb_maybe(struct core *c, uint64_t bucket)
{
    struct core__data *d = c->data;
    bool found = false;
    if (atomic_load(&d->nvb_any) == 0)
        return false;
    pthread_mutex_lock(&d->vb_mu);
    for (size_t i = 0; i < d->nvb && !found; i++)
        found = d->vb[i] == bucket;
    pthread_mutex_unlock(&d->vb_mu);
    return found;
}

bool core__ver_guard(struct core *c, struct meta_txn *t, const struct meta_inode *r)
{
    if (r->flags & (META_I_VSEALED | META_I_VLOCK))
        return true;
    if ((r->flags & META_I_VREC) || !core__vb_maybe(c, r->bucket))
        return false;
    /* a file without a version of its own, in a bucket that may be versioned: is it? */
    const void *v;
    size_t len;
    struct meta_bucketcfg cfg;
    if (meta_bucketcfg_get(t, r->bucket, META_BCFG_CORE, &v, &len) != 0 || len != sizeof(cfg))
        return false;
    memcpy(&cfg, v, sizeof(cfg));
    return cfg.versioning != META_VERS_NONE;
}

static int vb_ent(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    (void)kind;
    (void)val;
    (void)len;
    return core__vb_mark(arg, bucket);
}

int core__vdata_load(struct core *c)
{
    struct meta_txn *t;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_bucketcfg_scan(t, META_BCFG_CORE, vb_ent, c);
    if (rc == 0 && meta_xref_any(t))
        atomic_store(&c->data->shared, true);
    meta_rtxn_end(t);
    return rc;
}

void core__vdata_fini(struct core *c)
{
    pthread_mutex_destroy(&c->data->vb_mu);
    free(c->data->vb);
    c->data->vb = NULL;
}

/* ---- clones ---- */

/* Up to CLONE_STEP extents of the source, collected between meta calls. */
#define CLONE_STEP 64
struct clone_list {
    uint64_t foff[CLONE_STEP];
    struct meta_extent x[CLONE_STEP];
    size_t n;
    uint64_t next; /* file offset to go on from */
};

static int clone_collect(void *arg, uint64_t foff, const struct meta_extent *x)
{
    struct clone_list *l = arg;
    l->foff[l->n] = foff;
    l->x[l->n] = *x;
    l->next = foff + (x->vlen ? x->vlen : 1);
    return ++l->n == CLONE_STEP ? 1 : 0;
}

int core__data_clone(struct core *c, struct meta_txn *t, uint64_t from, uint64_t to,
                     uint64_t *copied)
{
    const void *vd;
    size_t vl;
    *copied = 0;
    int rc = core__inline_get(t, from, &vd, &vl);
    if (rc == 0 && vd) {
        /* copy: @p vd is borrowed until the txn writes */
        void *copy = malloc(vl ? vl : 1);
        if (!copy)
            return -ENOMEM;
        memcpy(copy, vd, vl);
        rc = meta_inline_put(t, to, copy, vl);
        free(copy);
        *copied = vl;
    }
    atomic_store(&c->data->shared, true); /* before any holder count moves past one */
    for (uint64_t pos = 0; rc == 0;) {
        struct clone_list l = {.n = 0, .next = pos};
        rc = meta_extent_scan(t, from, pos, UINT64_MAX, clone_collect, &l);
        if (rc < 0)
            return rc;
        bool more = rc == 1;
        rc = 0;
        for (size_t i = 0; i < l.n && rc == 0; i++) {
            uint32_t holders = meta_xref_get(t, l.x[i].dev, l.x[i].off);
            rc = meta_xref_set(t, l.x[i].dev, l.x[i].off, holders + 1);
            if (rc == 0)
                rc = meta_extent_put(t, to, l.foff[i], &l.x[i]);
        }
        if (!more)
            break;
        pos = l.next;
    }
    return rc;
}
