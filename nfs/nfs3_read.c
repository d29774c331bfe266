/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READ (RFC 1813 3.3.6): read up to count bytes (capped at rtmax,
 * 1 MiB) at offset. eof is set when the read reaches the end of the file.
 * Status: NFS3_OK; NFS3ERR_ACCES; NFS3ERR_ISDIR / NFS3ERR_INVAL (not a
 * regular file); NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO (including a
 * failed extent checksum, logged by the core).
 * The bytes read are not copied into the encoded reply: they travel as the
 * call's bulk data (see struct nfs_req), since data<> is the reply's last field. */
#include <stdlib.h>

#include "nfs_int.h"

int nfs3_read(struct nfs_req *r, void *args, void *res)
{
    READ3args *a = args;
    READ3res *o = res;
    struct core_attr at;
    uint64_t ino;
    size_t n = 0;
    bool eof = false;
    int rc;

    o->status = nfs_req_fh(r, &a->file, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    uint32_t count = a->count < NFS_IO_MAX ? a->count : NFS_IO_MAX;
    char *buf = malloc(count ? count : 1);
    rc = buf ? 0 : -ENOMEM;
    if (rc == 0 && at.type == CORE_DIR)
        rc = -EISDIR;
    else if (rc == 0 && at.type != CORE_REG)
        rc = -EINVAL;
    if (rc == 0 && count > 0)
        rc = core_read(r->srv->core, &r->p, ino, a->offset, buf, count, &n, &eof);
    else if (rc == 0)
        eof = a->offset >= at.size;
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        free(buf);
        nfs_attr_post(r, &at, &o->READ3res_u.resfail.file_attributes);
        return NFS_REQ_OK;
    }
    if (a->offset + n >= at.size)
        eof = true;
    READ3resok *ok = &o->READ3res_u.resok;
    ok->count = (count3)n;
    ok->eof = eof;
    /* The data goes out by reference after the encoded result (no copy). */
    ok->data.data_len = 0;
    ok->data.data_val = NULL;
    if (n > 0) {
        r->bulk = buf;
        r->bulklen = n;
    } else {
        free(buf);
    }
    nfs_attr_post(r, &at, &ok->file_attributes);
    return NFS_REQ_OK;
}
