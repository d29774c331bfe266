/* SPDX-License-Identifier: Apache-2.0
 * s3_op_bucket: service and bucket operations — ListBuckets, CreateBucket,
 * DeleteBucket, HeadBucket, GetBucketLocation, ListObjects (V1, V2) and the
 * defaults of bucket configuration subresources (ListObjectVersions and the
 * versioning ones are in s3_op_version.c).
 *
 * Listings come from the core's ordered key index (core_list), so keys come
 * back in S3 (binary UTF-8) order with prefix/delimiter roll-up. A page that
 * ends on a common prefix resumes after every key under it: the resume point is
 * the prefix followed by 0xFF, a byte that never occurs in UTF-8 keys.
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

int s3__op_bucket(struct s3_ctx *x)
{
    struct core_attr attr;
    int rc = core_bucket_lookup(x->core, &x->p, x->rt.bucket, x->rt.bucketlen, &attr);
    if (rc == -ENOENT || rc == SRV_ESTALE)
        rc = SRV_ENOBUCKET;
    if (rc) {
        s3__resp_err(x, rc, rc == SRV_ENOBUCKET ? "the specified bucket does not exist" : NULL);
        return rc;
    }
    x->bucket_ino = attr.ino;
    return 0;
}

void s3__owner_xml(struct s3_ctx *x, struct evbuffer *b)
{
    evbuffer_add_printf(
        b, "<Owner><ID>%u.%" PRIu64 "</ID><DisplayName>%u.%" PRIu64 "</DisplayName></Owner>",
        x->p.tenant, x->p.user, x->p.tenant, x->p.user);
}

/* ---------------------------------------------------------------- ListBuckets */

static int bucket_cb(void *arg, const char *name, size_t namelen, const struct core_attr *attr)
{
    struct s3_ctx *x = arg;
    char iso[25];
    s3__iso_date_fmt(attr->btime.tv_sec ? &attr->btime : &attr->ctime, iso);
    evbuffer_add_printf(x->out.body, "<Bucket>");
    s3__xml_elemn(x->out.body, "Name", name, namelen);
    s3__xml_elem(x->out.body, "CreationDate", iso);
    evbuffer_add_printf(x->out.body, "</Bucket>");
    return 0;
}

static void list_buckets(struct s3_ctx *x)
{
    s3__resp_xml(x);
    evbuffer_add_printf(x->out.body, "<ListAllMyBucketsResult xmlns=\"%s\">", S3_XMLNS);
    s3__owner_xml(x, x->out.body);
    evbuffer_add_printf(x->out.body, "<Buckets>");
    int rc = core_bucket_list(x->core, &x->p, bucket_cb, x);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    evbuffer_add_printf(x->out.body, "</Buckets></ListAllMyBucketsResult>\n");
}

/* ---------------------------------------------------------------- bucket CRUD */

