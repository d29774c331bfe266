/* SPDX-License-Identifier: Apache-2.0
 * core_data: file data: reads, writes, truncation (the data sub-module,
 * core_data_int.h).
 *
 * Layout: a file is either inline (META_I_INLINE: its first bytes live in the
 * inline DBI, at most inline_max of them; the rest up to size reads as zeros)
 * or a list of extents keyed by file offset (meta_schema.h). Extents never
 * overlap; bytes no extent covers read as zeros (holes). New data lands in
 * fresh extents cut on the 1 MiB grid of file offsets (STORE_EXTENT_MAX).
 *
 * Writes are copy-on-write: an existing extent the write touches is rewritten
 * whole (read, patched) into a NEW extent that replaces it, so a crash leaves
 * either the old or the new bytes. The data is written on the calling thread;
 * the new extents then become PENDING (core_pend.c): an in-memory overlay on
 * the committed map that reads and attributes see at once. A writer plans on
 * a snapshot of the pending overlay and the committed map and inserts only
 * if the extents it read are still the effective ones (rechecked when the
 * versions moved; -EAGAIN internally, retried, serialized per inode after two
 * losses).
 *
 * Stability: UNSTABLE writes stay pending until core_commit (or a flush for
 * another reason, see core_pend.c) and answer CORE_UNSTABLE; DATA_SYNC and
 * FILE_SYNC writes flush the inode's pending writes with themselves before
 * they return (CORE_FILE_SYNC). A flush syncs the data, then one writer op
 * commits the extents, so no commit ever points at unsynced data.
 *
 * Reads merge the pending overlay over the committed map. Large block-aligned
 * ranges into aligned memory are read with O_DIRECT, several extents in one
 * io_uring batch, and checked with their 16 KiB block CRCs; the rest goes
 * through the page cache (warm re-reads).
 *
 * Truncation: a shrinking truncate frees the extents past the new size and
 * replaces the one holding the new end by a copy cut at it (made on the
 * caller's thread while the inode is held exclusively), so usage follows the
 * size; without that copy (an error) only its visible length (vlen) shrinks.
 * Thread: any. */
#include "core_data_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "srv_err.h"
#include "srv_log.h"

#define WRITE_RETRIES 32

static int extent_put(struct meta_txn *t, uint64_t ino, const struct core__fext *x)
{
    struct meta_extent me = {.dev = x->e.dev, .len = x->e.len, .off = x->e.off, .crc = x->e.crc,
                             .vlen = x->vlen};
    return meta_extent_put(t, ino, x->foff, &me);
}

/* Replace the inline bytes of @p ino (none when @p len is 0). */
static int inline_set(struct meta_txn *t, uint64_t ino, const void *buf, size_t len)
{
    if (len == 0) {
        int rc = meta_inline_del(t, ino);
        return rc == -ENOENT ? 0 : rc;
    }
    return meta_inline_put(t, ino, buf, len);
}

/* Forget the S3 ETag of a file changed through the POSIX view (recomputed lazily). */
/* Usage after a change of file @p r's extents: @p delta bytes more in its map, @p kept
 * bytes of the extents it let go of still held by another version (the store keeps
 * them). An unlinked file (an orphan still held open) was credited whole when it went:
 * only what the others keep counts again. */
static int usage_apply(struct core *c, struct meta_txn *t, const struct meta_inode *r,
                       int64_t delta, int64_t kept)
{
    if (r->nlink == 0)
        return kept ? core__usage_charge_store(c, t, r->tenant, r->bucket, kept) : 0;
    int rc = core__usage_charge(c, t, r->tenant, r->parent, delta + kept, 0, false);
    if (rc == 0 && kept)
        rc = core__usage_charge_dirs(c, t, r->tenant, r->parent, -kept, 0);
    return rc;
}

static int etag_forget(struct core *c, struct meta_txn *t, uint64_t ino)
{
    char etag[CORE_ETAG_MAX + 1];
    void *meta = NULL;
    size_t ml = 0;
    int rc = meta_objmeta_get(t, ino, etag, CORE_ETAG_MAX + 1, &meta, &ml);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && etag[0])
        rc = meta_objmeta_put(t, ino, "", meta, ml);
    free(meta);
    return rc;
}

static int eff_overlaps(struct core *c, struct meta_txn *t, uint64_t ino, const struct meta_inode *r,
                        const struct core__fext_list *pend, uint64_t lo, uint64_t hi,
                        bool want_crc, struct core__fext_list *out);

/* ---- truncate (inside setattr's op) ---- */

