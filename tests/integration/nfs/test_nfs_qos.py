# SPDX-License-Identifier: Apache-2.0
"""QoS on the NFS path, measured: READ and WRITE are charged by their count
before they run, a call larger than the burst is admitted in slices (never
passed at once, never leaving debt for the next call), IOPS caps hold per
class, and S3 and NFS share one tenant budget.

Rates are checked against the cap as in tests/integration/s3/test_s3_qos.py:
(bytes - burst) / t within 1.1 * cap (the client's time), and no more waiting for
admission than at 0.7 * cap (the daemon's count of the seconds its requests waited,
s3nfs_qos_throttled_seconds_total: a loaded machine stretches the client's time by
itself, so the former lower bound on the client's rate was flaky there; a miss is
measured again, at most 3 times: retry_slow). Each test
fails with shaping switched off (S3NFS_TEST_QOS_SHAPING=false runs the daemon
with qos_shaping=false: whole calls at once, with debt)."""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from rpc3 import RpcConn  # noqa: E402
from qos_checks import BURST_MS, check_ops, check_rate, check_waited  # noqa: E402
from qos_checks import qos_waited, retry_slow, timed, timed_waits  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
SHAPING = os.environ.get("S3NFS_TEST_QOS_SHAPING", "true")


@pytest.fixture(scope="module")
def qd(tmp_path_factory):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from s3nfsd_harness import Daemon
    d = Daemon(str(tmp_path_factory.mktemp("nfsqos")),
               ["--set", f"qos_shaping={SHAPING}", "--set", "data_file_size=512MiB"])
    os.makedirs(d.data_dir, exist_ok=True)
    d.start()
    yield d
    d.cleanup()


@pytest.fixture
def nfs(qd):
    """(connection, a file handle of a fresh 1 MiB file, its bucket's name)."""
    c = RpcConn(qd.nfs_port)
    name, bfh = c.new_bucket()
    st, fh = c.create(bfh, "f")
    assert st == 0
    data = os.urandom(MiB)
    for off in range(0, MiB, 256 * KiB):
        assert c.write(fh, off, data[off:off + 256 * KiB])[0] == 0
    yield c, fh, name, data
    policy(qd)
    c.close()


