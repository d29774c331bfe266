/* SPDX-License-Identifier: Apache-2.0
 * tier_cache: validation and stored form of a bucket's cache mode
 * (tier_cache.h). Thread: any. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "meta_schema.h"
#include "srv_err.h"
#include "tier_cache.h"

int tier_cache_validate(const struct tier_cache *c, char *why, size_t whylen)
{
    if (c->ttl_s > TIER_CACHE_TTL_MAX) {
        if (why)
            snprintf(why, whylen, "ttl_s must be 0..%u", TIER_CACHE_TTL_MAX);
        return -EINVAL;
    }
    return 0;
}

size_t tier_cache_encode(const struct tier_cache *c, uint8_t out[TIER_CACHE_LEN])
{
    memset(out, 0, TIER_CACHE_LEN);
    out[0] = TIER_CACHE_VERSION;
    out[1] = c->read_only ? TIER_CACHE_F_RO : 0;
    meta_be32_put(out + 4, c->ttl_s);
    return TIER_CACHE_LEN;
}

int tier_cache_decode(const void *buf, size_t len, struct tier_cache *out)
{
    const uint8_t *b = buf;
    if (len < TIER_CACHE_LEN || b[0] == 0)
        return -EINVAL;
    if (b[0] > TIER_CACHE_VERSION)
        return SRV_EBADVERSION;
    memset(out, 0, sizeof(*out));
    out->read_only = (b[1] & TIER_CACHE_F_RO) != 0;
    out->ttl_s = meta_be32_get(b + 4);
    return tier_cache_validate(out, NULL, 0);
}
