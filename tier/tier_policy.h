/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: a bucket's tier policy (which remote, when to upload), its
 * validation and its stored form. Pure: no state, no I/O.
 *
 * Stored form (the core keeps it as the bucket's blob CORE_BLOB_TIER, i.e.
 * bucketcfg kind 3; docs/on-disk-format.md), TIER_POLICY_LEN bytes:
 *   u8 version (1) | u8 flags (0) | be16 0 | be32 remote id |
 *   be32 upload_after_s | be32 0
 * A longer value is accepted (later versions append fields); a version this
 * build does not know is refused (SRV_EBADVERSION), never half read.
 * Thread: any. */
#ifndef TIER_POLICY_H
#define TIER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define TIER_POLICY_VERSION 1
#define TIER_POLICY_LEN 16
#define TIER_UPLOAD_AFTER_DEFAULT 60       /* seconds */
#define TIER_UPLOAD_AFTER_MAX (30 * 86400) /* 30 days */

struct tier_policy {
    uint32_t remote;         /* the remote's id (nonzero) */
    uint32_t upload_after_s; /* upload once a file has been unchanged this long */
};

/** Check @p p's fields. @param[out] why a message for people (may be NULL).
 * @return 0, -EINVAL. */
int tier_policy_validate(const struct tier_policy *p, char *why, size_t whylen);
/** Write the stored form of @p p into @p out. @return TIER_POLICY_LEN. */
size_t tier_policy_encode(const struct tier_policy *p, uint8_t out[TIER_POLICY_LEN]);
/** Read a stored form. @return 0, -EINVAL (too short, version 0, or fields out of
 * range), SRV_EBADVERSION (a newer version). */
int tier_policy_decode(const void *buf, size_t len, struct tier_policy *out);

#endif