int core__truncate_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                     uint64_t newsize, struct core__cut *cut)
{
    int64_t freed = 0, kept = 0; /* bytes the file lets go of; of those, still held elsewhere */
    int rc = 0;
    if (cut)
        cut->used = false;
    if (r->flags & META_I_EVICTED)
        return SRV_ERECALL; /* core_setattr recalls first; evicted again since: retry */
    if (r->flags & META_I_INLINE) {
        const void *vd;
        size_t vl;
        rc = core__inline_get(t, ino, &vd, &vl);
        if (rc)
            return rc;
        if (newsize < vl) {
            void *copy = malloc(newsize ? newsize : 1);
            if (!copy)
                return -ENOMEM;
            memcpy(copy, vd, newsize);
            freed = (int64_t)(vl - newsize);
            rc = inline_set(t, ino, copy, newsize);
            free(copy);
        }
    } else if (newsize < r->size) {
        struct core__fext_list l = {0};
        rc = core__overlaps(t, ino, newsize, UINT64_MAX, &l, false);
        for (size_t i = 0; i < l.n && rc == 0; i++) {
            struct core__fext *x = &l.v[i];
            if (x->foff >= newsize) {
                rc = core__extent_free(c, t, &x->e);
                if (rc == 1)
                    kept += x->e.len;
                if (rc >= 0)
                    rc = meta_extent_del(t, ino, x->foff);
                freed += x->e.len;
            } else if (cut && cut->old.foff == x->foff && cut->old.e.dev == x->e.dev &&
                       cut->old.e.off == x->e.off && cut->old.vlen == x->vlen &&
                       cut->cut.vlen == newsize - x->foff) {
                /* the boundary extent becomes its copy cut at the new size */
                rc = core__extent_free(c, t, &x->e);
                if (rc == 1)
                    kept += x->e.len;
                if (rc >= 0)
                    rc = core__extent_use(t, &cut->cut.e, cut->cut.bcrc, cut->cut.nb);
                if (rc == 0)
                    rc = extent_put(t, ino, &cut->cut);
                freed += (int64_t)x->e.len - (int64_t)cut->cut.e.len;
                cut->used = rc == 0;
            } else {
                /* no copy made (or the map moved): only the visible length shrinks */
                x->vlen = (uint32_t)(newsize - x->foff);
                rc = extent_put(t, ino, x);
            }
        }
        free(l.v);
        if (rc == 0 && newsize == 0) {
            /* an empty file starts inline again */
            struct core__fext_list rest = {0};
            rc = core__overlaps(t, ino, 0, UINT64_MAX, &rest, false);
            if (rc == 0 && rest.n == 0)
                r->flags |= META_I_INLINE;
            free(rest.v);
        }
    }
    if (rc)
        return rc;
    if (freed) {
        /* the file's usage (and its directories') lose what it let go of, the store's
         * only what was freed */
        r->used = r->used > (uint64_t)freed ? r->used - (uint64_t)freed : 0;
        rc = usage_apply(c, t, r, -freed, kept);
        if (rc)
            return rc;
    }
    r->size = newsize;
    rc = etag_forget(c, t, ino);
    if (rc == 0)
        rc = core__dirty_note(t, ino, r, META_DIRTY_ETAG);
    return rc;
}

int core__truncate_plan(struct core *c, uint64_t ino, uint64_t newsize,
                        const struct core__pend_batch *b, struct core__cut *cut)
{
    struct meta_txn *t;
    struct meta_inode r;
    struct core__fext_list pend = {0}, l = {0};
    char *buf = NULL;
    int rc;
    memset(cut, 0, sizeof(*cut));
    if (newsize == 0)
        return 0;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, ino, &r);
    if (rc || r.type != CORE_REG)
        goto out;
    for (size_t i = 0; b && i < b->ext.n && rc == 0; i++)
        if (b->ext.v[i].foff <= newsize && b->ext.v[i].foff + b->ext.v[i].vlen > newsize)
            rc = core__fext_push(&pend, &b->ext.v[i]);
    if (rc == 0 && (!(r.flags & META_I_INLINE) || pend.n))
        rc = eff_overlaps(c, t, ino, &r, &pend, newsize, newsize + 1, true, &l);
    meta_rtxn_end(t);
    t = NULL;
    if (rc || l.n != 1 || l.v[0].foff >= newsize)
        goto out;
    /* the extent holding the new end: copy what stays into a new extent
     * (caller thread: read, write and sync here, the op only swaps them) */
    struct core__fext *x = &l.v[0];
    uint32_t keep = (uint32_t)(newsize - x->foff);
    if (posix_memalign((void **)&buf, STORE_ALIGN, STORE_EXTENT_MAX) != 0) {
        buf = NULL;
        rc = -ENOMEM;
        goto out;
    }
    rc = core__extent_pread(c, &x->e, x->bcrc, x->nb, 0, buf, keep, core__cache_epoch(c));
    if (rc)
        goto out;
    cut->old = *x;
    cut->cut.foff = x->foff;
    cut->cut.vlen = keep;
    rc = store_alloc_near(c->store, &x->e, keep, &cut->cut.e);
    if (rc)
        goto out;
    core__cache_invalidate(c, &cut->cut.e);
    rc = store_write(c->store, &cut->cut.e, buf, keep);
    if (rc == 0)
        rc = store_sync(c->store);
    if (rc) {
        store_unreserve(c->store, &cut->cut.e);
        goto out;
    }
    cut->cut.nb = core__bcrc_compute(buf, keep, cut->cut.bcrc);
    cut->made = true;
out:
    meta_rtxn_end(t);
    free(buf);
    free(pend.v);
    free(l.v);
    if (rc)
        memset(cut, 0, sizeof(*cut));
    return rc;
}

/* ---- the effective extent map: pending extents over committed ones ---- */

/* Effective extents of @p ino overlapping [lo, hi): @p pend are the pending
 * ones overlapping that range; committed ones come from @p t. */
static int eff_overlaps(struct core *c, struct meta_txn *t, uint64_t ino, const struct meta_inode *r,
                        const struct core__fext_list *pend, uint64_t lo, uint64_t hi,
                        bool want_crc, struct core__fext_list *out)
{
    struct core__fext_list com = {0};
    int rc = 0;
    out->n = 0;
    if (!(r->flags & META_I_INLINE))
        rc = core__overlaps(t, ino, lo, hi, &com, want_crc);
    if (rc == 0)
        rc = core__fext_merge(pend, &com, out);
    free(com.v);
    return rc;
}

/* Store ETag @p etag ("" = unknown, recomputed lazily) keeping the metadata blob. */
static int etag_store(struct core *c, struct meta_txn *t, uint64_t ino, const char *etag)
{
    char old[CORE_ETAG_MAX + 1];
    void *meta = NULL;
    size_t ml = 0;
    int rc = meta_objmeta_get(t, ino, old, CORE_ETAG_MAX + 1, &meta, &ml);
    if (rc == -ENOENT) {
        if (!etag[0])
            return 0;
        rc = 0;
        old[0] = '\0';
    }
    if (rc == 0 && strcmp(old, etag) != 0)
        rc = meta_objmeta_put(t, ino, etag, meta, ml);
    free(meta);
    return rc;
}

