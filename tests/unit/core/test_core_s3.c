/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_s3.c and core_upload.c: buckets, key rules,
 * uploads (inline and extents), overwrite, delete with implicit parents,
 * file/dir clashes, listing order/prefix/delimiter, multipart. */
#include "core_test_util.h"

static void test_buckets(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    assert_int_equal(core_bucket_create(f->c, &f->p, "bkt", 3, &a), -EEXIST);
    assert_int_equal(core_bucket_create(f->c, &f->p, "ab", 2, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "Abc", 3, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "192.168.1.1", 11, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "-abc", 4, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "abc-", 4, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "a..b", 4, &a), SRV_EBADNAME);
    assert_int_equal(core_bucket_create(f->c, &f->p, "my.bucket-1", 11, &a), 0);
    assert_true(a.flags & CORE_A_BUCKET);
    assert_int_equal(a.uid, 1000);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "my.bucket-1", 11, &a), 0);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "nope", 4, &a), SRV_ENOBUCKET);
    /* another tenant sees nothing */
    struct core_principal o = f->p;
    o.tenant = 2;
    assert_int_equal(core_tenant_create(f->c, 2), 0);
    assert_int_equal(core_bucket_lookup(f->c, &o, "bkt", 3, &a), SRV_ENOBUCKET);
    assert_int_equal(fx_put(f, "x", "1", 1), 0);
    assert_int_equal(core_bucket_delete(f->c, &f->p, "bkt", 3), -ENOTEMPTY);
    assert_int_equal(core_bucket_delete(f->c, &f->p, "my.bucket-1", 11), 0);
    assert_int_equal(core_bucket_delete(f->c, &f->p, "my.bucket-1", 11), SRV_ENOBUCKET);
    assert_int_equal(core_tenant_delete(f->c, 1), -ENOTEMPTY);
}

/* Owners and modes of what S3 makes, the bucket's blob, the one POSIX rule. */
static void test_owner_modes_and_bucket_meta(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    struct core_principal pub = f->p;
    pub.fmode = 0644;
    assert_int_equal(core_bucket_create(f->c, &f->p, "priv-b", 6, &a), 0);
    assert_int_equal(a.mode & 0777, 0700);
    assert_int_equal(core_bucket_create(f->c, &pub, "pub-b", 5, &a), 0);
    assert_int_equal(a.mode & 0777, 0755);
    /* an object with fmode; its parents stay 0755 */
    struct core_upload *u;
    assert_int_equal(core_upload_begin(f->c, &pub, f->bucket, 1, &u), 0);
    assert_int_equal(core_upload_write(u, "x", 1), 0);
    assert_int_equal(core_upload_commit(u, "p/q", 3, "e", NULL, 0, NULL, false, &a), 0);
    assert_int_equal(a.mode & 0777, 0644);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "p/", 2, &oi), 0);
    assert_int_equal(oi.attr.mode & 0777, 0755);
    free(oi.meta);
    /* the bucket's blob and mode, in one change */
    assert_int_equal(core_bucket_get(f->c, &f->p, "priv-b", 6, &oi), 0);
    assert_null(oi.meta);
    uint64_t pb = oi.attr.ino;
    assert_int_equal(core_bucket_set_meta(f->c, &f->p, pb, "cfg", 3, 0755), 0);
    assert_int_equal(core_bucket_get(f->c, &f->p, "priv-b", 6, &oi), 0);
    assert_int_equal(oi.metalen, 3);
    assert_memory_equal(oi.meta, "cfg", 3);
    assert_int_equal(oi.attr.mode & 0777, 0755);
    free(oi.meta);
    assert_int_equal(core_bucket_set_meta(f->c, &f->p, pb, "c2", 2, -1), 0);
    assert_int_equal(core_bucket_get(f->c, &f->p, "priv-b", 6, &oi), 0);
    assert_int_equal(oi.attr.mode & 0777, 0755);
    free(oi.meta);
    assert_int_equal(core_bucket_get(f->c, &f->p, "nope", 4, &oi), SRV_ENOBUCKET);
    /* the peek brings the bucket's blob too, even when the key is missing */
    char buf[16];
    struct core_peek pk;
    assert_int_equal(core_key_peek(f->c, &f->p, "priv-b", 6, "none", 4, buf, sizeof(buf), &pk),
                     -ENOENT);
    assert_int_equal(pk.bmetalen, 2);
    assert_int_equal(pk.battr.ino, pb);
    free(pk.bmeta);
    /* an object's blob and mode */
    assert_int_equal(core_key_set_meta_mode(f->c, &f->p, f->bucket, "p/q", 3, "m", 1, 0600), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "p/q", 3, &oi), 0);
    assert_int_equal(oi.attr.mode & 0777, 0600);
    assert_int_equal(oi.metalen, 1);
    free(oi.meta);
    /* the POSIX rule both protocols apply */
    struct core_principal other = f->p, grp = f->p, sup = f->p;
    other.uid = 4242;
    other.gid = 4242;
    grp.uid = 4243;
    sup.flags |= CORE_P_SUPER;
    a.uid = f->p.uid;
    a.gid = f->p.gid;
    a.mode = 0640;
    a.type = CORE_REG;
    enum core_pclass cls;
    assert_int_equal(core_perm_bits(&f->p, &a, &cls), 6);
    assert_int_equal(cls, CORE_PC_OWNER);
    assert_int_equal(core_perm_bits(&grp, &a, &cls), 4);
    assert_int_equal(cls, CORE_PC_GROUP);
    assert_int_equal(core_perm_bits(&other, &a, &cls), 0);
    assert_int_equal(cls, CORE_PC_OTHER);
    assert_int_equal(core_perm_bits(&sup, &a, &cls), 6); /* no execute bit: no execute */
    assert_int_equal(cls, CORE_PC_SUPER);
}

