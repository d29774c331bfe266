/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_data.c (and refs/quotas of core_main.c and
 * core_quota.c): inline files and their conversion to extents, partial
 * overwrites (copy-on-write), holes, writes across chunk boundaries,
 * truncation, concurrent writers, CRC corruption surfacing as SRV_ECORRUPT,
 * unlinked-but-referenced files, orphans across reopen, quotas, the MD5 ETag
 * of files NFS changed (kept while written in order, else computed by the
 * background worker once settled). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core_test_util.h"

#define MB (1024 * 1024)

static uint64_t mkfile(struct fx *f, const char *name)
{
    struct core_attr a;
    assert_int_equal(core_create(f->c, &f->p, f->bucket, name, strlen(name), 0644,
                                 CORE_CREATE_GUARDED, 0, &a),
                     0);
    return a.ino;
}

static void wr(struct fx *f, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
    enum core_stable st;
    assert_int_equal(core_write(f->c, &f->p, ino, off, buf, len, CORE_UNSTABLE, &st, NULL, NULL),
                     0);
    assert_true(st >= CORE_UNSTABLE);
}

/* Check the file equals @p model (size and bytes). */
static void check(struct fx *f, uint64_t ino, const uint8_t *model, size_t size)
{
    struct core_attr a;
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), 0);
    assert_int_equal(a.size, size);
    uint8_t *buf = malloc(size + 100);
    size_t n;
    bool eof;
    assert_int_equal(core_read(f->c, &f->p, ino, 0, buf, size + 100, &n, &eof), 0);
    assert_int_equal(n, size);
    assert_true(eof);
    assert_memory_equal(buf, model, size);
    free(buf);
}

static void test_inline_and_convert(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "a");
    uint8_t *model = calloc(1, 3 * MB);
    wr(f, ino, 0, "hello", 5);
    memcpy(model, "hello", 5);
    check(f, ino, model, 5);
    wr(f, ino, 100, "x", 1); /* hole inside inline */
    model[100] = 'x';
    check(f, ino, model, 101);
    /* past inline_max: converts to extents keeping the old bytes */
    uint8_t big[10000];
    fx_fill(big, sizeof(big), 3);
    wr(f, ino, 3000, big, sizeof(big));
    memcpy(model + 3000, big, sizeof(big));
    check(f, ino, model, 13000);
    struct core_attr a;
    /* space of UNSTABLE writes is counted once committed */
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), 0);
    assert_int_equal(a.used, 101 + 10000); /* the hole [101, 3000) holds no space */
    /* partial overwrite in the middle of an extent, and across the 1 MiB grid */
    wr(f, ino, 50, "ABC", 3);
    memcpy(model + 50, "ABC", 3);
    fx_fill(big, sizeof(big), 4);
    wr(f, ino, MB - 5000, big, sizeof(big));
    memcpy(model + MB - 5000, big, sizeof(big));
    check(f, ino, model, MB + 5000);
    /* a far hole reads as zeros */
    wr(f, ino, 3 * MB - 10, "end", 3);
    memcpy(model + 3 * MB - 10, "end", 3);
    check(f, ino, model, 3 * MB - 7);
    /* reads at and past eof */
    char buf[16];
    size_t n;
    bool eof;
    assert_int_equal(core_read(f->c, &f->p, ino, 3 * MB, buf, 16, &n, &eof), 0);
    assert_int_equal(n, 0);
    assert_true(eof);
    assert_int_equal(core_read(f->c, &f->p, ino, 3 * MB - 9, buf, 4, &n, &eof), 0);
    assert_int_equal(n, 2);
    assert_true(eof);
    assert_int_equal(core_read(f->c, &f->p, f->bucket, 0, buf, 4, &n, &eof), -EISDIR);
    /* data survives a reopen */
    fx_reopen(f);
    check(f, ino, model, 3 * MB - 7);
    free(model);
}

static void test_truncate(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "t");
    size_t sz = 2 * MB + 777;
    uint8_t *model = malloc(4 * MB);
    fx_fill(model, sz, 5);
    wr(f, ino, 0, model, sz);
    struct core_setattr sa;
    memset(&sa, 0, sizeof(sa));
    sa.mask = CORE_SET_SIZE;
    sa.size = MB + 10;
    struct core_attr post;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    assert_int_equal(post.size, MB + 10);
    check(f, ino, model, MB + 10);
    /* extend: the cut bytes must read as zeros */
    sa.size = 3 * MB;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    memset(model + MB + 10, 0, 3 * MB - (MB + 10));
    check(f, ino, model, 3 * MB);
    /* write into the previously cut region */
    wr(f, ino, MB + 20, "zz", 2);
    memcpy(model + MB + 20, "zz", 2);
    check(f, ino, model, 3 * MB);
    /* to zero and back to inline */
    sa.size = 0;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    assert_int_equal(post.used, 0);
    wr(f, ino, 0, "again", 5);
    check(f, ino, (const uint8_t *)"again", 5);
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &post), 0);
    assert_int_equal(post.used, 5);
    /* inline truncate */
    sa.size = 2;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    check(f, ino, (const uint8_t *)"ag", 2);
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2);
    /* shrinking inside an extent frees the space past the new end: used and
     * the usage counters follow the size (committed and pending data alike) */
    uint64_t g = mkfile(f, "g");
    fx_fill(model, 300000, 8);
    assert_int_equal(core_write(f->c, &f->p, g, 0, model, 300000, CORE_FILE_SYNC, NULL, NULL,
                                NULL),
                     0);
    sa.size = 10;
    assert_int_equal(core_setattr(f->c, &f->p, g, &sa, NULL, &post), 0);
    assert_int_equal(post.used, 10);
    check(f, g, model, 10);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2 + 10);
    wr(f, g, 0, model, 2 * MB + 5); /* pending, then cut in the middle of its second extent */
    sa.size = MB + 100;
    assert_int_equal(core_setattr(f->c, &f->p, g, &sa, NULL, &post), 0);
    assert_int_equal(post.used, MB + 100);
    check(f, g, model, MB + 100);
    sa.size = 2 * MB; /* extended again: the cut bytes read as zeros */
    assert_int_equal(core_setattr(f->c, &f->p, g, &sa, NULL, &post), 0);
    memset(model + MB + 100, 0, MB - 100);
    check(f, g, model, 2 * MB);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2 + MB + 100);
    /* acknowledged UNSTABLE writes count in used and usage before their commit */
    uint64_t h = mkfile(f, "h");
    wr(f, h, 0, model, 1000);
    assert_int_equal(core_getattr(f->c, &f->p, h, 0, &post), 0);
    assert_int_equal(post.used, 1000);
    wr(f, h, 0, model, 300000); /* converts: the inline bytes are replaced */
    assert_int_equal(core_getattr(f->c, &f->p, h, 0, &post), 0);
    assert_int_equal(post.used, 300000);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2 + MB + 100 + 300000);
    assert_int_equal(core_usage_get(f->c, 1, 0, &u), 0);
    assert_int_equal(u.bytes, 2 + MB + 100 + 300000);
    assert_int_equal(core_commit(f->c, &f->p, h), 0);
    assert_int_equal(core_getattr(f->c, &f->p, h, 0, &post), 0);
    assert_int_equal(post.used, 300000);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2 + MB + 100 + 300000);
    free(model);
}

