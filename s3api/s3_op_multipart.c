/* SPDX-License-Identifier: Apache-2.0
 * s3_op_multipart: CreateMultipartUpload, CompleteMultipartUpload,
 * AbortMultipartUpload, ListParts and ListMultipartUploads over the core's
 * core_mpu_* calls (UploadPart and UploadPartCopy live in s3_op_object.c,
 * next to the other streamed uploads).
 *
 * Complete checks what S3 checks before linking: ascending part numbers
 * (InvalidPartOrder), every named part uploaded with the given ETag
 * (InvalidPart), every part but the last at least 5 MiB (EntityTooSmall). The
 * object's ETag is the MD5 of the concatenated binary part MD5s, then "-N".
 * Thread: the work functions run on workers and touch only their context. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "srv_err.h"

#define MPU_MIN_PART (5ull << 20)
#define MPU_MAX_PARTS 10000

/* Answer a failed call on an upload: NoSuchUpload for -ENOENT (no such upload id), else as
 * mapped. @return whether @p rc is an error (then the response is set). */
static bool upload_failed(struct s3_ctx *x, int rc)
{
    if (rc == -ENOENT)
        s3__resp_s3err(x, S3E_NO_SUCH_UPLOAD, NULL);
    else if (rc)
        s3__resp_err(x, rc, NULL);
    return rc != 0;
}

static void mpu_create(struct s3_ctx *x)
{
    struct s3_meta m;
    struct core_lock lk;
    bool has_lock;
    if (s3__op_bucket(x) || s3__op_meta_from_req(x, &m) || s3__lock_from_req(x, &lk, &has_lock))
        return;
    if (has_lock) {
        /* kept with the upload's metadata, applied at completion */
        char v[24];
        int n = snprintf(v, sizeof(v), "%u", lk.mode);
        s3__meta_add(&m, x->a, S3_M_LOCK, "mode", 4, v, (size_t)n);
        n = snprintf(v, sizeof(v), "%lld", (long long)lk.until);
        s3__meta_add(&m, x->a, S3_M_LOCK, "until", 5, v, (size_t)n);
        s3__meta_add(&m, x->a, S3_M_LOCK, "hold", 4, lk.hold ? "1" : "0", 1);
    }
    /* x-amz-checksum-algorithm: each part's checksum is verified as it arrives
     * (UploadPart); no composite checksum of the whole object is kept. */
    const char *alg = s3__req_header(x->req, "x-amz-checksum-algorithm");
    if (alg && !s3__ck_from_name(alg)) {
        s3__resp_err(x, SRV_ENOTSUPP,
                     s3__arena_printf(x->a, "checksum algorithm %s is not implemented", alg));
        return;
    }
    /* the algorithm the completed object's composite checksum is made with */
    if (alg)
        s3__meta_add(&m, x->a, S3_M_CKSUM, "algorithm", 9, s3__ck_name(s3__ck_from_name(alg)),
                     strlen(s3__ck_name(s3__ck_from_name(alg))));
    void *blob = NULL;
    size_t len = 0;
    char id[128];
    int rc = s3__meta_encode(&m, &blob, &len);
    if (!rc)
        rc = core_mpu_create(x->core, &x->p, x->bucket_ino, x->rt.key, x->rt.keylen, blob, len, id,
                             sizeof(id));
    free(blob);
    if (rc) {
        s3__resp_err(x, rc, NULL);
        return;
    }
    s3__resp_xml(x);
    if (alg) /* the algorithm each part's checksum is verified with, echoed as AWS does */
        s3__resp_header(x, "x-amz-checksum-algorithm", "%s", s3__ck_name(s3__ck_from_name(alg)));
    evbuffer_add_printf(x->out.body, "<InitiateMultipartUploadResult xmlns=\"%s\">", S3_XMLNS);
    s3__xml_elem(x->out.body, "Bucket", x->rt.bucket);
    s3__xml_elemn(x->out.body, "Key", x->rt.key, x->rt.keylen);
    s3__xml_elem(x->out.body, "UploadId", id);
    evbuffer_add_printf(x->out.body, "</InitiateMultipartUploadResult>\n");
}

