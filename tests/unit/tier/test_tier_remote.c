/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for tier/tier_remote.c (endpoint parsing, the address classes of
 * the SSRF rule, resolving with and without private addresses allowed, and a
 * check against a port nobody listens on) and tier/tier_policy.c (validation
 * and the stored form of a bucket's tier policy). The checks against a real
 * remote are in tests/integration/tier/test_tier_remotes.py. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "srv_err.h"
#include "tier_evict.h"
#include "tier_policy.h"
#include "tier_remote.h"
#include "tier_s3.h"

static void test_endpoint_parse(void **state)
{
    (void)state;
    struct tier_endpoint ep;
    char why[200];
    assert_int_equal(tier_endpoint_parse("http://s3.example.com", &ep, why, sizeof(why)), 0);
    assert_false(ep.https);
    assert_string_equal(ep.host, "s3.example.com");
    assert_int_equal(ep.port, 80);
    assert_int_equal(tier_endpoint_parse("HTTPS://10.1.2.3:9000/", &ep, why, sizeof(why)), 0);
    assert_true(ep.https);
    assert_string_equal(ep.host, "10.1.2.3");
    assert_int_equal(ep.port, 9000);
    assert_int_equal(tier_endpoint_parse("https://[::1]:8443", &ep, why, sizeof(why)), 0);
    assert_string_equal(ep.host, "::1");
    assert_int_equal(ep.port, 8443);
    assert_int_equal(tier_endpoint_parse("https://[fe80::1]", &ep, why, sizeof(why)), 0);
    assert_int_equal(ep.port, 443);

    const char *bad[] = {"ftp://h",       "h:80",
                         "http://",       "http://h/path",
                         "http://h:0",    "http://h:65536",
                         "http://h:x",    "http://[::1",
                         "http://[::1]x", "http://user@h",
                         "http://h?x=1",  "http://h h",
                         "http://h:",     NULL};
    for (int i = 0; bad[i]; i++) {
        why[0] = '\0';
        assert_int_equal(tier_endpoint_parse(bad[i], &ep, why, sizeof(why)), -EINVAL);
        assert_true(why[0] != '\0');
    }
    assert_int_equal(tier_endpoint_parse(NULL, &ep, NULL, 0), -EINVAL);
}

static enum srv_addr_class cls(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
    }
    return srv_addr_classify((struct sockaddr *)&ss);
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(cls("127.0.0.1"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("127.255.1.2"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("0.0.0.0"), SRV_ADDR_UNSPEC);
    assert_int_equal(cls("0.1.2.3"), SRV_ADDR_UNSPEC);
    assert_int_equal(cls("169.254.169.254"), SRV_ADDR_LINKLOCAL); /* cloud metadata */
    assert_int_equal(cls("224.0.0.1"), SRV_ADDR_MULTICAST);
    assert_int_equal(cls("255.255.255.255"), SRV_ADDR_MULTICAST);
    assert_int_equal(cls("10.0.0.1"), SRV_ADDR_REMOTE);
    assert_int_equal(cls("8.8.8.8"), SRV_ADDR_REMOTE);
    assert_int_equal(cls("128.0.0.1"), SRV_ADDR_REMOTE);
    assert_int_equal(cls("::"), SRV_ADDR_UNSPEC);
    assert_int_equal(cls("::1"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("fe80::1"), SRV_ADDR_LINKLOCAL);
    assert_int_equal(cls("febf::1"), SRV_ADDR_LINKLOCAL);
    assert_int_equal(cls("fec0::1"), SRV_ADDR_REMOTE);
    assert_int_equal(cls("ff02::1"), SRV_ADDR_MULTICAST);
    assert_int_equal(cls("2001:db8::1"), SRV_ADDR_REMOTE);
    /* IPv4 inside IPv6: judged by the IPv4 address */
    assert_int_equal(cls("::ffff:127.0.0.1"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("::ffff:169.254.1.1"), SRV_ADDR_LINKLOCAL);
    assert_int_equal(cls("::ffff:8.8.8.8"), SRV_ADDR_REMOTE);
    assert_int_equal(cls("::127.0.0.1"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("64:ff9b::7f00:1"), SRV_ADDR_LOOPBACK);
    assert_int_equal(cls("64:ff9b::808:808"), SRV_ADDR_REMOTE);
    struct sockaddr sa = {.sa_family = AF_UNIX};
    assert_int_equal(srv_addr_classify(&sa), SRV_ADDR_UNSPEC);
    assert_string_equal(srv_addr_class_name(SRV_ADDR_LINKLOCAL), "link-local");
}

static void test_resolve(void **state)
{
    (void)state;
    char addr[TIER_REMOTE_ADDR_MAX], why[300];
    struct tier_s3_config cfg = {.endpoint = "http://127.0.0.1:9", .bucket = "b"};
    assert_int_equal(tier_remote_resolve(&cfg, true, addr, sizeof(addr), why, sizeof(why)), 0);
    assert_string_equal(addr, "127.0.0.1");
    why[0] = '\0';
    assert_int_equal(tier_remote_resolve(&cfg, false, addr, sizeof(addr), why, sizeof(why)),
                     -EACCES);
    assert_non_null(strstr(why, "loopback"));
    assert_non_null(strstr(why, "tier_allow_private_remotes"));
    cfg.endpoint = "http://[::1]:9";
    assert_int_equal(tier_remote_resolve(&cfg, false, addr, sizeof(addr), why, sizeof(why)),
                     -EACCES);
    cfg.endpoint = "http://169.254.169.254";
    assert_int_equal(tier_remote_resolve(&cfg, false, addr, sizeof(addr), why, sizeof(why)),
                     -EACCES);
    assert_non_null(strstr(why, "link-local"));
    cfg.endpoint = "http://0.0.0.0:80";
    assert_int_equal(tier_remote_resolve(&cfg, false, addr, sizeof(addr), why, sizeof(why)),
                     -EACCES);
    cfg.endpoint = "http://localhost:80"; /* a name leading to loopback */
    assert_int_equal(tier_remote_resolve(&cfg, false, addr, sizeof(addr), why, sizeof(why)),
                     -EACCES);
    /* virtual-host addressing resolves bucket.host */
    cfg.endpoint = "http://localhost:80";
    cfg.virtual_host = true;
    cfg.bucket = "no-such-bucket-name";
    int rc = tier_remote_resolve(&cfg, true, addr, sizeof(addr), why, sizeof(why));
    assert_true(rc == 0 || rc == -EHOSTUNREACH);
    cfg.virtual_host = false;
    cfg.endpoint = "http://no-such-host.invalid";
    assert_int_equal(tier_remote_resolve(&cfg, true, addr, sizeof(addr), why, sizeof(why)),
                     -EHOSTUNREACH);
    cfg.endpoint = "gopher://x";
    assert_int_equal(tier_remote_resolve(&cfg, true, addr, sizeof(addr), why, sizeof(why)),
                     -EINVAL);
}

/* A port with no listener: the check fails as unreachable, with a message. */
static void test_check_refused(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    close(fd); /* the port is free now, and nobody listens */
    char ep[64], why[320];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", ntohs(sin.sin_port));
    struct tier_s3_config cfg = {.endpoint = ep,
                                 .bucket = "bkt",
                                 .access_key = "AK",
                                 .secret_key = "SECRETSECRET",
                                 .connect_timeout_ms = 2000};
    int rc = tier_remote_check(&cfg, why, sizeof(why));
    assert_int_equal(rc, -ECONNREFUSED);
    assert_non_null(strstr(why, "127.0.0.1"));
    assert_null(strstr(why, "SECRETSECRET"));
    cfg.access_key = NULL; /* refused by the client up front */
    assert_int_equal(tier_remote_check(&cfg, why, sizeof(why)), -EINVAL);
}

static void test_policy(void **state)
{
    (void)state;
    struct tier_policy p = {.remote = 7, .upload_after_s = 30}, q;
    char why[100];
    uint8_t buf[TIER_POLICY_MAX];
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), 0);
    assert_int_equal(tier_policy_encode(&p, buf), TIER_POLICY_LEN);
    assert_int_equal(buf[0], 1); /* no eviction: what version 1 builds read */
    assert_int_equal(buf[7], 7); /* be32 remote */
    assert_int_equal(buf[11], 30);
    memset(&q, 0xff, sizeof(q));
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), 0);
    assert_int_equal(q.remote, 7);
    assert_int_equal(q.upload_after_s, 30);
    /* longer (a later version's additions): read */
    memset(buf + TIER_POLICY_LEN, 0xaa, 8);
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN + 8, &q), 0);
    /* short, version 0, newer version, bad fields */
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN - 1, &q), -EINVAL);
    buf[0] = 0;
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), -EINVAL);
    buf[0] = TIER_POLICY_VERSION + 1;
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), SRV_EBADVERSION);
    p.remote = 0;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "remote"));
    tier_policy_encode(&p, buf);
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), -EINVAL);
    p.remote = 1;
    p.upload_after_s = TIER_UPLOAD_AFTER_MAX;
    assert_int_equal(tier_policy_validate(&p, NULL, 0), 0);
    p.upload_after_s = TIER_UPLOAD_AFTER_MAX + 1;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "upload_after_s"));
}

