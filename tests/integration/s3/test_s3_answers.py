# SPDX-License-Identifier: Apache-2.0
"""Answers that were wrong, each as AWS gives it (issue 15): a retried
CompleteMultipartUpload, UploadPartCopy past the source's end, empty delimiter and
continuation-token, RFC 2047 metadata, Content-Encoding as sent, the checksum algorithm
of CreateMultipartUpload, InvalidTag, If-Match on a missing key, max-buckets,
GetObjectAttributes."""
import os
import sys

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import connect, read_response, signed_request  # noqa: E402


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def s3(d):
    c = d.boto3()
    c.create_bucket(Bucket="ans")
    return c


def err(fn, **kw):
    with pytest.raises(ClientError) as e:
        fn(**kw)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def test_retried_complete_multipart(s3):
    m = s3.create_multipart_upload(Bucket="ans", Key="mpu", ChecksumAlgorithm="CRC32")
    assert m["ChecksumAlgorithm"] == "CRC32"  # echoed
    p = s3.upload_part(Bucket="ans", Key="mpu", UploadId=m["UploadId"], PartNumber=1, Body=b"x")
    parts = {"Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]}
    first = s3.complete_multipart_upload(Bucket="ans", Key="mpu", UploadId=m["UploadId"],
                                         MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket="ans", Key="mpu", UploadId=m["UploadId"],
                                         MultipartUpload=parts)
    assert again["ETag"] == first["ETag"]
    # another object at the key since: the upload is gone for good
    s3.put_object(Bucket="ans", Key="mpu", Body=b"replaced")
    assert err(s3.complete_multipart_upload, Bucket="ans", Key="mpu", UploadId=m["UploadId"],
               MultipartUpload=parts) == ("NoSuchUpload", 404)


def test_upload_part_copy_range_past_end(s3):
    s3.put_object(Bucket="ans", Key="src10", Body=b"0123456789")
    m = s3.create_multipart_upload(Bucket="ans", Key="pc")
    for rng in ("bytes=5-10", "bytes=10-12", "bytes=3-2", "bytes=-4", "bytes=4-"):
        code, st = err(s3.upload_part_copy, Bucket="ans", Key="pc", UploadId=m["UploadId"],
                       PartNumber=1, CopySource={"Bucket": "ans", "Key": "src10"},
                       CopySourceRange=rng)
        assert (code, st) == ("InvalidArgument", 400), rng
    r = s3.upload_part_copy(Bucket="ans", Key="pc", UploadId=m["UploadId"], PartNumber=1,
                            CopySource={"Bucket": "ans", "Key": "src10"},
                            CopySourceRange="bytes=5-9")
    s3.complete_multipart_upload(Bucket="ans", Key="pc", UploadId=m["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r[
                                     "CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket="ans", Key="pc")["Body"].read() == b"56789"


def raw(d, method, path, query=(), headers=None, body=b""):
    req = signed_request(d, method, path, query, headers=headers, body=body)[0]
    s = connect(d)
    s.sendall(req)
    st, h, b = read_response(s, head=method == "HEAD")
    s.close()
    return st, h, b


def test_empty_delimiter_and_token(d, s3):
    s3.put_object(Bucket="ans", Key="a/b", Body=b"1")
    st, _, body = raw(d, "GET", "/ans", [("delimiter", ""), ("list-type", "2")])
    assert st == 200 and b"<Delimiter>" not in body and b"<Key>a/b</Key>" in body
    st, _, body = raw(d, "GET", "/ans", [("continuation-token", ""), ("list-type", "2")])
    assert st == 200 and b"<Key>a/b</Key>" in body


def test_metadata_and_encoding_as_aws(d, s3):
    # (raw: botocore refuses non-ASCII metadata on the way in)
    st, _, _ = raw(d, "PUT", "/ans/meta", headers={"x-amz-meta-city": "Zürich",
                                                   "x-amz-meta-plain": "ok",
                                                   "content-encoding": "deflate, gzip"}, body=b"m")
    assert st == 200
    st, h, _ = raw(d, "HEAD", "/ans/meta")
    assert st == 200
    assert h["x-amz-meta-city"] == "=?UTF-8?B?WsO8cmljaA==?="
    assert h["x-amz-meta-plain"] == "ok"
    assert h["content-encoding"] == "deflate, gzip"


def test_tags_if_match_max_buckets(d, s3):
    s3.put_object(Bucket="ans", Key="t", Body=b"t")
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(11)]
    assert err(s3.put_object_tagging, Bucket="ans", Key="t",
               Tagging={"TagSet": tags}) == ("InvalidTag", 400)
    st, _, body = raw(d, "PUT", "/ans/missing-key", headers={"if-match": '"0123"'}, body=b"x")
    assert st == 404 and b"NoSuchKey" in body
    for i in range(3):
        s3.create_bucket(Bucket=f"mb-{i}")
    # (raw: this botocore has no max-buckets)
    import re
    st, _, body = raw(d, "GET", "/", [("max-buckets", "2")])
    names = re.findall(rb"<Name>([^<]*)</Name>", body)
    tok = re.search(rb"<ContinuationToken>([^<]*)</ContinuationToken>", body)
    assert st == 200 and len(names) == 2 and tok
    st, _, body = raw(d, "GET", "/", [("continuation-token", tok.group(1).decode())])
    names += re.findall(rb"<Name>([^<]*)</Name>", body)
    assert names == sorted(names) and {b"mb-0", b"mb-1", b"mb-2", b"ans"} <= set(names)
    assert b"<ContinuationToken>" not in body
    st, _, body = raw(d, "GET", "/", [("prefix", "mb-")])
    assert re.findall(rb"<Name>([^<]*)</Name>", body) == [b"mb-0", b"mb-1", b"mb-2"]
    assert raw(d, "GET", "/", [("max-buckets", "0")])[0] == 400


def test_get_object_attributes(s3):
    s3.put_object(Bucket="ans", Key="attr", Body=b"attributes", ChecksumAlgorithm="SHA256")
    a = s3.get_object_attributes(Bucket="ans", Key="attr",
                                 ObjectAttributes=["ETag", "Checksum", "ObjectSize",
                                                   "StorageClass", "ObjectParts"])
    head = s3.head_object(Bucket="ans", Key="attr", ChecksumMode="ENABLED")
    assert a["ETag"] == head["ETag"].strip('"')
    assert a["ObjectSize"] == 10 and a["StorageClass"] == "STANDARD"
    assert a["Checksum"]["ChecksumSHA256"] == head["ChecksumSHA256"]
    assert "ObjectParts" not in a
    a = s3.get_object_attributes(Bucket="ans", Key="mpu", ObjectAttributes=["ObjectSize"])
    assert a["ObjectSize"] == 8
    assert err(s3.get_object_attributes, Bucket="ans", Key="nope",
               ObjectAttributes=["ETag"])[1] == 404


def test_composite_checksum(s3):
    import base64
    import zlib
    m = s3.create_multipart_upload(Bucket="ans", Key="comp", ChecksumAlgorithm="CRC32")
    bodies = [os.urandom(5 << 20), b"tail part"]
    parts, raw = [], b""
    for i, body in enumerate(bodies, 1):
        r = s3.upload_part(Bucket="ans", Key="comp", UploadId=m["UploadId"], PartNumber=i,
                           Body=body, ChecksumAlgorithm="CRC32")
        parts.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
        raw += base64.b64decode(r["ChecksumCRC32"])
    want = base64.b64encode(zlib.crc32(raw).to_bytes(4, "big")).decode() + "-2"
    # a part checksum that is not the one uploaded
    bad = [dict(parts[0], ChecksumCRC32="AAAAAA=="), parts[1]]
    assert err(s3.complete_multipart_upload, Bucket="ans", Key="comp", UploadId=m["UploadId"],
               MultipartUpload={"Parts": bad}) == ("InvalidPart", 400)
    done = s3.complete_multipart_upload(Bucket="ans", Key="comp", UploadId=m["UploadId"],
                                        MultipartUpload={"Parts": parts})
    assert done["ChecksumCRC32"] == want
    assert s3.head_object(Bucket="ans", Key="comp", ChecksumMode="ENABLED")["ChecksumCRC32"] == want
    a = s3.get_object_attributes(Bucket="ans", Key="comp", ObjectAttributes=["Checksum",
                                                                             "ObjectParts"])
    assert a["Checksum"]["ChecksumCRC32"] == want and a["ObjectParts"]["TotalPartsCount"] == 2
    s3.delete_object(Bucket="ans", Key="comp")
