/* SPDX-License-Identifier: Apache-2.0
 * srv_daemon: fork-and-wait detach, and a locked pidfile.
 *
 * The parent of a detached daemon blocks on a pipe: one status byte from
 * srv_daemon_ready() (0 = serving), or EOF if the child died first. The child
 * calls setsid() and keeps its working directory, so relative paths of the
 * configuration keep their meaning.
 * Thread: main thread. */
#include "srv_daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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
