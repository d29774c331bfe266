/* SPDX-License-Identifier: Apache-2.0
 * tenants_remote: the tier's remotes (tenants.h, "remotes of the tier").
 *
 * Records, in the core's config table (so no new table is needed):
 *   META_REC_CONFIG "tier.remote." + 10-digit id -> {"v":1,"id","tenant","name",
 *       "endpoint","region","bucket","prefix","virtual_host","tls_no_verify","ca_file",
 *       "access_key","secret","max_conns","parallel","connect_timeout_ms","created"}
 *   META_REC_CONFIG "tenants.next_remote"      -> be64 counter (ids never reused)
 * "secret" is the secret key sealed with AES-256-GCM under the master key
 * (tenants_crypt.c) with "remote:ID" as additional data, so a sealed secret
 * cannot be moved to another record unnoticed. The cache here holds every
 * record but never a secret: one is unsealed only for a caller that needs it.
 *
 * Changes are serialised by this module's mutex; the checks that touch the
 * network (tier_remote_resolve, tier_remote_check) run before it is taken.
 * Thread: every public call is thread-safe; create blocks (name resolution,
 * the remote's answer). */
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "meta_record.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tenants.h"
#include "tenants_int.h"
#include "tier_policy.h"
#include "tier_remote.h"
#include "tier_s3.h"
#include "tier_upload.h"

#define REC_VERSION 1
#define REC_PREFIX "tier.remote."
#define NEXT_NAME "tenants.next_remote"
#define SEALED_MAX (2 * (12 + TENANT_SECRET_MAX + 16) + 1)
#define CHECK_CONNECT_MS 5000
#define CHECK_ANSWER_MS 15000

struct remotes {
    pthread_mutex_t mu;
    struct tenant_remote *v; /* by id */
    size_t n, cap;
    bool allow_private;
};

static struct remotes *R(struct tenants *t)
{
    return *tenants__remotes_slot(t);
}

static void rec_key(uint32_t id, char *k, size_t klen)
{
    snprintf(k, klen, REC_PREFIX "%010u", id);
}

/* ---- validation ---- */

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > TENANT_REMOTE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (i > 0 && (c == '-' || c == '_' || c == '.'))))
            return false;
    }
    return true;
}

/* Printable ASCII without blanks (keys, regions). */
static bool token_ok(const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);
    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* S3 bucket names: 3-63 of [a-z0-9.-], starting and ending with a letter or digit. */
static bool bucket_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && ((c != '-' && c != '.') || i == 0 || i == n - 1))
            return false;
    }
    return true;
}

static bool prefix_ok(const char *s)
{
    size_t n = strlen(s);
    if (n >= 512 || (n && s[0] == '/'))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return false;
    return true;
}

static int validate(const struct tenant_remote *r, const char *secret, char *why, size_t whylen)
{
    struct tier_endpoint ep;
    if (!name_ok(r->name)) {
        snprintf(why, whylen,
                 "name must be 1-63 letters, digits, '-', '_' or '.', starting with a letter "
                 "or digit");
        return -EINVAL;
    }
    if (tier_endpoint_parse(r->endpoint, &ep, why, whylen) < 0)
        return -EINVAL;
    if (!bucket_ok(r->bucket)) {
        snprintf(why, whylen, "bucket must be an S3 bucket name (3-63 of a-z, 0-9, '.', '-')");
        return -EINVAL;
    }
    if (r->region[0] && !token_ok(r->region, 1, sizeof(r->region) - 1)) {
        snprintf(why, whylen, "region must be printable characters without blanks");
        return -EINVAL;
    }
    if (!prefix_ok(r->prefix)) {
        snprintf(why, whylen,
                 "prefix must be under 512 bytes, without control characters, "
                 "and must not start with '/'");
        return -EINVAL;
    }
    if (!token_ok(r->access_key, 1, TENANT_REMOTE_KEY_MAX)) {
        snprintf(why, whylen, "access_key must be 1-128 printable characters without blanks");
        return -EINVAL;
    }
    if (!secret || !token_ok(secret, 1, TENANT_SECRET_MAX)) {
        snprintf(why, whylen, "secret_key must be 1-128 printable characters without blanks");
        return -EINVAL;
    }
    if (r->max_conns > 1024 || r->parallel > 64 ||
        (r->connect_timeout_ms && (r->connect_timeout_ms < 100 || r->connect_timeout_ms > 60000))) {
        snprintf(why, whylen,
                 "max_conns must be 1-1024, parallel 1-64, connect_timeout_ms 100-60000");
        return -EINVAL;
    }
    if (r->ca_file[0] && !ep.https) {
        snprintf(why, whylen, "ca_file is only for https endpoints");
        return -EINVAL;
    }
    if (r->tls_no_verify && !ep.https) {
        snprintf(why, whylen, "tls_no_verify is only for https endpoints");
        return -EINVAL;
    }
    return 0;
}

