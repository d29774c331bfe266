/* SPDX-License-Identifier: Apache-2.0
 * s3_meta: the object metadata blob the S3 front end keeps with each object
 * through core_upload_commit()/core_key_set_meta(): stored response headers
 * (Content-Type, Content-Encoding, ...), x-amz-meta-* user metadata, tags,
 * the additional checksum and the multipart part count.
 *
 * Layout (version 1): "S3M1", then records of
 *   u8 type | u16 key length | key | u32 value length | value   (big-endian)
 * Unknown record types are kept on decode, so newer writers stay readable.
 * The reader, meta_objmeta_walk() (meta_schema.h), is shared with tier/.
 * Thread: reentrant. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_schema.h"
#include "s3_internal.h"

#define META_MAGIC "S3M1"
#define META_MAX_VAL (1u << 20)

void s3__meta_add(struct s3_meta *m, struct s3_arena *a, enum s3_meta_type t, const char *k,
                  size_t klen, const char *v, size_t vlen)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct s3_meta_ent *e = s3__arena_alloc(a, cap * sizeof(*e));
        if (m->n)
            memcpy(e, m->ents, m->n * sizeof(*e));
        m->ents = e;
        m->cap = cap;
    }
    struct s3_meta_ent *e = &m->ents[m->n++];
    e->type = t;
    e->key = s3__arena_strndup(a, k, klen);
    e->klen = klen;
    e->val = s3__arena_strndup(a, v, vlen);
    e->vlen = vlen;
}

void s3__meta_drop(struct s3_meta *m, enum s3_meta_type t)
{
    size_t j = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->ents[i].type != t)
            m->ents[j++] = m->ents[i];
    m->n = j;
}

const struct s3_meta_ent *s3__meta_find(const struct s3_meta *m, enum s3_meta_type t, const char *k)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->ents[i].type == t && strcmp(m->ents[i].key, k) == 0)
            return &m->ents[i];
    return NULL;
}

size_t s3__meta_count(const struct s3_meta *m, enum s3_meta_type t)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->ents[i].type == t;
    return n;
}

int s3__meta_encode(const struct s3_meta *m, void **blob, size_t *len)
{
    size_t n = 4;
    for (size_t i = 0; i < m->n; i++) {
        if (m->ents[i].klen > 0xFFFF || m->ents[i].vlen > META_MAX_VAL)
            return -EINVAL;
        n += 7 + m->ents[i].klen + m->ents[i].vlen;
    }
    unsigned char *b = malloc(n), *p = b;
    if (!b)
        return -ENOMEM;
    memcpy(p, META_MAGIC, 4);
    p += 4;
    for (size_t i = 0; i < m->n; i++) {
        const struct s3_meta_ent *e = &m->ents[i];
        *p++ = (unsigned char)e->type;
        *p++ = (unsigned char)(e->klen >> 8);
        *p++ = (unsigned char)e->klen;
        memcpy(p, e->key, e->klen);
        p += e->klen;
        *p++ = (unsigned char)(e->vlen >> 24);
        *p++ = (unsigned char)(e->vlen >> 16);
        *p++ = (unsigned char)(e->vlen >> 8);
        *p++ = (unsigned char)e->vlen;
        memcpy(p, e->val, e->vlen);
        p += e->vlen;
    }
    *blob = b;
    *len = n;
    return 0;
}

struct decode_ctx {
    struct s3_meta *m;
    struct s3_arena *a;
};

static void decode_one(void *arg, int type, const unsigned char *k, size_t kl,
                       const unsigned char *v, size_t vl)
{
    struct decode_ctx *c = arg;
    s3__meta_add(c->m, c->a, (enum s3_meta_type)type, (const char *)k, kl, (const char *)v, vl);
}

int s3__meta_decode(struct s3_meta *m, struct s3_arena *a, const void *blob, size_t len)
{
    struct decode_ctx c = {.m = m, .a = a};
    memset(m, 0, sizeof(*m));
    return meta_objmeta_walk(blob, len, decode_one, &c);
}
