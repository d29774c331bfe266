/* SPDX-License-Identifier: Apache-2.0
 * s3_policy: bucket policies — the IAM policy language as S3 applies it to a
 * bucket: parsing and validation (MalformedPolicy with a reason), evaluation
 * of one request, and whether a policy makes the bucket public.
 *
 * Elements: Version ("2012-10-17", "2008-10-17"), Id, Statement (one or a
 * list) of Sid, Effect (Allow/Deny), Principal or NotPrincipal, Action or
 * NotAction, Resource or NotResource, Condition. Evaluation as AWS documents:
 * a statement applies when its principal, action, resource and every
 * condition match; any applying Deny wins, then any applying Allow; else the
 * policy says nothing (the ACL decides, s3_authz.c).
 *
 * Principals are confined to the bucket's tenant ("account"): "*" (everybody,
 * anonymous requests included), the account ("ACCOUNT",
 * "arn:aws:iam::ACCOUNT:root": every user of the tenant), a user
 * ("arn:aws:iam::ACCOUNT:user/NAME") or a canonical user ID. ACCOUNT is the
 * tenant's name or its id as 12 digits. Anything else — another tenant's
 * account or user, a name no user has, services — is one answer, "Invalid
 * principal in policy", so a policy never reveals another tenant's users.
 *
 * Actions: "s3:NAME" (case-insensitive, * and ? wildcards; a name without
 * wildcards must be an S3 action). Resources: "arn:aws:s3:::BUCKET" and
 * "arn:aws:s3:::BUCKET/KEY" patterns of this bucket (* and ?, case-sensitive).
 * Conditions: the String, Numeric, Date, Bool, IpAddress/NotIpAddress, Arn
 * and Null operators, each (but Null) also ...IfExists; a listed value list
 * matches when any value matches (a negated operator: when none does); a key
 * the request does not have fails the condition (a negated operator: holds;
 * ...IfExists: holds). Keys: aws:SourceIp, aws:SecureTransport,
 * aws:Referer, aws:UserAgent, aws:CurrentTime, aws:EpochTime, aws:username,
 * aws:userid, aws:PrincipalType, aws:PrincipalAccount, s3:prefix,
 * s3:delimiter, s3:max-keys, s3:ExistingObjectTag/KEY,
 * s3:RequestObjectTag/KEY, s3:x-amz-acl, s3:x-amz-content-sha256,
 * s3:x-amz-copy-source, s3:x-amz-metadata-directive, s3:signatureversion,
 * s3:authType; any other key, ForAnyValue:/ForAllValues: and Binary
 * operators are refused. Version 2012-10-17 expands ${aws:username},
 * ${aws:userid}, ${*}, ${?} and ${$} in resources and condition values.
 * Pure: works on bytes and callbacks (fuzzed by tests/fuzz/fuzz_s3_policy.c).
 * Thread: reentrant. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "s3_internal.h"

#define POLICY_MAX (20u << 10) /* AWS: 20 KB */
#define ARN_S3 "arn:aws:s3:::"

enum pol_op {
    OP_STR_EQ,
    OP_STR_NE,
    OP_STR_EQI,
    OP_STR_NEI,
    OP_STR_LIKE,
    OP_STR_NLIKE,
    OP_NUM_EQ,
    OP_NUM_NE,
    OP_NUM_LT,
    OP_NUM_LE,
    OP_NUM_GT,
    OP_NUM_GE,
    OP_DATE_EQ,
    OP_DATE_NE,
    OP_DATE_LT,
    OP_DATE_LE,
    OP_DATE_GT,
    OP_DATE_GE,
    OP_BOOL,
    OP_IP,
    OP_NIP,
    OP_ARN_EQ,
    OP_ARN_NE,
    OP_ARN_LIKE,
    OP_ARN_NLIKE,
    OP_NULL,
};

