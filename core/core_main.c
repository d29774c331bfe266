/* SPDX-License-Identifier: Apache-2.0
 * core_main: lifecycle of the namespace core (open, recovery, close, sync),
 * tenant roots, the core_table_* key/value view, references held on inodes
 * (core_ref/unref, orphans) and statistics.
 *
 * Open order: meta env (schema check) -> store (allocator rebuilt from the
 * free map; a new store's map is initialized in its own txn) -> orphan
 * reclaim -> quota counters. The write verifier is random per open.
 * Thread: every public call is thread-safe. */
#include "core_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char ch = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0750) != 0 && errno != EEXIST)
                return -errno;
            buf[i] = ch;
        }
    }
    return 0;
}

static int store_init_map(struct core *c)
{
    MDB_txn *t;
    int rc = mdb_txn_begin(meta_env_mdb(c->meta), NULL, 0, &t);
    if (rc)
        return meta_err(rc);
    rc = store_txn_init(c->store, t);
    if (rc) {
        mdb_txn_abort(t);
        store_txn_done(c->store, t, 0);
        return rc;
    }
    rc = meta_err(mdb_txn_commit(t));
    store_txn_done(c->store, t, rc == 0);
    return rc;
}

/* ---- orphans ---- */

struct reclaim_op {
    struct core *c;
    uint64_t ino; /* 0: every orphan */
    unsigned n;
};

static int reclaim_one(struct core *c, MDB_txn *t, uint64_t ino)
{
    uint8_t k[8];
    struct meta_inode r;
    int rc;
    meta_be64_put(k, ino);
    rc = meta_del(t, core__dbi(c, META_DBI_ORPHANS), k, 8);
    if (rc)
        return rc;
    rc = core__ino_get(c, t, ino, &r);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (r.nlink != 0)
        return 0;
    rc = core__data_drop(c, t, ino, 0);
    if (rc == 0) {
        rc = meta_del(t, core__dbi(c, META_DBI_OBJMETA), k, 8);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0)
        rc = meta_del(t, core__dbi(c, META_DBI_INODES), k, 8);
    return rc;
}

static int reclaim_fn(MDB_txn *t, void *arg)
{
    struct reclaim_op *a = arg;
    struct core *c = a->c;
    if (a->ino) {
        if (core__ref_held(c, a->ino))
            return 0;
        int rc = reclaim_one(c, t, a->ino);
        return rc == -ENOENT ? 0 : rc;
    }
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_cursor_open(t, core__dbi(c, META_DBI_ORPHANS), &cur);
    if (rc)
        return meta_err(rc);
    uint64_t *list = NULL;
    size_t n = 0, cap = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 8)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            uint64_t *nl = realloc(list, cap * sizeof(*nl));
            if (!nl) {
                mdb_cursor_close(cur);
                free(list);
                return -ENOMEM;
            }
            list = nl;
        }
        list[n++] = meta_be64_get(k.mv_data);
    }
    mdb_cursor_close(cur);
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = reclaim_one(c, t, list[i]);
    a->n = (unsigned)n;
    free(list);
    return rc;
}

/* ---- lifecycle ---- */

