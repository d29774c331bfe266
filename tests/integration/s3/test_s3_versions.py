# SPDX-License-Identifier: Apache-2.0
"""Versioning over S3 (boto3 and the aws cli) against a real s3nfsd: bucket
versioning states and MFA delete, version ids on PUT / copy / multipart, GET,
HEAD, DELETE, tagging and ACL by versionId, delete markers and AWS's 404/405
answers, ListObjectVersions (prefix, delimiter, paging over 2,000 versions),
the null version of suspended and never-versioned buckets, DeleteObjects with
versions (docs/s3-compatibility.md, "Versioning")."""
import itertools
import json
import os
import subprocess
import threading

import pytest
from botocore.exceptions import ClientError

AWS = "/usr/bin/aws"
_n = itertools.count()


def err(e):
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], \
        r["ResponseMetadata"]["HTTPHeaders"]


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def s3(d):
    return d.boto3()


def new_bucket(s3, versioning="Enabled"):
    name = f"ver-{os.getpid()}-{next(_n)}"
    s3.create_bucket(Bucket=name)
    if versioning:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    return name


def versions(s3, b, **kw):
    """Every (key, version id, is latest, is delete marker), in listing order."""
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=b, **kw):
        ent = [(v["Key"], v["VersionId"], v["IsLatest"], False, v.get("LastModified"))
               for v in page.get("Versions", [])]
        ent += [(v["Key"], v["VersionId"], v["IsLatest"], True, v.get("LastModified"))
                for v in page.get("DeleteMarkers", [])]
        # a page lists versions and markers apart: put them back in key, newest-first order
        ent.sort(key=lambda e: (e[0], -e[4].timestamp()))
        out += [e[:4] for e in ent]
    return out


def test_bucket_versioning_states(s3):
    b = new_bucket(s3, None)
    assert "Status" not in s3.get_bucket_versioning(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended",
                                                                "MFADelete": "Disabled"})
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Suspended"
    # MFA delete is refused clearly, and changes nothing
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled",
                                                                    "MFADelete": "Enabled"},
                                 MFA="arn:aws:iam::1:mfa/x 123456")
    code, status, _ = err(e)
    assert (code, status) == ("NotImplemented", 501)
    assert "MFA" in e.value.response["Error"]["Message"]
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Suspended"
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Bogus"})
    assert err(e)[:2] == ("MalformedXML", 400)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_versioning(Bucket="no-such-bucket-ver")
    assert err(e)[0] == "NoSuchBucket"


def test_versions_get_head_delete(s3):
    b = new_bucket(s3)
    v1 = s3.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=b, Key="k", Body=b"two!")["VersionId"]
    assert v1 != v2 and len(v1) == 32
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"two!"
    g = s3.get_object(Bucket=b, Key="k", VersionId=v1)
    assert g["Body"].read() == b"one" and g["VersionId"] == v1
    h = s3.head_object(Bucket=b, Key="k")
    assert h["VersionId"] == v2 and h["ContentLength"] == 4
    assert s3.head_object(Bucket=b, Key="k", VersionId=v1)["ContentLength"] == 3
    assert s3.get_object(Bucket=b, Key="k", VersionId=v1, Range="bytes=1-1")["Body"].read() == b"n"
    # a delete makes a marker; GET/HEAD answer 404 naming it
    dm = s3.delete_object(Bucket=b, Key="k")
    assert dm["DeleteMarker"] is True
    mid = dm["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="k")
    code, status, hdrs = err(e)
    assert (code, status) == ("NoSuchKey", 404)
    assert hdrs["x-amz-delete-marker"] == "true" and hdrs["x-amz-version-id"] == mid
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key="k")
    assert err(e)[1] == 404
    # GET/HEAD of the marker by id: 405, with the marker's headers
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="k", VersionId=mid)
    code, status, hdrs = err(e)
    assert (code, status) == ("MethodNotAllowed", 405)
    assert hdrs["x-amz-delete-marker"] == "true" and "last-modified" in hdrs
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key="k", VersionId=mid)
    assert err(e)[1] == 405
    # the old versions stay readable; an unknown or malformed id
    assert s3.get_object(Bucket=b, Key="k", VersionId=v2)["Body"].read() == b"two!"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="k", VersionId="0" * 15 + "1" + "0" * 15 + "1")
    assert err(e)[:2] == ("NoSuchVersion", 404)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="k", VersionId="not-a-version")
    assert err(e)[:2] == ("InvalidArgument", 400)
    # deleting the marker brings v2 back; deleting v2 makes v1 current
    r = s3.delete_object(Bucket=b, Key="k", VersionId=mid)
    assert r["DeleteMarker"] is True and r["VersionId"] == mid
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"two!"
    r = s3.delete_object(Bucket=b, Key="k", VersionId=v2)
    assert r["VersionId"] == v2 and not r.get("DeleteMarker")
    assert s3.get_object(Bucket=b, Key="k")["VersionId"] == v1
    # deleting a version that is not there: 204 (as S3)
    s3.delete_object(Bucket=b, Key="k", VersionId=v2)
    assert [e[1] for e in versions(s3, b)] == [v1]
    # a bucket holding versions is not empty
    s3.delete_object(Bucket=b, Key="k")
    assert s3.list_objects_v2(Bucket=b)["KeyCount"] == 0
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=b)
    assert err(e)[:2] == ("BucketNotEmpty", 409)
    for k, vid, _, _ in versions(s3, b):
        s3.delete_object(Bucket=b, Key=k, VersionId=vid)
    s3.delete_bucket(Bucket=b)


