/* SPDX-License-Identifier: Apache-2.0
 * core_ns: tree changes shared by the NFS and S3 views: creating a node,
 * removing an entry, releasing an inode whose last link went away (kept as an
 * orphan while core_ref holders remain), and dropping a file's data. Each
 * keeps dirents, the key index, directory paths and usage consistent in the
 * caller's txn.
 * Thread: inside writer ops only. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "srv_err.h"
#include "srv_log.h"

static uint32_t new_gen(void)
{
    uint32_t g = 0;
    if (getrandom(&g, sizeof(g), 0) != sizeof(g))
        g = (uint32_t)time(NULL);
    return g ? g : 1;
}

int core__node_create(struct core *c, struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, enum core_ftype type, uint32_t mode,
                      uint32_t aflags, const char *target, size_t tlen, uint64_t *ino,
                      struct meta_inode *rec)
{
    struct meta_inode d;
    struct meta_dirent de;
    char key[CORE_KEY_MAX + 2];
    size_t klen = 0;
    bool troot;
    int rc;

    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    rc = core__dir_get_p(t, p, dir, 0, &d);
    if (rc)
        return rc;
    if (d.nlink == 0)
        return -ENOENT; /* directory being removed */
    troot = d.flags & CORE_A_TROOT;
    rc = troot && type == CORE_DIR ? core__bucket_name_check(name, len)
                                   : core__name_check(name, len);
    if (rc)
        return rc;
    rc = core__perm(p, &d, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    if (troot && type != CORE_DIR)
        return -EACCES;
    rc = meta_dirent_get(t, dir, name, len, &de);
    if (rc == 0)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    if (!troot) {
        rc = core__key_of(t, dir, name, len, type == CORE_DIR, key, &klen);
        if (rc)
            return rc;
    }
    rc = core__usage_charge(c, t, p->tenant, dir, 0, 1, true);
    if (rc)
        return rc;
    rc = meta_inode_alloc(t, ino);
    if (rc)
        return rc;

    struct timespec now;
    core__now(&now);
    memset(rec, 0, sizeof(*rec));
    rec->rec_ver = META_INODE_REC_VER;
    rec->type = (uint8_t)type;
    rec->flags = (uint16_t)(aflags & 0xff);
    if (troot)
        rec->flags |= CORE_A_BUCKET;
    if (type == CORE_REG)
        rec->flags |= META_I_INLINE;
    rec->mode = mode & 07777;
    rec->nlink = type == CORE_DIR ? 2 : 1;
    rec->uid = p->uid;
    rec->gid = (d.mode & S_ISGID) ? d.gid : p->gid;
    if (type == CORE_DIR && (d.mode & S_ISGID))
        rec->mode |= S_ISGID;
    rec->gen = new_gen();
    rec->tenant = p->tenant;
    rec->parent = dir;
    rec->bucket = troot ? *ino : d.bucket;
    rec->atime_s = rec->mtime_s = rec->ctime_s = rec->btime_s = now.tv_sec;
    rec->atime_ns = rec->mtime_ns = rec->ctime_ns = rec->btime_ns = (uint32_t)now.tv_nsec;
    rec->change = 1;
    if (type == CORE_LNK) {
        rc = meta_inline_put(t, *ino, target, tlen);
        if (rc)
            return rc;
        rec->size = tlen;
    }
    rc = meta_inode_put(t, *ino, rec);
    if (rc)
        return rc;
    rc = meta_dirent_add(t, dir, name, len, *ino, type);
    if (rc)
        return rc;
    d.nchild++;
    if (type == CORE_DIR)
        d.nlink++;
    core__touch(&d, true, true);
    rc = meta_inode_put(t, dir, &d);
    if (rc)
        return rc;
    if (!troot) {
        rc = meta_keyidx_put(t, rec->bucket, key, klen, *ino, type);
        if (rc)
            return rc;
    }
    if (type == CORE_DIR) {
        rc = meta_dirpath_put(t, *ino, troot ? "" : key, troot ? 0 : klen);
        if (rc)
            return rc;
    }
    if (troot)
        rc = core__usage_create(c, t, p->tenant, *ino);
    return rc;
}

int core__extent_free(struct core *c, struct meta_txn *t, const struct store_extent *e)
{
    core__cache_invalidate(c, e);
    int rc = meta_bcrc_del(t, e->dev, e->off);
    if (rc && rc != -ENOENT)
        return rc;
    return meta_txn_note(t, CORE_NOTE_FREE, e, sizeof(*e));
}

int core__extent_use(struct core *c, struct meta_txn *t, const struct store_extent *e,
                     const uint32_t *bcrc, uint32_t nb)
{
    (void)c;
    int rc = meta_txn_note(t, CORE_NOTE_USE, e, sizeof(*e));
    if (rc == 0 && bcrc && nb)
        rc = meta_bcrc_put(t, e->dev, e->off, bcrc, nb);
    return rc;
}