int core_open(struct core **out, const struct core_config *cfg)
{
    struct core *c = calloc(1, sizeof(*c));
    char path[PATH_MAX];
    MDB_txn *rt = NULL;
    int rc;

    *out = NULL;
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    c->data_dir = strdup(cfg->data_dir ? cfg->data_dir : "data");
    if (!c->data_dir) {
        free(c);
        return -ENOMEM;
    }
    if (!c->cfg.data_file_size)
        c->cfg.data_file_size = 4ull << 30;
    if (!c->cfg.data_files)
        c->cfg.data_files = 1;
    if (!c->cfg.map_size)
        c->cfg.map_size = 16ull << 30;
    if (!c->cfg.inline_max)
        c->cfg.inline_max = 4096;
    if (c->cfg.inline_max > 65536)
        c->cfg.inline_max = 65536;
    if (!c->cfg.commit_max_batch)
        c->cfg.commit_max_batch = 256;
    c->cfg.data_dir = c->data_dir;
    pthread_mutex_init(&c->ref_mu, NULL);
    core__resv_init(c);
    core__pend_init(c);
    for (int i = 0; i < CORE_WLOCKS; i++)
        pthread_mutex_init(&c->wlock[i], NULL);
    rc = core__cache_init(c, CORE_CACHE_BYTES);
    if (rc) {
        free(c->data_dir);
        free(c);
        return rc;
    }
    if (getrandom(&c->verifier, sizeof(c->verifier), 0) != sizeof(c->verifier))
        c->verifier = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

    rc = mkdir_p(c->data_dir);
    if (rc) {
        srv_log(ERROR, META, "cannot create data dir %s: %s", c->data_dir, srv_strerror(rc));
        goto out;
    }
    snprintf(path, sizeof(path), "%s/meta", c->data_dir);
    rc = meta_env_open(&c->meta, path, c->cfg.map_size, c->cfg.commit_max_batch);
    if (rc)
        goto out;
    rc = meta_rtxn_begin(c->meta, &rt);
    if (rc)
        goto out;
    struct store_config sc = {
        .dir = c->data_dir,
        .file_size = c->cfg.data_file_size,
        .file_initial = c->cfg.data_file_initial,
        .nfiles = c->cfg.data_files,
        .devices = c->cfg.devices,
    };
    rc = store_open(&c->store, &sc, rt, core__dbi(c, META_DBI_FREE));
    meta_rtxn_end(rt);
    if (rc) {
        c->store = NULL;
        srv_log(ERROR, STORE, "cannot open the extent store in %s: %s", c->data_dir,
                srv_strerror(rc));
        goto out;
    }
    if (store_needs_init(c->store)) {
        rc = store_init_map(c);
        if (rc)
            goto out;
    }
    meta_env_set_store(c->meta, c->store);

    struct reclaim_op ro = {c, 0, 0};
    rc = meta_submit(c->meta, reclaim_fn, &ro, 0);
    if (rc)
        goto out;
    if (ro.n)
        srv_log(INFO, META, "reclaimed %u orphaned inode(s)", ro.n);
    rc = core__quota_load(c);
    if (rc)
        goto out;
    rc = core__pend_flusher_start(c);
    if (rc)
        goto out;
    *out = c;
    c = NULL;
out:
    if (c)
        core_close(c);
    return rc;
}

static int noop_fn(MDB_txn *t, void *arg)
{
    (void)t;
    (void)arg;
    return 0;
}

int core_sync(struct core *c)
{
    int rc = core__pend_flush_all(c);
    int rc2 = meta_submit(c->meta, noop_fn, NULL, META_OP_DATA);
    return rc ? rc : rc2;
}

void core_close(struct core *c)
{
    if (!c)
        return;
    core__pend_flusher_stop(c);
    if (c->meta && c->store)
        core_sync(c);
    meta_env_close(c->meta);
    core__pend_fini(c); /* what a failed flush left: lost, its space free at the next open */
    core__resv_fini(c);
    store_close(c->store);
    pthread_mutex_lock(&c->ref_mu);
    for (int i = 0; i < CORE_REF_BUCKETS; i++) {
        while (c->refs[i]) {
            struct core__ref *r = c->refs[i];
            c->refs[i] = r->next;
            free(r);
        }
    }
    pthread_mutex_unlock(&c->ref_mu);
    pthread_mutex_destroy(&c->ref_mu);
    for (int i = 0; i < CORE_WLOCKS; i++)
        pthread_mutex_destroy(&c->wlock[i]);
    core__cache_fini(c);
    free(c->data_dir);
    free(c);
}

uint64_t core_write_verifier(struct core *c)
{
    return c->verifier;
}

/* ---- tenants ---- */

struct tenant_op {
    struct core *c;
    uint32_t id;
};

static int tenant_create_fn(MDB_txn *t, void *arg)
{
    struct tenant_op *a = arg;
    struct core *c = a->c;
    uint8_t k[4], v[8];
    MDB_val old;
    uint64_t ino;
    struct meta_inode r;
    struct timespec now;
    meta_be32_put(k, a->id);
    int rc = meta_get(t, core__dbi(c, META_DBI_ROOTS), k, 4, &old);
    if (rc == 0)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    rc = core__ino_alloc(c, t, &ino);
    if (rc)
        return rc;
    core__now(&now);
    memset(&r, 0, sizeof(r));
    r.rec_ver = META_INODE_REC_VER;
    r.type = CORE_DIR;
    r.flags = CORE_A_TROOT;
    r.mode = 0755;
    r.nlink = 2;
    r.gen = (uint32_t)(ino * 2654435761u) | 1;
    r.tenant = a->id;
    r.atime_s = r.mtime_s = r.ctime_s = r.btime_s = now.tv_sec;
    r.atime_ns = r.mtime_ns = r.ctime_ns = r.btime_ns = (uint32_t)now.tv_nsec;
    r.change = 1;
    rc = core__ino_put(c, t, ino, &r);
    if (rc)
        return rc;
    meta_be64_put(v, ino);
    rc = meta_put(t, core__dbi(c, META_DBI_ROOTS), k, 4, v, 8, 0);
    if (rc)
        return rc;
    return core__usage_create(c, t, a->id, 0);
}

