# SPDX-License-Identifier: Apache-2.0
"""The S3 front end's HTTP and authentication edges, driven with raw sockets:
SigV4 failures, aws-chunked streaming, pipelining, 100-continue, limits,
truncated and oversized bodies, disconnects, idle and many connections, TLS,
virtual-host addressing."""
import base64
import hashlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import (EMPTY_SHA256, amz_now, aws_chunked_body, build_request, connect,  # noqa: E402
                    read_response, read_responses, sign_headers, signed_request)


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    s3nfsd_module.boto3().create_bucket(Bucket="raw-bucket")
    return s3nfsd_module


def exists(d, key, bucket="raw-bucket"):
    try:
        d.boto3().head_object(Bucket=bucket, Key=key)
        return True
    except ClientError:
        return False


def send_one(d, raw):
    s = connect(d)
    s.sendall(raw)
    r = read_response(s)
    s.close()
    return r


def test_signature_failures(d):
    st, h, body = send_one(d, signed_request(d, "GET", "/raw-bucket", secret="wrong-secret")[0])
    assert st == 403 and b"SignatureDoesNotMatch" in body
    assert h["x-amz-request-id"]
    # unknown access key
    raw = signed_request(d, "GET", "/raw-bucket")[0].replace(d.access_key.encode(),
                                                             b"AKIDUNKNOWN0000000000")
    st, h, body = send_one(d, raw)
    assert st == 403 and b"InvalidAccessKeyId" in body
    # anonymous
    host = d.s3_endpoint.split("//")[1]
    st, h, body = send_one(d, build_request("GET", "/raw-bucket", {"host": host}))
    assert st == 403 and b"AccessDenied" in body
    # clock skew: 20 minutes late
    st, h, body = send_one(d, signed_request(d, "GET", "/raw-bucket", amz_date=amz_now(-1200))[0])
    assert st == 403 and b"RequestTimeTooSkewed" in body
    # malformed Authorization
    st, h, body = send_one(d, build_request("GET", "/", {"host": host, "authorization":
                                                         "AWS4-HMAC-SHA256 garbage"}))
    assert st == 400 and b"AuthorizationHeaderMalformed" in body
    # SigV2 header (legacy, test_s3_sigv2.py) with an unknown key; another scheme
    st, h, body = send_one(d, build_request("GET", "/", {"host": host,
                                                         "authorization": "AWS AK:sig"}))
    assert st == 403 and b"InvalidAccessKeyId" in body
    st, h, body = send_one(d, build_request("GET", "/", {"host": host,
                                                         "authorization": "AWS no-colon"}))
    assert st == 400 and b"AuthorizationHeaderMalformed" in body
    # a signed header changed after signing
    raw = signed_request(d, "PUT", "/raw-bucket/tamper", headers={"x-amz-meta-a": "1"},
                         body=b"x")[0].replace(b"x-amz-meta-a: 1", b"x-amz-meta-a: 2")
    st, h, body = send_one(d, raw)
    assert st == 403 and not exists(d, "tamper")


def test_payload_hash_mismatch(d):
    raw = signed_request(d, "PUT", "/raw-bucket/hashbad", body=b"AAAA",
                         payload_hash=hashlib.sha256(b"BBBB").hexdigest())[0]
    st, h, body = send_one(d, raw)
    assert st == 400 and b"XAmzContentSHA256Mismatch" in body
    assert not exists(d, "hashbad")
    st, h, body = send_one(d, signed_request(d, "PUT", "/raw-bucket/hashgood", body=b"AAAA")[0])
    assert st == 200 and exists(d, "hashgood")


