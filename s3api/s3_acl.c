/* SPDX-License-Identifier: Apache-2.0
 * s3_acl: S3 access control lists over the one POSIX permission model.
 *
 * A bucket or an object has one owner: its POSIX owner (uid). Its ACL is
 * what its mode bits say plus the grants S3 alone can express, kept in its
 * S3 metadata blob (S3_M_ACL records: the object's blob, or the bucket's
 * configuration blob, core_bucket_get):
 *   - the owner's bits are the owner's grant (read -> READ, write -> WRITE
 *     on a bucket; the owner always has READ_ACP and WRITE_ACP);
 *   - the others' bits are the grant of every user of the tenant
 *     (AuthenticatedUsers: read -> READ, write -> WRITE on a bucket), or of
 *     everybody, anonymous requests included (AllUsers), when a stored AllUsers
 *     grant of that permission says the resource is public: a stored group
 *     READ/WRITE grant only chooses AllUsers over AuthenticatedUsers and counts
 *     only while the others' bit is set, so a chmod over NFS takes it back;
 *   - the group's bits apply to S3 users of that group as they do over NFS
 *     (no S3 grantee expresses them);
 *   - grants to single users (by uid: users sharing a uid are one owner, as
 *     in POSIX) and the groups' READ_ACP/WRITE_ACP are S3's alone: NFS does
 *     not see them.
 * Setting an ACL through S3 therefore replaces the permission bits: the
 * owner's, and the group's and others' from the group grants: private 0600
 * (buckets 0700), public-read and authenticated-read 0644 (0755),
 * public-read-write on a bucket 0777.
 *
 * Canonical user IDs are 64 hex digits, the SHA-256 of the tenant and the
 * uid; a grant names a user of the request's tenant by that ID or by an
 * "e-mail address" that is its user name (or name@tenant). Anything else,
 * other tenants' users included, is refused alike, so a grant never reveals
 * whether a name exists elsewhere.
 * Thread: the work functions' (workers); reentrant. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "s3_internal.h"
#include "srv_err.h"
#include "srv_sigv4.h"
#include "tenants.h"

#define ACL_MAX_GRANTS 100
#define URI_ALL "http://acs.amazonaws.com/groups/global/AllUsers"
#define URI_AUTH "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#define URI_LOG "http://acs.amazonaws.com/groups/s3/LogDelivery"
#define XSI "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""

static const struct {
    const char *name;
    unsigned perm;
} PERMS[] = {
    {"FULL_CONTROL", S3_P_FULL}, {"READ", S3_P_READ},           {"WRITE", S3_P_WRITE},
    {"READ_ACP", S3_P_READ_ACP}, {"WRITE_ACP", S3_P_WRITE_ACP},
};

/* ---------------------------------------------------------------- identities */

void s3__acl_id(uint32_t tenant, uint32_t uid, char out[65])
{
    char in[48];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    int l = snprintf(in, sizeof(in), "s3nfs-owner:%u:%u", tenant, uid);
    EVP_Digest(in, (size_t)l, md, &n, EVP_sha256(), NULL);
    srv_sigv4_hex(md, 32, out);
}

struct who_scan {
    uint32_t uid;
    const char *id;   /* find by canonical ID, or ... */
    const char *name; /* ... by name; else by uid */
    uint32_t tenant;
    bool found;
    struct tenant_user u;
};

static int who_cb(void *arg, const struct tenant_user *u)
{
    struct who_scan *w = arg;
    bool hit;
    if (w->id) {
        char id[65];
        s3__acl_id(w->tenant, u->uid, id);
        hit = strcmp(id, w->id) == 0;
    } else if (w->name) {
        hit = strcmp(u->name, w->name) == 0;
    } else {
        hit = u->uid == w->uid;
    }
    if (hit && (!w->found || u->id < w->u.id)) {
        w->u = *u;
        w->found = true;
    }
    return 0;
}

const char *s3__acl_name(struct s3_ctx *x, uint32_t uid)
{
    struct who_scan w = {.uid = uid, .tenant = x->p.tenant};
    if (x->tenants)
        tenants_user_list(x->tenants, x->p.tenant, who_cb, &w);
    if (w.found)
        return s3__arena_strndup(x->a, w.u.name, strlen(w.u.name));
    return s3__arena_printf(x->a, "uid-%u", uid);
}

