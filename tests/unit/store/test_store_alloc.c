/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for store/store_alloc.c: allocation, reuse, coalescing
 * (in memory and in the persistent free map), fragmentation, full disk, restart
 * forgetting uncommitted reservations, the epoch limbo and aborted txns. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "srv_err.h"
#include "store.h"
#include "store_test_env.h"

#define BLK STORE_ALIGN
#define NBLK 64 /* blocks per test data file */

/* Reserve every block of the store as 4 KiB extents; @return how many. */
static size_t fill(struct tenv *t, struct store_extent *ext, size_t max)
{
    size_t n = 0;
    while (n < max && store_alloc(t->s, BLK, &ext[n]) == 0)
        n++;
    return n;
}

static void test_bad_args(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent e;
    assert_int_equal(store_alloc(t->s, 0, &e), -EINVAL);
    assert_int_equal(store_alloc(t->s, STORE_EXTENT_MAX + 1, &e), -EINVAL);
    e = (struct store_extent){.dev = 7, .off = 0, .len = BLK};
    struct ftxn *x = tenv_txn(t);
    assert_int_equal(store_txn_free(x->st, &e), -EINVAL);
    e.dev = 0;
    e.off = 100; /* not aligned */
    assert_int_equal(store_txn_free(x->st, &e), -EINVAL);
    e.off = NBLK * BLK; /* past the end */
    assert_int_equal(store_txn_free(x->st, &e), -EINVAL);
    e.off = 0; /* free, but never reserved: cannot be used */
    assert_int_equal(store_txn_use(x->st, &e), -EINVAL);
    /* Double free: block 0 is already free in the map. */
    assert_int_equal(store_txn_free(x->st, &e), SRV_ECORRUPT);
    tenv_txn_end(x, 0);
    tenv_free(t);
}

static void test_full_disk_and_reuse(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK + 1], e;
    struct store_stats st;
    store_stats_get(t->s, &st);
    assert_int_equal(st.capacity, NBLK * BLK);
    assert_int_equal(st.free, NBLK * BLK);
    size_t n = fill(t, ext, NBLK + 1);
    assert_int_equal(n, NBLK);
    assert_int_equal(store_alloc(t->s, 1, &e), -ENOSPC);
    store_stats_get(t->s, &st);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.reserved, NBLK * BLK);
    /* Each extent is distinct and aligned. */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ext[i].off % BLK, 0);
        assert_int_equal(ext[i].len, BLK);
        for (size_t j = 0; j < i; j++)
            assert_true(ext[i].off != ext[j].off);
    }
    assert_int_equal(tenv_use(t, ext, n), 0);
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, 0);
    assert_int_equal(tenv_map_count(t), 0);
    /* Free one, commit: with no reader it is allocatable again, at the same place. */
    assert_int_equal(tenv_free_ext(t, &ext[10], 1, 1), 0);
    assert_int_equal(tenv_free_bytes(t), BLK);
    assert_int_equal(store_alloc(t->s, 100, &e), 0);
    assert_int_equal(e.off, ext[10].off);
    assert_int_equal(e.len, 100);
    assert_int_equal(store_alloc(t->s, 1, &e), -ENOSPC);
    /* A full store restarts as full, not as a new store. */
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    assert_false(store_needs_init(t->s));
    assert_int_equal(tenv_free_bytes(t), BLK); /* the reservation of ext[10] is forgotten */
    tenv_free(t);
}

static void test_sequential_contiguous(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent a, b, c;
    assert_int_equal(store_alloc(t->s, 3 * BLK, &a), 0);
    assert_int_equal(store_alloc(t->s, BLK, &b), 0);
    assert_int_equal(store_alloc(t->s, 2 * BLK, &c), 0);
    assert_int_equal(b.off, a.off + 3 * BLK);
    assert_int_equal(c.off, b.off + BLK);
    store_unreserve(t->s, &a);
    store_unreserve(t->s, &b);
    store_unreserve(t->s, &c);
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    /* Everything coalesced back: the whole file is one range again. */
    struct store_extent big;
    assert_int_equal(
        store_alloc(t->s, NBLK * BLK > STORE_EXTENT_MAX ? STORE_EXTENT_MAX : NBLK * BLK, &big), 0);
    tenv_free(t);
}

