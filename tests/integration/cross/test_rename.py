# SPDX-License-Identifier: Apache-2.0
"""NFS renames as S3 sees them: a rename of a file or of a whole directory is
one atomic change of ListObjects, and the checkpoint pattern (write ckpt.tmp,
COMMIT, rename over ckpt) never shows an S3 reader a partial checkpoint
(docs/cross-protocol.md, "Renames")."""
import hashlib
import struct
import threading

import botocore.exceptions
import pytest

from crossutil import Nfs, md5, pattern, run_workers, s3_error, s3_list_all

POLL_SECONDS = 6


def test_file_rename_is_atomic_in_listings(s3, nfs, d, bucket):
    nfs.mkdirs(f"{bucket}/x/sub")
    nfs.put(f"{bucket}/x/a", b"payload")
    for i in range(20):  # neighbours on both sides of the names
        nfs.put(f"{bucket}/x/n{i:02d}", b"n")
    stop = threading.Event()
    errors, counts = [], {"renames": 0, "lists": 0}
    names = ["x/a", "x/b", "x/sub/c"]

    def renamer():
        with Nfs(d.nfs_port) as c:
            i = 0
            while not stop.is_set():
                c.rename(f"{bucket}/{names[i % 3]}", f"{bucket}/{names[(i + 1) % 3]}")
                i += 1
                counts["renames"] += 1

    def lister():
        c = d.boto3()
        while not stop.is_set():
            r = c.list_objects_v2(Bucket=bucket, Prefix="x/")
            present = [o["Key"] for o in r.get("Contents", []) if o["Key"] in names]
            counts["lists"] += 1
            if len(present) != 1:
                errors.append(f"listing shows {present}")
                return
            o = [o for o in r["Contents"] if o["Key"] == present[0]][0]
            if o["Size"] != 7:
                errors.append(f"size {o['Size']}")
                return

    run_workers(POLL_SECONDS, [renamer, lister, lister], stop, errors)
    assert not errors, errors
    assert counts["renames"] > 50 and counts["lists"] > 20, counts


def test_directory_rename_is_atomic_in_listings(s3, nfs, d, bucket):
    """A directory of 300 files in nested subdirectories moves between d1/ and
    deep/d2/; every single-page listing holds all of them under exactly one name."""
    nfs.mkdirs(f"{bucket}/deep")
    want = set()
    for i in range(300):
        rel = f"s{i % 7}/t{i % 3}/f{i:03d}"
        nfs.mkdirs(f"{bucket}/d1/s{i % 7}/t{i % 3}")
        nfs.put(f"{bucket}/d1/{rel}", b"%d" % i)
        want.add(rel)
    s3.put_object(Bucket=bucket, Key="before", Body=b"")
    s3.put_object(Bucket=bucket, Key="zafter", Body=b"")
    stop = threading.Event()
    errors, counts = [], {"renames": 0, "lists": 0}
    homes = ["d1", "deep/d2"]

    def renamer():
        with Nfs(d.nfs_port) as c:
            i = 0
            while not stop.is_set():
                c.rename(f"{bucket}/{homes[i % 2]}", f"{bucket}/{homes[(i + 1) % 2]}")
                i += 1
                counts["renames"] += 1

    def lister():
        c = d.boto3()
        while not stop.is_set():
            r = c.list_objects_v2(Bucket=bucket, MaxKeys=1000)
            ks = [o["Key"] for o in r.get("Contents", [])]
            counts["lists"] += 1
            under = {h: {k[len(h) + 1:] for k in ks if k.startswith(h + "/")} for h in homes}
            if not ((under["d1"] == want and not under["deep/d2"]) or
                    (under["deep/d2"] == want and not under["d1"])):
                errors.append(f"d1: {len(under['d1'])} keys, deep/d2: "
                              f"{len(under['deep/d2'])} keys")
                return
            # "deep/" lists as an empty directory while d2 is away from it
            if ks[0] != "before" or ks[-1] != "zafter" or \
                    len(ks) != (303 if under["d1"] else 302) or \
                    (under["d1"] and "deep/" not in ks):
                errors.append(f"neighbours: {ks[:1]} {ks[-1:]} {len(ks)}")
                return
            p = c.list_objects_v2(Bucket=bucket, Delimiter="/")
            cps = [x["Prefix"] for x in p.get("CommonPrefixes", [])]
            if cps not in (["d1/", "deep/"], ["deep/"]):
                errors.append(f"prefixes {cps}")
                return

    run_workers(POLL_SECONDS, [renamer, lister, lister], stop, errors)
    assert not errors, errors
    assert counts["renames"] > 10 and counts["lists"] > 10, counts
    # and the data moved with the names
    home = "d1" if nfs.exists(f"{bucket}/d1") else "deep/d2"
    assert s3.get_object(Bucket=bucket, Key=f"{home}/s3/t1/f010")["Body"].read() == b"10"


def ckpt_bytes(version, n):
    body = pattern(n - 40, version)
    head = struct.pack(">Q", version) + hashlib.sha256(body).digest()
    return head + body


def ckpt_check(data):
    """(version, ok) for a checkpoint's bytes."""
    if len(data) < 40:
        return None, False
    version = struct.unpack(">Q", data[:8])[0]
    return version, hashlib.sha256(data[40:]).digest() == data[8:40]


@pytest.mark.parametrize("n", [64 << 10, 6 << 20], ids=["64KiB", "6MiB"])
def test_checkpoint_pattern_never_partial(s3, nfs, d, bucket, n):
    """Small checkpoints are read in one piece, large ones streamed in chunks:
    both must give the poller a whole checkpoint, old or new, and the key never
    disappears once the first checkpoint is in place."""
    stop = threading.Event()
    errors, got = [], {"versions": set(), "gets": 0, "written": 0}

    def writer():
        with Nfs(d.nfs_port) as c:
            c.mkdirs(f"{bucket}/run")
            v = 1
            while not stop.is_set():
                c.put(f"{bucket}/run/ckpt.tmp", ckpt_bytes(v, n), stable=0, commit=True,
                      chunk=1 << 20)
                c.rename(f"{bucket}/run/ckpt.tmp", f"{bucket}/run/ckpt")
                got["written"] = v
                v += 1

    def poller():
        c = d.boto3()
        while not stop.is_set():
            written = got["written"]  # checkpoints renamed in before this GET
            try:
                r = c.get_object(Bucket=bucket, Key="run/ckpt")
            except botocore.exceptions.ClientError as e:
                if s3_error(e)[0] == "NoSuchKey" and written == 0:
                    continue  # no checkpoint yet
                errors.append(f"GET after the first checkpoint: {s3_error(e)}")
                return
            data = r["Body"].read()
            version, ok = ckpt_check(data)
            got["gets"] += 1
            if not ok or len(data) != n or r["ETag"] != f'"{md5(data)}"':
                errors.append(f"partial or torn checkpoint: version {version}, {len(data)} "
                              f"bytes, checksum {ok}")
                return
            got["versions"].add(version)

    run_workers(POLL_SECONDS + 4, [writer, poller, poller], stop, errors)
    assert not errors, errors
    assert got["written"] >= 3 and len(got["versions"]) >= 2, got
    assert s3_list_all(s3, bucket, "run/")[0] in (["run/ckpt"], ["run/ckpt", "run/ckpt.tmp"])
