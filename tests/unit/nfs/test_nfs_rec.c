/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_rec: record marking (fragments, splits, limits) and the
 * RPC call/reply headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>

#include "nfs_rec.h"

static void add_frag(struct evbuffer *b, const void *data, uint32_t len, int last)
{
    uint32_t m = htonl((last ? 0x80000000u : 0) | len);
    evbuffer_add(b, &m, 4);
    evbuffer_add(b, data, len);
}

static void test_single_fragment(void **state)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    void *out = NULL;
    size_t len = 0;
    nfs_rec_init(&r, 1024);
    add_frag(in, "hello world!", 12, 1);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 1);
    assert_int_equal(len, 12);
    assert_memory_equal(out, "hello world!", 12);
    assert_int_equal(evbuffer_get_length(in), 0);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 0);
    free(out);
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

static void test_multi_fragment(void **state)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    void *out = NULL;
    size_t len = 0;
    nfs_rec_init(&r, 1024);
    add_frag(in, "abc", 3, 0);
    add_frag(in, "", 0, 0);
    add_frag(in, "defg", 4, 0);
    add_frag(in, "h", 1, 1);
    add_frag(in, "second", 6, 1);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 1);
    assert_int_equal(len, 8);
    assert_memory_equal(out, "abcdefgh", 8);
    free(out);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 1);
    assert_int_equal(len, 6);
    assert_memory_equal(out, "second", 6);
    free(out);
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

/* Feed a two-fragment record one byte at a time: it completes exactly once. */
static void test_byte_by_byte(void **state)
{
    struct nfs_rec r;
    struct evbuffer *src = evbuffer_new(), *in = evbuffer_new();
    uint8_t big[5000];
    void *out = NULL;
    size_t len = 0;
    int got = 0;
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7);
    nfs_rec_init(&r, 1 << 20);
    add_frag(src, big, 3000, 0);
    add_frag(src, big + 3000, 2000, 1);
    while (evbuffer_get_length(src) > 0) {
        uint8_t c;
        evbuffer_remove(src, &c, 1);
        evbuffer_add(in, &c, 1);
        int rc = nfs_rec_take(&r, in, &out, &len);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1) {
            got++;
            assert_int_equal(evbuffer_get_length(src), 0);
        }
    }
    assert_int_equal(got, 1);
    assert_int_equal(len, sizeof(big));
    assert_memory_equal(out, big, sizeof(big));
    free(out);
    nfs_rec_fini(&r);
    evbuffer_free(src);
    evbuffer_free(in);
}

/* A transport that reads the rest of a fragment straight from the socket:
 * part of the fragment came through the evbuffer, the rest is put where
 * nfs_rec_space says, and the next fragment goes on through the evbuffer. */
static void test_direct_fill(void **state)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    void *out = NULL, *dst = NULL;
    size_t len = 0;
    nfs_rec_init(&r, 1024);
    assert_int_equal(nfs_rec_space(&r, &dst), 0); /* no fragment yet */
    uint32_t m = htonl(10);                       /* not the last fragment: 10 bytes */
    evbuffer_add(in, &m, 4);
    evbuffer_add(in, "0123", 4);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 0);
    assert_int_equal(nfs_rec_space(&r, &dst), 6);
    memcpy(dst, "45", 2);
    nfs_rec_filled(&r, 2);
    assert_int_equal(nfs_rec_space(&r, &dst), 4);
    memcpy(dst, "6789", 4);
    nfs_rec_filled(&r, 4);
    add_frag(in, "AB", 2, 1);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 1);
    assert_int_equal(len, 12);
    assert_memory_equal(out, "0123456789AB", 12);
    assert_int_equal(nfs_rec_space(&r, &dst), 0);
    free(out);
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

static void test_oversize(void **state)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    uint8_t data[100] = {0};
    void *out = NULL;
    size_t len = 0;
    nfs_rec_init(&r, 150);
    /* Two fragments of 100 bytes: the second crosses the limit. */
    add_frag(in, data, 100, 0);
    add_frag(in, data, 100, 1);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), -EMSGSIZE);
    nfs_rec_fini(&r);

    /* A single huge announced fragment is refused before any body arrives. */
    evbuffer_drain(in, evbuffer_get_length(in));
    nfs_rec_init(&r, 4096);
    uint32_t m = htonl(0x80000000u | 0x7fffffffu);
    evbuffer_add(in, &m, 4);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), -EMSGSIZE);
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

