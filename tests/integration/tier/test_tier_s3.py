# SPDX-License-Identifier: Apache-2.0
"""The tier's S3 client (tier/tier_s3.h) against real remotes: Ceph RGW and a
second s3nfsd. Objects the client writes are read back with boto3 directly
(same bytes, Content-Type, user metadata); objects boto3 writes are read
with the client. Failure paths: wrong keys, port, bucket, TLS without the
CA, a remote killed mid-transfer, a remote that never answers."""
import hashlib
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from tierutil import TOOL, Out, Remote, new_bucket
from s3nfsd_harness import free_port

MiB = 1 << 20


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def boto_etag(s3, bucket, key):
    return s3.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')


# ---------------------------------------------------------------- objects


def test_put_then_boto3_reads_the_same_object(remote, tmp_path):
    data = os.urandom(300_000)
    f = write_file(tmp_path / "in", data)
    key = "dir/sub/obj one+é.bin"
    out = remote.run("put", key, f, "--content-type", "application/x-test",
                     "--meta", "origin=s3nfs", "--meta", "Mixed-Case=v 1")
    assert out.res["err"] == 0 and out.res["etag"] == hashlib.md5(data).hexdigest()
    got = remote.s3.get_object(Bucket=remote.bucket, Key=key)
    assert got["Body"].read() == data
    assert got["ContentType"] == "application/x-test"
    assert got["Metadata"] == {"origin": "s3nfs", "mixed-case": "v 1"}

    head = remote.run("head", key).res
    assert head["size"] == len(data) and head["etag"] == boto_etag(remote.s3, remote.bucket, key)
    assert head["content_type"] == "application/x-test"
    assert head["meta"] == {"origin": "s3nfs", "mixed-case": "v 1"}
    assert head["last_modified"] > 0

    g = remote.run("get", key, "--out", tmp_path / "out").res
    assert g["err"] == 0 and g["bytes"] == len(data)
    assert open(tmp_path / "out", "rb").read() == data


def test_boto3_object_read_by_client_whole_ranged_and_sync(remote, tmp_path):
    data = os.urandom(3 * MiB + 17)
    remote.s3.put_object(Bucket=remote.bucket, Key="b/obj", Body=data)
    r = remote.run("get", "b/obj", "--range", f"{MiB + 5}:{1000}", "--out", tmp_path / "r").res
    assert r["status"] == 206 and r["range_off"] == MiB + 5 and r["size"] == len(data)
    assert open(tmp_path / "r", "rb").read() == data[MiB + 5:MiB + 1005]
    # open-ended range, and a range past the end is cut by the remote
    r = remote.run("get", "b/obj", "--range", f"{len(data) - 10}:0", "--out", tmp_path / "t").res
    assert open(tmp_path / "t", "rb").read() == data[-10:]
    r = remote.run("get", "b/obj", "--range", f"{len(data) - 4}:100", "--out", tmp_path / "u").res
    assert open(tmp_path / "u", "rb").read() == data[-4:]
    # a range starting past the end is InvalidRange
    r = remote.run("get", "b/obj", "--range", f"{len(data) + 10}:5", ok=False).res
    assert r["errname"] == "ERANGE" and not r["retryable"]
    s = remote.run("sync-get", "b/obj", "--out", tmp_path / "s").res
    assert s["err"] == 0 and open(tmp_path / "s", "rb").read() == data


