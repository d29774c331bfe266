/* SPDX-License-Identifier: Apache-2.0
 * s3nfsctl: a thin command-line client of the admin REST API (docs/admin-api.md).
 *
 * Every command is one HTTP/1.1 request (libcurl: http or https, certificate
 * checks, proxies from the environment, timeouts) to the admin listener with
 * the bearer token or a SigV4 signature; the JSON answer is printed as a table
 * or field lines (indented JSON with --json). Tenants may be named by id or by
 * name. Exit status: 0 success, 1 the server refused (its error printed on
 * stderr) or could not be reached, 2 bad usage.
 * Thread: single-threaded program. */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "srv_sigv4.h"
#include "srv_size.h"

#ifndef S3NFS_VERSION
#define S3NFS_VERSION "dev"
#endif

static char host[256] = "127.0.0.1";
static char port[8] = "9001";
static bool https;           /* --admin https://...: TLS to the admin listener */
static const char *ca_file;  /* --ca / S3NFS_ADMIN_CA: trust this CA bundle */
static bool insecure;        /* --insecure: do not check the listener's certificate */
static const char *token;
static const char *akey, *skey; /* SigV4 instead of the token (an admin user's key) */

/* Every command: its subcommands (space-separated; "" = none) and its lines of
 * the usage. A mistyped word is answered with the closest name and only its
 * command's lines. */
static const struct cmd_doc {
    const char *name;
    const char *subs;
    const char *lines;
} cmd_docs[] = {
    {"health", "", "  health                      GET /healthz (no credentials)\n"},
    {"metrics", "", "  metrics                     GET /metrics (Prometheus text)\n"},
    {"whoami", "", "  whoami                      who the credentials are\n"},
    {"tenant", "list create get rename delete",
     "  tenant list | create NAME | get T | rename T NAME | delete T\n"},
    {"user", "list get delete create update",
     "  user list T | get T USER | delete T USER\n"
     "  user create T NAME [--uid N] [--gid N] [--gids N,N] [--tenant-admin]\n"
     "  user update T USER [--uid N] [--gid N] [--gids N,N] [--disable|--enable]\n"},
    {"key", "create list get disable enable delete",
     "  key create T USER | list T [--user USER] | get AKEY | disable AKEY | enable AKEY\n"
     "      | delete AKEY          (rotate: create a new key, then disable/delete the old)\n"},
    {"export", "list get delete create update",
     "  export list T | get ID | delete ID\n"
     "  export create T PATH --clients NET[,NET] [--source BUCKET[/DIR]] [--ro]\n"
     "                [--root-squash] [--all-squash] [--anon-uid N] [--anon-gid N]\n"
     "  export update ID [--path PATH] [--clients NET[,NET]] [--ro|--rw]\n"
     "                [--root-squash|--no-root-squash] [--all-squash|--no-all-squash]\n"
     "                [--anon-uid N] [--anon-gid N]\n"},
    {"bucket", "list", "  bucket list T                 buckets with usage and quotas\n"},
    {"usage", "", "  usage T [BUCKET [--dir PATH]]\n"},
    {"quota", "get delete set",
     "  quota get|delete T [BUCKET [--dir PATH]]\n"
     "  quota set T [BUCKET [--dir PATH]] [--bytes SIZE] [--inodes N]\n"},
    {"qos", "get delete set list system",
     "  qos get|delete T [BUCKET [--dir PATH] | --user USER | --nfs-default]\n"
     "  qos set T [BUCKET [--dir PATH] | --user USER | --nfs-default]\n"
     "            [--read-bps SIZE] [--write-bps SIZE] [--read-iops N] [--write-iops N]\n"
     "            [--meta-iops N] [--burst-ms N] [--min-read-bps SIZE]\n"
     "            [--min-write-bps SIZE] [--min-iops N] [--weight N]\n"
     "  qos list T                  every policy of the tenant, at every level\n"
     "  qos system get|reset        the system class (background work; system admin)\n"
     "  qos system set [--read-bps SIZE] [--write-bps SIZE] [--read-iops N]\n"
     "            [--write-iops N] [--meta-iops N] [--burst-ms N] [--weight N]\n"},
    {"remote", "list get delete create update",
     "  remote list [--tenant T] | get ID | delete ID\n"
     "  remote create NAME --endpoint URL --bucket B --key-id AKEY [--tenant T]\n"
     "                [--region R] [--prefix P] [--virtual-host] [--ca-file FILE]\n"
     "                [--no-verify] [--max-conns N] [--parallel N] [--connect-timeout-ms N]\n"
     "      (the secret key: --secret-file FILE, '-' for stdin, or S3NFS_REMOTE_SECRET_KEY)\n"
     "  remote update ID [--key-id AKEY] [--secret-file FILE] [--max-conns N]\n"
     "                [--parallel N] [--connect-timeout-ms N]   (checked again; a new\n"
     "      --key-id takes its secret as create does)\n"},
    {"tier", "get delete set flush",
     "  tier get T BUCKET | delete T BUCKET   (get: the policy and pending uploads)\n"
     "  tier set T BUCKET --remote ID|NAME [--upload-after SECONDS] [--evict-after SECONDS]\n"
     "                [--evict-watermark HIGH:LOW] [--pin-prefixes P1,P2,...]\n"
     "                [--storage-class STANDARD_IA|ONEZONE_IA|INTELLIGENT_TIERING|\n"
     "                GLACIER_IR|GLACIER|DEEP_ARCHIVE]   (the class lifecycle Transitions\n"
     "                name; default STANDARD_IA)\n"
     "  tier get|delete T BUCKET --dir PATH   a directory's policy\n"
     "  tier set T BUCKET --dir PATH [--upload-after S] [--evict-after S]\n"
     "                [--keep-local | --no-keep-local] [KNOBS]\n"
     "      KNOBS (bucket or directory): [--preset NONE|MODEL_CHECKPOINT_RO|\n"
     "                MODEL_CHECKPOINT_RW|DATASET_RO|DATASET_RW] [--read-only | --writable]\n"
     "                [--evict-priority low|normal|high] [--read-ahead SIZE] [--streams N]\n"
     "                [--chunk-size SIZE] [--whole-file | --no-whole-file]\n"
     "                [--dir-prefetch | --no-dir-prefetch] [--dirty-bound SIZE]\n"
     "  tier flush T BUCKET [--timeout SECONDS]   wait until everything written before\n"
     "      now is uploaded (default 300 s; exit 1 on timeout, saying what is left)\n"},
    {"cache", "get delete set",
     "  cache get T BUCKET | delete T BUCKET   (a bucket fronting its tier policy's remote)\n"
     "  cache set T BUCKET [--ttl SECONDS] [--read-only|--read-write] [--dirty-max SIZE]\n"
     "      (default ttl 30; 0: always ask the remote; the bucket needs a tier policy:\n"
     "      `tier set` first; --dirty-max: bytes written and not uploaded before writers\n"
     "      are held, 0: no bound)\n"},
    {"api", "", "  api METHOD PATH [JSON]      raw request, PATH under /api/v1\n"},
};
#define NCMDS (sizeof(cmd_docs) / sizeof(cmd_docs[0]))
#define WORDS_HELP                                                                                 \
    "T is a tenant id or name; USER is a user's id (the ID column of `user list`, not its\n"       \
    "POSIX --uid) or name; SIZE takes K, M, G, T suffixes (1024-based).\n"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: s3nfsctl [--admin HOST:PORT|URL] [--ca FILE] [--insecure]\n"
            "                [--token TOKEN | --access-key AKEY --secret-key SECRET]\n"
            "                [--json] COMMAND ...\n"
            "Environment: S3NFS_ADMIN (default 127.0.0.1:9001; https://HOST:PORT for TLS),\n"
            "             S3NFS_ADMIN_CA (CA file that signed the listener's certificate),\n"
            "             S3NFS_ADMIN_TOKEN, S3NFS_ADMIN_ACCESS_KEY, S3NFS_ADMIN_SECRET_KEY\n"
            "             (SigV4, for admin users; a key takes precedence over the token).\n"
            "HTTPS certificates are checked against the system CAs or --ca; --insecure skips\n"
            "the check (test setups only).\n"
            "Answers print as tables (lists) or field/value lines; --json prints the API's JSON.\n"
            "\n");
    for (size_t i = 0; i < NCMDS; i++)
        fputs(cmd_docs[i].lines, f);
    fputs(WORDS_HELP, f);
}

