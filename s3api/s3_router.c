/* SPDX-License-Identifier: Apache-2.0
 * s3_router: from an HTTP request to an S3 operation.
 *
 * Addressing: virtual-host style when the Host header is "<bucket>.<domain>"
 * for the configured domain, else path style "/<bucket>/<key>". Then the
 * method and the subresource parameters (?uploads, ?tagging, ...) pick the
 * operation. Subresources that are not built answer 501 NotImplemented naming
 * the subresource; the bucket-configuration reads that have a sensible
 * "nothing configured" answer go to s3_op_bucket_config
 * (docs/s3-compatibility.md lists every case).
 * Pure: works on a parsed request only (fuzzed by tests/fuzz/fuzz_http_req.c).
 * Thread: reentrant. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "s3_internal.h"
#include "srv_err.h"

/* Bucket configuration subresources whose GET answers a default or a
 * "not configured" error (see s3_op_bucket_config). */
static const char *const BUCKET_CONFIG_GET[] = {
    "versioning",
    "acl",
    "policy",
    "policyStatus",
    "lifecycle",
    "cors",
    "encryption",
    "object-lock",
    "website",
    "logging",
    "notification",
    "replication",
    "ownershipControls",
    "publicAccessBlock",
    "accelerate",
    "requestPayment",
    "tagging",
    "analytics",
    "metrics",
    "inventory",
    "intelligent-tiering",
    "session",
    "metadataTable",
    "metadataConfiguration",
    NULL,
};

/* Subresources we recognise on objects but do not implement. */
static const char *const OBJECT_UNSUPPORTED[] = {
    "torrent", "restore", "select", "renameObject", NULL,
};

static const char *find_sub(const struct s3_req *r, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (s3__req_has_param(r, list[i]))
            return list[i];
    return NULL;
}

static void unsupported(struct s3_arena *a, struct s3_route *out, const char *what)
{
    out->err = SRV_ENOTSUPP;
    out->errmsg = s3__arena_printf(a, "%s is not implemented by this server", what);
}

static void route_service(struct s3_arena *a, const struct s3_req *r, struct s3_route *out)
{
    if (strcmp(r->method, "GET") == 0) {
        out->op = &s3_op_list_buckets;
        return;
    }
    out->err = -EPERM;
    out->errmsg = "the specified method is not allowed against this resource";
}

/* PUT (@p put) or DELETE of a bucket setting that is built, or NULL. */
static const struct s3_op *bucket_setting(const struct s3_req *r, bool put)
{
    static const struct {
        const char *sub;
        const struct s3_op *put, *del;
    } S[] = {
        {"acl", &s3_op_put_bucket_acl, NULL},
        {"policy", &s3_op_put_bucket_policy, &s3_op_delete_bucket_policy},
        {"publicAccessBlock", &s3_op_put_pab, &s3_op_delete_pab},
        {"ownershipControls", &s3_op_put_ownership, &s3_op_delete_ownership},
        {"cors", &s3_op_put_cors, &s3_op_delete_cors},
        {"versioning", &s3_op_put_versioning, NULL},
        {"object-lock", &s3_op_put_objlock, NULL},
        {"lifecycle", &s3_op_put_lifecycle, &s3_op_delete_lifecycle},
    };
    for (size_t i = 0; i < sizeof(S) / sizeof(S[0]); i++)
        if (s3__req_has_param(r, S[i].sub))
            return put ? S[i].put : S[i].del;
    return NULL;
}

static void route_bucket(struct s3_arena *a, const struct s3_req *r, struct s3_route *out)
{
    const char *m = r->method;
    const char *sub;
    if (strcmp(m, "GET") == 0) {
        if (s3__req_has_param(r, "location"))
            out->op = &s3_op_bucket_location;
        else if (s3__req_has_param(r, "uploads"))
            out->op = &s3_op_mpu_list_uploads;
        else if (s3__req_has_param(r, "versions"))
            out->op = &s3_op_list_versions;
        else if (s3__req_has_param(r, "versioning"))
            out->op = &s3_op_get_versioning;
        else if (s3__req_has_param(r, "object-lock"))
            out->op = &s3_op_get_objlock;
        else if (s3__req_has_param(r, "lifecycle"))
            out->op = &s3_op_get_lifecycle;
        else if ((sub = find_sub(r, BUCKET_CONFIG_GET)) != NULL) {
            out->op = &s3_op_bucket_config;
            out->sub = sub;
        } else if (s3__req_has_param(r, "list-type")) {
            const char *lt = s3__req_param(r, "list-type");
            if (strcmp(lt, "2") == 0)
                out->op = &s3_op_list_objects_v2;
            else {
                out->err = -EINVAL;
                out->errmsg = "list-type must be 2";
            }
        } else
            out->op = &s3_op_list_objects;
        return;
    }
    if (strcmp(m, "HEAD") == 0) {
        out->op = &s3_op_head_bucket;
        return;
    }
    if (strcmp(m, "PUT") == 0) {
        if ((out->op = bucket_setting(r, true)) != NULL)
            return;
        if ((sub = find_sub(r, BUCKET_CONFIG_GET)) != NULL)
            unsupported(a, out, s3__arena_printf(a, "PUT Bucket ?%s", sub));
        else
            out->op = &s3_op_create_bucket;
        return;
    }
    if (strcmp(m, "DELETE") == 0) {
        if ((out->op = bucket_setting(r, false)) != NULL)
            return;
        if ((sub = find_sub(r, BUCKET_CONFIG_GET)) != NULL)
            unsupported(a, out, s3__arena_printf(a, "DELETE Bucket ?%s", sub));
        else
            out->op = &s3_op_delete_bucket;
        return;
    }
    if (strcmp(m, "OPTIONS") == 0) {
        out->op = &s3_op_cors_preflight;
        return;
    }
    if (strcmp(m, "POST") == 0) {
        const char *ct = s3__req_header(r, "content-type");
        if (s3__req_has_param(r, "delete"))
            out->op = &s3_op_delete_objects;
        else if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0)
            out->op = &s3_op_post_object;
        else
            unsupported(a, out, "POST on a bucket other than a multipart/form-data upload");
        return;
    }
    out->err = -EPERM;
    out->errmsg = "the specified method is not allowed against this resource";
}