static const struct {
    const char *name;
    enum pol_op op;
} OPS[] = {
    {"StringEquals", OP_STR_EQ},
    {"StringNotEquals", OP_STR_NE},
    {"StringEqualsIgnoreCase", OP_STR_EQI},
    {"StringNotEqualsIgnoreCase", OP_STR_NEI},
    {"StringLike", OP_STR_LIKE},
    {"StringNotLike", OP_STR_NLIKE},
    {"NumericEquals", OP_NUM_EQ},
    {"NumericNotEquals", OP_NUM_NE},
    {"NumericLessThan", OP_NUM_LT},
    {"NumericLessThanEquals", OP_NUM_LE},
    {"NumericGreaterThan", OP_NUM_GT},
    {"NumericGreaterThanEquals", OP_NUM_GE},
    {"DateEquals", OP_DATE_EQ},
    {"DateNotEquals", OP_DATE_NE},
    {"DateLessThan", OP_DATE_LT},
    {"DateLessThanEquals", OP_DATE_LE},
    {"DateGreaterThan", OP_DATE_GT},
    {"DateGreaterThanEquals", OP_DATE_GE},
    {"Bool", OP_BOOL},
    {"IpAddress", OP_IP},
    {"NotIpAddress", OP_NIP},
    {"ArnEquals", OP_ARN_EQ},
    {"ArnNotEquals", OP_ARN_NE},
    {"ArnLike", OP_ARN_LIKE},
    {"ArnNotLike", OP_ARN_NLIKE},
    {"Null", OP_NULL},
};

/* Condition keys (lower case; a trailing '/' takes a tag key after it). */
static const char *const KEYS[] = {
    "aws:sourceip",
    "aws:securetransport",
    "aws:referer",
    "aws:useragent",
    "aws:currenttime",
    "aws:epochtime",
    "aws:username",
    "aws:userid",
    "aws:principaltype",
    "aws:principalaccount",
    "s3:prefix",
    "s3:delimiter",
    "s3:max-keys",
    "s3:existingobjecttag/",
    "s3:requestobjecttag/",
    "s3:x-amz-acl",
    "s3:x-amz-content-sha256",
    "s3:x-amz-copy-source",
    "s3:x-amz-metadata-directive",
    "s3:signatureversion",
    "s3:authtype",
    /* keys a request never has here (so only ...IfExists or negated ones hold) */
    "aws:sourcearn",
    "aws:sourceaccount",
    "aws:sourcevpc",
    "aws:sourcevpce",
    "aws:principalorgid",
    "aws:sourceowner",
};

/* S3 actions (without "s3:"), for names given without wildcards. */
static const char *const ACTIONS[] = {
    "AbortMultipartUpload",
    "BypassGovernanceRetention",
    "CreateBucket",
    "DeleteBucket",
    "DeleteBucketOwnershipControls",
    "DeleteBucketPolicy",
    "DeleteBucketWebsite",
    "DeleteObject",
    "DeleteObjectTagging",
    "DeleteObjectVersion",
    "DeleteObjectVersionTagging",
    "GetAccelerateConfiguration",
    "GetBucketAcl",
    "GetBucketCORS",
    "GetBucketLocation",
    "GetBucketLogging",
    "GetBucketNotification",
    "GetBucketObjectLockConfiguration",
    "GetBucketOwnershipControls",
    "GetBucketPolicy",
    "GetBucketPolicyStatus",
    "GetBucketPublicAccessBlock",
    "GetBucketRequestPayment",
    "GetBucketTagging",
    "GetBucketVersioning",
    "GetBucketWebsite",
    "GetEncryptionConfiguration",
    "GetLifecycleConfiguration",
    "GetObject",
    "GetObjectAcl",
    "GetObjectAttributes",
    "GetObjectLegalHold",
    "GetObjectRetention",
    "GetObjectTagging",
    "GetObjectTorrent",
    "GetObjectVersion",
    "GetObjectVersionAcl",
    "GetObjectVersionAttributes",
    "GetObjectVersionTagging",
    "GetReplicationConfiguration",
    "ListAllMyBuckets",
    "ListBucket",
    "ListBucketMultipartUploads",
    "ListBucketVersions",
    "ListMultipartUploadParts",
    "PutAccelerateConfiguration",
    "PutBucketAcl",
    "PutBucketCORS",
    "PutBucketLogging",
    "PutBucketNotification",
    "PutBucketObjectLockConfiguration",
    "PutBucketOwnershipControls",
    "PutBucketPolicy",
    "PutBucketPublicAccessBlock",
    "PutBucketRequestPayment",
    "PutBucketTagging",
    "PutBucketVersioning",
    "PutBucketWebsite",
    "PutEncryptionConfiguration",
    "PutLifecycleConfiguration",
    "PutObject",
    "PutObjectAcl",
    "PutObjectLegalHold",
    "PutObjectRetention",
    "PutObjectTagging",
    "PutObjectVersionAcl",
    "PutObjectVersionTagging",
    "PutReplicationConfiguration",
    "RestoreObject",
};

