/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_router.c: addressing (path style, virtual host) and
 * the method/subresource -> operation table, including NotImplemented cases. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "s3_internal.h"
#include "srv_err.h"

struct rt {
    struct s3_http h;
    struct s3_route r;
};

static struct s3_route *route(struct rt *t, const char *method, const char *target,
                              const char *host, const char *extra, const char *domain)
{
    char raw[2048];
    size_t used;
    snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", method, target, host,
             extra ? extra : "");
    s3__http_init(&t->h, 0, NULL, NULL);
    assert_int_equal(s3__http_feed(&t->h, raw, strlen(raw), &used), S3_HTTP_HEADERS);
    s3__route_req(&t->h.req->arena, t->h.req, domain, &t->r);
    return &t->r;
}

#define OP(m, tgt, want)                                                                           \
    do {                                                                                           \
        struct rt t;                                                                               \
        struct s3_route *r = route(&t, m, tgt, "h", NULL, NULL);                                   \
        assert_int_equal(r->err, 0);                                                               \
        assert_ptr_equal(r->op, &want);                                                            \
        s3__http_fini(&t.h);                                                                       \
    } while (0)

static void test_ops(void **state)
{
    (void)state;
    OP("GET", "/", s3_op_list_buckets);
    OP("PUT", "/bkt", s3_op_create_bucket);
    OP("DELETE", "/bkt/", s3_op_delete_bucket);
    OP("HEAD", "/bkt", s3_op_head_bucket);
    OP("GET", "/bkt?location", s3_op_bucket_location);
    OP("GET", "/bkt", s3_op_list_objects);
    OP("GET", "/bkt?list-type=2&prefix=a", s3_op_list_objects_v2);
    OP("GET", "/bkt?versions", s3_op_list_versions);
    OP("GET", "/bkt?uploads", s3_op_mpu_list_uploads);
    OP("GET", "/bkt?versioning", s3_op_get_versioning);
    OP("PUT", "/bkt?versioning", s3_op_put_versioning);
    OP("GET", "/bkt?object-lock", s3_op_get_objlock);
    OP("PUT", "/bkt?object-lock", s3_op_put_objlock);
    OP("GET", "/bkt?cors", s3_op_bucket_config);
    OP("GET", "/bkt?lifecycle", s3_op_get_lifecycle);
    OP("PUT", "/bkt?lifecycle", s3_op_put_lifecycle);
    OP("DELETE", "/bkt?lifecycle", s3_op_delete_lifecycle);
    OP("POST", "/bkt?delete", s3_op_delete_objects);
    OP("PUT", "/bkt/k", s3_op_put_object);
    OP("GET", "/bkt/k", s3_op_get_object);
    OP("HEAD", "/bkt/k", s3_op_head_object);
    OP("DELETE", "/bkt/k", s3_op_delete_object);
    OP("GET", "/bkt/k?tagging", s3_op_get_tagging);
    OP("PUT", "/bkt/k?tagging", s3_op_put_tagging);
    OP("DELETE", "/bkt/k?tagging", s3_op_delete_tagging);
    OP("GET", "/bkt/k?acl", s3_op_get_object_acl);
    OP("PUT", "/bkt/k?acl", s3_op_put_object_acl);
    OP("PUT", "/bkt?acl", s3_op_put_bucket_acl);
    OP("PUT", "/bkt?policy", s3_op_put_bucket_policy);
    OP("DELETE", "/bkt?policy", s3_op_delete_bucket_policy);
    OP("PUT", "/bkt?publicAccessBlock", s3_op_put_pab);
    OP("DELETE", "/bkt?ownershipControls", s3_op_delete_ownership);
    OP("PUT", "/bkt?cors", s3_op_put_cors);
    OP("OPTIONS", "/bkt/k", s3_op_cors_preflight);
    OP("GET", "/bkt/k?attributes", s3_op_get_attributes);
    OP("POST", "/bkt/k?uploads", s3_op_mpu_create);
    OP("PUT", "/bkt/k?partNumber=1&uploadId=x", s3_op_mpu_upload_part);
    OP("POST", "/bkt/k?uploadId=x", s3_op_mpu_complete);
    OP("DELETE", "/bkt/k?uploadId=x", s3_op_mpu_abort);
    OP("GET", "/bkt/k?uploadId=x", s3_op_mpu_list_parts);
    OP("GET", "/bkt/k?versionId=null", s3_op_get_object);
    OP("GET", "/bkt/k?versionId=0123", s3_op_get_object);
    OP("DELETE", "/bkt/k?versionId=0123", s3_op_delete_object);
    OP("GET", "/bkt/k?retention", s3_op_get_retention);
    OP("PUT", "/bkt/k?retention&versionId=1", s3_op_put_retention);
    OP("GET", "/bkt/k?legal-hold", s3_op_get_legal_hold);
    OP("PUT", "/bkt/k?legal-hold", s3_op_put_legal_hold);
}

