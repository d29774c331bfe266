/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_WRITE (RFC 1813 3.3.7): write count bytes at offset.
 * UNSTABLE data may stay buffered in the core until COMMIT; DATA_SYNC and
 * FILE_SYNC are durable when the reply leaves. The verifier is the core's
 * write verifier, which changes on every restart, so a client re-sends
 * uncommitted data after a crash.
 * Status: NFS3_OK; NFS3ERR_INVAL (count larger than the data, not a regular
 * file); NFS3ERR_ISDIR; NFS3ERR_ACCES; NFS3ERR_ROFS; NFS3ERR_DQUOT;
 * NFS3ERR_NOSPC; NFS3ERR_FBIG; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO.
 * Both arms carry the file's wcc data.
 * The data is decoded in place: it points into the received record.
 * An UNSTABLE write that gives an empty file its whole content of at most
 * NFS_WRITE_WHOLE_SMALL bytes (a small file written at close, as the kernel
 * client and untar-like loads do) is made durable at once and answered
 * FILE_SYNC (RFC 1813 lets the server commit more than asked): it waits for
 * the one group commit the COMMIT that follows would have waited for, and
 * the client then sends no COMMIT, one round trip less per small file. */
#include <string.h>

#include "nfs_int.h"

#define NFS_WRITE_WHOLE_SMALL 4096u

bool nfs3_write_decode(struct nfs_req *r, XDR *x, void *args)
{
    WRITE3args *a = args;
    uint32_t len;
    if (!xdr_nfs_fh3(x, &a->file) || !xdr_offset3(x, &a->offset) || !xdr_count3(x, &a->count) ||
        !xdr_stable_how(x, &a->stable) || !xdr_u_int32_t(x, &len))
        return false;
    /* The data stays in the record (alive until the call ends): no copy.
     * xdr_free never sees it: the transport frees WRITE3args' handle only. */
    size_t pos = r->call.args_off + xdr_getpos(x);
    if (len > NFS3_WIRE_DATALEN || pos + len > r->reclen)
        return false;
    a->data.data_len = len;
    a->data.data_val = (char *)r->rec + pos;
    return true;
}

/* Free what nfs3_write_decode allocated (the handle), not the data. */
void nfs3_write_args_free(void *args)
{
    WRITE3args *a = args;
    a->data.data_val = NULL;
    a->data.data_len = 0;
    xdr_free(NFS_XDRPROC(xdr_WRITE3args), args);
}

int nfs3_write(struct nfs_req *r, void *args, void *res)
{
    WRITE3args *a = args;
    WRITE3res *o = res;
    struct core_attr at, pre, post;
    enum core_stable committed = CORE_FILE_SYNC;
    uint64_t ino;
    int rc = 0;

    r->payload_in = a->data.data_len; /* received, whatever becomes of it (metrics) */
    o->status = nfs_req_fh(r, &a->file, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    if (a->count > a->data.data_len)
        rc = -EINVAL;
    else if (at.type == CORE_DIR)
        rc = -EISDIR;
    else if (at.type != CORE_REG)
        rc = -EINVAL;
    enum core_stable how = a->stable == FILE_SYNC   ? CORE_FILE_SYNC
                           : a->stable == DATA_SYNC ? CORE_DATA_SYNC
                                                    : CORE_UNSTABLE;
    if (how == CORE_UNSTABLE && a->offset == 0 && at.size == 0 && a->count > 0 &&
        a->count <= NFS_WRITE_WHOLE_SMALL)
        how = CORE_FILE_SYNC; /* a whole small file: durable now, no COMMIT to follow */
    if (rc == 0)
        rc = core_write(r->srv->core, &r->p, ino, a->offset, a->data.data_val, a->count, how,
                        &committed, &pre, &post);
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        nfs_attr_wcc(r, &at, ino, &o->WRITE3res_u.resfail.file_wcc);
        return NFS_REQ_OK;
    }
    WRITE3resok *ok = &o->WRITE3res_u.resok;
    nfs_attr_pre(&pre, &ok->file_wcc.before);
    nfs_attr_post(r, &post, &ok->file_wcc.after);
    ok->count = a->count;
    ok->committed = committed == CORE_FILE_SYNC   ? FILE_SYNC
                    : committed == CORE_DATA_SYNC ? DATA_SYNC
                                                  : UNSTABLE;
    memcpy(ok->verf, &r->srv->verf, NFS3_WRITEVERFSIZE);
    return NFS_REQ_OK;
}
