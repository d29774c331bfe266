# SPDX-License-Identifier: Apache-2.0
"""POST Object, browser-based uploads (docs/s3-compatibility.md, "Browser uploads"): forms
made by boto3's generate_presigned_post (SigV4 and SigV2 policies) sent as
multipart/form-data in pieces, the policy's conditions (eq, starts-with,
content-length-range), expiry, signatures, success_action_status/redirect, x-amz-meta-*
fields, ACLs, anonymous uploads, and a file whose bytes look like the boundary."""
import base64
import datetime
import hashlib
import json
import os
import sys
import urllib.request

import boto3
import pytest
from botocore.config import Config

sys.path.insert(0, os.path.dirname(__file__))
from s3util import admin, connect, read_response  # noqa: E402
from test_s3_acl import anon, user  # noqa: E402

BOUNDARY = "----s3nfsFormBoundaryX7yZ"


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def form_body(fields, filename, content, boundary=BOUNDARY, after=()):
    out = b""
    for k, v in list(fields.items()):
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n"
                f"{v}\r\n").encode()
    out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{filename}\"\r\nContent-Type: application/x-upload\r\n\r\n").encode()
    out += content + b"\r\n"
    for k, v in after:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n"
                f"{v}\r\n").encode()
    return out + f"--{boundary}--\r\n".encode()


def post(d, path, body, piece=7, boundary=BOUNDARY):
    """Send the form in small pieces (the decoder must not care where they cut)."""
    host = d.s3_endpoint.split("//", 1)[1]
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n").encode()
    s = connect(d)
    s.sendall(head)
    for i in range(0, len(body), piece):
        s.sendall(body[i:i + piece])
    st, h, b = read_response(s)
    s.close()
    return st, h, b


