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

/* ---- directory tier policies, recall settings and workload presets ----
 * A directory of a tiered bucket may override some fields of the bucket's policy
 * for the files below it; the nearest directory with a policy on a file's path
 * (its first parent, then up to the bucket) wins, and the fields it does not set
 * are the bucket's. The remote, the watermarks and the pinned prefixes stay the
 * bucket's. Directories are named by inode (a renamed directory keeps its
 * policy), as QoS names them. The bucket's own settings beyond its policy record
 * (preset, recall, read-only...) are the entry whose inode is the bucket's.
 *
 * A level (the bucket's entry, or a directory's) may name a workload preset: a
 * set of values for every knob; the knobs it sets itself win over its preset, and
 * its preset over the level above (a directory's "above" is the bucket).
 *
 * Stored form: one bucketcfg record per bucket, kind TIER_DIRS_KIND (core.h
 * CORE_BLOB_TIER_DIRS; docs/on-disk-format.md):
 *   u8 version (1) | u8 0 | be16 count | per entry:
 *     be16 entry length (>= 22) | be64 directory inode | u8 set (low byte of
 *     TIER_D_*) | u8 keep_local | u8 evict_priority | u8 set (high byte) |
 *     be32 upload_after_s | be32 evict_after_s
 *   and, in entries of TIER_DIRPOL_LEN bytes (this build writes those):
 *     u8 preset | u8 whole_file | u8 dir_prefetch | u8 read_only |
 *     be32 read_ahead | be32 chunk_size | be16 streams | be16 0 | be64 dirty_bound
 * A longer entry is accepted (later versions append fields to an entry). */
#define TIER_DIRS_KIND 5
#define TIER_DIRPOL_LEN 46  /* bytes of an entry as written by this build, with its length */
#define TIER_DIRPOL_MAX 256 /* directory policies of one bucket */
#define TIER_DIRS_MAX (4 + (TIER_DIRPOL_MAX + 1) * TIER_DIRPOL_LEN)

#define TIER_D_UPLOAD 0x1    /* upload_after_s is set */
#define TIER_D_EVICT 0x2     /* evict_after_s is set (0: not by age here) */
#define TIER_D_KEEP 0x4      /* keep_local is set */
#define TIER_D_PRIO 0x8      /* evict_priority is set */
#define TIER_D_PRESET 0x10   /* preset is set */
#define TIER_D_WHOLE 0x20    /* whole_file is set */
#define TIER_D_DIRPF 0x40    /* dir_prefetch is set */
#define TIER_D_RO 0x80       /* read_only is set */
#define TIER_D_RA 0x100      /* read_ahead is set */
#define TIER_D_CHUNK 0x200   /* chunk_size is set */
#define TIER_D_STREAMS 0x400 /* streams is set */
#define TIER_D_DIRTY 0x800   /* dirty_bound is set */
#define TIER_D__KNOWN 0xfff

#define TIER_CHUNK_MIN (1u << 20)
#define TIER_CHUNK_MAX (16u << 20)
#define TIER_CHUNK_DEFAULT 0u /* the daemon's tier_recall_chunk_size */
#define TIER_RA_MAX (1u << 30)
#define TIER_STREAMS_MAX 64

enum tier_evict_prio { TIER_PRIO_LOW = 0, TIER_PRIO_NORMAL = 1, TIER_PRIO_HIGH = 2 };

enum tier_preset {
    TIER_PRESET_UNSET = 0,
    TIER_PRESET_NONE,
    TIER_PRESET_MODEL_CHECKPOINT_RO,
    TIER_PRESET_MODEL_CHECKPOINT_RW,
    TIER_PRESET_DATASET_RO,
    TIER_PRESET_DATASET_RW,
    TIER_PRESET__COUNT
};

struct tier_dirpol {
    uint64_t dir;           /* the directory's inode (the bucket's: the bucket's settings) */
    uint16_t set;           /* TIER_D_*: the fields it overrides */
    uint8_t keep_local;     /* files below are never evicted */
    uint8_t evict_priority; /* enum tier_evict_prio: order under watermark pressure */
    uint32_t upload_after_s;
    uint32_t evict_after_s;
    uint8_t preset;       /* enum tier_preset */
    uint8_t whole_file;   /* a recall fetches the whole file (else the range + read_ahead) */
    uint8_t dir_prefetch; /* a listing prefetches small evicted files (core_prefetch.c) */
    uint8_t read_only;    /* writes are refused */
    uint32_t read_ahead;  /* bytes a recall fetches past a read's range (whole_file off) */
    uint32_t chunk_size;  /* bytes of one ranged GET of a recall (0: the daemon's) */
    uint16_t streams;     /* chunks of one file fetched at once (0: as many as threads) */
    uint64_t dirty_bound; /* bytes not on the remote before writers are held (tier_dirty.h) */
};

/** What applies to one file. */
struct tier_effective {
    uint32_t upload_after_s, evict_after_s;
    bool keep_local;
    uint8_t evict_priority;
    uint8_t preset; /* of the level that decided (UNSET: none) */
    bool whole_file, dir_prefetch, read_only;
    uint32_t read_ahead, chunk_size;
    uint16_t streams;
    uint64_t dirty_bound;
};
/** The bucket policy @p b, then the bucket's entry @p be, then the directory's @p d
 * (each may be NULL). Pure. */
void tier_effective_of(const struct tier_policy *b, const struct tier_dirpol *be,
                       const struct tier_dirpol *d, struct tier_effective *out);
/** Whether level @p d decides the dirty bound (it sets dirty_bound, or names a
 * preset, which always does), and then the bound in @p bound (0: none). Pure. */
bool tier_dirpol_dirty(const struct tier_dirpol *d, uint64_t *bound);
/** The knobs of preset @p p (TIER_PRESET_NONE: the built-in defaults) as an entry
 * whose set names the knobs the preset decides. */
void tier_preset_knobs(uint8_t p, struct tier_dirpol *out);
/** Name of a preset ("NONE", "MODEL_CHECKPOINT_RO", ...; "" for UNSET);
 * tier_preset_parse: its inverse, -EINVAL for another string. */
const char *tier_preset_name(uint8_t p);
int tier_preset_parse(const char *s);

/** Check @p d. @return 0, -EINVAL (with @p why). */
int tier_dirpol_validate(const struct tier_dirpol *d, char *why, size_t whylen);
/** Write @p n entries (at most TIER_DIRPOL_MAX + 1) into @p out (TIER_DIRS_MAX
 * bytes). @return its length. */
size_t tier_dirs_encode(const struct tier_dirpol *v, size_t n, uint8_t *out);
/** Read a stored form into @p v (room for TIER_DIRPOL_MAX + 1). @return the number
 * of entries, -EINVAL (malformed), SRV_EBADVERSION (a newer version). */
int tier_dirs_decode(const void *buf, size_t len, struct tier_dirpol *v);
/** Name of a priority ("low", "normal", "high"); tier_prio_parse: its inverse,
 * -EINVAL for another string. */
const char *tier_prio_name(uint8_t prio);
int tier_prio_parse(const char *s);

#endif
