/* SPDX-License-Identifier: Apache-2.0
 * meta_keyidx: the per-bucket key index (S3 keys in binary order: files by
 * their key "a/b/c", directories by "a/b/") and the key path of each
 * directory inside its bucket (dirpath). Keys are up to META_KEY_MAX bytes;
 * the engine's keys are shorter, so a key longer than META_KEY_VERBATIM is
 * stored as its first META_KEY_HEAD bytes + a hash of the whole key, with the
 * rest of the key in the value (meta_schema.h). This module hides that
 * encoding: callers see whole keys, and meta_keyidx_scan delivers them in
 * exact binary order (keys sharing a head are read as a group and sorted).
 * The same encoding keeps the version keys of versioned buckets (meta_vkey_*).
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_KEYIDX_H
#define META_KEYIDX_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** The inode and type of @p key in @p bucket. @return 0, -ENOENT, -EIO. */
int meta_keyidx_get(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                    uint64_t *ino, uint32_t *type);
/** Index @p key -> (@p ino, @p type) (replacing the key's entry).
 * @return 0, SRV_EBADNAME (another long key has the same head and hash: refused,
 * logged), -ENOSPC, -EIO. */
int meta_keyidx_put(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                    uint64_t ino, uint32_t type);
/** @return 0, -ENOENT, -EIO. */
int meta_keyidx_del(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen);

/** One key of a scan: the whole key (@p klen bytes, valid during the call only).
 * Setting *@p skip to n (1 .. klen) skips every later key starting with the first
 * n bytes of this one. @return 0 to go on; anything else stops the scan and
 * becomes its result. */
typedef int (*meta_keyidx_cb)(void *arg, const char *key, size_t klen,
                              const struct meta_keyval *kv, size_t *skip);
/** The keys of @p bucket that start with @p prefix (@p plen bytes, may be 0) and are
 * >= @p from (@p flen bytes; NULL: no bound), in binary order. The callback must
 * not write @p t. @return 0, the callback's first nonzero result, -ENOMEM, -EIO. */
int meta_keyidx_scan(struct meta_txn *t, uint64_t bucket, const char *prefix, size_t plen,
                     const char *from, size_t flen, meta_keyidx_cb cb, void *arg);

/* The version keys of a bucket (vkeys, meta_schema.h): the keys that have a
 * version chain, in the key index's encoding and order; a key's value is its
 * chain id. The same contracts as the meta_keyidx_* calls above. */
/** @return 0, -ENOENT, -EIO. */
int meta_vkey_get(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                  uint64_t *chain);
/** @return 0, SRV_EBADNAME (a long key's head and hash collide), -ENOSPC, -EIO. */
int meta_vkey_put(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                  uint64_t chain);
/** @return 0, -ENOENT, -EIO. */
int meta_vkey_del(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen);
/** As meta_keyidx_scan; kv->ino is the chain id. */
int meta_vkey_scan(struct meta_txn *t, uint64_t bucket, const char *prefix, size_t plen,
                   const char *from, size_t flen, meta_keyidx_cb cb, void *arg);

/** Key path of directory @p dir inside its bucket ("" for the bucket itself, else
 * ending in '/') into @p buf (META_KEY_MAX + 1 bytes).
 * @return 0, -ENOENT (not a directory inside a bucket), SRV_ECORRUPT, -EIO. */
int meta_dirpath_get(struct meta_txn *t, uint64_t dir, char *buf, size_t *len);
/** @return 0, -ENOSPC, -EIO. */
int meta_dirpath_put(struct meta_txn *t, uint64_t dir, const char *path, size_t len);
/** @return 0, -ENOENT, -EIO. */
int meta_dirpath_del(struct meta_txn *t, uint64_t dir);

#endif