/* ---- records ---- */

static int save(struct tenants *t, const struct tenant_remote *r, const char *secret,
                unsigned flags)
{
    char aad[32], sealed[SEALED_MAX], key[32];
    snprintf(aad, sizeof(aad), "remote:%u", r->id);
    int rc = tenants__seal(tenants__mkey(t), aad, secret, sealed, sizeof(sealed));
    if (rc < 0)
        return rc;
    json_t *j = json_pack(
        "{s:i,s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:b,s:b,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "v", REC_VERSION,
        "id", (json_int_t)r->id, "tenant", (json_int_t)r->tenant, "name", r->name, "endpoint",
        r->endpoint, "region", r->region, "bucket", r->bucket, "prefix", r->prefix, "virtual_host",
        r->virtual_host, "tls_no_verify", r->tls_no_verify, "ca_file", r->ca_file, "access_key",
        r->access_key, "secret", sealed, "max_conns", (json_int_t)r->max_conns, "parallel",
        (json_int_t)r->parallel, "connect_timeout_ms", (json_int_t)r->connect_timeout_ms, "created",
        (json_int_t)r->created);
    OPENSSL_cleanse(sealed, sizeof(sealed));
    if (!j)
        return -ENOMEM;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return -ENOMEM;
    rec_key(r->id, key, sizeof(key));
    rc = meta_record_put(tenants__meta(t), META_REC_CONFIG, key, strlen(key), s, strlen(s), flags);
    free(s);
    return rc;
}

static int str_field(json_t *j, const char *f, char *out, size_t outlen)
{
    const char *s = json_string_value(json_object_get(j, f));
    if (!s || strlen(s) >= outlen)
        return -1;
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* Decode a record (its secret stays sealed: @p sealed, may be NULL). @return 0, -1. */
static int decode(const void *val, size_t vlen, struct tenant_remote *r, char *sealed)
{
    json_error_t e;
    json_t *j = json_loadb(val, vlen, 0, &e);
    char sbuf[SEALED_MAX];
    memset(r, 0, sizeof(*r));
    int rc = -1;
    if (!j || json_integer_value(json_object_get(j, "v")) != REC_VERSION)
        goto out;
    if (str_field(j, "name", r->name, sizeof(r->name)) ||
        str_field(j, "endpoint", r->endpoint, sizeof(r->endpoint)) ||
        str_field(j, "region", r->region, sizeof(r->region)) ||
        str_field(j, "bucket", r->bucket, sizeof(r->bucket)) ||
        str_field(j, "prefix", r->prefix, sizeof(r->prefix)) ||
        str_field(j, "ca_file", r->ca_file, sizeof(r->ca_file)) ||
        str_field(j, "access_key", r->access_key, sizeof(r->access_key)) ||
        str_field(j, "secret", sealed ? sealed : sbuf, SEALED_MAX))
        goto out;
    r->id = (uint32_t)json_integer_value(json_object_get(j, "id"));
    r->tenant = (uint32_t)json_integer_value(json_object_get(j, "tenant"));
    r->virtual_host = json_is_true(json_object_get(j, "virtual_host"));
    r->tls_no_verify = json_is_true(json_object_get(j, "tls_no_verify"));
    r->max_conns = (uint32_t)json_integer_value(json_object_get(j, "max_conns"));
    r->parallel = (uint32_t)json_integer_value(json_object_get(j, "parallel"));
    r->connect_timeout_ms = (uint32_t)json_integer_value(json_object_get(j, "connect_timeout_ms"));
    r->created = (int64_t)json_integer_value(json_object_get(j, "created"));
    rc = r->id ? 0 : -1;
out:
    OPENSSL_cleanse(sbuf, sizeof(sbuf));
    json_decref(j);
    return rc;
}

static int push(struct remotes *rs, const struct tenant_remote *r)
{
    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? rs->cap * 2 : 8;
        void *nv = realloc(rs->v, ncap * sizeof(*rs->v));
        if (!nv)
            return -ENOMEM;
        rs->v = nv;
        rs->cap = ncap;
    }
    rs->v[rs->n++] = *r; /* ids grow, so the array stays in id order */
    return 0;
}

