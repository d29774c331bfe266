/* SPDX-License-Identifier: Apache-2.0
 * nfs_rec: record marking and RPC message headers (see nfs_rec.h).
 *
 * The record buffer is sized once per fragment from its mark, so a record
 * costs one allocation and no copies beyond the read itself; a fragment over
 * the record limit is refused before anything is allocated (a stalled client
 * can hold at most one record's worth). Headers are coded with
 * libtirpc's xdrmem primitives; the reply verifier is always AUTH_NONE. */
#include "nfs_rec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <event2/buffer.h>

#define REC_LAST 0x80000000u
#define REC_LEN_MASK 0x7fffffffu
#define OPAQUE_AUTH_MAX 400 /* RFC 5531: opaque_auth body is at most 400 bytes */

void nfs_rec_init(struct nfs_rec *r, size_t max)
{
    memset(r, 0, sizeof(*r));
    r->max = max;
}

void nfs_rec_fini(struct nfs_rec *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
    r->in_frag = false;
}

static int rec_reserve(struct nfs_rec *r, size_t need)
{
    if (need <= r->cap)
        return 0;
    size_t cap = need < 512 ? 512 : need;
    uint8_t *nb = realloc(r->buf, cap);
    if (!nb)
        return -ENOMEM;
    r->buf = nb;
    r->cap = cap;
    return 0;
}

int nfs_rec_take(struct nfs_rec *r, struct evbuffer *in, void **out, size_t *len)
{
    for (;;) {
        if (!r->in_frag) {
            uint32_t mark;
            if (evbuffer_get_length(in) < 4)
                return 0;
            evbuffer_remove(in, &mark, 4);
            mark = ntohl(mark);
            r->last = (mark & REC_LAST) != 0;
            r->frag_left = mark & REC_LEN_MASK;
            if ((size_t)r->frag_left > r->max - r->len)
                return -EMSGSIZE;
            /* One allocation per fragment (a 1 MiB WRITE is one fragment)
             * instead of doublings that copy the record again and again. */
            if (rec_reserve(r, r->len + r->frag_left) < 0)
                return -ENOMEM;
            r->in_frag = true;
        }
        if (r->frag_left > 0) {
            size_t avail = evbuffer_get_length(in);
            if (avail == 0)
                return 0;
            size_t n = avail < r->frag_left ? avail : r->frag_left;
            if (rec_reserve(r, r->len + n) < 0)
                return -ENOMEM;
            evbuffer_remove(in, r->buf + r->len, n);
            r->len += n;
            r->frag_left -= (uint32_t)n;
            if (r->frag_left > 0)
                return 0;
        }
        r->in_frag = false;
        if (r->last) {
            /* An empty record still needs a heap pointer the caller may free. */
            if (rec_reserve(r, r->len ? r->len : 1) < 0)
                return -ENOMEM;
            *out = r->buf;
            *len = r->len;
            r->buf = NULL;
            r->len = r->cap = 0;
            r->last = false;
            return 1;
        }
    }
}

size_t nfs_rec_space(struct nfs_rec *r, void **dst)
{
    if (!r->in_frag)
        return 0;
    *dst = r->buf + r->len; /* nfs_rec_take reserved the whole fragment */
    return r->frag_left;
}

void nfs_rec_filled(struct nfs_rec *r, size_t n)
{
    r->len += n;
    r->frag_left -= (uint32_t)n;
}

/* Decode an AUTH_SYS body (RFC 5531 appendix A). @return 0 or -EBADMSG. */
static int cred_sys_decode(const char *body, u_int len, struct nfs_cred *cr)
{
    XDR x;
    int rc = -EBADMSG;
    uint32_t stamp, n;
    xdrmem_create(&x, (char *)body, len, XDR_DECODE);
    if (!xdr_u_int32_t(&x, &stamp) || !xdr_u_int32_t(&x, &n) || n > 255)
        goto out;
    char *mp = cr->machine;
    if (!xdr_opaque(&x, mp, n))
        goto out;
    cr->machine[n] = '\0';
    if (!xdr_u_int32_t(&x, &cr->uid) || !xdr_u_int32_t(&x, &cr->gid) ||
        !xdr_u_int32_t(&x, &cr->ngids) || cr->ngids > NFS_RPC_MAXGIDS)
        goto out;
    for (uint32_t i = 0; i < cr->ngids; i++)
        if (!xdr_u_int32_t(&x, &cr->gids[i]))
            goto out;
    if (xdr_getpos(&x) != len)
        goto out;
    rc = 0;
out:
    xdr_destroy(&x);
    return rc;
}

