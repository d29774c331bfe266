/* SPDX-License-Identifier: Apache-2.0
 * srv_config: the daemon's settings, driven by one declarative table.
 *
 * Every option is one row of srv_config_table[] (srv_config_table.c): name,
 * type, default, bounds, whether SIGHUP may change it, the field of struct
 * srv_config it fills, and its documentation. Defaults, the `key = value`
 * config file, `--set name=value` and the dedicated command-line flags,
 * --check-config, SIGHUP reload and docs/configuration.md all go through that
 * table, so they cannot disagree.
 *
 * Precedence: table defaults < config file < command line.
 * Thread: main thread only (the daemon reads a settled copy). */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum srv_cfg_type {
    SRV_CFG_STRING = 0, /* char * (heap, owned by the config); "" allowed unless checked */
    SRV_CFG_BOOL,       /* bool: true/false, yes/no, on/off, 1/0 */
    SRV_CFG_INT,        /* int64_t within [min, max] */
    SRV_CFG_SIZE,       /* uint64_t bytes; suffixes k/K/KiB, M/MiB, G/GiB, T/TiB (1024-based) */
};

#define SRV_CFG_IMMUTABLE 0x0  /* takes effect at start only */
#define SRV_CFG_RELOADABLE 0x1 /* SIGHUP applies a changed value */

/** A validator for a string option. @return 0, or -EINVAL with a reason in @p err. */
typedef int (*srv_cfg_check_fn)(const char *value, char *err, size_t errlen);

struct srv_config_opt {
    const char *name;   /* lower_snake_case; '-' is accepted for '_' on input */
    enum srv_cfg_type type;
    const char *def;    /* default, in the same syntax as the config file */
    int64_t min, max;   /* bounds for INT and SIZE (SIZE: as bytes) */
    unsigned flags;     /* SRV_CFG_* */
    size_t offset;      /* offsetof(struct srv_config, field) */
    srv_cfg_check_fn check;
    const char *help;   /* one or two sentences for docs/configuration.md and --help */
};

struct srv_config {
    /* daemon */
    char *data_dir;
    char *pidfile;
    bool daemonize;
    char *log_level;
    char *log_file;
    int64_t loop_threads;
    bool loop_cpu_affinity;
    int64_t worker_threads;
    int64_t shutdown_timeout_s;
    int64_t malloc_trim_s;
    /* listeners */
    char *s3_listen;
    char *nfs_listen;
    char *admin_listen;
    int64_t listen_backlog;
    /* S3 */
    char *s3_domain;
    char *s3_region;
    char *s3_anonymous_tenant;
    uint64_t s3_max_header_bytes;
    uint64_t s3_max_object_size;
    int64_t s3_idle_timeout_s;
    int64_t s3_max_conns;
    int64_t s3_loop_poll_us;
    char *s3_tls_cert;
    char *s3_tls_key;
    int64_t lifecycle_day_s;
    int64_t lifecycle_interval_s;
    int64_t lifecycle_batch;
    /* NFS */
    bool nfs_register_rpcbind;
    uint64_t nfs_max_record;
    int64_t nlm_grace_period;
    int64_t nfs_max_conns;
    int64_t nfs_idle_timeout_s;
    bool nfs_loop_answers;
    int64_t nfs_loop_poll_us;
    char *nfs_loopback_congestion;
    /* store */
    uint64_t data_file_size;
    uint64_t data_file_initial;
    bool data_write_cache;
    int64_t data_files;
    char *devices;
    uint64_t map_size;
    uint64_t inline_max;
    int64_t commit_max_batch;
    int64_t settle_ms;
    /* admin */
    bool admin_enabled;
    char *admin_tls_cert;
    char *admin_tls_key;
    bool admin_metrics_auth;
    /* QoS */
    bool qos_enabled;
    int64_t qos_max_wait_ms;
    int64_t qos_queue_max;
    uint64_t qos_capacity_read_bps;
    uint64_t qos_capacity_write_bps;
    int64_t qos_capacity_iops;
    bool qos_capacity_probe;
    int64_t qos_capacity_probe_mib;
    bool qos_shaping;
    uint64_t qos_system_read_bps;
    uint64_t qos_system_write_bps;
    int64_t qos_system_meta_iops;
    int64_t qos_system_weight;
    /* tier */
    bool tier_allow_private_remotes;
    int64_t tier_upload_workers;
    int64_t tier_poll_ms;
    uint64_t tier_part_size;
    uint64_t tier_copy_max;
    int64_t tier_retry_base_ms;
    int64_t tier_retry_max_ms;
    int64_t tier_recall_threads;
    uint64_t tier_recall_chunk_size;
    int64_t tier_recall_wait_ms;
    int64_t tier_recall_fail_ms;
};

