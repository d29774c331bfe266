/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for qos/qos_admit.c on a real event_base: immediate admission,
 * FIFO waiting driven by timers, throttling after max wait, full queue,
 * cancel, drain, policy removal releasing waiters. Outcomes only (order,
 * counts, error codes), no durations are asserted. Policies here are not
 * persisted (no core). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "core.h"
#include "meta_record.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "srv_metrics.h"

/* qos is opened without a core here (most tests); these satisfy the linker.
 * With fake_core set (test_scope_memo), a "core" that stores nothing and
 * knows bucket 100 with directory "a" (200) in it, counting lookups. */
static bool fake_core;
static int n_bucket_lookups, n_lookups;

struct meta_env *core_meta(struct core *c)
{
    return NULL;
}
int meta_record_put(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen,
                    const void *val, size_t vlen, unsigned flags)
{
    return fake_core ? 0 : -ENOSYS;
}
int meta_record_del(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen)
{
    return fake_core ? 0 : -ENOSYS;
}
int meta_record_scan(struct meta_env *m, enum meta_rec_table t, const void *start, size_t slen,
                     meta_record_cb cb, void *arg)
{
    return fake_core ? 0 : -ENOSYS;
}

/* Scope resolution needs a core; these tests pass resolved scopes instead. */
int core_getattr(struct core *c, const struct core_principal *p, uint64_t ino, uint32_t gen,
                 struct core_attr *out)
{
    return SRV_ESTALE;
}
int core_bucket_lookup(struct core *c, const struct core_principal *p, const char *name,
                       size_t namelen, struct core_attr *out)
{
    if (!fake_core)
        return -ENOENT;
    n_bucket_lookups++;
    memset(out, 0, sizeof(*out));
    out->ino = 100;
    out->type = CORE_DIR;
    return 0;
}
int core_lookup(struct core *c, const struct core_principal *p, uint64_t dir, const char *name,
                size_t namelen, struct core_attr *out)
{
    if (!fake_core || dir != 100 || namelen != 1 || name[0] != 'a')
        return -ENOENT;
    n_lookups++;
    memset(out, 0, sizeof(*out));
    out->ino = 200;
    out->type = CORE_DIR;
    return 0;
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
    struct qos *q = mk(1, 2);                                 /* wait at most 1 ms; 2 waiters */
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
    assert_non_null(
        strstr(text, "s3nfs_qos_delayed_total{tenant=\"7\",level=\"tenant\",id=\"0\"} 2\n"));
    assert_non_null(
        strstr(text, "s3nfs_qos_throttled_total{tenant=\"7\",level=\"tenant\",id=\"0\"} 3\n"));
    assert_non_null(strstr(text, "s3nfs_qos_waiting{tenant=\"7\",level=\"tenant\",id=\"0\"} 0\n"));
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

/* ---- the hierarchy, on a fake clock (qos_clock_us) ---- */

static uint64_t fake_now;
static uint64_t fake_clock(void)
{
    return fake_now;
}

/* Let every waiter the scheduler woke run its go (timers armed on the real
 * clock that are due run too; they see the fake clock). */
static void settle(struct event_base *base)
{
    for (int i = 0; i < 4; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Advance the fake clock and let the scheduler look (qos_configure reruns it). */
static void tick(struct qos *q, const struct qos_config *cfg, struct event_base *base, uint64_t us)
{
    fake_now += us;
    qos_configure(q, cfg);
    settle(base);
}

struct bigrec {
    int n;
    int ids[256];
};
struct breq {
    struct bigrec *rec;
    int id;
};
static void bgo(void *arg, int err)
{
    struct breq *r = arg;
    if (err == 0)
        r->rec->ids[r->rec->n++] = r->id;
}

static void test_every_level_must_admit(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    const uint64_t dirs[2] = {201, 200}; /* innermost first: 200/201 in bucket 100 */
    const struct qos_scope in_dir = {.bucket_ino = 100, .dirs = dirs, .ndirs = 2};
    const struct qos_scope in_b = {.bucket_ino = 100};
    const struct qos_scope other_b = {.bucket_ino = 101};
    const struct core_principal u1 = {.tenant = 7, .user = 1};
    struct rec rec = {0};
    struct req r[16];
    for (int i = 0; i < 16; i++)
        r[i] = (struct req){&rec, i};

    /* The bucket level: one op, then wait; another bucket is not held up. */
    struct qos_policy bp = {.tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 100, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &bp), 0);
    struct qos_policy got;
    assert_int_equal(qos_policy_get_at(q, 7, QOS_LEVEL_BUCKET, 100, &got), 0);
    assert_int_equal(got.meta_iops, 1);
    assert_int_equal(qos_admit_at(q, &P7, &in_b, QOS_META, 0, base, go, &r[0]), 0);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_META, 0, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    assert_int_equal(qos_admit_at(q, &P7, &other_b, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, go, &r[3]), 0); /* no scope */
    assert_int_equal(rec.n, 3);
    /* Another tenant's bucket with the same inode number is not this policy. */
    assert_int_equal(qos_admit_at(q, &P8, &in_b, QOS_META, 0, base, go, &r[4]), 0);
    assert_int_equal(rec.n, 4);
    assert_int_equal(qos_cancel(q, &r[1]), 0);
    assert_int_equal(qos_policy_delete_at(q, 7, QOS_LEVEL_BUCKET, 100), 0);

    /* The directory level applies to everything below the directory (200). */
    rec.n = 0;
    struct qos_policy dp = {
        .tenant = 7, .level = QOS_LEVEL_DIR, .bucket = 100, .dir = 200, .write_bps = 1000};
    assert_int_equal(qos_policy_set(q, &dp), 0);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 1000, base, go, &r[0]), 0);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 1000, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    assert_int_equal(qos_admit_at(q, &P7, &in_b, QOS_WRITE, 1000, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 2); /* the bucket outside the directory is free */
    assert_int_equal(qos_cancel(q, &r[1]), 0);
    assert_int_equal(qos_policy_delete_at(q, 7, QOS_LEVEL_DIR, 200), 0);

    /* The user level, and a looser user under a tight directory: both must admit. */
    rec.n = 0;
    struct qos_policy up = {.tenant = 7, .level = QOS_LEVEL_USER, .user = 1, .read_iops = 1};
    assert_int_equal(qos_policy_set(q, &up), 0);
    assert_int_equal(qos_admit_at(q, &u1, &in_b, QOS_READ, 10, base, go, &r[0]), 0);
    assert_int_equal(qos_admit_at(q, &u1, &other_b, QOS_READ, 10, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    assert_int_equal(qos_cancel(q, &r[1]), 0);
    up.read_iops = 1000000;
    assert_int_equal(qos_policy_set(q, &up), 0);
    tick(q, &cfg, base, 1000); /* a raised cap refills from the level it had */
    dp.write_bps = 0;
    dp.read_iops = 1;
    assert_int_equal(qos_policy_set(q, &dp), 0);
    rec.n = 0;
    assert_int_equal(qos_admit_at(q, &u1, &in_dir, QOS_READ, 10, base, go, &r[0]), 0);
    assert_int_equal(qos_admit_at(q, &u1, &in_dir, QOS_READ, 10, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1);
    /* The tenant level caps them all. */
    struct qos_policy tp = {.tenant = 7, .read_iops = 1};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    /* r[2] queues behind r[1] in user 1's FIFO (arrival order per queue). */
    assert_int_equal(qos_admit_at(q, &u1, &other_b, QOS_READ, 10, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 1);
    tick(q, &cfg, base, 1000000); /* the directory has an op again: r[1] */
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.order[1], 1);
    tick(q, &cfg, base, 500000); /* the tenant has none yet */
    assert_int_equal(rec.n, 2);
    tick(q, &cfg, base, 500000);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.order[2], 2);

    /* NFS: the uid named by a user policy is that user; any other uid is the
     * tenant's NFS default class. */
    assert_int_equal(qos_policy_delete(q, 7), 0);
    assert_int_equal(qos_policy_delete_at(q, 7, QOS_LEVEL_DIR, 200), 0);
    up = (struct qos_policy){.tenant = 7, .level = QOS_LEVEL_USER, .user = 5, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &up), 0);
    assert_int_equal(qos_policy_set_uid(q, 7, 5, 1000), 0);
    struct qos_policy nd = {.tenant = 7, .level = QOS_LEVEL_NFS_DEFAULT, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &nd), 0);
    const struct qos_scope nfs1000 = {.ino = 1, .has_uid = true, .uid = 1000, .bucket_ino = 100};
    const struct qos_scope nfs2000 = {.ino = 1, .has_uid = true, .uid = 2000, .bucket_ino = 100};
    const struct qos_scope nfs3000 = {.ino = 1, .has_uid = true, .uid = 3000, .bucket_ino = 100};
    rec.n = 0;
    assert_int_equal(qos_admit_at(q, &P7, &nfs1000, QOS_META, 0, base, go, &r[0]), 0);
    assert_int_equal(qos_admit_at(q, &P7, &nfs1000, QOS_META, 0, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 1); /* user 5's one op is used */
    assert_int_equal(qos_admit_at(q, &P7, &nfs2000, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 2); /* the default class is another queue */
    assert_int_equal(qos_admit_at(q, &P7, &nfs3000, QOS_META, 0, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 2); /* ...shared by every unmapped uid */
    /* S3 requests (no uid) are not in the NFS default class. */
    assert_int_equal(qos_admit_at(q, &P7, &in_b, QOS_META, 0, base, go, &r[4]), 0);
    assert_int_equal(rec.n, 3);
    assert_int_equal(qos_cancel(q, &r[1]), 0);
    assert_int_equal(qos_cancel(q, &r[3]), 0);

    /* Bad policies change nothing. */
    struct qos_policy bad = {.tenant = 7, .level = QOS_LEVEL_DIR, .bucket = 100};
    assert_int_equal(qos_policy_set(q, &bad), -EINVAL); /* no directory */
    bad = (struct qos_policy){.tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 5, .weight = 10001};
    assert_int_equal(qos_policy_set(q, &bad), -EINVAL);
    assert_int_equal(qos_policy_get_at(q, 7, QOS_LEVEL_BUCKET, 5, &got), -ENOENT);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

static void test_reservation_first(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    /* The daemon can do 1 op/s. */
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000, .cap_iops = 1};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy tp = {.tenant = 7, .min_iops = 1};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    /* A bucket minimum larger than the tenant's is held to the tenant's. */
    struct qos_policy bp = {.tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 100, .min_iops = 50};
    assert_int_equal(qos_policy_set(q, &bp), 0);
    const struct qos_scope in_b = {.bucket_ino = 100};
    struct rec rec = {0};
    struct req r[8];
    for (int i = 0; i < 8; i++)
        r[i] = (struct req){&rec, i};
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[0]), 0); /* the daemon's token */
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[1]), 0); /* waits */
    assert_int_equal(rec.n, 1);
    /* Tenant 7's minimum lets one through although the daemon is out... */
    assert_int_equal(qos_admit_at(q, &P7, &in_b, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 2);
    /* ...but not more than the tenant's minimum, whatever the bucket says. */
    assert_int_equal(qos_admit_at(q, &P7, &in_b, QOS_META, 0, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 2);
    /* A second later tenant 7's minimum has a token again, the daemon still
     * none (its debt): tenant 7's request goes first though it came later. */
    tick(q, &cfg, base, 1000000);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.order[2], 3);
    /* Two more seconds pay the daemon's debt: tenant 8's request goes. */
    tick(q, &cfg, base, 2000000);
    assert_int_equal(rec.n, 4);
    assert_int_equal(rec.order[3], 1);
    assert_int_equal(rec.err[3], 0);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

static void test_weights_share_the_rest(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 600000, .cap_iops = 100};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy w7 = {.tenant = 7, .weight = 300}, w8 = {.tenant = 8, .weight = 100};
    assert_int_equal(qos_policy_set(q, &w7), 0);
    assert_int_equal(qos_policy_set(q, &w8), 0);
    struct bigrec rec = {0};
    static struct breq r[300];
    const struct core_principal p9 = {.tenant = 9};
    for (int i = 0; i < 100; i++) { /* tenant 9 empties the daemon's bucket */
        r[i] = (struct breq){&rec, 900};
        assert_int_equal(qos_admit(q, &p9, QOS_META, 0, base, bgo, &r[i]), 0);
    }
    assert_int_equal(rec.n, 100);
    rec.n = 0;
    for (int i = 0; i < 60; i++) {
        r[100 + i] = (struct breq){&rec, 7};
        r[160 + i] = (struct breq){&rec, 8};
    }
    for (int i = 0; i < 60; i++) { /* interleaved arrivals */
        assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, bgo, &r[160 + i]), 0);
        assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, bgo, &r[100 + i]), 0);
    }
    assert_int_equal(rec.n, 0);
    /* 400 ms: 40 ops of capacity, shared 3:1. */
    for (int i = 0; i < 40; i++)
        tick(q, &cfg, base, 10000);
    int n7 = 0, n8 = 0;
    for (int i = 0; i < rec.n; i++) {
        n7 += rec.ids[i] == 7;
        n8 += rec.ids[i] == 8;
    }
    assert_true(rec.n >= 39 && rec.n <= 41);
    assert_true(n7 >= 28 && n7 <= 32);
    assert_true(n8 >= 8 && n8 <= 12);

    /* Inside one tenant, the queues of its users share the tenant's cap by weight. */
    struct qos_config nocap = {.enabled = true, .max_wait_ms = 600000};
    qos_configure(q, &nocap);
    settle(base);
    struct qos_policy tp = {.tenant = 10, .meta_iops = 10};
    struct qos_policy ua = {.tenant = 10, .user = 1, .weight = 100};
    struct qos_policy ub = {.tenant = 10, .user = 2, .weight = 400};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    assert_int_equal(qos_policy_set(q, &ua), 0);
    assert_int_equal(qos_policy_set(q, &ub), 0);
    const struct core_principal pa = {.tenant = 10, .user = 1}, pb = {.tenant = 10, .user = 2};
    static struct breq s[140];
    struct bigrec rec2 = {0};
    for (int i = 0; i < 10; i++) { /* empties the tenant's burst */
        s[i] = (struct breq){&rec2, 0};
        assert_int_equal(qos_admit(q, &pa, QOS_META, 0, base, bgo, &s[i]), 0);
    }
    rec2.n = 0;
    for (int i = 0; i < 60; i++) {
        s[10 + i] = (struct breq){&rec2, 1};
        s[70 + i] = (struct breq){&rec2, 2};
        assert_int_equal(qos_admit(q, &pa, QOS_META, 0, base, bgo, &s[10 + i]), 0);
        assert_int_equal(qos_admit(q, &pb, QOS_META, 0, base, bgo, &s[70 + i]), 0);
    }
    for (int i = 0; i < 50; i++) /* 5 s: 50 ops, shared 1:4 */
        tick(q, &nocap, base, 100000);
    int na = 0, nb = 0;
    for (int i = 0; i < rec2.n; i++) {
        na += rec2.ids[i] == 1;
        nb += rec2.ids[i] == 2;
    }
    assert_true(rec2.n >= 49 && rec2.n <= 51);
    assert_true(na >= 8 && na <= 12);
    assert_true(nb >= 38 && nb <= 42);
    qos_drain(q);
    settle(base);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

