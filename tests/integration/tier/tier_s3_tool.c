/* SPDX-License-Identifier: Apache-2.0
 * tier_s3_tool: drive the tier's S3 client (tier/tier_s3.h) from the command
 * line, for the integration tests (tests/integration/tier) and bench/tier.
 *
 *   tier_s3_tool [options] COMMAND [args]
 *
 * The remote comes from options or the environment (TIER_S3_ENDPOINT,
 * TIER_S3_BUCKET, TIER_S3_ACCESS_KEY, TIER_S3_SECRET_KEY, TIER_S3_REGION,
 * TIER_S3_PREFIX, TIER_S3_CA). Every request's outcome is printed as one JSON
 * line {"op":..., "err":..., "errname":..., "retryable":..., "status":...,
 * "code":..., "message":..., ...}; the client's counters come last as
 * {"stats":{...}}. Exit status: 0 when every request succeeded, 1 otherwise,
 * 2 on bad usage. Commands:
 *
 *   check                         list one key: reachability, TLS, keys, bucket
 *   head KEY [--if-match ETAG]
 *   get KEY [--out FILE] [--range OFF:LEN] [--hold] [--pause]
 *                                 --hold: after the first body bytes print
 *                                 {"first":N,...}, stop reading and wait for a
 *                                 line on stdin before going on (the tests use
 *                                 it to prove streaming and to kill the remote
 *                                 mid-transfer); --pause: the data callback
 *                                 pauses the request every time, and a timer
 *                                 resumes it (flow control)
 *   sync-get KEY [--out FILE] [--range OFF:LEN] [--dest N] [--times N]
 *            [--if-match ETAG] [--obj-size N]
 *                                 the same through tier_s3_run() from a thread;
 *                                 --dest: the body straight into a buffer of N
 *                                 bytes (tier_s3_op.dest, as a recall reads);
 *                                 --obj-size: tier_s3_op.obj_size (a range of
 *                                 all of it goes as a plain GET);
 *                                 --times: the GET N times, one after the other
 *                                 (a result line each; --out gets the last)
 *   put KEY FILE [--content-type T] [--meta NAME=VALUE]... [--stream [--hold]]
 *                                 --stream: the body from a source callback
 *                                 (--hold: after the first MiB, wait for a line
 *                                 on stdin; --pause: the source has no bytes
 *                                 ready every other call, a timer resumes)
 *   mpu-put KEY FILE [--part-size N] [--parallel N] [--content-type T] [--meta ...]
 *   mpu-leave KEY FILE [--part-size N]   upload the parts, do not complete
 *   mpu-abort KEY UPLOADID
 *   mpu-list [--prefix P] [--max N] [--all]
 *   pget KEY FILE [--part-size N] [--parallel N]   parallel ranged GETs
 *   delete KEY
 *   list [--prefix P] [--delimiter D] [--max N] [--all]
 *   repeat-head KEY COUNT          COUNT HEADs one after the other
 *
 * Options: --endpoint URL --bucket B --access-key K --secret-key S --region R
 * --prefix P --vhost --connect-host H --ca FILE --no-verify --max-conns N
 * --connect-timeout MS --first-byte-timeout MS --idle-timeout MS --keepalive MS */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_sigv4.h"
#include "tier_s3.h"

static struct event_base *base;
static struct tier_s3 *s3;
static int failures;
static int pending; /* requests in flight; the loop stops at 0 */
static bool https;  /* the endpoint is https: source bodies go UNSIGNED-PAYLOAD */

static void usage(void)
{
    fprintf(stderr, "usage: tier_s3_tool [options] COMMAND [args] (see the source's header)\n");
    exit(2);
}

static void die(const char *msg)
{
    fprintf(stderr, "tier_s3_tool: %s\n", msg);
    exit(2);
}