def test_get_into_a_caller_buffer(remote, tmp_path):
    """A GET with tier_s3_op.dest (how a recall reads its chunks): the body
    lands in the caller's buffer, nothing is collected, whole or ranged."""
    data = os.urandom(3 * MiB + 17)
    remote.s3.put_object(Bucket=remote.bucket, Key="b/dest", Body=data)
    r = remote.run("sync-get", "b/dest", "--dest", len(data), "--out", tmp_path / "w").res
    assert r["err"] == 0 and r["bytes"] == len(data) and not r["body"]
    assert open(tmp_path / "w", "rb").read() == data
    r = remote.run("sync-get", "b/dest", "--range", f"{MiB + 3}:{2 * MiB}", "--dest", 2 * MiB,
                   "--out", tmp_path / "r").res
    assert r["status"] == 206 and r["bytes"] == 2 * MiB and not r["body"]
    assert open(tmp_path / "r", "rb").read() == data[MiB + 3:3 * MiB + 3]
    # an error's body is the remote's XML, never written into the buffer
    r = remote.run("sync-get", "b/none", "--dest", 100, ok=False).res
    assert r["errname"] == "ENOENT" and r["bytes"] == 0


def test_whole_object_get_goes_without_range(remote, tmp_path):
    """tier_s3_op.obj_size (how a recall fetches a small file whole): a range that
    is all of the object goes as a plain GET (200, no Range header: cheaper for
    RGW), its size from the Content-Length; any other range stays ranged (206);
    If-Match still refuses an object replaced behind our back (412)."""
    data = os.urandom(150 * 1000 + 7)
    remote.s3.put_object(Bucket=remote.bucket, Key="b/whole", Body=data)
    etag = remote.s3.head_object(Bucket=remote.bucket, Key="b/whole")["ETag"].strip('"')
    n = len(data)
    r = remote.run("sync-get", "b/whole", "--range", f"0:{n}", "--dest", n, "--obj-size", n,
                   "--if-match", etag, "--out", tmp_path / "w").res
    assert r["err"] == 0 and r["status"] == 200 and r["size"] == n and r["bytes"] == n
    assert open(tmp_path / "w", "rb").read() == data
    # without obj_size, or a range that is not all of it: ranged
    r = remote.run("sync-get", "b/whole", "--range", f"0:{n}", "--dest", n,
                   "--if-match", etag).res
    assert r["err"] == 0 and r["status"] == 206 and r["size"] == n
    r = remote.run("sync-get", "b/whole", "--range", f"0:{n - 1}", "--dest", n, "--obj-size", n,
                   "--if-match", etag, "--out", tmp_path / "p").res
    assert r["err"] == 0 and r["status"] == 206 and r["bytes"] == n - 1
    assert open(tmp_path / "p", "rb").read() == data[:n - 1]
    # the object replaced (another size): the plain GET with If-Match is refused
    remote.s3.put_object(Bucket=remote.bucket, Key="b/whole", Body=data + b"more")
    r = remote.run("sync-get", "b/whole", "--range", f"0:{n}", "--dest", n, "--obj-size", n,
                   "--if-match", etag, ok=False).res
    assert r["status"] == 412 and r["bytes"] == 0
    # ... and without If-Match the bigger answer never overruns the buffer
    r = remote.run("sync-get", "b/whole", "--range", f"0:{n}", "--dest", n, "--obj-size", n,
                   ok=False).res
    assert r["errname"] == "EPROTO" and r["status"] == 200


