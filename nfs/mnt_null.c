/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_NULL (RFC 1813 5.2.0): ping; no arguments, no results. */
#include "nfs_int.h"

int mnt_null(struct nfs_req *r, void *args, void *res)
{
    return NFS_REQ_OK;
}
