/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_lock: conflicts between owners, shared vs exclusive,
 * replacement and splitting within one owner, to-EOF ranges, FREE_ALL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>

#include "nfs_lock.h"

static struct nfs_lock_owner own(const char *host, int32_t svid)
{
    struct nfs_lock_owner o = {host, strlen(host), svid, &svid, 0};
    o.oh = host; /* any bytes: the owner handle */
    o.ohlen = strlen(host);
    return o;
}

static void test_exclusive_and_shared(void **state)
{
    struct nfs_locks *t;
    struct nfs_lock_holder h;
    struct nfs_lock_owner a = own("hostA", 1), b = own("hostB", 2), a2 = own("hostA", 3);
    assert_int_equal(nfs_locks_new(&t), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 10, &a, true, 0, 100, NULL), 0);
    /* Same range, other owner (also another process of the same host): conflict. */
    assert_int_equal(nfs_locks_lock(t, 1, 10, &b, false, 50, 10, &h), -EAGAIN);
    assert_true(h.exclusive);
    assert_int_equal(h.svid, 1);
    assert_true(h.offset == 0 && h.len == 100);
    assert_int_equal(nfs_locks_test(t, 1, 10, &a2, false, 99, 1, NULL), -EAGAIN);
    /* Adjacent range, another file, another tenant: free. */
    assert_int_equal(nfs_locks_test(t, 1, 10, &b, true, 100, 5, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 11, &b, true, 0, 100, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 2, 10, &b, true, 0, 100, NULL), 0);
    /* The owner itself never conflicts with itself. */
    assert_int_equal(nfs_locks_test(t, 1, 10, &a, true, 0, 100, NULL), 0);
    assert_int_equal(nfs_locks_unlock(t, 1, 10, &a, 0, 100), 0);
    /* Shared locks share; an exclusive one then conflicts. */
    assert_int_equal(nfs_locks_lock(t, 1, 10, &a, false, 0, 0, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 10, &b, false, 10, 20, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 10, &a2, true, 15, 1, &h), -EAGAIN);
    assert_false(h.exclusive);
    nfs_locks_free(t);
}

static void test_to_eof_and_split(void **state)
{
    struct nfs_locks *t;
    struct nfs_lock_holder h;
    struct nfs_lock_owner a = own("hostA", 1), b = own("hostB", 2);
    assert_int_equal(nfs_locks_new(&t), 0);
    /* len 0 = to the end of the file, whatever it becomes. */
    assert_int_equal(nfs_locks_lock(t, 1, 5, &a, true, 1000, 0, NULL), 0);
    assert_int_equal(nfs_locks_test(t, 1, 5, &b, false, UINT64_MAX - 10, 5, &h), -EAGAIN);
    assert_true(h.offset == 1000 && h.len == 0);
    assert_int_equal(nfs_locks_test(t, 1, 5, &b, true, 0, 1000, NULL), 0);
    /* Unlocking the middle splits the lock in two. */
    assert_int_equal(nfs_locks_unlock(t, 1, 5, &a, 2000, 1000), 0);
    assert_int_equal(nfs_locks_count(t), 2);
    assert_int_equal(nfs_locks_test(t, 1, 5, &b, true, 2000, 1000, NULL), 0);
    assert_int_equal(nfs_locks_test(t, 1, 5, &b, true, 1999, 1, NULL), -EAGAIN);
    assert_int_equal(nfs_locks_test(t, 1, 5, &b, true, 3000, 1, &h), -EAGAIN);
    assert_true(h.offset == 3000 && h.len == 0);
    /* Downgrading part of it to shared: others may share that part only. */
    assert_int_equal(nfs_locks_lock(t, 1, 5, &a, false, 1000, 500, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 5, &b, false, 1100, 100, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 5, &b, false, 1500, 100, NULL), -EAGAIN);
    /* Unlock everything of a: b's shared lock remains. */
    assert_int_equal(nfs_locks_unlock(t, 1, 5, &a, 0, 0), 0);
    assert_int_equal(nfs_locks_count(t), 1);
    assert_int_equal(nfs_locks_lock(t, 1, 5, &a, true, 1500, 100, NULL), 0);
    /* Unlocking what is not held is fine. */
    assert_int_equal(nfs_locks_unlock(t, 1, 99, &a, 0, 0), 0);
    nfs_locks_free(t);
}

static void test_free_host(void **state)
{
    struct nfs_locks *t;
    struct nfs_lock_owner a1 = own("hostA", 1), a2 = own("hostA", 2), b = own("hostB", 3);
    assert_int_equal(nfs_locks_new(&t), 0);
    for (uint64_t ino = 1; ino <= 50; ino++) {
        assert_int_equal(nfs_locks_lock(t, 1, ino, &a1, true, 0, 10, NULL), 0);
        assert_int_equal(nfs_locks_lock(t, 1, ino, &a2, true, 10, 10, NULL), 0);
        assert_int_equal(nfs_locks_lock(t, 1, ino, &b, true, 20, 10, NULL), 0);
    }
    assert_int_equal(nfs_locks_count(t), 150);
    assert_int_equal(nfs_locks_free_host(t, "hostA", 5), 100);
    assert_int_equal(nfs_locks_count(t), 50);
    assert_int_equal(nfs_locks_lock(t, 1, 7, &b, true, 0, 20, NULL), 0);
    assert_int_equal(nfs_locks_free_host(t, "hostC", 5), 0);
    nfs_locks_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive_and_shared),
        cmocka_unit_test(test_to_eof_and_split),
        cmocka_unit_test(test_free_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
