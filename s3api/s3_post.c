/* SPDX-License-Identifier: Apache-2.0
 * s3_post: POST Object, the browser-based upload: a multipart/form-data body
 * (s3_form.c decodes it as it streams) whose fields name the key, the signed
 * policy document and its signature, the ACL, metadata and the answer, and
 * whose "file" part is the object.
 *
 * The request itself is unsigned (a browser form), so it reaches its bucket
 * as an anonymous request does (s3_anonymous_tenant, or TENANT:BUCKET). The
 * file's bytes stream into a core upload like a PutObject's; nothing is
 * visible until, after the last byte, the form is judged: the signature of
 * the policy (SigV4: x-amz-algorithm, x-amz-credential, x-amz-date,
 * x-amz-signature; SigV2: AWSAccessKeyId, signature) by a key of the
 * bucket's tenant, the policy's expiration and conditions (s3_form.c), then
 * s3:PutObject on the key as that user (or, without a policy, anonymously),
 * as s3_authz.c decides it. Only then is the object committed, as the signer's.
 * A refused form's bytes are dropped with its upload.
 * Thread: the work functions run on workers and touch only their context;
 * the decoder runs on the loop as the body arrives. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "srv_err.h"
#include "tenants.h"

static int file_start(void *arg, const char *filename, const char *ctype)
{
    struct s3_ctx *x = arg;
    x->in.form->file_name = filename;
    x->in.form->file_ctype = ctype;
    return 0;
}

static int file_data(void *arg, const char *data, size_t len)
{
    return s3__body_payload(arg, data, len) ? 1 : 0;
}

static const struct s3_form_cbs CBS = {file_start, file_data};

static void post_begin(struct s3_ctx *x)
{
    struct s3_form *f = s3__arena_alloc(x->a, sizeof(*f));
    if (s3__form_init(f, x->a, s3__req_header(x->req, "content-type"), &CBS, x)) {
        s3__resp_err(x, -EINVAL, "Bucket POST must be of the enclosure-type multipart/form-data");
        return;
    }
    x->in.form = f;
    if (s3__op_bucket(x))
        return;
    /* who writes is known after the body: the upload is judged before it commits */
    struct core_principal sp = s3__super(x);
    uint64_t hint = x->req->has_clen ? x->req->content_length : UINT64_MAX;
    int rc = core_upload_begin(x->core, &sp, x->b.ino, hint, &x->wr.up);
    if (rc)
        s3__resp_err(x, rc, NULL);
}

/* The form's signer: verify the policy's signature with the key's secret and
 * make it the request's identity. @return 0, or -1 responded. */
static int post_signer(struct s3_ctx *x, const struct s3_form *f, const char *policy)
{
    const char *alg = s3__form_get(f, "x-amz-algorithm");
    const char *cred = s3__form_get(f, "x-amz-credential");
    const char *v2key = s3__form_get(f, "AWSAccessKeyId");
    const char *sig = alg ? s3__form_get(f, "x-amz-signature") : s3__form_get(f, "signature");
    char akey[TENANT_AKEY_MAX + 1], date[9] = "", region[64] = "";
    if (alg) {
        const char *s1 = cred ? strchr(cred, '/') : NULL;
        if (strcmp(alg, SRV_SIGV4_ALGORITHM) != 0 || !s1 || (size_t)(s1 - cred) > TENANT_AKEY_MAX ||
            sscanf(s1 + 1, "%8[0-9]/%63[^/]/s3/aws4_request", date, region) != 2 || !sig) {
            s3__resp_err(x, -EINVAL,
                         "the form's x-amz-algorithm, x-amz-credential and "
                         "x-amz-signature are malformed or missing");
            return -1;
        }
        memcpy(akey, cred, (size_t)(s1 - cred));
        akey[s1 - cred] = '\0';
    } else if (v2key && sig && strlen(v2key) <= TENANT_AKEY_MAX) {
        snprintf(akey, sizeof(akey), "%s", v2key);
    } else {
        s3__resp_err(x, -EINVAL,
                     "Bucket POST must contain a field named 'AWSAccessKeyId' (or "
                     "'x-amz-credential') with its signature when a policy is given");
        return -1;
    }
    char secret[TENANT_SECRET_MAX + 1];
    struct core_principal p;
    if (s3__auth_key(x, akey, secret, &p))
        return -1;
    bool ok;
    if (alg) {
        uint8_t key[32], mac[32];
        char hex[65];
        srv_sigv4_key_cached(secret, date, region, "s3", key);
        srv_sigv4_hmac(key, 32, policy, strlen(policy), mac);
        srv_sigv4_hex(mac, 32, hex);
        OPENSSL_cleanse(key, sizeof(key));
        ok = strlen(sig) == 64 && srv_sigv4_equal(hex, sig, 64);
    } else {
        ok = srv_sigv2_check(secret, policy, strlen(policy), sig);
    }
    OPENSSL_cleanse(secret, sizeof(secret));
    if (!ok) {
        s3__resp_err(x, SRV_EAUTH,
                     "the request signature we calculated does not match the "
                     "signature you provided");
        return -1;
    }
    /* a form reaches the bucket's tenant only: its signer must be of it */
    if (p.tenant != x->p.tenant) {
        s3__resp_err(x, -EACCES, "Access Denied");
        return -1;
    }
    x->p = x->id = p;
    x->auth.post = true;
    x->auth.v2 = !alg;
    return 0;
}