/* The storage class a remote stands for (lifecycle Transition): byte 2 of the stored
 * form, 0 (what older policies hold) meaning STANDARD_IA. */
static void test_policy_sclass(void **state)
{
    (void)state;
    struct tier_policy p = {.remote = 7, .upload_after_s = 30}, q;
    uint8_t buf[TIER_POLICY_MAX];
    assert_string_equal(tier_sclass_name(TIER_SC_STANDARD_IA), "STANDARD_IA");
    assert_string_equal(tier_sclass_name(TIER_SC_DEEP_ARCHIVE), "DEEP_ARCHIVE");
    assert_null(tier_sclass_name(TIER_SC__COUNT));
    assert_int_equal(tier_sclass_parse("GLACIER"), TIER_SC_GLACIER);
    assert_int_equal(tier_sclass_parse("GLACIER_IR"), TIER_SC_GLACIER_IR);
    assert_int_equal(tier_sclass_parse("ONEZONE_IA"), TIER_SC_ONEZONE_IA);
    assert_int_equal(tier_sclass_parse("INTELLIGENT_TIERING"), TIER_SC_INTELLIGENT_TIERING);
    assert_int_equal(tier_sclass_parse("STANDARD"), -1);
    assert_int_equal(tier_sclass_parse("glacier"), -1);
    assert_int_equal(tier_sclass_parse(NULL), -1);
    /* version 1 stays version 1; the class rides in the reserved byte */
    assert_int_equal(tier_policy_encode(&p, buf), TIER_POLICY_LEN);
    assert_int_equal(buf[2], 0);
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), 0);
    assert_int_equal(q.sclass, TIER_SC_STANDARD_IA);
    p.sclass = TIER_SC_GLACIER;
    assert_int_equal(tier_policy_encode(&p, buf), TIER_POLICY_LEN);
    assert_int_equal(buf[0], 1);
    assert_int_equal(buf[2], TIER_SC_GLACIER);
    assert_int_equal(tier_policy_decode(buf, TIER_POLICY_LEN, &q), 0);
    assert_int_equal(q.sclass, TIER_SC_GLACIER);
    /* and in version 2 */
    p.evict_after_s = 60;
    size_t n = tier_policy_encode(&p, buf);
    assert_int_equal(buf[0], 2);
    assert_int_equal(tier_policy_decode(buf, n, &q), 0);
    assert_int_equal(q.sclass, TIER_SC_GLACIER);
    /* a code this build does not know */
    buf[2] = TIER_SC__COUNT;
    assert_int_equal(tier_policy_decode(buf, n, &q), -EINVAL);
    p.sclass = TIER_SC__COUNT;
    assert_int_equal(tier_policy_validate(&p, NULL, 0), -EINVAL);
}

