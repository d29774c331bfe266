/* SPDX-License-Identifier: Apache-2.0
 * qos_admit: per-tenant token buckets and FIFO wait queues driven by event
 * timers (see qos_admit.h).
 *
 * State: one entry per tenant with a policy: five buckets (read bytes, write
 * bytes, read ops, write ops, metadata ops) and a FIFO of waiting requests.
 * Only the head of a FIFO can be admitted, so a tenant's requests leave in
 * arrival order and a large request is not starved by small ones. Each
 * waiter owns a timer event on its caller's event_base: the head's timer is
 * armed for when its tokens will be there (or its deadline, if sooner); the
 * others' for their deadlines. When a head is admitted, the next head's timer
 * is re-armed (event_add is thread-safe: libevent threading is on).
 * One mutex guards everything; go() callbacks always run without it.
 * With a configured capacity, daemon-wide buckets (read bytes, write bytes,
 * operations) account for every admitted request; a dimension of a request is
 * covered either by its guarantee bucket (tokens now) or by the daemon-wide
 * bucket, which guaranteed traffic may drive into debt.
 * Policies persist in META_REC_QOS as "t" + be32 tenant (or "u" + be32 tenant +
 * be64 user) -> JSON.
 * Thread: see qos_admit.h. */
#include "qos_admit.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "meta_record.h"
#include "qos_bucket.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_metrics.h"

#define DEF_MAX_WAIT_MS 30000
#define DEF_QUEUE_MAX 4096

enum { NB_RBPS, NB_WBPS, NB_RIOPS, NB_WIOPS, NB_MIOPS, NB__COUNT };

enum waiter_force { FORCE_NONE = 0, FORCE_ADMIT, FORCE_THROTTLE };

/* Daemon-wide (capacity) and guarantee dimensions. */
enum { G_RBPS, G_WBPS, G_IOPS, G__COUNT };

struct waiter {
    struct waiter *next, *prev;
    struct qos *q;
    struct tstate *ts;
    enum qos_class cls;
    uint64_t bytes;
    unsigned ops; /* operations charged: 1, or 0 for a later piece (qos_admit_piece) */
    struct event *ev;
    void (*go)(void *arg, int err);
    void *arg;
    uint64_t deadline_us;
    enum waiter_force force;
    bool cancelled; /* unlinked by qos_cancel; its timer callback must not touch the queue */
};

struct tstate {
    struct qos_policy pol;
    struct qos_bucket b[NB__COUNT];
    struct qos_bucket gb[G__COUNT]; /* guarantees (rate 0 = none) */
    struct waiter *head, *tail;
    size_t nwait;
    uint64_t delayed, throttled; /* requests that waited; that failed with SRV_ETHROTTLE */
};

struct qos {
    struct core *core;
    pthread_mutex_t lock;
    struct qos_config cfg;
    bool global;                  /* a capacity is configured */
    struct qos_bucket g[G__COUNT]; /* daemon-wide capacity */
    struct tstate **ts;
    size_t nts, capts;
};

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t (*qos_clock_us)(void) = mono_us;

static struct qos *global_qos;

struct qos *qos_global(void)
{
    return __atomic_load_n(&global_qos, __ATOMIC_ACQUIRE);
}

void qos_set_global(struct qos *q)
{
    __atomic_store_n(&global_qos, q, __ATOMIC_RELEASE);
}

static void cfg_norm(struct qos_config *c)
{
    if (c->max_wait_ms == 0)
        c->max_wait_ms = DEF_MAX_WAIT_MS;
    if (c->queue_max == 0)
        c->queue_max = DEF_QUEUE_MAX;
}

static struct tstate *ts_find(struct qos *q, uint32_t tenant, uint64_t user)
{
    for (size_t i = 0; i < q->nts; i++)
        if (q->ts[i]->pol.tenant == tenant && q->ts[i]->pol.user == user)
            return q->ts[i];
    return NULL;
}

static void bucket_apply(struct qos_bucket *b, uint64_t rate, double secs, uint64_t now,
                         bool fresh)
{
    double r = (double)rate;
    double burst = r * secs;
    if (r > 0 && burst < 1)
        burst = 1;
    if (fresh)
        qos_bucket_init(b, r, burst, now);
    else
        qos_bucket_set(b, r, burst, now);
}

