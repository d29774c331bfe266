/* SPDX-License-Identifier: Apache-2.0
 * nfs3_client: drives a real s3nfsd through libnfs (the userspace NFS client)
 * for the integration tests in test_nfs.py.
 *
 *   nfs3_client URL procs BUCKET      every procedure through libnfs' POSIX-like API
 *   nfs3_client URL hold BUCKET       set up files, print READY, wait for a line on
 *                                     stdin (the test restarts the daemon), then use
 *                                     the handles obtained before the restart
 *   nfs3_client URL isolated BUCKET   BUCKET must not be visible (another tenant's)
 *   nfs3_client URL versions BUCKET   changes in a versioned bucket (checked over S3)
 *   nfs3_client URL locked BUCKET     changes of a locked version, all refused
 *
 * Prints one "ok <what>" line per passed check; on the first failed check
 * prints "FAIL <what>: <detail>" and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>

static struct nfs_context *nfs;

static void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s: ", what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" (%s)\n", nfs ? nfs_get_error(nfs) : "");
    fflush(stdout);
    exit(1);
}

static void ok(const char *what)
{
    printf("ok %s\n", what);
    fflush(stdout);
}

#define CHECK(what, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail(what, __VA_ARGS__);                                                               \
        ok(what);                                                                                  \
    } while (0)

static char *path(const char *fmt, ...)
{
    static char buf[8][1024];
    static int i;
    va_list ap;
    char *p = buf[i++ % 8];
    va_start(ap, fmt);
    vsnprintf(p, 1024, fmt, ap);
    va_end(ap);
    return p;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

static struct nfsfh *create_file(const char *p, const void *data, size_t len)
{
    struct nfsfh *fh = NULL;
    int rc = nfs_creat(nfs, p, 0644, &fh);
    if (rc < 0)
        fail("create", "%s: %d", p, rc);
    if (len && nfs_pwrite(nfs, fh, 0, len, data) != (int)len)
        fail("write", "%s", p);
    return fh;
}

static void read_back(const char *what, struct nfsfh *fh, const uint8_t *want, size_t len)
{
    uint8_t *got = malloc(len + 1);
    size_t done = 0;
    while (done < len) {
        int n = nfs_pread(nfs, fh, done, len - done > (1 << 20) ? (1 << 20) : len - done,
                          got + done);
        if (n <= 0)
            fail(what, "pread at %zu returned %d", done, n);
        done += (size_t)n;
    }
    CHECK(what, memcmp(got, want, len) == 0, "content differs");
    free(got);
}

static void scenario_procs(const char *b)
{
    struct nfs_stat_64 st;
    struct nfsfh *fh;
    int rc;

    /* Root of the tenant: holds buckets only. */
    rc = nfs_mkdir(nfs, path("/%s", b));
    CHECK("MKDIR bucket", rc == 0, "rc=%d", rc);
    rc = nfs_mkdir(nfs, path("/%s", b));
    CHECK("MKDIR existing -> EEXIST", rc == -EEXIST, "rc=%d", rc);
    rc = nfs_creat(nfs, path("/file-in-root-%s", b), 0644, &fh);
    CHECK("CREATE in tenant root refused", rc < 0, "rc=%d", rc);
    rc = nfs_mkdir(nfs, "/Not_A_Valid_Bucket!");
    CHECK("MKDIR bad bucket name refused", rc < 0, "rc=%d", rc);

    /* Data path: 3 MiB + a tail, in 1 MiB writes, unstable then committed. */
    size_t len = 3 * 1024 * 1024 + 12345;
    uint8_t *data = malloc(len);
    fill(data, len, 1);
    fh = create_file(path("/%s/data.bin", b), data, len);
    CHECK("WRITE 3 MiB", 1, "");
    rc = nfs_fsync(nfs, fh);
    CHECK("COMMIT", rc == 0, "rc=%d", rc);
    read_back("READ back", fh, data, len);
    rc = nfs_fstat64(nfs, fh, &st);
    CHECK("GETATTR size", rc == 0 && st.nfs_size == len, "rc=%d size=%" PRIu64, rc,
          st.nfs_size);
    uint8_t tail[16];
    rc = nfs_pread(nfs, fh, len - 4, 16, tail);
    CHECK("READ at EOF is short", rc == 4 && memcmp(tail, data + len - 4, 4) == 0, "rc=%d", rc);
    rc = nfs_pread(nfs, fh, len + 100, 16, tail);
    CHECK("READ past EOF is empty", rc == 0, "rc=%d", rc);
    nfs_close(nfs, fh);

    /* Overwrite in the middle, out of order. */
    uint8_t patch[5000];
    fill(patch, sizeof(patch), 9);
    rc = nfs_open(nfs, path("/%s/data.bin", b), O_RDWR, &fh);
    CHECK("LOOKUP + open existing", rc == 0, "rc=%d", rc);
    rc = nfs_pwrite(nfs, fh, 2000000, sizeof(patch), patch);
    CHECK("WRITE in the middle", rc == (int)sizeof(patch), "rc=%d", rc);
    memcpy(data + 2000000, patch, sizeof(patch));
    read_back("READ after overwrite", fh, data, len);
    nfs_close(nfs, fh);

    /* SETATTR: mode, size, times. */
    rc = nfs_chmod(nfs, path("/%s/data.bin", b), 0600);
    rc = rc ? rc : nfs_stat64(nfs, path("/%s/data.bin", b), &st);
    CHECK("SETATTR mode", rc == 0 && (st.nfs_mode & 07777) == 0600, "rc=%d mode=%o", rc,
          (unsigned)st.nfs_mode);
    rc = nfs_truncate(nfs, path("/%s/data.bin", b), 1000);
    rc = rc ? rc : nfs_stat64(nfs, path("/%s/data.bin", b), &st);
    CHECK("SETATTR size (truncate)", rc == 0 && st.nfs_size == 1000, "rc=%d size=%" PRIu64, rc,
          st.nfs_size);
    struct timeval tv[2] = {{1000000000, 0}, {1200000000, 0}};
    rc = nfs_utimes(nfs, path("/%s/data.bin", b), tv);
    rc = rc ? rc : nfs_stat64(nfs, path("/%s/data.bin", b), &st);
    CHECK("SETATTR times", rc == 0 && st.nfs_mtime == 1200000000 && st.nfs_atime == 1000000000,
          "rc=%d mtime=%" PRIu64, rc, st.nfs_mtime);
    rc = nfs_open(nfs, path("/%s/data.bin", b), O_RDONLY, &fh);
    read_back("READ after truncate", fh, data, 1000);
    nfs_close(nfs, fh);

    /* ACCESS */
    rc = nfs_access(nfs, path("/%s/data.bin", b), R_OK | W_OK);
    CHECK("ACCESS rw", rc == 0, "rc=%d", rc);

    /* LOOKUP errors */
    rc = nfs_stat64(nfs, path("/%s/missing", b), &st);
    CHECK("LOOKUP missing -> ENOENT", rc == -ENOENT, "rc=%d", rc);
    rc = nfs_stat64(nfs, path("/%s/data.bin/x", b), &st);
    CHECK("LOOKUP under a file -> ENOTDIR", rc == -ENOTDIR, "rc=%d", rc);

    /* SYMLINK / READLINK */
    char target[256];
    rc = nfs_symlink(nfs, "data.bin", path("/%s/link", b));
    CHECK("SYMLINK", rc == 0, "rc=%d", rc);
    memset(target, 0, sizeof(target));
    rc = nfs_readlink(nfs, path("/%s/link", b), target, sizeof(target));
    CHECK("READLINK", rc == 0 && strcmp(target, "data.bin") == 0, "rc=%d target=%s", rc, target);
    rc = nfs_lstat64(nfs, path("/%s/link", b), &st);
    CHECK("GETATTR symlink type", rc == 0 && S_ISLNK(st.nfs_mode), "rc=%d mode=%o", rc,
          (unsigned)st.nfs_mode);
    rc = nfs_readlink(nfs, path("/%s/data.bin", b), target, sizeof(target));
    CHECK("READLINK on a file refused", rc < 0, "rc=%d", rc);

    /* LINK */
    rc = nfs_link(nfs, path("/%s/data.bin", b), path("/%s/hard", b));
    rc = rc ? rc : nfs_stat64(nfs, path("/%s/data.bin", b), &st);
    CHECK("LINK (nlink 2)", rc == 0 && st.nfs_nlink == 2, "rc=%d nlink=%" PRIu64, rc,
          st.nfs_nlink);
    rc = nfs_link(nfs, path("/%s/data.bin", b), path("/%s/hard", b));
    CHECK("LINK existing -> EEXIST", rc == -EEXIST, "rc=%d", rc);

    /* RENAME over an existing file (checkpoint pattern). */
    uint8_t ck[100000];
    fill(ck, sizeof(ck), 3);
    fh = create_file(path("/%s/ckpt.tmp", b), ck, sizeof(ck));
    nfs_fsync(nfs, fh);
    nfs_close(nfs, fh);
    fh = create_file(path("/%s/ckpt", b), "old", 3);
    nfs_close(nfs, fh);
    rc = nfs_rename(nfs, path("/%s/ckpt.tmp", b), path("/%s/ckpt", b));
    CHECK("RENAME over existing", rc == 0, "rc=%d", rc);
    rc = nfs_stat64(nfs, path("/%s/ckpt.tmp", b), &st);
    CHECK("RENAME source gone", rc == -ENOENT, "rc=%d", rc);
    rc = nfs_open(nfs, path("/%s/ckpt", b), O_RDONLY, &fh);
    CHECK("open renamed", rc == 0, "rc=%d", rc);
    read_back("READ renamed content", fh, ck, sizeof(ck));
    nfs_close(nfs, fh);
    rc = nfs_rename(nfs, path("/%s/nothing", b), path("/%s/x", b));
    CHECK("RENAME missing -> ENOENT", rc == -ENOENT, "rc=%d", rc);

    /* MKDIR / RMDIR inside the bucket, NOTEMPTY. */
    rc = nfs_mkdir2(nfs, path("/%s/dir", b), 0750);
    rc = rc ? rc : nfs_stat64(nfs, path("/%s/dir", b), &st);
    CHECK("MKDIR with mode", rc == 0 && S_ISDIR(st.nfs_mode) && (st.nfs_mode & 0777) == 0750,
          "rc=%d mode=%o", rc, (unsigned)st.nfs_mode);
    fh = create_file(path("/%s/dir/inner", b), "x", 1);
    nfs_close(nfs, fh);
    rc = nfs_rmdir(nfs, path("/%s/dir", b));
    CHECK("RMDIR non-empty -> ENOTEMPTY", rc == -ENOTEMPTY, "rc=%d", rc);
    rc = nfs_unlink(nfs, path("/%s/dir", b));
    CHECK("REMOVE of a directory refused", rc < 0, "rc=%d", rc);
    rc = nfs_rename(nfs, path("/%s/dir", b), path("/%s/dir/sub", b));
    CHECK("RENAME dir into itself refused", rc < 0, "rc=%d", rc);

    /* READDIR(PLUS) paging: 300 entries with long names, each seen once. */
    enum { NFILES = 300 };
    static char seen[NFILES];
    rc = nfs_mkdir(nfs, path("/%s/many", b));
    for (int i = 0; i < NFILES && rc == 0; i++) {
        rc = nfs_creat(nfs, path("/%s/many/file-with-a-rather-long-name-to-fill-pages-%04d", b, i),
                       0644, &fh);
        if (rc == 0)
            nfs_close(nfs, fh);
    }
    CHECK("CREATE 300 files", rc == 0, "rc=%d", rc);
    struct nfsdir *dir;
    rc = nfs_opendir(nfs, path("/%s/many", b), &dir);
    CHECK("READDIRPLUS open", rc == 0, "rc=%d", rc);
    struct nfsdirent *de;
    int n = 0, dots = 0, dup = 0;
    while ((de = nfs_readdir(nfs, dir)) != NULL) {
        int idx;
        if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0) {
            dots++;
            continue;
        }
        if (sscanf(de->name, "file-with-a-rather-long-name-to-fill-pages-%d", &idx) == 1 &&
            idx >= 0 && idx < NFILES) {
            if (seen[idx])
                dup++;
            seen[idx] = 1;
            n++;
        }
    }
    nfs_closedir(nfs, dir);
    CHECK("READDIRPLUS lists every entry once", n == NFILES && dup == 0 && dots == 2,
          "n=%d dup=%d dots=%d", n, dup, dots);

    /* FSSTAT */
    struct statvfs vfs;
    rc = nfs_statvfs(nfs, "/", &vfs);
    CHECK("FSSTAT", rc == 0 && vfs.f_blocks > 0, "rc=%d blocks=%lu", rc,
          (unsigned long)vfs.f_blocks);

    /* MKNOD: FIFOs and devices are not supported. */
    rc = nfs_mknod(nfs, path("/%s/fifo", b), S_IFIFO | 0644, 0);
    CHECK("MKNOD fifo refused", rc < 0, "rc=%d", rc);
    rc = nfs_mknod(nfs, path("/%s/chr", b), S_IFCHR | 0644, 0x0101);
    CHECK("MKNOD chr refused", rc < 0, "rc=%d", rc);

    /* REMOVE; the handle of the removed file is stale. */
    rc = nfs_open(nfs, path("/%s/hard", b), O_RDONLY, &fh);
    rc = rc ? rc : nfs_unlink(nfs, path("/%s/hard", b));
    rc = rc ? rc : nfs_unlink(nfs, path("/%s/data.bin", b));
    CHECK("REMOVE both links", rc == 0, "rc=%d", rc);
    rc = nfs_stat64(nfs, path("/%s/data.bin", b), &st);
    CHECK("REMOVE: name gone", rc == -ENOENT, "rc=%d", rc);
    rc = nfs_fstat64(nfs, fh, &st);
    CHECK("GETATTR of a removed inode is STALE", rc == -ESTALE, "rc=%d", rc);
    nfs_close(nfs, fh);
    rc = nfs_unlink(nfs, path("/%s/data.bin", b));
    CHECK("REMOVE missing -> ENOENT", rc == -ENOENT, "rc=%d", rc);

    /* Clean up and remove the bucket. */
    for (int i = 0; i < NFILES; i++)
        nfs_unlink(nfs, path("/%s/many/file-with-a-rather-long-name-to-fill-pages-%04d", b, i));
    rc = nfs_rmdir(nfs, path("/%s/many", b));
    rc = rc ? rc : nfs_unlink(nfs, path("/%s/dir/inner", b));
    rc = rc ? rc : nfs_rmdir(nfs, path("/%s/dir", b));
    rc = rc ? rc : nfs_unlink(nfs, path("/%s/link", b));
    rc = rc ? rc : nfs_unlink(nfs, path("/%s/ckpt", b));
    CHECK("cleanup", rc == 0, "rc=%d", rc);
    rc = nfs_rmdir(nfs, path("/%s", b));
    CHECK("RMDIR bucket", rc == 0, "rc=%d", rc);
    free(data);
}

