/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for core/core_posix.c: lookup, create modes, mkdir,
 * symlink/readlink, link, remove/rmdir, rename cases, readdir cookies,
 * setattr, permissions (owner/group/other, supplementary gids, sticky bit,
 * super, read-only), and the S3 view of NFS-made changes. */
#include <unistd.h>

#include "core_test_util.h"
#include "core_data_int.h" /* core__pend_excl_begin: hold an inode as a setattr does */

static uint64_t mkfile(struct fx *f, uint64_t dir, const char *name)
{
    struct core_attr a;
    assert_int_equal(core_create(f->c, &f->p, dir, name, strlen(name), 0644,
                                 CORE_CREATE_GUARDED, 0, &a),
                     0);
    return a.ino;
}

static uint64_t mkd(struct fx *f, uint64_t dir, const char *name)
{
    struct core_attr a;
    assert_int_equal(core_mkdir(f->c, &f->p, dir, name, strlen(name), 0755, &a), 0);
    return a.ino;
}

static void test_lookup_create(void **state)
{
    struct fx *f = *state;
    struct core_attr a, b;
    uint64_t ino = mkfile(f, f->bucket, "f1");
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "f1", 2, &a), 0);
    assert_int_equal(a.ino, ino);
    assert_int_equal(a.type, CORE_REG);
    assert_int_equal(a.uid, 1000);
    assert_int_equal(a.nlink, 1);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "nope", 4, &a), -ENOENT);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, ".", 1, &a), 0);
    assert_int_equal(a.ino, f->bucket);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "..", 2, &a), 0);
    assert_int_equal(a.ino, f->root);
    assert_int_equal(core_lookup(f->c, &f->p, f->root, "..", 2, &a), 0);
    assert_int_equal(a.ino, f->root);
    assert_int_equal(core_lookup(f->c, &f->p, ino, "x", 1, &a), -ENOTDIR);
    char longname[300];
    memset(longname, 'n', sizeof(longname));
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, longname, 256, &a), -ENAMETOOLONG);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, longname, 256, 0644,
                                 CORE_CREATE_GUARDED, 0, &a),
                     -ENAMETOOLONG);
    /* create modes */
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "f1", 2, 0644, CORE_CREATE_GUARDED, 0,
                                 &a),
                     -EEXIST);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "f1", 2, 0644, CORE_CREATE_UNCHECKED, 0,
                                 &a),
                     0);
    assert_int_equal(a.ino, ino);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "ex", 2, 0644, CORE_CREATE_EXCLUSIVE,
                                 42, &a),
                     0);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "ex", 2, 0644, CORE_CREATE_EXCLUSIVE,
                                 42, &b),
                     0);
    assert_int_equal(a.ino, b.ino);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "ex", 2, 0644, CORE_CREATE_EXCLUSIVE,
                                 43, &b),
                     -EEXIST);
    /* names */
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "a/b", 3, 0644, CORE_CREATE_GUARDED, 0,
                                 &a),
                     SRV_EBADNAME);
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "..", 2, 0644, CORE_CREATE_GUARDED, 0,
                                 &a),
                     SRV_EBADNAME);
    /* files in a tenant root are refused; mkdir there makes a bucket */
    assert_int_equal(core_create(f->c, &f->p, f->root, "file", 4, 0644, CORE_CREATE_GUARDED, 0,
                                 &a),
                     -EACCES);
    assert_int_equal(core_mkdir(f->c, &f->su, f->root, "Bad_Name", 8, 0755, &a), SRV_EBADNAME);
    assert_int_equal(core_mkdir(f->c, &f->su, f->root, "newbkt", 6, 0755, &a), 0);
    assert_true(a.flags & CORE_A_BUCKET);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "newbkt", 6, &b), 0);
    assert_int_equal(core_rmdir(f->c, &f->su, f->root, "newbkt", 6), 0);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "newbkt", 6, &b), SRV_ENOBUCKET);
    /* getattr: stale for wrong gen or another tenant */
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &a), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, a.gen, &b), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, a.gen + 1, &b), SRV_ESTALE);
    struct core_principal o = f->p;
    o.tenant = 9;
    assert_int_equal(core_getattr(f->c, &o, ino, 0, &b), SRV_ESTALE);
    assert_int_equal(core_getattr(f->c, &f->p, 999999, 0, &b), SRV_ESTALE);
}

