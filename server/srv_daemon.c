/* SPDX-License-Identifier: Apache-2.0
 * srv_daemon: fork-and-wait detach, a locked pidfile, the data folder's lock,
 * listen-address probes and sd_notify messages.
 *
 * The parent of a detached daemon blocks on a pipe: one status byte from
 * srv_daemon_ready() (0 = serving), or EOF if the child died first. The child
 * calls setsid() and keeps its working directory, so relative paths of the
 * configuration keep their meaning.
 * Thread: main thread. */
#include "srv_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srv_addr.h"
#include "srv_config.h"
#include "srv_log.h"

static int ready_fd = -1;
static int pid_fd = -1;
static char *pid_path;

int srv_daemon_detach(void)
{
    int p[2];
    if (pipe(p) < 0)
        return -errno;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (pid > 0) {
        close(p[1]);
        unsigned char st = 1;
        ssize_t n;
        do {
            n = read(p[0], &st, 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) {
            int ws = 0;
            waitpid(pid, &ws, WNOHANG);
            fprintf(stderr, "s3nfsd: the daemon exited during start-up (see its log)\n");
            _exit(1);
        }
        _exit(st ? 1 : 0);
    }
    close(p[0]);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    ready_fd = p[1];
    if (setsid() < 0)
        srv_log(WARN, SRV, "setsid failed: %s", strerror(errno));
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        if (null != STDIN_FILENO)
            close(null);
    }
    return 0;
}

void srv_daemon_ready(int status)
{
    if (ready_fd < 0)
        return;
    unsigned char st = status ? 1 : 0;
    fflush(stdout);
    fflush(stderr);
    ssize_t n;
    do {
        n = write(ready_fd, &st, 1);
    } while (n < 0 && errno == EINTR);
    close(ready_fd);
    ready_fd = -1;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
}

int srv_pidfile_create(const char *path)
{
    int rc;
    char buf[32];
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        srv_log(ERROR, SRV, "pidfile %s: %s", path, strerror(errno));
        return rc;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK ? -EEXIST : -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        srv_log(ERROR, SRV, "pidfile %s is held by a running daemon (pid %s)", path,
                *buf ? buf : "?");
        close(fd);
        return rc;
    }
    int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        rc = -errno;
        srv_log(ERROR, SRV, "pidfile %s: cannot write: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    pid_path = strdup(path);
    pid_fd = fd;
    return 0;
}

void srv_pidfile_remove(void)
{
    if (pid_fd < 0)
        return;
    if (pid_path)
        unlink(pid_path);
    close(pid_fd);
    pid_fd = -1;
    free(pid_path);
    pid_path = NULL;
}

/* The pid written in the file open as @p fd (0 if none). */
static long pid_in(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return strtol(buf, NULL, 10);
}

int srv_pidfile_check(const char *path, long *pid)
{
    *pid = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK ? -EEXIST : -errno;
        if (rc == -EEXIST)
            *pid = pid_in(fd);
    }
    close(fd); /* drops our shared lock, if we got it */
    return rc;
}

int srv_dir_lock(const char *dir, long *pid)
{
    char path[4096];
    *pid = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/s3nfsd.lock", dir) >= sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int rc = errno == EWOULDBLOCK ? -EEXIST : -errno;
        if (rc == -EEXIST)
            *pid = pid_in(fd);
        close(fd);
        return rc;
    }
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len)
        srv_log(WARN, SRV, "%s: cannot write our pid: %s", path, strerror(errno));
    /* Kept open (and locked) until exit, on purpose. */
    return 0;
}

int srv_listen_probe(const char *listen, char *err, size_t errlen)
{
    char host[256], port[16];
    int p;
    if (srv_addr_split_listen(listen, host, sizeof(host), &p) < 0) {
        snprintf(err, errlen, "'%s' is not HOST:PORT", listen);
        return -EINVAL;
    }
    snprintf(port, sizeof(port), "%d", p);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    int g = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(g));
        return -EADDRNOTAVAIL;
    }
    int rc = 0;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        rc = -errno;
    } else {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
            rc = -errno;
        close(fd);
    }
    freeaddrinfo(ai);
    if (rc == -EADDRINUSE)
        snprintf(err, errlen, "%s: address already in use (another program listens there: "
                 "`ss -ltnp 'sport = :%d'` shows which)", listen, p);
    else if (rc == -EACCES)
        snprintf(err, errlen, "%s: permission denied (ports below 1024 need root or "
                 "CAP_NET_BIND_SERVICE)", listen);
    else if (rc == -EADDRNOTAVAIL)
        snprintf(err, errlen, "%s: this host has no such address", listen);
    else if (rc < 0)
        snprintf(err, errlen, "%s: %s", listen, strerror(-rc));
    return rc;
}

int srv_notify(const char *state)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !*name)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || len >= sizeof(sa.sun_path)) {
        srv_log(WARN, SRV, "NOTIFY_SOCKET '%s' is neither a path nor an abstract name", name);
        return -EINVAL;
    }
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace: no NUL terminator, length counts */
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = 1;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0) {
        rc = -errno;
        srv_log(DEBUG, SRV, "sd_notify to %s failed: %s", name, strerror(errno));
    }
    close(fd);
    return rc;
}
