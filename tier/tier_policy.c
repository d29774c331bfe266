/* SPDX-License-Identifier: Apache-2.0
 * tier_policy: validation and stored form of a bucket's tier policy
 * (tier_policy.h). Thread: any. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "meta_schema.h"
#include "srv_err.h"
#include "tier_policy.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static const char *const sclass_names[TIER_SC__COUNT] = {
    "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE",
};

const char *tier_sclass_name(unsigned sc)
{
    return sc < TIER_SC__COUNT ? sclass_names[sc] : NULL;
}

int tier_sclass_parse(const char *name)
{
    for (unsigned i = 0; name && i < TIER_SC__COUNT; i++)
        if (strcmp(name, sclass_names[i]) == 0)
            return (int)i;
    return -1;
}

int tier_policy_validate(const struct tier_policy *p, char *why, size_t whylen)
{
    if (p->remote == 0) {
        if (why)
            snprintf(why, whylen, "a remote is required");
        return -EINVAL;
    }
    if (p->sclass >= TIER_SC__COUNT) {
        if (why)
            snprintf(why, whylen, "unknown storage class code %u", p->sclass);
        return -EINVAL;
    }
    if (p->upload_after_s > TIER_UPLOAD_AFTER_MAX) {
        if (why)
            snprintf(why, whylen, "upload_after_s must be 0..%u", TIER_UPLOAD_AFTER_MAX);
        return -EINVAL;
    }
    if (p->evict_after_s > TIER_EVICT_AFTER_MAX) {
        if (why)
            snprintf(why, whylen, "evict_after_s must be 0..%u", TIER_EVICT_AFTER_MAX);
        return -EINVAL;
    }
    if (p->evict_high > TIER_WM_MAX || p->evict_low > TIER_WM_MAX ||
        (p->evict_high == 0) != (p->evict_low == 0) ||
        (p->evict_high && p->evict_low >= p->evict_high)) {
        if (why)
            snprintf(why, whylen,
                     "evict_watermark needs high and low, 0 < low < high <= 100 (percent)");
        return -EINVAL;
    }
    if (p->npins > TIER_PIN_MAX) {
        if (why)
            snprintf(why, whylen, "at most %u pinned prefixes", TIER_PIN_MAX);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < p->npins; i++) {
        size_t n = strnlen(p->pins[i], TIER_PIN_LEN + 1);
        if (n == 0 || n > TIER_PIN_LEN) {
            if (why)
                snprintf(why, whylen, "a pinned prefix has 1..%u bytes", TIER_PIN_LEN);
            return -EINVAL;
        }
    }
    return 0;
}

int tier_policy_pinned(const struct tier_policy *p, const char *key, size_t len)
{
    for (uint32_t i = 0; i < p->npins; i++) {
        size_t n = strlen(p->pins[i]);
        if (n <= len && memcmp(key, p->pins[i], n) == 0)
            return 1;
    }
    return 0;
}

size_t tier_policy_encode(const struct tier_policy *p, uint8_t out[TIER_POLICY_MAX])
{
    memset(out, 0, TIER_POLICY_LEN);
    out[0] = 1;
    out[2] = p->sclass;
    meta_be32_put(out + 4, p->remote);
    meta_be32_put(out + 8, p->upload_after_s);
    if (!tier_policy_evicts(p) && p->npins == 0)
        return TIER_POLICY_LEN; /* what version 1 builds read */
    out[0] = 2;
    uint8_t *q = out + TIER_POLICY_LEN;
    meta_be32_put(q, p->evict_after_s);
    put16(q + 4, p->evict_high);
    put16(q + 6, p->evict_low);
    q[8] = (uint8_t)p->npins;
    q[9] = q[10] = q[11] = 0;
    q += 12;
    for (uint32_t i = 0; i < p->npins && i < TIER_PIN_MAX; i++) {
        size_t n = strnlen(p->pins[i], TIER_PIN_LEN);
        put16(q, (uint16_t)n);
        memcpy(q + 2, p->pins[i], n);
        q += 2 + n;
    }
    return (size_t)(q - out);
}

