/* SPDX-License-Identifier: Apache-2.0
 * core_perm: the base of the core (core_int.h), used by every sub-module:
 * inodes and directories as a principal may use them, permission bits,
 * attributes and times.
 * Thread: any thread holding a txn. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_tier.h"
#include "srv_err.h"

void core__now(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
}

int core__ino_get_p(struct meta_txn *t, const struct core_principal *p, uint64_t ino,
                    uint32_t gen, struct meta_inode *out)
{
    int rc = meta_inode_get(t, ino, out);
    if (rc == -ENOENT)
        return SRV_ESTALE;
    if (rc)
        return rc;
    if (out->tenant != p->tenant || (gen != 0 && gen != out->gen))
        return SRV_ESTALE;
    /* a noncurrent version is reached only by those who ask for versions */
    if (out->nlink == 0 && (out->flags & META_I_VREC) && !(p->flags & CORE_P_VERSIONS))
        return SRV_ESTALE;
    return 0;
}

int core__dir_get_p(struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                    uint32_t want, struct meta_inode *out)
{
    int rc = core__ino_get_p(t, p, dir, 0, out);
    if (rc)
        return rc;
    if (out->type != CORE_DIR)
        return -ENOTDIR;
    return want ? core__perm(p, out, want) : 0;
}

void core__attr_fill(const struct meta_inode *r, uint64_t ino, struct core_attr *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    out->gen = r->gen;
    out->tenant = r->tenant;
    out->type = (enum core_ftype)r->type;
    out->mode = r->mode;
    out->nlink = r->nlink;
    out->uid = r->uid;
    out->gid = r->gid;
    out->size = r->size;
    out->used = r->used;
    out->atime.tv_sec = r->atime_s;
    out->atime.tv_nsec = r->atime_ns;
    out->mtime.tv_sec = r->mtime_s;
    out->mtime.tv_nsec = r->mtime_ns;
    out->ctime.tv_sec = r->ctime_s;
    out->ctime.tv_nsec = r->ctime_ns;
    out->btime.tv_sec = r->btime_s;
    out->btime.tv_nsec = r->btime_ns;
    out->change = r->change;
    out->parent = r->parent;
    out->flags = (r->flags & 0xff) | ((r->flags & META_I_EVICTED) ? CORE_A_EVICTED : 0);
    out->bucket = r->bucket;
}

void core__touch(struct meta_inode *r, bool mtime, bool ctime)
{
    struct timespec now;
    core__now(&now);
    if (mtime) {
        r->mtime_s = now.tv_sec;
        r->mtime_ns = (uint32_t)now.tv_nsec;
    }
    if (ctime) {
        r->ctime_s = now.tv_sec;
        r->ctime_ns = (uint32_t)now.tv_nsec;
    }
    r->change++;
}

bool core__in_group(const struct core_principal *p, uint32_t gid)
{
    if (p->gid == gid)
        return true;
    for (uint32_t i = 0; i < p->ngids && i < CORE_MAX_GIDS; i++)
        if (p->gids[i] == gid)
            return true;
    return false;
}

/* The one POSIX rule (core_perm_bits). */
static uint32_t perm_bits(const struct core_principal *p, uint32_t uid, uint32_t gid, uint32_t mode,
                          uint32_t type, enum core_pclass *cls)
{
    enum core_pclass c;
    uint32_t bits;
    if (p->flags & CORE_P_SUPER) {
        /* super may execute only what some execute bit allows (as root) */
        c = CORE_PC_SUPER;
        bits = type == CORE_REG && !(mode & 0111) ? 6 : 7;
    } else if (p->uid == uid) {
        c = CORE_PC_OWNER;
        bits = (mode >> 6) & 7;
    } else if (core__in_group(p, gid)) {
        c = CORE_PC_GROUP;
        bits = (mode >> 3) & 7;
    } else {
        c = CORE_PC_OTHER;
        bits = mode & 7;
    }
    if (cls)
        *cls = c;
    return bits;
}

