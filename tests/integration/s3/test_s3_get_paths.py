# SPDX-License-Identifier: Apache-2.0
"""The three GET paths give the same bytes: inline objects answered on the loop
thread, small objects read on a worker, large ones streamed as zero-copy file
segments (first read verified and sent from memory, later ones by sendfile).
Sizes around every boundary, ranges across the 1 MiB extent grid, HEAD and
conditionals on the fast path, and a corrupt extent never reaching a client:
before its first read, after the kernel's copy of a verified extent went away
(an O_DIRECT write under it), and after that copy came back read from the
changed disk (resident is not verified); bytes sent by sendfile stay what
they were while the sockets still hold them."""
import glob
import hashlib
import http.client
import mmap
import os
import struct
import threading
import time

import pytest

MiB = 1 << 20
SIZES = [0, 1, 4095, 4096, 4097, 16 << 10, (16 << 10) + 1, MiB - 1, MiB, MiB + 1,
         5 * MiB + 123, 12 * MiB + 7]


@pytest.fixture(scope="module")
def s3(s3nfsd_module):
    c = s3nfsd_module.boto3()
    c.create_bucket(Bucket="paths")
    return c


def get(s3, key, **kw):
    return s3.get_object(Bucket="paths", Key=key, **kw)["Body"].read()


