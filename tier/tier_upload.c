/* SPDX-License-Identifier: Apache-2.0
 * tier_upload: the uploader (tier_upload.h).
 *
 * Threads: one scanner (passes over the tiered buckets, fills the job queue),
 * `workers` upload threads (read the file, talk to the remote through
 * tier_s3_run, record the copy), and one event loop thread that runs the S3
 * clients (one per remote, made on first use). One mutex (u->mu) guards the
 * queue, the set of files in flight, the per-bucket statistics, the barriers
 * and the back-off state.
 *
 * Invariants: a file is in the queue or in flight at most once; a job whose
 * remote is backing off is not queued; the tierst record of a file is written
 * only after the remote confirmed the bytes read under one unchanged change
 * counter (or, for a renamed file copied server-side, after the copy of an old
 * copy shown to hold those bytes was confirmed). Thread: see above. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "meta.h"
#include "meta_bucket.h"
#include "meta_dirent.h"
#include "meta_inode.h"
#include "meta_keyidx.h"
#include "meta_schema.h"
#include "meta_tier.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_sigv4.h"
#include "tier_cache.h"
#include "tier_evict.h"
#include "tier_policy.h"
#include "tier_settings.h"
#include "tier_upload.h"

#define BUCKET_KIND_TIER 3  /* bucketcfg kind of a tier policy (core.h CORE_BLOB_TIER) */
#define BUCKET_KIND_CACHE 4 /* bucketcfg kind of cache mode (core.h CORE_BLOB_CACHE) */
#define SCAN_CHUNK 512     /* keys looked at per read txn */
#define META_PAIRS_MAX 64
#define FAIL_MAX 4096   /* files backing off, remembered at once */
#define FILE_TYPE_REG 1 /* enum core_ftype CORE_REG */
#define EMPTY_MD5 "d41d8cd98f00b204e9800998ecf8427e" /* the ETag of an empty object */
#define COPY_MAX_DEFAULT (5ull << 30)                /* S3's largest CopyObject */
#define PEND_QUIET_NS 2000000000ll /* a writer quiet this long is done (uncommitted writes) */

/* ---- pure helpers ---- */

uint64_t tier_backoff_ms(unsigned tries, uint32_t base_ms, uint32_t max_ms, uint32_t rnd)
{
    uint64_t d = base_ms ? base_ms : 1;
    for (unsigned i = 0; i < tries && d < max_ms; i++)
        d *= 2;
    if (d > max_ms)
        d = max_ms;
    /* jitter: d * [0.5, 1.5), i.e. d * (2^31 + rnd) / 2^32 */
    return (uint64_t)(((unsigned __int128)d * ((uint64_t)rnd + (1ull << 31))) >> 32);
}

const char *tier_file_state_name(enum tier_file_state s)
{
    switch (s) {
    case TIER_STATE_LOCAL:
        return "local";
    case TIER_STATE_UPLOADING:
        return "uploading";
    case TIER_STATE_UPLOADED:
        return "uploaded";
    case TIER_STATE_EVICTED:
        return "evicted";
    case TIER_STATE_NONE:
        break;
    }
    return "none";
}

struct objmeta_ctx {
    char *ctype;
    size_t ctlen;
    struct tier_s3_kv *kv;
    size_t max, n;
    char *strs;
    size_t strslen, used;
};

static void objmeta_one(void *arg, int type, const unsigned char *k, size_t kl,
                        const unsigned char *v, size_t vl)
{
    struct objmeta_ctx *c = arg;
    if (type == 1 && kl == 12 && strncasecmp((const char *)k, "content-type", 12) == 0) {
        if (vl < c->ctlen) {
            memcpy(c->ctype, v, vl);
            c->ctype[vl] = '\0';
        }
    } else if (type == 2 && c->n < c->max && c->used + kl + vl + 2 <= c->strslen) {
        char *s = c->strs + c->used;
        c->kv[c->n].name = s;
        memcpy(s, k, kl);
        s[kl] = '\0';
        c->kv[c->n].value = s + kl + 1;
        memcpy(s + kl + 1, v, vl);
        s[kl + 1 + vl] = '\0';
        c->used += kl + vl + 2;
        c->n++;
    }
}

int tier_objmeta_parse(const void *blob, size_t len, char *ctype, size_t ctlen,
                       struct tier_s3_kv *kv, size_t max, char *strs, size_t strslen)
{
    struct objmeta_ctx c = {
        .ctype = ctype, .ctlen = ctlen, .kv = kv, .max = max, .strs = strs, .strslen = strslen};
    ctype[0] = '\0';
    int rc = meta_objmeta_walk(blob, len, objmeta_one, &c);
    return rc < 0 ? rc : (int)c.n;
}

static void objmeta_rec(uint8_t **p, int type, const char *k, const char *v)
{
    size_t kl = strlen(k), vl = strlen(v);
    uint8_t *q = *p;
    *q++ = (uint8_t)type;
    *q++ = (uint8_t)(kl >> 8);
    *q++ = (uint8_t)kl;
    memcpy(q, k, kl);
    q += kl;
    meta_be32_put(q, (uint32_t)vl);
    q += 4;
    memcpy(q, v, vl);
    *p = q + vl;
}

int tier_objmeta_encode(const char *ctype, const struct tier_s3_kv *kv, size_t n, void **blob,
                        size_t *len)
{
    size_t need = 4 + (ctype && ctype[0] ? 7 + 12 + strlen(ctype) : 0);
    for (size_t i = 0; i < n; i++)
        need += 7 + strnlen(kv[i].name, 65535) + strlen(kv[i].value);
    uint8_t *b = malloc(need), *p = b;
    if (!b)
        return -ENOMEM;
    memcpy(p, "S3M1", 4);
    p += 4;
    if (ctype && ctype[0])
        objmeta_rec(&p, 1, "Content-Type", ctype); /* s3api's stored header */
    for (size_t i = 0; i < n; i++)
        if (strlen(kv[i].name) <= 65535)
            objmeta_rec(&p, 2, kv[i].name, kv[i].value);
    *blob = b;
    *len = (size_t)(p - b);
    return 0;
}

/* ---- state ---- */

struct job {
    struct job *next;
    bool del; /* delete a stale remote copy (its record: ino) */
    uint64_t ino, bucket, change, size;
    uint32_t tenant, remote;
    char *key;    /* upload: the file's key; del: the copy's key */
    char *oldkey; /* upload: a copy under another key to delete after, or NULL */
    uint32_t oldremote;
    /* the file's recorded copy (under oldkey for a rename, else under key: a change of
     * its metadata only) may hold its bytes (its record: change counter, ETag): then it
     * is copied server-side, or kept as it is, not uploaded (copy_renamed) */
    bool copyable;
    bool evicted; /* copy_renamed: the file is evicted (the recorded copy is its only one) */
    uint64_t rec_change;
    char rec_etag[TIER_S3_ETAG_MAX];
    int64_t ctime_ns; /* the change's time (for barriers) */
    uint64_t level;   /* the dirty-bound level of the file (tier_dirty.h) */
};

struct bstat {
    uint64_t bucket;
    uint32_t tenant;
    char name[256];
    struct tier_bucket_stats st;  /* of the last complete pass */
    struct tier_bucket_stats cur; /* being gathered */
    uint64_t uploading;
    int64_t barrier_ns;    /* files changed before this are due at once (0: none) */
    uint64_t barrier_pass; /* the pass counter when the barrier was set */
    uint64_t barrier_seq;
    uint64_t pend_barrier; /* last complete pass: files/deletes not done before barrier */
    uint64_t pend_barrier_cur;
    uint64_t done_pass; /* last complete pass that looked at it */
    uint64_t evictions; /* files evicted since the start */
    bool seen;          /* the current pass looked at it */
    int64_t hasten_ns;  /* files changed before this are due at once (lifecycle; 0: none) */
};

struct rclient {
    uint32_t id;
    struct tier_s3 *s3;
    int parallel;
    unsigned tries;        /* retryable failures in a row */
    int64_t down_until_ms; /* backing off until */
    bool swept;            /* leftovers of earlier runs aborted */
};

/* A multipart upload of this run whose abort failed (its remote was down): aborted again
 * after the next upload that reaches that remote. */
struct stale_mpu {
    uint32_t remote;
    char *key, *upload_id;
};

struct fail {
    uint64_t ino;
    unsigned tries;
    int64_t until_ms;
};

struct tier_upload {
    struct tier_upload_config cfg;
    pthread_mutex_t mu;
    pthread_mutex_t mk;     /* held while a client is made and its remote swept */
    pthread_cond_t work_cv; /* a job is queued, or stop */
    pthread_cond_t scan_cv; /* kick, or stop */
    bool stop, kicked;
    bool closing; /* the clients are being freed: no request may start */
    struct job *head, *tail;
    size_t queued;
    uint64_t *inflight; /* inos of jobs queued or running */
    size_t ninflight, capinflight;
    struct bstat *b;
    size_t nb, capb;
    struct rclient *rc;
    size_t nrc, caprc;
    struct tier_s3 **retired; /* clients of remotes changed since (freed at the stop) */
    size_t nretired;
    struct stale_mpu *stale; /* aborts to send again */
    size_t nstale, capstale;
    struct fail fails[FAIL_MAX];
    size_t nfails;
    uint64_t passes; /* passes begun */
    /* eviction candidates of the current pass (the scanner thread's) */
    struct tier_evict_cand *cands;
    size_t ncands, capcands;
    uint64_t evict_files, evict_bytes, evict_errors;
    uint64_t fetch_ok, fetch_bytes, fetch_retry, fetch_changed;
    uint64_t seq;
    int64_t started_s;
    /* counters */
    uint64_t up_files, up_bytes, del_files, err_total;
    uint64_t err_kind[6];
    uint64_t req_n[TIER_S3_OP_LAST + 1]; /* the uploader's requests sent, by opcode */
    uint64_t copies, copy_bytes;         /* renames made by a server-side copy */
    uint64_t copy_mismatch;              /* renamed files whose bytes were not the copy's */
    uint64_t kept;                       /* changes needing no upload: the copy is current */
    uint64_t meta_copies;                /* metadata given to the copy by a copy onto itself */
    uint64_t copy_lost;                  /* evicted files whose copy changed or went */
    uint64_t held_pending; /* passes that held a file back: uncommitted writes, or empty and new */
    uint64_t body_bytes;               /* body bytes of its PUTs and parts sent */
    uint64_t changed;                  /* uploads given up: the file changed */
    /* threads */
    struct event_base *base;
    struct event *keep;
    pthread_t loop_thread, scan_thread, *work_threads;
    uint32_t nwork;
    bool loop_started, scan_started;
    uint32_t rnd;
};

enum { EK_CONNECT, EK_TIMEOUT, EK_AUTH, EK_REMOTE, EK_LOCAL, EK_CHANGED };
static const char *const ek_names[] = {"connect", "timeout", "auth", "remote", "local", "changed"};

static _Atomic(struct tier_upload *) the_uploader;

static int64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static uint32_t rnd32(struct tier_upload *u)
{
    /* xorshift: jitter only, no secrecy needed (mu held) */
    uint32_t x = u->rnd;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    u->rnd = x ? x : 0x9e3779b9u;
    return u->rnd;
}

/* mu held */
static struct bstat *bstat_get(struct tier_upload *u, uint64_t bucket, bool make)
{
    for (size_t i = 0; i < u->nb; i++)
        if (u->b[i].bucket == bucket)
            return &u->b[i];
    if (!make)
        return NULL;
    if (u->nb == u->capb) {
        size_t nc = u->capb ? u->capb * 2 : 8;
        void *nv = realloc(u->b, nc * sizeof(*u->b));
        if (!nv)
            return NULL;
        u->b = nv;
        u->capb = nc;
    }
    struct bstat *b = &u->b[u->nb++];
    memset(b, 0, sizeof(*b));
    b->bucket = bucket;
    return b;
}

static bool inflight_has(struct tier_upload *u, uint64_t ino)
{
    for (size_t i = 0; i < u->ninflight; i++)
        if (u->inflight[i] == ino)
            return true;
    return false;
}

static int inflight_add(struct tier_upload *u, uint64_t ino)
{
    if (u->ninflight == u->capinflight) {
        size_t nc = u->capinflight ? u->capinflight * 2 : 64;
        void *nv = realloc(u->inflight, nc * sizeof(*u->inflight));
        if (!nv)
            return -ENOMEM;
        u->inflight = nv;
        u->capinflight = nc;
    }
    u->inflight[u->ninflight++] = ino;
    return 0;
}

static void inflight_del(struct tier_upload *u, uint64_t ino)
{
    for (size_t i = 0; i < u->ninflight; i++) {
        if (u->inflight[i] == ino) {
            u->inflight[i] = u->inflight[--u->ninflight];
            return;
        }
    }
}

static struct fail *fail_find(struct tier_upload *u, uint64_t ino)
{
    for (size_t i = 0; i < u->nfails; i++)
        if (u->fails[i].ino == ino)
            return &u->fails[i];
    return NULL;
}

static void fail_note(struct tier_upload *u, uint64_t ino)
{
    struct fail *f = fail_find(u, ino);
    if (!f) {
        if (u->nfails == FAIL_MAX) { /* forget the one due first */
            size_t m = 0;
            for (size_t i = 1; i < u->nfails; i++)
                if (u->fails[i].until_ms < u->fails[m].until_ms)
                    m = i;
            u->fails[m] = u->fails[--u->nfails];
        }
        f = &u->fails[u->nfails++];
        f->ino = ino;
        f->tries = 0;
    }
    f->until_ms = srv_now_ms() + (int64_t)tier_backoff_ms(f->tries, u->cfg.retry_base_ms,
                                                          u->cfg.retry_max_ms, rnd32(u));
    f->tries++;
}

static void fail_clear(struct tier_upload *u, uint64_t ino)
{
    struct fail *f = fail_find(u, ino);
    if (f)
        *f = u->fails[--u->nfails];
}

static struct rclient *rclient_find(struct tier_upload *u, uint32_t id)
{
    for (size_t i = 0; i < u->nrc; i++)
        if (u->rc[i].id == id)
            return &u->rc[i];
    return NULL;
}

static bool remote_down(struct tier_upload *u, uint32_t id)
{
    struct rclient *r = rclient_find(u, id);
    return r && r->down_until_ms > srv_now_ms();
}

/* ---- the client loop ---- */

static void keep_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void *loop_main(void *arg)
{
    struct tier_upload *u = arg;
    event_base_dispatch(u->base);
    return NULL;
}

