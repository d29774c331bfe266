/* SPDX-License-Identifier: Apache-2.0
 * nlm_grant: blocked NLM lock requests and the GRANTED callback.
 *
 * A blocking LOCK that conflicts is answered NLM4_BLOCKED and remembered
 * here. Whenever locks are released (UNLOCK, FREE_ALL, SM_NOTIFY, a refused
 * callback), the remembered requests are tried again in arrival order; one
 * that can now be granted takes its lock at once, and the client is told with
 * an NLMPROC4_GRANTED call to its lock manager: the server asks the client
 * host's portmapper (TCP port 111) for NLM v4 over TCP, then calls GRANTED
 * there. Both steps are asynchronous on an event loop (no thread waits on the
 * network) and time out after NLM_CB_TIMEOUT_S each. If the client answers
 * anything but NLM4_GRANTED (it no longer waits: the request was cancelled or
 * the process died), the lock is released again. If the client cannot be
 * reached, the lock stays granted: the client's own retry of the LOCK (Linux
 * re-polls every 30 s) is then answered NLM4_GRANTED since it already owns it.
 * CANCEL forgets a remembered request; FREE_ALL and SM_NOTIFY forget the
 * host's requests made from their own address too.
 * The same asynchronous client (portmapper GETPORT, then one call) sends
 * SM_NOTIFY to a client host's status monitor after a restart (nlm_notify_send,
 * used by nlm_host.c).
 * Thread: nlm_block_* from workers; callbacks run on a loop thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "nfs_int.h"
#include "srv_log.h"
#include "srv_loop.h"

#define NLM_WAITERS_MAX 4096
#define NLM_CB_TIMEOUT_S 5
#define NLM_PMAP_PROG 100000
#define NLM_PMAP_VERS 2
#define NLM_PMAP_GETPORT 3

struct nlm_waiter {
    struct nlm_waiter *next;
    uint32_t tenant;
    uint64_t ino;
    bool exclusive;
    int32_t svid;
    uint64_t off, len;
    char *caller;
    nlm4_netobj oh, fh, cookie;
    struct sockaddr_storage peer;
    uint8_t from[NFS_LOCK_FROM_LEN]; /* peer as a lock keeps it (nlm_addr_key) */
};

struct nlm_grants {
    pthread_mutex_t mu;
    struct nlm_waiter *head;
    unsigned count;
};

/* One call to a client in flight (loop thread only): a GRANTED callback
 * (w set) or an SM_NOTIFY (w NULL, done set). */
struct nlm_cb {
    struct nfs_server *srv;
    struct nlm_waiter *w;
    struct sockaddr_storage peer; /* the client host (port replaced) */
    uint32_t prog, vers;          /* the program asked from the portmapper */
    int32_t state;                /* SM_NOTIFY: our NSM state */
    nlm_notify_done_fn done;
    void *arg;
    char mon_name[INET6_ADDRSTRLEN];
    struct srv_loop *loop;
    struct bufferevent *bev;
    struct nfs_rec rec;
    uint32_t xid;
    int stage; /* 0: portmapper GETPORT, 1: NLM GRANTED or SM_NOTIFY */
    struct nlm_cb *prev, *next; /* s->cbs, under s->lock */
};

static uint32_t cb_xid;

/* PMAPPROC_GETPORT arguments: prog, vers, prot, port. */
static bool_t xdr_nlm_pmap(XDR *x, uint32_t *a)
{
    for (int i = 0; i < 4; i++)
        if (!xdr_u_int32_t(x, &a[i]))
            return FALSE;
    return TRUE;
}

int nlm_grants_new(struct nlm_grants **out)
{
    struct nlm_grants *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    pthread_mutex_init(&g->mu, NULL);
    *out = g;
    return 0;
}

