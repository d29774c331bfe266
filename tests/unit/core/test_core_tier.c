/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_tier.c: eviction (only with a confirmed copy of the
 * current content; metadata and usage unchanged) and recall through a fake
 * remote (whole and ranged reads, the range first, a remote that fails or
 * changed, reads on an event loop that must not wait, writes and truncation
 * of an evicted file), in a versioned bucket (the current version only,
 * shared extents kept by the noncurrent one, usage, a recall before an
 * evicted version becomes noncurrent), the chunk geometry (the first
 * chunk's bytes in 1 MiB pieces), the streams bound of one file, and a
 * recall that finds part of a chunk back already (the chunk size changed
 * since), and the last read times (the core's, and those its files' tierst
 * records keep across a reopen), and many small files recalled by several
 * readers at once (each reader and recall thread woken for its own work only).
 * The store check (core_check) must pass after each step and after a reopen. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core_test_util.h"

#include "core_data_int.h" /* core__tier_prefetch */

#include "meta.h"
#include "meta_tier.h"
#include "srv_metrics.h" /* srv_now_ms */

#define MB (1024 * 1024)
#define SIZE (5 * MB + 12345)
#define BIG (24 * MB) /* the model's size: files of SIZE bytes but for the pacing test */

/* The fake remote: serves model[], or fails with mode; only offsets in [allow_lo,
 * allow_hi) (others: retryable failures); it notes the ranges asked for, and how
 * many fetches ran at once at most. */
static uint8_t *model;
static size_t model_size = SIZE; /* the remote object's size */
static atomic_int mode;
static atomic_uint_fast64_t fetched, fetches;
static atomic_uint_fast64_t allow_lo, allow_hi = UINT64_MAX;
/* while gate_on, fetches from offset gate_from on wait (the recall is held back by
 * the test, not by the code under test, until the test lets it go) */
static atomic_bool gate_on;
static atomic_uint_fast64_t gate_from;
/* the setup opened the core (its start for the read times) within [core_start_lo,
 * core_start_hi] (time()) */
static int64_t core_start_lo, core_start_hi;
static atomic_int cur, most;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t log_off[64], log_len[64], log_ino[64];
static size_t nlog;
/* files whose remote bytes start further into model[] (each file its own bytes) */
static uint64_t shift_ino[16], shift_by[16];
static size_t nshift;

static int fake_fetch(void *arg, uint64_t ino, uint64_t off, void *buf, size_t len, size_t *n)
{
    (void)arg;
    (void)ino;
    *n = 0;
    if (atomic_load(&mode))
        return atomic_load(&mode);
    if (off < atomic_load(&allow_lo) || off >= atomic_load(&allow_hi))
        return SRV_ERECALL;
    while (atomic_load(&gate_on) && off >= atomic_load(&gate_from))
        usleep(1000);
    uint64_t from = off;
    for (size_t i = 0; i < nshift; i++)
        if (shift_ino[i] == ino)
            from += shift_by[i];
    if (from + len > model_size)
        return SRV_EREMOTECHG;
    int now = atomic_fetch_add(&cur, 1) + 1, m = atomic_load(&most);
    while (now > m && !atomic_compare_exchange_weak(&most, &m, now))
        ;
    usleep(20000); /* a remote takes a while: other threads may start meanwhile */
    memcpy(buf, model + from, len);
    *n = len;
    atomic_fetch_add(&fetched, len);
    atomic_fetch_add(&fetches, 1);
    pthread_mutex_lock(&log_mu);
    if (nlog < 64) {
        log_off[nlog] = off;
        log_ino[nlog] = ino;
        log_len[nlog++] = len;
    }
    pthread_mutex_unlock(&log_mu);
    atomic_fetch_sub(&cur, 1);
    return 0;
}

struct rec_op {
    uint64_t ino;
    struct meta_tier_copy c;
};

static int rec_fn(struct meta_txn *t, void *arg)
{
    struct rec_op *a = arg;
    return meta_tier_put(t, a->ino, &a->c);
}

/* Record a confirmed copy of @p key's current content, as the uploader does. */
static uint64_t copied(struct fx *f, const char *key, uint64_t *change)
{
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, key, strlen(key), &oi), 0);
    free(oi.meta);
    struct rec_op *a = calloc(1, sizeof(*a));
    a->ino = oi.attr.ino;
    a->c.st.rec_ver = META_TIERST_REC_VER;
    a->c.st.remote = 1;
    a->c.st.bucket = f->bucket;
    a->c.st.change = oi.attr.change;
    a->c.st.size = oi.attr.size;
    a->c.st.keylen = (uint32_t)strlen(key);
    snprintf(a->c.st.etag, sizeof(a->c.st.etag), "%.79s", oi.etag);
    snprintf(a->c.key, sizeof(a->c.key), "%s", key);
    assert_int_equal(meta_submit(core_meta(f->c), rec_fn, a, 0), 0);
    free(a);
    *change = oi.attr.change;
    return oi.attr.ino;
}

static void checked(struct fx *f)
{
    assert_int_equal(core_sync(f->c), 0);
    assert_int_equal(core_check(f->c, fx_check_report, NULL), 0);
}

static void read_eq(struct fx *f, uint64_t ino, uint64_t off, size_t len, const uint8_t *want)
{
    uint8_t *buf = malloc(len);
    size_t n = 0;
    bool eof;
    assert_int_equal(core_read(f->c, &f->su, ino, off, buf, len, &n, &eof), 0);
    assert_int_equal(n, len);
    assert_memory_equal(buf, want, len);
    free(buf);
}

static int setup(void **state)
{
    core_start_lo = (int64_t)time(NULL);
    if (fx_setup(state) != 0)
        return -1;
    core_start_hi = (int64_t)time(NULL);
    struct fx *f = *state;
    model = malloc(BIG);
    fx_fill(model, BIG, 42);
    model_size = SIZE;
    nshift = 0;
    atomic_store(&mode, 0);
    atomic_store(&gate_on, false);
    struct core_tier_config cfg = {
        .fetch = fake_fetch, .threads = 3, .wait_ms = 5000, .fail_ms = 300};
    return core_tier_start(f->c, &cfg);
}

