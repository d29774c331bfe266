/* SPDX-License-Identifier: Apache-2.0
 * tenants: tenants, users, access keys and exports, kept in the core's
 * tables and cached in memory.
 *
 * Records are small versioned JSON objects (jansson), one per table row:
 *   META_REC_TENANTS  be32 id           -> {"v":1,"id","name"}
 *   META_REC_USERS    be32 tenant+be64  -> {"v":1,"tenant","id","name","uid","gid","gids",
 *                                         "disabled","tenant_admin"}
 *   META_REC_KEYS     access key id     -> {"v":1,"akey","tenant","user","disabled","secret"}
 *   META_REC_EXPORTS  be32 id           -> {"v":1,"id","tenant","path","dir","flags",
 *                                         "anon_uid","anon_gid","nets":["a/p",...]}
 *   META_REC_CONFIG   "tenants.next_*"  -> be64 counters (ids are never reused)
 * A key's secret is sealed with AES-256-GCM (tenants_crypt.c) under a master
 * key kept in data_dir/master.key (tenants_open_keyfile) or in META_REC_CONFIG
 * ("tenants.master_key", tenants_open).
 *
 * The cache holds every record (secrets decrypted) behind a rwlock: lookups
 * take it shared; changes persist first (meta_record_put is durable on
 * return), then update the cache under the exclusive lock. Changes are
 * serialised by a mutex, so check-then-write sequences (unique names, id
 * counters) cannot race.
 * Thread: every public call is thread-safe. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meta_record.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_path.h"
#include "tenants.h"
#include "tenants_int.h"

#define REC_VERSION 1
#define BOOT_TENANT 1
#define BOOT_USER 1
#define ANON_ID 65534

struct key_ent {
    struct tenant_key k;
    char secret[TENANT_SECRET_MAX + 1];
};

#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

struct tenants {
    struct core *core;
    struct meta_env *meta; /* the core's: where the records live */
    pthread_rwlock_t lock;   /* guards the cache */
    pthread_mutex_t mgmt;    /* serialises changes */
    uint8_t mkey[TENANTS_MKEY_LEN];
    void *remotes; /* tenants_remote.c's state */
    VEC(struct tenant_info) tenants;
    VEC(struct tenant_user) users;
    VEC(struct key_ent) keys;
    VEC(struct tenant_export) exports;
};

static int vec_grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, ncap * elem);
    if (!nv)
        return -ENOMEM;
    *v = nv;
    *cap = ncap;
    return 0;
}

#define VEC_PUSH(vec, item)                                                                        \
    (vec_grow((void **)&(vec).v, &(vec).cap, (vec).n, sizeof(*(vec).v)) < 0                        \
         ? -ENOMEM                                                                                 \
         : ((vec).v[(vec).n++] = (item), 0))
#define VEC_DEL(vec, i)                                                                            \
    do {                                                                                           \
        memmove(&(vec).v[i], &(vec).v[(i) + 1], ((vec).n - (i) - 1) * sizeof(*(vec).v));           \
        (vec).n--;                                                                                 \
    } while (0)

