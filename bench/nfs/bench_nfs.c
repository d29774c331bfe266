/* SPDX-License-Identifier: Apache-2.0
 * bench_nfs: an NFSv3 load generator on libnfs's raw async RPC API.
 *
 * One TCP connection, one thread, a chosen number of operations in flight
 * (like a kernel client with a deep slot table, or an application doing one
 * thing at a time). It mounts an export, makes a fresh work directory in its
 * root and runs every phase at every depth of --depths (default 1,16), each
 * row named <phase>_qd<depth>:
 *   seq_write        a --size-mib file as 1 MiB UNSTABLE WRITEs, then COMMIT,
 *                    timed to the COMMIT reply (MB/s)
 *   seq_read_first   the first read of that file, right after the COMMIT (MB/s)
 *   seq_read         the next read of it: warm on both servers (MB/s)
 *   read_4k          4 KiB READs at random aligned offsets of the warm file,
 *                    for --secs (ops/s); the file is then removed
 *   getattr, lookup, access   of one file, for --secs (ops/s)
 *   create_empty     CREATE (GUARDED) of new names, for --secs (files/s)
 *   create_4k        CREATE (GUARDED) + 4 KiB UNSTABLE WRITE + COMMIT per file
 *                    (COMMIT sent, as clients do, only when the WRITE answered
 *                    UNSTABLE), for --secs (files/s)
 *   readdir, readdirplus   whole walks of a directory of --dir-entries files
 *                    (made first, not timed), 64 KiB per call, each walk one
 *                    operation, for --secs and at least 3 walks (entries/s)
 * At depth 1 every row also gets <row>_p50 and <row>_p99: the latency of one
 * operation in microseconds (one call; a CREATE chain or a directory walk as a
 * whole), from every operation of the phase. With --server-pid every row gets
 * <row>_cpu: the server's CPU time (user + system, all threads, /proc/PID/stat)
 * per operation, per MiB or per walk.
 *
 * --populate N gives the server a history instead: N files of 4 KiB (CREATE +
 * WRITE + COMMIT, 64 in flight; with --hist-empty N empty files, CREATE only,
 * which makes a store of a million files cheap) in directories of 1000 under
 * "hist", then
 * --mix-secs of mixed load on them at 16 in flight (GETATTR, LOOKUP, 4 KiB
 * READ, 4 KiB FILE_SYNC overwrite, READDIRPLUS of a directory's first 8 KiB,
 * and REMOVE + CREATE + WRITE + COMMIT replacing a file), then a --size-mib
 * file written (16 in flight) and removed, leaving freed space with cached
 * pages; reported as the rows hist_populate (files/s), hist_mix (ops/s) and
 * hist_churn_write (MB/s).
 *
 * Each result is one line "RESULT <name> <value> <unit>" on stdout, so
 * bench/nfs/run.sh can put two servers side by side. Any NFS error, short
 * transfer or wrong data read back aborts the run with a message naming the
 * procedure; results are never printed for a phase that failed.
 * Usage: bench_nfs --host H --nfs-port P --mount-port P --export PATH [options] */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

#include "../bench_util.h"

#define MIB (1024u * 1024u)
#define MAX_QD 256
#define MAX_DEPTHS 4
#define HIST_DIR_FILES 1000
#define SMALL 4096u
#define HIST_BUSY 1u /* a history file with an operation in flight */
#define HIST_FULL 2u /* a history file that holds SMALL bytes (else it is empty) */

struct opts {
    const char *host;
    int nfs_port, mount_port;
    const char *export_path;
    uint64_t size;      /* bytes of the sequential file */
    uint32_t chunk;     /* bytes per READ/WRITE (capped by FSINFO) */
    int depths[MAX_DEPTHS];
    int ndepths;
    double secs;        /* duration of the rate phases */
    int files;          /* most files per create phase */
    int dir_entries;    /* entries of the READDIR(PLUS) directory */
    uint32_t rdp_max;   /* READDIR(PLUS) dircount/maxcount */
    const char *only;   /* comma list of phases to run, NULL = all */
    int uid, gid;
    int server_pid;     /* nonzero: also report the server's CPU per operation */
    int populate;       /* nonzero: build a history of this many files instead */
    bool hist_empty;    /* the history's files are empty (CREATE only) */
    double mix_secs;
    unsigned seed;
};

/* A file handle we own (results' handles are freed after their callback). */
struct fh {
    uint32_t len;
    char val[NFS3_FHSIZE];
};

struct bench;

/* One operation in flight: a call, or a chain of calls (create, walk). */
struct slot {
    struct bench *b;
    const char *what; /* procedure in flight, for error messages */
    double t0;        /* start of the current operation */
    int step;
    uint64_t off;
    struct fh fh;
    uint64_t cookie;
    char verf[NFS3_COOKIEVERFSIZE];
    int entries;
    int kind;         /* mixed load: which operation */
    int64_t idx;      /* mixed load / populate: the file's index */
    char name[48];
};

struct phase {
    const char *name;
    const char *unit;     /* of the rate: MB/s, ops/s, files/s, entries/s */
    const char *cpu_unit; /* us/MiB, us/op, us/file, us/walk */
    bool timed;           /* stop starting operations after --secs */
    /* Start an operation on @p s. @return 1 sent, 0 nothing left to do, -1 failed. */
    int (*start)(struct bench *b, struct slot *s);
    /* A reply for @p s. @return 1 the operation goes on (a call was sent), 0 done, -1 failed. */
    int (*reply)(struct bench *b, struct slot *s, void *res);
};

struct lat {
    float *v;
    size_t n, cap;
};

struct bench {
    struct opts o;
    struct rpc_context *rpc;
    struct fh root, dir, file, meta, cdir, rdir;
    bool failed;
    int inflight;
    /* the phase running */
    const struct phase *ph;
    double t_end;
    int active;          /* slots with an operation going on */
    uint64_t ops;        /* operations completed */
    uint64_t units;      /* bytes or entries moved */
    uint64_t next_off;   /* sequential phases: next offset to send */
    uint64_t limit;      /* most operations to start (0: none) */
    uint64_t started;
    struct lat lat;
    char *buf;           /* write payload (chunk bytes of a known pattern) */
    int cseq;            /* create phases: next name */
    /* history */
    struct fh *hfh;      /* the populated files' handles */
    struct fh *hdir;     /* their directories */
    unsigned char *hbusy; /* per file: HIST_BUSY, HIST_FULL */
    int64_t hcount;
};

