/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for nfs_lock: conflicts between owners, shared vs exclusive,
 * replacement and splitting within one owner, to-EOF ranges, FREE_ALL (by
 * host, and by host and the address its locks came from), per-host counts;
 * and the pure helpers of nlm_host (remembered hosts: store key and record,
 * address comparison, the grace-period rule). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "nfs_lock.h"
#include "nlm_host.h"

static struct nfs_lock_owner own(const char *host, int32_t svid)
{
    struct nfs_lock_owner o = {host, strlen(host), svid, &svid, 0, NULL};
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
    assert_int_equal(nfs_locks_free_host(t, "hostA", 5, NULL, NULL), 100);
    assert_int_equal(nfs_locks_count(t), 50);
    assert_int_equal(nfs_locks_lock(t, 1, 7, &b, true, 0, 20, NULL), 0);
    assert_int_equal(nfs_locks_free_host(t, "hostC", 5, NULL, NULL), 0);
    nfs_locks_free(t);
}

/* FREE_ALL / SM_NOTIFY from an address release only the host's locks taken
 * from that address; a split keeps the address of its lock, a replacement
 * takes the address of the new LOCK. */
static void test_free_host_from(void **state)
{
    struct nfs_locks *t;
    struct sockaddr_storage sx, sy;
    uint8_t x[NFS_LOCK_FROM_LEN], y[NFS_LOCK_FROM_LEN];
    struct sockaddr_in *x4 = (struct sockaddr_in *)&sx;
    struct sockaddr_in6 *y6 = (struct sockaddr_in6 *)&sy;
    memset(&sx, 0, sizeof(sx));
    memset(&sy, 0, sizeof(sy));
    x4->sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &x4->sin_addr);
    y6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:127.0.0.3", &y6->sin6_addr);
    nlm_addr_key(&sx, x);
    nlm_addr_key(&sy, y);
    assert_memory_not_equal(x, y, NFS_LOCK_FROM_LEN);
    /* an IPv4 address and its IPv4-mapped form are one address */
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &y6->sin6_addr);
    uint8_t x6[NFS_LOCK_FROM_LEN];
    nlm_addr_key(&sy, x6);
    assert_memory_equal(x, x6, NFS_LOCK_FROM_LEN);

    struct nfs_lock_owner ax = own("hostA", 1), ay = own("hostA", 2), b = own("hostB", 3);
    ax.from = x;
    ay.from = y;
    b.from = y;
    size_t kept = 99;
    assert_int_equal(nfs_locks_new(&t), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 1, &ax, true, 0, 100, NULL), 0);
    assert_int_equal(nfs_locks_unlock(t, 1, 1, &ax, 40, 10), 0); /* split: both from x */
    assert_int_equal(nfs_locks_lock(t, 1, 2, &ay, true, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 3, &b, true, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_count(t), 4);
    /* from y: only hostA's lock taken from y */
    assert_int_equal(nfs_locks_free_host(t, "hostA", 5, y, &kept), 1);
    assert_int_equal(kept, 2);
    assert_int_equal(nfs_locks_count(t), 3);
    /* svid 1 of hostA relocks part of its range from y: that part is y's now */
    ax.from = y;
    assert_int_equal(nfs_locks_lock(t, 1, 1, &ax, true, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_free_host(t, "hostA", 5, x, &kept), 2);
    assert_int_equal(kept, 1);
    assert_int_equal(nfs_locks_free_host(t, "hostA", 5, y, &kept), 1);
    assert_int_equal(kept, 0);
    assert_int_equal(nfs_locks_count(t), 1); /* hostB's */
    nfs_locks_free(t);
}

static void test_host_count(void **state)
{
    struct nfs_locks *t;
    struct nfs_lock_owner a1 = own("hostA", 1), a2 = own("hostA", 2), b = own("hostB", 3);
    assert_int_equal(nfs_locks_new(&t), 0);
    assert_int_equal(nfs_locks_host_count(t, "hostA", 5), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 1, &a1, true, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 2, &a2, false, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_lock(t, 1, 3, &b, false, 0, 10, NULL), 0);
    assert_int_equal(nfs_locks_host_count(t, "hostA", 5), 2);
    assert_int_equal(nfs_locks_host_count(t, "hostB", 5), 1);
    assert_int_equal(nfs_locks_host_count(t, "host", 4), 0); /* a prefix is another host */
    /* a split makes two locks of the host; unlocking both pieces leaves none */
    assert_int_equal(nfs_locks_unlock(t, 1, 1, &a1, 4, 2), 0);
    assert_int_equal(nfs_locks_host_count(t, "hostA", 5), 3);
    assert_int_equal(nfs_locks_unlock(t, 1, 1, &a1, 0, 0), 0);
    assert_int_equal(nfs_locks_unlock(t, 1, 2, &a2, 0, 10), 0);
    assert_int_equal(nfs_locks_host_count(t, "hostA", 5), 0);
    assert_int_equal(nfs_locks_host_count(t, "hostB", 5), 1);
    nfs_locks_free(t);
}

static void test_host_key(void **state)
{
    char key[sizeof(NLM_HOST_KEY_PREFIX) + NLM_HOST_NAME_MAX], name[NLM_HOST_NAME_MAX + 2];
    int kl = nlm_host_key("client1.example", key, sizeof(key));
    assert_int_equal(kl, strlen("nlm.host.client1.example"));
    assert_memory_equal(key, "nlm.host.client1.example", (size_t)kl);
    assert_int_equal(nlm_host_key("", key, sizeof(key)), -EINVAL);
    memset(name, 'h', NLM_HOST_NAME_MAX);
    name[NLM_HOST_NAME_MAX] = '\0';
    assert_int_equal(nlm_host_key(name, key, sizeof(key)),
                     (int)(sizeof(NLM_HOST_KEY_PREFIX) - 1 + NLM_HOST_NAME_MAX));
    name[NLM_HOST_NAME_MAX] = 'h';
    name[NLM_HOST_NAME_MAX + 1] = '\0';
    assert_int_equal(nlm_host_key(name, key, sizeof(key)), -ENAMETOOLONG);
    assert_int_equal(nlm_host_key("abc", key, 10), -ENAMETOOLONG); /* buffer too small */
}

static struct sockaddr_storage v4(const char *a, uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, a, &s4->sin_addr), 1);
    return ss;
}

