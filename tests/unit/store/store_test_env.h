/* SPDX-License-Identifier: Apache-2.0
 * store_test_env: a throw-away LMDB env with a "free" DBI and a data dir in a
 * temp directory, shared by the store unit tests (header-only helpers). */
#ifndef STORE_TEST_ENV_H
#define STORE_TEST_ENV_H

#include <dirent.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

struct tenv {
    char dir[64];
    MDB_env *env;
    MDB_dbi dbi;
    struct store_config cfg;
    struct store *s;
};

static inline void tenv_rmdir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(path);
}

/* Open (or reopen) the store; initializes a new free map. @return store_open's result. */
static inline int tenv_store_open(struct tenv *t)
{
    MDB_txn *txn;
    if (mdb_txn_begin(t->env, NULL, 0, &txn) != 0)
        return -EIO;
    int rc = store_open(&t->s, &t->cfg, txn, t->dbi);
    if (rc == 0 && store_needs_init(t->s))
        rc = store_txn_init(t->s, txn);
    if (rc != 0) {
        mdb_txn_abort(txn);
        if (t->s)
            store_txn_done(t->s, txn, 0);
        return rc;
    }
    rc = mdb_txn_commit(txn) ? -EIO : 0;
    store_txn_done(t->s, txn, rc == 0);
    return rc;
}

static inline void tenv_store_close(struct tenv *t)
{
    store_close(t->s);
    t->s = NULL;
}

static struct tenv *tenv_new(uint32_t nfiles, uint64_t file_size)
{
    struct tenv *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    snprintf(t->dir, sizeof(t->dir), "/tmp/store-test-XXXXXX");
    if (!mkdtemp(t->dir))
        goto fail;
    MDB_txn *txn;
    if (mdb_env_create(&t->env) || mdb_env_set_maxdbs(t->env, 4) ||
        mdb_env_set_mapsize(t->env, 64u << 20) || mdb_env_open(t->env, t->dir, 0, 0600))
        goto fail;
    if (mdb_txn_begin(t->env, NULL, 0, &txn))
        goto fail;
    if (mdb_dbi_open(txn, "free", MDB_CREATE, &t->dbi) || mdb_txn_commit(txn))
        goto fail;
    t->cfg.dir = t->dir;
    t->cfg.file_size = file_size;
    t->cfg.nfiles = nfiles;
    if (tenv_store_open(t) != 0)
        goto fail;
    return t;
fail:
    fprintf(stderr, "tenv_new failed in %s\n", t->dir);
    abort();
}

static inline void tenv_free(struct tenv *t)
{
    if (t->s)
        store_close(t->s);
    mdb_env_close(t->env);
    tenv_rmdir(t->dir);
    free(t);
}

/* Commit uses of @p n extents in one txn. @return 0 or the first error. */
static inline int tenv_use(struct tenv *t, const struct store_extent *e, size_t n)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(t->env, NULL, 0, &txn) ? -EIO : 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = store_txn_use(t->s, txn, &e[i]);
    if (rc != 0) {
        mdb_txn_abort(txn);
        store_txn_done(t->s, txn, 0);
        return rc;
    }
    rc = mdb_txn_commit(txn) ? -EIO : 0;
    store_txn_done(t->s, txn, rc == 0);
    return rc;
}

/* Free @p n extents in one txn; commit when @p commit, else abort. */
static inline int tenv_free_ext(struct tenv *t, const struct store_extent *e, size_t n, int commit)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(t->env, NULL, 0, &txn) ? -EIO : 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = store_txn_free(t->s, txn, &e[i]);
    if (rc != 0 || !commit) {
        mdb_txn_abort(txn);
        store_txn_done(t->s, txn, 0);
        return rc;
    }
    rc = mdb_txn_commit(txn) ? -EIO : 0;
    store_txn_done(t->s, txn, rc == 0);
    return rc;
}

/* Number of free ranges in the persistent map (marker excluded). */
static inline int tenv_map_count(struct tenv *t)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    int n = 0;
    if (mdb_txn_begin(t->env, NULL, MDB_RDONLY, &txn))
        return -1;
    mdb_cursor_open(txn, t->dbi, &c);
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
        if (((unsigned char *)k.mv_data)[0] != 0xff)
            n++;
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    return n;
}

static inline uint64_t tenv_free_bytes(struct tenv *t)
{
    struct store_stats st;
    store_stats_get(t->s, &st);
    return st.free;
}

#endif