/* ---------------------------------------------------------------- JSON out */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static const char *errname(int err)
{
    switch (err) {
    case 0:
        return "OK";
    case -ENOENT:
        return "ENOENT";
    case -EACCES:
        return "EACCES";
    case -EINVAL:
        return "EINVAL";
    case -ECONNREFUSED:
        return "ECONNREFUSED";
    case -ECONNRESET:
        return "ECONNRESET";
    case -EPIPE:
        return "EPIPE";
    case -ETIMEDOUT:
        return "ETIMEDOUT";
    case -EPROTO:
        return "EPROTO";
    case -EAGAIN:
        return "EAGAIN";
    case -EIO:
        return "EIO";
    case -ERANGE:
        return "ERANGE";
    case -ECANCELED:
        return "ECANCELED";
    case -EHOSTUNREACH:
        return "EHOSTUNREACH";
    case SRV_ETLS:
        return "ETLS";
    case SRV_EAUTH:
        return "EAUTH";
    case SRV_ENOBUCKET:
        return "ENOBUCKET";
    case SRV_EPRECOND:
        return "EPRECOND";
    case SRV_EBADREQ:
        return "EBADREQ";
    default:
        return "other";
    }
}

static void print_result(const char *op, const struct tier_s3_result *res, const char *extra)
{
    printf("{\"op\":");
    jstr(stdout, op);
    printf(",\"err\":%d,\"errname\":\"%s\",\"retryable\":%s,\"status\":%d,\"code\":", res->err,
           errname(res->err), res->retryable ? "true" : "false", res->status);
    jstr(stdout, res->code);
    printf(",\"message\":");
    jstr(stdout, res->message);
    printf(",\"etag\":");
    jstr(stdout, res->obj.etag);
    printf(",\"size\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"last_modified\":%lld,\"version_id\":",
           res->obj.size, res->bytes, (long long)res->obj.last_modified);
    jstr(stdout, res->obj.version_id);
    printf(",\"content_type\":");
    jstr(stdout, res->obj.content_type);
    printf(",\"meta\":{");
    for (size_t i = 0; i < res->nmeta; i++) {
        if (i)
            putchar(',');
        jstr(stdout, res->meta[i].name);
        putchar(':');
        jstr(stdout, res->meta[i].value);
    }
    printf("}");
    if (res->upload_id) {
        printf(",\"upload_id\":");
        jstr(stdout, res->upload_id);
    }
    if (extra)
        printf(",%s", extra);
    printf("}\n");
    fflush(stdout);
    if (res->err)
        failures++;
}

static void print_stats(void)
{
    struct tier_s3_stats st;
    tier_s3_stats_get(s3, &st);
    printf("{\"stats\":{\"requests\":%" PRIu64 ",\"conns_opened\":%" PRIu64
           ",\"conns_reused\":%" PRIu64 ",\"resent\":%" PRIu64 ",\"conns_open\":%d,"
           "\"conns_idle\":%d,\"queued\":%d}}\n",
           st.requests, st.conns_opened, st.conns_reused, st.resent, st.conns_open,
           st.conns_idle, st.queued);
    fflush(stdout);
}

static void op_done(void)
{
    if (--pending == 0)
        event_base_loopbreak(base);
}

/* ---------------------------------------------------------------- options */

static struct {
    const char *out, *range, *ctype, *prefix, *delimiter, *if_match;
    struct tier_s3_kv meta[32];
    size_t nmeta;
    uint64_t part_size, dest, obj_size;
    int parallel, max, times;
    bool all, stream, hold, pause;
} o = {.part_size = 8 << 20, .parallel = 4, .times = 1};

static uint64_t parse_size(const char *s)
{
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    if (*e == 'K' || *e == 'k')
        v <<= 10;
    else if (*e == 'M' || *e == 'm')
        v <<= 20;
    else if (*e == 'G' || *e == 'g')
        v <<= 30;
    return v;
}

/* Wait for one line on stdin (the test's go-ahead). Blocks the loop on purpose:
 * the point is that nothing more is read or sent meanwhile. */
static void hold_wait(void)
{
    char line[64];
    if (!fgets(line, sizeof(line), stdin))
        return;
}

/* --pause: resume @p req from a timer, not from inside its callback. */
static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tier_s3_req **req = arg;
    tier_s3_resume(*req);
}

/* (A pointer to the handle: a source may first run inside tier_s3_start,
 * before the handle is known.) */
