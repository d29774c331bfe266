/* SPDX-License-Identifier: Apache-2.0
 * srv_err: the one internal error set of s3nfs.
 *
 * Every layer returns 0 or a negative errno; errors errno cannot express use
 * the project range SRV_E* (-20000 and below, clear of LMDB's -30799..-30780).
 * SRV_ERR_MAP is the only place where an internal error meets its S3 codes,
 * HTTP status, nfsstat3 and admin API answer, so the front ends cannot drift
 * apart.
 * Thread: any. */
#ifndef SRV_ERR_H
#define SRV_ERR_H

#include <errno.h>
#include <stddef.h>

#define SRV_EAUTH      (-20001) /* credentials or signature did not verify */
#define SRV_ETHROTTLE  (-20002) /* qos: the bucket is empty and the queue full; retry later */
#define SRV_EBADREQ    (-20003) /* request malformed (bad XML, bad XDR, bad JSON) */
#define SRV_ESTALE     (-20004) /* handle names a deleted inode or another tenant's inode */
#define SRV_ECORRUPT   (-20005) /* a record or extent failed its CRC/version check; logged */
#define SRV_ENOTSUPP   (-20006) /* operation not built (yet); the message says which */
#define SRV_ECLASH     (-20007) /* key would make a file where a directory is, or the reverse */
#define SRV_EBADNAME   (-20008) /* name or key refused by the naming rules */
#define SRV_EPRECOND   (-20009) /* a precondition (If-Match, guard, exclusive verifier) failed */
#define SRV_ENOBUCKET  (-20010) /* no such bucket (S3 needs it apart from ENOENT) */
#define SRV_EBADCOOKIE (-20011) /* readdir cookie/verifier no longer valid */
#define SRV_ETOOBIG    (-20012) /* entity larger than the configured maximum */
#define SRV_EBADVERSION (-20013) /* store written by an unknown or newer schema version */
#define SRV_ENOVERSION (-20014)  /* no such version of a key */
#define SRV_ELOCKED (-20015)     /* the version is protected by object lock (retention, hold) */
#define SRV_EBADSTATE (-20016)   /* the bucket's state forbids it (object lock, versioning) */
#define SRV_ETLS       (-20020) /* tier: TLS handshake or certificate verification failed */
#define SRV_ERECALL (-20021)    /* tier: an evicted file's bytes are being recalled; retry later */
#define SRV_EREMOTECHG (-20022) /* tier: an evicted file's remote copy changed or is gone */
#define SRV_EIMPORT (-20023)    /* tier: a cache bucket's directory cannot be imported now; retry */
#define SRV_EIMPORTFAIL (-20024) /* tier: ... and its remote has failed for tier_recall_fail_ms */

/* X(name, value, S3 code for an object, S3 code for a bucket or the service,
 *   S3 HTTP status, nfsstat3, admin API code, admin API HTTP status, message)
 *
 * One row per internal error, so each has exactly one answer per front end
 * (tests/unit/s3api/test_s3_error.c checks it, and that every S3 code is in
 * docs/s3-compatibility.md). The two S3 code columns differ where S3 tells a
 * missing key from a missing bucket (NoSuchKey / NoSuchBucket) or a bad key
 * from a bad bucket name; the status is the same. S3 codes that no internal
 * error maps to (NoSuchUpload, BadDigest, ...) are s3api's (s3api/s3_error.h).
 * nfsstat3 numbers are RFC 1813's; 10008 = NFS3ERR_JUKEBOX, 70 = STALE.
 * Errors not in the map answer as EIO does (InternalError, NFS3ERR_IO).
 * The table is laid out by hand (two lines a row, columns in place). */
