# SPDX-License-Identifier: Apache-2.0
"""s3nfsd SIGKILLed in the middle of its own multipart upload (issue 12's
proof, "SIGKILL of s3nfsd with uploads pending, then resume ... incomplete
multipart uploads of ours are aborted"). test_tier_upload.py's
test_sigkill_with_uploads_pending_then_restart plants the leftover upload
itself; here the daemon makes it: the remote is a second s3nfsd taking writes
at 4 MiB/s (its QoS), so a 24 MiB file (5 parts of 5 MiB) takes seconds to go
up, and the daemon is killed once the remote lists the multipart upload and
has taken part bytes.

- the killed run's upload is still open on the remote (nobody aborted it);
- restarted on the same data folder, the daemon aborts it (the start's sweep
  of the remote's prefix, logged) and uploads the file again: the remote
  object read with boto3 equals the file, the state says uploaded;
- afterwards no multipart upload is left for the key, nor in the bucket;
- the store check is clean."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from s3nfsd_harness import BIN  # noqa: E402
from tenutil import Admin  # noqa: E402
from tierutil import wait_for  # noqa: E402
from test_tier_upload import (FAST, flush, remote_body, remote_write_bytes, state,  # noqa: E402
                              tiered_bucket)

MiB = 1024 * 1024


def uploads_of(rem, key=None):
    kw = {"Prefix": key} if key else {}
    ups = rem.daemon.boto3().list_multipart_uploads(Bucket=rem.bucket, **kw).get("Uploads", [])
    return [(u["Key"], u["UploadId"]) for u in ups if key is None or u["Key"] == key]


def test_sigkill_mid_multipart_upload_then_restart(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    Admin(rem.daemon).put("/tenants/1/qos", {"write_bps": 4 * MiB})
    dm = daemon_factory(extra_args=FAST).start()
    b, _ = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket, 0)
    s3 = dm.boto3()
    data = os.urandom(24 * MiB + 4321)  # 5 parts of 5 MiB: about 6 s at 4 MiB/s
    before = remote_write_bytes(rem.daemon)
    s3.put_object(Bucket=b, Key="ckpt/big.bin", Body=data)

    # mid-upload: the remote lists our multipart upload and has taken part bytes
    wait_for(lambda: uploads_of(rem, "p/ckpt/big.bin"), timeout=30, step=0.05,
             what="our multipart upload listed on the remote")
    wait_for(lambda: remote_write_bytes(rem.daemon) > before, timeout=30, step=0.05,
             what="part bytes admitted by the remote")
    assert state(dm, b, "ckpt/big.bin")[0] == "uploading"
    dm.kill()
    # the killed run's upload is left open on the remote, and the object is not there
    killed = uploads_of(rem, "p/ckpt/big.bin")
    assert len(killed) == 1, killed
    assert remote_body(rem.daemon.boto3(), rem.bucket, "p/ckpt/big.bin") is None
    # (the kill came before the last part: less than the file went up)
    assert remote_write_bytes(rem.daemon) - before < len(data)

    # restart on the same data folder: the upload resumes from the LMDB queue
    log_pos = os.path.getsize(dm.log_path)
    dm.start()
    adm = Admin(dm)
    flush(adm, b)
    assert state(dm, b, "ckpt/big.bin")[0] == "uploaded"
    rs3 = rem.daemon.boto3()
    assert remote_body(rs3, rem.bucket, "p/ckpt/big.bin") == data
    h = rs3.head_object(Bucket=rem.bucket, Key="p/ckpt/big.bin")
    assert h["ContentLength"] == len(data) and h["ETag"].strip('"').endswith("-5"), h
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["pending_files"] == 0
    # the killed run's upload was aborted, and the new one completed: nothing open
    assert uploads_of(rem, "p/ckpt/big.bin") == [], (uploads_of(rem, "p/ckpt/big.bin"), killed)
    assert uploads_of(rem) == []
    with open(dm.log_path, encoding="utf-8", errors="replace") as f:
        f.seek(log_pos)
        log = f.read()
    assert "aborted 1 multipart upload left by an earlier run" in log, log[-3000:]

    # the store is consistent after the kill and the resumed upload
    dm.stop()
    r = subprocess.run([BIN, "--data-dir", dm.data_dir, "--set", "data_file_size=1GiB",
                        "--check-store"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "store check: consistent" in r.stdout, \
        f"store check failed:\n{r.stdout}\n{r.stderr[-3000:]}"