struct wthr {
    struct fx *f;
    uint64_t ino;
    int idx;
};

static void *writer(void *arg)
{
    struct wthr *w = arg;
    uint8_t *buf = malloc(256 * 1024);
    for (int i = 0; i < 8; i++) {
        /* thread idx owns every 4th 64 KiB block */
        uint64_t off = (uint64_t)(i * 4 + w->idx) * 65536;
        memset(buf, 'a' + w->idx, 65536);
        if (core_write(w->f->c, &w->f->p, w->ino, off, buf, 65536, CORE_FILE_SYNC, NULL, NULL,
                       NULL) != 0)
            abort();
    }
    free(buf);
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "c");
    pthread_t th[4];
    struct wthr w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct wthr){f, ino, i};
        pthread_create(&th[i], NULL, writer, &w[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    uint8_t *model = malloc(32 * 65536);
    for (int b = 0; b < 32; b++)
        memset(model + b * 65536, 'a' + b % 4, 65536);
    check(f, ino, model, 32 * 65536);
    free(model);
    struct core_stats st;
    core_stats_get(f->c, &st);
    assert_true(st.commits > 0);
    assert_true(st.commit_ops >= st.commits);
}

static void *rmw_writer(void *arg)
{
    struct wthr *w = arg;
    uint8_t buf[4096];
    memset(buf, 'A' + w->idx, sizeof(buf));
    for (int i = 0; i < 16; i++) {
        /* thread idx owns 4 KiB slots idx, idx + 16, ... of one 1 MiB extent */
        uint64_t off = (uint64_t)(i * 16 + w->idx) * 4096;
        if (core_write(w->f->c, &w->f->p, w->ino, off, buf, sizeof(buf), CORE_UNSTABLE, NULL, NULL,
                       NULL) != 0)
            abort();
    }
    return NULL;
}

/* Many writers patching the same extent (read-modify-write races): no update lost. */
static void test_contended_rmw(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "rmw");
    uint8_t *model = malloc(MB);
    memset(model, '.', MB);
    wr(f, ino, 0, model, MB);
    pthread_t th[16];
    struct wthr w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (struct wthr){f, ino, i};
        pthread_create(&th[i], NULL, rmw_writer, &w[i]);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    for (int s = 0; s < 256; s++)
        memset(model + s * 4096, 'A' + s % 16, 4096);
    check(f, ino, model, MB);
    free(model);
}

static void test_crc_corruption(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "crc");
    uint8_t *buf = malloc(MB);
    fx_fill(buf, MB, 6);
    wr(f, ino, 0, buf, MB);
    assert_int_equal(core_sync(f->c), 0);
    /* flip bytes everywhere in the data file where this extent may lie */
    char path[512];
    DIR *d = opendir(f->dir);
    struct dirent *de;
    int done = 0;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "data", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        uint8_t *blk = malloc(4 * MB);
        assert_int_equal(pread(fd, blk, 4 * MB, 0), 4 * MB);
        for (size_t i = 0; i + MB <= 4 * MB; i += 4096)
            if (memcmp(blk + i, buf, 64) == 0) {
                blk[i + 100] ^= 0xff;
                assert_int_equal(pwrite(fd, blk + i + 100, 1, (off_t)(i + 100)), 1);
                done = 1;
            }
        fsync(fd);
        close(fd);
        free(blk);
    }
    closedir(d);
    assert_true(done);
    size_t n;
    bool eof;
    assert_int_equal(core_read(f->c, &f->p, ino, 0, buf, 4096, &n, &eof), SRV_ECORRUPT);
    struct core_stats st;
    core_stats_get(f->c, &st);
    assert_true(st.crc_errors >= 1);
    /* a partial overwrite of the corrupt extent fails cleanly too */
    assert_int_equal(core_write(f->c, &f->p, ino, 10, "x", 1, CORE_FILE_SYNC, NULL, NULL, NULL),
                     SRV_ECORRUPT);
    /* a whole overwrite replaces it */
    fx_fill(buf, MB, 7);
    wr(f, ino, 0, buf, MB);
    check(f, ino, buf, MB);
    free(buf);
}

