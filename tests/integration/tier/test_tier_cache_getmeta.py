# SPDX-License-Identifier: Apache-2.0
"""An object's first S3 GET in a cache bucket (docs/tiering.md § Cache mode,
"Metadata"): its Content-Type and x-amz-meta-* come from the answer of the
recall's own GET, not from a HEAD of their own. The remote is a second s3nfsd
whose request log says what it was asked ("op=GetObject GET /bucket/key ...").

- a whole GET of a small object: the remote sees one GET and no HEAD, and the
  client gets the remote's headers, on that answer and the next ones;
- a ranged GET of a larger object: the headers come from the ranged GET of the
  chunk that holds the range (no HEAD, no chunk before it);
- an S3 HEAD of an object never read keeps its HEAD (no GET: the bytes stay
  remote), and its GET after that is a GET only;
- an NFS read's recall keeps them too: the S3 HEAD after it asks nothing.
The same first GET against the session's Ceph RGW: the right headers."""
import os
import re
import sys
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, new_bucket  # noqa: E402

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "data_file_size=1GiB", "--set", "tier_recall_wait_ms=5000"]
MiB = 1024 * 1024


def cache_bucket(d, endpoint, akey, skey, rb):
    adm = Admin(d)
    r = add_remote(adm, endpoint, akey, skey, rb, "ds/")
    b = "cmg" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 3600, "read_only": False})
    return b


def metric(d, name):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class RemoteLog:
    """The remote s3nfsd's request log from a mark on."""

    def __init__(self, rem):
        self.path = rem.daemon.log_path
        self.bucket = rem.bucket
        self.mark()

    def mark(self):
        time.sleep(0.5)  # request log lines are flushed within SRV_LOG_FLUSH_MS
        self.pos = os.path.getsize(self.path)

    def since(self, key):
        """(op, status) of each request for @key since the mark."""
        time.sleep(0.5)
        with open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self.pos)
            text = f.read()
        path = f"/{re.escape(self.bucket)}/ds/{re.escape(key)}"
        pat = rf"op=(\w+) (?:GET|HEAD) {path}\S* status=(\d+)"
        return [(m.group(1), m.group(2)) for m in re.finditer(pat, text)]


def got(o):
    return o["ContentType"], o["Metadata"]


def test_first_get_takes_metadata_from_the_recall(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    small = os.urandom(150 * 1000 + 3)
    big = os.urandom(9 * MiB + 5)
    rem.s3.put_object(Bucket=rem.bucket, Key="ds/g/a.csv", Body=small, ContentType="text/csv",
                      Metadata={"color": "blue", "n": "1"})
    rem.s3.put_object(Bucket=rem.bucket, Key="ds/g/big.bin", Body=big,
                      ContentType="application/x-big", Metadata={"shard": "7"})
    rem.s3.put_object(Bucket=rem.bucket, Key="ds/g/h.txt", Body=b"hello", ContentType="text/x-h",
                      Metadata={"k": "v"})
    dm = daemon_factory(extra_args=FAST).start()
    b = cache_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket)
    s3 = dm.boto3()
    s3.list_objects_v2(Bucket=b, Prefix="g/", Delimiter="/")  # imports g/
    log = RemoteLog(rem)

    # a whole GET: one GET on the remote, no HEAD; the remote's headers
    o = s3.get_object(Bucket=b, Key="g/a.csv")
    assert got(o) == ("text/csv", {"color": "blue", "n": "1"})
    assert o["Body"].read() == small
    assert log.since("g/a.csv") == [("GetObject", "200")]
    log.mark()
    o = s3.get_object(Bucket=b, Key="g/a.csv")  # the bytes and metadata are local now
    assert got(o) == ("text/csv", {"color": "blue", "n": "1"})
    assert o["Body"].read() == small
    h = s3.head_object(Bucket=b, Key="g/a.csv")
    assert (h["ContentType"], h["Metadata"]) == ("text/csv", {"color": "blue", "n": "1"})
    assert log.since("g/a.csv") == []

    # a ranged GET in the middle of a larger object: its headers from that chunk's GET
    log.mark()
    at = 5 * MiB + 17
    o = s3.get_object(Bucket=b, Key="g/big.bin", Range=f"bytes={at}-{at + 99}")
    assert got(o) == ("application/x-big", {"shard": "7"})
    assert o["Body"].read() == big[at:at + 100]
    reqs = log.since("g/big.bin")
    assert reqs and all(r == ("GetObject", "206") for r in reqs), reqs
    o = s3.get_object(Bucket=b, Key="g/big.bin")
    assert got(o) == ("application/x-big", {"shard": "7"})
    assert o["Body"].read() == big
    assert all(op == "GetObject" for op, _ in log.since("g/big.bin"))

    # an S3 HEAD of an object never read: a HEAD (the bytes stay remote)
    log.mark()
    h = s3.head_object(Bucket=b, Key="g/h.txt")
    assert (h["ContentType"], h["Metadata"]) == ("text/x-h", {"k": "v"})
    assert h["ResponseMetadata"]["HTTPHeaders"].get("x-s3nfs-tier-state") == "evicted"
    assert log.since("g/h.txt") == [("HeadObject", "200")]
    log.mark()
    o = s3.get_object(Bucket=b, Key="g/h.txt")
    assert got(o) == ("text/x-h", {"k": "v"}) and o["Body"].read() == b"hello"
    assert log.since("g/h.txt") == [("GetObject", "200")]

    assert metric(dm, 's3nfs_cache_meta_total{via="recall"}') == 2
    assert metric(dm, 's3nfs_cache_meta_total{via="head"}') == 1


