# SPDX-License-Identifier: Apache-2.0
"""The dirty-bytes bound of write-back (docs/tiering.md § Dirty bound) against
the real Ceph RGW of the session (`rgw`), reached through a TCP relay the test
cuts so that uploads cannot drain:

- a cache-mode bucket with `dirty_max_bytes`: S3 writers past the bound are
  held (a PUT takes seconds, s3nfs_tier_dirty_held_total and s3nfs_qos_held
  rise), never failed, and so is a CopyObject into it; a bucket without a
  bound, of the same tenant or of another, is not slowed meanwhile; once
  the remote is back and uploads confirm, the held writes finish, and later
  writes go at full speed;
- a tiered bucket whose directory has a preset with a `dirty_bound` override:
  an NFS writer (libnfs' nfs-cp) into that directory is held the same way,
  while S3 writes elsewhere in the bucket are not;
- a bucket with a one-hour upload delay past its bound is hastened: its
  pending files are uploaded at once and held writers resume in seconds.

S3NFS_DIRTY_BOUND_OFF=1 runs the same checks with the bound 0 (none): they
must fail (nothing is held), which shows the checks can fail."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin, make_tenant, s3_for  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402
from test_tier_cache import FAST, Relay, cache_bucket  # noqa: E402

MiB = 1024 * 1024
BOUND = 0 if os.environ.get("S3NFS_DIRTY_BOUND_OFF") == "1" else 4 * MiB
HELD_S = 3.0  # how long the remote stays cut while writers wait
UNHELD_S = 5.0  # a 1 MiB PUT that nothing holds takes less, even on a loaded machine

d = daemon_fixture("tier-dirty", FAST)


def metrics(d):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        return r.read().decode()


def held_total(d, b, level="bucket"):
    m = re.search(r'^s3nfs_tier_dirty_held_total\{tenant="1",bucket="%s",level="%s"\} (\S+)$'
                  % (re.escape(b), re.escape(level)), metrics(d), re.M)
    return float(m.group(1)) if m else 0.0


def qos_held(d):
    m = re.search(r"^s3nfs_qos_held (\S+)$", metrics(d), re.M)
    return float(m.group(1)) if m else 0.0


class Writer(threading.Thread):
    """Runs @fn(i) for i in range(n), timing each; errors are kept."""

    def __init__(self, fn, n):
        super().__init__(daemon=True)
        self.fn, self.n = fn, n
        self.times, self.errors = [], []

    def run(self):
        for i in range(self.n):
            t0 = time.time()
            try:
                self.fn(i)
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))
            self.times.append(time.time() - t0)


def ctl(d, *args):
    from s3nfsd_harness import CTL
    env = dict(os.environ, S3NFS_ADMIN=d.admin_endpoint, S3NFS_ADMIN_TOKEN=d.admin_token)
    r = subprocess.run([CTL] + list(args), env=env, text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def test_cache_bucket_writers_held_past_the_bound(d, rgw):
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cmd-")
    relay = Relay(rgw.endpoint)
    try:
        adm = Admin(d)
        b = cache_bucket(d, relay.endpoint, rgw.access_key, rgw.secret_key, rb, ttl_s=3600)
        base = f"/tenants/1/buckets/{b}/cache"
        got = adm.put(base, {"ttl_s": 3600, "dirty_max_bytes": BOUND})
        assert got["dirty_max_bytes"] == BOUND
        assert adm.get(base)["dirty_max_bytes"] == BOUND
        st, body, _ = adm.raw("PUT", base, {"dirty_max_bytes": -1})
        assert st == 400, body
        # ttl_s alone leaves the bound as it is (it is the bucket's tier setting)
        assert adm.put(base, {"ttl_s": 3600})["dirty_max_bytes"] == BOUND
        # the CLI sets it too (and the tier settings show it as the bucket's dirty_bound)
        ctl(d, "cache", "set", "1", b, "--ttl", "3600", "--dirty-max", "8M")
        assert adm.get(base)["dirty_max_bytes"] == 8 * MiB
        assert adm.get(f"/tenants/1/buckets/{b}/tier")["dirty_bound"] == 8 * MiB
        got = json.loads(ctl(d, "--json", "cache", "set", "1", b, "--ttl", "3600",
                             "--dirty-max", str(BOUND)).stdout)
        assert got["dirty_max_bytes"] == BOUND
        s3 = d.boto3()
        s3.list_objects_v2(Bucket=b)  # the root imported: no remote listing below
        other = new_bucket(s3, "free-")  # a bucket with no bound, same tenant
        t2 = make_tenant(adm, "dt" + uuid.uuid4().hex[:8])  # and another tenant
        s3t2 = s3_for(d, t2)
        other2 = new_bucket(s3t2, "free2-")
        if BOUND:
            wait_for(lambda: adm.get(base)["dirty"]["bound"] == BOUND, timeout=30,
                     what="the uploader's pass publishing the bound")
        relay.cut()
        data = {i: os.urandom(MiB) for i in range(8)}
        w = Writer(lambda i: s3.put_object(Bucket=b, Key=f"w/{i}", Body=data[i]), 8)
        w.start()
        time.sleep(HELD_S)
        # 8 MiB written against a 4 MiB bound with nothing uploaded: held, not failed
        assert w.is_alive(), f"no writer held: {w.times}"
        assert not w.errors, w.errors
        assert held_total(d, b) >= 1
        assert qos_held(d) >= 1
        # another bucket's writer, and another tenant's, are not slowed by this bound
        for c, ob in ((s3, other), (s3t2, other2)):
            t0 = time.time()
            c.put_object(Bucket=ob, Key="x", Body=os.urandom(MiB))
            # held, it would wait for relay.restore() below; the margin is for a loaded machine
            assert time.time() - t0 < UNHELD_S
        assert w.is_alive()  # and the held writer is still held
        # a copy into the bounded bucket is held too (its write side)
        cp = Writer(lambda i: s3.copy_object(Bucket=b, Key="copied",
                                             CopySource={"Bucket": other, "Key": "x"}), 1)
        cp.start()
        time.sleep(1.0)
        assert cp.is_alive(), f"the copy was not held: {cp.times} {cp.errors}"
        relay.restore()
        w.join(90)
        assert not w.is_alive(), "held writers did not resume once the remote drained"
        assert not w.errors, w.errors
        assert max(w.times) >= HELD_S - 0.5, w.times  # one write waited out the cut
        cp.join(60)
        assert not cp.is_alive() and not cp.errors, cp.errors
        assert s3.get_object(Bucket=b, Key="copied")["ContentLength"] == MiB
        for i in range(8):
            assert s3.get_object(Bucket=b, Key=f"w/{i}")["Body"].read() == data[i]
        # drained: the uploads confirmed; writes under the bound go at full speed
        wait_for(lambda: adm.get(base)["dirty"]["bytes"] == 0, timeout=60,
                 what="dirty bytes back to 0")
        before = held_total(d, b)
        w2 = Writer(lambda i: s3.put_object(Bucket=b, Key=f"v/{i}", Body=data[i]), 3)
        w2.start()
        w2.join(30)
        assert not w2.errors and max(w2.times) < UNHELD_S, (w2.errors, w2.times)
        assert held_total(d, b) == before
        print(f"\nS3 writes past a 4 MiB bound (remote cut {HELD_S} s): "
              f"{', '.join(f'{t:.2f}' for t in w.times)} s; after the drain: "
              f"{', '.join(f'{t:.2f}' for t in w2.times)} s")
    finally:
        relay.close()


def test_tiered_directory_bound_holds_nfs_writer(d, rgw, tmp_path):
    if not shutil.which("nfs-cp"):
        pytest.skip("nfs-cp not installed (libnfs-utils)")
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "tdd-")
    relay = Relay(rgw.endpoint)
    try:
        adm = Admin(d)
        r = add_remote(adm, relay.endpoint, rgw.access_key, rgw.secret_key, rb)
        b = "td" + uuid.uuid4().hex[:8]
        s3 = d.boto3()
        s3.create_bucket(Bucket=b)
        s3.put_object(Bucket=b, Key="ckpt/", Body=b"")
        tier = f"/tenants/1/buckets/{b}/tier"
        adm.put(tier, {"remote": r["id"], "upload_after_s": 0})
        # the directory's preset (DATASET_RW: 8 GiB) with its bound overridden
        dp = adm.put(tier + "?dir=ckpt", {"preset": "DATASET_RW", "dirty_bound": BOUND,
                                          "upload_after_s": 0})
        assert dp["effective"]["dirty_bound"] == BOUND
        if BOUND:
            wait_for(lambda: "level=\"%d\"" % dp_ino(d, b) in metrics(d), timeout=30,
                     what="the directory's bound published")
        relay.cut()
        src = tmp_path / "ckpt.bin"
        payload = os.urandom(8 * MiB)
        src.write_bytes(payload)
        port = d.nfs_port
        url = f"nfs://127.0.0.1/{b}/ckpt/ckpt.bin?version=3&nfsport={port}&mountport={port}"
        t0 = time.time()
        p = subprocess.Popen(["nfs-cp", str(src), url], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        time.sleep(HELD_S)
        assert p.poll() is None, (f"the NFS writer was not held: {p.communicate()}",
                                  [ln for ln in metrics(d).splitlines() if "dirty_" in ln])
        # the bucket's files outside the directory have no bound: not held
        t1 = time.time()
        s3.put_object(Bucket=b, Key="top.bin", Body=os.urandom(2 * MiB))
        s3.put_object(Bucket=b, Key="top2.bin", Body=os.urandom(4 * MiB))
        assert time.time() - t1 < 3
        relay.restore()
        out, err = p.communicate(timeout=120)
        took = time.time() - t0
        assert p.returncode == 0, (out, err, d.tail())
        assert took >= HELD_S
        assert s3.get_object(Bucket=b, Key="ckpt/ckpt.bin")["Body"].read() == payload
        assert held_total(d, b, str(dp_ino(d, b))) >= 1
        print(f"\nnfs-cp of 8 MiB past a 4 MiB directory bound (remote cut {HELD_S} s): "
              f"{took:.2f} s")
    finally:
        relay.close()


def dp_ino(d, b):
    """The inode of directory ckpt of bucket @b (its HEAD's x-s3nfs inode, or NFS)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
    from tenutil import Nfs
    with Nfs(d) as n:
        st, fh = n.mount("/")
        assert st == 0
        st, fh = n.lookup(fh, b)
        st, fh = n.lookup(fh, "ckpt")
        assert st == 0
        return n.fileid(fh)


def test_held_bucket_is_hastened(d, rgw):
    """A bucket whose upload delay is an hour: past its bound its pending files
    are uploaded at once (the delay does not apply), so held writers resume in
    seconds, not after the delay."""
    rb = new_bucket(rgw.boto3(), "tdh-")
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb)
    b = "th" + uuid.uuid4().hex[:8]
    s3 = d.boto3()
    s3.create_bucket(Bucket=b)
    tier = f"/tenants/1/buckets/{b}/tier"
    pol = adm.put(tier, {"remote": r["id"], "upload_after_s": 3600, "dirty_bound": BOUND})
    assert pol["effective"]["dirty_bound"] == BOUND
    if BOUND:
        wait_for(lambda: re.search(r'^s3nfs_tier_dirty_bound_bytes\{tenant="1",bucket="%s",'
                                   r'level="bucket"\} %d$' % (b, BOUND), metrics(d), re.M),
                 timeout=30, what="the bound published")
    data = os.urandom(MiB)
    w = Writer(lambda i: s3.put_object(Bucket=b, Key=f"h/{i}", Body=data), 10)
    w.start()
    w.join(60)
    assert not w.is_alive(), "held writers were not let go: the bucket was not hastened"
    assert not w.errors, w.errors
    assert held_total(d, b) >= 1, "nothing was held"
    # the first files went to the remote long before their hour
    head = s3.head_object(Bucket=b, Key="h/0")["ResponseMetadata"]["HTTPHeaders"]
    assert head.get("x-s3nfs-tier-state") in ("uploaded", "uploading"), head
    print(f"\n10 MiB into a bucket with a 1 h upload delay and a 4 MiB bound: "
          f"{sum(w.times):.2f} s, longest write {max(w.times):.2f} s")
