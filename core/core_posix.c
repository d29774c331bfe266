/* SPDX-License-Identifier: Apache-2.0
 * core_posix: the POSIX view used by NFS (the namespace sub-module,
 * core_ns_int.h): attributes, lookup, access, setattr, create/mkdir/symlink/
 * link, remove/rmdir, rename (with the key index update of a moved directory's
 * whole subtree, and the commit of the pending writes it moves to another
 * quota chain) and readdir with stable hash-ordered cookies.
 * Thread: any; changes run as writer ops (one txn each, group committed). */
#include "core_ns_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"

int core_getattr(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t gen,
                 struct core_attr *out)
{
    struct meta_txn *t = NULL;
    struct meta_inode r;
    struct core__pend_snap ps;
    int rc;
    /* pending state before the read txn, as core_read (see core_pend.c) */
    struct core__pend *pp = core__pend_get(c, ino, false);
    bool nowait = p && (p->flags & CORE_P_NOWAIT);
    memset(&ps, 0, sizeof(ps));
    for (int tries = 0;; tries++) {
        core__pend_snap_free(&ps);
        core__pend_snap(pp, 0, 0, !nowait, &ps);
        rc = meta_rtxn_begin(c->meta, &t);
        if (rc || tries == 100 || core__pend_snap_valid(pp, &ps))
            break;
        meta_rtxn_end(t);
        t = NULL;
        if (nowait) { /* a setattr holds the inode (or just committed one) */
            rc = -EWOULDBLOCK;
            break;
        }
    }
    core__pend_put(c, pp);
    if (rc == 0)
        rc = core__ino_get_p(t, p, ino, gen, &r);
    meta_rtxn_end(t);
    if (rc == 0) {
        core__attr_fill(&r, ino, out);
        if (ps.data && r.type == CORE_REG) {
            if (ps.size > out->size)
                out->size = ps.size;
            if (ps.mtime.tv_sec > out->mtime.tv_sec ||
                (ps.mtime.tv_sec == out->mtime.tv_sec && ps.mtime.tv_nsec > out->mtime.tv_nsec))
                out->mtime = out->ctime = ps.mtime;
            if (ps.change > out->change)
                out->change = ps.change;
            int64_t u = (int64_t)out->used + ps.udelta;
            out->used = u > 0 ? (uint64_t)u : 0;
        }
    }
    core__pend_snap_free(&ps);
    return rc;
}

int core_lookup(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen, struct core_attr *out)
{
    struct meta_txn *t;
    struct meta_inode d, r;
    struct meta_dirent de;
    uint64_t ino;
    int rc;

    if (namelen > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    if (namelen == 0)
        return -ENOENT;
    if (!(namelen <= 2 && memcmp(name, "..", namelen) == 0)) {
        rc = core__cm_dir(c, p, dir); /* a cache bucket's directory: imported when due */
        if (rc)
            return rc;
    }
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__dir_get_p(t, p, dir, CORE_MAY_X, &d);
    if (rc)
        goto out;
    if (namelen == 1 && name[0] == '.') {
        core__attr_fill(&d, dir, out);
        goto out;
    }
    if (namelen == 2 && name[0] == '.' && name[1] == '.') {
        ino = (d.flags & CORE_A_TROOT) ? dir : d.parent;
    } else {
        if (memchr(name, '/', namelen) || memchr(name, '\0', namelen)) {
            rc = -ENOENT;
            goto out;
        }
        rc = meta_dirent_get(t, dir, name, namelen, &de);
        if (rc)
            goto out;
        ino = de.ino;
    }
    rc = meta_inode_get(t, ino, &r);
    if (rc == -ENOENT)
        rc = SRV_ECORRUPT;
    if (rc == 0) {
        core__attr_fill(&r, ino, out);
        core__attr_pend(c, out);
    }
out:
    meta_rtxn_end(t);
    return rc;
}

int core_access(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t mask,
                uint32_t *granted)
{
    struct meta_txn *t;
    struct meta_inode r;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, p, ino, 0, &r);
    meta_rtxn_end(t);
    if (rc)
        return rc;
    *granted = 0;
    if ((mask & R_OK) && core__perm(p, &r, CORE_MAY_R) == 0)
        *granted |= R_OK;
    if ((mask & W_OK) && core__perm(p, &r, CORE_MAY_W) == 0 && !(p->flags & CORE_P_READONLY))
        *granted |= W_OK;
    if ((mask & X_OK) && core__perm(p, &r, CORE_MAY_X) == 0)
        *granted |= X_OK;
    return 0;
}

/* ---- setattr ---- */

struct setattr_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t ino;
    const struct core_setattr *sa;
    struct core_attr *pre, *post;
    const struct core__pend_batch *pend; /* pending writes committed first, or NULL */
    struct core__cut *cut;               /* boundary extent copy of a shrinking truncate */
};

