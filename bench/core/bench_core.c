/* SPDX-License-Identifier: Apache-2.0
 * bench_core: the namespace core (core/core.h) under load, no network.
 *
 * Opens a fresh core in --dir, creates tenant 1 and bucket "bench", then runs
 * the phases asked for (all by default), each printing one line
 * "RESULT <name> <value> <unit>" for bench/core/run.sh to set beside fio:
 *   write   --size-mib (2048) of one file in 1 MiB core_write calls from
 *           --threads threads (each takes the next 1 MiB offset, so the file is
 *           written front to back with up to --threads writes in flight);
 *           UNSTABLE + one core_commit at the end, or FILE_SYNC every write with
 *           --sync. Timed up to the commit's return. (seq_write_qd<T>, MB/s)
 *   read    the same file back in 1 MiB core_read calls, same threading; every
 *           MiB carries its offset in its first 8 bytes and is checked.
 *           (seq_read_qd<T>, MB/s)
 *   create  --files (50000) files of 4 KiB in one directory from --file-threads
 *           (64) threads: core_create (GUARDED) + core_write 4 KiB + core_commit
 *           (UNSTABLE + commit, as an NFS client does), or one FILE_SYNC write
 *           with --sync. Each file is durable before its thread starts the next,
 *           so the rate depends on group commit batching the threads' commits.
 *           (create_4k, files/s)
 *   upload  --up-objects (--up-threads) objects of --up-mib (256) MiB as S3 PutObject feeds
 *           them: core_upload_begin (size hint), core_upload_write in 4 MiB chunks from a
 *           buffer that is not 4 KiB aligned (as a request body is; --up-aligned: one that
 *           is), core_upload_commit;
 *           --up-threads (1) threads each take the next object. Timed up to the last
 *           commit's return; also prints the process CPU time per MiB.
 *           (put_<N>m_t<T>, MB/s; put_<N>m_t<T>_cpu, us/MiB)
 * A failed core call stops the run with the call, its arguments and the error
 * (srv_strerror), exit status 1; no RESULT line is printed for that phase.
 * Usage: bench_core --dir DIR [--only write,read,create,upload] [--size-mib N]
 *                   [--threads T] [--files N] [--file-threads T] [--sync]
 *                   [--up-mib N] [--up-threads T] [--up-objects N] [--up-aligned] */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../bench_util.h"
#include "core.h"
#include "srv_err.h"

#define MIB (1024u * 1024u)
#define MAX_THREADS 256

struct bench {
    struct core *core;
    struct core_principal p;
    uint64_t bucket, seq_ino, files_dir;
    uint64_t size;
    int threads, file_threads, files;
    int up_threads, up_objects;
    uint64_t up_size;
    bool sync, up_aligned;
    atomic_uint_fast64_t next;
    atomic_int failed;
    double t0;                /* start of the running phase */
};

static void report_err(struct bench *b, const char *call, uint64_t arg, int rc)
{
    if (atomic_exchange(&b->failed, 1) == 0)
        fprintf(stderr, "bench_core: %s(%llu) failed: %d %s\n", call, (unsigned long long)arg,
                rc, srv_strerror(rc));
}

