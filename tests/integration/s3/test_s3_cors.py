# SPDX-License-Identifier: Apache-2.0
"""CORS (docs/s3-compatibility.md, "CORS"): Put/Get/DeleteBucketCors with boto3, preflight
OPTIONS by hand (allowed, refused, no configuration), CORS headers on actual requests,
and, where Debian's chromium is installed, a real browser page on another origin doing a
fetch() that needs a preflight."""
import http.server
import os
import shutil
import subprocess
import sys
import threading

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import build_request, connect, read_response  # noqa: E402

RULES = {"CORSRules": [
    {"ID": "app", "AllowedOrigins": ["http://app.example", "http://*.apps.example"],
     "AllowedMethods": ["GET", "PUT"], "AllowedHeaders": ["x-amz-*", "Content-Type"],
     "ExposeHeaders": ["ETag", "x-amz-request-id"], "MaxAgeSeconds": 600},
    {"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "HEAD"]},
]}


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def raw(d, method, path, headers):
    s = connect(d)
    h = {"Host": d.s3_endpoint.split("//", 1)[1], "Content-Length": "0"}
    h.update(headers)
    s.sendall(build_request(method, path, h))
    st, hd, body = read_response(s, head=method in ("HEAD",))
    s.close()
    return st, hd, body


def test_cors_configuration_and_preflight(d):
    s3 = d.boto3()
    s3.create_bucket(Bucket="cors-b", ACL="public-read")
    s3.put_object(Bucket="cors-b", Key="obj", Body=b"cors", ACL="public-read")
    # no configuration yet
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket="cors-b")
    assert e.value.response["Error"]["Code"] == "NoSuchCORSConfiguration"
    st, _, body = raw(d, "OPTIONS", "/cors-b/obj", {"Origin": "http://app.example",
                                                    "Access-Control-Request-Method": "GET"})
    assert st == 403 and b"AccessForbidden" in body
    s3.put_bucket_cors(Bucket="cors-b", CORSConfiguration=RULES)
    got = s3.get_bucket_cors(Bucket="cors-b")["CORSRules"]
    assert got[0]["AllowedOrigins"] == ["http://app.example", "http://*.apps.example"]
    assert got[0]["MaxAgeSeconds"] == 600 and got[1]["AllowedMethods"] == ["GET", "HEAD"]
    # preflight: the first matching rule answers
    st, h, _ = raw(d, "OPTIONS", "/cors-b/obj", {
        "Origin": "http://x.apps.example", "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "content-type, x-amz-meta-a"})
    assert st == 200
    assert h["access-control-allow-origin"] == "http://x.apps.example"
    assert h["access-control-allow-methods"] == "GET, PUT"
    assert h["access-control-allow-headers"] == "content-type, x-amz-meta-a"
    assert h["access-control-max-age"] == "600"
    assert h["access-control-allow-credentials"] == "true"
    # a header no rule allows, a method no rule allows for that origin
    st, _, body = raw(d, "OPTIONS", "/cors-b/obj", {
        "Origin": "http://app.example", "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "authorization-not-listed"})
    assert st == 403 and b"AccessForbidden" in body
    st, _, _ = raw(d, "OPTIONS", "/cors-b/obj", {"Origin": "http://evil.example",
                                                 "Access-Control-Request-Method": "PUT"})
    assert st == 403
    # any origin may GET (the '*' rule): answered '*' without credentials
    st, h, _ = raw(d, "OPTIONS", "/cors-b", {"Origin": "http://evil.example",
                                             "Access-Control-Request-Method": "GET"})
    assert st == 200 and h["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in h
    # missing preflight headers
    assert raw(d, "OPTIONS", "/cors-b/obj", {"Origin": "http://app.example"})[0] == 400
    # actual requests carry the headers of the matching rule
    st, h, body = raw(d, "GET", "/cors-b/obj", {"Origin": "http://app.example"})
    assert st == 200 and body == b"cors"
    assert h["access-control-allow-origin"] == "http://app.example"
    assert "ETag" in h["access-control-expose-headers"]
    st, h, _ = raw(d, "GET", "/cors-b/obj", {"Origin": "http://evil.example"})
    assert h["access-control-allow-origin"] == "*"
    st, h, _ = raw(d, "GET", "/cors-b/obj", {})
    assert "access-control-allow-origin" not in h
    # malformed configurations
    for bad in ({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]},
                {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": []}]}):
        with pytest.raises(ClientError) as e:
            s3.put_bucket_cors(Bucket="cors-b", CORSConfiguration=bad)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    s3.delete_bucket_cors(Bucket="cors-b")
    st, _, _ = raw(d, "OPTIONS", "/cors-b/obj", {"Origin": "http://app.example",
                                                 "Access-Control-Request-Method": "GET"})
    assert st == 403


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(not CHROMIUM, reason="chromium not installed (apt-get install chromium)")
def test_browser_fetch_with_preflight(d, tmp_path):
    """A page served from another origin fetch()es an object with a custom header (so the
    browser sends a preflight) and writes what it got into the DOM; chromium dumps it."""
    s3 = d.boto3()
    s3.create_bucket(Bucket="cors-web", ACL="public-read")
    s3.put_object(Bucket="cors-web", Key="data.txt", Body=b"from s3nfs", ACL="public-read")
    page = tmp_path / "index.html"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **kw: Quiet(
        *a, directory=str(tmp_path), **kw))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{srv.server_address[1]}"
    page.write_text(f"""<html><body><pre id=out>pending</pre><script>
fetch("{d.s3_endpoint}/cors-web/data.txt", {{headers: {{"x-amz-meta-probe": "1"}}}})
  .then(r => r.text()).then(t => document.getElementById("out").textContent = "GOT:" + t)
  .catch(e => document.getElementById("out").textContent = "ERR:" + e);
</script></body></html>""")

    def dump():
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--virtual-time-budget=5000", "--dump-dom", f"{origin}/index.html"],
                           capture_output=True, text=True, timeout=120)
        return r.stdout
    try:
        assert "ERR:" in dump()  # no CORS configuration: the browser refuses
        s3.put_bucket_cors(Bucket="cors-web", CORSConfiguration={"CORSRules": [
            {"AllowedOrigins": [origin], "AllowedMethods": ["GET"],
             "AllowedHeaders": ["x-amz-meta-*"]}]})
        assert "GOT:from s3nfs" in dump()
    finally:
        srv.shutdown()
