/* SPDX-License-Identifier: Apache-2.0
 * srv_loop: N libevent loop threads and one worker pool.
 *
 * Each loop owns an event_base (libevent threading enabled with
 * evthread_use_pthreads() before any base exists, so event_active() from
 * another thread is safe and wakes the base). Cross-thread calls go through a
 * per-loop locked FIFO of {fn, arg} nodes plus one internal "wake" event that
 * the poster activates; the loop thread swaps the whole FIFO out under the
 * lock and runs it in order.
 *
 * The worker pool is one locked FIFO with a condition variable. A work item
 * carries its own call node for the done callback, so posting done back to
 * the loop cannot fail once srv_work_submit() returned: done runs exactly once.
 * Every loop counts the work it submitted that has not finished its done
 * callback ("inflight"); srv_loops_stop() lets each loop run until its
 * inflight count is zero and no event is pending (or a drain deadline
 * passes), then joins loops and workers.
 *
 * Thread: srv_loops_start/stop from the main thread; the rest from any thread. */
#include "srv_loop.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "srv_log.h"
#include "srv_metrics.h"

#include <event2/buffer.h>

#define LOOP_DRAIN_TICK_MS 50

struct loop_call {
    struct loop_call *next;
    void (*fn)(void *arg);
    void *arg;
};

struct srv_loop {
    int idx;
    struct event_base *base;
    struct event *wake;
    struct event *tick; /* drain phase only: wakes the loop to re-check its state */
    pthread_t thread;
    bool started;
    int cpu;               /* pinned to this CPU, or -1 */
    atomic_ulong accepted; /* connections given to this loop by srv_loop_for_fd */
    atomic_long conns;     /* of those, still open (srv_loop_conn_gone) */
    pthread_mutex_t lock;
    struct loop_call *head, *tail;
    atomic_long inflight;
    atomic_bool stopping;
};

struct work_item {
    struct work_item *next;
    struct srv_loop *loop;
    srv_work_fn work, done;
    void *arg;
    struct loop_call done_call; /* posted back to the loop after work() */
};

static struct {
    struct srv_loop *loops;
    int nloops;
    atomic_uint rr;
    bool affinity;
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t wlock;
    pthread_cond_t wcond;
    struct work_item *whead, *wtail;
    size_t wqueued;  /* items in the FIFO */
    size_t wbusy;    /* workers running an item */
    bool wstop;
    int drain_ms;
} pool = {
    .wlock = PTHREAD_MUTEX_INITIALIZER,
    .wcond = PTHREAD_COND_INITIALIZER,
    .drain_ms = 10000,
};

static __thread struct srv_loop *current_loop;

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (!p) {
        srv_log(CRIT, SRV, "out of memory (%zu bytes)", n * sz);
        abort();
    }
    return p;
}

int srv_loops_count(void)
{
    return pool.nloops;
}

struct srv_loop *srv_loop_get(int i)
{
    if (i < 0 || i >= pool.nloops)
        return NULL;
    return &pool.loops[i];
}

struct srv_loop *srv_loop_next(void)
{
    if (pool.nloops == 0)
        return NULL;
    unsigned i = atomic_fetch_add(&pool.rr, 1);
    return &pool.loops[i % (unsigned)pool.nloops];
}

void srv_loops_set_affinity(bool on)
{
    pool.affinity = on;
}

long srv_loop_conns(const struct srv_loop *l)
{
    return l ? atomic_load(&((struct srv_loop *)l)->conns) : 0;
}

int srv_loop_cpu(const struct srv_loop *l)
{
    return l ? l->cpu : -1;
}

bool srv_loop_poll_input(struct srv_loop *l, int fd, uint64_t end, uint64_t step_us,
                         uint64_t yield_us)
{
    struct event_base *base = srv_loop_base(l);
    uint64_t now = srv_now_us(), next = now;
    for (;;) {
        if (now >= next) {
            if (event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE) > 0)
                return false;
            char b;
            ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0)
                return true;
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                return false;
            next = now + step_us;
        }
        if (now >= end)
            return false;
        uint64_t before = now;
        if (yield_us) {
            sched_yield();
        } else {
#if defined(__x86_64__) || defined(__i386__)
            __asm__ __volatile__("pause"); /* a spinning thread's hint to its core */
#endif
        }
        now = srv_now_us();
        if (yield_us && now - before > yield_us)
            return false;
    }
}

