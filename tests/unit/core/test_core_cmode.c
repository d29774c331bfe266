/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_cmode.c (cache mode) through a fake remote lister
 * and a fake fetch: listing and lookup import a directory (objects become
 * evicted files with the remote's size and ETag, sub-prefixes directories),
 * reads recall them; revalidation (TTL 0) drops changed objects to evicted
 * again, removes deleted ones, keeps local files never uploaded, and counts a
 * conflict; an event-loop caller (CORE_P_NOWAIT) gets -EWOULDBLOCK; a remote
 * that cannot be listed serves what was imported and answers SRV_EIMPORT for
 * a directory never imported, SRV_EIMPORTFAIL once it has failed for fail_ms; a read-only cache
 * bucket refuses changes with -EROFS; the remote's metadata of an imported object is asked once, at
 * its first lookup (not from an event loop, again after a failure or a remote change, never for a
 * local file), or taken from the answer of the recall of a read's first chunk when the fetch brings
 * it (its ETag checked). The store check passes at the end (imported files are evicted files with
 * confirmed records). Against a real RGW: tests/integration/tier/test_tier_cache.py. */
#include <stdatomic.h>
#include <unistd.h>

#include "core_test_util.h"

#include "meta.h"
#include "tier_cache.h"
#include "tier_policy.h"

struct mobj {
    const char *dir, *name, *etag;
    uint64_t size;
    bool gone;
    bool extra; /* only in test_prefetch (gone elsewhere) */
};

static struct mobj model[] = {
    {"", "a.txt", "e1", 10, false, false},
    {"d/", "x", "e2", 5000, false, false},
    {"d/", "y", "e4", 3, false, false},
    {"d/", "big", "e6", (1u << 20) + 1, true, true}, /* over CORE_PF_FILE_MAX */
};
#define NMODEL (sizeof(model) / sizeof(model[0]))
static atomic_int list_fail, lists;

static int fake_list(void *arg, uint32_t remote, const char *dirkey, struct core_cache_listing *out)
{
    (void)arg;
    assert_int_equal(remote, 1);
    atomic_fetch_add(&lists, 1);
    if (atomic_load(&list_fail))
        return atomic_load(&list_fail);
    if (strcmp(dirkey, "") == 0) {
        out->dirs = calloc(1, sizeof(char *));
        out->dirs[0] = strdup("d");
        out->ndirs = 1;
    }
    out->objs = calloc(NMODEL, sizeof(*out->objs));
    for (size_t i = 0; i < NMODEL; i++) {
        if (model[i].gone || strcmp(model[i].dir, dirkey) != 0)
            continue;
        struct core_cache_obj *o = &out->objs[out->nobjs++];
        o->name = strdup(model[i].name);
        o->size = model[i].size;
        snprintf(o->etag, sizeof(o->etag), "%s", model[i].etag);
        o->mtime_s = 1700000000;
    }
    return 0;
}

static atomic_uint_fast64_t fetched[8]; /* inos fetched (a small set) */

static int fake_fetch(void *arg, uint64_t ino, uint64_t off, void *buf, size_t len, size_t *n)
{
    (void)arg;
    for (size_t i = 0; i < 8; i++) {
        uint_fast64_t z = 0;
        if (atomic_load(&fetched[i]) == ino ||
            atomic_compare_exchange_strong(&fetched[i], &z, (uint_fast64_t)ino))
            break;
    }
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)buf)[i] = (uint8_t)('a' + (off + i) % 26);
    *n = len;
    return 0;
}

static void set_cache(struct fx *f, uint32_t ttl, bool ro)
{
    struct tier_cache tc = {.ttl_s = ttl, .read_only = ro};
    uint8_t enc[TIER_CACHE_LEN];
    size_t n = tier_cache_encode(&tc, enc);
    assert_int_equal(core_bucket_blob_put(f->c, &f->su, f->bucket, CORE_BLOB_CACHE, enc, n), 0);
}

