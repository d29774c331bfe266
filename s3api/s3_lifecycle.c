/* SPDX-License-Identifier: Apache-2.0
 * s3_lifecycle: bucket lifecycle configurations over S3 (Put, Get and
 * DeleteBucketLifecycleConfiguration; the document: s3_lc.c) and the worker
 * that applies them.
 *
 * A configuration is stored, in its canonical form, as the bucket's
 * lifecycle blob in the core (core_bucket_blob_put), so it goes with the
 * bucket. A Transition must name the storage class the bucket's tier policy
 * stands for (s3__lc_check_tier; docs/tiering.md); NoncurrentVersionTransition
 * and Transitions in versioned buckets are refused with 501.
 *
 * The worker (one thread) passes over every bucket with a configuration
 * every interval_s, as a system principal of the bucket's tenant (it may
 * reach versions, it does not bypass object lock: a locked version is left
 * for a later pass). Per bucket, as its rules ask: current objects past
 * their Expiration (deleted; a delete marker in a versioned bucket),
 * noncurrent versions past NoncurrentVersionExpiration (beyond the newer
 * ones to keep), delete markers left alone (ExpiredObjectDeleteMarker), and
 * multipart uploads past AbortIncompleteMultipartUpload, and current objects
 * past a Transition: once the uploader holds a confirmed copy of the content
 * (it is told to copy the file now, whatever its delay), their local extents
 * are freed (core_tier_evict, whatever the policy's eviction settings; pinned
 * keys stay local). It reads in pages of `batch` entries and sleeps PAUSE_MS
 * between them, and every deletion or eviction is one core call (one
 * group-commit op), so foreground requests interleave with it; a crash
 * leaves each done or not, and the next pass finishes the work. Days are
 * `day_s` seconds (86400; a test aid makes them shorter, see s3__lc_due).
 * Its work is metadata only (the uploader moves the bytes); every entry it
 * reads and every removal or eviction it makes is one metadata operation of
 * the QoS system class, admitted first through cfg.admit (which may sleep:
 * this is the worker's own thread), so an admin can cap it
 * (qos_system_meta_iops).
 * Thread: the ops on workers; the worker on its own thread. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "s3_server.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tier_policy.h"
#include "tier_upload.h"

#define PAUSE_MS 20 /* between two batches of a pass */

/* ---------------------------------------------------------------- operations */

static void get_lifecycle(struct s3_ctx *x)
{
    void *blob = NULL;
    size_t len = 0;
    if (s3__op_bucket(x))
        return;
    int rc = core_bucket_blob_get(x->core, &x->p, x->bucket_ino, CORE_BLOB_LIFECYCLE, &blob, &len);
    if (rc == -ENOENT) {
        s3__resp_s3err(x, S3E_NO_SUCH_LIFECYCLE, NULL);
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    s3__resp_xml(x);
    evbuffer_add(x->out.body, blob, len);
    free(blob);
}

static void put_lifecycle(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    const char *why = NULL;
    struct s3_lc lc;
    if (s3__op_bucket(x))
        return;
    int rc = s3__lc_parse(x->a, doc, n, &lc, &why);
    if (rc) {
        s3__resp_err(x, rc, why);
        return;
    }
    if (s3__lc_has_transition(&lc)) {
        const char *tclass = s3__lc_tier_class(x->core, &x->p, x->bucket_ino);
        struct core_bucket_vcfg vc;
        bool versioned = core_bucket_vcfg_get(x->core, &x->p, x->bucket_ino, &vc) == 0 &&
                         vc.versioning != CORE_VERS_NONE;
        enum s3_err e = S3E_NONE;
        rc = s3__lc_check_tier(&lc, tclass, versioned, &e, &why);
        if (rc == -EINVAL && e == S3E_INVALID_STORAGE_CLASS && tclass)
            why =
                s3__arena_printf(x->a, "%s (this bucket's remote tier stands for %s)", why, tclass);
        if (rc == -EINVAL) {
            s3__resp_s3err(x, e, why);
            return;
        }
        if (rc) {
            s3__resp_err(x, rc, why);
            return;
        }
    }
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        s3__resp_err(x, -ENOMEM, NULL);
        return;
    }
    s3__lc_xml(&lc, b);
    size_t len = evbuffer_get_length(b);
    rc = core_bucket_blob_put(x->core, &x->p, x->bucket_ino, CORE_BLOB_LIFECYCLE,
                              evbuffer_pullup(b, (ssize_t)len), len);
    evbuffer_free(b);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 200;
}

