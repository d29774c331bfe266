/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_policy.c (bucket policies: validation and its
 * reasons, principals confined to the tenant, evaluation: Deny wins, Not*
 * elements, each condition operator family, ...IfExists, Null, missing keys,
 * policy variables, public-ness) and s3api/s3_acl.c's permission rule (the
 * POSIX bits plus S3 grants, public grants capped by the others' bits). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "s3_internal.h"

static int user_by_name(void *arg, const char *name, uint64_t *user)
{
    (void)arg;
    if (strcmp(name, "alice") != 0)
        return -ENOENT;
    *user = 5;
    return 0;
}

static const struct s3_policy_env ENV = {
    .bucket = "bkt", .tenant = 3, .tenant_name = "acme", .user_by_name = user_by_name};

struct kv {
    const char *k, *v;
};

static const char *value(void *arg, const char *key)
{
    for (const struct kv *kv = arg; kv && kv->k; kv++)
        if (strcmp(kv->k, key) == 0)
            return kv->v;
    return NULL;
}

/* Parse @p doc and evaluate one request. */
static enum s3_pol eval(const char *doc, bool anon, uint64_t user, const char *action,
                        const char *res, const struct kv *kv)
{
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_policy *pol;
    const char *why = NULL;
    int rc = s3__policy_parse(&a, doc, strlen(doc), &ENV, &pol, &why);
    if (rc)
        fail_msg("policy refused: %s", why);
    struct s3_policy_req rq = {.anon = anon,
                               .user = user,
                               .uid = 1000,
                               .action = action,
                               .resource = res,
                               .value = value,
                               .arg = (void *)kv};
    enum s3_pol p = s3__policy_eval(&a, pol, &rq);
    s3__arena_fini(&a);
    return p;
}

static const char *refused(const char *doc)
{
    static char msg[256];
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_policy *pol;
    const char *why = NULL;
    assert_int_equal(s3__policy_parse(&a, doc, strlen(doc), &ENV, &pol, &why), -EINVAL);
    assert_non_null(why);
    snprintf(msg, sizeof(msg), "%s", why);
    s3__arena_fini(&a);
    return msg;
}

#define ST(body) "{\"Version\":\"2012-10-17\",\"Statement\":[" body "]}"
#define OBJ "arn:aws:s3:::bkt/k"

static void test_validation(void **state)
{
    (void)state;
    const char *base = "\"Effect\":\"Allow\",\"Action\":\"s3:GetObject\",\"Resource\":\"" OBJ "\"";
    char doc[512];
    assert_string_equal(refused("{nope"),
                        "Policies must be valid JSON and the first byte must be '{'");
    assert_string_equal(refused("{\"Version\":\"2012-10-17\"}"),
                        "Missing required field Statement");
    snprintf(doc, sizeof(doc),
             ST("{%s,\"Principal\":{\"AWS\":\"arn:aws:iam::999999999999:root\"}}"), base);
    assert_string_equal(refused(doc), "Invalid principal in policy");
    snprintf(doc, sizeof(doc),
             ST("{%s,\"Principal\":{\"AWS\":\"arn:aws:iam::acme:user/mallory\"}}"), base);
    assert_string_equal(refused(doc), "Invalid principal in policy");
    snprintf(doc, sizeof(doc), ST("{%s,\"Principal\":{\"Service\":\"s3.amazonaws.com\"}}"), base);
    assert_string_equal(refused(doc), "Invalid principal in policy");
    assert_non_null(strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":"
                                      "\"s3:GetObjekt\",\"Resource\":\"" OBJ "\"}")),
                           "invalid action"));
    assert_non_null(strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":"
                                      "\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::other/*\"}")),
                           "invalid resource"));
    assert_non_null(
        strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
                          "\"Resource\":\"*\",\"Condition\":{\"StringEquals\":"
                          "{\"aws:Nope\":\"x\"}}}")),
               "invalid condition key"));
    assert_non_null(
        strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
                          "\"Resource\":\"*\",\"Condition\":{\"NullIfExists\":"
                          "{\"aws:Referer\":\"true\"}}}")),
               "invalid condition operator"));
    assert_non_null(
        strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
                          "\"Resource\":\"*\",\"Condition\":{\"IpAddress\":"
                          "{\"aws:SourceIp\":\"300.1.1.1/8\"}}}")),
               "invalid IP"));
    assert_non_null(
        strstr(refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\","
                          "\"Resource\":\"*\",\"Condition\":{\"ForAnyValue:StringEquals\":"
                          "{\"s3:prefix\":\"x\"}}}")),
               "not supported"));
    assert_string_equal(
        refused(ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\"}")),
        "a statement needs one of Resource or NotResource");
}