int core__pend_apply_t(struct core *c, struct meta_txn *t, uint64_t ino, struct meta_inode *r,
                       const struct core__pend_batch *b)
{
    int64_t delta = 0, kept = 0; /* bytes the file gains; replaced ones other versions hold */
    int rc = 0;
    const void *vd;
    size_t vl;
    if (!b->ext.n && !b->inl)
        return 0;
    if (r->flags & META_I_EVICTED)
        return SRV_ERECALL; /* writes recall first; evicted again since: retry */
    if (b->inl) {
        if (!(r->flags & META_I_INLINE)) {
            srv_log(ERROR, META, "ino=%llu: pending inline data for a file with extents",
                    (unsigned long long)ino);
            return -EIO;
        }
        rc = core__inline_get(t, ino, &vd, &vl);
        if (rc)
            return rc;
        delta -= (int64_t)vl;
        rc = inline_set(t, ino, b->inl, b->inl_len);
        if (rc)
            return rc;
        delta += (int64_t)b->inl_len;
    }
    if (b->ext.n && (r->flags & META_I_INLINE)) {
        /* the pending extents shadow every inline byte (conversion) */
        rc = core__inline_get(t, ino, &vd, &vl);
        if (rc)
            return rc;
        delta -= (int64_t)vl;
        rc = inline_set(t, ino, NULL, 0);
        if (rc)
            return rc;
        r->flags &= (uint16_t)~META_I_INLINE;
    }
    for (size_t i = 0; i < b->ext.n; i++) {
        const struct core__fext *x = &b->ext.v[i];
        struct core__fext_list old = {0};
        rc = core__overlaps(t, ino, x->foff, x->foff + x->vlen, &old, false);
        for (size_t j = 0; rc == 0 && j < old.n; j++) {
            rc = core__extent_free(c, t, &old.v[j].e);
            if (rc == 1)
                kept += old.v[j].e.len;
            if (rc >= 0)
                rc = meta_extent_del(t, ino, old.v[j].foff);
            delta -= old.v[j].e.len;
        }
        free(old.v);
        if (rc == 0)
            rc = core__extent_use(t, &x->e, x->bcrc, x->nb);
        if (rc == 0)
            rc = extent_put(t, ino, x);
        if (rc)
            return rc;
        delta += x->e.len;
    }
    /* acknowledged data: usage follows it even past a limit (admission
     * checked each write before it was accepted); the store keeps the
     * replaced extents another version holds */
    rc = usage_apply(c, t, r, delta, kept);
    if (rc)
        return rc;
    r->used = (uint64_t)((int64_t)r->used + delta);
    if (b->size > r->size)
        r->size = b->size;
    if (b->mtime.tv_sec > r->mtime_s ||
        (b->mtime.tv_sec == r->mtime_s && (uint32_t)b->mtime.tv_nsec > r->mtime_ns)) {
        r->mtime_s = r->ctime_s = b->mtime.tv_sec;
        r->mtime_ns = r->ctime_ns = (uint32_t)b->mtime.tv_nsec;
    }
    r->change = b->change > r->change + 1 ? b->change : r->change + 1;
    /* a content written in order has its MD5; any other the worker computes */
    bool known = b->md5_ok && b->size == r->size;
    rc = etag_store(c, t, ino, known ? b->md5 : "");
    if (rc == 0)
        rc = known ? core__dirty_clear(t, ino, META_DIRTY_ETAG)
                   : core__dirty_note(t, ino, r, META_DIRTY_ETAG);
    return rc;
}

/* ---- read ---- */

#define DIRECT_MIN (64u * 1024) /* smaller reads go through the page cache */

/* Read the parts of extents @p l that fall in [off, end) into @p buf (which
 * holds @p cap bytes from @p off), and zero the holes. Block-aligned ranges
 * into aligned memory are read with O_DIRECT, all in one io_uring batch, and
 * checked with their block CRCs; the rest go through core__extent_pread. */
/* Pieces of a direct read, each verified by rd_done as it arrives. */
struct rd_batch {
    struct core *c;
    struct store_rreq *rq;
    const struct core__fext **x;
};

static int rd_done(void *arg, size_t i)
{
    struct rd_batch *b = arg;
    const struct store_rreq *q = &b->rq[i];
    const struct core__fext *x = b->x[i];
    uint32_t last = q->from + q->len < x->e.len ? q->from + q->len : x->e.len;
    return core__bcrc_verify(b->c, &x->e, x->bcrc, q->from / META_BCRC_BLOCK,
                             (last - 1) / META_BCRC_BLOCK, q->buf);
}

#define DIRECT_PIECE (256u * 1024) /* checked while the rest of the batch is in flight */