int core_tenant_create(struct core *c, uint32_t id)
{
    struct tenant_op a = {c, id};
    if (id == 0)
        return -EINVAL;
    return meta_submit(c->meta, tenant_create_fn, &a, 0);
}

static int root_get(struct core *c, MDB_txn *t, uint32_t id, uint64_t *root)
{
    uint8_t k[4];
    MDB_val v;
    meta_be32_put(k, id);
    int rc = meta_get(t, core__dbi(c, META_DBI_ROOTS), k, 4, &v);
    if (rc)
        return rc;
    if (v.mv_size != 8)
        return SRV_ECORRUPT;
    *root = meta_be64_get(v.mv_data);
    return 0;
}

static int tenant_delete_fn(MDB_txn *t, void *arg)
{
    struct tenant_op *a = arg;
    struct core *c = a->c;
    struct meta_inode r;
    uint64_t root;
    uint8_t k[8];
    int rc = root_get(c, t, a->id, &root);
    if (rc)
        return rc;
    rc = core__ino_get(c, t, root, &r);
    if (rc)
        return rc;
    if (r.nchild > 0)
        return -ENOTEMPTY;
    meta_be64_put(k, root);
    rc = meta_del(t, core__dbi(c, META_DBI_INODES), k, 8);
    if (rc)
        return rc;
    meta_be32_put(k, a->id);
    rc = meta_del(t, core__dbi(c, META_DBI_ROOTS), k, 4);
    if (rc)
        return rc;
    return core__usage_delete(c, t, a->id, 0);
}

int core_tenant_delete(struct core *c, uint32_t id)
{
    struct tenant_op a = {c, id};
    return meta_submit(c->meta, tenant_delete_fn, &a, 0);
}

int core_tenant_root(struct core *c, uint32_t id, uint64_t *root)
{
    MDB_txn *t;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = root_get(c, t, id, root);
    meta_rtxn_end(t);
    return rc;
}

/* ---- tables ---- */

static int table_dbi(struct core *c, enum core_table tb, MDB_dbi *dbi)
{
    if ((int)tb < 0 || tb >= CORE_T__COUNT)
        return -EINVAL;
    *dbi = core__dbi(c, (enum meta_dbi)(META_DBI_T_TENANTS + (int)tb));
    return 0;
}

int core_table_get(struct core *c, enum core_table tb, const void *key, size_t klen, void **val,
                   size_t *vlen)
{
    MDB_txn *t;
    MDB_dbi dbi;
    MDB_val v;
    int rc = table_dbi(c, tb, &dbi);
    *val = NULL;
    *vlen = 0;
    if (rc)
        return rc;
    if (klen == 0 || klen > 500)
        return klen ? -ENAMETOOLONG : -EINVAL;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_get(t, dbi, key, klen, &v);
    if (rc == 0) {
        *val = malloc(v.mv_size ? v.mv_size : 1);
        if (!*val) {
            rc = -ENOMEM;
        } else {
            memcpy(*val, v.mv_data, v.mv_size);
            *vlen = v.mv_size;
        }
    }
    meta_rtxn_end(t);
    return rc;
}

struct table_op {
    MDB_dbi dbi;
    const void *key;
    size_t klen;
    const void *val;
    size_t vlen;
    unsigned flags;
    bool del;
};

static int table_fn(MDB_txn *t, void *arg)
{
    struct table_op *a = arg;
    if (a->del)
        return meta_del(t, a->dbi, a->key, a->klen);
    return meta_put(t, a->dbi, a->key, a->klen, a->val, a->vlen,
                    (a->flags & CORE_TPUT_NOOVERWRITE) ? MDB_NOOVERWRITE : 0);
}

int core_table_put(struct core *c, enum core_table tb, const void *key, size_t klen,
                   const void *val, size_t vlen, unsigned flags)
{
    struct table_op a = {.key = key, .klen = klen, .val = val, .vlen = vlen, .flags = flags};
    int rc = table_dbi(c, tb, &a.dbi);
    if (rc)
        return rc;
    if (klen == 0 || klen > 500)
        return klen ? -ENAMETOOLONG : -EINVAL;
    return meta_submit(c->meta, table_fn, &a, 0);
}

int core_table_del(struct core *c, enum core_table tb, const void *key, size_t klen)
{
    struct table_op a = {.key = key, .klen = klen, .del = true};
    int rc = table_dbi(c, tb, &a.dbi);
    if (rc)
        return rc;
    if (klen == 0 || klen > 500)
        return klen ? -ENOENT : -EINVAL;
    return meta_submit(c->meta, table_fn, &a, 0);
}

