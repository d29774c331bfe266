/* SPDX-License-Identifier: Apache-2.0
 * s3_error: S3 error documents and the mapping from internal errors
 * (common/srv_err.h) to S3 codes and HTTP statuses, refined by context
 * (a missing key vs. a missing bucket, a precondition vs. a quota ...).
 * Thread: reentrant. */
#include <errno.h>
#include <string.h>

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
    *code = srv_err_s3code(err);
    *status = srv_err_http(err);
    switch (err) {
    case -ENOENT:
    case SRV_ESTALE:
        *code = is_key ? "NoSuchKey" : "NoSuchBucket";
        *status = 404;
        break;
    case SRV_ENOBUCKET:
        *code = "NoSuchBucket";
        *status = 404;
        break;
    case -EEXIST:
        *code = "BucketAlreadyOwnedByYou";
        *status = 409;
        break;
    case SRV_EBADNAME:
        *code = is_key ? "InvalidArgument" : "InvalidBucketName";
        *status = 400;
        break;
    case SRV_ECLASH:
    case -EISDIR:
    case -ENOTDIR:
        *code = "InvalidRequest";
        *status = 409;
        break;
    case SRV_ETOOBIG:
    case -EFBIG:
        *code = "EntityTooLarge";
        *status = 400;
        break;
    default: break;
    }
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