static void ts_apply(struct tstate *ts, const struct qos_policy *pol, uint64_t now, bool fresh)
{
    double secs = (pol->burst_ms ? pol->burst_ms : 1000) / 1000.0;
    const uint64_t rates[NB__COUNT] = {pol->read_bps, pol->write_bps, pol->read_iops,
                                       pol->write_iops, pol->meta_iops};
    const uint64_t mins[G__COUNT] = {pol->min_read_bps, pol->min_write_bps, pol->min_iops};
    for (int i = 0; i < NB__COUNT; i++)
        bucket_apply(&ts->b[i], rates[i], secs, now, fresh);
    for (int i = 0; i < G__COUNT; i++)
        bucket_apply(&ts->gb[i], mins[i], secs, now, fresh);
    ts->pol = *pol;
}

static bool has_guarantee(const struct qos_policy *p)
{
    return p->min_read_bps || p->min_write_bps || p->min_iops;
}

/* Daemon-wide buckets from the configuration (one second of burst). */
static void global_apply(struct qos *q, bool fresh)
{
    uint64_t now = qos_clock_us();
    const uint64_t caps[G__COUNT] = {q->cfg.cap_read_bps, q->cfg.cap_write_bps,
                                     q->cfg.cap_iops};
    for (int i = 0; i < G__COUNT; i++)
        bucket_apply(&q->g[i], caps[i], 1.0, now, fresh);
    q->global = caps[0] || caps[1] || caps[2];
}

/* The two buckets a request draws from. */
static void buckets_of(enum qos_class cls, int *bytes_b, int *ops_b)
{
    switch (cls) {
    case QOS_READ:
        *bytes_b = NB_RBPS;
        *ops_b = NB_RIOPS;
        break;
    case QOS_WRITE:
        *bytes_b = NB_WBPS;
        *ops_b = NB_WIOPS;
        break;
    default:
        *bytes_b = -1;
        *ops_b = NB_MIOPS;
        break;
    }
}

static uint64_t wait_of(struct tstate *ts, enum qos_class cls, uint64_t bytes, unsigned ops,
                        uint64_t now)
{
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    uint64_t w = ops ? qos_bucket_wait_us(&ts->b[ob], ops, now) : 0;
    if (bb >= 0 && bytes) {
        uint64_t wb = qos_bucket_wait_us(&ts->b[bb], (double)bytes, now);
        if (wb > w)
            w = wb;
    }
    return w;
}

static void take(struct tstate *ts, enum qos_class cls, uint64_t bytes, unsigned ops, uint64_t now)
{
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    if (ops)
        qos_bucket_take(&ts->b[ob], ops, now);
    if (bb >= 0 && bytes)
        qos_bucket_take(&ts->b[bb], (double)bytes, now);
}

/* A request waits in its "home" queue: its user's when the user has a policy,
 * else its tenant's. A user's request must also fit the tenant's caps, so the
 * tenant state (looked up afresh: it may come and go) joins the computation. */
static struct tstate *parent_of(struct qos *q, const struct tstate *home)
{
    return home->pol.user ? ts_find(q, home->pol.tenant, 0) : NULL;
}

/* The state whose guarantees cover @p home's requests: its own, else its tenant's. */
static struct tstate *guarantor_of(struct qos *q, struct tstate *home)
{
    if (has_guarantee(&home->pol))
        return home;
    struct tstate *t = parent_of(q, home);
    return t && has_guarantee(&t->pol) ? t : NULL;
}

/* Wait for @p n tokens of capacity dimension @p d: now if the guarantee has them,
 * else when the sooner of the guarantee or the daemon-wide bucket has them. */
static uint64_t dim_wait(struct qos *q, struct tstate *gs, int d, double n, uint64_t now,
                         bool *guaranteed)
{
    *guaranteed = false;
    uint64_t w = qos_bucket_wait_us(&q->g[d], n, now);
    if (gs && gs->gb[d].rate > 0) {
        uint64_t wg = qos_bucket_wait_us(&gs->gb[d], n, now);
        if (wg == 0) {
            *guaranteed = true;
            return 0;
        }
        if (wg < w)
            w = wg;
    }
    return w;
}

