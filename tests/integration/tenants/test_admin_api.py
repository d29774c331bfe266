# SPDX-License-Identifier: Apache-2.0
"""The admin REST API on a real s3nfsd: authentication (401 without
credentials, 403 with wrong ones; the bearer token from the environment;
SigV4 with an admin user's access key), tenant-admin scope, CRUD of every
resource, pagination, JSON errors, malformed input, and changes taking effect
at once on both protocols."""
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import (MNT3ERR_ACCES, MNT3ERR_NOENT, Admin, Nfs, make_tenant, s3_code,  # noqa: E402
                     s3_for)


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def adm(d):
    return Admin(d)


def test_auth_missing_and_wrong(d):
    st, js, hdrs = Admin(d, auth=False).raw("GET", "/tenants")
    assert st == 401 and js["error"] == "Unauthorized" and js["message"]
    assert "Bearer" in hdrs.get("WWW-Authenticate", "")
    st, js, _ = Admin(d, auth=("token", "wrong-token-xxxxxxxxxxxx")).raw("GET", "/tenants")
    assert st == 403 and js["error"] == "Forbidden" and "token" in js["message"]
    st, js, _ = Admin(d, auth=False).raw("GET", "/tenants", headers={"Authorization": "Basic eDp5"})
    assert st == 401
    # SigV4 with an unknown key, a wrong secret, or a mangled header: 403
    st, js, _ = Admin(d, auth=("sigv4", "S3NNOSUCHKEY0000000", "x" * 40)).raw("GET", "/tenants")
    assert st == 403 and "unknown access key" in js["message"]
    st, js, _ = Admin(d, auth=("sigv4", d.access_key, "wrong" * 8)).raw("GET", "/tenants")
    assert st == 403 and "signature" in js["message"]
    st, js, _ = Admin(d, auth=False).raw(
        "GET", "/tenants", headers={"Authorization": "AWS4-HMAC-SHA256 Credential=garbage"})
    assert st == 403 and js["message"]
    # healthz and metrics need nothing
    with urllib.request.urlopen(d.admin_endpoint + "/healthz", timeout=5) as r:
        assert r.status == 200


def test_sigv4_system_admin(d):
    """The bootstrap user is an admin of the bootstrap tenant: a system admin."""
    sv = Admin(d, auth=("sigv4", d.access_key, d.secret_key))
    who = sv.get("/whoami")
    assert who["system_admin"] is True and who["tenant"] == 0
    t = sv.post("/tenants", {"name": "sig-made"})
    assert sv.get(f"/tenants/{t['id']}")["name"] == "sig-made"
    # a signed body that was changed on the way is refused
    from tenutil import sign
    url = d.admin_endpoint + "/api/v1/tenants"
    hdrs = sign("POST", url, b'{"name":"one"}', {"Content-Type": "application/json"},
                d.access_key, d.secret_key)
    req = urllib.request.Request(url, data=b'{"name":"two"}', method="POST", headers=hdrs)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 403
    sv.delete(f"/tenants/{t['id']}")


