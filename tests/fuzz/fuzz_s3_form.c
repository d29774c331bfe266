/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the browser form decoder and POST policy check
 * (s3_form.c), as POST Object streams a multipart/form-data body. Input:
 * byte 0 picks the size of the pieces the body is fed in; the rest is the
 * body (boundary "B0und"). The decoder must give the same fields and the
 * same file bytes however the body is cut (here: in pieces, and whole), never
 * more file bytes than the body holds, and a form that ends must have ended
 * both ways. Its "policy" field, when there is one, goes through the policy
 * check against the decoded form. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

struct sink {
    unsigned char *buf;
    size_t n, cap;
};

static int file_data(void *arg, const char *data, size_t len)
{
    struct sink *s = arg;
    if (s->n + len > s->cap)
        __builtin_trap();
    memcpy(s->buf + s->n, data, len);
    s->n += len;
    return 0;
}

static const struct s3_form_cbs CBS = {NULL, file_data};

/* Decode @p body in pieces of @p piece bytes (0: whole). @return s3__form_end's result. */
static int decode(struct s3_arena *a, const char *body, size_t len, size_t piece, struct s3_form *f,
                  struct sink *s)
{
    if (s3__form_init(f, a, "multipart/form-data; boundary=\"B0und\"", &CBS, s) != 0)
        __builtin_trap();
    for (size_t off = 0; off < len;) {
        size_t n = piece && len - off > piece ? piece : len - off;
        if (s3__form_feed(f, body + off, n) != 0)
            return -EINVAL;
        off += n;
    }
    return s3__form_end(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = data[0] % 17 + 1;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    struct s3_arena a;
    s3__arena_init(&a);
    struct s3_form *f1 = s3__arena_alloc(&a, sizeof(*f1)), *f2 = s3__arena_alloc(&a, sizeof(*f2));
    struct sink s1 = {malloc(len + 1), 0, len}, s2 = {malloc(len + 1), 0, len};
    int r1 = decode(&a, body, len, piece, f1, &s1);
    int r2 = decode(&a, body, len, 0, f2, &s2);
    if (r1 != r2)
        __builtin_trap();
    if (r1 == 0) {
        if (s1.n != s2.n || memcmp(s1.buf, s2.buf, s1.n) != 0 || f1->nfields != f2->nfields)
            __builtin_trap();
        for (size_t i = 0; i < f1->nfields; i++)
            if (strcmp(f1->fields[i].name, f2->fields[i].name) != 0 ||
                f1->fields[i].vlen != f2->fields[i].vlen ||
                memcmp(f1->fields[i].val, f2->fields[i].val, f1->fields[i].vlen) != 0)
                __builtin_trap();
        const char *pol = s3__form_get(f1, "policy"), *why = NULL;
        if (pol) {
            int rc = s3__form_policy_check(&a, f1, pol, "bkt", "key", s1.n, 1700000000, &why);
            if (rc != 0 && !why)
                __builtin_trap();
        }
    }
    free(s1.buf);
    free(s2.buf);
    s3__arena_fini(&a);
    return 0;
}

#ifdef S3_FUZZ_MAIN
#include "s3_fuzz_main.h"
int main(void)
{
    return fuzz_main("s3_form", 20000);
}
#endif
