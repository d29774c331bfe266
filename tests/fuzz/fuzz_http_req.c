/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the S3 front end's request path on raw bytes — the llhttp
 * request parser (s3_http.c) fed in fuzzer-chosen slices with its pauses,
 * pipelining and body delivery, then routing (s3_router.c) and SigV4 parsing
 * and verifying (sigv4/, through s3api's glue s3_sigv4.c) of every request
 * whose headers parse.
 * Like the connection (s3_conn.c), it takes each request away from the parser
 * at its headers, so the body, chunk extensions and trailer fields are parsed
 * with no request left in the parser; chunked bodies then also drive the
 * aws-chunked decoder through the HTTP framing (s3__chunked_http_*).
 * Input: byte 0 picks the slice size (bits 2-7) and the aws-chunked mode of
 * chunked bodies (bits 0-1: none, or an enum srv_sigv4_chunk_mode), the rest is the
 * connection's bytes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "s3_internal.h"

struct fuzz_conn {
    struct s3_req *req; /* taken from the parser at its headers */
    int mode;           /* 0: plain bodies; else an enum srv_sigv4_chunk_mode for chunked ones */
    struct srv_sigv4_auth sig;
    struct s3_chunked ck;
    bool ck_on;
    size_t body;
};

static int payload_cb(void *arg, const char *data, size_t len)
{
    (void)data;
    struct fuzz_conn *fc = arg;
    fc->body += len;
    return fc->body > (1u << 20); /* refuse huge bodies like the XML limit does */
}

static int body_cb(void *arg, const char *data, size_t len)
{
    struct fuzz_conn *fc = arg;
    if (!fc->req)
        __builtin_trap(); /* body bytes with no request */
    if (fc->ck_on)
        return s3__chunked_http_data(&fc->ck, data, len) != 0;
    return payload_cb(fc, data, len);
}

static int frame_cb(void *arg, const struct s3_http_frame *f)
{
    struct fuzz_conn *fc = arg;
    if (f->kind == S3_FRAME_CHUNK && !f->ext)
        __builtin_trap();
    if (f->kind == S3_FRAME_TRAILER && (!f->name || !f->value))
        __builtin_trap();
    return fc->ck_on ? s3__chunked_http_frame(&fc->ck, f) != 0 : 0;
}

static void on_headers(struct fuzz_conn *fc)
{
    struct s3_req *r = fc->req;
    struct s3_route rt;
    s3__route_req(&r->arena, r, "s3.test", &rt);
    struct srv_sigv4_auth sig;
    const char *authz = s3__req_header(r, "authorization");
    int rc = authz ? srv_sigv4_parse_header(authz, &sig) : s3__sigv4_parse_query(r, &sig);
    if (rc == 0) {
        unsigned char key[32];
        const char *why;
        s3__sigv4_verify(&r->arena, r, &sig, "secret", 1795253400, key, &why);
    }
    if (fc->mode && r->chunked) {
        static const unsigned char key[32] = {1};
        memset(&fc->sig, 0, sizeof(fc->sig));
        memcpy(fc->sig.signature, "00000000000000000000000000000000"
                                  "00000000000000000000000000000000", 65);
        memcpy(fc->sig.date, "20260101", 9);
        memcpy(fc->sig.amz_date, "20260101T000000Z", 17);
        memcpy(fc->sig.region, "us-east-1", 10);
        memcpy(fc->sig.service, "s3", 3);
        s3__chunked_init(&fc->ck, (enum srv_sigv4_chunk_mode)fc->mode, key, &fc->sig, payload_cb,
                         fc);
        fc->ck_on = true;
    }
}

static void request_done(struct fuzz_conn *fc)
{
    if (fc->ck_on)
        s3__chunked_fini(&fc->ck);
    fc->ck_on = false;
    s3__req_free(fc->req);
    fc->req = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)(data[0] >> 2) + 1;
    struct fuzz_conn fc = {.mode = data[0] & 3};
    const char *p = (const char *)data + 1;
    size_t left = size - 1;
    struct s3_http h;
    s3__http_init(&h, 4096, body_cb, &fc);
    s3__http_set_frame_cb(&h, frame_cb);
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
            fc.req = s3__http_take_req(&h);
            if (!fc.req || h.req)
                __builtin_trap();
            on_headers(&fc);
            s3__http_resume(&h);
            again = true;
        } else if (ev == S3_HTTP_DONE) {
            request_done(&fc);
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
    request_done(&fc);
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