static int gdim_bytes(enum qos_class cls)
{
    return cls == QOS_READ ? G_RBPS : cls == QOS_WRITE ? G_WBPS : -1;
}

static uint64_t wait_chain(struct qos *q, struct tstate *home, enum qos_class cls, uint64_t bytes,
                           unsigned ops, uint64_t now)
{
    uint64_t w = wait_of(home, cls, bytes, ops, now);
    struct tstate *t = parent_of(q, home);
    if (t) {
        uint64_t wt = wait_of(t, cls, bytes, ops, now);
        if (wt > w)
            w = wt;
    }
    if (q->global) {
        struct tstate *gs = guarantor_of(q, home);
        bool g;
        uint64_t wd = ops ? dim_wait(q, gs, G_IOPS, ops, now, &g) : 0;
        if (wd > w)
            w = wd;
        int bd = gdim_bytes(cls);
        if (bd >= 0 && bytes) {
            wd = dim_wait(q, gs, bd, (double)bytes, now, &g);
            if (wd > w)
                w = wd;
        }
    }
    return w;
}

/* Draw a dimension: from the guarantee when it covers it now, and always from
 * the daemon-wide bucket (guaranteed traffic may put it into debt). */
static void take_dim(struct qos *q, struct tstate *gs, int d, double n, uint64_t now)
{
    bool g;
    dim_wait(q, gs, d, n, now, &g);
    if (g)
        qos_bucket_charge(&gs->gb[d], n, now);
    qos_bucket_charge(&q->g[d], n, now);
}

static void take_chain(struct qos *q, struct tstate *home, enum qos_class cls, uint64_t bytes,
                       unsigned ops, uint64_t now)
{
    take(home, cls, bytes, ops, now);
    struct tstate *t = parent_of(q, home);
    if (t)
        take(t, cls, bytes, ops, now);
    if (q->global) {
        struct tstate *gs = guarantor_of(q, home);
        if (ops)
            take_dim(q, gs, G_IOPS, ops, now);
        int bd = gdim_bytes(cls);
        if (bd >= 0 && bytes)
            take_dim(q, gs, bd, (double)bytes, now);
    }
}

static int policy_install(struct qos *q, const struct qos_policy *pol);

static void unlink_waiter(struct tstate *ts, struct waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        ts->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        ts->tail = w->prev;
    ts->nwait--;
}

static void arm(struct waiter *w, uint64_t in_us)
{
    struct timeval tv = {(time_t)(in_us / 1000000u), (suseconds_t)(in_us % 1000000u)};
    event_add(w->ev, &tv);
}

/* Arm the head for when it can go (or its deadline). Called under the lock. */
static void arm_head(struct qos *q, struct tstate *ts, uint64_t now)
{
    struct waiter *h = ts->head;
    if (!h || h->force)
        return;
    uint64_t w = wait_chain(q, ts, h->cls, h->bytes, h->ops, now);
    uint64_t left = h->deadline_us > now ? h->deadline_us - now : 0;
    arm(h, w < left ? w : left);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    struct tstate *ts = w->ts;
    struct qos *q = w->q;
    int err;

    pthread_mutex_lock(&q->lock);
    if (w->cancelled) {
        /* qos_cancel from another thread won the race; it frees w once we return
         * (event_free waits for a running callback). */
        pthread_mutex_unlock(&q->lock);
        return;
    }
    uint64_t now = qos_clock_us();
    if (w->force == FORCE_ADMIT) {
        err = 0;
    } else if (w->force == FORCE_THROTTLE) {
        err = SRV_ETHROTTLE;
    } else if (ts->head == w && wait_chain(q, ts, w->cls, w->bytes, w->ops, now) == 0) {
        take_chain(q, ts, w->cls, w->bytes, w->ops, now);
        err = 0;
    } else if (now >= w->deadline_us) {
        err = SRV_ETHROTTLE;
        ts->throttled++;
    } else {
        /* Not yet: the head waits for tokens, the others for their turn. */
        if (ts->head == w)
            arm_head(q, ts, now);
        else
            arm(w, w->deadline_us - now);
        pthread_mutex_unlock(&q->lock);
        return;
    }
    bool was_head = ts->head == w;
    uint32_t tenant = ts->pol.tenant;
    unlink_waiter(ts, w);
    if (was_head)
        arm_head(q, ts, now);
    pthread_mutex_unlock(&q->lock);

    if (err)
        srv_log(DEBUG, QOS, "tenant=%u request throttled after waiting", tenant);
    event_free(w->ev);
    void (*go)(void *, int) = w->go;
    void *garg = w->arg;
    free(w);
    go(garg, err);
}

