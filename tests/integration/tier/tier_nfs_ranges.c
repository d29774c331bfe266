/* SPDX-License-Identifier: Apache-2.0
 * tier_nfs_ranges: reads ranges of one file through libnfs (the userspace NFS
 * client, its synchronous API) for test_tier_nfs_libnfs.py.
 *
 *   tier_nfs_ranges URL PATH OUT < ranges
 *
 * Mounts URL's export, opens PATH (relative to the export, e.g. "/bucket/dir/f")
 * read-only, and for each line "OFFSET LENGTH" of stdin reads that range with
 * nfs_pread (in pieces of at most the server's rtmax, as libnfs hands back at
 * most one READ's worth) and appends the bytes to the file OUT. A READ that
 * fails is tried again for a while (an evicted file's range the remote has not
 * delivered yet may answer JUKEBOX, which libnfs' sync API reports as an
 * error). Prints "ok OFFSET LENGTH MICROSECONDS" per range, then "DONE"; on a
 * failure "FAIL what: detail" and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>

static struct nfs_context *nfs;

static void fail(const char *what, const char *detail)
{
    printf("FAIL %s: %s (%s)\n", what, detail, nfs ? nfs_get_error(nfs) : "");
    fflush(stdout);
    exit(1);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Read @len bytes at @off into @buf; a failed READ is tried again for up to 60 s. */
static void read_range(struct nfsfh *fh, uint64_t off, uint64_t len, char *buf)
{
    uint64_t done = 0, piece = nfs_get_readmax(nfs), give_up = now_us() + 60u * 1000000u;
    if (piece == 0 || piece > (1u << 20))
        piece = 1u << 20;
    while (done < len) {
        uint64_t want = len - done < piece ? len - done : piece;
        int n = nfs_pread(nfs, fh, off + done, want, buf + done);
        if (n > 0) {
            done += (uint64_t)n;
            continue;
        }
        if (n == 0)
            fail("pread", "end of file before the range's end");
        if (now_us() > give_up)
            fail("pread", "still failing after 60 s");
        usleep(100 * 1000);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s URL PATH OUT < \"OFFSET LENGTH\" lines\n", argv[0]);
        return 2;
    }
    nfs = nfs_init_context();
    if (!nfs)
        return 2;
    struct nfs_url *url = nfs_parse_url_dir(nfs, argv[1]);
    if (!url)
        fail("url", argv[1]);
    if (nfs_mount(nfs, url->server, url->path) != 0)
        fail("mount", url->server);
    struct nfsfh *fh = NULL;
    if (nfs_open(nfs, argv[2], O_RDONLY, &fh) != 0)
        fail("open", argv[2]);
    FILE *out = fopen(argv[3], "wb");
    if (!out)
        fail("out", strerror(errno));
    uint64_t off, len;
    while (scanf("%" SCNu64 " %" SCNu64, &off, &len) == 2) {
        char *buf = malloc(len ? len : 1);
        if (!buf)
            fail("malloc", "out of memory");
        uint64_t t0 = now_us();
        read_range(fh, off, len, buf);
        uint64_t us = now_us() - t0;
        if (fwrite(buf, 1, len, out) != len)
            fail("out", strerror(errno));
        free(buf);
        printf("ok %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", off, len, us);
        fflush(stdout);
    }
    if (fclose(out) != 0)
        fail("out", strerror(errno));
    nfs_close(nfs, fh);
    nfs_umount(nfs);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    printf("DONE\n");
    return 0;
}
