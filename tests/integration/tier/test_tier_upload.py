# SPDX-License-Identifier: Apache-2.0
"""The tier's uploader against the real Ceph RGW of the session (`rgw`), and a
second s3nfsd as a remote that can be stopped:

- files written over S3 (one PUT, multipart-sized) and over NFS (WRITE +
  COMMIT) are uploaded after the policy's delay as plain objects under the
  remote's prefix with the same bytes, Content-Type and user metadata;
- x-s3nfs-tier-state goes local -> uploaded (with the remote's ETag), and back
  to local when the file changes (then it is uploaded again);
- the flush barrier (admin API and s3nfsctl) ends once everything written
  before it is uploaded, whatever the delay;
- deletes and renames reach the remote;
- a SIGKILL with uploads pending loses none: they are done after the restart;
- a remote that is down never fails local writes; uploads happen once it is
  back; /metrics and the bucket's stats say what is pending and why."""
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from s3nfsd_harness import CTL  # noqa: E402
from tenutil import FILE_SYNC, UNSTABLE, Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB"]


d = daemon_fixture("tier-upload", FAST)


def remote_bucket(s3):
    return new_bucket(s3, "up-")


def tiered_bucket(d, endpoint, akey, skey, rbucket, delay, prefix="p/"):
    """A new local bucket of the bootstrap tenant tiered to a new remote."""
    adm = Admin(d)
    r = add_remote(adm, endpoint, akey, skey, rbucket, prefix)
    b = "lb" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": delay})
    # the state header shows once a pass of the uploader has seen the policy
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"] is not None,
             what="a first pass")
    return b, r


def state(d, b, k):
    h = d.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state"), h


def remote_body(s3, bucket, key):
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None


def test_s3_written_files_uploaded_after_delay(d, rgw):
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    b, _ = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 4)
    s3 = d.boto3()
    small = os.urandom(100_000)
    big = os.urandom(20 * 1024 * 1024 + 12345)  # multipart: 5 parts of 5 MiB
    s3.put_object(Bucket=b, Key="big.bin", Body=big)
    t0 = time.time()
    s3.put_object(Bucket=b, Key="dir/small.bin", Body=small, ContentType="image/png",
                  Metadata={"color": "blue", "n": "1"})
    assert state(d, b, "dir/small.bin")[0] == "local"
    # not before the delay (the state is the daemon's own record: no remote asked) ...
    time.sleep(1.5)
    assert state(d, b, "dir/small.bin")[0] == "local"
    # ... and soon after it
    wait_for(lambda: state(d, b, "dir/small.bin")[0] == "uploaded", what="small uploaded")
    assert time.time() - t0 >= 4
    wait_for(lambda: state(d, b, "big.bin")[0] == "uploaded", what="big uploaded")
    o = rs3.get_object(Bucket=rb, Key="p/dir/small.bin")
    assert o["Body"].read() == small
    assert o["ContentType"] == "image/png"
    assert o["Metadata"] == {"color": "blue", "n": "1"}
    st, h = state(d, b, "dir/small.bin")
    assert h["x-s3nfs-tier-etag"] == o["ETag"] and h["x-s3nfs-tier-time"]
    ob = rs3.get_object(Bucket=rb, Key="p/big.bin")
    assert hashlib.md5(ob["Body"].read()).digest() == hashlib.md5(big).digest()
    assert ob["ETag"].strip('"').endswith("-5")  # went as a multipart upload
    # whatever wrote the file: an S3 copy, a client's multipart upload
    s3.copy_object(Bucket=b, Key="copied.bin", CopySource={"Bucket": b, "Key": "dir/small.bin"})
    mpu = s3.create_multipart_upload(Bucket=b, Key="mpu.bin", ContentType="text/csv")
    p1 = os.urandom(5 * 1024 * 1024)
    e1 = s3.upload_part(Bucket=b, Key="mpu.bin", UploadId=mpu["UploadId"], PartNumber=1,
                        Body=p1)["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="mpu.bin", UploadId=mpu["UploadId"], PartNumber=2,
                        Body=b"tail")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mpu.bin", UploadId=mpu["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                            {"PartNumber": 2, "ETag": e2}]})
    wait_for(lambda: remote_body(rs3, rb, "p/copied.bin") == small, what="copy uploaded")
    wait_for(lambda: remote_body(rs3, rb, "p/mpu.bin") == p1 + b"tail", what="mpu uploaded")
    assert rs3.head_object(Bucket=rb, Key="p/mpu.bin")["ContentType"] == "text/csv"
    s3.delete_object(Bucket=b, Key="copied.bin")
    s3.delete_object(Bucket=b, Key="mpu.bin")
    # a change makes it local again, and it goes again
    s3.put_object(Bucket=b, Key="dir/small.bin", Body=b"v2", ContentType="text/plain")
    assert state(d, b, "dir/small.bin")[0] == "local"
    wait_for(lambda: remote_body(rs3, rb, "p/dir/small.bin") == b"v2", what="v2 uploaded")
    wait_for(lambda: state(d, b, "dir/small.bin")[0] == "uploaded", what="v2 state")
    # the bucket's stats: nothing pending
    wait_for(lambda: (lambda u: u["pending_files"] == 0 and u["uploaded_files"] == 2)(
        Admin(d).get(f"/tenants/1/buckets/{b}/tier")["uploads"]), what="stats settle")
    # deletes reach the remote
    s3.delete_object(Bucket=b, Key="big.bin")
    wait_for(lambda: remote_body(rs3, rb, "p/big.bin") is None, what="remote delete")
    # metrics
    m = subprocess.run([CTL, "--admin", d.admin_endpoint, "metrics"], text=True,
                       stdout=subprocess.PIPE, check=True).stdout
    assert f'bucket="{b}"' in m and "s3nfs_tier_uploaded_bytes_total" in m
    assert "s3nfs_tier_upload_lag_seconds" in m and 's3nfs_tier_remote_errors_total{kind=' in m