def test_list_object_versions(s3):
    b = new_bucket(s3)
    ids = {}
    for k in ["a", "d/x", "d/y", "z"]:
        ids[k] = [s3.put_object(Bucket=b, Key=k, Body=k.encode() * i)["VersionId"]
                  for i in range(1, 3)]
    zm = s3.delete_object(Bucket=b, Key="z")["VersionId"]
    got = versions(s3, b)
    assert got == [("a", ids["a"][1], True, False), ("a", ids["a"][0], False, False),
                   ("d/x", ids["d/x"][1], True, False), ("d/x", ids["d/x"][0], False, False),
                   ("d/y", ids["d/y"][1], True, False), ("d/y", ids["d/y"][0], False, False),
                   ("z", zm, True, True), ("z", ids["z"][1], False, False),
                   ("z", ids["z"][0], False, False)]
    r = s3.list_object_versions(Bucket=b, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["d/"]
    assert {v["Key"] for v in r["Versions"]} == {"a", "z"}
    r = s3.list_object_versions(Bucket=b, Prefix="d/", MaxKeys=3)
    assert r["IsTruncated"] and len(r["Versions"]) == 3
    assert r["NextKeyMarker"] == "d/y" and r["NextVersionIdMarker"] == ids["d/y"][1]
    r2 = s3.list_object_versions(Bucket=b, Prefix="d/", KeyMarker=r["NextKeyMarker"],
                                 VersionIdMarker=r["NextVersionIdMarker"])
    assert [v["VersionId"] for v in r2["Versions"]] == [ids["d/y"][0]]
    assert not r2["IsTruncated"]
    # a version-id-marker needs a key-marker
    with pytest.raises(ClientError) as e:
        s3.list_object_versions(Bucket=b, VersionIdMarker=ids["a"][0])
    assert err(e)[:2] == ("InvalidArgument", 400)
    # ListObjects shows current data versions only
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == ["a", "d/x", "d/y"]


@pytest.mark.slow
def test_paging_over_2000_versions(s3):
    """2,001 versions of three keys, listed 1,000 (boto3's page) and 7 at a time."""
    b = new_bucket(s3)
    ids = {"k1": [], "k2": [], "k3": []}
    counts = {"k1": 1000, "k2": 700, "k3": 301}

    def writer(k):
        c = s3  # boto3 clients are thread-safe
        for i in range(counts[k]):
            ids[k].append(c.put_object(Bucket=b, Key=k, Body=str(i).encode())["VersionId"])
    ts = [threading.Thread(target=writer, args=(k,)) for k in ids]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    want = [(k, v) for k in ["k1", "k2", "k3"] for v in reversed(ids[k])]
    pages = list(s3.get_paginator("list_object_versions").paginate(Bucket=b))
    got = [(v["Key"], v["VersionId"]) for p in pages for v in p.get("Versions", [])]
    assert len(pages) == 3 and got == want
    assert sum(v["IsLatest"] for p in pages for v in p["Versions"]) == 3
    small = list(s3.get_paginator("list_object_versions").paginate(
        Bucket=b, Prefix="k2", PaginationConfig={"PageSize": 7}))
    got = [(v["Key"], v["VersionId"]) for p in small for v in p.get("Versions", [])]
    assert got == [("k2", v) for v in reversed(ids["k2"])] and len(small) == 100


def test_suspended_and_never_versioned(s3):
    b = new_bucket(s3, None)
    s3.put_object(Bucket=b, Key="old", Body=b"before versioning")
    r = s3.list_object_versions(Bucket=b)
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r["Versions"]] == \
        [("old", "null", True)]
    assert s3.get_object(Bucket=b, Key="old", VersionId="null")["Body"].read() == \
        b"before versioning"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="old", VersionId="1" * 32)
    assert err(e)[:2] == ("NoSuchVersion", 404)
    # enabled: the old object is the null version, kept under the new ones
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=b, Key="old", Body=b"v1")["VersionId"]
    assert [e[1] for e in versions(s3, b)] == [v1, "null"]
    # suspended: new objects are the null version, replacing the previous null one
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    r = s3.put_object(Bucket=b, Key="old", Body=b"n1")
    assert r.get("VersionId") == "null"
    s3.put_object(Bucket=b, Key="old", Body=b"n2")
    assert [e[1] for e in versions(s3, b)] == ["null", v1]
    assert s3.get_object(Bucket=b, Key="old", VersionId="null")["Body"].read() == b"n2"
    # a delete there: the null version goes, a null delete marker comes
    r = s3.delete_object(Bucket=b, Key="old")
    assert r["DeleteMarker"] and r["VersionId"] == "null"
    assert versions(s3, b) == [("old", "null", True, True), ("old", v1, False, False)]