int s3__acl_uid_of(struct s3_ctx *x, const char *v, bool email, uint32_t *uid)
{
    struct who_scan w = {.tenant = x->p.tenant};
    char name[TENANT_NAME_MAX + 1];
    if (email) {
        const char *at = strchr(v, '@');
        size_t nl = at ? (size_t)(at - v) : strlen(v);
        if (nl == 0 || nl > TENANT_NAME_MAX)
            return -ENOENT;
        if (at) {
            struct tenant_info ti;
            if (!x->tenants || tenants_tenant_get(x->tenants, x->p.tenant, &ti) != 0 ||
                strcasecmp(at + 1, ti.name) != 0)
                return -ENOENT;
        }
        memcpy(name, v, nl);
        name[nl] = '\0';
        w.name = name;
    } else {
        if (strlen(v) != 64)
            return -ENOENT;
        w.id = v;
    }
    if (x->tenants)
        tenants_user_list(x->tenants, x->p.tenant, who_cb, &w);
    if (!w.found)
        return -ENOENT;
    *uid = w.u.uid;
    return 0;
}

/* ---------------------------------------------------------------- stored grants */

static void grant_add(struct s3_acl *acl, struct s3_arena *a, enum s3_gt kind, uint32_t uid,
                      unsigned perm)
{
    for (size_t i = 0; i < acl->n; i++)
        if (acl->g[i].kind == kind && (kind != S3_GT_USER || acl->g[i].uid == uid)) {
            acl->g[i].perm |= perm;
            return;
        }
    if (acl->n == acl->cap) {
        size_t cap = acl->cap ? acl->cap * 2 : 8;
        struct s3_grant *g = s3__arena_alloc(a, cap * sizeof(*g));
        if (acl->n)
            memcpy(g, acl->g, acl->n * sizeof(*g));
        acl->g = g;
        acl->cap = cap;
    }
    acl->g[acl->n++] = (struct s3_grant){.kind = kind, .uid = uid, .perm = perm};
}

void s3__acl_load(struct s3_acl *acl, struct s3_arena *a, const struct s3_meta *m)
{
    memset(acl, 0, sizeof(*acl));
    for (size_t i = 0; m && i < m->n; i++) {
        const struct s3_meta_ent *e = &m->ents[i];
        if (e->type != S3_M_ACL)
            continue;
        unsigned perm = (unsigned)strtoul(e->val, NULL, 10) & S3_P_FULL;
        if (strcmp(e->key, "all") == 0)
            grant_add(acl, a, S3_GT_ALL, 0, perm);
        else if (strcmp(e->key, "auth") == 0)
            grant_add(acl, a, S3_GT_AUTH, 0, perm);
        else if (strncmp(e->key, "uid:", 4) == 0)
            grant_add(acl, a, S3_GT_USER, (uint32_t)strtoul(e->key + 4, NULL, 10), perm);
    }
}

void s3__acl_store(struct s3_meta *m, struct s3_arena *a, const struct s3_acl *acl)
{
    s3__meta_drop(m, S3_M_ACL);
    for (size_t i = 0; i < acl->n; i++) {
        const struct s3_grant *g = &acl->g[i];
        if (!g->perm)
            continue;
        const char *k = g->kind == S3_GT_ALL    ? "all"
                        : g->kind == S3_GT_AUTH ? "auth"
                                                : s3__arena_printf(a, "uid:%u", g->uid);
        char v[8];
        int vl = snprintf(v, sizeof(v), "%u", g->perm);
        s3__meta_add(m, a, S3_M_ACL, k, strlen(k), v, (size_t)vl);
    }
}

/* ---------------------------------------------------------------- effective permissions */

/* The group grant (AllUsers or AuthenticatedUsers) that the others' bits stand for. */
static enum s3_gt others_kind(const struct s3_acl *acl, unsigned perm)
{
    for (size_t i = 0; i < acl->n; i++)
        if (acl->g[i].kind == S3_GT_ALL && (acl->g[i].perm & perm))
            return S3_GT_ALL;
    return S3_GT_AUTH;
}

/* READ/WRITE the others' bits of @p at grant. */
static unsigned others_perm(const struct core_attr *at, bool bucket)
{
    unsigned p = 0;
    if (at->mode & 04)
        p |= S3_P_READ;
    if (bucket && (at->mode & 02))
        p |= S3_P_WRITE;
    return p;
}