static void test_symlink_link(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    char buf[64];
    size_t n;
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "ln", 2, "target/x", 8, &a), 0);
    assert_int_equal(a.type, CORE_LNK);
    assert_int_equal(a.size, 8);
    assert_int_equal(core_readlink(f->c, &f->p, a.ino, buf, sizeof(buf), &n), 0);
    assert_int_equal(n, 8);
    assert_memory_equal(buf, "target/x", 8);
    assert_int_equal(core_readlink(f->c, &f->p, a.ino, buf, 4, &n), -ERANGE);
    uint64_t fi = mkfile(f, f->bucket, "orig");
    assert_int_equal(core_readlink(f->c, &f->p, fi, buf, sizeof(buf), &n), -EINVAL);
    uint64_t d = mkd(f, f->bucket, "sub");
    assert_int_equal(core_link(f->c, &f->p, fi, d, "hard", 4, &a), 0);
    assert_int_equal(a.nlink, 2);
    assert_int_equal(core_link(f->c, &f->p, fi, d, "hard", 4, &a), -EEXIST);
    assert_int_equal(core_link(f->c, &f->p, d, f->bucket, "dl", 2, &a), -EPERM);
    struct core_attr b2;
    assert_int_equal(core_bucket_create(f->c, &f->p, "other", 5, &b2), 0);
    assert_int_equal(core_link(f->c, &f->p, fi, b2.ino, "x", 1, &a), -EXDEV);
    /* both names are keys */
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "sub/hard", 8, &oi), 0);
    assert_int_equal(oi.attr.ino, fi);
    free(oi.meta);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "orig", 4), 0);
    assert_int_equal(core_getattr(f->c, &f->p, fi, 0, &a), 0);
    assert_int_equal(a.nlink, 1);
    assert_int_equal(core_remove(f->c, &f->p, d, "hard", 4), 0);
    assert_int_equal(core_getattr(f->c, &f->p, fi, 0, &a), SRV_ESTALE);
    /* symlink targets: empty, too long, NUL inside */
    char big[5000];
    memset(big, 't', sizeof(big));
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "e", 1, "", 0, &a), -EINVAL);
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "e", 1, big, 4097, &a), -ENAMETOOLONG);
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "e", 1, "a\0b", 3, &a), -EINVAL);
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "e", 1, big, 4096, &a), 0);
    assert_int_equal(core_symlink(f->c, &f->p, f->bucket, "e", 1, "x", 1, &a), -EEXIST);
    /* link into a tenant root is refused */
    assert_int_equal(core_create(f->c, &f->p, f->bucket, "f2", 2, 0644, 0, 0, &a), 0);
    assert_int_equal(core_link(f->c, &f->su, a.ino, f->root, "x", 1, &a), -EXDEV);
}

/* Buckets renamed through NFS in the tenant root keep their objects. */
static void test_bucket_rename(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    assert_int_equal(fx_put(f, "dir/obj", "data", 4), 0);
    assert_int_equal(core_rename(f->c, &f->su, f->root, "bkt", 3, f->root, "Bad", 3),
                     SRV_EBADNAME);
    assert_int_equal(core_rename(f->c, &f->su, f->root, "bkt", 3, f->root, "renamed", 7), 0);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "bkt", 3, &a), SRV_ENOBUCKET);
    assert_int_equal(core_bucket_lookup(f->c, &f->p, "renamed", 7, &a), 0);
    assert_int_equal(a.ino, f->bucket);
    void *d = NULL;
    size_t n;
    assert_int_equal(fx_get(f, "dir/obj", &d, &n), 0);
    assert_int_equal(n, 4);
    free(d);
    /* moving a directory out of a bucket into the root is cross-device */
    assert_int_equal(core_rename(f->c, &f->su, f->bucket, "dir", 3, f->root, "dirbkt", 6), -EXDEV);
}

