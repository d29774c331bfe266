# SPDX-License-Identifier: Apache-2.0
"""Quotas on bytes and inodes, per tenant, bucket and directory, set through
the admin API and enforced by both protocols: S3 answers 403 QuotaExceeded,
NFS WRITE/CREATE answer NFS3ERR_DQUOT; multipart parts count; a quota lowered
below usage blocks new writes and deletes nothing; FSSTAT shows the quota;
writers of both protocols racing for the last bytes never push usage over the
limit and every acknowledged write reads back intact."""
import hashlib
import itertools
import os
import sys
import threading

import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import NFS3ERR_DQUOT, Admin, Nfs, make_tenant, s3_code, s3_for  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
_seq = itertools.count()


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture
def t(d):
    """A fresh tenant with a bucket "bkt", an S3 client and an NFS export for 127.0.0.1."""
    adm = Admin(d)
    name = f"q{next(_seq)}"
    ten = make_tenant(adm, name, clients=["127.0.0.1/32"], export_path=f"/{name}")
    ten.s3 = s3_for(d, ten)
    ten.s3.create_bucket(Bucket="bkt")
    ten.adm = adm
    ten.d = d
    return ten


def usage(t, bucket=None, dir=None):
    path = f"/tenants/{t.id}/usage" if bucket is None else f"/tenants/{t.id}/buckets/{bucket}/usage"
    if dir:
        path += f"?dir={dir}"
    return t.adm.get(path)


def quota_exceeded(fn):
    with pytest.raises(ClientError) as ei:
        fn()
    assert s3_code(ei.value) == (403, "QuotaExceeded"), ei.value.response
    assert ei.value.response["Error"].get("Message")


def nfs_root(t, timeout=20):
    c = Nfs(t.d, timeout=timeout)
    st, root = c.mount(f"/{t.name}")
    assert st == 0
    st, b = c.lookup(root, "bkt")
    assert st == 0
    return c, root, b


def test_tenant_bytes_quota_both_protocols(t):
    u = t.adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": MiB})
    assert u["bytes_limit"] == MiB and u["bytes"] == 0
    t.s3.put_object(Bucket="bkt", Key="one", Body=b"1" * (600 * KiB))
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="two", Body=b"2" * (600 * KiB)))
    assert usage(t)["bytes"] == 600 * KiB
    c, root, b = nfs_root(t)
    with c:
        st, fh = c.create(b, "nfs-file")
        assert st == 0
        st, n = c.write_all(fh, b"n" * (300 * KiB))
        assert st == 0 and n == 300 * KiB
        st, _ = c.write(fh, 300 * KiB, b"n" * (200 * KiB), 2)
        assert st == NFS3ERR_DQUOT
        assert c.read_all(fh) == b"n" * (300 * KiB)
    assert usage(t)["bytes"] <= MiB
    assert t.s3.get_object(Bucket="bkt", Key="one")["Body"].read() == b"1" * (600 * KiB)
    # Removing the limit lets writes go again.
    t.adm.delete(f"/tenants/{t.id}/quota")
    t.s3.put_object(Bucket="bkt", Key="two", Body=b"2" * (600 * KiB))


def test_tenant_inode_quota_both_protocols(t):
    used = usage(t)["inodes"]
    t.adm.put(f"/tenants/{t.id}/quota", {"inodes_limit": used + 2})
    t.s3.put_object(Bucket="bkt", Key="i1", Body=b"x")
    c, root, b = nfs_root(t)
    with c:
        st, _ = c.create(b, "i2")
        assert st == 0
        st, _ = c.create(b, "i3")
        assert st == NFS3ERR_DQUOT
        st, _ = c.mkdir(b, "d3")
        assert st == NFS3ERR_DQUOT
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="i4", Body=b"x"))
    u = usage(t)
    assert u["inodes"] == used + 2 and u["inodes_limit"] == used + 2