/* With affinity, a connection goes to the loop of its CPU unless that loop
 * holds this many open connections more than the least busy loop: packets
 * that all arrive on one CPU (one receive queue) still spread over the loops
 * once there are several connections. */
#define LOOP_AFFINITY_SLACK 4

struct srv_loop *srv_loop_for_fd(int fd)
{
    struct srv_loop *pick = NULL;
#ifdef SO_INCOMING_CPU
    int cpu = -1;
    socklen_t len = sizeof(cpu);
    if (pool.affinity && pool.nloops > 0 &&
        getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) == 0 && cpu >= 0) {
        struct srv_loop *least = NULL;
        for (int i = 0; i < pool.nloops; i++) {
            struct srv_loop *l = &pool.loops[i];
            long n = atomic_load(&l->conns);
            if (l->cpu == cpu && (!pick || n < atomic_load(&pick->conns)))
                pick = l;
            if (!least || n < atomic_load(&least->conns))
                least = l;
        }
        if (pick && atomic_load(&pick->conns) >= atomic_load(&least->conns) + LOOP_AFFINITY_SLACK)
            pick = least;
    }
#endif
    if (!pick)
        pick = srv_loop_next();
    if (pick) {
        atomic_fetch_add(&pick->accepted, 1);
        atomic_fetch_add(&pick->conns, 1);
    }
    return pick;
}

void srv_loop_conn_gone(struct srv_loop *l)
{
    if (l)
        atomic_fetch_sub(&l->conns, 1);
}

struct event_base *srv_loop_base(struct srv_loop *l)
{
    return l ? l->base : NULL;
}

struct srv_loop *srv_loop_current(void)
{
    return current_loop;
}

void srv_loops_set_drain_timeout(int ms)
{
    pool.drain_ms = ms < 0 ? 0 : ms;
}

/* Append @p c to loop @p l's FIFO and wake the loop. */
static void loop_post(struct srv_loop *l, struct loop_call *c)
{
    c->next = NULL;
    pthread_mutex_lock(&l->lock);
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    pthread_mutex_unlock(&l->lock);
    event_active(l->wake, EV_READ, 0);
}

int srv_loop_call(struct srv_loop *l, void (*fn)(void *arg), void *arg)
{
    if (!l || !fn)
        return -EINVAL;
    struct loop_call *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->fn = fn;
    c->arg = arg;
    loop_post(l, c);
    return 0;
}

static struct work_item *item_of_call(struct loop_call *c)
{
    return (struct work_item *)((char *)c - offsetof(struct work_item, done_call));
}

/* Marker function for call nodes embedded in work items (freed with the item). */
static void run_done(void *arg)
{
    struct work_item *w = arg;
    struct srv_loop *l = w->loop;
    if (w->done)
        w->done(w->arg);
    free(w);
    if (l)
        atomic_fetch_sub(&l->inflight, 1);
}

/* Run every queued call. Called on the loop thread (or, at shutdown, by the
 * stopping thread after the loop thread has exited). */
static void loop_run_calls(struct srv_loop *l)
{
    pthread_mutex_lock(&l->lock);
    struct loop_call *c = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->lock);
    while (c) {
        struct loop_call *next = c->next;
        if (c->fn == run_done) {
            run_done(item_of_call(c));
        } else {
            c->fn(c->arg);
            free(c);
        }
        c = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    loop_run_calls(arg);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
}

static void on_stop(void *arg)
{
    struct srv_loop *l = arg;
    event_base_loopbreak(l->base);
}

