/* SPDX-License-Identifier: Apache-2.0
 * nfs_drc: duplicate request cache for non-idempotent NFS procedures.
 *
 * A client that retransmits a CREATE, REMOVE, RENAME... (after a timeout or
 * a reconnect) must get the reply of the first execution, not a second
 * execution (which would answer EXIST or NOENT). Entries are keyed by the
 * client's IP address (not its port, which changes on reconnect), the xid,
 * the program/procedure and a checksum of the arguments; the cache keeps
 * the encoded reply record. Least recently inserted entries are evicted
 * once the capacity is reached; in-progress entries are never evicted.
 * Thread: any (one mutex). */
#ifndef NFS_DRC_H
#define NFS_DRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct nfs_drc;

struct nfs_drc_key {
    uint8_t addr[16]; /* IPv4 as v4-mapped IPv6 */
    uint32_t xid;
    uint32_t prog, proc;
    uint32_t sum; /* checksum of the argument bytes */
};

enum nfs_drc_state {
    NFS_DRC_NEW = 0,    /* first time seen: now recorded as in progress; execute it */
    NFS_DRC_INPROGRESS, /* the original is still executing: drop the retransmission */
    NFS_DRC_DONE,       /* answered before: resend the cached reply */
};

/** @return 0, -ENOMEM. */
int nfs_drc_new(struct nfs_drc **out, size_t capacity);
/** Free every entry. Safe on NULL. */
void nfs_drc_free(struct nfs_drc *d);
/** Fill @p k from the peer address, call identity and argument bytes. */
void nfs_drc_key_make(struct nfs_drc_key *k, const struct sockaddr *sa, uint32_t xid,
                      uint32_t prog, uint32_t proc, const void *args, size_t argslen);
/** Look up @p k; when absent, record it as in progress.
 * @param[out] reply, len on NFS_DRC_DONE: a heap copy of the cached reply (free()).
 * @return the state (NFS_DRC_NEW also when memory is short: then nothing is recorded). */
enum nfs_drc_state nfs_drc_start(struct nfs_drc *d, const struct nfs_drc_key *k, void **reply,
                                 size_t *len);
/** Store the reply of an in-progress entry (copied). @p reply NULL forgets the entry. */
void nfs_drc_finish(struct nfs_drc *d, const struct nfs_drc_key *k, const void *reply,
                    size_t len);
/** Number of entries (for tests and metrics). */
size_t nfs_drc_count(struct nfs_drc *d);

#endif
