# SPDX-License-Identifier: Apache-2.0
"""Harness for the kernel NFS client tests: a QEMU guest from ../shared/nfsvm.

(Not named conftest.py: a second conftest module would shadow the shared
tests/integration/conftest.py that other tests import from. The test module
imports these fixtures.)

`nfsvm` (session scope) finds the nfsvm tool next to the repository
(<repo>/../shared/nfsvm, or $S3NFS_NFSVM_DIR), runs its `build-image` (which
caches the guest image in $NFSVM_CACHE, default ~/.cache/nfsvm, and returns
at once when the cache is up to date; the first build needs root and ~1 min),
and skips every kernel test with a clear message when the tool is absent or
no image can be built.

`knfs_target` is the NFS server the guest mounts: a fresh s3nfsd from the
shared `s3nfsd` fixture (NFS and MOUNT on one port, export "/"), or, when
$S3NFS_KNFS_TARGET="NFSPORT[:MOUNTPORT[:EXPORT]]" is set, an NFS server that
is already running on 127.0.0.1 (for comparing against another server; the
S3-side checks are then skipped).

Each test boots one guest with NfsVm.run(); the workload scripts live in
workloads/ and source workloads/lib.sh through the shared directory /host.
"""
import os
import re
import shutil
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
NFSVM_DIR = os.environ.get("S3NFS_NFSVM_DIR",
                           os.path.abspath(os.path.join(REPO, "..", "shared", "nfsvm")))
IMAGE_FILES = ("vmlinuz", "initrd.img", "rootfs.img")
BUILD_TIMEOUT = 1200
# soft mount with a bounded retry: a server that stops answering shows up as
# EIO in the failing step instead of a guest that hangs until the VM timeout
MOUNT_OPTS = "soft,timeo=100,retrans=2"


def _tail(text, n):
    lines = text.splitlines()
    return "\n".join(lines[-n:])


class Result:
    """What one guest run returned: exit code, workload output, run's stderr."""

    def __init__(self, name, rc, stdout, stderr, out_dir, wall):
        self.name = name
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.out_dir = out_dir
        self.wall = wall

    @property
    def ok(self):
        return self.rc == 0 and f"WORKLOAD OK {self.name}" in self.stdout

    @property
    def last_step(self):
        steps = re.findall(r"^== STEP (.*)$", self.stdout, re.M)
        return steps[-1] if steps else "(none: the workload did not start)"

    @property
    def failure(self):
        m = re.findall(r"^FAIL \[.*$", self.stdout, re.M)
        if m:
            return m[-1]
        if self.rc == 124:
            return f"VM timed out in step '{self.last_step}'"
        if self.rc == 125:
            return "VM boot or NFS mount failed"
        return f"exit code {self.rc} in step '{self.last_step}'"

    def hostchecks(self):
        """[(bucket, key, size, sha256)] from HOSTCHECK lines."""
        out = []
        for m in re.finditer(r"^HOSTCHECK (\S+) (\S+) (\d+) ([0-9a-f]{64})$", self.stdout, re.M):
            out.append((m.group(1), m.group(2), int(m.group(3)), m.group(4)))
        return out

    def opstats(self):
        """Per-NFS-operation count and mean round trip (ms) from the guest's
        /proc/self/mountstats, as text lines ("" when there is none)."""
        for f in ("mountstats", "nfsvm-mountstats"):
            path = os.path.join(self.out_dir or "", f)
            if os.path.exists(path) and os.path.getsize(path) > 0:
                break
        else:
            return ""
        out, on = [], False
        with open(path, errors="replace") as fh:
            for line in fh:
                if "per-op statistics" in line:
                    on = True
                    continue
                if on and ":" in line:
                    name, rest = line.strip().split(":", 1)
                    v = [int(x) for x in rest.split() if x.isdigit()]
                    if len(v) >= 8 and v[0] > 0:
                        err = f" errors={v[8]}" if len(v) > 8 and v[8] else ""
                        out.append(f"{name:<12} ops={v[0]:<7} timeouts={v[2]:<3} "
                                   f"mean_rtt={v[6] / v[0]:.2f}ms{err}")
        return "\n".join(out)

    def report(self, server_log=""):
        """A failure message with everything the server's author needs."""
        parts = [f"kernel workload '{self.name}' failed: {self.failure}",
                 f"last step: {self.last_step}",
                 "----- guest output (tail) -----", _tail(self.stdout, 60),
                 "----- nfsvm run (stderr tail) -----", _tail(self.stderr, 30)]
        if self.out_dir:
            log = os.path.join(self.out_dir, "nfsvm-guest.log")
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    parts += ["----- guest harness log (tail) -----", _tail(f.read(), 15)]
            dmesg = os.path.join(self.out_dir, "nfsvm-dmesg")
            if os.path.exists(dmesg):
                with open(dmesg, errors="replace") as f:
                    nfs = [ln for ln in f.read().splitlines()
                           if re.search(r"nfs|rpc|lockd|server", ln, re.I)
                           and "Registered" not in ln]
                if nfs:
                    parts += ["----- guest dmesg (NFS lines) -----", "\n".join(nfs[-15:])]
        ops = self.opstats()
        if ops:
            parts += ["----- NFS operations sent by the guest -----", ops]
        if server_log:
            parts += ["----- server log (tail) -----", server_log]
        return "\n".join(parts)


