/* SPDX-License-Identifier: Apache-2.0
 * core_ns: name rules and tree changes shared by the NFS and S3 views (the
 * namespace sub-module, core_ns_int.h): creating a node, removing an entry,
 * releasing an inode whose last link went away (kept as an orphan while
 * core_ref holders remain; its data dropped through core_extent.c). Each
 * keeps dirents, the key index, directory paths and usage consistent in the
 * caller's txn.
 * Thread: inside writer ops only (the name checks: any). */
#include "core_ns_int.h"

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

/* ---- names and keys ---- */

int core__name_check(const char *name, size_t len)
{
    if (len == 0)
        return SRV_EBADNAME;
    if (len > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return SRV_EBADNAME;
    if (memchr(name, '/', len) || memchr(name, '\0', len))
        return SRV_EBADNAME;
    return 0;
}

int core__bucket_name_check(const char *n, size_t len)
{
    if (len < 3 || len > 63)
        return SRV_EBADNAME;
    bool all_digits_dots = true;
    int dots = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '.' && ch != '-')
            return SRV_EBADNAME;
        if ((i == 0 || i == len - 1) && !alnum)
            return SRV_EBADNAME;
        if (ch == '.') {
            dots++;
            if (i > 0 && (n[i - 1] == '.' || n[i - 1] == '-'))
                return SRV_EBADNAME;
            if (i + 1 < len && n[i + 1] == '-')
                return SRV_EBADNAME;
        }
        if (!(ch == '.' || (ch >= '0' && ch <= '9')))
            all_digits_dots = false;
    }
    if (all_digits_dots && dots == 3)
        return SRV_EBADNAME; /* looks like an IPv4 address */
    if (len >= 4 && memcmp(n, "xn--", 4) == 0)
        return SRV_EBADNAME;
    if (len >= 8 && memcmp(n + len - 8, "-s3alias", 8) == 0)
        return SRV_EBADNAME;
    return 0;
}

int core__key_of(struct meta_txn *t, uint64_t dir, const char *name, size_t len, bool isdir,
                 char *buf, size_t *klen)
{
    size_t dl;
    int rc = meta_dirpath_get(t, dir, buf, &dl);
    if (rc)
        return rc;
    if (dl + len + (isdir ? 1 : 0) > CORE_KEY_MAX)
        return -ENAMETOOLONG;
    memcpy(buf + dl, name, len);
    dl += len;
    if (isdir)
        buf[dl++] = '/';
    *klen = dl;
    return 0;
}

/* ---- tree changes ---- */

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
    if (rc == 0)
        rc = core__cm_ro(c, p, d.bucket);
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

int core__ino_release(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *rec)
{
    int rc;
    uint64_t kept = 0;
    rec->nlink = 0;
    rec->flags &= (uint16_t)~META_I_VREC;
    if (rec->type != CORE_DIR && core__ref_held(c, ino)) {
        rc = meta_inode_put(t, ino, rec);
        if (rc == 0)
            rc = meta_orphan_put(t, ino);
        return rc;
    }
    rc = core__data_drop(c, t, ino, &kept);
    if (rc)
        return rc;
    if (kept) /* extents another version holds stay in the store */
        rc = core__usage_charge_store(c, t, rec->tenant, rec->bucket, (int64_t)kept);
    if (rc)
        return rc;
    rc = meta_objmeta_del(t, ino);
    if (rc && rc != -ENOENT)
        return rc;
    return meta_inode_del(t, ino);
}

int core__entry_detach(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
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
            /* a deleted bucket's unfinished multipart uploads and configuration go with it */
            rc = core__mpu_drop_bucket(c, t, rec->tenant, ino);
            if (rc == 0)
                rc = core__ver_bucket_drop(t, ino);
            if (rc)
                return rc;
        }
        rec->nlink = 0;
    } else {
        rec->nlink--;
    }
    core__touch(rec, false, true);
    return 0;
}

/* Remove entry (dir, name) -> (ino, rec) without permission checks. */
int core__entry_remove(struct core *c, struct meta_txn *t, uint64_t dir, struct meta_inode *d,
                       const char *name, size_t len, uint64_t ino, struct meta_inode *rec)
{
    int rc = core__entry_detach(c, t, dir, d, name, len, ino, rec);
    if (rc)
        return rc;
    if (rec->nlink == 0) {
        rc = core__usage_charge(c, t, rec->tenant, dir, -(int64_t)rec->used, -1, false);
        if (rc)
            return rc;
        return core__ino_release(c, t, ino, rec);
    }
    return meta_inode_put(t, ino, rec);
}

int core__node_unlink(struct core *c, struct meta_txn *t, const struct core_principal *p,
                      uint64_t dir, const char *name, size_t len, bool isdir, unsigned vflags,
                      struct core_delres *out)
{
    struct meta_inode d, r;
    struct meta_dirent de;
    int rc;

    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    rc = core__dir_get_p(t, p, dir, 0, &d);
    if (rc == 0)
        rc = core__cm_ro(c, p, d.bucket);
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
        if ((r.flags & CORE_A_BUCKET) && (rc = core__ver_bucket_busy(t, de.ino)) != 0)
            return rc; /* versions remain */
    } else if (r.type == CORE_DIR) {
        return -EISDIR;
    }
    if ((d.mode & S_ISVTX) && !(p->flags & CORE_P_SUPER) && p->uid != d.uid && p->uid != r.uid)
        return -EPERM;
    if ((vflags & CORE__UNL_VERSIONED) && r.type == CORE_REG) {
        struct meta_bucketcfg cfg;
        rc = core__ver_cfg(c, t, d.bucket, &cfg);
        if (rc)
            return rc;
        if (cfg.versioning != META_VERS_NONE) {
            char key[CORE_KEY_MAX + 2];
            size_t klen;
            rc = core__key_of(t, dir, name, len, false, key, &klen);
            if (rc == 0)
                rc = core__ver_delete_t(c, t, p, &cfg, d.bucket, key, klen, dir, &d, name, len,
                                        de.ino, &r, vflags & CORE__UNL_NFS, out);
            return rc;
        }
    }
    return core__entry_remove(c, t, dir, &d, name, len, de.ino, &r);
}
