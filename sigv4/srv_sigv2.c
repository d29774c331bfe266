/* SPDX-License-Identifier: Apache-2.0
 * srv_sigv2: AWS Signature Version 2 (legacy) and the HTTP date forms AWS
 * accepts. See srv_sigv2.h.
 * Thread: any. */
#include "srv_sigv2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

/* Sub-resources that are part of the string to sign (sorted), as AWS's and the
 * SDKs' SigV2 signers list them. */
static const char *const SUBRES[] = {
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "delete",
    "encryption",
    "inventory",
    "legal-hold",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "ownershipControls",
    "partNumber",
    "policy",
    "policyStatus",
    "publicAccessBlock",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "retention",
    "select",
    "select-type",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};

bool srv_sigv2_subresource(const char *name)
{
    for (size_t i = 0; i < sizeof(SUBRES) / sizeof(SUBRES[0]); i++)
        if (strcmp(name, SUBRES[i]) == 0)
            return true;
    return false;
}

int srv_sigv2_parse_header(const char *authz, char akey[129], char sig[65])
{
    if (!authz || strncmp(authz, "AWS ", 4) != 0)
        return -ENOENT;
    const char *p = authz + 4;
    while (*p == ' ')
        p++;
    const char *colon = strchr(p, ':');
    if (!colon || colon == p || (size_t)(colon - p) > 128)
        return -EINVAL;
    size_t sl = strlen(colon + 1);
    while (sl && colon[sl] == ' ')
        sl--;
    if (sl == 0 || sl > 64)
        return -EINVAL;
    memcpy(akey, p, (size_t)(colon - p));
    akey[colon - p] = '\0';
    memcpy(sig, colon + 1, sl);
    sig[sl] = '\0';
    return 0;
}

/* ---------------------------------------------------------------- string to sign */

struct amz {
    const char *name; /* as received */
    size_t nlen;
    const char *val;
    size_t vlen;
};

static int amz_cmp(const void *x, const void *y)
{
    const struct amz *a = x, *b = y;
    size_t n = a->nlen < b->nlen ? a->nlen : b->nlen;
    int r = strncasecmp(a->name, b->name, n);
    return r ? r : (a->nlen > b->nlen) - (a->nlen < b->nlen);
}

/* Append @p n bytes of @p s at *pos of @p out (counting past @p size). */
static void put(char *out, size_t size, size_t *pos, const char *s, size_t n)
{
    if (*pos + n < size)
        memcpy(out + *pos, s, n);
    *pos += n;
}

static void put_lower(char *out, size_t size, size_t *pos, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        put(out, size, pos, &c, 1);
    }
}

/* A header value trimmed, with folded whitespace runs made one space. */
static void put_value(char *out, size_t size, size_t *pos, const char *v, size_t n)
{
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    put(out, size, pos, v, n);
}

long srv_sigv2_string(const char *verb, const char *content_md5, const char *content_type,
                      const char *date, const struct srv_sigv4_kv *hs, size_t nhs, const char *res,
                      char *out, size_t size)
{
    size_t pos = 0, na = 0;
    struct amz *a = nhs ? calloc(nhs, sizeof(*a)) : NULL;
    if (nhs && !a)
        return -ENOMEM;
    for (size_t i = 0; i < nhs; i++)
        if (hs[i].nlen >= 6 && strncasecmp(hs[i].name, "x-amz-", 6) == 0)
            a[na++] = (struct amz){hs[i].name, hs[i].nlen, hs[i].value, hs[i].vlen};
    if (na)
        qsort(a, na, sizeof(*a), amz_cmp); /* stable enough: equal names join below */
    const char *parts[4] = {verb, content_md5 ? content_md5 : "", content_type ? content_type : "",
                            date ? date : ""};
    for (int i = 0; i < 4; i++) {
        put(out, size, &pos, parts[i], strlen(parts[i]));
        put(out, size, &pos, "\n", 1);
    }
    for (size_t i = 0; i < na; i++) {
        bool same = i > 0 && amz_cmp(&a[i - 1], &a[i]) == 0;
        if (same) {
            put(out, size, &pos, ",", 1);
        } else {
            if (i > 0)
                put(out, size, &pos, "\n", 1);
            put_lower(out, size, &pos, a[i].name, a[i].nlen);
            put(out, size, &pos, ":", 1);
        }
        put_value(out, size, &pos, a[i].val, a[i].vlen);
    }
    if (na)
        put(out, size, &pos, "\n", 1);
    put(out, size, &pos, res, strlen(res));
    free(a);
    if (pos >= size)
        return -ENOSPC;
    out[pos] = '\0';
    return (long)pos;
}