enum pr_kind { PR_NONE = 0, PR_ALL, PR_ACCOUNT, PR_USER, PR_UID };
struct pol_princ {
    enum pr_kind kind;
    uint64_t id; /* PR_USER: user id; PR_UID: uid */
};
struct pol_cond {
    enum pol_op op;
    bool ifexists;
    const char *key; /* lower case */
    const char **vals;
    size_t nvals;
};
struct pol_stmt {
    bool allow;
    bool not_principal, not_action, not_resource;
    struct pol_princ *pr;
    size_t npr;
    const char **act;
    size_t nact;
    const char **res;
    size_t nres;
    struct pol_cond *c;
    size_t nc;
};
struct s3_policy {
    struct pol_stmt *st;
    size_t n;
    bool vars; /* Version 2012-10-17: policy variables */
};

/* ---------------------------------------------------------------- matching */

/* Glob match of @p s against @p p: '*' any run, '?' one byte; case-folded when @p icase. */
static bool glob(const char *p, const char *s, bool icase)
{
    const char *star = NULL, *ss = NULL;
    while (*s) {
        char pc = *p, sc = *s;
        if (icase) {
            pc = (char)tolower((unsigned char)pc);
            sc = (char)tolower((unsigned char)sc);
        }
        if (*p == '*') {
            star = p++;
            ss = s;
        } else if (*p && (*p == '?' || pc == sc)) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++ss;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return !*p;
}

/* Expand the policy variables of @p v (2012-10-17) into the arena.
 * @return NULL when a variable has no value in this request (no match). */
static const char *expand(struct s3_arena *a, const char *v, const struct s3_policy_req *rq)
{
    if (!strstr(v, "${"))
        return v;
    size_t cap = strlen(v) + 1, n = 0;
    char *out = s3__arena_alloc(a, cap);
    for (const char *p = v; *p;) {
        const char *rep = NULL;
        const char *end = p[0] == '$' && p[1] == '{' ? strchr(p, '}') : NULL;
        if (!end) {
            out[n++] = *p++;
            continue;
        }
        size_t vl = (size_t)(end - p - 2);
        char name[64];
        if (vl >= sizeof(name))
            return NULL;
        memcpy(name, p + 2, vl);
        name[vl] = '\0';
        if (strcmp(name, "*") == 0 || strcmp(name, "?") == 0 || strcmp(name, "$") == 0)
            rep = name;
        else {
            for (char *c = name; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            rep = rq->value(rq->arg, name);
            if (!rep)
                return NULL;
        }
        size_t rl = strlen(rep);
        if (n + rl + strlen(end + 1) + 1 > cap) {
            size_t ncap = (n + rl + strlen(end + 1) + 1) * 2;
            char *no = s3__arena_alloc(a, ncap);
            memcpy(no, out, n);
            out = no;
            cap = ncap;
        }
        memcpy(out + n, rep, rl);
        n += rl;
        p = end + 1;
    }
    out[n] = '\0';
    return out;
}

static bool num_parse(const char *s, double *out)
{
    char *e = NULL;
    if (!*s)
        return false;
    *out = strtod(s, &e);
    return e && !*e;
}

/* ISO 8601 ("2024-01-02", "2024-01-02T03:04:05Z", fractions, "+hh:mm") or epoch seconds. */
static bool date_parse(const char *s, double *out)
{
    if (num_parse(s, out))
        return true;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &used) != 3)
        return false;
    const char *p = s + used;
    double frac = 0;
    int off = 0;
    if (*p == 'T') {
        int u2 = 0;
        if (sscanf(p + 1, "%2d:%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &u2) != 3)
            return false;
        p += 1 + u2;
        if (*p == '.') {
            char *e = NULL;
            frac = strtod(p, &e);
            p = e;
        }
        if (*p == 'Z')
            p++;
        else if (*p == '+' || *p == '-') {
            int hh = 0, mm = 0, u3 = 0;
            if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &u3) != 2)
                return false;
            off = (hh * 60 + mm) * 60 * (*p == '+' ? 1 : -1);
            p += 1 + u3;
        }
    }
    if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (double)timegm(&tm) - off + frac;
    return true;
}

