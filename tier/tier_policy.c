/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: validation and stored form of a bucket's tier policy
 * (tier_policy.h). Thread: any. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "meta_schema.h"
#include "srv_err.h"
#include "tier_policy.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

int tier_policy_validate(const struct tier_policy *p, char *why, size_t whylen)
{
    if (p->remote == 0) {
        if (why)
            snprintf(why, whylen, "a remote is required");
        return -EINVAL;
    }
    if (p->upload_after_s > TIER_UPLOAD_AFTER_MAX) {
        if (why)
            snprintf(why, whylen, "upload_after_s must be 0..%u", TIER_UPLOAD_AFTER_MAX);
        return -EINVAL;
    }
    if (p->evict_after_s > TIER_EVICT_AFTER_MAX) {
        if (why)
            snprintf(why, whylen, "evict_after_s must be 0..%u", TIER_EVICT_AFTER_MAX);
        return -EINVAL;
    }
    if (p->evict_high > TIER_WM_MAX || p->evict_low > TIER_WM_MAX ||
        (p->evict_high == 0) != (p->evict_low == 0) ||
        (p->evict_high && p->evict_low >= p->evict_high)) {
        if (why)
            snprintf(why, whylen,
                     "evict_watermark needs high and low, 0 < low < high <= 100 (percent)");
        return -EINVAL;
    }
    if (p->npins > TIER_PIN_MAX) {
        if (why)
            snprintf(why, whylen, "at most %u pinned prefixes", TIER_PIN_MAX);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < p->npins; i++) {
        size_t n = strnlen(p->pins[i], TIER_PIN_LEN + 1);
        if (n == 0 || n > TIER_PIN_LEN) {
            if (why)
                snprintf(why, whylen, "a pinned prefix has 1..%u bytes", TIER_PIN_LEN);
            return -EINVAL;
        }
    }
    return 0;
}

int tier_policy_pinned(const struct tier_policy *p, const char *key, size_t len)
{
    for (uint32_t i = 0; i < p->npins; i++) {
        size_t n = strlen(p->pins[i]);
        if (n <= len && memcmp(key, p->pins[i], n) == 0)
            return 1;
    }
    return 0;
}

size_t tier_policy_encode(const struct tier_policy *p, uint8_t out[TIER_POLICY_MAX])
{
    memset(out, 0, TIER_POLICY_LEN);
    out[0] = 1;
    meta_be32_put(out + 4, p->remote);
    meta_be32_put(out + 8, p->upload_after_s);
    if (!tier_policy_evicts(p) && p->npins == 0)
        return TIER_POLICY_LEN; /* what version 1 builds read */
    out[0] = 2;
    uint8_t *q = out + TIER_POLICY_LEN;
    meta_be32_put(q, p->evict_after_s);
    put16(q + 4, p->evict_high);
    put16(q + 6, p->evict_low);
    q[8] = (uint8_t)p->npins;
    q[9] = q[10] = q[11] = 0;
    q += 12;
    for (uint32_t i = 0; i < p->npins && i < TIER_PIN_MAX; i++) {
        size_t n = strnlen(p->pins[i], TIER_PIN_LEN);
        put16(q, (uint16_t)n);
        memcpy(q + 2, p->pins[i], n);
        q += 2 + n;
    }
    return (size_t)(q - out);
}

int tier_policy_decode(const void *buf, size_t len, struct tier_policy *out)
{
    const uint8_t *b = buf;
    if (len < TIER_POLICY_LEN || b[0] == 0)
        return -EINVAL;
    if (b[0] > TIER_POLICY_VERSION)
        return SRV_EBADVERSION;
    memset(out, 0, sizeof(*out));
    out->remote = meta_be32_get(b + 4);
    out->upload_after_s = meta_be32_get(b + 8);
    if (b[0] >= 2) {
        const uint8_t *q = b + TIER_POLICY_LEN, *end = b + len;
        if (end - q < 12)
            return -EINVAL;
        out->evict_after_s = meta_be32_get(q);
        out->evict_high = get16(q + 4);
        out->evict_low = get16(q + 6);
        out->npins = q[8];
        if (out->npins > TIER_PIN_MAX)
            return -EINVAL;
        q += 12;
        for (uint32_t i = 0; i < out->npins; i++) {
            if (end - q < 2)
                return -EINVAL;
            size_t n = get16(q);
            if (n == 0 || n > TIER_PIN_LEN || (size_t)(end - q - 2) < n)
                return -EINVAL;
            memcpy(out->pins[i], q + 2, n);
            out->pins[i][n] = '\0';
            if (memchr(out->pins[i], '\0', n))
                return -EINVAL;
            q += 2 + n;
        }
    }
    return tier_policy_validate(out, NULL, 0);
}

