/* SPDX-License-Identifier: Apache-2.0
 * srv_addr: listen addresses ("HOST:PORT", "[V6]:PORT", ":PORT"), parsed the
 * same way by the config table, the daemon and the admin listener.
 * Thread: any; pure functions. */
#include "srv_addr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_addr_split_listen(const char *value, char *host, size_t hostlen, int *port)
{
    const char *colon;
    const char *h = value;
    size_t hl;

    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = value + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
        if (hl == 0)
            return -EINVAL;
    } else {
        colon = strrchr(value, ':');
        if (!colon)
            return -EINVAL;
        hl = (size_t)(colon - value);
        if (memchr(value, ':', hl))
            return -EINVAL; /* bare IPv6 needs brackets */
    }
    if (hl >= hostlen)
        return -EINVAL;
    const char *ps = colon + 1;
    if (!*ps || strspn(ps, "0123456789") != strlen(ps) || strlen(ps) > 5)
        return -EINVAL;
    int p = atoi(ps);
    if (p < 1 || p > 65535)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = p;
    return 0;
}

int srv_addr_check_listen(const char *value, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (srv_addr_split_listen(value, host, sizeof(host), &port) < 0) {
        snprintf(err, errlen, "expected HOST:PORT, [IPV6]:PORT or :PORT with port 1..65535");
        return -EINVAL;
    }
    return 0;
}
