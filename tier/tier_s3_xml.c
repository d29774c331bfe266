/* SPDX-License-Identifier: Apache-2.0
 * tier_s3_xml: reading the few XML documents an S3 remote answers (Error,
 * ListBucketResult v2, ListMultipartUploadsResult, InitiateMultipartUpload-
 * Result, CompleteMultipartUploadResult) and mapping S3 error codes and HTTP
 * statuses to the internal error set.
 *
 * The documents are small, machine-written and flat, so a scanner that finds
 * elements by name inside a span is enough: no DTDs, no CDATA, no namespaces
 * beyond the default one. Text is entity-decoded; keys come back
 * percent-encoded when the answer says <EncodingType>url</EncodingType>.
 * Thread: any (no state). */
#include "tier_s3_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "srv_err.h"

/* ---------------------------------------------------------------- scanning */

bool tier__xml_find(const char *p, const char *end, const char *name, const char **in,
                    size_t *inlen, const char **after)
{
    size_t nl = strlen(name);
    while (p < end) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (!lt || (size_t)(end - lt) < nl + 2)
            return false;
        p = lt + 1;
        if (memcmp(p, name, nl) != 0)
            continue;
        char c = p[nl];
        if (c != '>' && c != '/' && c != ' ' && c != '\t' && c != '\r' && c != '\n')
            continue;
        const char *gt = memchr(p + nl, '>', (size_t)(end - p - nl));
        if (!gt)
            return false;
        if (gt[-1] == '/') { /* <name/> */
            *in = gt + 1;
            *inlen = 0;
            if (after)
                *after = gt + 1;
            return true;
        }
        const char *body = gt + 1, *q = body;
        for (;;) {
            const char *cl = memchr(q, '<', (size_t)(end - q));
            if (!cl || (size_t)(end - cl) < nl + 3)
                return false;
            if (cl[1] == '/' && memcmp(cl + 2, name, nl) == 0 && cl[2 + nl] == '>') {
                *in = body;
                *inlen = (size_t)(cl - body);
                if (after)
                    *after = cl + 3 + nl;
                return true;
            }
            q = cl + 1;
        }
    }
    return false;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t tier__xml_text(const char *s, size_t n, char *out, size_t cap)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n && o + 1 < cap;) {
        if (s[i] != '&') {
            out[o++] = s[i++];
            continue;
        }
        const char *semi = memchr(s + i, ';', n - i);
        size_t el = semi ? (size_t)(semi - (s + i)) + 1 : 0; /* "&...;" */
        bool done = false;
        for (size_t k = 0; semi && k < sizeof(ents) / sizeof(ents[0]); k++) {
            size_t l = strlen(ents[k].ent);
            if (el == l + 1 && memcmp(s + i + 1, ents[k].ent, l) == 0) {
                out[o++] = ents[k].c;
                i += el;
                done = true;
                break;
            }
        }
        if (!done && semi && el > 3 && s[i + 1] == '#') {
            unsigned long cp = 0;
            bool hex = s[i + 2] == 'x' || s[i + 2] == 'X', ok = true;
            for (size_t k = i + (hex ? 3 : 2); k < i + el - 1; k++) {
                int v = hex ? hexval((unsigned char)s[k]) : (isdigit((unsigned char)s[k])
                                                                 ? s[k] - '0' : -1);
                if (v < 0 || cp >= 0x80) {
                    ok = false;
                    break;
                }
                cp = cp * (hex ? 16 : 10) + (unsigned long)v;
            }
            /* Servers write non-ASCII as UTF-8 and use references only for
             * control characters and markup: decode the ASCII ones, keep the
             * rest as written. */
            if (ok && cp > 0 && cp < 0x80) {
                out[o++] = (char)cp;
                i += el;
                done = true;
            }
        }
        if (!done)
            out[o++] = s[i++];
    }
    out[o] = '\0';
    return o;
}

