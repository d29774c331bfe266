/* SPDX-License-Identifier: Apache-2.0
 * tier_s3: the S3 client of the remote tier (contract: tier_s3.h).
 *
 * A client owns a pool of connections (struct s3_conn, one bufferevent each,
 * socket or OpenSSL) and the requests started on it (struct tier_s3_req).
 * A request is queued until it holds a connection, then signed and written
 * (head, then the body: a referenced buffer, generated XML, or pulled from a
 * source as the socket drains), then its answer is read: llhttp parses the
 * status line and headers and pauses; a Content-Length body is then moved out
 * of the input buffer by us without copying, other framings (chunked, until
 * close) go through llhttp's on_body. When the answer is complete the
 * connection goes back to the pool (or is closed) before the request ends.
 *
 * Every request ends in req_end(), which detaches the connection and defers
 * the done callback to a per-request event, so done never runs inside a call
 * of ours (start, cancel, resume) nor in the middle of a read; callbacks that
 * run mid-request (on_head, on_data, source) may cancel: the code checks
 * r->ended after each of them and touches nothing more.
 * Thread: the client's loop thread only (tier_s3_run() posts to it). */
#include "tier_s3.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <llhttp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "srv_err.h"
#include "srv_log.h"
#include "srv_sigv4.h"
#include "tier_s3_int.h"

#ifndef S3NFS_VERSION
#define S3NFS_VERSION "dev"
#endif

#define HEAD_MAX (64 * 1024)          /* answer status line + headers */
#define XML_MAX (64u * 1024 * 1024)   /* an XML or error answer body */
#define HVAL_MAX 8192                 /* one header value */
#define SRC_HIGH (1024 * 1024)        /* source bodies: fill the output up to this */
#define SRC_LOW (256 * 1024)          /* ... whenever it drains below this */
#define MAX_IO (1u << 20)             /* one socket read or write at most (libevent: 16 KiB) */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define UNSIGNED "UNSIGNED-PAYLOAD"

/* ---------------------------------------------------------------- types */

struct s3_conn {
    struct tier_s3 *s3;
    struct bufferevent *bev;   /* plain socket, or OpenSSL once TCP is up (https) */
    evutil_socket_t fd;
    struct tier_s3_req *req;   /* busy with it, or NULL when idle */
    struct event *direct;      /* plain http: a GET body read from fd straight into
                                * op.dest (conn_direct_cb), the bufferevent not reading */
    TAILQ_ENTRY(s3_conn) link; /* in s3->idle while idle */
    unsigned served;           /* requests answered on it */
    bool fd_in_bev;            /* the bufferevent closes fd when freed */
    bool tcp_up;               /* TCP connected (https: the handshake may still run) */
    bool connected;            /* ready for requests */
    bool idle;
};

enum rstate {
    R_QUEUED,     /* waiting for a connection */
    R_CONNECT,    /* its new connection is connecting */
    R_SEND,       /* writing; the answer may start early */
    R_BODY_LEN,   /* headers in; Content-Length body moved by us */
    R_BODY_PARSE, /* headers in; chunked or until-close body through llhttp */
    R_ENDED,
};

struct hdr {
    char *name; /* lower case */
    char *value;
};

struct tier_s3_req {
    struct tier_s3 *s3;
    struct tier_s3_op op; /* the caller's op (pointers borrowed) */
    const char *method;
    char *uri;    /* encoded path: canonical URI and request target */
    char *target; /* uri + encoded query */
    struct srv_sigv4_kv *query;
    size_t nquery;
    char *qstore; /* the query's names and values */
    struct hdr *hdrs;
    size_t nhdrs;
    struct evbuffer *xbody; /* generated body (CompleteMultipartUpload) */
    char payload_hash[65];
    uint64_t body_len;
    uint64_t src_given; /* source bytes appended so far */
    bool src_wait;      /* the source had none ready */
    bool is_head, stream, want_range, fresh, resent, got_bytes, sent, paused, ended;
    bool hdr_done, msg_done, complete, keepalive, eof_pending;
    enum rstate st;
    struct s3_conn *c;
    llhttp_t parser;
    char hname[256];
    size_t hnl;
    char *hval; /* HVAL_MAX bytes */
    size_t hvl;
    bool hbad;
    size_t head_bytes;
    uint64_t remaining;
    size_t dest_pos;     /* body bytes copied into op.dest */
    bool direct;         /* the rest of the body is read from the socket into op.dest */
    struct evbuffer *in; /* body bytes: for on_data, res.body, op.dest or XML */
    size_t meta_cap;
    struct tier_s3_result res;
    struct event *defer;
    TAILQ_ENTRY(tier_s3_req) qlink;   /* s3->waiting */
    TAILQ_ENTRY(tier_s3_req) alink;   /* s3->active */
};

struct tier_s3 {
    struct event_base *base;
    char *region, *bucket, *prefix, *akey, *skey;
    bool https, vhost;
    char host[256];
    int port;
    char host_hdr[320];
    char tls_name[320];
    char peer[300]; /* where we connect, for messages */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    SSL_CTX *ssl;
    int max_conns, nconns;
    bool closing;
    struct timeval t_connect, t_first, t_idle, t_keep;
    TAILQ_HEAD(conn_list, s3_conn) idle;
    TAILQ_HEAD(, tier_s3_req) waiting;
    TAILQ_HEAD(, tier_s3_req) active;
    struct event *kick;
    struct tier_s3_stats st;
};