/* The request's headers as the form gives them (metadata, ACL, stored headers), so
 * the object's metadata is taken as a PutObject's (s3__op_meta_from_req). */
static void form_headers(struct s3_ctx *x, const struct s3_form *f)
{
    static const char *const STORED[] = {"content-type",     "cache-control", "content-disposition",
                                         "content-encoding", "expires",       "content-language"};
    struct s3_req *r = x->req;
    struct s3_hdr *h = s3__arena_alloc(x->a, (r->nhdrs + f->nfields + 2) * sizeof(*h));
    size_t n = 0;
    for (size_t i = 0; i < r->nhdrs; i++) {
        bool drop = strncmp(r->hdrs[i].name, "x-amz-", 6) == 0 ||
                    strcmp(r->hdrs[i].name, "content-md5") == 0;
        for (size_t k = 0; k < sizeof(STORED) / sizeof(STORED[0]); k++)
            drop |= strcmp(r->hdrs[i].name, STORED[k]) == 0;
        if (!drop)
            h[n++] = r->hdrs[i];
    }
    bool ctype = false;
    for (size_t i = 0; i < f->nfields; i++) {
        const char *nm = f->fields[i].name;
        bool take = strncasecmp(nm, "x-amz-meta-", 11) == 0 ||
                    strncasecmp(nm, "x-amz-server-side-encryption", 28) == 0 ||
                    strncasecmp(nm, "x-amz-object-lock-", 18) == 0 ||
                    strncasecmp(nm, "x-amz-grant-", 12) == 0;
        for (size_t k = 0; k < sizeof(STORED) / sizeof(STORED[0]); k++)
            take |= strcasecmp(nm, STORED[k]) == 0;
        if (strcasecmp(nm, "acl") == 0)
            nm = "x-amz-acl", take = true;
        if (!take)
            continue;
        char *ln = s3__arena_strndup(x->a, nm, strlen(nm));
        for (char *c = ln; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        ctype |= strcmp(ln, "content-type") == 0;
        h[n++] = (struct s3_hdr){ln, (char *)f->fields[i].val, f->fields[i].vlen};
    }
    if (!ctype && f->file_ctype)
        h[n++] = (struct s3_hdr){"content-type", (char *)f->file_ctype, strlen(f->file_ctype)};
    r->hdrs = h;
    r->nhdrs = n;
}

/* The key field, "${filename}" standing for the file's name. */
static const char *form_key(struct s3_ctx *x, const struct s3_form *f)
{
    const char *k = s3__form_get(f, "key"), *v = strstr(k ? k : "", "${filename}");
    if (!k || !v)
        return k;
    const char *fn = f->file_name ? f->file_name : "";
    const char *slash = strrchr(fn, '/');
    fn = slash ? slash + 1 : fn;
    return s3__arena_printf(x->a, "%.*s%s%s", (int)(v - k), k, fn, v + 11);
}

/* The answer: success_action_redirect, else success_action_status (200, 201, 204). */
static void post_answer(struct s3_ctx *x, const struct s3_form *f, const char *key,
                        const char *etag)
{
    const char *redir = s3__form_get(f, "success_action_redirect");
    const char *status = s3__form_get(f, "success_action_status");
    char *loc = s3__arena_printf(x->a, "/%s/%s", x->rt.bucket,
                                 s3__url_encode(x->a, key, strlen(key), true));
    if (!redir)
        redir = s3__form_get(f, "redirect");
    s3__resp_header(x, "ETag", "\"%s\"", etag);
    s3__resp_header(x, "Location", "%s", loc);
    if (redir && *redir) {
        x->out.status = 303;
        evbuffer_drain(x->out.hdrs, evbuffer_get_length(x->out.hdrs));
        s3__resp_header(x, "ETag", "\"%s\"", etag);
        s3__resp_header(x, "Location", "%s%sbucket=%s&key=%s&etag=%%22%s%%22", redir,
                        strchr(redir, '?') ? "&" : "?",
                        s3__url_encode(x->a, x->rt.bucket, x->rt.bucketlen, false),
                        s3__url_encode(x->a, key, strlen(key), false), etag);
        return;
    }
    if (status && strcmp(status, "201") == 0) {
        s3__resp_xml(x);
        x->out.status = 201;
        struct evbuffer *b = x->out.body;
        evbuffer_add_printf(b, "<PostResponse>");
        s3__xml_elem(b, "Location", loc);
        s3__xml_elem(b, "Bucket", x->rt.bucket);
        s3__xml_elem(b, "Key", key);
        evbuffer_add_printf(b, "<ETag>&quot;%s&quot;</ETag></PostResponse>\n", etag);
        return;
    }
    x->out.status = status && strcmp(status, "200") == 0 ? 200 : 204;
}

static void post_finish(struct s3_ctx *x)
{
    struct s3_form *f = x->in.form;
    if (s3__form_end(f)) {
        s3__resp_err(x, -EINVAL,
                     f->why ? f->why
                            : "the body of your POST request is not well-formed "
                              "multipart/form-data");
        return;
    }
    if (!f->file_seen) {
        s3__resp_err(x, -EINVAL, "POST requires exactly one file upload per request");
        return;
    }
    const char *key = form_key(x, f), *policy = s3__form_get(f, "policy");
    if (!key || !*key) {
        s3__resp_err(x, -EINVAL,
                     "Bucket POST must contain a field named 'key'. If it is "
                     "specified, please check the order of the fields.");
        return;
    }
    if (strlen(key) > CORE_KEY_MAX) {
        s3__resp_err(x, -ENAMETOOLONG, "your key is too long");
        return;
    }
    uint64_t size = core_upload_size(x->wr.up);
    if (policy) {
        const char *why = NULL;
        if (post_signer(x, f, policy))
            return;
        int rc = s3__form_policy_check(x->a, f, policy, x->rt.bucket, key, size, time(NULL), &why);
        if (rc == -ERANGE) {
            s3__resp_s3err(x, S3E_ENTITY_TOO_SMALL, why);
            return;
        }
        if (rc == -EFBIG) {
            s3__resp_err(x, SRV_ETOOBIG, why);
            return;
        }
        if (rc) {
            s3__resp_err(x, rc == -EACCES ? -EACCES : -EINVAL, why);
            return;
        }
    }
    x->b.key = key;
    x->b.keylen = strlen(key);
    x->rt.key = (char *)key; /* for the error documents and the decisions that follow */
    x->rt.keylen = x->b.keylen;
    if (s3__authz(x, &x->b, "s3:PutObject", S3_AZ_B_WRITE, NULL, NULL))
        return;
    struct s3_meta meta;
    form_headers(x, f);
    if (s3__op_meta_from_req(x, &meta))
        return;
    unsigned char md[SRV_MD5_LEN];
    char etag[33];
    srv_md5_final(&x->in.md5, md);
    srv_sigv4_hex(md, 16, etag);
    void *blob = NULL;
    size_t bloblen = 0;
    int rc = s3__meta_encode(&meta, &blob, &bloblen);
    struct core_upload *up = x->wr.up;
    x->wr.up = NULL;
    if (rc) {
        core_upload_abort(up);
        s3__resp_err(x, rc, NULL);
        return;
    }
    core_upload_set_principal(up, &x->p); /* the signer, as decided */
    rc = core_upload_commit(up, key, strlen(key), etag, blob, bloblen, NULL, false, NULL);
    free(blob);
    if (rc) {
        s3__resp_err(x, rc,
                     rc == SRV_ECLASH ? "the key would make a file where a directory is, "
                                        "or the reverse"
                                      : NULL);
        return;
    }
    post_answer(x, f, key, etag);
}

const struct s3_op s3_op_post_object = {.name = "PostObject",
                                        .body = S3_BODY_STREAM,
                                        .qos = QOS_WRITE,
                                        .work = post_begin,
                                        .finish = post_finish};
