/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for meta's typed record modules and its one scan primitive, on
 * both engines (LMDB and in memory): read snapshots and nested op txns (the
 * backend contract of meta.h), directory entries by name and by cookie, the
 * key index in exact binary order (long keys sharing a head, skips, a start
 * key), extent maps (an extent starting before the range counts), multipart
 * uploads and parts, usage, orphans, the store's free map and generic records
 * with paging. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "meta.h"
#include "meta_dirent.h"
#include "meta_extent.h"
#include "meta_free.h"
#include "meta_inode.h"
#include "meta_int.h"
#include "meta_keyidx.h"
#include "meta_mpu.h"
#include "meta_record.h"
#include "meta_usage.h"
#include "srv_err.h"

static char dir[64];
static struct meta_env *m;

static int open_env(enum meta_backend be)
{
    snprintf(dir, sizeof(dir), "/tmp/metar-test-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    struct meta_env_config cfg = {.dir = dir, .map_size = 64ull << 20, .max_batch = 8,
                                  .backend = be};
    return meta_env_open(&m, &cfg);
}

static int setup_lmdb(void **state)
{
    (void)state;
    return open_env(META_BACKEND_LMDB);
}

static int setup_mem(void **state)
{
    (void)state;
    return open_env(META_BACKEND_MEM);
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    meta_env_close(m);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef int (*op_fn)(struct meta_txn *t, void *arg);

static int run(op_fn fn, void *arg)
{
    return meta_submit(m, fn, arg, 0);
}

/* ---- snapshots and nested txns ---- */

static int put_a(struct meta_txn *t, void *arg)
{
    return meta__put(t, META_DBI_T_CONFIG, "a", 1, arg, strlen(arg), 0);
}

static int put_then_fail(struct meta_txn *t, void *arg)
{
    int rc = meta__put(t, META_DBI_T_CONFIG, "b", 1, "x", 1, 0);
    return rc ? rc : *(int *)arg;
}

static void test_snapshot(void **state)
{
    struct meta_txn *r;
    struct meta_val v;
    int fail = -EINVAL;
    (void)state;
    assert_int_equal(run(put_a, "1"), 0);
    assert_int_equal(meta_rtxn_begin(m, &r), 0);
    assert_int_equal(run(put_a, "22"), 0);
    /* the read txn still sees the state it began on */
    assert_int_equal(meta__get(r, META_DBI_T_CONFIG, "a", 1, &v), 0);
    assert_int_equal(v.len, 1);
    meta_rtxn_end(r);
    assert_int_equal(meta_rtxn_begin(m, &r), 0);
    assert_int_equal(meta__get(r, META_DBI_T_CONFIG, "a", 1, &v), 0);
    assert_int_equal(v.len, 2);
    meta_rtxn_end(r);
    /* a failing op leaves nothing behind */
    assert_int_equal(run(put_then_fail, &fail), -EINVAL);
    assert_int_equal(meta_rtxn_begin(m, &r), 0);
    assert_int_equal(meta__get(r, META_DBI_T_CONFIG, "b", 1, &v), -ENOENT);
    meta_rtxn_end(r);
    /* a standalone write txn, aborted then committed */
    struct meta_txn *w;
    assert_int_equal(meta_wtxn_begin(m, &w), 0);
    assert_int_equal(meta__put(w, META_DBI_T_CONFIG, "c", 1, "y", 1, 0), 0);
    meta_wtxn_abort(w);
    assert_int_equal(meta_wtxn_begin(m, &w), 0);
    assert_int_equal(meta__get(w, META_DBI_T_CONFIG, "c", 1, &v), -ENOENT);
    assert_int_equal(meta__put(w, META_DBI_T_CONFIG, "c", 1, "y", 1, META_NOOVERWRITE), 0);
    assert_int_equal(meta__put(w, META_DBI_T_CONFIG, "c", 1, "z", 1, META_NOOVERWRITE), -EEXIST);
    assert_int_equal(meta__del(w, META_DBI_T_CONFIG, "nope", 4), -ENOENT);
    assert_int_equal(meta_wtxn_commit(w), 0);
    assert_int_equal(meta_rtxn_begin(m, &r), 0);
    assert_int_equal(meta__get(r, META_DBI_T_CONFIG, "c", 1, &v), 0);
    meta_rtxn_end(r);
}

/* ---- the scan primitive ---- */

static int fill_scan(struct meta_txn *t, void *arg)
{
    static const char *keys[] = {"a", "ab", "abc", "abd", "ac", "b", "b\xff", "c"};
    (void)arg;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int rc = meta__put(t, META_DBI_T_QOS, keys[i], strlen(keys[i]), "", 0, 0);
        if (rc)
            return rc;
    }
    return 0;
}