static int teardown(void **state)
{
    free(model);
    model = NULL;
    return fx_teardown(state);
}

static void test_evict_and_recall(void **state)
{
    struct fx *f = *state;
    uint64_t change, freed = 0;
    assert_int_equal(fx_put(f, "big", model, SIZE), 0);
    struct core_attr before, after;
    /* no copy recorded: not evictable */
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "big", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(core_tier_evict(f->c, oi.attr.ino, oi.attr.change, NULL), -EAGAIN);
    uint64_t ino = copied(f, "big", &change);
    /* a copy of another content (change counter) is not enough either */
    assert_int_equal(core_tier_evict(f->c, ino, change + 1, NULL), -EAGAIN);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &before), 0);
    assert_int_equal(core_tier_evict(f->c, ino, change, &freed), 0);
    assert_true(freed >= SIZE);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), -EAGAIN); /* evicted already */
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &after), 0);
    assert_int_equal(after.size, before.size);
    assert_int_equal(after.used, before.used); /* usage keeps counting it */
    assert_int_equal(after.change, before.change);
    assert_int_equal(after.mtime.tv_sec, before.mtime.tv_sec);
    checked(f);
    /* a read on an event loop never waits */
    struct core_principal nw = f->su;
    nw.flags |= CORE_P_NOWAIT;
    uint8_t small[100];
    size_t n;
    bool eof;
    assert_int_equal(core_read(f->c, &nw, ino, 0, small, sizeof(small), &n, &eof), -EWOULDBLOCK);
    /* the last bytes first, then everything */
    read_eq(f, ino, SIZE - 1000, 1000, model + SIZE - 1000);
    read_eq(f, ino, 0, SIZE, model);
    assert_true(atomic_load(&fetched) >= SIZE);
    checked(f);
    /* local again: evictable again, and no more fetches for reads */
    uint64_t was = atomic_load(&fetches);
    read_eq(f, ino, 12345, 4 * MB, model + 12345);
    assert_int_equal(atomic_load(&fetches), was);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    checked(f);
    /* a recall interrupted (the core stops) leaves chunks in; a reopen keeps them */
    read_eq(f, ino, 0, 100, model);
    core_tier_stop(f->c);
    fx_reopen(f);
    checked(f);
    struct core_tier_config cfg = {
        .fetch = fake_fetch, .threads = 2, .wait_ms = 5000, .fail_ms = 300};
    assert_int_equal(core_tier_start(f->c, &cfg), 0);
    read_eq(f, ino, 0, SIZE, model);
    checked(f);
}

static void test_remote_fails_or_changed(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    assert_int_equal(fx_put(f, "f", model, 3 * MB), 0);
    uint64_t ino = copied(f, "f", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    uint8_t buf[4096];
    size_t n;
    bool eof;
    /* changed or gone: never its bytes */
    atomic_store(&mode, SRV_EREMOTECHG);
    assert_int_equal(core_read(f->c, &f->su, ino, 0, buf, sizeof(buf), &n, &eof), SRV_EREMOTECHG);
    /* down: retryable, then EIO once it failed for fail_ms (300 ms) */
    atomic_store(&mode, SRV_ERECALL);
    assert_int_equal(core_read(f->c, &f->su, ino, 0, buf, sizeof(buf), &n, &eof), SRV_ERECALL);
    int rc = SRV_ERECALL;
    for (int i = 0; i < 100 && rc == SRV_ERECALL; i++) {
        usleep(20000);
        rc = core_read(f->c, &f->su, ino, 0, buf, sizeof(buf), &n, &eof);
    }
    assert_int_equal(rc, -EIO);
    /* back: the next reads succeed */
    atomic_store(&mode, 0);
    rc = -EIO;
    for (int i = 0; i < 200 && rc != 0; i++) {
        rc = core_read(f->c, &f->su, ino, 0, buf, sizeof(buf), &n, &eof);
        if (rc)
            usleep(20000);
    }
    assert_int_equal(rc, 0);
    assert_memory_equal(buf, model, sizeof(buf));
    /* the rest of the file comes back before the store is checked: a chunk
     * still being fetched holds its space reserved, which the check counts */
    uint8_t *all = malloc(3 * MB);
    rc = -EIO;
    for (int i = 0; i < 200 && rc != 0; i++) {
        rc = core_read(f->c, &f->su, ino, 0, all, 3 * MB, &n, &eof);
        if (rc)
            usleep(20000);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n, 3 * MB);
    assert_memory_equal(all, model, 3 * MB);
    free(all);
    checked(f);
}

static void test_write_and_truncate_recall_first(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    uint8_t *want = malloc(SIZE);
    memcpy(want, model, SIZE);
    assert_int_equal(fx_put(f, "w", model, SIZE), 0);
    uint64_t ino = copied(f, "w", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    enum core_stable st;
    assert_int_equal(
        core_write(f->c, &f->p, ino, 2 * MB + 3, "written", 7, CORE_FILE_SYNC, &st, NULL, NULL), 0);
    memcpy(want + 2 * MB + 3, "written", 7);
    read_eq(f, ino, 0, SIZE, want);
    checked(f);
    /* a changed file is not evictable with the old copy */
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), -EAGAIN);
    /* truncation */
    assert_int_equal(fx_put(f, "t", model, SIZE), 0);
    ino = copied(f, "t", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    struct core_setattr sa = {.mask = CORE_SET_SIZE, .size = 1000};
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, NULL), 0);
    struct core_attr a;
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), 0);
    assert_int_equal(a.size, 1000);
    read_eq(f, ino, 0, 1000, model);
    checked(f);
    /* an evicted file deleted: nothing leaks */
    assert_int_equal(fx_put(f, "d", model, SIZE), 0);
    ino = copied(f, "d", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "d", 1), 0);
    checked(f);
    free(want);
}

