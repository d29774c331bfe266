# SPDX-License-Identifier: Apache-2.0
"""Writers and readers on both protocols on one bucket for a bounded time
(CROSS_SECONDS, default 20), then a full consistency check: every object's bytes
equal its file's bytes over NFS, ListObjects equals a recursive NFS walk, the
usage counters equal the sum of the sizes (docs/cross-protocol.md, "Concurrency").

Every content written is self-checking (SHA-256 of the payload, then the
payload) and written in one piece (one PUT, or one NFS WRITE after a truncate
to 0, or a temp file renamed over the name), so a reader can tell a torn read
from a whole one while the writers race each other on the same keys. In-place
NFS rewrites (truncate, then WRITE) and NFS renames are serialized among the NFS
writers by the test: two unsynchronized in-place writers of one file tear it on
any file system; everything else (S3 PUT/DELETE/COPY, temp-file replaces, reads)
runs freely against them."""
import hashlib
import os
import random
import threading

import botocore.exceptions
import pytest

from crossutil import (NF_DIR, NF_REG, Admin, Nfs, NfsError, md5, rpc3, run_workers, s3_error,
                       s3_list_all)

SECONDS = float(os.environ.get("CROSS_SECONDS", "20"))
DIRS = [f"d{i}" for i in range(4)] + [f"e{i}" for i in range(4)]
NAMES = [f"f{i}" for i in range(12)]
TOLERATED_NFS = {rpc3.NFS3ERR_NOENT, rpc3.NFS3ERR_STALE, rpc3.NFS3ERR_EXIST, 66,  # NOTEMPTY
                 rpc3.NFS3ERR_NOTDIR, 21}  # ISDIR
TOLERATED_S3 = {404, 409}


def content(rng, maxsize=96 << 10):
    payload = rng.randbytes(rng.choice([0, 1, 100, 4096, rng.randrange(maxsize)]))
    return hashlib.sha256(payload).digest() + payload


def whole(b):
    return len(b) == 0 or (len(b) >= 32 and hashlib.sha256(b[32:]).digest() == b[:32])


def rkey(rng):
    return f"{rng.choice(DIRS)}/{rng.choice(NAMES)}"


@pytest.mark.slow
def test_both_protocols_concurrently_then_consistent(s3nfsd):
    d = s3nfsd
    s3 = d.boto3()
    bucket = "concurrent"
    s3.create_bucket(Bucket=bucket)
    stop = threading.Event()
    errors = []
    ops = {k: 0 for k in ("s3_put", "s3_del", "s3_copy", "s3_get", "s3_list", "nfs_write",
                          "nfs_replace", "nfs_rm", "nfs_mv", "nfs_mvdir", "nfs_read", "torn")}
    lock = threading.Lock()
    nfs_names = threading.Lock()  # in-place rewrites and renames among NFS writers

    def count(k):
        with lock:
            ops[k] += 1

    def s3_writer(seed):
        def s3_writer():
            rng = random.Random(seed)
            c = d.boto3()
            while not stop.is_set():
                k, r = rkey(rng), rng.random()
                try:
                    if r < 0.65:
                        c.put_object(Bucket=bucket, Key=k, Body=content(rng))
                        count("s3_put")
                    elif r < 0.85:
                        c.delete_object(Bucket=bucket, Key=k)
                        count("s3_del")
                    else:
                        src = rkey(rng)
                        if src != k:
                            c.copy_object(Bucket=bucket, Key=k,
                                          CopySource={"Bucket": bucket, "Key": src})
                            count("s3_copy")
                except botocore.exceptions.ClientError as e:
                    if s3_error(e)[1] not in TOLERATED_S3:
                        raise
        return s3_writer

    def nfs_writer(seed):
        def nfs_writer():
            rng = random.Random(seed)
            with Nfs(d.nfs_port) as c:
                bfh = c.fh(bucket)
                while not stop.is_set():
                    r = rng.random()
                    dname, name = rng.choice(DIRS), rng.choice(NAMES)
                    try:
                        if r < 0.75:
                            st, dfh = c.lookup(bfh, dname)
                            if st == rpc3.NFS3ERR_NOENT:
                                st, dfh = c.mkdir(bfh, dname)
                            if st:
                                raise NfsError(st, "dir")
                            data = content(rng)
                            if r < 0.4:  # in place: truncate, then one WRITE
                                with nfs_names:
                                    st, fh = c.lookup(dfh, name)
                                    if st == rpc3.NFS3ERR_NOENT:
                                        st, fh = c.create(dfh, name)
                                    if st:
                                        raise NfsError(st, "open")
                                    c.setattr_fh(fh, size=0)
                                    if data:
                                        st, _ = c.write(fh, 0, data,
                                                        stable=rng.choice([0, 2]))
                                        if st:
                                            raise NfsError(st, "write")
                                count("nfs_write")
                            else:  # temp file renamed over the name
                                tmp = f".tmp-{seed}-{rng.randrange(1 << 30)}"
                                st, fh = c.create(dfh, tmp, how=1)
                                if st:
                                    raise NfsError(st, "create tmp")
                                if data:
                                    st, _ = c.write(fh, 0, data, stable=0)
                                    if st:
                                        raise NfsError(st, "write tmp")
                                c.commit_fh(fh)
                                try:
                                    c.rename_fh(dfh, tmp, dfh, name)
                                except NfsError:
                                    c.remove_fh(dfh, tmp)
                                    raise
                                count("nfs_replace")
                        elif r < 0.85:
                            c.unlink(f"{bucket}/{dname}/{name}")
                            count("nfs_rm")
                        elif r < 0.97:
                            with nfs_names:
                                c.rename(f"{bucket}/{dname}/{name}", f"{bucket}/{rkey(rng)}")
                            count("nfs_mv")
                        else:
                            # a whole directory moves to a name no writer uses, and back
                            dn = rng.choice(DIRS)
                            src, dst = rng.sample([dn, f"park-{dn}"], 2)
                            with nfs_names:
                                c.rename(f"{bucket}/{src}", f"{bucket}/{dst}")
                            count("nfs_mvdir")
                    except NfsError as e:
                        if e.status not in TOLERATED_NFS:
                            raise
        return nfs_writer

    def s3_reader(seed):
        def s3_reader():
            rng = random.Random(seed)
            c = d.boto3()
            while not stop.is_set():
                keys = [o["Key"] for o in
                        c.list_objects_v2(Bucket=bucket).get("Contents", [])]
                count("s3_list")
                for k in rng.sample(keys, min(5, len(keys))):
                    if k.endswith("/"):
                        continue
                    try:
                        b = c.get_object(Bucket=bucket, Key=k)["Body"].read()
                    except botocore.exceptions.ClientError as e:
                        if s3_error(e)[1] not in TOLERATED_S3:
                            raise
                        continue
                    count("s3_get")
                    if not whole(b):
                        count("torn")
                        errors.append(f"S3 GET {k}: torn content of {len(b)} bytes")
        return s3_reader

    def nfs_reader(seed):
        def nfs_reader():
            rng = random.Random(seed)
            with Nfs(d.nfs_port) as c:
                while not stop.is_set():
                    path = f"{bucket}/{rkey(rng)}"
                    try:
                        b = c.get(path)
                    except NfsError as e:
                        if e.status not in TOLERATED_NFS:
                            raise
                        continue
                    count("nfs_read")
                    if not whole(b):
                        count("torn")
                        errors.append(f"NFS READ {path}: torn content of {len(b)} bytes")
        return nfs_reader

    workers = ([s3_writer(i) for i in (1, 2)] + [nfs_writer(i) for i in (3, 4)] +
               [s3_reader(5), nfs_reader(6)])
    run_workers(SECONDS, workers, stop, errors)
    assert not errors, (errors[:10], ops)
    for k in ("s3_put", "s3_del", "nfs_write", "nfs_replace", "nfs_rm", "s3_get", "nfs_read"):
        assert ops[k] > 0, ops
    print("operations", ops)
    check_consistent(d, s3, bucket)


