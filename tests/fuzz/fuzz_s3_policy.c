/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the bucket policy parser and evaluator (s3_policy.c) on
 * raw bytes, as PutBucketPolicy stores a policy and every request of its
 * bucket reads it. A document that parses is evaluated for a matrix of
 * requests (anonymous, a user, another user; object and bucket actions; with
 * and without condition values); each answer must be one of the three, the
 * same twice, and RestrictPublicBuckets may only take Allows away. A policy
 * that parses must parse again when stored (lenient principals) with the
 * same answers. Input: the policy document. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

static int user_by_name(void *arg, const char *name, uint64_t *user)
{
    (void)arg;
    if (strcmp(name, "alice") == 0)
        *user = 5;
    else if (strcmp(name, "bob") == 0)
        *user = 6;
    else
        return -ENOENT;
    return 0;
}

static int uid_by_canonical(void *arg, const char *id, uint32_t *uid)
{
    (void)arg;
    if (strlen(id) != 64 || strspn(id, "a") != 64)
        return -ENOENT;
    *uid = 1000;
    return 0;
}

/* Condition values: present for some keys, absent for the rest. */
static const char *value(void *arg, const char *key)
{
    bool full = *(const bool *)arg;
    if (!full)
        return NULL;
    if (strcmp(key, "aws:sourceip") == 0)
        return "127.0.0.2";
    if (strcmp(key, "aws:securetransport") == 0)
        return "false";
    if (strcmp(key, "aws:currenttime") == 0)
        return "2026-01-01T00:00:00Z";
    if (strcmp(key, "aws:epochtime") == 0 || strcmp(key, "s3:max-keys") == 0)
        return "1000";
    if (strcmp(key, "aws:username") == 0)
        return "alice";
    if (strncmp(key, "s3:existingobjecttag/", 21) == 0)
        return "green";
    return strlen(key) % 2 ? "x" : NULL;
}

static void evaluate(struct s3_arena *a, const struct s3_policy *pol, enum s3_pol out[16])
{
    static const char *const ACTIONS[] = {"s3:GetObject", "s3:PutObject", "s3:ListBucket",
                                          "s3:GetBucketPolicy"};
    static const char *const RES[] = {"arn:aws:s3:::fuzz-bucket/a/b", "arn:aws:s3:::fuzz-bucket"};
    int n = 0;
    for (int who = 0; who < 2; who++)
        for (int ac = 0; ac < 4; ac++)
            for (int full = 0; full < 2; full++) {
                bool f = full;
                struct s3_policy_req rq = {.anon = who == 0,
                                           .user = 5,
                                           .uid = 1000,
                                           .action = ACTIONS[ac],
                                           .resource = RES[ac >= 2],
                                           .value = value,
                                           .arg = &f};
                enum s3_pol p = s3__policy_eval(a, pol, &rq);
                if (p != S3_POL_NONE && p != S3_POL_ALLOW && p != S3_POL_DENY)
                    __builtin_trap();
                if (s3__policy_eval(a, pol, &rq) != p)
                    __builtin_trap();
                rq.public_off = true;
                enum s3_pol q = s3__policy_eval(a, pol, &rq);
                if (q != p && !(p == S3_POL_ALLOW && q == S3_POL_NONE))
                    __builtin_trap();
                out[n++] = p;
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_policy_env env = {.bucket = "fuzz-bucket",
                                .tenant = 7,
                                .tenant_name = "fz",
                                .user_by_name = user_by_name,
                                .uid_by_canonical = uid_by_canonical};
    struct s3_policy *pol = NULL, *again = NULL;
    const char *why = NULL;
    int rc = s3__policy_parse(&a, (const char *)data, size, &env, &pol, &why);
    if (rc != 0 && (rc != -EINVAL || !why || !*why || pol))
        __builtin_trap();
    if (rc == 0) {
        enum s3_pol first[16], second[16];
        evaluate(&a, pol, first);
        (void)s3__policy_public(pol);
        env.stored = true;
        if (s3__policy_parse(&a, (const char *)data, size, &env, &again, &why) != 0)
            __builtin_trap();
        evaluate(&a, again, second);
        if (memcmp(first, second, sizeof(first)) != 0)
            __builtin_trap();
    }
    s3__arena_fini(&a);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("s3_policy", 20000);
}
#endif