/* The owner's permissions: from the owner's bits, and always the ACPs. */
static unsigned owner_perm(const struct core_attr *at, bool bucket)
{
    unsigned p = S3_P_READ_ACP | S3_P_WRITE_ACP;
    if (at->mode & 0400)
        p |= S3_P_READ;
    if (bucket && (at->mode & 0200))
        p |= S3_P_WRITE;
    if (!bucket && (at->mode & 0400))
        p |= S3_P_WRITE; /* an object's FULL_CONTROL (WRITE means nothing on an object) */
    return p;
}

unsigned s3__acl_perms(const struct core_principal *p, const struct core_attr *at,
                       const struct s3_acl *acl, bool bucket, unsigned flags)
{
    bool anon = p->flags & CORE_P_ANON;
    bool pub_ok = !(flags & S3_ACL_IGNORE_PUBLIC);
    unsigned perm = 0;
    if (!anon) {
        enum core_pclass cls;
        uint32_t bits = core_perm_bits(p, at, &cls);
        if (cls == CORE_PC_SUPER || cls == CORE_PC_OWNER)
            perm |= owner_perm(at, bucket) | (cls == CORE_PC_SUPER ? S3_P_FULL : 0);
        else if (cls == CORE_PC_GROUP)
            perm |= ((bits & 4) ? S3_P_READ : 0) | ((bucket && (bits & 2)) ? S3_P_WRITE : 0);
        else if (pub_ok)
            perm |= others_perm(at, bucket);
    }
    unsigned oth = others_perm(at, bucket);
    for (size_t i = 0; acl && i < acl->n; i++) {
        const struct s3_grant *g = &acl->g[i];
        if (g->kind == S3_GT_USER) {
            if (!anon && g->uid == p->uid)
                perm |= g->perm;
            continue;
        }
        if (!pub_ok || (g->kind == S3_GT_AUTH && anon))
            continue;
        /* a group's READ/WRITE only while the others' bit grants it */
        perm |= g->perm & (S3_P_READ_ACP | S3_P_WRITE_ACP);
        if (g->kind == S3_GT_ALL)
            perm |= g->perm & oth;
    }
    return perm;
}

bool s3__acl_is_public(const struct core_attr *at, const struct s3_acl *acl, bool bucket)
{
    for (size_t i = 0; acl && i < acl->n; i++)
        if (acl->g[i].kind != S3_GT_USER && ((acl->g[i].perm & (S3_P_READ_ACP | S3_P_WRITE_ACP)) ||
                                             (acl->g[i].perm & others_perm(at, bucket))))
            return true;
    return others_perm(at, bucket) != 0;
}

/* ---------------------------------------------------------------- the XML view */

static void perm_xml(struct evbuffer *b, const char *grantee, unsigned perm, bool bucket)
{
    if ((perm & S3_P_FULL) == S3_P_FULL) {
        evbuffer_add_printf(b, "<Grant>%s<Permission>FULL_CONTROL</Permission></Grant>", grantee);
        return;
    }
    for (size_t i = 1; i < sizeof(PERMS) / sizeof(PERMS[0]); i++)
        if ((perm & PERMS[i].perm) && (bucket || PERMS[i].perm != S3_P_WRITE))
            evbuffer_add_printf(b, "<Grant>%s<Permission>%s</Permission></Grant>", grantee,
                                PERMS[i].name);
}

static const char *user_xml(struct s3_ctx *x, uint32_t uid)
{
    char id[65];
    s3__acl_id(x->p.tenant, uid, id);
    struct evbuffer *t = evbuffer_new();
    evbuffer_add_printf(t, "<Grantee " XSI " xsi:type=\"CanonicalUser\"><ID>%s</ID>", id);
    const char *name = s3__acl_name(x, uid);
    s3__xml_elem(t, "DisplayName", name);
    evbuffer_add_printf(t, "</Grantee>");
    size_t n = evbuffer_get_length(t);
    char *s = s3__arena_alloc(x->a, n + 1);
    evbuffer_remove(t, s, n);
    evbuffer_free(t);
    return s;
}