def test_get_into_a_buffer_refuses_more_bytes_than_asked():
    """A remote that answers more bytes than the buffer holds (it ignored the
    range): the GET ends with EPROTO, the buffer is never overrun."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c = srv.accept()[0]
            except OSError:
                continue
            with c:
                req = b""
                while b"\r\n\r\n" not in req:
                    got = c.recv(65536)
                    if not got:
                        break
                    req += got
                body = b"x" * 4096
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        env = {"TIER_S3_ENDPOINT": f"http://127.0.0.1:{srv.getsockname()[1]}",
               "TIER_S3_BUCKET": "b", "TIER_S3_ACCESS_KEY": "k", "TIER_S3_SECRET_KEY": "s"}
        r = subprocess.run([TOOL, "sync-get", "k", "--dest", "100"],
                           env=dict(os.environ, **env), capture_output=True, text=True,
                           timeout=120)
        res = Out(r.returncode, r.stdout, r.stderr).res
        assert res["errname"] == "EPROTO", r.stdout + r.stderr
        assert "more than the 100 bytes" in res["message"]
    finally:
        stop.set()
        t.join()
        srv.close()


class PieceServer:
    """A plain HTTP remote on loopback that answers every GET with a
    Content-Length body sent in pieces, a pause between them (so that the
    client reads most of it straight from the socket into its buffer), on
    keep-alive connections. mode "close": half the body, then the connection
    closes; "stall": half the body, then nothing more."""

    def __init__(self, body, mode="whole", piece=64 * 1024, pause=0.002):
        self.body, self.mode, self.piece, self.pause = body, mode, piece, pause
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.stop = threading.Event()
        self.conns = 0
        self.held = []
        self.t = threading.Thread(target=self.accept, daemon=True)
        self.t.start()

    def env(self):
        return {"TIER_S3_ENDPOINT": f"http://127.0.0.1:{self.srv.getsockname()[1]}",
                "TIER_S3_BUCKET": "b", "TIER_S3_ACCESS_KEY": "k", "TIER_S3_SECRET_KEY": "s"}

    def accept(self):
        self.srv.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c = self.srv.accept()[0]
            except OSError:
                continue
            self.conns += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        try:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    got = c.recv(65536)
                    if not got:
                        return
                    buf += got
                buf = buf.split(b"\r\n\r\n", 1)[1]
                b = self.body
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"e\"\r\n\r\n"
                          % len(b))
                end = len(b) if self.mode == "whole" else len(b) // 2
                for i in range(0, end, self.piece):
                    c.sendall(b[i:min(end, i + self.piece)])
                    time.sleep(self.pause)
                if self.mode == "stall":
                    self.held.append(c)
                    self.stop.wait()
                    return
                if self.mode == "close":
                    return
        except OSError:
            return
        finally:
            if c not in self.held:
                c.close()

    def close(self):
        self.stop.set()
        self.t.join()
        for c in self.held:
            c.close()
        self.srv.close()


def run_tool(env, *args):
    r = subprocess.run([TOOL] + [str(a) for a in args], env=dict(os.environ, **env),
                       capture_output=True, text=True, timeout=120)
    return Out(r.returncode, r.stdout, r.stderr)


def test_get_into_a_buffer_read_from_the_socket_in_pieces(tmp_path):
    """A GET into a caller's buffer reads the body from the socket straight into
    it as pieces arrive: the bytes are the body's, and the connection serves
    the next GET (kept alive after the direct reads)."""
    body = os.urandom(3 * MiB + 5)
    srv = PieceServer(body)
    try:
        out = run_tool(srv.env(), "sync-get", "k", "--dest", len(body), "--times", 2,
                       "--out", tmp_path / "w")
        assert [x["err"] for x in out.results] == [0, 0], out.results
        assert out.res["bytes"] == len(body) and not out.res["body"]
        assert open(tmp_path / "w", "rb").read() == body
        assert out.stats["conns_opened"] == 1 and out.stats["conns_reused"] == 1, out.stats
        assert srv.conns == 1
    finally:
        srv.close()


def test_get_into_a_buffer_remote_closes_mid_body():
    """The remote closes the connection half-way through a body read straight
    into the buffer: the GET fails retryable (ECONNRESET), it does not hang."""
    srv = PieceServer(os.urandom(2 * MiB), mode="close")
    try:
        res = run_tool(srv.env(), "sync-get", "k", "--dest", 2 * MiB).res
        assert res["errname"] == "ECONNRESET" and res["retryable"], res
        assert "closed the connection reading the answer" in res["message"], res
    finally:
        srv.close()


def test_get_into_a_buffer_remote_stalls_mid_body():
    """The remote stops sending half-way through such a body: the idle timeout
    ends the GET (ETIMEDOUT, retryable)."""
    srv = PieceServer(os.urandom(2 * MiB), mode="stall")
    try:
        t0 = time.monotonic()
        res = run_tool(srv.env(), "--idle-timeout", 500, "sync-get", "k", "--dest", 2 * MiB).res
        assert res["errname"] == "ETIMEDOUT" and res["retryable"], res
        assert "timed out reading the answer" in res["message"], res
        assert time.monotonic() - t0 < 30
    finally:
        srv.close()


def test_ranged_get_streams_first_bytes_before_the_range_is_in(remote, tmp_path):
    """The first body bytes reach the caller while most of the range is still
    on the wire: the tool holds its loop after the first chunk (reading
    nothing more) and says how much it had; the range is far larger than what
    socket buffers can hold, so a client that waited for the whole range
    could never print that line."""
    data = os.urandom(72 * MiB)
    remote.s3.put_object(Bucket=remote.bucket, Key="big", Body=data)
    off, length = 3 * MiB + 1, 64 * MiB
    p = remote.popen("get", "big", "--range", f"{off}:{length}", "--hold",
                     "--out", tmp_path / "big.out")
    first = p.stdout.readline()
    assert first.startswith('{"first":'), first + p.stderr.read()
    n = int(re.search(r"\d+", first).group())
    assert 0 < n < length // 4
    out, err = p.communicate("go\n", timeout=300)
    res = [x for x in out.splitlines() if '"op"' in x][-1]
    assert '"err":0' in res, res + err
    assert open(tmp_path / "big.out", "rb").read() == data[off:off + length]


def test_flow_control_pause_and_resume(remote, tmp_path):
    """A GET whose data callback pauses every time (a timer resumes it) and a
    PUT whose source has nothing ready every other call: same bytes."""
    data = os.urandom(9 * MiB + 5)
    f = write_file(tmp_path / "in", data)
    put = remote.run("put", "fc/obj", f, "--stream", "--pause").res
    assert put["err"] == 0 and put["bytes"] == len(data)
    assert remote.s3.get_object(Bucket=remote.bucket, Key="fc/obj")["Body"].read() == data
    g = remote.run("get", "fc/obj", "--pause", "--out", tmp_path / "out").res
    assert g["err"] == 0 and g["calls"] > 1
    assert open(tmp_path / "out", "rb").read() == data


def test_multipart_parallel_parts(remote, tmp_path):
    part = 5 * MiB
    data = os.urandom(3 * part + 123_457)  # 4 parts
    f = write_file(tmp_path / "in", data)
    out = remote.run("mpu-put", "mp/file.bin", f, "--part-size", part, "--parallel", "3",
                     "--content-type", "video/x-test", "--meta", "kind=mpu")
    assert [r["op"] for r in out.results] == ["CreateMultipartUpload", "CompleteMultipartUpload"]
    # RGW 16 answers CompleteMultipartUpload with an empty <ETag/>: HEAD tells
    etag = out.res["etag"] or remote.run("head", "mp/file.bin").res["etag"]
    md5s = b"".join(hashlib.md5(data[i:i + part]).digest() for i in range(0, len(data), part))
    assert etag == f"{hashlib.md5(md5s).hexdigest()}-4"
    got = remote.s3.get_object(Bucket=remote.bucket, Key="mp/file.bin")
    assert got["Body"].read() == data
    assert got["ContentType"] == "video/x-test" and got["Metadata"] == {"kind": "mpu"}
    assert got["ETag"].strip('"') == etag
    assert out.stats["conns_opened"] <= 3


def test_leftover_uploads_listed_and_aborted(remote, tmp_path):
    f = write_file(tmp_path / "in", os.urandom(5 * MiB + 10))
    left = remote.run("mpu-leave", "ours/left.bin", f, "--part-size", 5 * MiB)
    upload_id = [x for x in left.lines if x.get("left")][0]["upload_id"]
    remote.s3.create_multipart_upload(Bucket=remote.bucket, Key="theirs/other.bin")
    lst = remote.run("mpu-list", "--prefix", "ours/")
    assert [(e["key"], e["upload_id"]) for e in lst.entries] == [("ours/left.bin", upload_id)]
    assert lst.entries[0]["time"] > 0
    both = remote.run("mpu-list", "--max", "1", "--all")
    assert sorted(both.keys) == ["ours/left.bin", "theirs/other.bin"]
    assert remote.run("mpu-abort", "ours/left.bin", upload_id).res["err"] == 0
    assert remote.run("mpu-list", "--prefix", "ours/").entries == []
    ups = remote.s3.list_multipart_uploads(Bucket=remote.bucket, Prefix="ours/")
    assert not ups.get("Uploads")
    again = remote.run("mpu-abort", "ours/left.bin", upload_id, ok=False).res
    assert again["errname"] == "ENOENT" and again["code"] == "NoSuchUpload"


def test_list_objects_pages_prefix_delimiter(remote):
    keys = [f"lp/k{i:02d}" for i in range(17)] + ["lp/d1/x", "lp/d1/y", "lp/d2/z", "lp-not",
                                                   "lp/sp ace+%.txt"]
    for k in keys:
        remote.s3.put_object(Bucket=remote.bucket, Key=k, Body=k.encode())
    full = remote.run("list", "--prefix", "lp/", "--max", "6", "--all")
    want = sorted(k for k in keys if k.startswith("lp/"))
    assert full.keys == want and full.res["pages"] == 4
    sizes = {e["key"]: e["size"] for e in full.entries}
    assert sizes["lp/d1/x"] == len("lp/d1/x")
    one = remote.run("list", "--prefix", "lp/", "--max", "6")
    assert one.res["truncated"] and len(one.keys) == 6
    d = remote.run("list", "--prefix", "lp/", "--delimiter", "/", "--max", "5", "--all")
    assert d.prefixes == ["lp/d1/", "lp/d2/"]
    assert d.keys == sorted(k for k in keys if re.fullmatch(r"lp/[^/]*", k))


def test_key_prefix_is_added_and_stripped(remote, tmp_path):
    f = write_file(tmp_path / "in", b"prefixed")
    remote.run("put", "a/k", f, prefix="tenant7/")
    assert remote.s3.get_object(Bucket=remote.bucket, Key="tenant7/a/k")["Body"].read() == \
        b"prefixed"
    remote.s3.put_object(Bucket=remote.bucket, Key="outside", Body=b"x")
    lst = remote.run("list", "--all", prefix="tenant7/")
    assert lst.keys == ["a/k"]
    assert remote.run("check", prefix="tenant7/").res["err"] == 0


def test_delete_and_if_match(remote, tmp_path):
    f = write_file(tmp_path / "in", b"delete me")
    etag = remote.run("put", "del/k", f).res["etag"]
    assert remote.run("head", "del/k", "--if-match", etag).res["err"] == 0
    bad = remote.run("head", "del/k", "--if-match", "0" * 32, ok=False).res
    assert bad["errname"] == "EPRECOND" and not bad["retryable"]
    bad = remote.run("get", "del/k", "--if-match", "0" * 32, ok=False).res
    assert bad["errname"] == "EPRECOND"
    assert remote.run("delete", "del/k").res["err"] == 0
    gone = remote.run("head", "del/k", ok=False).res
    assert gone["errname"] == "ENOENT" and gone["code"] == "NoSuchKey" and not gone["retryable"]
    assert remote.run("delete", "del/k").res["err"] == 0  # already gone: success


# ---------------------------------------------------------------- check and errors


def test_check_tells_failures_apart(remote):
    assert remote.run("check").res["err"] == 0
    r = remote.run("check", ok=False, secret_key="wrong" + remote.secret_key).res
    assert r["errname"] == "EAUTH" and not r["retryable"]
    assert "refused the credentials" in r["message"] and "SignatureDoesNotMatch" in r["message"]
    r = remote.run("check", ok=False, access_key="NOSUCHKEY0000000000X").res
    assert r["errname"] == "EAUTH" and "InvalidAccessKeyId" in r["message"]
    r = remote.run("check", ok=False, bucket="no-such-bucket-" + remote.bucket[-8:]).res
    assert r["errname"] == "ENOBUCKET" and "no bucket" in r["message"] and not r["retryable"]
    port = free_port()
    r = remote.run("check", ok=False, endpoint=f"http://127.0.0.1:{port}").res
    assert r["errname"] == "ECONNREFUSED" and r["retryable"]
    assert f"cannot connect to 127.0.0.1:{port}" in r["message"]
    # TLS spoken to a plain HTTP port: a TLS failure, said as such
    r = remote.run("check", ok=False, endpoint=remote.endpoint.replace("http:", "https:")).res
    assert r["errname"] == "ETLS" and "TLS" in r["message"] and not r["retryable"]
    r = remote.run("check", ok=False, endpoint="http://no-such-host.invalid:80").res
    assert r["errname"] == "EHOSTUNREACH" and "resolve" in r["message"]


def test_first_byte_timeout_is_retryable():
    """A remote that accepts and never answers: the request ends with a
    timeout (retryable), it does not hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        env = {"TIER_S3_ENDPOINT": f"http://127.0.0.1:{srv.getsockname()[1]}",
               "TIER_S3_BUCKET": "b", "TIER_S3_ACCESS_KEY": "k", "TIER_S3_SECRET_KEY": "s"}
        r = subprocess.run([TOOL, "--first-byte-timeout", "300", "head", "k"],
                           env=dict(os.environ, **env), capture_output=True, text=True,
                           timeout=120)
        res = Out(r.returncode, r.stdout, r.stderr).res
        assert res["errname"] == "ETIMEDOUT" and res["retryable"]
        assert "waiting for the answer" in res["message"]
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def kill_mid_transfer(r, args, marker):
    """Run the tool with --hold, kill the remote once it says it is mid-way
    (marker line), let it go on: @return its last result line."""
    p = r.popen(*args, "--hold")
    first = p.stdout.readline()
    assert first.startswith(marker), first + p.stderr.read()
    r.daemon.kill()
    out, err = p.communicate("go\n", timeout=120)
    assert p.returncode == 1, out + err
    return [x for x in out.splitlines() if '"op"' in x][-1]


