/* SPDX-License-Identifier: Apache-2.0
 * s3_authz: who may do what over S3 — the decision for every request that
 * names a bucket, as AWS documents it for a bucket policy and ACLs:
 *
 *   1. an explicit Deny of the bucket policy refuses (the bucket's owner and
 *      the tenant's admins may still read, change and delete the policy, so
 *      nobody locks the owner out);
 *   2. a tenant admin (and the bootstrap admin), or an Allow of the policy,
 *      permits;
 *   3. else the ACL decides (s3_acl.c: the POSIX bits of the bucket or object
 *      as the core reads them, plus the grants only S3 expresses); the
 *      bucket's owner has FULL_CONTROL of the bucket; bucket settings
 *      (policy, CORS, public access block, ownership controls, location ...)
 *      are its owner's alone.
 *
 * How the core call then runs: when the permission comes from POSIX bits only
 * (an S3 user in the owner, group or others' class), with the requester's own
 * identity, so the core applies the same rules to the directories along a key
 * as it does for NFS (write and search on the parent, sticky directories);
 * when it comes from S3 alone (a grant to a user or to AllUsers, the policy,
 * the bucket's owner or an admin), elevated (CORE_P_SUPER): a key is then
 * flat, as on AWS. An anonymous request never gets POSIX access: the others'
 * bits count for it only where a stored AllUsers grant makes them public.
 *
 * Object requests look their object up elevated and decide on its attributes
 * and grants before acting (s3__authz_object); a GET or HEAD of a missing key
 * answers 404 only to a requester who may list the bucket, 403 otherwise, so
 * keys do not leak. s3__op_done refuses to send a success of a request that
 * named a bucket and was never decided (a 500, logged), so an operation that
 * forgets its check fails closed.
 *
 * The bucket configuration lives in the bucket's metadata blob
 * (core_bucket_get): S3_M_ACL grants and S3_M_BCFG records "policy" (the
 * JSON text), "pab" (4 digits 0/1: BlockPublicAcls, IgnorePublicAcls,
 * BlockPublicPolicy, RestrictPublicBuckets), "ownership" (BucketOwnerEnforced,
 * BucketOwnerPreferred or ObjectWriter) and "cors" (the CORS XML).
 * Thread: the work functions' (workers), and the loop thread for the GET fast
 * path (nothing here blocks: the tenant lookups take a read lock). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_internal.h"
#include "tier_settings.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tenants.h"

#define ACCESS_DENIED "Access Denied"

static void bcfg_load(struct s3_ctx *x, struct s3_bref *br, const void *blob, size_t len)
{
    struct s3_bcfg *b = &br->cfg;
    memset(b, 0, sizeof(*b));
    b->loaded = true;
    if (!len)
        return;
    if (s3__meta_decode(&b->meta, x->a, blob, len) != 0) {
        /* never open a bucket up because its configuration is unreadable */
        srv_log(ERROR, S3,
                "req=%s tenant=%u bucket %.*s: malformed configuration record; "
                "only its owner and admins get in",
                x->reqid, x->p.tenant, (int)br->namelen, br->name);
        memset(&b->meta, 0, sizeof(b->meta));
        b->broken = true;
        return;
    }
    s3__acl_load(&b->acl, x->a, &b->meta);
    const struct s3_meta_ent *e;
    if ((e = s3__meta_find(&b->meta, S3_M_BCFG, "policy")) != NULL) {
        b->policy = e->val;
        b->policylen = e->vlen;
    }
    if ((e = s3__meta_find(&b->meta, S3_M_BCFG, "pab")) != NULL && e->vlen == 4)
        for (int i = 0; i < 4; i++)
            if (e->val[i] == '1')
                b->pab |= 1u << i;
    if ((e = s3__meta_find(&b->meta, S3_M_BCFG, "ownership")) != NULL)
        b->ownership = strcmp(e->val, "BucketOwnerEnforced") == 0    ? S3_OWN_ENFORCED
                       : strcmp(e->val, "BucketOwnerPreferred") == 0 ? S3_OWN_PREFERRED
                                                                     : S3_OWN_WRITER;
    b->has_ownership = e != NULL;
    if ((e = s3__meta_find(&b->meta, S3_M_BCFG, "cors")) != NULL) {
        b->cors = e->val;
        b->corslen = e->vlen;
    }
}

int s3__bref_load(struct s3_ctx *x, struct s3_bref *b)
{
    struct core_objinfo bi;
    int rc = core_bucket_get(x->core, &x->p, b->name, b->namelen, &bi);
    if (rc == -ENOENT || rc == SRV_ESTALE)
        rc = SRV_ENOBUCKET;
    if (rc)
        return rc;
    b->ino = bi.attr.ino;
    b->attr = bi.attr;
    bcfg_load(x, b, bi.meta, bi.metalen);
    free(bi.meta);
    return 0;
}