def admin(d, method, path, body=None):
    req = urllib.request.Request(d.admin_endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def policy(d, **caps):
    """Replace tenant 1's policy (a fresh one starts with full buckets)."""
    try:
        admin(d, "DELETE", "/api/v1/tenants/1/qos")
    except urllib.error.HTTPError:
        pass
    if caps:
        caps.setdefault("burst_ms", BURST_MS)
        assert admin(d, "PUT", "/api/v1/tenants/1/qos", caps) == 200


@retry_slow
def test_nfs_write_sliced_then_small(qd, nfs):
    c, fh, _, _ = nfs
    policy(qd, write_bps=512 * KiB)
    data = os.urandom(MiB)
    t, w, (st, _) = timed_waits(qd, c.write, fh, 0, data)
    assert st == 0
    check_rate(MiB, t, 512 * KiB, "one 1 MiB WRITE", waited=w)
    t, w, (st, _) = timed_waits(qd, c.write, fh, 0, b"y" * 4096)
    assert st == 0
    check_waited(w, 0.5, "a small WRITE after a large one (debt)")


@retry_slow
def test_nfs_read_sliced_then_small(qd, nfs):
    c, fh, _, data = nfs
    policy(qd, read_bps=512 * KiB)
    t, w, (st, res) = timed_waits(qd, c.read, fh, 0, MiB)
    assert st == 0 and res[0] == data
    check_rate(MiB, t, 512 * KiB, "one 1 MiB READ", waited=w)
    t, w, (st, _) = timed_waits(qd, c.read, fh, 0, 4096)
    assert st == 0
    check_waited(w, 0.5, "a small READ after a large one (debt)")


@retry_slow
def test_nfs_read_iops_after_large_read(qd, nfs):
    c, fh, _, _ = nfs
    policy(qd, read_bps=1 * MiB, read_iops=20)
    t, w, (st, _) = timed_waits(qd, c.read, fh, 0, MiB)
    assert st == 0
    check_rate(MiB, t, 1 * MiB, "READ 1 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: [c.read(fh, 0, 4096) for _ in range(16)])
    check_ops(16, t, 20, "READs at read_iops=20", waited=w)


@retry_slow
def test_nfs_write_iops_after_large_write(qd, nfs):
    c, fh, _, _ = nfs
    policy(qd, write_bps=1 * MiB, write_iops=20)
    t, w, (st, _) = timed_waits(qd, c.write, fh, 0, os.urandom(MiB))
    assert st == 0
    check_rate(MiB, t, 1 * MiB, "WRITE 1 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: [c.write(fh, 0, b"z" * 4096) for _ in range(16)])
    check_ops(16, t, 20, "WRITEs at write_iops=20", waited=w)


@retry_slow
def test_nfs_meta_iops_beside_sliced_write(qd, nfs):
    """GETATTRs keep the metadata cap while a large WRITE of the tenant is sliced."""
    c, fh, _, _ = nfs
    policy(qd, write_bps=512 * KiB, meta_iops=20)
    res = {}

    def big():
        c2 = RpcConn(qd.nfs_port)
        res["t"], res["r"] = timed(c2.write, fh, 0, os.urandom(MiB))
        c2.close()
    th = threading.Thread(target=big)
    w0 = qos_waited(qd)
    th.start()
    t, _ = timed(lambda: [c.getattr(fh) for _ in range(16)])
    th.join()
    w = qos_waited(qd) - w0
    # both wait at the tenant: the sum of their waits is bounded as each one's would be
    # (GETATTRs held behind the WRITE's slices would add the WRITE's seconds)
    bound = MiB / (0.7 * 512 * KiB) + 16 / (0.7 * 20)
    # (waited=0.0: each only bounded above here; their waits together just below)
    check_ops(16, t, 20, "GETATTRs at meta_iops=20", waited=0.0)
    assert res["r"][0] == 0
    check_rate(MiB, res["t"], 512 * KiB, "WRITE 1 MiB beside metadata calls", waited=0.0)
    check_waited(w, bound, "WRITE 1 MiB beside 16 GETATTRs")


def test_long_single_write_holds_a_directory_cap(qd, nfs):
    """One 1 MiB WRITE (about 2 s) into a directory with a write cap of 512 KiB/s
    and nothing else capped: it gets no more than the cap + 5 % (the issue's
    +-5 %), and waits for admission no longer than at 0.9 x the cap (the daemon's
    count: the client's time stretches on a loaded machine)."""
    c, _, bucket, _ = nfs
    st, b = c.lookup(c.mnt("/")[1][0], bucket)
    assert st == 0
    st, d = c.mkdir(b, "ckpt")[:2]
    assert st == 0, st
    st, fh = c.create(d, "long")
    assert st == 0, st
    cap = 512 * KiB
    path = f"/api/v1/tenants/1/buckets/{bucket}/qos?dir=ckpt"
    assert admin(qd, "PUT", path, {"write_bps": cap, "burst_ms": BURST_MS}) == 200
    @retry_slow
    def measure():
        admin(qd, "DELETE", path)  # a fresh policy: its bucket full again
        admin(qd, "PUT", path, {"write_bps": cap, "burst_ms": BURST_MS})
        t, w, (st, _) = timed_waits(qd, c.write, fh, 0, os.urandom(MiB))
        assert st == 0
        burst = cap * BURST_MS / 1000
        assert (MiB - burst) / t <= 1.05 * cap, f"{MiB} B in {t:.2f} s is over the cap of {cap}"
        # not under 0.9 x the cap: by the daemon's waits (the client's time stretches on a
        # loaded machine)
        check_waited(w, MiB / (0.9 * cap), "one 1 MiB WRITE under a directory cap")
    try:
        measure()
    finally:
        admin(qd, "DELETE", path)


@retry_slow
def test_s3_and_nfs_share_one_budget(qd, nfs):
    """An S3 PUT and an NFS WRITE of the same tenant at once share its write cap."""
    c, fh, bucket, _ = nfs
    policy(qd, write_bps=1 * MiB)
    s3 = qd.boto3()
    res = {}
    body = os.urandom(MiB)

    def put():
        res["s3"], _ = timed(s3.put_object, Bucket=bucket, Key="s3obj", Body=body)
    w0 = qos_waited(qd)
    t0 = time.monotonic()
    th = threading.Thread(target=put)
    th.start()
    st, _ = c.write(fh, 0, os.urandom(MiB))
    assert st == 0
    th.join()
    t = time.monotonic() - t0
    w = qos_waited(qd) - w0
    # not held longer than the shared cap allows: each of the two waits at most as long
    # as the whole 2 MiB at 0.7 x the cap (by the daemon's count; the client's time
    # stretches under load)
    check_rate(2 * MiB, t, 1 * MiB, "S3 PUT + NFS WRITE of 1 MiB each",
               waited=w / 2)


def test_nfs_connection_closes_while_slice_waits(qd, nfs):
    """A connection that closes while a slice of its WRITE waits frees the call; the
    daemon serves on and nothing waits any more."""
    c, fh, _, _ = nfs
    policy(qd, write_bps=256 * KiB)
    c2 = RpcConn(qd.nfs_port)
    from rpc3 import WRITE, NFS_PROG, Packer
    args = Packer().opaque(fh).u64(0).u32(MiB).u32(2).opaque(os.urandom(MiB)).bytes()
    _, msg = c2.call_bytes(NFS_PROG, 3, WRITE, args)
    c2.send_raw(c2.record(msg))
    time.sleep(0.3)
    c2.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with urllib.request.urlopen(qd.admin_endpoint + "/metrics", timeout=10) as r:
            waiting = sum(int(float(line.split()[-1]))
                          for line in r.read().decode().splitlines()
                          if line.startswith("s3nfs_qos_waiting{"))
        if waiting == 0:
            break
        time.sleep(0.1)
    assert waiting == 0
    policy(qd)
    assert c.getattr(fh)[0] == 0
