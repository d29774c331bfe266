# SPDX-License-Identifier: Apache-2.0
"""Who may do what with versions (docs/s3-compatibility.md, "Versioning", "Access
control"): versioning, object-lock and lifecycle configurations are the bucket owner's;
a request on one version checks the action's version form (s3:GetObjectVersion,
s3:DeleteObjectVersion, ...), so a bucket policy can allow or deny versions apart from
current objects; x-amz-bypass-governance-retention needs s3:BypassGovernanceRetention;
each version has its own ACL (Get/PutObjectAcl with versionId)."""
import datetime
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_s3_acl import anon, denied, err, grants, user  # noqa: E402

ALL = "http://acs.amazonaws.com/groups/global/AllUsers"


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def two(d):
    return user(d, "valice"), user(d, "vbob")


def policy(c, bucket, *statements):
    c.put_bucket_policy(Bucket=bucket, Policy=json.dumps(
        {"Version": "2012-10-17", "Statement": list(statements)}))


def versioned(c, name, lock=False):
    if lock:
        c.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    else:
        c.create_bucket(Bucket=name)
        c.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})


def test_bucket_settings_are_the_owners(d, two):
    (_, alice), (_, bob) = two
    versioned(alice, "va-settings")
    denied(bob.get_bucket_versioning, Bucket="va-settings")
    denied(bob.put_bucket_versioning, Bucket="va-settings",
           VersioningConfiguration={"Status": "Suspended"})
    denied(bob.get_object_lock_configuration, Bucket="va-settings")
    denied(bob.put_bucket_lifecycle_configuration, Bucket="va-settings",
           LifecycleConfiguration={"Rules": [{"ID": "x", "Status": "Enabled", "Filter": {},
                                              "Expiration": {"Days": 1}}]})
    denied(bob.get_bucket_lifecycle_configuration, Bucket="va-settings")
    denied(bob.delete_bucket_lifecycle, Bucket="va-settings")
    denied(bob.list_object_versions, Bucket="va-settings")
    denied(anon(d).list_object_versions, Bucket="va-settings")
    assert alice.get_bucket_versioning(Bucket="va-settings")["Status"] == "Enabled"


def test_version_actions_in_policies(d, two):
    (ua, alice), (ub, bob) = two
    versioned(alice, "va-pol")
    v1 = alice.put_object(Bucket="va-pol", Key="k", Body=b"one")["VersionId"]
    alice.put_object(Bucket="va-pol", Key="k", Body=b"two")
    bob_arn = "arn:aws:iam::default:user/vbob"
    # s3:GetObject reaches the current object only; a version needs s3:GetObjectVersion
    policy(alice, "va-pol", {"Effect": "Allow", "Principal": {"AWS": bob_arn},
                             "Action": "s3:GetObject", "Resource": "arn:aws:s3:::va-pol/*"})
    assert bob.get_object(Bucket="va-pol", Key="k")["Body"].read() == b"two"
    denied(bob.get_object, Bucket="va-pol", Key="k", VersionId=v1)
    policy(alice, "va-pol", {"Effect": "Allow", "Principal": {"AWS": bob_arn},
                             "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                             "Resource": "arn:aws:s3:::va-pol/*"})
    assert bob.get_object(Bucket="va-pol", Key="k", VersionId=v1)["Body"].read() == b"one"
    # a Deny of s3:DeleteObjectVersion: deletes make markers, versions stay
    policy(alice, "va-pol", {"Effect": "Deny", "Principal": "*",
                             "Action": "s3:DeleteObjectVersion",
                             "Resource": "arn:aws:s3:::va-pol/*"})
    denied(alice.delete_object, Bucket="va-pol", Key="k", VersionId=v1)
    r = alice.delete_objects(Bucket="va-pol", Delete={"Objects": [{"Key": "k", "VersionId": v1}]})
    assert [e["Code"] for e in r.get("Errors", [])] == ["AccessDenied"]
    assert alice.delete_object(Bucket="va-pol", Key="k")["DeleteMarker"] is True
    assert alice.get_object(Bucket="va-pol", Key="k", VersionId=v1)["Body"].read() == b"one"
    alice.delete_bucket_policy(Bucket="va-pol")
    alice.delete_object(Bucket="va-pol", Key="k", VersionId=v1)
    assert err(alice.get_object, Bucket="va-pol", Key="k", VersionId=v1)[1] == 404


def test_bypass_needs_its_permission(d, two):
    (_, alice), _ = two
    versioned(alice, "va-bypass", lock=True)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    v = alice.put_object(Bucket="va-bypass", Key="g", Body=b"g", ObjectLockMode="GOVERNANCE",
                         ObjectLockRetainUntilDate=until)["VersionId"]
    policy(alice, "va-bypass", {"Effect": "Deny", "Principal": "*",
                                "Action": "s3:BypassGovernanceRetention",
                                "Resource": "arn:aws:s3:::va-bypass/*"})
    denied(alice.delete_object, Bucket="va-bypass", Key="g", VersionId=v,
           BypassGovernanceRetention=True)
    denied(alice.put_object_retention, Bucket="va-bypass", Key="g", VersionId=v,
           Retention={}, BypassGovernanceRetention=True)
    alice.delete_bucket_policy(Bucket="va-bypass")
    alice.delete_object(Bucket="va-bypass", Key="g", VersionId=v, BypassGovernanceRetention=True)
    assert err(alice.head_object, Bucket="va-bypass", Key="g", VersionId=v)[1] == 404


def test_each_version_has_its_acl(d, two):
    (_, alice), (_, bob) = two
    versioned(alice, "va-acl")
    v1 = alice.put_object(Bucket="va-acl", Key="k", Body=b"old")["VersionId"]
    v2 = alice.put_object(Bucket="va-acl", Key="k", Body=b"new")["VersionId"]
    r = alice.put_object_acl(Bucket="va-acl", Key="k", VersionId=v1, ACL="public-read")
    assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == v1
    assert (ALL, "READ") in grants(alice.get_object_acl(Bucket="va-acl", Key="k", VersionId=v1))
    assert (ALL, "READ") not in grants(alice.get_object_acl(Bucket="va-acl", Key="k"))
    assert (ALL, "READ") not in grants(alice.get_object_acl(Bucket="va-acl", Key="k",
                                                             VersionId=v2))
    # the old version is public, the current one is not
    assert anon(d).get_object(Bucket="va-acl", Key="k", VersionId=v1)["Body"].read() == b"old"
    denied(anon(d).get_object, Bucket="va-acl", Key="k")
    denied(bob.get_object, Bucket="va-acl", Key="k", VersionId=v2)
    assert bob.get_object(Bucket="va-acl", Key="k", VersionId=v1)["Body"].read() == b"old"
