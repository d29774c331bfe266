# SPDX-License-Identifier: Apache-2.0
"""Owners, privacy and ACLs (docs/s3-compatibility.md, "Access control";
docs/cross-protocol.md, "Owners and ACLs"): two users of one tenant, a second
tenant, anonymous requests; canned ACLs and grants (headers and documents) on
buckets and objects at creation and through Put*Acl; what NFS sees of it
(mode bits, EACCES) over libnfs."""
import os
import shutil
import subprocess
import sys
import urllib.request

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, os.path.dirname(__file__))
from s3util import admin  # noqa: E402

ALL = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def user(d, name, tenant=1, **kw):
    """A user (no uid given: the server picks a free one) and a boto3 client for it."""
    u = admin(d, "POST", f"/tenants/{tenant}/users", dict(name=name, **kw))
    k = admin(d, "POST", f"/tenants/{tenant}/users/{u['id']}/keys")
    return u, d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])


@pytest.fixture(scope="module")
def two(d):
    """alice and bob: two users of the default tenant, with their own uids."""
    a = user(d, "alice")
    b = user(d, "bob")
    assert a[0]["uid"] != b[0]["uid"]
    return a, b


def anon(d):
    return boto3.client("s3", endpoint_url=d.s3_endpoint, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


def err(fn, **kw):
    with pytest.raises(ClientError) as e:
        fn(**kw)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def denied(fn, **kw):
    code, st = err(fn, **kw)
    assert st == 403, (fn.__name__, code, st)
    assert code in ("AccessDenied", "403"), (fn.__name__, code)


def grants(acl):
    out = set()
    for g in acl["Grants"]:
        ge = g["Grantee"]
        out.add((ge.get("ID") or ge.get("URI"), g["Permission"]))
    return out


def test_private_by_default_between_users(d, two):
    (ua, alice), (ub, bob) = two
    alice.create_bucket(Bucket="alice-private")
    alice.put_object(Bucket="alice-private", Key="doc.txt", Body=b"mine")
    alice.put_object(Bucket="alice-private", Key="dir/deep.txt", Body=b"deep")
    # bob sees nothing of it
    assert "alice-private" not in [b["Name"] for b in bob.list_buckets()["Buckets"]]
    assert "alice-private" in [b["Name"] for b in alice.list_buckets()["Buckets"]]
    denied(bob.head_bucket, Bucket="alice-private")
    denied(bob.list_objects_v2, Bucket="alice-private")
    denied(bob.list_objects, Bucket="alice-private")
    denied(bob.get_object, Bucket="alice-private", Key="doc.txt")
    denied(bob.head_object, Bucket="alice-private", Key="doc.txt")
    denied(bob.get_object, Bucket="alice-private", Key="dir/deep.txt")
    denied(bob.put_object, Bucket="alice-private", Key="bob.txt", Body=b"x")
    denied(bob.delete_object, Bucket="alice-private", Key="doc.txt")
    denied(bob.copy_object, Bucket="alice-private", Key="c",
           CopySource={"Bucket": "alice-private", "Key": "doc.txt"})
    denied(bob.get_bucket_acl, Bucket="alice-private")
    denied(bob.get_object_acl, Bucket="alice-private", Key="doc.txt")
    denied(bob.put_object_acl, Bucket="alice-private", Key="doc.txt", ACL="public-read")
    denied(bob.get_object_tagging, Bucket="alice-private", Key="doc.txt")
    denied(bob.delete_bucket, Bucket="alice-private")
    denied(bob.get_bucket_location, Bucket="alice-private")
    denied(bob.create_multipart_upload, Bucket="alice-private", Key="m")
    # a missing key: 403 to bob (he may not list), 404 to alice
    denied(bob.get_object, Bucket="alice-private", Key="nothing-here")
    assert err(alice.get_object, Bucket="alice-private", Key="nothing-here")[1] == 404
    # bob may not take the name either
    assert err(bob.create_bucket, Bucket="alice-private") == ("BucketAlreadyExists", 409)
    # the owner is alice, whoever asks (the admin of the tenant sees everything)
    admin_s3 = d.boto3()
    for c in (alice, admin_s3):
        acl = c.get_bucket_acl(Bucket="alice-private")
        assert acl["Owner"]["DisplayName"] == "alice"
        assert grants(acl) == {(acl["Owner"]["ID"], "FULL_CONTROL")}
        oacl = c.get_object_acl(Bucket="alice-private", Key="doc.txt")
        assert oacl["Owner"] == acl["Owner"]
    assert admin_s3.get_object(Bucket="alice-private", Key="doc.txt")["Body"].read() == b"mine"
    listed = alice.list_objects_v2(Bucket="alice-private", FetchOwner=True)["Contents"]
    assert {o["Owner"]["DisplayName"] for o in listed} == {"alice"}


def test_canned_acls(d, two):
    (ua, alice), (ub, bob) = two
    nobody = anon(d)
    alice.create_bucket(Bucket="alice-canned")
    bid = alice.get_bucket_acl(Bucket="alice-canned")["Owner"]["ID"]
    alice.put_object(Bucket="alice-canned", Key="pub", Body=b"public", ACL="public-read")
    alice.put_object(Bucket="alice-canned", Key="auth", Body=b"tenant", ACL="authenticated-read")
    alice.put_object(Bucket="alice-canned", Key="priv", Body=b"private", ACL="private")
    assert grants(alice.get_object_acl(Bucket="alice-canned", Key="pub")) == {
        (bid, "FULL_CONTROL"), (ALL, "READ")}
    assert grants(alice.get_object_acl(Bucket="alice-canned", Key="auth")) == {
        (bid, "FULL_CONTROL"), (AUTH, "READ")}
    # public-read: every user and anonymous requests; authenticated-read: users only
    assert bob.get_object(Bucket="alice-canned", Key="pub")["Body"].read() == b"public"
    assert nobody.get_object(Bucket="alice-canned", Key="pub")["Body"].read() == b"public"
    assert bob.get_object(Bucket="alice-canned", Key="auth")["Body"].read() == b"tenant"
    denied(nobody.get_object, Bucket="alice-canned", Key="auth")
    denied(bob.get_object, Bucket="alice-canned", Key="priv")
    denied(nobody.get_object, Bucket="alice-canned", Key="priv")
    # the bucket is private: nobody lists it
    denied(bob.list_objects_v2, Bucket="alice-canned")
    denied(nobody.list_objects_v2, Bucket="alice-canned")
    # a public-read bucket lists to everyone; anonymous still may not write
    alice.put_bucket_acl(Bucket="alice-canned", ACL="public-read")
    assert grants(alice.get_bucket_acl(Bucket="alice-canned")) == {
        (bid, "FULL_CONTROL"), (ALL, "READ")}
    keys = [o["Key"] for o in nobody.list_objects_v2(Bucket="alice-canned")["Contents"]]
    assert keys == ["auth", "priv", "pub"]
    assert len(bob.list_objects_v2(Bucket="alice-canned")["Contents"]) == 3
    denied(nobody.put_object, Bucket="alice-canned", Key="w", Body=b"x")
    denied(bob.put_object, Bucket="alice-canned", Key="w", Body=b"x")
    # public-read-write: anonymous writes land, owned by the bucket's owner
    alice.put_bucket_acl(Bucket="alice-canned", ACL="public-read-write")
    nobody.put_object(Bucket="alice-canned", Key="dropped", Body=b"anon")
    assert alice.get_object_acl(Bucket="alice-canned", Key="dropped")["Owner"]["ID"] == bid
    bob.put_object(Bucket="alice-canned", Key="bobs", Body=b"bob")
    assert bob.get_object_acl(Bucket="alice-canned", Key="bobs")["Owner"]["DisplayName"] == "bob"
    denied(alice.get_object, Bucket="alice-canned", Key="bobs")  # bob's private object
    denied(alice.get_object_acl, Bucket="alice-canned", Key="bobs")
    alice.delete_object(Bucket="alice-canned", Key="bobs")  # but her bucket: she may delete
    nobody.delete_object(Bucket="alice-canned", Key="dropped")
    # back to private: it all closes again
    alice.put_bucket_acl(Bucket="alice-canned", ACL="private")
    denied(nobody.list_objects_v2, Bucket="alice-canned")
    denied(bob.list_objects_v2, Bucket="alice-canned")
    alice.put_object_acl(Bucket="alice-canned", Key="pub", ACL="private")
    denied(nobody.get_object, Bucket="alice-canned", Key="pub")
    # bucket-owner-full-control from the writer of another's bucket
    alice.put_bucket_acl(Bucket="alice-canned", ACL="public-read-write")
    bob.put_object(Bucket="alice-canned", Key="for-alice", Body=b"yours",
                   ACL="bucket-owner-full-control")
    assert alice.get_object(Bucket="alice-canned", Key="for-alice")["Body"].read() == b"yours"
    # an unknown canned ACL
    assert err(alice.put_object_acl, Bucket="alice-canned", Key="pub",
               ACL="everyone-please")[1] == 400


def test_grants_by_id_email_and_document(d, two):
    (ua, alice), (ub, bob) = two
    alice.create_bucket(Bucket="alice-grants")
    bob_id = bob.get_bucket_acl(Bucket=bob.create_bucket(Bucket="bob-own") and "bob-own")[
        "Owner"]["ID"]
    alice_id = alice.get_bucket_acl(Bucket="alice-grants")["Owner"]["ID"]
    alice.put_object(Bucket="alice-grants", Key="by-id", Body=b"1", GrantRead=f'id="{bob_id}"')
    alice.put_object(Bucket="alice-grants", Key="by-email", Body=b"2",
                     GrantRead='emailAddress="bob"')
    alice.put_object(Bucket="alice-grants", Key="none", Body=b"3")
    assert bob.get_object(Bucket="alice-grants", Key="by-id")["Body"].read() == b"1"
    assert bob.get_object(Bucket="alice-grants", Key="by-email")["Body"].read() == b"2"
    denied(bob.get_object, Bucket="alice-grants", Key="none")
    denied(anon(d).get_object, Bucket="alice-grants", Key="by-id")
    assert grants(alice.get_object_acl(Bucket="alice-grants", Key="by-id")) == {
        (alice_id, "FULL_CONTROL"), (bob_id, "READ")}
    # a grant of READ_ACP lets bob read the ACL, not the object
    alice.put_object_acl(Bucket="alice-grants", Key="none", GrantReadACP=f'id="{bob_id}"')
    bob.get_object_acl(Bucket="alice-grants", Key="none")
    denied(bob.get_object, Bucket="alice-grants", Key="none")
    denied(bob.put_object_acl, Bucket="alice-grants", Key="none", ACL="public-read")
    # an AccessControlPolicy document: bob gets FULL_CONTROL (so WRITE_ACP too)
    owner = {"ID": alice_id}
    alice.put_object_acl(Bucket="alice-grants", Key="none", AccessControlPolicy={
        "Owner": owner, "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": alice_id}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "CanonicalUser", "ID": bob_id}, "Permission": "FULL_CONTROL"}]})
    assert bob.get_object(Bucket="alice-grants", Key="none")["Body"].read() == b"3"
    bob.put_object_acl(Bucket="alice-grants", Key="none", ACL="private")
    denied(bob.get_object, Bucket="alice-grants", Key="none")
    # a bucket WRITE grant: bob writes into alice's private bucket; the object is bob's
    alice.put_bucket_acl(Bucket="alice-grants", GrantWrite=f'id="{bob_id}"',
                         GrantFullControl=f'id="{alice_id}"')
    bob.put_object(Bucket="alice-grants", Key="deep/from/bob", Body=b"b")
    assert bob.get_object_acl(Bucket="alice-grants", Key="deep/from/bob")["Owner"]["ID"] == bob_id
    denied(bob.list_objects_v2, Bucket="alice-grants")
    bob.delete_object(Bucket="alice-grants", Key="deep/from/bob")
    # grantees that do not resolve: the same answers for the unknown and another tenant's
    t = admin(d, "POST", "/tenants", {"name": "acl-other"})
    ou, other = user(d, "carol", tenant=t["id"])
    other.create_bucket(Bucket="carols")
    carol_id = other.get_bucket_acl(Bucket="carols")["Owner"]["ID"]
    for bad in (f'id="{carol_id}"', 'id="' + "0" * 64 + '"'):
        assert err(alice.put_object_acl, Bucket="alice-grants", Key="by-id",
                   GrantRead=bad) == ("InvalidArgument", 400)
    for bad in ('emailAddress="carol"', 'emailAddress="nobody-at-all"',
                'emailAddress="carol@acl-other"'):
        assert err(alice.put_object_acl, Bucket="alice-grants", Key="by-id",
                   GrantRead=bad) == ("UnresolvableGrantByEmailAddress", 400)
    # carol (another tenant) never reaches alice's bucket, public or not
    alice.put_bucket_acl(Bucket="alice-grants", ACL="public-read")
    assert err(other.list_objects_v2, Bucket="alice-grants")[0] == "NoSuchBucket"
    # canned ACL and grant headers together are refused
    assert err(alice.put_object_acl, Bucket="alice-grants", Key="by-id", ACL="private",
               GrantRead=f'id="{bob_id}"') == ("InvalidRequest", 400)