static void test_change_applies_to_queued(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    const uint64_t dirs[1] = {200};
    const struct qos_scope in_dir = {.bucket_ino = 100, .dirs = dirs, .ndirs = 1};
    struct rec rec = {0};
    struct req r[8];
    for (int i = 0; i < 8; i++)
        r[i] = (struct req){&rec, i};
    struct qos_policy dp = {
        .tenant = 7, .level = QOS_LEVEL_DIR, .bucket = 100, .dir = 200, .write_iops = 1};
    assert_int_equal(qos_policy_set(q, &dp), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 0, base, go, &r[i]), 0);
    assert_int_equal(rec.n, 1);
    /* Raising the directory's cap lets the queued requests go, in order. */
    dp.write_iops = 1000;
    assert_int_equal(qos_policy_set(q, &dp), 0);
    tick(q, &cfg, base, 2000); /* a raised cap refills from the level it had */
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.order[1], 1);
    assert_int_equal(rec.order[2], 2);

    /* A new level on a queued request's path holds it too: a bucket policy
     * set while it waits in the directory's queue. */
    dp.write_iops = 1;
    assert_int_equal(qos_policy_set(q, &dp), 0);
    rec.n = 0;
    tick(q, &cfg, base, 1000000);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 0, base, go, &r[3]), 0);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 0, base, go, &r[4]), 0);
    assert_int_equal(rec.n, 1);
    struct qos_policy bp = {
        .tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 100, .write_iops = 1, .burst_ms = 1};
    assert_int_equal(qos_policy_set(q, &bp), 0);
    struct qos_policy loose = dp;
    loose.write_iops = 1000;
    assert_int_equal(qos_policy_set(q, &loose), 0); /* the directory no longer holds it... */
    tick(q, &cfg, base, 2000);
    assert_int_equal(rec.n, 2); /* ...and the new bucket level has its one token */
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 0, base, go, &r[5]), 0);
    assert_int_equal(rec.n, 2); /* the bucket level now holds the next */
    /* Deleting the bucket's policy releases it. */
    assert_int_equal(qos_policy_delete_at(q, 7, QOS_LEVEL_BUCKET, 100), 0);
    settle(base);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.err[2], 0);

    /* Metrics name every level. */
    struct evbuffer *m = evbuffer_new();
    srv_metrics_render(m);
    evbuffer_add(m, "", 1);
    const char *text = (const char *)evbuffer_pullup(m, -1);
    assert_non_null(strstr(text, "s3nfs_qos_admitted_ops_total{tenant=\"7\",level=\"dir\","
                                 "id=\"200\",class=\"write\"} 6\n"));
    assert_non_null(strstr(text, "s3nfs_qos_throttled_seconds_total{"));
    assert_non_null(strstr(text, "s3nfs_qos_guarantee_shortfall_seconds_total{"));
    evbuffer_free(m);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