/* Corrupt one byte of the data file at extent byte @p at, for the extent whose
 * first 64 bytes equal @p head. @return 1 when found. */
static int corrupt(struct fx *f, const uint8_t *head, size_t at)
{
    char path[512];
    int done = 0;
    DIR *d = opendir(f->dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "data", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
        int fd = open(path, O_RDWR);
        uint8_t *blk = malloc(8 * MB);
        ssize_t got = pread(fd, blk, 8 * MB, 0);
        for (ssize_t i = 0; i + 64 <= got; i += 4096)
            if (memcmp(blk + i, head, 64) == 0) {
                uint8_t b = blk[i + at] ^ 0x5a;
                assert_int_equal(pwrite(fd, &b, 1, (off_t)(i + at)), 1);
                done = 1;
            }
        fsync(fd);
        close(fd);
        free(blk);
    }
    closedir(d);
    return done;
}

static void test_crc_blocks(void **state)
{
    struct fx *f = *state;
    uint8_t *buf = malloc(MB), *got = malloc(MB);
    size_t n;
    bool eof;
    fx_fill(buf, MB, 11);
    assert_int_equal(fx_put(f, "obj", buf, MB), 0);
    assert_int_equal(core_sync(f->c), 0);
    assert_true(corrupt(f, buf, 5 * 16384 + 7));
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "obj", 3, &oi), 0);
    free(oi.meta);
    /* blocks other than the damaged one still read; the damaged one fails */
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 0, got, 4096, &n, &eof), 0);
    assert_memory_equal(got, buf, 4096);
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 6 * 16384, got, 65536, &n, &eof), 0);
    assert_memory_equal(got, buf + 6 * 16384, 65536);
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 5 * 16384 + 100, got, 10, &n, &eof),
                     SRV_ECORRUPT);
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 0, got, MB, &n, &eof), SRV_ECORRUPT);
    struct core_stats st;
    core_stats_get(f->c, &st);
    assert_true(st.crc_errors >= 2);
    free(buf);
    free(got);
}

/* Large block-aligned reads into aligned memory take the O_DIRECT batch path:
 * several extents at once, holes and the tail zeroed, block CRCs checked. */
static void test_direct_read(void **state)
{
    struct fx *f = *state;
    size_t cap = 6 * MB;
    uint8_t *model = calloc(1, cap), *got = aligned_alloc(4096, cap);
    size_t n;
    bool eof;
    uint64_t ino = mkfile(f, "direct");
    fx_fill(model, 2 * MB + 5000, 21);
    wr(f, ino, 0, model, MB);
    wr(f, ino, MB, model + MB, MB + 5000);
    /* a hole [2 MiB + 5000, 4 MiB), then 100 KiB */
    fx_fill(model + 4 * MB, 100 * 1024, 22);
    wr(f, ino, 4 * MB, model + 4 * MB, 100 * 1024);
    uint64_t size = 4 * MB + 100 * 1024;
    for (int committed = 0; committed < 2; committed++) {
        memset(got, 0xaa, cap);
        assert_int_equal(core_read(f->c, &f->p, ino, 0, got, cap, &n, &eof), 0);
        assert_int_equal(n, size);
        assert_true(eof);
        assert_memory_equal(got, model, size);
        memset(got, 0xaa, cap);
        assert_int_equal(core_read(f->c, &f->p, ino, 16384, got, 2 * MB, &n, &eof), 0);
        assert_int_equal(n, 2 * MB);
        assert_memory_equal(got, model + 16384, 2 * MB);
        assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    }
    fx_reopen(f);
    memset(got, 0xaa, cap);
    assert_int_equal(core_read(f->c, &f->p, ino, 0, got, cap, &n, &eof), 0);
    assert_int_equal(n, size);
    assert_memory_equal(got, model, size);
    /* a damaged block fails the direct read and no byte is handed out */
    assert_true(corrupt(f, model + MB, 3 * 16384 + 1));
    memset(got, 0xaa, cap);
    assert_int_equal(core_read(f->c, &f->p, ino, 0, got, cap, &n, &eof), SRV_ECORRUPT);
    for (size_t i = 0; i < size; i += 4096)
        assert_int_equal(got[i], 0);
    free(model);
    free(got);
}

/* In-place rewrites (truncate to 0, then one write of a self-checking content)
 * racing readers: a read returns one whole version (or nothing), never a mix. */
struct rewr {
    struct fx *f;
    uint64_t ino;
    atomic_int stop;
    atomic_int torn;
};

static bool self_ok(const uint8_t *b, size_t n)
{
    if (n == 0)
        return true;
    if (n < 8)
        return false;
    uint32_t len, seed;
    memcpy(&len, b, 4);
    memcpy(&seed, b + 4, 4);
    if (len != n)
        return false;
    for (size_t i = 8; i < n; i++)
        if (b[i] != (uint8_t)(seed + i * 7))
            return false;
    return true;
}

static void *rewriter(void *arg)
{
    struct rewr *w = arg;
    uint8_t *buf = malloc(100000);
    static const size_t sizes[] = {33, 132, 4096, 4128, 5000, 20000, 70000, 100000};
    for (uint32_t i = 0; i < 400; i++) {
        uint32_t len = (uint32_t)sizes[(i * 7) % 8], seed = i * 2654435761u;
        memcpy(buf, &len, 4);
        memcpy(buf + 4, &seed, 4);
        for (size_t k = 8; k < len; k++)
            buf[k] = (uint8_t)(seed + k * 7);
        struct core_setattr sa;
        memset(&sa, 0, sizeof(sa));
        sa.mask = CORE_SET_SIZE;
        assert_int_equal(core_setattr(w->f->c, &w->f->p, w->ino, &sa, NULL, NULL), 0);
        assert_int_equal(core_write(w->f->c, &w->f->p, w->ino, 0, buf, len,
                                    i % 3 == 0 ? CORE_FILE_SYNC : CORE_UNSTABLE, NULL, NULL, NULL),
                         0);
        if (i % 5 == 0)
            assert_int_equal(core_commit(w->f->c, &w->f->p, w->ino), 0);
    }
    atomic_store(&w->stop, 1);
    free(buf);
    return NULL;
}