/* Run @p fn(arg) on the loop thread and wait for it. */
struct on_loop {
    void (*fn)(void *);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void on_loop_cb(evutil_socket_t fd, short what, void *arg)
{
    struct on_loop *o = arg;
    (void)fd;
    (void)what;
    o->fn(o->arg);
    pthread_mutex_lock(&o->mu);
    o->done = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static int run_on_loop(struct tier_upload *u, void (*fn)(void *), void *arg)
{
    struct on_loop o = {.fn = fn, .arg = arg};
    pthread_mutex_init(&o.mu, NULL);
    pthread_cond_init(&o.cv, NULL);
    int rc = event_base_once(u->base, -1, EV_TIMEOUT, on_loop_cb, &o, NULL);
    if (rc == 0) {
        pthread_mutex_lock(&o.mu);
        while (!o.done)
            pthread_cond_wait(&o.cv, &o.mu);
        pthread_mutex_unlock(&o.mu);
    }
    pthread_mutex_destroy(&o.mu);
    pthread_cond_destroy(&o.cv);
    return rc == 0 ? 0 : -ENOMEM;
}

struct mk_client {
    struct tier_upload *u;
    struct tier_upload_remote *r;
    struct event_base *base;
    struct tier_s3 *s3;
    int rc;
    char why[256];
};

static void mk_client_fn(void *arg)
{
    struct mk_client *m = arg;
    if (m->u->closing) {
        m->rc = -ECANCELED;
        return;
    }
    m->rc = tier_s3_new(&m->r->cfg, m->base, &m->s3, m->why, sizeof(m->why));
}

static void client_free_fn(void *arg)
{
    tier_s3_free(arg);
}

struct many {
    struct tier_upload *u;
    const struct tier_s3_op *ops;
    struct tier_s3_result *res;
    size_t n, left;
    struct tier_s3 *s3;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct many_one {
    struct many *m;
    size_t i;
};

static void many_done(void *arg, struct tier_s3_result *res)
{
    struct many_one *o = arg;
    struct many *m = o->m;
    tier_s3_result_take(&m->res[o->i], res);
    pthread_mutex_lock(&m->mu);
    m->left--;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

struct many_start {
    struct many *m;
    struct tier_s3_op *ops; /* copies with done/arg set */
    struct many_one *ones;
};

static void many_start_fn(void *arg)
{
    struct many_start *s = arg;
    struct many *m = s->m;
    for (size_t i = 0; i < m->n; i++) {
        /* the loop thread frees the clients when stopping: after that, start nothing */
        int rc = m->u->closing ? -ECANCELED : tier_s3_start(m->s3, &s->ops[i], NULL);
        if (rc) {
            m->res[i].err = rc;
            snprintf(m->res[i].message, sizeof(m->res[i].message), "%s", srv_strerror(rc));
            pthread_mutex_lock(&m->mu);
            m->left--;
            pthread_mutex_unlock(&m->mu);
        }
    }
}

/* Run @p n ops at once on the client's loop and wait for all (results in @p res). */
static int run_many(struct tier_upload *u, struct tier_s3 *s3, const struct tier_s3_op *ops,
                    size_t n, struct tier_s3_result *res)
{
    struct many m = {.u = u, .ops = ops, .res = res, .n = n, .left = n, .s3 = s3};
    struct many_start s = {&m, calloc(n, sizeof(*s.ops)), calloc(n, sizeof(*s.ones))};
    if (!s.ops || !s.ones) {
        free(s.ops);
        free(s.ones);
        return -ENOMEM;
    }
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    for (size_t i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        s.ops[i] = ops[i];
        s.ones[i] = (struct many_one){&m, i};
        s.ops[i].done = many_done;
        s.ops[i].arg = &s.ones[i];
    }
    int rc = run_on_loop(u, many_start_fn, &s);
    if (rc == 0) {
        pthread_mutex_lock(&m.mu);
        while (m.left)
            pthread_cond_wait(&m.cv, &m.mu);
        pthread_mutex_unlock(&m.mu);
    }
    pthread_mutex_destroy(&m.mu);
    pthread_cond_destroy(&m.cv);
    free(s.ops);
    free(s.ones);
    return rc;
}

static int run_one(struct tier_upload *u, struct tier_s3 *s3, const struct tier_s3_op *op,
                   struct tier_s3_result *res)
{
    int rc = run_many(u, s3, op, 1, res);
    return rc ? rc : res->err;
}

/* Count one request of the uploader (uploads and deletes) for /metrics. */
static void note_req(struct tier_upload *u, const struct tier_s3_op *op)
{
    pthread_mutex_lock(&u->mu);
    if ((unsigned)op->code <= TIER_S3_OP_LAST)
        u->req_n[op->code]++;
    if (op->code == TIER_S3_PUT_OBJECT || op->code == TIER_S3_MPU_PART)
        u->body_bytes += op->size;
    pthread_mutex_unlock(&u->mu);
}

/* run_one for the uploader's own requests: counted. */
static int up_one(struct tier_upload *u, struct tier_s3 *s3, const struct tier_s3_op *op,
                  struct tier_s3_result *res)
{
    note_req(u, op);
    return run_one(u, s3, op, res);
}

/* ---- remotes ---- */

static int err_kind(int err)
{
    switch (err) {
    case -ECONNREFUSED:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ECONNRESET:
    case -EPIPE:
        return EK_CONNECT;
    case -ETIMEDOUT:
        return EK_TIMEOUT;
    case SRV_EAUTH:
    case -EACCES:
    case SRV_ETLS:
        return EK_AUTH;
    default:
        return EK_REMOTE;
    }
}

/* Note a failure of @p bucket's work on remote @p id: the message for the stats, the
 * counters, and the back-off (the remote's when @p retryable, else the file's). */
static void failed(struct tier_upload *u, uint64_t bucket, uint32_t id, uint64_t ino, int kind,
                   bool retryable, const char *what, const char *msg)
{
    pthread_mutex_lock(&u->mu);
    u->err_total++;
    u->err_kind[kind]++;
    if (kind == EK_CHANGED)
        u->changed++;
    struct bstat *b = bstat_get(u, bucket, false);
    if (b) {
        snprintf(b->st.last_error, sizeof(b->st.last_error), "%s: %s", what, msg);
        b->st.last_error_s = (int64_t)time(NULL);
    }
    struct rclient *r = rclient_find(u, id);
    if (retryable && r) {
        r->down_until_ms = srv_now_ms() + (int64_t)tier_backoff_ms(r->tries, u->cfg.retry_base_ms,
                                                                   u->cfg.retry_max_ms, rnd32(u));
        r->tries++;
    } else if (kind != EK_CHANGED) {
        fail_note(u, ino);
    }
    pthread_mutex_unlock(&u->mu);
    srv_log(WARN, TIER, "remote %u: %s: %s (tried again later)", id, what, msg);
}

/* Abort the multipart uploads an earlier run left on remote @p id: its prefix belongs to
 * one bucket of this daemon (a policy is refused for a remote another bucket uses), and
 * this runs (u->mk held) before the remote's first use since the start. */
static void sweep(struct tier_upload *u, struct tier_s3 *s3, uint32_t id)
{
    char *km = NULL, *um = NULL;
    unsigned aborted = 0;
    for (int page = 0; page < 100; page++) {
        struct tier_s3_op op = {
            .code = TIER_S3_MPU_LIST, .prefix = "", .key_marker = km, .upload_marker = um};
        struct tier_s3_result res;
        int rc = run_one(u, s3, &op, &res);
        free(km);
        free(um);
        km = um = NULL;
        if (rc) {
            srv_log(WARN, TIER, "remote %u: listing leftover multipart uploads: %s", id,
                    res.message);
            tier_s3_result_fini(&res);
            break;
        }
        for (size_t i = 0; i < res.nentries; i++) {
            /* none is this run's: the sweep runs before the remote's first use */
            struct tier_s3_entry *e = &res.entries[i];
            struct tier_s3_op ab = {
                .code = TIER_S3_MPU_ABORT, .key = e->key, .upload_id = e->upload_id};
            struct tier_s3_result ar;
            if (run_one(u, s3, &ab, &ar) == 0)
                aborted++;
            tier_s3_result_fini(&ar);
        }
        bool more = res.truncated && res.next_key_marker;
        if (more) {
            km = res.next_key_marker;
            um = res.next_upload_marker;
            res.next_key_marker = res.next_upload_marker = NULL;
        }
        tier_s3_result_fini(&res);
        if (!more)
            break;
    }
    free(km);
    free(um);
    if (aborted)
        srv_log(INFO, TIER, "remote %u: aborted %u multipart upload%s left by an earlier run", id,
                aborted, aborted == 1 ? "" : "s");
}

static struct tier_s3 *client_make(struct tier_upload *u, uint32_t id, int *parallel, char *why,
                                   size_t whylen, int *err, bool sweep_it);

/* The client of remote @p id, made on first use; with @p sweep_it (the uploader's uses)
 * the remote's leftover multipart uploads are aborted first, once. Reads (recalls, cache
 * listings) never sweep: a read-only cache node must not abort the writer node's uploads.
 * @return it, or NULL (@p why says). */
static struct tier_s3 *client_get(struct tier_upload *u, uint32_t id, int *parallel, char *why,
                                  size_t whylen, int *err, bool sweep_it)
{
    *err = -EIO;
    pthread_mutex_lock(&u->mu);
    if (u->closing) {
        pthread_mutex_unlock(&u->mu);
        snprintf(why, whylen, "stopping");
        return NULL;
    }
    struct rclient *r = rclient_find(u, id);
    if (r && r->s3 && (r->swept || !sweep_it)) {
        *parallel = r->parallel;
        struct tier_s3 *s3 = r->s3;
        pthread_mutex_unlock(&u->mu);
        return s3;
    }
    pthread_mutex_unlock(&u->mu);
    /* one maker at a time: the first worker makes the client and sweeps the remote,
     * the others wait and then find it */
    pthread_mutex_lock(&u->mk);
    pthread_mutex_lock(&u->mu);
    r = rclient_find(u, id);
    if (r && r->s3) {
        *parallel = r->parallel;
        struct tier_s3 *s3 = r->s3;
        bool need = sweep_it && !r->swept;
        pthread_mutex_unlock(&u->mu);
        if (need) { /* made by a read: sweep before the first upload */
            sweep(u, s3, id);
            pthread_mutex_lock(&u->mu);
            r = rclient_find(u, id);
            if (r)
                r->swept = true;
            pthread_mutex_unlock(&u->mu);
        }
        pthread_mutex_unlock(&u->mk);
        return s3;
    }
    pthread_mutex_unlock(&u->mu);
    struct tier_s3 *made = client_make(u, id, parallel, why, whylen, err, sweep_it);
    pthread_mutex_unlock(&u->mk);
    return made;
}

static struct tier_s3 *client_of(struct tier_upload *u, uint32_t id, int *parallel, char *why,
                                 size_t whylen, int *err)
{
    return client_get(u, id, parallel, why, whylen, err, true);
}

/* client_get's second half, u->mk held. */
static struct tier_s3 *client_make(struct tier_upload *u, uint32_t id, int *parallel, char *why,
                                   size_t whylen, int *err, bool sweep_it)
{
    struct rclient *r;
    struct tier_upload_remote *rem = calloc(1, sizeof(*rem));
    if (!rem) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    int rc = u->cfg.remote(u->cfg.remote_arg, id, rem);
    struct mk_client m = {.u = u, .r = rem, .base = u->base};
    if (rc == 0)
        rc = run_on_loop(u, mk_client_fn, &m);
    if (rc == 0)
        rc = m.rc;
    if (rc) {
        *err = rc;
        snprintf(why, whylen, "%s", m.why[0] ? m.why : srv_strerror(rc));
        memset(rem, 0, sizeof(*rem));
        free(rem);
        return NULL;
    }
    int par = rem->parallel > 0 ? rem->parallel : 4;
    memset(rem, 0, sizeof(*rem)); /* the secret: the client keeps its own copy */
    free(rem);
    pthread_mutex_lock(&u->mu);
    r = rclient_find(u, id);
    bool swept = r && r->swept; /* a remote changed in place: its uploads go on */
    pthread_mutex_unlock(&u->mu);
    if (sweep_it && !swept)
        sweep(u, m.s3, id);
    pthread_mutex_lock(&u->mu);
    r = rclient_find(u, id);
    if (!r && u->nrc == u->caprc) {
        size_t nc = u->caprc ? u->caprc * 2 : 4;
        void *nv = realloc(u->rc, nc * sizeof(*u->rc));
        if (nv) {
            u->rc = nv;
            u->caprc = nc;
        }
    }
    if (!r && u->nrc < u->caprc) {
        r = &u->rc[u->nrc++];
        memset(r, 0, sizeof(*r));
        r->id = id;
    }
    struct tier_s3 *out = m.s3;
    if (u->closing) {
        r = NULL; /* stopping: the loop frees no client made now, so free it here */
        out = NULL;
    } else if (r && !r->s3) {
        r->s3 = m.s3;
        r->parallel = par;
        r->swept = r->swept || sweep_it; /* (a remote changed in place stays swept) */
        m.s3 = NULL;
    } else if (r) {
        out = r->s3; /* another worker made one meanwhile */
    }
    *parallel = r ? r->parallel : par;
    pthread_mutex_unlock(&u->mu);
    if (m.s3 && out != m.s3) {
        struct tier_s3 *extra = m.s3;
        run_on_loop(u, client_free_fn, extra);
    }
    if (!r || !out) {
        snprintf(why, whylen, "%s", u->closing ? "stopping" : "out of memory");
        return NULL;
    }
    return out;
}

/* ---- recording ---- */

struct rec_op {
    uint64_t ino;
    const struct meta_tier_copy *c; /* NULL: delete the record if it still is @p old */
    const char *old_key;
    uint64_t old_change;
};

static int rec_fn(struct meta_txn *t, void *arg)
{
    struct rec_op *a = arg;
    if (a->c) {
        /* the new copy's record keeps the file's last read time the old one had */
        struct meta_tier_copy *cur = malloc(sizeof(*cur));
        if (!cur)
            return -ENOMEM;
        uint32_t read_s = a->c->st.read_s;
        if (meta_tier_get(t, a->ino, cur) == 0 && cur->st.read_s > read_s)
            read_s = cur->st.read_s;
        *cur = *a->c;
        cur->st.read_s = read_s;
        int rc = meta_tier_put(t, a->ino, cur);
        free(cur);
        return rc;
    }
    struct meta_tier_copy cur;
    int rc = meta_tier_get(t, a->ino, &cur);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && (strcmp(cur.key, a->old_key) != 0 || cur.st.change != a->old_change))
        return 0; /* replaced meanwhile: keep the new record */
    rc = meta_tier_del(t, a->ino);
    return rc == -ENOENT ? 0 : rc;
}

/* The inode's change counter now (0: gone or not a file). */
static uint64_t change_now(struct tier_upload *u, uint64_t ino)
{
    struct meta_txn *t;
    struct meta_inode r;
    uint64_t ch = 0;
    if (meta_rtxn_begin(u->cfg.meta, &t) == 0) {
        if (meta_inode_get(t, ino, &r) == 0 && r.type == FILE_TYPE_REG && r.nlink)
            ch = r.change;
        meta_rtxn_end(t);
    }
    return ch;
}

/* Log (debug) why the upload of job @p j is given up at @p where: what the file is now
 * against the state the job was made from (its key, size, change; a writer still at
 * it), and how many parts had gone out. */
static void changed_note(struct tier_upload *u, const struct job *j, const char *where,
                         uint64_t sent)
{
    if ((int)SRV_LOG_DEBUG > srv_log_levels[SRV_SUB_TIER])
        return;
    struct meta_txn *t;
    struct meta_inode r;
    bool have = false;
    if (meta_rtxn_begin(u->cfg.meta, &t) == 0) {
        have = meta_inode_get(t, j->ino, &r) == 0;
        meta_rtxn_end(t);
    }
    int64_t pend_ns = 0;
    int pend = u->cfg.pending ? u->cfg.pending(u->cfg.core_arg, j->ino, &pend_ns) : 0;
    int64_t now = real_ns();
    srv_log(DEBUG, TIER,
            "remote %u: upload of %s (ino=%" PRIu64 ", %" PRIu64 " bytes, change %" PRIu64
            " of %.3f s ago) given up %s after %" PRIu64 " parts: now %" PRIu64
            " bytes, change %" PRIu64 " of %.3f s ago, nlink %u, %s",
            j->remote, j->key, j->ino, j->size, j->change, (double)(now - j->ctime_ns) / 1e9, where,
            sent, have ? r.size : 0, have ? r.change : 0,
            have ? (double)(now - ((int64_t)r.ctime_s * 1000000000ll + r.ctime_ns)) / 1e9 : 0.0,
            have ? r.nlink : 0, pend ? "uncommitted writes" : "no uncommitted writes");
}

/* Does @p key of @p bucket name a file now? */
static bool key_used(struct tier_upload *u, uint64_t bucket, const char *key)
{
    struct meta_txn *t;
    uint64_t ino = 0;
    uint32_t type = 0;
    bool used = true; /* when unsure, keep the remote copy */
    if (meta_rtxn_begin(u->cfg.meta, &t) == 0) {
        int rc = meta_keyidx_get(t, bucket, key, strlen(key), &ino, &type);
        used = rc != -ENOENT;
        meta_rtxn_end(t);
    }
    return used;
}

/* ---- one job ---- */

static int forget_fn(struct meta_txn *t, void *arg)
{
    const struct rec_op *a = arg;
    struct meta_tier_copy cur;
    int rc = meta_tier_get(t, a->ino, &cur);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && strcmp(cur.key, a->old_key) != 0)
        return 0;
    rc = meta_tier_del(t, a->ino);
    return rc == -ENOENT ? 0 : rc;
}

/* A remote copy at @p key was just deleted because no file had the key. Should a file
 * have taken the key and been uploaded between that check and the delete, its copy is
 * gone: forget its record, so the next pass uploads it again. */
static void after_delete(struct tier_upload *u, uint64_t bucket, const char *key)
{
    struct meta_txn *t;
    uint64_t ino = 0;
    uint32_t type = 0;
    if (meta_rtxn_begin(u->cfg.meta, &t) != 0)
        return;
    int rc = meta_keyidx_get(t, bucket, key, strlen(key), &ino, &type);
    meta_rtxn_end(t);
    if (rc == 0 && ino) {
        struct rec_op a = {ino, NULL, key, 0};
        meta_submit(u->cfg.meta, forget_fn, &a, 0);
    }
}

static int delete_copy(struct tier_upload *u, struct tier_s3 *s3, uint32_t remote, uint64_t bucket,
                       uint64_t ino, const char *key)
{
    struct tier_s3_op op = {.code = TIER_S3_DELETE_OBJECT, .key = key};
    struct tier_s3_result res;
    int rc = up_one(u, s3, &op, &res);
    if (rc)
        failed(u, bucket, remote, ino, err_kind(rc), res.retryable, "delete", res.message);
    tier_s3_result_fini(&res);
    return rc;
}

static void do_delete(struct tier_upload *u, struct job *j)
{
    char why[256];
    int par;
    if (key_used(u, j->bucket, j->key)) {
        /* another file took the key: its upload replaces the copy */
        struct rec_op a = {j->ino, NULL, j->key, j->change};
        meta_submit(u->cfg.meta, rec_fn, &a, 0);
        return;
    }
    int err;
    struct tier_s3 *s3 = client_of(u, j->remote, &par, why, sizeof(why), &err);
    if (!s3 && err == -ENOENT) {
        /* the remote was deleted: its copies are out of reach; forget them */
        struct rec_op a = {j->ino, NULL, j->key, j->change};
        if (meta_submit(u->cfg.meta, rec_fn, &a, 0) == 0)
            srv_log(WARN, TIER, "remote %u no longer exists: its copy of %s stays there", j->remote,
                    j->key);
        return;
    }
    if (!s3) {
        failed(u, j->bucket, j->remote, j->ino, EK_LOCAL, false, "remote", why);
        return;
    }
    if (delete_copy(u, s3, j->remote, j->bucket, j->ino, j->key) != 0)
        return;
    after_delete(u, j->bucket, j->key);
    struct rec_op a = {j->ino, NULL, j->key, j->change};
    if (meta_submit(u->cfg.meta, rec_fn, &a, 0) == 0) {
        pthread_mutex_lock(&u->mu);
        u->del_files++;
        pthread_mutex_unlock(&u->mu);
        srv_log(DEBUG, TIER, "remote %u: deleted %s (its file is gone)", j->remote, j->key);
    }
}

/* Content-Type and user metadata of @p ino (empty when none). */
static int obj_meta(struct tier_upload *u, uint64_t ino, char *ctype, size_t ctlen,
                    struct tier_s3_kv *kv, char *strs, size_t strslen)
{
    struct meta_txn *t;
    void *blob = NULL;
    size_t len = 0;
    char etag[META_ETAG_MAX + 1];
    ctype[0] = '\0';
    int rc = meta_rtxn_begin(u->cfg.meta, &t);
    if (rc)
        return rc;
    rc = meta_objmeta_get(t, ino, etag, sizeof(etag), &blob, &len);
    meta_rtxn_end(t);
    int n = 0;
    if (rc == 0)
        n = tier_objmeta_parse(blob, len, ctype, ctlen, kv, META_PAIRS_MAX, strs, strslen);
    free(blob);
    if (rc == -ENOENT)
        return 0;
    return rc ? rc : (n < 0 ? 0 : n); /* a malformed blob: upload without metadata */
}

static int read_all(struct tier_upload *u, struct job *j, uint64_t off, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        size_t n = 0;
        int rc = u->cfg.read(u->cfg.read_arg, j->tenant, j->ino, off + got, (char *)buf + got,
                             len - got, &n);
        if (rc)
            return rc;
        if (n == 0)
            return -EAGAIN; /* shrank meanwhile */
        got += n;
    }
    return 0;
}

/* ---- a window of multipart parts in flight ---- */

/* One part in flight: its buffer (read and hashed by the worker), its op and outcome. */
struct wslot {
    struct window *w;
    char *buf;
    struct tier_s3_op op;
    struct tier_s3_result res;
    char sha[65];
    uint64_t part; /* 0-based */
    bool busy;     /* started and not harvested yet */
    bool done;     /* its done ran: res holds the outcome */
};

/* The parts of one upload in flight: at most n at once, each started as soon as the
 * worker has read and hashed it (no wave waits for its slowest part). */
struct window {
    struct tier_upload *u;
    struct tier_s3 *s3;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct wslot *s;
    size_t n;
};

static void wslot_done(void *arg, struct tier_s3_result *res)
{
    struct wslot *s = arg;
    struct window *w = s->w;
    pthread_mutex_lock(&w->mu);
    tier_s3_result_take(&s->res, res);
    s->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wslot_start_fn(void *arg)
{
    struct wslot *s = arg;
    struct window *w = s->w;
    /* the loop thread frees the clients when stopping: after that, start nothing */
    int rc = w->u->closing ? -ECANCELED : tier_s3_start(w->s3, &s->op, NULL);
    if (rc) {
        pthread_mutex_lock(&w->mu);
        s->res.err = rc;
        snprintf(s->res.message, sizeof(s->res.message), "%s", srv_strerror(rc));
        s->done = true;
        pthread_mutex_unlock(&w->mu);
    }
}

/* Start slot @p s (its op filled) on the loop. */
static void window_start(struct window *w, struct wslot *s)
{
    memset(&s->res, 0, sizeof(s->res));
    s->op.done = wslot_done;
    s->op.arg = s;
    s->busy = true;
    s->done = false;
    note_req(w->u, &s->op);
    if (run_on_loop(w->u, wslot_start_fn, s) != 0) {
        s->res.err = -ENOMEM;
        snprintf(s->res.message, sizeof(s->res.message), "cannot reach the client's loop");
        s->done = true;
    }
}

/* Wait until a slot is free (every one when @p all) and harvest the ended parts with
 * @p harvest (called without the lock). @return the free slot (NULL with @p all). */
static struct wslot *window_wait(struct window *w, bool all,
                                 void (*harvest)(void *arg, struct wslot *s), void *harg)
{
    for (;;) {
        struct wslot *ended = NULL, *idle = NULL;
        size_t busy = 0;
        pthread_mutex_lock(&w->mu);
        for (;;) {
            busy = 0;
            for (size_t i = 0; i < w->n; i++) {
                if (!w->s[i].busy)
                    idle = idle ? idle : &w->s[i];
                else if (w->s[i].done)
                    ended = ended ? ended : &w->s[i];
                busy += w->s[i].busy;
            }
            if (ended || (idle && !all) || busy == 0)
                break;
            pthread_cond_wait(&w->cv, &w->mu);
        }
        pthread_mutex_unlock(&w->mu);
        if (ended) {
            harvest(harg, ended);
            tier_s3_result_fini(&ended->res);
            pthread_mutex_lock(&w->mu);
            ended->busy = ended->done = false;
            pthread_mutex_unlock(&w->mu);
            continue;
        }
        return all ? NULL : idle;
    }
}

/* What the window's harvest needs: the first failure, and each part's ETag. */
struct part_harvest {
    struct tier_upload *u;
    struct job *j;
    struct tier_s3_part *parts;
    char (*etags)[TIER_S3_ETAG_MAX];
    int rc;
};

static void part_harvest(void *arg, struct wslot *s)
{
    struct part_harvest *h = arg;
    struct job *j = h->j;
    if (s->res.err) {
        if (h->rc == 0)
            failed(h->u, j->bucket, j->remote, j->ino, err_kind(s->res.err), s->res.retryable,
                   "upload part", s->res.message);
        if (h->rc == 0)
            h->rc = s->res.err;
        return;
    }
    snprintf(h->etags[s->part], TIER_S3_ETAG_MAX, "%s", s->res.obj.etag);
    h->parts[s->part] = (struct tier_s3_part){(int)(s->part + 1), h->etags[s->part]};
}

/* How a file of @p size goes up: parts of @p psize, @p nparts of them (1: one PUT). */
static void layout(const struct tier_upload *u, uint64_t size, uint64_t *psize, uint64_t *nparts)
{
    uint64_t ps = u->cfg.part_size, n = size <= ps ? 1 : (size + ps - 1) / ps;
    if (n > 10000) { /* S3's limit: larger parts */
        ps = (size + 9999) / 10000;
        n = (size + ps - 1) / ps;
    }
    *psize = ps;
    *nparts = n;
}

static void hex16(const unsigned char *d, char *out)
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The ETag an upload of @p j's file as it is now would get: the MD5 of its bytes (one
 * PUT), or the MD5 of its parts' MD5s and "-N" (multipart, the uploader's layout).
 * Read through the core as an upload reads. @return 0, -EAGAIN (the file changed
 * meanwhile), or an error. */
