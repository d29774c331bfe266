/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_loop.c: srv_loop_call runs on the loop thread,
 * work runs on a worker and its done callback on the submitting loop, exactly
 * once, and srv_loops_stop drains in-flight work. No timing assertions:
 * completion is awaited with a condition variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdbool.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "srv_loop.h"
#include "srv_metrics.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

struct job {
    struct srv_loop *loop;
    pthread_t work_thread;
    bool work_on_loop;
    bool done_on_right_loop;
    int work_runs, done_runs;
};

static int finished;

static void call_fn(void *arg)
{
    struct srv_loop **seen = arg;
    pthread_mutex_lock(&mu);
    *seen = srv_loop_current();
    finished++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_for(int n)
{
    pthread_mutex_lock(&mu);
    while (finished < n)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void test_loop_call(void **state)
{
    (void)state;
    assert_int_equal(srv_loops_start(2, 2), 0);
    assert_int_equal(srv_loops_count(), 2);
    assert_non_null(srv_loop_base(srv_loop_get(0)));
    assert_null(srv_loop_get(2));
    assert_null(srv_loop_current());
    struct srv_loop *seen[2] = {NULL, NULL};
    finished = 0;
    assert_int_equal(srv_loop_call(srv_loop_get(0), call_fn, &seen[0]), 0);
    assert_int_equal(srv_loop_call(srv_loop_get(1), call_fn, &seen[1]), 0);
    wait_for(2);
    assert_ptr_equal(seen[0], srv_loop_get(0));
    assert_ptr_equal(seen[1], srv_loop_get(1));
    assert_int_equal(srv_loop_call(NULL, call_fn, NULL), -EINVAL);
    struct evbuffer *m = evbuffer_new();
    srv_metrics_render(m);
    evbuffer_add(m, "", 1);
    const char *text = (const char *)evbuffer_pullup(m, -1);
    assert_non_null(strstr(text, "\ns3nfs_workers 2\n"));
    assert_non_null(strstr(text, "s3nfs_loop_inflight{loop=\"1\"} 0\n"));
    evbuffer_free(m);
    srv_loops_stop();
    m = evbuffer_new();
    srv_metrics_render(m);
    evbuffer_add(m, "", 1);
    assert_null(strstr((const char *)evbuffer_pullup(m, -1), "s3nfs_workers"));
    evbuffer_free(m);
    assert_int_equal(srv_loops_count(), 0);
}

static void work_fn(void *arg)
{
    struct job *j = arg;
    j->work_thread = pthread_self();
    j->work_on_loop = srv_loop_current() != NULL;
    j->work_runs++;
}

static void done_fn(void *arg)
{
    struct job *j = arg;
    pthread_mutex_lock(&mu);
    j->done_on_right_loop = srv_loop_current() == j->loop;
    j->done_runs++;
    finished++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

struct submit_arg {
    struct job *jobs;
    int n;
};

/* Submitting from the loop thread, as front ends do. */
static void submit_from_loop(void *arg)
{
    struct submit_arg *sa = arg;
    for (int i = 0; i < sa->n; i++) {
        sa->jobs[i].loop = srv_loop_current();
        srv_work_submit(sa->jobs[i].loop, work_fn, done_fn, &sa->jobs[i]);
    }
}

static void test_work_roundtrip(void **state)
{
    (void)state;
    enum { N = 200 };
    static struct job jobs[N];
    memset(jobs, 0, sizeof(jobs));
    assert_int_equal(srv_loops_start(2, 3), 0);
    finished = 0;
    struct submit_arg a = {jobs, N / 2}, b = {jobs + N / 2, N / 2};
    assert_int_equal(srv_loop_call(srv_loop_get(0), submit_from_loop, &a), 0);
    assert_int_equal(srv_loop_call(srv_loop_get(1), submit_from_loop, &b), 0);
    wait_for(N);
    srv_loops_stop();
    for (int i = 0; i < N; i++) {
        assert_int_equal(jobs[i].work_runs, 1);
        assert_int_equal(jobs[i].done_runs, 1);
        assert_false(jobs[i].work_on_loop);
        assert_true(jobs[i].done_on_right_loop);
    }
}

static void test_stop_drains(void **state)
{
    (void)state;
    enum { N = 50 };
    static struct job jobs[N];
    memset(jobs, 0, sizeof(jobs));
    assert_int_equal(srv_loops_start(1, 1), 0);
    finished = 0;
    struct submit_arg a = {jobs, N};
    assert_int_equal(srv_loop_call(srv_loop_get(0), submit_from_loop, &a), 0);
    /* Stop without waiting: every submitted job must still complete once. */
    srv_loops_stop();
    for (int i = 0; i < N; i++) {
        if (jobs[i].loop == NULL)
            continue; /* submit call itself may have run during stop; all or none */
        assert_int_equal(jobs[i].work_runs, 1);
        assert_int_equal(jobs[i].done_runs, 1);
    }
    assert_int_equal(finished, jobs[0].loop ? N : 0);
}

static void test_bad_args(void **state)
{
    (void)state;
    assert_int_equal(srv_loops_start(0, 1), -EINVAL);
    assert_null(srv_loop_next());
}

/* The CPU mask of the calling loop thread, as the thread sees it. */
struct mask_seen {
    cpu_set_t set;
    int rc;
};

static void mask_fn(void *arg)
{
    struct mask_seen *m = arg;
    pthread_mutex_lock(&mu);
    m->rc = sched_getaffinity(0, sizeof(m->set), &m->set);
    finished++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* A TCP loopback connection whose accepted end received a byte sent by this
 * thread; @return the accepted end, whose SO_INCOMING_CPU is this thread's CPU. */
static int accepted_conn(int *client)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    assert_int_equal(write(*client, "x", 1), 1);
    char c;
    assert_int_equal(read(fd, &c, 1), 1);
    close(lfd);
    return fd;
}

/* loop_cpu_affinity: loop i is pinned to the i-th allowed CPU, a connection
 * goes to the loop of the CPU its packets came in on, and a loop holding 4
 * open connections more than another gives the next one away. */
static void test_affinity(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    finished = 0;
    srv_loops_set_affinity(true);
    assert_int_equal(srv_loops_start(3, 1), 0);
    struct mask_seen seen[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(srv_loop_cpu(srv_loop_get(i)), cpus[i % n]);
        assert_int_equal(srv_loop_call(srv_loop_get(i), mask_fn, &seen[i]), 0);
    }
    wait_for(3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(seen[i].rc, 0);
        assert_int_equal(CPU_COUNT(&seen[i].set), 1);
        assert_true(CPU_ISSET(cpus[i % n], &seen[i].set));
    }
    if (n >= 2) {
        /* send from the last allowed CPU: loop n-1 is the only loop there
         * (3 loops: with n == 2, loop 1) */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[n - 1], &one);
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        int client, fd = accepted_conn(&client);
        assert_int_equal(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
        int in_cpu = -1;
        socklen_t len = sizeof(in_cpu);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &in_cpu, &len), 0);
        assert_int_equal(in_cpu, cpus[n - 1]);
        struct srv_loop *want = srv_loop_get(n - 1);
        for (int i = 0; i < 4; i++)
            assert_ptr_equal(srv_loop_for_fd(fd), want);
        /* 4 open there, none elsewhere: the next goes to a least busy loop */
        struct srv_loop *other = srv_loop_for_fd(fd);
        assert_ptr_not_equal(other, want);
        srv_loop_conn_gone(other);
        for (int i = 0; i < 4; i++)
            srv_loop_conn_gone(want);
        assert_ptr_equal(srv_loop_for_fd(fd), want);
        srv_loop_conn_gone(want);
        close(fd);
        close(client);
    }
    srv_loops_stop();
    srv_loops_set_affinity(false);

    /* without affinity: no pinning, round-robin */
    finished = 0;
    assert_int_equal(srv_loops_start(2, 1), 0);
    assert_int_equal(srv_loop_cpu(srv_loop_get(0)), -1);
    assert_int_equal(srv_loop_call(srv_loop_get(0), mask_fn, &seen[0]), 0);
    wait_for(1);
    assert_int_equal(CPU_COUNT(&seen[0].set), n);
    struct srv_loop *a = srv_loop_for_fd(-1), *b = srv_loop_for_fd(-1);
    assert_ptr_not_equal(a, b);
    srv_loop_conn_gone(a);
    srv_loop_conn_gone(b);
    srv_loops_stop();
}

/* srv_thread_buf: one buffer per slot and thread, the same at every call, freed
 * (and its slot cleared) when the thread exits. The slots here are plain globals
 * so that the test can look at them after the thread is gone. */
static uint8_t *tb_a, *tb_b;
static void *thread_buf_main(void *arg)
{
    (void)arg;
    uint8_t *a = srv_thread_buf(&tb_a, 4096);
    uint8_t *b = srv_thread_buf(&tb_b, 64);
    if (!a || !b || a == b || srv_thread_buf(&tb_a, 4096) != a)
        return (void *)1;
    memset(a, 0x5a, 4096);
    memset(b, 0xa5, 64);
    return NULL;
}

static void test_thread_buf_freed_at_exit(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        pthread_t t;
        void *ret = (void *)2;
        assert_int_equal(pthread_create(&t, NULL, thread_buf_main, NULL), 0);
        assert_int_equal(pthread_join(t, &ret), 0);
        assert_null(ret);
        assert_null(tb_a); /* freed by the thread's exit (LeakSanitizer checks the free) */
        assert_null(tb_b);
    }
}

