/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/srv_listen.c: the backlog setting, a guarded
 * listener pausing (not spinning) while accept fails with EMFILE and
 * accepting again once descriptors are free, and the file descriptor budget
 * raising the soft limit. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "srv_listen.h"
#include "srv_log.h"

#include "log_test_util.h"

static void test_backlog(void **state)
{
    (void)state;
    srv_listen_set_backlog(10);
    assert_int_equal(srv_listen_backlog(), 10);
    srv_listen_set_backlog(0);
    int def = srv_listen_backlog();
    assert_true(def >= 1 && def <= SRV_LISTEN_BACKLOG_DEFAULT);
    srv_listen_set_backlog(1000000);
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    int max = 1000000;
    if (f) {
        assert_int_equal(fscanf(f, "%d", &max), 1);
        fclose(f);
    }
    assert_int_equal(srv_listen_backlog(), max < 1000000 ? max : 1000000);
    srv_listen_set_backlog(0);
}

struct accepts {
    int n;
    int want;
    struct event_base *base;
};

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct accepts *a = arg;
    close(fd);
    if (++a->n >= a->want)
        event_base_loopbreak(a->base);
}

static void run_for(struct event_base *base, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

/* Out of descriptors: the guarded listener fails a handful of times (once per
 * pause), not in a loop; with descriptors back it accepts the waiting clients. */
static void test_guard_pauses_then_resumes(void **state)
{
    (void)state;
    enum { CLIENTS = 3 };
    char path[32];
    struct accepts acc = {0, CLIENTS, event_base_new()};
    assert_non_null(acc.base);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(lfd, srv_listen_backlog()), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
    struct evconnlistener *lev =
        evconnlistener_new(acc.base, on_accept, &acc, LEV_OPT_CLOSE_ON_FREE, -1, lfd);
    assert_non_null(lev);
    assert_int_equal(srv_listen_guard(lev, acc.base, SRV_SUB_NFS, "test"), 0);
    log_to_temp(path);

    int cl[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(connect(cl[i], (struct sockaddr *)&sin, sizeof(sin)), 0);
    }
    /* No descriptor left: the lowest free one becomes the limit. */
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int lowest = dup(0);
    assert_true(lowest >= 0);
    close(lowest);
    low = saved;
    low.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    run_for(acc.base, 350);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_int_equal(acc.n, 0);
    assert_int_equal(srv_log_open(NULL), 0);
    unsigned long long skipped;
    int lines = count_lines(slurp(path), "accept failed", &skipped);
    unsigned long long fails = (unsigned long long)lines + skipped;
    /* About one per SRV_LISTEN_PAUSE_MS; a spinning listener fails thousands of times. */
    assert_true(fails >= 1 && fails <= 20);

    run_for(acc.base, 10000); /* ends at the last accept */
    assert_int_equal(acc.n, CLIENTS);
    for (int i = 0; i < CLIENTS; i++)
        close(cl[i]);
    srv_listen_unguard(lev);
    srv_listen_unguard(lev); /* no guard left: no-op */
    evconnlistener_free(lev);
    event_base_free(acc.base);
}

static void test_fd_budget(void **state)
{
    (void)state;
    struct rlimit saved, rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 2000)
        skip();
    rl = saved;
    rl.rlim_cur = 300;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_int_equal(srv_listen_fd_budget(1000), 1000 + SRV_LISTEN_FD_RESERVE);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_int_equal(rl.rlim_cur, 1000 + SRV_LISTEN_FD_RESERVE);
    /* Enough already: unchanged. */
    assert_int_equal(srv_listen_fd_budget(10), 1000 + SRV_LISTEN_FD_RESERVE);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backlog),
        cmocka_unit_test(test_guard_pauses_then_resumes),
        cmocka_unit_test(test_fd_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
