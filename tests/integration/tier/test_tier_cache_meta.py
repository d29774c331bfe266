# SPDX-License-Identifier: Apache-2.0
"""Content-Type and user metadata of cache buckets (docs/tiering.md § Cache
mode, "Metadata") against the session's real Ceph RGW (`rgw`):

- an object imported from the remote shows the remote's Content-Type and
  x-amz-meta-* on its first S3 HEAD and GET (asked with one HEAD, without
  fetching its bytes), also after an NFS read, and the new ones after the
  remote object was replaced with other metadata (revalidation);
- write-back: a file written over S3 with a Content-Type and user metadata
  (one PUT and a multipart-sized one) reaches the remote with them (boto3
  HEAD on RGW)."""
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_wait_ms=3000"]
MiB = 1024 * 1024

d = daemon_fixture("tier-cache-meta", FAST)


def cache_bucket(d, rgw, rb, ttl_s):
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "ds/")
    b = "cmm" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": ttl_s, "read_only": False})
    return adm, b


def head(s3, b, k):
    h = s3.head_object(Bucket=b, Key=k)
    return h["ContentType"], h["Metadata"], h["ResponseMetadata"]["HTTPHeaders"].get(
        "x-s3nfs-tier-state")


def test_imported_objects_show_remote_metadata(d, rgw):
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cmm-")
    rs3.put_object(Bucket=rb, Key="ds/m/a.csv", Body=b"a,b\n1,2\n", ContentType="text/csv",
                   Metadata={"color": "blue", "n": "1"})
    rs3.put_object(Bucket=rb, Key="ds/m/img.png", Body=b"\x89PNG" * 100,
                   ContentType="image/png", Metadata={"label": "cat"})
    rs3.put_object(Bucket=rb, Key="ds/m/plain", Body=b"x" * 10, ContentType="text/plain")
    _, b = cache_bucket(d, rgw, rb, ttl_s=1)
    s3 = d.boto3()
    # HEAD: the remote's metadata, the bytes still remote
    assert head(s3, b, "m/a.csv") == ("text/csv", {"color": "blue", "n": "1"}, "evicted")
    assert head(s3, b, "m/plain") == ("text/plain", {}, "evicted")
    # GET: the same headers on the first answer
    o = s3.get_object(Bucket=b, Key="m/img.png")
    assert o["ContentType"] == "image/png" and o["Metadata"] == {"label": "cat"}
    assert o["Body"].read() == b"\x89PNG" * 100
    # an NFS read first, then S3: the metadata comes at the first S3 lookup
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, fh = n.lookup(root, b)
        st, fh = n.lookup(fh, "m")
        assert st == 0
        rs3.put_object(Bucket=rb, Key="ds/m/nfs.txt", Body=b"hello", ContentType="text/x-a",
                       Metadata={"k": "v"})
        time.sleep(1.2)  # the TTL: the next lookup lists m/ again
        st, ffh = n.lookup(fh, "nfs.txt")
        assert st == 0
        assert n.read_all(ffh) == b"hello"
    assert head(s3, b, "m/nfs.txt") == ("text/x-a", {"k": "v"}, "uploaded")
    # the remote object replaced with other metadata: the new ones after revalidation
    rs3.put_object(Bucket=rb, Key="ds/m/a.csv", Body=b"c,d\n3,4\n", ContentType="text/tsv",
                   Metadata={"color": "red"})
    time.sleep(1.2)
    s3.list_objects_v2(Bucket=b, Prefix="m/", Delimiter="/")  # revalidates m/
    assert head(s3, b, "m/a.csv") == ("text/tsv", {"color": "red"}, "evicted")
    assert s3.get_object(Bucket=b, Key="m/a.csv")["Body"].read() == b"c,d\n3,4\n"
    assert head(s3, b, "m/a.csv")[:2] == ("text/tsv", {"color": "red"})
    # a copy inside the bucket keeps them (the metadata is local now)
    s3.copy_object(Bucket=b, Key="m/copy.csv", CopySource={"Bucket": b, "Key": "m/a.csv"})
    assert head(s3, b, "m/copy.csv")[:2] == ("text/tsv", {"color": "red"})


def test_write_back_carries_content_type_and_metadata(d, rgw):
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cmm-")
    rs3.put_object(Bucket=rb, Key="ds/w/seed", Body=b"s")
    adm, b = cache_bucket(d, rgw, rb, ttl_s=1)
    s3 = d.boto3()
    small = os.urandom(1000)
    big = os.urandom(6 * MiB + 7)  # over tier_part_size: a multipart upload
    s3.put_object(Bucket=b, Key="w/small.json", Body=small, ContentType="application/json",
                  Metadata={"run": "7", "owner": "me"})
    s3.put_object(Bucket=b, Key="w/ckpt.bin", Body=big, ContentType="application/x-ckpt",
                  Metadata={"step": "1000"})
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush", want=200)[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="the flush barrier")
    o = rs3.head_object(Bucket=rb, Key="ds/w/small.json")
    assert o["ContentType"] == "application/json"
    assert o["Metadata"] == {"run": "7", "owner": "me"}
    o = rs3.get_object(Bucket=rb, Key="ds/w/ckpt.bin")
    assert o["ContentType"] == "application/x-ckpt" and o["Metadata"] == {"step": "1000"}
    assert o["Body"].read() == big
    assert o["ETag"].strip('"').endswith("-2")  # went as a multipart upload
    # read back through the cache after the revalidation: unchanged
    time.sleep(1.2)
    s3.list_objects_v2(Bucket=b, Prefix="w/", Delimiter="/")
    h = s3.head_object(Bucket=b, Key="w/small.json")
    assert h["ContentType"] == "application/json"
    assert h["Metadata"] == {"run": "7", "owner": "me"}
