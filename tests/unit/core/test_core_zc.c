/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_zc.c: core_key_peek (inline content, every
 * error, -EAGAIN for pending writes and ETags to compute, the bucket half
 * remembered for one snapshot only) and
 * core_read_pieces (pieces reassemble to exactly what core_read returns, for
 * inline files, holes, pending writes and ranges across extents; the first
 * read verifies, later ones send verified extents from the fd, and so may a
 * CORE_P_NOWAIT caller, which gets -EWOULDBLOCK before that; corruption is
 * SRV_ECORRUPT, also after a verified extent's page-cache copy went away, and
 * after it came back from the changed disk unverified; extents written
 * through the page cache are known at once; freed space is not reused while
 * pieces hold it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_test_util.h"

#define MB (1024 * 1024)

/* Bytes the pieces describe, reassembled. */
static uint8_t *assemble(const struct core_pieces *ps)
{
    uint8_t *b = malloc(ps->len + 1);
    uint64_t pos = 0;
    assert_non_null(b);
    for (size_t i = 0; i < ps->n; i++) {
        const struct core_piece *p = &ps->v[i];
        if (p->fd >= 0)
            assert_int_equal(pread(p->fd, b + pos, p->len, (off_t)p->off), (ssize_t)p->len);
        else if (p->mem)
            memcpy(b + pos, p->mem, p->len);
        else
            memset(b + pos, 0, p->len);
        pos += p->len;
    }
    assert_int_equal(pos, ps->len);
    return b;
}

static size_t fd_pieces(const struct core_pieces *ps)
{
    size_t n = 0;
    for (size_t i = 0; i < ps->n; i++)
        n += ps->v[i].fd >= 0;
    return n;
}

/* core_read_pieces of [off, off + len) equals core_read of it. @return fd pieces. */
static size_t check_range(struct fx *f, uint64_t ino, uint64_t off, uint64_t len)
{
    struct core_pieces ps;
    uint8_t *want = malloc(len + 1);
    size_t n = 0;
    bool eof = false;
    assert_int_equal(core_read(f->c, &f->p, ino, off, want, len, &n, &eof), 0);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, off, len, &ps), 0);
    assert_int_equal(ps.len, n);
    assert_int_equal(ps.eof, eof);
    uint8_t *got = assemble(&ps);
    assert_memory_equal(got, want, n);
    size_t fds = fd_pieces(&ps);
    core_pieces_release(&ps);
    free(got);
    free(want);
    return fds;
}

static uint64_t ino_of(struct fx *f, const char *key)
{
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, key, strlen(key), &oi), 0);
    free(oi.meta);
    return oi.attr.ino;
}

/* A peek's bucket half is remembered per thread for one snapshot of the
 * store: every commit that changes the bucket (its metadata blob, its mode,
 * its deletion and re-creation) is seen by the next peek, and another
 * tenant's bucket of the same name is its own. */
static int peek_b(struct fx *f, const struct core_principal *p, const char *bkt, const char *key,
                  struct core_peek *pk)
{
    char buf[256];
    int rc = core_key_peek(f->c, p, bkt, strlen(bkt), key, strlen(key), buf, sizeof(buf), pk);
    free(pk->info.meta);
    pk->info.meta = NULL;
    return rc;
}

