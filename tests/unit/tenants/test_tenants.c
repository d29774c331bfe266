/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for tenants/tenants.c: bootstrap, key lookup, CRUD of tenants,
 * users, keys and exports, persistence across reopen, secrets encrypted at
 * rest (never stored in clear), the master key file, and what tenants
 * publishes on /metrics (bucket names of the per-bucket series, per-bucket
 * usage and quota gauges).
 *
 * The core and meta are replaced at their boundary by a small in-memory fake of
 * the meta_record_*, core_meta and core_tenant_* calls (this binary links only
 * libtenants.a and libcommon.a), so the tests are independent of the metadata
 * engine. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "meta_record.h"
#include "srv_err.h"
#include "srv_metrics.h"
#include "tenants.h"

/* ---- fake core ---- */
struct row {
    void *k, *v;
    size_t kl, vl;
};
static struct row rows[META_REC__COUNT][256];
static size_t nrows[META_REC__COUNT];
static uint32_t troots[64];
static int buckets_in[64];

static int kcmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al < bl ? -1 : al > bl);
}

static struct row *rfind(enum meta_rec_table t, const void *k, size_t kl)
{
    for (size_t i = 0; i < nrows[t]; i++)
        if (kcmp(rows[t][i].k, rows[t][i].kl, k, kl) == 0)
            return &rows[t][i];
    return NULL;
}

struct meta_env *core_meta(struct core *c)
{
    return (struct meta_env *)c;
}

int meta_record_get(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen,
                    void **val, size_t *vlen)
{
    struct row *r = rfind(t, key, klen);
    if (!r)
        return -ENOENT;
    *val = malloc(r->vl + 1);
    memcpy(*val, r->v, r->vl);
    *vlen = r->vl;
    return 0;
}

int meta_record_put(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen,
                    const void *val, size_t vlen, unsigned flags)
{
    struct row *r = rfind(t, key, klen);
    if (r && (flags & META_REC_NOOVERWRITE))
        return -EEXIST;
    if (!r) {
        size_t i = nrows[t];
        while (i > 0 && kcmp(rows[t][i - 1].k, rows[t][i - 1].kl, key, klen) > 0) {
            rows[t][i] = rows[t][i - 1];
            i--;
        }
        nrows[t]++;
        r = &rows[t][i];
        r->k = malloc(klen);
        memcpy(r->k, key, klen);
        r->kl = klen;
        r->v = NULL;
    }
    free(r->v);
    r->v = malloc(vlen);
    memcpy(r->v, val, vlen);
    r->vl = vlen;
    return 0;
}

int meta_record_del(struct meta_env *m, enum meta_rec_table t, const void *key, size_t klen)
{
    struct row *r = rfind(t, key, klen);
    if (!r)
        return -ENOENT;
    free(r->k);
    free(r->v);
    size_t i = (size_t)(r - rows[t]);
    memmove(&rows[t][i], &rows[t][i + 1], (nrows[t] - i - 1) * sizeof(struct row));
    nrows[t]--;
    return 0;
}

int meta_record_scan(struct meta_env *m, enum meta_rec_table t, const void *start, size_t slen,
                     meta_record_cb cb, void *arg)
{
    for (size_t i = 0; i < nrows[t]; i++) {
        if (start && kcmp(rows[t][i].k, rows[t][i].kl, start, slen) < 0)
            continue;
        if (cb(arg, rows[t][i].k, rows[t][i].kl, rows[t][i].v, rows[t][i].vl))
            break;
    }
    return 0;
}

int core_tenant_create(struct core *c, uint32_t id)
{
    if (id >= 64)
        return -ENOSPC;
    if (troots[id])
        return -EEXIST;
    troots[id] = 1000 + id;
    return 0;
}

int core_tenant_delete(struct core *c, uint32_t id)
{
    if (id >= 64 || !troots[id])
        return -ENOENT;
    if (buckets_in[id])
        return -ENOTEMPTY;
    troots[id] = 0;
    return 0;
}

/* No bucket of the fake core has a tier policy (tenants_remote_delete scans them). */
int core_bucket_blob_scan(struct core *c, uint8_t kind, core_blob_cb cb, void *arg)
{
    (void)c;
    (void)kind;
    (void)cb;
    (void)arg;
    return 0;
}

/* No file of the fake core is evicted (tenants_remote_delete asks). */
int core_tier_remote_needed(struct core *c, uint32_t remote, uint64_t *ino)
{
    (void)c;
    (void)remote;
    if (ino)
        *ino = 0;
    return 0;
}

int core_tenant_root(struct core *c, uint32_t id, uint64_t *root)
{
    if (id >= 64 || !troots[id])
        return -ENOENT;
    *root = troots[id];
    return 0;
}

/* Buckets of the fake core (core_bucket_list, core_usage_get). */
static struct {
    uint32_t tenant;
    uint64_t ino;
    const char *name;
    struct core_usage u;
} fbuckets[8];
static size_t nfbuckets;

