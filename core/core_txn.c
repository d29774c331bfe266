/* SPDX-License-Identifier: Apache-2.0
 * core_txn: helpers of the namespace core over one meta txn: inodes and
 * directories as a principal may use them, attributes, S3 keys of directory
 * entries; permission and name checks. The records themselves are meta's
 * typed modules (meta_inode.h, meta_dirent.h, meta_keyidx.h).
 * Thread: any thread holding a txn. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "srv_err.h"
#include "srv_log.h"

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
    out->flags = r->flags & 0xff;
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

int core__perm(const struct core_principal *p, const struct meta_inode *r, uint32_t want)
{
    uint32_t bits;
    if (p->flags & CORE_P_SUPER) {
        /* super may execute only what some execute bit allows (as root) */
        if ((want & CORE_MAY_X) && r->type == CORE_REG && !(r->mode & 0111))
            return -EACCES;
        return 0;
    }
    if (p->uid == r->uid)
        bits = (r->mode >> 6) & 7;
    else if (core__in_group(p, r->gid))
        bits = (r->mode >> 3) & 7;
    else
        bits = r->mode & 7;
    return (bits & want) == want ? 0 : -EACCES;
}

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

/* ---- keys ---- */

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

int core__kidx_readable(struct meta_txn *t, const struct core_principal *p, uint64_t bucket,
                        const char *key, size_t klen, uint64_t *ino, struct meta_inode *r)
{
    int rc = meta_keyidx_get(t, bucket, key, klen, ino, NULL);
    if (rc)
        return rc;
    rc = meta_inode_get(t, *ino, r);
    if (rc)
        return rc == -ENOENT ? SRV_ECORRUPT : rc;
    return core__perm(p, r, CORE_MAY_R);
}

int core__inline_get(struct meta_txn *t, uint64_t ino, const void **data, size_t *len)
{
    int rc = meta_inline_get(t, ino, data, len);
    if (rc == -ENOENT) {
        *data = NULL;
        *len = 0;
        rc = 0;
    }
    return rc;
}
