# SPDX-License-Identifier: Apache-2.0
"""Cache mode (docs/tiering.md § Cache mode) against the real Ceph RGW of the
session (`rgw`):

- a bucket in cache mode over a remote bucket pre-filled with boto3 lists its
  objects lazily (S3 ListObjectsV2 pages, NFS READDIR through libnfs' nfs-ls),
  with the remote's sizes and ETags, and reads them through (S3 GET, libnfs'
  nfs-cat, NFS READ by our RPC client);
- names are revalidated after the TTL: a remote overwrite, a remote delete and
  a new remote object show; a local change not uploaded yet wins a conflict;
- writes in a read-write cache bucket go back to the remote (flush barrier);
- a read-only cache bucket refuses writes: S3 403 AccessDenied, NFS3ERR_ROFS;
- the remote down (a TCP relay in front of RGW cut): data already local is
  served, data not local answers S3 503 / NFS JUKEBOX (retryable);
- two daemons over one remote bucket: a file written on node A is readable on
  node B after A's upload (flush barrier) and B's TTL, never torn.

The number of pre-filled objects is S3NFS_CACHE_OBJECTS (default 10,000, the
issue's proof; about 40 s on a 2-core machine, fill included)."""
import concurrent.futures
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import botocore.exceptions
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from s3nfsd_harness import Daemon  # noqa: E402
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402

NOBJ = int(os.environ.get("S3NFS_CACHE_OBJECTS", "10000"))
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_wait_ms=3000", "--set", "tier_recall_fail_ms=60000"]
ROFS, JUKEBOX = 30, 10008
MiB = 1024 * 1024


d = daemon_fixture("tier-cache", FAST)


def new_remote_bucket(s3):
    return new_bucket(s3, "cm-")


def cache_bucket(d, endpoint, akey, skey, rbucket, prefix="ds/", ttl_s=1, read_only=False,
                 upload_after_s=0):
    adm = Admin(d)
    r = add_remote(adm, endpoint, akey, skey, rbucket, prefix)
    b = "cm" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": upload_after_s})
    got = adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": ttl_s, "read_only": read_only})
    assert got["cache_mode"] is True and got["ttl_s"] == ttl_s and got["read_only"] == read_only
    assert got["remote_prefix"] == prefix
    return b


def fill(rs3, rb, keys, size_of):
    def put(k):
        rs3.put_object(Bucket=rb, Key=k, Body=body_of(k, size_of(k)))
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(put, keys))


def body_of(key, n):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def list_all(s3, b, prefix="", delimiter=None):
    kw = {"Bucket": b, "Prefix": prefix}
    if delimiter:
        kw["Delimiter"] = delimiter
    keys, prefixes = {}, []
    for page in s3.get_paginator("list_objects_v2").paginate(**kw):
        for o in page.get("Contents", []):
            keys[o["Key"]] = (o["Size"], o["ETag"].strip('"'))
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return keys, prefixes


def s3_error(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]
    raise AssertionError("no error")


def state(d, b, k):
    h = d.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state")


def metrics(d):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        return r.read().decode()


