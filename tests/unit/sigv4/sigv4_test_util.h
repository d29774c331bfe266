/* SPDX-License-Identifier: Apache-2.0
 * sigv4_test_util: the aws-chunked example of the AWS SigV4 streaming
 * documentation (a 66,560-byte PUT of 'a's in three signed chunks), shared
 * by test_srv_sigv4_auth (the decoder) and test_s3_sigv4 (through s3api).
 * Header-only; include it once per test. */
#ifndef SIGV4_TEST_UTIL_H
#define SIGV4_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The example's secret key. */
static const char EX_SECRET[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/* A payload callback that counts the bytes and those that are not 'a'. */
struct sink {
    size_t n;
    int bad;
};

static inline int sink_cb(void *arg, const char *d, size_t len)
{
    struct sink *s = arg;
    for (size_t i = 0; i < len; i++)
        if (d[i] != 'a')
            s->bad++;
    s->n += len;
    return 0;
}

/* The example body (@p tamper: one payload byte changed); the caller frees it. */
static inline char *chunk_body(size_t *len, int tamper)
{
    char *b = malloc(70000), *p = b;
    p += sprintf(p, "10000;chunk-signature="
                    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n");
    memset(p, 'a', 65536);
    if (tamper)
        p[100] = 'b';
    p += 65536;
    p += sprintf(p, "\r\n400;chunk-signature="
                    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n");
    memset(p, 'a', 1024);
    p += 1024;
    p += sprintf(p, "\r\n0;chunk-signature="
                    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n");
    *len = (size_t)(p - b);
    return b;
}

#endif
