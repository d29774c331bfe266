/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the S3 request-document parser (s3_xml.c) on raw bytes,
 * as CompleteMultipartUpload, DeleteObjects, PutObjectTagging and
 * CreateBucket read it. Every parsed tree is checked (names non-empty, text
 * NUL-terminated at its length, parent links, depth), walked as those
 * operations walk it, and every node's text must survive the response
 * writer's escaping: s3__xml_esc then parse gives the same bytes back. The
 * input itself, escaped, must parse back to itself too.
 * Input: the document. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "s3_internal.h"

#define FUZZ_XML_MAX_DEPTH 40 /* the parser stops at 33 levels */

/* "<R>" + escaped @p s + "</R>" parses to one element whose text is @p s. */
static void roundtrip(const char *s, size_t n)
{
    if (memchr(s, '\0', n))
        return; /* NUL has no XML form: the writer's &#x0; is refused on input */
    struct evbuffer *b = evbuffer_new();
    if (!b)
        abort();
    evbuffer_add(b, "<R>", 3);
    s3__xml_esc(b, s, n);
    evbuffer_add(b, "</R>", 4);
    size_t len = evbuffer_get_length(b);
    const char *doc = (const char *)evbuffer_pullup(b, (ev_ssize_t)len);
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_xnode *root = NULL;
    if (s3__xml_parse(&a, doc, len, &root) != 0 || root->child || root->textlen != n ||
        memcmp(root->text, s, n) != 0)
        __builtin_trap();
    s3__arena_fini(&a);
    evbuffer_free(b);
}

static void check(const struct s3_xnode *n, const struct s3_xnode *parent, int depth)
{
    for (; n; n = n->next) {
        if (depth > FUZZ_XML_MAX_DEPTH || n->parent != parent || !n->name || !n->name[0] ||
            !n->text || n->text[n->textlen] != '\0')
            __builtin_trap();
        roundtrip(n->text, n->textlen);
        check(n->child, n, depth + 1);
    }
}

/* What the operations read (s3_op_multipart.c, s3_op_object.c, s3_op_bucket.c). */
static void walk_ops(const struct s3_xnode *root)
{
    volatile size_t sink = 0;
    if (strcmp(root->name, "CompleteMultipartUpload") == 0) {
        for (const struct s3_xnode *c = root->child; c; c = c->next) {
            if (strcmp(c->name, "Part") != 0)
                continue;
            const struct s3_xnode *pn = s3__xml_child(c, "PartNumber");
            const struct s3_xnode *et = s3__xml_child(c, "ETag");
            if (pn)
                sink += strtoul(pn->text, NULL, 10);
            if (et)
                sink += et->textlen;
        }
    } else if (strcmp(root->name, "Delete") == 0) {
        const struct s3_xnode *q = s3__xml_child(root, "Quiet");
        sink += q && strcmp(q->text, "true") == 0;
        for (const struct s3_xnode *c = root->child; c; c = c->next) {
            const struct s3_xnode *k = s3__xml_child(c, "Key");
            const struct s3_xnode *v = s3__xml_child(c, "VersionId");
            sink += (k ? k->textlen : 0) + (v ? v->textlen : 0);
        }
    } else if (strcmp(root->name, "Tagging") == 0) {
        const struct s3_xnode *set = s3__xml_child(root, "TagSet");
        for (const struct s3_xnode *t = set ? set->child : NULL; t; t = t->next) {
            const struct s3_xnode *k = s3__xml_child(t, "Key"), *v = s3__xml_child(t, "Value");
            sink += (k ? k->textlen : 0) + (v ? v->textlen : 0);
        }
    } else if (strcmp(root->name, "CreateBucketConfiguration") == 0) {
        const struct s3_xnode *l = s3__xml_child(root, "LocationConstraint");
        sink += l ? l->textlen : 0;
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_xnode *root = NULL;
    if (s3__xml_parse(&a, (const char *)data, size, &root) == 0) {
        if (!root || root->next)
            __builtin_trap();
        check(root, NULL, 0);
        walk_ops(root);
        /* text never costs more arena than a few times the document */
        if (s3__arena_bytes(&a) > 64 * size + (64u << 10))
            __builtin_trap();
    } else if (root && root->next) {
        __builtin_trap();
    }
    s3__arena_fini(&a);
    roundtrip((const char *)data, size);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("s3_xml", 20000);
}
#endif