static void conn_free(struct s3_conn *c);
static void req_send(struct tier_s3_req *r);
static void req_read(struct tier_s3_req *r);
static void req_end(struct tier_s3_req *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pool_acquire(struct tier_s3_req *r);
static void pool_kick_cb(evutil_socket_t fd, short what, void *arg);

/* ---------------------------------------------------------------- small helpers */

/* snprintf for messages and names: cutting a long host name or message short
 * is fine here (and this keeps -Wformat-truncation quiet about it). */
static void fmsg(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fmsg(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

const char *tier_s3_op_name(enum tier_s3_opcode code)
{
    switch (code) {
    case TIER_S3_HEAD_OBJECT:
        return "HeadObject";
    case TIER_S3_GET_OBJECT:
        return "GetObject";
    case TIER_S3_PUT_OBJECT:
        return "PutObject";
    case TIER_S3_DELETE_OBJECT:
        return "DeleteObject";
    case TIER_S3_MPU_CREATE:
        return "CreateMultipartUpload";
    case TIER_S3_MPU_PART:
        return "UploadPart";
    case TIER_S3_MPU_COMPLETE:
        return "CompleteMultipartUpload";
    case TIER_S3_MPU_ABORT:
        return "AbortMultipartUpload";
    case TIER_S3_MPU_LIST:
        return "ListMultipartUploads";
    case TIER_S3_LIST_OBJECTS:
        return "ListObjectsV2";
    case TIER_S3_CHECK:
        return "CheckRemote";
    case TIER_S3_COPY_OBJECT:
        return "CopyObject";
    case TIER_S3_MPU_PART_COPY:
        return "UploadPartCopy";
    }
    return "?";
}

static void ms_tv(struct timeval *tv, int ms, int dflt)
{
    if (ms <= 0)
        ms = dflt;
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

static void wipe_free(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    while (*p)
        *p++ = 0;
    free(s);
}

/* A header value we may send: no CR, LF or NUL (the caller's strings end at NUL). */
static bool hval_ok(const char *v)
{
    return v && strpbrk(v, "\r\n") == NULL && strlen(v) < HVAL_MAX;
}

/* ---------------------------------------------------------------- results */

void tier_s3_result_fini(struct tier_s3_result *res)
{
    for (size_t i = 0; i < res->nmeta; i++) {
        free(res->meta[i].name);
        free(res->meta[i].value);
    }
    free(res->meta);
    if (res->body)
        evbuffer_free(res->body);
    free(res->upload_id);
    for (size_t i = 0; i < res->nentries; i++) {
        free(res->entries[i].key);
        free(res->entries[i].upload_id);
    }
    free(res->entries);
    for (size_t i = 0; i < res->nprefixes; i++)
        free(res->prefixes[i]);
    free(res->prefixes);
    free(res->next_token);
    free(res->next_key_marker);
    free(res->next_upload_marker);
    memset(res, 0, sizeof(*res));
}

void tier_s3_result_take(struct tier_s3_result *dst, struct tier_s3_result *src)
{
    tier_s3_result_fini(dst);
    *dst = *src;
    memset(src, 0, sizeof(*src));
}

/* ---------------------------------------------------------------- client */

/* Split "http[s]://host[:port]" into the client. */
static int endpoint_parse(struct tier_s3 *s3, const char *ep, char *why, size_t whylen)
{
    const char *h;
    if (strncasecmp(ep, "http://", 7) == 0) {
        h = ep + 7;
        s3->port = 80;
    } else if (strncasecmp(ep, "https://", 8) == 0) {
        h = ep + 8;
        s3->https = true;
        s3->port = 443;
    } else {
        fmsg(why, whylen, "endpoint '%s' must start with http:// or https://", ep);
        return -EINVAL;
    }
    const char *end = h + strcspn(h, "/");
    if (*end && strcmp(end, "/") != 0) {
        fmsg(why, whylen, "endpoint '%s' must not have a path (the bucket is separate)", ep);
        return -EINVAL;
    }
    const char *colon;
    const char *hs = h, *he;
    if (*h == '[') {
        hs = h + 1;
        he = memchr(hs, ']', (size_t)(end - hs));
        if (!he) {
            fmsg(why, whylen, "endpoint '%s': unclosed '['", ep);
            return -EINVAL;
        }
        colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        he = colon ? colon : end;
    }
    if (he == hs || (size_t)(he - hs) >= sizeof(s3->host)) {
        fmsg(why, whylen, "endpoint '%s': bad host", ep);
        return -EINVAL;
    }
    memcpy(s3->host, hs, (size_t)(he - hs));
    s3->host[he - hs] = '\0';
    if (colon) {
        char *e;
        long p = strtol(colon + 1, &e, 10);
        if (e != end || p < 1 || p > 65535) {
            fmsg(why, whylen, "endpoint '%s': bad port", ep);
            return -EINVAL;
        }
        s3->port = (int)p;
    }
    return 0;
}

/* Bucket names we put in a Host header or a path: S3's rules, loosely. */
static bool bucket_ok(const char *b)
{
    size_t n = strlen(b);
    if (n < 1 || n > 255)
        return false;
    for (const char *p = b; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_')
            return false;
    return true;
}

static int tls_setup(struct tier_s3 *s3, const struct tier_s3_config *cfg, char *why,
                     size_t whylen)
{
    s3->ssl = SSL_CTX_new(TLS_client_method());
    if (!s3->ssl)
        return -ENOMEM;
    SSL_CTX_set_min_proto_version(s3->ssl, TLS1_2_VERSION);
    if (cfg->tls_no_verify) {
        SSL_CTX_set_verify(s3->ssl, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(s3->ssl, SSL_VERIFY_PEER, NULL);
    int ok = cfg->ca_file && *cfg->ca_file
                 ? SSL_CTX_load_verify_locations(s3->ssl, cfg->ca_file, NULL)
                 : SSL_CTX_set_default_verify_paths(s3->ssl);
    if (ok != 1) {
        char e[200];
        ERR_error_string_n(ERR_get_error(), e, sizeof(e));
        fmsg(why, whylen, "cannot load the CA bundle %s: %s",
                 cfg->ca_file && *cfg->ca_file ? cfg->ca_file : "(system default)", e);
        ERR_clear_error();
        return SRV_ETLS;
    }
    return 0;
}

int tier_s3_new(const struct tier_s3_config *cfg, struct event_base *base, struct tier_s3 **out,
                char *why, size_t whylen)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        whylen = sizeof(scratch);
    }
    why[0] = '\0';
    *out = NULL;
    if (!cfg || !base || !cfg->endpoint || !cfg->bucket || !cfg->access_key ||
        !cfg->secret_key || !*cfg->access_key || !*cfg->secret_key) {
        fmsg(why, whylen, "endpoint, bucket, access key and secret key are required");
        return -EINVAL;
    }
    if (!bucket_ok(cfg->bucket)) {
        fmsg(why, whylen, "bad bucket name '%s'", cfg->bucket);
        return -EINVAL;
    }
    if (cfg->prefix && strlen(cfg->prefix) >= TIER_S3_KEY_MAX / 2) {
        fmsg(why, whylen, "key prefix longer than %d bytes", TIER_S3_KEY_MAX / 2 - 1);
        return -EINVAL;
    }
    if (cfg->max_conns < 0 || cfg->max_conns > 1024) {
        fmsg(why, whylen, "max_conns must be 1..1024");
        return -EINVAL;
    }
    struct tier_s3 *s3 = calloc(1, sizeof(*s3));
    if (!s3)
        return -ENOMEM;
    int err = endpoint_parse(s3, cfg->endpoint, why, whylen);
    if (err)
        goto out;
    s3->base = base;
    s3->vhost = cfg->virtual_host;
    s3->region = xstrdup(cfg->region && *cfg->region ? cfg->region : "us-east-1");
    s3->bucket = xstrdup(cfg->bucket);
    s3->prefix = xstrdup(cfg->prefix);
    s3->akey = xstrdup(cfg->access_key);
    s3->skey = xstrdup(cfg->secret_key);
    s3->kick = NULL;
    if (!s3->region || !s3->bucket || !s3->prefix || !s3->akey || !s3->skey) {
        err = -ENOMEM;
        goto out;
    }
    bool v6 = strchr(s3->host, ':') != NULL;
    bool dflt = s3->port == (s3->https ? 443 : 80);
    char hp[300];
    fmsg(hp, sizeof(hp), "%s%s%s", v6 ? "[" : "", s3->host, v6 ? "]" : "");
    if (s3->vhost)
        fmsg(s3->tls_name, sizeof(s3->tls_name), "%s.%s", s3->bucket, s3->host);
    else
        fmsg(s3->tls_name, sizeof(s3->tls_name), "%s", s3->host);
    if (dflt)
        fmsg(s3->host_hdr, sizeof(s3->host_hdr), "%s%s%s", s3->vhost ? s3->bucket : "",
                 s3->vhost ? "." : "", hp);
    else
        fmsg(s3->host_hdr, sizeof(s3->host_hdr), "%s%s%s:%d", s3->vhost ? s3->bucket : "",
                 s3->vhost ? "." : "", hp, s3->port);

    /* Resolve once, here (tier_s3_new may block; the loop never does). */
    const char *ch = cfg->connect_host && *cfg->connect_host ? cfg->connect_host : s3->tls_name;
    char port[8];
    fmsg(port, sizeof(port), "%d", s3->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gr = getaddrinfo(ch, port, &hints, &ai);
    if (gr != 0 || !ai) {
        fmsg(why, whylen, "cannot resolve '%s': %s", ch, gai_strerror(gr));
        err = -EHOSTUNREACH;
        goto out;
    }
    memcpy(&s3->addr, ai->ai_addr, ai->ai_addrlen);
    s3->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    fmsg(s3->peer, sizeof(s3->peer), "%s:%d", ch, s3->port);

    if (s3->https && (err = tls_setup(s3, cfg, why, whylen)) != 0)
        goto out;
    s3->max_conns = cfg->max_conns ? cfg->max_conns : 16;
    ms_tv(&s3->t_connect, cfg->connect_timeout_ms, 10000);
    ms_tv(&s3->t_first, cfg->first_byte_timeout_ms, 120000);
    ms_tv(&s3->t_idle, cfg->idle_timeout_ms, 30000);
    ms_tv(&s3->t_keep, cfg->keepalive_ms, 30000);
    TAILQ_INIT(&s3->idle);
    TAILQ_INIT(&s3->waiting);
    TAILQ_INIT(&s3->active);
    s3->kick = event_new(base, -1, 0, pool_kick_cb, s3);
    err = s3->kick ? 0 : -ENOMEM;
out:
    if (err) {
        if (!why[0])
            fmsg(why, whylen, "%s", srv_strerror(err));
        tier_s3_free(s3);
        return err;
    }
    *out = s3;
    return 0;
}

static void req_free(struct tier_s3_req *r);

/* Run a request's done callback and free it (the request has ended). */
static void req_finish(struct tier_s3_req *r)
{
    struct tier_s3 *s3 = r->s3;
    TAILQ_REMOVE(&s3->active, r, alink);
    if (r->op.done)
        r->op.done(r->op.arg, &r->res);
    req_free(r);
}

void tier_s3_free(struct tier_s3 *s3)
{
    if (!s3)
        return;
    s3->closing = true;
    struct tier_s3_req *r;
    while ((r = TAILQ_FIRST(&s3->active)) != NULL) {
        if (!r->ended)
            req_end(r, -ECANCELED, "the client was closed");
        req_finish(r);
    }
    struct s3_conn *c;
    while ((c = TAILQ_FIRST(&s3->idle)) != NULL)
        conn_free(c);
    if (s3->kick)
        event_free(s3->kick);
    if (s3->ssl)
        SSL_CTX_free(s3->ssl);
    free(s3->region);
    free(s3->bucket);
    free(s3->prefix);
    free(s3->akey);
    wipe_free(s3->skey);
    free(s3);
}

void tier_s3_stats_get(struct tier_s3 *s3, struct tier_s3_stats *st)
{
    *st = s3->st;
    st->conns_open = s3->nconns;
    int idle = 0, q = 0;
    struct s3_conn *c;
    struct tier_s3_req *r;
    TAILQ_FOREACH(c, &s3->idle, link)
        idle++;
    TAILQ_FOREACH(r, &s3->waiting, qlink)
        q++;
    st->conns_idle = idle;
    st->queued = q;
}

/* ---------------------------------------------------------------- building a request */

static int query_add(struct tier_s3_req *r, size_t *used, size_t cap, const char *name,
                     const char *value)
{
    size_t nl = strlen(name), vl = strlen(value ? value : "");
    if (*used + nl + vl + 2 > cap || r->nquery >= 12)
        return -EINVAL;
    char *n = r->qstore + *used;
    memcpy(n, name, nl + 1);
    char *v = n + nl + 1;
    memcpy(v, value ? value : "", vl + 1);
    *used += nl + vl + 2;
    r->query[r->nquery++] = (struct srv_sigv4_kv){n, nl, v, vl};
    return 0;
}

static int hdr_add(struct tier_s3_req *r, const char *name, const char *value)
{
    struct hdr *h = realloc(r->hdrs, (r->nhdrs + 1) * sizeof(*h));
    if (!h)
        return -ENOMEM;
    r->hdrs = h;
    h = &r->hdrs[r->nhdrs];
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        return -ENOMEM;
    }
    for (char *p = h->name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    r->nhdrs++;
    return 0;
}

/* "/bucket/prefix+key" (path style) or "/prefix+key", encoded; key NULL: the bucket. */
static int build_uri(struct tier_s3_req *r, const char *key)
{
    struct tier_s3 *s3 = r->s3;
    size_t pl = strlen(s3->prefix), kl = key ? strlen(key) : 0;
    size_t bl = strlen(s3->bucket);
    r->uri = malloc(3 * (pl + kl) + bl + 4);
    if (!r->uri)
        return -ENOMEM;
    char *o = r->uri;
    if (!s3->vhost) {
        *o++ = '/';
        memcpy(o, s3->bucket, bl);
        o += bl;
    }
    if (key) {
        *o++ = '/';
        char *full = malloc(pl + kl + 1);
        if (!full)
            return -ENOMEM;
        memcpy(full, s3->prefix, pl);
        memcpy(full + pl, key, kl + 1);
        o += srv_sigv4_encode(full, pl + kl, true, o);
        free(full);
    } else if (s3->vhost) {
        *o++ = '/';
    }
    *o = '\0';
    return 0;
}

static int build_target(struct tier_s3_req *r)
{
    size_t len = strlen(r->uri) + 2;
    for (size_t i = 0; i < r->nquery; i++)
        len += 3 * (r->query[i].nlen + r->query[i].vlen) + 2;
    r->target = malloc(len);
    if (!r->target)
        return -ENOMEM;
    char *o = r->target;
    size_t ul = strlen(r->uri);
    memcpy(o, r->uri, ul);
    o += ul;
    for (size_t i = 0; i < r->nquery; i++) {
        *o++ = i ? '&' : '?';
        o += srv_sigv4_encode(r->query[i].name, r->query[i].nlen, false, o);
        if (r->query[i].vlen) {
            *o++ = '=';
            o += srv_sigv4_encode(r->query[i].value, r->query[i].vlen, false, o);
        }
    }
    *o = '\0';
    return 0;
}

/* prefix + @p rel into @p out (for listing parameters). */
static int with_prefix(struct tier_s3 *s3, const char *rel, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s%s", s3->prefix, rel ? rel : "");
    return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int build_query(struct tier_s3_req *r)
{
    const struct tier_s3_op *op = &r->op;
    struct tier_s3 *s3 = r->s3;
    size_t cap = 4 * TIER_S3_KEY_MAX + 1024, used = 0;
    char num[24], buf[TIER_S3_KEY_MAX + 1];
    int err = 0;
    r->query = calloc(12, sizeof(*r->query));
    r->qstore = malloc(cap);
    if (!r->query || !r->qstore)
        return -ENOMEM;
    switch (op->code) {
    case TIER_S3_LIST_OBJECTS:
    case TIER_S3_CHECK:
        err = query_add(r, &used, cap, "list-type", "2");
        if (!err)
            err = query_add(r, &used, cap, "encoding-type", "url");
        if (!err && (op->code == TIER_S3_CHECK || op->max)) {
            fmsg(num, sizeof(num), "%d", op->code == TIER_S3_CHECK ? 1 : op->max);
            err = query_add(r, &used, cap, "max-keys", num);
        }
        if (!err && (*s3->prefix || (op->prefix && *op->prefix)) &&
            !(err = with_prefix(s3, op->code == TIER_S3_CHECK ? "" : op->prefix, buf,
                                sizeof(buf))))
            err = query_add(r, &used, cap, "prefix", buf);
        if (op->code == TIER_S3_CHECK)
            break;
        if (!err && op->delimiter && *op->delimiter)
            err = query_add(r, &used, cap, "delimiter", op->delimiter);
        if (!err && op->token && *op->token)
            err = query_add(r, &used, cap, "continuation-token", op->token);
        if (!err && op->start_after && *op->start_after &&
            !(err = with_prefix(s3, op->start_after, buf, sizeof(buf))))
            err = query_add(r, &used, cap, "start-after", buf);
        break;
    case TIER_S3_MPU_LIST:
        err = query_add(r, &used, cap, "uploads", "");
        if (!err)
            err = query_add(r, &used, cap, "encoding-type", "url");
        if (!err && (*s3->prefix || (op->prefix && *op->prefix)) &&
            !(err = with_prefix(s3, op->prefix, buf, sizeof(buf))))
            err = query_add(r, &used, cap, "prefix", buf);
        if (!err && op->key_marker && *op->key_marker &&
            !(err = with_prefix(s3, op->key_marker, buf, sizeof(buf))))
            err = query_add(r, &used, cap, "key-marker", buf);
        if (!err && op->upload_marker && *op->upload_marker)
            err = query_add(r, &used, cap, "upload-id-marker", op->upload_marker);
        if (!err && op->max) {
            fmsg(num, sizeof(num), "%d", op->max);
            err = query_add(r, &used, cap, "max-uploads", num);
        }
        break;
    case TIER_S3_MPU_CREATE:
        err = query_add(r, &used, cap, "uploads", "");
        break;
    case TIER_S3_MPU_PART:
    case TIER_S3_MPU_PART_COPY:
        fmsg(num, sizeof(num), "%d", op->part_number);
        err = query_add(r, &used, cap, "partNumber", num);
        if (!err)
            err = query_add(r, &used, cap, "uploadId", op->upload_id);
        break;
    case TIER_S3_MPU_COMPLETE:
    case TIER_S3_MPU_ABORT:
        err = query_add(r, &used, cap, "uploadId", op->upload_id);
        break;
    default:
        break;
    }
    return err;
}

static void b64(const unsigned char *d, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, d, (int)n);
}

/* The CompleteMultipartUpload document. */
static int build_complete(struct tier_s3_req *r)
{
    const struct tier_s3_op *op = &r->op;
    r->xbody = evbuffer_new();
    if (!r->xbody)
        return -ENOMEM;
    int rc = evbuffer_add_printf(r->xbody, "<CompleteMultipartUpload>");
    for (size_t i = 0; rc >= 0 && i < op->nparts; i++) {
        const char *t = op->parts[i].etag;
        bool q = t[0] == '"';
        rc = evbuffer_add_printf(r->xbody, "<Part><PartNumber>%d</PartNumber><ETag>%s%s%s</ETag>"
                                 "</Part>", op->parts[i].number, q ? "" : "\"", t, q ? "" : "\"");
    }
    if (rc >= 0)
        rc = evbuffer_add_printf(r->xbody, "</CompleteMultipartUpload>");
    return rc < 0 ? -ENOMEM : 0;
}

static int op_check(const struct tier_s3_op *op, struct tier_s3 *s3)
{
    bool needs_key = op->code != TIER_S3_MPU_LIST && op->code != TIER_S3_LIST_OBJECTS &&
                     op->code != TIER_S3_CHECK;
    if (!op->done || op->code < TIER_S3_HEAD_OBJECT || op->code > TIER_S3_OP_LAST)
        return -EINVAL;
    if (needs_key && (!op->key || !*op->key ||
                      strlen(op->key) + strlen(s3->prefix) > TIER_S3_KEY_MAX))
        return -EINVAL;
    if ((op->prefix && strlen(op->prefix) > TIER_S3_KEY_MAX) ||
        (op->start_after && strlen(op->start_after) > TIER_S3_KEY_MAX) ||
        (op->key_marker && strlen(op->key_marker) > TIER_S3_KEY_MAX) ||
        (op->token && strlen(op->token) > TIER_S3_KEY_MAX) ||
        (op->upload_marker && strlen(op->upload_marker) > 512) ||
        (op->delimiter && strlen(op->delimiter) > 64))
        return -EINVAL;
    bool mpu = op->code == TIER_S3_MPU_PART || op->code == TIER_S3_MPU_COMPLETE ||
               op->code == TIER_S3_MPU_ABORT || op->code == TIER_S3_MPU_PART_COPY;
    if (mpu && (!op->upload_id || !*op->upload_id || strlen(op->upload_id) > 512))
        return -EINVAL;
    if ((op->code == TIER_S3_MPU_PART || op->code == TIER_S3_MPU_PART_COPY) &&
        (op->part_number < 1 || op->part_number > 10000))
        return -EINVAL;
    bool copy = op->code == TIER_S3_COPY_OBJECT || op->code == TIER_S3_MPU_PART_COPY;
    if (copy && (!op->copy_from || !*op->copy_from ||
                 strlen(op->copy_from) + strlen(s3->prefix) > TIER_S3_KEY_MAX ||
                 (op->copy_if_match && !hval_ok(op->copy_if_match))))
        return -EINVAL;
    if (op->code == TIER_S3_MPU_PART_COPY && !op->len)
        return -EINVAL;
    if (op->code == TIER_S3_MPU_COMPLETE) {
        if (!op->parts || op->nparts < 1 || op->nparts > 10000)
            return -EINVAL;
        for (size_t i = 0; i < op->nparts; i++)
            if (op->parts[i].number < 1 || op->parts[i].number > 10000 || !op->parts[i].etag ||
                strlen(op->parts[i].etag) >= TIER_S3_ETAG_MAX ||
                strpbrk(op->parts[i].etag, "<&>") ||
                (i && op->parts[i].number <= op->parts[i - 1].number))
                return -EINVAL;
    }
    bool body = op->code == TIER_S3_PUT_OBJECT || op->code == TIER_S3_MPU_PART;
    if (body) {
        if (op->source && op->data)
            return -EINVAL;
        if (!op->source && !op->data && op->size)
            return -EINVAL;
        if (op->source && !s3->https && !(op->sha256_hex && strlen(op->sha256_hex) == 64))
            return -EINVAL;
    }
    if (op->sha256_hex && strlen(op->sha256_hex) != 64)
        return -EINVAL;
    if ((op->content_md5 && !hval_ok(op->content_md5)) ||
        (op->content_type && !hval_ok(op->content_type)) ||
        (op->if_match && !hval_ok(op->if_match)))
        return -EINVAL;
    size_t metabytes = 0;
    for (size_t i = 0; i < op->nmeta; i++) {
        const char *n = op->meta[i].name;
        if (!n || !*n || !hval_ok(op->meta[i].value) || strlen(n) > 128)
            return -EINVAL;
        for (const char *p = n; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
                return -EINVAL;
        metabytes += strlen(n) + strlen(op->meta[i].value);
    }
    if (metabytes > 8192 || op->nmeta > 64)
        return -EINVAL;
    return 0;
}

/* x-amz-copy-source ("/bucket/prefix+key", encoded as a path), its If-Match, and the
 * range of an UploadPartCopy or the metadata directive of a CopyObject. */
static int copy_headers(struct tier_s3_req *r)
{
    const struct tier_s3_op *op = &r->op;
    struct tier_s3 *s3 = r->s3;
    size_t pl = strlen(s3->prefix), kl = strlen(op->copy_from), bl = strlen(s3->bucket);
    char *full = malloc(pl + kl + 1), *src = malloc(3 * (pl + kl) + bl + 3);
    int err = full && src ? 0 : -ENOMEM;
    if (!err) {
        memcpy(full, s3->prefix, pl);
        memcpy(full + pl, op->copy_from, kl + 1);
        char *o = src;
        *o++ = '/';
        memcpy(o, s3->bucket, bl);
        o += bl;
        *o++ = '/';
        o += srv_sigv4_encode(full, pl + kl, true, o);
        *o = '\0';
        err = hdr_add(r, "x-amz-copy-source", src);
    }
    free(full);
    free(src);
    char v[TIER_S3_ETAG_MAX + 64];
    if (!err && op->copy_if_match && *op->copy_if_match) {
        bool q = op->copy_if_match[0] == '"';
        fmsg(v, sizeof(v), "%s%s%s", q ? "" : "\"", op->copy_if_match, q ? "" : "\"");
        err = hdr_add(r, "x-amz-copy-source-if-match", v);
    }
    if (!err && op->code == TIER_S3_MPU_PART_COPY) {
        fmsg(v, sizeof(v), "bytes=%" PRIu64 "-%" PRIu64, op->off, op->off + op->len - 1);
        err = hdr_add(r, "x-amz-copy-source-range", v);
    }
    if (!err && op->code == TIER_S3_COPY_OBJECT)
        err = hdr_add(r, "x-amz-metadata-directive", op->meta_replace ? "REPLACE" : "COPY");
    return err;
}

static int build_headers(struct tier_s3_req *r)
{
    const struct tier_s3_op *op = &r->op;
    struct tier_s3 *s3 = r->s3;
    int err = 0;
    char v[128];
    bool has_body = op->code == TIER_S3_PUT_OBJECT || op->code == TIER_S3_MPU_PART;
    bool whole = op->obj_size && op->off == 0 && op->len == op->obj_size;
    if (op->code == TIER_S3_GET_OBJECT && (op->off || op->len) && !whole) {
        r->want_range = true;
        if (op->len)
            fmsg(v, sizeof(v), "bytes=%" PRIu64 "-%" PRIu64, op->off, op->off + op->len - 1);
        else
            fmsg(v, sizeof(v), "bytes=%" PRIu64 "-", op->off);
        err = hdr_add(r, "range", v);
    }
    if (!err && op->if_match && *op->if_match &&
        (op->code == TIER_S3_GET_OBJECT || op->code == TIER_S3_HEAD_OBJECT)) {
        bool q = op->if_match[0] == '"';
        char t[TIER_S3_ETAG_MAX + 4];
        fmsg(t, sizeof(t), "%s%s%s", q ? "" : "\"", op->if_match, q ? "" : "\"");
        err = hdr_add(r, "if-match", t);
    }
    if (!err && (op->code == TIER_S3_COPY_OBJECT || op->code == TIER_S3_MPU_PART_COPY))
        err = copy_headers(r);
    if (!err && (op->code == TIER_S3_PUT_OBJECT || op->code == TIER_S3_MPU_CREATE ||
                 (op->code == TIER_S3_COPY_OBJECT && op->meta_replace))) {
        if (op->content_type && *op->content_type)
            err = hdr_add(r, "content-type", op->content_type);
        for (size_t i = 0; !err && i < op->nmeta; i++) {
            char n[160];
            fmsg(n, sizeof(n), "x-amz-meta-%s", op->meta[i].name);
            err = hdr_add(r, n, op->meta[i].value);
        }
    }
    if (err)
        return err;
    /* The payload: its hash (signed over http), and Content-MD5 over https. */
    if (r->xbody) {
        size_t n = evbuffer_get_length(r->xbody);
        srv_sigv4_sha256_hex(evbuffer_pullup(r->xbody, -1), n, r->payload_hash);
        r->body_len = n;
        err = hdr_add(r, "content-type", "application/xml");
    } else if (has_body) {
        r->body_len = op->size;
        if (op->sha256_hex)
            fmsg(r->payload_hash, sizeof(r->payload_hash), "%s", op->sha256_hex);
        else if (s3->https)
            fmsg(r->payload_hash, sizeof(r->payload_hash), UNSIGNED);
        else
            srv_sigv4_sha256_hex(op->data ? op->data : "", op->size, r->payload_hash);
        if (op->content_md5) {
            err = hdr_add(r, "content-md5", op->content_md5);
        } else if (s3->https && op->data && !op->sha256_hex) {
            unsigned char md[EVP_MAX_MD_SIZE];
            unsigned int ml = 0;
            char b[32];
            if (EVP_Digest(op->data, op->size, md, &ml, EVP_md5(), NULL) != 1)
                return -ENOMEM;
            b64(md, ml, b);
            err = hdr_add(r, "content-md5", b);
        }
    } else {
        fmsg(r->payload_hash, sizeof(r->payload_hash), EMPTY_SHA256);
    }
    if (!err)
        err = hdr_add(r, "x-amz-content-sha256", r->payload_hash);
    return err;
}

static void req_free(struct tier_s3_req *r)
{
    free(r->uri);
    free(r->target);
    free(r->query);
    free(r->qstore);
    for (size_t i = 0; i < r->nhdrs; i++) {
        free(r->hdrs[i].name);
        free(r->hdrs[i].value);
    }
    free(r->hdrs);
    if (r->xbody)
        evbuffer_free(r->xbody);
    if (r->in)
        evbuffer_free(r->in);
    free(r->hval);
    if (r->defer)
        event_free(r->defer);
    tier_s3_result_fini(&r->res);
    free(r);
}

static void req_defer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tier_s3_req *r = arg;
    if (r->ended)
        req_finish(r);
}

static const llhttp_settings_t *parser_settings(void);

int tier_s3_start(struct tier_s3 *s3, const struct tier_s3_op *op, struct tier_s3_req **reqp)
{
    if (reqp)
        *reqp = NULL;
    if (!s3 || !op)
        return -EINVAL;
    if (s3->closing)
        return -ECANCELED;
    int err = op_check(op, s3);
    if (err)
        return err;
    struct tier_s3_req *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->s3 = s3;
    r->op = *op;
    r->is_head = op->code == TIER_S3_HEAD_OBJECT;
    switch (op->code) {
    case TIER_S3_HEAD_OBJECT:
        r->method = "HEAD";
        break;
    case TIER_S3_GET_OBJECT:
    case TIER_S3_MPU_LIST:
    case TIER_S3_LIST_OBJECTS:
    case TIER_S3_CHECK:
        r->method = "GET";
        break;
    case TIER_S3_PUT_OBJECT:
    case TIER_S3_MPU_PART:
    case TIER_S3_COPY_OBJECT:
    case TIER_S3_MPU_PART_COPY:
        r->method = "PUT";
        break;
    case TIER_S3_DELETE_OBJECT:
    case TIER_S3_MPU_ABORT:
        r->method = "DELETE";
        break;
    case TIER_S3_MPU_CREATE:
    case TIER_S3_MPU_COMPLETE:
        r->method = "POST";
        break;
    }
    bool bucket_op = op->code == TIER_S3_MPU_LIST || op->code == TIER_S3_LIST_OBJECTS ||
                     op->code == TIER_S3_CHECK;
    r->hval = malloc(HVAL_MAX);
    r->in = evbuffer_new();
    r->defer = event_new(s3->base, -1, 0, req_defer_cb, r);
    if (!r->hval || !r->in || !r->defer) {
        err = -ENOMEM;
        goto fail;
    }
    if ((err = build_uri(r, bucket_op ? NULL : op->key)) != 0 ||
        (err = build_query(r)) != 0 || (err = build_target(r)) != 0)
        goto fail;
    if (op->code == TIER_S3_MPU_COMPLETE && (err = build_complete(r)) != 0)
        goto fail;
    if ((err = build_headers(r)) != 0)
        goto fail;
    if (!s3->kick) {
        err = -ENOMEM;
        goto fail;
    }
    llhttp_init(&r->parser, HTTP_RESPONSE, parser_settings());
    r->parser.data = r;
    r->st = R_QUEUED;
    TAILQ_INSERT_TAIL(&s3->active, r, alink);
    s3->st.requests++;
    if (reqp)
        *reqp = r;
    pool_acquire(r);
    return 0;
fail:
    req_free(r);
    return err;
}

/* ---------------------------------------------------------------- the pool */

static void conn_readcb(struct bufferevent *bev, void *arg);
static void conn_writecb(struct bufferevent *bev, void *arg);
static void conn_eventcb(struct bufferevent *bev, short what, void *arg);

static void pool_kick(struct tier_s3 *s3)
{
    if (!TAILQ_EMPTY(&s3->waiting))
        event_active(s3->kick, EV_TIMEOUT, 0);
}

static void conn_free(struct s3_conn *c)
{
    struct tier_s3 *s3 = c->s3;
    if (c->idle)
        TAILQ_REMOVE(&s3->idle, c, link);
    if (c->direct)
        event_free(c->direct);
    if (c->bev)
        bufferevent_free(c->bev);
    if (c->fd >= 0 && !c->fd_in_bev)
        evutil_closesocket(c->fd);
    s3->nconns--;
    free(c);
    pool_kick(s3);
}

/* Open a connection for @p r: a non-blocking TCP connect of our own (so an
 * immediate failure has its exact errno and the socket gets TCP_NODELAY
 * first), watched by a plain bufferevent; https puts OpenSSL on the socket
 * once TCP is up (conn_tls_start). @return 0, or a negative error (r not
 * touched, nothing left open). */
static int conn_open(struct tier_s3_req *r)
{
    struct tier_s3 *s3 = r->s3;
    struct s3_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->s3 = s3;
    c->fd = socket(s3->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        int e = errno;
        free(c);
        return -e;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&s3->addr, s3->addrlen) < 0 && errno != EINPROGRESS) {
        int e = errno;
        evutil_closesocket(c->fd);
        free(c);
        return -e;
    }
    c->fd_in_bev = !s3->https;
    int opts = BEV_OPT_DEFER_CALLBACKS | (s3->https ? 0 : BEV_OPT_CLOSE_ON_FREE);
    c->bev = bufferevent_socket_new(s3->base, c->fd, opts);
    if (!c->bev || bufferevent_socket_connect(c->bev, NULL, 0) < 0) {
        if (c->bev)
            bufferevent_free(c->bev);
        if (!c->bev || s3->https)
            evutil_closesocket(c->fd);
        free(c);
        return -ENOMEM;
    }
    bufferevent_set_max_single_read(c->bev, MAX_IO);
    bufferevent_set_max_single_write(c->bev, MAX_IO);
    bufferevent_setcb(c->bev, conn_readcb, conn_writecb, conn_eventcb, c);
    bufferevent_set_timeouts(c->bev, &s3->t_connect, &s3->t_connect);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    s3->nconns++;
    s3->st.conns_opened++;
    c->req = r;
    r->c = c;
    r->st = R_CONNECT;
    return 0;
}

/* TCP is up on an https connection: run the TLS handshake on the socket.
 * @return 0, -ENOMEM. */
static int conn_tls_start(struct s3_conn *c)
{
    struct tier_s3 *s3 = c->s3;
    SSL *ssl = SSL_new(s3->ssl);
    if (!ssl)
        return -ENOMEM;
    SSL_set_tlsext_host_name(ssl, s3->tls_name);
    if (SSL_CTX_get_verify_mode(s3->ssl) & SSL_VERIFY_PEER) {
        struct in6_addr a6;
        struct in_addr a4;
        if (inet_pton(AF_INET, s3->tls_name, &a4) == 1 ||
            inet_pton(AF_INET6, s3->tls_name, &a6) == 1)
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), s3->tls_name);
        else
            SSL_set1_host(ssl, s3->tls_name);
    }
    bufferevent_free(c->bev); /* the plain one: does not close the socket */
    c->bev = bufferevent_openssl_socket_new(s3->base, c->fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                            BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (!c->bev) {
        SSL_free(ssl);
        return -ENOMEM;
    }
    c->fd_in_bev = true;
    bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
    bufferevent_set_max_single_read(c->bev, MAX_IO);
    bufferevent_set_max_single_write(c->bev, MAX_IO);
    bufferevent_setcb(c->bev, conn_readcb, conn_writecb, conn_eventcb, c);
    bufferevent_set_timeouts(c->bev, &s3->t_connect, &s3->t_connect);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    return 0;
}

/* Give @p r a connection now, or queue it. */
static void pool_acquire(struct tier_s3_req *r)
{
    struct tier_s3 *s3 = r->s3;
    struct s3_conn *c = TAILQ_FIRST(&s3->idle);
    if (c && !r->fresh) {
        TAILQ_REMOVE(&s3->idle, c, link);
        c->idle = false;
        c->req = r;
        r->c = c;
        s3->st.conns_reused++;
        req_send(r);
        return;
    }
    if (s3->nconns >= s3->max_conns && c) /* make room: close the least recently used */
        conn_free(TAILQ_LAST(&s3->idle, conn_list));
    if (s3->nconns < s3->max_conns) {
        int err = conn_open(r);
        if (err)
            req_end(r, err, "cannot connect to %s: %s", s3->peer, strerror(-err));
        return;
    }
    r->st = R_QUEUED;
    TAILQ_INSERT_TAIL(&s3->waiting, r, qlink);
}

static void pool_kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tier_s3 *s3 = arg;
    struct tier_s3_req *r;
    while ((r = TAILQ_FIRST(&s3->waiting)) != NULL) {
        if (s3->nconns >= s3->max_conns && TAILQ_EMPTY(&s3->idle))
            break;
        TAILQ_REMOVE(&s3->waiting, r, qlink);
        pool_acquire(r);
    }
}

/* The request is done with its connection: keep it idle if it can serve again. */
static void conn_release(struct s3_conn *c, bool reusable)
{
    struct tier_s3 *s3 = c->s3;
    c->req = NULL;
    if (!reusable || evbuffer_get_length(bufferevent_get_input(c->bev)) ||
        evbuffer_get_length(bufferevent_get_output(c->bev))) {
        conn_free(c);
        return;
    }
    c->served++;
    c->idle = true;
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    bufferevent_set_timeouts(c->bev, &s3->t_keep, NULL);
    bufferevent_enable(c->bev, EV_READ);
    TAILQ_INSERT_HEAD(&s3->idle, c, link);
    pool_kick(s3);
}

/* ---------------------------------------------------------------- ending */

static void req_end(struct tier_s3_req *r, int err, const char *fmt, ...)
{
    if (r->ended)
        return;
    struct tier_s3 *s3 = r->s3;
    if (r->st == R_QUEUED && r->c == NULL) {
        struct tier_s3_req *w;
        TAILQ_FOREACH(w, &s3->waiting, qlink) {
            if (w == r) {
                TAILQ_REMOVE(&s3->waiting, r, qlink);
                break;
            }
        }
    }
    r->ended = true;
    r->st = R_ENDED;
    if (r->direct) {
        r->direct = false;
        event_del(r->c->direct);
    }
    if (r->c) {
        struct s3_conn *c = r->c;
        r->c = NULL;
        conn_release(c, r->complete && r->keepalive);
    }
    if (err) {
        r->res.err = err;
        if (fmt && !r->res.message[0]) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->res.message, sizeof(r->res.message), fmt, ap);
            va_end(ap);
        }
        if (!r->res.message[0])
            fmsg(r->res.message, sizeof(r->res.message), "%s", srv_strerror(err));
        if (!r->res.retryable)
            r->res.retryable = tier_s3_err_retryable(err);
        if (err == -ECANCELED)
            r->res.retryable = false;
        srv_log(DEBUG, TIER, "req=- tenant=0 %s %s: %s", tier_s3_op_name(r->op.code),
                r->op.key ? r->op.key : "-", r->res.message);
    }
    event_active(r->defer, EV_TIMEOUT, 0);
}

void tier_s3_cancel(struct tier_s3_req *r)
{
    if (r && !r->ended)
        req_end(r, -ECANCELED, "cancelled");
}

/* The connection of @p r went bad before any answer byte: send again on a new
 * one if that is safe. @return true if it was sent again (or queued). */
static bool req_retry_stale(struct tier_s3_req *r)
{
    struct s3_conn *c = r->c;
    if (!c || c->served == 0 || r->got_bytes || r->resent || r->op.source ||
        strcmp(r->method, "POST") == 0)
        return false;
    r->c = NULL;
    c->req = NULL;
    conn_free(c);
    r->resent = true;
    r->fresh = true;
    r->sent = false;
    r->s3->st.resent++;
    r->hdr_done = r->msg_done = false;
    r->head_bytes = r->hnl = r->hvl = 0;
    evbuffer_drain(r->in, evbuffer_get_length(r->in));
    llhttp_reset(&r->parser);
    r->st = R_QUEUED;
    pool_acquire(r);
    return true;
}

/* ---------------------------------------------------------------- sending */

static int hdr_cmp(const void *a, const void *b)
{
    return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

/* Write the signed request head to @p out. @return 0, -ENOMEM. */
static int req_write_head(struct tier_s3_req *r, struct evbuffer *out)
{
    struct tier_s3 *s3 = r->s3;
    char date[17], day[9], scope[160], sig[65];
    uint8_t key[32];
    srv_sigv4_date_format(time(NULL), date);
    memcpy(day, date, 8);
    day[8] = '\0';
    fmsg(scope, sizeof(scope), "%s/%s/s3/aws4_request", day, s3->region);

    /* Signed headers: ours plus host and x-amz-date, sorted by name. */
    size_t n = r->nhdrs + 2;
    struct hdr *all = calloc(n, sizeof(*all));
    struct srv_sigv4_kv *kv = calloc(n, sizeof(*kv));
    char *signed_names = NULL, *canon = NULL, stackbuf[8192];
    int err = -ENOMEM;
    if (!all || !kv)
        goto out;
    memcpy(all, r->hdrs, r->nhdrs * sizeof(*all));
    all[r->nhdrs] = (struct hdr){"host", s3->host_hdr};
    all[r->nhdrs + 1] = (struct hdr){"x-amz-date", date};
    qsort(all, n, sizeof(*all), hdr_cmp);
    size_t sl = 0;
    for (size_t i = 0; i < n; i++)
        sl += strlen(all[i].name) + 1;
    signed_names = malloc(sl + 1);
    if (!signed_names)
        goto out;
    char *o = signed_names;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(all[i].name);
        if (i)
            *o++ = ';';
        memcpy(o, all[i].name, l);
        o += l;
        kv[i] = (struct srv_sigv4_kv){all[i].name, l, all[i].value, strlen(all[i].value)};
    }
    *o = '\0';
    struct srv_sigv4_req sr = {
        .method = r->method,
        .uri = r->uri,
        .query = r->query,
        .nquery = r->nquery,
        .hdrs = kv,
        .nhdrs = n,
        .signed_headers = signed_names,
        .payload_hash = r->payload_hash,
    };
    size_t clen;
    const char *creq = stackbuf;
    int rc = srv_sigv4_canonical_into(&sr, stackbuf, sizeof(stackbuf), &clen);
    if (rc == -ENOSPC) {
        rc = srv_sigv4_canonical(&sr, &canon);
        creq = canon;
    }
    if (rc < 0) {
        err = rc == -ENOENT ? -EINVAL : rc;
        goto out;
    }
    srv_sigv4_key_cached(s3->skey, day, s3->region, "s3", key);
    rc = srv_sigv4_sign(key, date, scope, creq, sig);
    memset(key, 0, sizeof(key));
    if (rc < 0) {
        err = rc;
        goto out;
    }
    rc = evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nUser-Agent: s3nfs-tier/%s\r\n", r->method,
                             r->target, S3NFS_VERSION);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        rc = evbuffer_add_printf(out, "%s: %s\r\n", all[i].name, all[i].value);
    if (rc >= 0 && (r->xbody || strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0))
        rc = evbuffer_add_printf(out, "content-length: %" PRIu64 "\r\n", r->body_len);
    if (rc >= 0)
        rc = evbuffer_add_printf(out,
                                 "authorization: " SRV_SIGV4_ALGORITHM " Credential=%s/%s, "
                                 "SignedHeaders=%s, Signature=%s\r\n\r\n",
                                 s3->akey, scope, signed_names, sig);
    err = rc < 0 ? -ENOMEM : 0;
out:
    free(all);
    free(kv);
    free(signed_names);
    free(canon);
    return err;
}

