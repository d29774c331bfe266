/* SPDX-License-Identifier: Apache-2.0
 * nfs_attr: conversions between the core's attributes and NFSv3's
 * (fattr3, wcc_data, sattr3), and names: the argument decoder of the
 * procedures that take a name (which notes names holding a NUL byte) and
 * the name check every one of them runs.
 *
 * fsid is the export id, so a client sees one file system per export and
 * never a mount point inside it; fileid is the core's inode number.
 * Thread: any. */
#include <errno.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"

static nfstime3 ts3(const struct timespec *t)
{
    nfstime3 n;
    n.seconds = (uint32)t->tv_sec;
    n.nseconds = (uint32)t->tv_nsec;
    return n;
}

static ftype3 ftype_of(enum core_ftype t)
{
    switch (t) {
    case CORE_DIR:
        return NF3DIR;
    case CORE_LNK:
        return NF3LNK;
    case CORE_REG:
    default:
        return NF3REG;
    }
}

void nfs_attr_fattr(const struct nfs_req *r, const struct core_attr *a, fattr3 *out)
{
    memset(out, 0, sizeof(*out));
    out->type = ftype_of(a->type);
    out->mode = a->mode & 07777;
    out->nlink = a->nlink;
    out->uid = a->uid;
    out->gid = a->gid;
    out->size = a->size;
    out->used = a->used;
    out->fsid = r->have_export ? r->exp.id : 0;
    out->fileid = a->ino;
    out->atime = ts3(&a->atime);
    out->mtime = ts3(&a->mtime);
    out->ctime = ts3(&a->ctime);
}

uint8_t *nfs_attr_encode(const struct nfs_req *r, const struct core_attr *a, uint8_t *p)
{
    fattr3 f;
    nfs_attr_fattr(r, a, &f);
    p = nfs_xdr_put32(p, (uint32_t)f.type);
    p = nfs_xdr_put32(p, f.mode);
    p = nfs_xdr_put32(p, f.nlink);
    p = nfs_xdr_put32(p, f.uid);
    p = nfs_xdr_put32(p, f.gid);
    p = nfs_xdr_put64(p, f.size);
    p = nfs_xdr_put64(p, f.used);
    p = nfs_xdr_put32(p, f.rdev.specdata1);
    p = nfs_xdr_put32(p, f.rdev.specdata2);
    p = nfs_xdr_put64(p, f.fsid);
    p = nfs_xdr_put64(p, f.fileid);
    const nfstime3 *t[3] = {&f.atime, &f.mtime, &f.ctime};
    for (int i = 0; i < 3; i++) {
        p = nfs_xdr_put32(p, t[i]->seconds);
        p = nfs_xdr_put32(p, t[i]->nseconds);
    }
    return p;
}

void nfs_attr_post(const struct nfs_req *r, const struct core_attr *a, post_op_attr *out)
{
    if (!a) {
        out->attributes_follow = FALSE;
        return;
    }
    out->attributes_follow = TRUE;
    nfs_attr_fattr(r, a, &out->post_op_attr_u.attributes);
}

int nfs_attr_get(struct nfs_req *r, uint64_t ino, uint32_t gen, struct core_attr *out)
{
    return core_getattr(r->srv->core, &r->p, ino, gen, out);
}

void nfs_attr_pre(const struct core_attr *a, pre_op_attr *out)
{
    if (!a) {
        out->attributes_follow = FALSE;
        return;
    }
    out->attributes_follow = TRUE;
    out->pre_op_attr_u.attributes.size = a->size;
    out->pre_op_attr_u.attributes.mtime = ts3(&a->mtime);
    out->pre_op_attr_u.attributes.ctime = ts3(&a->ctime);
}

void nfs_attr_wcc(struct nfs_req *r, const struct core_attr *pre, uint64_t ino, wcc_data *out)
{
    struct core_attr a;
    nfs_attr_pre(pre, &out->before);
    if (pre && core_getattr(r->srv->core, &r->p, ino, pre->gen, &a) == 0)
        nfs_attr_post(r, &a, &out->after);
    else
        out->after.attributes_follow = FALSE;
}

int nfs_attr_sattr(const sattr3 *s, struct core_setattr *out)
{
    memset(out, 0, sizeof(*out));
    if (s->mode.set_it) {
        out->mask |= CORE_SET_MODE;
        out->mode = s->mode.set_mode3_u.mode & 07777;
    }
    if (s->uid.set_it) {
        out->mask |= CORE_SET_UID;
        out->uid = s->uid.set_uid3_u.uid;
    }
    if (s->gid.set_it) {
        out->mask |= CORE_SET_GID;
        out->gid = s->gid.set_gid3_u.gid;
    }
    if (s->size.set_it) {
        out->mask |= CORE_SET_SIZE;
        out->size = s->size.set_size3_u.size;
    }
    switch (s->atime.set_it) {
    case DONT_CHANGE:
        break;
    case SET_TO_SERVER_TIME:
        out->mask |= CORE_SET_ATIME_NOW;
        break;
    case SET_TO_CLIENT_TIME:
        if (s->atime.set_atime_u.atime.nseconds >= 1000000000u)
            return -EINVAL;
        out->mask |= CORE_SET_ATIME;
        out->atime.tv_sec = s->atime.set_atime_u.atime.seconds;
        out->atime.tv_nsec = s->atime.set_atime_u.atime.nseconds;
        break;
    default:
        return -EINVAL;
    }
    switch (s->mtime.set_it) {
    case DONT_CHANGE:
        break;
    case SET_TO_SERVER_TIME:
        out->mask |= CORE_SET_MTIME_NOW;
        break;
    case SET_TO_CLIENT_TIME:
        if (s->mtime.set_mtime_u.mtime.nseconds >= 1000000000u)
            return -EINVAL;
        out->mask |= CORE_SET_MTIME;
        out->mtime.tv_sec = s->mtime.set_mtime_u.mtime.seconds;
        out->mtime.tv_nsec = s->mtime.set_mtime_u.mtime.nseconds;
        break;
    default:
        return -EINVAL;
    }
    return 0;
}

