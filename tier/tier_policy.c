/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: validation and stored form of a bucket's tier policy
 * (tier_policy.h). Thread: any. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "srv_err.h"
#include "tier_policy.h"

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
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
    return 0;
}

size_t tier_policy_encode(const struct tier_policy *p, uint8_t out[TIER_POLICY_LEN])
{
    memset(out, 0, TIER_POLICY_LEN);
    out[0] = TIER_POLICY_VERSION;
    put32(out + 4, p->remote);
    put32(out + 8, p->upload_after_s);
    return TIER_POLICY_LEN;
}

int tier_policy_decode(const void *buf, size_t len, struct tier_policy *out)
{
    const uint8_t *b = buf;
    if (len < TIER_POLICY_LEN || b[0] == 0)
        return -EINVAL;
    if (b[0] > TIER_POLICY_VERSION)
        return SRV_EBADVERSION;
    out->remote = get32(b + 4);
    out->upload_after_s = get32(b + 8);
    return tier_policy_validate(out, NULL, 0);
}