static void test_peek_bucket_memo(void **state)
{
    struct fx *f = *state;
    struct core_peek pk;
    char small[10];
    fx_fill(small, sizeof(small), 3);
    assert_int_equal(fx_put(f, "k", small, sizeof(small)), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(peek_b(f, &f->p, "bkt", "k", &pk), 0);
        assert_null(pk.bmeta);
        assert_int_equal(pk.bucket, f->bucket);
    }
    assert_int_equal(core_bucket_set_meta(f->c, &f->su, f->bucket, "cfg1", 4, -1), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(peek_b(f, &f->p, "bkt", "k", &pk), 0);
        assert_int_equal(pk.bmetalen, 4);
        assert_memory_equal(pk.bmeta, "cfg1", 4);
        free(pk.bmeta);
    }
    assert_int_equal(core_bucket_set_meta(f->c, &f->su, f->bucket, "cfg22", 5, 0750), 0);
    assert_int_equal(peek_b(f, &f->p, "bkt", "k", &pk), 0);
    assert_int_equal(pk.bmetalen, 5);
    assert_memory_equal(pk.bmeta, "cfg22", 5);
    assert_int_equal(pk.battr.mode & 0777, 0750);
    free(pk.bmeta);
    /* a commit elsewhere: the same bucket, read again */
    assert_int_equal(fx_put(f, "k2", small, sizeof(small)), 0);
    assert_int_equal(peek_b(f, &f->p, "bkt", "k2", &pk), 0);
    assert_memory_equal(pk.bmeta, "cfg22", 5);
    free(pk.bmeta);
    /* another tenant's "bkt" */
    struct core_principal other = f->p;
    other.tenant = 2;
    struct core_attr oa;
    assert_int_equal(core_tenant_create(f->c, 2), 0);
    assert_int_equal(core_bucket_create(f->c, &other, "bkt", 3, &oa), 0);
    assert_int_equal(peek_b(f, &other, "bkt", "k", &pk), -ENOENT);
    assert_int_equal(pk.bucket, oa.ino);
    assert_int_not_equal(oa.ino, f->bucket);
    free(pk.bmeta);
    assert_int_equal(peek_b(f, &f->p, "bkt", "k", &pk), 0);
    assert_int_equal(pk.bucket, f->bucket);
    free(pk.bmeta);
    /* deleted, then made again */
    struct core_attr ta;
    assert_int_equal(core_bucket_create(f->c, &f->p, "tmp", 3, &ta), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(peek_b(f, &f->p, "tmp", "k", &pk), -ENOENT);
        assert_int_equal(pk.bucket, ta.ino);
        free(pk.bmeta);
    }
    assert_int_equal(core_bucket_delete(f->c, &f->p, "tmp", 3), 0);
    assert_int_equal(peek_b(f, &f->p, "tmp", "k", &pk), SRV_ENOBUCKET);
    free(pk.bmeta);
    struct core_attr ta2;
    assert_int_equal(core_bucket_create(f->c, &f->p, "tmp", 3, &ta2), 0);
    assert_int_not_equal(ta2.ino, ta.ino);
    assert_int_equal(peek_b(f, &f->p, "tmp", "k", &pk), -ENOENT);
    assert_int_equal(pk.bucket, ta2.ino);
    free(pk.bmeta);
}

static void test_peek(void **state)
{
    struct fx *f = *state;
    char small[100], buf[8192];
    struct core_peek pk;
    fx_fill(small, sizeof(small), 1);
    assert_int_equal(fx_put(f, "dir/small", small, sizeof(small)), 0);
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "dir/small", 9, buf, sizeof(buf), &pk),
                     0);
    assert_true(pk.data);
    assert_int_equal(pk.n, sizeof(small));
    assert_memory_equal(buf, small, sizeof(small));
    assert_string_equal(pk.info.etag, "etag");
    assert_int_equal(pk.bucket, f->bucket);
    assert_int_equal(pk.info.attr.size, sizeof(small));
    free(pk.info.meta);
    /* no room (HEAD): metadata only */
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "dir/small", 9, buf, 0, &pk), 0);
    assert_false(pk.data);
    assert_int_equal(pk.info.attr.size, sizeof(small));
    free(pk.info.meta);
    /* the implicit directory: no data to read */
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "dir/", 4, buf, sizeof(buf), &pk), 0);
    assert_int_equal(pk.info.attr.type, CORE_DIR);
    assert_true(pk.data);
    free(pk.info.meta);
    /* a large object: in extents */
    uint8_t *big = malloc(2 * MB);
    fx_fill(big, 2 * MB, 2);
    assert_int_equal(fx_put(f, "big", big, 2 * MB), 0);
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "big", 3, buf, sizeof(buf), &pk), 0);
    assert_false(pk.data);
    assert_int_equal(pk.info.attr.size, 2 * MB);
    free(pk.info.meta);
    free(big);
    /* errors */
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "nope", 4, buf, sizeof(buf), &pk),
                     -ENOENT);
    assert_int_equal(core_key_peek(f->c, &f->p, "nob", 3, "big", 3, buf, sizeof(buf), &pk),
                     SRV_ENOBUCKET);
    assert_int_equal(core_key_peek(f->c, &f->p, "", 0, "big", 3, buf, sizeof(buf), &pk),
                     SRV_ENOBUCKET);
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "a//b", 4, buf, sizeof(buf), &pk),
                     SRV_EBADNAME);
    struct core_principal other = f->p;
    other.tenant = 2;
    assert_int_equal(core_tenant_create(f->c, 2), 0);
    assert_int_equal(core_key_peek(f->c, &other, "bkt", 3, "big", 3, buf, sizeof(buf), &pk),
                     SRV_ENOBUCKET);
    /* no read permission */
    struct core_setattr sa = {.mask = CORE_SET_MODE, .mode = 0600};
    uint64_t ino = ino_of(f, "dir/small");
    assert_int_equal(core_setattr(f->c, &f->su, ino, &sa, NULL, NULL), 0);
    struct core_principal stranger = f->p;
    stranger.uid = 2000;
    stranger.gid = 2000;
    assert_int_equal(
        core_key_peek(f->c, &stranger, "bkt", 3, "dir/small", 9, buf, sizeof(buf), &pk), -EACCES);
}

