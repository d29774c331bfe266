/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_READ (RFC 1813 3.3.6): read up to count bytes (capped at rtmax,
 * 1 MiB) at offset. eof is set when the read reaches the end of the file.
 * Status: NFS3_OK; NFS3ERR_ACCES; NFS3ERR_ISDIR / NFS3ERR_INVAL (not a
 * regular file); NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO (including a
 * failed extent checksum, logged by the core).
 * The data is never copied into the encoded reply: it travels as the call's
 * bulk data after the reply header (data<> is the reply's last field; see
 * struct nfs_req). A READ of NFS_READ_PIECES_MIN bytes or more is described
 * by core_read_pieces: extents whose bytes were verified and are resident in
 * the page cache go out as ranges of the store's fd (sendfile, no copy in
 * this process), the rest as verified memory or holes. A smaller READ uses
 * core_read, which verifies only the CRC blocks it touches, where
 * core_read_pieces would read and verify whole extents (up to 1 MiB or more)
 * for a few KiB the first time a cold extent is touched.
 * On the loop thread (NFS_PF_LOOP) every READ tries core_read_pieces with
 * CORE_P_NOWAIT: bytes already verified and resident go out at once, from
 * the loop; anything else (-EWOULDBLOCK) runs again on a worker as above.
 * There a small READ first tries core_read_pieces with CORE_P_CACHED: an
 * extent wholly in the page cache is verified whole (CPU only) and stays
 * known verified, so the next READs of it are answered on the loop (without
 * it, every small READ of a warm file went to a worker: issue 17); an
 * extent not wholly cached (-EWOULDBLOCK), or one whose whole check failed
 * (its intact blocks are still served, as before), goes to core_read. */
#include <stdlib.h>

#include "nfs_int.h"
#include "srv_alloc.h"
#include "srv_err.h"

#define NFS_READ_PIECES_MIN ((uint32_t)256 * 1024)

int nfs3_read(struct nfs_req *r, void *args, void *res)
{
    READ3args *a = args;
    READ3res *o = res;
    struct core_attr at;
    struct nfs_bulk *b = NULL;
    uint64_t ino;
    bool eof = false;
    int rc = 0;

    o->status = nfs_req_fh(r, &a->file, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    uint32_t count = a->count < NFS_IO_MAX ? a->count : NFS_IO_MAX;
    if (at.type == CORE_DIR)
        rc = -EISDIR;
    else if (at.type != CORE_REG)
        rc = -EINVAL;
    else if (!(b = srv_zalloc(sizeof(*b))))
        rc = -ENOMEM;
    bool pieces = rc == 0 && (count >= NFS_READ_PIECES_MIN || r->on_loop);
    if (rc == 0 && !pieces) {
        struct core_principal p = r->p;
        p.flags |= CORE_P_CACHED;
        rc = core_read_pieces(r->srv->core, &p, ino, a->offset, count, &b->ps);
        if (rc == 0) {
            b->len = b->ps.len;
            eof = b->ps.eof;
            pieces = true;
        } else if (rc == -EWOULDBLOCK || rc == SRV_ECORRUPT || rc == -EIO) {
            rc = 0; /* not wholly cached, or the extent failed: core_read checks the blocks */
        }
    } else if (pieces) {
        rc = core_read_pieces(r->srv->core, &r->p, ino, a->offset, count, &b->ps);
        b->len = b->ps.len;
        eof = b->ps.eof;
    }
    if (rc == 0 && !pieces) {
        size_t n = 0;
        b->mem = malloc(count ? count : 1);
        rc = b->mem ? core_read(r->srv->core, &r->p, ino, a->offset, b->mem, count, &n, &eof)
                    : -ENOMEM;
        b->len = n;
    }
    o->status = nfs_req_status(r, rc);
    if (o->status != NFS3_OK) {
        if (b)
            free(b->mem);
        free(b);
        nfs_attr_post(r, &at, &o->READ3res_u.resfail.file_attributes);
        return NFS_REQ_OK;
    }
    READ3resok *ok = &o->READ3res_u.resok;
    ok->count = (count3)b->len;
    ok->eof = eof || a->offset + b->len >= at.size;
    ok->data.data_len = 0;
    ok->data.data_val = NULL;
    if (b->len > 0) {
        r->bulk = b;
        r->bulklen = b->len;
    } else {
        if (!b->mem)
            core_pieces_release(&b->ps);
        free(b->mem);
        free(b);
    }
    nfs_attr_post(r, &at, &ok->file_attributes);
    return NFS_REQ_OK;
}