static int setup(void **state)
{
    if (fx_setup(state))
        return -1;
    struct fx *f = *state;
    struct tier_policy p = {.remote = 1, .upload_after_s = 60};
    uint8_t enc[TIER_POLICY_MAX];
    size_t n = tier_policy_encode(&p, enc);
    if (core_bucket_blob_put(f->c, &f->su, f->bucket, CORE_BLOB_TIER, enc, n))
        return -1;
    core_cache_set_lister(f->c, fake_list, NULL);
    struct core_tier_config tc = {.fetch = fake_fetch, .threads = 2, .wait_ms = 5000};
    if (core_tier_start(f->c, &tc))
        return -1;
    for (size_t i = 0; i < NMODEL; i++)
        model[i].gone = model[i].extra;
    for (size_t i = 0; i < 8; i++)
        atomic_store(&fetched[i], 0);
    model[0].etag = "e1";
    model[0].size = 10;
    atomic_store(&list_fail, 0);
    set_cache(f, 100, false);
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    core_tier_stop(f->c);
    return fx_teardown(state);
}

struct seen {
    char keys[8][64];
    uint64_t sizes[8];
    char etags[8][CORE_ETAG_MAX + 1];
    int n;
};

static int seen_cb(void *arg, const struct core_listent *e)
{
    struct seen *s = arg;
    if (s->n == 8)
        return 1;
    snprintf(s->keys[s->n], sizeof(s->keys[0]), "%.*s", (int)e->keylen, e->key);
    if (!e->is_prefix) {
        s->sizes[s->n] = e->info->attr.size;
        snprintf(s->etags[s->n], sizeof(s->etags[0]), "%s", e->info->etag);
    }
    s->n++;
    return 0;
}

static void list(struct fx *f, const char *prefix, const char *delim, struct seen *s)
{
    bool trunc;
    memset(s, 0, sizeof(*s));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, prefix, strlen(prefix), NULL, 0, delim,
                               delim ? strlen(delim) : 0, 100, seen_cb, s, &trunc),
                     0);
}

static void test_import_read_revalidate(void **state)
{
    struct fx *f = *state;
    struct seen s;
    struct core_cache_stats st;
    list(f, "", "/", &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.keys[0], "a.txt");
    assert_int_equal(s.sizes[0], 10);
    assert_string_equal(s.etags[0], "e1");
    assert_string_equal(s.keys[1], "d/");
    /* a lookup imports d/; the object is evicted and reads through */
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(oi.attr.size, 5000);
    assert_string_equal(oi.etag, "e2");
    char buf[5000];
    size_t n = 0;
    bool eof;
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 100, buf, 50, &n, &eof), 0);
    assert_int_equal(n, 50);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf[i], 'a' + (100 + i) % 26);
    int before = atomic_load(&lists);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&lists), before); /* fresh: not asked again */
    /* a local file, never uploaded */
    assert_int_equal(fx_put(f, "d/local", "L", 1), 0);

    /* the remote changes; TTL 0 asks every time */
    set_cache(f, 0, false);
    model[0].etag = "e3";
    model[0].size = 20;
    model[1].gone = true;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0);
    free(oi.meta);
    assert_int_equal(oi.attr.size, 20);
    assert_string_equal(oi.etag, "e3");
    list(f, "d/", NULL, &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.keys[0], "d/local");
    assert_string_equal(s.keys[1], "d/y");
    core_cache_stats_get(f->c, &st);
    assert_true(st.created >= 3);
    assert_int_equal(st.changed, 1);
    assert_int_equal(st.removed, 1);
    assert_int_equal(st.conflicts, 0);
    /* a local write of a remote name wins (never uploaded): a conflict, counted */
    assert_int_equal(fx_put(f, "d/y", "mine", 4), 0);
    list(f, "d/", "/", &s);
    list(f, "d/", "/", &s); /* reported once, not at every revalidation */
    core_cache_stats_get(f->c, &st);
    assert_int_equal(st.conflicts, 1);
    void *data = NULL;
    assert_int_equal(fx_get(f, "d/y", &data, &n), 0);
    assert_int_equal(n, 4);
    assert_memory_equal(data, "mine", 4);
    free(data);

    /* an event loop never lists: it is told to move the call */
    struct core_principal lp = f->p;
    struct core_attr a;
    lp.flags |= CORE_P_NOWAIT;
    assert_int_equal(core_lookup(f->c, &lp, f->bucket, "a.txt", 5, &a), -EWOULDBLOCK);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &a), 0);

    /* the remote cannot be listed: what was imported is served */
    atomic_store(&list_fail, SRV_ERECALL);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &a), 0);
    list(f, "d/", "/", &s);
    assert_int_equal(s.n, 2);
    core_cache_stats_get(f->c, &st);
    assert_true(st.import_errors >= 2);
}

