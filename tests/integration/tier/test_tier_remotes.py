# SPDX-License-Identifier: Apache-2.0
"""Remotes of the tier and bucket tier policies, through the admin API and
s3nfsctl, against the real Ceph RGW of the session (`rgw`):

- a remote is checked when made: bad credentials, a dead port and a missing
  bucket are refused with 400 RemoteCheckFailed and a reason, nothing stored;
- its secret key is never answered, never logged, and not in the store in
  clear (sealed under master.key); records survive a restart;
- a tenant's remote is invisible to, and unusable by, another tenant;
- SSRF: without tier_allow_private_remotes a tenant admin cannot make a remote
  that leads to this host (loopback by address or by name, a CA file of the
  host), while a system admin can;
- a tier policy names a usable remote and keeps its eviction fields; a remote
  named by a policy cannot be deleted."""
import os
import subprocess
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from s3nfsd_harness import CTL, Daemon, free_port  # noqa: E402
from tenutil import Admin, make_tenant, s3_for  # noqa: E402


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """A daemon whose tenants may reach loopback (the RGW of the tests is there)."""
    dm = Daemon(str(tmp_path_factory.mktemp("tier-remotes")),
                ["--set", "tier_allow_private_remotes=true", "--set", "data_file_size=1GiB"]
                ).start()
    yield dm
    dm.cleanup()


@pytest.fixture(scope="module")
def rbucket(rgw):
    s3 = rgw.boto3()
    name = "rmt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    return name


def body(rgw, rb, **over):
    b = {"name": "r-" + uuid.uuid4().hex[:8], "endpoint": rgw.endpoint, "bucket": rb,
         "access_key": rgw.access_key, "secret_key": rgw.secret_key, "region": "us-east-1",
         "prefix": "pfx/"}
    b.update(over)
    return b


def test_create_get_list_delete_secret_never_shown(d, rgw, rbucket):
    adm = Admin(d)
    st, r = adm.call("POST", "/remotes", body(rgw, rbucket, max_conns=8, parallel=2))
    assert st == 201, r
    assert r["tenant"] == 0 and r["bucket"] == rbucket and r["prefix"] == "pfx/"
    assert r["addressing"] == "path" and r["tls_verify"] is True
    assert r["max_conns"] == 8 and r["parallel"] == 2 and r["connect_timeout_ms"] == 10000
    assert "secret_key" not in r and rgw.secret_key not in str(r)
    got = adm.get(f"/remotes/{r['id']}")
    assert got == r
    lst = adm.get("/remotes")
    assert r["id"] in [x["id"] for x in lst]
    assert rgw.secret_key not in str(lst)
    assert adm.get("/remotes?tenant=0") == [x for x in lst if x["tenant"] == 0]
    # a second of the same name and owner: 409
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket, name=r["name"]))
    assert st == 409 and js["error"] == "AlreadyExists", js
    # survives a restart (records in the store, secret sealed)
    d.restart()
    assert adm.get(f"/remotes/{r['id']}") == r
    # never in the log, never in the store in clear
    log = open(d.log_path, "rb").read()
    assert rgw.secret_key.encode() not in log
    for root, _, files in os.walk(d.data_dir):
        for f in files:
            if f.startswith("data."):
                continue  # file data, not metadata
            with open(os.path.join(root, f), "rb") as fh:
                assert rgw.secret_key.encode() not in fh.read(), f
    adm.delete(f"/remotes/{r['id']}")
    st, js = adm.call("GET", f"/remotes/{r['id']}")
    assert st == 404 and "no such remote" in js["message"]
    st, _ = adm.call("DELETE", f"/remotes/{r['id']}")
    assert st == 404


def test_refused_at_create(d, rgw, rbucket):
    adm = Admin(d)
    before = adm.get("/remotes")
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket, secret_key="wrong-secret-123"))
    assert st == 400 and js["error"] == "RemoteCheckFailed", js
    assert "credentials" in js["message"], js
    assert "wrong-secret-123" not in js["message"]
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket, access_key="NOSUCHKEY"))
    assert st == 400 and js["error"] == "RemoteCheckFailed", js
    dead = free_port()
    st, js = adm.call("POST", "/remotes",
                      body(rgw, rbucket, endpoint=f"http://127.0.0.1:{dead}"))
    assert st == 400 and js["error"] == "RemoteCheckFailed", js
    assert "connect" in js["message"] and str(dead) in js["message"], js
    st, js = adm.call("POST", "/remotes", body(rgw, "no-such-bucket-" + uuid.uuid4().hex[:6]))
    assert st == 400 and js["error"] == "RemoteCheckFailed", js
    assert "bucket" in js["message"].lower(), js
    st, js = adm.call("POST", "/remotes",
                      body(rgw, rbucket, endpoint="http://no-such-host.invalid"))
    assert st == 400 and js["error"] == "RemoteCheckFailed" and "resolve" in js["message"], js
    # malformed fields: 400 InvalidArgument, nothing contacted
    for bad in ({"endpoint": "ftp://x"}, {"endpoint": "http://h/path"}, {"bucket": "A_B"},
                {"name": "-x"}, {"prefix": "/abs"}, {"addressing": "sideways"},
                {"max_conns": 0}, {"max_conns": 5000}, {"secret_key": ""},
                {"ca_file": "/etc/ssl/certs/ca-certificates.crt"},  # http: no CA file
                {"secret": "typo"}):
            st, js = adm.call("POST", "/remotes", body(rgw, rbucket, **bad))
            assert st == 400 and js["error"] == "InvalidArgument", (bad, js)
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket, tenant=987654))
    assert st == 404, js
    assert adm.get("/remotes") == before


