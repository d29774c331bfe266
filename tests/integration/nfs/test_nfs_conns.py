# SPDX-License-Identifier: Apache-2.0
"""NFS connections against a real s3nfsd: running out of file descriptors,
the connection cap (nfs_max_conns) and the idle timeout (nfs_idle_timeout_s).

Out of descriptors, accept(2) fails at once for as long as it lasts; a
listener that retries at once spins a loop thread and writes a log line per
try (millions in a minute). These tests check that the listeners pause, that
the log stays small, and that S3 and NFS answer again once descriptors are
free; that connections over the cap are closed at once while the others and
S3 keep working; and that an idle connection is closed and a libnfs client
holding handles reconnects transparently.
"""
import os
import resource
import socket
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rpc3  # noqa: E402
from rpc3 import RpcConn  # noqa: E402
from test_nfs import nfs3_client, run_hold  # noqa: E402,F401 - nfs3_client: session fixture


def log_lines(d, start=0):
    with open(d.log_path, "rb") as f:
        f.seek(start)
        return f.read().decode(errors="replace").splitlines()


def log_size(d):
    return os.path.getsize(d.log_path)


def wait_until(pred, what, timeout=60, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


def null_call(port):
    """One NFS NULL call on a new connection. @return True when answered."""
    try:
        c = RpcConn(port, timeout=5)
    except OSError:
        return False
    try:
        r = c.call(rpc3.NFS_PROG, 3, rpc3.NULL)
        return r.accepted and r.accept_stat == rpc3.SUCCESS
    except OSError:
        return False
    finally:
        c.close()


def s3_answers(d):
    try:
        return d.boto3().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False


def established(port):
    """Server-side ESTABLISHED TCP connections on local port @p port (IPv4)."""
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
                n += 1
    return n


def metric(d, op):
    import urllib.request
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith("s3nfs_ops_total{") and 'proto="nfs"' in line and \
                f'op="{op}"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_fd_exhaustion_pauses_listener_and_recovers(daemon_factory):
    d = daemon_factory().start()
    pid = d.proc.pid
    base = len(os.listdir(f"/proc/{pid}/fd"))
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    limit = base + 40
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
    mark = log_size(d)
    clients = []
    try:
        # Many more connections than the daemon has descriptors left: the
        # kernel completes them all (backlog), the daemon accepts ~40.
        for _ in range(200):
            clients.append(socket.create_connection(("127.0.0.1", d.nfs_port), timeout=10))
        wait_until(lambda: any("accept failed" in ln for ln in log_lines(d, mark)),
                   "the first accept failure in the log")
        time.sleep(3)  # out of descriptors for a while
        assert d.proc.poll() is None, d.tail()
        new = log_lines(d, mark)
        failed = [ln for ln in new if "accept failed" in ln]
        # A spinning listener writes hundreds of thousands of lines here; a
        # pausing one about 10 a second, at most 5 of them logged.
        assert len(new) < 200, f"{len(new)} log lines:\n" + "\n".join(new[:20])
        assert failed and "NFS listener" in failed[0] and "Too many open files" in failed[0]
        assert "open file limit" in failed[0]
    finally:
        for c in clients:
            c.close()
    # Descriptors free again: both protocols answer.
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    wait_until(lambda: null_call(d.nfs_port), "an NFS NULL call answered")
    wait_until(lambda: s3_answers(d), "S3 ListBuckets answered")
    c = RpcConn(d.nfs_port)
    st, res = c.mnt("/")
    assert st == 0
    assert c.getattr(res[0])[0] == rpc3.NFS3_OK
    c.close()


def test_connection_cap(daemon_factory):
    d = daemon_factory(extra_args=["--set", "nfs_max_conns=4"]).start()
    held = [RpcConn(d.nfs_port) for _ in range(4)]
    for c in held:
        r = c.call(rpc3.NFS_PROG, 3, rpc3.NULL)
        assert r.accept_stat == rpc3.SUCCESS
    mark = log_size(d)
    # Over the cap: accepted and closed at once, never served.
    for _ in range(20):
        extra = RpcConn(d.nfs_port, timeout=30)
        with pytest.raises((ConnectionError, OSError)):
            extra.call(rpc3.NFS_PROG, 3, rpc3.NULL)
        extra.close()
    refused = [ln for ln in log_lines(d, mark) if "refused" in ln]
    assert refused and "4 connections open (nfs_max_conns)" in refused[0], refused
    assert len(refused) <= 20
    assert metric(d, "ConnRefused") == 20
    # The connections within the cap, and S3, keep working.
    for c in held:
        assert c.call(rpc3.NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    assert s3_answers(d)
    # One closes: a new connection is served again (once the daemon saw the close).
    held.pop().close()
    wait_until(lambda: null_call(d.nfs_port), "a connection within the cap again")
    for c in held:
        c.close()


def test_idle_timeout_closes_and_libnfs_reconnects(daemon_factory, nfs3_client):  # noqa: F811
    d = daemon_factory(extra_args=["--set", "nfs_idle_timeout_s=1"]).start()
    # A raw connection that goes quiet is closed by the server.
    c = RpcConn(d.nfs_port, timeout=60)
    assert c.call(rpc3.NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    try:
        data = c.sock.recv(4)
    except ConnectionResetError:
        data = b""
    assert data == b""
    c.close()
    assert metric(d, "ConnIdleClosed") >= 1
    # A libnfs client holding handles: its connection is closed while it
    # waits; its next calls reconnect and the handles still work.
    rest = run_hold(nfs3_client, d, lambda: wait_until(
        lambda: established(d.nfs_port) == 0, "the server to close the idle libnfs connection"))
    assert "ok READ with a pre-restart handle" in rest
    assert "ok GETATTR directory with a pre-restart handle" in rest
