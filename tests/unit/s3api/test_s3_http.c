/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_http.c: the request parser (pauses, pipelining,
 * chunked bodies, limits, malformed input) and the pure helpers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "s3_internal.h"

struct body {
    char buf[4096];
    size_t n;
    int refuse;
};

static int body_cb(void *arg, const char *d, size_t len)
{
    struct body *b = arg;
    if (b->refuse)
        return -1;
    assert_true(b->n + len < sizeof(b->buf));
    memcpy(b->buf + b->n, d, len);
    b->n += len;
    return 0;
}

/* Feed @p raw in pieces of @p step; returns the sequence of events as letters. */
static void drive(const char *raw, size_t len, size_t step, char *events, struct body *b,
                  size_t maxhdr)
{
    struct s3_http h;
    s3__http_init(&h, maxhdr, body_cb, b);
    size_t off = 0, ne = 0;
    bool again = false;
    while (off < len || again) {
        again = false;
        size_t n = len - off < step ? len - off : step, used = 0;
        int ev = s3__http_feed(&h, raw + off, n, &used);
        off += used;
        if (ev == S3_HTTP_HEADERS) {
            events[ne++] = 'H';
            events[ne++] = h.req->method[0];
            s3__http_resume(&h);
            again = true;
        } else if (ev == S3_HTTP_DONE) {
            events[ne++] = 'D';
            s3__http_next(&h);
        } else if (ev < 0) {
            events[ne++] = ev == S3_HTTP_ETOOBIG ? 'T' : ev == S3_HTTP_EBODY ? 'B' : 'E';
            break;
        }
    }
    events[ne] = '\0';
    s3__http_fini(&h);
}