/* Pull source bytes while the output is below SRC_HIGH. @return false if the
 * request ended (source error or cancel inside it). */
static bool req_pump(struct tier_s3_req *r)
{
    struct evbuffer *out = bufferevent_get_output(r->c->bev);
    while (r->src_given < r->body_len && !r->src_wait) {
        size_t have = evbuffer_get_length(out);
        if (have >= SRC_HIGH)
            break;
        uint64_t want = r->body_len - r->src_given;
        if (want > SRC_HIGH - have)
            want = SRC_HIGH - have;
        ssize_t n = r->op.source(r->op.source_arg, out, (size_t)want);
        if (r->ended)
            return false;
        size_t got = evbuffer_get_length(out) - have;
        if (n < 0) {
            req_end(r, (int)n, "the body source failed: %s", srv_strerror((int)n));
            return false;
        }
        if ((size_t)n != got || (uint64_t)n > want) {
            req_end(r, -EINVAL, "the body source returned %zd bytes but appended %zu (max %" PRIu64
                    ")", n, got, want);
            return false;
        }
        if (n == 0)
            r->src_wait = true;
        r->src_given += (uint64_t)n;
        r->res.bytes += (uint64_t)n;
    }
    if (r->src_given >= r->body_len)
        bufferevent_setwatermark(r->c->bev, EV_WRITE, 0, 0);
    return true;
}

