/* SPDX-License-Identifier: Apache-2.0
 * nfs_int: what the NFS front end's files share: the server, a call in
 * flight (struct nfs_req), the procedure table entry, and the helpers every
 * procedure uses (handle -> export + principal, core_attr -> fattr3, wcc).
 *
 * A call is born on its connection's loop thread (record decoded, DRC
 * checked), runs its procedure on a worker thread (arguments decoded, core
 * calls, results encoded) and dies back on the loop (reply written); a
 * procedure flagged NFS_PF_LOOP first tries to run on the loop itself, as a
 * principal with CORE_P_NOWAIT, and goes to a worker only if a core call
 * answered -EWOULDBLOCK (nfs_req_status notes it in r->wouldblock). The
 * procedure never touches the connection; it reads r->peer, r->call and
 * fills its result struct.
 * A procedure returns NFS_REQ_OK (send the result) or NFS_REQ_DROP (send
 * nothing; the client retries). The nfsstat3 is part of the result, apart
 * from that return value (ganesha's rule). */
#ifndef NFS_INT_H
#define NFS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rpc/rpc.h>

#include "core.h"
#include "nfs_drc.h"
#include "nfs_fh.h"
#include "nfs_lock.h"
#include "nfs_rec.h"
#include "nfs_server.h"
#include "nlm_host.h"
#include "qos_admit.h"
#include "tenants.h"
#include "xdr/mount_prot.h"
#include "xdr/nfs3_prot.h"
#include "xdr/nlm4_prot.h"
#include "xdr/nsm_prot.h"

#define NFS_PROG 100003
#define NFS_VERS 3
#define MNT_PROG 100005
#define MNT_VERS 3
#define NLM_PROG_NUM 100021
#define NLM_VERS 4
#define NSM_PROG_NUM 100024
#define NSM_VERS 1

#define NFS_MAX_RECORD_DEFAULT ((size_t)4 * 1024 * 1024 + 64 * 1024)
#define NFS_IO_MAX ((uint32_t)1024 * 1024) /* rtmax/wtmax */
#define NFS_DIR_PREF ((uint32_t)64 * 1024)  /* dtpref */

enum nfs_req_rc { NFS_REQ_OK = 0, NFS_REQ_DROP = 1 };

struct nfs_req;
typedef int (*nfs_proc_fn)(struct nfs_req *r, void *args, void *res);
typedef void (*nfs_free_fn)(void *res);

#define NFS_PF_NONIDEM 0x1 /* answer retransmissions from the duplicate request cache */
#define NFS_PF_MODIFY 0x2  /* changes the namespace (refused on read-only exports) */
/* May be answered on the connection's loop thread (nfs_rpc.c): the procedure
 * reads only (metadata, or data already verified in memory) and its core
 * calls honour CORE_P_NOWAIT. */
#define NFS_PF_LOOP 0x4

/* How QoS admits a procedure's calls (nfs_rpc.c), as the tenant of the call's
 * first file handle. */
enum nfs_qos {
    NFS_QOS_NONE = 0, /* not admitted: NULL, MOUNT, NLM, NSM */
    NFS_QOS_META,     /* one metadata op */
    NFS_QOS_READ,     /* a read op of the call's count3 bytes */
    NFS_QOS_WRITE,    /* a write op of the call's count3 bytes */
};

/* Decode arguments in place (e.g. WRITE data left in the record); NULL: xdr_args. */
typedef bool (*nfs_decode_fn)(struct nfs_req *r, XDR *x, void *args);

/* One row of a program's dispatch table (ganesha's nfs3_func_desc shape). */
struct nfs_proc_desc {
    nfs_proc_fn fn;
    nfs_free_fn free_res; /* NULL: xdr_free(xdr_res, res) */
    nfs_decode_fn decode; /* NULL: xdr_args */
    nfs_free_fn free_args; /* NULL: xdr_free(xdr_args, args) */
    xdrproc_t xdr_args, xdr_res;
    size_t args_size, res_size;
    const char *name;
    unsigned flags;
    enum nfs_qos qos;
};

struct nfs_mount_ent;
struct nlm_grants;
struct nlm_cb;

struct nfs_server {
    struct nfs_server_config cfg;
    char *listen;
    char *loopback_cc; /* cfg.loopback_congestion, owned; NULL: the system's */
    struct core *core;
    struct tenants *tenants;
    uint8_t fh_key[NFS_FH_KEYLEN];
    uint64_t verf; /* write verifier (core_write_verifier) */

