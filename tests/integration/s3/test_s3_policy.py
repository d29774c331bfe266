# SPDX-License-Identifier: Apache-2.0
"""Bucket policies (docs/s3-compatibility.md, "Bucket policies"): Put/Get/DeleteBucketPolicy
and GetBucketPolicyStatus with boto3 and the aws cli; allow/deny matrices over two users of
a tenant and anonymous requests, an explicit Deny beating an Allow (policy or ACL),
conditions on the source address (other loopback addresses as other clients), TLS, list
parameters and tags; MalformedPolicy with its reason; principals confined to the tenant."""
import json
import os
import socket
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import admin, build_request, read_response  # noqa: E402
from test_s3_acl import anon, denied, err, user  # noqa: E402


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def two(d):
    a = user(d, "palice")
    b = user(d, "pbob")
    return a, b


def put_policy(c, bucket, *statements, version="2012-10-17"):
    c.put_bucket_policy(Bucket=bucket, Policy=json.dumps(
        {"Version": version, "Statement": list(statements)}))


def raw_get(d, path, source="127.0.0.1", headers=None):
    """An unsigned GET from loopback address @source (another client)."""
    host, port = d.s3_endpoint.split("//", 1)[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    h = {"Host": f"{host}:{port}"}
    h.update(headers or {})
    s.sendall(build_request("GET", path, h))
    st, _, body = read_response(s)
    s.close()
    return st, body


def test_allow_and_deny(d, two):
    (ua, alice), (ub, bob) = two
    alice.create_bucket(Bucket="pol-a")
    alice.put_object(Bucket="pol-a", Key="shared/doc", Body=b"shared")
    alice.put_object(Bucket="pol-a", Key="shared/secret", Body=b"secret")
    alice.put_object(Bucket="pol-a", Key="other", Body=b"other")
    denied(bob.get_object, Bucket="pol-a", Key="shared/doc")
    put_policy(alice, "pol-a",
               {"Sid": "bob-reads-shared", "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::000000000001:user/pbob"},
                "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::pol-a/shared/*"},
               {"Sid": "bob-lists-shared", "Effect": "Allow",
                "Principal": {"AWS": ["arn:aws:iam::default:user/pbob"]},
                "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::pol-a",
                "Condition": {"StringLike": {"s3:prefix": "shared/*"}}},
               {"Sid": "never-the-secret", "Effect": "Deny", "Principal": "*",
                "Action": "s3:Get*", "Resource": "arn:aws:s3:::pol-a/shared/secret"})
    assert bob.get_object(Bucket="pol-a", Key="shared/doc")["Body"].read() == b"shared"
    denied(bob.get_object, Bucket="pol-a", Key="other")
    denied(bob.put_object, Bucket="pol-a", Key="shared/new", Body=b"x")
    # the Deny beats the Allow, for bob and for the owner herself
    denied(bob.get_object, Bucket="pol-a", Key="shared/secret")
    denied(alice.get_object, Bucket="pol-a", Key="shared/secret")
    denied(alice.get_object_acl, Bucket="pol-a", Key="shared/secret")
    # s3:prefix: bob lists under shared/ only
    keys = [o["Key"] for o in bob.list_objects_v2(Bucket="pol-a", Prefix="shared/")["Contents"]]
    assert keys == ["shared/doc", "shared/secret"]
    denied(bob.list_objects_v2, Bucket="pol-a")
    denied(bob.list_objects_v2, Bucket="pol-a", Prefix="other")
    # anonymous requests match none of it but the Deny
    denied(anon(d).get_object, Bucket="pol-a", Key="shared/doc")
    # a Deny also beats a public ACL
    alice.put_object(Bucket="pol-a", Key="shared/secret", Body=b"secret", ACL="public-read")
    denied(anon(d).get_object, Bucket="pol-a", Key="shared/secret")
    denied(bob.get_object, Bucket="pol-a", Key="shared/secret")
    # the policy is the owner's to read and change; bob may not
    got = json.loads(alice.get_bucket_policy(Bucket="pol-a")["Policy"])
    assert [s["Sid"] for s in got["Statement"]] == ["bob-reads-shared", "bob-lists-shared",
                                                    "never-the-secret"]
    denied(bob.get_bucket_policy, Bucket="pol-a")
    denied(bob.put_bucket_policy, Bucket="pol-a", Policy="{}")
    denied(bob.delete_bucket_policy, Bucket="pol-a")
    alice.delete_bucket_policy(Bucket="pol-a")
    assert err(alice.get_bucket_policy, Bucket="pol-a") == ("NoSuchBucketPolicy", 404)
    denied(bob.get_object, Bucket="pol-a", Key="shared/doc")
    assert alice.get_object(Bucket="pol-a", Key="shared/secret")["Body"].read() == b"secret"


