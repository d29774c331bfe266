/* SPDX-License-Identifier: Apache-2.0
 * admin_api: the JSON REST API under /api/v1 (bearer-authenticated by admin.c).
 *
 *   GET    /tenants                          list tenants
 *   POST   /tenants {"name"}                 create (201)
 *   GET    /tenants/ID                       one tenant
 *   DELETE /tenants/ID                       delete (409 while it holds a bucket)
 *   GET    /tenants/ID/users                 list users
 *   POST   /tenants/ID/users {"name","uid","gid","gids","tenant_admin"}   create (201)
 *   GET    /tenants/ID/users/UID             one user
 *   PATCH  /tenants/ID/users/UID {"uid","gid","gids","disabled","tenant_admin"}
 *   DELETE /tenants/ID/users/UID             delete (with its keys)
 *   POST   /tenants/ID/users/UID/keys        new access key; the secret is shown once (201)
 *   GET    /tenants/ID/keys                  list keys (never secrets)
 *   GET|PATCH {"disabled"}|DELETE /keys/AKEY
 *   GET    /tenants/ID/exports               list exports
 *   POST   /tenants/ID/exports {"path","clients":[..],"read_only","root_squash",
 *                               "all_squash","anon_uid","anon_gid"}   create (201)
 *   GET|DELETE /exports/ID
 *   GET    /tenants/ID/usage                 tenant usage and limits
 *   GET|PUT /tenants/ID/quota {"bytes_limit","inodes_limit"}
 *   GET    /tenants/ID/buckets/NAME/usage
 *   GET|PUT /tenants/ID/buckets/NAME/quota
 *   GET|PUT|DELETE /tenants/ID/qos {"read_bps","write_bps","read_iops","write_iops",
 *                                   "meta_iops","burst_ms"}
 * Errors: {"error": CODE, "message": TEXT} with 400 (bad JSON or field), 404,
 * 405, 409 (exists / not empty), 503 (component not running), 500.
 * Thread: the admin thread. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_int.h"
#include "core.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "srv_log.h"
#include "tenants.h"

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

/* Map an internal error to an HTTP status and code for the API. */
static void reply_err(struct evhttp_request *req, int err, const char *what)
{
    int status;
    const char *code;
    switch (err) {
    case -ENOENT:
    case SRV_ENOBUCKET:
        status = 404;
        code = "NotFound";
        break;
    case -EEXIST:
        status = 409;
        code = "AlreadyExists";
        break;
    case -ENOTEMPTY:
        status = 409;
        code = "NotEmpty";
        break;
    case -EINVAL:
    case SRV_EBADNAME:
    case SRV_EBADREQ:
        status = 400;
        code = "InvalidArgument";
        break;
    case -EACCES:
    case -EPERM:
        status = 403;
        code = "Forbidden";
        break;
    case SRV_ENOTSUPP:
    case -ENOTSUP:
        status = 501;
        code = "NotImplemented";
        break;
    default:
        status = 500;
        code = "InternalError";
        srv_log(ERROR, ADMIN, "%s: %s", what, srv_strerror(err));
        break;
    }
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", what, srv_strerror(err));
    admin__error(req, status, code, msg);
}

static void bad(struct evhttp_request *req, const char *msg)
{
    admin__error(req, 400, "InvalidArgument", msg);
}

static void no_method(struct evhttp_request *req)
{
    admin__error(req, 405, "MethodNotAllowed", "method not allowed on this resource");
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
    return json_pack("{s:I,s:I,s:s,s:I,s:b,s:b,s:b,s:I,s:I,s:o}", "id", (json_int_t)e->id,
                     "tenant", (json_int_t)e->tenant, "path", e->path, "dir", (json_int_t)e->dir,
                     "read_only", (e->flags & TENANT_EXPORT_RO) != 0, "root_squash",
                     (e->flags & TENANT_EXPORT_ROOT_SQUASH) != 0, "all_squash",
                     (e->flags & TENANT_EXPORT_ALL_SQUASH) != 0, "anon_uid",
                     (json_int_t)e->anon_uid, "anon_gid", (json_int_t)e->anon_gid, "clients",
                     nets);
}

