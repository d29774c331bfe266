# SPDX-License-Identifier: Apache-2.0
"""The Linux kernel NFSv3 client against a real s3nfsd, through nfsvm
(/work/shared/nfsvm: a throw-away QEMU guest that mounts the export from the
host's loopback and runs a workload script). Skipped with a clear message when
nfsvm or its image is absent. Slow under TCG emulation (about a minute each).
"""
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def s3nfsd(daemon_factory):
    """The shared daemon fixture, with a small data file, and its data removed
    afterwards: a module of many tests must not hold a 2 GiB preallocated
    store per test until the session ends."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB"]).start()
    yield d
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)
NFSVM = os.environ.get("NFSVM_DIR", "/work/shared/nfsvm")
CACHE = os.environ.get("NFSVM_CACHE",
                       os.path.join(os.environ.get("XDG_CACHE_HOME",
                                                   os.path.expanduser("~/.cache")), "nfsvm"))

pytestmark = [pytest.mark.slow, pytest.mark.kvm]


def nfsvm_ready():
    if not os.access(os.path.join(NFSVM, "run"), os.X_OK):
        return f"nfsvm not found at {NFSVM}"
    if not os.path.exists(os.path.join(CACHE, "rootfs.img")):
        return f"nfsvm image not built (run {NFSVM}/build-image as root once)"
    return None


@pytest.fixture
def nfsvm():
    why = nfsvm_ready()
    if why:
        pytest.skip(why)

    def run(daemon, workload, *args, share=None, timeout=900):
        cmd = [os.path.join(NFSVM, "run"), "-p", str(daemon.nfs_port), "-m",
               str(daemon.nfs_port), "-e", "/", "--timeout", str(timeout)]
        if share:
            cmd += ["--share", share, "--mem", "2048"]
        cmd += [os.path.join(HERE, "kernel", workload)] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 120)
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"{workload} failed (rc={p.returncode}):\n{out[-4000:]}\n" \
                                  f"--- daemon log ---\n{daemon.tail()}"
        return out
    return run


def test_kernel_smoke(s3nfsd, nfsvm):
    assert "SMOKE OK" in nfsvm(s3nfsd, "smoke.sh")


def test_kernel_source_tarball(s3nfsd, nfsvm, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    # A real source tree: kernel UAPI, glibc, libtirpc and libevent headers
    # (about 1300 entries, with symlinks and deep directories).
    parts = [p for p in ("include/linux", "include/asm-generic", "include/x86_64-linux-gnu",
                         "include/tirpc", "include/event2") if os.path.isdir("/usr/" + p)]
    subprocess.run(["tar", "-C", "/usr", "-cf", str(share / "src.tar")] + parts, check=True)
    out = nfsvm(s3nfsd, "tarball.sh", "/host/src.tar", share=str(share))
    assert "TARBALL OK" in out


def test_kernel_checkpoint_rename_over(s3nfsd, nfsvm):
    out = nfsvm(s3nfsd, "checkpoint.py")
    assert "CHECKPOINT OK" in out


def test_kernel_devtools(s3nfsd, nfsvm):
    """git (commit, mv, gc, fsck), make + gcc, sqlite3, mmap writes, cp -a."""
    assert "DEVTOOLS OK" in nfsvm(s3nfsd, "devtools.sh")


def test_kernel_nlm_locks(tmp_path):
    """Mount with locking (no nolock): fcntl locks go through NLM to s3nfsd.
    rpcbind, s3nfsd and the guest run in a private network namespace, so the
    host's port 111 is neither needed nor touched."""
    import shutil
    from s3nfsd_harness import BIN
    why = nfsvm_ready()
    if why:
        pytest.skip(why)
    if os.geteuid() != 0 or not shutil.which("rpcbind") or not shutil.which("unshare"):
        pytest.skip("needs root, rpcbind and unshare (a private network namespace)")
    env = dict(os.environ, NFSVM_NET="slirp")  # passt needs a routable interface
    p = subprocess.run(["unshare", "--net", "--mount", os.path.join(HERE, "kernel_lock_netns.sh"),
                        BIN, os.path.join(NFSVM, "run"), str(tmp_path)], capture_output=True,
                       text=True, timeout=900, env=env)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "LOCK OK" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:] + \
        log[-3000:]
    assert "NLM_LOCK from" in log and "NLM_UNLOCK from" in log
