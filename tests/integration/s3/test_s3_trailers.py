# SPDX-License-Identifier: Apache-2.0
"""HTTP trailer fields after a chunked request body (Transfer-Encoding: chunked,
then `0\\r\\nName: value\\r\\n\\r\\n`), one test per shape: a plain chunked body,
an aws-chunked upload whose trailing checksum (and trailer signature) travel as
HTTP trailer fields, and a trailer arriving after an error answer. Trailers
arrive after the request has left the HTTP parser for the workers; they once
dereferenced NULL there and took the whole server down, so every test checks
that the server still answers afterwards, on the same connection where the
protocol allows it and on a new one."""
import base64
import hashlib
import hmac
import os
import sys
import zlib

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import admin, chunk_signature, connect, read_response, signed_request  # noqa: E402


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    s3nfsd_module.boto3().create_bucket(Bucket="trl")
    return s3nfsd_module


def alive(d):
    """The daemon is running and serves a new connection."""
    assert d.proc.poll() is None, "s3nfsd died:\n" + d.tail()
    assert d.boto3().list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


def get(d, key, bucket="trl"):
    try:
        return d.boto3().get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError:
        return None


def http_chunks(pieces, trailers=b"", exts=None):
    """An HTTP chunked body: one chunk per piece, then the last chunk and trailers."""
    out = b""
    for i, p in enumerate(pieces):
        ext = exts[i] if exts else b""
        out += b"%x%s\r\n" % (len(p), ext) + p + b"\r\n"
    last = exts[len(pieces)] if exts else b""
    return out + b"0%s\r\n" % last + trailers + b"\r\n"


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def responses(s, count):
    """Up to @count responses from @s, fewer if one says Connection: close."""
    out, data = [], b""
    while len(out) < count:
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c:
                raise ConnectionError("closed before a response: %r" % data[:200])
            data += c
        hdr, rest = data.split(b"\r\n\r\n", 1)
        lines = hdr.decode().split("\r\n")
        h = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        n = int(h.get("content-length", "0"))
        while len(rest) < n:
            c = s.recv(65536)
            if not c:
                raise ConnectionError("closed mid-body")
            rest += c
        out.append((int(lines[0].split()[1]), h, rest[:n]))
        data = rest[n:]
        if h.get("connection") == "close":
            break
    return out


def send_and_get(d, raw, key):
    """Send @raw and right behind it a GET of @key; the GET is answered on the
    same connection unless the first answer closes it."""
    s = connect(d)
    s.sendall(raw + signed_request(d, "GET", f"/trl/{key}")[0])
    rs = responses(s, 2)
    s.close()
    st, h, body = rs[0]
    return st, h, body, rs[1] if len(rs) > 1 else None


# ---------------------------------------------------------------- plain chunked


@pytest.mark.parametrize("signed", [False, True])
def test_plain_chunked_with_trailer(d, signed):
    data = os.urandom(70000)
    pieces = [data[:1000], data[1000:65000], data[65000:]]
    body = http_chunks(pieces, b"X-Trailer: v\r\nX-Empty:\r\nExpires: never\r\n")
    key = f"plain-{signed}"
    raw = signed_request(d, "PUT", f"/trl/{key}", headers={"transfer-encoding": "chunked"},
                         body=body, payload_hash=(hashlib.sha256(data).hexdigest() if signed
                                                  else "UNSIGNED-PAYLOAD"))[0]
    st, h, resp, again = send_and_get(d, raw, key)
    assert st == 200, resp
    assert h["etag"] == '"%s"' % hashlib.md5(data).hexdigest()
    # keep-alive: the pipelined GET behind the trailer is answered on the same connection
    assert again is not None and again[0] == 200 and again[2] == data
    alive(d)
    assert get(d, key) == data