struct seen {
    char buf[256];
    int n, stop_at;
};

static int seen_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct seen *s = arg;
    (void)val;
    (void)vlen;
    strncat(s->buf, key, klen);
    strcat(s->buf, ",");
    return ++s->n == s->stop_at ? 7 : 0;
}

static const char *scan(struct meta_range r, int stop_at, int *rc)
{
    static struct seen s;
    struct meta_txn *t;
    memset(&s, 0, sizeof(s));
    s.stop_at = stop_at;
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    *rc = meta__scan(t, META_DBI_T_QOS, &r, seen_cb, &s);
    meta_rtxn_end(t);
    return s.buf;
}

static void test_scan(void **state)
{
    int rc;
    (void)state;
    assert_int_equal(run(fill_scan, NULL), 0);
    assert_string_equal(scan((struct meta_range){0}, 0, &rc), "a,ab,abc,abd,ac,b,b\xff,c,");
    assert_int_equal(rc, 0);
    assert_string_equal(scan((struct meta_range){.prefix = "ab", .plen = 2}, 0, &rc),
                        "ab,abc,abd,");
    assert_string_equal(scan((struct meta_range){.prefix = "ab", .plen = 2, .start = "abc",
                                                 .slen = 3, .after = true},
                             0, &rc),
                        "abd,");
    assert_string_equal(scan((struct meta_range){.start = "abz", .slen = 3}, 0, &rc),
                        "ac,b,b\xff,c,");
    assert_string_equal(scan((struct meta_range){.start = "b", .slen = 1}, 2, &rc), "b,b\xff,");
    assert_int_equal(rc, 7);
    assert_string_equal(scan((struct meta_range){.reverse = true}, 0, &rc),
                        "c,b\xff,b,ac,abd,abc,ab,a,");
    assert_string_equal(scan((struct meta_range){.prefix = "ab", .plen = 2, .reverse = true}, 0,
                             &rc),
                        "abd,abc,ab,");
    assert_string_equal(scan((struct meta_range){.prefix = "a", .plen = 1, .start = "abd",
                                                 .slen = 3, .reverse = true},
                             0, &rc),
                        "abc,ab,a,");
    assert_string_equal(scan((struct meta_range){.prefix = "b", .plen = 1, .reverse = true}, 0,
                             &rc),
                        "b\xff,b,");
    assert_string_equal(scan((struct meta_range){.prefix = "d", .plen = 1}, 0, &rc), "");
}

/* ---- directory entries ---- */

static int dirents_fill(struct meta_txn *t, void *arg)
{
    (void)arg;
    int rc = meta_dirent_add(t, 100, "zeta", 4, 201, 1);
    if (rc == 0)
        rc = meta_dirent_add(t, 100, "alpha", 5, 202, 2);
    if (rc == 0)
        rc = meta_dirent_add(t, 100, "mid", 3, 203, 1);
    if (rc == 0)
        rc = meta_dirent_add(t, 101, "other", 5, 204, 1);
    if (rc == 0 && meta_dirent_add(t, 100, "mid", 3, 205, 1) != -EEXIST)
        rc = -EINVAL;
    return rc;
}

static int dirent_del_mid(struct meta_txn *t, void *arg)
{
    (void)arg;
    return meta_dirent_del(t, 100, "mid", 3);
}

struct dseen {
    char names[128];
    uint64_t cookies[8];
    int n;
};

static int dseen_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct dseen *s = arg;
    (void)ino;
    strncat(s->names, name, len);
    strcat(s->names, ",");
    s->cookies[s->n++] = cookie;
    return 0;
}