struct load {
    struct remotes *rs;
    int rc;
    bool any;
};

static int load_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load *l = arg;
    if (klen < sizeof(REC_PREFIX) - 1 || memcmp(key, REC_PREFIX, sizeof(REC_PREFIX) - 1) != 0)
        return 1; /* past the remotes */
    l->any = true;
    if (!l->rs)
        return 1;
    struct tenant_remote r;
    if (decode(val, vlen, &r, NULL) < 0) {
        srv_log(ERROR, TIER,
                "a remote's record failed to decode (corrupt or unknown version); "
                "skipped");
        return 0;
    }
    if ((l->rc = push(l->rs, &r)) < 0)
        return 1;
    return 0;
}

bool tenants__remotes_stored(struct meta_env *m)
{
    struct load l = {NULL, 0, false};
    meta_record_scan(m, META_REC_CONFIG, REC_PREFIX, sizeof(REC_PREFIX) - 1, load_cb, &l);
    return l.any;
}

int tenants__remotes_open(struct tenants *t)
{
    struct remotes *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    pthread_mutex_init(&rs->mu, NULL);
    *tenants__remotes_slot(t) = rs;
    struct load l = {rs, 0, false};
    int rc = meta_record_scan(tenants__meta(t), META_REC_CONFIG, REC_PREFIX, sizeof(REC_PREFIX) - 1,
                              load_cb, &l);
    return rc < 0 ? rc : l.rc;
}

void tenants__remotes_close(struct tenants *t)
{
    struct remotes *rs = R(t);
    if (!rs)
        return;
    pthread_mutex_destroy(&rs->mu);
    free(rs->v);
    free(rs);
    *tenants__remotes_slot(t) = NULL;
}

void tenants_remote_set_allow_private(struct tenants *t, bool allow)
{
    struct remotes *rs = R(t);
    pthread_mutex_lock(&rs->mu);
    rs->allow_private = allow;
    pthread_mutex_unlock(&rs->mu);
}

static struct tenant_remote *find_id(struct remotes *rs, uint32_t id)
{
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].id == id)
            return &rs->v[i];
    return NULL;
}

static struct tenant_remote *find_name(struct remotes *rs, uint32_t tenant, const char *name)
{
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].tenant == tenant && strcmp(rs->v[i].name, name) == 0)
            return &rs->v[i];
    return NULL;
}

