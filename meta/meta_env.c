/* SPDX-License-Identifier: Apache-2.0
 * meta_env: opening a store on the engine its configuration names, the
 * schema version check, transactions and the raw record access of the typed
 * modules (dispatched to the engine), and where a scan starts.
 * Thread: meta_env_open/close from one thread; the rest from any thread. */
#include "meta_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

int meta__keycmp(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int r = n ? memcmp(a, b, n) : 0;
    if (r)
        return r;
    return al < bl ? -1 : al > bl;
}

int meta__ids_push(struct meta__ids *l, uint64_t id)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        uint64_t *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = id;
    return 0;
}

int meta__ids_take(struct meta__ids *l, int rc, uint64_t **ids, size_t *n)
{
    if (rc) {
        free(l->v);
        *l = (struct meta__ids){0};
    }
    *ids = l->v;
    *n = l->n;
    return rc;
}

bool meta__in_prefix(const struct meta_range *r, const void *key, size_t klen)
{
    return klen >= r->plen && (r->plen == 0 || memcmp(key, r->prefix, r->plen) == 0);
}

/* The smallest key greater than every key starting with @p p (@p len bytes,
 * into @p buf): false when none exists (all bytes 0xff). */
static bool prefix_end(const void *p, size_t len, unsigned char *buf, size_t *out)
{
    memcpy(buf, p, len);
    while (len > 0) {
        if (buf[len - 1] != 0xff) {
            buf[len - 1]++;
            *out = len;
            return true;
        }
        len--;
    }
    return false;
}

void meta__scan_seek(const struct meta_range *r, unsigned char *buf, const void **seek,
                     size_t *slen)
{
    *seek = NULL;
    *slen = 0;
    if (!r->reverse) {
        /* the later of the start and the prefix's first key */
        if (r->start && meta__keycmp(r->start, r->slen, r->prefix, r->plen) > 0) {
            *seek = r->start;
            *slen = r->slen;
        } else if (r->plen) {
            *seek = r->prefix;
            *slen = r->plen;
        }
        return;
    }
    /* the earlier of the start and the end of the prefix's keys */
    size_t el = 0;
    bool end = r->plen && r->plen < META_KEY_LIMIT && prefix_end(r->prefix, r->plen, buf, &el);
    if (r->start && (!end || meta__keycmp(r->start, r->slen, buf, el) < 0)) {
        *seek = r->start;
        *slen = r->slen;
    } else if (end) {
        *seek = buf;
        *slen = el;
    }
}

int meta__get(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen,
              struct meta_val *v)
{
    return t->env->be->get(t, tb, key, klen, v);
}

int meta__put(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen, const void *val,
              size_t vlen, unsigned flags)
{
    return t->env->be->put(t, tb, key, klen, val, vlen, flags);
}

int meta__del(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen)
{
    return t->env->be->del(t, tb, key, klen);
}

int meta__get64(struct meta_txn *t, enum meta_dbi tb, uint64_t id, struct meta_val *v)
{
    uint8_t k[8];
    meta_be64_put(k, id);
    return meta__get(t, tb, k, 8, v);
}

int meta__put64(struct meta_txn *t, enum meta_dbi tb, uint64_t id, const void *val, size_t vlen)
{
    uint8_t k[8];
    meta_be64_put(k, id);
    return meta__put(t, tb, k, 8, val, vlen, 0);
}

int meta__del64(struct meta_txn *t, enum meta_dbi tb, uint64_t id)
{
    uint8_t k[8];
    meta_be64_put(k, id);
    return meta__del(t, tb, k, 8);
}

int meta__get_fixed(struct meta_txn *t, enum meta_dbi tb, const void *key, size_t klen, void *out,
                    size_t size)
{
    struct meta_val v;
    int rc = meta__get(t, tb, key, klen, &v);
    if (rc)
        return rc;
    if (v.len != size)
        return SRV_ECORRUPT;
    memcpy(out, v.data, size);
    return 0;
}

int meta__scan(struct meta_txn *t, enum meta_dbi tb, const struct meta_range *r, meta_scan_cb cb,
               void *arg)
{
    return t->env->be->scan(t, tb, r, cb, arg);
}

int meta_rtxn_begin(struct meta_env *m, struct meta_txn **out)
{
    return m->be->rtxn_begin(m, out);
}

void meta_rtxn_end(struct meta_txn *txn)
{
    if (txn)
        txn->env->be->rtxn_end(txn);
}

uint64_t meta_txn_snapshot(const struct meta_txn *t)
{
    return t->env->be->snapshot ? t->env->be->snapshot(t) : 0;
}