    int lfd;
    uint16_t port;
    struct sockaddr_storage laddr; /* bound listener address (for rpcbind) */
    socklen_t laddrlen;
    int lfamily;
    struct srv_loop *lloop;
    struct evconnlistener *lev;
    bool registered;

    pthread_mutex_t lock; /* conns, inflight, stopping, mounts */
    pthread_cond_t cond;
    struct nfs_conn *conns;
    int nconns; /* connections accepted and not yet closed (atomic; not under lock) */
    unsigned long inflight;
    bool stopping;
    int pending_closes; /* loops still closing their connections at stop */

    struct nfs_drc *drc;
    struct nfs_mount_ent *mounts;
    struct nfs_locks *locks; /* NLM byte-range locks */
    struct nlm_grants *grants; /* blocked NLM requests (nlm_grant.c) */
    struct nlm_cb *cbs;        /* GRANTED callbacks in flight, under lock */
    struct nlm_hosts *hosts;   /* remembered NLM client hosts, grace period (nlm_host.c) */
    int32_t nsm_state;       /* NSM status number of this incarnation (odd) */
    atomic_uint_fast64_t loop_answers; /* calls answered on a loop thread (NFS_PF_LOOP) */
    atomic_uint_fast64_t loop_retries; /* ... tried there, then run on a worker */
    atomic_uint_fast64_t batched;      /* replies written in a batch (nfs_rpc.c batch_add) */
    atomic_uint_fast64_t batch_writes; /* batches written (batch_flush) */
    atomic_uint_fast64_t poll_hits;    /* calls found by polling (conn_poll_next) */
};

/* A call in flight. */
struct nfs_req {
    struct nfs_server *srv;
    struct nfs_conn *conn; /* loop thread only */
    const char *conn_peer; /* "addr:port" of the client, for log lines (any thread) */
    struct sockaddr_storage peer;
    struct nfs_call call;
    const struct nfs_proc_desc *desc;
    void *rec; /* the whole record (heap) */
    size_t reclen;
    void *args, *res;
    void *reply; /* encoded reply record (heap) */
    size_t replylen;
    /* Bulk data sent after the encoded reply without a user-space copy
     * (READ): the procedure encodes its opaque<> as empty and leaves the data
     * here as core pieces (heap); the transport patches the opaque length and
     * the record mark, then queues the pieces behind the reply: extents as
     * file segments (sendfile), memory by reference, holes as zeros. */
    struct nfs_bulk *bulk;
    uint64_t bulklen; /* bulk->ps.len */
    bool drc;
    struct nfs_drc_key drc_key;
    bool throttled;                 /* QoS refused it: answered NFS3ERR_JUKEBOX */
    bool name_nul;                  /* a name of the arguments holds a NUL (nfs3_names_decode) */
    bool args_decoded;              /* args hold decoded XDR (freed by req_xdr_release) */
    bool res_live;                  /* res holds a result to free (after its reply is sent) */
    struct nfs_req *qprev, *qnext;  /* the connection's requests waiting in QoS */
    uint64_t qos_ino;               /* the first handle's inode (QoS bucket/directory levels) */
    /* QoS admission in pieces (nfs_rpc.c req_qos_step): the call runs once
     * all its bytes are admitted, each piece at most the smallest burst on
     * its QoS path (qos_ino, the caller's uid) */
    uint32_t qos_tenant;
    enum qos_class qos_cls;
    uint64_t qos_left;  /* bytes not yet admitted */
    uint64_t qos_piece; /* size of the piece being admitted */
    struct qos_memo qos_memo; /* qos_ino's bucket and directories, looked up once */
    bool qos_started;   /* the operation was charged (with the first piece) */
    bool qos_sync;      /* inside qos_admit_piece: a grant there is only noted */
    bool qos_now;       /* ... and was */
    int qos_err;
    uint64_t start_us;
    bool on_loop;    /* running on the loop thread: the principal gets CORE_P_NOWAIT */
    bool wouldblock; /* on the loop, a core call would have waited: run on a worker */

