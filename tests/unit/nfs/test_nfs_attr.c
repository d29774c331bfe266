/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_attr: core_attr -> fattr3/wcc, sattr3 -> core_setattr,
 * name checks and the post-create attribute pass, with a fake core. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nfs_int.h"
#include "srv_err.h"

static struct core_setattr last_sa;
static int setattr_calls;

int tenants_export_get(struct tenants *t, uint32_t id, const struct sockaddr *sa,
                       struct tenant_export *out)
{
    return -ENOENT;
}

int core_getattr(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t gen,
                 struct core_attr *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    out->gen = gen;
    out->size = 777;
    out->type = CORE_REG;
    return 0;
}

int core_setattr(struct core *c, const struct core_principal *p, uint64_t ino,
                 const struct core_setattr *sa, struct core_attr *pre, struct core_attr *post)
{
    last_sa = *sa;
    setattr_calls++;
    memset(post, 0, sizeof(*post));
    post->ino = ino;
    post->size = sa->size;
    post->uid = 10;
    post->gid = 20;
    return 0;
}

static struct nfs_server srv;

static void test_fattr(void **state)
{
    struct nfs_req r = {.srv = &srv, .have_export = true};
    r.exp.id = 9;
    struct core_attr a = {.ino = 42, .type = CORE_LNK, .mode = 0104755, .nlink = 3, .uid = 5,
                          .gid = 6, .size = 1 << 20, .used = 4096};
    a.mtime.tv_sec = 1700000000;
    a.mtime.tv_nsec = 123456789;
    fattr3 f;
    nfs_attr_fattr(&r, &a, &f);
    assert_int_equal(f.type, NF3LNK);
    assert_int_equal(f.mode, 04755);
    assert_int_equal(f.nlink, 3);
    assert_true(f.fileid == 42 && f.fsid == 9 && f.size == 1 << 20 && f.used == 4096);
    assert_int_equal(f.mtime.seconds, 1700000000);
    assert_int_equal(f.mtime.nseconds, 123456789);
    a.type = CORE_DIR;
    nfs_attr_fattr(&r, &a, &f);
    assert_int_equal(f.type, NF3DIR);

    post_op_attr po;
    nfs_attr_post(&r, NULL, &po);
    assert_false(po.attributes_follow);
    pre_op_attr pr;
    nfs_attr_pre(&a, &pr);
    assert_true(pr.attributes_follow);
    assert_true(pr.pre_op_attr_u.attributes.size == 1 << 20);
    wcc_data w;
    nfs_attr_wcc(&r, NULL, 42, &w);
    assert_false(w.before.attributes_follow);
    assert_false(w.after.attributes_follow);
    nfs_attr_wcc(&r, &a, 42, &w);
    assert_true(w.before.attributes_follow && w.after.attributes_follow);
    assert_true(w.after.post_op_attr_u.attributes.size == 777);
}

/* The hand-written fattr3 (READDIRPLUS pages) is byte for byte what
 * xdr_fattr3 writes for nfs_attr_fattr's result. */
static void test_fattr_encode(void **state)
{
    struct nfs_req r = {.srv = &srv, .have_export = true};
    r.exp.id = 0x01020304;
    struct core_attr a = {.ino = 0x1122334455667788ull, .type = CORE_REG, .mode = 0100640,
                          .nlink = 2, .uid = 0xfffffffe, .gid = 7, .size = 0x123456789aull,
                          .used = 1u << 31};
    a.atime.tv_sec = 1;
    a.atime.tv_nsec = 2;
    a.mtime.tv_sec = 1700000000;
    a.mtime.tv_nsec = 999999999;
    a.ctime.tv_sec = 0x7fffffff;
    for (int type = 0; type < 3; type++) {
        a.type = type == 0 ? CORE_REG : type == 1 ? CORE_DIR : CORE_LNK;
        uint8_t want[NFS_FATTR3_XDR + 8], got[NFS_FATTR3_XDR + 8];
        fattr3 f;
        nfs_attr_fattr(&r, &a, &f);
        XDR x;
        xdrmem_create(&x, (char *)want, sizeof(want), XDR_ENCODE);
        assert_true(xdr_fattr3(&x, &f));
        assert_int_equal(xdr_getpos(&x), NFS_FATTR3_XDR);
        xdr_destroy(&x);
        memset(got, 0xa5, sizeof(got));
        assert_ptr_equal(nfs_attr_encode(&r, &a, got), got + NFS_FATTR3_XDR);
        assert_memory_equal(got, want, NFS_FATTR3_XDR);
        assert_int_equal(got[NFS_FATTR3_XDR], 0xa5); /* nothing written past it */
    }
}

static void test_sattr(void **state)
{
    sattr3 s;
    struct core_setattr sa;
    memset(&s, 0, sizeof(s));
    assert_int_equal(nfs_attr_sattr(&s, &sa), 0);
    assert_int_equal(sa.mask, 0);

    s.mode.set_it = TRUE;
    s.mode.set_mode3_u.mode = 0100644;
    s.uid.set_it = TRUE;
    s.uid.set_uid3_u.uid = 10;
    s.size.set_it = TRUE;
    s.size.set_size3_u.size = 99;
    s.atime.set_it = SET_TO_SERVER_TIME;
    s.mtime.set_it = SET_TO_CLIENT_TIME;
    s.mtime.set_mtime_u.mtime.seconds = 5;
    s.mtime.set_mtime_u.mtime.nseconds = 6;
    assert_int_equal(nfs_attr_sattr(&s, &sa), 0);
    assert_int_equal(sa.mask, CORE_SET_MODE | CORE_SET_UID | CORE_SET_SIZE | CORE_SET_ATIME_NOW |
                                  CORE_SET_MTIME);
    assert_int_equal(sa.mode, 0644);
    assert_int_equal(sa.uid, 10);
    assert_true(sa.size == 99);
    assert_int_equal(sa.mtime.tv_sec, 5);
    assert_int_equal(sa.mtime.tv_nsec, 6);

    s.mtime.set_mtime_u.mtime.nseconds = 1000000000;
    assert_int_equal(nfs_attr_sattr(&s, &sa), -EINVAL);
    s.mtime.set_it = (time_how)7;
    assert_int_equal(nfs_attr_sattr(&s, &sa), -EINVAL);
}

