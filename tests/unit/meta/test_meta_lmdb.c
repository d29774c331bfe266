/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for meta/meta_lmdb.c's read txns: a thread's own reset txn
 * (renewed per read) sees a commit another thread made just before, holds no
 * snapshot between reads, nests with a pool txn, survives its environment's
 * close, and many threads at once neither run out of LMDB reader slots nor
 * leave theirs taken after they exit; a read txn's snapshot id tells commits
 * apart. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <lmdb.h>

#include "meta.h"
#include "meta_int.h"
#include "meta_test_dir.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    return meta_test_dir_make(dir, sizeof(dir), "lmdb");
}

static int teardown(void **state)
{
    (void)state;
    return meta_test_dir_remove(dir);
}

static struct meta_env *env_open(void)
{
    struct meta_env *m = NULL;
    struct meta_env_config cfg = {
        .dir = dir, .map_size = 64ull << 20, .max_batch = 16, .backend = META_BACKEND_LMDB};
    assert_int_equal(meta_env_open(&m, &cfg), 0);
    return m;
}

static int put_fn(struct meta_txn *txn, void *arg)
{
    uint8_t b[8];
    meta_be64_put(b, *(uint64_t *)arg);
    return meta__put(txn, META_DBI_T_CONFIG, "k", 1, b, 8, 0);
}

/* The value of "k" as a new read txn of the calling thread sees it (0: none). */
static uint64_t read_k(struct meta_env *m)
{
    struct meta_txn *t;
    struct meta_val v;
    uint64_t got = 0;
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    if (meta__get(t, META_DBI_T_CONFIG, "k", 1, &v) == 0) {
        assert_int_equal(v.len, 8);
        got = meta_be64_get(v.data);
    }
    meta_rtxn_end(t);
    return got;
}

struct readers {
    int n;         /* LMDB reader slots taken */
    int snapshots; /* ... of them holding a snapshot (a txn id, not "-") */
};

static int reader_line(const char *msg, void *ctx)
{
    struct readers *r = ctx;
    char pid[32], thr[32], txnid[32];
    if (sscanf(msg, "%31s %31s %31s", pid, thr, txnid) != 3 || strcmp(pid, "pid") == 0)
        return 0;
    r->n++;
    if (strcmp(txnid, "-") != 0)
        r->snapshots++;
    return 0;
}

static struct readers readers_of(struct meta_env *m)
{
    struct readers r = {0, 0};
    mdb_reader_list(meta__lmdb_env(m), reader_line, &r);
    return r;
}

/* ---- a commit of another thread is seen by the next read ---- */

struct pingpong {
    struct meta_env *m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t want, done; /* the value to commit next; the last committed */
    int rounds;
};

static void *committer(void *arg)
{
    struct pingpong *pp = arg;
    for (int i = 1; i <= pp->rounds; i++) {
        pthread_mutex_lock(&pp->mu);
        while (pp->want != (uint64_t)i)
            pthread_cond_wait(&pp->cv, &pp->mu);
        pthread_mutex_unlock(&pp->mu);
        uint64_t v = (uint64_t)i;
        if (meta_submit(pp->m, put_fn, &v, 0) != 0)
            return (void *)1;
        pthread_mutex_lock(&pp->mu);
        pp->done = v;
        pthread_cond_broadcast(&pp->cv);
        pthread_mutex_unlock(&pp->mu);
    }
    return NULL;
}

