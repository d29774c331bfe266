/* SPDX-License-Identifier: Apache-2.0
 * bench_nfs: an NFSv3 load generator on libnfs's raw async RPC API.
 *
 * One TCP connection, one thread, many calls in flight (like a kernel client
 * with a deep slot table). It mounts an export, makes a fresh work directory
 * in its root and measures, in order:
 *   seq_write   1 GiB as 1 MiB UNSTABLE WRITEs (qd in flight), then COMMIT (MB/s)
 *   seq_read    the same file back as 1 MiB READs after one untimed read of
 *               it (warm on both servers) (MB/s)
 *   getattr     GETATTR of that file, qd in flight, for --secs (ops/s)
 *   lookup      LOOKUP of that file's name, qd in flight, for --secs (ops/s)
 *   create      CREATE + 4 KiB UNSTABLE WRITE + COMMIT per file, --files-qd
 *               chains in flight, for --secs or --files files (files/s)
 *   readdirplus a full READDIRPLUS walk of a directory of --dir-entries files
 *               (setup not timed), median of --rdp-walks walks (3) (ms)
 * With --server-pid, each phase also reports the server process's CPU time
 * (user + system, all threads, from /proc) per operation as <phase>_cpu: far
 * less disturbed by a shared machine than the rates are.
 * Each result is one line "RESULT <name> <value> <unit>" on stdout, so
 * bench/nfs/run.sh can put two servers side by side. Any NFS error aborts the
 * run with a message naming the procedure and nfsstat3; results are never
 * printed for a phase that failed.
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

struct opts {
    const char *host;
    int nfs_port, mount_port;
    const char *export_path;
    uint64_t size;      /* bytes of the sequential file */
    uint32_t chunk;     /* bytes per READ/WRITE (capped by FSINFO) */
    int qd;             /* calls in flight for seq/getattr/lookup */
    int files_qd;       /* create chains in flight */
    double secs;        /* duration of the rate phases */
    int files;          /* most files in the create phase */
    int dir_entries;    /* entries of the READDIRPLUS directory */
    uint32_t rdp_max;   /* READDIRPLUS maxcount */
    int rdp_walks;      /* READDIRPLUS walks (the median is reported) */
    const char *only;   /* comma list of phases to run, NULL = all */
    int uid, gid;
    int server_pid;     /* nonzero: also report the server's CPU per operation */
};

/* A file handle we own (results' handles are freed after their callback). */
struct fh {
    uint32_t len;
    char val[NFS3_FHSIZE];
};

struct bench {
    struct opts o;
    struct rpc_context *rpc;
    struct fh root, dir, file;
    bool failed;      /* a call failed: stop the phase, exit non-zero */
    int inflight;
    int done;         /* phase-specific completion flag */
    double t_end;     /* rate phases: stop issuing after this time */
    uint64_t next_off, completed;
    char *buf;        /* write payload (chunk bytes) */
};

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

