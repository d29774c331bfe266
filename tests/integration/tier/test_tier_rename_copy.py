# SPDX-License-Identifier: Apache-2.0
"""Uploads without waste, against the real Ceph RGW of the session (`rgw`):

- a renamed file whose remote copy holds its bytes is copied server-side to
  its new key (CopyObject; UploadPartCopy above tier_copy_max), not uploaded
  again: no body bytes sent, the object at the new key read with boto3 equals
  the file, the old key is gone, the flush barrier covers it;
- a renamed file changed too is uploaded again (its bytes are checked against
  the copy's ETag first), never copied stale;
- an empty file is one PUT (no HEAD: its ETag, the empty MD5, confirms it);
- a file whose writer is still writing (UNSTABLE writes not committed) is not
  uploaded by a zero delay until the writes are committed or quiet.

Every count comes from the uploader's /metrics (requests by S3 operation, body
bytes sent)."""
import hashlib
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import FILE_SYNC, UNSTABLE, Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402
from tierutil import delta, metrics  # noqa: E402

import rpc3  # noqa: E402,F401
from rpc3 import Packer  # noqa: E402

MiB = 1024 * 1024
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB"]

d = daemon_fixture("tier-rename-copy", FAST)


def tiered(dm, rgw, delay):
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "rc-")
    adm = Admin(dm)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "p/")
    b = "lb" + uuid.uuid4().hex[:8]
    dm.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": delay})
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


def tier_state(dm, b, k):
    h = dm.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state"), h.get("x-s3nfs-tier-etag")


def nfs_write(dm, b, name, data, sub=None):
    with Nfs(dm) as n:
        st, root = n.mount("/")
        assert st == 0
        st, bfh = n.lookup(root, b)
        assert st == 0
        if sub:
            st, dfh = n.lookup(bfh, sub)
            if st != 0:
                st, dfh = n.mkdir(bfh, sub)
            assert st == 0
            bfh = dfh
        st, fh = n.create(bfh, name)
        assert st == 0
        assert n.write_all(fh, data, stable=FILE_SYNC)[0] == 0


def nfs_rename(dm, b, frm, to):
    with Nfs(dm) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        assert n.rename(bfh, frm, bfh, to) == 0


def test_rename_sends_a_copy_not_an_upload(d, rgw):
    """A small file (one PUT) and a multipart-sized one renamed after their upload: one
    CopyObject each, no body byte sent, the new keys equal the files, the old keys go.
    A directory renamed above a file (its change counter unchanged) copies it too."""
    rs3, rb, b, adm = tiered(d, rgw, 3600)
    small, big = os.urandom(300_000), os.urandom(12 * MiB)  # 12 MiB: 3 parts of 5 MiB
    nfs_write(d, b, "tmp-small", small)
    nfs_write(d, b, "tmp-big", big)
    nfs_write(d, b, "x", b"in d1", sub="d1")
    flush(adm, b)
    assert remote_body(rs3, rb, "p/tmp-big") == big
    etag_big = rs3.head_object(Bucket=rb, Key="p/tmp-big")["ETag"]
    m0 = metrics(d)
    nfs_rename(d, b, "tmp-small", "small")
    nfs_rename(d, b, "tmp-big", "big")
    nfs_rename(d, b, "d1", "d2")
    flush(adm, b)  # the barrier returns once the new keys hold the bytes
    got = delta(m0, metrics(d))
    assert remote_body(rs3, rb, "p/small") == small
    assert remote_body(rs3, rb, "p/big") == big
    assert remote_body(rs3, rb, "p/d2/x") == b"in d1"
    for old in ("p/tmp-small", "p/tmp-big", "p/d1/x"):
        assert remote_body(rs3, rb, old) is None, old
    assert got.get("copy_object") == 3, got
    assert "put_object" not in got and "upload_part" not in got, got
    assert "s3nfs_tier_upload_body_bytes_total" not in got, got
    assert got.get("s3nfs_tier_copied_files_total") == 3, got
    assert got.get("delete_object") == 3, got
    assert got.get("head_object") == 3, got  # each copy confirmed
    # the copy of a multipart object keeps its ETag on RGW; the state says uploaded
    assert rs3.head_object(Bucket=rb, Key="p/big")["ETag"] == etag_big
    st, etag = tier_state(d, b, "big")
    assert st == "uploaded" and etag.strip('"') == etag_big.strip('"')
    time.sleep(1)  # nothing pending afterwards, no ping-pong
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["pending_files"] == 0


