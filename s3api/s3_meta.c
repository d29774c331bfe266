/* SPDX-License-Identifier: Apache-2.0
 * s3_meta: the object metadata blob the S3 front end keeps with each object
 * through core_upload_commit()/core_key_set_meta(): stored response headers
 * (Content-Type, Content-Encoding, ...), x-amz-meta-* user metadata, tags,
 * the additional checksum and the multipart part count.
 *
 * Layout (version 1): "S3M1", then records of
 *   u8 type | u16 key length | key | u32 value length | value   (big-endian)
 * Unknown record types are kept on decode, so newer writers stay readable.
 * Thread: reentrant. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int s3__meta_decode(struct s3_meta *m, struct s3_arena *a, const void *blob, size_t len)
{
    const unsigned char *p = blob, *end = p + len;
    memset(m, 0, sizeof(*m));
    if (len == 0 || !blob)
        return 0;
    if (len < 4 || memcmp(p, META_MAGIC, 4) != 0)
        return -EINVAL;
    p += 4;
    while (p < end) {
        if (end - p < 3)
            return -EINVAL;
        int t = p[0];
        size_t kl = ((size_t)p[1] << 8) | p[2];
        p += 3;
        if ((size_t)(end - p) < kl + 4)
            return -EINVAL;
        const unsigned char *k = p;
        p += kl;
        size_t vl = ((size_t)p[0] << 24) | ((size_t)p[1] << 16) | ((size_t)p[2] << 8) | p[3];
        p += 4;
        if ((size_t)(end - p) < vl)
            return -EINVAL;
        s3__meta_add(m, a, (enum s3_meta_type)t, (const char *)k, kl, (const char *)p, vl);
        p += vl;
    }
    return 0;
}