static void test_remove_rmdir(void **state)
{
    struct fx *f = *state;
    uint64_t d = mkd(f, f->bucket, "d");
    mkfile(f, d, "x");
    assert_int_equal(core_rmdir(f->c, &f->p, f->bucket, "d", 1), -ENOTEMPTY);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, "d", 1), -EISDIR);
    assert_int_equal(core_rmdir(f->c, &f->p, d, "x", 1), -ENOTDIR);
    assert_int_equal(core_remove(f->c, &f->p, d, "y", 1), -ENOENT);
    assert_int_equal(core_remove(f->c, &f->p, d, "x", 1), 0);
    assert_int_equal(core_rmdir(f->c, &f->p, f->bucket, "d", 1), 0);
    assert_int_equal(core_rmdir(f->c, &f->p, f->bucket, "d", 1), -ENOENT);
    struct core_usage u;
    assert_int_equal(core_usage_get(f->c, 1, f->bucket, &u), 0);
    assert_int_equal(u.inodes, 0);
}

static void test_rename(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    uint64_t d1 = mkd(f, f->bucket, "d1");
    uint64_t d2 = mkd(f, d1, "d2");
    uint64_t x = mkfile(f, d2, "x");
    uint64_t y = mkfile(f, f->bucket, "y");
    /* file over file */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "y", 1, d2, "x", 1), 0);
    assert_int_equal(core_lookup(f->c, &f->p, d2, "x", 1, &a), 0);
    assert_int_equal(a.ino, y);
    assert_int_equal(core_getattr(f->c, &f->p, x, 0, &a), SRV_ESTALE);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "y", 1, &a), -ENOENT);
    /* dir into its own child */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "d1", 2, d2, "loop", 4), -EINVAL);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "d1", 2, d1, "loop", 4), -EINVAL);
    /* file over dir / dir over file */
    mkd(f, f->bucket, "e");
    mkfile(f, f->bucket, "g");
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "g", 1, f->bucket, "e", 1), -EISDIR);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "e", 1, f->bucket, "g", 1), -ENOTDIR);
    /* dir over non-empty dir, over empty dir */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "e", 1, f->bucket, "d1", 2),
                     -ENOTEMPTY);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "d1", 2, f->bucket, "e", 1), 0);
    /* the key index followed the whole subtree */
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "e/d2/x", 6, &oi), 0);
    assert_int_equal(oi.attr.ino, y);
    free(oi.meta);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "d1/d2/x", 7, &oi), -ENOENT);
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "e/d2/", 5, &oi), 0);
    free(oi.meta);
    /* new files under the moved dir get the new key */
    mkfile(f, d2, "z");
    assert_int_equal(core_key_lookup(f->c, &f->p, f->bucket, "e/d2/z", 6, &oi), 0);
    free(oi.meta);
    /* across buckets */
    struct core_attr b2;
    assert_int_equal(core_bucket_create(f->c, &f->p, "other", 5, &b2), 0);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "g", 1, b2.ino, "g", 1), -EXDEV);
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "nope", 4, f->bucket, "g2", 2),
                     -ENOENT);
    /* same name: no-op */
    assert_int_equal(core_rename(f->c, &f->p, f->bucket, "g", 1, f->bucket, "g", 1), 0);
    assert_int_equal(core_lookup(f->c, &f->p, f->bucket, "g", 1, &a), 0);
    /* nlink of dirs */
    assert_int_equal(core_getattr(f->c, &f->p, f->bucket, 0, &a), 0);
    assert_int_equal(a.nlink, 3); /* ., .., e */
}

struct rd {
    char names[256][16];
    uint64_t cookies[256];
    int n;
    int stop_after;
};

static int rd_cb(void *arg, const struct core_dirent *e)
{
    struct rd *r = arg;
    if (r->stop_after && r->n >= r->stop_after)
        return 1;
    snprintf(r->names[r->n], 16, "%.*s", (int)e->namelen, e->name);
    r->cookies[r->n] = e->cookie;
    r->n++;
    return 0;
}

