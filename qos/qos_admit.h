/* SPDX-License-Identifier: Apache-2.0
 * qos_admit: QoS admission before a request is dispatched, over a hierarchy
 * of levels.
 *
 * Levels (each may hold a policy, stored in the core's META_REC_QOS table and
 * managed through the admin API):
 *   tenant -> bucket -> directories (outermost first) -> user
 * where "user" is the S3 user of the request's access key, or for NFS the
 * tenant user whose user policy names the call's AUTH_UNIX uid, else the
 * tenant's NFS default class. A directory policy covers everything below the
 * directory (its inode is found among the ancestors of what the request
 * touches, the way the core finds quota'd directories). A request is
 * admitted only when every level on its path that has a policy admits it
 * (caps: read/write bandwidth, read/write/metadata IOPS, burst). When every
 * level allows it and nothing is waiting that the scheduler must weigh it
 * against (a request of its tenant; with a daemon capacity, any request),
 * go() runs at once, inside qos_admit_at(); when the scheduler picks it
 * among waiters at once, too. Otherwise the
 * request joins the FIFO of the deepest level on its path that has a policy
 * (its "home") and go() runs later on the caller's event_base: a waiting
 * request never blocks a thread. A request that waits longer than
 * max_wait_ms, or finds its tenant's queue full, gets SRV_ETHROTTLE (S3
 * SlowDown / NFS3ERR_JUKEBOX).
 *
 * Sharing (dmClock-style reservation, weight, limit): every admitted request
 * also draws from daemon-wide capacity buckets (read bytes, write bytes,
 * operations) whenever a capacity is known (qos_config cap_*: configured,
 * always; probe_*: measured by the daemon at start, while a tenant has a
 * minimum). Among the heads of the waiting queues the scheduler admits
 * first those covered by a minimum (reservation): a
 * dimension is covered while the tenant's minimum bucket, and the minimum
 * bucket of every deeper level on the path that has one, hold tokens; such
 * requests go even when the daemon-wide bucket is empty. A sub-tenant
 * minimum is carved out of its tenant's minimum (it never reaches beyond it),
 * so what a tenant admin sets cannot take capacity from another tenant. The
 * rest is shared by weight: start-time fair queueing tags, first between
 * tenants (tenant weight), then between the queues of one tenant (the home
 * level's weight). Cost of a request for tags: 1 + bytes / 64 KiB (a later
 * piece of a shaped request: bytes / 64 KiB).
 *
 * Shaping: qos_admit_piece_at admits a large transfer piece by piece, each
 * piece no larger than the smallest burst on its path, so no level goes into
 * debt and every level is charged for every byte before it moves.
 *
 * Policy changes (set or delete, at any level) apply at once to waiting and
 * new requests: the path of every waiting request is rebuilt.
 * Thread: qos_admit/qos_admit_at/qos_admit_piece(_at) from the loop thread
 * that owns @p base; qos_cancel preferably from that thread too (from another
 * it is safe but waits for a timer callback of that request that is
 * running); the rest from any thread. With a scope, qos_admit_at,
 * qos_admit_piece_at and qos_applies_at may read the core's metadata map
 * (bucket lookup, parent walk) on the calling thread, as core_key_peek does;
 * they never wait for a writer. */
#ifndef QOS_ADMIT_H
#define QOS_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct core;
struct core_principal;
struct event_base;
struct qos;

enum qos_class { QOS_READ = 0, QOS_WRITE = 1, QOS_META = 2 };

struct qos_config {
    bool enabled;         /* false: every request is admitted at once */
    uint32_t max_wait_ms; /* longest wait before SRV_ETHROTTLE; 0 = 30000 */
    uint32_t queue_max;   /* most waiters per tenant; 0 = 4096 */
    /* Daemon capacity for guarantees, configured (qos_capacity_*): a hard
     * daemon-wide limit whenever nonzero; 0 = not configured. */
    uint64_t cap_read_bps, cap_write_bps, cap_iops;
    /* Measured capacity (qos_capacity.h); 0 = not measured. Used for a
     * dimension whose cap_* is 0, and only while some tenant has a minimum
     * (so a measurement never limits a daemon that guarantees nothing). */
    uint64_t probe_read_bps, probe_write_bps, probe_iops;
    /* Test aid (config qos_shaping = false): qos_admit_piece_at admits whole
     * requests, which may put buckets into debt, as qos_admit_at does. */
    bool shaping_off;
    /* The system class's default policy (qos_system_set overrides it): caps
     * on background reads and writes (B/s) and metadata operations (op/s),
     * 0 = none; its weight against tenants (0 = QOS_SYSTEM_WEIGHT_DEFAULT). */
    uint64_t sys_read_bps, sys_write_bps, sys_meta_iops;
    uint32_t sys_weight;
};