int core_bucket_list(struct core *c, const struct core_principal *p, core_bucket_cb cb, void *arg)
{
    for (size_t i = 0; i < nfbuckets; i++) {
        if (fbuckets[i].tenant != p->tenant)
            continue;
        struct core_attr a = {.ino = fbuckets[i].ino, .tenant = p->tenant, .type = CORE_DIR};
        if (cb(arg, fbuckets[i].name, strlen(fbuckets[i].name), &a))
            break;
    }
    return 0;
}

int core_usage_get(struct core *c, uint32_t tenant, uint64_t ino, struct core_usage *out)
{
    for (size_t i = 0; i < nfbuckets; i++) {
        if (fbuckets[i].tenant == tenant && fbuckets[i].ino == ino) {
            *out = fbuckets[i].u;
            return 0;
        }
    }
    return -ENOENT;
}

static void fake_reset(void)
{
    nfbuckets = 0;
    for (int t = 0; t < META_REC__COUNT; t++) {
        for (size_t i = 0; i < nrows[t]; i++) {
            free(rows[t][i].k);
            free(rows[t][i].v);
        }
        nrows[t] = 0;
    }
    memset(troots, 0, sizeof(troots));
    memset(buckets_in, 0, sizeof(buckets_in));
}

static int setup(void **state)
{
    fake_reset();
    return 0;
}

static struct core *const FAKE = (struct core *)0x1;

/* ---- helpers ---- */

static struct sockaddr_in v4(const char *a)
{
    struct sockaddr_in s;
    memset(&s, 0, sizeof(s));
    s.sin_family = AF_INET;
    inet_pton(AF_INET, a, &s.sin_addr);
    return s;
}

static bool table_contains(enum meta_rec_table t, const char *needle)
{
    for (size_t i = 0; i < nrows[t]; i++)
        if (memmem(rows[t][i].v, rows[t][i].vl, needle, strlen(needle)))
            return true;
    return false;
}

/* ---- tests ---- */

static void test_bootstrap_given_keys(void **state)
{
    struct tenants *t;
    bool created;
    struct core_principal p;
    char secret[TENANT_SECRET_MAX + 1];
    assert_int_equal(tenants_open(&t, FAKE, "AKIATEST1", "secret-one-123", NULL, NULL, &created),
                     0);
    assert_true(created);
    assert_int_equal(tenants_key_lookup(t, "AKIATEST1", secret, &p), 0);
    assert_string_equal(secret, "secret-one-123");
    assert_int_equal(p.tenant, 1);
    assert_int_equal(p.uid, 0);
    assert_int_equal(p.gid, 0);
    assert_true(p.flags & CORE_P_SUPER);
    assert_int_equal(tenants_key_lookup(t, "NOPE", secret, &p), -ENOENT);
    /* Secret is not stored in clear. */
    assert_false(table_contains(META_REC_KEYS, "secret-one-123"));
    assert_true(table_contains(META_REC_KEYS, "AKIATEST1"));

    struct tenant_info ti;
    assert_int_equal(tenants_tenant_get(t, 1, &ti), 0);
    assert_string_equal(ti.name, "default");
    assert_int_equal(ti.root, 1001);

    /* Export "/" for loopback only. */
    struct tenant_export e;
    struct sockaddr_in lo = v4("127.0.0.1"), other = v4("10.0.0.1");
    assert_int_equal(tenants_export_find(t, "/", (struct sockaddr *)&lo, &e), 0);
    assert_int_equal(e.dir, 1001);
    assert_int_equal(e.flags, 0);
    assert_int_equal(tenants_export_find(t, "//", (struct sockaddr *)&lo, &e), 0);
    assert_int_equal(tenants_export_find(t, "/", (struct sockaddr *)&other, &e), -EACCES);
    assert_int_equal(tenants_export_find(t, "/nope", (struct sockaddr *)&lo, &e), -ENOENT);
    assert_int_equal(tenants_export_get(t, e.id, (struct sockaddr *)&lo, &e), 0);
    assert_int_equal(tenants_export_get(t, e.id, (struct sockaddr *)&other, &e), -EACCES);
    assert_int_equal(tenants_export_get(t, 999, (struct sockaddr *)&lo, &e), -ENOENT);
    tenants_close(t);

    /* Reopen: not created again, same key works. */
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, &created), 0);
    assert_false(created);
    assert_int_equal(tenants_key_lookup(t, "AKIATEST1", secret, &p), 0);
    assert_string_equal(secret, "secret-one-123");
    tenants_close(t);
}