/* The object lock upload @p id asked for at its creation, into @p lk.
 * @return 1 (one was asked), 0 (none, or the upload is gone: completion answers). */
static int upload_lock(struct s3_ctx *x, const char *id, struct core_lock *lk)
{
    void *blob = NULL;
    size_t len = 0;
    struct s3_meta m;
    memset(lk, 0, sizeof(*lk));
    if (core_mpu_get_meta(x->core, &x->p, x->bucket_ino, id, &blob, &len) != 0)
        return 0;
    int rc = s3__meta_decode(&m, x->a, blob, len);
    free(blob);
    const struct s3_meta_ent *mode = rc ? NULL : s3__meta_find(&m, S3_M_LOCK, "mode");
    const struct s3_meta_ent *until = rc ? NULL : s3__meta_find(&m, S3_M_LOCK, "until");
    const struct s3_meta_ent *hold = rc ? NULL : s3__meta_find(&m, S3_M_LOCK, "hold");
    if (!mode || !until || !hold)
        return 0;
    lk->mode = (uint32_t)strtoul(mode->val, NULL, 10);
    lk->until = strtoll(until->val, NULL, 10);
    lk->hold = hold->val[0] == '1';
    return 1;
}

/* ---------------------------------------------------------------- parts collection */

struct parts {
    struct s3_arena *a;
    struct core_mpu_part *v;
    size_t n, cap, max;
};

static int part_cb(void *arg, const struct core_mpu_part *p)
{
    struct parts *ps = arg;
    if (ps->max && ps->n >= ps->max)
        return 1;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        struct core_mpu_part *v = s3__arena_alloc(ps->a, cap * sizeof(*v));
        if (ps->n)
            memcpy(v, ps->v, ps->n * sizeof(*v));
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = *p;
    return 0;
}

static const char *strip_quotes(struct s3_arena *a, const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    return s3__arena_strndup(a, s, n);
}