static int setattr_fn(struct meta_txn *t, void *arg)
{
    struct setattr_op *a = arg;
    struct core *c = a->c;
    const struct core_principal *p = a->p;
    const struct core_setattr *sa = a->sa;
    bool super = p->flags & CORE_P_SUPER;
    struct meta_inode r;
    int rc = core__ino_get_p(t, p, a->ino, 0, &r);
    if (rc)
        return rc;
    if (a->pre) {
        core__attr_fill(&r, a->ino, a->pre);
        core__attr_pend(c, a->pre);
    }
    if (a->pend && r.type == CORE_REG) {
        rc = core__pend_apply_t(c, t, a->ino, &r, a->pend);
        if (rc)
            return rc;
    }
    if (sa->guard && (r.ctime_s != sa->guard_ctime.tv_sec ||
                      r.ctime_ns != (uint32_t)sa->guard_ctime.tv_nsec))
        return SRV_EPRECOND;
    bool owner = p->uid == r.uid;
    if (sa->mask & CORE_SET_UID) {
        if (sa->uid != r.uid && !super)
            return -EPERM;
    }
    if (sa->mask & CORE_SET_GID) {
        if (sa->gid != r.gid && !super && !(owner && core__in_group(p, sa->gid)))
            return -EPERM;
    }
    if (sa->mask & CORE_SET_MODE) {
        if (!owner && !super)
            return -EPERM;
    }
    if (sa->mask & (CORE_SET_ATIME | CORE_SET_MTIME)) {
        if (!owner && !super)
            return -EPERM;
    }
    if (sa->mask & (CORE_SET_ATIME_NOW | CORE_SET_MTIME_NOW)) {
        if (!owner && !super && core__perm(p, &r, CORE_MAY_W) != 0)
            return -EACCES;
    }
    if (sa->mask & CORE_SET_SIZE) {
        if (r.type == CORE_DIR)
            return -EISDIR;
        if (r.type != CORE_REG)
            return -EINVAL;
        if (!owner && core__perm(p, &r, CORE_MAY_W) != 0)
            return -EACCES;
        if (sa->size > CORE_FILE_MAX)
            return -EFBIG;
    }

    bool chown_done = false;
    if ((sa->mask & CORE_SET_UID) && sa->uid != r.uid) {
        r.uid = sa->uid;
        chown_done = true;
    }
    if ((sa->mask & CORE_SET_GID) && sa->gid != r.gid) {
        r.gid = sa->gid;
        chown_done = true;
    }
    if (chown_done && !super && r.type == CORE_REG)
        r.mode &= ~(uint32_t)(S_ISUID | S_ISGID);
    if (sa->mask & CORE_SET_MODE) {
        r.mode = sa->mode & 07777;
        if (!super && !core__in_group(p, r.gid))
            r.mode &= ~(uint32_t)S_ISGID;
    }
    struct timespec now;
    core__now(&now);
    if (sa->mask & CORE_SET_ATIME_NOW) {
        r.atime_s = now.tv_sec;
        r.atime_ns = (uint32_t)now.tv_nsec;
    } else if (sa->mask & CORE_SET_ATIME) {
        r.atime_s = sa->atime.tv_sec;
        r.atime_ns = (uint32_t)sa->atime.tv_nsec;
    }
    if (sa->mask & CORE_SET_MTIME_NOW) {
        r.mtime_s = now.tv_sec;
        r.mtime_ns = (uint32_t)now.tv_nsec;
    } else if (sa->mask & CORE_SET_MTIME) {
        r.mtime_s = sa->mtime.tv_sec;
        r.mtime_ns = (uint32_t)sa->mtime.tv_nsec;
    }
    if ((sa->mask & CORE_SET_SIZE) && sa->size != r.size) {
        /* in a versioned bucket a sealed version is kept first (a locked one refuses) */
        rc = core__ver_open_t(c, t, a->ino, &r);
        if (rc)
            return rc;
        rc = core__truncate_t(c, t, a->ino, &r, sa->size, a->cut);
        if (rc)
            return rc;
        if (!(sa->mask & (CORE_SET_MTIME | CORE_SET_MTIME_NOW))) {
            r.mtime_s = now.tv_sec;
            r.mtime_ns = (uint32_t)now.tv_nsec;
        }
    }
    r.ctime_s = now.tv_sec;
    r.ctime_ns = (uint32_t)now.tv_nsec;
    r.change++;
    rc = meta_inode_put(t, a->ino, &r);
    if (rc == 0 && a->post)
        core__attr_fill(&r, a->ino, a->post);
    return rc;
}

