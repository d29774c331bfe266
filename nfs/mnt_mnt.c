/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_MNT (RFC 1813 5.2.1): the root handle of an export.
 * The export is found by path among those that admit the client's address
 * (tenants_export_find); trailing slashes are ignored. The handle names the
 * export's directory; AUTH_SYS is the one flavor offered. The mount is
 * recorded for DUMP.
 * Status: MNT3_OK; MNT3ERR_NOENT (no such export, or its directory is
 * gone); MNT3ERR_ACCES (export does not admit this client);
 * MNT3ERR_NAMETOOLONG; MNT3ERR_SERVERFAULT (out of memory, core error). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"

void nfs_req_peer_host(const struct nfs_req *r, char *buf, size_t len)
{
    const struct sockaddr_storage *ss = &r->peer;
    buf[0] = '\0';
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, buf, (socklen_t)len);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, buf, (socklen_t)len);
}

static void mnt_list_add(struct nfs_server *s, const char *host, const char *path)
{
    pthread_mutex_lock(&s->lock);
    for (struct nfs_mount_ent *m = s->mounts; m; m = m->next)
        if (strcmp(m->host, host) == 0 && strcmp(m->path, path) == 0)
            goto out;
    struct nfs_mount_ent *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        goto out;
    }
    snprintf(m->host, sizeof(m->host), "%s", host);
    m->next = s->mounts;
    s->mounts = m;
out:
    pthread_mutex_unlock(&s->lock);
}

void mnt_list_remove(struct nfs_server *s, const char *host, const char *path)
{
    pthread_mutex_lock(&s->lock);
    struct nfs_mount_ent **pp = &s->mounts;
    while (*pp) {
        struct nfs_mount_ent *m = *pp;
        if (strcmp(m->host, host) == 0 && (!path || strcmp(m->path, path) == 0)) {
            *pp = m->next;
            free(m->path);
            free(m);
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void mnt_list_free(struct nfs_server *s)
{
    struct nfs_mount_ent *m = s->mounts;
    while (m) {
        struct nfs_mount_ent *n = m->next;
        free(m->path);
        free(m);
        m = n;
    }
    s->mounts = NULL;
}

int mnt_mnt(struct nfs_req *r, void *args, void *res)
{
    dirpath *argp = args;
    mountres3 *o = res;
    struct tenant_export e;
    struct core_attr root;
    char path[MNTPATHLEN + 1], host[64];
    int rc;

    const char *in = *argp ? *argp : "";
    size_t len = strlen(in);
    if (len > MNTPATHLEN) {
        o->fhs_status = MNT3ERR_NAMETOOLONG;
        return NFS_REQ_OK;
    }
    memcpy(path, in, len + 1);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    if (len == 0)
        strcpy(path, "/");
    nfs_req_peer_host(r, host, sizeof(host));

    rc = tenants_export_find(r->srv->tenants, path, (struct sockaddr *)&r->peer, &e);
    if (rc < 0) {
        r->err = rc;
        o->fhs_status = rc == -ENOENT ? MNT3ERR_NOENT : rc == -EACCES ? MNT3ERR_ACCES
                                                                       : MNT3ERR_SERVERFAULT;
        srv_log(INFO, NFS, "req=%08x tenant=- MNT %s by %s refused: %s", r->call.xid, path, host,
                srv_strerror(rc));
        return NFS_REQ_OK;
    }
    nfs_req_bind_export(r, &e);
    /* The server resolves the export's own directory, whatever its modes. */
    struct core_principal sup = {.tenant = e.tenant, .flags = CORE_P_SUPER};
    rc = core_lookup(r->srv->core, &sup, e.dir, ".", 1, &root);
    if (rc < 0) {
        r->err = rc;
        o->fhs_status = rc == -ENOENT || rc == SRV_ESTALE ? MNT3ERR_NOENT : MNT3ERR_SERVERFAULT;
        srv_log(WARN, NFS, "req=%08x tenant=%u MNT %s: export %u directory %llu unusable: %s",
                r->call.xid, e.tenant, path, e.id, (unsigned long long)e.dir, srv_strerror(rc));
        return NFS_REQ_OK;
    }
    mountres3_ok *ok = &o->mountres3_u.mountinfo;
    nfs_fh3 fh;
    int *flavors = malloc(sizeof(int));
    if (!flavors || nfs_req_mkfh(r, &root, &fh) < 0) {
        free(flavors);
        r->err = -ENOMEM;
        o->fhs_status = MNT3ERR_SERVERFAULT;
        return NFS_REQ_OK;
    }
    flavors[0] = AUTH_SYS;
    o->fhs_status = MNT3_OK;
    ok->fhandle.fhandle3_len = fh.data.data_len;
    ok->fhandle.fhandle3_val = fh.data.data_val;
    ok->auth_flavors.auth_flavors_len = 1;
    ok->auth_flavors.auth_flavors_val = flavors;
    mnt_list_add(r->srv, host, path);
    srv_log(INFO, NFS, "req=%08x tenant=%u MNT %s by %s (export %u)", r->call.xid, e.tenant, path,
            host, e.id);
    return NFS_REQ_OK;
}
