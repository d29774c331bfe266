/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_export: squash rules and read-only exports in the
 * principal, and handle resolution (export lookup, tenant check, XDEV for a
 * second export, STALE for deleted inodes), with fake core/tenants calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>

#include "nfs_int.h"
#include "srv_err.h"

/* ---- fakes ---- */

static struct tenant_export fake_exports[3] = {
    {.id = 1, .tenant = 1, .dir = 100, .anon_uid = 65534, .anon_gid = 65534},
    {.id = 2, .tenant = 1, .dir = 200, .flags = TENANT_EXPORT_RO | TENANT_EXPORT_ROOT_SQUASH,
     .anon_uid = 99, .anon_gid = 98},
    {.id = 3, .tenant = 2, .dir = 300, .flags = TENANT_EXPORT_ALL_SQUASH, .anon_uid = 7,
     .anon_gid = 8},
};
static int export_denied; /* export id answering -EACCES */
static uint64_t deleted_ino;

int tenants_export_get(struct tenants *t, uint32_t id, const struct sockaddr *sa,
                       struct tenant_export *out)
{
    for (size_t i = 0; i < 3; i++) {
        if (fake_exports[i].id == id) {
            if ((int)id == export_denied)
                return -EACCES;
            *out = fake_exports[i];
            return 0;
        }
    }
    return -ENOENT;
}

int core_getattr(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t gen,
                 struct core_attr *out)
{
    if (ino == deleted_ino || gen != 5)
        return SRV_ESTALE;
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    out->gen = gen;
    out->tenant = p->tenant;
    out->type = CORE_DIR;
    return 0;
}

/* ---- helpers ---- */

static struct nfs_server srv;
static const struct nfs_proc_desc desc = {.name = "TEST"};

static void req_init(struct nfs_req *r, uint32_t flavor, uint32_t uid)
{
    memset(r, 0, sizeof(*r));
    r->srv = &srv;
    r->desc = &desc;
    r->conn_peer = "127.0.0.1:1";
    r->call.cred.flavor = flavor;
    r->call.cred.uid = uid;
    r->call.cred.gid = uid + 1;
    r->call.cred.ngids = 2;
    r->call.cred.gids[0] = 10;
    r->call.cred.gids[1] = 11;
}

static nfs_fh3 mkfh(uint32_t export_id, uint32_t tenant, uint64_t ino, uint32_t gen,
                    uint8_t *buf)
{
    struct nfs_fh h = {export_id, tenant, ino, gen};
    nfs_fh_encode(srv.fh_key, &h, buf);
    nfs_fh3 fh = {.data = {.data_len = NFS_FH_LEN, .data_val = (char *)buf}};
    return fh;
}

static int setup(void **state)
{
    memset(&srv, 0, sizeof(srv));
    memset(srv.fh_key, 0x5a, sizeof(srv.fh_key));
    export_denied = 0;
    deleted_ino = 0;
    return 0;
}

/* ---- tests ---- */

static void test_principal_plain_and_root(void **state)
{
    struct nfs_req r;
    req_init(&r, AUTH_SYS, 1000);
    nfs_req_bind_export(&r, &fake_exports[0]);
    assert_int_equal(r.p.tenant, 1);
    assert_int_equal(r.p.uid, 1000);
    assert_int_equal(r.p.gid, 1001);
    assert_int_equal(r.p.ngids, 2);
    assert_int_equal(r.p.gids[1], 11);
    assert_int_equal(r.p.flags, 0);

    req_init(&r, AUTH_SYS, 0);
    nfs_req_bind_export(&r, &fake_exports[0]);
    assert_int_equal(r.p.uid, 0);
    assert_true(r.p.flags & CORE_P_SUPER);
}

static void test_principal_squash_ro_none(void **state)
{
    struct nfs_req r;
    /* root_squash + read-only */
    req_init(&r, AUTH_SYS, 0);
    nfs_req_bind_export(&r, &fake_exports[1]);
    assert_int_equal(r.p.uid, 99);
    assert_int_equal(r.p.gid, 98);
    assert_int_equal(r.p.ngids, 0);
    assert_false(r.p.flags & CORE_P_SUPER);
    assert_true(r.p.flags & CORE_P_READONLY);
    /* root_squash leaves other users alone */
    req_init(&r, AUTH_SYS, 1000);
    nfs_req_bind_export(&r, &fake_exports[1]);
    assert_int_equal(r.p.uid, 1000);
    /* all_squash maps everyone */
    req_init(&r, AUTH_SYS, 1000);
    nfs_req_bind_export(&r, &fake_exports[2]);
    assert_int_equal(r.p.uid, 7);
    assert_int_equal(r.p.gid, 8);
    assert_int_equal(r.p.tenant, 2);
    /* AUTH_NONE is anonymous */
    req_init(&r, AUTH_NONE, 0);
    nfs_req_bind_export(&r, &fake_exports[0]);
    assert_int_equal(r.p.uid, 65534);
    assert_false(r.p.flags & CORE_P_SUPER);
}

static void test_fh_resolution(void **state)
{
    struct nfs_req r;
    struct core_attr a;
    uint64_t ino = 0;
    uint8_t b1[NFS_FH_LEN], b2[NFS_FH_LEN];

    req_init(&r, AUTH_SYS, 1000);
    nfs_fh3 fh = mkfh(1, 1, 4242, 5, b1);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, &a), NFS3_OK);
    assert_true(ino == 4242);
    assert_true(r.have_export);
    assert_int_equal(r.exp.id, 1);
    assert_int_equal(r.p.uid, 1000);

    /* A second handle of another export of the same tenant: XDEV. */
    nfs_fh3 fh2 = mkfh(2, 1, 77, 5, b2);
    assert_int_equal(nfs_req_fh(&r, &fh2, &ino, NULL), NFS3ERR_XDEV);
    /* ... of another tenant: STALE. */
    fh2 = mkfh(3, 2, 77, 5, b2);
    assert_int_equal(nfs_req_fh(&r, &fh2, &ino, NULL), NFS3ERR_STALE);
}