void s3__acl_owner_xml(struct s3_ctx *x, struct evbuffer *b, const char *tag, uint32_t uid)
{
    char id[65];
    s3__acl_id(x->p.tenant, uid, id);
    evbuffer_add_printf(b, "<%s><ID>%s</ID>", tag, id);
    s3__xml_elem(b, "DisplayName", s3__acl_name(x, uid));
    evbuffer_add_printf(b, "</%s>", tag);
}

void s3__acl_xml(struct s3_ctx *x, struct evbuffer *b, const struct core_attr *at,
                 const struct s3_acl *acl, bool bucket, uint32_t owner)
{
    evbuffer_add_printf(b, "<AccessControlPolicy xmlns=\"%s\">", S3_XMLNS);
    s3__acl_owner_xml(x, b, "Owner", owner);
    evbuffer_add_printf(b, "<AccessControlList>");
    /* the owner's grant first, then users, then the groups */
    struct core_attr oat = *at;
    oat.uid = owner;
    perm_xml(b, user_xml(x, owner), owner_perm(&oat, bucket), bucket);
    for (size_t i = 0; acl && i < acl->n; i++)
        if (acl->g[i].kind == S3_GT_USER && acl->g[i].uid != owner)
            perm_xml(b, user_xml(x, acl->g[i].uid), acl->g[i].perm, bucket);
    unsigned oth = others_perm(at, bucket);
    unsigned groups[3] = {0}; /* by enum s3_gt */
    if (oth & S3_P_READ)
        groups[others_kind(acl ? acl : &(struct s3_acl){0}, S3_P_READ)] |= S3_P_READ;
    if (oth & S3_P_WRITE)
        groups[others_kind(acl ? acl : &(struct s3_acl){0}, S3_P_WRITE)] |= S3_P_WRITE;
    for (size_t i = 0; acl && i < acl->n; i++)
        if (acl->g[i].kind != S3_GT_USER)
            groups[acl->g[i].kind] |= acl->g[i].perm & (S3_P_READ_ACP | S3_P_WRITE_ACP);
    static const char *const uri[3] = {NULL, URI_AUTH, URI_ALL};
    for (int k = S3_GT_AUTH; k <= S3_GT_ALL; k++)
        if (groups[k])
            perm_xml(b,
                     s3__arena_printf(x->a,
                                      "<Grantee " XSI " xsi:type=\"Group\"><URI>%s</URI></Grantee>",
                                      uri[k]),
                     groups[k], bucket);
    evbuffer_add_printf(b, "</AccessControlList></AccessControlPolicy>\n");
}

/* ---------------------------------------------------------------- ACLs asked for */

/* The others' bits an ACL's group grants ask for. */
static uint32_t acl_other_bits(const struct s3_acl *acl, bool bucket)
{
    uint32_t m = 0;
    for (size_t i = 0; i < acl->n; i++) {
        if (acl->g[i].kind == S3_GT_USER)
            continue;
        if (acl->g[i].perm & S3_P_READ)
            m |= bucket ? 05 : 04;
        if (bucket && (acl->g[i].perm & S3_P_WRITE))
            m |= 03;
    }
    return m;
}

uint32_t s3__acl_mode(const struct s3_acl *acl, bool bucket)
{
    /* the group gets what the others get: in POSIX the group's bits, not the
     * others', apply to its members */
    uint32_t owner = bucket ? 0700 : 0600, other = acl_other_bits(acl, bucket);
    return owner | (other << 3) | other;
}

/* A canned ACL as grants. @return 0, -EINVAL (unknown), -ENOTSUP (not built). */
static int canned(struct s3_arena *a, const char *name, bool bucket, uint32_t bucket_owner,
                  struct s3_acl *acl)
{
    memset(acl, 0, sizeof(*acl));
    if (strcmp(name, "private") == 0)
        return 0;
    if (strcmp(name, "public-read") == 0) {
        grant_add(acl, a, S3_GT_ALL, 0, S3_P_READ);
        return 0;
    }
    if (strcmp(name, "public-read-write") == 0) {
        grant_add(acl, a, S3_GT_ALL, 0, S3_P_READ | S3_P_WRITE);
        return 0;
    }
    if (strcmp(name, "authenticated-read") == 0) {
        grant_add(acl, a, S3_GT_AUTH, 0, S3_P_READ);
        return 0;
    }
    if (strcmp(name, "bucket-owner-read") == 0 || strcmp(name, "bucket-owner-full-control") == 0) {
        /* objects only: on a bucket (its own owner) they are private, as AWS */
        if (!bucket)
            grant_add(acl, a, S3_GT_USER, bucket_owner, name[13] == 'r' ? S3_P_READ : S3_P_FULL);
        return 0;
    }
    if (strcmp(name, "aws-exec-read") == 0 || strcmp(name, "log-delivery-write") == 0)
        return -ENOTSUP;
    return -EINVAL;
}