static int local_etag(struct tier_upload *u, struct job *j, char *out, size_t outlen)
{
    enum { CHUNK = 4 << 20 };
    uint64_t psize, nparts;
    layout(u, j->size, &psize, &nparts);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *digs = malloc(16 * (size_t)nparts);
    char *buf = malloc(CHUNK);
    int rc = md && digs && buf ? 0 : -ENOMEM;
    for (uint64_t p = 0; rc == 0 && p < nparts; p++) {
        uint64_t off = p * psize, end = off + psize < j->size ? off + psize : j->size;
        if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
            rc = -ENOMEM;
        for (; rc == 0 && off < end; off += CHUNK) {
            size_t len = (size_t)(end - off < CHUNK ? end - off : CHUNK);
            rc = read_all(u, j, off, buf, len);
            if (rc == 0 && EVP_DigestUpdate(md, buf, len) != 1)
                rc = -ENOMEM;
        }
        if (rc == 0 && EVP_DigestFinal_ex(md, digs + 16 * p, NULL) != 1)
            rc = -ENOMEM;
    }
    if (rc == 0 && change_now(u, j->ino) != j->change)
        rc = -EAGAIN;
    if (rc == 0 && nparts == 1) {
        hex16(digs, buf);
        snprintf(out, outlen, "%s", buf);
    } else if (rc == 0) {
        unsigned char d[16];
        if (EVP_Digest(digs, 16 * (size_t)nparts, d, NULL, EVP_md5(), NULL) != 1) {
            rc = -ENOMEM;
        } else {
            hex16(d, buf);
            snprintf(out, outlen, "%s-%" PRIu64, buf, nparts);
        }
    }
    EVP_MD_CTX_free(md);
    free(digs);
    free(buf);
    return rc;
}

/* A copy failure after which an upload is made instead (the remote cannot or will not
 * copy, or the old copy changed or went: the precondition on its ETag failed). */
static bool copy_refused(int rc, const struct tier_s3_result *res)
{
    return rc == SRV_EPRECOND || rc == -ENOENT || res->status == 501 ||
           (!res->retryable && rc != -ECANCELED);
}

/* Keep multipart upload @p upload_id of @p key on remote @p remote for another abort (its
 * abort failed). Without memory it stays until the next start's sweep. */
static void stale_note(struct tier_upload *u, uint32_t remote, const char *key,
                       const char *upload_id)
{
    char *k = strdup(key), *id = strdup(upload_id);
    pthread_mutex_lock(&u->mu);
    if (k && id && u->nstale == u->capstale) {
        size_t nc = u->capstale ? u->capstale * 2 : 8;
        void *nv = realloc(u->stale, nc * sizeof(*u->stale));
        if (nv) {
            u->stale = nv;
            u->capstale = nc;
        }
    }
    if (k && id && u->nstale < u->capstale) {
        u->stale[u->nstale++] = (struct stale_mpu){.remote = remote, .key = k, .upload_id = id};
        k = id = NULL;
    }
    pthread_mutex_unlock(&u->mu);
    if (k || id)
        srv_log(WARN, TIER, "remote %u: multipart upload of %s left until the next start", remote,
                key);
    free(k);
    free(id);
}

/* Remote @p remote answered an upload: send the aborts that failed on it again (those that
 * fail again are kept; one already gone, 404, is done). */
static void stale_retry(struct tier_upload *u, struct tier_s3 *s3, uint32_t remote)
{
    for (;;) {
        struct stale_mpu m = {0};
        pthread_mutex_lock(&u->mu);
        for (size_t i = 0; i < u->nstale; i++)
            if (u->stale[i].remote == remote) {
                m = u->stale[i];
                u->stale[i] = u->stale[--u->nstale];
                break;
            }
        pthread_mutex_unlock(&u->mu);
        if (!m.key)
            return;
        struct tier_s3_op ab = {.code = TIER_S3_MPU_ABORT, .key = m.key, .upload_id = m.upload_id};
        struct tier_s3_result res;
        int rc = up_one(u, s3, &ab, &res);
        bool again = rc != 0 && res.status != 404 && res.retryable;
        bool refused = rc != 0 && res.status != 404 && !res.retryable;
        tier_s3_result_fini(&res);
        if (again) {
            stale_note(u, remote, m.key, m.upload_id);
            free(m.key);
            free(m.upload_id);
            return; /* down again: the next upload tries */
        }
        if (refused)
            srv_log(WARN, TIER,
                    "remote %u: abort of the multipart upload of %s refused: left "
                    "until the next start",
                    remote, m.key);
        else
            srv_log(INFO, TIER,
                    "remote %u: aborted the multipart upload of %s left when it "
                    "failed",
                    remote, m.key);
        free(m.key);
        free(m.upload_id);
    }
}

/* The end of multipart upload @p upload_id of @p j (its parts or their copies sent):
 * completed with @p parts when @p rc is 0, aborted when @p rc or the completion failed
 * (a failed completion is noted as @p what). @p etag (TIER_S3_ETAG_MAX bytes) gets the
 * object's ETag. @return @p rc, or the completion's error. */
static int mpu_end(struct tier_upload *u, struct tier_s3 *s3, const struct job *j,
                   const char *upload_id, const struct tier_s3_part *parts, uint64_t nparts, int rc,
                   const char *what, char *etag)
{
    struct tier_s3_result res;
    memset(&res, 0, sizeof(res));
    if (rc == 0) {
        struct tier_s3_op op = {.code = TIER_S3_MPU_COMPLETE,
                                .key = j->key,
                                .upload_id = upload_id,
                                .parts = parts,
                                .nparts = (size_t)nparts};
        rc = up_one(u, s3, &op, &res);
        if (rc)
            failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, what, res.message);
        else
            snprintf(etag, TIER_S3_ETAG_MAX, "%s", res.obj.etag);
        tier_s3_result_fini(&res);
    }
    if (rc) {
        struct tier_s3_op ab = {.code = TIER_S3_MPU_ABORT, .key = j->key, .upload_id = upload_id};
        if (up_one(u, s3, &ab, &res) != 0 && res.status != 404)
            stale_note(u, j->remote, j->key, upload_id);
        tier_s3_result_fini(&res);
    }
    return rc;
}

/* Is @p ino evicted, at change counter @p change, with its copy recorded under ETag
 * @p etag? An evicted file's bytes are its recorded copy's: a write or a truncation
 * recalls the whole file first (which clears the flag), and the eviction checked the
 * record in the same txn that freed the extents (core_tier.c). So such a file needs
 * no local read (no recall) to know its bytes. */
static bool evicted_as(struct tier_upload *u, uint64_t ino, uint64_t change, const char *etag)
{
    struct meta_txn *t;
    struct meta_inode r;
    bool yes = false;
    struct meta_tier_copy *c = malloc(sizeof(*c));
    if (!c || meta_rtxn_begin(u->cfg.meta, &t) != 0) {
        free(c);
        return false;
    }
    yes = meta_inode_get(t, ino, &r) == 0 && r.type == FILE_TYPE_REG && r.nlink &&
          (r.flags & META_I_EVICTED) && r.change == change && meta_tier_get(t, ino, c) == 0 &&
          c->st.size == r.size && strcasecmp(c->st.etag, etag) == 0;
    meta_rtxn_end(t);
    free(c);
    return yes;
}

/* Does the remote object's Content-Type and user metadata (@p res, a HEAD's answer)
 * say what the file has? A file without a Content-Type matches any (the remote gives
 * the object its default, which a copy could not take away); a file with no metadata
 * at all (made over NFS, or a cache import whose metadata was never asked for) keeps
 * the remote's. */
static bool meta_same(const char *ctype, const struct tier_s3_kv *kv, int nmeta,
                      const struct tier_s3_result *res)
{
    if (!ctype[0] && nmeta == 0)
        return true;
    if (ctype[0] && strcasecmp(ctype, res->obj.content_type) != 0)
        return false;
    if ((size_t)nmeta != res->nmeta)
        return false;
    for (int i = 0; i < nmeta; i++) {
        size_t k = 0;
        while (k < res->nmeta && strcasecmp(kv[i].name, res->meta[k].name) != 0)
            k++;
        if (k == res->nmeta || strcmp(kv[i].value, res->meta[k].value) != 0)
            return false;
    }
    return true;
}

