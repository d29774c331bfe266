/* SPDX-License-Identifier: Apache-2.0
 * tier_evict: the choice of files to evict (tier_evict.h). Thread: any. */
#include "tier_evict.h"

#include <stdlib.h>

static int by_last(const void *a, const void *b)
{
    const struct tier_evict_cand *x = a, *y = b;
    if (x->prio != y->prio)
        return x->prio > y->prio ? -1 : 1;
    if (x->last_s != y->last_s)
        return x->last_s < y->last_s ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* used > pct (1/100 %) of cap? */
static bool over(uint64_t used, uint64_t cap, uint16_t pct)
{
    return (unsigned __int128)used * 10000u > (unsigned __int128)cap * pct;
}

size_t tier_evict_plan(struct tier_evict_cand *v, size_t n, int64_t now_s, uint64_t used,
                       uint64_t cap, uint32_t ngroups)
{
    bool on[1024] = {false}; /* a group's watermark fired this pass */
    size_t picked = 0;
    if (n > 1)
        qsort(v, n, sizeof(*v), by_last);
    for (size_t i = 0; i < n; i++) {
        v[i].pick = v[i].after_s && now_s - v[i].last_s >= (int64_t)v[i].after_s;
        if (v[i].pick) {
            picked++;
            used = used > v[i].bytes ? used - v[i].bytes : 0;
        }
    }
    if (!cap)
        return picked;
    for (size_t i = 0; i < n; i++) {
        struct tier_evict_cand *c = &v[i];
        if (c->pick || !c->high || c->group >= ngroups || c->group >= 1024)
            continue;
        if (!on[c->group] && over(used, cap, c->high))
            on[c->group] = true;
        if (on[c->group] && over(used, cap, c->low)) {
            c->pick = true;
            picked++;
            used = used > c->bytes ? used - c->bytes : 0;
        }
    }
    return picked;
}
