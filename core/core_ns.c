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

int core__node_create(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t dir,
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
    rc = core__dir_get_p(c, t, p, dir, 0, &d);
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
    rc = core__dirent_get(c, t, dir, name, len, &de);
    if (rc == 0)
        return -EEXIST;
    if (rc != -ENOENT)
        return rc;
    if (!troot) {
        rc = core__key_of(c, t, dir, name, len, type == CORE_DIR, key, &klen);
        if (rc)
            return rc;
    }
    rc = core__usage_charge(c, t, p->tenant, dir, 0, 1, true);
    if (rc)
        return rc;
    rc = core__ino_alloc(c, t, ino);
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
        uint8_t k[8];
        meta_be64_put(k, *ino);
        rc = meta_put(t, core__dbi(c, META_DBI_INLINE), k, 8, target, tlen, 0);
        if (rc)
            return rc;
        rec->size = tlen;
    }
    rc = core__ino_put(c, t, *ino, rec);
    if (rc)
        return rc;
    rc = core__dirent_add(c, t, dir, name, len, *ino, type);
    if (rc)
        return rc;
    d.nchild++;
    if (type == CORE_DIR)
        d.nlink++;
    core__touch(&d, true, true);
    rc = core__ino_put(c, t, dir, &d);
    if (rc)
        return rc;
    if (!troot) {
        rc = core__kidx_put(c, t, rec->bucket, key, klen, *ino, type);
        if (rc)
            return rc;
    }
    if (type == CORE_DIR) {
        rc = core__dirpath_put(c, t, *ino, troot ? "" : key, troot ? 0 : klen);
        if (rc)
            return rc;
    }
    if (troot)
        rc = core__usage_create(c, t, p->tenant, *ino);
    return rc;
}

static void xkey_phys(uint8_t *k, const struct store_extent *e)
{
    meta_be32_put(k, e->dev);
    meta_be64_put(k + 4, e->off);
}

int core__extent_free(struct core *c, MDB_txn *t, const struct store_extent *e)
{
    uint8_t k[12];
    core__cache_invalidate(c, e);
    xkey_phys(k, e);
    int rc = meta_del(t, core__dbi(c, META_DBI_XCRC), k, 12);
    if (rc && rc != -ENOENT)
        return rc;
    return meta_extent_free(c->meta, t, e);
}

int core__extent_use(struct core *c, MDB_txn *t, const struct store_extent *e,
                     const uint32_t *bcrc, uint32_t nb)
{
    int rc = meta_extent_use(c->meta, t, e);
    if (rc == 0 && bcrc && nb) {
        uint8_t k[12];
        xkey_phys(k, e);
        rc = meta_put(t, core__dbi(c, META_DBI_XCRC), k, 12, bcrc, nb * sizeof(uint32_t), 0);
    }
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

uint32_t core__bcrc_get(struct core *c, MDB_txn *t, const struct store_extent *e, uint32_t *out)
{
    uint8_t k[12];
    MDB_val v;
    xkey_phys(k, e);
    if (meta_get(t, core__dbi(c, META_DBI_XCRC), k, 12, &v) != 0)
        return 0;
    uint32_t nb = (uint32_t)(v.mv_size / sizeof(uint32_t));
    if (v.mv_size % sizeof(uint32_t) || nb > META_BCRC_MAX ||
        nb != (e->len + META_BCRC_BLOCK - 1) / META_BCRC_BLOCK)
        return 0; /* malformed: verify the whole extent instead */
    memcpy(out, v.mv_data, v.mv_size);
    return nb;
}

int core__data_drop(struct core *c, MDB_txn *t, uint64_t ino, uint64_t from)
{
    uint8_t k[16];
    MDB_cursor *cur;
    MDB_val kv, vv;
    int rc;

    meta_be64_put(k, ino);
    if (from == 0) {
        core__pend_dead(c, ino); /* pending writes go once this op committed */
        rc = meta_del(t, core__dbi(c, META_DBI_INLINE), k, 8);
        if (rc && rc != -ENOENT)
            return rc;
    }
    rc = mdb_cursor_open(t, core__dbi(c, META_DBI_EXTENTS), &cur);
    if (rc)
        return meta_err(rc);
    for (;;) {
        meta_be64_put(k + 8, from);
        kv.mv_data = k;
        kv.mv_size = 16;
        rc = mdb_cursor_get(cur, &kv, &vv, MDB_SET_RANGE);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            break;
        }
        if (rc) {
            rc = meta_err(rc);
            break;
        }
        if (kv.mv_size != 16 || meta_be64_get(kv.mv_data) != ino)
            break;
        struct store_extent e;
        uint32_t vlen;
        rc = core__extent_get(&vv, &e, &vlen);
        if (rc)
            break;
        rc = core__extent_free(c, t, &e);
        if (rc)
            break;
        rc = mdb_cursor_del(cur, 0);
        if (rc) {
            rc = meta_err(rc);
            break;
        }
    }
    mdb_cursor_close(cur);
    return rc;
}

int core__ino_release(struct core *c, MDB_txn *t, uint64_t ino, struct meta_inode *rec)
{
    uint8_t k[8];
    int rc;
    meta_be64_put(k, ino);
    rec->nlink = 0;
    if (rec->type != CORE_DIR && core__ref_held(c, ino)) {
        rc = core__ino_put(c, t, ino, rec);
        if (rc == 0)
            rc = meta_put(t, core__dbi(c, META_DBI_ORPHANS), k, 8, "", 0, 0);
        return rc;
    }
    rc = core__data_drop(c, t, ino, 0);
    if (rc)
        return rc;
    rc = meta_del(t, core__dbi(c, META_DBI_OBJMETA), k, 8);
    if (rc && rc != -ENOENT)
        return rc;
    rc = meta_del(t, core__dbi(c, META_DBI_INODES), k, 8);
    return rc;
}

/* Remove entry (dir, name) -> (ino, rec) without permission checks. */
int core__entry_remove(struct core *c, MDB_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec)
{
    bool isdir = rec->type == CORE_DIR;
    bool troot = d->flags & CORE_A_TROOT;
    int rc;

    if (!troot) {
        char key[CORE_KEY_MAX + 2];
        size_t klen;
        rc = core__key_of(c, t, dir, name, len, isdir, key, &klen);
        if (rc == 0)
            rc = core__kidx_del(c, t, d->bucket, key, klen);
        if (rc && rc != -ENOENT && rc != -ENAMETOOLONG)
            return rc;
    }
    rc = core__dirent_del(c, t, dir, name, len);
    if (rc)
        return rc;
    d->nchild--;
    if (isdir)
        d->nlink--;
    core__touch(d, true, true);
    rc = core__ino_put(c, t, dir, d);
    if (rc)
        return rc;
    if (isdir) {
        uint8_t k[8];
        meta_be64_put(k, ino);
        rc = meta_del(t, core__dbi(c, META_DBI_DIRPATH), k, 8);
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
    return core__ino_put(c, t, ino, rec);
}

int core__node_unlink(struct core *c, MDB_txn *t, const struct core_principal *p, uint64_t dir,
                      const char *name, size_t len, bool isdir, bool s3)
{
    struct meta_inode d, r;
    struct meta_dirent de;
    int rc;
    (void)s3;

    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    rc = core__dir_get_p(c, t, p, dir, 0, &d);
    if (rc)
        return rc;
    if (len > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    rc = core__perm(p, &d, CORE_MAY_W | CORE_MAY_X);
    if (rc)
        return rc;
    rc = core__dirent_get(c, t, dir, name, len, &de);
    if (rc)
        return rc;
    rc = core__ino_get(c, t, de.ino, &r);
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
