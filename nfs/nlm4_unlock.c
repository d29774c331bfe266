/* SPDX-License-Identifier: Apache-2.0
 * NLM4_UNLOCK: release the owner's locks on a range (splitting them).
 * Releasing what is not held succeeds, as the protocol requires. Blocked
 * requests that can now be granted are granted (with a GRANTED callback).
 * A host left holding nothing is forgotten (nlm_host.h). Allowed during the
 * grace period (it only releases the caller's own, reclaimed, locks).
 * Status: NLM4_GRANTED; NLM4_STALE_FH; NLM4_DENIED_NOLOCKS (a split needed
 * memory that was not there; nothing released). */
#include "nfs_int.h"

int nlm4_op_unlock(struct nfs_req *r, void *args, void *res)
{
    nlm4_unlockargs *a = args;
    nlm4_res *o = res;
    struct nfs_lock_owner own;
    uint32_t tenant;
    uint64_t ino;

    nlm_cookie_copy(&a->cookie, &o->cookie);
    o->stat.stat = nlm_req_file(r, &a->alock, &tenant, &ino);
    if (o->stat.stat != NLM4_GRANTED)
        return NFS_REQ_OK;
    nlm_owner(&a->alock, &own);
    if (nfs_locks_unlock(r->srv->locks, tenant, ino, &own, a->alock.l_offset, a->alock.l_len) < 0)
        o->stat.stat = NLM4_DENIED_NOLOCKS;
    else
        nlm_block_retry(r->srv); /* blocked requests may go now */
    nlm_host_check(r->srv, own.caller);
    return NFS_REQ_OK;
}
