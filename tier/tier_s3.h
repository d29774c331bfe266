/* SPDX-License-Identifier: Apache-2.0
 * tier_s3: the remote tier's own S3 client, on libevent (bufferevents,
 * bufferevent_openssl for https) and OpenSSL, signing with sigv4/.
 *
 * One client (struct tier_s3) talks to one remote: an endpoint, a bucket in
 * it, an optional key prefix, one region and one key pair. It is bound to one
 * libevent event_base (its loop): every request runs there, every callback
 * runs on that loop's thread, and every function except tier_s3_new(),
 * tier_s3_run() and tier_s3_strerror() must be called on that thread. To use
 * one remote from several loops, make one client per loop (each has its own
 * connection bound), or hand requests to the owning loop (tier_s3_run() from a
 * worker thread does exactly that and waits).
 *
 * Connections: a keep-alive pool per client, at most max_conns open (idle or
 * busy); a request takes the most recently used idle connection, else opens a
 * new one while under the bound, else waits in FIFO order for one. Every
 * socket has TCP_NODELAY. An idle connection is closed after keepalive_ms, or
 * when the remote closes it; a request that finds its reused connection
 * closed by the remote before any answer byte arrived is sent once more on a
 * new connection when that is safe (its body can be sent again and it is not
 * a POST). HTTP/1.1 only, one request at a time per connection (no pipelining).
 *
 * Timeouts (each 0 = the default): connect_timeout_ms bounds the TCP connect,
 * and then the TLS handshake (each); first_byte_timeout_ms runs from the
 * last request byte written to the first answer byte (a CompleteMultipart-
 * Upload of many parts can take long on some stores); idle_timeout_ms is the
 * longest pause allowed
 * while sending the request or receiving the answer. Each ends the request
 * with -ETIMEDOUT (retryable) and closes its connection.
 *
 * Keys: the caller names objects by their bucket-relative key ("a/b.bin");
 * the client prepends the configured prefix, and strips it again from keys in
 * listings. Keys are sent percent-encoded (RFC 3986 unreserved kept, '/' kept),
 * listings are asked with encoding-type=url and decoded.
 *
 * Signing: SigV4 header form, service "s3". Over http the payload's SHA-256
 * is signed (computed here for buffer bodies on the loop thread, or given by
 * the caller in op->sha256_hex: required for source bodies); over https the
 * payload is sent as UNSIGNED-PAYLOAD and a buffer body carries Content-MD5
 * (computed here unless given). Every x-amz-* header, Content-Type,
 * Content-MD5, Range and If-Match are signed. Secrets are copied, wiped on
 * free, and never logged.
 *
 * Errors: every request ends with one tier_s3_result whose err is 0 or a
 * negative code from this list (and `retryable` says whether trying the same
 * request again later can succeed):
 *
 *   local and transport                                          retryable
 *   -EINVAL         bad op (no key, key or value too long, CR/LF   no
 *                   in a header value, source body without
 *                   sha256_hex over http, part number not 1..10000)
 *   -ENOMEM         out of memory                                  no
 *   -ECANCELED      tier_s3_cancel(), or the client was freed      no
 *   -ECONNREFUSED   nobody listens at the endpoint                 yes
 *   -EHOSTUNREACH, -ENETUNREACH  no route to the endpoint          yes
 *   -ETIMEDOUT      a connect, first-byte or idle timeout; or the  yes
 *                   remote's RequestTimeout
 *   -ECONNRESET     the connection broke or closed before the      yes
 *                   answer was complete (remote killed, reset)
 *   -EPIPE          the remote closed while we were sending        yes
 *   -EPROTO         the answer is not HTTP/1.x we can use          yes
 *                   (malformed, headers over 64 KiB, a Range
 *                   ignored, an XML body over 64 MiB or without
 *                   the expected elements)
 *   SRV_ETLS        TLS handshake failed or the certificate did    no
 *                   not verify (the message says which)
 *   remote answers (res->status, res->code and res->message say what the remote said)
 *   -ENOENT         NoSuchKey, NoSuchUpload, a 404 of HEAD          no
 *   SRV_ENOBUCKET   NoSuchBucket                                   no
 *   SRV_EAUTH       InvalidAccessKeyId, SignatureDoesNotMatch,     no
 *                   AuthorizationHeaderMalformed (often: wrong
 *                   region), RequestTimeTooSkewed, Invalid/Expired
 *                   token
 *   -EACCES         AccessDenied (any 403 without a code)          no
 *   SRV_EPRECOND    PreconditionFailed (412: If-Match)             no
 *   -ERANGE         InvalidRange (416)                             no
 *   -EFBIG          EntityTooLarge                                 no
 *   -EDQUOT         QuotaExceeded (the remote bucket is full)      no
 *   -EINVAL         InvalidArgument, InvalidRequest, InvalidPart,  no
 *                   InvalidPartOrder, EntityTooSmall, MalformedXML,
 *                   a redirect (3xx: wrong endpoint or region)
 *   -EINVAL         BadDigest, XAmzContentSHA256Mismatch (the      yes
 *                   bytes changed on the way)
 *   -EAGAIN         SlowDown, 503, 429                             yes
 *   -EIO            InternalError and any other 5xx                yes
 *   SRV_EBADREQ     any other 4xx                                  no
 *
 * Thread: see above; tier_s3_new() may block (name resolution, CA loading). */
