/* SPDX-License-Identifier: Apache-2.0
 * srv_config: values, the config file parser, the command line and reload,
 * all driven by srv_config_table[] (srv_config_table.c).
 *
 * A value is always set through srv_config_set(), which checks type, bounds
 * and the row's validator; defaults are applied the same way, so a bad
 * default is caught by the unit tests. Strings are heap copies owned by the
 * struct srv_config.
 * Thread: main thread only. */
#include "srv_config.h"
#include "srv_size.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define FIELD(c, o) ((void *)((char *)(c) + (o)->offset))
#define CFIELD(c, o) ((const void *)((const char *)(c) + (o)->offset))

static bool name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '-' ? '_' : (char)tolower((unsigned char)*a);
        char y = *b == '-' ? '_' : (char)tolower((unsigned char)*b);
        if (x != y)
            return false;
    }
    return *a == *b;
}

const struct srv_config_opt *srv_config_find(const char *name)
{
    for (size_t i = 0; i < srv_config_table_len; i++)
        if (name_eq(srv_config_table[i].name, name))
            return &srv_config_table[i];
    return NULL;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_int(const char *v, int64_t *out)
{
    char *end;
    if (!*v || isspace((unsigned char)*v))
        return -EINVAL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = x;
    return 0;
}

int srv_config_set(struct srv_config *c, const char *name, const char *value, char *err,
                   size_t errlen)
{
    const struct srv_config_opt *o = srv_config_find(name);
    if (!o) {
        snprintf(err, errlen, "unknown option '%s'", name);
        return -ENOENT;
    }
    switch (o->type) {
    case SRV_CFG_STRING: {
        if (o->check) {
            char why[200] = "";
            if (o->check(value, why, sizeof(why)) < 0) {
                snprintf(err, errlen, "bad value '%s' for %s: %s", value, o->name, why);
                return -EINVAL;
            }
        }
        char *copy = strdup(value);
        if (!copy) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        char **slot = FIELD(c, o);
        free(*slot);
        *slot = copy;
        return 0;
    }
    case SRV_CFG_BOOL: {
        bool b;
        if (parse_bool(value, &b) < 0) {
            snprintf(err, errlen, "bad value '%s' for %s: expected true or false", value,
                     o->name);
            return -EINVAL;
        }
        *(bool *)FIELD(c, o) = b;
        return 0;
    }
    case SRV_CFG_INT: {
        int64_t x;
        if (parse_int(value, &x) < 0) {
            snprintf(err, errlen, "bad value '%s' for %s: expected an integer", value, o->name);
            return -EINVAL;
        }
        if (x < o->min || x > o->max) {
            snprintf(err, errlen, "bad value '%s' for %s: must be between %" PRId64 " and %" PRId64,
                     value, o->name, o->min, o->max);
            return -EINVAL;
        }
        *(int64_t *)FIELD(c, o) = x;
        return 0;
    }
    case SRV_CFG_SIZE: {
        uint64_t x;
        if (srv_size_parse(value, &x) < 0) {
            snprintf(err, errlen,
                     "bad value '%s' for %s: expected a size such as 4096, 64KiB, 16MiB, 4GiB",
                     value, o->name);
            return -EINVAL;
        }
        if (x < (uint64_t)o->min || x > (uint64_t)o->max) {
            char lo[32], hi[32];
            srv_size_format((uint64_t)o->min, lo, sizeof(lo));
            srv_size_format((uint64_t)o->max, hi, sizeof(hi));
            snprintf(err, errlen, "bad value '%s' for %s: must be between %s and %s", value,
                     o->name, lo, hi);
            return -EINVAL;
        }
        *(uint64_t *)FIELD(c, o) = x;
        return 0;
    }
    }
    snprintf(err, errlen, "option '%s' has an unknown type", o->name);
    return -EINVAL;
}

void srv_config_format(const struct srv_config *c, const struct srv_config_opt *o, char *buf,
                       size_t buflen)
{
    switch (o->type) {
    case SRV_CFG_STRING: {
        const char *s = *(char *const *)CFIELD(c, o);
        snprintf(buf, buflen, "%s", s ? s : "");
        break;
    }
    case SRV_CFG_BOOL:
        snprintf(buf, buflen, "%s", *(const bool *)CFIELD(c, o) ? "true" : "false");
        break;
    case SRV_CFG_INT:
        snprintf(buf, buflen, "%" PRId64, *(const int64_t *)CFIELD(c, o));
        break;
    case SRV_CFG_SIZE:
        srv_size_format(*(const uint64_t *)CFIELD(c, o), buf, buflen);
        break;
    }
}

int srv_config_init(struct srv_config *c)
{
    char err[256];
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < srv_config_table_len; i++) {
        int rc = srv_config_set(c, srv_config_table[i].name, srv_config_table[i].def, err,
                                sizeof(err));
        if (rc < 0) {
            srv_config_free(c);
            return rc == -ENOMEM ? -ENOMEM : -EINVAL;
        }
    }
    return 0;
}

