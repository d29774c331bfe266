# SPDX-License-Identifier: Apache-2.0
"""Event-loop threads and CPUs (loop_cpu_affinity).

With loop_cpu_affinity, loop thread i ("loopI" in /proc/PID/task/*/comm) may
run only on the i-th CPU the daemon may run on, and a new NFS or S3
connection is given to the loop of the CPU its packets arrive on (on
loopback: the CPU of the client that sent them). Without it the loops may run
anywhere and take connections in turn. The /metrics gauge s3nfs_loop_conns
tells which loop holds the connections.
"""
import os
import shutil
import socket
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import rpc3  # noqa: E402
from rpc3 import RpcConn  # noqa: E402

CPUS = sorted(os.sched_getaffinity(0))


def loop_tasks(pid):
    """{loop index: Cpus_allowed_list} of the daemon's loop threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            if not comm.startswith("loop") or not comm[4:].isdigit():
                continue
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("Cpus_allowed_list:"):
                        out[int(comm[4:])] = line.split(":", 1)[1].strip()
        except FileNotFoundError:
            pass
    return out


def cpu_list(cpus):
    return ",".join(str(c) for c in cpus)


def loop_conns(d):
    """{loop index: open connections} from /metrics."""
    out = {}
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('s3nfs_loop_conns{loop="'):
                i = int(line.split('"')[1])
                out[i] = int(float(line.split()[1]))
    return out


def wait_conns(d, want, timeout=10):
    deadline = time.time() + timeout
    while True:
        got = loop_conns(d)
        if got == want or time.time() > deadline:
            return got
        time.sleep(0.05)


def connect_from(cpu, port, nfs):
    """A connection opened and used by this thread while it runs on @p cpu only."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        if nfs:
            c = RpcConn(port, timeout=10)
            r = c.call(rpc3.NFS_PROG, 3, rpc3.NULL)
            assert r.accepted and r.accept_stat == rpc3.SUCCESS
            return c.sock
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /minio/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1")
        return s
    finally:
        os.sched_setaffinity(0, old)


def start(daemon_factory, affinity):
    return daemon_factory(extra_args=["--set", "loop_threads=2", "--set",
                                      f"loop_cpu_affinity={'true' if affinity else 'false'}"
                                      ]).start()


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs")
def test_affinity_pins_loops_and_places_connections(daemon_factory):
    d = start(daemon_factory, True)
    try:
        assert loop_tasks(d.proc.pid) == {0: str(CPUS[0]), 1: str(CPUS[1])}
        assert wait_conns(d, {0: 0, 1: 0}) == {0: 0, 1: 0}
        socks = []
        # loop 1 is CPU 1's: NFS and S3 connections sent from CPU 1 go there
        socks.append(connect_from(CPUS[1], d.nfs_port, nfs=True))
        assert wait_conns(d, {0: 0, 1: 1}) == {0: 0, 1: 1}
        socks.append(connect_from(CPUS[1], d.s3_port, nfs=False))
        assert wait_conns(d, {0: 0, 1: 2}) == {0: 0, 1: 2}
        socks.append(connect_from(CPUS[0], d.nfs_port, nfs=True))
        assert wait_conns(d, {0: 1, 1: 2}) == {0: 1, 1: 2}
        # past 4 more open connections than loop 0, CPU 1's loop gives the next away
        for _ in range(3):
            socks.append(connect_from(CPUS[1], d.nfs_port, nfs=True))
        assert wait_conns(d, {0: 1, 1: 5}) == {0: 1, 1: 5}
        socks.append(connect_from(CPUS[1], d.nfs_port, nfs=True))
        assert wait_conns(d, {0: 2, 1: 5}) == {0: 2, 1: 5}
        for s in socks:
            s.close()
        assert wait_conns(d, {0: 0, 1: 0}) == {0: 0, 1: 0}
    finally:
        d.stop()
        shutil.rmtree(d.data_dir, ignore_errors=True)


def test_without_affinity_loops_unpinned_round_robin(daemon_factory):
    d = start(daemon_factory, False)
    try:
        tasks = loop_tasks(d.proc.pid)
        assert sorted(tasks) == [0, 1]
        with open(f"/proc/{d.proc.pid}/status") as f:
            whole = [ln.split(":", 1)[1].strip() for ln in f
                     if ln.startswith("Cpus_allowed_list:")][0]
        assert tasks == {0: whole, 1: whole}
        a = connect_from(CPUS[0], d.nfs_port, nfs=True)
        b = connect_from(CPUS[0], d.nfs_port, nfs=True)
        assert wait_conns(d, {0: 1, 1: 1}) == {0: 1, 1: 1}
        a.close()
        b.close()
        assert wait_conns(d, {0: 0, 1: 0}) == {0: 0, 1: 0}
    finally:
        d.stop()
        shutil.rmtree(d.data_dir, ignore_errors=True)
