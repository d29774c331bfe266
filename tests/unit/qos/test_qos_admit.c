/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for qos/qos_admit.c on a real event_base: immediate admission,
 * FIFO waiting driven by timers, throttling after max wait, full queue,
 * cancel, drain, policy removal releasing waiters. Outcomes only (order,
 * counts, error codes), no durations are asserted. Policies here are not
 * persisted (no core). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "core.h"
#include "meta_record.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "srv_metrics.h"

/* qos is opened without a core here; these satisfy the linker only. */
struct meta_env *core_meta(struct core *c)
{
    return NULL;
}
int meta_record_put(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen,
                    const void *val, size_t vlen, unsigned flags)
{
    return -ENOSYS;
}
int meta_record_del(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen)
{
    return -ENOSYS;
}
int meta_record_scan(struct meta_env *m, enum meta_rec_table t, const void *start, size_t slen,
                     meta_record_cb cb, void *arg)
{
    return -ENOSYS;
}

struct rec {
    int order[16];
    int err[16];
    int n;
};

struct req {
    struct rec *rec;
    int id;
};

static void go(void *arg, int err)
{
    struct req *r = arg;
    r->rec->order[r->rec->n] = r->id;
    r->rec->err[r->rec->n] = err;
    r->rec->n++;
}

static struct qos *mk(uint32_t max_wait_ms, uint32_t queue_max)
{
    struct qos *q;
    struct qos_config cfg = {.enabled = true, .max_wait_ms = max_wait_ms, .queue_max = queue_max};
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    return q;
}

static const struct core_principal P7 = {.tenant = 7};
static const struct core_principal P8 = {.tenant = 8};

static void test_no_policy_is_immediate(void **state)
{
    (void)state;
    struct qos *q = mk(0, 0);
    struct rec rec = {0};
    struct req r = {&rec, 1};
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 1 << 30, NULL, go, &r), 0);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.err[0], 0);
    assert_int_equal(qos_admit(q, &P7, 9, 0, NULL, go, &r), -EINVAL);
    assert_int_equal(qos_admit(NULL, &P7, QOS_READ, 0, NULL, go, &r), 0); /* no QoS at all */
    assert_int_equal(rec.n, 2);
    qos_close(q);
}

static void test_fifo_wait(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    struct qos_policy pol = {.tenant = 7, .meta_iops = 1000, .burst_ms = 1}; /* burst 1 op */
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct qos_policy got;
    assert_int_equal(qos_policy_get(q, 7, &got), 0);
    assert_int_equal(got.meta_iops, 1000);
    assert_int_equal(qos_policy_get(q, 8, &got), -ENOENT);

    struct rec rec = {0};
    struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
    for (int i = 0; i < 4; i++)
        assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, go, &r[i]), 0);
    assert_int_equal(rec.n, 1); /* only the first went at once */
    /* Another tenant is not affected. */
    struct rec rec8 = {0};
    struct req r8 = {&rec8, 80};
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r8), 0);
    assert_int_equal(rec8.n, 1);

    event_base_dispatch(base); /* runs until every timer has fired */
    assert_int_equal(rec.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rec.order[i], i);
        assert_int_equal(rec.err[i], 0);
    }
    qos_close(q);
    event_base_free(base);
}