void srv_config_free(struct srv_config *c)
{
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        if (o->type == SRV_CFG_STRING) {
            char **slot = FIELD(c, o);
            free(*slot);
            *slot = NULL;
        }
    }
}

int srv_config_copy(struct srv_config *dst, const struct srv_config *src)
{
    *dst = *src;
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        if (o->type != SRV_CFG_STRING)
            continue;
        char **slot = FIELD(dst, o);
        if (*slot && !(*slot = strdup(*slot))) {
            /* Null out the rest so srv_config_free only frees our copies. */
            for (size_t j = i + 1; j < srv_config_table_len; j++)
                if (srv_config_table[j].type == SRV_CFG_STRING)
                    *(char **)FIELD(dst, &srv_config_table[j]) = NULL;
            srv_config_free(dst);
            return -ENOMEM;
        }
    }
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Unquote "..." in place (\" and \\ escapes); reject trailing text other than a comment. */
static int unquote(char *v, const char **why)
{
    char *w = v;
    char *r = v + 1;
    for (;;) {
        if (!*r) {
            *why = "unterminated quoted value";
            return -EINVAL;
        }
        if (*r == '"')
            break;
        if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
            r++;
        *w++ = *r++;
    }
    r++;
    while (*r == ' ' || *r == '\t')
        r++;
    if (*r && *r != '#') {
        *why = "text after the closing quote";
        return -EINVAL;
    }
    *w = '\0';
    return 0;
}

int srv_config_parse_text(struct srv_config *c, const char *text, const char *origin, char *err,
                          size_t errlen)
{
    int rc = 0;
    int lineno = 0;
    char *copy = strdup(text);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    char *p = copy;
    while (p) {
        char *line = p;
        char *nl = strchr(p, '\n');
        if (nl) {
            *nl = '\0';
            p = nl + 1;
        } else {
            p = NULL;
        }
        lineno++;
        line = trim(line);
        if (!*line || *line == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'name = value', got '%.60s'", origin, lineno,
                     line);
            rc = -EINVAL;
            goto out;
        }
        *eq = '\0';
        char *name = trim(line);
        char *value = trim(eq + 1);
        if (!*name) {
            snprintf(err, errlen, "%s:%d: missing option name before '='", origin, lineno);
            rc = -EINVAL;
            goto out;
        }
        if (*value == '"') {
            const char *why = NULL;
            if (unquote(value, &why) < 0) {
                snprintf(err, errlen, "%s:%d: %s: %s", origin, lineno, name, why);
                rc = -EINVAL;
                goto out;
            }
        } else {
            /* An unquoted value ends at " #" (a trailing comment). */
            for (char *h = value; *h; h++) {
                if (*h == '#' && h > value && (h[-1] == ' ' || h[-1] == '\t')) {
                    *h = '\0';
                    value = trim(value);
                    break;
                }
            }
        }
        char why[300];
        rc = srv_config_set(c, name, value, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "%s:%d: %s", origin, lineno, why);
            goto out;
        }
    }
out:
    free(copy);
    return rc;
}

