/* SPDX-License-Identifier: Apache-2.0
 * qos_admit: the QoS hierarchy: nodes with token buckets, FIFO wait queues
 * driven by event timers, and one scheduler that picks who goes next (see
 * qos_admit.h).
 *
 * State: one node per (tenant, level, id) that has a policy, plus an implicit
 * node per tenant (no policy) while something needs it: five cap buckets
 * (read bytes, write bytes, read ops, write ops, metadata ops), three minimum
 * buckets (read bytes, write bytes, ops), a weight tag, counters, and the FIFO
 * of the requests whose home it is.
 *
 * A waiting request ("waiter") keeps what its scope resolved to (tenant,
 * user, uid, bucket inode, ancestor directories) and its path: the nodes it
 * must pass, tenant first, home last. A waiter may be one piece of a shaped
 * transfer (qos_admit_piece_at): its bytes are cut to the smallest burst on
 * its path (piece_of), and a later piece charges no operation (ops 0). The
 * path is rebuilt on every policy change, moving the waiter to its new home's
 * FIFO (in arrival order), so a change applies to queued requests at once.
 * Nodes hold a count of the waiters whose path names them; a deleted policy's
 * node stays, unlimited, until that count drops to zero.
 *
 * pump() is the scheduler. Under the lock it looks at the head of every
 * FIFO, admits the best head that every level admits, and repeats: first
 * heads covered by a minimum below the tenant level, then heads covered by
 * their tenant's minimum, then the rest by start-time fair queueing tags
 * (tenant tag, then home tag). Each admitted waiter is woken on its own loop
 * (event_active, thread-safe) and its tokens are taken at once. Then it arms
 * each head's timer for when it could go (or its deadline). Waiters behind a
 * head wait for their deadline only. Every waiter is also on one list of the
 * whole instance, so qos_cancel finds it until its go runs.
 *
 * One mutex guards everything; go() callbacks always run without it.
 * Policies persist in META_REC_QOS: "t" + be32 tenant, "u" + be32 tenant +
 * be64 user (the original two), and, added with the hierarchy, "b" + be32
 * tenant + be64 bucket inode, "d" + be32 tenant + be64 directory inode, "n" +
 * be32 tenant (NFS default class) -> JSON.
 *
 * The system class is the tenant-level node of QOS_SYSTEM_TENANT: the
 * scheduler weighs it against tenants like any tenant. Its policy is the
 * configured default (sys_*) unless one is stored ("t" + be32 0xffffffff).
 * Its waiters wait on sys_base, run by a thread of the instance, and the
 * worker that asked sleeps until go runs (qos_system_wait).
 * Thread: see qos_admit.h. */
#include "qos_admit.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
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
#define DIRS_MAX 64                   /* ancestors a scope resolves (innermost first) */
#define PATH_MAX_NODES (DIRS_MAX + 3) /* tenant, bucket, directories, user */
#define TAG_BYTES 65536.0             /* a request costs 1 + bytes / 64 KiB in tags */

enum { NB_RBPS, NB_WBPS, NB_RIOPS, NB_WIOPS, NB_MIOPS, NB__COUNT };

enum waiter_force { FORCE_NONE = 0, FORCE_ADMIT, FORCE_THROTTLE };

/* Daemon-wide (capacity) and minimum dimensions. */
enum { G_RBPS, G_WBPS, G_IOPS, G__COUNT };

struct node {
    struct node *hnext; /* in q->hash */
    uint32_t tenant;
    enum qos_level level;
    uint64_t id;
    bool has_pol; /* false: implicit tenant node or a deleted policy kept for waiters */
    struct qos_policy pol;
    struct qos_bucket b[NB__COUNT];
    struct qos_bucket gb[G__COUNT]; /* minimums (rate 0 = none) */
    double tag;                     /* start-time fair queueing tag */
    double child_clock;             /* tenant nodes: tag of the last home admitted below */
    struct waiter *head, *tail;     /* requests whose home this is */
    size_t nwait;                   /* in the FIFO */
    size_t refs;                    /* waiters whose path names this node */
    size_t tenant_wait;             /* tenant nodes: waiters of the tenant */
    size_t nscoped, ndirpol;        /* tenant nodes: its bucket + directory, directory policies */
    size_t nuid;                    /* tenant nodes: its user policies that name a uid */
    /* metrics */
    uint64_t ops[3], bytes[2]; /* admitted through this level, by class */
    uint64_t delayed, throttled;
    uint64_t wait_us;      /* time requests spent waiting here (home) */
    uint64_t shortfall_us; /* time a head covered by this level's minimum was held back */
};

struct waiter {
    struct waiter *next, *prev;   /* in the home's FIFO */
    struct waiter *anext, *aprev; /* in q->all */
    struct qos *q;
    int npath;   /* in path[] */
    bool queued; /* in its home's FIFO */
    /* what the scope resolved to */
    uint32_t tenant;
    uint64_t user;
    bool nfs, has_uid;
    uint32_t uid;
    uint64_t bucket;
    size_t ndirs;   /* in dirs[] */
    bool dirs_done; /* dirs were resolved (not only the bucket) */
    enum qos_class cls;
    uint64_t bytes;
    unsigned ops; /* operations charged: 1, or 0 for a later piece (qos_admit_piece_at) */
    struct event *ev;
    void (*go)(void *arg, int err);
    void *arg;
    uint64_t enq_us, deadline_us;
    uint64_t seq; /* arrival order */
    enum waiter_force force;
    bool cancelled; /* unlinked by qos_cancel; its timer callback must not touch the queue */
    /* Last, and only their first npath / ndirs entries meaningful: waiter_init
     * leaves them as they are (most requests pass with no path and no dirs). */
    struct node *path[PATH_MAX_NODES];
    uint64_t dirs[DIRS_MAX]; /* innermost first */
};

/* A waiter with every field zero but path[] and dirs[] (npath = ndirs = 0).
 * Admission decides on a waiter on the stack (a request that goes at once,
 * nearly all of them, allocates nothing) and copies it to the heap only when
 * it must wait (waiter_dup). */
static void waiter_init(struct waiter *w)
{
    memset(w, 0, offsetof(struct waiter, path));
}

/* A heap copy of @p w (its used path and dirs entries), or NULL. */
static struct waiter *waiter_dup(const struct waiter *w)
{
    struct waiter *h = malloc(sizeof(*h));
    if (!h)
        return NULL;
    memcpy(h, w, offsetof(struct waiter, path));
    memcpy(h->path, w->path, sizeof(w->path[0]) * (size_t)w->npath);
    memcpy(h->dirs, w->dirs, sizeof(w->dirs[0]) * w->ndirs);
    return h;
}

/* A write held by the hold hook (qos_hold): it waits on its own timer, in no
 * FIFO, and is admitted afresh once the hook lets it go. */
struct held {
    struct held *next, *prev; /* in q->held */
    struct qos *q;
    struct event *ev;
    uint32_t tenant;
    uint64_t user;
    uint64_t ino; /* the scope's (NFS: marks the request as NFS) */
    bool has_uid;
    uint32_t uid;
    uint64_t bucket;
    uint64_t dirs[DIRS_MAX];
    size_t ndirs;
    enum qos_class cls;
    uint64_t bytes;
    unsigned ops;
    uint64_t *piece;
    struct event_base *base;
    void (*go)(void *arg, int err);
    void *arg;
    uint64_t since_us, delay_us;
    bool cancelled, stop;
};

#define HOLD_FIRST_US 5000u
#define HOLD_MAX_US 100000u

struct qos {
    struct core *core;
    pthread_mutex_t lock;
    struct qos_config cfg;
    bool global;                   /* a capacity is known */
    struct qos_bucket g[G__COUNT]; /* daemon-wide capacity */
    struct node **n;
    size_t nn, capn;
    struct node **hash; /* (tenant, level, id) -> node, chained; nhash a power of two */
    size_t nhash;
    size_t nscoped; /* bucket and directory policies (skip scope resolution when 0) */
    size_t ndirpol; /* directory policies (skip the ancestor walk when 0) */
    struct waiter *all;
    uint64_t seq;
    double clock; /* tag of the last tenant admitted by the scheduler */
    uint64_t last_pump_us;
    /* the system class (qos_system_*) */
    bool sys_stored;             /* its policy is stored (qos_system_set), not the default */
    bool sys_stopping;           /* qos_system_drain ran: no more grants */
    struct event_base *sys_base; /* where its waiters wait; made on first need */
    pthread_t sys_thread;        /* runs sys_base */
    struct event *sys_quit;      /* made active by qos_close: ends the loop */
    /* holds (qos_hold) */
    bool has_hold;
    struct qos_hold hold;
    struct held *held; /* held now */
    size_t nheld;
    uint64_t held_total;
};

static void sys_default_apply(struct qos *q);

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

const char *qos_level_name(enum qos_level level)
{
    static const char *const names[QOS_LEVEL__COUNT] = {"tenant", "user", "bucket", "dir",
                                                        "nfs_default"};
    return (unsigned)level < QOS_LEVEL__COUNT ? names[level] : "?";
}

static void cfg_norm(struct qos_config *c)
{
    if (c->max_wait_ms == 0)
        c->max_wait_ms = DEF_MAX_WAIT_MS;
    if (c->queue_max == 0)
        c->queue_max = DEF_QUEUE_MAX;
}

/* A policy's level and id, with the compatibility rule (tenant + user = user). */
static enum qos_level level_of(const struct qos_policy *p)
{
    if (p->level == QOS_LEVEL_TENANT && p->user)
        return QOS_LEVEL_USER;
    return p->level;
}

static uint64_t id_of(const struct qos_policy *p)
{
    switch (level_of(p)) {
    case QOS_LEVEL_USER:
        return p->user;
    case QOS_LEVEL_BUCKET:
        return p->bucket;
    case QOS_LEVEL_DIR:
        return p->dir;
    default:
        return 0;
    }
}

static size_t hash_of(uint32_t tenant, enum qos_level level, uint64_t id, size_t nhash)
{
    uint64_t h = (id ^ ((uint64_t)tenant << 32) ^ (uint64_t)level) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nhash - 1);
}

static struct node *node_find(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id)
{
    if (!q->nhash)
        return NULL;
    for (struct node *n = q->hash[hash_of(tenant, level, id, q->nhash)]; n; n = n->hnext)
        if (n->tenant == tenant && n->level == level && n->id == id)
            return n;
    return NULL;
}

