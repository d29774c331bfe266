/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the pure parts of the tier's uploader (tier/tier_upload.c):
 * the back-off with jitter, the reading of an object's S3 metadata blob
 * (Content-Type and user metadata), the file state names; and the records of
 * remote copies (meta/meta_tier.c: encode/decode, and get/put/scan through a
 * store in memory). The uploader against real remotes is tested in
 * tests/integration/tier/test_tier_upload.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta.h"
#include "meta_tier.h"
#include "srv_err.h"
#include "tier_upload.h"

static void test_backoff(void **state)
{
    (void)state;
    /* jitter factor in [0.5, 1.5): rnd 0 -> 0.5, rnd max -> just under 1.5 */
    assert_int_equal(tier_backoff_ms(0, 1000, 300000, 0), 500);
    assert_int_equal(tier_backoff_ms(0, 1000, 300000, 0x80000000u), 1000);
    assert_true(tier_backoff_ms(0, 1000, 300000, UINT32_MAX) < 1500);
    assert_true(tier_backoff_ms(0, 1000, 300000, UINT32_MAX) >= 1499);
    assert_int_equal(tier_backoff_ms(1, 1000, 300000, 0x80000000u), 2000);
    assert_int_equal(tier_backoff_ms(5, 1000, 300000, 0x80000000u), 32000);
    /* capped, also for huge try counts (no overflow) */
    assert_int_equal(tier_backoff_ms(9, 1000, 300000, 0x80000000u), 300000);
    assert_int_equal(tier_backoff_ms(1000, 1000, 300000, 0x80000000u), 300000);
    assert_true(tier_backoff_ms(1000, 1000, 300000, UINT32_MAX) < 450000);
    assert_int_equal(tier_backoff_ms(0, 0, 10, 0x80000000u), 1);
    /* spread: different random numbers give different delays */
    assert_true(tier_backoff_ms(3, 100, 10000, 1u << 30) !=
                tier_backoff_ms(3, 100, 10000, 3u << 30));
}

static size_t rec(uint8_t *p, int type, const char *k, const char *v)
{
    size_t kl = strlen(k), vl = strlen(v);
    p[0] = (uint8_t)type;
    p[1] = (uint8_t)(kl >> 8);
    p[2] = (uint8_t)kl;
    memcpy(p + 3, k, kl);
    p[3 + kl] = (uint8_t)(vl >> 24);
    p[4 + kl] = (uint8_t)(vl >> 16);
    p[5 + kl] = (uint8_t)(vl >> 8);
    p[6 + kl] = (uint8_t)vl;
    memcpy(p + 7 + kl, v, vl);
    return 7 + kl + vl;
}

static void test_objmeta_parse(void **state)
{
    (void)state;
    uint8_t blob[512];
    size_t n = 0;
    memcpy(blob, "S3M1", 4);
    n = 4;
    n += rec(blob + n, 1, "Cache-Control", "no-cache");
    n += rec(blob + n, 1, "Content-Type", "image/png");
    n += rec(blob + n, 2, "color", "blue");
    n += rec(blob + n, 3, "tagkey", "tagval"); /* tags are not metadata */
    n += rec(blob + n, 2, "n", "");
    char ct[64], strs[256];
    struct tier_s3_kv kv[4];
    int k = tier_objmeta_parse(blob, n, ct, sizeof(ct), kv, 4, strs, sizeof(strs));
    assert_int_equal(k, 2);
    assert_string_equal(ct, "image/png");
    assert_string_equal(kv[0].name, "color");
    assert_string_equal(kv[0].value, "blue");
    assert_string_equal(kv[1].name, "n");
    assert_string_equal(kv[1].value, "");
    /* at most max pairs, and what fits in strs */
    assert_int_equal(tier_objmeta_parse(blob, n, ct, sizeof(ct), kv, 1, strs, sizeof(strs)), 1);
    /* a pair that does not fit is left out, a later one that fits is kept */
    assert_int_equal(tier_objmeta_parse(blob, n, ct, sizeof(ct), kv, 4, strs, 8), 1);
    assert_string_equal(kv[0].name, "n");
    /* empty: nothing */
    assert_int_equal(tier_objmeta_parse(NULL, 0, ct, sizeof(ct), kv, 4, strs, sizeof(strs)), 0);
    assert_string_equal(ct, "");
    /* malformed: bad magic, truncated */
    assert_int_equal(tier_objmeta_parse("XXXX", 4, ct, sizeof(ct), kv, 4, strs, sizeof(strs)),
                     -EINVAL);
    assert_int_equal(tier_objmeta_parse(blob, n - 1, ct, sizeof(ct), kv, 4, strs, sizeof(strs)),
                     -EINVAL);
    assert_int_equal(tier_objmeta_parse(blob, 6, ct, sizeof(ct), kv, 4, strs, sizeof(strs)),
                     -EINVAL);
}

