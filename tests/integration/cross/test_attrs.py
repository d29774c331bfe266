# SPDX-License-Identifier: Apache-2.0
"""Attributes across protocols: size, mtime and Last-Modified, ETag after NFS
writes, S3 metadata kept through NFS changes, owner and mode of S3-created
objects, one permission check for both protocols (docs/cross-protocol.md,
"Attributes")."""
import calendar
import datetime
import hashlib
import time

import botocore.exceptions
import pytest

from crossutil import NF_DIR, Nfs, NfsError, md5, pattern, rpc3, s3_error, s3_list_all


def head(s3, b, k):
    return s3.head_object(Bucket=b, Key=k)


def listed(s3, b, k):
    return s3_list_all(s3, b, prefix=k)[2][k]


def epoch(dt):
    return calendar.timegm(dt.utctimetuple())


def test_size_both_ways(s3, nfs, bucket):
    for n in (0, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 7):
        s3.put_object(Bucket=bucket, Key=f"s3-{n}", Body=pattern(n, n))
        assert nfs.stat(f"{bucket}/s3-{n}")["size"] == n
        nfs.put(f"{bucket}/nfs-{n}", pattern(n, n + 1))
        assert head(s3, bucket, f"nfs-{n}")["ContentLength"] == n
        assert listed(s3, bucket, f"nfs-{n}")["Size"] == n
    # truncate and extend over NFS (sparse tail reads as zeros)
    fh = nfs.fh(f"{bucket}/s3-4097")
    nfs.setattr_fh(fh, size=10)
    assert head(s3, bucket, "s3-4097")["ContentLength"] == 10
    nfs.setattr_fh(fh, size=5000)
    body = s3.get_object(Bucket=bucket, Key="s3-4097")["Body"].read()
    assert body == pattern(4097, 4097)[:10] + b"\0" * 4990


def test_mtime_is_last_modified(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="m", Body=b"1")
    a = nfs.stat(f"{bucket}/m")
    h = head(s3, bucket, "m")
    assert epoch(h["LastModified"]) == a["mtime"][0], "HTTP date: whole seconds of mtime"
    lm = listed(s3, bucket, "m")["LastModified"]
    assert abs(lm.timestamp() - (a["mtime"][0] + a["mtime"][1] / 1e9)) < 0.001
    # NFS sets an old mtime (as cp -p / rsync -t do): S3 shows it
    fh = nfs.fh(f"{bucket}/m")
    nfs.setattr_fh(fh, mtime=(1000000000, 500000000))
    assert epoch(head(s3, bucket, "m")["LastModified"]) == 1000000000
    assert listed(s3, bucket, "m")["LastModified"] == \
        datetime.datetime(2001, 9, 9, 1, 46, 40, 500000, tzinfo=datetime.timezone.utc)
    # conditional GETs use it
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="m",
                      IfModifiedSince=datetime.datetime(2001, 9, 10,
                                                        tzinfo=datetime.timezone.utc))
    assert s3_error(ei)[1] == 304
    # an NFS write moves it to now
    nfs.write_all(fh, 0, b"2")
    assert nfs.stat(f"{bucket}/m")["mtime"][0] > 1000000000
    assert epoch(head(s3, bucket, "m")["LastModified"]) == nfs.stat(f"{bucket}/m")["mtime"][0]


