/* SPDX-License-Identifier: Apache-2.0
 * core_zc: zero-copy read pieces for S3 GETs (the data sub-module,
 * core_data_int.h; the other fast path, core_key_peek, is in core_s3.c).
 *
 * core_read_pieces describes a byte range of a file as pieces to send
 * without a user-space copy: (fd, device offset, length) of extents whose
 * bytes are verified and in the page cache, memory for inline data, and
 * holes. The CRC rule ("every extent is checked on read, never silent wrong
 * bytes") is kept this way:
 *  - an extent is verified by reading it into the page cache through the
 *    store's buffered fd (store_extent_fd), mapping it (a fresh read-only
 *    MAP_SHARED mapping whose page tables MADV_POPULATE_READ fills: an I/O
 *    error is an error, never a SIGBUS), then reading it again whole through
 *    the fd in ZC_VCHUNK pieces into one small buffer and checking its
 *    CRC32C. The bytes are checked, not kept: the range is handed out from
 *    the fd (ps->copied counts them);
 *  - an extent written through the page cache (store write_cache) is
 *    remembered when it is written (core__zc_written): mapped after the
 *    write and before its writeback starts, while its pages are dirty and so
 *    cannot have been dropped and read in again, the mapping holds the pages
 *    the write filled, whose bytes are those the CRC was computed over;
 *  - the mapping is kept with the extent in a table keyed by (device,
 *    offset, length, CRC) and the core's write verifier. Nothing ever touches
 *    the mapping's memory, so its page-table entries are exactly the pages
 *    that were in the page cache when the extent was verified: a page leaves
 *    the page cache only after the kernel unmapped it from every mapping
 *    (reclaim, an O_DIRECT write's invalidation, truncation; migration puts a
 *    copy back), and a page read in again later (readahead for a neighbouring
 *    read, another process reading the file) is not mapped here, since only a
 *    fault in this mapping would map it;
 *  - a later read sends a remembered extent from the fd only if every page
 *    of the range still has its page-table entry in the extent's mapping
 *    (/proc/self/pagemap: its PAGEMAP_SCAN ioctl, else its present bits;
 *    checked under the table's lock); otherwise it verifies again, with a new
 *    mapping. There is no time limit: the entry stays true for as long as
 *    those pages stay mapped, and whatever could change the bytes behind it
 *    unmaps them or changes the key (below). (It once expired after 10 s,
 *    and NFS's small READs, verified block by block by core_read, never
 *    renewed it: every 4 KiB READ of a file went to a worker, issue 17.)
 *    Residency alone (cachestat, mincore) proves nothing: a page
 *    dropped and read in again from a disk that changed is resident and was
 *    never checked (that is how corrupt bytes were once sent whole).
 * Space is never rewritten in place with the same CRC while mapped (writes
 * are copy-on-write and a freed extent is reused only after every reader that
 * could see it has finished, store limbo), so an entry can only be matched by
 * the extent it was made for, or by a new extent at the same place with
 * identical length and CRC (the CRC's own blind spot; with the store's
 * write_cache a freed extent's entry and mapping are dropped, core__zc_forget,
 * before its space can be allocated again, so that its pages can leave the
 * page cache and the space is written through it again). Without pagemap or
 * MADV_POPULATE_READ (old kernels, no /proc) nothing is remembered and every
 * read verifies. With CORE_P_CACHED, an extent not known verified is verified
 * (and remembered) only if all its pages are in the page cache (cachestat),
 * else the call answers -EWOULDBLOCK: NFS's small READs on a worker use it so
 * that a warm extent is verified once, whole, and later READs of it are
 * answered on the loop, while a cold one costs no 1 MiB disk read for 4 KiB.
 * The guarantee is therefore: bytes sent from the fd are bytes this process
 * verified, unless the kernel dropped a page and read it in again between the
 * check (or the verification) and the send itself, microseconds later; the
 * bytes of such a page are sent unchecked that once.
 * The pieces hold a store read token until core_pieces_release, so extents
 * freed meanwhile (an NFS overwrite, a delete) are not reused before the
 * bytes left.
 * Thread: any; core_pieces_release may run on a loop thread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core_data_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "srv_err.h"
#include "srv_log.h"

#define ZC_SHARDS 64
#define ZC_SLOTS 128 /* per shard: 8192 remembered extents (8 GiB of 1 MiB extents) */
#define ZC_WAYS 4
#define ZC_PAGE 4096u
#define ZC_VCHUNK ((size_t)64 * 1024) /* bytes read per step when verifying */

