/* SPDX-License-Identifier: Apache-2.0
 * srv_tls: see srv_tls.h. The files are first opened with open(2) so a
 * missing or unreadable file is named with errno's words instead of
 * OpenSSL's "system lib" reason. Thread: any. */
#include "srv_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int readable(const char *path, const char *what, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot read TLS %s %s: %s", what, path, strerror(e));
        return -e;
    }
    close(fd);
    return 0;
}

/* The reason of OpenSSL's first queued error (the queue is emptied). */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

int srv_tls_server_ctx(const char *cert, const char *key, SSL_CTX **out, char *err,
                       size_t errlen)
{
    int rc;
    *out = NULL;
    if (!cert || !*cert || !key || !*key) {
        snprintf(err, errlen, "TLS needs both a certificate and a key file");
        return -EINVAL;
    }
    if ((rc = readable(cert, "certificate", err, errlen)) < 0 ||
        (rc = readable(key, "key", err, errlen)) < 0)
        return rc;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "cannot make a TLS context: %s", ssl_reason());
        return -ENOMEM;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    rc = -EIO;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, errlen, "TLS certificate %s is not a usable PEM certificate: %s", cert,
                 ssl_reason());
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "TLS key %s is not a usable PEM private key: %s", key,
                 ssl_reason());
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "TLS key %s does not match certificate %s: %s", key, cert,
                 ssl_reason());
        goto fail;
    }
    *out = ctx;
    return 0;
fail:
    SSL_CTX_free(ctx);
    return rc;
}