/* Parse a CIDR range (or one address) @p net. @return false when malformed. */
static bool net_parse(const char *net, unsigned char n[16], int *fam, int *bits)
{
    char buf[64];
    const char *slash = strchr(net, '/');
    size_t nl = slash ? (size_t)(slash - net) : strlen(net);
    *bits = -1;
    if (nl >= sizeof(buf))
        return false;
    memcpy(buf, net, nl);
    buf[nl] = '\0';
    if (slash) {
        char *e = NULL;
        long b = strtol(slash + 1, &e, 10);
        if (!slash[1] || *e || b < 0 || b > 128)
            return false;
        *bits = (int)b;
    }
    *fam = strchr(buf, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(*fam, buf, n) != 1)
        return false;
    int len = *fam == AF_INET ? 4 : 16;
    if (*bits < 0)
        *bits = len * 8;
    return *bits <= len * 8;
}

/* Does address text @p ip lie in CIDR (or address) @p net? */
static bool ip_in(const char *ip, const char *net)
{
    unsigned char a[16], n[16];
    int fam, bits;
    if (!net_parse(net, n, &fam, &bits))
        return false;
    if (inet_pton(AF_INET, ip, a) == 1) {
        if (fam != AF_INET)
            return false;
    } else if (inet_pton(AF_INET6, ip, a) == 1) {
        static const unsigned char v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (fam == AF_INET) {
            if (memcmp(a, v4map, 12) != 0)
                return false;
            memmove(a, a + 12, 4);
        }
    } else {
        return false;
    }
    for (int i = 0; i < bits; i++) {
        int m = 0x80 >> (i % 8);
        if ((a[i / 8] & m) != (n[i / 8] & m))
            return false;
    }
    return true;
}

static bool negated(enum pol_op op)
{
    return op == OP_STR_NE || op == OP_STR_NEI || op == OP_STR_NLIKE || op == OP_NUM_NE ||
           op == OP_DATE_NE || op == OP_NIP || op == OP_ARN_NE || op == OP_ARN_NLIKE;
}

/* One request value against one policy value (the positive form of the operator). */
static bool value_match(enum pol_op op, const char *have, const char *want)
{
    double h, w;
    switch (op) {
    case OP_STR_EQ:
    case OP_STR_NE:
    case OP_ARN_EQ:
    case OP_ARN_NE:
        return strcmp(have, want) == 0;
    case OP_STR_EQI:
    case OP_STR_NEI:
        return strcasecmp(have, want) == 0;
    case OP_STR_LIKE:
    case OP_STR_NLIKE:
    case OP_ARN_LIKE:
    case OP_ARN_NLIKE:
        return glob(want, have, false);
    case OP_NUM_EQ:
    case OP_NUM_NE:
    case OP_NUM_LT:
    case OP_NUM_LE:
    case OP_NUM_GT:
    case OP_NUM_GE:
        if (!num_parse(have, &h) || !num_parse(want, &w))
            return false;
        return op == OP_NUM_LT   ? h < w
               : op == OP_NUM_LE ? h <= w
               : op == OP_NUM_GT ? h > w
               : op == OP_NUM_GE ? h >= w
                                 : h == w;
    case OP_DATE_EQ:
    case OP_DATE_NE:
    case OP_DATE_LT:
    case OP_DATE_LE:
    case OP_DATE_GT:
    case OP_DATE_GE:
        if (!date_parse(have, &h) || !date_parse(want, &w))
            return false;
        return op == OP_DATE_LT   ? h < w
               : op == OP_DATE_LE ? h <= w
               : op == OP_DATE_GT ? h > w
               : op == OP_DATE_GE ? h >= w
                                  : h == w;
    case OP_BOOL:
        return strcasecmp(have, want) == 0;
    case OP_IP:
    case OP_NIP:
        return ip_in(have, want);
    case OP_NULL:
        return false;
    }
    return false;
}

static bool cond_holds(struct s3_arena *a, const struct pol_cond *c, const struct s3_policy_req *rq,
                       bool vars)
{
    const char *have = rq->value(rq->arg, c->key);
    if (c->op == OP_NULL) {
        bool want_absent = c->nvals && strcasecmp(c->vals[0], "true") == 0;
        return want_absent == (have == NULL);
    }
    if (!have)
        return c->ifexists || negated(c->op);
    bool any = false;
    for (size_t i = 0; i < c->nvals && !any; i++) {
        const char *w = vars ? expand(a, c->vals[i], rq) : c->vals[i];
        any = w && value_match(c->op, have, w);
    }
    return negated(c->op) ? !any : any;
}