/* ---- keys of table rows ---- */

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void be64(uint8_t *p, uint64_t v)
{
    be32(p, (uint32_t)(v >> 32));
    be32(p + 4, (uint32_t)v);
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---- validation ---- */

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > TENANT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (i > 0 && (c == '-' || c == '_' || c == '.')) || (c >= 'A' && c <= 'Z');
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_akey(const char *s)
{
    size_t n = strlen(s);
    if (n < 3 || n > TENANT_AKEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static bool valid_secret(const char *s)
{
    size_t n = strlen(s);
    if (n < 8 || n > TENANT_SECRET_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* ---- counters ---- */

static int next_id(struct tenants *t, const char *name, uint64_t floor, uint64_t *out)
{
    void *val = NULL;
    size_t vlen = 0;
    uint64_t next = floor;
    int rc = meta_record_get(t->meta, META_REC_CONFIG, name, strlen(name), &val, &vlen);
    if (rc == 0 && vlen == 8)
        next = get_be64(val);
    free(val);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    if (next < floor)
        next = floor;
    uint8_t buf[8];
    be64(buf, next + 1);
    rc = meta_record_put(t->meta, META_REC_CONFIG, name, strlen(name), buf, 8, 0);
    if (rc < 0)
        return rc;
    *out = next;
    return 0;
}

/* ---- encode / decode ---- */

static int put_json(struct tenants *t, enum meta_rec_table tab, const void *key, size_t klen,
                    json_t *j, unsigned flags)
{
    if (!j)
        return -ENOMEM;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return -ENOMEM;
    int rc = meta_record_put(t->meta, tab, key, klen, s, strlen(s), flags);
    free(s);
    return rc;
}

static json_t *load_json(const void *val, size_t vlen)
{
    json_error_t e;
    json_t *j = json_loadb(val, vlen, 0, &e);
    if (!j)
        return NULL;
    json_t *v = json_object_get(j, "v");
    if (!json_is_integer(v) || json_integer_value(v) != REC_VERSION) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static int copy_str(json_t *j, const char *field, char *out, size_t outlen)
{
    const char *s = json_string_value(json_object_get(j, field));
    if (!s || strlen(s) >= outlen)
        return -1;
    strcpy(out, s);
    return 0;
}

static uint64_t get_u64(json_t *j, const char *field)
{
    return (uint64_t)json_integer_value(json_object_get(j, field));
}

static int save_tenant(struct tenants *t, const struct tenant_info *ti, unsigned flags)
{
    uint8_t k[4];
    be32(k, ti->id);
    return put_json(t, META_REC_TENANTS, k, 4,
                    json_pack("{s:i,s:I,s:s}", "v", REC_VERSION, "id", (json_int_t)ti->id, "name",
                              ti->name),
                    flags);
}

static int save_user(struct tenants *t, const struct tenant_user *u, unsigned flags)
{
    uint8_t k[12];
    be32(k, u->tenant);
    be64(k + 4, u->id);
    json_t *gids = json_array();
    for (uint32_t i = 0; gids && i < u->ngids && i < CORE_MAX_GIDS; i++)
        json_array_append_new(gids, json_integer(u->gids[i]));
    return put_json(t, META_REC_USERS, k, 12,
                    json_pack("{s:i,s:I,s:I,s:s,s:I,s:I,s:o*,s:b,s:b}", "v", REC_VERSION,
                              "tenant", (json_int_t)u->tenant, "id", (json_int_t)u->id, "name",
                              u->name, "uid", (json_int_t)u->uid, "gid", (json_int_t)u->gid,
                              "gids", gids, "disabled", u->disabled, "tenant_admin",
                              u->tenant_admin),
                    flags);
}

static int save_key(struct tenants *t, const struct key_ent *ke, unsigned flags)
{
    char sealed[2 * (12 + TENANT_SECRET_MAX + 16) + 1];
    int rc = tenants__seal(t->mkey, ke->k.akey, ke->secret, sealed, sizeof(sealed));
    if (rc < 0)
        return rc;
    return put_json(t, META_REC_KEYS, ke->k.akey, strlen(ke->k.akey),
                    json_pack("{s:i,s:s,s:I,s:I,s:b,s:s}", "v", REC_VERSION, "akey", ke->k.akey,
                              "tenant", (json_int_t)ke->k.tenant, "user", (json_int_t)ke->k.user,
                              "disabled", ke->k.disabled, "secret", sealed),
                    flags);
}

static int save_export(struct tenants *t, const struct tenant_export *e, unsigned flags)
{
    uint8_t k[4];
    be32(k, e->id);
    json_t *nets = json_array();
    for (uint32_t i = 0; nets && i < e->nnets && i < TENANT_EXPORT_MAX_NETS; i++) {
        char buf[INET6_ADDRSTRLEN + 8];
        tenants_net_format(&e->nets[i], buf, sizeof(buf));
        json_array_append_new(nets, json_string(buf));
    }
    return put_json(t, META_REC_EXPORTS, k, 4,
                    json_pack("{s:i,s:I,s:I,s:s,s:I,s:I,s:I,s:I,s:o*}", "v", REC_VERSION, "id",
                              (json_int_t)e->id, "tenant", (json_int_t)e->tenant, "path", e->path,
                              "dir", (json_int_t)e->dir, "flags", (json_int_t)e->flags,
                              "anon_uid", (json_int_t)e->anon_uid, "anon_gid",
                              (json_int_t)e->anon_gid, "nets", nets),
                    flags);
}

/* ---- loading ---- */

static int bad_record(const char *what, int *count)
{
    srv_log(ERROR, TENANT, "%s record failed to decode (corrupt or unknown version); skipped",
            what);
    (*count)++;
    return 0;
}

struct load_ctx {
    struct tenants *t;
    int bad;
    int rc;
};

static int load_tenant_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *lc = arg;
    json_t *j = load_json(val, vlen);
    struct tenant_info ti = {0};
    if (!j || copy_str(j, "name", ti.name, sizeof(ti.name)) < 0) {
        json_decref(j);
        return bad_record("tenant", &lc->bad);
    }
    ti.id = (uint32_t)get_u64(j, "id");
    json_decref(j);
    if (core_tenant_root(lc->t->core, ti.id, &ti.root) < 0)
        srv_log(WARN, TENANT, "tenant %u (%s) has no root in the core", ti.id, ti.name);
    if (VEC_PUSH(lc->t->tenants, ti) < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    return 0;
}

static int load_user_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *lc = arg;
    json_t *j = load_json(val, vlen);
    struct tenant_user u = {0};
    if (!j || copy_str(j, "name", u.name, sizeof(u.name)) < 0) {
        json_decref(j);
        return bad_record("user", &lc->bad);
    }
    u.tenant = (uint32_t)get_u64(j, "tenant");
    u.id = get_u64(j, "id");
    u.uid = (uint32_t)get_u64(j, "uid");
    u.gid = (uint32_t)get_u64(j, "gid");
    json_t *gids = json_object_get(j, "gids");
    for (size_t i = 0; i < json_array_size(gids) && i < CORE_MAX_GIDS; i++)
        u.gids[u.ngids++] = (uint32_t)json_integer_value(json_array_get(gids, i));
    u.disabled = json_is_true(json_object_get(j, "disabled"));
    u.tenant_admin = json_is_true(json_object_get(j, "tenant_admin"));
    json_decref(j);
    if (VEC_PUSH(lc->t->users, u) < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    return 0;
}

static int load_key_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *lc = arg;
    json_t *j = load_json(val, vlen);
    struct key_ent ke;
    char sealed[2 * (12 + TENANT_SECRET_MAX + 16) + 1];
    memset(&ke, 0, sizeof(ke));
    if (!j || copy_str(j, "akey", ke.k.akey, sizeof(ke.k.akey)) < 0 ||
        copy_str(j, "secret", sealed, sizeof(sealed)) < 0) {
        json_decref(j);
        return bad_record("access key", &lc->bad);
    }
    ke.k.tenant = (uint32_t)get_u64(j, "tenant");
    ke.k.user = get_u64(j, "user");
    ke.k.disabled = json_is_true(json_object_get(j, "disabled"));
    json_decref(j);
    int rc = tenants__unseal(lc->t->mkey, ke.k.akey, sealed, ke.secret, sizeof(ke.secret));
    if (rc < 0) {
        srv_log(CRIT, TENANT,
                "secret of access key %s does not decrypt with the master key (wrong or "
                "replaced master.key?)",
                ke.k.akey);
        lc->rc = SRV_ECORRUPT;
        return 1;
    }
    rc = VEC_PUSH(lc->t->keys, ke);
    OPENSSL_cleanse(&ke, sizeof(ke));
    if (rc < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    return 0;
}

static int load_export_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct load_ctx *lc = arg;
    json_t *j = load_json(val, vlen);
    struct tenant_export e;
    memset(&e, 0, sizeof(e));
    if (!j || copy_str(j, "path", e.path, sizeof(e.path)) < 0) {
        json_decref(j);
        return bad_record("export", &lc->bad);
    }
    e.id = (uint32_t)get_u64(j, "id");
    e.tenant = (uint32_t)get_u64(j, "tenant");
    char norm[sizeof(e.path)];
    if (srv_path_norm(e.path, norm, sizeof(norm), 0) == 0)
        memcpy(e.path, norm, sizeof(norm));
    else
        srv_log(WARN, TENANT, "tenant=%u export %u: path '%s' is not a valid export path; "
                "no MNT will find it", e.tenant, e.id, e.path);
    e.dir = get_u64(j, "dir");
    e.flags = (uint32_t)get_u64(j, "flags");
    e.anon_uid = (uint32_t)get_u64(j, "anon_uid");
    e.anon_gid = (uint32_t)get_u64(j, "anon_gid");
    json_t *nets = json_object_get(j, "nets");
    for (size_t i = 0; i < json_array_size(nets) && i < TENANT_EXPORT_MAX_NETS; i++) {
        const char *s = json_string_value(json_array_get(nets, i));
        if (s && tenants_net_parse(s, &e.nets[e.nnets]) == 0)
            e.nnets++;
    }
    json_decref(j);
    if (VEC_PUSH(lc->t->exports, e) < 0) {
        lc->rc = -ENOMEM;
        return 1;
    }
    return 0;
}

static int scan_any_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    *(bool *)arg = true;
    return 1;
}

static bool table_has_rows(struct meta_env *m, enum meta_rec_table tab)
{
    bool any = false;
    meta_record_scan(m, tab, NULL, 0, scan_any_cb, &any);
    return any;
}

#define MKEY_NAME "tenants.master_key"

/* Load the master key, or create one when the store holds no secret yet. */
static int master_key_load(struct tenants *t, const char *keyfile)
{
    int rc;
    bool have_keys = table_has_rows(t->meta, META_REC_KEYS) || tenants__remotes_stored(t->meta);

    if (!keyfile) {
        void *val = NULL;
        size_t vlen = 0;
        rc = meta_record_get(t->meta, META_REC_CONFIG, MKEY_NAME, strlen(MKEY_NAME), &val, &vlen);
        if (rc == 0 && vlen == TENANTS_MKEY_LEN) {
            memcpy(t->mkey, val, TENANTS_MKEY_LEN);
            OPENSSL_cleanse(val, vlen);
            free(val);
            return 0;
        }
        free(val);
        if (rc < 0 && rc != -ENOENT)
            return rc;
        if (rc == 0 || have_keys) {
            srv_log(CRIT, TENANT, "master key record is missing or malformed");
            return SRV_ECORRUPT;
        }
        if (tenants__random(t->mkey, TENANTS_MKEY_LEN) < 0)
            return -EIO;
        return meta_record_put(t->meta, META_REC_CONFIG, MKEY_NAME, strlen(MKEY_NAME), t->mkey,
                               TENANTS_MKEY_LEN, META_REC_NOOVERWRITE);
    }

    int fd = open(keyfile, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct stat st;
        ssize_t n = -1;
        if (fstat(fd, &st) == 0 && st.st_size == TENANTS_MKEY_LEN)
            n = read(fd, t->mkey, TENANTS_MKEY_LEN);
        close(fd);
        if (n != TENANTS_MKEY_LEN) {
            srv_log(CRIT, TENANT, "%s is not a %d-byte master key", keyfile, TENANTS_MKEY_LEN);
            return SRV_ECORRUPT;
        }
        if (st.st_mode & 077)
            srv_log(WARN, TENANT, "%s is readable by group/others (mode %03o); use 0600",
                    keyfile, (unsigned)(st.st_mode & 0777));
        return 0;
    }
    if (errno != ENOENT) {
        rc = -errno;
        srv_log(ERROR, TENANT, "cannot read %s: %s", keyfile, strerror(errno));
        return rc;
    }
    if (have_keys) {
        srv_log(CRIT, TENANT,
                "%s is missing but the store holds encrypted secrets; restore the file from "
                "the backup of this store",
                keyfile);
        return SRV_ECORRUPT;
    }
    if (tenants__random(t->mkey, TENANTS_MKEY_LEN) < 0)
        return -EIO;
    fd = open(keyfile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        srv_log(ERROR, TENANT, "cannot create %s: %s", keyfile, strerror(errno));
        return rc;
    }
    ssize_t w = write(fd, t->mkey, TENANTS_MKEY_LEN);
    rc = (w == TENANTS_MKEY_LEN && fsync(fd) == 0) ? 0 : -EIO;
    close(fd);
    if (rc < 0) {
        unlink(keyfile);
        srv_log(ERROR, TENANT, "cannot write %s", keyfile);
    }
    return rc;
}

static const char AKEY_ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
static const char SECRET_ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int gen_credentials(char *akey, char *secret)
{
    memcpy(akey, "S3N", 3);
    if (tenants__random_string(akey + 3, 17, AKEY_ALPHABET) < 0)
        return -EIO;
    return tenants__random_string(secret, 40, SECRET_ALPHABET);
}

static struct tenant_info *find_tenant(struct tenants *t, uint32_t id)
{
    for (size_t i = 0; i < t->tenants.n; i++)
        if (t->tenants.v[i].id == id)
            return &t->tenants.v[i];
    return NULL;
}

static struct tenant_user *find_user(struct tenants *t, uint32_t tenant, uint64_t id)
{
    for (size_t i = 0; i < t->users.n; i++)
        if (t->users.v[i].tenant == tenant && t->users.v[i].id == id)
            return &t->users.v[i];
    return NULL;
}

static struct key_ent *find_key(struct tenants *t, const char *akey)
{
    for (size_t i = 0; i < t->keys.n; i++)
        if (strcmp(t->keys.v[i].k.akey, akey) == 0)
            return &t->keys.v[i];
    return NULL;
}

static struct tenant_export *find_export(struct tenants *t, uint32_t id)
{
    for (size_t i = 0; i < t->exports.n; i++)
        if (t->exports.v[i].id == id)
            return &t->exports.v[i];
    return NULL;
}

/* ---- export paths: own prefixes, conflicts, suspension (rules: tenants.h) ----
 * These read the cache; callers hold mgmt (the cache only changes under it)
 * or the lock. */

/* A change of tenant names the rules look at before it is made: tenant @id
 * named @name, or gone when @name is NULL. */
struct names_view {
    uint32_t id;
    const char *name;
};

/* The tenant whose name is the first component of normalised @p path (the
 * path lies in its own prefix), 0 if none; as the names would be after @p v
 * (NULL: as they are). */
static uint32_t path_owner(const struct tenants *t, const char *path, const struct names_view *v)
{
    const char *c = path + 1;
    size_t n = strcspn(c, "/");
    if (n == 0)
        return 0;
    for (size_t i = 0; i < t->tenants.n; i++) {
        const struct tenant_info *ti = &t->tenants.v[i];
        const char *name = ti->name;
        if (v && v->id == ti->id && !(name = v->name))
            continue;
        if (strlen(name) == n && memcmp(name, c, n) == 0)
            return ti->id;
    }
    return 0;
}

/* May export @p e serve normalised @p path, which lies within its path? An
 * export of "/" never serves another tenant's own prefix. */
static bool export_serves(const struct tenants *t, const struct tenant_export *e,
                          const char *path, const struct names_view *v)
{
    if (strcmp(e->path, "/") != 0)
        return true;
    uint32_t owner = path_owner(t, path, v);
    return owner == 0 || owner == e->tenant;
}

static bool clients_overlap(const struct tenant_export *a, const struct tenant_export *b)
{
    for (uint32_t i = 0; i < a->nnets; i++)
        for (uint32_t j = 0; j < b->nnets; j++)
            if (tenants_net_overlap(&a->nets[i], &b->nets[j]))
                return true;
    return false;
}

/* Could a client admitted by both @p a and @p b not tell which one a path
 * names? The same path; or, across tenants, one path below the other (the
 * longer would shadow what the shorter serves there), unless the shorter
 * does not serve that prefix at all. */
static bool exports_conflict(const struct tenants *t, const struct tenant_export *a,
                             const struct tenant_export *b, const struct names_view *v)
{
    if (!clients_overlap(a, b))
        return false;
    if (strcmp(a->path, b->path) == 0)
        return true;
    if (a->tenant == b->tenant)
        return false;
    const struct tenant_export *shorter = a, *longer = b;
    if (strlen(a->path) > strlen(b->path)) {
        shorter = b;
        longer = a;
    }
    return srv_path_within(longer->path, shorter->path) >= 0 &&
           export_serves(t, shorter, longer->path, v);
}

/* The first export, in id order and other than @p e itself, that @p e would
 * conflict with; NULL if none. */
static const struct tenant_export *export_conflict_find(const struct tenants *t,
                                                        const struct tenant_export *e)
{
    for (size_t i = 0; i < t->exports.n; i++) {
        const struct tenant_export *o = &t->exports.v[i];
        if (o->id != e->id && exports_conflict(t, e, o, NULL))
            return o;
    }
    return NULL;
}

/* "ADDR/P, ADDR/P" of @p e's ranges. */
static void nets_text(const struct tenant_export *e, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < e->nnets && used + 1 < len; i++) {
        char one[INET6_ADDRSTRLEN + 8];
        tenants_net_format(&e->nets[i], one, sizeof(one));
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", one);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Would the name change @p v make two exports conflict that do not now?
 * The exports of a tenant being deleted go with it. Logs the first such pair. */
static bool names_change_conflicts(const struct tenants *t, const struct names_view *v)
{
    for (size_t i = 0; i < t->exports.n; i++) {
        const struct tenant_export *a = &t->exports.v[i];
        if (!v->name && a->tenant == v->id)
            continue;
        for (size_t j = i + 1; j < t->exports.n; j++) {
            const struct tenant_export *b = &t->exports.v[j];
            if (!v->name && b->tenant == v->id)
                continue;
            if (exports_conflict(t, a, b, v) && !exports_conflict(t, a, b, NULL)) {
                srv_log(INFO, TENANT, "tenant=%u %s refused: exports %u '%s' (tenant %u) and "
                        "%u '%s' (tenant %u) would conflict", v->id,
                        v->name ? "rename" : "delete", a->id, a->path, a->tenant, b->id,
                        b->path, b->tenant);
                return true;
            }
        }
    }
    return false;
}

/* Decide which exports are served: in id order, an export that conflicts with
 * an older served one is suspended. Logs every export that becomes suspended
 * or served again. Caller holds mgmt and the write lock (or the cache is not
 * shared yet). @return the number of suspended exports. */
static size_t exports_settle(struct tenants *t)
{
    size_t suspended = 0;
    for (size_t i = 0; i < t->exports.n; i++) {
        struct tenant_export *e = &t->exports.v[i];
        uint32_t was = e->conflict;
        const struct tenant_export *o = NULL;
        e->conflict = 0;
        for (size_t j = 0; j < i && !o; j++)
            if (!t->exports.v[j].conflict && exports_conflict(t, e, &t->exports.v[j], NULL))
                o = &t->exports.v[j];
        if (o) {
            e->conflict = o->id;
            suspended++;
        }
        if (o && was != o->id) {
            char en[256], on[256];
            nets_text(e, en, sizeof(en));
            nets_text(o, on, sizeof(on));
            srv_log(ERROR, TENANT, "tenant=%u export %u '%s' for %s conflicts with the older "
                    "export %u '%s' for %s of tenant %u: a client in both ranges could not tell "
                    "them apart, so export %u is not served until one of the two is changed or "
                    "deleted (docs/nfs.md, Export paths)", e->tenant, e->id, e->path, en, o->id,
                    o->path, on, o->tenant, e->id);
        } else if (!o && was) {
            srv_log(INFO, TENANT, "tenant=%u export %u '%s' no longer conflicts: served again",
                    e->tenant, e->id, e->path);
        }
    }
    return suspended;
}

bool tenants_path_is_own(struct tenants *t, uint32_t tenant, const char *path)
{
    pthread_rwlock_rdlock(&t->lock);
    bool own = tenant != 0 && path && path[0] == '/' && path_owner(t, path, NULL) == tenant;
    pthread_rwlock_unlock(&t->lock);
    return own;
}

/* Insert a key for an existing user (persist, then cache). Caller holds mgmt. */
static int key_add(struct tenants *t, uint32_t tenant, uint64_t user, const char *akey,
                   const char *secret)
{
    struct key_ent ke;
    memset(&ke, 0, sizeof(ke));
    snprintf(ke.k.akey, sizeof(ke.k.akey), "%s", akey);
    snprintf(ke.secret, sizeof(ke.secret), "%s", secret);
    ke.k.tenant = tenant;
    ke.k.user = user;
    int rc = save_key(t, &ke, META_REC_NOOVERWRITE);
    if (rc == 0) {
        pthread_rwlock_wrlock(&t->lock);
        rc = VEC_PUSH(t->keys, ke);
        pthread_rwlock_unlock(&t->lock);
    }
    OPENSSL_cleanse(&ke, sizeof(ke));
    return rc;
}

static int bootstrap(struct tenants *t, const char *akey, const char *secret)
{
    int rc;
    uint64_t id;
    struct tenant_info ti = {.id = BOOT_TENANT};
    snprintf(ti.name, sizeof(ti.name), "default");

    rc = core_tenant_create(t->core, BOOT_TENANT);
    if (rc < 0 && rc != -EEXIST)
        return rc;
    rc = core_tenant_root(t->core, BOOT_TENANT, &ti.root);
    if (rc < 0)
        return rc;
    if ((rc = next_id(t, "tenants.next_tenant", BOOT_TENANT, &id)) < 0 ||
        (rc = save_tenant(t, &ti, 0)) < 0)
        return rc;
    if ((rc = VEC_PUSH(t->tenants, ti)) < 0)
        return rc;

    struct tenant_user u = {.tenant = BOOT_TENANT, .id = BOOT_USER, .uid = 0, .gid = 0,
                            .tenant_admin = true};
    snprintf(u.name, sizeof(u.name), "admin");
    if ((rc = next_id(t, "tenants.next_user", BOOT_USER, &id)) < 0 ||
        (rc = save_user(t, &u, 0)) < 0 || (rc = VEC_PUSH(t->users, u)) < 0)
        return rc;

    if ((rc = key_add(t, BOOT_TENANT, BOOT_USER, akey, secret)) < 0)
        return rc;

    struct tenant_export e;
    memset(&e, 0, sizeof(e));
    e.tenant = BOOT_TENANT;
    snprintf(e.path, sizeof(e.path), "/");
    e.dir = ti.root;
    e.anon_uid = e.anon_gid = ANON_ID;
    tenants_net_parse("127.0.0.0/8", &e.nets[e.nnets++]);
    tenants_net_parse("::1", &e.nets[e.nnets++]);
    uint64_t eid;
    if ((rc = next_id(t, "tenants.next_export", 1, &eid)) < 0)
        return rc;
    e.id = (uint32_t)eid;
    if ((rc = save_export(t, &e, 0)) < 0 || (rc = VEC_PUSH(t->exports, e)) < 0)
        return rc;
    srv_log(INFO, TENANT, "bootstrap: tenant 1 'default', user 'admin' (uid 0), key %s, "
            "export '/' for 127.0.0.0/8 and ::1", akey);
    return 0;
}

const uint8_t *tenants__mkey(struct tenants *t)
{
    return t->mkey;
}

struct meta_env *tenants__meta(struct tenants *t)
{
    return t->meta;
}

void **tenants__remotes_slot(struct tenants *t)
{
    return &t->remotes;
}

struct core *tenants__core(struct tenants *t)
{
    return t->core;
}

void tenants_close(struct tenants *t)
{
    if (!t)
        return;
    tenants__metrics_stop(t);
    tenants__remotes_close(t);
    OPENSSL_cleanse(t->mkey, sizeof(t->mkey));
    if (t->keys.v)
        OPENSSL_cleanse(t->keys.v, t->keys.cap * sizeof(*t->keys.v));
    free(t->tenants.v);
    free(t->users.v);
    free(t->keys.v);
    free(t->exports.v);
    pthread_rwlock_destroy(&t->lock);
    pthread_mutex_destroy(&t->mgmt);
    free(t);
}

int tenants_open_keyfile(struct tenants **out, struct core *c, const char *keyfile,
                         const char *akey, const char *secret, char *gen_akey, char *gen_secret,
                         bool *created)
{
    int rc;
    char akbuf[TENANT_AKEY_MAX + 1], skbuf[TENANT_SECRET_MAX + 1];
    struct tenants *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->core = c;
    t->meta = core_meta(c);
    pthread_rwlock_init(&t->lock, NULL);
    pthread_mutex_init(&t->mgmt, NULL);
    if (created)
        *created = false;
    if ((akey && !secret) || (!akey && secret)) {
        srv_log(ERROR, TENANT, "an access key needs its secret key (set both or neither)");
        rc = -EINVAL;
        goto fail;
    }
    if (akey && (!valid_akey(akey) || !valid_secret(secret))) {
        srv_log(ERROR, TENANT, "bootstrap access key must be 3..128 of [A-Za-z0-9._-] and the "
                "secret 8..128 printable characters");
        rc = -EINVAL;
        goto fail;
    }

    rc = master_key_load(t, keyfile);
    if (rc < 0)
        goto fail;

    struct load_ctx lc = {t, 0, 0};
    if ((rc = meta_record_scan(t->meta, META_REC_TENANTS, NULL, 0, load_tenant_cb, &lc)) < 0 ||
        (rc = lc.rc) < 0 ||
        (rc = meta_record_scan(t->meta, META_REC_USERS, NULL, 0, load_user_cb, &lc)) < 0 ||
        (rc = lc.rc) < 0 ||
        (rc = meta_record_scan(t->meta, META_REC_KEYS, NULL, 0, load_key_cb, &lc)) < 0 ||
        (rc = lc.rc) < 0 ||
        (rc = meta_record_scan(t->meta, META_REC_EXPORTS, NULL, 0, load_export_cb, &lc)) < 0 ||
        (rc = lc.rc) < 0 || (rc = tenants__remotes_open(t)) < 0)
        goto fail;

    size_t suspended = exports_settle(t);
    pthread_mutex_lock(&t->mgmt);
    if (t->tenants.n == 0) {
        if (!akey) {
            if ((rc = gen_credentials(akbuf, skbuf)) < 0) {
                pthread_mutex_unlock(&t->mgmt);
                goto fail;
            }
            akey = akbuf;
            secret = skbuf;
            if (gen_akey)
                snprintf(gen_akey, TENANT_AKEY_MAX + 1, "%s", akbuf);
            if (gen_secret)
                snprintf(gen_secret, TENANT_SECRET_MAX + 1, "%s", skbuf);
        }
        rc = bootstrap(t, akey, secret);
        if (rc == 0 && created)
            *created = true;
    } else if (akey) {
        /* A later start with credentials in the environment: the pair is the
         * bootstrap admin's; add it if new, or refresh the secret if it is
         * already the bootstrap user's key. */
        struct key_ent *ke = find_key(t, akey);
        if (!ke && find_user(t, BOOT_TENANT, BOOT_USER)) {
            rc = key_add(t, BOOT_TENANT, BOOT_USER, akey, secret);
            if (rc == 0)
                srv_log(INFO, TENANT, "added access key %s to the bootstrap admin", akey);
        } else if (ke && ke->k.tenant == BOOT_TENANT && ke->k.user == BOOT_USER &&
                   strcmp(ke->secret, secret) != 0) {
            struct key_ent upd = *ke;
            snprintf(upd.secret, sizeof(upd.secret), "%s", secret);
            rc = save_key(t, &upd, 0);
            if (rc == 0) {
                pthread_rwlock_wrlock(&t->lock);
                snprintf(ke->secret, sizeof(ke->secret), "%s", secret);
                pthread_rwlock_unlock(&t->lock);
                srv_log(INFO, TENANT, "secret of access key %s replaced from the environment",
                        akey);
            }
            OPENSSL_cleanse(&upd, sizeof(upd));
        }
    }
    pthread_mutex_unlock(&t->mgmt);
    OPENSSL_cleanse(skbuf, sizeof(skbuf));
    if (rc < 0)
        goto fail;
    srv_log(INFO, TENANT, "loaded %zu tenants, %zu users, %zu keys, %zu exports%s%s",
            t->tenants.n, t->users.n, t->keys.n, t->exports.n,
            lc.bad ? " (some records skipped, see above)" : "",
            suspended ? " (some exports conflict and are not served, see above)" : "");
    tenants__metrics_start(t);
    *out = t;
    return 0;
fail:
    srv_log(ERROR, TENANT, "tenants_open failed: %s", srv_strerror(rc));
    tenants_close(t);
    return rc;
}

int tenants_open(struct tenants **out, struct core *c, const char *akey, const char *secret,
                 char *gen_akey, char *gen_secret, bool *created)
{
    return tenants_open_keyfile(out, c, NULL, akey, secret, gen_akey, gen_secret, created);
}

/* ---- hot lookups ---- */

int tenants_key_lookup(struct tenants *t, const char *akey, char *secret,
                       struct core_principal *p)
{
    int rc = -ENOENT;
    if (!akey)
        return -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    struct key_ent *ke = find_key(t, akey);
    if (!ke)
        goto out;
    struct tenant_user *u = find_user(t, ke->k.tenant, ke->k.user);
    if (!u) {
        rc = -ENOENT;
        goto out;
    }
    if (ke->k.disabled || u->disabled) {
        rc = -EACCES;
        goto out;
    }
    if (secret)
        snprintf(secret, TENANT_SECRET_MAX + 1, "%s", ke->secret);
    if (p) {
        memset(p, 0, sizeof(*p));
        p->tenant = u->tenant;
        p->user = u->id;
        p->uid = u->uid;
        p->gid = u->gid;
        p->ngids = u->ngids;
        memcpy(p->gids, u->gids, sizeof(p->gids));
        p->flags = (u->uid == 0 ? CORE_P_SUPER : 0) | (u->tenant_admin ? CORE_P_TADMIN : 0);
    }
    rc = 0;
out:
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

static bool export_admits(const struct tenant_export *e, const struct sockaddr *sa)
{
    if (!sa)
        return true;
    for (uint32_t i = 0; i < e->nnets; i++)
        if (tenants_net_match(&e->nets[i], sa))
            return true;
    return false;
}

int tenants_export_find(struct tenants *t, const char *path, const struct sockaddr *sa,
                        struct tenant_export *out)
{
    char norm[sizeof(out->path)];
    if (srv_path_norm(path, norm, sizeof(norm), 0) < 0)
        return -ENOENT;
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->exports.n; i++) {
        const struct tenant_export *e = &t->exports.v[i];
        if (e->conflict || strcmp(e->path, norm) != 0)
            continue;
        if (!export_admits(e, sa)) {
            rc = -EACCES;
            continue;
        }
        *out = *e;
        rc = 0;
        break;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_export_get(struct tenants *t, uint32_t id, const struct sockaddr *sa,
                       struct tenant_export *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    const struct tenant_export *e = find_export(t, id);
    if (e) {
        rc = sa && e->conflict ? -EBUSY : export_admits(e, sa) ? 0 : -EACCES;
        if (rc == 0)
            *out = *e;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_export_resolve(struct tenants *t, const char *path, const struct sockaddr *sa,
                           struct tenant_export *out, size_t *rest, bool *foreign)
{
    const struct tenant_export *best = NULL;
    long best_off = 0;
    size_t best_len = 0;
    int rc = -EACCES;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->exports.n; i++) {
        const struct tenant_export *e = &t->exports.v[i];
        if (e->conflict || !export_admits(e, sa))
            continue;
        long off = srv_path_within(path, e->path);
        size_t len = strlen(e->path);
        /* Served exports admitting one client never share a path (tenants.h),
         * so the longest is the only one; ids break a tie that cannot happen. */
        if (off >= 0 && (!best || len > best_len)) {
            best = e;
            best_len = len;
            best_off = off;
        }
    }
    if (best) {
        *out = *best;
        *rest = (size_t)best_off;
        *foreign = !export_serves(t, best, path, NULL);
        rc = 0;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_export_get_admin(struct tenants *t, uint32_t id, struct tenant_export *out)
{
    return tenants_export_get(t, id, NULL, out);
}

/* Visitors copy the matching records first and call back without the lock, so
 * a callback may call back into this module. */
#define SNAPSHOT(t, vec, T, pred, cb, arg)                                                         \
    do {                                                                                           \
        pthread_rwlock_rdlock(&(t)->lock);                                                         \
        size_t n_ = 0;                                                                             \
        T *copy_ = malloc(((t)->vec.n ? (t)->vec.n : 1) * sizeof(T));                              \
        if (!copy_) {                                                                              \
            pthread_rwlock_unlock(&(t)->lock);                                                     \
            return -ENOMEM;                                                                        \
        }                                                                                          \
        for (size_t i_ = 0; i_ < (t)->vec.n; i_++) {                                               \
            const T *it = &(t)->vec.v[i_];                                                         \
            if (pred)                                                                              \
                copy_[n_++] = *it;                                                                 \
        }                                                                                          \
        pthread_rwlock_unlock(&(t)->lock);                                                         \
        int rc_ = 0;                                                                               \
        for (size_t i_ = 0; i_ < n_ && rc_ == 0; i_++)                                             \
            rc_ = cb(arg, &copy_[i_]);                                                             \
        free(copy_);                                                                               \
        return rc_ > 0 ? 0 : rc_;                                                                  \
    } while (0)

int tenants_export_list(struct tenants *t, const struct sockaddr *sa, tenants_export_cb cb,
                        void *arg)
{
    SNAPSHOT(t, exports, struct tenant_export, export_admits(it, sa) && (!sa || !it->conflict),
             cb, arg);
}

int tenants_export_list_tenant(struct tenants *t, uint32_t tenant, tenants_export_cb cb,
                               void *arg)
{
    SNAPSHOT(t, exports, struct tenant_export, (tenant == 0 || it->tenant == tenant), cb, arg);
}

/* ---- management: tenants ---- */

int tenants_tenant_create(struct tenants *t, const char *name, struct tenant_info *out)
{
    int rc;
    uint64_t id;
    struct tenant_info ti;

    if (!name || !valid_name(name))
        return SRV_EBADNAME;
    memset(&ti, 0, sizeof(ti));
    snprintf(ti.name, sizeof(ti.name), "%s", name);
    pthread_mutex_lock(&t->mgmt);
    for (size_t i = 0; i < t->tenants.n; i++) {
        if (strcmp(t->tenants.v[i].name, name) == 0) {
            rc = -EEXIST;
            goto out;
        }
    }
    if ((rc = next_id(t, "tenants.next_tenant", BOOT_TENANT + 1, &id)) < 0)
        goto out;
    if (id > UINT32_MAX) {
        rc = -ENOSPC;
        goto out;
    }
    ti.id = (uint32_t)id;
    if ((rc = core_tenant_create(t->core, ti.id)) < 0)
        goto out;
    if ((rc = core_tenant_root(t->core, ti.id, &ti.root)) < 0 ||
        (rc = save_tenant(t, &ti, META_REC_NOOVERWRITE)) < 0) {
        core_tenant_delete(t->core, ti.id);
        goto out;
    }
    pthread_rwlock_wrlock(&t->lock);
    rc = VEC_PUSH(t->tenants, ti);
    if (rc == 0)
        exports_settle(t); /* its prefix is no longer served by "/" */
    pthread_rwlock_unlock(&t->lock);
    if (rc == 0) {
        srv_log(INFO, TENANT, "tenant %u '%s' created", ti.id, ti.name);
        if (out)
            *out = ti;
    }
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_tenant_get(struct tenants *t, uint32_t id, struct tenant_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    struct tenant_info *ti = find_tenant(t, id);
    if (ti) {
        *out = *ti;
        rc = 0;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_tenant_find(struct tenants *t, const char *name, struct tenant_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->tenants.n; i++) {
        if (strcmp(t->tenants.v[i].name, name) == 0) {
            *out = t->tenants.v[i];
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_tenant_list(struct tenants *t, tenants_tenant_cb cb, void *arg)
{
    SNAPSHOT(t, tenants, struct tenant_info, true, cb, arg);
}

static void del_row32(struct tenants *t, enum meta_rec_table tab, uint32_t id)
{
    uint8_t k[4];
    be32(k, id);
    meta_record_del(t->meta, tab, k, 4);
}

static void del_user_row(struct tenants *t, uint32_t tenant, uint64_t id)
{
    uint8_t k[12];
    be32(k, tenant);
    be64(k + 4, id);
    meta_record_del(t->meta, META_REC_USERS, k, 12);
}

int tenants_tenant_delete(struct tenants *t, uint32_t id)
{
    int rc;
    pthread_mutex_lock(&t->mgmt);
    if (!find_tenant(t, id)) {
        rc = -ENOENT;
        goto out;
    }
    struct names_view gone = {id, NULL};
    if (names_change_conflicts(t, &gone)) {
        rc = -EBUSY;
        goto out;
    }
    /* The core refuses while the tenant holds a bucket: nothing is lost. */
    rc = core_tenant_delete(t->core, id);
    if (rc < 0 && rc != -ENOENT)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = t->keys.n; i-- > 0;) {
        if (t->keys.v[i].k.tenant == id) {
            meta_record_del(t->meta, META_REC_KEYS, t->keys.v[i].k.akey,
                            strlen(t->keys.v[i].k.akey));
            VEC_DEL(t->keys, i);
        }
    }
    for (size_t i = t->users.n; i-- > 0;) {
        if (t->users.v[i].tenant == id) {
            del_user_row(t, id, t->users.v[i].id);
            VEC_DEL(t->users, i);
        }
    }
    for (size_t i = t->exports.n; i-- > 0;) {
        if (t->exports.v[i].tenant == id) {
            del_row32(t, META_REC_EXPORTS, t->exports.v[i].id);
            VEC_DEL(t->exports, i);
        }
    }
    for (size_t i = 0; i < t->tenants.n; i++) {
        if (t->tenants.v[i].id == id) {
            VEC_DEL(t->tenants, i);
            break;
        }
    }
    del_row32(t, META_REC_TENANTS, id);
    exports_settle(t);
    pthread_rwlock_unlock(&t->lock);
    tenants__remotes_drop_tenant(t, id);
    srv_log(INFO, TENANT, "tenant %u deleted", id);
    rc = 0;
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

/* ---- management: users ---- */

static int check_user(struct tenants *t, const struct tenant_user *u)
{
    if (!valid_name(u->name))
        return SRV_EBADNAME;
    if (u->ngids > CORE_MAX_GIDS)
        return -EINVAL;
    if (!find_tenant(t, u->tenant))
        return -ENOENT;
    return 0;
}

int tenants_user_create(struct tenants *t, const struct tenant_user *u, struct tenant_user *out)
{
    int rc;
    uint64_t id;
    struct tenant_user nu = *u;

    pthread_mutex_lock(&t->mgmt);
    if ((rc = check_user(t, &nu)) < 0)
        goto out;
    for (size_t i = 0; i < t->users.n; i++) {
        if (t->users.v[i].tenant == nu.tenant && strcmp(t->users.v[i].name, nu.name) == 0) {
            rc = -EEXIST;
            goto out;
        }
    }
    if ((rc = next_id(t, "tenants.next_user", BOOT_USER + 1, &id)) < 0)
        goto out;
    nu.id = id;
    if ((rc = save_user(t, &nu, META_REC_NOOVERWRITE)) < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    rc = VEC_PUSH(t->users, nu);
    pthread_rwlock_unlock(&t->lock);
    if (rc == 0) {
        srv_log(INFO, TENANT, "tenant=%u user %llu '%s' created (uid %u)", nu.tenant,
                (unsigned long long)nu.id, nu.name, nu.uid);
        if (out)
            *out = nu;
    }
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_user_get(struct tenants *t, uint32_t tenant, uint64_t id, struct tenant_user *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    struct tenant_user *u = find_user(t, tenant, id);
    if (u) {
        *out = *u;
        rc = 0;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_user_find(struct tenants *t, uint32_t tenant, const char *name,
                      struct tenant_user *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->users.n; i++) {
        if (t->users.v[i].tenant == tenant && strcmp(t->users.v[i].name, name) == 0) {
            *out = t->users.v[i];
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_user_update(struct tenants *t, const struct tenant_user *u)
{
    int rc;
    pthread_mutex_lock(&t->mgmt);
    struct tenant_user *cur = find_user(t, u->tenant, u->id);
    if (!cur) {
        rc = -ENOENT;
        goto out;
    }
    if ((rc = check_user(t, u)) < 0)
        goto out;
    for (size_t i = 0; i < t->users.n; i++) {
        const struct tenant_user *o = &t->users.v[i];
        if (o->tenant == u->tenant && o->id != u->id && strcmp(o->name, u->name) == 0) {
            rc = -EEXIST;
            goto out;
        }
    }
    if ((rc = save_user(t, u, 0)) < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    *cur = *u;
    pthread_rwlock_unlock(&t->lock);
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_user_delete(struct tenants *t, uint32_t tenant, uint64_t id)
{
    int rc = 0;
    pthread_mutex_lock(&t->mgmt);
    if (!find_user(t, tenant, id)) {
        rc = -ENOENT;
        goto out;
    }
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = t->keys.n; i-- > 0;) {
        if (t->keys.v[i].k.tenant == tenant && t->keys.v[i].k.user == id) {
            meta_record_del(t->meta, META_REC_KEYS, t->keys.v[i].k.akey,
                            strlen(t->keys.v[i].k.akey));
            VEC_DEL(t->keys, i);
        }
    }
    for (size_t i = 0; i < t->users.n; i++) {
        if (t->users.v[i].tenant == tenant && t->users.v[i].id == id) {
            VEC_DEL(t->users, i);
            break;
        }
    }
    del_user_row(t, tenant, id);
    pthread_rwlock_unlock(&t->lock);
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_user_list(struct tenants *t, uint32_t tenant, tenants_user_cb cb, void *arg)
{
    SNAPSHOT(t, users, struct tenant_user, (tenant == 0 || it->tenant == tenant), cb, arg);
}

/* ---- management: keys ---- */

int tenants_key_create(struct tenants *t, uint32_t tenant, uint64_t user, char *akey_out,
                       char *secret_out)
{
    int rc;
    char akey[TENANT_AKEY_MAX + 1], secret[TENANT_SECRET_MAX + 1];
    pthread_mutex_lock(&t->mgmt);
    if (!find_user(t, tenant, user)) {
        rc = -ENOENT;
        goto out;
    }
    for (int tries = 0; tries < 4; tries++) {
        if ((rc = gen_credentials(akey, secret)) < 0)
            goto out;
        rc = key_add(t, tenant, user, akey, secret);
        if (rc != -EEXIST)
            break;
    }
    if (rc == 0) {
        snprintf(akey_out, TENANT_AKEY_MAX + 1, "%s", akey);
        snprintf(secret_out, TENANT_SECRET_MAX + 1, "%s", secret);
        srv_log(INFO, TENANT, "tenant=%u access key %s created for user %llu", tenant, akey,
                (unsigned long long)user);
    }
out:
    OPENSSL_cleanse(secret, sizeof(secret));
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_key_get(struct tenants *t, const char *akey, struct tenant_key *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&t->lock);
    struct key_ent *ke = find_key(t, akey);
    if (ke) {
        *out = ke->k;
        rc = 0;
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int tenants_key_set_disabled(struct tenants *t, const char *akey, bool disabled)
{
    int rc;
    pthread_mutex_lock(&t->mgmt);
    struct key_ent *ke = find_key(t, akey);
    if (!ke) {
        rc = -ENOENT;
        goto out;
    }
    struct key_ent upd = *ke;
    upd.k.disabled = disabled;
    rc = save_key(t, &upd, 0);
    OPENSSL_cleanse(&upd, sizeof(upd));
    if (rc < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    ke->k.disabled = disabled;
    pthread_rwlock_unlock(&t->lock);
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_key_delete(struct tenants *t, const char *akey)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&t->mgmt);
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = 0; i < t->keys.n; i++) {
        if (strcmp(t->keys.v[i].k.akey, akey) == 0) {
            rc = meta_record_del(t->meta, META_REC_KEYS, akey, strlen(akey));
            if (rc == 0 || rc == -ENOENT) {
                OPENSSL_cleanse(&t->keys.v[i], sizeof(t->keys.v[i]));
                VEC_DEL(t->keys, i);
                rc = 0;
            }
            break;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_key_list(struct tenants *t, uint32_t tenant, tenants_key_cb cb, void *arg)
{
    /* Copy only the public part of each key: secrets never leave the cache. */
    pthread_rwlock_rdlock(&t->lock);
    size_t n = 0;
    struct tenant_key *copy = malloc((t->keys.n ? t->keys.n : 1) * sizeof(*copy));
    if (!copy) {
        pthread_rwlock_unlock(&t->lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->keys.n; i++)
        if (tenant == 0 || t->keys.v[i].k.tenant == tenant)
            copy[n++] = t->keys.v[i].k;
    pthread_rwlock_unlock(&t->lock);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb(arg, &copy[i]);
    free(copy);
    return rc > 0 ? 0 : rc;
}

/* ---- management: exports ---- */

int tenants_export_create(struct tenants *t, const struct tenant_export *e,
                          struct tenant_export *out)
{
    int rc;
    uint64_t id;
    struct tenant_export ne = *e;

    if (ne.nnets > TENANT_EXPORT_MAX_NETS)
        return -EINVAL;
    if (ne.flags & ~(uint32_t)(TENANT_EXPORT_RO | TENANT_EXPORT_ROOT_SQUASH |
                               TENANT_EXPORT_ALL_SQUASH))
        return -EINVAL;
    if ((rc = srv_path_norm(e->path, ne.path, sizeof(ne.path), 0)) < 0)
        return -EINVAL;
    pthread_mutex_lock(&t->mgmt);
    struct tenant_info *ti = find_tenant(t, ne.tenant);
    if (!ti) {
        rc = -ENOENT;
        goto out;
    }
    if (ne.dir == 0)
        ne.dir = ti->root;
    ne.id = 0;
    ne.conflict = 0;
    const struct tenant_export *other = export_conflict_find(t, &ne);
    if (other) {
        srv_log(INFO, TENANT, "tenant=%u export '%s' refused: it would conflict with export %u "
                "'%s' of tenant %u", ne.tenant, ne.path, other->id, other->path, other->tenant);
        if (out)
            *out = *other;
        rc = -EEXIST;
        goto out;
    }
    if ((rc = next_id(t, "tenants.next_export", 1, &id)) < 0)
        goto out;
    if (id > UINT32_MAX) {
        rc = -ENOSPC;
        goto out;
    }
    ne.id = (uint32_t)id;
    if ((rc = save_export(t, &ne, META_REC_NOOVERWRITE)) < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    rc = VEC_PUSH(t->exports, ne);
    pthread_rwlock_unlock(&t->lock);
    if (rc == 0) {
        srv_log(INFO, TENANT, "tenant=%u export %u '%s' created", ne.tenant, ne.id, ne.path);
        if (out)
            *out = ne;
    }
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_export_delete(struct tenants *t, uint32_t id)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&t->mgmt);
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = 0; i < t->exports.n; i++) {
        if (t->exports.v[i].id == id) {
            del_row32(t, META_REC_EXPORTS, id);
            VEC_DEL(t->exports, i);
            exports_settle(t);
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_tenant_rename(struct tenants *t, uint32_t id, const char *name)
{
    int rc;
    if (!name || !valid_name(name))
        return SRV_EBADNAME;
    pthread_mutex_lock(&t->mgmt);
    struct tenant_info *ti = find_tenant(t, id);
    if (!ti) {
        rc = -ENOENT;
        goto out;
    }
    for (size_t i = 0; i < t->tenants.n; i++) {
        if (t->tenants.v[i].id != id && strcmp(t->tenants.v[i].name, name) == 0) {
            rc = -EEXIST;
            goto out;
        }
    }
    struct names_view renamed = {id, name};
    if (names_change_conflicts(t, &renamed)) {
        rc = -EBUSY;
        goto out;
    }
    struct tenant_info upd = *ti;
    snprintf(upd.name, sizeof(upd.name), "%s", name);
    if ((rc = save_tenant(t, &upd, 0)) < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    *ti = upd;
    exports_settle(t);
    pthread_rwlock_unlock(&t->lock);
    srv_log(INFO, TENANT, "tenant %u renamed '%s'", id, name);
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}

int tenants_export_update(struct tenants *t, const struct tenant_export *e,
                          struct tenant_export *out)
{
    int rc;
    struct tenant_export ne;
    char path[sizeof(ne.path)];

    if (e->nnets == 0 || e->nnets > TENANT_EXPORT_MAX_NETS)
        return -EINVAL;
    if (e->flags & ~(uint32_t)(TENANT_EXPORT_RO | TENANT_EXPORT_ROOT_SQUASH |
                               TENANT_EXPORT_ALL_SQUASH))
        return -EINVAL;
    if (srv_path_norm(e->path, path, sizeof(path), 0) < 0)
        return -EINVAL;
    pthread_mutex_lock(&t->mgmt);
    struct tenant_export *cur = find_export(t, e->id);
    if (!cur) {
        rc = -ENOENT;
        goto out;
    }
    ne = *cur;
    memcpy(ne.path, path, sizeof(path));
    ne.flags = e->flags;
    ne.anon_uid = e->anon_uid;
    ne.anon_gid = e->anon_gid;
    ne.nnets = e->nnets;
    memcpy(ne.nets, e->nets, sizeof(ne.nets));
    /* Only a new path or new ranges can make a new conflict: a change of
     * flags alone goes through even on an export suspended at start. */
    const struct tenant_export *other = NULL;
    if ((strcmp(ne.path, cur->path) != 0 || ne.nnets != cur->nnets ||
         memcmp(ne.nets, cur->nets, ne.nnets * sizeof(ne.nets[0])) != 0) &&
        (other = export_conflict_find(t, &ne))) {
        srv_log(INFO, TENANT, "tenant=%u export %u update refused: '%s' would conflict with "
                "export %u '%s' of tenant %u", ne.tenant, ne.id, ne.path, other->id, other->path,
                other->tenant);
        if (out)
            *out = *other;
        rc = -EEXIST;
        goto out;
    }
    if ((rc = save_export(t, &ne, 0)) < 0)
        goto out;
    pthread_rwlock_wrlock(&t->lock);
    *cur = ne;
    exports_settle(t);
    ne = *cur;
    pthread_rwlock_unlock(&t->lock);
    srv_log(INFO, TENANT, "tenant=%u export %u '%s' updated", ne.tenant, ne.id, ne.path);
    if (out)
        *out = ne;
out:
    pthread_mutex_unlock(&t->mgmt);
    return rc;
}
