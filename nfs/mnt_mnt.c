/* SPDX-License-Identifier: Apache-2.0
 * MOUNTPROC3_MNT (RFC 1813 5.2.1): the handle of an exported directory or
 * of a directory below one.
 * The path is normalised (repeated slashes and "." dropped; ".." refused).
 * Its export is the one, among the served exports that admit the client's
 * address, whose path is the longest whole-component prefix of it
 * (tenants_export_resolve: export paths are unambiguous by construction, and
 * exports that do not admit the client play no part, so the answer never
 * tells another tenant's export from a path that does not exist); the rest of
 * the path is walked down from the export's directory with core_lookup as the
 * call's principal (search permission checked, symbolic links not followed),
 * as knfsd and Ganesha serve "mount host:/bucket" under an export "/". An
 * export of "/" does not serve another tenant's own prefix ("/<tenant>/..."):
 * there the walk stops at the first name, answered as a missing name is
 * (NOENT, or ACCES without search permission), whether or not it exists. The
 * handle belongs to the export (its confinement rules apply); AUTH_SYS is the
 * one flavor offered. The mount is recorded for DUMP under the normalised
 * path, with its export.
 * Status: MNT3_OK; MNT3ERR_ACCES (no export admitting this client serves the
 * path, or no search permission on the way); MNT3ERR_NOENT (no such
 * directory below the export, or the export's directory is gone);
 * MNT3ERR_NOTDIR (a component or the end is not a directory, symbolic links
 * included); MNT3ERR_INVAL (".." or a relative path); MNT3ERR_NAMETOOLONG;
 * MNT3ERR_SERVERFAULT (out of memory, core error). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_path.h"

void nfs_req_peer_host(const struct nfs_req *r, char *buf, size_t len)
{
    const struct sockaddr_storage *ss = &r->peer;
    buf[0] = '\0';
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, buf, (socklen_t)len);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, buf, (socklen_t)len);
}

static void mnt_list_add(struct nfs_server *s, const char *host, const char *path,
                         uint32_t export_id)
{
    pthread_mutex_lock(&s->lock);
    for (struct nfs_mount_ent *m = s->mounts; m; m = m->next) {
        if (strcmp(m->host, host) == 0 && strcmp(m->path, path) == 0) {
            m->export_id = export_id;
            goto out;
        }
    }
    struct nfs_mount_ent *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        goto out;
    }
    snprintf(m->host, sizeof(m->host), "%s", host);
    m->export_id = export_id;
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

int mnt_path_norm(const char *in, char *out, size_t outlen)
{
    return srv_path_norm(in, out, outlen, SRV_PATH_DOT_SKIP);
}

/* Walk @p rest ("a/b") down from @p cur as the call's principal: search
 * permission checked at each step, symbolic links not followed, and the end
 * must be a directory. When @p foreign (the first name is another tenant's
 * prefix), the first name is looked up as any other, and found or not it
 * answers as a missing one. @return 0 (@p cur is the directory), or the error. */
static int mnt_walk(struct nfs_req *r, const char *rest, bool foreign, struct core_attr *cur)
{
    const char *p = rest;
    while (*p) {
        size_t n = strcspn(p, "/");
        struct core_attr next;
        if (cur->type != CORE_DIR)
            return -ENOTDIR;
        int rc = core_lookup(r->srv->core, &r->p, cur->ino, p, n, &next);
        if (rc < 0)
            return rc;
        if (foreign)
            return -ENOENT;
        *cur = next;
        p += n;
        while (*p == '/')
            p++;
    }
    return cur->type == CORE_DIR ? 0 : -ENOTDIR;
}

static mountstat3 mnt_status(int err)
{
    switch (err) {
    case -ENOENT:
    case SRV_ESTALE:
        return MNT3ERR_NOENT;
    case -EACCES:
    case -EPERM:
        return MNT3ERR_ACCES;
    case -ENOTDIR:
        return MNT3ERR_NOTDIR;
    case -ENAMETOOLONG:
        return MNT3ERR_NAMETOOLONG;
    case -EINVAL:
        return MNT3ERR_INVAL;
    default:
        return MNT3ERR_SERVERFAULT;
    }
}

int mnt_mnt(struct nfs_req *r, void *args, void *res)
{
    dirpath *argp = args;
    mountres3 *o = res;
    struct tenant_export e;
    struct core_attr root;
    char path[MNTPATHLEN + 1], host[64];
    const char *rest = "";
    size_t off = 0;
    bool foreign = false;
    int rc;

    const char *in = *argp ? *argp : "";
    nfs_req_peer_host(r, host, sizeof(host));
    if (strlen(in) > MNTPATHLEN) {
        o->fhs_status = MNT3ERR_NAMETOOLONG;
        return NFS_REQ_OK;
    }
    rc = mnt_path_norm(in[0] ? in : "/", path, sizeof(path));
    if (rc == 0)
        rc = tenants_export_resolve(r->srv->tenants, path, (struct sockaddr *)&r->peer, &e, &off,
                                    &foreign);
    if (rc < 0) {
        r->err = rc;
        o->fhs_status = mnt_status(rc);
        srv_log(INFO, NFS, "req=%08x tenant=- MNT %s by %s refused: %s", r->call.xid, in, host,
                srv_strerror(rc));
        return NFS_REQ_OK;
    }
    rest = path + off;
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
    /* Below the export's directory the client's own rights apply. */
    rc = mnt_walk(r, rest, foreign, &root);
    if (rc < 0) {
        r->err = rc;
        o->fhs_status = mnt_status(rc);
        srv_log(INFO, NFS, "req=%08x tenant=%u MNT %s by %s (export %u, then '%s') refused: %s%s",
                r->call.xid, e.tenant, path, host, e.id, rest, srv_strerror(rc),
                foreign ? " (another tenant's prefix)" : "");
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
    mnt_list_add(r->srv, host, path, e.id);
    srv_log(INFO, NFS, "req=%08x tenant=%u MNT %s by %s (export %u %s)", r->call.xid, e.tenant,
            path, host, e.id, e.path);
    return NFS_REQ_OK;
}
