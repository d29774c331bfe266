/* SPDX-License-Identifier: Apache-2.0
 * core_version: versions, delete markers and object lock (the namespace
 * sub-module, core_ns_int.h; the rules are in core.h, "versions and object
 * lock").
 *
 * Records (meta_schema.h): a versioned bucket's key with any version has a
 * chain (vkeys -> chain id; versions: a header with the key, then one record
 * per version, newest first). A data version names the inode holding its
 * data and metadata; vino maps the inode back. The current file of a key
 * (the tree's) holds the chain's newest record when that is a data version;
 * noncurrent versions are inodes without a directory entry (nlink 0,
 * META_I_VREC), which core__ino_get_p hides from callers without
 * CORE_P_VERSIONS (NFS). Invariant: a key with a chain has every version in
 * it, the current file's included; a key without one has at most its file,
 * whose version is "null" (it predates versioning, or the bucket was never
 * versioned).
 *
 * The tree operations of both front ends call in here, inside their op, when
 * the bucket may be versioned (core__ver_cfg: the in-memory set first, then
 * the bucketcfg record): a file leaving its key (replaced, deleted, moved) is
 * retired (kept as a noncurrent version, or dropped when it is the null
 * version of a suspended bucket); a new object, an NFS CREATE or a moved file
 * gets a record; a delete adds a delete marker. An NFS change of a sealed
 * version first clones it (core__ver_open_t: the clone shares the extents,
 * core_vdata.c) so the old version keeps its bytes; the worker seals the new
 * one once settled (core__ver_seal_t). A file with uncommitted writes is not
 * retired (-EAGAIN: the caller commits them and tries again), so a version
 * never changes after it became noncurrent.
 *
 * Version ids: 16 hex digits of the record's vseq (taken from the inode
 * counter, so increasing in commit order) and 16 of a random number; "null"
 * for the null version. Thread: any; changes run inside writer ops. */
#include "core_ns_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "srv_err.h"
#include "srv_log.h"

#define VID_HEX 32
#define DAY_S 86400ll

/* ---- bucket configuration ---- */