static void test_peek_eagain(void **state)
{
    struct fx *f = *state;
    char buf[8192];
    struct core_peek pk;
    struct core_attr a;
    enum core_stable st;
    /* a file written through the POSIX view: pending, then without a stored ETag */
    assert_int_equal(
        core_create(f->c, &f->p, f->bucket, "nfs", 3, 0644, CORE_CREATE_GUARDED, 0, &a), 0);
    assert_int_equal(core_write(f->c, &f->p, a.ino, 0, "hello", 5, CORE_UNSTABLE, &st, NULL, NULL),
                     0);
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "nfs", 3, buf, sizeof(buf), &pk),
                     -EAGAIN);
    assert_int_equal(core_commit(f->c, &f->p, a.ino), 0);
    int rc = core_key_peek(f->c, &f->p, "bkt", 3, "nfs", 3, buf, sizeof(buf), &pk);
    if (rc == 0) { /* the running MD5 was stored as the ETag at commit */
        assert_string_equal(pk.info.etag, "5d41402abc4b2a76b9719d911017c592");
        free(pk.info.meta);
    } else {
        assert_int_equal(rc, -EAGAIN);
    }
    /* core_key_lookup stores the MD5; then the peek serves it */
    ino_of(f, "nfs");
    assert_int_equal(core_key_peek(f->c, &f->p, "bkt", 3, "nfs", 3, buf, sizeof(buf), &pk), 0);
    assert_true(pk.data);
    assert_int_equal(pk.n, 5);
    assert_memory_equal(buf, "hello", 5);
    assert_string_equal(pk.info.etag, "5d41402abc4b2a76b9719d911017c592");
    free(pk.info.meta);
}

static void test_pieces_extents(void **state)
{
    struct fx *f = *state;
    size_t size = 3 * MB + 12345;
    uint8_t *data = malloc(size);
    fx_fill(data, size, 3);
    assert_int_equal(fx_put(f, "obj", data, size), 0);
    uint64_t ino = ino_of(f, "obj");
    struct core_pieces ps;
    struct core_principal nw = f->p;
    nw.flags |= CORE_P_NOWAIT;
    /* CORE_P_NOWAIT: nothing verified yet, so nothing without reading the disk */
    assert_int_equal(core_read_pieces(f->c, &nw, ino, 0, size, &ps), -EWOULDBLOCK);
    assert_int_equal(ps.n, 0);
    assert_int_equal(ps.len, 0);
    /* first read: every extent is verified now (counted in copied), then
     * handed out from the fd like a remembered one */
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, size, &ps), 0);
    assert_int_equal(ps.len, size);
    assert_true(ps.eof);
    assert_int_equal(ps.copied, size);
    assert_true(fd_pieces(&ps) >= 1);
    assert_true(ps.n <= 4);
    uint8_t *got = assemble(&ps);
    assert_memory_equal(got, data, size);
    free(got);
    core_pieces_release(&ps);
    core_pieces_release(&ps); /* safe twice */
    /* now verified and in the page cache: from the fd, adjacent extents merged,
     * also for a caller that must not wait */
    assert_int_equal(core_read_pieces(f->c, &nw, ino, 0, size, &ps), 0);
    assert_int_equal(ps.copied, 0);
    got = assemble(&ps);
    assert_memory_equal(got, data, size);
    free(got);
    core_pieces_release(&ps);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, size, &ps), 0);
    assert_int_equal(ps.copied, 0);
    assert_true(fd_pieces(&ps) >= 1);
    assert_true(ps.n <= 4);
    got = assemble(&ps);
    assert_memory_equal(got, data, size);
    free(got);
    core_pieces_release(&ps);
    /* ranges: inside one extent, across the 1 MiB grid, the tail, past the end */
    assert_true(check_range(f, ino, 100, 1000) == 1);
    check_range(f, ino, MB - 7, 2 * MB + 3);
    check_range(f, ino, size - 10, 100);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, size, 10, &ps), 0);
    assert_int_equal(ps.len, 0);
    assert_true(ps.eof);
    core_pieces_release(&ps);
    free(data);
}

