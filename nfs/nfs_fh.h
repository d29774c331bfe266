/* SPDX-License-Identifier: Apache-2.0
 * nfs_fh: NFSv3 file handles.
 *
 * A handle is 32 opaque bytes (RFC 1813 allows 64):
 *   0  magic "S3" (2), version (1), reserved 0 (1)
 *   4  export id (be32)     8  tenant id (be32)
 *   12 inode (be64)         20 generation (be32)
 *   24 SipHash-2-4(key, bytes 0..23), 8 bytes little-endian
 * The key is per store (kept in the core's config table), so handles stay
 * valid across restarts while a client cannot forge one for another
 * export, tenant or inode: any change to bytes 0..23 breaks the MAC.
 * Thread: any; pure functions. */
#ifndef NFS_FH_H
#define NFS_FH_H

#include <stddef.h>
#include <stdint.h>

#define NFS_FH_LEN 32
#define NFS_FH_KEYLEN 32
#define NFS_FH_VERSION 2 /* 1: HMAC-SHA256 MAC (before any release) */

struct nfs_fh {
    uint32_t export_id;
    uint32_t tenant;
    uint64_t ino;
    uint32_t gen;
};

/** SipHash-2-4 of @p msg under the 128-bit @p key (exposed for its test vectors). */
uint64_t nfs_fh_siphash(const uint8_t key[16], const void *msg, size_t len);
/** Encode @p fh into @p out (NFS_FH_LEN bytes), signed with @p key. */
void nfs_fh_encode(const uint8_t key[NFS_FH_KEYLEN], const struct nfs_fh *fh,
                   uint8_t out[NFS_FH_LEN]);
/** Decode and verify a handle received from a client.
 * @return 0, -EBADMSG (wrong length, magic or version: NFS3ERR_BADHANDLE),
 *         SRV_ESTALE (MAC mismatch: forged, altered or from another store). */
int nfs_fh_decode(const uint8_t key[NFS_FH_KEYLEN], const void *data, size_t len,
                  struct nfs_fh *out);

#endif
