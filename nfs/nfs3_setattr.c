/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_SETATTR (RFC 1813 3.3.2): change attributes, with an optional
 * guard on the object's ctime (the check and the change are one core call).
 * Status: NFS3_OK; NFS3ERR_PERM (chmod/chown not allowed); NFS3ERR_ACCES;
 * NFS3ERR_ROFS (read-only export); NFS3ERR_NOT_SYNC (guard mismatch);
 * NFS3ERR_DQUOT (extending over quota); NFS3ERR_INVAL (bad time, size on a
 * directory); NFS3ERR_NOSPC (the metadata could not be written: the file
 * system under the store or the LMDB map is full); NFS3ERR_STALE,
 * NFS3ERR_BADHANDLE; NFS3ERR_IO.
 * Both arms carry wcc data of the object. */
#include "nfs_int.h"

int nfs3_setattr(struct nfs_req *r, void *args, void *res)
{
    SETATTR3args *a = args;
    SETATTR3res *o = res;
    struct core_attr pre, pre2, post;
    struct core_setattr sa;
    uint64_t ino;
    int rc;

    o->status = nfs_req_fh(r, &a->object, &ino, &pre);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = nfs_attr_sattr(&a->new_attributes, &sa);
    if (rc == 0 && a->guard.check) {
        sa.guard = true;
        sa.guard_ctime.tv_sec = a->guard.sattrguard3_u.obj_ctime.seconds;
        sa.guard_ctime.tv_nsec = a->guard.sattrguard3_u.obj_ctime.nseconds;
    }
    if (rc == 0)
        rc = core_setattr(r->srv->core, &r->p, ino, &sa, &pre2, &post);
    o->status = nfs_req_status(r, rc);
    if (o->status == NFS3_OK) {
        nfs_attr_pre(&pre2, &o->SETATTR3res_u.resok.obj_wcc.before);
        nfs_attr_post(r, &post, &o->SETATTR3res_u.resok.obj_wcc.after);
    } else {
        nfs_attr_wcc(r, &pre, ino, &o->SETATTR3res_u.resfail.obj_wcc);
    }
    return NFS_REQ_OK;
}