int core_setattr(struct core *c, const struct core_principal *p, uint64_t ino,
                 const struct core_setattr *sa, struct core_attr *pre, struct core_attr *post)
{
    struct setattr_op a = {c, p, ino, sa, pre, post, NULL, NULL};
    struct core__cut cut = {0};
    struct core__pend_batch b;
    struct core__pend *pd = NULL;
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    int ro = core__cm_ro_ino(c, p, ino);
    if (ro)
        return ro;
    if (sa->mask & CORE_SET_SIZE) {
        int rc = core__tier_local(c, p, ino); /* an evicted file comes back first */
        if (rc)
            return rc;
    }
    if (sa->mask & (CORE_SET_SIZE | CORE_SET_MTIME | CORE_SET_MTIME_NOW)) {
        /* size and mtime are also kept by pending writes: commit those in this
         * op, and let no write become pending until it is done */
        int rc = core__pend_excl_begin(c, ino, &b, &pd);
        if (rc)
            return rc;
        a.pend = &b;
        /* a shrinking truncate frees the space past the new end: the extent
         * holding it is copied cut (no pending write can move it meanwhile) */
        if ((sa->mask & CORE_SET_SIZE) && core__truncate_plan(c, ino, sa->size, &b, &cut) == 0 &&
            cut.made)
            a.cut = &cut;
    }
    int rc = meta_submit(c->meta, setattr_fn, &a, 0);
    if (cut.made && !(rc == 0 && cut.used))
        store_unreserve(c->store, &cut.cut.e);
    if (pd)
        core__pend_excl_end(c, pd, &b, rc, sa->mask & CORE_SET_SIZE, sa->size);
    return rc;
}

/* ---- write: the version step ---- */

struct open_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t ino;
};

static int open_fn(struct meta_txn *t, void *arg)
{
    struct open_op *a = arg;
    struct meta_inode r;
    int rc = core__ino_get_p(t, a->p, a->ino, 0, &r);
    if (rc)
        return rc;
    uint16_t flags = r.flags;
    rc = core__ver_open_t(a->c, t, a->ino, &r);
    if (rc == 0 && r.flags != flags)
        rc = meta_inode_put(t, a->ino, &r);
    return rc;
}

int core_write(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
               const void *buf, size_t len, enum core_stable stable, enum core_stable *committed,
               struct core_attr *pre, struct core_attr *post)
{
    for (int i = 0;; i++) {
        int rc = core__write(c, p, ino, off, buf, len, stable, committed, pre, post);
        if (rc != CORE__EVGUARD)
            return rc;
        if (i == 8)
            return -EIO; /* sealed again each time: cannot happen unless settle_ms is 0 */
        /* a sealed version (or one that may be locked) first: kept as it is, or refused */
        struct open_op a = {c, p, ino};
        rc = meta_submit(c->meta, open_fn, &a, 0);
        if (rc)
            return rc;
    }
}

/* ---- create / mkdir / symlink ---- */

struct create_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t dir;
    const char *name;
    size_t len;
    uint32_t mode;
    enum core_createhow how;
    uint64_t verf;
    enum core_ftype type;
    const char *target;
    size_t tlen;
    struct core_attr *out;
};

static int create_fn(struct meta_txn *t, void *arg)
{
    struct create_op *a = arg;
    struct core *c = a->c;
    struct meta_inode r;
    struct meta_dirent de;
    uint64_t ino;
    int rc;

    if (a->type == CORE_REG && a->len <= CORE_NAME_MAX) {
        rc = meta_dirent_get(t, a->dir, a->name, a->len, &de);
        if (rc == 0) {
            struct meta_inode d;
            rc = core__ino_get_p(t, a->p, a->dir, 0, &d);
            if (rc)
                return rc;
            rc = core__perm(a->p, &d, CORE_MAY_X);
            if (rc)
                return rc;
            rc = meta_inode_get(t, de.ino, &r);
            if (rc)
                return rc;
            if (a->how == CORE_CREATE_GUARDED)
                return -EEXIST;
            if (a->how == CORE_CREATE_EXCLUSIVE) {
                if (r.type != CORE_REG || r.verf != a->verf || a->verf == 0)
                    return -EEXIST;
            } else if (r.type == CORE_DIR) {
                return -EISDIR;
            }
            if (a->p->flags & CORE_P_READONLY)
                return -EROFS;
            if (a->out)
                core__attr_fill(&r, de.ino, a->out);
            return 0;
        }
        if (rc != -ENOENT)
            return rc;
    }
    uint32_t mode = a->mode;
    rc = core__node_create(c, t, a->p, a->dir, a->name, a->len, a->type, mode, 0, a->target,
                           a->tlen, &ino, &r);
    if (rc)
        return rc;
    if (a->type == CORE_REG) {
        uint16_t flags = r.flags;
        rc = core__ver_created_t(c, t, a->dir, a->name, a->len, ino, &r);
        if (rc)
            return rc;
        if (a->how == CORE_CREATE_EXCLUSIVE)
            r.verf = a->verf;
        if (r.flags != flags || a->how == CORE_CREATE_EXCLUSIVE) {
            rc = meta_inode_put(t, ino, &r);
            if (rc)
                return rc;
        }
    }
    if (a->out)
        core__attr_fill(&r, ino, a->out);
    return 0;
}

