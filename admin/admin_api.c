/* SPDX-License-Identifier: Apache-2.0
 * admin_api: the JSON REST API under /api/v1 (authenticated by admin.c).
 *
 * Dispatch is data: routes[] below lists every path pattern, the methods it
 * answers, the methods only a system admin may use, what it needs (the store,
 * QoS, or an existing tenant, user, key or export: checked and answered for
 * before the handler runs), and its handler.
 * docs/openapi.yaml describes the same routes (a test compares the two).
 *
 * Scopes: a system admin (the bearer token, or an admin user of the bootstrap
 * tenant) may do everything. A tenant admin (an admin user of another tenant,
 * by SigV4) may reach only paths of its own tenant, its own keys and exports,
 * and not the methods a route reserves for system admins (creating, renaming
 * and deleting tenants; the tenant's own quota and QoS policy): anything else
 * answers 403.
 *
 * Lists take ?limit=N (1..1000) and ?marker=M (the last id or access key of
 * the previous page); when more remain the answer carries X-Next-Marker.
 * Errors: {"error": CODE, "message": TEXT} with 400 (bad JSON, field or query),
 * 403, 404, 405, 409 (exists / not empty), 503 (component not running), 500.
 * Thread: the admin thread. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_int.h"
#include "core.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_path.h"
#include "tenants.h"
#include "tier_cache.h"
#include "tier_policy.h"
#include "tier_settings.h"
#include "tier_upload.h"

#define SEG_MAX 8

static void reply_json(struct evhttp_request *req, int status, json_t *j)
{
    struct evbuffer *b = evbuffer_new();
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!b || !s) {
        free(s);
        if (b)
            evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add(b, s, strlen(s));
    evbuffer_add(b, "\n", 1);
    free(s);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
}

static void reply_empty(struct evhttp_request *req, int status)
{
    evhttp_send_reply(req, status, NULL, NULL);
}

/* Answer internal error @p err with its admin API code and status (common/srv_err.h's
 * map); a 500 is logged. */
static void reply_err(struct evhttp_request *req, int err, const char *what)
{
    const struct srv_err_info *e = srv_err_info(err);
    if (e->admin_http >= 500)
        srv_log(ERROR, ADMIN, "%s: %s", what, srv_strerror(err));
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", what,
             err == -EBUSY ? "exports would conflict (an export of \"/\" and an export in a "
                             "tenant's prefix, for overlapping clients; see the log)"
                           : srv_strerror(err));
    admin__error_of(req, err, msg);
}

/* Answer a failed lookup: -ENOENT (and "no such bucket") as 404 with the
 * message formatted from @p fmt, which names the resource ("no such user 7 in
 * tenant 'acme'"); anything else as reply_err(@p what). */
static void lookup_failed(struct evhttp_request *req, int err, const char *what,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void lookup_failed(struct evhttp_request *req, int err, const char *what,
                          const char *fmt, ...)
{
    if (srv_err_info(err)->admin_http != 404) {
        reply_err(req, err, what);
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    admin__error_of(req, err, msg);
}

static void bad(struct evhttp_request *req, const char *msg)
{
    admin__error_of(req, -EINVAL, msg);
}

static void no_method(struct evhttp_request *req)
{
    admin__error(req, ADMIN_E_METHOD_NOT_ALLOWED, "method not allowed on this resource");
}

/* Parse the request body as a JSON object (NULL and a 400 sent on failure). */
static json_t *body_json(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    json_error_t e;
    json_t *j = json_loadb(n ? (const char *)evbuffer_pullup(in, -1) : "{}", n ? n : 2, 0, &e);
    if (!j || !json_is_object(j)) {
        char msg[200];
        snprintf(msg, sizeof(msg), "body must be a JSON object (%s)", j ? "not an object" : e.text);
        json_decref(j);
        bad(req, msg);
        return NULL;
    }
    return j;
}

/* Optional unsigned integer field; @return 0 (absent: untouched), -1 (400 sent). */
static int get_uint(struct evhttp_request *req, json_t *j, const char *field, uint64_t max,
                    uint64_t *out)
{
    json_t *v = json_object_get(j, field);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max) {
        char msg[160];
        snprintf(msg, sizeof(msg), "'%s' must be an integer from 0 to %" PRIu64, field, max);
        bad(req, msg);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_bool(struct evhttp_request *req, json_t *j, const char *field, bool *out)
{
    json_t *v = json_object_get(j, field);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "'%s' must be true or false", field);
        bad(req, msg);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 19)
        return false;
    *out = strtoull(s, &end, 10);
    return true;
}

/* ---- JSON views ---- */

static json_t *tenant_json(const struct tenant_info *ti)
{
    return json_pack("{s:I,s:s,s:I}", "id", (json_int_t)ti->id, "name", ti->name, "root",
                     (json_int_t)ti->root);
}

static json_t *user_json(const struct tenant_user *u)
{
    json_t *gids = json_array();
    for (uint32_t i = 0; i < u->ngids; i++)
        json_array_append_new(gids, json_integer(u->gids[i]));
    return json_pack("{s:I,s:I,s:s,s:I,s:I,s:o,s:b,s:b}", "tenant", (json_int_t)u->tenant, "id",
                     (json_int_t)u->id, "name", u->name, "uid", (json_int_t)u->uid, "gid",
                     (json_int_t)u->gid, "gids", gids, "disabled", u->disabled, "tenant_admin",
                     u->tenant_admin);
}

static json_t *key_json(const struct tenant_key *k)
{
    return json_pack("{s:s,s:I,s:I,s:b}", "access_key", k->akey, "tenant",
                     (json_int_t)k->tenant, "user", (json_int_t)k->user, "disabled", k->disabled);
}

static json_t *export_json(const struct tenant_export *e)
{
    json_t *nets = json_array();
    for (uint32_t i = 0; i < e->nnets; i++) {
        char buf[64];
        tenants_net_format(&e->nets[i], buf, sizeof(buf));
        json_array_append_new(nets, json_string(buf));
    }
    json_t *j = json_pack("{s:I,s:I,s:s,s:I,s:b,s:b,s:b,s:I,s:I,s:o}", "id",
                          (json_int_t)e->id, "tenant", (json_int_t)e->tenant, "path", e->path,
                          "dir", (json_int_t)e->dir, "read_only",
                          (e->flags & TENANT_EXPORT_RO) != 0, "root_squash",
                          (e->flags & TENANT_EXPORT_ROOT_SQUASH) != 0, "all_squash",
                          (e->flags & TENANT_EXPORT_ALL_SQUASH) != 0, "anon_uid",
                          (json_int_t)e->anon_uid, "anon_gid", (json_int_t)e->anon_gid,
                          "clients", nets);
    /* Suspended at start: not served while it conflicts with this older export. */
    if (j && e->conflict)
        json_object_set_new(j, "conflicts_with", json_integer(e->conflict));
    return j;
}

static json_t *usage_json(const struct core_usage *u)
{
    return json_pack("{s:I,s:I,s:I,s:I}", "bytes", (json_int_t)u->bytes, "inodes",
                     (json_int_t)u->inodes, "bytes_limit", (json_int_t)u->bytes_limit,
                     "inodes_limit", (json_int_t)u->inodes_limit);
}

static json_t *qos_json(const struct qos_policy *p)
{
    json_t *j = json_pack(
        "{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "tenant",
        (json_int_t)p->tenant, "level", qos_level_name(p->level), "user", (json_int_t)p->user,
        "read_bps", (json_int_t)p->read_bps, "write_bps", (json_int_t)p->write_bps, "read_iops",
        (json_int_t)p->read_iops, "write_iops", (json_int_t)p->write_iops, "meta_iops",
        (json_int_t)p->meta_iops, "burst_ms", (json_int_t)p->burst_ms, "min_read_bps",
        (json_int_t)p->min_read_bps, "min_write_bps", (json_int_t)p->min_write_bps, "min_iops",
        (json_int_t)p->min_iops, "weight", (json_int_t)(p->weight ? p->weight : QOS_WEIGHT_DEFAULT),
        "bucket_ino", (json_int_t)p->bucket);
    if (j && p->level == QOS_LEVEL_DIR)
        json_object_set_new(j, "dir_ino", json_integer((json_int_t)p->dir));
    if (j && p->has_uid)
        json_object_set_new(j, "uid", json_integer(p->uid));
    return j;
}

static int append_tenant(void *arg, const struct tenant_info *ti)
{
    return json_array_append_new(arg, tenant_json(ti)) ? -ENOMEM : 0;
}

static int append_user(void *arg, const struct tenant_user *u)
{
    return json_array_append_new(arg, user_json(u)) ? -ENOMEM : 0;
}

static int append_key(void *arg, const struct tenant_key *k)
{
    return json_array_append_new(arg, key_json(k)) ? -ENOMEM : 0;
}

static int append_export(void *arg, const struct tenant_export *e)
{
    return json_array_append_new(arg, export_json(e)) ? -ENOMEM : 0;
}

/* ---- requests, pages ---- */

/* One API request after routing. */
struct api_req {
    struct admin *a;
    struct evhttp_request *req;
    enum evhttp_cmd_type cmd;
    const struct admin_caller *who;
    struct evkeyvalq query;
    uint32_t tenant;        /* {tenant} */
    uint64_t user;          /* {user} */
    uint32_t export;        /* {export} */
    const char *bucket;     /* {bucket} */
    const char *akey;       /* {akey} */
    uint32_t remote;        /* {remote} */
    struct tenant_info ti;  /* {tenant}, when the route has NEED_TENANT */
    struct tenant_user u;   /* {user}, when the route has NEED_USER */
    struct tenant_key k;    /* {akey}, when the route has NEED_KEY */
    struct tenant_export e; /* {export}, when the route has NEED_EXPORT */
};

#define PAGE_MAX 1000

/* The text key of an item without a numeric "id": a key's access key, a bucket's name. */
static const char *item_text_key(json_t *it)
{
    json_t *k = json_object_get(it, "access_key");
    if (!k)
        k = json_object_get(it, "name");
    return json_string_value(k) ?: "";
}

static int item_cmp(const void *x, const void *y)
{
    json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    json_t *ia = json_object_get(a, "id"), *ib = json_object_get(b, "id");
    if (ia && ib) {
        json_int_t va = json_integer_value(ia), vb = json_integer_value(ib);
        return va < vb ? -1 : va > vb;
    }
    return strcmp(item_text_key(a), item_text_key(b));
}

/* The key an item sorts by, as text (for markers). */
static void item_marker(json_t *it, char *buf, size_t len)
{
    json_t *id = json_object_get(it, "id");
    if (id)
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
    else
        snprintf(buf, len, "%s", item_text_key(it));
}

/* Is @p it after @p marker (numeric ids compare as numbers)? */
static bool item_after(json_t *it, const char *marker)
{
    json_t *id = json_object_get(it, "id");
    if (id) {
        uint64_t m;
        if (!parse_u64(marker, &m))
            return true;
        return (uint64_t)json_integer_value(id) > m;
    }
    return strcmp(item_text_key(it), marker) > 0;
}

/* Sort @p all (by "id", else by access key or name), keep the page
 * ?marker/?limit asks for, send it (consumes @p all). */
static void reply_page(struct api_req *x, json_t *all)
{
    const char *ls = evhttp_find_header(&x->query, "limit");
    const char *marker = evhttp_find_header(&x->query, "marker");
    uint64_t limit = PAGE_MAX;
    if (ls && (!parse_u64(ls, &limit) || limit == 0 || limit > PAGE_MAX)) {
        json_decref(all);
        bad(x->req, "'limit' must be an integer from 1 to 1000");
        return;
    }
    size_t n = json_array_size(all);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    json_t *out = json_array();
    if (!v || !out) {
        free(v);
        json_decref(out);
        json_decref(all);
        reply_err(x->req, -ENOMEM, "list");
        return;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(all, i);
    qsort(v, n, sizeof(*v), item_cmp);
    bool more = false;
    for (size_t i = 0; i < n; i++) {
        if (marker && *marker && !item_after(v[i], marker))
            continue;
        if (json_array_size(out) == limit) {
            more = true;
            break;
        }
        json_array_append(out, v[i]);
    }
    free(v);
    json_decref(all);
    if (more) {
        char m[CORE_NAME_MAX + TENANT_AKEY_MAX + 32];
        item_marker(json_array_get(out, json_array_size(out) - 1), m, sizeof(m));
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "X-Next-Marker", m);
    }
    reply_json(x->req, 200, out);
}

/* Answer a list call that returned @p rc: the page, or the error (consumes @p arr). */
static void reply_list(struct api_req *x, int rc, json_t *arr, const char *what)
{
    if (rc < 0) {
        json_decref(arr);
        reply_err(x->req, rc, what);
        return;
    }
    reply_page(x, arr);
}

/* Answer a delete call that returned @p rc: 204, or the error. */
static void reply_deleted(struct api_req *x, int rc, const char *what)
{
    if (rc < 0)
        reply_err(x->req, rc, what);
    else
        reply_empty(x->req, 204);
}

static bool is_system(const struct api_req *x)
{
    return x->who->tenant == 0;
}

static void forbidden(struct evhttp_request *req, const char *msg)
{
    admin__error_of(req, -EACCES, msg);
}

/* Resolve "a/b/c" below directory @p dir of tenant @p tenant to a directory.
 * @return 0, -ENOENT, -ENOTDIR, -EINVAL ("." or ".." or an empty path). */
static int resolve_dir(struct admin *a, uint32_t tenant, uint64_t dir, const char *path,
                       uint64_t *out)
{
    struct core_principal p = {.tenant = tenant, .flags = CORE_P_SUPER};
    struct core_attr at;
    const char *s = path;
    int rc;
    while (*s) {
        while (*s == '/')
            s++;
        size_t n = strcspn(s, "/");
        if (n == 0)
            break;
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return -EINVAL;
        if ((rc = core_lookup(a->core, &p, dir, s, n, &at)) < 0)
            return rc == SRV_ESTALE ? -ENOENT : rc;
        if (at.type != CORE_DIR)
            return -ENOTDIR;
        dir = at.ino;
        s += n;
    }
    *out = dir;
    return 0;
}

/* ---- resources ---- */

static void user_fields(struct evhttp_request *req, json_t *j, struct tenant_user *u, int *bad_)
{
    uint64_t v;
    *bad_ = 0;
    const char *name = json_string_value(json_object_get(j, "name"));
    if (name)
        snprintf(u->name, sizeof(u->name), "%.*s", TENANT_NAME_MAX, name);
    if (name && strlen(name) > TENANT_NAME_MAX) {
        bad(req, "'name' is longer than 63 bytes");
        *bad_ = 1;
        return;
    }
    v = u->uid;
    if (get_uint(req, j, "uid", UINT32_MAX, &v) < 0) {
        *bad_ = 1;
        return;
    }
    u->uid = (uint32_t)v;
    v = u->gid;
    if (get_uint(req, j, "gid", UINT32_MAX, &v) < 0) {
        *bad_ = 1;
        return;
    }
    u->gid = (uint32_t)v;
    json_t *gids = json_object_get(j, "gids");
    if (gids) {
        if (!json_is_array(gids) || json_array_size(gids) > CORE_MAX_GIDS) {
            bad(req, "'gids' must be an array of at most 16 group ids");
            *bad_ = 1;
            return;
        }
        u->ngids = 0;
        for (size_t i = 0; i < json_array_size(gids); i++) {
            json_t *g = json_array_get(gids, i);
            if (!json_is_integer(g) || json_integer_value(g) < 0 ||
                json_integer_value(g) > UINT32_MAX) {
                bad(req, "'gids' must hold integers from 0 to 4294967295");
                *bad_ = 1;
                return;
            }
            u->gids[u->ngids++] = (uint32_t)json_integer_value(g);
        }
    }
    if (get_bool(req, j, "disabled", &u->disabled) < 0 ||
        get_bool(req, j, "tenant_admin", &u->tenant_admin) < 0)
        *bad_ = 1;
}

/* The uids of a tenant's users, to pick a free one. */
struct uid_scan {
    uint32_t *v;
    size_t n;
};

static int collect_uid(void *arg, const struct tenant_user *u)
{
    struct uid_scan *s = arg;
    uint32_t *nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
    if (!nv)
        return 1;
    s->v = nv;
    s->v[s->n++] = u->uid;
    return 0;
}

/* The lowest uid from 1000 on that no user of @p tenant has: S3 users own
 * what they create by uid, so two users made without one must not share it. */
static uint32_t free_uid(struct tenants *t, uint32_t tenant)
{
    struct uid_scan s = {0};
    uint32_t uid = 1000;
    tenants_user_list(t, tenant, collect_uid, &s);
    for (bool taken = true; taken && uid < UINT32_MAX;) {
        taken = false;
        for (size_t i = 0; i < s.n; i++)
            if (s.v[i] == uid) {
                taken = true;
                uid++;
                break;
            }
    }
    free(s.v);
    return uid;
}

struct drop_ctx {
    uint32_t tenant;
    struct qos_policy pol[256];
    size_t n;
    bool more;
};

static int collect_policy(void *arg, const struct qos_policy *p)
{
    struct drop_ctx *d = arg;
    if (p->tenant != d->tenant)
        return 0;
    if (d->n == sizeof(d->pol) / sizeof(d->pol[0])) {
        d->more = true;
        return 1;
    }
    d->pol[d->n++] = *p;
    return 0;
}

static uint64_t qos_id_of(const struct qos_policy *p)
{
    switch (p->level) {
    case QOS_LEVEL_USER:
        return p->user;
    case QOS_LEVEL_BUCKET:
        return p->bucket;
    case QOS_LEVEL_DIR:
        return p->dir;
    default:
        return 0;
    }
}

/* Like collect_policy, for every tenant. */
static int collect_any(void *arg, const struct qos_policy *p)
{
    struct drop_ctx *d = arg;
    if (d->n == sizeof(d->pol) / sizeof(d->pol[0])) {
        d->more = true;
        return 1;
    }
    d->pol[d->n++] = *p;
    return 0;
}

/* Remove every QoS policy of the tenant, at every level. */
static void drop_tenant_qos(struct qos *q, uint32_t tenant)
{
    static struct drop_ctx d; /* large; the admin API runs on one thread */
    do {
        memset(&d, 0, sizeof(d));
        d.tenant = tenant;
        if (qos_policy_list(q, collect_policy, &d) < 0)
            return;
        for (size_t i = 0; i < d.n; i++)
            qos_policy_delete_at(q, tenant, d.pol[i].level, qos_id_of(&d.pol[i]));
    } while (d.more);
}

static void whoami(struct api_req *x)
{
    reply_json(x->req, 200,
               json_pack("{s:b,s:I,s:s}", "system_admin", is_system(x), "tenant",
                         (json_int_t)x->who->tenant, "caller", x->who->name));
}

static void tenants_collection(struct api_req *x)
{
    if (x->cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        int rc = 0;
        if (is_system(x)) {
            rc = tenants_tenant_list(x->a->tenants, append_tenant, arr);
        } else {
            struct tenant_info ti;
            rc = tenants_tenant_get(x->a->tenants, x->who->tenant, &ti);
            if (rc == 0)
                rc = append_tenant(arr, &ti);
        }
        reply_list(x, rc, arr, "list tenants");
        return;
    }
    json_t *j = body_json(x->req);
    if (!j)
        return;
    const char *name = json_string_value(json_object_get(j, "name"));
    if (!name) {
        json_decref(j);
        bad(x->req, "'name' (string) is required");
        return;
    }
    struct tenant_info ti;
    int rc = tenants_tenant_create(x->a->tenants, name, &ti);
    json_decref(j);
    if (rc < 0) {
        reply_err(x->req, rc, "create tenant");
        return;
    }
    srv_log(INFO, ADMIN, "tenant=%u created through the API by %s", ti.id, x->who->name);
    reply_json(x->req, 201, tenant_json(&ti));
}

static void tenant_item(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        reply_json(x->req, 200, tenant_json(&x->ti));
        return;
    }
    if (x->cmd == EVHTTP_REQ_DELETE) {
        if (x->tenant == ADMIN_SYSTEM_TENANT) {
            admin__error(x->req, ADMIN_E_IN_USE, "the bootstrap tenant cannot be deleted");
            return;
        }
        rc = tenants_tenant_delete(x->a->tenants, x->tenant);
        if (rc == 0) {
            if (x->a->qos)
                drop_tenant_qos(x->a->qos, x->tenant);
            srv_log(INFO, ADMIN, "tenant=%u deleted through the API by %s", x->tenant,
                    x->who->name);
        }
        reply_deleted(x, rc, "delete tenant");
        return;
    }
    json_t *j = body_json(x->req); /* PATCH */
    if (!j)
        return;
    const char *name = json_string_value(json_object_get(j, "name"));
    if (name) {
        rc = tenants_tenant_rename(x->a->tenants, x->tenant, name);
        if (rc < 0) {
            json_decref(j);
            reply_err(x->req, rc, "rename tenant");
            return;
        }
    } else if (json_object_get(j, "name")) {
        json_decref(j);
        bad(x->req, "'name' must be a string");
        return;
    }
    json_decref(j);
    tenants_tenant_get(x->a->tenants, x->tenant, &x->ti);
    reply_json(x->req, 200, tenant_json(&x->ti));
}

