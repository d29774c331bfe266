/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for s3api/s3_xml.c: escaping and the request-document parser. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "s3_internal.h"

static void test_escape(void **state)
{
    (void)state;
    struct evbuffer *b = evbuffer_new();
    s3__xml_elem(b, "Key", "a<b>&\"c'\x01");
    s3__xml_elem_u64(b, "Size", 12345678901ULL);
    size_t n = evbuffer_get_length(b);
    char out[256];
    evbuffer_remove(b, out, n);
    out[n] = '\0';
    assert_string_equal(out,
                        "<Key>a&lt;b&gt;&amp;&quot;c&apos;&#x1;</Key><Size>12345678901</Size>");
    evbuffer_free(b);
}

static void test_parse_complete(void **state)
{
    (void)state;
    static const char doc[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<!-- c --><Part><PartNumber>1</PartNumber><ETag>&quot;abc&quot;</ETag></Part>"
        "<Part><PartNumber>2</PartNumber><ETag><![CDATA[\"d<e\"]]></ETag></Part>"
        "</CompleteMultipartUpload>\n";
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_xnode *root;
    assert_int_equal(s3__xml_parse(&a, doc, sizeof(doc) - 1, &root), 0);
    assert_string_equal(root->name, "CompleteMultipartUpload");
    struct s3_xnode *p = s3__xml_child(root, "Part");
    assert_non_null(p);
    assert_string_equal(s3__xml_child(p, "PartNumber")->text, "1");
    assert_string_equal(s3__xml_child(p, "ETag")->text, "\"abc\"");
    p = p->next;
    assert_string_equal(s3__xml_child(p, "ETag")->text, "\"d<e\"");
    assert_null(p->next);
    s3__arena_fini(&a);
}

static void test_parse_refuses(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "<a>",
        "<a></b>",
        "<a><b></a></b>",
        "<!DOCTYPE x [<!ENTITY e \"x\">]><a>&e;</a>",
        "<a>&unknown;</a>",
        "<a>&#0;</a>",
        "<a x=1></a>",
        "<a></a><b></b>",
        "<a></a>trailing",
        "<a:/>",
        "<:a/>",
        "<a><b:  /></a>",
        "<a><:b></:b></a>",
        "<\x01/>",
        "<a\x7f/>",
    };
    struct s3_arena a;
    s3__arena_init(&a);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct s3_xnode *root;
        assert_int_equal(s3__xml_parse(&a, bad[i], strlen(bad[i]), &root), -EINVAL);
    }
    struct s3_xnode *r0;
    assert_int_equal(s3__xml_parse(&a, "<\0/>", 4, &r0), -EINVAL);
    assert_int_equal(s3__xml_parse(&a, "<a\0b/>", 6, &r0), -EINVAL);
    char deep[2048] = "";
    for (int i = 0; i < 100; i++)
        strcat(deep, "<a>");
    struct s3_xnode *root;
    assert_int_equal(s3__xml_parse(&a, deep, strlen(deep), &root), -EINVAL);
    static const char ok[] = "<s3:Delete xmlns:s3=\"x\"><s3:Quiet>true</s3:Quiet>"
                             "<Object><Key>a&#x20AC;&#65;</Key></Object></s3:Delete>";
    assert_int_equal(s3__xml_parse(&a, ok, sizeof(ok) - 1, &root), 0);
    assert_string_equal(root->name, "Delete");
    assert_string_equal(s3__xml_child(root, "Quiet")->text, "true");
    assert_string_equal(s3__xml_child(s3__xml_child(root, "Object"), "Key")->text, "a\xE2\x82\xAC"
                                                                                   "A");
    s3__arena_fini(&a);
}

/* Text in many pieces (entities, CDATA sections, runs between comments)
 * costs arena memory in proportion to the text, not to its square: a 4 MiB
 * DeleteObjects of "&amp;" once asked for hundreds of GB. */
static void test_parse_many_pieces(void **state)
{
    (void)state;
    enum { ENT = 8000, RUNS = 2000, CDATA = 2000 };
    size_t cap = 64 + ENT * 5 + RUNS * 8 + CDATA * 13, n = 0;
    char *doc = malloc(cap);
    assert_non_null(doc);
    n += (size_t)sprintf(doc + n, "<Delete><Object><Key>");
    for (int i = 0; i < ENT; i++)
        n += (size_t)sprintf(doc + n, "&amp;");
    for (int i = 0; i < RUNS; i++)
        n += (size_t)sprintf(doc + n, "a<!---->");
    for (int i = 0; i < CDATA; i++)
        n += (size_t)sprintf(doc + n, "<![CDATA[x]]>");
    n += (size_t)sprintf(doc + n, "</Key></Object></Delete>");
    assert_true(n < cap);
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_xnode *root;
    assert_int_equal(s3__xml_parse(&a, doc, n, &root), 0);
    struct s3_xnode *k = s3__xml_child(s3__xml_child(root, "Object"), "Key");
    assert_non_null(k);
    assert_int_equal(k->textlen, ENT + RUNS + CDATA);
    assert_int_equal(strlen(k->text), k->textlen);
    assert_int_equal(k->text[0], '&');
    assert_int_equal(k->text[ENT], 'a');
    assert_int_equal(k->text[k->textlen - 1], 'x');
    assert_true(s3__arena_bytes(&a) < (512u << 10));
    s3__arena_fini(&a);
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_parse_complete),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_many_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
