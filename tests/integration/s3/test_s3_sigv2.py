# SPDX-License-Identifier: Apache-2.0
"""AWS Signature Version 2 (legacy; docs/s3-compatibility.md, "Authentication"): boto3's
header and presigned SigV2, aws cli v1's `s3 presign`, s3cmd with signature_v2 and
`s3cmd signurl`, hand-signed requests checking the exact string to sign (sub-resources,
x-amz-* headers, expiry, tampering); and SigV4 with a Date header in the RFC 2822 forms
(numeric zones) botocore sends."""
import base64
import datetime
import email.utils
import hashlib
import hmac
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from s3util import build_request, connect, read_response, signing_key
from test_s3_clients import s3cmd as s3cmd_run


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def v2_client(d, **cfg):
    return boto3.client("s3", endpoint_url=d.s3_endpoint, aws_access_key_id=d.access_key,
                        aws_secret_access_key=d.secret_key, region_name="us-east-1",
                        config=Config(signature_version="s3", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **cfg))


def v2_sign(secret, sts):
    return base64.b64encode(hmac.new(secret.encode(), sts.encode(), hashlib.sha1).digest()).decode()


def raw(d, method, target, headers, body=b""):
    s = connect(d)
    host = d.s3_endpoint.split("//", 1)[1]
    h = {"Content-Length": str(len(body))}
    if not any(k.lower() == "host" for k in headers):
        h["Host"] = host
    h.update(headers)
    s.sendall(build_request(method, target, h, body))
    st, hd, b = read_response(s, head=method == "HEAD")
    s.close()
    return st, b


def test_boto3_sigv2_header_and_presigned(d):
    s3 = v2_client(d)
    s3.create_bucket(Bucket="v2-bucket")
    s3.put_object(Bucket="v2-bucket", Key="dir/a b+c.txt", Body=b"signed v2",
                  Metadata={"who": "v2"}, ContentType="text/plain")
    got = s3.get_object(Bucket="v2-bucket", Key="dir/a b+c.txt")
    assert got["Body"].read() == b"signed v2" and got["Metadata"] == {"who": "v2"}
    # (no ?tagging, ?acl, ?uploads calls: botocore's SigV2 signer signs such a sub-resource
    # twice, "/k?tagging?tagging"; s3cmd and test_sigv2_by_hand sign them right)
    assert s3.head_object(Bucket="v2-bucket", Key="dir/a b+c.txt")["ContentLength"] == 9
    assert [o["Key"] for o in s3.list_objects(Bucket="v2-bucket", Prefix="dir/")["Contents"]] == [
        "dir/a b+c.txt"]
    s3.put_object(Bucket="v2-bucket", Key="mp", Body=b"part")
    # presigned SigV2 (what boto3 makes with signature_version "s3")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "v2-bucket",
                                                          "Key": "dir/a b+c.txt"}, ExpiresIn=300)
    assert "AWSAccessKeyId=" in url and "Signature=" in url
    with urllib.request.urlopen(url) as r:
        assert r.read() == b"signed v2"
    # with a response-* override: a sub-resource of the string to sign
    url = s3.generate_presigned_url("get_object", Params={
        "Bucket": "v2-bucket", "Key": "mp", "ResponseContentType": "application/x-test"})
    with urllib.request.urlopen(url) as r:
        assert r.headers["Content-Type"] == "application/x-test" and r.read() == b"part"
    put = s3.generate_presigned_url("put_object", Params={"Bucket": "v2-bucket", "Key": "up"})
    u = urllib.parse.urlsplit(put)
    assert raw(d, "PUT", f"{u.path}?{u.query}", {}, b"uploaded")[0] == 200
    assert s3.get_object(Bucket="v2-bucket", Key="up")["Body"].read() == b"uploaded"
    # a wrong secret
    bad = boto3.client("s3", endpoint_url=d.s3_endpoint, aws_access_key_id=d.access_key,
                       aws_secret_access_key="wrong" + d.secret_key, region_name="us-east-1",
                       config=Config(signature_version="s3", s3={"addressing_style": "path"},
                                     retries={"max_attempts": 1}))
    with pytest.raises(ClientError) as e:
        bad.get_object(Bucket="v2-bucket", Key="up")
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_sigv2_by_hand(d):
    """The exact string to sign: sub-resources sorted with their decoded values, x-amz-*
    headers lower-cased and joined, x-amz-date in place of Date; expiry; tampering."""
    s3 = v2_client(d)
    s3.create_bucket(Bucket="v2-hand")
    s3.put_object(Bucket="v2-hand", Key="k", Body=b"hand")
    now = email.utils.formatdate(usegmt=True)
    sts = f"GET\n\n\n\nx-amz-date:{now}\nx-amz-meta-a:one,two\n/v2-hand/k?tagging"
    h = {"x-amz-date": now, "X-Amz-Meta-A": "one", "x-amz-meta-a": "two",
         "Authorization": f"AWS {d.access_key}:{v2_sign(d.secret_key, sts)}"}
    st, body = raw(d, "GET", "/v2-hand/k?tagging", h)
    assert st == 200 and b"<Tagging" in body, body
    # the same signature for another sub-resource, or a changed header, does not verify
    assert raw(d, "GET", "/v2-hand/k?acl", h)[0] == 403
    h2 = dict(h, **{"x-amz-meta-a": "three"})
    assert raw(d, "GET", "/v2-hand/k?tagging", h2)[0] == 403
    # Date instead of x-amz-date; Content-Type and Content-MD5 are signed
    body = b"put by hand"
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    sts = f"PUT\n{md5}\ntext/x-hand\n{now}\n/v2-hand/put%20me"
    st, _ = raw(d, "PUT", "/v2-hand/put%20me", {
        "Date": now, "Content-MD5": md5, "Content-Type": "text/x-hand",
        "Authorization": f"AWS {d.access_key}:{v2_sign(d.secret_key, sts)}"}, body)
    assert st == 200
    assert s3.get_object(Bucket="v2-hand", Key="put me")["Body"].read() == body
    # a date 20 minutes off
    old = email.utils.formatdate(time.time() - 1200, usegmt=True)
    sts = f"GET\n\n\n{old}\n/v2-hand/k"
    st, body = raw(d, "GET", "/v2-hand/k", {
        "Date": old, "Authorization": f"AWS {d.access_key}:{v2_sign(d.secret_key, sts)}"})
    assert st == 403 and b"RequestTimeTooSkewed" in body
    # presigned: expired, and tampered
    exp = str(int(time.time()) - 5)
    sig = v2_sign(d.secret_key, f"GET\n\n\n{exp}\n/v2-hand/k")
    q = urllib.parse.urlencode({"AWSAccessKeyId": d.access_key, "Expires": exp, "Signature": sig})
    st, body = raw(d, "GET", f"/v2-hand/k?{q}", {})
    assert st == 403 and b"expired" in body
    exp = str(int(time.time()) + 60)
    sig = v2_sign(d.secret_key, f"GET\n\n\n{exp}\n/v2-hand/k")
    q = urllib.parse.urlencode({"AWSAccessKeyId": d.access_key, "Expires": exp, "Signature": sig})
    assert raw(d, "GET", f"/v2-hand/k?{q}", {}) == (200, b"hand")
    assert raw(d, "GET", f"/v2-hand/put%20me?{q}", {})[0] == 403
    q2 = urllib.parse.urlencode({"AWSAccessKeyId": d.access_key, "Signature": sig})
    st, body = raw(d, "GET", f"/v2-hand/k?{q2}", {})
    assert st == 400 and b"AuthorizationQueryParametersError" in body