static void *loop_main(void *arg)
{
    struct srv_loop *l = arg;
    current_loop = l;
    char name[16];
    snprintf(name, sizeof(name), "loop%d", l->idx);
    pthread_setname_np(pthread_self(), name);

    event_base_loop(l->base, EVLOOP_NO_EXIT_ON_EMPTY);

    /* Drain: keep serving until no work is in flight and no event other than
     * our tick is pending (the front ends have closed their listeners and
     * connections), or the deadline passes. */
    struct timeval tv = {0, LOOP_DRAIN_TICK_MS * 1000};
    event_add(l->tick, &tv);
    int64_t deadline = srv_now_ms() + pool.drain_ms;
    for (;;) {
        loop_run_calls(l);
        long inflight = atomic_load(&l->inflight);
        int pending = event_base_get_num_events(l->base, EVENT_BASE_COUNT_ADDED);
        if (inflight == 0 && pending <= 1)
            break;
        if (srv_now_ms() >= deadline) {
            srv_log(WARN, SRV,
                    "loop %d: drain deadline passed (%ld work items in flight, %d events)",
                    l->idx, inflight, pending - 1);
            break;
        }
        event_base_loop(l->base, EVLOOP_ONCE);
    }
    event_del(l->tick);
    current_loop = NULL;
    return NULL;
}

static void *worker_main(void *arg)
{
    for (;;) {
        pthread_mutex_lock(&pool.wlock);
        while (!pool.whead && !pool.wstop)
            pthread_cond_wait(&pool.wcond, &pool.wlock);
        struct work_item *w = pool.whead;
        if (!w) {
            pthread_mutex_unlock(&pool.wlock);
            break;
        }
        pool.whead = w->next;
        if (!pool.whead)
            pool.wtail = NULL;
        pool.wqueued--;
        pool.wbusy++;
        pthread_mutex_unlock(&pool.wlock);

        if (w->work)
            w->work(w->arg);
        pthread_mutex_lock(&pool.wlock);
        pool.wbusy--;
        pthread_mutex_unlock(&pool.wlock);
        if (w->loop) {
            w->done_call.fn = run_done;
            w->done_call.arg = w;
            loop_post(w->loop, &w->done_call);
        } else {
            run_done(w);
        }
    }
    return NULL;
}

void srv_work_submit(struct srv_loop *l, srv_work_fn work, srv_work_fn done, void *arg)
{
    struct work_item *w = xcalloc(1, sizeof(*w));
    w->loop = l;
    w->work = work;
    w->done = done;
    w->arg = arg;
    if (l)
        atomic_fetch_add(&l->inflight, 1);

    if (pool.nworkers == 0) {
        /* No pool (unit tests or a failed start): run inline; done still goes
         * through the loop so it runs on the loop thread. */
        if (work)
            work(arg);
        if (l) {
            w->done_call.fn = run_done;
            w->done_call.arg = w;
            loop_post(l, &w->done_call);
        } else {
            run_done(w);
        }
        return;
    }
    pthread_mutex_lock(&pool.wlock);
    if (pool.wtail)
        pool.wtail->next = w;
    else
        pool.whead = w;
    pool.wtail = w;
    pool.wqueued++;
    pthread_cond_signal(&pool.wcond);
    pthread_mutex_unlock(&pool.wlock);
}

static void loop_fini(struct srv_loop *l)
{
    if (l->wake)
        event_free(l->wake);
    if (l->tick)
        event_free(l->tick);
    if (l->base)
        event_base_free(l->base);
    pthread_mutex_destroy(&l->lock);
}

static int threading_ready;

/* Gauges: work waiting for a worker, workers busy, and per-loop work in flight. */
static void render_pool(void *arg, struct evbuffer *out)
{
    pthread_mutex_lock(&pool.wlock);
    size_t queued = pool.wqueued, busy = pool.wbusy;
    int nworkers = pool.nworkers;
    pthread_mutex_unlock(&pool.wlock);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_work_queued Work items waiting for a worker thread.\n"
                        "# TYPE s3nfs_work_queued gauge\ns3nfs_work_queued %zu\n"
                        "# HELP s3nfs_workers_busy Worker threads running a work item.\n"
                        "# TYPE s3nfs_workers_busy gauge\ns3nfs_workers_busy %zu\n"
                        "# HELP s3nfs_workers Worker threads.\n"
                        "# TYPE s3nfs_workers gauge\ns3nfs_workers %d\n"
                        "# HELP s3nfs_loop_inflight Work submitted by a loop, done not yet run.\n"
                        "# TYPE s3nfs_loop_inflight gauge\n",
                        queued, busy, nworkers);
    for (int i = 0; i < pool.nloops; i++)
        evbuffer_add_printf(out, "s3nfs_loop_inflight{loop=\"%d\"} %ld\n", i,
                            atomic_load(&pool.loops[i].inflight));
    evbuffer_add_printf(out, "# HELP s3nfs_loop_accepted_total Connections given to a loop "
                             "(cpu: the CPU it is pinned to, -1: none).\n"
                             "# TYPE s3nfs_loop_accepted_total counter\n");
    for (int i = 0; i < pool.nloops; i++)
        evbuffer_add_printf(out, "s3nfs_loop_accepted_total{loop=\"%d\",cpu=\"%d\"} %lu\n", i,
                            pool.loops[i].cpu, atomic_load(&pool.loops[i].accepted));
    evbuffer_add_printf(out, "# HELP s3nfs_loop_conns Open connections a loop was given.\n"
                             "# TYPE s3nfs_loop_conns gauge\n");
    for (int i = 0; i < pool.nloops; i++)
        evbuffer_add_printf(out, "s3nfs_loop_conns{loop=\"%d\"} %ld\n", i,
                            atomic_load(&pool.loops[i].conns));
}