def test_renamed_and_changed_file_is_uploaded_again(d, rgw):
    """A file changed (same size) and renamed before its next upload: its bytes no longer
    hash to the old copy's ETag, so it is uploaded, never copied stale."""
    rs3, rb, b, adm = tiered(d, rgw, 3600)
    for name, size in (("s", 200_000), ("m", 11 * MiB)):
        data = os.urandom(size)
        nfs_write(d, b, name, data)
        flush(adm, b)
        patch = os.urandom(4096)
        with Nfs(d) as n:
            st, root = n.mount("/")
            st, bfh = n.lookup(root, b)
            st, fh = n.lookup(bfh, name)
            assert n.write_all(fh, patch, off=size - 4096, stable=FILE_SYNC)[0] == 0
            assert n.rename(bfh, name, bfh, name + "-new") == 0
        m0 = metrics(d)
        flush(adm, b)
        got = delta(m0, metrics(d))
        want = data[:size - 4096] + patch
        assert remote_body(rs3, rb, f"p/{name}-new") == want
        assert remote_body(rs3, rb, f"p/{name}") is None
        assert "copy_object" not in got, got
        assert got.get("s3nfs_tier_copy_mismatch_total") == 1, got
        assert got.get("s3nfs_tier_upload_body_bytes_total") == size, got


def test_large_rename_uses_upload_part_copy(daemon_factory, rgw):
    """Above tier_copy_max the copy is a multipart upload of UploadPartCopy parts laid
    out as the upload's: the new key's ETag is the old one's, its bytes the file's."""
    dm = daemon_factory(extra_args=FAST + ["--set", "tier_copy_max=5MiB"]).start()
    rs3, rb, b, adm = tiered(dm, rgw, 3600)
    big = os.urandom(12 * MiB)
    nfs_write(dm, b, "tmp", big)
    flush(adm, b)
    etag = rs3.head_object(Bucket=rb, Key="p/tmp")["ETag"]
    m0 = metrics(dm)
    nfs_rename(dm, b, "tmp", "final")
    flush(adm, b)
    got = delta(m0, metrics(dm))
    assert remote_body(rs3, rb, "p/final") == big
    assert remote_body(rs3, rb, "p/tmp") is None
    assert rs3.head_object(Bucket=rb, Key="p/final")["ETag"] == etag
    assert got.get("upload_part_copy") == 3, got
    assert got.get("create_multipart_upload") == 1, got
    assert got.get("complete_multipart_upload") == 1, got
    assert "upload_part" not in got and "copy_object" not in got, got
    assert "s3nfs_tier_upload_body_bytes_total" not in got, got
    assert rs3.list_multipart_uploads(Bucket=rb).get("Uploads", []) == []


def test_empty_file_is_one_put(d, rgw):
    """An empty file costs one PUT: the PUT's ETag (the empty MD5) confirms it."""
    rs3, rb, b, adm = tiered(d, rgw, 3600)
    m0 = metrics(d)
    d.boto3().put_object(Bucket=b, Key="empty", Body=b"")
    flush(adm, b)
    got = delta(m0, metrics(d))
    assert rs3.head_object(Bucket=rb, Key="p/empty")["ContentLength"] == 0
    assert got.get("put_object") == 1, got
    assert "head_object" not in got, got
    st, etag = tier_state(d, b, "empty")
    assert st == "uploaded" and etag.strip('"') == hashlib.md5(b"").hexdigest()


