/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the S3 front end's request path on raw bytes — the llhttp
 * request parser (s3_http.c) fed in fuzzer-chosen slices with its pauses,
 * pipelining and body delivery, then routing (s3_router.c) and SigV4 parsing
 * and canonicalization (s3_sigv4.c) of every request whose headers parse.
 * Input: byte 0 picks the slice size, the rest is the connection's bytes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "s3_internal.h"

static int body_cb(void *arg, const char *data, size_t len)
{
    size_t *n = arg;
    *n += len;
    return *n > (1u << 20); /* refuse huge bodies like the XML limit does */
}

static void on_headers(struct s3_req *r)
{
    struct s3_route rt;
    s3__route_req(&r->arena, r, "s3.test", &rt);
    struct s3_sigv4 sig = {.arena = &r->arena};
    const char *authz = s3__req_header(r, "authorization");
    int rc = authz ? s3__sigv4_parse_header(authz, &sig) : s3__sigv4_parse_query(r, &sig);
    if (rc == 0) {
        unsigned char key[32];
        const char *why;
        s3__sigv4_verify(&r->arena, r, &sig, "secret", 1795253400, key, &why);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)(data[0] % 97) + 1;
    const char *p = (const char *)data + 1;
    size_t left = size - 1, body = 0;
    struct s3_http h;
    s3__http_init(&h, 4096, body_cb, &body);
    bool again = false;
    while (left || again) {
        again = false;
        size_t n = left < step ? left : step, used = 0;
        int ev = s3__http_feed(&h, p, n, &used);
        if (used > n)
            __builtin_trap();
        p += used;
        left -= used;
        if (ev == S3_HTTP_HEADERS) {
            on_headers(h.req);
            s3__http_resume(&h);
            again = true;
        } else if (ev == S3_HTTP_DONE) {
            s3__http_next(&h);
            again = true;
        } else if (ev < 0) {
            break;
        } else if (used == 0 && n == 0) {
            break;
        }
    }
    if (!left)
        s3__http_finish(&h);
    s3__http_fini(&h);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("http_req", 20000);
}
#endif
