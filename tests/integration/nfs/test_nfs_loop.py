# SPDX-License-Identifier: Apache-2.0
"""GETATTR, LOOKUP, ACCESS, READ, READDIR(PLUS), FSINFO and PATHCONF answered on the
event-loop thread (nfs_loop_answers).

The loop answers must be the worker's answers byte for byte, and must never be
stale: every change, through NFS or S3, shows in the next call at once. The
/metrics counter s3nfs_nfs_loop_answers_total tells which path answered.
"""
import os
import shutil
import socket
import struct
import sys
import time
import urllib.request
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import rpc3  # noqa: E402
from rpc3 import Packer, RpcConn, auth_sys  # noqa: E402


@pytest.fixture
def nfsd(daemon_factory):
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB"]).start()
    yield d
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)


def metric(daemon, name):
    with urllib.request.urlopen(daemon.admin_endpoint + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    raise AssertionError(f"{name} not in /metrics")


def root_fh(c):
    st, res = c.mnt("/")
    assert st == 0
    return res[0]


def walk(c, fh, path):
    for part in path.split("/"):
        st, fh = c.lookup(fh, part)
        assert st == 0, f"LOOKUP {part} of {path} -> {st}"
    return fh


def build_tree(c, root):
    """A bucket with a directory, files of several sizes and modes: committed
    state only, so that it is the same after a restart."""
    b = "t" + uuid.uuid4().hex[:12]
    st, bfh = c.mkdir(root, b)
    assert st == 0
    st, dfh = c.mkdir(bfh, "dir", mode=0o750)
    assert st == 0
    files = {}
    for name, size, mode in (("empty", 0, 0o644), ("small", 100, 0o600),
                             ("big", 300000, 0o640)):
        st, fh = c.create(dfh, name, mode=mode)
        assert st == 0
        if size:
            assert c.write(fh, 0, os.urandom(size), stable=2)[0] == 0
        files[name] = fh
    return b, bfh, dfh, files


def calls(root, bfh, dfh, files):
    """(procedure, arguments, credential) of every loop-eligible call to compare:
    hits, misses, permission outcomes, bad and stale handles."""
    stale = bytearray(files["small"])
    stale[-1] ^= 0x55  # the handle's MAC no longer verifies
    out = []
    cred = [auth_sys(0, 0), auth_sys(1000, 1000), auth_sys(2000, 2000, gids=(1000,))]
    for cr in cred:
        for fh in [root, bfh, dfh, bytes(stale), b"short"] + list(files.values()):
            out.append((rpc3.GETATTR, Packer().opaque(fh).bytes(), cr))
            out.append((rpc3.ACCESS, Packer().opaque(fh).u32(0x3f).bytes(), cr))
        for d, name in [(root, "."), (bfh, "dir"), (bfh, ".."), (dfh, "small"), (dfh, "nope"),
                        (dfh, "x" * 300), (files["big"], "x"), (bytes(stale), "small")]:
            out.append((rpc3.LOOKUP, Packer().opaque(d).string(name).bytes(), cr))
        # READs: the first of an extent runs on a worker (it verifies the
        # extent), the later ones on the loop; a directory, a 0600 file
        for fh, off, n in [(files["big"], 0, 300000), (files["big"], 0, 4096),
                           (files["big"], 8192, 100), (files["big"], 299990, 100),
                           (files["big"], 400000, 10), (files["big"], 0, 1 << 20),
                           (files["small"], 0, 4096), (files["empty"], 0, 10), (dfh, 0, 10)]:
            out.append((rpc3.READ, Packer().opaque(fh).u64(off).u32(n).bytes(), cr))
        # directory listings (a whole page, a page too small for one entry, a
        # file, a stale handle) and the file system's constants
        for fh in [root, bfh, dfh, files["big"], bytes(stale)]:
            for count in (8192, 30):
                out.append((rpc3.READDIR, Packer().opaque(fh).u64(0).fopaque(b"\0" * 8)
                            .u32(count).bytes(), cr))
                out.append((rpc3.READDIRPLUS, Packer().opaque(fh).u64(0).fopaque(b"\0" * 8)
                            .u32(count).u32(count * 2).bytes(), cr))
            out.append((rpc3.FSINFO, Packer().opaque(fh).bytes(), cr))
            out.append((rpc3.PATHCONF, Packer().opaque(fh).bytes(), cr))
    return out


def replies(c, todo):
    """Raw reply bytes of each call, without the xid."""
    got = []
    for proc, args, cr in todo:
        r = c.call(rpc3.NFS_PROG, 3, proc, args, cred=cr)
        got.append(r.raw[4:])
    return got


def test_loop_answers_equal_worker_answers(nfsd):
    c = RpcConn(nfsd.nfs_port)
    root = root_fh(c)
    _, bfh, dfh, files = build_tree(c, root)
    todo = calls(root, bfh, dfh, files)
    before = metric(nfsd, "s3nfs_nfs_loop_answers_total")
    on_loop = replies(c, todo)
    answered = metric(nfsd, "s3nfs_nfs_loop_answers_total") - before
    reads = sum(1 for t in todo if t[0] == rpc3.READ)
    assert answered >= len(todo) - reads, "the metadata calls were answered on the loop thread"
    assert answered > len(todo) - reads, "and READs of verified data too"
    assert metric(nfsd, "s3nfs_nfs_loop_retries_total") == 0, "data written through the page " \
        "cache (data_write_cache) is known verified: no READ of it needed a worker"
    c.close()

    # After a restart nothing is known verified: a READ of an extent goes to a
    # worker (which verifies it), with the same answer.
    nfsd.restart()
    c = RpcConn(nfsd.nfs_port)
    assert root_fh(c) == root
    assert replies(c, todo) == on_loop
    assert metric(nfsd, "s3nfs_nfs_loop_retries_total") > 0, "a READ of an unverified extent " \
        "went to a worker"
    c.close()

    nfsd.extra_args += ["--set", "nfs_loop_answers=false"]
    nfsd.restart()
    c = RpcConn(nfsd.nfs_port)
    assert root_fh(c) == root
    on_workers = replies(c, todo)
    assert metric(nfsd, "s3nfs_nfs_loop_answers_total") == 0, "every call ran on a worker"
    c.close()
    assert len(on_loop) == len(on_workers)
    for i, (a, b) in enumerate(zip(on_loop, on_workers)):
        assert a == b, f"call {i} (procedure {todo[i][0]}): loop and worker answers differ"


def test_loop_answers_see_every_change_at_once(nfsd):
    """No call answered on the loop shows state older than the last acknowledged
    change, made over S3 or over NFS."""
    s3 = nfsd.boto3()
    b = "t" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=b)
    c = RpcConn(nfsd.nfs_port)
    root = root_fh(c)
    bfh = walk(c, root, b)
    before = metric(nfsd, "s3nfs_nfs_loop_answers_total")
    for size in (1000, 5000, 70000, 3):
        s3.put_object(Bucket=b, Key="k/obj", Body=os.urandom(size))
        fh = walk(c, bfh, "k/obj")
        st, a = c.getattr(fh)
        assert st == 0 and a["size"] == size, f"S3 PUT of {size} bytes not seen: {a}"
    # NFS writes, unstable (pending in memory) and stable, and a truncate
    st, a0 = c.getattr(fh)
    assert c.write(fh, 100000, b"x" * 10, stable=0)[0] == 0
    st, a = c.getattr(fh)
    assert st == 0 and a["size"] == 100010, "an UNSTABLE write's size shows at once"
    assert a["mtime"] >= a0["mtime"]
    args = Packer().opaque(fh).raw(rpc3.sattr3(size=4096)).u32(0).bytes()
    assert c.nfs(rpc3.SETATTR, args)[0] == 0
    st, a = c.getattr(fh)
    assert st == 0 and a["size"] == 4096
    # permission change over NFS, seen by ACCESS of another user
    args = Packer().opaque(fh).raw(rpc3.sattr3(mode=0o600)).u32(0).bytes()
    assert c.nfs(rpc3.SETATTR, args)[0] == 0
    other = RpcConn(nfsd.nfs_port, cred=auth_sys(2000, 2000))
    st, u = other.nfs(rpc3.ACCESS, Packer().opaque(fh).u32(0x3f).bytes())
    assert st == 0
    u.post_op_attr()
    assert u.u32() & 0x01 == 0, "mode 0600: no READ for another user"
    # READ on the loop after overwrites over NFS and over S3: never old bytes
    data = os.urandom(600000)
    assert c.write(fh, 0, data, stable=2)[0] == 0
    for _ in range(2):  # the first verifies the extents, the second reads them from the loop
        st, (got, eof, n) = c.read(fh, 0, 1 << 20)
        assert st == 0 and got == data
    data = bytes(reversed(data))
    assert c.write(fh, 0, data, stable=0)[0] == 0  # UNSTABLE: pending extents
    for _ in range(2):
        st, (got, eof, n) = c.read(fh, 0, 1 << 20)
        assert st == 0 and got == data
    data = os.urandom(600000)
    s3.put_object(Bucket=b, Key="k/obj", Body=data)
    fh = walk(c, bfh, "k/obj")
    for _ in range(2):
        st, (got, eof, n) = c.read(fh, 0, 1 << 20)
        assert st == 0 and got == data
        st, (got, eof, n) = c.read(fh, 4096, 4096)
        assert st == 0 and got == data[4096:8192]
    # S3 delete: the handle goes stale, the name (and its implicit parent) goes
    s3.delete_object(Bucket=b, Key="k/obj")
    assert c.getattr(fh)[0] == rpc3.NFS3ERR_STALE
    assert c.lookup(bfh, "k")[0] == rpc3.NFS3ERR_NOENT
    assert metric(nfsd, "s3nfs_nfs_loop_answers_total") > before
    other.close()
    c.close()