static void test_fh_refusals(void **state)
{
    struct nfs_req r;
    uint64_t ino;
    uint8_t b[NFS_FH_LEN];
    nfs_fh3 fh;

    /* Export 3 belongs to tenant 2: a handle claiming tenant 1 is STALE. */
    req_init(&r, AUTH_SYS, 1);
    fh = mkfh(3, 1, 10, 5, b);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    /* Unknown export. */
    req_init(&r, AUTH_SYS, 1);
    fh = mkfh(9, 1, 10, 5, b);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    /* Export that does not admit the client. */
    export_denied = 1;
    req_init(&r, AUTH_SYS, 1);
    fh = mkfh(1, 1, 10, 5, b);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    export_denied = 0;
    /* Deleted inode, wrong generation. */
    deleted_ino = 10;
    req_init(&r, AUTH_SYS, 1);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    req_init(&r, AUTH_SYS, 1);
    fh = mkfh(1, 1, 11, 6, b);
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    /* Forged (MAC broken) and malformed. */
    req_init(&r, AUTH_SYS, 1);
    fh = mkfh(1, 1, 11, 5, b);
    b[15] ^= 1;
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_STALE);
    fh.data.data_len = 20;
    assert_int_equal(nfs_req_fh(&r, &fh, &ino, NULL), NFS3ERR_BADHANDLE);
}

static void test_mkfh_and_status(void **state)
{
    struct nfs_req r;
    struct core_attr a = {.ino = 555, .gen = 5};
    nfs_fh3 fh;
    struct nfs_fh back;
    req_init(&r, AUTH_SYS, 1);
    nfs_req_bind_export(&r, &fake_exports[2]);
    assert_int_equal(nfs_req_mkfh(&r, &a, &fh), 0);
    assert_int_equal(nfs_fh_decode(srv.fh_key, fh.data.data_val, fh.data.data_len, &back), 0);
    assert_int_equal(back.export_id, 3);
    assert_int_equal(back.tenant, 2);
    assert_true(back.ino == 555);
    free(fh.data.data_val);

    assert_int_equal(nfs_req_status(&r, 0), NFS3_OK);
    assert_int_equal(nfs_req_status(&r, -ENOENT), NFS3ERR_NOENT);
    assert_int_equal(nfs_req_status(&r, -EDQUOT), NFS3ERR_DQUOT);
    assert_int_equal(nfs_req_status(&r, SRV_EPRECOND), NFS3ERR_NOT_SYNC);
    assert_int_equal(nfs_req_status(&r, SRV_ETHROTTLE), NFS3ERR_JUKEBOX);
    assert_int_equal(nfs_req_status(&r, SRV_EBADCOOKIE), NFS3ERR_BAD_COOKIE);
    assert_int_equal(r.err, SRV_EBADCOOKIE);
}

/* nfs__fh_decode remembers the last good decode: the same bytes under the same
 * key take it; other bytes (a forged MAC) or another key are decoded afresh,
 * and a reset forgets it. */
static void test_fh_decode_memo(void **state)
{
    uint8_t k1[NFS_FH_KEYLEN], k2[NFS_FH_KEYLEN];
    for (int i = 0; i < NFS_FH_KEYLEN; i++) {
        k1[i] = (uint8_t)i;
        k2[i] = (uint8_t)(i * 7 + 3);
    }
    struct nfs_fh h = {.export_id = 1, .tenant = 1, .ino = 4242, .gen = 7}, got;
    uint8_t fh[NFS_FH_LEN], bad[NFS_FH_LEN];
    nfs_fh_encode(k1, &h, fh);
    memcpy(bad, fh, sizeof(fh));
    bad[NFS_FH_LEN - 1] ^= 0x55;
    nfs__fh_memo_reset();
    assert_int_equal(nfs__fh_decode(k1, fh, sizeof(fh), &got), 0);
    assert_int_equal(got.ino, 4242);
    memset(&got, 0, sizeof(got));
    assert_int_equal(nfs__fh_decode(k1, fh, sizeof(fh), &got), 0); /* remembered */
    assert_int_equal(got.ino, 4242);
    assert_int_equal(got.gen, 7);
    assert_true(nfs__fh_decode(k1, bad, sizeof(bad), &got) < 0);
    assert_int_equal(nfs__fh_decode(k1, fh, sizeof(fh), &got), 0);
    assert_true(nfs__fh_decode(k2, fh, sizeof(fh), &got) < 0);     /* another key */
    assert_true(nfs__fh_decode(k1, fh, sizeof(fh) - 1, &got) < 0); /* a prefix */
    nfs__fh_memo_reset();
    assert_int_equal(nfs__fh_decode(k1, fh, sizeof(fh), &got), 0);
    assert_int_equal(got.ino, 4242);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_principal_plain_and_root, setup),
        cmocka_unit_test_setup(test_principal_squash_ro_none, setup),
        cmocka_unit_test_setup(test_fh_resolution, setup),
        cmocka_unit_test_setup(test_fh_refusals, setup),
        cmocka_unit_test_setup(test_mkfh_and_status, setup),
        cmocka_unit_test(test_fh_decode_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
