/* SPDX-License-Identifier: Apache-2.0
 * main: the s3nfsd daemon: configuration, start-up, the banner, signals and
 * an orderly shutdown.
 *
 * Start-up: command line and config file (srv_config), logging, optional
 * detach and pidfile, the namespace core, tenants (bootstrap credentials from
 * S3NFS_ACCESS_KEY/S3NFS_SECRET_KEY or generated), the admin token
 * (S3NFS_ADMIN_TOKEN or generated; only its SHA-256 is stored, in
 * CORE_T_CONFIG), QoS, the loop threads and worker pool, then the S3, NFS and
 * admin listeners. When all serve, /healthz turns 200 and the banner prints.
 *
 * Signals are libevent signal events on the main thread's own event_base, so
 * no work happens in an async signal handler: SIGTERM/SIGINT stop (listeners
 * close, in-flight work drains, the core syncs and closes, exit 0); SIGHUP
 * re-reads the configuration and applies the reloadable options.
 * Thread: the main thread; everything else runs on the loops and workers. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"
#include "core.h"
#include "nfs_server.h"
#include "qos_admit.h"
#include "s3_server.h"
#include "srv_config.h"
#include "srv_daemon.h"
#include "srv_err.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"
#include "tenants.h"

#ifndef S3NFS_VERSION
#define S3NFS_VERSION "dev"
#endif

#define ADMIN_TOKEN_KEY "admin.token_sha256"
#define TOKEN_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

struct daemon {
    struct srv_cli cli;
    struct srv_config cfg;
    char nfs_listen[300];
    char data_dir_abs[PATH_MAX];
    const char **devices;
    char *devices_buf;
    struct core *core;
    struct tenants *tenants;
    struct qos *qos;
    struct admin *admin;
    struct s3_server *s3;
    struct nfs_server *nfs;
    struct event_base *base;
    struct event *sig_term, *sig_int, *sig_hup;
    bool loops_started;
    int exit_code;
};

/* Message for an internal error: the project's own text for SRV_E*, else errno's. */
static const char *err_text(int rc)
{
    return rc <= -20000 ? srv_strerror(rc) : strerror(-rc);
}

