/* SPDX-License-Identifier: Apache-2.0
 * nfs_rpc: the ONC RPC transport of the NFS front end and its dispatch tables.
 *
 * One TCP listener (on loop 0) hands each accepted socket to a loop thread,
 * where the connection lives for its life as a bufferevent. Incoming bytes
 * are cut into records (nfs_rec), each record's call header is checked
 * (RPC version, program, version, procedure, credential flavor) and the call
 * goes to the worker pool: arguments are decoded, the procedure runs its core
 * calls, and the reply is encoded there; the loop only writes the finished
 * reply. Many calls of one connection run at once and are answered in
 * completion order, which RPC allows since replies carry the xid.
 *
 * Loop answers: a hand-off to a worker and back costs two thread wake-ups,
 * which on a shared machine is most of the time and CPU of a GETATTR
 * (perf: context switches, futex wake-ups and lock waits; the core call
 * itself is a few microseconds). So procedures flagged NFS_PF_LOOP (those
 * that only read metadata, and READ of bytes already verified in the page
 * cache, core_read_pieces) run on the loop thread itself, with
 * CORE_P_NOWAIT: where the core would wait for another operation (a setattr
 * holding the inode) it answers -EWOULDBLOCK and the call goes to a worker
 * as before, from scratch. The metadata is read from LMDB's map, which is
 * normally resident; a read that faulted on the disk anyway shows as a
 * major fault of the loop thread (getrusage, checked after every loop
 * answer that took LOOP_SLOW_US or more: a disk read takes longer, and a
 * fault inside a faster answer is counted at the next slow one), and that
 * loop then sends every call to the workers for LOOP_BACKOFF_US, so a cold
 * store costs a loop at most one disk read per back-off period.
 * cfg.worker_only turns loop answers off. The replies made on the loop while
 * the calls of one read are taken leave together (batch_add); with
 * cfg.loop_poll_us the loop waits, running, for a lone connection's next call
 * (conn_poll_next).
 *
 * Limits: a record over cfg->max_record or a record that is not an RPC call
 * closes the connection (logged). At most NFS_CONN_MAX_CALLS calls per
 * connection are in flight; beyond that, and while more than
 * NFS_CONN_MAX_OUTPUT reply bytes wait to be sent, the connection is not read.
 * At most cfg->max_conns connections are open: the listener closes the ones
 * beyond at once (rate-limited log line). A connection that sent nothing for
 * cfg->idle_timeout_s seconds is closed when nothing of it is in flight: no
 * call running or waiting for QoS and no reply bytes unsent (clients
 * reconnect on their next call; NLM callbacks use connections of their own,
 * nlm_grant.c, so no lock state depends on an incoming connection). When
 * accept fails (out of file descriptors) the listener pauses (srv_listen).
 *
 * Non-idempotent procedures (NFS_PF_NONIDEM) pass through the duplicate
 * request cache so a retransmission gets the first reply.
 *
 * QoS: a call whose procedure has a QoS class (the descriptor's qos: every
 * NFS procedure but NULL) is admitted before it goes to the worker pool, as
 * the tenant named in its (MAC-checked) first file handle with user 0, at the
 * bucket and directory levels of that handle's inode and at the level of its
 * AUTH_UNIX uid (a tenant user's policy naming it, else the NFS default
 * class): READ and WRITE as read/write of their byte count, the rest as
 * metadata operations. A READ or WRITE larger than the smallest burst on its
 * path is admitted in pieces (qos_admit_piece_at), each waiting for its
 * tokens at every level, and runs once all are admitted: it never passes at
 * once leaving debt behind. A call
 * that waits does so on the loop's timers; a call QoS refuses (a piece waited
 * longer than qos_max_wait_ms) is answered NFS3ERR_JUKEBOX (the client
 * retries later).
 *
 * Thread: nfs_server_start/stop on the main thread; connection state on the
 * connection's loop thread only; nfs_server fields under s->lock. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netconfig.h>
#include <rpc/rpcb_clnt.h>

#include "meta_record.h"
#include "nfs_int.h"
#include "qos_admit.h"
#include "srv_addr.h"
#include "srv_alloc.h"
#include "srv_err.h"
#include "srv_listen.h"
#include "srv_log.h"
#include "srv_loop.h"
#include "srv_metrics.h"

#define NFS_CONN_MAX_CALLS 128
#define NFS_CONN_MAX_OUTPUT ((size_t)16 * 1024 * 1024)
#define NFS_DIRECT_MIN ((size_t)16 * 1024) /* fragment bytes worth a recv() of their own */
#define NFS_READ_CHUNK ((size_t)16 * 1024) /* most bytes one read into the input buffer takes */
#define NFS_MAX_IO ((size_t)4 * 1024 * 1024)    /* most bytes one socket write moves */
#define NFS_BULK_COPY_MAX ((uint64_t)16 * 1024) /* READ data sent from memory up to this */
#define NFS_BATCH_MAX ((size_t)64 * 1024)       /* most reply bytes of one read pass per write */
#define NFS_DRC_CAPACITY 8192
#define NFS_FH_KEY_NAME "nfs.fh_key"
#define LOOP_BACKOFF_US ((uint64_t)1000 * 1000)
#define POLL_STEP_US ((uint64_t)5)    /* between two looks at the socket while polling */
#define POLL_SPAN_US ((uint64_t)2000) /* most time one readable event keeps the loop polling */
/* A loop answer at least this long may have waited for the disk: only then is
 * the thread's major fault count read (a syscall, a sixth of a GETATTR's). */
#define LOOP_SLOW_US ((uint64_t)20)

struct nfs_conn {
    struct nfs_server *srv;
    struct srv_loop *loop;
    struct bufferevent *bev; /* the reply side; its input is filled by rd_ev (conn_sock_cb) */
    struct event *rd_ev;     /* the socket readable, or idle_timeout_s without input */
    struct timeval idle;     /* rd_ev's timeout (a common timeout of the loop), if has_idle */
    bool has_idle;
    struct sockaddr_storage peer;
    char peer_str[INET6_ADDRSTRLEN + 8];
    struct nfs_rec rec;
    unsigned outstanding;
    unsigned depth; /* nesting of our callbacks on the stack: never free under them */
    unsigned cork;  /* nesting of read passes (conn_read_cb): replies may be batched */
    struct nfs_req *qwait; /* calls waiting for QoS admission (loop thread) */
    bool closed;
    bool paused;
    struct nfs_conn *prev, *next; /* s->conns, under s->lock */
};

static void conn_read_cb(struct nfs_conn *cn);

/* ---- dispatch tables ---- */

static bool_t xdr_nothing(XDR *x, void *p)
{
    return TRUE;
}

/* The procedure tables are laid out by hand, a procedure a line or two. */
/* clang-format off */
#define X(f) NFS_XDRPROC(f)
#define NFS3(proc, A, R, nm, fl)                                                                   \
    {.fn = nfs3_##proc, .xdr_args = X(xdr_##A), .xdr_res = X(xdr_##R),                            \
     .args_size = sizeof(A), .res_size = sizeof(R), .name = nm, .flags = fl, .qos = NFS_QOS_META}