def metric(d, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", metrics(d), re.M)
    return float(m.group(1)) if m else None


def nfs_fh(n, b, key):
    st, root = n.mount("/")
    assert st == 0
    st, fh = n.lookup(root, b)
    assert st == 0
    for part in [p for p in key.split("/") if p]:
        st, fh = n.lookup(fh, part)
        if st != 0:
            return st, None
    return 0, fh


def libnfs(d, *args):
    for tool in ("nfs-ls", "nfs-cat"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (libnfs-utils)")
    p = subprocess.run(list(args), capture_output=True, timeout=120)
    assert p.returncode == 0, f"{args}: {p.stdout[-500:]!r} {p.stderr[-500:]!r}\n{d.tail()}"
    return p.stdout


def nfs_url(d, path):
    port = d.nfs_port
    return f"nfs://127.0.0.1/{path}?version=3&nfsport={port}&mountport={port}"


class Relay:
    """A TCP relay in front of RGW that the test can cut (the remote "down")
    and restore, without stopping the session's RGW."""

    def __init__(self, target):
        host, port = target.split("//", 1)[1].split(":")
        self.target = (host, int(port.rstrip("/")))
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.up = True
        self.socks = []
        self.lock = threading.Lock()
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while not self.stop:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            if not self.up:
                c.close()
                continue
            try:
                s = socket.create_connection(self.target, timeout=10)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks += [c, s]
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.up = False
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.socks = []

    def restore(self):
        self.up = True

    def close(self):
        self.stop = True
        self.cut()
        self.ls.close()


# ------------------------------------------------------------------ tests

def test_lazy_import_and_read_through(d, rgw):
    """A remote bucket of NOBJ objects (flat directory, plus a small tree) is
    listed over S3 (ListObjectsV2 pages) and NFS (libnfs), with the remote's
    sizes and ETags, and read through over both protocols."""
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    flat = [f"ds/train/{i:05d}.bin" for i in range(NOBJ)]
    tree = ["ds/top.txt", "ds/a/b/c.txt", "ds/a/b/d.txt", "ds/a/e.txt", "ds/big/model.bin"]
    sizes = {k: 100 + (i * 37) % 3000 for i, k in enumerate(flat)}
    sizes.update({k: 1000 for k in tree})
    sizes["ds/big/model.bin"] = 9 * MiB + 123
    t0 = time.time()
    fill(rs3, rb, flat + tree, lambda k: sizes[k])
    fill_s = time.time() - t0
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=300)
    s3 = d.boto3()
    remote, _ = list_all(rs3, rb, "ds/")

    # S3: one level with the delimiter, then the whole flat directory in pages
    keys, prefixes = list_all(s3, b, "", "/")
    assert set(keys) == {"top.txt"} and set(prefixes) == {"a/", "big/", "train/"}
    t0 = time.time()
    keys, _ = list_all(s3, b, "train/")
    first_list_s = time.time() - t0
    assert len(keys) == NOBJ
    for k, (size, etag) in keys.items():
        assert (size, etag) == remote["ds/" + k], k
    # a listing without a delimiter imports the whole tree under the prefix
    keys, _ = list_all(s3, b, "a/")
    assert set(keys) == {"a/b/c.txt", "a/b/d.txt", "a/e.txt"}
    print(f"\n{NOBJ} objects: fill {fill_s:.1f} s, first listing {first_list_s:.2f} s")

    # read through by S3: evicted until read, then local ("uploaded": the copy is current)
    k = "train/00007.bin"
    assert state(d, b, k) == "evicted"
    assert s3.get_object(Bucket=b, Key=k)["Body"].read() == body_of("ds/" + k, sizes["ds/" + k])
    assert state(d, b, k) == "uploaded"
    got = s3.get_object(Bucket=b, Key="big/model.bin", Range="bytes=5242880-5242889")
    assert got["Body"].read() == body_of("ds/big/model.bin", sizes["ds/big/model.bin"])[
        5242880:5242890]
    head = s3.head_object(Bucket=b, Key="big/model.bin")
    assert head["ContentLength"] == sizes["ds/big/model.bin"]
    assert head["ETag"].strip('"') == remote["ds/big/model.bin"][1]

    # read through by NFS: libnfs (nfs-ls READDIRPLUS, nfs-cat READ) and our RPC client
    out = libnfs(d, "nfs-ls", nfs_url(d, f"{b}/a/b"))
    assert b"c.txt" in out and b"d.txt" in out
    out = libnfs(d, "nfs-cat", nfs_url(d, f"{b}/big/model.bin"))
    assert out == body_of("ds/big/model.bin", sizes["ds/big/model.bin"])
    with Nfs(d) as n:
        st, fh = nfs_fh(n, b, "train/00042.bin")
        assert st == 0
        assert n.read_all(fh) == body_of("ds/train/00042.bin", sizes["ds/train/00042.bin"])
    assert metric(d, "s3nfs_cache_imports_total") >= 5
    created = re.search(r'^s3nfs_cache_objects_total\{action="created"\} (\S+)$', metrics(d),
                        re.M)
    assert float(created.group(1)) >= NOBJ + len(tree)


def test_nfs_lookup_imports_a_directory_never_listed(d, rgw):
    """NFS LOOKUP of a name in a directory nobody listed yet imports it (on a
    worker: the first LOOKUP is slower, never an error)."""
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/x/y/z.txt"], lambda k: 5000)
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=300)
    with Nfs(d) as n:
        st, fh = nfs_fh(n, b, "x/y/z.txt")
        assert st == 0
        assert n.read_all(fh) == body_of("ds/x/y/z.txt", 5000)
        st, _ = nfs_fh(n, b, "x/y/nosuch.txt")
        assert st == 2  # NFS3ERR_NOENT


