# SPDX-License-Identifier: Apache-2.0
"""S3 operations through boto3 against a real s3nfsd: each with a success and its main failure."""
import base64
import urllib.error
import datetime
import hashlib
import itertools
import os
import sys
import zlib

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))

_n = itertools.count()


def code(e):
    return e.value.response["Error"]["Code"]


def status(e):
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def s3(s3nfsd_module):
    return s3nfsd_module.boto3()


@pytest.fixture
def bucket(s3):
    name = f"bkt-{os.getpid()}-{next(_n)}"
    s3.create_bucket(Bucket=name)
    return name


def test_buckets(s3):
    s3.create_bucket(Bucket="alpha-bucket")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "alpha-bucket" in names
    s3.head_bucket(Bucket="alpha-bucket")
    # us-east-1 (this server's region) answers its owner's CreateBucket again with 200, as AWS
    s3.create_bucket(Bucket="alpha-bucket")
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="Bad_Name")
    assert code(e) == "InvalidBucketName"
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="no-such-bucket-here")
    assert status(e) == 404
    loc = s3.get_bucket_location(Bucket="alpha-bucket")
    assert loc.get("LocationConstraint") in (None, "")
    s3.put_object(Bucket="alpha-bucket", Key="x", Body=b"1")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="alpha-bucket")
    assert code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket="alpha-bucket", Key="x")
    s3.delete_bucket(Bucket="alpha-bucket")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="alpha-bucket")
    assert code(e) == "NoSuchBucket"


def test_put_get_metadata(s3, bucket):
    r = s3.put_object(Bucket=bucket, Key="a/b/c.txt", Body=b"hello", ContentType="text/x-test",
                      ContentEncoding="identity", ContentDisposition="attachment",
                      CacheControl="no-cache", Metadata={"color": "blue", "Size": "L"})
    assert r["ETag"] == '"%s"' % hashlib.md5(b"hello").hexdigest()
    g = s3.get_object(Bucket=bucket, Key="a/b/c.txt")
    assert g["Body"].read() == b"hello"
    assert g["ContentType"] == "text/x-test"
    assert g["ContentDisposition"] == "attachment"
    assert g["CacheControl"] == "no-cache"
    assert g["ContentEncoding"] == "identity"
    assert g["Metadata"] == {"color": "blue", "size": "L"}
    h = s3.head_object(Bucket=bucket, Key="a/b/c.txt")
    assert h["ContentLength"] == 5 and h["ETag"] == r["ETag"]
    o = s3.get_object(Bucket=bucket, Key="a/b/c.txt", ResponseContentType="image/png",
                      ResponseContentDisposition="inline")
    assert o["ContentType"] == "image/png" and o["ContentDisposition"] == "inline"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="a/b/missing")
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="no-such-bucket-x", Key="k")
    assert code(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="m", Body=b"x", Metadata={"big": "v" * 3000})
    assert code(e) == "MetadataTooLarge"


def test_empty_and_overwrite(s3, bucket):
    s3.put_object(Bucket=bucket, Key="e", Body=b"")
    assert s3.get_object(Bucket=bucket, Key="e")["Body"].read() == b""
    s3.put_object(Bucket=bucket, Key="e", Body=b"second")
    assert s3.get_object(Bucket=bucket, Key="e")["Body"].read() == b"second"


def test_large_streaming_object(s3, bucket):
    data = os.urandom(9 * 1024 * 1024 + 123)
    s3.put_object(Bucket=bucket, Key="big", Body=data)
    got = s3.get_object(Bucket=bucket, Key="big")
    assert got["ContentLength"] == len(data)
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(data).digest()
    r = s3.get_object(Bucket=bucket, Key="big", Range="bytes=5000000-5000099")
    assert r["Body"].read() == data[5000000:5000100]


def test_ranges(s3, bucket):
    data = bytes(range(256)) * 4
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    r = s3.get_object(Bucket=bucket, Key="r", Range="bytes=10-19")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["ContentRange"] == "bytes 10-19/1024" and r["Body"].read() == data[10:20]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=1000-")["Body"].read() == data[1000:]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=-24")["Body"].read() == data[-24:]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=1000-5000")["Body"].read() == data[1000:]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=2000-3000")
    assert status(e) == 416 and code(e) == "InvalidRange"


def test_conditionals(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"data")["ETag"]
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"data"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status(e) == 304
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert status(e) == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert status(e) == 412
    s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=future)


