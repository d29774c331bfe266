/* SPDX-License-Identifier: Apache-2.0
 * s3_form: the two pure parts of a browser-based upload (POST Object,
 * s3_post.c): a streaming multipart/form-data decoder (RFC 7578) and the
 * check of a POST policy document's conditions.
 *
 * The decoder is fed the body in pieces of any size. Fields before the file
 * are collected (names and values, at most S3_FORM_FIELDS_MAX bytes in all);
 * the part named "file" streams: its bytes go to the caller as they arrive,
 * held back only while they might begin the next delimiter ("\r\n--" +
 * boundary, which holds no CR, so a failed partial match restarts at the
 * current byte and the held bytes are the delimiter's own prefix: nothing is
 * copied). Parts after the file are parsed and ignored, as S3 ignores them.
 *
 * The policy document is base64 JSON {"expiration": ISO 8601, "conditions":
 * [...]} whose conditions are {"field": "value"} (exact), ["eq", "$field",
 * "value"], ["starts-with", "$field", "prefix"] (an empty prefix: anything)
 * and ["content-length-range", min, max]; field names compare
 * case-insensitively. Every field of the form but the signature's own ones,
 * "file", "policy" and "x-ignore-*" must be named by a condition.
 * Pure (fuzzed by tests/fuzz/fuzz_s3_form.c). Thread: reentrant. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "s3_internal.h"

#define FORM_HDR_MAX 4096

enum { F_PREAMBLE = 0, F_HEADERS, F_BODY, F_AFTER_DELIM, F_END, F_FAILED };

int s3__form_init(struct s3_form *f, struct s3_arena *a, const char *content_type,
                  const struct s3_form_cbs *cbs, void *arg)
{
    memset(f, 0, sizeof(*f));
    f->a = a;
    f->cbs = cbs;
    f->arg = arg;
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0)
        return -EINVAL;
    const char *b = strcasestr(content_type, "boundary=");
    if (!b)
        return -EINVAL;
    b += 9;
    size_t bl;
    if (*b == '"') {
        const char *e = strchr(++b, '"');
        if (!e)
            return -EINVAL;
        bl = (size_t)(e - b);
    } else {
        bl = strcspn(b, "; \t");
    }
    if (bl == 0 || bl > 70 || memchr(b, '\r', bl) || memchr(b, '\n', bl))
        return -EINVAL;
    /* the delimiter is "\r\n--boundary"; the body begins with "--boundary" */
    f->delim = s3__arena_alloc(a, bl + 5);
    memcpy(f->delim, "\r\n--", 4);
    memcpy(f->delim + 4, b, bl);
    f->dlen = bl + 4;
    f->match = 2; /* the first delimiter has no CRLF before it */
    f->hdr = s3__arena_alloc(a, FORM_HDR_MAX + 1);
    return 0;
}

static int fail(struct s3_form *f, const char *why)
{
    f->state = F_FAILED;
    f->why = why;
    return -EINVAL;
}

/* The value of parameter @p name ("name", "filename") of a Content-Disposition. */
static char *disp_param(struct s3_arena *a, const char *v, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = v; (p = strcasestr(p, name)) != NULL; p += nl) {
        if ((p != v && p[-1] != ';' && p[-1] != ' ' && p[-1] != '\t') || p[nl] != '=')
            continue;
        p += nl + 1;
        if (*p == '"') {
            const char *e = strchr(p + 1, '"');
            return e ? s3__arena_strndup(a, p + 1, (size_t)(e - p - 1)) : NULL;
        }
        return s3__arena_strndup(a, p, strcspn(p, "; \t\r\n"));
    }
    return NULL;
}

/* A part's header block is complete: its name, filename, content type. */
static int part_headers(struct s3_form *f)
{
    f->hdr[f->hlen] = '\0';
    f->name = NULL;
    f->filename = NULL;
    f->ctype = NULL;
    for (char *l = f->hdr; *l;) {
        char *e = strstr(l, "\r\n");
        if (e)
            *e = '\0';
        char *colon = strchr(l, ':');
        if (colon) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (strcasecmp(l, "Content-Disposition") == 0) {
                if (strncasecmp(v, "form-data", 9) != 0)
                    return fail(f, "a part's Content-Disposition must be form-data");
                f->name = disp_param(f->a, v, "name");
                f->filename = disp_param(f->a, v, "filename");
            } else if (strcasecmp(l, "Content-Type") == 0) {
                f->ctype = s3__arena_strndup(f->a, v, strlen(v));
            }
        }
        if (!e)
            break;
        l = e + 2;
    }
    if (!f->name || !*f->name)
        return fail(f, "a form part has no name");
    f->is_file = !f->file_seen && strcasecmp(f->name, "file") == 0;
    f->vlen = 0;
    if (f->is_file) {
        f->file_seen = true;
        if (f->cbs->file_start && f->cbs->file_start(f->arg, f->filename, f->ctype))
            return fail(f, NULL);
    }
    return 0;
}

