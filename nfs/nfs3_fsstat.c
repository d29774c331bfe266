/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_FSSTAT (RFC 1813 3.3.18): space and inode figures, taken from the
 * quotas, not the disk: the tighter of the tenant's quota and the exported
 * directory's quota (core_usage_get). Where no limit is set, the store's
 * figures stand in for bytes: its free space plus what the data files may
 * still grow (as far as their file system has room), so a store that starts
 * small does not look nearly full; free inodes are estimated as one per 4 KiB
 * of that free space. invarsec is 0 (figures change).
 * Status: NFS3_OK; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include "nfs_int.h"

struct fs_fig {
    uint64_t total, free;
    bool limited;
};

static void tighten(struct fs_fig *f, uint64_t used, uint64_t limit)
{
    if (limit == 0)
        return;
    uint64_t fr = used >= limit ? 0 : limit - used;
    if (!f->limited || fr < f->free) {
        f->total = limit;
        f->free = fr;
        f->limited = true;
    }
}

int nfs3_fsstat(struct nfs_req *r, void *args, void *res)
{
    FSSTAT3args *a = args;
    FSSTAT3res *o = res;
    struct core_attr at;
    struct core_usage tu = {0}, eu = {0};
    struct core_stats cs;
    uint64_t ino;
    int rc;

    o->status = nfs_req_fh(r, &a->fsroot, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = core_usage_get(r->srv->core, r->exp.tenant, 0, &tu);
    if (rc == 0 && r->exp.dir != 0)
        rc = core_usage_get(r->srv->core, r->exp.tenant, r->exp.dir, &eu);
    if (rc == -ENOENT) /* no usage record for the export directory: tenant only */
        rc = 0;
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        nfs_attr_post(r, &at, &o->FSSTAT3res_u.resfail.obj_attributes);
        return NFS_REQ_OK;
    }
    core_stats_get(r->srv->core, &cs);
    struct fs_fig b = {0}, f = {0};
    tighten(&b, tu.bytes, tu.bytes_limit);
    tighten(&b, eu.bytes, eu.bytes_limit);
    tighten(&f, tu.inodes, tu.inodes_limit);
    tighten(&f, eu.inodes, eu.inodes_limit);
    uint64_t grow = cs.store_limit > cs.store_capacity ? cs.store_limit - cs.store_capacity : 0;
    if (cs.fs_size && grow > cs.fs_free)
        grow = cs.fs_free;
    if (!b.limited) {
        b.total = cs.store_capacity + grow;
        b.free = cs.store_free + grow;
    }
    if (!f.limited) {
        f.free = (cs.store_free + grow) / 4096;
        f.total = tu.inodes + f.free;
    }
    FSSTAT3resok *ok = &o->FSSTAT3res_u.resok;
    nfs_attr_post(r, &at, &ok->obj_attributes);
    ok->tbytes = b.total;
    ok->fbytes = b.free;
    ok->abytes = b.free;
    ok->tfiles = f.total;
    ok->ffiles = f.free;
    ok->afiles = f.free;
    ok->invarsec = 0;
    return NFS_REQ_OK;
}