static void *rereader(void *arg)
{
    struct rewr *w = arg;
    uint8_t *buf = malloc(200000);
    while (!atomic_load(&w->stop)) {
        size_t n;
        bool eof;
        int rc = core_read(w->f->c, &w->f->p, w->ino, 0, buf, 200000, &n, &eof);
        if (rc || !self_ok(buf, n)) {
            if (atomic_fetch_add(&w->torn, 1) < 5) {
                uint32_t l = 0;
                memcpy(&l, buf, 4);
                fprintf(stderr, "torn read: rc=%d n=%zu hdr len=%u\n", rc, n, l);
            }
        }
    }
    free(buf);
    return NULL;
}

static void test_rewrite_vs_read(void **state)
{
    struct fx *f = *state;
    struct rewr w = {.f = f, .ino = mkfile(f, "rewr")};
    pthread_t a, b[2];
    pthread_create(&a, NULL, rewriter, &w);
    for (int i = 0; i < 2; i++)
        pthread_create(&b[i], NULL, rereader, &w);
    pthread_join(a, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(b[i], NULL);
    assert_int_equal(atomic_load(&w.torn), 0);
}

/* Pending (uncommitted) writes of a file that goes away are dropped and their
 * space is free again: unlink, rename over it, S3 replace. */
static void test_pending_dropped(void **state)
{
    struct fx *f = *state;
    uint8_t *buf = malloc(2 * MB);
    struct core_stats s0, s1;
    fx_fill(buf, 2 * MB, 31);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s0);
    uint64_t a = mkfile(f, "pa");
    wr(f, a, 0, buf, 2 * MB);
    core_stats_get(f->c, &s1);
    assert_true(s1.store_free < s0.store_free);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "pa", 2), 0);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s1);
    assert_int_equal(s1.store_free, s0.store_free);
    /* rename over a file with pending writes */
    uint64_t b = mkfile(f, "pb");
    wr(f, b, 0, buf, MB);
    uint64_t c2 = mkfile(f, "pc");
    wr(f, c2, 0, "new", 3);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "pc", 2, f->bucket, "pb", 2), 0);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "pb", &d, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(d, "new", 3);
    free(d);
    /* S3 replace of a file with pending writes */
    uint64_t e = mkfile(f, "pe");
    wr(f, e, 0, buf, MB + 7);
    assert_int_equal(fx_put(f, "pe", "s3", 2), 0);
    assert_int_equal(fx_get(f, "pe", &d, &n), 0);
    assert_int_equal(n, 2);
    free(d);
    struct core_attr at;
    assert_int_equal(core_getattr(f->c, &f->p, e, 0, &at), SRV_ESTALE);
    assert_int_equal(core_write(f->c, &f->p, e, 0, "x", 1, CORE_UNSTABLE, NULL, NULL, NULL),
                     SRV_ESTALE);
    assert_int_equal(core_sync(f->c), 0);
    /* only the 3 + 2 bytes left, both inline */
    core_stats_get(f->c, &s1);
    assert_int_equal(s1.store_free, s0.store_free);
    (void)b;
    free(buf);
}

/* Writes a flush of the server's own made durable (core_sync here; the 64 MiB bound
 * or a rename in use) stay reported by core_pending_writes until the writer's COMMIT
 * or a stable write: the tier leaves a file alone while its writer is at it. */
static void test_pending_until_commit(void **state)
{
    struct fx *f = *state;
    uint8_t *buf = malloc(4 * MB);
    fx_fill(buf, 4 * MB, 41);
    uint64_t a = mkfile(f, "pw");
    int64_t last = 0;
    assert_int_equal(core_pending_writes(f->c, a, &last), 0);
    wr(f, a, 0, buf, 2 * MB);
    assert_int_equal(core_pending_writes(f->c, a, &last), 1);
    assert_true(last > 0);
    assert_int_equal(core_sync(f->c), 0); /* durable, not acknowledged */
    last = 0;
    assert_int_equal(core_pending_writes(f->c, a, &last), 1);
    assert_true(last > 0);
    assert_int_equal(core_commit(f->c, &f->p, a), 0);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 0);
    wr(f, a, 2 * MB, buf + 2 * MB, MB);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 1);
    assert_int_equal(core_commit(f->c, &f->p, a), 0);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 0);
    /* a stable write is its writer's own commit */
    wr(f, a, 3 * MB, buf + 3 * MB, MB / 2);
    assert_int_equal(core_write(f->c, &f->p, a, 3 * MB + MB / 2, buf + 3 * MB + MB / 2, MB / 2,
                                CORE_FILE_SYNC, NULL, NULL, NULL),
                     0);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 0);
    check(f, a, buf, 4 * MB);
    free(buf);
}

/* The same for files without a running MD5: written out of order, or past
 * CORE_MD5_INLINE_MAX (a checkpoint shard of 128 MiB). Their records used to go at the
 * server's own flush, and with them the writer's state: the tier then took a shard
 * still being written for finished. */