/* The recorded copy of evicted file @p j, its only one, changed or went on the remote
 * before it could be copied (under @p src): its bytes are nowhere. Nothing is uploaded
 * (a recall would find the same); the record stays, so a read of the file recalls from
 * it and answers SRV_EREMOTECHG, never other bytes. Logged, counted, and tried again
 * with the file's back-off. */
/* Start @p j's multipart upload with the file's Content-Type and metadata; a failure is
 * counted and logged under @p what. @return 0 with *@p id (the caller frees it), or the
 * request's error. */
static int mpu_create(struct tier_upload *u, struct tier_s3 *s3, struct job *j, const char *ctype,
                      const struct tier_s3_kv *kv, int nmeta, const char *what, char **id)
{
    struct tier_s3_op op = {.code = TIER_S3_MPU_CREATE,
                            .key = j->key,
                            .content_type = ctype[0] ? ctype : NULL,
                            .meta = kv,
                            .nmeta = (size_t)nmeta};
    struct tier_s3_result res;
    int rc = up_one(u, s3, &op, &res);
    if (rc)
        failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, what, res.message);
    *id = NULL;
    if (rc == 0) {
        *id = res.upload_id;
        res.upload_id = NULL;
    }
    tier_s3_result_fini(&res);
    return rc;
}

static int copy_lost(struct tier_upload *u, struct job *j, const char *src, const char *msg)
{
    pthread_mutex_lock(&u->mu);
    u->copy_lost++;
    pthread_mutex_unlock(&u->mu);
    srv_log(ERROR, TIER,
            "remote %u: the copy of evicted ino=%" PRIu64 " at '%s' (ETag %s) changed or is "
            "gone (%s): it was its only copy, reads of it answer an error",
            j->remote, j->ino, src, j->rec_etag, msg);
    failed(u, j->bucket, j->remote, j->ino, EK_REMOTE, false, "copy",
           "the remote copy of an evicted file changed or is gone");
    return SRV_EREMOTECHG;
}

/* Outcomes of copy_renamed beside 0 (copied) and errors. */
#define REUSE_UPLOAD 1 /* upload the file instead */
#define REUSE_KEPT 2   /* the recorded copy is current as it is (a HEAD said so) */

/* A copy of @p src (j's recorded copy) answered ETag @p etag: was its source still the
 * recorded copy? The If-Match on the source should have made sure, but some stores
 * (Ceph RGW 16 among them) ignore x-amz-copy-source-if-match and copy whatever the key
 * holds. The same ETag: the same bytes. Another one: a plain MD5 recorded means other
 * bytes (a copy keeps the MD5 of its bytes); a multipart ETag recorded may be given a new
 * one by a store's copy, so a HEAD of the source (If-Match the recorded ETag) decides.
 * @return true when the copy holds the recorded bytes. */
static bool copy_checked(struct tier_upload *u, struct job *j, struct tier_s3 *s3, const char *src,
                         const char *etag)
{
    if (strcasecmp(etag, j->rec_etag) == 0)
        return true;
    bool ok = false;
    if (strchr(j->rec_etag, '-')) {
        struct tier_s3_result res;
        memset(&res, 0, sizeof(res));
        struct tier_s3_op hop = {.code = TIER_S3_HEAD_OBJECT, .key = src, .if_match = j->rec_etag};
        ok = up_one(u, s3, &hop, &res) == 0 && res.obj.size == j->size;
        tier_s3_result_fini(&res);
    }
    if (!ok)
        srv_log(WARN, TIER,
                "remote %u: the copy of '%s' to '%s' answered ETag %s, its recorded copy has "
                "%s: the source changed behind our back",
                j->remote, src, j->key, etag, j->rec_etag);
    return ok;
}

/* A copy that copied other bytes than the recorded copy's (copy_checked): the target
 * of a rename holds bytes that are not the file's, and goes; then the file is uploaded,
 * or, evicted, its loss noted (copy_lost). */
static int copy_wrong(struct tier_upload *u, struct job *j, struct tier_s3 *s3, const char *src)
{
    if (j->oldkey) {
        struct tier_s3_op op = {.code = TIER_S3_DELETE_OBJECT, .key = j->key};
        struct tier_s3_result res;
        memset(&res, 0, sizeof(res));
        up_one(u, s3, &op, &res);
        tier_s3_result_fini(&res);
    }
    if (j->evicted)
        return copy_lost(u, j, src, "the source's ETag is not the recorded one");
    return REUSE_UPLOAD;
}

/* A file whose recorded copy (@p j: copyable) may still hold its bytes: renamed
 * (oldkey: the copy's key), or with a change of its metadata only (no oldkey: the
 * copy is under the file's key). The copy holds the file's bytes when the file did not
 * change since the copy was made (its change counter is the record's: a directory
 * renamed above it moves no counter), when it is evicted (evicted_as: no byte is
 * recalled), or when its bytes as they are now hash to the copy's ETag (a rename of
 * the file itself, a chmod or a touch move its counter, as any change does).
 * Renamed: the copy is copied server-side to the new key. Metadata only: a HEAD of
 * the copy (If-Match its ETag) compares the remote's Content-Type and user metadata
 * with the file's; equal (mode, owner and times are not on the remote), the copy is
 * kept as it is (REUSE_KEPT, @p etag its ETag); different, it is copied onto itself
 * with the new metadata. Every copy request names the copy's ETag
 * (x-amz-copy-source-if-match), so the target gets exactly the bytes that ETag
 * confirmed. Up to copy_max one CopyObject; larger, a multipart upload of
 * UploadPartCopy parts laid out as the upload's. @p etag gets the copy's ETag
 * (checked by the caller's HEAD). @return 0 (copied), REUSE_UPLOAD, REUSE_KEPT, or an
 * error (noted; SRV_EREMOTECHG: the copy of an evicted file is lost, copy_lost). */
static int copy_renamed(struct tier_upload *u, struct job *j, struct tier_s3 *s3, int par,
                        const char *ctype, const struct tier_s3_kv *kv, int nmeta, char *etag)
{
    const char *src = j->oldkey ? j->oldkey : j->key;
    char le[TIER_S3_ETAG_MAX];
    int rc;
    j->evicted = evicted_as(u, j->ino, j->change, j->rec_etag);
    if (j->rec_change != j->change && !j->evicted) {
        rc = local_etag(u, j, le, sizeof(le));
        if (rc) {
            failed(u, j->bucket, j->remote, j->ino, rc == -EAGAIN ? EK_CHANGED : EK_LOCAL, false,
                   "read", rc == -EAGAIN ? "the file changed while read" : srv_strerror(rc));
            return rc;
        }
        if (strcasecmp(le, j->rec_etag) != 0) {
            pthread_mutex_lock(&u->mu);
            u->copy_mismatch++;
            pthread_mutex_unlock(&u->mu);
            return REUSE_UPLOAD;
        }
    }
    struct tier_s3_result res;
    memset(&res, 0, sizeof(res));
    if (!j->oldkey || j->evicted) {
        /* metadata only: is the remote's metadata the file's? Evicted: is its only copy
         * still there, unchanged? (a store that ignores the If-Match on a copy's source
         * would copy other bytes, each time the file is tried again) */
        struct tier_s3_op hop = {.code = TIER_S3_HEAD_OBJECT, .key = src, .if_match = j->rec_etag};
        rc = up_one(u, s3, &hop, &res);
        if (rc == 0 && res.obj.size != j->size)
            rc = SRV_EPRECOND;
        if (rc == SRV_EPRECOND || rc == -ENOENT) {
            char msg[sizeof(res.message)];
            snprintf(msg, sizeof(msg), "%s", res.message[0] ? res.message : srv_strerror(rc));
            tier_s3_result_fini(&res);
            if (j->evicted)
                return copy_lost(u, j, src, msg);
            return REUSE_UPLOAD; /* replaced or deleted behind our back: upload it */
        }
        if (rc) {
            failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, "head",
                   res.message);
            tier_s3_result_fini(&res);
            return rc;
        }
        bool same = !j->oldkey && meta_same(ctype, kv, nmeta, &res);
        if (same)
            snprintf(etag, TIER_S3_ETAG_MAX, "%s", res.obj.etag);
        tier_s3_result_fini(&res);
        if (same)
            return REUSE_KEPT;
    }
    uint64_t copy_max = u->cfg.copy_max ? u->cfg.copy_max : COPY_MAX_DEFAULT;
    if (j->size <= copy_max) {
        /* the file's metadata, or the copy's when the file has none (see meta_same) */
        struct tier_s3_op op = {.code = TIER_S3_COPY_OBJECT,
                                .key = j->key,
                                .copy_from = src,
                                .copy_if_match = j->rec_etag,
                                .meta_replace = ctype[0] || nmeta > 0,
                                .content_type = ctype[0] ? ctype : NULL,
                                .meta = kv,
                                .nmeta = (size_t)nmeta};
        rc = up_one(u, s3, &op, &res);
        if (rc && j->evicted && (rc == SRV_EPRECOND || rc == -ENOENT)) {
            char msg[sizeof(res.message)];
            snprintf(msg, sizeof(msg), "%s", res.message);
            tier_s3_result_fini(&res);
            return copy_lost(u, j, src, msg);
        }
        if (rc && copy_refused(rc, &res)) {
            srv_log(INFO, TIER, "remote %u: copy of %s to %s refused (%s): uploading it", j->remote,
                    src, j->key, res.message);
            tier_s3_result_fini(&res);
            return REUSE_UPLOAD;
        }
        if (rc)
            failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, "copy",
                   res.message);
        else
            snprintf(etag, TIER_S3_ETAG_MAX, "%s", res.obj.etag);
        tier_s3_result_fini(&res);
        if (rc == 0 && !copy_checked(u, j, s3, src, etag))
            return copy_wrong(u, j, s3, src);
        return rc;
    }
    uint64_t psize, nparts;
    layout(u, j->size, &psize, &nparts);
    char *upload_id;
    rc = mpu_create(u, s3, j, ctype, kv, nmeta, "copy", &upload_id);
    if (rc)
        return rc;
    size_t n = par > 0 ? (size_t)par : 4;
    struct tier_s3_part *parts = calloc(nparts, sizeof(*parts));
    char(*etags)[TIER_S3_ETAG_MAX] = calloc(nparts, sizeof(*etags));
    struct tier_s3_op *ops = calloc(n, sizeof(*ops));
    struct tier_s3_result *rs = calloc(n, sizeof(*rs));
    rc = parts && etags && ops && rs ? 0 : -ENOMEM;
    bool refused = false, lost = false;
    char lost_msg[sizeof(res.message)] = "";
    for (uint64_t p = 0; rc == 0 && p < nparts; p += n) {
        size_t k = (size_t)(nparts - p < n ? nparts - p : n);
        for (size_t i = 0; i < k; i++) {
            uint64_t off = (p + i) * psize;
            ops[i] = (struct tier_s3_op){.code = TIER_S3_MPU_PART_COPY,
                                         .key = j->key,
                                         .upload_id = upload_id,
                                         .part_number = (int)(p + i + 1),
                                         .copy_from = src,
                                         .copy_if_match = j->rec_etag,
                                         .off = off,
                                         .len = j->size - off < psize ? j->size - off : psize};
            note_req(u, &ops[i]);
        }
        rc = run_many(u, s3, ops, k, rs);
        for (size_t i = 0; i < k; i++) {
            if (rc == 0 && rs[i].err) {
                rc = rs[i].err;
                lost = j->evicted && (rc == SRV_EPRECOND || rc == -ENOENT);
                refused = !lost && copy_refused(rc, &rs[i]);
                if (lost)
                    snprintf(lost_msg, sizeof(lost_msg), "%s", rs[i].message);
                else if (!refused)
                    failed(u, j->bucket, j->remote, j->ino, err_kind(rc), rs[i].retryable,
                           "copy part", rs[i].message);
            } else if (rc == 0) {
                snprintf(etags[p + i], TIER_S3_ETAG_MAX, "%s", rs[i].obj.etag);
                parts[p + i] = (struct tier_s3_part){(int)(p + i + 1), etags[p + i]};
            }
            tier_s3_result_fini(&rs[i]);
        }
        if (rc == 0 && change_now(u, j->ino) != j->change) {
            rc = -EAGAIN;
            failed(u, j->bucket, j->remote, j->ino, EK_CHANGED, false, "copy",
                   "the file changed while copied");
        }
    }
    rc = mpu_end(u, s3, j, upload_id, parts, nparts, rc, "complete copy", etag);
    free(parts);
    free(etags);
    free(ops);
    free(rs);
    free(upload_id);
    if (lost)
        return copy_lost(u, j, src, lost_msg);
    if (refused) {
        srv_log(INFO, TIER, "remote %u: copy of %s to %s refused: uploading it", j->remote, src,
                j->key);
        return REUSE_UPLOAD;
    }
    if (rc == 0 && !copy_checked(u, j, s3, src, etag))
        return copy_wrong(u, j, s3, src);
    return rc;
}

/* The copy of renamed file @p j under its old key goes (its old remote's client, or
 * @p s3 when the same), unless another file took that key. @return 0, or the
 * delete's error (noted). */
static int drop_oldkey(struct tier_upload *u, struct job *j, struct tier_s3 *s3)
{
    char why[256];
    int par, err, rc;
    if (!j->oldkey || key_used(u, j->bucket, j->oldkey))
        return 0;
    struct tier_s3 *os3 =
        j->oldremote == j->remote ? s3 : client_of(u, j->oldremote, &par, why, sizeof(why), &err);
    if (!os3)
        return 0; /* the old remote is gone: its copy is out of reach */
    if ((rc = delete_copy(u, os3, j->oldremote, j->bucket, j->ino, j->oldkey)) != 0)
        return rc;
    after_delete(u, j->bucket, j->oldkey);
    return 0;
}