static bool princ_match(const struct pol_stmt *st, const struct s3_policy_req *rq)
{
    bool m = false;
    for (size_t i = 0; i < st->npr && !m; i++) {
        const struct pol_princ *p = &st->pr[i];
        switch (p->kind) {
        case PR_NONE:
            break;
        case PR_ALL:
            m = true;
            break;
        case PR_ACCOUNT:
            m = !rq->anon;
            break;
        case PR_USER:
            m = !rq->anon && rq->user == p->id;
            break;
        case PR_UID:
            m = !rq->anon && rq->uid == p->id;
            break;
        }
    }
    return st->not_principal ? !m : m;
}

static bool list_match(struct s3_arena *a, const char **pats, size_t n, const char *s, bool icase,
                       bool vars, const struct s3_policy_req *rq)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = vars ? expand(a, pats[i], rq) : pats[i];
        if (p && glob(p, s, icase))
            return true;
    }
    return false;
}

enum s3_pol s3__policy_eval(struct s3_arena *a, const struct s3_policy *pol,
                            const struct s3_policy_req *rq)
{
    bool allow = false;
    for (size_t i = 0; i < pol->n; i++) {
        const struct pol_stmt *st = &pol->st[i];
        if (!princ_match(st, rq))
            continue;
        if (list_match(a, st->act, st->nact, rq->action, true, false, rq) == st->not_action)
            continue;
        if (list_match(a, st->res, st->nres, rq->resource, false, pol->vars, rq) ==
            st->not_resource)
            continue;
        bool ok = true;
        for (size_t j = 0; j < st->nc && ok; j++)
            ok = cond_holds(a, &st->c[j], rq, pol->vars);
        if (!ok)
            continue;
        if (!st->allow)
            return S3_POL_DENY;
        if (!rq->public_off || !s3__policy_stmt_public(pol, i))
            allow = true;
    }
    return allow ? S3_POL_ALLOW : S3_POL_NONE;
}

/* ---------------------------------------------------------------- public */

bool s3__policy_stmt_public(const struct s3_policy *pol, size_t i)
{
    /* keys whose fixed values confine a statement to known callers (AWS's rule) */
    static const char *const FIXED[] = {
        "aws:sourcearn",   "aws:sourceaccount",  "aws:sourcevpc",        "aws:sourcevpce",
        "aws:sourceowner", "aws:principalorgid", "aws:principalaccount", "aws:userid"};
    const struct pol_stmt *st = &pol->st[i];
    if (!st->allow)
        return false;
    bool everyone = st->not_principal;
    for (size_t k = 0; k < st->npr; k++)
        everyone |= st->pr[k].kind == PR_ALL;
    if (!everyone)
        return false;
    for (size_t k = 0; k < st->nc; k++) {
        const struct pol_cond *c = &st->c[k];
        if (c->op == OP_IP && strcmp(c->key, "aws:sourceip") == 0) {
            bool open = false;
            for (size_t v = 0; v < c->nvals; v++)
                open |= strcmp(c->vals[v], "0.0.0.0/0") == 0 || strcmp(c->vals[v], "::/0") == 0;
            if (!open)
                return false;
        }
        if ((c->op == OP_STR_EQ || c->op == OP_ARN_EQ) && !c->ifexists)
            for (size_t f = 0; f < sizeof(FIXED) / sizeof(FIXED[0]); f++)
                if (strcmp(c->key, FIXED[f]) == 0)
                    return false;
    }
    return true;
}

bool s3__policy_public(const struct s3_policy *pol)
{
    for (size_t i = 0; i < pol->n; i++)
        if (s3__policy_stmt_public(pol, i))
            return true;
    return false;
}

/* ---------------------------------------------------------------- parsing */

struct pp {
    struct s3_arena *a;
    const struct s3_policy_env *env;
    const char *why;
};

static int bad(struct pp *p, const char *why)
{
    if (!p->why)
        p->why = why;
    return -EINVAL;
}

/* A string or a list of strings, as arena copies. */
static int strings(struct pp *p, json_t *v, const char ***out, size_t *n, const char *what)
{
    size_t cnt = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_string(v))
        return bad(p, s3__arena_printf(p->a, "%s must be a string or a list of strings", what));
    if (cnt == 0)
        return bad(p, s3__arena_printf(p->a, "%s must not be empty", what));
    const char **l = s3__arena_alloc(p->a, cnt * sizeof(*l));
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e))
            return bad(p, s3__arena_printf(p->a, "%s must be a string or a list of strings", what));
        l[i] = s3__arena_strndup(p->a, json_string_value(e), json_string_length(e));
    }
    *out = l;
    *n = cnt;
    return 0;
}