static void users_collection(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        rc = tenants_user_list(x->a->tenants, x->tenant, append_user, arr);
        reply_list(x, rc, arr, "list users");
        return;
    }
    json_t *j = body_json(x->req);
    if (!j)
        return;
    struct tenant_user u, out;
    memset(&u, 0, sizeof(u));
    u.tenant = x->tenant;
    /* no uid: a free one (and the same number as the group, a user private group) */
    u.uid = json_object_get(j, "uid") ? 1000 : free_uid(x->a->tenants, x->tenant);
    u.gid = json_object_get(j, "uid") ? 1000 : u.uid;
    int b;
    if (!json_is_string(json_object_get(j, "name"))) {
        json_decref(j);
        bad(x->req, "'name' (string) is required");
        return;
    }
    user_fields(x->req, j, &u, &b);
    json_decref(j);
    if (b)
        return;
    rc = tenants_user_create(x->a->tenants, &u, &out);
    if (rc < 0) {
        reply_err(x->req, rc, "create user");
        return;
    }
    reply_json(x->req, 201, user_json(&out));
}

static void user_item(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        reply_json(x->req, 200, user_json(&x->u));
        return;
    }
    if (x->cmd == EVHTTP_REQ_DELETE) {
        rc = tenants_user_delete(x->a->tenants, x->tenant, x->user);
        if (rc == 0 && x->a->qos)
            qos_policy_delete_user(x->a->qos, x->tenant, x->user); /* -ENOENT: none */
        reply_deleted(x, rc, "delete user");
        return;
    }
    json_t *j = body_json(x->req); /* PATCH, PUT */
    if (!j)
        return;
    int b;
    user_fields(x->req, j, &x->u, &b);
    json_decref(j);
    if (b)
        return;
    rc = tenants_user_update(x->a->tenants, &x->u);
    if (rc < 0) {
        reply_err(x->req, rc, "update user");
        return;
    }
    if (x->a->qos) /* NFS calls with the new uid are the user's (-ENOENT: no policy) */
        qos_policy_set_uid(x->a->qos, x->tenant, x->user, x->u.uid);
    reply_json(x->req, 200, user_json(&x->u));
}

struct key_filter {
    json_t *arr;
    uint64_t user; /* 0: every user */
};

static int append_key_of(void *arg, const struct tenant_key *k)
{
    struct key_filter *f = arg;
    if (f->user && k->user != f->user)
        return 0;
    return append_key(f->arr, k);
}

static void list_keys(struct api_req *x, uint64_t user)
{
    struct key_filter f = {.arr = json_array(), .user = user};
    int rc = tenants_key_list(x->a->tenants, x->tenant, append_key_of, &f);
    reply_list(x, rc, f.arr, "list keys");
}

static void user_keys(struct api_req *x)
{
    if (x->cmd == EVHTTP_REQ_GET) {
        list_keys(x, x->user);
        return;
    }
    char ak[TENANT_AKEY_MAX + 1], sk[TENANT_SECRET_MAX + 1];
    int rc = tenants_key_create(x->a->tenants, x->tenant, x->user, ak, sk);
    if (rc < 0) {
        reply_err(x->req, rc, "create key");
        return;
    }
    reply_json(x->req, 201,
               json_pack("{s:s,s:s,s:I,s:I,s:b}", "access_key", ak, "secret_key", sk, "tenant",
                         (json_int_t)x->tenant, "user", (json_int_t)x->user, "disabled", 0));
    OPENSSL_cleanse(sk, sizeof(sk));
}

static void keys_collection(struct api_req *x)
{
    list_keys(x, 0);
}

static void key_item(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        reply_json(x->req, 200, key_json(&x->k));
        return;
    }
    if (x->cmd == EVHTTP_REQ_DELETE) {
        reply_deleted(x, tenants_key_delete(x->a->tenants, x->akey), "delete key");
        return;
    }
    json_t *j = body_json(x->req); /* PATCH, PUT */
    if (!j)
        return;
    bool dis = x->k.disabled;
    int b = get_bool(x->req, j, "disabled", &dis);
    json_decref(j);
    if (b < 0)
        return;
    rc = tenants_key_set_disabled(x->a->tenants, x->akey, dis);
    if (rc < 0) {
        reply_err(x->req, rc, "update key");
        return;
    }
    x->k.disabled = dis;
    reply_json(x->req, 200, key_json(&x->k));
}
/* Fill the settable fields of an export from @p j (absent fields untouched).
 * @return 0, -1 (400 sent). */
static int export_fields(struct evhttp_request *req, json_t *j, struct tenant_export *e,
                         bool need)
{
    json_t *jp = json_object_get(j, "path");
    json_t *clients = json_object_get(j, "clients");
    if (jp || need) {
        const char *path = json_string_value(jp);
        if (!path || path[0] != '/' || strlen(path) >= sizeof(e->path)) {
            bad(req, "'path' (string, starting with '/') is required");
            return -1;
        }
        snprintf(e->path, sizeof(e->path), "%s", path);
    }
    if (clients || need) {
        if (!json_is_array(clients) || json_array_size(clients) == 0 ||
            json_array_size(clients) > TENANT_EXPORT_MAX_NETS) {
            bad(req, "'clients' must be an array of 1 to 8 address ranges, e.g. [\"10.0.0.0/8\"]");
            return -1;
        }
        e->nnets = 0;
        for (size_t i = 0; i < json_array_size(clients); i++) {
            const char *s = json_string_value(json_array_get(clients, i));
            if (!s || tenants_net_parse(s, &e->nets[e->nnets]) < 0) {
                bad(req, "'clients' holds a range that is not ADDR or ADDR/PREFIX");
                return -1;
            }
            e->nnets++;
        }
    }
    bool ro = e->flags & TENANT_EXPORT_RO, rsq = e->flags & TENANT_EXPORT_ROOT_SQUASH,
         asq = e->flags & TENANT_EXPORT_ALL_SQUASH;
    uint64_t au = e->anon_uid, ag = e->anon_gid;
    if (get_bool(req, j, "read_only", &ro) < 0 || get_bool(req, j, "root_squash", &rsq) < 0 ||
        get_bool(req, j, "all_squash", &asq) < 0 ||
        get_uint(req, j, "anon_uid", UINT32_MAX, &au) < 0 ||
        get_uint(req, j, "anon_gid", UINT32_MAX, &ag) < 0)
        return -1;
    e->flags = (ro ? TENANT_EXPORT_RO : 0) | (rsq ? TENANT_EXPORT_ROOT_SQUASH : 0) |
               (asq ? TENANT_EXPORT_ALL_SQUASH : 0);
    e->anon_uid = (uint32_t)au;
    e->anon_gid = (uint32_t)ag;
    return 0;
}

/* May the caller place export @p e at its path? A tenant admin only in its
 * tenant's own prefix ("/" + its name, and below). @return true, or false
 * (403 sent). A path that does not normalise passes here and answers 400 later. */
