/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_UMNTALL (RFC 1813 5.2.4): forget every mount of the client.
 * No arguments, no results. */
#include "nfs_int.h"

int mnt_umntall(struct nfs_req *r, void *args, void *res)
{
    char host[64];
    nfs_req_peer_host(r, host, sizeof(host));
    mnt_list_remove(r->srv, host, NULL);
    return NFS_REQ_OK;
}