def test_put_if_none_match_star(s3nfsd_module, bucket):
    from s3util import connect, read_response, signed_request
    d = s3nfsd_module
    for expect in (200, 412):
        req = signed_request(d, "PUT", f"/{bucket}/once", headers={"if-none-match": "*"},
                             body=b"v")[0]
        s = connect(d)
        s.sendall(req)
        st, h, body = read_response(s)
        s.close()
        assert st == expect, body


def test_content_md5(s3, bucket):
    good = base64.b64encode(hashlib.md5(b"payload").digest()).decode()
    s3.put_object(Bucket=bucket, Key="m", Body=b"payload", ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="m2", Body=b"payload", ContentMD5=bad)
    assert code(e) == "BadDigest"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="m2")
    assert status(e) == 404


def crc64nvme(data):
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x9A6C9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFFFFFFFFFF


@pytest.mark.parametrize("algo", ["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"])
def test_checksums(s3nfsd_module, bucket, algo):
    from s3util import connect, read_response, signed_request
    d = s3nfsd_module
    body = b"checksum me please"
    if algo == "CRC32":
        raw = zlib.crc32(body).to_bytes(4, "big")
    elif algo == "SHA1":
        raw = hashlib.sha1(body).digest()
    elif algo == "SHA256":
        raw = hashlib.sha256(body).digest()
    elif algo == "CRC64NVME":
        assert crc64nvme(b"123456789") == 0xAE8B14860A799888
        raw = crc64nvme(body).to_bytes(8, "big")
    else:
        raw = None
    hdr = f"x-amz-checksum-{algo.lower()}"
    s = connect(d)
    if raw is not None:
        val = base64.b64encode(raw).decode()
        s.sendall(signed_request(d, "PUT", f"/{bucket}/ck-{algo}", headers={hdr: val},
                                 body=body)[0])
        st, h, _ = read_response(s)
        assert st == 200 and h[hdr] == val
        s.sendall(signed_request(d, "GET", f"/{bucket}/ck-{algo}",
                                 headers={"x-amz-checksum-mode": "ENABLED"})[0])
        st, h, got = read_response(s)
        assert st == 200 and got == body and h[hdr] == val
    # a wrong value is refused and nothing is stored
    wrong = base64.b64encode(b"\0" * len(raw or b"1234")).decode()
    s.sendall(signed_request(d, "PUT", f"/{bucket}/ck-bad-{algo}", headers={hdr: wrong},
                             body=body)[0])
    st, h, err = read_response(s)
    assert st == 400 and b"BadDigest" in err
    s.close()
    with pytest.raises(ClientError):
        s3nfsd_module.boto3().head_object(Bucket=bucket, Key=f"ck-bad-{algo}")


def test_list_v2_v1_versions(s3, bucket):
    keys = ["a-c", "a/b", "a/c/d", "b", "c/", "d/x", "z~", "sp ace", "plus+"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"" if k.endswith("/") else b"x")
    r = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == sorted(k for k in keys)
    assert r["KeyCount"] == len(keys)
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "c/", "d/"]
    assert [o["Key"] for o in r["Contents"]] == ["a-c", "b", "plus+", "sp ace", "z~"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["a/b"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/c/"]
    r = s3.list_objects_v2(Bucket=bucket, StartAfter="b")
    assert [o["Key"] for o in r["Contents"]][0] == "c/"
    # pagination with max-keys, continuation tokens, delimiter roll-up
    seen, token = [], None
    while True:
        kw = {"Bucket": bucket, "MaxKeys": 2, "Delimiter": "/"}
        if token:
            kw["ContinuationToken"] = token
        r = s3.list_objects_v2(**kw)
        seen += [o["Key"] for o in r.get("Contents", [])]
        seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    assert sorted(seen) == sorted(["a-c", "a/", "b", "c/", "d/", "plus+", "sp ace", "z~"])
    assert len(seen) == len(set(seen))
    # V1 with markers through the paginator
    pg = s3.get_paginator("list_objects").paginate(Bucket=bucket, PaginationConfig={"PageSize": 3})
    v1 = [o["Key"] for page in pg for o in page.get("Contents", [])]
    assert v1 == sorted(keys)
    r = s3.list_objects(Bucket=bucket, Marker="d/x")
    assert [o["Key"] for o in r["Contents"]] == ["plus+", "sp ace", "z~"]
    v = s3.list_object_versions(Bucket=bucket, Prefix="a")
    assert [x["Key"] for x in v["Versions"]] == ["a-c", "a/b", "a/c/d"]
    assert all(x["VersionId"] == "null" and x["IsLatest"] for x in v["Versions"])
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    assert r["KeyCount"] == 0
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="no-such-bucket-list")
    assert code(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=bucket, ContinuationToken="!!!notbase64")
    assert status(e) == 400


def test_list_url_encoding(s3nfsd_module, s3, bucket):
    s3.put_object(Bucket=bucket, Key="dir/é x&y", Body=b"1")
    from s3util import connect, read_response, signed_request
    s = connect(s3nfsd_module)
    s.sendall(signed_request(s3nfsd_module, "GET", f"/{bucket}",
                             query=[("list-type", "2"), ("encoding-type", "url"),
                                    ("fetch-owner", "true")])[0])
    st, h, body = read_response(s)
    assert st == 200
    assert b"<Key>dir/%C3%A9%20x%26y</Key>" in body
    assert b"<Owner>" in body
    s.close()
    assert s3.list_objects_v2(Bucket=bucket)["Contents"][0]["Key"] == "dir/é x&y"


def test_delete_objects(s3, bucket):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"d{i}", Body=b"x")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"d{i}"} for i in range(3)]
                                                 + [{"Key": "never-existed"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["d0", "d1", "d2", "never-existed"]
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "d3"}], "Quiet": True})
    assert "Deleted" not in r
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["d4"]
    with pytest.raises(ClientError) as e:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]})
    assert code(e) == "MalformedXML"