static int read_extents(struct core *c, uint64_t ino, struct core__fext_list *l, uint64_t off,
                        uint64_t end, char *buf, size_t cap, uint64_t epoch)
{
    struct store_rreq *rq = NULL;
    const struct core__fext **rx = NULL;
    bool *direct = NULL, dstack[64];
    size_t nrq = 0, maxrq = 0;
    int rc = 0;
    direct = l->n <= 64 ? dstack : calloc(l->n, sizeof(*direct));
    if (!direct)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        struct core__fext *x = &l->v[i];
        uint64_t s = x->foff > off ? x->foff : off;
        uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
        uint32_t from = (uint32_t)(s - x->foff), n = (uint32_t)(e - s);
        char *dst = buf + (s - off);
        uint32_t rl = (n + STORE_ALIGN - 1) & ~(STORE_ALIGN - 1);
        direct[i] = e > s && x->nb && n >= DIRECT_MIN && (uintptr_t)dst % STORE_ALIGN == 0 &&
                    from % META_BCRC_BLOCK == 0 &&
                    ((from + n) % META_BCRC_BLOCK == 0 || from + n == x->e.len) &&
                    (uint64_t)(dst - buf) + rl <= cap && (from + n - 1) / META_BCRC_BLOCK < x->nb;
        if (direct[i])
            maxrq += (rl + DIRECT_PIECE - 1) / DIRECT_PIECE;
    }
    if (maxrq) {
        rq = calloc(maxrq, sizeof(*rq));
        rx = calloc(maxrq, sizeof(*rx));
        if (!rq || !rx) {
            rc = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < l->n; i++) {
            if (!direct[i])
                continue;
            struct core__fext *x = &l->v[i];
            uint64_t s = x->foff > off ? x->foff : off;
            uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
            uint32_t from = (uint32_t)(s - x->foff);
            uint32_t rl = ((uint32_t)(e - s) + STORE_ALIGN - 1) & ~(STORE_ALIGN - 1);
            for (uint32_t p = 0; p < rl; p += DIRECT_PIECE) {
                uint32_t pl = rl - p < DIRECT_PIECE ? rl - p : DIRECT_PIECE;
                rx[nrq] = x;
                rq[nrq++] = (struct store_rreq){&x->e, from + p, pl, buf + (s - off) + p};
            }
        }
        struct rd_batch b = {c, rq, rx};
        rc = store_read_direct(c->store, rq, nrq, rd_done, &b);
    }
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        struct core__fext *x = &l->v[i];
        uint64_t s = x->foff > off ? x->foff : off;
        uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
        if (e <= s || direct[i])
            continue;
        rc = core__extent_pread(c, &x->e, x->bcrc, x->nb, (uint32_t)(s - x->foff),
                                buf + (s - off), (size_t)(e - s), epoch);
    }
    if (rc) {
        srv_log(ERROR, STORE, "read ino=%llu off=%llu len=%llu: %s", (unsigned long long)ino,
                (unsigned long long)off, (unsigned long long)(end - off), srv_strerror(rc));
        memset(buf, 0, end - off); /* never hand out bytes that failed a check */
        goto out;
    }
    /* holes (and O_DIRECT padding that ran into them) read as zeros */
    uint64_t pos = off;
    for (size_t i = 0; i < l->n; i++) {
        struct core__fext *x = &l->v[i];
        uint64_t s = x->foff > off ? x->foff : off;
        uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
        if (s > pos)
            memset(buf + (pos - off), 0, s - pos);
        if (e > pos)
            pos = e;
    }
    if (end > pos)
        memset(buf + (pos - off), 0, end - pos);
out:
    free(rq);
    free(rx);
    if (direct != dstack)
        free(direct);
    return rc;
}

static int read_view_once(struct core *c, const struct core_principal *p, uint64_t ino,
                          uint64_t off, uint64_t len, struct core__pend_snap *ps,
                          struct meta_txn **t, struct meta_inode *r)
{
    /* pending snapshot before the read txn, retaken until it is still valid
     * once the txn is open (see core_pend.c) */
    struct core__pend *pp = core__pend_get(c, ino, false);
    uint64_t hi = len > UINT64_MAX - off ? UINT64_MAX : off + len;
    bool nowait = (p->flags & CORE_P_NOWAIT) != 0;
    int rc;
    for (int tries = 0;; tries++) {
        core__pend_snap_free(ps);
        core__pend_snap(pp, off, hi, !nowait, ps);
        if (pp && !ps->exists) {
            rc = -ENOMEM;
            break;
        }
        rc = meta_rtxn_begin(c->meta, t);
        if (rc || tries == 100 || core__pend_snap_valid(pp, ps))
            break;
        meta_rtxn_end(*t);
        *t = NULL;
        if (nowait) { /* a setattr holds the inode (or just committed one) */
            rc = -EWOULDBLOCK;
            break;
        }
    }
    core__pend_put(c, pp);
    if (rc)
        return rc;
    rc = core__ino_get_p(*t, p, ino, 0, r);
    if (rc)
        return rc;
    if (r->type == CORE_DIR)
        return -EISDIR;
    if (r->type != CORE_REG)
        return -EINVAL;
    if (p->uid != r->uid && (rc = core__perm(p, r, CORE_MAY_R)) != 0)
        return rc;
    return 0;
}

int core__read_view(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                    uint64_t len, struct core__pend_snap *ps, struct meta_txn **t,
                    struct meta_inode *r)
{
    for (int tries = 0;; tries++) {
        int rc = read_view_once(c, p, ino, off, len, ps, t, r);
        if (rc || !(r->flags & META_I_EVICTED)) {
            if (rc == 0 && !(p->flags & CORE_P_TIER))
                core__tier_note_read(c, ino);
            return rc;
        }
        /* evicted: is the range back already? (pending writes cannot exist: a write
         * recalls the whole file first) */
        uint64_t hi = len > r->size - (off < r->size ? off : r->size) ? r->size : off + len;
        bool have = true;
        if (off < hi)
            rc = core__tier_resident(*t, ino, off, hi, &have);
        if (rc || have) {
            if (rc == 0 && !(p->flags & CORE_P_TIER))
                core__tier_note_read(c, ino);
            return rc;
        }
        struct meta_inode copy = *r;
        meta_rtxn_end(*t);
        *t = NULL;
        core__pend_snap_free(ps);
        if (tries == 100)
            return SRV_ERECALL;
        rc = core__tier_wait(c, ino, &copy, off, hi, (p->flags & CORE_P_NOWAIT) != 0);
        if (rc)
            return rc;
    }
}