static void test_pending_until_commit_no_md5(void **state)
{
    struct fx *f = *state;
    size_t big = 18 * MB; /* past CORE_MD5_INLINE_MAX (16 MiB) */
    uint8_t *buf = malloc(big);
    fx_fill(buf, big, 42);
    /* out of order: the second MiB first */
    uint64_t a = mkfile(f, "ooo");
    wr(f, a, MB, buf + MB, MB);
    wr(f, a, 0, buf, MB);
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 1);
    assert_int_equal(core_commit(f->c, &f->p, a), 0);
    assert_int_equal(core_pending_writes(f->c, a, NULL), 0);
    check(f, a, buf, 2 * MB);
    /* in order, past the running MD5's limit */
    uint64_t b = mkfile(f, "big");
    for (size_t off = 0; off < big; off += 4 * MB)
        wr(f, b, off, buf + off, big - off < 4 * MB ? big - off : 4 * MB);
    assert_int_equal(core_sync(f->c), 0);
    int64_t last = 0;
    assert_int_equal(core_pending_writes(f->c, b, &last), 1);
    assert_true(last > 0);
    assert_int_equal(core_commit(f->c, &f->p, b), 0);
    assert_int_equal(core_pending_writes(f->c, b, NULL), 0);
    check(f, b, buf, big);
    free(buf);
}

static void test_unlink_open(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "open");
    uint8_t *buf = malloc(2 * MB);
    fx_fill(buf, 2 * MB, 8);
    wr(f, ino, 0, buf, 2 * MB);
    assert_int_equal(core_ref(f->c, ino), 0);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "open", 4), 0);
    struct core_attr a;
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "open", 4, &a), -ENOENT);
    check(f, ino, buf, 2 * MB);
    struct core_stats s1, s2;
    core_stats_get(f->c, &s1);
    core_unref(f->c, ino);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), SRV_ESTALE);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s2);
    assert_true(s2.store_free >= s1.store_free + 2 * MB);
    /* an orphan left by a "crash" (close without unref) is reclaimed at open */
    ino = mkfile(f, "open2");
    wr(f, ino, 0, buf, 2 * MB);
    assert_int_equal(core_ref(f->c, ino), 0);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "open2", 5), 0);
    fx_reopen(f);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), SRV_ESTALE);
    core_stats_get(f->c, &s2);
    assert_int_equal(s2.store_free, s2.store_capacity);
    assert_int_equal(core_ref(f->c, ino), SRV_ESTALE);
    free(buf);
}

static void test_quota(void **state)
{
    struct fx *f = *state;
    struct core_usage u;
    uint8_t *buf = malloc(2 * MB);
    fx_fill(buf, 2 * MB, 9);
    assert_int_equal(fx_put(f, "keep", buf, MB), 0);
    assert_int_equal(core_quota_set(f->c, 1, f->bucket, MB + MB / 2, 0), 0);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes_limit, MB + MB / 2);
    assert_int_equal(u.bytes, MB);
    assert_int_equal(core_quota_admit(f->c, &f->p, f->bucket, MB, 0), -EDQUOT);
    assert_int_equal(core_quota_admit(f->c, &f->p, f->bucket, 1000, 0), 0);
    /* the upload is refused at admission or at commit, and nothing changes */
    struct core_upload *up;
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, MB, &up), -EDQUOT);
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, UINT64_MAX, &up), 0);
    assert_int_equal(core_upload_write(up, buf, MB), 0);
    assert_int_equal(core_upload_commit(up, "more", 4, "e", NULL, 0, NULL, false, NULL), -EDQUOT);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "more", 4, &oi), -ENOENT);
    /* overwriting "keep" with a bigger object fails and keeps the old data */
    assert_int_equal(fx_put(f, "keep", buf, 2 * MB), -EDQUOT);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "keep", &d, &n), 0);
    assert_int_equal(n, MB);
    assert_memory_equal(d, buf, MB);
    free(d);
    /* NFS write past the limit */
    uint64_t ino = mkfile(f, "nfs");
    assert_int_equal(core_write(f->c, &f->p, ino, 0, buf, MB, CORE_FILE_SYNC, NULL, NULL, NULL),
                     -EDQUOT);
    struct core_attr a;
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), 0);
    assert_int_equal(a.size, 0);
    /* inode quota on a directory */
    assert_int_equal(core_quota_set(f->c, 1, f->bucket, 0, 0), 0);
    struct core_attr dir;
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "qd", 2, 0755, &dir), 0);
    assert_int_equal(fx_put(f, "qd/one", "1", 1), 0);
    assert_int_equal(core_quota_set(f->c, 1, dir.ino, 0, 2), 0);
    assert_int_equal(core_usage_get(f->c, 1, dir.ino, &u), 0);
    assert_int_equal(u.inodes, 1);
    assert_int_equal(u.bytes, 1);
    assert_int_equal(fx_put(f, "qd/two", "2", 1), 0);
    assert_int_equal(fx_put(f, "qd/three", "3", 1), -EDQUOT);
    assert_int_equal(core_create(f->c, &f->p, dir.ino, "x", 1, 0644, 0, 0, &a), -EDQUOT);
    assert_int_equal(fx_put(f, "qd/sub/deep", "3", 1), -EDQUOT);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "qd/one", 6), 0);
    assert_int_equal(fx_put(f, "qd/three", "3", 1), 0);
    /* tenant quota */
    assert_int_equal(core_quota_set(f->c, 1, 0, 0, 1), 0);
    assert_int_equal(core_bucket_create(f->c, &f->p, "another", 7, &a), -EDQUOT);
    assert_int_equal(core_usage_get(f->c, 1, 0, &u), 0);
    assert_true(u.inodes > 1);
    free(buf);
}