static void die_usage(const char *msg)
{
    fprintf(stderr, "s3nfsd: %s\n", msg);
    exit(2);
}

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Split "a,b,c" into a NULL-terminated array (store devices). */
static int split_devices(struct daemon *d)
{
    if (!*d->cfg.devices)
        return 0;
    d->devices_buf = strdup(d->cfg.devices);
    size_t n = 1;
    for (const char *p = d->cfg.devices; *p; p++)
        n += *p == ',';
    d->devices = calloc(n + 1, sizeof(*d->devices));
    if (!d->devices_buf || !d->devices)
        return -ENOMEM;
    size_t i = 0;
    for (char *save = NULL, *tok = strtok_r(d->devices_buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (*tok)
            d->devices[i++] = tok;
    }
    d->devices[i] = NULL;
    return 0;
}

/* Returns 0 with @p hash set; @p generated gets a new token when one was made. */
static int admin_token_setup(struct core *c, uint8_t hash[32], char *generated, size_t genlen)
{
    int rc;
    const char *env = getenv("S3NFS_ADMIN_TOKEN");
    generated[0] = '\0';
    if (env && *env) {
        if (strlen(env) < 16)
            srv_log(WARN, SRV, "S3NFS_ADMIN_TOKEN is shorter than 16 characters: easy to guess");
        SHA256((const unsigned char *)env, strlen(env), hash);
        return core_table_put(c, CORE_T_CONFIG, ADMIN_TOKEN_KEY, strlen(ADMIN_TOKEN_KEY), hash,
                              32, 0);
    }
    void *val = NULL;
    size_t vlen = 0;
    rc = core_table_get(c, CORE_T_CONFIG, ADMIN_TOKEN_KEY, strlen(ADMIN_TOKEN_KEY), &val, &vlen);
    if (rc == 0 && vlen == 32) {
        memcpy(hash, val, 32);
        free(val);
        return 0;
    }
    free(val);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    /* First start without a token: make one and show it once. */
    const size_t n = 40;
    const size_t alen = sizeof(TOKEN_ALPHABET) - 1;
    if (genlen < n + 1)
        return -EINVAL;
    size_t i = 0;
    while (i < n) {
        unsigned char b[64];
        if (RAND_bytes(b, sizeof(b)) != 1)
            return -EIO;
        for (size_t j = 0; j < sizeof(b) && i < n; j++)
            if (b[j] < 256 - 256 % alen)
                generated[i++] = TOKEN_ALPHABET[b[j] % alen];
    }
    generated[n] = '\0';
    SHA256((const unsigned char *)generated, n, hash);
    return core_table_put(c, CORE_T_CONFIG, ADMIN_TOKEN_KEY, strlen(ADMIN_TOKEN_KEY), hash, 32,
                          0);
}

/* Prometheus series of the core (capacity, commits, CRC errors). */
static void render_core(void *arg, struct evbuffer *out)
{
    struct core_stats st;
    core_stats_get(arg, &st);
    evbuffer_add_printf(out,
                        "# HELP s3nfs_store_capacity_bytes Bytes of data space.\n"
                        "# TYPE s3nfs_store_capacity_bytes gauge\n"
                        "s3nfs_store_capacity_bytes %llu\n"
                        "# HELP s3nfs_store_free_bytes Bytes of data space free.\n"
                        "# TYPE s3nfs_store_free_bytes gauge\n"
                        "s3nfs_store_free_bytes %llu\n"
                        "# HELP s3nfs_meta_commits_total Metadata group commits.\n"
                        "# TYPE s3nfs_meta_commits_total counter\n"
                        "s3nfs_meta_commits_total %llu\n"
                        "# HELP s3nfs_meta_commit_ops_total Operations carried by group commits.\n"
                        "# TYPE s3nfs_meta_commit_ops_total counter\n"
                        "s3nfs_meta_commit_ops_total %llu\n"
                        "# HELP s3nfs_crc_errors_total Extents that failed their CRC on read.\n"
                        "# TYPE s3nfs_crc_errors_total counter\n"
                        "s3nfs_crc_errors_total %llu\n"
                        "# HELP s3nfs_store_written_bytes_total Data bytes written to the store.\n"
                        "# TYPE s3nfs_store_written_bytes_total counter\n"
                        "s3nfs_store_written_bytes_total %llu\n"
                        "# HELP s3nfs_store_read_bytes_total Data bytes read from the store.\n"
                        "# TYPE s3nfs_store_read_bytes_total counter\n"
                        "s3nfs_store_read_bytes_total %llu\n",
                        (unsigned long long)st.store_capacity, (unsigned long long)st.store_free,
                        (unsigned long long)st.commits, (unsigned long long)st.commit_ops,
                        (unsigned long long)st.crc_errors, (unsigned long long)st.bytes_written,
                        (unsigned long long)st.bytes_read);
}

/* Per-tenant usage and quota limits (0 = no limit), one gauge family each. */
static const char *const usage_families[4][2] = {
    {"s3nfs_tenant_bytes", "Bytes stored by the tenant."},
    {"s3nfs_tenant_inodes", "Files and directories of the tenant."},
    {"s3nfs_tenant_bytes_limit", "Byte quota of the tenant (0 = none)."},
    {"s3nfs_tenant_inodes_limit", "Inode quota of the tenant (0 = none)."},
};

struct usage_ctx {
    struct daemon *d;
    struct evbuffer *out;
    int field;
};

/* Tenant names are [A-Za-z0-9._-]: safe as label values without escaping. */
static int render_tenant_usage(void *arg, const struct tenant_info *ti)
{
    struct usage_ctx *u = arg;
    struct core_usage cu;
    if (core_usage_get(u->d->core, ti->id, 0, &cu) < 0)
        return 0;
    const uint64_t v[4] = {cu.bytes, cu.inodes, cu.bytes_limit, cu.inodes_limit};
    evbuffer_add_printf(u->out, "%s{tenant=\"%u\",name=\"%s\"} %llu\n",
                        usage_families[u->field][0], ti->id, ti->name,
                        (unsigned long long)v[u->field]);
    return 0;
}

static void render_tenants(void *arg, struct evbuffer *out)
{
    struct daemon *d = arg;
    for (int f = 0; f < 4; f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", usage_families[f][0],
                            usage_families[f][1], usage_families[f][0]);
        struct usage_ctx u = {d, out, f};
        tenants_tenant_list(d->tenants, render_tenant_usage, &u);
    }
}

