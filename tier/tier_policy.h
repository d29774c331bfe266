/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: a bucket's tier policy (which remote, when to upload), its
 * validation and its stored form. Pure: no state, no I/O.
 *
 * Stored form (the core keeps it as the bucket's blob CORE_BLOB_TIER, i.e.
 * bucketcfg kind 3; docs/on-disk-format.md), TIER_POLICY_LEN bytes:
 *   u8 version (1 or 2) | u8 flags (0) | be16 0 | be32 remote id |
 *   be32 upload_after_s | be32 0
 * then, in version 2 (written only when a field of eviction is set):
 *   be32 evict_after_s | be16 high watermark | be16 low watermark
 *   (hundredths of a percent of the store's capacity; 0: none) |
 *   u8 pin count | u8 0 | be16 0 | per pin: be16 length + the prefix bytes
 * A longer value is accepted (later versions append fields); a version this
 * build does not know is refused (SRV_EBADVERSION), never half read.
 * Thread: any. */
#ifndef TIER_POLICY_H
#define TIER_POLICY_H

#include <stdbool.h>
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

struct tier_policy {
    uint32_t remote;         /* the remote's id (nonzero) */
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

/* ---- directory tier policies ----
 * A directory of a tiered bucket may override some fields of the bucket's policy
 * for the files below it; the nearest directory with a policy on a file's path
 * (its first parent, then up to the bucket) wins, and the fields it does not set
 * are the bucket policy's. The remote, the watermarks and the pinned prefixes stay
 * the bucket's. Directories are named by inode (a renamed directory keeps its
 * policy), as QoS names them.
 *
 * Stored form: one bucketcfg record per bucket, kind TIER_DIRS_KIND (core.h
 * CORE_BLOB_TIER_DIRS; docs/on-disk-format.md):
 *   u8 version (1) | u8 0 | be16 count | per entry:
 *     be16 entry length (>= TIER_DIRPOL_LEN) | be64 directory inode | u8 set (TIER_D_*)
 *     | u8 keep_local | u8 evict_priority | u8 0 | be32 upload_after_s
 *     | be32 evict_after_s
 * A longer entry is accepted (later versions append fields to an entry). */
#define TIER_DIRS_KIND 5
#define TIER_DIRPOL_LEN 22  /* bytes of an entry as written by this build, with its length */
#define TIER_DIRPOL_MAX 256 /* directory policies of one bucket */
#define TIER_DIRS_MAX (4 + TIER_DIRPOL_MAX * TIER_DIRPOL_LEN)

#define TIER_D_UPLOAD 0x1 /* upload_after_s is set */
#define TIER_D_EVICT 0x2  /* evict_after_s is set (0: not by age here) */
#define TIER_D_KEEP 0x4   /* keep_local is set */
#define TIER_D_PRIO 0x8   /* evict_priority is set */
#define TIER_D__KNOWN 0xf

enum tier_evict_prio { TIER_PRIO_LOW = 0, TIER_PRIO_NORMAL = 1, TIER_PRIO_HIGH = 2 };

struct tier_dirpol {
    uint64_t dir;           /* the directory's inode */
    uint8_t set;            /* TIER_D_*: the fields it overrides */
    uint8_t keep_local;     /* files below are never evicted */
    uint8_t evict_priority; /* enum tier_evict_prio: order under watermark pressure */
    uint32_t upload_after_s;
    uint32_t evict_after_s;
};

/** What applies to one file: the bucket policy @p b, overridden by @p d (NULL:
 * none). Pure. */
struct tier_effective {
    uint32_t upload_after_s, evict_after_s;
    bool keep_local;
    uint8_t evict_priority;
};
void tier_effective_of(const struct tier_policy *b, const struct tier_dirpol *d,
                       struct tier_effective *out);

/** Check @p d. @return 0, -EINVAL (with @p why). */
int tier_dirpol_validate(const struct tier_dirpol *d, char *why, size_t whylen);
/** Write @p n entries (at most TIER_DIRPOL_MAX) into @p out (TIER_DIRS_MAX bytes).
 * @return its length. */
size_t tier_dirs_encode(const struct tier_dirpol *v, size_t n, uint8_t *out);
/** Read a stored form into @p v (room for TIER_DIRPOL_MAX). @return the number of
 * entries, -EINVAL (malformed), SRV_EBADVERSION (a newer version). */
int tier_dirs_decode(const void *buf, size_t len, struct tier_dirpol *v);
/** Name of a priority ("low", "normal", "high"); tier_prio_parse: its inverse,
 * -EINVAL for another string. */
const char *tier_prio_name(uint8_t prio);
int tier_prio_parse(const char *s);

#endif