static void test_dirents(void **state)
{
    struct meta_txn *t;
    struct meta_dirent de;
    struct dseen byname = {0}, bycookie = {0}, rest = {0};
    (void)state;
    assert_int_equal(run(dirents_fill, NULL), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_dirent_get(t, 100, "alpha", 5, &de), 0);
    assert_int_equal(de.ino, 202);
    assert_int_equal(de.type, 2);
    assert_true(de.cookie >= META_COOKIE_BASE);
    assert_int_equal(meta_dirent_get(t, 100, "beta", 4, &de), -ENOENT);
    assert_int_equal(meta_dirent_scan_names(t, 100, dseen_cb, &byname), 0);
    assert_string_equal(byname.names, "alpha,mid,zeta,");
    assert_int_equal(meta_dirent_scan(t, 100, 0, dseen_cb, &bycookie), 0);
    assert_int_equal(bycookie.n, 3);
    for (int i = 1; i < 3; i++)
        assert_true(bycookie.cookies[i] > bycookie.cookies[i - 1]);
    /* continue after the first cookie: the other two */
    assert_int_equal(meta_dirent_scan(t, 100, bycookie.cookies[0], dseen_cb, &rest), 0);
    assert_int_equal(rest.n, 2);
    assert_int_equal(rest.cookies[0], bycookie.cookies[1]);
    memset(&rest, 0, sizeof(rest));
    assert_int_equal(meta_dirent_scan(t, 100, UINT64_MAX, dseen_cb, &rest), 0);
    assert_int_equal(rest.n, 0);
    meta_rtxn_end(t);
    assert_int_equal(run(dirent_del_mid, NULL), 0);
    assert_int_equal(run(dirent_del_mid, NULL), -ENOENT);
    memset(&byname, 0, sizeof(byname));
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_dirent_scan(t, 100, 0, dseen_cb, &byname), 0);
    assert_int_equal(byname.n, 2);
    meta_rtxn_end(t);
}

/* ---- key index ---- */

#define LK 600 /* longer than META_KEY_VERBATIM: stored as a head + hash */

static char lkeys[4][LK];

static int kidx_fill(struct meta_txn *t, void *arg)
{
    static const char *keys[] = {"a/", "a/b", "a/c/", "a/c/d", "b", "c/x"};
    (void)arg;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int rc = meta_keyidx_put(t, 7, keys[i], strlen(keys[i]), 10 + i, 1);
        if (rc)
            return rc;
    }
    /* four long keys sharing their head, stored in hash order */
    for (int i = 0; i < 4; i++) {
        memset(lkeys[i], 'k', LK);
        lkeys[i][LK - 1] = (char)('d' - i); /* d c b a: inserted in reverse order */
        int rc = meta_keyidx_put(t, 7, lkeys[i], LK, 100 + i, 1);
        if (rc)
            return rc;
    }
    return meta_keyidx_put(t, 8, "a/b", 3, 99, 1); /* another bucket */
}

struct kseen {
    char out[2048];
    size_t skip_on; /* skip after a key of this length (its first skip_n bytes) */
    size_t skip_n;
};

static int kseen_cb(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                    size_t *skip)
{
    struct kseen *s = arg;
    (void)kv;
    if (klen == LK)
        strncat(s->out, key + LK - 1, 1); /* the last byte tells long keys apart */
    else
        strncat(s->out, key, klen);
    strcat(s->out, ",");
    if (s->skip_on && klen == s->skip_on)
        *skip = s->skip_n;
    return 0;
}