static void test_copy_and_keys(void **state)
{
    (void)state;
    struct rt t;
    struct s3_route *r = route(&t, "PUT", "/bkt/dst", "h", "x-amz-copy-source: /bkt/src\r\n", NULL);
    assert_ptr_equal(r->op, &s3_op_copy_object);
    s3__http_fini(&t.h);
    r = route(&t, "PUT", "/bkt/k?partNumber=2&uploadId=u", "h", "x-amz-copy-source: b/s\r\n", NULL);
    assert_ptr_equal(r->op, &s3_op_mpu_upload_part_copy);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt/a%20b/c%2Bd//e", "h", NULL, NULL);
    assert_string_equal(r->bucket, "bkt");
    assert_int_equal(r->keylen, 10);
    assert_memory_equal(r->key, "a b/c+d//e", 10);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt/dir/", "h", NULL, NULL);
    assert_memory_equal(r->key, "dir/", 4);
    assert_int_equal(r->keylen, 4);
    s3__http_fini(&t.h);
}

static void test_vhost(void **state)
{
    (void)state;
    struct rt t;
    struct s3_route *r = route(&t, "GET", "/some/key", "MyBkt.s3.test:9000", NULL, "s3.test");
    assert_true(r->vhost);
    assert_string_equal(r->bucket, "mybkt");
    assert_memory_equal(r->key, "some/key", 8);
    assert_ptr_equal(r->op, &s3_op_get_object);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/?list-type=2", "mybkt.s3.test", NULL, "s3.test");
    assert_ptr_equal(r->op, &s3_op_list_objects_v2);
    assert_null(r->key);
    s3__http_fini(&t.h);
    /* the bare domain and other hosts stay path style */
    r = route(&t, "GET", "/bkt/k", "s3.test:9000", NULL, "s3.test");
    assert_false(r->vhost);
    assert_string_equal(r->bucket, "bkt");
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt/k", "127.0.0.1:9000", NULL, "s3.test");
    assert_false(r->vhost);
    s3__http_fini(&t.h);
}

static void test_errors(void **state)
{
    (void)state;
    struct rt t;
    struct s3_route *r = route(&t, "GET", "/bkt/k?torrent", "h", NULL, NULL);
    assert_int_equal(r->err, SRV_ENOTSUPP);
    assert_non_null(strstr(r->errmsg, "torrent"));
    s3__http_fini(&t.h);
    r = route(&t, "PUT", "/bkt?website", "h", NULL, NULL);
    assert_int_equal(r->err, SRV_ENOTSUPP);
    s3__http_fini(&t.h);
    r = route(&t, "PUT", "/bkt/k?uploadId=x", "h", NULL, NULL);
    assert_int_equal(r->err, -EINVAL);
    s3__http_fini(&t.h);
    r = route(&t, "DELETE", "/", "h", NULL, NULL);
    assert_int_equal(r->err, -EPERM);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt/%zz", "h", NULL, NULL);
    assert_int_equal(r->err, -EINVAL);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt/a%00b", "h", NULL, NULL);
    assert_int_equal(r->err, -EINVAL);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "//k", "h", NULL, NULL);
    assert_int_equal(r->err, -EINVAL);
    s3__http_fini(&t.h);
    r = route(&t, "GET", "/bkt?list-type=3", "h", NULL, NULL);
    assert_int_equal(r->err, -EINVAL);
    s3__http_fini(&t.h);
    char longkey[1200] = "/bkt/";
    memset(longkey + 5, 'k', 1100);
    longkey[1105] = '\0';
    r = route(&t, "GET", longkey, "h", NULL, NULL);
    assert_int_equal(r->err, -ENAMETOOLONG);
    s3__http_fini(&t.h);
}

