/* SPDX-License-Identifier: Apache-2.0
 * s3_op_acl: the ACL operations — GetBucketAcl, PutBucketAcl, GetObjectAcl,
 * PutObjectAcl (of a version too: ?versionId) — over s3_acl.c's model (an ACL is the resource's
 * mode bits plus the grants S3 alone expresses), and the bucket settings kept in the bucket's
 * configuration blob that GET ?SUB answers (s3__bcfg_get).
 *
 * A PUT ?acl takes the ACL from x-amz-acl, x-amz-grant-* or an
 * AccessControlPolicy document (one of them), stores its grants and sets the
 * others' mode bits it implies in one transaction, so NFS sees the change as
 * a chmod. With the bucket's ObjectOwnership BucketOwnerEnforced, ACLs are
 * off: GET answers the owner's FULL_CONTROL and a PUT of anything else is
 * AccessControlListNotSupported (as AWS). BlockPublicAcls refuses an ACL that
 * grants AllUsers or AuthenticatedUsers anything (403).
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

bool s3__bcfg_get(struct s3_ctx *x, const char *sub)
{
    const struct s3_bcfg *cfg = &x->b.cfg;
    struct evbuffer *b = x->out.body;
    if (strcmp(sub, "acl") == 0) {
        s3__resp_xml(x);
        s3__acl_xml(x, b, &x->b.attr, cfg->ownership == S3_OWN_ENFORCED ? NULL : &cfg->acl, true,
                    x->b.attr.uid);
        return true;
    }
    return s3__bset_get(x, sub);
}

/* The ACL a PUT ?acl asks for: headers or a document (not both).
 * @return 0 (*given false: none at all, a 400 is set), or -1 responded. */
static int acl_of_put(struct s3_ctx *x, bool bucket, uint32_t owner, struct s3_acl *acl)
{
    bool given;
    size_t n = evbuffer_get_length(x->in.buf);
    if (s3__acl_from_req(x, bucket, x->b.attr.uid, acl, &given))
        return -1;
    if (given && n) {
        s3__resp_s3err(x, S3E_INVALID_REQUEST,
                       "specifying both an ACL in the body and ACL headers is not allowed");
        return -1;
    }
    if (!given && !n) {
        s3__resp_s3err(x, S3E_MALFORMED_ACL, "an ACL (headers or a document) is required");
        return -1;
    }
    if (n) {
        const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
        if (s3__acl_from_xml(x, doc, n, owner, acl))
            return -1;
    }
    for (size_t i = 0; i < acl->n; i++)
        if (acl->g[i].kind == S3_GT_USER && acl->g[i].uid == owner)
            acl->g[i].perm = 0; /* the owner's grant is its bits */
    const struct s3_bcfg *cfg = &x->b.cfg;
    bool grants = false;
    for (size_t i = 0; i < acl->n; i++)
        grants |= acl->g[i].perm != 0;
    if (cfg->ownership == S3_OWN_ENFORCED && (grants || s3__acl_mode(acl, bucket) & 07)) {
        s3__resp_s3err(x, S3E_ACL_NOT_SUPPORTED, NULL);
        return -1;
    }
    struct core_attr asked = {.mode = s3__acl_mode(acl, bucket)};
    if ((cfg->pab & S3_PAB_BLOCK_ACLS) && s3__acl_is_public(&asked, acl, bucket)) {
        s3__resp_err(x, -EACCES, "Access Denied (public ACLs are blocked on this bucket)");
        return -1;
    }
    return 0;
}

static void put_bucket_acl(struct s3_ctx *x)
{
    struct s3_acl acl;
    if (s3__op_bucket(x) || acl_of_put(x, true, x->b.attr.uid, &acl))
        return;
    x->b.cfg.acl = acl;
    if (s3__bcfg_save(x, (int)s3__acl_mode(&acl, true)) == 0)
        x->out.status = 200;
}

static void get_object_acl(struct s3_ctx *x)
{
    struct core_objinfo oi;
    struct s3_meta m;
    struct s3_acl acl;
    if (s3__op_object(x, &oi, &m))
        return;
    bool enforced = x->b.cfg.ownership == S3_OWN_ENFORCED;
    s3__acl_load(&acl, x->a, enforced ? NULL : &m);
    s3__resp_xml(x);
    if (oi.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", oi.vid);
    s3__acl_xml(x, x->out.body, &oi.attr, &acl, false, enforced ? x->b.attr.uid : oi.attr.uid);
}

static void put_object_acl(struct s3_ctx *x)
{
    struct core_objinfo oi;
    struct s3_meta m;
    struct s3_acl acl;
    if (s3__op_object(x, &oi, &m) || acl_of_put(x, false, oi.attr.uid, &acl))
        return;
    s3__acl_store(&m, x->a, &acl);
    void *blob = NULL;
    size_t len = 0;
    int rc = s3__meta_encode(&m, &blob, &len);
    struct core_principal sp = s3__super(x); /* decided: WRITE_ACP on this object */
    if (rc == 0)                             /* ?versionId: that version's */
        rc = core_version_set_meta_mode(x->core, &sp, x->b.ino, x->rt.key, x->rt.keylen,
                                        s3__req_param(x->req, "versionId"), blob, len,
                                        (int)s3__acl_mode(&acl, false));
    free(blob);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 200;
    if (oi.vid[0])
        s3__resp_hdr(x, "x-amz-version-id", oi.vid);
}

const struct s3_op s3_op_put_bucket_acl = {.name = "PutBucketAcl",
                                           .action = "s3:PutBucketAcl",
                                           .az = S3_AZ_B_WRITE_ACP,
                                           .body = S3_BODY_XML,
                                           .qos = QOS_META,
                                           .work = put_bucket_acl};
const struct s3_op s3_op_get_object_acl = {.name = "GetObjectAcl",
                                           .action = "s3:GetObjectAcl",
                                           .az = S3_AZ_O_READ_ACP,
                                           .qos = QOS_META,
                                           .work = get_object_acl};
const struct s3_op s3_op_put_object_acl = {.name = "PutObjectAcl",
                                           .action = "s3:PutObjectAcl",
                                           .az = S3_AZ_O_WRITE_ACP,
                                           .body = S3_BODY_XML,
                                           .qos = QOS_META,
                                           .work = put_object_acl};