/* Pieces last about this long at the rate of the slowest bucket: short enough
 * that other requests of the tenant, queued behind a waiting piece, wait
 * little; long enough that a shaped transfer costs at most ~50 admissions a
 * second. */
#define PIECE_US 20000
#define PIECE_MIN 4096

/* The piece size for a request of @p home in class @p cls: PIECE_US worth of
 * the slowest byte bucket it draws from (its own, its tenant's, the
 * daemon-wide and guarantee buckets), at least PIECE_MIN, never more than
 * the smallest burst. 0: its bytes are not limited. Under the lock. */
static uint64_t piece_of(struct qos *q, struct tstate *home, enum qos_class cls)
{
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    double m = 0, r = 0;
    const struct qos_bucket *cand[4] = {NULL, NULL, NULL, NULL};
    if (bb >= 0) {
        struct tstate *t = parent_of(q, home);
        cand[0] = &home->b[bb];
        cand[1] = t ? &t->b[bb] : NULL;
        int bd = gdim_bytes(cls);
        if (q->global && bd >= 0) {
            struct tstate *gs = guarantor_of(q, home);
            cand[2] = &q->g[bd];
            cand[3] = gs ? &gs->gb[bd] : NULL;
        }
    }
    for (int i = 0; i < 4; i++) {
        if (!cand[i] || cand[i]->rate <= 0)
            continue;
        if (m == 0 || cand[i]->burst < m)
            m = cand[i]->burst;
        if (r == 0 || cand[i]->rate < r)
            r = cand[i]->rate;
    }
    if (m <= 0)
        return 0;
    double want = r * PIECE_US / 1e6;
    if (want < PIECE_MIN)
        want = PIECE_MIN;
    if (want > m)
        want = m;
    return want < 1 ? 1 : (uint64_t)want;
}

/* qos_admit and qos_admit_piece: @p ops operations (0 or 1) and, with @p piece
 * set, at most one piece of @p bytes (its size stored there before go may run). */
