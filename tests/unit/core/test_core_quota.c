/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_quota.c's byte reservations where a write's
 * bytes and the records it counts against part ways: chains of more limited
 * directories than a reservation keeps inline (every one counts), files and
 * directories renamed into a limited directory while their writes are
 * pending (the rename commits them first and is refused past the limit), and
 * multipart completions into a limited directory racing NFS writers there
 * (the completion holds its bytes on the directory while its op runs), and
 * writes racing a rename of their file or of a directory above it (they
 * reserve on the new path before they become pending).
 * Basic quotas, pending writes and writer races are in test_core_data.c. */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdatomic.h>

#include "core_test_util.h"

#define KB 1024
#define MB (1024 * 1024)
#define DEPTH 20 /* limited directories on one chain: more than inline keys (8) */

static uint64_t mkfile_in(struct fx *f, uint64_t dir, const char *name)
{
    struct core_attr a;
    assert_int_equal(core_create(f->c, &f->p, dir, name, strlen(name), 0644, CORE_CREATE_GUARDED,
                                 0, &a),
                     0);
    return a.ino;
}

static int wr_in(struct fx *f, uint64_t ino, const void *buf, size_t len, enum core_stable st)
{
    return core_write(f->c, &f->p, ino, 0, buf, len, st, NULL, NULL, NULL);
}

static uint64_t usage_bytes(struct fx *f, uint64_t ino)
{
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, ino, &u), 0);
    return u.bytes;
}

/* bkt/d0/d1/.../d19, each with a byte limit; @p outer is d0's (the others
 * 100 MiB). @return the inodes, d[0] outermost. */
static void deep_chain(struct fx *f, uint64_t outer, uint64_t d[DEPTH])
{
    uint64_t parent = f->bucket;
    for (int i = 0; i < DEPTH; i++) {
        char name[8];
        struct core_attr a;
        snprintf(name, sizeof(name), "d%d", i);
        assert_int_equal(core_mkdir(f->c, &f->p, parent, name, strlen(name), 0755, &a), 0);
        d[i] = parent = a.ino;
    }
    for (int i = 0; i < DEPTH; i++)
        assert_int_equal(core_quota_set(f->c, 1, d[i], i == 0 ? outer : 100 * MB, 0), 0);
}

/* The outermost of 20 limited directories stops pending writes deep below it
 * (it used to count committed usage only: past 14 the outer ones were not
 * reserved on). */
static void test_deep_chain(void **state)
{
    struct fx *f = *state;
    uint64_t d[DEPTH];
    uint8_t *buf = malloc(256 * KB);
    fx_fill(buf, 256 * KB, 3);
    deep_chain(f, 300 * KB, d);
    uint64_t a = mkfile_in(f, d[DEPTH - 1], "a");
    uint64_t b = mkfile_in(f, d[DEPTH - 1], "b");
    assert_int_equal(wr_in(f, a, buf, 200 * KB, CORE_UNSTABLE), 0);
    /* 200 KiB pending + 200 KiB > 300 KiB on d0 */
    assert_int_equal(wr_in(f, b, buf, 200 * KB, CORE_UNSTABLE), -EDQUOT);
    assert_int_equal(wr_in(f, b, buf, 200 * KB, CORE_FILE_SYNC), -EDQUOT);
    assert_int_equal(wr_in(f, b, buf, 100 * KB, CORE_UNSTABLE), 0);
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(usage_bytes(f, d[0]), 300 * KB);
    assert_int_equal(usage_bytes(f, d[DEPTH - 1]), 300 * KB);
    /* S3 into the deepest directory counts every level too */
    char key[4 * DEPTH + 8] = "";
    for (int i = 0; i < DEPTH; i++)
        snprintf(key + strlen(key), sizeof(key) - strlen(key), "d%d/", i);
    snprintf(key + strlen(key), sizeof(key) - strlen(key), "s3");
    assert_int_equal(fx_put(f, key, buf, 1), -EDQUOT);
    assert_int_equal(core_quota_set(f->c, 1, d[0], 301 * KB, 0), 0);
    assert_int_equal(fx_put(f, key, buf, 1000), 0);
    assert_int_equal(usage_bytes(f, d[0]), 301 * KB - 24);
    free(buf);
}