static int hexbin(const char *h, unsigned char out[16])
{
    if (strlen(h) != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* Remember the part count (x-amz-mp-parts-count) and the part sizes (GET by
 * partNumber) in the object's metadata, tied to the ETag they describe: an
 * NFS rewrite changes the ETag and so retires them. Sizes are run-length
 * coded, "size*count,size*count,...", so the usual "equal parts, shorter
 * last one" is two entries. Best effort: the object is complete whether or
 * not this sticks. */
/* The composite checksum of the parts (the upload's algorithm over their checksums,
 * "-N"), when every part has one of that algorithm: into @p out. @return true if so. */
static bool composite(const struct s3_meta *m, const struct core_mpu_part *v, const size_t *idx,
                      size_t np, enum s3_ck_algo *algo, char *out)
{
    const struct s3_meta_ent *a = s3__meta_find(m, S3_M_CKSUM, "algorithm");
    *algo = a ? s3__ck_from_name(a->val) : S3_CK_NONE;
    if (!*algo)
        return false;
    struct s3_cksum ck;
    s3__ck_init(&ck, *algo);
    for (size_t i = 0; i < np; i++) {
        const char *c = v[idx[i]].cksum;
        unsigned char raw[64];
        long n;
        if (atoi(c) != (int)*algo || !strchr(c, ':') ||
            (n = s3__b64_decode(strchr(c, ':') + 1, strlen(strchr(c, ':') + 1), raw)) <= 0) {
            s3__ck_free(&ck);
            return false;
        }
        s3__ck_update(&ck, raw, (size_t)n);
    }
    s3__ck_final(&ck, out);
    sprintf(out + strlen(out), "-%zu", np);
    return true;
}

static void record_parts(struct s3_ctx *x, const struct core_mpu_part *v, const size_t *idx,
                         size_t np, const char *final, enum s3_ck_algo *algo, char *cksum)
{
    struct core_objinfo oi;
    struct s3_meta m;
    struct core_principal sp = s3__super(x); /* the object this request just made */
    if (core_key_lookup(x->core, &sp, x->bucket_ino, x->rt.key, x->rt.keylen, &oi) != 0)
        return;
    if (s3__meta_decode(&m, x->a, oi.meta, oi.metalen) == 0) {
        char n[24];
        int l = snprintf(n, sizeof(n), "%zu", np);
        size_t cap = np * 44 + 1, sl = 0;
        char *sizes = s3__arena_alloc(x->a, cap);
        for (size_t i = 0; i < np;) {
            size_t run = 1;
            while (i + run < np && v[idx[i + run]].size == v[idx[i]].size)
                run++;
            sl +=
                (size_t)snprintf(sizes + sl, cap - sl, "%s%" PRIu64, sl ? "," : "", v[idx[i]].size);
            if (run > 1)
                sl += (size_t)snprintf(sizes + sl, cap - sl, "*%zu", run);
            i += run;
        }
        void *blob = NULL;
        size_t len = 0;
        s3__meta_drop(&m, S3_M_PARTS);
        if (composite(&m, v, idx, np, algo, cksum)) {
            s3__meta_drop(&m, S3_M_CKSUM);
            s3__meta_add(&m, x->a, S3_M_CKSUM, s3__ck_name(*algo), strlen(s3__ck_name(*algo)),
                         cksum, strlen(cksum));
            s3__meta_add(&m, x->a, S3_M_CKSUM, "etag", 4, final, strlen(final));
        } else {
            *algo = S3_CK_NONE;
        }
        s3__meta_add(&m, x->a, S3_M_PARTS, "count", 5, n, (size_t)l);
        s3__meta_add(&m, x->a, S3_M_PARTS, "sizes", 5, sizes, sl);
        s3__meta_add(&m, x->a, S3_M_PARTS, "etag", 4, final, strlen(final));
        if (s3__meta_encode(&m, &blob, &len) == 0)
            core_key_set_meta(x->core, &sp, x->bucket_ino, x->rt.key, x->rt.keylen, blob, len);
        free(blob);
    }
    free(oi.meta);
}

static void complete_result(struct s3_ctx *x, const char *final, enum s3_ck_algo algo,
                            const char *cksum)
{
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<CompleteMultipartUploadResult xmlns=\"%s\"><Location>/", S3_XMLNS);
    s3__xml_esc(b, x->rt.bucket, x->rt.bucketlen);
    evbuffer_add(b, "/", 1);
    s3__xml_esc(b, x->rt.key, x->rt.keylen);
    evbuffer_add_printf(b, "</Location>");
    s3__xml_elem(b, "Bucket", x->rt.bucket);
    s3__xml_elemn(b, "Key", x->rt.key, x->rt.keylen);
    evbuffer_add_printf(b, "<ETag>&quot;%s&quot;</ETag>", final);
    if (algo)
        s3__xml_elem(b, s3__arena_printf(x->a, "Checksum%s", s3__ck_name(algo)), cksum);
    evbuffer_add_printf(b, "</CompleteMultipartUploadResult>\n");
}

/* A Part element's ChecksumALGO, when given, must be the checksum the part was
 * uploaded with (AWS answers InvalidPart otherwise). */
static bool part_cksum_ok(struct s3_ctx *x, const struct s3_xnode *pn,
                          const struct core_mpu_part *p)
{
    for (const struct s3_xnode *c = pn->child; c; c = c->next) {
        if (strncmp(c->name, "Checksum", 8) != 0)
            continue;
        enum s3_ck_algo a = s3__ck_from_name(c->name + 8);
        const char *colon = strchr(p->cksum, ':');
        if (!a || !colon || atoi(p->cksum) != (int)a || strcmp(colon + 1, c->text) != 0)
            return false;
    }
    (void)x;
    return true;
}

/* The multipart ETag of parts whose ETags are @p etags: md5(binary MD5s)-N, into @p final.
 * @return 0, -1 when an ETag is not an MD5. */
static int final_etag(const char *const *etags, size_t np, char final[CORE_ETAG_MAX + 1])
{
    unsigned char bin[16], d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    char hex[33];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        abort();
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    for (size_t i = 0; i < np; i++) {
        if (hexbin(etags[i], bin)) {
            EVP_MD_CTX_free(md);
            return -1;
        }
        EVP_DigestUpdate(md, bin, 16);
    }
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    srv_sigv4_hex(d, 16, hex);
    snprintf(final, CORE_ETAG_MAX + 1, "%s-%zu", hex, np);
    return 0;
}

/* A CompleteMultipartUpload for an upload that is gone: an SDK retrying after a
 * lost response. When the key holds the object these parts made (its ETag is
 * theirs), answer as the first completion did, as AWS does. @return true if so. */
static bool completed_before(struct s3_ctx *x, const char *const *etags, size_t np)
{
    char final[CORE_ETAG_MAX + 1];
    struct core_objinfo oi;
    struct core_principal sp = s3__super(x); /* the bucket's WRITE was decided */
    if (final_etag(etags, np, final) ||
        core_key_lookup(x->core, &sp, x->bucket_ino, x->rt.key, x->rt.keylen, &oi) != 0)
        return false;
    free(oi.meta);
    if (strcmp(oi.etag, final) != 0)
        return false;
    complete_result(x, final, S3_CK_NONE, NULL);
    return true;
}

static void mpu_complete(struct s3_ctx *x)
{
    const char *id = s3__req_param(x->req, "uploadId");
    size_t n = evbuffer_get_length(x->in.buf);
    struct s3_xnode *root = NULL;
    const char *doc = (const char *)evbuffer_pullup(x->in.buf, (ssize_t)n);
    if (!n || s3__xml_parse(x->a, doc, n, &root) ||
        strcmp(root->name, "CompleteMultipartUpload") != 0) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return;
    }
    size_t np = 0;
    for (struct s3_xnode *c = root->child; c; c = c->next)
        np += strcmp(c->name, "Part") == 0;
    if (np == 0 || np > MPU_MAX_PARTS) {
        s3__resp_err(x, SRV_EBADREQ, "CompleteMultipartUpload must name between 1 and 10000 parts");
        return;
    }
    uint32_t *nums = s3__arena_alloc(x->a, np * sizeof(*nums));
    struct s3_xnode **pnodes = s3__arena_alloc(x->a, np * sizeof(*pnodes));
    const char **etags = s3__arena_alloc(x->a, np * sizeof(*etags));
    size_t i = 0;
    for (struct s3_xnode *c = root->child; c; c = c->next) {
        if (strcmp(c->name, "Part") != 0)
            continue;
        struct s3_xnode *pn = s3__xml_child(c, "PartNumber"), *et = s3__xml_child(c, "ETag");
        char *e = NULL;
        long v = pn ? strtol(pn->text, &e, 10) : 0;
        if (!pn || !et || !*pn->text || *e || v < 1 || v > MPU_MAX_PARTS) {
            s3__resp_err(x, SRV_EBADREQ, "each Part needs a PartNumber (1..10000) and an ETag");
            return;
        }
        nums[i] = (uint32_t)v;
        pnodes[i] = c;
        etags[i] = strip_quotes(x->a, et->text, et->textlen);
        if (i && nums[i] <= nums[i - 1]) {
            s3__resp_s3err(x, S3E_INVALID_PART_ORDER, NULL);
            return;
        }
        i++;
    }
    if (s3__op_bucket(x))
        return;
    struct parts ps = {.a = x->a};
    int rc = core_mpu_list_parts(x->core, &x->p, x->bucket_ino, id, 0, part_cb, &ps);
    if (rc == -ENOENT && completed_before(x, etags, np))
        return;
    if (upload_failed(x, rc))
        return;
    /* every named part must exist with its ETag before sizes are judged */
    size_t *idx = s3__arena_alloc(x->a, np * sizeof(*idx));
    size_t j = 0;
    for (i = 0; i < np; i++) {
        unsigned char bin[16];
        while (j < ps.n && ps.v[j].partno < nums[i])
            j++;
        if (j == ps.n || ps.v[j].partno != nums[i] || strcmp(ps.v[j].etag, etags[i]) != 0 ||
            hexbin(ps.v[j].etag, bin) || !part_cksum_ok(x, pnodes[i], &ps.v[j])) {
            s3__resp_s3err(x, S3E_INVALID_PART,
                           s3__arena_printf(x->a,
                                            "part %u could not be found or its ETag does "
                                            "not match",
                                            nums[i]));
            return;
        }
        idx[i] = j;
    }
    for (i = 0; i < np; i++) {
        if (i + 1 < np && ps.v[idx[i]].size < MPU_MIN_PART) {
            s3__resp_s3err(x, S3E_ENTITY_TOO_SMALL,
                           s3__arena_printf(x->a,
                                            "part %u is smaller than the minimum allowed "
                                            "size (5 MiB)",
                                            nums[i]));
            return;
        }
    }
    char final[CORE_ETAG_MAX + 1];
    final_etag(etags, np, final);
    struct core_attr attr;
    char vid[CORE_VID_MAX + 1] = "";
    struct core_lock lk;
    struct core_putopt opt = {NULL, vid};
    if (upload_lock(x, id, &lk) == 1)
        opt.lock = &lk;
    rc = core_mpu_complete(x->core, &x->p, x->bucket_ino, id, nums, etags, np, final, &opt, &attr);
    if (rc == SRV_EPRECOND || rc == -EINVAL) {
        s3__resp_s3err(x, S3E_INVALID_PART, NULL);
        return;
    }
    if (upload_failed(x, rc))
        return;
    enum s3_ck_algo algo = S3_CK_NONE;
    char cksum[100] = "";
    record_parts(x, ps.v, idx, np, final, &algo, cksum);
    if (vid[0])
        s3__resp_hdr(x, "x-amz-version-id", vid);
    complete_result(x, final, algo, cksum);
}