/* Put @p n in the hash, growing it to keep chains short. @return 0, -ENOMEM. */
static int hash_add(struct qos *q, struct node *n)
{
    if (q->nn + 1 > q->nhash) {
        size_t nh = q->nhash ? q->nhash * 4 : 64;
        struct node **h = calloc(nh, sizeof(*h));
        if (!h)
            return -ENOMEM;
        for (size_t i = 0; i < q->nhash; i++) {
            for (struct node *e = q->hash[i], *next; e; e = next) {
                next = e->hnext;
                size_t k = hash_of(e->tenant, e->level, e->id, nh);
                e->hnext = h[k];
                h[k] = e;
            }
        }
        free(q->hash);
        q->hash = h;
        q->nhash = nh;
    }
    size_t k = hash_of(n->tenant, n->level, n->id, q->nhash);
    n->hnext = q->hash[k];
    q->hash[k] = n;
    return 0;
}

static void hash_del(struct qos *q, struct node *n)
{
    for (struct node **pp = &q->hash[hash_of(n->tenant, n->level, n->id, q->nhash)]; *pp;
         pp = &(*pp)->hnext) {
        if (*pp == n) {
            *pp = n->hnext;
            return;
        }
    }
}

/* The user node NFS calls with @p uid belong to. */
static struct node *node_find_uid(struct qos *q, uint32_t tenant, uint32_t uid)
{
    for (size_t i = 0; i < q->nn; i++) {
        struct node *n = q->n[i];
        if (n->tenant == tenant && n->level == QOS_LEVEL_USER && n->has_pol && n->pol.has_uid &&
            n->pol.uid == uid)
            return n;
    }
    return NULL;
}

static void bucket_apply(struct qos_bucket *b, uint64_t rate, double secs, uint64_t now, bool fresh)
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

static void node_apply(struct node *n, const struct qos_policy *pol, uint64_t now, bool fresh)
{
    double secs = (pol->burst_ms ? pol->burst_ms : 1000) / 1000.0;
    const uint64_t rates[NB__COUNT] = {pol->read_bps, pol->write_bps, pol->read_iops,
                                       pol->write_iops, pol->meta_iops};
    const uint64_t mins[G__COUNT] = {pol->min_read_bps, pol->min_write_bps, pol->min_iops};
    for (int i = 0; i < NB__COUNT; i++)
        bucket_apply(&n->b[i], rates[i], secs, now, fresh);
    for (int i = 0; i < G__COUNT; i++)
        bucket_apply(&n->gb[i], mins[i], secs, now, fresh);
    n->pol = *pol;
}

static bool has_minimum(const struct qos_policy *p)
{
    return p->min_read_bps || p->min_write_bps || p->min_iops;
}

/* No cap, no minimum and no weight: the same as having no policy. */
static bool policy_unlimited(const struct qos_policy *p)
{
    return !p->read_bps && !p->write_bps && !p->read_iops && !p->write_iops && !p->meta_iops &&
           !has_minimum(p) && !p->weight;
}

static double weight_of(const struct node *n)
{
    return n->has_pol && n->pol.weight ? (double)n->pol.weight : (double)QOS_WEIGHT_DEFAULT;
}

static bool any_minimum(const struct qos *q)
{
    for (size_t i = 0; i < q->nn; i++)
        if (q->n[i]->has_pol && q->n[i]->level == QOS_LEVEL_TENANT && has_minimum(&q->n[i]->pol))
            return true;
    return false;
}

/* Daemon-wide buckets (one second of burst): the configured capacity, else
 * the measured one while a tenant has a minimum (under the lock, or before
 * the instance is shared). */
static void global_apply(struct qos *q, bool fresh)
{
    uint64_t now = qos_clock_us();
    bool measured = any_minimum(q);
    const uint64_t conf[G__COUNT] = {q->cfg.cap_read_bps, q->cfg.cap_write_bps, q->cfg.cap_iops};
    const uint64_t probe[G__COUNT] = {q->cfg.probe_read_bps, q->cfg.probe_write_bps,
                                      q->cfg.probe_iops};
    uint64_t caps[G__COUNT];
    for (int i = 0; i < G__COUNT; i++) {
        caps[i] = conf[i] ? conf[i] : measured ? probe[i] : 0;
        bucket_apply(&q->g[i], caps[i], 1.0, now, fresh || q->g[i].rate <= 0);
    }
    q->global = caps[0] || caps[1] || caps[2];
}

/* A new node (under the lock). @return NULL on -ENOMEM. */
static struct node *node_new(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id)
{
    if (q->nn == q->capn) {
        size_t ncap = q->capn ? q->capn * 2 : 16;
        struct node **nn = realloc(q->n, ncap * sizeof(*nn));
        if (!nn)
            return NULL;
        q->n = nn;
        q->capn = ncap;
    }
    struct node *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->tenant = tenant;
    n->level = level;
    n->id = id;
    struct qos_policy none = {.tenant = tenant};
    node_apply(n, &none, qos_clock_us(), true);
    if (hash_add(q, n) < 0) {
        free(n);
        return NULL;
    }
    q->n[q->nn++] = n;
    return n;
}

/* Free @p n if nothing needs it any more (under the lock). Tenant nodes stay
 * while the tenant has other nodes (they carry its tags and queue count). */
static void node_gc(struct qos *q, struct node *n)
{
    if (n->has_pol || n->refs || n->head)
        return;
    if (n->level == QOS_LEVEL_TENANT && !q->global)
        for (size_t i = 0; i < q->nn; i++)
            if (q->n[i] != n && q->n[i]->tenant == n->tenant)
                return;
    if (n->level == QOS_LEVEL_TENANT && q->global)
        return; /* capacity is shared: every tenant seen keeps its tags */
    for (size_t i = 0; i < q->nn; i++) {
        if (q->n[i] == n) {
            hash_del(q, n);
            q->n[i] = q->n[--q->nn];
            break;
        }
    }
    free(n);
}

/* ---- paths ---- */

/* Build @p w's path from what its scope resolved to (under the lock).
 * @return 0, -ENOMEM (an implicit tenant node could not be made: no path). */
static int path_build(struct qos *q, struct waiter *w, struct node **path, int *npath)
{
    int k = 0;
    struct node *user = NULL;
    if (w->user)
        user = node_find(q, w->tenant, QOS_LEVEL_USER, w->user);
    else if (w->nfs) {
        const struct node *tn = node_find(q, w->tenant, QOS_LEVEL_TENANT, 0);
        user = w->has_uid && tn && tn->nuid ? node_find_uid(q, w->tenant, w->uid) : NULL;
        if (!user)
            user = node_find(q, w->tenant, QOS_LEVEL_NFS_DEFAULT, 0);
    }
    if (user && !user->has_pol)
        user = NULL;
    struct node *b = w->bucket ? node_find(q, w->tenant, QOS_LEVEL_BUCKET, w->bucket) : NULL;
    if (b && !b->has_pol)
        b = NULL;
    struct node *t = node_find(q, w->tenant, QOS_LEVEL_TENANT, 0);
    bool any_dir = false;
    for (size_t i = 0; i < w->ndirs && !any_dir; i++) {
        struct node *d = node_find(q, w->tenant, QOS_LEVEL_DIR, w->dirs[i]);
        any_dir = d && d->has_pol;
    }
    bool need = q->global || (t && t->has_pol) || user || b || any_dir;
    if (!need) {
        *npath = 0;
        return 0;
    }
    if (!t && !(t = node_new(q, w->tenant, QOS_LEVEL_TENANT, 0)))
        return -ENOMEM;
    path[k++] = t;
    if (b)
        path[k++] = b;
    for (size_t i = w->ndirs; i-- > 0;) {
        struct node *d = node_find(q, w->tenant, QOS_LEVEL_DIR, w->dirs[i]);
        if (d && d->has_pol && k < PATH_MAX_NODES - 1)
            path[k++] = d;
    }
    if (user)
        path[k++] = user;
    *npath = k;
    return 0;
}

static struct node *home_of(const struct waiter *w)
{
    return w->path[w->npath - 1];
}

static void fifo_unlink(struct waiter *w)
{
    struct node *h = home_of(w);
    if (w->prev)
        w->prev->next = w->next;
    else
        h->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        h->tail = w->prev;
    w->next = w->prev = NULL;
    h->nwait--;
    w->queued = false;
}

/* Insert @p w in its home's FIFO in arrival order. */
static void fifo_insert(struct waiter *w)
{
    struct node *h = home_of(w);
    struct waiter *after = h->tail;
    while (after && after->seq > w->seq)
        after = after->prev;
    w->prev = after;
    w->next = after ? after->next : h->head;
    if (w->next)
        w->next->prev = w;
    else
        h->tail = w;
    if (after)
        after->next = w;
    else
        h->head = w;
    h->nwait++;
    w->queued = true;
}

static void path_ref(struct waiter *w, int d)
{
    for (int i = 0; i < w->npath; i++) {
        if (d > 0)
            w->path[i]->refs++;
        else
            w->path[i]->refs--;
    }
    w->path[0]->tenant_wait += d > 0 ? 1 : (size_t)-1;
}

/* Give @p w a fresh path (policies changed). Under the lock. */
static void path_rebuild(struct qos *q, struct waiter *w)
{
    struct node *np[PATH_MAX_NODES];
    int n = 0;
    if (path_build(q, w, np, &n) < 0 || n == 0) {
        /* no level limits it any more (or no memory to say so): it goes */
        if (w->queued)
            fifo_unlink(w);
        w->force = FORCE_ADMIT;
        event_active(w->ev, EV_TIMEOUT, 0);
        return;
    }
    bool queued = w->queued;
    if (queued)
        fifo_unlink(w);
    path_ref(w, -1);
    struct node *old[PATH_MAX_NODES];
    int nold = w->npath;
    memcpy(old, w->path, sizeof(old[0]) * (size_t)nold);
    memcpy(w->path, np, sizeof(np[0]) * (size_t)n);
    w->npath = n;
    path_ref(w, 1);
    if (queued)
        fifo_insert(w);
    for (int i = 0; i < nold; i++)
        node_gc(q, old[i]);
}

/* ---- admission arithmetic ---- */

/* The cap buckets a request draws from. */
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

static int gdim_bytes(enum qos_class cls)
{
    return cls == QOS_READ ? G_RBPS : cls == QOS_WRITE ? G_WBPS : -1;
}