static void test_apply_rest(void **state)
{
    struct nfs_req r = {.srv = &srv};
    struct core_attr a = {.ino = 8, .uid = 10, .gid = 20, .size = 0};
    sattr3 s;
    memset(&s, 0, sizeof(s));
    /* Own uid/gid, size already 0, and mode skipped: nothing to do. */
    s.mode.set_it = TRUE;
    s.mode.set_mode3_u.mode = 0600;
    s.uid.set_it = TRUE;
    s.uid.set_uid3_u.uid = 10;
    s.gid.set_it = TRUE;
    s.gid.set_gid3_u.gid = 20;
    s.size.set_it = TRUE;
    s.size.set_size3_u.size = 0;
    setattr_calls = 0;
    assert_int_equal(nfs_attr_apply_rest(&r, &s, false, &a), 0);
    assert_int_equal(setattr_calls, 0);
    /* A real change goes to the core, without the mode. */
    s.size.set_size3_u.size = 50;
    assert_int_equal(nfs_attr_apply_rest(&r, &s, false, &a), 0);
    assert_int_equal(setattr_calls, 1);
    assert_int_equal(last_sa.mask, CORE_SET_SIZE);
    assert_true(a.size == 50);
    assert_int_equal(nfs_attr_apply_rest(&r, &s, true, &a), 0);
    assert_int_equal(last_sa.mask, CORE_SET_MODE);
}

static void test_names(void **state)
{
    size_t len;
    char longname[300];
    struct nfs_req r = {0};
    assert_int_equal(nfs_name_check(&r, "abc", &len), 0);
    assert_int_equal(len, 3);
    assert_int_equal(nfs_name_check(&r, "", &len), -EINVAL);
    assert_int_equal(nfs_name_check(&r, NULL, &len), -EINVAL);
    memset(longname, 'a', 255);
    longname[255] = '\0';
    assert_int_equal(nfs_name_check(&r, longname, &len), 0);
    memset(longname, 'a', 256);
    longname[256] = '\0';
    assert_int_equal(nfs_name_check(&r, longname, &len), -ENAMETOOLONG);
    r.name_nul = true;
    assert_int_equal(nfs_name_check(&r, "abc", &len), SRV_EBADNAME);
}

/* Encode RENAME3args with @p from and @p to (lengths given: NULs allowed),
 * decode them with nfs3_names_decode. @return the decode result. */
static bool rename_roundtrip(struct nfs_req *r, const char *from, u_int flen, const char *to,
                             u_int tlen, RENAME3args *out)
{
    static const struct nfs_proc_desc desc = {.name = "RENAME"};
    char buf[1024], fh[8] = "handle!";
    XDR x;
    u_int n = sizeof(fh);
    char *p = fh;
    xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
    assert_true(xdr_bytes(&x, &p, &n, 64));
    p = (char *)from;
    assert_true(xdr_bytes(&x, &p, &flen, 1024));
    p = fh;
    assert_true(xdr_bytes(&x, &p, &n, 64));
    p = (char *)to;
    assert_true(xdr_bytes(&x, &p, &tlen, 1024));
    u_int len = xdr_getpos(&x);
    xdr_destroy(&x);
    memset(r, 0, sizeof(*r));
    r->call.proc = NFSPROC3_RENAME;
    r->desc = &desc;
    r->conn_peer = "test";
    memset(out, 0, sizeof(*out));
    xdrmem_create(&x, buf, len, XDR_DECODE);
    bool ok = nfs3_names_decode(r, &x, out);
    xdr_destroy(&x);
    return ok;
}

/* A name that xdr_string cuts at a NUL byte is noted, in either position. */
static void test_names_decode(void **state)
{
    struct nfs_req r;
    RENAME3args a;
    assert_true(rename_roundtrip(&r, "from", 4, "to", 2, &a));
    assert_false(r.name_nul);
    assert_string_equal(a.from.name, "from");
    assert_string_equal(a.to.name, "to");
    xdr_free(NFS_XDRPROC(xdr_RENAME3args), &a);
    assert_true(rename_roundtrip(&r, "nul\0tail", 8, "to", 2, &a));
    assert_true(r.name_nul);
    assert_string_equal(a.from.name, "nul"); /* what the C string would have said */
    xdr_free(NFS_XDRPROC(xdr_RENAME3args), &a);
    assert_true(rename_roundtrip(&r, "from", 4, "t\0", 2, &a));
    assert_true(r.name_nul);
    xdr_free(NFS_XDRPROC(xdr_RENAME3args), &a);
    /* Truncated arguments still fail to decode. */
    struct nfs_req r2 = r;
    char buf[8] = {0, 0, 0, 4, 'a', 'b'};
    XDR x;
    memset(&a, 0, sizeof(a));
    xdrmem_create(&x, buf, 6, XDR_DECODE);
    assert_false(nfs3_names_decode(&r2, &x, &a));
    xdr_destroy(&x);
    xdr_free(NFS_XDRPROC(xdr_RENAME3args), &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fattr),
        cmocka_unit_test(test_fattr_encode),
        cmocka_unit_test(test_sattr),
        cmocka_unit_test(test_apply_rest),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_names_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
