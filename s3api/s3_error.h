/* SPDX-License-Identifier: Apache-2.0
 * s3_error: the S3 error codes that no internal error maps to.
 *
 * An answer that comes from an internal error (a core call failed, a name was
 * refused) takes its code and status from common/srv_err.h's SRV_ERR_MAP,
 * through s3__resp_err(). The codes below belong to S3 alone (a multipart
 * upload id that is unknown, a digest that does not match, an HTTP framing
 * error ...): a call site names one by its enum (s3__resp_s3err), and this
 * table gives its code, HTTP status and default message, so no code/status
 * pair is written twice. tests/unit/s3api/test_s3_error.c checks that every
 * code of both tables is listed in docs/s3-compatibility.md with its status.
 * Thread: reentrant (constant tables). */
#ifndef S3_ERROR_H
#define S3_ERROR_H

/* X(name, S3 code, HTTP status, default message) */
#define S3_ERR_MAP(X)                                                                              \
    /* authentication (s3_auth.c) */                                                               \
    X(AUTH_HEADER_MALFORMED, "AuthorizationHeaderMalformed", 400,                                  \
      "the authorization header is malformed")                                                     \
    X(AUTH_QUERY_MALFORMED, "AuthorizationQueryParametersError", 400,                              \
      "the presigned query parameters are malformed")                                              \
    X(INVALID_ACCESS_KEY_ID, "InvalidAccessKeyId", 403,                                            \
      "the access key id does not exist in our records")                                           \
    X(REQUEST_TIME_TOO_SKEWED, "RequestTimeTooSkewed", 403,                                        \
      "the difference between the request time and the server's time is too large")                \
    X(CONTENT_SHA256_MISMATCH, "XAmzContentSHA256Mismatch", 400,                                   \
      "the provided x-amz-content-sha256 does not match what was computed")                        \
    /* HTTP framing and request bodies */                                                          \
    X(BAD_REQUEST, "BadRequest", 400, "malformed HTTP request")                                    \
    X(HEADERS_TOO_LARGE, "RequestHeaderSectionTooLarge", 431,                                      \
      "request line and headers exceed the configured limit")                                      \
    X(REQUEST_TIMEOUT, "RequestTimeout", 408,                                                      \
      "your socket connection was not read from or written to within the timeout")                 \
    X(METHOD_NOT_ALLOWED, "MethodNotAllowed", 405,                                                 \
      "the specified method is not allowed against this resource")                                 \
    X(MISSING_CONTENT_LENGTH, "MissingContentLength", 411,                                         \
      "you must provide the Content-Length HTTP header")                                           \
    X(INCOMPLETE_BODY, "IncompleteBody", 400, "malformed aws-chunked body")                        \
    X(INVALID_DIGEST, "InvalidDigest", 400, "the Content-MD5 you specified was invalid")           \
    X(BAD_DIGEST, "BadDigest", 400,                                                                \
      "the Content-MD5 you specified did not match what we received")                              \
    X(INVALID_REQUEST, "InvalidRequest", 400, "invalid request")                                   \
    X(SERVICE_UNAVAILABLE, "ServiceUnavailable", 503,                                              \
      "the object kept changing while it was read; please retry")                                  \
    /* objects and multipart uploads */                                                            \
    X(METADATA_TOO_LARGE, "MetadataTooLarge", 400,                                                 \
      "your metadata headers exceed the maximum allowed metadata size (2 KB)")                     \
    X(INVALID_TAG, "InvalidTag", 400, "a tag key or value is invalid or repeated")                 \
    /* access control (s3_acl.c, s3_authz.c, s3_policy.c) */                                       \
    X(UNRESOLVABLE_EMAIL, "UnresolvableGrantByEmailAddress", 400,                                  \
      "the e-mail address you provided does not match any account on record")                      \
    X(ACL_NOT_SUPPORTED, "AccessControlListNotSupported", 400, "the bucket does not allow ACLs")   \
    X(MALFORMED_ACL, "MalformedACLError", 400,                                                     \
      "the XML you provided was not well-formed or did not validate against our schema")           \
    X(MALFORMED_POLICY, "MalformedPolicy", 400, "the policy is malformed")                         \
    X(INVALID_BUCKET_ACL_OWNERSHIP, "InvalidBucketAclWithObjectOwnership", 400,                    \
      "bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")            \
    X(BUCKET_EXISTS, "BucketAlreadyExists", 409, "the requested bucket name is not available")     \
    X(ACCESS_FORBIDDEN, "AccessForbidden", 403, "CORSResponse: this CORS request is not allowed")  \
    X(INVALID_PART_NUMBER, "InvalidPartNumber", 416,                                               \
      "the requested partnumber is not satisfiable")                                               \
    X(NO_SUCH_UPLOAD, "NoSuchUpload", 404, "the specified multipart upload does not exist")        \
    X(INVALID_PART, "InvalidPart", 400, "one or more of the specified parts could not be found")   \
    X(INVALID_PART_ORDER, "InvalidPartOrder", 400, "the list of parts was not in ascending order") \
    X(ENTITY_TOO_SMALL, "EntityTooSmall", 400,                                                     \
      "your proposed upload is smaller than the minimum allowed object size")                      \
    /* bucket subresources that are never configured (GET answers "there is none") */              \
    X(NO_SUCH_BUCKET_POLICY, "NoSuchBucketPolicy", 404, "the bucket policy does not exist")        \
    X(NO_SUCH_LIFECYCLE, "NoSuchLifecycleConfiguration", 404,                                      \
      "the lifecycle configuration does not exist")                                                \
    X(NO_SUCH_CORS, "NoSuchCORSConfiguration", 404, "the CORS configuration does not exist")       \
    X(NO_SSE_CONFIG, "ServerSideEncryptionConfigurationNotFoundError", 404,                        \
      "the server side encryption configuration was not found")                                    \
    X(NO_OBJECT_LOCK_CONFIG, "ObjectLockConfigurationNotFoundError", 404,                          \
      "object lock configuration does not exist for this bucket")                                  \
    X(NO_SUCH_OBJECT_LOCK_CONFIG, "NoSuchObjectLockConfiguration", 404,                            \
      "the specified object does not have an object lock configuration")                           \
    X(NO_SUCH_WEBSITE, "NoSuchWebsiteConfiguration", 404,                                          \
      "the specified bucket does not have a website configuration")                                \
    X(NO_REPLICATION_CONFIG, "ReplicationConfigurationNotFoundError", 404,                         \
      "the replication configuration was not found")                                               \
    X(NO_OWNERSHIP_CONTROLS, "OwnershipControlsNotFoundError", 404,                                \
      "the bucket ownership controls were not found")                                              \
    X(NO_PUBLIC_ACCESS_BLOCK, "NoSuchPublicAccessBlockConfiguration", 404,                         \
      "the public access block configuration was not found")                                       \
    X(NO_SUCH_TAG_SET, "NoSuchTagSet", 404, "the TagSet does not exist")                           \
    X(INVALID_STORAGE_CLASS, "InvalidStorageClass", 400,                                           \
      "the storage class you specified is not valid")

/* Messages of answers that come from internal errors, said in more than one place. */
#define S3_MSG_BAD_XML "the XML you provided was not well-formed or did not validate"
#define S3_MSG_TOO_LARGE "your proposed upload exceeds the maximum allowed object size"

enum s3_err {
    S3E_NONE = 0, /* no S3-only code: the answer comes from an internal error */
#define S3_ERR_ENUM(name, code, status, msg) S3E_##name,
    S3_ERR_MAP(S3_ERR_ENUM)
#undef S3_ERR_ENUM
        S3E__COUNT
};

struct s3_err_info {
    const char *name; /* "NO_SUCH_UPLOAD" */
    const char *code; /* "NoSuchUpload" */
    int status;
    const char *msg;
};

/** @return the row of @p e (S3E_NONE and out-of-range values: an InternalError 500 row). */
const struct s3_err_info *s3__err_info(enum s3_err e);

#endif