static uint64_t caps_wait(struct node *n, enum qos_class cls, uint64_t bytes, unsigned ops,
                          uint64_t now)
{
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    uint64_t w = ops ? qos_bucket_wait_us(&n->b[ob], ops, now) : 0;
    if (bb >= 0 && bytes) {
        uint64_t wb = qos_bucket_wait_us(&n->b[bb], (double)bytes, now);
        if (wb > w)
            w = wb;
    }
    return w;
}

/* How a request stands now. */
struct verdict {
    uint64_t wait_us; /* 0: admissible now */
    int phase;        /* 0: covered by a sub-tenant minimum, 1: by the tenant's, 2: neither */
    bool covered[G__COUNT];
    bool min_ready; /* some minimum on the path would cover it now */
};

/* Minimum of dimension @p d along @p path: covered when the tenant has one
 * and every level that has one holds @p amount now. @p wait gets when it will
 * (UINT64_MAX: never, no tenant minimum). @p deep: a level below the tenant
 * has a minimum for it. */
static bool min_covered(struct node *const *path, int npath, int d, double amount, uint64_t now,
                        uint64_t *wait, bool *deep)
{
    *deep = false;
    if (path[0]->level != QOS_LEVEL_TENANT || path[0]->gb[d].rate <= 0) {
        *wait = UINT64_MAX;
        return false;
    }
    uint64_t w = 0;
    for (int i = 0; i < npath; i++) {
        if (path[i]->gb[d].rate <= 0)
            continue;
        if (i > 0)
            *deep = true;
        uint64_t wi = qos_bucket_wait_us(&path[i]->gb[d], amount, now);
        if (wi > w)
            w = wi;
    }
    *wait = w;
    return w == 0;
}

/* How a request of @p ops operations (0 for a later piece: its operation
 * dimensions are left alone) and @p bytes stands on @p path now. */
static void judge(struct qos *q, struct node *const *path, int npath, enum qos_class cls,
                  uint64_t bytes, unsigned ops, uint64_t now, struct verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->phase = 2;
    for (int i = 0; i < npath; i++) {
        uint64_t w = caps_wait(path[i], cls, bytes, ops, now);
        if (w > v->wait_us)
            v->wait_us = w;
    }
    int dims[2] = {G_IOPS, gdim_bytes(cls)};
    double amt[2] = {(double)ops, (double)bytes};
    for (int k = 0; k < 2; k++) {
        int d = dims[k];
        if (d < 0 || amt[k] <= 0)
            continue;
        uint64_t mw;
        bool deep;
        bool cov = min_covered(path, npath, d, amt[k], now, &mw, &deep);
        v->covered[d] = cov;
        if (cov) {
            v->min_ready = true;
            int ph = deep ? 0 : 1;
            if (ph < v->phase)
                v->phase = ph;
            continue;
        }
        if (!q->global)
            continue;
        uint64_t gw = qos_bucket_wait_us(&q->g[d], amt[k], now);
        if (mw < gw)
            gw = mw;
        if (gw > v->wait_us)
            v->wait_us = gw;
    }
}

/* Take the request's tokens (@p ops operations, @p bytes) along its path and
 * advance the tags. */
static void charge(struct qos *q, struct node *const *path, int npath, enum qos_class cls,
                   uint64_t bytes, unsigned ops, const struct verdict *v, uint64_t now)
{
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    double cost = (double)ops + (double)bytes / TAG_BYTES;
    for (int i = 0; i < npath; i++) {
        struct node *n = path[i];
        if (ops)
            qos_bucket_charge(&n->b[ob], ops, now);
        if (bb >= 0 && bytes)
            qos_bucket_charge(&n->b[bb], (double)bytes, now);
        n->ops[cls] += ops;
        if (cls != QOS_META)
            n->bytes[cls] += bytes;
    }
    int dims[2] = {G_IOPS, gdim_bytes(cls)};
    double amt[2] = {(double)ops, (double)bytes};
    for (int k = 0; k < 2; k++) {
        int d = dims[k];
        if (d < 0 || amt[k] <= 0)
            continue;
        if (v->covered[d])
            for (int i = 0; i < npath; i++)
                if (path[i]->gb[d].rate > 0)
                    qos_bucket_charge(&path[i]->gb[d], amt[k], now);
        if (q->global)
            qos_bucket_charge(&q->g[d], amt[k], now);
    }
    /* Tags: the tenant's among tenants, the home's among the tenant's queues. */
    struct node *t = path[0], *h = path[npath - 1];
    if (t->tag < q->clock)
        t->tag = q->clock;
    q->clock = t->tag; /* virtual time: the start tag of the last admitted */
    t->tag += cost / weight_of(t);
    if (h != t) {
        if (h->tag < t->child_clock)
            h->tag = t->child_clock;
        t->child_clock = h->tag;
        h->tag += cost / weight_of(h);
    }
}

/* ---- the scheduler ---- */

static void arm(struct waiter *w, uint64_t in_us)
{
    struct timeval tv = {(time_t)(in_us / 1000000u), (suseconds_t)(in_us % 1000000u)};
    event_add(w->ev, &tv);
}

/* Tags as the scheduler compares them: an idle queue's tag catches up with
 * the clock, so idling banks no credit. */
static double tenant_tag(const struct qos *q, const struct waiter *w)
{
    double t = w->path[0]->tag;
    return t < q->clock ? q->clock : t;
}

static double home_tag(const struct waiter *w)
{
    const struct node *h = home_of(w), *t = w->path[0];
    return h->tag < t->child_clock ? t->child_clock : h->tag;
}

/* Lower is better: phase, then the tenant's tag, then the home's, then age. */
static bool better(const struct qos *q, const struct verdict *a, const struct waiter *wa,
                   const struct verdict *b, const struct waiter *wb)
{
    if (a->phase != b->phase)
        return a->phase < b->phase;
    double ta = tenant_tag(q, wa), tb = tenant_tag(q, wb);
    if (ta != tb)
        return ta < tb;
    if (wa->path[0] != wb->path[0]) /* a tenant's own weights never order other tenants */
        return wa->seq < wb->seq;
    double ha = home_tag(wa), hb = home_tag(wb);
    if (ha != hb)
        return ha < hb;
    return wa->seq < wb->seq;
}

/* Admit the admissible heads, best first; then arm every head's timer.
 * @p self (may be NULL) is the caller's own waiter: when it is admitted it is
 * not woken, and *self_admitted says so. Under the lock. */
static void pump(struct qos *q, uint64_t now, struct waiter *self, bool *self_admitted)
{
    uint64_t since = now > q->last_pump_us ? now - q->last_pump_us : 0;
    q->last_pump_us = now;
    if (self_admitted)
        *self_admitted = false;
    for (;;) {
        struct waiter *best = NULL;
        struct verdict bv;
        memset(&bv, 0, sizeof(bv));
        for (size_t i = 0; i < q->nn; i++) {
            struct waiter *w = q->n[i]->head;
            if (!w || w->force)
                continue;
            struct verdict v;
            judge(q, w->path, w->npath, w->cls, w->bytes, w->ops, now, &v);
            if (v.wait_us)
                continue;
            if (!best || better(q, &v, w, &bv, best)) {
                best = w;
                bv = v;
            }
        }
        if (!best)
            break;
        struct node *h = home_of(best);
        charge(q, best->path, best->npath, best->cls, best->bytes, best->ops, &bv, now);
        h->wait_us += now > best->enq_us ? now - best->enq_us : 0;
        fifo_unlink(best);
        best->force = FORCE_ADMIT;
        if (best == self)
            *self_admitted = true;
        else
            event_active(best->ev, EV_TIMEOUT, 0);
    }
    /* Arm the heads; count the time a head covered by a minimum was held back. */
    for (size_t i = 0; i < q->nn; i++) {
        struct waiter *w = q->n[i]->head;
        if (!w || w->force)
            continue;
        struct verdict v;
        judge(q, w->path, w->npath, w->cls, w->bytes, w->ops, now, &v);
        if (v.min_ready)
            for (int k = 0; k < w->npath; k++)
                if (w->path[k]->has_pol && has_minimum(&w->path[k]->pol))
                    w->path[k]->shortfall_us += since;
        uint64_t left = w->deadline_us > now ? w->deadline_us - now : 0;
        uint64_t in = v.wait_us ? v.wait_us : 1;
        arm(w, in < left ? in : left);
    }
}

/* ---- refusals ---- */

static _Thread_local struct qos_refusal last_refusal;

void qos_last_refusal(struct qos_refusal *out)
{
    *out = last_refusal;
}

int qos_refusal_format(const struct qos_refusal *r, char *buf, size_t len)
{
    static const char *const cls[3] = {"read", "write", "metadata"};
    const char *c = (unsigned)r->cls <= QOS_META ? cls[r->cls] : "?";
    bool sys = r->tenant == QOS_SYSTEM_TENANT;
    switch (r->why) {
    case QOS_WHY_CAPACITY:
        return snprintf(buf, len, "the daemon's %s capacity was reached", c);
    case QOS_WHY_QUEUE_FULL:
        if (sys)
            return snprintf(buf, len, "the system class's wait queue is full");
        return snprintf(buf, len, "the wait queue of tenant %u is full", r->tenant);
    case QOS_WHY_STOPPING:
        return snprintf(buf, len, "the daemon is stopping");
    default:
        break;
    }
    if (sys)
        return snprintf(buf, len, "the %s limit of the system class was reached", c);
    if (r->level == QOS_LEVEL_TENANT)
        return snprintf(buf, len, "the %s limit of tenant %u was reached", c, r->tenant);
    return snprintf(buf, len, "the %s limit of %s %llu of tenant %u was reached", c,
                    qos_level_name(r->level), (unsigned long long)r->id, r->tenant);
}

/* Why @p w, past its deadline, was not admitted: the level on its path whose
 * own cap would hold it longest (the deeper one on a tie); with none, the
 * daemon's capacity if that holds it, else its home level (it waited behind
 * the requests queued there). Under the lock. */