int core_create(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen, uint32_t mode, enum core_createhow how, uint64_t verf,
                struct core_attr *out)
{
    struct create_op a = {c, p, dir, name, namelen, mode, how, verf, CORE_REG, NULL, 0, out};
    return meta_submit(c->meta, create_fn, &a, 0);
}

int core_mkdir(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
               size_t namelen, uint32_t mode, struct core_attr *out)
{
    struct create_op a = {c, p, dir, name, namelen, mode, 0, 0, CORE_DIR, NULL, 0, out};
    return meta_submit(c->meta, create_fn, &a, 0);
}

int core_symlink(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                 size_t namelen, const char *target, size_t targetlen, struct core_attr *out)
{
    struct create_op a = {c, p, dir, name, namelen, 0777, 0, 0, CORE_LNK, target, targetlen, out};
    if (targetlen == 0 || targetlen > CORE_SYMLINK_MAX)
        return targetlen ? -ENAMETOOLONG : -EINVAL;
    if (memchr(target, '\0', targetlen))
        return -EINVAL;
    return meta_submit(c->meta, create_fn, &a, 0);
}

int core_readlink(struct core *c, const struct core_principal *p, uint64_t ino, char *buf,
                  size_t bufsize, size_t *len)
{
    struct meta_txn *t;
    struct meta_inode r;
    const void *vd;
    size_t vl;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, p, ino, 0, &r);
    if (rc)
        goto out;
    if (r.type != CORE_LNK) {
        rc = -EINVAL;
        goto out;
    }
    rc = meta_inline_get(t, ino, &vd, &vl);
    if (rc) {
        rc = rc == -ENOENT ? SRV_ECORRUPT : rc;
        goto out;
    }
    if (vl > bufsize) {
        rc = -ERANGE;
        goto out;
    }
    memcpy(buf, vd, vl);
    *len = vl;
out:
    meta_rtxn_end(t);
    return rc;
}

/* ---- link ---- */

struct link_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t ino, dir;
    const char *name;
    size_t len;
    struct core_attr *out;
};

static int link_fn(struct meta_txn *t, void *arg)
{
    struct link_op *a = arg;
    struct meta_inode r, d;
    struct meta_dirent de;
    char key[CORE_KEY_MAX + 2];
    size_t klen;
    int rc = core__ino_get_p(t, a->p, a->ino, 0, &r);
    if (rc)
        return rc;
    rc = core__dir_get_p(t, a->p, a->dir, 0, &d);
    if (rc)
        return rc;
    if (r.type == CORE_DIR)
        return -EPERM;
    if (r.nlink == 0)
        return SRV_ESTALE;
    rc = core__name_check(a->name, a->len);
    if (rc)
        return rc;
    if ((d.flags & CORE_A_TROOT) || d.bucket != r.bucket)
        return -EXDEV;
    struct meta_bucketcfg cfg;
    rc = core__ver_cfg(a->c, t, r.bucket, &cfg);
    if (rc)
        return rc;
    if (cfg.versioning != META_VERS_NONE)
        return -EXDEV; /* a version belongs to one key: as if across file systems */
    rc = core__perm(a->p, &d, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    if (r.nlink >= 65000)
        return -EMLINK;
    rc = meta_dirent_get(t, a->dir, a->name, a->len, &de);
    if (rc == 0)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    rc = core__key_of(t, a->dir, a->name, a->len, false, key, &klen);
    if (rc)
        return rc;
    rc = meta_dirent_add(t, a->dir, a->name, a->len, a->ino, r.type);
    if (rc)
        return rc;
    rc = meta_keyidx_put(t, r.bucket, key, klen, a->ino, r.type);
    if (rc)
        return rc;
    d.nchild++;
    core__touch(&d, true, true);
    rc = meta_inode_put(t, a->dir, &d);
    if (rc)
        return rc;
    r.nlink++;
    core__touch(&r, false, true);
    rc = meta_inode_put(t, a->ino, &r);
    if (rc == 0 && a->out)
        core__attr_fill(&r, a->ino, a->out);
    return rc;
}

int core_link(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t dir,
              const char *name, size_t namelen, struct core_attr *out)
{
    struct link_op a = {c, p, ino, dir, name, namelen, out};
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    int ro = core__cm_ro_ino(c, p, dir);
    if (ro)
        return ro;
    return meta_submit(c->meta, link_fn, &a, 0);
}

/* ---- remove / rmdir ---- */

struct unlink_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t dir;
    const char *name;
    size_t len;
    bool isdir;
};

