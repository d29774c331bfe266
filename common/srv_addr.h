/* SPDX-License-Identifier: Apache-2.0
 * srv_addr: listen address syntax shared by the config table, the daemon and
 * the admin listener. Thread: any; pure functions. */
#ifndef SRV_ADDR_H
#define SRV_ADDR_H

#include <stddef.h>

/** Validate "HOST:PORT", "[V6]:PORT" or ":PORT" (port 1..65535). */
int srv_addr_check_listen(const char *value, char *err, size_t errlen);
/** Split a listen address. @param[out] host "" for any; @param[out] port.
 * @return 0, -EINVAL. */
int srv_addr_split_listen(const char *value, char *host, size_t hostlen, int *port);

#endif