int tier_policy_decode(const void *buf, size_t len, struct tier_policy *out)
{
    const uint8_t *b = buf;
    if (len < TIER_POLICY_LEN || b[0] == 0)
        return -EINVAL;
    if (b[0] > TIER_POLICY_VERSION)
        return SRV_EBADVERSION;
    memset(out, 0, sizeof(*out));
    out->sclass = b[2];
    out->remote = meta_be32_get(b + 4);
    out->upload_after_s = meta_be32_get(b + 8);
    if (b[0] >= 2) {
        const uint8_t *q = b + TIER_POLICY_LEN, *end = b + len;
        if (end - q < 12)
            return -EINVAL;
        out->evict_after_s = meta_be32_get(q);
        out->evict_high = get16(q + 4);
        out->evict_low = get16(q + 6);
        out->npins = q[8];
        if (out->npins > TIER_PIN_MAX)
            return -EINVAL;
        q += 12;
        for (uint32_t i = 0; i < out->npins; i++) {
            if (end - q < 2)
                return -EINVAL;
            size_t n = get16(q);
            if (n == 0 || n > TIER_PIN_LEN || (size_t)(end - q - 2) < n)
                return -EINVAL;
            memcpy(out->pins[i], q + 2, n);
            out->pins[i][n] = '\0';
            if (memchr(out->pins[i], '\0', n))
                return -EINVAL;
            q += 2 + n;
        }
    }
    return tier_policy_validate(out, NULL, 0);
}

/* ---- directory tier policies, recall settings and workload presets ---- */

#define MiB (1u << 20)
#define RECALL_KNOBS (TIER_D_WHOLE | TIER_D_RA | TIER_D_CHUNK | TIER_D_STREAMS)

void tier_preset_knobs(uint8_t p, struct tier_dirpol *o)
{
    memset(o, 0, sizeof(*o));
    /* NONE: the built-in behaviour (whole file in the daemon's tier_recall_chunk_size
     * chunks on all the shared recall threads; the bucket's upload delay; normal
     * priority; writable) */
    o->set = TIER_D_PRIO | TIER_D_DIRPF | TIER_D_RO | TIER_D_DIRTY | RECALL_KNOBS;
    o->evict_priority = TIER_PRIO_NORMAL;
    o->whole_file = 1;
    o->chunk_size = TIER_CHUNK_DEFAULT;
    switch (p) {
    case TIER_PRESET_MODEL_CHECKPOINT_RO:
    case TIER_PRESET_MODEL_CHECKPOINT_RW:
        /* large files read once, sequentially: the whole file on as many streams as
         * the recall threads serve (0), in the daemon's chunks (0: its 8 MiB default),
         * as NONE does: more streams than GET slots, or other chunks than the
         * daemon's, only made a cold model load slower than NONE (0.47-0.67x). A
         * 64 MiB read-ahead for when whole_file is turned off */
        o->read_ahead = 64 * MiB;
        if (p == TIER_PRESET_MODEL_CHECKPOINT_RO) {
            o->read_only = 1;
            o->evict_priority = TIER_PRIO_LOW; /* weights are read again: keep them */
        } else {
            o->set |= TIER_D_UPLOAD;
            o->upload_after_s = 0; /* a committed checkpoint goes at once */
            o->dirty_bound = 64ull << 30;
            o->evict_priority = TIER_PRIO_HIGH; /* written once, rarely read back */
        }
        break;
    case TIER_PRESET_DATASET_RO:
    case TIER_PRESET_DATASET_RW:
        /* many small files read at random by many workers: one stream per file
         * (parallelism comes from the files), small chunks, the directory's small
         * files when it is listed */
        o->read_ahead = 2 * MiB;
        o->streams = 1;
        o->chunk_size = 2 * MiB;
        o->dir_prefetch = 1;
        if (p == TIER_PRESET_DATASET_RO) {
            o->read_only = 1;
        } else {
            o->set |= TIER_D_UPLOAD;
            o->upload_after_s = 60;
            o->dirty_bound = 8ull << 30;
        }
        break;
    default:
        break;
    }
}

static const char *const preset_names[TIER_PRESET__COUNT] = {
    "", "NONE", "MODEL_CHECKPOINT_RO", "MODEL_CHECKPOINT_RW", "DATASET_RO", "DATASET_RW"};

const char *tier_preset_name(uint8_t p)
{
    return p < TIER_PRESET__COUNT ? preset_names[p] : "";
}

int tier_preset_parse(const char *s)
{
    for (int i = 1; i < TIER_PRESET__COUNT; i++)
        if (strcmp(s, preset_names[i]) == 0)
            return i;
    return -EINVAL;
}