int srv_config_load_file(struct srv_config *c, const char *path, char *err, size_t errlen)
{
    int rc;
    char *buf = NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return rc;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 1024 * 1024) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: not a regular file of at most 1 MiB", path);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "%s: read error", path);
        goto out;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: contains a NUL byte (not a text file)", path);
        goto out;
    }
    rc = srv_config_parse_text(c, buf, path, err, errlen);
out:
    free(buf);
    fclose(f);
    return rc;
}

/* ---- command line ---- */

enum {
    OPT_CONFIG = 256,
    OPT_CHECK,
    OPT_SET,
    OPT_DUMP_DOC,
    OPT_RESET_ADMIN,
    OPT_CHECK_STORE,
    OPT_SHORTCUT, /* OPT_SHORTCUT + i: cli_shortcuts[i] */
};

/* Dedicated flags that stand for one table option: "--data-dir DIR" is
 * "--set data_dir=DIR"; a flag with a fixed value takes no argument. */
static const struct cli_shortcut {
    const char *flag;   /* long option name */
    const char *option; /* srv_config_table name */
    const char *fixed;  /* the value set by a flag without argument, else NULL */
} cli_shortcuts[] = {
    {"data-dir", "data_dir", NULL},
    {"s3-listen", "s3_listen", NULL},
    {"nfs-listen", "nfs_listen", NULL},
    {"admin-listen", "admin_listen", NULL},
    {"log-level", "log_level", NULL},
    {"log-file", "log_file", NULL},
    {"foreground", "daemonize", "false"},
    {"daemon", "daemonize", "true"},
    {"pidfile", "pidfile", NULL},
};
#define NSHORTCUTS (sizeof(cli_shortcuts) / sizeof(cli_shortcuts[0]))