/* The system class: the daemon's background work (the core's MD5 reads of
 * files NFS changed, the lifecycle worker's listings and removals, the tier
 * uploader's reads) is admitted as one more "tenant" of its own, with this
 * reserved id. Its policy has caps and a weight, never a minimum: under
 * contention it shares by weight what the tenants' minimums leave (the
 * scheduler serves requests covered by a minimum first), so it cannot take
 * a tenant's guarantee, and its caps bound it even when nobody else runs. */
#define QOS_SYSTEM_TENANT UINT32_MAX
#define QOS_SYSTEM_WEIGHT_DEFAULT 50

/* Levels of the hierarchy. */
enum qos_level {
    QOS_LEVEL_TENANT = 0, /* the whole tenant (id 0) */
    QOS_LEVEL_USER,       /* one user of the tenant (id: user id) */
    QOS_LEVEL_BUCKET,     /* one bucket (id: the bucket's inode) */
    QOS_LEVEL_DIR,        /* one directory and all below it (id: its inode) */
    QOS_LEVEL_NFS_DEFAULT /* NFS calls whose uid no user policy names (id 0) */
};
#define QOS_LEVEL__COUNT 5

#define QOS_WEIGHT_DEFAULT 100
#define QOS_WEIGHT_MAX 10000
#define QOS_POLICIES_PER_TENANT_MAX 4096 /* bucket, directory and user policies */

/* The policy of one level; 0 = unlimited / none. Bursts: one second of the
 * rate unless burst_ms says otherwise.
 * Identity: (tenant, level, id) where id is user for QOS_LEVEL_USER, dir for
 * QOS_LEVEL_DIR, bucket for QOS_LEVEL_BUCKET, else 0. For compatibility a
 * policy with level QOS_LEVEL_TENANT and a nonzero user is a user policy. */
struct qos_policy {
    uint32_t tenant;
    uint64_t user; /* QOS_LEVEL_USER: the user id */
    uint64_t read_bps, write_bps;
    uint64_t read_iops, write_iops, meta_iops;
    uint32_t burst_ms; /* 0 = 1000 */
    /* Minimums (reservations; 0 = none); effective only with a known daemon
     * capacity, and below the tenant level only inside the tenant's minimum. */
    uint64_t min_read_bps, min_write_bps, min_iops;
    /* ---- the hierarchy ---- */
    enum qos_level level;
    uint64_t bucket; /* QOS_LEVEL_BUCKET, QOS_LEVEL_DIR: the bucket's inode */
    uint64_t dir;    /* QOS_LEVEL_DIR: the directory's inode */
    bool has_uid;    /* QOS_LEVEL_USER: NFS calls with this uid are this user's */
    uint32_t uid;
    uint32_t weight; /* share of what is left, among siblings; 0 = QOS_WEIGHT_DEFAULT */
};

/* What a scope resolved to, kept by a front end for the pieces of one request
 * (qos_scope.memo), so that the bucket and the directories above the object
 * are looked up once per request, not once per piece. The caller zeroes it
 * when the request starts; qos fills it, and looks up again when the scope
 * passed with it changes (other bucket, key or inode pointers). */
#define QOS_MEMO_DIRS 16
struct qos_memo {
    bool valid;     /* filled (by the first call that resolved the scope) */
    bool dirs_done; /* the directories were resolved too, not only the bucket */
    uint8_t ndirs;
    uint64_t bucket;
    uint64_t dirs[QOS_MEMO_DIRS]; /* innermost first */
    /* the scope it was filled for (a scope that differs is looked up again) */
    const char *of_bucket, *of_key;
    size_t of_bucketlen, of_keylen;
    uint64_t of_ino;
};

/* What a front end knows of where a request lands, for qos_admit_at. Every
 * field is optional (zero: unknown). Pointers need to stay valid only during
 * the call. */
