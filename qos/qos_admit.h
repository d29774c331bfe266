/* SPDX-License-Identifier: Apache-2.0
 * qos_admit: QoS admission before a request is dispatched.
 *
 * Each tenant may have a policy (stored in the core's META_REC_QOS table,
 * managed through the admin API) capping read and write bandwidth and read,
 * write and metadata operations per second; a tenant without a policy is
 * unlimited. Every request asks qos_admit() first. When the tenant's token
 * buckets allow it, go() runs at once, inside qos_admit(). Otherwise the
 * request joins the tenant's FIFO and go() runs later from an event timer on
 * the caller's event_base: a waiting request never blocks a thread. A request
 * that waits longer than max_wait_ms, or finds the queue full, gets
 * SRV_ETHROTTLE (S3 SlowDown / NFS3ERR_JUKEBOX).
 *
 * Minimum guarantees: when the daemon knows its capacity (qos_config cap_*),
 * every request also draws from daemon-wide buckets at that capacity. A
 * request whose tenant (or user) has a guarantee for it goes at once while its
 * guarantee bucket (at the minimum rate) holds tokens, even when the
 * daemon-wide bucket is empty; the others wait for capacity. So under
 * contention guaranteed traffic goes first, up to its minimum.
 *
 * Policy changes apply at once to waiting and new requests.
 * Not yet built: per-bucket/per-directory policies.
 * Thread: qos_admit from the loop thread that owns @p base; qos_cancel
 * preferably from that thread too (from another it is safe but waits for a
 * timer callback of that request that is running); the rest from any thread. */
#ifndef QOS_ADMIT_H
#define QOS_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

struct core;
struct core_principal;
struct event_base;
struct qos;

enum qos_class { QOS_READ = 0, QOS_WRITE = 1, QOS_META = 2 };

struct qos_config {
    bool enabled;        /* false: every request is admitted at once */
    uint32_t max_wait_ms; /* longest wait before SRV_ETHROTTLE; 0 = 30000 */
    uint32_t queue_max;  /* most waiters per tenant; 0 = 4096 */
    /* Daemon capacity for guarantees; 0 = unknown (no daemon-wide limit). */
    uint64_t cap_read_bps, cap_write_bps, cap_iops;
    /* Test aid (config qos_shaping = false): qos_admit_piece admits whole
     * requests, which may put buckets into debt, as qos_admit does. */
    bool shaping_off;
};

/* Limits of one tenant (user 0) or of one user of a tenant; 0 = unlimited.
 * A user's requests must fit both the user's and the tenant's caps; they wait
 * in the user's queue, so one throttled user does not hold up the others.
 * Bursts: one second of the rate unless burst_ms says otherwise. */
struct qos_policy {
    uint32_t tenant;
    uint64_t user; /* 0 = the whole tenant */
    uint64_t read_bps, write_bps;
    uint64_t read_iops, write_iops, meta_iops;
    uint32_t burst_ms; /* 0 = 1000 */
    /* Guarantees (0 = none); effective only with a configured capacity. */
    uint64_t min_read_bps, min_write_bps, min_iops;
};

/** Load policies from the core. @p c may be NULL (no persistence; tests).
 * @return 0, -ENOMEM, SRV_ECORRUPT (a stored policy failed to decode; logged). */
int qos_open(struct qos **out, struct core *c, const struct qos_config *cfg);
/** Apply new settings (SIGHUP). */
void qos_configure(struct qos *q, const struct qos_config *cfg);
/** Fail every waiting request with SRV_ETHROTTLE, each on its own loop (call
 * before stopping the loops). */
void qos_drain(struct qos *q);
/** Free. Nothing may be waiting (qos_drain and the loops stopped). Safe on NULL. */
void qos_close(struct qos *q);