static void test_never_imported_and_down(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    atomic_store(&list_fail, SRV_ERECALL);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), SRV_EIMPORT);
    assert_string_equal(core_cache_import_failed(), "");
    atomic_store(&list_fail, 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0);
    free(oi.meta);
}

/* A directory never imported, its remote down: retryable (SRV_EIMPORT) until the remote has
 * failed for the recall's fail_ms (here 300 ms), then SRV_EIMPORTFAIL; what was imported
 * is served meanwhile; a failure nobody retried within fail_ms starts over; the remote
 * back, the import works. */
static void test_never_imported_down_bound(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    struct core_attr a;
    core_tier_stop(f->c);
    struct core_tier_config tc = {
        .fetch = fake_fetch, .threads = 2, .wait_ms = 5000, .fail_ms = 300};
    assert_int_equal(core_tier_start(f->c, &tc), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0); /* root */
    free(oi.meta);
    atomic_store(&list_fail, SRV_ERECALL);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), SRV_EIMPORT);
    assert_string_equal(core_cache_import_failed(), "d/");
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "d", 1, &a), 0); /* the root's name */
    uint64_t d = a.ino;
    int rc = SRV_EIMPORT;
    for (int i = 0; i < 40 && rc == SRV_EIMPORT; i++) {
        usleep(50 * 1000);
        rc = core_lookup(f->c, &f->p, d, "x", 1, &a);
    }
    assert_int_equal(rc, SRV_EIMPORTFAIL);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), SRV_EIMPORTFAIL);
    assert_string_equal(core_cache_import_failed(), "d/");
    /* imported before: served, whatever the remote */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0);
    free(oi.meta);
    /* nobody asked for longer than fail_ms: retryable again */
    usleep(400 * 1000);
    assert_int_equal(core_lookup(f->c, &f->p, d, "x", 1, &a), SRV_EIMPORT);
    atomic_store(&list_fail, 0);
    assert_int_equal(core_lookup(f->c, &f->p, d, "x", 1, &a), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    free(oi.meta);
}

/* Renames and removes not uploaded yet are the bucket's own at a revalidation (the remote
 * still has the old names): a renamed file is kept, the remote's old name and a removed
 * name are not imported again, a renamed directory keeps its files and its old name does
 * not come back; no conflict, nothing created or removed. */
static void test_revalidation_keeps_local_renames(void **state)
{
    struct fx *f = *state;
    struct seen s;
    struct core_attr a;
    struct core_cache_stats st0, st;
    list(f, "d/", "/", &s);
    assert_int_equal(s.n, 2);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "d", 1, &a), 0);
    uint64_t d = a.ino;
    /* x stays evicted through its rename: the store check at teardown accepts a change
     * counter a rename moved past its tier record's (the uploader copies it; none here) */
    assert_int_equal(core_rename(f->c, &f->p, d, "x", 1, d, "z", 1), 0);
    assert_int_equal(core_remove(f->c, &f->p, d, "y", 1), 0);
    core_cache_stats_get(f->c, &st0);
    set_cache(f, 0, false); /* every listing asks the remote (and every directory is due) */
    for (int i = 0; i < 2; i++) {
        list(f, "d/", "/", &s);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.keys[0], "d/z");
    }
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "d", 1, f->bucket, "e", 1), 0);
    for (int i = 0; i < 2; i++) {
        list(f, "", NULL, &s); /* every directory */
        assert_int_equal(s.n, 2);
        assert_string_equal(s.keys[0], "a.txt");
        assert_string_equal(s.keys[1], "e/z");
    }
    core_cache_stats_get(f->c, &st);
    assert_int_equal(st.conflicts, st0.conflicts);
    assert_int_equal(st.created, st0.created);
    assert_int_equal(st.removed, st0.removed);
    assert_true(st.imports > st0.imports);
}

static atomic_int metas, meta_fail;
static char meta_etag[64];

/* The fake remote's metadata: "d/x" has a Content-Type, the others none. */
static int fake_meta(void *arg, uint32_t remote, const char *key, const char *etag, void **blob,
                     size_t *len)
{
    (void)arg;
    assert_int_equal(remote, 1);
    atomic_fetch_add(&metas, 1);
    snprintf(meta_etag, sizeof(meta_etag), "%s", etag);
    if (atomic_load(&meta_fail))
        return atomic_load(&meta_fail);
    static const uint8_t ct[] = "S3M1\x01\x00\x0c"
                                "Content-Type\x00\x00\x00\x08text/csv";
    bool x = strcmp(key, "d/x") == 0;
    *len = x ? sizeof(ct) - 1 : 4;
    *blob = malloc(*len);
    memcpy(*blob, x ? ct : (const uint8_t *)"S3M1", *len);
    return 0;
}