/* Upload @p j: @return 0 (recorded), or nonzero (noted as a failure). */
static int do_upload(struct tier_upload *u, struct job *j)
{
    char why[256], ctype[256], *strs = NULL;
    struct tier_s3_kv kv[META_PAIRS_MAX];
    int par = 4, rc;
    char **bufs = NULL;
    struct tier_s3_part *parts = NULL;
    char(*etags)[TIER_S3_ETAG_MAX] = NULL;
    char *upload_id = NULL;
    uint64_t nparts = 1, psize = u->cfg.part_size;
    struct tier_s3_result res;
    memset(&res, 0, sizeof(res));
    int err;
    /* A job waits in the queue behind others: when its file changed meanwhile (more
     * writes, a COMMIT, a rename: each moves the change counter), a copy of this state
     * would be thrown away. Nothing is sent; the next pass queues the file as it is. */
    if (change_now(u, j->ino) != j->change) {
        pthread_mutex_lock(&u->mu);
        u->changed++;
        pthread_mutex_unlock(&u->mu);
        changed_note(u, j, "while queued", 0);
        return -EAGAIN;
    }
    struct tier_s3 *s3 = client_of(u, j->remote, &par, why, sizeof(why), &err);
    if (!s3) {
        failed(u, j->bucket, j->remote, j->ino, EK_LOCAL, false, "remote", why);
        return -EIO;
    }
    strs = malloc(16384);
    if (!strs)
        return -ENOMEM;
    int nmeta = obj_meta(u, j->ino, ctype, sizeof(ctype), kv, strs, 16384);
    if (nmeta < 0) {
        failed(u, j->bucket, j->remote, j->ino, EK_LOCAL, false, "metadata", srv_strerror(nmeta));
        rc = nmeta;
        goto out;
    }
    layout(u, j->size, &psize, &nparts);
    char etag[TIER_S3_ETAG_MAX] = "";
    bool copied = false, kept = false;
    if (j->copyable) {
        /* a rename or a change of metadata only: a server-side copy of the recorded copy
         * (or that copy kept as it is), when it holds these bytes */
        rc = copy_renamed(u, j, s3, par, ctype, kv, nmeta, etag);
        if (rc < 0)
            goto out;
        copied = rc == 0;
        kept = rc == REUSE_KEPT;
        rc = 0;
    }
    if (copied || kept) {
        /* a copy is confirmed below as an upload is; a kept one was by its HEAD */
    } else if (nparts == 1) {
        size_t len = (size_t)j->size;
        bufs = calloc(1, sizeof(*bufs));
        if (!bufs || !(bufs[0] = malloc(len ? len : 1))) {
            rc = -ENOMEM;
            goto out;
        }
        rc = read_all(u, j, 0, bufs[0], len);
        if (rc == 0 && change_now(u, j->ino) != j->change)
            rc = -EAGAIN;
        if (rc == -EAGAIN)
            changed_note(u, j, "while read", 0);
        if (rc) {
            failed(u, j->bucket, j->remote, j->ino, rc == -EAGAIN ? EK_CHANGED : EK_LOCAL, false,
                   "read", rc == -EAGAIN ? "the file changed while read" : srv_strerror(rc));
            goto out;
        }
        char sha[65];
        srv_sigv4_sha256_hex(bufs[0], len, sha); /* here, not on the client's loop */
        struct tier_s3_op op = {.code = TIER_S3_PUT_OBJECT,
                                .key = j->key,
                                .data = bufs[0],
                                .size = len,
                                .sha256_hex = sha,
                                .content_type = ctype[0] ? ctype : NULL,
                                .meta = kv,
                                .nmeta = (size_t)nmeta};
        rc = up_one(u, s3, &op, &res);
        if (rc) {
            failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, "upload",
                   res.message);
            goto out;
        }
        snprintf(etag, sizeof(etag), "%s", res.obj.etag);
        tier_s3_result_fini(&res);
    } else {
        parts = calloc(nparts, sizeof(*parts));
        etags = calloc(nparts, sizeof(*etags));
        bufs = calloc((size_t)par, sizeof(*bufs));
        struct window w = {.u = u, .s3 = s3, .n = (size_t)par};
        w.s = calloc((size_t)par, sizeof(*w.s));
        rc = parts && etags && bufs && w.s ? 0 : -ENOMEM;
        for (int i = 0; rc == 0 && i < par; i++) {
            if (!(bufs[i] = malloc(psize)))
                rc = -ENOMEM;
            else
                w.s[i] = (struct wslot){.w = &w, .buf = bufs[i]};
        }
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        struct part_harvest h = {u, j, parts, etags, 0};
        /* a sliding window: each part is read and hashed here while the others are on
         * the wire, and started as soon as a slot is free */
        for (uint64_t p = 0; rc == 0 && p < nparts; p++) {
            struct wslot *sl = window_wait(&w, false, part_harvest, &h);
            if ((rc = h.rc) != 0)
                break;
            uint64_t off = p * psize;
            size_t len = (size_t)(j->size - off < psize ? j->size - off : psize);
            rc = read_all(u, j, off, sl->buf, len);
            if (rc == -EAGAIN)
                changed_note(u, j, "while a part was read", p);
            if (rc) {
                failed(u, j->bucket, j->remote, j->ino, rc == -EAGAIN ? EK_CHANGED : EK_LOCAL,
                       false, "read", srv_strerror(rc));
                break;
            }
            /* the payload's SHA-256, signed: the remote checks the bytes (see tier_s3.h) */
            srv_sigv4_sha256_hex(sl->buf, len, sl->sha);
            /* a file changed since the upload began is not recorded (checked again after
             * the last part): stop sending its parts now, not after all of them. Checked
             * when the part is ready to go, the first one included (a rename right after
             * the writer's COMMIT lands during the first read): then no byte of it, and
             * no request, is sent */
            if (change_now(u, j->ino) != j->change) {
                rc = -EAGAIN;
                changed_note(u, j, "before a part", p);
                failed(u, j->bucket, j->remote, j->ino, EK_CHANGED, false, "read",
                       "the file changed while read");
                break;
            }
            if (!upload_id) {
                /* made once the first part is ready to go: a file renamed meanwhile
                 * (the checks above) costs no request */
                rc = mpu_create(u, s3, j, ctype, kv, nmeta, "upload", &upload_id);
                if (rc)
                    break;
            }
            sl->part = p;
            sl->op = (struct tier_s3_op){.code = TIER_S3_MPU_PART,
                                         .key = j->key,
                                         .upload_id = upload_id,
                                         .part_number = (int)(p + 1),
                                         .data = sl->buf,
                                         .size = len,
                                         .sha256_hex = sl->sha};
            window_start(&w, sl);
        }
        if (w.s) {
            if (rc && h.rc == 0)
                h.rc = rc; /* noted already: the parts still in flight are not */
            window_wait(&w, true, part_harvest, &h);
            if (rc == 0)
                rc = h.rc;
        }
        pthread_mutex_destroy(&w.mu);
        pthread_cond_destroy(&w.cv);
        free(w.s);
        if (rc == 0 && change_now(u, j->ino) != j->change) {
            rc = -EAGAIN;
            changed_note(u, j, "after its last part", nparts);
            failed(u, j->bucket, j->remote, j->ino, EK_CHANGED, false, "read",
                   "the file changed while read");
        }
        if (upload_id)
            rc = mpu_end(u, s3, j, upload_id, parts, nparts, rc, "complete upload", etag);
        else if (rc == 0)
            rc = -EIO; /* (not reached: a file of several parts starts its first) */
        if (rc)
            goto out;
    }
    /* confirm: a HEAD says the remote holds j->size bytes under the ETag the upload (or
     * the copy) answered. An empty file's PUT that answered the empty MD5 is confirmed
     * by that answer: the remote says it holds no bytes */
    struct tier_s3_op hop = {.code = TIER_S3_HEAD_OBJECT, .key = j->key};
    if (kept || (!copied && j->size == 0 && strcasecmp(etag, EMPTY_MD5) == 0)) {
        rc = 0;
        res.obj.size = j->size;
        snprintf(res.obj.etag, sizeof(res.obj.etag), "%s", etag);
    } else {
        rc = up_one(u, s3, &hop, &res);
    }
    if (rc == 0 && (res.obj.size != j->size || (etag[0] && strcmp(etag, res.obj.etag) != 0))) {
        rc = -EIO;
        snprintf(res.message, sizeof(res.message),
                 "the remote holds %" PRIu64 " bytes (ETag %s) after an upload of %" PRIu64
                 " bytes (ETag %s)",
                 res.obj.size, res.obj.etag, j->size, etag);
    }
    if (rc) {
        failed(u, j->bucket, j->remote, j->ino, err_kind(rc), res.retryable, "confirm",
               res.message);
        tier_s3_result_fini(&res);
        goto out;
    }
    snprintf(etag, sizeof(etag), "%s", res.obj.etag);
    tier_s3_result_fini(&res);
    /* the copy under the file's former key goes, unless another file took that key:
     * before the new key is recorded (a SIGKILL in between: the next pass copies or
     * uploads the file again, and deletes the old key), but after it for an evicted
     * file, whose recalls read the recorded key: its old key must hold the bytes until
     * the record names the new one (a SIGKILL in between leaves a stray object) */
    bool rec_first = copied && j->evicted;
    if (!rec_first && (rc = drop_oldkey(u, j, s3)) != 0)
        goto out;
    struct meta_tier_copy *c = calloc(1, sizeof(*c));
    if (!c) {
        rc = -ENOMEM;
        goto out;
    }
    c->st.remote = j->remote;
    c->st.bucket = j->bucket;
    c->st.change = j->change;
    c->st.size = j->size;
    c->st.time_s = (int64_t)time(NULL);
    if (u->cfg.last_read) { /* what the next pass would write (rec_fn keeps a later one) */
        int64_t rd = u->cfg.last_read(u->cfg.core_arg, j->ino, 0);
        c->st.read_s = rd <= 0 ? 0 : rd > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)rd;
    }
    snprintf(c->st.etag, sizeof(c->st.etag), "%s", etag);
    snprintf(c->key, sizeof(c->key), "%s", j->key);
    struct rec_op a = {j->ino, c, NULL, 0};
    rc = meta_submit(u->cfg.meta, rec_fn, &a, 0);
    free(c);
    if (rc) {
        failed(u, j->bucket, j->remote, j->ino, EK_LOCAL, false, "record", srv_strerror(rc));
        goto out;
    }
    if (rec_first && drop_oldkey(u, j, s3) != 0)
        srv_log(WARN, TIER,
                "remote %u: the copy at the old key '%s' of ino=%" PRIu64
                " stays there (a stray object)",
                j->oldremote, j->oldkey, j->ino);
    if (u->cfg.dirty)
        tier_dirty_confirmed(u->cfg.dirty, j->bucket, j->level, j->size);
    pthread_mutex_lock(&u->mu);
    if (kept) {
        u->kept++;
    } else if (copied && !j->oldkey) {
        u->meta_copies++;
    } else if (copied) {
        u->copies++;
        u->copy_bytes += j->size;
    } else {
        u->up_files++;
        u->up_bytes += j->size;
    }
    fail_clear(u, j->ino);
    struct rclient *r = rclient_find(u, j->remote);
    if (r)
        r->tries = 0;
    bool stale = false;
    for (size_t i = 0; i < u->nstale && !stale; i++)
        stale = u->stale[i].remote == j->remote;
    pthread_mutex_unlock(&u->mu);
    if (stale)
        stale_retry(u, s3, j->remote);
    srv_log(DEBUG, TIER, "tenant=%u remote %u: uploaded %s (%" PRIu64 " bytes, %s)", j->tenant,
            j->remote, j->key, j->size,
            kept                   ? "its copy kept: metadata not on the remote"
            : copied && !j->oldkey ? "its metadata replaced by a copy onto itself"
            : copied               ? "copied from its old key"
            : nparts > 1           ? "multipart"
                                   : "one PUT");
out:
    if (bufs) {
        for (int i = 0; i < (nparts == 1 ? 1 : par); i++)
            free(bufs[i]);
        free(bufs);
    }
    free(parts);
    free(etags);
    free(upload_id);
    free(strs);
    return rc;
}

static void job_free(struct job *j)
{
    free(j->key);
    free(j->oldkey);
    free(j);
}

static void *work_main(void *arg)
{
    struct tier_upload *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->stop && !u->head)
            pthread_cond_wait(&u->work_cv, &u->mu);
        if (u->stop)
            break;
        struct job *j = u->head;
        u->head = j->next;
        if (!u->head)
            u->tail = NULL;
        u->queued--;
        struct bstat *b = bstat_get(u, j->bucket, false);
        if (b && !j->del)
            b->uploading++;
        pthread_mutex_unlock(&u->mu);
        if (j->del)
            do_delete(u, j);
        else
            do_upload(u, j);
        pthread_mutex_lock(&u->mu);
        b = bstat_get(u, j->bucket, false);
        if (b && !j->del && b->uploading)
            b->uploading--;
        inflight_del(u, j->ino);
        job_free(j);
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* ---- the scanner ---- */

struct policy_ent {
    uint64_t bucket;
    struct tier_policy p;
    bool ro; /* a read-only cache bucket (tier_cache.h): nothing is uploaded or deleted */
    struct tier_dirpol *dirs; /* its directories' policies (heap; NULL: none) */
    size_t ndirs;
    const struct tier_dirpol *bent; /* the bucket's own settings among them (NULL: none) */
};

struct policies {
    struct policy_ent *v;
    size_t n, cap;
};

static void policies_free(struct policies *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->v[i].dirs);
    free(ps->v);
}

/* A bucket's directory policies, onto its policy entry (a bucket without a
 * policy: ignored; they apply once it has one). */
static int dirs_cb(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    struct policies *ps = arg;
    (void)kind;
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->v[i].bucket != bucket)
            continue;
        struct tier_dirpol *d = malloc((TIER_DIRPOL_MAX + 1) * sizeof(*d));
        if (!d)
            return -ENOMEM;
        int n = tier_dirs_decode(val, len, d);
        if (n <= 0) {
            free(d); /* a newer build's, or malformed: the bucket policy alone applies */
            return 0;
        }
        ps->v[i].dirs = d;
        ps->v[i].ndirs = (size_t)n;
        for (int k = 0; k < n; k++)
            if (d[k].dir == bucket)
                ps->v[i].bent = &d[k];
        return 0;
    }
    return 0;
}

static int policy_cb(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    struct policies *ps = arg;
    struct tier_policy p;
    (void)kind;
    if (tier_policy_decode(val, len, &p) != 0)
        return 0; /* a policy of a newer build, or malformed: not ours to act on */
    if (ps->n == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 8;
        void *nv = realloc(ps->v, nc * sizeof(*ps->v));
        if (!nv)
            return -ENOMEM;
        ps->v = nv;
        ps->cap = nc;
    }
    ps->v[ps->n++] = (struct policy_ent){bucket, p, false, NULL, 0, NULL};
    return 0;
}

static int cache_cb(void *arg, uint64_t bucket, uint8_t kind, const void *val, size_t len)
{
    struct policies *ps = arg;
    struct tier_cache tc;
    (void)kind;
    if (tier_cache_decode(val, len, &tc) != 0 || !tc.read_only)
        return 0;
    for (size_t i = 0; i < ps->n; i++)
        if (ps->v[i].bucket == bucket)
            ps->v[i].ro = true;
    return 0;
}

static int queue(struct tier_upload *u, struct job *j)
{
    /* mu held */
    if (inflight_add(u, j->ino) < 0) {
        job_free(j);
        return -ENOMEM;
    }
    j->next = NULL;
    if (u->tail)
        u->tail->next = j;
    else
        u->head = j;
    u->tail = j;
    u->queued++;
    pthread_cond_signal(&u->work_cv);
    return 0;
}

/* A read time to keep in a file's tierst record (read_s). */
struct rt_ent {
    uint64_t ino;
    int64_t read_s;
};

struct bscan {
    struct tier_upload *u;
    struct meta_txn *t;
    const struct policy_ent *pe;
    uint32_t group; /* pe's index in the pass's policies */
    uint32_t tenant;
    int64_t now_ns;
    uint64_t eff_parent; /* the parent whose policy eff is (0: none yet) */
    struct tier_effective eff;
    uint64_t eff_level; /* the dirty-bound level of eff_parent's files */
    bool hasten;        /* the bucket's dirty bound is reached: every pending file is due */
    char last[META_KEY_MAX + 1];
    size_t lastlen;
    size_t seen;
    bool more;
    struct meta_tier_copy c;
    struct rt_ent rt[SCAN_CHUNK]; /* read times to write after this chunk */
    size_t nrt;
};

/* How far a record's read time may lag the core's before a pass writes it: an eighth
 * of the eviction age, at least a second, at most a minute (a minute when only the
 * watermarks evict). So a file read all the time costs a write per grain, not per read,
 * and eviction by age after a restart errs by a grain at most (plus the reads of the
 * last pass's interval after a SIGKILL). */
static int64_t read_grain(uint32_t evict_after_s)
{
    int64_t g = evict_after_s ? evict_after_s / 8 : 60;
    return g < 1 ? 1 : g > 60 ? 60 : g;
}

/* The last read of a file with a tierst record (s->c) whose policy evicts: the core's,
 * or the record's when later; notes the core's for the record when it lags a grain. */
static int64_t read_time(struct tier_upload *u, struct bscan *s, uint64_t ino,
                         const struct tier_effective *e)
{
    int64_t stored = s->c.st.read_s;
    if (!u->cfg.last_read)
        return stored;
    int64_t last = u->cfg.last_read(u->cfg.core_arg, ino, stored);
    if (last > stored && (stored == 0 || last - stored >= read_grain(e->evict_after_s)) &&
        s->nrt < SCAN_CHUNK)
        s->rt[s->nrt++] = (struct rt_ent){ino, last};
    return last;
}

struct rt_op {
    const struct rt_ent *v;
    size_t n;
};

static int rt_fn(struct meta_txn *t, void *arg)
{
    const struct rt_op *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        int rc = meta_tier_note_read(t, a->v[i].ino, a->v[i].read_s);
        if (rc && rc != -ENOENT && rc != SRV_ECORRUPT) /* gone or unreadable: skip it */
            return rc;
    }
    return 0;
}

/* Write the read times a chunk of the scan noted, in one metadata op. */
static void rt_flush(struct tier_upload *u, struct bscan *s)
{
    if (!s->nrt)
        return;
    struct rt_op a = {s->rt, s->nrt};
    int rc = meta_submit(u->cfg.meta, rt_fn, &a, 0);
    if (rc)
        srv_log(WARN, TIER, "cannot keep %zu read times: %s", s->nrt, srv_strerror(rc));
    s->nrt = 0;
}

/* The policy that applies to files whose first parent is @p parent: the nearest
 * directory policy on the way up to the bucket, else the bucket's. Cached for the
 * files of one directory (the scan goes by key, so they come together). */