static void test_quota_rename(void **state)
{
    struct fx *f = *state;
    struct core_usage ua, ub;
    struct core_attr a, b;
    assert_int_equal(fx_put(f, "A/s/one", "1", 1), 0);
    assert_int_equal(fx_put(f, "A/s/two", "22", 2), 0);
    assert_int_equal(fx_put(f, "B/x", "x", 1), 0);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "A", 1, &a), 0);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "B", 1, &b), 0);
    assert_int_equal(core_quota_set(f->c, 1, a.ino, 0, 10), 0);
    assert_int_equal(core_quota_set(f->c, 1, b.ino, 0, 2), 0);
    assert_int_equal(core_usage_get(f->c, 1, a.ino, &ua), 0);
    assert_int_equal(ua.inodes, 3); /* s, one, two */
    assert_int_equal(ua.bytes, 3);
    /* moving s (3 inodes) into B (limit 2, 1 used) is refused and changes nothing */
    assert_int_equal(core_rename(f->c, &f->p, a.ino, "s", 1, b.ino, "s", 1), -EDQUOT);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "A/s/two", 7, &oi), 0);
    free(oi.meta);
    assert_int_equal(core_quota_set(f->c, 1, b.ino, 0, 5), 0);
    assert_int_equal(core_rename(f->c, &f->p, a.ino, "s", 1, b.ino, "s", 1), 0);
    assert_int_equal(core_usage_get(f->c, 1, a.ino, &ua), 0);
    assert_int_equal(core_usage_get(f->c, 1, b.ino, &ub), 0);
    assert_int_equal(ua.inodes, 0);
    assert_int_equal(ua.bytes, 0);
    assert_int_equal(ub.inodes, 4);
    assert_int_equal(ub.bytes, 4);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "B/s/two", 7, &oi), 0);
    free(oi.meta);
    /* limits survive a reopen and keep applying */
    fx_reopen(f);
    assert_int_equal(fx_put(f, "B/s/three", "3", 1), 0);
    assert_int_equal(fx_put(f, "B/s/four", "4", 1), -EDQUOT);
    assert_int_equal(core_quota_admit(f->c, &f->p, b.ino, 0, 1), -EDQUOT);
    assert_int_equal(core_quota_admit(f->c, &f->p, a.ino, 0, 1), 0);
}

/* UNSTABLE writes hold their bytes until committed: a byte limit stops them,
 * overwrites (adding nothing) still go, S3 uploads count them, and removing
 * a file with pending data gives its reservation back. */
static void test_quota_pending(void **state)
{
    struct fx *f = *state;
    struct core_usage u;
    uint8_t *buf = malloc(256 * 1024);
    fx_fill(buf, 256 * 1024, 5);
    assert_int_equal(core_quota_set(f->c, 1, f->bucket, MB, 0), 0);
    uint64_t ino[5];
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof(name), "u%d", i);
        ino[i] = mkfile(f, name);
        wr(f, ino[i], 0, buf, 256 * 1024);
    }
    ino[4] = mkfile(f, "u4");
    assert_int_equal(core_write(f->c, &f->p, ino[4], 0, buf, 4096, CORE_UNSTABLE, NULL, NULL,
                                NULL),
                     -EDQUOT);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, MB);
    /* an overwrite of pending data adds nothing: admitted at the limit */
    wr(f, ino[1], 1000, buf, 5000);
    /* S3 counts the pending bytes too (at admission and at commit) */
    assert_int_equal(fx_put(f, "s3", buf, 5000), -EDQUOT);
    assert_int_equal(core_quota_admit(f->c, &f->p, f->bucket, 1, 0), -EDQUOT);
    /* committed, the same bytes are charged once */
    for (int i = 0; i < 4; i++)
        assert_int_equal(core_commit(f->c, &f->p, ino[i]), 0);
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, MB);
    assert_int_equal(core_write(f->c, &f->p, ino[4], 0, buf, 4096, CORE_FILE_SYNC, NULL, NULL,
                                NULL),
                     -EDQUOT);
    /* pending data of a removed file gives its reservation back */
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "u0", 2), 0);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "u1", 2), 0);
    wr(f, ino[4], 0, buf, 256 * 1024);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "u4", 2), 0);
    uint64_t x = mkfile(f, "x");
    wr(f, x, 0, buf, 256 * 1024);
    wr(f, x, 256 * 1024, buf, 256 * 1024);
    assert_int_equal(core_write(f->c, &f->p, x, 512 * 1024, buf, 1, CORE_UNSTABLE, NULL, NULL,
                                NULL),
                     -EDQUOT);
    /* a limit on a directory counts pending writes below it */
    assert_int_equal(core_quota_set(f->c, 1, f->bucket, 0, 0), 0);
    struct core_attr dir, a;
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "qd", 2, 0755, &dir), 0);
    assert_int_equal(core_quota_set(f->c, 1, dir.ino, 300 * 1024, 0), 0);
    assert_int_equal(core_create(f->c, &f->p, dir.ino, "a", 1, 0644, 0, 0, &a), 0);
    wr(f, a.ino, 0, buf, 256 * 1024);
    assert_int_equal(core_create(f->c, &f->p, dir.ino, "b", 1, 0644, 0, 0, &a), 0);
    assert_int_equal(core_write(f->c, &f->p, a.ino, 0, buf, 64 * 1024, CORE_UNSTABLE, NULL, NULL,
                                NULL),
                     -EDQUOT);
    assert_int_equal(fx_put(f, "qd/s3", buf, 64 * 1024), -EDQUOT);
    wr(f, a.ino, 0, buf, 40 * 1024);
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(core_usage_get(f->c, 1, dir.ino, &u), 0);
    assert_int_equal(u.bytes, 296 * 1024);
    free(buf);
}

