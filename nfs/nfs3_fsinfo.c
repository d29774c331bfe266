/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_FSINFO (RFC 1813 3.3.19): static limits of the server.
 * Reads and writes up to 1 MiB (what the default record size carries with
 * room for headers), preferred 1 MiB in 4 KiB multiples; READDIR pages of
 * 64 KiB; files up to 2^63-1 bytes; nanosecond times; hard links and
 * symlinks supported, settable times, homogeneous pathconf.
 * Status: NFS3_OK; NFS3ERR_STALE, NFS3ERR_BADHANDLE; NFS3ERR_IO. */
#include <stdint.h>

#include "nfs_int.h"

int nfs3_fsinfo(struct nfs_req *r, void *args, void *res)
{
    FSINFO3args *a = args;
    FSINFO3res *o = res;
    struct core_attr at;
    uint64_t ino;

    o->status = nfs_req_fh(r, &a->fsroot, &ino, &at);
    if (o->status != NFS3_OK)
        return NFS_REQ_OK;
    FSINFO3resok *ok = &o->FSINFO3res_u.resok;
    nfs_attr_post(r, &at, &ok->obj_attributes);
    ok->rtmax = NFS_IO_MAX;
    ok->rtpref = NFS_IO_MAX;
    ok->rtmult = 4096;
    ok->wtmax = NFS_IO_MAX;
    ok->wtpref = NFS_IO_MAX;
    ok->wtmult = 4096;
    ok->dtpref = NFS_DIR_PREF;
    ok->maxfilesize = INT64_MAX;
    ok->time_delta.seconds = 0;
    ok->time_delta.nseconds = 1;
    ok->properties = FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
    return NFS_REQ_OK;
}