static void waiter_free(struct nlm_waiter *w)
{
    if (!w)
        return;
    free(w->caller);
    free(w->oh.nlm4_netobj_val);
    free(w->fh.nlm4_netobj_val);
    free(w->cookie.nlm4_netobj_val);
    free(w);
}

void nlm_grants_free(struct nlm_grants *g)
{
    if (!g)
        return;
    struct nlm_waiter *w = g->head;
    while (w) {
        struct nlm_waiter *n = w->next;
        waiter_free(w);
        w = n;
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static int netobj_dup(const nlm4_netobj *in, nlm4_netobj *out)
{
    out->nlm4_netobj_len = in->nlm4_netobj_len;
    out->nlm4_netobj_val = malloc(in->nlm4_netobj_len ? in->nlm4_netobj_len : 1);
    if (!out->nlm4_netobj_val)
        return -ENOMEM;
    memcpy(out->nlm4_netobj_val, in->nlm4_netobj_val, in->nlm4_netobj_len);
    return 0;
}

static void waiter_owner(const struct nlm_waiter *w, struct nfs_lock_owner *o)
{
    o->caller = w->caller;
    o->callerlen = strlen(w->caller);
    o->svid = w->svid;
    o->oh = w->oh.nlm4_netobj_val;
    o->ohlen = w->oh.nlm4_netobj_len;
    o->from = w->from;
}

static bool waiter_same(const struct nlm_waiter *w, uint32_t tenant, uint64_t ino,
                        const struct nfs_lock_owner *o, uint64_t off, uint64_t len)
{
    return w->tenant == tenant && w->ino == ino && w->svid == o->svid && w->off == off &&
           w->len == len && strlen(w->caller) == o->callerlen &&
           memcmp(w->caller, o->caller, o->callerlen) == 0 && w->oh.nlm4_netobj_len == o->ohlen &&
           memcmp(w->oh.nlm4_netobj_val, o->oh, o->ohlen) == 0;
}

void nlm_block_add(struct nfs_req *r, const nlm4_lockargs *a, uint32_t tenant, uint64_t ino)
{
    struct nlm_grants *g = r->srv->grants;
    struct nfs_lock_owner own;
    nlm_owner(&a->alock, &own);
    struct nlm_waiter *w = calloc(1, sizeof(*w));
    if (!w || !(w->caller = strdup(own.caller)) || netobj_dup(&a->alock.oh, &w->oh) < 0 ||
        netobj_dup(&a->alock.fh, &w->fh) < 0 || netobj_dup(&a->cookie, &w->cookie) < 0) {
        waiter_free(w);
        return; /* the client's own retry still works */
    }
    w->tenant = tenant;
    w->ino = ino;
    w->exclusive = a->exclusive;
    w->svid = a->alock.svid;
    w->off = a->alock.l_offset;
    w->len = a->alock.l_len;
    w->peer = r->peer;
    nlm_addr_key(&r->peer, w->from);
    pthread_mutex_lock(&g->mu);
    struct nlm_waiter **pp = &g->head;
    for (; *pp; pp = &(*pp)->next) {
        if (waiter_same(*pp, tenant, ino, &own, w->off, w->len)) {
            /* A retransmission or re-poll: keep the first (its place in line). */
            pthread_mutex_unlock(&g->mu);
            waiter_free(w);
            return;
        }
    }
    if (g->count >= NLM_WAITERS_MAX) {
        pthread_mutex_unlock(&g->mu);
        waiter_free(w);
        return;
    }
    *pp = w;
    g->count++;
    pthread_mutex_unlock(&g->mu);
}

bool nlm_block_cancel(struct nfs_server *s, uint32_t tenant, uint64_t ino,
                      const struct nfs_lock_owner *o, uint64_t off, uint64_t len)
{
    struct nlm_grants *g = s->grants;
    struct nlm_waiter *gone = NULL;
    pthread_mutex_lock(&g->mu);
    for (struct nlm_waiter **pp = &g->head; *pp; pp = &(*pp)->next) {
        if (waiter_same(*pp, tenant, ino, o, off, len)) {
            gone = *pp;
            *pp = gone->next;
            g->count--;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
    waiter_free(gone);
    return gone != NULL;
}

size_t nlm_block_forget_host(struct nfs_server *s, const char *caller,
                             const struct sockaddr_storage *from)
{
    struct nlm_grants *g = s->grants;
    struct nlm_waiter *gone = NULL;
    size_t kept = 0;
    pthread_mutex_lock(&g->mu);
    struct nlm_waiter **pp = &g->head;
    while (*pp) {
        struct nlm_waiter *w = *pp;
        bool host = strcmp(w->caller, caller) == 0;
        if (host && from && !nlm_addr_same(&w->peer, from)) {
            kept++;
            pp = &w->next;
        } else if (host) {
            *pp = w->next;
            w->next = gone;
            gone = w;
            g->count--;
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&g->mu);
    while (gone) {
        struct nlm_waiter *n = gone->next;
        waiter_free(gone);
        gone = n;
    }
    return kept;
}

/* ---- the callback (loop thread) ---- */

static void cb_finish(struct nlm_cb *cb, const char *why)
{
    struct nfs_server *s = cb->srv;
    if (!cb->w)
        cb->done(s, cb->arg, why, cb->mon_name);
    else if (why)
        srv_log(INFO, NFS, "req=- tenant=%u NLM GRANTED callback to %s for svid %d not "
                "delivered (%s); the client's next LOCK retry finds the lock granted",
                cb->w->tenant, cb->w->caller, cb->w->svid, why);
    if (cb->bev)
        bufferevent_free(cb->bev);
    nfs_rec_fini(&cb->rec);
    pthread_mutex_lock(&s->lock);
    if (cb->prev)
        cb->prev->next = cb->next;
    else if (s->cbs == cb)
        s->cbs = cb->next;
    if (cb->next)
        cb->next->prev = cb->prev;
    pthread_mutex_unlock(&s->lock);
    waiter_free(cb->w);
    free(cb);
    nfs__inflight_add(s, -1);
}

/* Encode a call record (AUTH_NONE) into the connection's output. */
static int cb_send(struct nlm_cb *cb, uint32_t prog, uint32_t vers, uint32_t proc, xdrproc_t fn,
                   void *args)
{
    uint32_t body = (uint32_t)xdr_sizeof(fn, args);
    uint32_t hdr[11] = {0, cb->xid, CALL, 2, prog, vers, proc, AUTH_NONE, 0, AUTH_NONE, 0};
    size_t len = sizeof(hdr) + body;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    hdr[0] = 0x80000000u | (uint32_t)(len - 4);
    for (int i = 0; i < 11; i++)
        hdr[i] = htonl(hdr[i]);
    memcpy(buf, hdr, sizeof(hdr));
    XDR x;
    xdrmem_create(&x, (char *)buf + sizeof(hdr), body, XDR_ENCODE);
    bool ok = fn(&x, args, 0);
    xdr_destroy(&x);
    int rc = ok ? bufferevent_write(cb->bev, buf, len) : -EINVAL;
    free(buf);
    return rc < 0 ? -EIO : 0;
}

/* Check an accepted SUCCESS reply to our xid. @return offset of the results or -1. */
static long reply_body(const uint8_t *p, size_t len, uint32_t xid)
{
    XDR x;
    uint32_t v[5], vlen;
    long off = -1;
    xdrmem_create(&x, (char *)p, (u_int)len, XDR_DECODE);
    for (int i = 0; i < 4; i++)
        if (!xdr_u_int32_t(&x, &v[i]))
            goto out;
    if (v[0] != xid || v[1] != REPLY || v[2] != MSG_ACCEPTED || !xdr_u_int32_t(&x, &vlen) ||
        vlen > 400 || !xdr_setpos(&x, xdr_getpos(&x) + ((vlen + 3) & ~3u)) ||
        !xdr_u_int32_t(&x, &v[4]) || v[4] != SUCCESS)
        goto out;
    off = (long)xdr_getpos(&x);
out:
    xdr_destroy(&x);
    return off;
}

/* Would a connection to the client's address on our port reach this
 * server? Yes when we listen on that very address; with a wildcard listener,
 * when it is a loopback address or this connection's own local address. */
static bool cb_peer_is_us(struct nlm_cb *cb)
{
    const struct sockaddr_storage *p = &cb->peer, *l = &cb->srv->laddr;
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    bool wild = (l->ss_family == AF_INET &&
                 ((const struct sockaddr_in *)l)->sin_addr.s_addr == htonl(INADDR_ANY)) ||
                (l->ss_family == AF_INET6 &&
                 IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)l)->sin6_addr));
    if (!wild)
        return nlm_addr_same(p, l);
    if (p->ss_family == AF_INET &&
        (ntohl(((const struct sockaddr_in *)p)->sin_addr.s_addr) >> 24) == 127)
        return true;
    if (p->ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)p)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127))
            return true;
    }
    return getsockname(bufferevent_getfd(cb->bev), (struct sockaddr *)&me, &ml) == 0 &&
           nlm_addr_same(&me, p);
}

