# SPDX-License-Identifier: Apache-2.0
"""The Linux kernel NFSv3 client (a QEMU guest, ../shared/nfsvm) over cache-mode
buckets (docs/tiering.md § Cache mode) in front of the session's Ceph RGW.

The remote bucket is filled with boto3 (nested prefixes) and never listed
before the guest mounts: `find` and `ls -R` must show the remote's names (lazy
import through READDIR/LOOKUP), every file must read back with the remote's
SHA-256 (read-through), twice. A file created, written, fsynced and renamed
over the mount and a file written in an imported directory must reach the
remote: after the guest exits the host raises a flush barrier (admin API) and
reads the objects from RGW with boto3. A read-only cache bucket must refuse
create/mkdir/remove/rename/truncate/symlink with EROFS and stay as it was.
Small on purpose: the guest is emulated (TCG). Skips as the other kernel
tests do when ../shared (nfsvm) or QEMU is absent."""
import hashlib
import os
import sys
import uuid

import botocore.exceptions
import pytest

from knfs import S3nfsdTarget, nfsvm  # noqa: F401 - fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tier"))
from tenutil import Admin  # noqa: E402
from tierutil import add_remote, wait_for  # noqa: E402

pytestmark = [pytest.mark.kvm, pytest.mark.slow]

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB"]
MiB = 1024 * 1024

# remote keys under each cache bucket's prefix, and their sizes: a few levels
# of prefixes, an empty-ish file, one file of several read sizes
RW_OBJECTS = {"top.txt": 100, "img/a/0001.jpg": 150_000, "img/a/0002.jpg": 70_001,
              "img/b/c/deep.bin": 3 * MiB + 123, "img/b/c/d/e/leaf.txt": 1,
              "meta/labels.csv": 4096}
RO_OBJECTS = {"weights/shard-0.bin": 1 * MiB + 7, "weights/config.json": 512,
              "README": 64}


def body_of(key, n):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def cache_bucket(d, rgw, rbucket, prefix, read_only):
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rbucket, prefix)
    b = "kc" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    got = adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 300, "read_only": read_only})
    assert got["cache_mode"] is True and got["read_only"] == read_only, got
    return b


def manifest(objects, prefix):
    return "".join(f"{hashlib.sha256(body_of(prefix + k, n)).hexdigest()}  ./{k}\n"
                   for k, n in sorted(objects.items())).encode()


def test_kernel_client_over_cache_buckets(nfsvm, daemon_factory, rgw, tmp_path):
    d = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = "kc-" + uuid.uuid4().hex[:10]
    rs3.create_bucket(Bucket=rb)
    for objects, prefix in ((RW_OBJECTS, "rw/"), (RO_OBJECTS, "ro/")):
        for k, n in objects.items():
            rs3.put_object(Bucket=rb, Key=prefix + k, Body=body_of(prefix + k, n))
    try:
        rw = cache_bucket(d, rgw, rb, "rw/", read_only=False)
        ro = cache_bucket(d, rgw, rb, "ro/", read_only=True)
        payload = os.urandom(2 * MiB + 333)

        target = S3nfsdTarget(d)
        res = nfsvm.run("cache_mode", [rw, ro], target, tmp_path,
                        files={"rw.sha256": manifest(RW_OBJECTS, "rw/"),
                               "ro.sha256": manifest(RO_OBJECTS, "ro/"),
                               "payload.bin": payload}, timeout=300)
        print(res.stdout)
        print(f"cache_mode: rc={res.rc} wall={res.wall:.1f}s")
        print(res.opstats())
        assert res.ok, res.report(target.log_tail())

        # write-back: after the flush barrier the remote holds what the guest wrote
        adm = Admin(d)
        bar = adm.call("POST", f"/tenants/1/buckets/{rw}/tier/flush", want=200)[1]["barrier"]
        wait_for(lambda: adm.get(f"/tenants/1/buckets/{rw}/tier/flush?barrier={bar}")["done"],
                 timeout=120, what="the flush barrier")
        got = rs3.get_object(Bucket=rb, Key="rw/ckpt/step1.bin")["Body"].read()
        assert got == payload, f"remote rw/ckpt/step1.bin: {len(got)} bytes, not the payload"
        got = rs3.get_object(Bucket=rb, Key="rw/img/a/note.txt")["Body"].read()
        assert got == b"written in the guest\n"
        remote = {o["Key"] for page in rs3.get_paginator("list_objects_v2").paginate(Bucket=rb)
                  for o in page.get("Contents", [])}
        assert "rw/ckpt/.step1.tmp" not in remote, "the renamed-away name is on the remote"
        # the imported objects are unchanged on the remote, the read-only prefix untouched
        for objects, prefix in ((RW_OBJECTS, "rw/"), (RO_OBJECTS, "ro/")):
            for k, n in objects.items():
                assert rs3.get_object(Bucket=rb, Key=prefix + k)["Body"].read() == \
                    body_of(prefix + k, n), prefix + k
        assert {k for k in remote if k.startswith("ro/")} == {"ro/" + k for k in RO_OBJECTS}
    finally:
        # the session's RGW outlives this test: leave nothing in it
        for page in rs3.get_paginator("list_objects_v2").paginate(Bucket=rb):
            for o in page.get("Contents", []):
                rs3.delete_object(Bucket=rb, Key=o["Key"])
        try:
            rs3.delete_bucket(Bucket=rb)
        except botocore.exceptions.ClientError:
            pass
