/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_COMMIT (RFC 1813 3.3.21): make the file's UNSTABLE writes
 * durable. The whole file is committed whatever offset/count say (allowed by
 * the RFC). The verifier matches WRITE's until the daemon restarts.
 * Status: NFS3_OK; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_NOSPC (the
 * metadata could not be written: the file system under the store or the
 * LMDB map is full; the writes stay pending, a later COMMIT retries them; RFC
 * 1813 lists no NOSPC for COMMIT, but clients map it, Linux nfsd answers it
 * for a failed fsync too, and it tells the truth where IO would not);
 * NFS3ERR_IO.
 * Both arms carry the file's wcc data. */
#include <string.h>

#include "nfs_int.h"

int nfs3_commit(struct nfs_req *r, void *args, void *res)
{
    COMMIT3args *a = args;
    COMMIT3res *o = res;
    struct core_attr at;
    uint64_t ino;
    int rc;

    o->status = nfs_req_fh(r, &a->file, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    rc = core_commit(r->srv->core, &r->p, ino);
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        nfs_attr_wcc(r, &at, ino, &o->COMMIT3res_u.resfail.file_wcc);
        return NFS_REQ_OK;
    }
    nfs_attr_wcc(r, &at, ino, &o->COMMIT3res_u.resok.file_wcc);
    memcpy(o->COMMIT3res_u.resok.verf, &r->srv->verf, NFS3_WRITEVERFSIZE);
    return NFS_REQ_OK;
}