/* ---- small helpers ---- */

/* CPU microseconds used so far by process @p pid (all threads), or -1. */
static double cpu_us(int pid)
{
    if (pid <= 0)
        return -1;
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = 0;
    /* Fields after the command name, which may hold spaces: state is field 3,
     * utime and stime are fields 14 and 15. */
    char *p = strrchr(line, ')');
    if (!p)
        return -1;
    unsigned long long ut = 0, st = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

static void fh_set(struct fh *dst, const nfs_fh3 *src)
{
    dst->len = src->data.data_len > NFS3_FHSIZE ? NFS3_FHSIZE : src->data.data_len;
    memcpy(dst->val, src->data.data_val, dst->len);
}

static nfs_fh3 fh_arg(struct fh *f)
{
    nfs_fh3 r;
    r.data.data_len = f->len;
    r.data.data_val = f->val;
    return r;
}

static void fail(struct bench *b, const char *what, const char *detail)
{
    if (!b->failed)
        fprintf(stderr, "bench_nfs: %s failed: %s\n", what, detail ? detail : "");
    b->failed = true;
}

/* Every NFSv3 result (GETATTR3res, WRITE3res, ...) starts with its nfsstat3. */
_Static_assert(offsetof(WRITE3res, status) == 0 && offsetof(READDIRPLUS3res, status) == 0,
               "an NFSv3 result starts with its status");

/* Did the call succeed with NFS3_OK? If not, @p what failed (the RPC error
 * text in @p data, or the nfsstat3 of the result @p data points to). */
static bool reply_ok(struct bench *b, const char *what, int status, void *data)
{
    if (status != RPC_STATUS_SUCCESS) {
        char msg[256];
        snprintf(msg, sizeof(msg), "rpc error %s", data ? (const char *)data : "");
        fail(b, what, msg);
        return false;
    }
    nfsstat3 st = *(const nfsstat3 *)data;
    if (st != NFS3_OK) {
        char msg[64];
        snprintf(msg, sizeof(msg), "nfsstat3 %d", st);
        fail(b, what, msg);
        return false;
    }
    return true;
}

/* Copy the new object's handle of a CREATE or MKDIR reply into @p out. */
static bool take_handle(struct bench *b, const char *what, post_op_fh3 *obj, struct fh *out)
{
    if (!obj->handle_follows) {
        fail(b, what, "no handle in reply");
        return false;
    }
    fh_set(out, &obj->post_op_fh3_u.handle);
    return true;
}

/* Count a call just queued; @p rc is what its rpc_nfs3_*_async returned. */
static bool sent(struct bench *b, const char *what, int rc)
{
    if (rc != 0) {
        fail(b, what, rpc_get_error(b->rpc));
        return false;
    }
    b->inflight++;
    return true;
}

/* One round of the event loop (waits up to 1 s). @return 0, -1 (poll or RPC error). */
static int pump(struct bench *b)
{
    struct pollfd pfd = { .fd = rpc_get_fd(b->rpc), .events = rpc_which_events(b->rpc) };
    if (poll(&pfd, 1, 1000) < 0) {
        if (errno == EINTR)
            return 0;
        perror("poll");
        return -1;
    }
    if (rpc_service(b->rpc, pfd.revents) < 0) {
        fprintf(stderr, "bench_nfs: rpc_service: %s\n", rpc_get_error(b->rpc));
        return -1;
    }
    return 0;
}

/* Run the event loop until *flag becomes nonzero or a call fails. */
static int loop_until(struct bench *b, int *flag)
{
    while (!*flag && !b->failed)
        if (pump(b) < 0)
            return -1;
    return b->failed ? -1 : 0;
}

static void lat_add(struct lat *l, double us)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 65536;
        float *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return; /* keep what we have: percentiles of a prefix */
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (float)us;
}

static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, c = *(const float *)y;
    return a < c ? -1 : a > c;
}

static double lat_pct(struct lat *l, double p)
{
    if (!l->n)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)(l->n - 1) + 0.5);
    return l->v[i];
}

/* The chunk's pattern byte at file offset @p off (every chunk holds the same bytes). */
static bool data_ok(struct bench *b, uint64_t off, const char *p, uint32_t n)
{
    uint32_t in = (uint32_t)(off % b->o.chunk);
    if (in + n <= b->o.chunk)
        return memcmp(p, b->buf + in, n) == 0;
    uint32_t first = b->o.chunk - in;
    return memcmp(p, b->buf + in, first) == 0 && memcmp(p + first, b->buf, n - first) == 0;
}

/* ---- connect and mount ---- */

struct sync_ctx {
    struct bench *b;
    int done;
    struct fh fh;
    uint32_t rtmax, wtmax;
};

static void connect_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    if (status != RPC_STATUS_SUCCESS)
        fail(s->b, "connect", data);
    s->done = 1;
}

static void mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    mountres3 *res = data;
    s->done = 1;
    if (status != RPC_STATUS_SUCCESS) {
        fail(s->b, "MOUNT", data);
        return;
    }
    if (res->fhs_status != MNT3_OK) {
        char msg[32];
        snprintf(msg, sizeof(msg), "mountstat3 %d", res->fhs_status);
        fail(s->b, "MOUNT", msg);
        return;
    }
    fhandle3 *h = &res->mountres3_u.mountinfo.fhandle;
    s->fh.len = h->fhandle3_len > NFS3_FHSIZE ? NFS3_FHSIZE : h->fhandle3_len;
    memcpy(s->fh.val, h->fhandle3_val, s->fh.len);
}

