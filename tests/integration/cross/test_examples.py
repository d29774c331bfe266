# SPDX-License-Identifier: Apache-2.0
"""The examples/ scripts at reduced scale: 500 files through aws s3 sync and back
over NFS, three 64 MiB checkpoints over NFS polled over S3 (the full scale,
20,000 files and 4 GiB checkpoints, is examples/run.sh)."""
import json
import os
import subprocess

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EX = os.path.join(TOP, "examples")


def run(d, script, *args, timeout=600):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1")
    p = subprocess.run(["/usr/bin/python3", os.path.join(EX, script), "--endpoint", d.s3_endpoint,
                        "--nfs-port", str(d.nfs_port)] + list(args), env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{script}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}\n{d.tail()}"
    return json.loads(p.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not os.access("/usr/bin/aws", os.X_OK), reason="needs /usr/bin/aws")
def test_dataset_sync_example(s3nfsd):
    s = run(s3nfsd, "dataset_sync.py", "--files", "500", "--bucket", "datasets")
    assert s["ok"] and s["nfs_checksum_mismatches"] == 0 and s["second_sync_uploads"] == 0
    assert s["listed_keys"] == 505 and s["results_via_s3_match"]


@pytest.mark.slow
def test_checkpoint_example(s3nfsd, tmp_path):
    s = run(s3nfsd, "checkpoint.py", "--size", "64MiB", "--versions", "3", "--bucket", "ckpts",
            "--workdir", str(tmp_path))
    assert s["ok"] and s["loaded"][-1]["version"] == 3
    assert all(x["whole"] for x in s["loaded"])
    assert s["final_size"] == 64 << 20
