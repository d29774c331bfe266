/* SPDX-License-Identifier: Apache-2.0
 * meta_bucket: per-bucket configuration records (meta_schema.h: bucketcfg):
 * the core's own (versioning, object lock: struct meta_bucketcfg, kind
 * META_BCFG_CORE) and opaque blobs the front ends keep for a bucket (the S3
 * lifecycle configuration, META_BCFG_LIFECYCLE). Deleted with the bucket.
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_BUCKET_H
#define META_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** Record @p kind of @p bucket, borrowed. @return 0, -ENOENT, -EIO. */
int meta_bucketcfg_get(struct meta_txn *t, uint64_t bucket, uint8_t kind, const void **val,
                       size_t *len);
/** @return 0, -EINVAL (empty), -ENOSPC, -EIO. */
int meta_bucketcfg_put(struct meta_txn *t, uint64_t bucket, uint8_t kind, const void *val,
                       size_t len);
/** @return 0, -ENOENT, -EIO. */
int meta_bucketcfg_del(struct meta_txn *t, uint64_t bucket, uint8_t kind);
/** One record of a scan (@p val valid during the call only).
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_bucketcfg_cb)(void *arg, uint64_t bucket, uint8_t kind, const void *val,
                                 size_t len);
/** Every record, by bucket then kind; @p kind 0: of every kind, else only that kind.
 * The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_bucketcfg_scan(struct meta_txn *t, uint8_t kind, meta_bucketcfg_cb cb, void *arg);

#endif