static void test_coalescing_map(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK], e;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    assert_int_equal(tenv_map_count(t), 0);
    /* Free 3 adjacent blocks in the order outer, outer, middle; then a lone one. */
    struct store_extent three[3] = {ext[20], ext[22], ext[21]};
    assert_int_equal(tenv_free_ext(t, &three[0], 1, 1), 0);
    assert_int_equal(tenv_free_ext(t, &three[1], 1, 1), 0);
    assert_int_equal(tenv_map_count(t), 2);
    assert_int_equal(tenv_free_ext(t, &three[2], 1, 1), 0);
    assert_int_equal(tenv_map_count(t), 1);
    assert_int_equal(tenv_free_ext(t, &ext[40], 1, 1), 0);
    assert_int_equal(tenv_map_count(t), 2);
    /* In memory, too: a 3-block extent fits exactly in the merged hole. */
    assert_int_equal(store_alloc(t->s, 3 * BLK, &e), 0);
    assert_int_equal(e.off, ext[20].off);
    assert_int_equal(tenv_use(t, &e, 1), 0);
    assert_int_equal(tenv_map_count(t), 1);
    /* The merged range survives a restart as one range. */
    assert_int_equal(tenv_free_ext(t, &e, 1, 1), 0);
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    assert_int_equal(tenv_free_bytes(t), 4 * BLK);
    assert_int_equal(store_alloc(t->s, 3 * BLK, &e), 0);
    assert_int_equal(e.off, ext[20].off);
    tenv_free(t);
}

static void test_fragmentation(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK], e;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(n, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    /* Free every other block: half the disk is free, no hole is bigger than one block. */
    for (size_t i = 0; i < n; i += 2)
        assert_int_equal(tenv_free_ext(t, &ext[i], 1, 1), 0);
    assert_int_equal(tenv_free_bytes(t), NBLK / 2 * BLK);
    assert_int_equal(tenv_map_count(t), NBLK / 2);
    assert_int_equal(store_alloc(t->s, 2 * BLK, &e), -ENOSPC);
    assert_int_equal(store_alloc(t->s, BLK + 1, &e), -ENOSPC);
    /* Free block 51 as well: blocks 50..52 make one 3-block hole, which must be found. */
    assert_int_equal(tenv_free_ext(t, &ext[51], 1, 1), 0);
    assert_int_equal(store_alloc(t->s, 3 * BLK, &e), 0);
    assert_int_equal(e.off, ext[50].off);
    assert_int_equal(store_alloc(t->s, 2 * BLK, &e), -ENOSPC);
    /* Single blocks still fit, until the disk is full. */
    size_t singles = 0;
    while (store_alloc(t->s, BLK, &e) == 0)
        singles++;
    assert_int_equal(singles, NBLK / 2 - 2);
    assert_int_equal(tenv_free_bytes(t), 0);
    tenv_free(t);
}

static void test_best_fit(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK], e;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    /* Holes of 4 blocks (at 8..11) and 2 blocks (at 30..31). */
    assert_int_equal(tenv_free_ext(t, &ext[8], 4, 1), 0);
    assert_int_equal(tenv_free_ext(t, &ext[30], 2, 1), 0);
    assert_int_equal(store_alloc(t->s, 2 * BLK, &e), 0);
    assert_int_equal(e.off, ext[30].off); /* the smallest hole that fits */
    assert_int_equal(store_alloc(t->s, 4 * BLK, &e), 0);
    assert_int_equal(e.off, ext[8].off);
    tenv_free(t);
}

