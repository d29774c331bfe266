/* SPDX-License-Identifier: Apache-2.0
 * srv_listen: what the S3, NFS and admin listeners share.
 *
 *  - The listen backlog: one value for every listener (config
 *    listen_backlog), clamped to the kernel's net.core.somaxconn, which
 *    would cut it silently anyway.
 *  - Back-off when accept(2) fails: out of file descriptors (EMFILE, ENFILE)
 *    or kernel memory, accept fails at once for as long as the condition
 *    lasts, and a level-triggered listener retried at once spins a loop
 *    thread and floods the log. A guarded listener pauses for
 *    SRV_LISTEN_PAUSE_MS instead and logs through its own rate limiter
 *    (srv_log_limited_by), naming the open file limit.
 *  - The file descriptor budget: the soft RLIMIT_NOFILE is raised toward
 *    what the connection caps need (up to the hard limit), or a start-up
 *    warning says it is short.
 * Connections beyond the caps (s3_max_conns, nfs_max_conns) are each
 * front end's business: they are accepted and closed at once.
 * Thread: srv_listen_set_backlog and srv_listen_fd_budget from the main
 * thread at start; srv_listen_backlog from any thread; a guard is set and
 * removed on the thread that runs its event_base (or before that base runs). */
#ifndef SRV_LISTEN_H
#define SRV_LISTEN_H

#include "srv_log.h"

struct evconnlistener;
struct event_base;

#define SRV_LISTEN_BACKLOG_DEFAULT 4096
#define SRV_LISTEN_PAUSE_MS 100
/* File descriptors kept apart from connections in the budget: data files,
 * LMDB, event loops, io_uring, log, outgoing NLM and tier connections. */
#define SRV_LISTEN_FD_RESERVE 256

/** Set the backlog of listeners made from now on: @p n, or
 * net.core.somaxconn when that is lower (logged). @p n < 1: the default. */
void srv_listen_set_backlog(int n);
/** The backlog to give listen(2). */
int srv_listen_backlog(void);

/** Pause @p lev for SRV_LISTEN_PAUSE_MS whenever accept fails for a reason
 * other than the retriable ones libevent handles itself (EAGAIN, EINTR,
 * ECONNABORTED), instead of retrying at once. Replaces @p lev's error
 * callback. Failures are logged as WARN of @p sub, at most
 * SRV_LOG_RATE_PER_S lines per second per listener.
 * @param[in] base the event_base @p lev runs on (for the resume timer)
 * @param[in] name "S3", "NFS", "admin": for the log line; must outlive the guard
 * @return 0, -ENOMEM. */
int srv_listen_guard(struct evconnlistener *lev, struct event_base *base, enum srv_subsys sub,
                     const char *name);
/** Remove the guard of @p lev (before evconnlistener_free, on its loop's
 * thread). No-op when @p lev has none. */
void srv_listen_unguard(struct evconnlistener *lev);

/** Check that the open file limit covers @p conns connections plus
 * SRV_LISTEN_FD_RESERVE: raise the soft limit toward that (never above the
 * hard limit), and log a WARN naming the options when it stays short.
 * @return the soft limit in effect. */
long srv_listen_fd_budget(long conns);

#endif
