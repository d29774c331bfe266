/* SPDX-License-Identifier: Apache-2.0
 * s3_internal: types and functions shared by the files of s3api/ (not a public API).
 *
 * The pure layers (arena, HTTP request parser, URL/query helpers, SigV4,
 * aws-chunked framing, XML, checksums, metadata blob) work on byte buffers
 * and never touch libevent sockets, so unit tests and fuzz targets can drive
 * them directly. The connection layer (s3_conn.c) and the operations
 * (s3_op_*.c) build on them.
 * Thread: the pure functions are reentrant; everything tied to a connection
 * runs on that connection's loop thread, except the work functions handed to
 * srv_work_submit, which touch only their request context. */
#ifndef S3_INTERNAL_H
#define S3_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <llhttp.h>
#include <openssl/evp.h>

#include "core.h"
#include "qos_admit.h"
#include "s3_error.h"
#include "srv_md5.h"
#include "srv_sigv2.h"
#include "srv_sigv4.h"

struct evbuffer;

/* ---------------------------------------------------------------- arena */

/* A per-request arena: many small allocations, freed at once. */
struct s3_arena_blk;
struct s3_arena {
    struct s3_arena_blk *head;
    struct s3_arena_blk *own; /* a first block owned by the arena's holder: not freed */
};
void s3__arena_init(struct s3_arena *a);
void s3__arena_fini(struct s3_arena *a);
/** Zeroed memory from @p a; aborts on OOM (sizes are bounded by the header limit). */
void *s3__arena_alloc(struct s3_arena *a, size_t n);
/** NUL-terminated copy of @p s[0..n). */
char *s3__arena_strndup(struct s3_arena *a, const char *s, size_t n);
char *s3__arena_printf(struct s3_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Bytes the arena holds (its blocks' sizes), for bounds checks in tests. */
size_t s3__arena_bytes(const struct s3_arena *a);

/* ---------------------------------------------------------------- HTTP request */

struct s3_hdr {
    char *name; /* lower-cased, NUL-terminated */
    char *val;  /* as received, leading/trailing blanks removed, NUL-terminated */
    size_t vlen;
};

struct s3_param {
    char *name; /* percent-decoded, NUL-terminated */
    char *val;  /* percent-decoded, NUL-terminated; "" when the parameter had no '=' */
    size_t vlen;
    bool has_eq;
};

struct s3_req {
    struct s3_arena arena;
    const char *method; /* "GET", ... */
    int method_id;      /* llhttp_method_t */
    char *url;          /* request target as received */
    char *raw_path;     /* part of url before '?', still percent-encoded */
    char *raw_query;    /* part after '?' or NULL */
    struct s3_hdr *hdrs;
    size_t nhdrs, hdrcap;
    struct s3_param *params;
    size_t nparams;
    uint64_t param_first; /* bit (first byte & 63) set for each parameter's name */
    int http_major, http_minor;
    bool keep_alive;
    bool expect_continue;
    bool chunked; /* Transfer-Encoding: chunked */
    bool has_clen;
    uint64_t content_length;
};

/** @return the value of header @p name (lower-case), or NULL. Repeated headers: the first. */
const char *s3__req_header(const struct s3_req *r, const char *name);
/** @return the decoded value of query parameter @p name, or NULL. */
const char *s3__req_param(const struct s3_req *r, const char *name);
bool s3__req_has_param(const struct s3_req *r, const char *name);

enum s3_http_event {
    S3_HTTP_MORE = 0,     /* everything consumed; feed more bytes */
    S3_HTTP_HEADERS = 1,  /* paused: request line and headers are in http->req */
    S3_HTTP_DONE = 2,     /* paused: the message (body included) is complete */
    S3_HTTP_EBAD = -1,    /* malformed request: answer 400 and close */
    S3_HTTP_ETOOBIG = -2, /* request line + headers over the limit: answer 431 and close */
    S3_HTTP_EBODY = -3,   /* the body sink refused the bytes (see body callback) */
};

/** Called with body bytes (after HTTP chunked decoding). @return 0 or nonzero to stop. */
typedef int (*s3_http_body_cb)(void *arg, const char *data, size_t len);

/* The framing of a chunked body, for a caller that needs more than its bytes
 * (aws-chunked uploads whose aws chunks are the HTTP chunks, s3_sigv4.c).
 * Trailer fields are never added to the request: by the time they arrive the
 * request belongs to the connection (s3__http_take_req). */
enum s3_http_frame_kind {
    S3_FRAME_CHUNK = 1, /* a chunk begins: size, ext */
    S3_FRAME_CHUNK_END, /* its data is over (after the last chunk: its trailer fields too) */
    S3_FRAME_TRAILER,   /* one trailer field: name, value */
};
#define S3_HTTP_EXT_MAX 256 /* longest chunk extension text accepted with a frame callback */
struct s3_http_frame {
    enum s3_http_frame_kind kind;
    uint64_t size;     /* CHUNK: data bytes (0: the last chunk) */
    const char *ext;   /* CHUNK: its extensions as received, ";name=value...", or "" */
    const char *name;  /* TRAILER: field name, lower-cased */
    const char *value; /* TRAILER: value, leading/trailing blanks removed */
};
/** @return 0, or nonzero to stop parsing (S3_HTTP_EBODY, as a refused body). */
typedef int (*s3_http_frame_cb)(void *arg, const struct s3_http_frame *f);

struct s3_http {
    llhttp_t parser;
    llhttp_settings_t settings;
    struct s3_req *req; /* the request being parsed (owned) */
    size_t max_header_bytes;
    size_t hdr_bytes;
    bool too_big;
    bool in_value; /* last header callback was a value */
    bool headers_done;
    bool body_failed;
    char *acc; /* accumulates split url/field/value spans */
    size_t acclen, acccap;
    s3_http_body_cb body_cb;
    void *body_arg;
    uint64_t body_bytes; /* body bytes delivered for this request */
    s3_http_frame_cb frame_cb; /* called with body_arg; NULL: trailers are dropped */
    size_t tname_len;          /* trailer field: its name's length in acc (a NUL follows) */
    char ext[S3_HTTP_EXT_MAX]; /* extensions of the chunk being parsed */
    size_t extlen;
    bool ext_name, ext_value; /* inside an extension's name / value */
};

void s3__http_init(struct s3_http *h, size_t max_header_bytes, s3_http_body_cb body_cb,
                   void *body_arg);
void s3__http_fini(struct s3_http *h);
/** Report the framing of chunked bodies to @p cb (with the body callback's argument).
 * Without one, chunk extensions and trailer fields are parsed and dropped. */
void s3__http_set_frame_cb(struct s3_http *h, s3_http_frame_cb cb);
/** Parse @p len bytes. @param[out] used bytes consumed (the caller drains them).
 * @return an s3_http_event. After S3_HTTP_HEADERS call s3__http_resume() and feed
 * again (even zero bytes: a bodyless message then completes); after
 * S3_HTTP_DONE call s3__http_next() before feeding the next request's bytes. */
int s3__http_feed(struct s3_http *h, const char *buf, size_t len, size_t *used);
void s3__http_resume(struct s3_http *h);
/** Free the finished request and get ready for the next one on the connection. */
void s3__http_next(struct s3_http *h);
/** The client closed its side: @return S3_HTTP_DONE if that legally ends the
 * message, S3_HTTP_EBAD if a body was cut short, S3_HTTP_MORE between requests. */
int s3__http_finish(struct s3_http *h);
/** Take ownership of the parsed request (the parser starts a fresh one at next). */
struct s3_req *s3__http_take_req(struct s3_http *h);
void s3__req_free(struct s3_req *r);

/* ---------------------------------------------------------------- URL / encoding helpers */

/** Percent-decode @p s[0..n) into a new arena string ('+' stays '+').
 * @return NULL on a malformed escape. @p outlen may be NULL. */
char *s3__url_decode(struct s3_arena *a, const char *s, size_t n, size_t *outlen);
/** Percent-encode with the SigV4/S3 rules: unreserved A-Za-z0-9-._~ kept, '/'
 * kept when @p keep_slash, everything else %XX (upper-case hex). Appends to @p out. */
void s3__url_encode_buf(struct evbuffer *out, const char *s, size_t n, bool keep_slash);
char *s3__url_encode(struct s3_arena *a, const char *s, size_t n, bool keep_slash);
/** Split and decode the query string into r->params. @return 0, -EINVAL. */
int s3__req_parse_query(struct s3_req *r);
/** Base64 encode (standard alphabet, padded; OpenSSL). out: 4*ceil(n/3)+1 bytes, NUL-terminated. */
void s3__b64_encode(const unsigned char *in, size_t n, char *out);
/** Strict base64 decode: @p len a multiple of 4, only the standard alphabet, '=' only as
 * the last one or two characters, no blanks. @return the decoded length, or -1 on
 * malformed input. out: at least 3*len/4 bytes (the padding's bytes are written too). */
long s3__b64_decode(const char *in, size_t len, unsigned char *out);

/** Format an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); out: 30 bytes. */
void s3__http_date_fmt(time_t t, char *out);
/** Decimal digits of @p v, NUL-terminated; out: 21 bytes. @return the digit count. */
size_t s3__u64_dec(char *out, uint64_t v);
/** Format ISO 8601 with milliseconds "2009-10-12T17:50:30.000Z"; out: 25 bytes. */
void s3__iso_date_fmt(const struct timespec *ts, char *out);
/** Parse ISO 8601 in UTC as S3 sends it: "2009-10-12T17:50:30Z", with optional fractions
 * of a second (dropped) and "+00:00" for "Z". @return 0, -EINVAL. */
int s3__iso_date_parse(const char *s, time_t *out);

/* ---------------------------------------------------------------- SigV4 (S3 glue)
 * The parser, verifier and aws-chunked decoder are sigv4/'s (srv_sigv4.h);
 * s3_sigv4.c maps S3 requests onto them. */

/** Parse the presigned query parameters (X-Amz-Algorithm ...) of @p r.
 * @return as srv_sigv4_parse_query: 0, -ENOENT (not presigned), -EINVAL. */
int s3__sigv4_parse_query(const struct s3_req *r, struct srv_sigv4_auth *out);
/** The canonical request of @p r (the path decoded and encoded again the
 * SigV4 way, the query without X-Amz-Signature when presigned) as @p sig
 * signs it, into a new arena string. @return NULL if it cannot be built (a
 * signed header is missing, a malformed path escape). */
char *s3__sigv4_canonical(struct s3_arena *a, const struct s3_req *r,
                          const struct srv_sigv4_auth *sig);
/** Verify @p r against @p secret at time @p now: the scope's service must be
 * "s3"; x-amz-date (else Date) and x-amz-content-sha256 come from the headers
 * of a header-form request. @return as srv_sigv4_verify (-EINVAL for another
 * service); @p why says what failed. */
int s3__sigv4_verify(struct s3_arena *a, const struct s3_req *r, struct srv_sigv4_auth *sig,
                     const char *secret, time_t now, unsigned char key_out[32], const char **why);

/** SigV2 (legacy): the string to sign of @p r (srv_sigv2.h), with @p vhost_bucket (or
 * NULL) leading its resource, a '/' ending its path when @p slash and, presigned,
 * @p expires in the date's place. @return an arena string, or NULL when it cannot be built. */
char *s3__sigv2_string(struct s3_arena *a, const struct s3_req *r, const char *vhost_bucket,
                       const char *expires, bool slash);
/** Verify SigV2 signature @p sig (base64) of @p r at @p now: a header-signed request's
 * Date or x-amz-date within SRV_SIGV4_SKEW_S, a presigned one's @p expires not past; a
 * @p bucket_level request's resource may be signed with or without its trailing '/'.
 * @return 0, SRV_EAUTH (mismatch), -ETIMEDOUT (skew), -EACCES (expired, no date),
 * -EINVAL (malformed); @p why says what failed. */
int s3__sigv2_verify(struct s3_arena *a, const struct s3_req *r, const char *vhost_bucket,
                     bool bucket_level, const char *sig, const char *expires, const char *secret,
                     time_t now, const char **why);

/* An aws-chunked body as the connection reads it: the decoder, and how the
 * stream travels when it comes with Transfer-Encoding: chunked. */
struct s3_chunked {
    struct srv_sigv4_chunked d;
    int framing;         /* how: not known yet, the same chunks, or nested */
    uint64_t first_size; /* while not known: the first HTTP chunk, held back */
    char first_ext[S3_HTTP_EXT_MAX];
    char peek[18]; /* ... and the first bytes of its data */
    size_t peeklen;
};
void s3__chunked_init(struct s3_chunked *c, enum srv_sigv4_chunk_mode mode,
                      const unsigned char key[32], const struct srv_sigv4_auth *sig,
                      srv_sigv4_chunk_cb cb, void *arg);
void s3__chunked_fini(struct s3_chunked *c);
/* An aws-chunked body sent with Transfer-Encoding: chunked comes one of two
 * ways: its aws chunks are the HTTP chunks (each chunk-signature a chunk
 * extension, the trailing checksum and trailer signature HTTP trailer fields:
 * what botocore and aws-cli send), or the whole aws-chunked stream travels
 * inside HTTP chunks of any size (an HTTP client chunking an SDK's encoded
 * stream). The decoder tells them apart at the first chunk: signed modes by
 * its chunk-signature extension, the unsigned-trailer mode by whether the
 * chunk's data begins with an aws chunk-size line (1-16 hex digits, CRLF);
 * a zero-length first chunk is the first way. The framing events and the
 * HTTP-decoded bytes then feed the decoder as srv_sigv4_chunked_feed would be
 * fed with the aws-chunked stream itself; in the nested way the HTTP framing
 * and trailer fields are ignored. Both return as srv_sigv4_chunked_feed. */
int s3__chunked_http_frame(struct s3_chunked *c, const struct s3_http_frame *f);
int s3__chunked_http_data(struct s3_chunked *c, const char *buf, size_t len);

/* ---------------------------------------------------------------- checksums */

enum s3_ck_algo {
    S3_CK_NONE = 0,
    S3_CK_CRC32,
    S3_CK_CRC32C,
    S3_CK_SHA1,
    S3_CK_SHA256,
    S3_CK_CRC64NVME
};
struct s3_cksum {
    enum s3_ck_algo algo;
    uint32_t crc;
    uint64_t crc64;
    EVP_MD_CTX *md;
};
uint32_t s3__crc32(uint32_t crc, const void *buf, size_t len);
uint32_t s3__crc32c(uint32_t crc, const void *buf, size_t len);
/** CRC-64/NVME (reflected poly 0x9A6C9329AC4BC9B5, init and xorout ~0). */
uint64_t s3__crc64nvme(uint64_t crc, const void *buf, size_t len);
/** Algorithm of a header name ("x-amz-checksum-crc32") or name ("CRC32"); S3_CK_NONE if unknown. */
enum s3_ck_algo s3__ck_from_header(const char *name);
enum s3_ck_algo s3__ck_from_name(const char *name);
const char *s3__ck_header(enum s3_ck_algo a); /* "x-amz-checksum-crc32" */
const char *s3__ck_name(enum s3_ck_algo a);   /* "CRC32" */
void s3__ck_init(struct s3_cksum *c, enum s3_ck_algo a);
void s3__ck_update(struct s3_cksum *c, const void *buf, size_t len);
/** Base64 value (as in x-amz-checksum-*); frees the state. out: 64 bytes. */
void s3__ck_final(struct s3_cksum *c, char *out);
void s3__ck_free(struct s3_cksum *c);

/* ---------------------------------------------------------------- object metadata blob */

enum s3_meta_type {
    S3_M_HDR = 1,
    S3_M_USER = 2,
    S3_M_TAG = 3,
    S3_M_CKSUM = 4,
    S3_M_PARTS = 5,
    S3_M_ACL = 6,  /* an ACL grant (s3_acl.c): key "uid:N", "auth" or "all", value perms */
    S3_M_BCFG = 7, /* bucket configuration (bucket blobs only, s3_authz.c): key its name */
    S3_M_LOCK = 8, /* the object lock a multipart upload asked for at its creation ("mode",
                    * "until", "hold"), applied at its completion */
};
struct s3_meta_ent {
    enum s3_meta_type type;
    char *key;
    size_t klen;
    char *val;
    size_t vlen;
};
struct s3_meta {
    struct s3_meta_ent *ents;
    size_t n, cap;
};
void s3__meta_add(struct s3_meta *m, struct s3_arena *a, enum s3_meta_type t, const char *k,
                  size_t klen, const char *v, size_t vlen);
/** Remove every entry of type @p t. */
void s3__meta_drop(struct s3_meta *m, enum s3_meta_type t);
const struct s3_meta_ent *s3__meta_find(const struct s3_meta *m, enum s3_meta_type t,
                                        const char *k);
size_t s3__meta_count(const struct s3_meta *m, enum s3_meta_type t);
/** Serialize into a malloc'd blob. */
int s3__meta_encode(const struct s3_meta *m, void **blob, size_t *len);
/** Parse a blob (arena copies). An empty blob is an empty meta. @return 0, -EINVAL. */
int s3__meta_decode(struct s3_meta *m, struct s3_arena *a, const void *blob, size_t len);

/* ---------------------------------------------------------------- ACLs (s3_acl.c) */

#define S3_P_READ 1
#define S3_P_WRITE 2
#define S3_P_READ_ACP 4
#define S3_P_WRITE_ACP 8
#define S3_P_FULL 15
enum s3_gt { S3_GT_USER = 0, S3_GT_AUTH = 1, S3_GT_ALL = 2 };
struct s3_grant {
    enum s3_gt kind;
    uint32_t uid; /* S3_GT_USER */
    unsigned perm;
};
/* The grants S3 alone expresses (the rest is the resource's mode bits). */
struct s3_acl {
    struct s3_grant *g;
    size_t n, cap;
};
struct s3_ctx;
/** The canonical user ID of @p uid in @p tenant (64 hex digits + NUL). */
void s3__acl_id(uint32_t tenant, uint32_t uid, char out[65]);
/** Display name of @p uid in the request's tenant: the user's name, or "uid-N". */
const char *s3__acl_name(struct s3_ctx *x, uint32_t uid);
/** The uid of a user of the request's tenant named by canonical ID @p v or, when
 * @p email, by "name" or "name@tenant". @return 0, -ENOENT. */
int s3__acl_uid_of(struct s3_ctx *x, const char *v, bool email, uint32_t *uid);
/** Grants stored in @p m (S3_M_ACL records; an absent @p m: none). */
void s3__acl_load(struct s3_acl *acl, struct s3_arena *a, const struct s3_meta *m);
/** Replace the S3_M_ACL records of @p m with @p acl. */
void s3__acl_store(struct s3_meta *m, struct s3_arena *a, const struct s3_acl *acl);
/* public access block: group grants and the others' bits do not count */
#define S3_ACL_IGNORE_PUBLIC 0x1
/** The S3_P_* permissions @p p has on a bucket or object with attributes @p at
 * and stored grants @p acl (may be NULL): its POSIX class's bits (core_perm_bits;
 * never for an anonymous principal) and its grants (module comment). */
unsigned s3__acl_perms(const struct core_principal *p, const struct core_attr *at,
                       const struct s3_acl *acl, bool bucket, unsigned flags);
/** Does the ACL grant anything to AllUsers or AuthenticatedUsers (mode bits included)? */
bool s3__acl_is_public(const struct core_attr *at, const struct s3_acl *acl, bool bucket);
/** The mode an ACL set through S3 gives: owner rw(x); group and others from the group
 * grants (r, and w on a bucket; search bits with them on a bucket). */
uint32_t s3__acl_mode(const struct s3_acl *acl, bool bucket);
/** Append <TAG><ID/><DisplayName/></TAG> for @p uid. */
void s3__acl_owner_xml(struct s3_ctx *x, struct evbuffer *b, const char *tag, uint32_t uid);
/** Append the AccessControlPolicy document of a resource owned by @p owner. */
void s3__acl_xml(struct s3_ctx *x, struct evbuffer *b, const struct core_attr *at,
                 const struct s3_acl *acl, bool bucket, uint32_t owner);
/** Add one grantee (type "id", "emailAddress" or "uri" of @p tl bytes) with @p perm.
 * @return 0, -EINVAL, -ENOENT (no such user), -ENOTSUP (LogDelivery); @p why says why. */
int s3__acl_grantee(struct s3_ctx *x, const char *type, size_t tl, const char *val, unsigned perm,
                    struct s3_acl *acl, const char **why);
/** The ACL a request asks for (x-amz-acl or x-amz-grant-*); @p given false when none.
 * @return 0, or -1 with the response set. */
int s3__acl_from_req(struct s3_ctx *x, bool bucket, uint32_t bucket_owner, struct s3_acl *acl,
                     bool *given);
/** Parse an AccessControlPolicy document for a resource owned by @p owner.
 * @return 0, or -1 with the response set. */
int s3__acl_from_xml(struct s3_ctx *x, const char *doc, size_t n, uint32_t owner,
                     struct s3_acl *acl);

/* ---------------------------------------------------------------- authorization (s3_authz.c) */

#define S3_ANON_ID 65534 /* uid and gid of an anonymous principal (it never gets POSIX access) */

/* What an operation's permission is checked against. */
enum s3_az {
    S3_AZ_NONE = 0,   /* nothing here (service operations decide for themselves) */
    S3_AZ_B_OWNER,    /* the bucket's owner (bucket settings) */
    S3_AZ_B_READ,     /* the bucket's ACL: READ (list) */
    S3_AZ_B_WRITE,    /* ... WRITE (create, replace, delete keys) */
    S3_AZ_B_READ_ACP, /* ... READ_ACP */
    S3_AZ_B_WRITE_ACP,
    S3_AZ_O_READ, /* the object's ACL (decided once it is looked up): READ */
    S3_AZ_O_READ_ACP,
    S3_AZ_O_WRITE_ACP,
};
#define S3_PAB_BLOCK_ACLS 0x1   /* BlockPublicAcls */
#define S3_PAB_IGNORE_ACLS 0x2  /* IgnorePublicAcls */
#define S3_PAB_BLOCK_POLICY 0x4 /* BlockPublicPolicy */
#define S3_PAB_RESTRICT 0x8     /* RestrictPublicBuckets */
enum s3_own { S3_OWN_WRITER = 0, S3_OWN_PREFERRED, S3_OWN_ENFORCED };
/* A bucket's configuration, decoded from its blob (module comment of s3_authz.c). */
struct s3_bcfg {
    bool loaded;
    bool broken;         /* the blob did not decode: only the owner and admins get in */
    struct s3_meta meta; /* every record, to write back changed */
    struct s3_acl acl;
    const char *policy; /* JSON text or NULL */
    size_t policylen;
    unsigned pab; /* S3_PAB_* */
    enum s3_own ownership;
    bool has_ownership;
    const char *cors; /* CORS XML or NULL */
    size_t corslen;
};
enum s3_pol { S3_POL_NONE = 0, S3_POL_ALLOW, S3_POL_DENY };
/* A bucket a request names (its own, or a copy source's) and what it holds. */
struct s3_bref {
    const char *name;
    size_t namelen;
    const char *key; /* the key named in it, or NULL */
    size_t keylen;
    uint64_t ino;
    struct core_attr attr;
    struct s3_bcfg cfg;
};

/** Look bucket @p b->name up (its attributes and configuration). @return 0,
 * SRV_ENOBUCKET, or a core error. */
int s3__bref_load(struct s3_ctx *x, struct s3_bref *b);
/** x->b from what core_key_peek found (the GET fast path). */
struct core_peek;
void s3__bref_peeked(struct s3_ctx *x, const struct core_peek *pk);
/** Replace (@p val NULL: remove) configuration record @p name of x->b. */
void s3__bcfg_set(struct s3_ctx *x, const char *name, const char *val, size_t vlen);
/** Store x->b's configuration (and, @p mode >= 0, the bucket's mode bits).
 * @return 0 or -1, responded. */
int s3__bcfg_save(struct s3_ctx *x, int mode);
/** Is the requester the owner of bucket @p b? */
bool s3__authz_bucket_owner(const struct s3_ctx *x, const struct s3_bref *b);
/** Decide @p action (IAM name, "s3:GetObject") on bucket @p b (its key, for object
 * actions) checked as @p az; object checks take the object's attributes @p oat and
 * metadata @p ometa (tags, grants). A bucket check allowed by S3 alone elevates x->p
 * (module comment); an object check changes nothing: the caller reads or changes the
 * object it decided on with s3__super(). @return 0, or -1 with 403 AccessDenied set. */
/** Does a read-only tier policy cover key @p key of bucket @p bucket (key NULL: the
 * bucket itself)? */
bool s3__tier_readonly(struct s3_ctx *x, uint64_t bucket, const char *key, size_t keylen);
int s3__authz(struct s3_ctx *x, struct s3_bref *b, const char *action, enum s3_az az,
              const struct core_attr *oat, const struct s3_meta *ometa);
/** A GET/HEAD found no key in x->b: 0 when the requester may list the bucket
 * (answer 404), else -1 with 403 set. */
int s3__authz_missing(struct s3_ctx *x);
/** x->p elevated (CORE_P_SUPER), for the object calls of a decided request. */
struct core_principal s3__super(const struct s3_ctx *x);
/* Bucket policies (s3_policy.c: the language; the answer for a request in s3_authz.c). */
struct s3_policy;
/* What a policy is checked against when it is stored (principals must be this tenant's). */
struct s3_policy_env {
    const char *bucket; /* resources must be this bucket's */
    uint32_t tenant;    /* the account: the tenant's name or its id as 12 digits */
    const char *tenant_name;
    /* a user of the tenant by name (its user id) / by canonical ID (its uid): 0 or -ENOENT */
    int (*user_by_name)(void *arg, const char *name, uint64_t *user);
    int (*uid_by_canonical)(void *arg, const char *id, uint32_t *uid);
    void *arg;
    bool stored; /* a stored policy: a principal whose user is gone since matches nobody */
};
/* One request as a policy sees it. */
struct s3_policy_req {
    bool anon;            /* unsigned: matches only "*" */
    uint64_t user;        /* the user id ... */
    uint32_t uid;         /* ... and its uid (canonical IDs) */
    const char *action;   /* "s3:GetObject" */
    const char *resource; /* "arn:aws:s3:::bucket/key" */
    bool public_off;      /* RestrictPublicBuckets: public statements allow nothing */
    /* a condition key's value (key lower case but a tag's name), NULL when the request has none */
    const char *(*value)(void *arg, const char *key);
    void *arg;
};
/** Parse and validate policy JSON @p doc for @p env into the arena.
 * @return 0, -EINVAL with @p why set (the MalformedPolicy message). */
int s3__policy_parse(struct s3_arena *a, const char *doc, size_t len,
                     const struct s3_policy_env *env, struct s3_policy **out, const char **why);
/** Evaluate @p pol for @p rq: Deny wins, then Allow, else none. */
enum s3_pol s3__policy_eval(struct s3_arena *a, const struct s3_policy *pol,
                            const struct s3_policy_req *rq);
/** Does statement @p i (an Allow to everybody not confined by fixed-value conditions) or
 * the policy make the bucket public, as AWS decides it (GetBucketPolicyStatus)? */
bool s3__policy_stmt_public(const struct s3_policy *pol, size_t i);
bool s3__policy_public(const struct s3_policy *pol);
/** The environment a policy of bucket @p b is parsed in (@p stored: see s3_policy_env). */
void s3__policy_env(struct s3_ctx *x, const struct s3_bref *b, bool stored,
                    struct s3_policy_env *env);
/** The bucket policy's answer for @p action on bucket @p b or its key (s3_authz.c). */
enum s3_pol s3__policy_decide(struct s3_ctx *x, const struct s3_bref *b, const char *action,
                              const struct s3_meta *ometa);

/* ---------------------------------------------------------------- browser forms (s3_form.c) */

#define S3_FORM_MAX_FIELDS 64
/* the fields but the file, names and values (AWS: 20 KB) */
#define S3_FORM_FIELDS_MAX (20u << 10)
struct s3_form_field {
    const char *name;
    const char *val; /* NUL-terminated, vlen bytes */
    size_t vlen;
};
/* What the decoder reports (each may be NULL): nonzero stops it. */
struct s3_form_cbs {
    int (*file_start)(void *arg, const char *filename, const char *ctype);
    int (*file_data)(void *arg, const char *data, size_t len);
};
/* A multipart/form-data decoder (module comment of s3_form.c). */
struct s3_form {
    struct s3_arena *a;
    const struct s3_form_cbs *cbs;
    void *arg;
    int state;
    char *delim; /* "\r\n--boundary" */
    size_t dlen, match;
    char tail[2];
    size_t after;
    char *hdr; /* a part's header block */
    size_t hlen;
    const char *name, *filename, *ctype; /* of the current part */
    bool is_file, file_seen, file_done;
    char *val; /* the current field's value */
    size_t vlen, vcap;
    size_t fields_bytes;
    struct s3_form_field fields[S3_FORM_MAX_FIELDS];
    size_t nfields;
    const char *file_name, *file_ctype; /* of the file part (set by the caller's file_start) */
    const char *why;                    /* why it failed (NULL: a callback refused) */
};
/** Start decoding a body of Content-Type @p content_type (multipart/form-data; boundary=...).
 * @return 0, -EINVAL (not a multipart form, or a bad boundary). */
int s3__form_init(struct s3_form *f, struct s3_arena *a, const char *content_type,
                  const struct s3_form_cbs *cbs, void *arg);
/** Feed body bytes. @return 0, -EINVAL (malformed: f->why says why, or a callback refused). */
int s3__form_feed(struct s3_form *f, const char *data, size_t len);
/** The body is over. @return 0, -EINVAL (the form did not end). */
int s3__form_end(struct s3_form *f);
/** The value of field @p name (case-insensitive; the first one), or NULL. */
const char *s3__form_get(const struct s3_form *f, const char *name);
/** Check a POST policy document (base64 @p policy_b64) against the form's fields, the
 * @p bucket, the object's @p key and @p size at @p now. @return 0, -EINVAL (malformed),
 * -EACCES (expired, a condition failed, a field not covered), -ERANGE/-EFBIG (smaller/
 * larger than content-length-range); @p why is the S3 message. */
int s3__form_policy_check(struct s3_arena *a, const struct s3_form *f, const char *policy_b64,
                          const char *bucket, const char *key, uint64_t size, time_t now,
                          const char **why);

/* ---------------------------------------------------------------- XML */

/** Append @p s[0..n) XML-escaped. */
void s3__xml_esc(struct evbuffer *out, const char *s, size_t n);
/** Append "<tag>escaped</tag>". */
void s3__xml_elem(struct evbuffer *out, const char *tag, const char *s);
void s3__xml_elemn(struct evbuffer *out, const char *tag, const char *s, size_t n);
void s3__xml_elem_u64(struct evbuffer *out, const char *tag, uint64_t v);
#define S3_XML_HDR "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

struct s3_xnode {
    char *name; /* local name (namespace prefix removed) */
    char *text; /* concatenated, unescaped character data, NUL-terminated */
    size_t textlen;
    size_t textcap; /* parser-private: bytes allocated for text (grows by doubling) */
    struct s3_xnode *child, *next, *parent;
};
/** Parse a small XML document into arena nodes. @return 0, -EINVAL (malformed). */
int s3__xml_parse(struct s3_arena *a, const char *buf, size_t len, struct s3_xnode **root);
struct s3_xnode *s3__xml_child(const struct s3_xnode *n, const char *name);

/* ---------------------------------------------------------------- errors */

/** Append an S3 <Error> document. */
void s3__error_xml(struct evbuffer *out, const char *code, const char *msg, const char *resource,
                   const char *reqid);
/** The S3 code and HTTP status for internal error @p err in the context of an
 * object (is_key) or bucket operation (NoSuchKey vs NoSuchBucket, ...). */
void s3__error_map(int err, bool is_key, const char **code, int *status);
const char *s3__status_text(int status);

/* ---------------------------------------------------------------- routing (pure) */

enum s3_body_mode { S3_BODY_NONE = 0, S3_BODY_XML = 1, S3_BODY_STREAM = 2 };

struct s3_ctx;

/* GET/HEAD of an object on the loop thread (core_key_peek). */
enum s3_fast {
    S3_FAST_NO = 0, /* nothing done: run the op on a worker */
    S3_FAST_DONE,   /* the response (success or error) is ready */
    S3_FAST_DATA,   /* headers are ready: run s3__get_data_work on a worker */
};

/* An operation's flags. */
/* not admitted before it runs: once its response is ready, as a read (qos) of the bytes it
 * sends (GetObject) */
#define S3_OPF_READ_AFTER 0x1

/* An operation: what the connection needs to know to run it (its body, its
 * QoS admission, an optional loop-thread fast path) and its worker steps. */
struct s3_op {
    const char *name;   /* S3 API name, for logs and metrics */
    const char *action; /* IAM action checked (bucket policies), NULL: the op decides */
    enum s3_az az;      /* ... and against what (s3_authz.c) */
    enum s3_body_mode body;
    enum qos_class qos; /* admitted as this class before it runs: QOS_META, or QOS_WRITE
                         * (STREAM: with the declared payload bytes) */
    unsigned flags;     /* S3_OPF_* */
    /* loop thread, after the body and admission, before any worker; NULL: none */
    enum s3_fast (*fast)(struct s3_ctx *x);
    /* worker: the whole operation (NONE, XML) or, for STREAM, the part before the body */
    void (*work)(struct s3_ctx *x);
    /* worker, STREAM only: after the last body byte was written */
    void (*finish)(struct s3_ctx *x);
};

struct s3_route {
    const struct s3_op *op;
    char *bucket; /* decoded; NULL at service level */
    size_t bucketlen;
    char *key; /* decoded; NULL at bucket level */
    size_t keylen;
    bool vhost;      /* bucket came from the Host header */
    const char *sub; /* the subresource that selected op (for messages), or NULL */
    int err;         /* nonzero: answer this error instead (e.g. SRV_ENOTSUPP) */
    const char *errmsg;
};

/** Pick the operation for @p r: addressing (virtual host under @p domain, else
 * path style), method and subresources. Never fails hard: unknown combinations
 * set route->err (501 NotImplemented / 405) with a message. */
void s3__route_req(struct s3_arena *a, const struct s3_req *r, const char *domain,
                   struct s3_route *out);

/* ---------------------------------------------------------------- request context */

struct s3_server;
struct s3_conn;
struct srv_loop;

#define S3_READS_INFLIGHT 2     /* parallel worker reads of one streamed GET */
#define S3_ZC_INFLIGHT 2        /* zero-copy windows of one streamed GET being prepared */
#define S3_PEEK_MAX (16u << 10) /* inline objects served on the loop thread up to this */
#define S3_ZC_MIN (64u << 10)   /* bodies larger than this go zero-copy (without TLS) */
#define S3_ZC_ONE (4u << 20)    /* ... in one window, without core_ref, up to this */
struct s3_zwin;
struct s3_copy;

struct s3_ctx {
    struct s3_server *srv;
    struct s3_conn *conn; /* NULL once the connection is gone */
    struct srv_loop *loop;
    struct s3_req *req;
    struct s3_arena *a; /* = &req->arena */
    char reqid[24];
    uint64_t t_start;
    struct core *core;
    const char *region; /* configured region (server-owned) */
    struct core_principal p;      /* what the core calls run as (authorization may elevate it) */
    struct core_principal id;     /* who asks (set by authentication) */
    struct tenants *tenants;      /* users, for ACL grantees and policy principals */
    struct sockaddr_storage peer; /* the client's address (policies: aws:SourceIp) */
    struct s3_bref b;             /* the request's bucket (s3__op_bucket) */
    bool authz_done;              /* s3__authz decided this request */
    struct s3_route rt;      /* what is asked */
    uint64_t bucket_ino;
    bool tls; /* the connection is TLS (no zero-copy) */
    uint64_t bytes_in, bytes_out;
    void *opdata; /* op-private */

    /* authentication (s3_auth.c) */
    struct s3_ctx_auth {
        struct srv_sigv4_auth sig;
        unsigned char skey[32]; /* signing key, for aws-chunked signatures */
        bool v2;                /* signed with AWS Signature Version 2 */
        bool post;              /* a browser form upload's signed policy (POST Object) */
    } auth;

    /* the request body (s3_body.c) */
    struct s3_ctx_in {
        enum s3_body_mode mode;
        struct evbuffer *buf; /* payload bytes not yet handed to the op */
        uint64_t limit;       /* XML bodies */
        bool complete;        /* the HTTP message is complete */
        bool aws_chunked;
        struct s3_chunked *ck; /* aws-chunked decoder (heap), when aws_chunked */
        struct s3_form *form;  /* a browser form's decoder (POST Object, arena) */
        int64_t decoded_len;   /* x-amz-decoded-content-length, -1 if absent */
        int err;               /* the body failed: the internal error, or SRV_EBADREQ with ... */
        enum s3_err s3err;     /* ... the S3-only code to answer (S3E_NONE: answer err) */
        const char *errmsg;
        struct srv_md5 md5; /* digests of the payload (STREAM ops: md5 is the ETag) */
        EVP_MD_CTX *sha256;
        struct s3_cksum cks;      /* x-amz-checksum-* being verified */
        char cks_expect[100];     /* expected value (header) or "" (trailer) */
    } in;

    /* the upload stream (STREAM ops, s3_body.c): payload fills cbuf[ccur] (the
     * socket is read straight into it when it can be); a full one goes to the
     * workers while the other fills, so at most two chunks per connection exist */
    struct s3_ctx_wr {
        struct core_upload *up;
        unsigned char *cbuf[2];    /* page-aligned chunk buffers, made on first use */
        size_t ccap[2];            /* their sizes (the first is the declared size if smaller) */
        int ccur;                  /* the one being filled */
        size_t cfill;              /* payload bytes in it */
        const unsigned char *wptr; /* the chunk in flight to the workers, wlen long */
        size_t wlen;
        int jobs; /* hash + write jobs of the chunk still running */
        bool writing;
        int rc;
        uint64_t written;
    } wr;

    /* the response (s3_resp.c) */
    struct s3_ctx_out {
        int status;
        struct evbuffer *hdrs; /* "Name: value\r\n" lines */
        struct evbuffer *body;
        bool head; /* HEAD: headers only */
        int err;   /* internal error, for metrics */
        bool close_after;
    } out;

    /* a streamed GET body (s3_get.c) */
    struct s3_ctx_get {
        bool stream;
        uint64_t ino;
        uint64_t off, end; /* off: next byte to send */
        bool ref_held;
        uint64_t next; /* next offset to request */
        struct s3_rslot {
            uint64_t off;
            size_t len, n;
            void *buf;
            int rc;
            bool done;
        } rs[S3_READS_INFLIGHT]; /* reads in flight, appended in offset order */
        int rs_head, rs_count;
        bool need_data; /* headers are ready, the body needs a data step (worker) */
        bool zc;        /* streamed from file segments (sendfile), not core_read copies */
        bool zc_hot;    /* the last window came from the page cache (no copy): larger windows */
        bool zc_head;   /* the response head is in the output (written with the first window) */
        int again;      /* GETs redone because the object went away before its first window */
        struct s3_zwin *zw[S3_ZC_INFLIGHT]; /* windows prepared or being prepared, in order */
        int zw_head, zw_count;
    } get;

    /* CopyObject / UploadPartCopy moving its data: the op prepares it and
     * copies each step on a worker (s3_op_object.c); the loop admits every
     * step's bytes, as a read and as a write, before it runs (s3_req.c) */
    struct s3_ctx_copy {
        bool active;                 /* set by the op: s3__op_done moves the data first */
        bool finished;               /* s3__copy_end_work ran: answer */
        bool failed;                 /* the answer is an error: the end step only cleans up */
        uint64_t off, end;           /* next source byte to copy; end of the copy */
        uint64_t r_credit, w_credit; /* admitted, not yet copied */
        uint64_t r_left, w_left;     /* not yet admitted */
        bool r_started;              /* the read operation was charged */
        enum qos_class asking;       /* the side whose piece waits */
        uint64_t step;               /* bytes of the step on a worker */
        int rc;                      /* the step failed */
        struct s3_copy *op;          /* the op's own state (arena) */
        /* the source (arena): where the read side lands, for QoS levels */
        const char *src_bucket, *src_key;
        size_t src_bucketlen, src_keylen;
    } copy;

    /* QoS admission (s3_req.c) */
    struct s3_ctx_qos {
        bool waiting; /* queued in qos_admit_piece; cancel if the connection goes */
        void (*next)(struct s3_ctx *x); /* runs when a waiting piece was decided */
        void (*then)(struct s3_ctx *x); /* s3__ctx_admit: runs once admitted */
        bool sync;                      /* inside qos_admit_piece: a decision there is only noted */
        bool now;                       /* ... and there was one */
        int err;                        /* the decision: 0 admitted, SRV_ETHROTTLE */
        uint64_t piece;                 /* bytes of the piece being (or last) admitted */
        /* Shaping (qos_admit_piece): a body moves only as far as its admitted
         * bytes; the next piece is admitted before it is read or sent. */
        bool shaped;     /* this request's bytes go in pieces */
        bool applies;    /* a GET: QoS applies to the principal (decided at op start) */
        uint64_t credit; /* bytes admitted, not yet read/sent */
        uint64_t left;   /* bytes not yet admitted (UINT64_MAX: unknown, a body without length) */
        bool refused;    /* QoS refused a piece: refusal says why (s3__qos_why) */
        struct qos_refusal refusal;
        char why[192];        /* the SlowDown message (s3__qos_why) */
        struct qos_memo memo; /* the request's own bucket/key resolved, for every piece */
    } qos;
};

/** Add a response header with a plain value (no formatting). */
void s3__resp_hdr(struct s3_ctx *x, const char *name, const char *val);
/** Add a response header (value printf-formatted). */
void s3__resp_header(struct s3_ctx *x, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Make the response the S3 answer of internal error @p err (common/srv_err.h) in the
 * context of this request: an object's (NoSuchKey) or a bucket's (NoSuchBucket).
 * @p msg NULL: the map's message. */
void s3__resp_err(struct s3_ctx *x, int err, const char *msg);
/** Make the response the S3-only error @p e (s3_error.h); @p msg NULL: its default message. */
void s3__resp_s3err(struct s3_ctx *x, enum s3_err e, const char *msg);
/** Begin a 200 XML body: writes the XML declaration and sets Content-Type. */
void s3__resp_xml(struct s3_ctx *x);

/* operation tables (s3_op_*.c) */
extern const struct s3_op s3_op_list_buckets, s3_op_create_bucket, s3_op_delete_bucket,
    s3_op_head_bucket, s3_op_bucket_location, s3_op_list_objects, s3_op_list_objects_v2,
    s3_op_list_versions, s3_op_bucket_config, s3_op_put_object, s3_op_get_object, s3_op_head_object,
    s3_op_delete_object, s3_op_delete_objects, s3_op_copy_object, s3_op_get_tagging,
    s3_op_put_tagging, s3_op_delete_tagging, s3_op_get_object_acl, s3_op_put_object_acl,
    s3_op_put_bucket_acl, s3_op_get_attributes, s3_op_put_bucket_policy, s3_op_delete_bucket_policy,
    s3_op_put_pab, s3_op_delete_pab, s3_op_put_ownership, s3_op_delete_ownership, s3_op_put_cors,
    s3_op_delete_cors, s3_op_cors_preflight, s3_op_post_object, s3_op_mpu_create,
    s3_op_mpu_upload_part, s3_op_mpu_upload_part_copy, s3_op_mpu_complete, s3_op_mpu_abort,
    s3_op_mpu_list_parts, s3_op_mpu_list_uploads, s3_op_get_versioning, s3_op_put_versioning,
    s3_op_get_objlock, s3_op_put_objlock, s3_op_get_retention, s3_op_put_retention,
    s3_op_get_legal_hold, s3_op_put_legal_hold, s3_op_get_lifecycle, s3_op_put_lifecycle,
    s3_op_delete_lifecycle;

#define S3_EMPTY_MD5 "d41d8cd98f00b204e9800998ecf8427e" /* ETag of empty content */

/** The user of access key @p akey: its secret (TENANT_SECRET_MAX + 1 bytes) and principal
 * (s3_auth.c). @return 0, or -1 with InvalidAccessKeyId / AccessDenied (disabled) set. */
int s3__auth_key(struct s3_ctx *x, const char *akey, char *secret, struct core_principal *p);
/** Decoded payload bytes of x (@p arg): into the upload's chunk (s3_body.c; the callback of
 * the aws-chunked and form decoders). @return 0, or -1 with the body failed. */
int s3__body_payload(void *arg, const char *data, size_t len);
/** Worker: copy x->copy.step bytes of a copy's source from x->copy.off into its
 * upload (s3_op_object.c); x->copy.rc on failure. */
void s3__copy_step_work(struct s3_ctx *x);
/** Worker: a copy's last step: commit and set the answer or, when
 * x->copy.failed, drop the upload and the source's hold. */
void s3__copy_end_work(struct s3_ctx *x);
/** Loop thread: GET or HEAD of an object from core_key_peek (the ops' fast path). */
enum s3_fast s3__get_fast(struct s3_ctx *x);
/** Worker: the data step after S3_FAST_DATA (looks the key up again if the
 * object went away meanwhile). */
void s3__get_data_work(struct s3_ctx *x);
/** Worker: the whole GET again (its object went away before any byte was sent). */
void s3__get_again_work(struct s3_ctx *x);

/* shared by the ops (s3_op_object.c) */
/** Look up the request's bucket (x->b, x->bucket_ino) and decide the op's action when it is
 * checked on the bucket (x->rt.op: action, az). @return 0 or responds and returns < 0. */
int s3__op_bucket(struct s3_ctx *x);
/** s3__op_bucket, then the request's object, decided for the op's action on it.
 * @param[out] info its attributes (info->meta NULL), @p meta its decoded metadata.
 * @return 0 or responds and returns < 0. */
int s3__op_object(struct s3_ctx *x, struct core_objinfo *info, struct s3_meta *meta);
/** GET ?SUB of a configuration the bucket holds (s3_op_acl.c: ?acl; s3_op_bset.c: ?policy,
 * ?policyStatus, ?publicAccessBlock, ?ownershipControls): @return true when answered. */
bool s3__bcfg_get(struct s3_ctx *x, const char *sub);
bool s3__bset_get(struct s3_ctx *x, const char *sub);
/** GET ?cors of a bucket that has a CORS configuration (s3_cors.c): @return true when answered. */
bool s3__cors_get(struct s3_ctx *x);
/** The CORS headers of an actual request with an Origin, per x->b's rules (s3_cors.c). */
void s3__cors_actual(struct s3_ctx *x);
/** The IAM action of GET bucket ?SUB, or NULL (s3_op_bucket.c). */
const char *s3__bucket_config_action(const char *sub);
/** Parse x-amz-meta-* / stored headers / tagging of the request into @p m. @return 0, -EINVAL
 * (bad metadata or tags), -ENOTSUP (a protection that is not built: ACL grants, SSE, object
 * lock); on error the response is set. */
int s3__op_meta_from_req(struct s3_ctx *x, struct s3_meta *m);
/** Emit stored headers and user metadata of @p m as response headers. */
void s3__op_meta_to_resp(struct s3_ctx *x, const struct s3_meta *m);
/** Parse a URL-encoded tag set ("k1=v1&k2=v2"). @return 0, -EINVAL (message in @p why). */
int s3__tags_parse_query(struct s3_arena *a, const char *s, struct s3_meta *m, const char **why);

/* shared by the listings (s3_op_bucket.c) */
/* <Owner> of listing entries: the last owner's element is kept, as a listing's keys
 * mostly share their owner (its display name costs a scan of the tenant's users). */
struct s3_owner_cache {
    bool set;
    uint32_t uid;
    const char *xml;
};
/** User @p uid as an <Owner> element. */
void s3__owner_xml(struct s3_ctx *x, struct evbuffer *b, uint32_t uid, struct s3_owner_cache *oc);
/** Append "<tag>s</tag>", @p s URL-encoded when @p url (encoding-type=url) else XML-escaped. */
void s3__list_text(bool url, struct evbuffer *b, const char *tag, const char *s, size_t n);
/** The max-keys parameter (default and cap 1000). @return 0, or responds and returns -1. */
int s3__parse_max_keys(struct s3_ctx *x, uint32_t *out);

/* lifecycle configurations (s3_lc.c: pure; the operations and the worker: s3_lifecycle.c) */
#define S3_LC_RULES_MAX 1000
#define S3_LC_TAGS_MAX 10
struct s3_lc_tag {
    const char *key, *val;
    size_t klen, vlen;
};
struct s3_lc_trans {
    int64_t days; /* with date 0 */
    time_t date;
    const char *sclass;
};
struct s3_lc_rule {
    const char *id; /* "" when none */
    bool enabled;
    /* the filter: prefix (NULL: none), tags, sizes (-1: none); legacy_prefix: the rule's
     * own <Prefix>; and_form: written with <And> */
    bool legacy_prefix, and_form;
    const char *prefix;
    size_t prefixlen;
    struct s3_lc_tag *tags;
    size_t ntags;
    int64_t size_gt, size_lt;
    /* actions (0 / -1: none) */
    int64_t exp_days;
    time_t exp_date;
    int exp_dmarker; /* ExpiredObjectDeleteMarker: -1 none, 0 false, 1 true */
    int64_t nc_days, nc_newer;
    int64_t abort_days;
    struct s3_lc_trans *trans, *nctrans;
    size_t ntrans, nnctrans;
};
struct s3_lc {
    struct s3_lc_rule *rules;
    size_t n;
};
/** Parse and validate a LifecycleConfiguration document (arena copies).
 * @return 0, SRV_EBADREQ (MalformedXML), -EINVAL (InvalidArgument); @p why says which. */
int s3__lc_parse(struct s3_arena *a, const char *doc, size_t len, struct s3_lc *out,
                 const char **why);
/** Whether a rule moves data (Transition, NoncurrentVersionTransition). */
bool s3__lc_has_transition(const struct s3_lc *lc);
/** The Transitions of @p lc against the bucket's remote tier: @p tier_class is the S3
 * storage class its tier policy stands for (NULL: the bucket has no tier policy); a
 * versioned bucket's Transitions are checked the same (they move current versions). Pure.
 * @return 0 (fine, or no Transition), SRV_ENOTSUPP (a NoncurrentVersionTransition: 501),
 * or -EINVAL with @p e set to
 * S3E_INVALID_STORAGE_CLASS (a class S3 does not transition to, or not the tier's) or
 * S3E_INVALID_REQUEST (no tier policy); @p why says which. */
int s3__lc_check_tier(const struct s3_lc *lc, const char *tier_class, enum s3_err *e,
                      const char **why);
/** The S3 storage class bucket @p bucket's tier policy stands for (a static string), or
 * NULL (no tier policy). (s3_lifecycle.c) */
const char *s3__lc_tier_class(struct core *c, const struct core_principal *p, uint64_t bucket);
/** The storage class shown for a file (attributes @p at) of bucket @p bucket: the class
 * the bucket's remote tier stands for while the tier has evicted its bytes, else
 * STANDARD (also for an evicted file whose bucket lost its tier policy). @p cache: NULL
 * or a slot (NULL at first) that keeps the bucket's class across the calls of one
 * request. (s3_lifecycle.c) */
const char *s3__storage_class(struct s3_ctx *x, uint64_t bucket, const struct core_attr *at,
                              const char **cache);
/** The canonical document of @p lc (what is stored and what GET answers). */
void s3__lc_xml(const struct s3_lc *lc, struct evbuffer *b);
/** Whether enabled rule @p r's filter takes an object (@p meta: its tags, may be NULL). */
bool s3__lc_match(const struct s3_lc_rule *r, const char *key, size_t klen, uint64_t size,
                  const struct s3_meta *meta);
/** Whether @p days lifecycle days have passed since @p since at @p now: with 86400-second
 * days S3's rule (since + days, rounded up to the next midnight UTC), with shorter (test)
 * days since + days * @p day_s. */
bool s3__lc_due(int64_t since, int64_t days, int64_t now, int64_t day_s);

/* versions and object lock (s3_op_version.c) */
/** The x-amz-object-lock-* headers of a request into @p lk (@p has: any was given; the
 * request's bucket, x->bucket_ino, must have object lock). @return 0, or responds
 * (InvalidArgument, InvalidRequest) and returns -1. */
int s3__lock_from_req(struct s3_ctx *x, struct core_lock *lk, bool *has);
/** Response headers of a version: x-amz-version-id (when it has one), x-amz-delete-marker,
 * x-amz-object-lock-mode/-retain-until-date/-legal-hold (when set). */
void s3__resp_version(struct s3_ctx *x, const struct core_objinfo *oi);
/** The IAM action a request on one version checks instead of @p action (s3:GetObject ->
 * s3:GetObjectVersion, ...); @p action itself when it has no version form. */
const char *s3__version_action(const char *action);
/** x-amz-bypass-governance-retention of a request on x->b: CORE_DEL_BYPASS when asked and
 * allowed (s3:BypassGovernanceRetention), 0 when not asked, -1 with 403 set when refused. */
int s3__bypass_flags(struct s3_ctx *x);

#endif