static void test_two_files(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(2, 8 * BLK);
    struct store_extent ext[17];
    size_t n = fill(t, ext, 17);
    assert_int_equal(n, 16);
    int on_dev1 = 0;
    for (size_t i = 0; i < n; i++)
        on_dev1 += ext[i].dev == 1;
    assert_int_equal(on_dev1, 8);
    assert_int_equal(tenv_use(t, ext, n), 0);
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    assert_int_equal(tenv_free_bytes(t), 0);
    /* A third file added to the configuration: its space is added as free. */
    tenv_store_close(t);
    t->cfg.nfiles = 3;
    struct ftxn *x = tenv_txn(t);
    assert_int_equal(store_open(&t->s, &t->cfg, &x->map), 0);
    tenv_txn_attach(x, t->s);
    assert_true(store_needs_init(t->s));
    /* its space is free at once; the map records it with the init's commit */
    assert_int_equal(tenv_free_bytes(t), 8 * BLK);
    /* An aborted init leaves it free in memory, still to be recorded... */
    assert_int_equal(store_txn_init(x->st), 0);
    tenv_txn_end(x, 0);
    assert_true(store_needs_init(t->s));
    assert_int_equal(tenv_free_bytes(t), 8 * BLK);
    tenv_store_close(t);
    /* ...a committed one records it. */
    assert_int_equal(tenv_store_open(t), 0);
    assert_false(store_needs_init(t->s));
    assert_int_equal(tenv_free_bytes(t), 8 * BLK);
    struct store_extent e;
    assert_int_equal(store_alloc(t->s, BLK, &e), 0);
    assert_int_equal(e.dev, 2);
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    assert_int_equal(tenv_free_bytes(t), 8 * BLK);
    /* Fewer files than the map covers is refused. */
    tenv_store_close(t);
    t->cfg.nfiles = 2;
    assert_int_equal(tenv_store_open(t), -EINVAL);
    t->cfg.nfiles = 3;
    assert_int_equal(tenv_store_open(t), 0);
    tenv_free(t);
}

static void test_reserved_free_after_restart(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent a, b, c;
    assert_int_equal(store_alloc(t->s, 2 * BLK, &a), 0);
    assert_int_equal(store_alloc(t->s, 5 * BLK, &b), 0);
    assert_int_equal(store_alloc(t->s, BLK, &c), 0);
    assert_int_equal(tenv_use(t, &b, 1), 0);
    struct store_stats st;
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, 3 * BLK);
    assert_int_equal(st.free, (NBLK - 8) * BLK);
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, 0);
    assert_int_equal(st.free, (NBLK - 5) * BLK);
    /* b is still used: allocating everything never hands out any of its blocks. */
    struct store_extent ext[NBLK];
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(n, NBLK - 5);
    for (size_t i = 0; i < n; i++)
        assert_true(ext[i].off < b.off || ext[i].off >= b.off + 5 * BLK);
    tenv_free(t);
}

static void test_unreserve(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent a;
    assert_int_equal(store_alloc(t->s, 10 * BLK, &a), 0);
    assert_int_equal(tenv_free_bytes(t), (NBLK - 10) * BLK);
    store_unreserve(t->s, &a);
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    store_unreserve(t->s, &a); /* twice: logged and ignored */
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    /* A use that aborts leaves the reservation; unreserve gives it back. */
    assert_int_equal(store_alloc(t->s, BLK, &a), 0);
    struct ftxn *x = tenv_txn(t);
    assert_int_equal(store_txn_use(x->st, &a), 0);
    tenv_txn_end(x, 0);
    struct store_stats st;
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, BLK);
    store_unreserve(t->s, &a);
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    assert_int_equal(tenv_map_count(t), 1);
    tenv_free(t);
}

static void test_limbo(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK], e;
    struct store_stats st;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    /* A reader starts, then extent 5 is freed: it waits in the limbo. */
    uint64_t r1 = store_read_begin(t->s);
    assert_int_equal(tenv_free_ext(t, &ext[5], 1, 1), 0);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, BLK);
    assert_int_equal(st.free, 0);
    assert_int_equal(store_alloc(t->s, BLK, &e), -ENOSPC);
    /* A reader that starts after the free does not hold it back... */
    uint64_t r2 = store_read_begin(t->s);
    /* ...but extent 6, freed after r2 began, waits for r2. */
    assert_int_equal(tenv_free_ext(t, &ext[6], 1, 1), 0);
    store_read_end(t->s, r1);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, BLK);
    assert_int_equal(st.free, BLK);
    assert_int_equal(store_alloc(t->s, BLK, &e), 0);
    assert_int_equal(e.off, ext[5].off);
    assert_int_equal(store_alloc(t->s, BLK, &e), -ENOSPC);
    store_read_end(t->s, r2);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, 0);
    assert_int_equal(store_alloc(t->s, BLK, &e), 0);
    assert_int_equal(e.off, ext[6].off);
    store_read_end(t->s, r2); /* unknown token: logged and ignored */
    /* Many nested readers on one epoch: the limbo waits for the last one. */
    uint64_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = store_read_begin(t->s);
    assert_int_equal(tenv_free_ext(t, &ext[9], 1, 1), 0);
    for (int i = 0; i < 39; i++)
        store_read_end(t->s, tok[i]);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, BLK);
    store_read_end(t->s, tok[39]);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, 0);
    tenv_free(t);
}