static void test_policy_evict(void **state)
{
    (void)state;
    struct tier_policy p = {.remote = 3,
                            .upload_after_s = 5,
                            .evict_after_s = 600,
                            .evict_high = 9000,
                            .evict_low = 7550,
                            .npins = 2},
                       q;
    char why[160];
    uint8_t buf[TIER_POLICY_MAX];
    snprintf(p.pins[0], sizeof(p.pins[0]), "models/");
    snprintf(p.pins[1], sizeof(p.pins[1]), "hot");
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), 0);
    size_t n = tier_policy_encode(&p, buf);
    assert_int_equal(n, TIER_POLICY_LEN + 12 + 2 + 7 + 2 + 3);
    assert_int_equal(buf[0], 2);
    memset(&q, 0xee, sizeof(q));
    assert_int_equal(tier_policy_decode(buf, n, &q), 0);
    assert_int_equal(q.evict_after_s, 600);
    assert_int_equal(q.evict_high, 9000);
    assert_int_equal(q.evict_low, 7550);
    assert_int_equal(q.npins, 2);
    assert_string_equal(q.pins[0], "models/");
    assert_string_equal(q.pins[1], "hot");
    assert_true(tier_policy_pinned(&q, "models/a.bin", 12));
    assert_true(tier_policy_pinned(&q, "hotter", 6));
    assert_false(tier_policy_pinned(&q, "model", 5));
    assert_false(tier_policy_pinned(&q, "cold/hot", 8));
    assert_true(tier_policy_evicts(&q));
    /* every cut short is refused, never half read */
    for (size_t k = TIER_POLICY_LEN; k < n; k++)
        assert_int_equal(tier_policy_decode(buf, k, &q), -EINVAL);
    /* watermarks: both or neither, low below high */
    p.evict_low = 0;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "evict_watermark"));
    p.evict_low = 9000;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    p.evict_low = 100;
    p.evict_high = TIER_WM_MAX + 1;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    p.evict_high = 200;
    p.evict_after_s = TIER_EVICT_AFTER_MAX + 1;
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    p.evict_after_s = 0;
    p.pins[1][0] = '\0';
    assert_int_equal(tier_policy_validate(&p, why, sizeof(why)), -EINVAL);
    /* no eviction field: version 1 form */
    struct tier_policy v1 = {.remote = 1};
    assert_false(tier_policy_evicts(&v1));
    assert_int_equal(tier_policy_encode(&v1, buf), TIER_POLICY_LEN);
}