static int next_id(struct tenants *t, uint32_t *out)
{
    struct meta_env *m = tenants__meta(t);
    void *val = NULL;
    size_t vlen = 0;
    uint64_t next = 1;
    int rc = meta_record_get(m, META_REC_CONFIG, NEXT_NAME, strlen(NEXT_NAME), &val, &vlen);
    if (rc == 0 && vlen == 8) {
        const uint8_t *b = val;
        next = 0;
        for (int i = 0; i < 8; i++)
            next = next << 8 | b[i];
    }
    free(val);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    if (next == 0)
        next = 1;
    if (next > UINT32_MAX)
        return -ENOSPC;
    uint8_t buf[8];
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((next + 1) >> (56 - 8 * i));
    rc = meta_record_put(m, META_REC_CONFIG, NEXT_NAME, strlen(NEXT_NAME), buf, 8, 0);
    if (rc < 0)
        return rc;
    *out = (uint32_t)next;
    return 0;
}

/* ---- public calls ---- */

/* The checks of a remote before it is stored: its host resolves (to no address of
 * this host for a tenant's, unless @p allow), and it answers a listing with the
 * credentials. May block. @return 0 or the error (@p why says it). */
static int check(const struct tenant_remote *rr, const char *secret, bool allow, char *why,
                 size_t whylen, bool *check_failed)
{
    const struct tenant_remote r = *rr;
    char addr[TIER_REMOTE_ADDR_MAX];
    int rc;
    struct tier_s3_config cfg = {
        .endpoint = r.endpoint,
        .region = r.region,
        .bucket = r.bucket,
        .prefix = r.prefix,
        .access_key = r.access_key,
        .secret_key = secret,
        .virtual_host = r.virtual_host,
        .tls_no_verify = r.tls_no_verify,
        .ca_file = r.ca_file[0] ? r.ca_file : NULL,
        .max_conns = 1,
        .connect_timeout_ms = (int)(r.connect_timeout_ms < CHECK_CONNECT_MS ? r.connect_timeout_ms
                                                                            : CHECK_CONNECT_MS),
        .first_byte_timeout_ms = CHECK_ANSWER_MS,
        .idle_timeout_ms = CHECK_ANSWER_MS,
    };
    /* Resolve once and connect to exactly what was checked. */
    rc = tier_remote_resolve(&cfg, allow, addr, sizeof(addr), why, whylen);
    if (rc == -EHOSTUNREACH)
        *check_failed = true;
    if (rc)
        return rc;
    cfg.connect_host = addr;
    rc = tier_remote_check(&cfg, why, whylen);
    if (rc) {
        *check_failed = true;
        return rc;
    }
    return 0;
}

int tenants_remote_create(struct tenants *t, const struct tenant_remote *in, const char *secret,
                          char *why, size_t whylen, bool *check_failed, struct tenant_remote *out)
{
    struct remotes *rs = R(t);
    struct tenant_remote r = *in;
    *check_failed = false;
    why[0] = '\0';
    r.id = 0;
    int rc = validate(&r, secret, why, whylen);
    if (rc)
        return rc;
    if (r.tenant) {
        struct tenant_info ti;
        if (tenants_tenant_get(t, r.tenant, &ti) < 0) {
            snprintf(why, whylen, "no such tenant %u", r.tenant);
            return -ENOENT;
        }
        if (r.ca_file[0]) {
            /* a tenant must not make the daemon open files of its host */
            snprintf(why, whylen,
                     "ca_file names a file of this host: only a system-wide "
                     "remote may have one");
            return -EACCES;
        }
    }
    if (!r.max_conns)
        r.max_conns = 16;
    if (!r.parallel)
        r.parallel = 4;
    if (!r.connect_timeout_ms)
        r.connect_timeout_ms = 10000;

    pthread_mutex_lock(&rs->mu);
    bool allow = rs->allow_private || r.tenant == 0;
    bool taken = find_name(rs, r.tenant, r.name) != NULL;
    pthread_mutex_unlock(&rs->mu);
    if (taken) {
        snprintf(why, whylen, "a remote named '%s' exists already", r.name);
        return -EEXIST;
    }

    rc = check(&r, secret, allow, why, whylen, check_failed);
    if (rc)
        return rc;

    pthread_mutex_lock(&rs->mu);
    if (find_name(rs, r.tenant, r.name)) {
        snprintf(why, whylen, "a remote named '%s' exists already", r.name);
        rc = -EEXIST;
        goto out;
    }
    if ((rc = next_id(t, &r.id)) < 0)
        goto out;
    r.created = (int64_t)time(NULL);
    if ((rc = save(t, &r, secret, META_REC_NOOVERWRITE)) < 0)
        goto out;
    if ((rc = push(rs, &r)) < 0)
        goto out;
    srv_log(INFO, TIER, "tenant=%u remote %u '%s' created: %s bucket %s%s%s", r.tenant, r.id,
            r.name, r.endpoint, r.bucket, r.prefix[0] ? " prefix " : "", r.prefix);
    if (out)
        *out = r;
out:
    pthread_mutex_unlock(&rs->mu);
    if (rc && !why[0])
        snprintf(why, whylen, "%s", srv_strerror(rc));
    return rc;
}

