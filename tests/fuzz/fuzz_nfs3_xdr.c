/* SPDX-License-Identifier: Apache-2.0
 * fuzz_nfs3_xdr: libFuzzer target over what the NFS front end parses from
 * the network before any procedure runs:
 *   1. record marking (nfs_rec_take), fed in uneven chunks, and the RPC call
 *      header of every record (nfs_rpc_call_decode);
 *   2. XDR decode of the arguments of every NFSv3, MOUNTv3, NLMv4 and NSM procedure
 *      (and of every result type, which the server encodes), then xdr_free;
 *      arguments that decoded must survive encode -> decode -> encode with
 *      identical bytes.
 * The first input byte picks the mode and the type.
 *
 * Built two ways: with --enable-fuzz (clang, -fsanitize=fuzzer) as a real
 * fuzzer, and always as tests/fuzz/fuzz_nfs3_xdr_smoke (NFS_FUZZ_MAIN), which
 * runs a fixed number of deterministic pseudo-random and mutated inputs under
 * `make check`, or the files named on its command line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <event2/buffer.h>

#include "nfs_rec.h"
#include "xdr/mount_prot.h"
#include "xdr/nfs3_prot.h"
#include "xdr/nlm4_prot.h"
#include "xdr/nsm_prot.h"

struct xdr_type {
    xdrproc_t fn;
    size_t size;
};

#define T(t) {NFS_XDRPROC(xdr_##t), sizeof(t)}
static const struct xdr_type types[] = {
    T(GETATTR3args), T(SETATTR3args), T(LOOKUP3args), T(ACCESS3args), T(READLINK3args),
    T(READ3args), T(WRITE3args), T(CREATE3args), T(MKDIR3args), T(SYMLINK3args),
    T(MKNOD3args), T(REMOVE3args), T(RMDIR3args), T(RENAME3args), T(LINK3args),
    T(READDIR3args), T(READDIRPLUS3args), T(FSSTAT3args), T(FSINFO3args), T(PATHCONF3args),
    T(COMMIT3args), T(dirpath), T(nlm4_testargs), T(nlm4_lockargs), T(nlm4_cancargs),
    T(nlm4_unlockargs), T(nlm4_notify), T(sm_name), T(stat_chge),
    /* results (the server encodes them; decoding checks the generated code too) */
    T(GETATTR3res), T(SETATTR3res), T(LOOKUP3res), T(ACCESS3res), T(READLINK3res),
    T(READ3res), T(WRITE3res), T(CREATE3res), T(MKDIR3res), T(SYMLINK3res), T(MKNOD3res),
    T(REMOVE3res), T(RMDIR3res), T(RENAME3res), T(LINK3res), T(READDIR3res),
    T(READDIRPLUS3res), T(FSSTAT3res), T(FSINFO3res), T(PATHCONF3res), T(COMMIT3res),
    T(mountres3), T(mountlist), T(exports), T(nlm4_testres), T(nlm4_res), T(sm_stat_res),
};
#undef T
#define NTYPES (sizeof(types) / sizeof(types[0]))
#define NARGS 29 /* the first NARGS entries are argument types */

static void fuzz_records(const uint8_t *data, size_t size)
{
    struct nfs_rec r;
    struct evbuffer *in = evbuffer_new();
    size_t pos = 0, chunk = 1;
    nfs_rec_init(&r, 1 << 16);
    while (pos < size) {
        size_t n = size - pos < chunk ? size - pos : chunk;
        evbuffer_add(in, data + pos, n);
        pos += n;
        chunk = chunk * 3 % 97 + 1;
        for (;;) {
            void *rec;
            size_t len;
            int rc = nfs_rec_take(&r, in, &rec, &len);
            if (rc <= 0) {
                if (rc < 0)
                    pos = size; /* the server closes the connection here */
                break;
            }
            struct nfs_call c;
            if (nfs_rpc_call_decode(rec, len, &c) == 0 && c.verdict == NFS_CALL_OK &&
                c.args_off > len)
                abort(); /* arguments must start inside the record */
            free(rec);
        }
    }
    nfs_rec_fini(&r);
    evbuffer_free(in);
}