static struct rpc_context *rpc_open(struct bench *b, int port)
{
    struct rpc_context *rpc = rpc_init_context();
    if (!rpc)
        return NULL;
    rpc_set_uid(rpc, b->o.uid);
    rpc_set_gid(rpc, b->o.gid);
    struct sync_ctx s = { .b = b };
    struct rpc_context *saved = b->rpc;
    b->rpc = rpc;
    if (rpc_connect_async(rpc, b->o.host, port, connect_cb, &s) != 0 || loop_until(b, &s.done)) {
        fprintf(stderr, "bench_nfs: cannot connect to %s:%d: %s\n", b->o.host, port,
                rpc_get_error(rpc));
        rpc_destroy_context(rpc);
        b->rpc = saved;
        return NULL;
    }
    b->rpc = saved;
    return rpc;
}

static int do_mount(struct bench *b)
{
    struct rpc_context *mrpc = rpc_open(b, b->o.mount_port);
    if (!mrpc)
        return -1;
    b->rpc = mrpc;
    struct sync_ctx s = { .b = b };
    int rc = -1;
    if (rpc_mount3_mnt_async(mrpc, mnt_cb, (char *)b->o.export_path, &s) != 0)
        goto out;
    if (loop_until(b, &s.done))
        goto out;
    b->root = s.fh;
    rc = 0;
out:
    rpc_destroy_context(mrpc);
    b->rpc = NULL;
    if (rc)
        return rc;
    b->rpc = rpc_open(b, b->o.nfs_port);
    return b->rpc ? 0 : -1;
}

static void fsinfo_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    FSINFO3res *res = data;
    s->done = 1;
    s->b->inflight--;
    if (reply_ok(s->b, "FSINFO", status, data)) {
        s->rtmax = res->FSINFO3res_u.resok.rtmax;
        s->wtmax = res->FSINFO3res_u.resok.wtmax;
    }
}

static int do_fsinfo(struct bench *b)
{
    struct sync_ctx s = { .b = b };
    FSINFO3args a = { .fsroot = fh_arg(&b->root) };
    if (!sent(b, "FSINFO", rpc_nfs3_fsinfo_async(b->rpc, fsinfo_cb, &a, &s)) ||
        loop_until(b, &s.done))
        return -1;
    uint32_t m = s.rtmax < s.wtmax ? s.rtmax : s.wtmax;
    if (m && b->o.chunk > m) {
        fprintf(stderr, "bench_nfs: server max transfer %u < chunk %u: using %u\n", m,
                b->o.chunk, m);
        b->o.chunk = m;
    }
    return 0;
}

/* ---- synchronous helpers for setup ---- */

static void sync_handle_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    s->done = 1;
    s->b->inflight--;
    if (!reply_ok(s->b, "MKDIR/CREATE/LOOKUP", status, data))
        return;
    /* MKDIR3resok and CREATE3resok both start with post_op_fh3 obj. */
    _Static_assert(offsetof(MKDIR3res, MKDIR3res_u.resok.obj) ==
                       offsetof(CREATE3res, CREATE3res_u.resok.obj),
                   "MKDIR and CREATE replies start alike");
    take_handle(s->b, "MKDIR/CREATE", &((CREATE3res *)data)->CREATE3res_u.resok.obj, &s->fh);
}

static int do_mkdir(struct bench *b, struct fh *parent, const char *name, struct fh *out)
{
    struct sync_ctx s = { .b = b };
    MKDIR3args a;
    memset(&a, 0, sizeof(a));
    a.where.dir = fh_arg(parent);
    a.where.name = (char *)name;
    a.attributes.mode.set_it = 1;
    a.attributes.mode.set_mode3_u.mode = 0755;
    if (!sent(b, "MKDIR", rpc_nfs3_mkdir_async(b->rpc, sync_handle_cb, &a, &s)) ||
        loop_until(b, &s.done))
        return -1;
    *out = s.fh;
    return 0;
}

static void create_args(CREATE3args *a, struct fh *dir, const char *name, createmode3 how)
{
    memset(a, 0, sizeof(*a));
    a->where.dir = fh_arg(dir);
    a->where.name = (char *)name;
    a->how.mode = how;
    a->how.createhow3_u.obj_attributes.mode.set_it = 1;
    a->how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
}

static int do_create(struct bench *b, struct fh *dir, const char *name, struct fh *out)
{
    struct sync_ctx s = { .b = b };
    CREATE3args a;
    create_args(&a, dir, name, UNCHECKED);
    if (!sent(b, "CREATE", rpc_nfs3_create_async(b->rpc, sync_handle_cb, &a, &s)) ||
        loop_until(b, &s.done))
        return -1;
    *out = s.fh;
    return 0;
}

static void sync_status_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    s->done = 1;
    s->b->inflight--;
    reply_ok(s->b, "REMOVE/COMMIT/WRITE", status, data);
}

static int do_remove(struct bench *b, struct fh *dir, const char *name)
{
    struct sync_ctx s = { .b = b };
    REMOVE3args a;
    memset(&a, 0, sizeof(a));
    a.object.dir = fh_arg(dir);
    a.object.name = (char *)name;
    if (!sent(b, "REMOVE", rpc_nfs3_remove_async(b->rpc, sync_status_cb, &a, &s)) ||
        loop_until(b, &s.done))
        return -1;
    return 0;
}

static int do_commit(struct bench *b, struct fh *f)
{
    struct sync_ctx s = { .b = b };
    COMMIT3args c;
    memset(&c, 0, sizeof(c));
    c.file = fh_arg(f);
    if (!sent(b, "COMMIT", rpc_nfs3_commit_async(b->rpc, sync_status_cb, &c, &s)) ||
        loop_until(b, &s.done))
        return -1;
    return 0;
}

/* ---- the phase runner ---- */

static void slot_cb(struct rpc_context *rpc, int status, void *data, void *priv);

/* Send the next call of @p s. @return 1 (sent), -1 (failed). */
#define SLOT_SEND(b, s, nm, fn, args)                                                              \
    ((s)->what = (nm), sent((b), (nm), fn((b)->rpc, slot_cb, (args), (s))) ? 1 : -1)

