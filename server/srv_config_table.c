/* SPDX-License-Identifier: Apache-2.0
 * srv_config_table: every daemon option, one row each.
 *
 * This table is the single source of truth for names, types, defaults,
 * bounds, reloadability and documentation. docs/configuration.md is checked
 * against it by tests/unit/server/test_srv_config.c, and `s3nfsd
 * --dump-config-doc` prints its reference section.
 * Thread: read-only data; the validators are pure functions. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "srv_addr.h"
#include "srv_config.h"
#include "srv_log.h"

#define GiB (1024LL * 1024 * 1024)
#define TiB (1024LL * GiB)

static int check_listen_or_auto(const char *v, char *err, size_t errlen)
{
    if (!*v)
        return 0;
    return srv_addr_check_listen(v, err, errlen);
}

/* "info", "warn,s3=debug", ... (the syntax of srv_log_apply_spec). */
static int check_log_level(const char *v, char *err, size_t errlen)
{
    int levels[SRV_SUB__COUNT] = {0};
    char sub[64];
    int rc = srv_log_parse_spec(v, levels, sub, sizeof(sub));
    if (rc == -ENOENT) {
        snprintf(err, errlen, "unknown subsystem '%s' (srv, store, tier, s3, nfs, meta, "
                 "tenant, qos, admin)", sub);
        return -EINVAL;
    }
    if (rc < 0) {
        snprintf(err, errlen, "expected a level (crit, error, warn, info, debug) optionally "
                 "followed by ,subsystem=level items");
        return -EINVAL;
    }
    return 0;
}

static int check_congestion(const char *v, char *err, size_t errlen)
{
    /* the kernel's names: at most 15 characters (TCP_CA_NAME_MAX) */
    if (strlen(v) > 15 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(v)) {
        snprintf(err, errlen,
                 "a TCP congestion control is 0..15 characters of a-z, 0-9, '_' and '-'");
        return -EINVAL;
    }
    return 0;
}

static int check_region(const char *v, char *err, size_t errlen)
{
    if (!*v || strlen(v) > 32 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v)) {
        snprintf(err, errlen, "a region is 1..32 characters of a-z, 0-9 and '-'");
        return -EINVAL;
    }
    return 0;
}