static void test_measured_capacity_only_with_a_minimum(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    /* Measured: 1 op/s; nothing configured. */
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000, .probe_iops = 1};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct rec rec = {0};
    struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
    /* Nobody has a minimum: the measurement limits nothing. */
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[0]), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[1]), 0);
    assert_int_equal(rec.n, 2);
    /* Tenant 7 gets a minimum: now the measured capacity is shared. */
    struct qos_policy g = {.tenant = 7, .min_iops = 1};
    assert_int_equal(qos_policy_set(q, &g), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_META, 0, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 3);
    /* A configured capacity overrides the measurement. */
    cfg.cap_iops = 1000;
    tick(q, &cfg, base, 0);
    tick(q, &cfg, base, 2000); /* 2 ms at 1000 op/s */
    assert_int_equal(rec.n, 4);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

static void test_many_policies(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    for (uint64_t i = 1; i <= QOS_POLICIES_PER_TENANT_MAX; i++) {
        struct qos_policy bp = {
            .tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 1000 + i, .meta_iops = 1};
        assert_int_equal(qos_policy_set(q, &bp), 0);
    }
    struct qos_policy more = {.tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 1, .meta_iops = 1};
    assert_int_equal(qos_policy_set(q, &more), -ENOSPC);
    more.tenant = 8; /* another tenant has its own allowance */
    assert_int_equal(qos_policy_set(q, &more), 0);
    struct qos_policy tp = {.tenant = 7, .meta_iops = 1000000};
    assert_int_equal(qos_policy_set(q, &tp), 0); /* the tenant level is not counted */
    /* Every bucket is its own level: one op each now, the second waits. */
    struct rec rec = {0};
    static struct req r[16];
    for (int i = 0; i < 8; i++) {
        uint64_t b = 1000 + 1 + (uint64_t)i * 500;
        const struct qos_scope sc = {.bucket_ino = b};
        r[2 * i] = (struct req){&rec, 2 * i};
        r[2 * i + 1] = (struct req){&rec, 2 * i + 1};
        assert_int_equal(qos_admit_at(q, &P7, &sc, QOS_META, 0, base, go, &r[2 * i]), 0);
        assert_int_equal(qos_admit_at(q, &P7, &sc, QOS_META, 0, base, go, &r[2 * i + 1]), 0);
    }
    assert_int_equal(rec.n, 8);
    for (uint64_t i = 1; i <= QOS_POLICIES_PER_TENANT_MAX; i++)
        assert_int_equal(qos_policy_delete_at(q, 7, QOS_LEVEL_BUCKET, 1000 + i), 0);
    settle(base); /* the waiters lost their level: they go */
    assert_int_equal(rec.n, 16);
    struct qos_policy got;
    assert_int_equal(qos_policy_get_at(q, 7, QOS_LEVEL_BUCKET, 1001, &got), -ENOENT);
    assert_int_equal(qos_policy_get_at(q, 8, QOS_LEVEL_BUCKET, 1, &got), 0);
    qos_close(q);
    event_base_free(base);
}

