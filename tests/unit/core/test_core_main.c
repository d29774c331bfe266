/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_main.c: tenants and their roots, generic records
 * on the core's store (core_meta + meta_record_*), refusing a store of a newer
 * schema at core_open, core_sync and statistics, core_ref against a
 * concurrent unlink. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core_test_util.h"
#include "meta_record.h"
#include "meta_schema.h"
#include "../meta/meta_test_lmdb.h"

static void test_tenants(void **state)
{
    struct fx *f = *state;
    uint64_t r2;
    struct core_attr a;
    assert_int_equal(core_tenant_create(f->c, 1), -EEXIST);
    assert_int_equal(core_tenant_create(f->c, 0), -EINVAL);
    assert_int_equal(core_tenant_create(f->c, 2), 0);
    assert_int_equal(core_tenant_root(f->c, 2, &r2), 0);
    assert_true(r2 != f->root);
    assert_int_equal(core_tenant_root(f->c, 3, &r2), -ENOENT);
    struct core_principal p2 = f->p;
    p2.tenant = 2;
    assert_int_equal(core_getattr(f->c, &p2, r2, 0, &a), 0);
    assert_true(a.flags & CORE_A_TROOT);
    assert_int_equal(a.uid, 0);
    assert_int_equal(a.type, CORE_DIR);
    /* tenant 1 cannot see tenant 2's root, nor its buckets by inode */
    assert_int_equal(core_getattr(f->c, &f->p, r2, 0, &a), SRV_ESTALE);
    assert_int_equal(core_bucket_create(f->c, &p2, "bkt", 3, &a), 0); /* same name, other tenant */
    assert_int_equal(core_getattr(f->c, &f->p, a.ino, 0, &a), SRV_ESTALE);
    assert_int_equal(core_tenant_delete(f->c, 2), -ENOTEMPTY);
    assert_int_equal(core_bucket_delete(f->c, &p2, "bkt", 3), 0);
    assert_int_equal(core_tenant_delete(f->c, 2), 0);
    assert_int_equal(core_tenant_delete(f->c, 2), -ENOENT);
    assert_int_equal(core_tenant_root(f->c, 2, &r2), -ENOENT);
}

static int scan_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    int *n = arg;
    (void)key;
    (void)val;
    (void)vlen;
    if (klen == 2 && memcmp(key, "k3", 2) == 0)
        return 1;
    (*n)++;
    return 0;
}

static void test_records(void **state)
{
    struct fx *f = *state;
    struct meta_env *m = core_meta(f->c);
    void *v;
    size_t vl;
    assert_int_equal(meta_record_put(m, META_REC_CONFIG, "k1", 2, "one", 3, 0), 0);
    assert_int_equal(meta_record_put(m, META_REC_CONFIG, "k1", 2, "uno", 3, META_REC_NOOVERWRITE),
                     -EEXIST);
    assert_int_equal(meta_record_get(m, META_REC_CONFIG, "k1", 2, &v, &vl), 0);
    assert_int_equal(vl, 3);
    assert_memory_equal(v, "one", 3);
    free(v);
    assert_int_equal(meta_record_put(m, META_REC_CONFIG, "k2", 2, "", 0, 0), 0);
    assert_int_equal(meta_record_get(m, META_REC_CONFIG, "k2", 2, &v, &vl), 0);
    assert_int_equal(vl, 0);
    free(v);
    assert_int_equal(meta_record_put(m, META_REC_CONFIG, "k3", 2, "x", 1, 0), 0);
    assert_int_equal(meta_record_put(m, META_REC_KEYS, "k1", 2, "other table", 11, 0), 0);
    int n = 0;
    assert_int_equal(meta_record_scan(m, META_REC_CONFIG, NULL, 0, scan_cb, &n), 0);
    assert_int_equal(n, 2); /* k1, k2, stop at k3 */
    n = 0;
    assert_int_equal(meta_record_scan(m, META_REC_CONFIG, "k2", 2, scan_cb, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(meta_record_del(m, META_REC_CONFIG, "k1", 2), 0);
    assert_int_equal(meta_record_del(m, META_REC_CONFIG, "k1", 2), -ENOENT);
    assert_int_equal(meta_record_get(m, META_REC_CONFIG, "k1", 2, &v, &vl), -ENOENT);
    assert_int_equal(meta_record_get(m, META_REC__COUNT, "k1", 2, &v, &vl), -EINVAL);
    /* records survive a reopen */
    fx_reopen(f);
    m = core_meta(f->c);
    assert_int_equal(meta_record_get(m, META_REC_KEYS, "k1", 2, &v, &vl), 0);
    assert_int_equal(vl, 11);
    free(v);
}

static void test_newer_schema(void **state)
{
    struct fx *f = *state;
    char path[128];
    if (fx_meta_mem())
        skip(); /* the version record of an LMDB store, written by hand */
    core_close(f->c);
    f->c = NULL;
    snprintf(path, sizeof(path), "%s/meta", f->dir);
    meta_test_version_set(path, META_SCHEMA_VERSION + 7);
    struct core_config cfg = fx_config(f->dir);
    assert_int_equal(core_open(&f->c, &cfg), SRV_EBADVERSION);
    assert_null(f->c);
    /* put it back so teardown can open/close normally */
    meta_test_version_set(path, META_SCHEMA_VERSION);
    assert_int_equal(core_open(&f->c, &cfg), 0);
}

static void test_stats_sync(void **state)
{
    struct fx *f = *state;
    struct core_stats s1, s2;
    core_stats_get(f->c, &s1);
    assert_int_equal(s1.store_capacity, 64ull << 20);
    assert_int_equal(s1.store_free, s1.store_capacity);
    char *buf = malloc(3 << 20);
    fx_fill(buf, 3 << 20, 1);
    assert_int_equal(fx_put(f, "obj", buf, 3 << 20), 0);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s2);
    assert_int_equal(s2.store_free, s1.store_free - (3 << 20));
    assert_true(s2.commits > s1.commits);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "obj", &d, &n), 0);
    free(d);
    core_stats_get(f->c, &s2);
    assert_true(s2.bytes_read >= (3u << 20));
    free(buf);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct core *c = NULL;
    struct core_config cfg = fx_config("/proc/forbidden/core");
    assert_true(core_open(&c, &cfg) < 0);
    assert_null(c);
    core_close(NULL);
}