int core_read(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
              void *buf, size_t len, size_t *n, bool *eof)
{
    struct meta_txn *t = NULL;
    struct meta_inode r;
    struct core__fext_list l = {0};
    struct core__pend_snap ps;
    uint64_t token = store_read_begin(c->store);
    uint64_t epoch = core__cache_epoch(c);
    uint64_t end, size;
    int rc;

    *n = 0;
    *eof = false;
    memset(&ps, 0, sizeof(ps));
    rc = core__read_view(c, p, ino, off, len, &ps, &t, &r);
    if (rc)
        goto out;
    size = ps.data && ps.size > r.size ? ps.size : r.size;
    if (off >= size) {
        *eof = true;
        goto out;
    }
    if (len == 0)
        goto out;
    end = size - off < len ? size : off + len;
    bool inl = ps.inl || ((r.flags & META_I_INLINE) && !ps.has_ext);
    if (inl) {
        const void *vd = ps.inl;
        size_t vl = ps.inl_len;
        memset(buf, 0, end - off);
        if (!ps.inl) {
            rc = core__inline_get(t, ino, &vd, &vl);
            if (rc)
                goto out;
        }
        if (off < vl) {
            size_t m = (end < vl ? end : vl) - off;
            memcpy(buf, (const char *)vd + off, m);
        }
    } else {
        rc = eff_overlaps(c, t, ino, &r, &ps.ext, off, end, true, &l);
        if (rc)
            goto out;
    }
    meta_rtxn_end(t);
    t = NULL;
    if (!inl) {
        rc = read_extents(c, ino, &l, off, end, (char *)buf, len, epoch);
        if (rc)
            goto out;
    }
    *n = (size_t)(end - off);
    *eof = end >= size;
    atomic_fetch_add(&c->bytes_read, *n);
out:
    meta_rtxn_end(t);
    store_read_end(c->store, token);
    core__pend_snap_free(&ps);
    free(l.v);
    return rc;
}

/* ---- write ---- */

enum wmode { W_INLINE, W_CONVERT, W_EXTENTS };

struct wplan {
    struct core *c;
    uint64_t ino, off;
    const void *buf;
    size_t len;
    enum wmode mode;
    uint64_t lo, hi;               /* range the new extents cover */
    uint64_t epoch;                /* cache epoch before the extent map was read */
    uint64_t change, csize;        /* committed change counter and size at the plan */
    uint32_t tenant;
    uint64_t bucket;
    bool need_flush;               /* retry after committing the pending inline bytes */
    char *base;                    /* inline content the write patches (heap) */
    size_t blen;
    struct core__fext_list olds;   /* effective extents the write replaces */
    struct core__fext_list news;   /* extents written */
    struct core__resv resv;        /* bytes it adds, reserved against the limits */
    struct core__mvtok mv;         /* renames seen before the plan read the file's chain */
};

struct crc_job {
    const void *src;
    uint32_t n;
    struct core__fext *x;
};

static uint32_t crc_job_fn(void *arg)
{
    struct crc_job *j = arg;
    j->x->nb = core__bcrc_compute(j->src, j->n, j->x->bcrc);
    return core__bcrc_whole(j->x->bcrc, j->x->nb, j->n);
}

/* Add new extents covering [s, e) (split on the 1 MiB grid) with content
 * from @p base (bytes of [bs, bs + blen)) overlaid by the write. */
static int add_new(struct core *c, struct wplan *a, uint64_t s, uint64_t e, const void *base,
                   uint64_t bs, size_t blen, char *tmp)
{
    while (s < e) {
        uint64_t g = (s / STORE_EXTENT_MAX + 1) * STORE_EXTENT_MAX;
        uint64_t pe = e < g ? e : g;
        uint32_t n = (uint32_t)(pe - s);
        struct core__fext x = {.foff = s, .vlen = n};
        uint64_t ws = s > a->off ? s : a->off, we = pe < a->off + a->len ? pe : a->off + a->len;
        const char *src = tmp;
        if (!base && ws == s && we == pe) {
            src = (const char *)a->buf + (s - a->off); /* the caller's bytes as they are */
        } else {
            memset(tmp, 0, n);
            if (base) {
                uint64_t os = s > bs ? s : bs, oe = pe < bs + blen ? pe : bs + blen;
                if (oe > os)
                    memcpy(tmp + (os - s), (const char *)base + (os - bs), oe - os);
            }
            if (we > ws)
                memcpy(tmp + (ws - s), (const char *)a->buf + (ws - a->off), we - ws);
        }
        int rc = store_alloc_near(c->store, a->news.n ? &a->news.v[a->news.n - 1].e : NULL, n,
                                  &x.e);
        if (rc)
            return rc;
        core__cache_invalidate(c, &x.e); /* space reused: no stale cached bytes */
        /* one pass over the data, while it is being written: block CRCs, and
         * the extent's CRC combined from them */
        struct crc_job j = {src, n, &x};
        rc = store_write_cb(c->store, &x.e, src, n, crc_job_fn, &j);
        if (rc == 0) {
            core__zc_written(c, &x.e);
            rc = core__fext_push(&a->news, &x);
        }
        if (rc) {
            store_unreserve(c->store, &x.e);
            return rc;
        }
        s = pe;
    }
    return 0;
}

/* Written extents never seen by anyone: give their space back. */
static void news_unreserve(struct core *c, struct wplan *a)
{
    for (size_t i = 0; i < a->news.n; i++)
        store_unreserve(c->store, &a->news.v[i].e);
    a->news.n = 0;
}

/* Plan the write from snapshot @p ps and inode @p r (read txn @p t). */
static int write_plan(struct core *c, struct wplan *a, struct meta_txn *t, const struct meta_inode *r,
                      const struct core__pend_snap *ps)
{
    uint64_t end = a->off + a->len;
    bool eff_inline = (r->flags & META_I_INLINE) && !ps->has_ext;
    if (r->flags & META_I_EVICTED)
        return SRV_ERECALL; /* evicted since the recall before the write: retry */
    a->olds.n = 0;
    a->change = r->change;
    a->csize = r->size;
    a->tenant = r->tenant;
    a->bucket = r->bucket;
    free(a->base);
    a->base = NULL;
    a->blen = 0;
    if (eff_inline) {
        if (ps->inl && end > c->cfg.inline_max) {
            a->mode = W_CONVERT;
            a->need_flush = true; /* pending inline bytes are committed before a conversion */
            return -EAGAIN;
        }
        a->mode = end <= c->cfg.inline_max ? W_INLINE : W_CONVERT;
        const void *vd = ps->inl;
        size_t vl = ps->inl_len;
        if (!ps->inl) {
            int rc = core__inline_get(t, a->ino, &vd, &vl);
            if (rc)
                return rc;
        }
        a->blen = vl;
        a->base = malloc(vl ? vl : 1);
        if (!a->base)
            return -ENOMEM;
        if (vl)
            memcpy(a->base, vd, vl);
        return 0;
    }
    a->mode = W_EXTENTS;
    return eff_overlaps(c, t, a->ino, r, &ps->ext, a->off, end, true, &a->olds);
}