def test_etag_after_nfs_writes(s3, nfs, bucket):
    data = pattern(3 << 20, 1)
    nfs.put(f"{bucket}/seq", data, stable=0)  # unstable writes, then COMMIT
    assert head(s3, bucket, "seq")["ETag"] == f'"{md5(data)}"'
    assert listed(s3, bucket, "seq")["ETag"] == f'"{md5(data)}"'
    # out-of-order NFS writes: the ETag is still the MD5 of the content
    fh = nfs.fh(f"{bucket}/seq")
    patch = b"P" * 5000
    nfs.write_all(fh, 1 << 20, patch)
    nfs.write_all(fh, 10, patch)
    new = bytearray(data)
    new[1 << 20:(1 << 20) + 5000] = patch
    new[10:5010] = patch
    got = s3.get_object(Bucket=bucket, Key="seq")
    assert got["Body"].read() == bytes(new)
    assert got["ETag"] == f'"{md5(bytes(new))}"'
    # an ETag from before the NFS write no longer matches
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="seq", IfMatch=f'"{md5(data)}"')
    assert s3_error(ei)[1] == 412
    assert s3.get_object(Bucket=bucket, Key="seq", IfMatch=f'"{md5(bytes(new))}"')[
        "ContentLength"] == len(new)
    # S3-written then NFS-modified
    s3.put_object(Bucket=bucket, Key="s3w", Body=b"abcdef")
    nfs.write_all(nfs.fh(f"{bucket}/s3w"), 3, b"XYZ")
    assert head(s3, bucket, "s3w")["ETag"] == f'"{md5(b"abcXYZ")}"'
    # empty file
    nfs.put(f"{bucket}/empty", b"")
    assert head(s3, bucket, "empty")["ETag"] == f'"{md5(b"")}"'


def test_list_etag_of_nfs_file_before_any_head(s3, nfs, bucket):
    """ListObjects right after a sequential NFS write, before any HEAD/GET of the
    key, should show the MD5 of the content (design rule), as HEAD does."""
    data = pattern(100000, 7)
    nfs.put(f"{bucket}/fresh", data)
    e = listed(s3, bucket, "fresh")["ETag"].strip('"')
    assert e == md5(data), f"ListObjects ETag {e} is not the MD5 of the content"


def wait_listed_etag(s3, bucket, key, want, timeout=60):
    """Poll ListObjects until key's ETag is want; returns the seconds it took."""
    t0 = time.monotonic()
    while True:
        e = listed(s3, bucket, key)["ETag"].strip('"')
        if e == want:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"ETag of {key} still {e}, not {want}"
        time.sleep(0.2)


def test_listed_etag_settles_for_every_file(s3, nfs, bucket):
    """Files whose MD5 is not known when their data is committed get it from the
    background worker once settled (settle_ms, 2 s by default): past the 16 MiB
    hashed while written, written out of order, and past the 256 MiB that a
    HEAD hashes on demand (a sparse file: its holes read as zeros). Before,
    listings show the multipart-form placeholder."""
    # sequential but past 16 MiB: no running MD5 for the whole
    data = pattern(17 << 20, 3)
    nfs.put(f"{bucket}/big", data, stable=0)
    first = listed(s3, bucket, "big")["ETag"].strip('"')
    assert first == md5(data) or first.endswith("-1")
    # out of order
    fh = nfs.put(f"{bucket}/ooo", b"")
    nfs.write_all(fh, 100000, b"B" * 1000, stable=0)
    nfs.write_all(fh, 0, b"A" * 1000, stable=0)
    nfs.commit_fh(fh)
    ooo = bytearray(101000)
    ooo[0:1000] = b"A" * 1000
    ooo[100000:101000] = b"B" * 1000
    # 300 MiB, sparse
    size = 300 << 20
    fh = nfs.put(f"{bucket}/sparse", b"")
    nfs.write_all(fh, size - 5, b"tail!", stable=0)
    nfs.write_all(fh, 0, b"head!", stable=0)
    nfs.commit_fh(fh)
    h = hashlib.md5(b"head!")
    zeros = bytes(1 << 20)
    left = size - 10
    while left:
        n = min(left, len(zeros))
        h.update(zeros[:n])
        left -= n
    h.update(b"tail!")
    wait_listed_etag(s3, bucket, "big", md5(data))
    wait_listed_etag(s3, bucket, "ooo", md5(bytes(ooo)))
    wait_listed_etag(s3, bucket, "sparse", h.hexdigest())
    assert head(s3, bucket, "sparse")["ETag"] == f'"{h.hexdigest()}"'