/* Bytes of the current part's value. */
static int part_data(struct s3_form *f, const char *p, size_t n)
{
    if (!n || f->file_done)
        return 0; /* parts after the file are ignored */
    if (f->is_file)
        return f->cbs->file_data && f->cbs->file_data(f->arg, p, n) ? fail(f, NULL) : 0;
    if (f->fields_bytes + n > S3_FORM_FIELDS_MAX)
        return fail(f, "the form fields are larger than 20 KB");
    if (f->vlen + n + 1 > f->vcap) {
        size_t cap = (f->vlen + n + 1) * 2;
        char *v = s3__arena_alloc(f->a, cap);
        if (f->vlen)
            memcpy(v, f->val, f->vlen);
        f->val = v;
        f->vcap = cap;
    }
    memcpy(f->val + f->vlen, p, n);
    f->vlen += n;
    f->fields_bytes += n;
    return 0;
}

/* A part ended (its delimiter was found). */
static int part_end(struct s3_form *f)
{
    if (f->is_file) {
        f->file_done = true;
        f->is_file = false;
        return 0;
    }
    if (f->file_done)
        return 0;
    if (f->nfields == S3_FORM_MAX_FIELDS)
        return fail(f, "too many form fields");
    struct s3_form_field *fd = &f->fields[f->nfields++];
    fd->name = f->name;
    fd->val = s3__arena_strndup(f->a, f->val ? f->val : "", f->vlen);
    fd->vlen = f->vlen;
    f->fields_bytes += strlen(f->name);
    return 0;
}

int s3__form_feed(struct s3_form *f, const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    while (p < end) {
        switch (f->state) {
        case F_PREAMBLE:
        case F_BODY: {
            /* look for the delimiter; bytes that cannot begin it are data */
            if (f->match == 0) {
                const char *cr = memchr(p, '\r', (size_t)(end - p));
                const char *upto = cr ? cr : end;
                if (f->state == F_BODY && part_data(f, p, (size_t)(upto - p)))
                    return -EINVAL;
                p = upto;
                if (!cr)
                    break;
            }
            while (p < end && f->match < f->dlen && *p == f->delim[f->match]) {
                f->match++;
                p++;
            }
            if (f->match == f->dlen) {
                f->match = 0;
                if (f->state == F_BODY && part_end(f))
                    return -EINVAL;
                f->state = F_AFTER_DELIM;
                f->after = 0;
                break;
            }
            if (p < end) {
                /* a mismatch: the matched bytes were data (the delimiter's own prefix) */
                size_t m = f->match;
                f->match = 0;
                if (m && f->state == F_BODY && part_data(f, f->delim, m))
                    return -EINVAL;
                if (m == 0) { /* a CR that does not begin the delimiter */
                    if (f->state == F_BODY && part_data(f, p, 1))
                        return -EINVAL;
                    p++;
                }
            }
            break;
        }
        case F_AFTER_DELIM:
            /* "--" ends the form, CRLF begins a part */
            f->tail[f->after++] = *p++;
            if (f->after == 2) {
                if (memcmp(f->tail, "--", 2) == 0)
                    f->state = F_END;
                else if (memcmp(f->tail, "\r\n", 2) == 0) {
                    f->state = F_HEADERS;
                    f->hlen = 0;
                } else
                    return fail(f, "malformed multipart delimiter");
            }
            break;
        case F_HEADERS:
            if (f->hlen == FORM_HDR_MAX)
                return fail(f, "a form part's headers are too long");
            f->hdr[f->hlen++] = *p++;
            if (f->hlen >= 4 && memcmp(f->hdr + f->hlen - 4, "\r\n\r\n", 4) == 0) {
                f->hlen -= 4;
                if (part_headers(f))
                    return -EINVAL;
                f->state = F_BODY;
            } else if (f->hlen == 2 && memcmp(f->hdr, "\r\n", 2) == 0) {
                f->hlen = 0; /* a part without headers has no name */
                return fail(f, "a form part has no name");
            }
            break;
        case F_END:
            return 0; /* the epilogue is ignored */
        default:
            return -EINVAL;
        }
    }
    return 0;
}

int s3__form_end(struct s3_form *f)
{
    if (f->state == F_FAILED)
        return -EINVAL;
    if (f->state != F_END)
        return fail(f, "the multipart form ended before its last delimiter");
    return 0;
}

const char *s3__form_get(const struct s3_form *f, const char *name)
{
    for (size_t i = 0; i < f->nfields; i++)
        if (strcasecmp(f->fields[i].name, name) == 0)
            return f->fields[i].val;
    return NULL;
}

/* ---------------------------------------------------------------- the policy document */

/* Is @p name a field the policy need not name? */
static bool exempt(const char *name)
{
    static const char *const EX[] = {"policy", "file", "x-amz-signature", "signature",
                                     "awsaccesskeyid"};
    for (size_t i = 0; i < sizeof(EX) / sizeof(EX[0]); i++)
        if (strcasecmp(name, EX[i]) == 0)
            return true;
    return strncasecmp(name, "x-ignore-", 9) == 0;
}