def test_anonymous_tenant_qualified_names(d, two):
    """An unsigned request reaches another tenant's public bucket as TENANT:BUCKET (raw
    HTTP: SDKs refuse ':' in bucket names), and nothing else, not even which
    buckets exist."""
    t = admin(d, "POST", "/tenants", {"name": "pubten"})
    _, dave = user(d, "dave", tenant=t["id"])
    dave.create_bucket(Bucket="open-data", ACL="public-read")
    dave.put_object(Bucket="open-data", Key="f", Body=b"open", ACL="public-read")
    dave.put_object(Bucket="open-data", Key="g", Body=b"closed")
    base = d.s3_endpoint
    with urllib.request.urlopen(f"{base}/pubten:open-data/f") as r:
        assert r.read() == b"open"
    with urllib.request.urlopen(f"{base}/pubten:open-data?list-type=2") as r:
        assert b"<Key>g</Key>" in r.read()
    dave.create_bucket(Bucket="hidden")
    # Nothing tells an unsigned request which buckets exist: a missing bucket (or
    # tenant) answers as one it may not use does, so names cannot be guessed.
    for url in (f"{base}/pubten:open-data/g", f"{base}/open-data/f",
                f"{base}/no-such-tenant:open-data/f", f"{base}/", f"{base}/pubten:hidden/k",
                f"{base}/pubten:hidden", f"{base}/pubten:nothing/k", f"{base}/pubten:nothing"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url)
        assert e.value.code == 403, url
        assert b"<Code>AccessDenied</Code>" in e.value.read(), url
    # a signed request names only its own tenant
    (_, alice), _ = two
    assert err(alice.list_objects_v2, Bucket="open-data")[0] == "NoSuchBucket"


