/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_version.c (and core_vdata.c): versioning states,
 * versions made by S3 puts and deletes (delete markers, the null version of
 * suspended and never-versioned buckets, files from before versioning),
 * deleting versions (the next newest becomes current again), NFS changes in
 * a versioned bucket (a sealed version keeps its bytes in a clone sharing
 * extents; sealing by the worker; REMOVE, RENAME), ListObjectVersions order
 * and paging, usage of versions (extents shared by versions freed once:
 * the store gets all its space back), object lock (retention, bypass,
 * compliance, legal hold, NFS refused) and buckets with versions left.
 * After each test the store check (core_check) must find nothing; it must find
 * records made inconsistent on purpose (test_check). */
#include "core_test_util.h"

#include "meta.h"
#include "meta_extent.h"
#include "meta_version.h"

#define MB (1024 * 1024)

static void vput(struct fx *f, const char *key, const void *data, size_t len, char *vid,
                 const struct core_lock *lk, int want)
{
    struct core_upload *u;
    struct core_putopt o = {lk, vid};
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, len, &u), 0);
    assert_int_equal(core_upload_write(u, data, len), 0);
    core_upload_set_opt(u, &o);
    assert_int_equal(core_upload_commit(u, key, strlen(key), "e", NULL, 0, NULL, false, NULL),
                     want);
}

static void vers(struct fx *f, enum core_versioning v)
{
    assert_int_equal(core_bucket_versioning_set(f->c, &f->p, f->bucket, v), 0);
}

/* The content of version @p vid of @p key (NULL: current) must be @p want (@p n bytes). */
static void vread(struct fx *f, const char *key, const char *vid, const void *want, size_t n)
{
    struct core_objinfo oi;
    struct core_principal vp = f->p;
    vp.flags |= CORE_P_VERSIONS;
    if (vid)
        assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, key, strlen(key), vid, &oi),
                         0);
    else
        assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, key, strlen(key), &oi), 0);
    free(oi.meta);
    assert_false(oi.dmarker);
    assert_int_equal(oi.attr.size, n);
    char *buf = malloc(n + 1);
    size_t got = 0;
    bool eof;
    assert_int_equal(core_read(f->c, &vp, oi.attr.ino, 0, buf, n, &got, &eof), 0);
    assert_int_equal(got, n);
    assert_memory_equal(buf, want, n);
    free(buf);
}

struct lv {
    char key[64][32];
    char vid[64][CORE_VID_MAX + 1];
    bool latest[64], dmarker[64], prefix[64];
    int n;
};

static int lv_cb(void *arg, const struct core_listent *e)
{
    struct lv *l = arg;
    assert_true(l->n < 64);
    snprintf(l->key[l->n], sizeof(l->key[0]), "%.*s", (int)e->keylen, e->key);
    l->prefix[l->n] = e->is_prefix;
    if (!e->is_prefix) {
        snprintf(l->vid[l->n], sizeof(l->vid[0]), "%s", e->info->vid);
        l->latest[l->n] = e->info->latest;
        l->dmarker[l->n] = e->info->dmarker;
    }
    l->n++;
    return 0;
}

static void list(struct fx *f, const char *prefix, const char *km, const char *vm,
                 const char *delim, uint32_t max, struct lv *l, bool *tr)
{
    memset(l, 0, sizeof(*l));
    assert_int_equal(core_list_versions(f->c, &f->p, f->bucket, prefix, prefix ? strlen(prefix) : 0,
                                        km, km ? strlen(km) : 0, vm, delim,
                                        delim ? strlen(delim) : 0, max, lv_cb, l, tr),
                     0);
}

static uint64_t store_free(struct fx *f)
{
    struct core_stats st;
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &st);
    return st.store_free;
}

static uint64_t bucket_bytes(struct fx *f)
{
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    return u.bytes;
}

static void check_report(void *arg, const char *problem)
{
    (void)arg;
    fprintf(stderr, "store check: %s\n", problem);
}

/* The store check's result, with nothing pending. */
static int check(struct fx *f)
{
    if (core_sync(f->c) != 0)
        return -1;
    return core_check(f->c, check_report, NULL);
}

static int teardown_checked(void **state)
{
    int rc = check(*state);
    if (fx_teardown(state) != 0)
        return -1;
    return rc ? -1 : 0;
}

