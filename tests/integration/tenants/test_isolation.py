# SPDX-License-Identifier: Apache-2.0
"""Isolation between tenants, tried every way a user could, by both protocols.

Tenants A and B both own a bucket `datasets`; A also owns `a-private`. B's key
must not list, read, write or delete anything of A's: guessed bucket names,
CopyObject and UploadPartCopy with a source in A's bucket, a presigned URL
made with B's key for A's bucket, DeleteObjects naming A's keys, ListBuckets.
Over NFS, A's export admits only 127.0.0.2 and B's only 127.0.0.3: a client of
B's range cannot MNT A's export, cannot use a handle copied from A's mount or
forged from B's own, and LOOKUP ".." never leaves an export."""
import os
import sys

import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import (MNT3ERR_NOENT, Admin, Nfs, make_tenant, rpc3, s3_code,  # noqa: E402
                     s3_for)

A_ADDR, B_ADDR = "127.0.0.2", "127.0.0.3"
SECRET = b"tenant A's secret bytes\n" * 10


@pytest.fixture(scope="module")
def world(s3nfsd_module):
    d = s3nfsd_module
    adm = Admin(d)
    a = make_tenant(adm, "iso-a", clients=[A_ADDR + "/32"], export_path="/iso-a")
    b = make_tenant(adm, "iso-b", clients=[B_ADDR + "/32"], export_path="/iso-b")
    sa, sb = s3_for(d, a), s3_for(d, b)
    for s in (sa, sb):
        s.create_bucket(Bucket="datasets")
    sa.create_bucket(Bucket="a-private")
    sa.put_object(Bucket="a-private", Key="secret.txt", Body=SECRET)
    sa.put_object(Bucket="datasets", Key="a-only/train.bin", Body=SECRET)
    sa.put_object(Bucket="datasets", Key="shared-name.txt", Body=b"A's version")
    sb.put_object(Bucket="datasets", Key="shared-name.txt", Body=b"B's version")
    # A bucket exported on its own (LOOKUP ".." must stay inside it).
    ea = adm.post(f"/tenants/{a.id}/exports", {"path": "/iso-a/datasets", "source": "datasets",
                                              "clients": [A_ADDR + "/32"]})
    return dict(d=d, adm=adm, a=a, b=b, sa=sa, sb=sb, ea_ds=ea)


def a_intact(w):
    sa = w["sa"]
    assert sa.get_object(Bucket="a-private", Key="secret.txt")["Body"].read() == SECRET
    assert sa.get_object(Bucket="datasets", Key="a-only/train.bin")["Body"].read() == SECRET
    assert sa.get_object(Bucket="datasets", Key="shared-name.txt")["Body"].read() == b"A's version"


def http(method, url, data=None):
    """(status, body) of a plain request (presigned URLs need no headers)."""
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def refused(fn, *codes):
    with pytest.raises(ClientError) as ei:
        fn()
    st, code = s3_code(ei.value)
    assert st in (403, 404), (st, code)
    if codes:
        assert code in codes, code
    return code


def test_list_buckets_shows_only_own(world):
    names_b = sorted(b["Name"] for b in world["sb"].list_buckets()["Buckets"])
    names_a = sorted(b["Name"] for b in world["sa"].list_buckets()["Buckets"])
    assert names_b == ["datasets"]
    assert names_a == ["a-private", "datasets"]


def test_same_bucket_name_two_tenants(world):
    sb = world["sb"]
    assert sb.get_object(Bucket="datasets", Key="shared-name.txt")["Body"].read() == b"B's version"
    keys = [o["Key"] for o in sb.list_objects_v2(Bucket="datasets").get("Contents", [])]
    assert keys == ["shared-name.txt"]
    refused(lambda: sb.get_object(Bucket="datasets", Key="a-only/train.bin"), "NoSuchKey")
    refused(lambda: sb.head_object(Bucket="datasets", Key="a-only/train.bin"))
    a_intact(world)


def test_guessed_bucket_names(world):
    sb = world["sb"]
    nb = ("NoSuchBucket", "AccessDenied")
    refused(lambda: sb.head_bucket(Bucket="a-private"))
    refused(lambda: sb.list_objects_v2(Bucket="a-private"), *nb)
    refused(lambda: sb.list_objects(Bucket="a-private"), *nb)
    refused(lambda: sb.get_object(Bucket="a-private", Key="secret.txt"), *nb)
    refused(lambda: sb.head_object(Bucket="a-private", Key="secret.txt"))
    refused(lambda: sb.put_object(Bucket="a-private", Key="planted", Body=b"x"), *nb)
    refused(lambda: sb.delete_object(Bucket="a-private", Key="secret.txt"), *nb)
    refused(lambda: sb.delete_bucket(Bucket="a-private"), *nb)
    refused(lambda: sb.list_multipart_uploads(Bucket="a-private"), *nb)
    refused(lambda: sb.create_multipart_upload(Bucket="a-private", Key="m"), *nb)
    refused(lambda: sb.get_bucket_location(Bucket="a-private"), *nb)
    a_intact(world)
    # B may make its own "a-private" (names are per tenant): it is empty, A's is untouched.
    sb.create_bucket(Bucket="a-private")
    try:
        assert sb.list_objects_v2(Bucket="a-private").get("KeyCount", 0) == 0
        refused(lambda: sb.get_object(Bucket="a-private", Key="secret.txt"), "NoSuchKey")
        a_intact(world)
    finally:
        sb.delete_bucket(Bucket="a-private")
    a_intact(world)