static void refusal_of(struct qos *q, const struct waiter *w, uint64_t now, struct qos_refusal *r)
{
    memset(r, 0, sizeof(*r));
    r->cls = w->cls;
    r->tenant = w->tenant;
    if (!w->npath) {
        r->level = QOS_LEVEL_TENANT;
        return;
    }
    const struct node *by = NULL;
    uint64_t worst = 0;
    for (int i = 0; i < w->npath; i++) {
        uint64_t wt = caps_wait(w->path[i], w->cls, w->bytes, w->ops, now);
        if (wt && wt >= worst) {
            worst = wt;
            by = w->path[i];
        }
    }
    if (!by && q->global) {
        struct verdict v;
        judge(q, w->path, w->npath, w->cls, w->bytes, w->ops, now, &v);
        if (v.wait_us) {
            r->why = QOS_WHY_CAPACITY;
            return;
        }
    }
    if (!by)
        by = home_of(w);
    r->level = by->level;
    r->id = by->id;
}

/* Free @p w and run its go. Called without the lock; @p w is off every list. */
static void finish(struct waiter *w, int err)
{
    event_free(w->ev);
    void (*go)(void *, int) = w->go;
    void *garg = w->arg;
    free(w);
    go(garg, err);
}

/* Take @p w off the instance (under the lock): FIFO, q->all, node refs. */
static void waiter_detach(struct qos *q, struct waiter *w)
{
    if (w->queued)
        fifo_unlink(w);
    if (w->aprev)
        w->aprev->anext = w->anext;
    else if (q->all == w)
        q->all = w->anext;
    if (w->anext)
        w->anext->aprev = w->aprev;
    w->anext = w->aprev = NULL;
    if (w->npath) {
        struct node *old[PATH_MAX_NODES];
        int n = w->npath;
        memcpy(old, w->path, sizeof(old[0]) * (size_t)n);
        path_ref(w, -1);
        w->npath = 0;
        for (int i = n; i-- > 0;)
            node_gc(q, old[i]);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    struct qos *q = w->q;
    (void)fd;
    (void)what;

    pthread_mutex_lock(&q->lock);
    if (w->cancelled) {
        /* qos_cancel from another thread won the race; it frees w once we return
         * (event_free waits for a running callback). */
        pthread_mutex_unlock(&q->lock);
        return;
    }
    uint64_t now = qos_clock_us();
    if (!w->force) {
        bool mine = false;
        pump(q, now, w, &mine);
        if (!mine && now >= w->deadline_us)
            w->force = FORCE_THROTTLE;
    }
    if (!w->force) {
        if (w->queued && home_of(w)->head != w)
            arm(w, w->deadline_us - now); /* behind a head: only the deadline matters */
        pthread_mutex_unlock(&q->lock);
        return;
    }
    int err = w->force == FORCE_ADMIT ? 0 : SRV_ETHROTTLE;
    struct qos_refusal why;
    if (err) {
        refusal_of(q, w, now, &why);
        if (q->sys_stopping && (w->tenant == QOS_SYSTEM_TENANT || now < w->deadline_us))
            why.why = QOS_WHY_STOPPING; /* qos_drain or qos_system_drain */
    }
    if (err && w->npath) {
        struct node *h = home_of(w);
        h->throttled++;
        h->wait_us += now > w->enq_us ? now - w->enq_us : 0;
    }
    bool was_queued = w->queued;
    waiter_detach(q, w);
    if (was_queued)
        pump(q, now, NULL, NULL); /* a new head */
    pthread_mutex_unlock(&q->lock);

    if (err) {
        char msg[160];
        qos_refusal_format(&why, msg, sizeof(msg));
        srv_log(DEBUG, QOS, "tenant=%u level=%s id=%llu request throttled after waiting: %s",
                why.tenant, qos_level_name(why.level), (unsigned long long)why.id, msg);
        last_refusal = why;
    }
    finish(w, err);
}

/* ---- scope resolution (without the lock) ---- */

/* Fill @p w's bucket and ancestor directories (innermost first) from @p s.
 * Parts that do not resolve are left out. */
static void scope_lookup(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                         bool want_dirs, struct waiter *w)
{
    if (s->bucket_ino) {
        w->bucket = s->bucket_ino;
        for (size_t i = 0; i < s->ndirs && i < DIRS_MAX; i++)
            w->dirs[w->ndirs++] = s->dirs[i];
        return;
    }
    if (!q->core)
        return;
    struct core_principal sp = {.tenant = p->tenant, .flags = CORE_P_SUPER | CORE_P_NOWAIT};
    struct core_attr at;
    if (s->bucket && s->bucketlen) {
        if (core_bucket_lookup(q->core, &sp, s->bucket, s->bucketlen, &at) < 0)
            return;
        w->bucket = at.ino;
        if (!want_dirs || !s->key)
            return;
        uint64_t dir = at.ino, tmp[DIRS_MAX];
        size_t n = 0, off = 0;
        while (off < s->keylen && n < DIRS_MAX) {
            const char *slash = memchr(s->key + off, '/', s->keylen - off);
            if (!slash)
                break;
            size_t len = (size_t)(slash - (s->key + off));
            if (len == 0 || core_lookup(q->core, &sp, dir, s->key + off, len, &at) < 0 ||
                at.type != CORE_DIR)
                break;
            dir = at.ino;
            tmp[n++] = dir;
            off += len + 1;
        }
        for (size_t i = 0; i < n; i++)
            w->dirs[w->ndirs++] = tmp[n - 1 - i];
        return;
    }
    if (s->ino) {
        if (core_getattr(q->core, &sp, s->ino, 0, &at) < 0 || !at.bucket)
            return;
        w->bucket = at.bucket;
        if (!want_dirs)
            return;
        uint64_t cur = at.type == CORE_DIR ? at.ino : at.parent;
        while (cur && cur != at.bucket && w->ndirs < DIRS_MAX) {
            struct core_attr pa;
            w->dirs[w->ndirs++] = cur;
            if (core_getattr(q->core, &sp, cur, 0, &pa) < 0)
                break;
            cur = pa.parent;
        }
    }
}

/* scope_lookup, once per request when the scope carries a memo: a later call
 * takes the bucket and directories from it (unless it now needs directories
 * the memo was filled without). */
static void scope_resolve(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                          bool want_dirs, struct waiter *w)
{
    struct qos_memo *m = s->bucket_ino ? NULL : s->memo;
    if (m && m->valid &&
        (m->of_bucket != s->bucket || m->of_bucketlen != s->bucketlen || m->of_key != s->key ||
         m->of_keylen != s->keylen || m->of_ino != s->ino))
        m->valid = false; /* another scope than it was filled for */
    if (m && m->valid && (m->dirs_done || !want_dirs)) {
        w->bucket = m->bucket;
        w->ndirs = m->ndirs;
        memcpy(w->dirs, m->dirs, sizeof(m->dirs[0]) * m->ndirs);
        return;
    }
    scope_lookup(q, p, s, want_dirs, w);
    if (m && w->bucket && w->ndirs <= QOS_MEMO_DIRS) {
        m->valid = true;
        m->dirs_done = want_dirs && (s->key || !s->bucket);
        m->of_bucket = s->bucket;
        m->of_bucketlen = s->bucketlen;
        m->of_key = s->key;
        m->of_keylen = s->keylen;
        m->of_ino = s->ino;
        m->bucket = w->bucket;
        m->ndirs = (uint8_t)w->ndirs;
        memcpy(m->dirs, w->dirs, sizeof(m->dirs[0]) * w->ndirs);
    }
}

/* What @p w's request is and where it lands (tenant, user, uid, bucket,
 * ancestor directories), from @p p and the scope @p s (may be NULL). Without
 * the lock. */
static void waiter_scope(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                         struct waiter *w)
{
    w->tenant = p->tenant;
    w->user = p->user;
    if (!s)
        return;
    w->nfs = s->ino != 0 || s->has_uid;
    w->has_uid = s->has_uid;
    w->uid = s->uid;
    bool scoped = false, dirs = false;
    if (__atomic_load_n(&q->nscoped, __ATOMIC_RELAXED) != 0) {
        pthread_mutex_lock(&q->lock);
        const struct node *t = node_find(q, p->tenant, QOS_LEVEL_TENANT, 0);
        scoped = t && t->nscoped;
        dirs = t && t->ndirpol;
        pthread_mutex_unlock(&q->lock);
    }
    if (scoped || s->bucket_ino) {
        scope_resolve(q, p, s, dirs, w);
        w->dirs_done = dirs || s->bucket_ino;
    }
}

/* Whether the hold hook bounds the write @p w is (then its bucket, and the
 * directories when the hook needs them, are resolved). Without the lock. */
static bool hold_scope(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                       enum qos_class cls, uint64_t bytes, struct waiter *w)
{
    if (!q->has_hold || cls != QOS_WRITE || !bytes || !s || !q->hold.active(q->hold.arg))
        return false;
    if (!w->bucket)
        scope_resolve(q, p, s, false, w);
    bool dirs = false;
    if (!w->bucket || !q->hold.bounded(q->hold.arg, w->bucket, &dirs))
        return false;
    if (dirs && !w->dirs_done) {
        w->ndirs = 0;
        scope_resolve(q, p, s, true, w);
        w->dirs_done = true;
    }
    return w->bucket != 0;
}

/* Whether some waiting head could go now, so a newcomer must be weighed
 * against it by the scheduler: heads of @p tenant only, unless capacity is
 * shared. Under the lock. */
static bool head_ready(struct qos *q, uint32_t tenant, uint64_t now)
{
    for (size_t i = 0; i < q->nn; i++) {
        struct waiter *h = q->n[i]->head;
        if (!h || h->force || (!q->global && h->tenant != tenant))
            continue;
        struct verdict v;
        judge(q, h->path, h->npath, h->cls, h->bytes, h->ops, now, &v);
        if (!v.wait_us)
            return true;
    }
    return false;
}

/* Pieces last about this long at the rate of the slowest byte bucket on the
 * path: short enough that other requests queued behind a waiting piece wait
 * little, long enough that a shaped transfer costs at most ~50 admissions a
 * second. */
#define PIECE_US 20000
#define PIECE_MIN 4096

/* Fold @p b into the smallest burst and the slowest rate seen so far. */
static void slowest(const struct qos_bucket *b, double *burst, double *rate)
{
    if (b->rate <= 0)
        return;
    if (*burst == 0 || b->burst < *burst)
        *burst = b->burst;
    if (*rate == 0 || b->rate < *rate)
        *rate = b->rate;
}

/* The piece size for a request of class @p cls on @p path: PIECE_US worth of
 * the slowest byte bucket it draws from (the cap of every level on the path;
 * with a daemon capacity, the daemon-wide bucket and the minimum of every
 * level that has one), at least PIECE_MIN, never more than the smallest burst
 * among them. 0: its bytes are not limited. Under the lock. */
static uint64_t piece_of(const struct qos *q, struct node *const *path, int npath,
                         enum qos_class cls)
{
    int bb, ob, bd = gdim_bytes(cls);
    buckets_of(cls, &bb, &ob);
    if (bb < 0 || bd < 0)
        return 0;
    double m = 0, r = 0;
    for (int i = 0; i < npath; i++) {
        slowest(&path[i]->b[bb], &m, &r);
        if (q->global)
            slowest(&path[i]->gb[bd], &m, &r);
    }
    if (q->global)
        slowest(&q->g[bd], &m, &r);
    if (m <= 0)
        return 0;
    double want = r * PIECE_US / 1e6;
    if (want < PIECE_MIN)
        want = PIECE_MIN;
    if (want > m)
        want = m;
    return want < 1 ? 1 : (uint64_t)want;
}

/* qos_admit_at and qos_admit_piece_at: @p ops operations (0 or 1) and, with
 * @p piece set, at most one piece of @p bytes (its size stored there before
 * go may run). */
static int hold_park(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                     const struct waiter *w, uint64_t bytes, uint64_t *piece,
                     struct event_base *base, uint64_t since_us);

/* @p held_since: when the request was first held (0: it was not). */
static int admit(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                 enum qos_class cls, uint64_t bytes, unsigned ops, uint64_t *piece,
                 struct event_base *base, void (*go)(void *arg, int err), void *arg,
                 uint64_t held_since)
{
    int rc = 0;
    if (piece)
        *piece = bytes;
    if (!go || (unsigned)cls > QOS_META)
        return -EINVAL;
    if (!q || !p) {
        go(arg, 0);
        return 0;
    }
    struct waiter w_, *w = &w_; /* on the heap only once it must wait */
    waiter_init(w);
    w->q = q;
    w->cls = cls;
    w->ops = ops;
    w->go = go;
    w->arg = arg;
    waiter_scope(q, p, s, w);
    bool hold = hold_scope(q, p, s, cls, bytes, w);
    uint64_t ask = bytes;

    pthread_mutex_lock(&q->lock);
    if (p->tenant == QOS_SYSTEM_TENANT && q->sys_stopping) {
        pthread_mutex_unlock(&q->lock);
        last_refusal =
            (struct qos_refusal){.why = QOS_WHY_STOPPING, .cls = cls, .tenant = QOS_SYSTEM_TENANT};
        return SRV_ETHROTTLE; /* stopping: the system class gets no grant */
    }
    bool nopath = !q->cfg.enabled || path_build(q, w, w->path, &w->npath) < 0 || w->npath == 0;
    if (!nopath && piece && !q->cfg.shaping_off) {
        /* shaping: one piece, sized by every level on the path */
        uint64_t m = piece_of(q, w->path, w->npath, cls);
        if (m && bytes > m)
            bytes = m;
        *piece = bytes;
    }
    if (hold) {
        uint64_t now = qos_clock_us();
        if (q->hold.check(q->hold.arg, w->bucket, w->dirs, w->ndirs, bytes, held_since == 0)) {
            /* held: on its own timer, outside every FIFO, admitted afresh later */
            rc = hold_park(q, p, s, w, ask, piece, base, held_since ? held_since : now);
            pthread_mutex_unlock(&q->lock);
            if (rc == 0 && held_since == 0 && q->hold.held)
                q->hold.held(q->hold.arg, w->bucket);
            return rc;
        }
        q->hold.charge(q->hold.arg, w->bucket, w->dirs, w->ndirs, bytes,
                       held_since && now > held_since ? now - held_since : 0);
    }
    if (nopath) {
        pthread_mutex_unlock(&q->lock);
        go(arg, 0);
        return 0;
    }
    w->bytes = bytes;
    uint64_t now = qos_clock_us();
    struct verdict v;
    struct node *t = w->path[0];
    /* Straight through when every level admits and nothing waits that the
     * scheduler must weigh it against: nothing of its tenant (with capacity
     * shared, nothing at all), or only heads that cannot go now anyway (held
     * by their own caps) and nothing in its own home's FIFO. Then the
     * scheduler would pick it at once too; going straight spares a timer per
     * request while a capped neighbour waits. */
    bool others = q->global ? q->all != NULL : t->tenant_wait != 0;
    judge(q, w->path, w->npath, cls, bytes, ops, now, &v);
    if (v.wait_us == 0 && others && !home_of(w)->head && !head_ready(q, p->tenant, now))
        others = false;
    if (!others && v.wait_us == 0) {
        charge(q, w->path, w->npath, cls, bytes, ops, &v, now);
        pthread_mutex_unlock(&q->lock);
        go(arg, 0);
        return 0;
    }
    if (t->tenant_wait >= q->cfg.queue_max) {
        w->path[w->npath - 1]->throttled++;
        pthread_mutex_unlock(&q->lock);
        srv_log(DEBUG, QOS, "tenant=%u queue full (%zu waiting)", p->tenant, t->tenant_wait);
        last_refusal =
            (struct qos_refusal){.why = QOS_WHY_QUEUE_FULL, .cls = cls, .tenant = p->tenant};
        return SRV_ETHROTTLE;
    }
    if (!base) {
        pthread_mutex_unlock(&q->lock);
        return -EINVAL;
    }
    /* it waits: from here on a heap copy, which its timer and the lists name */
    if (!(w = waiter_dup(w)) || !(w->ev = evtimer_new(base, on_timer, w))) {
        pthread_mutex_unlock(&q->lock);
        free(w);
        return -ENOMEM;
    }
    w->enq_us = now;
    w->seq = ++q->seq;
    w->deadline_us = now + (uint64_t)q->cfg.max_wait_ms * 1000u;
    path_ref(w, 1);
    fifo_insert(w);
    w->anext = q->all;
    if (q->all)
        q->all->aprev = w;
    q->all = w;
    arm(w, w->deadline_us - now);
    bool mine = false;
    pump(q, now, w, &mine);
    if (mine) {
        waiter_detach(q, w);
        pthread_mutex_unlock(&q->lock);
        event_free(w->ev);
        free(w);
        go(arg, 0);
        return 0;
    }
    home_of(w)->delayed++;
    pthread_mutex_unlock(&q->lock);
    return 0;
}

/* ---- held writes (qos_hold) ---- */

static void held_unlink(struct qos *q, struct held *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else if (q->held == h)
        q->held = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->next = h->prev = NULL;
    q->nheld--;
}

static void held_arm(struct held *h)
{
    struct timeval tv = {.tv_sec = (time_t)(h->delay_us / 1000000u),
                         .tv_usec = (suseconds_t)(h->delay_us % 1000000u)};
    evtimer_add(h->ev, &tv);
}

static void held_fire(evutil_socket_t fd, short what, void *arg)
{
    struct held *h = arg;
    struct qos *q = h->q;
    (void)fd;
    (void)what;
    pthread_mutex_lock(&q->lock);
    if (h->cancelled) {
        pthread_mutex_unlock(&q->lock);
        return; /* qos_cancel frees it once this returns */
    }
    if (!h->stop && q->hold.check(q->hold.arg, h->bucket, h->dirs, h->ndirs, h->bytes, false)) {
        h->delay_us = h->delay_us * 2 > HOLD_MAX_US ? HOLD_MAX_US : h->delay_us * 2;
        held_arm(h);
        pthread_mutex_unlock(&q->lock);
        return;
    }
    held_unlink(q, h);
    pthread_mutex_unlock(&q->lock);
    event_free(h->ev);
    struct held c = *h;
    free(h);
    if (c.stop) {
        last_refusal =
            (struct qos_refusal){.why = QOS_WHY_STOPPING, .cls = c.cls, .tenant = c.tenant};
        c.go(c.arg, SRV_ETHROTTLE);
        return;
    }
    struct core_principal p = {.tenant = c.tenant, .user = c.user};
    struct qos_scope sc = {.ino = c.ino,
                           .has_uid = c.has_uid,
                           .uid = c.uid,
                           .bucket_ino = c.bucket,
                           .dirs = c.dirs,
                           .ndirs = c.ndirs};
    int rc = admit(q, &p, &sc, c.cls, c.bytes, c.ops, c.piece, c.base, c.go, c.arg, c.since_us);
    if (rc)
        c.go(c.arg, SRV_ETHROTTLE); /* refused now (queue full, no memory): go never ran */
}

/* Hold the request @p w describes (its ask: @p bytes). Under the lock.
 * @return 0 (go runs later), -EINVAL (no base), -ENOMEM. */
static int hold_park(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                     const struct waiter *w, uint64_t bytes, uint64_t *piece,
                     struct event_base *base, uint64_t since_us)
{
    if (!base)
        return -EINVAL;
    struct held *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->ev = evtimer_new(base, held_fire, h);
    if (!h->ev) {
        free(h);
        return -ENOMEM;
    }
    h->q = q;
    h->tenant = p->tenant;
    h->user = p->user;
    h->ino = s->ino;
    h->has_uid = s->has_uid;
    h->uid = s->uid;
    h->bucket = w->bucket;
    memcpy(h->dirs, w->dirs, sizeof(w->dirs[0]) * w->ndirs);
    h->ndirs = w->ndirs;
    h->cls = w->cls;
    h->bytes = bytes;
    h->ops = w->ops;
    h->piece = piece;
    h->base = base;
    h->go = w->go;
    h->arg = w->arg;
    h->since_us = since_us;
    h->delay_us = HOLD_FIRST_US;
    h->next = q->held;
    if (q->held)
        q->held->prev = h;
    q->held = h;
    q->nheld++;
    q->held_total++;
    held_arm(h);
    return 0;
}

void qos_set_hold(struct qos *q, const struct qos_hold *h)
{
    pthread_mutex_lock(&q->lock);
    q->has_hold = h != NULL;
    if (h)
        q->hold = *h;
    pthread_mutex_unlock(&q->lock);
}

int qos_admit(struct qos *q, const struct core_principal *p, enum qos_class cls, uint64_t bytes,
              struct event_base *base, void (*go)(void *arg, int err), void *arg)
{
    return admit(q, p, NULL, cls, bytes, 1, NULL, base, go, arg, 0);
}

int qos_admit_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                 enum qos_class cls, uint64_t bytes, struct event_base *base,
                 void (*go)(void *arg, int err), void *arg)
{
    return admit(q, p, s, cls, bytes, 1, NULL, base, go, arg, 0);
}

