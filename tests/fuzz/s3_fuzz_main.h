/* SPDX-License-Identifier: Apache-2.0
 * s3_fuzz_main: a deterministic driver for the s3api fuzz targets when they
 * are built without libFuzzer (make check): runs every seed of the target's
 * corpus ($srcdir/tests/fuzz/corpus/NAME), then a fixed number of mutations of
 * them (byte flips, inserts, deletes, splices, and words of the target's
 * libFuzzer dictionary $srcdir/tests/fuzz/NAME.dict when there is one) from a
 * fixed-seed generator, so every run covers the same inputs. Include it after
 * LLVMFuzzerTestOneInput. */
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

#define FUZZ_MAX_WORDS 256
#define FUZZ_MAX_WORD 128

static uint8_t fuzz_words[FUZZ_MAX_WORDS][FUZZ_MAX_WORD];
static size_t fuzz_wlen[FUZZ_MAX_WORDS], fuzz_nwords;

static int fuzz_hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The quoted words of a libFuzzer/AFL dictionary (name="value", with \\, \"
 * and \xNN escapes); lines that are blank or comments are skipped. */
static void fuzz_dict_load(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    if (!f)
        return;
    while (fuzz_nwords < FUZZ_MAX_WORDS && fgets(line, sizeof(line), f)) {
        char *q = strchr(line, '"'), *e = strrchr(line, '"');
        if (line[0] == '#' || !q || e == q)
            continue;
        uint8_t *w = fuzz_words[fuzz_nwords];
        size_t n = 0;
        for (char *c = q + 1; c < e && n < FUZZ_MAX_WORD; c++) {
            if (*c == '\\' && c + 1 < e && c[1] == 'x' && c + 3 < e && fuzz_hex(c[2]) >= 0 &&
                fuzz_hex(c[3]) >= 0) {
                w[n++] = (uint8_t)(fuzz_hex(c[2]) * 16 + fuzz_hex(c[3]));
                c += 3;
            } else if (*c == '\\' && c + 1 < e) {
                w[n++] = (uint8_t)*++c;
            } else {
                w[n++] = (uint8_t)*c;
            }
        }
        fuzz_wlen[fuzz_nwords++] = n;
    }
    fclose(f);
}

static int fuzz_main(const char *name, int iterations)
{
    const char *top = getenv("srcdir");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/%s.dict", top ? top : ".", name);
    fuzz_dict_load(dir);
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
            switch (fuzz_rand() % (fuzz_nwords ? 6 : 5)) {
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
            case 5: { /* insert a dictionary word */
                size_t wi = fuzz_rand() % fuzz_nwords, wl = fuzz_wlen[wi];
                if (len + wl <= sizeof(buf)) {
                    memmove(buf + pos + wl, buf + pos, len - pos);
                    memcpy(buf + pos, fuzz_words[wi], wl);
                    len += wl;
                }
                break;
            }
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
    printf("%s: %zu seeds, %zu dictionary words, %d mutations: ok\n", name, n, fuzz_nwords,
           iterations);
    return 0;
}

#endif