static int admit(struct qos *q, const struct core_principal *p, enum qos_class cls, uint64_t bytes,
                 unsigned ops, uint64_t *piece, struct event_base *base,
                 void (*go)(void *arg, int err), void *arg)
{
    if (piece)
        *piece = bytes;
    if (!go || (unsigned)cls > QOS_META)
        return -EINVAL;
    if (!q || !p) {
        go(arg, 0);
        return 0;
    }
    pthread_mutex_lock(&q->lock);
    struct tstate *ts = NULL;
    if (q->cfg.enabled) {
        ts = p->user ? ts_find(q, p->tenant, p->user) : NULL;
        if (!ts)
            ts = ts_find(q, p->tenant, 0);
        if (!ts && q->global) {
            /* Capacity is shared: a tenant without a policy still queues for it. */
            struct qos_policy none = {.tenant = p->tenant};
            if (policy_install(q, &none) == 0)
                ts = ts_find(q, p->tenant, 0);
        }
    }
    if (!ts) {
        pthread_mutex_unlock(&q->lock);
        go(arg, 0);
        return 0;
    }
    if (piece && !q->cfg.shaping_off) {
        uint64_t m = piece_of(q, ts, cls);
        if (m && bytes > m)
            bytes = m;
        *piece = bytes;
    }
    uint64_t now = qos_clock_us();
    if (!ts->head && wait_chain(q, ts, cls, bytes, ops, now) == 0) {
        take_chain(q, ts, cls, bytes, ops, now);
        pthread_mutex_unlock(&q->lock);
        go(arg, 0);
        return 0;
    }
    if (!base) {
        pthread_mutex_unlock(&q->lock);
        return -EINVAL;
    }
    if (ts->nwait >= q->cfg.queue_max) {
        ts->throttled++;
        pthread_mutex_unlock(&q->lock);
        srv_log(DEBUG, QOS, "tenant=%u queue full (%zu waiting)", p->tenant, ts->nwait);
        return SRV_ETHROTTLE;
    }
    struct waiter *w = calloc(1, sizeof(*w));
    if (!w) {
        pthread_mutex_unlock(&q->lock);
        return -ENOMEM;
    }
    w->ev = evtimer_new(base, on_timer, w);
    if (!w->ev) {
        pthread_mutex_unlock(&q->lock);
        free(w);
        return -ENOMEM;
    }
    w->q = q;
    w->ts = ts;
    w->cls = cls;
    w->bytes = bytes;
    w->ops = ops;
    w->go = go;
    w->arg = arg;
    w->deadline_us = now + (uint64_t)q->cfg.max_wait_ms * 1000u;
    w->prev = ts->tail;
    if (ts->tail)
        ts->tail->next = w;
    else
        ts->head = w;
    ts->tail = w;
    ts->nwait++;
    ts->delayed++;
    if (ts->head == w)
        arm_head(q, ts, now);
    else
        arm(w, w->deadline_us - now);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int qos_admit(struct qos *q, const struct core_principal *p, enum qos_class cls, uint64_t bytes,
              struct event_base *base, void (*go)(void *arg, int err), void *arg)
{
    return admit(q, p, cls, bytes, 1, NULL, base, go, arg);
}

int qos_admit_piece(struct qos *q, const struct core_principal *p, enum qos_class cls,
                    uint64_t bytes, unsigned flags, uint64_t *piece, struct event_base *base,
                    void (*go)(void *arg, int err), void *arg)
{
    if (!piece || (flags & ~QOS_PIECE_MORE))
        return -EINVAL;
    return admit(q, p, cls, bytes, (flags & QOS_PIECE_MORE) ? 0 : 1, piece, base, go, arg);
}

bool qos_applies(struct qos *q, const struct core_principal *p, enum qos_class cls)
{
    if (!q || !p || (unsigned)cls > QOS_META)
        return false;
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    pthread_mutex_lock(&q->lock);
    bool yes = q->cfg.enabled && q->global;
    if (q->cfg.enabled && !yes) {
        const struct tstate *s[2] = {p->user ? ts_find(q, p->tenant, p->user) : NULL,
                                     ts_find(q, p->tenant, 0)};
        for (int i = 0; i < 2; i++)
            if (s[i] && (s[i]->b[ob].rate > 0 || (bb >= 0 && s[i]->b[bb].rate > 0)))
                yes = true;
    }
    pthread_mutex_unlock(&q->lock);
    return yes;
}

int qos_cancel(struct qos *q, void *arg)
{
    if (!q)
        return -ENOENT;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < q->nts; i++) {
        struct tstate *ts = q->ts[i];
        for (struct waiter *w = ts->head; w; w = w->next) {
            if (w->arg != arg)
                continue;
            bool was_head = ts->head == w;
            unlink_waiter(ts, w);
            w->cancelled = true;
            if (was_head)
                arm_head(q, ts, qos_clock_us());
            pthread_mutex_unlock(&q->lock);
            event_free(w->ev); /* waits for the callback if it runs on another thread */
            free(w);
            return 0;
        }
    }
    pthread_mutex_unlock(&q->lock);
    return -ENOENT;
}

/* Wake every waiter of @p ts with @p force, each on its own loop. Under the lock. */
static void force_all(struct tstate *ts, enum waiter_force force)
{
    for (struct waiter *w = ts->head; w; w = w->next) {
        w->force = force;
        event_active(w->ev, EV_TIMEOUT, 0);
    }
}

void qos_drain(struct qos *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < q->nts; i++)
        force_all(q->ts[i], FORCE_THROTTLE);
    pthread_mutex_unlock(&q->lock);
}

