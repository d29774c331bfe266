# SPDX-License-Identifier: Apache-2.0
"""Lifecycle configurations over S3 (boto3 and the aws cli) and the worker that
applies them, with the test clock (lifecycle_day_s=2: a lifecycle day is two
seconds; lifecycle_interval_s=1): Put/Get/DeleteBucketLifecycleConfiguration
and their validation, filters (prefix, tags, sizes, And), Expiration (days,
date, expired delete markers), NoncurrentVersionExpiration (days, newer
noncurrent versions), AbortIncompleteMultipartUpload, object lock respected,
Transition refused in a bucket without a tier policy, NoncurrentVersionTransition
refused (docs/s3-compatibility.md, "Lifecycle"; Transitions that fire:
tests/integration/tier/test_tier_lifecycle.py)."""
import datetime
import itertools
import json
import os
import subprocess
import time

import pytest
from botocore.exceptions import ClientError

from s3nfsd_harness import Daemon

AWS = "/usr/bin/aws"
_n = itertools.count()
WAIT = 40  # seconds a rule may take to fire on a loaded machine (it needs 2-4 s)


def err(e):
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    dm = Daemon(str(tmp_path_factory.mktemp("lc")),
                ["--set", "lifecycle_day_s=2", "--set", "lifecycle_interval_s=1"]).start()
    yield dm
    dm.cleanup()


@pytest.fixture(scope="module")
def s3(d):
    return d.boto3()


def bucket(s3, versioning=None, lock=False):
    b = f"lc-{os.getpid()}-{next(_n)}"
    if lock:
        s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    else:
        s3.create_bucket(Bucket=b)
    if versioning:
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": versioning})
    return b


def put_rules(s3, b, *rules):
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": list(rules)})


def keys(s3, b):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", []))


def wait_for(what, fn, timeout=WAIT):
    t0 = time.monotonic()
    while True:
        got = fn()
        if got:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"{what}: not within {timeout}s"
        time.sleep(0.5)


