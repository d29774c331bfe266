/* SPDX-License-Identifier: Apache-2.0
 * core_main: lifecycle of the namespace core (open, recovery, close, sync;
 * the namespace sub-module, core_ns_int.h, which sets up the other two),
 * tenant roots, references held on inodes (core_ref/unref, orphans) and
 * statistics.
 *
 * Open order: sub-module state -> meta env (schema check) -> store (allocator
 * rebuilt from the free map) -> the store wired to meta (a new store's map
 * initialized in its own txn, the commit hooks of core_extent.c) -> orphan
 * reclaim -> quota counters -> the pending-write flusher -> the background
 * worker (core_bg.c). The write verifier
 * is random per open.
 * Thread: every public call is thread-safe. */
#include "core_ns_int.h"

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

/* ---- orphans ---- */

struct reclaim_op {
    struct core *c;
    uint64_t ino; /* 0: every orphan */
    unsigned n;
};

static int reclaim_one(struct core *c, struct meta_txn *t, uint64_t ino)
{
    struct meta_inode r;
    int rc = meta_orphan_del(t, ino);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (r.nlink != 0 || (r.flags & META_I_VREC))
        return 0; /* linked again, or a version (whose ref ended) */
    uint64_t kept = 0;
    rc = core__data_drop(c, t, ino, &kept);
    if (rc == 0 && kept) /* charged when unlinked; another version holds these */
        rc = core__usage_charge_store(c, t, r.tenant, r.bucket, (int64_t)kept);
    if (rc == 0) {
        rc = meta_objmeta_del(t, ino);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0)
        rc = meta_inode_del(t, ino);
    return rc;
}

