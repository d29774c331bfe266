/* SPDX-License-Identifier: Apache-2.0
 * s3_server: the S3 front end (HTTP/1.1 + optional TLS, SigV4, S3 REST/XML).
 *
 * The daemon starts one server per S3 listener. The listener accepts on the
 * first loop (srv_loop_get(0)) and hands each accepted socket to the next
 * loop (srv_loop_next()); a connection lives on that loop for its life.
 * Every namespace-core call runs on the worker pool (srv_work_submit).
 * Thread: s3_server_start/s3_server_stop from the main thread, after
 * srv_loops_start() and before srv_loops_stop(). */
#ifndef S3_SERVER_H
#define S3_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct core;
struct tenants;
struct s3_server;

struct s3_server_config {
    const char *listen;       /* "host:port", "[v6]:port" or ":port" (all addresses) */
    const char *domain;       /* virtual-host base domain ("s3.local"), NULL = path style only */
    const char *region;       /* SigV4 region and GetBucketLocation answer; NULL = "us-east-1" */
    const char *anon_tenant;  /* tenant of the buckets unsigned requests name plainly; NULL:
                               * only "TENANT:BUCKET" names reach a bucket unsigned */
    size_t max_header_bytes;  /* request line + headers; 0 = 64 KiB. Over: 431 */
    uint64_t max_object_size; /* largest PUT/part body; 0 = 5 TiB. Over: 413 EntityTooLarge */
    int idle_timeout_s;       /* idle keep-alive / slow client timeout; 0 = 60 s */
    int max_conns;            /* concurrent connections; 0 = 10000. Over: accepted then closed */
    int loop_poll_us;         /* after an answer, wait this long, running, for a lone
                               * connection's next request before sleeping; 0 = never */
    const char *tls_cert;     /* PEM certificate chain; NULL = plain HTTP */
    const char *tls_key;      /* PEM private key (required with tls_cert) */
};

/** Bind, listen and start serving.
 * @param[out] out the server, for s3_server_stop().
 * @param[in]  cfg copied; strings need not outlive the call.
 * @param[in]  c, t borrowed; must outlive the server.
 * @return 0, -EINVAL (bad listen address, TLS cert without key), -EADDRINUSE and
 *         other -errno from socket/bind/listen, -EIO (TLS certificate/key failed
 *         to load; logged). */
int s3_server_start(struct s3_server **out, const struct s3_server_config *cfg, struct core *c,
                    struct tenants *t);
/** Stop accepting, close every connection (in-flight uploads are aborted)
 * and free the server. Safe on NULL. */
void s3_server_stop(struct s3_server *s);

/* The lifecycle worker (s3_lifecycle.c): applies the buckets' lifecycle rules. */
struct s3_lifecycle;
struct s3_lifecycle_config {
    int64_t day_s;      /* seconds in a lifecycle day; 0 = 86400 (less: a test aid) */
    int64_t interval_s; /* seconds between passes; 0 = 3600 */
    uint32_t batch;     /* entries read per batch (a short pause follows); 0 = 256 */
    /* Admission of one metadata operation (an entry read or a removal) of the
     * worker, before it is done; may sleep (the daemon: the QoS system class).
     * Nonzero: do not do it and end the pass (stopping). NULL: none. */
    int (*admit)(void *arg);
    void *admit_arg;
};
/** Start the worker thread (its first pass after interval_s).
 * @param[in] c borrowed; must outlive the worker. @return 0, -ENOMEM, -errno. */
int s3_lifecycle_start(struct s3_lifecycle **out, struct core *c,
                       const struct s3_lifecycle_config *cfg);
/** One pass over every bucket with a lifecycle configuration, on the caller's thread.
 * @return 0, or the error of the scan of configurations. */
int s3_lifecycle_run(struct s3_lifecycle *w);
/** Stop the worker (a pass in progress ends after its current entry) and free it. Safe on
 * NULL. */
void s3_lifecycle_stop(struct s3_lifecycle *w);

#endif
