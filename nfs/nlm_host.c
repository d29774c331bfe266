/* SPDX-License-Identifier: Apache-2.0
 * nlm_host: remembered NLM client hosts, SM_NOTIFY after a restart and the
 * grace period (see nlm_host.h).
 * Hosts hash by name into a small table under one mutex, which is also held
 * across the store writes that add or drop a host, so that a host is never
 * dropped from the store while a LOCK of it is being granted (the LOCK pins
 * the host first). A host that has released everything lingers for
 * NLM_HOST_LINGER_S before it is dropped, so that a client locking and
 * unlocking in a loop does not cost two store writes per lock; a periodic
 * tick on loop 0 drops lingering hosts and ends the grace period. */
#include "nlm_host.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "meta_record.h"
#include "nfs_int.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"

#define NBUCKETS 64
#define NLM_HOST_LINGER_S 10 /* an idle host is dropped after this long */
#define NLM_TICK_S 1

enum nlm_host_notify {
    NLM_HN_NONE = 0,   /* came in this run (or notified and since locked again) */
    NLM_HN_PENDING,    /* remembered from before the restart, SM_NOTIFY in flight */
    NLM_HN_DELIVERED,  /* notified: may reclaim during the grace period */
    NLM_HN_UNREACHED,  /* could not be notified: kept for the next start */
};

struct nlm_host {
    struct nlm_host *next;
    char *name;
    struct sockaddr_storage addr;
    unsigned refs; /* LOCK calls in progress (nlm_host_hold) */
    enum nlm_host_notify notify;
    unsigned tries; /* starts in a row at which SM_NOTIFY to it failed (as stored) */
    uint64_t idle_since_us; /* holds nothing since (CLOCK_MONOTONIC); 0: not known idle */
};

struct nlm_hosts {
    pthread_mutex_t mu;
    struct nlm_host *b[NBUCKETS];
    size_t count;
    int grace_s;
    uint64_t grace_end_us; /* CLOCK_MONOTONIC; 0: no grace period */
    unsigned notifying;    /* SM_NOTIFY calls in flight */
    unsigned delivered;    /* SM_NOTIFY calls delivered (this start) */
    unsigned long reclaims; /* reclaims granted (this start) */
    bool ended_early;      /* nobody could be told to reclaim: grace period closed */
    bool grace_over;       /* the end of the grace period was handled (tick) */
    bool sweeping;         /* a sweep is queued or running */
    struct event *tick;    /* periodic: lingering hosts, end of grace (on tick_loop) */
    struct srv_loop *tick_loop;
};

/* ---- pure helpers ---- */

int nlm_host_key(const char *caller, char *key, size_t keylen)
{
    size_t pl = sizeof(NLM_HOST_KEY_PREFIX) - 1, nl = strlen(caller);
    if (nl == 0)
        return -EINVAL;
    if (nl > NLM_HOST_NAME_MAX || pl + nl > keylen)
        return -ENAMETOOLONG;
    memcpy(key, NLM_HOST_KEY_PREFIX, pl);
    memcpy(key + pl, caller, nl);
    return (int)(pl + nl);
}

/* Unwrap an IPv4-mapped IPv6 address. */
static void addr_norm(const struct sockaddr_storage *in, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof(*out));
    if (in->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)in;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            struct sockaddr_in *o4 = (struct sockaddr_in *)out;
            o4->sin_family = AF_INET;
            memcpy(&o4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
            return;
        }
        struct sockaddr_in6 *o6 = (struct sockaddr_in6 *)out;
        o6->sin6_family = AF_INET6;
        o6->sin6_addr = s6->sin6_addr;
        o6->sin6_scope_id = s6->sin6_scope_id;
    } else if (in->ss_family == AF_INET) {
        struct sockaddr_in *o4 = (struct sockaddr_in *)out;
        o4->sin_family = AF_INET;
        o4->sin_addr = ((const struct sockaddr_in *)in)->sin_addr;
    }
}

