/* SPDX-License-Identifier: Apache-2.0
 * srv_loop: the thread model.
 *
 * N event-loop threads, each with its own libevent event_base, own the
 * network: listeners hand accepted sockets to loops (srv_loop_for_fd:
 * round-robin, or by the CPU the socket's packets arrive on when the loops
 * are pinned to CPUs), and a connection lives on one loop for its life.
 * Nothing that may block on disk runs on a loop thread: namespace-core calls go
 * to the worker pool with srv_work_submit(), whose done callback runs back on
 * the submitting loop.
 * Thread: srv_loops_* from the main thread; srv_work_submit from loop threads. */
#ifndef SRV_LOOP_H
#define SRV_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct srv_loop;

/** Start @p nloops loop threads and @p nworkers worker threads. @return 0, -errno. */
int srv_loops_start(int nloops, int nworkers);
/** Ask every loop to finish: listeners are closed by their owners; loops exit
 * when no event is pending. Joins every thread. */
void srv_loops_stop(void);
int srv_loops_count(void);
struct srv_loop *srv_loop_get(int i);
/** Next loop in round-robin order (thread-safe). */
struct srv_loop *srv_loop_next(void);
struct event_base *srv_loop_base(struct srv_loop *l);
/** The loop whose thread is calling, or NULL off-loop. */
struct srv_loop *srv_loop_current(void);

/** Run @p fn(arg) on loop @p l's thread soon. Thread-safe. @return 0, -ENOMEM. */
int srv_loop_call(struct srv_loop *l, void (*fn)(void *arg), void *arg);

typedef void (*srv_work_fn)(void *arg);
/** Run @p work(arg) on a worker thread, then @p done(arg) on loop @p l.
 * @p done always runs exactly once (after work). */
void srv_work_submit(struct srv_loop *l, srv_work_fn work, srv_work_fn done, void *arg);

/* ---- extensions (backward compatible) ---- */
/** How long srv_loops_stop() lets each loop drain in-flight work and pending
 * events before it gives up on them (default 10000 ms). */
void srv_loops_set_drain_timeout(int ms);

/** Before srv_loops_start(): pin loop thread i to the i-th CPU the process may
 * run on (round-robin when there are more loops than CPUs), and make
 * srv_loop_for_fd() give a connection to a loop pinned to the CPU its packets
 * arrive on (SO_INCOMING_CPU). Off by default. */
void srv_loops_set_affinity(bool on);

/** The loop an accepted socket @p fd should live on, counted as one more open
 * connection of it: with affinity, a loop pinned to the socket's
 * SO_INCOMING_CPU (the one with the fewest open connections when several
 * are), unless it holds 4 open connections more than the least busy loop,
 * which then takes it; otherwise, or when that CPU has no loop, the next in
 * round-robin order. Thread-safe. */
struct srv_loop *srv_loop_for_fd(int fd);
/** A connection srv_loop_for_fd() gave to @p l closed. Thread-safe. */
void srv_loop_conn_gone(struct srv_loop *l);
/** The connections srv_loop_for_fd() gave to @p l that are still open. Thread-safe. */
long srv_loop_conns(const struct srv_loop *l);

/** The CPU loop @p l is pinned to, or -1. */
int srv_loop_cpu(const struct srv_loop *l);

/** Polling a lone connection for its next request (the S3 and NFS loops'
 * loop_poll_us). On @p l's thread: looks at socket @p fd every @p step_us (a
 * MSG_PEEK recv) until @p end (srv_now_us() time), spinning between looks, or,
 * with @p yield_us, yielding the CPU (a client on the same CPU runs first) and
 * stopping once a yield took longer than @p yield_us (it ran another thread: the
 * CPU is busy, so sleeping costs no wake-up of a halted one). Stops at once when
 * another event of @p l is active. @return true: input came (the caller reads
 * it); false: time is up, or end of input or an error (its read event reports
 * it). */
bool srv_loop_poll_input(struct srv_loop *l, int fd, uint64_t end, uint64_t step_us,
                         uint64_t yield_us);

struct evbuffer;

/** Reads what socket @p fd has, up to @p max bytes, into @p in, the input
 * buffer of a socket bufferevent that does not read by itself (its input's end
 * stays frozen but while this reads), with one readv retried on EINTR: no
 * FIONREAD before it, as libevent 2.1 would ask. @return the bytes read, 0 at
 * end of input, -1 with errno (EAGAIN: nothing yet; ENOMEM: no buffer space). */
ssize_t srv_read_into(struct evbuffer *in, int fd, size_t max);

/** The calling thread's buffer held in @p *slot (a caller's __thread pointer):
 * allocated of @p size bytes while it is NULL, freed when the thread exits.
 * At most 4 slots per thread. @return the buffer, NULL without memory. */
uint8_t *srv_thread_buf(uint8_t **slot, size_t size);

/** Run @p fn on the calling thread when it exits, to free a per-thread object
 * that is not a plain buffer (an evbuffer held in a caller's __thread pointer).
 * At most 4 per thread. @return 0, -ENOMEM. */
int srv_thread_at_exit(void (*fn)(void));

/** Reads what socket @p fd has, up to @p max bytes, into @p *scratch, a
 * caller's per-thread buffer of at least @p max bytes (srv_thread_buf of
 * @p max bytes while it is NULL), with one read retried on EINTR.
 * @return the bytes read, 0 at end of input, -1 with errno (EAGAIN: nothing
 * yet; ENOMEM: no buffer). */
ssize_t srv_read_scratch(int fd, uint8_t **scratch, size_t max);

#endif
