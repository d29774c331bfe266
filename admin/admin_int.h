/* SPDX-License-Identifier: Apache-2.0
 * admin_int: what admin.c shares with admin_api.c. Thread: the admin thread. */
#ifndef ADMIN_INT_H
#define ADMIN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin.h"

struct evhttp_request;
struct event_base;
struct evhttp;
struct json_t;

struct admin {
    struct admin_config cfg;
    struct core *core;
    struct tenants *tenants;
    struct qos *qos;
    struct event_base *base;
    struct evhttp *http;
    struct ssl_ctx_st *ssl; /* HTTPS; NULL = plain HTTP */
    struct evhttp_bound_socket *bound; /* the listener (owned by http) */
    pthread_t thread;
    bool started;
    int ready; /* atomic */
};

/* The bootstrap tenant: its admins (tenant_admin users) are system admins. */
#define ADMIN_SYSTEM_TENANT 1

/* Who an authenticated API request comes from. */
struct admin_caller {
    uint32_t tenant; /* 0: a system admin; else the one tenant it may manage */
    char name[160];  /* "token" or "key AKEY", for logs */
};

/** Serve one authenticated /api/v1/... request (@p path starts after "/api/v1"). */
void admin__api(struct admin *a, struct evhttp_request *req, const char *path,
                const struct admin_caller *who);
/** Check an "AWS4-HMAC-SHA256 ..." Authorization header (admin_sigv4.c); @p auth is
 * its value after the scheme and one blank (the caller matched the scheme without case).
 * @param[out] who the caller on success.
 * @param[out] why a static text saying what was wrong.
 * @return 0, -EACCES (malformed, unknown or disabled key, bad signature, clock
 * skew, or a user that is not an admin). */
int admin__sigv4_check(struct admin *a, struct evhttp_request *req, const char *auth,
                       struct admin_caller *who, const char **why);
/* The admin API answers that no internal error maps to; the others come from
 * the admin columns of common/srv_err.h's SRV_ERR_MAP (admin__error_of), so a
 * code and its status are written in one place. docs/admin-api.md lists both.
 * X(name, admin API code, HTTP status) */
#define ADMIN_ERR_MAP(X)                                                                           \
    X(UNAUTHORIZED, "Unauthorized", 401) /* no credentials, or another scheme */                   \
    X(METHOD_NOT_ALLOWED, "MethodNotAllowed", 405)                                                 \
    X(IN_USE, "InUse", 409)            /* the bootstrap tenant cannot go */                        \
    X(UNAVAILABLE, "Unavailable", 503) /* a component (store, QoS) is not running */               \
    /* a remote did not pass its check (unreachable, TLS, credentials, no bucket) */               \
    X(REMOTE_CHECK, "RemoteCheckFailed", 400)

enum admin_err {
#define ADMIN_ERR_ENUM(name, code, status) ADMIN_E_##name,
    ADMIN_ERR_MAP(ADMIN_ERR_ENUM)
#undef ADMIN_ERR_ENUM
};

/* A row of ADMIN_ERR_MAP. */
struct admin_err_info {
    const char *code;
    int status;
};
/** @return the rows of ADMIN_ERR_MAP (@p n of them, in enum order), for tests. */
const struct admin_err_info *admin__err_table(size_t *n);
/** Send admin-only error @p e with a JSON body {"error": code, "message": msg}.
 * @return the HTTP status sent. */
int admin__error(struct evhttp_request *req, enum admin_err e, const char *msg);
/** Send the admin API answer of internal error @p err (its row in SRV_ERR_MAP) with
 * message @p msg (NULL: the map's). @return the HTTP status sent. */
int admin__error_of(struct evhttp_request *req, int err, const char *msg);

/** Give every stored user QoS policy that has no uid (written before user
 * policies carried one) its user's uid, so NFS calls map to it. */
void admin__qos_uids_sync(struct admin *a);

#endif