static void test_remote_metadata(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    core_cache_set_meta(f->c, fake_meta, NULL);
    atomic_store(&metas, 0);
    atomic_store(&meta_fail, 0);
    /* the first lookup asks, once; the blob is the object's metadata */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    assert_int_equal(atomic_load(&metas), 1);
    assert_string_equal(meta_etag, "e2");
    assert_int_equal(oi.metalen, 4 + 3 + 12 + 4 + 8);
    assert_memory_equal((uint8_t *)oi.meta + 7, "Content-Type", 12);
    free(oi.meta);
    assert_string_equal(oi.etag, "e2"); /* the ETag stays */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    assert_int_equal(oi.metalen, 31);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 1);
    /* no metadata on the remote: kept as such, not asked again */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    assert_int_equal(oi.metalen, 4);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 2);
    /* an event loop never asks */
    struct core_principal lp = f->p;
    lp.flags |= CORE_P_NOWAIT;
    assert_int_equal(core_key_lookup(f->c, &lp, f->bucket, "a.txt", 5, &oi), -EWOULDBLOCK);
    assert_int_equal(atomic_load(&metas), 2);
    /* the remote down: answered without, asked again at the next lookup */
    atomic_store(&meta_fail, SRV_ERECALL);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0);
    assert_int_equal(oi.metalen, 0);
    free(oi.meta);
    atomic_store(&meta_fail, 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &oi), 0);
    assert_int_equal(oi.metalen, 4);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 4);
    /* a local file is never asked for */
    assert_int_equal(fx_put(f, "d/local", "L", 1), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/local", 7, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 4);
    /* the remote object replaced: its metadata is asked again, for the new ETag */
    set_cache(f, 0, false);
    model[1].etag = "e5";
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    assert_string_equal(oi.etag, "e5");
    assert_int_equal(oi.metalen, 31);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 5);
    assert_string_equal(meta_etag, "e5");
    model[1].etag = "e2";
    core_cache_set_meta(f->c, NULL, NULL);
}

static atomic_int fmetas;
static char fm_etag[CORE_ETAG_MAX + 1];

/* A fetch whose answer also carries the object's metadata: a Content-Type, said to be
 * checked against ETag fm_etag. */
static int fake_fetch_meta(void *arg, uint64_t ino, uint64_t off, void *buf, size_t len, size_t *n,
                           struct core_fetch_meta *meta)
{
    static const uint8_t ct[] = "S3M1\x01\x00\x0c"
                                "Content-Type\x00\x00\x00\x08text/tsv";
    int rc = fake_fetch(arg, ino, off, buf, len, n);
    atomic_fetch_add(&fmetas, 1);
    meta->len = sizeof(ct) - 1;
    meta->blob = malloc(meta->len);
    memcpy(meta->blob, ct, meta->len);
    snprintf(meta->etag, sizeof(meta->etag), "%s", fm_etag);
    return rc;
}

static int setup_fm(void **state)
{
    if (setup(state))
        return -1;
    struct fx *f = *state;
    core_tier_stop(f->c);
    struct core_tier_config tc = {
        .fetch = fake_fetch, .fetch_meta = fake_fetch_meta, .threads = 2, .wait_ms = 5000};
    atomic_store(&fmetas, 0);
    snprintf(fm_etag, sizeof(fm_etag), "e2");
    return core_tier_start(f->c, &tc);
}

/* With a fetch that brings the metadata: a lookup for a read recalls the read's first
 * chunk and keeps the metadata of its answer (no HEAD); an answer checked against another
 * ETag than the file's record is not kept (the HEAD asks); a lookup without a read and a
 * read of local bytes ask by HEAD, as before. */
