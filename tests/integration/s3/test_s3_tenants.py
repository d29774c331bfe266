# SPDX-License-Identifier: Apache-2.0
"""Tenant isolation as S3 sees it: a second tenant made through the admin API
has its own bucket namespace; nothing of the first tenant is visible or
reachable with its keys; a disabled key stops working at once."""
import os
import sys

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import admin  # noqa: E402


def test_tenant_isolation_over_s3(s3nfsd):
    d = s3nfsd
    a = d.boto3()
    a.create_bucket(Bucket="shared-name")
    a.put_object(Bucket="shared-name", Key="secret.txt", Body=b"tenant A data")
    t = admin(d, "POST", "/tenants", {"name": "tenant-b"})
    tid = t["id"]
    u = admin(d, "POST", f"/tenants/{tid}/users", {"name": "bob", "uid": 1000, "gid": 1000})
    k = admin(d, "POST", f"/tenants/{tid}/users/{u['id']}/keys")
    b = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    assert b.list_buckets()["Buckets"] == []
    with pytest.raises(ClientError) as e:
        b.get_object(Bucket="shared-name", Key="secret.txt")
    assert e.value.response["Error"]["Code"] in ("NoSuchBucket", "AccessDenied")
    with pytest.raises(ClientError):
        b.list_objects_v2(Bucket="shared-name")
    with pytest.raises(ClientError):
        b.copy_object(Bucket="shared-name", Key="x", CopySource="shared-name/secret.txt")
    # the same bucket name is free in the other tenant and holds other data
    b.create_bucket(Bucket="shared-name")
    b.put_object(Bucket="shared-name", Key="secret.txt", Body=b"tenant B data")
    assert a.get_object(Bucket="shared-name", Key="secret.txt")["Body"].read() == b"tenant A data"
    assert b.get_object(Bucket="shared-name", Key="secret.txt")["Body"].read() == b"tenant B data"
    # disabling the key takes effect at once
    admin(d, "PATCH", f"/keys/{k['access_key']}", {"disabled": True})
    with pytest.raises(ClientError) as e:
        b.list_buckets()
    assert e.value.response["Error"]["Code"] == "AccessDenied"


def test_quota_over_s3(s3nfsd):
    d = s3nfsd
    s3 = d.boto3()
    s3.create_bucket(Bucket="quota-bucket")
    s3.put_object(Bucket="quota-bucket", Key="small", Body=b"x" * 1000)
    admin(d, "PUT", "/tenants/1/buckets/quota-bucket/quota", {"bytes_limit": 1 << 20})
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="quota-bucket", Key="big", Body=b"y" * (2 << 20))
    assert e.value.response["Error"]["Code"] == "QuotaExceeded"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="quota-bucket")["Contents"]]
    assert keys == ["small"]
    assert s3.get_object(Bucket="quota-bucket", Key="small")["Body"].read() == b"x" * 1000
    admin(d, "PUT", "/tenants/1/buckets/quota-bucket/quota", {"bytes_limit": 0})
    s3.put_object(Bucket="quota-bucket", Key="big", Body=b"y" * (2 << 20))


def test_presigned_urls_follow_key_changes_at_once(s3nfsd):
    """A presigned GET repeated over one keep-alive connection is served by
    one loop thread, which remembers the requests it verified (s3_sigv4.c):
    a key disabled, deleted, or a user disabled, stops the very URL it
    verified a moment before; a URL signed with a secret the key does not
    have (a rotated key's old secret) never works; an expired one stops."""
    import http.client
    import time
    import urllib.parse
    d = s3nfsd
    t = admin(d, "POST", "/tenants", {"name": "tenant-presign"})
    tid = t["id"]
    u = admin(d, "POST", f"/tenants/{tid}/users", {"name": "pat", "uid": 1000, "gid": 1000})
    k = admin(d, "POST", f"/tenants/{tid}/users/{u['id']}/keys")
    b = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    b.create_bucket(Bucket="presign-bkt")
    b.put_object(Bucket="presign-bkt", Key="o", Body=b"presigned body")
    url = b.generate_presigned_url("get_object", Params={"Bucket": "presign-bkt", "Key": "o"},
                                   ExpiresIn=3600)
    short = b.generate_presigned_url("get_object", Params={"Bucket": "presign-bkt", "Key": "o"},
                                     ExpiresIn=2)
    sk = k["secret_key"]
    bad = d.boto3(access_key=k["access_key"], secret_key=sk[:-1] + ("y" if sk[-1] == "x" else "x"))
    assert bad.meta.region_name == b.meta.region_name
    wrong = bad.generate_presigned_url("get_object",
                                       Params={"Bucket": "presign-bkt", "Key": "o"},
                                       ExpiresIn=3600)
    host = urllib.parse.urlsplit(url).netloc
    conn = http.client.HTTPConnection(host, timeout=30)

    def get(u):
        p = urllib.parse.urlsplit(u)
        conn.request("GET", p.path + "?" + p.query)
        r = conn.getresponse()
        return r.status, r.read()

    for _ in range(5):
        assert get(url) == (200, b"presigned body")
        assert get(wrong)[0] == 403
    assert get(short) == (200, b"presigned body")
    admin(d, "PATCH", f"/keys/{k['access_key']}", {"disabled": True})
    assert get(url)[0] == 403
    admin(d, "PATCH", f"/keys/{k['access_key']}", {"disabled": False})
    assert get(url) == (200, b"presigned body")
    admin(d, "PATCH", f"/tenants/{tid}/users/{u['id']}", {"disabled": True})
    assert get(url)[0] == 403
    admin(d, "PATCH", f"/tenants/{tid}/users/{u['id']}", {"disabled": False})
    assert get(url) == (200, b"presigned body")
    time.sleep(3)
    st, body = get(short)
    assert st == 403 and b"expired" in body
    admin(d, "DELETE", f"/keys/{k['access_key']}")
    st, body = get(url)
    assert st == 403 and b"InvalidAccessKeyId" in body
    conn.close()