/* ---- the verified-extent table ---- */

struct zc_ent {
    uint64_t verf; /* core write verifier: entries of another core never match */
    uint64_t off;
    uint32_t dev, len, crc;
    uint32_t when; /* coarse monotonic seconds at verification (never expires); 0 = empty */
    void *map;     /* the extent's mapping (len rounded up to ZC_PAGE), never read */
};

struct zc_shard {
    pthread_mutex_t mu;
    struct zc_ent e[ZC_SLOTS];
    uint32_t next;
};

static struct zc_shard zc_tab[ZC_SHARDS];
static pthread_once_t zc_once = PTHREAD_ONCE_INIT;
static int zc_pagemap = -1; /* /proc/self/pagemap, or -1: nothing is remembered */
static int zc_null = -1;    /* /dev/null, where cache_extent sends what it reads in */
static atomic_int zc_no_populate;

static void zc_init(void)
{
    for (int i = 0; i < ZC_SHARDS; i++)
        pthread_mutex_init(&zc_tab[i].mu, NULL);
    zc_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    zc_null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (zc_pagemap < 0)
        srv_log(WARN, STORE, "/proc/self/pagemap: %s: every read of an extent verifies it",
                strerror(errno));
}

static uint32_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)ts.tv_sec + 1; /* never 0 */
}

static size_t map_len(const struct store_extent *e)
{
    return ((size_t)e->len + ZC_PAGE - 1) & ~(size_t)(ZC_PAGE - 1);
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

/* Empty slot @p z; its mapping goes to *@p unmap (unmapped after the lock). */
static void zc_clear(struct zc_ent *z, void **unmap, size_t *unmap_len)
{
    *unmap = z->map;
    *unmap_len = map_len(&(struct store_extent){.len = z->len});
    memset(z, 0, sizeof(*z));
}

static void zc_unmap(void *map, size_t len)
{
    if (map)
        munmap(map, len);
}

/* PAGEMAP_SCAN (Linux 6.7), declared here as the system headers may predate it. */
#define ZC_PAGE_IS_PRESENT (1ull << 3)
struct zc_page_region {
    uint64_t start, end, categories;
};
struct zc_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define ZC_PAGEMAP_SCAN _IOWR('f', 16, struct zc_pm_scan_arg)
static atomic_int zc_no_scan;

/* Does every page of [map + from, map + from + n) still have its page-table
 * entry? PAGEMAP_SCAN looks for the first page without one; where it is
 * missing, the present bit (63) of each 8-byte /proc/self/pagemap entry. */
static bool mapped(void *map, uint64_t from, uint64_t n)
{
    uintptr_t a = ((uintptr_t)map + from) & ~(uintptr_t)(ZC_PAGE - 1);
    uintptr_t end = ((uintptr_t)map + from + n + ZC_PAGE - 1) & ~(uintptr_t)(ZC_PAGE - 1);
    if (!atomic_load_explicit(&zc_no_scan, memory_order_relaxed)) {
        struct zc_page_region reg;
        struct zc_pm_scan_arg arg = {
            .size = sizeof(arg),
            .start = a,
            .end = end,
            .vec = (uintptr_t)&reg,
            .vec_len = 1,
            .max_pages = 1,
            .category_inverted = ZC_PAGE_IS_PRESENT, /* match pages NOT present */
            .category_mask = ZC_PAGE_IS_PRESENT,
            .return_mask = ZC_PAGE_IS_PRESENT,
        };
        int r = ioctl(zc_pagemap, ZC_PAGEMAP_SCAN, &arg);
        if (r >= 0)
            return r == 0 && arg.walk_end == end;
        if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP)
            return false;
        atomic_store(&zc_no_scan, 1);
    }
    uint64_t v[64];
    for (uint64_t p = a / ZC_PAGE; p < end / ZC_PAGE;) {
        uint64_t k = end / ZC_PAGE - p < 64 ? end / ZC_PAGE - p : 64;
        ssize_t r = pread(zc_pagemap, v, k * sizeof(v[0]), (off_t)(p * sizeof(v[0])));
        if (r != (ssize_t)(k * sizeof(v[0])))
            return false;
        for (uint64_t i = 0; i < k; i++)
            if (!(v[i] >> 63))
                return false;
        p += k;
    }
    return true;
}