static json_t *usage_json(const struct core_usage *u)
{
    return json_pack("{s:I,s:I,s:I,s:I}", "bytes", (json_int_t)u->bytes, "inodes",
                     (json_int_t)u->inodes, "bytes_limit", (json_int_t)u->bytes_limit,
                     "inodes_limit", (json_int_t)u->inodes_limit);
}

static json_t *qos_json(const struct qos_policy *p)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "tenant",
                     (json_int_t)p->tenant, "user", (json_int_t)p->user, "read_bps",
                     (json_int_t)p->read_bps, "write_bps", (json_int_t)p->write_bps,
                     "read_iops", (json_int_t)p->read_iops, "write_iops",
                     (json_int_t)p->write_iops, "meta_iops", (json_int_t)p->meta_iops,
                     "burst_ms", (json_int_t)p->burst_ms, "min_read_bps",
                     (json_int_t)p->min_read_bps, "min_write_bps", (json_int_t)p->min_write_bps,
                     "min_iops", (json_int_t)p->min_iops);
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

/* ---- resources ---- */

static void tenants_collection(struct admin *a, struct evhttp_request *req,
                               enum evhttp_cmd_type cmd)
{
    if (cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        int rc = tenants_tenant_list(a->tenants, append_tenant, arr);
        if (rc < 0) {
            json_decref(arr);
            reply_err(req, rc, "list tenants");
            return;
        }
        reply_json(req, 200, arr);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        no_method(req);
        return;
    }
    json_t *j = body_json(req);
    if (!j)
        return;
    const char *name = json_string_value(json_object_get(j, "name"));
    if (!name) {
        json_decref(j);
        bad(req, "'name' (string) is required");
        return;
    }
    struct tenant_info ti;
    int rc = tenants_tenant_create(a->tenants, name, &ti);
    json_decref(j);
    if (rc < 0) {
        reply_err(req, rc, "create tenant");
        return;
    }
    srv_log(INFO, ADMIN, "tenant=%u created through the API", ti.id);
    reply_json(req, 201, tenant_json(&ti));
}

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

static void users_collection(struct admin *a, struct evhttp_request *req,
                             enum evhttp_cmd_type cmd, uint32_t tid)
{
    struct tenant_info ti;
    int rc = tenants_tenant_get(a->tenants, tid, &ti);
    if (rc < 0) {
        reply_err(req, rc, "tenant");
        return;
    }
    if (cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        rc = tenants_user_list(a->tenants, tid, append_user, arr);
        if (rc < 0) {
            json_decref(arr);
            reply_err(req, rc, "list users");
            return;
        }
        reply_json(req, 200, arr);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        no_method(req);
        return;
    }
    json_t *j = body_json(req);
    if (!j)
        return;
    struct tenant_user u, out;
    memset(&u, 0, sizeof(u));
    u.tenant = tid;
    u.uid = u.gid = 1000;
    int b;
    if (!json_is_string(json_object_get(j, "name"))) {
        json_decref(j);
        bad(req, "'name' (string) is required");
        return;
    }
    user_fields(req, j, &u, &b);
    json_decref(j);
    if (b)
        return;
    rc = tenants_user_create(a->tenants, &u, &out);
    if (rc < 0) {
        reply_err(req, rc, "create user");
        return;
    }
    reply_json(req, 201, user_json(&out));
}

static void user_item(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                      uint32_t tid, uint64_t uid)
{
    struct tenant_user u;
    int rc = tenants_user_get(a->tenants, tid, uid, &u);
    if (rc < 0) {
        reply_err(req, rc, "user");
        return;
    }
    if (cmd == EVHTTP_REQ_GET) {
        reply_json(req, 200, user_json(&u));
        return;
    }
    if (cmd == EVHTTP_REQ_DELETE) {
        rc = tenants_user_delete(a->tenants, tid, uid);
        if (rc < 0) {
            reply_err(req, rc, "delete user");
        } else {
            if (a->qos)
                qos_policy_delete_user(a->qos, tid, uid); /* -ENOENT when it had none */
            reply_empty(req, 204);
        }
        return;
    }
    if (cmd != EVHTTP_REQ_PATCH && cmd != EVHTTP_REQ_PUT) {
        no_method(req);
        return;
    }
    json_t *j = body_json(req);
    if (!j)
        return;
    int b;
    user_fields(req, j, &u, &b);
    json_decref(j);
    if (b)
        return;
    rc = tenants_user_update(a->tenants, &u);
    if (rc < 0) {
        reply_err(req, rc, "update user");
        return;
    }
    reply_json(req, 200, user_json(&u));
}