/* Start operations on @p s until one is in flight or none is left. */
static void slot_next(struct bench *b, struct slot *s)
{
    double now = bench_now();
    if (b->failed || (b->ph->timed && now >= b->t_end) || (b->limit && b->started >= b->limit)) {
        b->active--;
        return;
    }
    s->t0 = now;
    s->step = 0;
    int r = b->ph->start(b, s);
    if (r < 0)
        b->failed = true;
    if (r <= 0) {
        b->active--;
        return;
    }
    b->started++;
}

static void slot_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct slot *s = priv;
    struct bench *b = s->b;
    b->inflight--;
    if (!reply_ok(b, s->what, status, data)) {
        b->active--;
        return;
    }
    int r = b->ph->reply(b, s, data);
    if (r > 0)
        return;
    if (r < 0) {
        b->failed = true;
        b->active--;
        return;
    }
    b->ops++;
    lat_add(&b->lat, (bench_now() - s->t0) * 1e6);
    slot_next(b, s);
}

/* Run @p ph with @p depth operations in flight; print its row (named @p row)
 * as a rate of units (bytes for MB/s) or operations, with latency percentiles
 * at depth 1 and the server CPU. @p finish, if set, runs after the last reply
 * and inside the timed span (COMMIT of a sequential write). */
static int run_phase(struct bench *b, const struct phase *ph, int depth, const char *row,
                     int (*finish)(struct bench *b))
{
    struct slot slots[MAX_QD];
    memset(slots, 0, sizeof(slots));
    b->ph = ph;
    b->ops = b->units = b->started = 0;
    b->lat.n = 0;
    b->next_off = 0;
    b->active = 0;
    double c0 = cpu_us(b->o.server_pid);
    double t0 = bench_now();
    b->t_end = t0 + b->o.secs;
    for (int i = 0; i < depth && !b->failed; i++) {
        slots[i].b = b;
        b->active++;
        slot_next(b, &slots[i]);
    }
    while (b->active > 0 && !b->failed)
        if (pump(b) < 0)
            return -1;
    if (b->failed || (finish && finish(b)))
        return -1;
    double dt = bench_now() - t0;
    double c1 = cpu_us(b->o.server_pid);
    if (b->ops == 0) {
        fail(b, row, "no operation completed");
        return -1;
    }
    double work; /* what the CPU is counted per */
    if (!strcmp(ph->unit, "MB/s")) {
        printf("RESULT %s %.1f MB/s\n", row, (double)b->units / dt / 1e6);
        work = (double)b->units / MIB;
    } else if (!strcmp(ph->unit, "entries/s")) {
        printf("RESULT %s %.0f entries/s\n", row, (double)b->units / dt);
        work = (double)b->ops;
    } else {
        printf("RESULT %s %.0f %s\n", row, (double)b->ops / dt, ph->unit);
        work = (double)b->ops;
    }
    if (depth == 1) {
        qsort(b->lat.v, b->lat.n, sizeof(b->lat.v[0]), cmp_float);
        printf("RESULT %s_p50 %.0f us\n", row, lat_pct(&b->lat, 50));
        printf("RESULT %s_p99 %.0f us\n", row, lat_pct(&b->lat, 99));
    }
    if (c0 >= 0 && c1 >= 0 && work > 0)
        printf("RESULT %s_cpu %.1f %s\n", row, (c1 - c0) / work, ph->cpu_unit);
    fflush(stdout);
    return 0;
}

/* ---- sequential write, reads ---- */

static int seqw_start(struct bench *b, struct slot *s)
{
    if (b->next_off >= b->o.size)
        return 0;
    WRITE3args a;
    memset(&a, 0, sizeof(a));
    a.file = fh_arg(&b->file);
    a.offset = b->next_off;
    a.count = b->o.chunk;
    a.stable = UNSTABLE;
    a.data.data_len = b->o.chunk;
    a.data.data_val = b->buf;
    b->next_off += b->o.chunk;
    return SLOT_SEND(b, s, "WRITE", rpc_nfs3_write_async, &a);
}

static int seqw_reply(struct bench *b, struct slot *s, void *res)
{
    if (((WRITE3res *)res)->WRITE3res_u.resok.count != b->o.chunk) {
        fail(b, "WRITE", "short write");
        return -1;
    }
    b->units += b->o.chunk;
    return 0;
}

static int seqw_finish(struct bench *b)
{
    return do_commit(b, &b->file);
}

static int read_send(struct bench *b, struct slot *s, uint64_t off, uint32_t count)
{
    READ3args a;
    memset(&a, 0, sizeof(a));
    a.file = fh_arg(&b->file);
    a.offset = off;
    a.count = count;
    s->off = off;
    return SLOT_SEND(b, s, "READ", rpc_nfs3_read_async, &a);
}

static int seqr_start(struct bench *b, struct slot *s)
{
    if (b->next_off >= b->o.size)
        return 0;
    uint64_t off = b->next_off;
    b->next_off += b->o.chunk;
    return read_send(b, s, off, b->o.chunk);
}

/* Check a READ reply of @p want bytes at s->off: its length, and its bytes
 * (all of a small read; a 4 KiB sample, moving with the offset, of a large one). */
static int read_check(struct bench *b, struct slot *s, void *res, uint32_t want)
{
    READ3resok *ok = &((READ3res *)res)->READ3res_u.resok;
    if (ok->count != want || ok->data.data_len != want) {
        fail(b, "READ", "short read");
        return -1;
    }
    uint32_t at = 0, n = want;
    if (want > SMALL) {
        at = (uint32_t)((s->off / b->o.chunk) * 4099u % (want - SMALL));
        n = SMALL;
    }
    if (!data_ok(b, s->off + at, ok->data.data_val + at, n)) {
        fail(b, "READ", "wrong data read back");
        return -1;
    }
    b->units += want;
    return 0;
}

static int seqr_reply(struct bench *b, struct slot *s, void *res)
{
    return read_check(b, s, res, b->o.chunk);
}