/* Usage a planned write adds when committed (0 when it adds none): the
 * bytes of the extents write_data makes (or of the inline content), less
 * those of what they replace. Mirrors write_data's cuts. */
static uint64_t plan_growth(const struct wplan *a)
{
    uint64_t end = a->off + a->len;
    uint64_t add = 0, sub = 0;
    if (a->mode == W_INLINE) {
        add = end > a->blen ? end : a->blen;
        sub = a->blen;
    } else if (a->mode == W_CONVERT) {
        uint64_t L = a->blen;
        if (L && L < a->off)
            add = L + (end - a->off);
        else
            add = (end > L ? end : L) - (L ? 0 : a->off);
        sub = L;
    } else {
        uint64_t pos = a->off;
        for (size_t i = 0; i < a->olds.n; i++) {
            const struct core__fext *o = &a->olds.v[i];
            uint64_t oe = o->foff + o->vlen;
            if (o->foff > pos)
                add += o->foff - pos;
            add += o->vlen;
            sub += o->e.len;
            pos = oe > pos ? oe : pos;
        }
        if (end > pos)
            add += end - pos;
    }
    return add > sub ? add - sub : 0;
}

/* Write the new extents of a planned write (no lock held). */
static int write_data(struct core *c, struct wplan *a, char *tmp)
{
    uint64_t end = a->off + a->len;
    int rc = 0;
    a->news.n = 0;
    if (a->mode == W_INLINE)
        return 0;
    if (a->mode == W_CONVERT) {
        uint64_t L = a->blen;
        a->lo = L ? 0 : a->off;
        a->hi = end;
        if (L && L < a->off) {
            rc = add_new(c, a, 0, L, a->base, 0, L, tmp);
            if (rc == 0)
                rc = add_new(c, a, a->off, end, NULL, 0, 0, tmp);
        } else {
            rc = add_new(c, a, a->lo, end > L ? end : L, a->base, 0, L, tmp);
        }
        return rc;
    }
    a->lo = a->off;
    a->hi = end;
    uint64_t pos = a->off;
    char *old = NULL;
    for (size_t i = 0; i <= a->olds.n; i++) {
        uint64_t gs = i < a->olds.n ? a->olds.v[i].foff : end;
        if (gs > pos) {
            rc = add_new(c, a, pos, gs, NULL, 0, 0, tmp);
            if (rc)
                break;
        }
        if (i == a->olds.n)
            break;
        struct core__fext *o = &a->olds.v[i];
        uint64_t oe = o->foff + o->vlen;
        if (o->foff < a->lo)
            a->lo = o->foff;
        if (oe > a->hi)
            a->hi = oe;
        bool covered = o->foff >= a->off && oe <= end;
        if (!covered) {
            if (!old && posix_memalign((void **)&old, STORE_ALIGN, STORE_EXTENT_MAX) != 0) {
                old = NULL;
                rc = -ENOMEM;
                break;
            }
            rc = core__extent_pread(c, &o->e, o->bcrc, o->nb, 0, old, o->vlen, a->epoch);
            if (rc) {
                srv_log(ERROR, STORE, "write ino=%llu: reading extent at %llu: %s",
                        (unsigned long long)a->ino, (unsigned long long)o->foff,
                        srv_strerror(rc));
                break;
            }
        }
        rc = add_new(c, a, o->foff, oe, covered ? NULL : old, o->foff, o->vlen, tmp);
        if (rc)
            break;
        pos = oe > pos ? oe : pos;
    }
    free(old);
    return rc;
}

static bool fext_same(const struct core__fext_list *x, const struct core__fext_list *y)
{
    if (x->n != y->n)
        return false;
    for (size_t i = 0; i < x->n; i++) {
        const struct core__fext *a = &x->v[i], *b = &y->v[i];
        if (a->foff != b->foff || a->vlen != b->vlen || a->e.dev != b->e.dev ||
            a->e.off != b->e.off || a->e.len != b->e.len)
            return false;
    }
    return true;
}

/* Under p->mu, versions moved since the plan: is it still valid? */
static int write_revalidate(struct core *c, struct core__pend *p, struct wplan *a)
{
    uint64_t end = a->off + a->len;
    struct core__fext_list pend = {0}, cur = {0};
    struct meta_inode r;
    struct meta_txn *t;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = meta_inode_get(t, a->ino, &r);
    if (rc == -ENOENT)
        rc = SRV_ESTALE;
    if (rc == 0 && core__ver_guard(c, t, &r))
        rc = CORE__EVGUARD; /* sealed (or locked) since the plan */
    if (rc)
        goto out;
    bool eff_inline = (r.flags & META_I_INLINE) && !p->ext.n;
    if (a->mode != W_EXTENTS) {
        /* based on the committed inline bytes or the pending ones */
        if (!eff_inline || r.change != a->change || (a->mode == W_CONVERT && p->inl))
            rc = -EAGAIN;
        goto out;
    }
    if (eff_inline) {
        rc = -EAGAIN;
        goto out;
    }
    for (size_t i = 0; i < p->ext.n && rc == 0; i++) {
        const struct core__fext *x = &p->ext.v[i];
        if (x->foff < end && x->foff + x->vlen > a->off)
            rc = core__fext_push(&pend, x);
    }
    if (rc == 0)
        rc = eff_overlaps(c, t, a->ino, &r, &pend, a->off, end, false, &cur);
    if (rc == 0 && !fext_same(&cur, &a->olds))
        rc = -EAGAIN;
out:
    meta_rtxn_end(t);
    free(pend.v);
    free(cur.v);
    return rc;
}