def test_bucket_and_directory_quotas(t):
    t.s3.create_bucket(Bucket="free")
    t.s3.put_object(Bucket="bkt", Key="dir/", Body=b"")
    u = t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota", {"bytes_limit": 512 * KiB})
    assert u["bytes_limit"] == 512 * KiB
    u = t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota?dir=dir", {"bytes_limit": 100 * KiB,
                                                                "inodes_limit": 3})
    assert u["bytes_limit"] == 100 * KiB and u["inodes_limit"] == 3
    assert t.adm.get(f"/tenants/{t.id}/buckets/bkt/quota?dir=dir")["bytes_limit"] == 100 * KiB
    # directory: bytes and inodes
    t.s3.put_object(Bucket="bkt", Key="dir/a", Body=b"a" * (90 * KiB))
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="dir/b", Body=b"b" * (20 * KiB)))
    c, root, b = nfs_root(t)
    with c:
        st, dfh = c.lookup(b, "dir")
        assert st == 0
        st, fh = c.create(dfh, "n1")
        assert st == 0
        assert c.write(fh, 0, b"z" * (20 * KiB), 2)[0] == NFS3ERR_DQUOT
        st, _ = c.create(dfh, "n2")
        assert st == 0
        assert c.create(dfh, "n3")[0] == NFS3ERR_DQUOT
        # outside the directory, the bucket's quota applies
        st, fh = c.create(b, "outside")
        assert st == 0
        assert c.write_all(fh, b"o" * (300 * KiB))[0] == 0
        assert c.write(fh, 300 * KiB, b"o" * (200 * KiB), 2)[0] == NFS3ERR_DQUOT
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="big", Body=b"x" * (200 * KiB)))
    # another bucket of the tenant is not limited by "bkt"'s quota
    t.s3.put_object(Bucket="free", Key="big", Body=b"x" * (700 * KiB))
    listing = {x["name"]: x["usage"] for x in t.adm.get(f"/tenants/{t.id}/buckets")}
    assert listing["bkt"]["bytes_limit"] == 512 * KiB and listing["bkt"]["bytes"] <= 512 * KiB
    assert listing["free"]["bytes"] == 700 * KiB
    assert usage(t, "bkt", "dir")["bytes"] <= 100 * KiB
    # A path that is not a directory, or goes up, is refused.
    st, js = t.adm.call("PUT", f"/tenants/{t.id}/buckets/bkt/quota?dir=dir/a", {"bytes_limit": 1})
    assert st == 400 or st == 404, (st, js)
    st, js = t.adm.call("PUT", f"/tenants/{t.id}/buckets/bkt/quota?dir=../free", {"bytes_limit": 1})
    assert st == 400 and js["message"]


def test_multipart_parts_count(t):
    t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota", {"bytes_limit": 8 * MiB})
    up = t.s3.create_multipart_upload(Bucket="bkt", Key="mp")["UploadId"]
    p1 = t.s3.upload_part(Bucket="bkt", Key="mp", UploadId=up, PartNumber=1,
                          Body=b"p" * (5 * MiB))
    # The part holds 5 MiB of the quota: 4 MiB more does not fit.
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="other", Body=b"o" * (4 * MiB)))
    quota_exceeded(lambda: t.s3.upload_part(Bucket="bkt", Key="mp", UploadId=up, PartNumber=2,
                                            Body=b"q" * (4 * MiB)))
    t.s3.upload_part(Bucket="bkt", Key="mp", UploadId=up, PartNumber=2, Body=b"q" * MiB)
    t.s3.complete_multipart_upload(
        Bucket="bkt", Key="mp", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]},
                                   {"PartNumber": 2, "ETag": t.s3.list_parts(
                                       Bucket="bkt", Key="mp", UploadId=up)["Parts"][1]["ETag"]}]})
    assert usage(t, "bkt")["bytes"] == 6 * MiB
    body = t.s3.get_object(Bucket="bkt", Key="mp")["Body"].read()
    assert body == b"p" * (5 * MiB) + b"q" * MiB
    # An aborted upload gives its parts' bytes back.
    up = t.s3.create_multipart_upload(Bucket="bkt", Key="mp2")["UploadId"]
    t.s3.upload_part(Bucket="bkt", Key="mp2", UploadId=up, PartNumber=1, Body=b"r" * MiB)
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="o", Body=b"o" * (1536 * KiB)))
    t.s3.abort_multipart_upload(Bucket="bkt", Key="mp2", UploadId=up)
    t.s3.put_object(Bucket="bkt", Key="o", Body=b"o" * (1536 * KiB))