def test_configuration_roundtrip_and_validation(s3):
    b = bucket(s3)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert err(e) == ("NoSuchLifecycleConfiguration", 404)
    rules = [
        {"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
         "Expiration": {"Days": 7}},
        {"ID": "big-tagged", "Status": "Disabled",
         "Filter": {"And": {"Prefix": "data/", "Tags": [{"Key": "k", "Value": "v"}],
                            "ObjectSizeGreaterThan": 1000, "ObjectSizeLessThan": 5000}},
         "Expiration": {"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)}},
        {"ID": "old", "Status": "Enabled", "Filter": {},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 3, "NewerNoncurrentVersions": 2},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        {"ID": "markers", "Status": "Enabled", "Filter": {"Tag": {"Key": "a", "Value": "b"}},
         "Expiration": {"Days": 1}},
    ]
    put_rules(s3, b, *rules)
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert got == rules
    s3.delete_bucket_lifecycle(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert err(e)[1] == 404
    bad = [
        ({"ID": "x", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 0}},
         "InvalidArgument"),
        ({"ID": "x", "Status": "Enabled", "Filter": {"Tag": {"Key": "a", "Value": "b"}},
          "Expiration": {"ExpiredObjectDeleteMarker": True}}, "InvalidArgument"),
        ({"ID": "x", "Status": "Enabled", "Filter": {},
          "Expiration": {"Date": datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.timezone.utc)}},
         "InvalidArgument"),
        ({"ID": "x", "Status": "Enabled", "Filter": {}}, "InvalidArgument"),
    ]
    for rule, code in bad:
        with pytest.raises(ClientError) as e:
            put_rules(s3, b, rule)
        assert err(e) == (code, 400), rule
    with pytest.raises(ClientError) as e:
        put_rules(s3, b, {"ID": "x", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}},
                  {"ID": "x", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 2}})
    assert err(e) == ("InvalidArgument", 400)
    # Transition: this bucket has no tier policy (tests/integration/tier/
    # test_tier_lifecycle.py: with one); NoncurrentVersionTransition is not built
    with pytest.raises(ClientError) as e:
        put_rules(s3, b, {"ID": "t", "Status": "Enabled", "Filter": {},
                          "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]})
    assert err(e) == ("InvalidRequest", 400)
    assert "tier policy" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        put_rules(s3, b, {"ID": "t", "Status": "Enabled", "Filter": {},
                          "NoncurrentVersionTransitions": [{"NoncurrentDays": 30,
                                                            "StorageClass": "GLACIER"}]})
    assert err(e) == ("NotImplemented", 501)
    assert "NoncurrentVersionTransition" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert err(e)[1] == 404, "a refused configuration must not be stored"


def test_expiration_filters(s3):
    b = bucket(s3)
    s3.put_object(Bucket=b, Key="tmp/a", Body=b"a")
    s3.put_object(Bucket=b, Key="tmp/big", Body=b"x" * 3000)
    s3.put_object(Bucket=b, Key="keep/a", Body=b"a")
    s3.put_object(Bucket=b, Key="keep/tagged", Body=b"t", Tagging="scratch=yes")
    s3.put_object(Bucket=b, Key="keep/other-tag", Body=b"t", Tagging="scratch=no")
    s3.put_object(Bucket=b, Key="dated", Body=b"d")
    put_rules(s3, b,
              {"ID": "small-tmp", "Status": "Enabled",
               "Filter": {"And": {"Prefix": "tmp/", "ObjectSizeLessThan": 1000}},
               "Expiration": {"Days": 1}},
              {"ID": "tagged", "Status": "Enabled",
               "Filter": {"Tag": {"Key": "scratch", "Value": "yes"}}, "Expiration": {"Days": 1}},
              {"ID": "date", "Status": "Enabled", "Filter": {"Prefix": "dated"},
               "Expiration": {"Date": datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)}},
              {"ID": "off", "Status": "Disabled", "Filter": {}, "Expiration": {"Days": 1}})
    wait_for("expiration", lambda: keys(s3, b) == ["keep/a", "keep/other-tag", "tmp/big"])
    time.sleep(3)  # and nothing else goes afterwards
    assert keys(s3, b) == ["keep/a", "keep/other-tag", "tmp/big"]


def test_versioned_expiration_and_noncurrent(s3):
    b = bucket(s3, "Enabled")
    for i in range(4):
        s3.put_object(Bucket=b, Key="ckpt", Body=str(i).encode())
    s3.put_object(Bucket=b, Key="gone", Body=b"g")
    gone_marker = s3.delete_object(Bucket=b, Key="gone")["VersionId"]
    put_rules(s3, b,
              {"ID": "nc", "Status": "Enabled", "Filter": {"Prefix": "ckpt"},
               "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}},
              {"ID": "cur", "Status": "Enabled", "Filter": {"Prefix": "gone"},
               "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
              {"ID": "dm", "Status": "Enabled", "Filter": {"Prefix": "gone"},
               "Expiration": {"ExpiredObjectDeleteMarker": True}})

    def ckpt():
        return [v["VersionId"] for v in
                s3.list_object_versions(Bucket=b, Prefix="ckpt").get("Versions", [])]
    # the current version and the newest noncurrent one stay
    wait_for("noncurrent expiration", lambda: len(ckpt()) == 2)
    assert s3.get_object(Bucket=b, Key="ckpt")["Body"].read() == b"3"
    # "gone": its data version expires, then its marker is alone and goes too
    wait_for("expired delete marker", lambda: not s3.list_object_versions(
        Bucket=b, Prefix="gone").get("DeleteMarkers") and not s3.list_object_versions(
        Bucket=b, Prefix="gone").get("Versions"))
    with pytest.raises(ClientError):
        s3.head_object(Bucket=b, Key="gone", VersionId=gone_marker)
    # current objects of a versioned bucket expire into delete markers
    s3.put_object(Bucket=b, Key="cur/x", Body=b"x")
    put_rules(s3, b, {"ID": "exp", "Status": "Enabled", "Filter": {"Prefix": "cur/"},
                      "Expiration": {"Days": 1}})
    wait_for("expiration into a delete marker", lambda: s3.list_object_versions(
        Bucket=b, Prefix="cur/").get("DeleteMarkers"))
    assert len(s3.list_object_versions(Bucket=b, Prefix="cur/")["Versions"]) == 1


def test_abort_incomplete_multipart(s3):
    b = bucket(s3)
    up = s3.create_multipart_upload(Bucket=b, Key="up/big")["UploadId"]
    s3.upload_part(Bucket=b, Key="up/big", UploadId=up, PartNumber=1, Body=b"p" * 1000)
    keep = s3.create_multipart_upload(Bucket=b, Key="other")["UploadId"]
    put_rules(s3, b, {"ID": "abort", "Status": "Enabled", "Filter": {"Prefix": "up/"},
                      "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})
    wait_for("multipart abort", lambda: [u["UploadId"] for u in s3.list_multipart_uploads(
        Bucket=b).get("Uploads", [])] == [keep])


def test_lifecycle_respects_object_lock(s3):
    b = bucket(s3, lock=True)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    locked = s3.put_object(Bucket=b, Key="l", Body=b"1", ObjectLockMode="COMPLIANCE",
                           ObjectLockRetainUntilDate=until)["VersionId"]
    s3.put_object(Bucket=b, Key="l", Body=b"2")
    free = s3.put_object(Bucket=b, Key="f", Body=b"1")["VersionId"]
    s3.put_object(Bucket=b, Key="f", Body=b"2")
    put_rules(s3, b, {"ID": "nc", "Status": "Enabled", "Filter": {},
                      "NoncurrentVersionExpiration": {"NoncurrentDays": 1}})
    wait_for("unlocked noncurrent version expires", lambda: free not in [
        v["VersionId"] for v in s3.list_object_versions(Bucket=b, Prefix="f")["Versions"]])
    assert locked in [v["VersionId"]
                      for v in s3.list_object_versions(Bucket=b, Prefix="l")["Versions"]]


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_lifecycle(d, s3, tmp_path):
    b = bucket(s3)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")
    cfg = {"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
                      "Expiration": {"Days": 1}}]}
    (tmp_path / "lc.json").write_text(json.dumps(cfg))
    r = subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, "s3api",
                        "put-bucket-lifecycle-configuration", "--bucket", b,
                        "--lifecycle-configuration", f"file://{tmp_path / 'lc.json'}"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, "--output", "json", "s3api",
                        "get-bucket-lifecycle-configuration", "--bucket", b],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["Rules"] == cfg["Rules"], r.stderr


def admin(d, method, path, body=None):
    import urllib.request
    req = urllib.request.Request(d.admin_endpoint + "/api/v1" + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def system_meta_ops(d):
    import urllib.request
    req = urllib.request.Request(d.admin_endpoint + "/metrics",
                                 headers={"Authorization": f"Bearer {d.admin_token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if (line.startswith('s3nfs_qos_admitted_ops_total{tenant="system"')
                    and 'class="meta"' in line):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_worker_is_system_class_metadata(d, s3):
    """Every entry the worker reads and every removal is one metadata operation
    of the QoS system class: counted in its metrics, and held to a system
    meta_iops cap (30 removals and their entries at 10 op/s take seconds)."""
    b = bucket(s3)
    n = 30
    for i in range(n):
        s3.put_object(Bucket=b, Key=f"x/{i:03d}", Body=b"x")
    before = system_meta_ops(d)
    assert admin(d, "PUT", "/qos/system", {"meta_iops": 10, "burst_ms": 100}) == 200
    try:
        put_rules(s3, b, {"ID": "all", "Status": "Enabled", "Filter": {"Prefix": "x/"},
                          "Expiration": {"Days": 1}})
        wait_for("a first removal", lambda: len(keys(s3, b)) < n, timeout=60)
        t1 = time.monotonic()
        wait_for("every removal", lambda: keys(s3, b) == [], timeout=60)
        took = time.monotonic() - t1
        assert took >= 3.0, took  # ~2 operations per object left, at 10 op/s
        assert system_meta_ops(d) - before >= 2 * n
    finally:
        assert admin(d, "DELETE", "/qos/system") == 204
