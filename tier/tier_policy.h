/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: a bucket's tier policy (which remote, when to upload), its
 * validation and its stored form. Pure: no state, no I/O.
 *
 * Stored form (the core keeps it as the bucket's blob CORE_BLOB_TIER, i.e.
 * bucketcfg kind 3; docs/on-disk-format.md), TIER_POLICY_LEN bytes:
 *   u8 version (1 or 2) | u8 flags (0) | u8 storage class (TIER_SC_*; 0:
 *   STANDARD_IA, what a policy stood for before the byte was used: builds that
 *   do not know it read it as the reserved 0 it was and ignore it) | u8 0 |
 *   be32 remote id | be32 upload_after_s | be32 0
 * then, in version 2 (written only when a field of eviction is set):
 *   be32 evict_after_s | be16 high watermark | be16 low watermark
 *   (hundredths of a percent of the store's capacity; 0: none) |
 *   u8 pin count | u8 0 | be16 0 | per pin: be16 length + the prefix bytes
 * A longer value is accepted (later versions append fields); a version this
 * build does not know is refused (SRV_EBADVERSION), never half read.
 * Thread: any. */
#ifndef TIER_POLICY_H
#define TIER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define TIER_POLICY_VERSION 2
#define TIER_POLICY_LEN 16 /* version 1; version 2 appends the eviction fields */
#define TIER_PIN_MAX 8     /* pinned key prefixes of a policy */
#define TIER_PIN_LEN 256   /* bytes of one pinned prefix */
#define TIER_POLICY_MAX (TIER_POLICY_LEN + 12 + TIER_PIN_MAX * (2 + TIER_PIN_LEN))
#define TIER_EVICT_AFTER_MAX (365 * 86400) /* a year */
#define TIER_WM_MAX 10000                  /* watermarks: hundredths of a percent */
#define TIER_UPLOAD_AFTER_DEFAULT 60       /* seconds */
#define TIER_UPLOAD_AFTER_MAX (30 * 86400) /* 30 days */

/* The S3 storage class a bucket's remote tier stands for: the one name a lifecycle
 * Transition of the bucket may give (docs/tiering.md). Stored as its code. */
enum tier_sclass {
    TIER_SC_STANDARD_IA = 0, /* the default */
    TIER_SC_ONEZONE_IA,
    TIER_SC_INTELLIGENT_TIERING,
    TIER_SC_GLACIER_IR,
    TIER_SC_GLACIER,
    TIER_SC_DEEP_ARCHIVE,
    TIER_SC__COUNT
};
/** The S3 name of storage class @p sc ("STANDARD_IA"...), or NULL (no such code). */
const char *tier_sclass_name(unsigned sc);
/** The code of S3 storage class name @p name. @return it, or -1 (not one a remote may
 * stand for). */
int tier_sclass_parse(const char *name);

struct tier_policy {
    uint32_t remote;         /* the remote's id (nonzero) */
    uint8_t sclass;          /* enum tier_sclass: the storage class the remote stands for */
    uint32_t upload_after_s; /* upload once a file has been unchanged this long */
    /* eviction (all 0: never evict) */
    uint32_t
        evict_after_s;   /* free a copied file's extents once not read this long (0: not by age) */
    uint16_t evict_high; /* store fuller than this (1/100 %): evict, least recently */
    uint16_t evict_low;  /* read first, until under this (both 0: no watermarks) */
    uint32_t npins;      /* keys starting with one of these stay local */
    char pins[TIER_PIN_MAX][TIER_PIN_LEN + 1];
};

/** Does @p p evict at all? */
static inline int tier_policy_evicts(const struct tier_policy *p)
{
    return p->evict_after_s > 0 || p->evict_high > 0;
}
/** Is @p key (of @p len bytes) pinned by @p p (kept local)? Pure. */
int tier_policy_pinned(const struct tier_policy *p, const char *key, size_t len);

/** Check @p p's fields. @param[out] why a message for people (may be NULL).
 * @return 0, -EINVAL. */
int tier_policy_validate(const struct tier_policy *p, char *why, size_t whylen);
/** Write the stored form of @p p into @p out (TIER_POLICY_MAX bytes). @return its
 * length: TIER_POLICY_LEN when no field of eviction is set (version 1), more otherwise. */
size_t tier_policy_encode(const struct tier_policy *p, uint8_t out[TIER_POLICY_MAX]);
/** Read a stored form (version 1: no eviction). @return 0, -EINVAL (too short, version
 * 0, or fields out of range), SRV_EBADVERSION (a newer version). */
int tier_policy_decode(const void *buf, size_t len, struct tier_policy *out);

#endif
