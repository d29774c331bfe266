/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for qos/qos_capacity.c: the probe measures something in a
 * scratch directory, removes its file, and refuses bad arguments. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "qos_capacity.h"

static void test_probe_measures_and_cleans_up(void **state)
{
    (void)state;
    char dir[] = "/tmp/qos-cap-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct qos_capacity c;
    assert_int_equal(qos_capacity_probe(dir, 4, &c), 0);
    assert_true(c.disk_write_bps > 0 && c.disk_read_bps > 0 && c.disk_iops > 0);
    assert_true(c.read_bps > 0 && c.read_bps <= c.disk_read_bps);
    assert_true(c.write_bps > 0 && c.write_bps <= c.disk_write_bps);
    assert_int_equal(c.iops, c.disk_iops);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.' || strncmp(e->d_name, ".qos", 4) == 0;
    closedir(d);
    assert_int_equal(n, 0); /* the scratch file is gone */
    assert_int_equal(rmdir(dir), 0);
}

static void test_probe_errors(void **state)
{
    (void)state;
    struct qos_capacity c;
    assert_int_equal(qos_capacity_probe("/tmp", 0, &c), -EINVAL);
    assert_int_equal(qos_capacity_probe("/tmp", 1025, &c), -EINVAL);
    assert_int_equal(qos_capacity_probe("/nonexistent/dir", 1, &c), -ENOENT);
    assert_int_equal(c.read_bps, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_measures_and_cleans_up),
        cmocka_unit_test(test_probe_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