void srv_sigv2_sign(const char *secret, const char *sts, size_t len, char out[29])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)sts, len, md, &n);
    EVP_EncodeBlock((unsigned char *)out, md, (int)n);
}

bool srv_sigv2_check(const char *secret, const char *sts, size_t len, const char *sig)
{
    char want[29];
    srv_sigv2_sign(secret, sts, len, want);
    return strlen(sig) == 28 && srv_sigv4_equal(want, sig, 28);
}

/* ---------------------------------------------------------------- HTTP dates */

static int month_of(const char *m)
{
    static const char *const M[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                    "jul", "aug", "sep", "oct", "nov", "dec"};
    for (int i = 0; i < 12; i++)
        if (strncasecmp(m, M[i], 3) == 0 && strlen(m) == 3)
            return i;
    return -1;
}

/* A zone: GMT, UT, UTC, Z or +hhmm/-hhmm. @return its offset east of UTC in
 * seconds through @p off, or -1 when not a zone. */
static int zone_of(const char *z, long *off)
{
    if (strcasecmp(z, "GMT") == 0 || strcasecmp(z, "UT") == 0 || strcasecmp(z, "UTC") == 0 ||
        strcasecmp(z, "Z") == 0) {
        *off = 0;
        return 0;
    }
    if ((z[0] == '+' || z[0] == '-') && strlen(z) == 5 && strspn(z + 1, "0123456789") == 4) {
        long h = (z[1] - '0') * 10 + (z[2] - '0'), m = (z[3] - '0') * 10 + (z[4] - '0');
        if (h > 23 || m > 59)
            return -1;
        *off = (h * 3600 + m * 60) * (z[0] == '+' ? 1 : -1);
        return 0;
    }
    return -1;
}

int srv_http_date_parse(const char *s, time_t *out)
{
    char wd[16] = {0}, mon[8] = {0}, zone[8] = {0};
    int d = 0, y = 0, H = 0, M = 0, S = 0, n = 0;
    long off = 0;
    if (!s)
        return -EINVAL;
    while (*s == ' ')
        s++;
    /* an optional weekday and comma (IMF, RFC 850, RFC 2822) */
    const char *p = s;
    const char *comma = strchr(s, ',');
    if (comma && comma - s < 16) {
        if (sscanf(s, "%15[A-Za-z],%n", wd, &n) != 1 || n != comma - s + 1)
            return -EINVAL;
        p = comma + 1;
    }
    const char *base = p;
    n = 0;
    if (sscanf(p, " %d %3[A-Za-z] %d %d:%d:%d %7s%n", &d, mon, &y, &H, &M, &S, zone, &n) == 7) {
        /* IMF-fixdate, RFC 2822 */
    } else if (S = 0, n = 0,
               sscanf(p, " %d %3[A-Za-z] %d %d:%d %7s%n", &d, mon, &y, &H, &M, zone, &n) == 6) {
        /* RFC 2822 without seconds */
    } else if (n = 0, sscanf(p, " %d-%3[A-Za-z]-%d %d:%d:%d %7s%n", &d, mon, &y, &H, &M, &S, zone,
                             &n) == 7) {
        if (y < 100) /* RFC 850 */
            y += y < 70 ? 2000 : 1900;
    } else if (p == s && (n = 0, sscanf(s, "%15[A-Za-z] %3[A-Za-z] %d %d:%d:%d %d%n", wd, mon, &d,
                                        &H, &M, &S, &y, &n) == 7)) {
        strcpy(zone, "GMT"); /* asctime */
    } else {
        return -EINVAL;
    }
    const char *rest = base + n;
    while (*rest == ' ')
        rest++;
    int m = month_of(mon);
    if (*rest || zone_of(zone, &off) != 0 || m < 0 || d < 1 || d > 31 || H > 23 || M > 59 ||
        S > 60 || y < 1970 || y > 9999)
        return -EINVAL;
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = m, .tm_mday = d, .tm_hour = H, .tm_min = M, .tm_sec = S};
    *out = timegm(&tm) - off;
    return 0;
}