static bool export_path_allowed(struct api_req *x, const struct tenant_export *e)
{
    char norm[sizeof(e->path)], msg[160];
    struct tenant_info ti;
    if (is_system(x) || srv_path_norm(e->path, norm, sizeof(norm), 0) < 0 ||
        tenants_path_is_own(x->a->tenants, e->tenant, norm))
        return true;
    if (tenants_tenant_get(x->a->tenants, e->tenant, &ti) < 0)
        snprintf(ti.name, sizeof(ti.name), "NAME");
    snprintf(msg, sizeof(msg), "a tenant admin may place exports only at /%s or below it "
             "(another path needs a system admin)", ti.name);
    forbidden(x->req, msg);
    return false;
}

/* 409: export @p e would conflict with @p other. Another tenant's export is
 * named only to a system admin. */
static void export_conflict(struct api_req *x, const struct tenant_export *e,
                            const struct tenant_export *other)
{
    char msg[4096];
    if (is_system(x) || other->tenant == x->who->tenant) {
        char nets[8 * 64] = "";
        for (uint32_t i = 0; i < other->nnets && i < TENANT_EXPORT_MAX_NETS; i++) {
            char one[64];
            tenants_net_format(&other->nets[i], one, sizeof(one));
            snprintf(nets + strlen(nets), sizeof(nets) - strlen(nets), "%s%s", i ? "," : "",
                     one);
        }
        snprintf(msg, sizeof(msg), "export path %s for these clients would be ambiguous with "
                 "export %u (%s, tenant %u, clients %s): one path, or across tenants one below "
                 "the other, for overlapping client ranges", e->path, other->id, other->path,
                 other->tenant, nets);
    } else {
        snprintf(msg, sizeof(msg), "export path %s for these clients would be ambiguous with an "
                 "export of another tenant for overlapping client ranges", e->path);
    }
    admin__error_of(x->req, -EBUSY, msg);
}

static void exports_collection(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        rc = tenants_export_list_tenant(x->a->tenants, x->tenant, append_export, arr);
        reply_list(x, rc, arr, "list exports");
        return;
    }
    json_t *j = body_json(x->req);
    if (!j)
        return;
    struct tenant_export e, out;
    memset(&e, 0, sizeof(e));
    e.tenant = x->tenant;
    e.anon_uid = e.anon_gid = 65534;
    uint64_t dir = 0;
    json_t *src = json_object_get(j, "source");
    if (export_fields(x->req, j, &e, true) < 0 ||
        get_uint(x->req, j, "dir", UINT64_MAX >> 1, &dir) < 0 || !export_path_allowed(x, &e)) {
        json_decref(j);
        return;
    }
    if (src && !json_is_string(src)) {
        json_decref(j);
        bad(x->req, "'source' must be a path inside the tenant, e.g. \"datasets/train\"");
        return;
    }
    if ((src || dir) && !x->a->core) {
        json_decref(j);
        admin__error(x->req, ADMIN_E_UNAVAILABLE, "the store is not open");
        return;
    }
    if (src) {
        rc = resolve_dir(x->a, x->tenant, x->ti.root, json_string_value(src), &dir);
        if (rc < 0) {
            json_decref(j);
            reply_err(x->req, rc, "export source");
            return;
        }
    } else if (dir) {
        /* A directory inode given by number must be one of this tenant's. */
        struct core_principal p = {.tenant = x->tenant, .flags = CORE_P_SUPER};
        struct core_attr at;
        rc = core_getattr(x->a->core, &p, dir, 0, &at);
        if (rc < 0 || at.tenant != x->tenant || at.type != CORE_DIR) {
            json_decref(j);
            bad(x->req, "'dir' is not a directory of this tenant");
            return;
        }
    }
    json_decref(j);
    e.dir = dir;
    memset(&out, 0, sizeof(out));
    rc = tenants_export_create(x->a->tenants, &e, &out);
    if (rc == -EEXIST && out.id) {
        export_conflict(x, &e, &out);
        return;
    }
    if (rc < 0) {
        reply_err(x->req, rc, "create export");
        return;
    }
    reply_json(x->req, 201, export_json(&out));
}

static void export_item(struct api_req *x)
{
    int rc;
    if (x->cmd == EVHTTP_REQ_GET) {
        reply_json(x->req, 200, export_json(&x->e));
        return;
    }
    if (x->cmd == EVHTTP_REQ_DELETE) {
        reply_deleted(x, tenants_export_delete(x->a->tenants, x->export), "delete export");
        return;
    }
    json_t *j = body_json(x->req); /* PATCH, PUT */
    if (!j)
        return;
    if (json_object_get(j, "dir") || json_object_get(j, "source") ||
        json_object_get(j, "tenant")) {
        json_decref(j);
        bad(x->req, "an export's tenant and directory cannot change (create a new export)");
        return;
    }
    /* A tenant admin may change the flags of an export a system admin placed
     * outside its prefix, but not move it or widen who reaches it. */
    bool placing = json_object_get(j, "path") || json_object_get(j, "clients");
    rc = export_fields(x->req, j, &x->e, false);
    json_decref(j);
    if (rc < 0 || (placing && !export_path_allowed(x, &x->e)))
        return;
    struct tenant_export out;
    memset(&out, 0, sizeof(out));
    rc = tenants_export_update(x->a->tenants, &x->e, &out);
    if (rc == -EEXIST && out.id) {
        export_conflict(x, &x->e, &out);
        return;
    }
    if (rc < 0) {
        reply_err(x->req, rc, "update export");
        return;
    }
    reply_json(x->req, 200, export_json(&out));
}

struct bucket_ctx {
    struct admin *a;
    uint32_t tenant;
    json_t *arr;
};

static int append_bucket(void *arg, const char *name, size_t namelen,
                         const struct core_attr *attr)
{
    struct bucket_ctx *b = arg;
    struct core_usage u;
    memset(&u, 0, sizeof(u));
    core_usage_get(b->a->core, b->tenant, attr->ino, &u);
    json_t *o = json_pack("{s:s%,s:I,s:o}", "name", name, namelen, "ino", (json_int_t)attr->ino,
                          "usage", usage_json(&u));
    return json_array_append_new(b->arr, o) ? -ENOMEM : 0;
}

static void buckets_collection(struct api_req *x)
{
    struct core_principal p = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    struct bucket_ctx b = {.a = x->a, .tenant = x->tenant, .arr = json_array()};
    int rc = core_bucket_list(x->a->core, &p, append_bucket, &b);
    reply_list(x, rc, b.arr, "list buckets");
}

/* The request's bucket, looked up for the tenant's superuser; on failure the
 * reply is sent. @return 0 or a negative errno. */
static int bucket_of(struct api_req *x, struct core_attr *at)
{
    struct core_principal p = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    int rc = core_bucket_lookup(x->a->core, &p, x->bucket, strlen(x->bucket), at);
    if (rc < 0)
        lookup_failed(x->req, rc, "bucket", "no such bucket '%s' in tenant '%s'", x->bucket,
                      x->ti.name);
    return rc;
}

/* Usage/quota of the tenant ({bucket} absent), of a bucket, or of a directory
 * in it (?dir=a/b). GET answers usage; PUT sets limits; DELETE removes them. */
static void usage_quota(struct api_req *x)
{
    uint64_t ino = 0;
    int rc;
    const char *dir = evhttp_find_header(&x->query, "dir");
    if (x->bucket) {
        struct core_attr at;
        if ((rc = bucket_of(x, &at)) < 0)
            return;
        ino = at.ino;
        if (dir && *dir && (rc = resolve_dir(x->a, x->tenant, ino, dir, &ino)) < 0) {
            lookup_failed(x->req, rc, "directory", "no such directory '%s' in bucket '%s'", dir,
                          x->bucket);
            return;
        }
    } else if (dir) {
        bad(x->req, "'dir' needs a bucket: /tenants/ID/buckets/NAME/quota?dir=PATH");
        return;
    }
    if (x->cmd == EVHTTP_REQ_PUT || x->cmd == EVHTTP_REQ_DELETE) {
        uint64_t bl = 0, il = 0;
        if (x->cmd == EVHTTP_REQ_PUT) {
            json_t *j = body_json(x->req);
            if (!j)
                return;
            int b = get_uint(x->req, j, "bytes_limit", INT64_MAX, &bl);
            if (b == 0)
                b = get_uint(x->req, j, "inodes_limit", INT64_MAX, &il);
            json_decref(j);
            if (b < 0)
                return;
        }
        rc = core_quota_set(x->a->core, x->tenant, ino, bl, il);
        if (rc < 0) {
            reply_err(x->req, rc, "set quota");
            return;
        }
        srv_log(INFO, ADMIN, "tenant=%u quota on %s%s%s set by %s: %llu bytes, %llu inodes",
                x->tenant, x->bucket ? x->bucket : "the tenant", dir ? "/" : "", dir ? dir : "",
                x->who->name, (unsigned long long)bl, (unsigned long long)il);
        if (x->cmd == EVHTTP_REQ_DELETE) {
            reply_empty(x->req, 204);
            return;
        }
    }
    struct core_usage u;
    rc = core_usage_get(x->a->core, x->tenant, ino, &u);
    if (rc < 0) {
        reply_err(x->req, rc, "usage");
        return;
    }
    reply_json(x->req, 200, usage_json(&u));
}

/* Fields a QoS body may set; the others a GET answers are accepted and ignored
 * (so a GET's answer can be PUT back), anything else is a 400. */
static const char *const qos_fields[] = {
    "read_bps",     "write_bps",     "read_iops", "write_iops", "meta_iops", "burst_ms",
    "min_read_bps", "min_write_bps", "min_iops",  "weight",     NULL};
static const char *const qos_readonly[] = {"tenant", "level",  "user", "bucket_ino", "dir_ino",
                                           "uid",    "bucket", "dir",  NULL};

static bool in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (strcmp(*l, k) == 0)
            return true;
    return false;
}

/* Parse a QoS body into @p p. @return 0, -1 (400 sent). */
static int qos_fields_parse(struct evhttp_request *req, json_t *j, struct qos_policy *p)
{
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v)
    {
        if (!in_list(qos_fields, k) && !in_list(qos_readonly, k)) {
            char msg[300];
            snprintf(msg, sizeof(msg),
                     "unknown QoS field '%.64s' (read_bps, write_bps, read_iops, write_iops, "
                     "meta_iops, burst_ms, min_read_bps, min_write_bps, min_iops, weight)",
                     k);
            bad(req, msg);
            return -1;
        }
    }
    const uint64_t lim = (uint64_t)1 << 52;
    uint64_t burst = p->burst_ms, weight = p->weight;
    if (get_uint(req, j, "read_bps", lim, &p->read_bps) < 0 ||
        get_uint(req, j, "write_bps", lim, &p->write_bps) < 0 ||
        get_uint(req, j, "read_iops", lim, &p->read_iops) < 0 ||
        get_uint(req, j, "write_iops", lim, &p->write_iops) < 0 ||
        get_uint(req, j, "meta_iops", lim, &p->meta_iops) < 0 ||
        get_uint(req, j, "min_read_bps", lim, &p->min_read_bps) < 0 ||
        get_uint(req, j, "min_write_bps", lim, &p->min_write_bps) < 0 ||
        get_uint(req, j, "min_iops", lim, &p->min_iops) < 0 ||
        get_uint(req, j, "burst_ms", 60000, &burst) < 0 ||
        get_uint(req, j, "weight", QOS_WEIGHT_MAX, &weight) < 0)
        return -1;
    p->burst_ms = (uint32_t)burst;
    p->weight = (uint32_t)weight;
    return 0;
}

static void drop_stale_qos(struct admin *a, uint32_t tenant);

/* The QoS policy of one level: the tenant, one of its users, a bucket, a
 * directory of a bucket (?dir=PATH, as for quotas) or the NFS default class.
 * A level without a policy answers all zeros (unlimited). */
static void qos_level_item(struct api_req *x, enum qos_level lv)
{
    struct qos_policy id = {.tenant = x->tenant, .level = lv};
    uint64_t key = 0;
    int rc;
    const char *dir = evhttp_find_header(&x->query, "dir");
    if (lv == QOS_LEVEL_USER) {
        id.user = key = x->user;
        id.has_uid = true; /* NFS calls with the user's uid are the user's */
        id.uid = x->u.uid;
    }
    if (lv == QOS_LEVEL_BUCKET) {
        struct core_attr at;
        if ((rc = bucket_of(x, &at)) < 0)
            return;
        id.bucket = key = at.ino;
        uint64_t dino = at.ino;
        if (dir && *dir && (rc = resolve_dir(x->a, x->tenant, at.ino, dir, &dino)) < 0) {
            if (rc == -EINVAL || rc == -ENOTDIR)
                bad(x->req, rc == -EINVAL ? "'dir' may not contain '.' or '..'"
                                          : "'dir' names a file, not a directory");
            else
                lookup_failed(x->req, rc, "directory", "no such directory '%s' in bucket '%s'", dir,
                              x->bucket);
            return;
        }
        if (dino != at.ino) {
            id.level = lv = QOS_LEVEL_DIR;
            id.dir = key = dino;
        }
    } else if (dir) {
        bad(x->req, "'dir' needs a bucket: /tenants/ID/buckets/NAME/qos?dir=PATH");
        return;
    }
    struct qos_policy p = id;
    if (x->cmd == EVHTTP_REQ_GET) {
        rc = qos_policy_get_at(x->a->qos, x->tenant, lv, key, &p);
        if (rc == -ENOENT) {
            p = id; /* unlimited, all zero */
            rc = 0;
        }
        if (rc < 0)
            reply_err(x->req, rc, "qos");
        else
            reply_json(x->req, 200, qos_json(&p));
        return;
    }
    if (x->cmd == EVHTTP_REQ_DELETE) {
        rc = qos_policy_delete_at(x->a->qos, x->tenant, lv, key);
        reply_deleted(x, rc == -ENOENT ? 0 : rc, "delete qos");
        return;
    }
    if (x->cmd == EVHTTP_REQ_PATCH && qos_policy_get_at(x->a->qos, x->tenant, lv, key, &p) < 0)
        p = id;
    p.has_uid = id.has_uid;
    p.uid = id.uid;
    json_t *j = body_json(x->req);
    if (!j)
        return;
    int b = qos_fields_parse(x->req, j, &p);
    json_decref(j);
    if (b < 0)
        return;
    rc = qos_policy_set(x->a->qos, &p);
    if (rc == -ENOSPC) { /* deleted buckets' and directories' policies make room */
        drop_stale_qos(x->a, x->tenant);
        rc = qos_policy_set(x->a->qos, &p);
    }
    if (rc == -ENOSPC) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "tenant %u already has %d QoS policies below the tenant level; delete some",
                 x->tenant, QOS_POLICIES_PER_TENANT_MAX);
        bad(x->req, msg);
        return;
    }
    if (rc < 0) {
        reply_err(x->req, rc, "set qos");
        return;
    }
    srv_log(INFO, ADMIN, "tenant=%u QoS of %s %llu%s%s set by %s", x->tenant, qos_level_name(lv),
            (unsigned long long)key, dir ? " dir " : "", dir ? dir : "", x->who->name);
    reply_json(x->req, 200, qos_json(&p));
}

