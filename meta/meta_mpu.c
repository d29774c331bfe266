/* SPDX-License-Identifier: Apache-2.0
 * meta_mpu: multipart uploads and parts (meta_mpu.h).
 * Thread: any thread holding the txn. */
#include "meta_mpu.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"

static void mkey(uint8_t *k, uint64_t bucket, uint64_t id)
{
    meta_be64_put(k, bucket);
    meta_be64_put(k + 8, id);
}

static void pkey(uint8_t *k, uint64_t id, uint32_t partno)
{
    meta_be64_put(k, id);
    meta_be32_put(k + 8, partno);
}

int meta_mpu_create(struct meta_txn *t, uint64_t bucket, uint64_t id, const struct meta_mpu *m,
                    const char *key, const void *meta)
{
    uint8_t k[16];
    size_t vl = sizeof(*m) + m->keylen + m->metalen;
    uint8_t *v = malloc(vl);
    if (!v)
        return -ENOMEM;
    memcpy(v, m, sizeof(*m));
    memcpy(v + sizeof(*m), key, m->keylen);
    if (m->metalen)
        memcpy(v + sizeof(*m) + m->keylen, meta, m->metalen);
    mkey(k, bucket, id);
    int rc = meta__put(t, META_DBI_MPU, k, 16, v, vl, META_NOOVERWRITE);
    free(v);
    return rc;
}

int meta_mpu_get(struct meta_txn *t, uint64_t bucket, uint64_t id, struct meta_mpu *m,
                 const char **key, const void **meta)
{
    uint8_t k[16];
    struct meta_val v;
    mkey(k, bucket, id);
    int rc = meta__get(t, META_DBI_MPU, k, 16, &v);
    if (rc)
        return rc;
    if (v.len < sizeof(*m))
        return SRV_ECORRUPT;
    memcpy(m, v.data, sizeof(*m));
    if (v.len != sizeof(*m) + m->keylen + m->metalen)
        return SRV_ECORRUPT;
    *key = (const char *)v.data + sizeof(*m);
    *meta = (const char *)v.data + sizeof(*m) + m->keylen;
    return 0;
}

int meta_mpu_del(struct meta_txn *t, uint64_t bucket, uint64_t id)
{
    uint8_t k[16];
    mkey(k, bucket, id);
    return meta__del(t, META_DBI_MPU, k, 16);
}

struct mscan {
    meta_mpu_cb mcb;
    meta_part_cb pcb;
    void *arg;
    bool end;
};

static int mpu_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct mscan *s = arg;
    struct meta_mpu m;
    if (klen != 16) {
        s->end = true;
        return 1;
    }
    uint64_t id = meta_be64_get((const uint8_t *)key + 8);
    if (vlen >= sizeof(m)) {
        memcpy(&m, val, sizeof(m));
        if (vlen >= sizeof(m) + m.keylen)
            return s->mcb(s->arg, id, &m, (const char *)val + sizeof(m),
                          (const char *)val + sizeof(m) + m.keylen);
    }
    return s->mcb(s->arg, id, NULL, NULL, NULL);
}

int meta_mpu_scan(struct meta_txn *t, uint64_t bucket, meta_mpu_cb cb, void *arg)
{
    uint8_t pk[8];
    struct mscan s = {.mcb = cb, .arg = arg};
    meta_be64_put(pk, bucket);
    struct meta_range r = {.prefix = pk, .plen = 8};
    int rc = meta__scan(t, META_DBI_MPU, &r, mpu_ent, &s);
    return s.end ? 0 : rc;
}

static int id_add(void *arg, uint64_t id, const struct meta_mpu *m, const char *key,
                  const void *meta)
{
    (void)m;
    (void)key;
    (void)meta;
    return meta__ids_push(arg, id);
}

int meta_mpu_ids(struct meta_txn *t, uint64_t bucket, uint64_t **ids, size_t *n)
{
    struct meta__ids l = {0};
    return meta__ids_take(&l, meta_mpu_scan(t, bucket, id_add, &l), ids, n);
}

