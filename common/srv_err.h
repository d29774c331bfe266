/* SPDX-License-Identifier: Apache-2.0
 * srv_err: the one internal error set of s3nfs.
 *
 * Every layer returns 0 or a negative errno; errors errno cannot express use
 * the project range SRV_E* (-20000 and below, clear of LMDB's -30799..-30780).
 * SRV_ERR_MAP is the only place where an internal error meets its S3 code,
 * HTTP status and nfsstat3, so the two front ends cannot drift apart.
 * Thread: any. */
#ifndef SRV_ERR_H
#define SRV_ERR_H

#include <errno.h>

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
#define SRV_ETLS       (-20020) /* tier: TLS handshake or certificate verification failed */

/* X(name, value, s3 code, http status, nfsstat3 number, message)
 * nfsstat3 numbers are RFC 1813's; 10008 = NFS3ERR_JUKEBOX, 70 = STALE. */
#define SRV_ERR_MAP(X)                                                                             \
    X(OK, 0, "OK", 200, 0, "success")                                                              \
    X(EPERM, -EPERM, "AccessDenied", 403, 1, "operation not permitted")                           \
    X(ENOENT, -ENOENT, "NoSuchKey", 404, 2, "no such file or object")                             \
    X(EIO, -EIO, "InternalError", 500, 5, "I/O error")                                             \
    X(EACCES, -EACCES, "AccessDenied", 403, 13, "access denied")                                   \
    X(EEXIST, -EEXIST, "BucketAlreadyOwnedByYou", 409, 17, "already exists")                       \
    X(EXDEV, -EXDEV, "InvalidRequest", 400, 18, "cross-device (cross-bucket/tenant) link")         \
    X(ENOTDIR, -ENOTDIR, "InvalidRequest", 400, 20, "not a directory")                             \
    X(EISDIR, -EISDIR, "InvalidRequest", 400, 21, "is a directory")                                \
    X(EINVAL, -EINVAL, "InvalidArgument", 400, 22, "invalid argument")                             \
    X(EFBIG, -EFBIG, "EntityTooLarge", 400, 27, "file too large")                                  \
    /* the store or the file system under it is full (not a quota): 507, which SDKs do not \
     * retry (a 503 made them send the whole body again up to 5 times) */                        \
    X(ENOSPC, -ENOSPC, "InsufficientStorage", 507, 28, "no space left on the store")               \
    X(EROFS, -EROFS, "AccessDenied", 403, 30, "read-only export")                                  \
    X(EMLINK, -EMLINK, "InvalidRequest", 400, 31, "too many links")                                \
    X(ENAMETOOLONG, -ENAMETOOLONG, "KeyTooLongError", 400, 63, "name too long")                    \
    X(ENOTEMPTY, -ENOTEMPTY, "BucketNotEmpty", 409, 66, "directory or bucket not empty")           \
    X(EDQUOT, -EDQUOT, "QuotaExceeded", 403, 69, "quota exceeded")                                 \
    X(ENOTSUP, -ENOTSUP, "NotImplemented", 501, 10004, "operation not supported")                  \
    X(ELOOP, -ELOOP, "InvalidRequest", 400, 22, "too many symbolic links")                         \
    X(ERANGE, -ERANGE, "InvalidRange", 416, 22, "range not satisfiable")                           \
    X(EAGAIN, -EAGAIN, "SlowDown", 503, 10008, "resource temporarily unavailable")                 \
    X(ENOMEM, -ENOMEM, "InternalError", 500, 5, "out of memory")                                   \
    X(ESRV_AUTH, SRV_EAUTH, "SignatureDoesNotMatch", 403, 13, "authentication failed")             \
    X(ESRV_THROTTLE, SRV_ETHROTTLE, "SlowDown", 503, 10008, "throttled by QoS policy")            \
    X(ESRV_BADREQ, SRV_EBADREQ, "MalformedXML", 400, 22, "malformed request")                      \
    X(ESRV_STALE, SRV_ESTALE, "NoSuchKey", 404, 70, "stale handle")                                \
    X(ESRV_CORRUPT, SRV_ECORRUPT, "InternalError", 500, 5, "data failed its checksum")             \
    X(ESRV_NOTSUPP, SRV_ENOTSUPP, "NotImplemented", 501, 10004, "not implemented")                 \
    X(ESRV_CLASH, SRV_ECLASH, "InvalidRequest", 409, 17, "file/directory name clash")              \
    X(ESRV_BADNAME, SRV_EBADNAME, "InvalidArgument", 400, 22, "name refused by naming rules")      \
    X(ESRV_PRECOND, SRV_EPRECOND, "PreconditionFailed", 412, 10002, "precondition failed")        \
    X(ESRV_NOBUCKET, SRV_ENOBUCKET, "NoSuchBucket", 404, 2, "no such bucket")                     \
    X(ESRV_BADCOOKIE, SRV_EBADCOOKIE, "InvalidArgument", 400, 10003, "bad readdir cookie")        \
    X(ESRV_TOOBIG, SRV_ETOOBIG, "EntityTooLarge", 400, 27, "entity too large")                    \
    X(ESRV_BADVERSION, SRV_EBADVERSION, "InternalError", 500, 5, "unknown store version")        \
    X(ESRV_TLS, SRV_ETLS, "InternalError", 500, 5, "TLS handshake or certificate check failed")

/** @return a static message for @p err (0 or negative); never NULL. */
const char *srv_strerror(int err);
/** @return the S3 error code string for @p err; "InternalError" when unmapped. */
const char *srv_err_s3code(int err);
/** @return the HTTP status for @p err; 500 when unmapped. */
int srv_err_http(int err);
/** @return the nfsstat3 for @p err; NFS3ERR_IO (5) when unmapped. */
int srv_err_nfs3(int err);

#endif