/** Admit a request of class @p cls moving @p bytes for principal @p p.
 * @return 0: go(arg, 0) has run (admitted now) or will run exactly once later
 *         on @p base with 0 (admitted) or SRV_ETHROTTLE (waited too long);
 *         SRV_ETHROTTLE: the tenant's queue is full, go never runs;
 *         -EINVAL: bad class or NULL go/base; -ENOMEM. */
int qos_admit(struct qos *q, const struct core_principal *p, enum qos_class cls, uint64_t bytes,
              struct event_base *base, void (*go)(void *arg, int err), void *arg);
/* qos_admit_piece flags */
#define QOS_PIECE_MORE 0x1 /* a later piece of an admitted request: no operation charged */

/** Shaping: admit the next piece of a request of class @p cls that still has
 * @p bytes to move, so that a large request flows at the admitted rate
 * instead of passing at once and leaving debt. The piece is at most @p bytes
 * and never larger than the smallest burst of the byte buckets the request
 * draws from: about 20 ms at the slowest of their rates, at least 4 KiB (so a
 * tenant's other requests queued behind a waiting piece wait little, and the
 * rate is smooth); it is all of @p bytes when they are not
 * limited (QoS off, no policy, no byte cap) or when qos_config.shaping_off is
 * set. The first piece (flags 0) also charges the request's operation; later
 * ones (QOS_PIECE_MORE) charge bytes only. Each piece waits in the same FIFO
 * as whole requests and has its own max_wait_ms: a long transfer fails only
 * when one piece waits too long. The caller moves the piece, then asks for
 * the next one with the bytes left, until none are left.
 * @param[out] piece  bytes this call admits; set before go may run (0 when
 *                    @p bytes is 0: then only the operation is charged)
 * @return as qos_admit; -EINVAL also for a NULL @p piece or unknown @p flags. */
int qos_admit_piece(struct qos *q, const struct core_principal *p, enum qos_class cls,
                    uint64_t bytes, unsigned flags, uint64_t *piece, struct event_base *base,
                    void (*go)(void *arg, int err), void *arg);
/** Whether admission may hold up requests of class @p cls of @p p: QoS is on
 * and a policy of its user or tenant caps that class (bytes or operations),
 * or a daemon capacity is configured. Front ends use it to keep fast paths
 * that touch data before admitting (an S3 GET of a small object) for the
 * principals QoS leaves alone. A hint: policies may change the next moment. */
bool qos_applies(struct qos *q, const struct core_principal *p, enum qos_class cls);
/** Withdraw a waiting request (its connection closed): go will not run.
 * @return 0, -ENOENT (not waiting: already admitted or never queued). */
int qos_cancel(struct qos *q, void *arg);

/** Set (persist and apply) a tenant's policy. @return 0, -EINVAL, -errno from the core. */
int qos_policy_set(struct qos *q, const struct qos_policy *pol);
/** Tenant-wide policy. @return 0, -ENOENT (no policy: unlimited). */
int qos_policy_get(struct qos *q, uint32_t tenant, struct qos_policy *out);
/** Policy of @p user of @p tenant (0 = tenant-wide). @return 0, -ENOENT. */
int qos_policy_get_user(struct qos *q, uint32_t tenant, uint64_t user, struct qos_policy *out);
/** Remove a tenant's policy (unlimited again). @return 0, -ENOENT. */
int qos_policy_delete(struct qos *q, uint32_t tenant);
/** Remove a user's policy (0 = tenant-wide). @return 0, -ENOENT. */
int qos_policy_delete_user(struct qos *q, uint32_t tenant, uint64_t user);
typedef int (*qos_policy_cb)(void *arg, const struct qos_policy *pol);
int qos_policy_list(struct qos *q, qos_policy_cb cb, void *arg);

/** The daemon's instance, for front ends (set by main; NULL = no QoS: admit
 * directly). */
struct qos *qos_global(void);
void qos_set_global(struct qos *q);

/** Clock used by admission (monotonic µs); tests may replace it. */
extern uint64_t (*qos_clock_us)(void);

#endif