static void test_states(void **state)
{
    struct fx *f = *state;
    struct core_bucket_vcfg cfg;
    assert_int_equal(core_bucket_vcfg_get(f->c, &f->p, f->bucket, &cfg), 0);
    assert_int_equal(cfg.versioning, CORE_VERS_NONE);
    assert_int_equal(core_bucket_versioning_set(f->c, &f->p, f->bucket, CORE_VERS_NONE), -EINVAL);
    struct core_principal other = f->p;
    other.uid = 4242;
    assert_int_equal(core_bucket_versioning_set(f->c, &other, f->bucket, CORE_VERS_ENABLED),
                     -EACCES);
    vers(f, CORE_VERS_SUSPENDED);
    assert_int_equal(core_bucket_vcfg_get(f->c, &f->p, f->bucket, &cfg), 0);
    assert_int_equal(cfg.versioning, CORE_VERS_SUSPENDED);
    /* object lock needs versioning enabled; then it cannot be suspended */
    struct core_bucket_vcfg lk = {.lock_mode = CORE_LOCK_GOVERNANCE, .lock_days = 1};
    assert_int_equal(core_bucket_objlock_set(f->c, &f->p, f->bucket, &lk), SRV_EBADSTATE);
    vers(f, CORE_VERS_ENABLED);
    assert_int_equal(core_bucket_objlock_set(f->c, &f->p, f->bucket, &lk), 0);
    assert_int_equal(core_bucket_versioning_set(f->c, &f->p, f->bucket, CORE_VERS_SUSPENDED),
                     SRV_EBADSTATE);
    fx_reopen(f); /* kept, and the bucket set rebuilt */
    assert_int_equal(core_bucket_vcfg_get(f->c, &f->p, f->bucket, &cfg), 0);
    assert_true(cfg.objlock);
    assert_int_equal(cfg.versioning, CORE_VERS_ENABLED);
    assert_int_equal(cfg.lock_days, 1);
}

static void test_puts_and_markers(void **state)
{
    struct fx *f = *state;
    char v1[CORE_VID_MAX + 1], v2[CORE_VID_MAX + 1], n0[CORE_VID_MAX + 1];
    struct core_objinfo oi;
    struct core_delres dr;
    struct lv l;
    bool tr;
    uint64_t free0 = store_free(f);
    uint8_t *big = malloc(3 * MB);
    fx_fill(big, 3 * MB, 5);
    /* before versioning: no version id; the object becomes the null version */
    vput(f, "k", "zero", 4, n0, NULL, 0);
    assert_string_equal(n0, "");
    vers(f, CORE_VERS_ENABLED);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "k", 1, &oi), 0);
    free(oi.meta);
    assert_string_equal(oi.vid, "null");
    vput(f, "k", big, 3 * MB, v1, NULL, 0);
    vput(f, "k", "second", 6, v2, NULL, 0);
    assert_int_equal(strlen(v1), 32);
    assert_string_not_equal(v1, v2);
    vread(f, "k", NULL, "second", 6);
    vread(f, "k", v1, big, 3 * MB);
    vread(f, "k", "null", "zero", 4);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.vid[0], v2);
    assert_true(l.latest[0]);
    assert_string_equal(l.vid[1], v1);
    assert_false(l.latest[1]);
    assert_string_equal(l.vid[2], "null");
    /* noncurrent versions are not files: NFS does not see them, ListObjects shows one */
    assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, "k", 1, v1, &oi), 0);
    free(oi.meta);
    struct core_attr at;
    assert_int_equal(core_getattr(f->c, &f->p, oi.attr.ino, 0, &at), SRV_ESTALE);
    /* a delete makes a marker; GET answers no such key, naming the marker */
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "k", 1, NULL, 0, &dr), 0);
    assert_true(dr.dmarker);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "k", 1, &oi), -ENOENT);
    assert_true(oi.dmarker);
    assert_string_equal(oi.vid, dr.vid);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "k", 1, &at), -ENOENT);
    assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, "k", 1, dr.vid, &oi), 0);
    assert_true(oi.dmarker);
    /* deleting the marker makes the newest version current again, back in the tree */
    struct core_delres d2;
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "k", 1, dr.vid, 0, &d2), 0);
    assert_true(d2.dmarker);
    vread(f, "k", NULL, "second", 6);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "k", 1, &at), 0);
    /* deleting the current version: the one before takes its place */
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "k", 1, v2, 0, &d2), 0);
    assert_false(d2.dmarker);
    vread(f, "k", NULL, big, 3 * MB);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "k", 1, &oi), 0);
    free(oi.meta);
    assert_string_equal(oi.vid, v1);
    /* unknown and malformed ids */
    assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, "k", 1, v2, &oi), SRV_ENOVERSION);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "k", 1, v2, 0, &d2), SRV_ENOVERSION);
    assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, "k", 1, "nope", &oi), -EINVAL);
    /* delete markers on a key that never existed */
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "ghost", 5, NULL, 0, &dr), 0);
    list(f, "gh", NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 1);
    assert_true(l.dmarker[0] && l.latest[0]);
    /* a bucket with versions is not empty; deleting every version gives all space back */
    assert_int_equal(core_bucket_delete(f->c, &f->p, "bkt", 3), -ENOTEMPTY);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    for (int i = 0; i < l.n; i++)
        assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, l.key[i], strlen(l.key[i]),
                                           l.vid[i], 0, NULL),
                         0);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 0);
    assert_int_equal(bucket_bytes(f), 0);
    assert_int_equal(store_free(f), free0);
    assert_int_equal(core_bucket_delete(f->c, &f->p, "bkt", 3), 0);
    free(big);
}

