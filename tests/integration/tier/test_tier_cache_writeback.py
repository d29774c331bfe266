# SPDX-License-Identifier: Apache-2.0
"""Write-back of a read-write CACHE bucket over the real Ceph RGW of the
session (`rgw`), for the changes test_tier_cache.py does not make (it puts,
NFS-creates and S3-deletes); each ends with the flush barrier and reads the
remote with boto3 straight from RGW:

- an S3 multipart upload into the cache bucket: the remote object has the
  same bytes;
- CopyObject of an imported object never read here (evicted: its bytes on
  the remote only) to another key of the bucket: the remote gets the copy,
  the source stays;
- NFS REMOVE of an imported name: the remote object is deleted;
- NFS RENAME of an imported name, and of a directory of imported names
  (never read here): the remote has the new keys with the same bytes and not
  the old ones.

After each, a revalidation (the TTL past) shows the same names as before it:
the bucket's own write-back is not taken for a remote change; with a
write-back delay, also before the changes reach the remote (renamed and
removed names not imported again, a renamed directory's files kept, no
conflict counted)."""
import hashlib
import os
import re
import sys
import time
import urllib.request
import uuid

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

MiB = 1024 * 1024
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB"]
TTL = 1

d = daemon_fixture("tier-cache-wb", FAST)


def body_of(key, n):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def cache_bucket(dm, rgw, objects):
    """A remote bucket filled with @objects (remote key -> size) under ds/, and a
    read-write cache bucket over it (TTL 1 s, uploads at once)."""
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cw-")
    for k, n in objects.items():
        rs3.put_object(Bucket=rb, Key=k, Body=body_of(k, n))
    adm = Admin(dm)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "ds/")
    b = "cw" + uuid.uuid4().hex[:8]
    dm.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": TTL, "read_only": False})
    return rs3, rb, b, adm


def flush(adm, b):
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush", want=200)[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             timeout=120, what="the flush barrier")


def remote_keys(rs3, rb):
    out = {}
    for page in rs3.get_paginator("list_objects_v2").paginate(Bucket=rb):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def remote_body(rs3, rb, key):
    try:
        return rs3.get_object(Bucket=rb, Key=key)["Body"].read()
    except botocore.exceptions.ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return None
        raise


def local_keys(dm, b, prefix=""):
    s3 = dm.boto3()
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def tier_state(dm, b, k):
    h = dm.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state")


def revalidated(dm, b, want):
    """Past the TTL, a listing (which revalidates every directory) shows @want."""
    time.sleep(TTL + 0.3)
    assert local_keys(dm, b) == want


def nfs_dir(n, b, path):
    st, root = n.mount("/")
    assert st == 0
    st, fh = n.lookup(root, b)
    assert st == 0, st
    for part in [p for p in path.split("/") if p]:
        st, fh = n.lookup(fh, part)
        assert st == 0, (path, st)
    return fh


