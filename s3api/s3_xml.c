/* SPDX-License-Identifier: Apache-2.0
 * s3_xml: XML for the S3 REST API — escaping writers for responses and a small
 * non-validating parser for the request documents S3 clients send
 * (CompleteMultipartUpload, Delete, Tagging, CreateBucketConfiguration).
 *
 * The parser builds element nodes with their concatenated character data in
 * an arena. It understands the XML declaration, comments, processing
 * instructions, CDATA, attributes (skipped), namespace prefixes (dropped) and
 * the five predefined entities plus numeric character references. DOCTYPE is
 * refused (no entity expansion). Depth is bounded.
 * Thread: reentrant. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "s3_internal.h"

#define XML_MAX_DEPTH 32

void s3__xml_esc(struct evbuffer *out, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        char num[8];
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (c < 0x20 && c != '\t' && c != '\n') {
                snprintf(num, sizeof(num), "&#x%X;", c);
                rep = num;
            }
        }
        if (rep) {
            if (run)
                evbuffer_add(out, s + i - run, run);
            run = 0;
            evbuffer_add(out, rep, strlen(rep));
        } else {
            run++;
        }
    }
    if (run)
        evbuffer_add(out, s + n - run, run);
}

void s3__xml_elemn(struct evbuffer *out, const char *tag, const char *s, size_t n)
{
    evbuffer_add_printf(out, "<%s>", tag);
    s3__xml_esc(out, s, n);
    evbuffer_add_printf(out, "</%s>", tag);
}

void s3__xml_elem(struct evbuffer *out, const char *tag, const char *s)
{
    s3__xml_elemn(out, tag, s ? s : "", s ? strlen(s) : 0);
}

void s3__xml_elem_u64(struct evbuffer *out, const char *tag, uint64_t v)
{
    evbuffer_add_printf(out, "<%s>%" PRIu64 "</%s>", tag, v, tag);
}

/* ---------------------------------------------------------------- parser */

struct xp {
    struct s3_arena *a;
    const char *p, *end;
};