@pytest.mark.skipif(not shutil.which("aws"), reason="aws cli not installed")
def test_aws_cli_v1_presign(d, tmp_path):
    v2_client(d).create_bucket(Bucket="v2-cli")
    v2_client(d).put_object(Bucket="v2-cli", Key="f", Body=b"cli presigned")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    r = subprocess.run(["aws", "--endpoint-url", d.s3_endpoint, "s3", "presign", "s3://v2-cli/f"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == b"cli presigned"


@pytest.mark.skipif(not shutil.which("s3cmd"), reason="s3cmd not installed")
def test_s3cmd_sigv2_and_signurl(d, tmp_path):
    def s3cmd(*args):
        return s3cmd_run(d, tmp_path, *args, v2=True).stdout
    s3cmd("mb", "s3://v2-s3cmd")
    f = tmp_path / "f.txt"
    f.write_bytes(b"s3cmd v2")
    s3cmd("put", str(f), "s3://v2-s3cmd/f.txt")
    assert "f.txt" in s3cmd("ls", "s3://v2-s3cmd/")
    s3cmd("setacl", "--acl-public", "s3://v2-s3cmd/f.txt")
    assert "*anon*: READ" in s3cmd("info", "s3://v2-s3cmd/f.txt")
    with urllib.request.urlopen(f"{d.s3_endpoint}/v2-s3cmd/f.txt") as resp:  # public now
        assert resp.read() == b"s3cmd v2"
    s3cmd("setacl", "--acl-private", "s3://v2-s3cmd/f.txt")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{d.s3_endpoint}/v2-s3cmd/f.txt")
    assert e.value.code == 403
    url = s3cmd("signurl", "s3://v2-s3cmd/f.txt", "+300").strip()
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == b"s3cmd v2"


def test_sigv4_date_header_forms(d):
    """SigV4 with Date instead of x-amz-date, in the forms AWS accepts; and boto3 sending
    a caller's Date (email.utils' "-0000" zone) next to its X-Amz-Date."""
    s3 = d.boto3()

    def add_date(request, **kw):
        request.headers["Date"] = email.utils.formatdate(time.time())
    s3.meta.events.register("before-sign.s3.*", add_date)
    s3.create_bucket(Bucket="v4-date-b3")
    s3.put_object(Bucket="v4-date-b3", Key="k", Body=b"dated")
    assert s3.get_object(Bucket="v4-date-b3", Key="k")["Body"].read() == b"dated"
    host = d.s3_endpoint.split("//", 1)[1]
    v2_client(d).create_bucket(Bucket="v4-date")
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    forms = [now.strftime("%a, %d %b %Y %H:%M:%S GMT"), now.strftime("%a, %d %b %Y %H:%M:%S +0000"),
             now.strftime("%a, %d %b %Y %H:%M:%S -0000"), now.strftime("%d %b %Y %H:%M:%S +0000"),
             (now + datetime.timedelta(hours=2)).strftime("%a, %d %b %Y %H:%M:%S +0200")]
    for date in forms:
        empty = hashlib.sha256(b"").hexdigest()
        # signed as botocore signs when the caller sets Date: the ISO form of that time
        amz = now.strftime("%Y%m%dT%H%M%SZ")
        canon_hdrs = {"host": host, "date": date, "x-amz-content-sha256": empty}
        signed = ";".join(sorted(canon_hdrs))
        canon = "\n".join(["GET", "/v4-date", "",
                           "".join(f"{k}:{canon_hdrs[k]}\n" for k in sorted(canon_hdrs)),
                           signed, empty])
        scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
        sig = hmac.new(signing_key(d.secret_key, amz[:8]), sts.encode(), hashlib.sha256).hexdigest()
        h = dict(canon_hdrs)
        h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={d.access_key}/{scope}, "
                              f"SignedHeaders={signed}, Signature={sig}")
        st, body = raw(d, "GET", "/v4-date", h)
        assert st == 200, (date, body)
