/* SPDX-License-Identifier: Apache-2.0
 * meta_extent: the extent map of each file (file offset -> stored extent)
 * and the block CRCs of stored extents (xcrc, keyed by device and offset),
 * and how many inodes share an extent (xref).
 * Layouts: meta_schema.h. Extents never overlap; an extent covers
 * [foff, foff + vlen) of its file.
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_EXTENT_H
#define META_EXTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** @return 0, -ENOSPC, -EIO. */
int meta_extent_put(struct meta_txn *t, uint64_t ino, uint64_t foff, const struct meta_extent *x);
/** @return 0, -ENOENT, -EIO. */
int meta_extent_del(struct meta_txn *t, uint64_t ino, uint64_t foff);

/** One extent of a scan (@p x is a copy). @return 0 to go on; anything else stops
 * the scan and becomes its result. */
typedef int (*meta_extent_cb)(void *arg, uint64_t foff, const struct meta_extent *x);
/** The extents of @p ino overlapping [@p lo, @p hi), in file order (one starting
 * before @p lo counts when it reaches past it). The callback may read @p t, not
 * write it. @return 0, the callback's first nonzero result, SRV_ECORRUPT (a
 * malformed extent record), -EIO. */
int meta_extent_scan(struct meta_txn *t, uint64_t ino, uint64_t lo, uint64_t hi,
                     meta_extent_cb cb, void *arg);

/** Block CRCs of the extent at (@p dev, @p off) into @p out (META_BCRC_MAX), for an
 * extent of @p len bytes. @return how many (0: none, or a malformed record). */
uint32_t meta_bcrc_get(struct meta_txn *t, uint32_t dev, uint64_t off, uint32_t len,
                       uint32_t *out);
/** @return 0, -ENOSPC, -EIO. */
int meta_bcrc_put(struct meta_txn *t, uint32_t dev, uint64_t off, const uint32_t *bcrc,
                  uint32_t nb);
/** @return 0, -ENOENT, -EIO. */
int meta_bcrc_del(struct meta_txn *t, uint32_t dev, uint64_t off);

/* Shared extents (xref): an extent in the maps of several inodes (the versions of
 * a file changed in place over NFS share the extents they did not change). */
/** How many inodes hold the extent at (@p dev, @p off): 1 without a record. */
uint32_t meta_xref_get(struct meta_txn *t, uint32_t dev, uint64_t off);
/** Set that number (@p holders <= 1 deletes the record). @return 0, -ENOSPC, -EIO. */
int meta_xref_set(struct meta_txn *t, uint32_t dev, uint64_t off, uint32_t holders);
/** Whether any extent is shared. */
bool meta_xref_any(struct meta_txn *t);
/** One record of a scan. @return 0 to go on; anything else stops the scan and
 * becomes its result. */
typedef int (*meta_xref_cb)(void *arg, uint32_t dev, uint64_t off, uint32_t holders);
/** Every shared extent, by device and offset. The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_xref_scan(struct meta_txn *t, meta_xref_cb cb, void *arg);

/** Every extent of every file, by inode then file offset (the store check). The callback
 * may read @p t, not write it. @return 0, the callback's first nonzero result, -EIO. */
typedef int (*meta_extent_all_cb)(void *arg, uint64_t ino, uint64_t foff,
                                  const struct meta_extent *x);
int meta_extent_scan_all(struct meta_txn *t, meta_extent_all_cb cb, void *arg);
/** Every extent with block CRCs, by device and offset. @return as above. */
typedef int (*meta_bcrc_cb)(void *arg, uint32_t dev, uint64_t off);
int meta_bcrc_scan(struct meta_txn *t, meta_bcrc_cb cb, void *arg);

#endif