/* Apply the knobs @p d sets onto @p out. */
static void apply(const struct tier_dirpol *d, struct tier_effective *out)
{
    if (d->set & TIER_D_UPLOAD)
        out->upload_after_s = d->upload_after_s;
    if (d->set & TIER_D_EVICT)
        out->evict_after_s = d->evict_after_s;
    if (d->set & TIER_D_KEEP)
        out->keep_local = d->keep_local != 0;
    if (d->set & TIER_D_PRIO)
        out->evict_priority = d->evict_priority;
    if (d->set & TIER_D_WHOLE)
        out->whole_file = d->whole_file != 0;
    if (d->set & TIER_D_DIRPF)
        out->dir_prefetch = d->dir_prefetch != 0;
    if (d->set & TIER_D_RO)
        out->read_only = d->read_only != 0;
    if (d->set & TIER_D_RA)
        out->read_ahead = d->read_ahead;
    if (d->set & TIER_D_CHUNK)
        out->chunk_size = d->chunk_size;
    if (d->set & TIER_D_STREAMS)
        out->streams = d->streams;
    if (d->set & TIER_D_DIRTY)
        out->dirty_bound = d->dirty_bound;
}

/* One level: its preset's knobs, then its own. At the bucket's level the policy
 * record holds the upload delay (a preset's is written there when the policy is
 * set without one), so the bucket's preset leaves it. */
static void level(const struct tier_dirpol *d, bool bucket, struct tier_effective *out)
{
    if (!d)
        return;
    if ((d->set & TIER_D_PRESET) && d->preset != TIER_PRESET_UNSET) {
        struct tier_dirpol pk;
        tier_preset_knobs(d->preset, &pk);
        if (bucket)
            pk.set &= (uint16_t)~TIER_D_UPLOAD;
        apply(&pk, out);
        out->preset = d->preset;
    }
    apply(d, out);
}

bool tier_dirpol_dirty(const struct tier_dirpol *d, uint64_t *bound)
{
    *bound = 0;
    if (d->set & TIER_D_DIRTY) {
        *bound = d->dirty_bound;
        return true;
    }
    if ((d->set & TIER_D_PRESET) && d->preset != TIER_PRESET_UNSET) {
        struct tier_dirpol pk;
        tier_preset_knobs(d->preset, &pk);
        *bound = pk.dirty_bound;
        return (pk.set & TIER_D_DIRTY) != 0;
    }
    return false;
}

void tier_effective_of(const struct tier_policy *b, const struct tier_dirpol *be,
                       const struct tier_dirpol *d, struct tier_effective *out)
{
    memset(out, 0, sizeof(*out));
    out->upload_after_s = b->upload_after_s;
    out->evict_after_s = b->evict_after_s;
    out->evict_priority = TIER_PRIO_NORMAL;
    out->whole_file = true;
    out->chunk_size = TIER_CHUNK_DEFAULT;
    level(be, true, out);
    level(d, false, out);
}

int tier_dirpol_validate(const struct tier_dirpol *d, char *why, size_t whylen)
{
    const char *m = NULL;
    if (d->dir == 0)
        m = "a directory is required";
    else if (d->set & ~TIER_D__KNOWN)
        m = "unknown fields";
    else if (d->upload_after_s > TIER_UPLOAD_AFTER_MAX)
        m = "upload_after_s must be 0..2592000";
    else if (d->evict_after_s > TIER_EVICT_AFTER_MAX)
        m = "evict_after_s must be 0..31536000";
    else if (d->keep_local > 1 || d->whole_file > 1 || d->dir_prefetch > 1 || d->read_only > 1)
        m = "keep_local, whole_file, dir_prefetch and read_only are true or false";
    else if (d->evict_priority > TIER_PRIO_HIGH)
        m = "evict_priority is low, normal or high";
    else if (d->preset >= TIER_PRESET__COUNT || ((d->set & TIER_D_PRESET) && !d->preset))
        m = "preset is NONE, MODEL_CHECKPOINT_RO, MODEL_CHECKPOINT_RW, DATASET_RO or DATASET_RW";
    else if (d->read_ahead > TIER_RA_MAX)
        m = "recall.read_ahead must be 0..1073741824 bytes";
    else if ((d->set & TIER_D_CHUNK) && d->chunk_size &&
             (d->chunk_size < TIER_CHUNK_MIN || d->chunk_size > TIER_CHUNK_MAX ||
              d->chunk_size % TIER_CHUNK_MIN))
        m = "recall.chunk_size must be 0 (the daemon's) or 1 MiB .. 16 MiB, a multiple of 1 MiB";
    else if (d->streams > TIER_STREAMS_MAX)
        m = "recall.streams must be 0..64 (0: as many as the recall threads)";
    if (!m)
        return 0;
    if (why)
        snprintf(why, whylen, "%s", m);
    return -EINVAL;
}

