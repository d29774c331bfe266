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