int qos_admit_piece(struct qos *q, const struct core_principal *p, enum qos_class cls,
                    uint64_t bytes, unsigned flags, uint64_t *piece, struct event_base *base,
                    void (*go)(void *arg, int err), void *arg)
{
    return qos_admit_piece_at(q, p, NULL, cls, bytes, flags, piece, base, go, arg);
}

int qos_admit_piece_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                       enum qos_class cls, uint64_t bytes, unsigned flags, uint64_t *piece,
                       struct event_base *base, void (*go)(void *arg, int err), void *arg)
{
    if (!piece || (flags & ~QOS_PIECE_MORE))
        return -EINVAL;
    return admit(q, p, s, cls, bytes, (flags & QOS_PIECE_MORE) ? 0 : 1, piece, base, go, arg, 0);
}

bool qos_applies(struct qos *q, const struct core_principal *p, enum qos_class cls)
{
    return qos_applies_at(q, p, NULL, cls);
}

bool qos_applies_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                    enum qos_class cls)
{
    if (!q || !p || (unsigned)cls > QOS_META)
        return false;
    /* on the stack: this runs for every GET, and the waiter only carries the path */
    struct waiter w_, *w = &w_;
    waiter_init(w);
    waiter_scope(q, p, s, w);
    if (hold_scope(q, p, s, cls, 1, w))
        return true; /* a bounded bucket: its writes may be held */
    int bb, ob;
    buckets_of(cls, &bb, &ob);
    pthread_mutex_lock(&q->lock);
    bool yes = q->cfg.enabled && q->global;
    if (q->cfg.enabled && !yes) {
        /* without a capacity, path_build finds the nodes and makes none */
        struct node *path[PATH_MAX_NODES];
        int n = 0;
        if (path_build(q, w, path, &n) == 0)
            for (int i = 0; i < n && !yes; i++)
                yes = path[i]->b[ob].rate > 0 || (bb >= 0 && path[i]->b[bb].rate > 0);
    }
    pthread_mutex_unlock(&q->lock);
    return yes;
}