static void test_key_rules(void **state)
{
    struct fx *f = *state;
    assert_int_equal(fx_put(f, "a//b", "x", 1), SRV_EBADNAME);
    assert_int_equal(fx_put(f, "/a", "x", 1), SRV_EBADNAME);
    assert_int_equal(fx_put(f, "a/./b", "x", 1), SRV_EBADNAME);
    assert_int_equal(fx_put(f, "a/../b", "x", 1), SRV_EBADNAME);
    assert_int_equal(fx_put(f, "..", "x", 1), SRV_EBADNAME);
    char big[1100];
    memset(big, 'k', sizeof(big));
    big[1025] = '\0';
    assert_int_equal(fx_put(f, big, "x", 1), SRV_EBADNAME);
    char seg[300];
    memset(seg, 's', 256);
    seg[256] = '\0';
    assert_int_equal(fx_put(f, seg, "x", 1), SRV_EBADNAME);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a\0b", 3, &oi), SRV_EBADNAME);
    /* a long (>503 bytes) key round-trips */
    char lk[1025];
    for (int i = 0; i < 1024; i++)
        lk[i] = (i % 200 == 199) ? '/' : 'a' + i % 26;
    lk[1024] = '\0';
    assert_int_equal(fx_put(f, lk, "long", 4), 0);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, lk, &d, &n), 0);
    assert_int_equal(n, 4);
    assert_memory_equal(d, "long", 4);
    free(d);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, lk, 1024), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, lk, 1024, &oi), -ENOENT);
}