def test_revalidation_picks_up_remote_changes(d, rgw):
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/f/one", "ds/f/two", "ds/f/three", "ds/f/local"], lambda k: 2000)
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1)
    s3 = d.boto3()
    assert s3.get_object(Bucket=b, Key="f/one")["Body"].read() == body_of("ds/f/one", 2000)
    keys, _ = list_all(s3, b, "f/")
    assert set(keys) == {"f/one", "f/two", "f/three", "f/local"}
    # someone else changes the remote: overwrite (of a file read, hence local), delete, new
    rs3.put_object(Bucket=rb, Key="ds/f/one", Body=b"new content")
    rs3.delete_object(Bucket=rb, Key="ds/f/two")
    rs3.put_object(Bucket=rb, Key="ds/f/four", Body=b"four")
    time.sleep(1.2)
    assert s3.get_object(Bucket=b, Key="f/one")["Body"].read() == b"new content"
    keys, _ = list_all(s3, b, "f/")
    assert set(keys) == {"f/one", "f/three", "f/four", "f/local"}
    assert s3_error(lambda: s3.get_object(Bucket=b, Key="f/two")) == (404, "NoSuchKey")
    assert s3.get_object(Bucket=b, Key="f/four")["Body"].read() == b"four"
    # a TTL of 0 asks every time
    Admin(d).put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 0})
    rs3.put_object(Bucket=rb, Key="ds/f/three", Body=b"three again")
    assert s3.get_object(Bucket=b, Key="f/three")["Body"].read() == b"three again"
    assert metric(d, "s3nfs_cache_objects_total{action=\"changed\"}") >= 2
    assert metric(d, "s3nfs_cache_objects_total{action=\"removed\"}") >= 1


def test_local_change_not_uploaded_wins(d, rgw):
    """A conflict: changed here (not uploaded yet: a long upload delay) and on
    the remote. The local content stays, the conflict is counted, and the
    uploader later copies it over the remote's."""
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/c/k"], lambda k: 100)
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1,
                     upload_after_s=3600)
    s3 = d.boto3()
    before = metric(d, "s3nfs_cache_conflicts_total") or 0
    list_all(s3, b, "c/")
    s3.put_object(Bucket=b, Key="c/k", Body=b"mine")
    rs3.put_object(Bucket=rb, Key="ds/c/k", Body=b"theirs")
    time.sleep(1.2)
    assert s3.get_object(Bucket=b, Key="c/k")["Body"].read() == b"mine"
    assert metric(d, "s3nfs_cache_conflicts_total") > before
    assert re.search(r"cache: bucket \d+ key 'c/k'.*the local one wins", d.tail(400))
    adm = Admin(d)
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush", want=200)[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="the flush barrier")
    assert rs3.get_object(Bucket=rb, Key="ds/c/k")["Body"].read() == b"mine"


def test_write_back_reaches_the_remote(d, rgw):
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/w/existing"], lambda k: 10)
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1)
    s3 = d.boto3()
    data = os.urandom(6 * MiB + 5)
    s3.put_object(Bucket=b, Key="w/new.bin", Body=data)
    with Nfs(d) as n:
        st, dfh = nfs_fh(n, b, "w")
        assert st == 0
        st, fh = n.create(dfh, "from-nfs.txt")
        assert st == 0, st
        assert n.write_all(fh, b"written over nfs")[0] == 0
    s3.delete_object(Bucket=b, Key="w/existing")
    adm = Admin(d)
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush", want=200)[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="the flush barrier")
    assert rs3.get_object(Bucket=rb, Key="ds/w/new.bin")["Body"].read() == data
    assert rs3.get_object(Bucket=rb, Key="ds/w/from-nfs.txt")["Body"].read() == \
        b"written over nfs"
    assert s3_error(lambda: rs3.head_object(Bucket=rb, Key="ds/w/existing"))[0] == 404
    # after the TTL, the revalidation of our own uploads changes nothing
    time.sleep(1.2)
    keys, _ = list_all(s3, b, "w/")
    assert set(keys) == {"w/new.bin", "w/from-nfs.txt"}
    assert s3.get_object(Bucket=b, Key="w/new.bin")["Body"].read() == data


