# SPDX-License-Identifier: Apache-2.0
"""The bench scripts answer -h / --help with their usage and start nothing (bench/nfs/run.sh
used to pass --help on to bench_nfs and run a whole round)."""
import os
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