static const struct tier_effective *effective(struct bscan *s, uint64_t parent)
{
    const struct policy_ent *pe = s->pe;
    if (s->eff_parent == parent && parent)
        return &s->eff;
    const struct tier_dirpol *hit = NULL;
    uint64_t d = parent;
    for (unsigned depth = 0; pe->ndirs && d && d != pe->bucket && !hit && depth < 4096; depth++) {
        for (size_t i = 0; i < pe->ndirs; i++)
            if (pe->dirs[i].dir == d)
                hit = &pe->dirs[i];
        struct meta_inode r;
        if (hit || meta_inode_get(s->t, d, &r) != 0)
            break;
        d = r.parent;
    }
    tier_effective_of(&pe->p, pe->bent, hit, &s->eff);
    s->eff_parent = parent;
    s->eff_level = s->u->cfg.dirty
                       ? tier_dirty_level_of(s->u->cfg.dirty, pe->bucket, hit ? hit->dir : 0)
                       : pe->bucket;
    return &s->eff;
}

/* A file that may be evicted (mu held). */
static int cand_add(struct tier_upload *u, struct bscan *s, uint64_t ino,
                    const struct meta_inode *r, const struct tier_effective *e, int64_t last)
{
    if (u->ncands == u->capcands) {
        size_t nc = u->capcands ? u->capcands * 2 : 256;
        void *nv = realloc(u->cands, nc * sizeof(*u->cands));
        if (!nv)
            return -ENOMEM;
        u->cands = nv;
        u->capcands = nc;
    }
    if (r->ctime_s > last)
        last = r->ctime_s; /* a change counts as a use (the copy does not) */
    u->cands[u->ncands++] = (struct tier_evict_cand){
        .ino = ino,
        .change = r->change,
        .bytes = r->used,
        .last_s = last,
        .after_s = e->evict_after_s,
        .high = s->pe->p.evict_high,
        .low = s->pe->p.evict_low,
        .group = s->group,
        .prio = e->evict_priority,
    };
    return 0;
}

