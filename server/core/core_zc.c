/* SPDX-License-Identifier: Apache-2.0
 * core_zc: the fast read paths of S3 GETs.
 *
 * core_key_peek resolves bucket + key + metadata and, for an object whose
 * whole content is inline in LMDB, the bytes, all in one read transaction.
 * It never touches the extent store, never waits for the writer thread and
 * never computes anything expensive (it answers -EAGAIN instead), so an
 * event-loop thread may call it: the only blocking it can do is a page fault
 * on the LMDB map, which is accepted for this path (docs/architecture.md).
 *
 * core_read_pieces describes a byte range of a file as pieces to send
 * without a user-space copy: (fd, device offset, length) of extents whose
 * bytes are verified and in the page cache, memory for inline data, and
 * holes. The CRC rule ("every extent is checked on read, never silent wrong
 * bytes") is kept this way:
 *  - an extent is verified by reading it whole through the store's buffered
 *    fd (store_extent_fd) and checking its CRC32C; that read fills the page
 *    cache, and the range is then handed out from the fd like a remembered
 *    one (the bytes are read once, checked in a small buffer, never copied
 *    out whole: ps->copied counts them);
 *  - a verified extent is remembered in a table keyed by (device, offset,
 *    length, CRC) and the core's write verifier. Space is never rewritten
 *    in place with the same CRC while mapped (writes are copy-on-write and a
 *    freed extent is reused only after every reader that could see it has
 *    finished, store limbo), so an entry can only be matched by the extent
 *    it was made for, or by a new extent at the same place with identical
 *    length and CRC (the CRC's own blind spot);
 *  - a later read sends a remembered extent from the fd only if all its
 *    pages are resident (cachestat(2), mincore(2) where cachestat is
 *    missing) and the entry is younger than ZC_TTL_S seconds; otherwise it
 *    verifies again first.
 * The guarantee is therefore: bytes sent from the fd are bytes this process
 * verified when they entered the page cache, unless the kernel evicted and
 * re-read them between the verification or residency check and the send, in
 * which case the re-read bytes are sent unchecked; such pages can be served
 * unchecked for at most ZC_TTL_S seconds before the entry expires and they
 * are verified again.
 * The pieces hold a store read token until core_pieces_release, so extents
 * freed meanwhile (an NFS overwrite, a delete) are not reused before the
 * bytes left.
 * Thread: any; core_key_peek and core_pieces_release may run on a loop thread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"

#define ZC_SHARDS 64
#define ZC_SLOTS 128 /* per shard: 8192 remembered extents (8 GiB of 1 MiB extents) */
#define ZC_WAYS 4
#define ZC_TTL_S 10
#define ZC_ETAG_MD5_MAX (256ull << 20) /* as core_s3.c: ETags computed up to this size */
#define ZC_EMPTY_MD5 "d41d8cd98f00b204e9800998ecf8427e"
#define ZC_PAGE 4096u
#define ZC_VCHUNK ((size_t)64 * 1024) /* bytes read per step when verifying */

/* core_s3.c */
int core__key_check(const char *key, size_t len, bool *isdir);

/* ---- the verified-extent table ---- */

struct zc_ent {
    uint64_t verf; /* core write verifier: entries of another core never match */
    uint64_t off;
    uint32_t dev, len, crc;
    uint32_t when; /* coarse monotonic seconds at verification; 0 = empty */
};

struct zc_shard {
    pthread_mutex_t mu;
    struct zc_ent e[ZC_SLOTS];
    uint32_t next;
};

static struct zc_shard zc_tab[ZC_SHARDS];
static pthread_once_t zc_once = PTHREAD_ONCE_INIT;

static void zc_init(void)
{
    for (int i = 0; i < ZC_SHARDS; i++)
        pthread_mutex_init(&zc_tab[i].mu, NULL);
}

static uint32_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)ts.tv_sec + 1; /* never 0 */
}

static uint64_t zc_hash(const struct store_extent *e)
{
    uint64_t h = (e->off / STORE_ALIGN) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)e->dev << 40);
    return h ^ (h >> 31);
}