/* Is @p acct this tenant's account (its name, or its id as 12 digits)? */
static bool own_account(const struct pp *p, const char *acct, size_t len)
{
    char id[16];
    snprintf(id, sizeof(id), "%012u", p->env->tenant);
    return (len == 12 && memcmp(acct, id, 12) == 0) ||
           (p->env->tenant_name && strlen(p->env->tenant_name) == len &&
            strncasecmp(acct, p->env->tenant_name, len) == 0);
}

static int aws_principal(struct pp *p, const char *s, struct pol_princ *out)
{
    const char *invalid = "Invalid principal in policy";
    if (strcmp(s, "*") == 0) {
        out->kind = PR_ALL;
        return 0;
    }
    if (strncmp(s, "arn:aws:iam::", 13) != 0) {
        if (!own_account(p, s, strlen(s)))
            return bad(p, invalid);
        out->kind = PR_ACCOUNT;
        return 0;
    }
    const char *acct = s + 13, *colon = strchr(acct, ':');
    if (!colon || !own_account(p, acct, (size_t)(colon - acct)))
        return bad(p, invalid);
    const char *rest = colon + 1;
    if (strcmp(rest, "root") == 0) {
        out->kind = PR_ACCOUNT;
        return 0;
    }
    if (strncmp(rest, "user/", 5) != 0)
        return bad(p, invalid);
    const char *name = strrchr(rest, '/') + 1;
    uint64_t uid = 0;
    if (!*name || !p->env->user_by_name || p->env->user_by_name(p->env->arg, name, &uid) != 0)
        return p->env->stored ? 0 : bad(p, invalid); /* a user deleted since: matches nobody */
    out->kind = PR_USER;
    out->id = uid;
    return 0;
}

static int principal(struct pp *p, json_t *v, struct pol_stmt *st)
{
    const char *invalid = "Invalid principal in policy";
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "*") != 0)
            return bad(p, invalid);
        st->pr = s3__arena_alloc(p->a, sizeof(*st->pr));
        st->pr[0].kind = PR_ALL;
        st->npr = 1;
        return 0;
    }
    if (!json_is_object(v) || json_object_size(v) == 0)
        return bad(p, invalid);
    const char *k;
    json_t *e;
    size_t total = 0;
    json_object_foreach(v, k, e) total += json_is_array(e) ? json_array_size(e) : 1;
    st->pr = s3__arena_alloc(p->a, (total ? total : 1) * sizeof(*st->pr));
    json_object_foreach(v, k, e)
    {
        const char **l;
        size_t n;
        if (strings(p, e, &l, &n, "Principal"))
            return -EINVAL;
        for (size_t i = 0; i < n; i++) {
            struct pol_princ *pr = &st->pr[st->npr];
            if (strcmp(k, "AWS") == 0) {
                if (aws_principal(p, l[i], pr))
                    return -EINVAL;
            } else if (strcmp(k, "CanonicalUser") == 0) {
                uint32_t uid = 0;
                if (!p->env->uid_by_canonical ||
                    p->env->uid_by_canonical(p->env->arg, l[i], &uid) != 0) {
                    if (!p->env->stored)
                        return bad(p, invalid);
                    pr->kind = PR_NONE;
                } else {
                    pr->kind = PR_UID;
                    pr->id = uid;
                }
            } else {
                return bad(p, invalid);
            }
            st->npr++;
        }
    }
    return 0;
}

static bool known_action(const char *a)
{
    if (strcasecmp(a, "*") == 0)
        return true;
    if (strncasecmp(a, "s3:", 3) != 0)
        return false;
    if (strpbrk(a, "*?"))
        return true;
    for (size_t i = 0; i < sizeof(ACTIONS) / sizeof(ACTIONS[0]); i++)
        if (strcasecmp(a + 3, ACTIONS[i]) == 0)
            return true;
    return false;
}

