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

static const char *const sclass_names[TIER_SC__COUNT] = {
    "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE",
};

const char *tier_sclass_name(unsigned sc)
{
    return sc < TIER_SC__COUNT ? sclass_names[sc] : NULL;
}

int tier_sclass_parse(const char *name)
{
    for (unsigned i = 0; name && i < TIER_SC__COUNT; i++)
        if (strcmp(name, sclass_names[i]) == 0)
            return (int)i;
    return -1;
}

int tier_policy_validate(const struct tier_policy *p, char *why, size_t whylen)
{
    if (p->remote == 0) {
        if (why)
            snprintf(why, whylen, "a remote is required");
        return -EINVAL;
    }
    if (p->sclass >= TIER_SC__COUNT) {
        if (why)
            snprintf(why, whylen, "unknown storage class code %u", p->sclass);
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
    out[2] = p->sclass;
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
    out->sclass = b[2];
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