/* The inode of the noncurrent version of @p key (one expected). */
struct nc {
    uint64_t ino;
    int n;
};

static int nc_cb(void *arg, const struct core_listent *e)
{
    struct nc *a = arg;
    if (!e->is_prefix && !e->info->latest && !e->info->dmarker) {
        a->ino = e->info->attr.ino;
        a->n++;
    }
    return 0;
}

static uint64_t noncurrent(struct fx *f, const char *key)
{
    struct nc a = {0};
    bool tr;
    assert_int_equal(core_list_versions(f->c, &f->p, f->bucket, key, strlen(key), NULL, 0, NULL,
                                        NULL, 0, 100, nc_cb, &a, &tr),
                     0);
    assert_int_equal(a.n, 1);
    return a.ino;
}

static void read_v(struct fx *f, uint64_t ino, const uint8_t *want, size_t len)
{
    struct core_principal vp = f->su;
    vp.flags |= CORE_P_VERSIONS;
    uint8_t *buf = malloc(len);
    size_t n = 0;
    bool eof;
    assert_int_equal(core_read(f->c, &vp, ino, 0, buf, len, &n, &eof), 0);
    assert_int_equal(n, len);
    assert_memory_equal(buf, want, len);
    free(buf);
}

static uint64_t bucket_bytes(struct fx *f)
{
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    return u.bytes;
}

/* A versioned bucket: the current version is evicted, dropping only its own hold on the
 * extents a noncurrent version shares (they stay, not counted as freed; usage counts the
 * evicted version's bytes on top, as the check wants); a noncurrent version is never
 * evicted; an overwrite or delete of the evicted current version recalls it first, so the
 * version it leaves reads back. */
static void test_versioned(void **state)
{
    struct fx *f = *state;
    uint64_t change, freed = 0;
    enum core_stable st;
    unsigned n;
    uint8_t *orig = malloc(SIZE), *want = model; /* the fake remote serves the current one */
    memcpy(orig, model, SIZE);
    assert_int_equal(core_bucket_versioning_set(f->c, &f->p, f->bucket, CORE_VERS_ENABLED), 0);
    assert_int_equal(fx_put(f, "v", model, SIZE), 0);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "v", 1, &oi), 0);
    free(oi.meta);
    uint64_t ino = oi.attr.ino;
    /* an NFS change of the sealed version: the old one keeps the bytes in a clone sharing
     * every extent but the changed one */
    assert_int_equal(core_write(f->c, &f->p, ino, MB + 5, "YY", 2, CORE_FILE_SYNC, &st, NULL, NULL),
                     0);
    memcpy(model + MB + 5, "YY", 2);
    uint64_t v1 = noncurrent(f, "v");
    assert_int_not_equal(v1, ino);
    /* not sealed yet: not evictable */
    assert_int_equal(copied(f, "v", &change), ino);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), -EAGAIN);
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(copied(f, "v", &change), ino);
    checked(f);
    uint64_t u0 = bucket_bytes(f);
    assert_true(u0 < 2 * (uint64_t)SIZE); /* shared extents count once */
    assert_int_equal(core_tier_evict(f->c, ino, change, &freed), 0);
    assert_true(freed > 0 && freed <= 2 * (uint64_t)MB); /* the changed extent only */
    assert_int_equal(bucket_bytes(f), u0 + (SIZE - freed));
    checked(f);
    /* a noncurrent version is never evicted */
    assert_int_equal(core_tier_evict(f->c, v1, change, NULL), -EAGAIN);
    read_v(f, v1, orig, SIZE);
    read_eq(f, ino, 0, SIZE, want); /* a recall: new extents */
    read_v(f, v1, orig, SIZE);
    checked(f);
    /* evicted again, then overwritten: recalled first, kept as a version */
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    uint64_t fetched0 = atomic_load(&fetched);
    assert_int_equal(fx_put(f, "v", "new", 3), 0);
    assert_true(atomic_load(&fetched) >= fetched0 + SIZE);
    read_v(f, ino, want, SIZE);
    read_v(f, v1, orig, SIZE);
    checked(f);
    /* a delete (marker) of an evicted current version */
    assert_int_equal(fx_put(f, "w", model, SIZE), 0);
    ino = copied(f, "w", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "w", 1), 0);
    read_v(f, ino, model, SIZE);
    checked(f);
    /* DELETE ?versionId= of the evicted current version: gone for good, no recall; the
     * older version is current again */
    assert_int_equal(fx_put(f, "x", "old", 3), 0);
    assert_int_equal(fx_put(f, "x", model, SIZE), 0);
    ino = copied(f, "x", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "x", 1, &oi), 0);
    free(oi.meta);
    fetched0 = atomic_load(&fetched);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "x", 1, oi.vid, 0, NULL), 0);
    assert_int_equal(atomic_load(&fetched), fetched0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "x", 1, &oi), 0);
    free(oi.meta);
    assert_int_equal(oi.attr.size, 3);
    checked(f);
    /* a suspended bucket's null version is replaced for good: no recall */
    assert_int_equal(core_bucket_versioning_set(f->c, &f->p, f->bucket, CORE_VERS_SUSPENDED), 0);
    assert_int_equal(fx_put(f, "s", model, SIZE), 0);
    ino = copied(f, "s", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    fetched0 = atomic_load(&fetched);
    assert_int_equal(fx_put(f, "s", "x", 1), 0);
    assert_int_equal(atomic_load(&fetched), fetched0);
    checked(f);
    free(orig);
}

/* Restart the recall threads with @p chunk, @p streams on @p threads. */
static void restart_tier(struct fx *f, uint64_t chunk, uint32_t threads, uint32_t streams)
{
    core_tier_stop(f->c);
    struct core_tier_config cfg = {.fetch = fake_fetch,
                                   .threads = threads,
                                   .wait_ms = 5000,
                                   .fail_ms = 3000,
                                   .chunk = chunk,
                                   .streams = streams};
    assert_int_equal(core_tier_start(f->c, &cfg), 0);
}

