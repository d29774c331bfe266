/* SPDX-License-Identifier: Apache-2.0
 * tier_s3_int: what the files of the S3 client share (tier_s3.c: connections
 * and requests; tier_s3_xml.c: reading S3's XML answers and mapping error
 * codes). Pure functions on byte strings, so unit tests reach them directly.
 * Thread: any (no state). */
#ifndef TIER_S3_INT_H
#define TIER_S3_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "tier_s3.h"

/** Find the first element named @p name in [@p p, @p end) (at any depth;
 * S3's answers never nest an element in one of the same name).
 * @param[out] in, inlen  its content (empty for <name/>)
 * @param[out] after      the first byte after its end tag (may be NULL)
 * @return true if found and closed. */
bool tier__xml_find(const char *p, const char *end, const char *name, const char **in,
                    size_t *inlen, const char **after);

/** Decode XML text (the five entities, and &#N; / &#xN; of ASCII characters;
 * other references stay as written) of @p n bytes into
 * @p out (@p cap bytes, NUL-terminated, cut to fit). @return bytes written. */
size_t tier__xml_text(const char *s, size_t n, char *out, size_t cap);

/** tier__xml_text into a new string (free()). NULL on ENOMEM. */
char *tier__xml_strdup(const char *s, size_t n);

/** Copy an ETag without its surrounding quotes into @p out (@p cap bytes,
 * NUL-terminated, cut to fit). */
void tier__etag_copy(const char *s, char *out, size_t cap);

/** Decode %XX escapes of a NUL-terminated string in place (encoding-type=url). */
void tier__url_decode(char *s);

/** Map an answer to an internal error: the S3 @p code (may be "" or NULL)
 * first, then the HTTP @p status. @param[out] retryable. @return 0 for 2xx
 * without a code, else the error (see tier_s3.h). */
int tier__s3_classify(int status, const char *code, bool *retryable);

/** Fill @p res->code, message and request_id from an <Error> document of @p n
 * bytes (absent elements stay as they are). @return true if it was one. */
bool tier__s3_error_parse(const char *xml, size_t n, struct tier_s3_result *res);

/** Parse a ListObjectsV2 answer into @p res (entries, prefixes, truncated,
 * next_token), stripping @p strip (the configured prefix) from keys.
 * @return 0, -ENOMEM, -EPROTO (not a ListBucketResult). */
int tier__s3_list_parse(const char *xml, size_t n, const char *strip,
                        struct tier_s3_result *res);

/** Parse a ListMultipartUploads answer the same way (entries with key,
 * upload_id and time; next markers). @return 0, -ENOMEM, -EPROTO. */
int tier__s3_uploads_parse(const char *xml, size_t n, const char *strip,
                           struct tier_s3_result *res);

/** Parse an S3 date: RFC 1123 ("Sun, 06 Nov 1994 08:49:37 GMT") or ISO 8601
 * ("2026-11-24T10:00:00.000Z"). @return seconds since the epoch, 0 if neither. */
time_t tier__s3_date_parse(const char *s);

#endif