struct qos_scope {
    /* S3: the bucket by name and the object key inside it. */
    const char *bucket;
    size_t bucketlen;
    const char *key;
    size_t keylen;
    /* NFS: the inode the call works on (the file handle's) and the caller's
     * AUTH_UNIX uid (has_uid false: AUTH_NONE or unknown). */
    uint64_t ino;
    bool has_uid;
    uint32_t uid;
    /* Already resolved (tests, or a front end that has them at hand): the
     * bucket's inode and the directories above the object, innermost first.
     * Used instead of bucket/key/ino when bucket_ino is nonzero. */
    uint64_t bucket_ino;
    const uint64_t *dirs;
    size_t ndirs;
    /* Optional, the request's own: resolve bucket/key/ino once, then reuse
     * (a scope deeper than QOS_MEMO_DIRS directories is looked up every
     * time). A rename while the request runs is not seen, as for a request
     * waiting in a queue, whose scope is resolved when it arrives. */
    struct qos_memo *memo;
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

/** Admit a request of class @p cls moving @p bytes for principal @p p, at
 * the tenant and user levels only (the same as qos_admit_at with no scope).
 * @return as qos_admit_at. */
int qos_admit(struct qos *q, const struct core_principal *p, enum qos_class cls, uint64_t bytes,
              struct event_base *base, void (*go)(void *arg, int err), void *arg);
/** Admit a request of class @p cls moving @p bytes for principal @p p,
 * landing where @p s says (NULL: tenant and user levels only). Levels of the
 * scope that cannot be resolved (a bucket or inode that does not exist) are
 * left out: the request still passes the tenant and user levels.
 * @p bytes may be one piece of a larger transfer (call again per piece).
 * @return 0: go(arg, 0) has run (admitted now) or will run exactly once later
 *         on @p base with 0 (admitted) or SRV_ETHROTTLE (waited too long);
 *         SRV_ETHROTTLE: the tenant's queue is full, go never runs;
 *         -EINVAL: bad class, NULL go, or NULL base for a request that must
 *         wait (go never runs); -ENOMEM (go never runs). */
int qos_admit_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                 enum qos_class cls, uint64_t bytes, struct event_base *base,
                 void (*go)(void *arg, int err), void *arg);
/* qos_admit_piece_at flags */
#define QOS_PIECE_MORE 0x1 /* a later piece of an admitted request: no operation charged */

/** Shaping: admit the next piece of a request of class @p cls that still has
 * @p bytes to move, landing where @p s says (NULL: tenant and user levels
 * only, as qos_admit_at), so that a large request flows at the admitted rate
 * instead of passing at once and leaving debt. Every level on the request's
 * path is charged for each piece. The piece is at most @p bytes and never
 * larger than the smallest burst of the byte buckets the request draws from
 * (the caps of every level on its path: tenant, bucket, directories, user or
 * NFS default class; with a daemon capacity also the daemon-wide bucket and
 * the minimums on the path): about 20 ms at the slowest of their rates, at
 * least 4 KiB (so requests queued behind a waiting piece wait little, and the
 * rate is smooth); it is all of @p bytes when they are not limited (QoS off,
 * no policy on the path, no byte cap) or when qos_config.shaping_off is set.
 * The first piece (flags 0) also charges the request's operation; later ones
 * (QOS_PIECE_MORE) charge bytes only. Each piece waits in the same FIFO as
 * whole requests and has its own max_wait_ms: a long transfer fails only when
 * one piece waits too long. The caller moves the piece, then asks for the
 * next one with the bytes left, until none are left.
 * @param[out] piece  bytes this call admits; set before go may run (0 when
 *                    @p bytes is 0: then only the operation is charged)
 * @return as qos_admit_at; -EINVAL also for a NULL @p piece or unknown
 *         @p flags. */
int qos_admit_piece_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                       enum qos_class cls, uint64_t bytes, unsigned flags, uint64_t *piece,
                       struct event_base *base, void (*go)(void *arg, int err), void *arg);
/** qos_admit_piece_at with no scope (tenant and user levels only). */
int qos_admit_piece(struct qos *q, const struct core_principal *p, enum qos_class cls,
                    uint64_t bytes, unsigned flags, uint64_t *piece, struct event_base *base,
                    void (*go)(void *arg, int err), void *arg);
/** Whether admission may hold up requests of class @p cls of @p p landing
 * where @p s says (NULL: tenant and user levels only): QoS is on and a
 * policy of some level on the path caps that class (bytes or operations), or
 * a daemon capacity is known. Front ends use it to keep fast paths that touch
 * data before admitting (an S3 GET of a small object) for the requests QoS
 * leaves alone. A hint: policies may change the next moment. Resolves the
 * scope as qos_admit_at does (same thread rules). */