static bool logged(uint64_t off, uint64_t len)
{
    bool yes = false;
    pthread_mutex_lock(&log_mu);
    for (size_t i = 0; i < nlog; i++)
        yes |= log_off[i] == off && log_len[i] == len;
    pthread_mutex_unlock(&log_mu);
    return yes;
}

static void test_chunks_streams_and_partial(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    struct core_tier_stats ts;
    assert_int_equal(fx_put(f, "g", model, SIZE), 0);
    uint64_t ino = copied(f, "g", &change);
    /* chunks of 2 MiB, one stream: the first 2 MiB come in 1 MiB pieces, then 2 MiB
     * chunks, the last one short; never two fetches of the file at once */
    restart_tier(f, 2 * MB, 3, 1);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    nlog = 0;
    atomic_store(&most, 0);
    read_eq(f, ino, 0, SIZE, model);
    assert_int_equal(nlog, 4);
    assert_true(logged(0, MB) && logged(MB, MB) && logged(2 * MB, 2 * MB) &&
                logged(4 * MB, SIZE - 4 * MB));
    assert_int_equal(atomic_load(&most), 1);
    checked(f);
    /* a chunk size not a multiple of 1 MiB is rounded up (3.5 MiB: 4 MiB) */
    restart_tier(f, 3 * MB + MB / 2, 2, 0);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    nlog = 0;
    read_eq(f, ino, 0, SIZE, model);
    assert_true(logged(3 * MB, MB) && logged(4 * MB, SIZE - 4 * MB));
    assert_int_equal(nlog, 5);
    checked(f);
    /* 1 MiB chunks, one stream: only [3 MiB, 4 MiB) may be fetched; a read there brings
     * it back (fetched first: the read waits for it), then the daemon stops with the rest
     * still on the remote */
    restart_tier(f, MB, 2, 1);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    atomic_store(&allow_lo, 3 * MB);
    atomic_store(&allow_hi, 3 * MB + 1);
    /* (the other chunks' failures may answer it SRV_ERECALL before its chunk is in) */
    uint8_t got[100];
    size_t n = 0;
    bool eof;
    int rc = SRV_ERECALL;
    for (int i = 0; i < 100 && rc == SRV_ERECALL; i++) {
        rc = core_read(f->c, &f->su, ino, 3 * MB + 10, got, sizeof(got), &n, &eof);
        if (rc)
            usleep(20000);
    }
    assert_int_equal(rc, 0);
    assert_memory_equal(got, model + 3 * MB + 10, sizeof(got));
    core_tier_stop(f->c);
    fx_reopen(f);
    checked(f);
    /* restarted with 2 MiB chunks: [2 MiB, 4 MiB) is half back; its other half goes in,
     * the rest too, and the file is whole (local) again */
    restart_tier(f, 2 * MB, 3, 0);
    atomic_store(&allow_lo, 0);
    atomic_store(&allow_hi, UINT64_MAX);
    core_tier_stats_get(f->c, &ts);
    uint64_t was = ts.recalled_bytes;
    read_eq(f, ino, 0, SIZE, model);
    core_tier_stats_get(f->c, &ts);
    assert_int_equal(ts.recalled_bytes - was, SIZE - MB); /* the MiB back already: not again */
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0); /* it was local again */
    checked(f);
}

/* A file's tier policy's recall settings (what the server's knobs callback answers). */
static struct core_recall_knobs pol_kn;

static int fake_knobs(void *arg, uint64_t ino, struct core_recall_knobs *out)
{
    (void)arg;
    (void)ino;
    *out = pol_kn;
    return 0;
}

static void restart_knobs(struct fx *f, uint64_t chunk, uint32_t threads,
                          struct core_recall_knobs kn)
{
    core_tier_stop(f->c);
    pol_kn = kn;
    struct core_tier_config cfg = {.fetch = fake_fetch,
                                   .knobs = fake_knobs,
                                   .threads = threads,
                                   .wait_ms = 5000,
                                   .fail_ms = 3000,
                                   .chunk = chunk};
    assert_int_equal(core_tier_start(f->c, &cfg), 0);
}

static void test_policy_knobs(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    struct core_tier_stats ts;
    assert_int_equal(fx_put(f, "k", model, SIZE), 0);
    uint64_t ino = copied(f, "k", &change);
    /* a policy's chunk 0 and streams 0: the daemon's (2 MiB chunks, all 3 slots) */
    restart_knobs(f, 2 * MB, 3, (struct core_recall_knobs){.whole_file = true});
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    nlog = 0;
    read_eq(f, ino, 0, SIZE, model);
    assert_int_equal(nlog, 4);
    assert_true(logged(2 * MB, 2 * MB) && logged(4 * MB, SIZE - 4 * MB));
    checked(f);
    /* the policy's chunk over the daemon's; its streams never above the threads */
    restart_knobs(f, 8 * MB, 2,
                  (struct core_recall_knobs){.chunk = MB, .streams = 16, .whole_file = true});
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    nlog = 0;
    atomic_store(&most, 0);
    read_eq(f, ino, 0, SIZE, model);
    assert_int_equal(nlog, 6);
    assert_true(logged(4 * MB, MB) && logged(5 * MB, SIZE - 5 * MB));
    assert_true(atomic_load(&most) <= 2);
    checked(f);
    /* whole_file off: a read of 100 bytes brings its 1 MiB chunk and 1 MiB of read-ahead,
     * one stream, and the file stays evicted with the rest on the remote */
    restart_knobs(f, 8 * MB, 3,
                  (struct core_recall_knobs){
                      .chunk = MB, .streams = 1, .read_ahead = MB, .whole_file = false});
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    nlog = 0;
    atomic_store(&most, 0);
    read_eq(f, ino, 10, 100, model + 10);
    usleep(200000); /* the read-ahead is fetched after the read's chunk */
    assert_int_equal(nlog, 2);
    assert_true(logged(0, MB) && logged(MB, MB));
    assert_int_equal(atomic_load(&most), 1);
    checked(f);
    /* the whole file then: only the rest is fetched, and it is local again */
    core_tier_stats_get(f->c, &ts);
    uint64_t was = ts.recalled_bytes;
    read_eq(f, ino, 0, SIZE, model);
    core_tier_stats_get(f->c, &ts);
    assert_int_equal(ts.recalled_bytes - was, SIZE - 2 * MB);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0); /* it was local again */
    checked(f);
}