/* The stored record of remote @p id into @p r, its secret unsealed into @p out (@p outlen).
 * @return 0, the error of reading the record (-ENOENT: none), SRV_ECORRUPT (it does not
 * decode or its secret does not unseal). */
static int load_remote(struct tenants *t, uint32_t id, struct tenant_remote *r, char *out,
                       size_t outlen)
{
    char key[32], aad[32], sealed[SEALED_MAX];
    void *val = NULL;
    size_t vlen = 0;
    rec_key(id, key, sizeof(key));
    int rc = meta_record_get(tenants__meta(t), META_REC_CONFIG, key, strlen(key), &val, &vlen);
    if (rc)
        return rc;
    rc = decode(val, vlen, r, sealed) == 0 ? 0 : SRV_ECORRUPT;
    OPENSSL_cleanse(val, vlen);
    free(val);
    snprintf(aad, sizeof(aad), "remote:%u", id);
    if (rc == 0)
        rc = tenants__unseal(tenants__mkey(t), aad, sealed, out, outlen) ? SRV_ECORRUPT : 0;
    OPENSSL_cleanse(sealed, sizeof(sealed));
    return rc;
}

/* The secret of remote @p id, unsealed into @p out (@p outlen). @return 0, -ENOENT,
 * SRV_ECORRUPT. */
static int unseal_secret(struct tenants *t, uint32_t id, char *out, size_t outlen)
{
    struct tenant_remote r;
    return load_remote(t, id, &r, out, outlen);
}

int tenants_remote_update(struct tenants *t, uint32_t id, const struct tenant_remote *in,
                          const char *secret, char *why, size_t whylen, bool *check_failed,
                          struct tenant_remote *out)
{
    struct remotes *rs = R(t);
    struct tenant_remote r;
    char sec[TENANT_SECRET_MAX + 2];
    *check_failed = false;
    why[0] = '\0';
    pthread_mutex_lock(&rs->mu);
    struct tenant_remote *cur = find_id(rs, id);
    if (cur)
        r = *cur;
    bool allow = rs->allow_private || (cur && cur->tenant == 0);
    pthread_mutex_unlock(&rs->mu);
    if (!cur) {
        snprintf(why, whylen, "no such remote %u", id);
        return -ENOENT;
    }
    if (in->access_key[0])
        snprintf(r.access_key, sizeof(r.access_key), "%s", in->access_key);
    if (in->max_conns)
        r.max_conns = in->max_conns;
    if (in->parallel)
        r.parallel = in->parallel;
    if (in->connect_timeout_ms)
        r.connect_timeout_ms = in->connect_timeout_ms;
    int rc = 0;
    if (secret)
        snprintf(sec, sizeof(sec), "%s", secret);
    else if ((rc = unseal_secret(t, id, sec, sizeof(sec))) != 0)
        snprintf(why, whylen, "the remote's secret does not unseal (wrong master.key?)");
    if (rc == 0)
        rc = validate(&r, sec, why, whylen);
    if (rc == 0)
        rc = check(&r, sec, allow, why, whylen, check_failed); /* as at creation */
    if (rc == 0) {
        pthread_mutex_lock(&rs->mu);
        cur = find_id(rs, id);
        if (!cur) {
            rc = -ENOENT; /* deleted meanwhile */
        } else if ((rc = save(t, &r, sec, 0)) == 0) {
            *cur = r;
            if (out)
                *out = r;
        }
        pthread_mutex_unlock(&rs->mu);
        if (rc == 0)
            srv_log(INFO, TIER,
                    "tenant=%u remote %u '%s' updated (access key %s, %u conns, %u "
                    "parallel)",
                    r.tenant, r.id, r.name, r.access_key, r.max_conns, r.parallel);
    }
    OPENSSL_cleanse(sec, sizeof(sec));
    if (rc && !why[0])
        snprintf(why, whylen, "%s", srv_strerror(rc));
    return rc;
}

