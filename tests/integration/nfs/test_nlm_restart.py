# SPDX-License-Identifier: Apache-2.0
"""NLM locks across s3nfsd restarts: remembered client hosts, SM_NOTIFY to
their status monitors, the grace period for reclaims (nlm_restart_check.py,
run in a private network namespace so that its fake portmapper can use port
111 on 127.0.0.2)."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_nlm_locks_recovered_after_restart(tmp_path):
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a private network namespace)")
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"s3nfsd not built at {BIN}")
    p = subprocess.run(["unshare", "--net", sys.executable,
                        os.path.join(HERE, "nlm_restart_check.py"), BIN, str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "NLM RESTART OK" in p.stdout, \
        p.stdout + p.stderr + log[-4000:]
