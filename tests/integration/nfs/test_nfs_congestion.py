# SPDX-License-Identifier: Apache-2.0
"""nfs_loopback_congestion: the TCP congestion control of NFS connections from
a loopback address, seen on the server's socket with `ss -ti` (issue 17: bbr's
pacing made 1 MiB READ replies 2-4 times slower when the client shares the
server's CPU; docs/benchmarks.md).
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rpc3  # noqa: E402
from rpc3 import RpcConn  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("ss"), reason="needs ss (iproute2)")


def system_cc():
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def server_cc(port):
    """Congestion control of the server's side of the one NFS connection on
    @p port, as ss prints it (the word before wscale/rto in its info line)."""
    out = subprocess.run(["ss", "-tin", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    names = re.findall(r"\b([a-z0-9_-]+)\s+wscale:", out)
    assert len(names) == 1, out
    return names[0]


def cc_of_connection(d):
    c = RpcConn(d.nfs_port, timeout=5)
    try:
        r = c.call(rpc3.NFS_PROG, 3, rpc3.NULL)
        assert r.accepted and r.accept_stat == rpc3.SUCCESS
        return server_cc(d.nfs_port)
    finally:
        c.close()


def test_default_is_reno_on_loopback(daemon_factory):
    d = daemon_factory().start()
    try:
        assert cc_of_connection(d) == "reno"
    finally:
        d.stop()


def test_empty_keeps_the_systems(daemon_factory):
    d = daemon_factory(extra_args=["--set", "nfs_loopback_congestion="]).start()
    try:
        assert cc_of_connection(d) == system_cc()
    finally:
        d.stop()


def test_other_name_applied(daemon_factory):
    want = "cubic" if system_cc() != "cubic" else "reno"
    d = daemon_factory(extra_args=["--set", f"nfs_loopback_congestion={want}"])
    try:
        d.start()
    except RuntimeError as e:
        if "refused" in str(e):
            pytest.skip(f"{want} not available or allowed here")
        raise
    try:
        assert cc_of_connection(d) == want
    finally:
        d.stop()


def test_unknown_name_fails_start(daemon_factory):
    d = daemon_factory(extra_args=["--set", "nfs_loopback_congestion=nosuchcc"])
    with pytest.raises(RuntimeError) as e:
        d.start(timeout=15)
    assert 'TCP congestion control "nosuchcc" refused' in str(e.value) + d.tail()


def test_bad_name_rejected_by_config(daemon_factory):
    d = daemon_factory(extra_args=["--set", "nfs_loopback_congestion=Reno!"])
    with pytest.raises(RuntimeError) as e:
        d.start(timeout=15)
    assert "a TCP congestion control is" in str(e.value) + d.tail()