static void test_bootstrap_generated(void **state)
{
    struct tenants *t;
    bool created;
    char ak[TENANT_AKEY_MAX + 1] = "", sk[TENANT_SECRET_MAX + 1] = "", got[TENANT_SECRET_MAX + 1];
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, ak, sk, &created), 0);
    assert_true(created);
    assert_int_equal(strlen(ak), 20);
    assert_int_equal(strlen(sk), 40);
    assert_int_equal(tenants_key_lookup(t, ak, got, NULL), 0);
    assert_string_equal(got, sk);
    tenants_close(t);
    /* Half a pair is refused. */
    assert_int_equal(tenants_open(&t, FAKE, "AKIAONLY", NULL, NULL, NULL, NULL), -EINVAL);
}

static void test_env_key_on_restart(void **state)
{
    struct tenants *t;
    char got[TENANT_SECRET_MAX + 1];
    assert_int_equal(tenants_open(&t, FAKE, "AKIAFIRST", "first-secret", NULL, NULL, NULL), 0);
    tenants_close(t);
    assert_int_equal(tenants_open(&t, FAKE, "AKIASECOND", "second-secret", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_key_lookup(t, "AKIAFIRST", got, NULL), 0);
    assert_int_equal(tenants_key_lookup(t, "AKIASECOND", got, NULL), 0);
    assert_string_equal(got, "second-secret");
    tenants_close(t);
    assert_int_equal(tenants_open(&t, FAKE, "AKIASECOND", "changed-secret", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_key_lookup(t, "AKIASECOND", got, NULL), 0);
    assert_string_equal(got, "changed-secret");
    tenants_close(t);
}

static int count_cb(void *arg, const void *x)
{
    (*(int *)arg)++;
    return 0;
}

static void test_crud(void **state)
{
    struct tenants *t;
    assert_int_equal(tenants_open(&t, FAKE, "AKIABOOT", "boot-secret", NULL, NULL, NULL), 0);

    struct tenant_info a, b;
    assert_int_equal(tenants_tenant_create(t, "acme", &a), 0);
    assert_int_equal(a.id, 2);
    assert_int_equal(a.root, 1002);
    assert_int_equal(tenants_tenant_create(t, "acme", &b), -EEXIST);
    assert_int_equal(tenants_tenant_create(t, "bad name", &b), SRV_EBADNAME);
    assert_int_equal(tenants_tenant_create(t, "", &b), SRV_EBADNAME);
    assert_int_equal(tenants_tenant_create(t, "-x", &b), SRV_EBADNAME);
    assert_int_equal(tenants_tenant_find(t, "acme", &b), 0);
    assert_int_equal(b.id, a.id);
    int n = 0;
    assert_int_equal(tenants_tenant_list(t, (tenants_tenant_cb)count_cb, &n), 0);
    assert_int_equal(n, 2);

    struct tenant_user u = {.tenant = a.id, .uid = 1000, .gid = 100, .ngids = 2,
                            .gids = {100, 200}}, got;
    snprintf(u.name, sizeof(u.name), "alice");
    assert_int_equal(tenants_user_create(t, &u, &got), 0);
    assert_true(got.id >= 2);
    assert_int_equal(tenants_user_create(t, &u, NULL), -EEXIST);
    u.tenant = 99;
    assert_int_equal(tenants_user_create(t, &u, NULL), -ENOENT);
    struct tenant_user f;
    assert_int_equal(tenants_user_find(t, a.id, "alice", &f), 0);
    assert_int_equal(f.id, got.id);
    assert_int_equal(f.ngids, 2);
    assert_int_equal(f.gids[1], 200);

    char ak[TENANT_AKEY_MAX + 1], sk[TENANT_SECRET_MAX + 1], s2[TENANT_SECRET_MAX + 1];
    struct core_principal p;
    assert_int_equal(tenants_key_create(t, a.id, got.id, ak, sk), 0);
    assert_int_equal(tenants_key_create(t, a.id, 12345, ak, sk), -ENOENT);
    assert_int_equal(tenants_key_create(t, a.id, got.id, ak, sk), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), 0);
    assert_string_equal(s2, sk);
    assert_int_equal(p.tenant, a.id);
    assert_int_equal(p.uid, 1000);
    assert_int_equal(p.ngids, 2);
    assert_false(p.flags & CORE_P_SUPER);
    assert_false(table_contains(META_REC_KEYS, sk));

    n = 0;
    assert_int_equal(tenants_key_list(t, a.id, (tenants_key_cb)count_cb, &n), 0);
    assert_int_equal(n, 2);

    /* Disable key, then user. */
    assert_int_equal(tenants_key_set_disabled(t, ak, true), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), -EACCES);
    assert_int_equal(tenants_key_set_disabled(t, ak, false), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), 0);
    f.disabled = true;
    assert_int_equal(tenants_user_update(t, &f), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), -EACCES);
    f.disabled = false;
    f.uid = 1001;
    assert_int_equal(tenants_user_update(t, &f), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), 0);
    assert_int_equal(p.uid, 1001);

    /* Exports. */
    struct tenant_export e = {.tenant = a.id, .flags = TENANT_EXPORT_RO | TENANT_EXPORT_ROOT_SQUASH,
                              .anon_uid = 65534, .anon_gid = 65534, .nnets = 1}, eo;
    snprintf(e.path, sizeof(e.path), "/acme/");
    assert_int_equal(tenants_net_parse("10.0.0.0/8", &e.nets[0]), 0);
    assert_int_equal(tenants_export_create(t, &e, &eo), 0);
    assert_string_equal(eo.path, "/acme");
    assert_int_equal(eo.dir, a.root);
    struct sockaddr_in c1 = v4("10.2.3.4"), lo = v4("127.0.0.1");
    struct tenant_export fe;
    assert_int_equal(tenants_export_find(t, "/acme", (struct sockaddr *)&c1, &fe), 0);
    assert_int_equal(fe.tenant, a.id);
    assert_int_equal(tenants_export_find(t, "/acme", (struct sockaddr *)&lo, &fe), -EACCES);
    n = 0;
    assert_int_equal(tenants_export_list(t, (struct sockaddr *)&c1, (tenants_export_cb)count_cb,
                                         &n), 0);
    assert_int_equal(n, 1);
    n = 0;
    assert_int_equal(tenants_export_list(t, NULL, (tenants_export_cb)count_cb, &n), 0);
    assert_int_equal(n, 2);
    snprintf(e.path, sizeof(e.path), "/../x");
    assert_int_equal(tenants_export_create(t, &e, NULL), -EINVAL);
    snprintf(e.path, sizeof(e.path), "relative");
    assert_int_equal(tenants_export_create(t, &e, NULL), -EINVAL);

    /* Everything survives a reopen. */
    tenants_close(t);
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), 0);
    assert_string_equal(s2, sk);
    assert_int_equal(p.uid, 1001);
    assert_int_equal(tenants_export_find(t, "/acme", (struct sockaddr *)&c1, &fe), 0);
    assert_int_equal(fe.flags, TENANT_EXPORT_RO | TENANT_EXPORT_ROOT_SQUASH);
    assert_int_equal(fe.nnets, 1);

    /* Deleting: a tenant with a bucket is refused; an empty one goes with its records. */
    buckets_in[a.id] = 1;
    assert_int_equal(tenants_tenant_delete(t, a.id), -ENOTEMPTY);
    assert_int_equal(tenants_key_lookup(t, ak, s2, &p), 0);
    buckets_in[a.id] = 0;
    assert_int_equal(tenants_key_delete(t, ak), 0);
    assert_int_equal(tenants_key_delete(t, ak), -ENOENT);
    assert_int_equal(tenants_tenant_delete(t, a.id), 0);
    assert_int_equal(tenants_tenant_get(t, a.id, &b), -ENOENT);
    assert_int_equal(tenants_user_get(t, a.id, f.id, &f), -ENOENT);
    assert_int_equal(tenants_export_find(t, "/acme", (struct sockaddr *)&c1, &fe), -ENOENT);
    n = 0;
    assert_int_equal(tenants_key_list(t, 0, (tenants_key_cb)count_cb, &n), 0);
    assert_int_equal(n, 1); /* only the bootstrap key */
    /* Ids are not reused. */
    assert_int_equal(tenants_tenant_create(t, "next", &b), 0);
    assert_int_equal(b.id, 3);
    tenants_close(t);
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_find(t, "acme", &b), -ENOENT);
    assert_int_equal(tenants_user_delete(t, 1, 1), 0);
    assert_int_equal(tenants_key_lookup(t, "AKIABOOT", s2, &p), -ENOENT);
    tenants_close(t);
}