extern const struct srv_config_opt srv_config_table[];
extern const size_t srv_config_table_len;

/** Find a row by name ('-' and '_' are interchangeable). @return it or NULL. */
const struct srv_config_opt *srv_config_find(const char *name);

/** Fill @p c with every table default. @return 0, -ENOMEM. */
int srv_config_init(struct srv_config *c);
/** Free the strings of @p c (the struct itself is the caller's). */
void srv_config_free(struct srv_config *c);
/** Deep copy. @return 0, -ENOMEM. */
int srv_config_copy(struct srv_config *dst, const struct srv_config *src);

/** Set option @p name from its text form, checked against type, bounds and validator.
 * @param[out] err reason on failure ("unknown option 'x'", "value 'y' of 'x': ...").
 * @return 0, -ENOENT (unknown option), -EINVAL (bad value), -ENOMEM. */
int srv_config_set(struct srv_config *c, const char *name, const char *value, char *err,
                   size_t errlen);
/** Format option @p o's value in @p c as text (the form srv_config_set accepts). */
void srv_config_format(const struct srv_config *c, const struct srv_config_opt *o, char *buf,
                       size_t buflen);

/** Parse `key = value` lines from @p text (named @p origin in errors). Blank
 * lines and lines starting with '#' are ignored; so is " # comment" after a
 * value. A value may be double-quoted to keep spaces or '#' ("\"" and "\\"
 * escape). Stops at the first error: "ORIGIN:LINE: reason".
 * @return 0, -ENOENT, -EINVAL, -ENOMEM. */
int srv_config_parse_text(struct srv_config *c, const char *text, const char *origin, char *err,
                          size_t errlen);
/** Read and parse file @p path. @return as srv_config_parse_text, or -errno opening it. */
int srv_config_load_file(struct srv_config *c, const char *path, char *err, size_t errlen);

/** The command line. Dedicated flags become (name, value) overrides. */
#define SRV_CLI_MAX_SETS 128
struct srv_cli {
    const char *config_path;
    bool check_config, help, version, dump_doc;
    bool reset_admin; /* --reset-admin: new admin token and bootstrap key, offline */
    bool check_store; /* --check-store: the store's consistency, offline */
    int nsets;
    const char *set_names[SRV_CLI_MAX_SETS];
    const char *set_values[SRV_CLI_MAX_SETS];
    char *owned[SRV_CLI_MAX_SETS]; /* storage of split --set items */
};
/** Parse argv. @return 0, -EINVAL (message in @p err). */
int srv_cli_parse(struct srv_cli *cli, int argc, char **argv, char *err, size_t errlen);
void srv_cli_free(struct srv_cli *cli);
/** Apply the command-line overrides to @p c. @return as srv_config_set. */
int srv_cli_apply(const struct srv_cli *cli, struct srv_config *c, char *err, size_t errlen);
/** Print --help (options and every table row) to @p f. */
void srv_cli_usage(FILE *f, const char *argv0);

/** Build the whole configuration: defaults, then cli->config_path (if any),
 * then the command-line overrides. @return 0 or an error with @p err set. */
int srv_config_build(struct srv_config *c, const struct srv_cli *cli, char *err, size_t errlen);

/** Copy every reloadable option that differs from @p fresh into @p live and
 * call @p changed(arg, opt, old, new) for each; non-reloadable differences are
 * reported through @p ignored (may be NULL) and left alone.
 * @return the number of options changed. */
typedef void (*srv_config_change_cb)(void *arg, const struct srv_config_opt *o, const char *old,
                                     const char *now);
int srv_config_reload(struct srv_config *live, const struct srv_config *fresh,
                      srv_config_change_cb changed, srv_config_change_cb ignored, void *arg);

/** Print every option as `name = value` lines (a valid config file). */
void srv_config_dump(const struct srv_config *c, FILE *f);
/** Print the option reference in Markdown (docs/configuration.md's table). */
void srv_config_doc_markdown(FILE *f);

#endif