static void create_bucket(struct s3_ctx *x)
{
    size_t n = evbuffer_get_length(x->in.buf);
    if (n) {
        struct s3_xnode *root;
        const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
        if (s3__xml_parse(x->a, doc, n, &root) || strcmp(root->name, "CreateBucketConfiguration")) {
            s3__resp_err(x, SRV_EBADREQ, "the XML you provided was not well-formed");
            return;
        }
    }
    const char *acl = s3__req_header(x->req, "x-amz-acl");
    if (acl && strcmp(acl, "private") != 0) {
        s3__resp_err(x, SRV_ENOTSUPP, "only the canned ACL 'private' is supported");
        return;
    }
    /* object lock at creation: any spelling of true (botocore sends "True") */
    const char *olock = s3__req_header(x->req, "x-amz-bucket-object-lock-enabled");
    bool lock = olock && strcasecmp(olock, "true") == 0;
    if (olock && !lock && strcasecmp(olock, "false") != 0) {
        s3__resp_err(x, -EINVAL, "x-amz-bucket-object-lock-enabled must be true or false");
        return;
    }
    struct core_attr attr;
    int rc = core_bucket_create(x->core, &x->p, x->rt.bucket, x->rt.bucketlen, &attr);
    if (rc == 0 && lock) {
        /* versioning and object lock on for good; a bucket that cannot have them goes */
        struct core_bucket_vcfg vc = {.versioning = CORE_VERS_ENABLED};
        rc = core_bucket_objlock_set(x->core, &x->p, attr.ino, &vc);
        if (rc)
            core_bucket_delete(x->core, &x->p, x->rt.bucket, x->rt.bucketlen);
    }
    if (rc == -EEXIST) {
        s3__resp_err(x, rc,
                     "your previous request to create the named bucket succeeded and you "
                     "already own it");
        return;
    }
    if (rc == SRV_EBADNAME || rc == -EINVAL || rc == -ENAMETOOLONG) {
        s3__resp_err(x, SRV_EBADNAME, "the specified bucket is not valid");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 200;
    s3__resp_header(x, "Location", "/%s", x->rt.bucket);
}

static void delete_bucket(struct s3_ctx *x)
{
    int rc = core_bucket_delete(x->core, &x->p, x->rt.bucket, x->rt.bucketlen);
    if (rc == -ENOENT)
        rc = SRV_ENOBUCKET;
    if (rc == -ENOTEMPTY) {
        s3__resp_err(x, rc, "the bucket you tried to delete is not empty");
        return;
    }
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    x->out.status = 204;
}

static void head_bucket(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    x->out.status = 200;
    s3__resp_header(x, "x-amz-bucket-region", "%s", x->region);
}

static void bucket_location(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    s3__resp_xml(x);
    /* us-east-1 is reported as an empty constraint, as AWS does */
    const char *region = x->region;
    evbuffer_add_printf(x->out.body, "<LocationConstraint xmlns=\"%s\">", S3_XMLNS);
    if (strcmp(region, "us-east-1") != 0)
        s3__xml_esc(x->out.body, region, strlen(region));
    evbuffer_add_printf(x->out.body, "</LocationConstraint>\n");
}

/* Defaults for configuration subresources: what an unconfigured AWS bucket answers. */
static void bucket_config(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    const char *s = x->rt.sub;
    struct evbuffer *b = x->out.body;
    static const struct {
        const char *sub;
        enum s3_err err;
    } missing[] = {
        {"policy", S3E_NO_SUCH_BUCKET_POLICY},
        {"policyStatus", S3E_NO_SUCH_BUCKET_POLICY},
        {"cors", S3E_NO_SUCH_CORS},
        {"encryption", S3E_NO_SSE_CONFIG},
        {"website", S3E_NO_SUCH_WEBSITE},
        {"replication", S3E_NO_REPLICATION_CONFIG},
        {"ownershipControls", S3E_NO_OWNERSHIP_CONTROLS},
        {"publicAccessBlock", S3E_NO_PUBLIC_ACCESS_BLOCK},
        {"tagging", S3E_NO_SUCH_TAG_SET},
    };
    for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++)
        if (strcmp(s, missing[i].sub) == 0) {
            s3__resp_s3err(x, missing[i].err, NULL);
            return;
        }
    s3__resp_xml(x);
    if (strcmp(s, "acl") == 0) {
        evbuffer_add_printf(b, "<AccessControlPolicy xmlns=\"%s\">", S3_XMLNS);
        s3__owner_xml(x, b);
        evbuffer_add_printf(b,
                            "<AccessControlList><Grant><Grantee "
                            "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                            "xsi:type=\"CanonicalUser\"><ID>%u.%" PRIu64 "</ID></Grantee>"
                            "<Permission>FULL_CONTROL</Permission></Grant></AccessControlList>"
                            "</AccessControlPolicy>\n",
                            x->p.tenant, x->p.user);
    } else if (strcmp(s, "logging") == 0)
        evbuffer_add_printf(b, "<BucketLoggingStatus xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "notification") == 0)
        evbuffer_add_printf(b, "<NotificationConfiguration xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "accelerate") == 0)
        evbuffer_add_printf(b, "<AccelerateConfiguration xmlns=\"%s\"/>\n", S3_XMLNS);
    else if (strcmp(s, "requestPayment") == 0)
        evbuffer_add_printf(b,
                            "<RequestPaymentConfiguration xmlns=\"%s\"><Payer>BucketOwner"
                            "</Payer></RequestPaymentConfiguration>\n",
                            S3_XMLNS);
    else
        s3__resp_err(x, SRV_ENOTSUPP,
                     s3__arena_printf(x->a, "GET Bucket ?%s is not implemented", s));
}

/* ---------------------------------------------------------------- listings */

enum list_kind { L_V1, L_V2 };

struct list_state {
    struct s3_ctx *x;
    enum list_kind kind;
    bool url; /* encoding-type=url */
    bool owner;
    struct evbuffer *contents, *prefixes;
    const char *after;
    size_t afterlen;
    uint32_t count;
    char *last; /* last key or prefix given */
    size_t lastlen;
    bool last_is_prefix;
};

void s3__list_text(bool url, struct evbuffer *b, const char *tag, const char *s, size_t n)
{
    evbuffer_add_printf(b, "<%s>", tag);
    if (url)
        s3__url_encode_buf(b, s, n, true);
    else
        s3__xml_esc(b, s, n);
    evbuffer_add_printf(b, "</%s>", tag);
}

static int list_cb(void *arg, const struct core_listent *e)
{
    struct list_state *st = arg;
    struct s3_ctx *x = st->x;
    /* belt and braces: never repeat what the previous page ended on */
    if (st->after && e->keylen <= st->afterlen && memcmp(e->key, st->after, e->keylen) == 0 &&
        e->keylen == st->afterlen)
        return 0;
    st->count++;
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
    char iso[25];
    s3__iso_date_fmt(&oi->attr.mtime, iso);
    bool dir = oi->attr.type == CORE_DIR;
    struct evbuffer *b = st->contents;
    evbuffer_add_printf(b, "<Contents>");
    s3__list_text(st->url, b, "Key", e->key, e->keylen);
    evbuffer_add_printf(b,
                        "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
                        "<Size>%" PRIu64 "</Size>",
                        iso, dir || !oi->etag[0] ? S3_EMPTY_MD5 : oi->etag,
                        dir ? 0 : oi->attr.size);
    if (st->owner)
        s3__owner_xml(x, b);
    evbuffer_add_printf(b, "<StorageClass>STANDARD</StorageClass>");
    evbuffer_add_printf(b, "</Contents>");
    return 0;
}

int s3__parse_max_keys(struct s3_ctx *x, uint32_t *out)
{
    const char *v = s3__req_param(x->req, "max-keys");
    *out = 1000;
    if (!v)
        return 0;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!*v || !end || *end || n < 0) {
        s3__resp_err(x, -EINVAL, "max-keys must be a non-negative integer");
        return -1;
    }
    *out = n > 1000 ? 1000 : (uint32_t)n;
    return 0;
}

static void list_common(struct s3_ctx *x, enum list_kind kind)
{
    const struct s3_req *r = x->req;
    struct list_state st = {.x = x, .kind = kind};
    const char *prefix = s3__req_param(r, "prefix");
    const char *delim = s3__req_param(r, "delimiter");
    const char *enc = s3__req_param(r, "encoding-type");
    uint32_t max;
    if (enc && strcmp(enc, "url") != 0) {
        s3__resp_err(x, -EINVAL, "invalid encoding type");
        return;
    }
    st.url = enc != NULL;
    if (s3__parse_max_keys(x, &max))
        return;
    if (s3__op_bucket(x))
        return;
    const char *after = NULL, *token = NULL;
    if (kind == L_V1) {
        after = s3__req_param(r, "marker");
        st.owner = true;
    } else {
        token = s3__req_param(r, "continuation-token");
        const char *fo = s3__req_param(r, "fetch-owner");
        st.owner = fo && strcmp(fo, "true") == 0;
        if (token) {
            size_t tl = strlen(token);
            unsigned char *dec = s3__arena_alloc(x->a, tl + 4);
            long n = s3__b64_decode(token, tl, dec);
            if (n <= 0) {
                s3__resp_err(x, -EINVAL, "the continuation token provided is incorrect");
                return;
            }
            after = s3__arena_strndup(x->a, (const char *)dec, (size_t)n);
        } else {
            after = s3__req_param(r, "start-after");
        }
    }
    if (after && !*after)
        after = NULL;
    size_t afterlen = after ? strlen(after) : 0;
    const char *core_after = after;
    size_t core_afterlen = afterlen;
    if (after && delim && *delim) {
        size_t dl = strlen(delim);
        size_t pl = prefix ? strlen(prefix) : 0;
        if (afterlen >= dl && afterlen >= pl + dl &&
            memcmp(after + afterlen - dl, delim, dl) == 0 &&
            (!prefix || strncmp(after, prefix, pl) == 0)) {
            char *skip = s3__arena_alloc(x->a, afterlen + 2);
            memcpy(skip, after, afterlen);
            skip[afterlen] = (char)0xFF;
            core_after = skip;
            core_afterlen = afterlen + 1;
        }
    }
    st.after = after;
    st.afterlen = afterlen;
    st.contents = evbuffer_new();
    st.prefixes = evbuffer_new();
    bool truncated = false;
    int rc = 0;
    if (max > 0)
        rc = core_list(x->core, &x->p, x->bucket_ino, prefix, prefix ? strlen(prefix) : 0,
                       core_after, core_afterlen, delim && *delim ? delim : NULL,
                       delim ? strlen(delim) : 0, max, list_cb, &st, &truncated);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        goto out;
    }
    struct evbuffer *b = x->out.body;
    s3__resp_xml(x);
    evbuffer_add_printf(b, "<ListBucketResult xmlns=\"%s\">", S3_XMLNS);
    s3__xml_elem(b, "Name", x->rt.bucket);
    s3__list_text(st.url, b, "Prefix", prefix ? prefix : "", prefix ? strlen(prefix) : 0);
    if (kind == L_V1) {
        s3__list_text(st.url, b, "Marker", after ? after : "", afterlen);
        if (truncated && st.last)
            s3__list_text(st.url, b, "NextMarker", st.last, st.lastlen);
    } else {
        if (token)
            s3__xml_elem(b, "ContinuationToken", token);
        const char *sa = s3__req_param(r, "start-after");
        if (sa)
            s3__list_text(st.url, b, "StartAfter", sa, strlen(sa));
        s3__xml_elem_u64(b, "KeyCount", st.count);
        if (truncated && st.last) {
            char *tok = s3__arena_alloc(x->a, 4 * (st.lastlen / 3 + 2) + 1);
            s3__b64_encode((const unsigned char *)st.last, st.lastlen, tok);
            s3__xml_elem(b, "NextContinuationToken", tok);
        }
    }
    s3__xml_elem_u64(b, "MaxKeys", max);
    if (delim)
        s3__list_text(st.url, b, "Delimiter", delim, strlen(delim));
    if (st.url)
        s3__xml_elem(b, "EncodingType", "url");
    s3__xml_elem(b, "IsTruncated", truncated ? "true" : "false");
    evbuffer_add_buffer(b, st.contents);
    evbuffer_add_buffer(b, st.prefixes);
    evbuffer_add_printf(b, "</ListBucketResult>\n");
out:
    evbuffer_free(st.contents);
    evbuffer_free(st.prefixes);
}

static void list_v1(struct s3_ctx *x)
{
    list_common(x, L_V1);
}

static void list_v2(struct s3_ctx *x)
{
    list_common(x, L_V2);
}

const struct s3_op s3_op_list_buckets = {
    .name = "ListBuckets", .qos = QOS_META, .work = list_buckets};
const struct s3_op s3_op_create_bucket = {
    .name = "CreateBucket", .body = S3_BODY_XML, .qos = QOS_META, .work = create_bucket};
const struct s3_op s3_op_delete_bucket = {
    .name = "DeleteBucket", .qos = QOS_META, .work = delete_bucket};
const struct s3_op s3_op_head_bucket = {.name = "HeadBucket", .qos = QOS_META, .work = head_bucket};
const struct s3_op s3_op_bucket_location = {
    .name = "GetBucketLocation", .qos = QOS_META, .work = bucket_location};
const struct s3_op s3_op_bucket_config = {
    .name = "GetBucketConfig", .qos = QOS_META, .work = bucket_config};
const struct s3_op s3_op_list_objects = {.name = "ListObjects", .qos = QOS_META, .work = list_v1};
const struct s3_op s3_op_list_objects_v2 = {
    .name = "ListObjectsV2", .qos = QOS_META, .work = list_v2};
