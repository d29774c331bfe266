/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs/nfs_rpc.c's dispatch tables: the QoS class each
 * procedure's descriptor gives its calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nfs_int.h"

static void test_qos_classes(void **state)
{
    (void)state;
    assert_int_equal(nfs3_procs[NFSPROC3_NULL].qos, NFS_QOS_NONE);
    assert_int_equal(nfs3_procs[NFSPROC3_READ].qos, NFS_QOS_READ);
    assert_int_equal(nfs3_procs[NFSPROC3_WRITE].qos, NFS_QOS_WRITE);
    /* every other NFSv3 procedure is one metadata op */
    for (size_t i = 1; i < sizeof(nfs3_procs) / sizeof(nfs3_procs[0]); i++) {
        assert_non_null(nfs3_procs[i].fn);
        if (i != NFSPROC3_READ && i != NFSPROC3_WRITE)
            assert_int_equal(nfs3_procs[i].qos, NFS_QOS_META);
    }
    /* MOUNT, NLM and NSM calls are not admitted */
    for (size_t i = 0; i < sizeof(mnt_procs) / sizeof(mnt_procs[0]); i++)
        assert_int_equal(mnt_procs[i].qos, NFS_QOS_NONE);
    for (size_t i = 0; i < sizeof(nlm_procs) / sizeof(nlm_procs[0]); i++)
        assert_int_equal(nlm_procs[i].qos, NFS_QOS_NONE);
    for (size_t i = 0; i < sizeof(nsm_procs) / sizeof(nsm_procs[0]); i++)
        assert_int_equal(nsm_procs[i].qos, NFS_QOS_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qos_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