struct qrace {
    struct fx *f;
    int id;
    enum core_stable stable;
    atomic_uint_fast64_t *acked;
};

static void *qrace_main(void *arg)
{
    struct qrace *q = arg;
    struct fx *f = q->f;
    uint8_t buf[40 * 1024];
    fx_fill(buf, sizeof(buf), (uint32_t)q->id);
    for (int i = 0; i < 40; i++) {
        char name[32];
        struct core_attr a;
        snprintf(name, sizeof(name), "r%d-%d", q->id, i);
        int rc = core_create(f->c, &f->p, f->bucket, name, strlen(name), 0644, 0, 0, &a);
        assert_int_equal(rc, 0);
        rc = core_write(f->c, &f->p, a.ino, 0, buf, sizeof(buf), q->stable, NULL, NULL, NULL);
        assert_true(rc == 0 || rc == -EDQUOT);
        if (rc == 0)
            atomic_fetch_add(q->acked, sizeof(buf));
    }
    return NULL;
}

/* Writers racing for the last bytes of a limit never pass it together. */
static void test_quota_race(void **state)
{
    struct fx *f = *state;
    struct core_usage u;
    for (int round = 0; round < 2; round++) {
        atomic_uint_fast64_t acked = 0;
        pthread_t th[8];
        struct qrace q[8];
        struct core_attr b;
        char bname[16];
        snprintf(bname, sizeof(bname), "race%d", round);
        assert_int_equal(core_bucket_create(f->c, &f->p, bname, strlen(bname), &b), 0);
        struct fx g = *f;
        g.bucket = b.ino;
        assert_int_equal(core_quota_set(f->c, 1, b.ino, MB, 0), 0);
        for (int i = 0; i < 8; i++) {
            q[i] = (struct qrace){&g, i, i % 2 ? CORE_FILE_SYNC : CORE_UNSTABLE, &acked};
            assert_int_equal(pthread_create(&th[i], NULL, qrace_main, &q[i]), 0);
        }
        for (int i = 0; i < 8; i++)
            pthread_join(th[i], NULL);
        assert_true(atomic_load(&acked) <= MB);
        assert_true(atomic_load(&acked) >= MB / 2); /* the limit did fill up */
        assert_int_equal(core_usage_get(f->c, 1, b.ino, &u), 0);
        assert_int_equal(u.bytes, atomic_load(&acked));
        assert_int_equal(core_sync(f->c), 0);
        assert_int_equal(core_usage_get(f->c, 1, b.ino, &u), 0);
        assert_int_equal(u.bytes, atomic_load(&acked));
    }
}

static void test_verifier(void **state)
{
    struct fx *f = *state;
    uint64_t v1 = core_write_verifier(f->c);
    fx_reopen(f);
    assert_true(core_write_verifier(f->c) != v1);
    uint64_t ino = mkfile(f, "v");
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_commit(f->c, &f->p, 123456789), SRV_ESTALE);
}

static int etag_cb(void *arg, const struct core_listent *e)
{
    if (!e->is_prefix && e->keylen == 2 && memcmp(e->key, "md", 2) == 0)
        snprintf(arg, CORE_ETAG_MAX + 1, "%s", e->info->etag);
    return 0;
}

static void test_nfs_etag(void **state)
{
    struct fx *f = *state;
    uint64_t ino = mkfile(f, "md");
    struct core_objinfo oi;
    char listed[CORE_ETAG_MAX + 1] = "";
    bool tr;
    wr(f, ino, 0, "hel", 3);
    wr(f, ino, 3, "lo", 2);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "md", 2, &oi), 0);
    assert_string_equal(oi.etag, "5d41402abc4b2a76b9719d911017c592"); /* md5("hello") */
    free(oi.meta);
    /* committed: the MD5 kept while the file was written in order is stored
     * with it, so a listing shows it without any lookup having computed it */
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 100, etag_cb,
                               listed, &tr),
                     0);
    assert_string_equal(listed, "5d41402abc4b2a76b9719d911017c592");
    /* an S3 upload's ETag and metadata survive until the next NFS write */
    assert_int_equal(fx_put(f, "md", "hello", 5), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "md", 2, &oi), 0);
    assert_string_equal(oi.etag, "etag");
    free(oi.meta);
    assert_int_equal(core_key_set_meta(f->c, &f->p, f->bucket, "md", 2, "M", 1), 0);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "md", 2, &oi.attr), 0);
    wr(f, oi.attr.ino, 0, "J", 1);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "md", 2, &oi), 0);
    assert_string_equal(oi.etag, "bedad9eef4de4b391cc5aeb8ddbe6387"); /* md5("Jello") */
    assert_int_equal(oi.metalen, 1);
    free(oi.meta);
}