/* ---- parts ---- */

/* Decode a part record; @p ext points into @p v. @return 0, SRV_ECORRUPT. */
static int part_decode(const void *v, size_t vlen, struct meta_part *pt,
                       const struct meta_extent **ext)
{
    if (vlen < sizeof(*pt))
        return SRV_ECORRUPT;
    memcpy(pt, v, sizeof(*pt));
    if (vlen != sizeof(*pt) + (size_t)pt->nextents * sizeof(struct meta_extent))
        return SRV_ECORRUPT;
    *ext = (const struct meta_extent *)((const char *)v + sizeof(*pt));
    return 0;
}

int meta_part_get(struct meta_txn *t, uint64_t id, uint32_t partno, struct meta_part *pt,
                  const struct meta_extent **ext)
{
    uint8_t k[12];
    struct meta_val v;
    pkey(k, id, partno);
    int rc = meta__get(t, META_DBI_MPUPART, k, 12, &v);
    if (rc)
        return rc;
    return part_decode(v.data, v.len, pt, ext);
}

int meta_part_put(struct meta_txn *t, uint64_t id, uint32_t partno, const struct meta_part *pt,
                  const struct meta_extent *ext)
{
    uint8_t k[12];
    size_t vl = sizeof(*pt) + (size_t)pt->nextents * sizeof(*ext);
    uint8_t *v = malloc(vl);
    if (!v)
        return -ENOMEM;
    memcpy(v, pt, sizeof(*pt));
    if (pt->nextents)
        memcpy(v + sizeof(*pt), ext, (size_t)pt->nextents * sizeof(*ext));
    pkey(k, id, partno);
    int rc = meta__put(t, META_DBI_MPUPART, k, 12, v, vl, 0);
    free(v);
    return rc;
}

int meta_part_del(struct meta_txn *t, uint64_t id, uint32_t partno)
{
    uint8_t k[12];
    pkey(k, id, partno);
    return meta__del(t, META_DBI_MPUPART, k, 12);
}

static int part_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct mscan *s = arg;
    struct meta_part pt;
    const struct meta_extent *ext;
    if (klen != 12) {
        s->end = true;
        return 1;
    }
    uint32_t partno = meta_be32_get((const uint8_t *)key + 8);
    if (part_decode(val, vlen, &pt, &ext) != 0)
        return s->pcb(s->arg, partno, NULL, NULL);
    return s->pcb(s->arg, partno, &pt, ext);
}

int meta_part_scan(struct meta_txn *t, uint64_t id, uint32_t from, meta_part_cb cb, void *arg)
{
    uint8_t pk[8], sk[12];
    struct mscan s = {.pcb = cb, .arg = arg};
    meta_be64_put(pk, id);
    pkey(sk, id, from);
    struct meta_range r = {.prefix = pk, .plen = 8, .start = sk, .slen = 12};
    int rc = meta__scan(t, META_DBI_MPUPART, &r, part_ent, &s);
    return s.end ? 0 : rc;
}

struct pall {
    meta_part_all_cb cb;
    void *arg;
};

static int pall_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct pall *s = arg;
    struct meta_part pt;
    const struct meta_extent *ext;
    if (klen != 12)
        return 0;
    uint64_t id = meta_be64_get(key);
    uint32_t partno = meta_be32_get((const uint8_t *)key + 8);
    if (part_decode(val, vlen, &pt, &ext) != 0)
        return s->cb(s->arg, id, partno, NULL, NULL);
    return s->cb(s->arg, id, partno, &pt, ext);
}

int meta_part_scan_all(struct meta_txn *t, meta_part_all_cb cb, void *arg)
{
    struct pall s = {cb, arg};
    struct meta_range r = {0};
    return meta__scan(t, META_DBI_MPUPART, &r, pall_ent, &s);
}