static int r4k_start(struct bench *b, struct slot *s)
{
    uint64_t blocks = b->o.size / SMALL;
    uint64_t off = ((uint64_t)rand_r(&b->o.seed) * 65536u + (uint64_t)rand_r(&b->o.seed)) %
                   blocks * SMALL;
    return read_send(b, s, off, SMALL);
}

static int r4k_reply(struct bench *b, struct slot *s, void *res)
{
    return read_check(b, s, res, SMALL);
}

static const struct phase ph_seqw = { "seq_write", "MB/s", "us/MiB", false, seqw_start,
                                      seqw_reply };
static const struct phase ph_seqr = { "seq_read", "MB/s", "us/MiB", false, seqr_start,
                                      seqr_reply };
static const struct phase ph_r4k = { "read_4k", "ops/s", "us/op", true, r4k_start, r4k_reply };

/* ---- GETATTR, LOOKUP, ACCESS ---- */

static int getattr_start(struct bench *b, struct slot *s)
{
    GETATTR3args a = { .object = fh_arg(&b->meta) };
    return SLOT_SEND(b, s, "GETATTR", rpc_nfs3_getattr_async, &a);
}

static int lookup_start(struct bench *b, struct slot *s)
{
    LOOKUP3args a;
    a.what.dir = fh_arg(&b->dir);
    a.what.name = "meta";
    return SLOT_SEND(b, s, "LOOKUP", rpc_nfs3_lookup_async, &a);
}

static int access_start(struct bench *b, struct slot *s)
{
    ACCESS3args a = { .object = fh_arg(&b->meta), .access = 0x3f };
    return SLOT_SEND(b, s, "ACCESS", rpc_nfs3_access_async, &a);
}

static int done_reply(struct bench *b, struct slot *s, void *res)
{
    return 0;
}

static const struct phase ph_getattr = { "getattr", "ops/s", "us/op", true, getattr_start,
                                         done_reply };
static const struct phase ph_lookup = { "lookup", "ops/s", "us/op", true, lookup_start,
                                        done_reply };
static const struct phase ph_access = { "access", "ops/s", "us/op", true, access_start,
                                        done_reply };

/* ---- creates ---- */

static int create_send(struct bench *b, struct slot *s, struct fh *dir, createmode3 how)
{
    CREATE3args a;
    create_args(&a, dir, s->name, how);
    return SLOT_SEND(b, s, "CREATE", rpc_nfs3_create_async, &a);
}

static int cempty_start(struct bench *b, struct slot *s)
{
    snprintf(s->name, sizeof(s->name), "e%07d", b->cseq++);
    return create_send(b, s, &b->cdir, GUARDED);
}

static int cempty_reply(struct bench *b, struct slot *s, void *res)
{
    return take_handle(b, "CREATE", &((CREATE3res *)res)->CREATE3res_u.resok.obj, &s->fh) ? 0
                                                                                          : -1;
}

static int c4k_start(struct bench *b, struct slot *s)
{
    snprintf(s->name, sizeof(s->name), "f%07d", b->cseq++);
    return create_send(b, s, &b->cdir, GUARDED);
}

static int write_small_send(struct bench *b, struct slot *s, stable_how how)
{
    WRITE3args a;
    memset(&a, 0, sizeof(a));
    a.file = fh_arg(&s->fh);
    a.count = SMALL;
    a.stable = how;
    a.data.data_len = SMALL;
    a.data.data_val = b->buf;
    return SLOT_SEND(b, s, "WRITE", rpc_nfs3_write_async, &a);
}

static int commit_send(struct bench *b, struct slot *s)
{
    COMMIT3args c;
    memset(&c, 0, sizeof(c));
    c.file = fh_arg(&s->fh);
    return SLOT_SEND(b, s, "COMMIT", rpc_nfs3_commit_async, &c);
}

/* The CREATE + WRITE + COMMIT chain after its CREATE; @return as phase.reply. */
static int chain_reply(struct bench *b, struct slot *s, void *res)
{
    switch (s->step++) {
    case 0:
        if (!take_handle(b, "CREATE", &((CREATE3res *)res)->CREATE3res_u.resok.obj, &s->fh))
            return -1;
        return write_small_send(b, s, UNSTABLE);
    case 1:
        /* Already durable: a client sends COMMIT only when the reply said UNSTABLE. */
        if (((WRITE3res *)res)->WRITE3res_u.resok.committed != UNSTABLE)
            return 0;
        return commit_send(b, s);
    default:
        return 0;
    }
}

static const struct phase ph_cempty = { "create_empty", "files/s", "us/file", true, cempty_start,
                                        cempty_reply };
static const struct phase ph_c4k = { "create_4k", "files/s", "us/file", true, c4k_start,
                                     chain_reply };

/* ---- directory walks ---- */

static int walk_send(struct bench *b, struct slot *s, bool plus)
{
    if (plus) {
        READDIRPLUS3args a;
        memset(&a, 0, sizeof(a));
        a.dir = fh_arg(&b->rdir);
        a.cookie = s->cookie;
        memcpy(a.cookieverf, s->verf, NFS3_COOKIEVERFSIZE);
        a.dircount = b->o.rdp_max;
        a.maxcount = b->o.rdp_max;
        return SLOT_SEND(b, s, "READDIRPLUS", rpc_nfs3_readdirplus_async, &a);
    }
    READDIR3args a;
    memset(&a, 0, sizeof(a));
    a.dir = fh_arg(&b->rdir);
    a.cookie = s->cookie;
    memcpy(a.cookieverf, s->verf, NFS3_COOKIEVERFSIZE);
    a.count = b->o.rdp_max;
    return SLOT_SEND(b, s, "READDIR", rpc_nfs3_readdir_async, &a);
}

static int walk_start(struct bench *b, struct slot *s, bool plus)
{
    /* Walks are timed, but at least 3 run whatever --secs says. */
    if (b->started >= 3 && bench_now() >= b->t_end)
        return 0;
    s->cookie = 0;
    memset(s->verf, 0, sizeof(s->verf));
    s->entries = 0;
    return walk_send(b, s, plus);
}