/* The bucket of a GET's fast path (core_key_peek found it). */
void s3__bref_peeked(struct s3_ctx *x, const struct core_peek *pk)
{
    x->b.ino = pk->bucket;
    x->b.attr = pk->battr;
    bcfg_load(x, &x->b, pk->bmeta, pk->bmetalen);
}

int s3__bcfg_save(struct s3_ctx *x, int mode)
{
    void *blob = NULL;
    size_t len = 0;
    s3__acl_store(&x->b.cfg.meta, x->a, &x->b.cfg.acl);
    int rc = s3__meta_encode(&x->b.cfg.meta, &blob, &len);
    if (rc == 0)
        rc = core_bucket_set_meta(x->core, &x->p, x->b.ino, blob, len, mode);
    free(blob);
    if (rc)
        s3__resp_err(x, rc, NULL);
    return rc ? -1 : 0;
}

void s3__bcfg_set(struct s3_ctx *x, const char *name, const char *val, size_t vlen)
{
    struct s3_meta *m = &x->b.cfg.meta;
    size_t j = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!(m->ents[i].type == S3_M_BCFG && strcmp(m->ents[i].key, name) == 0))
            m->ents[j++] = m->ents[i];
    m->n = j;
    if (val)
        s3__meta_add(m, x->a, S3_M_BCFG, name, strlen(name), val, vlen);
}

/* ---------------------------------------------------------------- the decision */

static bool is_admin(const struct core_principal *id)
{
    return (id->flags & (CORE_P_SUPER | CORE_P_TADMIN)) && !(id->flags & CORE_P_ANON);
}

bool s3__authz_bucket_owner(const struct s3_ctx *x, const struct s3_bref *b)
{
    return !(x->id.flags & CORE_P_ANON) && x->id.uid == b->attr.uid;
}

struct core_principal s3__super(const struct s3_ctx *x)
{
    struct core_principal p = x->p;
    p.flags |= CORE_P_SUPER;
    return p;
}

/* The actions the bucket's owner and admins keep in spite of a Deny. */
static bool policy_mgmt(const char *action)
{
    return strcmp(action, "s3:GetBucketPolicy") == 0 || strcmp(action, "s3:PutBucketPolicy") == 0 ||
           strcmp(action, "s3:DeleteBucketPolicy") == 0;
}

static int deny(struct s3_ctx *x)
{
    s3__resp_err(x, -EACCES, ACCESS_DENIED);
    return -1;
}

bool s3__tier_readonly(struct s3_ctx *x, uint64_t bucket, const char *key, size_t keylen)
{
    return tier_settings_readonly_key(core_meta(x->core), bucket, key, keylen);
}

int s3__authz(struct s3_ctx *x, struct s3_bref *b, const char *action, enum s3_az az,
              const struct core_attr *oat, const struct s3_meta *ometa)
{
    const struct core_principal *id = &x->id;
    const struct s3_bcfg *cfg = &b->cfg;
    bool owner = s3__authz_bucket_owner(x, b);
    x->authz_done = true;
    /* a read-only tier policy (a preset's, or read_only) refuses every change, to
     * everyone: it says what the data is, not who may change it */
    if ((az == S3_AZ_B_WRITE || az == S3_AZ_O_WRITE_ACP) &&
        s3__tier_readonly(x, b->ino, b->key, b->key ? b->keylen : 0)) {
        s3__resp_err(x, -EACCES,
                     "the bucket or directory is read-only (its tier policy: read_only or a "
                     "*_RO preset)");
        return -1;
    }
    enum s3_pol pol = s3__policy_decide(x, b, action, ometa);
    if (pol == S3_POL_DENY && !(policy_mgmt(action) && (is_admin(id) || owner)))
        return deny(x);
    bool object = az >= S3_AZ_O_READ;
    if (is_admin(id) || pol == S3_POL_ALLOW) {
        if (!object)
            x->p.flags |= CORE_P_SUPER;
        return 0;
    }
    unsigned flags = (cfg->pab & S3_PAB_IGNORE_ACLS) || cfg->broken ? S3_ACL_IGNORE_PUBLIC : 0;
    bool enforced = cfg->ownership == S3_OWN_ENFORCED;
    switch (az) {
    case S3_AZ_NONE:
        return 0;
    case S3_AZ_B_OWNER:
        if (!owner)
            return deny(x);
        x->p.flags |= CORE_P_SUPER;
        return 0;
    case S3_AZ_B_READ:
    case S3_AZ_B_WRITE:
    case S3_AZ_B_READ_ACP:
    case S3_AZ_B_WRITE_ACP: {
        unsigned want = az == S3_AZ_B_READ       ? S3_P_READ
                        : az == S3_AZ_B_WRITE    ? S3_P_WRITE
                        : az == S3_AZ_B_READ_ACP ? S3_P_READ_ACP
                                                 : S3_P_WRITE_ACP;
        if (owner) {
            x->p.flags |= CORE_P_SUPER;
            return 0;
        }
        const struct s3_acl *acl = enforced || cfg->broken ? NULL : &cfg->acl;
        if (!(s3__acl_perms(id, &b->attr, acl, true, flags) & want))
            return deny(x);
        /* the POSIX bits alone suffice: the core checks the key's directories too */
        unsigned posix = s3__acl_perms(id, &b->attr, NULL, true, flags);
        if ((id->flags & CORE_P_ANON) || !(posix & want) || (want & ~(S3_P_READ | S3_P_WRITE)))
            x->p.flags |= CORE_P_SUPER;
        return 0;
    }
    case S3_AZ_O_READ:
    case S3_AZ_O_READ_ACP:
    case S3_AZ_O_WRITE_ACP: {
        unsigned want = az == S3_AZ_O_READ       ? S3_P_READ
                        : az == S3_AZ_O_READ_ACP ? S3_P_READ_ACP
                                                 : S3_P_WRITE_ACP;
        if (enforced && owner)
            return 0; /* the bucket's owner owns every object */
        struct core_attr at = *oat;
        struct s3_acl acl;
        if (enforced)
            at.uid = b->attr.uid;
        s3__acl_load(&acl, x->a, enforced || cfg->broken ? NULL : ometa);
        if (!(s3__acl_perms(id, &at, &acl, false, flags) & want))
            return deny(x);
        return 0;
    }
    }
    return deny(x);
}

