/* SPDX-License-Identifier: Apache-2.0
 * nlm_host: the client hosts that hold NLM locks ("monitored hosts"), kept
 * in the store so that a restarted server can tell them to reclaim, and the
 * grace period in which they do.
 *
 * A host (its NLM caller_name) is remembered, durably, before its first lock
 * is granted (or its first blocking request is queued), together with the
 * address it called from; it is forgotten once it has held no lock and waited
 * for none for 10 s (after UNLOCK, CANCEL, a refused GRANTED callback: the
 * delay spares a client that locks and unlocks in a loop two store writes per
 * lock), and at once on FREE_ALL or an SM_NOTIFY from it (it rebooted: its
 * locks are void), when that comes from the address it was remembered with.
 *
 * At start, when hosts are remembered, the server (1) opens a grace period of
 * nlm_grace_period seconds in which LOCK with reclaim=true is granted (when it
 * does not conflict with another reclaim) while other LOCKs and TESTs answer
 * NLM4_DENIED_GRACE_PERIOD, and (2) sends each remembered host's status
 * monitor an SM_NOTIFY (mon_name: our address as that host reaches us; state:
 * our new NSM state), found through the host's portmapper, asynchronously
 * (nlm_notify_send in nlm_grant.c). A host that cannot be reached is logged
 * and kept for the next start, until it calls again or for at most
 * NLM_NOTIFY_TRIES starts in a row; a notified host that holds nothing when
 * the grace period ends is forgotten. With no host remembered there is no
 * grace period, and when every notification failed and nothing was reclaimed
 * it ends at once (no client knows of the restart, so none will reclaim). A
 * reclaim outside the grace period answers NLM4_DENIED_GRACE_PERIOD (the lock
 * may have been taken by another client meanwhile), as Linux's lockd does.
 *
 * Store: the core's config table (t_config), key "nlm.host." + caller_name,
 * value NLM_HOST_REC_LEN bytes (docs/on-disk-format.md).
 * Thread: nlm_hosts_new/free/load/start on the main thread; hold, unhold,
 * check and forget on workers (they write to the store); the rest any. A
 * periodic tick (1 s, loop 0) drops lingering hosts and ends the grace
 * period. */
#ifndef NLM_HOST_H
#define NLM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct nfs_server;
struct nfs_req;
struct nlm_hosts;

#define NLM_HOST_KEY_PREFIX "nlm.host."
#define NLM_HOST_NAME_MAX 255 /* longest caller_name remembered (a host name) */
#define NLM_HOST_REC_LEN 20
#define NLM_HOST_REC_VERSION 1
#define NLM_NOTIFY_TRIES 3 /* starts in a row a host may be unreachable before it is given up */

/* ---- pure helpers (unit-tested) ---- */

/** Store key of host @p caller into @p key (not NUL-terminated).
 * @return the key length, -ENAMETOOLONG (caller longer than NLM_HOST_NAME_MAX
 *         or @p keylen too small), -EINVAL (empty name). */
int nlm_host_key(const char *caller, char *key, size_t keylen);
/** Encode the record of a host reached at @p addr (port ignored; an IPv4
 * address mapped in IPv6 is stored as IPv4) whose SM_NOTIFY failed at the
 * last @p tries starts: byte 0 version (1), byte 1 the family (4 or 6),
 * byte 2 tries, byte 3 zero, bytes 4-19 the address (IPv4 in 4-7).
 * @return NLM_HOST_REC_LEN, -EAFNOSUPPORT (not IPv4/IPv6), -ERANGE (tries > 255). */
int nlm_host_rec_encode(const struct sockaddr_storage *addr, unsigned tries,
                        uint8_t out[NLM_HOST_REC_LEN]);
/** Decode a record into @p addr (port 0) and @p tries. @return 0, -EINVAL
 * (bad length, version, family or padding). */
int nlm_host_rec_decode(const void *val, size_t len, struct sockaddr_storage *addr,
                        unsigned *tries);
