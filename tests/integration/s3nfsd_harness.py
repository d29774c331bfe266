# SPDX-License-Identifier: Apache-2.0
"""The s3nfsd test harness: a real s3nfsd on loopback ports it picks itself.

Imported by conftest.py (the fixtures) and by tests that need BIN/CTL or a
Daemon of their own: `from s3nfsd_harness import BIN, Daemon`.

`s3nfsd` (function scope) and `s3nfsd_module` (module scope) start the daemon
from $S3NFSD_BIN (default: build/s3nfsd) in a fresh temp data dir with known
bootstrap credentials, wait for /healthz on the admin listener, and stop it by
PID (SIGTERM, then SIGKILL) afterwards. The object they yield has
s3_endpoint, access_key, secret_key, nfs_port, admin_endpoint, admin_token,
data_dir, log_path, and restart()/stop()/start() methods.
"""
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("S3NFSD_BIN", os.path.join(TOP, "build", "s3nfsd"))
CTL = os.environ.get("S3NFSCTL_BIN", os.path.join(TOP, "build", "s3nfsctl"))

ACCESS_KEY = "S3NFSTESTACCESSKEY01"
SECRET_KEY = "s3nfs/test/secret/key/0123456789abcdefghij"
ADMIN_TOKEN = "s3nfs-test-admin-token-0123456789"


_given_ports = set()


def free_port():
    """A loopback TCP port nobody listens on now, and never one this process
    handed out before: the kernel may give a port just closed again at once,
    and a daemon's three listeners (or a daemon and its remote) must differ."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port
    raise RuntimeError("no free loopback port left")


class Daemon:
    def __init__(self, tmpdir, extra_args=None, env=None):
        self.data_dir = os.path.join(tmpdir, "data")
        self.log_path = os.path.join(tmpdir, "s3nfsd.log")
        self.s3_port = free_port()
        self.nfs_port = free_port()
        self.admin_port = free_port()
        self.s3_endpoint = f"http://127.0.0.1:{self.s3_port}"
        # admin_tls_cert=... among the arguments: the admin listener speaks HTTPS.
        self.admin_tls = any("admin_tls_cert=" in a for a in (extra_args or []))
        self.admin_endpoint = (f"{'https' if self.admin_tls else 'http'}://127.0.0.1:"
                               f"{self.admin_port}")
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY
        self.admin_token = ADMIN_TOKEN
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.proc = None

    @property
    def nfs_url(self):
        p = self.nfs_port
        return f"nfs://127.0.0.1/?version=3&nfsport={p}&mountport={p}"

    def start(self, timeout=30):
        if not os.access(BIN, os.X_OK):
            pytest.fail(f"s3nfsd binary not found at {BIN} (build first or set S3NFSD_BIN)")
        env = dict(os.environ)
        env.update({"S3NFS_ACCESS_KEY": self.access_key, "S3NFS_SECRET_KEY": self.secret_key,
                    "S3NFS_ADMIN_TOKEN": self.admin_token})
        env.update(self.env)
        args = [BIN, "--foreground", "--data-dir", self.data_dir,
                "--s3-listen", f"127.0.0.1:{self.s3_port}",
                "--nfs-listen", f"127.0.0.1:{self.nfs_port}",
                "--admin-listen", f"127.0.0.1:{self.admin_port}",
                # tests run many daemons: keep each preallocated data file small
                "--set", f"data_file_size={os.environ.get('S3NFS_TEST_DATA_FILE_SIZE', '2GiB')}",
                ] + self.extra_args
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"s3nfsd exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                ctx = ssl._create_unverified_context() if self.admin_tls else None
                with urllib.request.urlopen(self.admin_endpoint + "/healthz", timeout=1,
                                            context=ctx) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"s3nfsd not healthy within {timeout}s:\n{self.tail()}")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        self.log.close()
        return rc

    def cleanup(self):
        """Stop and remove the data folder (keeps the log for post-mortems)."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self):
        return self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def tail(self, n=60):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def boto3(self, service="s3", **kw):
        import boto3
        from botocore.config import Config
        cfg = kw.pop("config", None) or Config(s3={"addressing_style": "path"},
                                               retries={"max_attempts": 1})
        return boto3.client(service, endpoint_url=self.s3_endpoint,
                            aws_access_key_id=kw.pop("access_key", self.access_key),
                            aws_secret_access_key=kw.pop("secret_key", self.secret_key),
                            region_name="us-east-1", config=cfg, **kw)