def test_remote_killed_mid_get_fails_retryable(own_s3nfsd):
    r = own_s3nfsd
    r.s3.put_object(Bucket=r.bucket, Key="big", Body=os.urandom(64 * MiB))
    res = kill_mid_transfer(r, ["get", "big"], '{"first":')
    assert '"errname":"ECONNRESET"' in res and '"retryable":true' in res, res


def test_remote_killed_mid_put_fails_retryable(own_s3nfsd, tmp_path):
    r = own_s3nfsd
    f = write_file(tmp_path / "in", os.urandom(64 * MiB))
    res = kill_mid_transfer(r, ["put", "big", f, "--stream"], '{"sent_first":')
    assert re.search(r'"errname":"(ECONNRESET|EPIPE)"', res) and '"retryable":true' in res, res


def test_keepalive_reuses_one_connection(own_s3nfsd, tmp_path):
    """20 HEADs one after the other go over one connection: the client says
    so, and the server's request log shows a single client port for them."""
    r = own_s3nfsd
    r.s3.put_object(Bucket=r.bucket, Key="ka", Body=b"x")
    out = r.run("repeat-head", "ka", "20")
    assert out.res["err"] == 0
    assert out.stats["requests"] == 20 and out.stats["conns_opened"] == 1
    assert out.stats["conns_reused"] == 19
    r.daemon.stop()  # flushes the request log
    peers = set()
    n = 0
    for line in open(r.daemon.log_path, errors="replace"):
        if "op=HeadObject" in line and f"/{r.bucket}/ka" in line:
            n += 1
            peers.add(re.search(r"peer=(\S+)", line).group(1))
    assert n == 20 and len(peers) == 1, (n, peers)


