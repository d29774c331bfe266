# SPDX-License-Identifier: Apache-2.0
"""bench/s3/s3util.py: S3 client side of bench/s3/run.sh (run with /usr/bin/python3).

Subcommands (all take --endpoint, --access-key, --secret-key):
  prep DIR    create bucket "bench", upload DIR/obj4k and DIR/obj64m with boto3,
              and write wrk path files in DIR: get4k.s3 / get64m.s3 (one presigned
              GET each) and put4k.s3 / put64m.s3 (16 / 8 presigned PUTs to distinct keys).
              Presigned URLs are made by boto3 (SigV4, host signed, UNSIGNED-PAYLOAD).
  fill N      PUT N small objects "list/key-000000".. into bucket "bench" from
              --threads threads over keep-alive connections (setup, not timed for
              the table; its rate is printed to stderr). boto3 presigns at ~0.4 ms
              per URL, too slow for 100,000 keys, so this uses a small SigV4
              presigner of its own, checked first against boto3's URL for one key.
  histfiles DIR N M
              wrk path files for a history (bench/s3/run.sh, state "hist"), for both
              servers: DIR/hist.s3 / hist.ngx (N PUT paths, keys "hist/k0000000"..),
              DIR/mix.s3 / mix.ngx (M lines "METHOD path": 70 % GET and 20 % PUT of
              random history keys, 10 % PUT or DELETE of "mix/" keys), and
              DIR/first.put.s3 / first.get.s3 / first.put.ngx / first.get.ngx (4 keys
              "first-N", for the first-read-after-write row). s3nfsd's paths are
              presigned with the presigner below (valid 6 hours).
  list        ListObjectsV2 over the --prefix (default "list/"): a raw HTTP walk with 1000-key
              pages (each page presigned by boto3, the XML scanned for keys and the
              continuation token), then the same walk through boto3's paginator
              (client parsing included). Prints RESULT lines; fails if the key count
              is not --expect.
"""
import argparse
import datetime
import hashlib
import hmac
import http.client
import os
import re
import sys
import threading
import time
import urllib.parse

import boto3
from botocore.config import Config

BUCKET = "bench"
REGION = "us-east-1"


def client(a):
    return boto3.client("s3", endpoint_url=a.endpoint, aws_access_key_id=a.access_key,
                        aws_secret_access_key=a.secret_key, region_name=REGION,
                        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                      retries={"max_attempts": 1}))


def path_of(url):
    u = urllib.parse.urlsplit(url)
    return u.path + ("?" + u.query if u.query else "")


def cmd_prep(a):
    s3 = client(a)
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    for name in ("obj4k", "obj64m"):
        with open(os.path.join(a.dir, name), "rb") as f:
            s3.put_object(Bucket=BUCKET, Key=name, Body=f.read())
    exp = 6 * 3600
    for name, key in (("get4k", "obj4k"), ("get64m", "obj64m")):
        url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key},
                                        ExpiresIn=exp)
        with open(os.path.join(a.dir, name + ".s3"), "w") as f:
            f.write(path_of(url) + "\n")
    for name in ("put4k", "put64m"):
        with open(os.path.join(a.dir, name + ".s3"), "w") as f:
            for i in range(16 if name == "put4k" else 8):
                url = s3.generate_presigned_url(
                    "put_object", Params={"Bucket": BUCKET, "Key": "%s-%02d" % (name, i)},
                    ExpiresIn=exp)
                f.write(path_of(url) + "\n")
    # One sanity GET through a presigned URL, so a signing mismatch is caught here.
    host = urllib.parse.urlsplit(a.endpoint).netloc
    conn = http.client.HTTPConnection(host, timeout=30)
    with open(os.path.join(a.dir, "get4k.s3")) as f:
        conn.request("GET", f.readline().strip())
    r = conn.getresponse()
    body = r.read()
    if r.status != 200 or len(body) != 4096:
        sys.exit("presigned GET failed: %d %r" % (r.status, body[:300]))