static int bcfg_read(struct meta_txn *t, uint64_t bucket, struct meta_bucketcfg *out)
{
    const void *v;
    size_t len;
    memset(out, 0, sizeof(*out));
    int rc = meta_bucketcfg_get(t, bucket, META_BCFG_CORE, &v, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (len != sizeof(*out))
        return SRV_ECORRUPT;
    memcpy(out, v, len);
    return 0;
}

int core__ver_cfg(struct core *c, struct meta_txn *t, uint64_t bucket, struct meta_bucketcfg *cfg)
{
    if (!core__vb_maybe(c, bucket)) {
        memset(cfg, 0, sizeof(*cfg));
        return 0;
    }
    return bcfg_read(t, bucket, cfg);
}

int core__ver_bucket_drop(struct meta_txn *t, uint64_t bucket)
{
    for (uint8_t kind = META_BCFG_CORE; kind <= META_BCFG_LIFECYCLE; kind++) {
        int rc = meta_bucketcfg_del(t, bucket, kind);
        if (rc && rc != -ENOENT)
            return rc;
    }
    return 0;
}

static int any_key(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                   size_t *skip)
{
    (void)arg;
    (void)key;
    (void)klen;
    (void)kv;
    (void)skip;
    return 1;
}

int core__ver_bucket_busy(struct meta_txn *t, uint64_t bucket)
{
    int rc = meta_vkey_scan(t, bucket, NULL, 0, NULL, 0, any_key, NULL);
    return rc == 1 ? -ENOTEMPTY : rc;
}

/* ---- version ids ---- */

void core__vid_fmt(uint64_t vseq, const struct meta_version *v, char *out)
{
    if (v->flags & META_V_NULL)
        snprintf(out, CORE_VID_MAX + 1, "null");
    else
        snprintf(out, CORE_VID_MAX + 1, "%016" PRIx64 "%016" PRIx64, vseq, v->rand);
}

/* @return 1 ("null"), 0 (an id: @p vseq, @p rnd), -EINVAL (malformed). */
static int vid_parse(const char *vid, uint64_t *vseq, uint64_t *rnd)
{
    if (strcmp(vid, "null") == 0)
        return 1;
    if (strlen(vid) != VID_HEX)
        return -EINVAL;
    uint64_t v[2] = {0, 0};
    for (int i = 0; i < VID_HEX; i++) {
        char ch = vid[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return -EINVAL;
        v[i / 16] = v[i / 16] << 4 | (uint64_t)d;
    }
    if (v[0] == 0 || v[1] == 0)
        return -EINVAL;
    *vseq = v[0];
    *rnd = v[1];
    return 0;
}

static uint64_t rand_nonzero(void)
{
    uint64_t r = 0;
    while (r == 0)
        if (getrandom(&r, sizeof(r), 0) != sizeof(r))
            r = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    return r;
}

/* ---- chains ---- */

struct chain {
    uint64_t id;
    struct meta_vchain h;
};

static int chain_find(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                      struct chain *ch)
{
    int rc = meta_vkey_get(t, bucket, key, klen, &ch->id);
    if (rc == 0)
        rc = meta_vchain_get(t, ch->id, &ch->h, NULL);
    return rc;
}

static int chain_get_or_make(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                             struct chain *ch)
{
    int rc = chain_find(t, bucket, key, klen, ch);
    if (rc != -ENOENT)
        return rc;
    rc = meta_inode_alloc(t, &ch->id);
    if (rc)
        return rc;
    memset(&ch->h, 0, sizeof(ch->h));
    ch->h.bucket = bucket;
    ch->h.keylen = (uint32_t)klen;
    rc = meta_vkey_put(t, bucket, key, klen, ch->id);
    if (rc == 0)
        rc = meta_vchain_put(t, ch->id, &ch->h, key);
    return rc;
}

static int chain_put_header(struct meta_txn *t, const struct chain *ch)
{
    const char *key;
    struct meta_vchain h;
    int rc = meta_vchain_get(t, ch->id, &h, &key);
    if (rc)
        return rc;
    char kb[CORE_KEY_MAX];
    memcpy(kb, key, h.keylen); /* borrowed until the txn writes */
    return meta_vchain_put(t, ch->id, &ch->h, kb);
}

struct vfirst {
    bool found;
    uint64_t vseq;
    struct meta_version v;
};

static int vfirst_cb(void *arg, uint64_t vseq, const struct meta_version *v)
{
    struct vfirst *f = arg;
    if (!v)
        return SRV_ECORRUPT;
    f->found = true;
    f->vseq = vseq;
    f->v = *v;
    return 1;
}

/* The newest version of @p chain after @p after (0: the newest of all).
 * @return 0, -ENOENT (none), or an error. */
static int version_next(struct meta_txn *t, uint64_t chain, uint64_t after, uint64_t *vseq,
                        struct meta_version *v)
{
    struct vfirst f = {0};
    int rc = meta_version_scan(t, chain, after, vfirst_cb, &f);
    if (rc < 0)
        return rc;
    if (!f.found)
        return -ENOENT;
    *vseq = f.vseq;
    *v = f.v;
    return 0;
}

/* The chain's header and vkey go once it holds no version. */
static int chain_tidy(struct meta_txn *t, uint64_t bucket, const char *key, size_t klen,
                      const struct chain *ch)
{
    uint64_t vseq;
    struct meta_version v;
    int rc = version_next(t, ch->id, 0, &vseq, &v);
    if (rc != -ENOENT)
        return rc;
    rc = meta_vchain_del(t, ch->id);
    if (rc == 0)
        rc = meta_vkey_del(t, bucket, key, klen);
    return rc;
}

/* ---- locks ---- */

static bool retained(const struct meta_version *v, int64_t now)
{
    return v->lock != META_LOCK_NONE && v->until_s > now;
}

/* May version @p v go (or its file change)? @return 0, SRV_ELOCKED. */
static int lock_check(const struct meta_version *v, unsigned flags)
{
    struct timespec now;
    core__now(&now);
    if (v->flags & META_V_HOLD)
        return SRV_ELOCKED;
    if (!retained(v, now.tv_sec))
        return 0;
    if (v->lock == META_LOCK_GOVERNANCE && (flags & CORE_DEL_BYPASS))
        return 0;
    return SRV_ELOCKED;
}

int core__ver_check_t(struct meta_txn *t, uint64_t ino, const struct meta_inode *r)
{
    uint64_t chain, vseq;
    struct meta_version v;
    if (!(r->flags & META_I_VLOCK) || !(r->flags & META_I_VREC))
        return 0;
    int rc = meta_vino_get(t, ino, &chain, &vseq);
    if (rc == 0)
        rc = meta_version_get(t, chain, vseq, &v);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    return lock_check(&v, 0);
}

static void lock_to_rec(const struct core_lock *lk, struct meta_version *v)
{
    v->lock = lk->mode;
    v->until_s = lk->mode ? lk->until : 0;
    if (lk->hold)
        v->flags |= META_V_HOLD;
    else
        v->flags &= ~(uint32_t)META_V_HOLD;
}

static void lock_of_rec(const struct meta_version *v, struct core_lock *lk)
{
    lk->mode = v->lock;
    lk->until = v->lock ? v->until_s : 0;
    lk->hold = v->flags & META_V_HOLD;
}

/* ---- dropping versions ---- */

/* Delete version (@p ch, @p vseq, @p v) for good: its record, and for a data version
 * outside the tree its inode and data (its bytes leave the store's usage, but those
 * another version shares). A data version still in the tree is the caller's. */
static int version_drop(struct core *c, struct meta_txn *t, struct chain *ch, uint64_t vseq,
                        const struct meta_version *v)
{
    int rc = meta_version_del(t, ch->id, vseq);
    if (rc)
        return rc;
    if ((v->flags & META_V_NULL) && ch->h.null_vseq == vseq) {
        ch->h.null_vseq = 0;
        rc = chain_put_header(t, ch);
        if (rc)
            return rc;
    }
    if (!v->ino)
        return 0;
    rc = meta_vino_del(t, v->ino);
    if (rc && rc != -ENOENT)
        return rc;
    struct meta_inode r;
    rc = meta_inode_get(t, v->ino, &r);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    if (r.nlink > 0) {
        r.flags &= (uint16_t) ~(META_I_VREC | META_I_VSEALED | META_I_VLOCK);
        return meta_inode_put(t, v->ino, &r);
    }
    rc = core__usage_charge_store(c, t, r.tenant, r.bucket, -(int64_t)r.used);
    if (rc == 0)
        rc = core__ino_release(c, t, v->ino, &r);
    return rc;
}

/* ---- records ---- */

/* Make @p ino (@p r; 0 and NULL: a delete marker by @p uid) the newest version of @p key
 * under @p cfg: enabled, a new id; suspended, the null version (the old one goes). A data
 * version gets @p lk (NULL: the bucket's default retention), is @p sealed or open, and
 * @p r gets its flags (the caller writes it). @p vid (NULL or CORE_VID_MAX + 1) gets the id. */
static int version_add(struct core *c, struct meta_txn *t, const struct meta_bucketcfg *cfg,
                       uint64_t bucket, const char *key, size_t klen, uint64_t ino,
                       struct meta_inode *r, uint32_t uid, const struct core_lock *lk, bool sealed,
                       char *vid)
{
    struct chain ch;
    struct meta_version v;
    struct timespec now;
    uint64_t vseq;
    int rc = chain_get_or_make(t, bucket, key, klen, &ch);
    if (rc)
        return rc;
    core__now(&now);
    bool suspended = cfg->versioning == META_VERS_SUSPENDED;
    if (suspended && ch.h.null_vseq) {
        rc = meta_version_get(t, ch.id, ch.h.null_vseq, &v);
        if (rc == 0 && v.ino) {
            struct meta_inode o;
            if (meta_inode_get(t, v.ino, &o) == 0 && o.nlink > 0 && v.ino != ino) {
                srv_log(ERROR, META,
                        "bucket %llu: the null version to replace is still "
                        "current",
                        (unsigned long long)bucket);
                return SRV_ECORRUPT;
            }
        }
        if (rc == 0 && v.ino != ino)
            rc = version_drop(c, t, &ch, ch.h.null_vseq, &v);
        if (rc && rc != -ENOENT)
            return rc;
    }
    /* the version it replaces as the newest is noncurrent from now on */
    uint64_t pseq;
    if (version_next(t, ch.id, 0, &pseq, &v) == 0 && v.noncur_s == 0) {
        v.noncur_s = now.tv_sec;
        rc = meta_version_put(t, ch.id, pseq, &v);
        if (rc)
            return rc;
    }
    rc = meta_inode_alloc(t, &vseq);
    if (rc)
        return rc;
    memset(&v, 0, sizeof(v));
    v.ino = ino;
    v.uid = r ? r->uid : uid;
    v.mtime_s = now.tv_sec;
    v.mtime_ns = (uint32_t)now.tv_nsec;
    if (suspended)
        v.flags |= META_V_NULL;
    else
        v.rand = rand_nonzero();
    if (!ino) {
        v.flags |= META_V_DMARK;
    } else {
        if (sealed)
            v.flags |= META_V_SEALED;
        if (lk) {
            lock_to_rec(lk, &v);
        } else if ((cfg->flags & META_BC_OBJLOCK) && cfg->lock) {
            v.lock = cfg->lock;
            v.until_s = now.tv_sec +
                        (cfg->lock_days ? cfg->lock_days * DAY_S : cfg->lock_years * 365 * DAY_S);
        }
        r->flags |= META_I_VREC;
        if (sealed)
            r->flags |= META_I_VSEALED;
        else
            r->flags &= (uint16_t)~META_I_VSEALED;
        if (v.lock || (v.flags & META_V_HOLD))
            r->flags |= META_I_VLOCK;
        rc = meta_vino_put(t, ino, ch.id, vseq);
        if (rc)
            return rc;
    }
    rc = meta_version_put(t, ch.id, vseq, &v);
    if (rc == 0 && suspended) {
        ch.h.null_vseq = vseq;
        rc = chain_put_header(t, &ch);
    }
    if (rc == 0 && vid)
        core__vid_fmt(vseq, &v, vid);
    return rc;
}

/* The record of current file @p ino (@p r) at @p key; a file without one (it predates
 * versioning) becomes its key's null version first (@p r flagged, written by the caller). */
static int record_of(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key,
                     size_t klen, uint64_t ino, struct meta_inode *r, struct chain *ch,
                     uint64_t *vseq, struct meta_version *v)
{
    int rc;
    if (r->flags & META_I_VREC) {
        rc = meta_vino_get(t, ino, &ch->id, vseq);
        if (rc == 0)
            rc = meta_vchain_get(t, ch->id, &ch->h, NULL);
        if (rc == 0)
            rc = meta_version_get(t, ch->id, *vseq, v);
        if (rc != -ENOENT)
            return rc;
        r->flags &= (uint16_t)~META_I_VREC; /* a stale flag: a new record below */
    }
    struct meta_bucketcfg nullcfg = {.versioning = META_VERS_SUSPENDED};
    rc = version_add(c, t, &nullcfg, bucket, key, klen, ino, r, 0, NULL, true, NULL);
    if (rc)
        return rc;
    rc = meta_vino_get(t, ino, &ch->id, vseq);
    if (rc == 0)
        rc = meta_vchain_get(t, ch->id, &ch->h, NULL);
    if (rc == 0)
        rc = meta_version_get(t, ch->id, *vseq, v);
    if (rc == 0) {
        v->mtime_s = r->mtime_s; /* it was made then */
        v->mtime_ns = r->mtime_ns;
        rc = meta_version_put(t, ch->id, *vseq, v);
    }
    return rc;
}

/* A copy of current file @p ino (@p r) as a new inode without a directory entry: its data
 * shared (core__data_clone), its metadata copied. @return 0 with *@p out set, or an error. */
static int clone_file(struct core *c, struct meta_txn *t, uint64_t ino, const struct meta_inode *r,
                      uint64_t *out)
{
    struct meta_inode v = *r;
    char etag[CORE_ETAG_MAX + 1];
    void *meta = NULL;
    size_t ml = 0;
    uint64_t copied = 0;
    int rc = meta_inode_alloc(t, out);
    if (rc)
        return rc;
    v.nlink = 0;
    v.flags = (uint16_t)((r->flags & ~(META_I_VSEALED)) | META_I_VREC);
    rc = meta_inode_put(t, *out, &v);
    if (rc == 0)
        rc = core__data_clone(c, t, ino, *out, &copied);
    if (rc == 0 && copied)
        rc = core__usage_charge_store(c, t, r->tenant, r->bucket, (int64_t)copied);
    if (rc)
        return rc;
    rc = meta_objmeta_get(t, ino, etag, sizeof(etag), &meta, &ml);
    if (rc == 0)
        rc = meta_objmeta_put(t, *out, etag, meta, ml);
    free(meta);
    return rc == -ENOENT ? 0 : rc;
}

/* ---- the tree's operations in a versioned bucket ---- */

int core__ver_retire_t(struct core *c, struct meta_txn *t, const struct meta_bucketcfg *cfg,
                       uint64_t bucket, const char *key, size_t klen, uint64_t dir,
                       struct meta_inode *d, const char *name, size_t nlen, uint64_t ino,
                       struct meta_inode *r)
{
    struct chain ch;
    struct meta_version v;
    struct timespec now;
    uint64_t vseq;
    if (r->type != CORE_REG)
        return core__entry_remove(c, t, dir, d, name, nlen, ino, r);
    if (core__pend_has_data(c, ino))
        return -EAGAIN; /* a version never changes once noncurrent: commit them first */
    int rc = record_of(c, t, bucket, key, klen, ino, r, &ch, &vseq, &v);
    if (rc)
        return rc;
    if (cfg->versioning == META_VERS_SUSPENDED && (v.flags & META_V_NULL)) {
        /* the null version of a suspended bucket is replaced for good */
        rc = meta_version_del(t, ch.id, vseq);
        if (rc == 0 && ch.h.null_vseq == vseq) {
            ch.h.null_vseq = 0;
            rc = chain_put_header(t, &ch);
        }
        if (rc == 0)
            rc = meta_vino_del(t, ino);
        r->flags &= (uint16_t) ~(META_I_VREC | META_I_VSEALED | META_I_VLOCK);
        if (rc == 0)
            rc = core__entry_remove(c, t, dir, d, name, nlen, ino, r);
        return rc;
    }
    core__now(&now);
    rc = core__entry_detach(c, t, dir, d, name, nlen, ino, r);
    if (rc)
        return rc;
    if (r->nlink > 0) {
        /* another name still links the file: the version gets a copy of its own */
        uint64_t vino;
        rc = clone_file(c, t, ino, r, &vino);
        if (rc == 0)
            rc = meta_vino_del(t, ino);
        if (rc == 0)
            rc = meta_vino_put(t, vino, ch.id, vseq);
        v.ino = vino;
        r->flags &= (uint16_t) ~(META_I_VREC | META_I_VSEALED | META_I_VLOCK);
    } else {
        /* the file itself: its bytes leave the directories, stay in the store */
        r->flags |= META_I_VREC;
        rc = core__usage_charge(c, t, r->tenant, dir, 0, -1, false);
        if (rc == 0)
            rc = core__usage_charge_dirs(c, t, r->tenant, dir, -(int64_t)r->used, 0);
    }
    if (rc == 0)
        rc = meta_inode_put(t, ino, r);
    if (rc)
        return rc;
    v.noncur_s = now.tv_sec;
    return meta_version_put(t, ch.id, vseq, &v);
}

int core__ver_add_t(struct core *c, struct meta_txn *t, const struct meta_bucketcfg *cfg,
                    uint64_t bucket, const char *key, size_t klen, uint64_t ino,
                    struct meta_inode *r, const struct core_lock *lk, bool sealed, char *vid)
{
    return version_add(c, t, cfg, bucket, key, klen, ino, r, 0, lk, sealed, vid);
}

int core__ver_delete_t(struct core *c, struct meta_txn *t, const struct core_principal *p,
                       const struct meta_bucketcfg *cfg, uint64_t bucket, const char *key,
                       size_t klen, uint64_t dir, struct meta_inode *d, const char *name,
                       size_t nlen, uint64_t ino, struct meta_inode *r, bool nfs,
                       struct core_delres *out)
{
    int rc = 0;
    if (ino && nfs) {
        rc = core__ver_check_t(t, ino, r);
        if (rc)
            return rc;
    }
    if (ino)
        rc = core__ver_retire_t(c, t, cfg, bucket, key, klen, dir, d, name, nlen, ino, r);
    if (rc)
        return rc;
    char vid[CORE_VID_MAX + 1];
    rc = version_add(c, t, cfg, bucket, key, klen, 0, NULL, p->uid, NULL, true, vid);
    if (rc == 0 && out) {
        memcpy(out->vid, vid, sizeof(vid));
        out->dmarker = true;
    }
    return rc;
}

int core__ver_created_t(struct core *c, struct meta_txn *t, uint64_t dir, const char *name,
                        size_t nlen, uint64_t ino, struct meta_inode *r)
{
    struct meta_bucketcfg cfg;
    char key[CORE_KEY_MAX + 2];
    size_t klen;
    int rc = core__ver_cfg(c, t, r->bucket, &cfg);
    if (rc || cfg.versioning == META_VERS_NONE || r->type != CORE_REG)
        return rc;
    rc = core__key_of(t, dir, name, nlen, false, key, &klen);
    if (rc == 0)
        rc = version_add(c, t, &cfg, r->bucket, key, klen, ino, r, 0, NULL, false, NULL);
    if (rc == 0)
        rc = core__dirty_note(t, ino, r, META_DIRTY_SEAL);
    return rc;
}

/* The key of regular file @p ino (@p r, linked at least once) from its parent's entries.
 * @return 0, -ENOENT (not found there), or an error. */
struct name_find {
    uint64_t ino;
    char name[CORE_NAME_MAX];
    size_t len;
    bool found;
};

static int name_find_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct name_find *f = arg;
    (void)cookie;
    if (ino != f->ino || len > CORE_NAME_MAX)
        return 0;
    memcpy(f->name, name, len);
    f->len = len;
    f->found = true;
    return 1;
}

static int key_of_ino(struct meta_txn *t, uint64_t ino, const struct meta_inode *r, char *key,
                      size_t *klen)
{
    struct name_find f = {.ino = ino};
    int rc = meta_dirent_scan(t, r->parent, 0, name_find_cb, &f);
    if (rc < 0)
        return rc;
    if (!f.found)
        return -ENOENT;
    return core__key_of(t, r->parent, f.name, f.len, false, key, klen);
}

int core__ver_open_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r)
{
    struct meta_bucketcfg cfg;
    struct chain ch;
    struct meta_version v;
    struct timespec now;
    uint64_t vseq;
    if (r->type != CORE_REG || r->nlink == 0)
        return 0;
    int rc = core__ver_check_t(t, ino, r);
    if (rc)
        return rc;
    r->flags &= (uint16_t)~META_I_VLOCK; /* not locked (any more): a retention sets it again */
    if ((r->flags & META_I_VREC) && !(r->flags & META_I_VSEALED))
        return 0; /* open already */
    rc = core__ver_cfg(c, t, r->bucket, &cfg);
    if (rc)
        return rc;
    if (cfg.versioning == META_VERS_NONE) {
        r->flags &= (uint16_t)~META_I_VSEALED;
        return 0;
    }
    char key[CORE_KEY_MAX + 2];
    size_t klen = 0;
    if (r->flags & META_I_VREC) {
        const char *k;
        rc = meta_vino_get(t, ino, &ch.id, &vseq);
        if (rc == 0)
            rc = meta_vchain_get(t, ch.id, &ch.h, &k);
        if (rc == 0) {
            klen = ch.h.keylen;
            memcpy(key, k, klen);
        }
    } else {
        rc = key_of_ino(t, ino, r, key, &klen); /* a file from before versioning */
    }
    if (rc == 0)
        rc = record_of(c, t, r->bucket, key, klen, ino, r, &ch, &vseq, &v);
    if (rc)
        return rc;
    if (v.flags & META_V_SEALED) {
        bool keep = cfg.versioning == META_VERS_ENABLED || !(v.flags & META_V_NULL);
        if (keep) {
            /* the sealed version keeps the bytes in a copy sharing them; the file goes on
             * as a new, open version */
            uint64_t vino;
            core__now(&now);
            rc = clone_file(c, t, ino, r, &vino);
            if (rc == 0)
                rc = meta_vino_put(t, vino, ch.id, vseq);
            if (rc == 0) {
                v.ino = vino;
                v.noncur_s = now.tv_sec;
                rc = meta_version_put(t, ch.id, vseq, &v);
            }
            if (rc == 0)
                rc = meta_vino_del(t, ino);
            r->flags &= (uint16_t) ~(META_I_VREC | META_I_VSEALED | META_I_VLOCK);
            if (rc == 0)
                rc = version_add(c, t, &cfg, r->bucket, key, klen, ino, r, 0, NULL, false, NULL);
        } else {
            /* the null version of a suspended bucket changes in place */
            v.flags &= ~(uint32_t)META_V_SEALED;
            rc = meta_version_put(t, ch.id, vseq, &v);
        }
        if (rc)
            return rc;
    }
    r->flags &= (uint16_t)~META_I_VSEALED;
    return core__dirty_note(t, ino, r, META_DIRTY_SEAL);
}

