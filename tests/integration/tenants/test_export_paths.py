# SPDX-License-Identifier: Apache-2.0
"""Export paths are unambiguous across tenants (docs/nfs.md, "Export paths"),
tried as a hostile tenant admin of tenant A against tenant B: nothing A's admin
creates changes what B's NFS clients reach. A tenant admin places exports only
in its tenant's own prefix (/<name>), a path/range pair that would be
ambiguous with another export answers 409 even for a system admin, and MOUNT
(MNT, DUMP, EXPORT) tells a client nothing about exports it may not use.

Client addresses (all loopback; the default tenant's "/" admits 127.0.0.0/8):
B's client 127.0.0.12 (B's export /hj-b admits only it), a bystander 127.0.0.14."""
import os
import sys

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import (MNT3ERR_ACCES, MNT3ERR_NOENT, Admin, Nfs, make_tenant, rpc3,  # noqa: E402
                     s3_for)

B_CLIENT, OTHER, BYSTANDER = "127.0.0.12", "127.0.0.13", "127.0.0.14"


@pytest.fixture(scope="module")
def w(s3nfsd_module):
    d = s3nfsd_module
    adm = Admin(d)
    a = make_tenant(adm, "hj-a", tenant_admin=True)
    b = make_tenant(adm, "hj-b", clients=[B_CLIENT + "/32"], tenant_admin=True)
    sa, sb = s3_for(d, a), s3_for(d, b)
    sa.create_bucket(Bucket="datasets")
    sb.create_bucket(Bucket="datasets")
    return dict(d=d, adm=adm, a=a, b=b, sa=sa, sb=sb,
                ta=Admin(d, auth=("sigv4", a.akey, a.secret)),
                tb=Admin(d, auth=("sigv4", b.akey, b.secret)))


def keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_tenant_admin_cannot_take_another_tenants_path(w):
    a, b, ta = w["a"], w["b"], w["ta"]
    # Every spelling of B's path, a path B's clients mount below it, and paths
    # outside A's own prefix: 403 for A's tenant admin, whatever the clients.
    for path in ("/hj-b", "/hj-b/datasets", "//hj-b//datasets/", "/hj-b/./datasets", "/",
                 "/datasets", "/hj-a-x", "/HJ-A"):
        st, js, _ = ta.raw("POST", f"/tenants/{a.id}/exports",
                           {"path": path, "clients": [B_CLIENT + "/32"], "source": "datasets"})
        assert st in (403, 400), (path, st, js)
        if st == 403:
            assert js["error"] == "Forbidden" and "/hj-a" in js["message"], js
    st, js, _ = ta.raw("POST", f"/tenants/{a.id}/exports",
                       {"path": "/hj-b/datasets", "clients": ["127.0.0.0/8"]})
    assert st == 403, js
    # In its own prefix A may export to any client: that changes no path of B's.
    own = ta.post(f"/tenants/{a.id}/exports", {"path": "/hj-a/datasets", "source": "datasets",
                                               "clients": [B_CLIENT + "/32"]})
    # ... but may not move it out of its prefix, or widen one placed outside.
    st, js, _ = ta.raw("PATCH", f"/exports/{own['id']}", {"path": "/hj-b/datasets"})
    assert st == 403, js
    # B's client still mounts B's bucket, and what it writes A never reads.
    with Nfs(w["d"], source=B_CLIENT) as c:
        st, fh = c.mount("/hj-b/datasets")
        assert st == 0
        st, f = c.create(fh, "b-secret.txt")
        assert st == 0 and c.write_all(f, b"B's bytes")[0] == 0
        st, afh = c.mount("/hj-a/datasets")
        assert st == 0 and afh != fh
    assert keys(w["sb"], "datasets") == ["b-secret.txt"]
    assert keys(w["sa"], "datasets") == []
    ta.delete(f"/exports/{own['id']}")