def write_file(c, fh, data, read_after=0):
    """Write @p data in 1 MiB stable pieces; with @p read_after, READ that many
    bytes of each piece once (its extent verified: later READs run on the loop)."""
    for off in range(0, len(data), 1 << 20):
        assert c.write(fh, off, data[off:off + (1 << 20)], stable=2)[0] == 0
        if read_after:
            c.read(fh, off, read_after)


def tree_file(nfsd, name, data, read_after):
    """File NAME holding DATA in the test tree (written and read back by write_file
    over a connection of its own); returns its handle and the tree's files."""
    c = RpcConn(nfsd.nfs_port)
    _, bfh, _, files = build_tree(c, root_fh(c))
    st, fh = c.create(bfh, name)
    assert st == 0
    write_file(c, fh, data, read_after)
    c.close()
    return fh, files


def small_window_conn(nfsd, rcvbuf):
    """An RPC connection whose receive buffer is @p rcvbuf bytes: the server's
    socket fills quickly when the client does not read."""
    c = RpcConn.__new__(RpcConn)
    c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    c.sock.settimeout(20)
    c.sock.connect(("127.0.0.1", nfsd.nfs_port))
    c.cred, c.xid = auth_sys(), 1
    return c


def test_pipelined_replies_in_order_with_a_slow_reader(nfsd):
    """A reply is written to the socket at once only when nothing of the
    connection waits to be sent (nfs_rpc.c conn_send_reply): with 1 MiB READ
    replies queued behind a client that reads slowly, and GETATTRs arriving
    while the socket has room again but bytes still wait in the output, every
    reply must still arrive whole and in the order of the calls (a direct
    write past queued bytes would cut into a READ's reply)."""
    data = os.urandom(4 << 20)
    # whatever the first READ of an extent costs, paid here
    fh, files = tree_file(nfsd, "pipe", data, 1 << 20)
    c = small_window_conn(nfsd, 8192)
    expect = []  # (xid, READ offset or None)

    def send(proc, args, off=None):
        xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, proc, args)
        c.send_raw(RpcConn.record(msg))
        expect.append((xid, off))

    for off in range(0, len(data), 1 << 20):
        send(rpc3.READ, Packer().opaque(fh).u64(off).u32(1 << 20).bytes(), off)
    time.sleep(0.3)  # the server's socket fills; the rest waits in its output
    got = bytearray()
    for _ in range(60):  # read a little, then a call: its reply finds room in the socket
        got += c.sock.recv(16384)
        send(rpc3.GETATTR, Packer().opaque(files["small"]).bytes())
        time.sleep(0.002)
    for (xid, off), r in zip(expect, read_replies(c.sock, len(expect), bytes(got))):
        assert r.xid == xid, "replies in the order of the calls, each whole"
        assert r.accepted and r.accept_stat == rpc3.SUCCESS
        assert r.body.u32() == 0
        if off is not None:
            r.body.post_op_attr()
            n, _eof = r.body.u32(), r.body.u32()
            assert n == 1 << 20 and r.body.opaque() == data[off:off + (1 << 20)], f"READ at {off}"
    c.close()