int core__ver_seal_t(struct meta_txn *t, uint64_t ino, struct meta_inode *r)
{
    uint64_t chain, vseq;
    struct meta_version v;
    if (!(r->flags & META_I_VREC) || (r->flags & META_I_VSEALED))
        return 0;
    int rc = meta_vino_get(t, ino, &chain, &vseq);
    if (rc == 0)
        rc = meta_version_get(t, chain, vseq, &v);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    v.flags |= META_V_SEALED;
    r->flags |= META_I_VSEALED;
    return meta_version_put(t, chain, vseq, &v);
}

int core__ver_move_t(struct core *c, struct meta_txn *t, const struct core_principal *p,
                     const struct meta_bucketcfg *cfg, uint64_t bucket, const char *okey,
                     size_t oklen, const char *nkey, size_t nklen, uint64_t ino,
                     struct meta_inode *r)
{
    struct chain ch;
    struct meta_version v;
    uint64_t vseq;
    bool sealed = true;
    struct core_lock lk = {0};
    if (r->type != CORE_REG)
        return 0;
    if (r->flags & META_I_VREC) {
        int rc = meta_vino_get(t, ino, &ch.id, &vseq);
        if (rc == 0)
            rc = meta_vchain_get(t, ch.id, &ch.h, NULL);
        if (rc == 0)
            rc = meta_version_get(t, ch.id, vseq, &v);
        if (rc == 0) {
            /* its record leaves the old key's chain */
            sealed = v.flags & META_V_SEALED;
            lock_of_rec(&v, &lk);
            rc = meta_version_del(t, ch.id, vseq);
            if (rc == 0 && ch.h.null_vseq == vseq) {
                ch.h.null_vseq = 0;
                rc = chain_put_header(t, &ch);
            }
            if (rc == 0)
                rc = meta_vino_del(t, ino);
        }
        if (rc && rc != -ENOENT)
            return rc;
        r->flags &= (uint16_t) ~(META_I_VREC | META_I_VSEALED | META_I_VLOCK);
    }
    /* the old key: a delete marker when it keeps older versions */
    int rc = chain_find(t, bucket, okey, oklen, &ch);
    if (rc == 0) {
        rc = chain_tidy(t, bucket, okey, oklen, &ch);
        if (rc == 0 && meta_vkey_get(t, bucket, okey, oklen, &ch.id) == 0)
            rc = version_add(c, t, cfg, bucket, okey, oklen, 0, NULL, p->uid, NULL, true, NULL);
    } else if (rc == -ENOENT) {
        rc = 0;
    }
    if (rc)
        return rc;
    /* the new key: the file is its newest version */
    rc = version_add(c, t, cfg, bucket, nkey, nklen, ino, r, 0, lk.mode || lk.hold ? &lk : NULL,
                     sealed, NULL);
    if (rc == 0 && !sealed)
        rc = core__dirty_note(t, ino, r, META_DIRTY_SEAL);
    return rc;
}