static void test_evict_plan(void **state)
{
    (void)state;
    /* by age: only files not read for after_s; the order is least recently read first */
    struct tier_evict_cand v[5] = {
        {.ino = 1, .bytes = 10, .last_s = 1000, .after_s = 100},
        {.ino = 2, .bytes = 10, .last_s = 950, .after_s = 100},
        {.ino = 3, .bytes = 10, .last_s = 850, .after_s = 100},
        {.ino = 4, .bytes = 10, .last_s = 899, .after_s = 100},
        {.ino = 5, .bytes = 10, .last_s = 100, .after_s = 0}, /* no age rule */
    };
    assert_int_equal(tier_evict_plan(v, 5, 1000, 0, 0, 1), 2);
    assert_int_equal(v[0].ino, 5);
    assert_false(v[0].pick);
    assert_int_equal(v[1].ino, 3);
    assert_true(v[1].pick);
    assert_int_equal(v[2].ino, 4);
    assert_true(v[2].pick);
    assert_false(v[3].pick);
    assert_false(v[4].pick);

    /* watermarks: over high (90 %): least recently read first until under low (50 %) */
    struct tier_evict_cand w[4] = {
        {.ino = 10, .bytes = 20, .last_s = 40, .high = 9000, .low = 5000},
        {.ino = 11, .bytes = 20, .last_s = 10, .high = 9000, .low = 5000},
        {.ino = 12, .bytes = 20, .last_s = 30, .high = 9000, .low = 5000},
        {.ino = 13, .bytes = 20, .last_s = 20, .high = 9000, .low = 5000},
    };
    assert_int_equal(tier_evict_plan(w, 4, 50, 95, 100, 1), 3); /* 95 -> 75 -> 55 -> 35 */
    assert_int_equal(w[0].ino, 11);
    assert_true(w[0].pick && w[1].pick && w[2].pick);
    assert_false(w[3].pick);
    /* under high: nothing */
    assert_int_equal(tier_evict_plan(w, 4, 50, 90, 100, 1), 0);
    /* no capacity known: no watermark rule */
    assert_int_equal(tier_evict_plan(w, 4, 50, 95, 0, 1), 0);
    /* the age rule's bytes count first: 95 - 20 = 75 < 90, nothing more */
    w[3].after_s = 1;
    assert_int_equal(tier_evict_plan(w, 4, 50, 95, 100, 1), 1);
    /* a group whose watermark did not fire keeps its files */
    struct tier_evict_cand g[2] = {
        {.ino = 20, .bytes = 10, .last_s = 1, .high = 9500, .low = 100, .group = 0},
        {.ino = 21, .bytes = 10, .last_s = 2, .high = 5000, .low = 100, .group = 1},
    };
    assert_int_equal(tier_evict_plan(g, 2, 50, 60, 100, 2), 1);
    assert_false(g[0].pick);
    assert_true(g[1].pick);
}