static const struct cmd_doc *cmd_doc_find(const char *name)
{
    for (size_t i = 0; name && i < NCMDS; i++)
        if (strcmp(cmd_docs[i].name, name) == 0)
            return &cmd_docs[i];
    return NULL;
}

/* Edit distance (insertions, deletions, substitutions) of two short words. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[65];
    if (la > 64 || lb > 64)
        return 64;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Print " (did you mean 'X'?)" for the word of @p words ("a b c", or every
 * command name when NULL) closest to @p typo, if one is close enough. */
static void suggest(FILE *f, const char *words, const char *typo)
{
    char best[32] = "";
    size_t bestd = 3 + strlen(typo) / 4;
    for (size_t i = 0; words ? *words : i < NCMDS; i++) {
        char w[32];
        if (words) {
            size_t l = strcspn(words, " ");
            snprintf(w, sizeof(w), "%.*s", (int)l, words);
            words += l + (words[l] == ' ');
        } else {
            snprintf(w, sizeof(w), "%s", cmd_docs[i].name);
        }
        size_t dist = edit_distance(typo, w);
        if (dist < bestd) {
            bestd = dist;
            snprintf(best, sizeof(best), "%s", w);
        }
    }
    if (*best)
        fprintf(f, " (did you mean '%s'?)", best);
}

static bool word_in(const char *words, const char *w)
{
    size_t l = strlen(w);
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        if (n == l && strncmp(p, w, l) == 0)
            return true;
        p += n + (p[n] == ' ');
    }
    return false;
}

static const char *cur_cmd; /* the command being run, and its first argument */
static const char *cur_sub;

/* Say what was wrong with the command line (naming a mistyped subcommand and
 * the closest one) and print that command's usage on stderr.
 * @return 2, the exit status of bad usage. */
static int bad_usage(void)
{
    const struct cmd_doc *c = cmd_doc_find(cur_cmd);
    if (!c) {
        usage(stderr);
        return 2;
    }
    if (*c->subs && !cur_sub) {
        fprintf(stderr, "s3nfsctl: %s needs a subcommand: %s\n", c->name, c->subs);
    } else if (*c->subs && !word_in(c->subs, cur_sub)) {
        fprintf(stderr, "s3nfsctl: %s has no subcommand '%s'", c->name, cur_sub);
        suggest(stderr, c->subs, cur_sub);
        fputc('\n', stderr);
    } else {
        fprintf(stderr, "s3nfsctl: wrong arguments for '%s%s%s'\n", c->name,
                *c->subs ? " " : "", *c->subs ? cur_sub : "");
    }
    fprintf(stderr, "Usage:\n%s" WORDS_HELP "(s3nfsctl --help shows every command.)\n",
            c->lines);
    return 2;
}

/* An unknown command: name it, suggest the closest, list the commands. */
static int unknown_command(const char *cmd)
{
    fprintf(stderr, "s3nfsctl: unknown command '%s'", cmd);
    suggest(stderr, NULL, cmd);
    fprintf(stderr, "\nUsage: s3nfsctl [OPTIONS] COMMAND ...   commands:");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(stderr, " %s", cmd_docs[i].name);
    fprintf(stderr, "\n(s3nfsctl --help shows every command and option.)\n");
    return 2;
}

static void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "s3nfsctl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(code);
}

static int set_admin(const char *s)
{
    const char *p = s;
    https = false;
    if (strncmp(p, "http://", 7) == 0) {
        p += 7;
    } else if (strncmp(p, "https://", 8) == 0) {
        p += 8;
        https = true;
    } else if (strstr(p, "://")) {
        return -1;
    }
    const char *colon;
    size_t hl;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close || close[1] != ':')
            return -1;
        hl = (size_t)(close - p - 1);
        if (hl >= sizeof(host))
            return -1;
        memcpy(host, p + 1, hl);
        colon = close + 1;
    } else {
        colon = strrchr(p, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - p);
        if (hl >= sizeof(host))
            return -1;
        memcpy(host, p, hl);
    }
    host[hl] = '\0';
    const char *ps = colon + 1;
    size_t pl = strcspn(ps, "/");
    if (pl == 0 || pl >= sizeof(port) || strspn(ps, "0123456789") < pl)
        return -1;
    memcpy(port, ps, pl);
    port[pl] = '\0';
    if (!*host)
        strcpy(host, "127.0.0.1");
    return 0;
}

/* ---- SigV4 (header form, signed payload) for --access-key/--secret-key ---- */

#define ADMIN_REGION "us-east-1"
#define ADMIN_SERVICE "s3nfs-admin"

/* Append one formatted header line to @p h. */
static struct curl_slist *add_header(struct curl_slist *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static struct curl_slist *add_header(struct curl_slist *h, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line))
        die(1, "header too long");
    struct curl_slist *nh = curl_slist_append(h, line);
    if (!nh)
        die(1, "out of memory");
    return nh;
}

/* Add the Authorization, x-amz-date and x-amz-content-sha256 headers for a
 * request to @p h (our queries hold no '%', so they need no decoding first). */
static struct curl_slist *sigv4_headers(struct curl_slist *h, const char *method,
                                        const char *path, const char *hosthdr, const char *body,
                                        size_t blen)
{
    char date[17], day[9], bh[65], sig[65], scope[64];
    uint8_t k[32];
    srv_sigv4_date_format(time(NULL), date);
    memcpy(day, date, 8);
    day[8] = '\0';
    srv_sigv4_sha256_hex(body ? body : "", blen, bh);

    const char *q = strchr(path, '?');
    struct srv_sigv4_kv query[16];
    size_t nq = 0;
    for (const char *t = q ? q + 1 : NULL; t && *t && nq < 16;) {
        size_t len = strcspn(t, "&");
        const char *eq = memchr(t, '=', len);
        size_t kl = eq ? (size_t)(eq - t) : len;
        if (len)
            query[nq++] = (struct srv_sigv4_kv){t, kl, eq ? eq + 1 : "", eq ? len - kl - 1 : 0};
        t += len + (t[len] == '&');
    }
    char *uri = strndup(path, q ? (size_t)(q - path) : strlen(path));
    const struct srv_sigv4_kv hdrs[] = {
        {"host", 4, hosthdr, strlen(hosthdr)},
        {"x-amz-content-sha256", 20, bh, 64},
        {"x-amz-date", 10, date, 16},
    };
    struct srv_sigv4_req r = {
        .method = method,
        .uri = uri,
        .query = query,
        .nquery = nq,
        .hdrs = hdrs,
        .nhdrs = 3,
        .signed_headers = "host;x-amz-content-sha256;x-amz-date",
        .payload_hash = bh,
    };
    char *creq = NULL, *out = NULL;
    if (!uri || srv_sigv4_canonical(&r, &creq) < 0)
        die(1, "out of memory");
    snprintf(scope, sizeof(scope), "%s/" ADMIN_REGION "/" ADMIN_SERVICE "/aws4_request", day);
    srv_sigv4_key(skey, day, ADMIN_REGION, ADMIN_SERVICE, k);
    srv_sigv4_sign(k, date, scope, creq, sig);
    memset(k, 0, sizeof(k));
    if (asprintf(&out,
                 "Authorization: " SRV_SIGV4_ALGORITHM " Credential=%s/%s, "
                 "SignedHeaders=%s, Signature=%s",
                 akey, scope, r.signed_headers, sig) < 0)
        die(1, "out of memory");
    h = add_header(h, "%s", out);
    h = add_header(h, "x-amz-date: %s", date);
    h = add_header(h, "x-amz-content-sha256: %s", bh);
    free(out);
    free(uri);
    free(creq);
    return h;
}

static bool json_out;         /* --json: print the API's JSON instead of tables */
static char next_marker[256]; /* X-Next-Marker of the last answer ("" if none) */