/* Host part of a listen address as a client would dial it. */
static void dial_host(const char *listen, char *host, size_t len, int *port)
{
    char h[256];
    if (srv_config_split_listen(listen, h, sizeof(h), port) < 0) {
        snprintf(host, len, "127.0.0.1");
        return;
    }
    if (!*h || strcmp(h, "0.0.0.0") == 0)
        snprintf(host, len, "127.0.0.1");
    else if (strcmp(h, "::") == 0)
        snprintf(host, len, "[::1]");
    else if (strchr(h, ':'))
        snprintf(host, len, "[%s]", h);
    else
        snprintf(host, len, "%s", h);
}

static void print_banner(struct daemon *d, const char *akey, const char *secret,
                         const char *token)
{
    char s3h[300], nfsh[300], admh[300];
    int s3p, nfsp, admp;
    dial_host(d->cfg.s3_listen, s3h, sizeof(s3h), &s3p);
    dial_host(d->nfs_listen, nfsh, sizeof(nfsh), &nfsp);
    dial_host(d->cfg.admin_listen, admh, sizeof(admh), &admp);
    const char *scheme = *d->cfg.s3_tls_cert ? "https" : "http";

    printf("s3nfsd %s ready\n", S3NFS_VERSION);
    printf("  data:        %s\n", d->data_dir_abs);
    printf("  S3:          %s://%s:%d  (listening on %s)\n", scheme, s3h, s3p, d->cfg.s3_listen);
    printf("  NFSv3:       %s port %d, MOUNT on the same port (listening on %s)\n", nfsh, nfsp,
           d->nfs_listen);
    if (d->cfg.admin_enabled)
        printf("  admin:       %s://%s:%d  (/healthz, /metrics%s, /api/v1/)\n",
               *d->cfg.admin_tls_cert ? "https" : "http", admh, admp,
               d->cfg.admin_metrics_auth ? " with credentials" : "");
    if (akey && secret) {
        printf("  access key:  %s\n", akey);
        printf("  secret key:  %s\n", secret);
    }
    if (token && *token)
        printf("  admin token: %s   (shown once; only its hash is stored)\n", token);
    printf("\nTry:\n");
    if (akey && secret)
        printf("  AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s \\\n    ", akey, secret);
    else
        printf("  ");
    printf("aws --endpoint-url %s://%s:%d s3 ls\n", scheme, s3h, s3p);
    printf("  nfs://%s/?version=3&nfsport=%d&mountport=%d\n", nfsh, nfsp, nfsp);
    printf("  mount -t nfs -o vers=3,proto=tcp,port=%d,mountport=%d,nolock %s:/ /mnt\n", nfsp,
           nfsp, nfsh);
    fflush(stdout);
}

/* ---- signals ---- */

static void on_term(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    srv_log(INFO, SRV, "signal %d: shutting down (draining in-flight work)", (int)sig);
    event_base_loopbreak(d->base);
}

static void on_changed(void *arg, const struct srv_config_opt *o, const char *old,
                       const char *now)
{
    srv_log(INFO, SRV, "reload: %s changed from '%s' to '%s'", o->name, old, now);
}

static void on_ignored(void *arg, const struct srv_config_opt *o, const char *old,
                       const char *now)
{
    srv_log(WARN, SRV, "reload: %s changed from '%s' to '%s' but needs a restart; not applied",
            o->name, old, now);
}

static void qos_cfg_of(const struct srv_config *c, struct qos_config *q)
{
    q->enabled = c->qos_enabled;
    q->max_wait_ms = (uint32_t)c->qos_max_wait_ms;
    q->queue_max = (uint32_t)c->qos_queue_max;
    q->cap_read_bps = c->qos_capacity_read_bps;
    q->cap_write_bps = c->qos_capacity_write_bps;
    q->cap_iops = (uint64_t)c->qos_capacity_iops;
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    struct srv_config fresh;
    char err[512];
    char old_log_file[PATH_MAX];

    srv_log(INFO, SRV, "SIGHUP: reloading configuration%s%s",
            d->cli.config_path ? " from " : "", d->cli.config_path ? d->cli.config_path : "");
    if (srv_config_build(&fresh, &d->cli, err, sizeof(err)) < 0) {
        srv_log(ERROR, SRV, "reload failed, keeping the running configuration: %s", err);
        return;
    }
    /* nfs_listen "" means the computed default: compare like with like. */
    if (!*fresh.nfs_listen && *d->cfg.nfs_listen)
        srv_config_set(&fresh, "nfs_listen", d->cfg.nfs_listen, err, sizeof(err));
    snprintf(old_log_file, sizeof(old_log_file), "%s", d->cfg.log_file);
    int n = srv_config_reload(&d->cfg, &fresh, on_changed, on_ignored, d);
    srv_config_free(&fresh);

    if (strcmp(old_log_file, d->cfg.log_file) != 0) {
        int rc = srv_log_open(*d->cfg.log_file ? d->cfg.log_file : NULL);
        if (rc < 0)
            srv_log(ERROR, SRV, "cannot open log file %s: %s", d->cfg.log_file, strerror(-rc));
    } else if (srv_log_reopen() < 0) {
        srv_log(ERROR, SRV, "cannot reopen log file %s", d->cfg.log_file);
    }
    if (srv_log_apply_spec(d->cfg.log_level) < 0)
        srv_log(ERROR, SRV, "log_level '%s' did not apply", d->cfg.log_level);
    srv_loops_set_drain_timeout((int)d->cfg.shutdown_timeout_s * 1000);
    struct qos_config qc;
    qos_cfg_of(&d->cfg, &qc);
    if (d->qos)
        qos_configure(d->qos, &qc);
    srv_log(INFO, SRV, "reload done: %d option%s changed", n, n == 1 ? "" : "s");
}