static void test_keyidx(void **state)
{
    struct meta_txn *t;
    uint64_t ino;
    uint32_t type;
    struct kseen s;
    (void)state;
    assert_int_equal(run(kidx_fill, NULL), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_keyidx_get(t, 7, "a/c/d", 5, &ino, &type), 0);
    assert_int_equal(ino, 13);
    assert_int_equal(meta_keyidx_get(t, 7, lkeys[2], LK, &ino, &type), 0);
    assert_int_equal(ino, 102);
    assert_int_equal(meta_keyidx_get(t, 7, "a/x", 3, &ino, &type), -ENOENT);
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_keyidx_scan(t, 7, NULL, 0, NULL, 0, kseen_cb, &s), 0);
    assert_string_equal(s.out, "a/,a/b,a/c/,a/c/d,b,c/x,a,b,c,d,");
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_keyidx_scan(t, 7, "a/", 2, NULL, 0, kseen_cb, &s), 0);
    assert_string_equal(s.out, "a/,a/b,a/c/,a/c/d,");
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_keyidx_scan(t, 7, "a/", 2, "a/b", 3, kseen_cb, &s), 0);
    assert_string_equal(s.out, "a/b,a/c/,a/c/d,");
    /* a skip: past every key starting with "a/c/" once "a/c/" was seen */
    memset(&s, 0, sizeof(s));
    s.skip_on = 4;
    s.skip_n = 4;
    assert_int_equal(meta_keyidx_scan(t, 7, NULL, 0, NULL, 0, kseen_cb, &s), 0);
    assert_string_equal(s.out, "a/,a/b,a/c/,b,c/x,a,b,c,d,");
    /* long keys: a prefix longer than the head, and a start inside the group */
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_keyidx_scan(t, 7, lkeys[0], LK - 1, lkeys[2], LK, kseen_cb, &s), 0);
    assert_string_equal(s.out, "b,c,d,");
    meta_rtxn_end(t);
}

/* ---- extents, block CRCs ---- */

static int ext_fill(struct meta_txn *t, void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < 4; i++) {
        struct meta_extent x = {.dev = 0, .len = 4096, .off = i * 4096, .crc = (uint32_t)i,
                                .vlen = 1000};
        int rc = meta_extent_put(t, 5, i * 1000, &x);
        if (rc)
            return rc;
    }
    uint32_t bc[2] = {1, 2};
    return meta_bcrc_put(t, 0, 4096, bc, 2);
}

struct xseen {
    uint64_t foff[8];
    int n;
};

static int xseen_cb(void *arg, uint64_t foff, const struct meta_extent *x)
{
    struct xseen *s = arg;
    (void)x;
    s->foff[s->n++] = foff;
    return 0;
}