/* ---- remotes of the tier, and bucket tier policies ---- */

static json_t *remote_json(const struct tenant_remote *r)
{
    /* never the secret: it is not even in the record's cache */
    return json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:s,s:s,s:I,s:I,s:I,s:I}", "id",
                     (json_int_t)r->id, "tenant", (json_int_t)r->tenant, "name", r->name,
                     "endpoint", r->endpoint, "region", r->region, "bucket", r->bucket, "prefix",
                     r->prefix, "addressing", r->virtual_host ? "virtual" : "path", "tls_verify",
                     !r->tls_no_verify, "ca_file", r->ca_file, "access_key", r->access_key,
                     "max_conns", (json_int_t)r->max_conns, "parallel", (json_int_t)r->parallel,
                     "connect_timeout_ms", (json_int_t)r->connect_timeout_ms, "created",
                     (json_int_t)r->created);
}

static int append_remote(void *arg, const struct tenant_remote *r)
{
    return json_array_append_new(arg, remote_json(r)) < 0 ? -ENOMEM : 0;
}

/* Optional string field of at most @p max bytes. @return 0 (absent: untouched), -1 (400
 * sent). */
static int get_str(struct evhttp_request *req, json_t *j, const char *field, char *out, size_t max)
{
    json_t *v = json_object_get(j, field);
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s || strlen(s) >= max) {
        char msg[160];
        snprintf(msg, sizeof(msg), "'%s' must be a string of at most %zu bytes", field, max - 1);
        bad(req, msg);
        return -1;
    }
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* Refuse a body field not in @p known (NULL-terminated). @return 0, -1 (400 sent). */
static int only_fields(struct evhttp_request *req, json_t *j, const char *const *known)
{
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v)
    {
        bool ok = false;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strcmp(k, known[i]) == 0;
        if (!ok) {
            char msg[200];
            snprintf(msg, sizeof(msg), "unknown field '%.64s'", k);
            bad(req, msg);
            return -1;
        }
    }
    return 0;
}

/* A tenant admin sees only its own tenant's remotes: any other answers as missing. */
static int remote_visible(struct api_req *x, uint32_t id, struct tenant_remote *r)
{
    int rc = tenants_remote_get(x->a->tenants, id, r);
    if (rc == 0 && !is_system(x) && r->tenant != x->who->tenant)
        rc = -ENOENT;
    if (rc < 0)
        lookup_failed(x->req, rc, "remote", "no such remote %u", id);
    return rc;
}

static void remote_create(struct api_req *x)
{
    static const char *const known[] = {"name",       "tenant",
                                        "endpoint",   "region",
                                        "bucket",     "prefix",
                                        "addressing", "tls_verify",
                                        "ca_file",    "access_key",
                                        "secret_key", "max_conns",
                                        "parallel",   "connect_timeout_ms",
                                        NULL};
    struct tenant_remote r;
    char secret[TENANT_SECRET_MAX + 2] = "", addressing[16] = "path", why[400];
    uint64_t tenant = is_system(x) ? 0 : x->who->tenant, mc = 0, par = 0, cto = 0;
    bool verify = true, failed = false;
    memset(&r, 0, sizeof(r));
    json_t *j = body_json(x->req);
    if (!j)
        return;
    int b = only_fields(x->req, j, known);
    static const char *const positive[] = {"max_conns", "parallel", "connect_timeout_ms", NULL};
    for (size_t i = 0; b == 0 && positive[i]; i++) {
        json_t *v = json_object_get(j, positive[i]);
        if (v && json_is_integer(v) && json_integer_value(v) == 0) {
            char msg[120];
            snprintf(msg, sizeof(msg), "'%s' must be positive (leave it out for the default)",
                     positive[i]);
            bad(x->req, msg);
            b = -1;
        }
    }
    if (b == 0 && (get_str(x->req, j, "name", r.name, sizeof(r.name)) < 0 ||
                   get_str(x->req, j, "endpoint", r.endpoint, sizeof(r.endpoint)) < 0 ||
                   get_str(x->req, j, "region", r.region, sizeof(r.region)) < 0 ||
                   get_str(x->req, j, "bucket", r.bucket, sizeof(r.bucket)) < 0 ||
                   get_str(x->req, j, "prefix", r.prefix, sizeof(r.prefix)) < 0 ||
                   get_str(x->req, j, "addressing", addressing, sizeof(addressing)) < 0 ||
                   get_str(x->req, j, "ca_file", r.ca_file, sizeof(r.ca_file)) < 0 ||
                   get_str(x->req, j, "access_key", r.access_key, sizeof(r.access_key)) < 0 ||
                   get_str(x->req, j, "secret_key", secret, sizeof(secret)) < 0 ||
                   get_bool(x->req, j, "tls_verify", &verify) < 0 ||
                   get_uint(x->req, j, "tenant", UINT32_MAX, &tenant) < 0 ||
                   get_uint(x->req, j, "max_conns", 1024, &mc) < 0 ||
                   get_uint(x->req, j, "parallel", 64, &par) < 0 ||
                   get_uint(x->req, j, "connect_timeout_ms", 60000, &cto) < 0))
        b = -1;
    json_decref(j);
    if (b < 0)
        goto out;
    if (!is_system(x) && tenant != x->who->tenant) {
        forbidden(x->req, "a tenant admin may make remotes only for its own tenant");
        goto out;
    }
    if (strcmp(addressing, "path") != 0 && strcmp(addressing, "virtual") != 0) {
        bad(x->req, "'addressing' must be \"path\" or \"virtual\"");
        goto out;
    }
    r.tenant = (uint32_t)tenant;
    r.virtual_host = strcmp(addressing, "virtual") == 0;
    r.tls_no_verify = !verify;
    r.max_conns = (uint32_t)mc;
    r.parallel = (uint32_t)par;
    r.connect_timeout_ms = (uint32_t)cto;
    struct tenant_remote made;
    int rc = tenants_remote_create(x->a->tenants, &r, secret, why, sizeof(why), &failed, &made);
    if (rc == 0) {
        srv_log(INFO, ADMIN, "tenant=%u remote %u '%s' made by %s", made.tenant, made.id, made.name,
                x->who->name);
        reply_json(x->req, 201, remote_json(&made));
    } else if (failed) {
        admin__error(x->req, ADMIN_E_REMOTE_CHECK, why);
    } else {
        admin__error_of(x->req, rc, why[0] ? why : NULL);
    }
out:
    OPENSSL_cleanse(secret, sizeof(secret));
}

static void remotes_collection(struct api_req *x)
{
    if (x->cmd == EVHTTP_REQ_POST) {
        remote_create(x);
        return;
    }
    uint32_t scope = is_system(x) ? UINT32_MAX : x->who->tenant;
    const char *ts = evhttp_find_header(&x->query, "tenant");
    if (ts) {
        uint64_t v;
        if (!parse_u64(ts, &v) || v > UINT32_MAX) {
            bad(x->req, "'tenant' must be a tenant id (0: system-wide remotes)");
            return;
        }
        if (!is_system(x) && v != x->who->tenant) {
            forbidden(x->req, "a tenant admin may list only its own tenant's remotes");
            return;
        }
        scope = (uint32_t)v;
    }
    json_t *arr = json_array();
    int rc = arr ? tenants_remote_list(x->a->tenants, scope, append_remote, arr) : -ENOMEM;
    reply_list(x, rc, arr, "list remotes");
}

/* PATCH /remotes/{remote}: rotate its credentials, change its limits; checked again
 * as when it was made. Where it points (endpoint, bucket, prefix...) stays. */
static void remote_update(struct api_req *x, const struct tenant_remote *cur)
{
    static const char *const known[] = {"access_key", "secret_key",         "max_conns",
                                        "parallel",   "connect_timeout_ms", NULL};
    static const char *const fixed[] = {"name",   "tenant",     "endpoint",   "region",  "bucket",
                                        "prefix", "addressing", "tls_verify", "ca_file", NULL};
    struct tenant_remote r;
    char secret[TENANT_SECRET_MAX + 2] = "", why[400];
    uint64_t mc = 0, par = 0, cto = 0;
    bool failed = false;
    memset(&r, 0, sizeof(r));
    json_t *j = body_json(x->req);
    if (!j)
        return;
    int b = 0;
    for (size_t i = 0; fixed[i]; i++) {
        if (json_object_get(j, fixed[i])) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "'%s' cannot change: a remote's copies are named by where it points; "
                     "make a new remote instead",
                     fixed[i]);
            bad(x->req, msg);
            b = -1;
            break;
        }
    }
    static const char *const positive[] = {"max_conns", "parallel", "connect_timeout_ms", NULL};
    for (size_t i = 0; b == 0 && positive[i]; i++) {
        json_t *v = json_object_get(j, positive[i]);
        if (v && json_is_integer(v) && json_integer_value(v) == 0) {
            char msg[120];
            snprintf(msg, sizeof(msg), "'%s' must be positive", positive[i]);
            bad(x->req, msg);
            b = -1;
        }
    }
    if (b == 0)
        b = only_fields(x->req, j, known);
    if (b == 0 && (get_str(x->req, j, "access_key", r.access_key, sizeof(r.access_key)) < 0 ||
                   get_str(x->req, j, "secret_key", secret, sizeof(secret)) < 0 ||
                   get_uint(x->req, j, "max_conns", 1024, &mc) < 0 ||
                   get_uint(x->req, j, "parallel", 64, &par) < 0 ||
                   get_uint(x->req, j, "connect_timeout_ms", 60000, &cto) < 0))
        b = -1;
    bool have_secret = json_object_get(j, "secret_key") != NULL;
    json_decref(j);
    if (b < 0)
        goto out;
    if (r.access_key[0] && !have_secret) {
        bad(x->req, "a new 'access_key' needs its 'secret_key'");
        goto out;
    }
    r.max_conns = (uint32_t)mc;
    r.parallel = (uint32_t)par;
    r.connect_timeout_ms = (uint32_t)cto;
    struct tenant_remote made;
    int rc = tenants_remote_update(x->a->tenants, cur->id, &r, have_secret ? secret : NULL, why,
                                   sizeof(why), &failed, &made);
    if (rc == 0) {
        if (tier_upload_default())
            tier_upload_remote_changed(tier_upload_default(), made.id);
        srv_log(INFO, ADMIN, "tenant=%u remote %u '%s' updated by %s%s", made.tenant, made.id,
                made.name, x->who->name, have_secret ? " (new secret key)" : "");
        reply_json(x->req, 200, remote_json(&made));
    } else if (failed) {
        admin__error(x->req, ADMIN_E_REMOTE_CHECK, why);
    } else {
        admin__error_of(x->req, rc, why[0] ? why : NULL);
    }
out:
    OPENSSL_cleanse(secret, sizeof(secret));
}

static void remote_item(struct api_req *x)
{
    struct tenant_remote r;
    if (remote_visible(x, x->remote, &r) < 0)
        return;
    if (x->cmd == EVHTTP_REQ_GET) {
        reply_json(x->req, 200, remote_json(&r));
        return;
    }
    if (r.tenant == 0 && !is_system(x)) {
        forbidden(x->req, x->cmd == EVHTTP_REQ_PATCH
                              ? "only a system admin may change a system-wide remote"
                              : "only a system admin may delete a system-wide remote");
        return;
    }
    if (x->cmd == EVHTTP_REQ_PATCH) {
        remote_update(x, &r);
        return;
    }
    uint64_t bucket = 0;
    int rc = tenants_remote_delete(x->a->tenants, r.id, &bucket);
    if (rc == -EBUSY || rc == -ENOTEMPTY) {
        char msg[240];
        snprintf(msg, sizeof(msg),
                 rc == -EBUSY ? "remote %u is named by the tier policy of a bucket (inode %llu); "
                                "delete that policy first"
                              : "remote %u holds the only copy of evicted files (inode %llu, "
                                "maybe more); read them back (recall) or delete them first",
                 r.id, (unsigned long long)bucket);
        admin__error(x->req, ADMIN_E_IN_USE, msg);
        return;
    }
    if (rc == 0)
        srv_log(INFO, ADMIN, "tenant=%u remote %u '%s' deleted by %s", r.tenant, r.id, r.name,
                x->who->name);
    reply_deleted(x, rc, "delete remote");
}

/* Fields a policy may name that belong to cache mode: not built. */
static const char *const tier_unbuilt[] = {"evict", "cache_mode", "mode", NULL};

/* What the uploader's last pass found in bucket @p ino (null before its first pass). */
static json_t *uploads_json(uint64_t ino)
{
    struct tier_upload *u = tier_upload_default();
    struct tier_bucket_stats st;
    if (!u || tier_upload_bucket_stats(u, ino, &st) < 0)
        return json_null();
    json_t *j = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:I}", "pending_files", (json_int_t)st.pending_files,
        "pending_bytes", (json_int_t)st.pending_bytes, "oldest_pending_s", (json_int_t)st.oldest_s,
        "deletes_pending", (json_int_t)st.deletes_pending, "uploaded_files",
        (json_int_t)st.uploaded_files, "uploading", (json_int_t)st.uploading, "last_error",
        st.last_error, "last_error_time", (json_int_t)st.last_error_s);
    json_t *more = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "local_bytes", (json_int_t)st.local_bytes, "remote_bytes",
        (json_int_t)st.remote_bytes, "evicted_files", (json_int_t)st.evicted_files, "evicted_bytes",
        (json_int_t)st.evicted_bytes, "evictable_files", (json_int_t)st.evictable_files,
        "evictable_bytes", (json_int_t)st.evictable_bytes, "evictions", (json_int_t)st.evictions);
    if (j && more)
        json_object_update(j, more);
    json_decref(more);
    return j;
}

