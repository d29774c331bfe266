/* SPDX-License-Identifier: Apache-2.0
 * s3_auth: authentication of a request: the SigV4 Authorization header or
 * presigned query (sigv4/ through s3_sigv4.c; the legacy SigV2 header and
 * presigned query too), the secret and principal of
 * the access key from tenants (an in-memory cache, so this runs on the loop
 * thread), then the payload mode: aws-chunked streaming (the decoder, with
 * the request's signing key) or a signed SHA-256 to check.
 * An unsigned request is anonymous: it runs in the tenant s3_anonymous_tenant
 * names, or the one a "TENANT:BUCKET" bucket name names, with no user, and
 * gets only what the bucket's ACL and policy grant everybody (s3_authz.c);
 * a signed request always runs in its key's tenant.
 * Thread: the connection's loop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_conn.h"
#include "srv_err.h"
#include "tenants.h"

static bool is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* A bucket named "TENANT:BUCKET" (as Ceph RGW names another tenant's): the
 * plain name, and for an unsigned request the tenant it names. A signed
 * request may name only its own tenant. @return 0, -ENOENT (no such tenant,
 * or another tenant's for a signed request: answered as a missing bucket). */
static int qualified_bucket(struct s3_ctx *x, bool anon)
{
    char *colon = x->rt.bucket ? memchr(x->rt.bucket, ':', x->rt.bucketlen) : NULL;
    struct tenant_info ti;
    if (!colon)
        return 0;
    *colon = '\0';
    int rc = tenants_tenant_find(x->srv->tenants, x->rt.bucket, &ti);
    if (rc == 0 && !anon && ti.id != x->p.tenant)
        rc = -ENOENT;
    if (rc)
        return -ENOENT;
    x->p.tenant = ti.id;
    x->rt.bucketlen -= (size_t)(colon + 1 - x->rt.bucket);
    x->rt.bucket = colon + 1;
    return 0;
}

/* An unsigned request: the anonymous principal of the tenant its bucket is
 * in (module comment). What it may do, the bucket's ACL and policy say. */
static int auth_anon(struct s3_ctx *x)
{
    struct tenant_info ti;
    memset(&x->p, 0, sizeof(x->p));
    x->p.uid = x->p.gid = S3_ANON_ID;
    x->p.flags = CORE_P_ANON | CORE_P_VERSIONS; /* what it may read: the bucket says */
    if (x->srv->anon_tenant && tenants_tenant_find(x->srv->tenants, x->srv->anon_tenant, &ti) == 0)
        x->p.tenant = ti.id;
    if (qualified_bucket(x, true))
        x->p.tenant = 0; /* no tenant: no bucket is found */
    x->id = x->p;
    return 0;
}

int s3__auth_key(struct s3_ctx *x, const char *akey, char *secret, struct core_principal *p)
{
    int rc = tenants_key_lookup(x->tenants, akey, secret, p);
    if (rc == -ENOENT) {
        s3__resp_s3err(x, S3E_INVALID_ACCESS_KEY_ID, NULL);
        return -1;
    }
    if (rc) {
        s3__resp_err(x, -EACCES, "the access key or its user is disabled");
        return -1;
    }
    return 0;
}

/* A verification that failed with @p rc: the answer, and no identity kept. */
static int auth_failed(struct s3_ctx *x, int rc, const char *why)
{
    uint32_t tenant = x->p.tenant;
    memset(&x->p, 0, sizeof(x->p));
    x->p.tenant = tenant;
    x->id = x->p;
    if (rc == SRV_EAUTH)
        s3__resp_err(x, SRV_EAUTH, why);
    else if (rc == -ETIMEDOUT)
        s3__resp_s3err(x, S3E_REQUEST_TIME_TOO_SKEWED, why);
    else if (rc == -EACCES)
        s3__resp_err(x, -EACCES, why);
    else
        s3__resp_s3err(x, S3E_AUTH_HEADER_MALFORMED, why);
    return -1;
}

/* AWS Signature Version 2 (legacy): the header "AWS AKID:SIG" (@p hsig) or the
 * presigned query (AWSAccessKeyId, Expires, Signature). The payload is not
 * signed (Content-MD5, when sent, is checked against the body as always). */
/* The user of access key @p akey: x->p, x->id and its secret. @return 0, or -1 responded. */
static int auth_key(struct s3_ctx *x, const char *akey, char secret[TENANT_SECRET_MAX + 1])
{
    int rc = s3__auth_key(x, akey, secret, &x->p);
    x->id = x->p;
    return rc;
}