static int bscan_cb(void *arg, const char *key, size_t klen, const struct meta_keyval *kv,
                    size_t *skip)
{
    struct bscan *s = arg;
    struct tier_upload *u = s->u;
    (void)skip;
    if (s->seen == SCAN_CHUNK) {
        s->more = true;
        return 1;
    }
    s->seen++;
    memcpy(s->last, key, klen);
    s->last[klen] = '\0';
    s->lastlen = klen;
    struct meta_inode r;
    if (kv->type != FILE_TYPE_REG || meta_inode_get(s->t, kv->ino, &r) != 0 ||
        r.type != FILE_TYPE_REG || memchr(key, '\0', klen))
        return 0;
    bool have = meta_tier_get(s->t, kv->ino, &s->c) == 0;
    bool same_key = have && s->c.st.keylen == klen && memcmp(s->c.key, key, klen) == 0;
    if (have && !same_key) {
        /* a second name (hard link) of a file whose copy is under its first name: the
         * file is uploaded under one name only, the one its record has */
        uint64_t other = 0;
        uint32_t ot = 0;
        if (meta_keyidx_get(s->t, s->pe->bucket, s->c.key, s->c.st.keylen, &other, &ot) == 0 &&
            other == kv->ino)
            return 0;
    }
    bool current =
        have && same_key && s->c.st.change == r.change && s->c.st.remote == s->pe->p.remote;
    /* a writer still at it (uncommitted NFS writes): when its last write */
    int64_t pend_ns = 0;
    bool pending =
        !current && u->cfg.pending && u->cfg.pending(u->cfg.core_arg, kv->ino, &pend_ns) > 0;
    uint64_t dsize = r.size; /* dirty: with writes not committed yet (NFS UNSTABLE) */
    if (!current && u->cfg.dirty && u->cfg.size && tier_dirty_any(u->cfg.dirty)) {
        uint64_t now_size;
        if (u->cfg.size(u->cfg.core_arg, r.tenant, kv->ino, &now_size) == 0 && now_size > dsize)
            dsize = now_size;
    }
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, s->pe->bucket, true);
    if (!b) {
        pthread_mutex_unlock(&u->mu);
        return -ENOMEM;
    }
    const struct tier_effective *e = effective(s, r.parent);
    bool evicted = (r.flags & META_I_EVICTED) != 0;
    bool evicts = u->cfg.evict && (e->evict_after_s || s->pe->p.evict_high) && !e->keep_local;
    int64_t last = have && evicts ? read_time(u, s, kv->ino, e) : 0;
    if (!evicted)
        b->cur.local_bytes += r.used;
    if (current) {
        b->cur.uploaded_files++;
        b->cur.remote_bytes += r.size;
        int rc = 0;
        if (evicted) {
            b->cur.evicted_files++;
            b->cur.evicted_bytes += r.size;
        } else if (evicts && r.nlink > 0 && !(r.flags & (META_I_VREC | META_I_INLINE)) &&
                   s->c.st.etag[0] && s->c.st.size == r.size &&
                   !tier_policy_pinned(&s->pe->p, key, klen)) {
            b->cur.evictable_files++;
            b->cur.evictable_bytes += r.used;
            rc = cand_add(u, s, kv->ino, &r, e, last);
        }
        pthread_mutex_unlock(&u->mu);
        return rc;
    }
    int64_t ct = (int64_t)r.ctime_s * 1000000000ll + r.ctime_ns;
    int64_t age_s = (s->now_ns - ct) / 1000000000ll;
    b->cur.pending_files++;
    b->cur.pending_bytes += r.size;
    if (u->cfg.dirty)
        tier_dirty_pending(u->cfg.dirty, s->pe->bucket, s->eff_level, dsize);
    if (age_s > b->cur.oldest_s)
        b->cur.oldest_s = age_s;
    if (b->barrier_ns && ct <= b->barrier_ns)
        b->pend_barrier_cur++;
    bool forced = (b->barrier_ns && ct <= b->barrier_ns) || ct <= b->hasten_ns || s->hasten;
    /* a change younger than one pass is not due by its delay (a zero delay included):
     * the writer's next step (the first write after its create, the rename after its
     * commit) comes within milliseconds and would make the copy obsolete */
    bool due = forced || (age_s >= (int64_t)e->upload_after_s &&
                          s->now_ns - ct >= (int64_t)u->cfg.poll_ms * 1000000ll);
    if (due && !forced && pending) {
        /* its writer is still writing: the next commit (a flush of its uncommitted
         * writes moves the change counter) would make this copy obsolete. It waits
         * until the writes have been quiet PEND_QUIET_NS (or its delay) */
        int64_t quiet = (int64_t)e->upload_after_s * 1000000000ll;
        if (quiet < PEND_QUIET_NS)
            quiet = PEND_QUIET_NS;
        if (s->now_ns - pend_ns < quiet) {
            due = false;
            u->held_pending++;
        }
    }
    if (due && !forced && !pending && r.size == 0 && dsize == 0 && s->now_ns - ct < PEND_QUIET_NS) {
        /* an empty file just made (an NFS CREATE): its writer's first write usually
         * follows, and a copy of it would be deleted (renamed meanwhile) or replaced.
         * It waits PEND_QUIET_NS, unless forced */
        due = false;
        u->held_pending++;
    }
    int rc = 0;
    /* cheapest checks first: this runs for every pending file of every pass */
    if (due && !s->pe->ro && u->queued < (size_t)u->nwork * 8 && !remote_down(u, s->pe->p.remote) &&
        !inflight_has(u, kv->ino) &&
        !(fail_find(u, kv->ino) && fail_find(u, kv->ino)->until_ms > srv_now_ms())) {
        struct job *j = calloc(1, sizeof(*j));
        if (j && (j->key = strndup(key, klen))) {
            j->ino = kv->ino;
            j->bucket = s->pe->bucket;
            j->change = r.change;
            j->size = r.size;
            j->tenant = r.tenant;
            j->remote = s->pe->p.remote;
            j->ctime_ns = ct;
            j->level = s->eff_level;
            if (have && !same_key) {
                j->oldkey = strdup(s->c.key);
                j->oldremote = s->c.st.remote;
                /* a rename: the copy under the old key may be copied server-side, when
                 * it holds the file's bytes (checked by the worker) */
                j->copyable = s->c.st.remote == s->pe->p.remote && s->c.st.etag[0] &&
                              s->c.st.size == r.size && r.size > 0;
                j->rec_change = s->c.st.change;
                snprintf(j->rec_etag, sizeof(j->rec_etag), "%s", s->c.st.etag);
            } else if (have && s->c.st.remote != s->pe->p.remote) {
                /* the policy moved to another remote: the old copy stays there */
            } else if (have && s->c.st.etag[0] && s->c.st.size == r.size && r.size > 0 &&
                       ((r.flags & META_I_EVICTED) || r.mtime_s <= s->c.st.time_s)) {
                /* changed under the same key, but its bytes were not modified since the
                 * copy was confirmed (evicted, or an mtime no later: a chmod, a chown, S3
                 * metadata, a touch into the past): perhaps its metadata only, which the
                 * worker checks (the bytes by their ETag unless evicted) */
                j->copyable = true;
                j->rec_change = s->c.st.change;
                snprintf(j->rec_etag, sizeof(j->rec_etag), "%s", s->c.st.etag);
            }
            rc = queue(u, j);
        } else {
            if (j)
                job_free(j);
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

/* Publish @p pe's levels to the dirty bound (a pass over it begins). */
static void dirty_begin(struct tier_upload *u, const struct policy_ent *pe, uint32_t tenant)
{
    if (!u->cfg.dirty)
        return;
    struct tier_dirty_level *lv = calloc(pe->ndirs + 1, sizeof(*lv));
    if (!lv)
        return;
    size_t n = 0;
    for (size_t i = 0; i < pe->ndirs; i++) {
        lv[n].dir = pe->dirs[i].dir;
        lv[n].decides = tier_dirpol_dirty(&pe->dirs[i], &lv[n].bound);
        n++;
    }
    tier_dirty_pass_begin(u->cfg.dirty, pe->bucket, tenant, lv, n);
    free(lv);
}

static void scan_bucket(struct tier_upload *u, const struct policy_ent *pe, uint32_t group,
                        int64_t now_ns)
{
    struct bscan *s = calloc(1, sizeof(*s));
    if (!s)
        return;
    char *prev = malloc(META_KEY_MAX + 1);
    size_t prevlen = 0;
    if (!prev) {
        free(s);
        return;
    }
    s->u = u;
    s->pe = pe;
    s->group = group;
    s->now_ns = now_ns;
    bool first = true;
    for (;;) {
        if (meta_rtxn_begin(u->cfg.meta, &s->t) != 0)
            break;
        if (first) {
            struct meta_inode b;
            if (meta_inode_get(s->t, pe->bucket, &b) == 0) {
                pthread_mutex_lock(&u->mu);
                struct bstat *bs = bstat_get(u, pe->bucket, true);
                if (bs) {
                    bs->tenant = b.tenant;
                    bs->seen = true;
                }
                pthread_mutex_unlock(&u->mu);
                dirty_begin(u, pe, b.tenant);
                s->hasten = u->cfg.dirty && tier_dirty_hasten(u->cfg.dirty, pe->bucket);
            }
            first = false;
        }
        s->seen = 0;
        s->more = false;
        int rc;
        if (s->lastlen) {
            /* continue after the last key: from it, skipping it */
            char from[META_KEY_MAX + 2];
            memcpy(from, s->last, s->lastlen);
            from[s->lastlen] = '\0';
            size_t fl = s->lastlen + 1; /* the smallest key after it */
            if (s->lastlen > META_KEY_HEAD)
                fl = META_KEY_HEAD; /* long keys are ordered by a hash after their head:
                                     * go back to the head (its keys are seen again)
                                     * rather than skip any */
            rc = meta_keyidx_scan(s->t, pe->bucket, "", 0, from, fl, bscan_cb, s);
        } else {
            rc = meta_keyidx_scan(s->t, pe->bucket, "", 0, NULL, 0, bscan_cb, s);
        }
        meta_rtxn_end(s->t);
        rt_flush(u, s);
        if (rc < 0 || u->stop)
            break;
        if (!s->more) {
            if (u->cfg.dirty)
                tier_dirty_pass_end(u->cfg.dirty, pe->bucket); /* its pending bytes stand */
            break;
        }
        /* a chunk of nothing but long keys of one head would go round: stop (the rest
         * of the bucket waits; it takes 512 keys sharing their first 495 bytes) */
        if (s->lastlen == prevlen && memcmp(s->last, prev, prevlen) == 0)
            break;
        prevlen = s->lastlen;
        memcpy(prev, s->last, prevlen);
    }
    free(prev);
    free(s);
}

/* The tierst records whose file is gone: remote copies to delete. */
struct dscan {
    struct tier_upload *u;
    const struct policies *ps;
    struct meta_txn *t;
    uint64_t last;
    size_t seen;
    bool more;
};

static int dscan_cb(void *arg, uint64_t ino, const struct meta_tier_copy *c)
{
    struct dscan *s = arg;
    struct tier_upload *u = s->u;
    if (s->seen == SCAN_CHUNK) {
        s->more = true;
        return 1;
    }
    s->seen++;
    s->last = ino;
    if (!c)
        return 0;
    struct meta_inode r;
    int rc = meta_inode_get(s->t, ino, &r);
    if (rc == 0 && r.type == FILE_TYPE_REG && r.nlink > 0 && r.bucket == c->st.bucket)
        return 0; /* the file lives: the bucket's pass handles a changed key */
    for (size_t i = 0; i < s->ps->n; i++)
        if (s->ps->v[i].bucket == c->st.bucket && s->ps->v[i].ro)
            return 0; /* a read-only cache bucket never changes its remote */
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, c->st.bucket, true);
    if (b) {
        b->cur.deletes_pending++;
        if (b->barrier_ns)
            b->pend_barrier_cur++;
    }
    rc = 0;
    if (u->queued < (size_t)u->nwork * 8 && !remote_down(u, c->st.remote) &&
        !inflight_has(u, ino) &&
        !(fail_find(u, ino) && fail_find(u, ino)->until_ms > srv_now_ms())) {
        struct job *j = calloc(1, sizeof(*j));
        if (j && (j->key = strdup(c->key))) {
            j->del = true;
            j->ino = ino;
            j->bucket = c->st.bucket;
            j->change = c->st.change;
            j->remote = c->st.remote;
            rc = queue(u, j);
        } else {
            if (j)
                job_free(j);
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

static void scan_deletes(struct tier_upload *u, const struct policies *ps)
{
    struct dscan s = {.u = u, .ps = ps};
    for (;;) {
        if (meta_rtxn_begin(u->cfg.meta, &s.t) != 0)
            return;
        s.seen = 0;
        s.more = false;
        int rc = meta_tier_scan(s.t, s.last, dscan_cb, &s);
        meta_rtxn_end(s.t);
        if (rc < 0 || !s.more || u->stop)
            return;
    }
}

struct name_find {
    uint64_t ino;
    char *out;
    size_t outlen;
};

static int name_cb(void *arg, uint64_t cookie, uint64_t ino, const char *name, size_t len)
{
    struct name_find *f = arg;
    (void)cookie;
    if (ino != f->ino)
        return 0;
    snprintf(f->out, f->outlen, "%.*s", (int)len, name);
    return 1;
}

/* The names of buckets first seen (for /metrics). */
static void name_buckets(struct tier_upload *u)
{
    for (size_t i = 0;; i++) {
        uint64_t bucket = 0;
        pthread_mutex_lock(&u->mu);
        if (i >= u->nb) {
            pthread_mutex_unlock(&u->mu);
            return;
        }
        if (!u->b[i].name[0])
            bucket = u->b[i].bucket;
        pthread_mutex_unlock(&u->mu);
        if (!bucket)
            continue;
        struct meta_txn *t;
        struct meta_inode r;
        char name[256] = "";
        if (meta_rtxn_begin(u->cfg.meta, &t) != 0)
            return;
        if (meta_inode_get(t, bucket, &r) == 0) {
            struct name_find f = {bucket, name, sizeof(name)};
            meta_dirent_scan_names(t, r.parent, name_cb, &f);
        }
        meta_rtxn_end(t);
        pthread_mutex_lock(&u->mu);
        struct bstat *b = bstat_get(u, bucket, false);
        if (b)
            snprintf(b->name, sizeof(b->name), "%s", name[0] ? name : "?");
        pthread_mutex_unlock(&u->mu);
    }
}

/* Evict what the policies say, from the candidates the scan found. */
static void evict_pass(struct tier_upload *u, const struct policies *ps, int64_t now_ns)
{
    if (!u->ncands || !u->cfg.evict)
        return;
    uint64_t used = 0, cap = 0;
    if (!u->cfg.capacity || u->cfg.capacity(u->cfg.core_arg, &used, &cap) != 0)
        cap = 0;
    uint32_t ngroups = ps->n < 1024 ? (uint32_t)ps->n : 1024;
    tier_evict_plan(u->cands, u->ncands, now_ns / 1000000000ll, used, cap, ngroups);
    for (size_t i = 0; i < u->ncands && !u->stop; i++) {
        struct tier_evict_cand *c = &u->cands[i];
        if (!c->pick)
            continue;
        uint64_t freed = 0;
        int rc = u->cfg.evict(u->cfg.core_arg, c->ino, c->change, &freed);
        pthread_mutex_lock(&u->mu);
        if (rc == 0) {
            u->evict_files++;
            u->evict_bytes += freed;
            struct bstat *b = c->group < ps->n ? bstat_get(u, ps->v[c->group].bucket, false) : NULL;
            if (b)
                b->evictions++;
        } else if (rc != -EAGAIN && rc != SRV_ESTALE) {
            u->evict_errors++;
        }
        pthread_mutex_unlock(&u->mu);
        if (rc == 0)
            srv_log(INFO, TIER,
                    "evicted ino=%" PRIu64 " (%" PRIu64 " bytes freed, last read %lld"
                    " s ago, %s; store %" PRIu64 " of %" PRIu64 " bytes used)",
                    c->ino, freed, (long long)(now_ns / 1000000000ll - c->last_s),
                    c->after_s && now_ns / 1000000000ll - c->last_s >= c->after_s
                        ? "not read for evict_after_s"
                        : "over the high watermark",
                    used, cap);
        else if (rc != -EAGAIN && rc != SRV_ESTALE)
            srv_log(WARN, TIER, "eviction of ino=%" PRIu64 ": %s", c->ino, srv_strerror(rc));
    }
}

static void pass(struct tier_upload *u)
{
    struct policies ps = {0};
    struct meta_txn *t;
    if (meta_rtxn_begin(u->cfg.meta, &t) != 0)
        return;
    int rc = meta_bucketcfg_scan(t, BUCKET_KIND_TIER, policy_cb, &ps);
    if (rc >= 0)
        rc = meta_bucketcfg_scan(t, BUCKET_KIND_CACHE, cache_cb, &ps);
    if (rc >= 0)
        rc = meta_bucketcfg_scan(t, TIER_DIRS_KIND, dirs_cb, &ps);
    meta_rtxn_end(t);
    tier_settings_refresh(u->cfg.meta); /* read-only levels (the admin API refreshes too) */
    if (rc < 0) {
        policies_free(&ps);
        return;
    }
    int64_t now_ns = real_ns();
    pthread_mutex_lock(&u->mu);
    uint64_t passno = ++u->passes;
    for (size_t i = 0; i < u->nb; i++) {
        memset(&u->b[i].cur, 0, sizeof(u->b[i].cur));
        u->b[i].pend_barrier_cur = 0;
        u->b[i].seen = false;
    }
    pthread_mutex_unlock(&u->mu);
    u->ncands = 0;
    for (size_t i = 0; i < ps.n && !u->stop; i++)
        scan_bucket(u, &ps.v[i], (uint32_t)i, now_ns);
    if (!u->stop && u->cfg.dirty)
        tier_dirty_sweep(u->cfg.dirty); /* buckets whose policy went */
    if (!u->stop)
        scan_deletes(u, &ps);
    if (!u->stop)
        evict_pass(u, &ps, now_ns);
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->nb; i++) {
        struct bstat *b = &u->b[i];
        char err[sizeof(b->st.last_error)];
        int64_t errs = b->st.last_error_s;
        memcpy(err, b->st.last_error, sizeof(err));
        bool tiered = false;
        for (size_t k = 0; k < ps.n; k++)
            tiered |= ps.v[k].bucket == b->bucket;
        b->st = b->cur;
        b->st.tiered = tiered;
        b->st.passes = b->done_pass + 1;
        memcpy(b->st.last_error, err, sizeof(err));
        b->st.last_error_s = errs;
        b->st.evictions = b->evictions;
        /* a barrier counts files still to do, and those in flight */
        b->pend_barrier = b->pend_barrier_cur;
        b->done_pass = passno;
    }
    pthread_mutex_unlock(&u->mu);
    policies_free(&ps);
    name_buckets(u);
}

static void *scan_main(void *arg)
{
    struct tier_upload *u = arg;
    pthread_mutex_lock(&u->mu);
    while (!u->stop) {
        pthread_mutex_unlock(&u->mu);
        pass(u);
        pthread_mutex_lock(&u->mu);
        if (u->stop)
            break;
        if (!u->kicked) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += u->cfg.poll_ms / 1000;
            until.tv_nsec += (long)(u->cfg.poll_ms % 1000) * 1000000l;
            if (until.tv_nsec >= 1000000000l) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000l;
            }
            pthread_cond_timedwait(&u->scan_cv, &u->mu, &until);
        }
        u->kicked = false;
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* ---- public calls ---- */

/* Loop thread: cancel every request and free the clients; none is made or used after. */
static void loop_close_fn(void *arg)
{
    struct tier_upload *u = arg;
    /* held throughout: no worker registers a client meanwhile (the done callbacks that
     * tier_s3_free runs take only their own request's lock) */
    pthread_mutex_lock(&u->mu);
    u->closing = true;
    for (size_t i = 0; i < u->nrc; i++) {
        tier_s3_free(u->rc[i].s3); /* done callbacks run now, with -ECANCELED */
        u->rc[i].s3 = NULL;
    }
    for (size_t i = 0; i < u->nretired; i++)
        tier_s3_free(u->retired[i]);
    free(u->retired);
    u->retired = NULL;
    u->nretired = 0;
    pthread_mutex_unlock(&u->mu);
}

static void loop_break_fn(void *arg)
{
    struct tier_upload *u = arg;
    event_del(u->keep);
    event_base_loopbreak(u->base);
}

void tier_upload_stop(struct tier_upload *u)
{
    if (!u)
        return;
    struct tier_upload *me = u;
    atomic_compare_exchange_strong(&the_uploader, &me, NULL);
    pthread_mutex_lock(&u->mu);
    u->stop = true;
    pthread_cond_broadcast(&u->work_cv);
    pthread_cond_broadcast(&u->scan_cv);
    pthread_mutex_unlock(&u->mu);
    if (u->scan_started)
        pthread_join(u->scan_thread, NULL);
    /* workers may wait on the loop: cancel their requests by freeing the clients there,
     * then let the workers end, then the loop */
    if (u->loop_started)
        run_on_loop(u, loop_close_fn, u);
    for (uint32_t i = 0; i < u->nwork; i++)
        pthread_join(u->work_threads[i], NULL);
    if (u->loop_started) {
        run_on_loop(u, loop_break_fn, u);
        pthread_join(u->loop_thread, NULL);
    }
    while (u->head) {
        struct job *j = u->head;
        u->head = j->next;
        job_free(j);
    }
    if (u->keep)
        event_free(u->keep);
    if (u->base)
        event_base_free(u->base);
    free(u->work_threads);
    free(u->inflight);
    free(u->cands);
    free(u->b);
    free(u->rc);
    for (size_t i = 0; i < u->nstale; i++) {
        free(u->stale[i].key);
        free(u->stale[i].upload_id);
    }
    free(u->stale);
    pthread_mutex_destroy(&u->mu);
    pthread_mutex_destroy(&u->mk);
    pthread_cond_destroy(&u->work_cv);
    pthread_cond_destroy(&u->scan_cv);
    free(u);
}

int tier_upload_start(struct tier_upload **out, const struct tier_upload_config *cfg)
{
    if (!cfg->meta || !cfg->read || !cfg->remote)
        return -EINVAL;
    struct tier_upload *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->cfg = *cfg;
    if (!u->cfg.workers)
        u->cfg.workers = 4;
    if (!u->cfg.poll_ms)
        u->cfg.poll_ms = 1000;
    if (!u->cfg.part_size)
        u->cfg.part_size = 8u << 20;
    if (u->cfg.part_size < (5u << 20))
        u->cfg.part_size = 5u << 20; /* S3's smallest part */
    if (!u->cfg.retry_base_ms)
        u->cfg.retry_base_ms = 1000;
    if (!u->cfg.retry_max_ms)
        u->cfg.retry_max_ms = 300000;
    if (u->cfg.retry_max_ms < u->cfg.retry_base_ms)
        u->cfg.retry_max_ms = u->cfg.retry_base_ms;
    u->started_s = (int64_t)time(NULL);
    u->rnd = (uint32_t)real_ns() | 1;
    pthread_mutex_init(&u->mu, NULL);
    pthread_mutex_init(&u->mk, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->scan_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&u->work_cv, NULL);
    int rc = -ENOMEM;
    evthread_use_pthreads();
    u->base = event_base_new();
    if (!u->base)
        goto fail;
    /* keep the loop running while it has nothing to do */
    u->keep = event_new(u->base, -1, EV_PERSIST, keep_cb, NULL);
    struct timeval day = {86400, 0};
    if (!u->keep || event_add(u->keep, &day) < 0)
        goto fail;
    if ((rc = -pthread_create(&u->loop_thread, NULL, loop_main, u)) != 0)
        goto fail;
    u->loop_started = true;
    u->work_threads = calloc(u->cfg.workers, sizeof(*u->work_threads));
    if (!u->work_threads) {
        rc = -ENOMEM;
        goto fail;
    }
    for (; u->nwork < u->cfg.workers; u->nwork++)
        if ((rc = -pthread_create(&u->work_threads[u->nwork], NULL, work_main, u)) != 0)
            goto fail;
    if ((rc = -pthread_create(&u->scan_thread, NULL, scan_main, u)) != 0)
        goto fail;
    u->scan_started = true;
    struct tier_upload *none = NULL;
    atomic_compare_exchange_strong(&the_uploader, &none, u);
    *out = u;
    return 0;
fail:
    tier_upload_stop(u);
    return rc;
}

struct tier_upload *tier_upload_default(void)
{
    return atomic_load(&the_uploader);
}

struct tier_dirty *tier_upload_dirty(struct tier_upload *u)
{
    return u ? u->cfg.dirty : NULL;
}

bool tier_upload_busy(struct tier_upload *u, uint64_t ino)
{
    if (!u)
        return false;
    pthread_mutex_lock(&u->mu);
    bool busy = inflight_has(u, ino);
    pthread_mutex_unlock(&u->mu);
    return busy;
}

void tier_upload_kick(struct tier_upload *u)
{
    pthread_mutex_lock(&u->mu);
    u->kicked = true;
    pthread_cond_signal(&u->scan_cv);
    pthread_mutex_unlock(&u->mu);
}

void tier_upload_remote_changed(struct tier_upload *u, uint32_t id)
{
    pthread_mutex_lock(&u->mu);
    struct rclient *r = rclient_find(u, id);
    if (r && r->s3 && !u->closing) {
        /* workers may hold the old client: it stays (requests in flight finish on it)
         * until the stop; the next request makes a new one from the stored remote */
        void *nv = realloc(u->retired, (u->nretired + 1) * sizeof(*u->retired));
        if (nv) {
            u->retired = nv;
            u->retired[u->nretired++] = r->s3;
            r->s3 = NULL;
            r->tries = 0;
            r->down_until_ms = 0;
        }
    }
    pthread_mutex_unlock(&u->mu);
}

int tier_upload_state(struct tier_upload *u, uint64_t bucket, uint64_t ino, uint64_t change,
                      const char *key, size_t keylen, struct tier_file_info *out)
{
    struct meta_txn *t;
    const void *v;
    size_t vl;
    struct tier_policy p;
    memset(out, 0, sizeof(*out));
    /* GET and HEAD of every bucket ask, on event-loop threads: a bucket the last pass
     * did not find tiered costs no metadata read (a new policy shows after one pass) */
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, bucket, false);
    bool tiered = b && b->st.tiered;
    pthread_mutex_unlock(&u->mu);
    if (!tiered)
        return 0;
    int rc = meta_rtxn_begin(u->cfg.meta, &t);
    if (rc)
        return rc;
    rc = meta_bucketcfg_get(t, bucket, BUCKET_KIND_TIER, &v, &vl);
    if (rc == -ENOENT || (rc == 0 && tier_policy_decode(v, vl, &p) != 0)) {
        meta_rtxn_end(t);
        return 0; /* not tiered */
    }
    if (rc) {
        meta_rtxn_end(t);
        return rc;
    }
    struct meta_tier_copy *c = malloc(sizeof(*c));
    if (!c) {
        meta_rtxn_end(t);
        return -ENOMEM;
    }
    out->state = TIER_STATE_LOCAL;
    struct meta_inode r;
    bool evicted = meta_inode_get(t, ino, &r) == 0 && (r.flags & META_I_EVICTED);
    if (meta_tier_get(t, ino, c) == 0 && c->st.change == change && c->st.remote == p.remote &&
        c->st.keylen == keylen && memcmp(c->key, key, keylen) == 0) {
        out->state = evicted ? TIER_STATE_EVICTED : TIER_STATE_UPLOADED;
        snprintf(out->etag, sizeof(out->etag), "%s", c->st.etag);
        out->time_s = c->st.time_s;
    } else if (evicted) {
        out->state = TIER_STATE_EVICTED; /* its copy is under another key or remote */
    }
    meta_rtxn_end(t);
    free(c);
    if (out->state == TIER_STATE_LOCAL) {
        pthread_mutex_lock(&u->mu);
        if (inflight_has(u, ino))
            out->state = TIER_STATE_UPLOADING;
        pthread_mutex_unlock(&u->mu);
    }
    return 0;
}

int tier_upload_bucket_stats(struct tier_upload *u, uint64_t bucket, struct tier_bucket_stats *out)
{
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, bucket, false);
    if (b) {
        *out = b->st;
        out->uploading = b->uploading;
    }
    pthread_mutex_unlock(&u->mu);
    return b ? 0 : -ENOENT;
}

int tier_upload_flush(struct tier_upload *u, uint64_t bucket, uint64_t *barrier)
{
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, bucket, true);
    if (!b) {
        pthread_mutex_unlock(&u->mu);
        return -ENOMEM;
    }
    b->barrier_ns = real_ns();
    b->barrier_pass = u->passes; /* a pass begun after this one decides */
    b->barrier_seq = ++u->seq;
    *barrier = b->barrier_seq;
    u->kicked = true;
    pthread_cond_signal(&u->scan_cv);
    pthread_mutex_unlock(&u->mu);
    return 0;
}

int tier_upload_hasten(struct tier_upload *u, uint64_t bucket, int64_t before_ns)
{
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, bucket, true);
    if (b && before_ns > b->hasten_ns) {
        b->hasten_ns = before_ns;
        u->kicked = true;
        pthread_cond_signal(&u->scan_cv);
    }
    pthread_mutex_unlock(&u->mu);
    return b ? 0 : -ENOMEM;
}