static void test_suspended(void **state)
{
    struct fx *f = *state;
    char v1[CORE_VID_MAX + 1], n1[CORE_VID_MAX + 1];
    struct core_delres dr;
    struct lv l;
    bool tr;
    vers(f, CORE_VERS_ENABLED);
    vput(f, "s", "one", 3, v1, NULL, 0);
    vers(f, CORE_VERS_SUSPENDED);
    vput(f, "s", "two", 3, n1, NULL, 0);
    assert_string_equal(n1, "null");
    vput(f, "s", "three", 5, n1, NULL, 0); /* replaces the null version */
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.vid[0], "null");
    assert_string_equal(l.vid[1], v1);
    vread(f, "s", "null", "three", 5);
    /* a delete: the null version goes, a null delete marker comes */
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "s", 1, NULL, 0, &dr), 0);
    assert_string_equal(dr.vid, "null");
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 2);
    assert_true(l.dmarker[0]);
    assert_string_equal(l.vid[1], v1);
    vread(f, "s", v1, "one", 3);
}

/* NFS in a versioned bucket: CREATE makes an open version, the worker seals it, the next
 * change keeps the sealed bytes (sharing the extents it does not change). */
static void test_nfs(void **state)
{
    struct fx *f = *state;
    struct core_attr a, b;
    struct lv l;
    bool tr;
    enum core_stable st;
    unsigned n;
    uint64_t free0 = store_free(f);
    uint8_t *data = malloc(4 * MB);
    fx_fill(data, 4 * MB, 9);
    vers(f, CORE_VERS_ENABLED);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "n", 1, 0644, CORE_CREATE_GUARDED, 0, &a),
                     0);
    assert_int_equal(
        core_write(f->c, &f->p, a.ino, 0, data, 4 * MB, CORE_FILE_SYNC, &st, NULL, NULL), 0);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 1);
    char v1[CORE_VID_MAX + 1];
    strcpy(v1, l.vid[0]);
    /* open: more writes change the same version */
    assert_int_equal(core_write(f->c, &f->p, a.ino, 10, "x", 1, CORE_FILE_SYNC, &st, NULL, NULL),
                     0);
    data[10] = 'x';
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 1);
    assert_int_equal(core_bg_run(f->c, true, &n), 0);
    assert_int_equal(n, 1);
    uint64_t used1 = bucket_bytes(f);
    assert_int_equal(used1, 4 * MB);
    /* sealed: a change keeps v1 (a clone sharing the three unchanged extents) */
    assert_int_equal(
        core_write(f->c, &f->p, a.ino, MB + 5, "YY", 2, CORE_UNSTABLE, &st, NULL, NULL), 0);
    assert_int_equal(core_commit(f->c, &f->p, a.ino), 0);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.vid[1], v1);
    assert_true(l.latest[0]);
    assert_int_equal(bucket_bytes(f), 5 * MB); /* only the changed extent counts twice */
    assert_int_equal(check(f), 0);
    vread(f, "n", v1, data, 4 * MB);
    uint8_t *d2 = malloc(4 * MB);
    memcpy(d2, data, 4 * MB);
    memcpy(d2 + MB + 5, "YY", 2);
    vread(f, "n", NULL, d2, 4 * MB);
    /* the handle is still the file's; a truncate of the open version changes it in place */
    struct core_setattr sa = {.mask = CORE_SET_SIZE, .size = 2 * MB};
    assert_int_equal(core_setattr(f->c, &f->p, a.ino, &sa, NULL, NULL), 0);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 2);
    vread(f, "n", v1, data, 4 * MB);
    /* RENAME: the file becomes a new version of the new key; the old key keeps v1 under a
     * delete marker */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "n", 1, f->bucket, "m", 1), 0);
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.key[0], "m");
    assert_string_equal(l.key[1], "n");
    assert_true(l.dmarker[1] && l.latest[1]);
    assert_string_equal(l.vid[2], v1);
    vread(f, "m", NULL, d2, 2 * MB);
    /* RENAME over a file keeps the replaced one as a version */
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "o", 1, 0644, CORE_CREATE_GUARDED, 0, &b),
                     0);
    assert_int_equal(core_write(f->c, &f->p, b.ino, 0, "other", 5, CORE_FILE_SYNC, &st, NULL, NULL),
                     0);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "o", 1, f->bucket, "m", 1), 0);
    list(f, "m", NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 2);
    vread(f, "m", NULL, "other", 5);
    vread(f, "m", l.vid[1], d2, 2 * MB);
    /* REMOVE: a delete marker; LINK is refused */
    assert_int_equal(core_link(f->c, &f->p, b.ino, f->bucket, "h", 1, NULL), -EXDEV);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "m", 1), 0);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "m", 1, &a), -ENOENT);
    list(f, "m", NULL, NULL, NULL, 100, &l, &tr);
    assert_int_equal(l.n, 3);
    assert_true(l.dmarker[0]);
    /* every version deleted: the shared extents were freed exactly once */
    list(f, NULL, NULL, NULL, NULL, 100, &l, &tr);
    for (int i = l.n - 1; i >= 0; i--)
        assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, l.key[i], strlen(l.key[i]),
                                           l.vid[i], 0, NULL),
                         0);
    assert_int_equal(bucket_bytes(f), 0);
    assert_int_equal(store_free(f), free0);
    free(data);
    free(d2);
}