void qos_configure(struct qos *q, const struct qos_config *cfg)
{
    pthread_mutex_lock(&q->lock);
    q->cfg = *cfg;
    cfg_norm(&q->cfg);
    global_apply(q, false);
    for (size_t i = 0; i < q->nts; i++)
        arm_head(q, q->ts[i], qos_clock_us());
    if (!q->cfg.enabled)
        for (size_t i = 0; i < q->nts; i++)
            force_all(q->ts[i], FORCE_ADMIT);
    pthread_mutex_unlock(&q->lock);
}

/* ---- policies ---- */

/* "t" + be32 tenant (5 bytes) or "u" + be32 tenant + be64 user (13 bytes). */
static size_t policy_key(uint32_t tenant, uint64_t user, uint8_t k[13])
{
    k[0] = user ? 'u' : 't';
    for (int i = 0; i < 4; i++)
        k[1 + i] = (uint8_t)(tenant >> (24 - 8 * i));
    if (!user)
        return 5;
    for (int i = 0; i < 8; i++)
        k[5 + i] = (uint8_t)(user >> (56 - 8 * i));
    return 13;
}

static int policy_decode(const void *val, size_t vlen, struct qos_policy *pol)
{
    json_error_t e;
    json_t *j = json_loadb(val, vlen, 0, &e);
    if (!j)
        return SRV_ECORRUPT;
    json_int_t v = 0, tenant = 0, user = 0, rb = 0, wb = 0, ri = 0, wi = 0, mi = 0, burst = 0;
    json_int_t mrb = 0, mwb = 0, mio = 0;
    int rc = json_unpack(j, "{s:I,s:I,s?I,s:I,s:I,s:I,s:I,s:I,s:I,s?I,s?I,s?I}", "v", &v,
                         "tenant", &tenant, "user", &user, "read_bps", &rb, "write_bps", &wb,
                         "read_iops", &ri, "write_iops", &wi, "meta_iops", &mi, "burst_ms",
                         &burst, "min_read_bps", &mrb, "min_write_bps", &mwb, "min_iops", &mio);
    json_decref(j);
    if (rc < 0 || v != 1 || tenant <= 0 || user < 0 || rb < 0 || wb < 0 || ri < 0 || wi < 0 ||
        mi < 0 || burst < 0 || mrb < 0 || mwb < 0 || mio < 0)
        return SRV_ECORRUPT;
    memset(pol, 0, sizeof(*pol));
    pol->tenant = (uint32_t)tenant;
    pol->user = (uint64_t)user;
    pol->read_bps = (uint64_t)rb;
    pol->write_bps = (uint64_t)wb;
    pol->read_iops = (uint64_t)ri;
    pol->write_iops = (uint64_t)wi;
    pol->meta_iops = (uint64_t)mi;
    pol->burst_ms = (uint32_t)burst;
    pol->min_read_bps = (uint64_t)mrb;
    pol->min_write_bps = (uint64_t)mwb;
    pol->min_iops = (uint64_t)mio;
    return 0;
}

/* No cap and no guarantee: the same as having no policy. */
static bool policy_unlimited(const struct qos_policy *p)
{
    return !p->read_bps && !p->write_bps && !p->read_iops && !p->write_iops && !p->meta_iops &&
           !has_guarantee(p);
}