uint32_t core__bcrc_compute(const void *buf, uint32_t len, uint32_t *out)
{
    uint32_t nb = 0;
    for (uint32_t o = 0; o < len && nb < META_BCRC_MAX; o += META_BCRC_BLOCK) {
        uint32_t n = len - o < META_BCRC_BLOCK ? len - o : META_BCRC_BLOCK;
        out[nb++] = store_crc32c(0, (const char *)buf + o, n);
    }
    return nb;
}

uint32_t core__bcrc_get(struct meta_txn *t, const struct store_extent *e, uint32_t *out)
{
    return meta_bcrc_get(t, e->dev, e->off, e->len, out);
}

/* Up to DROP_STEP extents of a file, collected to be freed. */
#define DROP_STEP 64
struct drop_list {
    uint64_t foff[DROP_STEP];
    struct store_extent e[DROP_STEP];
    size_t n;
};

static int drop_collect(void *arg, uint64_t foff, const struct meta_extent *x)
{
    struct drop_list *l = arg;
    l->foff[l->n] = foff;
    l->e[l->n] = (struct store_extent){x->dev, x->len, x->off, x->crc};
    return ++l->n == DROP_STEP ? 1 : 0;
}

int core__data_drop(struct core *c, struct meta_txn *t, uint64_t ino)
{
    struct drop_list l;
    int rc;
    core__pend_dead(c, ino); /* pending writes go once this op committed */
    rc = meta_inline_del(t, ino);
    if (rc && rc != -ENOENT)
        return rc;
    for (;;) {
        l.n = 0;
        rc = meta_extent_scan(t, ino, 0, UINT64_MAX, drop_collect, &l);
        if (rc < 0)
            return rc;
        bool more = rc == 1;
        for (size_t i = 0; i < l.n; i++) {
            rc = core__extent_free(c, t, &l.e[i]);
            if (rc == 0)
                rc = meta_extent_del(t, ino, l.foff[i]);
            if (rc)
                return rc;
        }
        if (!more)
            return 0;
    }
}

int core__ino_release(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *rec)
{
    int rc;
    rec->nlink = 0;
    if (rec->type != CORE_DIR && core__ref_held(c, ino)) {
        rc = meta_inode_put(t, ino, rec);
        if (rc == 0)
            rc = meta_orphan_put(t, ino);
        return rc;
    }
    rc = core__data_drop(c, t, ino);
    if (rc)
        return rc;
    rc = meta_objmeta_del(t, ino);
    if (rc && rc != -ENOENT)
        return rc;
    return meta_inode_del(t, ino);
}

/* Remove entry (dir, name) -> (ino, rec) without permission checks. */
int core__entry_remove(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec)
{
    bool isdir = rec->type == CORE_DIR;
    bool troot = d->flags & CORE_A_TROOT;
    int rc;

    if (!troot) {
        char key[CORE_KEY_MAX + 2];
        size_t klen;
        rc = core__key_of(t, dir, name, len, isdir, key, &klen);
        if (rc == 0)
            rc = meta_keyidx_del(t, d->bucket, key, klen);
        if (rc && rc != -ENOENT && rc != -ENAMETOOLONG)
            return rc;
    }
    rc = meta_dirent_del(t, dir, name, len);
    if (rc)
        return rc;
    d->nchild--;
    if (isdir)
        d->nlink--;
    core__touch(d, true, true);
    rc = meta_inode_put(t, dir, d);
    if (rc)
        return rc;
    if (isdir) {
        rc = meta_dirpath_del(t, ino);
        if (rc && rc != -ENOENT)
            return rc;
        rc = core__usage_delete(c, t, rec->tenant, ino);
        if (rc)
            return rc;
        if (rec->flags & CORE_A_BUCKET) {
            /* a deleted bucket's unfinished multipart uploads go with it */
            rc = core__mpu_drop_bucket(c, t, rec->tenant, ino);
            if (rc)
                return rc;
        }
        rec->nlink = 0;
    } else {
        rec->nlink--;
    }
    core__touch(rec, false, true);
    if (rec->nlink == 0) {
        rc = core__usage_charge(c, t, rec->tenant, dir, -(int64_t)rec->used, -1, false);
        if (rc)
            return rc;
        return core__ino_release(c, t, ino, rec);
    }
    return meta_inode_put(t, ino, rec);
}

int core__node_unlink(struct core *c, struct meta_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, bool isdir, bool s3)
{
    struct meta_inode d, r;
    struct meta_dirent de;
    int rc;
    (void)s3;

    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    rc = core__dir_get_p(t, p, dir, 0, &d);
    if (rc)
        return rc;
    if (len > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    rc = core__perm(p, &d, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    rc = meta_dirent_get(t, dir, name, len, &de);
    if (rc)
        return rc;
    rc = meta_inode_get(t, de.ino, &r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    if (isdir) {
        if (r.type != CORE_DIR)
            return -ENOTDIR;
        if (r.nchild > 0)
            return -ENOTEMPTY;
    } else if (r.type == CORE_DIR) {
        return -EISDIR;
    }
    if ((d.mode & S_ISVTX) && !(p->flags & CORE_P_SUPER) && p->uid != d.uid && p->uid != r.uid)
        return -EPERM;
    return core__entry_remove(c, t, dir, &d, name, len, de.ino, &r);
}