/* ---- deleting one version ---- */

/* Make detached version inode @p ino the file at @p key again (implicit parents as needed).
 * @return 0, SRV_ECLASH, or an error. */
static int relink(struct core *c, struct meta_txn *t, const struct core_principal *p,
                  uint64_t bucket, const char *key, size_t klen, uint64_t ino)
{
    struct core_principal sp = *p;
    struct meta_inode r, d;
    struct meta_dirent de;
    uint64_t dir;
    size_t noff;
    sp.flags |= CORE_P_SUPER; /* parents the version needs, whoever deletes a version */
    int rc = meta_inode_get(t, ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    rc = core__resolve_parent(c, t, &sp, bucket, key, klen, false, &dir, &noff);
    if (rc)
        return rc;
    const char *name = key + noff;
    size_t nlen = klen - noff;
    if (meta_dirent_get(t, dir, name, nlen, &de) == 0)
        return SRV_ECLASH; /* a directory (or a link) took the name meanwhile */
    rc = meta_inode_get(t, dir, &d);
    if (rc == 0)
        rc = meta_dirent_add(t, dir, name, nlen, ino, CORE_REG);
    if (rc == 0)
        rc = meta_keyidx_put(t, bucket, key, klen, ino, CORE_REG);
    if (rc)
        return rc;
    d.nchild++;
    core__touch(&d, true, true);
    rc = meta_inode_put(t, dir, &d);
    if (rc)
        return rc;
    r.nlink = 1;
    r.parent = dir;
    core__touch(&r, false, true);
    rc = meta_inode_put(t, ino, &r);
    if (rc == 0) /* back in the tree: its directories count it again */
        rc = core__usage_charge(c, t, r.tenant, dir, 0, 1, false);
    if (rc == 0)
        rc = core__usage_charge_dirs(c, t, r.tenant, dir, (int64_t)r.used, 0);
    return rc;
}

/* Find version @p vid of chain @p ch. @return 0, SRV_ENOVERSION, -EINVAL, or an error. */
static int version_find(struct meta_txn *t, const struct chain *ch, const char *vid, uint64_t *vseq,
                        struct meta_version *v)
{
    uint64_t rnd = 0;
    int rc = vid_parse(vid, vseq, &rnd);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        if (!ch->h.null_vseq)
            return SRV_ENOVERSION;
        *vseq = ch->h.null_vseq;
    }
    rc = meta_version_get(t, ch->id, *vseq, v);
    if (rc == -ENOENT || (rc == 0 && v->rand != rnd))
        return SRV_ENOVERSION;
    return rc;
}

/* What an op on one version of a key names. */
struct vref {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    const char *key;
    size_t klen;
    const char *vid; /* NULL: the current version (where allowed) */
};

struct vdel_op {
    struct vref r;
    unsigned flags;
    struct core_delres *out;
};

/* May @p p delete or protect versions of bucket @p b (whose owner, or write and search
 * permission on it)? */
static int bucket_admin(const struct core_principal *p, const struct meta_inode *b)
{
    if ((p->flags & CORE_P_SUPER) || p->uid == b->uid)
        return 0;
    return core__perm(p, b, CORE_MAY_W | CORE_MAY_X);
}

static int bucket_of(struct meta_txn *t, const struct core_principal *p, uint64_t bucket,
                     struct meta_inode *b)
{
    int rc = core__ino_get_p(t, p, bucket, 0, b);
    if (rc == SRV_ESTALE || (rc == 0 && !(b->flags & CORE_A_BUCKET)))
        return SRV_ENOBUCKET;
    return rc;
}