/* An answer body growing as libcurl hands it over. */
struct answer {
    char *buf;
    size_t len, cap;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct answer *a = arg;
    size_t len = size * n;
    if (a->len + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 65536;
        while (cap < a->len + len + 1)
            cap *= 2;
        char *nb = realloc(a->buf, cap);
        if (!nb)
            return 0; /* libcurl fails the transfer: CURLE_WRITE_ERROR */
        a->buf = nb;
        a->cap = cap;
    }
    memcpy(a->buf + a->len, data, len);
    a->len += len;
    a->buf[a->len] = '\0';
    return len;
}

/* Keep the X-Next-Marker header (list pages) of the answer. */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    static const char name[] = "X-Next-Marker:";
    size_t len = size * n;
    if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
        const char *v = data + sizeof(name) - 1;
        size_t vl = len - (sizeof(name) - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl >= sizeof(next_marker))
            vl = sizeof(next_marker) - 1;
        memcpy(next_marker, v, vl);
        next_marker[vl] = '\0';
    }
    return len;
}

/* Exit 1 with words for a transfer that failed (@p rc, libcurl's @p detail). */
static void transfer_failed(CURLcode rc, const char *url, const char *detail)
{
    const char *d = *detail ? detail : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
        die(1, "cannot resolve %s: %s", host, d);
        break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
        die(1, "cannot connect to the admin listener at %s: %s", url, d);
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
#if LIBCURL_VERSION_NUM < 0x073e00
    case CURLE_SSL_CACERT:
#endif
    case CURLE_SSL_CACERT_BADFILE:
        die(1, "cannot verify the TLS certificate of %s: %s\n"
               "  give the CA that signed it with --ca FILE (or S3NFS_ADMIN_CA), or --insecure "
               "to skip the check (test setups only)",
            url, d);
        break;
    case CURLE_SSL_CONNECT_ERROR:
        die(1, "TLS handshake with %s failed: %s (is the listener plain HTTP? then use "
               "http://)",
            url, d);
        break;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
        die(1, "no HTTP answer from %s: %s%s", url, d,
            https ? "" : " (is the admin listener HTTPS? then use --admin https://HOST:PORT)");
        break;
    default:
        die(1, "request to %s failed: %s", url, d);
    }
}

/* One request; returns the status, the body in *body (heap, NUL-terminated). */
static int http(const char *method, const char *path, const char *json, char **body)
{
    static CURL *curl;
    char url[600], hosthdr[300], detail[CURL_ERROR_SIZE] = "";
    struct answer ans = {NULL, 0, 0};
    struct curl_slist *h = NULL;
    size_t blen = json ? strlen(json) : 0;

    if (!curl && !(curl = curl_easy_init()))
        die(1, "cannot initialise libcurl");
    curl_easy_reset(curl);
    snprintf(hosthdr, sizeof(hosthdr), strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    snprintf(url, sizeof(url), "%s://%s%s", https ? "https" : "http", hosthdr, path);
    next_marker[0] = '\0';

    /* The Host header is given, not derived, so it is the one SigV4 signed. */
    h = add_header(h, "Host: %s", hosthdr);
    h = add_header(h, "Content-Type: application/json");
    h = add_header(h, "Expect:");
    if (akey && strcmp(path, "/healthz") != 0)
        h = sigv4_headers(h, method, path, hosthdr, json, blen);
    else if (token)
        h = add_header(h, "Authorization: Bearer %s", token);

    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json ? json : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "s3nfsctl/" S3NFS_VERSION);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ans);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 120L);
    if (ca_file)
        curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);
    if (insecure) {
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode rc = curl_easy_perform(curl);
    curl_slist_free_all(h);
    if (rc != CURLE_OK) {
        free(ans.buf);
        transfer_failed(rc, url, detail);
    }
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    *body = ans.buf ? ans.buf : strdup("");
    if (!*body)
        die(1, "out of memory");
    return (int)status;
}

/* ---- output: tables (default) or --json ---- */

static void cell(json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
    } else if (json_is_array(v)) {
        size_t i, off = 0;
        json_t *x;
        buf[0] = '\0';
        if (json_array_size(v) == 0)
            snprintf(buf, len, "-");
        json_array_foreach(v, i, x)
        {
            char c[128];
            cell(x, c, sizeof(c));
            int n = snprintf(buf + off, len - off, "%s%s", i ? "," : "", c);
            if (n < 0 || (size_t)n >= len - off)
                break;
            off += (size_t)n;
        }
    } else if (json_is_null(v) || !v) {
        snprintf(buf, len, "-");
    } else {
        char *d = json_dumps(v, JSON_COMPACT);
        snprintf(buf, len, "%s", d ? d : "?");
        free(d);
    }
}

/* An object with its nested objects' fields lifted to the top (bucket usage). */
static json_t *flat(json_t *o)
{
    json_t *f = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) json_object_set(f, k2, v2);
        } else {
            json_object_set(f, k, v);
        }
    }
    return f;
}

#define COLS_MAX 24
#define CELL_MAX 256