def test_multipart_completion_into_limited_directory(t):
    """Parts count on the bucket as they upload; the object counts on its key's
    limited directory when the upload completes: refused past that limit (the
    upload stays, and completes once the limit allows it)."""
    t.s3.put_object(Bucket="bkt", Key="mpd/", Body=b"")
    t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota?dir=mpd", {"bytes_limit": 150 * KiB})
    up = t.s3.create_multipart_upload(Bucket="bkt", Key="mpd/obj")["UploadId"]
    body = os.urandom(200 * KiB)
    p1 = t.s3.upload_part(Bucket="bkt", Key="mpd/obj", UploadId=up, PartNumber=1, Body=body)
    parts = {"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]}
    quota_exceeded(lambda: t.s3.complete_multipart_upload(Bucket="bkt", Key="mpd/obj",
                                                          UploadId=up, MultipartUpload=parts))
    assert usage(t, "bkt", "mpd")["bytes"] == 0
    assert usage(t, "bkt")["bytes"] == len(body)  # the part
    t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota?dir=mpd", {"bytes_limit": 250 * KiB})
    t.s3.complete_multipart_upload(Bucket="bkt", Key="mpd/obj", UploadId=up,
                                   MultipartUpload=parts)
    assert t.s3.get_object(Bucket="bkt", Key="mpd/obj")["Body"].read() == body
    assert usage(t, "bkt", "mpd")["bytes"] == len(body)
    assert usage(t, "bkt")["bytes"] == len(body)
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="mpd/more", Body=b"m" * (60 * KiB)))


def test_lowering_quota_below_usage(t):
    for i in range(4):
        t.s3.put_object(Bucket="bkt", Key=f"k{i}", Body=bytes([65 + i]) * (100 * KiB))
    before = usage(t)
    t.adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": 50 * KiB,
                                         "inodes_limit": before["inodes"] - 1})
    after = usage(t)
    assert after["bytes"] == before["bytes"] and after["inodes"] == before["inodes"]
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="new", Body=b"n"))
    c, root, b = nfs_root(t)
    with c:
        assert c.create(b, "new")[0] == NFS3ERR_DQUOT
        st, fh = c.lookup(b, "k0")
        assert st == 0
        assert c.write(fh, 100 * KiB, b"more", 2)[0] == NFS3ERR_DQUOT
        assert c.read_all(fh) == b"A" * (100 * KiB)
    for i in range(4):  # nothing was deleted
        assert t.s3.get_object(Bucket="bkt", Key=f"k{i}")["Body"].read() == \
            bytes([65 + i]) * (100 * KiB)
    # Deleting still works and gives space back.
    for i in range(4):
        t.s3.delete_object(Bucket="bkt", Key=f"k{i}")
    assert usage(t)["bytes"] == 0
    t.s3.put_object(Bucket="bkt", Key="fits", Body=b"f" * (10 * KiB))


def test_fsstat_shows_quota(t):
    t.adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": 4 * MiB, "inodes_limit": 1000})
    t.s3.put_object(Bucket="bkt", Key="x", Body=b"x" * MiB)
    u = usage(t)
    c, root, b = nfs_root(t)
    with c:
        st, fs = c.fsstat(root)
        assert st == 0
        assert fs["tbytes"] == 4 * MiB
        assert fs["fbytes"] == 4 * MiB - u["bytes"] == fs["abytes"]
        assert fs["tfiles"] == 1000
        assert fs["ffiles"] == 1000 - u["inodes"]
    # An export of the bucket shows the tighter of the bucket's and the tenant's quota.
    t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota", {"bytes_limit": 2 * MiB})
    t.adm.post(f"/tenants/{t.id}/exports", {"path": f"/{t.name}/b", "source": "bkt",
                                            "clients": ["127.0.0.1/32"]})
    with Nfs(t.d) as c:
        st, broot = c.mount(f"/{t.name}/b")
        assert st == 0
        st, fs = c.fsstat(broot)
        assert st == 0 and fs["tbytes"] == 2 * MiB and fs["fbytes"] == MiB