/** Same host address (family and address; ports and IPv4-in-IPv6 mapping ignored)? */
bool nlm_addr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/** @p a as text, without port, an IPv4-mapped IPv6 address as IPv4 ("?" if unknown). */
void nlm_addr_text(const struct sockaddr_storage *a, char *buf, size_t len);
/** @p a (port ignored) as the 16 bytes a lock keeps of the address it came
 * from (nfs_lock.h NFS_LOCK_FROM_LEN): IPv6, an IPv4 address in its
 * IPv4-mapped form, so both spellings of one IPv4 client are one key; zero
 * for another family. */
void nlm_addr_key(const struct sockaddr_storage *a, uint8_t out[16]);
/** Must a LOCK be refused with NLM4_DENIED_GRACE_PERIOD? A plain lock in the
 * grace period, or a reclaim outside it. */
static inline bool nlm_grace_refuses(bool in_grace, bool reclaim)
{
    return in_grace != reclaim;
}

/* ---- the table of the server ---- */

/** @param grace_s the grace period after a restart (0: none). @return 0, -ENOMEM. */
int nlm_hosts_new(struct nlm_hosts **out, int grace_s);
/** Safe on NULL. */
void nlm_hosts_free(struct nlm_hosts *h);
/** Read the remembered hosts from the store (at start, before serving).
 * Malformed records are logged and skipped. @return 0 or the store's error. */
int nlm_hosts_load(struct nfs_server *s);
/** Once serving: open the grace period and notify every remembered host. */
void nlm_hosts_start(struct nfs_server *s);
/** Is the grace period running? */
bool nlm_grace_active(struct nfs_server *s);
/** Remember host @p caller of the call (durable on return) and pin it until
 * nlm_host_unhold. @return 0, -ENAMETOOLONG/-EINVAL (caller name), -ENOMEM,
 * or the store's error. */
int nlm_host_hold(struct nfs_req *r, const char *caller);
/** Unpin; then forget the host if it holds nothing (when @p check). */
void nlm_host_unhold(struct nfs_server *s, const char *caller, bool check);
/** Forget host @p caller if it holds no lock and waits for none (and is not
 * waiting to be notified). */
void nlm_host_check(struct nfs_server *s, const char *caller);
/** Note that host @p caller may hold nothing now (a refused GRANTED
 * callback, on a loop thread): no store write; the tick drops it later. */
void nlm_host_idle_mark(struct nfs_server *s, const char *caller);
/** A reclaim was granted (keeps the grace period from ending early). */
void nlm_host_reclaimed(struct nfs_server *s);
/** FREE_ALL or SM_NOTIFY (@p proc, for the log) of the call @p r, naming host
 * @p caller: its previous incarnation's locks are void. Only what the host
 * did from the call's own address goes: its locks and blocked requests from
 * that address are released and forgotten, and the host is forgotten (its
 * record dropped from the store) when it was remembered from that address.
 * Whatever it holds from other addresses stays, and the call is logged as
 * refused for it (WARN), so a client cannot release another host's locks by
 * naming it (docs/nfs.md). Then the blocked requests are tried again. */
void nlm_host_release(struct nfs_req *r, const char *caller, const char *proc);
/** Number of remembered hosts (tests, logs). */
size_t nlm_hosts_count(struct nfs_server *s);
/** Drop the grace timer if it runs on the calling loop (nfs_server_stop). */
void nlm_hosts_close_here(struct nfs_server *s);

/* ---- nlm_grant.c: SM_NOTIFY delivery ---- */

/** Result of one SM_NOTIFY (on a loop thread): @p why NULL when delivered,
 * else the reason; @p mon_name the name sent (may be empty). */
typedef void (*nlm_notify_done_fn)(struct nfs_server *s, void *arg, const char *why,
                                   const char *mon_name);
/** Send SM_NOTIFY(mon_name, @p state) to the status monitor of @p host
 * (portmapper on TCP 111, then NSM v1 over TCP), asynchronously; @p done is
 * called once, also when the server stops first. @return 0, -ENOMEM (then
 * @p done is not called). */
int nlm_notify_send(struct nfs_server *s, const struct sockaddr_storage *host, int32_t state,
                    nlm_notify_done_fn done, void *arg);
/** Number of remembered blocked requests of host @p caller. */
size_t nlm_block_host_count(struct nfs_server *s, const char *caller);

#endif
