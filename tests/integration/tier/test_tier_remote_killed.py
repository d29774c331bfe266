# SPDX-License-Identifier: Apache-2.0
"""The remote dies while a multipart upload is in flight (issue 12's proof,
"remote killed mid-upload"): the remote is a second s3nfsd taking writes at
4 MiB/s (its QoS), so a 24 MiB file (parts of 5 MiB) takes seconds to go up;
once the remote has received part bytes it is SIGKILLed.

- local writes go on at once (S3 PUT of another file, NFS WRITE into it);
- the file stays pending (state header not `uploaded`, the bucket's pending
  count), and the failures are counted in /metrics;
- the remote restarted (same data folder, same port): the flush barrier ends,
  the remote object read with boto3 equals the file, and no incomplete
  multipart upload is left on the remote: the one killed in flight, whose
  abort failed while the remote was down, is aborted once the remote answers
  again (without that, only the sweep at the daemon's next start removed it)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import FILE_SYNC, Admin, Nfs  # noqa: E402
from tierutil import wait_for  # noqa: E402
from test_tier_upload import (FAST, flush, metric, remote_body, remote_write_bytes,  # noqa: E402
                              state, tiered_bucket, urlget)

MiB = 1024 * 1024


def remote_errors(d):
    """All of s3nfs_tier_remote_errors_total, whatever the kind."""
    n = 0
    for line in urlget(d.admin_endpoint + "/metrics").splitlines():
        if line.startswith("s3nfs_tier_remote_errors_total{"):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def uploads_on(rem):
    return rem.daemon.boto3().list_multipart_uploads(Bucket=rem.bucket).get("Uploads", [])


def test_remote_killed_mid_upload(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    Admin(rem.daemon).put("/tenants/1/qos", {"write_bps": 4 * MiB})
    dm = daemon_factory(extra_args=FAST).start()
    adm = Admin(dm)
    b, _ = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket, 0)
    s3 = dm.boto3()
    data = os.urandom(24 * MiB)  # 5 parts of 5 MiB: about 6 s at 4 MiB/s
    before = remote_write_bytes(rem.daemon)
    s3.put_object(Bucket=b, Key="big", Body=data)

    # in flight: a multipart upload exists on the remote and part bytes arrived
    wait_for(lambda: metric(dm, 's3nfs_tier_upload_requests_total{op="upload_part"}') > 0,
             timeout=30, step=0.05, what="UploadPart requests sent")
    wait_for(lambda: remote_write_bytes(rem.daemon) > before, timeout=30, step=0.05,
             what="part bytes admitted by the remote")
    inflight = [u["UploadId"] for u in uploads_on(rem)]
    assert inflight, "no multipart upload on the remote while parts are sent"
    assert state(dm, b, "big")[0] == "uploading"
    errs = remote_errors(dm)
    rem.daemon.kill()

    # local writes do not wait for the remote
    other = os.urandom(64 * 1024)
    t0 = time.time()
    s3.put_object(Bucket=b, Key="other", Body=other)
    assert time.time() - t0 < 2, time.time() - t0
    patch = os.urandom(4096)
    with Nfs(dm) as n:
        st, root = n.mount("/")
        assert st == 0
        st, bfh = n.lookup(root, b)
        assert st == 0
        st, fh = n.lookup(bfh, "other")
        assert st == 0
        t0 = time.time()
        assert n.write_all(fh, patch, stable=FILE_SYNC)[0] == 0
        assert time.time() - t0 < 2, time.time() - t0
    other = patch + other[len(patch):]
    assert s3.get_object(Bucket=b, Key="other")["Body"].read() == other
    assert s3.get_object(Bucket=b, Key="big")["Body"].read() == data

    # the failure is seen and counted; the file stays pending
    wait_for(lambda: remote_errors(dm) > errs, timeout=30, what="remote errors counted")
    # (the pending count is a pass's: "other" shows at the pass after its PUT)
    info = wait_for(lambda: (lambda i: i if i["uploads"] and i["uploads"]["last_error"]
                             and i["uploads"]["pending_files"] == 2 else None)(
        adm.get(f"/tenants/1/buckets/{b}/tier")), what="an error noted, two files pending")
    assert "connect" in info["uploads"]["last_error"], info["uploads"]
    time.sleep(2)  # a few retries against the dead remote
    assert state(dm, b, "big")[0] != "uploaded"
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["pending_files"] == 2

    # the remote back: same data folder, same port
    rem.daemon.start()
    flush(adm, b)
    assert state(dm, b, "big")[0] == "uploaded"
    assert state(dm, b, "other")[0] == "uploaded"
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["pending_files"] == 0
    rs3 = rem.daemon.boto3()
    assert remote_body(rs3, rem.bucket, "p/big") == data
    assert remote_body(rs3, rem.bucket, "p/other") == other
    # nothing of ours left incomplete: not the upload killed in flight either
    try:
        wait_for(lambda: uploads_on(rem) == [], timeout=30, what="no multipart upload left")
    except AssertionError:
        left = [u["UploadId"] for u in uploads_on(rem)]
        raise AssertionError(f"left on the remote: {left}; killed in flight: {inflight}")