def test_copy_object_from_other_tenant(world):
    sb = world["sb"]
    for src in ({"Bucket": "a-private", "Key": "secret.txt"},
                {"Bucket": "datasets", "Key": "a-only/train.bin"}):
        refused(lambda: sb.copy_object(Bucket="datasets", Key="stolen", CopySource=src),
                "NoSuchBucket", "NoSuchKey", "AccessDenied")
        refused(lambda: sb.get_object(Bucket="datasets", Key="stolen"), "NoSuchKey")
    # The same name in B's own bucket copies B's object, never A's.
    sb.copy_object(Bucket="datasets", Key="copied",
                   CopySource={"Bucket": "datasets", "Key": "shared-name.txt"})
    assert sb.get_object(Bucket="datasets", Key="copied")["Body"].read() == b"B's version"
    sb.delete_object(Bucket="datasets", Key="copied")


def test_upload_part_copy_from_other_tenant(world):
    sb = world["sb"]
    up = sb.create_multipart_upload(Bucket="datasets", Key="mpu-stolen")["UploadId"]
    try:
        for src in ({"Bucket": "a-private", "Key": "secret.txt"},
                    {"Bucket": "datasets", "Key": "a-only/train.bin"}):
            refused(lambda: sb.upload_part_copy(Bucket="datasets", Key="mpu-stolen",
                                                UploadId=up, PartNumber=1, CopySource=src),
                    "NoSuchBucket", "NoSuchKey", "AccessDenied")
        parts = sb.list_parts(Bucket="datasets", Key="mpu-stolen", UploadId=up)
        assert parts.get("Parts", []) == []
    finally:
        sb.abort_multipart_upload(Bucket="datasets", Key="mpu-stolen", UploadId=up)


def test_presigned_url_with_other_key(world):
    from botocore.config import Config
    cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"})
    d, a, b = world["d"], world["a"], world["b"]
    sb = d.boto3(access_key=b.akey, secret_key=b.secret, config=cfg)
    sa = d.boto3(access_key=a.akey, secret_key=a.secret, config=cfg)
    for op, params in (("get_object", {"Bucket": "a-private", "Key": "secret.txt"}),
                       ("get_object", {"Bucket": "datasets", "Key": "a-only/train.bin"}),
                       ("list_objects_v2", {"Bucket": "a-private"})):
        url = sb.generate_presigned_url(op, Params=params, ExpiresIn=300)
        st, body = http("GET", url)
        assert st in (403, 404), (url, st)
        assert SECRET not in body and b"<Key>" not in body
    url = sb.generate_presigned_url("put_object", Params={"Bucket": "a-private", "Key": "p"},
                                    ExpiresIn=300)
    assert http("PUT", url, b"planted")[0] in (403, 404)
    url = sb.generate_presigned_url("delete_object",
                                    Params={"Bucket": "a-private", "Key": "secret.txt"},
                                    ExpiresIn=300)
    assert http("DELETE", url)[0] in (403, 404)
    # Sanity: A's own presigned URL works.
    url = sa.generate_presigned_url("get_object", Params={"Bucket": "a-private",
                                                          "Key": "secret.txt"}, ExpiresIn=300)
    assert http("GET", url) == (200, SECRET)
    a_intact(world)


def test_delete_objects_naming_other_tenant_keys(world):
    sb = world["sb"]
    objs = {"Objects": [{"Key": "a-only/train.bin"}, {"Key": "secret.txt"}]}
    refused(lambda: sb.delete_objects(Bucket="a-private", Delete=objs), "NoSuchBucket",
            "AccessDenied")
    # In B's own "datasets", A's key names refer to nothing of A's.
    sb.delete_objects(Bucket="datasets", Delete=objs)
    a_intact(world)


def test_s3_with_forged_or_foreign_credentials(world):
    d, a = world["d"], world["a"]
    bad = d.boto3(access_key=a.akey, secret_key="not-the-secret-" + "x" * 25)
    refused(lambda: bad.list_buckets(), "SignatureDoesNotMatch", "AccessDenied")
    unknown = d.boto3(access_key="S3NNOSUCHKEY00000000", secret_key="y" * 40)
    refused(lambda: unknown.get_object(Bucket="a-private", Key="secret.txt"),
            "InvalidAccessKeyId", "AccessDenied")