def test_copy_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"copy me", ContentType="text/a",
                  Metadata={"m": "1"}, Tagging="t=1")
    r = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == '"%s"' % hashlib.md5(b"copy me").hexdigest()
    g = s3.get_object(Bucket=bucket, Key="dst")
    assert g["Body"].read() == b"copy me" and g["ContentType"] == "text/a"
    assert g["Metadata"] == {"m": "1"}
    s3.copy_object(Bucket=bucket, Key="dst2", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", ContentType="text/b", Metadata={"n": "2"})
    g = s3.head_object(Bucket=bucket, Key="dst2")
    assert g["ContentType"] == "text/b" and g["Metadata"] == {"n": "2"}
    # metadata-only self copy
    s3.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", Metadata={"self": "yes"})
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"self": "yes"}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src")
    assert code(e) == "InvalidRequest"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource=f"{bucket}/nope")
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource=f"{bucket}/src",
                       CopySourceIfMatch='"deadbeef"')
    assert status(e) == 412
    etag = s3.head_object(Bucket=bucket, Key="src")["ETag"]
    s3.copy_object(Bucket=bucket, Key="y", CopySource=f"{bucket}/src", CopySourceIfMatch=etag)
    # copy across buckets
    s3.create_bucket(Bucket=bucket + "-other")
    s3.copy_object(Bucket=bucket + "-other", Key="z", CopySource=f"{bucket}/src")
    assert s3.get_object(Bucket=bucket + "-other", Key="z")["Body"].read() == b"copy me"


def test_tagging(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="a=1&b=two%20words")
    tags = s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]
    assert sorted((t["Key"], t["Value"]) for t in tags) == [("a", "1"), ("b", "two words")]
    assert s3.get_object(Bucket=bucket, Key="t")["TagCount"] == 2
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == [{"Key": "k", "Value": "v"}]
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [
            {"Key": f"k{i}", "Value": "v"} for i in range(11)]})
    assert status(e) == 400
    s3.delete_object_tagging(Bucket=bucket, Key="t")
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == []
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="nope")
    assert code(e) == "NoSuchKey"