static int vdel_fn(struct meta_txn *t, void *arg)
{
    struct vdel_op *o = arg;
    struct vref *a = &o->r;
    struct core *c = a->c;
    struct meta_inode b;
    struct chain ch;
    struct meta_version v;
    uint64_t vseq, nseq;
    int rc = bucket_of(t, a->p, a->bucket, &b);
    if (rc == 0)
        rc = bucket_admin(a->p, &b);
    if (rc)
        return rc;
    if (a->p->flags & CORE_P_READONLY)
        return -EACCES;
    rc = chain_find(t, a->bucket, a->key, a->klen, &ch);
    if (rc == -ENOENT) {
        /* no chain: the key's file (if any) is its null version */
        uint64_t ino;
        uint32_t type;
        uint64_t vs, rnd;
        rc = vid_parse(a->vid, &vs, &rnd);
        if (rc < 0)
            return rc;
        if (rc == 0 || meta_keyidx_get(t, a->bucket, a->key, a->klen, &ino, &type) != 0 ||
            type != CORE_REG)
            return SRV_ENOVERSION;
        uint64_t dir;
        size_t noff;
        rc = core__parent_of_key(t, a->bucket, a->key, a->klen, false, &dir, &noff);
        if (rc == 0)
            rc = core__node_unlink(c, t, a->p, dir, a->key + noff, a->klen - noff, false, 0, NULL);
        if (rc == 0)
            rc = core__implicit_cleanup(c, t, a->p, a->bucket, a->key, a->klen, false);
        return rc;
    }
    if (rc)
        return rc;
    rc = version_find(t, &ch, a->vid, &vseq, &v);
    if (rc)
        return rc;
    if (!(v.flags & META_V_DMARK)) {
        rc = lock_check(&v, o->flags);
        if (rc)
            return rc;
    }
    bool latest = version_next(t, ch.id, 0, &nseq, &(struct meta_version){0}) == 0 && nseq == vseq;
    bool in_tree = false;
    if (v.ino) {
        struct meta_inode r;
        rc = meta_inode_get(t, v.ino, &r);
        if (rc)
            return rc == -ENOENT ? SRV_ECORRUPT : rc;
        in_tree = r.nlink > 0;
        if (in_tree) {
            /* the current file: out of the tree first (its data goes below) */
            uint64_t dir;
            size_t noff;
            struct meta_inode d;
            if (core__pend_has_data(c, v.ino))
                return -EAGAIN;
            rc = core__parent_of_key(t, a->bucket, a->key, a->klen, false, &dir, &noff);
            if (rc == 0)
                rc = meta_inode_get(t, dir, &d);
            if (rc == 0)
                rc = core__entry_detach(c, t, dir, &d, a->key + noff, a->klen - noff, v.ino, &r);
            if (rc == 0 && r.nlink == 0) { /* else another name keeps the file (and its usage) */
                rc = core__usage_charge(c, t, r.tenant, dir, 0, -1, false);
                if (rc == 0)
                    rc = core__usage_charge_dirs(c, t, r.tenant, dir, -(int64_t)r.used, 0);
            }
            if (rc == 0)
                rc = meta_inode_put(t, v.ino, &r);
            if (rc)
                return rc;
        }
    }
    rc = version_drop(c, t, &ch, vseq, &v);
    if (rc)
        return rc;
    bool relinked = false;
    if (latest) {
        /* the next newest is current now: a data version goes back into the tree */
        struct meta_version nv;
        if (version_next(t, ch.id, 0, &nseq, &nv) == 0) {
            if (nv.noncur_s) {
                nv.noncur_s = 0;
                rc = meta_version_put(t, ch.id, nseq, &nv);
            }
            if (rc == 0 && nv.ino) {
                rc = relink(c, t, a->p, a->bucket, a->key, a->klen, nv.ino);
                relinked = true;
            }
        }
    }
    if (rc == 0 && in_tree && !relinked)
        rc = core__implicit_cleanup(c, t, a->p, a->bucket, a->key, a->klen, false);
    if (rc == 0)
        rc = chain_tidy(t, a->bucket, a->key, a->klen, &ch);
    if (rc == 0 && o->out) {
        core__vid_fmt(vseq, &v, o->out->vid);
        o->out->dmarker = v.flags & META_V_DMARK;
    }
    return rc;
}

/* Commit the pending writes of the file at @p key of @p bucket (if any), so that an op
 * that retires it finds none (it answers -EAGAIN when some arrived meanwhile). */
static int flush_key(struct core *c, uint64_t bucket, const char *key, size_t klen)
{
    struct meta_txn *t;
    uint64_t ino;
    if (!core__pend_any(c))
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_keyidx_get(t, bucket, key, klen, &ino, NULL);
    meta_rtxn_end(t);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    return core__pend_flush_ino(c, ino);
}

int core__ver_submit(struct core *c, uint64_t bucket, const char *key, size_t klen, meta_op_fn fn,
                     void *arg)
{
    int rc = -EAGAIN;
    bool maybe = core__vb_maybe(c, bucket);
    for (int i = 0; i < 8 && rc == -EAGAIN; i++) {
        rc = maybe ? flush_key(c, bucket, key, klen) : 0;
        if (rc == 0)
            rc = meta_submit(c->meta, fn, arg, 0);
    }
    core__pend_reap(c);
    return rc == -EAGAIN ? -EIO : rc;
}

int core_key_delete_v(struct core *c, const struct core_principal *p, uint64_t bucket,
                      const char *key, size_t keylen, const char *vid, unsigned flags,
                      struct core_delres *out)
{
    bool isdir;
    int rc = core__key_check(key, keylen, &isdir);
    if (out)
        memset(out, 0, sizeof(*out));
    if (rc)
        return rc;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    if (!vid)
        return core__key_delete(c, p, bucket, key, keylen, out);
    if (isdir)
        return strcmp(vid, "null") == 0 ? core__key_delete(c, p, bucket, key, keylen, NULL)
                                        : SRV_ENOVERSION;
    struct vdel_op a = {{c, p, bucket, key, keylen, vid}, flags, out};
    return core__ver_submit(c, bucket, key, keylen, vdel_fn, &a);
}

/* ---- bucket configuration (public) ---- */

int core_bucket_vcfg_get(struct core *c, const struct core_principal *p, uint64_t bucket,
                         struct core_bucket_vcfg *out)
{
    struct meta_txn *t;
    struct meta_inode b;
    struct meta_bucketcfg cfg;
    memset(out, 0, sizeof(*out));
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_of(t, p, bucket, &b);
    if (rc == 0)
        rc = core__ver_cfg(c, t, bucket, &cfg);
    meta_rtxn_end(t);
    if (rc)
        return rc;
    out->versioning = (enum core_versioning)cfg.versioning;
    out->objlock = cfg.flags & META_BC_OBJLOCK;
    out->lock_mode = cfg.lock;
    out->lock_days = cfg.lock_days;
    out->lock_years = cfg.lock_years;
    return 0;
}

struct bcfg_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t bucket;
    enum core_versioning vers;           /* versioning_set */
    const struct core_bucket_vcfg *lock; /* objlock_set */
};

static int bcfg_fn(struct meta_txn *t, void *arg)
{
    struct bcfg_op *a = arg;
    struct meta_inode b;
    struct meta_bucketcfg cfg;
    int rc = bucket_of(t, a->p, a->bucket, &b);
    if (rc == 0 && !(a->p->flags & CORE_P_SUPER) && a->p->uid != b.uid)
        rc = -EACCES; /* the bucket's owner configures it */
    if (rc == 0)
        rc = bcfg_read(t, a->bucket, &cfg);
    if (rc)
        return rc;
    if (a->lock) {
        if (a->lock->versioning == CORE_VERS_ENABLED)
            cfg.versioning = META_VERS_ENABLED;
        if (cfg.versioning != META_VERS_ENABLED)
            return SRV_EBADSTATE;
        cfg.flags |= META_BC_OBJLOCK;
        cfg.lock = a->lock->lock_mode;
        cfg.lock_days = a->lock->lock_mode ? a->lock->lock_days : 0;
        cfg.lock_years = a->lock->lock_mode ? a->lock->lock_years : 0;
    } else {
        if (a->vers == CORE_VERS_SUSPENDED && (cfg.flags & META_BC_OBJLOCK))
            return SRV_EBADSTATE;
        cfg.versioning = a->vers;
    }
    return meta_bucketcfg_put(t, a->bucket, META_BCFG_CORE, &cfg, sizeof(cfg));
}

static int bcfg_submit(struct core *c, struct bcfg_op *a)
{
    if (a->p->flags & CORE_P_READONLY)
        return -EACCES;
    /* marked before the op commits: no op of the bucket may miss its versioning */
    int rc = core__vb_mark(c, a->bucket);
    return rc ? rc : meta_submit(c->meta, bcfg_fn, a, 0);
}

int core_bucket_versioning_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                               enum core_versioning v)
{
    struct bcfg_op a = {c, p, bucket, v, NULL};
    if (v != CORE_VERS_ENABLED && v != CORE_VERS_SUSPENDED)
        return -EINVAL;
    return bcfg_submit(c, &a);
}

int core_bucket_objlock_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                            const struct core_bucket_vcfg *cfg)
{
    struct bcfg_op a = {c, p, bucket, CORE_VERS_NONE, cfg};
    if (cfg->lock_mode > CORE_LOCK_COMPLIANCE ||
        (cfg->lock_mode && !cfg->lock_days == !cfg->lock_years) || cfg->lock_days > 36500 ||
        cfg->lock_years > 100)
        return -EINVAL;
    return bcfg_submit(c, &a);
}