/* srv_thread_at_exit: each registered function runs once, on the exiting
 * thread (it frees that thread's object: a __thread pointer here), after
 * the thread's srv_thread_buf buffers; a fifth registration is refused. */
static __thread void *ae_obj;
static atomic_int ae_runs;
static void *ae_seen; /* the object ae_free found on the exiting thread */
static void ae_free(void)
{
    ae_seen = ae_obj;
    free(ae_obj);
    ae_obj = NULL;
    atomic_fetch_add(&ae_runs, 1);
}
static void ae_count(void)
{
    atomic_fetch_add(&ae_runs, 1);
}
static void *at_exit_main(void *arg)
{
    (void)arg;
    if (!(ae_obj = malloc(32)))
        return (void *)1;
    if (srv_thread_at_exit(ae_free) != 0)
        return (void *)2;
    for (int i = 0; i < 3; i++)
        if (srv_thread_at_exit(ae_count) != 0)
            return (void *)3;
    if (srv_thread_at_exit(ae_count) != -ENOMEM)
        return (void *)4;
    return ae_obj;
}

static void test_thread_at_exit(void **state)
{
    (void)state;
    atomic_store(&ae_runs, 0);
    pthread_t t;
    void *ret = NULL;
    assert_int_equal(pthread_create(&t, NULL, at_exit_main, NULL), 0);
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_true((uintptr_t)ret > 4);
    assert_ptr_equal(ae_seen, ret); /* freed there (LeakSanitizer checks the free) */
    assert_int_equal(atomic_load(&ae_runs), 4);
    assert_null(ae_obj); /* this thread's own slot was never set */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_call),      cmocka_unit_test(test_work_roundtrip),
        cmocka_unit_test(test_stop_drains),    cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_affinity),       cmocka_unit_test(test_thread_buf_freed_at_exit),
        cmocka_unit_test(test_thread_at_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