def test_read_only_refusals(d, rgw):
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/r/file.txt"], lambda k: 300)
    b = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, read_only=True,
                     ttl_s=300)
    s3 = d.boto3()
    assert s3.get_object(Bucket=b, Key="r/file.txt")["Body"].read() == body_of("ds/r/file.txt",
                                                                                300)
    assert s3_error(lambda: s3.put_object(Bucket=b, Key="r/new", Body=b"x")) == \
        (403, "AccessDenied")
    assert s3_error(lambda: s3.delete_object(Bucket=b, Key="r/file.txt")) == \
        (403, "AccessDenied")
    assert s3_error(lambda: s3.create_multipart_upload(Bucket=b, Key="r/mp")) == \
        (403, "AccessDenied")
    assert s3_error(lambda: s3.copy_object(Bucket=b, Key="r/copy", CopySource={
        "Bucket": b, "Key": "r/file.txt"})) == (403, "AccessDenied")
    with Nfs(d) as n:
        st, dfh = nfs_fh(n, b, "r")
        assert st == 0
        assert n.create(dfh, "nfs-new")[0] == ROFS
        assert n.mkdir(dfh, "sub")[0] == ROFS
        assert n.remove(dfh, "file.txt") == ROFS
        assert n.rename(dfh, "file.txt", dfh, "moved.txt") == ROFS
        st, fh = n.lookup(dfh, "file.txt")
        assert st == 0
        assert n.write(fh, 0, b"zz")[0] == ROFS
    assert rs3.get_object(Bucket=rb, Key="ds/r/file.txt")["Body"].read() == body_of(
        "ds/r/file.txt", 300)
    # admin: a cache bucket's tier policy cannot go while it is in cache mode
    adm = Admin(d)
    st, _, _ = adm.raw("DELETE", f"/tenants/1/buckets/{b}/tier")
    assert st == 409
    assert adm.get(f"/tenants/1/buckets/{b}/cache")["read_only"] is True
    # switching to read-write lets writes through at once
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 300, "read_only": False})
    s3.put_object(Bucket=b, Key="r/new", Body=b"x")


def test_cache_mode_needs_a_tier_policy_and_validates(d, rgw):
    adm = Admin(d)
    b = "cm" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"ttl_s": 5})
    assert st == 409, body
    st, body, _ = adm.raw("GET", f"/tenants/1/buckets/{b}/cache")
    assert st == 404, body
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"ttl_s": -1})
    assert st == 400, body
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"prefetch": True})
    assert st == 400, body
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"dirty_max_bytes": 1 << 30})
    assert st == 409, body  # accepted, but a cache needs a tier policy first
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"dirty_max_bytes": "x"})
    assert st == 400, body
    # presets are the tier policy's (test_tier_policy.py), not cache mode's
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{b}/cache", {"preset": "DATASET_RO"})
    assert st == 400 and "tier policy" in body["message"], body
    # a versioned bucket is refused (the tier keeps no versions)
    r = adm.post("/remotes", {"name": "r" + uuid.uuid4().hex[:8], "endpoint": rgw.endpoint,
                              "bucket": new_remote_bucket(rgw.boto3()),
                              "access_key": rgw.access_key, "secret_key": rgw.secret_key})
    v = "cm" + uuid.uuid4().hex[:8]
    s3 = d.boto3()
    s3.create_bucket(Bucket=v)
    s3.put_bucket_versioning(Bucket=v, VersioningConfiguration={"Status": "Enabled"})
    adm.put(f"/tenants/1/buckets/{v}/tier", {"remote": r["id"]})
    st, body, _ = adm.raw("PUT", f"/tenants/1/buckets/{v}/cache", {"ttl_s": 5})
    assert st == 409 and "versioning" in body["message"], body