struct reader {
    struct fx *f;
    uint64_t ino;
};

static void *read_main(void *arg)
{
    struct reader *r = arg;
    read_eq(r->f, r->ino, 0, SIZE, model);
    return NULL;
}

/* A prefetch (core__tier_prefetch) goes after every recall a reader waits for, though
 * it is newer (a new recall is first in the list): with one GET slot, a reader's recall
 * of e started first gets every piece before the prefetch of p gets one. */
static void test_prefetch_after_demand(void **state)
{
    struct fx *f = *state;
    uint64_t ce, cp;
    core_tier_stop(f->c);
    struct core_tier_config cfg = {
        .fetch = fake_fetch, .threads = 1, .wait_ms = 10000, .fail_ms = 300};
    assert_int_equal(core_tier_start(f->c, &cfg), 0);
    assert_int_equal(fx_put(f, "e", model, SIZE), 0);
    assert_int_equal(fx_put(f, "p", model, SIZE), 0);
    uint64_t e = copied(f, "e", &ce), p = copied(f, "p", &cp);
    assert_int_equal(core_tier_evict(f->c, e, ce, NULL), 0);
    assert_int_equal(core_tier_evict(f->c, p, cp, NULL), 0);
    pthread_mutex_lock(&log_mu);
    nlog = 0;
    pthread_mutex_unlock(&log_mu);
    uint64_t f0 = atomic_load(&fetches);
    struct reader rd = {f, e};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_main, &rd), 0);
    while (atomic_load(&fetches) == f0)
        usleep(1000); /* e's first piece is back: the rest of e is to come */
    struct meta_txn *t;
    struct meta_inode r;
    assert_int_equal(meta_rtxn_begin(core_meta(f->c), &t), 0);
    assert_int_equal(meta_inode_get(t, p, &r), 0);
    meta_rtxn_end(t);
    assert_true(r.flags & META_I_EVICTED);
    assert_int_equal(core__tier_prefetch(f->c, p, &r, 1000), 1);
    assert_int_equal(core__tier_prefetch(f->c, p, &r, 1000), 0); /* on its way */
    pthread_join(th, NULL);
    read_eq(f, p, 0, SIZE, model);
    pthread_mutex_lock(&log_mu);
    size_t last_e = 0, first_p = SIZE_MAX, ne = 0;
    for (size_t i = 0; i < nlog; i++) {
        if (log_ino[i] == e) {
            last_e = i;
            ne++;
        } else if (log_ino[i] == p && first_p == SIZE_MAX) {
            first_p = i;
        }
    }
    pthread_mutex_unlock(&log_mu);
    assert_true(ne > 1);
    assert_true(first_p != SIZE_MAX);
    assert_true(last_e < first_p);
    checked(f);
}

struct note_op {
    uint64_t ino;
    int64_t read_s;
};

static int note_fn(struct meta_txn *t, void *arg)
{
    const struct note_op *a = arg;
    return meta_tier_note_read(t, a->ino, a->read_s);
}

static uint32_t stored_read(struct fx *f, uint64_t ino)
{
    struct meta_txn *t;
    struct meta_tier_copy *c = calloc(1, sizeof(*c));
    assert_int_equal(meta_rtxn_begin(core_meta(f->c), &t), 0);
    assert_int_equal(meta_tier_get(t, ino, c), 0);
    meta_rtxn_end(t);
    uint32_t v = c->st.read_s;
    free(c);
    return v;
}

/* Read times: the core's in memory (at least this start's time when nothing is stored),
 * the record's (meta_tierst.read_s) when later, and only raised by meta_tier_note_read;
 * a close keeps the reads it saw in the records; after a reopen (a restart) the record's
 * time is what counts, not the reopen's. */
static void test_read_times(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    int64_t t0 = (int64_t)time(NULL);
    assert_int_equal(fx_put(f, "a", model, 1000), 0);
    assert_int_equal(fx_put(f, "b", model, 2000), 0);
    uint64_t a = copied(f, "a", &change), b = copied(f, "b", &change);
    /* a record as an older build wrote it: no read time; the core's start counts */
    assert_int_equal(stored_read(f, a), 0);
    int64_t la = core_tier_last_read(f->c, a, 0);
    /* (the core's open, not the test's start: filling the model and starting the tier,
     * a loaded machine may take seconds in between) */
    assert_true(la >= core_start_lo && la <= core_start_hi);
    /* a stored time earlier than this start (a read in an earlier run) is kept as is */
    assert_int_equal(core_tier_last_read(f->c, b, 1000), 1000);
    assert_int_equal(core_tier_last_read(f->c, b, t0 + 500), t0 + 500);
    /* a read: the core's time wins over an earlier stored one */
    read_eq(f, a, 0, 1000, model);
    assert_true(core_tier_last_read(f->c, a, 1000) >= t0);
    /* the record's read time only goes up; a record that is not there answers ENOENT */
    struct note_op n = {a, 5000};
    assert_int_equal(meta_submit(core_meta(f->c), note_fn, &n, 0), 0);
    assert_int_equal(stored_read(f, a), 5000);
    n.read_s = 4000;
    assert_int_equal(meta_submit(core_meta(f->c), note_fn, &n, 0), 0);
    assert_int_equal(stored_read(f, a), 5000);
    n.ino = 999999;
    assert_int_equal(meta_submit(core_meta(f->c), note_fn, &n, 0), -ENOENT);
    n = (struct note_op){b, 7000};
    assert_int_equal(meta_submit(core_meta(f->c), note_fn, &n, 0), 0);
    checked(f);
    /* a reopen (a restart): the stored times are what is known, not the reopen's time */
    core_tier_stop(f->c);
    fx_reopen(f);
    checked(f);
    struct core_tier_config cfg = {
        .fetch = fake_fetch, .threads = 2, .wait_ms = 5000, .fail_ms = 300};
    assert_int_equal(core_tier_start(f->c, &cfg), 0);
    uint32_t ra = stored_read(f, a); /* the read above, kept at the close */
    assert_true(ra >= t0 && ra <= time(NULL));
    assert_int_equal(stored_read(f, b), 7000); /* not read: as noted */
    assert_int_equal(core_tier_last_read(f->c, a, ra), ra);
    assert_int_equal(core_tier_last_read(f->c, b, stored_read(f, b)), 7000);
    assert_true(core_tier_last_read(f->c, b, 0) >= t0); /* nothing stored: the start */
}