static void req_send(struct tier_s3_req *r)
{
    struct s3_conn *c = r->c;
    struct tier_s3 *s3 = r->s3;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    int err = req_write_head(r, out);
    if (err) {
        req_end(r, err, "cannot sign the request: %s", srv_strerror(err));
        return;
    }
    r->st = R_SEND;
    r->src_given = 0;
    r->src_wait = false;
    if (r->xbody) {
        evbuffer_add(out, evbuffer_pullup(r->xbody, -1), evbuffer_get_length(r->xbody));
    } else if (r->op.data && r->body_len) {
        if (evbuffer_add_reference(out, r->op.data, (size_t)r->body_len, NULL, NULL) < 0) {
            req_end(r, -ENOMEM, "out of memory");
            return;
        }
        r->res.bytes = r->body_len;
    } else if (r->op.source) {
        r->res.bytes = 0;
        bufferevent_setwatermark(c->bev, EV_WRITE, SRC_LOW, 0);
        if (!req_pump(r))
            return;
    }
    /* While we send, the remote may answer early (an error); no read timeout yet. */
    bufferevent_set_timeouts(c->bev, NULL, &s3->t_idle);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void conn_writecb(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    struct tier_s3_req *r = c->req;
    if (!r || r->st != R_SEND || r->sent)
        return;
    if (r->op.source && r->src_given < r->body_len) {
        req_pump(r);
        return;
    }
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        r->sent = true;
        if (!r->got_bytes)
            bufferevent_set_timeouts(bev, &r->s3->t_first, NULL);
    }
}

