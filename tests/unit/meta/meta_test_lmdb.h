/* SPDX-License-Identifier: Apache-2.0
 * meta_test_lmdb: write the schema version record of an LMDB store in @p dir
 * by hand, as a newer (or broken) build would have left it, so a test can
 * check that opening the store refuses it. Shared by the meta and core unit
 * tests (header-only; include after <cmocka.h>), so the core's tests reach
 * LMDB only here, where the on-disk record itself is what is tested. */
#ifndef META_TEST_LMDB_H
#define META_TEST_LMDB_H

#include <stdint.h>

#include <lmdb.h>

#include "meta_schema.h"

static inline void meta_test_version_set(const char *dir, uint32_t ver)
{
    MDB_env *env;
    MDB_txn *t;
    MDB_dbi dbi;
    uint8_t b[4];
    assert_int_equal(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 64);
    assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &t), 0);
    assert_int_equal(mdb_dbi_open(t, "meta", 0, &dbi), 0);
    meta_be32_put(b, ver);
    MDB_val k = {7, "version"}, v = {4, b};
    assert_int_equal(mdb_put(t, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(t), 0);
    mdb_env_close(env);
}

#endif