def test_nfs_written_file_rename_and_flush(d, rgw):
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    b, _ = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 3600)
    data = os.urandom(300_000)
    with Nfs(d) as n:
        st, root = n.mount("/")
        assert st == 0
        st, bfh = n.lookup(root, b)
        assert st == 0
        st, fh = n.create(bfh, "ckpt.bin")
        assert st == 0
        assert n.write_all(fh, data, stable=UNSTABLE)[0] == 0
        st, _ = n.nfs(21, Packer().opaque(fh).u64(0).u32(0).bytes())  # COMMIT
        assert st == 0
        st, fh2 = n.create(bfh, "old-name")
        assert n.write_all(fh2, b"renamed content", stable=FILE_SYNC)[0] == 0
    # the delay is an hour: the flush barrier uploads them now
    env = dict(os.environ, S3NFS_ADMIN=d.admin_endpoint, S3NFS_ADMIN_TOKEN=d.admin_token)
    r = subprocess.run([CTL, "--json", "tier", "flush", "1", b, "--timeout", "60"], env=env,
                       text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["done"] is True
    assert remote_body(rs3, rb, "p/ckpt.bin") == data
    assert remote_body(rs3, rb, "p/old-name") == b"renamed content"
    assert state(d, b, "ckpt.bin")[0] == "uploaded"
    # a rename: uploaded under the new key, the old key deleted
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        assert n.rename(bfh, "old-name", bfh, "new-name") == 0
    adm = Admin(d)
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush")[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="flush after rename")
    assert remote_body(rs3, rb, "p/new-name") == b"renamed content"
    assert remote_body(rs3, rb, "p/old-name") is None
    st, js = adm.call("GET", f"/tenants/1/buckets/{b}/tier/flush?barrier=999")
    assert st == 404
    # a directory rename moves every file under it; a hard link is copied under one name
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, dfh = n.mkdir(bfh, "d1")
        assert st == 0
        st, xfh = n.create(dfh, "x")
        assert n.write_all(xfh, b"in d1", stable=FILE_SYNC)[0] == 0
    flush(adm, b)
    assert remote_body(rs3, rb, "p/d1/x") == b"in d1"
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        assert n.rename(bfh, "d1", bfh, "d2") == 0
        st, cfh = n.lookup(bfh, "ckpt.bin")
        st, _ = n.nfs(15, Packer().opaque(cfh).opaque(bfh).string("ckpt-link").bytes())  # LINK
        assert st == 0
    flush(adm, b)
    assert remote_body(rs3, rb, "p/d2/x") == b"in d1"
    assert remote_body(rs3, rb, "p/d1/x") is None
    assert state(d, b, "ckpt.bin")[0] == "uploaded"
    time.sleep(1)  # no ping-pong between the two names: still uploaded, nothing pending
    assert state(d, b, "ckpt.bin")[0] == "uploaded"
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["pending_files"] == 0


def flush(adm, b):
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush")[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="flush")


def test_flush_times_out_with_a_clear_answer(daemon_factory, rgw):
    """A remote that refuses (its bucket was deleted after the remote was made): the
    flush says what is left and why."""
    dm = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    b, r = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 3600)
    rs3.delete_bucket(Bucket=rb)  # the remote bucket is gone: uploads fail
    dm.boto3().put_object(Bucket=b, Key="k", Body=b"x" * 10)
    env = dict(os.environ, S3NFS_ADMIN=dm.admin_endpoint, S3NFS_ADMIN_TOKEN=dm.admin_token)
    res = subprocess.run([CTL, "tier", "flush", "1", b, "--timeout", "3"], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert res.returncode == 1
    assert "not done after 3 s: 1 file(s)" in res.stderr, res.stderr
    assert "NoSuchBucket" in res.stderr or "bucket" in res.stderr.lower(), res.stderr


def test_sigkill_with_uploads_pending_then_restart(daemon_factory, rgw):
    dm = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    b, _ = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 2)
    s3 = dm.boto3()
    files = {f"k{i}": os.urandom(1000 + i) for i in range(20)}
    for k, v in files.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    dm.kill()  # within the delay: nothing uploaded yet
    assert all(remote_body(rs3, rb, "p/" + k) is None for k in files)
    # a multipart upload the killed run left behind (as one killed mid-upload would)
    left = rs3.create_multipart_upload(Bucket=rb, Key="p/k0")["UploadId"]
    rs3.upload_part(Bucket=rb, Key="p/k0", UploadId=left, PartNumber=1, Body=b"x" * 100)
    dm.start()
    for k, v in files.items():
        wait_for(lambda k=k, v=v: remote_body(rs3, rb, "p/" + k) == v, what=f"{k} after restart")
    wait_for(lambda: state(dm, b, "k0")[0] == "uploaded", what="state after restart")
    # the leftover was aborted before the first upload to the remote
    assert rs3.list_multipart_uploads(Bucket=rb).get("Uploads", []) == []
    assert "aborted 1 multipart upload left by an earlier run" in open(dm.log_path).read()