def test_plain_chunked_trailer_on_request_document(d):
    """A request document (DeleteObjects) sent chunked with a trailer."""
    d.boto3().put_object(Bucket="trl", Key="doomed", Body=b"x")
    doc = b"<Delete><Object><Key>doomed</Key></Object></Delete>"
    raw = signed_request(d, "POST", "/trl", query=[("delete", "")],
                         headers={"transfer-encoding": "chunked"},
                         body=http_chunks([doc[:10], doc[10:]], b"X-Trailer: v\r\n"),
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    st, h, body, again = send_and_get(d, raw, "doomed")
    st2 = again[0]
    assert st == 200 and b"<Deleted><Key>doomed</Key></Deleted>" in body, body
    assert st2 == 404
    alive(d)


def test_trailer_fields_over_the_header_limit(d):
    body = http_chunks([b"abc"], b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000) for i in range(80)))
    raw = signed_request(d, "PUT", "/trl/huge-trailer", headers={"transfer-encoding": "chunked"},
                         body=body, payload_hash="UNSIGNED-PAYLOAD")[0]
    s = connect(d)
    s.sendall(raw)
    st, h, resp = read_response(s)
    s.close()
    assert st == 431 and b"RequestHeaderSectionTooLarge" in resp
    assert get(d, "huge-trailer") is None
    alive(d)


# ---------------------------------------------------------------- aws-chunked, trailing checksum


AWS_HDRS = {"transfer-encoding": "chunked", "content-encoding": "aws-chunked",
            "x-amz-trailer": "x-amz-checksum-crc32"}


def test_aws_chunked_trailer_in_http_trailer(d):
    """What botocore and aws-cli send over TLS: the aws chunks are the HTTP
    chunks, the checksum is an HTTP trailer field."""
    data = os.urandom(200000)
    pieces = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    for value, expect, key in ((crc32_b64(data), 200, "same-ok"),
                               ("AAAAAA==", 400, "same-bad")):
        body = http_chunks(pieces, f"x-amz-checksum-crc32:{value}\r\n".encode())
        raw = signed_request(d, "PUT", f"/trl/{key}",
                             headers=dict(AWS_HDRS, **{"x-amz-decoded-content-length":
                                                       str(len(data))}),
                             body=body, payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")[0]
        st, h, resp, again = send_and_get(d, raw, key)
        assert st == expect, resp
        if expect == 200:
            assert h["x-amz-checksum-crc32"] == value
            assert again is not None and again[0] == 200 and again[2] == data
        else:
            assert b"BadDigest" in resp
        alive(d)
        assert get(d, key) == (data if expect == 200 else None)
    g = d.boto3().head_object(Bucket="trl", Key="same-ok", ChecksumMode="ENABLED")
    assert g["ChecksumCRC32"] == crc32_b64(data)


def test_aws_chunked_trailer_nested_in_http_chunks(d):
    """The aws-chunked stream inside HTTP chunks of other sizes (an HTTP
    client chunking an SDK's encoded stream), with an HTTP trailer of its own."""
    data = os.urandom(100000)
    inner = http_chunks([data[:70000], data[70000:]],
                        f"x-amz-checksum-crc32:{crc32_b64(data)}\r\n".encode())
    body = http_chunks([inner[:7], inner[7:50000], inner[50000:]], b"X-Proxy: 1\r\n")
    raw = signed_request(d, "PUT", "/trl/nested", headers=AWS_HDRS, body=body,
                         payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")[0]
    st, h, resp, again = send_and_get(d, raw, "nested")
    assert st == 200, resp
    assert again is not None and again[2] == data
    alive(d)


def trailer_signature(key, amz_date, scope, prev, trailer):
    sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev,
                     hashlib.sha256(trailer).hexdigest()])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize("tamper", [False, True])