static void cb_event(struct bufferevent *bev, short what, void *arg);
static void cb_read(struct bufferevent *bev, void *arg);

static int cb_connect(struct nlm_cb *cb, uint16_t port)
{
    struct sockaddr_storage ss = cb->peer;
    socklen_t sl;
    if (ss.ss_family == AF_INET) {
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        sl = sizeof(struct sockaddr_in);
    } else {
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
        sl = sizeof(struct sockaddr_in6);
    }
    if (cb->bev)
        bufferevent_free(cb->bev);
    nfs_rec_fini(&cb->rec);
    nfs_rec_init(&cb->rec, 64 * 1024);
    cb->bev = bufferevent_socket_new(srv_loop_base(cb->loop), -1, BEV_OPT_CLOSE_ON_FREE);
    if (!cb->bev)
        return -ENOMEM;
    struct timeval tv = {NLM_CB_TIMEOUT_S, 0};
    bufferevent_set_timeouts(cb->bev, &tv, &tv);
    bufferevent_setcb(cb->bev, cb_read, NULL, cb_event, cb);
    bufferevent_enable(cb->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(cb->bev, (struct sockaddr *)&ss, (int)sl) < 0)
        return -ECONNREFUSED;
    return 0;
}

static void cb_request(struct nlm_cb *cb)
{
    struct nlm_waiter *w = cb->w;
    int rc;
    cb->xid = __atomic_add_fetch(&cb_xid, 1, __ATOMIC_RELAXED) ^ 0x4e4c4d00u;
    if (cb->stage == 0) {
        uint32_t args[4] = {cb->prog, cb->vers, IPPROTO_TCP, 0};
        rc = cb_send(cb, NLM_PMAP_PROG, NLM_PMAP_VERS, NLM_PMAP_GETPORT, NFS_XDRPROC(xdr_nlm_pmap),
                     args);
    } else if (!w) {
        /* mon_name: our address as this client reaches it (the source of this
         * connection), which is the name a Linux client's lock manager gave its
         * status monitor for us (the server's address) when it first locked. */
        struct sockaddr_storage me;
        socklen_t ml = sizeof(me);
        if (getsockname(bufferevent_getfd(cb->bev), (struct sockaddr *)&me, &ml) < 0) {
            cb_finish(cb, "no local address");
            return;
        }
        nlm_addr_text(&me, cb->mon_name, sizeof(cb->mon_name));
        stat_chge sc = {.mon_name = cb->mon_name, .state = cb->state};
        rc = cb_send(cb, NSM_PROG_NUM, NSM_VERS, SM_NOTIFY, NFS_XDRPROC(xdr_stat_chge), &sc);
    } else {
        nlm4_testargs ta = {.cookie = w->cookie, .exclusive = w->exclusive};
        ta.alock.caller_name = w->caller;
        ta.alock.fh = w->fh;
        ta.alock.oh = w->oh;
        ta.alock.svid = w->svid;
        ta.alock.l_offset = w->off;
        ta.alock.l_len = w->len;
        rc = cb_send(cb, NLM_PROG_NUM, NLM_VERS, NLMPROC4_GRANTED,
                     NFS_XDRPROC(xdr_nlm4_testargs), &ta);
    }
    if (rc < 0)
        cb_finish(cb, "cannot send");
}