/* The pieces of [@p off, @p off + @p len) of @p ino: how many of their bytes are in
 * memory (recalled chunks) and from the store's fd; they equal the model. */
static void pieces_eq(struct fx *f, uint64_t ino, uint64_t off, uint64_t len, uint64_t *in_mem,
                      uint64_t *from_fd, struct core_pieces *keep)
{
    struct core_pieces ps;
    assert_int_equal(core_read_pieces(f->c, &f->su, ino, off, len, &ps), 0);
    assert_int_equal(ps.len, len);
    uint8_t *buf = malloc(len);
    uint64_t pos = 0;
    *in_mem = *from_fd = 0;
    for (size_t i = 0; i < ps.n; i++) {
        const struct core_piece *p = &ps.v[i];
        if (p->fd >= 0) {
            assert_int_equal(pread(p->fd, buf + pos, p->len, (off_t)p->off), (ssize_t)p->len);
            *from_fd += p->len;
        } else {
            assert_non_null(p->mem);
            memcpy(buf + pos, p->mem, p->len);
            *in_mem += p->len;
        }
        pos += p->len;
    }
    assert_int_equal(pos, len);
    assert_memory_equal(buf, model + off, len);
    free(buf);
    if (keep)
        *keep = ps;
    else
        core_pieces_release(&ps);
}

/* A reader of a file being recalled gets the recalled chunks' bytes from memory (not
 * read back from the disk), the memory stays while its pieces hold it, and seconds
 * after the recall the pieces are the store's again. */