#ifndef TIER_S3_H
#define TIER_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct event_base;
struct evbuffer;
struct tier_s3;
struct tier_s3_req;

#define TIER_S3_KEY_MAX 1024   /* longest bucket-relative key plus prefix, bytes */
#define TIER_S3_ETAG_MAX 80    /* ETag without its quotes, NUL included */
#define TIER_S3_PAUSE 1        /* data/source callbacks: stop until tier_s3_resume() */

/** How to reach one remote. Strings are copied by tier_s3_new(). */
struct tier_s3_config {
    const char *endpoint;      /* "http://host[:port]" or "https://host[:port]" (no path) */
    const char *region;        /* signing region; NULL or "": "us-east-1" */
    const char *bucket;        /* the remote bucket (required) */
    const char *prefix;        /* prepended to every key; NULL or "": none */
    const char *access_key;    /* required */
    const char *secret_key;    /* required; wiped from memory by tier_s3_free() */
    bool virtual_host;         /* bucket.host addressing; false: path style (/bucket/key) */
    bool tls_no_verify;        /* https: accept any certificate (tests only) */
    const char *ca_file;       /* https: PEM CA bundle; NULL: the system's default paths */
    const char *connect_host;  /* connect to this host (name or address) instead of the
                                * endpoint's; Host header and TLS name are unchanged */
    int max_conns;             /* connections open at once (default 16, at most 1024) */
    int connect_timeout_ms;    /* default 10000 */
    int first_byte_timeout_ms; /* default 120000 */
    int idle_timeout_ms;       /* default 30000 */
    int keepalive_ms;          /* idle connections are closed after this; default 30000 */
};

/** A name and a value (user metadata: the name without "x-amz-meta-"). */
struct tier_s3_kv {
    char *name;
    char *value;
};

/** What an answer says about one object. Empty fields were not in the answer. */
struct tier_s3_obj {
    uint64_t size;                /* whole object's size (HEAD, GET: from Content-Range
                                   * when ranged; PUT: bytes sent) */
    char etag[TIER_S3_ETAG_MAX];  /* without quotes */
    time_t last_modified;         /* 0 when absent */
    char version_id[128];         /* x-amz-version-id ("" when unversioned) */
    char content_type[128];
};

/** One listed object (TIER_S3_LIST_OBJECTS) or multipart upload (TIER_S3_MPU_LIST). */
struct tier_s3_entry {
    char *key;                    /* bucket-relative: the configured prefix is stripped */
    uint64_t size;                /* objects only */
    char etag[TIER_S3_ETAG_MAX];  /* objects only, without quotes */
    time_t time;                  /* LastModified, or the upload's Initiated */
    char *upload_id;              /* uploads only */
};