static void cb_event(struct bufferevent *bev, short what, void *arg)
{
    struct nlm_cb *cb = arg;
    if (what & BEV_EVENT_CONNECTED) {
        cb_request(cb);
        return;
    }
    cb_finish(cb, what & BEV_EVENT_TIMEOUT ? "timed out" : "connection failed");
}

static void cb_read(struct bufferevent *bev, void *arg)
{
    struct nlm_cb *cb = arg;
    void *rec;
    size_t len;
    int rc = nfs_rec_take(&cb->rec, bufferevent_get_input(bev), &rec, &len);
    if (rc == 0)
        return;
    if (rc < 0) {
        cb_finish(cb, "bad reply");
        return;
    }
    long off = reply_body(rec, len, cb->xid);
    XDR x;
    if (off < 0) {
        free(rec);
        cb_finish(cb, "call refused");
        return;
    }
    xdrmem_create(&x, (char *)rec + off, (u_int)(len - (size_t)off), XDR_DECODE);
    if (cb->stage == 0) {
        uint32_t port = 0;
        bool ok = xdr_u_int32_t(&x, &port);
        xdr_destroy(&x);
        free(rec);
        if (!ok || port == 0 || port > 65535) {
            cb_finish(cb, cb->w ? "no NLM v4 over TCP registered on the client"
                                : "no NSM v1 over TCP registered on the client");
            return;
        }
        if (!cb->w && port == cb->srv->port && cb_peer_is_us(cb)) {
            /* The host's portmapper is ours (a client behind NAT, or on this
             * host): its NSM is this server, and telling ourselves would keep
             * the grace period running for nobody. */
            cb_finish(cb, "the client's portmapper names this server's own NSM (client "
                      "behind NAT or on this host)");
            return;
        }
        cb->stage = 1;
        if (cb_connect(cb, (uint16_t)port) < 0)
            cb_finish(cb, "cannot connect");
        return;
    }
    if (!cb->w) {
        xdr_destroy(&x);
        free(rec);
        cb_finish(cb, NULL); /* SM_NOTIFY has no result: delivered */
        return;
    }
    nlm4_res res;
    memset(&res, 0, sizeof(res));
    bool ok = xdr_nlm4_res(&x, &res);
    xdr_destroy(&x);
    free(rec);
    nlm4_stats st = ok ? res.stat.stat : NLM4_FAILED;
    xdr_free(NFS_XDRPROC(xdr_nlm4_res), &res);
    struct nlm_waiter *w = cb->w;
    if (st != NLM4_GRANTED) {
        /* The client no longer wants it: give it back and let others in. */
        struct nfs_lock_owner own;
        waiter_owner(w, &own);
        nfs_locks_unlock(cb->srv->locks, w->tenant, w->ino, &own, w->off, w->len);
        srv_log(INFO, NFS, "req=- tenant=%u NLM GRANTED refused by %s (svid %d, status %d): "
                "lock released", w->tenant, w->caller, w->svid, st);
        nlm_host_idle_mark(cb->srv, w->caller);
        struct nfs_server *s = cb->srv;
        cb_finish(cb, NULL);
        nlm_block_retry(s);
        return;
    }
    srv_log(DEBUG, NFS, "req=- tenant=%u NLM GRANTED delivered to %s (svid %d)", w->tenant,
            w->caller, w->svid);
    cb_finish(cb, NULL);
}

