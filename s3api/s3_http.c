/* SPDX-License-Identifier: Apache-2.0
 * s3_http: the HTTP/1.1 request parser of the S3 front end, on llhttp, plus
 * the small pure helpers every other s3api file needs (arena, query strings,
 * percent-encoding, base64, dates).
 *
 * The parser works on plain byte buffers so the fuzz target and unit tests can
 * drive it without sockets: s3__http_feed() consumes bytes, pauses once the
 * headers are complete (so the caller can authenticate and route before any
 * body byte is accepted) and again when the message is complete (so pipelined
 * requests are answered strictly in order). Request line plus headers are
 * bounded by max_header_bytes (over: S3_HTTP_ETOOBIG, answered 431).
 * Thread: a parser belongs to one connection; all functions are reentrant. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "s3_internal.h"

/* ---------------------------------------------------------------- arena */

struct s3_arena_blk {
    struct s3_arena_blk *next;
    size_t used, cap;
    max_align_t data[];
};

#define ARENA_BLK 8192

void s3__arena_init(struct s3_arena *a)
{
    a->head = NULL;
    a->own = NULL;
}

void s3__arena_fini(struct s3_arena *a)
{
    struct s3_arena_blk *b = a->head;
    while (b) {
        struct s3_arena_blk *n = b->next;
        if (b != a->own)
            free(b);
        b = n;
    }
    a->head = NULL;
}

size_t s3__arena_bytes(const struct s3_arena *a)
{
    size_t n = 0;
    for (const struct s3_arena_blk *b = a->head; b; b = b->next)
        n += b->cap;
    return n;
}

