/* SPDX-License-Identifier: Apache-2.0
 * nfs_export: from a client's file handle to (export, principal, inode).
 *
 * Every handle names its export; the export must still exist, be served (not
 * suspended) and admit the client's address (tenants_export_get), and must
 * belong to the tenant named in the handle, or the handle is STALE: a handle
 * of another tenant or of an export this client may not use never resolves.
 * The principal is built from the AUTH_SYS credential and the export's rules:
 * all_squash maps everyone,
 * root_squash maps uid 0, to the export's anonymous uid/gid; AUTH_NONE is
 * anonymous; an unsquashed root acts as the tenant's superuser; a read-only
 * export marks the principal CORE_P_READONLY so the core answers -EROFS, and so
 * does a handle below a read-only tier policy (tier_settings.h).
 * Thread: worker threads (called from procedures). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tier_settings.h"

void nfs_req_bind_export(struct nfs_req *r, const struct tenant_export *e)
{
    const struct nfs_cred *cr = &r->call.cred;
    struct core_principal *p = &r->p;

    r->exp.id = e->id;
    r->exp.tenant = e->tenant;
    r->exp.dir = e->dir;
    r->have_export = true;
    memset(p, 0, sizeof(*p));
    p->tenant = e->tenant;
    bool anon = cr->flavor != AUTH_SYS || (e->flags & TENANT_EXPORT_ALL_SQUASH) ||
                (cr->uid == 0 && (e->flags & TENANT_EXPORT_ROOT_SQUASH));
    if (anon) {
        p->uid = e->anon_uid;
        p->gid = e->anon_gid;
    } else {
        p->uid = cr->uid;
        p->gid = cr->gid;
        p->ngids = cr->ngids < CORE_MAX_GIDS ? cr->ngids : CORE_MAX_GIDS;
        memcpy(p->gids, cr->gids, p->ngids * sizeof(p->gids[0]));
        if (cr->uid == 0)
            p->flags |= CORE_P_SUPER;
    }
    if (e->flags & TENANT_EXPORT_RO)
        p->flags |= CORE_P_READONLY;
    if (r->on_loop)
        p->flags |= CORE_P_NOWAIT;
}

/* The last handle decoded well on this thread (nfs__fh_decode). */
static __thread struct {
    bool valid;
    uint8_t key[NFS_FH_KEYLEN];
    uint8_t raw[NFS3_FHSIZE];
    size_t len;
    struct nfs_fh h;
} fh_memo;

void nfs__fh_memo_reset(void)
{
    fh_memo.valid = false;
}

int nfs__fh_decode(const uint8_t key[NFS_FH_KEYLEN], const void *data, size_t len,
                   struct nfs_fh *out)
{
    if (fh_memo.valid && fh_memo.len == len && memcmp(fh_memo.raw, data, len) == 0 &&
        memcmp(fh_memo.key, key, NFS_FH_KEYLEN) == 0) {
        *out = fh_memo.h;
        return 0;
    }
    int rc = nfs_fh_decode(key, data, len, out);
    fh_memo.valid = rc == 0 && len <= sizeof(fh_memo.raw);
    if (fh_memo.valid) {
        memcpy(fh_memo.key, key, NFS_FH_KEYLEN);
        memcpy(fh_memo.raw, data, len);
        fh_memo.len = len;
        fh_memo.h = *out;
    }
    return rc;
}

nfsstat3 nfs_req_fh(struct nfs_req *r, const nfs_fh3 *fh, uint64_t *ino, struct core_attr *attr)
{
    struct nfs_fh h;
    struct core_attr a;
    int rc = nfs__fh_decode(r->srv->fh_key, fh->data.data_val, fh->data.data_len, &h);
    if (rc == -EBADMSG)
        return NFS3ERR_BADHANDLE;
    if (rc < 0) {
        srv_log(INFO, NFS, "req=%08x tenant=- %s from %s: forged or foreign file handle",
                r->call.xid, r->desc->name, r->conn_peer);
        return NFS3ERR_STALE;
    }
    if (r->have_export) {
        if (h.export_id != r->exp.id)
            return h.tenant == r->exp.tenant ? NFS3ERR_XDEV : NFS3ERR_STALE;
    } else {
        struct tenant_export e;
        rc = tenants_export_get(r->srv->tenants, h.export_id, (struct sockaddr *)&r->peer, &e);
        if (rc < 0 || e.tenant != h.tenant) {
            srv_log(INFO, NFS, "req=%08x tenant=%u %s from %s: export %u %s", r->call.xid,
                    h.tenant, r->desc->name, r->conn_peer, h.export_id,
                    rc == -EACCES  ? "does not admit this client"
                    : rc == -EBUSY ? "is suspended (it conflicts with an older export)"
                    : rc < 0       ? "no longer exists"
                                   : "belongs to another tenant");
            return NFS3ERR_STALE;
        }
        nfs_req_bind_export(r, &e);
    }
    rc = core_getattr(r->srv->core, &r->p, h.ino, h.gen, &a);
    if (rc < 0)
        return nfs_req_status(r, rc);
    *ino = h.ino;
    if (!r->bucket)
        r->bucket = a.bucket;
    /* a read-only tier policy (read_only, a *_RO preset) on the bucket or a directory
     * above: every change through this handle answers NFS3ERR_ROFS */
    if (a.bucket && tier_settings_ro_maybe(a.bucket) &&
        tier_settings_readonly(core_meta(r->srv->core), a.ino))
        r->p.flags |= CORE_P_READONLY;
    if (attr)
        *attr = a;
    return NFS3_OK;
}

void nfs_req_fh_put(const struct nfs_req *r, const struct core_attr *a, uint8_t *out)
{
    struct nfs_fh h = {.export_id = r->exp.id, .tenant = r->exp.tenant, .ino = a->ino,
                       .gen = a->gen};
    nfs_fh_encode(r->srv->fh_key, &h, out);
}

int nfs_req_mkfh(struct nfs_req *r, const struct core_attr *a, nfs_fh3 *out)
{
    out->data.data_val = malloc(NFS_FH_LEN);
    if (!out->data.data_val) {
        out->data.data_len = 0;
        return -ENOMEM;
    }
    nfs_req_fh_put(r, a, (uint8_t *)out->data.data_val);
    out->data.data_len = NFS_FH_LEN;
    return 0;
}

nfsstat3 nfs_req_status(struct nfs_req *r, int err)
{
    if (err == 0)
        return NFS3_OK;
    if (err == -EWOULDBLOCK && r->on_loop) {
        r->wouldblock = true; /* the transport runs the call again on a worker */
        return NFS3ERR_JUKEBOX;
    }
    r->err = err;
    int st = srv_err_nfs3(err);
    if (st == NFS3ERR_IO || st == NFS3ERR_SERVERFAULT)
        srv_log(ERROR, NFS, "req=%08x tenant=%u %s from %s failed: %s", r->call.xid, r->p.tenant,
                r->desc->name, r->conn_peer, srv_strerror(err));
    return (nfsstat3)st;
}