/* Add the grantees of one x-amz-grant-* header value ('id="..", uri=".."'). */
static int grant_header(struct s3_ctx *x, const char *v, unsigned perm, struct s3_acl *acl,
                        const char **why)
{
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *ts = p;
        const char *eq = strchr(p, '=');
        if (!eq) {
            *why = "a grant header is malformed (expected type=\"value\")";
            return -EINVAL;
        }
        size_t tl = (size_t)(eq - ts);
        while (tl && ts[tl - 1] == ' ')
            tl--;
        const char *q = eq + 1;
        while (*q == ' ')
            q++;
        const char *vs, *ve;
        if (*q == '"') {
            vs = q + 1;
            ve = strchr(vs, '"');
            if (!ve) {
                *why = "a grant header is malformed (unterminated quote)";
                return -EINVAL;
            }
            p = ve + 1;
        } else {
            vs = q;
            ve = q;
            while (*ve && *ve != ',')
                ve++;
            p = ve;
        }
        char *val = s3__arena_strndup(x->a, vs, (size_t)(ve - vs));
        int rc = s3__acl_grantee(x, ts, tl, val, perm, acl, why);
        if (rc)
            return rc;
    }
    return 0;
}

int s3__acl_grantee(struct s3_ctx *x, const char *type, size_t tl, const char *val, unsigned perm,
                    struct s3_acl *acl, const char **why)
{
    uint32_t uid;
    if (tl == 2 && strncasecmp(type, "id", 2) == 0) {
        if (s3__acl_uid_of(x, val, false, &uid) != 0) {
            *why = "invalid id";
            return -EINVAL;
        }
        grant_add(acl, x->a, S3_GT_USER, uid, perm);
    } else if (tl == 12 && strncasecmp(type, "emailAddress", 12) == 0) {
        if (s3__acl_uid_of(x, val, true, &uid) != 0) {
            *why = "the e-mail address you provided does not match any account on record";
            return -ENOENT;
        }
        grant_add(acl, x->a, S3_GT_USER, uid, perm);
    } else if (tl == 3 && strncasecmp(type, "uri", 3) == 0) {
        if (strcmp(val, URI_ALL) == 0)
            grant_add(acl, x->a, S3_GT_ALL, 0, perm);
        else if (strcmp(val, URI_AUTH) == 0)
            grant_add(acl, x->a, S3_GT_AUTH, 0, perm);
        else if (strcmp(val, URI_LOG) == 0) {
            *why = "the LogDelivery group is not implemented (no server access logging)";
            return -ENOTSUP;
        } else {
            *why = "invalid group uri";
            return -EINVAL;
        }
    } else {
        *why = "a grantee type must be id, emailAddress or uri";
        return -EINVAL;
    }
    if (acl->n > ACL_MAX_GRANTS) {
        *why = "an ACL has at most 100 grants";
        return -EINVAL;
    }
    return 0;
}

/* Answer a refused ACL. */
static int acl_fail(struct s3_ctx *x, int rc, const char *why)
{
    if (rc == -ENOTSUP)
        s3__resp_err(x, SRV_ENOTSUPP, why);
    else if (rc == -ENOENT)
        s3__resp_s3err(x, S3E_UNRESOLVABLE_EMAIL, why);
    else
        s3__resp_err(x, -EINVAL, why);
    return -1;
}