static void table(json_t *arr)
{
    size_t n = json_array_size(arr), ncol = 0, i;
    const char *cols[COLS_MAX];
    size_t w[COLS_MAX];
    if (n == 0) {
        printf("(none)\n");
        return;
    }
    json_t **rows = calloc(n, sizeof(*rows));
    if (!rows)
        die(1, "out of memory");
    for (i = 0; i < n; i++)
        rows[i] = flat(json_array_get(arr, i));
    const char *k;
    json_t *v;
    json_object_foreach(rows[0], k, v)
    {
        if (ncol == COLS_MAX)
            break;
        cols[ncol] = k;
        w[ncol++] = strlen(k);
    }
    char c[CELL_MAX];
    for (i = 0; i < n; i++)
        for (size_t j = 0; j < ncol; j++) {
            cell(json_object_get(rows[i], cols[j]), c, sizeof(c));
            if (strlen(c) > w[j])
                w[j] = strlen(c);
        }
    for (size_t j = 0; j < ncol; j++) {
        for (const char *p = cols[j]; *p; p++)
            putchar(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        printf("%*s", j + 1 < ncol ? (int)(w[j] - strlen(cols[j]) + 2) : 0, "");
    }
    putchar('\n');
    for (i = 0; i < n; i++) {
        for (size_t j = 0; j < ncol; j++) {
            cell(json_object_get(rows[i], cols[j]), c, sizeof(c));
            if (j + 1 < ncol)
                printf("%-*s  ", (int)w[j], c);
            else
                printf("%s", c);
        }
        putchar('\n');
    }
    for (i = 0; i < n; i++)
        json_decref(rows[i]);
    free(rows);
}

/* Print an answer: --json as is (indented); else a table for a list, and
 * "field  value" lines for one object. */
static void show(json_t *j, int status)
{
    if (!j) {
        if (!json_out && status == 204)
            printf("done\n");
        return;
    }
    if (json_out) {
        char *pretty = json_dumps(j, JSON_INDENT(2));
        printf("%s\n", pretty ? pretty : "");
        free(pretty);
        return;
    }
    if (json_is_array(j)) {
        table(j);
        return;
    }
    if (!json_is_object(j)) {
        char c[CELL_MAX];
        cell(j, c, sizeof(c));
        printf("%s\n", c);
        return;
    }
    json_t *f = flat(j);
    const char *k;
    json_t *v;
    size_t w = 0;
    json_object_foreach(f, k, v) if (strlen(k) > w) w = strlen(k);
    json_object_foreach(f, k, v)
    {
        char c[CELL_MAX];
        cell(v, c, sizeof(c));
        printf("%-*s  %s\n", (int)w, k, c);
    }
    if (json_object_get(f, "secret_key"))
        printf("(the secret key is shown only now: store it)\n");
    json_decref(f);
}

/* Print the answer; on an error status print its message and exit 1. */
static json_t *call(const char *method, const char *path, json_t *body, bool print)
{
    char full[2048];
    snprintf(full, sizeof(full), "/api/v1%s", path);
    char *js = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char *out = NULL;
    int status = http(method, full, js, &out);
    free(js);
    json_error_t e;
    json_t *j = *out ? json_loads(out, 0, &e) : NULL;
    if (status >= 400) {
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
        const char *code = j ? json_string_value(json_object_get(j, "error")) : NULL;
        fprintf(stderr, "s3nfsctl: %s %s: %d %s: %s\n", method, path, status,
                code ? code : "Error", msg ? msg : out);
        exit(1);
    }
    if (print)
        show(j, status);
    free(out);
    return j;
}

/* Every page of a list (follows X-Next-Marker). */
static json_t *call_list(const char *path, bool print)
{
    json_t *all = json_array();
    char p[1024], marker[256] = "";
    for (;;) {
        snprintf(p, sizeof(p), "%s%slimit=1000%s%s", path, strchr(path, '?') ? "&" : "?",
                 *marker ? "&marker=" : "", marker);
        json_t *page = call("GET", p, NULL, false);
        if (json_is_array(page))
            json_array_extend(all, page);
        json_decref(page);
        if (!*next_marker || strcmp(next_marker, marker) == 0)
            break;
        snprintf(marker, sizeof(marker), "%s", next_marker);
    }
    if (print)
        show(all, 200);
    return all;
}

/* A number argument; with @p sizes, a SIZE (srv_size_parse: K, M, G, T suffixes). */
static uint64_t parse_num(const char *s, bool sizes)
{
    char *end;
    if (!s || !*s || *s == '-')
        die(2, "expected a number, got '%s'", s ? s : "");
    if (sizes) {
        uint64_t v;
        int rc = srv_size_parse(s, &v);
        if (rc == -ERANGE)
            die(2, "number out of range: '%s'", s);
        if (rc < 0)
            die(2, "bad size '%s'", s);
        return v;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        die(2, "expected a number, got '%s'", s);
    if (errno)
        die(2, "number out of range: '%s'", s);
    return (uint64_t)v;
}

/* The id of @p s, a number or the name of an item of the list at @p path;
 * exits 1 naming what was not found (@p what, "tenant" / "user"). */
static uint64_t id_or_name(const char *s, const char *path, const char *what)
{
    if (s && *s && strspn(s, "0123456789") == strlen(s))
        return parse_num(s, false);
    json_t *arr = call_list(path, false);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (name && strcmp(name, s) == 0) {
            uint64_t id = (uint64_t)json_integer_value(json_object_get(v, "id"));
            json_decref(arr);
            return id;
        }
    }
    die(1, "no %s named '%s'%s", what, s, strcmp(what, "user") == 0 ? " in this tenant" : "");
    return 0;
}

/* Tenant id from an id or a name. */
static uint64_t tenant_id(const char *t)
{
    return id_or_name(t, "/tenants", "tenant");
}

/* User id from an id or a name, within tenant @p t. */
static uint64_t user_id(uint64_t t, const char *u)
{
    char p[64];
    snprintf(p, sizeof(p), "/tenants/%" PRIu64 "/users", t);
    return id_or_name(u, p, "user");
}

/* "a,b,c" as a JSON array of strings, or of integers with @p numbers. */
static json_t *list_array(const char *s, bool numbers)
{
    json_t *a = json_array();
    char *copy = strdup(s), *save = NULL;
    if (!a || !copy)
        die(1, "out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        json_array_append_new(a, numbers ? json_integer((json_int_t)parse_num(tok, false))
                                         : json_string(tok));
    free(copy);
    return a;
}

#define NEED(n)                                                                                    \
    do {                                                                                           \
        if (argc < (n))                                                                            \
            exit(bad_usage());                                                                     \
    } while (0)

/* A flag after the positional arguments, and the body field it sets. */
enum opt_kind {
    OPT_NUM,   /* --flag N: integer field */
    OPT_SIZE,  /* --flag SIZE: integer field, K/M/G/T suffixes allowed */
    OPT_TRUE,  /* --flag: the field is true */
    OPT_FALSE, /* --flag: the field is false */
    OPT_STR,   /* --flag TEXT: string field */
    OPT_NETS,  /* --flag NET[,NET]: array of strings */
    OPT_GIDS,  /* --flag N[,N]: array of integers */
    OPT_ARG,   /* --flag VALUE: no field, the command reads it itself */
};

#define FOR_CREATE 0x1 /* the flag sets its field in a create */
#define FOR_UPDATE 0x2 /* the flag sets its field in an update (or a set) */
#define FOR_ALL (FOR_CREATE | FOR_UPDATE)

/* One table per resource: every flag its commands accept (each accepts all of
 * them), and which of them sets the field. */
struct opt {
    const char *name;  /* "--uid" */
    const char *field; /* "uid" (NULL for OPT_ARG) */
    enum opt_kind kind;
    unsigned used;     /* FOR_* */
};

static bool opt_has_value(const struct opt *o)
{
    return o->kind != OPT_TRUE && o->kind != OPT_FALSE;
}

/* Flags after the positional arguments: --name VALUE or --switch. */
static const char *flag(int argc, char **argv, int from, const char *name, bool has_value)
{
    for (int i = from; i < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            if (!has_value)
                return "";
            if (i + 1 >= argc)
                die(2, "%s needs a value", name);
            return argv[i + 1];
        }
    }
    return NULL;
}

/* Exit 2 on an argument from @p from on that is not a flag of @p opts. */
static void check_flags(int argc, char **argv, int from, const struct opt *opts)
{
    for (int i = from; i < argc; i++) {
        const struct opt *found = NULL;
        for (const struct opt *o = opts; o->name && !found; o++)
            if (strcmp(argv[i], o->name) == 0)
                found = o;
        if (!found)
            die(2, "unexpected argument '%s' (see --help)", argv[i]);
        if (opt_has_value(found))
            i++;
    }
}

/* Set in @p body the field of every flag of @p opts used @p what (FOR_CREATE,
 * FOR_UPDATE) that is given from argv[from] on. */
static void set_fields(json_t *body, int argc, char **argv, int from, const struct opt *opts,
                       unsigned what)
{
    for (const struct opt *o = opts; o->name; o++) {
        bool use = o->field && (o->used & what);
        const char *v = use ? flag(argc, argv, from, o->name, opt_has_value(o)) : NULL;
        if (!v)
            continue;
        json_t *j = NULL;
        switch (o->kind) {
        case OPT_NUM:
        case OPT_SIZE:
            j = json_integer((json_int_t)parse_num(v, o->kind == OPT_SIZE));
            break;
        case OPT_TRUE:
        case OPT_FALSE:
            j = json_boolean(o->kind == OPT_TRUE);
            break;
        case OPT_STR:
            j = json_string(v);
            break;
        case OPT_NETS:
        case OPT_GIDS:
            j = list_array(v, o->kind == OPT_GIDS);
            break;
        case OPT_ARG:
            break;
        }
        json_object_set_new(body, o->field, j);
    }
}

