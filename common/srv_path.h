/* SPDX-License-Identifier: Apache-2.0
 * srv_path: normalising absolute slash-separated paths, shared by the export
 * records of tenants/ (the path clients mount) and the NFS MOUNT service (the
 * path a client asks for), so both spell one export the same way; and the one
 * whole-component prefix test both use to decide which export serves a path.
 * Paths compare byte for byte: case matters, as it does in NFS names.
 * Thread: any (pure functions). */
#ifndef SRV_PATH_H
#define SRV_PATH_H

#include <stddef.h>

/* srv_path_norm flags */
#define SRV_PATH_DOT_SKIP 0x1 /* drop "." components (without it they are refused) */

/** Normalise absolute path @p in into @p out: repeated and trailing slashes
 * dropped, "/" for the root ("", "/", "//" all give "/" only when @p in starts
 * with '/'). A ".." component is always refused; a "." component is dropped
 * with SRV_PATH_DOT_SKIP, refused without it. On error @p out is unspecified.
 * @return 0, -EINVAL (NULL or relative @p in, "..", "." without the flag),
 *         -ENAMETOOLONG (the result and its NUL do not fit in @p outlen). */
int srv_path_norm(const char *in, char *out, size_t outlen, unsigned flags);

/** Is normalised @p path equal to normalised @p prefix or below it, in whole
 * components? "/a/b" is within "/a" and "/", not within "/ab" or "/a/b/c".
 * @return the offset in @p path of the part below @p prefix, past the slash
 *         that separates them ("b" of "/a/b" within "/a"; strlen(@p path) when
 *         the two are equal), or -1 when @p path is not within @p prefix. */
long srv_path_within(const char *path, const char *prefix);

#endif