static json_t *policy_json(struct api_req *x, const char *bucket, uint64_t ino,
                           const struct tier_policy *p)
{
    struct tenant_remote r;
    bool have = tenants_remote_get(x->a->tenants, p->remote, &r) == 0;
    json_t *pins = json_array();
    for (uint32_t i = 0; pins && i < p->npins; i++)
        json_array_append_new(pins, json_string(p->pins[i]));
    json_t *wm = p->evict_high ? json_pack("{s:f,s:f}", "high", p->evict_high / 100.0, "low",
                                           p->evict_low / 100.0)
                               : json_null();
    json_t *j =
        json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:o,s:o,s:o}", "bucket", bucket, "remote",
                  (json_int_t)p->remote, "remote_name", have ? r.name : "", "remote_tenant",
                  (json_int_t)(have ? r.tenant : 0), "upload_after_s",
                  (json_int_t)p->upload_after_s, "evict_after_s", (json_int_t)p->evict_after_s,
                  "evict_watermark", wm, "pin_prefixes", pins, "uploads", uploads_json(ino));
    const char *sc = tier_sclass_name(p->sclass);
    if (j && sc)
        json_object_set_new(j, "storage_class", json_string(sc));
    return j;
}

/* "storage_class" of a policy PUT (the S3 class its remote stands for, which lifecycle
 * Transitions name; absent: STANDARD_IA) into @p p. @return 0, or -1 (answered). */
static int sclass_field(struct evhttp_request *req, json_t *j, struct tier_policy *p)
{
    json_t *v = json_object_get(j, "storage_class");
    if (!v || json_is_null(v))
        return 0;
    int sc = json_is_string(v) ? tier_sclass_parse(json_string_value(v)) : -1;
    if (sc < 0) {
        bad(req, "'storage_class' is one of STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING, "
                 "GLACIER_IR, GLACIER, DEEP_ARCHIVE (the S3 class lifecycle Transitions name)");
        return -1;
    }
    p->sclass = (uint8_t)sc;
    return 0;
}

/* The eviction fields of a policy PUT into @p p. @return 0, or -1 (answered). */
static int evict_fields(struct evhttp_request *req, json_t *j, struct tier_policy *p)
{
    uint64_t after = 0;
    if (get_uint(req, j, "evict_after_s", TIER_EVICT_AFTER_MAX, &after) < 0)
        return -1;
    p->evict_after_s = (uint32_t)after;
    json_t *wm = json_object_get(j, "evict_watermark");
    if (wm && !json_is_null(wm)) {
        json_t *hi = json_object_get(wm, "high"), *lo = json_object_get(wm, "low");
        if (!json_is_object(wm) || json_object_size(wm) != 2 || !json_is_number(hi) ||
            !json_is_number(lo) || json_number_value(hi) <= 0 || json_number_value(hi) > 100 ||
            json_number_value(lo) <= 0 || json_number_value(lo) >= json_number_value(hi)) {
            bad(req, "'evict_watermark' must be {\"high\": H, \"low\": L}, percent of the "
                     "store's capacity, 0 < L < H <= 100 (hundredths count)");
            return -1;
        }
        p->evict_high = (uint16_t)(json_number_value(hi) * 100 + 0.5);
        p->evict_low = (uint16_t)(json_number_value(lo) * 100 + 0.5);
        if (p->evict_low == 0 || p->evict_low >= p->evict_high) {
            bad(req, "'evict_watermark': low and high must differ by at least 0.01 and low "
                     "be at least 0.01");
            return -1;
        }
    }
    json_t *pins = json_object_get(j, "pin_prefixes");
    if (pins && !json_is_null(pins)) {
        size_t i;
        json_t *v;
        if (!json_is_array(pins) || json_array_size(pins) > TIER_PIN_MAX) {
            bad(req, "'pin_prefixes' must be an array of at most 8 key prefixes");
            return -1;
        }
        json_array_foreach(pins, i, v)
        {
            const char *sv = json_is_string(v) ? json_string_value(v) : NULL;
            if (!sv || !*sv || strlen(sv) > TIER_PIN_LEN) {
                bad(req, "'pin_prefixes': each is a key prefix of 1 to 256 bytes");
                return -1;
            }
            snprintf(p->pins[i], sizeof(p->pins[i]), "%s", sv);
        }
        p->npins = (uint32_t)json_array_size(pins);
    }
    return 0;
}

struct remote_user {
    uint32_t remote;
    uint64_t self;   /* this bucket: not a conflict */
    uint64_t bucket; /* another bucket whose policy names the remote */
};

static int remote_user_cb(void *arg, uint32_t tenant, uint64_t bucket, const void *val, size_t len)
{
    struct remote_user *ru = arg;
    struct tier_policy p;
    (void)tenant;
    if (bucket != ru->self && tier_policy_decode(val, len, &p) == 0 && p.remote == ru->remote) {
        ru->bucket = bucket;
        return 1;
    }
    return 0;
}

/* Flush barrier of a tiered bucket: POST starts one, GET ?barrier=N asks about one. */
static void tier_flush(struct api_req *x)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    struct core_attr at;
    struct tier_upload *u = tier_upload_default();
    int rc = bucket_of(x, &at);
    if (rc < 0)
        return;
    void *val = NULL;
    size_t len = 0;
    rc = core_bucket_blob_get(x->a->core, &sp, at.ino, CORE_BLOB_TIER, &val, &len);
    free(val);
    if (rc == -ENOENT) {
        admin__error_of(x->req, -ENOENT, "the bucket has no tier policy");
        return;
    }
    if (rc < 0) {
        reply_err(x->req, rc, "tier policy");
        return;
    }
    if (!u) {
        admin__error(x->req, ADMIN_E_UNAVAILABLE, "the tier's uploader is not running");
        return;
    }
    uint64_t barrier = 0;
    if (x->cmd == EVHTTP_REQ_POST) {
        tier_upload_flush(u, at.ino, &barrier);
    } else {
        const char *b = evhttp_find_header(&x->query, "barrier");
        if (!b || !parse_u64(b, &barrier) || barrier == 0) {
            bad(x->req, "'barrier' (the number a POST answered) is required");
            return;
        }
    }
    bool done = false;
    if (tier_upload_flush_done(u, at.ino, barrier, &done) < 0) {
        admin__error_of(x->req, -ENOENT,
                        "no such barrier on this bucket (the daemon may have "
                        "restarted: start a new one)");
        return;
    }
    reply_json(x->req, 200,
               json_pack("{s:s,s:I,s:b,s:o}", "bucket", x->bucket, "barrier", (json_int_t)barrier,
                         "done", done, "uploads", uploads_json(at.ino)));
}

/* The settings entries of bucket @p bucket, its own and its directories' (@p v:
 * TIER_DIRPOL_MAX + 1). @return their number, or -errno (none is 0). */
static int dirpols_get(struct api_req *x, uint64_t bucket, struct tier_dirpol *v)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    void *val = NULL;
    size_t len = 0;
    int rc = core_bucket_blob_get(x->a->core, &sp, bucket, CORE_BLOB_TIER_DIRS, &val, &len);
    if (rc == 0)
        rc = tier_dirs_decode(val, len, v);
    free(val);
    return rc == -ENOENT ? 0 : rc;
}

static json_t *effective_json(const struct tier_effective *e)
{
    json_t *j =
        json_pack("{s:I,s:I,s:b,s:s,s:b,s:b,s:I}", "upload_after_s", (json_int_t)e->upload_after_s,
                  "evict_after_s", (json_int_t)e->evict_after_s, "keep_local", e->keep_local,
                  "evict_priority", tier_prio_name(e->evict_priority), "read_only", e->read_only,
                  "dir_prefetch", e->dir_prefetch, "dirty_bound", (json_int_t)e->dirty_bound);
    if (j) {
        json_object_set_new(j, "preset",
                            e->preset ? json_string(tier_preset_name(e->preset)) : json_null());
        json_object_set_new(j, "recall",
                            json_pack("{s:I,s:I,s:I,s:b}", "read_ahead", (json_int_t)e->read_ahead,
                                      "streams", (json_int_t)e->streams, "chunk_size",
                                      (json_int_t)e->chunk_size, "whole_file", e->whole_file));
    }
    return j;
}

/* The knobs entry @p d sets, into @p j (the directory's own fields too when @p dir). */
static void knobs_json(json_t *j, const struct tier_dirpol *d, bool dir)
{
    if (dir && (d->set & TIER_D_UPLOAD))
        json_object_set_new(j, "upload_after_s", json_integer(d->upload_after_s));
    if (dir && (d->set & TIER_D_EVICT))
        json_object_set_new(j, "evict_after_s", json_integer(d->evict_after_s));
    if (dir && (d->set & TIER_D_KEEP))
        json_object_set_new(j, "keep_local", json_boolean(d->keep_local));
    if (d->set & TIER_D_PRIO)
        json_object_set_new(j, "evict_priority", json_string(tier_prio_name(d->evict_priority)));
    if (d->set & TIER_D_PRESET)
        json_object_set_new(j, "preset", json_string(tier_preset_name(d->preset)));
    if (d->set & TIER_D_RO)
        json_object_set_new(j, "read_only", json_boolean(d->read_only));
    if (d->set & TIER_D_DIRPF)
        json_object_set_new(j, "dir_prefetch", json_boolean(d->dir_prefetch));
    if (d->set & TIER_D_DIRTY)
        json_object_set_new(j, "dirty_bound", json_integer((json_int_t)d->dirty_bound));
    if (d->set & (TIER_D_RA | TIER_D_STREAMS | TIER_D_CHUNK | TIER_D_WHOLE)) {
        json_t *r = json_object();
        if (d->set & TIER_D_RA)
            json_object_set_new(r, "read_ahead", json_integer(d->read_ahead));
        if (d->set & TIER_D_STREAMS)
            json_object_set_new(r, "streams", json_integer(d->streams));
        if (d->set & TIER_D_CHUNK)
            json_object_set_new(r, "chunk_size", json_integer(d->chunk_size));
        if (d->set & TIER_D_WHOLE)
            json_object_set_new(r, "whole_file", json_boolean(d->whole_file));
        json_object_set_new(j, "recall", r);
    }
}

static json_t *dirpol_json(const char *bucket, const char *dir, const struct tier_dirpol *d,
                           const struct tier_policy *b, const struct tier_dirpol *be)
{
    struct tier_effective e;
    tier_effective_of(b, be, d, &e);
    json_t *j = json_pack("{s:s,s:I}", "bucket", bucket, "dir_ino", (json_int_t)d->dir);
    if (!j)
        return NULL;
    if (dir)
        json_object_set_new(j, "dir", json_string(dir));
    /* what the directory sets, and what applies below it (the bucket's for the rest) */
    knobs_json(j, d, true);
    json_object_set_new(j, "effective", effective_json(&e));
    return j;
}

/* The knobs of a bucket's or a directory's PUT (@p dir: the directory's own fields too)
 * into @p d. @return 0, or -1 (answered). */
static int knob_fields(struct evhttp_request *req, json_t *j, bool dir, struct tier_dirpol *d)
{
    uint64_t v = 0;
    bool f = false;
    json_t *x;
    if (dir) {
        if (get_uint(req, j, "upload_after_s", TIER_UPLOAD_AFTER_MAX, &v) < 0)
            return -1;
        d->upload_after_s = (uint32_t)v;
        d->set |= json_object_get(j, "upload_after_s") ? TIER_D_UPLOAD : 0;
        if (get_uint(req, j, "evict_after_s", TIER_EVICT_AFTER_MAX, &v) < 0)
            return -1;
        d->evict_after_s = (uint32_t)v;
        d->set |= json_object_get(j, "evict_after_s") ? TIER_D_EVICT : 0;
        if (get_bool(req, j, "keep_local", &f) < 0)
            return -1;
        d->keep_local = f;
        d->set |= json_object_get(j, "keep_local") ? TIER_D_KEEP : 0;
    }
    if ((x = json_object_get(j, "evict_priority"))) {
        int pr = json_is_string(x) ? tier_prio_parse(json_string_value(x)) : -EINVAL;
        if (pr < 0) {
            bad(req, "'evict_priority' is \"low\", \"normal\" or \"high\"");
            return -1;
        }
        d->evict_priority = (uint8_t)pr;
        d->set |= TIER_D_PRIO;
    }
    if ((x = json_object_get(j, "preset"))) {
        int pr = json_is_string(x) ? tier_preset_parse(json_string_value(x)) : -EINVAL;
        if (pr < 0) {
            bad(req, "'preset' is NONE, MODEL_CHECKPOINT_RO, MODEL_CHECKPOINT_RW, DATASET_RO "
                     "or DATASET_RW");
            return -1;
        }
        d->preset = (uint8_t)pr;
        d->set |= TIER_D_PRESET;
    }
    f = false;
    if (get_bool(req, j, "read_only", &f) < 0)
        return -1;
    d->read_only = f;
    d->set |= json_object_get(j, "read_only") ? TIER_D_RO : 0;
    f = false;
    if (get_bool(req, j, "dir_prefetch", &f) < 0)
        return -1;
    d->dir_prefetch = f;
    d->set |= json_object_get(j, "dir_prefetch") ? TIER_D_DIRPF : 0;
    v = 0;
    if (get_uint(req, j, "dirty_bound", (uint64_t)1 << 52, &v) < 0)
        return -1;
    d->dirty_bound = v;
    d->set |= json_object_get(j, "dirty_bound") ? TIER_D_DIRTY : 0;
    json_t *r = json_object_get(j, "recall");
    if (r) {
        static const char *const rk[] = {"read_ahead", "streams", "chunk_size", "whole_file", NULL};
        if (!json_is_object(r)) {
            bad(req, "'recall' is an object: {\"read_ahead\", \"streams\", \"chunk_size\", "
                     "\"whole_file\"}");
            return -1;
        }
        if (only_fields(req, r, rk) < 0)
            return -1;
        v = 0;
        if (get_uint(req, r, "read_ahead", TIER_RA_MAX, &v) < 0)
            return -1;
        d->read_ahead = (uint32_t)v;
        d->set |= json_object_get(r, "read_ahead") ? TIER_D_RA : 0;
        v = 0;
        if (get_uint(req, r, "streams", TIER_STREAMS_MAX, &v) < 0)
            return -1;
        d->streams = (uint16_t)v;
        d->set |= json_object_get(r, "streams") ? TIER_D_STREAMS : 0;
        v = 0;
        if (get_uint(req, r, "chunk_size", TIER_CHUNK_MAX, &v) < 0)
            return -1;
        d->chunk_size = (uint32_t)v;
        d->set |= json_object_get(r, "chunk_size") ? TIER_D_CHUNK : 0;
        f = false;
        if (get_bool(req, r, "whole_file", &f) < 0)
            return -1;
        d->whole_file = f;
        d->set |= json_object_get(r, "whole_file") ? TIER_D_WHOLE : 0;
    }
    char why[160];
    if (tier_dirpol_validate(d, why, sizeof(why)) < 0) {
        bad(req, why);
        return -1;
    }
    return 0;
}