static int unlink_fn(struct meta_txn *t, void *arg)
{
    struct unlink_op *a = arg;
    return core__node_unlink(a->c, t, a->p, a->dir, a->name, a->len, a->isdir,
                             CORE__UNL_VERSIONED | CORE__UNL_NFS, NULL);
}

/* Commit the pending writes of @p name in @p dir and recall it if evicted (a file a
 * versioned bucket's op keeps as a version must have none and be whole: it answered
 * -EAGAIN). @return 0, or the flush's or the recall's error. */
static int flush_name(struct core *c, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len)
{
    struct meta_txn *t;
    struct meta_dirent de;
    if (len > CORE_NAME_MAX)
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_dirent_get(t, dir, name, len, &de);
    meta_rtxn_end(t);
    if (rc)
        return rc == -ENOENT ? 0 : rc;
    if (de.type != CORE_REG)
        return 0;
    rc = core__pend_flush_ino(c, de.ino);
    return rc ? rc : core__tier_local(c, p, de.ino);
}

int core_remove(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen)
{
    struct unlink_op a = {c, p, dir, name, namelen, false};
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    if (namelen == 0)
        return -ENOENT;
    int rc = meta_submit(c->meta, unlink_fn, &a, 0);
    for (int i = 0; i < 8 && rc == -EAGAIN; i++) {
        rc = flush_name(c, p, dir, name, namelen);
        if (rc == 0)
            rc = meta_submit(c->meta, unlink_fn, &a, 0);
    }
    core__pend_reap(c);
    return rc == -EAGAIN ? -EIO : rc;
}

int core_rmdir(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
               size_t namelen)
{
    struct unlink_op a = {c, p, dir, name, namelen, true};
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    if (namelen == 1 && name[0] == '.')
        return -EINVAL;
    if (namelen == 2 && name[0] == '.' && name[1] == '.')
        return -ENOTEMPTY;
    if (namelen == 0)
        return -ENOENT;
    return meta_submit(c->meta, unlink_fn, &a, 0);
}

/* ---- rename ---- */

struct rename_op {
    struct core *c;
    const struct core_principal *p;
    uint64_t fdir;
    const char *fname;
    size_t flen;
    uint64_t tdir;
    const char *tname;
    size_t tlen;
    const struct core__mv *mv; /* quota mark (core__quota_rename_begin) */
};

struct kmove {
    char *key;
    size_t klen;
    uint64_t ino;
    uint32_t type;
};

/* What subtree_rekey collects before it changes the index. */
struct kmove_list {
    struct kmove *mv;
    size_t n, cap;
    size_t flen, tlen;
};

static int kmove_collect(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                         size_t *skip)
{
    struct kmove_list *l = arg;
    (void)skip;
    if (klen - l->flen + l->tlen > CORE_KEY_MAX)
        return -ENAMETOOLONG;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct kmove *nm = realloc(l->mv, cap * sizeof(*nm));
        if (!nm)
            return -ENOMEM;
        l->mv = nm;
        l->cap = cap;
    }
    struct kmove *m = &l->mv[l->n];
    m->key = malloc(klen ? klen : 1);
    if (!m->key)
        return -ENOMEM;
    memcpy(m->key, key, klen);
    m->klen = klen;
    m->ino = kv->ino;
    m->type = kv->type;
    l->n++;
    return 0;
}

/* Move every key index entry under @p from (a "dir/" key) to @p to; in a versioned bucket
 * (@p cfg) each file's version moves with it (core__ver_move_t). */