def test_connection_bound_holds_under_parallel_parts(own_s3nfsd, tmp_path):
    r = own_s3nfsd
    data = os.urandom(6 * 5 * MiB)
    f = write_file(tmp_path / "in", data)
    out = r.run("--max-conns", "2", "mpu-put", "k", f, "--part-size", 5 * MiB,
                "--parallel", "6")
    assert out.res["err"] == 0 and out.stats["conns_opened"] <= 2
    assert r.s3.get_object(Bucket=r.bucket, Key="k")["Body"].read() == data


# ---------------------------------------------------------------- https, vhost


@pytest.fixture
def tls_s3nfsd(daemon_factory, tool, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    d = daemon_factory(extra_args=["--set", f"s3_tls_cert={cert}", "--set",
                                   f"s3_tls_key={key}", "--set", "data_file_size=1GiB"])
    d.start()
    import boto3
    import urllib3
    from botocore.config import Config
    urllib3.disable_warnings()
    endpoint = d.s3_endpoint.replace("http://", "https://")
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=d.access_key,
                      aws_secret_access_key=d.secret_key, region_name="us-east-1",
                      verify=str(cert), config=Config(s3={"addressing_style": "path"}))
    r = Remote("s3nfsd-tls", endpoint, d.access_key, d.secret_key, s3, new_bucket(s3), d)
    r.cert = str(cert)
    return r


