/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: SigV4 parsing, canonicalization and verifying (sigv4/,
 * through s3api's glue s3_sigv4.c) and the aws-chunked decoder
 * (sigv4/srv_sigv4_chunked.c). Input: an HTTP request head (up to the first
 * blank line) whose Authorization header or X-Amz-* query is parsed,
 * canonicalized and verified; the bytes after it are decoded as an
 * aws-chunked body in the mode picked by the input's first byte, with the
 * request's signing key. */
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
