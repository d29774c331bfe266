/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for meta/meta_writer.c: group commit from many threads, nested
 * txn isolation (a failing op drops only its own changes, even inside a
 * batch), error results, MAP_FULL -> -ENOSPC, notes refused without commit
 * hooks, the hooks' order and arguments, "acknowledged => durable" against
 * a model of the disk (pwrite and fdatasync of the LMDB file are interposed),
 * a full disk failing commits with -ENOSPC until space is back, and a failed
 * sync ending the process. The engine-neutral tests run on both engines (LMDB,
 * memory). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lmdb.h>

#include "meta.h"
#include "meta_int.h"
#include "srv_err.h"
#include "srv_log.h"

static char dir[64];
static struct meta_env *m;
static enum meta_backend backend;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/metaw-test-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    struct meta_env_config cfg = {.dir = dir, .map_size = 64ull << 20, .max_batch = 8,
                                  .backend = backend};
    return meta_env_open(&m, &cfg);
}

static int setup_mem(void **state)
{
    backend = META_BACKEND_MEM;
    return setup(state);
}

static int setup_lmdb(void **state)
{
    backend = META_BACKEND_LMDB;
    return setup(state);
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    meta_env_close(m);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

struct kv_op {
    char key[32];
    int fail; /* put, then return this */
    unsigned flags;
};

static int kv_fn(struct meta_txn *txn, void *arg)
{
    struct kv_op *o = arg;
    int rc = meta__put(txn, META_DBI_T_CONFIG, o->key, strlen(o->key), "v", 1, o->flags);
    if (rc)
        return rc;
    return o->fail;
}

static bool exists(const char *key)
{
    struct meta_txn *t;
    struct meta_val v;
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    int rc = meta__get(t, META_DBI_T_CONFIG, key, strlen(key), &v);
    meta_rtxn_end(t);
    return rc == 0;
}

#define NTHR 8
#define NOPS 50

static void *thr(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < NOPS; i++) {
        struct kv_op o = {.fail = (i % 5 == 0) ? -EINVAL : 0};
        snprintf(o.key, sizeof(o.key), "t%d-%d", id, i);
        int rc = meta_submit(m, kv_fn, &o, 0);
        if (rc != o.fail)
            abort();
    }
    return NULL;
}

static void test_group_commit_isolation(void **state)
{
    pthread_t th[NTHR];
    struct meta_stats st;
    (void)state;
    for (int i = 0; i < NTHR; i++)
        pthread_create(&th[i], NULL, thr, (void *)(intptr_t)i);
    for (int i = 0; i < NTHR; i++)
        pthread_join(th[i], NULL);
    for (int id = 0; id < NTHR; id++)
        for (int i = 0; i < NOPS; i++) {
            char key[32];
            snprintf(key, sizeof(key), "t%d-%d", id, i);
            assert_int_equal(exists(key), i % 5 != 0);
        }
    meta_stats_get(m, &st);
    assert_int_equal(st.commit_ops, NTHR * NOPS);
    assert_true(st.commits >= 1 && st.commits <= NTHR * NOPS);
}

static void test_errors(void **state)
{
    (void)state;
    struct kv_op o = {.key = "dup"};
    assert_int_equal(meta_submit(m, kv_fn, &o, 0), 0);
    o.flags = META_NOOVERWRITE;
    assert_int_equal(meta_submit(m, kv_fn, &o, 0), -EEXIST);
    assert_true(exists("dup"));
    assert_int_equal(meta_submit(m, kv_fn, &(struct kv_op){.key = "x", .fail = SRV_ECLASH}, 0),
                     SRV_ECLASH);
    assert_false(exists("x"));
}

static int big_fn(struct meta_txn *txn, void *arg)
{
    static char val[1 << 20];
    int *i = arg;
    char key[16];
    snprintf(key, sizeof(key), "big%d", *i);
    return meta__put(txn, META_DBI_T_CONFIG, key, strlen(key), val, sizeof(val), 0);
}

static void test_map_full(void **state)
{
    (void)state;
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++)
        rc = meta_submit(m, big_fn, &i, 0);
    assert_int_equal(rc, -ENOSPC);
    /* the writer keeps working for small ops */
    struct kv_op o = {.key = "after"};
    int rc2 = meta_submit(m, kv_fn, &o, 0);
    assert_true(rc2 == 0 || rc2 == -ENOSPC);
}