static int walk_reply(struct bench *b, struct slot *s, void *res, bool plus)
{
    int n = 0, eof;
    if (plus) {
        READDIRPLUS3resok *ok = &((READDIRPLUS3res *)res)->READDIRPLUS3res_u.resok;
        memcpy(s->verf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
        for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry, n++) {
            if (strcmp(e->name, ".") && strcmp(e->name, ".."))
                s->entries++;
            s->cookie = e->cookie;
        }
        eof = ok->reply.eof;
    } else {
        READDIR3resok *ok = &((READDIR3res *)res)->READDIR3res_u.resok;
        memcpy(s->verf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
        for (entry3 *e = ok->reply.entries; e; e = e->nextentry, n++) {
            if (strcmp(e->name, ".") && strcmp(e->name, ".."))
                s->entries++;
            s->cookie = e->cookie;
        }
        eof = ok->reply.eof;
    }
    if (!eof) {
        if (n == 0) {
            fail(b, s->what, "no entries and no eof");
            return -1;
        }
        return walk_send(b, s, plus);
    }
    if (s->entries != b->o.dir_entries) {
        char msg[96];
        snprintf(msg, sizeof(msg), "a walk saw %d entries, expected %d", s->entries,
                 b->o.dir_entries);
        fail(b, s->what, msg);
        return -1;
    }
    b->units += (uint64_t)s->entries;
    return 0;
}

static int rd_start(struct bench *b, struct slot *s)
{
    return walk_start(b, s, false);
}

static int rd_reply(struct bench *b, struct slot *s, void *res)
{
    return walk_reply(b, s, res, false);
}

static int rdp_start(struct bench *b, struct slot *s)
{
    return walk_start(b, s, true);
}

static int rdp_reply(struct bench *b, struct slot *s, void *res)
{
    return walk_reply(b, s, res, true);
}

/* Walks are not .timed: walk_start stops them (after at least 3). */
static const struct phase ph_rd = { "readdir", "entries/s", "us/walk", false, rd_start,
                                    rd_reply };
static const struct phase ph_rdp = { "readdirplus", "entries/s", "us/walk", false, rdp_start,
                                     rdp_reply };

/* Fill b->rdir with --dir-entries empty files, 64 in flight (not timed). */
static int fill_start(struct bench *b, struct slot *s)
{
    if (b->cseq >= b->o.dir_entries)
        return 0;
    snprintf(s->name, sizeof(s->name), "entry-%06d", b->cseq++);
    return create_send(b, s, &b->rdir, UNCHECKED);
}

static const struct phase ph_fill = { "fill", "files/s", "us/file", false, fill_start,
                                      done_reply };

/* ---- history: populate, then mixed load ---- */

static int pop_start(struct bench *b, struct slot *s)
{
    if (b->cseq >= b->o.populate)
        return 0;
    s->idx = b->cseq++;
    snprintf(s->name, sizeof(s->name), "f%07lld", (long long)s->idx);
    return create_send(b, s, &b->hdir[s->idx / HIST_DIR_FILES], UNCHECKED);
}

/* The history's CREATE chain (CREATE alone with --hist-empty); @return as phase.reply. */
static int hist_chain_reply(struct bench *b, struct slot *s, void *res)
{
    int r;
    if (b->o.hist_empty) {
        s->step++;
        r = take_handle(b, "CREATE", &((CREATE3res *)res)->CREATE3res_u.resok.obj, &s->fh) ? 0 : -1;
    } else {
        r = chain_reply(b, s, res);
    }
    if (r == 0) {
        b->hfh[s->idx] = s->fh;
        b->hbusy[s->idx] = b->o.hist_empty ? 0 : HIST_FULL;
    }
    return r;
}

static int pop_reply(struct bench *b, struct slot *s, void *res)
{
    return hist_chain_reply(b, s, res);
}

static const struct phase ph_pop = { "hist_populate", "files/s", "us/file", false, pop_start,
                                     pop_reply };

enum { MIX_GETATTR, MIX_LOOKUP, MIX_READ, MIX_WRITE, MIX_RDP, MIX_REPLACE };

static int mix_start(struct bench *b, struct slot *s)
{
    static const int weights[] = { 30, 20, 25, 10, 5, 10 }; /* percent, in enum order */
    int64_t i;
    do
        i = (int64_t)(((uint64_t)rand_r(&b->o.seed) * 65536u + (uint64_t)rand_r(&b->o.seed)) %
                      (uint64_t)b->hcount);
    while (b->hbusy[i] & HIST_BUSY);
    b->hbusy[i] |= HIST_BUSY;
    s->idx = i;
    s->fh = b->hfh[i];
    snprintf(s->name, sizeof(s->name), "f%07lld", (long long)i);
    struct fh *dir = &b->hdir[i / HIST_DIR_FILES];
    int r = rand_r(&b->o.seed) % 100, k = 0;
    while (r >= weights[k]) {
        r -= weights[k];
        k++;
    }
    s->kind = k;
    switch (k) {
    case MIX_GETATTR: {
        GETATTR3args a = { .object = fh_arg(&s->fh) };
        return SLOT_SEND(b, s, "GETATTR", rpc_nfs3_getattr_async, &a);
    }
    case MIX_LOOKUP: {
        LOOKUP3args a;
        a.what.dir = fh_arg(dir);
        a.what.name = s->name;
        return SLOT_SEND(b, s, "LOOKUP", rpc_nfs3_lookup_async, &a);
    }
    case MIX_READ: {
        READ3args a;
        memset(&a, 0, sizeof(a));
        a.file = fh_arg(&s->fh);
        a.count = SMALL;
        return SLOT_SEND(b, s, "READ", rpc_nfs3_read_async, &a);
    }
    case MIX_WRITE:
        return write_small_send(b, s, FILE_SYNC);
    case MIX_RDP: {
        READDIRPLUS3args a;
        memset(&a, 0, sizeof(a));
        a.dir = fh_arg(dir);
        a.dircount = 8192;
        a.maxcount = 8192;
        return SLOT_SEND(b, s, "READDIRPLUS", rpc_nfs3_readdirplus_async, &a);
    }
    default: {
        REMOVE3args a;
        memset(&a, 0, sizeof(a));
        a.object.dir = fh_arg(dir);
        a.object.name = s->name;
        return SLOT_SEND(b, s, "REMOVE", rpc_nfs3_remove_async, &a);
    }
    }
}

static int mix_reply(struct bench *b, struct slot *s, void *res)
{
    int r = 0;
    if (s->kind == MIX_REPLACE) {
        /* REMOVE, then the populate chain again under the same name */
        if (s->step == 0) {
            s->step = -1;
            r = create_send(b, s, &b->hdir[s->idx / HIST_DIR_FILES], UNCHECKED);
        } else {
            if (s->step < 0)
                s->step = 0;
            r = hist_chain_reply(b, s, res); /* sets the file's HIST_FULL */
            if (r == 0)
                return 0;
        }
    } else if (s->kind == MIX_READ) {
        READ3resok *ok = &((READ3res *)res)->READ3res_u.resok;
        uint32_t want = (b->hbusy[s->idx] & HIST_FULL) ? SMALL : 0;
        if (ok->count != want || !data_ok(b, 0, ok->data.data_val, want)) {
            fail(b, "READ", "wrong data read back from a history file");
            r = -1;
        }
    } else if (s->kind == MIX_WRITE) {
        b->hbusy[s->idx] |= HIST_FULL;
    }
    if (r <= 0)
        b->hbusy[s->idx] &= (unsigned char)~HIST_BUSY;
    return r;
}

static const struct phase ph_mix = { "hist_mix", "ops/s", "us/op", true, mix_start, mix_reply };

static int history(struct bench *b)
{
    struct opts *o = &b->o;
    int64_t ndirs = (o->populate + HIST_DIR_FILES - 1) / HIST_DIR_FILES;
    b->hfh = calloc((size_t)o->populate, sizeof(*b->hfh));
    b->hdir = calloc((size_t)ndirs, sizeof(*b->hdir));
    b->hbusy = calloc((size_t)o->populate, 1);
    if (!b->hfh || !b->hdir || !b->hbusy)
        return -1;
    struct fh top;
    char name[32];
    snprintf(name, sizeof(name), "hist-%d-%ld", (int)getpid(), (long)time(NULL));
    if (do_mkdir(b, &b->root, name, &top))
        return -1;
    for (int64_t d = 0; d < ndirs; d++) {
        snprintf(name, sizeof(name), "d%05lld", (long long)d);
        if (do_mkdir(b, &top, name, &b->hdir[d]))
            return -1;
    }
    double secs = o->secs;
    b->cseq = 0;
    b->limit = 0;
    if (run_phase(b, &ph_pop, 64, "hist_populate", NULL))
        return -1;
    b->hcount = o->populate;
    o->secs = o->mix_secs;
    int rc = o->mix_secs > 0 ? run_phase(b, &ph_mix, 16, "hist_mix", NULL) : 0;
    o->secs = secs;
    /* churn: a --size-mib file written (16 in flight) and removed, so the
     * store holds freed space whose pages are still cached, as after any
     * large overwrite or delete; later writes reuse it */
    if (rc == 0)
        rc = do_create(b, &top, "churn", &b->file);
    if (rc == 0)
        rc = run_phase(b, &ph_seqw, 16, "hist_churn_write", seqw_finish);
    if (rc == 0)
        rc = do_remove(b, &top, "churn");
    return rc;
}

/* ---- main ---- */

static void usage(void)
{
    fprintf(stderr, "usage: bench_nfs --host H --nfs-port P --mount-port P --export PATH\n"
                    "  [--size-mib 1024] [--chunk-kib 1024] [--depths 1,16] [--secs 3]\n"
                    "  [--files 50000] [--dir-entries 10000] [--rdp-max 65536] [--uid 0 --gid 0]\n"
                    "  [--server-pid PID] [--seed N]\n"
                    "  [--only seq,read_4k,getattr,lookup,access,create_empty,create_4k,readdir,"
                    "readdirplus]\n"
                    "  or: ... --populate N [--hist-empty] [--mix-secs 10]   (give the server a "
                    "history)\n");
}

static int parse_depths(struct opts *o, const char *arg)
{
    o->ndepths = 0;
    for (const char *p = arg; *p;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p || v < 1 || v > MAX_QD || o->ndepths == MAX_DEPTHS)
            return -1;
        o->depths[o->ndepths++] = (int)v;
        p = *e == ',' ? e + 1 : e;
        if (*e && *e != ',')
            return -1;
    }
    return o->ndepths ? 0 : -1;
}