static void test_commit_seen_by_next_read(void **state)
{
    (void)state;
    struct pingpong pp = {.m = env_open(), .rounds = 200};
    pthread_mutex_init(&pp.mu, NULL);
    pthread_cond_init(&pp.cv, NULL);
    assert_int_equal(read_k(pp.m), 0); /* the thread's slot exists, reset */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, committer, &pp), 0);
    for (int i = 1; i <= pp.rounds; i++) {
        pthread_mutex_lock(&pp.mu);
        pp.want = (uint64_t)i;
        pthread_cond_broadcast(&pp.cv);
        while (pp.done != (uint64_t)i)
            pthread_cond_wait(&pp.cv, &pp.mu);
        pthread_mutex_unlock(&pp.mu);
        /* the commit returned on the other thread: this thread's next read sees it */
        assert_int_equal(read_k(pp.m), (uint64_t)i);
        /* between reads the thread holds its reader slot but pins no snapshot */
        assert_int_equal(readers_of(pp.m).snapshots, 0);
    }
    void *ret;
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_null(ret);
    pthread_cond_destroy(&pp.cv);
    pthread_mutex_destroy(&pp.mu);
    meta_env_close(pp.m);
}

/* ---- a read txn inside another on one thread, and one held across a commit ---- */

/* meta_txn_snapshot: equal for read txns with no commit between them, on
 * one thread or two (the pool's txn nested in the thread's own), different
 * after a commit; meta_env_gen differs between environments. */
static uint64_t snap_of(struct meta_env *m)
{
    struct meta_txn *t;
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    uint64_t s = meta_txn_snapshot(t);
    meta_rtxn_end(t);
    return s;
}

static void test_snapshot_ids(void **state)
{
    (void)state;
    struct meta_env *m = env_open();
    uint64_t one = 1, two = 2;
    assert_int_equal(meta_submit(m, put_fn, &one, 0), 0);
    uint64_t a = snap_of(m);
    assert_int_not_equal(a, 0);
    assert_int_equal(snap_of(m), a);
    struct meta_txn *outer, *inner;
    assert_int_equal(meta_rtxn_begin(m, &outer), 0);
    assert_int_equal(meta_rtxn_begin(m, &inner), 0);
    assert_int_equal(meta_txn_snapshot(outer), a);
    assert_int_equal(meta_txn_snapshot(inner), a);
    meta_rtxn_end(inner);
    meta_rtxn_end(outer);
    assert_int_equal(meta_submit(m, put_fn, &two, 0), 0);
    uint64_t b = snap_of(m);
    assert_int_not_equal(b, a);
    assert_int_equal(read_k(m), 2);
    uint64_t g = meta_env_gen(m);
    meta_env_close(m);
    m = env_open();
    assert_int_not_equal(meta_env_gen(m), g);
    meta_env_close(m);
}

static void test_nested_read_txns(void **state)
{
    (void)state;
    struct meta_env *m = env_open();
    uint64_t one = 1, two = 2;
    struct meta_txn *outer, *inner;
    struct meta_val v;
    assert_int_equal(meta_submit(m, put_fn, &one, 0), 0);
    assert_int_equal(meta_rtxn_begin(m, &outer), 0); /* the thread's own */
    assert_int_equal(meta_submit(m, put_fn, &two, 0), 0);
    assert_int_equal(meta_rtxn_begin(m, &inner), 0); /* the pool's: the own one is busy */
    assert_ptr_not_equal(outer, inner);
    /* each sees the state of when it began */
    assert_int_equal(meta__get(outer, META_DBI_T_CONFIG, "k", 1, &v), 0);
    assert_int_equal(meta_be64_get(v.data), 1);
    assert_int_equal(meta__get(inner, META_DBI_T_CONFIG, "k", 1, &v), 0);
    assert_int_equal(meta_be64_get(v.data), 2);
    assert_int_equal(readers_of(m).snapshots, 2);
    meta_rtxn_end(inner);
    assert_int_equal(meta__get(outer, META_DBI_T_CONFIG, "k", 1, &v), 0);
    assert_int_equal(meta_be64_get(v.data), 1);
    meta_rtxn_end(outer);
    assert_int_equal(readers_of(m).snapshots, 0);
    assert_int_equal(read_k(m), 2);
    meta_env_close(m);
}

/* ---- many threads ---- */

#define MANY 1100 /* more threads than LMDB has reader slots (maxreaders 1024) */

