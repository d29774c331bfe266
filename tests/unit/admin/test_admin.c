/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for admin/admin.c and admin_api.c: a real admin listener on a
 * loopback port over a real core in a temp dir, driven by raw HTTP/1.1
 * requests: /healthz before and after ready, /metrics, bearer-token checks,
 * and the REST resources with their status codes; the admin error codes of
 * both tables (SRV_ERR_MAP, ADMIN_ERR_MAP) and docs/admin-api.md agree. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/sha.h>

#include "admin.h"
#include "admin_int.h"
#include "core.h"
#include "qos_admit.h"
#include "srv_err.h"
#include "tenants.h"

#define TOKEN "unit-test-token-123"

static char dir[64];
static int port;
static struct core *core;
static struct tenants *tenants;
static struct qos *qos;
static struct admin *admin;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* One request on a fresh connection. @return the status; body into @p out. */
static int http(const char *method, const char *path, const char *token, const char *body,
                char *out, size_t outlen)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[4096];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s%s%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, token ? "Authorization: Bearer " : "", token ? token : "",
                     token ? "\r\n" : "", body ? strlen(body) : 0, body ? body : "");
    assert_int_equal(write(s, req, (size_t)n), n);
    static char resp[65536];
    size_t got = 0;
    ssize_t r;
    while ((r = read(s, resp + got, sizeof(resp) - 1 - got)) > 0)
        got += (size_t)r;
    close(s);
    resp[got] = '\0';
    int status = 0;
    assert_int_equal(sscanf(resp, "HTTP/1.%*d %d", &status), 1);
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(out, outlen, "%s", b ? b + 4 : "");
    return status;
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test_admin.XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct core_config cfg = {.data_dir = dir, .data_file_size = 64ull << 20, .data_files = 1,
                              .map_size = 64ull << 20};
    assert_int_equal(core_open(&core, &cfg), 0);
    assert_int_equal(tenants_open(&tenants, core, "AKIAADMINTEST", "admin-test-secret", NULL,
                                  NULL, NULL), 0);
    struct qos_config qc = {.enabled = true};
    assert_int_equal(qos_open(&qos, core, &qc), 0);
    char listen[32];
    port = free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    struct admin_config ac = {.listen = listen, .have_token = true};
    SHA256((const unsigned char *)TOKEN, strlen(TOKEN), ac.token_sha256);
    assert_int_equal(admin_start(&admin, &ac, core, tenants, qos), 0);
    return 0;
}