static void delete_lifecycle(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    int rc = core_bucket_blob_put(x->core, &x->p, x->bucket_ino, CORE_BLOB_LIFECYCLE, NULL, 0);
    if (rc && rc != -ENOENT) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 204;
}

const struct s3_op s3_op_get_lifecycle = {.name = "GetBucketLifecycleConfiguration",
                                          .action = "s3:GetLifecycleConfiguration",
                                          .az = S3_AZ_B_OWNER,
                                          .qos = QOS_META,
                                          .work = get_lifecycle};
const struct s3_op s3_op_put_lifecycle = {.name = "PutBucketLifecycleConfiguration",
                                          .action = "s3:PutLifecycleConfiguration",
                                          .az = S3_AZ_B_OWNER,
                                          .body = S3_BODY_XML,
                                          .qos = QOS_META,
                                          .work = put_lifecycle};
/* AWS checks s3:PutLifecycleConfiguration for the deletion too */
const struct s3_op s3_op_delete_lifecycle = {.name = "DeleteBucketLifecycle",
                                             .action = "s3:PutLifecycleConfiguration",
                                             .az = S3_AZ_B_OWNER,
                                             .qos = QOS_META,
                                             .work = delete_lifecycle};

const char *s3__lc_tier_class(struct core *c, const struct core_principal *p, uint64_t bucket)
{
    void *blob = NULL;
    size_t len = 0;
    struct tier_policy pol;
    const char *name = NULL;
    if (core_bucket_blob_get(c, p, bucket, CORE_BLOB_TIER, &blob, &len) == 0 &&
        tier_policy_decode(blob, len, &pol) == 0)
        name = tier_sclass_name(pol.sclass);
    free(blob);
    return name;
}

const char *s3__storage_class(struct s3_ctx *x, uint64_t bucket, const struct core_attr *at,
                              const char **cache)
{
    if (!(at->flags & CORE_A_EVICTED))
        return "STANDARD";
    const char *c = cache ? *cache : NULL;
    if (!c) {
        c = s3__lc_tier_class(x->core, &x->p, bucket);
        if (!c)
            c = "STANDARD";
        if (cache)
            *cache = c;
    }
    return c;
}

/* ---------------------------------------------------------------- the worker */

struct s3_lifecycle {
    struct core *core;
    struct s3_lifecycle_config cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    uint64_t passes; /* mu */
};

/* One bucket's pass. */
struct lcpass {
    struct s3_lifecycle *w;
    struct core_principal p;
    uint64_t bucket;
    struct s3_lc lc;
    struct s3_arena *a;
    int64_t now;
    uint32_t seen; /* entries of the batch so far */
    unsigned deleted;
    /* Transitions: the bucket's tier policy (tclass NULL: none, or not the rules' class) */
    struct tier_policy pol;
    const char *tclass;
    unsigned transitioned, waiting;
};

static bool stopping(struct s3_lifecycle *w)
{
    pthread_mutex_lock(&w->mu);
    bool s = w->stop;
    pthread_mutex_unlock(&w->mu);
    return s;
}

/* After each entry: a pause once a batch is full. @return true to stop (shutting down). */
/* Admission of one metadata operation (the system class). @return true: stop (the
 * daemon is stopping: what was not admitted is not done). */
static bool admit_op(struct lcpass *s)
{
    if (!s->w->cfg.admit)
        return false;
    return s->w->cfg.admit(s->w->cfg.admit_arg) != 0;
}

static bool pace(struct lcpass *s)
{
    if (admit_op(s))
        return true;
    if (++s->seen < s->w->cfg.batch)
        return stopping(s->w);
    s->seen = 0;
    struct timespec ts = {0, PAUSE_MS * 1000000l};
    nanosleep(&ts, NULL);
    return stopping(s->w);
}

static bool rules_need_tags(const struct s3_lc *lc)
{
    for (size_t i = 0; i < lc->n; i++)
        if (lc->rules[i].ntags)
            return true;
    return false;
}

/* The tags of @p key (version @p vid, or NULL: current) into @p m (arena); none on error. */
static void tags_of(struct lcpass *s, const char *key, size_t klen, const char *vid,
                    struct s3_meta *m)
{
    struct core_objinfo oi;
    memset(m, 0, sizeof(*m));
    int rc = vid ? core_version_lookup(s->w->core, &s->p, s->bucket, key, klen, vid, &oi)
                 : core_key_lookup(s->w->core, &s->p, s->bucket, key, klen, &oi);
    if (rc == 0 && s3__meta_decode(m, s->a, oi.meta, oi.metalen) != 0)
        memset(m, 0, sizeof(*m));
    free(oi.meta);
}