/* The front ends admit a large transfer in pieces: qos_admit again from go,
 * one piece at a time, with the same arg. */
struct xfer {
    struct qos *q;
    struct event_base *base;
    const struct qos_scope *sc;
    int left, done, err;
};

static void piece_go(void *arg, int err)
{
    struct xfer *x = arg;
    if (err) {
        x->err = err;
        return;
    }
    x->done++;
    if (--x->left > 0)
        assert_int_equal(qos_admit_at(x->q, &P7, x->sc, QOS_WRITE, 1000, x->base, piece_go, x), 0);
}

static void test_pieces_reenter(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy bp = {
        .tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 100, .write_bps = 1000};
    assert_int_equal(qos_policy_set(q, &bp), 0);
    const struct qos_scope sc = {.bucket_ino = 100};
    struct xfer x = {q, base, &sc, 4, 0, 0};
    /* The first piece goes at once and asks for the second from go. */
    assert_int_equal(qos_admit_at(q, &P7, &sc, QOS_WRITE, 1000, base, piece_go, &x), 0);
    assert_int_equal(x.done, 1);
    for (int i = 2; i <= 4; i++) { /* one more piece per second of tokens */
        tick(q, &cfg, base, 500000);
        assert_int_equal(x.done, i - 1);
        tick(q, &cfg, base, 500000);
        assert_int_equal(x.done, i);
    }
    assert_int_equal(x.left, 0);
    assert_int_equal(x.err, 0);
    /* A waiting piece can be withdrawn by its arg. */
    x.left = 2;
    x.done = 0;
    assert_int_equal(qos_admit_at(q, &P7, &sc, QOS_WRITE, 1000, base, piece_go, &x), 0);
    assert_int_equal(x.done, 0);
    assert_int_equal(qos_cancel(q, &x), 0);
    assert_int_equal(qos_cancel(q, &x), -ENOENT);
    tick(q, &cfg, base, 2000000);
    assert_int_equal(x.done, 0);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
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

/* Scoped pieces: sized by the slowest byte cap and smallest burst over every
 * level of the path (bucket, directories, NFS default class), and charged to
 * every one of them. */
static void test_piece_scoped(void **state)
{
    (void)state;
    uint64_t (*real_clock)(void) = qos_clock_us;
    qos_clock_us = frozen_clock; /* no refill: what is taken stays taken */
    struct event_base *base = event_base_new();
    struct qos *q = mk(60000, 0);
    struct qos_policy tp = {.tenant = 7, .write_bps = 10000000, .burst_ms = 21}; /* 210000 */
    struct qos_policy bp = {.tenant = 7,
                            .level = QOS_LEVEL_BUCKET,
                            .bucket = 100,
                            .write_bps = 100000,
                            .burst_ms = 100}; /* burst 10000 */
    struct qos_policy dp = {
        .tenant = 7, .level = QOS_LEVEL_DIR, .bucket = 100, .dir = 200, .write_bps = 1000000};
    struct qos_policy np = {.tenant = 7, .level = QOS_LEVEL_NFS_DEFAULT, .read_bps = 1000000};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    assert_int_equal(qos_policy_set(q, &bp), 0);
    assert_int_equal(qos_policy_set(q, &dp), 0);
    assert_int_equal(qos_policy_set(q, &np), 0);
    const uint64_t dirs[1] = {200};
    const struct qos_scope in_bucket = {.bucket_ino = 100};
    const struct qos_scope in_dir = {.bucket_ino = 100, .dirs = dirs, .ndirs = 1};
    const struct qos_scope nfs = {.bucket_ino = 300, .has_uid = true, .uid = 4242};
    struct rec rec = {0};
    struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
    uint64_t piece = 0;
    /* unscoped: the tenant's rate alone (20 ms of 10 MB/s) */
    assert_int_equal(qos_admit_piece(q, &P7, QOS_WRITE, 1 << 30, 0, &piece, base, go, &r[0]), 0);
    assert_int_equal(piece, 200000);
    frozen_now += 1000; /* 10000 back */
    assert_false(qos_applies(q, &P7, QOS_READ));
    /* the NFS default class caps reads of unmapped uids */
    assert_true(qos_applies_at(q, &P7, &nfs, QOS_READ));
    assert_false(qos_applies_at(q, &P7, &in_bucket, QOS_READ));
    assert_true(qos_applies_at(q, &P7, &in_bucket, QOS_WRITE));
    assert_int_equal(
        qos_admit_piece_at(q, &P7, &nfs, QOS_READ, 1 << 30, 0, &piece, base, go, &r[0]), 0);
    assert_int_equal(piece, 20000);
    assert_int_equal(rec.n, 2);
    /* in the directory: the bucket's rate (20 ms of 100 kB/s, at least 4 KiB)
     * decides, and each piece takes the bucket's tokens too */
    rec.n = 0;
    assert_int_equal(
        qos_admit_piece_at(q, &P7, &in_dir, QOS_WRITE, 1 << 20, 0, &piece, base, go, &r[0]), 0);
    assert_int_equal(piece, 4096);
    assert_int_equal(qos_admit_piece_at(q, &P7, &in_dir, QOS_WRITE, 1 << 20, QOS_PIECE_MORE, &piece,
                                        base, go, &r[1]),
                     0);
    assert_int_equal(rec.n, 2); /* 8192 of the bucket's 10000 taken */
    assert_int_equal(
        qos_admit_piece_at(q, &P7, &in_bucket, QOS_WRITE, 1 << 20, 0, &piece, base, go, &r[2]), 0);
    assert_int_equal(piece, 4096);
    assert_int_equal(rec.n, 2); /* the bucket has 1808 left: no debt, it waits */
    assert_int_equal(qos_cancel(q, &r[2]), 0);
    /* the tenant level was charged for them too: 210000 - 200000 + 10000 - 8192 */
    assert_int_equal(qos_admit_at(q, &P7, NULL, QOS_WRITE, 11808, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 3);
    assert_int_equal(qos_admit_at(q, &P7, NULL, QOS_WRITE, 100, base, go, &r[3]), 0);
    assert_int_equal(rec.n, 3);
    assert_int_equal(qos_cancel(q, &r[3]), 0);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = real_clock;
}

/* ---- the system class ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_cb(void *arg, const struct qos_policy *p)
{
    (void)p;
    (*(int *)arg)++;
    return 0;
}

/* The system class is admitted under its cap, in pieces, by the blocking
 * helper; its policy comes from the configuration until one is stored. */
static void test_system_cap(void **state)
{
    (void)state;
    struct qos_config cfg = {.enabled = true, .sys_read_bps = 1 << 20};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy sp;
    bool stored = true;
    assert_int_equal(qos_system_get(q, &sp, &stored), 0);
    assert_false(stored);
    assert_int_equal(sp.read_bps, 1 << 20);
    assert_int_equal(sp.weight, QOS_SYSTEM_WEIGHT_DEFAULT);
    /* one second of burst goes at once; 512 KiB more waits about half a second */
    double t0 = now_s();
    assert_int_equal(qos_system_wait(q, QOS_READ, 1 << 20), 0);
    assert_true(now_s() - t0 < 0.25);
    t0 = now_s();
    assert_int_equal(qos_system_wait(q, QOS_READ, 512 << 10), 0);
    double took = now_s() - t0;
    assert_true(took > 0.35);
    assert_true(took < 5.0);
    /* writes and metadata are not capped here */
    t0 = now_s();
    assert_int_equal(qos_system_wait(q, QOS_WRITE, 8 << 20), 0);
    assert_int_equal(qos_system_wait(q, QOS_META, 0), 0);
    assert_true(now_s() - t0 < 0.25);
    assert_int_equal(qos_system_wait(q, 9, 0), -EINVAL);
    /* a stored policy overrides the configuration; no minimum; reset goes back */
    struct qos_policy np = {.write_bps = 4096};
    assert_int_equal(qos_system_set(q, &np), 0);
    assert_int_equal(qos_system_get(q, &sp, &stored), 0);
    assert_true(stored);
    assert_int_equal(sp.read_bps, 0);
    assert_int_equal(sp.write_bps, 4096);
    assert_int_equal(sp.weight, QOS_SYSTEM_WEIGHT_DEFAULT);
    struct qos_policy mp = {.min_read_bps = 1};
    assert_int_equal(qos_system_set(q, &mp), -EINVAL);
    assert_int_equal(qos_system_reset(q), 0);
    assert_int_equal(qos_system_reset(q), -ENOENT);
    assert_int_equal(qos_system_get(q, &sp, &stored), 0);
    assert_false(stored);
    assert_int_equal(sp.read_bps, 1 << 20);
    /* a reload changes the default */
    cfg.sys_read_bps = 0;
    cfg.sys_weight = 7;
    qos_configure(q, &cfg);
    assert_int_equal(qos_system_get(q, &sp, &stored), 0);
    assert_int_equal(sp.read_bps, 0);
    assert_int_equal(sp.weight, 7);
    /* the system class is not listed among tenants' policies */
    int n = 0;
    assert_int_equal(qos_policy_list(q, count_cb, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(qos_system_wait(NULL, QOS_READ, 1), 0);
    qos_close(q);
}

/* Under contention for the daemon's capacity, the system class never takes
 * what a tenant's minimum covers: a tenant request covered by its minimum
 * goes before a system request that waited longer. */
static void test_system_below_minimums(void **state)
{
    (void)state;
    uint64_t (*saved)(void) = qos_clock_us;
    qos_clock_us = fake_clock;
    fake_now = 1000000;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {
        .enabled = true, .max_wait_ms = 60000, .cap_iops = 1, .sys_weight = QOS_WEIGHT_MAX};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct qos_policy tp = {.tenant = 7, .min_iops = 1};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    const struct core_principal sys = {.tenant = QOS_SYSTEM_TENANT};
    struct rec rec = {0};
    struct req r[4];
    for (int i = 0; i < 4; i++)
        r[i] = (struct req){&rec, i};
    assert_int_equal(qos_admit(q, &sys, QOS_META, 0, base, go, &r[0]), 0); /* the token */
    assert_int_equal(qos_admit(q, &sys, QOS_META, 0, base, go, &r[1]), 0); /* waits */
    assert_int_equal(rec.n, 1);
    /* tenant 7's minimum lets it through although the system class waits */
    assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, go, &r[2]), 0);
    assert_int_equal(rec.n, 2);
    assert_int_equal(rec.order[1], 2);
    assert_int_equal(qos_admit(q, &P7, QOS_META, 0, base, go, &r[3]), 0); /* waits */
    /* a second later the minimum has a token, the daemon none: tenant 7 first,
     * though the system class came earlier and has the largest weight */
    tick(q, &cfg, base, 1000000);
    assert_int_equal(rec.n, 3);
    assert_int_equal(rec.order[2], 3);
    /* the daemon's debt paid, the system request goes */
    tick(q, &cfg, base, 2000000);
    assert_int_equal(rec.n, 4);
    assert_int_equal(rec.order[3], 1);
    assert_int_equal(rec.err[3], 0);
    qos_close(q);
    event_base_free(base);
    qos_clock_us = saved;
}

struct sys_waiter {
    struct qos *q;
    int rc;
    double took;
};

static void *sys_waiter_main(void *arg)
{
    struct sys_waiter *sw = arg;
    double t0 = now_s();
    sw->rc = qos_system_wait(sw->q, QOS_READ, 64 << 20); /* 64 s at the cap */
    sw->took = now_s() - t0;
    return NULL;
}

/* A daemon stop never waits for a system-class grant: qos_system_drain fails
 * the waiting worker at once, and every later wait. */
static void test_system_drain(void **state)
{
    (void)state;
    struct qos_config cfg = {.enabled = true, .sys_read_bps = 1 << 20};
    struct qos *q;
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    struct sys_waiter sw = {q, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sys_waiter_main, &sw), 0);
    struct timespec ts = {0, 300 * 1000000l};
    nanosleep(&ts, NULL);
    double t0 = now_s();
    qos_system_drain(q);
    pthread_join(th, NULL);
    assert_int_equal(sw.rc, SRV_ETHROTTLE);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(qos_system_wait(q, QOS_READ, 1), SRV_ETHROTTLE);
    assert_int_equal(qos_system_wait(q, QOS_META, 0), SRV_ETHROTTLE);
    /* tenants are not affected by the system drain */
    struct rec rec = {0};
    struct req r = {&rec, 1};
    assert_int_equal(qos_admit(q, &P7, QOS_READ, 1, NULL, go, &r), 0);
    assert_int_equal(rec.n, 1);
    qos_close(q);
    /* qos_drain stops the system class too */
    assert_int_equal(qos_open(&q, NULL, &cfg), 0);
    qos_drain(q);
    assert_int_equal(qos_system_wait(q, QOS_READ, 1), SRV_ETHROTTLE);
    qos_close(q);
}

/* A refusal names what held the request back: the level and its id (a
 * directory under a loose bucket and tenant; the tenant itself), or the
 * tenant's full queue (qos_last_refusal, qos_refusal_format). */
struct why_rec {
    int err;
    int n;
    struct qos_refusal why;
};

static void go_why(void *arg, int err)
{
    struct why_rec *w = arg;
    w->err = err;
    w->n++;
    if (err)
        qos_last_refusal(&w->why);
}

static void test_refusal_names_the_level(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos *q = mk(1, 0); /* wait at most 1 ms */
    const uint64_t dirs[1] = {200};
    const struct qos_scope in_dir = {.bucket_ino = 100, .dirs = dirs, .ndirs = 1};
    struct qos_policy tp = {.tenant = 7, .write_bps = 1000000000};
    struct qos_policy bp = {
        .tenant = 7, .level = QOS_LEVEL_BUCKET, .bucket = 100, .write_bps = 1000000000};
    struct qos_policy dp = {
        .tenant = 7, .level = QOS_LEVEL_DIR, .bucket = 100, .dir = 200, .write_bps = 1000};
    assert_int_equal(qos_policy_set(q, &tp), 0);
    assert_int_equal(qos_policy_set(q, &bp), 0);
    assert_int_equal(qos_policy_set(q, &dp), 0);
    struct why_rec a = {0}, b = {0};
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 1000, base, go_why, &a), 0);
    assert_int_equal(qos_admit_at(q, &P7, &in_dir, QOS_WRITE, 1000, base, go_why, &b), 0);
    event_base_dispatch(base);
    assert_int_equal(a.err, 0);
    assert_int_equal(b.err, SRV_ETHROTTLE);
    assert_int_equal(b.why.why, QOS_WHY_LIMIT);
    assert_int_equal(b.why.level, QOS_LEVEL_DIR);
    assert_int_equal(b.why.id, 200);
    assert_int_equal(b.why.tenant, 7);
    char msg[160];
    qos_refusal_format(&b.why, msg, sizeof(msg));
    assert_string_equal(msg, "the write limit of dir 200 of tenant 7 was reached");

    /* The tenant's own cap. */
    struct qos_policy t8 = {.tenant = 8, .read_bps = 1000};
    assert_int_equal(qos_policy_set(q, &t8), 0);
    struct why_rec c = {0}, d = {0};
    assert_int_equal(qos_admit(q, &P8, QOS_READ, 1000, base, go_why, &c), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_READ, 1000, base, go_why, &d), 0);
    event_base_dispatch(base);
    assert_int_equal(d.err, SRV_ETHROTTLE);
    assert_int_equal(d.why.level, QOS_LEVEL_TENANT);
    qos_refusal_format(&d.why, msg, sizeof(msg));
    assert_string_equal(msg, "the read limit of tenant 8 was reached");
    qos_close(q);

    /* A full queue is the tenant's. */
    q = mk(60000, 1);
    assert_int_equal(qos_policy_set(q, &t8), 0);
    struct why_rec e = {0}, f = {0}, g = {0};
    assert_int_equal(qos_admit(q, &P8, QOS_READ, 1000, base, go_why, &e), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_READ, 1000, base, go_why, &f), 0);
    assert_int_equal(qos_admit(q, &P8, QOS_READ, 1000, base, go_why, &g), SRV_ETHROTTLE);
    struct qos_refusal full;
    qos_last_refusal(&full);
    assert_int_equal(full.why, QOS_WHY_QUEUE_FULL);
    qos_refusal_format(&full, msg, sizeof(msg));
    assert_string_equal(msg, "the wait queue of tenant 8 is full");
    assert_int_equal(qos_cancel(q, &f), 0);
    qos_close(q);
    event_base_free(base);
}