static int run_seq(struct bench *b, int depth)
{
    char row[64], fname[32];
    snprintf(fname, sizeof(fname), "seq_qd%d", depth);
    if (do_create(b, &b->dir, fname, &b->file))
        return -1;
    snprintf(row, sizeof(row), "seq_write_qd%d", depth);
    if (run_phase(b, &ph_seqw, depth, row, seqw_finish))
        return -1;
    snprintf(row, sizeof(row), "seq_read_first_qd%d", depth);
    if (run_phase(b, &ph_seqr, depth, row, NULL))
        return -1;
    snprintf(row, sizeof(row), "seq_read_qd%d", depth);
    if (run_phase(b, &ph_seqr, depth, row, NULL))
        return -1;
    snprintf(row, sizeof(row), "read_4k_qd%d", depth);
    if (bench_want(b->o.only, "read_4k") && run_phase(b, &ph_r4k, depth, row, NULL))
        return -1;
    return do_remove(b, &b->dir, fname);
}

int main(int argc, char **argv)
{
    static struct bench b;
    struct opts *o = &b.o;
    o->host = "127.0.0.1";
    o->size = 1024ull * MIB;
    o->chunk = MIB;
    o->depths[0] = 1;
    o->depths[1] = 16;
    o->ndepths = 2;
    o->secs = 3;
    o->files = 50000;
    o->dir_entries = 10000;
    o->rdp_max = 65536;
    o->mix_secs = 10;
    o->seed = 12345;
    o->uid = (int)getuid();
    o->gid = (int)getgid();
    static const struct option lo[] = {
        {"host", 1, 0, 'h'},       {"nfs-port", 1, 0, 'n'},
        {"mount-port", 1, 0, 'm'}, {"export", 1, 0, 'e'},
        {"size-mib", 1, 0, 's'},   {"chunk-kib", 1, 0, 'c'},
        {"depths", 1, 0, 'q'},     {"secs", 1, 0, 't'},
        {"files", 1, 0, 'f'},      {"dir-entries", 1, 0, 'd'},
        {"rdp-max", 1, 0, 'r'},    {"only", 1, 0, 'o'},
        {"uid", 1, 0, 'u'},        {"gid", 1, 0, 'g'},
        {"server-pid", 1, 0, 'p'}, {"populate", 1, 0, 'P'},
        {"mix-secs", 1, 0, 'M'},   {"seed", 1, 0, 'S'},
        {"hist-empty", 0, 0, 'E'}, {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'h': o->host = optarg; break;
        case 'n': o->nfs_port = atoi(optarg); break;
        case 'm': o->mount_port = atoi(optarg); break;
        case 'e': o->export_path = optarg; break;
        case 's': o->size = strtoull(optarg, NULL, 10) * MIB; break;
        case 'c': o->chunk = (uint32_t)strtoul(optarg, NULL, 10) * 1024u; break;
        case 'q':
            if (parse_depths(o, optarg)) {
                usage();
                return 2;
            }
            break;
        case 't': o->secs = atof(optarg); break;
        case 'f': o->files = atoi(optarg); break;
        case 'd': o->dir_entries = atoi(optarg); break;
        case 'r': o->rdp_max = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'o': o->only = optarg; break;
        case 'u': o->uid = atoi(optarg); break;
        case 'g': o->gid = atoi(optarg); break;
        case 'p': o->server_pid = atoi(optarg); break;
        case 'P': o->populate = atoi(optarg); break;
        case 'M': o->mix_secs = atof(optarg); break;
        case 'E':
            o->hist_empty = true;
            break;
        case 'S': o->seed = (unsigned)strtoul(optarg, NULL, 10); break;
        default: usage(); return 2;
        }
    }
    if (!o->nfs_port || !o->export_path || o->chunk < SMALL || o->size == 0 ||
        o->dir_entries < 1 || o->populate < 0) {
        usage();
        return 2;
    }
    if (!o->mount_port)
        o->mount_port = o->nfs_port;

    int rc = 1;
    if (do_mount(&b) || do_fsinfo(&b))
        goto out;
    o->size -= o->size % o->chunk;
    b.buf = malloc(o->chunk);
    if (!b.buf)
        goto out;
    for (uint32_t i = 0; i < o->chunk; i++)
        b.buf[i] = (char)(i * 131 + 7);
    if (o->populate) {
        rc = history(&b) ? 1 : 0;
        goto out;
    }

    char dname[64];
    snprintf(dname, sizeof(dname), "bench-%d-%ld", (int)getpid(), (long)time(NULL));
    if (do_mkdir(&b, &b.root, dname, &b.dir))
        goto out;
    char row[64];
    for (int i = 0; i < o->ndepths; i++)
        if (bench_want(o->only, "seq") && run_seq(&b, o->depths[i]))
            goto out;
    /* A small file for the metadata rows (its size is what GETATTR returns). */
    if (do_create(&b, &b.dir, "meta", &b.meta))
        goto out;
    static const struct phase *const meta[] = { &ph_getattr, &ph_lookup, &ph_access };
    for (size_t m = 0; m < sizeof(meta) / sizeof(meta[0]); m++)
        for (int i = 0; i < o->ndepths; i++) {
            if (!bench_want(o->only, meta[m]->name))
                continue;
            snprintf(row, sizeof(row), "%s_qd%d", meta[m]->name, o->depths[i]);
            if (run_phase(&b, meta[m], o->depths[i], row, NULL))
                goto out;
        }
    static const struct phase *const creates[] = { &ph_cempty, &ph_c4k };
    for (size_t m = 0; m < 2; m++)
        for (int i = 0; i < o->ndepths; i++) {
            if (!bench_want(o->only, creates[m]->name))
                continue;
            snprintf(row, sizeof(row), "%s_qd%d", creates[m]->name, o->depths[i]);
            snprintf(dname, sizeof(dname), "%s", row);
            if (do_mkdir(&b, &b.dir, dname, &b.cdir))
                goto out;
            b.cseq = 0;
            b.limit = (uint64_t)o->files;
            if (run_phase(&b, creates[m], o->depths[i], row, NULL))
                goto out;
            b.limit = 0;
        }
    if (bench_want(o->only, "readdir") || bench_want(o->only, "readdirplus")) {
        if (do_mkdir(&b, &b.dir, "rdp", &b.rdir))
            goto out;
        b.cseq = 0;
        double f0 = bench_now();
        if (run_phase(&b, &ph_fill, 64, "dir_fill", NULL))
            goto out;
        fprintf(stderr, "bench_nfs: made %d entries in %.2f s\n", o->dir_entries,
                bench_now() - f0);
        static const struct phase *const walks[] = { &ph_rd, &ph_rdp };
        for (size_t m = 0; m < 2; m++)
            for (int i = 0; i < o->ndepths; i++) {
                if (!bench_want(o->only, walks[m]->name))
                    continue;
                snprintf(row, sizeof(row), "%s_qd%d", walks[m]->name, o->depths[i]);
                if (run_phase(&b, walks[m], o->depths[i], row, NULL))
                    goto out;
            }
    }
    rc = 0;
out:
    if (b.rpc) {
        while (b.inflight > 0 && !b.failed && pump(&b) == 0)
            ;
        rpc_destroy_context(b.rpc);
    }
    free(b.buf);
    free(b.lat.v);
    free(b.hfh);
    free(b.hdir);
    free(b.hbusy);
    return rc;
}
