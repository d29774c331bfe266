# SPDX-License-Identifier: Apache-2.0
"""The Linux kernel NFSv3 client (a QEMU guest, ../shared/nfsvm) reading a file
the remote tier evicted to the session's Ceph RGW: stat shows its size without
a recall, its last MiB and then the whole file read back equal to what was
written (JUKEBOX answers, if any, are retried by the client). Skips as the
other kernel tests do when ../shared or QEMU is absent."""
import os
import sys
import time
import uuid

import pytest

from knfs import S3nfsdTarget, nfsvm  # noqa: F401 - fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin  # noqa: E402

pytestmark = [pytest.mark.kvm, pytest.mark.slow]

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB"]


def test_kernel_client_reads_an_evicted_file(nfsvm, daemon_factory, rgw, tmp_path):
    d = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = "kt-" + uuid.uuid4().hex[:10]
    rs3.create_bucket(Bucket=rb)
    adm = Admin(d)
    r = adm.post("/remotes", {"name": "r" + uuid.uuid4().hex[:8], "endpoint": rgw.endpoint,
                              "bucket": rb, "access_key": rgw.access_key,
                              "secret_key": rgw.secret_key, "prefix": "p/"})
    b = "kt" + uuid.uuid4().hex[:8]
    s3 = d.boto3()
    s3.create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier",
            {"remote": r["id"], "upload_after_s": 0, "evict_after_s": 1})
    payload = os.urandom(12 * 1024 * 1024 + 777)
    s3.put_object(Bucket=b, Key="cold.bin", Body=payload)

    def st():
        h = s3.head_object(Bucket=b, Key="cold.bin")["ResponseMetadata"]["HTTPHeaders"]
        return h.get("x-s3nfs-tier-state")
    end = time.time() + 60
    while st() != "evicted":
        assert time.time() < end, "cold.bin not evicted"
        time.sleep(0.2)
    target = S3nfsdTarget(d)
    res = nfsvm.run("tier_read", [b, "cold.bin"], target, tmp_path,
                    files={"payload.bin": payload}, timeout=240)
    print(res.stdout)
    assert res.ok, res.report(target.log_tail())
    assert "WORKLOAD OK tier_read" in res.stdout
    # the bytes came back from the remote (the file was evicted when the guest read it)
    import urllib.request
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as m:
        text = m.read().decode()
    line = [ln for ln in text.splitlines() if ln.startswith("s3nfs_tier_recalled_bytes_total ")]
    assert line and float(line[0].split()[1]) >= len(payload), line