/* Replace (@p d; NULL: remove) the settings entry of @p key (the bucket's inode: its
 * own) among the bucket's, dropping those of directories gone or moved out of the
 * bucket. @return 0, or -1 (answered). */
static int settings_put(struct api_req *x, uint64_t bucket, uint64_t key,
                        const struct tier_dirpol *d)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    static struct tier_dirpol v[TIER_DIRPOL_MAX + 1]; /* the admin API runs on one thread */
    int n = dirpols_get(x, bucket, v);
    if (n < 0) {
        reply_err(x->req, n, "tier settings");
        return -1;
    }
    int m = 0, ndirs = 0;
    for (int i = 0; i < n; i++) {
        struct core_attr da;
        if (v[i].dir == key)
            continue;
        if (v[i].dir == bucket || (core_getattr(x->a->core, &sp, v[i].dir, 0, &da) == 0 &&
                                   da.type == CORE_DIR && da.bucket == bucket)) {
            ndirs += v[i].dir != bucket;
            v[m++] = v[i];
        }
    }
    if (d) {
        if (key != bucket && ndirs >= TIER_DIRPOL_MAX) {
            bad(x->req, "a bucket has at most 256 directory tier policies; delete some");
            return -1;
        }
        v[m++] = *d;
    }
    uint8_t *enc = malloc(TIER_DIRS_MAX);
    if (!enc) {
        reply_err(x->req, -ENOMEM, "tier settings");
        return -1;
    }
    size_t elen = m ? tier_dirs_encode(v, (size_t)m, enc) : 0;
    int rc = core_bucket_blob_put(x->a->core, &sp, bucket, CORE_BLOB_TIER_DIRS, enc, elen);
    free(enc);
    if (rc == -ENOENT && !m)
        rc = 0;
    if (rc < 0) {
        reply_err(x->req, rc, "set tier settings");
        return -1;
    }
    tier_settings_refresh(core_meta(x->a->core));
    return 0;
}

/* The bucket's own settings entry (NULL: none) among @p v's @p n. */
static const struct tier_dirpol *bucket_ent(const struct tier_dirpol *v, int n, uint64_t bucket)
{
    for (int i = 0; i < n; i++)
        if (v[i].dir == bucket)
            return &v[i];
    return NULL;
}

/* /tenants/{tenant}/buckets/{bucket}/tier?dir=PATH: the policy of one directory of a
 * tiered bucket (overrides of the bucket policy for the files below it). */
static void tier_dir_item(struct api_req *x, uint64_t bucket, const char *dir,
                          const struct tier_policy *bp)
{
    uint64_t dino = 0;
    int rc = resolve_dir(x->a, x->tenant, bucket, dir, &dino);
    if (rc < 0) {
        if (rc == -EINVAL || rc == -ENOTDIR)
            bad(x->req, rc == -EINVAL ? "'dir' may not contain '.' or '..'"
                                      : "'dir' names a file, not a directory");
        else
            lookup_failed(x->req, rc, "directory", "no such directory '%s' in bucket '%s'", dir,
                          x->bucket);
        return;
    }
    if (dino == bucket) {
        bad(x->req, "'dir' names the bucket itself: set the bucket's policy without ?dir=");
        return;
    }
    static struct tier_dirpol v[TIER_DIRPOL_MAX + 1]; /* the admin API runs on one thread */
    int n = dirpols_get(x, bucket, v);
    if (n < 0) {
        reply_err(x->req, n, "directory tier policies");
        return;
    }
    int at = -1;
    for (int i = 0; i < n; i++)
        if (v[i].dir == dino)
            at = i;
    const struct tier_dirpol *be = bucket_ent(v, n, bucket);
    if (x->cmd == EVHTTP_REQ_GET) {
        if (at < 0) {
            admin__error_of(x->req, -ENOENT,
                            "the directory has no tier policy (the bucket's "
                            "or an outer directory's applies)");
            return;
        }
        reply_json(x->req, 200, dirpol_json(x->bucket, dir, &v[at], bp, be));
        return;
    }
    if (!is_system(x) &&
        tenants_remote_usable(x->a->tenants, bp->remote, x->tenant, false) == -EACCES) {
        forbidden(x->req, "a system admin set this bucket's policy (a system-wide remote): only "
                          "a system admin may change its directories' policies");
        return;
    }
    struct tier_dirpol d = {.dir = dino};
    struct tier_dirpol bcopy;
    if (be) {
        bcopy = *be;
        be = &bcopy; /* v is rewritten below */
    }
    if (x->cmd == EVHTTP_REQ_PUT) {
        static const char *const known[] = {
            "upload_after_s", "evict_after_s", "keep_local",   "evict_priority", "preset",
            "recall",         "read_only",     "dir_prefetch", "dirty_bound",    NULL};
        json_t *j = body_json(x->req);
        if (!j)
            return;
        int b = only_fields(x->req, j, known);
        if (b == 0)
            b = knob_fields(x->req, j, true, &d);
        json_decref(j);
        if (b < 0)
            return;
    } else if (at < 0) { /* DELETE */
        admin__error_of(x->req, -ENOENT, "the directory has no tier policy");
        return;
    }
    if (settings_put(x, bucket, dino, x->cmd == EVHTTP_REQ_PUT ? &d : NULL) < 0)
        return;
    srv_log(INFO, ADMIN, "tenant=%u tier policy of directory %s (ino %llu) of bucket %s %s by %s",
            x->tenant, dir, (unsigned long long)dino, x->bucket,
            x->cmd == EVHTTP_REQ_PUT ? "set" : "removed", x->who->name);
    if (tier_upload_default())
        tier_upload_kick(tier_upload_default());
    if (x->cmd == EVHTTP_REQ_PUT)
        reply_json(x->req, 200, dirpol_json(x->bucket, dir, &d, bp, be));
    else
        reply_deleted(x, 0, "delete directory tier policy");
}

/* The bucket's own settings and its directories' policies, into its policy's GET. */
static void settings_json(struct api_req *x, json_t *pj, uint64_t bucket,
                          const struct tier_policy *bp)
{
    static struct tier_dirpol v[TIER_DIRPOL_MAX + 1];
    json_t *arr = json_array();
    int n = dirpols_get(x, bucket, v);
    const struct tier_dirpol *be = n > 0 ? bucket_ent(v, n, bucket) : NULL;
    struct tier_effective e;
    if (be)
        knobs_json(pj, be, false);
    tier_effective_of(bp, be, NULL, &e);
    json_object_set_new(pj, "effective", effective_json(&e));
    for (int i = 0; arr && i < n; i++)
        if (v[i].dir != bucket)
            json_array_append_new(arr, dirpol_json(x->bucket, NULL, &v[i], bp, be));
    json_object_set_new(pj, "directories", arr ? arr : json_null());
}

/* The tier policy of bucket @p ino into @p p. @return 0, the error of reading its blob
 * (-ENOENT: none) or of decoding it. */
static int bucket_policy(struct api_req *x, uint64_t ino, struct tier_policy *p)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    void *val = NULL;
    size_t len = 0;
    int rc = core_bucket_blob_get(x->a->core, &sp, ino, CORE_BLOB_TIER, &val, &len);
    if (rc == 0)
        rc = tier_policy_decode(val, len, p);
    free(val);
    return rc;
}

static void tier_item(struct api_req *x)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    struct core_attr at;
    struct tier_policy cur, p;
    int rc = bucket_of(x, &at);
    if (rc < 0)
        return;
    rc = bucket_policy(x, at.ino, &cur);
    bool have = rc == 0;
    if (rc < 0 && rc != -ENOENT) {
        reply_err(x->req, rc, "tier policy");
        return;
    }
    const char *dir = evhttp_find_header(&x->query, "dir");
    if (dir && !*dir)
        dir = NULL;
    if (x->cmd == EVHTTP_REQ_GET || x->cmd == EVHTTP_REQ_DELETE || dir) {
        if (!have) {
            admin__error_of(x->req, -ENOENT, "the bucket has no tier policy");
            return;
        }
        if (dir) {
            tier_dir_item(x, at.ino, dir, &cur);
            return;
        }
        if (x->cmd == EVHTTP_REQ_GET) {
            json_t *pj = policy_json(x, x->bucket, at.ino, &cur);
            if (pj)
                settings_json(x, pj, at.ino, &cur);
            reply_json(x->req, 200, pj);
            return;
        }
        if (tenants_remote_usable(x->a->tenants, cur.remote, x->tenant, is_system(x)) == -EACCES) {
            forbidden(x->req, "a system admin set this policy (a system-wide remote): only a "
                              "system admin may remove it");
            return;
        }
        void *cv = NULL;
        size_t cl = 0;
        if (core_bucket_blob_get(x->a->core, &sp, at.ino, CORE_BLOB_CACHE, &cv, &cl) == 0) {
            free(cv);
            admin__error_of(x->req, -EBUSY,
                            "the bucket is in cache mode over this policy's remote: remove "
                            "its cache mode first (DELETE .../cache)");
            return;
        }
        rc = core_bucket_blob_put(x->a->core, &sp, at.ino, CORE_BLOB_TIER, NULL, 0);
        if (rc == 0) { /* its directories' policies go with it */
            int r2 = core_bucket_blob_put(x->a->core, &sp, at.ino, CORE_BLOB_TIER_DIRS, NULL, 0);
            if (r2 < 0 && r2 != -ENOENT)
                rc = r2;
            tier_settings_refresh(core_meta(x->a->core));
        }
        if (rc == 0)
            srv_log(INFO, ADMIN, "tenant=%u tier policy of bucket %s removed by %s", x->tenant,
                    x->bucket, x->who->name);
        if (rc == 0 && tier_upload_default())
            tier_upload_kick(tier_upload_default());
        reply_deleted(x, rc, "delete tier policy");
        return;
    }
    /* PUT */
    static const char *const known[] = {
        "remote",       "upload_after_s", "evict_after_s",  "evict_watermark",
        "pin_prefixes", "storage_class",  "evict",          "recall",
        "cache_mode",   "mode",           "preset",         "read_only",
        "dir_prefetch", "dirty_bound",    "evict_priority", NULL};
    json_t *j = body_json(x->req);
    if (!j)
        return;
    if (only_fields(x->req, j, known) < 0) {
        json_decref(j);
        return;
    }
    for (size_t i = 0; tier_unbuilt[i]; i++) {
        if (json_object_get(j, tier_unbuilt[i])) {
            char msg[300];
            snprintf(msg, sizeof(msg),
                     "'%s': cache mode is not built yet; a tier policy uploads copies, "
                     "evicts by evict_after_s, evict_watermark and pin_prefixes, and takes "
                     "a preset and recall settings (docs/tiering.md)",
                     tier_unbuilt[i]);
            json_decref(j);
            admin__error_of(x->req, SRV_ENOTSUPP, msg);
            return;
        }
    }
    uint64_t after = TIER_UPLOAD_AFTER_DEFAULT;
    memset(&p, 0, sizeof(p));
    json_t *rv = json_object_get(j, "remote");
    struct tenant_remote r;
    rc = -ENOENT;
    if (json_is_integer(rv) && json_integer_value(rv) > 0 && json_integer_value(rv) <= UINT32_MAX) {
        rc = tenants_remote_get(x->a->tenants, (uint32_t)json_integer_value(rv), &r);
    } else if (json_is_string(rv)) {
        /* by name: the bucket's tenant's remote, else a system-wide one */
        rc = tenants_remote_find(x->a->tenants, x->tenant, json_string_value(rv), &r);
        if (rc == -ENOENT)
            rc = tenants_remote_find(x->a->tenants, 0, json_string_value(rv), &r);
    } else {
        json_decref(j);
        bad(x->req, "'remote' (a remote's id or name) is required");
        return;
    }
    int b = get_uint(x->req, j, "upload_after_s", TIER_UPLOAD_AFTER_MAX, &after);
    if (b == 0)
        b = evict_fields(x->req, j, &p);
    if (b == 0)
        b = sclass_field(x->req, j, &p);
    /* the bucket's own settings (preset, recall, read-only...): kept beside the policy */
    struct tier_dirpol bset = {.dir = at.ino};
    if (b == 0)
        b = knob_fields(x->req, j, false, &bset);
    if (b == 0 && (bset.set & TIER_D_PRESET) && !json_object_get(j, "upload_after_s")) {
        struct tier_dirpol pk; /* a preset's write-back delay, unless one is given */
        tier_preset_knobs(bset.preset, &pk);
        if (pk.set & TIER_D_UPLOAD)
            after = pk.upload_after_s;
    }
    json_decref(j);
    if (b < 0)
        return;
    if (rc == 0)
        rc = tenants_remote_usable(x->a->tenants, r.id, x->tenant, is_system(x));
    if (rc == -EACCES) {
        forbidden(x->req, "only a system admin may use a system-wide remote");
        return;
    }
    if (rc < 0) {
        admin__error_of(x->req, -ENOENT, "no such remote for this bucket's tenant");
        return;
    }
    if (have && !is_system(x) &&
        tenants_remote_usable(x->a->tenants, cur.remote, x->tenant, false) == -EACCES) {
        forbidden(x->req, "a system admin set this policy (a system-wide remote): only a system "
                          "admin may change it");
        return;
    }
    /* keys are the remote's prefix + the bucket's keys: one remote serves one bucket */
    struct remote_user ru = {r.id, at.ino, 0};
    rc = core_bucket_blob_scan(x->a->core, CORE_BLOB_TIER, remote_user_cb, &ru);
    if (rc < 0) {
        reply_err(x->req, rc, "tier policies");
        return;
    }
    if (ru.bucket) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "remote %u already serves another bucket (inode %llu): objects are named by "
                 "the remote's prefix and the bucket's keys, so each bucket needs a remote (or "
                 "a prefix) of its own",
                 r.id, (unsigned long long)ru.bucket);
        admin__error_of(x->req, -EBUSY, msg);
        return;
    }
    p.remote = r.id;
    p.upload_after_s = (uint32_t)after;
    char why[160];
    if (tier_policy_validate(&p, why, sizeof(why)) < 0) {
        bad(x->req, why);
        return;
    }
    uint8_t enc[TIER_POLICY_MAX];
    size_t elen = tier_policy_encode(&p, enc);
    rc = core_bucket_blob_put(x->a->core, &sp, at.ino, CORE_BLOB_TIER, enc, elen);
    if (rc < 0) {
        reply_err(x->req, rc, "set tier policy");
        return;
    }
    if (settings_put(x, at.ino, at.ino, bset.set ? &bset : NULL) < 0)
        return;
    srv_log(INFO, ADMIN,
            "tenant=%u tier policy of bucket %s set by %s: remote %u, upload after "
            "%u s, evict after %u s, watermarks %u/%u (1/100 %%), %u pins",
            x->tenant, x->bucket, x->who->name, p.remote, p.upload_after_s, p.evict_after_s,
            p.evict_high, p.evict_low, p.npins);
    if (tier_upload_default())
        tier_upload_kick(tier_upload_default());
    json_t *pj = policy_json(x, x->bucket, at.ino, &p);
    if (pj)
        settings_json(x, pj, at.ino, &p);
    reply_json(x->req, 200, pj);
}

