/* SPDX-License-Identifier: Apache-2.0
 * SM_STAT (NSM): our status number, which grows by 2 at every start (odd:
 * up). This monitor does not monitor other hosts on request (SM_MON and its
 * kin are for a host's own lock manager), so res_stat is stat_fail, as the
 * protocol defines for "will not monitor"; the state is still returned. */
#include "nfs_int.h"

int nsm_op_stat(struct nfs_req *r, void *args, void *res)
{
    sm_stat_res *o = res;
    o->res_stat = stat_fail;
    o->state = r->srv->nsm_state;
    return NFS_REQ_OK;
}