/* A request's pieces share one scope lookup (qos_scope.memo): the bucket and
 * the directories above the key are looked up by the first piece only, and
 * again when the scope passed changes; every piece is still charged to the
 * directory level. */
static void test_scope_memo(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct qos_config cfg = {.enabled = true, .max_wait_ms = 60000};
    struct qos *q;
    static int dummy;
    fake_core = true;
    n_bucket_lookups = n_lookups = 0;
    assert_int_equal(qos_open(&q, (struct core *)&dummy, &cfg), 0);
    struct qos_policy dp = {.tenant = 7,
                            .level = QOS_LEVEL_DIR,
                            .bucket = 100,
                            .dir = 200,
                            .write_bps = 1000000,
                            .burst_ms = 1000};
    assert_int_equal(qos_policy_set(q, &dp), 0);
    struct qos_memo memo = {0};
    static const char key[] = "a/obj";
    struct qos_scope sc = {.bucket = "bkt", .bucketlen = 3, .key = key, .keylen = 5, .memo = &memo};
    struct rec rec = {0};
    struct req r = {&rec, 0};
    uint64_t piece = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(qos_admit_piece_at(q, &P7, &sc, QOS_WRITE, 1000, i ? QOS_PIECE_MORE : 0,
                                            &piece, base, go, &r),
                         0);
    assert_int_equal(rec.n, 3);
    assert_int_equal(n_bucket_lookups, 1);
    assert_int_equal(n_lookups, 1);
    assert_true(memo.valid && memo.dirs_done);
    assert_int_equal(memo.ndirs, 1);
    assert_int_equal(memo.dirs[0], 200);
    struct qos_policy got;
    assert_int_equal(qos_policy_get_at(q, 7, QOS_LEVEL_DIR, 200, &got), 0);
    /* Another key (pointer) for the same memo: looked up again. */
    static const char key2[] = "a/other";
    sc.key = key2;
    sc.keylen = 7;
    assert_int_equal(
        qos_admit_piece_at(q, &P7, &sc, QOS_WRITE, 1000, QOS_PIECE_MORE, &piece, base, go, &r), 0);
    assert_int_equal(n_bucket_lookups, 2);
    assert_int_equal(n_lookups, 2);
    /* Without a memo, every call looks up. */
    sc.memo = NULL;
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            qos_admit_piece_at(q, &P7, &sc, QOS_WRITE, 1000, QOS_PIECE_MORE, &piece, base, go, &r),
            0);
    assert_int_equal(n_bucket_lookups, 4);
    assert_int_equal(n_lookups, 4);
    /* Every piece was charged to the directory. */
    struct evbuffer *m = evbuffer_new();
    srv_metrics_render(m);
    evbuffer_add(m, "", 1);
    assert_non_null(strstr((const char *)evbuffer_pullup(m, -1),
                           "s3nfs_qos_admitted_bytes_total{tenant=\"7\",level=\"dir\",id=\"200\","
                           "class=\"write\"} 6000\n"));
    evbuffer_free(m);
    qos_close(q);
    fake_core = false;
    event_base_free(base);
}

