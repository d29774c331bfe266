/* SPDX-License-Identifier: Apache-2.0
 * srv_err: lookups generated from SRV_ERR_MAP. Thread: any. */
#include "srv_err.h"

#include <stddef.h>

struct err_row {
    int value;
    const char *s3;
    int http;
    int nfs3;
    const char *msg;
};

#define ROW(name, value, s3, http, nfs, msg) {value, s3, http, nfs, msg},
static const struct err_row rows[] = {SRV_ERR_MAP(ROW)};
#undef ROW

static const struct err_row *find(int err)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].value == err)
            return &rows[i];
    return NULL;
}

const char *srv_strerror(int err)
{
    const struct err_row *r = find(err);
    return r ? r->msg : "internal error";
}

const char *srv_err_s3code(int err)
{
    const struct err_row *r = find(err);
    return r ? r->s3 : "InternalError";
}

int srv_err_http(int err)
{
    const struct err_row *r = find(err);
    return r ? r->http : 500;
}

int srv_err_nfs3(int err)
{
    const struct err_row *r = find(err);
    return r ? r->nfs3 : 5;
}