static void resume_soon(struct tier_s3_req **req)
{
    struct timeval tv = {0, 1000};
    event_base_once(base, -1, EV_TIMEOUT, resume_cb, req, &tv);
}

/* ---------------------------------------------------------------- simple ops */

static void simple_done(void *arg, struct tier_s3_result *res)
{
    print_result(arg, res, NULL);
    op_done();
}

static struct tier_s3_req *start(struct tier_s3_op *op)
{
    struct tier_s3_req *req;
    int rc = tier_s3_start(s3, op, &req);
    if (rc < 0) {
        struct tier_s3_result res = {.err = rc};
        snprintf(res.message, sizeof(res.message), "tier_s3_start: %s", srv_strerror(rc));
        print_result(tier_s3_op_name(op->code), &res, NULL);
        return NULL;
    }
    pending++;
    return req;
}

/* ---------------------------------------------------------------- get */

struct get_ctx {
    int fd;
    uint64_t got, calls, first;
    struct tier_s3_req *req;
};

static int get_data(void *arg, struct evbuffer *data)
{
    struct get_ctx *g = arg;
    size_t n = evbuffer_get_length(data);
    if (g->calls++ == 0) {
        g->first = n;
        if (o.hold) {
            printf("{\"first\":%zu}\n", n);
            fflush(stdout);
            hold_wait();
        }
    }
    g->got += n;
    while (evbuffer_get_length(data)) {
        if (g->fd >= 0) {
            int w = evbuffer_write(data, g->fd);
            if (w < 0)
                return -errno;
        } else {
            evbuffer_drain(data, evbuffer_get_length(data));
        }
    }
    if (o.pause) {
        resume_soon(&g->req);
        return TIER_S3_PAUSE;
    }
    return 0;
}

static void get_done(void *arg, struct tier_s3_result *res)
{
    struct get_ctx *g = arg;
    char extra[160];
    snprintf(extra, sizeof(extra), "\"calls\":%" PRIu64 ",\"first\":%" PRIu64
             ",\"delivered\":%" PRIu64 ",\"range_off\":%" PRIu64, g->calls, g->first, g->got,
             res->range_off);
    print_result("GetObject", res, extra);
    if (g->fd >= 0)
        close(g->fd);
    op_done();
}

