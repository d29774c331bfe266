# SPDX-License-Identifier: Apache-2.0
"""Versions and object lock across protocols (docs/cross-protocol.md, "Versions
and object lock"), with NFS statuses checked exactly (the raw client): what NFS
sees of a versioned bucket, when its changes make versions, handles of files
that became versions, usage of versions, and every NFS change of a locked
version refused with NFS3ERR_ACCES until its retention ends."""
import datetime
import time

import pytest

from crossutil import Admin, Nfs, NfsError, bucket_name, md5, rpc3

ACCES = 13
STALE = 70


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """Files settle 300 ms after their last change (the versions NFS makes)."""
    from s3nfsd_harness import Daemon
    dm = Daemon(str(tmp_path_factory.mktemp("xver")), ["--set", "settle_ms=300"]).start()
    yield dm
    dm.cleanup()


@pytest.fixture(scope="module")
def s3(d):
    return d.boto3()


@pytest.fixture
def nfs(d):
    c = Nfs(d.nfs_port)
    yield c
    c.close()


def versioned(s3, lock=False):
    b = bucket_name("v")
    if lock:
        s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    else:
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    return b


def vlist(s3, b, key):
    r = s3.list_object_versions(Bucket=b, Prefix=key)
    out = [(v["VersionId"], v["LastModified"], v["IsLatest"], False, v["ETag"].strip('"'),
            v["Size"]) for v in r.get("Versions", []) if v["Key"] == key]
    out += [(v["VersionId"], v["LastModified"], v["IsLatest"], True, None, None)
            for v in r.get("DeleteMarkers", []) if v["Key"] == key]
    return sorted(out, key=lambda v: v[1], reverse=True)


def test_nfs_changes_make_versions(s3, nfs):
    b = versioned(s3)
    s3.put_object(Bucket=b, Key="k", Body=b"s3 version")
    fh = nfs.fh(f"{b}/k")
    # an NFS write makes a new version first; the S3 one keeps its bytes and handle-less
    nfs.write_all(fh, 0, b"NFS", stable=0)
    nfs.commit_fh(fh)
    v = vlist(s3, b, "k")
    assert len(v) == 2 and v[0][2]
    assert s3.get_object(Bucket=b, Key="k", VersionId=v[1][0])["Body"].read() == b"s3 version"
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"NFSversion"
    # until it settles, more writes change the same (open) version
    nfs.write_all(fh, 3, b"!", stable=2)
    assert len(vlist(s3, b, "k")) == 2
    time.sleep(1.5)
    # settled: its ETag is its MD5, and the next change makes another version
    assert vlist(s3, b, "k")[0][4] == md5(b"NFS!ersion")
    nfs.write_all(fh, 0, b"x", stable=2)
    v = vlist(s3, b, "k")
    assert len(v) == 3
    assert s3.get_object(Bucket=b, Key="k", VersionId=v[1][0])["Body"].read() == b"NFS!ersion"
    # NFS sees current versions only
    assert [e[0] for e in nfs.listdir(b)] == [b"k"]


def test_handles_of_versions_go_stale(s3, nfs):
    b = versioned(s3)
    s3.put_object(Bucket=b, Key="k", Body=b"one")
    fh = nfs.fh(f"{b}/k")
    s3.put_object(Bucket=b, Key="k", Body=b"two")
    st, _ = nfs.getattr(fh)
    assert st == STALE, "a noncurrent version must not be reachable over NFS"
    st, _ = nfs.write(fh, 0, b"x", stable=2)
    assert st == STALE
    # REMOVE makes a delete marker: the name is gone, the versions stay
    nfs.unlink(f"{b}/k")
    assert not nfs.exists(f"{b}/k")
    v = vlist(s3, b, "k")
    assert [x[3] for x in v] == [True, False, False]
    # deleting the marker over S3 brings the file back for NFS
    s3.delete_object(Bucket=b, Key="k", VersionId=v[0][0])
    assert nfs.get(f"{b}/k") == b"two"


def test_usage_counts_versions(d, s3, nfs):
    b = versioned(s3)
    adm = Admin(d)
    s3.put_object(Bucket=b, Key="a", Body=b"x" * 100000)
    s3.put_object(Bucket=b, Key="a", Body=b"y" * 50000)
    st, u = adm.get(f"/tenants/1/buckets/{b}/usage")
    assert st == 200 and u["bytes"] == 150000, u
    s3.delete_object(Bucket=b, Key="a")
    assert adm.get(f"/tenants/1/buckets/{b}/usage")[1]["bytes"] == 150000
    for v in vlist(s3, b, "a"):
        s3.delete_object(Bucket=b, Key="a", VersionId=v[0])
    assert adm.get(f"/tenants/1/buckets/{b}/usage")[1]["bytes"] == 0


def test_locked_version_refuses_nfs_changes(s3, nfs):
    b = versioned(s3, lock=True)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=4)
    s3.put_object(Bucket=b, Key="l", Body=b"locked", ObjectLockMode="GOVERNANCE",
                  ObjectLockRetainUntilDate=until)
    s3.put_object(Bucket=b, Key="o", Body=b"other")
    fh = nfs.fh(f"{b}/l")
    dfh = nfs.fh(b)
    st, _ = nfs.write(fh, 0, b"X", stable=2)
    assert st == ACCES
    st, _ = nfs.write(fh, 0, b"X", stable=0)
    assert st == ACCES
    with pytest.raises(NfsError) as e:
        nfs.setattr_fh(fh, size=0)
    assert e.value.status == ACCES
    with pytest.raises(NfsError) as e:
        nfs.remove_fh(dfh, "l")
    assert e.value.status == ACCES
    with pytest.raises(NfsError) as e:
        nfs.rename_fh(dfh, "l", dfh, "m")
    assert e.value.status == ACCES
    with pytest.raises(NfsError) as e:
        nfs.rename_fh(dfh, "o", dfh, "l")
    assert e.value.status == ACCES
    # metadata-only changes are allowed; the bytes are intact
    nfs.setattr_fh(fh, mode=0o600)
    assert nfs.get(f"{b}/l") == b"locked"
    # a legal hold holds past the retention
    s3.put_object_legal_hold(Bucket=b, Key="l", LegalHold={"Status": "ON"})
    time.sleep(max(0.0, (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds())
               + 0.5)
    st, _ = nfs.write(fh, 0, b"X", stable=2)
    assert st == ACCES
    s3.put_object_legal_hold(Bucket=b, Key="l", LegalHold={"Status": "OFF"})
    # retention over, no hold: the change is allowed (and makes a new version)
    st, _ = nfs.write(fh, 0, b"X", stable=2)
    assert st == 0
    assert s3.get_object(Bucket=b, Key="l")["Body"].read() == b"Xocked"
    assert len(vlist(s3, b, "l")) == 2
    nfs.remove_fh(dfh, "l")
    assert vlist(s3, b, "l")[0][3]
