/* SPDX-License-Identifier: Apache-2.0
 * tier_cache: a bucket's cache mode (docs/tiering.md § Cache mode): the bucket's
 * namespace is its tier policy's remote (bucket and prefix), imported lazily and
 * revalidated after ttl_s; read-only or read-write (write-back through the
 * uploader). Its validation and stored form. Pure: no state, no I/O.
 *
 * Stored form (the core keeps it as the bucket's blob CORE_BLOB_CACHE, i.e.
 * bucketcfg kind 4, beside the tier policy, kind 3; docs/on-disk-format.md),
 * TIER_CACHE_LEN bytes:
 *   u8 version (1) | u8 flags (1: read-only) | be16 0 | be32 ttl_s | be64 0
 * A longer value is accepted (later versions append fields); a version this
 * build does not know is refused (SRV_EBADVERSION).
 * Thread: any. */
#ifndef TIER_CACHE_H
#define TIER_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIER_CACHE_VERSION 1
#define TIER_CACHE_LEN 16
#define TIER_CACHE_F_RO 0x1
#define TIER_CACHE_TTL_DEFAULT 30       /* seconds */
#define TIER_CACHE_TTL_MAX (30 * 86400) /* 30 days */

struct tier_cache {
    uint32_t ttl_s; /* names imported this long ago are asked again (0: always ask) */
    bool read_only; /* writes refused (-EROFS) */
};

/** Check @p c's fields. @param[out] why a message for people (may be NULL).
 * @return 0, -EINVAL. */
int tier_cache_validate(const struct tier_cache *c, char *why, size_t whylen);
/** Write the stored form of @p c into @p out. @return TIER_CACHE_LEN. */
size_t tier_cache_encode(const struct tier_cache *c, uint8_t out[TIER_CACHE_LEN]);
/** Read a stored form. @return 0, -EINVAL (too short, version 0, out of range),
 * SRV_EBADVERSION (a newer version). */
int tier_cache_decode(const void *buf, size_t len, struct tier_cache *out);

#endif
