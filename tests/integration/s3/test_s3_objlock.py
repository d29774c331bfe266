# SPDX-License-Identifier: Apache-2.0
"""Object lock over S3 (boto3 and the aws cli) against a real s3nfsd: bucket
creation with lock (botocore's "True"), the configuration and its default
retention, retention and legal hold per version (headers on PUT, copy and
multipart; Put/GetObjectRetention and LegalHold), what a lock forbids (deletes
of the version, shortening, suspending versioning), the governance bypass, and
that no admin path removes locked data (docs/s3-compatibility.md, "Object
lock")."""
import datetime
import itertools
import json
import os
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tenants"))
from tenutil import Admin, make_tenant, s3_for  # noqa: E402

AWS = "/usr/bin/aws"
_n = itertools.count()


def err(e):
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def later(**kw):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(**kw)


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def s3(d):
    return d.boto3()


def lock_bucket(s3, default=None):
    b = f"lock-{os.getpid()}-{next(_n)}"
    s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    if default:
        s3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": default}})
    return b


def test_bucket_with_object_lock(s3):
    b = lock_bucket(s3)
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    cfg = s3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]
    assert cfg == {"ObjectLockEnabled": "Enabled"}
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    assert err(e) == ("InvalidBucketState", 409)
    s3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2}}})
    rule = s3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]["Rule"]
    assert rule == {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2}}
    with pytest.raises(ClientError) as e:
        s3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2, "Years": 1}}})
    assert err(e)[1] == 400
    # a plain bucket: no configuration, and none without versioning
    p = f"plain-{os.getpid()}-{next(_n)}"
    s3.create_bucket(Bucket=p)
    with pytest.raises(ClientError) as e:
        s3.get_object_lock_configuration(Bucket=p)
    assert err(e) == ("ObjectLockConfigurationNotFoundError", 404)
    with pytest.raises(ClientError) as e:
        s3.put_object_lock_configuration(Bucket=p, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled"})
    assert err(e) == ("InvalidBucketState", 409)
    with pytest.raises(ClientError) as e:
        s3.get_object_retention(Bucket=p, Key="x")
    assert err(e) == ("InvalidRequest", 400)


def test_default_and_governance(s3):
    b = lock_bucket(s3, {"Mode": "GOVERNANCE", "Days": 1})
    vid = s3.put_object(Bucket=b, Key="g", Body=b"gov")["VersionId"]
    h = s3.head_object(Bucket=b, Key="g")
    assert h["ObjectLockMode"] == "GOVERNANCE"
    assert h["ObjectLockRetainUntilDate"] > later(hours=23)
    r = s3.get_object_retention(Bucket=b, Key="g", VersionId=vid)["Retention"]
    assert r["Mode"] == "GOVERNANCE"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=b, Key="g", VersionId=vid)
    assert err(e) == ("AccessDenied", 403)
    # a delete without a version makes a marker; the version stays
    assert s3.delete_object(Bucket=b, Key="g")["DeleteMarker"]
    # shortening governance needs the bypass, then the delete with the bypass goes through
    with pytest.raises(ClientError) as e:
        s3.put_object_retention(Bucket=b, Key="g", VersionId=vid, Retention={
            "Mode": "GOVERNANCE", "RetainUntilDate": later(minutes=5)})
    assert err(e) == ("AccessDenied", 403)
    s3.put_object_retention(Bucket=b, Key="g", VersionId=vid, BypassGovernanceRetention=True,
                            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(minutes=5)})
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=b, Key="g", VersionId=vid)
    assert err(e)[1] == 403
    s3.delete_object(Bucket=b, Key="g", VersionId=vid, BypassGovernanceRetention=True)
    # DeleteObjects: the bypass header applies to each key
    v2 = s3.put_object(Bucket=b, Key="g2", Body=b"x")["VersionId"]
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "g2", "VersionId": v2}]})
    assert [x["Code"] for x in r["Errors"]] == ["AccessDenied"]
    r = s3.delete_objects(Bucket=b, BypassGovernanceRetention=True,
                          Delete={"Objects": [{"Key": "g2", "VersionId": v2}]})
    assert r["Deleted"][0]["VersionId"] == v2