static void test_put_get_overwrite(void **state)
{
    struct fx *f = *state;
    size_t big = 3 * 1024 * 1024 + 12345;
    char *buf = malloc(big);
    fx_fill(buf, big, 1);
    assert_int_equal(fx_put(f, "small", "hello", 5), 0);
    assert_int_equal(fx_put(f, "dir/big", buf, big), 0);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "small", &d, &n), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(d, "hello", 5);
    free(d);
    assert_int_equal(fx_get(f, "dir/big", &d, &n), 0);
    assert_int_equal(n, big);
    assert_memory_equal(d, buf, big);
    free(d);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "dir/", 4, &oi), 0);
    assert_int_equal(oi.attr.type, CORE_DIR);
    assert_true(oi.attr.flags & CORE_A_IMPLICIT);
    free(oi.meta);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "dir", 3, &oi), -ENOENT);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "dir/big", 7, &oi), 0);
    assert_string_equal(oi.etag, "etag");
    assert_int_equal(oi.attr.uid, 1000);
    assert_int_equal(oi.attr.mode, 0600); /* S3 objects are their owner's (fmode 0) */
    free(oi.meta);
    /* overwrite with smaller data; space comes back after a sync */
    fx_fill(buf, 100, 2);
    assert_int_equal(fx_put(f, "dir/big", buf, 100), 0);
    assert_int_equal(fx_get(f, "dir/big", &d, &n), 0);
    assert_int_equal(n, 100);
    assert_memory_equal(d, buf, 100);
    free(d);
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 105);
    assert_int_equal(u.inodes, 3);
    /* reopen: everything is still there */
    fx_reopen(f);
    assert_int_equal(fx_get(f, "dir/big", &d, &n), 0);
    assert_int_equal(n, 100);
    assert_memory_equal(d, buf, 100);
    free(d);
    free(buf);
}

static void test_clash_and_implicit(void **state)
{
    struct fx *f = *state;
    assert_int_equal(fx_put(f, "a/b/c", "1", 1), 0);
    assert_int_equal(fx_put(f, "a/b", "2", 1), SRV_ECLASH);
    assert_int_equal(fx_put(f, "a/b/c/d", "3", 1), SRV_ECLASH);
    assert_int_equal(fx_put(f, "a/b/", "", 0), 0); /* explicit now */
    assert_int_equal(fx_put(f, "a/x", "4", 1), 0);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "a/b/c", 5), 0);
    struct core_objinfo oi;
    /* a/b is explicit: stays; a has a/x */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a/b/", 4, &oi), 0);
    free(oi.meta);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "a/", 2), -ENOTEMPTY);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "a/b/", 4), 0);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "a/x", 3), 0);
    /* a was implicit and is empty now: gone */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "a/", 2, &oi), -ENOENT);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "missing", 7), 0);
    assert_int_equal(fx_put(f, "p/q/r", "1", 1), 0);
    assert_int_equal(core_key_delete(f->c, &f->p, f->bucket, "p/q/r", 5), 0);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "p/", 2, &oi), -ENOENT);
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.inodes, 0);
    assert_int_equal(u.bytes, 0);
}

struct lst {
    char keys[64][64];
    bool pfx[64];
    int n;
};

static int lst_cb(void *arg, const struct core_listent *e)
{
    struct lst *l = arg;
    snprintf(l->keys[l->n], 64, "%.*s", (int)e->keylen, e->key);
    l->pfx[l->n] = e->is_prefix;
    l->n++;
    return 0;
}

static void test_list(void **state)
{
    struct fx *f = *state;
    const char *keys[] = {"a/b", "a-c", "a/d/e", "b", "c/", "a/d/f", "ab"};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(fx_put(f, keys[i], "", 0), 0);
    struct lst l = {0};
    bool tr;
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 1000, lst_cb,
                               &l, &tr),
                     0);
    const char *want[] = {"a-c", "a/b", "a/d/e", "a/d/f", "ab", "b", "c/"};
    assert_int_equal(l.n, 7);
    for (int i = 0; i < 7; i++)
        assert_string_equal(l.keys[i], want[i]);
    assert_false(tr);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, "/", 1, 1000, lst_cb, &l,
                               &tr),
                     0);
    const char *want2[] = {"a-c", "a/", "ab", "b", "c/"};
    assert_int_equal(l.n, 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(l.keys[i], want2[i]);
    assert_true(l.pfx[1]);
    assert_true(l.pfx[4]);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, "a/", 2, NULL, 0, "/", 1, 1000, lst_cb,
                               &l, &tr),
                     0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.keys[0], "a/b");
    assert_string_equal(l.keys[1], "a/d/");
    /* pagination */
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, "/", 1, 2, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 2);
    assert_true(tr);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, "a/", 2, "/", 1, 2, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.keys[0], "ab");
    assert_string_equal(l.keys[1], "b");
    assert_true(tr);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, "a/d/e", 5, NULL, 0, 100, lst_cb,
                               &l, &tr),
                     0);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.keys[0], "a/d/f");
}