def read_replies(sock, n, got=b""):
    """The next @p n reply records from @p sock (after the bytes @p got already
    read), each as an rpc3.Reply."""
    buf = bytearray(got)
    pos = 0

    def take(k):
        nonlocal pos
        while len(buf) - pos < k:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed"
            buf.extend(chunk)
        b = bytes(buf[pos:pos + k])
        pos += k
        return b

    out = []
    for _ in range(n):
        rec = b""
        while True:
            mark, = struct.unpack(">I", take(4))
            rec += take(mark & 0x7fffffff)
            if mark & 0x80000000:
                break
        out.append(rpc3.Reply(rec))
    return out


def test_calls_split_across_reads(nfsd):
    """A read of the socket goes into the loop's scratch buffer and the calls
    are taken from there (nfs_rpc.c conn_read_scratch); what is left of a call
    not read whole is kept for the next read. Calls cut anywhere (in the record
    mark, in the header, in the arguments), several in one read, a fragment
    per read: every one is answered, in order."""
    c = RpcConn(nfsd.nfs_port)
    root = root_fh(c)
    _, _, _, files = build_tree(c, root)
    msgs, xids = [], []
    for i in range(12):
        fh = files["small"] if i % 2 else files["big"]
        xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, rpc3.GETATTR, Packer().opaque(fh).bytes())
        xids.append(xid)
        # every third call in three fragments
        msgs.append(RpcConn.record(msg, frags=3 if i % 3 == 2 else 1))
    stream = b"".join(msgs)
    cuts = sorted({2, 7, len(msgs[0]) + 1, len(msgs[0]) + len(msgs[1]) + 30,
                   len(stream) // 2, len(stream) // 2 + 3, len(stream) - 5})
    last = 0
    for cut in cuts + [len(stream)]:
        c.sock.sendall(stream[last:cut])
        last = cut
        time.sleep(0.05)  # each piece arrives in a read of its own
    got = read_replies(c.sock, len(xids))
    for r, xid in zip(got, xids):
        assert r.xid == xid and r.accepted and r.accept_stat == rpc3.SUCCESS
        assert r.body.u32() == 0, "GETATTR NFS3_OK"
    # and the connection still works for a plain call
    st, _ = c.getattr(files["small"])
    assert st == 0
    c.close()


def test_small_read_replies_cut_by_a_full_socket(nfsd):
    """A reply with the data of a small READ goes out in one writev from the
    loop's scratch buffer (nfs_rpc.c conn_write_now); when the socket takes only
    part of it, the rest is copied into the output before the scratch buffer
    serves the next READ. A client that sends many 16 KiB READs and reads
    nothing until they are all answered must get every reply whole, in order,
    with its own bytes."""
    data = os.urandom(2 << 20)
    fh, _ = tree_file(nfsd, "cut", data, 4096)
    c = small_window_conn(nfsd, 4096)
    expect = []
    sizes = (16384, 16383, 4097, 1)  # unpadded and padded opaque lengths
    # more than the server's socket takes (its send buffer grows to 4 MiB)
    for i in range(800):
        n = sizes[i % len(sizes)]
        off = (i * 20011) % (len(data) - n)
        xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, rpc3.READ,
                                Packer().opaque(fh).u64(off).u32(n).bytes())
        c.send_raw(RpcConn.record(msg))
        expect.append((xid, off, n))
    time.sleep(0.5)  # the socket fills mid-reply; the rest waits in the output
    got = read_replies(c.sock, len(expect))
    for r, (xid, off, n) in zip(got, expect):
        assert r.xid == xid, "replies in the order of the calls, each whole"
        assert r.accepted and r.accept_stat == rpc3.SUCCESS
        assert r.body.u32() == 0
        r.body.post_op_attr()
        cnt, _eof = r.body.u32(), r.body.u32()
        assert cnt == n and r.body.opaque() == data[off:off + n], f"READ of {n} at {off}"
    c.close()


def test_small_reads_of_a_verified_extent_stay_on_the_loop(nfsd):
    """Issue 17 (read_4k): once an extent is verified and its pages stay in the
    page cache, every later READ of it runs on the loop thread, however small
    the READ and however long ago the verification (core_zc.c: remembered for
    as long as its pages stay mapped, no time limit)."""
    c = RpcConn(nfsd.nfs_port)
    root = root_fh(c)
    _, bfh, _, _ = build_tree(c, root)
    st, fh = c.create(bfh, "r4k")
    assert st == 0
    data = os.urandom(3 << 20)
    write_file(c, fh, data)
    c.close()

    # After a restart nothing is known verified. The first small READ of each
    # extent goes to a worker; the worker leaves the (resident) extent known
    # verified, so the next READs of it are answered on the loop.
    nfsd.restart()
    c = RpcConn(nfsd.nfs_port)
    assert root_fh(c) == root
    offs = [0, 1 << 20, 2 << 20]
    for off in offs:
        st, (got, eof, n) = c.read(fh, off + 4096, 4096)
        assert st == 0 and got == data[off + 4096:off + 8192]
    first = metric(nfsd, "s3nfs_nfs_loop_retries_total")
    assert 1 <= first <= len(offs), "the first READ of an unverified extent goes to a worker"
    ans = metric(nfsd, "s3nfs_nfs_loop_answers_total")
    for i in range(30):
        off = offs[i % 3] + (i * 12288) % (1 << 20)
        st, (got, eof, n) = c.read(fh, off, 4096)
        assert st == 0 and got == data[off:off + 4096]
    assert metric(nfsd, "s3nfs_nfs_loop_retries_total") == first, \
        "later 4 KiB READs of the verified extents never went to a worker"
    assert metric(nfsd, "s3nfs_nfs_loop_answers_total") - ans >= 30

    # Verification is remembered beyond the 10 s it once was (ZC_TTL_S).
    time.sleep(11)
    for i in range(6):
        off = offs[i % 3] + 65536 * (i + 1)
        st, (got, eof, n) = c.read(fh, off, 4096)
        assert st == 0 and got == data[off:off + 4096]
    assert metric(nfsd, "s3nfs_nfs_loop_retries_total") == first, \
        "11 s later, READs of the still-resident verified extents stay on the loop"
    c.close()


def test_small_reads_never_send_a_changed_block(nfsd):
    """A small READ on a worker verifies a wholly cached extent whole (and the
    loop then trusts it): a block changed on disk and read back into the page
    cache (resident, never verified) must still never reach a client, and the
    extent's intact blocks are still served (core_read checks block by block)."""
    import glob
    import mmap
    c = RpcConn(nfsd.nfs_port)
    root = root_fh(c)
    _, bfh, _, _ = build_tree(c, root)
    st, fh = c.create(bfh, "rot")
    assert st == 0
    data = os.urandom(3 << 20)
    write_file(c, fh, data)
    for off in range(0, len(data), 65536):  # verified, on the loop after the first
        st, (got, eof, n) = c.read(fh, off, 4096)
        assert st == 0 and got == data[off:off + 4096]
    # change the 4 KiB block at 1 MiB + 64 KiB on disk (O_DIRECT drops the
    # kernel's copy of it, a large folio), then read it and its surroundings
    # back into the page cache as another reader would: the extent is wholly
    # resident again, its changed page unverified
    bad = (1 << 20) + 65536
    pattern = data[bad:bad + 64]
    buf = mmap.mmap(-1, 4096)
    done = 0
    for path in glob.glob(os.path.join(nfsd.data_dir, "data.*")):
        try:
            fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        except OSError:
            continue
        try:
            for off in range(0, 64 << 20, 4096):
                buf.seek(0)
                if os.preadv(fd, [buf], off) != 4096:
                    break
                if buf[:64] == pattern:
                    buf[100] ^= 0xFF
                    assert os.pwritev(fd, [buf], off) == 4096
                    done += 1
                    with open(path, "rb", buffering=0) as f:  # the extent, around it
                        assert os.pread(f.fileno(), 4096, off)[100] == buf[100]
                        os.pread(f.fileno(), 2 << 20, max(0, off - (1 << 20)))
            os.fsync(fd)
        finally:
            os.close(fd)
    if done == 0:
        pytest.skip("no O_DIRECT on this filesystem")
    for _ in range(3):
        st, _res = c.read(fh, bad, 4096)
        assert st == 5, "NFS3ERR_IO: a changed block never reaches the client"
        st, (got, eof, n) = c.read(fh, bad + 16384, 4096)
        assert st == 0 and got == data[bad + 16384:bad + 20480], "intact blocks still served"
        st, (got, eof, n) = c.read(fh, 4096, 4096)
        assert st == 0 and got == data[4096:8192], "other extents unaffected"
    # after a restart nothing is known verified: the whole check of the
    # (wholly cached) extent fails, and its intact blocks are still served
    c.close()
    nfsd.restart()
    c = RpcConn(nfsd.nfs_port)
    assert root_fh(c) == root
    for _ in range(2):
        st, (got, eof, n) = c.read(fh, bad + 16384, 4096)
        assert st == 0 and got == data[bad + 16384:bad + 20480], "intact blocks still served"
        st, _res = c.read(fh, bad, 4096)
        assert st == 5, "NFS3ERR_IO: a changed block never reaches the client"
    c.close()


def batch_metrics(nfsd):
    return (metric(nfsd, "s3nfs_nfs_batched_replies_total"),
            metric(nfsd, "s3nfs_nfs_reply_batch_writes_total"))


def test_pipelined_calls_in_one_segment_answered_in_one_batch(nfsd):
    """Calls sent back to back in one segment are taken in one read pass, and
    the replies made on the loop during the pass leave together (nfs_rpc.c
    batch_add): GETATTRs, small READs (data read into the batch from the page
    cache, padded), a 1 MiB READ (not batched: the batch is written before
    it), a call refused on the loop (PROC_UNAVAIL) and a WRITE run by a
    worker. Every reply arrives whole with its own bytes, and all but the
    worker's in the order of the calls."""
    data = os.urandom(2 << 20)
    c = RpcConn(nfsd.nfs_port)
    _, bfh, _, files = build_tree(c, root_fh(c))
    st, fh = c.create(bfh, "seg")
    assert st == 0
    write_file(c, fh, data, 1 << 20)  # verified: its READs are answered on the loop
    st, wfh = c.create(bfh, "seg-w")
    assert st == 0
    expect, stream = [], []

    def add(proc, args, check):
        xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, proc, args)
        stream.append(RpcConn.record(msg))
        expect.append((xid, check))

    def getattr_ok(r):
        assert r.accepted and r.accept_stat == rpc3.SUCCESS and r.body.u32() == 0

    def read_ok(off, n):
        def check(r):
            assert r.accepted and r.accept_stat == rpc3.SUCCESS and r.body.u32() == 0
            r.body.post_op_attr()
            cnt, _eof = r.body.u32(), r.body.u32()
            assert cnt == n and r.body.opaque() == data[off:off + n], f"READ of {n} at {off}"
        return check

    def unavail(r):
        assert r.accepted and r.accept_stat == rpc3.PROC_UNAVAIL

    for i in range(6):
        add(rpc3.GETATTR, Packer().opaque(files["small" if i % 2 else "big"]).bytes(), getattr_ok)
    for off, n in ((4096, 4096), (12345, 1), (70001, 16383), (1 << 20, 16384)):
        add(rpc3.READ, Packer().opaque(fh).u64(off).u32(n).bytes(), read_ok(off, n))
    add(rpc3.READ, Packer().opaque(fh).u64(0).u32(1 << 20).bytes(), read_ok(0, 1 << 20))
    xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, 22)  # no procedure 22: PROC_UNAVAIL
    stream.append(RpcConn.record(msg))
    expect.append((xid, unavail))
    for i in range(4):
        add(rpc3.GETATTR, Packer().opaque(files["empty"]).bytes(), getattr_ok)
    add(rpc3.READ, Packer().opaque(fh).u64(5).u32(3).bytes(), read_ok(5, 3))
    wxid, msg = c.call_bytes(rpc3.NFS_PROG, 3, rpc3.WRITE, Packer().opaque(wfh).u64(0).u32(5)
                             .u32(2).opaque(b"hello").bytes())
    stream.append(RpcConn.record(msg))
    b0, w0 = batch_metrics(nfsd)
    c.send_raw(b"".join(stream))
    got = {}
    order = []
    for r in read_replies(c.sock, len(expect) + 1):
        got[r.xid] = r
        order.append(r.xid)
    assert wxid in got and got[wxid].body.u32() == 0, "the WRITE, run by a worker, answered"
    order.remove(wxid)
    assert order == [x for x, _ in expect], "loop replies leave in the order of the calls"
    for x, check in expect:
        check(got[x])
    b1, w1 = batch_metrics(nfsd)
    assert b1 - b0 >= 8, "the replies made during the pass were batched"
    assert 1 <= w1 - w0 < b1 - b0, "and written several per write"
    st, (got_w, _eof, _n) = c.read(wfh, 0, 5)
    assert st == 0 and got_w == b"hello"
    c.close()


