/* SPDX-License-Identifier: Apache-2.0
 * NLM4_LOCK and NLM4_NM_LOCK (RFC 1813 Appendix II; X/Open XNFS): take a
 * byte-range lock on a file named by its NFS handle.
 * Status: NLM4_GRANTED; NLM4_DENIED (conflict, non-blocking request);
 * NLM4_BLOCKED (conflict, blocking request: remembered, and granted with a
 * GRANTED callback once possible, see nlm_grant.c); NLM4_STALE_FH (handle does not
 * resolve for this client); NLM4_ROFS (exclusive lock on a read-only
 * export); NLM4_DENIED_NOLOCKS (out of memory, or the client host could not
 * be remembered in the store); NLM4_DENIED_GRACE_PERIOD (a plain lock during
 * the grace period after a restart, or a reclaim outside it); NLM4_FAILED
 * (owner handle or caller_name too long).
 * Locks live in memory; what survives a restart is the list of client hosts
 * that held them (nlm_host.h): LOCK remembers its caller_name durably before
 * granting (NM_LOCK, the unmonitored form, does not), and after a restart the
 * server sends those hosts SM_NOTIFY and, for nlm_grace_period seconds,
 * grants only reclaims (reclaim=true), so clients get their locks back before
 * anyone else can take them (docs/nfs.md). A conflicting reclaim answers
 * NLM4_DENIED, never NLM4_BLOCKED. This file also holds the helpers the other
 * NLM procedures share. */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"
#include "srv_log.h"

nlm4_stats nlm_req_file(struct nfs_req *r, const nlm4_lock *l, uint32_t *tenant, uint64_t *ino)
{
    nfs_fh3 fh = {.data = {.data_len = l->fh.nlm4_netobj_len, .data_val = l->fh.nlm4_netobj_val}};
    struct core_attr a;
    if (nfs_req_fh(r, &fh, ino, &a) != NFS3_OK)
        return NLM4_STALE_FH;
    *tenant = r->exp.tenant;
    return NLM4_GRANTED;
}

void nlm_owner(const nlm4_lock *l, struct nfs_lock_owner *o)
{
    o->caller = l->caller_name ? l->caller_name : "";
    o->callerlen = strlen(o->caller);
    o->svid = l->svid;
    o->oh = l->oh.nlm4_netobj_val;
    o->ohlen = l->oh.nlm4_netobj_len;
    o->from = NULL;
}

int nlm_cookie_copy(const nlm4_netobj *in, nlm4_netobj *out)
{
    out->nlm4_netobj_len = 0;
    out->nlm4_netobj_val = NULL;
    if (in->nlm4_netobj_len == 0)
        return 0;
    out->nlm4_netobj_val = malloc(in->nlm4_netobj_len);
    if (!out->nlm4_netobj_val)
        return -ENOMEM;
    memcpy(out->nlm4_netobj_val, in->nlm4_netobj_val, in->nlm4_netobj_len);
    out->nlm4_netobj_len = in->nlm4_netobj_len;
    return 0;
}

int nlm4_op_lock(struct nfs_req *r, void *args, void *res)
{
    nlm4_lockargs *a = args;
    nlm4_res *o = res;
    struct nfs_lock_owner own;
    uint32_t tenant;
    uint64_t ino;

    nlm_cookie_copy(&a->cookie, &o->cookie);
    o->stat.stat = nlm_req_file(r, &a->alock, &tenant, &ino);
    if (o->stat.stat != NLM4_GRANTED)
        return NFS_REQ_OK;
    if (a->exclusive && (r->p.flags & CORE_P_READONLY)) {
        o->stat.stat = NLM4_ROFS;
        return NFS_REQ_OK;
    }
    nlm_owner(&a->alock, &own);
    if (nlm_grace_refuses(nlm_grace_active(r->srv), a->reclaim)) {
        o->stat.stat = NLM4_DENIED_GRACE_PERIOD;
        srv_log(DEBUG, NFS, "req=%08x tenant=%u NLM LOCK%s by %s/%d: %s", r->call.xid, tenant,
                a->reclaim ? " reclaim" : "", own.caller, own.svid,
                a->reclaim ? "no grace period now" : "grace period: reclaims only");
        return NFS_REQ_OK;
    }
    /* NM_LOCK is the unmonitored form: its host is not remembered. */
    bool monitor = r->call.proc != NLMPROC4_NM_LOCK;
    int rc = monitor ? nlm_host_hold(r, own.caller) : 0;
    if (rc < 0) {
        o->stat.stat = rc == -ENAMETOOLONG || rc == -EINVAL ? NLM4_FAILED : NLM4_DENIED_NOLOCKS;
        return NFS_REQ_OK;
    }
    uint8_t from[NFS_LOCK_FROM_LEN];
    nlm_addr_key(&r->peer, from);
    own.from = from; /* only this address may free the lock by host (nlm_host_release) */
    rc = nfs_locks_lock(r->srv->locks, tenant, ino, &own, a->exclusive, a->alock.l_offset,
                        a->alock.l_len, NULL);
    switch (rc) {
    case 0:
        o->stat.stat = NLM4_GRANTED;
        if (a->reclaim)
            nlm_host_reclaimed(r->srv);
        break;
    case -EAGAIN:
        /* A reclaim that conflicts (with another reclaim) is refused, not queued. */
        o->stat.stat = a->block && !a->reclaim ? NLM4_BLOCKED : NLM4_DENIED;
        if (o->stat.stat == NLM4_BLOCKED)
            nlm_block_add(r, a, tenant, ino);
        break;
    case -ENOMEM:
        o->stat.stat = NLM4_DENIED_NOLOCKS;
        break;
    default:
        o->stat.stat = NLM4_FAILED;
        break;
    }
    if (monitor)
        nlm_host_unhold(r->srv, own.caller, rc != 0);
    srv_log(DEBUG, NFS, "req=%08x tenant=%u NLM LOCK%s %s ino=%llu [%llu+%llu] %s by %s/%d: %d",
            r->call.xid, tenant, a->reclaim ? " reclaim" : "", a->exclusive ? "excl" : "shared",
            (unsigned long long)ino,
            (unsigned long long)a->alock.l_offset, (unsigned long long)a->alock.l_len,
            a->block ? "blocking" : "try", own.caller, own.svid, o->stat.stat);
    return NFS_REQ_OK;
}
