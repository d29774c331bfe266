# SPDX-License-Identifier: Apache-2.0
"""A real remote object store for tests: a one-node Ceph cluster with a RADOS
Gateway (S3) on loopback, started from Debian's packages (ceph-mon, ceph-osd,
radosgw, ceph-common).

    rgw = Rgw(workdir).start()      # mon, memstore osd, radosgw; a user with known keys
    rgw.endpoint, rgw.access_key, rgw.secret_key, rgw.boto3()
    rgw.gc()                        # reclaim deleted objects now (radosgw-admin gc process)
    rgw.stop()                      # by PID, in reverse order; removes workdir

    Rgw(workdir, osd="bluestore", bluestore_bytes=16 << 30)   # for more than RAM holds

Everything lives under one work folder: ceph.conf, keyrings, the monitor's
store, logs, run dirs and admin sockets. By default the OSD keeps its data in
RAM (memstore: about twice the stored bytes, so a few GiB at most on a test
machine). osd="bluestore" keeps it on a sparse file of bluestore_bytes
(osd/block in the work folder: it takes disk space as objects are written,
and stopping deletes it with the folder); slower to start (mkfs) and to
write small objects, but its RAM does not grow with the stored bytes
(osd memory target, 1 GiB here). Monitor and gateway listen on
free loopback ports picked here, so two test sessions on one machine do not
meet. Each daemon runs in the foreground (-f) as a child of this process.
Waits are generous (a loaded 2-core machine takes ~15 s from start to the
first S3 answer; the defaults allow minutes) and every failure says which
step failed, with the tail of that daemon's log.

`available()` tells whether the binaries are there; `ensure_installed()`
tries apt-get once (as root) and returns a reason string when it cannot.
Facts: ../../../shared/RGW.md (or the lead's copy of it), docs/tiering.md.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from s3nfsd_harness import free_port

PACKAGES = ["ceph-mon", "ceph-osd", "radosgw", "ceph-common"]
BINARIES = ["ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool",
            "ceph-authtool"]

ACCESS_KEY = "RGWTESTACCESSKEY0001"
SECRET_KEY = "rgw/test/secret/key/0123456789abcdefghijk"
USER = "s3nfs-test"


def available():
    """@return None if every binary is on PATH, else what is missing."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    return None if not missing else "missing " + ", ".join(missing)


def ensure_installed():
    """Install the ceph packages if they are missing (root + apt-get only).
    @return None when the binaries are there afterwards, else the reason."""
    why = available()
    if why is None:
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{why}; install {' '.join(PACKAGES)} (scripts/deps.sh --test)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + PACKAGES):
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=900)
        if r.returncode != 0:
            tail = r.stdout.decode(errors="replace")[-1500:]
            return f"{why}; `{' '.join(cmd)}` failed ({r.returncode}):\n{tail}"
    return available()


class RgwError(RuntimeError):
    pass


