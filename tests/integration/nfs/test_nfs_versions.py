# SPDX-License-Identifier: Apache-2.0
"""NFS in a versioned bucket and on locked versions, through libnfs (nfs3_client.c)
and checked over S3 (docs/cross-protocol.md, "Versions and object lock"): a change
of a settled file makes a new version that keeps the old bytes, REMOVE makes a
delete marker, RENAME over a key keeps its file as a version, LINK is refused; a
version under retention is neither written, truncated, removed nor renamed."""
import datetime
import hashlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3nfsd_harness import Daemon  # noqa: E402
from test_nfs import bucket_name, nfs3_client, run_client  # noqa: E402,F401 - session fixture


@pytest.fixture(scope="module")
def vd(tmp_path_factory):
    """A daemon whose files settle 300 ms after their last change."""
    d = Daemon(str(tmp_path_factory.mktemp("vers")),
               ["--set", "settle_ms=300", "--set", "data_file_size=512MiB"]).start()
    yield d
    d.cleanup()


def fill(n, seed):
    """nfs3_client.c's fill()."""
    return bytes(((i * 131 + seed * 7 + (i >> 12)) & 0xff) for i in range(n))


def history(s3, b, key):
    r = s3.list_object_versions(Bucket=b, Prefix=key)
    ent = [(v["VersionId"], v["IsLatest"], False, v["LastModified"], v["ETag"].strip('"'))
           for v in r.get("Versions", []) if v["Key"] == key]
    ent += [(v["VersionId"], v["IsLatest"], True, v["LastModified"], None)
            for v in r.get("DeleteMarkers", []) if v["Key"] == key]
    return sorted(ent, key=lambda e: e[3], reverse=True)


def test_versions_through_libnfs(vd, nfs3_client):  # noqa: F811
    s3 = vd.boto3()
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    hv = s3.put_object(Bucket=b, Key="h", Body=b"from s3")["VersionId"]
    run_client(nfs3_client, vd, "versions", b)
    v1 = fill(20000, 1)
    v2 = v1[:5000] + b"NEW" + v1[5003:]
    f = history(s3, b, "f")
    assert [(e[1], e[2]) for e in f] == [(True, True), (False, False), (False, False)]
    got1 = s3.get_object(Bucket=b, Key="f", VersionId=f[2][0])["Body"].read()
    got2 = s3.get_object(Bucket=b, Key="f", VersionId=f[1][0])["Body"].read()
    assert got1 == v1, "the first version lost its bytes to the in-place change"
    assert got2 == v2
    assert f[2][4] == hashlib.md5(v1).hexdigest()
    h = history(s3, b, "h")
    assert [e[0] for e in h][1] == hv
    assert s3.get_object(Bucket=b, Key="h")["Body"].read() == b"gggg"
    assert s3.get_object(Bucket=b, Key="h", VersionId=hv)["Body"].read() == b"from s3"
    assert history(s3, b, "g") == []


def test_locked_version_over_libnfs(vd, nfs3_client):  # noqa: F811
    s3 = vd.boto3()
    b = bucket_name()
    s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    vid = s3.put_object(Bucket=b, Key="locked", Body=b"locked", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=until)["VersionId"]
    s3.put_object(Bucket=b, Key="other", Body=b"other")
    run_client(nfs3_client, vd, "locked", b)
    assert s3.get_object(Bucket=b, Key="locked")["Body"].read() == b"locked"
    assert [v["VersionId"] for v in s3.list_object_versions(Bucket=b, Prefix="locked")
            ["Versions"]] == [vid]
    assert s3.get_object(Bucket=b, Key="other")["Body"].read() == b"other"
