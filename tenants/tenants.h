/* SPDX-License-Identifier: Apache-2.0
 * tenants: tenants, their users, S3 access keys and NFS exports.
 *
 * Records live in meta's generic records (meta_record_*) of the core's
 * store, so they survive restarts and change transactionally; an in-memory
 * cache (rwlock) answers the hot lookups (access key -> user, client address
 * -> export) and is refreshed on every change through this module, so changes
 * take effect at once on both protocols. Secrets are stored encrypted with a per-store master key
 * (AES-256-GCM, key in the META_REC_CONFIG table... and never logged).
 * Thread: every call is thread-safe. */
#ifndef TENANTS_H
#define TENANTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core.h"

struct tenants;

#define TENANT_NAME_MAX 63
#define TENANT_AKEY_MAX 128
#define TENANT_SECRET_MAX 128

struct tenant_info {
    uint32_t id;
    char name[TENANT_NAME_MAX + 1];
    uint64_t root; /* root directory inode */
};

struct tenant_user {
    uint32_t tenant;
    uint64_t id;
    char name[TENANT_NAME_MAX + 1];
    uint32_t uid, gid, ngids;
    uint32_t gids[CORE_MAX_GIDS];
    bool disabled;
    bool tenant_admin; /* may manage its own tenant through the admin API */
};

/* An NFS export: a directory of one tenant's namespace, for a set of client ranges.
 *
 * Export paths are unambiguous across tenants (docs/nfs.md, "Export paths"):
 * - Two exports whose client ranges overlap never have the same path, and,
 *   when they belong to different tenants, neither path lies below the other,
 *   with one exception: an export of "/" next to an export whose path lies in
 *   another tenant's own prefix. A tenant's own prefix is "/" + its name
 *   ("/acme" and everything below it), and an export of "/" never serves a
 *   path whose first component names another tenant.
 * - MNT of a path resolves, among the served exports that admit the client,
 *   to the one whose path is the longest whole-component prefix of it
 *   (tenants_export_resolve); by the rule above there is never a tie, and an
 *   export of another tenant that does not admit the client plays no part.
 * - tenants_export_create and tenants_export_update refuse a change that
 *   would break the rule (-EEXIST); tenants_tenant_rename and
 *   tenants_tenant_delete refuse one that would (-EBUSY). A store written
 *   before the rule may hold conflicting exports: at open, in id order, an
 *   export that conflicts with an older served one is suspended (not served:
 *   no MNT, its handles answer STALE, MOUNT EXPORT omits it; logged) until
 *   one of the two is changed or deleted. */
#define TENANT_EXPORT_RO 0x1
#define TENANT_EXPORT_ROOT_SQUASH 0x2
#define TENANT_EXPORT_ALL_SQUASH 0x4
#define TENANT_EXPORT_MAX_NETS 8
struct tenant_net {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    uint8_t prefix;
};
struct tenant_export {
    uint32_t id;            /* nonzero; goes into NFS file handles */
    uint32_t tenant;
    char path[1024];        /* as clients mount it, e.g. "/" or "/datasets" */
    uint64_t dir;           /* directory inode it exports */
    uint32_t flags;         /* TENANT_EXPORT_* */
    uint32_t anon_uid, anon_gid;
    uint32_t nnets;
    struct tenant_net nets[TENANT_EXPORT_MAX_NETS];
    uint32_t conflict;      /* not stored: nonzero while suspended, the id of the older
                             * export it conflicts with */
};

/** Load (and cache) every record. On a new store, create the bootstrap tenant
 * "default" (id 1) with an admin user (uid 0, CORE_P_SUPER) holding access key
 * @p akey / secret @p secret (generated when NULL; then returned through
 * @p gen_akey/@p gen_secret, each of TENANT_*_MAX+1 bytes, which may be NULL if
 * not wanted), and an export "/" of its root for 127.0.0.0/8 and ::1.
 * @param[out] created true when the bootstrap was made now.
 * @return 0, -errno, SRV_ECORRUPT. */
int tenants_open(struct tenants **out, struct core *c, const char *akey, const char *secret,
                 char *gen_akey, char *gen_secret, bool *created);
void tenants_close(struct tenants *t);

/** S3 authentication: find the user of access key @p akey.
 * @param[out] secret the secret (NUL-terminated, TENANT_SECRET_MAX+1 bytes).
 * @param[out] p the principal requests with this key run as.
 * @return 0, -ENOENT (unknown key), -EACCES (disabled key or user). */
int tenants_key_lookup(struct tenants *t, const char *akey, char *secret,
                       struct core_principal *p);