/* clang-format off */
#define SRV_ERR_MAP(X)                                                                             \
    X(OK, 0, "OK", "OK",                                                                           \
      200, 0, "OK", 200, "success")                                                                \
    X(EPERM, -EPERM, "AccessDenied", "AccessDenied",                                               \
      403, 1, "Forbidden", 403, "operation not permitted")                                         \
    X(ENOENT, -ENOENT, "NoSuchKey", "NoSuchBucket",                                                \
      404, 2, "NotFound", 404, "no such file or object")                                           \
    X(EIO, -EIO, "InternalError", "InternalError",                                                 \
      500, 5, "InternalError", 500, "I/O error")                                                   \
    X(EACCES, -EACCES, "AccessDenied", "AccessDenied",                                             \
      403, 13, "Forbidden", 403, "access denied")                                                  \
    /* admin: exports that would make some client's answers ambiguous */                           \
    X(EBUSY, -EBUSY, "InternalError", "InternalError",                                             \
      500, 5, "Conflict", 409, "resource busy or in conflict")                                     \
    X(EEXIST, -EEXIST, "BucketAlreadyOwnedByYou", "BucketAlreadyOwnedByYou",                       \
      409, 17, "AlreadyExists", 409, "already exists")                                             \
    X(EXDEV, -EXDEV, "InvalidRequest", "InvalidRequest",                                           \
      400, 18, "InternalError", 500, "cross-device (cross-bucket/tenant) link")                    \
    /* a file where a key needs a directory: a clash, 409 as SRV_ECLASH */                         \
    X(ENOTDIR, -ENOTDIR, "InvalidRequest", "InvalidRequest",                                       \
      409, 20, "InvalidArgument", 400, "not a directory")                                          \
    /* a directory where a key needs a file: a clash, 409 as SRV_ECLASH */                         \
    X(EISDIR, -EISDIR, "InvalidRequest", "InvalidRequest",                                         \
      409, 21, "InternalError", 500, "is a directory")                                             \
    X(EINVAL, -EINVAL, "InvalidArgument", "InvalidArgument",                                       \
      400, 22, "InvalidArgument", 400, "invalid argument")                                         \
    X(EFBIG, -EFBIG, "EntityTooLarge", "EntityTooLarge",                                           \
      400, 27, "InternalError", 500, "file too large")                                             \
    /* the store or the file system under it is full (not a quota): 507, which SDKs do not         \
     * retry (a 503 made them send the whole body again up to 5 times) */                          \
    X(ENOSPC, -ENOSPC, "InsufficientStorage", "InsufficientStorage",                               \
      507, 28, "InternalError", 500, "no space left on the store")                                 \
    X(EROFS, -EROFS, "AccessDenied", "AccessDenied",                                               \
      403, 30, "InternalError", 500, "read-only export")                                           \
    X(EMLINK, -EMLINK, "InvalidRequest", "InvalidRequest",                                         \
      400, 31, "InternalError", 500, "too many links")                                             \
    X(ENAMETOOLONG, -ENAMETOOLONG, "KeyTooLongError", "KeyTooLongError",                           \
      400, 63, "InvalidArgument", 400, "name too long")                                            \
    X(ENOTEMPTY, -ENOTEMPTY, "BucketNotEmpty", "BucketNotEmpty",                                   \
      409, 66, "NotEmpty", 409, "directory or bucket not empty")                                   \
    X(EDQUOT, -EDQUOT, "QuotaExceeded", "QuotaExceeded",                                           \
      403, 69, "InternalError", 500, "quota exceeded")                                             \
    X(ENOTSUP, -ENOTSUP, "NotImplemented", "NotImplemented",                                       \
      501, 10004, "NotImplemented", 501, "operation not supported")                                \
    X(ELOOP, -ELOOP, "InvalidRequest", "InvalidRequest",                                           \
      400, 22, "InternalError", 500, "too many symbolic links")                                    \
    X(ERANGE, -ERANGE, "InvalidRange", "InvalidRange",                                             \
      416, 22, "InternalError", 500, "range not satisfiable")                                      \
    X(EAGAIN, -EAGAIN, "SlowDown", "SlowDown",                                                     \
      503, 10008, "InternalError", 500, "resource temporarily unavailable")                        \
    X(ENOMEM, -ENOMEM, "InternalError", "InternalError",                                           \
      500, 5, "InternalError", 500, "out of memory")                                               \
    X(ESRV_AUTH, SRV_EAUTH, "SignatureDoesNotMatch", "SignatureDoesNotMatch",                      \
      403, 13, "InternalError", 500, "authentication failed")                                      \
    X(ESRV_THROTTLE, SRV_ETHROTTLE, "SlowDown", "SlowDown",                                        \
      503, 10008, "InternalError", 500, "throttled by QoS policy")                                 \
    X(ESRV_BADREQ, SRV_EBADREQ, "MalformedXML", "MalformedXML",                                    \
      400, 22, "InvalidArgument", 400, "malformed request")                                        \
    X(ESRV_STALE, SRV_ESTALE, "NoSuchKey", "NoSuchBucket",                                         \
      404, 70, "InternalError", 500, "stale handle")                                               \
    X(ESRV_CORRUPT, SRV_ECORRUPT, "InternalError", "InternalError",                                \
      500, 5, "InternalError", 500, "data failed its checksum")                                    \
    X(ESRV_NOTSUPP, SRV_ENOTSUPP, "NotImplemented", "NotImplemented",                              \
      501, 10004, "NotImplemented", 501, "not implemented")                                        \
    X(ESRV_CLASH, SRV_ECLASH, "InvalidRequest", "InvalidRequest",                                  \
      409, 17, "InternalError", 500, "file/directory name clash")                                  \
    X(ESRV_BADNAME, SRV_EBADNAME, "InvalidArgument", "InvalidBucketName",                          \
      400, 22, "InvalidArgument", 400, "name refused by naming rules")                             \
    X(ESRV_PRECOND, SRV_EPRECOND, "PreconditionFailed", "PreconditionFailed",                      \
      412, 10002, "InternalError", 500, "precondition failed")                                     \
    X(ESRV_NOBUCKET, SRV_ENOBUCKET, "NoSuchBucket", "NoSuchBucket",                                \
      404, 2, "NotFound", 404, "no such bucket")                                                   \
    X(ESRV_BADCOOKIE, SRV_EBADCOOKIE, "InvalidArgument", "InvalidArgument",                        \
      400, 10003, "InternalError", 500, "bad readdir cookie")                                      \
    X(ESRV_TOOBIG, SRV_ETOOBIG, "EntityTooLarge", "EntityTooLarge",                                \
      400, 27, "InternalError", 500, "entity too large")                                           \
    X(ESRV_BADVERSION, SRV_EBADVERSION, "InternalError", "InternalError",                          \
      500, 5, "InternalError", 500, "unknown store version")                                       \
    X(ESRV_NOVERSION, SRV_ENOVERSION, "NoSuchVersion", "NoSuchVersion",                            \
      404, 2, "NotFound", 404, "no such version")                                                  \
    /* a version under retention or legal hold: never deleted or changed in place */               \
    X(ESRV_LOCKED, SRV_ELOCKED, "AccessDenied", "AccessDenied",                                    \
      403, 13, "Forbidden", 403, "protected by object lock (retention or legal hold)")             \
    X(ESRV_BADSTATE, SRV_EBADSTATE, "InvalidBucketState", "InvalidBucketState",                    \
      409, 22, "Conflict", 409, "the bucket's versioning or object lock state forbids it")         \
    X(ESRV_TLS, SRV_ETLS, "InternalError", "InternalError",                                        \
      500, 5, "InternalError", 500, "TLS handshake or certificate check failed")                   \
    /* a recall from the remote tier that has not brought the bytes yet (or the remote             \
     * is down): retryable, JUKEBOX over NFS */                                                    \
    X(ESRV_RECALL, SRV_ERECALL, "ServiceUnavailable", "ServiceUnavailable",                        \
      503, 10008, "InternalError", 500, "the file is being recalled from the remote tier: retry")    \
    X(ESRV_REMOTECHG, SRV_EREMOTECHG, "InternalError", "InternalError",                            \
      500, 5, "InternalError", 500, "the remote copy of an evicted file changed or is gone")       \
    /* a directory of a cache bucket never imported, its remote unreachable: retryable (as a       \
     * recall), then an error once the remote has failed for tier_recall_fail_ms */                \
    X(ESRV_IMPORT, SRV_EIMPORT, "ServiceUnavailable", "ServiceUnavailable",                        \
      503, 10008, "InternalError", 500,                                                            \
      "the remote is unreachable while importing a directory of this cache bucket: retry")         \
    X(ESRV_IMPORTFAIL, SRV_EIMPORTFAIL, "InternalError", "InternalError",                          \
      500, 5, "InternalError", 500,                                                                \
      "the remote has been unreachable too long to import a directory of this cache bucket")
/* clang-format on */

/* One row of SRV_ERR_MAP. */
struct srv_err_info {
    int value;             /* 0 or a negative errno / SRV_E* */
    const char *name;      /* "ENOENT", "ESRV_AUTH" */
    const char *s3_key;    /* S3 code when the request names an object */
    const char *s3_bucket; /* S3 code when it names a bucket or the service */
    int s3_http;           /* HTTP status of the S3 answer */
    int nfs3;              /* nfsstat3 */
    const char *admin;     /* admin API code ({"error": ...}) */
    int admin_http;        /* HTTP status of the admin answer */
    const char *msg;       /* default message */
};

/** @return the row of @p err; for an error not in the map a row that answers
 * as EIO does (value @p err, name "unknown", message "internal error"). Never NULL;
 * the row is static. */
const struct srv_err_info *srv_err_info(int err);
/** @return the rows of SRV_ERR_MAP (@p n of them), for tests and docs. */
const struct srv_err_info *srv_err_table(size_t *n);

/** @return a static message for @p err (0 or negative); never NULL. */
const char *srv_strerror(int err);
/** @return the nfsstat3 for @p err; NFS3ERR_IO (5) when unmapped. */
int srv_err_nfs3(int err);

#endif