def test_lone_calls_are_written_at_once(nfsd):
    """A call with nothing behind it in the input (one call in flight) is not
    batched: its reply is written as soon as it is made."""
    c = RpcConn(nfsd.nfs_port)
    _, _, _, files = build_tree(c, root_fh(c))
    b0, w0 = batch_metrics(nfsd)
    for _ in range(20):
        assert c.getattr(files["small"])[0] == 0
    assert batch_metrics(nfsd) == (b0, w0)
    c.close()


def test_batches_larger_than_the_buffer_cut_by_a_full_socket(nfsd):
    """More batched bytes than the batch buffer holds (64 KiB) are written in
    several batches; a socket that takes only part of one keeps the rest in
    the connection's output, behind which later batches queue. Every reply
    whole, in order, with its bytes."""
    data = os.urandom(1 << 20)
    fh, _ = tree_file(nfsd, "big-batch", data, 4096)
    c = small_window_conn(nfsd, 4096)
    expect, stream = [], []
    for i in range(60):
        n = (16384, 9999, 4096)[i % 3]
        off = (i * 7919) % (len(data) - n)
        xid, msg = c.call_bytes(rpc3.NFS_PROG, 3, rpc3.READ,
                                Packer().opaque(fh).u64(off).u32(n).bytes())
        stream.append(RpcConn.record(msg))
        expect.append((xid, off, n))
    b0, w0 = batch_metrics(nfsd)
    c.send_raw(b"".join(stream))
    time.sleep(0.5)  # the socket fills mid-batch; the rest waits in the output
    for r, (xid, off, n) in zip(read_replies(c.sock, len(expect)), expect):
        assert r.xid == xid, "replies in the order of the calls, each whole"
        assert r.accepted and r.accept_stat == rpc3.SUCCESS and r.body.u32() == 0
        r.body.post_op_attr()
        cnt, _eof = r.body.u32(), r.body.u32()
        assert cnt == n and r.body.opaque() == data[off:off + n], f"READ of {n} at {off}"
    b1, w1 = batch_metrics(nfsd)
    assert b1 - b0 >= 30 and w1 - w0 >= 2, (b1 - b0, w1 - w0)
    c.close()