/* The value the form gives @p name ("$name" in a condition); "bucket" is the bucket's. */
static const char *field_of(const struct s3_form *f, const char *name, const char *bucket)
{
    if (*name == '$')
        name++;
    if (strcasecmp(name, "bucket") == 0)
        return bucket;
    return s3__form_get(f, name);
}

static bool num_of(json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_string(v)) {
        char *e = NULL;
        *out = strtoll(json_string_value(v), &e, 10);
        return *json_string_value(v) && !*e;
    }
    return false;
}

int s3__form_policy_check(struct s3_arena *a, const struct s3_form *f, const char *policy_b64,
                          const char *bucket, const char *key, uint64_t size, time_t now,
                          const char **why)
{
    size_t bl = strlen(policy_b64);
    unsigned char *doc = s3__arena_alloc(a, bl + 4);
    long n = s3__b64_decode(policy_b64, bl, doc);
    json_error_t je;
    json_t *root = n > 0 ? json_loadb((const char *)doc, (size_t)n, 0, &je) : NULL;
    int rc = -EINVAL;
    bool *named = s3__arena_alloc(a, (f->nfields + 1) * sizeof(*named));
    *why = "Invalid Policy: Invalid JSON.";
    if (!root || !json_is_object(root))
        goto out;
    json_t *exp = json_object_get(root, "expiration"), *conds = json_object_get(root, "conditions");
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (!json_is_string(exp) ||
        sscanf(json_string_value(exp), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon,
               &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
        *why = "Invalid Policy: Policy missing expiration or it is not ISO 8601.";
        goto out;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    if (timegm(&tm) < now) {
        *why = "Invalid according to Policy: Policy expired.";
        rc = -EACCES;
        goto out;
    }
    if (!json_is_array(conds)) {
        *why = "Invalid Policy: Policy missing conditions.";
        goto out;
    }
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *name = NULL, *want = NULL, *op = "eq";
        if (json_is_object(c) && json_object_size(c) == 1) {
            void *it = json_object_iter(c);
            name = json_object_iter_key(it);
            json_t *v = json_object_iter_value(it);
            want = json_is_string(v) ? json_string_value(v) : NULL;
        } else if (json_is_array(c) && json_array_size(c) == 3 &&
                   json_is_string(json_array_get(c, 0))) {
            op = json_string_value(json_array_get(c, 0));
            if (strcasecmp(op, "content-length-range") == 0) {
                long long lo, hi;
                if (!num_of(json_array_get(c, 1), &lo) || !num_of(json_array_get(c, 2), &hi)) {
                    *why = "Invalid Policy: Invalid content-length-range.";
                    goto out;
                }
                if ((long long)size < lo || (long long)size > hi) {
                    *why = (long long)size < lo
                               ? "Your proposed upload is smaller than the minimum allowed size"
                               : "Your proposed upload exceeds the maximum allowed size";
                    rc = (long long)size < lo ? -ERANGE : -EFBIG;
                    goto out;
                }
                continue;
            }
            json_t *fn = json_array_get(c, 1), *fv = json_array_get(c, 2);
            name = json_is_string(fn) ? json_string_value(fn) : NULL;
            want = json_is_string(fv) ? json_string_value(fv) : NULL;
            if (name && *name != '$')
                name = NULL;
        }
        if (!name || !want || (strcasecmp(op, "eq") != 0 && strcasecmp(op, "starts-with") != 0)) {
            *why = "Invalid Policy: Invalid Simple-Condition.";
            goto out;
        }
        const char *have =
            strcasecmp(name + (*name == '$'), "key") == 0 ? key : field_of(f, name, bucket);
        bool ok = have && (strcasecmp(op, "eq") == 0 ? strcmp(have, want) == 0
                                                     : strncmp(have, want, strlen(want)) == 0);
        if (!ok) {
            *why = s3__arena_printf(a,
                                    "Invalid according to Policy: Policy Condition failed: "
                                    "[\"%s\", \"%s\", \"%s\"]",
                                    op, name, want);
            rc = -EACCES;
            goto out;
        }
        for (size_t k = 0; k < f->nfields; k++)
            if (strcasecmp(f->fields[k].name, name + (*name == '$')) == 0)
                named[k] = true;
    }
    for (size_t k = 0; k < f->nfields; k++)
        if (!named[k] && !exempt(f->fields[k].name) &&
            !(strncasecmp(f->fields[k].name, "x-amz-", 6) == 0 &&
              (strcasecmp(f->fields[k].name, "x-amz-algorithm") == 0 ||
               strcasecmp(f->fields[k].name, "x-amz-credential") == 0 ||
               strcasecmp(f->fields[k].name, "x-amz-date") == 0 ||
               strcasecmp(f->fields[k].name, "x-amz-security-token") == 0))) {
            *why = s3__arena_printf(a, "Invalid according to Policy: Extra input fields: %s",
                                    f->fields[k].name);
            rc = -EACCES;
            goto out;
        }
    rc = 0;
    *why = NULL;
out:
    json_decref(root);
    return rc;
}