void tier_s3_resume(struct tier_s3_req *r)
{
    if (!r || r->ended || !r->c)
        return;
    if (r->paused) {
        r->paused = false;
        bufferevent_enable(r->c->bev, EV_READ);
        req_read(r); /* what arrived before the pause */
        if (!r->ended && !r->paused && r->eof_pending) {
            r->eof_pending = false;
            conn_eventcb(r->c->bev, BEV_EVENT_EOF | BEV_EVENT_READING, r->c);
        }
        return;
    }
    if (r->src_wait && r->st == R_SEND) {
        r->src_wait = false;
        if (req_pump(r) && r->src_given >= r->body_len)
            conn_writecb(r->c->bev, r->c);
    }
}

/* ---------------------------------------------------------------- the answer */

#define REQ(p) ((struct tier_s3_req *)(p)->data)

static int on_hfield(llhttp_t *p, const char *at, size_t len)
{
    struct tier_s3_req *r = REQ(p);
    r->head_bytes += len;
    if (r->hnl + len >= sizeof(r->hname)) {
        r->hbad = true;
        return 0;
    }
    memcpy(r->hname + r->hnl, at, len);
    r->hnl += len;
    return 0;
}

static int on_hvalue(llhttp_t *p, const char *at, size_t len)
{
    struct tier_s3_req *r = REQ(p);
    r->head_bytes += len;
    if (r->hvl + len >= HVAL_MAX) {
        r->hbad = true;
        return 0;
    }
    memcpy(r->hval + r->hvl, at, len);
    r->hvl += len;
    return 0;
}