int srv_loops_start(int nloops, int nworkers)
{
    int rc = 0;

    if (nloops < 1 || nworkers < 0)
        return -EINVAL;
    if (pool.loops)
        return -EALREADY;
    if (!threading_ready) {
        if (evthread_use_pthreads() < 0)
            return -ENOMEM;
        threading_ready = 1;
    }
    pool.loops = xcalloc((size_t)nloops, sizeof(*pool.loops));
    pool.nloops = nloops;
    pool.wstop = false;
    for (int i = 0; i < nloops; i++) {
        struct srv_loop *l = &pool.loops[i];
        l->idx = i;
        l->cpu = -1;
        pthread_mutex_init(&l->lock, NULL);
        l->base = event_base_new();
        if (!l->base) {
            rc = -ENOMEM;
            goto fail;
        }
        l->wake = event_new(l->base, -1, 0, on_wake, l);
        l->tick = event_new(l->base, -1, EV_PERSIST, on_tick, l);
        if (!l->wake || !l->tick) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    /* The CPUs this process may run on, in order: loop i goes to the i-th
     * (modulo their number). */
    int cpus[CPU_SETSIZE], ncpus = 0;
    cpu_set_t allowed;
    if (pool.affinity && sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpus++] = c;
    for (int i = 0; i < nloops; i++) {
        struct srv_loop *l = &pool.loops[i];
        l->cpu = ncpus > 0 ? cpus[i % ncpus] : -1;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (l->cpu >= 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(l->cpu, &one);
            pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
        }
        int e = pthread_create(&l->thread, &attr, loop_main, l);
        pthread_attr_destroy(&attr);
        if (e) {
            rc = -e;
            goto fail;
        }
        l->started = true;
    }
    pool.workers = xcalloc((size_t)(nworkers ? nworkers : 1), sizeof(pthread_t));
    for (int i = 0; i < nworkers; i++) {
        int e = pthread_create(&pool.workers[i], NULL, worker_main, NULL);
        if (e) {
            rc = -e;
            goto fail;
        }
        pool.nworkers++;
    }
    srv_metrics_add_renderer(render_pool, NULL);
    srv_log(INFO, SRV, "started %d loop threads%s and %d workers", nloops,
            ncpus > 0 ? " (pinned to CPUs)" : "", nworkers);
    return 0;
fail:
    srv_log(ERROR, SRV, "cannot start loops: %s", strerror(-rc));
    srv_loops_stop();
    return rc;
}

void srv_loops_stop(void)
{
    if (!pool.loops)
        return;
    srv_metrics_remove_renderer(render_pool, NULL);
    for (int i = 0; i < pool.nloops; i++) {
        struct srv_loop *l = &pool.loops[i];
        if (!l->started)
            continue;
        atomic_store(&l->stopping, true);
        struct loop_call *c = xcalloc(1, sizeof(*c));
        c->fn = on_stop;
        c->arg = l;
        loop_post(l, c);
    }
    for (int i = 0; i < pool.nloops; i++)
        if (pool.loops[i].started)
            pthread_join(pool.loops[i].thread, NULL);

    pthread_mutex_lock(&pool.wlock);
    pool.wstop = true;
    pthread_cond_broadcast(&pool.wcond);
    pthread_mutex_unlock(&pool.wlock);
    for (int i = 0; i < pool.nworkers; i++)
        pthread_join(pool.workers[i], NULL);
    free(pool.workers);
    pool.workers = NULL;
    pool.nworkers = 0;

    /* Work that finished after its loop stopped still gets its done callback,
     * here on the stopping thread, so every done runs exactly once. */
    for (int i = 0; i < pool.nloops; i++) {
        loop_run_calls(&pool.loops[i]);
        loop_fini(&pool.loops[i]);
    }
    free(pool.loops);
    pool.loops = NULL;
    pool.nloops = 0;
}

ssize_t srv_read_into(struct evbuffer *in, int fd, size_t max)
{
    evbuffer_unfreeze(in, 0);
    struct evbuffer_iovec v[2];
    int nv = evbuffer_reserve_space(in, (ev_ssize_t)max, v, 2);
    if (nv < 1) {
        evbuffer_freeze(in, 0);
        errno = ENOMEM;
        return -1;
    }
    struct iovec iov[2];
    for (int i = 0; i < nv; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    ssize_t n;
    do {
        n = readv(fd, iov, nv);
    } while (n < 0 && errno == EINTR);
    int err = errno;
    size_t left = n > 0 ? (size_t)n : 0;
    int used = 0;
    for (int i = 0; i < nv && left > 0; i++, used++) {
        v[i].iov_len = left < v[i].iov_len ? left : v[i].iov_len;
        left -= v[i].iov_len;
    }
    evbuffer_commit_space(in, v, used);
    evbuffer_freeze(in, 0);
    errno = err;
    return n;
}

/* The per-thread buffers srv_thread_buf handed out, and the functions
 * srv_thread_at_exit registered, freed or run when their thread exits (a loop
 * thread at shutdown). The slots are the callers' __thread pointers, still
 * valid while the thread's key destructors run, as are the __thread objects
 * the functions free. */
#define THREAD_BUFS_MAX 4
#define THREAD_FNS_MAX 4
struct thread_bufs {
    uint8_t **slot[THREAD_BUFS_MAX];
    int n;
    void (*fn[THREAD_FNS_MAX])(void);
    int nfn;
};
static pthread_key_t thread_bufs_key;
static pthread_once_t thread_bufs_once = PTHREAD_ONCE_INIT;
static bool thread_bufs_ok;

static void thread_bufs_free(void *arg)
{
    struct thread_bufs *tb = arg;
    for (int i = 0; i < tb->n; i++) {
        free(*tb->slot[i]);
        *tb->slot[i] = NULL;
    }
    for (int i = 0; i < tb->nfn; i++)
        tb->fn[i]();
    free(tb);
}

static void thread_bufs_init(void)
{
    thread_bufs_ok = pthread_key_create(&thread_bufs_key, thread_bufs_free) == 0;
}

/* The calling thread's record, made on first use. @return NULL without memory. */
static struct thread_bufs *thread_bufs_get(void)
{
    pthread_once(&thread_bufs_once, thread_bufs_init);
    if (!thread_bufs_ok)
        return NULL;
    struct thread_bufs *tb = pthread_getspecific(thread_bufs_key);
    if (!tb) {
        if (!(tb = calloc(1, sizeof(*tb))))
            return NULL;
        if (pthread_setspecific(thread_bufs_key, tb) != 0) {
            free(tb);
            return NULL;
        }
    }
    return tb;
}

uint8_t *srv_thread_buf(uint8_t **slot, size_t size)
{
    if (*slot)
        return *slot;
    struct thread_bufs *tb = thread_bufs_get();
    if (!tb || tb->n == THREAD_BUFS_MAX || !(*slot = malloc(size)))
        return NULL;
    tb->slot[tb->n++] = slot;
    return *slot;
}

int srv_thread_at_exit(void (*fn)(void))
{
    struct thread_bufs *tb = thread_bufs_get();
    if (!tb || tb->nfn == THREAD_FNS_MAX)
        return -ENOMEM;
    tb->fn[tb->nfn++] = fn;
    return 0;
}

ssize_t srv_read_scratch(int fd, uint8_t **scratch, size_t max)
{
    if (!srv_thread_buf(scratch, max)) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n;
    do {
        n = read(fd, *scratch, max);
    } while (n < 0 && errno == EINTR);
    return n;
}