int tenants_remote_get(struct tenants *t, uint32_t id, struct tenant_remote *out)
{
    struct remotes *rs = R(t);
    pthread_mutex_lock(&rs->mu);
    struct tenant_remote *r = find_id(rs, id);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&rs->mu);
    return r ? 0 : -ENOENT;
}

int tenants_remote_find(struct tenants *t, uint32_t tenant, const char *name,
                        struct tenant_remote *out)
{
    struct remotes *rs = R(t);
    pthread_mutex_lock(&rs->mu);
    struct tenant_remote *r = find_name(rs, tenant, name);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&rs->mu);
    return r ? 0 : -ENOENT;
}

struct in_use {
    uint32_t id;
    uint64_t bucket;
};

static int in_use_cb(void *arg, uint32_t tenant, uint64_t bucket, const void *val, size_t len)
{
    struct in_use *u = arg;
    struct tier_policy p;
    (void)tenant;
    if (tier_policy_decode(val, len, &p) == 0 && p.remote == u->id) {
        u->bucket = bucket;
        return 1;
    }
    return 0;
}

/* Remove @p id's record and cache entry (rs->mu held). */
static int drop(struct tenants *t, struct remotes *rs, uint32_t id)
{
    char key[32];
    rec_key(id, key, sizeof(key));
    int rc = meta_record_del(tenants__meta(t), META_REC_CONFIG, key, strlen(key));
    if (rc < 0 && rc != -ENOENT)
        return rc;
    for (size_t i = 0; i < rs->n; i++) {
        if (rs->v[i].id == id) {
            memmove(&rs->v[i], &rs->v[i + 1], (rs->n - i - 1) * sizeof(*rs->v));
            rs->n--;
            break;
        }
    }
    return 0;
}

int tenants_remote_delete(struct tenants *t, uint32_t id, uint64_t *bucket_out)
{
    struct remotes *rs = R(t);
    pthread_mutex_lock(&rs->mu);
    int rc = -ENOENT;
    if (!find_id(rs, id))
        goto out;
    /* Policies are set only by the admin thread, which also runs this delete, so no
     * policy naming the remote can appear between this scan and the delete. */
    struct in_use u = {id, 0};
    rc = core_bucket_blob_scan(tenants__core(t), CORE_BLOB_TIER, in_use_cb, &u);
    if (rc < 0)
        goto out;
    if (u.bucket) {
        if (bucket_out)
            *bucket_out = u.bucket;
        rc = -EBUSY;
        goto out;
    }
    /* nor while an evicted file's only copy is there (files are evicted by the uploader,
     * which names remotes of policies only: none can be evicted to it from now on) */
    uint64_t ino = 0;
    rc = core_tier_remote_needed(tenants__core(t), id, &ino);
    if (rc < 0)
        goto out;
    if (rc == 1) {
        if (bucket_out)
            *bucket_out = ino;
        rc = -ENOTEMPTY;
        goto out;
    }
    rc = drop(t, rs, id);
    if (rc == 0)
        srv_log(INFO, TIER, "remote %u deleted", id);
out:
    pthread_mutex_unlock(&rs->mu);
    return rc;
}

