/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv4: the service-neutral part of AWS Signature Version 4 (header
 * form): SHA-256 and HMAC-SHA256, the signing key, the canonical request, the
 * string to sign and its signature, and the x-amz-date format. Who sends what
 * (an evhttp request, an S3 request, a client about to send) stays with the
 * caller, which hands over plain byte strings.
 *
 * Used by the S3 front end (s3api/s3_sigv4.c), the admin API's SigV4 check
 * (admin/admin_sigv4.c) and s3nfsctl's signing; it lives in libsigv4.a
 * because libadmin.a may not use libs3api.a (link order). Digests are
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

#endif