static int note_fn(struct meta_txn *txn, void *arg)
{
    uint64_t v = 42;
    int *kind = arg;
    return meta_txn_note(txn, kind ? (uint32_t)*kind : 1, &v, sizeof(v));
}

static void test_note_without_hooks(void **state)
{
    (void)state;
    assert_int_equal(meta_submit(m, note_fn, NULL, META_OP_DATA), -EIO);
    assert_false(meta_on_writer(m));
}

static void *ext_thr(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        if (meta_submit(m, note_fn, NULL, 0) != -EIO)
            abort();
    return NULL;
}

static void *ok_thr(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 100; i++) {
        struct kv_op o = {.fail = 0};
        snprintf(o.key, sizeof(o.key), "ok%d-%d", id, i);
        if (meta_submit(m, kv_fn, &o, 0) != 0)
            abort();
    }
    return NULL;
}

/* An op whose notes cannot be applied fails alone: the ops batched with it
 * are run again and succeed. */
static void test_bad_op_isolated(void **state)
{
    pthread_t th[4];
    (void)state;
    pthread_create(&th[0], NULL, ext_thr, NULL);
    for (int i = 1; i < 4; i++)
        pthread_create(&th[i], NULL, ok_thr, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int id = 1; id < 4; id++)
        for (int i = 0; i < 100; i++) {
            char key[32];
            snprintf(key, sizeof(key), "ok%d-%d", id, i);
            assert_true(exists(key));
        }
}

/* META_OP_EARLY answers once committed: the change is visible at once, and a
 * following plain op (durable) succeeds after it. */
static void test_early_ack(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        struct kv_op o = {.fail = 0};
        snprintf(o.key, sizeof(o.key), "early%d", i);
        assert_int_equal(meta_submit(m, kv_fn, &o, META_OP_EARLY), 0);
        assert_true(exists(o.key));
    }
    struct kv_op o = {.key = "durable"};
    assert_int_equal(meta_submit(m, kv_fn, &o, 0), 0);
    assert_true(exists("durable"));
    struct kv_op bad = {.key = "early-bad", .fail = -EINVAL};
    assert_int_equal(meta_submit(m, kv_fn, &bad, META_OP_EARLY), -EINVAL);
    assert_false(exists("early-bad"));
}

/* ---- commit hooks ---- */

static struct {
    pthread_mutex_t mu;
    int joins, notes, prepares, data_prepares, ends, ends_ok, releases, bad_state;
    uint64_t next_tok;
} hk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int hk_join(void *arg, void **state, struct meta_txn *batch, const struct meta_note *notes,
                   size_t n)
{
    (void)arg;
    pthread_mutex_lock(&hk.mu);
    if (!*state)
        *state = malloc(1);
    hk.joins++;
    hk.notes += (int)n;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (notes[i].len != sizeof(v))
            hk.bad_state++;
        memcpy(&v, notes[i].data, sizeof(v));
        if (v != 42)
            hk.bad_state++;
        if (notes[i].kind == 99)
            rc = -ENOSPC; /* this op's notes cannot be applied */
    }
    pthread_mutex_unlock(&hk.mu);
    /* the batch txn: readable and writable here */
    if (rc == 0)
        rc = meta__put(batch, META_DBI_T_CONFIG, "joined", 6, "1", 1, 0);
    return rc;
}

static int hk_prepare(void *arg, bool data, uint64_t *token)
{
    (void)arg;
    pthread_mutex_lock(&hk.mu);
    hk.prepares++;
    hk.data_prepares += data;
    *token = ++hk.next_tok;
    pthread_mutex_unlock(&hk.mu);
    return 0;
}

static void hk_end(void *arg, void *state, int rc)
{
    (void)arg;
    pthread_mutex_lock(&hk.mu);
    hk.ends++;
    hk.ends_ok += rc == 0;
    pthread_mutex_unlock(&hk.mu);
    free(state);
}

static void hk_release(void *arg, uint64_t token)
{
    (void)arg;
    pthread_mutex_lock(&hk.mu);
    if (token == 0 || token > hk.next_tok)
        hk.bad_state++;
    hk.releases++;
    pthread_mutex_unlock(&hk.mu);
}

static const struct meta_hooks hooks = {.join = hk_join, .prepare = hk_prepare,
                                        .end = hk_end, .release = hk_release};

static void *note_thr(void *arg)
{
    int kind = (int)(intptr_t)arg;
    for (int i = 0; i < 50; i++) {
        int rc = meta_submit(m, note_fn, &kind, i % 2 ? META_OP_DATA : 0);
        if (rc != (kind == 99 ? -ENOSPC : 0))
            abort();
    }
    return NULL;
}