struct lstlong {
    size_t lens[16];
    char last[CORE_KEY_MAX + 1];
    bool pfx[16];
    int n;
};

static int lstlong_cb(void *arg, const struct core_listent *e)
{
    struct lstlong *l = arg;
    if (l->n < 16) {
        l->lens[l->n] = e->keylen;
        l->pfx[l->n] = e->is_prefix;
    }
    memcpy(l->last, e->key, e->keylen);
    l->last[e->keylen] = '\0';
    l->n++;
    return 0;
}

/* Common prefixes longer than the index's exact-order head (495 bytes). */
static void test_list_long_prefixes(void **state)
{
    struct fx *f = *state;
    char base[700], key[800];
    memset(base, 'x', 600); /* three 199-byte segments: "x..x/x..x/x..x/" */
    base[199] = base[399] = base[600] = '/';
    base[601] = '\0';
    const char *tails[] = {"a/1", "a/2", "a/3/z", "b", "c/q"};
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "%s%s", base, tails[i]);
        assert_int_equal(fx_put(f, key, "v", 1), 0);
    }
    struct lstlong l = {0};
    bool tr;
    assert_int_equal(core_list(f->c, &f->p, f->bucket, base, 601, NULL, 0, "/", 1, 100,
                               lstlong_cb, &l, &tr),
                     0);
    assert_int_equal(l.n, 3); /* base+a/, base+b, base+c/ */
    assert_true(l.pfx[0]);
    assert_int_equal(l.lens[0], 603);
    assert_false(l.pfx[1]);
    assert_int_equal(l.lens[1], 602);
    assert_true(l.pfx[2]);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, "/", 1, 100, lstlong_cb,
                               &l, &tr),
                     0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.lens[0], 200);
    /* a delimiter that only matches beyond the head: "/a/" */
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, "/a/", 3, 100,
                               lstlong_cb, &l, &tr),
                     0);
    assert_int_equal(l.n, 3); /* base+a/ (rolled up), base+b, base+c/q */
    assert_true(l.pfx[0]);
    assert_int_equal(l.lens[0], 603);
    /* resuming after a long common prefix skips its whole range */
    memset(&l, 0, sizeof(l));
    snprintf(key, sizeof(key), "%sa/", base);
    assert_int_equal(core_list(f->c, &f->p, f->bucket, base, 601, key, strlen(key), "/", 1, 100,
                               lstlong_cb, &l, &tr),
                     0);
    assert_int_equal(l.n, 2);
    /* no delimiter: every key, in order */
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, base, 601, NULL, 0, NULL, 0, 100,
                               lstlong_cb, &l, &tr),
                     0);
    assert_int_equal(l.n, 5);
    snprintf(key, sizeof(key), "%sc/q", base);
    assert_string_equal(l.last, key);
}

static int part_cb(void *arg, const struct core_mpu_part *p)
{
    int *n = arg;
    (*n)++;
    /* the first part was committed with a checksum: it is kept beside its ETag */
    assert_string_equal(p->cksum, p->partno == 1 ? "1:abcd" : "");
    assert_string_equal(p->etag, p->partno == 1 ? "e1" : p->partno == 2 ? "e2" : "e3");
    return 0;
}

