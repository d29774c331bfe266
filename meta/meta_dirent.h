/* SPDX-License-Identifier: Apache-2.0
 * meta_dirent: directory entries, by name (dirents) and by readdir cookie
 * (dircookie), kept together: a cookie is META_COOKIE_BASE | hash63(name),
 * probed +1 on collision and kept at most META_COOKIE_MAX (wrapping to
 * META_COOKIE_BASE), so it is stable for the entry's life and across
 * restarts. Layouts: meta_schema.h.
 * Callers bring the txn; nothing here commits. Thread: any holding the txn. */
#ifndef META_DIRENT_H
#define META_DIRENT_H

#include <stddef.h>
#include <stdint.h>

#include "meta.h"

/** Entry @p name (@p len <= META_NAME_MAX bytes) of @p dir.
 * @return 0, -ENOENT, -ENAMETOOLONG, SRV_ECORRUPT, -EIO. */
int meta_dirent_get(struct meta_txn *t, uint64_t dir, const char *name, size_t len,
                    struct meta_dirent *out);
/** Add entry @p name -> (@p ino, @p type) to @p dir with a fresh cookie.
 * @return 0, -EEXIST (the name exists), -ENAMETOOLONG, -ENOSPC, -EIO. */
int meta_dirent_add(struct meta_txn *t, uint64_t dir, const char *name, size_t len, uint64_t ino,
                    uint32_t type);
/** Remove entry @p name of @p dir and its cookie.
 * @return 0, -ENOENT, SRV_ECORRUPT (no cookie record), -EIO. */
int meta_dirent_del(struct meta_txn *t, uint64_t dir, const char *name, size_t len);

/** One entry of a scan: @p name (@p len bytes) is valid during the call only.
 * @return 0 to go on; anything else stops the scan and becomes its result. */
typedef int (*meta_dirent_cb)(void *arg, uint64_t cookie, uint64_t ino, const char *name,
                              size_t len);
/** The entries of @p dir in cookie order whose cookie is after @p after (below
 * META_COOKIE_BASE: from the first entry; UINT64_MAX: none).
 * @return 0, the callback's first nonzero result, -EIO. */
int meta_dirent_scan(struct meta_txn *t, uint64_t dir, uint64_t after, meta_dirent_cb cb,
                     void *arg);
/** The entries of @p dir in name order (bytewise). @return as meta_dirent_scan. */
int meta_dirent_scan_names(struct meta_txn *t, uint64_t dir, meta_dirent_cb cb, void *arg);

#endif
