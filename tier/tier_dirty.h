/* SPDX-License-Identifier: Apache-2.0
 * tier_dirty: the dirty-bytes bound of write-back (docs/tiering.md § Dirty
 * bound): per level (a tiered bucket, or a directory of it whose policy or
 * preset sets dirty_bound; the nearest directory with a policy on a write's
 * path decides, else the bucket, as for every knob), the bytes written locally
 * and not yet confirmed on the remote, against that level's bound (0: none).
 *
 * Accounting. The uploader's scanner finds, once per pass, the bytes of the
 * files of each level that are not uploaded (pending); writes admitted since
 * the pass began are added, and uploads confirmed since then are taken off:
 *   dirty = pending(last complete pass)
 *           + written(since the pass before it began)
 *           - confirmed(since the last complete pass began), at least 0.
 * Writes count from one pass further back because a write acknowledged just
 * before a pass began may not show yet in the sizes that pass reads (an NFS
 * UNSTABLE write whose metadata is being committed). It is an estimate that
 * errs towards holding: a file written several times counts each write, and a
 * write the scan saw counts twice (in pending and in the counters), by at most
 * what was written during two passes; each pass corrects what went before.
 *
 * Admission (the QoS path, qos_admit.h's hold hook): a write of n bytes to a
 * level whose dirty bytes are above 0 and would pass its bound with n is held
 * (tier_dirty_check answers 1); otherwise it is charged (tier_dirty_charge).
 * A write alone larger than the bound goes when nothing is dirty, so no write
 * is held for ever by its own size. Levels of one bucket are counted apart
 * from every other bucket's, so a bucket's bound holds only its own writers.
 *
 * Thread: every call is thread-safe (one mutex, held briefly; no I/O). */
#ifndef TIER_DIRTY_H
#define TIER_DIRTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier_dirty;

/** A level of a bucket as the scanner publishes it. */
struct tier_dirty_level {
    uint64_t dir;   /* the directory's inode; the bucket's own: the bucket's inode */
    bool decides;   /* the level sets dirty_bound (itself or by its preset) */
    uint64_t bound; /* bytes (0: no bound) when decides */
};

/** What one level stands at now (tier_dirty_get, metrics). */
struct tier_dirty_stat {
    uint64_t bound;      /* 0: none */
    uint64_t dirty;      /* the estimate above */
    uint64_t held_total; /* writes held at this level (each once) */
    uint64_t held_us;    /* time those writes were held */
    uint64_t charged;    /* bytes charged since the start */
    uint64_t confirmed;  /* bytes confirmed uploaded since the start */
};

/** @return 0, -ENOMEM. */
int tier_dirty_new(struct tier_dirty **out);
/** Safe on NULL. */
void tier_dirty_free(struct tier_dirty *d);

/* ---- the scanner (one pass over the tiered buckets) ---- */

/** A pass over bucket @p bucket of @p tenant begins: @p lv are its levels with
 * a policy (the bucket's own entry first or not; at most 257), replacing those
 * of the last pass (a level that stays keeps its counters). Pending bytes are
 * gathered from 0. A bucket none of whose levels sets a nonzero bound is
 * dropped (its writes pass untouched). @return 0, -ENOMEM. */
int tier_dirty_pass_begin(struct tier_dirty *d, uint64_t bucket, uint32_t tenant,
                          const struct tier_dirty_level *lv, size_t n);
/** File bytes not uploaded, found by this pass under level @p level of
 * @p bucket (tier_dirty_level_of). */
void tier_dirty_pending(struct tier_dirty *d, uint64_t bucket, uint64_t level, uint64_t bytes);
/** The pass over @p bucket is complete: its pending bytes stand. */
void tier_dirty_pass_end(struct tier_dirty *d, uint64_t bucket);
/** Forget every bucket no pass began on since the last call (its policy or its
 * bound went): call once per complete pass over all buckets. */
void tier_dirty_sweep(struct tier_dirty *d);
/** The level of @p bucket that decides the bound of a file whose nearest
 * directory with a policy is @p hit (0: none): @p hit when it decides, else
 * the bucket. @return the level (the bucket's inode for the bucket). */
uint64_t tier_dirty_level_of(struct tier_dirty *d, uint64_t bucket, uint64_t hit);

/* ---- the uploader ---- */

/** @p bytes of a file under level @p level of @p bucket were confirmed on the
 * remote (an unknown level is ignored). */
void tier_dirty_confirmed(struct tier_dirty *d, uint64_t bucket, uint64_t level, uint64_t bytes);
/** Whether the uploader should hasten @p bucket (not wait for the files'
 * upload delay): a writer was held there since the last pass began, or some
 * level's dirty bytes reached its bound. */
bool tier_dirty_hasten(struct tier_dirty *d, uint64_t bucket);

/** A writer to @p bucket was held: whether to ask the uploader for a pass now
 * (true once per completed pass of the bucket, so held writers do not make
 * the scanner pass without pause). */
bool tier_dirty_kick(struct tier_dirty *d, uint64_t bucket);

/* ---- admission (front-end threads, through QoS) ---- */

/** Whether any bucket has a bound now (one atomic load: the fast path). */
bool tier_dirty_any(struct tier_dirty *d);
/** Whether @p bucket has a bound, and (@p dirs) whether its levels include
 * directories (then a write's ancestors are needed to find its level). */
bool tier_dirty_bounded(struct tier_dirty *d, uint64_t bucket, bool *dirs);
/** Would a write of @p bytes to @p bucket, below directories @p dirs
 * (innermost first), pass the bound of its level? Charges nothing.
 * @param[in] first  the first time this write asks (counted in held_total
 *                   when it is held)
 * @return 0 (go), 1 (hold). */
int tier_dirty_check(struct tier_dirty *d, uint64_t bucket, const uint64_t *dirs, size_t ndirs,
                     uint64_t bytes, bool first);
/** A write of @p bytes to @p bucket below @p dirs goes: add them to its
 * level's dirty bytes; @p held_us: how long it was held (0: not held). */
void tier_dirty_charge(struct tier_dirty *d, uint64_t bucket, const uint64_t *dirs, size_t ndirs,
                       uint64_t bytes, uint64_t held_us);
/** The state of level @p level of @p bucket. @return 0, -ENOENT. */
int tier_dirty_get(struct tier_dirty *d, uint64_t bucket, uint64_t level,
                   struct tier_dirty_stat *out);
/** Call @p cb for every level of every bounded bucket (under the lock: @p cb
 * must not call back). */
typedef void (*tier_dirty_cb)(void *arg, uint64_t bucket, uint32_t tenant, uint64_t level,
                              const struct tier_dirty_stat *st);
void tier_dirty_each(struct tier_dirty *d, tier_dirty_cb cb, void *arg);

#endif
