/* SPDX-License-Identifier: Apache-2.0
 * qos_capacity: a short measurement of the store's disk and of the network
 * link speed (see qos_capacity.h). Plain POSIX file I/O on the calling
 * thread, before the event loops run. O_DIRECT needs _GNU_SOURCE, which the
 * build defines. */
#include "qos_capacity.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLK (1u << 20)
#define SMALL 4096u
#define IOPS_US 200000u

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t per_second(uint64_t amount, uint64_t us)
{
    return us ? (uint64_t)((double)amount * 1e6 / (double)us) : 0;
}

/* Open the scratch file, O_DIRECT when the file system takes it. */
static int scratch_open(const char *path, bool *direct)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
    *direct = fd >= 0;
    if (fd < 0 && errno == EINVAL)
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    return fd < 0 ? -errno : fd;
}

static void drop_cache(int fd, bool direct)
{
    if (!direct)
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* Link speed (bytes/s) of the fastest non-loopback interface that is up. */
static uint64_t net_speed(void)
{
    DIR *d = opendir("/sys/class/net");
    uint64_t best = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "lo") == 0)
            continue;
        char p[300], buf[32] = "";
        snprintf(p, sizeof(p), "/sys/class/net/%s/operstate", e->d_name);
        FILE *f = fopen(p, "re");
        if (!f)
            continue;
        bool up = fgets(buf, sizeof(buf), f) && strncmp(buf, "up", 2) == 0;
        fclose(f);
        if (!up)
            continue;
        snprintf(p, sizeof(p), "/sys/class/net/%s/speed", e->d_name);
        f = fopen(p, "re");
        if (!f)
            continue;
        long mbps = fgets(buf, sizeof(buf), f) ? strtol(buf, NULL, 10) : 0;
        fclose(f);
        if (mbps > 0 && (uint64_t)mbps * 125000u > best)
            best = (uint64_t)mbps * 125000u; /* Mb/s -> bytes/s */
    }
    closedir(d);
    return best;
}

int qos_capacity_probe(const char *dir, uint32_t mib, struct qos_capacity *out)
{
    int rc = 0, fd = -1;
    void *buf = NULL;
    char path[4096];
    bool direct = false;
    memset(out, 0, sizeof(*out));
    if (mib == 0 || mib > 1024 || !dir)
        return -EINVAL;
    uint64_t t0 = now_us();
    snprintf(path, sizeof(path), "%s/.qos-capacity-probe.%ld", dir, (long)getpid());
    if (posix_memalign(&buf, SMALL, BLK) != 0)
        return -ENOMEM;
    memset(buf, 0xa5, BLK);
    fd = scratch_open(path, &direct);
    if (fd < 0) {
        rc = fd;
        fd = -1;
        goto out;
    }
    uint64_t total = (uint64_t)mib * BLK;
    /* write */
    uint64_t s = now_us();
    for (uint64_t off = 0; off < total; off += BLK) {
        ssize_t n = pwrite(fd, buf, BLK, (off_t)off);
        if (n != (ssize_t)BLK) {
            rc = n < 0 ? -errno : -EIO;
            goto out;
        }
    }
    if (fdatasync(fd) < 0) {
        rc = -errno;
        goto out;
    }
    out->disk_write_bps = per_second(total, now_us() - s);
    /* sequential read */
    drop_cache(fd, direct);
    s = now_us();
    for (uint64_t off = 0; off < total; off += BLK) {
        ssize_t n = pread(fd, buf, BLK, (off_t)off);
        if (n != (ssize_t)BLK) {
            rc = n < 0 ? -errno : -EIO;
            goto out;
        }
    }
    out->disk_read_bps = per_second(total, now_us() - s);
    /* random 4 KiB reads */
    drop_cache(fd, direct);
    uint64_t blocks = total / SMALL, ops = 0, x = 0x9e3779b97f4a7c15ull;
    s = now_us();
    uint64_t el;
    while ((el = now_us() - s) < IOPS_US) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ssize_t n = pread(fd, buf, SMALL, (off_t)((x % blocks) * SMALL));
        if (n != (ssize_t)SMALL) {
            rc = n < 0 ? -errno : -EIO;
            goto out;
        }
        ops++;
    }
    out->disk_iops = per_second(ops, el);
    out->net_bps = net_speed();
    out->read_bps = out->disk_read_bps;
    out->write_bps = out->disk_write_bps;
    if (out->net_bps && out->net_bps < out->read_bps)
        out->read_bps = out->net_bps;
    if (out->net_bps && out->net_bps < out->write_bps)
        out->write_bps = out->net_bps;
    out->iops = out->disk_iops;
out:
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    free(buf);
    out->ms = (uint32_t)((now_us() - t0) / 1000u);
    if (rc < 0) {
        uint32_t ms = out->ms;
        memset(out, 0, sizeof(*out));
        out->ms = ms;
    }
    return rc;
}
