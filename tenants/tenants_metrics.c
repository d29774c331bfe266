/* SPDX-License-Identifier: Apache-2.0
 * tenants_metrics: what tenants/ publishes on /metrics.
 *
 * The bucket namer: srv_metrics records per-bucket operation series by
 * (tenant, bucket inode); at each scrape this names them from every tenant's
 * bucket list (a deleted bucket is not named, so its series drop out).
 *
 * Per-bucket gauges, labelled {tenant, bucket}:
 *   s3nfs_bucket_bytes         bytes stored in the bucket (acknowledged
 *                              UNSTABLE NFS writes included)
 *   s3nfs_bucket_inodes        files and directories in the bucket
 *   s3nfs_bucket_bytes_limit   byte quota of the bucket (0 = none)
 *   s3nfs_bucket_inodes_limit  inode quota of the bucket (0 = none)
 * One series per existing bucket (their number is the number of buckets).
 * Thread: the render runs on the admin listener's thread; it only reads. */
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "srv_metrics.h"
#include "tenants.h"
#include "tenants_int.h"

struct bent {
    uint32_t tenant;
    uint64_t ino;
    char name[SRV_METRICS_BUCKET_NAME_MAX + 1];
};

struct blist {
    struct core *c;
    uint32_t tenant; /* being listed */
    struct bent *v;
    size_t n, cap;
};

static int bucket_cb(void *arg, const char *name, size_t namelen, const struct core_attr *attr)
{
    struct blist *l = arg;
    if (namelen == 0 || namelen > SRV_METRICS_BUCKET_NAME_MAX ||
        memchr(name, '"', namelen) || memchr(name, '\\', namelen) || memchr(name, '\n', namelen))
        return 0; /* never made by bucket naming rules: no label needs escaping */
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 32;
        struct bent *nv = realloc(l->v, nc * sizeof(*nv));
        if (!nv)
            return -1; /* a partial list is still right for what it holds */
        l->v = nv;
        l->cap = nc;
    }
    struct bent *b = &l->v[l->n++];
    b->tenant = l->tenant;
    b->ino = attr->ino;
    memcpy(b->name, name, namelen);
    b->name[namelen] = '\0';
    return 0;
}

static int tenant_cb(void *arg, const struct tenant_info *ti)
{
    struct blist *l = arg;
    struct core_principal p = {.tenant = ti->id, .flags = CORE_P_SUPER};
    l->tenant = ti->id;
    core_bucket_list(l->c, &p, bucket_cb, l); /* a tenant being deleted lists nothing */
    return 0;
}

/* Every bucket of every tenant (heap array in @p l; free l->v). */
static void buckets_all(struct tenants *t, struct blist *l)
{
    memset(l, 0, sizeof(*l));
    l->c = tenants__core(t);
    tenants_tenant_list(t, tenant_cb, l);
}

static void namer(void *arg, srv_metrics_name_fn add, void *ctx)
{
    struct blist l;
    buckets_all(arg, &l);
    for (size_t i = 0; i < l.n; i++)
        add(ctx, l.v[i].tenant, l.v[i].ino, l.v[i].name);
    free(l.v);
}

static void render(void *arg, struct evbuffer *out)
{
    static const char *const fam[4][2] = {
        {"s3nfs_bucket_bytes", "Bytes stored in the bucket."},
        {"s3nfs_bucket_inodes", "Files and directories in the bucket."},
        {"s3nfs_bucket_bytes_limit", "Byte quota of the bucket (0 = none)."},
        {"s3nfs_bucket_inodes_limit", "Inode quota of the bucket (0 = none)."},
    };
    struct blist l;
    buckets_all(arg, &l);
    struct core_usage *u = calloc(l.n ? l.n : 1, sizeof(*u));
    bool *ok = calloc(l.n ? l.n : 1, sizeof(*ok));
    if (u && ok)
        for (size_t i = 0; i < l.n; i++)
            ok[i] = core_usage_get(l.c, l.v[i].tenant, l.v[i].ino, &u[i]) == 0;
    for (int f = 0; f < 4; f++) {
        evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", fam[f][0], fam[f][1],
                            fam[f][0]);
        for (size_t i = 0; u && ok && i < l.n; i++) {
            if (!ok[i])
                continue;
            const uint64_t v[4] = {u[i].bytes, u[i].inodes, u[i].bytes_limit, u[i].inodes_limit};
            evbuffer_add_printf(out, "%s{tenant=\"%u\",bucket=\"%s\"} %llu\n", fam[f][0],
                                l.v[i].tenant, l.v[i].name, (unsigned long long)v[f]);
        }
    }
    free(ok);
    free(u);
    free(l.v);
}

void tenants__metrics_start(struct tenants *t)
{
    srv_metrics_set_bucket_namer(namer, t);
    srv_metrics_add_renderer(render, t);
}

void tenants__metrics_stop(struct tenants *t)
{
    srv_metrics_remove_renderer(render, t);
    srv_metrics_clear_bucket_namer(namer, t);
}
