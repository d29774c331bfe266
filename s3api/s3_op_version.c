/* SPDX-License-Identifier: Apache-2.0
 * s3_op_version: versioning and object lock over S3 (the core's rules:
 * core.h, "versions and object lock"): Get/PutBucketVersioning,
 * ListObjectVersions, Get/PutObjectLockConfiguration, Get/PutObjectRetention,
 * Get/PutObjectLegalHold, and the object-lock request headers shared by
 * PutObject, CopyObject and CreateMultipartUpload.
 *
 * MFA delete is refused (501): nothing here can verify an MFA device, and
 * accepting the setting would promise a protection that is not there.
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

#define LOCK_MSG_NO_CONFIG "Bucket is missing Object Lock Configuration"

static const char *const LOCK_MODES[] = {"", "GOVERNANCE", "COMPLIANCE"};

/* The document of a body-carrying op, its root checked to be @p root.
 * @return it, or NULL with MalformedXML answered. */
static struct s3_xnode *body_doc(struct s3_ctx *x, const char *root)
{
    size_t n = evbuffer_get_length(x->in.buf);
    struct s3_xnode *doc = NULL;
    const char *text = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    if (!n || s3__xml_parse(x->a, text, n, &doc) || strcmp(doc->name, root) != 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return NULL;
    }
    return doc;
}

