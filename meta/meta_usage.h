/* SPDX-License-Identifier: Apache-2.0
 * meta_usage: usage and limits per tenant (ino 0), bucket and limited
 * directory (meta_schema.h: usage). Tenants and buckets always have a record;
 * a directory only while a limit is set on it.
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_USAGE_H
#define META_USAGE_H

#include <stdint.h>

#include "meta.h"

/** @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_usage_get(struct meta_txn *t, uint32_t tenant, uint64_t ino, struct meta_usage *out);
/** @return 0, -ENOSPC, -EIO. */
int meta_usage_put(struct meta_txn *t, uint32_t tenant, uint64_t ino, const struct meta_usage *u);
/** @return 0, -ENOENT, -EIO. */
int meta_usage_del(struct meta_txn *t, uint32_t tenant, uint64_t ino);

/** One usage record of a scan (@p u NULL when its value is malformed).
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_usage_cb)(void *arg, uint32_t tenant, uint64_t ino,
                             const struct meta_usage *u);
/** Every usage record, by tenant then inode. The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_usage_scan(struct meta_txn *t, meta_usage_cb cb, void *arg);

#endif