/* ---- start and stop ---- */

static void stop_all(struct daemon *d)
{
    admin_set_ready(d->admin, false);
    if (d->s3) {
        s3_server_stop(d->s3);
        d->s3 = NULL;
    }
    if (d->nfs) {
        nfs_server_stop(d->nfs);
        d->nfs = NULL;
    }
    qos_drain(d->qos);
    if (d->loops_started) {
        srv_loops_stop();
        d->loops_started = false;
    }
    admin_stop(d->admin);
    d->admin = NULL;
    srv_metrics_remove_renderer(render_tenants, d);
    if (d->core)
        srv_metrics_remove_renderer(render_core, d->core);
    qos_set_global(NULL);
    qos_close(d->qos);
    d->qos = NULL;
    tenants_close(d->tenants);
    d->tenants = NULL;
    if (d->core) {
        int rc = core_sync(d->core);
        if (rc < 0)
            srv_log(ERROR, SRV, "final sync failed: %s", err_text(rc));
        core_close(d->core);
        d->core = NULL;
    }
}

static int start_all(struct daemon *d)
{
    int rc;
    char err[512];
    char akey[TENANT_AKEY_MAX + 1] = "", secret[TENANT_SECRET_MAX + 1] = "";
    char token[64] = "";

    /* Data folder (created if missing), shown as an absolute path. */
    if (mkdir(d->cfg.data_dir, 0750) < 0 && errno != EEXIST) {
        rc = -errno;
        srv_log(ERROR, SRV, "cannot create data_dir %s: %s", d->cfg.data_dir, strerror(errno));
        return rc;
    }
    if (!realpath(d->cfg.data_dir, d->data_dir_abs))
        snprintf(d->data_dir_abs, sizeof(d->data_dir_abs), "%s", d->cfg.data_dir);

    if ((rc = split_devices(d)) < 0)
        return rc;
    struct core_config cc = {
        .data_dir = d->data_dir_abs,
        .data_file_size = d->cfg.data_file_size,
        .data_files = (uint32_t)d->cfg.data_files,
        .devices = d->devices,
        .map_size = d->cfg.map_size,
        .inline_max = (uint32_t)d->cfg.inline_max,
        .commit_max_batch = (uint32_t)d->cfg.commit_max_batch,
    };
    rc = core_open(&d->core, &cc);
    if (rc < 0) {
        srv_log(ERROR, SRV, "cannot open the store in %s: %s", d->data_dir_abs,
                err_text(rc));
        return rc;
    }
    srv_metrics_add_renderer(render_core, d->core);

    /* Tenants: bootstrap credentials from the environment, or generated once. */
    const char *env_ak = getenv("S3NFS_ACCESS_KEY");
    const char *env_sk = getenv("S3NFS_SECRET_KEY");
    if (env_ak && !*env_ak)
        env_ak = NULL;
    if (env_sk && !*env_sk)
        env_sk = NULL;
    if (!env_ak != !env_sk) {
        srv_log(ERROR, SRV, "set both S3NFS_ACCESS_KEY and S3NFS_SECRET_KEY, or neither");
        return -EINVAL;
    }
    char keyfile[PATH_MAX + 16];
    snprintf(keyfile, sizeof(keyfile), "%s/master.key", d->data_dir_abs);
    bool created = false;
    rc = tenants_open_keyfile(&d->tenants, d->core, keyfile, env_ak, env_sk, akey, secret,
                              &created);
    if (rc < 0) {
        srv_log(ERROR, SRV, "cannot load tenants: %s", err_text(rc));
        return rc;
    }
    srv_metrics_add_renderer(render_tenants, d);
    const char *show_ak = NULL, *show_sk = NULL;
    if (env_ak) {
        show_ak = env_ak;
        show_sk = env_sk;
    } else if (created) {
        show_ak = akey;
        show_sk = secret;
    }

    struct admin_config ac = {.listen = d->cfg.admin_listen,
                              .have_token = true,
                              .tls_cert = d->cfg.admin_tls_cert,
                              .tls_key = d->cfg.admin_tls_key,
                              .metrics_auth = d->cfg.admin_metrics_auth};
    rc = admin_token_setup(d->core, ac.token_sha256, token, sizeof(token));
    if (rc < 0) {
        srv_log(ERROR, SRV, "cannot set up the admin token: %s", err_text(rc));
        return rc;
    }

    struct qos_config qc;
    qos_cfg_of(&d->cfg, &qc);
    if ((rc = qos_open(&d->qos, d->core, &qc)) < 0) {
        srv_log(ERROR, SRV, "cannot load QoS policies: %s", err_text(rc));
        return rc;
    }
    qos_set_global(d->qos);

    int nloops = (int)d->cfg.loop_threads;
    if (nloops == 0)
        nloops = cpu_count() < 8 ? cpu_count() : 8;
    int nworkers = (int)d->cfg.worker_threads;
    if (nworkers == 0)
        nworkers = 32 * cpu_count() < 64 ? 64 : 32 * cpu_count();
    srv_loops_set_drain_timeout((int)d->cfg.shutdown_timeout_s * 1000);
    if ((rc = srv_loops_start(nloops, nworkers)) < 0)
        return rc;
    d->loops_started = true;

    if (d->cfg.admin_enabled) {
        rc = admin_start(&d->admin, &ac, d->core, d->tenants, d->qos);
        if (rc < 0) {
            srv_log(ERROR, SRV, "cannot start the admin listener on %s: %s",
                    d->cfg.admin_listen, strerror(-rc));
            return rc;
        }
    }

    struct s3_server_config s3c = {
        .listen = d->cfg.s3_listen,
        .domain = *d->cfg.s3_domain ? d->cfg.s3_domain : NULL,
        .region = d->cfg.s3_region,
        .max_header_bytes = (size_t)d->cfg.s3_max_header_bytes,
        .max_object_size = d->cfg.s3_max_object_size,
        .idle_timeout_s = (int)d->cfg.s3_idle_timeout_s,
        .max_conns = (int)d->cfg.s3_max_conns,
        .tls_cert = *d->cfg.s3_tls_cert ? d->cfg.s3_tls_cert : NULL,
        .tls_key = *d->cfg.s3_tls_key ? d->cfg.s3_tls_key : NULL,
    };
    rc = s3_server_start(&d->s3, &s3c, d->core, d->tenants);
    if (rc < 0) {
        srv_log(ERROR, SRV, "cannot start S3 on %s: %s", d->cfg.s3_listen, err_text(rc));
        return rc;
    }
    struct nfs_server_config nc = {
        .listen = d->nfs_listen,
        .register_rpcbind = d->cfg.nfs_register_rpcbind,
        .max_record = (size_t)d->cfg.nfs_max_record,
        .nlm_grace_s = (int)d->cfg.nlm_grace_period,
    };
    rc = nfs_server_start(&d->nfs, &nc, d->core, d->tenants);
    if (rc < 0) {
        srv_log(ERROR, SRV, "cannot start NFS on %s: %s", d->nfs_listen, err_text(rc));
        return rc;
    }

    print_banner(d, show_ak, show_sk, token);
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(token, sizeof(token));
    (void)err;
    admin_set_ready(d->admin, true);
    srv_log(INFO, SRV, "s3nfsd %s ready: S3 %s, NFS %s, admin %s, data %s", S3NFS_VERSION,
            d->cfg.s3_listen, d->nfs_listen, d->cfg.admin_enabled ? d->cfg.admin_listen : "off",
            d->data_dir_abs);
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon d;
    char err[512];
    memset(&d, 0, sizeof(d));

    if (srv_cli_parse(&d.cli, argc, argv, err, sizeof(err)) < 0)
        die_usage(err);
    if (d.cli.help || d.cli.version || d.cli.dump_doc) {
        if (d.cli.help)
            srv_cli_usage(stdout, "s3nfsd");
        else if (d.cli.version)
            printf("s3nfsd %s\n", S3NFS_VERSION);
        else
            srv_config_doc_markdown(stdout);
        srv_cli_free(&d.cli);
        return 0;
    }
    if (srv_config_build(&d.cfg, &d.cli, err, sizeof(err)) < 0)
        die_usage(err);
    if (*d.cfg.nfs_listen)
        snprintf(d.nfs_listen, sizeof(d.nfs_listen), "%s", d.cfg.nfs_listen);
    else
        snprintf(d.nfs_listen, sizeof(d.nfs_listen), "127.0.0.1:%d",
                 geteuid() == 0 ? 2049 : 20490);
    if (d.cli.check_config) {
        srv_config_set(&d.cfg, "nfs_listen", d.nfs_listen, err, sizeof(err));
        srv_config_dump(&d.cfg, stdout);
        fprintf(stderr, "s3nfsd: configuration OK\n");
        srv_config_free(&d.cfg);
        srv_cli_free(&d.cli);
        return 0;
    }

    if (srv_log_apply_spec(d.cfg.log_level) < 0)
        die_usage("bad log_level");
    if (d.cfg.daemonize && !*d.cfg.log_file) {
        /* A detached daemon has no terminal: log next to its data. */
        char path[PATH_MAX + 16];
        if (mkdir(d.cfg.data_dir, 0750) < 0 && errno != EEXIST) {
            snprintf(err, sizeof(err), "cannot create data_dir %s: %s", d.cfg.data_dir,
                     strerror(errno));
            die_usage(err);
        }
        snprintf(path, sizeof(path), "%s/s3nfsd.log", d.cfg.data_dir);
        if (srv_config_set(&d.cfg, "log_file", path, err, sizeof(err)) < 0)
            die_usage(err);
    }
    if (*d.cfg.log_file) {
        int rc = srv_log_open(d.cfg.log_file);
        if (rc < 0) {
            snprintf(err, sizeof(err), "cannot open log file %s: %s", d.cfg.log_file,
                     strerror(-rc));
            die_usage(err);
        }
    }
    if (d.cfg.daemonize) {
        int rc = srv_daemon_detach();
        if (rc < 0) {
            fprintf(stderr, "s3nfsd: cannot detach: %s\n", strerror(-rc));
            return 1;
        }
    }
    if (*d.cfg.pidfile && srv_pidfile_create(d.cfg.pidfile) < 0) {
        srv_daemon_ready(1);
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    d.base = event_base_new();
    if (!d.base) {
        srv_log(CRIT, SRV, "cannot create the main event base");
        srv_daemon_ready(1);
        return 1;
    }
    d.sig_term = evsignal_new(d.base, SIGTERM, on_term, &d);
    d.sig_int = evsignal_new(d.base, SIGINT, on_term, &d);
    d.sig_hup = evsignal_new(d.base, SIGHUP, on_hup, &d);
    if (!d.sig_term || !d.sig_int || !d.sig_hup || evsignal_add(d.sig_term, NULL) < 0 ||
        evsignal_add(d.sig_int, NULL) < 0 || evsignal_add(d.sig_hup, NULL) < 0) {
        srv_log(CRIT, SRV, "cannot install signal events");
        srv_daemon_ready(1);
        return 1;
    }

    srv_log(INFO, SRV, "s3nfsd %s starting (pid %ld)", S3NFS_VERSION, (long)getpid());
    if (start_all(&d) < 0) {
        srv_log(ERROR, SRV, "start-up failed; stopping");
        stop_all(&d);
        d.exit_code = 1;
        srv_daemon_ready(1);
        goto out;
    }
    srv_daemon_ready(0);

    event_base_dispatch(d.base);

    stop_all(&d);
    srv_log(INFO, SRV, "s3nfsd stopped");
out:
    event_free(d.sig_term);
    event_free(d.sig_int);
    event_free(d.sig_hup);
    event_base_free(d.base);
    srv_pidfile_remove();
    free(d.devices);
    free(d.devices_buf);
    srv_config_free(&d.cfg);
    srv_cli_free(&d.cli);
    return d.exit_code;
}
