/* SPDX-License-Identifier: Apache-2.0
 * meta_version: the version chains of versioned buckets (meta_schema.h:
 * versions, vino; the chains' keys are in vkeys, meta_keyidx.h). A chain
 * holds every version of one key, newest first: a header (the key, the
 * bucket, where its null version is) and one record per version (a data
 * version names the inode holding it, a delete marker none). vino maps an
 * inode back to the version it holds.
 * Callers bring the txn (read, or write inside an op); nothing here commits.
 * Borrowed bytes stay valid until the txn ends or writes again.
 * Thread: any thread holding the txn. */
#ifndef META_VERSION_H
#define META_VERSION_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** The header of chain @p chain; @p key (borrowed) gets its key.
 * @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_vchain_get(struct meta_txn *t, uint64_t chain, struct meta_vchain *h, const char **key);
/** Write the header with key @p key (@p h->keylen bytes). @return 0, -ENOSPC, -EIO. */
int meta_vchain_put(struct meta_txn *t, uint64_t chain, const struct meta_vchain *h,
                    const char *key);
/** Delete the header (its versions must be gone). @return 0, -ENOENT, -EIO. */
int meta_vchain_del(struct meta_txn *t, uint64_t chain);

/** @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_version_get(struct meta_txn *t, uint64_t chain, uint64_t vseq, struct meta_version *out);
/** @return 0, -ENOSPC, -EIO. */
int meta_version_put(struct meta_txn *t, uint64_t chain, uint64_t vseq,
                     const struct meta_version *v);
/** @return 0, -ENOENT, -EIO. */
int meta_version_del(struct meta_txn *t, uint64_t chain, uint64_t vseq);

/** One version of a scan (@p v a copy; NULL when its record is malformed).
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_version_cb)(void *arg, uint64_t vseq, const struct meta_version *v);
/** The versions of @p chain, newest first, starting after version @p after (0: from
 * the newest). The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_version_scan(struct meta_txn *t, uint64_t chain, uint64_t after, meta_version_cb cb,
                      void *arg);

/** The version inode @p ino holds. @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_vino_get(struct meta_txn *t, uint64_t ino, uint64_t *chain, uint64_t *vseq);
/** @return 0, -ENOSPC, -EIO. */
int meta_vino_put(struct meta_txn *t, uint64_t ino, uint64_t chain, uint64_t vseq);
/** @return 0, -ENOENT, -EIO. */
int meta_vino_del(struct meta_txn *t, uint64_t ino);

/* Whole-table scans (the store check); a malformed record comes with NULL. The callbacks
 * may read @p t, not write it; each returns 0 to go on. @return 0, the first nonzero
 * result of a callback, -EIO. */
typedef int (*meta_vchain_cb)(void *arg, uint64_t chain, const struct meta_vchain *h,
                              const char *key);
typedef int (*meta_vall_cb)(void *arg, uint64_t chain, uint64_t vseq, const struct meta_version *v);
/** Every chain header and version record, by chain then newest first. */
int meta_versions_scan(struct meta_txn *t, meta_vchain_cb ccb, meta_vall_cb vcb, void *arg);
typedef int (*meta_vino_cb)(void *arg, uint64_t ino, uint64_t chain, uint64_t vseq);
/** Every inode -> version record, by inode. */
int meta_vino_scan(struct meta_txn *t, meta_vino_cb cb, void *arg);

#endif