/* Notes reach join in the batch txn; every batch gets one prepare (data when
 * an op carried it), one end, and a release of its token once durable; an op
 * whose notes fail fails alone. */
static void test_hooks(void **state)
{
    pthread_t th[4];
    (void)state;
    memset(&hk, 0, sizeof(hk));
    pthread_mutex_init(&hk.mu, NULL);
    meta_env_set_hooks(m, &hooks);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, note_thr, (void *)(intptr_t)(i == 3 ? 99 : 1));
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_true(exists("joined"));
    meta_env_close(m); /* the last batch is acknowledged: its token released */
    m = NULL;
    assert_int_equal(hk.bad_state, 0);
    assert_true(hk.notes >= 150);
    assert_true(hk.joins >= 150);
    assert_true(hk.data_prepares >= 1);
    assert_true(hk.ends_ok >= 1);
    assert_true(hk.ends - hk.ends_ok >= 50); /* each failing op dropped its batch once */
    assert_int_equal(hk.releases, hk.prepares);
}

/* ---- the disk model ----
 * liblmdb writes pages with pwrite/writev and syncs with fdatasync through the
 * PLT, so these definitions see its calls on the LMDB file. With
 * MDB_NOMETASYNC a commit writes its data pages, syncs them and then writes
 * its meta page (a pwrite below the first two pages) without a sync: that meta
 * page is durable (would survive a power cut) only once an fdatasync of the
 * file (through any fd) that began after the write has returned. */
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_fdatasync)(int);
/* faults on the model file: data pages written short (a full disk; LMDB calls
 * that EIO), or every fdatasync failing with EIO (a lost write-back) */
static atomic_bool fault_short, fault_sync;
static atomic_bool model_on;
static dev_t model_dev;
static ino_t model_ino;
static off_t model_psize;
static atomic_ulong meta_writes;  /* meta page writes that returned */
static atomic_ulong meta_durable; /* meta writes a returned fdatasync covers */
static atomic_ulong model_syncs, model_bad;

__attribute__((constructor)) static void model_init(void)
{
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (!real_pwrite || !real_writev || !real_fdatasync)
        abort();
}

static bool model_file(int fd)
{
    struct stat sb;
    return atomic_load(&model_on) && fstat(fd, &sb) == 0 && sb.st_dev == model_dev &&
           sb.st_ino == model_ino;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (atomic_load(&fault_short) && off >= 2 * model_psize && n > 1 && model_file(fd))
        return real_pwrite(fd, buf, n / 2, off);
    ssize_t r = real_pwrite(fd, buf, n, off);
    if (off < 2 * model_psize && model_file(fd))
        atomic_fetch_add(&meta_writes, 1);
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    if (atomic_load(&fault_short) && n > 0 && model_file(fd)) {
        struct iovec half = {iov[0].iov_base, iov[0].iov_len / 2};
        return real_writev(fd, &half, 1);
    }
    return real_writev(fd, iov, n);
}

int fdatasync(int fd)
{
    if (atomic_load(&fault_sync) && model_file(fd)) {
        errno = EIO;
        return -1;
    }
    unsigned long covered = atomic_load(&meta_writes);
    int r = real_fdatasync(fd);
    if (r == 0 && model_file(fd)) {
        unsigned long d = atomic_load(&meta_durable);
        while (d < covered && !atomic_compare_exchange_weak(&meta_durable, &d, covered))
            ;
        atomic_fetch_add(&model_syncs, 1);
    }
    return r;
}

static int model_setup(void **state)
{
    MDB_stat st;
    struct stat sb;
    int fd;
    if (setup_lmdb(state))
        return -1;
    if (mdb_env_stat(meta__lmdb_env(m), &st) || mdb_env_get_fd(meta__lmdb_env(m), &fd) ||
        fstat(fd, &sb))
        return -1;
    model_psize = st.ms_psize;
    model_dev = sb.st_dev;
    model_ino = sb.st_ino;
    atomic_store(&model_on, true);
    return 0;
}

static int model_teardown(void **state)
{
    atomic_store(&model_on, false);
    return teardown(state);
}

struct model_op {
    struct kv_op kv;
    unsigned long seen; /* meta writes when the op ran: its batch's is the next */
};

static int model_fn(struct meta_txn *txn, void *arg)
{
    struct model_op *o = arg;
    o->seen = atomic_load(&meta_writes);
    return kv_fn(txn, &o->kv);
}