/* ---- holds (qos_hold): the dirty-bytes bound of a bucket ---- */

struct fake_hold {
    bool full;        /* bucket 100 is past its bound */
    int checks, held; /* check calls, held() calls */
    uint64_t charged; /* bytes charged to bucket 100 */
    uint64_t held_us; /* the held time charged */
};

static bool fh_active(void *arg)
{
    (void)arg;
    return true;
}
static bool fh_bounded(void *arg, uint64_t bucket, bool *dirs)
{
    (void)arg;
    *dirs = false;
    return bucket == 100;
}
static int fh_check(void *arg, uint64_t bucket, const uint64_t *dirs, size_t ndirs, uint64_t bytes,
                    bool first)
{
    struct fake_hold *f = arg;
    (void)dirs;
    (void)ndirs;
    (void)bytes;
    (void)first;
    assert_int_equal(bucket, 100);
    f->checks++;
    return f->full ? 1 : 0;
}
static void fh_charge(void *arg, uint64_t bucket, const uint64_t *dirs, size_t ndirs,
                      uint64_t bytes, uint64_t held_us)
{
    struct fake_hold *f = arg;
    (void)dirs;
    (void)ndirs;
    assert_int_equal(bucket, 100);
    f->charged += bytes;
    f->held_us += held_us;
}
static void fh_held(void *arg, uint64_t bucket)
{
    struct fake_hold *f = arg;
    (void)bucket;
    f->held++;
}