static void test_pipelined(void **state)
{
    (void)state;
    static const char raw[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                              "PUT /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                              "DELETE /c HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t steps[] = {1, 3, 17, sizeof(raw)};
    for (size_t i = 0; i < 4; i++) {
        char ev[64];
        struct body b = {0};
        drive(raw, sizeof(raw) - 1, steps[i], ev, &b, 0);
        assert_string_equal(ev, "HGDHPDHDD");
        assert_int_equal(b.n, 5);
        assert_memory_equal(b.buf, "hello", 5);
    }
}

static void test_chunked_body(void **state)
{
    (void)state;
    static const char raw[] = "PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    char ev[64];
    struct body b = {0};
    drive(raw, sizeof(raw) - 1, 2, ev, &b, 0);
    assert_string_equal(ev, "HPD");
    assert_int_equal(b.n, 11);
    assert_memory_equal(b.buf, "hello world", 11);
}

static void test_limits_and_garbage(void **state)
{
    (void)state;
    char ev[64];
    struct body b = {0};
    char big[4096];
    int n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: x\r\nX-Long: ");
    memset(big + n, 'a', 2000);
    memcpy(big + n + 2000, "\r\n\r\n", 5);
    drive(big, strlen(big), 100, ev, &b, 1024);
    assert_string_equal(ev, "T");
    drive(big, strlen(big), 100, ev, &b, 8192);
    assert_string_equal(ev, "HGD");
    drive("GARBAGE\r\n\r\n", 11, 64, ev, &b, 0);
    assert_string_equal(ev, "E");
    drive("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 55, 64, ev, &b, 0);
    assert_string_equal(ev, "E");
    drive("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, 64, ev, &b, 0);
    assert_string_equal(ev, "HGD");
    b.refuse = 1;
    drive("PUT / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", 40, 64, ev, &b, 0);
    assert_string_equal(ev, "HPB");
}

static void test_request_fields(void **state)
{
    (void)state;
    static const char raw[] = "PUT /bkt/k%20y?uploadId=abc&partNumber=3&tagging HTTP/1.1\r\n"
                              "Host: example\r\nX-Amz-Meta-A:  v1 \r\nExpect: 100-continue\r\n"
                              "Content-Length: 10\r\n\r\n";
    struct s3_http h;
    size_t used;
    s3__http_init(&h, 0, NULL, NULL);
    assert_int_equal(s3__http_feed(&h, raw, sizeof(raw) - 1, &used), S3_HTTP_HEADERS);
    assert_int_equal(used, sizeof(raw) - 1);
    struct s3_req *r = h.req;
    assert_string_equal(r->method, "PUT");
    assert_string_equal(r->raw_path, "/bkt/k%20y");
    assert_string_equal(s3__req_param(r, "uploadId"), "abc");
    assert_string_equal(s3__req_param(r, "partNumber"), "3");
    assert_true(s3__req_has_param(r, "tagging"));
    assert_false(s3__req_has_param(r, "acl"));
    assert_string_equal(s3__req_header(r, "x-amz-meta-a"), "v1");
    assert_true(r->expect_continue);
    assert_true(r->has_clen);
    assert_int_equal(r->content_length, 10);
    assert_true(r->keep_alive);
    /* cut short: the client closed mid-body */
    s3__http_resume(&h);
    assert_int_equal(s3__http_feed(&h, "abc", 3, &used), S3_HTTP_MORE);
    assert_int_equal(s3__http_finish(&h), S3_HTTP_EBAD);
    s3__http_fini(&h);
}

/* Parameter lookups skip the scan when no name starts with a byte of the
 * same low six bits: names that share those bits with a present one ('!'
 * and 'a', '=' and '}') are still compared in full, decoded names count by
 * their decoded first byte, an empty name is found, and a request without a
 * query finds nothing. */
static void test_param_first_byte(void **state)
{
    (void)state;
    static const char raw[] = "GET /b/k?acl&%41bc=1&=e&}x=2&X-Amz-Date=d HTTP/1.1\r\n"
                              "Host: h\r\n\r\n";
    struct s3_http h;
    size_t used;
    s3__http_init(&h, 0, NULL, NULL);
    assert_int_equal(s3__http_feed(&h, raw, sizeof(raw) - 1, &used), S3_HTTP_HEADERS);
    struct s3_req *r = h.req;
    assert_true(s3__req_has_param(r, "acl"));
    assert_false(s3__req_has_param(r, "!cl")); /* 'a' & 63 == '!' & 63 */
    assert_false(s3__req_has_param(r, "ab"));
    assert_string_equal(s3__req_param(r, "Abc"), "1");
    assert_false(s3__req_has_param(r, "%41bc"));
    assert_string_equal(s3__req_param(r, ""), "e");
    assert_string_equal(s3__req_param(r, "}x"), "2"); /* '}' & 63 == '=' & 63 */
    assert_false(s3__req_has_param(r, "=x"));
    assert_string_equal(s3__req_param(r, "X-Amz-Date"), "d");
    assert_false(s3__req_has_param(r, "X-Amz-Expires"));
    assert_false(s3__req_has_param(r, "versionId"));
    assert_false(s3__req_has_param(r, "response-content-type"));
    s3__http_fini(&h);
    static const char bare[] = "GET /b/k HTTP/1.1\r\nHost: h\r\n\r\n";
    s3__http_init(&h, 0, NULL, NULL);
    assert_int_equal(s3__http_feed(&h, bare, sizeof(bare) - 1, &used), S3_HTTP_HEADERS);
    assert_false(s3__req_has_param(h.req, ""));
    assert_false(s3__req_has_param(h.req, "acl"));
    s3__http_fini(&h);
}

static void test_helpers(void **state)
{
    (void)state;
    struct s3_arena a;
    s3__arena_init(&a);
    size_t n;
    char *d = s3__url_decode(&a, "a%20b%2Fc+d", 11, &n);
    assert_string_equal(d, "a b/c+d");
    assert_null(s3__url_decode(&a, "bad%2", 5, &n));
    assert_null(s3__url_decode(&a, "bad%zz", 6, &n));
    assert_string_equal(s3__url_encode(&a, "a b/~é", 7, true), "a%20b/~%C3%A9");
    assert_string_equal(s3__url_encode(&a, "a/b", 3, false), "a%2Fb");
    char b64[16];
    unsigned char out[16];
    s3__b64_encode((const unsigned char *)"hello", 5, b64);
    assert_string_equal(b64, "aGVsbG8=");
    assert_int_equal(s3__b64_decode("aGVsbG8=", 8, out), 5);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(s3__b64_decode("aGVsbG8", 7, out), -1);
    assert_int_equal(s3__b64_decode("a=Vs", 4, out), -1);
    time_t t;
    assert_int_equal(srv_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    assert_int_equal((long long)t, 784111777LL);
    assert_int_equal(srv_http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    assert_int_equal((long long)t, 784111777LL);
    assert_int_equal(srv_http_date_parse("Sun Nov  6 08:49:37 1994", &t), 0);
    assert_int_equal((long long)t, 784111777LL);
    assert_int_equal(srv_http_date_parse("yesterday", &t), -EINVAL);
    /* RFC 2822 forms AWS accepts in Date: numeric zones (botocore sends +0000 / -0000) */
    static const char *const same[] = {
        "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 06 Nov 1994 08:49:37 -0000",
        "06 Nov 1994 08:49:37 GMT",        "Sun, 06 Nov 1994 09:49:37 +0100",
        "Sun, 06 Nov 1994 03:19:37 -0530", "Sun, 6 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 UT",    "Sun, 06 Nov 1994 08:49:37 Z",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        t = 0;
        assert_int_equal(srv_http_date_parse(same[i], &t), 0);
        assert_int_equal((long long)t, 784111777LL);
    }
    assert_int_equal(srv_http_date_parse("Sun, 06 Nov 1994 08:49 +0000", &t), 0);
    assert_int_equal((long long)t, 784111740LL);
    assert_int_equal(srv_http_date_parse("Sun, 06 Nov 1994 08:49:37 +2500", &t), -EINVAL);
    assert_int_equal(srv_http_date_parse("Sun, 06 Nov 1994 08:49:37 PST8", &t), -EINVAL);
    assert_int_equal(srv_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT junk", &t), -EINVAL);
    char ds[30];
    s3__http_date_fmt(784111777, ds);
    assert_string_equal(ds, "Sun, 06 Nov 1994 08:49:37 GMT");
    /* the per-thread memo of recent dates gives each time its own string */
    static const struct {
        time_t t;
        const char *s;
    } dates[] = {
        {0, "Thu, 01 Jan 1970 00:00:00 GMT"},
        {1795253400, "Sat, 21 Nov 2026 09:30:00 GMT"},
        {784111777, "Sun, 06 Nov 1994 08:49:37 GMT"},
        {951782400, "Tue, 29 Feb 2000 00:00:00 GMT"},
        {1795253401, "Sat, 21 Nov 2026 09:30:01 GMT"},
    };
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
            s3__http_date_fmt(dates[i].t, ds);
            assert_string_equal(ds, dates[i].s);
            s3__http_date_fmt(dates[i].t, ds);
            assert_string_equal(ds, dates[i].s);
        }
    char num[24];
    assert_int_equal(s3__u64_dec(num, 0), 1);
    assert_string_equal(num, "0");
    assert_int_equal(s3__u64_dec(num, 4096), 4);
    assert_string_equal(num, "4096");
    assert_int_equal(s3__u64_dec(num, UINT64_MAX), 20);
    assert_string_equal(num, "18446744073709551615");
    struct timespec ts = {784111777, 123456789};
    char iso[25];
    s3__iso_date_fmt(&ts, iso);
    assert_string_equal(iso, "1994-11-06T08:49:37.123Z");
    assert_int_equal(srv_sigv4_date_parse("19941106T084937Z", &t), 0);
    assert_int_equal((long long)t, 784111777LL);
    assert_int_equal(srv_sigv4_date_parse("19941306T084937Z", &t), -EINVAL);
    char *p = s3__arena_printf(&a, "%d-%s", 42, "x");
    assert_string_equal(p, "42-x");
    void *big = s3__arena_alloc(&a, 100000);
    assert_non_null(big);
    s3__arena_fini(&a);
}

/* Framing events as text: "C<size><ext>|", "E|", "T<name>=<value>|". */
struct frames {
    char log[512];
    size_t n;
    int refuse_trailer;
};

static int frame_log(void *arg, const struct s3_http_frame *f)
{
    struct frames *fr = arg;
    size_t room = sizeof(fr->log) - fr->n;
    int k = 0;
    if (f->kind == S3_FRAME_CHUNK)
        k = snprintf(fr->log + fr->n, room, "C%llu%s|", (unsigned long long)f->size, f->ext);
    else if (f->kind == S3_FRAME_CHUNK_END)
        k = snprintf(fr->log + fr->n, room, "E|");
    else
        k = snprintf(fr->log + fr->n, room, "T%s=%s|", f->name, f->value);
    fr->n += (size_t)k;
    return f->kind == S3_FRAME_TRAILER && fr->refuse_trailer;
}

static int frame_body(void *arg, const char *d, size_t len)
{
    (void)arg;
    (void)d;
    (void)len;
    return 0;
}

/* Drive @p raw as the connection does: the request is taken away from the
 * parser at its headers, so body, extensions and trailers are parsed with no
 * request in the parser. @return the events as letters. */
static void drive_taken(const char *raw, size_t step, struct frames *fr, bool with_cb, char *ev,
                        size_t maxhdr)
{
    struct s3_http h;
    s3__http_init(&h, maxhdr, frame_body, fr);
    if (with_cb)
        s3__http_set_frame_cb(&h, frame_log);
    size_t off = 0, len = strlen(raw), ne = 0;
    struct s3_req *taken = NULL;
    bool again = false;
    while (off < len || again) {
        again = false;
        size_t n = len - off < step ? len - off : step, used = 0;
        int e = s3__http_feed(&h, raw + off, n, &used);
        off += used;
        if (e == S3_HTTP_HEADERS) {
            ev[ne++] = 'H';
            taken = s3__http_take_req(&h);
            assert_non_null(taken);
            assert_null(h.req);
            s3__http_resume(&h);
            again = true;
        } else if (e == S3_HTTP_DONE) {
            ev[ne++] = 'D';
            s3__req_free(taken);
            taken = NULL;
            s3__http_next(&h);
            again = true;
        } else if (e < 0) {
            ev[ne++] = e == S3_HTTP_ETOOBIG ? 'T' : e == S3_HTTP_EBODY ? 'B' : 'E';
            break;
        }
    }
    ev[ne] = '\0';
    s3__req_free(taken);
    s3__http_fini(&h);
}

static void test_trailers_after_handoff(void **state)
{
    (void)state;
    static const char raw[] = "PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5;x;chunk-signature=abc\r\nhello\r\n0;last=\"q\"\r\n"
                              "X-Trailer:  v \r\nX-Empty:\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"
                              "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t steps[] = {1, 2, 7, sizeof(raw)};
    for (size_t i = 0; i < 4; i++) {
        char ev[16];
        struct frames fr = {0};
        drive_taken(raw, steps[i], &fr, true, ev, 0);
        assert_string_equal(ev, "HDHD");
        assert_string_equal(fr.log, "C5;x;chunk-signature=abc|E|C0;last=\"q\"|Tx-trailer=v|"
                                    "Tx-empty=|Tx-amz-checksum-crc32=NhCmhg==|E|");
        /* without a frame callback the trailers are parsed and dropped */
        struct frames none = {0};
        drive_taken(raw, steps[i], &none, false, ev, 0);
        assert_string_equal(ev, "HDHD");
        assert_int_equal(none.n, 0);
    }
    /* a refused trailer stops the body like a refused body byte */
    char ev[16];
    struct frames fr = {.refuse_trailer = 1};
    drive_taken(raw, 5, &fr, true, ev, 0);
    assert_string_equal(ev, "HB");
    /* trailers have a budget of their own, as large as the headers' */
    char big[2048];
    int n = snprintf(big, sizeof(big),
                     "PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     "X-Pad: %0400d\r\n\r\n1\r\na\r\n0\r\nX-T: %0400d\r\n\r\n",
                     0, 0);
    assert_true(n > 0 && (size_t)n < sizeof(big));
    drive_taken(big, 64, &fr, false, ev, 512);
    assert_string_equal(ev, "HD");
    snprintf(big, sizeof(big),
             "PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "1\r\na\r\n0\r\nX-T: %0600d\r\n\r\n",
             0);
    drive_taken(big, 64, &fr, false, ev, 512);
    assert_string_equal(ev, "HT");
    /* chunk extensions longer than a frame callback takes */
    snprintf(big, sizeof(big),
             "PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "1;e=%0300d\r\na\r\n0\r\n\r\n",
             0);
    struct frames fe = {0};
    drive_taken(big, 64, &fe, true, ev, 0);
    assert_string_equal(ev, "HE");
    drive_taken(big, 64, &fe, false, ev, 0);
    assert_string_equal(ev, "HD");
}

/* Reference for the decoder's contract, character by character: quartets of
 * the standard alphabet, '=' only in the last quartet's last two places. */
static long ref_b64_decode(const char *in, size_t len, unsigned char *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len % 4)
        return -1;
    long j = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = in[i + k];
            const char *p = c ? strchr(A, c) : NULL;
            if (c == '=' && i + 4 == len && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!p || pad)
                return -1;
            v = (v << 6) | (uint32_t)(p - A);
        }
        out[j++] = (unsigned char)(v >> 16);
        if (pad < 2)
            out[j++] = (unsigned char)(v >> 8);
        if (pad < 1)
            out[j++] = (unsigned char)v;
    }
    return j;
}

static void test_base64(void **state)
{
    (void)state;
    static const char *const rfc[][2] = {
        {"", ""},          {"f", "Zg=="},         {"fo", "Zm8="},     {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    char enc[64];
    unsigned char dec[64];
    for (size_t i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
        size_t n = strlen(rfc[i][0]);
        s3__b64_encode((const unsigned char *)rfc[i][0], n, enc);
        assert_string_equal(enc, rfc[i][1]);
        assert_int_equal(s3__b64_decode(enc, strlen(enc), dec), n);
        assert_memory_equal(dec, rfc[i][0], n);
    }
    s3__b64_encode((const unsigned char *)"\xfb\xff", 2, enc);
    assert_string_equal(enc, "+/8=");
    /* non-canonical trailing bits are accepted, as before */
    assert_int_equal(s3__b64_decode("Zh==", 4, dec), 1);
    assert_int_equal(dec[0], 'f');
    static const char *const bad[] = {"Zg=",  "Zg",   "Z===", "====",     "Zm=v", "Zm9v=",
                                      " Zm9v", "Zm9v ", "Zm9\n", "Zg==Zg==", "Zm9-", "Zm9_",
                                      "Zm9v====", "=Zm9", "Zm9v\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(s3__b64_decode(bad[i], strlen(bad[i]), dec), -1);
    assert_int_equal(s3__b64_decode("Zm\0v", 4, dec), -1);
    /* random strings over the alphabet, '=' and a few strangers, against the reference */
    static const char pool[] = "ABYZabyz0189+/====  -_.";
    uint64_t r = 88172645463325252ull;
    for (int it = 0; it < 200000; it++) {
        char in[16];
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        size_t len = (size_t)(r % 13);
        for (size_t k = 0; k < len; k++)
            in[k] = pool[(r >> (4 + 4 * (k % 14))) % (sizeof(pool) - 1)];
        unsigned char a[16], b[16];
        long want = ref_b64_decode(in, len, b);
        long got = s3__b64_decode(in, len, a);
        assert_int_equal(got, want);
        if (want > 0)
            assert_memory_equal(a, b, (size_t)want);
    }
    /* round trips of every length up to 200 */
    unsigned char raw[200], back[200];
    char text[300];
    for (size_t n = 0; n <= sizeof(raw); n++) {
        for (size_t k = 0; k < n; k++)
            raw[k] = (unsigned char)(k * 37 + n);
        s3__b64_encode(raw, n, text);
        assert_int_equal(strlen(text), 4 * ((n + 2) / 3));
        assert_int_equal(s3__b64_decode(text, strlen(text), back), n);
        assert_memory_equal(back, raw, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_chunked_body),
        cmocka_unit_test(test_limits_and_garbage),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_param_first_byte),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_trailers_after_handoff),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
