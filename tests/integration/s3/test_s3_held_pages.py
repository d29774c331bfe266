# SPDX-License-Identifier: Apache-2.0
"""A GET body queued in a client's socket keeps its bytes while the object is
deleted and its space reused. The body is sent with sendfile: the socket
references the page-cache pages after the server let go of them, so a write
through the page cache into the reused space once changed bytes already on
their way (a large folio a new extent covers only in part is zeroed and filled
in place), and the client received a body of the right length whose MD5 was
not its ETag (docs/architecture.md, data path)."""
import hashlib
import os
import random
import re
import socket
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from s3util import read_response, signed_request  # noqa: E402


def unread_gets(d, host, port, path, n=2):
    """@p n sockets, each with a GET of @p path sent and nothing read: a receive
    buffer that holds the whole body, so the server's send ends, its read token
    goes, and the bytes wait in the socket, unread."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        s.connect((host, int(port)))
        s.sendall(signed_request(d, "GET", path)[0])
        socks.append(s)
    return socks


def test_queued_get_body_survives_reuse_of_its_space(s3nfsd):
    d = s3nfsd
    s3 = d.boto3()
    s3.create_bucket(Bucket="heldpages")
    host, port = d.s3_endpoint.split("//", 1)[1].rsplit(":", 1)
    rnd = random.Random(1)
    bad = []
    for it in range(8):
        body = rnd.randbytes(rnd.choice([1 << 20, 3 << 20]))
        s3.put_object(Bucket="heldpages", Key="big", Body=body)
        socks = unread_gets(d, host, port, "/heldpages/big")
        time.sleep(0.3)
        s3.delete_object(Bucket="heldpages", Key="big")
        for i in range(30):  # small objects that reuse the freed space
            s3.put_object(Bucket="heldpages", Key=f"s{i}",
                          Body=rnd.randbytes(rnd.choice([100, 5000, 300000])))
        for s in socks:
            s.settimeout(20)
            status, h, data = read_response(s)
            s.close()
            assert status == 200
            assert len(data) == len(body)
            if h["etag"].strip('"') != hashlib.md5(data).hexdigest() or data != body:
                bad.append((it, len(data), sum(1 for a, b in zip(data, body) if a != b)))
    assert not bad, f"(iteration, length, bytes changed): {bad}"


def store_counters(d):
    """The store's write counters from /metrics: {path: n} plus 'freed_dropped'."""
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {"freed_dropped": 0}
    for line in text.splitlines():
        m = re.match(r's3nfs_store_writes_total\{path="(\w+)"\} (\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
        elif line.startswith("s3nfs_store_freed_dropped_total "):
            out["freed_dropped"] = int(line.split()[1])
    return out


def delta(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def test_reused_space_is_written_cached_again_unless_held(daemon_factory):
    """A 64 MiB store filled to 1 MiB short of full, so that a 3 MiB object
    written after a 3 MiB one was deleted lands mostly in the deleted one's
    space. Nothing holds the old pages: the new object's extents are written
    through the page cache (its first read is served from memory), none
    O_DIRECT; the old extents' pages were dropped before the space was reused
    (issue 17; before, the verified-extent mapping kept them cached and every
    such write went O_DIRECT). Then the same with the deleted object's body
    waiting unread in two clients' sockets: the writes over those pages go
    O_DIRECT and the bodies arrive unchanged."""
    d = daemon_factory(["--set", "data_file_size=64MiB", "--set", "data_file_initial=64MiB"])
    d.start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="reuse")
    rnd = random.Random(2)
    s3.put_object(Bucket="reuse", Key="fill", Body=rnd.randbytes(60 << 20))
    a = rnd.randbytes(3 << 20)
    s3.put_object(Bucket="reuse", Key="a", Body=a)
    assert s3.get_object(Bucket="reuse", Key="a")["Body"].read() == a
    before = store_counters(d)
    s3.delete_object(Bucket="reuse", Key="a")
    b = rnd.randbytes(3 << 20)
    s3.put_object(Bucket="reuse", Key="b", Body=b)
    got = delta(store_counters(d), before)
    assert got["direct"] == 0, got
    assert got["cached"] >= 3, got
    assert got["freed_dropped"] >= 2, got
    assert s3.get_object(Bucket="reuse", Key="b")["Body"].read() == b

    host, port = d.s3_endpoint.split("//", 1)[1].rsplit(":", 1)
    socks = unread_gets(d, host, port, "/reuse/b")
    time.sleep(0.3)  # the bodies are in the sockets, the server's sends are over
    before = store_counters(d)
    s3.delete_object(Bucket="reuse", Key="b")
    c = rnd.randbytes(3 << 20)
    s3.put_object(Bucket="reuse", Key="c", Body=c)
    got = delta(store_counters(d), before)
    for s in socks:
        s.settimeout(20)
        status, h, data = read_response(s)
        s.close()
        assert status == 200
        assert data == b, "a body waiting in a socket changed"
        assert h["etag"].strip('"') == hashlib.md5(data).hexdigest()
    assert got["direct"] >= 2, got  # over b's held pages
    assert s3.get_object(Bucket="reuse", Key="c")["Body"].read() == c
