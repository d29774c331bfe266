# SPDX-License-Identifier: Apache-2.0
"""A remote copy reused, not uploaded again, against the real Ceph RGW of the session
(`rgw`):

- an evicted file renamed (itself, or a directory above it) gets its remote copy
  copied server-side to the new key (CopyObject; UploadPartCopy above tier_copy_max),
  then the old key deleted: no byte of it recalled or sent, the file stays evicted,
  and a read recalls its bytes from the new key;
- an evicted file whose remote copy (its only one) was deleted or replaced behind our
  back is not copied: the loss is counted and logged, and reads of it answer an error,
  never other bytes;
- a change of a file's metadata only (NFS chmod, a touch into the past, on a local or
  an evicted file) sends no upload: one HEAD shows the remote copy current; an S3 copy
  of an object onto itself with new user metadata is one CopyObject onto itself.

Every count comes from the uploader's /metrics (requests by S3 operation, body bytes
sent, recalls)."""
import os
import sys
import time
import uuid

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import FILE_SYNC, Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402
from tierutil import delta, metrics  # noqa: E402

import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402

MiB = 1024 * 1024
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_wait_ms=5000", "--set", "tier_recall_fail_ms=3000"]

d = daemon_fixture("tier-copy-reuse", FAST)


def tiered(dm, rgw, **policy):
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cr-")
    adm = Admin(dm)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "p/")
    b = "cr" + uuid.uuid4().hex[:8]
    dm.boto3().create_bucket(Bucket=b)
    body = {"remote": r["id"], "upload_after_s": 0}
    body.update(policy)
    adm.put(f"/tenants/1/buckets/{b}/tier", body)
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"] is not None,
             what="a first pass")
    return rs3, rb, b, adm


def flush(adm, b):
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush")[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="flush")


def remote_body(s3, bucket, key):
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None


def state(dm, b, k):
    h = dm.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state")


def nfs_dir(n, b, sub=None):
    st, root = n.mount("/")
    assert st == 0
    st, fh = n.lookup(root, b)
    assert st == 0
    if sub:
        st, fh = n.lookup(fh, sub)
        assert st == 0
    return fh


def setattr(n, fh, mode=None, mtime=None):
    """SETATTR of the mode and/or the mtime (seconds, SET_TO_CLIENT_TIME)."""
    p = Packer().opaque(fh)
    p.u32(0) if mode is None else p.u32(1).u32(mode)
    p.u32(0).u32(0).u32(0)  # uid, gid, size
    p.u32(0)  # atime: DONT_CHANGE
    p.u32(0) if mtime is None else p.u32(2).u32(int(mtime)).u32(0)
    st, _ = n.nfs(rpc3.SETATTR, p.u32(0).bytes())
    return st


def test_rename_of_evicted_files_copies_without_recall(d, rgw):
    """Evicted files renamed (a small one, a multipart-sized one, one in a renamed
    directory): one CopyObject each, no recall, no body byte, old keys gone, still
    evicted; a read afterwards recalls the right bytes from the new key."""
    rs3, rb, b, adm = tiered(d, rgw, evict_after_s=1)
    s3 = d.boto3()
    files = {"tmp-small": os.urandom(2 * MiB + 5), "tmp-big": os.urandom(12 * MiB + 7),
             "d1/x": os.urandom(MiB + 3)}
    for k, v in files.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in files:
        wait_for(lambda k=k: state(d, b, k) == "evicted", what=f"{k} evicted")
    m0 = metrics(d)
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        assert n.rename(bfh, "tmp-small", bfh, "small") == 0
        assert n.rename(bfh, "tmp-big", bfh, "big") == 0
        assert n.rename(bfh, "d1", bfh, "d2") == 0
    flush(adm, b)  # the barrier returns once the new keys hold the bytes
    got = delta(m0, metrics(d))
    new = {"small": files["tmp-small"], "big": files["tmp-big"], "d2/x": files["d1/x"]}
    for k, v in new.items():
        assert remote_body(rs3, rb, "p/" + k) == v, k
    for old in ("p/tmp-small", "p/tmp-big", "p/d1/x"):
        assert remote_body(rs3, rb, old) is None, old
    assert got.get("copy_object") == 3, got
    assert got.get("s3nfs_tier_copied_files_total") == 3, got
    assert got.get("delete_object") == 3, got
    for k in ("put_object", "upload_part", "s3nfs_tier_upload_body_bytes_total",
              "s3nfs_tier_recalls_total", "s3nfs_tier_recalled_bytes_total"):
        assert k not in got, (k, got)
    for k in new:
        assert state(d, b, k) == "evicted", k
    info = adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]
    assert info["evicted_files"] == 3 and info["pending_files"] == 0, info
    # a read recalls each from its new key
    r0 = metrics(d)
    for k, v in new.items():
        assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v, k
    got = delta(r0, metrics(d))
    assert got.get("s3nfs_tier_recalled_bytes_total") == sum(map(len, new.values())), got