def test_remote_down_local_writes_go_on(daemon_factory, own_s3nfsd):
    """The remote is a second s3nfsd we stop: writes succeed, uploads wait, and happen
    once it is back (same address)."""
    dm = daemon_factory(extra_args=FAST).start()
    rem = own_s3nfsd
    b, _ = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket, 1)
    rem.daemon.stop()
    s3 = dm.boto3()
    data = {f"f{i}": os.urandom(5000) for i in range(5)}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)  # never fails for the remote
        assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v
    adm = Admin(dm)
    info = wait_for(lambda: (lambda i: i if i["uploads"] and i["uploads"]["last_error"] else None)(
        adm.get(f"/tenants/1/buckets/{b}/tier")), what="an error noted")
    assert info["uploads"]["pending_files"] == 5
    assert info["uploads"]["pending_bytes"] == 5 * 5000
    assert "connect" in info["uploads"]["last_error"], info
    m = urlget(dm.admin_endpoint + "/metrics")
    assert 's3nfs_tier_remote_errors_total{kind="connect"} 0' not in m
    lab = '{tenant="1",bucket="%s"}' % b
    assert f"s3nfs_tier_pending_files{lab} 5\n" in m
    assert f"s3nfs_tier_pending_bytes{lab} 25000\n" in m
    # the upload lag grows with the oldest change left behind (2 s and more here)
    lag = re.compile(r"^s3nfs_tier_upload_lag_seconds" + re.escape(lab) + r" (\d+)$", re.M)
    wait_for(lambda: int(lag.search(urlget(dm.admin_endpoint + "/metrics")).group(1)) >= 2,
             what="an upload lag of 2 s")
    assert state(dm, b, "f0")[0] == "local"
    rem.daemon.start()
    rs3 = rem.daemon.boto3()
    for k, v in data.items():
        wait_for(lambda k=k, v=v: remote_body(rs3, rem.bucket, "p/" + k) == v, timeout=60,
                 what=f"{k} after the remote came back")