static void test_dir_policies(void **state)
{
    (void)state;
    struct tier_dirpol v[3] = {
        {.dir = 100, .set = TIER_D_UPLOAD, .upload_after_s = 5},
        {.dir = 101,
         .set = TIER_D_KEEP | TIER_D_PRIO,
         .keep_local = 1,
         .evict_priority = TIER_PRIO_LOW},
        {.dir = 102, .set = TIER_D_EVICT, .evict_after_s = 0},
    };
    static uint8_t buf[TIER_DIRS_MAX];
    static struct tier_dirpol out[TIER_DIRPOL_MAX + 1];
    size_t len = tier_dirs_encode(v, 3, buf);
    assert_int_equal(len, 4 + 3 * TIER_DIRPOL_LEN);
    assert_int_equal(tier_dirs_decode(buf, len, out), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(out[i].dir, v[i].dir);
        assert_int_equal(out[i].set, v[i].set);
        assert_int_equal(out[i].keep_local, v[i].keep_local);
        assert_int_equal(out[i].evict_priority, v[i].evict_priority);
        assert_int_equal(out[i].upload_after_s, v[i].upload_after_s);
        assert_int_equal(out[i].evict_after_s, v[i].evict_after_s);
    }
    /* truncated, a newer version, a bad field */
    assert_int_equal(tier_dirs_decode(buf, len - 1, out), -EINVAL);
    buf[0] = 2;
    assert_int_equal(tier_dirs_decode(buf, len, out), SRV_EBADVERSION);
    buf[0] = 1;
    buf[4 + TIER_DIRPOL_LEN + 12] = 7; /* entry 2's priority */
    assert_int_equal(tier_dirs_decode(buf, len, out), -EINVAL);
    /* an empty list */
    assert_int_equal(tier_dirs_decode(buf, tier_dirs_encode(v, 0, buf), out), 0);
    /* a longer entry (a later version's fields) is skipped over */
    uint8_t big[4 + 2 * (TIER_DIRPOL_LEN + 4)];
    size_t one = tier_dirs_encode(v, 1, buf);
    memset(big, 0, sizeof(big));
    memcpy(big, buf, one);
    big[3] = 2;
    big[5] = TIER_DIRPOL_LEN + 4;
    memcpy(big + 4 + TIER_DIRPOL_LEN + 4, buf + 4, TIER_DIRPOL_LEN);
    assert_int_equal(tier_dirs_decode(big, 4 + TIER_DIRPOL_LEN + 4 + TIER_DIRPOL_LEN, out), 2);
    assert_int_equal(out[1].dir, 100);
    assert_int_equal(out[1].upload_after_s, 5);

    /* the effective policy: the directory's fields over the bucket's */
    struct tier_policy b = {.remote = 1, .upload_after_s = 60, .evict_after_s = 3600};
    struct tier_effective e;
    tier_effective_of(&b, NULL, NULL, &e);
    assert_int_equal(e.upload_after_s, 60);
    assert_int_equal(e.evict_after_s, 3600);
    assert_false(e.keep_local);
    assert_int_equal(e.evict_priority, TIER_PRIO_NORMAL);
    tier_effective_of(&b, NULL, &v[0], &e);
    assert_int_equal(e.upload_after_s, 5);
    assert_int_equal(e.evict_after_s, 3600);
    tier_effective_of(&b, NULL, &v[1], &e);
    assert_true(e.keep_local);
    assert_int_equal(e.evict_priority, TIER_PRIO_LOW);
    tier_effective_of(&b, NULL, &v[2], &e);
    assert_int_equal(e.evict_after_s, 0);
    assert_int_equal(tier_prio_parse("high"), TIER_PRIO_HIGH);
    assert_int_equal(tier_prio_parse("urgent"), -EINVAL);
    assert_string_equal(tier_prio_name(TIER_PRIO_LOW), "low");
    struct tier_dirpol bad = {.dir = 0, .set = TIER_D_UPLOAD};
    char why[100];
    assert_int_equal(tier_dirpol_validate(&bad, why, sizeof(why)), -EINVAL);
}

