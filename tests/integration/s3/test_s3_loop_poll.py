# SPDX-License-Identifier: Apache-2.0
"""s3_loop_poll_us: after answering, the event-loop thread of an S3 connection
that is its loop's only one waits, running, for the next request and reads it
without sleeping (s3nfs_s3_loop_poll_hits_total). The answers are the same; the
idle timeout, a request that arrives in pieces and a client that closes keep
working; 0 turns it off. (No polling either while the machine has more runnable
threads than CPUs, or once another thread wants the loop's CPU: s3_conn.c.)"""
import os
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from s3util import connect, read_response, signed_request  # noqa: E402


def metric(d, name):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    raise AssertionError(f"{name} not in /metrics")


def machine_busy():
    """More runnable threads than CPUs now (s3_conn.c's machine_busy)."""
    with open("/proc/loadavg") as f:
        running = int(f.read().split()[3].split("/")[0])
    return running > os.cpu_count()


def one(s, d, method, path, body=b""):
    s.sendall(signed_request(d, method, path, body=body)[0])
    return read_response(s)


def setup_objects(d):
    """A bucket and two objects, through a connection closed afterwards (so the
    test's connection is the only one on its loop)."""
    data = os.urandom(4096)
    s = connect(d)
    assert one(s, d, "PUT", "/pollb")[0] == 200
    assert one(s, d, "PUT", "/pollb/small", data)[0] == 200
    assert one(s, d, "PUT", "/pollb/empty")[0] == 200
    s.close()
    time.sleep(0.2)  # the server sees the close before the counted connection comes
    return data


def test_polling_for_the_next_request(daemon_factory):
    d = daemon_factory(extra_args=["--set", "s3_loop_poll_us=1000",
                                   "--set", "s3_idle_timeout_s=2"]).start()
    data = setup_objects(d)
    s = connect(d)
    before = metric(d, "s3nfs_s3_loop_poll_hits_total")
    for i in range(60):
        st, h, body = one(s, d, "GET", "/pollb/small")
        assert st == 200 and body == data
        st, h, body = one(s, d, "GET", "/pollb/missing")
        assert st == 404 and b"NoSuchKey" in body
        st, h, body = one(s, d, "PUT", f"/pollb/k{i % 4}", data[:i + 1])
        assert st == 200
    # no polling while the machine has more runnable threads than CPUs, nor
    # once another thread wants the loop's CPU: go on for a while until some
    # request was found by polling
    t0 = time.time()
    samples = busy = 0
    while metric(d, "s3nfs_s3_loop_poll_hits_total") == before and time.time() - t0 < 20:
        for _ in range(50):
            st, h, body = one(s, d, "GET", "/pollb/small")
            assert st == 200 and body == data
        samples += 1
        busy += machine_busy()
    if metric(d, "s3nfs_s3_loop_poll_hits_total") == before and busy * 2 > samples:
        pytest.skip(f"the machine had more runnable threads than CPUs ({busy} of {samples} "
                    "looks): no polling")
    assert metric(d, "s3nfs_s3_loop_poll_hits_total") - before > 0, \
        "requests sent right after an answer were found by polling"
    # a request that arrives in two pieces (the first while the loop polls)
    raw = signed_request(d, "GET", "/pollb/small")[0]
    s.sendall(raw[:20])
    time.sleep(0.01)
    s.sendall(raw[20:])
    st, h, body = read_response(s)
    assert st == 200 and body == data
    # requests that keep coming (by polling) for longer than the idle timeout:
    # the connection stays open
    t0 = time.time()
    while time.time() - t0 < 3:
        st, h, body = one(s, d, "GET", "/pollb/empty")
        assert st == 200 and body == b""
    # then idle: closed by the idle timeout as ever
    s.settimeout(30)
    t0 = time.time()
    try:
        got = s.recv(4096)
    except ConnectionResetError:
        got = b""
    assert got == b"" and time.time() - t0 < 15
    s.close()
    # a client that closes while the loop polls: the next connection works
    s = connect(d)
    assert one(s, d, "GET", "/pollb/small")[0] == 200
    s.close()
    s = connect(d)
    st, h, body = one(s, d, "GET", "/pollb/small")
    assert st == 200 and body == data
    s.close()


def test_no_polling_when_off(daemon_factory):
    d = daemon_factory(extra_args=["--set", "s3_loop_poll_us=0"]).start()
    data = setup_objects(d)
    s = connect(d)
    for _ in range(30):
        st, h, body = one(s, d, "GET", "/pollb/small")
        assert st == 200 and body == data
    s.close()
    assert metric(d, "s3nfs_s3_loop_poll_hits_total") == 0