def test_rename_of_large_evicted_file_uses_upload_part_copy(daemon_factory, rgw):
    """Above tier_copy_max an evicted file's copy is UploadPartCopy parts."""
    dm = daemon_factory(extra_args=FAST + ["--set", "tier_copy_max=5MiB"]).start()
    rs3, rb, b, adm = tiered(dm, rgw, evict_after_s=1)
    big = os.urandom(12 * MiB)
    dm.boto3().put_object(Bucket=b, Key="tmp", Body=big)
    wait_for(lambda: state(dm, b, "tmp") == "evicted", what="evicted")
    m0 = metrics(dm)
    with Nfs(dm) as n:
        bfh = nfs_dir(n, b)
        assert n.rename(bfh, "tmp", bfh, "final") == 0
    flush(adm, b)
    got = delta(m0, metrics(dm))
    assert remote_body(rs3, rb, "p/final") == big
    assert remote_body(rs3, rb, "p/tmp") is None
    assert got.get("upload_part_copy") == 3, got
    assert "upload_part" not in got and "s3nfs_tier_recalls_total" not in got, got
    assert state(dm, b, "final") == "evicted"
    assert dm.boto3().get_object(Bucket=b, Key="final")["Body"].read() == big


def test_rename_of_evicted_file_whose_copy_went(daemon_factory, rgw):
    """The remote copy of an evicted file deleted (or replaced) behind our back, then
    the file renamed: no copy is made (a HEAD of the source says so first: RGW would
    copy the replaced object), nothing uploaded, the loss counted, and reads answer an
    error instead of bytes. (A daemon of its own: the lost files are tried again.)"""
    d = daemon_factory(extra_args=FAST).start()
    rs3, rb, b, adm = tiered(d, rgw, evict_after_s=1)
    s3 = d.boto3()
    vals = {"gone": os.urandom(2 * MiB + 1), "swapped": os.urandom(2 * MiB + 1)}
    for k, v in vals.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in vals:
        wait_for(lambda k=k: state(d, b, k) == "evicted", what=f"{k} evicted")
    rs3.delete_object(Bucket=rb, Key="p/gone")
    rs3.put_object(Bucket=rb, Key="p/swapped", Body=os.urandom(2 * MiB + 1))
    m0 = metrics(d)
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        assert n.rename(bfh, "gone", bfh, "gone2") == 0
        assert n.rename(bfh, "swapped", bfh, "swapped2") == 0
    wait_for(lambda: delta(m0, metrics(d)).get("s3nfs_tier_copy_lost_total", 0) >= 2,
             what="the losses counted")
    got = delta(m0, metrics(d))
    for k in ("put_object", "upload_part", "copy_object", "s3nfs_tier_recalled_bytes_total"):
        assert k not in got, (k, got)
    assert remote_body(rs3, rb, "p/gone2") is None
    assert remote_body(rs3, rb, "p/swapped2") is None
    for k in ("gone2", "swapped2"):
        try:
            s3.get_object(Bucket=b, Key=k)["Body"].read()
            raise AssertionError(f"{k}: bytes served")
        except botocore.exceptions.ClientError as e:
            r = e.response
            assert r["ResponseMetadata"]["HTTPStatusCode"] == 500, r
            assert "remote copy" in r["Error"].get("Message", ""), r


