/* SPDX-License-Identifier: Apache-2.0
 * nfs_rec: ONC RPC over TCP framing (record marking, RFC 5531 section 11)
 * and the RPC message headers (call decode, reply encode).
 *
 * Pure functions over memory and evbuffers: no sockets, no logging, no
 * global state, so the unit tests and the fuzzer drive them directly.
 * A record is one or more fragments, each preceded by a 4-byte mark (high
 * bit = last fragment, low 31 bits = length). Records larger than the
 * configured maximum are refused before their bytes are buffered.
 * Thread: any; one struct nfs_rec belongs to one connection. */
#ifndef NFS_REC_H
#define NFS_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rpc/rpc.h>

struct evbuffer;

/* Cast an xdr_<type> routine to xdrproc_t without -Wcast-function-type noise
 * (a cast through void (*)(void) is the documented escape). */
#define NFS_XDRPROC(f) ((xdrproc_t)(void (*)(void))(f))

/* Reassembly state of one connection's incoming records. */
struct nfs_rec {
    size_t max;         /* largest record accepted (sum of its fragments) */
    uint8_t *buf;       /* record being assembled (heap) */
    size_t len, cap;    /* bytes in buf, bytes allocated */
    uint32_t frag_left; /* bytes still to come in the current fragment */
    bool in_frag;       /* a fragment mark was read and its body is pending */
    bool last;          /* the current fragment is the record's last */
};

/** Initialise @p r for records of at most @p max bytes. */
void nfs_rec_init(struct nfs_rec *r, size_t max);
/** Free what @p r holds. Safe to call twice. */
void nfs_rec_fini(struct nfs_rec *r);
/** Consume bytes from @p in until one record is complete.
 * @param[out] out  the record (heap, free() it) when 1 is returned
 * @param[out] len  its length
 * @return 1 (a record is in @p out), 0 (need more input; everything usable
 *         was consumed), -EMSGSIZE (the record would exceed the maximum; the
 *         connection must be closed), -ENOMEM. */
int nfs_rec_take(struct nfs_rec *r, struct evbuffer *in, void **out, size_t *len);
/** Where the rest of the current fragment goes, for a transport that reads
 * it straight from the socket (no evbuffer in between).
 * @return the bytes still to come in the fragment (0 outside a fragment);
 *         *@p dst points at where the next of them belongs. */
size_t nfs_rec_space(struct nfs_rec *r, void **dst);
/** @p n bytes (at most what nfs_rec_space returned) were put at its @p dst.
 * The next nfs_rec_take goes on after them. */
void nfs_rec_filled(struct nfs_rec *r, size_t n);

/* Decoded RPC call header plus the caller's credentials. */
#define NFS_RPC_MAXGIDS 16
struct nfs_cred {
    uint32_t flavor; /* AUTH_NONE or AUTH_SYS when the call is accepted */
    uint32_t uid, gid;
    uint32_t ngids;
    uint32_t gids[NFS_RPC_MAXGIDS];
    char machine[256]; /* AUTH_SYS machinename, NUL-terminated ("" for AUTH_NONE) */
};

/* What the transport must do with a decoded call. */
enum nfs_call_verdict {
    NFS_CALL_OK = 0,       /* dispatch it */
    NFS_CALL_RPCMISMATCH,  /* rpcvers != 2: MSG_DENIED / RPC_MISMATCH */
    NFS_CALL_BADCRED,      /* malformed credential: MSG_DENIED / AUTH_ERROR / AUTH_BADCRED */
    NFS_CALL_TOOWEAK,      /* flavor we do not accept: AUTH_ERROR / AUTH_TOOWEAK */
};

struct nfs_call {
    uint32_t xid, rpcvers, prog, vers, proc;
    enum nfs_call_verdict verdict;
    struct nfs_cred cred;
    size_t args_off; /* where the procedure arguments start in the record */
};

/** Decode the call header at the start of record @p buf.
 * @return 0 (see c->verdict; xid is always set), -EBADMSG (not an RPC call,
 *         or too short to hold one: no reply can be sent). */
int nfs_rpc_call_decode(const void *buf, size_t len, struct nfs_call *c);

/** Encode a complete reply record (mark + header + body) for an accepted call.
 * @param stat   SUCCESS, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR
 * @param res_fn results encoder (SUCCESS only; may be NULL for void)
 * @param lo, hi version range (PROG_MISMATCH only)
 * @param[out] out heap buffer (free()), @p outlen its length.
 * @return 0, -ENOMEM, -EOVERFLOW (results would not encode). */
int nfs_rpc_reply_accepted(uint32_t xid, enum accept_stat stat, xdrproc_t res_fn, void *res,
                           uint32_t lo, uint32_t hi, void **out, size_t *outlen);
/** Encode a MSG_DENIED reply record: RPC_MISMATCH (2..2) when @p verdict is
 * NFS_CALL_RPCMISMATCH, else AUTH_ERROR with AUTH_BADCRED or AUTH_TOOWEAK.
 * @return 0, -ENOMEM. */
int nfs_rpc_reply_denied(uint32_t xid, enum nfs_call_verdict verdict, void **out,
                         size_t *outlen);

#endif