def test_multipart_upload_into_a_cache_bucket(d, rgw):
    rs3, rb, b, adm = cache_bucket(d, rgw, {"ds/mp/old": 1000})
    s3 = d.boto3()
    parts = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(123457)]
    up = s3.create_multipart_upload(Bucket=b, Key="mp/big.bin")["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        e = s3.upload_part(Bucket=b, Key="mp/big.bin", UploadId=up, PartNumber=i, Body=p)
        done.append({"PartNumber": i, "ETag": e["ETag"]})
    s3.complete_multipart_upload(Bucket=b, Key="mp/big.bin", UploadId=up,
                                 MultipartUpload={"Parts": done})
    data = b"".join(parts)
    flush(adm, b)
    assert remote_body(rs3, rb, "ds/mp/big.bin") == data
    assert tier_state(d, b, "mp/big.bin") == "uploaded"
    assert remote_body(rs3, rb, "ds/mp/old") == body_of("ds/mp/old", 1000)
    revalidated(d, b, {"mp/big.bin": len(data), "mp/old": 1000})
    assert s3.get_object(Bucket=b, Key="mp/big.bin")["Body"].read() == data


def test_copy_of_an_imported_object_never_read(d, rgw):
    src = "ds/cp/src.bin"
    n = 3 * MiB + 7
    rs3, rb, b, adm = cache_bucket(d, rgw, {src: n})
    s3 = d.boto3()
    assert local_keys(d, b, "cp/") == {"cp/src.bin": n}  # imported, bytes on the remote only
    assert tier_state(d, b, "cp/src.bin") == "evicted"
    s3.copy_object(Bucket=b, Key="cp/dst.bin", CopySource={"Bucket": b, "Key": "cp/src.bin"})
    s3.copy_object(Bucket=b, Key="cp/sub/dst2.bin",
                   CopySource={"Bucket": b, "Key": "cp/src.bin"})
    flush(adm, b)
    want = body_of(src, n)
    assert remote_body(rs3, rb, "ds/cp/dst.bin") == want
    assert remote_body(rs3, rb, "ds/cp/sub/dst2.bin") == want
    assert remote_body(rs3, rb, src) == want
    revalidated(d, b, {"cp/src.bin": n, "cp/dst.bin": n, "cp/sub/dst2.bin": n})
    assert s3.get_object(Bucket=b, Key="cp/dst.bin")["Body"].read() == want


def test_nfs_remove_of_an_imported_name(d, rgw):
    rs3, rb, b, adm = cache_bucket(d, rgw, {"ds/rm/x": 5000, "ds/rm/keep": 10})
    with Nfs(d) as n:
        dfh = nfs_dir(n, b, "rm")
        assert n.lookup(dfh, "x")[0] == 0
        assert n.remove(dfh, "x") == 0
        assert n.lookup(dfh, "x")[0] == 2  # NOENT
    flush(adm, b)
    assert remote_body(rs3, rb, "ds/rm/x") is None
    assert remote_keys(rs3, rb) == {"ds/rm/keep": 10}
    revalidated(d, b, {"rm/keep": 10})


def test_nfs_rename_of_imported_names_and_of_a_directory(d, rgw):
    objs = {"ds/mv/a": 4000, "ds/mv/stay": 20, "ds/olddir/f1": 150000,
            "ds/olddir/f2": 6 * MiB + 1, "ds/olddir/deep/f3": 77}
    rs3, rb, b, adm = cache_bucket(d, rgw, objs)
    assert set(local_keys(d, b)) == {k[3:] for k in objs}  # imported, never read
    with Nfs(d) as n:
        mv = nfs_dir(n, b, "mv")
        assert n.rename(mv, "a", mv, "b") == 0
        root = nfs_dir(n, b, "")
        assert n.rename(root, "olddir", root, "newdir") == 0
        assert n.lookup(root, "olddir")[0] == 2
    flush(adm, b)
    want = {"ds/mv/b": 4000, "ds/mv/stay": 20, "ds/newdir/f1": 150000,
            "ds/newdir/f2": 6 * MiB + 1, "ds/newdir/deep/f3": 77}
    assert remote_keys(rs3, rb) == want
    old = {"ds/mv/a": "ds/mv/b", "ds/olddir/f1": "ds/newdir/f1",
           "ds/olddir/f2": "ds/newdir/f2", "ds/olddir/deep/f3": "ds/newdir/deep/f3"}
    for o, k in old.items():
        assert remote_body(rs3, rb, k) == body_of(o, objs[o]), k
    revalidated(d, b, {k[3:]: v for k, v in want.items()})
    s3 = d.boto3()
    assert s3.get_object(Bucket=b, Key="newdir/deep/f3")["Body"].read() == \
        body_of("ds/olddir/deep/f3", 77)


def conflicts(dm):
    text = urllib.request.urlopen(dm.admin_endpoint + "/metrics", timeout=10).read().decode()
    m = re.search(r"^s3nfs_cache_conflicts_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_revalidation_before_the_upload(d, rgw):
    """With a write-back delay, the TTL runs out before renames and removes reach the
    remote: a revalidation then still shows the bucket's own view (the new names with
    their bytes, the old ones not back, no conflict), and the flush barrier moves the
    remote to it. (Before the fix, the remote's old names were imported again, a renamed
    directory's files removed as deleted on the remote, and the old keys never deleted.)"""
    objs = {"ds/mv/a": 4000, "ds/mv/stay": 20, "ds/olddir/f1": 1500,
            "ds/olddir/deep/f3": 77, "ds/rm/x": 10, "ds/rm/k": 10, "ds/rm/s3del": 30}
    rs3, rb, b, adm = cache_bucket(d, rgw, objs)
    pol = adm.get(f"/tenants/1/buckets/{b}/tier")
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": pol["remote"], "upload_after_s": 3600})
    assert set(local_keys(d, b)) == {k[3:] for k in objs}
    c0 = conflicts(d)
    with Nfs(d) as n:
        mv = nfs_dir(n, b, "mv")
        assert n.rename(mv, "a", mv, "b") == 0
        root = nfs_dir(n, b, "")
        assert n.rename(root, "olddir", root, "newdir") == 0
        assert n.remove(nfs_dir(n, b, "rm"), "x") == 0
    d.boto3().delete_object(Bucket=b, Key="rm/s3del")
    want = {"mv/b": 4000, "mv/stay": 20, "newdir/f1": 1500, "newdir/deep/f3": 77, "rm/k": 10}
    for _ in range(2):
        revalidated(d, b, want)
    assert conflicts(d) == c0
    assert remote_body(rs3, rb, "ds/mv/a") == body_of("ds/mv/a", 4000)  # not moved yet
    # the renamed files read (recalled from their old keys) before they are moved
    s3 = d.boto3()
    assert s3.get_object(Bucket=b, Key="mv/b")["Body"].read() == body_of("ds/mv/a", 4000)
    assert s3.get_object(Bucket=b, Key="newdir/deep/f3")["Body"].read() == \
        body_of("ds/olddir/deep/f3", 77)
    flush(adm, b)
    assert remote_keys(rs3, rb) == {"ds/" + k: v for k, v in want.items()}
    assert remote_body(rs3, rb, "ds/newdir/deep/f3") == body_of("ds/olddir/deep/f3", 77)
    assert remote_body(rs3, rb, "ds/mv/b") == body_of("ds/mv/a", 4000)
    revalidated(d, b, want)
    assert s3.get_object(Bucket=b, Key="newdir/f1")["Body"].read() == \
        body_of("ds/olddir/f1", 1500)
    assert conflicts(d) == c0
