/* SPDX-License-Identifier: Apache-2.0
 * srv_tls: a TLS server context from a PEM certificate chain and key, shared
 * by the S3 listener and the admin listener (same options, same checks), and
 * used at start-up to validate both before anything is created on disk.
 * Thread: any. */
#ifndef SRV_TLS_H
#define SRV_TLS_H

#include <stddef.h>
#include <openssl/ssl.h>

/** Make a server context (TLS 1.2 or later) that serves @p cert (PEM chain)
 * with @p key (PEM private key), and check that the key matches.
 * @param[out] out the context; the caller frees it with SSL_CTX_free().
 * @param[out] err on failure, which file and why ("cannot read ...: No such
 *                 file or directory", "key ... does not match certificate ...").
 * @return 0, -ENOENT / -EACCES / -errno (a file cannot be read), -EIO (not a
 *         usable PEM certificate or key, or they do not match), -ENOMEM. */
int srv_tls_server_ctx(const char *cert, const char *key, SSL_CTX **out, char *err,
                       size_t errlen);

#endif