static struct sockaddr_storage v6(const char *a, uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, a, &s6->sin6_addr), 1);
    return ss;
}

static void test_host_record(void **state)
{
    uint8_t rec[NLM_HOST_REC_LEN];
    struct sockaddr_storage a = v4("10.1.2.3", 871), back;
    unsigned tries = 99;
    char txt[64];
    assert_int_equal(nlm_host_rec_encode(&a, 0, rec), NLM_HOST_REC_LEN);
    const uint8_t want[NLM_HOST_REC_LEN] = {1, 4, 0, 0, 10, 1, 2, 3};
    assert_memory_equal(rec, want, sizeof(want));
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), 0);
    assert_int_equal(tries, 0);
    assert_true(nlm_addr_same(&a, &back)); /* the port is not kept */
    /* the count of failed notifications is byte 2 */
    assert_int_equal(nlm_host_rec_encode(&a, 2, rec), NLM_HOST_REC_LEN);
    assert_int_equal(rec[2], 2);
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), 0);
    assert_int_equal(tries, 2);
    assert_int_equal(nlm_host_rec_encode(&a, 256, rec), -ERANGE);
    nlm_addr_text(&back, txt, sizeof(txt));
    assert_string_equal(txt, "10.1.2.3");

    /* an IPv4-mapped IPv6 peer is the same host as its IPv4 address */
    struct sockaddr_storage m = v6("::ffff:10.1.2.3", 2);
    assert_int_equal(nlm_host_rec_encode(&m, 0, rec), NLM_HOST_REC_LEN);
    assert_memory_equal(rec, want, sizeof(want));
    assert_true(nlm_addr_same(&a, &m));
    nlm_addr_text(&m, txt, sizeof(txt));
    assert_string_equal(txt, "10.1.2.3");

    struct sockaddr_storage six = v6("fd00::7", 0);
    assert_int_equal(nlm_host_rec_encode(&six, 1, rec), NLM_HOST_REC_LEN);
    assert_int_equal(rec[1], 6);
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), 0);
    assert_int_equal(tries, 1);
    assert_true(nlm_addr_same(&six, &back));
    assert_false(nlm_addr_same(&six, &a));
    assert_false(nlm_addr_same(&a, &(struct sockaddr_storage){0}));
    nlm_addr_text(&back, txt, sizeof(txt));
    assert_string_equal(txt, "fd00::7");

    /* malformed records are refused */
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec) - 1, &back, &tries), -EINVAL);
    rec[0] = 2;
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), -EINVAL);
    rec[0] = 1;
    rec[1] = 5;
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), -EINVAL);
    assert_int_equal(nlm_host_rec_encode(&a, 0, rec), NLM_HOST_REC_LEN);
    rec[12] = 1; /* garbage after an IPv4 address */
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), -EINVAL);
    assert_int_equal(nlm_host_rec_encode(&a, 0, rec), NLM_HOST_REC_LEN);
    rec[3] = 1; /* padding */
    assert_int_equal(nlm_host_rec_decode(rec, sizeof(rec), &back, &tries), -EINVAL);
    struct sockaddr_storage unix_addr = {.ss_family = AF_UNIX};
    assert_int_equal(nlm_host_rec_encode(&unix_addr, 0, rec), -EAFNOSUPPORT);
}

static void test_grace_rule(void **state)
{
    assert_true(nlm_grace_refuses(true, false));   /* plain lock during grace */
    assert_false(nlm_grace_refuses(true, true));   /* reclaim during grace */
    assert_false(nlm_grace_refuses(false, false)); /* plain lock after */
    assert_true(nlm_grace_refuses(false, true));   /* reclaim too late */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive_and_shared),
        cmocka_unit_test(test_to_eof_and_split),
        cmocka_unit_test(test_free_host),
        cmocka_unit_test(test_free_host_from),
        cmocka_unit_test(test_host_count),
        cmocka_unit_test(test_host_key),
        cmocka_unit_test(test_host_record),
        cmocka_unit_test(test_grace_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
