/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4: the one AWS Signature Version 4 of s3nfs. SHA-256 and
 * HMAC-SHA256, the signing key, the canonical request, the string to sign and
 * its signature, the x-amz-date format (srv_sigv4.c); the parser of the
 * Authorization header and of presigned query parameters, the verifier, and
 * the signatures of aws-chunked streaming bodies (srv_sigv4_auth.c); the
 * aws-chunked decoder (srv_sigv4_chunked.c). Who sends what (an evhttp
 * request, an S3 request, a client about to send) stays with the caller,
 * which hands over plain byte strings: the S3 front end maps its requests
 * (s3api/s3_sigv4.c), the admin API its evhttp requests (admin/admin_sigv4.c),
 * and s3nfsctl and the tier's S3 client sign with it.
 *
 * Digests are
 * OpenSSL's SHA-256 block code called directly (no EVP context per digest),
 * HMAC is built on it (RFC 2104), and the pad states of recently used signing
 * keys and the derived keys themselves are kept per thread, so verifying a
 * request costs the canonical request's digest plus the string to sign's.
 * Thread: any (the caches are per thread). */
#ifndef SRV_SIGV4_H
#define SRV_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SRV_SIGV4_ALGORITHM "AWS4-HMAC-SHA256"

/** Lower-case hex of @p n bytes of @p d into @p out (2n+1 bytes, NUL-terminated). */
void srv_sigv4_hex(const uint8_t *d, size_t n, char *out);

/** SHA-256 of @p len bytes of @p data. Aborts only if libcrypto cannot digest. */
void srv_sigv4_sha256(const void *data, size_t len, uint8_t out[32]);

/** SHA-256 of @p data as 64 lower-case hex digits. */
void srv_sigv4_sha256_hex(const void *data, size_t len, char out[65]);

/** HMAC-SHA256 (RFC 2104) of @p msg under @p key. */
void srv_sigv4_hmac(const void *key, size_t klen, const void *msg, size_t mlen, uint8_t out[32]);

/** HMAC-SHA256 of @p msg under a 32-byte signing key; the key's pad states
 * are kept for the next call (a few keys per thread, wiped when replaced).
 * Same result as srv_sigv4_hmac(key, 32, ...). */
void srv_sigv4_mac(const uint8_t key[32], const void *msg, size_t mlen, uint8_t out[32]);

/** The signing key: HMAC chain over "AWS4" + @p secret, @p date (YYYYMMDD),
 * @p region, @p service and "aws4_request". Intermediate keys are wiped. */
void srv_sigv4_key(const char *secret, const char *date, const char *region, const char *service,
                   uint8_t key[32]);

/** srv_sigv4_key through a small per-thread cache keyed on all four inputs
 * (a key changes once a day per secret; a rotated secret misses). Inputs
 * longer than the cache's fields (secret 256, region 63, service 31 bytes)
 * are derived every time. */
void srv_sigv4_key_cached(const char *secret, const char *date, const char *region,
                          const char *service, uint8_t key[32]);

/** Percent-encode @p n bytes of @p s the SigV4 way: A-Z a-z 0-9 '-' '_' '.'
 * '~' are kept (and '/' with @p keep_slash), every other byte becomes %XX
 * (upper-case hex). @p out needs 3n+1 bytes. @return the length written. */
size_t srv_sigv4_encode(const char *s, size_t n, bool keep_slash, char *out);

/** A name and a value: a query parameter (both decoded) or a request header. */
struct srv_sigv4_kv {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
};

/** What the canonical request is made of. */
struct srv_sigv4_req {
    const char *method;                /* "GET", "PUT", ... */
    const char *uri;                   /* canonical URI, already encoded as the service wants */
    const struct srv_sigv4_kv *query;  /* decoded parameters (any order) */
    size_t nquery;
    const struct srv_sigv4_kv *hdrs;   /* the request's headers, names in any case */
    size_t nhdrs;
    const char *signed_headers;        /* "host;x-amz-date", as in the Authorization header */
    const char *payload_hash;          /* hex SHA-256 of the body, or UNSIGNED-PAYLOAD, ... */
};

/** Build the canonical request of @p r: method, URI, the query with names
 * and values encoded (srv_sigv4_encode) and sorted by name then value, each
 * signed header as "name:value" (every header of that name, compared without
 * case, values trimmed, inner blank runs made one space, joined with ','),
 * the signed header list and the payload hash. Header names are written in
 * lower case.
 * @param[out] out the text, NUL-terminated (free() it).
 * @return 0, -ENOENT (a signed header is not in r->hdrs, or the list has an
 * empty name), -ENOMEM. */