static void user_keys(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                      uint32_t tid, uint64_t uid)
{
    if (cmd != EVHTTP_REQ_POST) {
        no_method(req);
        return;
    }
    char ak[TENANT_AKEY_MAX + 1], sk[TENANT_SECRET_MAX + 1];
    int rc = tenants_key_create(a->tenants, tid, uid, ak, sk);
    if (rc < 0) {
        reply_err(req, rc, "create key");
        return;
    }
    reply_json(req, 201,
               json_pack("{s:s,s:s,s:I,s:I}", "access_key", ak, "secret_key", sk, "tenant",
                         (json_int_t)tid, "user", (json_int_t)uid));
    memset(sk, 0, sizeof(sk));
}

static void keys_collection(struct admin *a, struct evhttp_request *req,
                            enum evhttp_cmd_type cmd, uint32_t tid)
{
    if (cmd != EVHTTP_REQ_GET) {
        no_method(req);
        return;
    }
    struct tenant_info ti;
    int rc = tenants_tenant_get(a->tenants, tid, &ti);
    if (rc < 0) {
        reply_err(req, rc, "tenant");
        return;
    }
    json_t *arr = json_array();
    rc = tenants_key_list(a->tenants, tid, append_key, arr);
    if (rc < 0) {
        json_decref(arr);
        reply_err(req, rc, "list keys");
        return;
    }
    reply_json(req, 200, arr);
}

static void key_item(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                     const char *akey)
{
    struct tenant_key k;
    int rc = tenants_key_get(a->tenants, akey, &k);
    if (rc < 0) {
        reply_err(req, rc, "key");
        return;
    }
    if (cmd == EVHTTP_REQ_GET) {
        reply_json(req, 200, key_json(&k));
        return;
    }
    if (cmd == EVHTTP_REQ_DELETE) {
        rc = tenants_key_delete(a->tenants, akey);
        if (rc < 0)
            reply_err(req, rc, "delete key");
        else
            reply_empty(req, 204);
        return;
    }
    if (cmd != EVHTTP_REQ_PATCH && cmd != EVHTTP_REQ_PUT) {
        no_method(req);
        return;
    }
    json_t *j = body_json(req);
    if (!j)
        return;
    bool dis = k.disabled;
    int b = get_bool(req, j, "disabled", &dis);
    json_decref(j);
    if (b < 0)
        return;
    rc = tenants_key_set_disabled(a->tenants, akey, dis);
    if (rc < 0) {
        reply_err(req, rc, "update key");
        return;
    }
    k.disabled = dis;
    reply_json(req, 200, key_json(&k));
}