    /* Resolved by nfs_req_fh(): the export of the first handle of the call
     * and the principal that the caller acts as. */
    bool have_export;
    int err; /* internal error of the call, for metrics (0 = success) */
    /* the fields of that export the procedures use (the whole record is over
     * a kilobyte, which made every call's allocation miss malloc's fast
     * per-thread cache) */
    struct {
        uint32_t id, tenant;
        uint64_t dir;
    } exp;
    struct core_principal p;
    uint64_t bucket; /* bucket of the first handle's inode, for metrics (0 = none) */
    /* Payload bytes for the metrics (file data only, as docs/admin-api.md
     * defines them): WRITE data received (set by the procedure); READ data
     * sent (the bulk bytes, counted by the transport). RPC/XDR framing and the
     * arguments and results of other procedures are not counted. */
    uint64_t payload_in;
};

/* READ data on its way to the socket: either core pieces, held (store read
 * token, verified copies) until the last evbuffer reference to them is sent
 * or dropped (loop thread), or, when @c mem is set, @c len bytes of one heap
 * buffer (a small READ done with core_read). */
struct nfs_bulk {
    struct core_pieces ps;
    void *mem;
    uint64_t len; /* bytes of data (ps.len, or of mem) */
    unsigned refs;
};

/* ---- nfs_rpc.c ---- */
extern const struct nfs_proc_desc nfs3_procs[22];
extern const struct nfs_proc_desc mnt_procs[6];
extern const struct nfs_proc_desc nlm_procs[24];
extern const struct nfs_proc_desc nsm_procs[7];

/** Count a call (or a callback) in flight; nfs_server_stop waits for zero. */
void nfs__inflight_add(struct nfs_server *s, long d);

/* ---- nfs_export.c: handles, exports and principals ---- */

/** Build the principal of the call for export @p e from the call's credential
 * and the export's squash and read-only rules (sets r->exp and r->p; adds
 * CORE_P_NOWAIT when the call runs on the loop thread). */
void nfs_req_bind_export(struct nfs_req *r, const struct tenant_export *e);

/** nfs_fh_decode, remembering the last handle this thread decoded since
 * nfs__fh_memo_reset: the transport checks a call's first handle for QoS and
 * the procedure checks it again (its MAC, a SipHash, is most of a decode), so
 * the second check of the same bytes under the same key takes the first's
 * result (a decode depends on nothing else). Reset when a call arrives and
 * when a worker takes one, so that a call does not profit from the handle of
 * an earlier call (it would flatter a benchmark that repeats one handle). */
int nfs__fh_decode(const uint8_t key[NFS_FH_KEYLEN], const void *data, size_t len,
                   struct nfs_fh *out);
void nfs__fh_memo_reset(void);
/** Resolve a client handle: verify it, find its export for this client, bind
 * the principal (first handle of the call), and check the inode still exists.
 * @param[out] ino, attr the object (attr may be NULL).
 * @return NFS3_OK, NFS3ERR_BADHANDLE, NFS3ERR_STALE (forged, other tenant,
 *         export gone or not for this client, deleted inode), NFS3ERR_XDEV
 *         (second handle of another export). */
nfsstat3 nfs_req_fh(struct nfs_req *r, const nfs_fh3 *fh, uint64_t *ino, struct core_attr *attr);
/** Fill @p out with a handle for @p a in the call's export (out->data heap). @return 0, -ENOMEM. */
int nfs_req_mkfh(struct nfs_req *r, const struct core_attr *a, nfs_fh3 *out);
/** Write the handle of @p a in the call's export into @p out (NFS_FH_LEN bytes). */
void nfs_req_fh_put(const struct nfs_req *r, const struct core_attr *a, uint8_t *out);
/** nfsstat3 of an internal error, logging the odd ones with the procedure name.
 * -EWOULDBLOCK on the loop thread only sets r->wouldblock (the result is
 * thrown away and the call runs again on a worker). */
nfsstat3 nfs_req_status(struct nfs_req *r, int err);