/* Install @p pol in the cache (under the lock). */
static int policy_install(struct qos *q, const struct qos_policy *pol)
{
    uint64_t now = qos_clock_us();
    struct tstate *ts = ts_find(q, pol->tenant, pol->user);
    if (ts) {
        ts_apply(ts, pol, now, false);
        arm_head(q, ts, now);
        return 0;
    }
    if (q->nts == q->capts) {
        size_t ncap = q->capts ? q->capts * 2 : 16;
        struct tstate **n = realloc(q->ts, ncap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        q->ts = n;
        q->capts = ncap;
    }
    ts = calloc(1, sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    ts_apply(ts, pol, now, true);
    q->ts[q->nts++] = ts;
    return 0;
}

/* Remove a tenant's state (under the lock): its waiters are admitted. */
static int policy_uninstall(struct qos *q, uint32_t tenant, uint64_t user)
{
    for (size_t i = 0; i < q->nts; i++) {
        struct tstate *ts = q->ts[i];
        if (ts->pol.tenant != tenant || ts->pol.user != user)
            continue;
        if (ts->head) {
            /* Keep the state until the waiters have left; just lift the limits. */
            struct qos_policy none = {.tenant = tenant, .user = user};
            ts_apply(ts, &none, qos_clock_us(), false);
            force_all(ts, FORCE_ADMIT);
            return 0;
        }
        free(ts);
        q->ts[i] = q->ts[--q->nts];
        return 0;
    }
    return -ENOENT;
}

int qos_policy_set(struct qos *q, const struct qos_policy *pol)
{
    int rc = 0;
    if (!pol || pol->tenant == 0 || pol->burst_ms > 60000)
        return -EINVAL;
    const uint64_t lim = (uint64_t)1 << 52; /* exact in a double and in json_int_t */
    if (pol->read_bps > lim || pol->write_bps > lim || pol->read_iops > lim ||
        pol->write_iops > lim || pol->meta_iops > lim || pol->min_read_bps > lim ||
        pol->min_write_bps > lim || pol->min_iops > lim)
        return -EINVAL;
    pthread_mutex_lock(&q->lock);
    if (q->core) {
        uint8_t k[13];
        size_t klen = policy_key(pol->tenant, pol->user, k);
        json_t *j = json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "v", 1,
                              "tenant",
                              (json_int_t)pol->tenant, "user", (json_int_t)pol->user,
                              "read_bps", (json_int_t)pol->read_bps,
                              "write_bps", (json_int_t)pol->write_bps, "read_iops",
                              (json_int_t)pol->read_iops, "write_iops",
                              (json_int_t)pol->write_iops, "meta_iops",
                              (json_int_t)pol->meta_iops, "burst_ms", (json_int_t)pol->burst_ms,
                              "min_read_bps", (json_int_t)pol->min_read_bps, "min_write_bps",
                              (json_int_t)pol->min_write_bps, "min_iops",
                              (json_int_t)pol->min_iops);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!s) {
            rc = -ENOMEM;
            goto out;
        }
        rc = meta_record_put(core_meta(q->core), META_REC_QOS, k, klen, s, strlen(s), 0);
        free(s);
        if (rc < 0)
            goto out;
    }
    rc = policy_unlimited(pol) ? (policy_uninstall(q, pol->tenant, pol->user), 0)
                               : policy_install(q, pol);
    if (rc == 0)
        srv_log(INFO, QOS,
                "tenant=%u user=%llu policy: caps read %llu B/s %llu op/s, write %llu B/s "
                "%llu op/s, meta %llu op/s; minimums read %llu B/s, write %llu B/s, %llu op/s "
                "(0 = none; user 0 = the whole tenant)",
                pol->tenant, (unsigned long long)pol->user, (unsigned long long)pol->read_bps,
                (unsigned long long)pol->read_iops, (unsigned long long)pol->write_bps,
                (unsigned long long)pol->write_iops, (unsigned long long)pol->meta_iops,
                (unsigned long long)pol->min_read_bps, (unsigned long long)pol->min_write_bps,
                (unsigned long long)pol->min_iops);
out:
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_get_user(struct qos *q, uint32_t tenant, uint64_t user, struct qos_policy *out)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&q->lock);
    struct tstate *ts = ts_find(q, tenant, user);
    if (ts && !policy_unlimited(&ts->pol)) {
        *out = ts->pol;
        rc = 0;
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_get(struct qos *q, uint32_t tenant, struct qos_policy *out)
{
    return qos_policy_get_user(q, tenant, 0, out);
}

int qos_policy_delete_user(struct qos *q, uint32_t tenant, uint64_t user)
{
    pthread_mutex_lock(&q->lock);
    struct tstate *ts = ts_find(q, tenant, user);
    int rc = (ts && !policy_unlimited(&ts->pol)) ? 0 : -ENOENT;
    if (rc == 0 && q->core) {
        uint8_t k[13];
        size_t klen = policy_key(tenant, user, k);
        rc = meta_record_del(core_meta(q->core), META_REC_QOS, k, klen);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0) {
        policy_uninstall(q, tenant, user);
        srv_log(INFO, QOS, "tenant=%u user=%llu policy removed (unlimited)", tenant,
                (unsigned long long)user);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_delete(struct qos *q, uint32_t tenant)
{
    return qos_policy_delete_user(q, tenant, 0);
}

int qos_policy_list(struct qos *q, qos_policy_cb cb, void *arg)
{
    pthread_mutex_lock(&q->lock);
    size_t n = 0;
    struct qos_policy *copy = malloc((q->nts ? q->nts : 1) * sizeof(*copy));
    if (!copy) {
        pthread_mutex_unlock(&q->lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->nts; i++)
        if (!policy_unlimited(&q->ts[i]->pol))
            copy[n++] = q->ts[i]->pol;
    pthread_mutex_unlock(&q->lock);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb(arg, &copy[i]);
    free(copy);
    return rc > 0 ? 0 : rc;
}

struct load_ctx {
    struct qos *q;
    int rc;
};

static int load_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *lc = arg;
    struct qos_policy pol;
    const uint8_t *k = key;
    if (!((klen == 5 && k[0] == 't') || (klen == 13 && k[0] == 'u')))
        return 0;
    if (policy_decode(val, vlen, &pol) < 0) {
        srv_log(ERROR, QOS, "a stored QoS policy failed to decode; skipped");
        return 0;
    }
    if (!policy_unlimited(&pol) && policy_install(lc->q, &pol) < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    return 0;
}

/* Metrics: per policy (tenant, user): requests waiting now, delayed, throttled. */
static void qos_render(void *arg, struct evbuffer *out)
{
    struct qos *q = arg;
    static const char *const names[3] = {"s3nfs_qos_waiting", "s3nfs_qos_delayed_total",
                                         "s3nfs_qos_throttled_total"};
    static const char *const help[3] = {
        "Requests waiting for QoS admission now.",
        "Requests that had to wait for QoS admission.",
        "Requests refused by QoS (waited too long or queue full)."};
    pthread_mutex_lock(&q->lock);
    for (int f = 0; f < 3; f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", names[f], help[f], names[f],
                            f == 0 ? "gauge" : "counter");
        for (size_t i = 0; i < q->nts; i++) {
            const struct tstate *ts = q->ts[i];
            uint64_t v = f == 0 ? ts->nwait : f == 1 ? ts->delayed : ts->throttled;
            evbuffer_add_printf(out, "%s{tenant=\"%u\",user=\"%llu\"} %llu\n", names[f],
                                ts->pol.tenant, (unsigned long long)ts->pol.user,
                                (unsigned long long)v);
        }
    }
    pthread_mutex_unlock(&q->lock);
}

int qos_open(struct qos **out, struct core *c, const struct qos_config *cfg)
{
    struct qos *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->core = c;
    q->cfg = *cfg;
    cfg_norm(&q->cfg);
    global_apply(q, true);
    pthread_mutex_init(&q->lock, NULL);
    if (c) {
        struct load_ctx lc = {q, 0};
        int rc = meta_record_scan(core_meta(c), META_REC_QOS, NULL, 0, load_cb, &lc);
        if (rc == 0)
            rc = lc.rc;
        if (rc < 0) {
            qos_close(q);
            return rc;
        }
    }
    srv_log(INFO, QOS, "QoS %s, %zu tenant policies", q->cfg.enabled ? "on" : "off", q->nts);
    srv_metrics_add_renderer(qos_render, q);
    *out = q;
    return 0;
}

void qos_close(struct qos *q)
{
    if (!q)
        return;
    srv_metrics_remove_renderer(qos_render, q);
    for (size_t i = 0; i < q->nts; i++) {
        struct tstate *ts = q->ts[i];
        while (ts->head) {
            struct waiter *w = ts->head;
            unlink_waiter(ts, w);
            srv_log(WARN, QOS, "tenant=%u a waiting request was dropped at close",
                    ts->pol.tenant);
            event_free(w->ev);
            free(w);
        }
        free(ts);
    }
    free(q->ts);
    pthread_mutex_destroy(&q->lock);
    free(q);
}