def urlget(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_file_changed_during_its_upload_goes_again(daemon_factory, own_s3nfsd):
    """The remote (a second s3nfsd) takes writes at 4 MiB/s (its QoS), so a 16 MiB upload
    lasts seconds; the file is replaced meanwhile: the remote ends with the new content
    and the state never says uploaded for the old one."""
    rem = own_s3nfsd
    Admin(rem.daemon).put("/tenants/1/qos", {"write_bps": 4 * 1024 * 1024})
    dm = daemon_factory(extra_args=FAST).start()
    b, _ = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket, 0)
    s3 = dm.boto3()
    s3.put_object(Bucket=b, Key="f", Body=os.urandom(16 * 1024 * 1024))
    wait_for(lambda: state(dm, b, "f")[0] == "uploading", timeout=30, step=0.05,
             what="the upload to start")
    s3.put_object(Bucket=b, Key="f", Body=b"second content")
    rs3 = rem.daemon.boto3()
    # uploaded only if it is the new content's copy (a pass may upload 14 bytes at once)
    st = state(dm, b, "f")[0]
    assert st in ("local", "uploading") or (
        st == "uploaded" and remote_body(rs3, rem.bucket, "p/f") == b"second content"), st
    wait_for(lambda: remote_body(rs3, rem.bucket, "p/f") == b"second content", timeout=90,
             what="the new content on the remote")
    wait_for(lambda: state(dm, b, "f")[0] == "uploaded", what="uploaded")
    # the old job aborts its multipart upload once its part in flight returns, which at
    # 4 MiB/s may be after the new content's small PUT was confirmed
    wait_for(lambda: rs3.list_multipart_uploads(Bucket=rem.bucket).get("Uploads", []) == [],
             timeout=30, what="the old multipart upload aborted")


def system_read_bytes(d):
    m = subprocess.run([CTL, "--admin", d.admin_endpoint, "metrics"], text=True,
                       stdout=subprocess.PIPE, check=True).stdout
    for line in m.splitlines():
        if (line.startswith('s3nfs_qos_admitted_bytes_total{tenant="system"')
                and 'class="read"' in line):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_uploader_reads_are_system_class_and_capped(d, rgw):
    """The uploader's disk reads are admitted as the QoS system class: a system
    read cap (/api/v1/qos/system) makes an upload take at least (bytes - burst)
    / cap, and the system class's metrics count the bytes."""
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    adm = Admin(d)
    cap, size = 2 * 1024 * 1024, 8 * 1024 * 1024
    b, _ = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 1)
    adm.put("/qos/system", {"read_bps": cap})
    try:
        time.sleep(1.1)  # the system class's bucket is full: one second of burst
        before = system_read_bytes(d)
        data = os.urandom(size)
        t0 = time.time()
        d.boto3().put_object(Bucket=b, Key="capped.bin", Body=data)
        wait_for(lambda: state(d, b, "capped.bin")[0] == "uploaded", timeout=60,
                 what="capped upload")
        took = time.time() - t0
        assert took >= 1 + 0.8 * (size - cap) / cap, took
        assert system_read_bytes(d) - before >= size
        assert remote_body(rs3, rb, "p/capped.bin") == data
    finally:
        adm.delete("/qos/system")