/** The served export whose path is exactly @p path and that admits client
 * address @p sa. @return 0, -ENOENT (no such export), -EACCES (address not
 * admitted). */
int tenants_export_find(struct tenants *t, const char *path, const struct sockaddr *sa,
                        struct tenant_export *out);
/** NFS MOUNT: the export that serves the normalised path @p path (srv_path_norm)
 * to client @p sa: among the served exports that admit @p sa, the one whose
 * path is the longest whole-component prefix of @p path. Exports that do not
 * admit @p sa play no part, so the answer never tells whether they exist.
 * @param[out] out the export (on 0).
 * @param[out] rest offset in @p path of the part below the export's path
 *             ("" when the path is the export's own).
 * @param[out] foreign set when the export is one of "/" and the first
 *             component of @p path names another tenant: that prefix is the
 *             other tenant's, and the export does not serve it (the caller
 *             answers as for a missing name in the export's directory).
 * @return 0, -EACCES (no export admitting @p sa serves @p path). */
int tenants_export_resolve(struct tenants *t, const char *path, const struct sockaddr *sa,
                           struct tenant_export *out, size_t *rest, bool *foreign);
/** NFS: export @p id if it admits @p sa (NULL: any address, and suspended
 * exports too). @return 0, -ENOENT, -EACCES, -EBUSY (suspended). */
int tenants_export_get(struct tenants *t, uint32_t id, const struct sockaddr *sa,
                       struct tenant_export *out);
/** Visit the served exports admitting @p sa (NULL: all, suspended ones too) —
 * MOUNT EXPORT procedure. */
typedef int (*tenants_export_cb)(void *arg, const struct tenant_export *e);
int tenants_export_list(struct tenants *t, const struct sockaddr *sa, tenants_export_cb cb,
                        void *arg);

/* Management (used by the admin API; each call persists before returning). */
int tenants_tenant_create(struct tenants *t, const char *name, struct tenant_info *out);
int tenants_tenant_get(struct tenants *t, uint32_t id, struct tenant_info *out);
int tenants_tenant_find(struct tenants *t, const char *name, struct tenant_info *out);
/** Delete tenant @p id with its users, keys and exports. @return 0, -ENOENT,
 * -ENOTEMPTY (it holds a bucket), -EBUSY (exports of other tenants in its
 * prefix would then conflict with an export of "/"). */
int tenants_tenant_delete(struct tenants *t, uint32_t id);
typedef int (*tenants_tenant_cb)(void *arg, const struct tenant_info *ti);
int tenants_tenant_list(struct tenants *t, tenants_tenant_cb cb, void *arg);

int tenants_user_create(struct tenants *t, const struct tenant_user *u, struct tenant_user *out);
int tenants_user_get(struct tenants *t, uint32_t tenant, uint64_t id, struct tenant_user *out);
int tenants_user_update(struct tenants *t, const struct tenant_user *u);
int tenants_user_delete(struct tenants *t, uint32_t tenant, uint64_t id);
typedef int (*tenants_user_cb)(void *arg, const struct tenant_user *u);
int tenants_user_list(struct tenants *t, uint32_t tenant, tenants_user_cb cb, void *arg);

/** New access key for a user; the secret is returned once, here. */
int tenants_key_create(struct tenants *t, uint32_t tenant, uint64_t user, char *akey_out,
                       char *secret_out);
int tenants_key_set_disabled(struct tenants *t, const char *akey, bool disabled);
int tenants_key_delete(struct tenants *t, const char *akey);
struct tenant_key {
    char akey[TENANT_AKEY_MAX + 1];
    uint32_t tenant;
    uint64_t user;
    bool disabled;
};
typedef int (*tenants_key_cb)(void *arg, const struct tenant_key *k);
int tenants_key_list(struct tenants *t, uint32_t tenant, tenants_key_cb cb, void *arg);

/** New export (path normalised; dir 0: the tenant's root).
 * @param[out] out the export made; on -EEXIST, the existing export it
 *             conflicts with (may be NULL).
 * @return 0, -EINVAL (bad path, flags or ranges), -ENOENT (no such tenant),
 *         -EEXIST (it would conflict with an existing export: see the rule
 *         above), -ENOSPC (ids exhausted), or the store's error. */
int tenants_export_create(struct tenants *t, const struct tenant_export *e,
                          struct tenant_export *out);
int tenants_export_delete(struct tenants *t, uint32_t id);
/** Does normalised @p path lie in the own prefix of tenant @p tenant ("/" +
 * its name, and below)? @return true, or false (also for an unknown tenant). */