static bool starts(struct xp *x, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

static int skip_past(struct xp *x, const char *s)
{
    size_t n = strlen(s);
    while ((size_t)(x->end - x->p) >= n) {
        if (memcmp(x->p, s, n) == 0) {
            x->p += n;
            return 0;
        }
        x->p++;
    }
    return -EINVAL;
}

/* Any byte of a name but blanks, markup and control characters (NUL
 * included: a name is used as a C string). */
static bool name_char(char c)
{
    unsigned char u = (unsigned char)c;
    return u > ' ' && u != 0x7F && c != '>' && c != '/' && c != '=' && c != '<' && c != '"' &&
           c != '\'';
}

/* Text arrives in many pieces (every entity reference, CDATA section or run
 * between comments is one): the buffer doubles when full, so a document of
 * n bytes costs O(n) time and arena memory, not O(n^2). */
static void append_text(struct xp *x, struct s3_xnode *n, const char *s, size_t len)
{
    if (n->textlen + len + 1 > n->textcap) {
        size_t cap = n->textcap ? n->textcap : 32;
        while (cap < n->textlen + len + 1)
            cap *= 2;
        char *t = s3__arena_alloc(x->a, cap);
        if (n->textlen)
            memcpy(t, n->text, n->textlen);
        n->text = t;
        n->textcap = cap;
    }
    memcpy(n->text + n->textlen, s, len);
    n->textlen += len;
    n->text[n->textlen] = '\0';
}

static int put_utf8(char *o, unsigned long cp)
{
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int text_run(struct xp *x, struct s3_xnode *n)
{
    while (x->p < x->end && *x->p != '<') {
        if (*x->p == '&') {
            const char *semi = memchr(x->p, ';', (size_t)(x->end - x->p));
            if (!semi || semi - x->p > 12)
                return -EINVAL;
            size_t el = (size_t)(semi - x->p - 1);
            const char *e = x->p + 1;
            char o[4];
            int ol = 1;
            if (el == 3 && memcmp(e, "amp", 3) == 0)
                o[0] = '&';
            else if (el == 2 && memcmp(e, "lt", 2) == 0)
                o[0] = '<';
            else if (el == 2 && memcmp(e, "gt", 2) == 0)
                o[0] = '>';
            else if (el == 4 && memcmp(e, "quot", 4) == 0)
                o[0] = '"';
            else if (el == 4 && memcmp(e, "apos", 4) == 0)
                o[0] = '\'';
            else if (el >= 2 && e[0] == '#') {
                char num[12];
                memcpy(num, e + 1, el - 1);
                num[el - 1] = '\0';
                char *endp = NULL;
                unsigned long cp = (num[0] == 'x' || num[0] == 'X') ? strtoul(num + 1, &endp, 16)
                                                                    : strtoul(num, &endp, 10);
                if (!endp || *endp || endp == num || (ol = put_utf8(o, cp)) < 0)
                    return -EINVAL;
            } else {
                return -EINVAL;
            }
            if (n)
                append_text(x, n, o, (size_t)ol);
            x->p = semi + 1;
        } else {
            const char *s = x->p;
            while (x->p < x->end && *x->p != '<' && *x->p != '&')
                x->p++;
            if (n)
                append_text(x, n, s, (size_t)(x->p - s));
        }
    }
    return 0;
}

static int skip_misc(struct xp *x)
{
    for (;;) {
        while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\r' || *x->p == '\n'))
            x->p++;
        if (starts(x, "<?")) {
            if (skip_past(x, "?>"))
                return -EINVAL;
        } else if (starts(x, "<!--")) {
            if (skip_past(x, "-->"))
                return -EINVAL;
        } else if (starts(x, "<!")) {
            return -EINVAL; /* DOCTYPE and friends: refused */
        } else {
            return 0;
        }
    }
}

static int parse_elem(struct xp *x, struct s3_xnode *parent, struct s3_xnode **out, int depth)
{
    if (depth > XML_MAX_DEPTH || !starts(x, "<"))
        return -EINVAL;
    x->p++;
    const char *ns = x->p;
    while (x->p < x->end && name_char(*x->p))
        x->p++;
    if (x->p == ns || x->p >= x->end)
        return -EINVAL;
    const char *full = ns;
    size_t fulllen = (size_t)(x->p - ns);
    const char *colon = memchr(ns, ':', fulllen);
    if (colon) {
        /* prefix:local, both non-empty ("<a:>" and "<:a>" are not names) */
        if (colon == ns || colon + 1 == x->p)
            return -EINVAL;
        ns = colon + 1;
    }
    struct s3_xnode *n = s3__arena_alloc(x->a, sizeof(*n));
    n->name = s3__arena_strndup(x->a, ns, (size_t)(x->p - ns));
    n->text = (char *)"";
    n->parent = parent;
    /* attributes */
    for (;;) {
        while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\r' || *x->p == '\n'))
            x->p++;
        if (x->p >= x->end)
            return -EINVAL;
        if (*x->p == '>' || *x->p == '/')
            break;
        while (x->p < x->end && name_char(*x->p))
            x->p++;
        if (x->p >= x->end || *x->p != '=')
            return -EINVAL;
        x->p++;
        if (x->p >= x->end || (*x->p != '"' && *x->p != '\''))
            return -EINVAL;
        char q = *x->p++;
        const char *e = memchr(x->p, q, (size_t)(x->end - x->p));
        if (!e)
            return -EINVAL;
        x->p = e + 1;
    }
    *out = n;
    if (*x->p == '/') {
        if (!starts(x, "/>"))
            return -EINVAL;
        x->p += 2;
        return 0;
    }
    x->p++;
    struct s3_xnode **tail = &n->child;
    for (;;) {
        int rc = text_run(x, n);
        if (rc)
            return rc;
        if (x->p >= x->end)
            return -EINVAL;
        if (starts(x, "</")) {
            x->p += 2;
            if ((size_t)(x->end - x->p) < fulllen || memcmp(x->p, full, fulllen) != 0)
                return -EINVAL;
            x->p += fulllen;
            while (x->p < x->end &&
                   (*x->p == ' ' || *x->p == '\t' || *x->p == '\r' || *x->p == '\n'))
                x->p++;
            if (x->p >= x->end || *x->p != '>')
                return -EINVAL;
            x->p++;
            return 0;
        }
        if (starts(x, "<!--")) {
            if (skip_past(x, "-->"))
                return -EINVAL;
            continue;
        }
        if (starts(x, "<![CDATA[")) {
            x->p += 9;
            const char *s = x->p;
            if (skip_past(x, "]]>"))
                return -EINVAL;
            append_text(x, n, s, (size_t)(x->p - 3 - s));
            continue;
        }
        if (starts(x, "<?")) {
            if (skip_past(x, "?>"))
                return -EINVAL;
            continue;
        }
        struct s3_xnode *c = NULL;
        rc = parse_elem(x, n, &c, depth + 1);
        if (rc)
            return rc;
        *tail = c;
        tail = &c->next;
    }
}

int s3__xml_parse(struct s3_arena *a, const char *buf, size_t len, struct s3_xnode **root)
{
    struct xp x = {a, buf, buf + len};
    *root = NULL;
    /* UTF-8 byte order mark */
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        x.p += 3;
    if (skip_misc(&x))
        return -EINVAL;
    if (parse_elem(&x, NULL, root, 0))
        return -EINVAL;
    if (skip_misc(&x) || x.p != x.end)
        return -EINVAL;
    return 0;
}

struct s3_xnode *s3__xml_child(const struct s3_xnode *n, const char *name)
{
    for (struct s3_xnode *c = n ? n->child : NULL; c; c = c->next)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}