static void cmd_get(const char *key)
{
    static struct get_ctx g;
    static struct tier_s3_op op;
    g.fd = -1;
    if (o.out && (g.fd = open(o.out, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        die("cannot open --out");
    op = (struct tier_s3_op){.code = TIER_S3_GET_OBJECT, .key = key, .on_data = get_data,
                             .done = get_done, .arg = &g, .if_match = o.if_match};
    if (o.range) {
        char *colon;
        op.off = strtoull(o.range, &colon, 10);
        if (*colon == ':')
            op.len = strtoull(colon + 1, NULL, 10);
    }
    g.req = start(&op);
}

/* ---------------------------------------------------------------- sync-get */

static void *loop_thread(void *arg)
{
    event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static void cmd_sync_get(const char *key)
{
    pthread_t t;
    pthread_create(&t, NULL, loop_thread, NULL);
    struct tier_s3_op op = {
        .code = TIER_S3_GET_OBJECT, .key = key, .if_match = o.if_match, .obj_size = o.obj_size};
    struct tier_s3_result res;
    if (o.range) {
        char *colon;
        op.off = strtoull(o.range, &colon, 10);
        if (*colon == ':')
            op.len = strtoull(colon + 1, NULL, 10);
    }
    char *dest = o.dest ? malloc(o.dest) : NULL;
    if (o.dest && !dest)
        die("no memory for --dest");
    op.dest = dest;
    op.dest_len = o.dest;
    for (int i = 1; i < o.times; i++) { /* the earlier ones: on the same connection */
        tier_s3_run(s3, &op, &res);
        print_result("GetObject", &res, "\"sync\":true");
        tier_s3_result_fini(&res);
    }
    tier_s3_run(s3, &op, &res);
    if (!res.err && o.out) {
        int fd = open(o.out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0 && dest && write(fd, dest, res.bytes) != (ssize_t)res.bytes)
            die("cannot write --out");
        while (fd >= 0 && res.body && evbuffer_get_length(res.body))
            if (evbuffer_write(res.body, fd) < 0)
                break;
        if (fd >= 0)
            close(fd);
    }
    char extra[96];
    snprintf(extra, sizeof(extra), "\"sync\":true,\"bytes\":%" PRIu64 ",\"body\":%s", res.bytes,
             res.body ? "true" : "false");
    free(dest);
    print_result("GetObject", &res, extra);
    tier_s3_result_fini(&res);
    event_base_loopbreak(base);
    pthread_join(t, NULL);
}

/* ---------------------------------------------------------------- put */

static void *read_file(const char *path, uint64_t *len)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        die("cannot open the input file");
    void *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, (char *)buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            die("cannot read the input file");
        got += (size_t)n;
    }
    close(fd);
    *len = (uint64_t)st.st_size;
    return buf;
}

struct src_ctx {
    int fd;
    uint64_t given, calls;
    bool held;
    struct tier_s3_req *req;
};

static ssize_t src_read(void *arg, struct evbuffer *dst, size_t max)
{
    struct src_ctx *sc = arg;
    if (o.hold && !sc->held && sc->given >= (1 << 20)) {
        sc->held = true;
        printf("{\"sent_first\":%" PRIu64 "}\n", sc->given);
        fflush(stdout);
        hold_wait();
    }
    if (o.pause && sc->calls++ % 2 == 0) {
        resume_soon(&sc->req);
        return 0;
    }
    if (max > 256 * 1024)
        max = 256 * 1024;
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(dst, (ssize_t)max, &v, 1) < 1)
        return -ENOMEM;
    ssize_t n = read(sc->fd, v.iov_base, max);
    if (n < 0)
        return -errno;
    v.iov_len = (size_t)n;
    evbuffer_commit_space(dst, &v, 1);
    sc->given += (uint64_t)n;
    return n;
}

static void sha256_file(const char *path, char hex[65])
{
    uint64_t len;
    void *buf = read_file(path, &len);
    srv_sigv4_sha256_hex(buf, (size_t)len, hex);
    free(buf);
}

static void cmd_put(const char *key, const char *path)
{
    static struct tier_s3_op op;
    static struct src_ctx sc;
    static char hex[65];
    op = (struct tier_s3_op){.code = TIER_S3_PUT_OBJECT, .key = key, .content_type = o.ctype,
                             .meta = o.meta, .nmeta = o.nmeta, .done = simple_done,
                             .arg = "PutObject"};
    if (o.stream) {
        struct stat st;
        sc.fd = open(path, O_RDONLY);
        if (sc.fd < 0 || fstat(sc.fd, &st) < 0)
            die("cannot open the input file");
        op.size = (uint64_t)st.st_size;
        op.source = src_read;
        op.source_arg = &sc;
        if (!https) {
            sha256_file(path, hex);
            op.sha256_hex = hex;
        }
    } else {
        op.data = read_file(path, &op.size);
    }
    sc.req = start(&op);
}

/* ---------------------------------------------------------------- multipart */

struct mpu {
    const char *key;
    int fd;
    uint64_t size, part_size;
    int nparts, next, inflight, done_parts;
    char *upload_id;
    struct tier_s3_part *parts;
    char (*etags)[TIER_S3_ETAG_MAX];
    bool complete, failed;
};

struct part_ctx {
    struct mpu *m;
    int number;
    void *buf;
    struct tier_s3_op op;
};

static void mpu_next(struct mpu *m);

static void complete_done(void *arg, struct tier_s3_result *res)
{
    print_result("CompleteMultipartUpload", res, NULL);
    op_done();
}

static void mpu_finish(struct mpu *m)
{
    static struct tier_s3_op op;
    if (m->failed)
        return;
    if (!m->complete) {
        printf("{\"left\":true,\"upload_id\":");
        jstr(stdout, m->upload_id);
        printf(",\"parts\":%d}\n", m->nparts);
        fflush(stdout);
        return;
    }
    for (int i = 0; i < m->nparts; i++)
        m->parts[i] = (struct tier_s3_part){i + 1, m->etags[i]};
    op = (struct tier_s3_op){.code = TIER_S3_MPU_COMPLETE, .key = m->key,
                             .upload_id = m->upload_id, .parts = m->parts,
                             .nparts = (size_t)m->nparts, .done = complete_done};
    start(&op);
}

static void part_done(void *arg, struct tier_s3_result *res)
{
    struct part_ctx *p = arg;
    struct mpu *m = p->m;
    if (res->err) {
        print_result("UploadPart", res, NULL);
        m->failed = true;
    } else {
        snprintf(m->etags[p->number - 1], TIER_S3_ETAG_MAX, "%s", res->obj.etag);
    }
    free(p->buf);
    free(p);
    m->inflight--;
    m->done_parts++;
    if (!m->failed)
        mpu_next(m);
    if (m->done_parts == m->nparts && m->inflight == 0)
        mpu_finish(m);
    op_done();
}

static void mpu_next(struct mpu *m)
{
    while (!m->failed && m->next < m->nparts && m->inflight < o.parallel) {
        int i = m->next++;
        uint64_t off = (uint64_t)i * m->part_size;
        uint64_t len = m->size - off < m->part_size ? m->size - off : m->part_size;
        struct part_ctx *p = calloc(1, sizeof(*p));
        p->m = m;
        p->number = i + 1;
        p->buf = malloc(len ? len : 1);
        if (pread(m->fd, p->buf, len, (off_t)off) != (ssize_t)len)
            die("short read of the input file");
        p->op = (struct tier_s3_op){.code = TIER_S3_MPU_PART, .key = m->key,
                                    .upload_id = m->upload_id, .part_number = i + 1,
                                    .data = p->buf, .size = len, .done = part_done, .arg = p};
        m->inflight++;
        int rc = tier_s3_start(s3, &p->op, NULL);
        if (rc < 0) {
            struct tier_s3_result res = {.err = rc};
            print_result("UploadPart", &res, NULL);
            m->failed = true;
            m->inflight--;
            free(p->buf);
            free(p);
            return;
        }
        pending++;
    }
}

static void create_done(void *arg, struct tier_s3_result *res)
{
    struct mpu *m = arg;
    print_result("CreateMultipartUpload", res, NULL);
    if (!res->err) {
        m->upload_id = strdup(res->upload_id);
        mpu_next(m);
    }
    op_done();
}

static void cmd_mpu(const char *key, const char *path, bool complete)
{
    static struct mpu m;
    static struct tier_s3_op op;
    struct stat st;
    m.key = key;
    m.fd = open(path, O_RDONLY);
    if (m.fd < 0 || fstat(m.fd, &st) < 0)
        die("cannot open the input file");
    m.size = (uint64_t)st.st_size;
    m.part_size = o.part_size;
    m.nparts = (int)((m.size + m.part_size - 1) / m.part_size);
    if (m.nparts == 0)
        m.nparts = 1;
    m.parts = calloc((size_t)m.nparts, sizeof(*m.parts));
    m.etags = calloc((size_t)m.nparts, sizeof(*m.etags));
    m.complete = complete;
    op = (struct tier_s3_op){.code = TIER_S3_MPU_CREATE, .key = key, .content_type = o.ctype,
                             .meta = o.meta, .nmeta = o.nmeta, .done = create_done, .arg = &m};
    start(&op);
}

/* ---------------------------------------------------------------- parallel get */

struct pget {
    const char *key;
    int fd;
    uint64_t size, part_size;
    int nparts, next, inflight;
    bool failed;
};

struct pget_part {
    struct pget *g;
    uint64_t off, pos;
    struct tier_s3_op op;
};

static void pget_next(struct pget *g);

static int pget_data(void *arg, struct evbuffer *data)
{
    struct pget_part *p = arg;
    while (evbuffer_get_length(data)) {
        struct evbuffer_iovec v[4];
        int n = evbuffer_peek(data, -1, NULL, v, 4);
        for (int i = 0; i < n && i < 4; i++) {
            if (pwrite(p->g->fd, v[i].iov_base, v[i].iov_len, (off_t)p->pos) !=
                (ssize_t)v[i].iov_len)
                return -EIO;
            p->pos += v[i].iov_len;
            evbuffer_drain(data, v[i].iov_len);
        }
    }
    return 0;
}

static void pget_done(void *arg, struct tier_s3_result *res)
{
    struct pget_part *p = arg;
    struct pget *g = p->g;
    if (res->err) {
        print_result("GetObject", res, NULL);
        g->failed = true;
    }
    free(p);
    g->inflight--;
    pget_next(g);
    if (g->inflight == 0 && (g->next == g->nparts || g->failed)) {
        printf("{\"op\":\"pget\",\"err\":%d,\"size\":%" PRIu64 ",\"parts\":%d}\n",
               g->failed ? -EIO : 0, g->size, g->nparts);
        fflush(stdout);
        close(g->fd);
    }
    op_done();
}

static void pget_next(struct pget *g)
{
    while (!g->failed && g->next < g->nparts && g->inflight < o.parallel) {
        struct pget_part *p = calloc(1, sizeof(*p));
        p->g = g;
        p->off = p->pos = (uint64_t)g->next * g->part_size;
        uint64_t len = g->size - p->off < g->part_size ? g->size - p->off : g->part_size;
        g->next++;
        p->op = (struct tier_s3_op){.code = TIER_S3_GET_OBJECT, .key = g->key, .off = p->off,
                                    .len = len, .on_data = pget_data, .done = pget_done,
                                    .arg = p};
        if (tier_s3_start(s3, &p->op, NULL) < 0) {
            g->failed = true;
            free(p);
            return;
        }
        g->inflight++;
        pending++;
    }
}

static void pget_head_done(void *arg, struct tier_s3_result *res)
{
    struct pget *g = arg;
    print_result("HeadObject", res, NULL);
    if (!res->err) {
        g->size = res->obj.size;
        g->nparts = (int)((g->size + g->part_size - 1) / g->part_size);
        if (ftruncate(g->fd, (off_t)g->size) < 0)
            die("cannot size the output file");
        pget_next(g);
    }
    op_done();
}

static void cmd_pget(const char *key, const char *path)
{
    static struct pget g;
    static struct tier_s3_op op;
    g.key = key;
    g.part_size = o.part_size;
    g.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (g.fd < 0)
        die("cannot open the output file");
    op = (struct tier_s3_op){.code = TIER_S3_HEAD_OBJECT, .key = key, .done = pget_head_done,
                             .arg = &g};
    start(&op);
}

/* ---------------------------------------------------------------- listings */

struct lister {
    struct tier_s3_op op;
    char *token, *kmark, *umark;
    int pages;
    uint64_t count;
};

static void list_done(void *arg, struct tier_s3_result *res)
{
    struct lister *l = arg;
    bool objects = l->op.code == TIER_S3_LIST_OBJECTS;
    l->pages++;
    if (res->err) {
        print_result(tier_s3_op_name(l->op.code), res, NULL);
        op_done();
        return;
    }
    for (size_t i = 0; i < res->nentries; i++) {
        struct tier_s3_entry *e = &res->entries[i];
        printf("{\"key\":");
        jstr(stdout, e->key);
        if (objects) {
            printf(",\"size\":%" PRIu64 ",\"etag\":", e->size);
            jstr(stdout, e->etag);
        } else {
            printf(",\"upload_id\":");
            jstr(stdout, e->upload_id);
        }
        printf(",\"time\":%lld}\n", (long long)e->time);
    }
    for (size_t i = 0; i < res->nprefixes; i++) {
        printf("{\"prefix\":");
        jstr(stdout, res->prefixes[i]);
        printf("}\n");
    }
    l->count += res->nentries + res->nprefixes;
    if (res->truncated && o.all) {
        free(l->token);
        free(l->kmark);
        free(l->umark);
        l->token = res->next_token ? strdup(res->next_token) : NULL;
        l->kmark = res->next_key_marker ? strdup(res->next_key_marker) : NULL;
        l->umark = res->next_upload_marker ? strdup(res->next_upload_marker) : NULL;
        l->op.token = l->token;
        l->op.key_marker = l->kmark;
        l->op.upload_marker = l->umark;
        start(&l->op);
    } else {
        char extra[96];
        snprintf(extra, sizeof(extra), "\"pages\":%d,\"count\":%" PRIu64 ",\"truncated\":%s",
                 l->pages, l->count, res->truncated ? "true" : "false");
        print_result(tier_s3_op_name(l->op.code), res, extra);
    }
    op_done();
}

static void cmd_list(enum tier_s3_opcode code)
{
    static struct lister l;
    l.op = (struct tier_s3_op){.code = code, .prefix = o.prefix, .delimiter = o.delimiter,
                               .max = o.max, .done = list_done, .arg = &l};
    start(&l.op);
}

/* ---------------------------------------------------------------- repeat-head */

static int heads_left;
static struct tier_s3_op head_op;

static void repeat_done(void *arg, struct tier_s3_result *res)
{
    if (res->err || heads_left == 0)
        print_result("HeadObject", res, NULL);
    if (!res->err && heads_left-- > 0)
        start(&head_op);
    op_done();
}

/* ---------------------------------------------------------------- main */

static const char *opt_env(const char *v, const char *env)
{
    return v ? v : getenv(env);
}

int main(int argc, char **argv)
{
    struct tier_s3_config cfg = {0};
    const char *endpoint = NULL, *bucket = NULL, *ak = NULL, *sk = NULL, *region = NULL,
               *prefix = NULL, *ca = NULL;
    char *args[8];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && ++i)
        if (OPT("--endpoint"))
            endpoint = v;
        else if (OPT("--bucket"))
            bucket = v;
        else if (OPT("--access-key"))
            ak = v;
        else if (OPT("--secret-key"))
            sk = v;
        else if (OPT("--region"))
            region = v;
        else if (OPT("--key-prefix"))
            prefix = v;
        else if (OPT("--ca"))
            ca = v;
        else if (OPT("--connect-host"))
            cfg.connect_host = v;
        else if (OPT("--max-conns"))
            cfg.max_conns = atoi(v);
        else if (OPT("--connect-timeout"))
            cfg.connect_timeout_ms = atoi(v);
        else if (OPT("--first-byte-timeout"))
            cfg.first_byte_timeout_ms = atoi(v);
        else if (OPT("--idle-timeout"))
            cfg.idle_timeout_ms = atoi(v);
        else if (OPT("--keepalive"))
            cfg.keepalive_ms = atoi(v);
        else if (OPT("--out"))
            o.out = v;
        else if (OPT("--range"))
            o.range = v;
        else if (OPT("--dest"))
            o.dest = parse_size(v);
        else if (OPT("--obj-size"))
            o.obj_size = parse_size(v);
        else if (OPT("--times"))
            o.times = atoi(v) > 0 ? atoi(v) : 1;
        else if (OPT("--content-type"))
            o.ctype = v;
        else if (OPT("--prefix"))
            o.prefix = v;
        else if (OPT("--delimiter"))
            o.delimiter = v;
        else if (OPT("--if-match"))
            o.if_match = v;
        else if (OPT("--part-size"))
            o.part_size = parse_size(v);
        else if (OPT("--parallel"))
            o.parallel = atoi(v);
        else if (OPT("--max"))
            o.max = atoi(v);
        else if (OPT("--meta")) {
            char *eq = strchr(v, '=');
            if (!eq || o.nmeta == 32)
                usage();
            o.meta[o.nmeta].name = strndup(v, (size_t)(eq - v));
            o.meta[o.nmeta++].value = strdup(eq + 1);
        } else if (strcmp(a, "--vhost") == 0)
            cfg.virtual_host = true;
        else if (strcmp(a, "--no-verify") == 0)
            cfg.tls_no_verify = true;
        else if (strcmp(a, "--all") == 0)
            o.all = true;
        else if (strcmp(a, "--stream") == 0)
            o.stream = true;
        else if (strcmp(a, "--hold") == 0)
            o.hold = true;
        else if (strcmp(a, "--pause") == 0)
            o.pause = true;
        else if (a[0] == '-' && a[1] == '-')
            usage();
        else if (nargs < 8)
            args[nargs++] = argv[i];
#undef OPT
    }
    if (nargs < 1)
        usage();
    cfg.endpoint = opt_env(endpoint, "TIER_S3_ENDPOINT");
    cfg.bucket = opt_env(bucket, "TIER_S3_BUCKET");
    cfg.access_key = opt_env(ak, "TIER_S3_ACCESS_KEY");
    cfg.secret_key = opt_env(sk, "TIER_S3_SECRET_KEY");
    cfg.region = opt_env(region, "TIER_S3_REGION");
    cfg.prefix = opt_env(prefix, "TIER_S3_PREFIX");
    cfg.ca_file = opt_env(ca, "TIER_S3_CA");
    if (o.parallel < 1)
        o.parallel = 1;
    https = cfg.endpoint && strncmp(cfg.endpoint, "https:", 6) == 0;

    evthread_use_pthreads();
    base = event_base_new();
    char why[256];
    int rc = tier_s3_new(&cfg, base, &s3, why, sizeof(why));
    if (rc < 0) {
        struct tier_s3_result res = {.err = rc};
        snprintf(res.message, sizeof(res.message), "%s", why);
        print_result("New", &res, NULL);
        return 1;
    }
    const char *cmd = args[0];