static int reclaim_fn(struct meta_txn *t, void *arg)
{
    struct reclaim_op *a = arg;
    struct core *c = a->c;
    if (a->ino) {
        if (core__ref_held(c, a->ino))
            return 0;
        int rc = reclaim_one(c, t, a->ino);
        return rc == -ENOENT ? 0 : rc;
    }
    uint64_t *list;
    size_t n;
    int rc = meta_orphan_list(t, &list, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = reclaim_one(c, t, list[i]);
    a->n = (unsigned)n;
    free(list);
    return rc;
}

/* ---- lifecycle ---- */

static int ns_init(struct core *c)
{
    c->ns = calloc(1, sizeof(*c->ns));
    if (!c->ns)
        return -ENOMEM;
    pthread_mutex_init(&c->ns->ref_mu, NULL);
    return core__bg_init(c);
}

static void ns_fini(struct core *c)
{
    struct core__ns *n = c->ns;
    if (!n)
        return;
    for (int i = 0; i < CORE_REF_BUCKETS; i++) {
        while (n->refs[i]) {
            struct core__ref *r = n->refs[i];
            n->refs[i] = r->next;
            free(r);
        }
    }
    pthread_mutex_destroy(&n->ref_mu);
    core__bg_fini(c);
    free(n);
    c->ns = NULL;
}

int core_open(struct core **out, const struct core_config *cfg)
{
    struct core *c = calloc(1, sizeof(*c));
    char path[PATH_MAX];
    struct meta_txn *rt = NULL;
    int rc;

    *out = NULL;
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    core__cm_init(c);
    c->data_dir = strdup(cfg->data_dir ? cfg->data_dir : "data");
    if (!c->data_dir) {
        core__cm_fini(c);
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
    rc = ns_init(c);
    if (rc == 0)
        rc = core__quota_init(c);
    if (rc == 0)
        rc = core__data_init(c);
    if (rc)
        goto out;
    if (getrandom(&c->verifier, sizeof(c->verifier), 0) != sizeof(c->verifier))
        c->verifier = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

    rc = mkdir_p(c->data_dir);
    if (rc) {
        srv_log(ERROR, META, "cannot create data dir %s: %s", c->data_dir, srv_strerror(rc));
        goto out;
    }
    snprintf(path, sizeof(path), "%s/meta", c->data_dir);
    struct meta_env_config mc = {
        .dir = path,
        .map_size = c->cfg.map_size,
        .max_batch = c->cfg.commit_max_batch,
        .backend = c->cfg.meta_mem ? META_BACKEND_MEM : META_BACKEND_LMDB,
    };
    rc = meta_env_open(&c->meta, &mc);
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
        .write_cache = c->cfg.data_write_cache,
    };
    struct store_map map;
    meta_free_map(rt, &map);
    rc = store_open(&c->store, &sc, &map);
    meta_rtxn_end(rt);
    if (rc) {
        c->store = NULL;
        srv_log(ERROR, STORE, "cannot open the extent store in %s: %s", c->data_dir,
                srv_strerror(rc));
        goto out;
    }
    rc = core__data_wire(c);
    if (rc)
        goto out;

    struct reclaim_op ro = {c, 0, 0};
    rc = meta_submit(c->meta, reclaim_fn, &ro, 0);
    if (rc)
        goto out;
    if (ro.n)
        srv_log(INFO, META, "reclaimed %u orphaned inode(s)", ro.n);
    rc = core__quota_load(c);
    if (rc == 0)
        rc = core__vdata_load(c);
    if (rc)
        goto out;
    rc = core__pend_flusher_start(c);
    if (rc == 0)
        rc = core__bg_start(c);
    if (rc == 0)
        rc = core_cache_reload(c);
    if (rc)
        goto out;
    *out = c;
    c = NULL;
out:
    if (c)
        core_close(c);
    return rc;
}

static int noop_fn(struct meta_txn *t, void *arg)
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
    if (c->ns) {
        core__pf_fini(c);
        core__bg_stop(c);
    }
    if (c->data)
        core__pend_flusher_stop(c);
    if (c->meta && c->data)
        core__tier_keep_reads(c); /* the reads since the uploader's last pass */
    if (c->meta && c->store)
        core_sync(c);
    meta_env_close(c->meta);
    core__data_fini(c);
    core__quota_fini(c);
    store_close(c->store);
    ns_fini(c);
    core__cm_fini(c);
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

static int tenant_create_fn(struct meta_txn *t, void *arg)
{
    struct tenant_op *a = arg;
    struct core *c = a->c;
    uint64_t ino;
    struct meta_inode r;
    struct timespec now;
    int rc = meta_root_get(t, a->id, &ino);
    if (rc == 0 || rc == SRV_ECORRUPT)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    rc = meta_inode_alloc(t, &ino);
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
    rc = meta_inode_put(t, ino, &r);
    if (rc)
        return rc;
    rc = meta_root_put(t, a->id, ino);
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

static int tenant_delete_fn(struct meta_txn *t, void *arg)
{
    struct tenant_op *a = arg;
    struct core *c = a->c;
    struct meta_inode r;
    uint64_t root;
    int rc = meta_root_get(t, a->id, &root);
    if (rc)
        return rc;
    rc = meta_inode_get(t, root, &r);
    if (rc)
        return rc;
    if (r.nchild > 0)
        return -ENOTEMPTY;
    rc = meta_inode_del(t, root);
    if (rc)
        return rc;
    rc = meta_root_del(t, a->id);
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
    struct meta_txn *t;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_root_get(t, id, root);
    meta_rtxn_end(t);
    return rc;
}

struct meta_env *core_meta(struct core *c)
{
    return c->meta;
}

/* ---- references ---- */

bool core__ref_held(struct core *c, uint64_t ino)
{
    bool held = false;
    pthread_mutex_lock(&c->ns->ref_mu);
    for (struct core__ref *r = c->ns->refs[ino % CORE_REF_BUCKETS]; r; r = r->next)
        if (r->ino == ino) {
            held = r->count > 0;
            break;
        }
    pthread_mutex_unlock(&c->ns->ref_mu);
    return held;
}

struct ref_check_op {
    struct core *c;
    uint64_t ino;
};

static int ref_check_fn(struct meta_txn *t, void *arg)
{
    struct ref_check_op *a = arg;
    struct meta_inode r;
    return meta_inode_get(t, a->ino, &r);
}

int core_ref(struct core *c, uint64_t ino)
{
    /* take the ref before checking so an unlink racing with us keeps it as orphan */
    pthread_mutex_lock(&c->ns->ref_mu);
    struct core__ref **pp = &c->ns->refs[ino % CORE_REF_BUCKETS], *ref;
    for (ref = *pp; ref && ref->ino != ino; ref = ref->next)
        ;
    if (!ref) {
        ref = calloc(1, sizeof(*ref));
        if (!ref) {
            pthread_mutex_unlock(&c->ns->ref_mu);
            return -ENOMEM;
        }
        ref->ino = ino;
        ref->next = *pp;
        *pp = ref;
    }
    ref->count++;
    pthread_mutex_unlock(&c->ns->ref_mu);
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
    pthread_mutex_lock(&c->ns->ref_mu);
    for (struct core__ref **pp = &c->ns->refs[ino % CORE_REF_BUCKETS]; *pp; pp = &(*pp)->next) {
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
    pthread_mutex_unlock(&c->ns->ref_mu);
    if (!last)
        return;
    struct meta_txn *t;
    if (meta_rtxn_begin(c->meta, &t) != 0)
        return;
    int rc = meta_orphan_get(t, ino);
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
        out->writes_cached = ss.cached_writes;
        out->writes_zeroed = ss.cached_zeroed;
        out->writes_direct = ss.direct_writes;
        out->writes_dropped = ss.cached_dropped;
        out->freed_dropped = ss.freed_dropped;
    }
    out->crc_errors += atomic_load(&c->crc_errors);
    out->bytes_written = atomic_load(&c->bytes_written);
    out->bytes_read = atomic_load(&c->bytes_read);
}