def test_rename_of_pending_writes_into_limited_directory(t):
    """A file with UNSTABLE writes not yet committed, renamed over NFS into a
    directory with a byte quota: its bytes count there, so the rename is
    refused past the limit (the file stays put, intact) and, once moved, the
    directory's usage has them and later writes there see them."""
    for k in ("A/", "B/"):
        t.s3.put_object(Bucket="bkt", Key=k, Body=b"")
    t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota?dir=B", {"bytes_limit": 300 * KiB})
    t.s3.put_object(Bucket="bkt", Key="B/old", Body=b"o" * (100 * KiB))
    body = os.urandom(256 * KiB)
    c, root, b = nfs_root(t)
    with c:
        st, a_fh = c.lookup(b, "A")
        assert st == 0
        st, b_fh = c.lookup(b, "B")
        assert st == 0
        st, fh = c.create(a_fh, "f")
        assert st == 0
        st, _ = c.write_all(fh, body, stable=0)  # UNSTABLE, no COMMIT
        assert st == 0
        assert c.rename(a_fh, "f", b_fh, "f") == NFS3ERR_DQUOT
        assert t.s3.get_object(Bucket="bkt", Key="A/f")["Body"].read() == body
        assert usage(t, "bkt", "B")["bytes"] == 100 * KiB
        t.adm.put(f"/tenants/{t.id}/buckets/bkt/quota?dir=B", {"bytes_limit": 400 * KiB})
        st, _ = c.write_all(fh, body[:1000], stable=0)  # pending again
        assert st == 0
        assert c.rename(a_fh, "f", b_fh, "f") == 0
        assert usage(t, "bkt", "B")["bytes"] == 356 * KiB
        st, g = c.create(b_fh, "g")
        assert st == 0
        assert c.write(g, 0, b"g" * (50 * KiB), 0)[0] == NFS3ERR_DQUOT
    quota_exceeded(lambda: t.s3.put_object(Bucket="bkt", Key="B/s3", Body=b"s" * (50 * KiB)))
    assert t.s3.get_object(Bucket="bkt", Key="B/f")["Body"].read() == body
    assert usage(t, "bkt", "B")["bytes"] == 356 * KiB


def s3_once(t):
    """An S3 client of @t that sends each request exactly once and waits long for
    its answer. botocore's default (and the harness's max_attempts=1, which is
    one *retry*) resends a PUT after a timeout or a dropped connection: on a
    loaded machine a PUT that committed but answered late was sent again and
    refused with QuotaExceeded, so a stored object was not counted as
    acknowledged. Clients are made here, on the test's thread: boto3's default
    session is not safe to make clients from several threads at once."""
    return t.d.boto3(access_key=t.akey, secret_key=t.secret,
                     config=Config(s3={"addressing_style": "path"},
                                   retries={"total_max_attempts": 1, "mode": "standard"},
                                   connect_timeout=60, read_timeout=600))