int nlm_host_rec_encode(const struct sockaddr_storage *addr, unsigned tries,
                        uint8_t out[NLM_HOST_REC_LEN])
{
    struct sockaddr_storage a;
    if (tries > 255)
        return -ERANGE;
    addr_norm(addr, &a);
    memset(out, 0, NLM_HOST_REC_LEN);
    out[0] = NLM_HOST_REC_VERSION;
    out[2] = (uint8_t)tries;
    if (a.ss_family == AF_INET) {
        out[1] = 4;
        memcpy(out + 4, &((struct sockaddr_in *)&a)->sin_addr, 4);
    } else if (a.ss_family == AF_INET6) {
        out[1] = 6;
        memcpy(out + 4, &((struct sockaddr_in6 *)&a)->sin6_addr, 16);
    } else {
        return -EAFNOSUPPORT;
    }
    return NLM_HOST_REC_LEN;
}

int nlm_host_rec_decode(const void *val, size_t len, struct sockaddr_storage *addr,
                        unsigned *tries)
{
    const uint8_t *v = val;
    if (len != NLM_HOST_REC_LEN || v[0] != NLM_HOST_REC_VERSION || v[3])
        return -EINVAL;
    *tries = v[2];
    memset(addr, 0, sizeof(*addr));
    if (v[1] == 4) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)addr;
        for (int i = 8; i < NLM_HOST_REC_LEN; i++)
            if (v[i])
                return -EINVAL;
        s4->sin_family = AF_INET;
        memcpy(&s4->sin_addr, v + 4, 4);
    } else if (v[1] == 6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)addr;
        s6->sin6_family = AF_INET6;
        memcpy(&s6->sin6_addr, v + 4, 16);
    } else {
        return -EINVAL;
    }
    return 0;
}

bool nlm_addr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    uint8_t ra[NLM_HOST_REC_LEN], rb[NLM_HOST_REC_LEN];
    if (nlm_host_rec_encode(a, 0, ra) < 0 || nlm_host_rec_encode(b, 0, rb) < 0)
        return false;
    return memcmp(ra, rb, sizeof(ra)) == 0;
}

void nlm_addr_key(const struct sockaddr_storage *in, uint8_t out[16])
{
    struct sockaddr_storage a;
    addr_norm(in, &a);
    memset(out, 0, 16);
    if (a.ss_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((struct sockaddr_in *)&a)->sin_addr, 4);
    } else if (a.ss_family == AF_INET6) {
        memcpy(out, &((struct sockaddr_in6 *)&a)->sin6_addr, 16);
    }
}