/* The bucket's own dirty bound (its settings entry's dirty_bound, else its preset's;
 * 0: none), and what the bound stands at now. */
static json_t *cache_dirty_json(struct api_req *x, uint64_t ino, const struct tier_policy *p,
                                uint64_t *bound)
{
    static struct tier_dirpol v[TIER_DIRPOL_MAX + 1]; /* the admin API runs on one thread */
    int n = dirpols_get(x, ino, v);
    struct tier_effective e;
    tier_effective_of(p, n > 0 ? bucket_ent(v, n, ino) : NULL, NULL, &e);
    *bound = e.dirty_bound;
    struct tier_dirty_stat st = {0};
    struct tier_upload *u = tier_upload_default();
    if (!u || !tier_upload_dirty(u) || tier_dirty_get(tier_upload_dirty(u), ino, ino, &st) < 0)
        memset(&st, 0, sizeof(st));
    return json_pack("{s:I,s:I,s:I,s:f}", "bytes", (json_int_t)st.dirty, "bound",
                     (json_int_t)st.bound, "held_total", (json_int_t)st.held_total, "held_seconds",
                     (double)st.held_us / 1e6);
}

static json_t *cache_json(struct api_req *x, uint64_t ino, const struct tier_cache *tc,
                          const struct tier_policy *p)
{
    struct tenant_remote r;
    bool have = tenants_remote_get(x->a->tenants, p->remote, &r) == 0;
    uint64_t bound = 0;
    json_t *dj = cache_dirty_json(x, ino, p, &bound);
    return json_pack("{s:s,s:b,s:I,s:b,s:I,s:s,s:s,s:I,s:o,s:o}", "bucket", x->bucket, "cache_mode",
                     1, "ttl_s", (json_int_t)tc->ttl_s, "read_only", tc->read_only, "remote",
                     (json_int_t)p->remote, "remote_name", have ? r.name : "", "remote_prefix",
                     have ? r.prefix : "", "dirty_max_bytes", (json_int_t)bound, "dirty",
                     dj ? dj : json_null(), "uploads", uploads_json(ino));
}

/* Cache mode of a bucket (docs/tiering.md § Cache mode): its own record beside the tier
 * policy, whose remote (bucket and prefix) the cache fronts. */
static void cache_item(struct api_req *x)
{
    struct core_principal sp = {.tenant = x->tenant, .flags = CORE_P_SUPER};
    struct core_attr at;
    struct tier_policy pol;
    struct tier_cache cur, tc;
    bool have = false, haspol = false;
    int rc = bucket_of(x, &at);
    if (rc < 0)
        return;
    haspol = bucket_policy(x, at.ino, &pol) == 0;
    void *val = NULL;
    size_t len = 0;
    rc = core_bucket_blob_get(x->a->core, &sp, at.ino, CORE_BLOB_CACHE, &val, &len);
    if (rc == 0) {
        rc = tier_cache_decode(val, len, &cur);
        have = rc == 0;
    }
    free(val);
    if (rc < 0 && rc != -ENOENT) {
        reply_err(x->req, rc, "cache mode");
        return;
    }
    if (x->cmd == EVHTTP_REQ_GET || x->cmd == EVHTTP_REQ_DELETE) {
        if (!have) {
            admin__error_of(x->req, -ENOENT, "the bucket is not in cache mode");
            return;
        }
        if (x->cmd == EVHTTP_REQ_GET) {
            if (!haspol)
                memset(&pol, 0, sizeof(pol));
            reply_json(x->req, 200, cache_json(x, at.ino, &cur, &pol));
            return;
        }
        rc = core_bucket_blob_put(x->a->core, &sp, at.ino, CORE_BLOB_CACHE, NULL, 0);
        if (rc == 0)
            srv_log(INFO, ADMIN, "tenant=%u cache mode of bucket %s removed by %s", x->tenant,
                    x->bucket, x->who->name);
        reply_deleted(x, rc, "delete cache mode");
        return;
    }
    static const char *const known[] = {"ttl_s", "read_only", "dirty_max_bytes", "preset", NULL};
    json_t *j = body_json(x->req);
    if (!j)
        return;
    if (only_fields(x->req, j, known) < 0) {
        json_decref(j);
        return;
    }
    if (json_object_get(j, "preset")) {
        json_decref(j);
        bad(x->req, "'preset': a workload preset is set on the bucket's tier policy (PUT "
                    ".../tier {\"preset\": ...}) or a directory's (.../tier?dir=PATH)");
        return;
    }
    uint64_t ttl = TIER_CACHE_TTL_DEFAULT, dmax = 0;
    bool ro = false, has_dmax = json_object_get(j, "dirty_max_bytes") != NULL;
    int b = get_uint(x->req, j, "ttl_s", TIER_CACHE_TTL_MAX, &ttl);
    if (b == 0)
        b = get_bool(x->req, j, "read_only", &ro);
    if (b == 0)
        b = get_uint(x->req, j, "dirty_max_bytes", (uint64_t)1 << 52, &dmax);
    json_decref(j);
    if (b < 0)
        return;
    if (!haspol) {
        admin__error_of(x->req, -EBUSY,
                        "the bucket has no tier policy: set one first (PUT .../tier); its "
                        "remote's bucket and prefix are what the cache fronts");
        return;
    }
    struct core_bucket_vcfg vc;
    if (core_bucket_vcfg_get(x->a->core, &sp, at.ino, &vc) == 0 &&
        vc.versioning != CORE_VERS_NONE) {
        admin__error_of(x->req, -EBUSY,
                        "cache mode needs a bucket that never had versioning (the tier "
                        "keeps no versions: docs/tiering.md)");
        return;
    }
    if (!is_system(x) &&
        tenants_remote_usable(x->a->tenants, pol.remote, x->tenant, false) == -EACCES) {
        forbidden(x->req, "a system admin set this bucket's tier policy (a system-wide "
                          "remote): only a system admin may change its cache mode");
        return;
    }
    if (has_dmax) {
        /* the bound is the bucket's own dirty_bound (its tier settings entry): the
         * same knob as PUT .../tier {"dirty_bound"}, which a preset's default yields to */
        static struct tier_dirpol v[TIER_DIRPOL_MAX + 1];
        int n = dirpols_get(x, at.ino, v);
        if (n < 0) {
            reply_err(x->req, n, "tier settings");
            return;
        }
        const struct tier_dirpol *be = bucket_ent(v, n, at.ino);
        struct tier_dirpol ent = be ? *be : (struct tier_dirpol){.dir = at.ino};
        ent.dirty_bound = dmax;
        ent.set |= TIER_D_DIRTY;
        if (settings_put(x, at.ino, at.ino, &ent) < 0)
            return;
        if (tier_upload_default())
            tier_upload_kick(tier_upload_default()); /* the bound applies after a pass */
    }
    memset(&tc, 0, sizeof(tc));
    tc.ttl_s = (uint32_t)ttl;
    tc.read_only = ro;
    uint8_t enc[TIER_CACHE_LEN];
    size_t elen = tier_cache_encode(&tc, enc);
    rc = core_bucket_blob_put(x->a->core, &sp, at.ino, CORE_BLOB_CACHE, enc, elen);
    if (rc < 0) {
        reply_err(x->req, rc, "set cache mode");
        return;
    }
    core_cache_invalidate(x->a->core, at.ino);
    srv_log(INFO, ADMIN,
            "tenant=%u bucket %s in cache mode over remote %u, set by %s: ttl %u s, %s%s%llu",
            x->tenant, x->bucket, pol.remote, x->who->name, tc.ttl_s,
            tc.read_only ? "read-only" : "read-write", has_dmax ? ", dirty bound " : "",
            (unsigned long long)(has_dmax ? dmax : 0));
    reply_json(x->req, 200, cache_json(x, at.ino, &tc, &pol));
}

static int sync_uid(void *arg, const struct qos_policy *p)
{
    struct admin *a = arg;
    struct tenant_user u;
    if (p->level == QOS_LEVEL_USER && !p->has_uid &&
        tenants_user_get(a->tenants, p->tenant, p->user, &u) == 0)
        qos_policy_set_uid(a->qos, p->tenant, p->user, u.uid);
    return 0;
}

/* Bucket and directory policies whose inode is gone (the bucket or directory
 * was deleted) can no longer be named through the API: drop them. */
static void drop_stale_qos(struct admin *a, uint32_t tenant)
{
    static struct drop_ctx d; /* large; the admin API runs on one thread */
    if (!a->qos || !a->core)
        return;
    memset(&d, 0, sizeof(d));
    d.tenant = tenant;
    if (qos_policy_list(a->qos, tenant ? collect_policy : collect_any, &d) < 0)
        return;
    for (size_t i = 0; i < d.n; i++) {
        const struct qos_policy *p = &d.pol[i];
        if (p->level != QOS_LEVEL_BUCKET && p->level != QOS_LEVEL_DIR)
            continue;
        struct core_principal cp = {.tenant = p->tenant, .flags = CORE_P_SUPER};
        struct core_attr at;
        uint64_t ino = p->level == QOS_LEVEL_DIR ? p->dir : p->bucket;
        if (core_getattr(a->core, &cp, ino, 0, &at) == SRV_ESTALE ||
            (p->level == QOS_LEVEL_DIR &&
             core_getattr(a->core, &cp, p->bucket, 0, &at) == SRV_ESTALE)) {
            srv_log(INFO, ADMIN, "tenant=%u QoS policy of %s %llu dropped: it no longer exists",
                    p->tenant, qos_level_name(p->level), (unsigned long long)ino);
            qos_policy_delete_at(a->qos, p->tenant, p->level, ino);
        }
    }
}

void admin__qos_uids_sync(struct admin *a)
{
    if (a->qos && a->tenants)
        qos_policy_list(a->qos, sync_uid, a);
    drop_stale_qos(a, 0);
}

/* /tenants/{tenant}/qos and /tenants/{tenant}/users/{user}/qos. */
static void qos_item(struct api_req *x)
{
    qos_level_item(x, x->user ? QOS_LEVEL_USER : QOS_LEVEL_TENANT);
}

/* /tenants/{tenant}/buckets/{bucket}/qos[?dir=PATH]. */
static void qos_bucket_item(struct api_req *x)
{
    qos_level_item(x, QOS_LEVEL_BUCKET);
}

/* /tenants/{tenant}/qos/nfs-default. */
static void qos_nfs_default_item(struct api_req *x)
{
    qos_level_item(x, QOS_LEVEL_NFS_DEFAULT);
}

struct qos_list_ctx {
    uint32_t tenant;
    json_t *arr;
};

static int append_qos(void *arg, const struct qos_policy *p)
{
    struct qos_list_ctx *c = arg;
    if (p->tenant != c->tenant)
        return 0;
    return json_array_append_new(c->arr, qos_json(p)) ? -ENOMEM : 0;
}

/* /tenants/{tenant}/qos/policies: every policy of the tenant, at every level. */
static void qos_list(struct api_req *x)
{
    drop_stale_qos(x->a, x->tenant);
    struct qos_list_ctx c = {x->tenant, json_array()};
    int rc = c.arr ? qos_policy_list(x->a->qos, append_qos, &c) : -ENOMEM;
    if (rc < 0) {
        json_decref(c.arr);
        reply_err(x->req, rc, "list qos");
        return;
    }
    reply_json(x->req, 200, json_pack("{s:o}", "policies", c.arr));
}

/* /qos/system: the policy of the system class (background work), for system
 * admins only. GET answers the policy in force and where it comes from
 * ("config": the qos_system_* options, or "api": stored here); PUT replaces
 * it, PATCH changes the fields given, DELETE goes back to the options. It
 * takes caps, burst_ms and weight; never a minimum (400). */
