/* SPDX-License-Identifier: Apache-2.0
 * srv_size: byte sizes as people write them ("4096", "64k", "64KiB", "4 GiB",
 * "5T"; 1024-based), shared by the config file (SRV_CFG_SIZE options) and
 * s3nfsctl's SIZE arguments so both accept the same syntax.
 * Thread: any (pure functions). */
#ifndef SRV_SIZE_H
#define SRV_SIZE_H

#include <stddef.h>
#include <stdint.h>

/** Parse @p v: decimal digits, optional blanks, then an optional unit
 * k/K, m/M, g/G or t/T (optionally followed by "iB" or "B", any case), or a
 * lone "b"/"B" for bytes. Nothing else may follow.
 * @param[out] out the size in bytes (untouched on error).
 * @return 0, -EINVAL (not a size: no leading digit, unknown unit, trailing
 * text), -ERANGE (does not fit in 64 bits). */
int srv_size_parse(const char *v, uint64_t *out);

/** Format @p v in the largest unit that divides it exactly ("4GiB", "64KiB",
 * "4097"; 0 is "0"), a form srv_size_parse reads back. */
void srv_size_format(uint64_t v, char *buf, size_t len);
/** Format @p v for people, rounded to one decimal in the largest unit below it
 * ("1.5 GiB", "64.0 MiB", "512 B"); for log lines and the banner, not parsed back.
 * @return @p buf. */
const char *srv_size_human(uint64_t v, char *buf, size_t len);

#endif