def remote_write_bytes(d):
    """Bytes the s3nfsd @d admitted as writes of tenant 1 (its tenant level)."""
    n = 0
    for line in urlget(d.admin_endpoint + "/metrics").splitlines():
        if (line.startswith('s3nfs_qos_admitted_bytes_total{tenant="1",level="tenant"')
                and 'class="write"' in line):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def metric(d, name):
    for line in urlget(d.admin_endpoint + "/metrics").splitlines():
        if line.startswith(name + " "):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError(f"{name} not in /metrics")


def test_changed_file_stops_sending(daemon_factory, own_s3nfsd):
    """The remote (a second s3nfsd) takes writes at 4 MiB/s; one upload worker, one part
    in flight. A file changed while its multipart upload is sent stops after the part in
    flight (not all its parts), and a file changed while its job waited in the queue is
    not sent at all: the remote receives the bytes of the current contents and of at most
    two parts of the first file, not every version in full."""
    rem = own_s3nfsd
    Admin(rem.daemon).put("/tenants/1/qos", {"write_bps": 4 * 1024 * 1024})
    dm = daemon_factory(extra_args=FAST + ["--set", "tier_upload_workers=1"]).start()
    adm = Admin(dm)
    r = adm.post("/remotes", {"name": "r" + uuid.uuid4().hex[:8], "endpoint": rem.endpoint,
                              "bucket": rem.bucket, "access_key": rem.access_key,
                              "secret_key": rem.secret_key, "prefix": "p/", "parallel": 1})
    b = "lb" + uuid.uuid4().hex[:8]
    s3 = dm.boto3()
    s3.create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    mib = 1024 * 1024
    before = remote_write_bytes(rem.daemon)
    a1 = os.urandom(40 * mib)
    s3.put_object(Bucket=b, Key="a", Body=a1)  # 8 parts of 5 MiB
    wait_for(lambda: remote_write_bytes(rem.daemon) > before, timeout=30, step=0.05,
             what="the first part of a on its way")
    # b waits behind a (one worker): changed while queued
    b1 = os.urandom(8 * mib)
    s3.put_object(Bucket=b, Key="b", Body=b1)
    wait_for(lambda: state(dm, b, "b")[0] == "uploading", timeout=30, step=0.05,
             what="b queued")
    # both changed in place over NFS (same file, same size: every part stays readable)
    patch = os.urandom(4096)
    with Nfs(dm) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        for k in ("b", "a"):
            st, fh = n.lookup(bfh, k)
            assert st == 0
            assert n.write_all(fh, patch, stable=FILE_SYNC)[0] == 0
    rs3 = rem.daemon.boto3()
    for k, v in (("a", patch + a1[4096:]), ("b", patch + b1[4096:])):
        wait_for(lambda k=k, v=v: remote_body(rs3, rem.bucket, "p/" + k) == v, timeout=120,
                 what=f"{k}'s new content on the remote")
    wait_for(lambda: state(dm, b, "a")[0] == "uploaded" and state(dm, b, "b")[0] == "uploaded",
             what="both uploaded")
    wait_for(lambda: rs3.list_multipart_uploads(Bucket=rem.bucket).get("Uploads", []) == [],
             timeout=30, what="a's first multipart upload aborted")
    # the current contents (40 + 8 MiB) and the parts of a's first version sent before
    # it changed (a few); every version sent whole would be 40 + 40 + 8 + 8 MiB
    got = remote_write_bytes(rem.daemon) - before
    assert got < 80 * mib, got
    assert metric(dm, "s3nfs_tier_upload_changed_total") >= 2
    assert metric(dm, "s3nfs_tier_upload_body_bytes_total") < 80 * mib