static void test_pieces_inline_holes_pending(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    enum core_stable st;
    assert_int_equal(fx_put(f, "tiny", "abc", 3), 0);
    uint64_t tiny = ino_of(f, "tiny");
    struct core_pieces ps;
    assert_int_equal(core_read_pieces(f->c, &f->p, tiny, 1, 100, &ps), 0);
    assert_int_equal(ps.len, 2);
    assert_int_equal(ps.n, 1);
    assert_memory_equal(ps.v[0].mem, "bc", 2);
    core_pieces_release(&ps);
    /* extents with a hole between, the last one still pending (UNSTABLE) */
    assert_int_equal(
        core_create(f->c, &f->p, f->bucket, "sparse", 6, 0644, CORE_CREATE_GUARDED, 0, &a), 0);
    uint8_t *buf = malloc(MB);
    fx_fill(buf, MB, 4);
    assert_int_equal(core_write(f->c, &f->p, a.ino, 0, buf, MB, CORE_FILE_SYNC, &st, NULL, NULL),
                     0);
    assert_int_equal(
        core_write(f->c, &f->p, a.ino, 3 * MB + 5, buf, 5000, CORE_UNSTABLE, &st, NULL, NULL), 0);
    check_range(f, a.ino, 0, 4 * MB);
    check_range(f, a.ino, MB - 10, 2 * MB + 100);
    assert_int_equal(core_read_pieces(f->c, &f->p, a.ino, MB, 2 * MB, &ps), 0);
    assert_int_equal(ps.n, 1); /* one hole */
    assert_int_equal(ps.v[0].fd, -1);
    assert_null(ps.v[0].mem);
    core_pieces_release(&ps);
    /* a directory or a missing inode */
    assert_int_equal(core_read_pieces(f->c, &f->p, f->bucket, 0, 10, &ps), -EISDIR);
    assert_int_equal(core_read_pieces(f->c, &f->p, 999999, 0, 10, &ps), SRV_ESTALE);
    free(buf);
}

/* Flip one byte of every copy of @p pat (64 bytes at a 4 KiB boundary) in
 * the data files, with O_DIRECT when @p direct (the page cache is bypassed
 * and dropped), else through the page cache. @return copies changed. */
static int corrupt(struct fx *f, const uint8_t *pat, bool direct)
{
    char path[512];
    DIR *d = opendir(f->dir);
    struct dirent *de;
    int done = 0;
    uint8_t *blk = aligned_alloc(4096, 8 * MB);
    assert_non_null(d);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "data", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
        int fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));
        if (fd < 0 && direct)
            continue;
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, blk, 8 * MB, 0), 8 * MB);
        for (size_t i = 0; i + 4096 <= 8 * MB; i += 4096)
            if (memcmp(blk + i, pat, 64) == 0) {
                blk[i + 100] ^= 0xff;
                assert_int_equal(pwrite(fd, blk + i, 4096, (off_t)i), 4096);
                done++;
            }
        fsync(fd);
        close(fd);
    }
    closedir(d);
    free(blk);
    return done;
}

/* Read the first 8 MiB of every data file through the page cache. */
static void cache_data_files(struct fx *f)
{
    char path[512];
    DIR *d = opendir(f->dir);
    struct dirent *de;
    uint8_t *blk = malloc(8 * MB);
    assert_non_null(d);
    assert_non_null(blk);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "data", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, blk, 8 * MB, 0), 8 * MB);
        close(fd);
    }
    closedir(d);
    free(blk);
}