static const struct option other_opts[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"check-config", no_argument, NULL, OPT_CHECK},
    {"set", required_argument, NULL, OPT_SET},
    {"dump-config-doc", no_argument, NULL, OPT_DUMP_DOC},
    {"reset-admin", no_argument, NULL, OPT_RESET_ADMIN},
    {"check-store", no_argument, NULL, OPT_CHECK_STORE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* getopt's table: the shortcuts, then the other flags (with the terminator). */
static void long_opts_fill(struct option *o)
{
    for (size_t i = 0; i < NSHORTCUTS; i++)
        o[i] = (struct option){cli_shortcuts[i].flag,
                               cli_shortcuts[i].fixed ? no_argument : required_argument, NULL,
                               OPT_SHORTCUT + (int)i};
    memcpy(o + NSHORTCUTS, other_opts, sizeof(other_opts));
}

static int cli_add(struct srv_cli *cli, const char *name, const char *value, char *err,
                   size_t errlen)
{
    if (cli->nsets >= SRV_CLI_MAX_SETS) {
        snprintf(err, errlen, "too many overrides on the command line");
        return -EINVAL;
    }
    cli->set_names[cli->nsets] = name;
    cli->set_values[cli->nsets] = value;
    cli->nsets++;
    return 0;
}

int srv_cli_parse(struct srv_cli *cli, int argc, char **argv, char *err, size_t errlen)
{
    int rc = 0;
    memset(cli, 0, sizeof(*cli));
    optind = 1;
    opterr = 0;
    struct option long_opts[NSHORTCUTS + sizeof(other_opts) / sizeof(other_opts[0])];
    long_opts_fill(long_opts);
    for (;;) {
        int prev = optind;
        int ch = getopt_long(argc, argv, ":hV", long_opts, NULL);
        if (ch == -1)
            break;
        if (ch >= OPT_SHORTCUT && ch < OPT_SHORTCUT + (int)NSHORTCUTS) {
            const struct cli_shortcut *f = &cli_shortcuts[ch - OPT_SHORTCUT];
            rc = cli_add(cli, f->option, f->fixed ? f->fixed : optarg, err, errlen);
            if (rc < 0)
                return rc;
            continue;
        }
        switch (ch) {
        case OPT_CONFIG:
            cli->config_path = optarg;
            break;
        case OPT_CHECK:
            cli->check_config = true;
            break;
        case OPT_DUMP_DOC:
            cli->dump_doc = true;
            break;
        case OPT_RESET_ADMIN:
            cli->reset_admin = true;
            break;
        case OPT_CHECK_STORE:
            cli->check_store = true;
            break;
        case OPT_SET: {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                snprintf(err, errlen, "--set needs name=value, got '%s'", optarg);
                rc = -EINVAL;
                break;
            }
            if (cli->nsets >= SRV_CLI_MAX_SETS) {
                snprintf(err, errlen, "too many overrides on the command line");
                rc = -EINVAL;
                break;
            }
            char *name = strndup(optarg, (size_t)(eq - optarg));
            if (!name) {
                rc = -ENOMEM;
                break;
            }
            cli->owned[cli->nsets] = name;
            rc = cli_add(cli, name, eq + 1, err, errlen);
            break;
        }
        case 'h':
            cli->help = true;
            break;
        case 'V':
            cli->version = true;
            break;
        case ':':
            snprintf(err, errlen, "option '%s' needs a value", argv[prev]);
            rc = -EINVAL;
            break;
        default:
            snprintf(err, errlen, "unknown option '%s' (see --help)", argv[prev]);
            rc = -EINVAL;
            break;
        }
        if (rc < 0)
            return rc;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

void srv_cli_free(struct srv_cli *cli)
{
    for (int i = 0; i < SRV_CLI_MAX_SETS; i++) {
        free(cli->owned[i]);
        cli->owned[i] = NULL;
    }
}

int srv_cli_apply(const struct srv_cli *cli, struct srv_config *c, char *err, size_t errlen)
{
    for (int i = 0; i < cli->nsets; i++) {
        char why[300];
        int rc = srv_config_set(c, cli->set_names[i], cli->set_values[i], why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "command line: %s", why);
            return rc;
        }
    }
    return 0;
}

int srv_config_build(struct srv_config *c, const struct srv_cli *cli, char *err, size_t errlen)
{
    int rc = srv_config_init(c);
    if (rc < 0) {
        snprintf(err, errlen, "cannot set defaults: %s", strerror(-rc));
        return rc;
    }
    if (cli->config_path) {
        rc = srv_config_load_file(c, cli->config_path, err, errlen);
        if (rc < 0)
            goto fail;
    }
    rc = srv_cli_apply(cli, c, err, errlen);
    if (rc < 0)
        goto fail;
    static const char *const pairs[][2] = {{"s3_tls_cert", "s3_tls_key"},
                                           {"admin_tls_cert", "admin_tls_key"}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const char *cert = *(char **)((char *)c + srv_config_find(pairs[i][0])->offset);
        const char *key = *(char **)((char *)c + srv_config_find(pairs[i][1])->offset);
        if (!*cert != !*key) {
            snprintf(err, errlen, "%s is set but %s is not", *cert ? pairs[i][0] : pairs[i][1],
                     *cert ? pairs[i][1] : pairs[i][0]);
            rc = -EINVAL;
            goto fail;
        }
    }
    return 0;
fail:
    srv_config_free(c);
    return rc;
}

void srv_cli_usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: %s [OPTIONS]\n"
            "s3nfsd serves one namespace over S3 and NFSv3. With no options it runs on an\n"
            "embedded default (data in ./s3nfs-data, S3 on 127.0.0.1:9000, NFS on\n"
            "127.0.0.1:2049 as root or 127.0.0.1:20490 otherwise, admin on 127.0.0.1:9001).\n"
            "\n"
            "  --config FILE         read `name = value` options from FILE\n"
            "  --data-dir DIR        data_dir\n"
            "  --s3-listen ADDR:PORT s3_listen\n"
            "  --nfs-listen ADDR:PORT nfs_listen\n"
            "  --admin-listen ADDR:PORT admin_listen\n"
            "  --log-level SPEC      log_level (e.g. info or info,s3=debug)\n"
            "  --log-file FILE       log_file\n"
            "  --foreground          stay in the foreground (daemonize = false; default)\n"
            "  --daemon              detach (daemonize = true)\n"
            "  --pidfile FILE        pidfile\n"
            "  --set NAME=VALUE      set any option below\n"
            "  --check-config        validate the configuration, print it, and exit\n"
            "  --reset-admin         with the daemon stopped: make a new admin token and a\n"
            "                        new access key for the bootstrap admin, print them, exit\n"
            "  --check-store         with the daemon stopped: check the store's consistency\n"
            "                        (space, accounting, versions), print problems, exit 0/1\n"
            "  --help, --version\n"
            "\n"
            "Environment: S3NFS_ACCESS_KEY, S3NFS_SECRET_KEY (bootstrap S3 credentials),\n"
            "S3NFS_ADMIN_TOKEN (admin API bearer token); generated on first start if unset\n"
            "and printed once (never when given here). NOTIFY_SOCKET (systemd Type=notify).\n"
            "\nOptions (name = default):\n",
            argv0);
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        fprintf(f, "  %-22s = %-16s%s\n", o->name, *o->def ? o->def : "\"\"",
                (o->flags & SRV_CFG_RELOADABLE) ? " (reloadable)" : "");
    }
    fprintf(f, "\nSee docs/configuration.md for what each option does.\n");
}