int s3__acl_from_req(struct s3_ctx *x, bool bucket, uint32_t bucket_owner, struct s3_acl *acl,
                     bool *given)
{
    static const struct {
        const char *hdr;
        unsigned perm;
    } GH[] = {
        {"x-amz-grant-full-control", S3_P_FULL},   {"x-amz-grant-read", S3_P_READ},
        {"x-amz-grant-write", S3_P_WRITE},         {"x-amz-grant-read-acp", S3_P_READ_ACP},
        {"x-amz-grant-write-acp", S3_P_WRITE_ACP},
    };
    const struct s3_req *r = x->req;
    const char *cn = s3__req_header(r, "x-amz-acl");
    bool grants = false;
    memset(acl, 0, sizeof(*acl));
    *given = false;
    for (size_t i = 0; i < r->nhdrs; i++)
        if (strncmp(r->hdrs[i].name, "x-amz-grant-", 12) == 0)
            grants = true;
    if (cn && grants) {
        s3__resp_s3err(x, S3E_INVALID_REQUEST,
                       "specifying both canned ACLs and header grants is not allowed");
        return -1;
    }
    if (cn) {
        int rc = canned(x->a, cn, bucket, bucket_owner, acl);
        if (rc)
            return acl_fail(x, rc,
                            rc == -ENOTSUP
                                ? s3__arena_printf(x->a, "the canned ACL %s is not implemented", cn)
                                : "the canned ACL is not valid");
        *given = true;
        return 0;
    }
    for (size_t i = 0; i < r->nhdrs; i++) {
        const char *n = r->hdrs[i].name;
        if (strncmp(n, "x-amz-grant-", 12) != 0)
            continue;
        size_t k = 0;
        while (k < sizeof(GH) / sizeof(GH[0]) && strcmp(GH[k].hdr, n) != 0)
            k++;
        if (k == sizeof(GH) / sizeof(GH[0]))
            return acl_fail(x, -EINVAL, s3__arena_printf(x->a, "unknown grant header %s", n));
        const char *why = NULL;
        int rc = grant_header(x, r->hdrs[i].val, GH[k].perm, acl, &why);
        if (rc)
            return acl_fail(x, rc, why);
        *given = true;
    }
    return 0;
}

int s3__acl_from_xml(struct s3_ctx *x, const char *doc, size_t n, uint32_t owner,
                     struct s3_acl *acl)
{
    struct s3_xnode *root = NULL, *list, *o;
    memset(acl, 0, sizeof(*acl));
    if (!n || s3__xml_parse(x->a, doc, n, &root) ||
        strcmp(root->name, "AccessControlPolicy") != 0 ||
        !(list = s3__xml_child(root, "AccessControlList"))) {
        s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
        return -1;
    }
    if ((o = s3__xml_child(root, "Owner")) && s3__xml_child(o, "ID")) {
        char id[65];
        s3__acl_id(x->p.tenant, owner, id);
        if (strcmp(s3__xml_child(o, "ID")->text, id) != 0) {
            s3__resp_err(x, -EACCES, "an ACL cannot change the owner");
            return -1;
        }
    }
    for (struct s3_xnode *g = list->child; g; g = g->next) {
        if (strcmp(g->name, "Grant") != 0)
            continue;
        struct s3_xnode *ge = s3__xml_child(g, "Grantee"), *pe = s3__xml_child(g, "Permission");
        unsigned perm = 0;
        for (size_t i = 0; pe && i < sizeof(PERMS) / sizeof(PERMS[0]); i++)
            if (strcmp(pe->text, PERMS[i].name) == 0)
                perm = PERMS[i].perm;
        if (!ge || !perm) {
            s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
            return -1;
        }
        struct s3_xnode *v;
        const char *why = NULL;
        int rc;
        if ((v = s3__xml_child(ge, "ID")) != NULL)
            rc = s3__acl_grantee(x, "id", 2, v->text, perm, acl, &why);
        else if ((v = s3__xml_child(ge, "EmailAddress")) != NULL)
            rc = s3__acl_grantee(x, "emailAddress", 12, v->text, perm, acl, &why);
        else if ((v = s3__xml_child(ge, "URI")) != NULL)
            rc = s3__acl_grantee(x, "uri", 3, v->text, perm, acl, &why);
        else {
            s3__resp_err(x, SRV_EBADREQ, S3_MSG_BAD_XML);
            return -1;
        }
        if (rc)
            return acl_fail(x, rc, why);
    }
    /* the owner's own grant is implied by its bits: keep only what it adds */
    for (size_t i = 0; i < acl->n; i++)
        if (acl->g[i].kind == S3_GT_USER && acl->g[i].uid == owner)
            acl->g[i].perm = 0;
    return 0;
}