static int teardown(void **state)
{
    admin_stop(admin);
    qos_close(qos);
    tenants_close(tenants);
    core_close(core);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_health_metrics_auth(void **state)
{
    char b[8192];
    assert_int_equal(http("GET", "/healthz", NULL, NULL, b, sizeof(b)), 503);
    admin_set_ready(admin, true);
    assert_int_equal(http("GET", "/healthz", NULL, NULL, b, sizeof(b)), 200);
    assert_string_equal(b, "ok\n");
    assert_int_equal(http("GET", "/metrics", NULL, NULL, b, sizeof(b)), 200);
    assert_non_null(strstr(b, "s3nfs_ops_total{proto=\"admin\",op=\"healthz\",tenant=\"0\"} 2"));
    assert_int_equal(http("GET", "/nope", NULL, NULL, b, sizeof(b)), 404);
    assert_int_equal(http("POST", "/healthz", NULL, NULL, b, sizeof(b)), 405);
    assert_int_equal(http("GET", "/api/v1/tenants", NULL, NULL, b, sizeof(b)), 401);
    assert_int_equal(http("GET", "/api/v1/tenants", "wrong", NULL, b, sizeof(b)), 403);
    assert_int_equal(http("GET", "/api/v1/tenants", TOKEN, NULL, b, sizeof(b)), 200);
    assert_non_null(strstr(b, "\"name\":\"default\""));
}

static void test_rest(void **state)
{
    char b[8192];
    assert_int_equal(http("POST", "/api/v1/tenants", TOKEN, "{\"name\":\"acme\"}", b, sizeof(b)),
                     201);
    assert_non_null(strstr(b, "\"id\":2"));
    assert_int_equal(http("POST", "/api/v1/tenants", TOKEN, "{\"name\":\"acme\"}", b, sizeof(b)),
                     409);
    assert_int_equal(http("POST", "/api/v1/tenants", TOKEN, "{\"name\":\"a b\"}", b, sizeof(b)),
                     400);
    assert_int_equal(http("POST", "/api/v1/tenants", TOKEN, "not json", b, sizeof(b)), 400);
    assert_int_equal(http("POST", "/api/v1/tenants", TOKEN, "{}", b, sizeof(b)), 400);
    assert_int_equal(http("GET", "/api/v1/tenants/2", TOKEN, NULL, b, sizeof(b)), 200);
    assert_int_equal(http("GET", "/api/v1/tenants/99", TOKEN, NULL, b, sizeof(b)), 404);
    assert_int_equal(http("GET", "/api/v1/tenants/x", TOKEN, NULL, b, sizeof(b)), 404);

    assert_int_equal(http("POST", "/api/v1/tenants/2/users", TOKEN,
                          "{\"name\":\"dave\",\"uid\":1001,\"gid\":1001,\"gids\":[7]}", b,
                          sizeof(b)),
                     201);
    assert_non_null(strstr(b, "\"uid\":1001"));
    assert_int_equal(http("POST", "/api/v1/tenants/2/users", TOKEN,
                          "{\"name\":\"eve\",\"uid\":-1}", b, sizeof(b)),
                     400);
    assert_int_equal(http("POST", "/api/v1/tenants/2/users/2/keys", TOKEN, NULL, b, sizeof(b)),
                     201);
    char ak[64] = "", sk[64] = "";
    assert_int_equal(sscanf(strstr(b, "\"access_key\":\"") + 14, "%63[^\"]", ak), 1);
    assert_int_equal(sscanf(strstr(b, "\"secret_key\":\"") + 14, "%63[^\"]", sk), 1);
    char secret[TENANT_SECRET_MAX + 1];
    struct core_principal p;
    assert_int_equal(tenants_key_lookup(tenants, ak, secret, &p), 0);
    assert_string_equal(secret, sk);
    assert_int_equal(p.uid, 1001);
    /* Listing never shows secrets. */
    assert_int_equal(http("GET", "/api/v1/tenants/2/keys", TOKEN, NULL, b, sizeof(b)), 200);
    assert_non_null(strstr(b, ak));
    assert_null(strstr(b, sk));
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/keys/%s", ak);
    assert_int_equal(http("PATCH", path, TOKEN, "{\"disabled\":true}", b, sizeof(b)), 200);
    assert_int_equal(tenants_key_lookup(tenants, ak, secret, &p), -EACCES);
    assert_int_equal(http("PATCH", "/api/v1/tenants/2/users/2", TOKEN, "{\"uid\":1500}", b,
                          sizeof(b)),
                     200);
    assert_non_null(strstr(b, "\"uid\":1500"));

    assert_int_equal(http("POST", "/api/v1/tenants/2/exports", TOKEN,
                          "{\"path\":\"/acme\",\"clients\":[\"10.0.0.0/8\"],\"read_only\":true}",
                          b, sizeof(b)),
                     201);
    assert_non_null(strstr(b, "\"read_only\":true"));
    assert_int_equal(http("POST", "/api/v1/tenants/2/exports", TOKEN,
                          "{\"path\":\"/x\",\"clients\":[\"nonsense\"]}", b, sizeof(b)),
                     400);
    assert_int_equal(http("GET", "/api/v1/tenants/2/exports", TOKEN, NULL, b, sizeof(b)), 200);
    assert_non_null(strstr(b, "10.0.0.0/8"));

    assert_int_equal(http("PUT", "/api/v1/tenants/2/quota", TOKEN,
                          "{\"bytes_limit\":1048576,\"inodes_limit\":10}", b, sizeof(b)),
                     200);
    assert_non_null(strstr(b, "\"bytes_limit\":1048576"));
    assert_int_equal(http("GET", "/api/v1/tenants/2/usage", TOKEN, NULL, b, sizeof(b)), 200);
    assert_non_null(strstr(b, "\"inodes_limit\":10"));
    assert_int_equal(http("GET", "/api/v1/tenants/2/buckets/none/usage", TOKEN, NULL, b,
                          sizeof(b)),
                     404);

    assert_int_equal(http("PUT", "/api/v1/tenants/2/qos", TOKEN, "{\"write_bps\":5000}", b,
                          sizeof(b)),
                     200);
    struct qos_policy pol;
    assert_int_equal(qos_policy_get(qos, 2, &pol), 0);
    assert_int_equal(pol.write_bps, 5000);
    assert_int_equal(http("PUT", "/api/v1/tenants/2/qos", TOKEN, "{\"write_bps\":\"fast\"}", b,
                          sizeof(b)),
                     400);
    assert_int_equal(http("DELETE", "/api/v1/tenants/2/qos", TOKEN, NULL, b, sizeof(b)), 204);
    assert_int_equal(qos_policy_get(qos, 2, &pol), -ENOENT);
    assert_int_equal(http("PUT", "/api/v1/tenants/2/users/2/qos", TOKEN, "{\"read_iops\":9}",
                          b, sizeof(b)),
                     200);
    assert_non_null(strstr(b, "\"user\":2"));
    assert_int_equal(qos_policy_get_user(qos, 2, 2, &pol), 0);
    assert_int_equal(pol.read_iops, 9);
    assert_int_equal(http("PUT", "/api/v1/tenants/2/users/99/qos", TOKEN, "{}", b, sizeof(b)),
                     404);

    assert_int_equal(http("DELETE", "/api/v1/tenants/2", TOKEN, NULL, b, sizeof(b)), 204);
    assert_int_equal(http("GET", "/api/v1/tenants/2", TOKEN, NULL, b, sizeof(b)), 404);
    assert_int_equal(tenants_key_lookup(tenants, ak, secret, &p), -ENOENT);
    assert_int_equal(qos_policy_get_user(qos, 2, 2, &pol), -ENOENT); /* went with the tenant */
    assert_int_equal(http("PUT", "/api/v1/tenants", TOKEN, NULL, b, sizeof(b)), 405);
    assert_non_null(strstr(b, "\"error\":\"MethodNotAllowed\""));
    assert_int_equal(http("GET", "/api/v1/tenants/x", TOKEN, NULL, b, sizeof(b)), 404);
    assert_non_null(strstr(b, "\"error\":\"NotFound\""));
}

/* Every admin answer has one status wherever it is written, and the docs list it. */
static void test_error_codes(void **state)
{
    (void)state;
    FILE *f = fopen(SRCDIR "/docs/admin-api.md", "r");
    assert_non_null(f);
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    doc[n] = 0;
    size_t nmap, nonly;
    const struct srv_err_info *t = srv_err_table(&nmap);
    const struct admin_err_info *admin_only = admin__err_table(&nonly);
    size_t nall = nmap + nonly;
    for (size_t i = 0; i < nall; i++) {
        const char *code = i < nmap ? t[i].admin : admin_only[i - nmap].code;
        int status = i < nmap ? t[i].admin_http : admin_only[i - nmap].status;
        if (status < 300)
            continue;
        char want[96];
        snprintf(want, sizeof(want), "`%d %s`", status, code);
        if (!strstr(doc, want))
            fail_msg("docs/admin-api.md does not list %s", want);
        for (size_t j = 0; j < nmap; j++) {
            if (strcmp(t[j].admin, code) == 0 && t[j].admin_http != status)
                fail_msg("admin code %s answers both %d and %d", code, status, t[j].admin_http);
        }
        if (i >= nmap)
            continue;
        for (size_t j = 0; j < nonly; j++)
            if (strcmp(admin_only[j].code, code) == 0)
                fail_msg("admin code %s is in both tables", code);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_metrics_auth),
        cmocka_unit_test(test_rest),
        cmocka_unit_test(test_error_codes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