static void test_readdir(void **state)
{
    struct fx *f = *state;
    char name[16];
    bool eof;
    uint64_t verf, verf2;
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "f%02d", i);
        mkfile(f, f->bucket, name);
    }
    struct rd all = {0};
    assert_int_equal(core_readdir(f->c, &f->p, f->bucket, 0, true, rd_cb, &all, &eof, &verf), 0);
    assert_true(eof);
    assert_int_equal(all.n, 42);
    assert_string_equal(all.names[0], ".");
    assert_string_equal(all.names[1], "..");
    /* page by page with concurrent creates and removes: no repeats, no skips of survivors */
    struct rd page = {0};
    page.stop_after = 10;
    assert_int_equal(core_readdir(f->c, &f->p, f->bucket, 0, false, rd_cb, &page, &eof, &verf2),
                     0);
    assert_false(eof);
    assert_int_equal(verf, verf2);
    int seen = page.n;
    uint64_t cookie = page.cookies[page.n - 1];
    char seen_names[64][16];
    for (int i = 0; i < page.n; i++)
        strcpy(seen_names[i], page.names[i]);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "new%02d", i);
        mkfile(f, f->bucket, name);
    }
    /* remove one already seen entry and one not yet seen */
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, seen_names[5], strlen(seen_names[5])),
                     0);
    const char *unseen = NULL;
    for (int i = 2; i < all.n && !unseen; i++) {
        bool s = false;
        for (int j = 0; j < seen; j++)
            if (strcmp(all.names[i], seen_names[j]) == 0)
                s = true;
        if (!s)
            unseen = all.names[i];
    }
    assert_non_null(unseen);
    assert_int_equal(core_remove(f->c, &f->p, f->bucket, unseen, strlen(unseen)), 0);
    struct rd rest = {0};
    assert_int_equal(
        core_readdir(f->c, &f->p, f->bucket, cookie, false, rd_cb, &rest, &eof, &verf2), 0);
    assert_true(eof);
    for (int i = 0; i < rest.n; i++)
        for (int j = 0; j < seen; j++)
            assert_string_not_equal(rest.names[i], seen_names[j]);
    /* every original survivor appears exactly once overall */
    for (int i = 2; i < all.n; i++) {
        if (strcmp(all.names[i], unseen) == 0 || strcmp(all.names[i], seen_names[5]) == 0)
            continue;
        int cnt = 0;
        for (int j = 0; j < seen; j++)
            cnt += strcmp(all.names[i], seen_names[j]) == 0;
        for (int j = 0; j < rest.n; j++)
            cnt += strcmp(all.names[i], rest.names[j]) == 0;
        assert_int_equal(cnt, 1);
    }
    /* cookies survive a restart */
    fx_reopen(f);
    struct rd again = {0};
    assert_int_equal(
        core_readdir(f->c, &f->p, f->bucket, cookie, false, rd_cb, &again, &eof, &verf2), 0);
    assert_int_equal(again.n, rest.n);
    assert_int_equal(core_readdir(f->c, &f->p, f->bucket, 12345, false, rd_cb, &again, &eof,
                                  &verf2),
                     SRV_EBADCOOKIE);
}