/* Under p->mu: running MD5 of a file written sequentially from offset 0. */
static void md5_feed(struct core__pend *p, struct wplan *a, uint64_t cursize)
{
    if (p->md5_bad)
        return;
    if (!p->md5ctx) {
        if (a->off != 0 || cursize != 0)
            goto bad;
        p->md5ctx = EVP_MD_CTX_new();
        if (!p->md5ctx || EVP_DigestInit_ex(p->md5ctx, EVP_md5(), NULL) != 1)
            goto bad;
        p->md5_end = 0;
    }
    if (a->off != p->md5_end || p->md5_end + a->len > CORE_MD5_INLINE_MAX)
        goto bad;
    if (EVP_DigestUpdate(p->md5ctx, a->buf, a->len) != 1)
        goto bad;
    p->md5_end += a->len;
    return;
bad:
    p->md5_bad = true;
    if (p->md5ctx)
        EVP_MD_CTX_free(p->md5ctx);
    p->md5ctx = NULL;
}

/* Under p->mu: make the planned write pending. */
static int write_insert(struct core *c, struct core__pend *p, struct wplan *a)
{
    uint64_t end = a->off + a->len;
    uint64_t cursize = a->csize > p->size ? a->csize : p->size;
    struct timespec now;
    p->tenant = a->tenant;
    p->bucket = a->bucket;
    if (a->mode == W_INLINE) {
        size_t base = p->inl ? p->inl_len : a->blen;
        size_t nl = end > base ? (size_t)end : base;
        p->udelta += (int64_t)nl - (int64_t)base;
        char *nb = calloc(1, nl ? nl : 1);
        if (!nb)
            return -ENOMEM;
        if (p->inl)
            memcpy(nb, p->inl, p->inl_len);
        else if (a->blen)
            memcpy(nb, a->base, a->blen);
        memcpy(nb + a->off, a->buf, a->len);
        free(p->inl);
        p->inl = nb;
        p->inl_len = nl;
        p->inl_ver++;
    } else {
        struct core__fext_list nv = {0};
        int rc = 0;
        size_t i = 0;
        for (; i < p->ext.n && p->ext.v[i].foff < a->lo && rc == 0; i++)
            rc = core__fext_push(&nv, &p->ext.v[i]);
        for (size_t j = 0; j < a->news.n && rc == 0; j++)
            rc = core__fext_push(&nv, &a->news.v[j]);
        size_t k = i;
        while (k < p->ext.n && p->ext.v[k].foff < a->hi)
            k++;
        for (size_t j = k; j < p->ext.n && rc == 0; j++)
            rc = core__fext_push(&nv, &p->ext.v[j]);
        if (rc) {
            free(nv.v);
            return rc;
        }
        /* usage: the new extents replace every old one (pending ones now,
         * committed ones when this commits), and inline bytes they shadow */
        for (size_t j = 0; j < a->news.n; j++)
            p->udelta += a->news.v[j].e.len;
        for (size_t j = 0; j < a->olds.n; j++)
            p->udelta -= a->olds.v[j].e.len;
        if (a->mode == W_CONVERT)
            p->udelta -= (int64_t)a->blen;
        for (size_t j = i; j < k; j++) {
            struct core__fext *x = &p->ext.v[j];
            p->bytes -= x->e.len;
            if (!(x->flags & CORE_FX_FLUSHING)) {
                /* a flush carrying it commits it, shadowed by the new one */
                p->unfl -= x->e.len;
                atomic_fetch_sub(&c->data->pend_total, x->e.len);
                core__pend_release(c, x);
            }
        }
        for (size_t j = 0; j < a->news.n; j++) {
            p->bytes += a->news.v[j].e.len;
            p->unfl += a->news.v[j].e.len;
            atomic_fetch_add(&c->data->pend_total, a->news.v[j].e.len);
        }
        free(p->ext.v);
        p->ext = nv;
        a->news.n = 0; /* owned by the record now */
    }
    /* the record holds what committing it adds; the write's reservation
     * (at least its own share of that) goes over to it (a write that adds
     * nothing reserved nothing: the record keeps its records) */
    uint64_t hold = p->udelta > 0 ? (uint64_t)p->udelta : 0;
    if (a->resv.n)
        core__resv_move(c, &p->resv, &a->resv, hold);
    else
        core__resv_set(c, &p->resv, hold);
    p->ver++;
    md5_feed(p, a, cursize);
    if (end > p->size)
        p->size = end;
    core__now(&now);
    p->mtime = now;
    p->change = (p->change > a->change ? p->change : a->change) + 1;
    return 0;
}