static void test_multipart(void **state)
{
    struct fx *f = *state;
    char id[32];
    size_t psz = 1500000; /* not chunk aligned */
    char *buf = malloc(psz * 3);
    fx_fill(buf, psz * 3, 9);
    assert_int_equal(core_mpu_create(f->c, &f->p, f->bucket, "m/obj", 5, "meta", 4, id,
                                     sizeof(id)),
                     0);
    for (uint32_t i = 0; i < 3; i++) {
        struct core_upload *u;
        char et[8];
        snprintf(et, sizeof(et), "e%u", i + 1);
        assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, psz, &u), 0);
        assert_int_equal(core_upload_write(u, buf + i * psz, psz), 0);
        assert_int_equal(core_mpu_part_commit(u, id, i + 1, et, i ? NULL : "1:abcd"), 0);
    }
    int n = 0;
    assert_int_equal(core_mpu_list_parts(f->c, &f->p, f->bucket, id, 0, part_cb, &n), 0);
    assert_int_equal(n, 3);
    uint32_t pn[] = {1, 3};
    const char *ets[] = {"e1", "e2"};
    assert_int_equal(core_mpu_complete(f->c, &f->p, f->bucket, id, pn, ets, 2, "x-2", NULL, NULL),
                     SRV_EPRECOND);
    const char *ets2[] = {"e1", "e3"};
    uint32_t bad[] = {3, 1};
    assert_int_equal(core_mpu_complete(f->c, &f->p, f->bucket, id, bad, ets2, 2, "x-2", NULL, NULL),
                     -EINVAL);
    struct core_attr a;
    assert_int_equal(core_mpu_complete(f->c, &f->p, f->bucket, id, pn, ets2, 2, "x-2", NULL, &a),
                     0);
    assert_int_equal(a.size, 2 * psz);
    void *d = NULL;
    size_t len;
    assert_int_equal(fx_get(f, "m/obj", &d, &len), 0);
    assert_int_equal(len, 2 * psz);
    assert_memory_equal(d, buf, psz);
    assert_memory_equal((char *)d + psz, buf + 2 * psz, psz);
    free(d);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "m/obj", 5, &oi), 0);
    assert_string_equal(oi.etag, "x-2");
    assert_int_equal(oi.metalen, 4);
    free(oi.meta);
    assert_int_equal(core_mpu_abort(f->c, &f->p, f->bucket, id), -ENOENT);
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.bytes, 2 * psz);
    free(buf);
}

static int put_cond(struct fx *f, const char *key, const char *data, const char *etag,
                    const char *if_etag, bool inm)
{
    struct core_upload *u;
    int rc = core_upload_begin(f->c, &f->p, f->bucket, strlen(data), &u);
    if (rc)
        return rc;
    core_upload_write(u, data, strlen(data));
    return core_upload_commit(u, key, strlen(key), etag, NULL, 0, if_etag, inm, NULL);
}

static void test_preconditions(void **state)
{
    struct fx *f = *state;
    assert_int_equal(put_cond(f, "k", "v1", "e1", "*", false), -ENOENT); /* no such key */
    assert_int_equal(put_cond(f, "k", "v1", "e1", NULL, true), 0);
    assert_int_equal(put_cond(f, "k", "v2", "e2", NULL, true), SRV_EPRECOND);
    assert_int_equal(put_cond(f, "k", "v2", "e2", "nope", false), SRV_EPRECOND);
    assert_int_equal(put_cond(f, "k", "v2", "e2", "\"e1\"", false), 0);
    assert_int_equal(put_cond(f, "k", "v3", "e3", "*", false), 0);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "k", &d, &n), 0);
    assert_memory_equal(d, "v3", 2);
    free(d);
    /* an aborted upload leaves nothing and frees its space */
    struct core_stats s1, s2;
    core_stats_get(f->c, &s1);
    struct core_upload *u;
    char *big = calloc(1, 3 << 20);
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, UINT64_MAX, &u), 0);
    assert_int_equal(core_upload_write(u, big, 3 << 20), 0);
    assert_int_equal(core_upload_size(u), 3 << 20);
    core_upload_abort(u);
    core_upload_abort(NULL);
    core_stats_get(f->c, &s2);
    assert_int_equal(s1.store_free, s2.store_free);
    free(big);
    /* unknown bucket, read-only principal */
    assert_int_equal(core_upload_begin(f->c, &f->p, 999999, 1, &u), SRV_ENOBUCKET);
    struct core_principal ro = f->p;
    ro.flags = CORE_P_READONLY;
    assert_int_equal(core_upload_begin(f->c, &ro, f->bucket, 1, &u), -EACCES);
    assert_int_equal(core_key_delete(f->c, &ro, f->bucket, "k", 1), -EACCES);
    /* metadata replacement */
    assert_int_equal(core_key_set_meta(f->c, &f->p, f->bucket, "k", 1, "blob", 4), 0);
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "k", 1, &oi), 0);
    assert_int_equal(oi.metalen, 4);
    assert_memory_equal(oi.meta, "blob", 4);
    assert_string_equal(oi.etag, "e3");
    free(oi.meta);
    assert_int_equal(core_key_set_meta(f->c, &f->p, f->bucket, "nokey", 5, "b", 1), -ENOENT);
}