size_t tier_dirs_encode(const struct tier_dirpol *v, size_t n, uint8_t *out)
{
    if (n > TIER_DIRPOL_MAX + 1)
        n = TIER_DIRPOL_MAX + 1;
    out[0] = 1;
    out[1] = 0;
    put16(out + 2, (uint16_t)n);
    uint8_t *q = out + 4;
    for (size_t i = 0; i < n; i++, q += TIER_DIRPOL_LEN) {
        memset(q, 0, TIER_DIRPOL_LEN);
        put16(q, TIER_DIRPOL_LEN);
        meta_be64_put(q + 2, v[i].dir);
        q[10] = (uint8_t)v[i].set;
        q[11] = v[i].keep_local;
        q[12] = v[i].evict_priority;
        q[13] = (uint8_t)(v[i].set >> 8);
        meta_be32_put(q + 14, v[i].upload_after_s);
        meta_be32_put(q + 18, v[i].evict_after_s);
        q[22] = v[i].preset;
        q[23] = v[i].whole_file;
        q[24] = v[i].dir_prefetch;
        q[25] = v[i].read_only;
        meta_be32_put(q + 26, v[i].read_ahead);
        meta_be32_put(q + 30, v[i].chunk_size);
        put16(q + 34, v[i].streams);
        meta_be64_put(q + 38, v[i].dirty_bound);
    }
    return (size_t)(q - out);
}

int tier_dirs_decode(const void *buf, size_t len, struct tier_dirpol *v)
{
    const uint8_t *b = buf, *end = b + len;
    if (len < 4 || b[0] == 0)
        return -EINVAL;
    if (b[0] > 1)
        return SRV_EBADVERSION;
    size_t n = get16(b + 2);
    if (n > TIER_DIRPOL_MAX + 1)
        return -EINVAL;
    const uint8_t *q = b + 4;
    for (size_t i = 0; i < n; i++) {
        if (end - q < 2)
            return -EINVAL;
        size_t el = get16(q);
        if (el < 22 || (size_t)(end - q) < el)
            return -EINVAL;
        memset(&v[i], 0, sizeof(v[i]));
        v[i].dir = meta_be64_get(q + 2);
        v[i].set = (uint16_t)((q[10] | q[13] << 8) & TIER_D__KNOWN);
        v[i].keep_local = q[11];
        v[i].evict_priority = q[12];
        v[i].upload_after_s = meta_be32_get(q + 14);
        v[i].evict_after_s = meta_be32_get(q + 18);
        if (el >= TIER_DIRPOL_LEN) {
            v[i].preset = q[22];
            v[i].whole_file = q[23];
            v[i].dir_prefetch = q[24];
            v[i].read_only = q[25];
            v[i].read_ahead = meta_be32_get(q + 26);
            v[i].chunk_size = meta_be32_get(q + 30);
            v[i].streams = get16(q + 34);
            v[i].dirty_bound = meta_be64_get(q + 38);
        } else {
            v[i].set &= TIER_D_UPLOAD | TIER_D_EVICT | TIER_D_KEEP | TIER_D_PRIO;
        }
        if (tier_dirpol_validate(&v[i], NULL, 0) < 0)
            return -EINVAL;
        q += el;
    }
    return (int)n;
}

const char *tier_prio_name(uint8_t prio)
{
    return prio == TIER_PRIO_LOW ? "low" : prio == TIER_PRIO_HIGH ? "high" : "normal";
}

int tier_prio_parse(const char *s)
{
    if (strcmp(s, "low") == 0)
        return TIER_PRIO_LOW;
    if (strcmp(s, "normal") == 0)
        return TIER_PRIO_NORMAL;
    if (strcmp(s, "high") == 0)
        return TIER_PRIO_HIGH;
    return -EINVAL;
}