static void test_presets(void **state)
{
    (void)state;
    struct tier_policy b = {.remote = 1, .upload_after_s = 300};
    struct tier_effective e;
    /* the built-in defaults: what recall did before presets */
    tier_effective_of(&b, NULL, NULL, &e);
    assert_true(e.whole_file);
    assert_int_equal(e.chunk_size, TIER_CHUNK_DEFAULT);
    assert_int_equal(e.streams, 0);
    assert_false(e.read_only);
    assert_int_equal(e.preset, TIER_PRESET_UNSET);
    /* a bucket preset: its knobs, but the policy keeps the upload delay */
    struct tier_dirpol be = {.dir = 10,
                             .set = TIER_D_PRESET | TIER_D_STREAMS,
                             .preset = TIER_PRESET_MODEL_CHECKPOINT_RW,
                             .streams = 3};
    tier_effective_of(&b, &be, NULL, &e);
    assert_int_equal(e.upload_after_s, 300);
    /* the daemon's chunk size, as NONE */
    assert_int_equal(e.chunk_size, TIER_CHUNK_DEFAULT);
    assert_int_equal(e.streams, 3); /* the level's own knob over its preset */
    assert_int_equal(e.evict_priority, TIER_PRIO_HIGH);
    assert_false(e.read_only);
    assert_int_equal(e.preset, TIER_PRESET_MODEL_CHECKPOINT_RW);
    /* a directory's preset over the bucket's; its write-back delay applies there */
    struct tier_dirpol d = {.dir = 11, .set = TIER_D_PRESET, .preset = TIER_PRESET_DATASET_RO};
    tier_effective_of(&b, &be, &d, &e);
    assert_true(e.read_only);
    assert_int_equal(e.streams, 1);
    assert_true(e.dir_prefetch);
    d.preset = TIER_PRESET_MODEL_CHECKPOINT_RW;
    tier_effective_of(&b, NULL, &d, &e);
    assert_int_equal(e.upload_after_s, 0);
    /* a model load recalls as NONE does (more streams than GET slots, other chunks than
     * the daemon's made it slower): all streams, the daemon's chunks, the whole file */
    assert_int_equal(e.streams, 0);
    assert_int_equal(e.chunk_size, TIER_CHUNK_DEFAULT);
    assert_true(e.whole_file);
    /* NONE at a directory: the defaults again below it, whatever the bucket says */
    d.preset = TIER_PRESET_NONE;
    tier_effective_of(&b, &be, &d, &e);
    assert_int_equal(e.chunk_size, TIER_CHUNK_DEFAULT);
    assert_int_equal(e.streams, 0);
    assert_int_equal(e.evict_priority, TIER_PRIO_NORMAL);
    /* names */
    assert_int_equal(tier_preset_parse("DATASET_RW"), TIER_PRESET_DATASET_RW);
    assert_int_equal(tier_preset_parse("dataset_rw"), -EINVAL);
    assert_string_equal(tier_preset_name(TIER_PRESET_NONE), "NONE");
    /* the knobs round-trip; the bounds are checked */
    struct tier_dirpol k = {.dir = 12,
                            .set = TIER_D_RA | TIER_D_CHUNK | TIER_D_STREAMS | TIER_D_WHOLE |
                                   TIER_D_DIRTY | TIER_D_RO | TIER_D_PRESET,
                            .read_ahead = 5u << 20,
                            .chunk_size = 4u << 20,
                            .streams = 7,
                            .whole_file = 0,
                            .dirty_bound = 1ull << 40,
                            .read_only = 1,
                            .preset = TIER_PRESET_DATASET_RW};
    static uint8_t buf[TIER_DIRS_MAX];
    static struct tier_dirpol out[TIER_DIRPOL_MAX + 1];
    assert_int_equal(tier_dirs_decode(buf, tier_dirs_encode(&k, 1, buf), out), 1);
    assert_int_equal(out[0].set, k.set);
    assert_int_equal(out[0].read_ahead, k.read_ahead);
    assert_int_equal(out[0].chunk_size, k.chunk_size);
    assert_int_equal(out[0].streams, 7);
    assert_int_equal(out[0].dirty_bound, 1ull << 40);
    assert_int_equal(out[0].read_only, 1);
    assert_int_equal(out[0].preset, TIER_PRESET_DATASET_RW);
    k.chunk_size = 3u << 19; /* 1.5 MiB */
    assert_int_equal(tier_dirpol_validate(&k, NULL, 0), -EINVAL);
    k.chunk_size = 32u << 20;
    assert_int_equal(tier_dirpol_validate(&k, NULL, 0), -EINVAL);
    k.chunk_size = 0; /* the daemon's tier_recall_chunk_size */
    assert_int_equal(tier_dirpol_validate(&k, NULL, 0), 0);
    k.chunk_size = 1u << 20;
    k.streams = 65;
    assert_int_equal(tier_dirpol_validate(&k, NULL, 0), -EINVAL);
    /* an entry of the first layout (22 bytes): no knobs */
    uint8_t old[4 + 22] = {1, 0, 0, 1, 0, 22, 0, 0, 0, 0, 0, 0, 0, 9, TIER_D_UPLOAD,
                           0, 1, 0, 0, 0, 0,  5, 0, 0, 0, 0};
    assert_int_equal(tier_dirs_decode(old, sizeof(old), out), 1);
    assert_int_equal(out[0].dir, 9);
    assert_int_equal(out[0].upload_after_s, 5);
    assert_int_equal(out[0].set, TIER_D_UPLOAD);
}

