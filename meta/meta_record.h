/* SPDX-License-Identifier: Apache-2.0
 * meta_record: generic records for the layers above the core that only need
 * to persist rows: tenants, users, access keys, exports (tenants/), QoS
 * policies (qos/), daemon-wide settings (server/, nfs/) and, later, remote-tier
 * state. A record is a key (1 .. META_REC_KEY_MAX bytes) and an opaque value
 * in one of a few tables, in bytewise key order; the layouts are their
 * owners' (meta_schema.h lists the tables: t_tenants ... t_config).
 * Each call is its own transaction: reads see the last committed state,
 * writes go through the group-commit writer and are durable on return.
 * Thread: any (never from inside a writer op). */
#ifndef META_RECORD_H
#define META_RECORD_H

#include <stddef.h>

#include "meta.h"

enum meta_rec_table {
    META_REC_TENANTS = 0, /* tenant id (be32) -> record */
    META_REC_USERS,       /* tenant id (be32) + user id (be64) -> record */
    META_REC_KEYS,        /* access key id -> record */
    META_REC_EXPORTS,     /* export id (be32) -> record */
    META_REC_QOS,         /* policy key -> record */
    META_REC_CONFIG,      /* name -> value (daemon-wide settings, master key, counters) */
    META_REC__COUNT
};

#define META_REC_KEY_MAX 500
#define META_REC_NOOVERWRITE 0x1 /* meta_record_put: -EEXIST if the key exists */

/** @param[out] val heap copy (free()), @p vlen its length.
 * @return 0, -ENOENT, -EINVAL (bad table, empty key), -ENAMETOOLONG, -ENOMEM, -EIO. */
int meta_record_get(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen,
                    void **val, size_t *vlen);
/** Insert or replace (META_REC_NOOVERWRITE: -EEXIST if present). Durable on return.
 * @return 0, -EEXIST, -EINVAL, -ENAMETOOLONG, -ENOSPC, -EIO. */
int meta_record_put(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen,
                    const void *val, size_t vlen, unsigned flags);
/** Durable on return. @return 0, -ENOENT, -EINVAL, -EIO. */
int meta_record_del(struct meta_env *m, enum meta_rec_table tb, const void *key, size_t klen);
/** One record of a scan (valid during the call only): return nonzero to stop. */
typedef int (*meta_record_cb)(void *arg, const void *key, size_t klen, const void *val,
                              size_t vlen);
/** Visit records with key >= @p start (NULL = first) in key order until @p cb returns
 * nonzero (the scan then returns 0: the callback keeps its own result).
 * @return 0, -EINVAL, -EIO. */
int meta_record_scan(struct meta_env *m, enum meta_rec_table tb, const void *start, size_t slen,
                     meta_record_cb cb, void *arg);

#endif