class Presigner:
    """SigV4 query-string presigning (AWS 'Authenticating Requests: Using Query
    Parameters'), for path-style URLs with only the host header signed."""

    def __init__(self, endpoint, access_key, secret_key, when=None):
        self.host = urllib.parse.urlsplit(endpoint).netloc
        self.ak = access_key
        now = when or datetime.datetime.now(datetime.timezone.utc)
        self.amzdate = now.strftime("%Y%m%dT%H%M%SZ")
        self.day = now.strftime("%Y%m%d")
        self.scope = "%s/%s/s3/aws4_request" % (self.day, REGION)
        k = hmac.new(("AWS4" + secret_key).encode(), self.day.encode(), hashlib.sha256).digest()
        k = hmac.new(k, REGION.encode(), hashlib.sha256).digest()
        k = hmac.new(k, b"s3", hashlib.sha256).digest()
        self.key = hmac.new(k, b"aws4_request", hashlib.sha256).digest()

    def path(self, method, bucket, key, expires=3600):
        q = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
             ("X-Amz-Credential", "%s/%s" % (self.ak, self.scope)),
             ("X-Amz-Date", self.amzdate), ("X-Amz-Expires", str(expires)),
             ("X-Amz-SignedHeaders", "host")]
        qs = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                                 urllib.parse.quote(v, safe="-_.~")) for k, v in sorted(q))
        upath = "/" + bucket + "/" + urllib.parse.quote(key, safe="/-_.~")
        creq = "\n".join([method, upath, qs, "host:" + self.host, "", "host", "UNSIGNED-PAYLOAD"])
        sts = "\n".join(["AWS4-HMAC-SHA256", self.amzdate, self.scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        sig = hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()
        return upath + "?" + qs + "&X-Amz-Signature=" + sig


def presigner_checked(a):
    """Our presigner, after checking it yields boto3's URL for the same second."""
    s3 = client(a)
    for _ in range(5):
        t0 = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        ref = path_of(s3.generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": "list/key-000000"}, ExpiresIn=3600))
        t1 = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        if t0 != t1:
            continue
        p = Presigner(a.endpoint, a.access_key, a.secret_key, t0)
        ours = p.path("PUT", BUCKET, "list/key-000000", 3600)
        def norm(u):
            path, _, q = u.partition("?")
            return path, sorted(urllib.parse.parse_qsl(q))
        if norm(ours) != norm(ref):
            sys.exit("presigner mismatch:\n ours  %s\n boto3 %s" % (ours, ref))
        return p
    sys.exit("presigner check: clock kept changing second")


def cmd_histfiles(a):
    p = presigner_checked(a)
    exp = 6 * 3600
    rnd = __import__("random").Random(1717)

    def write(name, lines):
        with open(os.path.join(a.dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")

    keys = ["hist/k%07d" % i for i in range(a.n)]
    write("hist.s3", (p.path("PUT", BUCKET, k, exp) for k in keys))
    write("hist.ngx", ("/%s/%s" % (BUCKET, k) for k in keys))
    mix_s3, mix_ngx = [], []
    for _ in range(a.m):
        r = rnd.random()
        if r < 0.9:
            m, k = ("GET" if r < 0.7 else "PUT"), keys[rnd.randrange(a.n)]
        else:
            m, k = rnd.choice(("PUT", "DELETE")), "mix/k%04d" % rnd.randrange(1000)
        mix_s3.append("%s %s" % (m, p.path(m, BUCKET, k, exp)))
        mix_ngx.append("%s /%s/%s" % (m, BUCKET, k))
    write("mix.s3", mix_s3)
    write("mix.ngx", mix_ngx)
    firsts = ["first-%d" % i for i in range(4)]
    for m in ("PUT", "GET"):
        write("first.%s.s3" % m.lower(), (p.path(m, BUCKET, k, exp) for k in firsts))
        write("first.%s.ngx" % m.lower(), ("/%s/%s" % (BUCKET, k) for k in firsts))


def cmd_fill(a):
    p = presigner_checked(a)
    host = p.host
    body = b"x" * 100
    n = a.n
    errors = []
    nxt = [0]
    lock = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection(host, timeout=60)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= n or errors:
                break
            conn.request("PUT", p.path("PUT", BUCKET, "list/key-%06d" % i), body=body)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                errors.append("PUT key-%06d: %d %r" % (i, r.status, data[:300]))
                break
        conn.close()

    t0 = time.time()
    ts = [threading.Thread(target=worker) for _ in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    if errors:
        sys.exit(errors[0])
    print("fill: %d PUTs in %.1f s (%.0f/s, Python client)" % (n, dt, n / dt), file=sys.stderr)


KEY_RE = re.compile(rb"<Key>")
TOKEN_RE = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")
TRUNC_RE = re.compile(rb"<IsTruncated>true</IsTruncated>")


def unescape(b):
    return (b.decode().replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
            .replace("&apos;", "'").replace("&amp;", "&"))


def cmd_list(a):
    s3 = client(a)
    host = urllib.parse.urlsplit(a.endpoint).netloc
    conn = http.client.HTTPConnection(host, timeout=120)
    # Raw walk: server time plus presigning and a regex scan per page.
    best = None
    for _ in range(a.repeat):
        token, keys, pages = None, 0, 0
        t0 = time.time()
        while True:
            params = {"Bucket": BUCKET, "Prefix": a.prefix, "MaxKeys": 1000}
            if token:
                params["ContinuationToken"] = token
            url = s3.generate_presigned_url("list_objects_v2", Params=params, ExpiresIn=3600)
            conn.request("GET", path_of(url))
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                sys.exit("ListObjectsV2: %d %r" % (r.status, body[:300]))
            pages += 1
            keys += len(KEY_RE.findall(body))
            if not TRUNC_RE.search(body):
                break
            m = TOKEN_RE.search(body)
            if not m:
                sys.exit("ListObjectsV2: truncated page without NextContinuationToken")
            token = unescape(m.group(1))
        dt = time.time() - t0
        if keys != a.expect:
            sys.exit("ListObjectsV2 returned %d keys, expected %d" % (keys, a.expect))
        best = dt if best is None else min(best, dt)
    print("RESULT list_%dk_raw %.3f s" % (a.expect // 1000, best))
    print("RESULT list_%dk_raw_rate %.0f keys/s" % (a.expect // 1000, a.expect / best))
    print("RESULT list_page_1000 %.2f ms" % (best / pages * 1e3))
    # boto3 paginator: what a Python application sees (XML parsing dominates).
    t0 = time.time()
    keys = 0
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=a.prefix, PaginationConfig={"PageSize": 1000}):
        keys += page.get("KeyCount", len(page.get("Contents", [])))
    dt = time.time() - t0
    if keys != a.expect:
        sys.exit("boto3 paginator saw %d keys, expected %d" % (keys, a.expect))
    print("RESULT list_%dk_boto3 %.3f s" % (a.expect // 1000, dt))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", required=True)
    ap.add_argument("--secret-key", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep")
    p.add_argument("dir")
    p = sub.add_parser("fill")
    p.add_argument("n", type=int)
    p.add_argument("--threads", type=int, default=8)
    p = sub.add_parser("histfiles")
    p.add_argument("dir")
    p.add_argument("n", type=int)
    p.add_argument("m", type=int)
    p = sub.add_parser("list")
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--prefix", default="list/")
    p.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    {"prep": cmd_prep, "fill": cmd_fill, "histfiles": cmd_histfiles, "list": cmd_list}[a.cmd](a)


if __name__ == "__main__":
    main()