bool qos_applies_at(struct qos *q, const struct core_principal *p, const struct qos_scope *s,
                    enum qos_class cls);
/** qos_applies_at with no scope. */
bool qos_applies(struct qos *q, const struct core_principal *p, enum qos_class cls);
/** Withdraw a waiting request (its connection closed): go will not run.
 * @return 0, -ENOENT (not waiting: go already ran or it never queued). */
int qos_cancel(struct qos *q, void *arg);

/* Why a request was refused with SRV_ETHROTTLE, for the protocol's answer
 * and the logs (qos_last_refusal). */
enum qos_refusal_why {
    QOS_WHY_LIMIT = 0,  /* it waited past max_wait_ms, held back by a limit of one level */
    QOS_WHY_CAPACITY,   /* ... by the daemon's capacity (no level's own cap held it) */
    QOS_WHY_QUEUE_FULL, /* its tenant's wait queue was full (queue_max) */
    QOS_WHY_STOPPING    /* the daemon is stopping (qos_drain) */
};

struct qos_refusal {
    enum qos_refusal_why why;
    enum qos_class cls;
    uint32_t tenant;      /* QOS_SYSTEM_TENANT: the system class */
    enum qos_level level; /* QOS_WHY_LIMIT: the level that held it back; QUEUE_FULL: tenant */
    uint64_t id;          /* that level's id as the metrics name it (user id, bucket or directory
                           * inode; 0 for the tenant and the NFS default class) */
};

/** Why the last request refused on this thread was refused: valid inside a
 * go(arg, SRV_ETHROTTLE) callback, and right after qos_admit* returned
 * SRV_ETHROTTLE on this thread (until the next refusal on it). */
void qos_last_refusal(struct qos_refusal *out);
/** Describe @p r in words for a client and the logs, e.g. "the write limit
 * of dir 1234 of tenant 7 was reached" (level names as qos_level_name).
 * @return as snprintf. */
int qos_refusal_format(const struct qos_refusal *r, char *buf, size_t len);

/** Set (persist and apply) the policy of one level (pol->level and its id).
 * @return 0, -EINVAL (tenant 0, a missing id, burst_ms > 60000, a value past
 *         2^52, weight > QOS_WEIGHT_MAX), -ENOSPC (the tenant already has
 *         QOS_POLICIES_PER_TENANT_MAX policies), -ENOMEM, -errno from the core. */
int qos_policy_set(struct qos *q, const struct qos_policy *pol);
/** Policy of one level. @return 0, -ENOENT (no policy: unlimited), -EINVAL (bad level). */
int qos_policy_get_at(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id,
                      struct qos_policy *out);
/** Remove the policy of one level (unlimited again).
 * @return 0, -ENOENT, -EINVAL (bad level), -errno from the core. */
int qos_policy_delete_at(struct qos *q, uint32_t tenant, enum qos_level level, uint64_t id);
/** Set the uid that NFS calls of @p user carry, for its user policy (if any):
 * the admin API calls it when a user's uid changes. @return 0, -ENOENT. */
int qos_policy_set_uid(struct qos *q, uint32_t tenant, uint64_t user, uint32_t uid);
/** Tenant-wide policy. @return 0, -ENOENT (no policy: unlimited). */
int qos_policy_get(struct qos *q, uint32_t tenant, struct qos_policy *out);
/** Policy of @p user of @p tenant (0 = tenant-wide). @return 0, -ENOENT. */
int qos_policy_get_user(struct qos *q, uint32_t tenant, uint64_t user, struct qos_policy *out);
/** Remove a tenant's policy (unlimited again). @return 0, -ENOENT. */
int qos_policy_delete(struct qos *q, uint32_t tenant);
/** Remove a user's policy (0 = tenant-wide). @return 0, -ENOENT. */
int qos_policy_delete_user(struct qos *q, uint32_t tenant, uint64_t user);
typedef int (*qos_policy_cb)(void *arg, const struct qos_policy *pol);
/** Call @p cb for every policy of every level (on copies, without the lock);
 * a nonzero return from @p cb stops (positive: the call returns 0).
 * @return 0, -ENOMEM, a negative return of @p cb. */
int qos_policy_list(struct qos *q, qos_policy_cb cb, void *arg);
/** Name of a level as the API and metrics spell it ("tenant", "user",
 * "bucket", "dir", "nfs_default"). */
const char *qos_level_name(enum qos_level level);