static void exports_collection(struct admin *a, struct evhttp_request *req,
                               enum evhttp_cmd_type cmd, uint32_t tid)
{
    struct tenant_info ti;
    int rc = tenants_tenant_get(a->tenants, tid, &ti);
    if (rc < 0) {
        reply_err(req, rc, "tenant");
        return;
    }
    if (cmd == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        rc = tenants_export_list_tenant(a->tenants, tid, append_export, arr);
        if (rc < 0) {
            json_decref(arr);
            reply_err(req, rc, "list exports");
            return;
        }
        reply_json(req, 200, arr);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        no_method(req);
        return;
    }
    json_t *j = body_json(req);
    if (!j)
        return;
    struct tenant_export e, out;
    memset(&e, 0, sizeof(e));
    e.tenant = tid;
    e.anon_uid = e.anon_gid = 65534;
    const char *path = json_string_value(json_object_get(j, "path"));
    json_t *clients = json_object_get(j, "clients");
    bool ro = false, rsq = false, asq = false;
    uint64_t au = e.anon_uid, ag = e.anon_gid, dir = 0;
    if (!path || strlen(path) >= sizeof(e.path)) {
        json_decref(j);
        bad(req, "'path' (string, starting with '/') is required");
        return;
    }
    snprintf(e.path, sizeof(e.path), "%s", path);
    if (!json_is_array(clients) || json_array_size(clients) == 0 ||
        json_array_size(clients) > TENANT_EXPORT_MAX_NETS) {
        json_decref(j);
        bad(req, "'clients' must be an array of 1 to 8 address ranges, e.g. [\"10.0.0.0/8\"]");
        return;
    }
    for (size_t i = 0; i < json_array_size(clients); i++) {
        const char *s = json_string_value(json_array_get(clients, i));
        if (!s || tenants_net_parse(s, &e.nets[e.nnets]) < 0) {
            json_decref(j);
            bad(req, "'clients' holds a range that is not ADDR or ADDR/PREFIX");
            return;
        }
        e.nnets++;
    }
    if (get_bool(req, j, "read_only", &ro) < 0 || get_bool(req, j, "root_squash", &rsq) < 0 ||
        get_bool(req, j, "all_squash", &asq) < 0 ||
        get_uint(req, j, "anon_uid", UINT32_MAX, &au) < 0 ||
        get_uint(req, j, "anon_gid", UINT32_MAX, &ag) < 0 ||
        get_uint(req, j, "dir", UINT64_MAX >> 1, &dir) < 0) {
        json_decref(j);
        return;
    }
    json_decref(j);
    e.flags = (ro ? TENANT_EXPORT_RO : 0) | (rsq ? TENANT_EXPORT_ROOT_SQUASH : 0) |
              (asq ? TENANT_EXPORT_ALL_SQUASH : 0);
    e.anon_uid = (uint32_t)au;
    e.anon_gid = (uint32_t)ag;
    e.dir = dir;
    rc = tenants_export_create(a->tenants, &e, &out);
    if (rc < 0) {
        reply_err(req, rc, "create export");
        return;
    }
    reply_json(req, 201, export_json(&out));
}

static void export_item(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                        uint32_t id)
{
    struct tenant_export e;
    int rc = tenants_export_get_admin(a->tenants, id, &e);
    if (rc < 0) {
        reply_err(req, rc, "export");
        return;
    }
    if (cmd == EVHTTP_REQ_GET) {
        reply_json(req, 200, export_json(&e));
        return;
    }
    if (cmd != EVHTTP_REQ_DELETE) {
        no_method(req);
        return;
    }
    rc = tenants_export_delete(a->tenants, id);
    if (rc < 0)
        reply_err(req, rc, "delete export");
    else
        reply_empty(req, 204);
}

/* Usage/quota of the tenant (bucket NULL) or of one of its buckets. */
static void usage_quota(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                        uint32_t tid, const char *bucket, bool quota)
{
    struct tenant_info ti;
    uint64_t ino = 0;
    int rc;
    if (!a->core) {
        admin__error(req, 503, "Unavailable", "the store is not open");
        return;
    }
    if ((rc = tenants_tenant_get(a->tenants, tid, &ti)) < 0) {
        reply_err(req, rc, "tenant");
        return;
    }
    if (bucket) {
        struct core_principal p = {.tenant = tid, .flags = CORE_P_SUPER};
        struct core_attr at;
        rc = core_bucket_lookup(a->core, &p, bucket, strlen(bucket), &at);
        if (rc < 0) {
            reply_err(req, rc, "bucket");
            return;
        }
        ino = at.ino;
    }
    if (cmd == EVHTTP_REQ_PUT && quota) {
        json_t *j = body_json(req);
        if (!j)
            return;
        uint64_t bl = 0, il = 0;
        int b = get_uint(req, j, "bytes_limit", INT64_MAX, &bl);
        if (b == 0)
            b = get_uint(req, j, "inodes_limit", INT64_MAX, &il);
        json_decref(j);
        if (b < 0)
            return;
        rc = core_quota_set(a->core, tid, ino, bl, il);
        if (rc < 0) {
            reply_err(req, rc, "set quota");
            return;
        }
        srv_log(INFO, ADMIN, "tenant=%u quota on %s set: %llu bytes, %llu inodes", tid,
                bucket ? bucket : "the tenant", (unsigned long long)bl, (unsigned long long)il);
    } else if (cmd != EVHTTP_REQ_GET) {
        no_method(req);
        return;
    }
    struct core_usage u;
    rc = core_usage_get(a->core, tid, ino, &u);
    if (rc < 0) {
        reply_err(req, rc, "usage");
        return;
    }
    reply_json(req, 200, usage_json(&u));
}