def test_tenant_admin_scope(d, adm):
    a = make_tenant(adm, "scope-a", tenant_admin=True)
    b = make_tenant(adm, "scope-b", clients=["127.0.0.9/32"], export_path="/scope-b")
    plain = make_tenant(adm, "scope-plain")
    ta = Admin(d, auth=("sigv4", a.akey, a.secret))
    who = ta.get("/whoami")
    assert who == {"system_admin": False, "tenant": a.id, "caller": f"key {a.akey}"}
    # its own tenant: allowed
    assert [t["id"] for t in ta.get("/tenants")] == [a.id]
    assert ta.get(f"/tenants/{a.id}")["name"] == "scope-a"
    u = ta.post(f"/tenants/{a.id}/users", {"name": "bob"})
    k = ta.post(f"/tenants/{a.id}/users/{u['id']}/keys")
    assert ta.get(f"/keys/{k['access_key']}")["tenant"] == a.id
    ta.patch(f"/keys/{k['access_key']}", {"disabled": True})
    ta.delete(f"/keys/{k['access_key']}")
    s3a = s3_for(d, a)
    s3a.create_bucket(Bucket="scoped")
    ta.put(f"/tenants/{a.id}/buckets/scoped/quota", {"bytes_limit": 1000})
    ta.put(f"/tenants/{a.id}/users/{u['id']}/qos", {"write_bps": 1 << 20})
    e = ta.post(f"/tenants/{a.id}/exports", {"path": "/scope-a", "clients": ["127.0.0.8/32"]})
    ta.patch(f"/exports/{e['id']}", {"read_only": True})
    ta.delete(f"/exports/{e['id']}")
    ta.delete(f"/tenants/{a.id}/users/{u['id']}")
    # reaching outside: 403, whatever the resource
    outside = [
        ("GET", f"/tenants/{b.id}", None), ("DELETE", f"/tenants/{b.id}", None),
        ("GET", f"/tenants/{b.id}/users", None),
        ("POST", f"/tenants/{b.id}/users", {"name": "mole", "tenant_admin": True}),
        ("POST", f"/tenants/{b.id}/users/{b.uid}/keys", None),
        ("GET", f"/tenants/{b.id}/keys", None),
        ("GET", f"/keys/{b.akey}", None), ("PATCH", f"/keys/{b.akey}", {"disabled": True}),
        ("DELETE", f"/keys/{b.akey}", None),
        ("GET", f"/exports/{b.export['id']}", None),
        ("DELETE", f"/exports/{b.export['id']}", None),
        ("POST", f"/tenants/{b.id}/exports", {"path": "/x", "clients": ["127.0.0.1"]}),
        ("GET", f"/tenants/{b.id}/usage", None),
        ("PUT", f"/tenants/{b.id}/quota", {"bytes_limit": 1}),
        ("GET", f"/tenants/{b.id}/buckets", None),
        ("PUT", f"/tenants/{b.id}/qos", {"read_bps": 1}),
        ("GET", f"/tenants/{b.id}/users/{b.uid}/qos", None),
        ("GET", "/tenants/1", None), ("GET", "/tenants/999", None),
        # system-only methods on its own tenant
        ("POST", "/tenants", {"name": "escape"}),
        ("PATCH", f"/tenants/{a.id}", {"name": "renamed"}),
        ("DELETE", f"/tenants/{a.id}", None),
        ("PUT", f"/tenants/{a.id}/quota", {"bytes_limit": 0}),
        ("DELETE", f"/tenants/{a.id}/quota", None),
        ("PUT", f"/tenants/{a.id}/qos", {"read_bps": 0}),
        ("DELETE", f"/tenants/{a.id}/qos", None),
    ]
    for method, path, body in outside:
        st, js, _ = ta.raw(method, path, body)
        assert st == 403, (method, path, st, js)
        assert js["error"] == "Forbidden" and js["message"]
    # nothing of B's changed
    assert adm.get(f"/keys/{b.akey}")["disabled"] is False
    assert adm.get(f"/exports/{b.export['id']}")["path"] == "/scope-b"
    assert [u["name"] for u in adm.get(f"/tenants/{b.id}/users")] == ["scope-b-user"]
    # a key whose user is not an admin cannot use the API at all
    st, js, _ = Admin(d, auth=("sigv4", plain.akey, plain.secret)).raw("GET", "/whoami")
    assert st == 403 and "not an admin" in js["message"]
    # a disabled admin user's key stops at once
    adm.patch(f"/tenants/{a.id}/users/{a.uid}", {"disabled": True})
    assert ta.raw("GET", "/whoami")[0] == 403
    adm.patch(f"/tenants/{a.id}/users/{a.uid}", {"disabled": False})
    assert ta.raw("GET", "/whoami")[0] == 200