static void mpu_abort(struct s3_ctx *x)
{
    if (s3__op_bucket(x))
        return;
    int rc = core_mpu_abort(x->core, &x->p, x->bucket_ino, s3__req_param(x->req, "uploadId"));
    if (upload_failed(x, rc))
        return;
    x->out.status = 204;
}

static int parse_uint(struct s3_ctx *x, const char *name, uint32_t def, uint32_t cap, uint32_t *out)
{
    const char *v = s3__req_param(x->req, name);
    *out = def;
    if (!v)
        return 0;
    char *e = NULL;
    long n = strtol(v, &e, 10);
    if (!*v || *e || n < 0) {
        s3__resp_err(x, -EINVAL, s3__arena_printf(x->a, "%s must be a non-negative integer", name));
        return -1;
    }
    *out = (uint32_t)(n > (long)cap ? cap : n);
    return 0;
}

static void mpu_list_parts(struct s3_ctx *x)
{
    const char *id = s3__req_param(x->req, "uploadId");
    uint32_t max, marker;
    if (parse_uint(x, "max-parts", 1000, 1000, &max) ||
        parse_uint(x, "part-number-marker", 0, MPU_MAX_PARTS, &marker) || s3__op_bucket(x))
        return;
    struct parts ps = {.a = x->a, .max = (size_t)max + 1};
    int rc = core_mpu_list_parts(x->core, &x->p, x->bucket_ino, id, marker, part_cb, &ps);
    if (upload_failed(x, rc))
        return;
    bool truncated = ps.n > max;
    size_t shown = truncated ? max : ps.n;
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<ListPartsResult xmlns=\"%s\">", S3_XMLNS);
    s3__xml_elem(b, "Bucket", x->rt.bucket);
    s3__xml_elemn(b, "Key", x->rt.key, x->rt.keylen);
    s3__xml_elem(b, "UploadId", id);
    s3__acl_owner_xml(x, b, "Initiator", x->id.uid);
    s3__acl_owner_xml(x, b, "Owner", x->id.uid);
    evbuffer_add_printf(b, "<StorageClass>STANDARD</StorageClass>");
    s3__xml_elem_u64(b, "PartNumberMarker", marker);
    if (shown)
        s3__xml_elem_u64(b, "NextPartNumberMarker", ps.v[shown - 1].partno);
    s3__xml_elem_u64(b, "MaxParts", max);
    s3__xml_elem(b, "IsTruncated", truncated ? "true" : "false");
    for (size_t i = 0; i < shown; i++) {
        char iso[25];
        s3__iso_date_fmt(&ps.v[i].mtime, iso);
        evbuffer_add_printf(b,
                            "<Part><PartNumber>%u</PartNumber><LastModified>%s</LastModified>"
                            "<ETag>&quot;%s&quot;</ETag><Size>%" PRIu64 "</Size></Part>",
                            ps.v[i].partno, iso, ps.v[i].etag, ps.v[i].size);
    }
    evbuffer_add_printf(b, "</ListPartsResult>\n");
}