/* Paging through many versions of one key and of several keys, with a delimiter. */
static void test_list_paging(void **state)
{
    struct fx *f = *state;
    char vid[40][CORE_VID_MAX + 1];
    struct lv l;
    bool tr;
    vers(f, CORE_VERS_ENABLED);
    for (int i = 0; i < 30; i++)
        vput(f, "a", &i, sizeof(i), vid[i], NULL, 0);
    vput(f, "d/x", "1", 1, vid[30], NULL, 0);
    vput(f, "d/y", "1", 1, vid[31], NULL, 0);
    vput(f, "z", "1", 1, vid[32], NULL, 0);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "z", 1, NULL, 0, NULL), 0);
    /* 7 a page: 30 of "a" newest first, then d/x, d/y, then z's marker and version */
    char km[32] = "", vm[CORE_VID_MAX + 1] = "";
    int seen = 0, pages = 0;
    do {
        list(f, NULL, km[0] ? km : NULL, vm[0] ? vm : NULL, NULL, 7, &l, &tr);
        for (int i = 0; i < l.n; i++, seen++) {
            if (seen < 30) {
                assert_string_equal(l.key[i], "a");
                assert_string_equal(l.vid[i], vid[29 - seen]);
                assert_int_equal(l.latest[i], seen == 0);
            }
        }
        if (l.n) {
            strcpy(km, l.key[l.n - 1]);
            strcpy(vm, l.vid[l.n - 1]);
        }
        pages++;
    } while (tr);
    assert_int_equal(seen, 30 + 2 + 2);
    assert_int_equal(pages, 5);
    /* a delimiter rolls d/ up; paging resumes after the prefix */
    list(f, NULL, "a", NULL, "/", 1, &l, &tr);
    assert_int_equal(l.n, 1);
    assert_true(l.prefix[0]);
    assert_string_equal(l.key[0], "d/");
    assert_true(tr);
    list(f, NULL, "d/", NULL, "/", 10, &l, &tr);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.key[0], "z");
    assert_false(tr);
    /* a version id marker without a key marker is refused */
    assert_int_equal(core_list_versions(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, vid[0], NULL, 0,
                                        10, lv_cb, &l, &tr),
                     -EINVAL);
}

