# SPDX-License-Identifier: Apache-2.0
"""WRITE of a whole small file (nfs/nfs3_write.c): an UNSTABLE write that
gives an empty file all its content, 4 KiB at most, is made durable at once
and answered FILE_SYNC, so the client sends no COMMIT; every other UNSTABLE
write stays UNSTABLE. Checked through kill -9."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from rpc3 import RpcConn  # noqa: E402

UNSTABLE, FILE_SYNC = 0, 2


def test_whole_small_file_write_is_durable_without_commit(nfsd):
    c = RpcConn(nfsd.nfs_port)
    _, bfh = c.new_bucket()
    body = {n: os.urandom(n) for n in (1, 3000, 4096)}
    fhs = {}
    for n, data in body.items():
        st, fh = c.create(bfh, f"small-{n}")
        st, w = c.write(fh, 0, data, stable=UNSTABLE)
        assert st == 0 and w["count"] == n and w["committed"] == FILE_SYNC, n
        fhs[n] = fh
    # Not a whole small file: too large, not at offset 0, or a file with content.
    st, big = c.create(bfh, "big")
    assert c.write(big, 0, b"b" * 4097, stable=UNSTABLE)[1]["committed"] == UNSTABLE
    st, off = c.create(bfh, "off")
    assert c.write(off, 10, b"o" * 100, stable=UNSTABLE)[1]["committed"] == UNSTABLE
    assert c.write(fhs[3000], 3000, b"t" * 10, stable=UNSTABLE)[1]["committed"] == UNSTABLE
    assert c.write(fhs[1], 0, b"z", stable=UNSTABLE)[1]["committed"] == UNSTABLE
    c.close()
    # No COMMIT was sent: the FILE_SYNC ones survive kill -9.
    nfsd.kill()
    nfsd.start()
    c = RpcConn(nfsd.nfs_port)
    for n in (3000, 4096):
        st, (data, eof, got) = c.read(fhs[n], 0, 1 << 16)
        assert st == 0 and eof and data == body[n], n
    st, (data, eof, got) = c.read(fhs[1], 0, 16)
    assert st == 0 and got == 1  # its own 1 byte, or the uncommitted overwrite's
    c.close()