static void test_setattr(void **state)
{
    struct fx *f = *state;
    struct core_attr a, pre, post;
    uint64_t ino = mkfile(f, f->bucket, "s");
    struct core_setattr sa;
    memset(&sa, 0, sizeof(sa));
    sa.mask = CORE_SET_MODE;
    sa.mode = 0600;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, &pre, &post), 0);
    assert_int_equal(pre.mode, 0644);
    assert_int_equal(post.mode, 0600);
    assert_true(post.change > pre.change);
    /* chown only by super */
    sa.mask = CORE_SET_UID;
    sa.uid = 5;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, NULL), -EPERM);
    assert_int_equal(core_setattr(f->c, &f->su, ino, &sa, NULL, &post), 0);
    assert_int_equal(post.uid, 5);
    /* chgrp by owner to one of its groups */
    sa.mask = CORE_SET_UID;
    sa.uid = 1000;
    assert_int_equal(core_setattr(f->c, &f->su, ino, &sa, NULL, NULL), 0);
    struct core_principal p2 = f->p;
    p2.ngids = 1;
    p2.gids[0] = 77;
    sa.mask = CORE_SET_GID;
    sa.gid = 77;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, NULL), -EPERM);
    assert_int_equal(core_setattr(f->c, &p2, ino, &sa, NULL, &post), 0);
    assert_int_equal(post.gid, 77);
    /* times */
    sa.mask = CORE_SET_MTIME | CORE_SET_ATIME;
    sa.mtime.tv_sec = 1000;
    sa.atime.tv_sec = 2000;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    assert_int_equal(post.mtime.tv_sec, 1000);
    assert_int_equal(post.atime.tv_sec, 2000);
    /* guard */
    sa.mask = CORE_SET_MODE;
    sa.mode = 0644;
    sa.guard = true;
    sa.guard_ctime = post.ctime;
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), 0);
    assert_int_equal(core_setattr(f->c, &f->p, ino, &sa, NULL, &post), SRV_EPRECOND);
    sa.guard = false;
    /* size on a dir */
    sa.mask = CORE_SET_SIZE;
    sa.size = 0;
    assert_int_equal(core_setattr(f->c, &f->p, f->bucket, &sa, NULL, NULL), -EISDIR);
    /* read-only principal */
    struct core_principal ro = f->p;
    ro.flags = CORE_P_READONLY;
    assert_int_equal(core_setattr(f->c, &ro, ino, &sa, NULL, NULL), -EROFS);
    assert_int_equal(core_create(f->c, &ro, f->bucket, "n", 1, 0644, 0, 0, &a), -EROFS);
    assert_int_equal(core_remove(f->c, &ro, f->bucket, "s", 1), -EROFS);
    assert_int_equal(core_write(f->c, &ro, ino, 0, "x", 1, CORE_FILE_SYNC, NULL, NULL, NULL),
                     -EROFS);
}

static void test_permissions(void **state)
{
    struct fx *f = *state;
    struct core_attr a;
    struct core_setattr sa;
    uint32_t granted;
    uint64_t d = mkd(f, f->bucket, "priv");
    memset(&sa, 0, sizeof(sa));
    sa.mask = CORE_SET_MODE;
    sa.mode = 0750;
    assert_int_equal(core_setattr(f->c, &f->p, d, &sa, NULL, NULL), 0);
    struct core_principal other = f->p;
    other.uid = 2000;
    other.gid = 2000;
    struct core_principal grp = other;
    grp.ngids = 2;
    grp.gids[0] = 5;
    grp.gids[1] = 1000; /* supplementary group of the dir */
    assert_int_equal(core_lookup(f->c, &other, d, "x", 1, &a), -EACCES);
    assert_int_equal(core_lookup(f->c, &grp, d, "x", 1, &a), -ENOENT);
    assert_int_equal(core_create(f->c, &grp, d, "x", 1, 0644, 0, 0, &a), -EACCES);
    assert_int_equal(core_create(f->c, &f->su, d, "x", 1, 0644, 0, 0, &a), 0);
    assert_int_equal(core_access(f->c, &grp, d, R_OK | W_OK | X_OK, &granted), 0);
    assert_int_equal(granted, R_OK | X_OK);
    assert_int_equal(core_access(f->c, &other, d, R_OK | W_OK | X_OK, &granted), 0);
    assert_int_equal(granted, 0);
    /* sticky directory: others may create but not remove each other's files */
    uint64_t tmp = mkd(f, f->bucket, "tmp");
    sa.mode = 01777;
    assert_int_equal(core_setattr(f->c, &f->p, tmp, &sa, NULL, NULL), 0);
    assert_int_equal(core_create(f->c, &other, tmp, "o", 1, 0644, 0, 0, &a), 0);
    struct core_principal third = other;
    third.uid = 3000;
    assert_int_equal(core_remove(f->c, &third, tmp, "o", 1), -EPERM);
    assert_int_equal(core_rename(f->c, &third, tmp, "o", 1, tmp, "o2", 2), -EPERM);
    assert_int_equal(core_remove(f->c, &f->p, tmp, "o", 1), 0); /* dir owner may */
    /* reading and writing another user's 0600 file */
    uint64_t fi = mkfile(f, f->bucket, "secret");
    sa.mode = 0600;
    assert_int_equal(core_setattr(f->c, &f->p, fi, &sa, NULL, NULL), 0);
    char buf[4];
    size_t n;
    bool eof;
    assert_int_equal(core_read(f->c, &other, fi, 0, buf, 4, &n, &eof), -EACCES);
    assert_int_equal(core_write(f->c, &other, fi, 0, "x", 1, CORE_FILE_SYNC, NULL, NULL, NULL),
                     -EACCES);
    assert_int_equal(core_read(f->c, &f->su, fi, 0, buf, 4, &n, &eof), 0);
    /* S3 view of permissions */
    struct core_objinfo oi;
    assert_int_equal(core_key_lookup(f->c, &other, f->bucket, "secret", 6, &oi), -EACCES);
}