static void test_effects(void **state)
{
    (void)state;
    const char *doc =
        ST("{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"arn:aws:iam::000000000003:user/alice\"},"
           "\"Action\":\"s3:Get*\",\"Resource\":\"arn:aws:s3:::bkt/*\"},"
           "{\"Effect\":\"Deny\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
           "\"Resource\":\"arn:aws:s3:::bkt/secret*\"},"
           "{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"acme\"},\"NotAction\":\"s3:Delete*\","
           "\"NotResource\":\"arn:aws:s3:::bkt/private/*\"}");
    assert_int_equal(eval(doc, false, 5, "s3:GetObject", OBJ, NULL), S3_POL_ALLOW);
    assert_int_equal(eval(doc, false, 5, "s3:GetObject", "arn:aws:s3:::bkt/secret1", NULL),
                     S3_POL_DENY);
    assert_int_equal(eval(doc, true, 0, "s3:GetObject", OBJ, NULL), S3_POL_NONE);
    /* the account: every user of the tenant, never anonymous */
    assert_int_equal(eval(doc, false, 9, "s3:PutObject", OBJ, NULL), S3_POL_ALLOW);
    assert_int_equal(eval(doc, false, 9, "s3:DeleteObject", OBJ, NULL), S3_POL_NONE);
    assert_int_equal(eval(doc, false, 9, "s3:PutObject", "arn:aws:s3:::bkt/private/x", NULL),
                     S3_POL_NONE);
    assert_int_equal(eval(doc, true, 0, "s3:PutObject", OBJ, NULL), S3_POL_NONE);
    /* actions are case-insensitive, resources not */
    assert_int_equal(eval(doc, false, 5, "s3:getobject", "arn:aws:s3:::bkt/K", NULL), S3_POL_ALLOW);
    assert_int_equal(eval(doc, false, 5, "s3:GetObject", "arn:aws:s3:::bkt/Secret", NULL),
                     S3_POL_ALLOW);
    /* NotPrincipal with Deny: everyone but alice */
    const char *np =
        ST("{\"Effect\":\"Deny\",\"NotPrincipal\":{\"AWS\":\"arn:aws:iam::acme:user/alice\"},"
           "\"Action\":\"s3:*\",\"Resource\":\"arn:aws:s3:::bkt/*\"}");
    assert_int_equal(eval(np, false, 5, "s3:GetObject", OBJ, NULL), S3_POL_NONE);
    assert_int_equal(eval(np, false, 6, "s3:GetObject", OBJ, NULL), S3_POL_DENY);
    assert_int_equal(eval(np, true, 0, "s3:GetObject", OBJ, NULL), S3_POL_DENY);
}

#define COND(c)                                                                                    \
    ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:*\",\"Resource\":\"*\","         \
       "\"Condition\":" c "}")

static enum s3_pol cond(const char *c, const struct kv *kv)
{
    char doc[1024];
    snprintf(doc, sizeof(doc), COND("%s"), c);
    return eval(doc, true, 0, "s3:ListBucket", "arn:aws:s3:::bkt", kv);
}

