/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: SigV4 parsing, canonicalization and verifying (sigv4/,
 * through s3api's glue s3_sigv4.c) and the aws-chunked decoder
 * (sigv4/srv_sigv4_chunked.c). Input: an HTTP request head (up to the first
 * blank line) whose Authorization header or X-Amz-* query is parsed,
 * canonicalized and verified; the bytes after it are decoded as an
 * aws-chunked body in the mode picked by the input's first byte, with the
 * request's signing key. The same head is also taken as a SigV2 request
 * (sigv4/srv_sigv2.c): its "AWS AKID:SIG" header or AWSAccessKeyId query, its
 * string to sign (with and without a virtual-host bucket and a trailing '/')
 * and its verification, and its Date headers through the HTTP date parser. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "s3_internal.h"

static int sink(void *arg, const char *data, size_t len)
{
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum srv_sigv4_chunk_mode mode = (enum srv_sigv4_chunk_mode)(data[0] % 3 + 1);
    const char *p = (const char *)data + 1;
    size_t len = size - 1, used = 0;
    struct s3_http h;
    s3__http_init(&h, 16384, NULL, NULL);
    if (s3__http_feed(&h, p, len, &used) != S3_HTTP_HEADERS)
        goto out;
    struct s3_req *r = h.req;
    struct srv_sigv4_auth sig;
    const char *authz = s3__req_header(r, "authorization");
    int rc = authz ? srv_sigv4_parse_header(authz, &sig) : s3__sigv4_parse_query(r, &sig);
    unsigned char key[32] = {0};
    if (rc == 0) {
        const char *why = NULL;
        char *canon = s3__sigv4_canonical(&r->arena, r, &sig);
        if (canon) {
            char out[65];
            srv_sigv4_auth_sign(key, &sig, canon, out);
        }
        s3__sigv4_verify(&r->arena, r, &sig, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 1369353600,
                         key, &why);
    }
    /* SigV2: the legacy header or presigned query, and the HTTP date forms */
    char akey[129], v2sig[65];
    time_t t;
    const char *why = NULL;
    if (authz && srv_sigv2_parse_header(authz, akey, v2sig) == 0) {
        if (strchr(akey, ':') || !*v2sig)
            __builtin_trap();
        s3__sigv2_verify(&r->arena, r, NULL, data[0] & 1, v2sig, NULL, "secret", 1369353600, &why);
    }
    const char *ex = s3__req_param(r, "Expires"), *qs = s3__req_param(r, "Signature");
    if (ex && qs)
        s3__sigv2_verify(&r->arena, r, "vbucket", data[0] & 2, qs, ex, "secret", 1369353600, &why);
    char *sts = s3__sigv2_string(&r->arena, r, (data[0] & 4) ? "vb" : NULL, NULL, data[0] & 8);
    if (sts && strncmp(sts, r->method, strlen(r->method)) != 0)
        __builtin_trap();
    if (srv_http_date_parse(s3__req_header(r, "date"), &t) == 0 && t < 0)
        __builtin_trap();
    struct srv_sigv4_chunked d;
    srv_sigv4_chunked_init(&d, mode, key, &sig, sink, NULL);
    /* feed the rest in two halves to exercise state carried across calls */
    size_t rest = len - used, half = rest / 2;
    if (srv_sigv4_chunked_feed(&d, p + used, half) == 0)
        srv_sigv4_chunked_feed(&d, p + used + half, rest - half);
    srv_sigv4_chunked_fini(&d);
out:
    s3__http_fini(&h);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("sigv4", 20000);
}
#endif