int srv_sigv4_canonical(const struct srv_sigv4_req *r, char **out);

/** srv_sigv4_canonical into the caller's @p buf of @p cap bytes (NUL-terminated).
 * @param[out] len the text's length, or on -ENOSPC the length it needs
 * (@p cap must be at least len + 1).
 * @return 0, -ENOSPC, -ENOENT (as srv_sigv4_canonical), -ENOMEM (only for
 * very large queries, whose scratch space is allocated). */
int srv_sigv4_canonical_into(const struct srv_sigv4_req *r, char *buf, size_t cap, size_t *len);

/** Sign: hex HMAC under @p key of the string to sign "AWS4-HMAC-SHA256\n"
 * @p amz_date "\n" @p scope "\n" hex(SHA-256(@p canonical)), where @p scope is
 * "DATE/REGION/SERVICE/aws4_request".
 * @return 0, -EINVAL (@p amz_date and @p scope together longer than 400 bytes). */
int srv_sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
                   const char *canonical, char out[65]);

/** Parse an x-amz-date value "YYYYMMDDTHHMMSSZ" (UTC, year 1970 or later).
 * @return 0, -EINVAL (NULL, malformed or out of range). */
int srv_sigv4_date_parse(const char *s, time_t *out);

/** Format @p t as "YYYYMMDDTHHMMSSZ" (UTC) into @p out. */
void srv_sigv4_date_format(time_t t, char out[17]);

/** Constant-time comparison of @p n bytes (signatures, digests). @return equal. */
bool srv_sigv4_equal(const char *a, const char *b, size_t n);

/* ---------------------------------------------------------------- parsing and verifying */

#define SRV_SIGV4_MAX_SIGNED 64 /* names in SignedHeaders */
#define SRV_SIGV4_SKEW_S (15 * 60)
#define SRV_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SRV_SIGV4_STREAMING_SIGNED "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define SRV_SIGV4_STREAMING_SIGNED_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define SRV_SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

/** What a request's signature says: its Authorization header or presigned
 * query parameters, and (once verified) its time and payload hash. */
struct srv_sigv4_auth {
    bool presigned;
    char akey[129];
    char date[9]; /* scope date yyyymmdd */
    char region[64];
    char service[32];
    char amz_date[17]; /* yyyymmddThhmmssZ */
    time_t when;
    long expires;                                  /* presigned: X-Amz-Expires seconds */
    char signature[65];                            /* lower-case hex */
    char signed_headers[1024];                     /* "host;x-amz-date" as received */
    const char *signed_list[SRV_SIGV4_MAX_SIGNED]; /* its names, lower-cased, in names */
    size_t nsigned;
    char names[1024];
    char payload_hash[80]; /* x-amz-content-sha256 (or UNSIGNED-PAYLOAD when presigned) */
};

/** Make @p a empty, as if zeroed, without writing its buffers past their first
 * byte: every scalar zero, every string "", nsigned 0 (signed_list's entries
 * past nsigned are never read). The parsers below begin with it; a holder that
 * may be read before any parse (an anonymous request's) calls it itself. */
void srv_sigv4_auth_reset(struct srv_sigv4_auth *a);

/** Parse an "AWS4-HMAC-SHA256 Credential=AKEY/DATE/REGION/SERVICE/aws4_request,
 * SignedHeaders=..., Signature=..." header (fields separated by ',' and blanks,
 * each exactly once, no others; the access key is all before the scope's four
 * fields, so it may hold '/').
 * @return 0, -EINVAL (malformed), SRV_ENOTSUPP (SigV2: "AWS AKEY:SIG"). */
int srv_sigv4_parse_header(const char *authz, struct srv_sigv4_auth *out);

/** Parse presigned query parameters (X-Amz-Algorithm, -Credential, -Date,
 * -Expires (1..604800), -SignedHeaders, -Signature; X-Amz-Content-Sha256 or
 * UNSIGNED-PAYLOAD) from the decoded parameters @p q (the first of a name counts).
 * @return 0, -ENOENT (not presigned: none of algorithm, credential and
 * signature is there), -EINVAL (malformed). */
int srv_sigv4_parse_query(const struct srv_sigv4_kv *q, size_t n, struct srv_sigv4_auth *out);

/** What verifying needs beside the parsed signature and the request. */
struct srv_sigv4_verify_in {
    const char *amz_date;     /* header form: the x-amz-date header, or NULL */
    time_t http_date;         /* header form without x-amz-date: the Date header's time, or -1 */
    const char *payload_hash; /* header form: the x-amz-content-sha256 header, or NULL */
    const char *secret;
    time_t now;
};

