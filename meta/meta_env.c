/* SPDX-License-Identifier: Apache-2.0
 * meta_env: opening the LMDB environment, its named databases and the schema
 * version check; LMDB error mapping and small get/put/del helpers.
 * Thread: meta_env_open/close from one thread; the rest from any thread. */
#include "meta_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "srv_err.h"
#include "srv_log.h"

static const char *const dbi_names[META_DBI__COUNT] = META_DBI_NAMES;

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

MDB_env *meta_env_mdb(struct meta_env *m)
{
    return m->env;
}

MDB_dbi meta_dbi(struct meta_env *m, enum meta_dbi which)
{
    return m->dbi[which];
}

int meta_rtxn_begin(struct meta_env *m, MDB_txn **out)
{
    MDB_txn *t = NULL;
    pthread_mutex_lock(&m->rpool_mu);
    if (m->nrpool > 0)
        t = m->rpool[--m->nrpool];
    pthread_mutex_unlock(&m->rpool_mu);
    if (t) {
        if (mdb_txn_renew(t) == 0) {
            *out = t;
            return 0;
        }
        mdb_txn_abort(t);
    }
    int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, out);
    if (rc != 0) {
        *out = NULL;
        return meta_err(rc);
    }
    return 0;
}

void meta_rtxn_end(MDB_txn *txn)
{
    if (!txn)
        return;
    struct meta_env *m = mdb_env_get_userctx(mdb_txn_env(txn));
    if (m) {
        mdb_txn_reset(txn);
        pthread_mutex_lock(&m->rpool_mu);
        if (m->nrpool < META_RPOOL_MAX) {
            m->rpool[m->nrpool++] = txn;
            txn = NULL;
        }
        pthread_mutex_unlock(&m->rpool_mu);
    }
    if (txn)
        mdb_txn_abort(txn);
}

int meta_get(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen, MDB_val *val)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key};
    int rc = mdb_get(txn, dbi, &k, val);
    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    return meta_err(rc);
}

int meta_put(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen, const void *val,
             size_t vlen, unsigned flags)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key};
    MDB_val v = {.mv_size = vlen, .mv_data = (void *)val};
    int rc = mdb_put(txn, dbi, &k, &v, flags);
    if (rc == MDB_KEYEXIST)
        return -EEXIST;
    return meta_err(rc);
}

int meta_del(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen)
{
    MDB_val k = {.mv_size = klen, .mv_data = (void *)key};
    int rc = mdb_del(txn, dbi, &k, NULL);
    if (rc == MDB_NOTFOUND)
        return -ENOENT;
    return meta_err(rc);
}

/* Check (or, for a new store, write) the schema version and the counters. */
static int schema_check(struct meta_env *m, MDB_txn *txn)
{
    MDB_val v;
    uint8_t buf[8];
    int rc = meta_get(txn, m->dbi[META_DBI_META], "version", 7, &v);
    if (rc == -ENOENT) {
        meta_be32_put(buf, META_SCHEMA_VERSION);
        rc = meta_put(txn, m->dbi[META_DBI_META], "version", 7, buf, 4, 0);
        if (rc)
            return rc;
        meta_be64_put(buf, 16); /* inode numbers below 16 are reserved */
        rc = meta_put(txn, m->dbi[META_DBI_META], "next_ino", 8, buf, 8, 0);
        if (rc)
            return rc;
        srv_log(INFO, META, "new metadata store, schema version %u", META_SCHEMA_VERSION);
        return 0;
    }
    if (rc)
        return rc;
    if (v.mv_size != 4) {
        srv_log(CRIT, META, "metadata store has a malformed version record (%zu bytes); "
                "this build supports schema version %u", v.mv_size, META_SCHEMA_VERSION);
        return SRV_EBADVERSION;
    }
    uint32_t ver = meta_be32_get(v.mv_data);
    if (ver != META_SCHEMA_VERSION) {
        srv_log(CRIT, META, "metadata store has schema version %u; this build supports "
                "version %u only: refusing to open it", ver, META_SCHEMA_VERSION);
        return SRV_EBADVERSION;
    }
    return 0;
}

int meta_env_open(struct meta_env **out, const char *dir, uint64_t map_size, uint32_t max_batch)
{
    struct meta_env *m = calloc(1, sizeof(*m));
    MDB_txn *txn = NULL;
    int rc;

    *out = NULL;
    if (!m)
        return -ENOMEM;
    m->max_batch = max_batch ? max_batch : 256;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->work_cv, NULL);
    pthread_cond_init(&m->done_cv, NULL);
    pthread_mutex_init(&m->rpool_mu, NULL);

    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        rc = -errno;
        srv_log(ERROR, META, "cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    rc = mdb_env_create(&m->env);
    if (rc) {
        m->env = NULL;
        rc = meta_err(rc);
        goto out;
    }
    mdb_env_set_userctx(m->env, m);
    mdb_env_set_maxdbs(m->env, META_DBI__COUNT + 4);
    mdb_env_set_maxreaders(m->env, 1024);
    rc = mdb_env_set_mapsize(m->env, map_size ? map_size : (16ull << 30));
    if (rc) {
        rc = meta_err(rc);
        goto out;
    }
    /* MDB_NOMETASYNC: one sync per commit; a batch is acknowledged only once
     * a later sync (the syncer's or the next commit's) made its meta page
     * durable (meta_writer.c) */
    rc = mdb_env_open(m->env, dir, MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC, 0640);
    if (rc) {
        srv_log(ERROR, META, "cannot open LMDB environment %s: %s", dir, mdb_strerror(rc));
        rc = meta_err(rc);
        goto out;
    }
    rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc) {
        txn = NULL;
        rc = meta_err(rc);
        goto out;
    }
    for (int i = 0; i < META_DBI__COUNT; i++) {
        rc = mdb_dbi_open(txn, dbi_names[i], MDB_CREATE, &m->dbi[i]);
        if (rc) {
            srv_log(ERROR, META, "cannot open database %s: %s", dbi_names[i], mdb_strerror(rc));
            rc = meta_err(rc);
            goto out;
        }
    }
    rc = schema_check(m, txn);
    if (rc)
        goto out;
    rc = meta_err(mdb_txn_commit(txn));
    txn = NULL;
    if (rc)
        goto out;
    rc = meta__writer_start(m);
    if (rc)
        goto out;
    *out = m;
    m = NULL;
out:
    if (txn)
        mdb_txn_abort(txn);
    if (m) {
        if (m->env)
            mdb_env_close(m->env);
        pthread_mutex_destroy(&m->lock);
        pthread_mutex_destroy(&m->rpool_mu);
        pthread_cond_destroy(&m->work_cv);
        pthread_cond_destroy(&m->done_cv);
        free(m);
    }
    return rc;
}

void meta_env_set_store(struct meta_env *m, struct store *s)
{
    pthread_mutex_lock(&m->lock);
    m->store = s;
    pthread_mutex_unlock(&m->lock);
}

void meta_env_close(struct meta_env *m)
{
    if (!m)
        return;
    meta__writer_stop(m);
    for (int i = 0; i < m->nrpool; i++)
        mdb_txn_abort(m->rpool[i]);
    m->nrpool = 0;
    pthread_mutex_destroy(&m->rpool_mu);
    mdb_env_sync(m->env, 1);
    mdb_env_close(m->env);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->work_cv);
    pthread_cond_destroy(&m->done_cv);
    free(m);
}

void meta_stats_get(struct meta_env *m, struct meta_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->stats;
    pthread_mutex_unlock(&m->lock);
}