struct deep_race {
    struct fx *f;
    uint64_t dir;
    int id;
    atomic_uint_fast64_t *acked;
};

static void *deep_writer(void *arg)
{
    struct deep_race *q = arg;
    uint8_t buf[40 * KB];
    fx_fill(buf, sizeof(buf), (uint32_t)q->id);
    for (int i = 0; i < 20; i++) {
        char name[32];
        struct core_attr a;
        snprintf(name, sizeof(name), "w%d-%d", q->id, i);
        assert_int_equal(core_create(q->f->c, &q->f->p, q->dir, name, strlen(name), 0644, 0, 0,
                                     &a),
                         0);
        int rc = core_write(q->f->c, &q->f->p, a.ino, 0, buf, sizeof(buf),
                            q->id % 2 ? CORE_FILE_SYNC : CORE_UNSTABLE, NULL, NULL, NULL);
        assert_true(rc == 0 || rc == -EDQUOT);
        if (rc == 0)
            atomic_fetch_add(q->acked, sizeof(buf));
    }
    return NULL;
}

/* Writers racing deep below the outermost limit never pass it together. */
static void test_deep_chain_race(void **state)
{
    struct fx *f = *state;
    uint64_t d[DEPTH];
    atomic_uint_fast64_t acked = 0;
    pthread_t th[6];
    struct deep_race q[6];
    deep_chain(f, MB, d);
    for (int i = 0; i < 6; i++) {
        q[i] = (struct deep_race){f, d[DEPTH - 1], i, &acked};
        assert_int_equal(pthread_create(&th[i], NULL, deep_writer, &q[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    assert_true(atomic_load(&acked) <= MB);
    assert_true(atomic_load(&acked) >= MB / 2); /* the limit did fill up */
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(usage_bytes(f, d[0]), atomic_load(&acked));
}

/* A file whose writes are pending, renamed into a limited directory: its
 * bytes count there (the rename commits them first), so the rename is
 * refused past the limit and, once in, later writes see them. The same for a
 * directory carrying pending files. */
static void test_rename_pending(void **state)
{
    struct fx *f = *state;
    struct core_attr A, B, sub, x;
    uint8_t *buf = malloc(256 * KB);
    fx_fill(buf, 256 * KB, 7);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "A", 1, 0755, &A), 0);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "B", 1, 0755, &B), 0);
    assert_int_equal(core_quota_set(f->c, 1, B.ino, 300 * KB, 0), 0);
    assert_int_equal(fx_put(f, "B/old", buf, 100 * KB), 0);
    uint64_t fi = mkfile_in(f, A.ino, "f");
    assert_int_equal(wr_in(f, fi, buf, 256 * KB, CORE_UNSTABLE), 0);
    /* 100 KiB + 256 KiB > 300 KiB: refused, the file stays where it was */
    assert_int_equal(core_rename(f->c, &f->p, A.ino, "f", 1, B.ino, "f", 1), -EDQUOT);
    assert_int_equal(core_lookup(f->c, &f->p, A.ino, "f", 1, &x), 0);
    assert_int_equal(x.size, 256 * KB);
    assert_int_equal(usage_bytes(f, B.ino), 100 * KB);
    /* room for it: it moves, and its bytes count in B at once */
    assert_int_equal(core_quota_set(f->c, 1, B.ino, 400 * KB, 0), 0);
    assert_int_equal(wr_in(f, fi, buf, 250 * KB, CORE_UNSTABLE), 0); /* pending again */
    assert_int_equal(core_rename(f->c, &f->p, A.ino, "f", 1, B.ino, "f", 1), 0);
    assert_int_equal(usage_bytes(f, B.ino), 356 * KB);
    uint64_t g = mkfile_in(f, B.ino, "g");
    assert_int_equal(wr_in(f, g, buf, 50 * KB, CORE_UNSTABLE), -EDQUOT);
    assert_int_equal(fx_put(f, "B/s3", buf, 50 * KB), -EDQUOT);
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(usage_bytes(f, B.ino), 356 * KB);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "B/f", &d, &n), 0);
    assert_int_equal(n, 256 * KB);
    assert_memory_equal(d, buf, 256 * KB);
    free(d);

    /* a directory whose file has pending writes */
    assert_int_equal(core_mkdir(f->c, &f->p, A.ino, "sub", 3, 0755, &sub), 0);
    uint64_t h = mkfile_in(f, sub.ino, "h");
    assert_int_equal(wr_in(f, h, buf, 60 * KB, CORE_UNSTABLE), 0);
    assert_int_equal(core_rename(f->c, &f->p, A.ino, "sub", 3, B.ino, "sub", 3), -EDQUOT);
    assert_int_equal(core_lookup(f->c, &f->p, A.ino, "sub", 3, &x), 0);
    assert_int_equal(core_quota_set(f->c, 1, B.ino, 500 * KB, 0), 0);
    assert_int_equal(wr_in(f, h, buf, 64 * KB, CORE_UNSTABLE), 0);
    assert_int_equal(core_rename(f->c, &f->p, A.ino, "sub", 3, B.ino, "sub", 3), 0);
    assert_int_equal(usage_bytes(f, B.ino), 420 * KB);
    assert_int_equal(usage_bytes(f, A.ino), 0); /* no limit on A: not tracked */
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(usage_bytes(f, B.ino), 420 * KB);
    /* a rename within one directory keeps its pending writes pending */
    uint64_t k = mkfile_in(f, B.ino, "k");
    assert_int_equal(wr_in(f, k, buf, 10 * KB, CORE_UNSTABLE), 0);
    assert_int_equal(core_rename(f->c, &f->p, B.ino, "k", 1, B.ino, "k2", 2), 0);
    assert_int_equal(usage_bytes(f, B.ino), 420 * KB); /* a directory counts committed data */
    assert_int_equal(core_commit(f->c, &f->p, k), 0);
    assert_int_equal(usage_bytes(f, B.ino), 430 * KB);
    free(buf);
}