struct uploads {
    struct s3_ctx *x;
    const char *key_marker, *id_marker;
    const char *prefix, *delim;
    uint32_t max, n;
    bool truncated;
    struct evbuffer *out, *prefixes;
    char *next_key, *next_id;
    char *last_cp; /* last common prefix emitted */
};

static int upload_cb(void *arg, const struct core_mpu_info *u)
{
    struct uploads *us = arg;
    struct s3_ctx *x = us->x;
    if (us->key_marker) {
        size_t ml = strlen(us->key_marker);
        size_t m = ml < u->keylen ? ml : u->keylen;
        int c = memcmp(u->key, us->key_marker, m);
        if (c == 0)
            c = u->keylen < ml ? -1 : u->keylen > ml ? 1 : 0;
        if (c < 0)
            return 0;
        if (c == 0 && (!us->id_marker || strcmp(u->upload_id, us->id_marker) <= 0))
            return 0;
        /* a marker that is a common prefix resumes after everything under it */
        size_t dl = us->delim ? strlen(us->delim) : 0;
        if (dl && ml >= dl && memcmp(us->key_marker + ml - dl, us->delim, dl) == 0 &&
            u->keylen >= ml && memcmp(u->key, us->key_marker, ml) == 0)
            return 0;
    }
    size_t pl = us->prefix ? strlen(us->prefix) : 0;
    const char *cut = NULL;
    if (us->delim && *us->delim && u->keylen > pl) {
        size_t dl = strlen(us->delim);
        for (size_t i = pl; i + dl <= u->keylen; i++)
            if (memcmp(u->key + i, us->delim, dl) == 0) {
                cut = u->key + i + dl;
                break;
            }
    }
    if (cut) {
        /* uploads under one prefix..delimiter roll up into a CommonPrefix */
        size_t cl = (size_t)(cut - u->key);
        if (us->last_cp && strlen(us->last_cp) == cl && memcmp(us->last_cp, u->key, cl) == 0)
            return 0;
        if (us->n >= us->max) {
            us->truncated = true;
            return 1;
        }
        us->n++;
        us->last_cp = s3__arena_strndup(x->a, u->key, cl);
        us->next_key = us->last_cp;
        us->next_id = NULL;
        evbuffer_add_printf(us->prefixes, "<CommonPrefixes>");
        s3__xml_elemn(us->prefixes, "Prefix", u->key, cl);
        evbuffer_add_printf(us->prefixes, "</CommonPrefixes>");
        return 0;
    }
    if (us->n >= us->max) {
        us->truncated = true;
        return 1;
    }
    us->n++;
    us->next_key = s3__arena_strndup(x->a, u->key, u->keylen);
    us->next_id = s3__arena_strndup(x->a, u->upload_id, strlen(u->upload_id));
    char iso[25];
    s3__iso_date_fmt(&u->initiated, iso);
    evbuffer_add_printf(us->out, "<Upload>");
    s3__xml_elemn(us->out, "Key", u->key, u->keylen);
    s3__xml_elem(us->out, "UploadId", u->upload_id);
    s3__acl_owner_xml(x, us->out, "Initiator", u->uid);
    s3__acl_owner_xml(x, us->out, "Owner", u->uid);
    evbuffer_add_printf(us->out,
                        "<StorageClass>STANDARD</StorageClass><Initiated>%s</Initiated>"
                        "</Upload>",
                        iso);
    return 0;
}