/* One complete header line of the answer. */
static int on_hvalue_done(llhttp_t *p)
{
    struct tier_s3_req *r = REQ(p);
    struct tier_s3_result *res = &r->res;
    r->hname[r->hnl] = '\0';
    r->hval[r->hvl] = '\0';
    const char *n = r->hname, *v = r->hval;
    if (r->head_bytes > HEAD_MAX || r->hbad)
        return -1;
    if (!strcasecmp(n, "etag")) {
        tier__etag_copy(v, res->obj.etag, sizeof(res->obj.etag));
    } else if (!strcasecmp(n, "last-modified")) {
        res->obj.last_modified = tier__s3_date_parse(v);
    } else if (!strcasecmp(n, "x-amz-version-id")) {
        fmsg(res->obj.version_id, sizeof(res->obj.version_id), "%s", v);
    } else if (!strcasecmp(n, "content-type")) {
        fmsg(res->obj.content_type, sizeof(res->obj.content_type), "%s", v);
    } else if (!strcasecmp(n, "x-amz-request-id")) {
        fmsg(res->request_id, sizeof(res->request_id), "%s", v);
    } else if (!strcasecmp(n, "content-range")) {
        uint64_t a, b, total;
        if (sscanf(v, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &a, &b, &total) == 3) {
            res->range_off = a;
            res->obj.size = total;
        }
    } else if (!strncasecmp(n, "x-amz-meta-", 11) && n[11]) {
        if (res->nmeta == r->meta_cap) {
            size_t nc = r->meta_cap ? r->meta_cap * 2 : 8;
            struct tier_s3_kv *m = realloc(res->meta, nc * sizeof(*m));
            if (!m)
                return -1;
            res->meta = m;
            r->meta_cap = nc;
        }
        char *mn = strdup(n + 11), *mv = strdup(v);
        if (!mn || !mv) {
            free(mn);
            free(mv);
            return -1;
        }
        for (char *q = mn; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        res->meta[res->nmeta++] = (struct tier_s3_kv){mn, mv};
    }
    r->hnl = 0;
    r->hvl = 0;
    return 0;
}

static int on_headers_done(llhttp_t *p)
{
    struct tier_s3_req *r = REQ(p);
    int status = p->status_code;
    if (status < 200) { /* 100 Continue and friends: the real answer follows */
        r->head_bytes = 0;
        return 0;
    }
    r->res.status = status;
    r->hdr_done = true;
    r->keepalive = llhttp_should_keep_alive(p);
    if (r->is_head || status == 204 || status == 304) {
        if (r->is_head && status / 100 == 2 && (p->flags & F_CONTENT_LENGTH))
            r->res.obj.size = p->content_length;
        return 1; /* no body */
    }
    if (status / 100 == 2 && r->op.code == TIER_S3_GET_OBJECT && !r->want_range &&
        (p->flags & F_CONTENT_LENGTH))
        r->res.obj.size = p->content_length;
    if ((p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED)) {
        r->remaining = p->content_length;
        r->st = R_BODY_LEN;
        return HPE_PAUSED;
    }
    r->st = R_BODY_PARSE;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct tier_s3_req *r = REQ(p);
    return evbuffer_add(r->in, at, len) == 0 ? 0 : -1;
}

static int on_msg_done(llhttp_t *p)
{
    struct tier_s3_req *r = REQ(p);
    if (!r->hdr_done) /* the end of a 1xx */
        return 0;
    r->msg_done = true;
    return HPE_PAUSED;
}

static const llhttp_settings_t parser_cfg = {
    .on_header_field = on_hfield,
    .on_header_value = on_hvalue,
    .on_header_value_complete = on_hvalue_done,
    .on_headers_complete = on_headers_done,
    .on_body = on_body,
    .on_message_complete = on_msg_done,
};

static const llhttp_settings_t *parser_settings(void)
{
    return &parser_cfg;
}

/* Feed llhttp from @p in until it pauses or @p in is empty; drain what it took.
 * @return 0, or -EPROTO (malformed answer). */
static int req_feed(struct tier_s3_req *r, struct evbuffer *in)
{
    struct evbuffer_iovec v[8];
    int n = evbuffer_peek(in, -1, NULL, v, 8);
    size_t used = 0;
    int err = 0;
    for (int i = 0; i < n && i < 8; i++) {
        llhttp_errno_t e = llhttp_execute(&r->parser, v[i].iov_base, v[i].iov_len);
        if (e == HPE_OK) {
            used += v[i].iov_len;
            continue;
        }
        if (e == HPE_PAUSED) {
            const char *pos = llhttp_get_error_pos(&r->parser);
            used += pos ? (size_t)(pos - (const char *)v[i].iov_base) : v[i].iov_len;
            llhttp_resume(&r->parser);
            break;
        }
        err = -EPROTO;
        fmsg(r->res.message, sizeof(r->res.message),
                 "malformed HTTP answer from %s: %s", r->s3->peer,
                 r->head_bytes > HEAD_MAX ? "headers over 64 KiB"
                                          : llhttp_errno_name(e));
        break;
    }
    evbuffer_drain(in, used);
    if (!err && !r->hdr_done && r->head_bytes > HEAD_MAX) {
        err = -EPROTO;
        fmsg(r->res.message, sizeof(r->res.message),
                 "answer headers from %s over 64 KiB", r->s3->peer);
    }
    return err;
}

/* After a caller's callback returned @p rc: false if the request ended (the
 * callback cancelled it, or returned an error, which ends it now). */
static bool cb_ok(struct tier_s3_req *r, int rc, const char *which)
{
    if (r->ended)
        return false;
    if (rc < 0) {
        req_end(r, rc, "the %s callback ended the request: %s", which, srv_strerror(rc));
        return false;
    }
    return true;
}

/* The answer's headers are in: decide how its body is used. @return false if ended. */
static bool req_headers_in(struct tier_s3_req *r)
{
    struct tier_s3_result *res = &r->res;
    int st = res->status;
    if (r->op.code != TIER_S3_GET_OBJECT || st / 100 != 2)
        return true;
    if (r->want_range) {
        if (st == 206 && res->range_off != r->op.off) {
            req_end(r, -EPROTO, "the remote answered bytes from %" PRIu64 " for a range from %"
                    PRIu64, res->range_off, r->op.off);
            return false;
        }
        if (st == 200) {
            uint64_t clen = r->parser.content_length;
            if (r->op.off != 0 || (r->op.len && clen > r->op.len)) {
                req_end(r, -EPROTO, "the remote ignored the Range header (200 for bytes %" PRIu64
                        "+%" PRIu64 ")", r->op.off, r->op.len);
                return false;
            }
            res->obj.size = clen;
        }
    }
    r->stream = r->op.on_data != NULL;
    /* a body for the caller's buffer that cannot fit (a plain GET of an object grown
     * since, a remote that ignored the range): refused before a byte of it is read
     * (the direct read takes Content-Length bytes from the socket into dest) */
    if (r->op.dest && !r->stream && (r->parser.flags & F_CONTENT_LENGTH) &&
        r->parser.content_length > r->op.dest_len - r->dest_pos) {
        req_end(r, -EPROTO, "the remote sent more than the %zu bytes asked for", r->op.dest_len);
        return false;
    }
    return !r->op.on_head || cb_ok(r, r->op.on_head(r->op.arg, res), "head");
}

/* New body bytes sit in r->in. @return false if the request ended or paused. */
static bool req_deliver(struct tier_s3_req *r)
{
    size_t n = evbuffer_get_length(r->in);
    if (!n)
        return true;
    if (!r->stream) {
        bool data = r->op.code == TIER_S3_GET_OBJECT && r->res.status / 100 == 2;
        if (!data && n > XML_MAX) {
            req_end(r, -EPROTO, "answer body from %s over 64 MiB", r->s3->peer);
            return false;
        }
        if (data && r->op.dest) { /* straight into the caller's buffer: no body kept */
            if (n > r->op.dest_len - r->dest_pos) {
                req_end(r, -EPROTO, "the remote sent more than the %zu bytes asked for",
                        r->op.dest_len);
                return false;
            }
            evbuffer_remove(r->in, (char *)r->op.dest + r->dest_pos, n);
            r->dest_pos += n;
        }
        return true;
    }
    r->res.bytes += n;
    int rc = r->op.on_data(r->op.arg, r->in);
    evbuffer_drain(r->in, evbuffer_get_length(r->in));
    if (!r->ended && rc == TIER_S3_PAUSE) {
        r->paused = true;
        bufferevent_disable(r->c->bev, EV_READ);
        return false;
    }
    return cb_ok(r, rc, "data");
}

/* Whether every byte of the request went to the socket (or TLS). */
static bool req_all_sent(struct tier_s3_req *r)
{
    if (r->sent)
        return true;
    if (!r->c || evbuffer_get_length(bufferevent_get_output(r->c->bev)))
        return false;
    return !r->op.source || r->src_given >= r->body_len;
}

/* The whole answer is in: judge it and end the request. */
static void req_answered(struct tier_s3_req *r)
{
    struct tier_s3_result *res = &r->res;
    struct tier_s3 *s3 = r->s3;
    int st = res->status;
    const char *xml = NULL;
    size_t xl = evbuffer_get_length(r->in);
    llhttp_reset(&r->parser);
    r->complete = true;
    if (!req_all_sent(r)) /* answered before our body was out: the connection cannot go on */
        r->keepalive = false;
    bool data_ok = r->op.code == TIER_S3_GET_OBJECT && st / 100 == 2;
    if (!data_ok && xl)
        xml = (const char *)evbuffer_pullup(r->in, -1);
    bool err_doc = xml && tier__s3_error_parse(xml, xl, res);
    int err = tier__s3_classify(st, err_doc ? res->code : NULL, &res->retryable);
    if (st / 100 == 2 && err_doc && !err)
        err = -EIO;
    if (err == -ENOENT && !res->code[0])
        fmsg(res->code, sizeof(res->code), r->op.code == TIER_S3_CHECK ? "NoSuchBucket"
                                                                             : "NoSuchKey");
    if (r->op.code == TIER_S3_CHECK && err == -ENOENT)
        err = SRV_ENOBUCKET;
    if (r->op.code == TIER_S3_DELETE_OBJECT && err == -ENOENT &&
        strcmp(res->code, "NoSuchKey") == 0)
        err = 0; /* already gone */
    if (err) {
        memset(&res->obj, 0, sizeof(res->obj)); /* those headers described the error */
        const char *what = res->message[0] ? res->message : "";
        char msg[sizeof(res->message)];
        switch (err) {
        case SRV_EAUTH:
            fmsg(msg, sizeof(msg), "the remote refused the credentials (%s: %s)",
                     res->code, what);
            break;
        case SRV_ENOBUCKET:
            fmsg(msg, sizeof(msg), "no bucket '%s' on the remote %s", s3->bucket, s3->peer);
            break;
        case -EACCES:
            fmsg(msg, sizeof(msg), "access denied by the remote (%s%s%s)",
                     res->code[0] ? res->code : "HTTP 403", what[0] ? ": " : "", what);
            break;
        default:
            fmsg(msg, sizeof(msg), "the remote answered %d %s%s%s", st,
                     res->code[0] ? res->code : "(no code)", what[0] ? ": " : "", what);
            break;
        }
        fmsg(res->message, sizeof(res->message), "%s", msg);
        req_end(r, err, NULL);
        return;
    }
    switch (r->op.code) {
    case TIER_S3_GET_OBJECT:
        if (!r->stream && r->op.dest) {
            res->bytes = r->dest_pos;
        } else if (!r->stream) {
            res->bytes = xl;
            res->body = r->in;
            r->in = evbuffer_new();
        }
        break;
    case TIER_S3_PUT_OBJECT:
    case TIER_S3_MPU_PART:
        res->obj.size = r->body_len;
        break;
    case TIER_S3_MPU_CREATE: {
        const char *in;
        size_t il;
        if (!xml || !tier__xml_find(xml, xml + xl, "UploadId", &in, &il, NULL) || !il) {
            req_end(r, -EPROTO, "no UploadId in the remote's answer");
            return;
        }
        res->upload_id = tier__xml_strdup(in, il);
        if (!res->upload_id) {
            req_end(r, -ENOMEM, NULL);
            return;
        }
        break;
    }
    case TIER_S3_MPU_COMPLETE: {
        const char *in;
        size_t il;
        char tag[TIER_S3_ETAG_MAX + 16];
        if (!xml || !tier__xml_find(xml, xml + xl, "CompleteMultipartUploadResult", &in, &il,
                                    NULL)) {
            req_end(r, -EPROTO, "no CompleteMultipartUploadResult in the remote's answer");
            return;
        }
        const char *e;
        size_t el;
        if (tier__xml_find(in, in + il, "ETag", &e, &el, NULL)) {
            tier__xml_text(e, el, tag, sizeof(tag));
            tier__etag_copy(tag, res->obj.etag, sizeof(res->obj.etag));
        }
        break;
    }
    case TIER_S3_COPY_OBJECT:
    case TIER_S3_MPU_PART_COPY: {
        /* the copy's ETag is in the answer's body, not in a header */
        const char *in, *e;
        size_t il, el;
        char tag[TIER_S3_ETAG_MAX + 16];
        const char *doc = r->op.code == TIER_S3_COPY_OBJECT ? "CopyObjectResult" : "CopyPartResult";
        if (!xml || !tier__xml_find(xml, xml + xl, doc, &in, &il, NULL) ||
            !tier__xml_find(in, in + il, "ETag", &e, &el, NULL)) {
            req_end(r, -EPROTO, "no %s ETag in the remote's answer", doc);
            return;
        }
        tier__xml_text(e, el, tag, sizeof(tag));
        tier__etag_copy(tag, res->obj.etag, sizeof(res->obj.etag));
        break;
    }
    case TIER_S3_LIST_OBJECTS:
    case TIER_S3_MPU_LIST: {
        int rc = !xml ? -EPROTO
                 : r->op.code == TIER_S3_LIST_OBJECTS
                     ? tier__s3_list_parse(xml, xl, s3->prefix, res)
                     : tier__s3_uploads_parse(xml, xl, s3->prefix, res);
        if (rc) {
            req_end(r, rc, "cannot read the remote's %s answer", tier_s3_op_name(r->op.code));
            return;
        }
        break;
    }
    default:
        break;
    }
    req_end(r, 0, NULL);
}

/* Whether @p r's answer body goes into op.dest (a 2xx GET without on_data). */
static bool req_to_dest(const struct tier_s3_req *r)
{
    return r->op.dest && !r->stream && r->op.code == TIER_S3_GET_OBJECT && r->res.status / 100 == 2;
}

static void conn_direct_cb(evutil_socket_t fd, short what, void *arg);

/* A plain connection whose answer's Content-Length body goes into op.dest, its
 * input empty: read the rest from the socket straight into op.dest (one copy,
 * no evbuffer chains, no FIONREAD per read), the bufferevent not reading until
 * the request ends (conn_release turns its reading on again). */
static void req_direct_start(struct tier_s3_req *r)
{
    struct s3_conn *c = r->c;
    if (r->remaining > r->op.dest_len - r->dest_pos)
        return; /* (refused at the headers already: the bufferevent path refuses too) */
    if (!c->direct) {
        c->direct = event_new(r->s3->base, c->fd, EV_READ | EV_PERSIST, conn_direct_cb, c);
        if (!c->direct)
            return; /* the bufferevent goes on reading */
    }
    if (event_add(c->direct, &r->s3->t_idle) != 0)
        return;
    bufferevent_disable(c->bev, EV_READ);
    r->direct = true;
}

#define DIRECT_MAX (8u << 20) /* bytes read per readiness at most: fair to other connections */

static void conn_direct_cb(evutil_socket_t fd, short what, void *arg)
{
    struct s3_conn *c = arg;
    struct tier_s3_req *r = c->req;
    if (!r || !r->direct)
        return;
    if (what & EV_TIMEOUT) {
        req_end(r, -ETIMEDOUT, "timed out reading the answer (%s)", r->s3->peer);
        return;
    }
    size_t took = 0;
    while (r->remaining && took < DIRECT_MAX) {
        ssize_t n = read(fd, (char *)r->op.dest + r->dest_pos, (size_t)r->remaining);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            int e = n == 0 ? ECONNRESET : errno;
            if (n == 0)
                req_end(r, -ECONNRESET, "%s closed the connection reading the answer", r->s3->peer);
            else
                req_end(r, -e, "connection to %s failed reading the answer: %s", r->s3->peer,
                        strerror(e));
            return;
        }
        r->dest_pos += (size_t)n;
        r->remaining -= (uint64_t)n;
        took += (size_t)n;
    }
    if (r->remaining == 0) {
        r->direct = false;
        event_del(c->direct);
        req_answered(r);
    }
}