def test_file_being_written_waits_for_its_writer(d, rgw):
    """Zero delay: a file committed once (a FILE_SYNC write) and then written on with
    UNSTABLE writes is not uploaded while those writes go on (each would make the copy
    obsolete); after the COMMIT it is uploaded once, with every byte."""
    rs3, rb, b, adm = tiered(d, rgw, 0)
    m0 = metrics(d)
    piece = os.urandom(256 * 1024)
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, fh = n.create(bfh, "shard")
        assert st == 0
        assert n.write_all(fh, piece, stable=UNSTABLE)[0] == 0
        assert n.write_all(fh, piece, off=len(piece), stable=FILE_SYNC)[0] == 0  # commits
        off = 2 * len(piece)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:  # the writer goes on, uncommitted
            assert n.write_all(fh, piece, off=off, stable=UNSTABLE)[0] == 0
            off += len(piece)
            time.sleep(0.1)
        mid = delta(m0, metrics(d))
        st, _ = n.nfs(21, Packer().opaque(fh).u64(0).u32(0).bytes())  # COMMIT
        assert st == 0
    wait_for(lambda: tier_state(d, b, "shard")[0] == "uploaded", what="uploaded")
    got = delta(m0, metrics(d))
    assert remote_body(rs3, rb, "p/shard") == piece * (off // len(piece))
    assert "put_object" not in mid, mid
    assert mid.get("s3nfs_tier_upload_held_total", 0) > 0, mid
    # the empty file just made may have gone up (one PUT) before the first write
    assert got.get("put_object", 0) + got.get("create_multipart_upload", 0) <= 2, got


def test_zero_delay_waits_one_pass_for_the_writer(daemon_factory, rgw):
    """Zero delay, passes every second: a checkpoint made in steps a few hundred ms
    apart (create, write, write, commit, rename into place) is uploaded once, under its
    final name: none of its intermediate states goes up (each would be deleted or
    redone), since a change younger than one pass is not due by the delay."""
    dm = daemon_factory(extra_args=FAST[:2] + ["--set", "tier_poll_ms=1000"] + FAST[4:]).start()
    rs3, rb, b, adm = tiered(dm, rgw, 0)
    m0 = metrics(dm)
    a, c = os.urandom(100_000), os.urandom(100_000)
    with Nfs(dm) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, dfh = n.mkdir(bfh, "tmp")
        assert st == 0
        time.sleep(1.2)  # the directory is not a file: nothing to wait for
        st, fh = n.create(dfh, "shard")
        assert st == 0
        time.sleep(0.3)
        assert n.write_all(fh, a, stable=FILE_SYNC)[0] == 0
        time.sleep(0.3)
        assert n.write_all(fh, c, off=len(a), stable=FILE_SYNC)[0] == 0
        time.sleep(0.3)
        assert n.rename(dfh, "shard", bfh, "shard") == 0
    wait_for(lambda: tier_state(dm, b, "shard")[0] == "uploaded", what="uploaded")
    time.sleep(0.5)
    got = delta(m0, metrics(dm))
    assert remote_body(rs3, rb, "p/shard") == a + c
    assert got.get("put_object") == 1, got
    assert "delete_object" not in got and "copy_object" not in got, got
    assert got.get("s3nfs_tier_upload_body_bytes_total") == len(a) + len(c), got


def test_sigkill_during_rename_copies_then_restart(daemon_factory, rgw):
    """SIGKILL while renamed files are being copied (UploadPartCopy parts of a large one,
    CopyObject of small ones), then a restart: every new key ends up holding its file's
    bytes, every old key is gone, no multipart upload is left, the state says uploaded."""
    args = FAST + ["--set", "tier_copy_max=5MiB", "--set", "tier_upload_workers=1"]
    dm = daemon_factory(extra_args=args).start()
    rs3, rb, b, adm = tiered(dm, rgw, 3600)
    files = {"big": os.urandom(16 * MiB)}
    files.update({f"s{i}": os.urandom(100_000 + i) for i in range(6)})
    for k, v in files.items():
        nfs_write(dm, b, "tmp-" + k, v)
    flush(adm, b)
    with Nfs(dm) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        for k in files:
            assert n.rename(bfh, "tmp-" + k, bfh, k) == 0
    adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush")
    m = metrics(dm)
    wait_for(lambda: metrics(dm).get("upload_part_copy", 0) > m.get("upload_part_copy", 0)
             or metrics(dm).get("copy_object", 0) > m.get("copy_object", 0),
             timeout=60, step=0.02, what="the first copy request")
    dm.kill()
    dm.start()
    flush(Admin(dm), b)
    for k, v in files.items():
        assert remote_body(rs3, rb, "p/" + k) == v, k
        assert remote_body(rs3, rb, "p/tmp-" + k) is None, k
        assert tier_state(dm, b, k)[0] == "uploaded", k
    wait_for(lambda: rs3.list_multipart_uploads(Bucket=rb).get("Uploads", []) == [],
             timeout=30, what="no multipart upload left")
