/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv2: AWS Signature Version 2 for S3, the legacy scheme (HMAC-SHA1
 * over a string to sign) that boto3's default presigned URLs, aws cli v1's
 * `s3 presign` and `s3cmd signurl` still make: the Authorization header
 * "AWS AKID:SIGNATURE" and the presigned query (AWSAccessKeyId, Expires,
 * Signature). It lives next to the one SigV4 (srv_sigv4.h) and, like it,
 * works on plain byte strings the caller maps its request onto
 * (s3api/s3_sigv4.c). Also the HTTP date forms AWS accepts in Date headers
 * (RFC 7231's three, RFC 2822's numeric zones), shared with SigV4's Date.
 *
 * String to sign: VERB \n Content-MD5 \n Content-Type \n DATE \n
 * CanonicalizedAmzHeaders CanonicalizedResource, where DATE is the Date
 * header (empty when x-amz-date is sent: that header is then among the
 * x-amz-* ones) or a presigned URL's Expires; CanonicalizedAmzHeaders is
 * every x-amz-* header, names lower-cased, sorted, values trimmed and a
 * repeated header's values joined by ',', as "name:value\n"; and
 * CanonicalizedResource is "/BUCKET" (virtual-host style) + the path as sent
 * + the sub-resources of the query (srv_sigv2_subresource) sorted by name,
 * "?n1=v1&n2" with their values decoded.
 * Thread: any. */
#ifndef SRV_SIGV2_H
#define SRV_SIGV2_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "srv_sigv4.h"

/** Parse "AWS AKID:SIGNATURE". @return 0, -ENOENT (another scheme), -EINVAL (malformed). */
int srv_sigv2_parse_header(const char *authz, char akey[129], char sig[65]);

/** Is query parameter @p name an S3 sub-resource (part of CanonicalizedResource)? */
bool srv_sigv2_subresource(const char *name);

/** The string to sign of a request (module comment) into @p out (@p size bytes).
 * @param hs the request's headers (any case, any order; only x-amz-* are used)
 * @param res the CanonicalizedResource. @return the length, or -ENOSPC. */
long srv_sigv2_string(const char *verb, const char *content_md5, const char *content_type,
                      const char *date, const struct srv_sigv4_kv *hs, size_t nhs, const char *res,
                      char *out, size_t size);

/** Base64 HMAC-SHA1 of @p sts (@p len bytes) under @p secret: 28 characters + NUL. */
void srv_sigv2_sign(const char *secret, const char *sts, size_t len, char out[29]);

/** Does base64 signature @p sig equal the signature of @p sts (constant time)? */
bool srv_sigv2_check(const char *secret, const char *sts, size_t len, const char *sig);

/** Parse an HTTP date the way AWS accepts one in Date: IMF-fixdate
 * ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 ..."),
 * asctime ("Sun Nov  6 08:49:37 1994"), and RFC 2822 (weekday optional,
 * seconds optional, zone GMT, UT, UTC, Z or a numeric +hhmm/-hhmm such as
 * "+0000" or "-0000", which is what botocore sends). @return 0, -EINVAL. */
int srv_http_date_parse(const char *s, time_t *out);

#endif