struct crowd {
    struct meta_env *m;
    pthread_barrier_t all_in;
    int failed;
};

static void *crowd_member(void *arg)
{
    struct crowd *c = arg;
    struct meta_txn *t;
    struct meta_val v;
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        if (meta_rtxn_begin(c->m, &t) != 0) {
            bad = 1; /* e.g. out of reader slots */
        } else {
            if (meta__get(t, META_DBI_T_CONFIG, "k", 1, &v) != 0 || meta_be64_get(v.data) != 7)
                bad = 1;
            meta_rtxn_end(t);
        }
        if (round == 0)
            pthread_barrier_wait(&c->all_in); /* every thread alive, each with its slot */
    }
    if (bad)
        __atomic_add_fetch(&c->failed, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void crowd_run(struct crowd *c)
{
    pthread_t th[MANY];
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 << 10);
    assert_int_equal(pthread_barrier_init(&c->all_in, NULL, MANY), 0);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(pthread_create(&th[i], &at, crowd_member, c), 0);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&c->all_in);
    pthread_attr_destroy(&at);
}

static void test_many_threads(void **state)
{
    (void)state;
    struct crowd c = {.m = env_open()};
    uint64_t seven = 7;
    assert_int_equal(meta_submit(c.m, put_fn, &seven, 0), 0);
    /* twice: the first crowd's slots are released when its threads exit */
    for (int pass = 0; pass < 2; pass++) {
        crowd_run(&c);
        assert_int_equal(c.failed, 0);
        struct readers r = readers_of(c.m);
        assert_int_equal(r.snapshots, 0);
        assert_true(r.n <= 64 + 4); /* the pool's, meta's own threads', none of the exited ones */
    }
    meta_env_close(c.m);
}

/* ---- the environment closes while a thread with a slot lives on ---- */

struct survivor {
    struct meta_env *m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int step;
    uint64_t got[2];
};

static void survivor_wait(struct survivor *s, int step)
{
    pthread_mutex_lock(&s->mu);
    while (s->step < step)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void survivor_set(struct survivor *s, int step)
{
    pthread_mutex_lock(&s->mu);
    s->step = step;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *survivor_main(void *arg)
{
    struct survivor *s = arg;
    survivor_wait(s, 1);
    s->got[0] = read_k(s->m); /* a slot in the first environment */
    survivor_set(s, 2);
    survivor_wait(s, 3); /* closed and opened again meanwhile */
    s->got[1] = read_k(s->m);
    survivor_set(s, 4);
    return NULL;
}

static void test_close_with_thread_slots(void **state)
{
    (void)state;
    struct survivor s = {.m = env_open()};
    uint64_t five = 5, six = 6;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, survivor_main, &s), 0);
    assert_int_equal(meta_submit(s.m, put_fn, &five, 0), 0);
    survivor_set(&s, 1);
    survivor_wait(&s, 2);
    assert_int_equal(read_k(s.m), 5);
    meta_env_close(s.m); /* releases both threads' slots */
    s.m = env_open();
    assert_int_equal(meta_submit(s.m, put_fn, &six, 0), 0);
    assert_int_equal(read_k(s.m), 6);
    survivor_set(&s, 3);
    survivor_wait(&s, 4);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(s.got[0], 5);
    assert_int_equal(s.got[1], 6);
    assert_true(readers_of(s.m).n <= 64 + 4); /* the exited thread's slot is free */
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    meta_env_close(s.m);
}

/* LMDB's lock file is allocated whole at open: threads' reader slots are written
 * through a shared mapping of it, and on a full file system a page of a sparse
 * file first written that way raises SIGBUS (a daemon died so). */
static void test_lock_file_allocated(void **state)
{
    (void)state;
    struct meta_env *m = env_open();
    char path[128];
    struct stat st;
    snprintf(path, sizeof(path), "%s/lock.mdb", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 4096);
    assert_true((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size);
    meta_env_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_seen_by_next_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_read_txns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_with_thread_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_file_allocated, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