static void test_recalled_bytes_from_memory(void **state)
{
    struct fx *f = *state;
    uint64_t change, in_mem, from_fd;
    assert_int_equal(fx_put(f, "mem", model, SIZE), 0);
    uint64_t ino = copied(f, "mem", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    read_eq(f, ino, 0, SIZE, model); /* recalled */
    struct core_pieces held;
    pieces_eq(f, ino, 0, SIZE, &in_mem, &from_fd, NULL);
    assert_int_equal(in_mem, SIZE);
    assert_int_equal(from_fd, 0);
    pieces_eq(f, ino, MB - 7, 2 * MB + 9, &in_mem, &from_fd, &held);
    assert_int_equal(in_mem, 2 * MB + 9);
    /* the table lets go of the chunks a while after the recall; held pieces keep theirs */
    usleep(4500 * 1000);
    uint64_t at = MB - 7;
    for (size_t i = 0; i < held.n; i++) {
        assert_memory_equal(held.v[i].mem, model + at, held.v[i].len);
        at += held.v[i].len;
    }
    core_pieces_release(&held);
    pieces_eq(f, ino, 0, SIZE, &in_mem, &from_fd, NULL);
    assert_int_equal(in_mem, 0);
    assert_int_equal(from_fd, SIZE);
    checked(f);
}

/* A reader taking a file's recalled chunks from memory paces its recall: the recall
 * fetches no further ahead than the memory table holds while that reader reads, and
 * goes on to the end once it stopped reading for a while.
 * "While it reads" is a time (RM_PACE_MS, 1 s, since its last chunk): the recall waits
 * (the fake remote's gate) until the reader took its first chunk, and what is measured
 * counts only if the reader's steps all ran within that second of its first read, and
 * the recall got at least 10 MiB ahead meanwhile (unpaced, it would have gone on past
 * 16 MiB: fetches take 20 ms, 3 at once); on a machine too loaded for that (a disk busy
 * with others delays the chunks' syncs), the attempt is done again (the file evicted
 * again, once the memory table forgot the chunks of the last one). */
#define PACE_MS 1000 /* core_tier.c RM_PACE_MS */
static void test_reader_paces_the_recall(void **state)
{
    struct fx *f = *state;
    uint64_t change, in_mem, from_fd;
    model_size = BIG;
    /* 1 MiB chunks, 3 threads: the table holds 2 x 3 x 2 MiB = 12 MiB */
    restart_knobs(f, MB, 3, (struct core_recall_knobs){.whole_file = true});
    assert_int_equal(fx_put(f, "pace", model, BIG), 0);
    uint64_t ino = copied(f, "pace", &change);
    atomic_store(&gate_from, MB);
    for (int attempt = 1;; attempt++) {
        assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
        uint64_t f0 = atomic_load(&fetched);
        atomic_store(&gate_on, true); /* the first chunk only, until the reader took it */
        int64_t t0 = srv_now_ms();    /* the reader's first read is later */
        pieces_eq(f, ino, 0, MB, &in_mem, &from_fd, NULL); /* waits for the first MiB */
        assert_int_equal(in_mem, MB);
        atomic_store(&gate_on, false);
        while (srv_now_ms() - t0 < 600) /* time for the recall to run ahead, were it free */
            usleep(10000);
        /* 12 MiB not taken yet, 3 on their way, and the one read */
        uint64_t ahead = atomic_load(&fetched) - f0;
        uint64_t mem_ahead;
        struct core_pieces ps;
        pieces_eq(f, ino, MB, 4 * MB, &mem_ahead, &from_fd, &ps);
        int64_t took = srv_now_ms() - t0;
        /* A chunk whose txn committed just before the read but that was not in the table
         * yet (core_tier.c, recall_chunk: mem_keep follows the commit) was read from the
         * disk: the right bytes (checked), counted apart. It is in the table moments
         * later (unread: not pushed out first), while a chunk the table pushed out (what
         * this test is about) is done and never comes back: each MiB that came from the
         * disk is read again until it comes from memory, for 2 s at most. (Not the whole
         * range: the chunks read from memory may go now.) */
        bool disk[4] = {false};
        uint64_t pos = MB;
        for (size_t i = 0; i < ps.n; pos += ps.v[i++].len)
            for (uint64_t b = pos; ps.v[i].fd >= 0 && b < pos + ps.v[i].len; b += MB / 4)
                disk[b / MB - 1] = true;
        core_pieces_release(&ps);
        for (int j = 0; j < 4; j++) {
            uint64_t m = 0, d;
            if (disk[j])
                fprintf(stderr, "MiB %d of the file read from the disk: again\n", j + 1);
            for (int64_t t2 = srv_now_ms(); disk[j] && m < MB && srv_now_ms() - t2 < 2000;) {
                usleep(10000);
                pieces_eq(f, ino, (uint64_t)(j + 1) * MB, MB, &m, &d, NULL);
            }
            if (disk[j] && m == MB)
                mem_ahead += MB; /* (a chunk is one 1 MiB extent: from the disk whole) */
        }
        /* the reader stops: the recall goes on to the end */
        int64_t t1 = srv_now_ms();
        while (atomic_load(&fetched) - f0 < BIG && srv_now_ms() - t1 < 20000)
            usleep(20000);
        assert_int_equal(atomic_load(&fetched) - f0, BIG);
        read_eq(f, ino, 0, BIG, model);
        checked(f);
        if (took < PACE_MS - 100 && ahead >= 10 * MB) {
            if (ahead > 16 * MB)
                fprintf(stderr, "fetched %llu MiB ahead\n", (unsigned long long)(ahead / MB));
            assert_true(ahead <= 16 * MB);
            assert_int_equal(mem_ahead, 4 * MB); /* still in memory, not pushed out */
            break;
        }
        fprintf(stderr,
                "attempt %d: the reader's steps took %lld ms, the recall got %llu MiB ahead"
                " (a loaded machine): again\n",
                attempt, (long long)took, (unsigned long long)(ahead / MB));
        assert_true(attempt < 12);
        usleep(3500 * 1000); /* the table forgets this attempt's chunks (RM_KEEP_MS) */
    }
}

#define NSMALL 16
#define SMALL(i) (150000 + (size_t)(i)*997) /* a dataset's samples, ~150 KB */

struct small_reader {
    struct fx *f;
    const uint64_t *ino;
    int first, n; /* it reads files first, first + 1, ... (mod NSMALL), n of them */
};

static void *small_main(void *arg)
{
    struct small_reader *r = arg;
    for (int j = 0; j < r->n; j++) {
        int i = (r->first + j) % NSMALL;
        read_eq(r->f, r->ino[i], 0, SMALL(i), model + i * 4096);
    }
    return NULL;
}

/* Runs @p nr readers of the small files at once, @p share of them starting at the same
 * file, each reading @p n files; @return the futile wake-ups meanwhile (@p wakeups: all
 * of them). */
static uint64_t small_readers(struct fx *f, const uint64_t *ino, int nr, int share, int n,
                              uint64_t *wakeups)
{
    struct core_tier_stats ts;
    core_tier_stats_get(f->c, &ts);
    uint64_t w0 = ts.wakeups, f0 = ts.wakeups_futile;
    struct small_reader rd[8];
    pthread_t th[8];
    for (int i = 0; i < nr; i++) {
        rd[i] = (struct small_reader){f, ino, i / share * (NSMALL * share / nr), n};
        assert_int_equal(pthread_create(&th[i], NULL, small_main, &rd[i]), 0);
    }
    for (int i = 0; i < nr; i++)
        pthread_join(th[i], NULL);
    core_tier_stats_get(f->c, &ts);
    *wakeups = ts.wakeups - w0;
    return ts.wakeups_futile - f0;
}

/* Many small files recalled at once (a dataset's samples), by readers that each wait for
 * a file of their own, then by readers that share the files' recalls: every read gets
 * the right bytes, every file is local again after, and no reader or recall thread is
 * woken for another's chunk (a finished chunk wakes its own readers, a fetchable chunk
 * one thread). */
static void test_small_files_at_once(void **state)
{
    struct fx *f = *state;
    uint64_t ino[NSMALL], change[NSMALL], wakeups;
    char key[16];
    restart_tier(f, 0, 4, 0); /* 4 GETs at once, 8 recall threads */
    for (int i = 0; i < NSMALL; i++) {
        snprintf(key, sizeof(key), "small%d", i);
        assert_int_equal(fx_put(f, key, model + i * 4096, SMALL(i)), 0);
        ino[i] = copied(f, key, &change[i]);
        shift_ino[i] = ino[i];
        shift_by[i] = (uint64_t)i * 4096;
    }
    nshift = NSMALL;
    for (int i = 0; i < NSMALL; i++)
        assert_int_equal(core_tier_evict(f->c, ino[i], change[i], NULL), 0);
    /* 8 readers, a file each (the even ones): 8 recalls at once on 4 GET slots */
    uint64_t futile = small_readers(f, ino, 8, 1, 1, &wakeups);
    if (futile)
        fprintf(stderr, "%llu futile wake-ups of %llu\n", (unsigned long long)futile,
                (unsigned long long)wakeups);
    assert_true(futile <= 1);  /* (one spurious wake-up allowed) */
    assert_true(wakeups >= 4); /* at least the readers that waited for a queued recall */
    checked(f);
    for (int i = 0; i < NSMALL; i += 2) /* local again: evictable */
        assert_int_equal(core_tier_evict(f->c, ino[i], change[i], NULL), 0);
    /* 8 readers of all 16 files, in pairs that read the same file at once (starting at
     * files 0, 4, 8, 12): 4 recalls at once, each shared by two readers */
    futile = small_readers(f, ino, 8, 2, NSMALL, &wakeups);
    if (futile)
        fprintf(stderr, "%llu futile wake-ups of %llu\n", (unsigned long long)futile,
                (unsigned long long)wakeups);
    assert_true(futile <= 1);
    for (int i = 0; i < NSMALL; i++) /* local again: evictable */
        assert_int_equal(core_tier_evict(f->c, ino[i], change[i], NULL), 0);
    checked(f);
}

/* A small file (one chunk) comes back with one metadata commit: the txn that puts its
 * chunk into the map also makes it local again (it used to take a second txn, the
 * "whole again" one, after the chunk's). A file of several chunks takes one per chunk,
 * and a last one for the file only if the last chunk started before the others were in. */
static void test_small_file_one_commit(void **state)
{
    struct fx *f = *state;
    uint64_t change;
    struct meta_stats m0, m1;
    struct core_attr before, after;
    restart_tier(f, 0, 1, 0); /* one GET at a time: chunks in order, the last one last */
    assert_int_equal(fx_put(f, "sample", model, SMALL(3)), 0);
    uint64_t ino = copied(f, "sample", &change);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &before), 0);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    checked(f);
    meta_stats_get(core_meta(f->c), &m0);
    read_eq(f, ino, 1000, 5000, model + 1000);
    meta_stats_get(core_meta(f->c), &m1);
    assert_int_equal(m1.commit_ops - m0.commit_ops, 1);
    /* local again: the read needed no more fetch, it is evictable, its used is what
     * it holds */
    uint64_t was = atomic_load(&fetches);
    read_eq(f, ino, 0, SMALL(3), model);
    assert_int_equal(atomic_load(&fetches), was);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &after), 0);
    assert_int_equal(after.used, before.used);
    checked(f);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    checked(f);
    /* 3 chunks (the first 8 MiB come in 1 MiB pieces): one commit each, and the file's
     * own only when another chunk was still being written as the last one started */
    assert_int_equal(fx_put(f, "three", model, 3 * MB), 0);
    ino = copied(f, "three", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    checked(f);
    meta_stats_get(core_meta(f->c), &m0);
    read_eq(f, ino, 0, 3 * MB, model);
    meta_stats_get(core_meta(f->c), &m1);
    assert_true(m1.commit_ops - m0.commit_ops >= 3);
    assert_true(m1.commit_ops - m0.commit_ops <= 4);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0); /* local again */
    checked(f);
}