def test_remote_down_serves_cached_and_refuses_uncached(d, rgw):
    """The remote cut: what is local is served (listing, HEAD, GET, NFS READ);
    data not local answers a retryable error (S3 503, NFS JUKEBOX); a
    directory never listed answers 503 too. Back: everything reads."""
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    keys = ["ds/d/cached", "ds/d/uncached"]
    fill(rs3, rb, keys + ["ds/never/listed"], lambda k: 3000)
    relay = Relay(rgw.endpoint)
    try:
        b = cache_bucket(d, relay.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1)
        s3 = d.boto3()
        assert s3.get_object(Bucket=b, Key="d/cached")["Body"].read() == body_of(keys[0], 3000)
        with Nfs(d) as n:
            st, fh_c = nfs_fh(n, b, "d/cached")
            st2, fh_u = nfs_fh(n, b, "d/uncached")
            assert st == 0 and st2 == 0
        relay.cut()
        time.sleep(1.2)  # past the TTL: revalidation fails, what is here is served
        nr = d.boto3()  # one attempt: the error itself is seen
        assert nr.get_object(Bucket=b, Key="d/cached")["Body"].read() == body_of(keys[0], 3000)
        got, _ = list_all(nr, b, "d/")
        assert set(got) == {"d/cached", "d/uncached"}
        assert s3_error(lambda: nr.get_object(Bucket=b, Key="d/uncached")) == \
            (503, "ServiceUnavailable")
        assert s3_error(lambda: nr.list_objects_v2(Bucket=b, Prefix="never/")) == \
            (503, "ServiceUnavailable")
        with Nfs(d) as n:
            assert n.read_all(fh_c) == body_of(keys[0], 3000)
            st, _ = n.read(fh_u, 0, 4096)
            assert st == JUKEBOX
        relay.restore()
        data = wait_for(lambda: _try_get(s3, b, "d/uncached"), timeout=60,
                        what="the remote back")
        assert data == body_of(keys[1], 3000)
        assert s3.list_objects_v2(Bucket=b, Prefix="never/")["KeyCount"] == 1
    finally:
        relay.close()


def _try_get(s3, b, k):
    try:
        return s3.get_object(Bucket=b, Key=k)["Body"].read()
    except botocore.exceptions.ClientError:
        return None


def test_two_nodes_over_one_remote(d, rgw, tmp_path_factory):
    """Node A (read-write) and node B (read-only, TTL 1 s) front the same
    remote bucket and prefix. A file written on A is readable on B after A's
    flush barrier and B's TTL; B never sees a torn file (only the old
    content, the new one, a 404 before the first, or a retryable 503)."""
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    fill(rs3, rb, ["ds/shared/seed"], lambda k: 10)
    nb = Daemon(str(tmp_path_factory.mktemp("tier-cache-b")), FAST).start()
    try:
        ba = cache_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1)
        bb = cache_bucket(nb, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=1,
                          read_only=True)
        sa, sb = d.boto3(), nb.boto3()
        assert list_all(sb, bb, "shared/")[0].keys() == {"shared/seed"}
        adm = Admin(d)

        def flush():
            bar = adm.call("POST", f"/tenants/1/buckets/{ba}/tier/flush", want=200)[1]["barrier"]
            wait_for(lambda: adm.get(f"/tenants/1/buckets/{ba}/tier/flush?barrier={bar}")[
                "done"], what="A's flush barrier")

        v1 = os.urandom(7 * MiB)
        v2 = os.urandom(7 * MiB + 11)
        seen = []
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                try:
                    seen.append(sb.get_object(Bucket=bb, Key="shared/ckpt.bin")["Body"].read())
                except botocore.exceptions.ClientError as e:
                    seen.append(e.response["ResponseMetadata"]["HTTPStatusCode"])
                time.sleep(0.05)

        th = threading.Thread(target=reader)
        th.start()
        try:
            sa.put_object(Bucket=ba, Key="shared/ckpt.bin", Body=v1)
            flush()
            t_flush = time.time()
            wait_for(lambda: _try_get(sb, bb, "shared/ckpt.bin") == v1, timeout=30,
                     what="B reading A's file")
            lag1 = time.time() - t_flush
            sa.put_object(Bucket=ba, Key="shared/ckpt.bin", Body=v2)
            flush()
            t_flush = time.time()
            wait_for(lambda: _try_get(sb, bb, "shared/ckpt.bin") == v2, timeout=30,
                     what="B reading A's new content")
            lag2 = time.time() - t_flush
        finally:
            stop.set()
            th.join()
        print(f"\nB saw A's writes {lag1:.2f} s and {lag2:.2f} s after A's flush barrier")
        for s in seen:
            assert s in (404, 503) or s == v1 or s == v2, \
                (s if isinstance(s, int) else f"{len(s)} bytes: torn")
        # B is read-only; A's own listing after revalidation still has its file
        assert s3_error(lambda: sb.put_object(Bucket=bb, Key="shared/x", Body=b"x")) == \
            (403, "AccessDenied")
        assert sa.get_object(Bucket=ba, Key="shared/ckpt.bin")["Body"].read() == v2
    finally:
        nb.cleanup()