/* ---------------------------------------------------------------- bucket policies */

static int user_by_name(void *arg, const char *name, uint64_t *user)
{
    struct s3_ctx *x = arg;
    struct tenant_user u;
    if (!x->tenants || tenants_user_find(x->tenants, x->p.tenant, name, &u) != 0)
        return -ENOENT;
    *user = u.id;
    return 0;
}

static int uid_by_canonical(void *arg, const char *id, uint32_t *uid)
{
    return s3__acl_uid_of(arg, id, false, uid);
}

void s3__policy_env(struct s3_ctx *x, const struct s3_bref *b, bool stored,
                    struct s3_policy_env *env)
{
    struct tenant_info ti;
    memset(env, 0, sizeof(*env));
    env->bucket = s3__arena_strndup(x->a, b->name, b->namelen);
    env->tenant = x->p.tenant;
    if (x->tenants && tenants_tenant_get(x->tenants, x->p.tenant, &ti) == 0)
        env->tenant_name = s3__arena_strndup(x->a, ti.name, strlen(ti.name));
    env->user_by_name = user_by_name;
    env->uid_by_canonical = uid_by_canonical;
    env->arg = x;
    env->stored = stored;
}

/* Actions whose resource is an object (the rest name the bucket). */
static bool object_action(const char *a)
{
    static const char *const PFX[] = {"s3:GetObject",
                                      "s3:PutObject",
                                      "s3:DeleteObject",
                                      "s3:RestoreObject",
                                      "s3:AbortMultipartUpload",
                                      "s3:ListMultipartUploadParts",
                                      "s3:BypassGovernanceRetention"};
    for (size_t i = 0; i < sizeof(PFX) / sizeof(PFX[0]); i++)
        if (strncmp(a, PFX[i], strlen(PFX[i])) == 0)
            return true;
    return false;
}

struct cond_ctx {
    struct s3_ctx *x;
    const struct s3_meta *ometa; /* the object's metadata (s3:ExistingObjectTag) or NULL */
    struct s3_meta rtags;        /* the request's tags (s3:RequestObjectTag) */
    bool rtags_done;
};