/** The system class's policy now in force: the one qos_system_set stored
 * (@p *stored true), else the configured default (qos_config sys_*).
 * @p stored may be NULL. @return 0. */
int qos_system_get(struct qos *q, struct qos_policy *out, bool *stored);
/** Set (persist and apply) the system class's policy. Its tenant, level and
 * ids are ignored (the system class's). @return 0, -EINVAL (a minimum, or
 * a value qos_policy_set refuses), -ENOMEM, -errno from the core. */
int qos_system_set(struct qos *q, const struct qos_policy *pol);
/** Forget the stored system policy: the configured default applies again.
 * @return 0, -ENOENT (none stored), -errno from the core. */
int qos_system_reset(struct qos *q);
/** Blocking admission for the system class, for worker threads only (never a
 * loop thread: it sleeps). Admits @p bytes of class @p cls (QOS_META: one
 * operation, @p bytes 0) in pieces, as qos_admit_piece_at does, each piece
 * waiting on a private loop thread of the instance while the caller sleeps
 * on a condition variable. A piece that waits past max_wait_ms, or finds the
 * queue full, is asked for again: background work is slowed, never failed,
 * by QoS. Returns at once with 0 when QoS is off or the system class has no
 * policy (and no daemon capacity is known). Safe on NULL @p q (returns 0).
 * Needs libevent's thread support (evthread_use_pthreads, which the daemon
 * turns on at start) before the first call: the private loop is woken from
 * the threads that admit.
 * @return 0 (all admitted), SRV_ETHROTTLE (the daemon is stopping:
 *         qos_system_drain or qos_drain ran; what was not admitted must not
 *         be done), -EINVAL, -ENOMEM. */
int qos_system_wait(struct qos *q, enum qos_class cls, uint64_t bytes);
/** The daemon is stopping: fail every waiting system-class request now and
 * every later qos_system_wait at once, so that no worker's stop waits for a
 * grant. qos_drain does this too. Safe on NULL. */
void qos_system_drain(struct qos *q);

/* ---- holds: a bound outside QoS's own limits that may hold a write up (the
 * tier's dirty-bytes bound of write-back, tier_dirty.h) ----
 * A write (QOS_WRITE with bytes) to a bucket the hook bounds asks check()
 * with its piece before it is admitted; while check() answers 1 the request
 * is held: it waits on a timer of the caller's event_base (5 ms, doubling up
 * to 100 ms), in no level's FIFO, so it holds up no other request (of its
 * tenant or of another); when check() lets it go it is admitted as any other
 * (caps, guarantees), and charge() is told its bytes and how long it was
 * held. Held writes are never refused for the time they wait (max_wait_ms
 * does not apply to a hold): writers are slowed, never failed; qos_cancel
 * withdraws one (its connection closed) and qos_drain refuses them
 * (SRV_ETHROTTLE, QOS_WHY_STOPPING). Holds apply whether QoS is on or off.
 * Every callback may run on any loop thread, under the instance's lock: they
 * must not call back into qos. */
struct qos_hold {
    /** Whether any bucket is bounded now (cheap: asked for every write). */
    bool (*active)(void *arg);
    /** Whether writes to @p bucket may be held; @p dirs: whether the
     * directories above the write are needed to find its level. */
    bool (*bounded)(void *arg, uint64_t bucket, bool *dirs);
    /** @return 0: the write of @p bytes below @p dirs (innermost first) may go
     * (charges nothing); 1: hold it. @p first: its first ask. */
    int (*check)(void *arg, uint64_t bucket, const uint64_t *dirs, size_t ndirs, uint64_t bytes,
                 bool first);
    /** The write goes with @p bytes, after being held @p held_us (0: not held). */
    void (*charge)(void *arg, uint64_t bucket, const uint64_t *dirs, size_t ndirs, uint64_t bytes,
                   uint64_t held_us);
    /** Optional: a write to @p bucket was just held (hasten what drains it). */
    void (*held)(void *arg, uint64_t bucket);
    void *arg;
};
/** Install @p h (copied; NULL: none). Call before the loops run. */
void qos_set_hold(struct qos *q, const struct qos_hold *h);

/** The daemon's instance, for front ends (set by main; NULL = no QoS: admit
 * directly). */
struct qos *qos_global(void);
void qos_set_global(struct qos *q);

/** Clock used by admission (monotonic µs); tests may replace it. */
extern uint64_t (*qos_clock_us)(void);

#endif