static void mpu_list_uploads(struct s3_ctx *x)
{
    struct uploads us = {.x = x};
    if (parse_uint(x, "max-uploads", 1000, 1000, &us.max) || s3__op_bucket(x))
        return;
    const char *prefix = s3__req_param(x->req, "prefix");
    us.prefix = prefix;
    us.delim = s3__req_param(x->req, "delimiter");
    us.prefixes = evbuffer_new();
    us.key_marker = s3__req_param(x->req, "key-marker");
    if (us.key_marker && !*us.key_marker)
        us.key_marker = NULL;
    us.id_marker = s3__req_param(x->req, "upload-id-marker");
    us.out = evbuffer_new();
    int rc = core_mpu_list(x->core, &x->p, x->bucket_ino, prefix, prefix ? strlen(prefix) : 0,
                           upload_cb, &us);
    if (rc) {
        evbuffer_free(us.out);
        evbuffer_free(us.prefixes);
        s3__resp_err(x, rc, NULL);
        return;
    }
    s3__resp_xml(x);
    struct evbuffer *b = x->out.body;
    evbuffer_add_printf(b, "<ListMultipartUploadsResult xmlns=\"%s\">", S3_XMLNS);
    s3__xml_elem(b, "Bucket", x->rt.bucket);
    s3__xml_elem(b, "KeyMarker", us.key_marker);
    s3__xml_elem(b, "UploadIdMarker", us.id_marker);
    if (us.truncated) {
        s3__xml_elem(b, "NextKeyMarker", us.next_key);
        s3__xml_elem(b, "NextUploadIdMarker", us.next_id);
    }
    if (prefix)
        s3__xml_elem(b, "Prefix", prefix);
    if (us.delim)
        s3__xml_elem(b, "Delimiter", us.delim);
    s3__xml_elem_u64(b, "MaxUploads", us.max);
    s3__xml_elem(b, "IsTruncated", us.truncated ? "true" : "false");
    evbuffer_add_buffer(b, us.out);
    evbuffer_add_buffer(b, us.prefixes);
    evbuffer_add_printf(b, "</ListMultipartUploadsResult>\n");
    evbuffer_free(us.out);
    evbuffer_free(us.prefixes);
}