static void test_throttle_and_queue_full(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(1, 2); /* wait at most 1 ms; 2 waiters */
    struct qos_policy pol = {.tenant = 7, .write_bps = 1000}; /* burst 1000 B */
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct rec rec = {0};
    struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 1000, base, go, &r[0]), 0);
    assert_int_equal(rec.n, 1);
    /* The next needs a full second of tokens: it cannot make it within 1 ms. */
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 1000, base, go, &r[1]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 1000, base, go, &r[2]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 1000, base, go, &r[3]), SRV_ETHROTTLE);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.err[1], SRV_ETHROTTLE);
    assert_int_equal(rec.err[2], SRV_ETHROTTLE);
    /* Two waited, three were refused (two timed out, one found the queue full). */
    struct evbuffer *m = evbuffer_new();
    srv_metrics_render(m);
    evbuffer_add(m, "", 1);
    const char *text = (const char *)evbuffer_pullup(m, -1);
    assert_non_null(strstr(text, "s3nfs_qos_delayed_total{tenant=\"7\",user=\"0\"} 2\n"));
    assert_non_null(strstr(text, "s3nfs_qos_throttled_total{tenant=\"7\",user=\"0\"} 3\n"));
    assert_non_null(strstr(text, "s3nfs_qos_waiting{tenant=\"7\",user=\"0\"} 0\n"));
    evbuffer_free(m);
    qos_close(q);
    event_base_free(base);
}

static void test_cancel_drain_release(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    struct qos_policy pol = {.tenant = 7, .read_iops = 1, .burst_ms = 1000};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct rec rec = {0};
    struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 10, base, go, &r[0]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 10, base, go, &r[1]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 10, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 1);
    assert_int_equal(qos_cancel(q, &r[1]), 0);
    assert_int_equal(qos_cancel(q, &r[1]), -ENOENT);
    /* Removing the policy releases the remaining waiter at once. */
    assert_int_equal(qos_policy_delete(q, 7), 0);
    assert_int_equal(qos_policy_delete(q, 7), -ENOENT);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.order[1], 2);
    assert_int_equal(rec.err[1], 0);

    /* Drain fails the waiters with SRV_ETHROTTLE on their loop. */
    assert_int_equal(qos_policy_set(q, &pol), 0);
    rec.n = 0;
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 10, base, go, &r[0]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 10, base, go, &r[3]), 0);
    qos_drain(q);
    event_base_dispatch(base);
    int throttled = 0;
    for (int i = 0; i < rec.n; i++)
        throttled += rec.err[i] == SRV_ETHROTTLE;
    assert_int_equal(rec.n, 2);
    assert_true(throttled >= 1);
    qos_close(q);
    event_base_free(base);
}

static void test_disable(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    struct qos_policy pol = {.tenant = 7, .write_iops = 1};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct rec rec = {0};
    struct req r[2] = {{&rec, 0}, {&rec, 1}};
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 0, base, go, &r[0]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_WRITE, 0, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    struct qos_config off = {.enabled = false};
    qos_configure(q, &off); /* waiting requests go */
    event_base_dispatch(base);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.err[1], 0);
    struct qos_policy bad = {.tenant = 0};
    assert_int_equal(qos_policy_set(q, &bad), -EINVAL);
    qos_close(q);
    event_base_free(base);
}