static void md5_hex(const void *buf, size_t len, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(buf, len, md, &n, EVP_md5(), NULL);
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int bytes_io(void *arg, uint64_t bytes)
{
    *(uint64_t *)arg += bytes;
    return 0;
}

/* The ETag a listing shows for @p key. */
static void listed_etag(struct fx *f, const char *key, char *out)
{
    bool tr;
    out[0] = '\0';
    assert_int_equal(
        core_list(f->c, &f->p, f->bucket, key, strlen(key), NULL, 0, NULL, 0, 1, etag_cb, out, &tr),
        0);
}

/* Files whose MD5 is not known when their data is committed (written out of
 * order, truncated) get it from the background worker once settled, through
 * its read hook; pending writes hold a file back; the work survives a restart. */
static void test_bg_etag(void **state)
{
    struct fx *f = *state;
    size_t size = 3 * MB + 1234;
    uint8_t *data = malloc(size);
    char want[33], got[CORE_ETAG_MAX + 1];
    uint64_t io = 0;
    unsigned n = 0;
    fx_fill(data, size, 11);
    uint64_t ino = mkfile(f, "md");
    wr(f, ino, 2 * MB, data + 2 * MB, size - 2 * MB); /* out of order: no running MD5 */
    wr(f, ino, 0, data, 2 * MB);
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    listed_etag(f, "md", got);
    assert_non_null(strstr(got, "-1")); /* the placeholder until settled */
    core_bg_set_io(f->c, bytes_io, &io);
    /* pending writes: not settled yet */
    wr(f, ino, 5, data + 5, 10);
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    /* noted again at the commit; survives a restart */
    fx_reopen(f);
    core_bg_set_io(f->c, bytes_io, &io);
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(io, size);
    md5_hex(data, size, want);
    listed_etag(f, "md", got);
    assert_string_equal(got, want);
    /* settled: nothing more to do */
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 0);
    /* a truncate drops the MD5; the worker computes the new one */
    struct core_setattr sa = {.mask = CORE_SET_SIZE, .size = MB + 7};
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, NULL), 0);
    listed_etag(f, "md", got);
    assert_non_null(strstr(got, "-1"));
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 1);
    md5_hex(data, MB + 7, want);
    listed_etag(f, "md", got);
    assert_string_equal(got, want);
    /* a file written in order has its MD5 at commit: no work for the worker; one
     * removed before it settled leaves none either */
    uint64_t seq = mkfile(f, "seq");
    wr(f, seq, 0, data, MB);
    assert_int_equal(core_commit(f->c, &f->p, seq), 0);
    uint64_t gone = mkfile(f, "gone");
    wr(f, gone, MB, data, 10);
    wr(f, gone, 0, data, 10);
    assert_int_equal(core_commit(f->c, &f->p, gone), 0);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "gone", 4), 0);
    io = 0;
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(io, 0);
    /* without all, settle_ms counts: a long one keeps a fresh change waiting */
    struct core_config cfg = fx_config(f->dir);
    cfg.settle_ms = 3600 * 1000;
    core_close(f->c);
    assert_int_equal(core_open(&f->c, &cfg), 0);
    wr(f, ino, 2 * MB, data, 10);
    wr(f, ino, 0, data, 10);
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_bg_run(f->c, false, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 1);
    free(data);
}

static int first_etag_cb(void *arg, const struct core_listent *e)
{
    if (!e->is_prefix && !((char *)arg)[0])
        snprintf(arg, CORE_ETAG_MAX + 1, "%s", e->info->etag);
    return 0;
}

/* The listed ETag of @p key (the first key with that prefix). */
static void key_etag(struct fx *f, const char *key, char *out)
{
    bool tr;
    out[0] = '\0';
    assert_int_equal(core_list(f->c, &f->p, f->bucket, key, strlen(key), NULL, 0, NULL, 0, 1,
                               first_etag_cb, out, &tr),
                     0);
}

struct later_arg {
    uint64_t ino; /* the file whose MD5 waits */
    unsigned asked;
};

static bool later_cb(void *arg, uint64_t ino)
{
    struct later_arg *a = arg;
    a->asked++;
    return ino == a->ino;
}

/* The later hook (the daemon: the tier's uploader reading the file) puts a file's MD5
 * off: the file stays noted and settles at the first pass after the hook lets it go; a
 * pass with all puts nothing off; other files settle as usual. */
static void test_bg_later(void **state)
{
    struct fx *f = *state;
    size_t size = 2 * MB + 99;
    uint8_t *data = malloc(size);
    char want[33], got[CORE_ETAG_MAX + 1];
    unsigned n = 0;
    fx_fill(data, size, 12);
    uint64_t held = mkfile(f, "held"), other = mkfile(f, "other");
    for (int i = 0; i < 2; i++) { /* out of order: no running MD5 */
        uint64_t ino = i ? other : held;
        wr(f, ino, MB, data + MB, size - MB);
        wr(f, ino, 0, data, MB);
        assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    }
    struct later_arg la = {held, 0};
    core_bg_set_later(f->c, later_cb, &la);
    assert_int_equal(core_bg_run(f->c, false, &n), 0);
    assert_int_equal(n, 1); /* other */
    assert_true(la.asked >= 2);
    md5_hex(data, size, want);
    key_etag(f, "other", got);
    assert_string_equal(got, want);
    key_etag(f, "held", got);
    assert_non_null(strstr(got, "-1")); /* still the placeholder */
    assert_int_equal(core_bg_run(f->c, false, &n), 0);
    assert_int_equal(n, 0);
    /* a pass with all does not ask */
    la.asked = 0;
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(la.asked, 0);
    key_etag(f, "held", got);
    assert_string_equal(got, want);
    /* let go: settles at the next pass */
    wr(f, held, MB, data + MB, 10);
    wr(f, held, 0, data, 10);
    assert_int_equal(core_commit(f->c, &f->p, held), 0);
    assert_int_equal(core_bg_run(f->c, false, &n), 0);
    assert_int_equal(n, 0);
    core_bg_set_later(f->c, NULL, NULL);
    assert_int_equal(core_bg_run(f->c, false, &n), 0);
    assert_int_equal(n, 1);
    key_etag(f, "held", got);
    assert_string_equal(got, want);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inline_and_convert, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_truncate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_contended_rmw, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_crc_corruption, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_crc_blocks, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_direct_read, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_vs_read, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pending_dropped, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pending_until_commit, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pending_until_commit_no_md5, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unlink_open, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_quota, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_quota_rename, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_quota_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_quota_race, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_verifier, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_nfs_etag, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bg_etag, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bg_later, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