/* A recall reuses its chunk buffers: those of chunks the table let go of (read, or
 * pushed out) go to a pool the next chunks take theirs from, so a recall of many
 * chunks maps only about as many buffers as are in flight, in the table and in the
 * pool at once (issue 12: a buffer freed to malloc and taken anew faulted in and
 * zeroed every byte recalled, and the heap grew by the recalled bytes); a recall
 * right after another maps none; all of them are given back once no recalled chunk is
 * left in memory. */
static void test_recall_reuses_buffers(void **state)
{
    struct fx *f = *state;
    uint64_t change, in_mem, from_fd;
    struct core_tier_stats st;
    model_size = BIG;
    /* 1 MiB chunks, 1 thread: 2 recall threads, a table of 2 x 1 x 2 MiB and a pool as
     * large: at most 2 + 4 + 4 buffers of 1 MiB live at once, for 24 chunks */
    restart_knobs(f, MB, 1, (struct core_recall_knobs){.whole_file = true});
    assert_int_equal(fx_put(f, "reuse", model, BIG), 0);
    uint64_t ino = copied(f, "reuse", &change);
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    core_tier_stats_get(f->c, &st);
    uint64_t m0 = st.buf_maps;
    for (uint64_t off = 0; off < BIG; off += MB) /* a reader taking the chunks from memory */
        pieces_eq(f, ino, off, MB, &in_mem, &from_fd, NULL);
    read_eq(f, ino, 0, BIG, model);
    core_tier_stats_get(f->c, &st);
    if (st.buf_maps - m0 > 10)
        fprintf(stderr, "%llu chunk buffers mapped for %d chunks\n",
                (unsigned long long)(st.buf_maps - m0), BIG / MB);
    assert_true(st.buf_maps - m0 >= 1);
    assert_true(st.buf_maps - m0 <= 10);
    uint64_t r0 = st.buf_reuses;
    assert_true(r0 >= BIG / MB - 10); /* every chunk took a buffer: mapped or reused */
    assert_true(st.buf_live >= 1 && st.buf_live <= 10);
    assert_int_equal(st.buf_live_bytes, st.buf_live * MB);
    /* a second recall right after takes the buffers the first left in the table and
     * the pool: none mapped anew (recall threads give theirs to the pool too) */
    assert_int_equal(core_tier_evict(f->c, ino, change, NULL), 0);
    core_tier_stats_get(f->c, &st);
    m0 = st.buf_maps;
    for (uint64_t off = 0; off < BIG; off += MB)
        pieces_eq(f, ino, off, MB, &in_mem, &from_fd, NULL);
    core_tier_stats_get(f->c, &st);
    assert_int_equal(st.buf_maps - m0, 0);
    assert_int_equal(st.buf_reuses - r0, BIG / MB);
    /* seconds after the last recall the table and the pool give every buffer back */
    for (int i = 0; i < 100; i++) {
        core_tier_stats_get(f->c, &st);
        if (st.buf_live == 0)
            break;
        usleep(100 * 1000);
    }
    assert_int_equal(st.buf_live, 0);
    assert_int_equal(st.buf_live_bytes, 0);
    checked(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_evict_and_recall, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_fails_or_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_and_truncate_recall_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versioned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunks_streams_and_partial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_knobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_after_demand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_times, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recalled_bytes_from_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_paces_the_recall, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_files_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_reuses_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_file_one_commit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
