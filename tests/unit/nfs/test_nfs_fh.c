/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_fh: round trip, and every kind of forged or damaged
 * handle is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nfs_fh.h"
#include "srv_err.h"

static const uint8_t key1[NFS_FH_KEYLEN] = "0123456789abcdef0123456789abcdef";
static const uint8_t key2[NFS_FH_KEYLEN] = "0123456789abcdef0123456789abcdeX";

static void test_roundtrip(void **state)
{
    struct nfs_fh fh = {.export_id = 7, .tenant = 3, .ino = 0x0123456789abcdefULL, .gen = 99};
    struct nfs_fh back;
    uint8_t buf[NFS_FH_LEN];
    nfs_fh_encode(key1, &fh, buf);
    assert_true(NFS_FH_LEN <= 64);
    assert_int_equal(nfs_fh_decode(key1, buf, sizeof(buf), &back), 0);
    assert_int_equal(back.export_id, 7);
    assert_int_equal(back.tenant, 3);
    assert_true(back.ino == 0x0123456789abcdefULL);
    assert_int_equal(back.gen, 99);
}

/* Same input, same bytes: handles are stable across restarts. */
static void test_stable(void **state)
{
    struct nfs_fh fh = {.export_id = 1, .tenant = 1, .ino = 42, .gen = 1};
    uint8_t a[NFS_FH_LEN], b[NFS_FH_LEN];
    nfs_fh_encode(key1, &fh, a);
    nfs_fh_encode(key1, &fh, b);
    assert_memory_equal(a, b, NFS_FH_LEN);
}

static void test_forged(void **state)
{
    struct nfs_fh fh = {.export_id = 1, .tenant = 1, .ino = 42, .gen = 1};
    struct nfs_fh back;
    uint8_t buf[NFS_FH_LEN], bad[NFS_FH_LEN];
    nfs_fh_encode(key1, &fh, buf);

    /* Flip every bit of the signed part and of the MAC in turn. */
    for (size_t i = 4; i < NFS_FH_LEN; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, buf, sizeof(bad));
            bad[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(nfs_fh_decode(key1, bad, sizeof(bad), &back), SRV_ESTALE);
        }
    }
    /* Another tenant number with the old MAC. */
    memcpy(bad, buf, sizeof(bad));
    bad[11] = 2;
    assert_int_equal(nfs_fh_decode(key1, bad, sizeof(bad), &back), SRV_ESTALE);
    /* Another store's key. */
    assert_int_equal(nfs_fh_decode(key2, buf, sizeof(buf), &back), SRV_ESTALE);
}

static void test_malformed(void **state)
{
    struct nfs_fh fh = {.export_id = 1, .tenant = 1, .ino = 42, .gen = 1};
    struct nfs_fh back;
    uint8_t buf[64] = {0};
    nfs_fh_encode(key1, &fh, buf);
    assert_int_equal(nfs_fh_decode(key1, buf, 31, &back), -EBADMSG);
    assert_int_equal(nfs_fh_decode(key1, buf, 64, &back), -EBADMSG);
    assert_int_equal(nfs_fh_decode(key1, buf, 0, &back), -EBADMSG);
    buf[0] = 'X';
    assert_int_equal(nfs_fh_decode(key1, buf, NFS_FH_LEN, &back), -EBADMSG);
    buf[0] = 'S';
    buf[2] = NFS_FH_VERSION + 1;
    assert_int_equal(nfs_fh_decode(key1, buf, NFS_FH_LEN, &back), -EBADMSG);
}

/* The reference vector of the SipHash paper (appendix A): key 00..0f,
 * message 00..0e, SipHash-2-4 = a129ca6149be45e5. */
static void test_siphash_vector(void **state)
{
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    assert_true(nfs_fh_siphash(key, msg, 15) == 0xa129ca6149be45e5ULL);
    /* Every length from 0 to 63 gives a distinct value (all paths of the tail). */
    uint64_t seen[64];
    for (size_t n = 0; n < 64; n++) {
        seen[n] = nfs_fh_siphash(key, msg, n);
        for (size_t j = 0; j < n; j++)
            assert_true(seen[j] != seen[n]);
    }
    assert_true(nfs_fh_siphash(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_vector),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_stable),
        cmocka_unit_test(test_forged),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