int qos_cancel(struct qos *q, void *arg)
{
    if (!q)
        return -ENOENT;
    pthread_mutex_lock(&q->lock);
    for (struct waiter *w = q->all; w; w = w->anext) {
        if (w->arg != arg)
            continue;
        bool was_queued = w->queued;
        waiter_detach(q, w);
        w->cancelled = true;
        if (was_queued)
            pump(q, qos_clock_us(), NULL, NULL);
        pthread_mutex_unlock(&q->lock);
        event_free(w->ev); /* waits for the callback if it runs on another thread */
        free(w);
        return 0;
    }
    for (struct held *h = q->held; h; h = h->next) {
        if (h->arg != arg)
            continue;
        held_unlink(q, h);
        h->cancelled = true;
        pthread_mutex_unlock(&q->lock);
        event_free(h->ev);
        free(h);
        return 0;
    }
    pthread_mutex_unlock(&q->lock);
    return -ENOENT;
}

/* Wake every waiter with @p force, each on its own loop. Under the lock. */
static void force_all(struct qos *q, enum waiter_force force)
{
    for (struct waiter *w = q->all; w; w = w->anext) {
        if (w->queued)
            fifo_unlink(w);
        if (!w->force) {
            w->force = force;
            event_active(w->ev, EV_TIMEOUT, 0);
        }
    }
}

void qos_drain(struct qos *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->sys_stopping = true;
    force_all(q, FORCE_THROTTLE);
    for (struct held *h = q->held; h; h = h->next) {
        h->stop = true;
        event_active(h->ev, EV_TIMEOUT, 0);
    }
    pthread_mutex_unlock(&q->lock);
}

/* Re-path every waiter after a policy change, then schedule. Under the lock. */
static void repath_all(struct qos *q)
{
    global_apply(q, false);
    for (struct waiter *w = q->all; w; w = w->anext)
        if (!w->force)
            path_rebuild(q, w);
    pump(q, qos_clock_us(), NULL, NULL);
}

void qos_configure(struct qos *q, const struct qos_config *cfg)
{
    pthread_mutex_lock(&q->lock);
    q->cfg = *cfg;
    cfg_norm(&q->cfg);
    sys_default_apply(q);
    global_apply(q, false);
    if (!q->cfg.enabled)
        force_all(q, FORCE_ADMIT);
    else
        repath_all(q);
    pthread_mutex_unlock(&q->lock);
}

/* ---- policies ---- */

#define KEY_MAX 13

/* The record key of a level (see the file header). @return its length. */
static size_t policy_key(uint32_t tenant, enum qos_level level, uint64_t id, uint8_t k[KEY_MAX])
{
    static const char tag[QOS_LEVEL__COUNT] = {'t', 'u', 'b', 'd', 'n'};
    k[0] = (uint8_t)tag[level];
    for (int i = 0; i < 4; i++)
        k[1 + i] = (uint8_t)(tenant >> (24 - 8 * i));
    if (level == QOS_LEVEL_TENANT || level == QOS_LEVEL_NFS_DEFAULT)
        return 5;
    for (int i = 0; i < 8; i++)
        k[5 + i] = (uint8_t)(id >> (56 - 8 * i));
    return 13;
}

static int policy_decode(const void *val, size_t vlen, enum qos_level level, struct qos_policy *pol)
{
    json_error_t e;
    json_t *j = json_loadb(val, vlen, 0, &e);
    if (!j)
        return SRV_ECORRUPT;
    json_int_t v = 0, tenant = 0, user = 0, rb = 0, wb = 0, ri = 0, wi = 0, mi = 0, burst = 0;
    json_int_t mrb = 0, mwb = 0, mio = 0, bucket = 0, dir = 0, weight = 0, uid = -1;
    int rc = json_unpack(j, "{s:I,s:I,s?I,s:I,s:I,s:I,s:I,s:I,s:I,s?I,s?I,s?I,s?I,s?I,s?I,s?I}",
                         "v", &v, "tenant", &tenant, "user", &user, "read_bps", &rb, "write_bps",
                         &wb, "read_iops", &ri, "write_iops", &wi, "meta_iops", &mi, "burst_ms",
                         &burst, "min_read_bps", &mrb, "min_write_bps", &mwb, "min_iops", &mio,
                         "bucket", &bucket, "dir", &dir, "weight", &weight, "uid", &uid);
    json_decref(j);
    if (rc < 0 || v != 1 || tenant <= 0 || tenant > UINT32_MAX || user < 0 || rb < 0 || wb < 0 ||
        ri < 0 || wi < 0 || mi < 0 || burst < 0 || mrb < 0 || mwb < 0 || mio < 0 || bucket < 0 ||
        dir < 0 || weight < 0 || weight > QOS_WEIGHT_MAX || uid < -1 || uid > UINT32_MAX)
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
    pol->level = level;
    pol->bucket = (uint64_t)bucket;
    pol->dir = (uint64_t)dir;
    pol->weight = (uint32_t)weight;
    pol->has_uid = uid >= 0;
    pol->uid = uid >= 0 ? (uint32_t)uid : 0;
    return 0;
}

static size_t tenant_policies(struct qos *q, uint32_t tenant)
{
    size_t n = 0;
    for (size_t i = 0; i < q->nn; i++)
        if (q->n[i]->tenant == tenant && q->n[i]->has_pol)
            n++;
    return n;
}

/* Recount the bucket and directory policies, daemon-wide (a lock-free fast
 * path) and per tenant (so one tenant's policies never make another's
 * requests walk directories). Under the lock. */
static void count_scoped(struct qos *q)
{
    size_t sc = 0, d = 0;
    for (size_t i = 0; i < q->nn; i++)
        if (q->n[i]->level == QOS_LEVEL_TENANT)
            q->n[i]->nscoped = q->n[i]->ndirpol = q->n[i]->nuid = 0;
    for (size_t i = 0; i < q->nn; i++) {
        const struct node *n = q->n[i];
        if (n->has_pol && n->level == QOS_LEVEL_USER && n->pol.has_uid) {
            struct node *t = node_find(q, n->tenant, QOS_LEVEL_TENANT, 0);
            if (t)
                t->nuid++;
        }
        if (!n->has_pol || (n->level != QOS_LEVEL_BUCKET && n->level != QOS_LEVEL_DIR))
            continue;
        struct node *t = node_find(q, n->tenant, QOS_LEVEL_TENANT, 0);
        bool dir = n->level == QOS_LEVEL_DIR;
        sc++;
        d += dir ? 1 : 0;
        if (t) {
            t->nscoped++;
            t->ndirpol += dir ? 1 : 0;
        }
    }
    __atomic_store_n(&q->nscoped, sc, __ATOMIC_RELAXED);
    __atomic_store_n(&q->ndirpol, d, __ATOMIC_RELAXED);
}

/* Install @p pol in the cache (under the lock). */
static int policy_install(struct qos *q, const struct qos_policy *pol)
{
    uint64_t now = qos_clock_us();
    enum qos_level lv = level_of(pol);
    struct node *n = node_find(q, pol->tenant, lv, id_of(pol));
    struct qos_policy p = *pol;
    p.level = lv;
    if (!n && !(n = node_new(q, pol->tenant, lv, id_of(pol))))
        return -ENOMEM;
    /* the tenant node carries the tenant's counts of scoped policies */
    if (lv != QOS_LEVEL_TENANT && !node_find(q, pol->tenant, QOS_LEVEL_TENANT, 0) &&
        !node_new(q, pol->tenant, QOS_LEVEL_TENANT, 0))
        return -ENOMEM;
    node_apply(n, &p, now, !n->has_pol && !n->refs);
    n->has_pol = true;
    count_scoped(q);
    return 0;
}

/* Remove a level's policy (under the lock): its waiters are re-pathed. */
static int policy_uninstall(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id)
{
    struct node *n = node_find(q, tenant, level, id);
    if (!n || !n->has_pol)
        return -ENOENT;
    struct qos_policy none = {.tenant = tenant, .level = level};
    node_apply(n, &none, qos_clock_us(), false);
    n->has_pol = false;
    count_scoped(q);
    node_gc(q, n);
    return 0;
}

