/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for server/srv_daemon.c: the pidfile holds our pid, is locked
 * against a second daemon, and is removed at exit. (Detaching is covered by
 * tests/integration/daemon.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "srv_daemon.h"

static void test_pidfile(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_srv_daemon.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/s3nfsd.pid", dir);

    assert_int_equal(srv_pidfile_create(path), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long pid = 0;
    assert_int_equal(fscanf(f, "%ld", &pid), 1);
    fclose(f);
    assert_int_equal(pid, (long)getpid());

    /* A second daemon (another open file description) finds it locked. */
    assert_int_equal(srv_pidfile_create(path), -EEXIST);

    srv_pidfile_remove();
    assert_int_equal(access(path, F_OK), -1);
    srv_pidfile_remove(); /* no-op */

    /* A stale pidfile (no lock holder) is taken over. */
    f = fopen(path, "w");
    fprintf(f, "999999\n");
    fclose(f);
    assert_int_equal(srv_pidfile_create(path), 0);
    srv_pidfile_remove();

    snprintf(path, sizeof(path), "%s/no/such/dir/pid", dir);
    assert_int_equal(srv_pidfile_create(path), -ENOENT);
    assert_int_equal(rmdir(dir), 0);
}

static void test_ready_without_detach(void **state)
{
    (void)state;
    srv_daemon_ready(0); /* not detached: must do nothing (stdout stays open) */
    assert_true(fflush(stdout) == 0);
    assert_true(write(STDOUT_FILENO, "", 0) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pidfile),
        cmocka_unit_test(test_ready_without_detach),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
