/* SPDX-License-Identifier: Apache-2.0
 * srv_listen: listen backlog, accept back-off and the file descriptor budget
 * shared by every listener (see srv_listen.h).
 *
 * Guards live in a short list (one per listener: a handful) under a mutex;
 * libevent hands an error callback only the listener and the accept
 * callback's argument, which belongs to the front end (an evhttp listener's
 * is evhttp's own), so the guard is found by the listener's address. The
 * list is only searched when accept fails or a guard goes away.
 * Thread: see srv_listen.h. */
#include "srv_listen.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <event2/listener.h>

struct guard {
    struct guard *next;
    struct evconnlistener *lev;
    struct event *resume;
    enum srv_subsys sub;
    const char *name;
    struct srv_log_rate rate;
};

static pthread_mutex_t guards_mu = PTHREAD_MUTEX_INITIALIZER;
static struct guard *guards;
static int backlog = SRV_LISTEN_BACKLOG_DEFAULT;

/* net.core.somaxconn, or -1 when it cannot be read. */
static int somaxconn(void)
{
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

void srv_listen_set_backlog(int n)
{
    if (n < 1)
        n = SRV_LISTEN_BACKLOG_DEFAULT;
    int max = somaxconn();
    if (max > 0 && n > max) {
        srv_log(WARN, SRV, "req=- tenant=- listen_backlog %d is above the kernel's "
                "net.core.somaxconn (%d): listeners use %d (raise net.core.somaxconn for more)",
                n, max, max);
        n = max;
    }
    __atomic_store_n(&backlog, n, __ATOMIC_RELAXED);
}

int srv_listen_backlog(void)
{
    return __atomic_load_n(&backlog, __ATOMIC_RELAXED);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct guard *g = arg;
    evconnlistener_enable(g->lev);
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    struct guard *g;
    pthread_mutex_lock(&guards_mu);
    for (g = guards; g && g->lev != lev; g = g->next)
        ;
    pthread_mutex_unlock(&guards_mu);
    if (!g)
        return; /* unguarded meanwhile: nothing to pause */
    if ((int)SRV_LOG_WARN <= srv_log_levels[g->sub]) {
        char why[96] = "";
        struct rlimit rl;
        if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
            snprintf(why, sizeof(why), " (open file limit %llu)",
                     (unsigned long long)rl.rlim_cur);
        srv_log_write_limited(&g->rate, SRV_LOG_WARN, g->sub, __FILE__, __LINE__,
                              "req=- tenant=- %s listener: accept failed: %s%s; pausing it for "
                              "%d ms", g->name, strerror(err), why, SRV_LISTEN_PAUSE_MS);
    }
    evconnlistener_disable(lev);
    struct timeval tv = {0, SRV_LISTEN_PAUSE_MS * 1000};
    evtimer_add(g->resume, &tv);
}

int srv_listen_guard(struct evconnlistener *lev, struct event_base *base, enum srv_subsys sub,
                     const char *name)
{
    struct guard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->resume = evtimer_new(base, on_resume, g);
    if (!g->resume) {
        free(g);
        return -ENOMEM;
    }
    g->lev = lev;
    g->sub = sub;
    g->name = name;
    srv_log_rate_init(&g->rate);
    pthread_mutex_lock(&guards_mu);
    g->next = guards;
    guards = g;
    pthread_mutex_unlock(&guards_mu);
    evconnlistener_set_error_cb(lev, on_accept_error);
    return 0;
}

void srv_listen_unguard(struct evconnlistener *lev)
{
    struct guard *g = NULL;
    pthread_mutex_lock(&guards_mu);
    for (struct guard **pp = &guards; *pp; pp = &(*pp)->next) {
        if ((*pp)->lev == lev) {
            g = *pp;
            *pp = g->next;
            break;
        }
    }
    pthread_mutex_unlock(&guards_mu);
    if (!g)
        return;
    evconnlistener_set_error_cb(lev, NULL);
    event_free(g->resume);
    srv_log_rate_fini(&g->rate);
    free(g);
}

long srv_listen_fd_budget(long conns)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    rlim_t want = (rlim_t)(conns > 0 ? conns : 0) + SRV_LISTEN_FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want && rl.rlim_max != rl.rlim_cur) {
        struct rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            srv_log(INFO, SRV, "req=- tenant=- open file limit raised from %llu to %llu",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)raised.rlim_cur);
            rl = raised;
        }
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        srv_log(WARN, SRV, "req=- tenant=- the open file limit (%llu, hard %llu) is below the "
                "%ld connections that s3_max_conns + nfs_max_conns allow plus %d for the daemon: "
                "past about %llu connections accept fails and the listeners pause (raise "
                "LimitNOFILE / ulimit -n, or lower the caps)", (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max, conns, SRV_LISTEN_FD_RESERVE,
                rl.rlim_cur > SRV_LISTEN_FD_RESERVE
                    ? (unsigned long long)(rl.rlim_cur - SRV_LISTEN_FD_RESERVE)
                    : 0ull);
    return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}
