/* SPDX-License-Identifier: Apache-2.0
 * crash_core: crash-consistency test of the namespace core.
 *
 * The parent repeatedly forks a child that opens the core and runs random
 * S3 puts/deletes and NFS writes/truncates through the core API, logging an
 * intent line before each call and an ack line after it returns (to a file:
 * the page cache survives SIGKILL). The parent SIGKILLs the child at a random
 * moment, reopens the core itself and verifies:
 *   - every acknowledged change is there; the one in-flight change is either
 *     fully there or fully absent (each object/file equals the model, or the
 *     model with the pending op applied);
 *   - NFS writes: an acknowledged UNSTABLE write is durable once a COMMIT of
 *     its file (or a stable write or truncate of it, which commit it too) is
 *     acknowledged; before that a crash may lose it, but only in order: the
 *     file equals its durable model with some prefix of the later writes
 *     applied (a flush commits every pending write of the file at once);
 *   - versions (a second, versioned bucket "vcrash"): every acknowledged
 *     version is there with its bytes, every version whose deletion was
 *     acknowledged is gone; NFS writes to its files make versions (sealed by
 *     core_bg_run, an op of its own) and follow the rules above;
 *   - the whole store is consistent (core_check: no two extents overlap, none
 *     overlaps free space, free + used == capacity, shared extents match
 *     their holder counts, usage matches, versions and their inodes agree:
 *     nothing reserved or leaked);
 *   - the data file grows on demand (from 1 MiB in steps of 1 MiB or 1/8, so
 *     crashes hit growths too) and is never shorter than the capacity the map
 *     records.
 * The child is a fresh exec of this program (io_uring rings must not be
 * shared with a forked copy of the parent).
 * Usage: crash_core DIR [SECONDS]   (SECONDS also from CRASH_SECONDS; default 40)
 * Exit 0 on success, 1 on a verification failure (details on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "core_int.h"
#include "meta.h"
#include "meta_int.h"
#include "srv_err.h"
#include "store.h"
#include "store_int.h"

#define NKEYS 8
#define NFILES 6 /* f0..f3 in "crash", g0, g1 (VFILE0 on) in the versioned "vcrash" */
#define VFILE0 4
#define NVKEYS 4
#define VOBJ_MAX (256u << 10)
#define OBJ_MAX (2u << 20)
#define FILE_MAX (3u << 20)
#define WRITE_MAX (1200u * 1024)

static const char *dir;
static char ackpath[512];

struct obj {
    bool exists;
    uint64_t ver;
    uint32_t size;
};

struct fop {
    char op;        /* 'W' or 'T' */
    uint64_t a, b, c;
};

struct nfile {
    uint8_t *data;  /* model bytes, durable */
    uint64_t size;
    struct fop *ops; /* acknowledged UNSTABLE writes since (not yet durable) */
    size_t nops, cap;
};

static struct obj objs[NKEYS];
static struct nfile files[NFILES];

/* The acknowledged versions of key v<k> of "vcrash". */
struct vrec {
    char vid[CORE_VID_MAX + 1];
    uint64_t ver;
    uint32_t size;
    bool gone; /* its deletion was acknowledged */
};
struct vkey {
    struct vrec *v;
    size_t n, cap;
};
static struct vkey vkeys[NVKEYS];

static void gen(uint8_t *b, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)(x >> 24);
    }
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "crash_core: %s: %d (%s)\n", what, rc, srv_strerror(rc));
    exit(1);
}

/* Odd rounds' children write through the page cache (data_write_cache), even
 * ones with O_DIRECT: both data paths get killed at random moments. */
static bool write_cache;

static struct core_config config(void)
{
    struct core_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.data_write_cache = write_cache;
    cfg.data_dir = dir;
    cfg.data_file_size = 128ull << 20;
    cfg.data_file_initial = 1ull << 20;
    cfg.data_files = 1;
    cfg.map_size = 512ull << 20;
    cfg.inline_max = 4096;
    cfg.commit_max_batch = 32;
    return cfg;
}

static struct core_principal principal(void)
{
    struct core_principal p;
    memset(&p, 0, sizeof(p));
    p.tenant = 1;
    p.uid = 1000;
    p.gid = 1000;
    p.flags = CORE_P_VERSIONS; /* as the S3 front end: reads versions by id */
    return p;
}