static void test_objmeta_encode(void **state)
{
    (void)state;
    struct tier_s3_kv in[2] = {{"color", "blue"}, {"n", ""}};
    void *blob = NULL;
    size_t len = 0;
    assert_int_equal(tier_objmeta_encode("text/csv", in, 2, &blob, &len), 0);
    assert_memory_equal(blob, "S3M1", 4);
    char ct[64], strs[256];
    struct tier_s3_kv kv[4];
    assert_int_equal(tier_objmeta_parse(blob, len, ct, sizeof(ct), kv, 4, strs, sizeof(strs)), 2);
    assert_string_equal(ct, "text/csv");
    assert_string_equal(kv[0].name, "color");
    assert_string_equal(kv[0].value, "blue");
    assert_string_equal(kv[1].name, "n");
    assert_string_equal(kv[1].value, "");
    /* the record s3api answers the Content-Type from: type 1, key "Content-Type" */
    assert_int_equal(((uint8_t *)blob)[4], 1);
    assert_memory_equal((uint8_t *)blob + 7, "Content-Type", 12);
    free(blob);
    /* nothing: the magic alone (asked, none) */
    assert_int_equal(tier_objmeta_encode("", NULL, 0, &blob, &len), 0);
    assert_int_equal(len, 4);
    assert_int_equal(tier_objmeta_parse(blob, len, ct, sizeof(ct), kv, 4, strs, sizeof(strs)), 0);
    assert_string_equal(ct, "");
    free(blob);
}

static void test_state_names(void **state)
{
    (void)state;
    assert_string_equal(tier_file_state_name(TIER_STATE_LOCAL), "local");
    assert_string_equal(tier_file_state_name(TIER_STATE_UPLOADING), "uploading");
    assert_string_equal(tier_file_state_name(TIER_STATE_UPLOADED), "uploaded");
    assert_string_equal(tier_file_state_name(TIER_STATE_NONE), "none");
}