static void test_conditions(void **state)
{
    (void)state;
    const struct kv ip2[] = {{"aws:sourceip", "127.0.0.2"}, {NULL, NULL}};
    const struct kv ip6[] = {{"aws:sourceip", "::ffff:10.1.2.3"}, {NULL, NULL}};
    const struct kv v6[] = {{"aws:sourceip", "2001:db8::7"}, {NULL, NULL}};
    const char *ipc = "{\"IpAddress\":{\"aws:SourceIp\":[\"127.0.0.2/32\",\"10.0.0.0/8\","
                      "\"2001:db8::/32\"]}}";
    assert_int_equal(cond(ipc, ip2), S3_POL_ALLOW);
    assert_int_equal(cond(ipc, ip6), S3_POL_ALLOW);
    assert_int_equal(cond(ipc, v6), S3_POL_ALLOW);
    assert_int_equal(cond(ipc, NULL), S3_POL_NONE); /* missing key: no match */
    const char *nip = "{\"NotIpAddress\":{\"aws:SourceIp\":\"127.0.0.0/8\"}}";
    assert_int_equal(cond(nip, ip2), S3_POL_NONE);
    assert_int_equal(cond(nip, ip6), S3_POL_ALLOW);
    assert_int_equal(cond(nip, NULL), S3_POL_ALLOW); /* negated + missing: holds */
    const struct kv pfx[] = {{"s3:prefix", "home/alice/x"},
                             {"s3:max-keys", "50"},
                             {"aws:currenttime", "2025-06-01T00:00:00Z"},
                             {"aws:securetransport", "false"},
                             {NULL, NULL}};
    assert_int_equal(cond("{\"StringLike\":{\"s3:prefix\":[\"nope\",\"home/*\"]}}", pfx),
                     S3_POL_ALLOW);
    assert_int_equal(cond("{\"StringNotLike\":{\"s3:prefix\":[\"nope\",\"home/*\"]}}", pfx),
                     S3_POL_NONE);
    assert_int_equal(cond("{\"StringEqualsIgnoreCase\":{\"s3:prefix\":\"HOME/ALICE/X\"}}", pfx),
                     S3_POL_ALLOW);
    assert_int_equal(cond("{\"NumericLessThanEquals\":{\"s3:max-keys\":50}}", pfx), S3_POL_ALLOW);
    assert_int_equal(cond("{\"NumericGreaterThan\":{\"s3:max-keys\":\"50\"}}", pfx), S3_POL_NONE);
    assert_int_equal(cond("{\"DateGreaterThan\":{\"aws:CurrentTime\":\"2025-01-01\"}}", pfx),
                     S3_POL_ALLOW);
    assert_int_equal(
        cond("{\"DateLessThan\":{\"aws:CurrentTime\":\"2025-06-01T02:00:00+03:00\"}}", pfx),
        S3_POL_NONE);
    assert_int_equal(cond("{\"Bool\":{\"aws:SecureTransport\":false}}", pfx), S3_POL_ALLOW);
    assert_int_equal(cond("{\"Bool\":{\"aws:SecureTransport\":\"true\"}}", pfx), S3_POL_NONE);
    /* IfExists and Null */
    assert_int_equal(cond("{\"StringEqualsIfExists\":{\"aws:Referer\":\"x\"}}", pfx), S3_POL_ALLOW);
    assert_int_equal(cond("{\"StringEqualsIfExists\":{\"s3:prefix\":\"x\"}}", pfx), S3_POL_NONE);
    assert_int_equal(cond("{\"Null\":{\"aws:Referer\":\"true\"}}", pfx), S3_POL_ALLOW);
    assert_int_equal(cond("{\"Null\":{\"s3:prefix\":\"true\"}}", pfx), S3_POL_NONE);
    assert_int_equal(cond("{\"Null\":{\"s3:prefix\":\"false\"}}", pfx), S3_POL_ALLOW);
    /* every condition of a statement must hold */
    assert_int_equal(cond("{\"StringLike\":{\"s3:prefix\":\"home/*\"},"
                          "\"NumericLessThan\":{\"s3:max-keys\":\"10\"}}",
                          pfx),
                     S3_POL_NONE);
    /* tag keys are case-sensitive, condition key names not */
    const struct kv tag[] = {{"s3:existingobjecttag/Color", "green"}, {NULL, NULL}};
    assert_int_equal(cond("{\"StringEquals\":{\"S3:ExistingObjectTag/Color\":\"green\"}}", tag),
                     S3_POL_ALLOW);
    assert_int_equal(cond("{\"StringEquals\":{\"s3:ExistingObjectTag/color\":\"green\"}}", tag),
                     S3_POL_NONE);
}

