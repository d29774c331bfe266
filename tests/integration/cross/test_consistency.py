# SPDX-License-Identifier: Apache-2.0
"""Consistency between the protocols: when a change made through one is seen
through the other, what an NFS handle sees when S3 replaces or deletes the
object, and that a reader never gets a mix of two versions
(docs/cross-protocol.md, "Consistency")."""
import threading
import time

import botocore.exceptions
import pytest

from crossutil import Nfs, md5, pattern, rpc3, s3_error, s3_list_all


def test_nfs_write_visible_to_s3_after_commit(s3, nfs, bucket):
    bfh = nfs.fh(bucket)
    st, fh = nfs.create(bfh, "w")
    assert st == 0
    data = pattern(2 << 20, 3)
    verfs = set()
    for off in range(0, len(data), 1 << 18):
        st, r = nfs.write(fh, off, data[off:off + (1 << 18)], stable=0)  # UNSTABLE
        assert st == 0
        verfs.add(r["verf"])
    assert nfs.commit_fh(fh) in verfs and len(verfs) == 1
    got = s3.get_object(Bucket=bucket, Key="w")
    assert got["Body"].read() == data and got["ETag"] == f'"{md5(data)}"'


def test_acknowledged_nfs_write_is_visible_before_commit(s3, nfs, bucket):
    """Stronger than the rule: an UNSTABLE WRITE is answered UNSTABLE (its
    mappings stay pending in memory until COMMIT), yet S3 GET and HEAD see it as
    soon as NFS acknowledged it."""
    st, fh = nfs.create(nfs.fh(bucket), "u")
    # over 4 KiB: a whole small file written at once is answered FILE_SYNC
    body = b"unstable" * 1000
    st, r = nfs.write(fh, 0, body, stable=0)
    assert st == 0 and r["committed"] == 0  # UNSTABLE
    assert s3.get_object(Bucket=bucket, Key="u")["Body"].read() == body
    assert s3.head_object(Bucket=bucket, Key="u")["ContentLength"] == len(body)


def test_s3_put_visible_to_nfs_at_once(s3, nfs, bucket):
    for i in range(50):
        body = f"version {i}".encode()
        s3.put_object(Bucket=bucket, Key="p", Body=body)
        assert nfs.get(f"{bucket}/p") == body
        s3.put_object(Bucket=bucket, Key=f"new/{i}", Body=body)
        assert nfs.get(f"{bucket}/new/{i}") == body


def test_handles_when_s3_replaces_or_deletes(s3, nfs, bucket):
    """S3 PUT replaces the key with a new file: a handle to the old file answers
    STALE once the replacement commits, a new LOOKUP finds the new file; S3 DELETE
    makes handles STALE and names NOENT."""
    s3.put_object(Bucket=bucket, Key="h", Body=b"old")
    old = nfs.fh(f"{bucket}/h")
    s3.put_object(Bucket=bucket, Key="h", Body=b"new!")
    assert nfs.getattr(old)[0] == rpc3.NFS3ERR_STALE
    assert nfs.read(old, 0, 10)[0] == rpc3.NFS3ERR_STALE
    assert nfs.write(old, 0, b"x")[0] == rpc3.NFS3ERR_STALE
    new = nfs.fh(f"{bucket}/h")
    assert new != old and nfs.read_fh(new) == b"new!"
    s3.delete_object(Bucket=bucket, Key="h")
    assert nfs.getattr(new)[0] == rpc3.NFS3ERR_STALE
    assert nfs.lookup(nfs.fh(bucket), "h")[0] == rpc3.NFS3ERR_NOENT
    # a directory handle after S3 removes the directory (marker delete)
    s3.put_object(Bucket=bucket, Key="dd/", Body=b"")
    dfh = nfs.fh(f"{bucket}/dd")
    s3.delete_object(Bucket=bucket, Key="dd/")
    assert nfs.getattr(dfh)[0] == rpc3.NFS3ERR_STALE
    assert nfs.create(dfh, "x")[0] == rpc3.NFS3ERR_STALE


def test_nfs_delete_is_nosuchkey(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="gone/obj", Body=b"x")
    nfs.unlink(f"{bucket}/gone/obj")
    for call in (s3.get_object, s3.head_object):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            call(Bucket=bucket, Key="gone/obj")
        assert s3_error(ei)[1] == 404
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="gone/obj")
    assert s3_error(ei) == ("NoSuchKey", 404)
    # the implicit parent stays (NFS never removes a parent) and lists as "gone/"
    assert s3_list_all(s3, bucket)[0] == ["gone/"]