/* Renaming a tenant and changing an export persist and show at once. */
static void test_rename_and_export_update(void **state)
{
    struct tenants *t;
    struct tenant_info a, b, got;
    struct tenant_export e, out, fe;
    struct sockaddr_in c1 = {.sin_family = AF_INET}, c2 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "10.1.2.3", &c1.sin_addr);
    inet_pton(AF_INET, "192.168.7.7", &c2.sin_addr);

    assert_int_equal(tenants_open(&t, FAKE, "AKIAREN", "rename-secret", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_create(t, "old", &a), 0);
    assert_int_equal(tenants_tenant_create(t, "other", &b), 0);
    assert_int_equal(tenants_tenant_rename(t, a.id, "new"), 0);
    assert_int_equal(tenants_tenant_find(t, "new", &got), 0);
    assert_int_equal(got.id, a.id);
    assert_int_equal(got.root, a.root);
    assert_int_equal(tenants_tenant_find(t, "old", &got), -ENOENT);
    assert_int_equal(tenants_tenant_rename(t, a.id, "other"), -EEXIST);
    assert_int_equal(tenants_tenant_rename(t, a.id, "new"), 0); /* its own name */
    assert_int_equal(tenants_tenant_rename(t, a.id, "bad name"), SRV_EBADNAME);
    assert_int_equal(tenants_tenant_rename(t, 99, "x"), -ENOENT);

    memset(&e, 0, sizeof(e));
    e.tenant = a.id;
    snprintf(e.path, sizeof(e.path), "/new");
    assert_int_equal(tenants_net_parse("10.0.0.0/8", &e.nets[0]), 0);
    e.nnets = 1;
    assert_int_equal(tenants_export_create(t, &e, &out), 0);
    assert_int_equal(tenants_export_find(t, "/new", (struct sockaddr *)&c1, &fe), 0);
    struct tenant_export upd = out;
    snprintf(upd.path, sizeof(upd.path), "/renamed//");
    assert_int_equal(tenants_net_parse("192.168.0.0/16", &upd.nets[0]), 0);
    upd.flags = TENANT_EXPORT_RO;
    upd.dir = 12345;  /* ignored: the directory never changes */
    upd.tenant = b.id; /* ignored: nor the tenant */
    assert_int_equal(tenants_export_update(t, &upd, &fe), 0);
    assert_string_equal(fe.path, "/renamed");
    assert_int_equal(fe.dir, out.dir);
    assert_int_equal(fe.tenant, a.id);
    assert_int_equal(tenants_export_find(t, "/new", (struct sockaddr *)&c1, &fe), -ENOENT);
    assert_int_equal(tenants_export_find(t, "/renamed", (struct sockaddr *)&c1, &fe), -EACCES);
    assert_int_equal(tenants_export_find(t, "/renamed", (struct sockaddr *)&c2, &fe), 0);
    assert_int_equal(fe.flags, TENANT_EXPORT_RO);
    upd.nnets = 0;
    assert_int_equal(tenants_export_update(t, &upd, NULL), -EINVAL);
    upd.nnets = 1;
    snprintf(upd.path, sizeof(upd.path), "/a/../b");
    assert_int_equal(tenants_export_update(t, &upd, NULL), -EINVAL);
    snprintf(upd.path, sizeof(upd.path), "/ok");
    upd.flags = 0x80;
    assert_int_equal(tenants_export_update(t, &upd, NULL), -EINVAL);
    upd.flags = 0;
    upd.id = 999;
    assert_int_equal(tenants_export_update(t, &upd, NULL), -ENOENT);

    /* Both survive a reopen. */
    tenants_close(t);
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_find(t, "new", &got), 0);
    assert_int_equal(tenants_export_find(t, "/renamed", (struct sockaddr *)&c2, &fe), 0);
    assert_int_equal(fe.flags, TENANT_EXPORT_RO);
    tenants_close(t);
}