static void test_limbo_many_epochs(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK];
    struct store_stats st;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    /* Reader i begins, then extent i is freed: extent i waits for readers 0..i. */
    uint64_t tok[NBLK];
    for (size_t i = 0; i < n; i++) {
        tok[i] = store_read_begin(t->s);
        assert_int_equal(tenv_free_ext(t, &ext[i], 1, 1), 0);
    }
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, NBLK * BLK);
    /* Ending readers newest first releases nothing until reader 0 ends. */
    for (size_t i = n - 1; i >= 1; i--)
        store_read_end(t->s, tok[i]);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, NBLK * BLK);
    store_read_end(t->s, tok[0]);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, 0);
    assert_int_equal(st.free, NBLK * BLK);
    assert_int_equal(tenv_map_count(t), 1);
    tenv_free(t);
}

static void test_aborted_free(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK], e;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    assert_int_equal(tenv_free_ext(t, &ext[3], 2, 0), 0);
    struct store_stats st;
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, 0);
    assert_int_equal(st.free, 0);
    assert_int_equal(store_alloc(t->s, BLK, &e), -ENOSPC);
    assert_int_equal(tenv_map_count(t), 0);
    tenv_free(t);
}

static void test_write_shrinks_reservation(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent a;
    struct store_stats st;
    /* The core may reserve a full extent and write a short tail into it. */
    assert_int_equal(store_alloc(t->s, 8 * BLK, &a), 0);
    char buf[5000];
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(store_write(t->s, &a, buf, sizeof(buf)), 0);
    assert_int_equal(a.len, 5000);
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, 2 * BLK);
    assert_int_equal(st.free, (NBLK - 2) * BLK);
    assert_int_equal(tenv_use(t, &a, 1), 0);
    store_stats_get(t->s, &st);
    assert_int_equal(st.reserved, 0);
    assert_int_equal(tenv_free_ext(t, &a, 1, 1), 0);
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    assert_int_equal(tenv_map_count(t), 1);
    tenv_free(t);
}

static void test_alloc_near(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent a0, b0, a1, b1, a2;
    /* Two files written in turn by one thread: the thread cursor alone would interleave. */
    assert_int_equal(store_alloc(t->s, BLK, &a0), 0);
    assert_int_equal(store_alloc(t->s, 20 * BLK, &b0), 0);
    assert_int_equal(store_alloc_near(t->s, &a0, BLK, &a1), 0);
    assert_int_equal(a1.off, b0.off + 20 * BLK); /* a0's neighbour is taken by b0 */
    assert_int_equal(store_alloc_near(t->s, &b0, BLK, &b1), 0);
    assert_int_equal(store_alloc_near(t->s, &a1, 2 * BLK, &a2), 0);
    assert_int_equal(a2.off, a1.off + 2 * BLK); /* after b1 took the next block */
    assert_int_equal(b1.off, a1.off + BLK);
    /* With the space after a hint free, it is used. */
    store_unreserve(t->s, &b1);
    struct store_extent x;
    assert_int_equal(store_alloc_near(t->s, &a1, BLK, &x), 0);
    assert_int_equal(x.off, a1.off + BLK);
    assert_int_equal(store_alloc_near(t->s, NULL, BLK, &x), 0);
    struct store_extent bogus = {.dev = 99};
    assert_int_equal(store_alloc_near(t->s, &bogus, BLK, &x), 0);
    tenv_free(t);
}