/* One request to the API path formatted from @p fmt; the answer is printed. */
static void api(const char *method, json_t *body, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void api(const char *method, json_t *body, const char *fmt, ...)
{
    char p[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof(p), fmt, ap);
    va_end(ap);
    json_decref(call(method, p, body, true));
}

/* Every page of the list at the path formatted from @p fmt, printed. */
static void api_list(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void api_list(const char *fmt, ...)
{
    char p[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof(p), fmt, ap);
    va_end(ap);
    json_decref(call_list(p, true));
}

static int cmd_tenant(int argc, char **argv)
{
    NEED(1);
    if (strcmp(argv[0], "list") == 0)
        api_list("/tenants");
    else if (strcmp(argv[0], "create") == 0 && argc == 2)
        api("POST", json_pack("{s:s}", "name", argv[1]), "/tenants");
    else if (strcmp(argv[0], "get") == 0 && argc == 2)
        api("GET", NULL, "/tenants/%" PRIu64, tenant_id(argv[1]));
    else if (strcmp(argv[0], "delete") == 0 && argc == 2)
        api("DELETE", NULL, "/tenants/%" PRIu64, tenant_id(argv[1]));
    else if (strcmp(argv[0], "rename") == 0 && argc == 3)
        api("PATCH", json_pack("{s:s}", "name", argv[2]), "/tenants/%" PRIu64,
            tenant_id(argv[1]));
    else
        return bad_usage();
    return 0;
}

static const struct opt user_opts[] = {
    {"--uid", "uid", OPT_NUM, FOR_ALL},
    {"--gid", "gid", OPT_NUM, FOR_ALL},
    {"--gids", "gids", OPT_GIDS, FOR_ALL},
    {"--disable", "disabled", OPT_TRUE, FOR_UPDATE},
    {"--enable", "disabled", OPT_FALSE, FOR_UPDATE},
    {"--tenant-admin", "tenant_admin", OPT_TRUE, FOR_ALL},
    {NULL, NULL, OPT_ARG, 0},
};

static int cmd_user(int argc, char **argv)
{
    NEED(2);
    uint64_t t = tenant_id(argv[1]);
    if (strcmp(argv[0], "list") == 0 && argc == 2) {
        api_list("/tenants/%" PRIu64 "/users", t);
        return 0;
    }
    NEED(3);
    if (strcmp(argv[0], "create") == 0) {
        check_flags(argc, argv, 3, user_opts);
        json_t *o = json_pack("{s:s}", "name", argv[2]);
        set_fields(o, argc, argv, 3, user_opts, FOR_CREATE);
        api("POST", o, "/tenants/%" PRIu64 "/users", t);
        return 0;
    }
    if (strcmp(argv[0], "get") != 0 && strcmp(argv[0], "delete") != 0 &&
        strcmp(argv[0], "update") != 0)
        return bad_usage();
    uint64_t uid = user_id(t, argv[2]);
    if (strcmp(argv[0], "get") == 0 && argc == 3) {
        api("GET", NULL, "/tenants/%" PRIu64 "/users/%" PRIu64, t, uid);
    } else if (strcmp(argv[0], "delete") == 0 && argc == 3) {
        api("DELETE", NULL, "/tenants/%" PRIu64 "/users/%" PRIu64, t, uid);
    } else if (strcmp(argv[0], "update") == 0) {
        check_flags(argc, argv, 3, user_opts);
        json_t *o = json_object();
        set_fields(o, argc, argv, 3, user_opts, FOR_UPDATE);
        api("PATCH", o, "/tenants/%" PRIu64 "/users/%" PRIu64, t, uid);
    } else {
        return bad_usage();
    }
    return 0;
}

static int cmd_key(int argc, char **argv)
{
    static const struct opt list_opts[] = {{"--user", NULL, OPT_ARG, 0}, {NULL, NULL, OPT_ARG, 0}};
    NEED(2);
    if (strcmp(argv[0], "create") == 0 && argc == 3) {
        uint64_t t = tenant_id(argv[1]);
        api("POST", NULL, "/tenants/%" PRIu64 "/users/%" PRIu64 "/keys", t, user_id(t, argv[2]));
    } else if (strcmp(argv[0], "list") == 0 && (argc == 2 || argc == 4)) {
        check_flags(argc, argv, 2, list_opts);
        const char *user = flag(argc, argv, 2, "--user", true);
        uint64_t t = tenant_id(argv[1]);
        if (user)
            api_list("/tenants/%" PRIu64 "/users/%" PRIu64 "/keys", t, user_id(t, user));
        else
            api_list("/tenants/%" PRIu64 "/keys", t);
    } else if (argc == 2 && strspn(argv[1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789._-") == strlen(argv[1])) {
        if (strcmp(argv[0], "get") == 0)
            api("GET", NULL, "/keys/%s", argv[1]);
        else if (strcmp(argv[0], "disable") == 0)
            api("PATCH", json_pack("{s:b}", "disabled", 1), "/keys/%s", argv[1]);
        else if (strcmp(argv[0], "enable") == 0)
            api("PATCH", json_pack("{s:b}", "disabled", 0), "/keys/%s", argv[1]);
        else if (strcmp(argv[0], "delete") == 0)
            api("DELETE", NULL, "/keys/%s", argv[1]);
        else
            return bad_usage();
    } else {
        return bad_usage();
    }
    return 0;
}

static const struct opt export_opts[] = {
    {"--clients", "clients", OPT_NETS, FOR_ALL},
    {"--path", "path", OPT_STR, FOR_UPDATE},
    {"--ro", "read_only", OPT_TRUE, FOR_ALL},
    {"--rw", "read_only", OPT_FALSE, FOR_UPDATE},
    {"--root-squash", "root_squash", OPT_TRUE, FOR_ALL},
    {"--no-root-squash", "root_squash", OPT_FALSE, FOR_UPDATE},
    {"--all-squash", "all_squash", OPT_TRUE, FOR_ALL},
    {"--no-all-squash", "all_squash", OPT_FALSE, FOR_UPDATE},
    {"--anon-uid", "anon_uid", OPT_NUM, FOR_ALL},
    {"--anon-gid", "anon_gid", OPT_NUM, FOR_ALL},
    {"--source", "source", OPT_STR, FOR_CREATE},
    {NULL, NULL, OPT_ARG, 0},
};

static int cmd_export(int argc, char **argv)
{
    NEED(2);
    if (strcmp(argv[0], "list") == 0 && argc == 2) {
        api_list("/tenants/%" PRIu64 "/exports", tenant_id(argv[1]));
    } else if (strcmp(argv[0], "update") == 0) {
        check_flags(argc, argv, 2, export_opts);
        if (flag(argc, argv, 2, "--source", true))
            die(2, "an export's directory cannot change (create a new export)");
        json_t *o = json_object();
        set_fields(o, argc, argv, 2, export_opts, FOR_UPDATE);
        api("PATCH", o, "/exports/%" PRIu64, parse_num(argv[1], false));
    } else if ((strcmp(argv[0], "get") == 0 || strcmp(argv[0], "delete") == 0) && argc == 2) {
        api(argv[0][0] == 'g' ? "GET" : "DELETE", NULL, "/exports/%" PRIu64,
            parse_num(argv[1], false));
    } else if (strcmp(argv[0], "create") == 0 && argc >= 3) {
        check_flags(argc, argv, 3, export_opts);
        if (!flag(argc, argv, 3, "--clients", true))
            die(2, "export create needs --clients NET[,NET]");
        json_t *o = json_pack("{s:s}", "path", argv[2]);
        set_fields(o, argc, argv, 3, export_opts, FOR_CREATE);
        api("POST", o, "/tenants/%" PRIu64 "/exports", tenant_id(argv[1]));
    } else {
        return bad_usage();
    }
    return 0;
}

/* The usage or quota path of argv[0] = T [BUCKET [--dir PATH]] (@p what: "usage",
 * "quota"); flags (@p opts, with --dir) start at *from. */
static void usage_path(char *p, size_t len, int argc, char **argv, const char *what,
                       const struct opt *opts, int *from)
{
    const char *bucket = argc >= 2 && strncmp(argv[1], "--", 2) != 0 ? argv[1] : NULL;
    *from = bucket ? 2 : 1;
    check_flags(argc, argv, *from, opts);
    const char *dir = flag(argc, argv, *from, "--dir", true);
    if (dir && !bucket)
        die(2, "--dir needs a bucket: quota set T BUCKET --dir PATH");
    if (dir && strspn(dir, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/") !=
                   strlen(dir))
        die(2, "--dir: use letters, digits, '.', '_', '-' and '/' (or the api command)");
    uint64_t t = tenant_id(argv[0]);
    if (bucket)
        snprintf(p, len, "/tenants/%" PRIu64 "/buckets/%s/%s%s%s", t, bucket, what,
                 dir ? "?dir=" : "", dir ? dir : "");
    else
        snprintf(p, len, "/tenants/%" PRIu64 "/%s", t, what);
}

static int cmd_quota(int argc, char **argv)
{
    static const struct opt set_opts[] = {
        {"--bytes", "bytes_limit", OPT_SIZE, FOR_UPDATE},
        {"--inodes", "inodes_limit", OPT_NUM, FOR_UPDATE},
        {"--dir", NULL, OPT_ARG, 0},
        {NULL, NULL, OPT_ARG, 0},
    };
    char p[512];
    int from;
    NEED(2);
    usage_path(p, sizeof(p), argc - 1, argv + 1, "quota", set_opts, &from);
    if (strcmp(argv[0], "get") == 0) {
        api("GET", NULL, "%s", p);
    } else if (strcmp(argv[0], "delete") == 0) {
        api("DELETE", NULL, "%s", p);
    } else if (strcmp(argv[0], "set") == 0) {
        json_t *o = json_object();
        set_fields(o, argc - 1, argv + 1, from, set_opts, FOR_UPDATE);
        api("PUT", o, "%s", p);
    } else {
        return bad_usage();
    }
    return 0;
}

static int cmd_usage(int argc, char **argv)
{
    char p[512];
    int from;
    NEED(1);
    static const struct opt dir_opts[] = {{"--dir", NULL, OPT_ARG, 0}, {NULL, NULL, OPT_ARG, 0}};
    usage_path(p, sizeof(p), argc, argv, "usage", dir_opts, &from);
    api("GET", NULL, "%s", p);
    return 0;
}

static int cmd_qos(int argc, char **argv)
{
    static const struct opt set_opts[] = {
        {"--user", NULL, OPT_ARG, 0},
        {"--dir", NULL, OPT_ARG, 0},
        {"--nfs-default", NULL, OPT_TRUE, 0},
        {"--read-bps", "read_bps", OPT_SIZE, FOR_UPDATE},
        {"--write-bps", "write_bps", OPT_SIZE, FOR_UPDATE},
        {"--read-iops", "read_iops", OPT_NUM, FOR_UPDATE},
        {"--write-iops", "write_iops", OPT_NUM, FOR_UPDATE},
        {"--meta-iops", "meta_iops", OPT_NUM, FOR_UPDATE},
        {"--burst-ms", "burst_ms", OPT_NUM, FOR_UPDATE},
        {"--min-read-bps", "min_read_bps", OPT_SIZE, FOR_UPDATE},
        {"--min-write-bps", "min_write_bps", OPT_SIZE, FOR_UPDATE},
        {"--min-iops", "min_iops", OPT_NUM, FOR_UPDATE},
        {"--weight", "weight", OPT_NUM, FOR_UPDATE},
        {NULL, NULL, OPT_ARG, 0},
    };
    char p[512];
    int from;
    NEED(2);
    if (strcmp(argv[0], "list") == 0) {
        api("GET", NULL, "/tenants/%" PRIu64 "/qos/policies", tenant_id(argv[1]));
        return 0;
    }
    if (strcmp(argv[0], "system") == 0) {
        /* the system class: no level to name, no minimum */
        static const struct opt sys_opts[] = {
            {"--read-bps", "read_bps", OPT_SIZE, FOR_UPDATE},
            {"--write-bps", "write_bps", OPT_SIZE, FOR_UPDATE},
            {"--read-iops", "read_iops", OPT_NUM, FOR_UPDATE},
            {"--write-iops", "write_iops", OPT_NUM, FOR_UPDATE},
            {"--meta-iops", "meta_iops", OPT_NUM, FOR_UPDATE},
            {"--burst-ms", "burst_ms", OPT_NUM, FOR_UPDATE},
            {"--weight", "weight", OPT_NUM, FOR_UPDATE},
            {NULL, NULL, OPT_ARG, 0},
        };
        check_flags(argc - 1, argv + 1, 1, sys_opts);
        if (strcmp(argv[1], "get") == 0) {
            api("GET", NULL, "/qos/system");
        } else if (strcmp(argv[1], "reset") == 0) {
            api("DELETE", NULL, "/qos/system");
        } else if (strcmp(argv[1], "set") == 0) {
            json_t *o = json_object();
            set_fields(o, argc - 1, argv + 1, 1, sys_opts, FOR_UPDATE);
            api("PATCH", o, "/qos/system");
        } else {
            return bad_usage();
        }
        return 0;
    }
    /* BUCKET [--dir PATH] as for quotas; else the tenant, a user or the NFS default class */
    usage_path(p, sizeof(p), argc - 1, argv + 1, "qos", set_opts, &from);
    const char *user = flag(argc - 1, argv + 1, from, "--user", true);
    bool nfs_default = flag(argc - 1, argv + 1, from, "--nfs-default", false) != NULL;
    if ((user || nfs_default) && (from == 2 || (user && nfs_default)))
        die(2, "qos: name one level: BUCKET [--dir PATH], --user USER or --nfs-default");
    uint64_t t = tenant_id(argv[1]);
    if (user)
        snprintf(p, sizeof(p), "/tenants/%" PRIu64 "/users/%" PRIu64 "/qos", t,
                 user_id(t, user));
    else if (nfs_default)
        snprintf(p, sizeof(p), "/tenants/%" PRIu64 "/qos/nfs-default", t);
    if (strcmp(argv[0], "get") == 0) {
        api("GET", NULL, "%s", p);
    } else if (strcmp(argv[0], "delete") == 0) {
        api("DELETE", NULL, "%s", p);
    } else if (strcmp(argv[0], "set") == 0) {
        json_t *o = json_object();
        set_fields(o, argc - 1, argv + 1, from, set_opts, FOR_UPDATE);
        api("PATCH", o, "%s", p);
    } else {
        return bad_usage();
    }
    return 0;
}

/* The secret key of a remote being made: from --secret-file (a file, or '-' for
 * stdin: its first line) or S3NFS_REMOTE_SECRET_KEY, never from the command line
 * (other users could read it in the process list). */
static char *remote_secret(int argc, char **argv, int from)
{
    const char *file = flag(argc, argv, from, "--secret-file", true);
    char buf[512];
    if (!file) {
        const char *e = getenv("S3NFS_REMOTE_SECRET_KEY");
        if (!e || !*e)
            die(2, "the secret key is needed: --secret-file FILE ('-': stdin) or "
                   "S3NFS_REMOTE_SECRET_KEY");
        return strdup(e);
    }
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (!f)
        die(1, "cannot read %s: %s", file, strerror(errno));
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    if (f != stdin)
        fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!buf[0])
        die(2, "%s holds no secret key", file);
    char *s = strdup(buf);
    memset(buf, 0, sizeof(buf));
    return s;
}

static int cmd_remote(int argc, char **argv)
{
    static const struct opt opts[] = {
        {"--tenant", NULL, OPT_ARG, 0},
        {"--secret-file", NULL, OPT_ARG, 0},
        {"--endpoint", "endpoint", OPT_STR, FOR_CREATE},
        {"--bucket", "bucket", OPT_STR, FOR_CREATE},
        {"--key-id", "access_key", OPT_STR, FOR_CREATE | FOR_UPDATE},
        {"--region", "region", OPT_STR, FOR_CREATE},
        {"--prefix", "prefix", OPT_STR, FOR_CREATE},
        {"--ca-file", "ca_file", OPT_STR, FOR_CREATE},
        {"--no-verify", "tls_verify", OPT_FALSE, FOR_CREATE},
        {"--max-conns", "max_conns", OPT_NUM, FOR_CREATE | FOR_UPDATE},
        {"--parallel", "parallel", OPT_NUM, FOR_CREATE | FOR_UPDATE},
        {"--connect-timeout-ms", "connect_timeout_ms", OPT_NUM, FOR_CREATE | FOR_UPDATE},
        {"--virtual-host", NULL, OPT_TRUE, 0}, /* no field: "addressing" below */
        {NULL, NULL, OPT_ARG, 0},
    };
    NEED(1);
    if (strcmp(argv[0], "list") == 0) {
        check_flags(argc, argv, 1, opts);
        const char *t = flag(argc, argv, 1, "--tenant", true);
        if (t && strcmp(t, "0") == 0)
            api_list("/remotes?tenant=0");
        else if (t)
            api_list("/remotes?tenant=%" PRIu64, tenant_id(t));
        else
            api_list("/remotes");
        return 0;
    }
    NEED(2);
    if ((strcmp(argv[0], "get") == 0 || strcmp(argv[0], "delete") == 0) && argc == 2) {
        api(argv[0][0] == 'g' ? "GET" : "DELETE", NULL, "/remotes/%" PRIu64,
            parse_num(argv[1], false));
        return 0;
    }
    if (strcmp(argv[0], "update") == 0) {
        check_flags(argc, argv, 2, opts);
        static const char *const fixed[] = {"--endpoint", "--bucket",       "--region",
                                            "--prefix",   "--ca-file",      "--no-verify",
                                            "--tenant",   "--virtual-host", NULL};
        for (size_t i = 0; fixed[i]; i++)
            if (flag(argc, argv, 2, fixed[i],
                     strcmp(fixed[i], "--no-verify") != 0 &&
                         strcmp(fixed[i], "--virtual-host") != 0))
                die(2, "remote update: %s cannot change (make a new remote)", fixed[i]);
        json_t *o = json_object();
        set_fields(o, argc, argv, 2, opts, FOR_UPDATE);
        /* a new key id needs its secret; a secret alone rotates it for the same key id */
        if (flag(argc, argv, 2, "--key-id", true) || flag(argc, argv, 2, "--secret-file", true)) {
            char *secret = remote_secret(argc, argv, 2);
            json_object_set_new(o, "secret_key", json_string(secret));
            memset(secret, 0, strlen(secret));
            free(secret);
        }
        api("PATCH", o, "/remotes/%" PRIu64, parse_num(argv[1], false));
        return 0;
    }
    if (strcmp(argv[0], "create") != 0)
        return bad_usage();
    check_flags(argc, argv, 2, opts);
    if (!flag(argc, argv, 2, "--endpoint", true) || !flag(argc, argv, 2, "--bucket", true) ||
        !flag(argc, argv, 2, "--key-id", true))
        die(2, "remote create needs --endpoint URL --bucket B --key-id AKEY");
    json_t *o = json_pack("{s:s}", "name", argv[1]);
    set_fields(o, argc, argv, 2, opts, FOR_CREATE);
    if (flag(argc, argv, 2, "--virtual-host", false))
        json_object_set_new(o, "addressing", json_string("virtual"));
    const char *t = flag(argc, argv, 2, "--tenant", true);
    if (t)
        json_object_set_new(o, "tenant", json_integer((json_int_t)tenant_id(t)));
    char *secret = remote_secret(argc, argv, 2);
    json_object_set_new(o, "secret_key", json_string(secret));
    memset(secret, 0, strlen(secret));
    free(secret);
    api("POST", o, "/remotes");
    return 0;
}

/* The recall flags of tier set (@p ropts), as its "recall" object. */
static void tier_recall_flags(json_t *o, int argc, char **argv, const struct opt *ropts)
{
    json_t *r = json_object();
    set_fields(r, argc, argv, 3, ropts, FOR_UPDATE);
    if (json_object_size(r))
        json_object_set_new(o, "recall", r);
    else
        json_decref(r);
}

static int cmd_tier(int argc, char **argv)
{
    static const struct opt opts[] = {
        {"--remote", NULL, OPT_ARG, 0},
        {"--upload-after", "upload_after_s", OPT_NUM, FOR_UPDATE},
        {"--evict-after", "evict_after_s", OPT_NUM, FOR_UPDATE},
        {"--keep-local", "keep_local", OPT_TRUE, FOR_UPDATE},
        {"--no-keep-local", "keep_local", OPT_FALSE, FOR_UPDATE},
        {"--evict-priority", "evict_priority", OPT_STR, FOR_UPDATE},
        {"--evict-watermark", NULL, OPT_ARG, 0},
        {"--pin-prefixes", NULL, OPT_ARG, 0},
        {"--storage-class", "storage_class", OPT_STR, FOR_UPDATE},
        {"--preset", "preset", OPT_STR, FOR_UPDATE},
        {"--read-only", "read_only", OPT_TRUE, FOR_UPDATE},
        {"--writable", "read_only", OPT_FALSE, FOR_UPDATE},
        {"--dir-prefetch", "dir_prefetch", OPT_TRUE, FOR_UPDATE},
        {"--no-dir-prefetch", "dir_prefetch", OPT_FALSE, FOR_UPDATE},
        {"--dirty-bound", "dirty_bound", OPT_SIZE, FOR_UPDATE},
        /* the recall object's (ropts) */
        {"--read-ahead", "read_ahead", OPT_SIZE, 0},
        {"--streams", "streams", OPT_NUM, 0},
        {"--chunk-size", "chunk_size", OPT_SIZE, 0},
        {"--whole-file", "whole_file", OPT_TRUE, 0},
        {"--no-whole-file", "whole_file", OPT_FALSE, 0},
        {"--dir", NULL, OPT_ARG, 0},
        {"--timeout", NULL, OPT_ARG, 0},
        {NULL, NULL, OPT_ARG, 0},
    };
    static const struct opt ropts[] = {
        {"--read-ahead", "read_ahead", OPT_SIZE, FOR_UPDATE},
        {"--streams", "streams", OPT_NUM, FOR_UPDATE},
        {"--chunk-size", "chunk_size", OPT_SIZE, FOR_UPDATE},
        {"--whole-file", "whole_file", OPT_TRUE, FOR_UPDATE},
        {"--no-whole-file", "whole_file", OPT_FALSE, FOR_UPDATE},
        {NULL, NULL, OPT_ARG, 0},
    };
    char p[512];
    NEED(3);
    uint64_t t = tenant_id(argv[1]);
    check_flags(argc, argv, 3, opts);
    const char *dir = flag(argc, argv, 3, "--dir", true);
    if (dir && strspn(dir, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/") !=
                   strlen(dir))
        die(2, "--dir: use letters, digits, '.', '_', '-' and '/' (or the api command)");
    snprintf(p, sizeof(p), "/tenants/%" PRIu64 "/buckets/%s/tier%s%s", t, argv[2],
             dir ? "?dir=" : "", dir ? dir : "");
    if (strcmp(argv[0], "get") == 0) {
        api("GET", NULL, "%s", p);
    } else if (strcmp(argv[0], "delete") == 0) {
        api("DELETE", NULL, "%s", p);
    } else if (strcmp(argv[0], "set") == 0 && dir) {
        if (flag(argc, argv, 3, "--remote", true) ||
            flag(argc, argv, 3, "--evict-watermark", true) ||
            flag(argc, argv, 3, "--pin-prefixes", true) ||
            flag(argc, argv, 3, "--storage-class", true))
            die(2, "tier set --dir: the remote, watermarks, pins and storage class are the "
                   "bucket's");
        json_t *o = json_object();
        set_fields(o, argc, argv, 3, opts, FOR_UPDATE);
        tier_recall_flags(o, argc, argv, ropts);
        api("PUT", o, "%s", p);
    } else if (strcmp(argv[0], "flush") == 0) {
        const char *ts = flag(argc, argv, 3, "--timeout", true);
        uint64_t timeout = ts ? parse_num(ts, false) : 300;
        char fp[600];
        snprintf(fp, sizeof(fp), "%s/flush", p);
        json_t *j = call("POST", fp, NULL, false);
        uint64_t barrier = (uint64_t)json_integer_value(json_object_get(j, "barrier"));
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
            if (json_is_true(json_object_get(j, "done"))) {
                show(j, 200);
                json_decref(j);
                return 0;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((uint64_t)(now.tv_sec - start.tv_sec) >= timeout)
                break;
            json_decref(j);
            struct timespec pause = {0, 250000000};
            nanosleep(&pause, NULL);
            char gp[700];
            snprintf(gp, sizeof(gp), "%s?barrier=%" PRIu64, fp, barrier);
            j = call("GET", gp, NULL, false);
        }
        json_t *up = json_object_get(j, "uploads");
        fprintf(stderr,
                "s3nfsctl: tier flush: not done after %" PRIu64 " s: %" JSON_INTEGER_FORMAT
                " file(s) (%" JSON_INTEGER_FORMAT " bytes) to upload, %" JSON_INTEGER_FORMAT
                " remote delete(s) left; last error: %s\n",
                timeout, json_integer_value(json_object_get(up, "pending_files")),
                json_integer_value(json_object_get(up, "pending_bytes")),
                json_integer_value(json_object_get(up, "deletes_pending")),
                json_string_value(json_object_get(up, "last_error")) ?: "none");
        json_decref(j);
        return 1;
    } else if (strcmp(argv[0], "set") == 0) {
        const char *r = flag(argc, argv, 3, "--remote", true);
        if (!r)
            die(2, "tier set needs --remote ID|NAME");
        json_t *o = json_object();
        if (strspn(r, "0123456789") == strlen(r))
            json_object_set_new(o, "remote", json_integer((json_int_t)parse_num(r, false)));
        else
            json_object_set_new(o, "remote", json_string(r));
        if (flag(argc, argv, 3, "--keep-local", false) ||
            flag(argc, argv, 3, "--no-keep-local", false))
            die(2, "tier set: --keep-local is a directory's (--dir PATH); pin prefixes instead");
        set_fields(o, argc, argv, 3, opts, FOR_UPDATE);
        tier_recall_flags(o, argc, argv, ropts);
        const char *wm = flag(argc, argv, 3, "--evict-watermark", true);
        if (wm) {
            char *end = NULL;
            double hi = strtod(wm, &end), lo = -1;
            if (end && *end == ':')
                lo = strtod(end + 1, &end);
            if (!end || *end || lo < 0)
                die(2, "--evict-watermark HIGH:LOW (percent of the store's capacity, e.g. 90:80)");
            json_object_set_new(o, "evict_watermark",
                                json_pack("{s:f,s:f}", "high", hi, "low", lo));
        }
        const char *pins = flag(argc, argv, 3, "--pin-prefixes", true);
        if (pins) {
            json_t *arr = json_array();
            for (const char *q = pins; *q;) {
                size_t n = strcspn(q, ",");
                if (n)
                    json_array_append_new(arr, json_stringn(q, n));
                q += n + (q[n] == ',');
            }
            json_object_set_new(o, "pin_prefixes", arr);
        }
        api("PUT", o, "%s", p);
    } else {
        return bad_usage();
    }
    return 0;
}

static int cmd_cache(int argc, char **argv)
{
    static const struct opt opts[] = {
        {"--ttl", "ttl_s", OPT_NUM, FOR_UPDATE},
        {"--read-only", "read_only", OPT_TRUE, FOR_UPDATE},
        {"--read-write", "read_only", OPT_FALSE, FOR_UPDATE},
        {"--dirty-max", "dirty_max_bytes", OPT_SIZE, FOR_UPDATE},
        {NULL, NULL, OPT_ARG, 0},
    };
    char p[512];
    NEED(3);
    uint64_t t = tenant_id(argv[1]);
    check_flags(argc, argv, 3, opts);
    snprintf(p, sizeof(p), "/tenants/%" PRIu64 "/buckets/%s/cache", t, argv[2]);
    if (strcmp(argv[0], "get") == 0 && argc == 3) {
        api("GET", NULL, "%s", p);
    } else if (strcmp(argv[0], "delete") == 0 && argc == 3) {
        api("DELETE", NULL, "%s", p);
    } else if (strcmp(argv[0], "set") == 0) {
        json_t *o = json_object();
        set_fields(o, argc, argv, 3, opts, FOR_UPDATE);
        api("PUT", o, "%s", p);
    } else {
        return bad_usage();
    }
    return 0;
}

/* GET a plain-text path (/healthz, /metrics): the body on stdout, or the
 * error on stderr and exit 1. */
static int plain_get(const char *path)
{
    char *out = NULL;
    int status = http("GET", path, NULL, &out);
    if (status != 200 && status != 503) {
        json_error_t e;
        json_t *j = json_loads(out, 0, &e);
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
        const char *code = j ? json_string_value(json_object_get(j, "error")) : NULL;
        fprintf(stderr, "s3nfsctl: GET %s: %d %s: %s\n", path, status, code ? code : "Error",
                msg ? msg : out);
        json_decref(j);
        free(out);
        return 1;
    }
    fputs(out, stdout);
    free(out);
    return status == 200 ? 0 : 1;
}

int main(int argc, char **argv)
{
    /* --json may stand anywhere: take it out first. */
    int kept = 1;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--json") == 0)
            json_out = true;
        else
            argv[kept++] = argv[a];
    }
    argc = kept;
    const char *env = getenv("S3NFS_ADMIN");
    ca_file = getenv("S3NFS_ADMIN_CA");
    if (ca_file && !*ca_file)
        ca_file = NULL;
    token = getenv("S3NFS_ADMIN_TOKEN");
    akey = getenv("S3NFS_ADMIN_ACCESS_KEY");
    skey = getenv("S3NFS_ADMIN_SECRET_KEY");
    if (token && !*token)
        token = NULL;
    if (env && *env && set_admin(env) < 0)
        die(2, "S3NFS_ADMIN must be HOST:PORT, http://HOST:PORT or https://HOST:PORT, got '%s'",
            env);
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("s3nfsctl %s\n", S3NFS_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--admin") == 0 && i + 1 < argc) {
            if (set_admin(argv[++i]) < 0)
                die(2, "--admin must be HOST:PORT, http://HOST:PORT or https://HOST:PORT, got "
                       "'%s'",
                    argv[i]);
        } else if (strcmp(argv[i], "--ca") == 0 && i + 1 < argc) {
            ca_file = argv[++i];
        } else if (strcmp(argv[i], "--insecure") == 0) {
            insecure = true;
        } else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
            token = argv[++i];
        } else if (strcmp(argv[i], "--access-key") == 0 && i + 1 < argc) {
            akey = argv[++i];
        } else if (strcmp(argv[i], "--secret-key") == 0 && i + 1 < argc) {
            skey = argv[++i];
        } else {
            die(2, "unknown option '%s' (see --help)", argv[i]);
        }
    }
    argc -= i;
    argv += i;
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[0];
    argc--;
    argv++;
    if (!cmd_doc_find(cmd))
        return unknown_command(cmd);
    cur_cmd = cmd;
    cur_sub = argc > 0 ? argv[0] : NULL;
    const struct cmd_doc *doc = cmd_doc_find(cmd);
    if (*doc->subs && (!cur_sub || !word_in(doc->subs, cur_sub)))
        return bad_usage();
    if (insecure && https)
        fprintf(stderr, "s3nfsctl: --insecure: the admin listener's certificate is not "
                        "checked\n");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        die(1, "cannot initialise libcurl");
    if (akey && !*akey)
        akey = NULL;
    if (akey && (!skey || !*skey))
        die(2, "--access-key needs --secret-key (or S3NFS_ADMIN_SECRET_KEY)");
    if (strcmp(cmd, "health") == 0)
        return plain_get("/healthz");
    if (strcmp(cmd, "metrics") == 0)
        return plain_get("/metrics");
    if (!token && !akey)
        die(2, "the admin API needs a token (--token TOKEN or S3NFS_ADMIN_TOKEN), or an admin "
               "user's key (--access-key AKEY --secret-key SECRET)");
    if (strcmp(cmd, "tenant") == 0)
        return cmd_tenant(argc, argv);
    if (strcmp(cmd, "user") == 0)
        return cmd_user(argc, argv);
    if (strcmp(cmd, "key") == 0)
        return cmd_key(argc, argv);
    if (strcmp(cmd, "export") == 0)
        return cmd_export(argc, argv);
    if (strcmp(cmd, "quota") == 0)
        return cmd_quota(argc, argv);
    if (strcmp(cmd, "usage") == 0)
        return cmd_usage(argc, argv);
    if (strcmp(cmd, "bucket") == 0 && argc == 2 && strcmp(argv[0], "list") == 0) {
        api_list("/tenants/%" PRIu64 "/buckets", tenant_id(argv[1]));
        return 0;
    }
    if (strcmp(cmd, "whoami") == 0 && argc == 0) {
        api("GET", NULL, "/whoami");
        return 0;
    }
    if (strcmp(cmd, "qos") == 0)
        return cmd_qos(argc, argv);
    if (strcmp(cmd, "remote") == 0)
        return cmd_remote(argc, argv);
    if (strcmp(cmd, "tier") == 0)
        return cmd_tier(argc, argv);
    if (strcmp(cmd, "cache") == 0)
        return cmd_cache(argc, argv);
    if (strcmp(cmd, "api") == 0 && argc >= 2 && argc <= 3) {
        json_t *body = NULL;
        if (argc == 3) {
            json_error_t e;
            body = json_loads(argv[2], 0, &e);
            if (!body)
                die(2, "bad JSON: %s", e.text);
        }
        json_decref(call(argv[0], argv[1], body, true));
        return 0;
    }
    return bad_usage();
}