def test_tenant_isolation_and_policies(d, rgw, rbucket):
    adm = Admin(d)
    a = make_tenant(adm, "ta" + uuid.uuid4().hex[:6], tenant_admin=True)
    b = make_tenant(adm, "tb" + uuid.uuid4().hex[:6], tenant_admin=True)
    aa = Admin(d, ("sigv4", a.akey, a.secret))
    ba = Admin(d, ("sigv4", b.akey, b.secret))
    s3_for(d, a).create_bucket(Bucket="abkt")
    s3_for(d, b).create_bucket(Bucket="bbkt")

    # a tenant admin makes remotes only for itself
    st, js = aa.call("POST", "/remotes", body(rgw, rbucket, tenant=b.id))
    assert st == 403, js
    ra = aa.post("/remotes", body(rgw, rbucket, name="mine"))
    assert ra["tenant"] == a.id
    rs = adm.post("/remotes", body(rgw, rbucket, name="sys"))
    assert rs["tenant"] == 0
    # B sees nothing of A's, and cannot reach it by id
    assert [x["id"] for x in aa.get("/remotes")] == [ra["id"]]
    assert ra["id"] not in [x["id"] for x in ba.get("/remotes")]
    for m in ("GET", "DELETE"):
        st, js = ba.call(m, f"/remotes/{ra['id']}")
        assert st == 404 and js["message"] == f"no such remote {ra['id']}", js
    st, js = ba.call("GET", f"/remotes?tenant={a.id}")
    assert st == 403
    # B cannot tier its bucket to A's remote, by id or by name
    st, js = ba.call("PUT", f"/tenants/{b.id}/buckets/bbkt/tier", {"remote": ra["id"]})
    assert st == 404, js
    st, js = ba.call("PUT", f"/tenants/{b.id}/buckets/bbkt/tier", {"remote": "mine"})
    assert st == 404, js
    # nor a tenant admin a system-wide remote; a system admin may
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt/tier", {"remote": rs["id"]})
    assert st == 403, js
    # A tiers its own bucket to its own remote (by name)
    pol = aa.put(f"/tenants/{a.id}/buckets/abkt/tier", {"remote": "mine", "upload_after_s": 5})
    assert "uploads" in pol  # null until the uploader's first pass over the bucket
    pol.pop("uploads")
    assert pol.pop("directories") == [] and pol.pop("effective")["read_only"] is False
    assert pol == {"bucket": "abkt", "remote": ra["id"], "remote_name": "mine",
                   "remote_tenant": a.id, "upload_after_s": 5, "evict_after_s": 0,
                   "evict_watermark": None, "pin_prefixes": [], "storage_class": "STANDARD_IA"}

    def policy(adm_, t, b):
        p = adm_.get(f"/tenants/{t}/buckets/{b}/tier")
        for f in ("uploads", "directories", "effective"):
            p.pop(f)
        return p
    assert policy(aa, a.id, "abkt") == pol
    # ...and not another tenant's bucket
    st, _ = aa.call("GET", f"/tenants/{b.id}/buckets/bbkt/tier")
    assert st == 403
    # cache mode has its own endpoint: said, not accepted and ignored
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt/tier",
                     {"remote": "mine", "cache_mode": True})
    assert st == 400 and "/cache" in js["message"], js
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt/tier", {"remote": "mine", "x": 1})
    assert st == 400 and "unknown field" in js["message"], js
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt/tier",
                     {"remote": "mine", "upload_after_s": 10 ** 9})
    assert st == 400, js
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt/tier", {})
    assert st == 400, js
    assert policy(aa, a.id, "abkt") == pol  # unchanged by the refusals
    # one remote serves one bucket (objects are named by the bucket's keys)
    s3_for(d, a).create_bucket(Bucket="abkt2")
    st, js = aa.call("PUT", f"/tenants/{a.id}/buckets/abkt2/tier", {"remote": "mine"})
    assert st == 409 and "another bucket" in js["message"], js
    # a remote in use cannot go
    st, js = aa.call("DELETE", f"/remotes/{ra['id']}")
    assert st == 409 and js["error"] == "InUse", js
    # a system admin's policy with a system-wide remote: the tenant admin may not change it
    adm.put(f"/tenants/{b.id}/buckets/bbkt/tier", {"remote": rs["id"]})
    st, js = ba.call("DELETE", f"/tenants/{b.id}/buckets/bbkt/tier")
    assert st == 403, js
    adm.delete(f"/tenants/{b.id}/buckets/bbkt/tier")
    st, _ = ba.call("GET", f"/tenants/{b.id}/buckets/bbkt/tier")
    assert st == 404
    aa.delete(f"/tenants/{a.id}/buckets/abkt/tier")
    aa.delete(f"/remotes/{ra['id']}")
    st, js = aa.call("DELETE", f"/remotes/{rs['id']}")
    assert st == 404  # not visible to a tenant admin
    adm.delete(f"/remotes/{rs['id']}")