/** The outcome of one request. Owned by the request and valid only during the
 * done callback, unless moved out with tier_s3_result_take(). */
struct tier_s3_result {
    int err;                 /* 0 or a negative error (list in the file comment) */
    bool retryable;          /* trying again later may succeed */
    int status;              /* HTTP status; 0 when no answer came */
    char code[64];           /* the remote's S3 error code ("NoSuchKey"), or "" */
    char message[320];       /* what went wrong, for people: the remote's Message or ours */
    char request_id[80];     /* x-amz-request-id of the answer */
    struct tier_s3_obj obj;  /* HEAD, GET, PUT, MPU_PART (etag), MPU_COMPLETE (etag),
                              * COPY_OBJECT, MPU_PART_COPY (etag) */
    struct tier_s3_kv *meta; /* HEAD, GET: the x-amz-meta-* headers, names lower case */
    size_t nmeta;
    uint64_t range_off;      /* GET: the first byte delivered (Content-Range) */
    uint64_t bytes;          /* GET: body bytes delivered; PUT/MPU_PART: bytes sent */
    struct evbuffer *body;   /* GET without on_data: the body */
    char *upload_id;         /* MPU_CREATE */
    struct tier_s3_entry *entries;  /* LIST_OBJECTS, MPU_LIST */
    size_t nentries;
    char **prefixes;         /* LIST_OBJECTS with a delimiter: CommonPrefixes, stripped */
    size_t nprefixes;
    bool truncated;          /* LIST_OBJECTS, MPU_LIST: there is another page */
    char *next_token;        /* LIST_OBJECTS: continuation token of the next page */
    char *next_key_marker;   /* MPU_LIST: markers of the next page (stripped key) */
    char *next_upload_marker;
};

/** Move @p src's contents into @p dst (which must be zeroed or finished);
 * @p src is left empty. Use it in a done callback to keep lists or a body. */
void tier_s3_result_take(struct tier_s3_result *dst, struct tier_s3_result *src);
/** Free what a result owns and zero it. */
void tier_s3_result_fini(struct tier_s3_result *res);

enum tier_s3_opcode {
    TIER_S3_HEAD_OBJECT = 1, /* key; if_match */
    TIER_S3_GET_OBJECT,      /* key; off, len; if_match; on_head, on_data */
    TIER_S3_PUT_OBJECT,      /* key; body; content_type, meta */
    TIER_S3_DELETE_OBJECT,   /* key (a missing key is success, as S3 answers) */
    TIER_S3_MPU_CREATE,      /* key; content_type, meta -> res->upload_id */
    TIER_S3_MPU_PART,        /* key, upload_id, part_number; body -> res->obj.etag */
    TIER_S3_MPU_COMPLETE,    /* key, upload_id, parts -> res->obj.etag (empty when the
                              * remote leaves it out, as Ceph RGW 16 does: HEAD for it) */
    TIER_S3_MPU_ABORT,       /* key, upload_id */
    TIER_S3_MPU_LIST,        /* prefix; key_marker, upload_marker; max */
    TIER_S3_LIST_OBJECTS,    /* ListObjectsV2: prefix, delimiter, token, start_after; max */
    TIER_S3_CHECK,           /* list one key under the configured prefix: reachability,
                              * TLS, credentials and bucket, each with its own message */
    TIER_S3_COPY_OBJECT,     /* key <- copy_from (same bucket and prefix), server-side;
                              * copy_if_match; with meta_replace: content_type, meta
                              * (REPLACE), else the source's (COPY) -> res->obj.etag */
    TIER_S3_MPU_PART_COPY,   /* key, upload_id, part_number <- copy_from's [off, off+len)
                              * (UploadPartCopy); copy_if_match -> res->obj.etag */
};
#define TIER_S3_OP_LAST TIER_S3_MPU_PART_COPY

