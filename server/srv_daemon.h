/* SPDX-License-Identifier: Apache-2.0
 * srv_daemon: detaching from the terminal, the pidfile, the data folder's
 * lock, start-up checks of the listen addresses, and readiness messages to a
 * service manager (the sd_notify protocol).
 *
 * srv_daemon_detach() forks; the parent waits until the child reports its
 * start-up result through srv_daemon_ready() (or dies) and exits with it, so
 * `s3nfsd --daemon` returns only once the daemon serves (exit 0) or failed
 * (exit 1). The pidfile is locked (flock) for the daemon's life, so a second
 * daemon on the same pidfile refuses to start.
 * Thread: main thread, before other threads exist (detach) / any time (pidfile). */
#ifndef SRV_DAEMON_H
#define SRV_DAEMON_H

#include <stddef.h>

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
/** Is @p path locked by a running daemon (without creating or taking it)?
 * @return 0 (no such file, or not locked), -EEXIST (locked; its pid in
 *         @p pid, 0 if unreadable), -errno (cannot open it). */
int srv_pidfile_check(const char *path, long *pid);

/** Lock folder @p dir for this process's life: flock on DIR/s3nfsd.lock
 * (created, holding our pid), so two daemons, or a daemon and an offline
 * command, never open one store at once. The lock goes with the process.
 * @return 0, -EEXIST (another process holds it; its pid in @p pid, 0 if
 *         unknown), -errno. */
int srv_dir_lock(const char *dir, long *pid);

/** Check that a listener on @p listen ("HOST:PORT", "[V6]:PORT", ":PORT")
 * could bind now: bind a socket like the listeners do (SO_REUSEADDR) and
 * close it again. Catches a busy port, a port below 1024 without the right to
 * it, and an address this host does not have, before anything is created.
 * @param[out] err why not, in words ("address already in use: ...").
 * @return 0, -EINVAL (unparsable), -EADDRINUSE, -EACCES, -EADDRNOTAVAIL, -errno. */
int srv_listen_probe(const char *listen, char *err, size_t errlen);

/** Send @p state (e.g. "READY=1", "RELOADING=1", "STOPPING=1"; several
 * lines allowed) to the service manager: one datagram to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a path, or an abstract name written with a leading
 * '@'), as systemd's Type=notify expects. No-op without $NOTIFY_SOCKET.
 * @return 1 (sent), 0 (no manager), -errno (send failed; logged at debug). */
int srv_notify(const char *state);

#endif
