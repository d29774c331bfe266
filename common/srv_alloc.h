/* SPDX-License-Identifier: Apache-2.0
 * srv_alloc: zeroed allocation through malloc's per-thread cache.
 *
 * glibc's calloc (2.36, this platform's) never takes a chunk from the
 * per-thread cache (tcache): every calloc goes through the arena's bins
 * (_int_malloc, and malloc_consolidate when the size is a large-bin one), and
 * its free goes back the slow way too. malloc does use the cache for chunks up
 * to 1,032 bytes, so for the small records made and freed on every request
 * (an NFS call, its decoded arguments and result) malloc and memset cost a
 * fraction of calloc. Compilers fold malloc followed by memset of the same
 * size back into calloc: the empty asm hides the pointer from that fold.
 * Thread: any. */
#ifndef SRV_ALLOC_H
#define SRV_ALLOC_H

#include <stdlib.h>
#include <string.h>

/** @p n zeroed bytes (malloc + memset, never folded into calloc), or NULL.
 * Free with free(). Meant for small sizes; calloc is as good above 1 KiB. */
static inline void *srv_zalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        return NULL;
    __asm__("" : "+r"(p));
    memset(p, 0, n);
    return p;
}

#endif