def test_crud_every_resource(d, adm):
    # tenants: create, list, get, update (rename), delete
    t = adm.post("/tenants", {"name": "crud"})
    assert t["name"] == "crud" and t["id"] > 1 and t["root"] > 0
    assert "crud" in [x["name"] for x in adm.get("/tenants")]
    assert adm.patch(f"/tenants/{t['id']}", {"name": "crud2"})["name"] == "crud2"
    assert adm.get(f"/tenants/{t['id']}")["name"] == "crud2"
    tid = t["id"]
    # users
    u = adm.post(f"/tenants/{tid}/users", {"name": "alice", "uid": 2001, "gid": 2002,
                                           "gids": [5, 6]})
    assert (u["uid"], u["gid"], u["gids"]) == (2001, 2002, [5, 6])
    assert adm.get(f"/tenants/{tid}/users/{u['id']}")["name"] == "alice"
    u2 = adm.patch(f"/tenants/{tid}/users/{u['id']}", {"uid": 3000, "name": "alice2"})
    assert u2["uid"] == 3000 and u2["name"] == "alice2"
    assert [x["name"] for x in adm.get(f"/tenants/{tid}/users")] == ["alice2"]
    # keys: secret shown once; rotation = create new, disable old, delete old
    k1 = adm.post(f"/tenants/{tid}/users/{u['id']}/keys")
    assert k1["secret_key"] and k1["disabled"] is False
    listed = adm.get(f"/tenants/{tid}/keys")
    assert [x["access_key"] for x in listed] == [k1["access_key"]]
    assert "secret_key" not in json.dumps(listed) and k1["secret_key"] not in json.dumps(listed)
    assert "secret_key" not in adm.get(f"/keys/{k1['access_key']}")
    s3 = d.boto3(access_key=k1["access_key"], secret_key=k1["secret_key"])
    s3.create_bucket(Bucket="crud-bucket")
    k2 = adm.post(f"/tenants/{tid}/users/{u['id']}/keys")
    assert k2["access_key"] != k1["access_key"]
    assert len(adm.get(f"/tenants/{tid}/users/{u['id']}/keys")) == 2
    adm.patch(f"/keys/{k1['access_key']}", {"disabled": True})
    with pytest.raises(ClientError) as ei:
        s3.list_buckets()
    assert s3_code(ei.value)[0] == 403
    s3b = d.boto3(access_key=k2["access_key"], secret_key=k2["secret_key"])
    assert [b["Name"] for b in s3b.list_buckets()["Buckets"]] == ["crud-bucket"]
    adm.patch(f"/keys/{k1['access_key']}", {"disabled": False})
    s3.list_buckets()  # re-enabled
    adm.delete(f"/keys/{k1['access_key']}")
    assert adm.call("GET", f"/keys/{k1['access_key']}")[0] == 404
    with pytest.raises(ClientError) as ei:
        s3.list_buckets()
    assert s3_code(ei.value)[0] == 403
    # exports: create (root and a bucket), list, get, update, delete
    e = adm.post(f"/tenants/{tid}/exports", {"path": "/crud2", "clients": ["127.0.0.1/32"],
                                             "root_squash": True})
    eb = adm.post(f"/tenants/{tid}/exports", {"path": "/crud2/bucket", "source": "crud-bucket",
                                              "clients": ["127.0.0.1", "::1"]})
    assert e["dir"] == t["root"] and eb["dir"] != t["root"]
    assert sorted(x["path"] for x in adm.get(f"/tenants/{tid}/exports")) == ["/crud2",
                                                                            "/crud2/bucket"]
    e2 = adm.patch(f"/exports/{e['id']}", {"read_only": True, "clients": ["127.0.0.0/8"],
                                           "path": "/crud2/ro"})
    assert e2["read_only"] and e2["root_squash"] and e2["clients"] == ["127.0.0.0/8"]
    assert e2["path"] == "/crud2/ro" and e2["dir"] == e["dir"]
    assert adm.get(f"/exports/{e['id']}")["path"] == "/crud2/ro"
    st, js = adm.call("PATCH", f"/exports/{e['id']}", {"dir": 5})
    assert st == 400 and js["message"]
    # quotas and usage
    q = adm.put(f"/tenants/{tid}/quota", {"bytes_limit": 10 << 20, "inodes_limit": 100})
    assert q["bytes_limit"] == 10 << 20
    assert adm.get(f"/tenants/{tid}/quota")["inodes_limit"] == 100
    assert adm.get(f"/tenants/{tid}/usage")["inodes"] >= 1
    adm.put(f"/tenants/{tid}/buckets/crud-bucket/quota", {"bytes_limit": 1 << 20})
    assert adm.get(f"/tenants/{tid}/buckets/crud-bucket/usage")["bytes_limit"] == 1 << 20
    adm.delete(f"/tenants/{tid}/buckets/crud-bucket/quota")
    assert adm.get(f"/tenants/{tid}/buckets/crud-bucket/quota")["bytes_limit"] == 0
    adm.delete(f"/tenants/{tid}/quota")
    assert adm.get(f"/tenants/{tid}/quota") == {**adm.get(f"/tenants/{tid}/usage"),
                                                "bytes_limit": 0, "inodes_limit": 0}
    assert adm.call("GET", f"/tenants/{tid}/buckets/nope/usage")[0] == 404
    # QoS: tenant and user; PUT replaces, PATCH merges, DELETE removes
    p = adm.put(f"/tenants/{tid}/qos", {"write_bps": 1 << 30, "read_iops": 5000})
    assert p["write_bps"] == 1 << 30 and p["read_iops"] == 5000
    p = adm.patch(f"/tenants/{tid}/qos", {"meta_iops": 300})
    assert p["write_bps"] == 1 << 30 and p["meta_iops"] == 300
    adm.delete(f"/tenants/{tid}/qos")
    assert adm.get(f"/tenants/{tid}/qos")["write_bps"] == 0
    up = adm.put(f"/tenants/{tid}/users/{u['id']}/qos", {"read_bps": 1 << 30})
    assert up["user"] == u["id"] and up["read_bps"] == 1 << 30
    adm.delete(f"/tenants/{tid}/users/{u['id']}/qos")
    # deletes
    adm.delete(f"/exports/{eb['id']}")
    adm.delete(f"/exports/{e['id']}")
    assert adm.get(f"/tenants/{tid}/exports") == []
    assert adm.call("DELETE", f"/tenants/{tid}")[0] == 409  # holds a bucket
    s3b.delete_bucket(Bucket="crud-bucket")
    adm.delete(f"/tenants/{tid}/users/{u['id']}")
    assert adm.call("GET", f"/keys/{k2['access_key']}")[0] == 404  # went with the user
    adm.delete(f"/tenants/{tid}")
    assert adm.call("GET", f"/tenants/{tid}")[0] == 404
    assert adm.call("DELETE", "/tenants/1")[0] == 409  # the bootstrap tenant stays