static int subtree_rekey(struct core *c, struct meta_txn *t, const struct core_principal *p,
                         const struct meta_bucketcfg *cfg, uint64_t bucket, const char *from,
                         size_t flen, const char *to, size_t tlen, uint64_t *bytes,
                         uint64_t *inodes)
{
    char kb[CORE_KEY_MAX + 1];
    struct kmove_list l = {.flen = flen, .tlen = tlen};
    int rc = meta_keyidx_scan(t, bucket, from, flen, NULL, 0, kmove_collect, &l);
    struct kmove *mv = l.mv;
    size_t n = l.n;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = meta_keyidx_del(t, bucket, mv[i].key, mv[i].klen);
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t nl = tlen + mv[i].klen - flen;
        memcpy(kb, to, tlen);
        memcpy(kb + tlen, mv[i].key + flen, mv[i].klen - flen);
        rc = meta_keyidx_put(t, bucket, kb, nl, mv[i].ino, mv[i].type);
        if (rc == 0 && mv[i].type == CORE_DIR)
            rc = meta_dirpath_put(t, mv[i].ino, kb, nl);
        if (rc == 0 && mv[i].klen > flen) {
            struct meta_inode r;
            if (meta_inode_get(t, mv[i].ino, &r) == 0) {
                (*inodes)++;
                if (r.type != CORE_DIR)
                    *bytes += r.used;
                if (cfg->versioning != META_VERS_NONE && r.type == CORE_REG) {
                    rc = core__ver_move_t(c, t, p, cfg, bucket, mv[i].key, mv[i].klen, kb, nl,
                                          mv[i].ino, &r);
                    if (rc == 0)
                        rc = meta_inode_put(t, mv[i].ino, &r);
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        free(mv[i].key);
    free(mv);
    return rc;
}

/* A rename that changes the quota chain of what it moves (core__quota_rename_begin
 * marked its bucket, @p mv->on) first commits the pending (UNSTABLE) writes it
 * moves, so its op moves their bytes, and checks their limits, as committed usage:
 * a file's own; for a directory, every pending file of its bucket.
 * @return 0, or the flush's error (-EIO, -ENOSPC). */
static int rename_flush(struct core *c, const struct core__mv *mv, uint64_t fromdir,
                        const char *fromname, size_t fromlen)
{
    struct meta_txn *t;
    struct meta_dirent de;
    if (!mv->on || !core__pend_any(c))
        return 0;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_dirent_get(t, fromdir, fromname, fromlen, &de);
    meta_rtxn_end(t);
    if (rc)
        return rc == -ENOENT ? 0 : rc; /* the rename itself answers */
    if (de.type == CORE_REG)
        return core__pend_flush_ino(c, de.ino);
    if (de.type != CORE_DIR)
        return 0;
    /* a directory: whatever of its subtree is pending, found by its bucket */
    uint64_t *v;
    size_t n = core__pend_bucket_inos(c, mv->tenant, mv->bucket, &v);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = core__pend_flush_ino(c, v[i]);
    free(v);
    return rc;
}

/* Inside the rename's op, before it changes anything: @p ino (a directory when
 * @p isdir) is what it moves, to another parent when @p moves.
 * @return 0, or -EAGAIN when it would move pending writes or was not marked (the
 * entry changed since core__quota_rename_begin looked, or the first directory
 * quota appeared: end and begin again). */
static int rename_check(struct core *c, const struct core__mv *mv, uint64_t ino, bool isdir,
                        bool moves)
{
    if (!moves)
        return 0;
    if (!mv->on)
        return core__dirquotas(c) ? -EAGAIN : 0; /* begin saw another entry or none */
    if (!core__pend_any(c))
        return 0;
    if (isdir) {
        /* nothing of the bucket may be pending (what rename_flush committed stays
         * so: the mark holds new pending writes back) */
        uint64_t *v;
        size_t n = core__pend_bucket_inos(c, mv->tenant, mv->bucket, &v);
        free(v);
        return n ? -EAGAIN : 0;
    }
    return core__pend_has_data(c, ino) ? -EAGAIN : 0;
}

static int rename_fn(struct meta_txn *t, void *arg)
{
    struct rename_op *a = arg;
    struct core *c = a->c;
    const struct core_principal *p = a->p;
    bool super = p->flags & CORE_P_SUPER;
    struct meta_inode fd, td, sr, dr;
    struct meta_dirent sde, dde;
    char okey[CORE_KEY_MAX + 2], nkey[CORE_KEY_MAX + 2];
    size_t oklen = 0, nklen = 0;
    bool ftroot, ttroot, isdir, dst_exists;
    int rc;

    rc = core__ino_get_p(t, p, a->fdir, 0, &fd);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, p, a->tdir, 0, &td);
    if (rc)
        return rc;
    if (fd.type != CORE_DIR || td.type != CORE_DIR)
        return -ENOTDIR;
    if ((a->flen == 1 && a->fname[0] == '.') ||
        (a->flen == 2 && a->fname[0] == '.' && a->fname[1] == '.'))
        return -EINVAL;
    if (a->flen > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    rc = core__perm(p, &fd, CORE_MAY_W | CORE_MAY_X);
    if (rc == 0)
        rc = core__perm(p, &td, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    rc = meta_dirent_get(t, a->fdir, a->fname, a->flen, &sde);
    if (rc)
        return rc;
    rc = meta_inode_get(t, sde.ino, &sr);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    isdir = sr.type == CORE_DIR;
    ftroot = fd.flags & CORE_A_TROOT;
    ttroot = td.flags & CORE_A_TROOT;
    if (ftroot != ttroot)
        return -EXDEV;
    if (!ftroot && fd.bucket != td.bucket)
        return -EXDEV;
    rc = ttroot ? core__bucket_name_check(a->tname, a->tlen)
                : core__name_check(a->tname, a->tlen);
    if (rc)
        return rc;
    if ((fd.mode & S_ISVTX) && !super && p->uid != fd.uid && p->uid != sr.uid)
        return -EPERM;
    if (a->fdir == a->tdir && a->flen == a->tlen && memcmp(a->fname, a->tname, a->flen) == 0)
        return 0;
    if (isdir && a->fdir != a->tdir) {
        /* refuse moving a directory under itself */
        uint64_t cur = a->tdir;
        for (int depth = 0; cur && depth < 4096; depth++) {
            struct meta_inode r;
            if (cur == sde.ino)
                return -EINVAL;
            if (meta_inode_get(t, cur, &r) != 0 || (r.flags & (CORE_A_BUCKET | CORE_A_TROOT)))
                break;
            cur = r.parent;
        }
    }
    rc = rename_check(c, a->mv, sde.ino, isdir, sr.parent != a->tdir);
    if (rc)
        return rc;
    struct meta_bucketcfg vcfg;
    memset(&vcfg, 0, sizeof(vcfg));
    if (!ftroot && (rc = core__ver_cfg(c, t, fd.bucket, &vcfg)) != 0)
        return rc;
    bool versioned = vcfg.versioning != META_VERS_NONE;
    if (versioned && (rc = core__ver_check_t(t, sde.ino, &sr)) != 0)
        return rc; /* a locked version stays at its key */
    rc = meta_dirent_get(t, a->tdir, a->tname, a->tlen, &dde);
    dst_exists = rc == 0;
    if (rc && rc != -ENOENT)
        return rc;
    if (!ftroot) {
        rc = core__key_of(t, a->fdir, a->fname, a->flen, isdir, okey, &oklen);
        if (rc == 0)
            rc = core__key_of(t, a->tdir, a->tname, a->tlen, isdir, nkey, &nklen);
        if (rc)
            return rc;
    }
    if (dst_exists) {
        if (dde.ino == sde.ino)
            return 0; /* two links of one file: POSIX does nothing */
        rc = meta_inode_get(t, dde.ino, &dr);
        if (rc)
            return rc == -ENOENT ? SRV_ECORRUPT : rc;
        if (isdir && dr.type != CORE_DIR)
            return -ENOTDIR;
        if (!isdir && dr.type == CORE_DIR)
            return -EISDIR;
        if (dr.type == CORE_DIR && dr.nchild > 0)
            return -ENOTEMPTY;
        if ((td.mode & S_ISVTX) && !super && p->uid != td.uid && p->uid != dr.uid)
            return -EPERM;
        if (versioned && dr.type == CORE_REG) {
            /* the replaced file stays as a noncurrent version (a locked one refuses) */
            rc = core__ver_check_t(t, dde.ino, &dr);
            if (rc == 0)
                rc = core__ver_retire_t(c, t, &vcfg, td.bucket, nkey, nklen, a->tdir, &td, a->tname,
                                        a->tlen, dde.ino, &dr);
        } else {
            rc = core__entry_remove(c, t, a->tdir, &td, a->tname, a->tlen, dde.ino, &dr);
        }
        if (rc)
            return rc;
        if (a->fdir == a->tdir)
            fd = td;
    }
    /* move the entry */
    rc = meta_dirent_del(t, a->fdir, a->fname, a->flen);
    if (rc)
        return rc;
    fd.nchild--;
    if (isdir)
        fd.nlink--;
    core__touch(&fd, true, true);
    rc = meta_inode_put(t, a->fdir, &fd);
    if (rc)
        return rc;
    if (a->tdir == a->fdir)
        td = fd;
    else {
        rc = meta_inode_get(t, a->tdir, &td);
        if (rc)
            return rc;
    }
    rc = meta_dirent_add(t, a->tdir, a->tname, a->tlen, sde.ino, sr.type);
    if (rc)
        return rc;
    td.nchild++;
    if (isdir)
        td.nlink++;
    core__touch(&td, true, true);
    rc = meta_inode_put(t, a->tdir, &td);
    if (rc)
        return rc;
    if (!ftroot) {
        uint64_t bytes = 0, inodes = 1;
        if (isdir) {
            rc =
                subtree_rekey(c, t, p, &vcfg, sr.bucket, okey, oklen, nkey, nklen, &bytes, &inodes);
        } else {
            rc = meta_keyidx_del(t, sr.bucket, okey, oklen);
            if (rc == 0 || rc == -ENOENT)
                rc = meta_keyidx_put(t, sr.bucket, nkey, nklen, sde.ino, sr.type);
            bytes = sr.used;
        }
        if (rc)
            return rc;
        if (a->fdir != a->tdir) {
            rc = core__usage_move(c, t, p->tenant, sr.bucket, a->fdir, a->tdir,
                                  (int64_t)bytes, (int64_t)inodes);
            if (rc)
                return rc;
        }
    }
    rc = meta_inode_get(t, sde.ino, &sr);
    if (rc)
        return rc;
    if (versioned && !isdir) {
        rc = core__ver_move_t(c, t, p, &vcfg, sr.bucket, okey, oklen, nkey, nklen, sde.ino, &sr);
        if (rc)
            return rc;
    }
    sr.parent = a->tdir;
    if (isdir)
        sr.flags &= (uint16_t)~CORE_A_IMPLICIT;
    core__touch(&sr, false, true);
    return meta_inode_put(t, sde.ino, &sr);
}

int core_rename(struct core *c, const struct core_principal *p, uint64_t fromdir,
                const char *fromname, size_t fromlen, uint64_t todir, const char *toname,
                size_t tolen)
{
    struct core__mv mv;
    struct rename_op a = {c, p, fromdir, fromname, fromlen, todir, toname, tolen, &mv};
    int rc = -EAGAIN;
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    if ((rc = core__cm_ro_ino(c, p, fromdir)) != 0)
        return rc;
    rc = -EAGAIN;
    if (fromlen == 0)
        return -ENOENT;
    /* pending writes moving to other directories: committed first, and held
     * back until the move committed (quotas; -EAGAIN: the entry changed) */
    for (int i = 0; i < 8 && rc == -EAGAIN; i++) {
        rc = core__quota_rename_begin(c, p->tenant, fromdir, fromname, fromlen, todir, &mv);
        if (rc == 0)
            rc = rename_flush(c, &mv, fromdir, fromname, fromlen);
        if (rc == 0 && i > 0) /* a versioned bucket keeps the file it replaces as it is */
            rc = flush_name(c, p, todir, toname, tolen);
        if (rc == 0)
            rc = meta_submit(c->meta, rename_fn, &a, 0);
        core__quota_rename_end(c, &mv);
    }
    if (rc == -EAGAIN)
        rc = -EIO;
    core__pend_reap(c);
    return rc;
}

/* ---- readdir ---- */

/* The entries after "." and "..", in cookie order. */
struct rd_scan {
    struct core *c;
    struct meta_txn *t;
    bool want_attr;
    core_dirent_cb cb;
    void *arg;
};

static int rd_ent(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct rd_scan *s = arg;
    struct core_dirent e;
    struct core_attr attr;
    struct meta_inode r;
    memset(&e, 0, sizeof(e));
    e.ino = ino;
    e.cookie = cookie;
    e.name = name;
    e.namelen = len;
    if (s->want_attr) {
        if (meta_inode_get(s->t, ino, &r) != 0)
            return 0;
        core__attr_fill(&r, ino, &attr);
        core__attr_pend(s->c, &attr);
        e.attr = &attr;
    }
    return s->cb(s->arg, &e) ? 1 : 0;
}

_Static_assert(CORE_COOKIE_MIN == META_COOKIE_BASE && CORE_COOKIE_MAX == META_COOKIE_MAX,
               "core.h states the stored cookie range");

int core_readdir(struct core *c, const struct core_principal *p, uint64_t dir, uint64_t cookie,
                 bool want_attr, core_dirent_cb cb, void *arg, bool *eof, uint64_t *verf)
{
    struct meta_txn *t;
    struct meta_inode d, r;
    struct core_attr attr;
    struct core_dirent e;
    int rc;

    *eof = false;
    if (cookie > 2 && cookie < META_COOKIE_BASE)
        return SRV_EBADCOOKIE;
    if (cookie == 0) {
        rc = core__cm_dir(c, p, dir); /* a cache bucket's directory: imported when due */
        if (rc)
            return rc;
    }
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__dir_get_p(t, p, dir, CORE_MAY_R, &d);
    if (rc)
        goto out;
    if (verf)
        *verf = ((uint64_t)d.gen << 32) ^ dir;
    if (cookie == 0) {
        core__pf_note(c, t, &d, dir); /* directory prefetch, in the background */
        memset(&e, 0, sizeof(e));
        e.ino = dir;
        e.cookie = 1;
        e.name = ".";
        e.namelen = 1;
        if (want_attr) {
            core__attr_fill(&d, dir, &attr);
            e.attr = &attr;
        }
        if (cb(arg, &e))
            goto out;
    }
    if (cookie <= 1) {
        uint64_t pino = (d.flags & CORE_A_TROOT) ? dir : d.parent;
        memset(&e, 0, sizeof(e));
        e.ino = pino;
        e.cookie = 2;
        e.name = "..";
        e.namelen = 2;
        if (want_attr) {
            if (meta_inode_get(t, pino, &r) == 0)
                core__attr_fill(&r, pino, &attr);
            else
                core__attr_fill(&d, dir, &attr);
            e.attr = &attr;
        }
        if (cb(arg, &e))
            goto out;
    }
    struct rd_scan rs = {c, t, want_attr, cb, arg};
    rc = meta_dirent_scan(t, dir, cookie, rd_ent, &rs);
    if (rc == 1) {
        rc = 0;
        goto out;
    }
    if (rc)
        goto out;
    *eof = true;
out:
    meta_rtxn_end(t);
    return rc;
}
