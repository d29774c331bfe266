/* SPDX-License-Identifier: Apache-2.0
 * nfs_server: the NFSv3 front end (ONC RPC over TCP).
 *
 * One TCP listener serves MOUNT (100005 v3), NFS (100003 v3), NLM (100021 v4)
 * and NSM (100024 v1) on the same port, so a client needs only port= and
 * mountport= set to it (docs/nfs.md). The transport
 * (record marking, RPC call header, replies) runs on the srv_loop event
 * loops; procedures run through the namespace core (core.h) on the worker
 * pool, those that only read (metadata, verified cached data) on the loop
 * thread when the core can answer without waiting (nfs_rpc.c), and replies
 * may leave out of order. Exports, squash rules and the tenant of each
 * client come from tenants/tenants.h.
 * Thread: nfs_server_start/stop from the main thread, after srv_loops_start()
 * and before srv_loops_stop(). */
#ifndef NFS_SERVER_H
#define NFS_SERVER_H

#include <stddef.h>

struct core;
struct tenants;
struct nfs_server;

struct nfs_server_config {
    const char *listen;    /* "HOST:PORT" ("127.0.0.1:2049", "[::1]:2049", ":2049" = any) */
    int register_rpcbind;  /* nonzero: register with a running rpcbind (failure only logged) */
    size_t max_record;     /* largest RPC record accepted; 0 = default (4 MiB + 64 KiB) */
    int nlm_grace_s;       /* NLM grace period after a restart, seconds (0: none) */
    int max_conns;         /* concurrent connections; 0 = 10000. More: accepted, closed at once */
    int idle_timeout_s;    /* close a connection idle (nothing read, nothing in flight or
                              waiting to be sent) this long; 0 = never */
    int worker_only;       /* nonzero: no procedure is answered on a loop thread */
    int loop_poll_us;      /* wait this long for the next call before sleeping (0: never) */
    const char *loopback_congestion; /* TCP congestion control of connections from a loopback
                                        address (TCP_CONGESTION); NULL or "": the system's */
};

/** Bind the listener and start serving.
 * @param[out] out the server, to give to nfs_server_stop().
 * @param[in]  cfg  listen address and limits; copied, need not outlive the call.
 * @param[in]  c    the namespace core; must outlive the server.
 * @param[in]  t    tenants (exports); must outlive the server.
 * @return 0, -EINVAL (bad listen address, a loopback_congestion the kernel
 *         refuses), -EADDRINUSE and other -errno from
 *         socket/bind/listen, -ENOMEM. Nothing is left running on error. */
int nfs_server_start(struct nfs_server **out, const struct nfs_server_config *cfg, struct core *c,
                     struct tenants *t);

/** Close the listener and every connection; waits for in-flight procedures
 * (and lock callbacks) to finish and unregisters from rpcbind. Calls waiting
 * for QoS admission are withdrawn, so call it before qos_drain(). Safe on NULL. */
void nfs_server_stop(struct nfs_server *s);

#endif
