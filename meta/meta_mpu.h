/* SPDX-License-Identifier: Apache-2.0
 * meta_mpu: multipart uploads (mpu: bucket + upload id -> struct meta_mpu +
 * key + metadata blob) and their parts (mpupart: upload id + part number ->
 * struct meta_part + its extents). Layouts: meta_schema.h.
 * Borrowed bytes (keys, blobs, part extents, which may be unaligned: copy
 * them out with memcpy) stay valid until the txn ends or writes again.
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_MPU_H
#define META_MPU_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** Create upload @p id of @p bucket: @p m (its keylen and metalen give the lengths of
 * @p key and @p meta). @return 0, -EEXIST, -ENOMEM, -ENOSPC, -EIO. */
int meta_mpu_create(struct meta_txn *t, uint64_t bucket, uint64_t id, const struct meta_mpu *m,
                    const char *key, const void *meta);
/** @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_mpu_get(struct meta_txn *t, uint64_t bucket, uint64_t id, struct meta_mpu *m,
                 const char **key, const void **meta);
/** @return 0, -ENOENT, -EIO. */
int meta_mpu_del(struct meta_txn *t, uint64_t bucket, uint64_t id);
/** One upload of a scan; @p m is NULL (and @p key, @p meta too) when its record is
 * malformed. @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_mpu_cb)(void *arg, uint64_t id, const struct meta_mpu *m, const char *key,
                           const void *meta);
/** The uploads of @p bucket in id order. The callback must not write @p t.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_mpu_scan(struct meta_txn *t, uint64_t bucket, meta_mpu_cb cb, void *arg);
/** The ids of the uploads of @p bucket in id order, malformed records included, into
 * *@p ids (free() it; NULL, 0 on an error) and *@p n.
 * @return 0, -ENOMEM, -EIO. */
int meta_mpu_ids(struct meta_txn *t, uint64_t bucket, uint64_t **ids, size_t *n);

/** Part @p partno of upload @p id: its record and its pt->nextents extents (borrowed).
 * @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_part_get(struct meta_txn *t, uint64_t id, uint32_t partno, struct meta_part *pt,
                  const struct meta_extent **ext);
/** Store part @p partno: @p pt and its pt->nextents extents @p ext (replacing it).
 * @return 0, -ENOMEM, -ENOSPC, -EIO. */
int meta_part_put(struct meta_txn *t, uint64_t id, uint32_t partno, const struct meta_part *pt,
                  const struct meta_extent *ext);
/** @return 0, -ENOENT, -EIO. */
int meta_part_del(struct meta_txn *t, uint64_t id, uint32_t partno);
/** One part of a scan; @p pt is NULL (and @p ext too) when its record is malformed.
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_part_cb)(void *arg, uint32_t partno, const struct meta_part *pt,
                            const struct meta_extent *ext);
/** The parts of upload @p id numbered @p from or more, in order. The callback must not
 * write @p t. @return 0, the callback's first nonzero result, -EIO. */
int meta_part_scan(struct meta_txn *t, uint64_t id, uint32_t from, meta_part_cb cb, void *arg);

/** Every part of every upload, by upload id then part number (the store check); @p pt and
 * @p ext NULL for a malformed record. @return 0, the callback's first nonzero result, -EIO. */
typedef int (*meta_part_all_cb)(void *arg, uint64_t id, uint32_t partno, const struct meta_part *pt,
                                const struct meta_extent *ext);
int meta_part_scan_all(struct meta_txn *t, meta_part_all_cb cb, void *arg);

#endif