def test_owner_cannot_lock_herself_out(d, two):
    (_, alice), _ = two
    alice.create_bucket(Bucket="pol-lock")
    put_policy(alice, "pol-lock", {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                                   "Resource": ["arn:aws:s3:::pol-lock", "arn:aws:s3:::pol-lock/*"]})
    denied(alice.list_objects_v2, Bucket="pol-lock")
    denied(alice.put_object, Bucket="pol-lock", Key="k", Body=b"x")
    alice.get_bucket_policy(Bucket="pol-lock")  # the policy actions stay hers
    alice.delete_bucket_policy(Bucket="pol-lock")
    alice.put_object(Bucket="pol-lock", Key="k", Body=b"x")


def test_conditions_source_ip_tls_headers_tags(d, two):
    (_, alice), (_, bob) = two
    alice.create_bucket(Bucket="pol-cond")
    alice.put_object(Bucket="pol-cond", Key="f", Body=b"from .2 only")
    alice.put_object(Bucket="pol-cond", Key="tagged", Body=b"green", Tagging="color=green")
    alice.put_object(Bucket="pol-cond", Key="red", Body=b"red", Tagging="color=red")
    put_policy(alice, "pol-cond",
               {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::pol-cond/f",
                "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.2/32", "10.9.9.0/24"]},
                              "StringLikeIfExists": {"aws:Referer": "https://good.*"}}},
               {"Effect": "Allow", "Principal": {"AWS": "000000000001"},
                "Action": "s3:GetObject", "Resource": "arn:aws:s3:::pol-cond/*",
                "Condition": {"StringEquals": {"s3:ExistingObjectTag/color": "green"}}},
               {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::pol-cond/f",
                "Condition": {"StringLike": {"aws:Referer": "https://evil.*"}}})
    assert raw_get(d, "/pol-cond/f", source="127.0.0.2") == (200, b"from .2 only")
    assert raw_get(d, "/pol-cond/f", source="127.0.0.1")[0] == 403
    assert raw_get(d, "/pol-cond/f", source="127.0.0.3")[0] == 403
    # ...IfExists: the Allow holds without a Referer or with a good one; the Deny with an evil one
    assert raw_get(d, "/pol-cond/f", source="127.0.0.2",
                   headers={"Referer": "https://evil.example/"})[0] == 403
    assert raw_get(d, "/pol-cond/f", source="127.0.0.2",
                   headers={"Referer": "https://good.example/"})[0] == 200
    assert raw_get(d, "/pol-cond/f", source="127.0.0.2",
                   headers={"Referer": "https://other.example/"})[0] == 403
    # tags of the object decide for every user of the tenant (the account principal)
    assert bob.get_object(Bucket="pol-cond", Key="tagged")["Body"].read() == b"green"
    denied(bob.get_object, Bucket="pol-cond", Key="red")
    denied(anon(d).get_object, Bucket="pol-cond", Key="tagged")
    # TLS: a plain-HTTP request is not secure transport
    put_policy(alice, "pol-cond",
               {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                "Resource": "arn:aws:s3:::pol-cond/*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
    denied(alice.get_object, Bucket="pol-cond", Key="tagged")
    alice.delete_bucket_policy(Bucket="pol-cond")


def test_secure_transport_over_tls(daemon_factory, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    d = daemon_factory(extra_args=["--set", f"s3_tls_cert={cert}", "--set", f"s3_tls_key={key}",
                                   "--set", "data_file_size=1GiB"]).start()
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    ep = d.s3_endpoint.replace("http://", "https://")
    s3 = boto3.client("s3", endpoint_url=ep, aws_access_key_id=d.access_key,
                      aws_secret_access_key=d.secret_key, region_name="us-east-1",
                      verify=str(cert), config=Config(s3={"addressing_style": "path"}))
    nobody = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", verify=str(cert),
                          config=Config(signature_version=UNSIGNED,
                                        s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket="tls-pol")
    s3.put_object(Bucket="tls-pol", Key="k", Body=b"over tls")
    put_policy(s3, "tls-pol",
               {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::tls-pol/*",
                "Condition": {"Bool": {"aws:SecureTransport": "true"}}},
               {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                "Resource": "arn:aws:s3:::tls-pol/*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
    assert nobody.get_object(Bucket="tls-pol", Key="k")["Body"].read() == b"over tls"
    assert s3.get_bucket_policy_status(Bucket="tls-pol")["PolicyStatus"]["IsPublic"] is True


def test_malformed_and_foreign_principals(d, two):
    (_, alice), _ = two
    alice.create_bucket(Bucket="pol-bad")
    t = admin(d, "POST", "/tenants", {"name": "pol-other"})
    user(d, "zed", tenant=t["id"])
    tid = f"{t['id']:012d}"
    stmt = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::pol-bad/*"}
    bad = {
        "not json": "{nope",
        "invalid action": {"Statement": [dict(stmt, Action="s3:GetObjekt")]},
        "invalid resource": {"Statement": [dict(stmt, Resource="arn:aws:s3:::other-bucket/*")]},
        "condition key": {"Statement": [dict(stmt, Condition={"StringEquals": {"s3:foo": "x"}})]},
        "operator": {"Statement": [dict(stmt, Condition={"StringSorta": {"s3:prefix": "x"}})]},
        "effect": {"Statement": [dict(stmt, Effect="Maybe")]},
        "version": {"Version": "2020-01-01", "Statement": [stmt]},
        "unknown field": {"Statement": [dict(stmt, Bogus=1)]},
        "no statement": {"Version": "2012-10-17"},
    }
    for why, doc in bad.items():
        body = doc if isinstance(doc, str) else json.dumps(doc)
        code, st = err(alice.put_bucket_policy, Bucket="pol-bad", Policy=body)
        assert (code, st) == ("MalformedPolicy", 400), why
    # another tenant's user and account, or a name nobody has: one and the same answer
    msgs = set()
    for p in ({"AWS": f"arn:aws:iam::{tid}:user/zed"}, {"AWS": "arn:aws:iam::pol-other:user/zed"},
              {"AWS": "arn:aws:iam::000000000001:user/zed"}, {"AWS": tid},
              {"AWS": "arn:aws:iam::000000000001:user/no-such-user"},
              {"Service": "ec2.amazonaws.com"}, {"CanonicalUser": "ab" * 32}):
        with pytest.raises(ClientError) as e:
            put_policy(alice, "pol-bad", dict(stmt, Principal=p))
        r = e.value.response
        assert r["Error"]["Code"] == "MalformedPolicy", p
        msgs.add(r["Error"]["Message"])
    assert msgs == {"Invalid principal in policy"}
    assert err(alice.get_bucket_policy, Bucket="pol-bad")[1] == 404


def test_policy_status_and_public_block(d, two):
    (_, alice), (_, bob) = two
    alice.create_bucket(Bucket="pol-pub")
    alice.put_object(Bucket="pol-pub", Key="k", Body=b"k")
    put_policy(alice, "pol-pub", {"Effect": "Allow", "Principal": {"AWS": "000000000001"},
                                  "Action": "s3:GetObject", "Resource": "arn:aws:s3:::pol-pub/*"})
    assert alice.get_bucket_policy_status(Bucket="pol-pub")["PolicyStatus"]["IsPublic"] is False
    put_policy(alice, "pol-pub", {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                  "Resource": "arn:aws:s3:::pol-pub/*",
                                  "Condition": {"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}})
    assert alice.get_bucket_policy_status(Bucket="pol-pub")["PolicyStatus"]["IsPublic"] is False
    public = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
              "Resource": "arn:aws:s3:::pol-pub/*"}
    put_policy(alice, "pol-pub", public)
    assert alice.get_bucket_policy_status(Bucket="pol-pub")["PolicyStatus"]["IsPublic"] is True
    assert anon(d).get_object(Bucket="pol-pub", Key="k")["Body"].read() == b"k"
    # RestrictPublicBuckets: the public policy serves the tenant's users only
    alice.put_public_access_block(Bucket="pol-pub", PublicAccessBlockConfiguration={
        "RestrictPublicBuckets": True})
    denied(anon(d).get_object, Bucket="pol-pub", Key="k")
    assert bob.get_object(Bucket="pol-pub", Key="k")["Body"].read() == b"k"
    # BlockPublicPolicy: a public policy is refused, a confined one accepted
    alice.put_public_access_block(Bucket="pol-pub", PublicAccessBlockConfiguration={
        "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    cfg = alice.get_public_access_block(Bucket="pol-pub")["PublicAccessBlockConfiguration"]
    assert cfg == {"BlockPublicAcls": False, "IgnorePublicAcls": False,
                   "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    denied(alice.put_bucket_policy, Bucket="pol-pub",
           Policy=json.dumps({"Statement": [public]}))
    alice.delete_public_access_block(Bucket="pol-pub")
    assert err(alice.get_public_access_block,
               Bucket="pol-pub")[0] == "NoSuchPublicAccessBlockConfiguration"


def test_aws_cli_policy(d, two, tmp_path):
    (_, alice), _ = two
    alice.create_bucket(Bucket="pol-cli")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")
    pol = tmp_path / "p.json"
    pol.write_text(json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::pol-cli/pub/*"}]}))

    def aws(*args):
        return subprocess.run(["aws", "--endpoint-url", d.s3_endpoint, "s3api", *args], env=env,
                              capture_output=True, text=True, timeout=120)
    r = aws("put-bucket-policy", "--bucket", "pol-cli", "--policy", f"file://{pol}")
    assert r.returncode == 0, r.stderr
    r = aws("get-bucket-policy", "--bucket", "pol-cli")
    assert r.returncode == 0 and "pol-cli/pub/*" in r.stdout
    pol.write_text('{"Statement": [{"Effect": "Allow"}]}')
    r = aws("put-bucket-policy", "--bucket", "pol-cli", "--policy", f"file://{pol}")
    assert r.returncode != 0 and "MalformedPolicy" in r.stderr