static void del(struct lcpass *s, const char *key, size_t klen, const char *vid, const char *why)
{
    if (admit_op(s))
        return;
    int rc = core_key_delete_v(s->w->core, &s->p, s->bucket, key, klen, vid, 0, NULL);
    if (rc == 0) {
        s->deleted++;
        srv_log(DEBUG, S3, "lifecycle: tenant=%u bucket=%" PRIu64 " %s: %.*s%s%s", s->p.tenant,
                s->bucket, why, (int)klen, key, vid ? " version " : "", vid ? vid : "");
    } else if (rc != SRV_ELOCKED && rc != SRV_ENOVERSION && rc != -ENOENT) {
        srv_log(WARN, S3, "lifecycle: tenant=%u bucket=%" PRIu64 " %s of %.*s: %s", s->p.tenant,
                s->bucket, why, (int)klen, key, srv_strerror(rc));
    }
}

/* -- current objects: Transition (Days, Date) -- */

/* Move @p e's bytes to the remote tier: once its copy there is confirmed, free its local
 * extents (an eviction, whatever the policy's evict_after_s and watermarks); until then
 * have the uploader copy it now. Pinned keys stay local. */
static void transition(struct lcpass *s, const struct core_listent *e)
{
    const struct core_attr *at = &e->info->attr;
    struct tier_upload *u = tier_upload_default();
    struct tier_file_info ti;
    if (!u || tier_policy_pinned(&s->pol, e->key, e->keylen) ||
        tier_upload_state(u, s->bucket, at->ino, at->change, e->key, e->keylen, &ti) != 0 ||
        ti.state == TIER_STATE_EVICTED)
        return;
    if (ti.state != TIER_STATE_UPLOADED) {
        /* not copied yet (a new bucket policy shows after the uploader's next pass) */
        tier_upload_hasten(u, s->bucket,
                           (int64_t)at->ctime.tv_sec * 1000000000ll + at->ctime.tv_nsec);
        s->waiting++;
        return;
    }
    if (admit_op(s))
        return;
    uint64_t freed = 0;
    int rc = core_tier_evict(s->w->core, at->ino, at->change, &freed);
    if (rc == 0) {
        s->transitioned++;
        srv_log(DEBUG, S3,
                "lifecycle: tenant=%u bucket=%" PRIu64 " transition to %s: %.*s (%" PRIu64
                " bytes freed)",
                s->p.tenant, s->bucket, s->tclass, (int)e->keylen, e->key, freed);
    } else if (rc == -EAGAIN) {
        s->waiting++; /* inline, being written, its ETag pending: a later pass */
    } else if (rc != SRV_ESTALE) {
        srv_log(WARN, S3, "lifecycle: tenant=%u bucket=%" PRIu64 " transition of %.*s: %s",
                s->p.tenant, s->bucket, (int)e->keylen, e->key, srv_strerror(rc));
    }
}

/* Is a Transition of an enabled rule due for @p e (tags: loaded as needed)? */
static bool transition_due(struct lcpass *s, const struct core_listent *e, struct s3_meta *tags,
                           bool *loaded)
{
    const struct core_objinfo *oi = e->info;
    for (size_t i = 0; i < s->lc.n; i++) {
        const struct s3_lc_rule *r = &s->lc.rules[i];
        if (!r->ntrans)
            continue;
        if (r->ntags && !*loaded) {
            tags_of(s, e->key, e->keylen, NULL, tags);
            *loaded = true;
        }
        if (!s3__lc_match(r, e->key, e->keylen, oi->attr.size, *loaded ? tags : NULL))
            continue;
        for (size_t j = 0; j < r->ntrans; j++) {
            const struct s3_lc_trans *t = &r->trans[j];
            if (strcmp(t->sclass, s->tclass) != 0)
                continue;
            if (t->date ? s->now >= t->date
                        : s3__lc_due(oi->attr.mtime.tv_sec, t->days, s->now, s->w->cfg.day_s))
                return true;
        }
    }
    return false;
}

/* -- current objects: Expiration (Days, Date) -- */

struct curpage {
    struct lcpass *s;
    bool tags;
    char *last;
    size_t lastlen;
    bool stop;
};