static int mpu_cb(void *arg, const struct core_mpu_info *info)
{
    int *n = arg;
    (*n)++;
    (void)info;
    return 0;
}

static void test_multipart_more(void **state)
{
    struct fx *f = *state;
    char id1[32], id2[32];
    assert_int_equal(core_mpu_create(f->c, &f->p, f->bucket, "b", 1, NULL, 0, id1, sizeof(id1)),
                     0);
    assert_int_equal(core_mpu_create(f->c, &f->p, f->bucket, "a", 1, NULL, 0, id2, sizeof(id2)),
                     0);
    assert_int_equal(core_mpu_create(f->c, &f->p, f->bucket, "a//", 3, NULL, 0, id2, sizeof(id2)),
                     SRV_EBADNAME);
    int n = 0;
    assert_int_equal(core_mpu_list(f->c, &f->p, f->bucket, NULL, 0, mpu_cb, &n), 0);
    assert_int_equal(n, 2);
    n = 0;
    assert_int_equal(core_mpu_list(f->c, &f->p, f->bucket, "b", 1, mpu_cb, &n), 0);
    assert_int_equal(n, 1);
    /* re-uploading a part replaces it and frees the old space */
    struct core_stats s0, s1;
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s0);
    char *buf = calloc(1, 2 << 20);
    for (int i = 0; i < 2; i++) {
        struct core_upload *u;
        assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, 2 << 20, &u), 0);
        assert_int_equal(core_upload_write(u, buf, 2 << 20), 0);
        assert_int_equal(core_mpu_part_commit(u, id1, 1, i ? "p1b" : "p1a", NULL), 0);
    }
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s1);
    assert_int_equal(s0.store_free - s1.store_free, 2 << 20);
    struct core_upload *u;
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, 1, &u), 0);
    assert_int_equal(core_mpu_part_commit(u, "zzzz", 1, "x", NULL), -ENOENT);
    assert_int_equal(core_upload_begin(f->c, &f->p, f->bucket, 1, &u), 0);
    assert_int_equal(core_mpu_part_commit(u, id1, 0, "x", NULL), -EINVAL);
    uint32_t pn[] = {1};
    const char *et[] = {"p1a"};
    assert_int_equal(core_mpu_complete(f->c, &f->p, f->bucket, id1, pn, et, 1, "f-1", NULL, NULL),
                     SRV_EPRECOND);
    uint32_t pn2[] = {2};
    assert_int_equal(
        core_mpu_complete(f->c, &f->p, f->bucket, id1, pn2, NULL, 1, "f-1", NULL, NULL),
        SRV_EPRECOND);
    /* abort frees every part */
    assert_int_equal(core_mpu_abort(f->c, &f->p, f->bucket, id1), 0);
    assert_int_equal(core_mpu_abort(f->c, &f->p, f->bucket, id1), -ENOENT);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s1);
    assert_int_equal(s0.store_free, s1.store_free);
    struct core_usage us;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &us), 0);
    assert_int_equal(us.bytes, 0);
    /* another tenant sees no upload */
    struct core_principal o = f->p;
    o.tenant = 5;
    n = 0;
    assert_int_equal(core_mpu_list(f->c, &o, f->bucket, NULL, 0, mpu_cb, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(core_mpu_abort(f->c, &o, f->bucket, id2), -ENOENT);
    /* deleting a bucket drops its unfinished uploads and their space */
    struct core_attr b2;
    assert_int_equal(core_bucket_create(f->c, &f->p, "gone", 4, &b2), 0);
    assert_int_equal(core_mpu_create(f->c, &f->p, b2.ino, "x", 1, NULL, 0, id1, sizeof(id1)), 0);
    assert_int_equal(core_upload_begin(f->c, &f->p, b2.ino, 2 << 20, &u), 0);
    assert_int_equal(core_upload_write(u, buf, 2 << 20), 0);
    assert_int_equal(core_mpu_part_commit(u, id1, 1, "p", NULL), 0);
    assert_int_equal(core_bucket_delete(f->c, &f->p, "gone", 4), 0);
    assert_int_equal(core_sync(f->c), 0);
    core_stats_get(f->c, &s1);
    assert_int_equal(s0.store_free, s1.store_free);
    assert_int_equal(core_usage_get(f->c, 1, 0, &us), 0);
    assert_int_equal(us.bytes, 0);
    free(buf);
}

static void test_empty_dirs_listed(void **state)
{
    struct fx *f = *state;
    struct core_attr a, d;
    /* NFS-made empty directories list as "k/"; non-empty ones do not */
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "empty", 5, 0755, &a), 0);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "full", 4, 0755, &d), 0);
    assert_int_equal(core_create(f->c, &f->p, d.ino, "x", 1, 0644, 0, 0, &a), 0);
    struct lst l = {0};
    bool tr;
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 100, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.keys[0], "empty/");
    assert_string_equal(l.keys[1], "full/x");
    /* rename a directory: the listing follows */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "full", 4, f->bucket,
                                 "moved", 5),
                     0);
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 100, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.keys[1], "moved/x");
    /* max 0: nothing, truncated */
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 0, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 0);
    assert_true(tr);
    /* other tenant */
    struct core_principal o = f->p;
    o.tenant = 5;
    assert_int_equal(core_list(f->c, &o, f->bucket, NULL, 0, NULL, 0, NULL, 0, 10, lst_cb, &l,
                               &tr),
                     SRV_ENOBUCKET);
}