/* Print "RESULT <name>_cpu <us per unit>" when --server-pid was given. */
static void report_cpu(struct bench *b, const char *name, double c0, double ops, const char *unit)
{
    double c1 = cpu_us(b->o.server_pid);
    if (c0 < 0 || c1 < 0 || ops <= 0)
        return;
    printf("RESULT %s_cpu %.1f %s\n", name, (c1 - c0) / ops, unit);
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

static void fail(struct bench *b, const char *what, int status, const char *detail)
{
    if (!b->failed)
        fprintf(stderr, "bench_nfs: %s failed: %s%s%s\n", what,
                status == RPC_STATUS_SUCCESS ? "" : "rpc error ",
                detail ? detail : "", "");
    b->failed = true;
}

static void fail_nfs(struct bench *b, const char *what, int nfsstat)
{
    char msg[64];
    snprintf(msg, sizeof(msg), "nfsstat3 %d", nfsstat);
    fail(b, what, RPC_STATUS_SUCCESS, msg);
}

/* Every NFSv3 result (GETATTR3res, WRITE3res, ...) starts with its nfsstat3. */
_Static_assert(offsetof(WRITE3res, status) == 0 && offsetof(READDIRPLUS3res, status) == 0,
               "an NFSv3 result starts with its status");

/* Did the call succeed with NFS3_OK? If not, @p what failed (the RPC error
 * text in @p data, or the nfsstat3 of the result @p data points to). */
static bool reply_ok(struct bench *b, const char *what, int status, void *data)
{
    if (status != RPC_STATUS_SUCCESS) {
        fail(b, what, status, data);
        return false;
    }
    nfsstat3 st = *(const nfsstat3 *)data;
    if (st != NFS3_OK) {
        fail_nfs(b, what, st);
        return false;
    }
    return true;
}

/* Copy the new object's handle of a CREATE or MKDIR reply into @p out. */
static bool take_handle(struct bench *b, const char *what, post_op_fh3 *obj, struct fh *out)
{
    if (!obj->handle_follows) {
        fail(b, what, RPC_STATUS_SUCCESS, "no handle in reply");
        return false;
    }
    fh_set(out, &obj->post_op_fh3_u.handle);
    return true;
}

/* Count a call just queued; @p rc is what its rpc_nfs3_*_async returned. */
static bool sent(struct bench *b, const char *what, int rc)
{
    if (rc != 0) {
        fail(b, what, RPC_STATUS_ERROR, rpc_get_error(b->rpc));
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

/* Run the event loop until no call is in flight. */
static int drain(struct bench *b)
{
    while (b->inflight > 0 && !b->failed)
        if (pump(b) < 0)
            return -1;
    return b->failed ? -1 : 0;
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
        fail(s->b, "connect", status, data);
    s->done = 1;
}

static void mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    mountres3 *res = data;
    s->done = 1;
    if (status != RPC_STATUS_SUCCESS) {
        fail(s->b, "MOUNT", status, data);
        return;
    }
    if (res->fhs_status != MNT3_OK) {
        fail_nfs(s->b, "MOUNT", res->fhs_status);
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
    if (reply_ok(s->b, "FSINFO", status, data)) {
        s->rtmax = res->FSINFO3res_u.resok.rtmax;
        s->wtmax = res->FSINFO3res_u.resok.wtmax;
    }
}

static int do_fsinfo(struct bench *b)
{
    struct sync_ctx s = { .b = b };
    FSINFO3args a = { .fsroot = fh_arg(&b->root) };
    if (rpc_nfs3_fsinfo_async(b->rpc, fsinfo_cb, &a, &s) != 0 || loop_until(b, &s.done))
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

static void mkdir_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    MKDIR3res *res = data;
    s->done = 1;
    if (reply_ok(s->b, "MKDIR", status, data))
        take_handle(s->b, "MKDIR", &res->MKDIR3res_u.resok.obj, &s->fh);
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
    if (rpc_nfs3_mkdir_async(b->rpc, mkdir_cb, &a, &s) != 0 || loop_until(b, &s.done))
        return -1;
    *out = s.fh;
    return 0;
}

static void create1_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct sync_ctx *s = priv;
    CREATE3res *res = data;
    s->done = 1;
    if (reply_ok(s->b, "CREATE", status, data))
        take_handle(s->b, "CREATE", &res->CREATE3res_u.resok.obj, &s->fh);
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
    if (rpc_nfs3_create_async(b->rpc, create1_cb, &a, &s) != 0 || loop_until(b, &s.done))
        return -1;
    *out = s.fh;
    return 0;
}

/* ---- sequential write + commit ---- */

static void seqw_issue(struct bench *b);

static void commit_done_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct bench *b = priv;
    b->inflight--;
    b->done = 1;
    reply_ok(b, "COMMIT", status, data);
}

static void seqw_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct bench *b = priv;
    WRITE3res *res = data;
    b->inflight--;
    if (!reply_ok(b, "WRITE", status, data))
        return;
    if (res->WRITE3res_u.resok.count != b->o.chunk) {
        fail(b, "WRITE", RPC_STATUS_SUCCESS, "short write");
        return;
    }
    b->completed += b->o.chunk;
    seqw_issue(b);
}

static void seqw_issue(struct bench *b)
{
    while (!b->failed && b->inflight < b->o.qd && b->next_off < b->o.size) {
        WRITE3args a;
        memset(&a, 0, sizeof(a));
        a.file = fh_arg(&b->file);
        a.offset = b->next_off;
        a.count = b->o.chunk;
        a.stable = UNSTABLE;
        a.data.data_len = b->o.chunk;
        a.data.data_val = b->buf;
        if (!sent(b, "WRITE", rpc_nfs3_write_async(b->rpc, seqw_cb, &a, b)))
            return;
        b->next_off += b->o.chunk;
    }
    if (!b->failed && b->inflight == 0 && b->next_off >= b->o.size) {
        COMMIT3args c;
        memset(&c, 0, sizeof(c));
        c.file = fh_arg(&b->file);
        sent(b, "COMMIT", rpc_nfs3_commit_async(b->rpc, commit_done_cb, &c, b));
    }
}