/** One part of a multipart upload, for TIER_S3_MPU_COMPLETE. */
struct tier_s3_part {
    int number;       /* 1..10000, ascending in the array */
    const char *etag; /* as MPU_PART returned it (quotes optional) */
};

/** PUT body source: append up to @p max bytes to @p dst. @return the count
 * appended (> 0), 0 when none are ready yet (call tier_s3_resume() once there
 * are), or a negative error that ends the request with it. Called on the loop
 * thread whenever the connection can take more, until size bytes were given. */
typedef ssize_t (*tier_s3_source_cb)(void *arg, struct evbuffer *dst, size_t max);
/** GET: the answer's headers are in (@p res->obj, meta, range_off filled; 2xx only).
 * @return 0 to go on, or a negative error that ends the request with it. */
typedef int (*tier_s3_head_cb)(void *arg, const struct tier_s3_result *res);
/** GET: body bytes as they arrive, in order. Take what you want from @p data
 * (evbuffer_remove_buffer moves without copying); what is left is dropped.
 * @return 0 to go on, TIER_S3_PAUSE to stop reading until tier_s3_resume(), or
 * a negative error that ends the request with it. */
typedef int (*tier_s3_data_cb)(void *arg, struct evbuffer *data);
/** The request ended: runs exactly once, on the loop thread. @p res is valid
 * during the call (take parts of it with tier_s3_result_take()). The request
 * handle is gone when it returns. */
typedef void (*tier_s3_done_cb)(void *arg, struct tier_s3_result *res);

/** One request. Everything it points to must stay valid until done runs
 * (the body buffer too: it is sent without a copy). */
struct tier_s3_op {
    enum tier_s3_opcode code;
    const char *key;              /* bucket-relative key */
    /* GET: the range [off, off + len); len 0 = to the end */
    uint64_t off, len;
    /* GET: the object's size when the caller knows it (0: not known). A range that is
     * all of it (off 0, len obj_size) is then asked as a plain GET, without a Range
     * header: Ceph RGW spends ~0.1 ms of its gateway's and as much of its OSD's CPU
     * less on a 150 KB object (docs/benchmarks.md), and the answer (200) gives the
     * object's size in its Content-Length (res->obj.size) */
    uint64_t obj_size;
    const char *if_match;         /* HEAD, GET: ETag the object must have (412 otherwise) */
    /* PUT, MPU_PART body: a buffer, or a source of exactly size bytes */
    const void *data;
    uint64_t size;
    tier_s3_source_cb source;
    void *source_arg;
    const char *sha256_hex;       /* payload SHA-256 (64 hex) if known; required for a
                                   * source body over http */
    const char *content_md5;      /* base64 MD5 of the body if known */
    /* PUT, MPU_CREATE */
    const char *content_type;
    const struct tier_s3_kv *meta; /* names without "x-amz-meta-" */
    size_t nmeta;
    /* COPY_OBJECT, MPU_PART_COPY: the source's bucket-relative key (in the same remote
     * bucket, under the same prefix), and the ETag it must still have (412 otherwise:
     * SRV_EPRECOND); MPU_PART_COPY copies the source's [off, off + len) */
    const char *copy_from;
    const char *copy_if_match;
    bool meta_replace; /* COPY_OBJECT: content_type and meta replace the source's */
    /* multipart */
    const char *upload_id;
    int part_number;
    const struct tier_s3_part *parts;
    size_t nparts;
    /* listings (prefix is bucket-relative; the configured prefix is added) */
    const char *prefix, *delimiter, *token, *start_after, *key_marker, *upload_marker;
    int max;                      /* max-keys / max-uploads (0: the remote's default) */
    /* callbacks */
    tier_s3_head_cb on_head;
    tier_s3_data_cb on_data; /* NULL: a GET body is collected in res->body, or dest */
    /* GET without on_data: a 2xx body is copied into dest as it arrives, never collected
     * (more than dest_len bytes end the request with -EPROTO); res->bytes counts it. Over
     * http a Content-Length body is read from the socket straight into dest */
    void *dest;
    size_t dest_len;
    tier_s3_done_cb done;         /* required */
    void *arg;
};