uint64_t meta_env_gen(const struct meta_env *m)
{
    return m->gen;
}

int meta_wtxn_begin(struct meta_env *m, struct meta_txn **out)
{
    SRV_ASSERT(!meta_on_writer(m));
    return m->be->wtxn_begin(m, NULL, out);
}

int meta_wtxn_commit(struct meta_txn *txn)
{
    return txn->env->be->wtxn_commit(txn);
}

void meta_wtxn_abort(struct meta_txn *txn)
{
    if (txn)
        txn->env->be->wtxn_abort(txn);
}

/* Check (or, for a new store, write) the schema version and the counters. */
static int schema_check(struct meta_txn *txn)
{
    struct meta_val v;
    uint8_t buf[8];
    int rc = meta__get(txn, META_DBI_META, "version", 7, &v);
    if (rc == -ENOENT) {
        meta_be32_put(buf, META_SCHEMA_VERSION);
        rc = meta__put(txn, META_DBI_META, "version", 7, buf, 4, 0);
        if (rc)
            return rc;
        meta_be64_put(buf, 16); /* inode numbers below 16 are reserved */
        rc = meta__put(txn, META_DBI_META, "next_ino", 8, buf, 8, 0);
        if (rc)
            return rc;
        srv_log(INFO, META, "new metadata store, schema version %u", META_SCHEMA_VERSION);
        return 0;
    }
    if (rc)
        return rc;
    if (v.len != 4) {
        srv_log(CRIT, META, "metadata store has a malformed version record (%zu bytes); "
                "this build supports schema version %u", v.len, META_SCHEMA_VERSION);
        return SRV_EBADVERSION;
    }
    uint32_t ver = meta_be32_get(v.data);
    if (ver < META_SCHEMA_OLDEST || ver > META_SCHEMA_VERSION) {
        srv_log(CRIT, META,
                "metadata store has schema version %u; this build supports "
                "versions %u to %u only: refusing to open it",
                ver, META_SCHEMA_OLDEST, META_SCHEMA_VERSION);
        return SRV_EBADVERSION;
    }
    if (ver < META_SCHEMA_VERSION) {
        /* every later version only added tables, which the engine opened empty */
        meta_be32_put(buf, META_SCHEMA_VERSION);
        rc = meta__put(txn, META_DBI_META, "version", 7, buf, 4, 0);
        if (rc)
            return rc;
        srv_log(INFO, META, "metadata store upgraded from schema version %u to %u", ver,
                META_SCHEMA_VERSION);
    }
    return 0;
}

static void env_free(struct meta_env *m)
{
    if (m->bs)
        m->be->close(m);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->work_cv);
    free(m);
}

int meta_env_open(struct meta_env **out, const struct meta_env_config *cfg)
{
    struct meta_env *m;
    struct meta_txn *txn = NULL;
    int rc;

    *out = NULL;
    if (!cfg->dir || (cfg->backend != META_BACKEND_LMDB && cfg->backend != META_BACKEND_MEM))
        return -EINVAL;
    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->be = cfg->backend == META_BACKEND_MEM ? &meta__mem : &meta__lmdb;
    static atomic_uint_fast64_t gens;
    m->gen = atomic_fetch_add(&gens, 1) + 1;
    m->max_batch = cfg->max_batch ? cfg->max_batch : 256;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->work_cv, NULL);
    rc = m->be->open(m, cfg);
    if (rc)
        goto out;
    rc = m->be->wtxn_begin(m, NULL, &txn);
    if (rc)
        goto out;
    rc = schema_check(txn);
    if (rc)
        goto out;
    rc = meta_wtxn_commit(txn);
    txn = NULL;
    if (rc)
        goto out;
    rc = meta__writer_start(m);
    if (rc)
        goto out;
    *out = m;
    m = NULL;
out:
    meta_wtxn_abort(txn);
    if (m)
        env_free(m);
    return rc;
}

void meta_env_set_hooks(struct meta_env *m, const struct meta_hooks *h)
{
    pthread_mutex_lock(&m->lock);
    if (h)
        m->hooks = *h;
    else
        memset(&m->hooks, 0, sizeof(m->hooks));
    m->has_hooks = h != NULL;
    pthread_mutex_unlock(&m->lock);
}

void meta_env_close(struct meta_env *m)
{
    if (!m)
        return;
    meta__writer_stop(m);
    env_free(m);
}

void meta_stats_get(struct meta_env *m, struct meta_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->stats;
    pthread_mutex_unlock(&m->lock);
}