static void req_read(struct tier_s3_req *r)
{
    struct evbuffer *in = bufferevent_get_input(r->c->bev);
    while (!r->ended && !r->paused && evbuffer_get_length(in) > 0) {
        if (!r->got_bytes) {
            r->got_bytes = true;
            bufferevent_set_timeouts(r->c->bev, &r->s3->t_idle, r->sent ? NULL : &r->s3->t_idle);
        }
        if (r->st == R_SEND || r->st == R_BODY_PARSE) { /* headers, or a body llhttp frames */
            bool had = r->hdr_done;
            int err = req_feed(r, in);
            if (err) {
                req_end(r, err, NULL);
                return;
            }
            if (!had && r->hdr_done && !req_headers_in(r))
                return;
            if (r->st == R_BODY_PARSE && !req_deliver(r) && r->ended)
                return;
        } else if (r->st == R_BODY_LEN && req_to_dest(r)) { /* into the caller's buffer */
            if (r->remaining > r->op.dest_len - r->dest_pos) {
                req_end(r, -EPROTO, "the remote sent more than the %zu bytes asked for",
                        r->op.dest_len);
                return;
            }
            size_t n = evbuffer_get_length(in);
            if (n > r->remaining)
                n = (size_t)r->remaining;
            evbuffer_remove(in, (char *)r->op.dest + r->dest_pos, n);
            r->dest_pos += n;
            r->remaining -= n;
        } else if (r->st == R_BODY_LEN) { /* a Content-Length body, moved without a copy */
            size_t n = evbuffer_get_length(in);
            if (n > r->remaining)
                n = (size_t)r->remaining;
            evbuffer_remove_buffer(in, r->in, n);
            r->remaining -= n;
            if (!req_deliver(r) && r->ended)
                return;
        } else {
            break;
        }
        /* Complete even if the last delivery paused: nothing is left to read. */
        if (r->msg_done || (r->st == R_BODY_LEN && r->remaining == 0)) {
            req_answered(r);
            return;
        }
    }
    if (!r->ended && r->st == R_BODY_LEN && r->remaining && !r->direct && req_to_dest(r) &&
        !r->s3->https && evbuffer_get_length(in) == 0)
        req_direct_start(r);
}

