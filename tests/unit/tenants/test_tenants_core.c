/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for tenants/ on the real namespace core (LMDB + store in a temp
 * dir): bootstrap, CRUD, records surviving a close and reopen of the core,
 * secrets sealed at rest, QoS policies persisted in META_REC_QOS, and deleting
 * a tenant that holds a bucket being refused. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core.h"
#include "meta_record.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "tenants.h"

static char dir[64];
static char keyfile[128];

static struct core *open_core(void)
{
    struct core *c = NULL;
    struct core_config cfg = {.data_dir = dir, .data_file_size = 64ull << 20,
                              .data_files = 1, .map_size = 64ull << 20};
    assert_int_equal(core_open(&c, &cfg), 0);
    return c;
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test_tenants_core.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(keyfile, sizeof(keyfile), "%s/master.key", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

struct found {
    const char *needle;
    bool hit;
};

static int scan_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct found *f = arg;
    if (memmem(val, vlen, f->needle, strlen(f->needle)))
        f->hit = true;
    return 0;
}

static void test_persist(void **state)
{
    struct core *c = open_core();
    struct tenants *t;
    bool created;
    char secret[TENANT_SECRET_MAX + 1];
    struct core_principal p;

    assert_int_equal(tenants_open_keyfile(&t, c, keyfile, "AKIAREALCORE", "real-core-secret",
                                          NULL, NULL, &created), 0);
    assert_true(created);
    struct tenant_info ti, def;
    assert_int_equal(tenants_tenant_get(t, 1, &def), 0);
    uint64_t root;
    assert_int_equal(core_tenant_root(c, 1, &root), 0);
    assert_int_equal(def.root, root);
    assert_int_equal(tenants_tenant_create(t, "acme", &ti), 0);
    struct tenant_user u = {.tenant = ti.id, .uid = 500, .gid = 500}, uo;
    snprintf(u.name, sizeof(u.name), "carol");
    assert_int_equal(tenants_user_create(t, &u, &uo), 0);
    char ak[TENANT_AKEY_MAX + 1], sk[TENANT_SECRET_MAX + 1];
    assert_int_equal(tenants_key_create(t, ti.id, uo.id, ak, sk), 0);
    struct tenant_export e = {.tenant = ti.id, .nnets = 1, .anon_uid = 9, .anon_gid = 9}, eo;
    snprintf(e.path, sizeof(e.path), "/acme");
    assert_int_equal(tenants_net_parse("192.168.0.0/16", &e.nets[0]), 0);
    assert_int_equal(tenants_export_create(t, &e, &eo), 0);

    /* Secrets never reach the table in clear. */
    struct found f = {"real-core-secret", false};
    assert_int_equal(meta_record_scan(core_meta(c), META_REC_KEYS, NULL, 0, scan_cb, &f), 0);
    assert_false(f.hit);
    f.needle = sk;
    assert_int_equal(meta_record_scan(core_meta(c), META_REC_KEYS, NULL, 0, scan_cb, &f), 0);
    assert_false(f.hit);

    /* QoS policy through the same core. */
    struct qos *q;
    struct qos_config qc = {.enabled = true};
    assert_int_equal(qos_open(&q, c, &qc), 0);
    struct qos_policy pol = {.tenant = ti.id, .write_bps = 123456, .read_iops = 77};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    qos_close(q);

    /* A tenant holding a bucket cannot be deleted. */
    struct core_principal admin = {.tenant = ti.id, .flags = CORE_P_SUPER};
    struct core_attr at;
    assert_int_equal(core_bucket_create(c, &admin, "data", 4, &at), 0);
    assert_int_equal(tenants_tenant_delete(t, ti.id), -ENOTEMPTY);

    tenants_close(t);
    core_close(c);

    /* Reopen everything. */
    c = open_core();
    assert_int_equal(tenants_open_keyfile(&t, c, keyfile, NULL, NULL, NULL, NULL, &created), 0);
    assert_false(created);
    assert_int_equal(tenants_key_lookup(t, "AKIAREALCORE", secret, &p), 0);
    assert_string_equal(secret, "real-core-secret");
    assert_true(p.flags & CORE_P_SUPER);
    assert_int_equal(tenants_key_lookup(t, ak, secret, &p), 0);
    assert_string_equal(secret, sk);
    assert_int_equal(p.tenant, ti.id);
    assert_int_equal(p.uid, 500);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    inet_pton(AF_INET, "192.168.7.7", &sin.sin_addr);
    struct tenant_export fe;
    assert_int_equal(tenants_export_find(t, "/acme", (struct sockaddr *)&sin, &fe), 0);
    assert_int_equal(fe.dir, ti.root);
    assert_int_equal(fe.anon_uid, 9);
    assert_int_equal(qos_open(&q, c, &qc), 0);
    struct qos_policy got;
    assert_int_equal(qos_policy_get(q, ti.id, &got), 0);
    assert_int_equal(got.write_bps, 123456);
    assert_int_equal(got.read_iops, 77);
    assert_int_equal(qos_policy_delete(q, ti.id), 0);
    qos_close(q);

    /* Empty the tenant, then delete it: its records go too. */
    assert_int_equal(core_bucket_delete(c, &admin, "data", 4), 0);
    assert_int_equal(tenants_tenant_delete(t, ti.id), 0);
    assert_int_equal(tenants_key_lookup(t, ak, secret, &p), -ENOENT);
    tenants_close(t);
    core_close(c);

    c = open_core();
    assert_int_equal(tenants_open_keyfile(&t, c, keyfile, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_find(t, "acme", &ti), -ENOENT);
    assert_int_equal(tenants_key_lookup(t, ak, secret, &p), -ENOENT);
    assert_int_equal(qos_open(&q, c, &qc), 0);
    assert_int_equal(qos_policy_get(q, ti.id, &got), -ENOENT);
    qos_close(q);
    tenants_close(t);
    core_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_persist, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