static void scenario_hold(const char *b)
{
    struct nfsfh *fh, *dfh;
    struct nfs_stat_64 st;
    uint8_t data[300000];
    char line[64];
    int rc;

    fill(data, sizeof(data), 5);
    rc = nfs_mkdir(nfs, path("/%s", b));
    CHECK("MKDIR bucket", rc == 0 || rc == -EEXIST, "rc=%d", rc);
    fh = create_file(path("/%s/keep.bin", b), data, sizeof(data));
    rc = nfs_fsync(nfs, fh);
    CHECK("COMMIT before restart", rc == 0, "rc=%d", rc);
    rc = nfs_mkdir(nfs, path("/%s/sub", b));
    rc = rc ? rc : nfs_open(nfs, path("/%s/sub", b), O_RDONLY, &dfh);
    CHECK("open directory", rc == 0, "rc=%d", rc);
    printf("READY\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        fail("wait", "stdin closed");
    /* Same nfsfh objects: the handles from before the restart. */
    read_back("READ with a pre-restart handle", fh, data, sizeof(data));
    rc = nfs_fstat64(nfs, fh, &st);
    CHECK("GETATTR with a pre-restart handle", rc == 0 && st.nfs_size == sizeof(data), "rc=%d",
          rc);
    rc = nfs_pwrite(nfs, fh, sizeof(data), 5, "after");
    CHECK("WRITE with a pre-restart handle", rc == 5, "rc=%d", rc);
    rc = nfs_fstat64(nfs, dfh, &st);
    CHECK("GETATTR directory with a pre-restart handle", rc == 0 && S_ISDIR(st.nfs_mode), "rc=%d",
          rc);
    nfs_close(nfs, fh);
    nfs_close(nfs, dfh);
}

static void scenario_isolated(const char *b)
{
    struct nfs_stat_64 st;
    int rc = nfs_stat64(nfs, path("/%s", b), &st);
    CHECK("other tenant's bucket invisible", rc == -ENOENT, "rc=%d", rc);
    struct nfsdir *dir;
    struct nfsdirent *de;
    int seen = 0;
    rc = nfs_opendir(nfs, "/", &dir);
    CHECK("READDIRPLUS of this tenant's root", rc == 0, "rc=%d", rc);
    while ((de = nfs_readdir(nfs, dir)) != NULL)
        seen |= strcmp(de->name, b) == 0;
    nfs_closedir(nfs, dir);
    CHECK("other tenant's bucket not listed", !seen, "listed");
}

/* In a versioned bucket (made so over S3 by the test, with settle_ms short): a file written,
 * left to settle, changed in place (a new version), then removed (a delete marker); g
 * renamed over h (h's file stays as a version). The test checks the versions over S3.
 * seed-1 bytes of f are its first version, with "NEW" at 5000 its second. */
static void scenario_versions(const char *b)
{
    struct nfsfh *fh;
    uint8_t data[20000];
    fill(data, sizeof(data), 1);
    fh = create_file(path("/%s/f", b), data, sizeof(data));
    CHECK("WRITE f", nfs_fsync(nfs, fh) == 0, "");
    nfs_close(nfs, fh);
    sleep(2); /* settled: the version is sealed */
    int rc = nfs_open(nfs, path("/%s/f", b), O_RDWR, &fh);
    CHECK("open f", rc == 0, "rc=%d", rc);
    rc = nfs_pwrite(nfs, fh, 5000, 3, "NEW");
    CHECK("WRITE f in place", rc == 3, "rc=%d", rc);
    memcpy(data + 5000, "NEW", 3);
    CHECK("COMMIT f", nfs_fsync(nfs, fh) == 0, "");
    read_back("READ f: the new version", fh, data, sizeof(data));
    nfs_close(nfs, fh);
    rc = nfs_unlink(nfs, path("/%s/f", b));
    CHECK("REMOVE f", rc == 0, "rc=%d", rc);
    struct nfs_stat_64 st;
    rc = nfs_stat64(nfs, path("/%s/f", b), &st);
    CHECK("f gone (a delete marker)", rc == -ENOENT, "rc=%d", rc);
    fh = create_file(path("/%s/g", b), "gggg", 4);
    nfs_close(nfs, fh);
    rc = nfs_rename(nfs, path("/%s/g", b), path("/%s/h", b));
    CHECK("RENAME g over h", rc == 0, "rc=%d", rc);
    rc = nfs_link(nfs, path("/%s/h", b), path("/%s/h2", b));
    CHECK("LINK refused in a versioned bucket", rc < 0, "rc=%d", rc);
}

/* "locked" holds a version under COMPLIANCE retention (made over S3): NFS may read it but
 * neither write, truncate, remove nor rename it, nor rename a file over it. */
static void scenario_locked(const char *b)
{
    struct nfsfh *fh;
    int rc = nfs_open(nfs, path("/%s/locked", b), O_RDWR, &fh);
    CHECK("open locked", rc == 0, "rc=%d", rc);
    char buf[8];
    rc = nfs_pread(nfs, fh, 0, 6, buf);
    CHECK("READ locked", rc == 6 && memcmp(buf, "locked", 6) == 0, "rc=%d", rc);
    rc = nfs_pwrite(nfs, fh, 0, 3, "XXX");
    /* libnfs' pwrite reports any failed WRITE as -EFAULT; the status (NFS3ERR_ACCES) is
     * checked exactly by the raw client (cross/test_versions.py) */
    CHECK("WRITE refused", rc < 0, "rc=%d", rc);
    rc = nfs_ftruncate(nfs, fh, 1);
    CHECK("truncate refused: EACCES", rc == -EACCES, "rc=%d", rc);
    nfs_close(nfs, fh);
    rc = nfs_unlink(nfs, path("/%s/locked", b));
    CHECK("REMOVE refused: EACCES", rc == -EACCES, "rc=%d", rc);
    rc = nfs_rename(nfs, path("/%s/locked", b), path("/%s/moved", b));
    CHECK("RENAME away refused: EACCES", rc == -EACCES, "rc=%d", rc);
    rc = nfs_rename(nfs, path("/%s/other", b), path("/%s/locked", b));
    CHECK("RENAME over refused: EACCES", rc == -EACCES, "rc=%d", rc);
    rc = nfs_open(nfs, path("/%s/locked", b), O_WRONLY | O_TRUNC, &fh);
    CHECK("open O_TRUNC refused", rc < 0, "rc=%d", rc);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s URL procs|hold|isolated|versions|locked BUCKET\n", argv[0]);
        return 2;
    }
    nfs = nfs_init_context();
    if (!nfs)
        return 2;
    struct nfs_url *url = nfs_parse_url_dir(nfs, argv[1]);
    if (!url)
        fail("url", "%s", argv[1]);
    nfs_set_autoreconnect(nfs, 10);
    int rc = nfs_mount(nfs, url->server, url->path);
    CHECK("MNT", rc == 0, "rc=%d", rc);
    if (strcmp(argv[2], "procs") == 0)
        scenario_procs(argv[3]);
    else if (strcmp(argv[2], "hold") == 0)
        scenario_hold(argv[3]);
    else if (strcmp(argv[2], "isolated") == 0)
        scenario_isolated(argv[3]);
    else if (strcmp(argv[2], "versions") == 0)
        scenario_versions(argv[3]);
    else if (strcmp(argv[2], "locked") == 0)
        scenario_locked(argv[3]);
    else
        fail("usage", "unknown scenario %s", argv[2]);
    nfs_umount(nfs);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    printf("DONE\n");
    return 0;
}