def test_s3_metadata_survives_nfs_changes(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="meta/obj", Body=b"0123456789",
                  ContentType="application/x-cross-test", Metadata={"color": "blue", "n": "1"},
                  ContentDisposition="attachment", CacheControl="no-cache")
    fh = nfs.fh(f"{bucket}/meta/obj")
    nfs.write_all(fh, 5, b"ABCDEFGH")           # overwrite + extend
    nfs.setattr_fh(fh, mode=0o640)              # chmod
    nfs.setattr_fh(fh, size=12)                 # truncate
    nfs.rename(f"{bucket}/meta/obj", f"{bucket}/meta/moved")  # rename keeps the object
    h = head(s3, bucket, "meta/moved")
    assert h["ContentType"] == "application/x-cross-test"
    assert h["Metadata"] == {"color": "blue", "n": "1"}
    assert h["ContentDisposition"] == "attachment" and h["CacheControl"] == "no-cache"
    assert h["ContentLength"] == 12 and h["ETag"] == f'"{md5(b"01234ABCDEFG")}"'
    # a file made by NFS has no stored type: the S3 default
    nfs.put(f"{bucket}/meta/plain", b"x")
    assert head(s3, bucket, "meta/plain")["ContentType"] in ("binary/octet-stream",
                                                              "application/octet-stream")
    assert head(s3, bucket, "meta/plain")["Metadata"] == {}
    # rename over an object: the target key now has the source's (absent) metadata
    nfs.rename(f"{bucket}/meta/plain", f"{bucket}/meta/moved")
    assert head(s3, bucket, "meta/moved")["Metadata"] == {}


def test_owner_and_mode_of_s3_objects(s3, nfs, d, admin, bucket):
    st, u = admin.post("/tenants/1/users", {"name": "alice", "uid": 2001, "gid": 3001})
    assert st == 201, u
    st, k = admin.post(f"/tenants/1/users/{u['id']}/keys", {})
    assert st == 201, k
    alice = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    nfs.setattr_fh(nfs.fh(bucket), mode=0o777)  # let alice write in the bucket
    alice.put_object(Bucket=bucket, Key="al/ice/obj", Body=b"a")
    alice.put_object(Bucket=bucket, Key="mark/", Body=b"")
    f = nfs.stat(f"{bucket}/al/ice/obj")
    assert (f["uid"], f["gid"], f["mode"] & 0o7777) == (2001, 3001, 0o600)  # private
    alice.put_object(Bucket=bucket, Key="al/ice/pub", Body=b"a", ACL="public-read")
    assert nfs.stat(f"{bucket}/al/ice/pub")["mode"] & 0o7777 == 0o644
    for dpath in ("al", "al/ice", "mark"):
        a = nfs.stat(f"{bucket}/{dpath}")
        assert (a["type"], a["uid"], a["gid"], a["mode"] & 0o7777) == (NF_DIR, 2001, 3001, 0o755)
    # the bootstrap admin (uid 0) makes root-owned objects
    s3.put_object(Bucket=bucket, Key="root-obj", Body=b"r")
    assert (nfs.stat(f"{bucket}/root-obj")["uid"], nfs.stat(f"{bucket}/root-obj")["gid"]) == (0, 0)
    # setgid directory: objects inherit its group, as files made over NFS do
    nfs.mkdirs(f"{bucket}/sgid")
    sg = nfs.fh(f"{bucket}/sgid")
    nfs.setattr_fh(sg, mode=0o2777, gid=4242)
    alice.put_object(Bucket=bucket, Key="sgid/x", Body=b"x")
    assert nfs.stat(f"{bucket}/sgid/x")["gid"] == 4242