static void test_variables_and_public(void **state)
{
    (void)state;
    const char *doc =
        ST("{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"acme\"},\"Action\":\"s3:*\","
           "\"Resource\":\"arn:aws:s3:::bkt/home/${aws:username}/*\"}");
    const struct kv alice[] = {{"aws:username", "alice"}, {NULL, NULL}};
    assert_int_equal(eval(doc, false, 5, "s3:GetObject", "arn:aws:s3:::bkt/home/alice/f", alice),
                     S3_POL_ALLOW);
    assert_int_equal(eval(doc, false, 5, "s3:GetObject", "arn:aws:s3:::bkt/home/bob/f", alice),
                     S3_POL_NONE);
    /* 2008-10-17 has no variables: the text is literal */
    const char *old = "{\"Version\":\"2008-10-17\",\"Statement\":{\"Effect\":\"Allow\","
                      "\"Principal\":\"*\",\"Action\":\"s3:*\","
                      "\"Resource\":\"arn:aws:s3:::bkt/${aws:username}\"}}";
    assert_int_equal(eval(old, true, 0, "s3:GetObject", "arn:aws:s3:::bkt/${aws:username}", NULL),
                     S3_POL_ALLOW);
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_policy *pol;
    const char *why;
    const char *pub = ST("{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\","
                         "\"Resource\":\"*\"}");
    const char *ipd = COND("{\"IpAddress\":{\"aws:SourceIp\":\"10.0.0.0/8\"}}");
    const char *acct = ST("{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"acme\"},"
                          "\"Action\":\"s3:GetObject\",\"Resource\":\"*\"}");
    assert_int_equal(s3__policy_parse(&a, pub, strlen(pub), &ENV, &pol, &why), 0);
    assert_true(s3__policy_public(pol));
    assert_int_equal(s3__policy_parse(&a, ipd, strlen(ipd), &ENV, &pol, &why), 0);
    assert_false(s3__policy_public(pol));
    assert_int_equal(s3__policy_parse(&a, acct, strlen(acct), &ENV, &pol, &why), 0);
    assert_false(s3__policy_public(pol));
    /* RestrictPublicBuckets: the public statement allows nothing any more */
    assert_int_equal(s3__policy_parse(&a, pub, strlen(pub), &ENV, &pol, &why), 0);
    struct s3_policy_req rq = {.anon = true,
                               .action = "s3:GetObject",
                               .resource = OBJ,
                               .public_off = true,
                               .value = value};
    assert_int_equal(s3__policy_eval(&a, pol, &rq), S3_POL_NONE);
    s3__arena_fini(&a);
}

/* The ACL rule: POSIX bits, grants, public grants capped by the others' bits. */
static void test_acl_perms(void **state)
{
    (void)state;
    struct s3_arena a;
    s3__arena_init(&a);
    struct core_attr at = {.uid = 1000, .gid = 1000, .mode = 0644, .type = CORE_REG};
    struct core_principal owner = {.tenant = 1, .uid = 1000, .gid = 1000};
    struct core_principal other = {.tenant = 1, .uid = 1001, .gid = 1001};
    struct core_principal nobody = {.tenant = 1, .uid = 65534, .gid = 65534, .flags = CORE_P_ANON};
    struct s3_acl acl = {0};
    assert_int_equal(s3__acl_perms(&owner, &at, NULL, false, 0), S3_P_FULL);
    assert_int_equal(s3__acl_perms(&other, &at, NULL, false, 0), S3_P_READ);
    assert_int_equal(s3__acl_perms(&nobody, &at, NULL, false, 0), 0); /* 0644 is not public */
    assert_int_equal(s3__acl_perms(&other, &at, NULL, false, S3_ACL_IGNORE_PUBLIC), 0);
    /* public-read: AllUsers READ, while the others' read bit stays */
    struct s3_meta m = {0};
    s3__meta_add(&m, &a, S3_M_ACL, "all", 3, "1", 1);
    s3__meta_add(&m, &a, S3_M_ACL, "uid:1001", 8, "4", 1);
    s3__acl_load(&acl, &a, &m);
    assert_int_equal(s3__acl_perms(&nobody, &at, &acl, false, 0), S3_P_READ);
    assert_int_equal(s3__acl_perms(&other, &at, &acl, false, 0), S3_P_READ | S3_P_READ_ACP);
    at.mode = 0640; /* a chmod o-r over NFS takes the public grant back */
    assert_int_equal(s3__acl_perms(&nobody, &at, &acl, false, 0), 0);
    assert_int_equal(s3__acl_perms(&other, &at, &acl, false, 0), S3_P_READ_ACP);
    /* the mode an ACL gives */
    assert_int_equal(s3__acl_mode(&acl, false), 0644);
    assert_int_equal(s3__acl_mode(&acl, true), 0755);
    struct s3_acl none = {0};
    assert_int_equal(s3__acl_mode(&none, true), 0700);
    s3__arena_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation), cmocka_unit_test(test_effects),
        cmocka_unit_test(test_conditions), cmocka_unit_test(test_variables_and_public),
        cmocka_unit_test(test_acl_perms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