struct mpu_race {
    struct fx *f;
    uint64_t dir;
    int id;
    const char (*ids)[64];
    int nids;
    atomic_uint_fast64_t *acked;
};

static void *mpu_completer(void *arg)
{
    struct mpu_race *q = arg;
    for (int i = 0; i < q->nids; i++) {
        uint32_t one = 1;
        int rc = core_mpu_complete(q->f->c, &q->f->p, q->f->bucket, q->ids[i], &one, NULL, 1,
                                   "final-1", NULL, NULL);
        assert_true(rc == 0 || rc == -EDQUOT);
        if (rc == 0)
            atomic_fetch_add(q->acked, 64 * KB);
    }
    return NULL;
}

/* Small UNSTABLE writes: many admissions while a completion's commit syncs. */
static void *nfs_writer(void *arg)
{
    struct mpu_race *q = arg;
    uint8_t buf[8 * KB];
    fx_fill(buf, sizeof(buf), (uint32_t)q->id);
    for (int i = 0; i < 60; i++) {
        char name[32];
        struct core_attr a;
        snprintf(name, sizeof(name), "n%d-%d", q->id, i);
        assert_int_equal(core_create(q->f->c, &q->f->p, q->dir, name, strlen(name), 0644, 0, 0,
                                     &a),
                         0);
        int rc = core_write(q->f->c, &q->f->p, a.ino, 0, buf, sizeof(buf), CORE_UNSTABLE, NULL,
                            NULL, NULL);
        assert_true(rc == 0 || rc == -EDQUOT);
        if (rc == 0)
            atomic_fetch_add(q->acked, sizeof(buf));
    }
    return NULL;
}

/* Multipart completions into a limited directory race NFS writers there for
 * its last bytes: together they never pass the limit. */