def check_consistent(d, s3, bucket, selfcheck=True):
    """The quiet bucket: S3 and NFS agree on every key, byte and counter."""
    with Nfs(d.nfs_port) as n:
        walk = n.walk(bucket)
        files = {p.decode(): (a, fh) for p, (a, fh) in walk.items() if a["type"] == NF_REG}
        empty_dirs = {p.decode() + "/" for p, (a, fh) in walk.items()
                      if a["type"] == NF_DIR and not n.listdir_fh(fh)}
        keys, _, objs = s3_list_all(s3, bucket)
        assert sorted(keys) == sorted(set(files) | empty_dirs), "ListObjects == NFS walk"
        assert keys == sorted(keys, key=lambda k: k.encode()), "S3 order"
        total = 0
        for k, (a, fh) in files.items():
            nb = n.read_fh(fh)
            sb = s3.get_object(Bucket=bucket, Key=k)["Body"].read()
            assert nb == sb, f"{k}: S3 and NFS bytes differ"
            assert not selfcheck or whole(sb), f"{k}: torn content at rest"
            assert objs[k]["Size"] == len(sb) == a["size"]
            assert s3.head_object(Bucket=bucket, Key=k)["ETag"] == f'"{md5(sb)}"'
            total += len(sb)
    admin = Admin(d)
    st, bu = admin.get(f"/tenants/1/buckets/{bucket}/usage")
    assert st == 200, bu
    st, tu = admin.get("/tenants/1/usage")
    assert st == 200, tu
    assert bu["bytes"] == total, f"bucket usage {bu['bytes']} != sum of sizes {total}"
    assert bu["inodes"] == len(walk), f"bucket inodes {bu['inodes']} != entries {len(walk)}"
    assert tu["bytes"] == total and tu["inodes"] == len(walk) + 1  # + the bucket itself


def test_usage_follows_truncate(s3nfsd):
    """Shrinking a file over NFS gives its space back to the usage counters."""
    s3 = s3nfsd.boto3()
    s3.create_bucket(Bucket="trunc")
    with Nfs(s3nfsd.nfs_port) as n:
        fh = n.put("trunc/f", os.urandom(100000))
        n.setattr_fh(fh, size=0)
        n.write_all(fh, 0, b"z" * 10)
        check_consistent(s3nfsd, s3, "trunc", selfcheck=False)
        n.setattr_fh(fh, size=10)
        fh2 = n.put("trunc/g", os.urandom(300000))
        n.setattr_fh(fh2, size=10)
        assert n.getattr(fh2)[1]["used"] <= 4096, "space past EOF is freed"
        check_consistent(s3nfsd, s3, "trunc", selfcheck=False)
