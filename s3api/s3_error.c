/* SPDX-License-Identifier: Apache-2.0
 * s3_error: S3 error documents, the S3 answer of an internal error
 * (common/srv_err.h's map, in the context of an object or a bucket) and the
 * table of S3-only codes (s3_error.h).
 * Thread: reentrant. */
#include <event2/buffer.h>

#include "s3_internal.h"
#include "srv_err.h"

void s3__error_xml(struct evbuffer *out, const char *code, const char *msg, const char *resource,
                   const char *reqid)
{
    evbuffer_add_printf(out, S3_XML_HDR "<Error>");
    s3__xml_elem(out, "Code", code);
    s3__xml_elem(out, "Message", msg);
    if (resource)
        s3__xml_elem(out, "Resource", resource);
    s3__xml_elem(out, "RequestId", reqid);
    evbuffer_add_printf(out, "</Error>\n");
}

void s3__error_map(int err, bool is_key, const char **code, int *status)
{
    const struct srv_err_info *e = srv_err_info(err);
    *code = is_key ? e->s3_key : e->s3_bucket;
    *status = e->s3_http;
}

#define S3_ERR_ROW(name, code, status, msg) {#name, code, status, msg},
static const struct s3_err_info s3_errs[S3E__COUNT] = {
    {"NONE", "InternalError", 500, "internal error"}, S3_ERR_MAP(S3_ERR_ROW)};
#undef S3_ERR_ROW

const struct s3_err_info *s3__err_info(enum s3_err e)
{
    if ((int)e <= 0 || e >= S3E__COUNT)
        return &s3_errs[0];
    return &s3_errs[e];
}

const char *s3__status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
    }
}