static void route_object(struct s3_arena *a, const struct s3_req *r, struct s3_route *out)
{
    const char *m = r->method;
    const char *sub = find_sub(r, OBJECT_UNSUPPORTED);
    if (sub) {
        unsupported(a, out, s3__arena_printf(a, "%s Object ?%s", m, sub));
        return;
    }
    bool upload_id = s3__req_has_param(r, "uploadId");
    if (strcmp(m, "GET") == 0) {
        if (upload_id)
            out->op = &s3_op_mpu_list_parts;
        else if (s3__req_has_param(r, "tagging"))
            out->op = &s3_op_get_tagging;
        else if (s3__req_has_param(r, "acl"))
            out->op = &s3_op_get_object_acl;
        else if (s3__req_has_param(r, "attributes"))
            out->op = &s3_op_get_attributes;
        else if (s3__req_has_param(r, "retention"))
            out->op = &s3_op_get_retention;
        else if (s3__req_has_param(r, "legal-hold"))
            out->op = &s3_op_get_legal_hold;
        else
            out->op = &s3_op_get_object;
        return;
    }
    if (strcmp(m, "HEAD") == 0) {
        out->op = &s3_op_head_object;
        return;
    }
    if (strcmp(m, "PUT") == 0) {
        bool copy = s3__req_header(r, "x-amz-copy-source") != NULL;
        if (s3__req_has_param(r, "partNumber") || upload_id) {
            if (!s3__req_has_param(r, "partNumber") || !upload_id) {
                out->err = -EINVAL;
                out->errmsg = "UploadPart needs both partNumber and uploadId";
                return;
            }
            out->op = copy ? &s3_op_mpu_upload_part_copy : &s3_op_mpu_upload_part;
        } else if (s3__req_has_param(r, "tagging"))
            out->op = &s3_op_put_tagging;
        else if (s3__req_has_param(r, "acl"))
            out->op = &s3_op_put_object_acl;
        else if (s3__req_has_param(r, "retention"))
            out->op = &s3_op_put_retention;
        else if (s3__req_has_param(r, "legal-hold"))
            out->op = &s3_op_put_legal_hold;
        else
            out->op = copy ? &s3_op_copy_object : &s3_op_put_object;
        return;
    }
    if (strcmp(m, "DELETE") == 0) {
        if (upload_id)
            out->op = &s3_op_mpu_abort;
        else if (s3__req_has_param(r, "tagging"))
            out->op = &s3_op_delete_tagging;
        else
            out->op = &s3_op_delete_object;
        return;
    }
    if (strcmp(m, "OPTIONS") == 0) {
        out->op = &s3_op_cors_preflight;
        return;
    }
    if (strcmp(m, "POST") == 0) {
        if (s3__req_has_param(r, "uploads"))
            out->op = &s3_op_mpu_create;
        else if (upload_id)
            out->op = &s3_op_mpu_complete;
        else
            unsupported(a, out, "POST Object without ?uploads or ?uploadId");
        return;
    }
    out->err = -EPERM;
    out->errmsg = "the specified method is not allowed against this resource";
}

void s3__route_req(struct s3_arena *a, const struct s3_req *r, const char *domain,
                   struct s3_route *out)
{
    memset(out, 0, sizeof(*out));
    size_t plen = 0;
    const char *raw = r->raw_path ? r->raw_path : "";
    char *path = s3__url_decode(a, raw, strlen(raw), &plen);
    if (!path || path[0] != '/' || memchr(path, '\0', plen)) {
        out->err = -EINVAL;
        out->errmsg = "the request path is malformed";
        return;
    }
    const char *host = s3__req_header(r, "host");
    if (domain && host) {
        size_t hl = strlen(host), dl = strlen(domain);
        const char *colon = strrchr(host, ':');
        if (colon && !strchr(host, ']'))
            hl = (size_t)(colon - host);
        if (hl > dl + 1 && host[hl - dl - 1] == '.' &&
            strncasecmp(host + hl - dl, domain, dl) == 0) {
            out->vhost = true;
            out->bucketlen = hl - dl - 1;
            out->bucket = s3__arena_strndup(a, host, out->bucketlen);
            for (char *c = out->bucket; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                    *c = (char)(*c - 'A' + 'a');
            if (plen > 1) {
                out->key = path + 1;
                out->keylen = plen - 1;
            }
        }
    }
    if (!out->vhost && plen > 1) {
        char *b = path + 1;
        char *slash = memchr(b, '/', plen - 1);
        out->bucketlen = slash ? (size_t)(slash - b) : plen - 1;
        out->bucket = s3__arena_strndup(a, b, out->bucketlen);
        if (slash && (size_t)(slash - path) + 1 < plen) {
            out->key = slash + 1;
            out->keylen = plen - (size_t)(slash - path) - 1;
        }
        if (out->bucketlen == 0) {
            out->err = -EINVAL;
            out->errmsg = "the request path is malformed (empty bucket name)";
            return;
        }
    }
    if (out->key && out->keylen > CORE_KEY_MAX) {
        out->err = -ENAMETOOLONG;
        out->errmsg = "your key is too long";
        return;
    }
    if (!out->bucket)
        route_service(a, r, out);
    else if (!out->key)
        route_bucket(a, r, out);
    else
        route_object(a, r, out);
}