static void fuzz_xdr(const struct xdr_type *t, bool is_args, const uint8_t *data, size_t size)
{
    void *obj = calloc(1, t->size);
    XDR x;
    xdrmem_create(&x, (char *)data, (u_int)size, XDR_DECODE);
    bool ok = t->fn(&x, obj, 0);
    xdr_destroy(&x);
    if (ok && is_args) {
        /* Decoding is lenient (any nonzero bool is TRUE, padding is skipped),
         * encoding is canonical: encode -> decode -> encode must be stable. */
        unsigned long n = xdr_sizeof(t->fn, obj);
        char *b1 = malloc(n ? n : 1), *b2 = malloc(n ? n : 1);
        void *obj2 = calloc(1, t->size);
        xdrmem_create(&x, b1, (u_int)n, XDR_ENCODE);
        if (!t->fn(&x, obj, 0) || xdr_getpos(&x) != n)
            abort();
        xdr_destroy(&x);
        xdrmem_create(&x, b1, (u_int)n, XDR_DECODE);
        if (!t->fn(&x, obj2, 0) || xdr_getpos(&x) != n)
            abort();
        xdr_destroy(&x);
        xdrmem_create(&x, b2, (u_int)n, XDR_ENCODE);
        if (!t->fn(&x, obj2, 0) || memcmp(b1, b2, n) != 0)
            abort();
        xdr_destroy(&x);
        xdr_free(t->fn, obj2);
        free(obj2);
        free(b1);
        free(b2);
    }
    xdr_free(t->fn, obj);
    free(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 20))
        return 0;
    uint8_t sel = data[0];
    if (sel < 32) {
        fuzz_records(data + 1, size - 1);
    } else {
        size_t i = (size_t)(sel - 32) % NTYPES;
        fuzz_xdr(&types[i], i < NARGS, data + 1, size - 1);
    }
    return 0;
}

#ifdef NFS_FUZZ_MAIN
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* A plausible call record: mark + header + AUTH_SYS + some argument words. */
static size_t seed_record(uint8_t *b, size_t cap)
{
    uint32_t w[64];
    size_t n = 0;
    w[n++] = rnd();
    w[n++] = 0;
    w[n++] = 2;
    w[n++] = rnd() % 2 ? 100003 : 100005;
    w[n++] = 3;
    w[n++] = rnd() % 24;
    w[n++] = 1;
    w[n++] = 20;
    w[n++] = 0;
    w[n++] = 4;
    w[n++] = 0x61626364;
    w[n++] = 0;
    w[n++] = 0;
    w[n++] = 0;
    w[n++] = 0;
    w[n++] = 0;
    size_t extra = rnd() % 40;
    for (size_t i = 0; i < extra; i++)
        w[n++] = rnd() % 4 ? rnd() % 64 : rnd();
    size_t len = 4 + n * 4;
    if (len > cap)
        return 0;
    uint32_t mark = htonl(0x80000000u | (uint32_t)(n * 4));
    memcpy(b, &mark, 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t be = htonl(w[i]);
        memcpy(b + 4 + i * 4, &be, 4);
    }
    return len;
}

int main(int argc, char **argv)
{
    static uint8_t buf[4096];
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f)
                continue;
            size_t n = fread(buf, 1, sizeof(buf), f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, n);
        }
        return 0;
    }
    for (int iter = 0; iter < 20000; iter++) {
        size_t n;
        if (iter % 2 == 0) {
            buf[0] = (uint8_t)(rnd() % 32);
            n = 1 + seed_record(buf + 1, sizeof(buf) - 1);
            n += (size_t)seed_record(buf + n, sizeof(buf) - n) * (rnd() % 2);
        } else {
            buf[0] = (uint8_t)(32 + rnd() % NTYPES);
            n = 1 + rnd() % 600;
            for (size_t i = 1; i < n; i++)
                buf[i] = (uint8_t)(rnd() % 3 ? 0 : rnd());
            /* small lengths and bool discriminants are common in real XDR */
            for (size_t i = 4; i + 4 <= n; i += 4 + 4 * (rnd() % 4))
                buf[i] = (uint8_t)(rnd() % 3);
        }
        /* mutate a few bytes */
        for (int m = rnd() % 4; m > 0; m--)
            buf[1 + rnd() % (n > 1 ? n - 1 : 1)] ^= (uint8_t)(1u << (rnd() % 8));
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("fuzz_nfs3_xdr smoke: 20000 inputs, no crash\n");
    return 0;
}
#endif