int srv_config_reload(struct srv_config *live, const struct srv_config *fresh,
                      srv_config_change_cb changed, srv_config_change_cb ignored, void *arg)
{
    int n = 0;
    char old[1024], now[1024], err[256];
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        srv_config_format(live, o, old, sizeof(old));
        srv_config_format(fresh, o, now, sizeof(now));
        if (strcmp(old, now) == 0)
            continue;
        if (!(o->flags & SRV_CFG_RELOADABLE)) {
            if (ignored)
                ignored(arg, o, old, now);
            continue;
        }
        if (srv_config_set(live, o->name, now, err, sizeof(err)) < 0)
            continue;
        n++;
        if (changed)
            changed(arg, o, old, now);
    }
    return n;
}

static const char *type_name(enum srv_cfg_type t)
{
    switch (t) {
    case SRV_CFG_STRING:
        return "string";
    case SRV_CFG_BOOL:
        return "bool";
    case SRV_CFG_INT:
        return "integer";
    case SRV_CFG_SIZE:
        return "size";
    }
    return "?";
}

static bool needs_quotes(const char *s)
{
    if (!*s)
        return true;
    if (s[0] == ' ' || s[0] == '"' || s[strlen(s) - 1] == ' ')
        return true;
    return strchr(s, '#') != NULL;
}

void srv_config_dump(const struct srv_config *c, FILE *f)
{
    char v[1024];
    for (size_t i = 0; i < srv_config_table_len; i++) {
        srv_config_format(c, &srv_config_table[i], v, sizeof(v));
        if (needs_quotes(v)) {
            fprintf(f, "%s = \"", srv_config_table[i].name);
            for (const char *p = v; *p; p++) {
                if (*p == '"' || *p == '\\')
                    fputc('\\', f);
                fputc(*p, f);
            }
            fprintf(f, "\"\n");
        } else {
            fprintf(f, "%s = %s\n", srv_config_table[i].name, v);
        }
    }
}

void srv_config_doc_markdown(FILE *f)
{
    fprintf(f, "| name | type | default | range | reload | meaning |\n");
    fprintf(f, "| --- | --- | --- | --- | --- | --- |\n");
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        char range[80] = "";
        if (o->type == SRV_CFG_INT) {
            snprintf(range, sizeof(range), "%" PRId64 "..%" PRId64, o->min, o->max);
        } else if (o->type == SRV_CFG_SIZE) {
            char lo[32], hi[32];
            srv_size_format((uint64_t)o->min, lo, sizeof(lo));
            srv_size_format((uint64_t)o->max, hi, sizeof(hi));
            snprintf(range, sizeof(range), "%s..%s", lo, hi);
        }
        fprintf(f, "| `%s` | %s | `%s` | %s | %s | %s |\n", o->name, type_name(o->type),
                *o->def ? o->def : "\"\"", range, (o->flags & SRV_CFG_RELOADABLE) ? "yes" : "no",
                o->help);
    }
}