def nfs_url(d, path, uid, gid):
    p = d.nfs_port
    return f"nfs://127.0.0.1/{path}?version=3&nfsport={p}&mountport={p}&uid={uid}&gid={gid}"


def nfs_cat(d, path, uid, gid):
    return subprocess.run(["nfs-cat", nfs_url(d, path, uid, gid)], capture_output=True,
                          timeout=30)


def nfs_modes(d, path, uid, gid):
    """name -> (mode string, uid) of a directory over NFS, as libnfs lists it."""
    r = subprocess.run(["nfs-ls", nfs_url(d, path, uid, gid)], capture_output=True, text=True,
                       timeout=30)
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 5 and f[2].isdigit():
            out[f[-1]] = (f[0], int(f[2]))
    return r.returncode, out


@pytest.mark.skipif(not shutil.which("nfs-cat"), reason="libnfs-utils not installed")
def test_nfs_sees_owner_and_acl(d, two):
    """What user B sees over NFS of user A's buckets and objects: the mode bits the ACLs set,
    EACCES where S3 refuses, a public-read object in a public-read bucket readable."""
    (ua, alice), (ub, bob) = two
    a, b = (ua["uid"], ua["gid"]), (ub["uid"], ub["gid"])
    alice.create_bucket(Bucket="nfs-private")
    alice.put_object(Bucket="nfs-private", Key="secret", Body=b"s3cr3t")
    alice.create_bucket(Bucket="nfs-public", ACL="public-read")
    alice.put_object(Bucket="nfs-public", Key="open", Body=b"everyone", ACL="public-read")
    alice.put_object(Bucket="nfs-public", Key="closed", Body=b"alice only")
    rc, root = nfs_modes(d, "", *a)
    assert rc == 0
    assert root["nfs-private"] == ("drwx------", a[0])
    assert root["nfs-public"] == ("drwxr-xr-x", a[0])
    rc, pub = nfs_modes(d, "nfs-public", *b)
    assert rc == 0
    assert pub["open"] == ("-rw-r--r--", a[0]) and pub["closed"] == ("-rw-------", a[0])
    # bob: the private bucket does not open, its object does not read
    rc, _ = nfs_modes(d, "nfs-private", *b)
    assert rc != 0
    r = nfs_cat(d, "nfs-private/secret", *b)
    assert r.returncode != 0 and r.stdout == b""
    assert nfs_cat(d, "nfs-private/secret", *a).stdout == b"s3cr3t"
    assert nfs_cat(d, "nfs-public/open", *b).stdout == b"everyone"
    r = nfs_cat(d, "nfs-public/closed", *b)
    assert r.returncode != 0 and r.stdout == b""
    # an ACL change over S3 is a chmod over NFS, and the reverse
    alice.put_object_acl(Bucket="nfs-public", Key="closed", ACL="authenticated-read")
    assert nfs_cat(d, "nfs-public/closed", *b).stdout == b"alice only"
    alice.put_object_acl(Bucket="nfs-public", Key="open", ACL="private")
    assert nfs_modes(d, "nfs-public", *b)[1]["open"][0] == "-rw-------"
    assert nfs_cat(d, "nfs-public/open", *b).returncode != 0
    denied(bob.get_object, Bucket="nfs-public", Key="open")