/* CORE_P_NOWAIT (an event-loop caller): core_getattr answers -EWOULDBLOCK
 * instead of waiting while a setattr holds the inode, and the same attributes
 * as a waiting caller otherwise, pending UNSTABLE writes included; lookup and
 * access never wait. */
static void test_getattr_nowait(void **state)
{
    struct fx *f = *state;
    struct core_principal nw = f->p;
    nw.flags |= CORE_P_NOWAIT;
    struct core_attr a, b;
    uint32_t granted;
    uint64_t ino = mkfile(f, f->bucket, "held");
    char buf[20000];
    memset(buf, 'h', sizeof(buf));
    enum core_stable st;
    assert_int_equal(core_write(f->c, &f->p, ino, 0, buf, sizeof(buf), CORE_UNSTABLE, &st, NULL,
                                NULL),
                     0);
    assert_int_equal(st, CORE_UNSTABLE);
    assert_int_equal(core_getattr(f->c, &nw, ino, 0, &a), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &b), 0);
    assert_int_equal(a.size, sizeof(buf));
    assert_memory_equal(&a, &b, sizeof(a));

    struct core__pend_batch batch;
    struct core__pend *pp;
    assert_int_equal(core__pend_excl_begin(f->c, ino, &batch, &pp), 0);
    assert_int_equal(core_getattr(f->c, &nw, ino, 0, &a), -EWOULDBLOCK);
    assert_int_equal(core_lookup(f->c, &nw, f->bucket, "held", 4, &a), 0);
    assert_int_equal(a.ino, ino);
    assert_int_equal(core_access(f->c, &nw, ino, R_OK | W_OK, &granted), 0);
    assert_int_equal(granted, R_OK | W_OK);
    /* another inode is not held */
    uint64_t other = mkfile(f, f->bucket, "free");
    assert_int_equal(core_getattr(f->c, &nw, other, 0, &a), 0);
    core__pend_excl_end(f->c, pp, &batch, -EIO, false, 0); /* the "setattr" failed */

    assert_int_equal(core_getattr(f->c, &nw, ino, 0, &a), 0);
    assert_int_equal(a.size, sizeof(buf));
    assert_int_equal(core_commit(f->c, &f->p, ino), 0);
    assert_int_equal(core_getattr(f->c, &nw, ino, 0, &a), 0);
    assert_int_equal(core_getattr(f->c, &f->p, ino, 0, &b), 0);
    assert_int_equal(a.size, sizeof(buf));
    assert_memory_equal(&a, &b, sizeof(a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookup_create, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_symlink_link, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_remove_rmdir, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_rename, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_readdir, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_setattr, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_permissions, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bucket_rename, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_getattr_nowait, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