static void test_lock(void **state)
{
    struct fx *f = *state;
    char v1[CORE_VID_MAX + 1], v2[CORE_VID_MAX + 1];
    struct core_objinfo oi;
    struct core_attr a;
    enum core_stable st;
    time_t now = time(NULL);
    struct core_bucket_vcfg cfg = {
        .versioning = CORE_VERS_ENABLED, .lock_mode = CORE_LOCK_GOVERNANCE, .lock_days = 1};
    assert_int_equal(core_bucket_objlock_set(f->c, &f->p, f->bucket, &cfg), 0);
    /* the default retention applies */
    vput(f, "g", "gov", 3, v1, NULL, 0);
    assert_int_equal(core_version_lookup(f->c, &f->p, f->bucket, "g", 1, v1, &oi), 0);
    free(oi.meta);
    assert_int_equal(oi.lock.mode, CORE_LOCK_GOVERNANCE);
    assert_true(oi.lock.until > now + 86000);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "g", 1, v1, 0, NULL), SRV_ELOCKED);
    /* a delete without a version still makes a marker (the version stays) */
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "g", 1, NULL, 0, NULL), 0);
    /* shortening governance needs the bypass; then it can go */
    struct core_lock shorter = {CORE_LOCK_GOVERNANCE, now + 60, false};
    assert_int_equal(core_version_retention_set(f->c, &f->p, f->bucket, "g", 1, v1, &shorter, 0),
                     SRV_ELOCKED);
    assert_int_equal(
        core_version_retention_set(f->c, &f->p, f->bucket, "g", 1, v1, &shorter, CORE_DEL_BYPASS),
        0);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "g", 1, v1, CORE_DEL_BYPASS, NULL),
                     0);
    /* compliance: never shortened or deleted early; extended freely */
    struct core_lock comp = {CORE_LOCK_COMPLIANCE, now + 3600, false};
    vput(f, "c", "comp", 4, v2, &comp, 0);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "c", 1, v2, CORE_DEL_BYPASS, NULL),
                     SRV_ELOCKED);
    struct core_lock gov = {CORE_LOCK_GOVERNANCE, now + 7200, false};
    assert_int_equal(
        core_version_retention_set(f->c, &f->p, f->bucket, "c", 1, v2, &gov, CORE_DEL_BYPASS),
        SRV_ELOCKED);
    comp.until = now + 7200;
    assert_int_equal(core_version_retention_set(f->c, &f->p, f->bucket, "c", 1, NULL, &comp, 0), 0);
    /* NFS: the locked current file is neither changed, truncated, removed nor renamed (over) */
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "c", 1, &a), 0);
    assert_int_equal(core_write(f->c, &f->p, a.ino, 0, "X", 1, CORE_FILE_SYNC, &st, NULL, NULL),
                     SRV_ELOCKED);
    struct core_setattr sa = {.mask = CORE_SET_SIZE, .size = 1};
    assert_int_equal(core_setattr(f->c, &f->p, a.ino, &sa, NULL, NULL), SRV_ELOCKED);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "c", 1), SRV_ELOCKED);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "c", 1, f->bucket, "c2", 2), SRV_ELOCKED);
    struct core_attr o;
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "t", 1, 0644, CORE_CREATE_GUARDED, 0, &o),
                     0);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "t", 1, f->bucket, "c", 1), SRV_ELOCKED);
    /* an S3 PUT still makes a new version over it */
    vput(f, "c", "new", 3, v1, NULL, 0);
    vread(f, "c", v2, "comp", 4);
    /* legal hold: no delete even without retention */
    struct core_lock none = {0};
    vput(f, "h", "held", 4, v1, &none, 0);
    assert_int_equal(core_version_hold_set(f->c, &f->p, f->bucket, "h", 1, v1, true), 0);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "h", 1, v1, CORE_DEL_BYPASS, NULL),
                     SRV_ELOCKED);
    assert_int_equal(core_version_hold_set(f->c, &f->p, f->bucket, "h", 1, v1, false), 0);
    assert_int_equal(core_key_delete_v(f->c, &f->p, f->bucket, "h", 1, v1, 0, NULL), 0);
    /* a bucket without object lock takes no retention */
    assert_int_equal(core_bucket_create(f->c, &f->p, "plain", 5, &a), 0);
    struct core_upload *u;
    struct core_putopt po = {&comp, NULL};
    assert_int_equal(core_upload_begin(f->c, &f->p, a.ino, 1, &u), 0);
    core_upload_set_opt(u, &po);
    assert_int_equal(core_upload_commit(u, "x", 1, "e", NULL, 0, NULL, false, NULL), SRV_EBADSTATE);
}