/* An export of tenant @p tenant at @p path for the ranges @p nets ("a,b"). */
static int mkexport(struct tenants *t, uint32_t tenant, const char *path, const char *nets,
                    struct tenant_export *out)
{
    struct tenant_export e;
    char buf[256], *save = NULL;
    memset(&e, 0, sizeof(e));
    e.tenant = tenant;
    snprintf(e.path, sizeof(e.path), "%s", path);
    snprintf(buf, sizeof(buf), "%s", nets);
    for (char *n = strtok_r(buf, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        assert_int_equal(tenants_net_parse(n, &e.nets[e.nnets]), 0);
        e.nnets++;
    }
    if (out)
        memset(out, 0, sizeof(*out));
    return tenants_export_create(t, &e, out);
}

/* Which export (its id; 0: none, -EACCES) serves @p path to @p addr. */
static long served_by(struct tenants *t, const char *path, const char *addr, const char **rest,
                      bool *foreign)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &s6->sin6_addr);
    } else {
        *(struct sockaddr_in *)&ss = v4(addr);
    }
    struct tenant_export e;
    size_t off = 0;
    bool f = false;
    int rc = tenants_export_resolve(t, path, (struct sockaddr *)&ss, &e, &off, &f);
    if (rc < 0)
        return rc;
    if (rest)
        *rest = path + off;
    if (foreign)
        *foreign = f;
    return e.id;
}

/* Export paths are unambiguous across tenants (tenants.h): same path or, across
 * tenants, nested paths for overlapping ranges are refused, except "/" next to
 * an export in another tenant's own prefix, which "/" does not serve. */