static int cur_cb(void *arg, const struct core_listent *e)
{
    struct curpage *pg = arg;
    struct lcpass *s = pg->s;
    pg->last = s3__arena_strndup(s->a, e->key, e->keylen);
    pg->lastlen = e->keylen;
    if (e->is_prefix || e->info->attr.type != CORE_REG)
        return pace(s) ? (pg->stop = true) : 0;
    const struct core_objinfo *oi = e->info;
    struct s3_meta tags;
    bool loaded = false;
    for (size_t i = 0; i < s->lc.n; i++) {
        const struct s3_lc_rule *r = &s->lc.rules[i];
        if (!r->exp_days && !r->exp_date)
            continue;
        if (r->ntags && !loaded) {
            tags_of(s, e->key, e->keylen, NULL, &tags);
            loaded = true;
        }
        if (!s3__lc_match(r, e->key, e->keylen, oi->attr.size, loaded ? &tags : NULL))
            continue;
        bool due = r->exp_days
                       ? s3__lc_due(oi->attr.mtime.tv_sec, r->exp_days, s->now, s->w->cfg.day_s)
                       : s->now >= r->exp_date;
        if (due) {
            del(s, e->key, e->keylen, NULL, "expiration");
            return pace(s) ? (pg->stop = true) : 0;
        }
    }
    if (s->tclass && !(oi->attr.flags & CORE_A_EVICTED) && transition_due(s, e, &tags, &loaded))
        transition(s, e);
    return pace(s) ? (pg->stop = true) : 0;
}

static void pass_current(struct lcpass *s)
{
    char *after = NULL;
    size_t afterlen = 0;
    for (;;) {
        struct curpage pg = {s, rules_need_tags(&s->lc), NULL, 0, false};
        bool truncated = false;
        int rc = core_list(s->w->core, &s->p, s->bucket, NULL, 0, after, afterlen, NULL, 0,
                           s->w->cfg.batch, cur_cb, &pg, &truncated);
        if (rc || pg.stop || !truncated || !pg.last)
            return;
        after = pg.last;
        afterlen = pg.lastlen;
    }
}

/* -- versions: NoncurrentVersionExpiration, ExpiredObjectDeleteMarker -- */

struct verpage {
    struct lcpass *s;
    char *key; /* the key whose versions come now */
    size_t klen;
    int64_t nc_index; /* noncurrent data versions of it seen so far */
    char *last, *lastvid;
    size_t lastlen;
    bool stop;
};

struct keycount {
    const char *key;
    size_t klen;
    int n;
};

static int count_cb(void *arg, const struct core_listent *e)
{
    struct keycount *c = arg;
    if (!e->is_prefix && e->keylen == c->klen && memcmp(e->key, c->key, c->klen) == 0)
        c->n++;
    return 0;
}

/* Whether @p key has no version but its newest (a delete marker). */
static bool marker_alone(struct lcpass *s, const char *key, size_t klen)
{
    struct keycount c = {key, klen, 0};
    bool tr;
    int rc = core_list_versions(s->w->core, &s->p, s->bucket, key, klen, NULL, 0, NULL, NULL, 0, 2,
                                count_cb, &c, &tr);
    return rc == 0 && c.n == 1;
}

static int ver_cb(void *arg, const struct core_listent *e)
{
    struct verpage *pg = arg;
    struct lcpass *s = pg->s;
    const struct core_objinfo *oi = e->info;
    pg->last = s3__arena_strndup(s->a, e->key, e->keylen);
    pg->lastlen = e->keylen;
    pg->lastvid = s3__arena_strndup(s->a, oi->vid, strlen(oi->vid));
    if (!pg->key || pg->klen != e->keylen || memcmp(pg->key, e->key, e->keylen) != 0) {
        pg->key = pg->last;
        pg->klen = e->keylen;
        pg->nc_index = 0;
    }
    if (oi->latest && oi->dmarker) {
        for (size_t i = 0; i < s->lc.n; i++) {
            const struct s3_lc_rule *r = &s->lc.rules[i];
            if (r->exp_dmarker == 1 && s3__lc_match(r, e->key, e->keylen, 0, NULL) &&
                marker_alone(s, e->key, e->keylen)) {
                del(s, e->key, e->keylen, oi->vid, "expired delete marker");
                break;
            }
        }
    } else if (!oi->latest && !oi->dmarker) {
        int64_t idx = pg->nc_index++;
        struct s3_meta tags;
        bool loaded = false;
        for (size_t i = 0; i < s->lc.n; i++) {
            const struct s3_lc_rule *r = &s->lc.rules[i];
            if (!r->nc_days || idx < r->nc_newer)
                continue;
            if (r->ntags && !loaded) {
                tags_of(s, e->key, e->keylen, oi->vid, &tags);
                loaded = true;
            }
            if (s3__lc_match(r, e->key, e->keylen, oi->attr.size, loaded ? &tags : NULL) &&
                oi->noncur_s && s3__lc_due(oi->noncur_s, r->nc_days, s->now, s->w->cfg.day_s)) {
                del(s, e->key, e->keylen, oi->vid, "noncurrent version expiration");
                break;
            }
        }
    }
    return pace(s) ? (pg->stop = true) : 0;
}

