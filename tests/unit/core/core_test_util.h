/* SPDX-License-Identifier: Apache-2.0
 * core_test_util: a fixture shared by the core's unit tests: a fresh core in
 * a temporary directory with tenant 1, a user principal (uid 1000) and a
 * super principal, and helpers to put and get whole objects. With
 * S3NFS_TEST_META=mem in the environment the core keeps its metadata in
 * meta's in-memory engine instead of LMDB (tests/unit/core/meta_mem.sh runs
 * the core's tests that way).
 * Thread: test main thread. */
#ifndef CORE_TEST_UTIL_H
#define CORE_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core.h"
#include "srv_err.h"

struct fx {
    char dir[64];
    struct core *c;
    struct core_principal p;     /* uid 1000, gid 1000 */
    struct core_principal su;    /* super */
    uint64_t root;
    uint64_t bucket;
};

/* Whether the core's metadata is in memory (S3NFS_TEST_META=mem). */
static inline bool fx_meta_mem(void)
{
    const char *e = getenv("S3NFS_TEST_META");
    return e && strcmp(e, "mem") == 0;
}

static inline struct core_config fx_config(const char *dir)
{
    struct core_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.data_dir = dir;
    cfg.data_file_size = 64ull << 20;
    cfg.data_files = 1;
    cfg.map_size = 256ull << 20;
    cfg.inline_max = 4096;
    cfg.commit_max_batch = 64;
    cfg.meta_mem = fx_meta_mem();
    return cfg;
}

static inline void fx_reopen(struct fx *f)
{
    struct core_config cfg = fx_config(f->dir);
    core_close(f->c);
    f->c = NULL;
    assert_int_equal(core_open(&f->c, &cfg), 0);
}

static inline int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/core-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    struct core_config cfg = fx_config(f->dir);
    if (core_open(&f->c, &cfg) != 0)
        return -1;
    if (core_tenant_create(f->c, 1) != 0)
        return -1;
    if (core_tenant_root(f->c, 1, &f->root) != 0)
        return -1;
    f->p.tenant = 1;
    f->p.user = 7;
    f->p.uid = 1000;
    f->p.gid = 1000;
    f->su = f->p;
    f->su.uid = 0;
    f->su.gid = 0;
    f->su.flags = CORE_P_SUPER;
    struct core_attr a;
    if (core_bucket_create(f->c, &f->p, "bkt", 3, &a) != 0)
        return -1;
    f->bucket = a.ino;
    *state = f;
    return 0;
}

static inline void fx_check_report(void *arg, const char *problem)
{
    (void)arg;
    fprintf(stderr, "store check: %s\n", problem);
}

/* Close the core; reopened, the store must pass the store check (core_check) when
 * @p checked. Remove its directory. */
static inline int fx_close(void **state, bool checked)
{
    struct fx *f = *state;
    char cmd[128];
    core_close(f->c);
    struct core_config cfg = fx_config(f->dir);
    int bad = 0;
    if (checked && !fx_meta_mem()) { /* the in-memory engine keeps nothing across a close */
        bad = core_open(&f->c, &cfg);
        if (bad == 0) {
            bad = core_check(f->c, fx_check_report, NULL);
            core_close(f->c);
        }
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return bad ? -1 : 0;
}

static inline int fx_teardown(void **state)
{
    return fx_close(state, true);
}

/* For a test that leaves the store inconsistent on purpose. */
static inline int fx_teardown_unchecked(void **state)
{
    return fx_close(state, false);
}

/* Put a whole object. @return the core's result. */
static inline int fx_put(struct fx *f, const char *key, const void *data, size_t len)
{
    struct core_upload *u;
    int rc = core_upload_begin(f->c, &f->p, f->bucket, len, &u);
    if (rc)
        return rc;
    rc = core_upload_write(u, data, len);
    if (rc) {
        core_upload_abort(u);
        return rc;
    }
    return core_upload_commit(u, key, strlen(key), "etag", NULL, 0, NULL, false, NULL);
}

/* Read a whole object into a malloc'd buffer (caller frees). */
static inline int fx_get(struct fx *f, const char *key, void **data, size_t *len)
{
    struct core_objinfo oi;
    int rc = core_key_lookup(f->c, &f->p, f->bucket, key, strlen(key), &oi);
    if (rc)
        return rc;
    free(oi.meta);
    *data = malloc(oi.attr.size + 1);
    size_t n = 0;
    bool eof;
    rc = core_read(f->c, &f->p, oi.attr.ino, 0, *data, oi.attr.size, &n, &eof);
    *len = n;
    return rc;
}

static inline void fx_fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *b = buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (uint8_t)x;
    }
}

#endif