static void test_extents(void **state)
{
    struct meta_txn *t;
    struct xseen s = {0};
    uint32_t bc[META_BCRC_MAX];
    (void)state;
    assert_int_equal(run(ext_fill, NULL), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    /* [1500, 2500): the extent at 1000 reaches past 1500, the one at 2000 starts inside */
    assert_int_equal(meta_extent_scan(t, 5, 1500, 2500, xseen_cb, &s), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.foff[0], 1000);
    assert_int_equal(s.foff[1], 2000);
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_extent_scan(t, 5, 0, UINT64_MAX, xseen_cb, &s), 0);
    assert_int_equal(s.n, 4);
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_extent_scan(t, 6, 0, UINT64_MAX, xseen_cb, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(meta_bcrc_get(t, 0, 4096, 20000, bc), 2);
    assert_int_equal(bc[1], 2);
    assert_int_equal(meta_bcrc_get(t, 0, 4096, 4096, bc), 0); /* wrong count: none */
    assert_int_equal(meta_bcrc_get(t, 0, 8192, 20000, bc), 0);
    meta_rtxn_end(t);
}

/* ---- multipart, usage, orphans, inode counter ---- */

static int mpu_fill(struct meta_txn *t, void *arg)
{
    struct meta_mpu mu = {.tenant = 3, .keylen = 3, .metalen = 2};
    struct meta_part pt = {.size = 10, .nextents = 2};
    struct meta_extent ex[2] = {{.dev = 0, .len = 5, .off = 0}, {.dev = 0, .len = 5, .off = 4096}};
    struct meta_usage u = {.bytes = 7};
    uint64_t ino;
    (void)arg;
    int rc = meta_mpu_create(t, 9, 1, &mu, "key", "mm");
    if (rc == 0 && meta_mpu_create(t, 9, 1, &mu, "key", "mm") != -EEXIST)
        rc = -EINVAL;
    if (rc == 0)
        rc = meta_mpu_create(t, 9, 2, &mu, "kez", "mm");
    for (uint32_t p = 1; p <= 3 && rc == 0; p++)
        rc = meta_part_put(t, 1, p, &pt, ex);
    if (rc == 0)
        rc = meta_usage_put(t, 3, 0, &u);
    if (rc == 0)
        rc = meta_usage_put(t, 3, 42, &u);
    if (rc == 0)
        rc = meta_orphan_put(t, 77);
    if (rc == 0)
        rc = meta_inode_alloc(t, &ino);
    if (rc == 0 && ino != 16)
        rc = -EINVAL;
    return rc;
}

static int mpu_cb(void *arg, uint64_t id, const struct meta_mpu *mu, const char *key,
                  const void *meta)
{
    int *n = arg;
    (void)meta;
    if (!mu || mu->keylen != 3 || memcmp(key, id == 1 ? "key" : "kez", 3) != 0)
        return -EINVAL;
    (*n)++;
    return 0;
}

static int part_cb(void *arg, uint32_t partno, const struct meta_part *pt,
                   const struct meta_extent *ext)
{
    uint32_t *last = arg;
    struct meta_extent e;
    memcpy(&e, &ext[1], sizeof(e));
    if (!pt || pt->nextents != 2 || e.off != 4096)
        return -EINVAL;
    *last = partno;
    return 0;
}

static int usage_cb(void *arg, uint32_t tenant, uint64_t ino, const struct meta_usage *u)
{
    int *n = arg;
    if (tenant != 3 || !u || u->bytes != 7)
        return -EINVAL;
    *n += (int)ino;
    return 0;
}

static void test_mpu_usage_orphans(void **state)
{
    struct meta_txn *t;
    struct meta_mpu mu;
    struct meta_part pt;
    const struct meta_extent *ex;
    const char *key;
    const void *meta;
    int n = 0;
    uint32_t last = 0;
    (void)state;
    assert_int_equal(run(mpu_fill, NULL), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    assert_int_equal(meta_mpu_get(t, 9, 1, &mu, &key, &meta), 0);
    assert_memory_equal(meta, "mm", 2);
    assert_int_equal(meta_mpu_get(t, 9, 3, &mu, &key, &meta), -ENOENT);
    assert_int_equal(meta_mpu_scan(t, 9, mpu_cb, &n), 0);
    assert_int_equal(n, 2);
    uint64_t *ids;
    size_t nid;
    assert_int_equal(meta_mpu_ids(t, 9, &ids, &nid), 0);
    assert_int_equal(nid, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    free(ids);
    assert_int_equal(meta_mpu_ids(t, 10, &ids, &nid), 0);
    assert_int_equal(nid, 0);
    free(ids);
    assert_int_equal(meta_part_get(t, 1, 2, &pt, &ex), 0);
    assert_int_equal(pt.size, 10);
    assert_int_equal(meta_part_scan(t, 1, 2, part_cb, &last), 0);
    assert_int_equal(last, 3);
    n = 0;
    assert_int_equal(meta_usage_scan(t, usage_cb, &n), 0);
    assert_int_equal(n, 42);
    uint64_t *inos;
    size_t no;
    assert_int_equal(meta_orphan_list(t, &inos, &no), 0);
    assert_int_equal(no, 1);
    assert_int_equal(inos[0], 77);
    free(inos);
    assert_int_equal(meta_orphan_get(t, 77), 0);
    assert_int_equal(meta_orphan_get(t, 78), -ENOENT);
    meta_rtxn_end(t);
}

/* ---- the store's free map ---- */

static int free_fill(struct meta_txn *t, void *arg)
{
    struct store_map map;
    (void)arg;
    meta_free_map(t, &map);
    int rc = map.put(map.txn, 0, 0, 4096);
    if (rc == 0)
        rc = map.put(map.txn, 0, 16384, 8192);
    if (rc == 0)
        rc = map.put(map.txn, 1, 0, 4096);
    if (rc == 0)
        rc = map.del(map.txn, 1, 0);
    if (rc == 0 && map.del(map.txn, 1, 0) != -EIO)
        rc = -EINVAL;
    return rc;
}

static int free_sum(void *arg, uint32_t dev, uint64_t off, uint64_t len)
{
    uint64_t *sum = arg;
    (void)dev;
    (void)off;
    *sum += len;
    return 0;
}

static void test_free_map(void **state)
{
    struct meta_txn *t;
    struct store_map map;
    struct store_map_rec below = {0}, above = {0};
    uint64_t sum = 0;
    (void)state;
    assert_int_equal(run(free_fill, NULL), 0);
    assert_int_equal(meta_rtxn_begin(m, &t), 0);
    meta_free_map(t, &map);
    assert_int_equal(map.near(map.txn, 0, 8192, &below, &above), 0);
    assert_true(below.found && below.off == 0 && below.len == 4096);
    assert_true(above.found && above.off == 16384 && above.len == 8192);
    memset(&below, 0, sizeof(below));
    memset(&above, 0, sizeof(above));
    assert_int_equal(map.near(map.txn, 0, 16384, &below, &above), 0);
    assert_true(above.found && above.off == 16384);
    assert_true(below.found && below.off == 0);
    memset(&below, 0, sizeof(below));
    memset(&above, 0, sizeof(above));
    assert_int_equal(map.near(map.txn, 0, 0, &below, &above), 0);
    assert_false(below.found);
    assert_int_equal(map.scan(map.txn, 0, 0, free_sum, &sum), 0);
    assert_int_equal(sum, 12288);
    sum = 0;
    assert_int_equal(map.scan(map.txn, 0, 16384, free_sum, &sum), 0);
    assert_int_equal(sum, 8192); /* from a key on */
    meta_rtxn_end(t);
}

/* ---- generic records ---- */

static int rec_collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct seen *s = arg;
    return seen_cb(s, key, klen, val, vlen) ? 1 : 0;
}

static void test_records(void **state)
{
    struct seen s = {0};
    void *v;
    size_t vl;
    (void)state;
    assert_int_equal(meta_record_put(m, META_REC_USERS, "u1", 2, "x", 1, 0), 0);
    assert_int_equal(meta_record_put(m, META_REC_USERS, "u2", 2, "y", 1, 0), 0);
    assert_int_equal(meta_record_put(m, META_REC_USERS, "u3", 2, "z", 1, 0), 0);
    assert_int_equal(meta_record_put(m, META_REC_USERS, "u3", 2, "z", 1, META_REC_NOOVERWRITE),
                     -EEXIST);
    char big[META_REC_KEY_MAX + 1] = {0};
    assert_int_equal(meta_record_put(m, META_REC_USERS, big, sizeof(big), "z", 1, 0),
                     -ENAMETOOLONG);
    assert_int_equal(meta_record_put(m, META_REC_USERS, big, 0, "z", 1, 0), -EINVAL);
    assert_int_equal(meta_record_get(m, META_REC_USERS, "u2", 2, &v, &vl), 0);
    assert_memory_equal(v, "y", 1);
    free(v);
    /* paging: from a start key, stopped by the callback (the scan still answers 0) */
    s.stop_at = 1;
    assert_int_equal(meta_record_scan(m, META_REC_USERS, "u2", 2, rec_collect, &s), 0);
    assert_string_equal(s.buf, "u2,");
    assert_int_equal(meta_record_del(m, META_REC_USERS, "u2", 2), 0);
    assert_int_equal(meta_record_del(m, META_REC_USERS, "u2", 2), -ENOENT);
    memset(&s, 0, sizeof(s));
    assert_int_equal(meta_record_scan(m, META_REC_USERS, NULL, 0, rec_collect, &s), 0);
    assert_string_equal(s.buf, "u1,u3,");
}

#define BOTH(fn) cmocka_unit_test_setup_teardown(fn, setup_lmdb, teardown), \
                 cmocka_unit_test_setup_teardown(fn, setup_mem, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_snapshot), BOTH(test_scan),    BOTH(test_dirents),
        BOTH(test_keyidx),   BOTH(test_extents), BOTH(test_mpu_usage_orphans),
        BOTH(test_free_map), BOTH(test_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