/* Condition key values of the request (s3_policy.c's callback). */
static const char *cond_value(void *arg, const char *key)
{
    struct cond_ctx *c = arg;
    struct s3_ctx *x = c->x;
    const struct s3_req *r = x->req;
    bool anon = x->id.flags & CORE_P_ANON;
    if (strcmp(key, "aws:sourceip") == 0) {
        char ip[INET6_ADDRSTRLEN] = "";
        if (x->peer.ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&x->peer)->sin_addr, ip, sizeof(ip));
        else if (x->peer.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&x->peer)->sin6_addr, ip,
                      sizeof(ip));
        return *ip ? s3__arena_strndup(x->a, ip, strlen(ip)) : NULL;
    }
    if (strcmp(key, "aws:securetransport") == 0)
        return x->tls ? "true" : "false";
    if (strcmp(key, "aws:referer") == 0)
        return s3__req_header(r, "referer");
    if (strcmp(key, "aws:useragent") == 0)
        return s3__req_header(r, "user-agent");
    if (strcmp(key, "aws:currenttime") == 0 || strcmp(key, "aws:epochtime") == 0) {
        time_t now = time(NULL);
        struct tm tm;
        char buf[32];
        if (key[4] == 'e')
            return s3__arena_printf(x->a, "%lld", (long long)now);
        gmtime_r(&now, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return s3__arena_strndup(x->a, buf, strlen(buf));
    }
    if (strcmp(key, "aws:principaltype") == 0)
        return anon ? "Anonymous" : "User";
    if (anon && (strcmp(key, "aws:username") == 0 || strcmp(key, "aws:userid") == 0 ||
                 strcmp(key, "aws:principalaccount") == 0))
        return NULL;
    if (strcmp(key, "aws:username") == 0) {
        struct tenant_user u;
        if (!x->tenants || tenants_user_get(x->tenants, x->id.tenant, x->id.user, &u) != 0)
            return NULL;
        return s3__arena_strndup(x->a, u.name, strlen(u.name));
    }
    if (strcmp(key, "aws:userid") == 0)
        return s3__arena_printf(x->a, "%llu", (unsigned long long)x->id.user);
    if (strcmp(key, "aws:principalaccount") == 0)
        return s3__arena_printf(x->a, "%012u", x->id.tenant);
    if (strcmp(key, "s3:prefix") == 0 || strcmp(key, "s3:delimiter") == 0 ||
        strcmp(key, "s3:max-keys") == 0)
        return s3__req_param(r, key + 3);
    if (strncmp(key, "s3:existingobjecttag/", 21) == 0) {
        const struct s3_meta_ent *e = c->ometa ? s3__meta_find(c->ometa, S3_M_TAG, key + 21) : NULL;
        return e ? e->val : NULL;
    }
    if (strncmp(key, "s3:requestobjecttag/", 20) == 0) {
        const char *h = s3__req_header(r, "x-amz-tagging"), *why = NULL;
        if (!c->rtags_done && h)
            s3__tags_parse_query(x->a, h, &c->rtags, &why);
        c->rtags_done = true;
        const struct s3_meta_ent *e = s3__meta_find(&c->rtags, S3_M_TAG, key + 20);
        return e ? e->val : NULL;
    }
    if (strncmp(key, "s3:x-amz-", 9) == 0)
        return s3__req_header(r, key + 3);
    if (strcmp(key, "s3:signatureversion") == 0)
        return anon ? NULL : x->auth.v2 ? "AWS" : "AWS4-HMAC-SHA256";
    if (strcmp(key, "s3:authtype") == 0)
        return anon                    ? NULL
               : x->auth.post          ? "POST"
               : x->auth.sig.presigned ? "REST-QUERY-STRING"
                                       : "REST-HEADER";
    return NULL; /* aws:SourceArn and the like: never in a request here */
}

enum s3_pol s3__policy_decide(struct s3_ctx *x, const struct s3_bref *b, const char *action,
                              const struct s3_meta *ometa)
{
    const struct s3_bcfg *cfg = &b->cfg;
    if (!cfg->policy)
        return S3_POL_NONE;
    struct s3_policy_env env;
    struct s3_policy *pol;
    const char *why = NULL;
    s3__policy_env(x, b, true, &env);
    if (s3__policy_parse(x->a, cfg->policy, cfg->policylen, &env, &pol, &why) != 0) {
        /* stored once valid: never let a policy that no longer reads open anything */
        srv_log(ERROR, S3, "req=%s tenant=%u bucket %.*s: stored policy unreadable (%s): denying",
                x->reqid, x->p.tenant, (int)b->namelen, b->name, why ? why : "?");
        return S3_POL_DENY;
    }
    struct cond_ctx cc = {.x = x, .ometa = ometa};
    bool obj = object_action(action) && b->key;
    struct s3_policy_req rq = {
        .anon = x->id.flags & CORE_P_ANON,
        .user = x->id.user,
        .uid = x->id.uid,
        .action = action,
        .resource = obj ? s3__arena_printf(x->a, "arn:aws:s3:::%.*s/%.*s", (int)b->namelen, b->name,
                                           (int)b->keylen, b->key)
                        : s3__arena_printf(x->a, "arn:aws:s3:::%.*s", (int)b->namelen, b->name),
        /* RestrictPublicBuckets: a public policy grants only the tenant's own users */
        .public_off = (cfg->pab & S3_PAB_RESTRICT) && (x->id.flags & CORE_P_ANON),
        .value = cond_value,
        .arg = &cc,
    };
    return s3__policy_eval(x->a, pol, &rq);
}

int s3__authz_missing(struct s3_ctx *x)
{
    struct core_principal keep = x->p;
    int rc = s3__authz(x, &x->b, "s3:ListBucket", S3_AZ_B_READ, NULL, NULL);
    x->p = keep;
    return rc;
}
