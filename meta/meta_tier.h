/* SPDX-License-Identifier: Apache-2.0
 * meta_tier: the tier's records of remote copies (table tierst, layout in
 * meta_schema.h): one per file the uploader copied to a remote, keyed by the
 * file's inode, holding the remote, the bucket-relative key, the change
 * counter the copy was made from, its size, ETag and time, and the file's last
 * read time (coarse; 0: none known), which eviction by age reads after a restart.
 * Callers bring the txn; this module never commits.
 * Thread: any thread that holds a txn (writes: inside a writer op). */
#ifndef META_TIER_H
#define META_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** A decoded tierst record; @p key is the record's own copy (NUL-terminated). */
struct meta_tier_copy {
    struct meta_tierst st;
    char key[META_KEY_MAX + 1];
};

/** Encode @p c into @p buf (at least sizeof(struct meta_tierst) + META_KEY_MAX bytes).
 * @return the length, or 0 when the key is empty or longer than META_KEY_MAX. Pure. */
size_t meta_tier_encode(const struct meta_tier_copy *c, void *buf, size_t buflen);
/** Decode a record. Pure. @return 0, SRV_ECORRUPT (short, unknown version, key length
 * wrong). */
int meta_tier_decode(const void *val, size_t len, struct meta_tier_copy *out);

/** @return 0, -ENOENT, SRV_ECORRUPT. */
int meta_tier_get(struct meta_txn *t, uint64_t ino, struct meta_tier_copy *out);
/** @return 0, -EINVAL (bad key), or an engine error. */
int meta_tier_put(struct meta_txn *t, uint64_t ino, const struct meta_tier_copy *c);
/** Raise the last read time (meta_tierst.read_s) of @p ino's record to @p read_s
 * (seconds since the epoch); a record that holds a later one is left alone.
 * @return 0 (nothing to do included), -ENOENT (no record), SRV_ECORRUPT, or an engine
 * error. */
int meta_tier_note_read(struct meta_txn *t, uint64_t ino, int64_t read_s);
/** @return 0, -ENOENT. */
int meta_tier_del(struct meta_txn *t, uint64_t ino);
/** One record of a scan (valid during the call); nonzero stops the scan. A malformed
 * record is passed with @p c NULL. */
typedef int (*meta_tier_cb)(void *arg, uint64_t ino, const struct meta_tier_copy *c);
/** Visit the records with ino > @p after in ino order. @return 0, or the callback's
 * nonzero result. */
int meta_tier_scan(struct meta_txn *t, uint64_t after, meta_tier_cb cb, void *arg);

#endif