static void test_export_rules(void **state)
{
    struct tenants *t;
    struct tenant_info acme, beta;
    struct tenant_export ea, eas, eb, eb2, other, got;
    const char *rest;
    bool foreign;

    assert_int_equal(tenants_open(&t, FAKE, "AKIARULES", "rules-secret", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_create(t, "acme", &acme), 0);
    assert_int_equal(tenants_tenant_create(t, "beta", &beta), 0);
    assert_true(tenants_path_is_own(t, acme.id, "/acme"));
    assert_true(tenants_path_is_own(t, acme.id, "/acme/x/y"));
    assert_false(tenants_path_is_own(t, acme.id, "/acme2"));
    assert_false(tenants_path_is_own(t, acme.id, "/ACME"));
    assert_false(tenants_path_is_own(t, acme.id, "/"));
    assert_false(tenants_path_is_own(t, beta.id, "/acme"));
    assert_false(tenants_path_is_own(t, 99, "/acme"));

    /* In its own prefix a tenant's export sits next to the bootstrap "/" (127/8). */
    assert_int_equal(mkexport(t, acme.id, "/acme", "127.0.0.2/32", &ea), 0);
    assert_int_equal(mkexport(t, acme.id, "/acme/sub", "127.0.0.2", &eas), 0); /* same tenant */
    /* Another tenant: the same path, or one below or above it, for overlapping ranges. */
    assert_int_equal(mkexport(t, beta.id, "/acme", "127.0.0.0/24", &other), -EEXIST);
    assert_int_equal(other.id, ea.id);
    assert_int_equal(mkexport(t, beta.id, "//acme//sub/", "127.0.0.2", &other), -EEXIST);
    assert_int_equal(other.id, ea.id); /* the older, shorter one comes first */
    assert_int_equal(mkexport(t, beta.id, "/acme/sub/deeper", "::ffff:127.0.0.0/120", &other),
                     -EEXIST);
    /* Outside any tenant's prefix, below the bootstrap "/" for loopback: refused. */
    assert_int_equal(mkexport(t, beta.id, "/data", "127.0.0.9", &other), -EEXIST);
    assert_int_equal(other.id, 1);
    assert_int_equal(mkexport(t, beta.id, "/ACME", "127.0.0.9", &other), -EEXIST); /* case */
    assert_int_equal(mkexport(t, beta.id, "/x", "::/0", &other), -EEXIST);       /* holds ::1 */
    assert_int_equal(other.id, 1);
    assert_int_equal(mkexport(t, beta.id, "/", "127.0.0.7", &other), -EEXIST);
    /* The same path twice, even of one tenant, for overlapping ranges. */
    assert_int_equal(mkexport(t, 1, "/", "127.0.0.5", &other), -EEXIST);
    assert_int_equal(mkexport(t, acme.id, "/acme", "127.0.0.0/30", &other), -EEXIST);
    /* Disjoint ranges never conflict. */
    assert_int_equal(mkexport(t, beta.id, "/", "10.0.0.0/8", &eb), 0);
    assert_int_equal(mkexport(t, beta.id, "/acme", "127.0.0.3", &eb2), 0);
    assert_int_equal(mkexport(t, acme.id, "/beta", "10.1.0.0/16", &other), -EEXIST);

    /* MNT resolution: the longest prefix among the exports admitting the client. */
    assert_int_equal(served_by(t, "/acme/sub/x", "127.0.0.2", &rest, &foreign), eas.id);
    assert_string_equal(rest, "x");
    assert_false(foreign);
    assert_int_equal(served_by(t, "/acme/y", "127.0.0.2", &rest, NULL), ea.id);
    assert_string_equal(rest, "y");
    assert_int_equal(served_by(t, "/acme", "127.0.0.3", &rest, NULL), eb2.id);
    assert_string_equal(rest, "");
    /* "/" of the bootstrap tenant does not serve acme's prefix to other clients. */
    assert_int_equal(served_by(t, "/acme/y", "127.0.0.7", &rest, &foreign), 1);
    assert_true(foreign);
    assert_string_equal(rest, "acme/y");
    assert_int_equal(served_by(t, "/bucket/y", "127.0.0.7", &rest, &foreign), 1);
    assert_false(foreign);
    assert_int_equal(served_by(t, "/acme", "10.1.2.3", NULL, &foreign), eb.id);
    assert_true(foreign);
    assert_int_equal(served_by(t, "/beta/q", "10.1.2.3", &rest, &foreign), eb.id);
    assert_false(foreign);
    assert_int_equal(served_by(t, "/acme", "192.168.1.1", NULL, NULL), -EACCES);
    assert_int_equal(served_by(t, "/", "::1", NULL, NULL), 1);

    /* Updates are checked as creations; a change of flags alone is not. */
    struct tenant_export upd = eb2;
    snprintf(upd.path, sizeof(upd.path), "/acme/sub");
    assert_int_equal(tenants_export_update(t, &upd, &other), 0); /* 127.0.0.3: disjoint */
    assert_int_equal(tenants_net_parse("127.0.0.0/24", &upd.nets[0]), 0);
    assert_int_equal(tenants_export_update(t, &upd, &other), -EEXIST);
    assert_int_equal(other.id, ea.id);
    snprintf(upd.path, sizeof(upd.path), "/beta");
    assert_int_equal(tenants_export_update(t, &upd, &got), 0);
    assert_string_equal(got.path, "/beta");

    /* Renaming acme would leave its "/acme" exports, and renaming beta its
     * "/beta" one, in nobody's prefix under the bootstrap "/" for loopback. */
    assert_int_equal(tenants_tenant_rename(t, acme.id, "acme2"), -EBUSY);
    assert_int_equal(tenants_tenant_rename(t, beta.id, "gamma"), -EBUSY);
    assert_int_equal(tenants_tenant_find(t, "beta", &beta), 0);
    assert_int_equal(tenants_tenant_rename(t, acme.id, "acme"), 0); /* its own name */
    /* Tenant acme gone: beta's export in its prefix would conflict with "/". */
    struct tenant_export ebx;
    assert_int_equal(tenants_export_delete(t, got.id), 0);
    assert_int_equal(mkexport(t, beta.id, "/acme/b", "127.0.0.4", &ebx), 0);
    assert_int_equal(tenants_tenant_delete(t, acme.id), -EBUSY);
    assert_int_equal(tenants_export_delete(t, ebx.id), 0);
    assert_int_equal(tenants_tenant_delete(t, acme.id), 0);
    tenants_close(t);
}

/* A store written before the rules may hold conflicting exports: at open the
 * newer of each conflicting pair is suspended (not served) until fixed. */
static void test_export_conflicts_at_open(void **state)
{
    struct tenants *t;
    struct tenant_info a, b;
    struct tenant_export ea, e;
    assert_int_equal(tenants_open(&t, FAKE, "AKIAOLD", "old-secret-1", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_create(t, "a", &a), 0);
    assert_int_equal(tenants_tenant_create(t, "b", &b), 0);
    assert_int_equal(mkexport(t, a.id, "/a", "127.0.0.2", &ea), 0);
    tenants_close(t);
    /* What the old code accepted: tenant b at a's path for a's client, id 9. */
    const char *rec = "{\"v\":1,\"id\":9,\"tenant\":3,\"path\":\"/a/\",\"dir\":1003,"
                      "\"flags\":0,\"anon_uid\":65534,\"anon_gid\":65534,"
                      "\"nets\":[\"127.0.0.2/32\"]}";
    uint8_t k[4] = {0, 0, 0, 9};
    assert_int_equal(b.id, 3);
    assert_int_equal(meta_record_put(core_meta(FAKE), META_REC_EXPORTS, k, 4, rec, strlen(rec), 0),
                     0);
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, NULL), 0);
    struct sockaddr_in c = v4("127.0.0.2");
    assert_int_equal(served_by(t, "/a/x", "127.0.0.2", NULL, NULL), ea.id);
    assert_int_equal(tenants_export_get(t, 9, (struct sockaddr *)&c, &e), -EBUSY);
    assert_int_equal(tenants_export_get_admin(t, 9, &e), 0);
    assert_int_equal(e.conflict, ea.id);
    assert_string_equal(e.path, "/a"); /* normalised at load */
    int n = 0;
    assert_int_equal(tenants_export_list(t, (struct sockaddr *)&c, (tenants_export_cb)count_cb,
                                         &n), 0);
    assert_int_equal(n, 2); /* "/" and a's */
    /* A change of flags alone keeps it suspended; deleting the older one serves it. */
    e.flags = TENANT_EXPORT_RO;
    assert_int_equal(tenants_export_update(t, &e, &e), 0);
    assert_int_equal(e.conflict, ea.id);
    assert_int_equal(tenants_export_delete(t, ea.id), 0);
    assert_int_equal(tenants_export_get(t, 9, (struct sockaddr *)&c, &e), 0);
    assert_int_equal(e.conflict, 0);
    assert_int_equal(served_by(t, "/a/x", "127.0.0.2", NULL, NULL), 9);
    tenants_close(t);
}

