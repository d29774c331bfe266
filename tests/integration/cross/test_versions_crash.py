# SPDX-License-Identifier: Apache-2.0
"""Crash safety of versions (docs/cross-protocol.md, "Versions and object lock"):
SIGKILL while S3 clients make versions (PUT, CopyObject, multipart, delete
markers, version deletions) and NFS writes make versions of files, and while
the lifecycle worker expires noncurrent versions. After each kill the offline
store check (`s3nfsd --check-store`: no leaked or doubly used extent, shared
extents counted right, usage, version records) passes, and after the restart
every acknowledged version is there with its bytes, every acknowledged version
deletion stayed done, and the NFS files hold their last acknowledged bytes."""
import hashlib
import os
import random
import subprocess
import threading
import time

import pytest
from botocore.exceptions import ClientError

from crossutil import Nfs, bucket_name, pattern
from s3nfsd_harness import BIN, Daemon

ROUNDS = 3


def check_store(d):
    """The offline store check of the stopped daemon's store (as the harness started it)."""
    size = os.environ.get("S3NFS_TEST_DATA_FILE_SIZE", "2GiB")
    r = subprocess.run([BIN, "--data-dir", d.data_dir, "--set", f"data_file_size={size}",
                        "--check-store"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"store check failed:\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "store check: consistent" in r.stdout


def body(seed, n):
    return pattern(n, seed)[:n]


class Model:
    """What the clients were told: versions made, versions deleted, NFS bytes."""

    def __init__(self):
        self.mu = threading.Lock()
        self.versions = {}    # vid -> (key, sha256)
        self.deleted = set()  # vids whose deletion was acknowledged
        self.maybe = set()    # vids whose deletion was in flight at a kill
        self.nfs = {}         # file -> acknowledged bytes
        self.nfs_pending = {}  # file -> bytes of a write in flight at the kill


def s3_worker(d, b, model, stop, wid):
    s3 = d.boto3()
    rnd = random.Random(wid * 7919 + int(time.time()))
    mine = []
    n = 0
    while not stop.is_set():
        n += 1
        key = f"k{rnd.randrange(8)}"
        r = rnd.random()
        try:
            if r < 0.55:
                data = body(wid * 1000003 + n, rnd.randrange(1, 300_000))
                v = s3.put_object(Bucket=b, Key=key, Body=data)["VersionId"]
                with model.mu:
                    model.versions[v] = (key, hashlib.sha256(data).hexdigest())
                mine.append(v)
            elif r < 0.62 and mine:
                src = rnd.choice(mine)
                with model.mu:
                    skey, digest = model.versions[src]
                    if src in model.deleted:
                        continue
                v = s3.copy_object(Bucket=b, Key=key, CopySource={
                    "Bucket": b, "Key": skey, "VersionId": src})["VersionId"]
                with model.mu:
                    model.versions[v] = (key, digest)
                mine.append(v)
            elif r < 0.66:
                up = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
                p1 = body(wid * 1000003 + n, 5 << 20)
                p2 = body(wid * 1000003 + n + 1, rnd.randrange(1, 100_000))
                e1 = s3.upload_part(Bucket=b, Key=key, UploadId=up, PartNumber=1,
                                    Body=p1)["ETag"]
                e2 = s3.upload_part(Bucket=b, Key=key, UploadId=up, PartNumber=2,
                                    Body=p2)["ETag"]
                v = s3.complete_multipart_upload(
                    Bucket=b, Key=key, UploadId=up, MultipartUpload={"Parts": [
                        {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})["VersionId"]
                with model.mu:
                    model.versions[v] = (key, hashlib.sha256(p1 + p2).hexdigest())
                mine.append(v)
            elif r < 0.78:
                s3.delete_object(Bucket=b, Key=key)  # a delete marker
            elif mine:
                v = mine.pop(rnd.randrange(len(mine)))
                key = model.versions[v][0]
                with model.mu:
                    model.maybe.add(v)
                s3.delete_object(Bucket=b, Key=key, VersionId=v)
                with model.mu:
                    model.maybe.discard(v)
                    model.deleted.add(v)
        except Exception:  # the kill: the op's outcome is unknown, nothing recorded
            if stop.is_set():
                return
            time.sleep(0.05)


def nfs_worker(d, b, model, stop, wid):
    """Rewrites part of file n<wid> (stable), which makes a version each time it settled."""
    rnd = random.Random(wid)
    name = f"n{wid}"
    try:
        nfs = Nfs(d.nfs_port, uid=0, gid=0)
    except Exception:
        return
    try:
        fh = nfs.fh(f"{b}/{name}")
        n = 0
        while not stop.is_set():
            n += 1
            with model.mu:
                cur = model.nfs[name]
            off = rnd.randrange(0, len(cur))
            patch = body(wid * 31 + n + int(time.time()), rnd.randrange(1, 200_000))
            new = cur[:off] + patch + cur[off + len(patch):]
            with model.mu:
                model.nfs_pending[name] = new
            nfs.write_all(fh, off, patch, stable=2)
            with model.mu:
                model.nfs[name] = new
                model.nfs_pending.pop(name, None)
            time.sleep(rnd.random() * 0.2)  # quiet spells: the worker seals versions
    except Exception:
        pass
    finally:
        try:
            nfs.close()
        except Exception:
            pass


def verify(d, b, model):
    s3 = d.boto3()
    for v, (key, digest) in sorted(model.versions.items()):
        if v in model.maybe:  # either way; settled now
            try:
                s3.head_object(Bucket=b, Key=key, VersionId=v)
            except ClientError:
                model.deleted.add(v)
            model.maybe.discard(v)
        if v in model.deleted:
            with pytest.raises(ClientError) as e:
                s3.head_object(Bucket=b, Key=key, VersionId=v)
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, (key, v)
            continue
        try:
            got = s3.get_object(Bucket=b, Key=key, VersionId=v)["Body"].read()
        except ClientError as e:
            listed = s3.list_object_versions(Bucket=b, Prefix=key)
            raise AssertionError(f"version {v} of {key} lost: {e}; listed: "
                                 f"{[x['VersionId'] for x in listed.get('Versions', [])]} "
                                 f"markers {[x['VersionId'] for x in listed.get('DeleteMarkers', [])]}")
        assert hashlib.sha256(got).hexdigest() == digest, f"version {v} of {key} wrong"
    for name, data in model.nfs.items():
        got = s3.get_object(Bucket=b, Key=name)["Body"].read()
        pending = model.nfs_pending.get(name)
        assert got == data or (pending is not None and got == pending), f"file {name} wrong"
        model.nfs[name] = got
        model.nfs_pending.pop(name, None)


def test_sigkill_while_making_versions(tmp_path):
    d = Daemon(str(tmp_path), ["--set", "settle_ms=100"]).start()
    try:
        s3 = d.boto3()
        b = bucket_name("crash")
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        model = Model()
        for i in range(2):
            data = body(900 + i, 1 << 20)
            s3.put_object(Bucket=b, Key=f"n{i}", Body=data)
            model.nfs[f"n{i}"] = data
        made = 0
        for rnd in range(ROUNDS):
            stop = threading.Event()
            ts = [threading.Thread(target=s3_worker, args=(d, b, model, stop, rnd * 10 + i))
                  for i in range(4)]
            ts += [threading.Thread(target=nfs_worker, args=(d, b, model, stop, i))
                   for i in range(2)]
            for t in ts:
                t.start()
            time.sleep(2.0 + random.random() * 2.0)
            d.kill()
            stop.set()
            for t in ts:
                t.join(120)
            check_store(d)
            d.start()
            verify(d, b, model)
            made = len(model.versions)
        assert made > 20 and model.deleted
        # every version listed is readable; the store is consistent after a clean stop too
        versions = []
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=b):
            versions += page.get("Versions", [])
        assert {v["VersionId"] for v in versions} >= set(model.versions) - model.deleted
        d.stop()
        check_store(d)
    finally:
        d.cleanup()


def count_versions(s3, b):
    n = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=b):
        n += len(page.get("Versions", []))
    return n


def test_sigkill_during_lifecycle_pass(tmp_path):
    """Small batches (4 versions, 20 ms apart) make a pass over 1,000 versions last
    seconds: the kill lands inside it. Current versions stay; the restarted worker
    finishes the job."""
    d = Daemon(str(tmp_path), ["--set", "lifecycle_day_s=1", "--set", "lifecycle_interval_s=1",
                               "--set", "lifecycle_batch=4"]).start()
    try:
        s3 = d.boto3()
        b = bucket_name("lcrash")
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        current = {}
        for i in range(25):
            for k in range(40):
                data = body(i * 100 + k, 1000 + k)
                s3.put_object(Bucket=b, Key=f"o{k:02d}", Body=data)
                current[f"o{k:02d}"] = data
        total = count_versions(s3, b)
        assert total == 1000
        s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [{
            "ID": "old", "Status": "Enabled", "Filter": {"Prefix": ""},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}]})
        deadline = time.time() + 60
        while count_versions(s3, b) > total - 100:
            assert time.time() < deadline, "the lifecycle pass never started"
            time.sleep(0.1)
        d.kill()
        check_store(d)
        d.start()
        left = count_versions(s3, b)
        assert 40 < left < total  # killed inside the pass
        for key, data in current.items():
            assert s3.get_object(Bucket=b, Key=key)["Body"].read() == data
        deadline = time.time() + 120
        while count_versions(s3, b) > 40:
            assert time.time() < deadline, "the lifecycle worker did not finish after restart"
            time.sleep(0.5)
        for key, data in current.items():
            assert s3.get_object(Bucket=b, Key=key)["Body"].read() == data
        d.stop()
        check_store(d)
    finally:
        d.cleanup()