static void test_metadata_from_recall(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    struct core_cache_stats cs0, cs1;
    core_cache_set_meta(f->c, fake_meta, NULL);
    atomic_store(&metas, 0);
    atomic_store(&meta_fail, 0);
    core_cache_stats_get(f->c, &cs0);
    /* the directories imported first (their commits are not the read's) */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/", 2, &oi), 0);
    free(oi.meta);
    /* an event loop neither asks nor recalls */
    struct core_principal lp = f->p;
    lp.flags |= CORE_P_NOWAIT;
    assert_int_equal(core_key_lookup_at(f->c, &lp, f->bucket, "d/x", 3, 0, &oi), -EWOULDBLOCK);
    assert_int_equal(atomic_load(&fmetas), 0);
    /* a read from byte 100: the recall's answer, no HEAD; the metadata goes in with the
     * file's only chunk, in its txn (one commit for the whole small file) */
    struct meta_stats m0, m1;
    meta_stats_get(core_meta(f->c), &m0);
    assert_int_equal(core_key_lookup_at(f->c, &f->p, f->bucket, "d/x", 3, 100, &oi), 0);
    meta_stats_get(core_meta(f->c), &m1);
    assert_int_equal(m1.commit_ops - m0.commit_ops, 1);
    assert_int_equal(atomic_load(&metas), 0);
    assert_true(atomic_load(&fmetas) >= 1);
    assert_int_equal(oi.metalen, 31);
    assert_memory_equal((uint8_t *)oi.meta + 23, "text/tsv", 8);
    assert_string_equal(oi.etag, "e2");
    free(oi.meta);
    char buf[16];
    size_t got = 0;
    bool eof = false;
    assert_int_equal(core_read(f->c, &f->p, oi.attr.ino, 100, buf, 4, &got, &eof), 0);
    assert_int_equal(got, 4);
    assert_memory_equal(buf, "wxyz", 4); /* 'a' + 100 % 26 */
    core_cache_stats_get(f->c, &cs1);
    assert_int_equal(cs1.meta_recalls - cs0.meta_recalls, 1);
    assert_int_equal(cs1.meta_heads - cs0.meta_heads, 0);
    /* an answer checked against another ETag than the record's: not kept, the HEAD asks */
    snprintf(fm_etag, sizeof(fm_etag), "e9");
    assert_int_equal(core_key_lookup_at(f->c, &f->p, f->bucket, "d/y", 3, 0, &oi), 0);
    assert_int_equal(atomic_load(&metas), 1);
    assert_int_equal(oi.metalen, 4); /* the HEAD's (none) */
    free(oi.meta);
    /* no read (an S3 HEAD): a HEAD, no recall */
    snprintf(fm_etag, sizeof(fm_etag), "e1");
    int before = atomic_load(&fmetas);
    assert_int_equal(core_key_lookup_at(f->c, &f->p, f->bucket, "a.txt", 5, CORE_READ_NONE, &oi),
                     0);
    free(oi.meta);
    assert_int_equal(atomic_load(&metas), 2);
    assert_int_equal(atomic_load(&fmetas), before);
    core_cache_stats_get(f->c, &cs1);
    assert_int_equal(cs1.meta_heads - cs0.meta_heads, 2);
    core_cache_set_meta(f->c, NULL, NULL);
}

static bool was_fetched(uint64_t ino)
{
    for (size_t i = 0; i < 8; i++)
        if (atomic_load(&fetched[i]) == ino)
            return true;
    return false;
}

static uint64_t ino_of(struct fx *f, const char *key)
{
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, key, strlen(key), &oi), 0);
    free(oi.meta);
    return oi.attr.ino;
}

static void set_preset(struct fx *f, uint8_t preset)
{
    struct tier_dirpol e = {.dir = f->bucket, .set = TIER_D_PRESET, .preset = preset};
    uint8_t enc[TIER_DIRS_MAX];
    size_t n = tier_dirs_encode(&e, 1, enc);
    assert_int_equal(core_bucket_blob_put(f->c, &f->su, f->bucket, CORE_BLOB_TIER_DIRS, enc, n), 0);
}