/* Is resource pattern @p r one of this bucket's ("*", the bucket or a key in it)? */
static bool own_resource(const struct pp *p, const char *r)
{
    if (strcmp(r, "*") == 0)
        return true;
    if (strncmp(r, ARN_S3, strlen(ARN_S3)) != 0)
        return false;
    const char *b = r + strlen(ARN_S3);
    const char *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    char pat[300];
    if (bl == 0 || bl >= sizeof(pat))
        return false;
    memcpy(pat, b, bl);
    pat[bl] = '\0';
    return glob(pat, p->env->bucket, false);
}

static bool known_key(const char *k)
{
    for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
        size_t l = strlen(KEYS[i]);
        if (KEYS[i][l - 1] == '/' ? strncmp(k, KEYS[i], l) == 0 && k[l] : strcmp(k, KEYS[i]) == 0)
            return true;
    }
    return false;
}

static int conditions(struct pp *p, json_t *v, struct pol_stmt *st)
{
    if (!json_is_object(v))
        return bad(p, "Condition must be an object");
    const char *opname;
    json_t *keys;
    size_t total = 0;
    json_object_foreach(v, opname, keys) total += json_is_object(keys) ? json_object_size(keys) : 0;
    st->c = s3__arena_alloc(p->a, (total ? total : 1) * sizeof(*st->c));
    json_object_foreach(v, opname, keys)
    {
        if (strncmp(opname, "ForAnyValue:", 12) == 0 || strncmp(opname, "ForAllValues:", 13) == 0)
            return bad(p,
                       s3__arena_printf(p->a, "the set operator of %s is not supported", opname));
        size_t ol = strlen(opname);
        bool ifexists = ol > 8 && strcmp(opname + ol - 8, "IfExists") == 0;
        size_t base = ifexists ? ol - 8 : ol;
        int op = -1;
        for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++)
            if (strlen(OPS[i].name) == base && strncmp(OPS[i].name, opname, base) == 0)
                op = (int)OPS[i].op;
        if (op < 0 || (op == OP_NULL && ifexists))
            return bad(p, s3__arena_printf(p->a, "invalid condition operator %s", opname));
        if (!json_is_object(keys) || json_object_size(keys) == 0)
            return bad(p, s3__arena_printf(p->a, "%s must map condition keys to values", opname));
        const char *key;
        json_t *vals;
        json_object_foreach(keys, key, vals)
        {
            struct pol_cond *c = &st->c[st->nc];
            char *lk = s3__arena_strndup(p->a, key, strlen(key));
            /* keys are case-insensitive, but for the tag key after the slash */
            char *slash = strchr(lk, '/');
            for (char *q = lk; *q && q != slash; q++)
                *q = (char)tolower((unsigned char)*q);
            if (!known_key(lk))
                return bad(p,
                           s3__arena_printf(p->a, "Policy has an invalid condition key: %s", key));
            c->op = (enum pol_op)op;
            c->ifexists = ifexists;
            c->key = lk;
            size_t n = json_is_array(vals) ? json_array_size(vals) : 1;
            if (n == 0)
                return bad(p, "a condition needs at least one value");
            c->vals = s3__arena_alloc(p->a, n * sizeof(*c->vals));
            for (size_t i = 0; i < n; i++) {
                json_t *e = json_is_array(vals) ? json_array_get(vals, i) : vals;
                if (json_is_string(e))
                    c->vals[i] =
                        s3__arena_strndup(p->a, json_string_value(e), json_string_length(e));
                else if (json_is_boolean(e))
                    c->vals[i] = json_is_true(e) ? "true" : "false";
                else if (json_is_integer(e))
                    c->vals[i] = s3__arena_printf(p->a, "%lld", (long long)json_integer_value(e));
                else if (json_is_real(e))
                    c->vals[i] = s3__arena_printf(p->a, "%.17g", json_real_value(e));
                else
                    return bad(p, "condition values are strings, numbers or booleans");
            }
            c->nvals = n;
            for (size_t i = 0; (c->op == OP_IP || c->op == OP_NIP) && i < n; i++) {
                unsigned char nb[16];
                int fam, bits;
                if (!net_parse(c->vals[i], nb, &fam, &bits))
                    return bad(
                        p, s3__arena_printf(p->a, "invalid IP address or range %s", c->vals[i]));
            }
            st->nc++;
        }
    }
    return 0;
}

