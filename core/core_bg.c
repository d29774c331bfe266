/* SPDX-License-Identifier: Apache-2.0
 * core_bg: the background worker of the namespace sub-module (core_ns_int.h):
 * it settles files that NFS changed. A change whose result has no known MD5
 * (writes out of order, rewrites, truncation, files past what is hashed while
 * written) is noted in the dirty table by the op that commits it
 * (core__dirty_note); so is the open version of a file in a versioned
 * bucket. Once such a file has gone settle_ms without a change and has no
 * pending (uncommitted) writes, the worker reads it, stores the MD5 of its
 * content as its ETag and seals its version, in one op that first checks the
 * file did not change meanwhile (else it tries again on a later pass).
 *
 * A file of a versioned bucket that NFS created or changed holds an open
 * version (core_version.c): its settling also seals it, under the file's
 * pending record held exclusively, so that no write slips in between.
 *
 * Every disk read of this work goes through one function, bg_read, which
 * first hands the byte count to the I/O hook (core_bg_set_io: the daemon's
 * system QoS class, which may make the worker sleep) so that background
 * reads can be throttled. The on-demand MD5 of a HEAD/GET (core__etag_compute
 * from core_s3.c, small files only) reads through it too but skips the hook:
 * it is work of a client request, already admitted as that request, on a
 * thread that must not sleep for the system class.
 *
 * Bound: a file's ETag is known settle_ms after its last change was
 * committed, plus the time to read it at the rate the hook allows, plus one
 * poll of the worker (at most settle_ms / 2, at least 50 ms, at most 1 s); a file
 * the later hook (core_bg_set_later: the tier uploading it) puts off, after that.
 * Records survive restarts (the table is in LMDB), so work a crash
 * interrupted is done after the next open.
 * Thread: the worker is one thread; core_bg_run runs a pass on the caller's. */
#include "core_ns_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define BG_BATCH 64 /* records taken per scan of the table */

/* ---- the one read function of background work ---- */

static int bg_read(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                   void *buf, size_t len, size_t *n, bool hooked)
{
    struct core__bg *bg = &c->ns->bg;
    bool eof = false;
    core_bg_io_fn io = NULL;
    void *ioarg = NULL;
    if (hooked) {
        pthread_mutex_lock(&bg->mu);
        io = bg->io;
        ioarg = bg->ioarg;
        pthread_mutex_unlock(&bg->mu);
    }
    if (io) {
        int rc = io(ioarg, len);
        if (rc)
            return rc;
    }
    return core_read(c, p, ino, off, buf, len, n, &eof);
}

void core_bg_set_io(struct core *c, core_bg_io_fn fn, void *arg)
{
    pthread_mutex_lock(&c->ns->bg.mu);
    c->ns->bg.io = fn;
    c->ns->bg.ioarg = arg;
    pthread_mutex_unlock(&c->ns->bg.mu);
}

void core_bg_set_later(struct core *c, core_bg_later_fn fn, void *arg)
{
    pthread_mutex_lock(&c->ns->bg.mu);
    c->ns->bg.later = fn;
    c->ns->bg.laterarg = arg;
    pthread_mutex_unlock(&c->ns->bg.mu);
}

/* Is the MD5 of @p ino to wait (core_bg_set_later's hook)? */
static bool bg_later(struct core *c, uint64_t ino)
{
    pthread_mutex_lock(&c->ns->bg.mu);
    core_bg_later_fn fn = c->ns->bg.later;
    void *arg = c->ns->bg.laterarg;
    pthread_mutex_unlock(&c->ns->bg.mu);
    return fn && fn(arg, ino);
}

/* ---- ETags, settling ---- */

struct settle_op {
    struct core *c;
    uint64_t ino;
    uint64_t change;  /* the inode's change counter the work was done for */
    const char *etag; /* MD5 of the content to store, or NULL */
    bool settle;      /* the worker: the file is settled (drop its record); else only its
                       * ETag is known now (an on-demand MD5) */
};