def test_public_access_block_on_acls(d, two):
    (_, alice), (_, bob) = two
    nobody = anon(d)
    alice.create_bucket(Bucket="pab-acl")
    alice.put_object(Bucket="pab-acl", Key="pub", Body=b"p", ACL="public-read")
    assert nobody.get_object(Bucket="pab-acl", Key="pub")["Body"].read() == b"p"
    # IgnorePublicAcls: public grants (and the others' bits) stop counting for S3
    alice.put_public_access_block(Bucket="pab-acl", PublicAccessBlockConfiguration={
        "IgnorePublicAcls": True})
    denied(nobody.get_object, Bucket="pab-acl", Key="pub")
    denied(bob.get_object, Bucket="pab-acl", Key="pub")
    assert alice.get_object(Bucket="pab-acl", Key="pub")["Body"].read() == b"p"
    # BlockPublicAcls: public ACLs are refused on writes and ACL changes; private ones pass
    alice.put_public_access_block(Bucket="pab-acl", PublicAccessBlockConfiguration={
        "BlockPublicAcls": True})
    denied(alice.put_object, Bucket="pab-acl", Key="p2", Body=b"x", ACL="public-read")
    denied(alice.put_object_acl, Bucket="pab-acl", Key="pub", ACL="authenticated-read")
    denied(alice.put_bucket_acl, Bucket="pab-acl", ACL="public-read")
    alice.put_object(Bucket="pab-acl", Key="p3", Body=b"x", ACL="private")
    assert nobody.get_object(Bucket="pab-acl", Key="pub")["Body"].read() == b"p"  # kept
    alice.delete_public_access_block(Bucket="pab-acl")