static void test_pieces_corruption(void **state)
{
    struct fx *f = *state;
    uint8_t *data = malloc(MB);
    struct core_pieces ps;
    struct core_stats st0, st1;
    /* corrupt before any read: the verification catches it */
    fx_fill(data, MB, 5);
    assert_int_equal(fx_put(f, "c1", data, MB), 0);
    assert_int_equal(core_sync(f->c), 0);
    assert_true(corrupt(f, data, false) >= 1);
    core_stats_get(f->c, &st0);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino_of(f, "c1"), 0, MB, &ps), SRV_ECORRUPT);
    assert_int_equal(ps.n, 0);
    core_stats_get(f->c, &st1);
    assert_true(st1.crc_errors > st0.crc_errors);
    /* verified and cached, then the disk changes underneath (O_DIRECT drops the
     * page-cache copy): the next read is not resident, verifies again and fails */
    fx_fill(data, MB, 6);
    assert_int_equal(fx_put(f, "c2", data, MB), 0);
    assert_int_equal(core_sync(f->c), 0);
    uint64_t ino = ino_of(f, "c2");
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, MB, &ps), 0);
    core_pieces_release(&ps);
    if (corrupt(f, data, true) == 0) {
        free(data);
        skip(); /* no O_DIRECT on this filesystem */
    }
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, MB, &ps), SRV_ECORRUPT);
    /* as above, but the changed block is read back into the page cache before
     * the next read (readahead for a neighbouring read, another process): it
     * is resident and was never verified, so the read still fails */
    fx_fill(data, MB, 9);
    assert_int_equal(fx_put(f, "c3", data, MB), 0);
    assert_int_equal(core_sync(f->c), 0);
    ino = ino_of(f, "c3");
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, MB, &ps), 0);
    core_pieces_release(&ps);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, MB, &ps), 0);
    core_pieces_release(&ps);
    assert_true(corrupt(f, data, true) >= 1);
    cache_data_files(f);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, MB, &ps), SRV_ECORRUPT);
    free(data);
}

/* Reopen the fixture's core with data_write_cache on. */
static void reopen_write_cache(struct fx *f)
{
    struct core_config cfg = fx_config(f->dir);
    cfg.data_write_cache = true;
    core_close(f->c);
    f->c = NULL;
    assert_int_equal(core_open(&f->c, &cfg), 0);
}

/* With data_write_cache, an extent is remembered as verified when it is
 * written (its pages are the ones the write filled): the first read sends it
 * from the fd, also to a caller that must not wait, for uploads and NFS
 * writes alike; once its pages left the page cache, a read verifies again
 * and catches a changed disk. */
static void test_pieces_written_cached(void **state)
{
    struct fx *f = *state;
    reopen_write_cache(f);
    size_t size = 2 * MB + 999;
    uint8_t *want = malloc(size), *got;
    struct core_pieces ps;
    struct core_principal nw = f->p;
    nw.flags |= CORE_P_NOWAIT;
    fx_fill(want, size, 11);
    assert_int_equal(fx_put(f, "w", want, size), 0);
    uint64_t ino = ino_of(f, "w");
    assert_int_equal(core_read_pieces(f->c, &nw, ino, 0, size, &ps), 0);
    assert_int_equal(ps.copied, 0);
    got = assemble(&ps);
    assert_memory_equal(got, want, size);
    free(got);
    core_pieces_release(&ps);
    /* an UNSTABLE write in place makes a new extent, known at once too */
    enum core_stable how;
    fx_fill(want, MB, 12);
    assert_int_equal(core_write(f->c, &f->p, ino, 0, want, MB, CORE_UNSTABLE, &how, NULL, NULL), 0);
    assert_int_equal(core_read_pieces(f->c, &nw, ino, 0, size, &ps), 0);
    assert_int_equal(ps.copied, 0);
    got = assemble(&ps);
    assert_memory_equal(got, want, size);
    free(got);
    core_pieces_release(&ps);
    /* durable, then the disk changes underneath (O_DIRECT drops the cached
     * pages): the next read verifies again and fails */
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_sync(f->c), 0);
    if (corrupt(f, want, true) == 0) {
        free(want);
        skip(); /* no O_DIRECT on this filesystem */
    }
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, size, &ps), SRV_ECORRUPT);
    free(want);
}