/** Counters of one client (read on its loop thread). */
struct tier_s3_stats {
    uint64_t requests;     /* requests started */
    uint64_t conns_opened; /* connections opened (TCP connects) */
    uint64_t conns_reused; /* requests sent on a connection that served one before */
    uint64_t resent;       /* requests sent again after a stale reused connection */
    int conns_open;        /* now: open connections (idle or busy) */
    int conns_idle;        /* now: idle in the pool */
    int queued;            /* now: requests waiting for a connection */
};

/** Make a client for @p cfg on loop @p base. Resolves the host (blocking, so
 * call it where blocking is fine), sets up TLS for https (CA bundle loaded).
 * @param[out] out the client; free it with tier_s3_free() on the loop thread.
 * @param[out] why on error, a message for people (may be NULL), @p whylen bytes.
 * @return 0, -EINVAL (endpoint not http(s)://host[:port], no bucket or keys, a bad
 * value), -EHOSTUNREACH (the host does not resolve), SRV_ETLS (the CA bundle
 * cannot be loaded), -ENOMEM. */
int tier_s3_new(const struct tier_s3_config *cfg, struct event_base *base, struct tier_s3 **out,
                char *why, size_t whylen);

/** Cancel every request (each done runs before this returns: with -ECANCELED,
 * or with its outcome if it had just ended), close every connection, wipe
 * the secret and free the client. Loop thread. Requests started from those
 * done callbacks are refused with -ECANCELED. NULL is a no-op. */
void tier_s3_free(struct tier_s3 *s3);

/** Start @p op. On 0, op->done runs exactly once, later, on the loop thread
 * (never inside this call). On a negative return nothing was started and no
 * callback runs.
 * @param[out] reqp the request's handle, for tier_s3_resume()/tier_s3_cancel();
 * valid until done returns (may be NULL).
 * @return 0, -EINVAL (op malformed: see the file comment), -ENOMEM, -ECANCELED
 * (the client is being freed). */
int tier_s3_start(struct tier_s3 *s3, const struct tier_s3_op *op, struct tier_s3_req **reqp);

/** Resume a GET paused by its data callback, or a PUT whose source returned 0.
 * No-op when the request is not waiting. Loop thread. */
void tier_s3_resume(struct tier_s3_req *req);

/** End @p req: done runs with -ECANCELED soon (not inside this call), its
 * connection is closed. No-op once the request has ended. Loop thread. */
void tier_s3_cancel(struct tier_s3_req *req);

/** Run @p op on the client's loop and wait for it: for threads other than the
 * loop's (workers, tools), while the loop runs. libevent threading must be on
 * (evthread_use_pthreads() before the base was made). op->done and op->arg
 * are ignored; on_head, on_data and source run on the loop thread.
 * @param[out] res the outcome (free with tier_s3_result_fini()).
 * Never call it on the loop's own thread: it would wait for itself forever.
 * @return res->err (a refused op: its tier_s3_start() error, in res too;
 * -ENOMEM when the request cannot be posted to the loop). */
int tier_s3_run(struct tier_s3 *s3, const struct tier_s3_op *op, struct tier_s3_result *res);

/** Copy the counters of @p s3. Loop thread. */
void tier_s3_stats_get(struct tier_s3 *s3, struct tier_s3_stats *st);

/** Whether an error code from this module is worth retrying later (the table
 * above; BadDigest's -EINVAL is known only from the result's flag). */
bool tier_s3_err_retryable(int err);

/** A short name for an opcode ("GetObject"); "?" when unknown. */
const char *tier_s3_op_name(enum tier_s3_opcode code);

#endif