/* @p n bytes from @p a, not zeroed (for text about to be written over). */
static void *arena_raw(struct s3_arena *a, size_t n)
{
    size_t al = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    struct s3_arena_blk *b = a->head;
    if (!b || b->cap - b->used < al) {
        size_t cap = al > ARENA_BLK ? al : ARENA_BLK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            abort();
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += al;
    return p;
}

void *s3__arena_alloc(struct s3_arena *a, size_t n)
{
    void *p = arena_raw(a, n);
    memset(p, 0, n);
    return p;
}

char *s3__arena_strndup(struct s3_arena *a, const char *s, size_t n)
{
    char *p = arena_raw(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *s3__arena_printf(struct s3_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = s3__arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

/* ---------------------------------------------------------------- request accessors */

/* Lookups compare the first byte before calling strcmp: a request's handful
 * of names mostly differ there (X-Amz-* parameters against the lower-case
 * subresource names the router asks about, dozens per request). A parameter
 * lookup first asks param_first whether any name starts with a byte like
 * the wanted name's (same low six bits): the router's subresources and a
 * GET's response-* overrides, absent from most requests, then cost no scan. */
const char *s3__req_header(const struct s3_req *r, const char *name)
{
    for (size_t i = 0; i < r->nhdrs; i++)
        if (r->hdrs[i].name[0] == name[0] && strcmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].val;
    return NULL;
}

const char *s3__req_param(const struct s3_req *r, const char *name)
{
    if (!(r->param_first >> ((unsigned char)name[0] & 63) & 1))
        return NULL;
    for (size_t i = 0; i < r->nparams; i++)
        if (r->params[i].name[0] == name[0] && strcmp(r->params[i].name, name) == 0)
            return r->params[i].val;
    return NULL;
}

bool s3__req_has_param(const struct s3_req *r, const char *name)
{
    return s3__req_param(r, name) != NULL;
}

void s3__req_free(struct s3_req *r)
{
    if (!r)
        return;
    s3__arena_fini(&r->arena);
    free(r);
}

/* A request and the first block of its arena in one allocation: most
 * requests (a presigned GET included) never need a second block. */
#define REQ_INLINE_ARENA 4096

struct req_alloc {
    struct s3_req req;
    struct s3_arena_blk blk; /* followed by REQ_INLINE_ARENA bytes */
};

static struct s3_req *req_new(void)
{
    struct req_alloc *ra = malloc(sizeof(*ra) + REQ_INLINE_ARENA);
    if (!ra)
        abort();
    memset(&ra->req, 0, sizeof(ra->req));
    ra->blk.next = NULL;
    ra->blk.used = 0;
    ra->blk.cap = REQ_INLINE_ARENA;
    s3__arena_init(&ra->req.arena);
    ra->req.arena.head = &ra->blk;
    ra->req.arena.own = &ra->blk;
    return &ra->req;
}

/* ---------------------------------------------------------------- llhttp glue */

static struct s3_http *H(llhttp_t *p)
{
    return p->data;
}

static int acc_add(struct s3_http *h, const char *at, size_t len)
{
    h->hdr_bytes += len;
    if (h->hdr_bytes > h->max_header_bytes) {
        h->too_big = true;
        return -1;
    }
    if (h->acclen + len + 1 > h->acccap) {
        size_t cap = h->acccap ? h->acccap : 256;
        while (cap < h->acclen + len + 1)
            cap *= 2;
        char *n = realloc(h->acc, cap);
        if (!n)
            return -1;
        h->acc = n;
        h->acccap = cap;
    }
    memcpy(h->acc + h->acclen, at, len);
    h->acclen += len;
    h->acc[h->acclen] = '\0';
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    struct s3_http *h = H(p);
    if (!h->req)
        h->req = req_new();
    h->hdr_bytes = 0;
    h->acclen = 0;
    h->headers_done = false;
    h->body_bytes = 0;
    h->tname_len = 0;
    h->extlen = 0;
    h->ext_name = h->ext_value = false;
    return 0;
}

static int on_span(llhttp_t *p, const char *at, size_t len)
{
    return acc_add(H(p), at, len);
}

static int on_url_complete(llhttp_t *p)
{
    struct s3_http *h = H(p);
    struct s3_req *r = h->req;
    if (!r)
        return -1;
    r->url = s3__arena_strndup(&r->arena, h->acc ? h->acc : "", h->acclen);
    h->acclen = 0;
    return 0;
}

/* Trailer fields (after the last chunk of a chunked body) arrive when the
 * request already belongs to the connection (s3__http_take_req at the
 * headers) or has been answered and freed: they must never touch h->req.
 * Name and value accumulate in acc, split by a NUL, and go to the frame
 * callback (or nowhere). They are bounded by max_header_bytes on their own
 * (on_headers_complete starts the count again). */
static bool trailing(const llhttp_t *p)
{
    return (p->flags & F_TRAILING) != 0;
}

static int trailer_name_done(struct s3_http *h)
{
    if (acc_add(h, "", 1) < 0) /* the NUL between name and value */
        return -1;
    h->tname_len = h->acclen - 1;
    for (size_t i = 0; i < h->tname_len; i++)
        h->acc[i] = (char)tolower((unsigned char)h->acc[i]);
    return 0;
}

static int trailer_value_done(struct s3_http *h)
{
    char *v = h->acc + h->tname_len + 1;
    size_t n = h->acclen - h->tname_len - 1;
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    v[n] = '\0';
    int rc = 0;
    if (h->frame_cb) {
        struct s3_http_frame f = {.kind = S3_FRAME_TRAILER, .name = h->acc, .value = v};
        rc = h->frame_cb(h->body_arg, &f);
    }
    h->acclen = 0;
    h->tname_len = 0;
    if (rc != 0) {
        h->body_failed = true;
        return -1;
    }
    return 0;
}

static int on_field_complete(llhttp_t *p)
{
    struct s3_http *h = H(p);
    if (trailing(p))
        return trailer_name_done(h);
    struct s3_req *r = h->req;
    if (!r)
        return -1;
    if (r->nhdrs == r->hdrcap) {
        size_t cap = r->hdrcap ? r->hdrcap * 2 : 32;
        struct s3_hdr *n = s3__arena_alloc(&r->arena, cap * sizeof(*n));
        if (r->nhdrs)
            memcpy(n, r->hdrs, r->nhdrs * sizeof(*n));
        r->hdrs = n;
        r->hdrcap = cap;
    }
    char *name = s3__arena_strndup(&r->arena, h->acc ? h->acc : "", h->acclen);
    for (char *c = name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    r->hdrs[r->nhdrs].name = name;
    r->hdrs[r->nhdrs].val = (char *)"";
    r->nhdrs++;
    h->hdr_bytes += 4; /* ": " and CRLF */
    h->acclen = 0;
    return 0;
}

static int on_value_complete(llhttp_t *p)
{
    struct s3_http *h = H(p);
    if (trailing(p))
        return trailer_value_done(h);
    struct s3_req *r = h->req;
    if (!r || r->nhdrs == 0)
        return -1;
    const char *v = h->acc ? h->acc : "";
    size_t n = h->acclen;
    while (n && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    r->hdrs[r->nhdrs - 1].val = s3__arena_strndup(&r->arena, v, n);
    r->hdrs[r->nhdrs - 1].vlen = n;
    h->acclen = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct s3_http *h = H(p);
    struct s3_req *r = h->req;
    if (!r || p->upgrade || llhttp_get_method(p) == HTTP_CONNECT)
        return -1;
    r->method_id = llhttp_get_method(p);
    r->method = llhttp_method_name((llhttp_method_t)r->method_id);
    r->http_major = llhttp_get_http_major(p);
    r->http_minor = llhttp_get_http_minor(p);
    r->keep_alive = llhttp_should_keep_alive(p);
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->has_clen = (p->flags & F_CONTENT_LENGTH) != 0;
    r->content_length = r->has_clen ? p->content_length : 0;
    const char *exp = s3__req_header(r, "expect");
    r->expect_continue = exp && strcasecmp(exp, "100-continue") == 0;
    if (!r->url)
        return -1;
    char *q = strchr(r->url, '?');
    if (q) {
        r->raw_path = s3__arena_strndup(&r->arena, r->url, (size_t)(q - r->url));
        r->raw_query = q + 1;
    } else {
        r->raw_path = r->url;
    }
    if (s3__req_parse_query(r) < 0)
        return -1;
    h->headers_done = true;
    h->hdr_bytes = 0; /* trailer fields get a budget of their own */
    return HPE_PAUSED;
}

/* Chunk extensions (";name=value" after a chunk's size) are kept only for a
 * frame callback, and then bounded by S3_HTTP_EXT_MAX. */
static int ext_add(struct s3_http *h, const char *lead, const char *at, size_t len)
{
    if (!h->frame_cb)
        return 0;
    size_t ll = lead ? 1 : 0;
    if (h->extlen + ll + len + 1 > sizeof(h->ext))
        return -1;
    if (lead)
        h->ext[h->extlen++] = *lead;
    memcpy(h->ext + h->extlen, at, len);
    h->extlen += len;
    h->ext[h->extlen] = '\0';
    return 0;
}

static int on_ext_name(llhttp_t *p, const char *at, size_t len)
{
    struct s3_http *h = H(p);
    bool first = !h->ext_name;
    h->ext_name = true;
    return ext_add(h, first ? ";" : NULL, at, len);
}

static int on_ext_value(llhttp_t *p, const char *at, size_t len)
{
    struct s3_http *h = H(p);
    bool first = !h->ext_value;
    h->ext_value = true;
    return ext_add(h, first ? "=" : NULL, at, len);
}

static int on_ext_name_complete(llhttp_t *p)
{
    H(p)->ext_name = false;
    return 0;
}

static int on_ext_value_complete(llhttp_t *p)
{
    H(p)->ext_value = false;
    return 0;
}

static int frame(struct s3_http *h, const struct s3_http_frame *f)
{
    if (h->frame_cb && h->frame_cb(h->body_arg, f) != 0) {
        h->body_failed = true;
        return -1;
    }
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct s3_http *h = H(p);
    h->ext[h->extlen] = '\0';
    struct s3_http_frame f = {.kind = S3_FRAME_CHUNK, .size = p->content_length, .ext = h->ext};
    int rc = frame(h, &f);
    h->extlen = 0;
    h->ext[0] = '\0';
    return rc;
}

static int on_chunk_complete(llhttp_t *p)
{
    struct s3_http_frame f = {.kind = S3_FRAME_CHUNK_END};
    return frame(H(p), &f);
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct s3_http *h = H(p);
    h->body_bytes += len;
    if (h->body_cb && h->body_cb(h->body_arg, at, len) != 0) {
        h->body_failed = true;
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    return HPE_PAUSED;
}

void s3__http_init(struct s3_http *h, size_t max_header_bytes, s3_http_body_cb body_cb,
                   void *body_arg)
{
    memset(h, 0, sizeof(*h));
    llhttp_settings_init(&h->settings);
    h->settings.on_message_begin = on_message_begin;
    h->settings.on_url = on_span;
    h->settings.on_header_field = on_span;
    h->settings.on_header_value = on_span;
    h->settings.on_url_complete = on_url_complete;
    h->settings.on_header_field_complete = on_field_complete;
    h->settings.on_header_value_complete = on_value_complete;
    h->settings.on_headers_complete = on_headers_complete;
    h->settings.on_body = on_body;
    h->settings.on_message_complete = on_message_complete;
    h->settings.on_chunk_extension_name = on_ext_name;
    h->settings.on_chunk_extension_value = on_ext_value;
    h->settings.on_chunk_extension_name_complete = on_ext_name_complete;
    h->settings.on_chunk_extension_value_complete = on_ext_value_complete;
    h->settings.on_chunk_header = on_chunk_header;
    h->settings.on_chunk_complete = on_chunk_complete;
    llhttp_init(&h->parser, HTTP_REQUEST, &h->settings);
    h->parser.data = h;
    h->max_header_bytes = max_header_bytes ? max_header_bytes : 64 * 1024;
    h->body_cb = body_cb;
    h->body_arg = body_arg;
}

void s3__http_set_frame_cb(struct s3_http *h, s3_http_frame_cb cb)
{
    h->frame_cb = cb;
}

void s3__http_fini(struct s3_http *h)
{
    s3__req_free(h->req);
    h->req = NULL;
    free(h->acc);
    h->acc = NULL;
}

int s3__http_feed(struct s3_http *h, const char *buf, size_t len, size_t *used)
{
    *used = 0;
    /* Zero bytes still run the parser: after the headers pause, a bodyless
     * message completes without further input. */
    if (!buf)
        buf = "";
    llhttp_errno_t e = llhttp_execute(&h->parser, buf, len);
    if (e == HPE_OK) {
        *used = len;
        return S3_HTTP_MORE;
    }
    if (e == HPE_PAUSED) {
        const char *pos = llhttp_get_error_pos(&h->parser);
        *used = pos ? (size_t)(pos - buf) : len;
        return h->headers_done ? S3_HTTP_HEADERS : S3_HTTP_DONE;
    }
    if (h->too_big)
        return S3_HTTP_ETOOBIG;
    if (h->body_failed)
        return S3_HTTP_EBODY;
    return S3_HTTP_EBAD;
}

void s3__http_resume(struct s3_http *h)
{
    /* After the headers pause the next pause is the message's end. */
    h->headers_done = false;
    llhttp_resume(&h->parser);
}

struct s3_req *s3__http_take_req(struct s3_http *h)
{
    struct s3_req *r = h->req;
    h->req = NULL;
    return r;
}

void s3__http_next(struct s3_http *h)
{
    s3__req_free(h->req);
    h->req = NULL;
    h->headers_done = false;
    h->body_failed = false;
    llhttp_resume(&h->parser);
}

int s3__http_finish(struct s3_http *h)
{
    llhttp_errno_t e = llhttp_finish(&h->parser);
    if (e == HPE_OK)
        return h->req ? S3_HTTP_EBAD : S3_HTTP_MORE;
    if (e == HPE_PAUSED)
        return S3_HTTP_DONE;
    return S3_HTTP_EBAD;
}

/* ---------------------------------------------------------------- encoding helpers */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *s3__url_decode(struct s3_arena *a, const char *s, size_t n, size_t *outlen)
{
    char *o = arena_raw(a, n + 1);
    size_t i = 0, j = 0;
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        size_t run = pct ? (size_t)(pct - (s + i)) : n - i;
        memcpy(o + j, s + i, run); /* the bytes up to the next escape, as they are */
        i += run;
        j += run;
        if (i == n)
            break;
        if (i + 2 >= n)
            return NULL;
        int h1 = hexval((unsigned char)s[i + 1]), h2 = hexval((unsigned char)s[i + 2]);
        if (h1 < 0 || h2 < 0)
            return NULL;
        o[j++] = (char)(h1 * 16 + h2);
        i += 3;
    }
    o[j] = '\0';
    if (outlen)
        *outlen = j;
    return o;
}

char *s3__url_encode(struct s3_arena *a, const char *s, size_t n, bool keep_slash)
{
    char *o = s3__arena_alloc(a, 3 * n + 1);
    srv_sigv4_encode(s, n, keep_slash, o);
    return o;
}

void s3__url_encode_buf(struct evbuffer *out, const char *s, size_t n, bool keep_slash)
{
    char tmp[3 * 256 + 1];
    while (n) {
        size_t k = n > 256 ? 256 : n;
        size_t m = srv_sigv4_encode(s, k, keep_slash, tmp);
        evbuffer_add(out, tmp, m);
        s += k;
        n -= k;
    }
}

int s3__req_parse_query(struct s3_req *r)
{
    r->nparams = 0;
    r->params = NULL;
    r->param_first = 0;
    if (!r->raw_query || !*r->raw_query)
        return 0;
    const char *q = r->raw_query;
    size_t qlen = strlen(q), cnt = 1;
    const char *end = q + qlen;
    for (const char *c = memchr(q, '&', qlen); c; c = memchr(c + 1, '&', (size_t)(end - c - 1)))
        cnt++;
    r->params = s3__arena_alloc(&r->arena, cnt * sizeof(*r->params));
    const char *s = q;
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        size_t len = amp ? (size_t)(amp - s) : (size_t)(end - s);
        if (len) {
            const char *eq = memchr(s, '=', len);
            size_t nlen = eq ? (size_t)(eq - s) : len;
            struct s3_param *p = &r->params[r->nparams];
            p->name = s3__url_decode(&r->arena, s, nlen, NULL);
            if (eq)
                p->val = s3__url_decode(&r->arena, eq + 1, len - nlen - 1, &p->vlen);
            else
                p->val = s3__arena_strndup(&r->arena, "", 0);
            p->has_eq = eq != NULL;
            if (!p->name || !p->val)
                return -EINVAL;
            r->param_first |= (uint64_t)1 << ((unsigned char)p->name[0] & 63);
            r->nparams++;
        }
        if (!amp)
            break;
        s = amp + 1;
    }
    return 0;
}

/* Base64 is OpenSSL's (EVP_EncodeBlock / EVP_DecodeBlock). The decoder is
 * lenient where S3 inputs (Content-MD5, continuation tokens) must not be:
 * it skips surrounding blanks, takes '=' anywhere as zero bits, and counts
 * padding as decoded bytes. So input is checked first: a multiple of four
 * characters of the standard alphabet, '=' only as the last one or two. */
void s3__b64_encode(const unsigned char *in, size_t n, char *out)
{
    /* callers encode digests and keys: far below INT_MAX */
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

long s3__b64_decode(const char *in, size_t len, unsigned char *out)
{
    if (len % 4 || len > (size_t)INT_MAX)
        return -1;
    size_t pad = 0;
    while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (!b64_char(in[i]))
            return -1;
    if (len == 0)
        return 0;
    int n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
    if (n < 0 || (size_t)n < pad)
        return -1;
    return (long)((size_t)n - pad);
}

/* ---------------------------------------------------------------- dates */

static const char *const MON[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const WDAY[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};

static void put2(char *o, int v)
{
    o[0] = (char)('0' + v / 10 % 10);
    o[1] = (char)('0' + v % 10);
}

/* Two dates per response (Date, Last-Modified) that rarely change from one
 * request to the next: each thread remembers the last two it formatted. */
static _Thread_local struct {
    time_t t;
    char s[30];
} date_memo[2] = {{-1, ""}, {-1, ""}};
static _Thread_local unsigned date_next;

void s3__http_date_fmt(time_t t, char *out)
{
    for (int i = 0; i < 2; i++)
        if (date_memo[i].t == t) {
            memcpy(out, date_memo[i].s, 30);
            return;
        }
    struct tm tm;
    gmtime_r(&t, &tm);
    int y = tm.tm_year + 1900;
    memcpy(out, WDAY[tm.tm_wday % 7], 3);
    memcpy(out + 3, ", ", 2);
    put2(out + 5, tm.tm_mday);
    out[7] = ' ';
    memcpy(out + 8, MON[tm.tm_mon % 12], 3);
    out[11] = ' ';
    put2(out + 12, y / 100);
    put2(out + 14, y);
    out[16] = ' ';
    put2(out + 17, tm.tm_hour);
    out[19] = ':';
    put2(out + 20, tm.tm_min);
    out[22] = ':';
    put2(out + 23, tm.tm_sec);
    memcpy(out + 25, " GMT", 5); /* with the NUL */
    unsigned i = date_next++ % 2;
    date_memo[i].t = t;
    memcpy(date_memo[i].s, out, 30);
}

size_t s3__u64_dec(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

void s3__iso_date_fmt(const struct timespec *ts, char *out)
{
    struct tm tm;
    time_t t = ts->tv_sec;
    gmtime_r(&t, &tm);
    char tmp[96];
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ts->tv_nsec / 1000000) % 1000);
    memcpy(out, tmp, 24);
    out[24] = '\0';
}

int s3__iso_date_parse(const char *s, time_t *out)
{
    int y, mo, d, H, M, S, n = 0;
    struct tm tm;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &H, &M, &S, &n) != 6 || n != 19)
        return -EINVAL;
    const char *p = s + n;
    if (*p == '.') { /* fractions of a second: dropped */
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (!(strcmp(p, "Z") == 0 || strcmp(p, "+00:00") == 0))
        return -EINVAL;
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || H > 23 || M > 59 ||
        S > 60 || H < 0 || M < 0 || S < 0)
        return -EINVAL;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = H;
    tm.tm_min = M;
    tm.tm_sec = S;
    *out = timegm(&tm);
    return 0;
}