static int phase_seq_write(struct bench *b)
{
    b->next_off = 0;
    b->completed = 0;
    b->done = 0;
    double c0 = cpu_us(b->o.server_pid);
    double t0 = bench_now();
    seqw_issue(b);
    if (loop_until(b, &b->done))
        return -1;
    double dt = bench_now() - t0;
    printf("RESULT seq_write %.1f MB/s\n", (double)b->o.size / dt / 1e6);
    report_cpu(b, "seq_write", c0, (double)b->o.size / MIB, "us/MiB");
    fflush(stdout);
    return 0;
}

/* ---- sequential read ---- */

static void seqr_issue(struct bench *b);

static void seqr_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct bench *b = priv;
    READ3res *res = data;
    b->inflight--;
    if (!reply_ok(b, "READ", status, data))
        return;
    if (res->READ3res_u.resok.count != b->o.chunk) {
        fail(b, "READ", RPC_STATUS_SUCCESS, "short read");
        return;
    }
    b->completed += res->READ3res_u.resok.count;
    seqr_issue(b);
}

static void seqr_issue(struct bench *b)
{
    while (!b->failed && b->inflight < b->o.qd && b->next_off < b->o.size) {
        READ3args a;
        memset(&a, 0, sizeof(a));
        a.file = fh_arg(&b->file);
        a.offset = b->next_off;
        a.count = b->o.chunk;
        if (!sent(b, "READ", rpc_nfs3_read_async(b->rpc, seqr_cb, &a, b)))
            return;
        b->next_off += b->o.chunk;
    }
    if (b->inflight == 0 && b->next_off >= b->o.size)
        b->done = 1;
}

/* Read the whole file once. @return 0, -1 (an error, or a short file). */
static int seq_read_once(struct bench *b)
{
    b->next_off = 0;
    b->completed = 0;
    b->done = 0;
    seqr_issue(b);
    if (loop_until(b, &b->done))
        return -1;
    if (b->completed != b->o.size) {
        fprintf(stderr, "bench_nfs: read %llu of %llu bytes\n", (unsigned long long)b->completed,
                (unsigned long long)b->o.size);
        return -1;
    }
    return 0;
}

/* An untimed read first, then the timed one: the file is warm on both
 * servers (ganesha's buffered writes left it in the page cache; s3nfsd wrote
 * it with O_DIRECT and verifies each extent's CRC on its first read). */
static int phase_seq_read(struct bench *b)
{
    double w0 = bench_now(), wc = cpu_us(b->o.server_pid);
    if (seq_read_once(b))
        return -1;
    double wdt = bench_now() - w0, wc1 = cpu_us(b->o.server_pid);
    fprintf(stderr, "bench_nfs: warm-up read %.1f MB/s", (double)b->o.size / wdt / 1e6);
    if (wc >= 0 && wc1 >= 0)
        fprintf(stderr, ", server CPU %.1f us/MiB", (wc1 - wc) / ((double)b->o.size / MIB));
    fprintf(stderr, " (not timed)\n");
    double c0 = cpu_us(b->o.server_pid);
    double t0 = bench_now();
    if (seq_read_once(b))
        return -1;
    double dt = bench_now() - t0;
    printf("RESULT seq_read %.1f MB/s\n", (double)b->o.size / dt / 1e6);
    report_cpu(b, "seq_read", c0, (double)b->o.size / MIB, "us/MiB");
    fflush(stdout);
    return 0;
}

/* ---- GETATTR / LOOKUP rate ---- */

static void meta_issue(struct bench *b, bool lookup);

static void meta_done(struct bench *b, bool lookup, int status, void *data)
{
    b->inflight--;
    if (reply_ok(b, lookup ? "LOOKUP" : "GETATTR", status, data)) {
        b->completed++;
        meta_issue(b, lookup);
    }
}

static void getattr_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    meta_done(priv, false, status, data);
}

static void lookup_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    meta_done(priv, true, status, data);
}