static int lock_mode_of(const char *s)
{
    for (int i = 1; i <= CORE_LOCK_COMPLIANCE; i++)
        if (strcmp(s, LOCK_MODES[i]) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- bucket versioning */

/* The request's bucket and its versioning configuration. @return 0, or responds and
 * returns < 0. */
static int vcfg_of(struct s3_ctx *x, struct core_bucket_vcfg *cfg)
{
    if (s3__op_bucket(x))
        return -1;
    int rc = core_bucket_vcfg_get(x->core, &x->p, x->bucket_ino, cfg);
    if (rc)
        s3__resp_err(x, rc, NULL);
    return rc;
}

/* Answer a configuration change's result @p rc (@p badstate: the message of
 * SRV_EBADSTATE). */
static void cfg_result(struct s3_ctx *x, int rc, const char *badstate)
{
    if (rc)
        s3__resp_err(x, rc, rc == SRV_EBADSTATE ? badstate : NULL);
    else
        x->out.status = 200;
}

static void get_versioning(struct s3_ctx *x)
{
    struct core_bucket_vcfg cfg;
    if (vcfg_of(x, &cfg))
        return;
    s3__resp_xml(x);
    if (cfg.versioning == CORE_VERS_NONE) {
        evbuffer_add_printf(x->out.body, "<VersioningConfiguration xmlns=\"%s\"/>\n", S3_XMLNS);
        return;
    }
    evbuffer_add_printf(x->out.body,
                        "<VersioningConfiguration xmlns=\"%s\"><Status>%s</Status>"
                        "</VersioningConfiguration>\n",
                        S3_XMLNS, cfg.versioning == CORE_VERS_ENABLED ? "Enabled" : "Suspended");
}

static void put_versioning(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    struct s3_xnode *doc = body_doc(x, "VersioningConfiguration");
    if (!doc)
        return;
    struct s3_xnode *st = s3__xml_child(doc, "Status"), *mfa = s3__xml_child(doc, "MfaDelete");
    if (mfa && strcmp(mfa->text, "Enabled") == 0) {
        s3__resp_err(x, SRV_ENOTSUPP,
                     "MFA delete is not supported by this server (it cannot verify an MFA "
                     "device); leave MfaDelete Disabled");
        return;
    }
    if ((mfa && strcmp(mfa->text, "Disabled") != 0) || !st ||
        (strcmp(st->text, "Enabled") != 0 && strcmp(st->text, "Suspended") != 0)) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    enum core_versioning v = st->text[0] == 'E' ? CORE_VERS_ENABLED : CORE_VERS_SUSPENDED;
    cfg_result(x, core_bucket_versioning_set(x->core, &x->p, x->bucket_ino, v),
               "an Object Lock configuration is present on this bucket, so the versioning state "
               "cannot be changed");
}

/* ---------------------------------------------------------------- object lock configuration */

static void get_objlock(struct s3_ctx *x)
{
    struct core_bucket_vcfg cfg;
    if (vcfg_of(x, &cfg))
        return;
    if (!cfg.objlock) {
        s3__resp_s3err(x, S3E_NO_OBJECT_LOCK_CONFIG, NULL);
        return;
    }
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b,
                        "<ObjectLockConfiguration xmlns=\"%s\"><ObjectLockEnabled>Enabled"
                        "</ObjectLockEnabled>",
                        S3_XMLNS);
    if (cfg.lock_mode)
        evbuffer_add_printf(b,
                            "<Rule><DefaultRetention><Mode>%s</Mode><%s>%u</%s>"
                            "</DefaultRetention></Rule>",
                            LOCK_MODES[cfg.lock_mode], cfg.lock_days ? "Days" : "Years",
                            cfg.lock_days ? cfg.lock_days : cfg.lock_years,
                            cfg.lock_days ? "Days" : "Years");
    evbuffer_add_printf(b, "</ObjectLockConfiguration>\n");
}

/* A positive count of days or years. @return it, or -1. */
static long count_of(const struct s3_xnode *n)
{
    char *e = NULL;
    long v = n ? strtol(n->text, &e, 10) : -1;
    return n && *n->text && !*e && v > 0 ? v : -1;
}

static void put_objlock(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    struct s3_xnode *doc = body_doc(x, "ObjectLockConfiguration");
    if (!doc)
        return;
    struct s3_xnode *en = s3__xml_child(doc, "ObjectLockEnabled");
    struct s3_xnode *rule = s3__xml_child(doc, "Rule");
    struct core_bucket_vcfg cfg = {0};
    if (!en || strcmp(en->text, "Enabled") != 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    if (rule) {
        struct s3_xnode *dr = s3__xml_child(rule, "DefaultRetention");
        struct s3_xnode *mode = dr ? s3__xml_child(dr, "Mode") : NULL;
        struct s3_xnode *days = dr ? s3__xml_child(dr, "Days") : NULL;
        struct s3_xnode *years = dr ? s3__xml_child(dr, "Years") : NULL;
        int m = mode ? lock_mode_of(mode->text) : -1;
        long n = count_of(days ? days : years);
        if (!dr || m < 0 || !days == !years || n < 0 || (days && n > 36500) || (years && n > 100)) {
            s3__resp_err(x, SRV_EBADREQ,
                         "DefaultRetention needs a Mode (GOVERNANCE or COMPLIANCE) and either "
                         "Days (1..36500) or Years (1..100)");
            return;
        }
        cfg.lock_mode = (uint32_t)m;
        cfg.lock_days = days ? (uint32_t)n : 0;
        cfg.lock_years = years ? (uint32_t)n : 0;
    }
    cfg_result(x, core_bucket_objlock_set(x->core, &x->p, x->bucket_ino, &cfg),
               "versioning must be Enabled on the bucket to turn Object Lock on");
}

/* ---------------------------------------------------------------- request headers */

int s3__lock_from_req(struct s3_ctx *x, struct core_lock *lk, bool *has)
{
    const char *mode = s3__req_header(x->req, "x-amz-object-lock-mode");
    const char *until = s3__req_header(x->req, "x-amz-object-lock-retain-until-date");
    const char *hold = s3__req_header(x->req, "x-amz-object-lock-legal-hold");
    memset(lk, 0, sizeof(*lk));
    *has = mode || until || hold;
    if (!*has)
        return 0;
    if (!mode != !until) {
        s3__resp_err(x, -EINVAL,
                     "x-amz-object-lock-mode and x-amz-object-lock-retain-until-date must both "
                     "be supplied");
        return -1;
    }
    if (mode) {
        int m = lock_mode_of(mode);
        time_t t;
        if (m < 0) {
            s3__resp_err(x, -EINVAL, "unknown x-amz-object-lock-mode");
            return -1;
        }
        if (s3__iso_date_parse(until, &t) || t <= time(NULL)) {
            s3__resp_err(x, -EINVAL,
                         "the retain until date must be an ISO 8601 date in the "
                         "future");
            return -1;
        }
        lk->mode = (uint32_t)m;
        lk->until = t;
    }
    if (hold) {
        if (strcmp(hold, "ON") != 0 && strcmp(hold, "OFF") != 0) {
            s3__resp_err(x, -EINVAL, "x-amz-object-lock-legal-hold must be ON or OFF");
            return -1;
        }
        lk->hold = strcmp(hold, "ON") == 0;
    }
    struct core_bucket_vcfg cfg;
    int rc = core_bucket_vcfg_get(x->core, &x->p, x->bucket_ino, &cfg);
    if (rc)
        s3__resp_err(x, rc, NULL);
    else if (!cfg.objlock)
        s3__resp_s3err(x, S3E_INVALID_REQUEST, LOCK_MSG_NO_CONFIG);
    return rc || !cfg.objlock ? -1 : 0;
}

void s3__resp_version(struct s3_ctx *x, const struct core_objinfo *oi)
{
    if (oi->vid[0])
        s3__resp_hdr(x, "x-amz-version-id", oi->vid);
    if (oi->dmarker)
        s3__resp_hdr(x, "x-amz-delete-marker", "true");
    if (oi->lock.mode) {
        char iso[25];
        struct timespec ts = {oi->lock.until, 0};
        s3__iso_date_fmt(&ts, iso);
        s3__resp_hdr(x, "x-amz-object-lock-mode", LOCK_MODES[oi->lock.mode]);
        s3__resp_hdr(x, "x-amz-object-lock-retain-until-date", iso);
    }
    if (oi->lock.hold)
        s3__resp_hdr(x, "x-amz-object-lock-legal-hold", "ON");
}

/* ---------------------------------------------------------------- retention, legal hold */

/* The version the request names (?versionId, else the current one), into @p oi,
 * decided for the op's action on it (s3__op_object). @return 0, or responds and
 * returns < 0. */
static int lock_target(struct s3_ctx *x, struct core_objinfo *oi)
{
    struct s3_meta m;
    struct core_bucket_vcfg cfg;
    if (s3__op_bucket(x))
        return -1;
    struct core_principal sp = s3__super(x);
    int rc = core_bucket_vcfg_get(x->core, &sp, x->bucket_ino, &cfg);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return -1;
    }
    if (!cfg.objlock) {
        /* no object to decide on: decided on the bucket */
        if (s3__authz(x, &x->b, x->rt.op->action, S3_AZ_B_READ, NULL, NULL) == 0)
            s3__resp_s3err(x, S3E_INVALID_REQUEST, LOCK_MSG_NO_CONFIG);
        return -1;
    }
    return s3__op_object(x, oi, &m);
}

static void get_retention(struct s3_ctx *x)
{
    struct core_objinfo oi;
    if (lock_target(x, &oi))
        return;
    if (!oi.lock.mode) {
        s3__resp_s3err(x, S3E_NO_SUCH_OBJECT_LOCK_CONFIG, NULL);
        return;
    }
    char iso[25];
    struct timespec ts = {oi.lock.until, 0};
    s3__iso_date_fmt(&ts, iso);
    s3__resp_xml(x);
    evbuffer_add_printf(x->out.body,
                        "<Retention xmlns=\"%s\"><Mode>%s</Mode><RetainUntilDate>%s"
                        "</RetainUntilDate></Retention>\n",
                        S3_XMLNS, LOCK_MODES[oi.lock.mode], iso);
}

/* Answer a change of a version's lock (core_version_*_set's @p rc). */
static void lock_set_result(struct s3_ctx *x, int rc)
{
    if (rc == SRV_EBADSTATE)
        s3__resp_s3err(x, S3E_INVALID_REQUEST, LOCK_MSG_NO_CONFIG);
    else if (rc == SRV_ELOCKED)
        s3__resp_err(x, rc,
                     "the object's retention cannot be shortened or removed: COMPLIANCE never, "
                     "GOVERNANCE only with x-amz-bypass-governance-retention");
    else if (rc == -EINVAL)
        s3__resp_err(x, rc, "invalid version id specified, or a delete marker");
    else if (rc)
        s3__resp_err(x, rc, NULL);
    else
        x->out.status = 200;
}

int s3__bypass_flags(struct s3_ctx *x)
{
    const char *b = s3__req_header(x->req, "x-amz-bypass-governance-retention");
    if (!b || strcasecmp(b, "true") != 0)
        return 0;
    struct core_principal keep = x->p;
    int rc = s3__authz(x, &x->b, "s3:BypassGovernanceRetention", S3_AZ_B_WRITE, NULL, NULL);
    x->p = keep;
    return rc ? -1 : CORE_DEL_BYPASS;
}

static void put_retention(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    struct s3_xnode *doc = body_doc(x, "Retention");
    if (!doc)
        return;
    struct s3_xnode *mode = s3__xml_child(doc, "Mode");
    struct s3_xnode *until = s3__xml_child(doc, "RetainUntilDate");
    struct core_lock lk = {0};
    if (mode || until) {
        int m = mode ? lock_mode_of(mode->text) : -1;
        time_t t;
        if (m < 0 || !until || s3__iso_date_parse(until->text, &t)) {
            s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
            return;
        }
        if (t <= time(NULL)) {
            s3__resp_err(x, -EINVAL, "the retain until date must be in the future");
            return;
        }
        lk.mode = (uint32_t)m;
        lk.until = t;
    }
    int flags = s3__bypass_flags(x);
    if (flags < 0)
        return;
    const char *vid = s3__req_param(x->req, "versionId");
    int rc = core_version_retention_set(x->core, &x->p, x->bucket_ino, x->rt.key, x->rt.keylen, vid,
                                        &lk, (unsigned)flags);
    lock_set_result(x, rc);
}

static void get_legal_hold(struct s3_ctx *x)
{
    struct core_objinfo oi;
    if (lock_target(x, &oi))
        return;
    s3__resp_xml(x);
    evbuffer_add_printf(x->out.body, "<LegalHold xmlns=\"%s\"><Status>%s</Status></LegalHold>\n",
                        S3_XMLNS, oi.lock.hold ? "ON" : "OFF");
}

static void put_legal_hold(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    struct s3_xnode *doc = body_doc(x, "LegalHold");
    if (!doc)
        return;
    struct s3_xnode *st = s3__xml_child(doc, "Status");
    if (!st || (strcmp(st->text, "ON") != 0 && strcmp(st->text, "OFF") != 0)) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    int rc = core_version_hold_set(x->core, &x->p, x->bucket_ino, x->rt.key, x->rt.keylen,
                                   s3__req_param(x->req, "versionId"), strcmp(st->text, "ON") == 0);
    lock_set_result(x, rc);
}

/* ---------------------------------------------------------------- IAM actions */

const char *s3__version_action(const char *action)
{
    static const char *const V[][2] = {
        {"s3:GetObject", "s3:GetObjectVersion"},
        {"s3:DeleteObject", "s3:DeleteObjectVersion"},
        {"s3:GetObjectTagging", "s3:GetObjectVersionTagging"},
        {"s3:PutObjectTagging", "s3:PutObjectVersionTagging"},
        {"s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging"},
        {"s3:GetObjectAcl", "s3:GetObjectVersionAcl"},
        {"s3:PutObjectAcl", "s3:PutObjectVersionAcl"},
        {"s3:GetObjectAttributes", "s3:GetObjectVersionAttributes"},
    };
    for (size_t i = 0; action && i < sizeof(V) / sizeof(V[0]); i++)
        if (strcmp(action, V[i][0]) == 0)
            return V[i][1];
    return action;
}

/* ---------------------------------------------------------------- ListObjectVersions */

struct vlist {
    struct s3_ctx *x;
    bool url;
    struct evbuffer *entries, *prefixes;
    char *last;
    size_t lastlen;
    const char *lastvid;
    bool last_is_prefix;
    struct s3_owner_cache oc;
    const char *sclass; /* the bucket's tier class, once looked up */
};

static int version_cb(void *arg, const struct core_listent *e)
{
    struct vlist *st = arg;
    struct s3_ctx *x = st->x;
    st->last = s3__arena_strndup(x->a, e->key, e->keylen);
    st->lastlen = e->keylen;
    st->last_is_prefix = e->is_prefix;
    if (e->is_prefix) {
        evbuffer_add_printf(st->prefixes, "<CommonPrefixes>");
        s3__list_text(st->url, st->prefixes, "Prefix", e->key, e->keylen);
        evbuffer_add_printf(st->prefixes, "</CommonPrefixes>");
        return 0;
    }
    const struct core_objinfo *oi = e->info;
    struct evbuffer *b = st->entries;
    char iso[25];
    st->lastvid = s3__arena_strndup(x->a, oi->vid, strlen(oi->vid));
    s3__iso_date_fmt(&oi->attr.mtime, iso);
    evbuffer_add_printf(b, oi->dmarker ? "<DeleteMarker>" : "<Version>");
    s3__list_text(st->url, b, "Key", e->key, e->keylen);
    evbuffer_add_printf(b,
                        "<VersionId>%s</VersionId><IsLatest>%s</IsLatest>"
                        "<LastModified>%s</LastModified>",
                        oi->vid, oi->latest ? "true" : "false", iso);
    if (!oi->dmarker) {
        bool dir = oi->attr.type == CORE_DIR;
        evbuffer_add_printf(b, "<ETag>&quot;%s&quot;</ETag><Size>%" PRIu64 "</Size>",
                            dir ? S3_EMPTY_MD5 : oi->etag, dir ? 0 : oi->attr.size);
        s3__xml_elem(b, "StorageClass",
                     s3__storage_class(x, x->bucket_ino, &oi->attr, &st->sclass));
    }
    s3__owner_xml(x, b, x->b.cfg.ownership == S3_OWN_ENFORCED ? x->b.attr.uid : oi->attr.uid,
                  &st->oc);
    evbuffer_add_printf(b, oi->dmarker ? "</DeleteMarker>" : "</Version>");
    return 0;
}

static void list_versions(struct s3_ctx *x)
{
    const struct s3_req *r = x->req;
    const char *prefix = s3__req_param(r, "prefix");
    const char *delim = s3__req_param(r, "delimiter");
    const char *enc = s3__req_param(r, "encoding-type");
    const char *km = s3__req_param(r, "key-marker");
    const char *vm = s3__req_param(r, "version-id-marker");
    uint32_t max;
    struct vlist st = {.x = x};
    if (enc && strcmp(enc, "url") != 0) {
        s3__resp_err(x, -EINVAL, "invalid encoding type");
        return;
    }
    st.url = enc != NULL;
    if (km && !*km)
        km = NULL;
    if (vm && !*vm)
        vm = NULL;
    if (vm && !km) {
        s3__resp_err(x, -EINVAL, "a version-id-marker cannot be specified without a key-marker");
        return;
    }
    if (s3__parse_max_keys(x, &max) || s3__op_bucket(x))
        return;
    st.entries = evbuffer_new();
    st.prefixes = evbuffer_new();
    bool truncated = false;
    int rc = core_list_versions(x->core, &x->p, x->bucket_ino, prefix, prefix ? strlen(prefix) : 0,
                                km, km ? strlen(km) : 0, vm, delim && *delim ? delim : NULL,
                                delim ? strlen(delim) : 0, max, version_cb, &st, &truncated);
    if (rc == -EINVAL) {
        s3__resp_err(x, rc, "invalid version id marker");
        goto out;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        goto out;
    }
    struct evbuffer *b = x->out.body;
    s3__resp_xml(x);
    evbuffer_add_printf(b, "<ListVersionsResult xmlns=\"%s\">", S3_XMLNS);
    s3__xml_elem(b, "Name", x->rt.bucket);
    s3__list_text(st.url, b, "Prefix", prefix ? prefix : "", prefix ? strlen(prefix) : 0);
    s3__list_text(st.url, b, "KeyMarker", km ? km : "", km ? strlen(km) : 0);
    s3__xml_elem(b, "VersionIdMarker", vm ? vm : "");
    if (truncated && st.last) {
        s3__list_text(st.url, b, "NextKeyMarker", st.last, st.lastlen);
        if (!st.last_is_prefix)
            s3__xml_elem(b, "NextVersionIdMarker", st.lastvid);
    }
    s3__xml_elem_u64(b, "MaxKeys", max);
    if (delim && *delim) /* an empty delimiter is none, and not echoed (AWS) */
        s3__list_text(st.url, b, "Delimiter", delim, strlen(delim));
    if (st.url)
        s3__xml_elem(b, "EncodingType", "url");
    s3__xml_elem(b, "IsTruncated", truncated ? "true" : "false");
    evbuffer_add_buffer(b, st.entries);
    evbuffer_add_buffer(b, st.prefixes);
    evbuffer_add_printf(b, "</ListVersionsResult>\n");
out:
    evbuffer_free(st.entries);
    evbuffer_free(st.prefixes);
}

const struct s3_op s3_op_get_versioning = {.name = "GetBucketVersioning",
                                           .action = "s3:GetBucketVersioning",
                                           .az = S3_AZ_B_OWNER,
                                           .qos = QOS_META,
                                           .work = get_versioning};
const struct s3_op s3_op_put_versioning = {.name = "PutBucketVersioning",
                                           .action = "s3:PutBucketVersioning",
                                           .az = S3_AZ_B_OWNER,
                                           .body = S3_BODY_XML,
                                           .qos = QOS_META,
                                           .work = put_versioning};
const struct s3_op s3_op_get_objlock = {.name = "GetObjectLockConfiguration",
                                        .action = "s3:GetBucketObjectLockConfiguration",
                                        .az = S3_AZ_B_OWNER,
                                        .qos = QOS_META,
                                        .work = get_objlock};
const struct s3_op s3_op_put_objlock = {.name = "PutObjectLockConfiguration",
                                        .action = "s3:PutBucketObjectLockConfiguration",
                                        .az = S3_AZ_B_OWNER,
                                        .body = S3_BODY_XML,
                                        .qos = QOS_META,
                                        .work = put_objlock};
const struct s3_op s3_op_get_retention = {.name = "GetObjectRetention",
                                          .action = "s3:GetObjectRetention",
                                          .az = S3_AZ_O_READ,
                                          .qos = QOS_META,
                                          .work = get_retention};
const struct s3_op s3_op_put_retention = {.name = "PutObjectRetention",
                                          .action = "s3:PutObjectRetention",
                                          .az = S3_AZ_B_WRITE,
                                          .body = S3_BODY_XML,
                                          .qos = QOS_META,
                                          .work = put_retention};
const struct s3_op s3_op_get_legal_hold = {.name = "GetObjectLegalHold",
                                           .action = "s3:GetObjectLegalHold",
                                           .az = S3_AZ_O_READ,
                                           .qos = QOS_META,
                                           .work = get_legal_hold};
const struct s3_op s3_op_put_legal_hold = {.name = "PutObjectLegalHold",
                                           .action = "s3:PutObjectLegalHold",
                                           .az = S3_AZ_B_WRITE,
                                           .body = S3_BODY_XML,
                                           .qos = QOS_META,
                                           .work = put_legal_hold};
const struct s3_op s3_op_list_versions = {.name = "ListObjectVersions",
                                          .action = "s3:ListBucketVersions",
                                          .az = S3_AZ_B_READ,
                                          .qos = QOS_META,
                                          .work = list_versions};
