# SPDX-License-Identifier: Apache-2.0
"""The QoS system class, measured on the background MD5 of NFS-written files.

A file written over NFS out of order has no known MD5 when it is committed:
the core's background worker reads it once it has been quiet for settle_ms
and stores the MD5 as its ETag (core/core_bg.c). Those reads are admitted as
the QoS system class (server/main.c sets the core's I/O hook), so a system
read cap delays the ETag by about (bytes - burst) / cap. The same daemon
measures the ETag's delay with no cap, then with a cap set through the admin
API (/api/v1/qos/system, system admin only), then with the cap removed."""
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from rpc3 import RpcConn  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
SIZE = 24 * MiB
CAP = 4 * MiB  # bytes/s; the burst is one second of it


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from s3nfsd_harness import Daemon
    d = Daemon(str(tmp_path_factory.mktemp("nfsqossys")),
               ["--set", "settle_ms=200", "--set", "data_file_size=512MiB"])
    os.makedirs(d.data_dir, exist_ok=True)
    d.start()
    yield d
    d.cleanup()


def admin(d, method, path, body=None, token=None):
    req = urllib.request.Request(d.admin_endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token or d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def system_read_bytes(d):
    req = urllib.request.Request(d.admin_endpoint + "/metrics",
                                 headers={"Authorization": f"Bearer {d.admin_token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if (line.startswith("s3nfs_qos_admitted_bytes_total{tenant=\"system\"")
                    and 'class="read"' in line):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def write_out_of_order(c, bfh, name, data):
    """Write @p data to a new file, second half first (so no MD5 is known at commit)."""
    st, fh = c.create(bfh, name)
    assert st == 0
    half = len(data) // 2
    chunk = 256 * KiB
    for off in list(range(half, len(data), chunk)) + list(range(0, half, chunk)):
        assert c.write(fh, off, data[off:off + chunk], stable=2)[0] == 0


def etag_delay(s3, bucket, key, want, timeout=120):
    """Seconds until ListObjects shows @p key with ETag @p want."""
    t0 = time.monotonic()
    while True:
        r = s3.list_objects_v2(Bucket=bucket, Prefix=key)
        got = [o["ETag"].strip('"') for o in r.get("Contents", []) if o["Key"] == key]
        if got and got[0] == want:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"ETag of {key} still {got}, not {want}"
        time.sleep(0.05)


def test_system_policy_api(sd):
    st, p = admin(sd, "GET", "/api/v1/qos/system")
    assert st == 200 and p["level"] == "system" and p["source"] == "config"
    assert p["read_bps"] == 0 and p["weight"] == 50
    with pytest.raises(urllib.error.HTTPError) as e:
        admin(sd, "PUT", "/api/v1/qos/system", {"min_read_bps": 1})
    assert e.value.code == 400
    st, p = admin(sd, "PATCH", "/api/v1/qos/system", {"meta_iops": 1000, "weight": 20})
    assert st == 200 and p["source"] == "api" and p["meta_iops"] == 1000 and p["weight"] == 20
    sd.restart()  # stored: it survives a restart
    st, p = admin(sd, "GET", "/api/v1/qos/system")
    assert p["source"] == "api" and p["meta_iops"] == 1000 and p["weight"] == 20
    st, _ = admin(sd, "DELETE", "/api/v1/qos/system")
    assert st == 204
    st, p = admin(sd, "GET", "/api/v1/qos/system")
    assert p["source"] == "config" and p["meta_iops"] == 0


def test_background_md5_throttled_by_system_read_cap(sd):
    c = RpcConn(sd.nfs_port)
    s3 = sd.boto3()
    try:
        bucket, bfh = c.new_bucket()
        # no cap: the ETag comes after settle_ms and a read at disk speed
        free = os.urandom(SIZE)
        before = system_read_bytes(sd)
        write_out_of_order(c, bfh, "free", free)
        t_free = etag_delay(s3, bucket, "free", hashlib.md5(free).hexdigest())
        assert system_read_bytes(sd) - before >= SIZE  # charged to the system class
        # a system read cap: the same work waits for (SIZE - burst) / CAP
        st, p = admin(sd, "PUT", "/api/v1/qos/system", {"read_bps": CAP})
        assert st == 200 and p["read_bps"] == CAP
        time.sleep(1.2)  # the fresh bucket is full: spend nothing before
        capped = os.urandom(SIZE)
        write_out_of_order(c, bfh, "capped", capped)
        t_capped = etag_delay(s3, bucket, "capped", hashlib.md5(capped).hexdigest())
        want = (SIZE - CAP) / CAP
        print(f"ETag after {t_free:.2f} s without a cap, {t_capped:.2f} s with "
              f"{CAP >> 20} MiB/s (expected about {want:.1f} s more)")
        # the cap holds: after its burst the reads go no faster than it (less a piece
        # admitted ahead: 0.8), however quick the uncapped run was (not t_capped -
        # t_free: a loaded machine may slow the uncapped run by seconds)
        assert t_capped >= 0.8 * want
        assert t_capped <= t_free + 1.5 * SIZE / CAP + 2
    finally:
        try:
            admin(sd, "DELETE", "/api/v1/qos/system")
        except urllib.error.HTTPError:
            pass
        c.close()