/* A procedure that takes names: decoded by nfs3_names_decode (NUL bytes). */
#define NFS3N(proc, A, R, nm, fl)                                                                  \
    {.fn = nfs3_##proc, .decode = nfs3_names_decode, .xdr_args = X(xdr_##A),                       \
     .xdr_res = X(xdr_##R), .args_size = sizeof(A), .res_size = sizeof(R), .name = nm,             \
     .flags = fl, .qos = NFS_QOS_META}
#define VOIDPROC(f, nm)                                                                            \
    {.fn = f, .xdr_args = X(xdr_nothing), .xdr_res = X(xdr_nothing), .name = nm}

const struct nfs_proc_desc nfs3_procs[22] = {
    VOIDPROC(nfs3_null, "NULL"),
    NFS3(getattr, GETATTR3args, GETATTR3res, "GETATTR", NFS_PF_LOOP),
    NFS3(setattr, SETATTR3args, SETATTR3res, "SETATTR", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(lookup, LOOKUP3args, LOOKUP3res, "LOOKUP", NFS_PF_LOOP),
    NFS3(access, ACCESS3args, ACCESS3res, "ACCESS", NFS_PF_LOOP),
    NFS3(readlink, READLINK3args, READLINK3res, "READLINK", 0),
    {.fn = nfs3_read, .xdr_args = X(xdr_READ3args), .xdr_res = X(xdr_READ3res),
     .args_size = sizeof(READ3args), .res_size = sizeof(READ3res), .name = "READ",
     .flags = NFS_PF_LOOP, .qos = NFS_QOS_READ},
    {.fn = nfs3_write, .decode = nfs3_write_decode, .free_args = nfs3_write_args_free,
     .xdr_args = X(xdr_WRITE3args), .xdr_res = X(xdr_WRITE3res), .args_size = sizeof(WRITE3args),
     .res_size = sizeof(WRITE3res), .name = "WRITE", .flags = NFS_PF_MODIFY, .qos = NFS_QOS_WRITE},
    NFS3N(create, CREATE3args, CREATE3res, "CREATE", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(mkdir, MKDIR3args, MKDIR3res, "MKDIR", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(symlink, SYMLINK3args, SYMLINK3res, "SYMLINK", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(mknod, MKNOD3args, MKNOD3res, "MKNOD", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(remove, REMOVE3args, REMOVE3res, "REMOVE", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(rmdir, RMDIR3args, RMDIR3res, "RMDIR", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(rename, RENAME3args, RENAME3res, "RENAME", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    NFS3N(link, LINK3args, LINK3res, "LINK", NFS_PF_NONIDEM | NFS_PF_MODIFY),
    /* results encoded by the procedure (nfs_dir.c) */
    {.fn = nfs3_readdir, .xdr_args = X(xdr_READDIR3args), .xdr_res = X(xdr_nfs_dirres),
     .args_size = sizeof(READDIR3args), .res_size = sizeof(struct nfs_dirres), .name = "READDIR",
     .flags = NFS_PF_LOOP, .qos = NFS_QOS_META},
    {.fn = nfs3_readdirplus, .xdr_args = X(xdr_READDIRPLUS3args), .xdr_res = X(xdr_nfs_dirres),
     .args_size = sizeof(READDIRPLUS3args), .res_size = sizeof(struct nfs_dirres),
     .name = "READDIRPLUS", .flags = NFS_PF_LOOP, .qos = NFS_QOS_META},
    NFS3(fsstat, FSSTAT3args, FSSTAT3res, "FSSTAT", 0),
    NFS3(fsinfo, FSINFO3args, FSINFO3res, "FSINFO", NFS_PF_LOOP),
    NFS3(pathconf, PATHCONF3args, PATHCONF3res, "PATHCONF", NFS_PF_LOOP),
    NFS3(commit, COMMIT3args, COMMIT3res, "COMMIT", 0),
};

#define MNT(f, A, asz, R, rsz, nm)                                                                 \
    {.fn = f, .xdr_args = X(A), .xdr_res = X(R), .args_size = asz, .res_size = rsz, .name = nm}
const struct nfs_proc_desc mnt_procs[6] = {
    VOIDPROC(mnt_null, "MNT_NULL"),
    MNT(mnt_mnt, xdr_dirpath, sizeof(dirpath), xdr_mountres3, sizeof(mountres3), "MNT"),
    MNT(mnt_dump, xdr_nothing, 0, xdr_mountlist, sizeof(mountlist), "MNT_DUMP"),
    MNT(mnt_umnt, xdr_dirpath, sizeof(dirpath), xdr_nothing, 0, "UMNT"),
    VOIDPROC(mnt_umntall, "UMNTALL"),
    MNT(mnt_export, xdr_nothing, 0, xdr_exports, sizeof(exports), "MNT_EXPORT"),
};
#undef MNT

#define NLM(f, A, R, nm)                                                                           \
    {.fn = f, .xdr_args = X(xdr_##A), .xdr_res = X(xdr_##R), .args_size = sizeof(A),              \
     .res_size = sizeof(R), .name = nm}
/* Procedures without a function answer PROC_UNAVAIL: the asynchronous
 * _MSG/_RES forms (they need callbacks to the client), GRANTED (a client-side
 * procedure) and the DOS share reservations (SHARE/UNSHARE). */
const struct nfs_proc_desc nlm_procs[24] = {
    [0] = VOIDPROC(nfs3_null, "NLM_NULL"),
    [1] = NLM(nlm4_op_test, nlm4_testargs, nlm4_testres, "NLM_TEST"),
    [2] = NLM(nlm4_op_lock, nlm4_lockargs, nlm4_res, "NLM_LOCK"),
    [3] = NLM(nlm4_op_cancel, nlm4_cancargs, nlm4_res, "NLM_CANCEL"),
    [4] = NLM(nlm4_op_unlock, nlm4_unlockargs, nlm4_res, "NLM_UNLOCK"),
    [22] = NLM(nlm4_op_lock, nlm4_lockargs, nlm4_res, "NLM_NM_LOCK"),
    [23] = {.fn = nlm4_op_free_all, .xdr_args = X(xdr_nlm4_notify), .xdr_res = X(xdr_nothing),
            .args_size = sizeof(nlm4_notify), .name = "NLM_FREE_ALL"},
};
/* SM_MON, SM_UNMON, SM_UNMON_ALL and SM_SIMU_CRASH serve a host's own lock
 * manager, which this server does not monitor for: PROC_UNAVAIL. */
const struct nfs_proc_desc nsm_procs[7] = {
    [0] = VOIDPROC(nfs3_null, "SM_NULL"),
    [1] = NLM(nsm_op_stat, sm_name, sm_stat_res, "SM_STAT"),
    [6] = {.fn = nsm_op_notify, .xdr_args = X(xdr_stat_chge), .xdr_res = X(xdr_nothing),
           .args_size = sizeof(stat_chge), .name = "SM_NOTIFY"},
};
#undef NLM
#undef VOIDPROC
/* clang-format on */

/* The programs served on the one port, with the one version of each. */
struct nfs_prog {
    uint32_t prog, vers;
    const struct nfs_proc_desc *tab;
    size_t n;
};
static const struct nfs_prog progs[] = {
    {NFS_PROG, NFS_VERS, nfs3_procs, sizeof(nfs3_procs) / sizeof(nfs3_procs[0])},
    {MNT_PROG, MNT_VERS, mnt_procs, sizeof(mnt_procs) / sizeof(mnt_procs[0])},
    {NLM_PROG_NUM, NLM_VERS, nlm_procs, sizeof(nlm_procs) / sizeof(nlm_procs[0])},
    {NSM_PROG_NUM, NSM_VERS, nsm_procs, sizeof(nsm_procs) / sizeof(nsm_procs[0])},
};
#undef NFS3
#undef NFS3N
#undef X

/* ---- helpers ---- */

static void peer_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        port = ntohs(s4->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        port = ntohs(s6->sin6_port);
    }
    snprintf(buf, len, "%s:%d", host, port);
}

void nfs__inflight_add(struct nfs_server *s, long d)
{
    pthread_mutex_lock(&s->lock);
    s->inflight += d;
    if (s->inflight == 0)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* ---- connections (loop thread) ---- */

/* Free a closed connection once no call and no callback of ours refers to it. */
static void conn_maybe_free(struct nfs_conn *cn)
{
    if (!cn->closed || cn->outstanding > 0 || cn->depth > 0)
        return;
    nfs_rec_fini(&cn->rec);
    free(cn);
}

static void req_done(void *arg);

static void qwait_unlink(struct nfs_req *r)
{
    struct nfs_conn *cn = r->conn;
    if (r->qprev)
        r->qprev->qnext = r->qnext;
    else if (cn->qwait == r)
        cn->qwait = r->qnext;
    if (r->qnext)
        r->qnext->qprev = r->qprev;
    r->qprev = r->qnext = NULL;
}

static void batch_discard(struct nfs_conn *cn);

static void conn_close(struct nfs_conn *cn)
{
    if (cn->closed)
        return;
    cn->closed = true;
    batch_discard(cn);
    /* Calls still waiting for QoS: withdraw them and finish them unanswered. */
    cn->depth++;
    while (cn->qwait) {
        struct nfs_req *r = cn->qwait;
        qwait_unlink(r);
        if (qos_cancel(qos_global(), r) == 0)
            req_done(r);
        /* else: admission is under way; its go() finds the connection closed */
    }
    cn->depth--;
    struct nfs_server *s = cn->srv;
    pthread_mutex_lock(&s->lock);
    if (cn->prev)
        cn->prev->next = cn->next;
    else if (s->conns == cn)
        s->conns = cn->next;
    if (cn->next)
        cn->next->prev = cn->prev;
    cn->prev = cn->next = NULL;
    pthread_mutex_unlock(&s->lock);
    if (cn->rd_ev)
        event_free(cn->rd_ev);
    cn->rd_ev = NULL;
    bufferevent_free(cn->bev);
    cn->bev = NULL;
    __atomic_fetch_sub(&s->nconns, 1, __ATOMIC_RELAXED);
    srv_loop_conn_gone(cn->loop);
    srv_log(DEBUG, NFS, "req=- tenant=- connection from %s closed (%u calls in flight)",
            cn->peer_str, cn->outstanding);
    conn_maybe_free(cn);
}

static void batch_flush(struct nfs_conn *cn);

/* Queue a reply made on the loop (an error, a cached DRC reply) behind the
 * replies made before it. */
static void conn_send(struct nfs_conn *cn, const void *buf, size_t len)
{
    batch_flush(cn);
    if (!cn->closed && bufferevent_write(cn->bev, buf, len) < 0) {
        srv_log(WARN, NFS, "req=- tenant=- cannot queue %zu reply bytes to %s: closing", len,
                cn->peer_str);
        conn_close(cn);
    }
}

static void free_cleanup(const void *data, size_t len, void *arg)
{
    free((void *)data);
}

/* ---- READ data (struct nfs_bulk) ---- */

static void bulk_free(struct nfs_bulk *b)
{
    if (!b)
        return;
    if (b->mem)
        free(b->mem);
    else
        core_pieces_release(&b->ps);
    free(b);
}

static void bulk_unref(struct nfs_bulk *b)
{
    if (--b->refs == 0)
        bulk_free(b);
}

static void bulk_mem_done(const void *data, size_t len, void *arg)
{
    bulk_unref(arg);
}

static void bulk_seg_done(struct evbuffer_file_segment const *seg, int flags, void *arg)
{
    bulk_unref(arg);
}

/* Zeros for holes and XDR padding, added by reference. */
static const uint8_t nfs_zeros[64 * 1024];

static int evbuf_add_zeros(struct evbuffer *out, uint64_t n)
{
    while (n > 0) {
        size_t k = n < sizeof(nfs_zeros) ? (size_t)n : sizeof(nfs_zeros);
        if (evbuffer_add_reference(out, nfs_zeros, k, NULL, NULL) < 0)
            return -ENOMEM;
        n -= k;
    }
    return 0;
}

/* Copy the pieces of a READ (b->len bytes) into @p buf. The fd pieces are
 * verified page-cache bytes, read here as sendfile would read them.
 * @return 0, or -1 (a short read: the pieces go as they are). */
static int bulk_copy_into(const struct nfs_bulk *b, uint8_t *buf)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < b->ps.n; i++) {
        const struct core_piece *p = &b->ps.v[i];
        if (p->fd >= 0) {
            ssize_t n;
            do {
                n = pread(p->fd, buf + pos, (size_t)p->len, (off_t)p->off);
            } while (n < 0 && errno == EINTR);
            if (n != (ssize_t)p->len)
                return -1;
        } else if (p->mem) {
            memcpy(buf + pos, p->mem, (size_t)p->len);
        } else {
            memset(buf + pos, 0, (size_t)p->len);
        }
        pos += p->len;
    }
    return pos == b->len ? 0 : -1;
}

/* Copy the pieces of a small READ into memory (b->mem), releasing them: a
 * reply then leaves in one write and one TCP segment, where a file segment
 * costs a write for the reply's head, a sendfile and a second segment for
 * the client to take in. @return 0, or -1 (pieces kept). */
static int bulk_copy(struct nfs_bulk *b)
{
    uint8_t *buf = malloc((size_t)b->len);
    if (!buf)
        return -1;
    if (bulk_copy_into(b, buf) < 0) {
        free(buf);
        return -1;
    }
    core_pieces_release(&b->ps);
    b->mem = buf;
    return 0;
}

/* Queue the pieces of @p b, then the XDR padding, on @p out (which takes
 * ownership of @p b: it is released once the last piece left or was
 * dropped). Extents become file segments (sent with sendfile, no user-space
 * copy), memory goes by reference. @return 0, -ENOMEM (the caller closes). */
static int bulk_queue(struct evbuffer *out, struct nfs_bulk *b)
{
    int rc = 0;
    b->refs = 1; /* ours, while queueing */
    if (!b->mem && b->len > 0 && b->len <= NFS_BULK_COPY_MAX)
        (void)bulk_copy(b); /* else the pieces go as they are */
    if (b->mem) {
        b->refs++;
        if (evbuffer_add_reference(out, b->mem, (size_t)b->len, bulk_mem_done, b) < 0) {
            b->refs--;
            rc = -ENOMEM;
        }
    }
    for (size_t i = 0; rc == 0 && !b->mem && i < b->ps.n; i++) {
        const struct core_piece *p = &b->ps.v[i];
        if (p->fd >= 0) {
            struct evbuffer_file_segment *seg = evbuffer_file_segment_new(
                p->fd, (ev_off_t)p->off, (ev_off_t)p->len, EVBUF_FS_DISABLE_LOCKING);
            if (!seg) {
                rc = -ENOMEM;
                break;
            }
            b->refs++;
            evbuffer_file_segment_add_cleanup_cb(seg, bulk_seg_done, b);
            if (evbuffer_add_file_segment(out, seg, 0, (ev_off_t)p->len) < 0)
                rc = -ENOMEM;
            evbuffer_file_segment_free(seg); /* the evbuffer holds its own reference */
        } else if (p->mem) {
            b->refs++;
            if (evbuffer_add_reference(out, p->mem, (size_t)p->len, bulk_mem_done, b) < 0) {
                b->refs--;
                rc = -ENOMEM;
            }
        } else {
            rc = evbuf_add_zeros(out, p->len);
        }
    }
    if (rc == 0 && (b->len & 3))
        rc = evbuf_add_zeros(out, 4 - (b->len & 3));
    bulk_unref(b);
    return rc;
}

/* A reply built on the loop before it is written (one per loop thread, freed
 * when the thread exits; it is empty again whenever conn_send_reply returns). */
static __thread struct evbuffer *direct_buf;

static void direct_buf_free(void)
{
    evbuffer_free(direct_buf);
    direct_buf = NULL;
}

/* This loop thread's direct_buf, made on first use. @return NULL without memory. */
static struct evbuffer *direct_buf_get(void)
{
    if (direct_buf)
        return direct_buf;
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return NULL;
    if (srv_thread_at_exit(direct_buf_free) < 0) {
        evbuffer_free(b);
        return NULL;
    }
    /* as a socket bufferevent's output: file segments go by sendfile
     * (without the flag libevent maps each one and writes the mapping) */
    evbuffer_set_flags(b, EVBUFFER_FLAG_DRAINS_TO_FD);
    direct_buf = b;
    return b;
}
/* The data of a small READ on its way out (one per loop thread, of
 * NFS_BULK_COPY_MAX bytes and the XDR padding; free again whenever
 * conn_write_now returns). */
static __thread uint8_t *bulk_scratch;

/* Write a reply, and the data of a READ of at most NFS_BULK_COPY_MAX bytes,
 * to the socket in one writev, when nothing of the connection waits in its
 * output: no evbuffer is built for it and no memory allocated for the data
 * (read from the page cache into this loop's scratch buffer). Whatever the
 * socket does not take is copied into the output, which the bufferevent
 * sends in order. Frees @p buf and @p b unless it returns false.
 * @return false: nothing was written (no scratch buffer, a short read of the
 *         data): the caller queues the reply as usual. */
static bool conn_write_now(struct nfs_conn *cn, struct evbuffer *out, void *buf, size_t len,
                           struct nfs_bulk *b)
{
    struct iovec iov[3];
    int niov = 0;
    iov[niov++] = (struct iovec){.iov_base = buf, .iov_len = len};
    if (b && b->len > 0) {
        size_t pad = (4 - (b->len & 3)) & 3;
        if (b->mem) {
            iov[niov++] = (struct iovec){.iov_base = b->mem, .iov_len = (size_t)b->len};
            if (pad)
                iov[niov++] = (struct iovec){.iov_base = (void *)nfs_zeros, .iov_len = pad};
        } else {
            if (!srv_thread_buf(&bulk_scratch, NFS_BULK_COPY_MAX + 4))
                return false;
            if (bulk_copy_into(b, bulk_scratch) < 0)
                return false;
            memset(bulk_scratch + b->len, 0, pad);
            iov[niov++] = (struct iovec){.iov_base = bulk_scratch, .iov_len = (size_t)b->len + pad};
        }
    }
    ssize_t w;
    do {
        w = writev(bufferevent_getfd(cn->bev), iov, niov);
    } while (w < 0 && errno == EINTR);
    /* A failed write is left to the bufferevent, which retries and reports. */
    size_t done = w > 0 ? (size_t)w : 0;
    bool ok = true;
    for (int i = 0; i < niov && ok; i++) {
        size_t k = done < iov[i].iov_len ? done : iov[i].iov_len;
        done -= k;
        if (k < iov[i].iov_len)
            ok = evbuffer_add(out, (uint8_t *)iov[i].iov_base + k, iov[i].iov_len - k) == 0;
    }
    free(buf);
    bulk_free(b);
    if (!ok) {
        srv_log(WARN, NFS, "req=- tenant=- cannot queue %zu reply bytes to %s: closing", len,
                cn->peer_str);
        conn_close(cn);
    }
    return true;
}

/* Reply batching. The calls a read of the socket brought (a client with
 * several calls in flight sends them back to back) are taken in one pass of
 * conn_read_cb, and those answered on the loop are answered during the pass.
 * Written one write each, 16 calls in flight cost 16 writes (and the client
 * 16 wake-ups, were it not already running). Instead, while a pass runs
 * (cn->cork) and more input waits behind the call, its reply is copied into
 * this loop's batch buffer (READ data of at most NFS_BULK_COPY_MAX bytes read
 * into it from the page cache, as conn_write_now would), and the pass writes
 * the whole batch with one write at its end (or earlier, when the buffer is
 * full or a reply that is not batched must keep its place). The last call of
 * a read (at 1 in flight the only one: nothing waits behind it) is batched
 * only behind replies already batched, so a lone call's reply is written as
 * soon as it is made, as before. Replies are whole records in the batch, and
 * the batch goes to the socket only when nothing waits in the connection's
 * output (else it is appended there), so no reply ever cuts into another.
 * One batch per loop thread, of one connection at a time (batch_conn). */
static __thread uint8_t *batch_buf;
static __thread size_t batch_len;
static __thread struct nfs_conn *batch_conn;

static void batch_discard(struct nfs_conn *cn)
{
    if (batch_conn == cn) {
        batch_conn = NULL;
        batch_len = 0;
    }
}

/* Write @p cn's batched replies: to the socket when its output is empty,
 * what the socket does not take (or everything, else) into the output. */
static void batch_flush(struct nfs_conn *cn)
{
    if (batch_conn != cn || cn->closed)
        return;
    size_t len = batch_len;
    batch_conn = NULL;
    batch_len = 0;
    atomic_fetch_add_explicit(&cn->srv->batch_writes, 1, memory_order_relaxed);
    struct evbuffer *out = bufferevent_get_output(cn->bev);
    ssize_t w = 0;
    if (evbuffer_get_length(out) == 0) {
        do {
            w = write(bufferevent_getfd(cn->bev), batch_buf, len);
        } while (w < 0 && errno == EINTR);
        /* A failed write is left to the bufferevent, which retries and reports. */
        if (w < 0)
            w = 0;
    }
    if ((size_t)w < len && evbuffer_add(out, batch_buf + w, len - (size_t)w) < 0) {
        srv_log(WARN, NFS, "req=- tenant=- cannot queue %zu reply bytes to %s: closing",
                len - (size_t)w, cn->peer_str);
        conn_close(cn);
    }
}

/* Add a reply (and the data of a small READ, or NULL) to the batch of @p cn,
 * which is in a read pass with output @p out. @return true: batched (@p buf
 * and @p b freed); false: not (the caller sends it, after the batch). */
static bool batch_add(struct nfs_conn *cn, struct evbuffer *out, void *buf, size_t len,
                      struct nfs_bulk *b)
{
    if (evbuffer_get_length(out) > 0 || (batch_conn && batch_conn != cn))
        return false;
    if (batch_conn != cn && evbuffer_get_length(bufferevent_get_input(cn->bev)) == 0)
        return false; /* nothing behind it: written at once */
    size_t blen = b ? (size_t)b->len : 0, pad = (4 - (blen & 3)) & 3;
    if ((b && b->len > NFS_BULK_COPY_MAX) || len + blen + pad > NFS_BATCH_MAX)
        return false;
    if (batch_conn == cn && batch_len + len + blen + pad > NFS_BATCH_MAX) {
        batch_flush(cn);
        if (cn->closed || evbuffer_get_length(out) > 0)
            return false;
    }
    if (!srv_thread_buf(&batch_buf, NFS_BATCH_MAX))
        return false;
    uint8_t *p = batch_buf + batch_len;
    if (blen > 0) {
        if (b->mem)
            memcpy(p + len, b->mem, blen);
        else if (bulk_copy_into(b, p + len) < 0)
            return false;
        memset(p + len + blen, 0, pad);
    }
    memcpy(p, buf, len);
    batch_len += len + blen + pad;
    batch_conn = cn;
    atomic_fetch_add_explicit(&cn->srv->batched, 1, memory_order_relaxed);
    free(buf);
    bulk_free(b);
    return true;
}

/* Send a reply (heap, freed once sent) and the READ data after it (or NULL).
 * When nothing of the connection waits in its output, the reply is written
 * to the socket at once (READ data with sendfile, whole), so a call costs no
 * epoll round and no change of the connection's epoll interest before its
 * reply leaves; whatever the socket does not take goes through the output,
 * which the bufferevent sends in order. */
static void conn_send_reply(struct nfs_conn *cn, void *buf, size_t len, struct nfs_bulk *b)
{
    if (cn->closed) {
        free(buf);
        bulk_free(b);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(cn->bev);
    if (cn->cork > 0 && batch_add(cn, out, buf, len, b))
        return;
    if (batch_conn == cn) {
        batch_flush(cn); /* the replies made before this one leave first */
        if (cn->closed) {
            free(buf);
            bulk_free(b);
            return;
        }
    }
    if (evbuffer_get_length(out) == 0 && (!b || b->len <= NFS_BULK_COPY_MAX) &&
        conn_write_now(cn, out, buf, len, b))
        return;
    struct evbuffer *dst = evbuffer_get_length(out) == 0 ? direct_buf_get() : NULL;
    if (!dst)
        dst = out;
    bool ok = evbuffer_add_reference(dst, buf, len, free_cleanup, NULL) == 0;
    if (!ok)
        free(buf);
    if (b && ok)
        ok = bulk_queue(dst, b) == 0;
    else
        bulk_free(b);
    if (dst == direct_buf) {
        evutil_socket_t fd = bufferevent_getfd(cn->bev);
        while (ok && evbuffer_get_length(direct_buf) > 0)
            if (evbuffer_write(direct_buf, fd) <= 0)
                break; /* full or failed: the bufferevent retries and reports */
        if (ok && evbuffer_get_length(direct_buf) > 0 && evbuffer_add_buffer(out, direct_buf) < 0)
            ok = false;
        evbuffer_drain(direct_buf, evbuffer_get_length(direct_buf)); /* empty for the next */
    }
    if (!ok) {
        srv_log(WARN, NFS, "req=- tenant=- cannot queue %zu reply bytes to %s: closing", len,
                cn->peer_str);
        conn_close(cn);
    }
}

static bool conn_may_read(struct nfs_conn *cn)
{
    return !cn->closed && cn->outstanding < NFS_CONN_MAX_CALLS &&
           evbuffer_get_length(bufferevent_get_output(cn->bev)) < NFS_CONN_MAX_OUTPUT;
}

static void conn_resume(struct nfs_conn *cn)
{
    if (cn->closed || !cn->paused || !conn_may_read(cn))
        return;
    cn->paused = false;
    event_add(cn->rd_ev, cn->has_idle ? &cn->idle : NULL);
    /* Records may already be buffered: no new bytes would wake the read callback. */
    conn_read_cb(cn);
}

/* ---- one call ---- */

/* Free the decoded arguments and the result of a call whose reply is made. A
 * loop answer does this after its reply was written (req_free), so that the
 * client has its reply a little sooner; a worker does it before handing the
 * call back. */
static void req_xdr_release(struct nfs_req *r)
{
    const struct nfs_proc_desc *d = r->desc;
    if (r->res_live) {
        if (d->free_res)
            d->free_res(r->res);
        else
            xdr_free(d->xdr_res, r->res);
        r->res_live = false;
    }
    if (r->args_decoded) {
        if (d->free_args)
            d->free_args(r->args);
        else
            xdr_free(d->xdr_args, r->args);
        r->args_decoded = false;
    }
}

static void req_free(struct nfs_req *r)
{
    req_xdr_release(r);
    free(r->args);
    free(r->res);
    free(r->rec);
    free(r->reply);
    bulk_free(r->bulk);
    free(r);
}

/* Append the bulk bytes to an encoded reply whose last field is an empty
 * opaque<>: patch that length and the record mark. The bytes themselves are
 * queued by bulk_queue, never copied. */
static void reply_patch_bulk(struct nfs_req *r)
{
    uint8_t *p = r->reply;
    uint32_t v;
    size_t pad = (4 - (r->bulklen & 3)) & 3;
    v = htonl((uint32_t)r->bulklen);
    memcpy(p + r->replylen - 4, &v, 4);
    v = htonl(0x80000000u | (uint32_t)(r->replylen - 4 + r->bulklen + pad));
    memcpy(p, &v, 4);
}

/* Undo what req_exec did for a call whose procedure would have waited on the
 * loop thread, so that it can run again from its record on a worker. */
static void req_unrun(struct nfs_req *r)
{
    const struct nfs_proc_desc *d = r->desc;
    if (d->free_res)
        d->free_res(r->res);
    else
        xdr_free(d->xdr_res, r->res);
    if (d->free_args)
        d->free_args(r->args);
    else
        xdr_free(d->xdr_args, r->args);
    bulk_free(r->bulk);
    free(r->args);
    free(r->res);
    r->bulk = NULL;
    r->bulklen = 0;
    r->args = r->res = NULL;
    r->args_decoded = false;
    r->wouldblock = false;
    r->have_export = false;
    r->err = 0;
    r->bucket = 0;
    r->payload_in = 0;
}

/* Decode, run, encode (a worker, or the loop for NFS_PF_LOOP).
 * @return false when the procedure would have waited on the loop thread:
 * nothing was encoded and the call is as it came (req_unrun). */
static bool req_exec(struct nfs_req *r)
{
    const struct nfs_proc_desc *d = r->desc;
    enum accept_stat st = SUCCESS;
    XDR x;
    int rc;

    /* srv_zalloc: from malloc's per-thread cache (calloc never is) */
    r->args = srv_zalloc(d->args_size);
    r->res = srv_zalloc(d->res_size);
    if (!r->args || !r->res) {
        st = SYSTEM_ERR;
        r->err = -ENOMEM;
        goto reply;
    }
    size_t alen = r->reclen - r->call.args_off;
    xdrmem_create(&x, (char *)r->rec + r->call.args_off, (u_int)alen, XDR_DECODE);
    bool ok = d->decode ? d->decode(r, &x, r->args) : d->xdr_args(&x, r->args, 0);
    xdr_destroy(&x);
    r->args_decoded = true;
    if (!ok) {
        srv_log(INFO, NFS, "req=%08x tenant=- GARBAGE_ARGS for %s from %s (%zu argument bytes)",
                r->call.xid, d->name, r->conn_peer, alen);
        st = GARBAGE_ARGS;
        r->err = SRV_EBADREQ;
        goto reply;
    }
    int prc = d->fn(r, r->args, r->res);
    if (r->wouldblock) {
        req_unrun(r);
        return false;
    }
    if (prc == NFS_REQ_DROP) {
        xdr_free(d->xdr_res, r->res);
        bulk_free(r->bulk);
        r->bulk = NULL;
        goto out;
    }
reply:
    rc = nfs_rpc_reply_accepted(r->call.xid, st, st == SUCCESS ? d->xdr_res : NULL, r->res, 0, 0,
                                &r->reply, &r->replylen);
    if (rc < 0) {
        srv_log(ERROR, NFS, "req=%08x tenant=%u cannot encode the %s reply (%s): SYSTEM_ERR",
                r->call.xid, r->p.tenant, d->name, srv_strerror(rc));
        r->err = -EIO;
        bulk_free(r->bulk);
        r->bulk = NULL;
        nfs_rpc_reply_accepted(r->call.xid, SYSTEM_ERR, NULL, NULL, 0, 0, &r->reply,
                               &r->replylen);
    } else if (r->bulk) {
        reply_patch_bulk(r);
    }
    r->res_live = st == SUCCESS;
out:
    if (!r->on_loop)
        req_xdr_release(r);
    return true;
}

static void req_work(void *arg)
{
    nfs__fh_memo_reset();
    req_exec(arg);
}

/* Loop: send, account, free. */
static void req_done(void *arg)
{
    struct nfs_req *r = arg;
    struct nfs_conn *cn = r->conn;
    struct nfs_server *s = r->srv;

    bool sent = r->reply != NULL;
    uint64_t out = sent && r->bulk ? r->bulklen : 0; /* READ data: the payload sent */
    if (r->drc) /* a JUKEBOX answer is not remembered: the retry must run */
        nfs_drc_finish(s->drc, &r->drc_key, r->throttled ? NULL : r->reply, r->replylen);
    if (r->reply) {
        conn_send_reply(cn, r->reply, r->replylen, r->bulk);
        r->reply = NULL;
        r->bulk = NULL;
    }
    srv_metrics_op_bucket(SRV_PROTO_NFS, r->desc->name, r->p.tenant, r->bucket, r->payload_in,
                          out, srv_now_us() - r->start_us, r->err);
    srv_log(DEBUG, NFS, "req=%08x tenant=%u %s from %s: %s", r->call.xid, r->p.tenant,
            r->desc->name, cn->peer_str, sent ? srv_strerror(r->err) : "dropped");
    cn->outstanding--;
    if (cn->closed)
        conn_maybe_free(cn);
    else
        conn_resume(cn); /* may free cn: not touched below */
    req_free(r);
    nfs__inflight_add(s, -1);
}

/* Answer a call on the loop without running a procedure. */
static void conn_reply_now(struct nfs_conn *cn, uint32_t xid, enum accept_stat st, uint32_t lo,
                           uint32_t hi)
{
    void *out;
    size_t len;
    if (nfs_rpc_reply_accepted(xid, st, NULL, NULL, lo, hi, &out, &len) == 0) {
        conn_send(cn, out, len);
        free(out);
    }
}

/* Answer a call QoS refused: its result with status NFS3ERR_JUKEBOX and no
 * attributes (every NFSv3 result starts with its nfsstat3, and every resfail
 * arm is made of "attributes follow" booleans, all false when zeroed). */
static void req_throttled(struct nfs_req *r)
{
    const struct nfs_proc_desc *d = r->desc;
    r->throttled = true;
    r->err = SRV_ETHROTTLE;
    r->res = srv_zalloc(d->res_size);
    if (r->res) {
        *(nfsstat3 *)r->res = NFS3ERR_JUKEBOX;
        nfs_rpc_reply_accepted(r->call.xid, SUCCESS, d->xdr_res, r->res, 0, 0, &r->reply,
                               &r->replylen);
    }
    req_done(r);
}

/* Per loop thread: no loop answers before this time (a major fault was seen),
 * and the thread's major fault count after its last loop answer. */
static __thread uint64_t loop_backoff_until;
static __thread long loop_majflt = -1;

static long thread_majflt(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_majflt : 0;
}

/* Run an admitted call: on the loop when its procedure allows it and this loop
 * has not seen a major fault lately (see the file comment), else (or when the
 * procedure would wait) on a worker. */
static void req_run(struct nfs_req *r)
{
    struct nfs_server *s = r->srv;
    if ((r->desc->flags & NFS_PF_LOOP) && !s->cfg.worker_only) {
        uint64_t now = r->start_us;
        if (loop_majflt < 0)
            loop_majflt = thread_majflt();
        if (now >= loop_backoff_until) {
            r->on_loop = true;
            bool done = req_exec(r);
            r->on_loop = false;
            long mf = srv_now_us() - now >= LOOP_SLOW_US ? thread_majflt() : loop_majflt;
            if (mf != loop_majflt) {
                loop_majflt = mf;
                loop_backoff_until = srv_now_us() + LOOP_BACKOFF_US;
                srv_log(DEBUG, NFS, "req=%08x tenant=%u %s on the loop took a major fault: "
                        "calls go to the workers for %llu ms", r->call.xid, r->p.tenant,
                        r->desc->name, (unsigned long long)(LOOP_BACKOFF_US / 1000));
            }
            if (done) {
                atomic_fetch_add(&s->loop_answers, 1);
                req_done(r);
                return;
            }
            atomic_fetch_add(&s->loop_retries, 1);
        }
    }
    srv_work_submit(r->conn->loop, req_work, req_done, r);
}

static void req_qos_go(void *arg, int err);

/* Ask QoS for the call's next piece: its operation with its first bytes, then
 * the rest (QOS_PIECE_MORE), each piece at most the smallest burst on its
 * path (qos_admit_piece_at). The one place NFS asks QoS, with the call's
 * scope: the handle's inode (bucket and directory levels) and the caller's
 * AUTH_UNIX uid (the tenant user whose policy names it, else the NFS default
 * class); every level on that path is charged for each piece.
 * @return 1: admitted now (r->qos_piece bytes); 0: waiting, req_qos_go runs
 *         later; SRV_ETHROTTLE or -errno: refused (req_qos_go never runs). */
static int req_qos_piece(struct nfs_req *r)
{
    struct core_principal p = {.tenant = r->qos_tenant};
    const struct qos_scope sc = {.ino = r->qos_ino,
                                 .has_uid = r->call.cred.flavor == AUTH_UNIX,
                                 .uid = r->call.cred.uid,
                                 .memo = &r->qos_memo};
    r->qos_sync = true;
    r->qos_now = false;
    r->qos_err = 0;
    int rc = qos_admit_piece_at(qos_global(), &p, &sc, r->qos_cls, r->qos_left,
                                r->qos_started ? QOS_PIECE_MORE : 0, &r->qos_piece,
                                srv_loop_base(r->conn->loop), req_qos_go, r);
    r->qos_sync = false;
    if (rc)
        return rc;
    r->qos_started = true;
    if (!r->qos_now)
        return 0;
    return r->qos_err ? r->qos_err : 1;
}

/* A piece was admitted: run the call once nothing is left to admit. @return
 * true when the call left the QoS wait (run; r may be gone). */
static bool req_qos_admitted(struct nfs_req *r)
{
    r->qos_left -= r->qos_piece < r->qos_left ? r->qos_piece : r->qos_left;
    if (r->qos_left > 0)
        return false;
    qwait_unlink(r);
    req_run(r);
    return true;
}

/* Admit pieces until one has to wait or the call is admitted whole (then it
 * runs) or refused (then it is answered NFS3ERR_JUKEBOX). */
static void req_qos_step(struct nfs_req *r)
{
    for (;;) {
        int rc = req_qos_piece(r);
        if (rc == 0)
            return;
        if (rc < 0) {
            qwait_unlink(r);
            req_throttled(r);
            return;
        }
        if (req_qos_admitted(r))
            return;
    }
}

static void req_qos_go(void *arg, int err)
{
    struct nfs_req *r = arg;
    if (r->qos_sync) { /* inside qos_admit_piece: req_qos_piece goes on */
        r->qos_now = true;
        r->qos_err = err;
        return;
    }
    if (err) {
        qwait_unlink(r);
        req_throttled(r);
        return;
    }
    if (!req_qos_admitted(r))
        req_qos_step(r);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The tenant of the call's first handle (every procedure QoS admits starts
 * its arguments with one) and, for a read or write class (the descriptor's
 * qos), the byte count.
 * @return false when the handle does not verify: the procedure will answer. */
static bool req_qos_class(struct nfs_req *r, uint32_t *tenant, enum qos_class *cls,
                          uint64_t *bytes)
{
    const uint8_t *a = (const uint8_t *)r->rec + r->call.args_off;
    size_t n = r->reclen - r->call.args_off;
    struct nfs_fh h;
    if (n < 4)
        return false;
    uint32_t fl = rd32(a);
    size_t padded = ((size_t)fl + 3) & ~(size_t)3;
    if (fl > NFS3_FHSIZE || 4 + padded > n || nfs__fh_decode(r->srv->fh_key, a + 4, fl, &h) < 0)
        return false;
    *tenant = h.tenant;
    r->qos_ino = h.ino;
    *bytes = 0;
    *cls = QOS_META;
    size_t cpos = 4 + padded + 8; /* count3 after the handle and the offset */
    if ((r->desc->qos == NFS_QOS_READ || r->desc->qos == NFS_QOS_WRITE) && cpos + 4 <= n) {
        *bytes = rd32(a + cpos);
        *cls = r->desc->qos == NFS_QOS_READ ? QOS_READ : QOS_WRITE;
    }
    return true;
}

/* Send the call to the worker pool, through QoS admission for NFS calls. */
static void req_dispatch(struct nfs_conn *cn, struct nfs_req *r)
{
    struct qos *q = qos_global();
    struct core_principal p = {0};
    enum qos_class cls;
    uint64_t bytes;
    if (!q || r->desc->qos == NFS_QOS_NONE || !req_qos_class(r, &p.tenant, &cls, &bytes)) {
        req_run(r);
        return;
    }
    r->qnext = cn->qwait;
    if (cn->qwait)
        cn->qwait->qprev = r;
    cn->qwait = r;
    r->qos_tenant = p.tenant;
    r->qos_cls = cls;
    r->qos_left = bytes;
    r->qos_started = false;
    req_qos_step(r);
}

/* Handle one complete record (takes ownership of @p rec). */
static void conn_record(struct nfs_conn *cn, void *rec, size_t len)
{
    struct nfs_server *s = cn->srv;
    struct nfs_call call;
    const struct nfs_proc_desc *tab;
    size_t ntab;

    if (nfs_rpc_call_decode(rec, len, &call) < 0) {
        srv_log(WARN, NFS, "req=- tenant=- record of %zu bytes from %s is not an RPC call: closing",
                len, cn->peer_str);
        free(rec);
        conn_close(cn);
        return;
    }
    if (call.verdict != NFS_CALL_OK) {
        void *out;
        size_t olen;
        srv_log(INFO, NFS, "req=%08x tenant=- call from %s refused: %s (flavor %u, rpcvers %u)",
                call.xid, cn->peer_str,
                call.verdict == NFS_CALL_RPCMISMATCH ? "RPC_MISMATCH"
                : call.verdict == NFS_CALL_TOOWEAK   ? "AUTH_TOOWEAK"
                                                     : "AUTH_BADCRED",
                call.cred.flavor, call.rpcvers);
        if (nfs_rpc_reply_denied(call.xid, call.verdict, &out, &olen) == 0) {
            conn_send(cn, out, olen);
            free(out);
        }
        free(rec);
        return;
    }
    const struct nfs_prog *pg = NULL;
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
        if (progs[i].prog == call.prog)
            pg = &progs[i];
    if (!pg) {
        srv_log(INFO, NFS, "req=%08x tenant=- program %u from %s: PROG_UNAVAIL", call.xid,
                call.prog, cn->peer_str);
        conn_reply_now(cn, call.xid, PROG_UNAVAIL, 0, 0);
        free(rec);
        return;
    }
    if (call.vers != pg->vers) {
        srv_log(INFO, NFS, "req=%08x tenant=- program %u version %u from %s: PROG_MISMATCH",
                call.xid, call.prog, call.vers, cn->peer_str);
        conn_reply_now(cn, call.xid, PROG_MISMATCH, pg->vers, pg->vers);
        free(rec);
        return;
    }
    tab = pg->tab;
    ntab = pg->n;
    if (call.proc >= ntab || !tab[call.proc].fn) {
        srv_log(INFO, NFS, "req=%08x tenant=- program %u procedure %u from %s: PROC_UNAVAIL",
                call.xid, call.prog, call.proc, cn->peer_str);
        conn_reply_now(cn, call.xid, PROC_UNAVAIL, 0, 0);
        free(rec);
        return;
    }

    struct nfs_req *r = srv_zalloc(sizeof(*r));
    if (!r) {
        srv_log(ERROR, NFS, "req=%08x tenant=- out of memory: call dropped", call.xid);
        free(rec);
        return;
    }
    r->srv = s;
    r->conn = cn;
    r->conn_peer = cn->peer_str;
    r->peer = cn->peer;
    r->call = call;
    r->desc = &tab[call.proc];
    r->rec = rec;
    r->reclen = len;
    r->start_us = srv_now_us();

    if (r->desc->flags & NFS_PF_NONIDEM) {
        void *cached;
        size_t clen;
        nfs_drc_key_make(&r->drc_key, (struct sockaddr *)&cn->peer, call.xid, call.prog,
                         call.proc, (uint8_t *)rec + call.args_off, len - call.args_off);
        switch (nfs_drc_start(s->drc, &r->drc_key, &cached, &clen)) {
        case NFS_DRC_DONE:
            srv_log(INFO, NFS, "req=%08x tenant=- %s from %s is a retransmission: cached reply",
                    call.xid, r->desc->name, cn->peer_str);
            conn_send(cn, cached, clen);
            free(cached);
            req_free(r);
            return;
        case NFS_DRC_INPROGRESS:
            srv_log(INFO, NFS, "req=%08x tenant=- %s from %s is a retransmission still running: "
                    "dropped", call.xid, r->desc->name, cn->peer_str);
            req_free(r);
            return;
        case NFS_DRC_NEW:
            r->drc = true;
            break;
        }
    }
    cn->outstanding++;
    nfs__inflight_add(s, 1);
    nfs__fh_memo_reset();
    req_dispatch(cn, r);
}

/* The rest of a large fragment (a WRITE's data) is read from the socket
 * straight into the record, saving a copy out of the input buffer. Only once
 * that buffer is drained, so bytes stay in order. @return bytes read, 0
 * (nothing to read now, or not worth it: fragment short or bytes still
 * buffered), -1 (the connection was closed). */
static ssize_t conn_recv_direct(struct nfs_conn *cn, struct evbuffer *in)
{
    void *dst;
    size_t want = nfs_rec_space(&cn->rec, &dst);
    if (want < NFS_DIRECT_MIN || evbuffer_get_length(in) > 0)
        return 0;
    ssize_t n;
    do {
        n = recv(bufferevent_getfd(cn->bev), dst, want, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        nfs_rec_filled(&cn->rec, (size_t)n);
        return n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    srv_log(DEBUG, NFS, "req=- tenant=- connection from %s: %s mid-record", cn->peer_str,
            n == 0 ? "closed" : strerror(errno));
    conn_close(cn);
    return -1;
}

/* Take the calls buffered in the connection's input (and the rest of a large
 * fragment, conn_recv_direct) while the connection may read. */
static void conn_read_cb(struct nfs_conn *cn)
{
    struct evbuffer *in = bufferevent_get_input(cn->bev);
    cn->depth++;
    cn->cork++;
    while (!cn->closed) {
        if (!conn_may_read(cn)) {
            if (!cn->paused) {
                cn->paused = true;
                event_del(cn->rd_ev);
            }
            break;
        }
        void *rec;
        size_t len;
        int rc = nfs_rec_take(&cn->rec, in, &rec, &len);
        if (rc == 0) {
            if (conn_recv_direct(cn, in) > 0)
                continue;
            break;
        }
        if (rc < 0) {
            srv_log(WARN, NFS, "req=- tenant=- %s from %s (limit %zu bytes): closing",
                    rc == -EMSGSIZE ? "record too large" : "out of memory", cn->peer_str,
                    cn->rec.max);
            conn_close(cn);
            break;
        }
        conn_record(cn, rec, len);
    }
    if (--cn->cork == 0)
        batch_flush(cn); /* the replies of the pass, in one write */
    cn->depth--;
    conn_maybe_free(cn);
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
    conn_resume(arg);
}

/* Nothing of the connection is in flight: no call running or waiting for
 * QoS (both counted in outstanding), no reply bytes waiting to be sent. */
static bool conn_idle(struct nfs_conn *cn);

/* One read's bytes, on the loop thread (NFS_READ_CHUNK bytes, allocated once
 * per loop thread). */
static __thread uint8_t *rd_scratch;

/* Read the socket of a connection whose input buffer is empty into this
 * loop's scratch buffer and take the calls from there: the input buffer only
 * refers to the bytes while the calls are taken (each record is copied out,
 * as from any input), and what is left of them (a call not read whole, calls
 * of a paused connection) is then copied into it. Reading into the input
 * buffer itself made it allocate room for a whole read, a chunk too large
 * for malloc's per-thread cache, and free it again once the call was taken:
 * an allocation and a free of 32 KiB per call.
 * @return false: nothing was read (no scratch buffer), the caller reads. */
static bool conn_read_scratch(struct nfs_conn *cn, evutil_socket_t fd, struct evbuffer *in)
{
    ssize_t n = srv_read_scratch(fd, &rd_scratch, NFS_READ_CHUNK);
    if (n < 0 && errno == ENOMEM && !rd_scratch)
        return false;
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        srv_log(DEBUG, NFS, "req=- tenant=- connection from %s: %s", cn->peer_str,
                n == 0 ? "closed by the client" : strerror(errno));
        conn_close(cn);
        return true;
    }
    evbuffer_unfreeze(in, 0);
    int rc = evbuffer_add_reference(in, rd_scratch, (size_t)n, NULL, NULL);
    evbuffer_freeze(in, 0);
    if (rc < 0) {
        srv_log(WARN, NFS, "req=- tenant=- out of memory reading from %s: closing", cn->peer_str);
        conn_close(cn);
        return true;
    }
    cn->depth++;
    conn_read_cb(cn);
    cn->depth--;
    /* A closed connection freed its buffers; else what is left in the input is
     * the end of the scratch buffer, nothing else having been added. */
    size_t left = cn->closed ? 0 : evbuffer_get_length(in);
    if (left > 0) {
        evbuffer_drain(in, left);
        evbuffer_unfreeze(in, 0);
        rc = evbuffer_add(in, rd_scratch + n - left, left);
        evbuffer_freeze(in, 0);
        if (rc < 0) {
            srv_log(WARN, NFS, "req=- tenant=- out of memory reading from %s: closing",
                    cn->peer_str);
            conn_close(cn);
        }
    }
    conn_maybe_free(cn);
    return true;
}

/* The socket is readable (or nothing came for idle_timeout_s). The socket is
 * read here, not by the bufferevent (which only sends): libevent 2.1 asks
 * the kernel how much is readable (FIONREAD) before every read and reads at
 * most 4 KiB, so each call cost an ioctl besides its readv; one read of up
 * to NFS_READ_CHUNK bytes per readable event takes a whole small call (the
 * rest of a large fragment comes by conn_recv_direct). rd_ev persists with
 * its timeout, so every readable event re-arms the idle timeout. */
/* Polling for the next call (cfg.loop_poll_us; the file comment's loop
 * answers and docs/nfs.md). At one call in flight the loop thread sleeps in
 * epoll_wait between a reply and the next call, and its CPU, idle, halts:
 * waking a halted vCPU is most of the time of a call that needs no disk
 * (docs/benchmarks.md, "Single-request wake-ups"). So after answering, the
 * loop looks at the socket every POLL_STEP_US (a MSG_PEEK recv) for up to
 * loop_poll_us, running; a call that comes meanwhile is read at once. Only
 * while nothing else could need the loop: the connection is the loop's only
 * one, no call of it is in flight or waits for QoS, no reply waits in its
 * output, no other event of the loop is active (a worker's finished call);
 * and for at most POLL_SPAN_US per readable event, after which the loop runs
 * its timers (and re-arms the idle timeout the calls read here did not).
 * @return true: a call came (the caller reads it); false: the loop sleeps. */
static bool conn_poll_next(struct nfs_conn *cn, evutil_socket_t fd, uint64_t span_end)
{
    struct nfs_server *s = cn->srv;
    if (cn->closed || cn->paused || cn->outstanding > 0 || cn->qwait ||
        evbuffer_get_length(bufferevent_get_output(cn->bev)) > 0 || srv_loop_conns(cn->loop) != 1)
        return false;
    uint64_t end = srv_now_us() + (uint64_t)s->cfg.loop_poll_us;
    if (!srv_loop_poll_input(cn->loop, fd, end < span_end ? end : span_end, POLL_STEP_US, 0))
        return false;
    atomic_fetch_add_explicit(&s->poll_hits, 1, memory_order_relaxed);
    return true;
}

static void conn_sock_read(evutil_socket_t fd, short what, struct nfs_conn *cn);

static void conn_sock_cb(evutil_socket_t fd, short what, void *arg)
{
    struct nfs_conn *cn = arg;
    int poll_us = cn->srv->cfg.loop_poll_us;
    if (poll_us <= 0 || (what & EV_TIMEOUT)) {
        conn_sock_read(fd, what, cn);
        return;
    }
    cn->depth++;
    conn_sock_read(fd, what, cn);
    uint64_t span_end = srv_now_us() + POLL_SPAN_US;
    bool polled = false;
    while (conn_poll_next(cn, fd, span_end)) {
        polled = true;
        conn_sock_read(fd, EV_READ, cn);
    }
    if (polled && !cn->closed && !cn->paused)
        event_add(cn->rd_ev, cn->has_idle ? &cn->idle : NULL); /* the idle timeout anew */
    cn->depth--;
    conn_maybe_free(cn);
}

static void conn_sock_read(evutil_socket_t fd, short what, struct nfs_conn *cn)
{
    if (cn->closed)
        return;
    if (what & EV_TIMEOUT) {
        /* nothing arrived for idle_timeout_s: close, or read on while calls
         * are in flight */
        if (conn_idle(cn)) {
            srv_log(DEBUG, NFS, "req=- tenant=- connection from %s idle for %d s: closing",
                    cn->peer_str, cn->srv->cfg.idle_timeout_s);
            srv_metrics_op(SRV_PROTO_NFS, "ConnIdleClosed", 0, 0, 0, 0, 0);
            conn_close(cn);
        }
        return;
    }
    struct evbuffer *in = bufferevent_get_input(cn->bev);
    void *dst;
    bool direct = evbuffer_get_length(in) == 0 && nfs_rec_space(&cn->rec, &dst) >= NFS_DIRECT_MIN;
    if (!direct && evbuffer_get_length(in) == 0 && conn_read_scratch(cn, fd, in))
        return;
    if (!direct) {
        ssize_t n = srv_read_into(in, fd, NFS_READ_CHUNK);
        if (n < 0 && errno == ENOMEM) {
            srv_log(WARN, NFS, "req=- tenant=- out of memory reading from %s: closing",
                    cn->peer_str);
            conn_close(cn);
            return;
        }
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return;
            srv_log(DEBUG, NFS, "req=- tenant=- connection from %s: %s", cn->peer_str,
                    n == 0 ? "closed by the client" : strerror(errno));
            conn_close(cn);
            return;
        }
    }
    conn_read_cb(cn);
}

static bool conn_idle(struct nfs_conn *cn)
{
    return cn->outstanding == 0 && evbuffer_get_length(bufferevent_get_output(cn->bev)) == 0;
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct nfs_conn *cn = arg;
    /* The bufferevent only writes. libevent 2.1's sendfile of a file segment
     * answers 0 when the socket takes nothing (EAGAIN), which its write
     * callback reports as end of file; a TCP write never returns 0 otherwise:
     * write on when the socket has room again. */
    if ((what & BEV_EVENT_WRITING) && (what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
        srv_log(DEBUG, NFS, "req=- tenant=- connection to %s: the socket took nothing",
                cn->peer_str);
        bufferevent_enable(cn->bev, EV_WRITE);
        return;
    }
    /* an error sending a reply */
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_close(cn);
}

struct accept_arg {
    struct nfs_server *srv;
    evutil_socket_t fd;
    struct sockaddr_storage peer;
};

/* Set the TCP congestion control @p cc on @p fd. @return 0 or -errno. */
static int sock_set_congestion(int fd, const char *cc)
{
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) == 0 ? 0 : -errno;
}

/* On the connection's loop: wrap the accepted socket. */
static void conn_open(void *arg)
{
    struct accept_arg *a = arg;
    struct nfs_server *s = a->srv;
    struct nfs_conn *cn = calloc(1, sizeof(*cn));
    int one = 1;

    if (!cn)
        goto fail;
    cn->srv = s;
    cn->loop = srv_loop_current();
    cn->peer = a->peer;
    peer_format(&cn->peer, cn->peer_str, sizeof(cn->peer_str));
    nfs_rec_init(&cn->rec, s->cfg.max_record);
    setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A loopback connection meets no network, and a pacing congestion control
     * (bbr) spreads each 1 MiB READ reply over its estimate of the "path's"
     * bandwidth, which is low when the client shares the CPU (issue 17,
     * docs/benchmarks.md): such connections get loopback_congestion. */
    if (s->loopback_cc &&
        srv_addr_classify((const struct sockaddr *)&cn->peer) == SRV_ADDR_LOOPBACK) {
        int e = sock_set_congestion(a->fd, s->loopback_cc);
        if (e < 0)
            srv_log(DEBUG, NFS, "req=- tenant=- connection from %s: congestion control %s: %s",
                    cn->peer_str, s->loopback_cc, strerror(-e));
    }
    /* Clients keep idle connections for minutes; keepalives find the ones
     * whose client vanished without a FIN (after about 2 minutes). */
    int idle = 60, intvl = 10, cnt = 6;
    setsockopt(a->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(a->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(a->fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(a->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    cn->rd_ev = event_new(srv_loop_base(cn->loop), a->fd, EV_READ | EV_PERSIST, conn_sock_cb, cn);
    if (!cn->rd_ev)
        goto fail;
    cn->bev = bufferevent_socket_new(srv_loop_base(cn->loop), a->fd, BEV_OPT_CLOSE_ON_FREE);
    if (!cn->bev) {
        event_free(cn->rd_ev);
        goto fail;
    }
    bufferevent_setcb(cn->bev, NULL, conn_write_cb, conn_event_cb, cn);
    bufferevent_setwatermark(cn->bev, EV_WRITE, NFS_CONN_MAX_OUTPUT / 2, 0);
    /* libevent's default writes 16 KiB per writable event: a 1 MiB READ reply
     * would take 64 rounds of epoll_wait + sendfile */
    bufferevent_set_max_single_write(cn->bev, NFS_MAX_IO);
    if (s->cfg.idle_timeout_s > 0) {
        /* One duration for every connection of the loop: as a common timeout,
         * re-arming it after each read is a queue append, not a heap update. */
        struct timeval tv = {s->cfg.idle_timeout_s, 0};
        const struct timeval *common =
            event_base_init_common_timeout(srv_loop_base(cn->loop), &tv);
        cn->idle = common ? *common : tv;
        cn->has_idle = true;
    }
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        event_free(cn->rd_ev);
        bufferevent_free(cn->bev);
        nfs_rec_fini(&cn->rec);
        free(cn);
        __atomic_fetch_sub(&s->nconns, 1, __ATOMIC_RELAXED);
        srv_loop_conn_gone(srv_loop_current());
        goto done;
    }
    cn->next = s->conns;
    if (s->conns)
        s->conns->prev = cn;
    s->conns = cn;
    pthread_mutex_unlock(&s->lock);
    bufferevent_enable(cn->bev, EV_WRITE);
    event_add(cn->rd_ev, cn->has_idle ? &cn->idle : NULL);
    srv_log(DEBUG, NFS, "req=- tenant=- connection from %s", cn->peer_str);
    goto done;
fail:
    srv_log(ERROR, NFS, "req=- tenant=- out of memory accepting a connection");
    free(cn);
    evutil_closesocket(a->fd);
    __atomic_fetch_sub(&s->nconns, 1, __ATOMIC_RELAXED);
    srv_loop_conn_gone(srv_loop_current());
done:
    free(a);
    nfs__inflight_add(s, -1);
}

static void listener_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                        int salen, void *arg)
{
    struct nfs_server *s = arg;
    int nopen = __atomic_load_n(&s->nconns, __ATOMIC_RELAXED);
    if (nopen >= s->cfg.max_conns) {
        char peer[INET6_ADDRSTRLEN + 8] = "?";
        struct sockaddr_storage ss = {0};
        if (salen > 0 && (size_t)salen <= sizeof(ss)) {
            memcpy(&ss, sa, (size_t)salen);
            peer_format(&ss, peer, sizeof(peer));
        }
        evutil_closesocket(fd);
        srv_log_limited(WARN, NFS, "req=- tenant=- connection from %s refused: %d connections "
                        "open (nfs_max_conns)", peer, nopen);
        srv_metrics_op(SRV_PROTO_NFS, "ConnRefused", 0, 0, 0, 0, SRV_ETHROTTLE);
        return;
    }
    struct accept_arg *a = calloc(1, sizeof(*a));
    if (!a) {
        evutil_closesocket(fd);
        return;
    }
    a->srv = s;
    a->fd = fd;
    if ((size_t)salen <= sizeof(a->peer))
        memcpy(&a->peer, sa, (size_t)salen);
    evutil_make_socket_nonblocking(fd);
    nfs__inflight_add(s, 1);
    __atomic_fetch_add(&s->nconns, 1, __ATOMIC_RELAXED);
    struct srv_loop *loop = srv_loop_for_fd(fd);
    if (srv_loop_call(loop, conn_open, a) < 0) {
        srv_loop_conn_gone(loop);
        evutil_closesocket(fd);
        free(a);
        __atomic_fetch_sub(&s->nconns, 1, __ATOMIC_RELAXED);
        nfs__inflight_add(s, -1);
    }
}

/* ---- start / stop ---- */

/* Run fn(s) on loop l and wait for it (main thread). */
struct loop_sync {
    struct nfs_server *srv;
    void (*fn)(struct nfs_server *s);
    bool done;
};

static void loop_sync_run(void *arg)
{
    struct loop_sync *ls = arg;
    ls->fn(ls->srv);
    pthread_mutex_lock(&ls->srv->lock);
    ls->done = true;
    pthread_cond_broadcast(&ls->srv->cond);
    pthread_mutex_unlock(&ls->srv->lock);
}

static int loop_sync(struct nfs_server *s, struct srv_loop *l, void (*fn)(struct nfs_server *))
{
    struct loop_sync ls = {s, fn, false};
    int rc = srv_loop_call(l, loop_sync_run, &ls);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&s->lock);
    while (!ls.done)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void listener_create(struct nfs_server *s)
{
    /* backlog 0: the socket listens already (listen_open); -1 would make
     * libevent call listen(2) again with 128 */
    s->lev = evconnlistener_new(srv_loop_base(s->lloop), listener_cb, s, LEV_OPT_CLOSE_ON_FREE, 0,
                                s->lfd);
    /* accept failing (EMFILE and friends) pauses the listener instead of spinning */
    if (s->lev && srv_listen_guard(s->lev, srv_loop_base(s->lloop), SRV_SUB_NFS, "NFS") < 0) {
        evconnlistener_free(s->lev); /* closes lfd */
        s->lev = NULL;
        s->lfd = -1;
    }
}

static void listener_free(struct nfs_server *s)
{
    if (s->lev) {
        srv_listen_unguard(s->lev);
        evconnlistener_free(s->lev);
    } else if (s->lfd >= 0)
        close(s->lfd);
    s->lev = NULL;
    s->lfd = -1;
}

static void conns_close_here(struct nfs_server *s)
{
    struct srv_loop *me = srv_loop_current();
    nlm_cbs_close_here(s);
    for (;;) {
        struct nfs_conn *victim = NULL;
        pthread_mutex_lock(&s->lock);
        for (struct nfs_conn *cn = s->conns; cn; cn = cn->next) {
            if (cn->loop == me) {
                victim = cn;
                break;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (!victim)
            break;
        conn_close(victim);
    }
}

/* Parse "HOST:PORT", "[V6]:PORT" or ":PORT" into @p ss. @return 0, -EINVAL. */
static int listen_parse(const char *spec, struct sockaddr_storage *ss, socklen_t *sslen)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon[1] == '\0')
        return -EINVAL;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return -EINVAL;
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof(host))
        return -EINVAL;
    memcpy(host, spec, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (host[0] == '\0' || strcmp(host, "*") == 0) {
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        s4->sin_port = htons((uint16_t)port);
        *sslen = sizeof(*s4);
    } else if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *sslen = sizeof(*s4);
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sslen = sizeof(*s6);
    } else if (strcmp(host, "localhost") == 0) {
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s4->sin_port = htons((uint16_t)port);
        *sslen = sizeof(*s4);
    } else {
        return -EINVAL;
    }
    return 0;
}

static int listen_open(struct nfs_server *s)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int one = 1, rc;
    if (listen_parse(s->listen, &ss, &sslen) < 0) {
        srv_log(ERROR, NFS, "req=- tenant=- bad NFS listen address '%s' (want HOST:PORT)",
                s->listen);
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sslen) < 0 || listen(fd, srv_listen_backlog()) < 0 ||
        evutil_make_socket_nonblocking(fd) < 0) {
        rc = -errno;
        srv_log(ERROR, NFS, "req=- tenant=- cannot listen on %s: %s", s->listen, strerror(-rc));
        close(fd);
        return rc;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    s->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);
    s->laddr = bound;
    s->laddrlen = blen;
    s->lfamily = bound.ss_family;
    s->lfd = fd;
    return 0;
}

/* The handle key lives in the core's config table so handles survive restarts. */
static int fh_key_load(struct nfs_server *s)
{
    void *val = NULL;
    size_t vlen = 0;
    struct meta_env *m = core_meta(s->core);
    int rc = meta_record_get(m, META_REC_CONFIG, NFS_FH_KEY_NAME, strlen(NFS_FH_KEY_NAME), &val,
                             &vlen);
    if (rc == -ENOENT) {
        uint8_t key[NFS_FH_KEYLEN];
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        ssize_t n = read(fd, key, sizeof(key));
        close(fd);
        if (n != (ssize_t)sizeof(key))
            return -EIO;
        rc = meta_record_put(m, META_REC_CONFIG, NFS_FH_KEY_NAME, strlen(NFS_FH_KEY_NAME), key,
                             sizeof(key), META_REC_NOOVERWRITE);
        if (rc < 0 && rc != -EEXIST)
            return rc;
        rc = meta_record_get(m, META_REC_CONFIG, NFS_FH_KEY_NAME, strlen(NFS_FH_KEY_NAME), &val,
                             &vlen);
    }
    if (rc < 0)
        return rc;
    if (vlen != NFS_FH_KEYLEN) {
        free(val);
        srv_log(ERROR, NFS, "req=- tenant=- stored file handle key has %zu bytes, want %d", vlen,
                NFS_FH_KEYLEN);
        return SRV_ECORRUPT;
    }
    memcpy(s->fh_key, val, NFS_FH_KEYLEN);
    free(val);
    return 0;
}

/* NSM status number: odd while up, +2 at every start, kept in the store. */
static void nsm_state_next(struct nfs_server *s)
{
    static const char key[] = "nfs.nsm_state";
    void *val = NULL;
    size_t vlen = 0;
    uint32_t st = 1;
    struct meta_env *m = core_meta(s->core);
    if (meta_record_get(m, META_REC_CONFIG, key, sizeof(key) - 1, &val, &vlen) == 0 &&
        vlen == sizeof(st)) {
        memcpy(&st, val, sizeof(st));
        st = (st | 1) + 2;
    }
    free(val);
    if (st > INT32_MAX)
        st = 1;
    meta_record_put(m, META_REC_CONFIG, key, sizeof(key) - 1, &st, sizeof(st), 0);
    s->nsm_state = (int32_t)st;
}

/* Is anything listening on the portmapper port? (avoids libtirpc's long timeouts) */
static bool rpcbind_running(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(111)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool up = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
        up = true;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof(err);
        if (poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
            err == 0)
            up = true;
    }
    close(fd);
    return up;
}

/* Register (or with @p set false, unregister) every program on our port.
 * rpcb_set/rpcb_unset rather than pmap_set: libtirpc's pmap_set leaks the
 * address buffer it builds on every call. @return true when all succeeded. */
static bool rpcbind_apply(struct nfs_server *s, bool set)
{
    struct netconfig *nc = getnetconfigent(s->lfamily == AF_INET6 ? "tcp6" : "tcp");
    bool ok = nc != NULL;
    struct netbuf nb = {.maxlen = (unsigned)s->laddrlen, .len = (unsigned)s->laddrlen,
                        .buf = &s->laddr};
    for (size_t i = 0; nc && i < sizeof(progs) / sizeof(progs[0]); i++) {
        rpcb_unset(progs[i].prog, progs[i].vers, nc);
        if (set && !rpcb_set(progs[i].prog, progs[i].vers, nc, &nb))
            ok = false;
    }
    if (nc)
        freenetconfigent(nc);
    return ok;
}

static void rpcbind_register(struct nfs_server *s)
{
    if (!rpcbind_running()) {
        srv_log(WARN, NFS, "req=- tenant=- no rpcbind on 127.0.0.1:111: not registered (clients "
                "need port=%u,mountport=%u)", s->port, s->port);
        return;
    }
    if (!rpcbind_apply(s, true)) {
        srv_log(WARN, NFS, "req=- tenant=- rpcbind registration failed: clients need "
                "port=%u,mountport=%u", s->port, s->port);
        rpcbind_apply(s, false);
        return;
    }
    s->registered = true;
    srv_log(INFO, NFS, "req=- tenant=- registered NFS v3, MOUNT v3, NLM v4 and NSM v1 on TCP port "
            "%u with rpcbind", s->port);
}

static void render_loop_answers(void *arg, struct evbuffer *out)
{
    struct nfs_server *s = arg;
    evbuffer_add_printf(
        out,
        "# HELP s3nfs_nfs_loop_answers_total NFS calls answered on an event-loop thread.\n"
        "# TYPE s3nfs_nfs_loop_answers_total counter\ns3nfs_nfs_loop_answers_total %llu\n"
        "# HELP s3nfs_nfs_loop_retries_total NFS calls tried on an event-loop thread that "
        "would have waited there, then run on a worker.\n"
        "# TYPE s3nfs_nfs_loop_retries_total counter\ns3nfs_nfs_loop_retries_total %llu\n"
        "# HELP s3nfs_nfs_batched_replies_total NFS replies written together with others of "
        "the same read of the socket.\n"
        "# TYPE s3nfs_nfs_batched_replies_total counter\ns3nfs_nfs_batched_replies_total %llu\n"
        "# HELP s3nfs_nfs_reply_batch_writes_total Writes of batched NFS replies.\n"
        "# TYPE s3nfs_nfs_reply_batch_writes_total counter\n"
        "s3nfs_nfs_reply_batch_writes_total %llu\n"
        "# HELP s3nfs_nfs_loop_poll_hits_total NFS calls an event-loop thread found while "
        "polling for them (nfs_loop_poll_us), without sleeping.\n"
        "# TYPE s3nfs_nfs_loop_poll_hits_total counter\ns3nfs_nfs_loop_poll_hits_total %llu\n",
        (unsigned long long)atomic_load(&s->loop_answers),
        (unsigned long long)atomic_load(&s->loop_retries),
        (unsigned long long)atomic_load(&s->batched),
        (unsigned long long)atomic_load(&s->batch_writes),
        (unsigned long long)atomic_load(&s->poll_hits));
}

static void server_free(struct nfs_server *s)
{
    if (!s)
        return;
    srv_metrics_remove_renderer(render_loop_answers, s);
    mnt_list_free(s);
    nfs_drc_free(s->drc);
    nlm_grants_free(s->grants);
    nlm_hosts_free(s->hosts);
    nfs_locks_free(s->locks);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s->listen);
    free(s->loopback_cc);
    free(s);
}

int nfs_server_start(struct nfs_server **out, const struct nfs_server_config *cfg, struct core *c,
                     struct tenants *t)
{
    int rc;
    struct nfs_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->lfd = -1;
    s->cfg = *cfg;
    s->core = c;
    s->tenants = t;
    s->listen = strdup(cfg->listen ? cfg->listen : "127.0.0.1:2049");
    if (!s->listen) {
        rc = -ENOMEM;
        goto fail;
    }
    s->cfg.listen = s->listen;
    if (s->cfg.max_record == 0)
        s->cfg.max_record = NFS_MAX_RECORD_DEFAULT;
    if (s->cfg.max_conns <= 0)
        s->cfg.max_conns = 10000;
    if (s->cfg.idle_timeout_s < 0)
        s->cfg.idle_timeout_s = 0;
    if (s->cfg.loop_poll_us < 0)
        s->cfg.loop_poll_us = 0;
    if (cfg->loopback_congestion && *cfg->loopback_congestion) {
        /* refused names (unknown, or not in tcp_allowed_congestion_control
         * without CAP_NET_ADMIN) fail the start, not every connection */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        rc = fd < 0 ? -errno : sock_set_congestion(fd, cfg->loopback_congestion);
        if (fd >= 0)
            close(fd);
        if (rc < 0) {
            srv_log(ERROR, NFS, "req=- tenant=- TCP congestion control \"%s\" refused: %s",
                    cfg->loopback_congestion, srv_strerror(rc));
            rc = -EINVAL;
            goto fail;
        }
        if (!(s->loopback_cc = strdup(cfg->loopback_congestion))) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    s->cfg.loopback_congestion = s->loopback_cc;
    if (s->cfg.max_record < NFS_IO_MAX + 4096) {
        srv_log(WARN, NFS, "req=- tenant=- max record %zu is below 1 MiB + headers: raised",
                s->cfg.max_record);
        s->cfg.max_record = NFS_IO_MAX + 4096;
    }
    if ((rc = nfs_drc_new(&s->drc, NFS_DRC_CAPACITY)) < 0 ||
        (rc = nfs_locks_new(&s->locks)) < 0 || (rc = nlm_grants_new(&s->grants)) < 0 ||
        (rc = nlm_hosts_new(&s->hosts, cfg->nlm_grace_s)) < 0)
        goto fail;
    if ((rc = fh_key_load(s)) < 0) {
        srv_log(ERROR, NFS, "req=- tenant=- cannot load the file handle key: %s",
                srv_strerror(rc));
        goto fail;
    }
    s->verf = core_write_verifier(c);
    nsm_state_next(s);
    if ((rc = nlm_hosts_load(s)) < 0)
        goto fail;
    if (srv_loops_count() < 1) {
        srv_log(ERROR, NFS, "req=- tenant=- no event loop running");
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = listen_open(s)) < 0)
        goto fail;
    s->lloop = srv_loop_get(0);
    if ((rc = loop_sync(s, s->lloop, listener_create)) < 0 || !s->lev) {
        rc = rc < 0 ? rc : -ENOMEM;
        if (s->lfd >= 0)
            close(s->lfd);
        goto fail;
    }
    srv_metrics_add_renderer(render_loop_answers, s);
    if (s->cfg.register_rpcbind)
        rpcbind_register(s);
    srv_log(INFO, NFS, "req=- tenant=- NFSv3 + MOUNTv3 + NLMv4 + NSMv1 listening on %s (port %u, "
            "max record %zu, at most %d connections, idle timeout %d s)", s->listen, s->port,
            s->cfg.max_record, s->cfg.max_conns, s->cfg.idle_timeout_s);
    nlm_hosts_start(s);
    *out = s;
    return 0;
fail:
    server_free(s);
    return rc;
}

void nfs_server_stop(struct nfs_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_mutex_unlock(&s->lock);
    loop_sync(s, s->lloop, listener_free);
    for (int i = 0; i < srv_loops_count(); i++)
        loop_sync(s, srv_loop_get(i), conns_close_here);
    pthread_mutex_lock(&s->lock);
    while (s->inflight > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->registered)
        rpcbind_apply(s, false);
    srv_log(INFO, NFS, "req=- tenant=- NFS server on %s stopped", s->listen);
    server_free(s);
}