static void test_keyfile(void **state)
{
    char dir[] = "/tmp/test_tenants.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/master.key", dir);
    struct tenants *t;
    char got[TENANT_SECRET_MAX + 1];
    assert_int_equal(tenants_open_keyfile(&t, FAKE, path, "AKIAKF", "keyfile-secret", NULL, NULL,
                                          NULL), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 32);
    assert_int_equal(st.st_mode & 0777, 0600);
    tenants_close(t);
    assert_int_equal(tenants_open_keyfile(&t, FAKE, path, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(tenants_key_lookup(t, "AKIAKF", got, NULL), 0);
    assert_string_equal(got, "keyfile-secret");
    tenants_close(t);
    /* A different key cannot decrypt: refused, not garbage. */
    unlink(path);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 32; i++)
        fputc(i, f);
    fclose(f);
    assert_int_equal(tenants_open_keyfile(&t, FAKE, path, NULL, NULL, NULL, NULL, NULL),
                     SRV_ECORRUPT);
    /* A missing key file with secrets in the store is refused. */
    unlink(path);
    assert_int_equal(tenants_open_keyfile(&t, FAKE, path, NULL, NULL, NULL, NULL, NULL),
                     SRV_ECORRUPT);
    rmdir(dir);
}

static void test_tamper(void **state)
{
    struct tenants *t;
    assert_int_equal(tenants_open(&t, FAKE, "AKIATAMPER", "tamper-secret", NULL, NULL, NULL), 0);
    tenants_close(t);
    /* Flip one hex digit of the sealed secret. */
    struct row *r = &rows[META_REC_KEYS][0];
    char *s = memmem(r->v, r->vl, "\"secret\":\"", 10);
    assert_non_null(s);
    s += 12;
    *s = *s == 'a' ? 'b' : 'a';
    assert_int_equal(tenants_open(&t, FAKE, NULL, NULL, NULL, NULL, NULL), SRV_ECORRUPT);
}