static int run_threads(struct bench *b, int n, void *(*fn)(void *))
{
    pthread_t t[MAX_THREADS];
    int started = 0;
    for (; started < n; started++) {
        if (pthread_create(&t[started], NULL, fn, b) != 0) {
            atomic_store(&b->failed, 1);
            fprintf(stderr, "bench_core: pthread_create failed\n");
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    return atomic_load(&b->failed) ? -1 : 0;
}

/* ---- sequential write / read ---- */

static void *write_thread(void *arg)
{
    struct bench *b = arg;
    char *buf = aligned_alloc(4096, MIB);
    if (!buf) {
        report_err(b, "aligned_alloc", MIB, -ENOMEM);
        return NULL;
    }
    for (uint32_t i = 0; i < MIB; i++)
        buf[i] = (char)(i * 131 + 7);
    enum core_stable st = b->sync ? CORE_FILE_SYNC : CORE_UNSTABLE;
    while (!atomic_load(&b->failed)) {
        uint64_t off = atomic_fetch_add(&b->next, MIB);
        if (off >= b->size)
            break;
        memcpy(buf, &off, sizeof(off));
        enum core_stable got;
        int rc = core_write(b->core, &b->p, b->seq_ino, off, buf, MIB, st, &got, NULL, NULL);
        if (rc) {
            report_err(b, "core_write", off, rc);
            break;
        }
    }
    free(buf);
    return NULL;
}

static void *read_thread(void *arg)
{
    struct bench *b = arg;
    char *buf = aligned_alloc(4096, MIB);
    if (!buf) {
        report_err(b, "aligned_alloc", MIB, -ENOMEM);
        return NULL;
    }
    while (!atomic_load(&b->failed)) {
        uint64_t off = atomic_fetch_add(&b->next, MIB);
        if (off >= b->size)
            break;
        size_t n = 0;
        bool eof = false;
        int rc = core_read(b->core, &b->p, b->seq_ino, off, buf, MIB, &n, &eof);
        if (rc) {
            report_err(b, "core_read", off, rc);
            break;
        }
        uint64_t tag;
        memcpy(&tag, buf, sizeof(tag));
        if (n != MIB || tag != off || buf[4096] != (char)(4096 * 131 + 7)) {
            report_err(b, "core_read (wrong data)", off, -EIO);
            break;
        }
    }
    free(buf);
    return NULL;
}

static int phase_write(struct bench *b)
{
    struct core_attr a;
    int rc = core_create(b->core, &b->p, b->bucket, "seq", 3, 0644, CORE_CREATE_GUARDED, 0, &a);
    if (rc) {
        report_err(b, "core_create seq", b->bucket, rc);
        return -1;
    }
    b->seq_ino = a.ino;
    atomic_store(&b->next, 0);
    double t0 = bench_now();
    if (run_threads(b, b->threads, write_thread))
        return -1;
    if (!b->sync && (rc = core_commit(b->core, &b->p, b->seq_ino)) != 0) {
        report_err(b, "core_commit", b->seq_ino, rc);
        return -1;
    }
    double dt = bench_now() - t0;
    printf("RESULT seq_write_qd%d %.1f MB/s\n", b->threads, (double)b->size / dt / 1e6);
    fflush(stdout);
    return 0;
}

static int phase_read(struct bench *b)
{
    atomic_store(&b->next, 0);
    double t0 = bench_now();
    if (run_threads(b, b->threads, read_thread))
        return -1;
    double dt = bench_now() - t0;
    printf("RESULT seq_read_qd%d %.1f MB/s\n", b->threads, (double)b->size / dt / 1e6);
    fflush(stdout);
    return 0;
}

/* ---- small files ---- */

static void *create_thread(void *arg)
{
    struct bench *b = arg;
    char data[4096];
    memset(data, 'c', sizeof(data));
    while (!atomic_load(&b->failed)) {
        uint64_t i = atomic_fetch_add(&b->next, 1);
        if (i >= (uint64_t)b->files)
            break;
        char name[32];
        int len = snprintf(name, sizeof(name), "f%07llu", (unsigned long long)i);
        struct core_attr a;
        int rc = core_create(b->core, &b->p, b->files_dir, name, (size_t)len, 0644,
                             CORE_CREATE_GUARDED, 0, &a);
        if (rc) {
            report_err(b, "core_create", i, rc);
            break;
        }
        enum core_stable got;
        rc = core_write(b->core, &b->p, a.ino, 0, data, sizeof(data),
                        b->sync ? CORE_FILE_SYNC : CORE_UNSTABLE, &got, NULL, NULL);
        if (rc) {
            report_err(b, "core_write 4k", i, rc);
            break;
        }
        if (!b->sync && got == CORE_UNSTABLE && (rc = core_commit(b->core, &b->p, a.ino)) != 0) {
            report_err(b, "core_commit 4k", i, rc);
            break;
        }
        /* Progress every tenth, so a rate that decays as the directory grows shows. */
        uint64_t step = b->files >= 10 ? (uint64_t)b->files / 10 : 1;
        if ((i + 1) % step == 0)
            fprintf(stderr, "bench_core: create: ~%llu files at %.2f s\n",
                    (unsigned long long)(i + 1), bench_now() - b->t0);
    }
    return NULL;
}

static int phase_create(struct bench *b)
{
    struct core_attr a;
    int rc = core_mkdir(b->core, &b->p, b->bucket, "files", 5, 0755, &a);
    if (rc) {
        report_err(b, "core_mkdir files", b->bucket, rc);
        return -1;
    }
    b->files_dir = a.ino;
    atomic_store(&b->next, 0);
    struct core_stats s0, s1;
    core_stats_get(b->core, &s0);
    double t0 = bench_now();
    b->t0 = t0;
    if (run_threads(b, b->file_threads, create_thread))
        return -1;
    double dt = bench_now() - t0;
    core_stats_get(b->core, &s1);
    printf("RESULT create_4k %.0f files/s\n", (double)b->files / dt);
    uint64_t commits = s1.commits - s0.commits;
    fprintf(stderr, "bench_core: create: %d files in %.2f s, %llu group commits (%.1f ops each)\n",
            b->files, dt, (unsigned long long)commits,
            commits ? (double)(s1.commit_ops - s0.commit_ops) / (double)commits : 0.0);
    fflush(stdout);
    return 0;
}

/* ---- uploads (S3 PutObject's core calls) ---- */

#define UP_CHUNK (4u * MIB)

static void *upload_thread(void *arg)
{
    struct bench *b = arg;
    char *mem = aligned_alloc(4096, UP_CHUNK + 4096);
    if (!mem) {
        report_err(b, "aligned_alloc", UP_CHUNK, -ENOMEM);
        return NULL;
    }
    char *buf = b->up_aligned ? mem : mem + 16; /* a request body's bytes are not aligned */
    for (uint32_t i = 0; i < UP_CHUNK; i++)
        buf[i] = (char)(i * 131 + 7);
    while (!atomic_load(&b->failed)) {
        uint64_t i = atomic_fetch_add(&b->next, 1);
        if (i >= (uint64_t)b->up_objects)
            break;
        struct core_upload *u;
        int rc = core_upload_begin(b->core, &b->p, b->bucket, b->up_size, &u);
        if (rc) {
            report_err(b, "core_upload_begin", i, rc);
            break;
        }
        for (uint64_t off = 0; off < b->up_size && rc == 0; off += UP_CHUNK) {
            size_t n = b->up_size - off < UP_CHUNK ? (size_t)(b->up_size - off) : UP_CHUNK;
            memcpy(buf, &off, sizeof(off));
            rc = core_upload_write(u, buf, n);
        }
        if (rc) {
            report_err(b, "core_upload_write", i, rc);
            core_upload_abort(u);
            break;
        }
        char key[32];
        int kl = snprintf(key, sizeof(key), "obj%llu", (unsigned long long)i);
        rc = core_upload_commit(u, key, (size_t)kl, "00000000000000000000000000000000", NULL, 0,
                                NULL, false, NULL);
        if (rc) {
            report_err(b, "core_upload_commit", i, rc);
            break;
        }
    }
    free(mem);
    return NULL;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int phase_upload(struct bench *b)
{
    atomic_store(&b->next, 0);
    double c0 = cpu_seconds();
    double t0 = bench_now();
    if (run_threads(b, b->up_threads, upload_thread))
        return -1;
    double dt = bench_now() - t0;
    double cpu = cpu_seconds() - c0;
    double mib = (double)b->up_size * b->up_objects / MIB;
    unsigned long long m = (unsigned long long)(b->up_size / MIB);
    printf("RESULT put_%llum_t%d %.1f MB/s\n", m, b->up_threads, mib * MIB / dt / 1e6);
    printf("RESULT put_%llum_t%d_cpu %.0f us/MiB\n", m, b->up_threads, cpu / mib * 1e6);
    fflush(stdout);
    return 0;
}

/* ---- main ---- */

static void usage(void)
{
    fprintf(stderr, "usage: bench_core --dir DIR [--only write,read,create,upload]\n"
                    "  [--size-mib 2048] [--threads 1] [--files 50000] [--file-threads 64]\n"
                    "  [--sync] [--up-mib 256] [--up-threads 1] [--up-objects T] [--up-aligned]\n");
}

int main(int argc, char **argv)
{
    struct bench b;
    memset(&b, 0, sizeof(b));
    const char *dir = NULL, *only = NULL;
    b.size = 2048ull * MIB;
    b.threads = 1;
    b.file_threads = 64;
    b.files = 50000;
    b.up_size = 256ull * MIB;
    b.up_threads = 1;
    static const struct option lo[] = {
        { "dir", 1, 0, 'd' },        { "only", 1, 0, 'o' },         { "size-mib", 1, 0, 's' },
        { "threads", 1, 0, 't' },    { "file-threads", 1, 0, 'T' }, { "files", 1, 0, 'f' },
        { "sync", 0, 0, 'S' },       { "up-mib", 1, 0, 'u' },       { "up-threads", 1, 0, 'U' },
        { "up-objects", 1, 0, 'O' }, { "up-aligned", 0, 0, 'A' },   { 0, 0, 0, 0 },
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'd': dir = optarg; break;
        case 'o': only = optarg; break;
        case 's': b.size = strtoull(optarg, NULL, 10) * MIB; break;
        case 't': b.threads = atoi(optarg); break;
        case 'T': b.file_threads = atoi(optarg); break;
        case 'f': b.files = atoi(optarg); break;
        case 'S': b.sync = true; break;
        case 'u': b.up_size = strtoull(optarg, NULL, 10) * MIB; break;
        case 'U': b.up_threads = atoi(optarg); break;
        case 'O': b.up_objects = atoi(optarg); break;
        case 'A': b.up_aligned = true; break;
        default: usage(); return 2;
        }
    }
    if (!dir || b.threads < 1 || b.threads > MAX_THREADS || b.file_threads < 1 ||
        b.file_threads > MAX_THREADS || b.size == 0 || b.files < 1 || b.up_threads < 1 ||
        b.up_threads > MAX_THREADS || b.up_size == 0 || b.up_objects < 0) {
        usage();
        return 2;
    }
    if (!b.up_objects)
        b.up_objects = b.up_threads;
    if (bench_want(only, "read") && !bench_want(only, "write")) {
        fprintf(stderr, "bench_core: read needs write (it reads the file write made)\n");
        return 2;
    }

    struct core_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.data_dir = dir;
    /* Room for the sequential file plus slack; preallocated, not timed. */
    cfg.data_file_size = b.size + (1ull << 30);
    if (bench_want(only, "upload") && cfg.data_file_size < b.up_size * b.up_objects + (1ull << 30))
        cfg.data_file_size = b.up_size * b.up_objects + (1ull << 30);
    if (cfg.data_file_size < (4ull << 30))
        cfg.data_file_size = 4ull << 30;
    int rc = core_open(&b.core, &cfg);
    if (rc) {
        fprintf(stderr, "bench_core: core_open(%s): %d %s\n", dir, rc, srv_strerror(rc));
        return 1;
    }
    int ret = 1;
    b.p.tenant = 1;
    b.p.flags = CORE_P_SUPER;
    struct core_attr a;
    if ((rc = core_tenant_create(b.core, 1)) != 0 && rc != -EEXIST) {
        report_err(&b, "core_tenant_create", 1, rc);
        goto out;
    }
    if ((rc = core_bucket_create(b.core, &b.p, "bench", 5, &a)) != 0) {
        report_err(&b, "core_bucket_create bench", 1, rc);
        goto out;
    }
    b.bucket = a.ino;
    if (bench_want(only, "write") && phase_write(&b))
        goto out;
    if (bench_want(only, "read") && phase_read(&b))
        goto out;
    if (bench_want(only, "create") && phase_create(&b))
        goto out;
    if (bench_want(only, "upload") && phase_upload(&b))
        goto out;
    ret = 0;
out:
    core_close(b.core);
    return ret;
}
