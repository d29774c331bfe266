/* SPDX-License-Identifier: Apache-2.0
 * NLM4_CANCEL: cancel a blocked lock request. Blocked requests are not
 * queued here (an NLM4_BLOCKED client simply retries), so there is never
 * anything to cancel: the answer is NLM4_GRANTED ("no longer pending"),
 * after checking the handle (NLM4_STALE_FH). */
#include "nfs_int.h"

int nlm4_op_cancel(struct nfs_req *r, void *args, void *res)
{
    nlm4_cancargs *a = args;
    nlm4_res *o = res;
    uint32_t tenant;
    uint64_t ino;

    nlm_cookie_copy(&a->cookie, &o->cookie);
    o->stat.stat = nlm_req_file(r, &a->alock, &tenant, &ino);
    return NFS_REQ_OK;
}