def chunked_put(d, key, chunks, tamper=None, decoded=None):
    host = d.s3_endpoint.split("//")[1]
    amz = amz_now()
    total = sum(len(c) for c in chunks)
    hdrs = {"host": host, "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(decoded if decoded is not None else total)}
    # the body length depends only on chunk sizes, so sign with a placeholder first
    fake = aws_chunked_body(b"k" * 32, amz, "s", "0" * 64, chunks)
    hdrs["content-length"] = str(len(fake))
    h, key_, seed, scope = sign_headers("PUT", f"/raw-bucket/{key}", [], hdrs,
                                        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", d.access_key,
                                        d.secret_key, amz)
    body = aws_chunked_body(key_, amz, scope, seed, chunks, tamper_chunk=tamper)
    return send_one(d, build_request("PUT", f"/raw-bucket/{key}", h, body))


def test_aws_chunked_signed(d):
    chunks = [os.urandom(65536), os.urandom(100000), os.urandom(10)]
    st, h, body = chunked_put(d, "chunked-ok", chunks)
    assert st == 200, body
    g = d.boto3().get_object(Bucket="raw-bucket", Key="chunked-ok")
    got = g["Body"].read()
    assert got == b"".join(chunks)
    assert "ContentEncoding" not in g  # aws-chunked is framing, not a stored coding
    assert h["etag"] == '"%s"' % hashlib.md5(got).hexdigest()


def test_aws_chunked_tampered(d):
    st, h, body = chunked_put(d, "chunked-bad", [os.urandom(70000), os.urandom(500)], tamper=1)
    assert st == 403 and b"SignatureDoesNotMatch" in body
    assert not exists(d, "chunked-bad")
    st, h, body = chunked_put(d, "chunked-len", [b"abc"], decoded=4)
    assert st == 400 and not exists(d, "chunked-len")


def test_streaming_unsigned_trailer(d):
    data = os.urandom(200000)
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    for value, expect in ((crc, 200), ("AAAAAA==", 400)):
        body = (f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" +
                f"x-amz-checksum-crc32:{value}\r\n\r\n".encode())
        key = f"trailer-{expect}"
        raw = signed_request(d, "PUT", f"/raw-bucket/{key}",
                             headers={"content-encoding": "aws-chunked",
                                      "x-amz-trailer": "x-amz-checksum-crc32",
                                      "x-amz-decoded-content-length": str(len(data)),
                                      "content-length": str(len(body))},
                             body=body, payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")[0]
        st, h, resp = send_one(d, raw)
        assert st == expect, resp
        assert exists(d, key) == (expect == 200)
    got = d.boto3().get_object(Bucket="raw-bucket", Key="trailer-200")["Body"].read()
    assert got == data


def test_keepalive_pipelining(d):
    reqs = b"".join([
        signed_request(d, "PUT", "/raw-bucket/pipe1", body=b"one")[0],
        signed_request(d, "GET", "/raw-bucket/pipe1")[0],
        signed_request(d, "PUT", "/raw-bucket/pipe2", body=b"two" * 1000)[0],
        signed_request(d, "GET", "/raw-bucket/pipe2")[0],
        signed_request(d, "GET", "/raw-bucket/missing")[0],
        signed_request(d, "DELETE", "/raw-bucket/pipe1")[0],
    ])
    s = connect(d)
    s.sendall(reqs)
    rs = read_responses(s, 6)
    assert [r[0] for r in rs] == [200, 200, 200, 200, 404, 204]
    assert rs[1][2] == b"one" and rs[3][2] == b"two" * 1000
    ids = [r[1]["x-amz-request-id"] for r in rs]
    assert len(set(ids)) == 6
    # still usable afterwards
    s.sendall(signed_request(d, "GET", "/raw-bucket/pipe2")[0])
    assert read_response(s)[0] == 200
    s.close()


def test_expect_continue(d):
    body = os.urandom(300000)
    raw = signed_request(d, "PUT", "/raw-bucket/cont", headers={"expect": "100-continue"},
                         body=body)[0]
    head, _ = raw.split(b"\r\n\r\n", 1)
    s = connect(d)
    s.sendall(head + b"\r\n\r\n")
    st, h, rest = read_response(s)
    assert st == 100
    s.sendall(body)
    st, h, _ = read_response(s)
    assert st == 200
    s.close()
    assert d.boto3().get_object(Bucket="raw-bucket", Key="cont")["Body"].read() == body
    # refused before the body: no 100, an error instead
    raw = signed_request(d, "PUT", "/no-such-bucket-cont/k", headers={"expect": "100-continue"},
                         body=body)[0]
    head, _ = raw.split(b"\r\n\r\n", 1)
    s = connect(d)
    s.sendall(head + b"\r\n\r\n")
    st, h, err = read_response(s)
    assert st == 404 and b"NoSuchBucket" in err
    s.close()


def test_transfer_encoding_chunked(d):
    data = b"chunked transfer " * 1000
    body = b""
    for i in range(0, len(data), 4000):
        c = data[i:i + 4000]
        body += f"{len(c):x}\r\n".encode() + c + b"\r\n"
    body += b"0\r\n\r\n"
    raw = signed_request(d, "PUT", "/raw-bucket/te", headers={"transfer-encoding": "chunked"},
                         body=body, payload_hash="UNSIGNED-PAYLOAD")[0]
    st, h, _ = send_one(d, raw)
    assert st == 200
    assert d.boto3().get_object(Bucket="raw-bucket", Key="te")["Body"].read() == data


def test_malformed_and_header_limit(d):
    s = connect(d)
    s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
    st, h, body = read_response(s)
    assert st == 400 and h.get("connection") == "close"
    assert s.recv(10) == b""
    s.close()
    host = d.s3_endpoint.split("//")[1]
    s = connect(d)
    s.sendall(build_request("GET", "/", {"host": host, "x-big": "a" * 100000}))
    st, h, body = read_response(s)
    assert st == 431
    s.close()
    # the server still serves
    assert d.boto3().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_body_shorter_than_content_length(d):
    raw = signed_request(d, "PUT", "/raw-bucket/short", body=b"x" * 1000,
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    raw = raw.replace(b"content-length: 1000", b"content-length: 5000")
    s = connect(d)
    s.sendall(raw)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
    assert not exists(d, "short")


def test_body_longer_than_content_length(d):
    raw = signed_request(d, "PUT", "/raw-bucket/long", body=b"hello",
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    s = connect(d)
    s.sendall(raw + b"GARBAGE-NOT-HTTP\r\n\r\n")
    rs = read_responses(s, 2)
    assert rs[0][0] == 200 and rs[1][0] == 400
    s.close()
    assert d.boto3().get_object(Bucket="raw-bucket", Key="long")["Body"].read() == b"hello"


def test_large_bodies_every_read_path(d):
    """Upload bodies larger than two 4 MiB chunks on each way in: read straight
    from the socket (plain body; aws-chunked decoded in place, its chunks
    across chunk boundaries), sent in slow pieces, HTTP chunked (through the
    bufferevent), and followed by a pipelined GET in the same send."""
    size = 9 * 1024 * 1024 + 123
    data = os.urandom(size)
    md5 = '"%s"' % hashlib.md5(data).hexdigest()
    # plain, signed payload hash, then a GET pipelined right behind the body
    put = signed_request(d, "PUT", "/raw-bucket/big-plain", body=data)[0]
    s = connect(d, timeout=60)
    s.sendall(put + signed_request(d, "GET", "/raw-bucket/big-plain")[0])
    rs = read_responses(s, 2)
    s.close()
    assert rs[0][0] == 200 and rs[0][1]["etag"] == md5
    assert rs[1][0] == 200 and rs[1][2] == data
    # the same body in slow pieces (the reader waits for the socket again and again)
    put = signed_request(d, "PUT", "/raw-bucket/big-slow", body=data,
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    head, body = put[:len(put) - size], put[len(put) - size:]
    s = connect(d, timeout=60)
    s.sendall(head)
    for i, cut in enumerate((1000, 5 * 1024 * 1024, size)):
        time.sleep(0.2)
        s.sendall(body[(0, 1000, 5 * 1024 * 1024)[i]:cut])
    st, h, _ = read_response(s)
    s.close()
    assert st == 200 and h["etag"] == md5
    # aws-chunked, 1 MiB + 7 byte chunks: framing decoded in place across chunks
    chunks = [data[i:i + (1 << 20) + 7] for i in range(0, size, (1 << 20) + 7)]
    st, h, body = chunked_put(d, "big-chunked", chunks)
    assert st == 200 and h["etag"] == md5, body
    # HTTP chunked transfer coding
    te = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks) + b"0\r\n\r\n"
    raw = signed_request(d, "PUT", "/raw-bucket/big-te", headers={"transfer-encoding": "chunked"},
                         body=te, payload_hash="UNSIGNED-PAYLOAD")[0]
    s = connect(d, timeout=60)
    s.sendall(raw)
    st, h, _ = read_response(s)
    s.close()
    assert st == 200 and h["etag"] == md5
    for key in ("big-plain", "big-slow", "big-chunked", "big-te"):
        got = d.boto3().get_object(Bucket="raw-bucket", Key=key)["Body"].read()
        assert got == data, key


def test_disconnect_mid_upload(d):
    total = 50 * 1024 * 1024
    raw = signed_request(d, "PUT", "/raw-bucket/cut", body=b"", payload_hash="UNSIGNED-PAYLOAD",
                         headers={"content-length": str(total)})[0]
    s = connect(d)
    s.sendall(raw)
    chunk = os.urandom(1 << 20)
    for _ in range(8):
        s.sendall(chunk)
    s.close()
    time.sleep(0.5)
    assert not exists(d, "cut")
    r = d.boto3().list_multipart_uploads(Bucket="raw-bucket")
    assert not r.get("Uploads")
    assert d.boto3().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_large_get_streams_and_client_stops_reading(d):
    data = os.urandom(24 * 1024 * 1024)
    d.boto3().put_object(Bucket="raw-bucket", Key="huge", Body=data)
    s = connect(d)
    s.sendall(signed_request(d, "GET", "/raw-bucket/huge")[0])
    s.recv(65536)
    s.close()  # abandon mid-body
    got = d.boto3().get_object(Bucket="raw-bucket", Key="huge")["Body"].read()
    assert hashlib.md5(got).digest() == hashlib.md5(data).digest()


def test_refused_upload_answer_survives_the_rest_of_the_body(d):
    """A client that sends the whole body before reading (no Expect:
    100-continue) to a request refused at its headers still reads the error:
    the server drains the body instead of resetting the connection."""
    body = os.urandom(24 << 20)
    raw = signed_request(d, "PUT", "/no-such-bucket-here/k", body=body,
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    for _ in range(3):
        s = connect(d, timeout=30)
        s.sendall(raw)  # a reset would fail this or the read below
        st, h, rbody = read_response(s)
        assert st == 404 and b"NoSuchBucket" in rbody, (st, rbody[:200])
        # the client must not send another request into the lingering close
        assert h.get("connection") == "close", h
        assert s.recv(1) == b"", "the connection should close after the refused upload"
        s.close()
    assert send_one(d, signed_request(d, "GET", "/raw-bucket")[0])[0] == 200


def test_store_full_mid_upload_is_answered(daemon_factory):
    """The store fills up in the middle of a body: boto3 (which sends the body
    before reading the answer) gets the 507 InsufficientStorage, and nothing is
    stored."""
    dd = daemon_factory(extra_args=["--set", "data_file_size=64MiB"]).start()
    s3 = dd.boto3()
    s3.create_bucket(Bucket="full")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="full", Key="big", Body=os.urandom(80 << 20))
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 507
    assert e.value.response["Error"]["Code"] == "InsufficientStorage"
    assert not exists(dd, "big", bucket="full")
    s3.put_object(Bucket="full", Key="small", Body=b"still serving")
    assert s3.get_object(Bucket="full", Key="small")["Body"].read() == b"still serving"


def test_head_and_not_implemented(d):
    d.boto3().put_object(Bucket="raw-bucket", Key="headme", Body=b"z" * 4321)
    s = connect(d)
    s.sendall(signed_request(d, "HEAD", "/raw-bucket/headme")[0])
    st, h, body = read_response(s, head=True)
    assert st == 200 and h["content-length"] == "4321" and body == b""
    s.sendall(signed_request(d, "HEAD", "/raw-bucket/nothere")[0])
    st, h, body = read_response(s, head=True)
    assert st == 404
    s.close()
    st, h, body = send_one(d, signed_request(d, "GET", "/raw-bucket/huge",
                                             query=[("torrent", "")])[0])
    assert st == 501 and b"NotImplemented" in body and b"torrent" in body
    st, h, body = send_one(d, signed_request(d, "PATCH", "/raw-bucket/huge")[0])
    assert st == 405 and b"<Code>MethodNotAllowed</Code>" in body, (st, body)
    st, h, body = send_one(d, signed_request(d, "PATCH", "/raw-bucket")[0])
    assert st == 405 and b"<Code>MethodNotAllowed</Code>" in body, (st, body)


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


@pytest.mark.slow
@pytest.mark.parametrize("count", [2000, 10000])
def test_many_idle_connections(daemon_factory, count):
    # client and daemon are separate processes: each needs count + a margin
    limit = raise_nofile(count + 1000)
    if limit < count + 500:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} is too low for {count} connections")
    d = daemon_factory(extra_args=["--set", f"s3_max_conns={count + 100}"]).start()
    d.boto3().create_bucket(Bucket="idle-bucket")
    idle = []
    try:
        for _ in range(count):
            idle.append(socket.create_connection(("127.0.0.1", d.s3_port)))
        s3 = d.boto3()
        s3.put_object(Bucket="idle-bucket", Key="k", Body=b"served")
        assert s3.get_object(Bucket="idle-bucket", Key="k")["Body"].read() == b"served"
        # a few idle ones are still alive and can be used
        for s in idle[:3] + idle[-3:]:
            s.sendall(signed_request(d, "GET", "/idle-bucket/k")[0])
            st, h, body = read_response(s)
            assert st == 200 and body == b"served"
    finally:
        for s in idle:
            s.close()


def test_max_conns_and_idle_timeout(daemon_factory):
    d = daemon_factory(extra_args=["--set", "s3_max_conns=4", "--set",
                                   "s3_idle_timeout_s=1"]).start()
    held = [socket.create_connection(("127.0.0.1", d.s3_port)) for _ in range(4)]
    time.sleep(0.2)
    extra = socket.create_connection(("127.0.0.1", d.s3_port))
    extra.settimeout(10)
    data = extra.recv(4096)
    assert data == b"" or data.startswith(b"HTTP/1.1 503")
    extra.close()
    # idle connections are closed by the server after the idle timeout
    for s in held:
        s.settimeout(30)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        assert data == b""
        s.close()
    # slow client: headers never finish -> 408, then closed
    s = socket.create_connection(("127.0.0.1", d.s3_port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    s.settimeout(30)
    data = s.recv(4096)
    assert data.startswith(b"HTTP/1.1 408")
    s.close()
    assert d.boto3().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_header_timeout_counts_from_the_last_answer(daemon_factory):
    """The header timer is armed once and moved on by each answer: requests
    that keep a connection busy past the timeout from its start keep it open,
    and the wait for the next headers is timed from the last answer."""
    d = daemon_factory(extra_args=["--set", "s3_idle_timeout_s=2"]).start()
    d.boto3().create_bucket(Bucket="hdr-timer")
    d.boto3().put_object(Bucket="hdr-timer", Key="k", Body=b"served")
    s = connect(d)
    s.settimeout(30)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.5:  # past the first deadline (2 s)
        s.sendall(signed_request(d, "GET", "/hdr-timer/k")[0])
        st, h, body = read_response(s)
        assert st == 200 and body == b"served"
        time.sleep(0.3)
    last = time.monotonic()
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    data = s.recv(4096)
    waited = time.monotonic() - last
    assert data.startswith(b"HTTP/1.1 408")
    assert 1.5 < waited < 6, waited
    s.close()


def test_max_object_size(daemon_factory):
    d = daemon_factory(extra_args=["--set", "s3_max_object_size=1MiB"]).start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="small-max")
    s3.put_object(Bucket="small-max", Key="ok", Body=b"x" * 1000)
    raw = signed_request(d, "PUT", "/small-max/big", body=b"y" * (2 << 20),
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    s = connect(d)
    try:
        s.sendall(raw)
    except OSError:
        pass
    st, h, body = read_response(s)
    assert st == 400 and b"EntityTooLarge" in body  # AWS answers 400, not 413
    s.close()
    assert not exists(d, "big", bucket="small-max")


def test_virtual_host(daemon_factory):
    d = daemon_factory(extra_args=["--set", "s3_domain=s3.test"]).start()
    d.boto3().create_bucket(Bucket="vhost-bucket")
    port = d.s3_port
    host = f"vhost-bucket.s3.test:{port}"
    amz = amz_now()
    h, *_ = sign_headers("PUT", "/obj", [], {"host": host, "content-length": "5"},
                         hashlib.sha256(b"hello").hexdigest(), d.access_key, d.secret_key, amz)
    s = connect(d)
    s.sendall(build_request("PUT", "/obj", h, b"hello"))
    assert read_response(s)[0] == 200
    h, *_ = sign_headers("GET", "/", [("list-type", "2")], {"host": host}, EMPTY_SHA256,
                         d.access_key, d.secret_key, amz)
    s.sendall(build_request("GET", "/?list-type=2", h))
    st, hh, body = read_response(s)
    assert st == 200 and b"<Key>obj</Key>" in body and b"<Name>vhost-bucket</Name>" in body
    s.close()
    assert d.boto3().get_object(Bucket="vhost-bucket", Key="obj")["Body"].read() == b"hello"


def test_tls(daemon_factory, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    d = daemon_factory(extra_args=["--set", f"s3_tls_cert={cert}", "--set",
                                   f"s3_tls_key={key}"])
    d.s3_endpoint = d.s3_endpoint.replace("http://", "https://")
    d.start()
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=d.s3_endpoint, aws_access_key_id=d.access_key,
                      aws_secret_access_key=d.secret_key, region_name="us-east-1", verify=False,
                      config=Config(s3={"addressing_style": "path"}))
    import urllib3
    urllib3.disable_warnings()
    s3.create_bucket(Bucket="tls-bucket")
    data = os.urandom(5 * 1024 * 1024 + 3)
    s3.put_object(Bucket="tls-bucket", Key="k", Body=data)
    assert s3.get_object(Bucket="tls-bucket", Key="k")["Body"].read() == data
    # plain HTTP on the TLS port is refused, the server keeps serving
    s = socket.create_connection(("127.0.0.1", d.s3_port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        s.recv(100)
    except OSError:
        pass
    s.close()
    assert s3.list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_request_document_digests(d):
    doc = b"<Delete><Object><Key>nothing</Key></Object></Delete>"
    good = base64.b64encode(hashlib.md5(doc).digest()).decode()
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    st, h, body = send_one(d, signed_request(d, "POST", "/raw-bucket", query=[("delete", "")],
                                             headers={"content-md5": good}, body=doc)[0])
    assert st == 200 and b"<Deleted><Key>nothing</Key></Deleted>" in body
    st, h, body = send_one(d, signed_request(d, "POST", "/raw-bucket", query=[("delete", "")],
                                             headers={"content-md5": bad}, body=doc)[0])
    assert st == 400 and b"BadDigest" in body
    crc = base64.b64encode(zlib.crc32(doc).to_bytes(4, "big")).decode()
    st, h, body = send_one(d, signed_request(d, "POST", "/raw-bucket", query=[("delete", "")],
                                             headers={"x-amz-checksum-crc32": crc}, body=doc)[0])
    assert st == 200
    st, h, body = send_one(d, signed_request(d, "POST", "/raw-bucket", query=[("delete", "")],
                                             headers={"x-amz-checksum-crc32": "AAAAAA=="},
                                             body=doc)[0])
    assert st == 400 and b"BadDigest" in body
    st, h, body = send_one(d, signed_request(d, "POST", "/raw-bucket", query=[("delete", "")],
                                             body=b"<Delete><Object>")[0])
    assert st == 400 and b"MalformedXML" in body


def test_reader_keeps_replaced_object(d):
    """A GET that started before a PUT replaced (or a DELETE removed) the object
    still delivers the old bytes in full."""
    old = os.urandom(20 * 1024 * 1024)
    d.boto3().put_object(Bucket="raw-bucket", Key="replaced", Body=old)
    s = connect(d, timeout=60)
    s.sendall(signed_request(d, "GET", "/raw-bucket/replaced")[0])
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    d.boto3().put_object(Bucket="raw-bucket", Key="replaced", Body=b"new content")
    d.boto3().delete_object(Bucket="raw-bucket", Key="replaced")
    hdr, rest = first.split(b"\r\n\r\n", 1)
    chunks = [rest]
    got = len(rest)
    while got < len(old):
        c = s.recv(1 << 20)
        assert c, "connection closed early"
        chunks.append(c)
        got += len(c)
    s.close()
    assert hashlib.sha256(b"".join(chunks)).digest() == hashlib.sha256(old).digest()


def test_pipelined_gets_without_reading(d):
    """Answers to pipelined requests are held back while the client does not
    read (bounded output), and all arrive, in order, once it does."""
    obj = os.urandom(1 << 20)
    d.boto3().put_object(Bucket="raw-bucket", Key="mib", Body=obj)
    s = connect(d, timeout=60)
    reqs = [signed_request(d, "GET", "/raw-bucket/mib")[0] for _ in range(40)]
    s.sendall(b"".join(reqs))
    time.sleep(0.5)
    rs = read_responses(s, 40)
    assert all(r[0] == 200 and r[2] == obj for r in rs)
    assert len({r[1]["x-amz-request-id"] for r in rs}) == 40
    s.close()


def test_pipelined_requests_beyond_the_input_bound(d):
    """A client that pipelines more request bytes (4 MiB) than a connection
    buffers (1 MiB of input) and reads nothing for a while: the server stops
    reading at the bound, reads on as the answers drain, and every answer
    arrives, in order."""
    obj = os.urandom(4096)
    d.boto3().put_object(Bucket="raw-bucket", Key="pipe4k", Body=obj)
    one = signed_request(d, "GET", "/raw-bucket/pipe4k")[0]
    count = (4 << 20) // len(one) + 1
    s = connect(d, timeout=60)
    sender = threading.Thread(target=s.sendall, args=(one * count,))
    sender.start()
    time.sleep(1.0)
    rs = read_responses(s, count)
    sender.join(60)
    assert not sender.is_alive()
    assert all(r[0] == 200 and r[2] == obj for r in rs)
    ids = [r[1]["x-amz-request-id"] for r in rs]
    assert len(set(ids)) == count and ids == sorted(ids)
    s.close()


def test_virtual_host_boto3(daemon_factory, monkeypatch):
    """boto3 in virtual-hosted style (bucket in the Host name) against s3_domain."""
    d = daemon_factory(extra_args=["--set", "s3_domain=s3.test"]).start()
    real = socket.getaddrinfo

    def fake(host, *a, **kw):  # resolve *.s3.test to loopback inside this process
        if isinstance(host, str) and (host == "s3.test" or host.endswith(".s3.test")):
            host = "127.0.0.1"
        return real(host, *a, **kw)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=f"http://s3.test:{d.s3_port}",
                      aws_access_key_id=d.access_key, aws_secret_access_key=d.secret_key,
                      region_name="us-east-1",
                      config=Config(s3={"addressing_style": "virtual"}, signature_version="s3v4"))
    s3.create_bucket(Bucket="vhost-boto")
    s3.put_object(Bucket="vhost-boto", Key="dir/k", Body=b"virtual")
    assert s3.get_object(Bucket="vhost-boto", Key="dir/k")["Body"].read() == b"virtual"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="vhost-boto")["Contents"]] == ["dir/k"]
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "vhost-boto", "Key": "dir/k"})
    assert "//vhost-boto.s3.test:" in url
    import urllib.request
    with urllib.request.urlopen(url) as r:
        assert r.read() == b"virtual"