/* What the connection reads from an op instead of comparing pointers. */
static void test_op_facts(void **state)
{
    (void)state;
    const struct s3_op *writes[] = {&s3_op_put_object, &s3_op_mpu_upload_part, &s3_op_copy_object,
                                    &s3_op_mpu_upload_part_copy};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(writes[i]->qos, QOS_WRITE);
        assert_int_equal(writes[i]->flags, 0);
    }
    assert_int_equal(s3_op_put_object.body, S3_BODY_STREAM);
    assert_non_null(s3_op_put_object.finish);
    assert_int_equal(s3_op_mpu_upload_part.body, S3_BODY_STREAM);
    /* GetObject: admitted after, as a read of what it sends; GET and HEAD try the loop first */
    assert_int_equal(s3_op_get_object.flags, S3_OPF_READ_AFTER);
    assert_int_equal(s3_op_get_object.qos, QOS_READ);
    assert_ptr_equal(s3_op_get_object.fast, s3__get_fast);
    assert_ptr_equal(s3_op_head_object.fast, s3__get_fast);
    const struct s3_op *meta[] = {
        &s3_op_list_buckets,   &s3_op_create_bucket,   &s3_op_delete_bucket,  &s3_op_head_bucket,
        &s3_op_list_objects,   &s3_op_list_objects_v2, &s3_op_head_object,    &s3_op_delete_object,
        &s3_op_delete_objects, &s3_op_get_tagging,     &s3_op_put_tagging,    &s3_op_mpu_create,
        &s3_op_mpu_complete,   &s3_op_mpu_abort,       &s3_op_mpu_list_parts, &s3_op_get_object_acl,
        &s3_op_put_object_acl, &s3_op_put_bucket_acl,
    };
    for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++) {
        assert_int_equal(meta[i]->qos, QOS_META);
        assert_int_equal(meta[i]->flags, 0);
        assert_non_null(meta[i]->work);
    }
    /* every op on a bucket names the IAM action it is decided as (s3_authz.c), but
     * CreateBucket and the configuration reads, which decide themselves */
    const struct s3_op *decided[] = {
        &s3_op_delete_bucket,  &s3_op_head_bucket,    &s3_op_list_objects,   &s3_op_list_objects_v2,
        &s3_op_get_object,     &s3_op_head_object,    &s3_op_put_object,     &s3_op_delete_object,
        &s3_op_delete_objects, &s3_op_copy_object,    &s3_op_get_tagging,    &s3_op_put_tagging,
        &s3_op_mpu_create,     &s3_op_mpu_complete,   &s3_op_mpu_abort,      &s3_op_mpu_list_parts,
        &s3_op_get_object_acl, &s3_op_put_object_acl, &s3_op_put_bucket_acl,
    };
    for (size_t i = 0; i < sizeof(decided) / sizeof(decided[0]); i++) {
        assert_non_null(decided[i]->action);
        assert_int_equal(strncmp(decided[i]->action, "s3:", 3), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),      cmocka_unit_test(test_copy_and_keys),
        cmocka_unit_test(test_vhost),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_op_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