/* Was extent @p e verified, with every page of its bytes [from, from + n)
 * mapped since? */
static bool zc_known(struct core *c, const struct store_extent *e, uint64_t from, uint64_t n)
{
    struct zc_shard *s;
    struct zc_ent *set = zc_set(&s, e);
    bool ok = false;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ZC_WAYS; i++)
        if (zc_same(&set[i], c->verifier, e)) {
            ok = mapped(set[i].map, from, n);
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Remember extent @p e, verified through mapping @p map (the table owns it). */
static void zc_remember(struct core *c, const struct store_extent *e, void *map)
{
    struct zc_shard *s;
    struct zc_ent *set = zc_set(&s, e);
    void *unmap = NULL;
    size_t unmap_len = 0;
    pthread_mutex_lock(&s->mu);
    struct zc_ent *slot = NULL;
    for (int i = 0; i < ZC_WAYS && !slot; i++)
        if (!set[i].when ||
            (set[i].verf == c->verifier && set[i].dev == e->dev && set[i].off == e->off))
            slot = &set[i];
    if (!slot)
        slot = &set[s->next++ % ZC_WAYS];
    if (slot->when)
        zc_clear(slot, &unmap, &unmap_len);
    *slot = (struct zc_ent){c->verifier, e->off, e->dev, e->len, e->crc, now_s(), map};
    pthread_mutex_unlock(&s->mu);
    zc_unmap(unmap, unmap_len);
}

/* A new mapping of extent @p e with its page tables populated (its pages,
 * read into the page cache if they are not there, mapped), or NULL: no
 * pagemap, no MADV_POPULATE_READ (Linux < 5.14), an I/O error (the
 * verification's read reports it), no address space. */
static void *map_extent(int fd, const struct store_extent *e)
{
#ifdef MADV_POPULATE_READ
    if (zc_pagemap < 0 || atomic_load_explicit(&zc_no_populate, memory_order_relaxed))
        return NULL;
    void *m = mmap(NULL, map_len(e), PROT_READ, MAP_SHARED, fd, (off_t)e->off);
    if (m == MAP_FAILED)
        return NULL;
    if (madvise(m, map_len(e), MADV_POPULATE_READ) != 0) {
        if (errno == EINVAL) {
            atomic_store(&zc_no_populate, 1);
            srv_log(WARN, STORE, "MADV_POPULATE_READ: %s: every read of an extent verifies it",
                    strerror(errno));
        }
        munmap(m, map_len(e));
        return NULL;
    }
    return m;
#else
    (void)fd;
    (void)e;
    return NULL;
#endif
}

void core__zc_written(struct core *c, const struct store_extent *e)
{
    if (!(e->flags & STORE_X_CACHED))
        return;
    pthread_once(&zc_once, zc_init);
    /* Mapped before their writeback starts: the pages are still dirty, which
     * the kernel never drops, so the mapping holds the very pages the write
     * filled, and they hold the bytes whose CRC was computed from the
     * writer's buffer. That is what verifying them would prove. */
    int fd = store_extent_fd(c->store, e);
    void *m = fd >= 0 ? map_extent(fd, e) : NULL;
    if (m)
        zc_remember(c, e, m);
    store_writeback(c->store, e);
}

void core__zc_forget(void *arg, uint32_t dev, uint64_t off, uint64_t len)
{
    struct core *c = arg;
    (void)len;
    pthread_once(&zc_once, zc_init);
    /* An entry is keyed by its extent's start; the store calls this once per
     * freed extent with that start. A mapping keeps the pages in the page
     * cache (POSIX_FADV_DONTNEED skips mapped pages), which would send the
     * write that reuses the space O_DIRECT. */
    struct store_extent e = {.dev = dev, .off = off};
    struct zc_shard *s;
    struct zc_ent *set = zc_set(&s, &e);
    void *unmap[ZC_WAYS] = {0};
    size_t unmap_len[ZC_WAYS] = {0};
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ZC_WAYS; i++)
        if (set[i].when && set[i].verf == c->verifier && set[i].dev == dev && set[i].off == off)
            zc_clear(&set[i], &unmap[i], &unmap_len[i]);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < ZC_WAYS; i++)
        zc_unmap(unmap[i], unmap_len[i]);
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

