/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_CREATE (RFC 1813 3.3.8): create a regular file.
 * UNCHECKED returns an existing file (then applying size, e.g. O_TRUNC, but
 * not mode, as open(2) does); GUARDED fails with EXIST; EXCLUSIVE stores the
 * client's verifier in the core so a retransmitted create returns the same
 * file while another client's create of the name fails (the client then
 * sets the attributes with SETATTR).
 * Status: NFS3_OK; NFS3ERR_EXIST; NFS3ERR_ACCES (incl. files in a tenant
 * root, which holds only buckets); NFS3ERR_NOTDIR; NFS3ERR_NAMETOOLONG;
 * NFS3ERR_INVAL (bad name); NFS3ERR_ROFS; NFS3ERR_DQUOT; NFS3ERR_NOSPC;
 * NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. Both arms carry dir wcc. */
#include <string.h>

#include "nfs_int.h"

int nfs3_create(struct nfs_req *r, void *args, void *res)
{
    CREATE3args *a = args;
    CREATE3res *o = res;
    struct core_attr dir, obj;
    uint64_t dino, verf = 0;
    uint32_t mode = 0644;
    enum core_createhow how;
    size_t len;
    int rc;

    o->status = nfs_req_fh(r, &a->where.dir, &dino, &dir);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_name_check(r, a->where.name, &len);
    const sattr3 *sa = NULL;
    switch (a->how.mode) {
    case UNCHECKED:
    case GUARDED:
        how = a->how.mode == UNCHECKED ? CORE_CREATE_UNCHECKED : CORE_CREATE_GUARDED;
        sa = &a->how.createhow3_u.obj_attributes;
        if (sa->mode.set_it)
            mode = sa->mode.set_mode3_u.mode & 07777;
        break;
    case EXCLUSIVE:
        how = CORE_CREATE_EXCLUSIVE;
        memcpy(&verf, a->how.createhow3_u.verf, sizeof(verf));
        break;
    default:
        how = CORE_CREATE_UNCHECKED;
        rc = -EINVAL;
        break;
    }
    if (rc == 0)
        rc = core_create(r->srv->core, &r->p, dino, a->where.name, len, mode, how, verf, &obj);
    if (rc == 0 && sa)
        rc = nfs_attr_apply_rest(r, sa, false, &obj);
    if (rc == 0) {
        CREATE3resok *ok = &o->CREATE3res_u.resok;
        rc = nfs_req_created(r, &obj, &ok->obj, &ok->obj_attributes);
    }
    o->status = nfs_req_status(r, rc);
    nfs_attr_wcc(r, &dir, dino,
                 o->status == NFS3_OK ? &o->CREATE3res_u.resok.dir_wcc
                                      : &o->CREATE3res_u.resfail.dir_wcc);
    return NFS_REQ_OK;
}