def test_multipart(s3, bucket):
    part = 5 * 1024 * 1024
    p1, p2, p3 = os.urandom(part), os.urandom(part), b"tail"
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="app/x",
                                    Metadata={"k": "v"})
    uid = up["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1, Body=p1)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=2, Body=p2)["ETag"]
    e3 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=3, Body=p3)["ETag"]
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3]
    assert [p["Size"] for p in lp["Parts"]] == [part, part, 4]
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid, MaxParts=2)
    assert lp["IsTruncated"] and lp["NextPartNumberMarker"] == 2
    ups = s3.list_multipart_uploads(Bucket=bucket)
    assert [u["UploadId"] for u in ups.get("Uploads", [])] == [uid]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]})
    assert code(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": '"0123"'}]})
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 3, "ETag": e3}, {"PartNumber": 4, "ETag": e3}]})
    assert code(e) == "InvalidPart"
    r = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2},
                  {"PartNumber": 3, "ETag": e3}]})
    md5s = b"".join(hashlib.md5(p).digest() for p in (p1, p2, p3))
    assert r["ETag"] == '"%s-3"' % hashlib.md5(md5s).hexdigest()
    g = s3.get_object(Bucket=bucket, Key="mp")
    assert g["ContentType"] == "app/x" and g["Metadata"] == {"k": "v"}
    assert g["PartsCount"] == 3
    assert g["Body"].read() == p1 + p2 + p3
    # GET and HEAD by part number: that part's bytes, 206 with its range
    off, total = 0, 2 * part + 4
    for n, body in ((1, p1), (2, p2), (3, p3)):
        g = s3.get_object(Bucket=bucket, Key="mp", PartNumber=n)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["ContentRange"] == f"bytes {off}-{off + len(body) - 1}/{total}"
        assert g["PartsCount"] == 3 and g["ETag"] == r["ETag"]
        assert g["Body"].read() == body
        h = s3.head_object(Bucket=bucket, Key="mp", PartNumber=n)
        assert h["ContentLength"] == len(body)
        off += len(body)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=4)
    assert code(e) == "InvalidPartNumber" and status(e) == 416
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=1, Range="bytes=0-1")
    assert status(e) == 400
    # a single-part object is its own part 1
    s3.put_object(Bucket=bucket, Key="single", Body=b"whole")
    assert s3.get_object(Bucket=bucket, Key="single", PartNumber=1)["Body"].read() == b"whole"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="single", PartNumber=2)
    assert code(e) == "InvalidPartNumber"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1, Body=b"x")
    assert code(e) == "NoSuchUpload"


def test_multipart_small_part_and_abort(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="small")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=1, Body=b"a" * 100)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=2, Body=b"b")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="small", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert code(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=0, Body=b"x")
    assert status(e) == 400
    s3.abort_multipart_upload(Bucket=bucket, Key="small", UploadId=uid)
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="small", UploadId=uid)
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="small")
    assert status(e) == 404


def test_upload_part_copy(s3, bucket):
    src = os.urandom(6 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="src", Body=src)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="pc")["UploadId"]
    r1 = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=uid, PartNumber=1,
                             CopySource=f"{bucket}/src", CopySourceRange="bytes=0-5242879")
    r2 = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=uid, PartNumber=2,
                             CopySource=f"{bucket}/src", CopySourceRange="bytes=5242880-6291455")
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=uid, PartNumber=3,
                            CopySource=f"{bucket}/src", CopySourceRange="bytes=9999999-99999999")
    assert status(e) == 400
    s3.complete_multipart_upload(Bucket=bucket, Key="pc", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
                  {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="pc")["Body"].read() == src


def test_presigned(s3nfsd_module, s3, bucket):
    import urllib.request
    from botocore.config import Config
    v2 = s3
    s3 = s3nfsd_module.boto3(config=Config(signature_version="s3v4",
                                           s3={"addressing_style": "path"}))
    s3.put_object(Bucket=bucket, Key="p", Body=b"presigned body")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"},
                                    ExpiresIn=300)
    with urllib.request.urlopen(url) as r:
        assert r.read() == b"presigned body"
    put = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pp"},
                                    ExpiresIn=300)
    req = urllib.request.Request(put, data=b"via presigned put", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    assert s3.get_object(Bucket=bucket, Key="pp")["Body"].read() == b"via presigned put"
    # SigV2 presigned URLs work too (legacy; test_s3_sigv2.py)
    old = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"})
    if "AWSAccessKeyId" in old:
        with urllib.request.urlopen(old) as r:
            assert r.status == 200
    # expired
    exp = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"},
                                    ExpiresIn=1)
    import time
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(exp)
    assert e.value.code == 403 and b"expired" in e.value.read()
    # tampered
    bad = url.replace("/p?", "/q?")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad)
    assert e.value.code == 403 and b"SignatureDoesNotMatch" in e.value.read()


def test_subresource_defaults(s3, bucket):
    assert s3.get_bucket_versioning(Bucket=bucket).get("Status") is None
    acl = s3.get_bucket_acl(Bucket=bucket)
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_policy(Bucket=bucket)
    assert code(e) == "NoSuchBucketPolicy"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert code(e) == "NoSuchCORSConfiguration"
    with pytest.raises(ClientError) as e:
        s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    assert code(e) == "NotImplemented" and status(e) == 501
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    assert s3.get_object_acl(Bucket=bucket, Key="o")["Grants"][0]["Permission"] == "FULL_CONTROL"