static void pass_versions(struct lcpass *s)
{
    struct verpage pg = {.s = s};
    for (;;) {
        bool truncated = false;
        char *km = pg.last, *vm = pg.lastvid;
        size_t kml = pg.lastlen;
        int rc = core_list_versions(s->w->core, &s->p, s->bucket, NULL, 0, km, kml, vm, NULL, 0,
                                    s->w->cfg.batch, ver_cb, &pg, &truncated);
        if (rc || pg.stop || !truncated || !pg.last)
            return;
    }
}

/* -- multipart uploads: AbortIncompleteMultipartUpload -- */

static int mpu_cb(void *arg, const struct core_mpu_info *u)
{
    struct lcpass *s = arg;
    for (size_t i = 0; i < s->lc.n; i++) {
        const struct s3_lc_rule *r = &s->lc.rules[i];
        if (r->abort_days && s3__lc_match(r, u->key, u->keylen, 0, NULL) &&
            s3__lc_due(u->initiated.tv_sec, r->abort_days, s->now, s->w->cfg.day_s)) {
            if (admit_op(s))
                return 1;
            int rc = core_mpu_abort(s->w->core, &s->p, s->bucket, u->upload_id);
            if (rc == 0)
                s->deleted++;
            break;
        }
    }
    return pace(s) ? 1 : 0;
}

/* The bucket's tier policy, for its Transitions (s->tclass stays NULL without one: the
 * policy was removed after the configuration was put; warned once per pass). */
static void trans_setup(struct lcpass *s)
{
    void *blob = NULL;
    size_t len = 0;
    int rc = core_bucket_blob_get(s->w->core, &s->p, s->bucket, CORE_BLOB_TIER, &blob, &len);
    if (rc == 0)
        rc = tier_policy_decode(blob, len, &s->pol);
    free(blob);
    if (rc == 0)
        s->tclass = tier_sclass_name(s->pol.sclass);
    if (!s->tclass)
        srv_log(WARN, S3,
                "lifecycle: tenant=%u bucket=%" PRIu64 ": Transition rules but no tier "
                "policy: nothing transitioned",
                s->p.tenant, s->bucket);
}

static int bucket_pass(void *arg, uint32_t tenant, uint64_t bucket, const void *val, size_t len)
{
    struct s3_lifecycle *w = arg;
    struct s3_arena a;
    struct lcpass s = {.w = w, .bucket = bucket, .a = &a, .now = time(NULL)};
    const char *why;
    s3__arena_init(&a);
    s.p.tenant = tenant;
    s.p.flags = CORE_P_SUPER | CORE_P_VERSIONS;
    if (s3__lc_parse(&a, val, len, &s.lc, &why) != 0) {
        srv_log(ERROR, S3,
                "lifecycle: tenant=%u bucket=%" PRIu64 ": stored configuration "
                "unreadable (%s): skipped",
                tenant, bucket, why);
        s3__arena_fini(&a);
        return 0;
    }
    bool cur = false, ver = false, mpu = false, trans = false;
    for (size_t i = 0; i < s.lc.n; i++) {
        const struct s3_lc_rule *r = &s.lc.rules[i];
        cur |= r->enabled && (r->exp_days || r->exp_date);
        trans |= r->enabled && r->ntrans;
        ver |= r->enabled && (r->nc_days || r->exp_dmarker == 1);
        mpu |= r->enabled && r->abort_days;
    }
    struct core_bucket_vcfg vc;
    if (core_bucket_vcfg_get(w->core, &s.p, bucket, &vc) == 0 && vc.versioning == CORE_VERS_NONE)
        ver = false;
    else
        trans = false; /* versioned since: the tier does not evict versions */
    if (trans)
        trans_setup(&s);
    cur |= s.tclass != NULL;
    if (cur)
        pass_current(&s);
    if (ver && !stopping(w))
        pass_versions(&s);
    if (mpu && !stopping(w))
        core_mpu_list(w->core, &s.p, bucket, NULL, 0, mpu_cb, &s);
    if (s.deleted)
        srv_log(INFO, S3, "lifecycle: tenant=%u bucket=%" PRIu64 ": %u deleted or aborted", tenant,
                bucket, s.deleted);
    if (s.transitioned)
        srv_log(INFO, S3,
                "lifecycle: tenant=%u bucket=%" PRIu64 ": %u transitioned to %s, %u waiting for "
                "their remote copy",
                tenant, bucket, s.transitioned, s.tclass, s.waiting);
    else if (s.waiting)
        srv_log(DEBUG, S3,
                "lifecycle: tenant=%u bucket=%" PRIu64 ": %u waiting for their remote copy to "
                "transition to %s",
                tenant, bucket, s.waiting, s.tclass);
    s3__arena_fini(&a);
    return stopping(w) ? 1 : 0;
}