#define OPT(name_, type_, def_, min_, max_, flags_, check_, help_)                                 \
    {#name_, type_, def_, min_, max_, flags_, offsetof(struct srv_config, name_), check_, help_}

/* A hand-laid table (one row per option, as docs/configuration.md lists them). */
/* clang-format off */
const struct srv_config_opt srv_config_table[] = {
    /* daemon */
    OPT(data_dir, SRV_CFG_STRING, "./s3nfs-data", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Folder holding the metadata (LMDB) and the data files; created if missing. Also "
        "holds master.key, the key that encrypts stored secrets."),
    OPT(pidfile, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Write the daemon's PID to this file (removed at exit). Empty: no pidfile."),
    OPT(daemonize, SRV_CFG_BOOL, "false", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Detach from the terminal and run in the background (--daemon). Logs go to log_file, "
        "or to data_dir/s3nfsd.log if it is empty."),
    OPT(log_level, SRV_CFG_STRING, "info", 0, 0, SRV_CFG_RELOADABLE, check_log_level,
        "Log level: crit, error, warn, info or debug, optionally followed by per-subsystem "
        "levels, e.g. `info,s3=debug,nfs=warn` (subsystems: srv, store, tier, s3, nfs, meta, "
        "tenant, qos, admin)."),
    OPT(log_file, SRV_CFG_STRING, "", 0, 0, SRV_CFG_RELOADABLE, NULL,
        "Append log lines to this file. Empty: standard error. SIGHUP reopens it (log "
        "rotation)."),
    OPT(loop_threads, SRV_CFG_INT, "0", 0, 256, SRV_CFG_IMMUTABLE, NULL,
        "Event-loop (network) threads. 0: one per CPU, at most 8."),
    OPT(loop_cpu_affinity, SRV_CFG_BOOL, "false", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Pin event-loop thread i to the i-th CPU the daemon may run on, and give each new S3 "
        "or NFS connection to a loop pinned to the CPU its packets arrive on (SO_INCOMING_CPU), "
        "so that a request wakes a thread on the CPU that received it, not another CPU; a loop "
        "holding 4 open connections more than the least busy one gives the next away. For hosts "
        "whose network card spreads connections over CPUs (several receive queues, RSS). false: "
        "loops run on any CPU and take connections in turn. Measured in benchmarks.md (issue 17, "
        "where the threads run)."),
    OPT(worker_threads, SRV_CFG_INT, "0", 0, 1024, SRV_CFG_IMMUTABLE, NULL,
        "Worker threads running namespace-core calls (disk, metadata). Most of them wait on "
        "group commits, so there are many. 0: 32 per CPU, at least 64."),
    OPT(shutdown_timeout_s, SRV_CFG_INT, "10", 0, 3600, SRV_CFG_RELOADABLE, NULL,
        "On SIGTERM/SIGINT, how long in-flight requests may take to finish before the daemon "
        "closes anyway."),
    OPT(malloc_trim_s, SRV_CFG_INT, "30", 0, 3600, SRV_CFG_IMMUTABLE, NULL,
        "Every this many seconds, give the heap memory that malloc keeps free for reuse back "
        "to the kernel (glibc malloc_trim). 0: never (the daemon's memory then stays near its "
        "peak after a burst)."),
    /* listeners */
    OPT(s3_listen, SRV_CFG_STRING, "127.0.0.1:9000", 0, 0, SRV_CFG_IMMUTABLE, srv_addr_check_listen,
        "S3 listener: HOST:PORT, [V6ADDR]:PORT or :PORT (every address)."),
    OPT(nfs_listen, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, check_listen_or_auto,
        "NFSv3 listener; MOUNT, NLM (locks) and NSM are served on the same port. Empty: "
        "127.0.0.1:2049 when running as root, else 127.0.0.1:20490."),
    OPT(admin_listen, SRV_CFG_STRING, "127.0.0.1:9001", 0, 0, SRV_CFG_IMMUTABLE,
        srv_addr_check_listen,
        "Admin listener: /healthz, /metrics and the REST API under /api/v1/."),
    OPT(listen_backlog, SRV_CFG_INT, "4096", 1, 1000000, SRV_CFG_IMMUTABLE, NULL,
        "Backlog of the S3, NFS and admin listeners: connections the kernel completes and "
        "queues before the daemon accepts them (bursts of connects beyond it wait for a SYN "
        "retransmission, about a second). Cut to net.core.somaxconn when that is lower "
        "(logged)."),
    /* S3 */
    OPT(s3_domain, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Base domain for virtual-host style requests (BUCKET.DOMAIN). Empty: path style "
        "only."),
    OPT(s3_region, SRV_CFG_STRING, "us-east-1", 0, 0, SRV_CFG_IMMUTABLE, check_region,
        "Region used in SigV4 scopes and answered by GetBucketLocation."),
    OPT(s3_anonymous_tenant, SRV_CFG_STRING, "default", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Tenant whose buckets unsigned (anonymous) requests reach by their plain name; any "
        "tenant's bucket is reached as TENANT:BUCKET. Unsigned requests get only what a "
        "bucket's ACL or policy grants everybody. Empty: plain names reach no bucket "
        "unsigned."),
    OPT(s3_max_header_bytes, SRV_CFG_SIZE, "64KiB", 1024, 16LL * 1024 * 1024,
        SRV_CFG_IMMUTABLE, NULL,
        "Largest request line plus headers; larger requests get 431."),
    OPT(s3_max_object_size, SRV_CFG_SIZE, "5TiB", 1, 64 * TiB, SRV_CFG_IMMUTABLE, NULL,
        "Largest PUT or part body; larger ones get 413 EntityTooLarge."),
    OPT(s3_idle_timeout_s, SRV_CFG_INT, "60", 1, 86400, SRV_CFG_IMMUTABLE, NULL,
        "Seconds an idle keep-alive connection or a stalled client may hold a connection."),
    OPT(s3_max_conns, SRV_CFG_INT, "10000", 1, 1000000, SRV_CFG_IMMUTABLE, NULL,
        "Concurrent S3 connections; more are accepted, answered 503 and closed at once."),
    OPT(s3_loop_poll_us, SRV_CFG_INT, "50", 0, 1000, SRV_CFG_IMMUTABLE, NULL,
        "Microseconds an event-loop thread waits, running, for the next request of an S3 "
        "connection it answered, before it sleeps: a client with one request in flight then "
        "finds the thread awake (no wake-up of a sleeping thread and its halted CPU), at the "
        "cost of that much CPU per request when the client is slower. Only while the "
        "connection is the loop's only one and the loop has nothing else to do. 0: never."),
    OPT(s3_tls_cert, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "PEM certificate chain for HTTPS on s3_listen. Empty: plain HTTP."),
    OPT(s3_tls_key, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "PEM private key for s3_tls_cert (required with it)."),
    OPT(lifecycle_interval_s, SRV_CFG_INT, "3600", 1, 86400, SRV_CFG_IMMUTABLE, NULL,
        "Seconds between two passes of the lifecycle worker over the buckets with a "
        "lifecycle configuration."),
    OPT(lifecycle_batch, SRV_CFG_INT, "256", 1, 100000, SRV_CFG_IMMUTABLE, NULL,
        "Objects, versions or uploads the lifecycle worker reads in one batch; it pauses 20 ms "
        "between batches so that requests are not held up behind it."),
    OPT(lifecycle_day_s, SRV_CFG_INT, "86400", 1, 86400, SRV_CFG_IMMUTABLE, NULL,
        "A test aid: seconds in one lifecycle day (Days of lifecycle rules). Below 86400, "
        "days count from the object's time without S3's rounding up to midnight UTC, so that "
        "tests see rules fire within seconds; logged as a warning. Keep 86400 in production."),
    /* NFS */
    OPT(nfs_register_rpcbind, SRV_CFG_BOOL, "false", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Register NFS and MOUNT with a running rpcbind (failure is only logged). Without it "
        "clients give port= and mountport=."),
    OPT(nfs_max_record, SRV_CFG_SIZE, "4160KiB", 64 * 1024, 64LL * 1024 * 1024, SRV_CFG_IMMUTABLE,
        NULL, "Largest RPC record accepted (bounds READ/WRITE sizes plus headers)."),
    OPT(nlm_grace_period, SRV_CFG_INT, "90", 0, 3600, SRV_CFG_IMMUTABLE, NULL,
        "Seconds after a start during which NLM grants only lock reclaims (clients that held "
        "locks before the restart are sent SM_NOTIFY and take them back); other LOCK and TEST "
        "calls answer NLM4_DENIED_GRACE_PERIOD. Only when some client held locks; 0: no grace "
        "period (their locks are lost)."),
    OPT(nfs_max_conns, SRV_CFG_INT, "10000", 1, 1000000, SRV_CFG_IMMUTABLE, NULL,
        "Concurrent NFS connections (NFS, MOUNT, NLM and NSM share them); more are accepted "
        "and closed at once (logged, at most 5 lines a second)."),
    OPT(nfs_idle_timeout_s, SRV_CFG_INT, "360", 0, 86400, SRV_CFG_IMMUTABLE, NULL,
        "Seconds after which an NFS connection that sent nothing, has no call in flight and "
        "no reply waiting to be sent is closed (clients reconnect on their next call). 0: "
        "never."),
    OPT(nfs_loop_answers, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Answer GETATTR, LOOKUP, ACCESS, READDIR(PLUS), FSINFO, PATHCONF and READs of data "
        "already verified in the page cache on the connection's event-loop thread, without a hand-off to a worker (a loop that "
        "takes a major page fault sends calls to the workers for a second). false: every call "
        "runs on a worker."),
    OPT(nfs_loop_poll_us, SRV_CFG_INT, "50", 0, 1000, SRV_CFG_IMMUTABLE, NULL,
        "Microseconds an event-loop thread waits, running, for the next call of a connection "
        "whose calls it answered, before it sleeps: a client with one call in flight then "
        "finds the thread awake (no wake-up of a sleeping thread and its halted CPU), at the "
        "cost of that much CPU per call when the client is slower. Only while the connection "
        "is the loop's only one and the loop has nothing else to do. 0: never."),
    OPT(nfs_loopback_congestion, SRV_CFG_STRING, "reno", 0, 0, SRV_CFG_IMMUTABLE,
        check_congestion,
        "TCP congestion control of NFS connections from a loopback address (127.0.0.0/8, "
        "::1): such a connection meets no network, and a pacing one (bbr) spreads each large "
        "READ reply over a bandwidth it estimates low when the client shares the server's "
        "CPUs. A name the kernel refuses (net.ipv4.tcp_available_congestion_control; "
        "without CAP_NET_ADMIN tcp_allowed_congestion_control) fails the start. Empty: the "
        "system's (net.ipv4.tcp_congestion_control), as for every other connection."),
    /* store */
    OPT(data_file_size, SRV_CFG_SIZE, "4GiB", 64LL * 1024 * 1024, 64 * TiB, SRV_CFG_IMMUTABLE, NULL,
        "Most bytes each data file grows to (when no devices are given). Raising it adds "
        "space to an existing store; a file already larger keeps its size."),
    OPT(data_file_initial, SRV_CFG_SIZE, "64MiB", 0, 64 * TiB, SRV_CFG_IMMUTABLE, NULL,
        "Bytes each data file starts with, preallocated; it then grows on demand (steps of "
        "64 MiB or 1/8 of its size) up to data_file_size. 0: preallocate data_file_size whole."),
    OPT(data_write_cache, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Write file data through the page cache, its writeback started at once, so that the "
        "first read of freshly written data (a checkpoint read back, a dataset trained on) "
        "finds it in memory. Durability is the same either way: data is synced before the "
        "metadata that points at it commits. false: O_DIRECT writes through io_uring (less CPU "
        "per written byte, nothing left cached)."),
    OPT(data_files, SRV_CFG_INT, "1", 1, 1024, SRV_CFG_IMMUTABLE, NULL,
        "Number of data files under data_dir."),
    OPT(devices, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Comma-separated block devices the store takes whole instead of data files. Empty: "
        "use data files."),
    OPT(map_size, SRV_CFG_SIZE, "16GiB", 16LL * 1024 * 1024, 64 * TiB, SRV_CFG_IMMUTABLE, NULL,
        "LMDB map size: the most metadata the store can hold."),
    OPT(inline_max, SRV_CFG_SIZE, "4096", 0, 64 * 1024, SRV_CFG_IMMUTABLE, NULL,
        "Files up to this size are stored inline in the metadata instead of in extents."),
    OPT(commit_max_batch, SRV_CFG_INT, "256", 1, 65536, SRV_CFG_IMMUTABLE, NULL,
        "Most metadata operations carried by one group commit."),
    OPT(settle_ms, SRV_CFG_INT, "2000", 0, 3600000, SRV_CFG_IMMUTABLE, NULL,
        "A file changed over NFS is settled once its writes are committed and it has not "
        "changed for this long: a background worker then stores the MD5 of its content as its "
        "ETag (when it was not written in order) and, in a versioned bucket, seals its new "
        "version. See cross-protocol.md (ETag) and s3-compatibility.md (Versioning)."),
    /* admin */
    OPT(admin_enabled, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Serve the admin listener. /healthz needs no credentials; /api/v1/ needs the admin "
        "token (S3NFS_ADMIN_TOKEN) or an admin user's key; /metrics see admin_metrics_auth."),
    OPT(admin_tls_cert, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "PEM certificate chain for HTTPS on admin_listen (may be the S3 one). Empty: plain "
        "HTTP."),
    OPT(admin_tls_key, SRV_CFG_STRING, "", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "PEM private key for admin_tls_cert (required with it)."),
    OPT(admin_metrics_auth, SRV_CFG_BOOL, "false", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "Require a system admin's credentials (the admin token as a bearer token, or SigV4 "
        "with a bootstrap admin's key) for /metrics; 401 without, 403 with others. false: "
        "/metrics is open to anyone who reaches admin_listen."),
    /* QoS */
    OPT(qos_enabled, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_RELOADABLE, NULL,
        "Apply the QoS policies stored through the admin API. false: admit everything."),
    OPT(qos_max_wait_ms, SRV_CFG_INT, "30000", 0, 600000, SRV_CFG_RELOADABLE, NULL,
        "Longest a request may wait for QoS admission before it fails with SlowDown / "
        "NFS3ERR_JUKEBOX."),
    OPT(qos_queue_max, SRV_CFG_INT, "4096", 1, 1000000, SRV_CFG_RELOADABLE, NULL,
        "Most requests waiting for QoS admission per tenant; more fail at once as throttled."),
    OPT(qos_capacity_read_bps, SRV_CFG_SIZE, "0", 0, 64 * TiB, SRV_CFG_RELOADABLE, NULL,
        "Read bandwidth (bytes/s) the daemon can serve, for QoS minimum guarantees. 0: "
        "unknown (no daemon-wide read limit; read guarantees inactive)."),
    OPT(qos_capacity_write_bps, SRV_CFG_SIZE, "0", 0, 64 * TiB, SRV_CFG_RELOADABLE, NULL,
        "Write bandwidth (bytes/s) the daemon can absorb, for QoS minimum guarantees. 0: "
        "unknown."),
    OPT(qos_capacity_iops, SRV_CFG_INT, "0", 0, 100000000, SRV_CFG_RELOADABLE, NULL,
        "Operations per second the daemon can serve, for QoS minimum guarantees. 0: unknown. "
        "With a capacity set, requests beyond it wait, and tenants with a guarantee go first "
        "up to their minimum."),
    OPT(qos_capacity_probe, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_IMMUTABLE, NULL,
        "At start, measure the store's disk (write, read and 4 KiB random-read rates of a "
        "scratch file in data_dir) and the network link speed, and use that as the capacity "
        "for every qos_capacity_* left at 0, while some tenant has a QoS minimum. false: "
        "minimums work only with qos_capacity_* set."),
    OPT(qos_capacity_probe_mib, SRV_CFG_INT, "32", 1, 1024, SRV_CFG_IMMUTABLE, NULL,
        "Size in MiB of the scratch file qos_capacity_probe writes and reads (removed "
        "after)."),
    OPT(qos_shaping, SRV_CFG_BOOL, "true", 0, 0, SRV_CFG_RELOADABLE, NULL,
        "Admit large transfers in pieces at the capped rate (S3 bodies read and sent at the "
        "admitted rate, NFS READ/WRITE admitted in slices). false (a test aid): admit each "
        "request whole at once, leaving the buckets of its QoS levels in debt for the next "
        "requests."),
    OPT(qos_system_read_bps, SRV_CFG_SIZE, "0", 0, 64 * TiB, SRV_CFG_RELOADABLE, NULL,
        "Cap (bytes/s) on the disk reads of background work, the QoS system class: the MD5 "
        "of files NFS changed and the tier uploader's reads. 0: no cap. A system policy set "
        "through the admin API (/api/v1/qos/system) overrides the qos_system_* options."),
    OPT(qos_system_write_bps, SRV_CFG_SIZE, "0", 0, 64 * TiB, SRV_CFG_RELOADABLE, NULL,
        "Cap (bytes/s) on the disk writes of background work (the QoS system class). 0: no "
        "cap."),
    OPT(qos_system_meta_iops, SRV_CFG_INT, "0", 0, 100000000, SRV_CFG_RELOADABLE, NULL,
        "Cap (operations/s) on the metadata operations of background work (the lifecycle "
        "worker's listings and removals; the QoS system class). 0: no cap."),
    OPT(qos_system_weight, SRV_CFG_INT, "50", 1, 10000, SRV_CFG_RELOADABLE, NULL,
        "Share of the QoS system class (background work) against tenants (a tenant's "
        "default weight is 100) when a daemon capacity is known and requests wait for it. "
        "It never has a minimum: tenants' minimums are served first."),
    /* tier */
    OPT(tier_allow_private_remotes, SRV_CFG_BOOL, "false", 0, 0, SRV_CFG_RELOADABLE, NULL,
        "Let a tenant's remote (tier) reach this host's loopback, link-local, unspecified or "
        "interface addresses. false: a tenant admin cannot point the daemon at services of "
        "its own host (SSRF); system-wide remotes may always. See tiering.md."),
    OPT(tier_upload_workers, SRV_CFG_INT, "4", 1, 64, SRV_CFG_IMMUTABLE, NULL,
        "Threads of the tier's uploader: files uploaded at once (each large file also has "
        "its remote's `parallel` parts in flight)."),
    OPT(tier_poll_ms, SRV_CFG_INT, "1000", 50, 600000, SRV_CFG_IMMUTABLE, NULL,
        "How often the tier's uploader passes over the tiered buckets to find files to "
        "upload and remote copies to delete."),
    OPT(tier_part_size, SRV_CFG_SIZE, "8MiB", 5LL * 1024 * 1024, 5 * GiB, SRV_CFG_IMMUTABLE, NULL,
        "Files larger than this are uploaded to a remote as multipart uploads with parts of "
        "this size (larger when a file would need more than 10000 parts)."),
    OPT(tier_copy_max, SRV_CFG_SIZE, "5GiB", 5LL * 1024 * 1024, 5 * GiB, SRV_CFG_IMMUTABLE, NULL,
        "A renamed file whose remote copy holds its bytes is copied server-side to its new "
        "key: by one CopyObject up to this size, larger by UploadPartCopy parts."),
    OPT(tier_retry_base_ms, SRV_CFG_INT, "1000", 10, 600000, SRV_CFG_IMMUTABLE, NULL,
        "First back-off after a failed upload or remote delete; it doubles with each "
        "failure in a row (with jitter) up to tier_retry_max_ms."),
    OPT(tier_retry_max_ms, SRV_CFG_INT, "300000", 10, 86400000, SRV_CFG_IMMUTABLE, NULL,
        "Longest back-off between tries of a remote that fails (down, 5xx, timeouts) or of a "
        "file whose upload failed."),
    OPT(tier_recall_threads, SRV_CFG_INT, "4", 1, 64, SRV_CFG_IMMUTABLE, NULL,
        "Ranged GETs (of tier_recall_chunk_size each) of recalls of evicted files in flight "
        "at once, shared by all recalls (one file may use them all); twice as many threads "
        "write and commit what they fetched, so writing overlaps the next GETs."),
    OPT(tier_recall_chunk_size, SRV_CFG_SIZE, "0", 0, 64 * 1024 * 1024, SRV_CFG_IMMUTABLE, NULL,
        "Bytes of one ranged GET of a recall (rounded up to a multiple of 1 MiB; 0: "
        "tier_part_size within 8..16 MiB, so the GETs follow the uploads' parts): a "
        "read waits for the chunks that hold its range; each chunk is written and committed "
        "locally as it arrives. The first tier_recall_chunk_size bytes of a file come in "
        "1 MiB pieces, so its first bytes are back soon."),
    OPT(tier_recall_wait_ms, SRV_CFG_INT, "10000", 100, 600000, SRV_CFG_IMMUTABLE, NULL,
        "Longest wait of a read of an evicted file for its range; then it answers a "
        "retryable error (S3 503, NFS JUKEBOX)."),
    OPT(tier_recall_fail_ms, SRV_CFG_INT, "60000", 100, 3600000, SRV_CFG_IMMUTABLE, NULL,
        "A recall whose remote keeps failing for this long fails its readers with an I/O "
        "error (S3 500, NFS EIO) instead of a retryable one; the next read tries again."),
};
/* clang-format on */

const size_t srv_config_table_len = sizeof(srv_config_table) / sizeof(srv_config_table[0]);