int nfs_rpc_call_decode(const void *buf, size_t len, struct nfs_call *c)
{
    XDR x;
    int rc = -EBADMSG;
    uint32_t mtype, flavor, blen, vflavor, vlen;
    char body[OPAQUE_AUTH_MAX];

    memset(c, 0, sizeof(*c));
    if (len > UINT32_MAX)
        return -EBADMSG;
    xdrmem_create(&x, (char *)buf, (u_int)len, XDR_DECODE);
    if (!xdr_u_int32_t(&x, &c->xid) || !xdr_u_int32_t(&x, &mtype) || mtype != CALL)
        goto out;
    if (!xdr_u_int32_t(&x, &c->rpcvers))
        goto out;
    if (c->rpcvers != 2) {
        c->verdict = NFS_CALL_RPCMISMATCH;
        rc = 0;
        goto out;
    }
    if (!xdr_u_int32_t(&x, &c->prog) || !xdr_u_int32_t(&x, &c->vers) ||
        !xdr_u_int32_t(&x, &c->proc))
        goto out;
    if (!xdr_u_int32_t(&x, &flavor) || !xdr_u_int32_t(&x, &blen))
        goto out;
    /* From here on the xid is known: a bad credential gets a reply. */
    rc = 0;
    if (blen > OPAQUE_AUTH_MAX || !xdr_opaque(&x, body, blen)) {
        c->verdict = NFS_CALL_BADCRED;
        goto out;
    }
    if (!xdr_u_int32_t(&x, &vflavor) || !xdr_u_int32_t(&x, &vlen) || vlen > OPAQUE_AUTH_MAX ||
        xdr_getpos(&x) + (size_t)((vlen + 3) & ~3u) > len) {
        c->verdict = NFS_CALL_BADCRED;
        goto out;
    }
    c->args_off = xdr_getpos(&x) + ((vlen + 3) & ~3u);
    c->cred.flavor = flavor;
    if (flavor == AUTH_NONE) {
        c->verdict = NFS_CALL_OK;
    } else if (flavor == AUTH_SYS) {
        c->verdict = cred_sys_decode(body, blen, &c->cred) == 0 ? NFS_CALL_OK : NFS_CALL_BADCRED;
    } else {
        c->verdict = NFS_CALL_TOOWEAK;
    }
out:
    xdr_destroy(&x);
    return rc;
}

/* Header of an accepted reply up to and including accept_stat. */
static bool reply_head(XDR *x, uint32_t xid, uint32_t stat)
{
    uint32_t v[6] = {xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, stat};
    for (int i = 0; i < 6; i++)
        if (!xdr_u_int32_t(x, &v[i]))
            return false;
    return true;
}

static void mark_put(uint8_t *p, size_t len)
{
    uint32_t m = htonl(REC_LAST | (uint32_t)len);
    memcpy(p, &m, 4);
}

/* Encode the reply into a buffer of @p cap bytes (mark included).
 * @return 0, -ENOMEM, -EOVERFLOW (does not fit or cannot encode). */
static int reply_encode(uint32_t xid, enum accept_stat stat, xdrproc_t res_fn, void *res,
                        uint32_t lo, uint32_t hi, size_t cap, void **out, size_t *outlen)
{
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    XDR x;
    int rc = -EOVERFLOW;
    xdrmem_create(&x, (char *)buf + 4, (u_int)(cap - 4), XDR_ENCODE);
    if (!reply_head(&x, xid, stat))
        goto out;
    if (stat == SUCCESS && res_fn && !res_fn(&x, res, 0))
        goto out;
    if (stat == PROG_MISMATCH && (!xdr_u_int32_t(&x, &lo) || !xdr_u_int32_t(&x, &hi)))
        goto out;
    size_t body = xdr_getpos(&x);
    mark_put(buf, body);
    *out = buf;
    *outlen = body + 4;
    buf = NULL;
    rc = 0;
out:
    xdr_destroy(&x);
    free(buf);
    return rc;
}

/* Most replies (attributes, handles, wcc data, a READ header) fit this; the
 * rest (READDIR pages, long paths) are sized first. */
#define REPLY_GUESS 1024

int nfs_rpc_reply_accepted(uint32_t xid, enum accept_stat stat, xdrproc_t res_fn, void *res,
                           uint32_t lo, uint32_t hi, void **out, size_t *outlen)
{
    /* One encoding pass into a buffer of the usual size; only a reply that
     * does not fit is measured (xdr_sizeof is a second encoding pass). */
    int rc = reply_encode(xid, stat, res_fn, res, lo, hi, REPLY_GUESS, out, outlen);
    if (rc != -EOVERFLOW)
        return rc;
    size_t body = 24;
    if (stat == SUCCESS && res_fn) {
        /* 0 means "cannot encode" or an empty (void) result; encoding tells. */
        body += xdr_sizeof(res_fn, res);
    } else if (stat == PROG_MISMATCH) {
        body += 8;
    }
    if (body > REC_LEN_MASK)
        return -EOVERFLOW;
    if (body + 4 <= REPLY_GUESS)
        return -EOVERFLOW; /* it did not encode in that much room */
    return reply_encode(xid, stat, res_fn, res, lo, hi, body + 4, out, outlen);
}

int nfs_rpc_reply_denied(uint32_t xid, enum nfs_call_verdict verdict, void **out, size_t *outlen)
{
    uint32_t v[6] = {xid, REPLY, MSG_DENIED, 0, 0, 0};
    size_t n;
    if (verdict == NFS_CALL_RPCMISMATCH) {
        v[3] = RPC_MISMATCH;
        v[4] = 2;
        v[5] = 2;
        n = 6;
    } else {
        v[3] = AUTH_ERROR;
        v[4] = verdict == NFS_CALL_TOOWEAK ? AUTH_TOOWEAK : AUTH_BADCRED;
        n = 5;
    }
    uint8_t *buf = malloc(4 + n * 4);
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t be = htonl(v[i]);
        memcpy(buf + 4 + i * 4, &be, 4);
    }
    mark_put(buf, n * 4);
    *out = buf;
    *outlen = 4 + n * 4;
    return 0;
}
