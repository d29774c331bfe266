/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_lc.c: lifecycle documents accepted and refused (with
 * MalformedXML or InvalidArgument), their canonical form, filter matching and
 * the timing of days (S3's rounding to midnight UTC, the test clock's none). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

static int parse(struct s3_arena *a, const char *rules, struct s3_lc *lc)
{
    const char *why = NULL;
    char *doc = s3__arena_printf(a, "<LifecycleConfiguration>%s</LifecycleConfiguration>", rules);
    int rc = s3__lc_parse(a, doc, strlen(doc), lc, &why);
    if (rc)
        assert_non_null(why);
    return rc;
}

static void test_parse_and_write(void **state)
{
    (void)state;
    struct s3_arena a;
    struct s3_lc lc;
    s3__arena_init(&a);
    assert_int_equal(parse(&a,
                           "<Rule><ID>r</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key>"
                           "<Value>v</Value></Tag></And></Filter><Status>Enabled</Status>"
                           "<Expiration><Days>3</Days></Expiration></Rule>",
                           &lc),
                     0);
    assert_int_equal(lc.n, 1);
    assert_int_equal(lc.rules[0].exp_days, 3);
    assert_int_equal(lc.rules[0].ntags, 1);
    struct evbuffer *b = evbuffer_new();
    s3__lc_xml(&lc, b);
    size_t n = evbuffer_get_length(b);
    char *out = s3__arena_strndup(&a, (const char *)evbuffer_pullup(b, (ev_ssize_t)n), n);
    assert_non_null(strstr(out, "<Rule><ID>r</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k"
                                "</Key><Value>v</Value></Tag></And></Filter><Status>Enabled"
                                "</Status><Expiration><Days>3</Days></Expiration></Rule>"));
    evbuffer_free(b);
    /* refused */
    assert_int_equal(parse(&a, "", &lc), SRV_EBADREQ);
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>On</Status><Expiration><Days>1</Days>"
                           "</Expiration></Rule>",
                           &lc),
                     SRV_EBADREQ);
    assert_int_equal(parse(&a, "<Rule><Filter/><Status>Enabled</Status></Rule>", &lc), -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter><Prefix>a</Prefix><Prefix>b</Prefix></Filter>"
                           "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>"
                           "</Rule>",
                           &lc),
                     -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Expiration><Date>"
                           "2030-01-01T10:00:00Z</Date></Expiration></Rule>",
                           &lc),
                     -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
                           "</Filter><Status>Enabled</Status><Transition><Days>0</Days>"
                           "<StorageClass>GLACIER</StorageClass></Transition></Rule>",
                           &lc),
                     0);
    assert_true(s3__lc_has_transition(&lc));
    /* control bytes (a NUL would cut the key when written back) */
    assert_int_equal(parse(&a,
                           "<Rule><Filter><Tag><Key>k\x01</Key><Value>v</Value></Tag></Filter>"
                           "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>"
                           "</Rule>",
                           &lc),
                     SRV_EBADREQ);
    static const char nul[] = "<LifecycleConfiguration><Rule><ID>a\0b</ID><Filter/><Status>"
                              "Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"
                              "</LifecycleConfiguration>";
    const char *why = NULL;
    assert_int_equal(s3__lc_parse(&a, nul, sizeof(nul) - 1, &lc, &why), SRV_EBADREQ);
    s3__arena_fini(&a);
}

static void test_match_and_due(void **state)
{
    (void)state;
    struct s3_arena a;
    struct s3_lc lc;
    struct s3_meta m = {0};
    s3__arena_init(&a);
    assert_int_equal(parse(&a,
                           "<Rule><Filter><And><Prefix>tmp/</Prefix><ObjectSizeGreaterThan>10"
                           "</ObjectSizeGreaterThan><ObjectSizeLessThan>100</ObjectSizeLessThan>"
                           "<Tag><Key>t</Key><Value>1</Value></Tag></And></Filter><Status>"
                           "Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>",
                           &lc),
                     0);
    const struct s3_lc_rule *r = &lc.rules[0];
    s3__meta_add(&m, &a, S3_M_TAG, "t", 1, "1", 1);
    assert_true(s3__lc_match(r, "tmp/x", 5, 50, &m));
    assert_false(s3__lc_match(r, "tmp/x", 5, 10, &m)); /* greater than, not equal */
    assert_false(s3__lc_match(r, "tmp/x", 5, 100, &m));
    assert_false(s3__lc_match(r, "tm", 2, 50, &m));
    assert_false(s3__lc_match(r, "tmp/x", 5, 50, NULL));
    /* S3 days: created 2026-01-01 13:00 UTC + 1 day -> due at 2026-01-03 00:00 UTC */
    int64_t t0 = 1767272400; /* 2026-01-01T13:00:00Z */
    assert_false(s3__lc_due(t0, 1, t0 + 86400, 86400));
    assert_false(s3__lc_due(t0, 1, 1767398399, 86400));
    assert_true(s3__lc_due(t0, 1, 1767398400, 86400));
    /* the test clock: 2-second days, no rounding */
    assert_false(s3__lc_due(t0, 1, t0 + 1, 2));
    assert_true(s3__lc_due(t0, 1, t0 + 2, 2));
    s3__arena_fini(&a);
}

