/* SPDX-License-Identifier: Apache-2.0
 * nfs_lock: the byte-range lock table behind NLM v4 (POSIX record locks
 * taken by NFSv3 clients through their lock manager).
 *
 * A lock belongs to an owner (the client's caller_name, its svid and owner
 * handle) and covers [offset, offset+len) of one file, named by (tenant,
 * inode); len 0 means "to the end of the file, whatever it becomes". Shared
 * locks of different owners may overlap; an exclusive lock conflicts with
 * any other owner's lock on an overlapping range. An owner's new lock
 * replaces its own locks on the range (upgrading, downgrading, splitting),
 * and unlocking part of a lock splits it, as fcntl(2) does.
 * The table lives in memory: it does not survive a restart (clients reclaim
 * their locks in the grace period that follows one: nlm_host.h).
 * Thread: any (one mutex). */
#ifndef NFS_LOCK_H
#define NFS_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NFS_LOCK_OH_MAX 1024
#define NFS_LOCK_FROM_LEN 16 /* a client address: IPv6, an IPv4 one in its IPv4-mapped form */

struct nfs_locks;

struct nfs_lock_owner {
    const char *caller; /* client host name (NLM caller_name) */
    size_t callerlen;
    int32_t svid;       /* client process id */
    const void *oh;     /* owner handle */
    size_t ohlen;
    /* The address the LOCK came from (NFS_LOCK_FROM_LEN bytes), kept with the
     * lock so that only that address may free it by host (nfs_locks_free_host);
     * NULL: none. Not part of the owner's identity. */
    const uint8_t *from;
};

/* A conflicting lock, as NLM4_TEST reports it. */
struct nfs_lock_holder {
    bool exclusive;
    int32_t svid;
    uint8_t oh[NFS_LOCK_OH_MAX];
    size_t ohlen;
    uint64_t offset, len; /* len 0: to the end of the file */
};

/** @return 0, -ENOMEM. */
int nfs_locks_new(struct nfs_locks **out);
/** Drop every lock. Safe on NULL. */
void nfs_locks_free(struct nfs_locks *t);
/** Take a lock. @param[out] conflict the first conflicting lock when -EAGAIN (may be NULL).
 * @return 0 (granted), -EAGAIN (conflict), -EINVAL (ohlen too large), -ENOMEM. */
int nfs_locks_lock(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                   const struct nfs_lock_owner *o, bool exclusive, uint64_t offset, uint64_t len,
                   struct nfs_lock_holder *conflict);
/** Would this lock be granted? Nothing changes.
 * @return 0 (it would), -EAGAIN (conflict; @p conflict filled when non-NULL). */
int nfs_locks_test(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                   const struct nfs_lock_owner *o, bool exclusive, uint64_t offset, uint64_t len,
                   struct nfs_lock_holder *conflict);
/** Release the owner's locks on the range (splitting them). @return 0, -ENOMEM (a split
 * needed memory; nothing was released). */
int nfs_locks_unlock(struct nfs_locks *t, uint32_t tenant, uint64_t ino,
                     const struct nfs_lock_owner *o, uint64_t offset, uint64_t len);
/** Release the locks of client host @p caller (NLM FREE_ALL, NSM SM_NOTIFY)
 * that were taken from address @p from (NFS_LOCK_FROM_LEN bytes; NULL: all of
 * them). A lock keeps the address of the LOCK that made it; the parts left of
 * a split keep the address of the lock they were part of.
 * @param[out] kept the number of @p caller's locks from other addresses, left
 *             in place (may be NULL).
 * @return the number of locks released. */
size_t nfs_locks_free_host(struct nfs_locks *t, const char *caller, size_t callerlen,
                           const uint8_t *from, size_t *kept);
/** Number of locks held by client host @p caller (is it still to be remembered?). */
size_t nfs_locks_host_count(struct nfs_locks *t, const char *caller, size_t callerlen);
/** Number of locks held (tests, metrics). */
size_t nfs_locks_count(struct nfs_locks *t);

#endif