def test_pagination(adm):
    made = [adm.post("/tenants", {"name": f"page{i:02d}"})["id"] for i in range(7)]
    seen, marker, pages = [], None, 0
    while True:
        path = "/tenants?limit=3" + (f"&marker={marker}" if marker else "")
        st, js, hdrs = adm.raw("GET", path)
        assert st == 200 and len(js) <= 3
        seen += [t["id"] for t in js]
        pages += 1
        marker = hdrs.get("X-Next-Marker")
        if not marker:
            break
        assert marker == str(js[-1]["id"])
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert set(made) <= set(seen) and pages >= 3
    all_ids = [t["id"] for t in adm.get("/tenants")]
    assert seen == all_ids
    tid = made[0]
    for i in range(5):
        adm.post(f"/tenants/{tid}/users", {"name": f"u{i}"})
    st, js, hdrs = adm.raw("GET", f"/tenants/{tid}/users?limit=2")
    assert len(js) == 2 and hdrs.get("X-Next-Marker")
    st, js2, _ = adm.raw("GET", f"/tenants/{tid}/users?limit=10&marker={hdrs['X-Next-Marker']}")
    assert [u["name"] for u in js + js2] == [f"u{i}" for i in range(5)]
    uid = js[0]["id"]
    keys = sorted(adm.post(f"/tenants/{tid}/users/{uid}/keys")["access_key"] for _ in range(3))
    st, k1, h = adm.raw("GET", f"/tenants/{tid}/keys?limit=2")
    assert [k["access_key"] for k in k1] == keys[:2] and h["X-Next-Marker"] == keys[1]
    st, k2, h = adm.raw("GET", f"/tenants/{tid}/keys?marker={keys[1]}")
    assert [k["access_key"] for k in k2] == keys[2:] and "X-Next-Marker" not in h
    for bad in ("limit=0", "limit=1001", "limit=x", "limit=-1"):
        st, js, _ = adm.raw("GET", f"/tenants?{bad}")
        assert st == 400 and js["error"] == "InvalidArgument" and "limit" in js["message"]


def test_json_errors_and_malformed_input(d, adm):
    cases = [
        ("POST", "/tenants", b"not json"), ("POST", "/tenants", b"{"),
        ("POST", "/tenants", b"[1,2]"), ("POST", "/tenants", b'{"name": 5}'),
        ("POST", "/tenants", b"{}"), ("POST", "/tenants", b'{"name":"has space"}'),
        ("POST", "/tenants", b"\xff\xfe\x00garbage"),
        ("POST", "/tenants/1/users", b'{"name":"x","uid":-1}'),
        ("POST", "/tenants/1/users", b'{"name":"x","gids":"1,2"}'),
        ("POST", "/tenants/1/exports", b'{"path":"/x","clients":["300.1.1.1/8"]}'),
        ("POST", "/tenants/1/exports", b'{"path":"x","clients":["10.0.0.0/8"]}'),
        ("POST", "/tenants/1/exports", b'{"path":"/x","clients":["10.0.0.0/8"],"dir":99999}'),
        ("PUT", "/tenants/1/quota", b'{"bytes_limit":"lots"}'),
        ("PUT", "/tenants/1/qos", b'{"read_bps":1.5}'),
        ("PATCH", f"/keys/{d.access_key}", b'{"disabled":"yes"}'),
        ("PUT", "/tenants/1/qos", b'{"burst_ms":999999999}'),
    ]
    for method, path, body in cases:
        st, js, hdrs = adm.raw(method, path, data=body)
        assert st == 400, (method, path, body, st, js)
        assert js["error"] == "InvalidArgument" and js["message"], js
        assert hdrs["Content-Type"].startswith("application/json")
    for method, path, want, code in [("GET", "/nope", 404, "NotFound"),
                                     ("GET", "/tenants/abc", 404, "NotFound"),
                                     ("GET", "/tenants/0", 404, "NotFound"),
                                     ("GET", "/tenants/4294967296", 404, "NotFound"),
                                     ("GET", "/tenants/99999", 404, "NotFound"),
                                     ("PUT", "/tenants", 405, "MethodNotAllowed"),
                                     ("POST", "/tenants/1/keys", 405, "MethodNotAllowed"),
                                     ("POST", "/tenants", 409, "AlreadyExists")]:
        st, js, _ = adm.raw(method, path, {"name": "default"} if want == 409 else None)
        assert (st, js["error"]) == (want, code), (method, path, st, js)
        assert js["message"]
    # a body larger than the listener takes, and a raw broken request: no crash
    try:
        st, _, _ = adm.raw("POST", "/tenants", data=b"{" + b" " * (2 << 20) + b"}")
        assert st in (400, 413)
    except urllib.error.URLError:
        pass  # the listener answered 413 and closed before the body was sent
    host, port = d.admin_endpoint.rsplit("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"POST /api/v1/tenants HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"na")
        s.shutdown(socket.SHUT_WR)
        s.recv(4096)
    assert adm.get("/tenants")[0]["id"] == 1  # still serving


