/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_UMNT (RFC 1813 5.2.3): forget the client's mount of a path.
 * No results; unknown mounts are ignored. */
#include <string.h>

#include "nfs_int.h"

int mnt_umnt(struct nfs_req *r, void *args, void *res)
{
    dirpath *argp = args;
    char host[64], path[MNTPATHLEN + 1];
    const char *in = *argp ? *argp : "";
    size_t len = strlen(in);
    if (len > MNTPATHLEN)
        return NFS_REQ_OK;
    memcpy(path, in, len + 1);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    nfs_req_peer_host(r, host, sizeof(host));
    mnt_list_remove(r->srv, host, len ? path : "/");
    return NFS_REQ_OK;
}
