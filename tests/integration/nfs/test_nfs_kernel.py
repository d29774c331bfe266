# SPDX-License-Identifier: Apache-2.0
"""The Linux kernel NFSv3 client against a real s3nfsd, through nfsvm (a
throw-away QEMU guest that mounts the export from the host's loopback and runs
a workload script from kernel/). The guest tool and its image come from the
session fixture of tests/integration/kernel/knfs.py (../shared/nfsvm next to
the repository, or $S3NFS_NFSVM_DIR), which skips with a clear message when
nfsvm or its image is absent. Slow under TCG emulation (about a minute each).

These are the workloads of training and development jobs (checkpoint writers,
git/make/sqlite, fcntl locks through NLM); the everyday-operations smoke test
and the source-tarball comparison live in tests/integration/kernel/.
"""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernel"))
from knfs import nfsvm  # noqa: E402,F401 - session fixture: finds nfsvm, builds its image

pytestmark = [pytest.mark.slow, pytest.mark.kvm]


@pytest.fixture
def s3nfsd(daemon_factory):
    """The shared daemon fixture, with a small data file, and its data removed
    afterwards: a module of many tests must not hold a 2 GiB preallocated
    store per test until the session ends."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB"]).start()
    yield d
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)


@pytest.fixture
def vm_run(nfsvm):  # noqa: F811 - the imported fixture
    """vm_run(daemon, workload, *args): boot a guest that mounts the daemon's
    export "/" and runs kernel/<workload>; returns its output, asserts exit 0."""
    def run(daemon, workload, *args, timeout=900):
        cmd = [nfsvm.run_script, "-p", str(daemon.nfs_port), "-m", str(daemon.nfs_port),
               "-e", "/", "--timeout", str(timeout), os.path.join(HERE, "kernel", workload)]
        p = subprocess.run(cmd + list(args), capture_output=True, text=True,
                           timeout=timeout + 120, env=dict(os.environ, NFSVM_CACHE=nfsvm.cache))
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"{workload} failed (rc={p.returncode}):\n{out[-4000:]}\n" \
                                  f"--- daemon log ---\n{daemon.tail()}"
        return out
    return run


def test_kernel_checkpoint_rename_over(s3nfsd, vm_run):
    out = vm_run(s3nfsd, "checkpoint.py")
    assert "CHECKPOINT OK" in out


def test_kernel_devtools(s3nfsd, vm_run):
    """git (commit, mv, gc, fsck), make + gcc, sqlite3, mmap writes, cp -a."""
    assert "DEVTOOLS OK" in vm_run(s3nfsd, "devtools.sh")


def test_kernel_nlm_locks(nfsvm, tmp_path):  # noqa: F811 - the imported fixture
    """Mount with locking (no nolock): fcntl locks go through NLM to s3nfsd.
    rpcbind, s3nfsd and the guest run in a private network namespace, so the
    host's port 111 is neither needed nor touched."""
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("rpcbind") or not shutil.which("unshare"):
        pytest.skip("needs root, rpcbind and unshare (a private network namespace)")
    # passt needs a routable interface: slirp in the private namespace
    env = dict(os.environ, NFSVM_NET="slirp", NFSVM_CACHE=nfsvm.cache)
    p = subprocess.run(["unshare", "--net", "--mount", os.path.join(HERE, "kernel_lock_netns.sh"),
                        BIN, nfsvm.run_script, str(tmp_path)], capture_output=True,
                       text=True, timeout=900, env=env)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "LOCK OK" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:] + \
        log[-3000:]
    assert "NLM_LOCK from" in log and "NLM_UNLOCK from" in log


def test_kernel_telldir_seekdir(s3nfsd, vm_run):
    """opendir/readdir/telldir, then seekdir back to every position (and in a
    new stream after the caches were dropped): the same names come again.
    Needs READDIR cookies below 2^63 (the kernel's directory offsets)."""
    out = vm_run(s3nfsd, "seekdir.py")
    assert "SEEKDIR OK" in out