/* QoS policy of a tenant (uid 0) or of one of its users. */
static void qos_item(struct admin *a, struct evhttp_request *req, enum evhttp_cmd_type cmd,
                     uint32_t tid, uint64_t uid)
{
    struct tenant_info ti;
    int rc;
    if (!a->qos) {
        admin__error(req, 503, "Unavailable", "QoS is not running");
        return;
    }
    if ((rc = tenants_tenant_get(a->tenants, tid, &ti)) < 0) {
        reply_err(req, rc, "tenant");
        return;
    }
    if (uid) {
        struct tenant_user u;
        if ((rc = tenants_user_get(a->tenants, tid, uid, &u)) < 0) {
            reply_err(req, rc, "user");
            return;
        }
    }
    struct qos_policy p = {.tenant = tid, .user = uid};
    if (cmd == EVHTTP_REQ_GET) {
        rc = qos_policy_get_user(a->qos, tid, uid, &p);
        if (rc == -ENOENT) {
            p = (struct qos_policy){.tenant = tid, .user = uid}; /* unlimited, all zero */
            rc = 0;
        }
        if (rc < 0)
            reply_err(req, rc, "qos");
        else
            reply_json(req, 200, qos_json(&p));
        return;
    }
    if (cmd == EVHTTP_REQ_DELETE) {
        rc = qos_policy_delete_user(a->qos, tid, uid);
        if (rc < 0 && rc != -ENOENT)
            reply_err(req, rc, "delete qos");
        else
            reply_empty(req, 204);
        return;
    }
    if (cmd != EVHTTP_REQ_PUT && cmd != EVHTTP_REQ_PATCH) {
        no_method(req);
        return;
    }
    if (cmd == EVHTTP_REQ_PATCH && qos_policy_get_user(a->qos, tid, uid, &p) < 0)
        p = (struct qos_policy){.tenant = tid, .user = uid};
    json_t *j = body_json(req);
    if (!j)
        return;
    const uint64_t lim = (uint64_t)1 << 52;
    uint64_t burst = p.burst_ms;
    int b = 0;
    if (get_uint(req, j, "read_bps", lim, &p.read_bps) < 0 ||
        get_uint(req, j, "write_bps", lim, &p.write_bps) < 0 ||
        get_uint(req, j, "read_iops", lim, &p.read_iops) < 0 ||
        get_uint(req, j, "write_iops", lim, &p.write_iops) < 0 ||
        get_uint(req, j, "meta_iops", lim, &p.meta_iops) < 0 ||
        get_uint(req, j, "min_read_bps", lim, &p.min_read_bps) < 0 ||
        get_uint(req, j, "min_write_bps", lim, &p.min_write_bps) < 0 ||
        get_uint(req, j, "min_iops", lim, &p.min_iops) < 0 ||
        get_uint(req, j, "burst_ms", 60000, &burst) < 0)
        b = -1;
    json_decref(j);
    if (b < 0)
        return;
    p.burst_ms = (uint32_t)burst;
    rc = qos_policy_set(a->qos, &p);
    if (rc < 0) {
        reply_err(req, rc, "set qos");
        return;
    }
    reply_json(req, 200, qos_json(&p));
}

struct drop_ctx {
    uint32_t tenant;
    uint64_t users[256];
    size_t n;
    bool more;
};

static int collect_policy(void *arg, const struct qos_policy *p)
{
    struct drop_ctx *d = arg;
    if (p->tenant != d->tenant)
        return 0;
    if (d->n == sizeof(d->users) / sizeof(d->users[0])) {
        d->more = true;
        return 1;
    }
    d->users[d->n++] = p->user;
    return 0;
}