static struct fake_hold *release_f;
static void release_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    release_f->full = false;
}

static void test_hold(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    for (int enabled = 1; enabled >= 0; enabled--) {
        struct qos *q;
        /* a 1 ms max wait: a held write must outlast it */
        struct qos_config cfg = {.enabled = enabled, .max_wait_ms = 1};
        assert_int_equal(qos_open(&q, NULL, &cfg), 0);
        struct fake_hold f = {.full = true};
        const struct qos_hold h = {fh_active, fh_bounded, fh_check, fh_charge, fh_held, &f};
        qos_set_hold(q, &h);
        const struct qos_scope b100 = {.bucket_ino = 100}, b300 = {.bucket_ino = 300};
        assert_true(qos_applies_at(q, &P7, &b100, QOS_WRITE));
        assert_false(qos_applies_at(q, &P7, &b300, QOS_WRITE));
        struct rec rec = {0};
        struct req r[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
        uint64_t piece = 0;
        assert_int_equal(
            qos_admit_piece_at(q, &P7, &b100, QOS_WRITE, 1000, 0, &piece, base, go, &r[0]), 0);
        assert_int_equal(rec.n, 0); /* held */
        assert_int_equal(piece, 1000);
        assert_int_equal(f.held, 1);
        /* nobody else waits behind it: its tenant's other bucket, a read of the
         * same bucket, another tenant */
        assert_int_equal(qos_admit_at(q, &P7, &b300, QOS_WRITE, 1000, base, go, &r[1]), 0);
        assert_int_equal(qos_admit_at(q, &P7, &b100, QOS_READ, 1000, base, go, &r[2]), 0);
        assert_int_equal(qos_admit_at(q, &P8, &b300, QOS_WRITE, 1000, base, go, &r[3]), 0);
        assert_int_equal(rec.n, 3);
        /* held well past max_wait_ms (50 ms), and never refused; asked again on its
         * timer (5 ms, then doubling): the loop runs until both happened, however late
         * a loaded machine runs it (a fixed 50 ms could see a single timer run) */
        int64_t t0 = srv_now_ms();
        while (f.checks <= 2 || srv_now_ms() - t0 < 50) {
            assert_true(srv_now_ms() - t0 < 20000);
            if (event_base_loop(base, EVLOOP_ONCE) != 0)
                break; /* nothing pending: not held any more */
        }
        assert_int_equal(rec.n, 3);
        assert_true(f.checks > 2); /* asked again on its timer */
        struct evbuffer *m = evbuffer_new();
        srv_metrics_render(m);
        evbuffer_add(m, "", 1);
        assert_non_null(strstr((const char *)evbuffer_pullup(m, -1), "s3nfs_qos_held 1\n"));
        evbuffer_free(m);
        /* room again (uploads confirmed): it goes, charged with its held time */
        release_f = &f;
        struct event *rel = evtimer_new(base, release_cb, NULL);
        struct timeval tv2 = {0, 20000};
        evtimer_add(rel, &tv2);
        event_base_dispatch(base);
        event_free(rel);
        assert_int_equal(rec.n, 4);
        assert_int_equal(rec.order[3], 0);
        assert_int_equal(rec.err[3], 0);
        assert_int_equal(f.charged, 1000);
        assert_true(f.held_us >= 50000);
        /* a write that goes at once is charged, not held */
        assert_int_equal(qos_admit_at(q, &P7, &b100, QOS_WRITE, 500, base, go, &r[1]), 0);
        assert_int_equal(rec.n, 5);
        assert_int_equal(f.charged, 1500);
        /* cancel withdraws a held write; drain refuses one */
        f.full = true;
        rec.n = 0;
        assert_int_equal(qos_admit_at(q, &P7, &b100, QOS_WRITE, 10, base, go, &r[0]), 0);
        assert_int_equal(qos_admit_at(q, &P7, &b100, QOS_WRITE, 10, base, go, &r[1]), 0);
        assert_int_equal(qos_cancel(q, &r[0]), 0);
        assert_int_equal(qos_cancel(q, &r[0]), -ENOENT);
        qos_drain(q);
        event_base_dispatch(base);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.order[0], 1);
        assert_int_equal(rec.err[0], SRV_ETHROTTLE);
        qos_close(q);
    }
    event_base_free(base);
}