def test_nfs_recall_keeps_metadata(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    rem.s3.put_object(Bucket=rem.bucket, Key="ds/n/f.txt", Body=b"from nfs",
                      ContentType="text/x-n", Metadata={"via": "nfs"})
    dm = daemon_factory(extra_args=FAST).start()
    b = cache_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket)
    log = RemoteLog(rem)
    with Nfs(dm) as n:
        st, fh = n.mount("/")
        for name in (b, "n", "f.txt"):
            st, fh = n.lookup(fh, name)
            assert st == 0, name
        assert n.read_all(fh) == b"from nfs"
    assert log.since("n/f.txt") == [("GetObject", "200")]
    log.mark()
    h = dm.boto3().head_object(Bucket=b, Key="n/f.txt")
    assert (h["ContentType"], h["Metadata"]) == ("text/x-n", {"via": "nfs"})
    assert log.since("n/f.txt") == []
    assert metric(dm, 's3nfs_cache_meta_total{via="head"}') == 0


def test_first_get_metadata_from_rgw(daemon_factory, rgw):
    """The same over Ceph RGW: its GET answers (whole and ranged) carry the headers."""
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cmg-")
    big = os.urandom(3 * MiB + 1)
    rs3.put_object(Bucket=rb, Key="ds/r/a.json", Body=b'{"a": 1}',
                   ContentType="application/json", Metadata={"run": "3"})
    rs3.put_object(Bucket=rb, Key="ds/r/big.bin", Body=big, ContentType="application/x-big",
                   Metadata={"part": "2"})
    dm = daemon_factory(extra_args=FAST).start()
    b = cache_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb)
    s3 = dm.boto3()
    o = s3.get_object(Bucket=b, Key="r/a.json")
    assert got(o) == ("application/json", {"run": "3"}) and o["Body"].read() == b'{"a": 1}'
    o = s3.get_object(Bucket=b, Key="r/big.bin", Range="bytes=-1000")
    assert got(o) == ("application/x-big", {"part": "2"})
    assert o["Body"].read() == big[-1000:]
    for k, ct in (("r/a.json", "application/json"), ("r/big.bin", "application/x-big")):
        assert s3.head_object(Bucket=b, Key=k)["ContentType"] == ct
    assert metric(dm, 's3nfs_cache_meta_total{via="recall"}') == 2
    assert metric(dm, 's3nfs_cache_meta_total{via="head"}') == 0
