/* SPDX-License-Identifier: Apache-2.0
 * NLM4_LOCK and NLM4_NM_LOCK (RFC 1813 Appendix II; X/Open XNFS): take a
 * byte-range lock on a file named by its NFS handle.
 * Status: NLM4_GRANTED; NLM4_DENIED (conflict, non-blocking request);
 * NLM4_BLOCKED (conflict, blocking request: remembered, and granted with a
 * GRANTED callback once possible, see nlm_grant.c); NLM4_STALE_FH (handle does not
 * resolve for this client); NLM4_ROFS (exclusive lock on a read-only
 * export); NLM4_DENIED_NOLOCKS (out of memory); NLM4_FAILED (owner handle too
 * long). There is no grace period: locks live in memory only and a restart
 * drops them (docs/nfs.md). This file also holds the helpers the other NLM
 * procedures share. */
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
    int rc = nfs_locks_lock(r->srv->locks, tenant, ino, &own, a->exclusive, a->alock.l_offset,
                            a->alock.l_len, NULL);
    switch (rc) {
    case 0:
        o->stat.stat = NLM4_GRANTED;
        break;
    case -EAGAIN:
        o->stat.stat = a->block ? NLM4_BLOCKED : NLM4_DENIED;
        if (a->block)
            nlm_block_add(r, a, tenant, ino);
        break;
    case -ENOMEM:
        o->stat.stat = NLM4_DENIED_NOLOCKS;
        break;
    default:
        o->stat.stat = NLM4_FAILED;
        break;
    }
    srv_log(DEBUG, NFS, "req=%08x tenant=%u NLM LOCK %s ino=%llu [%llu+%llu] %s by %s/%d: %d",
            r->call.xid, tenant, a->exclusive ? "excl" : "shared", (unsigned long long)ino,
            (unsigned long long)a->alock.l_offset, (unsigned long long)a->alock.l_len,
            a->block ? "blocking" : "try", own.caller, own.svid, o->stat.stat);
    return NFS_REQ_OK;
}