uint32_t core_perm_bits(const struct core_principal *p, const struct core_attr *a,
                        enum core_pclass *cls)
{
    return perm_bits(p, a->uid, a->gid, a->mode, a->type, cls);
}

int core__perm(const struct core_principal *p, const struct meta_inode *r, uint32_t want)
{
    uint32_t bits = perm_bits(p, r->uid, r->gid, r->mode, r->type, NULL);
    return (bits & want) == want ? 0 : -EACCES;
}

int core__cm_ro(struct core *c, const struct core_principal *p, uint64_t bucket)
{
    int rc = 0;
    if (p && (p->flags & CORE_P_FILL))
        return 0;
    pthread_mutex_lock(&c->cm.mu);
    for (size_t i = 0; i < c->cm.n; i++)
        if (c->cm.v[i].bucket == bucket && c->cm.v[i].ro)
            rc = -EROFS;
    pthread_mutex_unlock(&c->cm.mu);
    return rc;
}

int core__cm_ro_ino(struct core *c, const struct core_principal *p, uint64_t ino)
{
    bool any = false;
    if (p && (p->flags & CORE_P_FILL))
        return 0;
    pthread_mutex_lock(&c->cm.mu);
    for (size_t i = 0; i < c->cm.n; i++)
        any |= c->cm.v[i].ro;
    pthread_mutex_unlock(&c->cm.mu);
    if (!any)
        return 0;
    struct meta_txn *t;
    struct meta_inode r;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    meta_rtxn_end(t);
    if (rc)
        return 0; /* the operation itself answers */
    return core__cm_ro(c, p, r.bucket);
}

bool core__cm_stale(struct core *c, uint64_t bucket, uint64_t dir)
{
    bool yes = false;
    pthread_mutex_lock(&c->cm.mu);
    for (size_t i = 0; i < c->cm.n && !yes; i++)
        yes = c->cm.v[i].bucket == bucket;
    for (size_t i = 0; yes && i < CORE_CM_HASH; i++)
        for (struct core__cdir *d = c->cm.h[i]; d; d = d->next)
            if (d->dir == dir)
                d->at_ms = 0;
    pthread_mutex_unlock(&c->cm.mu);
    return yes;
}

bool core__cm_is(struct core *c, uint64_t bucket)
{
    bool yes = false;
    pthread_mutex_lock(&c->cm.mu);
    for (size_t i = 0; i < c->cm.n && !yes; i++)
        yes = c->cm.v[i].bucket == bucket;
    pthread_mutex_unlock(&c->cm.mu);
    return yes;
}

bool core__cm_meta_due(struct meta_txn *t, uint64_t ino, struct meta_tier_copy *cp, char *oetag,
                       size_t oesize, uint64_t *change)
{
    struct meta_inode r;
    void *m = NULL;
    size_t ml = 0;
    if (meta_inode_get(t, ino, &r) != 0 || r.type != CORE_REG || meta_tier_get(t, ino, cp) != 0 ||
        r.change != cp->st.change || !cp->st.etag[0])
        return false;
    if (meta_objmeta_get(t, ino, oetag, oesize, &m, &ml) != 0)
        return false;
    free(m);
    *change = r.change;
    return ml == 0;
}

int core__cm_meta_keep(struct meta_txn *t, uint64_t ino, uint64_t change, const char *etag,
                       const void *blob, size_t len)
{
    struct meta_tier_copy *cp = malloc(sizeof(*cp));
    char oetag[META_ETAG_MAX + 1];
    uint64_t now = 0;
    if (!cp)
        return -ENOMEM;
    int rc = 0;
    if (core__cm_meta_due(t, ino, cp, oetag, sizeof(oetag), &now) && now == change &&
        strcmp(cp->st.etag, etag) == 0)
        rc = meta_objmeta_put(t, ino, oetag, blob, len);
    free(cp);
    return rc;
}