def test_unbuilt_protections_refused(s3, bucket):
    """Encryption at rest is not built: asking for it on a write is refused
    (501), never silently dropped; object lock on a bucket without it is refused
    too (400, as S3)."""
    import datetime
    for kw in [dict(ObjectLockMode="GOVERNANCE",
                    ObjectLockRetainUntilDate=datetime.datetime(2030, 1, 1)),
               dict(ObjectLockLegalHoldStatus="ON")]:
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="protected", Body=b"x", **kw)
        assert code(e) == "InvalidRequest" and status(e) == 400, kw
        assert "Object Lock" in e.value.response["Error"]["Message"]
    asks = [dict(ServerSideEncryption="AES256"),
            dict(SSECustomerAlgorithm="AES256", SSECustomerKey="k" * 32)]
    for kw in asks:
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="protected", Body=b"x", **kw)
        assert code(e) == "NotImplemented" and status(e) == 501, kw
        with pytest.raises(ClientError) as e:
            s3.create_multipart_upload(Bucket=bucket, Key="protected", **kw)
        assert code(e) == "NotImplemented" and status(e) == 501, kw
    s3.put_object(Bucket=bucket, Key="src", Body=b"y")
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="protected", CopySource={"Bucket": bucket, "Key": "src"},
                       ServerSideEncryption="AES256")
    assert code(e) == "NotImplemented" and status(e) == 501
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="protected")
    assert status(e) == 404, "a refused write stored something"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    # the owner-only canned ACLs are what every object has: accepted
    for acl in ("private", "bucket-owner-full-control"):
        s3.put_object(Bucket=bucket, Key="protected", Body=b"z", ACL=acl)
    assert s3.get_object(Bucket=bucket, Key="protected")["Body"].read() == b"z"


def test_directory_keys(s3, bucket):
    s3.put_object(Bucket=bucket, Key="folder/", Body=b"")
    r = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in r["Contents"]] == ["folder/"]
    h = s3.head_object(Bucket=bucket, Key="folder/")
    assert h["ContentLength"] == 0
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="folder")
    assert status(e) == 404
    s3.put_object(Bucket=bucket, Key="folder/file", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="folder/file/deeper", Body=b"x")
    assert status(e) in (400, 409)


def test_list_multipart_uploads_delimiter(s3, bucket):
    ids = {}
    for k in ["a/1", "a/2", "b", "c/x/y"]:
        ids[k] = s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
    r = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
    assert [u["Key"] for u in r.get("Uploads", [])] == ["b"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "c/"]
    r = s3.list_multipart_uploads(Bucket=bucket, Prefix="a/")
    assert [u["Key"] for u in r["Uploads"]] == ["a/1", "a/2"]
    seen = []
    kw = {"Bucket": bucket, "Delimiter": "/", "MaxUploads": 1}
    while True:
        r = s3.list_multipart_uploads(**kw)
        seen += [u["Key"] for u in r.get("Uploads", [])]
        seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            break
        kw["KeyMarker"] = r["NextKeyMarker"]
        kw["UploadIdMarker"] = r.get("NextUploadIdMarker", "")
    assert seen == ["a/", "b", "c/"]
    for k, uid in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=k, UploadId=uid)


def test_flexible_checksums_boto3(s3, bucket):
    body = os.urandom(100000)
    r = s3.put_object(Bucket=bucket, Key="fc", Body=body, ChecksumAlgorithm="CRC32")
    want = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert r["ChecksumCRC32"] == want
    h = s3.head_object(Bucket=bucket, Key="fc", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32"] == want
    g = s3.get_object(Bucket=bucket, Key="fc", ChecksumMode="ENABLED")
    assert g["Body"].read() == body
    uid = s3.create_multipart_upload(Bucket=bucket, Key="fcm", ChecksumAlgorithm="SHA256")["UploadId"]
    p = s3.upload_part(Bucket=bucket, Key="fcm", UploadId=uid, PartNumber=1, Body=body,
                       ChecksumAlgorithm="SHA256")
    assert p["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()
    s3.complete_multipart_upload(Bucket=bucket, Key="fcm", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p["ETag"], "ChecksumSHA256": p["ChecksumSHA256"]}]})
    assert s3.get_object(Bucket=bucket, Key="fcm")["Body"].read() == body