def test_changes_take_effect_at_once(d, adm):
    t = make_tenant(adm, "live", clients=["127.0.0.1/32"], export_path="/live")
    s3 = s3_for(d, t)
    s3.create_bucket(Bucket="live-bucket")
    # disable a key: the next request with it gets 403
    adm.patch(f"/keys/{t.akey}", {"disabled": True})
    with pytest.raises(ClientError) as ei:
        s3.list_objects_v2(Bucket="live-bucket")
    assert s3_code(ei.value)[0] == 403
    adm.patch(f"/keys/{t.akey}", {"disabled": False})
    s3.list_objects_v2(Bucket="live-bucket")
    # delete an export: a new MNT is refused, and its handles stop working
    with Nfs(d) as c:
        st, fh = c.mount("/live")
        assert st == 0
        adm.delete(f"/exports/{t.export['id']}")
        assert c.mount("/live")[0] in (MNT3ERR_NOENT, MNT3ERR_ACCES)
        assert c.getattr(fh)[0] != 0
    # an export whose client range changes: the old range is refused at the next MNT
    e = adm.post(f"/tenants/{t.id}/exports", {"path": "/live/2", "clients": ["127.0.0.1/32"]})
    with Nfs(d) as c:
        assert c.mount("/live/2")[0] == 0
        adm.patch(f"/exports/{e['id']}", {"clients": ["127.0.0.5/32"]})
        # refused as a path that never was exported is
        assert c.mount("/live/2")[0] == c.mount("/live/never")[0] == MNT3ERR_NOENT
    with Nfs(d, source="127.0.0.5") as c:
        assert c.mount("/live/2")[0] == 0
    # a quota set through the API applies to the very next write
    adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": 10})
    with pytest.raises(ClientError) as ei:
        s3.put_object(Bucket="live-bucket", Key="k", Body=b"x" * 100)
    assert s3_code(ei.value) == (403, "QuotaExceeded")
    adm.delete(f"/tenants/{t.id}/quota")
    s3.put_object(Bucket="live-bucket", Key="k", Body=b"x" * 100)
    # a key created now works at once
    k = adm.post(f"/tenants/{t.id}/users/{t.uid}/keys")
    start = time.time()
    d.boto3(access_key=k["access_key"], secret_key=k["secret_key"]).list_buckets()
    assert time.time() - start < 30


def test_token_from_environment_and_generated(daemon_factory):
    """S3NFS_ADMIN_TOKEN replaces the stored token; without it the first start
    generates one and prints it once."""
    d = daemon_factory(env={"S3NFS_ADMIN_TOKEN": "env-token-0123456789abcdef"}).start()
    assert Admin(d, auth=("token", "env-token-0123456789abcdef")).raw("GET", "/tenants")[0] == 200
    assert Admin(d, auth=("token", d.admin_token)).raw("GET", "/tenants")[0] == 403
    d.stop()
    d.env["S3NFS_ADMIN_TOKEN"] = "second-token-0123456789abc"
    d.start()
    assert Admin(d, auth=("token", "second-token-0123456789abc")).raw("GET", "/tenants")[0] == 200
    assert Admin(d, auth=("token", "env-token-0123456789abcdef")).raw("GET", "/tenants")[0] == 403