static void qos_system_item(struct api_req *x)
{
    struct qos_policy p;
    bool stored = false;
    int rc;
    if (x->cmd == EVHTTP_REQ_DELETE) {
        rc = qos_system_reset(x->a->qos);
        reply_deleted(x, rc == -ENOENT ? 0 : rc, "reset system qos");
        if (rc == 0)
            srv_log(INFO, ADMIN, "system QoS class back to its configured default by %s",
                    x->who->name);
        return;
    }
    qos_system_get(x->a->qos, &p, &stored);
    if (x->cmd != EVHTTP_REQ_GET) {
        if (x->cmd == EVHTTP_REQ_PUT)
            memset(&p, 0, sizeof(p));
        json_t *j = body_json(x->req);
        if (!j)
            return;
        int b = qos_fields_parse(x->req, j, &p);
        json_decref(j);
        if (b < 0)
            return;
        if (p.min_read_bps || p.min_write_bps || p.min_iops) {
            bad(x->req, "the system class takes no minimum (min_read_bps, min_write_bps, "
                        "min_iops): it would be carved out of the tenants' guarantees");
            return;
        }
        rc = qos_system_set(x->a->qos, &p);
        if (rc < 0) {
            reply_err(x->req, rc, "set system qos");
            return;
        }
        srv_log(INFO, ADMIN,
                "system QoS class set by %s: read %llu B/s, write %llu B/s, meta %llu op/s, "
                "weight %u",
                x->who->name, (unsigned long long)p.read_bps, (unsigned long long)p.write_bps,
                (unsigned long long)p.meta_iops, p.weight);
        qos_system_get(x->a->qos, &p, &stored);
    }
    json_t *j = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s}", "level", "system", "read_bps",
                          (json_int_t)p.read_bps, "write_bps", (json_int_t)p.write_bps, "read_iops",
                          (json_int_t)p.read_iops, "write_iops", (json_int_t)p.write_iops,
                          "meta_iops", (json_int_t)p.meta_iops, "burst_ms", (json_int_t)p.burst_ms,
                          "weight", (json_int_t)(p.weight ? p.weight : QOS_SYSTEM_WEIGHT_DEFAULT),
                          "source", stored ? "api" : "config");
    reply_json(x->req, 200, j);
}

/* ---- routing ---- */

#define M_GET EVHTTP_REQ_GET
#define M_POST EVHTTP_REQ_POST
#define M_PUT EVHTTP_REQ_PUT
#define M_PATCH EVHTTP_REQ_PATCH
#define M_DELETE EVHTTP_REQ_DELETE

/* What a route's handler may take for granted; the router checks these in
 * this order, after the method and the caller's scope, and answers for it. */
#define NEED_CORE 0x1   /* the store is open (else 503) */
#define NEED_QOS 0x2    /* QoS is running (else 503) */
#define NEED_TENANT 0x4 /* {tenant} exists, in x->ti (else 404 "no such tenant N") */
#define NEED_USER                                                                                  \
    0x8                  /* {tenant} and its {user} exist, in x->ti and x->u (else 404             \
                          * "no such user N in tenant 'NAME' (ID)") */
#define NEED_KEY 0x10    /* {akey} exists, in x->k (else 404 "no such access key 'AKEY'") */
#define NEED_EXPORT 0x20 /* {export} exists, in x->e (else 404 "no such export N") */

struct route {
    unsigned methods;     /* methods answered */
    unsigned system_only; /* of those, the ones only a system admin may use */
    const char *pattern;  /* segments; {tenant} {user} {export} {bucket} {akey} are parameters */
    unsigned needs;       /* NEED_* */
    void (*fn)(struct api_req *x);
};

/* Every route of the API; docs/openapi.yaml lists the same (a test checks). */
#define ROUTE(methods, system_only, pattern, needs, fn)                                            \
    {(methods), (system_only), (pattern), (needs), (fn)}
static const struct route routes[] = {
    ROUTE(M_GET, 0, "/whoami", 0, whoami),
    ROUTE(M_GET | M_POST, M_POST, "/tenants", 0, tenants_collection),
    ROUTE(M_GET | M_PATCH | M_DELETE, M_PATCH | M_DELETE, "/tenants/{tenant}", NEED_TENANT,
          tenant_item),
    ROUTE(M_GET | M_POST, 0, "/tenants/{tenant}/users", NEED_TENANT, users_collection),
    ROUTE(M_GET | M_PATCH | M_PUT | M_DELETE, 0, "/tenants/{tenant}/users/{user}", NEED_USER,
          user_item),
    ROUTE(M_GET | M_POST, 0, "/tenants/{tenant}/users/{user}/keys", NEED_USER, user_keys),
    ROUTE(M_GET | M_PUT | M_PATCH | M_DELETE, 0, "/tenants/{tenant}/users/{user}/qos",
          NEED_QOS | NEED_TENANT | NEED_USER, qos_item),
    ROUTE(M_GET, 0, "/tenants/{tenant}/keys", NEED_TENANT, keys_collection),
    ROUTE(M_GET | M_PATCH | M_PUT | M_DELETE, 0, "/keys/{akey}", NEED_KEY, key_item),
    ROUTE(M_GET | M_POST, 0, "/tenants/{tenant}/exports", NEED_TENANT, exports_collection),
    ROUTE(M_GET | M_PATCH | M_PUT | M_DELETE, 0, "/exports/{export}", NEED_EXPORT, export_item),
    ROUTE(M_GET, 0, "/tenants/{tenant}/usage", NEED_CORE | NEED_TENANT, usage_quota),
    ROUTE(M_GET | M_PUT | M_DELETE, M_PUT | M_DELETE, "/tenants/{tenant}/quota",
          NEED_CORE | NEED_TENANT, usage_quota),
    ROUTE(M_GET, 0, "/tenants/{tenant}/buckets", NEED_CORE | NEED_TENANT, buckets_collection),
    ROUTE(M_GET, 0, "/tenants/{tenant}/buckets/{bucket}/usage", NEED_CORE | NEED_TENANT,
          usage_quota),
    ROUTE(M_GET | M_PUT | M_DELETE, 0, "/tenants/{tenant}/buckets/{bucket}/quota",
          NEED_CORE | NEED_TENANT, usage_quota),
    ROUTE(M_GET | M_PUT | M_PATCH | M_DELETE, M_PUT | M_PATCH | M_DELETE, "/tenants/{tenant}/qos",
          NEED_QOS | NEED_TENANT, qos_item),
    ROUTE(M_GET | M_PUT | M_PATCH | M_DELETE, 0, "/tenants/{tenant}/buckets/{bucket}/qos",
          NEED_CORE | NEED_QOS | NEED_TENANT, qos_bucket_item),
    ROUTE(M_GET | M_PUT | M_PATCH | M_DELETE, 0, "/tenants/{tenant}/qos/nfs-default",
          NEED_QOS | NEED_TENANT, qos_nfs_default_item),
    ROUTE(M_GET, 0, "/tenants/{tenant}/qos/policies", NEED_QOS | NEED_TENANT, qos_list),
    ROUTE(M_GET | M_PUT | M_PATCH | M_DELETE, M_GET | M_PUT | M_PATCH | M_DELETE, "/qos/system",
          NEED_QOS, qos_system_item),
    ROUTE(M_GET | M_POST, 0, "/remotes", 0, remotes_collection),
    ROUTE(M_GET | M_PATCH | M_DELETE, 0, "/remotes/{remote}", 0, remote_item),
    ROUTE(M_GET | M_PUT | M_DELETE, 0, "/tenants/{tenant}/buckets/{bucket}/tier",
          NEED_CORE | NEED_TENANT, tier_item),
    ROUTE(M_GET | M_POST, 0, "/tenants/{tenant}/buckets/{bucket}/tier/flush",
          NEED_CORE | NEED_TENANT, tier_flush),
    ROUTE(M_GET | M_PUT | M_DELETE, 0, "/tenants/{tenant}/buckets/{bucket}/cache",
          NEED_CORE | NEED_TENANT, cache_item),
};

/* Split "/a/b/c" into at most SEG_MAX decoded segments. @return count or -1. */
static int split_path(const char *path, char segs[SEG_MAX][256])
{
    int n = 0;
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, "/");
        if (n == SEG_MAX || len >= 256)
            return -1;
        char raw[256];
        memcpy(raw, p, len);
        raw[len] = '\0';
        size_t outlen = 0;
        char *dec = evhttp_uridecode(raw, 0, &outlen);
        if (!dec || outlen >= 256 || memchr(dec, '\0', outlen)) {
            free(dec);
            return -1;
        }
        memcpy(segs[n], dec, outlen + 1);
        free(dec);
        n++;
        p += len;
    }
    return n;
}

/* Does @p r match the segments? Parameters are copied into @p x.
 * @return 1 match, 0 no match, -1 a parameter is malformed (404 sent). */
static int route_match(const struct route *r, char seg[SEG_MAX][256], int n, struct api_req *x)
{
    char pat[SEG_MAX][256];
    int pn = split_path(r->pattern, pat);
    if (pn != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (pat[i][0] != '{' && strcmp(pat[i], seg[i]) != 0)
            return 0;
    for (int i = 0; i < n; i++) {
        uint64_t v;
        if (strcmp(pat[i], "{tenant}") == 0) {
            if (!parse_u64(seg[i], &v) || v == 0 || v > UINT32_MAX) {
                admin__error_of(x->req, -ENOENT, "tenant ids are positive integers");
                return -1;
            }
            x->tenant = (uint32_t)v;
        } else if (strcmp(pat[i], "{user}") == 0) {
            if (!parse_u64(seg[i], &v) || v == 0) {
                admin__error_of(x->req, -ENOENT, "user ids are positive integers");
                return -1;
            }
            x->user = v;
        } else if (strcmp(pat[i], "{export}") == 0) {
            if (!parse_u64(seg[i], &v) || v == 0 || v > UINT32_MAX) {
                admin__error_of(x->req, -ENOENT, "export ids are positive integers");
                return -1;
            }
            x->export = (uint32_t)v;
        } else if (strcmp(pat[i], "{remote}") == 0) {
            if (!parse_u64(seg[i], &v) || v == 0 || v > UINT32_MAX) {
                admin__error_of(x->req, -ENOENT, "remote ids are positive integers");
                return -1;
            }
            x->remote = (uint32_t)v;
        } else if (strcmp(pat[i], "{bucket}") == 0) {
            x->bucket = seg[i];
        } else if (strcmp(pat[i], "{akey}") == 0) {
            x->akey = seg[i];
        }
    }
    return 1;
}

/* Check what @p r needs (NEED_*), filling x->ti and x->u.
 * @return true, or false (the error sent). */
static bool needs_met(struct api_req *x, const struct route *r)
{
    int rc;
    if ((r->needs & NEED_CORE) && !x->a->core) {
        admin__error(x->req, ADMIN_E_UNAVAILABLE, "the store is not open");
        return false;
    }
    if ((r->needs & NEED_QOS) && !x->a->qos) {
        admin__error(x->req, ADMIN_E_UNAVAILABLE, "QoS is not running");
        return false;
    }
    /* A user is looked up in its tenant: a missing tenant is named as such. */
    if ((r->needs & (NEED_TENANT | NEED_USER)) &&
        (rc = tenants_tenant_get(x->a->tenants, x->tenant, &x->ti)) < 0) {
        lookup_failed(x->req, rc, "tenant", "no such tenant %u", x->tenant);
        return false;
    }
    if ((r->needs & NEED_USER) &&
        (rc = tenants_user_get(x->a->tenants, x->tenant, x->user, &x->u)) < 0) {
        lookup_failed(x->req, rc, "user", "no such user %llu in tenant '%s' (%u)",
                      (unsigned long long)x->user, x->ti.name, x->tenant);
        return false;
    }
    if ((r->needs & NEED_KEY) && (rc = tenants_key_get(x->a->tenants, x->akey, &x->k)) < 0) {
        lookup_failed(x->req, rc, "key", "no such access key '%s'", x->akey);
        return false;
    }
    if ((r->needs & NEED_EXPORT) &&
        (rc = tenants_export_get_admin(x->a->tenants, x->export, &x->e)) < 0) {
        lookup_failed(x->req, rc, "export", "no such export %u", x->export);
        return false;
    }
    return true;
}

/* May a tenant admin reach what @p x names? @return true, or false (403 sent). */
static bool in_scope(struct api_req *x, const struct route *r)
{
    if (is_system(x))
        return true;
    if (r->system_only & x->cmd) {
        forbidden(x->req, "only a system admin may do this");
        return false;
    }
    if (x->tenant && x->tenant != x->who->tenant) {
        forbidden(x->req, "a tenant admin may manage only its own tenant");
        return false;
    }
    if (x->akey) {
        struct tenant_key k;
        if (tenants_key_get(x->a->tenants, x->akey, &k) < 0 || k.tenant != x->who->tenant) {
            forbidden(x->req, "not an access key of your tenant");
            return false;
        }
    }
    if (x->export) {
        struct tenant_export e;
        if (tenants_export_get_admin(x->a->tenants, x->export, &e) < 0 ||
            e.tenant != x->who->tenant) {
            forbidden(x->req, "not an export of your tenant");
            return false;
        }
    }
    return true;
}

void admin__api(struct admin *a, struct evhttp_request *req, const char *path,
                const struct admin_caller *who)
{
    char seg[SEG_MAX][256];
    struct api_req x;
    memset(&x, 0, sizeof(x));
    x.a = a;
    x.req = req;
    x.cmd = evhttp_request_get_command(req);
    x.who = who;
    TAILQ_INIT(&x.query);

    if (!a->tenants) {
        admin__error(req, ADMIN_E_UNAVAILABLE, "tenants are not loaded");
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
    if (q && evhttp_parse_query_str(q, &x.query) < 0) {
        bad(req, "malformed query string");
        goto out;
    }
    int n = split_path(path, seg);
    if (n < 1) {
        admin__error_of(req, -ENOENT, "no such resource");
        goto out;
    }
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct route *r = &routes[i];
        int m = route_match(r, seg, n, &x);
        if (m < 0)
            goto out;
        if (m == 0)
            continue;
        if (!(r->methods & x.cmd)) {
            no_method(req);
            goto out;
        }
        if (!in_scope(&x, r) || !needs_met(&x, r))
            goto out;
        r->fn(&x);
        goto out;
    }
    admin__error_of(req, -ENOENT, "no such resource");
out:
    evhttp_clear_headers(&x.query);
}