def test_metadata_changes_send_no_upload(d, rgw):
    """chmod and a touch into the past of a local and of an evicted file: one HEAD each
    (the copy is current: mode and times are not on the remote), no upload, no recall;
    an S3 copy onto itself with new user metadata: one CopyObject onto itself, the
    remote object gets the metadata, no body byte."""
    rs3, rb, b, adm = tiered(d, rgw)
    rs3e, rbe, be, adme = tiered(d, rgw, evict_after_s=1)
    s3 = d.boto3()
    loc, ev = os.urandom(3 * MiB + 1), os.urandom(3 * MiB + 2)
    s3.put_object(Bucket=b, Key="f", Body=loc, Metadata={"a": "1"})
    s3.put_object(Bucket=be, Key="f", Body=ev)
    flush(adm, b)
    wait_for(lambda: state(d, be, "f") == "evicted", what="evicted")
    for bucket, a, val in ((b, adm, loc), (be, adme, ev)):
        time.sleep(1.1)  # the copy's time is in seconds: a later touch is not older
        m0 = metrics(d)
        with Nfs(d) as n:
            fh = n.lookup(nfs_dir(n, bucket), "f")[1]
            assert setattr(n, fh, mode=0o600) == 0
            assert setattr(n, fh, mtime=time.time() - 3600) == 0
        flush(a, bucket)
        got = delta(m0, metrics(d))
        assert got.get("head_object") == 1, got
        assert got.get("s3nfs_tier_copy_kept_total") == 1, got
        for k in ("put_object", "upload_part", "copy_object", "delete_object",
                  "s3nfs_tier_upload_body_bytes_total", "s3nfs_tier_recalls_total"):
            assert k not in got, (k, got)
        assert state(d, bucket, "f") == ("uploaded" if bucket == b else "evicted")
        assert s3.head_object(Bucket=bucket, Key="f")["ContentLength"] == len(val)
    # S3 metadata, which the remote object carries
    m0 = metrics(d)
    s3.copy_object(Bucket=b, Key="f", CopySource={"Bucket": b, "Key": "f"},
                   Metadata={"a": "2", "b": "x"}, MetadataDirective="REPLACE",
                   ContentType="text/plain")
    flush(adm, b)
    got = delta(m0, metrics(d))
    assert got.get("copy_object") == 1, got
    assert got.get("s3nfs_tier_copy_meta_total") == 1, got
    assert "put_object" not in got and "upload_part" not in got, got
    assert "s3nfs_tier_upload_body_bytes_total" not in got, got
    h = rs3.head_object(Bucket=rb, Key="p/f")
    assert h["Metadata"] == {"a": "2", "b": "x"} and h["ContentType"] == "text/plain", h
    assert remote_body(rs3, rb, "p/f") == loc
    assert state(d, b, "f") == "uploaded"
    # a write goes up again in full
    m0 = metrics(d)
    with Nfs(d) as n:
        fh = n.lookup(nfs_dir(n, b), "f")[1]
        assert n.write_all(fh, b"0123", off=0, stable=FILE_SYNC)[0] == 0
    flush(adm, b)
    got = delta(m0, metrics(d))
    assert got.get("s3nfs_tier_upload_body_bytes_total") == len(loc), got
    assert remote_body(rs3, rb, "p/f") == b"0123" + loc[4:]