/* ---- front-end blobs ---- */

int core_bucket_blob_get(struct core *c, const struct core_principal *p, uint64_t bucket,
                         uint8_t kind, void **val, size_t *len)
{
    struct meta_txn *t;
    struct meta_inode b;
    const void *v;
    *val = NULL;
    *len = 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_of(t, p, bucket, &b);
    if (rc == 0)
        rc = meta_bucketcfg_get(t, bucket, kind, &v, len);
    if (rc == 0) {
        *val = malloc(*len ? *len : 1);
        if (*val)
            memcpy(*val, v, *len);
        else
            rc = -ENOMEM;
    }
    meta_rtxn_end(t);
    return rc;
}

struct blob_op {
    const struct core_principal *p;
    uint64_t bucket;
    uint8_t kind;
    const void *val;
    size_t len;
};

static int blob_fn(struct meta_txn *t, void *arg)
{
    struct blob_op *a = arg;
    struct meta_inode b;
    int rc = bucket_of(t, a->p, a->bucket, &b);
    if (rc == 0 && !(a->p->flags & CORE_P_SUPER) && a->p->uid != b.uid)
        rc = -EACCES;
    if (rc)
        return rc;
    if (!a->len)
        return meta_bucketcfg_del(t, a->bucket, a->kind);
    return meta_bucketcfg_put(t, a->bucket, a->kind, a->val, a->len);
}

int core_bucket_blob_put(struct core *c, const struct core_principal *p, uint64_t bucket,
                         uint8_t kind, const void *val, size_t len)
{
    struct blob_op a = {p, bucket, kind, val, len};
    if (kind <= META_BCFG_CORE)
        return -EINVAL;
    if (p->flags & CORE_P_READONLY)
        return -EACCES;
    int rc = meta_submit(c->meta, blob_fn, &a, 0);
    if (rc == 0 && kind == CORE_BLOB_CACHE)
        rc = core_cache_reload(c);
    return rc;
}

struct blob_scan {
    struct meta_txn *t;
    core_blob_cb cb;
    void *arg;
};

static int blob_ent(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    struct blob_scan *s = arg;
    struct meta_inode b;
    (void)kind;
    if (meta_inode_get(s->t, bucket, &b) != 0 || !(b.flags & CORE_A_BUCKET))
        return 0;
    return s->cb(s->arg, b.tenant, bucket, val, len);
}

int core_bucket_blob_scan(struct core *c, uint8_t kind, core_blob_cb cb, void *arg)
{
    struct blob_scan s = {NULL, cb, arg};
    if (kind <= META_BCFG_CORE)
        return -EINVAL;
    int rc = meta_rtxn_begin(c->meta, &s.t);
    if (rc)
        return rc;
    rc = meta_bucketcfg_scan(s.t, kind, blob_ent, &s);
    meta_rtxn_end(s.t);
    return rc;
}

/* ---- looking versions up ---- */

/* Fill @p out from version (@p vseq, @p v) of @p ch (@p latest: the newest); a data version
 * as core_key_lookup does (meta blob with @p want_meta). @return 0, -EACCES, or an error. */
static int version_info(struct core *c, struct meta_txn *t, const struct core_principal *p,
                        uint64_t vseq, const struct meta_version *v, bool latest, bool want_meta,
                        struct core_objinfo *out)
{
    memset(out, 0, sizeof(*out));
    core__vid_fmt(vseq, v, out->vid);
    out->latest = latest;
    out->noncur_s = v->noncur_s;
    lock_of_rec(v, &out->lock);
    if (!v->ino) {
        out->dmarker = true;
        out->attr.uid = v->uid;
        out->attr.mtime.tv_sec = v->mtime_s;
        out->attr.mtime.tv_nsec = v->mtime_ns;
        return 0;
    }
    struct meta_inode r;
    int rc = meta_inode_get(t, v->ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    if (p && (rc = core__perm(p, &r, CORE_MAY_R)) != 0)
        return rc;
    core__attr_fill(&r, v->ino, &out->attr);
    core__attr_pend(c, &out->attr);
    bool pending = r.type == CORE_REG && core__pend_has_data(c, v->ino);
    rc = meta_objmeta_get(t, v->ino, out->etag, CORE_ETAG_MAX + 1, want_meta ? &out->meta : NULL,
                          want_meta ? &out->metalen : NULL);
    if (rc == -ENOENT)
        rc = 0;
    if (rc == 0 && (pending || !out->etag[0])) {
        struct meta_inode cur = r;
        cur.size = out->attr.size;
        cur.change = out->attr.change;
        core__etag_synth(&cur, v->ino, out->etag);
    }
    return rc;
}

int core__ver_current(struct core *c, struct meta_txn *t, uint64_t bucket, uint64_t ino,
                      const struct meta_inode *r, struct core_objinfo *out)
{
    uint64_t chain, vseq;
    struct meta_version v;
    struct meta_bucketcfg cfg;
    out->vid[0] = '\0';
    out->latest = true;
    memset(&out->lock, 0, sizeof(out->lock));
    if (r->flags & META_I_VREC) {
        int rc = meta_vino_get(t, ino, &chain, &vseq);
        if (rc == 0)
            rc = meta_version_get(t, chain, vseq, &v);
        if (rc == 0) {
            core__vid_fmt(vseq, &v, out->vid);
            lock_of_rec(&v, &out->lock);
            return 0;
        }
        if (rc != -ENOENT)
            return rc;
    }
    int rc = core__ver_cfg(c, t, bucket, &cfg);
    if (rc == 0 && cfg.versioning != META_VERS_NONE)
        snprintf(out->vid, sizeof(out->vid), "null");
    return rc;
}

int core__ver_marker(struct core *c, struct meta_txn *t, uint64_t bucket, const char *key,
                     size_t klen, struct core_objinfo *out)
{
    struct chain ch;
    struct meta_version v;
    uint64_t vseq;
    if (!core__vb_maybe(c, bucket))
        return -ENOENT;
    int rc = chain_find(t, bucket, key, klen, &ch);
    if (rc == 0)
        rc = version_next(t, ch.id, 0, &vseq, &v);
    if (rc)
        return rc;
    if (!(v.flags & META_V_DMARK))
        return -ENOENT;
    return version_info(c, t, NULL, vseq, &v, true, false, out);
}

int core_version_lookup(struct core *c, const struct core_principal *p, uint64_t bucket,
                        const char *key, size_t keylen, const char *vid, struct core_objinfo *out)
{
    struct meta_txn *t;
    struct meta_inode b;
    struct chain ch;
    struct meta_version v;
    uint64_t vseq, nseq;
    bool isdir;
    memset(out, 0, sizeof(*out));
    int rc = core__key_check(key, keylen, &isdir);
    if (rc)
        return rc;
    uint64_t vs, rnd;
    int kind = vid_parse(vid, &vs, &rnd);
    if (kind < 0)
        return kind;
    if (kind == 1 || isdir) {
        /* "null": with no chain, the key's file (a bucket never versioned, a file from
         * before versioning, a directory marker) */
        if (kind != 1)
            return SRV_ENOVERSION;
        rc = meta_rtxn_begin(c->meta, &t);
        if (rc)
            return rc;
        rc = isdir ? -ENOENT : chain_find(t, bucket, key, keylen, &ch);
        meta_rtxn_end(t);
        if (rc == -ENOENT) {
            rc = core_key_lookup(c, p, bucket, key, keylen, out);
            if (rc == 0 && strcmp(out->vid, "null") != 0 && out->vid[0]) {
                free(out->meta);
                memset(out, 0, sizeof(*out));
                return SRV_ENOVERSION; /* its file is another version */
            }
            if (rc == 0)
                snprintf(out->vid, sizeof(out->vid), "null");
            return rc;
        }
        if (rc)
            return rc;
    }
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = bucket_of(t, p, bucket, &b);
    if (rc == 0) {
        rc = chain_find(t, bucket, key, keylen, &ch);
        if (rc == -ENOENT)
            rc = SRV_ENOVERSION;
    }
    if (rc == 0)
        rc = version_find(t, &ch, vid, &vseq, &v);
    if (rc == 0) {
        bool latest =
            version_next(t, ch.id, 0, &nseq, &(struct meta_version){0}) == 0 && nseq == vseq;
        struct core_principal vp = *p;
        vp.flags |= CORE_P_VERSIONS;
        rc = version_info(c, t, &vp, vseq, &v, latest, true, out);
    }
    meta_rtxn_end(t);
    if (rc) {
        free(out->meta);
        out->meta = NULL;
        out->metalen = 0;
    }
    return rc;
}

/* ---- ListObjectVersions ---- */

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int r = m ? memcmp(a, b, m) : 0;
    if (r)
        return r;
    return al < bl ? -1 : al > bl;
}

