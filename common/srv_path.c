/* SPDX-License-Identifier: Apache-2.0
 * srv_path: path normalisation (see srv_path.h).
 * Thread: any. */
#include "srv_path.h"

#include <errno.h>
#include <string.h>

int srv_path_norm(const char *in, char *out, size_t outlen, unsigned flags)
{
    size_t j = 0;
    if (!in || in[0] != '/')
        return -EINVAL;
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, "/");
        if (n == 1 && p[0] == '.') {
            if (!(flags & SRV_PATH_DOT_SKIP))
                return -EINVAL;
            p += n;
            continue;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (j + 1 + n + 1 > outlen)
            return -ENAMETOOLONG;
        out[j++] = '/';
        memcpy(out + j, p, n);
        j += n;
        p += n;
    }
    if (j == 0) {
        if (outlen < 2)
            return -ENAMETOOLONG;
        out[j++] = '/';
    }
    out[j] = '\0';
    return 0;
}

long srv_path_within(const char *path, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (pl == 1 && prefix[0] == '/')
        return path[0] == '/' ? 1 : -1;
    if (strncmp(path, prefix, pl) != 0)
        return -1;
    if (path[pl] == '\0')
        return (long)pl;
    return path[pl] == '/' ? (long)pl + 1 : -1;
}