int main(void)
{
    evthread_use_pthreads(); /* qos_system_wait's loop is woken from other threads */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_policy_is_immediate),
        cmocka_unit_test(test_fifo_wait),
        cmocka_unit_test(test_throttle_and_queue_full),
        cmocka_unit_test(test_cancel_drain_release),
        cmocka_unit_test(test_disable),
        cmocka_unit_test(test_user_policy),
        cmocka_unit_test(test_guarantee),
        cmocka_unit_test(test_every_level_must_admit),
        cmocka_unit_test(test_reservation_first),
        cmocka_unit_test(test_weights_share_the_rest),
        cmocka_unit_test(test_change_applies_to_queued),
        cmocka_unit_test(test_measured_capacity_only_with_a_minimum),
        cmocka_unit_test(test_many_policies),
        cmocka_unit_test(test_pieces_reenter),
        cmocka_unit_test(test_piece_size),
        cmocka_unit_test(test_piece_charges_one_op),
        cmocka_unit_test(test_piece_waits_without_debt),
        cmocka_unit_test(test_piece_scoped),
        cmocka_unit_test(test_system_cap),
        cmocka_unit_test(test_system_below_minimums),
        cmocka_unit_test(test_system_drain),
        cmocka_unit_test(test_refusal_names_the_level),
        cmocka_unit_test(test_scope_memo),
        cmocka_unit_test(test_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
