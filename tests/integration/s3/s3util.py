# SPDX-License-Identifier: Apache-2.0
"""Helpers for the S3 integration tests: a small independent SigV4 signer (header,
aws-chunked streaming) for hand-made requests, and raw HTTP over sockets."""
import datetime
import hashlib
import hmac
import json
import socket
import urllib.parse
import urllib.request

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _hmac(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def signing_key(secret, date, region="us-east-1", service="s3"):
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def amz_now(offset=0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return t.strftime("%Y%m%dT%H%M%SZ")


def sign_headers(method, path, query, headers, payload_hash, akey, secret, amz_date,
                 region="us-east-1"):
    """Return the Authorization header for a request. headers: dict (host included)."""
    headers = {k.lower(): v for k, v in headers.items()}
    headers["x-amz-date"] = amz_date
    headers["x-amz-content-sha256"] = payload_hash
    names = sorted(headers)
    canon_q = "&".join(sorted(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in query))
    canon = "\n".join([
        method,
        urllib.parse.quote(urllib.parse.unquote(path), safe="/-_.~"),
        canon_q,
        "".join(f"{n}:{' '.join(str(headers[n]).split())}\n" for n in names),
        ";".join(names),
        payload_hash,
    ])
    date = amz_date[:8]
    scope = f"{date}/{region}/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    key = signing_key(secret, date, region)
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={akey}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={sig}")
    return headers, key, sig, scope


def chunk_signature(key, amz_date, scope, prev, data):
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA256,
                     hashlib.sha256(data).hexdigest()])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def aws_chunked_body(key, amz_date, scope, seed, chunks, tamper_chunk=None):
    out = b""
    prev = seed
    for i, c in enumerate(list(chunks) + [b""]):
        sig = chunk_signature(key, amz_date, scope, prev, c)
        data = c
        if tamper_chunk == i and c:
            data = bytes([c[0] ^ 1]) + c[1:]
        out += f"{len(c):x};chunk-signature={sig}\r\n".encode() + data + b"\r\n"
        prev = sig
    return out


def build_request(method, target, headers, body=b""):
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def signed_request(d, method, path, query=(), headers=None, body=b"", payload_hash=None,
                   amz_date=None, secret=None):
    host = d.s3_endpoint.split("//", 1)[1]
    h = {"host": host}
    h.update(headers or {})
    if payload_hash is None:
        payload_hash = hashlib.sha256(body).hexdigest()
    amz_date = amz_date or amz_now()
    h, key, sig, scope = sign_headers(method, path, query, h, payload_hash, d.access_key,
                                      secret or d.secret_key, amz_date)
    if "content-length" not in h and "transfer-encoding" not in h:
        h["content-length"] = str(len(body))
    target = path + ("?" + urllib.parse.urlencode(list(query), quote_via=urllib.parse.quote)
                     if query else "")
    return build_request(method, target, h, body), key, sig, scope, amz_date


def connect(d, timeout=10):
    host, port = d.s3_endpoint.split("//", 1)[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def read_response(s, head=False):
    """Read one HTTP/1.1 response (Content-Length bodies). Returns (status, headers, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(65536)
        if not c:
            raise ConnectionError("closed before headers: %r" % buf)
        buf += c
    hdr, rest = buf.split(b"\r\n\r\n", 1)
    lines = hdr.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if status == 100:
        return status, headers, rest
    n = 0 if head or status in (204, 304) else int(headers.get("content-length", "0"))
    while len(rest) < n:
        c = s.recv(65536)
        if not c:
            raise ConnectionError("closed mid-body")
        rest += c
    return status, headers, rest[:n]


def read_responses(s, count):
    """Read @count pipelined responses."""
    out = []
    data = b""
    while len(out) < count:
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c:
                raise ConnectionError("closed")
            data += c
        hdr, rest = data.split(b"\r\n\r\n", 1)
        lines = hdr.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            rest += s.recv(65536)
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def admin(d, method, path, body=None):
    """A call of the admin API (/api/v1 + @path) with the bootstrap admin token."""
    req = urllib.request.Request(d.admin_endpoint + "/api/v1" + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        data = r.read()
        return json.loads(data) if data else None
