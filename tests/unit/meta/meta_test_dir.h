/* SPDX-License-Identifier: Apache-2.0
 * meta_test_dir: a fresh store folder under /tmp for a meta unit test, and its
 * removal (header-only; for cmocka setup and teardown functions). */
#ifndef META_TEST_DIR_H
#define META_TEST_DIR_H

#include <stdio.h>
#include <stdlib.h>

/** Makes /tmp/meta-@p tag-XXXXXX into @p dir (of @p n bytes). @return 0 or -1. */
static inline int meta_test_dir_make(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/meta-%s-XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

/** Removes folder @p dir and what it holds. @return 0 or -1. */
static inline int meta_test_dir_remove(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