def test_ambiguous_pairs_answer_409_even_for_a_system_admin(w):
    adm, a, b, tb = w["adm"], w["a"], w["b"], w["tb"]
    bex = b.export
    for path, clients in (("/hj-b/datasets", ["127.0.0.0/24"]),  # below B's, overlapping
                          ("/hj-b", [B_CLIENT]),                 # B's own path and client
                          ("/hj-b", ["::ffff:127.0.0.0/120"]),   # the same, as IPv6
                          ("/loose", [OTHER])):                  # below the default "/"
        st, js, _ = adm.raw("POST", f"/tenants/{a.id}/exports", {"path": path,
                                                                 "clients": clients})
        assert st == 409 and js["error"] == "Conflict", (path, st, js)
    st, js, _ = adm.raw("POST", f"/tenants/{a.id}/exports", {"path": "/hj-b//datasets/",
                                                             "clients": [B_CLIENT]})
    assert st == 409 and f"export {bex['id']} (/hj-b" in js["message"], js
    # B's path for a disjoint client: a system admin may place it there.
    e = adm.post(f"/tenants/{a.id}/exports", {"path": "/hj-b", "clients": [OTHER]})
    # B's own admin may not then widen B's export over that client; the answer
    # does not name A's export.
    st, js, _ = tb.raw("PATCH", f"/exports/{bex['id']}", {"clients": ["127.0.0.12/31"]})
    assert st == 409 and js["error"] == "Conflict", js
    assert "another tenant" in js["message"] and str(e["id"]) not in js["message"], js
    # A's admin may change the flags of the export placed for it, not where it is.
    ta = w["ta"]
    assert ta.patch(f"/exports/{e['id']}", {"read_only": True})["read_only"] is True
    st, js, _ = ta.raw("PATCH", f"/exports/{e['id']}", {"clients": [BYSTANDER]})
    assert st == 403, js
    with Nfs(w["d"], source=OTHER) as c:
        st, fh = c.mount("/hj-b")
        assert st == 0
        assert c.mkdir(fh, "x")[0] == rpc3.NFS3ERR_ROFS  # A's read-only export
    with Nfs(w["d"], source=B_CLIENT) as c:
        assert c.mount("/hj-b")[0] == 0
    adm.delete(f"/exports/{e['id']}")
    # Renaming B would leave /hj-b in nobody's prefix under the default "/" for
    # loopback: refused, and nothing changes.
    st, js, _ = adm.raw("PATCH", f"/tenants/{b.id}", {"name": "hj-b2"})
    assert st == 409 and js["error"] == "Conflict", js
    assert adm.get(f"/tenants/{b.id}")["name"] == "hj-b"


def test_mount_dump_and_export_show_only_usable_exports(w):
    with Nfs(w["d"], source=B_CLIENT) as c:
        assert c.mount("/hj-b")[0] == 0
        assert (B_CLIENT, "/hj-b") in c.mnt_list(rpc3.MNT_DUMP)
        assert "/hj-b" in [p for p, _ in c.mnt_list(rpc3.MNT_EXPORT)]
    with Nfs(w["d"], source=BYSTANDER) as c:
        assert c.mount("/")[0] == 0
        dump = c.mnt_list(rpc3.MNT_DUMP)
        assert (BYSTANDER, "/") in dump
        assert all(p != "/hj-b" and h != B_CLIENT for h, p in dump), dump
        assert "/hj-b" not in [p for p, _ in c.mnt_list(rpc3.MNT_EXPORT)]


def test_mnt_answers_another_tenants_path_as_a_missing_one(w):
    with Nfs(w["d"], source=BYSTANDER) as c:
        missing = c.mount("/hj-nothing-here")[0]
        assert missing == MNT3ERR_NOENT
        for path in ("/hj-b", "/hj-b/datasets", "/hj-b/nothing", "//hj-b/"):
            assert c.mount(path)[0] == missing, path
    # A bucket of the default tenant named like tenant B is not mounted by that
    # name: /hj-b is B's prefix (it stays reachable below a mount of "/").
    s3 = w["d"].boto3()
    s3.create_bucket(Bucket="hj-b")
    try:
        with Nfs(w["d"], source=BYSTANDER) as c:
            assert c.mount("/hj-b")[0] == MNT3ERR_NOENT
            st, root = c.mount("/")
            assert st == 0 and c.lookup(root, "hj-b")[0] == 0
    finally:
        s3.delete_bucket(Bucket="hj-b")


def test_mnt_without_any_export_for_the_client(s3nfsd):
    """A client no export admits gets one answer for every path: an existing
    export of another tenant, a path that exists nowhere, and "/"."""
    adm = Admin(s3nfsd)
    adm.delete("/exports/1")  # the bootstrap "/"
    make_tenant(adm, "oc", clients=["127.0.0.31/32"])
    with Nfs(s3nfsd, source="127.0.0.31") as c:
        assert c.mount("/oc")[0] == 0
    with Nfs(s3nfsd, source="127.0.0.30") as c:
        for path in ("/oc", "/oc/x", "/nothing", "/"):
            assert c.mount(path)[0] == MNT3ERR_ACCES, path
        assert c.mnt_list(rpc3.MNT_EXPORT) == []
        assert c.mnt_list(rpc3.MNT_DUMP) == []


def test_s3_untouched_by_refused_exports(w):
    """The refused attempts above left nothing behind: B's S3 view is B's."""
    with pytest.raises(ClientError):
        w["sb"].get_object(Bucket="datasets", Key="nothing-here")
    assert [e["path"] for e in w["adm"].get(f"/tenants/{w['a'].id}/exports")] == []