static void *model_thr(void *arg)
{
    int id = (int)(intptr_t)arg;
    int n = id == 0 ? 300 : 150; /* thread 0 runs alone at the end */
    for (int i = 0; i < n; i++) {
        struct model_op o = {.kv = {.fail = 0}};
        snprintf(o.kv.key, sizeof(o.kv.key), "m%d-%d", id, i);
        if (meta_submit(m, model_fn, &o, 0) != 0)
            abort();
        if (atomic_load(&meta_durable) < o.seen + 1)
            atomic_fetch_add(&model_bad, 1);
    }
    return NULL;
}

/* Every acknowledged op's batch is durable at the ack, with many submitters
 * (the syncer and the next commit race to cover a batch) and with one. */
static void test_ack_durable(void **state)
{
    pthread_t th[NTHR];
    (void)state;
    for (int i = 0; i < NTHR; i++)
        pthread_create(&th[i], NULL, model_thr, (void *)(intptr_t)i);
    for (int i = 0; i < NTHR; i++)
        pthread_join(th[i], NULL);
    assert_true(atomic_load(&meta_writes) > 0);
    assert_true(atomic_load(&model_syncs) > 0);
    assert_int_equal(atomic_load(&model_bad), 0);
    for (int id = 0; id < NTHR; id++)
        assert_true(exists(id == 0 ? "m0-299" : "m1-149"));
}

static int blob_fn(struct meta_txn *txn, void *arg)
{
    static char val[256 << 10];
    return meta__put(txn, META_DBI_T_CONFIG, arg, strlen(arg), val, sizeof(val), 0);
}

/* A full file system (LMDB's page writes come back short, which it reports as
 * EIO) fails the batch with -ENOSPC and poisons nothing: once space is back
 * the next op commits, without a restart, and earlier changes are intact. */
static void test_disk_full_recovers(void **state)
{
    (void)state;
    assert_int_equal(meta_submit(m, kv_fn, &(struct kv_op){.key = "before"}, 0), 0);
    atomic_store(&fault_short, true);
    assert_int_equal(meta_submit(m, blob_fn, "blob", 0), -ENOSPC);
    assert_int_equal(meta_submit(m, kv_fn, &(struct kv_op){.key = "small"}, 0), -ENOSPC);
    atomic_store(&fault_short, false);
    assert_int_equal(meta_submit(m, kv_fn, &(struct kv_op){.key = "after"}, 0), 0);
    assert_int_equal(meta_submit(m, blob_fn, "blob2", 0), 0);
    assert_true(exists("before"));
    assert_true(exists("after"));
    assert_true(exists("blob2"));
    assert_false(exists("blob"));
    assert_false(exists("small"));
}

/* A failed fdatasync of the LMDB file ends the process with SRV_EXIT_FATAL
 * (run in a child: the daemon must not linger with lost pages). */
static void test_sync_failure_fatal(void **state)
{
    (void)state;
    char *shared = mmap(NULL, sizeof(dir), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    assert_true(shared != MAP_FAILED);
    shared[0] = '\0';
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (model_setup(NULL) != 0)
            _exit(2);
        memcpy(shared, dir, sizeof(dir));
        assert_int_equal(meta_submit(m, kv_fn, &(struct kv_op){.key = "ok"}, 0), 0);
        atomic_store(&fault_sync, true);
        meta_submit(m, kv_fn, &(struct kv_op){.key = "lost"}, 0);
        _exit(3); /* it must not return */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), SRV_EXIT_FATAL);
    if (shared[0]) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", shared);
        assert_int_equal(system(cmd), 0);
    }
    munmap(shared, sizeof(dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_commit_isolation, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_map_full, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_note_without_hooks, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_bad_op_isolated, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_early_ack, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_hooks, setup_lmdb, teardown),
        cmocka_unit_test_setup_teardown(test_ack_durable, model_setup, model_teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_recovers, model_setup, model_teardown),
        cmocka_unit_test(test_sync_failure_fatal),
        cmocka_unit_test_setup_teardown(test_group_commit_isolation, setup_mem, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup_mem, teardown),
        cmocka_unit_test_setup_teardown(test_note_without_hooks, setup_mem, teardown),
        cmocka_unit_test_setup_teardown(test_bad_op_isolated, setup_mem, teardown),
        cmocka_unit_test_setup_teardown(test_early_ack, setup_mem, teardown),
        cmocka_unit_test_setup_teardown(test_hooks, setup_mem, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