static void conn_readcb(struct bufferevent *bev, void *arg)
{
    struct s3_conn *c = arg;
    if (!c->req) { /* an idle connection must stay silent */
        srv_log(DEBUG, TIER, "req=- tenant=0 %s sent bytes on an idle connection; closed",
                c->s3->peer);
        conn_free(c);
        return;
    }
    if (c->req->st == R_CONNECT)
        return;
    req_read(c->req);
}

/* What failed on a connection, as an error and a message. */
static int conn_error(struct s3_conn *c, short what, struct tier_s3_req *r, char *msg,
                      size_t cap)
{
    struct tier_s3 *s3 = c->s3;
    const char *phase = !c->tcp_up ? "connecting"
                        : !c->connected ? "in the TLS handshake"
                        : !r || !r->sent ? "sending the request"
                        : !r->got_bytes ? "waiting for the answer"
                                        : "reading the answer";
    if (what & BEV_EVENT_TIMEOUT) {
        fmsg(msg, cap, "timed out %s (%s)", phase, s3->peer);
        return -ETIMEDOUT;
    }
    if (s3->https && c->tcp_up) {
        unsigned long e, first = 0;
        while ((e = bufferevent_get_openssl_error(c->bev)) != 0)
            if (!first)
                first = e;
        SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
        long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
        if (!c->connected && vr != X509_V_OK) {
            fmsg(msg, cap, "TLS with %s: certificate verify failed: %s", s3->tls_name,
                     X509_verify_cert_error_string(vr));
            return SRV_ETLS;
        }
        if (first) {
            char es[200];
            ERR_error_string_n(first, es, sizeof(es));
            fmsg(msg, cap, "TLS with %s failed %s: %s", s3->tls_name, phase, es);
            return c->connected ? -ECONNRESET : SRV_ETLS;
        }
    }
    if (what & BEV_EVENT_EOF) {
        fmsg(msg, cap, "%s closed the connection %s", s3->peer, phase);
        return -ECONNRESET;
    }
    int e = EVUTIL_SOCKET_ERROR();
    if (e == 0 || e == EAGAIN || e == EINPROGRESS)
        e = ECONNRESET;
    if (!c->tcp_up)
        fmsg(msg, cap, "cannot connect to %s: %s", s3->peer, strerror(e));
    else
        fmsg(msg, cap, "connection to %s failed %s: %s", s3->peer, phase, strerror(e));
    return -e;
}

static void conn_eventcb(struct bufferevent *bev, short what, void *arg)
{
    struct s3_conn *c = arg;
    struct tier_s3_req *r = c->req;
    if (what & BEV_EVENT_CONNECTED) {
        if (!c->tcp_up && c->s3->https) {
            c->tcp_up = true;
            int err = conn_tls_start(c);
            if (err && r)
                req_end(r, err, "cannot start TLS: %s", srv_strerror(err));
            else if (err)
                conn_free(c);
            return;
        }
        c->tcp_up = true;
        c->connected = true;
        if (r)
            req_send(r);
        return;
    }
    if (!r) { /* idle: closed by the remote, or kept too long */
        conn_free(c);
        return;
    }
    if (r->paused && (what & BEV_EVENT_EOF)) { /* the rest waits in the input */
        r->eof_pending = true;
        return;
    }
    if ((what & BEV_EVENT_EOF) && r->st == R_BODY_PARSE) {
        /* an answer delimited by the close */
        llhttp_finish(&r->parser);
        if (r->msg_done) {
            r->keepalive = false;
            if (req_deliver(r))
                req_answered(r);
            return;
        }
    }
    char msg[256];
    int err = conn_error(c, what, r, msg, sizeof(msg));
    if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) && !(what & BEV_EVENT_TIMEOUT) &&
        c->connected && req_retry_stale(r)) {
        srv_log(DEBUG, TIER, "req=- tenant=0 %s: %s; sent again on a new connection",
                tier_s3_op_name(r->op.code), msg);
        return;
    }
    req_end(r, err, "%s", msg);
}

/* ---------------------------------------------------------------- blocking wrapper */

struct sync_call {
    struct tier_s3 *s3;
    struct tier_s3_op op;
    struct tier_s3_result *res;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void sync_signal(struct sync_call *sc)
{
    pthread_mutex_lock(&sc->mu);
    sc->done = true;
    pthread_cond_signal(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
}

static void sync_done(void *arg, struct tier_s3_result *res)
{
    struct sync_call *sc = arg;
    tier_s3_result_take(sc->res, res);
    sync_signal(sc);
}

static void sync_start(evutil_socket_t fd, short what, void *arg)
{
    struct sync_call *sc = arg;
    int rc = tier_s3_start(sc->s3, &sc->op, NULL);
    if (rc < 0) {
        sc->res->err = rc;
        fmsg(sc->res->message, sizeof(sc->res->message), "the request was refused: %s",
                 srv_strerror(rc));
        sync_signal(sc);
    }
}

int tier_s3_run(struct tier_s3 *s3, const struct tier_s3_op *op, struct tier_s3_result *res)
{
    memset(res, 0, sizeof(*res));
    struct sync_call sc = {.s3 = s3, .op = *op, .res = res};
    sc.op.done = sync_done;
    sc.op.arg = &sc;
    pthread_mutex_init(&sc.mu, NULL);
    pthread_cond_init(&sc.cv, NULL);
    struct timeval now = {0, 0};
    if (event_base_once(s3->base, -1, EV_TIMEOUT, sync_start, &sc, &now) < 0) {
        res->err = -ENOMEM;
        fmsg(res->message, sizeof(res->message), "cannot post to the client's loop");
    } else {
        pthread_mutex_lock(&sc.mu);
        while (!sc.done)
            pthread_cond_wait(&sc.cv, &sc.mu);
        pthread_mutex_unlock(&sc.mu);
    }
    pthread_mutex_destroy(&sc.mu);
    pthread_cond_destroy(&sc.cv);
    return res->err;
}