def test_rename_of_local_file_whose_copy_was_replaced(d, rgw):
    """A local file's remote copy replaced behind our back, then the file renamed: RGW
    copies whatever the old key holds (it ignores x-amz-copy-source-if-match), so the
    copy's ETag is checked against the recorded one: the wrong copy goes, and the file is
    uploaded under its new key with its own bytes."""
    rs3, rb, b, adm = tiered(d, rgw)
    s3 = d.boto3()
    val = os.urandom(2 * MiB + 9)
    s3.put_object(Bucket=b, Key="a", Body=val)
    flush(adm, b)
    rs3.put_object(Bucket=rb, Key="p/a", Body=os.urandom(2 * MiB + 9))
    m0 = metrics(d)
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        assert n.rename(bfh, "a", bfh, "a2") == 0
    flush(adm, b)
    got = delta(m0, metrics(d))
    assert remote_body(rs3, rb, "p/a2") == val
    assert remote_body(rs3, rb, "p/a") is None
    assert got.get("s3nfs_tier_upload_body_bytes_total") == len(val), got
    assert "s3nfs_tier_copied_files_total" not in got, got
    assert state(d, b, "a2") == "uploaded"


def test_empty_new_file_waits_for_its_writer(d, rgw):
    """Zero delay, 200 ms passes: files created empty over NFS and written 1 s later,
    then renamed (a checkpoint's writers), send no PUT of an empty copy and no DELETE of
    it; a file that stays empty goes up after 2 s, with one PUT."""
    rs3, rb, b, adm = tiered(d, rgw)
    m0 = metrics(d)
    data = {f"s{i}": os.urandom(200_000 + i) for i in range(3)}
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        fhs = {k: n.create(bfh, "tmp-" + k)[1] for k in data}
        st, _ = n.create(bfh, "empty")
        assert st == 0
        time.sleep(1.0)  # five passes: the empty files are not due yet
        for k, v in data.items():
            assert n.write_all(fhs[k], v, stable=FILE_SYNC)[0] == 0
            assert n.rename(bfh, "tmp-" + k, bfh, k) == 0
    wait_for(lambda: state(d, b, "empty") == "uploaded", what="the empty file uploaded")
    flush(adm, b)
    got = delta(m0, metrics(d))
    for k, v in data.items():
        assert remote_body(rs3, rb, "p/" + k) == v, k
        assert remote_body(rs3, rb, "p/tmp-" + k) is None, k
    assert remote_body(rs3, rb, "p/empty") == b""
    assert got.get("put_object") == 4, got  # the three shards and the empty file
    assert "delete_object" not in got, got
    assert got.get("s3nfs_tier_upload_held_total", 0) > 0, got


def test_file_without_metadata_keeps_the_remote_s(d, rgw):
    """A file with no Content-Type nor user metadata (made over NFS; or a cache import
    whose metadata was never asked for) keeps what its remote object carries: a chmod
    sends no copy, a rename copies with the source's metadata (COPY, not REPLACE)."""
    rs3, rb, b, adm = tiered(d, rgw)
    val = os.urandom(300_000)
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        st, fh = n.create(bfh, "f")
        assert n.write_all(fh, val, stable=FILE_SYNC)[0] == 0
    flush(adm, b)
    # someone gives the remote object metadata (same bytes, same ETag)
    rs3.copy_object(Bucket=rb, Key="p/f", CopySource={"Bucket": rb, "Key": "p/f"},
                    Metadata={"owner": "them"}, MetadataDirective="REPLACE")
    m0 = metrics(d)
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        fh = n.lookup(bfh, "f")[1]
        assert setattr(n, fh, mode=0o640) == 0
    flush(adm, b)
    got = delta(m0, metrics(d))
    assert got.get("s3nfs_tier_copy_kept_total") == 1, got
    assert "copy_object" not in got and "put_object" not in got, got
    with Nfs(d) as n:
        bfh = nfs_dir(n, b)
        assert n.rename(bfh, "f", bfh, "g") == 0
    flush(adm, b)
    h = rs3.head_object(Bucket=rb, Key="p/g")
    assert h["Metadata"] == {"owner": "them"}, h
    assert remote_body(rs3, rb, "p/g") == val