const struct s3_op s3_op_mpu_create = {.name = "CreateMultipartUpload",
                                       .action = "s3:PutObject",
                                       .az = S3_AZ_B_WRITE,
                                       .qos = QOS_META,
                                       .work = mpu_create};
const struct s3_op s3_op_mpu_complete = {.name = "CompleteMultipartUpload",
                                         .action = "s3:PutObject",
                                         .az = S3_AZ_B_WRITE,
                                         .body = S3_BODY_XML,
                                         .qos = QOS_META,
                                         .work = mpu_complete};
const struct s3_op s3_op_mpu_abort = {.name = "AbortMultipartUpload",
                                      .action = "s3:AbortMultipartUpload",
                                      .az = S3_AZ_B_WRITE,
                                      .qos = QOS_META,
                                      .work = mpu_abort};
const struct s3_op s3_op_mpu_list_parts = {.name = "ListParts",
                                           .action = "s3:ListMultipartUploadParts",
                                           .az = S3_AZ_B_READ,
                                           .qos = QOS_META,
                                           .work = mpu_list_parts};
const struct s3_op s3_op_mpu_list_uploads = {.name = "ListMultipartUploads",
                                             .action = "s3:ListBucketMultipartUploads",
                                             .az = S3_AZ_B_READ,
                                             .qos = QOS_META,
                                             .work = mpu_list_uploads};