def test_ssrf_refused_without_the_option(s3nfsd, rgw, rbucket):
    """The default daemon: tenants' remotes may not lead to this host."""
    adm = Admin(s3nfsd)
    t = make_tenant(adm, "ssrf" + uuid.uuid4().hex[:6], tenant_admin=True)
    ta = Admin(s3nfsd, ("sigv4", t.akey, t.secret))
    port = rgw.endpoint.rsplit(":", 1)[1]
    for ep in (rgw.endpoint, f"http://localhost:{port}", f"http://[::1]:{port}",
               f"http://0.0.0.0:{port}", "http://169.254.169.254",
               f"http://[::ffff:127.0.0.1]:{port}"):
        st, js = ta.call("POST", "/remotes", body(rgw, rbucket, endpoint=ep))
        assert st == 403 and js["error"] == "Forbidden", (ep, js)
        assert "tier_allow_private_remotes" in js["message"], js
    # nor by a system admin on the tenant's behalf
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket, tenant=t.id))
    assert st == 403, js
    # a CA file is a file of this host: never for a tenant
    st, js = ta.call("POST", "/remotes",
                     body(rgw, rbucket, endpoint="https://s3.example.com",
                          ca_file="/etc/ssl/certs/ca-certificates.crt"))
    assert st == 403 and "ca_file" in js["message"], js
    assert ta.get("/remotes") == []
    # a system-wide remote is the operator's: allowed
    st, js = adm.call("POST", "/remotes", body(rgw, rbucket))
    assert st == 201, js


def test_cli(d, rgw, rbucket):
    env = dict(os.environ, S3NFS_ADMIN=d.admin_endpoint, S3NFS_ADMIN_TOKEN=d.admin_token,
               S3NFS_REMOTE_SECRET_KEY=rgw.secret_key)

    def ctl(*args, ok=True, stdin=None):
        r = subprocess.run([CTL] + list(args), env=env, input=stdin, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if ok:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    adm = Admin(d)
    t = make_tenant(adm, "cli" + uuid.uuid4().hex[:6])
    s3_for(d, t).create_bucket(Bucket="clibkt")
    name = "cli-" + uuid.uuid4().hex[:6]
    r = ctl("--json", "remote", "create", name, "--endpoint", rgw.endpoint, "--bucket", rbucket,
            "--key-id", rgw.access_key, "--tenant", t.name, "--prefix", "c/", "--parallel", "3")
    import json
    made = json.loads(r.stdout)
    assert made["name"] == name and made["tenant"] == t.id and made["parallel"] == 3
    assert rgw.secret_key not in r.stdout + r.stderr
    out = ctl("remote", "list", "--tenant", t.name).stdout
    assert name in out and rgw.secret_key not in out
    assert name in ctl("remote", "get", str(made["id"])).stdout
    # the secret from stdin; a wrong one is refused with the reason
    bad = ctl("remote", "create", name + "x", "--endpoint", rgw.endpoint, "--bucket", rbucket,
              "--key-id", rgw.access_key, "--secret-file", "-", ok=False, stdin="nope-nope\n")
    assert bad.returncode == 1 and "RemoteCheckFailed" in bad.stderr, bad.stderr
    # without a secret: usage error
    env.pop("S3NFS_REMOTE_SECRET_KEY")
    r2 = ctl("remote", "create", "n", "--endpoint", rgw.endpoint, "--bucket", rbucket,
             "--key-id", "k", ok=False)
    assert r2.returncode == 2 and "secret key" in r2.stderr
    pol = json.loads(ctl("--json", "tier", "set", t.name, "clibkt", "--remote", name,
                         "--upload-after", "7", "--evict-after", "3600").stdout)
    assert pol["remote"] == made["id"] and pol["upload_after_s"] == 7
    assert pol["evict_after_s"] == 3600
    assert "upload_after_s" in ctl("tier", "get", t.name, "clibkt").stdout
    busy = ctl("remote", "delete", str(made["id"]), ok=False)
    assert busy.returncode == 1 and "InUse" in busy.stderr
    ctl("tier", "delete", t.name, "clibkt")
    ctl("remote", "delete", str(made["id"]))
    assert name not in ctl("remote", "list").stdout
