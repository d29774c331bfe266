/* SPDX-License-Identifier: Apache-2.0
 * nfs_lock: the NLM byte-range lock table (see nfs_lock.h).
 * Files hash into buckets; each file keeps an unordered list of locks, which
 * is short in practice (a few owners per file). Ranges are half-open
 * [start, end) with end = UINT64_MAX for "to the end of the file". */
#include "nfs_lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

struct lk {
    struct lk *next;
    bool exclusive;
    bool has_from;
    uint8_t from[NFS_LOCK_FROM_LEN]; /* the client address of the LOCK that made it */
    int32_t svid;
    uint64_t start, end;
    char *caller;
    size_t callerlen;
    size_t ohlen;
    uint8_t oh[]; /* ohlen bytes */
};

struct lk_file {
    struct lk_file *next;
    uint32_t tenant;
    uint64_t ino;
    struct lk *locks;
};

struct nfs_locks {
    pthread_mutex_t mu;
    struct lk_file *b[NBUCKETS];
    size_t count;
};

int nfs_locks_new(struct nfs_locks **out)
{
    struct nfs_locks *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

static void lk_free(struct lk *l)
{
    free(l->caller);
    free(l);
}

void nfs_locks_free(struct nfs_locks *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct lk_file *f = t->b[i];
        while (f) {
            struct lk_file *nf = f->next;
            struct lk *l = f->locks;
            while (l) {
                struct lk *nl = l->next;
                lk_free(l);
                l = nl;
            }
            free(f);
            f = nf;
        }
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static uint64_t range_end(uint64_t off, uint64_t len)
{
    if (len == 0 || off + len < off)
        return UINT64_MAX;
    return off + len;
}

static bool overlaps(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
    return s1 < e2 && s2 < e1;
}

static bool same_owner(const struct lk *l, const struct nfs_lock_owner *o)
{
    return l->svid == o->svid && l->callerlen == o->callerlen && l->ohlen == o->ohlen &&
           memcmp(l->caller, o->caller, o->callerlen) == 0 && memcmp(l->oh, o->oh, o->ohlen) == 0;
}

static size_t bucket(uint32_t tenant, uint64_t ino)
{
    uint64_t h = (ino ^ ((uint64_t)tenant << 40)) * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 54) % NBUCKETS;
}

static struct lk_file **file_slot(struct nfs_locks *t, uint32_t tenant, uint64_t ino)
{
    struct lk_file **pp = &t->b[bucket(tenant, ino)];
    while (*pp && !((*pp)->tenant == tenant && (*pp)->ino == ino))
        pp = &(*pp)->next;
    return pp;
}

static struct lk *lk_new(const struct nfs_lock_owner *o, bool excl, uint64_t s, uint64_t e)
{
    struct lk *l = calloc(1, sizeof(*l) + o->ohlen);
    if (!l)
        return NULL;
    l->caller = malloc(o->callerlen + 1);
    if (!l->caller) {
        free(l);
        return NULL;
    }
    memcpy(l->caller, o->caller, o->callerlen);
    l->caller[o->callerlen] = '\0';
    l->callerlen = o->callerlen;
    l->svid = o->svid;
    l->ohlen = o->ohlen;
    memcpy(l->oh, o->oh, o->ohlen);
    if (o->from) {
        memcpy(l->from, o->from, NFS_LOCK_FROM_LEN);
        l->has_from = true;
    }
    l->exclusive = excl;
    l->start = s;
    l->end = e;
    return l;
}

static void holder_fill(const struct lk *l, struct nfs_lock_holder *h)
{
    if (!h)
        return;
    h->exclusive = l->exclusive;
    h->svid = l->svid;
    h->ohlen = l->ohlen;
    memcpy(h->oh, l->oh, l->ohlen);
    h->offset = l->start;
    h->len = l->end == UINT64_MAX ? 0 : l->end - l->start;
}

static const struct lk *find_conflict(const struct lk_file *f, const struct nfs_lock_owner *o,
                                      bool excl, uint64_t s, uint64_t e)
{
    for (const struct lk *l = f ? f->locks : NULL; l; l = l->next)
        if (!same_owner(l, o) && overlaps(l->start, l->end, s, e) && (excl || l->exclusive))
            return l;
    return NULL;
}

/* Remove the owner's coverage of [s, e) from file @p f. A lock straddling the
 * range is split, which needs one allocation: @p spare provides it (consumed
 * at most once, since only one lock of an owner can straddle a range that
 * its locks, kept disjoint, cover). */
static void carve(struct nfs_locks *t, struct lk_file *f, const struct nfs_lock_owner *o,
                  uint64_t s, uint64_t e, struct lk **spare)
{
    struct lk **pp = &f->locks;
    while (*pp) {
        struct lk *l = *pp;
        if (!same_owner(l, o) || !overlaps(l->start, l->end, s, e)) {
            pp = &l->next;
            continue;
        }
        if (l->start < s && l->end > e) {
            struct lk *tail = *spare;
            *spare = NULL;
            tail->exclusive = l->exclusive;
            tail->has_from = l->has_from;
            memcpy(tail->from, l->from, NFS_LOCK_FROM_LEN);
            tail->start = e;
            tail->end = l->end;
            l->end = s;
            tail->next = l->next;
            l->next = tail;
            t->count++;
            return;
        }
        if (l->start < s) {
            l->end = s;
            pp = &l->next;
        } else if (l->end > e) {
            l->start = e;
            pp = &l->next;
        } else {
            *pp = l->next;
            lk_free(l);
            t->count--;
        }
    }
}

/* Drop the file entry when its last lock is gone. */
static void file_gc(struct nfs_locks *t, struct lk_file **slot)
{
    struct lk_file *f = *slot;
    if (f && !f->locks) {
        *slot = f->next;
        free(f);
    }
}

int nfs_locks_test(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                   const struct nfs_lock_owner *o, bool exclusive, uint64_t offset, uint64_t len,
                   struct nfs_lock_holder *conflict)
{
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    const struct lk *c = find_conflict(*file_slot(t, tenant, ino), o, exclusive, offset,
                                       range_end(offset, len));
    if (c) {
        holder_fill(c, conflict);
        rc = -EAGAIN;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int nfs_locks_lock(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                   const struct nfs_lock_owner *o, bool exclusive, uint64_t offset, uint64_t len,
                   struct nfs_lock_holder *conflict)
{
    if (o->ohlen > NFS_LOCK_OH_MAX)
        return -EINVAL;
    uint64_t s = offset, e = range_end(offset, len);
    /* Allocate before taking the mutex: the new lock and a spare for a split. */
    struct lk *nl = lk_new(o, exclusive, s, e);
    struct lk *spare = lk_new(o, exclusive, s, e);
    struct lk_file *nf = calloc(1, sizeof(*nf));
    int rc = 0;
    if (!nl || !spare || !nf) {
        rc = -ENOMEM;
        goto out_free;
    }
    pthread_mutex_lock(&t->mu);
    struct lk_file **slot = file_slot(t, tenant, ino);
    const struct lk *c = find_conflict(*slot, o, exclusive, s, e);
    if (c) {
        holder_fill(c, conflict);
        rc = -EAGAIN;
        pthread_mutex_unlock(&t->mu);
        goto out_free;
    }
    if (!*slot) {
        nf->tenant = tenant;
        nf->ino = ino;
        *slot = nf;
        nf = NULL;
    }
    carve(t, *slot, o, s, e, &spare);
    nl->next = (*slot)->locks;
    (*slot)->locks = nl;
    nl = NULL;
    t->count++;
    pthread_mutex_unlock(&t->mu);
out_free:
    if (nl)
        lk_free(nl);
    if (spare)
        lk_free(spare);
    free(nf);
    return rc;
}

int nfs_locks_unlock(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                     const struct nfs_lock_owner *o, uint64_t offset, uint64_t len)
{
    struct lk *spare = lk_new(o, false, 0, 0);
    if (!spare)
        return -ENOMEM;
    pthread_mutex_lock(&t->mu);
    struct lk_file **slot = file_slot(t, tenant, ino);
    if (*slot) {
        carve(t, *slot, o, offset, range_end(offset, len), &spare);
        file_gc(t, slot);
    }
    pthread_mutex_unlock(&t->mu);
    if (spare)
        lk_free(spare);
    return 0;
}

size_t nfs_locks_free_host(struct nfs_locks *t, const char *caller, size_t callerlen,
                           const uint8_t *from, size_t *kept)
{
    size_t n = 0, other = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct lk_file **fp = &t->b[i];
        while (*fp) {
            struct lk **pp = &(*fp)->locks;
            while (*pp) {
                struct lk *l = *pp;
                bool host = l->callerlen == callerlen && memcmp(l->caller, caller, callerlen) == 0;
                bool same_from = !from || (l->has_from &&
                                           memcmp(l->from, from, NFS_LOCK_FROM_LEN) == 0);
                if (host && same_from) {
                    *pp = l->next;
                    lk_free(l);
                    t->count--;
                    n++;
                } else {
                    other += host;
                    pp = &l->next;
                }
            }
            if (!(*fp)->locks)
                file_gc(t, fp);
            else
                fp = &(*fp)->next;
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (kept)
        *kept = other;
    return n;
}

size_t nfs_locks_host_count(struct nfs_locks *t, const char *caller, size_t callerlen)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const struct lk_file *f = t->b[i]; f; f = f->next)
            for (const struct lk *l = f->locks; l; l = l->next)
                if (l->callerlen == callerlen && memcmp(l->caller, caller, callerlen) == 0)
                    n++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t nfs_locks_count(struct nfs_locks *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->count;
    pthread_mutex_unlock(&t->mu);
    return n;
}