def test_aws_chunked_signed_trailer_in_http_framing(d, tamper):
    """Signed streaming with a trailer: chunk signatures as HTTP chunk
    extensions, checksum and trailer signature as HTTP trailer fields."""
    data = os.urandom(150000)
    pieces = [data[:65536], data[65536:131072], data[131072:]]
    key = f"signed-{tamper}"
    # sign the headers first (the body's framing does not enter the seed signature)
    raw, skey, seed, scope, amz = signed_request(
        d, "PUT", f"/trl/{key}", headers=dict(AWS_HDRS, **{"x-amz-decoded-content-length":
                                                          str(len(data))}),
        payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
    exts, prev = [], seed
    for p in pieces + [b""]:
        prev = chunk_signature(skey, amz, scope, prev, p)
        exts.append(b";chunk-signature=" + prev.encode())
    trailer = f"x-amz-checksum-crc32:{crc32_b64(data)}\n".encode()
    tsig = trailer_signature(skey, amz, scope, prev, trailer)
    if tamper:
        tsig = ("0" if tsig[0] != "0" else "1") + tsig[1:]
    body = http_chunks(pieces, trailer.rstrip(b"\n") + b"\r\nx-amz-trailer-signature:" +
                       tsig.encode() + b"\r\n", exts)
    st, h, resp, again = send_and_get(d, raw + body, key)
    if tamper:
        assert st == 403 and b"SignatureDoesNotMatch" in resp, resp
        assert get(d, key) is None
    else:
        assert st == 200, resp
        assert again is not None and again[2] == data
    alive(d)


# ---------------------------------------------------------------- after an error answer


def refused(d, raw, status, code, closes=True):
    """Send @raw whole (body and trailer) and a GET behind it. The error must
    arrive; refused before the body was read, the connection closes after it
    (the GET is dropped with the rest of the input), refused after, the GET
    is answered on the same connection. The server keeps serving."""
    s = connect(d, timeout=30)
    s.sendall(raw + signed_request(d, "GET", "/trl")[0])
    rs = responses(s, 2)
    st, h, body = rs[0]
    assert st == status and code in body, (st, body[:300])
    if closes:
        assert len(rs) == 1 and h.get("connection") == "close", h
        assert s.recv(1) == b""
    else:
        assert len(rs) == 2 and rs[1][0] == 200
    s.close()
    alive(d)


def test_trailer_after_error_answer(d):
    trailer = b"X-Trailer: v\r\nx-amz-checksum-crc32:AAAAAA==\r\n"
    body = http_chunks([os.urandom(30000), os.urandom(100)], trailer)
    te = {"transfer-encoding": "chunked"}
    # refused at the headers: bad signature, missing bucket
    raw = signed_request(d, "PUT", "/trl/k403", headers=te, body=body,
                         payload_hash="UNSIGNED-PAYLOAD", secret="wrong-secret")[0]
    refused(d, raw, 403, b"SignatureDoesNotMatch")
    raw = signed_request(d, "PUT", "/no-such-bucket-tr/k", headers=te, body=body,
                         payload_hash="UNSIGNED-PAYLOAD")[0]
    refused(d, raw, 404, b"NoSuchBucket")
    # refused after the body (and its trailer) were read: a request document
    doc = b"<Delete><Object><Key>a</Key></Object></Delete>"
    raw = signed_request(d, "POST", "/no-such-bucket-tr", query=[("delete", "")], headers=te,
                         body=http_chunks([doc], trailer), payload_hash="UNSIGNED-PAYLOAD")[0]
    refused(d, raw, 404, b"NoSuchBucket", closes=False)
    # refused by the bucket's quota (when the upload commits, after its body)
    d.boto3().create_bucket(Bucket="tr-quota")
    admin(d, "PUT", "/tenants/1/buckets/tr-quota/quota", {"bytes_limit": 1000})
    try:
        raw = signed_request(d, "PUT", "/tr-quota/big", headers=te, body=body,
                             payload_hash="UNSIGNED-PAYLOAD")[0]
        refused(d, raw, 403, b"QuotaExceeded", closes=False)
        assert get(d, "big", bucket="tr-quota") is None
    finally:
        admin(d, "PUT", "/tenants/1/buckets/tr-quota/quota", {"bytes_limit": 0})
    # an aws-chunked checksum that does not match, found after the trailer
    data = b"payload" * 100
    raw = signed_request(d, "PUT", "/trl/bad-sum", headers=AWS_HDRS,
                         body=http_chunks([data], b"x-amz-checksum-crc32:AAAAAA==\r\n"),
                         payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")[0]
    refused(d, raw, 400, b"BadDigest", closes=False)
    assert get(d, "bad-sum") is None
    alive(d)