static void test_mpu_complete_race(void **state)
{
    struct fx *f = *state;
    uint8_t *part = malloc(64 * KB);
    fx_fill(part, 64 * KB, 11);
    for (int round = 0; round < 6; round++) {
        char dname[16];
        struct core_attr D;
        snprintf(dname, sizeof(dname), "D%d", round);
        assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, dname, strlen(dname), 0755, &D), 0);
        assert_int_equal(core_quota_set(f->c, 1, D.ino, 600 * KB, 0), 0);
        char ids[10][64];
        for (int i = 0; i < 10; i++) {
            char key[32];
            struct core_upload *u;
            snprintf(key, sizeof(key), "%s/m%d", dname, i);
            assert_int_equal(core_mpu_create(f->c, &f->p, f->bucket, key, strlen(key), NULL, 0,
                                             ids[i], sizeof(ids[i])),
                             0);
            assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, 64 * KB, &u), 0);
            assert_int_equal(core_upload_write(u, part, 64 * KB), 0);
            assert_int_equal(core_mpu_part_commit(u, ids[i], 1, "p1", NULL), 0);
        }
        atomic_uint_fast64_t acked = 0;
        struct mpu_race q[3];
        pthread_t th[3];
        q[0] = (struct mpu_race){f, D.ino, 0, (const char(*)[64])ids, 10, &acked};
        q[1] = (struct mpu_race){f, D.ino, 1, NULL, 0, &acked};
        q[2] = (struct mpu_race){f, D.ino, 2, NULL, 0, &acked};
        assert_int_equal(pthread_create(&th[0], NULL, mpu_completer, &q[0]), 0);
        assert_int_equal(pthread_create(&th[1], NULL, nfs_writer, &q[1]), 0);
        assert_int_equal(pthread_create(&th[2], NULL, nfs_writer, &q[2]), 0);
        for (int i = 0; i < 3; i++)
            pthread_join(th[i], NULL);
        assert_true(atomic_load(&acked) <= 600 * KB);
        assert_true(atomic_load(&acked) >= 400 * KB); /* the limit did fill up */
        assert_int_equal(core_sync(f->c), 0);
        assert_int_equal(usage_bytes(f, D.ino), atomic_load(&acked));
    }
    free(part);
}

/* ---- writes racing a rename of their file (or of a directory above it) ---- */

#define BIG (4 * MB)

struct mv_race {
    struct fx *f;
    uint64_t ino;
    enum core_stable st;
    const uint8_t *buf;
    atomic_bool go;
    int rc;
};

/* One large write: a long time between its admission and its insert. */
static void *mv_writer(void *arg)
{
    struct mv_race *q = arg;
    while (!atomic_load(&q->go))
        sched_yield();
    q->rc = core_write(q->f->c, &q->f->p, q->ino, 0, q->buf, BIG, q->st, NULL, NULL, NULL);
    return NULL;
}

static void spin_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* One round: a 4 MiB write into a file of A (or of A/sub when @p subdir)
 * races a rename of the file (of sub) into B, which has 1 MiB used and a
 * limit of @p limit, started @p delay_us after the write. Whatever the
 * interleaving, B never passes its limit, an acknowledged write is all there,
 * a refused one left nothing, and no reservation is left behind (B takes
 * exactly what its limit leaves). */
