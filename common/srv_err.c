/* SPDX-License-Identifier: Apache-2.0
 * srv_err: lookups generated from SRV_ERR_MAP. Thread: any. */
#include "srv_err.h"

#define ROW(name, value, s3, s3b, http, nfs, adm, ahttp, msg)                                      \
    {value, #name, s3, s3b, http, nfs, adm, ahttp, msg},
static const struct srv_err_info rows[] = {SRV_ERR_MAP(ROW)};
#undef ROW

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Errors outside the map answer as EIO does. */
static const struct srv_err_info unknown = {.value = -EIO,
                                            .name = "unknown",
                                            .s3_key = "InternalError",
                                            .s3_bucket = "InternalError",
                                            .s3_http = 500,
                                            .nfs3 = 5,
                                            .admin = "InternalError",
                                            .admin_http = 500,
                                            .msg = "internal error"};

const struct srv_err_info *srv_err_info(int err)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].value == err)
            return &rows[i];
    return &unknown;
}

const struct srv_err_info *srv_err_table(size_t *n)
{
    *n = NROWS;
    return rows;
}

const char *srv_strerror(int err)
{
    return srv_err_info(err)->msg;
}

int srv_err_nfs3(int err)
{
    return srv_err_info(err)->nfs3;
}