def test_v4_form_upload(d):
    u = admin(d, "POST", "/tenants/1/users", {"name": "falice"})
    k = admin(d, "POST", f"/tenants/1/users/{u['id']}/keys")
    alice = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"],
                    config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                  retries={"max_attempts": 1}))
    alice.create_bucket(Bucket="form-b")
    pp = alice.generate_presigned_post(
        "form-b", "uploads/${filename}",
        Fields={"acl": "public-read", "x-amz-meta-who": "form", "success_action_status": "201",
                "Content-Type": "text/plain"},
        Conditions=[{"acl": "public-read"}, {"x-amz-meta-who": "form"},
                    {"success_action_status": "201"}, ["starts-with", "$Content-Type", "text/"],
                    ["content-length-range", 1, 4096]],
        ExpiresIn=300)
    assert pp["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"
    path = "/form-b"  # the form's action (pp["url"]), path style
    data = b"hello \r\n--" + BOUNDARY[:10].encode() + b" not a boundary\r\n"
    st, h, body = post(d, path, form_body(pp["fields"], "hello.txt", data))
    assert st == 201, body
    assert b"<Key>uploads/hello.txt</Key>" in body and h["etag"].strip('"') == hashlib.md5(
        data).hexdigest()
    o = alice.get_object(Bucket="form-b", Key="uploads/hello.txt")
    assert o["Body"].read() == data and o["Metadata"] == {"who": "form"}
    assert o["ContentType"] == "text/plain"
    # the signer owns it, the ACL made it public
    acl = alice.get_object_acl(Bucket="form-b", Key="uploads/hello.txt")
    assert acl["Owner"]["DisplayName"] == "falice"
    assert anon(d).get_object(Bucket="form-b", Key="uploads/hello.txt")["Body"].read() == data
    # content-length-range
    st, _, body = post(d, path, form_body(pp["fields"], "big.txt", b"x" * 5000))
    assert st == 400 and b"EntityTooLarge" in body
    # a field the policy does not name, a condition that fails
    f = dict(pp["fields"], **{"x-amz-meta-extra": "1"})
    st, _, body = post(d, path, form_body(f, "e.txt", b"e"))
    assert st == 403 and b"Extra input fields" in body
    f = dict(pp["fields"], **{"Content-Type": "image/png"})
    st, _, body = post(d, path, form_body(f, "c.txt", b"c"))
    assert st == 403 and b"Policy Condition failed" in body
    # a tampered key is outside the signed starts-with? here the key is exact: refused
    f = dict(pp["fields"], key="elsewhere/${filename}")
    st, _, body = post(d, path, form_body(f, "k.txt", b"k"))
    assert st == 403
    # a bad signature
    f = dict(pp["fields"], **{"x-amz-signature": "0" * 64})
    st, _, body = post(d, path, form_body(f, "s.txt", b"s"))
    assert st == 403 and b"SignatureDoesNotMatch" in body
    for k in ("big.txt", "e.txt", "c.txt", "s.txt"):
        assert "Contents" not in alice.list_objects_v2(Bucket="form-b", Prefix=f"uploads/{k}")
    # fields after the file are ignored, as S3 ignores them
    st, _, _ = post(d, path, form_body(pp["fields"], "late.txt", b"late",
                                       after=[("x-amz-meta-late", "1")]))
    assert st == 201
    assert "late" not in alice.head_object(Bucket="form-b", Key="uploads/late.txt")["Metadata"]


def test_v2_form_redirect_and_expiry(d):
    u = admin(d, "POST", "/tenants/1/users", {"name": "falice2"})
    k = admin(d, "POST", f"/tenants/1/users/{u['id']}/keys")
    alice = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    secret = k["secret_key"]
    v2 = boto3.client("s3", endpoint_url=d.s3_endpoint, region_name="us-east-1",
                      aws_access_key_id=k["access_key"], aws_secret_access_key=secret,
                      config=Config(signature_version="s3", s3={"addressing_style": "path"}))
    alice.create_bucket(Bucket="form-v2")
    pp = v2.generate_presigned_post(
        "form-v2", "r.bin", Fields={"success_action_redirect": "http://app.example/done?x=1"},
        Conditions=[{"success_action_redirect": "http://app.example/done?x=1"}])
    assert "AWSAccessKeyId" in pp["fields"] and "signature" in pp["fields"]
    st, h, _ = post(d, "/form-v2", form_body(pp["fields"], "r.bin", b"redirected"))
    assert st == 303
    loc = h["location"]
    assert loc.startswith("http://app.example/done?x=1&bucket=form-v2&key=r.bin&etag=")
    assert alice.get_object(Bucket="form-v2", Key="r.bin")["Body"].read() == b"redirected"
    # an expired policy, signed right
    exp = (datetime.datetime.utcnow() - datetime.timedelta(minutes=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    pol = base64.b64encode(json.dumps({"expiration": exp, "conditions": [
        {"bucket": "form-v2"}, {"key": "old.bin"}]}).encode()).decode()
    import hmac
    sig = base64.b64encode(hmac.new(secret.encode(), pol.encode(), hashlib.sha1).digest()).decode()
    f = {"key": "old.bin", "AWSAccessKeyId": pp["fields"]["AWSAccessKeyId"], "policy": pol,
         "signature": sig}
    st, _, body = post(d, "/form-v2", form_body(f, "o", b"o"))
    assert st == 403 and b"Policy expired" in body


def test_anonymous_and_cross_tenant_forms(d):
    _, alice = user(d, "falice3")
    alice.create_bucket(Bucket="form-open", ACL="public-read-write")
    alice.create_bucket(Bucket="form-closed")
    st, _, _ = post(d, "/form-open", form_body({"key": "anon.txt"}, "a", b"anon"), piece=1 << 16)
    assert st == 204
    assert alice.get_object(Bucket="form-open", Key="anon.txt")["Body"].read() == b"anon"
    st, _, body = post(d, "/form-closed", form_body({"key": "anon.txt"}, "a", b"anon"))
    assert st == 403
    # a form signed by another tenant's user reaches nothing of this tenant
    t = admin(d, "POST", "/tenants", {"name": "form-other"})
    _, zed = user(d, "zed", tenant=t["id"])
    pp = zed.generate_presigned_post("form-open", "z.txt")
    st, _, body = post(d, "/form-open", form_body(pp["fields"], "z", b"z"))
    assert st == 403
    # malformed forms
    st, _, body = post(d, "/form-open", b"--" + BOUNDARY.encode() + b"\r\nnonsense")
    assert st == 400
    st, _, body = post(d, "/form-open", form_body({}, "nokey", b"x"))
    assert st == 400 and b"key" in body


def test_large_form_streams(d):
    _, alice = user(d, "falice4")
    alice.create_bucket(Bucket="form-big")
    pp = alice.generate_presigned_post("form-big", "big.bin",
                                       Conditions=[["content-length-range", 0, 16 << 20]])
    # 9 MiB (crosses the 4 MiB upload chunks), with CRs and boundary-like runs inside
    blk = (b"\r\n--" + BOUNDARY.encode()[:-1] + b"\r" + os.urandom(4000)) * 2
    data = (blk * (9 * (1 << 20) // len(blk) + 1))[:9 * (1 << 20)]
    st, h, _ = post(d, "/form-big", form_body(pp["fields"], "big.bin", data), piece=1 << 20)
    assert st == 204
    got = alice.get_object(Bucket="form-big", Key="big.bin")["Body"].read()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    alice.delete_object(Bucket="form-big", Key="big.bin")