static void test_tier_record_codec(void **state)
{
    (void)state;
    struct meta_tier_copy c, d;
    static uint8_t buf[sizeof(struct meta_tierst) + META_KEY_MAX];
    memset(&c, 0, sizeof(c));
    c.st.remote = 7;
    c.st.bucket = 17;
    c.st.change = 99;
    c.st.size = 12345;
    c.st.time_s = 1796600000;
    c.st.read_s = 1796700000;
    snprintf(c.st.etag, sizeof(c.st.etag), "abc-2");
    snprintf(c.key, sizeof(c.key), "dir/file.bin");
    size_t n = meta_tier_encode(&c, buf, sizeof(buf));
    assert_int_equal(n, sizeof(struct meta_tierst) + 12);
    assert_int_equal(meta_tier_decode(buf, n, &d), 0);
    assert_int_equal(d.st.rec_ver, META_TIERST_REC_VER);
    assert_int_equal(d.st.remote, 7);
    assert_int_equal(d.st.bucket, 17);
    assert_int_equal(d.st.change, 99);
    assert_int_equal(d.st.size, 12345);
    assert_int_equal(d.st.time_s, 1796600000);
    assert_int_equal(d.st.read_s, 1796700000);
    assert_string_equal(d.st.etag, "abc-2");
    assert_string_equal(d.key, "dir/file.bin");
    /* short, long, wrong version, key length wrong */
    assert_int_equal(meta_tier_decode(buf, n - 1, &d), SRV_ECORRUPT);
    assert_int_equal(meta_tier_decode(buf, sizeof(struct meta_tierst) - 1, &d), SRV_ECORRUPT);
    buf[0] ^= 0xff;
    assert_int_equal(meta_tier_decode(buf, n, &d), SRV_ECORRUPT);
    buf[0] ^= 0xff;
    /* an older build's record: the read time's bytes were padding (0): none known */
    memset(buf + offsetof(struct meta_tierst, read_s), 0, 4);
    assert_int_equal(meta_tier_decode(buf, n, &d), 0);
    assert_int_equal(d.st.read_s, 0);
    assert_int_equal(d.st.time_s, 1796600000);
    /* a key longest allowed, and one too long / empty: refused */
    memset(c.key, 'k', META_KEY_MAX);
    c.key[META_KEY_MAX] = '\0';
    n = meta_tier_encode(&c, buf, sizeof(buf));
    assert_int_equal(n, sizeof(buf));
    assert_int_equal(meta_tier_decode(buf, n, &d), 0);
    assert_int_equal(strlen(d.key), META_KEY_MAX);
    c.key[0] = '\0';
    assert_int_equal(meta_tier_encode(&c, buf, sizeof(buf)), 0);
    snprintf(c.key, sizeof(c.key), "x");
    assert_int_equal(meta_tier_encode(&c, buf, 10), 0); /* buffer too small */
}

struct seen {
    uint64_t ino[8];
    size_t n;
};

static int seen_cb(void *arg, uint64_t ino, const struct meta_tier_copy *c)
{
    struct seen *s = arg;
    assert_non_null(c);
    s->ino[s->n++] = ino;
    return 0;
}

static int put_fn(struct meta_txn *t, void *arg)
{
    struct meta_tier_copy *c = arg;
    int rc = meta_tier_put(t, 30, c);
    if (rc == 0)
        rc = meta_tier_put(t, 10, c);
    if (rc == 0)
        rc = meta_tier_put(t, 20, c);
    return rc;
}

static int del_fn(struct meta_txn *t, void *arg)
{
    (void)arg;
    int rc = meta_tier_del(t, 20);
    return rc ? rc : (meta_tier_del(t, 20) == -ENOENT ? 0 : -EIO);
}

static void test_tier_records_in_store(void **state)
{
    (void)state;
    struct meta_env *m;
    struct meta_env_config cfg = {.dir = "test_tier_upload_mem", .backend = META_BACKEND_MEM};
    assert_int_equal(meta_env_open(&m, &cfg), 0);
    struct meta_tier_copy c;
    memset(&c, 0, sizeof(c));
    c.st.remote = 1;
    snprintf(c.key, sizeof(c.key), "a/b");
    assert_int_equal(meta_submit(m, put_fn, &c, 0), 0);
    struct meta_txn *t;
    struct meta_tier_copy d;
    struct seen s = {{0}, 0};
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_tier_get(t, 10, &d), 0);
    assert_string_equal(d.key, "a/b");
    assert_int_equal(meta_tier_get(t, 11, &d), -ENOENT);
    assert_int_equal(meta_tier_scan(t, 0, seen_cb, &s), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.ino[0], 10);
    assert_int_equal(s.ino[2], 30);
    s.n = 0;
    assert_int_equal(meta_tier_scan(t, 10, seen_cb, &s), 0); /* after 10 */
    assert_int_equal(s.n, 2);
    assert_int_equal(s.ino[0], 20);
    meta_rtxn_end(t);
    assert_int_equal(meta_submit(m, del_fn, NULL, 0), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_tier_get(t, 20, &d), -ENOENT);
    meta_rtxn_end(t);
    meta_env_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff),           cmocka_unit_test(test_objmeta_parse),
        cmocka_unit_test(test_objmeta_encode),    cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_tier_record_codec), cmocka_unit_test(test_tier_records_in_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