def upload_requests(d, op):
    """The uploader's requests of S3 operation @p op so far (/metrics)."""
    for line in urlget(d.admin_endpoint + "/metrics").splitlines():
        if line.startswith(f's3nfs_tier_upload_requests_total{{op="{op}"}} '):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_large_shard_held_until_its_writers_commit(d, rgw):
    """A shard past the 16 MiB the server keeps a running MD5 for, written UNSTABLE over
    NFS past the 64 MiB of pending writes at which the server commits a file by itself
    (a flush of its own, not its writer's COMMIT), whose writer then pauses for several
    passes between pieces: nothing of it goes up until its writer's COMMIT (upload delay
    0), then it goes up once (one multipart upload, none given up). The server used to
    forget such a file's writer at its own flush, and the half-written shard went up, to
    be given up at the next write."""
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    b, _ = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 0)
    mib = 1024 * 1024
    data = os.urandom(69 * mib)
    pieces = [(0, 65 * mib), (65 * mib, 2 * mib), (67 * mib, 2 * mib)]
    mpu0 = upload_requests(d, "create_multipart_upload")
    changed0 = metric(d, "s3nfs_tier_upload_changed_total")
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, fh = n.create(bfh, "shard")
        assert st == 0
        for i, (off, ln) in enumerate(pieces):
            assert n.write_all(fh, data[off:off + ln], off=off, stable=UNSTABLE,
                               chunk=1 << 20)[0] == 0
            time.sleep(1.0)  # 5 passes; its last write stays younger than 2 s
            assert upload_requests(d, "create_multipart_upload") == mpu0, f"piece {i}"
        st, _ = n.nfs(21, Packer().opaque(fh).u64(0).u32(0).bytes())  # COMMIT
        assert st == 0
    wait_for(lambda: state(d, b, "shard")[0] == "uploaded", timeout=60,
             what="the shard uploaded")
    assert remote_body(rs3, rb, "p/shard") == data
    assert upload_requests(d, "create_multipart_upload") - mpu0 == 1
    assert metric(d, "s3nfs_tier_upload_changed_total") == changed0


def test_renamed_before_its_first_part_sends_nothing(d, rgw):
    """A multipart-sized file renamed while the uploader reads its first part (the
    system class's reads capped at 2 MiB/s: a 5 MiB part takes seconds, as the rename
    right after a checkpoint writer's COMMIT that lands during the first read) is given
    up with no request: its multipart upload is made once the first part is ready to
    go, after the change check. One multipart upload in all (under the new name), none
    aborted."""
    rs3 = rgw.boto3()
    rb = remote_bucket(rs3)
    adm = Admin(d)
    b, _ = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, 0)
    mpu0 = upload_requests(d, "create_multipart_upload")
    abort0 = upload_requests(d, "abort_multipart_upload")
    changed0 = metric(d, "s3nfs_tier_upload_changed_total")
    data = os.urandom(12 * 1024 * 1024)  # parts of 5, 5 and 2 MiB
    adm.put("/qos/system", {"read_bps": 2 * 1024 * 1024})
    try:
        time.sleep(1.1)  # the system class's bucket full: one second of burst
        d.boto3().put_object(Bucket=b, Key="tmp-shard", Body=data)
        wait_for(lambda: state(d, b, "tmp-shard")[0] == "uploading", timeout=30, step=0.05,
                 what="the upload to start")
        with Nfs(d) as n:
            st, root = n.mount("/")
            st, bfh = n.lookup(root, b)
            assert n.rename(bfh, "tmp-shard", bfh, "shard") == 0
        wait_for(lambda: state(d, b, "shard")[0] == "uploaded", timeout=90,
                 what="the shard uploaded under its new name")
    finally:
        adm.delete("/qos/system")
    assert remote_body(rs3, rb, "p/shard") == data
    assert remote_body(rs3, rb, "p/tmp-shard") is None
    assert metric(d, "s3nfs_tier_upload_changed_total") - changed0 == 1
    assert upload_requests(d, "create_multipart_upload") - mpu0 == 1
    assert upload_requests(d, "abort_multipart_upload") - abort0 == 0
