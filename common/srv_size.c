/* SPDX-License-Identifier: Apache-2.0
 * srv_size: parse and format byte sizes (see srv_size.h).
 * Thread: any. */
#include "srv_size.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int srv_size_parse(const char *v, uint64_t *out)
{
    char *end;
    if (!isdigit((unsigned char)*v))
        return -EINVAL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno)
        return -ERANGE;
    while (*end == ' ')
        end++;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    case 'b':
    case 'B':
        if (end[1])
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    if (shift) {
        end++;
        if (*end && strcasecmp(end, "iB") != 0 && strcasecmp(end, "B") != 0)
            return -EINVAL;
        if (x > (ULLONG_MAX >> shift))
            return -ERANGE;
        x <<= shift;
    }
    *out = x;
    return 0;
}

void srv_size_format(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    static const unsigned shifts[] = {40, 30, 20, 10};
    for (size_t i = 0; i < 4; i++) {
        uint64_t m = (uint64_t)1 << shifts[i];
        if (v && v % m == 0) {
            snprintf(buf, len, "%" PRIu64 "%s", v / m, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%" PRIu64, v);
}

const char *srv_size_human(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024 && u < 5) {
        x /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", x, units[u]);
    return buf;
}