static void test_user_policy(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(1, 0); /* 1 ms max wait: anything that must wait a second fails */
    const struct core_principal u1 = {.tenant = 7, .user = 1}, u2 = {.tenant = 7, .user = 2};
    struct qos_policy up = {.tenant = 7, .user = 1, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &up), 0);
    struct qos_policy got;
    assert_int_equal(qos_policy_get_user(q, 7, 1, &got), 0);
    assert_int_equal(qos_policy_get(q, 7, &got), -ENOENT);
    struct rec rec = {0};
    struct req r[6] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}, {&rec, 4}, {&rec, 5}};
    /* User 1: one op now, the next must wait (and times out). */
    assert_int_equal(qos_admit(q, &u1, QOS_META, 0, base, go, &r[0]), 0);
    assert_int_equal(qos_admit(q, &u1, QOS_META, 0, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    /* User 2 has no policy and the tenant none: not held up by user 1's queue. */
    assert_int_equal(qos_admit(q, &u2, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(qos_admit(q, &u2, QOS_META, 0, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 3);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 4);
    assert_int_equal(rec.order[3], 1);
    assert_int_equal(rec.err[3], SRV_ETHROTTLE);

    /* A tenant cap applies to a user with its own (looser) policy too. */
    struct qos_policy tp = {.tenant = 7, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    struct qos_policy loose = {.tenant = 7, .user = 1, .meta_iops = 1000000};
    assert_int_equal(qos_policy_set(q, &loose), 0);
    rec.n = 0;
    assert_int_equal(qos_admit(q, &u1, QOS_META, 0, base, go, &r[4]), 0);
    assert_int_equal(qos_admit(q, &u1, QOS_META, 0, base, go, &r[5]), 0);
    assert_int_equal(rec.n, 1);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.err[1], SRV_ETHROTTLE);
    assert_int_equal(qos_policy_delete_user(q, 7, 1), 0);
    assert_int_equal(qos_policy_delete_user(q, 7, 1), -ENOENT);
    qos_close(q);
    event_base_free(base);
}

static void test_guarantee(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q;
    /* The daemon can do 1 op/s; wait at most 1 ms. */
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 1, .cap_iops = 1};
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy g = {.tenant = 7, .min_iops = 1000};
    assert_int_equal(qos_policy_set(q, &g), 0);
    struct qos_policy got;
    assert_int_equal(qos_policy_get(q, 7, &got), 0);
    assert_int_equal(got.min_iops, 1000);

    struct rec r8 = {0}, r7 = {0};
    struct req a[2] = {{&r8, 0}, {&r8, 1}};
    struct req b[5] = {{&r7, 0}, {&r7, 1}, {&r7, 2}, {&r7, 3}, {&r7, 4}};
    /* Tenant 8 (no policy) takes the daemon's only token, then must wait. */
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &a[0]), 0);
    assert_int_equal(r8.n, 1);
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &a[1]), 0);
    assert_int_equal(r8.n, 1);
    /* Tenant 7's guarantee lets it through although the daemon is out of capacity. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, go, &b[i]), 0);
    assert_int_equal(r7.n, 5);
    event_base_dispatch(base);
    assert_int_equal(r8.n, 2);
    assert_int_equal(r8.err[1], SRV_ETHROTTLE);

    /* Without a capacity the guarantee changes nothing and tenant 8 is unlimited. */
    struct qos_config nocap = {.enabled = true, .max_wait_ms = 1};
    qos_configure(q, &nocap);
    r8.n = 0;
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &a[0]), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &a[1]), 0);
    assert_int_equal(r8.n, 2);
    qos_close(q);
    event_base_free(base);
}

/* ---- qos_admit_piece: shaping ---- */

static uint64_t frozen_now = 1000000;
static uint64_t frozen_clock(void)
{
    return frozen_now;
}

static void test_piece_size(void **state)
{
    (void)state;
    struct qos *q = mk(0, 0);
    struct rec rec = {0};
    struct req r = {&rec, 1};
    uint64_t piece = 0;
    /* no policy: the whole request at once */
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 10000000, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 10000000);
    assert_int_equal(rec.n, 1);
    assert_false(qos_applies(q, &P7, QOS_READ));
    /* 20 ms of the rate, at least 4 KiB, never more than the burst */
    struct qos_policy pol = {.tenant = 7, .write_bps = 1000000, .read_bps = 10000};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    assert_true(qos_applies(q, &P7, QOS_READ));
    assert_true(qos_applies(q, &P7, QOS_WRITE));
    assert_false(qos_applies(q, &P7, QOS_META)); /* not capped */
    assert_false(qos_applies(q, &P8, QOS_READ));
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 10000000, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 20000);
    assert_int_equal(qos_admit_piece(q, &P7, QOS_READ, 10000000, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 4096);
    struct qos_policy tiny = {.tenant = 7, .write_bps = 1000000, .read_bps = 1000};
    assert_int_equal(qos_policy_set(q, &tiny), 0);
    assert_int_equal(qos_admit_piece(q, &P7, QOS_READ, 10000000, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 1000); /* the burst */
    assert_int_equal(rec.n, 4);
    /* metadata and uncapped classes: all of it (nothing to cut) */
    assert_int_equal(qos_admit_piece(q, &P7, QOS_META, 5, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 5);
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 7, 9, &piece, NULL, go, &r), -EINVAL);
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 7, 0, NULL, NULL, go, &r), -EINVAL);
    /* the test aid: whole requests again */
    struct qos_config off = {.enabled = true, .shaping_off = true};
    qos_configure(q, &off);
    struct qos_policy big = {.tenant = 8, .write_bps = 1000000};
    assert_int_equal(qos_policy_set(q, &big), 0);
    assert_int_equal(qos_admit_piece(q, &P8, QOS_WRITE, 10000000, 0, &piece, NULL, go, &r), 0);
    assert_int_equal(piece, 10000000);
    qos_close(q);
}

