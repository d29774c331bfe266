# SPDX-License-Identifier: Apache-2.0
"""s3nfsctl against a real s3nfsd: every resource (tenants, users, keys,
exports, buckets, quotas, usage, QoS), as tables by default and as JSON with
--json, lists across pages, and wrong or missing credentials."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import CTL, Admin, Nfs  # noqa: E402


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    if not os.access(CTL, os.X_OK):
        pytest.fail(f"s3nfsctl not found at {CTL} (set S3NFSCTL_BIN)")
    return s3nfsd_module


def ctl(d, *args, token=None, env=None):
    e = dict(os.environ, S3NFS_ADMIN=f"127.0.0.1:{d.admin_port}",
             S3NFS_ADMIN_TOKEN=d.admin_token if token is None else token)
    e.update(env or {})
    return subprocess.run([CTL, *args], env=e, capture_output=True, text=True, timeout=60)


def ok(d, *args, **kw):
    r = ctl(d, *args, **kw)
    assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r.stdout


def js(d, *args, **kw):
    return json.loads(ok(d, "--json", *args, **kw))


def table(out):
    """Rows of a table as dicts keyed by the (upper case) header."""
    lines = out.rstrip("\n").split("\n")
    head = lines[0].split()
    return [dict(zip(head, line.split())) for line in lines[1:]]


def fields(out):
    return dict(line.split(None, 1) if len(line.split(None, 1)) == 2 else (line.strip(), "")
                for line in out.rstrip("\n").split("\n") if not line.startswith("("))


def test_tenants(d):
    out = ok(d, "tenant", "create", "cli-t")
    f = fields(out)
    assert f["name"] == "cli-t" and int(f["id"]) > 1
    tid = f["id"]
    rows = table(ok(d, "tenant", "list"))
    assert {"ID": tid, "NAME": "cli-t", "ROOT": f["root"]} in rows
    assert js(d, "tenant", "get", "cli-t")["id"] == int(tid)
    assert fields(ok(d, "tenant", "rename", "cli-t", "cli-t2"))["name"] == "cli-t2"
    assert js(d, "tenant", "get", tid)["name"] == "cli-t2"
    assert ok(d, "tenant", "delete", "cli-t2") == "done\n"
    r = ctl(d, "tenant", "get", "cli-t2")
    assert r.returncode == 1 and "no tenant named" in r.stderr


def test_users_and_keys(d):
    ok(d, "tenant", "create", "cli-u")
    u = js(d, "user", "create", "cli-u", "bob", "--uid", "1234", "--gid", "1235", "--gids", "7,8")
    assert (u["uid"], u["gid"], u["gids"]) == (1234, 1235, [7, 8])
    rows = table(ok(d, "user", "list", "cli-u"))
    assert rows[0]["NAME"] == "bob" and rows[0]["GIDS"] == "7,8" and rows[0]["DISABLED"] == "no"
    assert fields(ok(d, "user", "get", "cli-u", str(u["id"])))["uid"] == "1234"
    out = ok(d, "user", "update", "cli-u", str(u["id"]), "--uid", "999", "--disable")
    assert fields(out)["uid"] == "999" and fields(out)["disabled"] == "yes"
    ok(d, "user", "update", "cli-u", str(u["id"]), "--enable")
    # keys: the secret once, listed without it; rotation
    out = ok(d, "key", "create", "cli-u", str(u["id"]))
    k1 = fields(out)
    assert k1["secret_key"] and "shown only now" in out
    s3 = d.boto3(access_key=k1["access_key"], secret_key=k1["secret_key"])
    s3.create_bucket(Bucket="cli-bucket")
    k2 = js(d, "key", "create", "cli-u", str(u["id"]))
    listed = ok(d, "key", "list", "cli-u")
    assert k1["secret_key"] not in listed and k2["secret_key"] not in listed
    assert sorted(r["ACCESS_KEY"] for r in table(listed)) == sorted([k1["access_key"],
                                                                     k2["access_key"]])
    assert len(js(d, "key", "list", "cli-u", "--user", str(u["id"]))) == 2
    assert fields(ok(d, "key", "disable", k1["access_key"]))["disabled"] == "yes"
    with pytest.raises(Exception):
        s3.list_buckets()
    assert js(d, "key", "get", k1["access_key"])["disabled"] is True
    ok(d, "key", "enable", k1["access_key"])
    s3.list_buckets()
    ok(d, "key", "delete", k1["access_key"])
    assert ctl(d, "key", "get", k1["access_key"]).returncode == 1
    s3b = d.boto3(access_key=k2["access_key"], secret_key=k2["secret_key"])
    assert [b["Name"] for b in s3b.list_buckets()["Buckets"]] == ["cli-bucket"]
    # buckets, quotas, usage
    s3b.put_object(Bucket="cli-bucket", Key="dir/", Body=b"")
    s3b.put_object(Bucket="cli-bucket", Key="dir/f", Body=b"x" * 1000)
    rows = table(ok(d, "bucket", "list", "cli-u"))
    assert rows[0]["NAME"] == "cli-bucket" and rows[0]["BYTES"] == "1000"
    q = js(d, "quota", "set", "cli-u", "--bytes", "1M", "--inodes", "100")
    assert q["bytes_limit"] == 1 << 20 and q["inodes_limit"] == 100
    assert fields(ok(d, "quota", "get", "cli-u"))["bytes_limit"] == str(1 << 20)
    q = js(d, "quota", "set", "cli-u", "cli-bucket", "--dir", "dir", "--bytes", "2K")
    assert q["bytes_limit"] == 2048 and q["bytes"] == 1000
    assert js(d, "usage", "cli-u", "cli-bucket", "--dir", "dir")["bytes_limit"] == 2048
    assert js(d, "usage", "cli-u", "cli-bucket")["bytes"] == 1000
    assert fields(ok(d, "usage", "cli-u"))["bytes"] == "1000"
    with pytest.raises(Exception):
        s3b.put_object(Bucket="cli-bucket", Key="dir/g", Body=b"y" * 2000)
    assert ok(d, "quota", "delete", "cli-u", "cli-bucket", "--dir", "dir") == "done\n"
    s3b.put_object(Bucket="cli-bucket", Key="dir/g", Body=b"y" * 2000)
    ok(d, "quota", "delete", "cli-u")
    assert js(d, "quota", "get", "cli-u")["bytes_limit"] == 0
    # QoS
    p = js(d, "qos", "set", "cli-u", "--write-bps", "10M", "--read-iops", "500")
    assert p["write_bps"] == 10 << 20 and p["read_iops"] == 500
    assert fields(ok(d, "qos", "get", "cli-u"))["write_bps"] == str(10 << 20)
    p = js(d, "qos", "set", "cli-u", "--user", str(u["id"]), "--meta-iops", "50")
    assert p["user"] == u["id"] and p["meta_iops"] == 50
    ok(d, "qos", "delete", "cli-u", "--user", str(u["id"]))
    ok(d, "qos", "delete", "cli-u")
    assert js(d, "qos", "get", "cli-u")["write_bps"] == 0
    ok(d, "user", "delete", "cli-u", str(u["id"]))
    assert table(ok(d, "user", "list", "cli-u")) == [] or ok(d, "user", "list", "cli-u") == \
        "(none)\n"


def test_exports(d):
    ok(d, "tenant", "create", "cli-e")
    admin = Admin(d)
    tid = js(d, "tenant", "get", "cli-e")["id"]
    u = admin.post(f"/tenants/{tid}/users", {"name": "e"})
    k = admin.post(f"/tenants/{tid}/users/{u['id']}/keys")
    d.boto3(access_key=k["access_key"], secret_key=k["secret_key"]).create_bucket(Bucket="ebkt")
    e = js(d, "export", "create", "cli-e", "/cli-e", "--clients", "127.0.0.1/32,::1",
           "--root-squash")
    assert e["clients"] == ["127.0.0.1/32", "::1/128"] and e["root_squash"] is True
    eb = js(d, "export", "create", "cli-e", "/cli-e/b", "--clients", "127.0.0.1",
            "--source", "ebkt", "--ro")
    assert eb["read_only"] is True and eb["dir"] != e["dir"]
    rows = table(ok(d, "export", "list", "cli-e"))
    assert sorted(r["PATH"] for r in rows) == ["/cli-e", "/cli-e/b"]
    assert fields(ok(d, "export", "get", str(e["id"])))["path"] == "/cli-e"
    with Nfs(d) as c:
        assert c.mount("/cli-e")[0] == 0
        out = js(d, "export", "update", str(e["id"]), "--clients", "127.0.0.7/32", "--rw",
                 "--no-root-squash", "--path", "/cli-e/2")
        assert out["clients"] == ["127.0.0.7/32"] and out["path"] == "/cli-e/2"
        assert out["root_squash"] is False
        assert c.mount("/cli-e/2")[0] != 0  # 127.0.0.1 no longer admitted
    with Nfs(d, source="127.0.0.7") as c:
        assert c.mount("/cli-e/2")[0] == 0
    r = ctl(d, "export", "update", str(e["id"]), "--source", "ebkt")
    assert r.returncode == 2
    r = ctl(d, "export", "create", "cli-e", "/bad", "--clients", "not-a-net")
    assert r.returncode == 1 and "400 InvalidArgument" in r.stderr
    ok(d, "export", "delete", str(e["id"]))
    ok(d, "export", "delete", str(eb["id"]))
    assert ok(d, "export", "list", "cli-e") == "(none)\n"


def test_lists_follow_pages(d):
    for i in range(3):
        ok(d, "tenant", "create", f"cli-page{i}")
    names = [t["name"] for t in js(d, "tenant", "list")]
    assert names == [t["name"] for t in Admin(d).get("/tenants")]
    assert {"cli-page0", "cli-page1", "cli-page2"} <= set(names)


def test_wrong_credentials_and_usage_errors(d):
    r = ctl(d, "tenant", "list", token="")
    assert r.returncode == 2 and "needs a token" in r.stderr
    for args in (("tenant", "list"), ("tenant", "create", "nope"), ("user", "list", "1"),
                 ("key", "list", "1"), ("export", "list", "1"), ("quota", "get", "1"),
                 ("qos", "get", "1"), ("usage", "1"), ("bucket", "list", "1"), ("whoami",)):
        r = ctl(d, *args, token="wrong-token-0123456789")
        assert r.returncode == 1, args
        assert "403 Forbidden" in r.stderr and "wrong bearer token" in r.stderr
    r = ctl(d, "--token", "wrong-again-0123456789", "tenant", "list")
    assert r.returncode == 1 and "403" in r.stderr
    r = ctl(d, "--admin", "127.0.0.1:1", "tenant", "list")
    assert r.returncode == 1 and "cannot connect" in r.stderr
    assert ctl(d, "user", "frobnicate", "1").returncode == 2
    assert ctl(d, "quota", "set", "1", "--bytes", "lots").returncode == 2
    assert ctl(d, "quota", "get", "1", "--dir", "x").returncode == 2  # --dir needs a bucket
    r = ctl(d, "tenant", "delete", "default")
    assert r.returncode == 1 and "409" in r.stderr
    assert ok(d, "health") == "ok\n"
    assert "s3nfs_ops_total" in ok(d, "metrics", token="")
    assert js(d, "whoami")["system_admin"] is True


def test_tenant_admin_with_access_key(d):
    """--access-key/--secret-key sign with SigV4: a tenant admin manages its own
    tenant through the CLI and is refused (403) outside it."""
    adm = Admin(d)
    from tenutil import make_tenant
    a = make_tenant(adm, "cli-ta", tenant_admin=True)
    b = make_tenant(adm, "cli-tb")
    env = {"S3NFS_ADMIN_ACCESS_KEY": a.akey, "S3NFS_ADMIN_SECRET_KEY": a.secret}
    who = js(d, "whoami", token="", env=env)
    assert who == {"system_admin": False, "tenant": a.id, "caller": f"key {a.akey}"}
    assert [t["name"] for t in js(d, "tenant", "list", token="", env=env)] == ["cli-ta"]
    u = js(d, "user", "create", str(a.id), "carol", token="", env=env)
    k = js(d, "key", "create", str(a.id), str(u["id"]), token="", env=env)
    s3 = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    s3.create_bucket(Bucket="ta-bucket")
    s3.put_object(Bucket="ta-bucket", Key="deep/dir/", Body=b"")
    q = js(d, "quota", "set", str(a.id), "ta-bucket", "--dir", "deep/dir", "--bytes", "1K",
           token="", env=env)  # a signed query string holding '/'
    assert q["bytes_limit"] == 1024
    assert js(d, "usage", str(a.id), "ta-bucket", "--dir", "deep/dir", token="",
              env=env)["bytes_limit"] == 1024
    for args in (("tenant", "get", str(b.id)), ("user", "list", str(b.id)),
                 ("key", "disable", b.akey), ("quota", "set", str(a.id), "--bytes", "1T"),
                 ("tenant", "create", "cli-escape")):
        r = ctl(d, *args, token="", env=env)
        assert r.returncode == 1 and "403 Forbidden" in r.stderr, (args, r.stderr)
    assert adm.get(f"/keys/{b.akey}")["disabled"] is False
    # the system admin's key (the bootstrap user) works like the token
    boot = {"S3NFS_ADMIN_ACCESS_KEY": d.access_key, "S3NFS_ADMIN_SECRET_KEY": d.secret_key}
    assert js(d, "whoami", token="", env=boot)["system_admin"] is True
    assert "cli-tb" in [t["name"] for t in js(d, "tenant", "list", token="", env=boot)]
    # wrong secret, or a user that is not an admin
    r = ctl(d, "whoami", token="", env={"S3NFS_ADMIN_ACCESS_KEY": a.akey,
                                        "S3NFS_ADMIN_SECRET_KEY": "wrong" * 8})
    assert r.returncode == 1 and "403" in r.stderr and "signature" in r.stderr
    r = ctl(d, "whoami", token="", env={"S3NFS_ADMIN_ACCESS_KEY": b.akey,
                                        "S3NFS_ADMIN_SECRET_KEY": b.secret})
    assert r.returncode == 1 and "not an admin" in r.stderr
    r = ctl(d, "whoami", token="", env={"S3NFS_ADMIN_ACCESS_KEY": a.akey})
    assert r.returncode == 2


def make_cert(tmp_path, name="admin"):
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    cert, key = tmp_path / f"{name}-cert.pem", tmp_path / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def test_https_admin_listener_and_metrics_auth(daemon_factory, tmp_path):
    """admin_tls_cert/key make the admin listener HTTPS; s3nfsctl verifies its
    certificate (system CAs, --ca or S3NFS_ADMIN_CA; --insecure skips it);
    admin_metrics_auth closes /metrics to all but system admins, /healthz stays
    open."""
    import ssl
    import urllib.error
    import urllib.request
    cert, key = make_cert(tmp_path)
    d = daemon_factory(["--set", f"admin_tls_cert={cert}", "--set", f"admin_tls_key={key}",
                        "--set", "admin_metrics_auth=true"]).start()
    url = f"https://127.0.0.1:{d.admin_port}"
    with open(d.log_path) as f:
        assert f"admin:       {url}  (/healthz, /metrics with credentials" in f.read()
    https = {"S3NFS_ADMIN": url}
    # plain HTTP to a TLS listener: a clear error, not a hang
    r = ctl(d, "tenant", "list")
    assert r.returncode == 1 and "https://" in r.stderr, r.stderr
    # the certificate is checked by default
    r = ctl(d, "tenant", "list", env=https)
    assert r.returncode == 1 and "cannot verify the TLS certificate" in r.stderr, r.stderr
    assert "--ca FILE" in r.stderr
    # ... against --ca or S3NFS_ADMIN_CA
    assert "default" in [t["name"] for t in js(d, "--ca", str(cert), "tenant", "list",
                                              env=https)]
    assert ok(d, "health", env=dict(https, S3NFS_ADMIN_CA=str(cert))) == "ok\n"
    # ... or not at all, when asked explicitly (and said so)
    r = ctl(d, "--insecure", "whoami", env=https)
    assert r.returncode == 0 and "not checked" in r.stderr
    # a certificate for another name fails the check even with it as the CA
    other, _ = make_cert(tmp_path, "other")
    r = ctl(d, "--ca", str(other), "whoami", env=https)
    assert r.returncode == 1 and "cannot verify" in r.stderr

    # /metrics: 401 without credentials, 403 for a tenant admin, 200 for a system admin
    ca = dict(https, S3NFS_ADMIN_CA=str(cert))
    r = ctl(d, "metrics", token="", env=ca)
    assert r.returncode == 1 and "401" in r.stderr
    assert "s3nfs_ops_total" in ok(d, "metrics", env=ca)
    from tenutil import make_tenant
    a = make_tenant(Admin(d), "cli-tls-ta", tenant_admin=True)
    r = ctl(d, "metrics", token="", env=dict(ca, S3NFS_ADMIN_ACCESS_KEY=a.akey,
                                             S3NFS_ADMIN_SECRET_KEY=a.secret))
    assert r.returncode == 1 and "403" in r.stderr and "system admin" in r.stderr
    boot = dict(ca, S3NFS_ADMIN_ACCESS_KEY=d.access_key, S3NFS_ADMIN_SECRET_KEY=d.secret_key)
    assert "s3nfs_ops_total" in ok(d, "metrics", token="", env=boot)
    # the same with a stock client; /healthz needs nothing
    tls = ssl.create_default_context(cafile=str(cert))
    with urllib.request.urlopen(url + "/healthz", context=tls, timeout=10) as resp:
        assert resp.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "/metrics", context=tls, timeout=10)
    assert e.value.code == 401 and "Bearer" in e.value.headers["WWW-Authenticate"]
    req = urllib.request.Request(url + "/metrics",
                                 headers={"Authorization": "Bearer " + d.admin_token})
    with urllib.request.urlopen(req, context=tls, timeout=10) as resp:
        assert b"s3nfs_store_capacity_bytes" in resp.read()


def test_words_for_mistakes(d):
    """A mistyped command or subcommand is named, with the closest one and only
    its command's usage; a missing user or tenant is named as such; USER may
    be a user's id or name, and the help says which id it means."""
    r = ctl(d, "tenat", "list")
    assert r.returncode == 2
    assert "unknown command 'tenat' (did you mean 'tenant'?)" in r.stderr
    assert "qos set" not in r.stderr  # not the whole usage
    r = ctl(d, "user", "gte", "default", "1")
    assert r.returncode == 2
    assert "user has no subcommand 'gte' (did you mean 'get'?)" in r.stderr
    assert "user list T | get T USER" in r.stderr and "export create" not in r.stderr
    r = ctl(d, "quota", "st", "default", token="")  # named before credentials are asked for
    assert r.returncode == 2 and "did you mean 'set'?" in r.stderr
    help_ = ok(d, "--help")
    assert " UID" not in help_ and "get T USER" in help_ and "not its\nPOSIX --uid" in help_

    ok(d, "tenant", "create", "cli-words")
    u = js(d, "user", "create", "cli-words", "dora", "--uid", "4242")
    assert js(d, "user", "get", "cli-words", "dora")["id"] == u["id"]  # by name
    assert js(d, "user", "get", "cli-words", str(u["id"]))["uid"] == 4242  # by id
    k = js(d, "key", "create", "cli-words", "dora")
    assert [x["access_key"] for x in js(d, "key", "list", "cli-words", "--user", "dora")] == \
        [k["access_key"]]
    r = ctl(d, "user", "get", "cli-words", "4242")  # the POSIX uid is not the user's id
    assert r.returncode == 1
    assert "404 NotFound: no such user 4242 in tenant 'cli-words'" in r.stderr, r.stderr
    assert "no such file" not in r.stderr
    r = ctl(d, "user", "get", "cli-words", "nobody")
    assert r.returncode == 1 and "no user named 'nobody' in this tenant" in r.stderr
    r = ctl(d, "user", "get", "999999", "1")
    assert r.returncode == 1 and "no such tenant 999999" in r.stderr
    r = ctl(d, "key", "get", "NOSUCHKEY123")
    assert r.returncode == 1 and "no such access key 'NOSUCHKEY123'" in r.stderr
    r = ctl(d, "export", "get", "999999")
    assert r.returncode == 1 and "no such export 999999" in r.stderr
    r = ctl(d, "usage", "cli-words", "no-such-bucket")
    assert r.returncode == 1 and "no such bucket 'no-such-bucket' in tenant 'cli-words'" \
        in r.stderr