static void test_evict_priority(void **state)
{
    (void)state;
    /* under a watermark, a higher priority goes first whatever its last read */
    struct tier_evict_cand w[3] = {
        {.ino = 1, .bytes = 20, .last_s = 10, .high = 9000, .low = 8000, .prio = 0},
        {.ino = 2, .bytes = 20, .last_s = 30, .high = 9000, .low = 8000, .prio = 2},
        {.ino = 3, .bytes = 20, .last_s = 20, .high = 9000, .low = 8000, .prio = 1},
    };
    assert_int_equal(tier_evict_plan(w, 3, 50, 95, 100, 1), 1); /* 95 -> 75 */
    assert_int_equal(w[0].ino, 2);
    assert_true(w[0].pick);
    assert_int_equal(w[1].ino, 3);
    assert_int_equal(w[2].ino, 1);
    assert_false(w[1].pick || w[2].pick);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint_parse), cmocka_unit_test(test_classify),
        cmocka_unit_test(test_resolve),        cmocka_unit_test(test_check_refused),
        cmocka_unit_test(test_policy),         cmocka_unit_test(test_policy_sclass),
        cmocka_unit_test(test_policy_evict),   cmocka_unit_test(test_evict_plan),
        cmocka_unit_test(test_dir_policies),   cmocka_unit_test(test_evict_priority),
        cmocka_unit_test(test_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