static void meta_issue(struct bench *b, bool lookup)
{
    bool stop = bench_now() >= b->t_end;
    while (!b->failed && !stop && b->inflight < b->o.qd) {
        int rc;
        if (lookup) {
            LOOKUP3args a;
            a.what.dir = fh_arg(&b->dir);
            a.what.name = "seq";
            rc = rpc_nfs3_lookup_async(b->rpc, lookup_cb, &a, b);
        } else {
            GETATTR3args a = { .object = fh_arg(&b->file) };
            rc = rpc_nfs3_getattr_async(b->rpc, getattr_cb, &a, b);
        }
        if (!sent(b, lookup ? "LOOKUP" : "GETATTR", rc))
            return;
    }
    if (stop && b->inflight == 0)
        b->done = 1;
}

static int phase_meta(struct bench *b, bool lookup)
{
    b->completed = 0;
    b->done = 0;
    double c0 = cpu_us(b->o.server_pid);
    double t0 = bench_now();
    b->t_end = t0 + b->o.secs;
    meta_issue(b, lookup);
    if (loop_until(b, &b->done))
        return -1;
    double dt = bench_now() - t0;
    printf("RESULT %s %.0f ops/s\n", lookup ? "lookup" : "getattr", (double)b->completed / dt);
    report_cpu(b, lookup ? "lookup" : "getattr", c0, (double)b->completed, "us/op");
    fflush(stdout);
    return 0;
}

/* ---- create + 4 KiB write + commit, many chains in flight ---- */

struct chain {
    struct bench *b;
    struct fh fh;
    char name[32];
};

static int chain_start(struct bench *b, struct chain *ch);
static struct fh create_dir;
static int create_started, create_target;

static void chain_next(struct bench *b, struct chain *ch)
{
    b->completed++;
    if (bench_now() < b->t_end && create_started < create_target)
        chain_start(b, ch);
    else if (b->inflight == 0)
        b->done = 1;
}

static void chain_commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct chain *ch = priv;
    struct bench *b = ch->b;
    b->inflight--;
    if (reply_ok(b, "COMMIT", status, data))
        chain_next(b, ch);
}

static void chain_write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct chain *ch = priv;
    struct bench *b = ch->b;
    WRITE3res *res = data;
    b->inflight--;
    if (!reply_ok(b, "WRITE", status, data))
        return;
    if (res->WRITE3res_u.resok.committed != UNSTABLE) {
        /* Already durable: COMMIT would be a no-op, but a client sends it anyway
         * only when the reply said UNSTABLE. Mirror that. */
        chain_next(b, ch);
        return;
    }
    COMMIT3args c;
    memset(&c, 0, sizeof(c));
    c.file = fh_arg(&ch->fh);
    sent(b, "COMMIT", rpc_nfs3_commit_async(b->rpc, chain_commit_cb, &c, ch));
}

static void chain_create_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct chain *ch = priv;
    struct bench *b = ch->b;
    CREATE3res *res = data;
    b->inflight--;
    if (!reply_ok(b, "CREATE", status, data) ||
        !take_handle(b, "CREATE", &res->CREATE3res_u.resok.obj, &ch->fh))
        return;
    WRITE3args a;
    memset(&a, 0, sizeof(a));
    a.file = fh_arg(&ch->fh);
    a.count = 4096;
    a.stable = UNSTABLE;
    a.data.data_len = 4096;
    a.data.data_val = b->buf;
    sent(b, "WRITE", rpc_nfs3_write_async(b->rpc, chain_write_cb, &a, ch));
}

static int chain_start(struct bench *b, struct chain *ch)
{
    snprintf(ch->name, sizeof(ch->name), "f%07d", create_started++);
    CREATE3args a;
    create_args(&a, &create_dir, ch->name, GUARDED);
    return sent(b, "CREATE", rpc_nfs3_create_async(b->rpc, chain_create_cb, &a, ch)) ? 0 : -1;
}

static int phase_create(struct bench *b)
{
    if (do_mkdir(b, &b->dir, "create", &create_dir))
        return -1;
    struct chain chains[MAX_QD];
    b->completed = 0;
    b->done = 0;
    create_started = 0;
    create_target = b->o.files;
    double c0 = cpu_us(b->o.server_pid);
    double t0 = bench_now();
    b->t_end = t0 + b->o.secs;
    for (int i = 0; i < b->o.files_qd && create_started < create_target; i++) {
        chains[i].b = b;
        if (chain_start(b, &chains[i]) != 0)
            return -1;
    }
    if (loop_until(b, &b->done))
        return -1;
    double dt = bench_now() - t0;
    printf("RESULT create_4k %.0f files/s\n", (double)b->completed / dt);
    report_cpu(b, "create_4k", c0, (double)b->completed, "us/file");
    fflush(stdout);
    return 0;
}