static void mv_round(struct fx *f, int round, bool subdir, enum core_stable st, uint64_t limit,
                     long delay_us, const uint8_t *buf)
{
    struct core_attr A, B, S, x;
    char an[16], bn[16], key[32];
    snprintf(an, sizeof(an), "A%d", round);
    snprintf(bn, sizeof(bn), "B%d", round);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, an, strlen(an), 0755, &A), 0);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, bn, strlen(bn), 0755, &B), 0);
    assert_int_equal(core_quota_set(f->c, 1, B.ino, limit, 0), 0);
    snprintf(key, sizeof(key), "%s/fill", bn);
    assert_int_equal(fx_put(f, key, buf, MB), 0);
    uint64_t dir = A.ino;
    if (subdir) {
        assert_int_equal(core_mkdir(f->c, &f->p, A.ino, "sub", 3, 0755, &S), 0);
        dir = S.ino;
    }
    struct mv_race q = {.f = f, .ino = mkfile_in(f, dir, "f"), .st = st, .buf = buf};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, mv_writer, &q), 0);
    atomic_store(&q.go, true);
    spin_us(delay_us);
    int rrc = subdir ? core_rename(f->c, &f->p, A.ino, "sub", 3, B.ino, "sub", 3)
                     : core_rename(f->c, &f->p, A.ino, "f", 1, B.ino, "f", 1);
    pthread_join(th, NULL);
    if ((rrc != 0 && rrc != -EDQUOT) || (q.rc != 0 && q.rc != -EDQUOT))
        print_error("round %d: rename %d, write %d\n", round, rrc, q.rc);
    assert_true(rrc == 0 || rrc == -EDQUOT);
    assert_true(q.rc == 0 || q.rc == -EDQUOT);
    assert_int_equal(core_sync(f->c), 0);
    uint64_t used = usage_bytes(f, B.ino);
    if (used > limit)
        print_error("round %d (%s, %s, %ld us): B holds %llu bytes, limit %llu\n", round,
                    subdir ? "directory" : "file", st == CORE_UNSTABLE ? "unstable" : "stable",
                    delay_us, (unsigned long long)used, (unsigned long long)limit);
    assert_true(used <= limit);
    /* an acknowledged write is whole, a refused one stored nothing */
    uint64_t in = rrc ? dir : subdir ? S.ino : B.ino;
    assert_int_equal(core_lookup(f->c, &f->p, in, "f", 1, &x), 0);
    assert_int_equal(x.size, q.rc == 0 ? BIG : 0);
    assert_int_equal(used, MB + (rrc == 0 ? x.size : 0));
    if (q.rc == 0) {
        uint8_t *back = malloc(BIG);
        size_t n = 0;
        bool eof;
        assert_int_equal(core_read(f->c, &f->p, q.ino, 0, back, BIG, &n, &eof), 0);
        assert_int_equal(n, BIG);
        assert_memory_equal(back, buf, BIG);
        free(back);
    }
    /* nothing is still reserved on B: what its limit leaves fits, not a byte more */
    uint64_t g = mkfile_in(f, B.ino, "g");
    assert_int_equal(wr_in(f, g, buf, limit - used, CORE_UNSTABLE), 0);
    assert_int_equal(core_write(f->c, &f->p, g, limit - used, buf, 1, CORE_UNSTABLE, NULL, NULL,
                                NULL),
                     -EDQUOT);
    assert_int_equal(core_remove(f->c, &f->p, B.ino, "g", 1), 0);
    assert_int_equal(core_remove(f->c, &f->p, in, "f", 1), 0);
    assert_int_equal(core_remove(f->c, &f->p, B.ino, "fill", 4), 0);
}

/* A write admitted against the old path while a rename moves its file (or a
 * directory above it) into a limited directory, and inserted after the
 * rename, is checked against the new path's limit (it used to be charged
 * there unchecked) and counts there when it fits. By repetition over a range
 * of start offsets: UNSTABLE and FILE_SYNC, file and directory renames, a
 * limit the write passes (2 MiB) and one it fits (8 MiB). */
static void test_rename_write_race(void **state)
{
    struct fx *f = *state;
    uint8_t *buf = malloc(BIG);
    fx_fill(buf, BIG, 21);
    int round = 0;
    for (long delay = 0; delay <= 3000; delay += 200)
        for (int v = 0; v < 8; v++, round++)
            mv_round(f, round, v % 2, v % 4 < 2 ? CORE_UNSTABLE : CORE_FILE_SYNC,
                     v < 4 ? 2 * MB : 8 * MB, delay, buf);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deep_chain, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_deep_chain_race, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_mpu_complete_race, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename_write_race, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
