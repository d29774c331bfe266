/* SPDX-License-Identifier: Apache-2.0
 * admin_int: what admin.c shares with admin_api.c. Thread: the admin thread. */
#ifndef ADMIN_INT_H
#define ADMIN_INT_H

#include <pthread.h>
#include <stdbool.h>

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
    pthread_t thread;
    bool started;
    int ready; /* atomic */
};

/** Serve one authenticated /api/v1/... request (@p path starts after "/api/v1"). */
void admin__api(struct admin *a, struct evhttp_request *req, const char *path);
/** Send @p status with a JSON body {"error": code, "message": msg}. */
void admin__error(struct evhttp_request *req, int status, const char *code, const char *msg);

#endif
