/* SPDX-License-Identifier: Apache-2.0
 * meta_dirent: directory entries by name and by cookie (meta_dirent.h).
 * Thread: any thread holding the txn. */
#include "meta_dirent.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "meta_int.h"
#include "srv_err.h"

static size_t dkey(uint8_t *k, uint64_t dir, const char *name, size_t len)
{
    meta_be64_put(k, dir);
    memcpy(k + 8, name, len);
    return 8 + len;
}

int meta_dirent_get(struct meta_txn *t, uint64_t dir, const char *name, size_t len,
                    struct meta_dirent *out)
{
    uint8_t k[8 + META_NAME_MAX];
    if (len > META_NAME_MAX)
        return -ENAMETOOLONG;
    return meta__get_fixed(t, META_DBI_DIRENTS, k, dkey(k, dir, name, len), out, sizeof(*out));
}

int meta_dirent_add(struct meta_txn *t, uint64_t dir, const char *name, size_t len, uint64_t ino,
                    uint32_t type)
{
    uint8_t k[8 + META_NAME_MAX], ck[16];
    uint8_t cv[8 + META_NAME_MAX];
    struct meta_dirent de = {.ino = ino, .type = type};
    struct meta_val v;
    uint64_t cookie = META_COOKIE_BASE | (meta_hash64(name, len) >> 1);
    if (cookie > META_COOKIE_MAX)
        cookie = META_COOKIE_BASE;
    int rc;

    if (len > META_NAME_MAX)
        return -ENAMETOOLONG;
    meta_be64_put(ck, dir);
    for (;;) {
        meta_be64_put(ck + 8, cookie);
        rc = meta__get(t, META_DBI_DIRCOOKIE, ck, 16, &v);
        if (rc == -ENOENT)
            break;
        if (rc)
            return rc;
        cookie = cookie >= META_COOKIE_MAX ? META_COOKIE_BASE : cookie + 1;
    }
    de.cookie = cookie;
    rc = meta__put(t, META_DBI_DIRENTS, k, dkey(k, dir, name, len), &de, sizeof(de),
                   META_NOOVERWRITE);
    if (rc)
        return rc;
    meta_be64_put(cv, ino);
    memcpy(cv + 8, name, len);
    return meta__put(t, META_DBI_DIRCOOKIE, ck, 16, cv, 8 + len, 0);
}

int meta_dirent_del(struct meta_txn *t, uint64_t dir, const char *name, size_t len)
{
    uint8_t k[8 + META_NAME_MAX], ck[16];
    struct meta_dirent de;
    int rc = meta_dirent_get(t, dir, name, len, &de);
    if (rc)
        return rc;
    rc = meta__del(t, META_DBI_DIRENTS, k, dkey(k, dir, name, len));
    if (rc)
        return rc;
    meta_be64_put(ck, dir);
    meta_be64_put(ck + 8, de.cookie);
    rc = meta__del(t, META_DBI_DIRCOOKIE, ck, 16);
    return rc == -ENOENT ? SRV_ECORRUPT : rc;
}

struct dscan {
    meta_dirent_cb cb;
    void *arg;
    bool end; /* a record that cannot be an entry of the directory: stop there */
};

/* dircookie: be64 dir + be64 cookie -> be64 ino + name */
static int cookie_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct dscan *s = arg;
    if (klen != 16) {
        s->end = true;
        return 1;
    }
    if (vlen < 9)
        return 0;
    return s->cb(s->arg, meta_be64_get((const uint8_t *)key + 8), meta_be64_get(val),
                 (const char *)val + 8, vlen - 8);
}

int meta_dirent_scan(struct meta_txn *t, uint64_t dir, uint64_t after, meta_dirent_cb cb,
                     void *arg)
{
    uint8_t pk[8], sk[16];
    struct dscan s = {cb, arg, false};
    if (after == UINT64_MAX)
        return 0;
    meta_be64_put(pk, dir);
    meta_be64_put(sk, dir);
    meta_be64_put(sk + 8, after < META_COOKIE_BASE ? META_COOKIE_BASE : after);
    struct meta_range r = {.prefix = pk, .plen = 8, .start = sk, .slen = 16,
                           .after = after >= META_COOKIE_BASE};
    int rc = meta__scan(t, META_DBI_DIRCOOKIE, &r, cookie_ent, &s);
    return s.end ? 0 : rc;
}

/* dirents: be64 dir + name -> struct meta_dirent */
static int name_ent(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct dscan *s = arg;
    struct meta_dirent de;
    if (klen <= 8) {
        s->end = true;
        return 1;
    }
    if (vlen != sizeof(de))
        return 0;
    memcpy(&de, val, sizeof(de));
    return s->cb(s->arg, de.cookie, de.ino, (const char *)key + 8, klen - 8);
}

int meta_dirent_scan_names(struct meta_txn *t, uint64_t dir, meta_dirent_cb cb, void *arg)
{
    uint8_t pk[8];
    struct dscan s = {cb, arg, false};
    meta_be64_put(pk, dir);
    struct meta_range r = {.prefix = pk, .plen = 8};
    int rc = meta__scan(t, META_DBI_DIRENTS, &r, name_ent, &s);
    return s.end ? 0 : rc;
}
