/* SPDX-License-Identifier: Apache-2.0
 * tier_settings: what the tier policies (the bucket's record, its own settings and
 * its directories', tier_policy.h) say about one file or directory, read from the
 * metadata when asked: the front ends ask whether a change is allowed (read-only
 * buckets and directories, workload presets), the core's recall which knobs to use.
 * A change of a policy applies to the next question (nothing cached but the set of
 * buckets that have any read-only level, refreshed by tier_settings_refresh, which
 * the admin API calls after each change and the uploader at each pass).
 * Thread: any (each call reads in a txn of its own). */
#ifndef TIER_SETTINGS_H
#define TIER_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"
#include "tier_policy.h"

/** The settings that apply to @p ino: a file (its first parent's policy), or a
 * directory or bucket (its own). @return 0, -ENOENT (no such inode, or not in a
 * tiered bucket), or a metadata error. */
int tier_settings_of(struct meta_env *m, uint64_t ino, struct tier_effective *out);
/** Is a change of @p ino (a file, a directory, a bucket) refused by a read-only
 * tier policy? Costs nothing for buckets without one. */
bool tier_settings_readonly(struct meta_env *m, uint64_t ino);
/** The same for key @p key of bucket @p bucket (the deepest directory of the key
 * that exists decides). */
bool tier_settings_readonly_key(struct meta_env *m, uint64_t bucket, const char *key,
                                size_t keylen);
/** Might @p bucket have a read-only level (no metadata read; false: surely not)? */
bool tier_settings_ro_maybe(uint64_t bucket);
/** Re-read which buckets have a read-only level (after a policy changed). */
void tier_settings_refresh(struct meta_env *m);

#endif
