# SPDX-License-Identifier: Apache-2.0
"""The bench scripts answer -h / --help with their usage and start nothing (bench/nfs/run.sh
used to pass --help on to bench_nfs and run a whole round)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.mark.parametrize("script", ["bench/nfs/run.sh", "bench/s3/run.sh", "bench/core/run.sh"])
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_usage_only(script, flag):
    r = subprocess.run([os.path.join(ROOT, script), flag], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Usage: " + script), r.stdout
    assert "--" in r.stdout.splitlines()[0]
    assert r.stderr == "", r.stderr  # no bench_log lines: nothing was started


def test_nfs_placements_pin_each_pass():
    """--placements one,two runs the rows once per placement, each with its own table,
    the server's threads and the client pinned as named (s3nfsd only: no ganesha here)."""
    env = dict(os.environ)
    if not env.get("S3NFSD_BIN"):
        pytest.skip("S3NFSD_BIN not set")
    if os.cpu_count() < 2:
        pytest.skip("placement two needs 2 CPUs")
    r = subprocess.run([os.path.join(ROOT, "bench/nfs/run.sh"), "--only", "s3nfsd", "--quick",
                        "--states", "fresh", "--phases", "getattr", "--depths", "1",
                        "--placements", "one,two"],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    one = out.index("placement one: server and client pinned to CPU 0")
    two = out.index("placement two: server pinned to CPU 0, client to CPU 1")
    assert one < two, out
    assert "s3nfsd: client pinned to CPUs 0" in out[one:two], out
    assert "s3nfsd: client pinned to CPUs 1" in out[two:], out
    assert out.count("s3nfsd: server threads pinned to CPUs 0") == 2, out
    assert re.search(r"^getattr_qd1\s+ops/s\s+-\s+\d+", out[two:], re.M), out


def test_nfs_unknown_placement_refused():
    r = subprocess.run([os.path.join(ROOT, "bench/nfs/run.sh"), "--placements", "three"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "unknown placement three" in r.stderr