static int settle_fn(struct meta_txn *t, void *arg)
{
    struct settle_op *a = arg;
    struct meta_inode r;
    int rc = meta_inode_get(t, a->ino, &r);
    if (rc == -ENOENT || (rc == 0 && r.type != CORE_REG)) {
        rc = meta_dirty_del(t, a->ino); /* gone (or not a file): nothing to settle */
        return rc == -ENOENT ? 0 : rc;
    }
    if (rc)
        return rc;
    if (r.change != a->change)
        return -EAGAIN; /* changed meanwhile: keep no stale ETag; a later pass settles it */
    if (a->etag) {
        char old[CORE_ETAG_MAX + 1];
        void *meta = NULL;
        size_t ml = 0;
        rc = meta_objmeta_get(t, a->ino, old, CORE_ETAG_MAX + 1, &meta, &ml);
        if (rc == 0 || rc == -ENOENT)
            rc = meta_objmeta_put(t, a->ino, a->etag, meta, ml);
        free(meta);
        if (rc)
            return rc;
    }
    if (!a->settle)
        return core__dirty_clear(t, a->ino, META_DIRTY_ETAG);
    struct meta_dirty d;
    if (meta_dirty_get(t, a->ino, &d) == 0 && (d.flags & META_DIRTY_SEAL)) {
        rc = core__ver_seal_t(t, a->ino, &r); /* its content is a version now */
        if (rc == 0)
            rc = meta_inode_put(t, a->ino, &r);
        if (rc)
            return rc;
    }
    rc = meta_dirty_del(t, a->ino);
    return rc == -ENOENT ? 0 : rc;
}

int core__etag_compute(struct core *c, uint32_t tenant, uint64_t ino, uint64_t size,
                       uint64_t change, bool store, bool hooked, char *etag)
{
    struct core_principal sp;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int rc = 0;
    memset(&sp, 0, sizeof(sp));
    sp.tenant = tenant;
    sp.flags = CORE_P_SUPER | CORE_P_VERSIONS; /* a file may have become a version meanwhile */
    char *buf = malloc(STORE_EXTENT_MAX);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint64_t off = 0; off < size && rc == 0;) {
        size_t n = 0;
        size_t want = size - off < STORE_EXTENT_MAX ? (size_t)(size - off) : STORE_EXTENT_MAX;
        rc = bg_read(c, &sp, ino, off, buf, want, &n, hooked);
        if (rc == 0 && n == 0)
            rc = -EAGAIN; /* shrank meanwhile */
        if (rc == 0)
            EVP_DigestUpdate(ctx, buf, n);
        off += n;
    }
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = -EIO;
    if (rc == 0) {
        for (unsigned int i = 0; i < mdlen; i++)
            snprintf(etag + 2 * i, 3, "%02x", md[i]);
        struct settle_op a = {c, ino, change, etag, false};
        if (store)
            rc = meta_submit(c->meta, settle_fn, &a, 0);
    }
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}

/* Settle file @p ino (noted with @p flags; @p all: a pass with all, which puts nothing
 * off). @return 0 (settled, or nothing to do), -EAGAIN (not settled yet: pending writes,
 * it changed while read, or its MD5 waits for the tier's upload), or an error. */
static int settle(struct core *c, uint64_t ino, uint32_t flags, bool all)
{
    struct meta_txn *t;
    struct meta_inode r;
    char etag[CORE_ETAG_MAX + 1];
    bool need = false;
    if (core__pend_has_data(c, ino))
        return -EAGAIN; /* not committed: not settled (its commit notes it again) */
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc == 0 && r.type == CORE_REG && r.size > 0) {
        etag[0] = '\0';
        rc = meta_objmeta_get(t, ino, etag, sizeof(etag), NULL, NULL);
        if (rc == -ENOENT)
            rc = 0;
        need = rc == 0 && !etag[0];
    }
    meta_rtxn_end(t);
    if (rc && rc != -ENOENT)
        return rc;
    struct settle_op a = {c, ino, rc == 0 ? r.change : 0, NULL, true};
    if (need && !all && !(flags & META_DIRTY_SEAL) && bg_later(c, ino))
        return -EAGAIN; /* the uploader reads it now: its MD5 after, not at once */
    if (need) {
        rc = core__etag_compute(c, r.tenant, ino, r.size, r.change, false, true, etag);
        if (rc == -EAGAIN || rc == SRV_ESTALE || rc == -ENOENT)
            return -EAGAIN; /* changed or went away while read: looked at again */
        if (rc)
            return rc;
        a.etag = etag;
    }
    if (!(flags & META_DIRTY_SEAL))
        return meta_submit(c->meta, settle_fn, &a, 0);
    /* sealing: no write may become pending meanwhile (a write planned before sees the
     * seal when it revalidates, and makes a new version first) */
    struct core__pend_batch b;
    struct core__pend *pd;
    rc = core__pend_excl_begin(c, ino, &b, &pd);
    if (rc)
        return rc;
    rc = b.ext.n || b.inl ? -EAGAIN : meta_submit(c->meta, settle_fn, &a, 0);
    core__pend_excl_end(c, pd, &b, rc, false, 0);
    return rc;
}