def test_s3_get_in_progress_keeps_its_version_when_nfs_removes(s3, nfs, bucket):
    """An S3 GET that started before an NFS REMOVE (or an S3 replace) finishes with
    the bytes it started with: the core keeps the unlinked file until it is done."""
    data = pattern(64 << 20, 9)
    s3.put_object(Bucket=bucket, Key="big", Body=data)
    r = s3.get_object(Bucket=bucket, Key="big")
    first = r["Body"].read(1 << 20)
    nfs.unlink(f"{bucket}/big")
    s3.put_object(Bucket=bucket, Key="big", Body=b"replacement")
    rest = r["Body"].read()
    assert first + rest == data


def _versions(n):
    return {md5(pattern(n, s)): s for s in range(1000, 1004)}


def test_reader_sees_old_or_new_never_a_mix_s3_replaces(s3, d, bucket):
    """NFS readers read a file in 64 KiB chunks (LOOKUP once, then READs) while S3
    replaces the object again and again with other content of the same size. Each
    read either returns exactly one version, or stops with STALE after a prefix of
    one version; never bytes of two versions."""
    n = 4 << 20
    contents = [pattern(n, s) for s in range(1000, 1004)]
    s3.put_object(Bucket=bucket, Key="r", Body=contents[0])
    stop = threading.Event()
    errors, stats = [], {"whole": 0, "stale": 0, "replaces": 0}

    def replacer():
        i = 1
        c = d.boto3()
        while not stop.is_set():
            c.put_object(Bucket=bucket, Key="r", Body=contents[i % 4])
            stats["replaces"] += 1
            i += 1

    def reader():
        with Nfs(d.nfs_port) as c:
            bfh = c.fh(bucket)
            while not stop.is_set():
                st, fh = c.lookup(bfh, "r")
                if st != 0:
                    errors.append(f"LOOKUP {st}")
                    return
                buf, off = [], 0
                while True:
                    st, res = c.read(fh, off, 65536)
                    if st == rpc3.NFS3ERR_STALE:
                        stats["stale"] += 1
                        break
                    if st != 0:
                        errors.append(f"READ {st}")
                        return
                    buf.append(res[0])
                    off += len(res[0])
                    if res[1]:
                        break
                got = b"".join(buf)
                if st == 0:
                    stats["whole"] += 1
                    if got not in contents:
                        errors.append(f"mixed read of {len(got)} bytes")
                        return
                elif not any(c.startswith(got) for c in contents):
                    errors.append(f"mixed prefix of {len(got)} bytes before STALE")
                    return

    threads = [threading.Thread(target=replacer)] + [threading.Thread(target=reader)
                                                     for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and not errors:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(120)
    print("replace/read stats", stats)
    assert not errors, errors
    assert stats["replaces"] > 5 and stats["whole"] > 0, stats


def test_s3_reader_during_nfs_in_place_rewrite(s3, nfs, d, bucket):
    """An S3 GET of a file that NFS rewrites in place (same handle, overwriting
    from offset 0) may return a mix, as a local reader of a file being rewritten
    would: in-place writes are not atomic replacements. The atomic way is the
    rename pattern (test_rename.py). This test documents that the GET never fails
    and never returns bytes that were never written at that offset."""
    n = 8 << 20
    a, b = pattern(n, 1), pattern(n, 2)
    fh = nfs.put(f"{bucket}/inplace", a)
    stop = threading.Event()
    seen = {"a": 0, "b": 0, "mix": 0}
    errors = []

    def getter():
        c = d.boto3()
        while not stop.is_set():
            body = c.get_object(Bucket=bucket, Key="inplace")["Body"].read()
            if len(body) != n:
                errors.append(f"length {len(body)}")
                return
            if body == a:
                seen["a"] += 1
            elif body == b:
                seen["b"] += 1
            else:
                seen["mix"] += 1
                # every 64 KiB block is from one of the versions
                for off in range(0, n, 65536):
                    blk = body[off:off + 65536]
                    if blk != a[off:off + 65536] and blk != b[off:off + 65536]:
                        errors.append(f"block at {off} is from neither version")
                        return

    t = threading.Thread(target=getter)
    t.start()
    try:
        for i in range(6):
            nfs.write_all(fh, 0, b if i % 2 == 0 else a, chunk=65536)
    finally:
        stop.set()
        t.join(120)
    print("in-place rewrite: whole-version and mixed GETs", seen)
    assert not errors, errors