/* Remove the tenant's policy and its users' policies. */
static void drop_tenant_qos(struct qos *q, uint32_t tenant)
{
    struct drop_ctx d;
    do {
        memset(&d, 0, sizeof(d));
        d.tenant = tenant;
        if (qos_policy_list(q, collect_policy, &d) < 0)
            return;
        for (size_t i = 0; i < d.n; i++)
            qos_policy_delete_user(q, tenant, d.users[i]);
    } while (d.more);
}

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

void admin__api(struct admin *a, struct evhttp_request *req, const char *path)
{
    char seg[SEG_MAX][256];
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    int n = split_path(path, seg);
    uint64_t id = 0, uid = 0;

    if (!a->tenants) {
        admin__error(req, 503, "Unavailable", "tenants are not loaded");
        return;
    }
    if (n < 1) {
        admin__error(req, 404, "NotFound", "no such resource");
        return;
    }
    if (strcmp(seg[0], "tenants") == 0) {
        if (n == 1) {
            tenants_collection(a, req, cmd);
            return;
        }
        if (!parse_u64(seg[1], &id) || id == 0 || id > UINT32_MAX) {
            admin__error(req, 404, "NotFound", "tenant ids are positive integers");
            return;
        }
        uint32_t tid = (uint32_t)id;
        if (n == 2) {
            struct tenant_info ti;
            int rc = tenants_tenant_get(a->tenants, tid, &ti);
            if (rc < 0) {
                reply_err(req, rc, "tenant");
            } else if (cmd == EVHTTP_REQ_GET) {
                reply_json(req, 200, tenant_json(&ti));
            } else if (cmd == EVHTTP_REQ_DELETE) {
                rc = tenants_tenant_delete(a->tenants, tid);
                if (rc < 0) {
                    reply_err(req, rc, "delete tenant");
                } else {
                    if (a->qos)
                        drop_tenant_qos(a->qos, tid);
                    reply_empty(req, 204);
                }
            } else {
                no_method(req);
            }
            return;
        }
        if (strcmp(seg[2], "users") == 0) {
            if (n == 3) {
                users_collection(a, req, cmd, tid);
                return;
            }
            if (!parse_u64(seg[3], &uid)) {
                admin__error(req, 404, "NotFound", "user ids are integers");
                return;
            }
            if (n == 4) {
                user_item(a, req, cmd, tid, uid);
                return;
            }
            if (n == 5 && strcmp(seg[4], "keys") == 0) {
                user_keys(a, req, cmd, tid, uid);
                return;
            }
            if (n == 5 && strcmp(seg[4], "qos") == 0 && uid) {
                qos_item(a, req, cmd, tid, uid);
                return;
            }
        } else if (n == 3 && strcmp(seg[2], "keys") == 0) {
            keys_collection(a, req, cmd, tid);
            return;
        } else if (n == 3 && strcmp(seg[2], "exports") == 0) {
            exports_collection(a, req, cmd, tid);
            return;
        } else if (n == 3 && strcmp(seg[2], "usage") == 0) {
            usage_quota(a, req, cmd, tid, NULL, false);
            return;
        } else if (n == 3 && strcmp(seg[2], "quota") == 0) {
            usage_quota(a, req, cmd, tid, NULL, true);
            return;
        } else if (n == 3 && strcmp(seg[2], "qos") == 0) {
            qos_item(a, req, cmd, tid, 0);
            return;
        } else if (n == 5 && strcmp(seg[2], "buckets") == 0 &&
                   (strcmp(seg[4], "usage") == 0 || strcmp(seg[4], "quota") == 0)) {
            usage_quota(a, req, cmd, tid, seg[3], strcmp(seg[4], "quota") == 0);
            return;
        }
    } else if (strcmp(seg[0], "keys") == 0 && n == 2) {
        key_item(a, req, cmd, seg[1]);
        return;
    } else if (strcmp(seg[0], "exports") == 0 && n == 2) {
        if (!parse_u64(seg[1], &id) || id > UINT32_MAX) {
            admin__error(req, 404, "NotFound", "export ids are integers");
            return;
        }
        export_item(a, req, cmd, (uint32_t)id);
        return;
    }
    admin__error(req, 404, "NotFound", "no such resource");
}