/* Transitions against the bucket's remote tier (s3__lc_check_tier), and their canonical
 * form (what GetBucketLifecycleConfiguration answers). */
static void test_transition(void **state)
{
    (void)state;
    struct s3_arena a;
    struct s3_lc lc;
    enum s3_err e;
    const char *why;
    s3__arena_init(&a);
    assert_int_equal(parse(&a,
                           "<Rule><ID>cold</ID><Filter><And><Prefix>ckpt/</Prefix>"
                           "<ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter>"
                           "<Status>Enabled</Status><Transition><Days>30</Days>"
                           "<StorageClass>GLACIER</StorageClass></Transition>"
                           "<Expiration><Days>365</Days></Expiration></Rule>"
                           "<Rule><ID>d</ID><Filter><Prefix>old/</Prefix></Filter><Status>"
                           "Enabled</Status><Transition><Date>2030-01-01T00:00:00Z</Date>"
                           "<StorageClass>GLACIER</StorageClass></Transition></Rule>",
                           &lc),
                     0);
    assert_true(s3__lc_has_transition(&lc));
    assert_int_equal(lc.rules[0].ntrans, 1);
    assert_int_equal(lc.rules[0].trans[0].days, 30);
    assert_string_equal(lc.rules[0].trans[0].sclass, "GLACIER");
    assert_int_equal(lc.rules[1].trans[0].date, 1893456000);
    /* the tier's class: fine */
    e = S3E_NONE;
    assert_int_equal(s3__lc_check_tier(&lc, "GLACIER", false, &e, &why), 0);
    /* another class, no tier policy, a versioned bucket */
    assert_int_equal(s3__lc_check_tier(&lc, "STANDARD_IA", false, &e, &why), -EINVAL);
    assert_int_equal(e, S3E_INVALID_STORAGE_CLASS);
    assert_int_equal(s3__lc_check_tier(&lc, NULL, false, &e, &why), -EINVAL);
    assert_int_equal(e, S3E_INVALID_REQUEST);
    assert_non_null(strstr(why, "tier policy"));
    assert_int_equal(s3__lc_check_tier(&lc, "GLACIER", true, &e, &why), SRV_ENOTSUPP);
    assert_non_null(strstr(why, "versioned"));
    /* written back as given */
    struct evbuffer *b = evbuffer_new();
    s3__lc_xml(&lc, b);
    size_t n = evbuffer_get_length(b);
    char *out = s3__arena_strndup(&a, (const char *)evbuffer_pullup(b, (ev_ssize_t)n), n);
    assert_non_null(strstr(out, "<Status>Enabled</Status><Expiration><Days>365</Days>"
                                "</Expiration><Transition><Days>30</Days><StorageClass>GLACIER"
                                "</StorageClass></Transition>"));
    assert_non_null(strstr(out, "<Transition><Date>2030-01-01T00:00:00.000Z</Date>"
                                "<StorageClass>GLACIER</StorageClass></Transition>"));
    evbuffer_free(b);
    /* a class S3 does not transition to, whatever the tier */
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Transition><Days>1</Days>"
                           "<StorageClass>STANDARD</StorageClass></Transition></Rule>",
                           &lc),
                     0);
    assert_int_equal(s3__lc_check_tier(&lc, "STANDARD", false, &e, &why), -EINVAL);
    assert_int_equal(e, S3E_INVALID_STORAGE_CLASS);
    assert_int_equal(s3__lc_check_tier(&lc, NULL, false, &e, &why), -EINVAL);
    assert_int_equal(e, S3E_INVALID_STORAGE_CLASS);
    /* NoncurrentVersionTransition: not built (501), before anything else */
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><NoncurrentVersionTransition>"
                           "<NoncurrentDays>5</NoncurrentDays><StorageClass>GLACIER"
                           "</StorageClass></NoncurrentVersionTransition></Rule>",
                           &lc),
                     0);
    assert_int_equal(s3__lc_check_tier(&lc, "GLACIER", false, &e, &why), SRV_ENOTSUPP);
    assert_non_null(strstr(why, "NoncurrentVersionTransition"));
    /* refused by the parser: no class, Days and Date, neither, negative days */
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Transition><Days>1</Days>"
                           "</Transition></Rule>",
                           &lc),
                     -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Transition><Days>1</Days>"
                           "<Date>2030-01-01T00:00:00Z</Date><StorageClass>GLACIER"
                           "</StorageClass></Transition></Rule>",
                           &lc),
                     -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Transition><StorageClass>"
                           "GLACIER</StorageClass></Transition></Rule>",
                           &lc),
                     -EINVAL);
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Transition><Days>-1</Days>"
                           "<StorageClass>GLACIER</StorageClass></Transition></Rule>",
                           &lc),
                     -EINVAL);
    /* a configuration without Transition passes whatever the bucket */
    assert_int_equal(parse(&a,
                           "<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days>"
                           "</Expiration></Rule>",
                           &lc),
                     0);
    assert_false(s3__lc_has_transition(&lc));
    assert_int_equal(s3__lc_check_tier(&lc, NULL, true, &e, &why), 0);
    s3__arena_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_write),
        cmocka_unit_test(test_match_and_due),
        cmocka_unit_test(test_transition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
