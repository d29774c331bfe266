/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_UMNT (RFC 1813 5.2.3): forget the client's mount of a path
 * (normalised as MNT records it). No results; unknown mounts and paths MNT
 * would refuse are ignored. */
#include <string.h>

#include "nfs_int.h"

int mnt_umnt(struct nfs_req *r, void *args, void *res)
{
    dirpath *argp = args;
    char host[64], path[MNTPATHLEN + 1];
    const char *in = *argp ? *argp : "";
    if (strlen(in) > MNTPATHLEN || mnt_path_norm(in[0] ? in : "/", path, sizeof(path)) < 0)
        return NFS_REQ_OK;
    nfs_req_peer_host(r, host, sizeof(host));
    mnt_list_remove(r->srv, host, path);
    return NFS_REQ_OK;
}