static char *render(void)
{
    struct evbuffer *b = evbuffer_new();
    srv_metrics_render(b);
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    evbuffer_remove(b, s, n);
    s[n] = '\0';
    evbuffer_free(b);
    return s;
}

/* While open, tenants names the per-bucket operation series and renders the
 * per-bucket usage and quota gauges of every tenant's buckets; after close,
 * neither. */
static void test_metrics(void **state)
{
    (void)state;
    struct tenants *t;
    struct tenant_info a;
    assert_int_equal(tenants_open(&t, FAKE, "AKIABOOT", "boot-secret", NULL, NULL, NULL), 0);
    assert_int_equal(tenants_tenant_create(t, "acme", &a), 0);
    fbuckets[0].tenant = 1;
    fbuckets[0].ino = 500;
    fbuckets[0].name = "boot-data";
    fbuckets[0].u = (struct core_usage){.bytes = 10, .inodes = 2};
    fbuckets[1].tenant = a.id;
    fbuckets[1].ino = 600;
    fbuckets[1].name = "acme-logs";
    fbuckets[1].u = (struct core_usage){.bytes = 1234, .inodes = 7, .bytes_limit = 1 << 20,
                                        .inodes_limit = 99};
    nfbuckets = 2;
    srv_metrics_op_bucket(SRV_PROTO_S3, "PutObject", a.id, 600, 100, 0, 5, 0);
    srv_metrics_op_bucket(SRV_PROTO_NFS, "WRITE", 1, 500, 4096, 0, 5, 0);
    srv_metrics_op_bucket(SRV_PROTO_NFS, "WRITE", 1, 777, 1, 0, 5, 0); /* no such bucket */

    char *s = render();
    char want[256];
    snprintf(want, sizeof(want),
             "s3nfs_bucket_ops_total{proto=\"s3\",op=\"PutObject\",tenant=\"%u\","
             "bucket=\"acme-logs\"} 1\n", a.id);
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "s3nfs_bucket_bytes_in_total{proto=\"nfs\",op=\"WRITE\","
                              "tenant=\"1\",bucket=\"boot-data\"} 4096\n"));
    assert_null(strstr(s, "bucket=\"777\""));
    assert_non_null(strstr(s, "# TYPE s3nfs_bucket_bytes gauge\n"));
    snprintf(want, sizeof(want), "s3nfs_bucket_bytes{tenant=\"%u\",bucket=\"acme-logs\"} 1234\n",
             a.id);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want), "s3nfs_bucket_inodes{tenant=\"%u\",bucket=\"acme-logs\"} 7\n",
             a.id);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_bucket_bytes_limit{tenant=\"%u\",bucket=\"acme-logs\"} 1048576\n", a.id);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof(want),
             "s3nfs_bucket_inodes_limit{tenant=\"%u\",bucket=\"acme-logs\"} 99\n", a.id);
    assert_non_null(strstr(s, want));
    assert_non_null(strstr(s, "s3nfs_bucket_bytes{tenant=\"1\",bucket=\"boot-data\"} 10\n"));
    assert_non_null(strstr(s, "s3nfs_bucket_bytes_limit{tenant=\"1\",bucket=\"boot-data\"} 0\n"));
    free(s);

    /* a deleted bucket: its series and gauges are gone */
    nfbuckets = 1;
    s = render();
    assert_null(strstr(s, "acme-logs"));
    assert_non_null(strstr(s, "bucket=\"boot-data\""));
    free(s);

    tenants_close(t);
    s = render();
    assert_null(strstr(s, "s3nfs_bucket_bytes{"));
    assert_null(strstr(s, "bucket=\"boot-data\""));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_bootstrap_given_keys, setup),
        cmocka_unit_test_setup(test_bootstrap_generated, setup),
        cmocka_unit_test_setup(test_env_key_on_restart, setup),
        cmocka_unit_test_setup(test_crud, setup),
        cmocka_unit_test_setup(test_rename_and_export_update, setup),
        cmocka_unit_test_setup(test_export_rules, setup),
        cmocka_unit_test_setup(test_export_conflicts_at_open, setup),
        cmocka_unit_test_setup(test_keyfile, setup),
        cmocka_unit_test_setup(test_tamper, setup),
        cmocka_unit_test_setup(test_metrics, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