# ---- NFS ----

def test_nfs_mount_outside_address_range(world):
    """Another tenant's export answers as a path that does not exist (here: a
    missing bucket under the default tenant's "/", which admits all loopback
    clients), so MNT does not tell which tenant paths exist."""
    with Nfs(world["d"], source=B_ADDR) as c:
        missing = c.mount("/iso-nothing-here")[0]
        assert missing == MNT3ERR_NOENT
        assert c.mount("/iso-a")[0] == missing
        assert c.mount("/iso-a/datasets")[0] == missing
        st, fh = c.mount("/iso-b")
        assert st == 0
        ents = c.readdir(fh)[1][0]
        names = sorted(n for _, n, _ in ents if n not in (".", ".."))
        assert names == ["datasets"]
        # The export list a client of B's range sees holds no export of A's.
        paths = [p for p, _ in c.mnt_list(rpc3.MNT_EXPORT)]
        assert "/iso-b" in paths and "/iso-a" not in paths and "/iso-a/datasets" not in paths
    with Nfs(world["d"], source=A_ADDR) as c:
        assert c.mount("/iso-b")[0] == MNT3ERR_NOENT
        assert c.mount("/iso-a")[0] == 0


def _a_handles(world):
    with Nfs(world["d"], source=A_ADDR) as c:
        st, root = c.mount("/iso-a")
        assert st == 0
        st, ds = c.lookup(root, "datasets")
        assert st == 0
        st, ao = c.lookup(ds, "a-only")
        assert st == 0
        st, f = c.lookup(ao, "train.bin")
        assert st == 0
        st, data = c.read(f, 0, 4096)
        assert st == 0 and data[0] == SECRET
        return root, ds, f


def test_nfs_handle_copied_from_other_mount(world):
    root, ds, f = _a_handles(world)
    denied = (rpc3.NFS3ERR_STALE, rpc3.NFS3ERR_ACCES)
    with Nfs(world["d"], source=B_ADDR) as c:
        assert c.mount("/iso-b")[0] == 0
        for fh in (root, ds, f):
            assert c.getattr(fh)[0] in denied
            assert c.lookup(fh, "a-only")[0] in denied
            assert c.readdir(fh)[0] in denied
            assert c.fsstat(fh)[0] in denied
        assert c.read(f, 0, 100)[0] in denied
        assert c.write(f, 0, b"overwritten")[0] in denied
        assert c.create(ds, "planted")[0] in denied
        assert c.mkdir(root, "planted-dir")[0] in denied
        assert c.remove(ds, "shared-name.txt") in denied
    a_intact(world)


def test_nfs_forged_handle(world):
    """Change the tenant, export or inode bytes of B's own handle: never A's file."""
    root_a, ds_a, f_a = _a_handles(world)
    with Nfs(world["d"], source=B_ADDR) as c:
        st, root_b = c.mount("/iso-b")
        assert st == 0
        forged = []
        for off, src in ((4, root_a), (8, root_a), (12, f_a)):  # export id, tenant, inode
            width = 4 if off < 12 else 8
            fh = bytearray(root_b)
            fh[off:off + width] = src[off:off + width]
            forged.append(bytes(fh))
        # the whole identity of A's file, with B's MAC
        forged.append(f_a[:24] + root_b[24:])
        for fh in forged:
            st, _ = c.getattr(fh)
            assert st in (rpc3.NFS3ERR_STALE, rpc3.NFS3ERR_BADHANDLE, rpc3.NFS3ERR_ACCES), st
            assert c.read(fh, 0, 100)[0] != 0


def test_nfs_dotdot_stays_inside_export(world):
    with Nfs(world["d"], source=A_ADDR) as c:
        st, root = c.mount("/iso-a/datasets")  # the bucket itself
        assert st == 0
        rid = c.fileid(root)
        st, up = c.lookup(root, "..")
        assert st == 0 and c.fileid(up) == rid
        st, up2 = c.lookup(up, "..")
        assert st == 0 and c.fileid(up2) == rid
        # a-private (a sibling bucket, outside this export) is not reachable by name
        assert c.lookup(root, "a-private")[0] == rpc3.NFS3ERR_NOENT
        st, ao = c.lookup(root, "a-only")
        assert st == 0
        st, back = c.lookup(ao, "..")
        assert st == 0 and c.fileid(back) == rid
    with Nfs(world["d"], source=B_ADDR) as c:
        st, root = c.mount("/iso-b")
        assert st == 0
        rid = c.fileid(root)
        st, up = c.lookup(root, "..")
        assert st == 0 and c.fileid(up) == rid
        ents = c.readdir(up)[1][0]
        assert sorted(n for _, n, _ in ents if n not in (".", "..")) == ["datasets"]
