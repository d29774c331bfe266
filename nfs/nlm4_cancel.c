/* SPDX-License-Identifier: Apache-2.0
 * NLM4_CANCEL: cancel a blocked lock request: it is forgotten, and
 * NLM4_GRANTED ("no longer pending") answered, also when nothing was pending
 * (it may have been granted already: the client then refuses our GRANTED
 * callback, which releases the lock). NLM4_STALE_FH for a bad handle. A host
 * left holding nothing is forgotten (nlm_host.h). */
#include "nfs_int.h"

int nlm4_op_cancel(struct nfs_req *r, void *args, void *res)
{
    nlm4_cancargs *a = args;
    nlm4_res *o = res;
    uint32_t tenant;
    uint64_t ino;

    nlm_cookie_copy(&a->cookie, &o->cookie);
    o->stat.stat = nlm_req_file(r, &a->alock, &tenant, &ino);
    if (o->stat.stat == NLM4_GRANTED) {
        struct nfs_lock_owner own;
        nlm_owner(&a->alock, &own);
        nlm_block_cancel(r->srv, tenant, ino, &own, a->alock.l_offset, a->alock.l_len);
        nlm_host_check(r->srv, own.caller);
    }
    return NFS_REQ_OK;
}