class Rgw:
    """One-node Ceph + radosgw under @p workdir (created; removed by stop())."""

    def __init__(self, workdir, memstore_bytes=4 << 30, start_timeout=300, rgw_conf=None,
                 osd="memstore", bluestore_bytes=16 << 30):
        if osd not in ("memstore", "bluestore"):
            raise ValueError(f"rgw fixture: osd {osd!r}: memstore or bluestore")
        self.dir = os.path.abspath(workdir)
        self.mon_port = free_port()
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY
        self.region = "us-east-1"
        self.memstore_bytes = memstore_bytes
        self.osd = osd
        self.bluestore_bytes = bluestore_bytes
        self.timeout = start_timeout
        self.rgw_conf = dict(rgw_conf or {})
        self.procs = []  # (name, Popen, log path), in start order
        self.on_spawn = None  # called with each daemon's PID as it starts (bench/reaper.py)
        self.conf = os.path.join(self.dir, "ceph.conf")

    # ---- helpers

    def _p(self, *parts):
        return os.path.join(self.dir, *parts)

    def _tail(self, path, n=40):
        try:
            with open(path, "rb") as f:
                lines = f.read().splitlines()[-n:]
            return "\n".join(x.decode(errors="replace") for x in lines)
        except OSError as e:
            return f"({path}: {e})"

    def _fail(self, what, log=None):
        msg = f"rgw fixture: {what}"
        for name, proc, path in self.procs:
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            out = self._p("log", f"{name}.out")
            msg += f"\n--- {name} ({state}), last lines of {path}:\n{self._tail(path, 15)}"
            msg += f"\n--- its output ({out}):\n{self._tail(out, 15)}"
        if log and all(log != p for _, _, p in self.procs):
            msg += f"\n--- {log}:\n{self._tail(log)}"
        self.stop()
        raise RgwError(msg)

    def _run(self, args, timeout=120, check=True):
        try:
            r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout, cwd=self.dir)
        except subprocess.TimeoutExpired:
            self._fail(f"`{' '.join(args)}` did not finish within {timeout}s")
        out = r.stdout.decode(errors="replace")
        if check and r.returncode != 0:
            self._fail(f"`{' '.join(args)}` failed ({r.returncode}):\n{out[-2000:]}")
        return r.returncode, out

    def _ceph(self, *args, timeout=60, check=True):
        return self._run(["ceph", "-c", self.conf, "--connect-timeout", "30"] + list(args),
                         timeout=timeout, check=check)

    def _spawn(self, name, args):
        log = self._p("log", f"{name}.out")
        f = open(log, "ab")
        try:
            p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, cwd=self.dir,
                                 start_new_session=True)
        finally:
            f.close()
        self.procs.append((name, p, self._p("log", f"{name}.log")))
        if self.on_spawn:
            self.on_spawn(p.pid)
        return p

    def _wait(self, what, check, timeout=None, proc=None):
        deadline = time.time() + (timeout or self.timeout)
        while time.time() < deadline:
            if proc is not None and proc.poll() is not None:
                self._fail(f"{what}: the daemon exited with {proc.returncode}")
            if check():
                return
            time.sleep(0.5)
        self._fail(f"{what}: not done within {timeout or self.timeout}s")

    # ---- start / stop

    def _write_conf(self):
        fsid = str(uuid.uuid4())
        self.fsid = fsid
        extra = "".join(f"{k} = {v}\n" for k, v in self.rgw_conf.items())
        if self.osd == "memstore":
            store = f"osd objectstore = memstore\nmemstore device bytes = {self.memstore_bytes}\n"
        else:
            # One sparse file holds everything (data, RocksDB, WAL); no fsck (minutes
            # on a loaded machine, and the store is new); a modest memory target (its
            # caches, not the stored bytes).
            store = (f"osd objectstore = bluestore\n"
                     f"bluestore block create = true\n"
                     f"bluestore block size = {self.bluestore_bytes}\n"
                     f"bluestore block preallocate file = false\n"
                     f"bluestore fsck on mkfs = false\n"
                     f"bluestore fsck on mount = false\n"
                     f"bluestore fsck on umount = false\n"
                     f"osd memory target = {1 << 30}\n")
        conf = f"""[global]
fsid = {fsid}
mon host = v1:127.0.0.1:{self.mon_port}
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
{store}osd max object name len = 460
osd max object namespace len = 64
osd class update on start = false
osd crush update on start = false
osd data = {self._p('osd')}
mon data = {self._p('mon')}
keyring = {self._p('keyring')}
run dir = {self._p('run')}
admin socket = {self._p('run', '$name.asok')}
log file = {self._p('log', '$name.log')}
pid file = {self._p('run', '$name.pid')}
log to stderr = false
err to stderr = false
mon cluster log file = {self._p('log', 'cluster.log')}
erasure code dir = /usr/lib/x86_64-linux-gnu/ceph/erasure-code
plugin dir = /usr/lib/x86_64-linux-gnu/ceph
crash dir = {self._p('crash')}
debug ms = 0

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:{self.port} tcp_nodelay=1
rgw dns name = localhost
rgw data = {self._p('rgw')}
rgw thread pool size = 64
rgw gc obj min wait = 60
rgw gc processor period = 60
rgw lc debug interval = 10
{extra}"""
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self):
        why = available()
        if why:
            raise RgwError(f"rgw fixture: {why}")
        os.makedirs(self.dir, exist_ok=True)
        for d in ("mon", "osd", "run", "log", "rgw", "crash"):
            os.makedirs(self._p(d), exist_ok=True)
        self._write_conf()
        kr = self._p("keyring")
        self._run(["ceph-authtool", "--create-keyring", kr, "--gen-key", "-n", "mon.",
                   "--cap", "mon", "allow *"])
        self._run(["ceph-authtool", kr, "--gen-key", "-n", "client.admin", "--cap", "mon",
                   "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *",
                   "--cap", "mgr", "allow *"])
        monmap = self._p("monmap")
        self._run(["monmaptool", "--create", "--clobber", "--fsid", self.fsid, "--addv", "a",
                   f"[v1:127.0.0.1:{self.mon_port}]", monmap])
        self._run(["ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", monmap,
                   "--keyring", kr])
        mon = self._spawn("mon.a", ["ceph-mon", "-c", self.conf, "-f", "-i", "a"])
        self._wait("monitor quorum",
                   lambda: self._ceph("mon", "stat", check=False, timeout=40)[0] == 0, proc=mon)

        osd_uuid = str(uuid.uuid4())
        # Right after the quorum the monitor now and then refuses a command ("problem
        # getting command descriptions": it saw a zero fsid); it takes the next one.
        for attempt in range(3):
            rc, out = self._ceph("osd", "new", osd_uuid, "0", check=attempt == 2)
            if rc == 0:
                break
            time.sleep(2)
        # Placed in the CRUSH map here, not by the OSD as it starts: its own
        # registration races with its monitor session now and then (the
        # monitor answers "wrong fsid" and the OSD exits), so it is switched
        # off in ceph.conf (osd crush/class update on start).
        self._ceph("osd", "crush", "add", "osd.0", "1.0", "root=default", "host=localhost")
        self._run(["ceph-osd", "-c", self.conf, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid],
                  timeout=180)
        def osd_up():
            rc, out = self._ceph("osd", "stat", "-f", "json", check=False, timeout=40)
            if rc != 0:
                return False
            try:
                return json.loads(out[out.index("{"):]).get("num_up_osds", 0) >= 1
            except ValueError:
                return False
        # Should it still exit early, a second or third start usually works.
        for attempt in range(3):
            osd = self._spawn("osd.0", ["ceph-osd", "-c", self.conf, "-f", "-i", "0"])
            deadline = time.time() + self.timeout
            while time.time() < deadline and osd.poll() is None and not osd_up():
                time.sleep(0.5)
            if osd.poll() is None and osd_up():
                break
            if osd.poll() is None or attempt == 2:
                self._wait("the OSD coming up", osd_up, timeout=1, proc=osd)
            self.procs.remove(("osd.0", osd, self._p("log", "osd.0.log")))
            time.sleep(2)

        gw = self._spawn("client.rgw.a", ["radosgw", "-c", self.conf, "-f", "-n",
                                          "client.rgw.a"])

        def http_up():
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=5):
                    return True
            except urllib.error.HTTPError:
                return True  # any HTTP answer means the gateway serves
            except OSError:
                return False
        self._wait(f"radosgw answering HTTP on {self.endpoint}", http_up, proc=gw)
        self.create_user(USER, self.access_key, self.secret_key)
        return self

    def create_user(self, uid, access_key, secret_key):
        """A user with the given keys (radosgw-admin; ok if it exists with them)."""
        self._run(["radosgw-admin", "-c", self.conf, "-n", "client.admin", "user", "create",
                   f"--uid={uid}", f"--display-name={uid}", f"--access-key={access_key}",
                   f"--secret={secret_key}"], timeout=120)

    def gc(self, timeout=600):
        """Reclaim deleted and overwritten objects now (`radosgw-admin gc process
        --include-all`): RGW otherwise frees their RADOS objects hours later
        (here: after `rgw gc obj min wait`), and a bluestore file or memstore
        keeps their bytes until then."""
        self._run(["radosgw-admin", "-c", self.conf, "-n", "client.admin", "gc", "process",
                   "--include-all"], timeout=timeout)

    def osd_bytes(self):
        """Bytes the OSD holds on disk (bluestore: the block file's allocated
        blocks; memstore: 0)."""
        try:
            return os.stat(self._p("osd", "block")).st_blocks * 512
        except OSError:
            return 0

    def stop(self):
        """Stop the daemons by PID in reverse order (SIGTERM, then SIGKILL), then
        remove the work folder. Safe to call twice."""
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def boto3(self, **kw):
        import boto3
        from botocore.config import Config
        cfg = kw.pop("config", None) or Config(s3={"addressing_style": "path"},
                                               retries={"max_attempts": 2})
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region,
                            config=cfg, **kw)


if __name__ == "__main__":
    # Manual use: python3 tests/integration/rgw.py DIR  -> runs until Ctrl-C.
    import sys
    r = Rgw(sys.argv[1] if len(sys.argv) > 1 else "/tmp/rgw-manual")
    t0 = time.time()
    r.start()
    print(f"rgw up in {time.time() - t0:.1f}s: {r.endpoint} access={r.access_key} "
          f"secret={r.secret_key}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        r.stop()