/* The set of ZC_WAYS slots an extent may live in. */
static struct zc_ent *zc_set(struct zc_shard **sp, const struct store_extent *e)
{
    uint64_t h = zc_hash(e);
    struct zc_shard *s = &zc_tab[h % ZC_SHARDS];
    *sp = s;
    return &s->e[(h / ZC_SHARDS) % (ZC_SLOTS / ZC_WAYS) * ZC_WAYS];
}

static bool zc_same(const struct zc_ent *z, uint64_t verf, const struct store_extent *e)
{
    return z->when && z->verf == verf && z->dev == e->dev && z->off == e->off && z->len == e->len &&
           z->crc == e->crc;
}

static bool zc_known(struct core *c, const struct store_extent *e)
{
    struct zc_shard *s;
    struct zc_ent *set = zc_set(&s, e);
    uint32_t now = now_s();
    bool ok = false;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ZC_WAYS; i++)
        if (zc_same(&set[i], c->verifier, e)) {
            if (now - set[i].when <= ZC_TTL_S)
                ok = true;
            else
                set[i].when = 0; /* expired: verify again */
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void zc_remember(struct core *c, const struct store_extent *e)
{
    struct zc_shard *s;
    struct zc_ent *set = zc_set(&s, e);
    pthread_mutex_lock(&s->mu);
    struct zc_ent *slot = NULL;
    for (int i = 0; i < ZC_WAYS && !slot; i++)
        if (!set[i].when ||
            (set[i].verf == c->verifier && set[i].dev == e->dev && set[i].off == e->off))
            slot = &set[i];
    if (!slot)
        slot = &set[s->next++ % ZC_WAYS];
    *slot = (struct zc_ent){c->verifier, e->off, e->dev, e->len, e->crc, now_s()};
    pthread_mutex_unlock(&s->mu);
}

/* ---- page-cache residency ---- */

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* same number on every architecture (Linux 6.5) */
#endif
struct zc_cachestat_range {
    uint64_t off, len;
};
struct zc_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
static atomic_int zc_no_cachestat;

/* Are all pages of [off, off + len) of @p fd in the page cache? */
static bool resident(int fd, uint64_t off, uint64_t len)
{
    uint64_t a = off & ~(uint64_t)(ZC_PAGE - 1);
    uint64_t end = (off + len + ZC_PAGE - 1) & ~(uint64_t)(ZC_PAGE - 1);
    uint64_t pages = (end - a) / ZC_PAGE;
    if (!atomic_load_explicit(&zc_no_cachestat, memory_order_relaxed)) {
        struct zc_cachestat_range r = {a, end - a};
        struct zc_cachestat st;
        memset(&st, 0, sizeof(st));
        if (syscall(__NR_cachestat, fd, &r, &st, 0) == 0)
            return st.nr_cache >= pages;
        if (errno != ENOSYS && errno != EPERM)
            return false;
        atomic_store(&zc_no_cachestat, 1);
    }
    void *m = mmap(NULL, end - a, PROT_READ, MAP_SHARED, fd, (off_t)a);
    if (m == MAP_FAILED)
        return false;
    unsigned char vec[256];
    bool ok = pages <= sizeof(vec) && mincore(m, end - a, vec) == 0;
    for (uint64_t i = 0; ok && i < pages; i++)
        ok = vec[i] & 1;
    munmap(m, end - a);
    return ok;
}

/* ---- pieces ---- */

static int piece_push(struct core_pieces *ps, const struct core_piece *p)
{
    if (p->len == 0)
        return 0;
    if (ps->n) {
        struct core_piece *l = &ps->v[ps->n - 1];
        /* adjacent ranges of one fd (a file written in order is contiguous on disk) */
        if (p->fd >= 0 && l->fd == p->fd && l->off + l->len == p->off) {
            l->len += p->len;
            ps->len += p->len;
            return 0;
        }
        if (p->fd < 0 && l->fd < 0 && !p->mem && !l->mem) {
            l->len += p->len;
            ps->len += p->len;
            return 0;
        }
    }
    if (ps->n == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 8;
        struct core_piece *nv = realloc(ps->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        ps->v = nv;
        ps->cap = nc;
    }
    ps->v[ps->n++] = *p;
    ps->len += p->len;
    return 0;
}

/* Keep @p buf until release. */
static int keep_buf(struct core_pieces *ps, void *buf)
{
    if (ps->nbufs == ps->capbufs) {
        size_t nc = ps->capbufs ? ps->capbufs * 2 : 4;
        void **nv = realloc(ps->bufs, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        ps->bufs = nv;
        ps->capbufs = nc;
    }
    ps->bufs[ps->nbufs++] = buf;
    return 0;
}

/* Read extent @p e whole through the buffered fd and check its CRC32C. The
 * read brings it into the page cache, in ZC_VCHUNK pieces through one small
 * buffer that stays in the CPU cache: the bytes are checked, not kept; the
 * caller sends them from the fd. POSIX_FADV_WILLNEED first reads exactly the
 * extent (large disk requests) and, unlike the kernel's own readahead, sets
 * off no readahead past its end: pages of the space after it (free, or
 * another extent) are not cached by this read. Cached pages of space that an
 * O_DIRECT write later fills are not always dropped by the kernel (large
 * folios straddling the written range), and a read of that new extent would
 * then see the old bytes and fail its CRC. (The kernel's readahead would give
 * large folios, which make later sendfiles ~1.6x cheaper, but reads past the
 * extent.) @return 0, -EIO, SRV_ECORRUPT, -ENOMEM. */
static int verify_extent(struct core *c, int fd, const struct store_extent *e)
{
    char *buf = malloc(ZC_VCHUNK);
    if (!buf)
        return -ENOMEM;
    if (e->len > ZC_VCHUNK)
        (void)posix_fadvise(fd, (off_t)e->off, (off_t)e->len, POSIX_FADV_WILLNEED);
    uint32_t crc = 0;
    int rc = 0;
    for (size_t got = 0; got < e->len;) {
        size_t want = e->len - got < ZC_VCHUNK ? e->len - got : ZC_VCHUNK;
        ssize_t r = pread(fd, buf, want, (off_t)(e->off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            srv_log(ERROR, STORE, "read dev=%u off=%" PRIu64 " len=%u: %s", e->dev, e->off, e->len,
                    r < 0 ? strerror(errno) : "EOF");
            rc = -EIO;
            goto out;
        }
        crc = store_crc32c(crc, buf, (size_t)r);
        got += (size_t)r;
    }
    if (crc != e->crc) {
        atomic_fetch_add(&c->crc_errors, 1);
        srv_log(ERROR, STORE, "CRC mismatch dev=%u off=%" PRIu64 " len=%u: want %08x got %08x",
                e->dev, e->off, e->len, e->crc, crc);
        rc = SRV_ECORRUPT;
    }
out:
    free(buf);
    return rc;
}

/* Pending extents (sorted) and the committed ones they do not shadow, in
 * file order (the overlay rule of core_pend.c). */
static int merge(const struct core__fext_list *pend, const struct core__fext_list *com,
                 struct core__fext_list *out)
{
    size_t i = 0, j = 0;
    out->n = 0;
    while (i < pend->n || j < com->n) {
        if (j < com->n) {
            bool shadowed = false;
            for (size_t k = 0; k < pend->n && !shadowed; k++)
                shadowed = pend->v[k].foff < com->v[j].foff + com->v[j].vlen &&
                           pend->v[k].foff + pend->v[k].vlen > com->v[j].foff;
            if (shadowed) {
                j++;
                continue;
            }
        }
        const struct core__fext *x;
        if (j >= com->n || (i < pend->n && pend->v[i].foff < com->v[j].foff))
            x = &pend->v[i++];
        else
            x = &com->v[j++];
        int rc = core__fext_push(out, x);
        if (rc)
            return rc;
    }
    return 0;
}

/* The bytes [s, e) of extent @p x as a piece of the store's fd: at once when
 * the extent was verified and is resident, else after verifying it now (which
 * leaves it in the page cache). */
static int extent_piece(struct core *c, struct core_pieces *ps, const struct core__fext *x,
                        uint64_t s, uint64_t e)
{
    uint64_t from = s - x->foff, n = e - s;
    int fd = store_extent_fd(c->store, &x->e);
    if (fd < 0)
        return -EIO;
    if (!zc_known(c, &x->e) || !resident(fd, x->e.off + from, n)) {
        int rc = verify_extent(c, fd, &x->e);
        if (rc)
            return rc;
        zc_remember(c, &x->e);
        ps->copied += n;
    }
    return piece_push(ps, &(struct core_piece){fd, x->e.off + from, n, NULL});
}

int core_read_pieces(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                     uint64_t len, struct core_pieces *out)
{
    MDB_txn *t = NULL;
    struct meta_inode r;
    struct core__fext_list com = {0}, l = {0};
    struct core__pend_snap ps;
    int rc;

    pthread_once(&zc_once, zc_init);
    memset(out, 0, sizeof(*out));
    out->c = c;
    out->token = store_read_begin(c->store);
    out->has_token = true;
    memset(&ps, 0, sizeof(ps));
    /* the same order as core_read: token, then the read view */
    rc = core__read_view(c, p, ino, off, len, &ps, &t, &r);
    if (rc)
        goto out;
    uint64_t size = ps.data && ps.size > r.size ? ps.size : r.size;
    if (off >= size || len == 0) {
        out->eof = off >= size;
        goto out;
    }
    uint64_t end = size - off < len ? size : off + len;
    bool inl = ps.inl || ((r.flags & META_I_INLINE) && !ps.has_ext);
    if (inl) {
        MDB_val v = {.mv_size = ps.inl_len, .mv_data = ps.inl};
        if (!ps.inl) {
            uint8_t k[8];
            meta_be64_put(k, ino);
            rc = meta_get(t, core__dbi(c, META_DBI_INLINE), k, 8, &v);
            if (rc == -ENOENT) {
                v.mv_size = 0;
                rc = 0;
            }
            if (rc)
                goto out;
        }
        uint64_t have = off < v.mv_size ? (end < v.mv_size ? end : v.mv_size) - off : 0;
        if (have) {
            char *b = malloc(have);
            if (!b || (rc = keep_buf(out, b)) != 0) {
                free(b);
                rc = -ENOMEM;
                goto out;
            }
            memcpy(b, (const char *)v.mv_data + off, have);
            rc = piece_push(out, &(struct core_piece){-1, 0, have, b});
        }
        if (rc == 0)
            rc = piece_push(out, &(struct core_piece){-1, 0, end - off - have, NULL});
        goto done;
    }
    if (!(r.flags & META_I_INLINE))
        rc = core__overlaps(c, t, ino, off, end, &com, false);
    if (rc == 0)
        rc = merge(&ps.ext, &com, &l);
    if (rc)
        goto out;
    meta_rtxn_end(t);
    t = NULL;
    uint64_t pos = off;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const struct core__fext *x = &l.v[i];
        uint64_t s = x->foff > off ? x->foff : off;
        uint64_t e = x->foff + x->vlen < end ? x->foff + x->vlen : end;
        if (e <= s)
            continue;
        if (s > pos)
            rc = piece_push(out, &(struct core_piece){-1, 0, s - pos, NULL});
        if (rc == 0)
            rc = extent_piece(c, out, x, s, e);
        pos = e;
    }
    if (rc == 0 && end > pos)
        rc = piece_push(out, &(struct core_piece){-1, 0, end - pos, NULL});
done:
    if (rc)
        goto out;
    out->eof = end >= size;
    atomic_fetch_add(&c->bytes_read, out->len);
out:
    meta_rtxn_end(t);
    core__pend_snap_free(&ps);
    free(com.v);
    free(l.v);
    if (rc) {
        if (rc == -EIO || rc == SRV_ECORRUPT)
            srv_log(ERROR, STORE, "read ino=%" PRIu64 " off=%" PRIu64 " len=%" PRIu64 ": %s", ino,
                    off, len, srv_strerror(rc));
        core_pieces_release(out);
    }
    return rc;
}

void core_pieces_release(struct core_pieces *ps)
{
    if (!ps)
        return;
    if (ps->has_token)
        store_read_end(ps->c->store, ps->token);
    for (size_t i = 0; i < ps->nbufs; i++)
        free(ps->bufs[i]);
    free(ps->bufs);
    free(ps->v);
    struct core *c = ps->c;
    memset(ps, 0, sizeof(*ps));
    ps->c = c;
}

/* ---- key peek ---- */

int core_key_peek(struct core *c, const struct core_principal *p, const char *bucket,
                  size_t bucketlen, const char *key, size_t keylen, void *buf, size_t bufsize,
                  struct core_peek *out)
{
    MDB_txn *t = NULL;
    struct meta_inode b, r;
    struct meta_dirent de;
    MDB_val v;
    uint8_t k[8];
    bool isdir;
    memset(out, 0, sizeof(*out));
    if (bucketlen == 0 || bucketlen > CORE_NAME_MAX)
        return SRV_ENOBUCKET;
    int rc = core__key_check(key, keylen, &isdir);
    if (rc)
        return rc;
    rc = meta_rtxn_begin(c->meta, &t);
    if (rc)
        return rc;
    /* bucket: as core_bucket_lookup, then core_key_lookup's check of it */
    meta_be32_put(k, p->tenant);
    rc = meta_get(t, core__dbi(c, META_DBI_ROOTS), k, 4, &v);
    if (rc == 0 && v.mv_size < 8)
        rc = SRV_ECORRUPT;
    if (rc == 0)
        rc = core__dirent_get(c, t, meta_be64_get(v.mv_data), bucket, bucketlen, &de);
    if (rc == 0)
        rc = core__ino_get_p(c, t, p, de.ino, 0, &b);
    if (rc == -ENOENT || rc == SRV_ESTALE || rc == -ENAMETOOLONG ||
        (rc == 0 && !(b.flags & CORE_A_BUCKET))) {
        rc = SRV_ENOBUCKET;
        goto out;
    }
    if (rc)
        goto out;
    out->bucket = de.ino;
    uint64_t ino;
    rc = core__kidx_get(c, t, de.ino, key, keylen, &ino, NULL);
    if (rc)
        goto out;
    rc = core__ino_get(c, t, ino, &r);
    if (rc) {
        rc = rc == -ENOENT ? SRV_ECORRUPT : rc;
        goto out;
    }
    rc = core__perm(p, &r, CORE_MAY_R);
    if (rc)
        goto out;
    core__attr_fill(&r, ino, &out->info.attr);
    if (r.type == CORE_REG && atomic_load(&c->pend_count) != 0) {
        /* pending writes: their size, times and ETag come from core_key_lookup */
        struct core__pend *pp = core__pend_get(c, ino, false);
        if (pp) {
            core__pend_put(c, pp);
            rc = -EAGAIN;
            goto out;
        }
    }
    rc = core__objmeta_get(c, t, ino, out->info.etag, &out->info.meta, &out->info.metalen);
    if (rc == -ENOENT)
        rc = 0;
    if (rc)
        goto out;
    if (!out->info.etag[0]) {
        if (r.type == CORE_REG && r.size > 0 && r.size <= ZC_ETAG_MD5_MAX) {
            rc = -EAGAIN; /* core_key_lookup computes and stores the MD5 */
            goto out;
        }
        /* as core_s3.c's synthetic ETags */
        if (r.type == CORE_DIR || r.size == 0)
            snprintf(out->info.etag, sizeof(out->info.etag), "%s", ZC_EMPTY_MD5);
        else
            snprintf(out->info.etag, sizeof(out->info.etag), "%016" PRIx64 "%016" PRIx64 "-1", ino,
                     r.change);
    }
    if (r.type != CORE_REG || r.size == 0) {
        out->data = true;
        goto out;
    }
    if (!(r.flags & META_I_INLINE) || r.size > bufsize)
        goto out;
    meta_be64_put(k, ino);
    rc = meta_get(t, core__dbi(c, META_DBI_INLINE), k, 8, &v);
    if (rc == -ENOENT) {
        v.mv_size = 0;
        rc = 0;
    }
    if (rc)
        goto out;
    size_t have = v.mv_size < r.size ? v.mv_size : (size_t)r.size;
    memcpy(buf, v.mv_data, have);
    memset((char *)buf + have, 0, (size_t)r.size - have);
    out->n = (size_t)r.size;
    out->data = true;
    atomic_fetch_add(&c->bytes_read, out->n);
out:
    meta_rtxn_end(t);
    if (rc) {
        free(out->info.meta);
        out->info.meta = NULL;
        out->info.metalen = 0;
        out->data = false;
    }
    return rc;
}