/* A pass over every bucket with a configuration (collected first, then each done with no
 * read transaction held). */
struct blist {
    uint32_t *tenant;
    uint64_t *bucket;
    void **blob;
    size_t *len;
    size_t n, cap;
};

static int blist_add(void *arg, uint32_t tenant, uint64_t bucket, const void *val, size_t len)
{
    struct blist *l = arg;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        uint32_t *t = realloc(l->tenant, nc * sizeof(*t));
        if (t)
            l->tenant = t;
        uint64_t *b = realloc(l->bucket, nc * sizeof(*b));
        if (b)
            l->bucket = b;
        void **v = realloc(l->blob, nc * sizeof(*v));
        if (v)
            l->blob = v;
        size_t *s = realloc(l->len, nc * sizeof(*s));
        if (s)
            l->len = s;
        if (!t || !b || !v || !s)
            return -ENOMEM;
        l->cap = nc;
    }
    l->blob[l->n] = malloc(len ? len : 1);
    if (!l->blob[l->n])
        return -ENOMEM;
    memcpy(l->blob[l->n], val, len);
    l->tenant[l->n] = tenant;
    l->bucket[l->n] = bucket;
    l->len[l->n] = len;
    l->n++;
    return 0;
}

int s3_lifecycle_run(struct s3_lifecycle *w)
{
    struct blist l = {0};
    int rc = core_bucket_blob_scan(w->core, CORE_BLOB_LIFECYCLE, blist_add, &l);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (bucket_pass(w, l.tenant[i], l.bucket[i], l.blob[i], l.len[i]))
            break;
    for (size_t i = 0; i < l.n; i++)
        free(l.blob[i]);
    free(l.tenant);
    free(l.bucket);
    free(l.blob);
    free(l.len);
    pthread_mutex_lock(&w->mu);
    w->passes++;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void *lc_main(void *arg)
{
    struct s3_lifecycle *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += w->cfg.interval_s;
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
            ;
        if (w->stop)
            break;
        pthread_mutex_unlock(&w->mu);
        int rc = s3_lifecycle_run(w);
        if (rc)
            srv_log(WARN, S3, "lifecycle pass: %s", srv_strerror(rc));
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int s3_lifecycle_start(struct s3_lifecycle **out, struct core *c,
                       const struct s3_lifecycle_config *cfg)
{
    struct s3_lifecycle *w = calloc(1, sizeof(*w));
    *out = NULL;
    if (!w)
        return -ENOMEM;
    w->core = c;
    w->cfg = *cfg;
    if (w->cfg.day_s <= 0)
        w->cfg.day_s = 86400;
    if (w->cfg.interval_s <= 0)
        w->cfg.interval_s = 3600;
    if (w->cfg.batch == 0)
        w->cfg.batch = 256;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&w->thread, NULL, lc_main, w);
    if (rc) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return -rc;
    }
    if (w->cfg.day_s != 86400)
        srv_log(WARN, S3,
                "lifecycle: one lifecycle day is %lld s (lifecycle_day_s, a test "
                "aid): rules fire sooner than S3's",
                (long long)w->cfg.day_s);
    *out = w;
    return 0;
}

void s3_lifecycle_stop(struct s3_lifecycle *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