static bool starts_with(const char *k, size_t kl, const char *p, size_t pl)
{
    return kl >= pl && (pl == 0 || memcmp(k, p, pl) == 0);
}

struct vlist {
    struct core *c;
    struct meta_txn *t;
    uint64_t bucket;
    const char *prefix, *delim;
    size_t plen, dlen;
    uint32_t max, count;
    core_list_cb cb;
    void *arg;
    bool stop; /* the callback asked to stop, or the page is full */
    bool *truncated;
    char skip[CORE_KEY_MAX + 2]; /* keys starting with these bytes are behind us */
    size_t skiplen;
};

/* The first entry of one index after a key: a key, or the prefix it rolls up into. */
struct cand {
    bool found, is_prefix;
    char key[CORE_KEY_MAX + 1];
    size_t klen;
    uint64_t id; /* keyidx: the inode; vkeys: the chain */
};

struct cscan {
    struct vlist *s;
    const char *after;
    size_t alen;
    bool tree; /* keyidx (the tree's listing rules) or vkeys */
    struct cand *out;
};

static int cand_cb(void *arg, const char *kb, size_t kl, const struct meta_keyval *kv, size_t *skip)
{
    struct cscan *x = arg;
    struct vlist *s = x->s;
    if (x->alen && bytes_cmp(kb, kl, x->after, x->alen) <= 0)
        return 0;
    if (s->skiplen && starts_with(kb, kl, s->skip, s->skiplen)) {
        *skip = s->skiplen;
        return 0;
    }
    if (x->tree && kv->type == CORE_LNK)
        return 0; /* symbolic links are not objects */
    const char *dpos = NULL;
    if (s->dlen && kl > s->plen)
        dpos = memmem(kb + s->plen, kl - s->plen, s->delim, s->dlen);
    if (!dpos && x->tree) {
        struct meta_inode r;
        if (meta_inode_get(s->t, kv->ino, &r) != 0 || (r.type == CORE_DIR && r.nchild > 0))
            return 0; /* non-empty directories list through their children */
    }
    struct cand *o = x->out;
    o->found = true;
    o->is_prefix = dpos != NULL;
    o->klen = dpos ? (size_t)(dpos - kb) + s->dlen : kl;
    memcpy(o->key, kb, o->klen);
    o->id = kv->ino;
    return 1;
}

static int cand_next(struct vlist *s, bool tree, const char *after, size_t alen, struct cand *out)
{
    struct cscan x = {s, after, alen, tree, out};
    out->found = false;
    int rc = tree ? meta_keyidx_scan(s->t, s->bucket, s->prefix, s->plen, after, alen, cand_cb, &x)
                  : meta_vkey_scan(s->t, s->bucket, s->prefix, s->plen, after, alen, cand_cb, &x);
    return rc == 1 ? 0 : rc;
}

/* Offer one entry; @return true to stop (page full: truncated; or the callback said so). */
static bool vl_emit(struct vlist *s, const char *key, size_t klen, bool is_prefix,
                    const struct core_objinfo *info)
{
    if (s->count == s->max) {
        *s->truncated = true;
        s->stop = true;
        return true;
    }
    struct core_listent e = {.key = key, .keylen = klen, .is_prefix = is_prefix, .info = info};
    if (s->cb(s->arg, &e)) {
        s->stop = true;
        return true;
    }
    s->count++;
    return false;
}

struct vemit {
    struct vlist *s;
    const char *key;
    size_t klen;
    uint64_t newest;
    int rc;
};

static int vemit_cb(void *arg, uint64_t vseq, const struct meta_version *v)
{
    struct vemit *e = arg;
    struct core_objinfo info;
    if (!v)
        return 0; /* malformed record: left out */
    e->rc = version_info(e->s->c, e->s->t, NULL, vseq, v, vseq == e->newest, false, &info);
    if (e->rc)
        return 1;
    return vl_emit(e->s, e->key, e->klen, false, &info) ? 1 : 0;
}

/* The versions of @p key: chain @p chain's after version @p after (0: all), or (no chain)
 * the tree's entry @p ino as its null version. */
static int vl_key(struct vlist *s, const char *key, size_t klen, uint64_t chain, uint64_t ino,
                  uint64_t after)
{
    if (chain) {
        struct vemit e = {s, key, klen, 0, 0};
        struct meta_version nv;
        int rc = version_next(s->t, chain, 0, &e.newest, &nv);
        if (rc)
            return rc == -ENOENT ? 0 : rc;
        rc = meta_version_scan(s->t, chain, after, vemit_cb, &e);
        return rc < 0 ? rc : e.rc;
    }
    if (!ino || after)
        return 0;
    struct meta_inode r;
    struct core_objinfo info;
    int rc = meta_inode_get(s->t, ino, &r);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    memset(&info, 0, sizeof(info));
    core__attr_fill(&r, ino, &info.attr);
    core__attr_pend(s->c, &info.attr);
    bool pending = r.type == CORE_REG && core__pend_has_data(s->c, ino);
    if (pending || meta_objmeta_get(s->t, ino, info.etag, CORE_ETAG_MAX + 1, NULL, NULL) != 0 ||
        !info.etag[0]) {
        struct meta_inode cur = r;
        cur.size = info.attr.size;
        cur.change = info.attr.change;
        core__etag_synth(&cur, ino, info.etag);
    }
    snprintf(info.vid, sizeof(info.vid), "null");
    info.latest = true;
    vl_emit(s, key, klen, false, &info);
    return 0;
}

int core_list_versions(struct core *c, const struct core_principal *p, uint64_t bucket,
                       const char *prefix, size_t prefixlen, const char *key_marker, size_t kmlen,
                       const char *vid_marker, const char *delim, size_t delimlen, uint32_t max,
                       core_list_cb cb, void *arg, bool *truncated)
{
    struct meta_inode b;
    struct vlist *s = NULL;
    char *after = NULL;
    size_t alen = 0;
    *truncated = false;
    if (!prefix)
        prefixlen = 0;
    if (!delim)
        delimlen = 0;
    if (!key_marker)
        kmlen = 0;
    if (vid_marker && !kmlen)
        return -EINVAL; /* a version id marker needs its key marker */
    if (prefixlen > CORE_KEY_MAX || kmlen > CORE_KEY_MAX)
        return 0;
    s = calloc(1, sizeof(*s));
    after = malloc(CORE_KEY_MAX + 1);
    if (!s || !after) {
        free(s);
        free(after);
        return -ENOMEM;
    }
    *s = (struct vlist){.c = c,
                        .bucket = bucket,
                        .prefix = prefixlen ? prefix : "",
                        .delim = delim,
                        .plen = prefixlen,
                        .dlen = delimlen,
                        .max = max,
                        .cb = cb,
                        .arg = arg,
                        .truncated = truncated};
    int rc = meta_rtxn_begin(c->meta, &s->t);
    if (rc)
        goto out;
    rc = bucket_of(s->t, p, bucket, &b);
    if (rc == 0)
        rc = core__perm(p, &b, CORE_MAY_R);
    if (rc || max == 0)
        goto out;
    if (kmlen) {
        memcpy(after, key_marker, kmlen);
        alen = kmlen;
        /* a marker that is a rolled-up prefix: everything under it is behind us */
        if (delimlen && kmlen >= prefixlen + delimlen &&
            starts_with(key_marker, kmlen, prefix, prefixlen) &&
            memcmp(key_marker + kmlen - delimlen, delim, delimlen) == 0) {
            memcpy(s->skip, key_marker, kmlen);
            s->skiplen = kmlen;
        }
    }
    if (vid_marker) {
        /* the rest of the marker key's versions come first */
        struct chain ch;
        uint64_t vseq, rnd;
        int kind = vid_parse(vid_marker, &vseq, &rnd);
        if (kind < 0) {
            rc = -EINVAL;
        } else if (chain_find(s->t, bucket, key_marker, kmlen, &ch) == 0) {
            /* an id names its place in the chain whether or not it is still there (the
             * lifecycle worker deletes versions as it pages) */
            if (kind == 1)
                vseq = ch.h.null_vseq;
            if (vseq)
                rc = vl_key(s, key_marker, kmlen, ch.id, 0, vseq);
        }
        if (rc || s->stop)
            goto out;
    }
    for (;;) {
        struct cand ct, cv;
        rc = cand_next(s, true, alen ? after : NULL, alen, &ct);
        if (rc == 0)
            rc = cand_next(s, false, alen ? after : NULL, alen, &cv);
        if (rc || (!ct.found && !cv.found))
            break;
        int cmp = !ct.found ? 1 : !cv.found ? -1 : bytes_cmp(ct.key, ct.klen, cv.key, cv.klen);
        const struct cand *k = cmp <= 0 ? &ct : &cv;
        if (k->is_prefix) {
            if (vl_emit(s, k->key, k->klen, true, NULL))
                break;
            memcpy(s->skip, k->key, k->klen);
            s->skiplen = k->klen;
        } else {
            rc = vl_key(s, k->key, k->klen, cmp >= 0 ? cv.id : 0, cmp <= 0 ? ct.id : 0, 0);
            if (rc || s->stop)
                break;
        }
        memcpy(after, k->key, k->klen);
        alen = k->klen;
    }
out:
    meta_rtxn_end(s->t);
    free(after);
    free(s);
    return rc;
}

