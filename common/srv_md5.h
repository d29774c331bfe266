/* SPDX-License-Identifier: Apache-2.0
 * srv_md5: MD5 (RFC 1321) for S3 ETags, hashed across concurrent callers.
 *
 * An ETag is the MD5 of a whole body, and MD5 is a chain: one stream cannot
 * be hashed in parallel. Many streams can: a multi-buffer kernel runs the
 * MD5 rounds of 16 streams at once in the lanes of AVX-512 registers (8 with
 * AVX2), for about the cost of one. Large updates (srv_md5_update of at least
 * SRV_MD5_MB_MIN bytes) therefore join a shared hasher: the first caller
 * hashes, in steps, the blocks of every caller waiting at that moment, each
 * in its own lane; callers arriving meanwhile take a free lane at the next
 * step; a caller whose blocks are done returns at once and hands the hashing
 * of the others to one of them. A caller alone hashes its own blocks with
 * the scalar code, as it would without any of this. No thread is started and
 * none waits on anything but the other callers' hashing.
 * Thread: any; one struct srv_md5 is used by one thread at a time. */
#ifndef SRV_MD5_H
#define SRV_MD5_H

#include <stddef.h>
#include <stdint.h>

#define SRV_MD5_LEN 16
#define SRV_MD5_MB_MIN (16u * 1024) /* updates at least this large may share the hasher */

/** A running MD5. Plain data: copy it to fork a hash. */
struct srv_md5 {
    uint32_t h[4];
    uint64_t nbytes; /* bytes hashed so far */
    uint8_t buf[64]; /* bytes of an incomplete block */
    uint32_t nbuf;
};

void srv_md5_init(struct srv_md5 *m);
/** Hash @p len more bytes of @p data (may be NULL when @p len is 0). */
void srv_md5_update(struct srv_md5 *m, const void *data, size_t len);
/** The digest of everything hashed (@p m may not be updated afterwards). */
void srv_md5_final(struct srv_md5 *m, uint8_t out[SRV_MD5_LEN]);
/** MD5 of one buffer. */
void srv_md5(const void *data, size_t len, uint8_t out[SRV_MD5_LEN]);

/** What the shared hasher did since the start (for metrics and tests). */
struct srv_md5_stats {
    uint64_t steps;       /* kernel steps run with two or more lanes busy */
    uint64_t lane_blocks; /* 64-byte blocks hashed in those steps */
    uint64_t solo_blocks; /* blocks a caller hashed alone (scalar) in the hasher */
};
void srv_md5_stats_get(struct srv_md5_stats *out);
/** Lanes of the multi-buffer kernel in use: 16 (AVX-512), 8 (AVX2), 1 (none). */
int srv_md5_lanes(void);

/* Tests: pick the kernel (16, 8 or 1 lanes). @return 0, or -1 when this CPU
 * cannot run it. Not while hashes are running. */
int srv__md5_use_lanes(int lanes);
/* Tests: hash @p n blocks of each of @p lanes streams (states @p h[i], data
 * @p p[i]) with the kernel in use, all at once. */
void srv__md5_kernel(uint32_t *const h[], const uint8_t *const p[], int lanes, size_t n);

#endif