int core__write(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                const void *buf, size_t len, enum core_stable stable, enum core_stable *committed,
                struct core_attr *pre, struct core_attr *post)
{
    struct wplan a = {.c = c, .ino = ino, .off = off, .buf = buf, .len = len};
    struct core__pend *pd = NULL;
    struct meta_inode r;
    char *tmp = NULL;
    bool flush = stable != CORE_UNSTABLE, flush_all = false, bg = false;
    int rc = 0;
    if (committed)
        *committed = stable == CORE_UNSTABLE ? CORE_UNSTABLE : CORE_FILE_SYNC;
    if (p->flags & CORE_P_READONLY)
        return -EROFS;
    if ((rc = core__cm_ro_ino(c, p, ino)) != 0)
        return rc;
    if (off > CORE_FILE_MAX || len > CORE_FILE_MAX - off)
        return -EFBIG;
    pd = core__pend_get(c, ino, true);
    if (!pd)
        return -ENOMEM;
    /* an evicted file is recalled whole first (after the pending record exists, so no
     * eviction starts meanwhile: it refuses files with one) */
    rc = core__tier_local(c, p, ino);
    if (rc) {
        core__pend_put(c, pd);
        return rc;
    }
    for (int attempt = 0;; attempt++) {
        struct meta_txn *t = NULL;
        struct core__pend_snap ps;
        if (attempt == WRITE_RETRIES) {
            srv_log(WARN, META, "write ino=%llu: gave up after %d conflicting retries",
                    (unsigned long long)ino, WRITE_RETRIES);
            rc = -EIO;
            break;
        }
        /* after losing a race twice, serialize with the other losers of this inode */
        bool locked = attempt >= 2;
        if (locked)
            pthread_mutex_lock(&c->data->wlock[ino % CORE_WLOCKS]);
        core__mv_begin(c, &a.mv);
        uint64_t token = store_read_begin(c->store);
        a.epoch = core__cache_epoch(c);
        core__pend_snap(pd, off, off + len, true, &ps);
        rc = ps.exists ? meta_rtxn_begin(c->meta, &t) : -ENOMEM;
        if (rc == 0)
            rc = core__ino_get_p(t, p, ino, 0, &r);
        if (rc == 0 && r.type != CORE_REG)
            rc = r.type == CORE_DIR ? -EISDIR : -EINVAL;
        if (rc == 0 && p->uid != r.uid)
            rc = core__perm(p, &r, CORE_MAY_W);
        if (rc == 0 && pre) {
            core__attr_fill(&r, ino, pre);
            core__attr_pend(c, pre);
        }
        if (rc == 0 && len == 0) {
            /* a zero-length write only reports attributes */
            if (post) {
                core__attr_fill(&r, ino, post);
                core__attr_pend(c, post);
            }
            flush = false;
            meta_rtxn_end(t);
            store_read_end(c->store, token);
            core__pend_snap_free(&ps);
            if (locked)
                pthread_mutex_unlock(&c->data->wlock[ino % CORE_WLOCKS]);
            break;
        }
        if (rc == 0 && core__ver_guard(c, t, &r))
            rc = CORE__EVGUARD; /* a version step first (the namespace's) */
        if (rc == 0)
            rc = write_plan(c, &a, t, &r, &ps);
        meta_rtxn_end(t);
        /* reserve what it adds before anything is written (-EDQUOT past a
         * limit, counting every write admitted and not committed yet) */
        uint64_t growth = rc == 0 ? plan_growth(&a) : 0;
        if (growth)
            rc = core__resv_admit(c, r.tenant, r.parent, growth, &a.resv);
        if (rc == 0 && a.mode != W_INLINE && !tmp &&
            posix_memalign((void **)&tmp, STORE_ALIGN, STORE_EXTENT_MAX) != 0) {
            tmp = NULL;
            rc = -ENOMEM;
        }
        if (rc == 0)
            rc = write_data(c, &a, tmp);
        while (rc == 0) {
            pthread_mutex_lock(&pd->mu);
            while (pd->excl)
                pthread_cond_wait(&pd->cv, &pd->mu);
            if (pd->dead)
                rc = SRV_ESTALE;
            else if (pd->ver != ps.ver || pd->cver != ps.cver)
                rc = write_revalidate(c, pd, &a);
            if (rc == 0 && !core__mv_same(c, &a.mv, a.bucket)) {
                /* a rename may have moved the file (or a directory above it)
                 * since the plan read its chain: reserve on the chain it has
                 * once that rename committed (-EDQUOT past a limit there) */
                pthread_mutex_unlock(&pd->mu);
                rc = core__resv_follow(c, ino, a.bucket, growth, &a.resv, &a.mv);
                continue;
            }
            if (rc == 0)
                rc = write_insert(c, pd, &a);
            if (rc == 0 && post) {
                core__attr_fill(&r, ino, post);
                if (pd->size > post->size)
                    post->size = pd->size;
                post->mtime = post->ctime = pd->mtime;
                post->change = pd->change > post->change ? pd->change : post->change;
            }
            if (rc == 0 && pd->unfl > CORE_PEND_INO_MAX) {
                /* past the bound: the flusher thread commits it while writes go
                 * on; far past it (the flusher cannot keep up), this one waits */
                if (pd->unfl > 4 * CORE_PEND_INO_MAX)
                    flush = true;
                else if (!pd->flushing)
                    bg = true;
            }
            pthread_mutex_unlock(&pd->mu);
            break;
        }
        store_read_end(c->store, token);
        core__pend_snap_free(&ps);
        if (locked)
            pthread_mutex_unlock(&c->data->wlock[ino % CORE_WLOCKS]);
        if (rc)
            news_unreserve(c, &a);
        core__resv_set(c, &a.resv, 0); /* not inserted (or moved to the record) */
        if (rc == -EAGAIN && a.need_flush) {
            /* pending inline bytes must be committed before the file converts */
            a.need_flush = false;
            int frc = core__pend_flush(c, pd);
            if (frc) {
                rc = frc;
                break;
            }
        }
        if (rc != -EAGAIN)
            break;
    }
    if (rc == 0) {
        atomic_fetch_add(&c->bytes_written, len);
        if (atomic_load(&c->data->pend_total) > CORE_PEND_TOTAL_MAX)
            flush_all = true;
    }
    if (rc == 0 && flush) /* a stable write needs no COMMIT: it is its writer's own */
        rc = stable != CORE_UNSTABLE ? core__pend_commit(c, pd) : core__pend_flush(c, pd);
    else if (rc == 0 && bg)
        core__pend_flush_async(c, ino);
    if (rc == 0 && flush_all && (rc = core__pend_flush_all(c)) != 0 && stable == CORE_UNSTABLE)
        rc = 0; /* the write itself is pending; its own commit reports the error */
    core__pend_put(c, pd);
    free(tmp);
    free(a.base);
    free(a.olds.v);
    free(a.news.v);
    return rc;
}

int core_commit(struct core *c, const struct core_principal *p, uint64_t ino)
{
    struct meta_txn *t;
    struct meta_inode r;
    int rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    rc = core__ino_get_p(t, p, ino, 0, &r);
    meta_rtxn_end(t);
    if (rc)
        return rc;
    struct core__pend *pd = core__pend_get(c, ino, false);
    if (!pd)
        return 0; /* nothing pending: every acknowledged write is durable */
    rc = core__pend_commit(c, pd);
    core__pend_put(c, pd);
    return rc;
}