static void test_symlinks_not_listed(void **state)
{
    struct fx *f = *state;
    struct core_attr a, d;
    struct core_objinfo oi;
    /* a symlink is not an object: not listed, so no listed key answers NoSuchKey */
    assert_int_equal(fx_put(f, "file", "x", 1), 0);
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "lnk", 3, "file", 4, &a), 0);
    assert_int_equal(core_mkdir(f->c, &f->p, f->bucket, "dir", 3, 0755, &d), 0);
    assert_int_equal(core_symlink(f->c, &f->p, d.ino, "in", 2, "../file", 7, &a), 0);
    struct lst l = {0};
    bool tr;
    assert_int_equal(core_list(f->c, &f->p, f->bucket, NULL, 0, NULL, 0, NULL, 0, 100, lst_cb, &l,
                               &tr),
                     0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.keys[0], "file");
    memset(&l, 0, sizeof(l));
    assert_int_equal(core_list(f->c, &f->p, f->bucket, "dir/", 4, NULL, 0, "/", 1, 100, lst_cb,
                               &l, &tr),
                     0);
    assert_int_equal(l.n, 0);
    /* the key index still knows it (lookup reports the type; the front end hides it) */
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "lnk", 3, &oi), 0);
    assert_int_equal(oi.attr.type, CORE_LNK);
    free(oi.meta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_buckets, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_key_rules, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_owner_modes_and_bucket_meta, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_put_get_overwrite, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_clash_and_implicit, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_list, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_multipart, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_list_long_prefixes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_preconditions, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_multipart_more, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_empty_dirs_listed, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_not_listed, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
