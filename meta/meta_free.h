/* SPDX-License-Identifier: Apache-2.0
 * meta_free: the extent store's persistent free map, kept in the "free" table
 * (key be32 dev + be64 offset, value be64 length: meta_schema.h), handed to
 * the store as its struct store_map over one txn of this store. The records'
 * meaning (free ranges, the marker) is the store's (store_int.h).
 * Thread: any thread holding the txn. */
#ifndef META_FREE_H
#define META_FREE_H

#include "meta.h"
#include "store.h"

/** The free map over txn @p t (a read txn for store_open, a write txn for
 * store_txn_begin), valid while @p t is. */
void meta_free_map(struct meta_txn *t, struct store_map *out);

#endif