/* ---- XDR written by hand (READDIR/READDIRPLUS pages, nfs_dir.c) ---- */
static inline uint8_t *nfs_xdr_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}
static inline uint8_t *nfs_xdr_put64(uint8_t *p, uint64_t v)
{
    return nfs_xdr_put32(nfs_xdr_put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}
#define NFS_FATTR3_XDR 84 /* bytes of an encoded fattr3 */

/* ---- nfs_dir.c: READDIR / READDIRPLUS pages ---- */
/** The result of READDIR and READDIRPLUS: READDIR3res / READDIRPLUS3res as
 * XDR bytes (the status first, as every NFSv3 result; a zeroed one with only
 * its status set encodes that status and no attributes). */
struct nfs_dirres {
    nfsstat3 status;
    uint8_t *buf; /* the encoded result: heap, or fail */
    size_t len;
    uint8_t fail[4 + 4 + NFS_FATTR3_XDR]; /* a failure: status + directory attributes */
};
/** Encode an nfs_dirres (XDR_ENCODE: its bytes; XDR_FREE: free them). */
bool_t xdr_nfs_dirres(XDR *x, struct nfs_dirres *r);
/** One page of directory @p dirfh from @p cookie, encoded into @p out: entries
 * only (READDIR) or with attributes and handles (@p plus), as many as fit
 * @p count bytes of reply (capped at NFS_IO_MAX) and, for READDIRPLUS,
 * @p dircount bytes of fileid + name + cookie. @return NFS_REQ_OK (the
 * status is in @p out: NFS3_OK, NOTDIR, ACCES, BAD_COOKIE, TOOSMALL, STALE,
 * BADHANDLE, IO). */
int nfs_dir_page(struct nfs_req *r, const nfs_fh3 *dirfh, uint64_t cookie,
                 const char cookieverf[NFS3_COOKIEVERFSIZE], uint32_t count, uint32_t dircount,
                 bool plus, struct nfs_dirres *out);

/* ---- nfs_attr.c: attribute conversions ---- */
void nfs_attr_fattr(const struct nfs_req *r, const struct core_attr *a, fattr3 *out);
/** Write @p a as an XDR fattr3 (NFS_FATTR3_XDR bytes, what xdr_fattr3 writes
 * for nfs_attr_fattr's result) at @p p. @return p + NFS_FATTR3_XDR. */
uint8_t *nfs_attr_encode(const struct nfs_req *r, const struct core_attr *a, uint8_t *p);
void nfs_attr_post(const struct nfs_req *r, const struct core_attr *a, post_op_attr *out);
void nfs_attr_pre(const struct core_attr *a, pre_op_attr *out);
/** wcc_data from @p pre (may be NULL: then no attributes at all) and a fresh
 * getattr of @p ino with pre->gen. */
void nfs_attr_wcc(struct nfs_req *r, const struct core_attr *pre, uint64_t ino, wcc_data *out);
/** Translate a sattr3. @return 0, -EINVAL (bad time_how or nanoseconds). */
int nfs_attr_sattr(const sattr3 *s, struct core_setattr *out);
/** Name from XDR string: length checked. @return 0, -ENAMETOOLONG, -EINVAL (empty),
 * SRV_EBADNAME (a name or SYMLINK target of the call holds a NUL byte: NFS3ERR_INVAL). */
int nfs_name_check(const struct nfs_req *r, const char *name, size_t *len);
/** Arguments decoder (nfs_proc_desc.decode) of LOOKUP, CREATE, MKDIR, SYMLINK,
 * MKNOD, REMOVE, RMDIR, RENAME and LINK: the generated decoders' result, and
 * r->name_nul set when a name (or SYMLINK's target) holds a NUL byte, which
 * the C string would silently cut. */
bool nfs3_names_decode(struct nfs_req *r, XDR *x, void *args);
/** After a create of @p a: apply the sattr3 fields the create did not (uid,
 * gid, size, times; mode too when @p with_mode) and refresh @p a.
 * @return 0 or the core_setattr error. */
int nfs_attr_apply_rest(struct nfs_req *r, const sattr3 *s, bool with_mode, struct core_attr *a);
/** Fill the obj/obj_attributes of a CREATE/MKDIR/SYMLINK/MKNOD result. @return 0, -ENOMEM. */
int nfs_req_created(struct nfs_req *r, const struct core_attr *obj, post_op_fh3 *fh,
                    post_op_attr *attr);
/** Attributes of @p ino (generation @p gen) as the call's principal. */
int nfs_attr_get(struct nfs_req *r, uint64_t ino, uint32_t gen, struct core_attr *out);

/* ---- procedure prototypes (one file each) ---- */
#define NFS3_PROC(n) int nfs3_##n(struct nfs_req *r, void *args, void *res);
NFS3_PROC(null)
NFS3_PROC(getattr)
NFS3_PROC(setattr)
NFS3_PROC(lookup)
NFS3_PROC(access)
NFS3_PROC(readlink)
NFS3_PROC(read)
NFS3_PROC(write)
NFS3_PROC(create)
NFS3_PROC(mkdir)
NFS3_PROC(symlink)
NFS3_PROC(mknod)
NFS3_PROC(remove)
NFS3_PROC(rmdir)
NFS3_PROC(rename)
NFS3_PROC(link)
NFS3_PROC(readdir)
NFS3_PROC(readdirplus)
NFS3_PROC(fsstat)
NFS3_PROC(fsinfo)
NFS3_PROC(pathconf)
NFS3_PROC(commit)
#undef NFS3_PROC
/** In-place WRITE3args decoder: data points into the record (nfs3_write.c). */
bool nfs3_write_decode(struct nfs_req *r, XDR *x, void *args);
void nfs3_write_args_free(void *args);
int mnt_null(struct nfs_req *r, void *args, void *res);
int mnt_mnt(struct nfs_req *r, void *args, void *res);
int mnt_dump(struct nfs_req *r, void *args, void *res);
int mnt_umnt(struct nfs_req *r, void *args, void *res);
int mnt_umntall(struct nfs_req *r, void *args, void *res);
int mnt_export(struct nfs_req *r, void *args, void *res);
/* MOUNT's record of who mounted what (DUMP), kept in memory as most servers do. */
struct nfs_mount_ent {
    char host[64];
    char *path;
    uint32_t export_id; /* the export it was mounted through (DUMP shows it only to its clients) */
    struct nfs_mount_ent *next;
};
/** Client address of the call as text, without port. */
void nfs_req_peer_host(const struct nfs_req *r, char *buf, size_t len);
/** Remove the mounts of @p host: of @p path only, or all when @p path is NULL. */
void mnt_list_remove(struct nfs_server *s, const char *host, const char *path);
/** Forget every mount of the server (nfs_server_stop). */
void mnt_list_free(struct nfs_server *s);
/** Normalise a MOUNT path into @p out: repeated slashes and "." components
 * dropped, no trailing slash, "/" for an empty path.
 * @return 0, -EINVAL (a ".." component, or a relative path), -ENAMETOOLONG. */
int mnt_path_norm(const char *in, char *out, size_t outlen);

/* ---- NLM v4 / NSM v1 (nlm4_<proc>.c, nsm_<proc>.c) ---- */
int nlm4_op_test(struct nfs_req *r, void *args, void *res);
int nlm4_op_lock(struct nfs_req *r, void *args, void *res);
int nlm4_op_cancel(struct nfs_req *r, void *args, void *res);
int nlm4_op_unlock(struct nfs_req *r, void *args, void *res);
int nlm4_op_free_all(struct nfs_req *r, void *args, void *res);
int nsm_op_stat(struct nfs_req *r, void *args, void *res);
int nsm_op_notify(struct nfs_req *r, void *args, void *res);
/** Resolve the file of an NLM lock (its handle) and bind the call's export.
 * @return NLM4_GRANTED (resolved) or NLM4_STALE_FH. */
nlm4_stats nlm_req_file(struct nfs_req *r, const nlm4_lock *l, uint32_t *tenant, uint64_t *ino);
/** The lock owner of @p l; points into @p l. */
void nlm_owner(const nlm4_lock *l, struct nfs_lock_owner *o);
/** Copy the request cookie into the result (heap). @return 0, -ENOMEM (then empty). */
int nlm_cookie_copy(const nlm4_netobj *in, nlm4_netobj *out);

/* ---- nlm_grant.c: blocked requests and GRANTED callbacks ---- */
int nlm_grants_new(struct nlm_grants **out);
void nlm_grants_free(struct nlm_grants *g);
/** Remember a blocking LOCK that conflicted (answered NLM4_BLOCKED). */
void nlm_block_add(struct nfs_req *r, const nlm4_lockargs *a, uint32_t tenant, uint64_t ino);
/** Forget a remembered request (CANCEL). @return true if there was one. */
bool nlm_block_cancel(struct nfs_server *s, uint32_t tenant, uint64_t ino,
                      const struct nfs_lock_owner *o, uint64_t off, uint64_t len);
/** Forget the remembered requests of client host @p caller made from address
 * @p from (NULL: all of them) (FREE_ALL, SM_NOTIFY).
 * @return the number of its requests from other addresses, kept. */
size_t nlm_block_forget_host(struct nfs_server *s, const char *caller,
                             const struct sockaddr_storage *from);
/** After locks were released: grant what now can be, and call the clients back. */
void nlm_block_retry(struct nfs_server *s);
/** Drop the callbacks running on the calling loop (nfs_server_stop). */
void nlm_cbs_close_here(struct nfs_server *s);

#endif
