/* SPDX-License-Identifier: Apache-2.0
 * NLM4_TEST: would this lock be granted? Nothing changes.
 * Status: NLM4_GRANTED; NLM4_DENIED with the conflicting holder (its
 * exclusivity, svid, owner handle and range); NLM4_STALE_FH;
 * NLM4_DENIED_GRACE_PERIOD during the grace period after a restart (the
 * answer could change once the clients have reclaimed: nlm_host.h). */
#include <stdlib.h>
#include <string.h>

#include "nfs_int.h"

int nlm4_op_test(struct nfs_req *r, void *args, void *res)
{
    nlm4_testargs *a = args;
    nlm4_testres *o = res;
    struct nfs_lock_owner own;
    struct nfs_lock_holder *h;
    uint32_t tenant;
    uint64_t ino;

    nlm_cookie_copy(&a->cookie, &o->cookie);
    o->stat.stat = nlm_req_file(r, &a->alock, &tenant, &ino);
    if (o->stat.stat != NLM4_GRANTED)
        return NFS_REQ_OK;
    if (nlm_grace_active(r->srv)) {
        o->stat.stat = NLM4_DENIED_GRACE_PERIOD;
        return NFS_REQ_OK;
    }
    h = malloc(sizeof(*h));
    if (!h) {
        o->stat.stat = NLM4_DENIED_NOLOCKS;
        return NFS_REQ_OK;
    }
    nlm_owner(&a->alock, &own);
    if (nfs_locks_test(r->srv->locks, tenant, ino, &own, a->exclusive, a->alock.l_offset,
                       a->alock.l_len, h) == -EAGAIN) {
        nlm4_holder *out = &o->stat.nlm4_testrply_u.holder;
        o->stat.stat = NLM4_DENIED;
        out->exclusive = h->exclusive;
        out->svid = h->svid;
        out->l_offset = h->offset;
        out->l_len = h->len;
        out->oh.nlm4_netobj_val = h->ohlen ? malloc(h->ohlen) : NULL;
        if (out->oh.nlm4_netobj_val) {
            memcpy(out->oh.nlm4_netobj_val, h->oh, h->ohlen);
            out->oh.nlm4_netobj_len = (u_int)h->ohlen;
        }
    }
    free(h);
    return NFS_REQ_OK;
}