/* Append @p p to the growable array @p v of @p *n entries (room for @p *cap).
 * @return 0, -ENOMEM. */
static int ptrs_push(void ***v, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        void **nv = realloc(*v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = p;
    return 0;
}

/* Keep @p buf until release. */
static int keep_buf(struct core_pieces *ps, void *buf)
{
    return ptrs_push(&ps->bufs, &ps->nbufs, &ps->capbufs, buf);
}

/* Hold @p ref (core__tier_mem_get's) until release. */
static int keep_ref(struct core_pieces *ps, void *ref)
{
    return ptrs_push(&ps->refs, &ps->nrefs, &ps->caprefs, ref);
}

/* Whether every page of extent @p e is in the page cache, by cachestat(2)
 * (Linux 6.5; its number is the same on every architecture). Only a hint for
 * skipping the read that brings the extent in: residency proves nothing about
 * the bytes (the verification does). False when unknown. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
static atomic_int zc_no_cachestat;

static bool resident(int fd, const struct store_extent *e)
{
    struct {
        uint64_t off, len;
    } range = {e->off, map_len(e)};
    struct {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
    } cs;
    if (atomic_load_explicit(&zc_no_cachestat, memory_order_relaxed))
        return false;
    if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0) {
        if (errno == ENOSYS)
            atomic_store(&zc_no_cachestat, 1);
        return false;
    }
    return cs.nr_cache == range.len / ZC_PAGE;
}

/* Read extent @p e whole through the buffered fd, in ZC_VCHUNK pieces into
 * @p buf (which stays in the CPU cache), and, with @p crc, its CRC32C into
 * *@p crc. @return 0, -EIO. */
static int read_extent(int fd, const struct store_extent *e, char *buf, uint32_t *crc)
{
    for (size_t got = 0; got < e->len;) {
        size_t want = e->len - got < ZC_VCHUNK ? e->len - got : ZC_VCHUNK;
        ssize_t r = pread(fd, buf, want, (off_t)(e->off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            srv_log(ERROR, STORE, "read dev=%u off=%" PRIu64 " len=%u: %s", e->dev, e->off, e->len,
                    r < 0 ? strerror(errno) : "EOF");
            return -EIO;
        }
        if (crc)
            *crc = store_crc32c(*crc, buf, (size_t)r);
        got += (size_t)r;
    }
    return 0;
}

/* Bring extent @p e into the page cache: sendfile(2) of its range to
 * /dev/null, which reads it as read(2) does (the same readahead, the same
 * large folios) but copies nothing out (/dev/null's splice drops the pages
 * it is given); where that is refused (no /dev/null, a kernel or file
 * system without splice), read_extent into @p buf. @return 0, -EIO. */
static int cache_extent(int fd, const struct store_extent *e, char *buf)
{
    off_t pos = (off_t)e->off;
    off_t end = pos + (off_t)e->len;
    while (zc_null >= 0 && pos < end) {
        ssize_t r = sendfile(zc_null, fd, &pos, (size_t)(end - pos));
        if (r > 0)
            continue;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
            break; /* not here: read it */
        srv_log(ERROR, STORE, "read dev=%u off=%" PRIu64 " len=%u: %s", e->dev, e->off, e->len,
                r < 0 ? strerror(errno) : "EOF");
        return -EIO;
    }
    if (pos >= end)
        return 0;
    return read_extent(fd, e, buf, NULL);
}

/* Verify extent @p e: read it into the page cache unless it is there (cache_extent: the kernel's
 * readahead sizes the disk reads; its large folios make later sendfiles ~1.6x cheaper than
 * POSIX_FADV_WILLNEED's 4 KiB ones, and pages it caches past the extent are checked by their own
 * extent's verification), map it (map_extent: cached now, so cheap), then read it again through the
 * fd and check its CRC32C. The pages the mapping holds were in the page cache before that read, so
 * the read saw them, unless one was dropped meanwhile, which unmapped it (the next read verifies
 * again). The bytes are checked, not kept. On success *@p map is the mapping (the caller owns it),
 * or NULL when none could be made (nothing to remember; then the extent is read once).
 * @return 0, -EIO, SRV_ECORRUPT, -ENOMEM. */
static int verify_extent(struct core *c, int fd, const struct store_extent *e, void **map)
{
    void *m = NULL;
    uint32_t crc = 0;
    int rc = 0;
    *map = NULL;
    char *buf = malloc(ZC_VCHUNK);
    if (!buf)
        return -ENOMEM;
    if (zc_pagemap >= 0 && !atomic_load_explicit(&zc_no_populate, memory_order_relaxed)) {
        if (!resident(fd, e)) { /* cached already (written through the cache, read before) */
            rc = cache_extent(fd, e, buf);
            if (rc)
                goto out;
        }
        m = map_extent(fd, e);
    }
    rc = read_extent(fd, e, buf, &crc);
    if (rc)
        goto out;
    if (crc != e->crc) {
        atomic_fetch_add(&c->crc_errors, 1);
        srv_log(ERROR, STORE, "CRC mismatch dev=%u off=%" PRIu64 " len=%u: want %08x got %08x",
                e->dev, e->off, e->len, e->crc, crc);
        rc = SRV_ECORRUPT;
    }
out:
    free(buf);
    if (rc == 0)
        *map = m;
    else if (m)
        munmap(m, map_len(e));
    return rc;
}

/* The bytes [s, e) of extent @p x as a piece of the store's fd: at once when
 * the extent was verified and those pages stayed mapped, else after verifying
 * it now (which leaves it in the page cache). */
static int extent_piece(struct core *c, struct core_pieces *ps, const struct core__fext *x,
                        uint64_t s, uint64_t e, uint32_t flags)
{
    uint64_t from = s - x->foff, n = e - s;
    const char *mem;
    void *ref = core__tier_mem_get(c, &x->e, n, &mem);
    if (ref) { /* just recalled: the bytes its CRC was computed over, still in memory */
        if (keep_ref(ps, ref) != 0) {
            core__tier_mem_put(c, ref);
            return -ENOMEM;
        }
        return piece_push(ps, &(struct core_piece){-1, 0, n, mem + from});
    }
    int fd = store_extent_fd(c->store, &x->e);
    if (fd < 0)
        return -EIO;
    if (!zc_known(c, &x->e, from, n)) {
        if (flags & CORE_P_NOWAIT)
            return -EWOULDBLOCK; /* verifying reads the disk */
        if ((flags & CORE_P_CACHED) && !resident(fd, &x->e))
            return -EWOULDBLOCK; /* verifying would read the disk */
        void *map;
        int rc = verify_extent(c, fd, &x->e, &map);
        if (rc)
            return rc;
        if (map)
            zc_remember(c, &x->e, map);
        ps->copied += n;
    }
    return piece_push(ps, &(struct core_piece){fd, x->e.off + from, n, NULL});
}

int core_read_pieces(struct core *c, const struct core_principal *p, uint64_t ino, uint64_t off,
                     uint64_t len, struct core_pieces *out)
{
    struct meta_txn *t = NULL;
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
        const void *vd = ps.inl;
        size_t vl = ps.inl_len;
        if (!ps.inl) {
            rc = core__inline_get(t, ino, &vd, &vl);
            if (rc)
                goto out;
        }
        uint64_t have = off < vl ? (end < vl ? end : vl) - off : 0;
        if (have) {
            char *b = malloc(have);
            if (!b || (rc = keep_buf(out, b)) != 0) {
                free(b);
                rc = -ENOMEM;
                goto out;
            }
            memcpy(b, (const char *)vd + off, have);
            rc = piece_push(out, &(struct core_piece){-1, 0, have, b});
        }
        if (rc == 0)
            rc = piece_push(out, &(struct core_piece){-1, 0, end - off - have, NULL});
        goto done;
    }
    if (!(r.flags & META_I_INLINE))
        rc = core__overlaps(t, ino, off, end, &com, false);
    if (rc == 0)
        rc = core__fext_merge(&ps.ext, &com, &l);
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
            rc = extent_piece(c, out, x, s, e, p->flags);
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
    for (size_t i = 0; i < ps->nrefs; i++)
        core__tier_mem_put(ps->c, ps->refs[i]);
    free(ps->refs);
    free(ps->v);
    struct core *c = ps->c;
    memset(ps, 0, sizeof(*ps));
    ps->c = c;
}