def test_compliance_and_legal_hold(s3):
    b = lock_bucket(s3)
    vid = s3.put_object(Bucket=b, Key="c", Body=b"comp", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=later(hours=1))["VersionId"]
    for bypass in (False, True):
        with pytest.raises(ClientError) as e:
            s3.delete_object(Bucket=b, Key="c", VersionId=vid, BypassGovernanceRetention=bypass)
        assert err(e) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as e:
        s3.put_object_retention(Bucket=b, Key="c", VersionId=vid, BypassGovernanceRetention=True,
                                Retention={"Mode": "GOVERNANCE", "RetainUntilDate": later(hours=2)})
    assert err(e)[1] == 403
    s3.put_object_retention(Bucket=b, Key="c", VersionId=vid,
                            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later(hours=2)})
    assert s3.get_object_retention(Bucket=b, Key="c")["Retention"]["RetainUntilDate"] > \
        later(minutes=100)
    # a new version over it is allowed; the locked one stays
    s3.put_object(Bucket=b, Key="c", Body=b"newer")
    assert s3.get_object(Bucket=b, Key="c", VersionId=vid)["Body"].read() == b"comp"
    # legal hold, without retention
    hv = s3.put_object(Bucket=b, Key="h", Body=b"held", ObjectLockLegalHoldStatus="ON")["VersionId"]
    assert s3.get_object_legal_hold(Bucket=b, Key="h")["LegalHold"]["Status"] == "ON"
    assert s3.head_object(Bucket=b, Key="h")["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=b, Key="h", VersionId=hv, BypassGovernanceRetention=True)
    assert err(e)[1] == 403
    s3.put_object_legal_hold(Bucket=b, Key="h", VersionId=hv, LegalHold={"Status": "OFF"})
    s3.delete_object(Bucket=b, Key="h", VersionId=hv)
    with pytest.raises(ClientError) as e:
        s3.get_object_retention(Bucket=b, Key="c", VersionId="3" * 32)
    assert err(e)[0] == "NoSuchVersion"
    nv = s3.put_object(Bucket=b, Key="n", Body=b"none")["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.get_object_retention(Bucket=b, Key="n", VersionId=nv)
    assert err(e) == ("NoSuchObjectLockConfiguration", 404)
    # bad headers
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=b, Key="bad", Body=b"x", ObjectLockMode="COMPLIANCE",
                      ObjectLockRetainUntilDate=later(hours=-1))
    assert err(e) == ("InvalidArgument", 400)


def test_lock_on_copy_and_multipart(s3):
    b = lock_bucket(s3)
    s3.put_object(Bucket=b, Key="src", Body=b"s" * 10)
    c = s3.copy_object(Bucket=b, Key="cp", CopySource={"Bucket": b, "Key": "src"},
                       ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=later(hours=1))
    assert s3.head_object(Bucket=b, Key="cp", VersionId=c["VersionId"])["ObjectLockMode"] == \
        "GOVERNANCE"
    up = s3.create_multipart_upload(Bucket=b, Key="mp", ObjectLockMode="COMPLIANCE",
                                    ObjectLockRetainUntilDate=later(hours=1),
                                    ObjectLockLegalHoldStatus="ON")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"m" * 100)
    done = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    h = s3.head_object(Bucket=b, Key="mp", VersionId=done["VersionId"])
    assert h["ObjectLockMode"] == "COMPLIANCE" and h["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=b, Key="mp", VersionId=done["VersionId"])
    assert err(e)[1] == 403


def test_no_admin_path_removes_locked_data(d):
    """COMPLIANCE data of a tenant: its bucket cannot be deleted (versions left), the tenant
    cannot be deleted through the admin API (it has a bucket), and the data is intact."""
    adm = Admin(d)
    t = make_tenant(adm, f"lockt{os.getpid()}{next(_n)}")
    s3 = s3_for(d, t)
    b = lock_bucket(s3)
    vid = s3.put_object(Bucket=b, Key="k", Body=b"keep", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=later(hours=1))["VersionId"]
    s3.delete_object(Bucket=b, Key="k")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=b)
    assert err(e) == ("BucketNotEmpty", 409)
    st, body, _ = adm.raw("DELETE", f"/tenants/{t.id}")
    assert st == 409, (st, body)
    assert s3.get_object(Bucket=b, Key="k", VersionId=vid)["Body"].read() == b"keep"


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_object_lock(d, s3):
    def aws(*args):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key,
                   AWS_SECRET_ACCESS_KEY=d.secret_key, AWS_DEFAULT_REGION="us-east-1",
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                   AWS_PAGER="")
        r = subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, "--output", "json", *args],
                           env=env, capture_output=True, text=True, timeout=120)
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr
    b = f"clilock-{os.getpid()}-{next(_n)}"
    rc, _, e = aws("s3api", "create-bucket", "--bucket", b, "--object-lock-enabled-for-bucket")
    assert rc == 0, e
    rc, out, e = aws("s3api", "get-object-lock-configuration", "--bucket", b)
    assert rc == 0 and out["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled", e
    vid = s3.put_object(Bucket=b, Key="k", Body=b"1")["VersionId"]
    until = later(hours=1).strftime("%Y-%m-%dT%H:%M:%SZ")
    rc, _, e = aws("s3api", "put-object-retention", "--bucket", b, "--key", "k",
                   "--version-id", vid, "--retention", f"Mode=GOVERNANCE,RetainUntilDate={until}")
    assert rc == 0, e
    rc, _, e = aws("s3api", "delete-object", "--bucket", b, "--key", "k", "--version-id", vid)
    assert rc != 0 and "AccessDenied" in e
    rc, _, e = aws("s3api", "delete-object", "--bucket", b, "--key", "k", "--version-id", vid,
                   "--bypass-governance-retention")
    assert rc == 0, e
