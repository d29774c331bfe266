/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_drc: new / in-progress / done, key fields, eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "nfs_drc.h"

static struct sockaddr_in addr(const char *ip, int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static void test_lifecycle(void **state)
{
    struct nfs_drc *d;
    struct nfs_drc_key k;
    struct sockaddr_in a = addr("10.0.0.1", 700);
    void *rep = NULL;
    size_t len = 0;
    assert_int_equal(nfs_drc_new(&d, 16), 0);
    nfs_drc_key_make(&k, (struct sockaddr *)&a, 1, 100003, 8, "args", 4);
    assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_NEW);
    assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_INPROGRESS);
    nfs_drc_finish(d, &k, "reply", 5);
    assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_DONE);
    assert_int_equal(len, 5);
    assert_memory_equal(rep, "reply", 5);
    free(rep);

    /* Same xid from another port of the same host (reconnect): still a duplicate. */
    struct sockaddr_in a2 = addr("10.0.0.1", 900);
    struct nfs_drc_key k2;
    nfs_drc_key_make(&k2, (struct sockaddr *)&a2, 1, 100003, 8, "args", 4);
    assert_int_equal(nfs_drc_start(d, &k2, &rep, &len), NFS_DRC_DONE);
    free(rep);

    /* Another host, other args or another xid: new calls. */
    struct sockaddr_in b = addr("10.0.0.2", 700);
    nfs_drc_key_make(&k2, (struct sockaddr *)&b, 1, 100003, 8, "args", 4);
    assert_int_equal(nfs_drc_start(d, &k2, &rep, &len), NFS_DRC_NEW);
    nfs_drc_key_make(&k2, (struct sockaddr *)&a, 1, 100003, 8, "argz", 4);
    assert_int_equal(nfs_drc_start(d, &k2, &rep, &len), NFS_DRC_NEW);
    nfs_drc_key_make(&k2, (struct sockaddr *)&a, 2, 100003, 8, "args", 4);
    assert_int_equal(nfs_drc_start(d, &k2, &rep, &len), NFS_DRC_NEW);
    /* Forgetting an in-progress entry makes the next one new again. */
    nfs_drc_finish(d, &k2, NULL, 0);
    assert_int_equal(nfs_drc_start(d, &k2, &rep, &len), NFS_DRC_NEW);
    nfs_drc_free(d);
}

static void test_eviction(void **state)
{
    struct nfs_drc *d;
    struct nfs_drc_key k;
    struct sockaddr_in a = addr("127.0.0.1", 1);
    void *rep;
    size_t len;
    assert_int_equal(nfs_drc_new(&d, 8), 0);
    for (uint32_t xid = 0; xid < 100; xid++) {
        nfs_drc_key_make(&k, (struct sockaddr *)&a, xid, 100003, 12, NULL, 0);
        assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_NEW);
        nfs_drc_finish(d, &k, &xid, sizeof(xid));
        assert_true(nfs_drc_count(d) <= 8);
    }
    /* The newest entries survive, the oldest are gone. */
    nfs_drc_key_make(&k, (struct sockaddr *)&a, 99, 100003, 12, NULL, 0);
    assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_DONE);
    assert_int_equal(*(uint32_t *)rep, 99);
    free(rep);
    nfs_drc_key_make(&k, (struct sockaddr *)&a, 0, 100003, 12, NULL, 0);
    assert_int_equal(nfs_drc_start(d, &k, &rep, &len), NFS_DRC_NEW);
    nfs_drc_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_eviction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