static void test_piece_charges_one_op(void **state)
{
    (void)state;
    uint64_t (*real_clock)(void) = qos_clock_us;
    qos_clock_us = frozen_clock; /* no refill: what is taken stays taken */
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    struct qos_policy pol = {.tenant = 7, .write_iops = 1, .write_bps = 1 << 20};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct rec rec = {0};
    struct req r[3] = {{&rec, 0}, {&rec, 1}, {&rec, 2}};
    uint64_t piece;
    /* the first piece takes the only operation token; later pieces need none */
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 1000, 0, &piece, base, go, &r[0]), 0);
    assert_int_equal(
        qos_admit_piece(q, &P7, QOS_WRITE, 1000, QOS_PIECE_MORE, &piece, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 2);
    /* a new request needs an operation: it waits */
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 1000, 0, &piece, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 2);
    assert_int_equal(qos_cancel(q, &r[2]), 0);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = real_clock;
}

static void test_piece_waits_without_debt(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    /* 100 kB/s with a 10 ms burst: pieces of 1000 bytes, each waiting ~10 ms */
    struct qos_policy pol = {.tenant = 7, .write_bps = 100000, .burst_ms = 10};
    assert_int_equal(qos_policy_set(q, &pol), 0);
    struct rec rec = {0};
    struct req r[2] = {{&rec, 0}, {&rec, 1}};
    uint64_t piece;
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 5000, 0, &piece, base, go, &r[0]), 0);
    assert_int_equal(piece, 1000);
    assert_int_equal(rec.n, 1);
    /* the bucket is empty, not in debt: the next piece waits for its tokens */
    assert_int_equal(
        qos_admit_piece(q, &P7, QOS_WRITE, 4000, QOS_PIECE_MORE, &piece, base, go, &r[1]), 0);
    assert_int_equal(piece, 1000);
    assert_int_equal(rec.n, 1);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.err[1], 0);
    /* a piece larger than the burst (the policy shrank while it waited) still goes */
    assert_int_equal(
        qos_admit_piece(q, &P7, QOS_WRITE, 3000, QOS_PIECE_MORE, &piece, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 2);
    struct qos_policy small = {.tenant = 7, .write_bps = 100000, .burst_ms = 1}; /* burst 100 */
    assert_int_equal(qos_policy_set(q, &small), 0);
    event_base_dispatch(base);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.err[2], 0);
    /* a waiting piece can be withdrawn (its client went away) */
    assert_int_equal(
        qos_admit_piece(q, &P7, QOS_WRITE, 3000, QOS_PIECE_MORE, &piece, base, go, &r[1]), 0);
    if (rec.n == 3)
        assert_int_equal(qos_cancel(q, &r[1]), 0);
    qos_close(q);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_policy_is_immediate),
        cmocka_unit_test(test_fifo_wait),
        cmocka_unit_test(test_throttle_and_queue_full),
        cmocka_unit_test(test_cancel_drain_release),
        cmocka_unit_test(test_disable),
        cmocka_unit_test(test_user_policy),
        cmocka_unit_test(test_guarantee),
        cmocka_unit_test(test_piece_size),
        cmocka_unit_test(test_piece_charges_one_op),
        cmocka_unit_test(test_piece_waits_without_debt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