int core_table_scan(struct core *c, enum core_table tb, const void *start, size_t slen,
                    core_table_cb cb, void *arg)
{
    MDB_txn *t;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = table_dbi(c, tb, &dbi);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = mdb_cursor_open(t, dbi, &cur);
    if (rc) {
        meta_rtxn_end(t);
        return meta_err(rc);
    }
    if (start && slen) {
        k.mv_data = (void *)start;
        k.mv_size = slen > 500 ? 500 : slen;
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    } else {
        rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    }
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (cb(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size))
            break;
    }
    rc = (rc == 0 || rc == MDB_NOTFOUND) ? 0 : meta_err(rc);
    mdb_cursor_close(cur);
    meta_rtxn_end(t);
    return rc;
}

/* ---- references ---- */

bool core__ref_held(struct core *c, uint64_t ino)
{
    bool held = false;
    pthread_mutex_lock(&c->ref_mu);
    for (struct core__ref *r = c->refs[ino % CORE_REF_BUCKETS]; r; r = r->next)
        if (r->ino == ino) {
            held = r->count > 0;
            break;
        }
    pthread_mutex_unlock(&c->ref_mu);
    return held;
}

struct ref_check_op {
    struct core *c;
    uint64_t ino;
};

static int ref_check_fn(MDB_txn *t, void *arg)
{
    struct ref_check_op *a = arg;
    struct meta_inode r;
    return core__ino_get(a->c, t, a->ino, &r);
}

int core_ref(struct core *c, uint64_t ino)
{
    /* take the ref before checking so an unlink racing with us keeps it as orphan */
    pthread_mutex_lock(&c->ref_mu);
    struct core__ref **pp = &c->refs[ino % CORE_REF_BUCKETS], *ref;
    for (ref = *pp; ref && ref->ino != ino; ref = ref->next)
        ;
    if (!ref) {
        ref = calloc(1, sizeof(*ref));
        if (!ref) {
            pthread_mutex_unlock(&c->ref_mu);
            return -ENOMEM;
        }
        ref->ino = ino;
        ref->next = *pp;
        *pp = ref;
    }
    ref->count++;
    pthread_mutex_unlock(&c->ref_mu);
    /* Check on the writer thread, not in a read txn: an op of the batch being
     * built may already have seen the ref missing and freed the inode without
     * having committed yet, so a read txn would still show it alive (and the
     * caller would then read a freed inode). Ops run in order on the writer, so
     * this check sees every release decided before the ref was taken. */
    struct ref_check_op a = {c, ino};
    int rc = meta_submit(c->meta, ref_check_fn, &a, 0);
    if (rc) {
        core_unref(c, ino);
        return rc == -ENOENT ? SRV_ESTALE : rc;
    }
    return 0;
}

void core_unref(struct core *c, uint64_t ino)
{
    bool last = false;
    pthread_mutex_lock(&c->ref_mu);
    for (struct core__ref **pp = &c->refs[ino % CORE_REF_BUCKETS]; *pp; pp = &(*pp)->next) {
        struct core__ref *r = *pp;
        if (r->ino != ino)
            continue;
        if (--r->count == 0) {
            *pp = r->next;
            free(r);
            last = true;
        }
        break;
    }
    pthread_mutex_unlock(&c->ref_mu);
    if (!last)
        return;
    MDB_txn *t;
    MDB_val v;
    uint8_t k[8];
    meta_be64_put(k, ino);
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return;
    int rc = meta_get(t, core__dbi(c, META_DBI_ORPHANS), k, 8, &v);
    meta_rtxn_end(t);
    if (rc == 0) {
        struct reclaim_op ro = {c, ino, 0};
        rc = meta_submit(c->meta, reclaim_fn, &ro, 0);
        core__pend_reap(c);
        if (rc)
            srv_log(ERROR, META, "reclaiming orphan %llu failed: %s (retried at next open)",
                    (unsigned long long)ino, srv_strerror(rc));
    }
}

/* ---- stats ---- */

void core_stats_get(struct core *c, struct core_stats *out)
{
    struct meta_stats ms;
    struct store_stats ss;
    memset(out, 0, sizeof(*out));
    meta_stats_get(c->meta, &ms);
    out->commits = ms.commits;
    out->commit_ops = ms.commit_ops;
    if (c->store) {
        store_stats_get(c->store, &ss);
        out->store_capacity = ss.capacity;
        out->store_free = ss.free;
        out->store_limit = ss.limit;
        out->fs_size = ss.fs_size;
        out->fs_free = ss.fs_free;
        out->crc_errors = ss.crc_errors;
    }
    out->crc_errors += atomic_load(&c->crc_errors);
    out->bytes_written = atomic_load(&c->bytes_written);
    out->bytes_read = atomic_load(&c->bytes_read);
}