/* Records changed behind the core's back: the check finds each. */
struct corrupt {
    int what;
    uint64_t ino, chain, vseq;
    struct meta_extent x;
};

static int xent(void *arg, uint64_t foff, const struct meta_extent *x)
{
    (void)foff;
    *(struct meta_extent *)arg = *x;
    return 1;
}

static int corrupt_fn(struct meta_txn *t, void *arg)
{
    struct corrupt *k = arg;
    switch (k->what) {
    case 0: /* an extent with one holder more than it has */
        meta_extent_scan(t, k->ino, 0, UINT64_MAX, xent, &k->x);
        return meta_xref_set(t, k->x.dev, k->x.off, meta_xref_get(t, k->x.dev, k->x.off) + 1);
    case 1: /* back again */
        return meta_xref_set(t, k->x.dev, k->x.off, meta_xref_get(t, k->x.dev, k->x.off) - 1);
    default: /* a noncurrent version whose record is gone: its inode is leaked */
        return meta_version_del(t, k->chain, k->vseq);
    }
}

static void test_check(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    enum core_stable st;
    char v1[CORE_VID_MAX + 1];
    uint8_t data[3 * 4096];
    fx_fill(data, sizeof(data), 5);
    vers(f, CORE_VERS_ENABLED);
    vput(f, "k", "one", 3, v1, NULL, 0);
    vput(f, "k", "two", 3, NULL, NULL, 0);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "n", 1, 0644, CORE_CREATE_GUARDED, 0, &a),
                     0);
    assert_int_equal(
        core_write(f->c, &f->p, a.ino, 0, data, sizeof(data), CORE_FILE_SYNC, &st, NULL, NULL), 0);
    assert_int_equal(core_bg_run(f->c, true, NULL), 0);
    assert_int_equal(core_write(f->c, &f->p, a.ino, 0, "x", 1, CORE_FILE_SYNC, &st, NULL, NULL), 0);
    assert_int_equal(check(f), 0);
    struct corrupt k = {.what = 0, .ino = a.ino};
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "n", 1, &oi), 0);
    free(oi.meta);
    k.ino = oi.attr.ino;
    assert_int_equal(meta_submit(core_meta(f->c), corrupt_fn, &k, 0), 0);
    assert_true(check(f) > 0);
    k.what = 1;
    assert_int_equal(meta_submit(core_meta(f->c), corrupt_fn, &k, 0), 0);
    assert_int_equal(check(f), 0);
    /* v1's record, from its inode */
    struct core_principal vp = f->p;
    vp.flags |= CORE_P_VERSIONS;
    assert_int_equal(core_version_lookup(f->c, &vp, f->bucket, "k", 1, v1, &oi), 0);
    free(oi.meta);
    struct meta_txn *t;
    assert_int_equal(meta_rtxn_begin(core_meta(f->c), &t), 0);
    assert_int_equal(meta_vino_get(t, oi.attr.ino, &k.chain, &k.vseq), 0);
    meta_rtxn_end(t);
    k.what = 2;
    assert_int_equal(meta_submit(core_meta(f->c), corrupt_fn, &k, 0), 0);
    assert_true(check(f) > 0); /* the inode is leaked: its vino names nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_states, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_puts_and_markers, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_suspended, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_nfs, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_list_paging, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_lock, fx_setup, teardown_checked),
        cmocka_unit_test_setup_teardown(test_check, fx_setup, fx_teardown_unchecked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
