/* SPDX-License-Identifier: Apache-2.0
 * srv_addr: listen address syntax shared by the config table, the daemon and
 * the admin listener, and where an address leads (the tier's SSRF rule, NFS's
 * loopback peers). Thread: any; pure functions. */
#ifndef SRV_ADDR_H
#define SRV_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/** Validate "HOST:PORT", "[V6]:PORT" or ":PORT" (port 1..65535). */
int srv_addr_check_listen(const char *value, char *err, size_t errlen);
/** Split a listen address. @param[out] host "" for any; @param[out] port.
 * @return 0, -EINVAL. */
int srv_addr_split_listen(const char *value, char *host, size_t hostlen, int *port);

/** Where an address leads, as far as this host is concerned. */
enum srv_addr_class {
    SRV_ADDR_REMOTE = 0, /* anything else: another machine */
    SRV_ADDR_LOOPBACK,   /* 127.0.0.0/8, ::1 */
    SRV_ADDR_LINKLOCAL,  /* 169.254.0.0/16, fe80::/10 */
    SRV_ADDR_UNSPEC,     /* 0.0.0.0/8, :: (connects to this host) */
    SRV_ADDR_MULTICAST,  /* 224.0.0.0/4, 255.255.255.255, ff00::/8 */
    SRV_ADDR_LOCAL,      /* an address of one of this host's interfaces */
};

/** Classify @p sa (AF_INET or AF_INET6; an IPv4-mapped, IPv4-compatible or NAT64
 * (64:ff9b::/96) IPv6 address is classified by the IPv4 address it carries).
 * Pure: it never answers SRV_ADDR_LOCAL (the caller checks that, as
 * tier_remote_resolve does).
 * Any other family: SRV_ADDR_UNSPEC. */
enum srv_addr_class srv_addr_classify(const struct sockaddr *sa);

/** A short name for people ("loopback", "link-local", ...). */
const char *srv_addr_class_name(enum srv_addr_class c);

#endif