struct env {
    struct core *c;
    struct core_principal p;
    uint64_t bucket, vbucket;
    uint64_t fino[NFILES];
};

static void env_open(struct env *e)
{
    struct core_config cfg = config();
    struct core_attr a;
    int rc = core_open(&e->c, &cfg);
    if (rc)
        die("core_open", rc);
    e->p = principal();
    rc = core_bucket_lookup(e->c, &e->p, "crash", 5, &a);
    if (rc)
        die("bucket lookup", rc);
    e->bucket = a.ino;
    rc = core_bucket_lookup(e->c, &e->p, "vcrash", 6, &a);
    if (rc)
        die("bucket lookup", rc);
    e->vbucket = a.ino;
    for (int i = 0; i < NFILES; i++) {
        char name[8];
        snprintf(name, sizeof(name), i < VFILE0 ? "f%d" : "g%d", i - (i < VFILE0 ? 0 : VFILE0));
        rc = core_lookup(e->c, &e->p, i < VFILE0 ? e->bucket : e->vbucket, name, strlen(name), &a);
        if (rc)
            die("file lookup", rc);
        e->fino[i] = a.ino;
    }
}

/* ---- child ---- */

static void logline(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A whole-object PUT of @p key (@p vid, when not NULL, gets its version id). */
static void put(struct env *e, uint64_t bucket, const char *key, const uint8_t *buf, uint32_t size,
                char *vid)
{
    struct core_putopt po = {NULL, vid};
    struct core_upload *u;
    int rc = core_upload_begin(e->c, &e->p, bucket, size, &u);
    if (rc == 0) {
        core_upload_set_opt(u, &po);
        rc = core_upload_write(u, buf, size);
    }
    if (rc == 0)
        rc = core_upload_commit(u, key, strlen(key), "etag", NULL, 0, NULL, false, NULL);
    else
        core_upload_abort(u);
    if (rc)
        die("put", rc);
}

struct pick {
    char vid[CORE_VID_MAX + 1];
    int n;     /* data versions it may delete */
    int total; /* versions */
};

static int pick_ent(void *arg, const struct core_listent *le)
{
    struct pick *pk = arg;
    if (le->is_prefix)
        return 0;
    pk->total++;
    /* g<i>'s current version is an NFS file the model follows: only older ones go */
    if (le->info->dmarker || (le->key[0] == 'g' && le->info->latest))
        return 0;
    if (rand() % ++pk->n == 0)
        snprintf(pk->vid, sizeof(pk->vid), "%s", le->info->vid);
    return 0;
}

#define VKEEP 8 /* versions a key keeps at most (the store is 128 MiB) */

static void key_of(int k, char *key, size_t size)
{
    snprintf(key, size, k < NVKEYS ? "v%d" : "g%d", k < NVKEYS ? k : k - NVKEYS);
}

/* A version of key number @p k (v<k>, then g<k - NVKEYS>) to delete, and how many it has. */
static void pick(struct env *e, int k, struct pick *pk)
{
    char key[16];
    bool trunc;
    key_of(k, key, sizeof(key));
    memset(pk, 0, sizeof(*pk));
    int rc = core_list_versions(e->c, &e->p, e->vbucket, key, strlen(key), NULL, 0, NULL, NULL, 0,
                                64, pick_ent, pk, &trunc);
    if (rc)
        die("list versions", rc);
}

/* One op on the versioned bucket, logged (intent, then ack) unless skipped: PUTs and
 * delete markers of v<k>, deletions of one version of v<k> or g<k>, worker passes
 * (sealing the versions NFS writes to g<k> opened). A key with VKEEP versions loses
 * one instead of getting one more. */
static void vchild_op(struct env *e, int fd, int op, uint64_t ver, uint8_t *buf)
{
    int k = op == 18 || (op >= 15 && rand() % 2) ? NVKEYS + rand() % 2 : rand() % NVKEYS, rc;
    char key[16];
    struct pick pk;
    key_of(k, key, sizeof(key));
    pick(e, k, &pk);
    if (op < 15 && pk.total >= VKEEP)
        op = 15;
    if (op == 18 && pk.total < VKEEP) {
        logline(fd, "I s 0\n");
        rc = core_bg_run(e->c, true, NULL);
        if (rc)
            die("bg run", rc);
    } else if (op >= 15) {
        if (!pk.n)
            return;
        logline(fd, "I x %d %s\n", k, pk.vid);
        rc = core_key_delete_v(e->c, &e->p, e->vbucket, key, strlen(key), pk.vid, 0, NULL);
        if (rc) /* flat keys: never SRV_ECLASH */
            die("version delete", rc);
    } else if (op == 14) {
        logline(fd, "I d %d\n", k);
        rc = core_key_delete_v(e->c, &e->p, e->vbucket, key, strlen(key), NULL, 0, NULL);
        if (rc)
            die("versioned delete", rc);
    } else {
        /* a PUT: a new version; its id comes with the ack */
        char vid[CORE_VID_MAX + 1];
        uint32_t size = (uint32_t)(rand() % (int)VOBJ_MAX);
        gen(buf, size, ver);
        logline(fd, "I p %d %llu %u\n", k, (unsigned long long)ver, size);
        put(e, e->vbucket, key, buf, size, vid);
        logline(fd, "A %s\n", vid);
        return;
    }
    logline(fd, "A\n");
}

static void logline(int fd, const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (write(fd, line, (size_t)n) != n)
        _exit(3);
}

static void child(uint64_t round)
{
    write_cache = round % 2 == 1;
    struct env e;
    uint8_t *buf = malloc(OBJ_MAX > WRITE_MAX ? OBJ_MAX : WRITE_MAX);
    int fd = open(ackpath, O_WRONLY | O_APPEND);
    if (fd < 0)
        _exit(2);
    env_open(&e);
    srand((unsigned)(round * 7919 + (uint64_t)getpid()));
    for (uint64_t n = 0;; n++) {
        uint64_t ver = round * 1000000 + n + 1;
        int op = rand() % 19;
        int rc;
        if (op >= 12) {
            vchild_op(&e, fd, op, ver, buf); /* acks itself */
            continue;
        }
        if (op < 4) {
            int k = rand() % NKEYS;
            uint32_t size = (uint32_t)(rand() % 4 == 0 ? rand() % 4096 : rand() % (int)OBJ_MAX);
            char key[32];
            snprintf(key, sizeof(key), "d%d/k%d", k % 3, k);
            gen(buf, size, ver);
            logline(fd, "I P %d %llu %u\n", k, (unsigned long long)ver, size);
            put(&e, e.bucket, key, buf, size, NULL);
        } else if (op < 5) {
            int k = rand() % NKEYS;
            char key[32];
            snprintf(key, sizeof(key), "d%d/k%d", k % 3, k);
            logline(fd, "I D %d\n", k);
            rc = core_key_delete(e.c, &e.p, e.bucket, key, strlen(key));
            if (rc)
                die("delete", rc);
        } else if (op == 10) {
            /* NFS rename of one object's key over another's (replacing it) */
            int k1 = rand() % NKEYS, k2 = rand() % NKEYS;
            char key1[32], d1[8], d2[8], n1[8], n2[8];
            struct core_objinfo oi;
            struct core_attr da, db;
            snprintf(key1, sizeof(key1), "d%d/k%d", k1 % 3, k1);
            snprintf(d1, sizeof(d1), "d%d", k1 % 3);
            snprintf(d2, sizeof(d2), "d%d", k2 % 3);
            snprintf(n1, sizeof(n1), "k%d", k1);
            snprintf(n2, sizeof(n2), "k%d", k2);
            if (k1 == k2 || core_key_lookup(e.c, &e.p, e.bucket, key1, strlen(key1), &oi) != 0)
                continue;
            free(oi.meta);
            if (core_lookup(e.c, &e.p, e.bucket, d1, strlen(d1), &da) != 0 ||
                core_lookup(e.c, &e.p, e.bucket, d2, strlen(d2), &db) != 0)
                continue;
            logline(fd, "I R %d %d\n", k1, k2);
            rc = core_rename(e.c, &e.p, da.ino, n1, strlen(n1), db.ino, n2, strlen(n2));
            if (rc)
                die("rename", rc);
        } else if (op == 11) {
            int f = rand() % NFILES;
            logline(fd, "I C %d\n", f);
            rc = core_commit(e.c, &e.p, e.fino[f]);
            if (rc)
                die("commit", rc);
        } else if (op < 9) {
            int f = rand() % NFILES;
            uint32_t len = (uint32_t)(rand() % 3 == 0 ? rand() % 8192 + 1
                                                      : rand() % (int)WRITE_MAX + 1);
            uint64_t off = (uint64_t)rand() % (FILE_MAX - len);
            int st = rand() % 3;
            gen(buf, len, ver);
            logline(fd, "I W %d %llu %u %llu %d\n", f, (unsigned long long)off, len,
                    (unsigned long long)ver, st);
            rc = core_write(e.c, &e.p, e.fino[f], off, buf, len, (enum core_stable)st, NULL, NULL,
                            NULL);
            if (rc)
                die("write", rc);
        } else {
            int f = rand() % NFILES;
            uint64_t size = (uint64_t)rand() % FILE_MAX;
            struct core_setattr sa;
            memset(&sa, 0, sizeof(sa));
            sa.mask = CORE_SET_SIZE;
            sa.size = size;
            logline(fd, "I T %d %llu\n", f, (unsigned long long)size);
            rc = core_setattr(e.c, &e.p, e.fino[f], &sa, NULL, NULL);
            if (rc)
                die("truncate", rc);
        }
        logline(fd, "A\n");
    }
}

/* ---- parent: model ---- */

struct pending {
    char op;
    int idx;
    uint64_t a, b, c, d;
    char vid[CORE_VID_MAX + 1]; /* 'x' */
};

static struct vrec *vrec_find(int k, const char *vid)
{
    for (size_t i = 0; i < vkeys[k].n; i++)
        if (strcmp(vkeys[k].v[i].vid, vid) == 0)
            return &vkeys[k].v[i];
    return NULL;
}

/* The ack (line @p ack) of a versioned op. */
static void vapply(const struct pending *pd, const char *ack)
{
    struct vkey *vk = &vkeys[pd->idx % NVKEYS];
    if (pd->op == 'p') {
        struct vrec r = {.ver = pd->a, .size = (uint32_t)pd->b};
        if (sscanf(ack, "A %32s", r.vid) != 1) {
            fprintf(stderr, "crash_core: a PUT acknowledged without a version id\n");
            exit(1);
        }
        if (vk->n == vk->cap) {
            vk->cap = vk->cap ? vk->cap * 2 : 16;
            vk->v = realloc(vk->v, vk->cap * sizeof(*vk->v));
        }
        vk->v[vk->n++] = r;
    } else if (pd->op == 'x') {
        struct vrec *r = pd->idx < NVKEYS ? vrec_find(pd->idx, pd->vid) : NULL;
        if (r) /* else made by an op that crashed before its ack */
            r->gone = true;
    }
}

static void apply(const struct pending *pd, struct obj *o, struct nfile *f)
{
    switch (pd->op) {
    case 'P':
        o->exists = true;
        o->ver = pd->a;
        o->size = (uint32_t)pd->b;
        break;
    case 'D':
        o->exists = false;
        break;
    case 'R':
        /* o is the source; the target is objs[a] (applied by the caller) */
        break;
    case 'W': {
        uint64_t end = pd->a + pd->b;
        if (end > f->size)
            f->size = end;
        gen(f->data + pd->a, pd->b, pd->c);
        break;
    }
    case 'T':
        if (pd->a < f->size)
            memset(f->data + pd->a, 0, f->size - pd->a);
        f->size = pd->a;
        break;
    }
}

static void fop_apply(const struct fop *o, struct nfile *f)
{
    struct pending pd = {.op = o->op, .a = o->a, .b = o->b, .c = o->c};
    apply(&pd, NULL, f);
}

/* An acknowledged file op: UNSTABLE writes wait; anything else makes the
 * file's earlier writes durable with it. */
static void file_ack(struct nfile *f, const struct pending *pd)
{
    if (pd->op == 'W' && pd->d == CORE_UNSTABLE) {
        if (f->nops == f->cap) {
            f->cap = f->cap ? f->cap * 2 : 16;
            f->ops = realloc(f->ops, f->cap * sizeof(*f->ops));
        }
        f->ops[f->nops++] = (struct fop){'W', pd->a, pd->b, pd->c};
        return;
    }
    for (size_t i = 0; i < f->nops; i++)
        fop_apply(&f->ops[i], f);
    f->nops = 0;
    if (pd->op != 'C')
        apply(pd, NULL, f);
}

static bool obj_matches(struct env *e, int k, const struct obj *o, uint8_t *tmp)
{
    char key[32];
    struct core_objinfo oi;
    snprintf(key, sizeof(key), "d%d/k%d", k % 3, k);
    int rc = core_key_lookup(e->c, &e->p, e->bucket, key, strlen(key), &oi);
    if (!o->exists)
        return rc == -ENOENT;
    if (rc)
        return false;
    free(oi.meta);
    if (oi.attr.size != o->size)
        return false;
    uint8_t *got = malloc(o->size + 1);
    size_t n;
    bool eof;
    rc = core_read(e->c, &e->p, oi.attr.ino, 0, got, o->size, &n, &eof);
    gen(tmp, o->size, o->ver);
    bool ok = rc == 0 && n == o->size && memcmp(got, tmp, o->size) == 0;
    free(got);
    return ok;
}

static bool file_matches(struct env *e, int i, const struct nfile *f, uint8_t *got)
{
    struct core_attr a;
    size_t n;
    bool eof;
    if (core_getattr(e->c, &e->p, e->fino[i], 0, &a) != 0 || a.size != f->size)
        return false;
    int rc = core_read(e->c, &e->p, e->fino[i], 0, got, f->size, &n, &eof);
    return rc == 0 && n == f->size && memcmp(got, f->data, f->size) == 0;
}

static void check_report(void *arg, const char *problem)
{
    (void)arg;
    fprintf(stderr, "crash_core: store check: %s\n", problem);
}

/* The versions of "vcrash": acknowledged ones there with their bytes, acknowledged
 * deletions done (the op in flight either way). */
static int vverify(struct env *e, const struct pending *pd, bool pending, uint8_t *tmp)
{
    int bad = 0;
    for (int k = 0; k < NVKEYS; k++) {
        char key[16];
        snprintf(key, sizeof(key), "v%d", k);
        for (size_t i = 0; i < vkeys[k].n; i++) {
            struct vrec *r = &vkeys[k].v[i];
            struct core_objinfo oi;
            int rc = core_version_lookup(e->c, &e->p, e->vbucket, key, strlen(key), r->vid, &oi);
            if (pending && pd->op == 'x' && pd->idx == k && strcmp(pd->vid, r->vid) == 0) {
                if (rc == SRV_ENOVERSION || rc == -ENOENT) {
                    r->gone = true;
                    continue;
                }
            }
            if (r->gone) {
                if (rc == 0)
                    free(oi.meta);
                if (rc != SRV_ENOVERSION && rc != -ENOENT) {
                    fprintf(stderr, "crash_core: deleted version %s of %s is back (%d)\n", r->vid,
                            key, rc);
                    bad++;
                }
                continue;
            }
            if (rc) {
                fprintf(stderr, "crash_core: version %s of %s lost (%d)\n", r->vid, key, rc);
                bad++;
                continue;
            }
            free(oi.meta);
            size_t n = 0;
            bool eof;
            uint8_t *got = malloc(r->size + 1);
            if (!oi.dmarker && oi.attr.size == r->size)
                rc = core_read(e->c, &e->p, oi.attr.ino, 0, got, r->size, &n, &eof);
            gen(tmp, r->size, r->ver);
            if (oi.dmarker || oi.attr.size != r->size || rc || n != r->size ||
                memcmp(got, tmp, r->size) != 0) {
                fprintf(stderr, "crash_core: version %s of %s wrong (size %llu of %u)\n", r->vid,
                        key, (unsigned long long)oi.attr.size, r->size);
                bad++;
            }
            free(got);
        }
    }
    return bad;
}

/* Read the child's log: apply acked ops; return the pending (unacked) op if any. */
static bool read_log(long *pos, struct pending *pd)
{
    FILE *fp = fopen(ackpath, "r");
    char line[160];
    bool have = false;
    if (!fp)
        return false;
    fseek(fp, *pos, SEEK_SET);
    while (fgets(line, sizeof(line), fp)) {
        size_t l = strlen(line);
        if (l == 0 || line[l - 1] != '\n')
            break; /* torn last line: the op never started */
        *pos = ftell(fp);
        if (line[0] == 'A') {
            if (have && pd->op == 'R') {
                objs[pd->a % NKEYS] = objs[pd->idx % NKEYS];
                objs[pd->idx % NKEYS].exists = false;
            } else if (have && strchr("pdxs", pd->op)) {
                vapply(pd, line);
            } else if (have && (pd->op == 'W' || pd->op == 'T' || pd->op == 'C')) {
                file_ack(&files[pd->idx % NFILES], pd);
            } else if (have) {
                apply(pd, &objs[pd->idx % NKEYS], &files[pd->idx % NFILES]);
            }
            have = false;
            continue;
        }
        unsigned long long a = 0, b = 0, c2 = 0, d = 0;
        memset(pd, 0, sizeof(*pd));
        if (sscanf(line, "I %c %d %llu %llu %llu %llu", &pd->op, &pd->idx, &a, &b, &c2, &d) < 2)
            continue;
        if (pd->op == 'x' && sscanf(line, "I x %d %32s", &pd->idx, pd->vid) != 2)
            continue;
        pd->a = a;
        pd->b = b;
        pd->c = c2;
        pd->d = d;
        have = true;
    }
    fclose(fp);
    return have;
}

static int verify(struct pending *pd, bool pending, uint8_t *tmp)
{
    struct env e;
    int bad = 0;
    env_open(&e);
    if (pending && pd->op == 'R') {
        /* all or nothing: either both keys as before, or the move done */
        int k1 = pd->idx % NKEYS, k2 = (int)(pd->a % NKEYS);
        struct obj moved1 = objs[k1], moved2 = objs[k1];
        moved1.exists = false;
        if (obj_matches(&e, k1, &moved1, tmp) && obj_matches(&e, k2, &moved2, tmp)) {
            objs[k2] = moved2;
            objs[k1] = moved1;
        }
    }
    for (int k = 0; k < NKEYS; k++) {
        if (obj_matches(&e, k, &objs[k], tmp))
            continue;
        if (pending && (pd->op == 'P' || pd->op == 'D') && pd->idx == k) {
            struct obj alt = objs[k];
            apply(pd, &alt, NULL);
            if (obj_matches(&e, k, &alt, tmp)) {
                objs[k] = alt;
                continue;
            }
        }
        fprintf(stderr, "crash_core: object k%d lost or wrong (pending=%d op=%c)\n", k,
                pending, pending ? pd->op : '-');
        bad++;
    }
    for (int i = 0; i < NFILES; i++) {
        /* the durable model, then each later acknowledged UNSTABLE write, then
         * the op in flight: the file must be one of these states */
        struct nfile alt = {malloc(FILE_MAX + WRITE_MAX), files[i].size, NULL, 0, 0};
        memcpy(alt.data, files[i].data, FILE_MAX + WRITE_MAX);
        bool ok = file_matches(&e, i, &alt, tmp);
        for (size_t j = 0; !ok && j < files[i].nops; j++) {
            fop_apply(&files[i].ops[j], &alt);
            ok = file_matches(&e, i, &alt, tmp);
        }
        if (!ok && pending && (pd->op == 'W' || pd->op == 'T') && pd->idx == i) {
            apply(pd, NULL, &alt);
            ok = file_matches(&e, i, &alt, tmp);
        }
        if (ok) {
            /* after the restart nothing is pending: that state is durable */
            free(files[i].data);
            files[i].data = alt.data;
            files[i].size = alt.size;
            files[i].nops = 0;
            continue;
        }
        free(alt.data);
        fprintf(stderr, "crash_core: file f%d lost or wrong (pending=%d op=%c, %zu unstable)\n",
                i, pending, pending ? pd->op : '-', files[i].nops);
        bad++;
    }
    bad += vverify(&e, pd, pending, tmp);
    /* the data file grows on demand, never shorter than the capacity recorded */
    struct store_stats ss;
    char path[600];
    struct stat st;
    store_stats_get(e.c->store, &ss);
    snprintf(path, sizeof(path), "%s/data.000", dir);
    if (stat(path, &st) != 0 || (uint64_t)st.st_size < ss.capacity) {
        fprintf(stderr, "crash_core: data file is %lld bytes, capacity %llu\n",
                (long long)st.st_size, (unsigned long long)ss.capacity);
        bad++;
    }
    int rc = core_check(e.c, check_report, NULL);
    if (rc) {
        fprintf(stderr, "crash_core: store check: %d\n", rc);
        bad++;
    }
    core_close(e.c);
    return bad;
}

static void setup_store(void)
{
    struct core_config cfg = config();
    struct core *c;
    struct core_principal p = principal();
    struct core_attr a;
    int rc = core_open(&c, &cfg);
    if (rc)
        die("core_open (setup)", rc);
    if ((rc = core_tenant_create(c, 1)) != 0)
        die("tenant", rc);
    if ((rc = core_bucket_create(c, &p, "crash", 5, &a)) != 0)
        die("bucket", rc);
    struct core_attr va;
    if ((rc = core_bucket_create(c, &p, "vcrash", 6, &va)) != 0)
        die("bucket", rc);
    if ((rc = core_bucket_versioning_set(c, &p, va.ino, CORE_VERS_ENABLED)) != 0)
        die("versioning", rc);
    for (int i = 0; i < NFILES; i++) {
        char name[8];
        struct core_attr fa;
        snprintf(name, sizeof(name), i < VFILE0 ? "f%d" : "g%d", i - (i < VFILE0 ? 0 : VFILE0));
        if ((rc = core_create(c, &p, i < VFILE0 ? a.ino : va.ino, name, strlen(name), 0644,
                              CORE_CREATE_GUARDED, 0, &fa)) != 0)
            die("create", rc);
    }
    core_close(c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: crash_core DIR [SECONDS]\n");
        return 2;
    }
    dir = argv[1];
    store__grow_min = 1ull << 20; /* many small growths for the crashes to hit */
    snprintf(ackpath, sizeof(ackpath), "%s/acks.log", dir);
    if (argc > 3 && strcmp(argv[2], "--child") == 0)
        child(strtoull(argv[3], NULL, 10));
    int seconds = argc > 2 ? atoi(argv[2]) : 0;
    if (!seconds && getenv("CRASH_SECONDS"))
        seconds = atoi(getenv("CRASH_SECONDS"));
    if (seconds <= 0)
        seconds = 40;
    setup_store();
    int fd = open(ackpath, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0)
        die("ack file", -errno);
    close(fd);
    for (int i = 0; i < NFILES; i++)
        files[i].data = calloc(1, FILE_MAX + WRITE_MAX);
    uint8_t *tmp = malloc(FILE_MAX + WRITE_MAX);
    time_t end = time(NULL) + seconds;
    long pos = 0;
    unsigned rounds = 0, pendings = 0;
    srand((unsigned)time(NULL));
    while (time(NULL) < end) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork", -errno);
        if (pid == 0) {
            char rs[24];
            snprintf(rs, sizeof(rs), "%u", rounds + 1);
            execl("/proc/self/exe", argv[0], dir, "--child", rs, (char *)NULL);
            _exit(4);
        }
        struct timespec ts = {0, (long)(50 + rand() % 900) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        if (WIFEXITED(st)) {
            fprintf(stderr, "crash_core: child exited %d before the kill\n", WEXITSTATUS(st));
            return 1;
        }
        struct pending pd;
        bool pending = read_log(&pos, &pd);
        pendings += pending;
        if (verify(&pd, pending, tmp) != 0) {
            fprintf(stderr, "crash_core: FAILED after round %u\n", rounds + 1);
            return 1;
        }
        rounds++;
    }
    printf("crash_core: %u kill/verify rounds passed (%u with an op in flight)\n", rounds,
           pendings);
    for (int i = 0; i < NFILES; i++) {
        free(files[i].data);
        free(files[i].ops);
    }
    for (int k = 0; k < NVKEYS; k++)
        free(vkeys[k].v);
    free(tmp);
    return 0;
}