def test_object_ownership_controls(d, two):
    (_, alice), (_, bob) = two
    bob_id = bob.get_bucket_acl(Bucket="bob-own")["Owner"]["ID"]
    # BucketOwnerEnforced at creation: no ACLs with it, and the bucket's owner owns all
    assert err(alice.create_bucket, Bucket="own-enf", ACL="public-read",
               ObjectOwnership="BucketOwnerEnforced") == (
        "InvalidBucketAclWithObjectOwnership", 400)
    alice.create_bucket(Bucket="own-enf", ObjectOwnership="BucketOwnerEnforced")
    oc = alice.get_bucket_ownership_controls(Bucket="own-enf")["OwnershipControls"]
    assert oc["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    aid = alice.get_bucket_acl(Bucket="own-enf")["Owner"]["ID"]
    assert err(alice.put_bucket_acl, Bucket="own-enf", ACL="public-read") == (
        "AccessControlListNotSupported", 400)
    # a policy lets bob write; what he writes is alice's, with or without the one accepted ACL
    alice.put_bucket_policy(Bucket="own-enf", Policy=(
        '{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::default:user/bob"},'
        '"Action":"s3:PutObject","Resource":"arn:aws:s3:::own-enf/*"}]}'))
    bob.put_object(Bucket="own-enf", Key="from-bob", Body=b"b")
    bob.put_object(Bucket="own-enf", Key="from-bob2", Body=b"b", ACL="bucket-owner-full-control")
    assert err(bob.put_object, Bucket="own-enf", Key="x", Body=b"b",
               ACL="public-read") == ("AccessControlListNotSupported", 400)
    assert alice.get_object_acl(Bucket="own-enf", Key="from-bob")["Owner"]["ID"] == aid
    assert alice.get_object(Bucket="own-enf", Key="from-bob2")["Body"].read() == b"b"
    denied(bob.get_object, Bucket="own-enf", Key="from-bob")
    # BucketOwnerPreferred: bucket-owner-full-control hands the object to the bucket's owner
    alice.put_bucket_ownership_controls(Bucket="alice-canned", OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]})
    alice.put_bucket_acl(Bucket="alice-canned", ACL="public-read-write")
    bob.put_object(Bucket="alice-canned", Key="pref", Body=b"p", ACL="bucket-owner-full-control")
    bob.put_object(Bucket="alice-canned", Key="pref-bob", Body=b"p")
    assert alice.get_object_acl(Bucket="alice-canned", Key="pref")["Owner"]["DisplayName"] == "alice"
    assert bob.get_object_acl(Bucket="alice-canned",
                              Key="pref-bob")["Owner"]["DisplayName"] == "bob"
    # Enforced on a bucket whose ACL grants others: refused until it is private
    assert err(alice.put_bucket_ownership_controls, Bucket="alice-canned", OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})[0] == (
        "InvalidBucketAclWithObjectOwnership")
    alice.delete_bucket_ownership_controls(Bucket="alice-canned")
    assert err(alice.get_bucket_ownership_controls,
               Bucket="alice-canned")[0] == "OwnershipControlsNotFoundError"
    # object lock at CreateBucket in any capitalisation makes a bucket with object lock
    # (test_s3_objlock.py tests it further); another value is refused
    from s3util import connect, read_response, signed_request
    for i, v in enumerate(("true", "True", "TRUE")):
        req = signed_request(d, "PUT", f"/lock-bucket{i}",
                             headers={"x-amz-bucket-object-lock-enabled": v})[0]
        s = connect(d)
        s.sendall(req)
        st, _, body = read_response(s)
        s.close()
        assert st == 200, (v, body)
        assert d.boto3().get_object_lock_configuration(Bucket=f"lock-bucket{i}")[
            "ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"
    req = signed_request(d, "PUT", "/lock-bucket-x",
                         headers={"x-amz-bucket-object-lock-enabled": "yes"})[0]
    s = connect(d)
    s.sendall(req)
    st, _, body = read_response(s)
    s.close()
    assert st == 400 and b"InvalidArgument" in body
    assert err(alice.head_bucket, Bucket="lock-bucket-x")[1] == 404


@pytest.mark.skipif(not shutil.which("aws"), reason="aws cli not installed")
def test_aws_cli_acl_cors_and_settings(d, tmp_path):
    """The same settings through the aws cli (s3api), as an operator would."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")

    def aws(*args, ok=True):
        r = subprocess.run(["aws", "--endpoint-url", d.s3_endpoint, "s3api", *args], env=env,
                           capture_output=True, text=True, timeout=120)
        assert (r.returncode == 0) == ok, r.stderr
        return r
    aws("create-bucket", "--bucket", "cli-acl", "--acl", "public-read")
    f = tmp_path / "o"
    f.write_bytes(b"cli object")
    aws("put-object", "--bucket", "cli-acl", "--key", "o", "--body", str(f), "--acl",
        "public-read")
    assert "AllUsers" in aws("get-object-acl", "--bucket", "cli-acl", "--key", "o").stdout
    with urllib.request.urlopen(f"{d.s3_endpoint}/cli-acl/o") as r:
        assert r.read() == b"cli object"
    aws("put-object-acl", "--bucket", "cli-acl", "--key", "o", "--acl", "private")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{d.s3_endpoint}/cli-acl/o")
    assert e.value.code == 403
    cors = tmp_path / "cors.json"
    cors.write_text('{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}')
    aws("put-bucket-cors", "--bucket", "cli-acl", "--cors-configuration", f"file://{cors}")
    assert '"AllowedMethods"' in aws("get-bucket-cors", "--bucket", "cli-acl").stdout
    aws("put-public-access-block", "--bucket", "cli-acl", "--public-access-block-configuration",
        "BlockPublicAcls=true,IgnorePublicAcls=false,BlockPublicPolicy=false,"
        "RestrictPublicBuckets=false")
    r = aws("put-object-acl", "--bucket", "cli-acl", "--key", "o", "--acl", "public-read", ok=False)
    assert "AccessDenied" in r.stderr
    aws("put-bucket-ownership-controls", "--bucket", "cli-acl", "--ownership-controls",
        "Rules=[{ObjectOwnership=BucketOwnerPreferred}]")
    assert "BucketOwnerPreferred" in aws("get-bucket-ownership-controls", "--bucket",
                                         "cli-acl").stdout