static void test_prefetch(void **state)
{
    struct fx *f = *state;
    struct seen s;
    struct core_prefetch_stats ps;
    model[3].gone = false;
    assert_int_equal(core_prefetch_start(f->c), 0);
    assert_int_equal(core_prefetch_start(f->c), -EINVAL);
    /* NONE: a listing prefetches nothing */
    set_preset(f, TIER_PRESET_NONE);
    list(f, "d/", "/", &s);
    assert_int_equal(s.n, 3);
    uint64_t x = ino_of(f, "d/x"), y = ino_of(f, "d/y"), big = ino_of(f, "d/big");
    usleep(300 * 1000);
    core_prefetch_stats_get(f->c, &ps);
    assert_int_equal(ps.dirs, 0);
    assert_false(was_fetched(x) || was_fetched(y) || was_fetched(big));
    /* DATASET_RO: the small files come back, the big one stays remote */
    set_preset(f, TIER_PRESET_DATASET_RO);
    list(f, "d/", "/", &s);
    list(f, "d/", "/", &s); /* queued once */
    for (int i = 0; i < 500; i++) {
        core_prefetch_stats_get(f->c, &ps);
        if (ps.files == 2 && was_fetched(x) && was_fetched(y))
            break;
        usleep(10 * 1000);
    }
    core_prefetch_stats_get(f->c, &ps);
    assert_int_equal(ps.files, 2);
    assert_int_equal(ps.bytes, 5003);
    assert_true(ps.dirs >= 1);
    assert_true(was_fetched(x) && was_fetched(y));
    assert_false(was_fetched(big));
    /* listed again once they are back: nothing more */
    list(f, "d/", "/", &s);
    usleep(300 * 1000);
    core_prefetch_stats_get(f->c, &ps);
    assert_int_equal(ps.files, 2);
    /* a listing without delimiter, or of a partial name, is not a directory's */
    model[3].size = 100;
    model[3].etag = "e7";
    set_cache(f, 0, false); /* d/big is revalidated: small now, evicted */
    list(f, "d/b", "/", &s);
    list(f, "d/", NULL, &s);
    usleep(300 * 1000);
    assert_false(was_fetched(big));
    set_cache(f, 100, false);
    list(f, "d/", "/", &s);
    for (int i = 0; i < 500 && !was_fetched(big); i++)
        usleep(10 * 1000);
    assert_true(was_fetched(big));
    core_prefetch_stop(f->c);
    model[3].size = (1u << 20) + 1;
    model[3].etag = "e6";
}

/* A restart: the core closed and opened again, its lister and recall set again. */
static void restart(struct fx *f)
{
    core_tier_stop(f->c);
    fx_reopen(f);
    core_cache_set_lister(f->c, fake_list, NULL);
    struct core_tier_config tc = {.fetch = fake_fetch, .threads = 2, .wait_ms = 5000};
    assert_int_equal(core_tier_start(f->c, &tc), 0);
}

static void test_import_times_survive_restart(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    int l0 = atomic_load(&lists);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&lists), l0 + 2); /* the root and d/ */
    /* within ttl_s after a restart: nothing is listed again */
    restart(f);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&lists), l0 + 2);
    /* an event loop's first use after a start moves to a worker, which finds it fresh */
    restart(f);
    struct core_principal lp = f->p;
    struct core_attr a;
    lp.flags |= CORE_P_NOWAIT;
    assert_int_equal(core_lookup(f->c, &lp, f->bucket, "a.txt", 5, &a), -EWOULDBLOCK);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "a.txt", 5, &a), 0);
    assert_int_equal(atomic_load(&lists), l0 + 2);
    /* invalidated (a cache-mode change): asked again, also after a restart */
    core_cache_invalidate(f->c, f->bucket);
    restart(f);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&lists), l0 + 4);
    /* past ttl_s: asked again */
    set_cache(f, 0, false);
    restart(f);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/y", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(atomic_load(&lists), l0 + 6);
}

static void test_read_only(void **state)
{
    struct fx *f = *state;
    struct core_objinfo oi;
    set_cache(f, 100, true);
    bool ro = false;
    assert_true(core_cache_bucket(f->c, f->bucket, &ro));
    assert_true(ro);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d/x", 3, &oi), 0);
    free(oi.meta);
    assert_int_equal(fx_put(f, "new", "x", 1), -EROFS);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "d/x", 3), -EROFS);
    assert_int_equal(
        core_write(f->c, &f->p, oi.attr.ino, 0, "z", 1, CORE_FILE_SYNC, NULL, NULL, NULL), -EROFS);
    struct core_attr a, d;
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "d", 1, &d), 0);
    assert_int_equal(core_mkdir(f->c, &f->p, d.ino, "sub", 3, 0755, &a), -EROFS);
    assert_int_equal(core_remove(f->c, &f->p, d.ino, "x", 1), -EROFS);
    assert_int_equal(core_rename(f->c, &f->p, d.ino, "x", 1, d.ino, "z", 1), -EROFS);
    /* read-write again: writes pass */
    set_cache(f, 100, false);
    assert_int_equal(fx_put(f, "new", "x", 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_import_read_revalidate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_imported_and_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_imported_down_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revalidation_keeps_local_renames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remote_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata_from_recall, setup_fm, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_times_survive_restart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