bool tenants_path_is_own(struct tenants *t, uint32_t tenant, const char *path);

/** Parse "10.0.0.0/8", "::1", "127.0.0.1/32". @return 0, -EINVAL. */
int tenants_net_parse(const char *s, struct tenant_net *out);
bool tenants_net_match(const struct tenant_net *n, const struct sockaddr *sa);
/** Do ranges @p a and @p b share an address? An IPv4 range is compared as its
 * IPv4-mapped IPv6 form, as tenants_net_match admits such clients. */
bool tenants_net_overlap(const struct tenant_net *a, const struct tenant_net *b);

/* ---- extensions (backward compatible) ---- */

/** As tenants_open(), but the master key that encrypts stored secrets lives in
 * the file @p keyfile (created mode 0600 with a random key on a new store)
 * instead of the META_REC_CONFIG table; NULL = the table.
 * @return as tenants_open(), plus SRV_ECORRUPT when the store holds secrets but
 * @p keyfile is missing or holds another key (logged). */
int tenants_open_keyfile(struct tenants **out, struct core *c, const char *keyfile,
                         const char *akey, const char *secret, char *gen_akey, char *gen_secret,
                         bool *created);
/** Format a range as "ADDR/PREFIX" (at least INET6_ADDRSTRLEN + 5 bytes). */
void tenants_net_format(const struct tenant_net *n, char *buf, size_t len);
/** Find a user of @p tenant by name. @return 0, -ENOENT. */
int tenants_user_find(struct tenants *t, uint32_t tenant, const char *name,
                      struct tenant_user *out);
/** Get one key's record (no secret). @return 0, -ENOENT. */
int tenants_key_get(struct tenants *t, const char *akey, struct tenant_key *out);
/** Export by id without an address check (admin). @return 0, -ENOENT. */
int tenants_export_get_admin(struct tenants *t, uint32_t id, struct tenant_export *out);
/** Visit every export of @p tenant (0 = all tenants), in id order. */
int tenants_export_list_tenant(struct tenants *t, uint32_t tenant, tenants_export_cb cb,
                               void *arg);

/** Rename tenant @p id. @return 0, -ENOENT, SRV_EBADNAME, -EEXIST (name taken),
 * -EBUSY (exports would conflict: the old prefix would be free, or the new one
 * taken, under an export of "/" that overlaps an export in it). */
int tenants_tenant_rename(struct tenants *t, uint32_t id, const char *name);
/** Replace export @p e->id's path, flags, anonymous ids and client ranges (its
 * tenant and directory stay). Takes effect for the next MNT and the next call
 * with a handle. A new path or new ranges are checked as tenants_export_create
 * checks them. @param[out] out as for tenants_export_create.
 * @return 0, -ENOENT, -EINVAL (bad path, flags or ranges), -EEXIST (conflict). */
int tenants_export_update(struct tenants *t, const struct tenant_export *e,
                          struct tenant_export *out);

/* ---- remotes of the tier (tenants_remote.c) ----
 *
 * A remote is an S3 bucket somewhere (endpoint, region, bucket, optional key
 * prefix, addressing, TLS settings, a key pair, connection limits) that tier
 * policies upload to. It is system-wide (tenant 0: made by a system admin) or
 * owned by one tenant; a tenant's remote is usable only in that tenant's
 * buckets, a system-wide one only in policies a system admin sets. Its secret
 * key is sealed at rest under the master key (AES-256-GCM, bound to the
 * remote's id), kept in memory only while a caller needs it, never returned
 * by the listing calls and never logged.
 *
 * A remote is checked when it is made: its host must resolve and, for a
 * tenant's remote, lead to no loopback, link-local, unspecified, multicast or
 * local interface address of this host unless the operator allowed it
 * (tenants_remote_set_allow_private); then the remote must answer a listing of
 * its bucket with the credentials given (tier_remote_check). Both checks run
 * before anything is stored and block the caller (bounded by the timeouts). */