int tier_upload_flush_done(struct tier_upload *u, uint64_t bucket, uint64_t barrier, bool *done)
{
    pthread_mutex_lock(&u->mu);
    struct bstat *b = bstat_get(u, bucket, false);
    int rc = 0;
    if (!b || barrier == 0 || barrier > b->barrier_seq) {
        rc = -EINVAL;
    } else {
        /* the latest barrier covers the older ones (it is later) */
        *done = b->done_pass > b->barrier_pass && b->pend_barrier == 0;
        if (!*done && b->done_pass > b->barrier_pass) {
            u->kicked = true; /* look again soon */
            pthread_cond_signal(&u->scan_cv);
        }
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

int tier_upload_fetch(struct tier_upload *u, uint64_t ino, uint64_t off, void *buf, size_t len,
                      size_t *n, struct tier_fetch_meta *meta)
{
    struct meta_txn *t;
    struct meta_tier_copy *c = malloc(sizeof(*c));
    *n = 0;
    if (!c)
        return -ENOMEM;
    int rc = meta_rtxn_begin(u->cfg.meta, &t);
    if (rc) {
        free(c);
        return rc;
    }
    rc = meta_tier_get(t, ino, c);
    meta_rtxn_end(t);
    if (rc) {
        free(c);
        srv_log(WARN, TIER, "recall of ino=%" PRIu64 ": no record of its remote copy (%s)", ino,
                srv_strerror(rc));
        return rc == -ENOENT ? SRV_EREMOTECHG : rc;
    }
    char why[256];
    int parallel = 0, err = 0;
    struct tier_s3 *s3 = client_get(u, c->st.remote, &parallel, why, sizeof(why), &err, false);
    if (!s3) {
        srv_log(WARN, TIER, "recall of ino=%" PRIu64 " from remote %u: %s", ino, c->st.remote, why);
        free(c);
        pthread_mutex_lock(&u->mu);
        u->fetch_retry++;
        pthread_mutex_unlock(&u->mu);
        return err == -ENOENT ? SRV_EREMOTECHG : SRV_ERECALL;
    }
    struct tier_s3_op op = {.code = TIER_S3_GET_OBJECT,
                            .key = c->key,
                            .off = off,
                            .len = len,
                            .obj_size = c->st.size, /* all of it: a plain GET */
                            .if_match = c->st.etag,
                            .dest = buf,
                            .dest_len = len}; /* the body goes straight into buf, copied once */
    struct tier_s3_result res;
    memset(&res, 0, sizeof(res));
    rc = run_one(u, s3, &op, &res);
    size_t got = (size_t)res.bytes;
    if (rc) {
        bool gone = res.status == 404 || res.status == 412 || res.status == 416;
        srv_log(WARN, TIER, "recall of ino=%" PRIu64 " (remote %u key '%s' at %" PRIu64 "): %s%s",
                ino, c->st.remote, c->key, off, res.message[0] ? res.message : srv_strerror(rc),
                gone ? " (the remote object changed or is gone: not served)" : "");
        rc = gone ? SRV_EREMOTECHG : (res.retryable || res.status == 0) ? SRV_ERECALL : -EIO;
    } else if (res.obj.size != c->st.size || got != len ||
               (res.obj.etag[0] && strcmp(res.obj.etag, c->st.etag) != 0)) {
        srv_log(WARN, TIER,
                "recall of ino=%" PRIu64 ": the remote object '%s' has %" PRIu64
                " bytes (ETag %s), its record %" PRIu64 " (ETag %s): not served",
                ino, c->key, res.obj.size, res.obj.etag, c->st.size, c->st.etag);
        rc = SRV_EREMOTECHG;
    } else if (meta && (rc = tier_objmeta_encode(res.obj.content_type, res.meta, res.nmeta,
                                                 &meta->blob, &meta->len)) == 0) {
        snprintf(meta->etag, sizeof(meta->etag), "%s", c->st.etag);
        *n = len;
    } else if (!meta) {
        *n = len;
    }
    tier_s3_result_fini(&res);
    free(c);
    pthread_mutex_lock(&u->mu);
    if (rc == 0) {
        u->fetch_ok++;
        u->fetch_bytes += len;
    } else if (rc == SRV_EREMOTECHG) {
        u->fetch_changed++;
    } else {
        u->fetch_retry++;
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

int tier_upload_head_meta(struct tier_upload *u, uint32_t remote, const char *key, const char *etag,
                          void **blob, size_t *len)
{
    char why[256];
    int parallel = 0, err = 0;
    *blob = NULL;
    *len = 0;
    struct tier_s3 *s3 = client_get(u, remote, &parallel, why, sizeof(why), &err, false);
    if (!s3) {
        srv_log(WARN, TIER, "metadata of remote %u key '%s': %s", remote, key, why);
        return err == -ENOENT ? -ENOENT : SRV_ERECALL;
    }
    struct tier_s3_op op = {.code = TIER_S3_HEAD_OBJECT, .key = key};
    struct tier_s3_result res;
    memset(&res, 0, sizeof(res));
    int rc = run_one(u, s3, &op, &res);
    if (rc) {
        bool gone = res.status == 404 || res.status == 412;
        srv_log(WARN, TIER, "metadata of remote %u key '%s': %s", remote, key,
                res.message[0] ? res.message : srv_strerror(rc));
        rc = gone ? SRV_EREMOTECHG : (res.retryable || res.status == 0) ? SRV_ERECALL : -EIO;
    } else if (res.obj.etag[0] && strcmp(res.obj.etag, etag) != 0) {
        rc = SRV_EREMOTECHG; /* another object now: its metadata is not this file's */
    } else {
        rc = tier_objmeta_encode(res.obj.content_type, res.meta, res.nmeta, blob, len);
    }
    tier_s3_result_fini(&res);
    return rc;
}

int tier_upload_list_dir(struct tier_upload *u, uint32_t remote, const char *dirkey,
                         tier_list_obj_cb obj, tier_list_dir_cb dir, void *arg)
{
    char why[256];
    int parallel = 0, err = 0;
    struct tier_s3 *s3 = client_get(u, remote, &parallel, why, sizeof(why), &err, false);
    if (!s3) {
        srv_log(WARN, TIER, "cache listing of remote %u: %s", remote, why);
        return err == -ENOENT ? -ENOENT : SRV_ERECALL;
    }
    size_t dl = strlen(dirkey);
    char *token = NULL;
    int rc = 0;
    for (int page = 0; rc == 0; page++) {
        struct tier_s3_op op = {
            .code = TIER_S3_LIST_OBJECTS, .prefix = dirkey, .delimiter = "/", .token = token};
        struct tier_s3_result res;
        memset(&res, 0, sizeof(res));
        rc = run_one(u, s3, &op, &res);
        free(token);
        token = NULL;
        if (rc) {
            srv_log(WARN, TIER, "cache listing of remote %u prefix '%s': %s", remote, dirkey,
                    res.message[0] ? res.message : srv_strerror(rc));
            rc = (res.retryable || res.status == 0 || res.status >= 500) ? SRV_ERECALL : -EIO;
            tier_s3_result_fini(&res);
            break;
        }
        for (size_t i = 0; rc == 0 && i < res.nentries; i++) {
            const struct tier_s3_entry *e = &res.entries[i];
            if (strncmp(e->key, dirkey, dl) != 0)
                continue;
            rc = obj(arg, e->key + dl, e->size, e->etag, e->time);
        }
        for (size_t i = 0; rc == 0 && i < res.nprefixes; i++) {
            const char *pf = res.prefixes[i];
            size_t pl = strlen(pf);
            if (pl <= dl + 1 || strncmp(pf, dirkey, dl) != 0 || pf[pl - 1] != '/')
                continue;
            char *nm = strndup(pf + dl, pl - dl - 1);
            if (!nm) {
                rc = -ENOMEM;
                break;
            }
            rc = dir(arg, nm);
            free(nm);
        }
        bool more = res.truncated && res.next_token && res.next_token[0];
        if (more) {
            token = res.next_token;
            res.next_token = NULL;
        }
        tier_s3_result_fini(&res);
        if (!more)
            break;
    }
    free(token);
    return rc;
}

struct dirty_render {
    struct tier_upload *u;
    struct evbuffer *out;
    int f;
};

static void dirty_render_one(void *arg, uint64_t bucket, uint32_t tenant, uint64_t level,
                             const struct tier_dirty_stat *st)
{
    struct dirty_render *r = arg;
    struct bstat *b = bstat_get(r->u, bucket, false);
    char lv[32] = "bucket";
    if (level != bucket)
        snprintf(lv, sizeof(lv), "%" PRIu64, level);
    double v = r->f == 0   ? (double)st->dirty
               : r->f == 1 ? (double)st->bound
               : r->f == 2 ? (double)st->held_total
                           : (double)st->held_us / 1e6;
    evbuffer_add_printf(r->out, "%s{tenant=\"%u\",bucket=\"%s\",level=\"%s\"} %.*f\n",
                        r->f == 0   ? "s3nfs_tier_dirty_bytes"
                        : r->f == 1 ? "s3nfs_tier_dirty_bound_bytes"
                        : r->f == 2 ? "s3nfs_tier_dirty_held_total"
                                    : "s3nfs_tier_dirty_held_seconds_total",
                        tenant, b && b->name[0] ? b->name : "?", lv, r->f == 3 ? 6 : 0, v);
}

void tier_upload_metrics(struct tier_upload *u, struct evbuffer *out)
{
    pthread_mutex_lock(&u->mu);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_tier_uploaded_files_total Files the tier copied to a "
                        "remote.\n# TYPE s3nfs_tier_uploaded_files_total counter\n"
                        "s3nfs_tier_uploaded_files_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_uploaded_bytes_total Bytes the tier copied to "
                        "remotes.\n# TYPE s3nfs_tier_uploaded_bytes_total counter\n"
                        "s3nfs_tier_uploaded_bytes_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_deleted_total Remote copies deleted because their "
                        "file went.\n# TYPE s3nfs_tier_deleted_total counter\n"
                        "s3nfs_tier_deleted_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_remote_errors_total Failed tier operations, by kind."
                        "\n# TYPE s3nfs_tier_remote_errors_total counter\n",
                        u->up_files, u->up_bytes, u->del_files);
    for (int k = 0; k < 6; k++)
        evbuffer_add_printf(out, "s3nfs_tier_remote_errors_total{kind=\"%s\"} %" PRIu64 "\n",
                            ek_names[k], u->err_kind[k]);
    static const struct {
        int code;
        const char *name;
    } reqs[] = {{TIER_S3_PUT_OBJECT, "put_object"},
                {TIER_S3_MPU_CREATE, "create_multipart_upload"},
                {TIER_S3_MPU_PART, "upload_part"},
                {TIER_S3_MPU_COMPLETE, "complete_multipart_upload"},
                {TIER_S3_MPU_ABORT, "abort_multipart_upload"},
                {TIER_S3_HEAD_OBJECT, "head_object"},
                {TIER_S3_DELETE_OBJECT, "delete_object"},
                {TIER_S3_COPY_OBJECT, "copy_object"},
                {TIER_S3_MPU_PART_COPY, "upload_part_copy"}};
    evbuffer_add_printf(out, "# HELP s3nfs_tier_upload_requests_total Requests the uploader sent "
                             "(uploads, their confirmation, deletes), by S3 operation.\n"
                             "# TYPE s3nfs_tier_upload_requests_total counter\n");
    for (size_t k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++)
        evbuffer_add_printf(out, "s3nfs_tier_upload_requests_total{op=\"%s\"} %" PRIu64 "\n",
                            reqs[k].name, u->req_n[reqs[k].code]);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_tier_upload_body_bytes_total Body bytes of the uploader's "
                        "PUTs and parts sent, including uploads given up.\n"
                        "# TYPE s3nfs_tier_upload_body_bytes_total counter\n"
                        "s3nfs_tier_upload_body_bytes_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_upload_changed_total Uploads given up because the file "
                        "changed (while queued or read); it goes again as it is now.\n"
                        "# TYPE s3nfs_tier_upload_changed_total counter\n"
                        "s3nfs_tier_upload_changed_total %" PRIu64 "\n",
                        u->body_bytes, u->changed);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_tier_copied_files_total Renamed files whose remote copy "
                        "was copied server-side to the new key (not uploaded again).\n"
                        "# TYPE s3nfs_tier_copied_files_total counter\n"
                        "s3nfs_tier_copied_files_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_copied_bytes_total Bytes of those files.\n"
                        "# TYPE s3nfs_tier_copied_bytes_total counter\n"
                        "s3nfs_tier_copied_bytes_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_copy_mismatch_total Renamed files uploaded again "
                        "because their bytes were no longer their remote copy's.\n"
                        "# TYPE s3nfs_tier_copy_mismatch_total counter\n"
                        "s3nfs_tier_copy_mismatch_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_upload_held_total Times a due file was not queued "
                        "because its writer was still writing (uncommitted NFS writes, or "
                        "an empty file just made).\n"
                        "# TYPE s3nfs_tier_upload_held_total counter\n"
                        "s3nfs_tier_upload_held_total %" PRIu64 "\n",
                        u->copies, u->copy_bytes, u->copy_mismatch, u->held_pending);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_tier_copy_kept_total Changed files whose remote copy "
                        "was current as it was (metadata not on the remote): no upload.\n"
                        "# TYPE s3nfs_tier_copy_kept_total counter\n"
                        "s3nfs_tier_copy_kept_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_copy_meta_total Changed files whose remote copy got "
                        "their new metadata by a server-side copy onto itself.\n"
                        "# TYPE s3nfs_tier_copy_meta_total counter\n"
                        "s3nfs_tier_copy_meta_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_copy_lost_total Evicted files whose remote copy (their "
                        "only one) changed or went before it could be copied.\n"
                        "# TYPE s3nfs_tier_copy_lost_total counter\n"
                        "s3nfs_tier_copy_lost_total %" PRIu64 "\n",
                        u->kept, u->meta_copies, u->copy_lost);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_tier_evictions_total Files whose local extents the tier "
                        "freed.\n# TYPE s3nfs_tier_evictions_total counter\n"
                        "s3nfs_tier_evictions_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_evicted_bytes_total Local bytes freed by evictions."
                        "\n# TYPE s3nfs_tier_evicted_bytes_total counter\n"
                        "s3nfs_tier_evicted_bytes_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_eviction_errors_total Evictions that failed."
                        "\n# TYPE s3nfs_tier_eviction_errors_total counter\n"
                        "s3nfs_tier_eviction_errors_total %" PRIu64 "\n"
                        "# HELP s3nfs_tier_recall_gets_total Ranged GETs of recalls, by result."
                        "\n# TYPE s3nfs_tier_recall_gets_total counter\n"
                        "s3nfs_tier_recall_gets_total{result=\"ok\"} %" PRIu64 "\n"
                        "s3nfs_tier_recall_gets_total{result=\"retry\"} %" PRIu64 "\n"
                        "s3nfs_tier_recall_gets_total{result=\"changed\"} %" PRIu64 "\n",
                        u->evict_files, u->evict_bytes, u->evict_errors, u->fetch_ok,
                        u->fetch_retry, u->fetch_changed);
    static const char *const fam[][2] = {
        {"s3nfs_tier_pending_files", "Files of a tiered bucket not uploaded yet."},
        {"s3nfs_tier_pending_bytes", "Bytes of those files."},
        {"s3nfs_tier_upload_lag_seconds", "Age of the oldest change not uploaded yet."},
        {"s3nfs_tier_deletes_pending", "Remote copies whose file is gone, to delete."},
        {"s3nfs_tier_local_bytes", "Bytes of a tiered bucket's files held locally."},
        {"s3nfs_tier_remote_bytes", "Bytes of a tiered bucket's files with a current remote copy."},
        {"s3nfs_tier_evictable_bytes", "Local bytes of files that may be evicted (copied, not "
                                       "pinned)."},
        {"s3nfs_tier_evicted_bytes", "Bytes of evicted files (on the remote only)."},
        {"s3nfs_tier_evicted_files", "Evicted files."},
    };
    for (int f = 0; f < 9; f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", fam[f][0], fam[f][1],
                            fam[f][0]);
        for (size_t i = 0; i < u->nb; i++) {
            struct bstat *b = &u->b[i];
            if (!b->st.tiered && !b->st.deletes_pending)
                continue;
            uint64_t v = f == 0   ? b->st.pending_files
                         : f == 1 ? b->st.pending_bytes
                         : f == 2 ? (uint64_t)b->st.oldest_s
                         : f == 3 ? b->st.deletes_pending
                         : f == 4 ? b->st.local_bytes
                         : f == 5 ? b->st.remote_bytes
                         : f == 6 ? b->st.evictable_bytes
                         : f == 7 ? b->st.evicted_bytes
                                  : b->st.evicted_files;
            evbuffer_add_printf(out, "%s{tenant=\"%u\",bucket=\"%s\"} %" PRIu64 "\n", fam[f][0],
                                b->tenant, b->name[0] ? b->name : "?", v);
        }
    }
    static const char *const dfam[][3] = {
        {"s3nfs_tier_dirty_bytes", "gauge",
         "Bytes written locally and not confirmed on the remote, per bounded level (bucket, "
         "or a directory's inode)."},
        {"s3nfs_tier_dirty_bound_bytes", "gauge", "The level's dirty bound (0: none)."},
        {"s3nfs_tier_dirty_held_total", "counter",
         "Writes held because the level's dirty bytes would pass its bound."},
        {"s3nfs_tier_dirty_held_seconds_total", "counter", "Time those writes were held."},
    };
    for (int f = 0; f < 4 && u->cfg.dirty; f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", dfam[f][0], dfam[f][2], dfam[f][0],
                            dfam[f][1]);
        struct dirty_render r = {u, out, f};
        tier_dirty_each(u->cfg.dirty, dirty_render_one, &r);
    }
    pthread_mutex_unlock(&u->mu);
}