/* ---- directory tier policies ---- */

void tier_effective_of(const struct tier_policy *b, const struct tier_dirpol *d,
                       struct tier_effective *out)
{
    out->upload_after_s = b->upload_after_s;
    out->evict_after_s = b->evict_after_s;
    out->keep_local = false;
    out->evict_priority = TIER_PRIO_NORMAL;
    if (!d)
        return;
    if (d->set & TIER_D_UPLOAD)
        out->upload_after_s = d->upload_after_s;
    if (d->set & TIER_D_EVICT)
        out->evict_after_s = d->evict_after_s;
    if (d->set & TIER_D_KEEP)
        out->keep_local = d->keep_local != 0;
    if (d->set & TIER_D_PRIO)
        out->evict_priority = d->evict_priority;
}

int tier_dirpol_validate(const struct tier_dirpol *d, char *why, size_t whylen)
{
    const char *m = NULL;
    if (d->dir == 0)
        m = "a directory is required";
    else if (d->set & ~TIER_D__KNOWN)
        m = "unknown fields";
    else if (d->upload_after_s > TIER_UPLOAD_AFTER_MAX)
        m = "upload_after_s must be 0..2592000";
    else if (d->evict_after_s > TIER_EVICT_AFTER_MAX)
        m = "evict_after_s must be 0..31536000";
    else if (d->keep_local > 1)
        m = "keep_local is true or false";
    else if (d->evict_priority > TIER_PRIO_HIGH)
        m = "evict_priority is low, normal or high";
    if (!m)
        return 0;
    if (why)
        snprintf(why, whylen, "%s", m);
    return -EINVAL;
}

size_t tier_dirs_encode(const struct tier_dirpol *v, size_t n, uint8_t *out)
{
    if (n > TIER_DIRPOL_MAX)
        n = TIER_DIRPOL_MAX;
    out[0] = 1;
    out[1] = 0;
    put16(out + 2, (uint16_t)n);
    uint8_t *q = out + 4;
    for (size_t i = 0; i < n; i++, q += TIER_DIRPOL_LEN) {
        put16(q, TIER_DIRPOL_LEN);
        meta_be64_put(q + 2, v[i].dir);
        q[10] = v[i].set;
        q[11] = v[i].keep_local;
        q[12] = v[i].evict_priority;
        q[13] = 0;
        meta_be32_put(q + 14, v[i].upload_after_s);
        meta_be32_put(q + 18, v[i].evict_after_s);
    }
    return (size_t)(q - out);
}

int tier_dirs_decode(const void *buf, size_t len, struct tier_dirpol *v)
{
    const uint8_t *b = buf, *end = b + len;
    if (len < 4 || b[0] == 0)
        return -EINVAL;
    if (b[0] > 1)
        return SRV_EBADVERSION;
    size_t n = get16(b + 2);
    if (n > TIER_DIRPOL_MAX)
        return -EINVAL;
    const uint8_t *q = b + 4;
    for (size_t i = 0; i < n; i++) {
        if (end - q < 2)
            return -EINVAL;
        size_t el = get16(q);
        if (el < TIER_DIRPOL_LEN || (size_t)(end - q) < el)
            return -EINVAL;
        v[i] = (struct tier_dirpol){.dir = meta_be64_get(q + 2),
                                    .set = q[10] & TIER_D__KNOWN,
                                    .keep_local = q[11],
                                    .evict_priority = q[12],
                                    .upload_after_s = meta_be32_get(q + 14),
                                    .evict_after_s = meta_be32_get(q + 18)};
        if (tier_dirpol_validate(&v[i], NULL, 0) < 0)
            return -EINVAL;
        q += el;
    }
    return (int)n;
}

const char *tier_prio_name(uint8_t prio)
{
    return prio == TIER_PRIO_LOW ? "low" : prio == TIER_PRIO_HIGH ? "high" : "normal";
}

int tier_prio_parse(const char *s)
{
    if (strcmp(s, "low") == 0)
        return TIER_PRIO_LOW;
    if (strcmp(s, "normal") == 0)
        return TIER_PRIO_NORMAL;
    if (strcmp(s, "high") == 0)
        return TIER_PRIO_HIGH;
    return -EINVAL;
}
