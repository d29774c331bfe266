/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the lifecycle configuration parser and writer (s3_lc.c)
 * on raw bytes, as PutBucketLifecycleConfiguration reads them. A document the
 * parser accepts is written in its canonical form, which must parse again
 * and write the same bytes (what is stored is always readable: the worker
 * and GET parse it back); each rule is then matched and timed against a few
 * objects without crashing, and its Transitions checked against a few remote
 * tiers (s3__lc_check_tier: every refusal says why, with an S3 code).
 * Input: the document. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

static struct evbuffer *canonical(const struct s3_lc *lc)
{
    struct evbuffer *b = evbuffer_new();
    if (!b)
        abort();
    s3__lc_xml(lc, b);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s3_arena a;
    struct s3_lc lc, again;
    const char *why = NULL;
    s3__arena_init(&a);
    int rc = s3__lc_parse(&a, (const char *)data, size, &lc, &why);
    if (rc == 0) {
        if (lc.n == 0 || lc.n > S3_LC_RULES_MAX)
            __builtin_trap();
        struct evbuffer *b1 = canonical(&lc);
        size_t n1 = evbuffer_get_length(b1);
        const char *d1 = (const char *)evbuffer_pullup(b1, (ev_ssize_t)n1);
        if (s3__lc_parse(&a, d1, n1, &again, &why) != 0 || again.n != lc.n)
            __builtin_trap();
        struct evbuffer *b2 = canonical(&again);
        size_t n2 = evbuffer_get_length(b2);
        if (n2 != n1 || memcmp(evbuffer_pullup(b2, (ev_ssize_t)n2), d1, n1) != 0)
            __builtin_trap();
        for (size_t i = 0; i < lc.n; i++) {
            volatile bool sink = s3__lc_match(&lc.rules[i], "tmp/a", 5, 100, NULL);
            sink = s3__lc_match(&lc.rules[i], "", 0, UINT64_MAX, NULL);
            sink = s3__lc_due(0, lc.rules[i].exp_days, 1 << 30, 86400);
            sink = s3__lc_due(1, lc.rules[i].nc_days, 0, 2);
            (void)sink;
        }
        /* the Transitions against a remote tier's class: an answer that says why */
        static const char *const tiers[] = {NULL, "GLACIER", "STANDARD_IA"};
        for (size_t i = 0; i < 6; i++) {
            enum s3_err e = S3E_NONE;
            const char *tw = NULL;
            int tr = s3__lc_check_tier(&lc, tiers[i % 3], i >= 3, &e, &tw);
            if (tr != 0 &&
                (!tw || (tr != SRV_ENOTSUPP && tr != -EINVAL) ||
                 (tr == -EINVAL && e != S3E_INVALID_STORAGE_CLASS && e != S3E_INVALID_REQUEST)))
                __builtin_trap();
            if (tr == 0 && s3__lc_has_transition(&lc) && (!tiers[i % 3] || i >= 3))
                __builtin_trap(); /* a Transition needs a tier and no versioning */
        }
        evbuffer_free(b1);
        evbuffer_free(b2);
    } else if (!why || (rc != SRV_EBADREQ && rc != -EINVAL)) {
        __builtin_trap(); /* a refusal always says why, as MalformedXML or InvalidArgument */
    }
    s3__arena_fini(&a);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("s3_lifecycle", 20000);
}
#endif
