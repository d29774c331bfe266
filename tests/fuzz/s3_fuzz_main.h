/* SPDX-License-Identifier: Apache-2.0
 * s3_fuzz_main: a deterministic driver for the s3api fuzz targets when they
 * are built without libFuzzer (make check): runs every seed of the target's
 * corpus ($srcdir/tests/fuzz/corpus/NAME), then a fixed number of mutations of
 * them (byte flips, inserts, deletes, splices) from a fixed-seed generator, so
 * every run covers the same inputs. Include it after LLVMFuzzerTestOneInput. */
#ifndef S3_FUZZ_MAIN_H
#define S3_FUZZ_MAIN_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_SEEDS 64
#define FUZZ_MAX_LEN 8192

static uint64_t fuzz_rng = 0x9E3779B97F4A7C15ull;

static uint32_t fuzz_rand(void)
{
    fuzz_rng ^= fuzz_rng << 13;
    fuzz_rng ^= fuzz_rng >> 7;
    fuzz_rng ^= fuzz_rng << 17;
    return (uint32_t)(fuzz_rng >> 11);
}

static int fuzz_main(const char *name, int iterations)
{
    const char *top = getenv("srcdir");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", top ? top : ".", name);
    static uint8_t seeds[FUZZ_MAX_SEEDS][FUZZ_MAX_LEN];
    static size_t lens[FUZZ_MAX_SEEDS];
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: no corpus at %s\n", name, dir);
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < FUZZ_MAX_SEEDS) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        lens[n] = fread(seeds[n], 1, FUZZ_MAX_LEN, f);
        fclose(f);
        LLVMFuzzerTestOneInput(seeds[n], lens[n]);
        n++;
    }
    closedir(d);
    if (n == 0)
        return 1;
    static uint8_t buf[FUZZ_MAX_LEN * 2];
    for (int it = 0; it < iterations; it++) {
        size_t s = fuzz_rand() % n, len = lens[s];
        memcpy(buf, seeds[s], len);
        int edits = 1 + (int)(fuzz_rand() % 8);
        for (int k = 0; k < edits; k++) {
            size_t pos = len ? fuzz_rand() % len : 0;
            switch (fuzz_rand() % 5) {
            case 0: /* flip */
                if (len)
                    buf[pos] ^= (uint8_t)(1u << (fuzz_rand() % 8));
                break;
            case 1: /* random byte */
                if (len)
                    buf[pos] = (uint8_t)fuzz_rand();
                break;
            case 2: /* insert */
                if (len < sizeof(buf) - 1) {
                    memmove(buf + pos + 1, buf + pos, len - pos);
                    buf[pos] = (uint8_t)fuzz_rand();
                    len++;
                }
                break;
            case 3: /* delete */
                if (len) {
                    memmove(buf + pos, buf + pos + 1, len - pos - 1);
                    len--;
                }
                break;
            default: { /* splice another seed's tail */
                size_t o = fuzz_rand() % n, opos = lens[o] ? fuzz_rand() % lens[o] : 0;
                size_t take = lens[o] - opos;
                if (pos + take > sizeof(buf))
                    take = sizeof(buf) - pos;
                memcpy(buf + pos, seeds[o] + opos, take);
                len = pos + take;
            }
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("%s: %zu seeds, %d mutations: ok\n", name, n, iterations);
    return 0;
}

#endif
