# SPDX-License-Identifier: Apache-2.0
"""NLM locks across s3nfsd restarts: remembered client hosts, SM_NOTIFY to
their status monitors, the grace period for reclaims (nlm_restart_check.py,
run in a private network namespace so that its fake portmapper can use port
111 on 127.0.0.2); and the Linux kernel client in the grace period (nfsvm
guest, marked slow/kvm)."""
import datetime
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernel"))
from knfs import nfsvm  # noqa: E402,F401 - session fixture: finds nfsvm, builds its image


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


@pytest.mark.slow
@pytest.mark.kvm
def test_kernel_client_waits_out_the_grace_period(nfsvm, tmp_path):  # noqa: F811
    """The Linux kernel client's lock manager, mounting with locking, meets
    NLM4_DENIED_GRACE_PERIOD after a restart and retries until the grace
    period ends, then locks normally; at the next start the guest (behind NAT,
    so its portmapper is the server host's) is not taken as notified
    (kernel_lock_grace_netns.sh: rpcbind, s3nfsd and the nfsvm guest in a
    private network namespace)."""
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("rpcbind") or not shutil.which("unshare"):
        pytest.skip("needs root, rpcbind and unshare (a private network namespace)")
    env = dict(os.environ, NFSVM_NET="slirp", NFSVM_CACHE=nfsvm.cache)
    p = subprocess.run(["unshare", "--net", "--mount",
                        os.path.join(HERE, "kernel_lock_grace_netns.sh"), BIN, nfsvm.run_script,
                        str(tmp_path)], capture_output=True, text=True, timeout=900, env=env)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "GRACE LOCK OK" in p.stdout, p.stdout[-3000:] + \
        p.stderr[-3000:] + log[-3000:]
    notifies = (tmp_path / "notifies").read_text().split() if (tmp_path / "notifies").exists() \
        else []
    assert notifies[1:2] == ["3"], f"hostB's status monitor got SM_NOTIFY state 3: {notifies}"
    runs = log.split("==== start")
    run2, run3 = runs[-2], runs[-1]
    assert "grace period: reclaims only" in run2, \
        "the guest's lock was not refused during the grace period"
    assert "NLM grace period over" in run2, "the grace period did not end"
    # the grace period ends at its deadline; the line saying so comes from a
    # 1 s tick, so compare times, not line order
    start = re.search(r"^(\S+) INFO NFS .* grace period of (\d+) s", run2, re.M)
    granted = re.search(r"^(\S+) DEBUG NFS .*NLM LOCK excl ino=\d+ \[0\+100\] \S+ by \S+: 0 ",
                        run2, re.M)
    assert start and granted, "no grace-period start or no granted lock in the log"

    def ts(stamp):
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    early = ts(start.group(1)) + int(start.group(2)) - ts(granted.group(1))
    assert early <= 0.05, f"the guest's lock was granted {early:.3f} s before the grace period ended"
    assert "portmapper names this server's own NSM" in run3 and \
        "NLM grace period ended early" in run3, "the NAT'd guest was 'notified' through our NSM"
