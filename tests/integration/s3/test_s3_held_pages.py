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
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from s3util import read_response, signed_request  # noqa: E402


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
        socks = []
        for _ in range(2):
            # a receive buffer that holds the whole body: the server's send ends,
            # its read token goes, and the bytes wait in this socket, unread
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            s.connect((host, int(port)))
            s.sendall(signed_request(d, "GET", "/heldpages/big")[0])
            socks.append(s)
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