/* A store with history reuses freed space, over and over. The verified
 * mapping of a freed extent is let go and its pages dropped before the space
 * is reused (the store's drop list, or the write itself), so the writes into
 * reused space go cached again (before, the mapping kept the pages there and
 * every write into reused space went O_DIRECT, its first read to the disk:
 * issue 17). Each new object reads back right. */
static void test_reused_space_written_cached(void **state)
{
    struct fx *f = *state;
    reopen_write_cache(f);
    size_t size = 2 * MB;
    uint8_t *a = malloc(size), *b = malloc(size), *got;
    fx_fill(a, size, 21);
    fx_fill(b, size, 22);
    struct core_pieces ps;
    struct core_stats st0, st1;
    /* 48 rounds of 2 MiB fill the 64 MiB data file: the later ones reuse space */
    for (int round = 0; round < 48; round++) {
        assert_int_equal(fx_put(f, "r", round % 2 ? b : a, size), 0); /* replaces the last */
        uint64_t ino = ino_of(f, "r");
        assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, size, &ps), 0);
        got = assemble(&ps);
        assert_memory_equal(got, round % 2 ? b : a, size);
        free(got);
        core_pieces_release(&ps);
        if (round == 0)
            core_stats_get(f->c, &st0);
    }
    core_stats_get(f->c, &st1);
    print_message("cached %llu -> %llu, dropped %llu+%llu -> %llu+%llu, direct %llu -> %llu\n",
                  (unsigned long long)st0.writes_cached, (unsigned long long)st1.writes_cached,
                  (unsigned long long)st0.freed_dropped, (unsigned long long)st0.writes_dropped,
                  (unsigned long long)st1.freed_dropped, (unsigned long long)st1.writes_dropped,
                  (unsigned long long)st0.writes_direct, (unsigned long long)st1.writes_direct);
    struct {
        uint64_t off, len;
    } range = {0, 4096};
    uint64_t cs[5];
    int xfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    bool have_cachestat = xfd >= 0 && syscall(451, xfd, &range, cs, 0) == 0;
    if (xfd >= 0)
        close(xfd);
    if (st0.writes_cached == 0 || !have_cachestat) {
        free(a);
        free(b);
        skip(); /* no cached writes here, or no cachestat(2) to tell stale pages */
    }
    /* the later rounds wrote into space freed by earlier ones, still cached */
    assert_true(st1.freed_dropped + st1.writes_dropped > st0.freed_dropped + st0.writes_dropped);
    assert_int_equal(st1.writes_direct, st0.writes_direct);
    free(a);
    free(b);
}

static void test_pieces_hold_space(void **state)
{
    struct fx *f = *state;
    uint8_t *a = malloc(2 * MB), *b = malloc(2 * MB);
    fx_fill(a, 2 * MB, 7);
    fx_fill(b, 2 * MB, 8);
    assert_int_equal(fx_put(f, "held", a, 2 * MB), 0);
    uint64_t ino = ino_of(f, "held");
    assert_int_equal(core_ref(f->c, ino), 0);
    struct core_pieces ps;
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, 2 * MB, &ps), 0);
    core_pieces_release(&ps);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, 2 * MB, &ps), 0);
    /* delete it and write new objects: its space must not be reused meanwhile */
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "held", 4), 0);
    core_unref(f->c, ino);
    for (int i = 0; i < 8; i++) {
        char key[16];
        snprintf(key, sizeof(key), "new%d", i);
        assert_int_equal(fx_put(f, key, b, 2 * MB), 0);
    }
    uint8_t *got = assemble(&ps);
    assert_memory_equal(got, a, 2 * MB);
    free(got);
    core_pieces_release(&ps);
    assert_int_equal(core_read_pieces(f->c, &f->p, ino, 0, 10, &ps), SRV_ESTALE);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_peek, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_peek_bucket_memo, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_peek_eagain, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pieces_extents, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pieces_inline_holes_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pieces_corruption, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pieces_written_cached, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pieces_hold_space, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reused_space_written_cached, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