/* ---- passes ---- */

struct due {
    uint64_t ino[BG_BATCH];
    uint32_t flags[BG_BATCH];
    size_t n;
    uint64_t last; /* the last record looked at */
    bool more;     /* the table goes on after last */
    bool all;      /* ignore settle_ms */
    struct timespec now;
    uint64_t settle_ns;
};

static int due_ent(void *arg, uint64_t ino, const struct meta_dirty *d)
{
    struct due *s = arg;
    if (s->n == BG_BATCH) {
        s->more = true;
        return 1;
    }
    s->last = ino;
    int64_t age = (int64_t)(s->now.tv_sec - d->since_s) * 1000000000ll +
                  ((int64_t)s->now.tv_nsec - (int64_t)d->since_ns);
    if (s->all || age >= (int64_t)s->settle_ns) {
        s->flags[s->n] = d->flags;
        s->ino[s->n++] = ino;
    }
    return 0;
}

int core_bg_run(struct core *c, bool all, unsigned *settled)
{
    uint64_t after = 0;
    int first = 0;
    unsigned done = 0;
    for (;;) {
        struct meta_txn *t;
        struct due s = {.all = all, .settle_ns = (uint64_t)c->cfg.settle_ms * 1000000ull};
        core__now(&s.now);
        int rc = meta_rtxn_begin(c->meta, &t);
        if (rc)
            return rc;
        rc = meta_dirty_scan(t, after, due_ent, &s);
        meta_rtxn_end(t);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < s.n; i++) {
            if (c->ns->bg.stop)
                return first;
            rc = settle(c, s.ino[i], s.flags[i], all);
            if (rc == 0)
                done++;
            else if (rc != -EAGAIN && !first) {
                srv_log(WARN, META, "settling ino=%llu: %s (tried again later)",
                        (unsigned long long)s.ino[i], srv_strerror(rc));
                first = rc;
            }
        }
        if (!s.more)
            break;
        after = s.last;
    }
    if (settled)
        *settled = done;
    return first;
}

static void *bg_main(void *arg)
{
    struct core *c = arg;
    struct core__bg *bg = &c->ns->bg;
    uint64_t poll_ms = c->cfg.settle_ms / 2;
    if (poll_ms < 50)
        poll_ms = 50;
    if (poll_ms > 1000)
        poll_ms = 1000;
    pthread_mutex_lock(&bg->mu);
    while (!bg->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)(poll_ms % 1000) * 1000000l;
        until.tv_sec += (time_t)(poll_ms / 1000) + until.tv_nsec / 1000000000l;
        until.tv_nsec %= 1000000000l;
        pthread_cond_timedwait(&bg->cv, &bg->mu, &until);
        if (bg->stop)
            break;
        pthread_mutex_unlock(&bg->mu);
        core_bg_run(c, false, NULL);
        pthread_mutex_lock(&bg->mu);
    }
    pthread_mutex_unlock(&bg->mu);
    return NULL;
}

int core__bg_init(struct core *c)
{
    struct core__bg *bg = &c->ns->bg;
    pthread_mutex_init(&bg->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&bg->cv, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

int core__bg_start(struct core *c)
{
    struct core__bg *bg = &c->ns->bg;
    if (!c->cfg.bg_worker)
        return 0;
    int rc = pthread_create(&bg->thread, NULL, bg_main, c);
    if (rc)
        return -rc;
    bg->running = true;
    return 0;
}

void core__bg_stop(struct core *c)
{
    struct core__bg *bg = &c->ns->bg;
    pthread_mutex_lock(&bg->mu);
    bg->stop = true;
    pthread_cond_broadcast(&bg->cv);
    pthread_mutex_unlock(&bg->mu);
    if (bg->running)
        pthread_join(bg->thread, NULL);
    bg->running = false;
}

void core__bg_fini(struct core *c)
{
    pthread_mutex_destroy(&c->ns->bg.mu);
    pthread_cond_destroy(&c->ns->bg.cv);
}
