/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for meta/meta_env.c: creating a store (LMDB and in memory: both
 * found again by a new open of their directory), the schema version record (a
 * newer or unknown version is refused with SRV_EBADVERSION, an older one is
 * upgraded), LMDB error
 * mapping, the raw get/put/del and where a scan starts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <lmdb.h>

#include "meta.h"
#include "meta_int.h"
#include "meta_test_dir.h"
#include "meta_test_lmdb.h"
#include "srv_err.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    return meta_test_dir_make(dir, sizeof(dir), "test");
}

static int teardown(void **state)
{
    (void)state;
    return meta_test_dir_remove(dir);
}

static int put_fn(struct meta_txn *txn, void *arg)
{
    (void)arg;
    return meta__put(txn, META_DBI_T_CONFIG, "k", 1, "v", 1, 0);
}

static int env_open(struct meta_env **m, enum meta_backend be)
{
    struct meta_env_config cfg = {.dir = dir, .map_size = 64ull << 20, .max_batch = 16,
                                  .backend = be};
    return meta_env_open(m, &cfg);
}

static void create_and_reopen(enum meta_backend be)
{
    struct meta_env *m;
    struct meta_txn *t;
    struct meta_val v;
    assert_int_equal(env_open(&m, be), 0);
    assert_int_equal(meta_submit(m, put_fn, m, 0), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta__get(t, META_DBI_META, "version", 7, &v), 0);
    assert_int_equal(v.len, 4);
    assert_int_equal(meta_be32_get(v.data), META_SCHEMA_VERSION);
    assert_int_equal(meta__get(t, META_DBI_META, "next_ino", 8, &v), 0);
    assert_int_equal(meta_be64_get(v.data), 16);
    assert_int_equal(meta__get(t, META_DBI_T_CONFIG, "nope", 4, &v), -ENOENT);
    meta_rtxn_end(t);
    meta_env_close(m);
    assert_int_equal(env_open(&m, be), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta__get(t, META_DBI_T_CONFIG, "k", 1, &v), 0);
    assert_memory_equal(v.data, "v", 1);
    meta_rtxn_end(t);
    meta_env_close(m);
    meta_env_close(NULL);
}

static void test_create_and_reopen(void **state)
{
    (void)state;
    create_and_reopen(META_BACKEND_LMDB);
}

static void test_create_and_reopen_mem(void **state)
{
    struct meta_env *m, *m2;
    (void)state;
    create_and_reopen(META_BACKEND_MEM);
    assert_int_equal(env_open(&m, META_BACKEND_MEM), 0);
    assert_int_equal(env_open(&m2, META_BACKEND_MEM), -EBUSY); /* one env at a time */
    meta_env_close(m);
}

static void test_newer_version_refused(void **state)
{
    struct meta_env *m;
    (void)state;
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), 0);
    meta_env_close(m);
    meta_test_version_set(dir, META_SCHEMA_VERSION + 1);
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), SRV_EBADVERSION);
    assert_null(m);
    meta_test_version_set(dir, 0);
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), SRV_EBADVERSION);
    meta_test_version_set(dir, META_SCHEMA_VERSION);
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), 0);
    meta_env_close(m);
}

/* A store of the oldest schema this build reads (what main made before the
 * version tables) opens, is upgraded, and its new tables work. */
static void test_old_version_upgraded(void **state)
{
    struct meta_env *m;
    struct meta_txn *t;
    struct meta_val v;
    (void)state;
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), 0);
    assert_int_equal(meta_submit(m, put_fn, m, 0), 0);
    meta_env_close(m);
    meta_test_version_set(dir, META_SCHEMA_OLDEST);
    assert_int_equal(env_open(&m, META_BACKEND_LMDB), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta__get(t, META_DBI_META, "version", 7, &v), 0);
    assert_int_equal(meta_be32_get(v.data), META_SCHEMA_VERSION);
    assert_int_equal(meta__get(t, META_DBI_T_CONFIG, "k", 1, &v), 0);
    assert_int_equal(meta__get(t, META_DBI_VERSIONS, "k", 1, &v), -ENOENT);
    meta_rtxn_end(t);
    meta_env_close(m);
}

static void test_error_map(void **state)
{
    (void)state;
    assert_int_equal(meta_err(0), 0);
    assert_int_equal(meta_err(MDB_NOTFOUND), -ENOENT);
    assert_int_equal(meta_err(MDB_KEYEXIST), -EEXIST);
    assert_int_equal(meta_err(MDB_MAP_FULL), -ENOSPC);
    assert_int_equal(meta_err(MDB_CORRUPTED), -EIO);
    assert_int_equal(meta_err(EACCES), -EACCES);
}

static void test_bad_dir(void **state)
{
    struct meta_env *m;
    struct meta_env_config cfg = {.dir = "/proc/no/such/dir"};
    (void)state;
    assert_true(meta_env_open(&m, &cfg) < 0);
    assert_null(m);
    cfg.dir = NULL;
    assert_int_equal(meta_env_open(&m, &cfg), -EINVAL);
}

static void test_keyenc(void **state)
{
    uint8_t a[META_KEYENC_MAX], b[META_KEYENC_MAX];
    char k1[1024], k2[1024];
    (void)state;
    memset(k1, 'x', sizeof(k1));
    memcpy(k2, k1, sizeof(k2));
    k2[1000] = 'y';
    assert_int_equal(meta_keyenc("abc", 3, a), 3);
    assert_int_equal(meta_keyenc(k1, META_KEY_VERBATIM, a), META_KEY_VERBATIM);
    assert_int_equal(meta_keyenc(k1, 1024, a), META_KEY_HEAD + 8);
    assert_int_equal(meta_keyenc(k2, 1024, b), META_KEY_HEAD + 8);
    assert_memory_equal(a, b, META_KEY_HEAD);
    assert_memory_not_equal(a, b, META_KEY_HEAD + 8);
    uint8_t be[8];
    meta_be64_put(be, 0x0102030405060708ull);
    assert_int_equal(be[0], 1);
    assert_int_equal(meta_be64_get(be), 0x0102030405060708ull);
}

/* Where a scan starts: forward at the later of start and prefix, reverse at
 * the earlier of start and the end of the prefix's keys. */
static void test_scan_seek(void **state)
{
    unsigned char buf[META_KEY_LIMIT];
    const void *seek;
    size_t sl;
    (void)state;
    struct meta_range r = {.prefix = "ab", .plen = 2};
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_int_equal(sl, 2);
    assert_memory_equal(seek, "ab", 2);
    r.start = "abc";
    r.slen = 3;
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_int_equal(sl, 3);
    assert_memory_equal(seek, "abc", 3);
    r.start = "a";
    r.slen = 1;
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_memory_equal(seek, "ab", 2);
    r.reverse = true;
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_int_equal(sl, 1);
    assert_memory_equal(seek, "a", 1);
    r.start = "b";
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_int_equal(sl, 2);
    assert_memory_equal(seek, "ac", 2); /* the end of the prefix's keys */
    r.start = NULL;
    r.prefix = "\xff\xff";
    meta__scan_seek(&r, buf, &seek, &sl);
    assert_null(seek); /* no key follows: from the last */
    assert_true(meta__keycmp("a", 1, "ab", 2) < 0);
    assert_true(meta__keycmp("b", 1, "ab", 2) > 0);
    assert_int_equal(meta__keycmp("", 0, "", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_and_reopen_mem, setup, teardown),
        cmocka_unit_test(test_scan_seek),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_version_upgraded, setup, teardown),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_bad_dir),
        cmocka_unit_test(test_keyenc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