/* On a loop: start the callback of one newly granted waiter. */
static void cb_start(void *arg)
{
    struct nlm_cb *cb = arg;
    struct nfs_server *s = cb->srv;
    cb->loop = srv_loop_current();
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    if (!stopping) {
        cb->next = s->cbs;
        if (s->cbs)
            s->cbs->prev = cb;
        s->cbs = cb;
    }
    pthread_mutex_unlock(&s->lock);
    if (stopping) {
        cb_finish(cb, "server stopping");
        return;
    }
    if (cb_connect(cb, 111) < 0)
        cb_finish(cb, "cannot reach the client's portmapper");
}

void nlm_cbs_close_here(struct nfs_server *s)
{
    struct srv_loop *me = srv_loop_current();
    nlm_hosts_close_here(s);
    for (;;) {
        struct nlm_cb *victim = NULL;
        pthread_mutex_lock(&s->lock);
        for (struct nlm_cb *cb = s->cbs; cb; cb = cb->next)
            if (cb->loop == me) {
                victim = cb;
                break;
            }
        pthread_mutex_unlock(&s->lock);
        if (!victim)
            break;
        cb_finish(victim, "server stopping");
    }
}

void nlm_block_retry(struct nfs_server *s)
{
    struct nlm_grants *g = s->grants;
    struct nlm_waiter *granted = NULL, **gtail = &granted;
    pthread_mutex_lock(&g->mu);
    struct nlm_waiter **pp = &g->head;
    while (*pp) {
        struct nlm_waiter *w = *pp;
        struct nfs_lock_owner own;
        waiter_owner(w, &own);
        if (nfs_locks_lock(s->locks, w->tenant, w->ino, &own, w->exclusive, w->off, w->len,
                           NULL) == 0) {
            *pp = w->next;
            g->count--;
            w->next = NULL;
            *gtail = w;
            gtail = &w->next;
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&g->mu);
    while (granted) {
        struct nlm_waiter *w = granted;
        granted = w->next;
        w->next = NULL;
        struct nlm_cb *cb = calloc(1, sizeof(*cb));
        if (!cb) {
            waiter_free(w); /* the lock stays granted; the client's retry finds it */
            continue;
        }
        cb->srv = s;
        cb->w = w;
        cb->peer = w->peer;
        cb->prog = NLM_PROG_NUM;
        cb->vers = NLM_VERS;
        nfs__inflight_add(s, 1);
        if (srv_loop_call(srv_loop_next(), cb_start, cb) < 0) {
            waiter_free(w);
            free(cb);
            nfs__inflight_add(s, -1);
        }
    }
}

int nlm_notify_send(struct nfs_server *s, const struct sockaddr_storage *host, int32_t state,
                    nlm_notify_done_fn done, void *arg)
{
    struct nlm_cb *cb = calloc(1, sizeof(*cb));
    if (!cb)
        return -ENOMEM;
    cb->srv = s;
    cb->peer = *host;
    cb->prog = NSM_PROG_NUM;
    cb->vers = NSM_VERS;
    cb->state = state;
    cb->done = done;
    cb->arg = arg;
    nfs__inflight_add(s, 1);
    if (srv_loop_call(srv_loop_next(), cb_start, cb) < 0) {
        free(cb);
        nfs__inflight_add(s, -1);
        return -ENOMEM;
    }
    return 0;
}

size_t nlm_block_host_count(struct nfs_server *s, const char *caller)
{
    struct nlm_grants *g = s->grants;
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    for (const struct nlm_waiter *w = g->head; w; w = w->next)
        if (strcmp(w->caller, caller) == 0)
            n++;
    pthread_mutex_unlock(&g->mu);
    return n;
}