static void test_empty_record(void **state)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    void *out = NULL;
    size_t len = 99;
    nfs_rec_init(&r, 64);
    add_frag(in, "", 0, 1);
    assert_int_equal(nfs_rec_take(&r, in, &out, &len), 1);
    assert_int_equal(len, 0);
    assert_non_null(out);
    free(out);
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

/* ---- call headers ---- */

struct wbuf {
    uint8_t b[1024];
    size_t n;
};

static void w32(struct wbuf *w, uint32_t v)
{
    v = htonl(v);
    memcpy(w->b + w->n, &v, 4);
    w->n += 4;
}

static void wopaque(struct wbuf *w, const void *p, uint32_t len)
{
    w32(w, len);
    memcpy(w->b + w->n, p, len);
    w->n += len;
    while (w->n % 4)
        w->b[w->n++] = 0;
}

static void call_head(struct wbuf *w, uint32_t xid, uint32_t rpcvers, uint32_t prog,
                      uint32_t vers, uint32_t proc)
{
    w->n = 0;
    w32(w, xid);
    w32(w, 0); /* CALL */
    w32(w, rpcvers);
    w32(w, prog);
    w32(w, vers);
    w32(w, proc);
}

static void sys_body(struct wbuf *b, uint32_t uid, uint32_t gid, uint32_t ngids)
{
    b->n = 0;
    w32(b, 12345);
    wopaque(b, "client1", 7);
    w32(b, uid);
    w32(b, gid);
    w32(b, ngids);
    for (uint32_t i = 0; i < ngids; i++)
        w32(b, 100 + i);
}

static void test_call_auth_sys(void **state)
{
    struct wbuf w, body;
    struct nfs_call c;
    call_head(&w, 0xdeadbeef, 2, 100003, 3, 1);
    sys_body(&body, 1000, 1001, 3);
    w32(&w, 1); /* AUTH_SYS */
    wopaque(&w, body.b, (uint32_t)body.n);
    w32(&w, 0); /* verifier AUTH_NONE */
    w32(&w, 0);
    size_t args = w.n;
    w32(&w, 42);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_OK);
    assert_int_equal(c.xid, 0xdeadbeef);
    assert_int_equal(c.prog, 100003);
    assert_int_equal(c.vers, 3);
    assert_int_equal(c.proc, 1);
    assert_int_equal(c.cred.flavor, 1);
    assert_int_equal(c.cred.uid, 1000);
    assert_int_equal(c.cred.gid, 1001);
    assert_int_equal(c.cred.ngids, 3);
    assert_int_equal(c.cred.gids[2], 102);
    assert_string_equal(c.cred.machine, "client1");
    assert_int_equal(c.args_off, args);
}

static void test_call_auth_none_and_verdicts(void **state)
{
    struct wbuf w, body;
    struct nfs_call c;

    call_head(&w, 7, 2, 100005, 3, 0);
    w32(&w, 0);
    w32(&w, 0);
    w32(&w, 0);
    w32(&w, 0);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_OK);
    assert_int_equal(c.cred.flavor, 0);
    assert_int_equal(c.args_off, w.n);

    call_head(&w, 8, 3, 100003, 3, 0);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_RPCMISMATCH);
    assert_int_equal(c.xid, 8);

    /* RPCSEC_GSS (6): not accepted. */
    call_head(&w, 9, 2, 100003, 3, 1);
    w32(&w, 6);
    wopaque(&w, "xxxx", 4);
    w32(&w, 0);
    w32(&w, 0);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_TOOWEAK);

    /* AUTH_SYS with 17 groups: malformed. */
    call_head(&w, 10, 2, 100003, 3, 1);
    sys_body(&body, 0, 0, 17);
    w32(&w, 1);
    wopaque(&w, body.b, (uint32_t)body.n);
    w32(&w, 0);
    w32(&w, 0);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_BADCRED);

    /* Credential longer than 400 bytes. */
    call_head(&w, 11, 2, 100003, 3, 1);
    w32(&w, 1);
    w32(&w, 401);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), 0);
    assert_int_equal(c.verdict, NFS_CALL_BADCRED);
}

static void test_call_garbage(void **state)
{
    struct wbuf w;
    struct nfs_call c;
    /* A REPLY is not a call. */
    w.n = 0;
    w32(&w, 1);
    w32(&w, 1);
    w32(&w, 2);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n, &c), -EBADMSG);
    /* Truncated header. */
    call_head(&w, 1, 2, 100003, 3, 1);
    assert_int_equal(nfs_rpc_call_decode(w.b, w.n - 4, &c), -EBADMSG);
    assert_int_equal(nfs_rpc_call_decode(w.b, 3, &c), -EBADMSG);
    assert_int_equal(nfs_rpc_call_decode(w.b, 0, &c), -EBADMSG);
}