#define NEED(n)                                                                                    \
    do {                                                                                           \
        if (nargs < (n) + 1)                                                                       \
            usage();                                                                               \
    } while (0)
    static struct tier_s3_op op;
    if (strcmp(cmd, "check") == 0) {
        op = (struct tier_s3_op){.code = TIER_S3_CHECK, .done = simple_done, .arg = "CheckRemote"};
        start(&op);
    } else if (strcmp(cmd, "head") == 0) {
        NEED(1);
        op = (struct tier_s3_op){.code = TIER_S3_HEAD_OBJECT, .key = args[1],
                                 .if_match = o.if_match, .done = simple_done,
                                 .arg = "HeadObject"};
        start(&op);
    } else if (strcmp(cmd, "get") == 0) {
        NEED(1);
        cmd_get(args[1]);
    } else if (strcmp(cmd, "sync-get") == 0) {
        NEED(1);
        cmd_sync_get(args[1]);
    } else if (strcmp(cmd, "put") == 0) {
        NEED(2);
        cmd_put(args[1], args[2]);
    } else if (strcmp(cmd, "mpu-put") == 0 || strcmp(cmd, "mpu-leave") == 0) {
        NEED(2);
        cmd_mpu(args[1], args[2], strcmp(cmd, "mpu-put") == 0);
    } else if (strcmp(cmd, "mpu-abort") == 0) {
        NEED(2);
        op = (struct tier_s3_op){.code = TIER_S3_MPU_ABORT, .key = args[1], .upload_id = args[2],
                                 .done = simple_done, .arg = "AbortMultipartUpload"};
        start(&op);
    } else if (strcmp(cmd, "mpu-list") == 0) {
        cmd_list(TIER_S3_MPU_LIST);
    } else if (strcmp(cmd, "list") == 0) {
        cmd_list(TIER_S3_LIST_OBJECTS);
    } else if (strcmp(cmd, "pget") == 0) {
        NEED(2);
        cmd_pget(args[1], args[2]);
    } else if (strcmp(cmd, "delete") == 0) {
        NEED(1);
        op = (struct tier_s3_op){.code = TIER_S3_DELETE_OBJECT, .key = args[1],
                                 .done = simple_done, .arg = "DeleteObject"};
        start(&op);
    } else if (strcmp(cmd, "repeat-head") == 0) {
        NEED(2);
        heads_left = atoi(args[2]) - 1;
        head_op = (struct tier_s3_op){.code = TIER_S3_HEAD_OBJECT, .key = args[1],
                                      .done = repeat_done};
        start(&head_op);
    } else {
        usage();
    }
    if (pending > 0)
        event_base_dispatch(base);
    print_stats();
    tier_s3_free(s3);
    event_base_free(base);
    return failures ? 1 : 0;
}