/* ---- object lock and metadata of one version ---- */

struct vset_op {
    struct vref r;
    const struct core_lock *lk; /* retention to set, or NULL */
    int hold;                   /* -1: leave, 0/1: legal hold */
    unsigned flags;
    const void *meta; /* metadata blob to set (with set_meta) */
    size_t metalen;
    bool set_meta;
    int mode; /* with set_meta: permission bits to set (-1: leave) */
};

/* The version an op names: (chain, vseq, record), for the current one of a key without a
 * chain a record made for its file (then @p made). @return 0, -ENOENT, SRV_ENOVERSION,
 * -EINVAL, or an error. */
static int vset_find(const struct vref *a, struct meta_txn *t, struct chain *ch, uint64_t *vseq,
                     struct meta_version *v)
{
    int rc = chain_find(t, a->bucket, a->key, a->klen, ch);
    if (rc == 0 && a->vid)
        return version_find(t, ch, a->vid, vseq, v);
    if (rc == 0) {
        rc = version_next(t, ch->id, 0, vseq, v);
        if (rc == 0 && (v->flags & META_V_DMARK))
            rc = -ENOENT; /* deleted: no current version */
        return rc;
    }
    if (rc != -ENOENT)
        return rc;
    /* no chain: a file of a bucket never versioned, or from before versioning */
    uint64_t ino;
    uint32_t type;
    if (a->vid && strcmp(a->vid, "null") != 0)
        return vid_parse(a->vid, vseq, &v->rand) < 0 ? -EINVAL : SRV_ENOVERSION;
    rc = meta_keyidx_get(t, a->bucket, a->key, a->klen, &ino, &type);
    if (rc == 0 && type != CORE_REG)
        rc = -ENOENT;
    if (rc)
        return rc;
    memset(v, 0, sizeof(*v));
    v->ino = ino;
    *vseq = 0; /* no record */
    return 0;
}

static int vset_fn(struct meta_txn *t, void *arg)
{
    struct vset_op *o = arg;
    const struct vref *a = &o->r;
    struct core *c = a->c;
    struct meta_inode b, r;
    struct meta_bucketcfg cfg;
    struct chain ch;
    struct meta_version v;
    uint64_t vseq;
    int rc = bucket_of(t, a->p, a->bucket, &b);
    if (rc == 0)
        rc = core__ver_cfg(c, t, a->bucket, &cfg);
    if (rc == 0)
        rc = vset_find(a, t, &ch, &vseq, &v);
    if (rc)
        return rc;
    if (!v.ino)
        return -EINVAL; /* a delete marker has no retention, hold or metadata */
    rc = meta_inode_get(t, v.ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    if (o->set_meta) {
        /* as core_key_set_meta: the owner, or write permission on the version */
        if (!(a->p->flags & CORE_P_SUPER) && a->p->uid != r.uid &&
            core__perm(a->p, &r, CORE_MAY_W) != 0)
            return -EACCES;
        char etag[CORE_ETAG_MAX + 1];
        rc = meta_objmeta_get(t, v.ino, etag, sizeof(etag), NULL, NULL);
        if (rc == -ENOENT)
            etag[0] = '\0';
        else if (rc)
            return rc;
        rc = meta_objmeta_put(t, v.ino, etag, o->meta, o->metalen);
        if (rc)
            return rc;
        if (o->mode >= 0)
            r.mode = (r.mode & 07000) | ((uint32_t)o->mode & 0777);
        core__touch(&r, false, true);
        return meta_inode_put(t, v.ino, &r);
    }
    if (!(cfg.flags & META_BC_OBJLOCK))
        return SRV_EBADSTATE;
    rc = bucket_admin(a->p, &b);
    if (rc)
        return rc;
    if (!vseq) { /* a file from before versioning: its key's null version */
        rc = record_of(c, t, a->bucket, a->key, a->klen, v.ino, &r, &ch, &vseq, &v);
        if (rc == 0)
            rc = meta_inode_put(t, v.ino, &r);
        if (rc)
            return rc;
    }
    if (o->lk) {
        struct timespec now;
        core__now(&now);
        bool active = retained(&v, now.tv_sec);
        bool shorter = !o->lk->mode || o->lk->until < v.until_s ||
                       (v.lock == META_LOCK_COMPLIANCE && o->lk->mode != META_LOCK_COMPLIANCE);
        if (active && shorter) {
            if (v.lock == META_LOCK_COMPLIANCE || !(o->flags & CORE_DEL_BYPASS))
                return SRV_ELOCKED;
        }
        v.lock = o->lk->mode;
        v.until_s = o->lk->mode ? o->lk->until : 0;
    }
    if (o->hold >= 0) {
        if (o->hold)
            v.flags |= META_V_HOLD;
        else
            v.flags &= ~(uint32_t)META_V_HOLD;
    }
    if (v.lock || (v.flags & META_V_HOLD)) {
        r.flags |= META_I_VLOCK;
        rc = meta_inode_put(t, v.ino, &r);
        if (rc)
            return rc;
    }
    return meta_version_put(t, ch.id, vseq, &v);
}

static int vset_submit(struct core *c, struct vset_op *a)
{
    bool isdir;
    int rc = core__key_check(a->r.key, a->r.klen, &isdir);
    if (rc)
        return rc;
    if (isdir)
        return -EINVAL;
    if (a->r.p->flags & CORE_P_READONLY)
        return -EACCES;
    return meta_submit(c->meta, vset_fn, a, 0);
}

int core_version_retention_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                               const char *key, size_t keylen, const char *vid,
                               const struct core_lock *lk, unsigned flags)
{
    struct vset_op a = {{c, p, bucket, key, keylen, vid}, lk, -1, flags, NULL, 0, false, -1};
    if (lk->mode > CORE_LOCK_COMPLIANCE || (lk->mode && lk->until <= 0))
        return -EINVAL;
    return vset_submit(c, &a);
}

int core_version_hold_set(struct core *c, const struct core_principal *p, uint64_t bucket,
                          const char *key, size_t keylen, const char *vid, bool on)
{
    struct vset_op a = {{c, p, bucket, key, keylen, vid}, NULL, on, 0, NULL, 0, false, -1};
    return vset_submit(c, &a);
}

int core_version_set_meta_mode(struct core *c, const struct core_principal *p, uint64_t bucket,
                               const char *key, size_t keylen, const char *vid, const void *meta,
                               size_t metalen, int mode)
{
    struct vset_op a = {{c, p, bucket, key, keylen, vid}, NULL, -1, 0, meta, metalen, true, mode};
    return vset_submit(c, &a);
}

int core_version_set_meta(struct core *c, const struct core_principal *p, uint64_t bucket,
                          const char *key, size_t keylen, const char *vid, const void *meta,
                          size_t metalen)
{
    return core_version_set_meta_mode(c, p, bucket, key, keylen, vid, meta, metalen, -1);
}