/* A reader that holds a ref (core_ref succeeded) reads the whole file, even when
 * a rename over it, committed concurrently, unlinks it: the ref must be either
 * refused (SRV_ESTALE: look the key up again) or honoured, never taken on an
 * inode the writer already decided to free. */
struct ref_race {
    struct fx *f;
    atomic_bool stop;
    atomic_int bad, reads, stale;
};

#define RACE_LEN (48u << 10)

static void *ref_race_reader(void *arg)
{
    struct ref_race *r = arg;
    char *buf = malloc(RACE_LEN);
    while (!atomic_load(&r->stop)) {
        struct core_objinfo oi;
        if (core_key_lookup(r->f->c, &r->f->p, r->f->bucket, "ck", 2, &oi) != 0)
            continue;
        free(oi.meta);
        int rc = core_ref(r->f->c, oi.attr.ino);
        if (rc == SRV_ESTALE) {
            atomic_fetch_add(&r->stale, 1);
            continue;
        }
        if (rc != 0) {
            atomic_fetch_add(&r->bad, 1);
            continue;
        }
        for (size_t off = 0; off < RACE_LEN; off += 4096) {
            size_t n = 0;
            bool eof = false;
            usleep(20);
            if (core_read(r->f->c, &r->f->p, oi.attr.ino, off, buf + off, 4096, &n, &eof) != 0 ||
                n != 4096) {
                atomic_fetch_add(&r->bad, 1);
                break;
            }
        }
        core_unref(r->f->c, oi.attr.ino);
        atomic_fetch_add(&r->reads, 1);
    }
    free(buf);
    return NULL;
}

static void test_ref_vs_concurrent_unlink(void **state)
{
    struct fx *f = *state;
    struct ref_race r = {.f = f};
    char *data = malloc(RACE_LEN);
    pthread_t th[3];
    fx_fill(data, RACE_LEN, 1);
    assert_int_equal(fx_put(f, "ck", data, RACE_LEN), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, ref_race_reader, &r), 0);
    for (uint32_t v = 2; v < 400; v++) {
        fx_fill(data, RACE_LEN, v);
        assert_int_equal(fx_put(f, "ck.tmp", data, RACE_LEN), 0);
        assert_int_equal(core_rename(f->c, &f->p, f->bucket, "ck.tmp", 6, f->bucket, "ck", 2), 0);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    free(data);
    assert_int_equal(atomic_load(&r.bad), 0);
    assert_true(atomic_load(&r.reads) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tenants, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_records, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_stats_sync, fx_setup, fx_teardown),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test_setup_teardown(test_ref_vs_concurrent_unlink, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
