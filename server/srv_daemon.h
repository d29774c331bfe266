/* SPDX-License-Identifier: Apache-2.0
 * srv_daemon: detaching from the terminal and the pidfile.
 *
 * srv_daemon_detach() forks; the parent waits until the child reports its
 * start-up result through srv_daemon_ready() (or dies) and exits with it, so
 * `s3nfsd --daemon` returns only once the daemon serves (exit 0) or failed
 * (exit 1). The pidfile is locked (flock) for the daemon's life, so a second
 * daemon on the same pidfile refuses to start.
 * Thread: main thread, before other threads exist (detach) / any time (pidfile). */
#ifndef SRV_DAEMON_H
#define SRV_DAEMON_H

/** Fork into the background (new session, stdin from /dev/null). Returns only
 * in the child. @return 0, -errno (fork/pipe failed; still in the foreground). */
int srv_daemon_detach(void);
/** Tell the waiting parent the start-up result (0 = serving) and point stdout
 * and stderr at /dev/null (the banner has been printed by then). No-op when
 * not detached or already reported. */
void srv_daemon_ready(int status);

/** Create and lock @p path and write our PID into it.
 * @return 0, -EEXIST (another live daemon holds it; its pid is logged), -errno. */
int srv_pidfile_create(const char *path);
/** Remove the pidfile created by srv_pidfile_create (no-op if none). */
void srv_pidfile_remove(void);

#endif
