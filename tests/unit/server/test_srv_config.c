/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for server/srv_config.c and srv_config_table.c: defaults, types
 * and bounds, the config file parser (comments, quotes, errors with line
 * numbers), the command line, reload, and that docs/configuration.md
 * documents every option of the table. */
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

#include "srv_addr.h"
#include "srv_config.h"

static void test_defaults(void **state)
{
    (void)state;
    struct srv_config c;
    assert_int_equal(srv_config_init(&c), 0);
    assert_string_equal(c.data_dir, "./s3nfs-data");
    assert_string_equal(c.s3_listen, "127.0.0.1:9000");
    assert_string_equal(c.admin_listen, "127.0.0.1:9001");
    assert_string_equal(c.nfs_listen, "");
    assert_string_equal(c.log_level, "info");
    assert_false(c.daemonize);
    assert_int_equal(c.s3_max_header_bytes, 64 * 1024);
    assert_true(c.s3_max_object_size == 5ULL << 40);
    assert_int_equal(c.nfs_max_record, 4 * 1024 * 1024 + 64 * 1024);
    assert_int_equal(c.shutdown_timeout_s, 10);
    srv_config_free(&c);
}

static void test_set_types(void **state)
{
    (void)state;
    struct srv_config c;
    char err[300];
    assert_int_equal(srv_config_init(&c), 0);
    assert_int_equal(srv_config_set(&c, "s3-max-conns", "12", err, sizeof(err)), 0);
    assert_int_equal(c.s3_max_conns, 12);
    assert_int_equal(srv_config_set(&c, "s3_max_conns", "0", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "between 1 and"));
    assert_int_equal(srv_config_set(&c, "s3_max_conns", "12x", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "map_size", "2GiB", err, sizeof(err)), 0);
    assert_true(c.map_size == 2ULL << 30);
    assert_int_equal(srv_config_set(&c, "map_size", "64M", err, sizeof(err)), 0);
    assert_true(c.map_size == 64ULL << 20);
    assert_int_equal(srv_config_set(&c, "map_size", "1k", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "map_size", "lots", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "map_size", "99999999999999999999T", err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(srv_config_set(&c, "daemonize", "yes", err, sizeof(err)), 0);
    assert_true(c.daemonize);
    assert_int_equal(srv_config_set(&c, "daemonize", "maybe", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "no_such", "1", err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "unknown option 'no_such'");
    /* Validators. */
    assert_int_equal(srv_config_set(&c, "s3_listen", "[::1]:9000", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&c, "s3_listen", ":9000", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&c, "s3_listen", "::1:9000", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "s3_listen", "host:0", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "s3_listen", "host:70000", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "s3_listen", "host", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "nfs_listen", "", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&c, "log_level", "warn,s3=debug", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&c, "log_level", "loud", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_set(&c, "log_level", "info,zz=debug", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "unknown subsystem"));
    assert_int_equal(srv_config_set(&c, "s3_region", "EU WEST", err, sizeof(err)), -EINVAL);
    srv_config_free(&c);
}

static void test_split_listen(void **state)
{
    (void)state;
    char host[64];
    int port;
    assert_int_equal(srv_addr_split_listen("127.0.0.1:20490", host, sizeof(host), &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 20490);
    assert_int_equal(srv_addr_split_listen("[::1]:2049", host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(srv_addr_split_listen(":80", host, sizeof(host), &port), 0);
    assert_string_equal(host, "");
    assert_int_equal(srv_addr_split_listen("[]:80", host, sizeof(host), &port), -EINVAL);
    assert_int_equal(srv_addr_split_listen("a:-1", host, sizeof(host), &port), -EINVAL);
}

static void test_parse_text(void **state)
{
    (void)state;
    struct srv_config c;
    char err[300];
    assert_int_equal(srv_config_init(&c), 0);
    const char *text = "# a comment\n"
                       "\n"
                       "   s3_listen = 127.0.0.1:9100   # trailing comment\n"
                       "data_dir=\"/tmp/with space#hash\"\n"
                       "log-level = debug\r\n"
                       "s3_domain = \"a\\\"b\"\n"
                       "pidfile = x#y\n";
    assert_int_equal(srv_config_parse_text(&c, text, "t.conf", err, sizeof(err)), 0);
    assert_string_equal(c.s3_listen, "127.0.0.1:9100");
    assert_string_equal(c.data_dir, "/tmp/with space#hash");
    assert_string_equal(c.log_level, "debug");
    assert_string_equal(c.s3_domain, "a\"b");
    assert_string_equal(c.pidfile, "x#y");

    assert_int_equal(srv_config_parse_text(&c, "\n\nbogus = 1\n", "t.conf", err, sizeof(err)),
                     -ENOENT);
    assert_string_equal(err, "t.conf:3: unknown option 'bogus'");
    assert_int_equal(srv_config_parse_text(&c, "s3_listen\n", "t.conf", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "t.conf:1: expected 'name = value'"));
    assert_int_equal(srv_config_parse_text(&c, "a=1\n", "x", err, sizeof(err)), -ENOENT);
    assert_int_equal(srv_config_parse_text(&c, " = 1\n", "x", err, sizeof(err)), -EINVAL);
    assert_int_equal(srv_config_parse_text(&c, "data_dir = \"abc\n", "x", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "x:1: data_dir: unterminated"));
    assert_int_equal(srv_config_parse_text(&c, "data_dir = \"abc\" z\n", "x", err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(srv_config_parse_text(&c, "s3_max_conns = -5\n", "x", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "x:1: bad value '-5' for s3_max_conns"));
    srv_config_free(&c);
}

static void test_dump_roundtrip(void **state)
{
    (void)state;
    struct srv_config a, b;
    char err[300];
    assert_int_equal(srv_config_init(&a), 0);
    assert_int_equal(srv_config_set(&a, "data_dir", "/x y/#z\"q", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&a, "map_size", "3GiB", err, sizeof(err)), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    srv_config_dump(&a, f);
    fclose(f);
    assert_int_equal(srv_config_init(&b), 0);
    assert_int_equal(srv_config_parse_text(&b, buf, "dump", err, sizeof(err)), 0);
    assert_string_equal(b.data_dir, "/x y/#z\"q");
    assert_true(b.map_size == 3ULL << 30);
    free(buf);
    srv_config_free(&a);
    srv_config_free(&b);
}

static void test_cli(void **state)
{
    (void)state;
    char err[300];
    struct srv_cli cli;
    struct srv_config c;
    char *argv[] = {"s3nfsd",          "--data-dir",  "/tmp/d",         "--s3-listen",
                    "127.0.0.1:9500",  "--set",       "s3_max_conns=7", "--foreground",
                    "--log-level=warn", "--check-config", NULL};
    assert_int_equal(srv_cli_parse(&cli, 10, argv, err, sizeof(err)), 0);
    assert_true(cli.check_config);
    assert_null(cli.config_path);
    assert_int_equal(srv_config_build(&c, &cli, err, sizeof(err)), 0);
    assert_string_equal(c.data_dir, "/tmp/d");
    assert_string_equal(c.s3_listen, "127.0.0.1:9500");
    assert_int_equal(c.s3_max_conns, 7);
    assert_string_equal(c.log_level, "warn");
    assert_false(c.daemonize);
    srv_config_free(&c);
    srv_cli_free(&cli);

    char *bad1[] = {"s3nfsd", "--bogus", NULL};
    assert_int_equal(srv_cli_parse(&cli, 2, bad1, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "unknown option '--bogus'"));
    srv_cli_free(&cli);
    char *bad2[] = {"s3nfsd", "--set", "novalue", NULL};
    assert_int_equal(srv_cli_parse(&cli, 3, bad2, err, sizeof(err)), -EINVAL);
    srv_cli_free(&cli);
    char *bad3[] = {"s3nfsd", "--data-dir", NULL};
    assert_int_equal(srv_cli_parse(&cli, 2, bad3, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "needs a value"));
    srv_cli_free(&cli);
    char *bad4[] = {"s3nfsd", "--set", "nope=1", NULL};
    assert_int_equal(srv_cli_parse(&cli, 3, bad4, err, sizeof(err)), 0);
    assert_int_equal(srv_config_build(&c, &cli, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "command line: unknown option 'nope'"));
    srv_cli_free(&cli);
    char *extra[] = {"s3nfsd", "stray", NULL};
    assert_int_equal(srv_cli_parse(&cli, 2, extra, err, sizeof(err)), -EINVAL);
    srv_cli_free(&cli);
}

static void test_cli_config_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_srv_config.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "s3_listen = 127.0.0.1:9100\ns3_max_conns = 5\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char err[300];
    struct srv_cli cli;
    struct srv_config c;
    char *argv[] = {"s3nfsd", "--config", path, "--set", "s3_max_conns=9", NULL};
    assert_int_equal(srv_cli_parse(&cli, 5, argv, err, sizeof(err)), 0);
    assert_int_equal(srv_config_build(&c, &cli, err, sizeof(err)), 0);
    assert_string_equal(c.s3_listen, "127.0.0.1:9100"); /* from the file */
    assert_int_equal(c.s3_max_conns, 9);                 /* command line wins */
    srv_config_free(&c);
    srv_cli_free(&cli);
    unlink(path);
    char *missing[] = {"s3nfsd", "--config", "/nonexistent/s3nfs.conf", NULL};
    assert_int_equal(srv_cli_parse(&cli, 3, missing, err, sizeof(err)), 0);
    assert_int_equal(srv_config_build(&c, &cli, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/s3nfs.conf: cannot open"));
    srv_cli_free(&cli);
}

struct changes {
    int changed, ignored;
    char last[64];
};

static void on_changed(void *arg, const struct srv_config_opt *o, const char *old,
                       const char *now)
{
    struct changes *ch = arg;
    ch->changed++;
    snprintf(ch->last, sizeof(ch->last), "%s:%s->%s", o->name, old, now);
}

static void on_ignored(void *arg, const struct srv_config_opt *o, const char *old,
                       const char *now)
{
    ((struct changes *)arg)->ignored++;
}

static void test_reload(void **state)
{
    (void)state;
    struct srv_config live, fresh;
    char err[300];
    struct changes ch = {0};
    assert_int_equal(srv_config_init(&live), 0);
    assert_int_equal(srv_config_init(&fresh), 0);
    assert_int_equal(srv_config_set(&fresh, "log_level", "debug", err, sizeof(err)), 0);
    assert_int_equal(srv_config_set(&fresh, "s3_listen", "127.0.0.1:1", err, sizeof(err)), 0);
    assert_int_equal(srv_config_reload(&live, &fresh, on_changed, on_ignored, &ch), 1);
    assert_int_equal(ch.changed, 1);
    assert_int_equal(ch.ignored, 1);
    assert_string_equal(ch.last, "log_level:info->debug");
    assert_string_equal(live.log_level, "debug");
    assert_string_equal(live.s3_listen, "127.0.0.1:9000"); /* not reloadable */
    srv_config_free(&live);
    srv_config_free(&fresh);
}

/* Every option of the table is documented in docs/configuration.md. */
static void test_docs_cover_table(void **state)
{
    (void)state;
    FILE *f = fopen(SRCDIR "/docs/configuration.md", "r");
    assert_non_null(f);
    static char doc[262144];
    size_t n = fread(doc, 1, sizeof(doc) - 1, f);
    doc[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < srv_config_table_len; i++) {
        char needle[96];
        snprintf(needle, sizeof(needle), "| `%s` |", srv_config_table[i].name);
        if (!strstr(doc, needle))
            fail_msg("option %s is not documented in docs/configuration.md",
                     srv_config_table[i].name);
    }
}

static void test_table_sane(void **state)
{
    (void)state;
    for (size_t i = 0; i < srv_config_table_len; i++) {
        const struct srv_config_opt *o = &srv_config_table[i];
        assert_non_null(o->help);
        assert_ptr_equal(srv_config_find(o->name), o);
        for (size_t j = i + 1; j < srv_config_table_len; j++)
            assert_string_not_equal(o->name, srv_config_table[j].name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_set_types),
        cmocka_unit_test(test_split_listen),
        cmocka_unit_test(test_parse_text),
        cmocka_unit_test(test_dump_roundtrip),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_config_file),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_docs_cover_table),
        cmocka_unit_test(test_table_sane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