def test_delete_objects_with_versions(s3):
    b = new_bucket(s3)
    v1 = s3.put_object(Bucket=b, Key="a", Body=b"1")["VersionId"]
    v2 = s3.put_object(Bucket=b, Key="a", Body=b"2")["VersionId"]
    s3.put_object(Bucket=b, Key="c", Body=b"c")
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [
        {"Key": "a", "VersionId": v1}, {"Key": "c"}, {"Key": "a", "VersionId": "bad-id"}]})
    deleted = {(x["Key"], x.get("VersionId")): x for x in r["Deleted"]}
    assert ("a", v1) in deleted and not deleted[("a", v1)].get("DeleteMarker")
    assert deleted[("c", None)]["DeleteMarker"] is True
    assert deleted[("c", None)]["DeleteMarkerVersionId"]
    assert [(x["Key"], x["Code"]) for x in r["Errors"]] == [("a", "InvalidArgument")]
    cm = deleted[("c", None)]["DeleteMarkerVersionId"]
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "c", "VersionId": cm}]})
    assert r["Deleted"][0]["DeleteMarker"] is True
    assert s3.get_object(Bucket=b, Key="c")["Body"].read() == b"c"
    assert [e[1] for e in versions(s3, b, Prefix="a")] == [v2]


def test_copy_multipart_tagging_acl_by_version(s3):
    b = new_bucket(s3)
    v1 = s3.put_object(Bucket=b, Key="src", Body=b"first", Tagging="t=1")["VersionId"]
    s3.put_object(Bucket=b, Key="src", Body=b"second")
    # CopyObject of an older version
    r = s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "src",
                                                        "VersionId": v1})
    assert r["CopySourceVersionId"] == v1 and r["VersionId"]
    assert s3.get_object(Bucket=b, Key="dst")["Body"].read() == b"first"
    # onto itself in a versioned bucket: a new version
    r2 = s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "dst"},
                        MetadataDirective="REPLACE", Metadata={"m": "1"})
    assert r2["VersionId"] != r["VersionId"]
    assert len(versions(s3, b, Prefix="dst")) == 2
    # a delete marker cannot be a copy source by id
    dm = s3.delete_object(Bucket=b, Key="gone")["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=b, Key="x", CopySource={"Bucket": b, "Key": "gone",
                                                      "VersionId": dm})
    assert err(e)[:2] == ("InvalidRequest", 400)
    # UploadPartCopy of an older version, and the completed object's version id
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    pr = s3.upload_part_copy(Bucket=b, Key="mp", UploadId=up, PartNumber=1,
                             CopySource={"Bucket": b, "Key": "src", "VersionId": v1})
    assert pr["CopySourceVersionId"] == v1
    done = s3.complete_multipart_upload(
        Bucket=b, Key="mp", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": pr["CopyPartResult"]["ETag"]}]})
    assert done["VersionId"] and s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"first"
    # tagging by version
    assert s3.get_object_tagging(Bucket=b, Key="src", VersionId=v1)["TagSet"] == \
        [{"Key": "t", "Value": "1"}]
    assert s3.get_object_tagging(Bucket=b, Key="src")["TagSet"] == []
    r = s3.put_object_tagging(Bucket=b, Key="src", VersionId=v1,
                              Tagging={"TagSet": [{"Key": "t", "Value": "2"}]})
    assert r["VersionId"] == v1
    assert s3.get_object_tagging(Bucket=b, Key="src", VersionId=v1)["TagSet"][0]["Value"] == "2"
    s3.delete_object_tagging(Bucket=b, Key="src", VersionId=v1)
    assert s3.get_object_tagging(Bucket=b, Key="src", VersionId=v1)["TagSet"] == []
    # the ACL of a version
    assert s3.get_object_acl(Bucket=b, Key="src", VersionId=v1)["Grants"]
    with pytest.raises(ClientError) as e:
        s3.get_object_acl(Bucket=b, Key="src", VersionId="2" * 32)
    assert err(e)[0] == "NoSuchVersion"


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_versions(d, s3):
    def aws(*args):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key,
                   AWS_SECRET_ACCESS_KEY=d.secret_key, AWS_DEFAULT_REGION="us-east-1",
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                   AWS_PAGER="")
        r = subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, "--output", "json", *args],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout) if r.stdout.strip() else {}
    b = new_bucket(s3, None)
    aws("s3api", "put-bucket-versioning", "--bucket", b,
        "--versioning-configuration", "Status=Enabled")
    assert aws("s3api", "get-bucket-versioning", "--bucket", b)["Status"] == "Enabled"
    s3.put_object(Bucket=b, Key="f", Body=b"1")
    s3.put_object(Bucket=b, Key="f", Body=b"2")
    aws("s3api", "delete-object", "--bucket", b, "--key", "f")
    out = aws("s3api", "list-object-versions", "--bucket", b)
    assert len(out["Versions"]) == 2 and len(out["DeleteMarkers"]) == 1
    old = [v["VersionId"] for v in out["Versions"] if not v["IsLatest"]][-1]
    aws("s3api", "get-object", "--bucket", b, "--key", "f", "--version-id", old, "/dev/null")