/* Decode a filename3 or nfspath3 (@p fn) into @p s. libtirpc's xdr_string
 * ends the C string at the first NUL byte, so "nul\0tail" would arrive as
 * "nul": compare with the length on the wire and note the difference in the
 * call, whose name check then refuses it. */
static bool name_decode(struct nfs_req *r, XDR *x, char **s, bool_t (*fn)(XDR *, char **))
{
    u_int pos = xdr_getpos(x), len;
    if (!xdr_u_int(x, &len) || !xdr_setpos(x, pos) || !fn(x, s))
        return false;
    if (strlen(*s) != len && !r->name_nul) {
        r->name_nul = true;
        srv_log_limited(INFO, NFS, "req=%08x tenant=- %s from %s: a name of %u bytes holds a NUL "
                        "byte: NFS3ERR_INVAL", r->call.xid, r->desc->name, r->conn_peer, len);
    }
    return true;
}

static bool dirop_decode(struct nfs_req *r, XDR *x, diropargs3 *d)
{
    return xdr_nfs_fh3(x, &d->dir) && name_decode(r, x, &d->name, xdr_filename3);
}

bool nfs3_names_decode(struct nfs_req *r, XDR *x, void *args)
{
    switch (r->call.proc) {
    case NFSPROC3_LOOKUP:
        return dirop_decode(r, x, &((LOOKUP3args *)args)->what);
    case NFSPROC3_CREATE: {
        CREATE3args *a = args;
        return dirop_decode(r, x, &a->where) && xdr_createhow3(x, &a->how);
    }
    case NFSPROC3_MKDIR: {
        MKDIR3args *a = args;
        return dirop_decode(r, x, &a->where) && xdr_sattr3(x, &a->attributes);
    }
    case NFSPROC3_SYMLINK: {
        SYMLINK3args *a = args;
        return dirop_decode(r, x, &a->where) && xdr_sattr3(x, &a->symlink.symlink_attributes) &&
               name_decode(r, x, &a->symlink.symlink_data, xdr_nfspath3);
    }
    case NFSPROC3_MKNOD: {
        MKNOD3args *a = args;
        return dirop_decode(r, x, &a->where) && xdr_mknoddata3(x, &a->what);
    }
    case NFSPROC3_REMOVE:
        return dirop_decode(r, x, &((REMOVE3args *)args)->object);
    case NFSPROC3_RMDIR:
        return dirop_decode(r, x, &((RMDIR3args *)args)->object);
    case NFSPROC3_RENAME: {
        RENAME3args *a = args;
        return dirop_decode(r, x, &a->from) && dirop_decode(r, x, &a->to);
    }
    case NFSPROC3_LINK: {
        LINK3args *a = args;
        return xdr_nfs_fh3(x, &a->file) && dirop_decode(r, x, &a->link);
    }
    default:
        return false;
    }
}

int nfs_name_check(const struct nfs_req *r, const char *name, size_t *len)
{
    if (r->name_nul)
        return SRV_EBADNAME;
    if (!name)
        return -EINVAL;
    size_t n = strlen(name);
    if (n == 0)
        return -EINVAL;
    if (n > CORE_NAME_MAX)
        return -ENAMETOOLONG;
    *len = n;
    return 0;
}

int nfs_attr_apply_rest(struct nfs_req *r, const sattr3 *s, bool with_mode, struct core_attr *a)
{
    struct core_setattr sa;
    struct core_attr post;
    int rc = nfs_attr_sattr(s, &sa);
    if (rc < 0)
        return rc;
    if (!with_mode)
        sa.mask &= ~(uint32_t)CORE_SET_MODE;
    /* The creator already owns the object: asking for its own ids is no chown. */
    if ((sa.mask & CORE_SET_UID) && sa.uid == a->uid)
        sa.mask &= ~(uint32_t)CORE_SET_UID;
    if ((sa.mask & CORE_SET_GID) && sa.gid == a->gid)
        sa.mask &= ~(uint32_t)CORE_SET_GID;
    if ((sa.mask & CORE_SET_SIZE) && sa.size == a->size)
        sa.mask &= ~(uint32_t)CORE_SET_SIZE;
    if (sa.mask == 0)
        return 0;
    rc = core_setattr(r->srv->core, &r->p, a->ino, &sa, NULL, &post);
    if (rc == 0)
        *a = post;
    return rc;
}

int nfs_req_created(struct nfs_req *r, const struct core_attr *obj, post_op_fh3 *fh,
                    post_op_attr *attr)
{
    int rc = nfs_req_mkfh(r, obj, &fh->post_op_fh3_u.handle);
    if (rc < 0)
        return rc;
    fh->handle_follows = TRUE;
    nfs_attr_post(r, obj, attr);
    return 0;
}