def test_https_verifies_the_certificate(tls_s3nfsd, tmp_path):
    r = tls_s3nfsd
    bad = r.run("check", ok=False).res  # system CAs do not know the self-signed cert
    assert bad["errname"] == "ETLS" and "certificate verify failed" in bad["message"]
    assert not bad["retryable"]
    assert r.run("check", ca=r.cert).res["err"] == 0
    assert r.run("--no-verify", "check").res["err"] == 0
    data = os.urandom(2 * MiB + 3)
    f = write_file(tmp_path / "in", data)
    put = r.run("put", "tls/obj", f, "--content-type", "text/x-tls", ca=r.cert).res
    assert put["etag"] == hashlib.md5(data).hexdigest()
    assert r.s3.get_object(Bucket=r.bucket, Key="tls/obj")["Body"].read() == data
    r.run("put", "tls/stream", f, "--stream", ca=r.cert)  # UNSIGNED-PAYLOAD from a source
    assert r.s3.get_object(Bucket=r.bucket, Key="tls/stream")["Body"].read() == data
    g = r.run("get", "tls/obj", "--range", "5:1000", "--out", tmp_path / "o", ca=r.cert).res
    assert g["err"] == 0 and open(tmp_path / "o", "rb").read() == data[5:1005]
    mp = r.run("mpu-put", "tls/mp", f, "--part-size", 5 * MiB, ca=r.cert).res
    assert mp["err"] == 0
    out = r.run("repeat-head", "tls/obj", "10", ca=r.cert)
    assert out.stats["conns_opened"] == 1


def test_virtual_host_addressing_on_rgw(rgw, tool, tmp_path):
    """bucket.localhost addressing (RGW's rgw dns name = localhost); the
    client connects to 127.0.0.1 since *.localhost does not resolve here."""
    s3 = rgw.boto3()
    bucket = new_bucket(s3)
    r = Remote("rgw", rgw.endpoint.replace("127.0.0.1", "localhost"), rgw.access_key,
               rgw.secret_key, s3, bucket)
    data = os.urandom(100_000)
    f = write_file(tmp_path / "in", data)
    r.run("--vhost", "--connect-host", "127.0.0.1", "put", "v/k", f)
    assert s3.get_object(Bucket=bucket, Key="v/k")["Body"].read() == data
    lst = r.run("--vhost", "--connect-host", "127.0.0.1", "list", "--all")
    assert lst.keys == ["v/k"]
    assert r.run("--vhost", "--connect-host", "127.0.0.1", "check").res["err"] == 0