/* ---- READDIRPLUS of a large directory ---- */

static int fill_started, fill_target;
static struct fh fill_dir;
static char fill_names[MAX_QD][32];

static void fill_issue(struct bench *b);

static void fill_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct bench *b = priv;
    b->inflight--;
    if (reply_ok(b, "CREATE", status, data))
        fill_issue(b);
}

static void fill_issue(struct bench *b)
{
    while (!b->failed && b->inflight < b->o.files_qd && fill_started < fill_target) {
        /* The name buffer is only read while the call is encoded. */
        char *name = fill_names[fill_started % MAX_QD];
        snprintf(name, 32, "entry-%06d", fill_started);
        CREATE3args a;
        create_args(&a, &fill_dir, name, UNCHECKED);
        if (!sent(b, "CREATE", rpc_nfs3_create_async(b->rpc, fill_cb, &a, b)))
            return;
        fill_started++;
    }
    if (b->inflight == 0 && fill_started >= fill_target)
        b->done = 1;
}

struct rdp {
    struct bench *b;
    uint64_t cookie;
    char verf[NFS3_COOKIEVERFSIZE];
    int entries;
    int calls;
    int eof;
};

static int rdp_issue(struct rdp *r);

static void rdp_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct rdp *r = priv;
    struct bench *b = r->b;
    READDIRPLUS3res *res = data;
    b->inflight--;
    if (!reply_ok(b, "READDIRPLUS", status, data))
        return;
    READDIRPLUS3resok *ok = &res->READDIRPLUS3res_u.resok;
    memcpy(r->verf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
    int n = 0;
    for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
        if (strcmp(e->name, ".") && strcmp(e->name, ".."))
            r->entries++;
        r->cookie = e->cookie;
        n++;
    }
    if (ok->reply.eof) {
        r->eof = 1;
        return;
    }
    if (n == 0) {
        fail(b, "READDIRPLUS", RPC_STATUS_SUCCESS, "no entries and no eof");
        return;
    }
    rdp_issue(r);
}

static int rdp_issue(struct rdp *r)
{
    READDIRPLUS3args a;
    memset(&a, 0, sizeof(a));
    a.dir = fh_arg(&fill_dir);
    a.cookie = r->cookie;
    memcpy(a.cookieverf, r->verf, NFS3_COOKIEVERFSIZE);
    a.dircount = r->b->o.rdp_max;
    a.maxcount = r->b->o.rdp_max;
    if (!sent(r->b, "READDIRPLUS", rpc_nfs3_readdirplus_async(r->b->rpc, rdp_cb, &a, r)))
        return -1;
    r->calls++;
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}

static int phase_readdirplus(struct bench *b)
{
    if (do_mkdir(b, &b->dir, "rdp", &fill_dir))
        return -1;
    fill_started = 0;
    fill_target = b->o.dir_entries;
    b->done = 0;
    double f0 = bench_now();
    fill_issue(b);
    if (loop_until(b, &b->done))
        return -1;
    fprintf(stderr, "bench_nfs: made %d entries in %.2f s\n", fill_target, bench_now() - f0);
    int walks = b->o.rdp_walks;
    double *ms = calloc((size_t)walks, sizeof(*ms));
    if (!ms)
        return -1;
    double c0 = cpu_us(b->o.server_pid);
    int calls = 0;
    for (int i = 0; i < walks; i++) {
        struct rdp r;
        memset(&r, 0, sizeof(r));
        r.b = b;
        double t0 = bench_now();
        if (rdp_issue(&r) != 0 || loop_until(b, &r.eof)) {
            free(ms);
            return -1;
        }
        ms[i] = (bench_now() - t0) * 1e3;
        calls = r.calls;
        if (r.entries != fill_target) {
            fprintf(stderr, "bench_nfs: READDIRPLUS saw %d entries, expected %d\n", r.entries,
                    fill_target);
            free(ms);
            return -1;
        }
    }
    qsort(ms, (size_t)walks, sizeof(ms[0]), cmp_double);
    printf("RESULT readdirplus_%d %.1f ms\n", fill_target, ms[walks / 2]);
    free(ms);
    fprintf(stderr, "bench_nfs: READDIRPLUS walk of %d entries took %d calls\n", fill_target,
            calls);
    report_cpu(b, "readdirplus", c0, (double)walks, "us/walk");
    fflush(stdout);
    return 0;
}