void nlm_addr_text(const struct sockaddr_storage *in, char *buf, size_t len)
{
    struct sockaddr_storage a;
    addr_norm(in, &a);
    const void *src = &((struct sockaddr_in6 *)&a)->sin6_addr;
    if (a.ss_family == AF_INET)
        src = &((struct sockaddr_in *)&a)->sin_addr;
    if (a.ss_family == 0 || !inet_ntop(a.ss_family, src, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

/* ---- the table ---- */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static size_t name_bucket(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return (size_t)(h % NBUCKETS);
}

/* Slot of host @p name (where it is, or where it would go). Under mu. */
static struct nlm_host **host_slot(struct nlm_hosts *h, const char *name)
{
    struct nlm_host **pp = &h->b[name_bucket(name)];
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void host_free(struct nlm_host *x)
{
    if (x) {
        free(x->name);
        free(x);
    }
}

int nlm_hosts_new(struct nlm_hosts **out, int grace_s)
{
    struct nlm_hosts *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    pthread_mutex_init(&h->mu, NULL);
    h->grace_s = grace_s < 0 ? 0 : grace_s;
    *out = h;
    return 0;
}

void nlm_hosts_free(struct nlm_hosts *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct nlm_host *x = h->b[i];
        while (x) {
            struct nlm_host *n = x->next;
            host_free(x);
            x = n;
        }
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* Add host @p name to memory (under mu). @return the host or NULL (ENOMEM). */
static struct nlm_host *host_add(struct nlm_hosts *h, struct nlm_host **slot, const char *name,
                                 const struct sockaddr_storage *addr, enum nlm_host_notify st)
{
    struct nlm_host *x = calloc(1, sizeof(*x));
    if (!x || !(x->name = strdup(name))) {
        free(x);
        return NULL;
    }
    addr_norm(addr, &x->addr);
    x->notify = st;
    *slot = x;
    h->count++;
    return x;
}

struct load_ctx {
    struct nfs_server *s;
    size_t loaded, bad;
    int err; /* meta_record_scan does not pass the callback's result on */
};

static int load_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *c = arg;
    struct nlm_hosts *h = c->s->hosts;
    size_t pl = sizeof(NLM_HOST_KEY_PREFIX) - 1;
    if (klen < pl || memcmp(key, NLM_HOST_KEY_PREFIX, pl) != 0)
        return 1; /* past our prefix: done */
    char name[NLM_HOST_NAME_MAX + 1];
    struct sockaddr_storage a;
    unsigned tries;
    size_t nl = klen - pl;
    if (nl == 0 || nl > NLM_HOST_NAME_MAX || memchr((const char *)key + pl, '\0', nl) ||
        nlm_host_rec_decode(val, vlen, &a, &tries) < 0) {
        srv_log(WARN, NFS, "req=- tenant=- malformed remembered NLM host record (key %zu bytes, "
                "value %zu bytes): skipped", klen, vlen);
        c->bad++;
        return 0;
    }
    memcpy(name, (const char *)key + pl, nl);
    name[nl] = '\0';
    struct nlm_host **slot = host_slot(h, name);
    if (!*slot && !host_add(h, slot, name, &a, NLM_HN_PENDING)) {
        c->err = -ENOMEM;
        return 1;
    }
    (*slot)->tries = tries;
    c->loaded++;
    return 0;
}

int nlm_hosts_load(struct nfs_server *s)
{
    struct load_ctx c = {.s = s};
    pthread_mutex_lock(&s->hosts->mu);
    int rc = meta_record_scan(core_meta(s->core), META_REC_CONFIG, NLM_HOST_KEY_PREFIX,
                             sizeof(NLM_HOST_KEY_PREFIX) - 1, load_one, &c);
    pthread_mutex_unlock(&s->hosts->mu);
    if (rc == 0)
        rc = c.err;
    if (rc < 0) {
        srv_log(ERROR, NFS, "req=- tenant=- cannot read the remembered NLM hosts: %s",
                srv_strerror(rc));
        return rc;
    }
    return 0;
}

size_t nlm_hosts_count(struct nfs_server *s)
{
    pthread_mutex_lock(&s->hosts->mu);
    size_t n = s->hosts->count;
    pthread_mutex_unlock(&s->hosts->mu);
    return n;
}

bool nlm_grace_active(struct nfs_server *s)
{
    uint64_t end = __atomic_load_n(&s->hosts->grace_end_us, __ATOMIC_ACQUIRE);
    return end != 0 && now_us() < end;
}

/* Drop host @p x from the store and memory (under mu). */
static void host_drop(struct nfs_server *s, struct nlm_host **slot, const char *why)
{
    struct nlm_hosts *h = s->hosts;
    struct nlm_host *x = *slot;
    char key[sizeof(NLM_HOST_KEY_PREFIX) + NLM_HOST_NAME_MAX];
    int kl = nlm_host_key(x->name, key, sizeof(key));
    int rc = kl < 0 ? 0 : meta_record_del(core_meta(s->core), META_REC_CONFIG, key, (size_t)kl);
    if (rc < 0 && rc != -ENOENT) {
        srv_log(WARN, NFS, "req=- tenant=- cannot forget NLM host %s: %s (kept)", x->name,
                srv_strerror(rc));
        return;
    }
    srv_log(INFO, NFS, "req=- tenant=- NLM host %s forgotten (%s)", x->name, why);
    *slot = x->next;
    h->count--;
    host_free(x);
}

/* Does host @p x hold nothing (no pin, no waiter, no lock)? Waiters are
 * counted before locks: a waiter becomes a lock (nlm_block_retry) before it
 * stops being a waiter, so the pair is never missed in between. */
static bool host_idle(struct nfs_server *s, const struct nlm_host *x)
{
    return x->refs == 0 && nlm_block_host_count(s, x->name) == 0 &&
           nfs_locks_host_count(s->locks, x->name, strlen(x->name)) == 0;
}

enum drop_how {
    DROP_LINGER, /* idle: drop once it has been idle NLM_HOST_LINGER_S (else note since when) */
    DROP_NOW,    /* idle: drop now */
    DROP_FORCE,  /* idle: drop now, even a host still owed a notification */
    DROP_MARK,   /* idle: only note since when (no store write: any thread) */
};

/* Forget @p caller if it holds nothing, as @p how says. Hosts waiting for
 * or refused their notification are kept unless forced. With @p from, only
 * a host remembered from that address is looked at.
 * @return 0, or -EPERM (remembered from another address, written to
 *         @p where, when @p from is given). */
static int host_maybe_drop(struct nfs_server *s, const char *caller, enum drop_how how,
                           const char *why, const struct sockaddr_storage *from, char *where,
                           size_t wlen)
{
    struct nlm_hosts *h = s->hosts;
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    struct nlm_host **slot = host_slot(h, caller);
    struct nlm_host *x = *slot;
    if (!x)
        goto out;
    if (from && !nlm_addr_same(&x->addr, from)) {
        nlm_addr_text(&x->addr, where, wlen);
        rc = -EPERM;
        goto out;
    }
    if (!host_idle(s, x)) {
        x->idle_since_us = 0;
        goto out;
    }
    if (how != DROP_FORCE && (x->notify == NLM_HN_PENDING || x->notify == NLM_HN_UNREACHED))
        goto out;
    uint64_t now = now_us();
    if (!x->idle_since_us)
        x->idle_since_us = now;
    if (how == DROP_NOW || how == DROP_FORCE ||
        (how == DROP_LINGER && now - x->idle_since_us >= NLM_HOST_LINGER_S * 1000000ull))
        host_drop(s, slot, why);
out:
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int nlm_host_hold(struct nfs_req *r, const char *caller)
{
    struct nfs_server *s = r->srv;
    struct nlm_hosts *h = s->hosts;
    char key[sizeof(NLM_HOST_KEY_PREFIX) + NLM_HOST_NAME_MAX];
    uint8_t rec[NLM_HOST_REC_LEN];
    int kl = nlm_host_key(caller, key, sizeof(key));
    if (kl < 0)
        return kl;
    int rl = nlm_host_rec_encode(&r->peer, 0, rec);
    if (rl < 0)
        return rl;
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    struct nlm_host **slot = host_slot(h, caller);
    struct nlm_host *x = *slot;
    if (x && nlm_addr_same(&x->addr, &r->peer) && x->tries == 0 &&
        x->notify != NLM_HN_UNREACHED) {
        x->refs++;
        x->idle_since_us = 0;
        goto out;
    }
    /* New host, one that moved, or one we could not notify that calls again
     * (an ordinary host from now on): write its record before any lock is
     * granted. */
    rc = meta_record_put(core_meta(s->core), META_REC_CONFIG, key, (size_t)kl, rec, (size_t)rl, 0);
    if (rc < 0) {
        srv_log(WARN, NFS, "req=%08x tenant=- cannot remember NLM host %s: %s", r->call.xid,
                caller, srv_strerror(rc));
        goto out;
    }
    if (x) {
        addr_norm(&r->peer, &x->addr);
        x->tries = 0;
        if (x->notify == NLM_HN_UNREACHED)
            x->notify = NLM_HN_NONE;
    } else if (!(x = host_add(h, slot, caller, &r->peer, NLM_HN_NONE))) {
        meta_record_del(core_meta(s->core), META_REC_CONFIG, key, (size_t)kl);
        rc = -ENOMEM;
        goto out;
    }
    x->refs++;
    x->idle_since_us = 0;
    srv_log(INFO, NFS, "req=%08x tenant=- NLM host %s (%s) remembered", r->call.xid, caller,
            r->conn_peer);
out:
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void nlm_host_unhold(struct nfs_server *s, const char *caller, bool check)
{
    struct nlm_hosts *h = s->hosts;
    pthread_mutex_lock(&h->mu);
    struct nlm_host *x = *host_slot(h, caller);
    if (x && x->refs > 0)
        x->refs--;
    pthread_mutex_unlock(&h->mu);
    if (check)
        host_maybe_drop(s, caller, DROP_LINGER, "holds no lock", NULL, NULL, 0);
}

void nlm_host_check(struct nfs_server *s, const char *caller)
{
    host_maybe_drop(s, caller, DROP_LINGER, "holds no lock", NULL, NULL, 0);
}

void nlm_host_idle_mark(struct nfs_server *s, const char *caller)
{
    host_maybe_drop(s, caller, DROP_MARK, NULL, NULL, NULL, 0);
}

void nlm_host_reclaimed(struct nfs_server *s)
{
    pthread_mutex_lock(&s->hosts->mu);
    s->hosts->reclaims++;
    pthread_mutex_unlock(&s->hosts->mu);
}

void nlm_host_release(struct nfs_req *r, const char *caller, const char *proc)
{
    struct nfs_server *s = r->srv;
    uint8_t from[NFS_LOCK_FROM_LEN];
    char where[INET6_ADDRSTRLEN + 1] = "", peer[INET6_ADDRSTRLEN + 1];
    size_t kept = 0;
    nlm_addr_key(&r->peer, from);
    nlm_addr_text(&r->peer, peer, sizeof(peer));
    size_t n = nfs_locks_free_host(s->locks, caller, strlen(caller), from, &kept);
    size_t waiting = nlm_block_forget_host(s, caller, &r->peer);
    nlm_block_retry(s);
    int rc = host_maybe_drop(s, caller, DROP_FORCE, "its locks were freed", &r->peer, where,
                             sizeof(where));
    if (kept || waiting || rc < 0)
        srv_log(WARN, NFS, "req=%08x tenant=- NLM %s for %s from %s refused for what that host "
                "holds from other addresses (only the address a host locked from may free its "
                "locks): %zu locks released; %zu locks and %zu blocked requests kept%s%s",
                r->call.xid, proc, caller, peer, n, kept, waiting,
                rc < 0 ? "; host remembered from " : "", rc < 0 ? where : "");
    else
        srv_log(INFO, NFS, "req=%08x tenant=- NLM %s for %s from %s: %zu locks released",
                r->call.xid, proc, caller, peer, n);
}

/* ---- the tick: lingering hosts, end of the grace period ---- */

/* Names of the hosts to look at (under mu): notified ones once the grace
 * period is over (@p grace_over), and those idle for the linger time. */
static char **sweep_names(struct nlm_hosts *h, bool grace_over, uint64_t now, size_t *n)
{
    char **names = h->count ? calloc(h->count, sizeof(*names)) : NULL;
    *n = 0;
    for (size_t i = 0; names && i < NBUCKETS; i++)
        for (struct nlm_host *x = h->b[i]; x && *n < h->count; x = x->next) {
            bool due = (grace_over && x->notify == NLM_HN_DELIVERED) ||
                       (x->idle_since_us &&
                        now - x->idle_since_us >= NLM_HOST_LINGER_S * 1000000ull);
            if (due && (names[*n] = strdup(x->name)))
                (*n)++;
        }
    return names;
}

/* Worker: drop the notified hosts that reclaimed nothing (after the grace
 * period) and the hosts idle for the linger time. */
static void sweep_work(void *arg)
{
    struct nfs_server *s = arg;
    struct nlm_hosts *h = s->hosts;
    size_t n;
    pthread_mutex_lock(&h->mu);
    bool grace_over = h->grace_over;
    char **names = sweep_names(h, grace_over, now_us(), &n);
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&h->mu);
        struct nlm_host *x = *host_slot(h, names[i]);
        bool delivered = x && x->notify == NLM_HN_DELIVERED && grace_over;
        if (delivered)
            x->notify = NLM_HN_NONE; /* from now on an ordinary host */
        pthread_mutex_unlock(&h->mu);
        if (delivered)
            host_maybe_drop(s, names[i], DROP_NOW, "notified, reclaimed nothing", NULL, NULL,
                            0);
        else
            host_maybe_drop(s, names[i], DROP_LINGER, "holds no lock", NULL, NULL, 0);
        free(names[i]);
    }
    free(names);
}

static void sweep_done(void *arg)
{
    struct nfs_server *s = arg;
    pthread_mutex_lock(&s->hosts->mu);
    s->hosts->sweeping = false;
    pthread_mutex_unlock(&s->hosts->mu);
    nfs__inflight_add(s, -1);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct nfs_server *s = arg;
    struct nlm_hosts *h = s->hosts;
    (void)fd;
    (void)what;
    bool log_end = false, sweep = false;
    size_t count;
    pthread_mutex_lock(&h->mu);
    if (h->grace_end_us && !h->grace_over && !nlm_grace_active(s)) {
        h->grace_over = true;
        log_end = !h->ended_early;
        sweep = true;
    }
    uint64_t now = now_us();
    for (size_t i = 0; !sweep && i < NBUCKETS; i++)
        for (struct nlm_host *x = h->b[i]; x && !sweep; x = x->next)
            sweep = (x->idle_since_us &&
                     now - x->idle_since_us >= NLM_HOST_LINGER_S * 1000000ull) ||
                    (h->grace_over && x->notify == NLM_HN_DELIVERED);
    sweep = sweep && !h->sweeping;
    if (sweep)
        h->sweeping = true;
    count = h->count;
    pthread_mutex_unlock(&h->mu);
    if (log_end)
        srv_log(INFO, NFS, "req=- tenant=- NLM grace period over: normal locking resumes (%zu "
                "hosts remembered)", count);
    if (sweep) {
        nfs__inflight_add(s, 1);
        srv_work_submit(srv_loop_current(), sweep_work, sweep_done, s);
    }
}

/* Loop 0: start the periodic tick (counted in flight from nlm_hosts_start
 * until nlm_hosts_close_here). */
static void tick_arm(void *arg)
{
    struct nfs_server *s = arg;
    struct nlm_hosts *h = s->hosts;
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    struct timeval tv = {NLM_TICK_S, 0};
    if (!stopping)
        h->tick = event_new(srv_loop_base(srv_loop_current()), -1, EV_PERSIST, tick_cb, s);
    if (!h->tick || evtimer_add(h->tick, &tv) < 0) {
        if (h->tick)
            event_free(h->tick);
        h->tick = NULL;
        if (!stopping)
            srv_log(WARN, NFS, "req=- tenant=- NLM: no timer: idle hosts stay remembered and "
                    "the grace period ends without a log line");
        nfs__inflight_add(s, -1);
        return;
    }
    h->tick_loop = srv_loop_current();
}

void nlm_hosts_close_here(struct nfs_server *s)
{
    struct nlm_hosts *h = s->hosts;
    if (h && h->tick && h->tick_loop == srv_loop_current()) {
        event_free(h->tick);
        h->tick = NULL;
        nfs__inflight_add(s, -1);
    }
}

/* ---- SM_NOTIFY ---- */

struct notify_fail {
    struct nfs_server *s;
    char *name;
};

/* Worker: one more start at which host f->name could not be notified: store
 * the count, or give the host up after NLM_NOTIFY_TRIES. */
static void notify_fail_work(void *arg)
{
    struct notify_fail *f = arg;
    struct nfs_server *s = f->s;
    struct nlm_hosts *h = s->hosts;
    char key[sizeof(NLM_HOST_KEY_PREFIX) + NLM_HOST_NAME_MAX];
    uint8_t rec[NLM_HOST_REC_LEN];
    pthread_mutex_lock(&h->mu);
    struct nlm_host **slot = host_slot(h, f->name);
    struct nlm_host *x = *slot;
    if (x && x->notify == NLM_HN_UNREACHED && host_idle(s, x)) {
        unsigned tries = x->tries + 1;
        int kl = nlm_host_key(x->name, key, sizeof(key));
        int rc;
        if (tries >= NLM_NOTIFY_TRIES) {
            srv_log(WARN, NFS, "req=- tenant=- NLM host %s could not be notified at %u starts in "
                    "a row: given up", x->name, tries);
            host_drop(s, slot, "unreachable");
        } else if (kl > 0 && nlm_host_rec_encode(&x->addr, tries, rec) > 0 &&
                   (rc = meta_record_put(core_meta(s->core), META_REC_CONFIG, key, (size_t)kl,
                                         rec, sizeof(rec), 0)) < 0) {
            srv_log(WARN, NFS, "req=- tenant=- cannot record the failed notification of NLM "
                    "host %s: %s", x->name, srv_strerror(rc));
        } else {
            x->tries = tries;
            srv_log(INFO, NFS, "req=- tenant=- NLM host %s kept for the next start (not "
                    "notified at %u of at most %d starts)", x->name, tries, NLM_NOTIFY_TRIES);
        }
    }
    pthread_mutex_unlock(&h->mu);
}

static void notify_fail_done(void *arg)
{
    struct notify_fail *f = arg;
    struct nfs_server *s = f->s;
    free(f->name);
    free(f);
    nfs__inflight_add(s, -1);
}

/* Loop: one SM_NOTIFY done. */
static void notify_done(struct nfs_server *s, void *arg, const char *why, const char *mon_name)
{
    struct nlm_hosts *h = s->hosts;
    char *name = arg, addr[INET6_ADDRSTRLEN];
    pthread_mutex_lock(&h->mu);
    struct nlm_host *x = *host_slot(h, name);
    if (x && x->notify == NLM_HN_PENDING)
        x->notify = why ? NLM_HN_UNREACHED : NLM_HN_DELIVERED;
    if (x)
        nlm_addr_text(&x->addr, addr, sizeof(addr));
    else
        snprintf(addr, sizeof(addr), "-");
    h->notifying--;
    if (!why)
        h->delivered++;
    /* Every notification failed and nobody reclaimed: no client knows of the
     * restart, so none will reclaim; waiting out the grace period would only
     * delay the others. */
    bool early = h->notifying == 0 && h->delivered == 0 && h->reclaims == 0 &&
                 !h->ended_early && nlm_grace_active(s);
    if (early) {
        h->ended_early = true;
        __atomic_store_n(&h->grace_end_us, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&h->mu);
    if (why)
        srv_log(WARN, NFS, "req=- tenant=- SM_NOTIFY to NLM host %s at %s not delivered (%s): "
                "its locks are lost unless it reclaims them on its own", name, addr, why);
    else
        srv_log(INFO, NFS, "req=- tenant=- SM_NOTIFY delivered to NLM host %s at %s (mon_name "
                "%s, state %d): it may reclaim its locks", name, addr, mon_name, s->nsm_state);
    if (early)
        srv_log(INFO, NFS, "req=- tenant=- NLM grace period ended early: no remembered host "
                "could be notified, so none will reclaim; normal locking resumes");
    struct notify_fail *f = why ? malloc(sizeof(*f)) : NULL;
    if (f) {
        f->s = s;
        f->name = name;
        nfs__inflight_add(s, 1);
        srv_work_submit(srv_loop_current(), notify_fail_work, notify_fail_done, f);
        return;
    }
    free(name);
}

void nlm_hosts_start(struct nfs_server *s)
{
    struct nlm_hosts *h = s->hosts;
    struct target {
        char *name;
        struct sockaddr_storage addr;
    } *t = NULL;
    size_t n = 0;
    nfs__inflight_add(s, 1);
    if (srv_loop_call(srv_loop_get(0), tick_arm, s) < 0)
        nfs__inflight_add(s, -1);
    pthread_mutex_lock(&h->mu);
    if (h->count == 0) {
        pthread_mutex_unlock(&h->mu);
        srv_log(INFO, NFS, "req=- tenant=- NLM: no client held locks before this start: no "
                "grace period, NSM state %d", s->nsm_state);
        return;
    }
    t = calloc(h->count, sizeof(*t));
    for (size_t i = 0; t && i < NBUCKETS; i++)
        for (struct nlm_host *x = h->b[i]; x; x = x->next)
            if ((t[n].name = strdup(x->name))) {
                t[n].addr = x->addr;
                n++;
            }
    if (h->grace_s > 0)
        __atomic_store_n(&h->grace_end_us, now_us() + (uint64_t)h->grace_s * 1000000u,
                         __ATOMIC_RELEASE);
    else
        h->grace_over = true; /* notified hosts that hold nothing go at once */
    h->notifying = (unsigned)n;
    size_t count = h->count;
    pthread_mutex_unlock(&h->mu);
    srv_log(INFO, NFS, "req=- tenant=- NLM: %zu client hosts held locks before this start: grace "
            "period of %d s (only reclaims are granted), SM_NOTIFY with NSM state %d sent to each",
            count, h->grace_s, s->nsm_state);
    for (size_t i = 0; i < n; i++) {
        if (nlm_notify_send(s, &t[i].addr, s->nsm_state, notify_done, t[i].name) < 0) {
            srv_log(WARN, NFS, "req=- tenant=- SM_NOTIFY to NLM host %s not sent (out of "
                    "memory): kept for the next start", t[i].name);
            pthread_mutex_lock(&h->mu);
            struct nlm_host *x = *host_slot(h, t[i].name);
            if (x && x->notify == NLM_HN_PENDING)
                x->notify = NLM_HN_UNREACHED;
            h->notifying--;
            pthread_mutex_unlock(&h->mu);
            free(t[i].name);
        }
    }
    free(t);
}
