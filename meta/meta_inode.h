/* SPDX-License-Identifier: Apache-2.0
 * meta_inode: inode records and what hangs off one inode: the inode number
 * counter, inline bytes (small files, symlink targets), object metadata
 * (ETag + S3 metadata blob), the orphan list (unlinked inodes still held),
 * the background work noted per file and the tenant roots. Layouts:
 * meta_schema.h (inodes, inline, objmeta, orphans, dirty, roots,
 * meta/next_ino).
 * Callers bring the txn (read, or write inside an op); nothing here commits.
 * Borrowed bytes stay valid until the txn ends or writes again.
 * Thread: any thread holding the txn. */
#ifndef META_INODE_H
#define META_INODE_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** @return 0, -ENOENT, SRV_ECORRUPT (malformed record; logged), -EIO. */
int meta_inode_get(struct meta_txn *t, uint64_t ino, struct meta_inode *out);
/** @return 0, -ENOSPC, -EIO. */
int meta_inode_put(struct meta_txn *t, uint64_t ino, const struct meta_inode *rec);
/** @return 0, -ENOENT, -EIO. */
int meta_inode_del(struct meta_txn *t, uint64_t ino);
/** Take the next inode number. @return 0, SRV_ECORRUPT (no or a malformed counter),
 * -ENOSPC, -EIO. */
int meta_inode_alloc(struct meta_txn *t, uint64_t *ino);

/** One inode of a scan (@p r a copy; NULL when malformed).
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_inode_cb)(void *arg, uint64_t ino, const struct meta_inode *r);
/** Every inode, by number (the store check). The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_inode_scan(struct meta_txn *t, meta_inode_cb cb, void *arg);

/** Inline bytes of @p ino, borrowed. @return 0, -ENOENT (none), -EIO. */
int meta_inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len);
/** Replace the inline bytes of @p ino (@p len 0 keeps an empty record: a symlink target
 * or an empty object). @return 0, -ENOSPC, -EIO. */
int meta_inline_put(struct meta_txn *t, uint64_t ino, const void *data, size_t len);
/** @return 0, -ENOENT, -EIO. */
int meta_inline_del(struct meta_txn *t, uint64_t ino);

/** Object metadata of @p ino: its ETag into @p etag (@p etagsize bytes, NUL-terminated;
 * "" when unknown) and, when @p meta is not NULL, a heap copy of its metadata blob
 * (NULL when empty; free it).
 * @return 0, -ENOENT, SRV_ECORRUPT (malformed, or an ETag too long for @p etag),
 * -ENOMEM, -EIO. */
int meta_objmeta_get(struct meta_txn *t, uint64_t ino, char *etag, size_t etagsize, void **meta,
                     size_t *metalen);
/** Store @p etag (NULL or "" = unknown; cut at META_ETAG_MAX bytes) and blob @p meta.
 * @return 0, -ENOMEM, -ENOSPC, -EIO. */
int meta_objmeta_put(struct meta_txn *t, uint64_t ino, const char *etag, const void *meta,
                     size_t metalen);
/** @return 0, -ENOENT, -EIO. */
int meta_objmeta_del(struct meta_txn *t, uint64_t ino);

/** Record @p ino as an orphan (unlinked, still referenced). @return 0, -ENOSPC, -EIO. */
int meta_orphan_put(struct meta_txn *t, uint64_t ino);
/** @return 0, -ENOENT, -EIO. */
int meta_orphan_del(struct meta_txn *t, uint64_t ino);
/** @return 0 (an orphan), -ENOENT, -EIO. */
int meta_orphan_get(struct meta_txn *t, uint64_t ino);
/** Every orphan, in inode order, into a heap array @p *inos (free it) of @p *n.
 * @return 0, -ENOMEM, -EIO. */
int meta_orphan_list(struct meta_txn *t, uint64_t **inos, size_t *n);

/** The background work noted for file @p ino (dirty). @return 0, -ENOENT,
 * SRV_ECORRUPT, -EIO. */
int meta_dirty_get(struct meta_txn *t, uint64_t ino, struct meta_dirty *out);
/** @return 0, -ENOSPC, -EIO. */
int meta_dirty_put(struct meta_txn *t, uint64_t ino, const struct meta_dirty *d);
/** @return 0, -ENOENT, -EIO. */
int meta_dirty_del(struct meta_txn *t, uint64_t ino);
/** One record of a scan (@p d a copy). @return 0 to go on; anything else stops the
 * scan and becomes its result. */
typedef int (*meta_dirty_cb)(void *arg, uint64_t ino, const struct meta_dirty *d);
/** The records of inodes after @p after (0: all), in inode order; malformed ones are
 * skipped. The callback may read @p t, not write it.
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_dirty_scan(struct meta_txn *t, uint64_t after, meta_dirty_cb cb, void *arg);

/** Root directory of tenant @p tenant. @return 0, -ENOENT, SRV_ECORRUPT, -EIO. */
int meta_root_get(struct meta_txn *t, uint32_t tenant, uint64_t *root);
/** @return 0, -ENOSPC, -EIO. */
int meta_root_put(struct meta_txn *t, uint32_t tenant, uint64_t root);
/** @return 0, -ENOENT, -EIO. */
int meta_root_del(struct meta_txn *t, uint32_t tenant);

#endif