static bool policy_valid(const struct qos_policy *pol)
{
    const uint64_t lim = (uint64_t)1 << 52; /* exact in a double and in json_int_t */
    enum qos_level lv = level_of(pol);
    if (pol->tenant == 0 || pol->burst_ms > 60000 || (unsigned)lv >= QOS_LEVEL__COUNT ||
        pol->weight > QOS_WEIGHT_MAX)
        return false;
    if (pol->read_bps > lim || pol->write_bps > lim || pol->read_iops > lim ||
        pol->write_iops > lim || pol->meta_iops > lim || pol->min_read_bps > lim ||
        pol->min_write_bps > lim || pol->min_iops > lim || pol->user > lim || pol->bucket > lim ||
        pol->dir > lim)
        return false;
    switch (lv) {
    case QOS_LEVEL_USER:
        return pol->user != 0;
    case QOS_LEVEL_BUCKET:
        return pol->bucket != 0;
    case QOS_LEVEL_DIR:
        return pol->bucket != 0 && pol->dir != 0;
    default:
        return true;
    }
}

static char *policy_encode(const struct qos_policy *pol)
{
    json_t *j = json_pack(
        "{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "v", 1, "tenant",
        (json_int_t)pol->tenant, "user", (json_int_t)pol->user, "read_bps",
        (json_int_t)pol->read_bps, "write_bps", (json_int_t)pol->write_bps, "read_iops",
        (json_int_t)pol->read_iops, "write_iops", (json_int_t)pol->write_iops, "meta_iops",
        (json_int_t)pol->meta_iops, "burst_ms", (json_int_t)pol->burst_ms, "min_read_bps",
        (json_int_t)pol->min_read_bps, "min_write_bps", (json_int_t)pol->min_write_bps, "min_iops",
        (json_int_t)pol->min_iops, "bucket", (json_int_t)pol->bucket, "dir", (json_int_t)pol->dir,
        "weight", (json_int_t)pol->weight);
    if (j && pol->has_uid && json_object_set_new(j, "uid", json_integer(pol->uid)) < 0) {
        json_decref(j);
        return NULL;
    }
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

int qos_policy_set(struct qos *q, const struct qos_policy *pol)
{
    int rc = 0;
    if (!pol || !policy_valid(pol))
        return -EINVAL;
    enum qos_level lv = level_of(pol);
    uint64_t id = id_of(pol);
    pthread_mutex_lock(&q->lock);
    struct node *cur = node_find(q, pol->tenant, lv, id);
    if (lv != QOS_LEVEL_TENANT && !(cur && cur->has_pol) &&
        tenant_policies(q, pol->tenant) >= QOS_POLICIES_PER_TENANT_MAX) {
        rc = -ENOSPC;
        goto out;
    }
    bool none = policy_unlimited(pol);
    if (q->core) {
        uint8_t k[KEY_MAX];
        size_t klen = policy_key(pol->tenant, lv, id, k);
        if (none) {
            rc = meta_record_del(core_meta(q->core), META_REC_QOS, k, klen);
            if (rc == -ENOENT)
                rc = 0;
        } else {
            char *s = policy_encode(pol);
            if (!s) {
                rc = -ENOMEM;
                goto out;
            }
            rc = meta_record_put(core_meta(q->core), META_REC_QOS, k, klen, s, strlen(s), 0);
            free(s);
        }
        if (rc < 0)
            goto out;
    }
    rc = none ? (policy_uninstall(q, pol->tenant, lv, id), 0) : policy_install(q, pol);
    if (rc < 0)
        goto out;
    repath_all(q);
    srv_log(INFO, QOS,
            "tenant=%u %s %llu policy: caps read %llu B/s %llu op/s, write %llu B/s "
            "%llu op/s, meta %llu op/s; minimums read %llu B/s, write %llu B/s, %llu op/s; "
            "weight %u (0 = none/default)",
            pol->tenant, qos_level_name(lv), (unsigned long long)id,
            (unsigned long long)pol->read_bps, (unsigned long long)pol->read_iops,
            (unsigned long long)pol->write_bps, (unsigned long long)pol->write_iops,
            (unsigned long long)pol->meta_iops, (unsigned long long)pol->min_read_bps,
            (unsigned long long)pol->min_write_bps, (unsigned long long)pol->min_iops, pol->weight);
out:
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_get_at(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id,
                      struct qos_policy *out)
{
    if ((unsigned)level >= QOS_LEVEL__COUNT)
        return -EINVAL;
    int rc = -ENOENT;
    pthread_mutex_lock(&q->lock);
    struct node *n = node_find(q, tenant, level, id);
    if (n && n->has_pol) {
        *out = n->pol;
        rc = 0;
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_get_user(struct qos *q, uint32_t tenant, uint64_t user, struct qos_policy *out)
{
    return qos_policy_get_at(q, tenant, user ? QOS_LEVEL_USER : QOS_LEVEL_TENANT, user, out);
}

int qos_policy_get(struct qos *q, uint32_t tenant, struct qos_policy *out)
{
    return qos_policy_get_user(q, tenant, 0, out);
}

int qos_policy_delete_at(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id)
{
    if ((unsigned)level >= QOS_LEVEL__COUNT)
        return -EINVAL;
    pthread_mutex_lock(&q->lock);
    struct node *n = node_find(q, tenant, level, id);
    int rc = (n && n->has_pol) ? 0 : -ENOENT;
    if (rc == 0 && q->core) {
        uint8_t k[KEY_MAX];
        size_t klen = policy_key(tenant, level, id, k);
        rc = meta_record_del(core_meta(q->core), META_REC_QOS, k, klen);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0) {
        policy_uninstall(q, tenant, level, id);
        repath_all(q);
        srv_log(INFO, QOS, "tenant=%u %s %llu policy removed (unlimited)", tenant,
                qos_level_name(level), (unsigned long long)id);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int qos_policy_delete_user(struct qos *q, uint32_t tenant, uint64_t user)
{
    return qos_policy_delete_at(q, tenant, user ? QOS_LEVEL_USER : QOS_LEVEL_TENANT, user);
}

int qos_policy_delete(struct qos *q, uint32_t tenant)
{
    return qos_policy_delete_user(q, tenant, 0);
}

int qos_policy_set_uid(struct qos *q, uint32_t tenant, uint64_t user, uint32_t uid)
{
    struct qos_policy p;
    int rc = qos_policy_get_at(q, tenant, QOS_LEVEL_USER, user, &p);
    if (rc < 0)
        return rc;
    if (p.has_uid && p.uid == uid)
        return 0;
    p.has_uid = true;
    p.uid = uid;
    return qos_policy_set(q, &p);
}

int qos_policy_list(struct qos *q, qos_policy_cb cb, void *arg)
{
    pthread_mutex_lock(&q->lock);
    size_t n = 0;
    struct qos_policy *copy = malloc((q->nn ? q->nn : 1) * sizeof(*copy));
    if (!copy) {
        pthread_mutex_unlock(&q->lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->nn; i++)
        if (q->n[i]->has_pol && q->n[i]->tenant != QOS_SYSTEM_TENANT)
            copy[n++] = q->n[i]->pol; /* the system class is listed by qos_system_get */
    pthread_mutex_unlock(&q->lock);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb(arg, &copy[i]);
    free(copy);
    return rc > 0 ? 0 : rc;
}

/* ---- the system class ---- */

/* The configured default policy of the system class. */
static void sys_default_of(const struct qos *q, struct qos_policy *pol)
{
    memset(pol, 0, sizeof(*pol));
    pol->tenant = QOS_SYSTEM_TENANT;
    pol->level = QOS_LEVEL_TENANT;
    pol->read_bps = q->cfg.sys_read_bps;
    pol->write_bps = q->cfg.sys_write_bps;
    pol->meta_iops = q->cfg.sys_meta_iops;
    pol->weight = q->cfg.sys_weight ? q->cfg.sys_weight : QOS_SYSTEM_WEIGHT_DEFAULT;
}

/* Install the configured default unless a policy is stored (under the lock,
 * or before the instance is shared). */
static void sys_default_apply(struct qos *q)
{
    if (q->sys_stored)
        return;
    struct qos_policy pol;
    sys_default_of(q, &pol);
    if (policy_unlimited(&pol) || !policy_valid(&pol))
        policy_uninstall(q, QOS_SYSTEM_TENANT, QOS_LEVEL_TENANT, 0);
    else if (policy_install(q, &pol) < 0)
        srv_log(ERROR, QOS, "out of memory setting the system class's policy");
}

int qos_system_get(struct qos *q, struct qos_policy *out, bool *stored)
{
    pthread_mutex_lock(&q->lock);
    struct node *n = node_find(q, QOS_SYSTEM_TENANT, QOS_LEVEL_TENANT, 0);
    if (n && n->has_pol)
        *out = n->pol;
    else
        sys_default_of(q, out);
    if (stored)
        *stored = q->sys_stored;
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int qos_system_set(struct qos *q, const struct qos_policy *pol)
{
    if (!pol || has_minimum(pol))
        return -EINVAL; /* a minimum would be carved out of the tenants' */
    struct qos_policy p = *pol;
    p.tenant = QOS_SYSTEM_TENANT;
    p.level = QOS_LEVEL_TENANT;
    p.user = p.bucket = p.dir = 0;
    p.has_uid = false;
    p.uid = 0;
    if (!p.weight)
        p.weight = QOS_SYSTEM_WEIGHT_DEFAULT; /* its own default, not a tenant's */
    int rc = qos_policy_set(q, &p);
    if (rc == 0) {
        pthread_mutex_lock(&q->lock);
        q->sys_stored = true;
        if (policy_unlimited(&p)) {
            /* stored as "no policy": an all-zero policy means unlimited, weight default */
            q->sys_stored = false;
            sys_default_apply(q);
            repath_all(q);
        }
        pthread_mutex_unlock(&q->lock);
    }
    return rc;
}

int qos_system_reset(struct qos *q)
{
    pthread_mutex_lock(&q->lock);
    bool stored = q->sys_stored;
    pthread_mutex_unlock(&q->lock);
    if (!stored)
        return -ENOENT;
    int rc = qos_policy_delete_at(q, QOS_SYSTEM_TENANT, QOS_LEVEL_TENANT, 0);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    pthread_mutex_lock(&q->lock);
    q->sys_stored = false;
    sys_default_apply(q);
    repath_all(q);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

static void sys_keepalive(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* An active event runs even when made active before the loop started (a
 * loopbreak then would be forgotten). */
static void sys_quit_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

static void *sys_main(void *arg)
{
    struct event_base *base = arg;
    /* a persistent timer keeps the loop running while nothing waits */
    struct event *ka = event_new(base, -1, EV_PERSIST, sys_keepalive, NULL);
    struct timeval tv = {3600, 0};
    if (ka)
        event_add(ka, &tv);
    event_base_dispatch(base);
    if (ka)
        event_free(ka);
    return NULL;
}

/* The loop system waiters wait on, started on first need. @return NULL: -ENOMEM. */
static struct event_base *sys_base_get(struct qos *q)
{
    pthread_mutex_lock(&q->lock);
    if (!q->sys_base) {
        struct event_base *b = event_base_new();
        struct event *quit = b ? event_new(b, -1, 0, sys_quit_cb, b) : NULL;
        if (b && (!quit || pthread_create(&q->sys_thread, NULL, sys_main, b) != 0)) {
            if (quit)
                event_free(quit);
            event_base_free(b);
            b = NULL;
            quit = NULL;
        }
        q->sys_base = b;
        q->sys_quit = quit;
    }
    struct event_base *b = q->sys_base;
    pthread_mutex_unlock(&q->lock);
    return b;
}

struct sys_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
};

static void sys_go(void *arg, int err)
{
    struct sys_wait *sw = arg;
    pthread_mutex_lock(&sw->mu);
    sw->done = true;
    sw->err = err;
    pthread_cond_signal(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
}

static bool sys_stopping(struct qos *q)
{
    pthread_mutex_lock(&q->lock);
    bool s = q->sys_stopping;
    pthread_mutex_unlock(&q->lock);
    return s;
}

int qos_system_wait(struct qos *q, enum qos_class cls, uint64_t bytes)
{
    if (!q)
        return 0;
    if ((unsigned)cls > QOS_META)
        return -EINVAL;
    struct event_base *base = sys_base_get(q);
    if (!base)
        return -ENOMEM;
    const struct core_principal p = {.tenant = QOS_SYSTEM_TENANT};
    struct sys_wait sw;
    pthread_mutex_init(&sw.mu, NULL);
    pthread_cond_init(&sw.cv, NULL);
    uint64_t left = bytes;
    unsigned flags = 0;
    int rc = 0;
    for (;;) {
        uint64_t piece = 0;
        sw.done = false;
        sw.err = 0;
        rc = qos_admit_piece_at(q, &p, NULL, cls, left, flags, &piece, base, sys_go, &sw);
        if (rc == SRV_ETHROTTLE && !sys_stopping(q)) {
            struct timespec ts = {0, 10 * 1000000l}; /* queue full: ask again soon */
            nanosleep(&ts, NULL);
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        pthread_mutex_lock(&sw.mu);
        while (!sw.done)
            pthread_cond_wait(&sw.cv, &sw.mu);
        pthread_mutex_unlock(&sw.mu);
        rc = sw.err;
        if (rc == SRV_ETHROTTLE && !sys_stopping(q)) {
            rc = 0; /* waited max_wait_ms: ask again for the same piece */
            continue;
        }
        if (rc < 0)
            break;
        left -= piece;
        flags = QOS_PIECE_MORE;
        if (left == 0)
            break;
    }
    pthread_cond_destroy(&sw.cv);
    pthread_mutex_destroy(&sw.mu);
    return rc;
}

void qos_system_drain(struct qos *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->sys_stopping = true;
    for (struct waiter *w = q->all; w; w = w->anext) {
        if (w->tenant != QOS_SYSTEM_TENANT || w->force)
            continue;
        if (w->queued)
            fifo_unlink(w);
        w->force = FORCE_THROTTLE;
        event_active(w->ev, EV_TIMEOUT, 0);
    }
    pthread_mutex_unlock(&q->lock);
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
    enum qos_level lv;
    if (klen == 5 && k[0] == 't')
        lv = QOS_LEVEL_TENANT;
    else if (klen == 5 && k[0] == 'n')
        lv = QOS_LEVEL_NFS_DEFAULT;
    else if (klen == 13 && k[0] == 'u')
        lv = QOS_LEVEL_USER;
    else if (klen == 13 && k[0] == 'b')
        lv = QOS_LEVEL_BUCKET;
    else if (klen == 13 && k[0] == 'd')
        lv = QOS_LEVEL_DIR;
    else
        return 0; /* a record of a later version: not ours to judge */
    if (policy_decode(val, vlen, lv, &pol) < 0 || !policy_valid(&pol)) {
        srv_log(ERROR, QOS, "a stored QoS policy failed to decode; skipped");
        return 0;
    }
    if (!policy_unlimited(&pol) && policy_install(lc->q, &pol) < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    if (pol.tenant == QOS_SYSTEM_TENANT && lv == QOS_LEVEL_TENANT)
        lc->q->sys_stored = true;
    return 0;
}

/* ---- metrics ---- */

struct metric {
    const char *name, *type, *help;
};

static const struct metric metrics[] = {
    {"s3nfs_qos_waiting", "gauge", "Requests waiting for QoS admission now, by home level."},
    {"s3nfs_qos_delayed_total", "counter", "Requests that had to wait, by home level."},
    {"s3nfs_qos_throttled_total", "counter",
     "Requests refused by QoS (waited too long or queue full), by home level."},
    {"s3nfs_qos_admitted_ops_total", "counter",
     "Requests admitted through a level (every level on the path counts), by class."},
    {"s3nfs_qos_admitted_bytes_total", "counter", "Bytes admitted through a level, by class."},
    {"s3nfs_qos_throttled_seconds_total", "counter",
     "Time requests spent waiting for admission, by home level."},
    {"s3nfs_qos_guarantee_shortfall_seconds_total", "counter",
     "Time a waiting request covered by this level's minimum was held back (by a cap on its "
     "path or a busy scheduler): the minimum was not delivered."},
};

static void render_node(struct evbuffer *out, int f, const struct node *n)
{
    static const char *const cls[3] = {"read", "write", "meta"};
    char lab[96];
    if (n->tenant == QOS_SYSTEM_TENANT)
        snprintf(lab, sizeof(lab), "tenant=\"system\",level=\"system\",id=\"0\"");
    else
        snprintf(lab, sizeof(lab), "tenant=\"%u\",level=\"%s\",id=\"%llu\"", n->tenant,
                 qos_level_name(n->level), (unsigned long long)n->id);
    switch (f) {
    case 0:
        evbuffer_add_printf(out, "%s{%s} %zu\n", metrics[f].name, lab, n->nwait);
        break;
    case 1:
    case 2:
        evbuffer_add_printf(out, "%s{%s} %llu\n", metrics[f].name, lab,
                            (unsigned long long)(f == 1 ? n->delayed : n->throttled));
        break;
    case 3:
        for (int c = 0; c < 3; c++)
            evbuffer_add_printf(out, "%s{%s,class=\"%s\"} %llu\n", metrics[f].name, lab, cls[c],
                                (unsigned long long)n->ops[c]);
        break;
    case 4:
        for (int c = 0; c < 2; c++)
            evbuffer_add_printf(out, "%s{%s,class=\"%s\"} %llu\n", metrics[f].name, lab, cls[c],
                                (unsigned long long)n->bytes[c]);
        break;
    default:
        evbuffer_add_printf(out, "%s{%s} %.6f\n", metrics[f].name, lab,
                            (double)(f == 5 ? n->wait_us : n->shortfall_us) / 1e6);
        break;
    }
}

static void qos_render(void *arg, struct evbuffer *out)
{
    struct qos *q = arg;
    pthread_mutex_lock(&q->lock);
    for (size_t f = 0; f < sizeof(metrics) / sizeof(metrics[0]); f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metrics[f].name, metrics[f].help,
                            metrics[f].name, metrics[f].type);
        for (size_t i = 0; i < q->nn; i++)
            render_node(out, (int)f, q->n[i]);
    }
    const char *dims[G__COUNT] = {"read_bps", "write_bps", "iops"};
    evbuffer_add_printf(out, "# HELP s3nfs_qos_capacity Daemon capacity the minimums are "
                             "honoured within (0 = unknown).\n# TYPE s3nfs_qos_capacity gauge\n");
    for (int d = 0; d < G__COUNT; d++)
        evbuffer_add_printf(out, "s3nfs_qos_capacity{dim=\"%s\"} %.0f\n", dims[d], q->g[d].rate);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_qos_held Writes held now by a bucket's dirty-bytes bound "
                        "(waiting for uploads).\n# TYPE s3nfs_qos_held gauge\ns3nfs_qos_held %zu\n"
                        "# HELP s3nfs_qos_held_total Writes held by a dirty-bytes bound (each time "
                        "one was held).\n# TYPE s3nfs_qos_held_total counter\n"
                        "s3nfs_qos_held_total %llu\n",
                        q->nheld, (unsigned long long)q->held_total);
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
    q->last_pump_us = qos_clock_us();
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
    sys_default_apply(q);
    global_apply(q, false); /* a stored minimum turns the measured capacity on */
    srv_log(INFO, QOS, "QoS %s, %zu policies", q->cfg.enabled ? "on" : "off", q->nn);
    srv_metrics_add_renderer(qos_render, q);
    *out = q;
    return 0;
}

void qos_close(struct qos *q)
{
    if (!q)
        return;
    srv_metrics_remove_renderer(qos_render, q);
    if (q->sys_base) {
        event_active(q->sys_quit, EV_READ, 0);
        pthread_join(q->sys_thread, NULL);
        event_free(q->sys_quit);
    }
    while (q->all) {
        struct waiter *w = q->all;
        srv_log(WARN, QOS, "tenant=%u a waiting request was dropped at close", w->tenant);
        q->all = w->anext;
        event_free(w->ev);
        free(w);
    }
    while (q->held) {
        struct held *h = q->held;
        srv_log(WARN, QOS, "tenant=%u a held write was dropped at close", h->tenant);
        q->held = h->next;
        event_free(h->ev);
        free(h);
    }
    for (size_t i = 0; i < q->nn; i++)
        free(q->n[i]);
    free(q->n);
    free(q->hash);
    if (q->sys_base)
        event_base_free(q->sys_base);
    pthread_mutex_destroy(&q->lock);
    free(q);
}
