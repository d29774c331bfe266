/* SPDX-License-Identifier: Apache-2.0
 * NFSPROC3_NULL (RFC 1813 3.3.0): no work, no arguments, no results; clients
 * use it to ping the server. Always answered. */
#include "nfs_int.h"

int nfs3_null(struct nfs_req *r, void *args, void *res)
{
    return NFS_REQ_OK;
}