char *tier__xml_strdup(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out)
        tier__xml_text(s, n, out, n + 1);
    return out;
}

void tier__url_decode(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        int h, l;
        if (p[0] == '%' && (h = hexval((unsigned char)p[1])) >= 0 &&
            (l = hexval((unsigned char)p[2])) >= 0) {
            *o++ = (char)(h * 16 + l);
            p += 3;
        } else if (*p == '+') { /* form encoding of a space, as some stores write it */
            *o++ = ' ';
            p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
}

/* Text of the first @p name in [p, end) into @p out; false if absent. */
static bool xml_get(const char *p, const char *end, const char *name, char *out, size_t cap)
{
    const char *in;
    size_t n;
    if (!tier__xml_find(p, end, name, &in, &n, NULL))
        return false;
    tier__xml_text(in, n, out, cap);
    return true;
}

/* A new decoded string of element @p name, or NULL (absent: *err stays). */
static char *xml_dup(const char *p, const char *end, const char *name, bool url, int *err)
{
    const char *in;
    size_t n;
    if (!tier__xml_find(p, end, name, &in, &n, NULL))
        return NULL;
    char *s = tier__xml_strdup(in, n);
    if (!s) {
        *err = -ENOMEM;
        return NULL;
    }
    if (url)
        tier__url_decode(s);
    return s;
}

/* Drop the configured prefix from the front of a listed key (in place). */
static void strip_prefix(char *key, const char *strip)
{
    size_t sl = strip ? strlen(strip) : 0;
    if (sl && strncmp(key, strip, sl) == 0)
        memmove(key, key + sl, strlen(key + sl) + 1);
}

void tier__etag_copy(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

/* ---------------------------------------------------------------- errors */

bool tier__s3_error_parse(const char *xml, size_t n, struct tier_s3_result *res)
{
    const char *in, *end = xml + n;
    size_t il;
    if (!tier__xml_find(xml, end, "Error", &in, &il, NULL))
        return false;
    xml_get(in, in + il, "Code", res->code, sizeof(res->code));
    xml_get(in, in + il, "Message", res->message, sizeof(res->message));
    xml_get(in, in + il, "RequestId", res->request_id, sizeof(res->request_id));
    return true;
}

/* S3 error code -> internal error, retryable. Codes not listed fall back to the status. */
static const struct {
    const char *code;
    int err;
    bool retry;
} code_map[] = {
    {"NoSuchKey", -ENOENT, false},
    {"NoSuchUpload", -ENOENT, false},
    {"NoSuchVersion", -ENOENT, false},
    {"NoSuchBucket", SRV_ENOBUCKET, false},
    {"InvalidAccessKeyId", SRV_EAUTH, false},
    {"SignatureDoesNotMatch", SRV_EAUTH, false},
    {"AuthorizationHeaderMalformed", SRV_EAUTH, false},
    {"AuthorizationQueryParametersError", SRV_EAUTH, false},
    {"RequestTimeTooSkewed", SRV_EAUTH, false},
    {"InvalidToken", SRV_EAUTH, false},
    {"ExpiredToken", SRV_EAUTH, false},
    {"InvalidSecurity", SRV_EAUTH, false},
    {"AccessDenied", -EACCES, false},
    {"AllAccessDisabled", -EACCES, false},
    {"AccountProblem", -EACCES, false},
    {"UserSuspended", -EACCES, false},
    {"PreconditionFailed", SRV_EPRECOND, false},
    {"InvalidRange", -ERANGE, false},
    {"EntityTooLarge", -EFBIG, false},
    {"QuotaExceeded", -EDQUOT, false},
    {"EntityTooSmall", -EINVAL, false},
    {"InvalidPart", -EINVAL, false},
    {"InvalidPartOrder", -EINVAL, false},
    {"InvalidArgument", -EINVAL, false},
    {"InvalidRequest", -EINVAL, false},
    {"MalformedXML", -EINVAL, false},
    {"InvalidDigest", -EINVAL, false},
    {"KeyTooLongError", -EINVAL, false},
    {"MetadataTooLarge", -EINVAL, false},
    {"BadDigest", -EINVAL, true},
    {"XAmzContentSHA256Mismatch", -EINVAL, true},
    {"IncompleteBody", -EINVAL, true},
    {"RequestTimeout", -ETIMEDOUT, true},
    {"SlowDown", -EAGAIN, true},
    {"ServiceUnavailable", -EAGAIN, true},
    {"Throttling", -EAGAIN, true},
    {"TooManyRequests", -EAGAIN, true},
    {"InternalError", -EIO, true},
};

int tier__s3_classify(int status, const char *code, bool *retryable)
{
    *retryable = false;
    if (code && *code) {
        for (size_t i = 0; i < sizeof(code_map) / sizeof(code_map[0]); i++) {
            if (strcmp(code, code_map[i].code) == 0) {
                *retryable = code_map[i].retry;
                return code_map[i].err;
            }
        }
    } else if (status >= 200 && status < 300) {
        return 0;
    }
    if (status >= 500 || status == 0) {
        *retryable = true;
        return status == 503 ? -EAGAIN : -EIO;
    }
    switch (status) {
    case 404:
        return -ENOENT;
    case 403:
        return -EACCES;
    case 412:
        return SRV_EPRECOND;
    case 416:
        return -ERANGE;
    case 408:
        *retryable = true;
        return -ETIMEDOUT;
    case 429:
        *retryable = true;
        return -EAGAIN;
    default:
        break;
    }
    if (status >= 300 && status < 400)
        return -EINVAL;
    if (status >= 200 && status < 300) /* a 2xx carrying an <Error> (CompleteMultipartUpload) */
        return -EIO;
    return SRV_EBADREQ;
}

bool tier_s3_err_retryable(int err)
{
    switch (err) {
    case -ECONNREFUSED:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ENETDOWN:
    case -ETIMEDOUT:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -EPIPE:
    case -EPROTO:
    case -EAGAIN:
    case -EIO:
        return true;
    default:
        return false;
    }
}

/* ---------------------------------------------------------------- dates */

time_t tier__s3_date_parse(const char *s)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int y, mo, d, h, mi, se;
    char mon[4];
    if (!s)
        return 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &se) == 6) {
        tm.tm_mon = mo - 1;
    } else if (sscanf(s, "%*3s, %2d %3s %4d %2d:%2d:%2d", &d, mon, &y, &h, &mi, &se) == 6) {
        const char *m = strstr(months, mon);
        if (!m || strlen(mon) != 3 || (m - months) % 3)
            return 0;
        tm.tm_mon = (int)(m - months) / 3;
    } else {
        return 0;
    }
    tm.tm_year = y - 1900;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    time_t t = timegm(&tm);
    return t < 0 ? 0 : t;
}

