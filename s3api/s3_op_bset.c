/* SPDX-License-Identifier: Apache-2.0
 * s3_op_bset: the bucket settings kept in the bucket's configuration blob
 * (s3_authz.c) — bucket policy (Put/Get/DeleteBucketPolicy,
 * GetBucketPolicyStatus), public access block (Put/Get/DeletePublicAccessBlock)
 * and object ownership controls (Put/Get/DeleteBucketOwnershipControls).
 * Each is its bucket's owner's (or a tenant admin's, or who the policy
 * allows); a stored policy was validated against the bucket's tenant when it
 * was put (s3_policy.c), and BlockPublicPolicy refuses a public one.
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

static const char *const PAB_NAMES[4] = {"BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy",
                                         "RestrictPublicBuckets"};
static const char *const OWN_NAMES[3] = {"ObjectWriter", "BucketOwnerPreferred",
                                         "BucketOwnerEnforced"};

/* The request's body as a string in the arena (@p n its length). */
static const char *body(struct s3_ctx *x, size_t *n)
{
    *n = evbuffer_get_length(x->in.buf);
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)*n);
    return s3__arena_strndup(x->a, doc ? doc : "", *n);
}

/* ---------------------------------------------------------------- GET */

bool s3__bset_get(struct s3_ctx *x, const char *sub)
{
    const struct s3_bcfg *cfg = &x->b.cfg;
    struct evbuffer *b = x->out.body;
    if (strcmp(sub, "cors") == 0)
        return s3__cors_get(x);
    if (strcmp(sub, "policy") == 0 && cfg->policy) {
        x->out.status = 200;
        s3__resp_header(x, "Content-Type", "application/json");
        evbuffer_add(b, cfg->policy, cfg->policylen);
        return true;
    }
    if (strcmp(sub, "policyStatus") == 0 && cfg->policy) {
        struct s3_policy_env env;
        struct s3_policy *pol;
        const char *why;
        s3__policy_env(x, &x->b, true, &env);
        bool pub = s3__policy_parse(x->a, cfg->policy, cfg->policylen, &env, &pol, &why) == 0 &&
                   s3__policy_public(pol);
        s3__resp_xml(x);
        evbuffer_add_printf(b,
                            "<PolicyStatus xmlns=\"%s\"><IsPublic>%s</IsPublic></PolicyStatus>\n",
                            S3_XMLNS, pub ? "true" : "false");
        return true;
    }
    if (strcmp(sub, "publicAccessBlock") == 0 && s3__meta_find(&cfg->meta, S3_M_BCFG, "pab")) {
        s3__resp_xml(x);
        evbuffer_add_printf(b, "<PublicAccessBlockConfiguration xmlns=\"%s\">", S3_XMLNS);
        for (int i = 0; i < 4; i++)
            s3__xml_elem(b, PAB_NAMES[i], (cfg->pab >> i) & 1 ? "true" : "false");
        evbuffer_add_printf(b, "</PublicAccessBlockConfiguration>\n");
        return true;
    }
    if (strcmp(sub, "ownershipControls") == 0 && cfg->has_ownership) {
        s3__resp_xml(x);
        evbuffer_add_printf(b,
                            "<OwnershipControls xmlns=\"%s\"><Rule><ObjectOwnership>%s"
                            "</ObjectOwnership></Rule></OwnershipControls>\n",
                            S3_XMLNS, OWN_NAMES[cfg->ownership]);
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------- policy */

static void put_policy(struct s3_ctx *x)
{
    size_t n;
    if (s3__op_bucket(x))
        return;
    const char *doc = body(x, &n);
    struct s3_policy_env env;
    struct s3_policy *pol;
    const char *why = NULL;
    s3__policy_env(x, &x->b, false, &env);
    if (s3__policy_parse(x->a, doc, n, &env, &pol, &why) != 0) {
        s3__resp_s3err(x, S3E_MALFORMED_POLICY, why);
        return;
    }
    if ((x->b.cfg.pab & S3_PAB_BLOCK_POLICY) && s3__policy_public(pol)) {
        s3__resp_err(x, -EACCES, "Access Denied (public policies are blocked on this bucket)");
        return;
    }
    s3__bcfg_set(x, "policy", doc, n);
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 204;
}

static void delete_setting(struct s3_ctx *x, const char *name)
{
    if (s3__op_bucket(x))
        return;
    s3__bcfg_set(x, name, NULL, 0);
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 204;
}

static void delete_policy(struct s3_ctx *x)
{
    delete_setting(x, "policy");
}

/* ---------------------------------------------------------------- public access block */

/* An XML boolean element: @return 0/1, or -1 when malformed. */
static int xml_bool(const struct s3_xnode *n)
{
    if (strcasecmp(n->text, "true") == 0)
        return 1;
    if (strcasecmp(n->text, "false") == 0)
        return 0;
    return -1;
}

static void put_pab(struct s3_ctx *x)
{
    size_t n;
    struct s3_xnode *root = NULL;
    if (s3__op_bucket(x))
        return;
    const char *doc = body(x, &n);
    if (!n || s3__xml_parse(x->a, doc, n, &root) ||
        strcmp(root->name, "PublicAccessBlockConfiguration") != 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    char v[5] = "0000";
    for (struct s3_xnode *c = root->child; c; c = c->next) {
        int i = 0;
        while (i < 4 && strcmp(c->name, PAB_NAMES[i]) != 0)
            i++;
        int b = i < 4 ? xml_bool(c) : -1;
        if (b < 0) {
            s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
            return;
        }
        v[i] = b ? '1' : '0';
    }
    s3__bcfg_set(x, "pab", v, 4);
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 200;
}

static void delete_pab(struct s3_ctx *x)
{
    delete_setting(x, "pab");
}

/* ---------------------------------------------------------------- ownership controls */

static void put_ownership(struct s3_ctx *x)
{
    size_t n;
    struct s3_xnode *root = NULL, *rule, *oo;
    if (s3__op_bucket(x))
        return;
    const char *doc = body(x, &n);
    if (!n || s3__xml_parse(x->a, doc, n, &root) || strcmp(root->name, "OwnershipControls") != 0 ||
        !(rule = s3__xml_child(root, "Rule")) || !(oo = s3__xml_child(rule, "ObjectOwnership"))) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    int own = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(oo->text, OWN_NAMES[i]) == 0)
            own = i;
    if (own < 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    /* AWS refuses to turn ACLs off while the bucket's ACL grants anything beyond its owner */
    if (own == S3_OWN_ENFORCED && (x->b.cfg.acl.n || (x->b.attr.mode & 077))) {
        bool grants = x->b.attr.mode & 077;
        for (size_t i = 0; i < x->b.cfg.acl.n; i++)
            grants |= x->b.cfg.acl.g[i].perm != 0;
        if (grants) {
            s3__resp_s3err(x, S3E_INVALID_BUCKET_ACL_OWNERSHIP,
                           "the bucket's ACL grants more than its owner's FULL_CONTROL: make it "
                           "private before BucketOwnerEnforced");
            return;
        }
    }
    s3__bcfg_set(x, "ownership", OWN_NAMES[own], strlen(OWN_NAMES[own]));
    if (s3__bcfg_save(x, -1) == 0)
        x->out.status = 200;
}

static void delete_ownership(struct s3_ctx *x)
{
    delete_setting(x, "ownership");
}

#define BSET_OP(var, nm, act, fn, bodymode)                                                        \
    const struct s3_op var = {.name = nm,                                                          \
                              .action = act,                                                       \
                              .az = S3_AZ_B_OWNER,                                                 \
                              .body = bodymode,                                                    \
                              .qos = QOS_META,                                                     \
                              .work = fn}
BSET_OP(s3_op_put_bucket_policy, "PutBucketPolicy", "s3:PutBucketPolicy", put_policy, S3_BODY_XML);
BSET_OP(s3_op_delete_bucket_policy, "DeleteBucketPolicy", "s3:DeleteBucketPolicy", delete_policy,
        S3_BODY_NONE);
BSET_OP(s3_op_put_pab, "PutPublicAccessBlock", "s3:PutBucketPublicAccessBlock", put_pab,
        S3_BODY_XML);
BSET_OP(s3_op_delete_pab, "DeletePublicAccessBlock", "s3:PutBucketPublicAccessBlock", delete_pab,
        S3_BODY_NONE);
BSET_OP(s3_op_put_ownership, "PutBucketOwnershipControls", "s3:PutBucketOwnershipControls",
        put_ownership, S3_BODY_XML);
BSET_OP(s3_op_delete_ownership, "DeleteBucketOwnershipControls", "s3:PutBucketOwnershipControls",
        delete_ownership, S3_BODY_NONE);