/* ---- main ---- */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_nfs --host H --nfs-port P --mount-port P --export PATH\n"
            "  [--size-mib 1024] [--chunk-kib 1024] [--qd 16] [--files-qd 64] [--secs 3]\n"
            "  [--files 50000] [--dir-entries 10000] [--rdp-max 65536] [--rdp-walks 3]\n"
            "  [--uid 0 --gid 0]\n"
            "  [--server-pid PID]\n"
            "  [--only seq_write,seq_read,getattr,lookup,create,readdirplus]\n");
}

int main(int argc, char **argv)
{
    struct bench b;
    memset(&b, 0, sizeof(b));
    struct opts *o = &b.o;
    o->host = "127.0.0.1";
    o->size = 1024ull * MIB;
    o->chunk = MIB;
    o->qd = 16;
    o->files_qd = 64;
    o->secs = 3;
    o->files = 50000;
    o->dir_entries = 10000;
    o->rdp_max = 65536;
    o->rdp_walks = 3;
    o->uid = (int)getuid();
    o->gid = (int)getgid();
    static const struct option lo[] = {
        { "host", 1, 0, 'h' },       { "nfs-port", 1, 0, 'n' },    { "mount-port", 1, 0, 'm' },
        { "export", 1, 0, 'e' },     { "size-mib", 1, 0, 's' },    { "chunk-kib", 1, 0, 'c' },
        { "qd", 1, 0, 'q' },         { "files-qd", 1, 0, 'Q' },    { "secs", 1, 0, 't' },
        { "files", 1, 0, 'f' },      { "dir-entries", 1, 0, 'd' }, { "rdp-max", 1, 0, 'r' },
        { "only", 1, 0, 'o' },       { "uid", 1, 0, 'u' },         { "gid", 1, 0, 'g' },
        { "server-pid", 1, 0, 'p' },  { "rdp-walks", 1, 0, 'w' },
        { 0, 0, 0, 0 },
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
        case 'q': o->qd = atoi(optarg); break;
        case 'Q': o->files_qd = atoi(optarg); break;
        case 't': o->secs = atof(optarg); break;
        case 'f': o->files = atoi(optarg); break;
        case 'd': o->dir_entries = atoi(optarg); break;
        case 'r': o->rdp_max = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'o': o->only = optarg; break;
        case 'u': o->uid = atoi(optarg); break;
        case 'g': o->gid = atoi(optarg); break;
        case 'p': o->server_pid = atoi(optarg); break;
        case 'w': o->rdp_walks = atoi(optarg); break;
        default: usage(); return 2;
        }
    }
    if (!o->nfs_port || !o->export_path || o->qd < 1 || o->qd > MAX_QD || o->files_qd < 1 ||
        o->files_qd > MAX_QD || o->chunk == 0 || o->size == 0 || o->rdp_walks < 1) {
        usage();
        return 2;
    }
    if (!o->mount_port)
        o->mount_port = o->nfs_port;

    int rc = 1;
    if (do_mount(&b) || do_fsinfo(&b))
        goto out;
    o->size -= o->size % o->chunk;
    b.buf = malloc(o->chunk < 4096 ? 4096 : o->chunk);
    if (!b.buf)
        goto out;
    for (uint32_t i = 0; i < o->chunk; i++)
        b.buf[i] = (char)(i * 131 + 7);

    char dname[64];
    snprintf(dname, sizeof(dname), "bench-%d-%ld", (int)getpid(), (long)time(NULL));
    if (do_mkdir(&b, &b.root, dname, &b.dir) || do_create(&b, &b.dir, "seq", &b.file))
        goto out;
    bool need_file = bench_want(o->only, "seq_read") || bench_want(o->only, "getattr") || bench_want(o->only, "lookup");
    if ((bench_want(o->only, "seq_write") || need_file) && phase_seq_write(&b))
        goto out;
    if (bench_want(o->only, "seq_read") && phase_seq_read(&b))
        goto out;
    if (bench_want(o->only, "getattr") && phase_meta(&b, false))
        goto out;
    if (bench_want(o->only, "lookup") && phase_meta(&b, true))
        goto out;
    if (bench_want(o->only, "create") && phase_create(&b))
        goto out;
    if (bench_want(o->only, "readdirplus") && phase_readdirplus(&b))
        goto out;
    rc = 0;
out:
    if (b.rpc) {
        drain(&b);
        rpc_destroy_context(b.rpc);
    }
    free(b.buf);
    return rc;
}