void tenants__remotes_drop_tenant(struct tenants *t, uint32_t tenant)
{
    struct remotes *rs = R(t);
    if (!rs || !tenant)
        return;
    pthread_mutex_lock(&rs->mu);
    for (size_t i = rs->n; i-- > 0;)
        if (rs->v[i].tenant == tenant)
            drop(t, rs, rs->v[i].id);
    pthread_mutex_unlock(&rs->mu);
}

int tenants_remote_list(struct tenants *t, uint32_t tenant, tenants_remote_cb cb, void *arg)
{
    struct remotes *rs = R(t);
    pthread_mutex_lock(&rs->mu);
    size_t n = rs->n;
    struct tenant_remote *copy = n ? malloc(n * sizeof(*copy)) : NULL;
    if (n && !copy) {
        pthread_mutex_unlock(&rs->mu);
        return -ENOMEM;
    }
    if (n)
        memcpy(copy, rs->v, n * sizeof(*copy));
    pthread_mutex_unlock(&rs->mu);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (tenant == UINT32_MAX || copy[i].tenant == tenant)
            rc = cb(arg, &copy[i]);
    free(copy);
    return rc;
}

int tenants_remote_usable(struct tenants *t, uint32_t id, uint32_t bucket_tenant, bool system)
{
    struct tenant_remote r;
    if (tenants_remote_get(t, id, &r) < 0)
        return -ENOENT;
    if (r.tenant == 0)
        return system ? 0 : -EACCES;
    return r.tenant == bucket_tenant ? 0 : -ENOENT;
}

int tenants_remote_conn(struct tenants *t, uint32_t id, struct tier_upload_remote *out)
{
    struct remotes *rs = R(t);
    struct tenant_remote r;
    char why[300];
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&rs->mu);
    bool allow = rs->allow_private;
    pthread_mutex_unlock(&rs->mu);
    int rc = load_remote(t, id, &r, out->secret_key, sizeof(out->secret_key));
    if (rc && rc != SRV_ECORRUPT) /* reading the record failed (meta_record_get) */
        return rc;
    if (rc) {
        srv_log(ERROR, TIER, "remote %u: its secret does not unseal (wrong master.key?)", id);
        memset(out, 0, sizeof(*out));
        return SRV_ECORRUPT;
    }
    snprintf(out->endpoint, sizeof(out->endpoint), "%s", r.endpoint);
    snprintf(out->region, sizeof(out->region), "%s", r.region);
    snprintf(out->bucket, sizeof(out->bucket), "%s", r.bucket);
    snprintf(out->prefix, sizeof(out->prefix), "%s", r.prefix);
    snprintf(out->ca_file, sizeof(out->ca_file), "%s", r.ca_file);
    snprintf(out->access_key, sizeof(out->access_key), "%s", r.access_key);
    out->parallel = (int)r.parallel;
    out->cfg = (struct tier_s3_config){
        .endpoint = out->endpoint,
        .region = out->region,
        .bucket = out->bucket,
        .prefix = out->prefix,
        .access_key = out->access_key,
        .secret_key = out->secret_key,
        .virtual_host = r.virtual_host,
        .tls_no_verify = r.tls_no_verify,
        .ca_file = out->ca_file[0] ? out->ca_file : NULL,
        .max_conns = (int)r.max_conns,
        .connect_timeout_ms = (int)r.connect_timeout_ms,
    };
    if (r.tenant) {
        rc = tier_remote_resolve(&out->cfg, allow, out->connect_host, sizeof(out->connect_host),
                                 why, sizeof(why));
        if (rc) {
            srv_log(WARN, TIER, "tenant=%u remote %u: %s", r.tenant, id, why);
            memset(out, 0, sizeof(*out));
            return rc;
        }
        out->cfg.connect_host = out->connect_host;
    }
    return 0;
}
