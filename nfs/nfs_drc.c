/* SPDX-License-Identifier: Apache-2.0
 * nfs_drc: duplicate request cache (see nfs_drc.h).
 * A chained hash table plus an insertion-ordered list for eviction. */
#include "nfs_drc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

struct drc_ent {
    struct nfs_drc_key key;
    struct drc_ent *hnext;        /* hash chain */
    struct drc_ent *prev, *next;  /* age list, oldest first */
    void *reply;                  /* NULL while in progress */
    size_t len;
};

struct nfs_drc {
    pthread_mutex_t lock;
    struct drc_ent **tab;
    size_t nbuckets, count, cap;
    struct drc_ent *oldest, *newest;
};

static uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h;
}

int nfs_drc_new(struct nfs_drc **out, size_t capacity)
{
    struct nfs_drc *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->cap = capacity ? capacity : 1;
    d->nbuckets = 1;
    while (d->nbuckets < d->cap)
        d->nbuckets <<= 1;
    d->tab = calloc(d->nbuckets, sizeof(*d->tab));
    if (!d->tab) {
        free(d);
        return -ENOMEM;
    }
    pthread_mutex_init(&d->lock, NULL);
    *out = d;
    return 0;
}

void nfs_drc_free(struct nfs_drc *d)
{
    if (!d)
        return;
    struct drc_ent *e = d->oldest;
    while (e) {
        struct drc_ent *n = e->next;
        free(e->reply);
        free(e);
        e = n;
    }
    pthread_mutex_destroy(&d->lock);
    free(d->tab);
    free(d);
}

void nfs_drc_key_make(struct nfs_drc_key *k, const struct sockaddr *sa, uint32_t xid,
                      uint32_t prog, uint32_t proc, const void *args, size_t argslen)
{
    memset(k, 0, sizeof(*k));
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        k->addr[10] = 0xff;
        k->addr[11] = 0xff;
        memcpy(k->addr + 12, &s4->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        memcpy(k->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    k->xid = xid;
    k->prog = prog;
    k->proc = proc;
    k->sum = fnv1a(args, argslen, 2166136261u);
}

static size_t key_hash(const struct nfs_drc *d, const struct nfs_drc_key *k)
{
    return fnv1a(k, sizeof(*k), 2166136261u) & (d->nbuckets - 1);
}

static bool key_eq(const struct nfs_drc_key *a, const struct nfs_drc_key *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

static struct drc_ent **find_slot(struct nfs_drc *d, const struct nfs_drc_key *k)
{
    struct drc_ent **pp = &d->tab[key_hash(d, k)];
    while (*pp && !key_eq(&(*pp)->key, k))
        pp = &(*pp)->hnext;
    return pp;
}

static void unlink_ent(struct nfs_drc *d, struct drc_ent *e)
{
    struct drc_ent **pp = find_slot(d, &e->key);
    if (*pp == e)
        *pp = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        d->oldest = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        d->newest = e->prev;
    d->count--;
    free(e->reply);
    free(e);
}

/* Drop the oldest finished entries until there is room for one more. */
static void evict(struct nfs_drc *d)
{
    struct drc_ent *e = d->oldest;
    while (d->count >= d->cap && e) {
        struct drc_ent *n = e->next;
        if (e->reply)
            unlink_ent(d, e);
        e = n;
    }
}

enum nfs_drc_state nfs_drc_start(struct nfs_drc *d, const struct nfs_drc_key *k, void **reply,
                                 size_t *len)
{
    enum nfs_drc_state st = NFS_DRC_NEW;
    pthread_mutex_lock(&d->lock);
    struct drc_ent **pp = find_slot(d, k);
    if (*pp) {
        struct drc_ent *e = *pp;
        if (!e->reply) {
            st = NFS_DRC_INPROGRESS;
        } else if ((*reply = malloc(e->len)) != NULL) {
            memcpy(*reply, e->reply, e->len);
            *len = e->len;
            st = NFS_DRC_DONE;
        } else {
            st = NFS_DRC_INPROGRESS; /* cannot copy: dropping lets the client retry */
        }
        goto out;
    }
    evict(d);
    struct drc_ent *e = calloc(1, sizeof(*e));
    if (!e)
        goto out;
    e->key = *k;
    pp = find_slot(d, k);
    e->hnext = *pp;
    *pp = e;
    e->prev = d->newest;
    if (d->newest)
        d->newest->next = e;
    else
        d->oldest = e;
    d->newest = e;
    d->count++;
out:
    pthread_mutex_unlock(&d->lock);
    return st;
}

void nfs_drc_finish(struct nfs_drc *d, const struct nfs_drc_key *k, const void *reply,
                    size_t len)
{
    pthread_mutex_lock(&d->lock);
    struct drc_ent *e = *find_slot(d, k);
    if (!e || e->reply)
        goto out;
    void *copy = reply ? malloc(len ? len : 1) : NULL;
    if (!copy) {
        unlink_ent(d, e);
        goto out;
    }
    memcpy(copy, reply, len);
    e->reply = copy;
    e->len = len;
out:
    pthread_mutex_unlock(&d->lock);
}

size_t nfs_drc_count(struct nfs_drc *d)
{
    pthread_mutex_lock(&d->lock);
    size_t n = d->count;
    pthread_mutex_unlock(&d->lock);
    return n;
}