static uint32_t r32(const uint8_t *p, size_t i)
{
    uint32_t v;
    memcpy(&v, p + 4 * i, 4);
    return ntohl(v);
}

static void test_replies(void **state)
{
    void *out;
    size_t len;
    assert_int_equal(nfs_rpc_reply_accepted(5, PROG_MISMATCH, NULL, NULL, 3, 3, &out, &len), 0);
    assert_int_equal(len, 4 + 32);
    const uint8_t *p = out;
    assert_int_equal(r32(p, 0), 0x80000000u | 32);
    assert_int_equal(r32(p, 1), 5);
    assert_int_equal(r32(p, 2), 1); /* REPLY */
    assert_int_equal(r32(p, 3), 0); /* MSG_ACCEPTED */
    assert_int_equal(r32(p, 6), 2); /* PROG_MISMATCH */
    assert_int_equal(r32(p, 7), 3);
    assert_int_equal(r32(p, 8), 3);
    free(out);

    uint32_t v = 77;
    assert_int_equal(
        nfs_rpc_reply_accepted(6, SUCCESS, NFS_XDRPROC(xdr_u_int32_t), &v, 0, 0, &out, &len), 0);
    assert_int_equal(len, 4 + 28);
    assert_int_equal(r32(out, 6), 0);
    assert_int_equal(r32(out, 7), 77);
    free(out);

    assert_int_equal(nfs_rpc_reply_denied(9, NFS_CALL_TOOWEAK, &out, &len), 0);
    assert_int_equal(len, 4 + 20);
    assert_int_equal(r32(out, 3), 1); /* MSG_DENIED */
    assert_int_equal(r32(out, 4), 1); /* AUTH_ERROR */
    assert_int_equal(r32(out, 5), 5); /* AUTH_TOOWEAK */
    free(out);

    assert_int_equal(nfs_rpc_reply_denied(9, NFS_CALL_RPCMISMATCH, &out, &len), 0);
    assert_int_equal(len, 4 + 24);
    assert_int_equal(r32(out, 4), 0); /* RPC_MISMATCH */
    assert_int_equal(r32(out, 5), 2);
    assert_int_equal(r32(out, 6), 2);
    free(out);
}

/* A result of n bytes of opaque<> (n, bytes, padding). */
struct blob {
    char *p;
    u_int n;
};
static bool_t xdr_blob(XDR *x, struct blob *b)
{
    return xdr_bytes(x, &b->p, &b->n, 1u << 20);
}
static bool_t xdr_fail(XDR *x, void *p)
{
    return FALSE;
}

/* Replies are encoded once into a buffer of the usual size, and measured
 * first only when they do not fit: sizes on both sides of that, and a result
 * that cannot be encoded at all. */
static void test_reply_sizes(void **state)
{
    static char data[70000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7 + 1);
    const u_int sizes[] = {0, 1, 900, 987, 988, 989, 992, 993, 1000, 4097, 65536, 70000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        struct blob b = {data, sizes[k]};
        void *out;
        size_t len;
        assert_int_equal(nfs_rpc_reply_accepted(11, SUCCESS, NFS_XDRPROC(xdr_blob), &b, 0, 0,
                                                &out, &len), 0);
        size_t pad = (4 - (b.n & 3)) & 3;
        assert_int_equal(len, 4 + 24 + 4 + b.n + pad);
        assert_int_equal(r32(out, 0), 0x80000000u | (uint32_t)(len - 4));
        assert_int_equal(r32(out, 1), 11);
        assert_int_equal(r32(out, 7), b.n);
        assert_memory_equal((uint8_t *)out + 32, data, b.n);
        for (size_t i = 0; i < pad; i++)
            assert_int_equal(((uint8_t *)out)[32 + b.n + i], 0);
        free(out);
    }
    void *out = NULL;
    size_t len = 0;
    assert_int_equal(nfs_rpc_reply_accepted(12, SUCCESS, NFS_XDRPROC(xdr_fail), NULL, 0, 0, &out,
                                            &len), -EOVERFLOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_fragment), cmocka_unit_test(test_multi_fragment),
        cmocka_unit_test(test_byte_by_byte),    cmocka_unit_test(test_direct_fill),
        cmocka_unit_test(test_oversize),        cmocka_unit_test(test_empty_record),
        cmocka_unit_test(test_call_auth_sys),   cmocka_unit_test(test_call_auth_none_and_verdicts),
        cmocka_unit_test(test_call_garbage),    cmocka_unit_test(test_replies),
        cmocka_unit_test(test_reply_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