static int auth_v2(struct s3_ctx *x, const char *akey, const char *hsig)
{
    const struct s3_req *r = x->req;
    const char *sig = hsig, *expires = NULL;
    if (!hsig) {
        sig = s3__req_param(r, "Signature");
        expires = s3__req_param(r, "Expires");
        if (!sig || !expires || !*akey) {
            s3__resp_s3err(x, S3E_AUTH_QUERY_MALFORMED,
                           "a SigV2 presigned URL needs AWSAccessKeyId, Expires and Signature");
            return -1;
        }
    }
    char secret[TENANT_SECRET_MAX + 1];
    if (auth_key(x, akey, secret))
        return -1;
    const char *why = NULL;
    int rc = s3__sigv2_verify(x->a, r, x->rt.vhost ? x->rt.bucket : NULL,
                              x->rt.bucket && !x->rt.key, sig, expires, secret, time(NULL), &why);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc)
        return auth_failed(x, rc, why);
    x->auth.v2 = true;
    x->auth.sig.presigned = !hsig;
    snprintf(x->auth.sig.akey, sizeof(x->auth.sig.akey), "%s", akey);
    snprintf(x->auth.sig.payload_hash, sizeof(x->auth.sig.payload_hash), "%s",
             SRV_SIGV4_UNSIGNED_PAYLOAD);
    return 0;
}

/* @return 0 when the request is authenticated; otherwise the error response is set. */
int s3__ctx_auth(struct s3_ctx *x)
{
    struct s3_req *r = x->req;
    const char *authz = s3__req_header(r, "authorization");
    int rc;
    if (authz) {
        rc = srv_sigv4_parse_header(authz, &x->auth.sig);
        if (rc == SRV_ENOTSUPP) {
            char akey[129], sig[65];
            rc = srv_sigv2_parse_header(authz, akey, sig);
            if (rc == -ENOENT) {
                s3__resp_err(x, -EACCES,
                             "the authorization scheme is not supported (AWS Signature Version 4 "
                             "or 2)");
                return -1;
            }
            if (rc) {
                s3__resp_s3err(x, S3E_AUTH_HEADER_MALFORMED, NULL);
                return -1;
            }
            rc = auth_v2(x, akey, sig);
        } else if (rc) {
            s3__resp_s3err(x, S3E_AUTH_HEADER_MALFORMED, NULL);
            return -1;
        } else {
            rc = 1;
        }
    } else {
        rc = s3__sigv4_parse_query(r, &x->auth.sig);
        if (rc == -ENOENT && s3__req_has_param(r, "AWSAccessKeyId")) {
            rc = auth_v2(x, s3__req_param(r, "AWSAccessKeyId"), NULL);
        } else if (rc == -ENOENT) {
            return auth_anon(x);
        } else if (rc) {
            s3__resp_s3err(x, S3E_AUTH_QUERY_MALFORMED, NULL);
            return -1;
        } else {
            rc = 1;
        }
    }
    if (rc < 0)
        return -1;
    if (rc == 1) { /* SigV4 */
        char secret[TENANT_SECRET_MAX + 1];
        if (auth_key(x, x->auth.sig.akey, secret))
            return -1;
        const char *why = NULL;
        rc = s3__sigv4_verify(x->a, r, &x->auth.sig, secret, time(NULL), x->auth.skey, &why);
        OPENSSL_cleanse(secret, sizeof(secret));
        if (rc)
            return auth_failed(x, rc, why);
    }
    if (qualified_bucket(x, false)) {
        s3__resp_err(x, SRV_ENOBUCKET, "the specified bucket does not exist");
        return -1;
    }
    /* S3 reads versions by version id (the NFS front end never reaches them) */
    x->p.flags |= CORE_P_VERSIONS;
    /* payload mode */
    const char *ph = x->auth.sig.payload_hash;
    if (strcmp(ph, SRV_SIGV4_STREAMING_SIGNED) == 0 ||
        strcmp(ph, SRV_SIGV4_STREAMING_SIGNED_TRAILER) == 0 ||
        strcmp(ph, SRV_SIGV4_STREAMING_UNSIGNED_TRAILER) == 0) {
        enum srv_sigv4_chunk_mode m = strcmp(ph, SRV_SIGV4_STREAMING_SIGNED) == 0
                                          ? SRV_SIGV4_CHUNK_SIGNED
                                      : strcmp(ph, SRV_SIGV4_STREAMING_SIGNED_TRAILER) == 0
                                          ? SRV_SIGV4_CHUNK_SIGNED_TRAILER
                                          : SRV_SIGV4_CHUNK_UNSIGNED_TRAILER;
        x->in.ck = malloc(sizeof(*x->in.ck)); /* only these requests carry the decoder */
        if (!x->in.ck)
            abort();
        s3__chunked_init(x->in.ck, m, x->auth.skey, &x->auth.sig, s3__body_payload, x);
        x->in.aws_chunked = true;
        const char *dl = s3__req_header(r, "x-amz-decoded-content-length");
        if (dl) {
            char *end = NULL;
            unsigned long long v = strtoull(dl, &end, 10);
            if (!end || *end || end == dl) {
                s3__resp_err(x, -EINVAL, "x-amz-decoded-content-length is malformed");
                return -1;
            }
            x->in.decoded_len = (int64_t)v;
        }
    } else if (strcmp(ph, SRV_SIGV4_UNSIGNED_PAYLOAD) != 0) {
        if (!is_hex64(ph)) {
            s3__resp_err(x, -EINVAL,
                         "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-* or a "
                         "lower-case hex SHA-256");
            return -1;
        }
        x->in.sha256 = EVP_MD_CTX_new();
        if (!x->in.sha256)
            abort();
        EVP_DigestInit_ex(x->in.sha256, EVP_sha256(), NULL);
    }
    return 0;
}