static void test_init_abort(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    tenv_store_close(t);
    tenv_map_reset(t); /* a store whose map was never written */
    struct ftxn *x = tenv_txn(t);
    assert_int_equal(store_open(&t->s, &t->cfg, &x->map), 0);
    tenv_txn_attach(x, t->s);
    assert_true(store_needs_init(t->s));
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    assert_int_equal(store_txn_init(x->st), 0);
    assert_true(store_needs_init(t->s)); /* until the txn commits */
    tenv_txn_end(x, 0);
    assert_true(store_needs_init(t->s));
    /* the space stays free; the first use records it in its own txn */
    assert_int_equal(tenv_free_bytes(t), NBLK * BLK);
    struct store_extent e;
    assert_int_equal(store_alloc(t->s, BLK, &e), 0);
    assert_int_equal(tenv_use(t, &e, 1), 0);
    assert_false(store_needs_init(t->s));
    tenv_store_close(t);
    x = tenv_txn(t);
    assert_int_equal(store_open(&t->s, &t->cfg, &x->map), 0);
    tenv_txn_end(x, 0);
    assert_false(store_needs_init(t->s));
    assert_int_equal(tenv_free_bytes(t), (NBLK - 1) * BLK);
    tenv_free(t);
}

static void test_limbo_stuck_reader(void **state)
{
    (void)state;
    struct tenv *t = tenv_new(1, NBLK * BLK);
    struct store_extent ext[NBLK];
    struct store_stats st;
    size_t n = fill(t, ext, NBLK);
    assert_int_equal(tenv_use(t, ext, n), 0);
    /* One old reader stays; many short readers come and go, one free each time. */
    uint64_t old = store_read_begin(t->s);
    for (size_t i = 0; i < n; i++) {
        uint64_t tok = store_read_begin(t->s);
        assert_int_equal(tenv_free_ext(t, &ext[i], 1, 1), 0);
        store_read_end(t->s, tok);
        store_read_end(t->s, store_read_begin(t->s));
    }
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, NBLK * BLK);
    assert_int_equal(st.free, 0);
    store_read_end(t->s, old);
    store_stats_get(t->s, &st);
    assert_int_equal(st.limbo, 0);
    assert_int_equal(st.free, NBLK * BLK);
    tenv_free(t);
}

/* Many ranges: 16384 blocks, every other one free, then all free again. */
static void test_scale(void **state)
{
    (void)state;
    enum { N = 16384 };
    struct tenv *t = tenv_new(1, (uint64_t)N * BLK);
    struct store_extent *ext = calloc(N, sizeof(*ext)), e;
    assert_non_null(ext);
    size_t n = fill(t, ext, N);
    assert_int_equal(n, N);
    assert_int_equal(tenv_use(t, ext, n), 0);
    struct store_extent *odd = calloc(N / 2, sizeof(*odd)), *even = calloc(N / 2, sizeof(*even));
    for (size_t i = 0; i < N / 2; i++) {
        even[i] = ext[2 * i];
        odd[i] = ext[2 * i + 1];
    }
    assert_int_equal(tenv_free_ext(t, even, N / 2, 1), 0);
    assert_int_equal(tenv_map_count(t), N / 2);
    tenv_store_close(t);
    assert_int_equal(tenv_store_open(t), 0);
    assert_int_equal(tenv_free_bytes(t), (uint64_t)N / 2 * BLK);
    assert_int_equal(store_alloc(t->s, 2 * BLK, &e), -ENOSPC);
    assert_int_equal(tenv_free_ext(t, odd, N / 2, 1), 0);
    assert_int_equal(tenv_map_count(t), 1);
    assert_int_equal(tenv_free_bytes(t), (uint64_t)N * BLK);
    assert_int_equal(store_alloc(t->s, STORE_EXTENT_MAX, &e), 0);
    free(odd);
    free(even);
    free(ext);
    tenv_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_full_disk_and_reuse),
        cmocka_unit_test(test_sequential_contiguous),
        cmocka_unit_test(test_coalescing_map),
        cmocka_unit_test(test_fragmentation),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_two_files),
        cmocka_unit_test(test_reserved_free_after_restart),
        cmocka_unit_test(test_unreserve),
        cmocka_unit_test(test_limbo),
        cmocka_unit_test(test_limbo_many_epochs),
        cmocka_unit_test(test_limbo_stuck_reader),
        cmocka_unit_test(test_aborted_free),
        cmocka_unit_test(test_write_shrinks_reservation),
        cmocka_unit_test(test_alloc_near),
        cmocka_unit_test(test_init_abort),
        cmocka_unit_test(test_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