def race(t, n_s3, n_nfs, limit=MiB, size=40 * KiB):
    """n_s3 S3 and n_nfs NFS writers fill a @limit quota with @size writes.
    Every request is sent once. A request that got no answer (client timeout,
    connection lost) has an unknown outcome: afterwards its object must be
    absent or whole (S3; an NFS file: empty or whole), and what is there counts.
    @return (stored writes: acknowledged, plus unknown outcomes found stored,
    each as (kind, name, body); unexpected errors; usage)."""
    t.adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": limit})
    acked, unsure, errors, lock = [], [], [], threading.Lock()

    def payload(tag, i):
        return hashlib.sha256(f"{tag}-{i}".encode()).digest() * (size // 32)

    def s3_writer(w, s3):
        for i in range(20):
            key, body = f"s3-{w}-{i}", payload(f"s{w}", i)
            try:
                s3.put_object(Bucket="bkt", Key=key, Body=body)
            except ClientError as e:
                if s3_code(e) != (403, "QuotaExceeded"):
                    with lock:
                        errors.append(("s3", key, s3_code(e)))
                continue
            except BotoCoreError as e:  # no answer: outcome unknown
                with lock:
                    unsure.append(("s3", key, body, repr(e)))
                continue
            with lock:
                acked.append(("s3", key, body))

    def nfs_writer(w, c, b):
        with c:
            for i in range(20):
                name, body = f"nfs-{w}-{i}", payload(f"n{w}", i)
                try:
                    st, fh = c.create(b, name)
                    if st == NFS3ERR_DQUOT:
                        continue
                    if st != 0:
                        with lock:
                            errors.append(("nfs-create", name, st))
                        continue
                    st, r = c.write(fh, 0, body, 2)
                except OSError as e:  # no answer; the connection is out of step: stop
                    with lock:
                        unsure.append(("nfs", name, body, repr(e)))
                    return
                if st == NFS3ERR_DQUOT:
                    continue
                if st != 0 or r["count"] != len(body):
                    with lock:
                        errors.append(("nfs-write", name, st))
                    continue
                with lock:
                    acked.append(("nfs", name, body))

    threads = [threading.Thread(target=s3_writer, args=(w, s3_once(t))) for w in range(n_s3)]
    for w in range(n_nfs):
        c, _, b = nfs_root(t, timeout=600)
        threads.append(threading.Thread(target=nfs_writer, args=(w, c, b)))
    for th in threads:
        th.start()
    for th in threads:
        th.join(1800)
    assert not [th for th in threads if th.is_alive()], "a writer never finished"
    stored = list(acked)
    for kind, name, body, why in unsure:
        try:
            got = t.s3.get_object(Bucket="bkt", Key=name)["Body"].read()
        except ClientError as e:
            assert s3_code(e) == (404, "NoSuchKey"), (kind, name, why, e.response)
            continue
        assert got == body or (kind == "nfs" and got == b""), (kind, name, why, len(got))
        stored.append((kind, name, got))
    for kind, name, body in stored:
        got = t.s3.get_object(Bucket="bkt", Key=name)["Body"].read()
        assert got == body, (kind, name)
    return stored, errors, usage(t)


def test_concurrent_writers_race_for_last_bytes(t):
    """4 S3 and 4 NFS writers race for the last bytes of a 1 MiB quota: no
    write fails for another reason, every acknowledged write reads back
    intact, and usage is exactly what was acknowledged."""
    acked, errors, u = race(t, 4, 4)
    assert not errors, errors[:5]
    assert len(acked) >= 12  # the quota did fill up
    assert u["bytes"] == sum(len(b) for _, _, b in acked)
    assert u["bytes"] < MiB + 4 * 40 * KiB  # at most one write per NFS writer beyond


def test_concurrent_s3_writers_never_pass_limit(t):
    acked, errors, u = race(t, 8, 0)
    assert not errors, errors[:5]
    assert u["bytes"] <= MiB and u["bytes"] == sum(len(b) for _, _, b in acked)


def test_concurrent_nfs_writers_never_pass_limit(t):
    acked, errors, u = race(t, 2, 6)
    assert not errors, errors[:5]
    assert u["bytes"] <= MiB, u


def test_unstable_nfs_writes_respect_quota(t):
    """One client, one file after another, UNSTABLE writes (the kernel client's
    default): the quota must stop them like FILE_SYNC ones."""
    t.adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": MiB})
    c, root, b = nfs_root(t)
    acked = 0
    with c:
        for i in range(40):
            st, fh = c.create(b, f"u{i}")
            if st == NFS3ERR_DQUOT:
                break
            assert st == 0
            st, _ = c.write(fh, 0, b"u" * (40 * KiB), 0)
            if st == NFS3ERR_DQUOT:
                break
            assert st == 0
            acked += 40 * KiB
    assert acked <= MiB
    assert usage(t)["bytes"] <= MiB