def test_cli_and_store_check(rgw, tmp_path_factory):
    """s3nfsctl cache set/get/delete; then, with imported, recalled and changed
    files in the store, s3nfsd --check-store finds it consistent (imported files
    are evicted files with confirmed tierst records)."""
    import json
    from s3nfsd_harness import BIN, CTL
    dm = Daemon(str(tmp_path_factory.mktemp("tier-cache-cli")), FAST).start()
    try:
        env = dict(os.environ, S3NFS_ADMIN=dm.admin_endpoint, S3NFS_ADMIN_TOKEN=dm.admin_token,
                   S3NFS_REMOTE_SECRET_KEY=rgw.secret_key)

        def ctl(*args, ok=True):
            r = subprocess.run([CTL] + list(args), env=env, text=True, capture_output=True,
                               timeout=60)
            if ok:
                assert r.returncode == 0, (args, r.stdout, r.stderr)
            return r

        rs3 = rgw.boto3()
        rb = new_remote_bucket(rs3)
        fill(rs3, rb, [f"ds/k/{i}" for i in range(20)], lambda k: 6000)
        ctl("remote", "create", "cli-ds", "--endpoint", rgw.endpoint, "--bucket", rb,
            "--key-id", rgw.access_key, "--prefix", "ds/")
        dm.boto3().create_bucket(Bucket="clicache")
        r = ctl("cache", "set", "1", "clicache", "--ttl", "7", ok=False)
        assert r.returncode != 0 and "tier policy" in r.stderr
        ctl("tier", "set", "1", "clicache", "--remote", "cli-ds", "--upload-after", "0")
        ctl("cache", "set", "1", "clicache", "--ttl", "7", "--read-only")
        got = json.loads(ctl("--json", "cache", "get", "1", "clicache").stdout)
        assert got["ttl_s"] == 7 and got["read_only"] is True and got["remote_prefix"] == "ds/"
        ctl("cache", "set", "1", "clicache", "--ttl", "0", "--read-write")
        got = json.loads(ctl("--json", "cache", "get", "1", "clicache").stdout)
        assert got["ttl_s"] == 0 and got["read_only"] is False
        s3 = dm.boto3()
        assert len(list_all(s3, "clicache", "k/")[0]) == 20
        assert s3.get_object(Bucket="clicache", Key="k/3")["Body"].read() == body_of("ds/k/3",
                                                                                     6000)
        rs3.put_object(Bucket=rb, Key="ds/k/4", Body=b"changed")
        rs3.delete_object(Bucket=rb, Key="ds/k/5")
        assert len(list_all(s3, "clicache", "k/")[0]) == 19
        s3.put_object(Bucket="clicache", Key="k/new", Body=b"local")
        ctl("cache", "delete", "1", "clicache")
        assert ctl("cache", "get", "1", "clicache", ok=False).returncode != 0
        dm.stop()
        r = subprocess.run([BIN, "--data-dir", dm.data_dir, "--set", "data_file_size=1GiB",
                            "--check-store"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"store check failed:\n{r.stdout}\n{r.stderr[-3000:]}"
        assert "store check: consistent" in r.stdout
    finally:
        dm.cleanup()