@pytest.fixture
def users(d, admin):
    """Two S3 users (uid 5001, 5002) and NFS connections with the same identities."""
    out = {}
    for name, uid in (("bob", 5001), ("carol", 5002)):
        st, u = admin.post("/tenants/1/users", {"name": f"{name}{uid}", "uid": uid, "gid": uid})
        assert st == 201, u
        st, k = admin.post(f"/tenants/1/users/{u['id']}/keys", {})
        assert st == 201, k
        out[name] = (d.boto3(access_key=k["access_key"], secret_key=k["secret_key"]),
                     Nfs(d.nfs_port, uid=uid, gid=uid))
    yield out
    for _, n in out.values():
        n.close()


def denied_s3(fn, **kw):
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        fn(**kw)
    code, status = s3_error(ei)
    assert status == 403, fn.__name__
    assert code == ("403" if fn.__name__ == "head_object" else "AccessDenied")  # HEAD: no body


def denied_nfs(st):
    assert st == rpc3.NFS3ERR_ACCES, st


def test_one_permission_check(s3, nfs, bucket, users):
    bob_s3, bob_nfs = users["bob"]
    carol_s3, carol_nfs = users["carol"]
    nfs.setattr_fh(nfs.fh(bucket), mode=0o777)
    # bob's private file, made over NFS: carol can neither read it over S3 nor NFS
    bob_nfs.mkdirs(f"{bucket}/bob")
    bob_nfs.put(f"{bucket}/bob/secret", b"s", mode=0o600)
    denied_s3(carol_s3.get_object, Bucket=bucket, Key="bob/secret")
    denied_s3(carol_s3.head_object, Bucket=bucket, Key="bob/secret")
    denied_nfs(carol_nfs.read(carol_nfs.fh(f"{bucket}/bob/secret"), 0, 10)[0])
    assert bob_s3.get_object(Bucket=bucket, Key="bob/secret")["Body"].read() == b"s"
    # chmod over NFS opens it to both protocols at once
    bob_nfs.setattr_fh(bob_nfs.fh(f"{bucket}/bob/secret"), mode=0o644)
    assert carol_s3.get_object(Bucket=bucket, Key="bob/secret")["Body"].read() == b"s"
    assert carol_nfs.get(f"{bucket}/bob/secret") == b"s"
    # bob's directory is 0755: carol cannot create, replace or delete in it, by either protocol
    denied_s3(carol_s3.put_object, Bucket=bucket, Key="bob/new", Body=b"c")
    denied_nfs(carol_nfs.create(carol_nfs.fh(f"{bucket}/bob"), "new")[0])
    denied_s3(carol_s3.put_object, Bucket=bucket, Key="bob/secret", Body=b"c")
    denied_s3(carol_s3.delete_object, Bucket=bucket, Key="bob/secret")
    with pytest.raises(NfsError) as ei:
        carol_nfs.unlink(f"{bucket}/bob/secret")
    denied_nfs(ei.value.status)
    # an object bob writes over S3 is bob's: carol may not modify it over NFS
    bob_s3.put_object(Bucket=bucket, Key="bob/fromS3", Body=b"b")
    st, _ = carol_nfs.write(carol_nfs.fh(f"{bucket}/bob/fromS3"), 0, b"X")
    denied_nfs(st)
    # opening the directory over NFS lets carol in over S3 too
    bob_nfs.setattr_fh(bob_nfs.fh(f"{bucket}/bob"), mode=0o777)
    carol_s3.put_object(Bucket=bucket, Key="bob/new", Body=b"c")
    assert carol_nfs.stat(f"{bucket}/bob/new")["uid"] == 5002
    # sticky directory: only owners delete, over both protocols
    bob_nfs.setattr_fh(bob_nfs.fh(f"{bucket}/bob"), mode=0o1777)
    denied_s3(carol_s3.delete_object, Bucket=bucket, Key="bob/fromS3")
    with pytest.raises(NfsError) as ei:
        carol_nfs.unlink(f"{bucket}/bob/fromS3")
    assert ei.value.status in (rpc3.NFS3ERR_ACCES, 1)  # ACCES or PERM
    carol_s3.delete_object(Bucket=bucket, Key="bob/new")  # her own file
    assert not nfs.exists(f"{bucket}/bob/new")