@pytest.mark.parametrize("size", SIZES)
def test_sizes_and_ranges(s3, size):
    data = os.urandom(size)
    key = f"obj-{size}"
    s3.put_object(Bucket="paths", Key=key, Body=data)
    for _ in range(3):  # cold (verified copy), then zero-copy
        assert get(s3, key) == data
    h = s3.head_object(Bucket="paths", Key=key)
    assert h["ContentLength"] == size
    assert h["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    if size == 0:
        return
    ranges = {(0, 0), (size - 1, size - 1), (0, size - 1), (size // 3, size // 2)}
    if size > MiB + 10:
        ranges |= {(MiB - 5, MiB + 5), (MiB, 2 * MiB - 1)}
    for a, b in sorted(ranges):
        r = s3.get_object(Bucket="paths", Key=key, Range=f"bytes={a}-{b}")
        assert r["ContentRange"] == f"bytes {a}-{b}/{size}"
        assert r["Body"].read() == data[a:b + 1]
    r = s3.get_object(Bucket="paths", Key=key, Range="bytes=-7")
    assert r["Body"].read() == data[-7:]
    # conditionals answer from the fast path too
    etag = h["ETag"]
    with pytest.raises(Exception) as e:
        s3.get_object(Bucket="paths", Key=key, IfNoneMatch=etag)
    assert "304" in str(e.value)
    assert get(s3, key, IfMatch=etag) == data
    assert get(s3, key, PartNumber=1) == data


def test_missing_and_directories(s3):
    s3.put_object(Bucket="paths", Key="d/inner", Body=b"x")
    for key in ("nope", "d"):
        with pytest.raises(s3.exceptions.NoSuchKey):
            s3.get_object(Bucket="paths", Key=key)
    assert s3.head_object(Bucket="paths", Key="d/")["ContentLength"] == 0
    with pytest.raises(s3.exceptions.NoSuchBucket):
        s3.get_object(Bucket="no-such-bucket", Key="k")


def raw_get(d, s3, key):
    """GET through a presigned URL. @return (status, body, complete)."""
    from botocore.config import Config
    v4 = d.boto3(config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    url = v4.generate_presigned_url("get_object", Params={"Bucket": "paths", "Key": key})
    path = url[url.index("/", len("http://")):]
    c = http.client.HTTPConnection("127.0.0.1", d.s3_port, timeout=30)
    c.request("GET", path)
    try:
        r = c.getresponse()
    except (http.client.HTTPException, OSError):
        c.close()
        return 0, b"", False  # cut before any response: nothing wrong was sent
    try:
        body = r.read()
        complete = True
    except http.client.IncompleteRead as e:
        body, complete = e.partial, False
    except (ConnectionError, OSError):
        body, complete = b"", False
    c.close()
    return r.status, body, complete


def flip_in_data_files(d, pattern, direct, reread=False):
    """Flip one byte in every 4 KiB block of the data files that starts with
    @p pattern (64 bytes); with @p reread, read each changed block back
    through the page cache afterwards (as the kernel's readahead for a
    neighbouring read, or any other reader of the file, may). @return blocks
    changed."""
    done = 0
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    for path in glob.glob(os.path.join(d.data_dir, "data.*")):
        flags = os.O_RDWR | (os.O_DIRECT if direct else 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            if direct:
                continue
            raise
        try:
            for off in range(0, 64 * MiB, 4096):
                buf.seek(0)
                if os.preadv(fd, [buf], off) != 4096:
                    break
                if buf[:64] == pattern:
                    buf[100] ^= 0xFF
                    assert os.pwritev(fd, [buf], off) == 4096
                    done += 1
                    if reread:
                        with open(path, "rb", buffering=0) as f:
                            assert os.pread(f.fileno(), 4096, off)[100] == buf[100]
            os.fsync(fd)
        finally:
            os.close(fd)
    return done


def check_refused(d, s3, key, data):
    """The GET must not complete, and every byte it did send is the object's."""
    st, body, complete = raw_get(d, s3, key)
    if st == 200:
        assert not complete, "a corrupt object was served whole"
        assert body == data[:len(body)], "corrupt bytes reached the client"
    else:
        assert st == 0 or st >= 500
    return st


def test_corrupt_extent_is_never_sent(s3nfsd_module, s3):
    d = s3nfsd_module
    # 1. the disk changes before the first read (O_DIRECT drops the pages the
    # PUT left in the page cache, data_write_cache): the verification catches it
    data = os.urandom(3 * MiB)
    s3.put_object(Bucket="paths", Key="rot1", Body=data)
    if flip_in_data_files(d, data[:64], True) == 0:
        pytest.skip("no O_DIRECT on this filesystem")
    # nothing was sent before the first extent failed: a clean 500
    assert check_refused(d, s3, "rot1", data) == 500
    # the other extents are intact and still served
    r = s3.get_object(Bucket="paths", Key="rot1", Range=f"bytes={MiB}-{3 * MiB - 1}")
    assert r["Body"].read() == data[MiB:]
    # 2. verified and cached, then the disk changes under it (O_DIRECT drops the
    # kernel's copy): the next GET verifies again and refuses
    data = os.urandom(3 * MiB)
    s3.put_object(Bucket="paths", Key="rot2", Body=data)
    assert get(s3, "rot2") == data
    assert get(s3, "rot2") == data
    if flip_in_data_files(d, data[MiB:MiB + 64], True) == 0:
        pytest.skip("no O_DIRECT on this filesystem")
    check_refused(d, s3, "rot2", data)
    assert get(s3, "rot2", Range=f"bytes=0-{MiB - 1}") == data[:MiB]
    # 3. as 2, but the changed block is read back into the page cache before
    # the next GET (readahead for a neighbouring read, another process reading
    # the file): cached is not verified, the GET still refuses
    data = os.urandom(3 * MiB)
    s3.put_object(Bucket="paths", Key="rot3", Body=data)
    assert get(s3, "rot3") == data
    assert get(s3, "rot3") == data
    assert flip_in_data_files(d, data[MiB:MiB + 64], True, reread=True) >= 1
    check_refused(d, s3, "rot3", data)
    assert get(s3, "rot3", Range=f"bytes=0-{MiB - 1}") == data[:MiB]


def rx_queued(sock):
    """Bytes waiting in the receive queue of @p sock, a TCP socket connected from
    127.0.0.1 to 127.0.0.1 (its line of /proc/net/tcp), or -1 if there is none.
    The line is the one of its local *and* remote address: the kernel gives the
    local port of a connect() to other connections too when their remote address
    differs (still open or in TIME_WAIT, left by earlier tests of the process),
    and their lines read 0."""
    want = ("0100007F:%04X" % sock.getsockname()[1], "0100007F:%04X" % sock.getpeername()[1])
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if (cols[1], cols[2]) == want:
                return int(cols[4].split(":")[1], 16)
    return -1


def test_rx_queued_reads_its_own_socket():
    """Two connections from one local port (to two listeners): each one's receive
    queue is its own, whatever order /proc/net/tcp lists them in."""
    import socket
    socks = []
    try:
        lst = []
        for _ in range(2):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            lst.append(s)
        socks += lst
        port, conns = 0, []
        for srv in lst:
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            c.bind(("127.0.0.1", port))
            port = c.getsockname()[1]
            c.connect(srv.getsockname())
            socks.append(c)
            conns.append(c)
        for n, srv in zip((1000, 3000), lst):
            a, _ = srv.accept()
            socks.append(a)
            a.sendall(b"x" * n)
        deadline = time.time() + 5
        while [rx_queued(c) for c in conns] != [1000, 3000] and time.time() < deadline:
            time.sleep(0.05)
        assert [rx_queued(c) for c in conns] == [1000, 3000]
    finally:
        for s in socks:
            s.close()


def test_sent_bytes_survive_space_reuse(s3nfsd_module, s3):
    """A GET's body sent from the page cache (sendfile) is still referenced by
    the sockets after the server let go of it: here it waits, unread, in the
    client's receive queue. The object is then deleted and its space written
    again by new PUTs; the client must still read the old object, byte for
    byte (writes through the page cache must not change those pages in place)."""
    d = s3nfsd_module
    data = os.urandom(2 * MiB)
    s3.put_object(Bucket="paths", Key="sent", Body=data)
    assert get(s3, "sent") == data  # known verified: the next GET is sent by sendfile
    from botocore.config import Config
    v4 = d.boto3(config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    url = v4.generate_presigned_url("get_object", Params={"Bucket": "paths", "Key": "sent"})
    path = url[url.index("/", len("http://")):]
    import socket
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * MiB)
    sock.connect(("127.0.0.1", d.s3_port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{d.s3_port}\r\n\r\n".encode())
    deadline = time.time() + 30
    while rx_queued(sock) < len(data) and time.time() < deadline:
        time.sleep(0.05)
    assert rx_queued(sock) >= len(data), "the whole answer is queued, unread"
    s3.delete_object(Bucket="paths", Key="sent")
    for i in range(8):
        s3.put_object(Bucket="paths", Key=f"reuse{i}", Body=os.urandom(2 * MiB))
    got = b""
    sock.settimeout(30)
    while True:
        head, sep, body = got.partition(b"\r\n\r\n")
        if sep and len(body) >= len(data):
            break
        chunk = sock.recv(1 << 20)
        assert chunk, "the connection closed before the whole body came"
        got += chunk
    sock.close()
    assert head.startswith(b"HTTP/1.1 200")
    assert body == data, "bytes of the deleted object changed on their way to the client"


def versioned(version, n):
    body = hashlib.sha256(b"%d" % version).digest() * (n // 32)
    body = body[:n - 40]
    return struct.pack(">Q", version) + hashlib.sha256(body).digest() + body


@pytest.mark.parametrize("n", [40 << 10, 2 * MiB, 6 * MiB], ids=["copy", "zc-one", "zc-ref"])
def test_replaced_while_read_is_whole(s3nfsd_module, s3, n):
    """PUTs keep replacing a key while readers GET it: every answer is one
    whole version (never 404, never a mix), whichever GET path serves it:
    a worker read, one zero-copy window without a hold, or held windows."""
    key = f"churn-{n}"
    s3.put_object(Bucket="paths", Key=key, Body=versioned(0, n))
    stop = threading.Event()
    errors, seen = [], set()

    def writer():
        c = s3nfsd_module.boto3()
        v = 1
        while not stop.is_set():
            try:
                c.put_object(Bucket="paths", Key=key, Body=versioned(v, n))
                v += 1
            except Exception as e:  # noqa: BLE001
                errors.append(f"put: {e}")
                return

    def reader():
        c = s3nfsd_module.boto3()
        while not stop.is_set():
            try:
                data = c.get_object(Bucket="paths", Key=key)["Body"].read()
            except Exception as e:  # noqa: BLE001
                errors.append(f"get: {e}")
                return
            version = struct.unpack(">Q", data[:8])[0]
            if len(data) != n or hashlib.sha256(data[40:]).digest() != data[8:40]:
                errors.append(f"partial or mixed version {version}")
                return
            seen.add(version)

    threads = [threading.Thread(target=f) for f in (writer, reader, reader)]
    for t in threads:
        t.start()
    time.sleep(6)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert len(seen) > 1, seen


def test_copy_source_replaced_while_copied(s3nfsd_module, s3):
    """CopyObject of a source that PUTs keep replacing copies one whole version
    (never NoSuchKey, never a mix)."""
    n = 2 * MiB
    s3.put_object(Bucket="paths", Key="csrc", Body=versioned(0, n))
    stop = threading.Event()
    errors = []

    def writer():
        c = s3nfsd_module.boto3()
        v = 1
        while not stop.is_set():
            c.put_object(Bucket="paths", Key="csrc", Body=versioned(v, n))
            v += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for i in range(25):
            try:
                s3.copy_object(Bucket="paths", Key=f"cdst{i % 3}",
                               CopySource={"Bucket": "paths", "Key": "csrc"})
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
                continue
            data = get(s3, f"cdst{i % 3}")
            if len(data) != n or hashlib.sha256(data[40:]).digest() != data[8:40]:
                errors.append("copy is not one whole version")
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors[:3]