/** Verify the request @p r signed as @p a says. For the header form the time
 * comes from @p in (x-amz-date, else Date) and must be within
 * SRV_SIGV4_SKEW_S of @p in->now; a presigned request is valid from its
 * X-Amz-Date (SRV_SIGV4_SKEW_S early at most) for X-Amz-Expires seconds.
 * The host header must be signed. @p r's signed_headers and payload_hash are
 * set from @p a (after this, @p a holds the request's time and payload hash);
 * @p r->uri NULL counts as a request that cannot be canonicalized.
 * @param[out] key_out the signing key (for aws-chunked bodies).
 * @param[out] why a static text saying what failed (NULL on success).
 * Any region and service of the scope are accepted: a service that wants
 * its own checks them first.
 * @return 0, SRV_EAUTH (signature mismatch), -EACCES (presigned: not yet
 * valid or expired), -ETIMEDOUT (header form: clock skew), -EINVAL
 * (malformed or missing date or payload hash, scope date not the request's,
 * host not signed, a signed header missing). */
int srv_sigv4_verify(struct srv_sigv4_auth *a, const struct srv_sigv4_verify_in *in,
                     struct srv_sigv4_req *r, uint8_t key_out[32], const char **why);

/** Hex signature of @p canonical under @p key with @p a's date and scope. */
void srv_sigv4_auth_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                         const char *canonical, char out[65]);
/** Signature of one aws-chunked chunk (hex) whose data hashes to @p data_sha256,
 * given the previous signature (the seed: the request's own signature). */
void srv_sigv4_chunk_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                          const char *prev_sig, const uint8_t data_sha256[32], char out[65]);
/** Signature of the trailer (@p len bytes, "name:value\n" lines) of a signed
 * streaming upload, given the last chunk's signature. */
void srv_sigv4_trailer_sign(const uint8_t key[32], const struct srv_sigv4_auth *a,
                            const char *prev_sig, const char *trailer, size_t len, char out[65]);

/* ---------------------------------------------------------------- aws-chunked bodies */

/* aws-chunked decoder: "hex;chunk-signature=sig\r\n data \r\n" ... "0;...\r\n"
 * [trailers "\r\n"]. A pure state machine, fed body bytes in any split. */
enum srv_sigv4_chunk_mode {
    SRV_SIGV4_CHUNK_SIGNED = 1,           /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    SRV_SIGV4_CHUNK_UNSIGNED_TRAILER = 2, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
    SRV_SIGV4_CHUNK_SIGNED_TRAILER = 3    /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
};
/** Receives decoded payload bytes. @return 0, or an error that stops decoding. */
typedef int (*srv_sigv4_chunk_cb)(void *arg, const char *data, size_t len);

struct evp_md_ctx_st;
struct srv_sigv4_chunked {
    enum srv_sigv4_chunk_mode mode;
    int state;
    uint8_t key[32];
    const struct srv_sigv4_auth *auth;
    char prev_sig[65];
    char line[512]; /* current header/trailer line */
    size_t linelen;
    uint64_t remaining; /* data bytes left in the current chunk */
    char chunk_sig[65];
    struct evp_md_ctx_st *sha; /* hash of the current chunk (signed modes) */
    char trailer[2048];        /* trailer lines as received (for the trailer signature) */
    size_t trailerlen;
    char trailer_sig[65];
    uint64_t decoded;
    bool done;
    const char *err; /* static message once failed */
    srv_sigv4_chunk_cb cb;
    void *arg;
    /* trailing checksum header seen, e.g. "x-amz-checksum-crc32" and its value */
    char ck_name[40];
    char ck_value[100];
};

/** Start decoding in @p mode; signed modes verify every chunk (and the
 * trailer) under @p key, starting from @p auth's signature (the seed). */
void srv_sigv4_chunked_init(struct srv_sigv4_chunked *d, enum srv_sigv4_chunk_mode mode,
                            const uint8_t key[32], const struct srv_sigv4_auth *auth,
                            srv_sigv4_chunk_cb cb, void *arg);
void srv_sigv4_chunked_fini(struct srv_sigv4_chunked *d);
/** @return 0, SRV_EAUTH (chunk or trailer signature mismatch), -EINVAL
 * (framing), or the callback's error; d->err says what. After d->done,
 * further bytes are -EINVAL. */
int srv_sigv4_chunked_feed(struct srv_sigv4_chunked *d, const char *buf, size_t len);
/** Stop decoding with @p err and the static message @p msg (if none is set yet).
 * @return @p err. */
int srv_sigv4_chunked_fail(struct srv_sigv4_chunked *d, int err, const char *msg);

#endif