/* ---------------------------------------------------------------- listings */

static int entries_grow(struct tier_s3_result *res, size_t *cap)
{
    if (res->nentries < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    struct tier_s3_entry *e = realloc(res->entries, nc * sizeof(*e));
    if (!e)
        return -ENOMEM;
    res->entries = e;
    *cap = nc;
    return 0;
}

static bool is_url_encoded(const char *xml, const char *end)
{
    char enc[16] = "";
    return xml_get(xml, end, "EncodingType", enc, sizeof(enc)) && strcasecmp(enc, "url") == 0;
}

static bool xml_bool(const char *p, const char *end, const char *name)
{
    char v[8] = "";
    return xml_get(p, end, name, v, sizeof(v)) && strcmp(v, "true") == 0;
}

int tier__s3_list_parse(const char *xml, size_t n, const char *strip,
                        struct tier_s3_result *res)
{
    const char *doc, *end = xml + n, *p, *in, *after;
    size_t dl, il, cap = 0, pcap = 0;
    int err = 0;
    if (!tier__xml_find(xml, end, "ListBucketResult", &doc, &dl, NULL))
        return -EPROTO;
    end = doc + dl;
    bool url = is_url_encoded(doc, end);
    res->truncated = xml_bool(doc, end, "IsTruncated");
    /* The top-level NextContinuationToken is not inside a Contents block, but
     * scan only the part before the first Contents to be safe. */
    res->next_token = xml_dup(doc, end, "NextContinuationToken", false, &err);
    for (p = doc; !err && tier__xml_find(p, end, "Contents", &in, &il, &after); p = after) {
        if ((err = entries_grow(res, &cap)) != 0)
            break;
        struct tier_s3_entry *e = &res->entries[res->nentries];
        memset(e, 0, sizeof(*e));
        e->key = xml_dup(in, in + il, "Key", url, &err);
        if (!e->key) {
            err = err ? err : -EPROTO;
            break;
        }
        res->nentries++;
        strip_prefix(e->key, strip);
        char num[32] = "", tag[TIER_S3_ETAG_MAX + 16] = "", date[48] = "";
        xml_get(in, in + il, "Size", num, sizeof(num));
        e->size = strtoull(num, NULL, 10);
        if (xml_get(in, in + il, "ETag", tag, sizeof(tag)))
            tier__etag_copy(tag, e->etag, sizeof(e->etag));
        if (xml_get(in, in + il, "LastModified", date, sizeof(date)))
            e->time = tier__s3_date_parse(date);
    }
    for (p = doc; !err && tier__xml_find(p, end, "CommonPrefixes", &in, &il, &after); p = after) {
        if (res->nprefixes == pcap) {
            size_t nc = pcap ? pcap * 2 : 16;
            char **np = realloc(res->prefixes, nc * sizeof(*np));
            if (!np) {
                err = -ENOMEM;
                break;
            }
            res->prefixes = np;
            pcap = nc;
        }
        char *s = xml_dup(in, in + il, "Prefix", url, &err);
        if (!s) {
            err = err ? err : -EPROTO;
            break;
        }
        strip_prefix(s, strip);
        res->prefixes[res->nprefixes++] = s;
    }
    if (!err && res->truncated && !res->next_token)
        err = -EPROTO; /* a truncated v2 listing must say where to go on */
    return err;
}

int tier__s3_uploads_parse(const char *xml, size_t n, const char *strip,
                           struct tier_s3_result *res)
{
    const char *doc, *end = xml + n, *p, *in, *after;
    size_t dl, il, cap = 0;
    int err = 0;
    if (!tier__xml_find(xml, end, "ListMultipartUploadsResult", &doc, &dl, NULL))
        return -EPROTO;
    end = doc + dl;
    bool url = is_url_encoded(doc, end);
    res->truncated = xml_bool(doc, end, "IsTruncated");
    res->next_key_marker = xml_dup(doc, end, "NextKeyMarker", url, &err);
    if (res->next_key_marker)
        strip_prefix(res->next_key_marker, strip);
    res->next_upload_marker = xml_dup(doc, end, "NextUploadIdMarker", false, &err);
    for (p = doc; !err && tier__xml_find(p, end, "Upload", &in, &il, &after); p = after) {
        if ((err = entries_grow(res, &cap)) != 0)
            break;
        struct tier_s3_entry *e = &res->entries[res->nentries];
        memset(e, 0, sizeof(*e));
        e->key = xml_dup(in, in + il, "Key", url, &err);
        e->upload_id = xml_dup(in, in + il, "UploadId", false, &err);
        res->nentries++;
        if (!e->key || !e->upload_id) {
            err = err ? err : -EPROTO;
            break;
        }
        strip_prefix(e->key, strip);
        char date[48] = "";
        if (xml_get(in, in + il, "Initiated", date, sizeof(date)))
            e->time = tier__s3_date_parse(date);
    }
    return err;
}