#define TENANT_REMOTE_NAME_MAX 63
#define TENANT_REMOTE_KEY_MAX 128
struct tenant_remote {
    uint32_t id;                           /* nonzero, never reused */
    uint32_t tenant;                       /* owner; 0: system-wide */
    char name[TENANT_REMOTE_NAME_MAX + 1]; /* unique per owner */
    char endpoint[256];                    /* http[s]://host[:port] */
    char region[64];                       /* "" = us-east-1 */
    char bucket[64];
    char prefix[512];   /* prepended to every key; "" none */
    bool virtual_host;  /* bucket.host addressing (else path style) */
    bool tls_no_verify; /* https without certificate checks (tests) */
    char ca_file[512];  /* PEM CA bundle ("" = system CAs); system remotes only */
    char access_key[TENANT_REMOTE_KEY_MAX + 1];
    uint32_t max_conns;          /* connections open at once, 1..1024 (0 = 16) */
    uint32_t parallel;           /* parts of one file in flight, 1..64 (0 = 4) */
    uint32_t connect_timeout_ms; /* 100..60000 (0 = 10000) */
    int64_t created;             /* seconds since the epoch */
};

/** Let tenants' remotes reach this host's own addresses (tier_allow_private_remotes).
 * Takes effect for the next create and the next tenants_remote_conn. */
void tenants_remote_set_allow_private(struct tenants *t, bool allow);

/** Check and store a new remote (@p r->id and created are set here; @p secret is the
 * secret key). Nothing is stored unless every check passed.
 * @param[out] why on error, a message for people (@p whylen bytes).
 * @param[out] check_failed set when the remote itself failed the check (unreachable,
 *             TLS, credentials refused, no bucket): the error is then the tier
 *             client's (tier_s3.h).
 * @param[out] out the remote made (may be NULL).
 * @return 0, -EINVAL (a field is malformed), -ENOENT (no such tenant), -EEXIST (the
 *         owner has a remote of that name), -EACCES (a tenant's remote leads to this
 *         host, or names a CA file), the check's error, or the store's error. */
int tenants_remote_create(struct tenants *t, const struct tenant_remote *r, const char *secret,
                          char *why, size_t whylen, bool *check_failed, struct tenant_remote *out);
/** Change remote @p id in place: its access key (@p in->access_key, "" keeps it), its
 * secret (@p secret, NULL keeps it), and its limits (@p in->max_conns, parallel,
 * connect_timeout_ms; 0 keeps one). The result is checked as at creation (reachable,
 * credentials accepted) before it replaces the stored one, sealed again. The tier's
 * clients of the remote must be made again (tier_upload_remote_changed).
 * @return as tenants_remote_create, or -ENOENT (no such remote). */
int tenants_remote_update(struct tenants *t, uint32_t id, const struct tenant_remote *in,
                          const char *secret, char *why, size_t whylen, bool *check_failed,
                          struct tenant_remote *out);
/** @return 0, -ENOENT. (Never the secret.) */
int tenants_remote_get(struct tenants *t, uint32_t id, struct tenant_remote *out);
/** Find remote @p name of owner @p tenant (0: system-wide). @return 0, -ENOENT. */
int tenants_remote_find(struct tenants *t, uint32_t tenant, const char *name,
                        struct tenant_remote *out);
/** Delete remote @p id. @return 0, -ENOENT, -EBUSY (a bucket's tier policy names it;
 * @p bucket_out, when not NULL, gets that bucket's inode), -ENOTEMPTY (an evicted file's
 * bytes are only there; @p bucket_out gets that file's inode). */
int tenants_remote_delete(struct tenants *t, uint32_t id, uint64_t *bucket_out);
typedef int (*tenants_remote_cb)(void *arg, const struct tenant_remote *r);
/** Visit the remotes of owner @p tenant (0: system-wide ones; UINT32_MAX: all) in id
 * order. @return 0 or the callback's first nonzero result. */
int tenants_remote_list(struct tenants *t, uint32_t tenant, tenants_remote_cb cb, void *arg);
/** May a policy on a bucket of tenant @p bucket_tenant, set by a system admin
 * (@p system) or by that tenant's admin, name remote @p id?
 * @return 0, -ENOENT (no such remote, or another tenant's: not visible),
 *         -EACCES (a system-wide remote named by a tenant admin). */
int tenants_remote_usable(struct tenants *t, uint32_t id, uint32_t bucket_tenant, bool system);
struct tier_upload_remote;
/** For the tier's uploader: how to reach remote @p id, its secret unsealed from the
 * store (wipe @p out after use). A tenant's remote is resolved and checked against this
 * host's addresses again, as at creation (the operator may have changed
 * tier_allow_private_remotes; the name may lead elsewhere now), and pinned to the
 * address checked. May block (name resolution).
 * @return 0, -ENOENT, -EACCES (it leads to this host now), -EHOSTUNREACH,
 *         SRV_ECORRUPT (the secret does not unseal). */
int tenants_remote_conn(struct tenants *t, uint32_t id, struct tier_upload_remote *out);

#endif