def test_polling_for_the_next_call(daemon_factory):
    """nfs_loop_poll_us: after answering, the loop thread of a connection that is
    its loop's only one waits, running, for the next call and reads it without
    sleeping (s3nfs_nfs_loop_poll_hits_total). The answers are the same; 0 turns
    it off (no hits: test_no_polling_when_off); the connection still reports its client's close, and the
    idle timeout is kept while calls come by polling."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB",
                                   "--set", "nfs_loop_poll_us=1000",
                                   "--set", "nfs_idle_timeout_s=2"]).start()
    try:
        c = RpcConn(d.nfs_port)
        root = root_fh(c)
        _, bfh, dfh, files = build_tree(c, root)
        data = os.urandom(1 << 20)
        st, fh = c.create(bfh, "poll")
        assert st == 0
        write_file(c, fh, data, 4096)
        c.close()
        c = RpcConn(d.nfs_port)  # alone on its loop (the others are closed)
        time.sleep(0.2)
        before = metric(d, "s3nfs_nfs_loop_poll_hits_total")
        for i in range(60):
            st, a = c.getattr(files["big"])
            assert st == 0 and a["size"] == 300000
            off = (i * 4096) % len(data)
            st, (got, _eof, _n) = c.read(fh, off, 4096)
            assert st == 0 and got == data[off:off + 4096]
            assert c.lookup(dfh, "small")[0] == 0
        assert metric(d, "s3nfs_nfs_loop_poll_hits_total") - before > 0, \
            "calls sent right after a reply were found by polling"
        # calls that keep coming (by polling) for longer than the idle timeout:
        # the connection stays open
        t0 = time.time()
        while time.time() - t0 < 3:
            assert c.getattr(files["small"])[0] == 0
        assert c.getattr(files["small"])[0] == 0
        # a client that closes while the loop polls: the next connection works
        c.close()
        c = RpcConn(d.nfs_port)
        assert c.getattr(files["small"])[0] == 0
        c.close()
    finally:
        d.stop()
        shutil.rmtree(d.data_dir, ignore_errors=True)


def test_no_polling_when_off(daemon_factory):
    """nfs_loop_poll_us=0: the loop sleeps after every reply (no hits), the answers
    are the same."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB",
                                   "--set", "nfs_loop_poll_us=0"]).start()
    try:
        c = RpcConn(d.nfs_port)
        _, _, _, files = build_tree(c, root_fh(c))
        for _ in range(30):
            assert c.getattr(files["small"])[0] == 0
        assert metric(d, "s3nfs_nfs_loop_poll_hits_total") == 0
        c.close()
    finally:
        d.stop()
        shutil.rmtree(d.data_dir, ignore_errors=True)