static int statement(struct pp *p, json_t *s, struct pol_stmt *st)
{
    if (!json_is_object(s))
        return bad(p, "a Statement must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (strcmp(k, "Sid") != 0 && strcmp(k, "Effect") != 0 && strcmp(k, "Principal") != 0 &&
            strcmp(k, "NotPrincipal") != 0 && strcmp(k, "Action") != 0 &&
            strcmp(k, "NotAction") != 0 && strcmp(k, "Resource") != 0 &&
            strcmp(k, "NotResource") != 0 && strcmp(k, "Condition") != 0)
            return bad(p, s3__arena_printf(p->a, "Unknown field %s", k));
    }
    json_t *eff = json_object_get(s, "Effect");
    if (!json_is_string(eff) || (strcmp(json_string_value(eff), "Allow") != 0 &&
                                 strcmp(json_string_value(eff), "Deny") != 0))
        return bad(p, "Effect must be Allow or Deny");
    st->allow = strcmp(json_string_value(eff), "Allow") == 0;
    json_t *pr = json_object_get(s, "Principal"), *npr = json_object_get(s, "NotPrincipal");
    if (!pr == !npr)
        return bad(p, "a statement needs one of Principal or NotPrincipal");
    st->not_principal = npr != NULL;
    if (principal(p, pr ? pr : npr, st))
        return -EINVAL;
    json_t *ac = json_object_get(s, "Action"), *nac = json_object_get(s, "NotAction");
    if (!ac == !nac)
        return bad(p, "a statement needs one of Action or NotAction");
    st->not_action = nac != NULL;
    if (strings(p, ac ? ac : nac, &st->act, &st->nact, "Action"))
        return -EINVAL;
    for (size_t i = 0; i < st->nact; i++)
        if (!known_action(st->act[i]))
            return bad(p, s3__arena_printf(p->a, "Policy has invalid action: %s", st->act[i]));
    json_t *re = json_object_get(s, "Resource"), *nre = json_object_get(s, "NotResource");
    if (!re == !nre)
        return bad(p, "a statement needs one of Resource or NotResource");
    st->not_resource = nre != NULL;
    if (strings(p, re ? re : nre, &st->res, &st->nres, "Resource"))
        return -EINVAL;
    for (size_t i = 0; i < st->nres; i++)
        if (!own_resource(p, st->res[i]))
            return bad(p, s3__arena_printf(p->a, "Policy has invalid resource: %s", st->res[i]));
    json_t *co = json_object_get(s, "Condition");
    if (co && conditions(p, co, st))
        return -EINVAL;
    return 0;
}

int s3__policy_parse(struct s3_arena *a, const char *doc, size_t len,
                     const struct s3_policy_env *env, struct s3_policy **out, const char **why)
{
    struct pp p = {a, env, NULL};
    json_error_t jerr;
    json_t *root = NULL;
    int rc = -EINVAL;
    struct s3_policy *pol = s3__arena_alloc(a, sizeof(*pol));
    *out = NULL;
    if (len == 0 || len > POLICY_MAX) {
        bad(&p, len ? "Policies must be at most 20 KB" : "the policy is empty");
        goto out;
    }
    root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        bad(&p, "Policies must be valid JSON and the first byte must be '{'");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "Version") != 0 && strcmp(k, "Id") != 0 && strcmp(k, "Statement") != 0) {
            bad(&p, s3__arena_printf(a, "Unknown field %s", k));
            goto out;
        }
    }
    json_t *ver = json_object_get(root, "Version");
    if (ver && (!json_is_string(ver) || (strcmp(json_string_value(ver), "2012-10-17") != 0 &&
                                         strcmp(json_string_value(ver), "2008-10-17") != 0))) {
        bad(&p, "The policy must contain a valid version string");
        goto out;
    }
    pol->vars = ver && strcmp(json_string_value(ver), "2012-10-17") == 0;
    json_t *sts = json_object_get(root, "Statement");
    if (!sts || (!json_is_array(sts) && !json_is_object(sts)) ||
        (json_is_array(sts) && json_array_size(sts) == 0)) {
        bad(&p, "Missing required field Statement");
        goto out;
    }
    pol->n = json_is_array(sts) ? json_array_size(sts) : 1;
    pol->st = s3__arena_alloc(a, pol->n * sizeof(*pol->st));
    for (size_t i = 0; i < pol->n; i++)
        if (statement(&p, json_is_array(sts) ? json_array_get(sts, i) : sts, &pol->st[i]))
            goto out;
    *out = pol;
    rc = 0;
out:
    json_decref(root);
    *why = p.why;
    return rc;
}