class NfsVm:
    def __init__(self, tool_dir, cache):
        self.tool_dir = tool_dir
        self.cache = cache
        self.run_script = os.path.join(tool_dir, "run")

    def run(self, workload, args, target, tmp_path, files=None, env=None, timeout=300,
            mem=None, on_request=None):
        """Boot one guest, mount `target`, run workloads/<workload>.sh ARGS.

        files: {name: host path or bytes} put into the shared directory (/host).
        env: {NAME: VALUE} for the workload.
        on_request: with it the share is writable and the guest may ask the host
        for an action by creating /host/request.<what>; the host calls
        on_request(<what>) and answers with /host/done.<what> (or
        /host/failed.<what> holding the error) - e.g. to restart the server.
        Returns a Result; never raises for a failing workload (the caller asserts)."""
        name = workload
        share = tmp_path / f"share-{name}"
        out_dir = tmp_path / f"out-{name}"
        share.mkdir()
        shutil.copy(os.path.join(WORKLOADS, "lib.sh"), share / "lib.sh")
        for fname, src in (files or {}).items():
            if isinstance(src, bytes):
                (share / fname).write_bytes(src)
            else:
                try:
                    os.link(src, share / fname)
                except OSError:
                    shutil.copy(src, share / fname)
        cmd = [self.run_script, "-p", str(target.nfs_port), "-m", str(target.mount_port),
               "-e", target.export, "-o", MOUNT_OPTS,
               "--share-rw" if on_request else "--share", str(share),
               "--out", str(out_dir), "--timeout", str(timeout)]
        if on_request:
            os.chmod(share, 0o777)
        if mem:
            cmd += ["--mem", str(mem)]
        for k, v in (env or {}).items():
            cmd += ["--env", f"{k}={v}"]
        cmd += [os.path.join(WORKLOADS, f"{workload}.sh")] + [str(a) for a in args]
        run_env = dict(os.environ, NFSVM_CACHE=self.cache)
        so_path, se_path = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
        t0 = time.monotonic()
        handled = set()
        with open(so_path, "wb") as so, open(se_path, "wb") as se:
            p = subprocess.Popen(cmd, stdout=so, stderr=se, env=run_env)
            deadline = t0 + timeout + 60
            while p.poll() is None and time.monotonic() < deadline:
                if on_request:
                    for f in sorted(os.listdir(share)):
                        if f.startswith("request.") and f not in handled:
                            handled.add(f)
                            what = f[len("request."):]
                            try:
                                on_request(what)
                                (share / f"done.{what}").write_text("ok\n")
                            except Exception as e:  # noqa: BLE001 - handed to the guest
                                (share / f"failed.{what}").write_text(f"{e!r}\n")
                time.sleep(0.2)
            rc = p.poll()
            if rc is None:
                p.terminate()   # run's trap stops its QEMU and passt
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                rc = 124
                se.write(b"\nhost-side timeout: nfsvm run killed\n")
        wall = time.monotonic() - t0
        return Result(name, rc, so_path.read_text(errors="replace"),
                      se_path.read_text(errors="replace"), str(out_dir), wall)


@pytest.fixture(scope="session")
def nfsvm():
    run = os.path.join(NFSVM_DIR, "run")
    build = os.path.join(NFSVM_DIR, "build-image")
    if not (os.access(run, os.X_OK) and os.access(build, os.X_OK)):
        pytest.skip(f"kernel NFS client tests need {NFSVM_DIR} (nfsvm: run + build-image); "
                    "it is absent")
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("kernel NFS client tests need qemu-system-x86_64 (apt-get install "
                    "qemu-system-x86)")
    cache = os.environ.get("NFSVM_CACHE") or subprocess.run(
        [build, "--print-dir"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    have_image = all(os.path.exists(os.path.join(cache, f)) for f in IMAGE_FILES)

    def build_image():
        try:
            p = subprocess.run([build], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=BUILD_TIMEOUT,
                               env=dict(os.environ, NFSVM_CACHE=cache))
            return p.returncode, p.stdout
        except subprocess.TimeoutExpired:
            return -1, f"build-image did not finish within {BUILD_TIMEOUT}s"
    rc, out = build_image()
    if rc != 0 and "apt-get update" in out and os.geteuid() == 0:
        # a fresh machine without apt lists: build-image takes its sources from them
        subprocess.run(["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600, check=False)
        rc, out = build_image()
    if rc != 0:
        # an older image (e.g. a non-root user cannot rebuild) still boots
        have_image = all(os.path.exists(os.path.join(cache, f)) for f in IMAGE_FILES)
        if not have_image:
            pytest.skip(f"cannot build the nfsvm guest image in {cache} "
                        f"({build} exit {rc}; it needs root and mmdebstrap):\n{_tail(out, 8)}")
    elif not have_image:
        print(f"nfsvm: built the guest image in {cache}")
    return NfsVm(NFSVM_DIR, cache)


class ExternalTarget:
    """An NFS server already running on 127.0.0.1 ($S3NFS_KNFS_TARGET)."""

    def __init__(self, spec):
        parts = spec.split(":")
        self.nfs_port = int(parts[0])
        self.mount_port = int(parts[1]) if len(parts) > 1 and parts[1] else self.nfs_port
        self.export = parts[2] if len(parts) > 2 and parts[2] else "/"
        self.daemon = None

    def log_tail(self):
        return ""


class S3nfsdTarget:
    """A fresh s3nfsd: NFS and MOUNT on one port, the bootstrap tenant root as "/"."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.nfs_port = daemon.nfs_port
        self.mount_port = daemon.nfs_port
        self.export = "/"

    def log_tail(self):
        proc = self.daemon.proc
        state = ""
        if proc is not None and proc.poll() is not None:
            state = f"*** s3nfsd is not running: it exited with {proc.returncode} ***\n"
        return state + self.daemon.tail(40)


@pytest.fixture
def knfs_target(nfsvm, request):
    spec = os.environ.get("S3NFS_KNFS_TARGET")
    if spec:
        return ExternalTarget(spec)
    return S3nfsdTarget(request.getfixturevalue("s3nfsd"))
