# SPDX-License-Identifier: Apache-2.0
"""The Linux kernel NFSv3 client against s3nfsd, in a QEMU guest (../shared/nfsvm).

One guest boot per test (boots cost ~6 s under TCG emulation). Each test runs
a workload script from workloads/ as root in the guest with cwd = the mount of
the bootstrap tenant's root; the workload makes its own bucket with mkdir and
works inside it. After the guest has exited, the host checks through S3
(boto3) that what the kernel client wrote is there with the same bytes.

A failing workload reports the step that broke, the guest's output, the
guest's NFS kernel messages and the tail of the server log.
"""
import hashlib
import json
import os
import random
import secrets
import tarfile
import urllib.request

import pytest

from knfs import knfs_target, nfsvm  # noqa: F401 - fixtures

pytestmark = [pytest.mark.kvm, pytest.mark.slow]

INCLUDE = "/usr/include"
TAR_TARGET_ENTRIES = 3000   # a few thousand entries keep the extract under a minute under TCG


def bucket_name(what):
    # random suffix: several runs can share an external server's export
    return f"k{what}-{secrets.token_hex(3)}"


def run_ok(nfsvm, target, tmp_path, workload, args, **kw):
    res = nfsvm.run(workload, args, target, tmp_path, **kw)
    print(res.stdout)
    print(f"{workload}: rc={res.rc} wall={res.wall:.1f}s; {res.stderr.strip().splitlines()[-1:]}")
    print(res.opstats())
    assert res.ok, res.report(target.log_tail())
    return res


def s3_client(target):
    if target.daemon is None:
        return None
    return target.daemon.boto3()


def s3_digest(s3, bucket, key):
    """(size, sha256 hex, md5 hex, ETag without quotes) of s3://bucket/key, streamed."""
    r = s3.get_object(Bucket=bucket, Key=key)
    h, m = hashlib.sha256(), hashlib.md5()
    n = 0
    for chunk in r["Body"].iter_chunks(1 << 20):
        h.update(chunk)
        m.update(chunk)
        n += len(chunk)
    return n, h.hexdigest(), m.hexdigest(), r.get("ETag", "").strip('"')


def s3_keys(s3, bucket):
    """{key: size} of every object in the bucket (ListObjectsV2, all pages)."""
    keys = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            keys[o["Key"]] = o["Size"]
    return keys


def host_checks(target, res):
    """GET every HOSTCHECK object the workload announced; compare size and SHA-256."""
    s3 = s3_client(target)
    if s3 is None:
        return
    checks = res.hostchecks()
    assert checks, "workload announced no HOSTCHECK objects"
    for bucket, key, size, sha in checks:
        try:
            got = s3_digest(s3, bucket, key)
        except Exception as e:  # noqa: BLE001 - report any client error with context
            pytest.fail(f"guest workload passed, but GET s3://{bucket}/{key} (written by the "
                        f"kernel client) failed: {e!r}\n--- server log ---\n{target.log_tail()}")
        assert got[:2] == (size, sha), (
            f"s3://{bucket}/{key} written by the kernel client: S3 GET gives size {got[0]} "
            f"sha256 {got[1]}, the guest saw size {size} sha256 {sha}")
        # an ETag in plain MD5 form must be the MD5 of the content (files written
        # out of order over NFS may carry the multipart form "...-N" instead)
        etag, md5 = got[3], got[2]
        if size <= 65536:   # one WRITE: sequential by construction
            assert etag == md5, f"ETag of s3://{bucket}/{key} ({size} bytes, one NFS WRITE) " \
                                f"is {etag!r}, want its MD5 {md5}"
        elif "-" not in etag:
            assert etag == md5, f"ETag of s3://{bucket}/{key} is {etag!r}: MD5 form but not " \
                                f"the MD5 of the content ({md5})"


# ---------------------------------------------------------------- (a) smoke

QUOTA_BYTES = 1 << 30   # below the store size the fixture gives (data_file_size)
QUOTA_INODES = 200000


def admin_put(daemon, path, doc):
    req = urllib.request.Request(daemon.admin_endpoint + path, method="PUT",
                                 data=json.dumps(doc).encode(),
                                 headers={"Authorization": f"Bearer {daemon.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def test_kernel_smoke(nfsvm, knfs_target, tmp_path):
    payload = random.Random(20261121).randbytes(3 * 1024 * 1024 + 123)
    b = bucket_name("smoke")
    env, quota_err = {}, None
    if knfs_target.daemon is not None:
        # a tenant quota: df in the guest must show it as the file system's size
        try:
            admin_put(knfs_target.daemon, "/api/v1/tenants/1/quota",
                      {"bytes_limit": QUOTA_BYTES, "inodes_limit": QUOTA_INODES})
            env = {"KS_EXPECT_TOTAL": QUOTA_BYTES, "KS_EXPECT_ITOTAL": QUOTA_INODES}
        except Exception as e:  # noqa: BLE001 - reported after the workload ran
            quota_err = repr(e)
    res = run_ok(nfsvm, knfs_target, tmp_path, "smoke", [b],
                 files={"payload.bin": payload}, env=env, timeout=240)
    assert quota_err is None, (f"workload passed without the df quota check: setting the "
                               f"tenant quota over the admin API failed: {quota_err}")
    host_checks(knfs_target, res)
    s3 = s3_client(knfs_target)
    if s3 is None:
        return
    body = s3.get_object(Bucket=b, Key="payload.bin")["Body"].read()
    assert body == payload, "payload.bin over S3 differs from the bytes the guest copied"
    keys = s3_keys(s3, b)
    want = {"hello.txt": 20, "payload.bin": len(payload), "ckpt": 123457, "empty": 0,
            "sizes/s_4097": 4097, "sizes/s_1048577": 1048577, "tr": 0}
    for k, size in want.items():
        assert keys.get(k) == size, f"S3 listing of {b}: key {k} size {keys.get(k)}, want {size}"
    for gone in ("ckpt.tmp", "a", "open.txt", "x/y/f"):
        assert gone not in keys, f"S3 listing of {b} still has {gone}"
    assert not any(k.startswith("many/") for k in keys), "S3 listing still has many/*"


# ---------------------------------------------------------------- (b) tarball

def _norm(ti):
    """Numeric owners only; a few owners/modes varied so chown/chmod are exercised."""
    ti.uname = ti.gname = ""
    h = int(hashlib.sha256(ti.name.encode()).hexdigest()[:8], 16)
    if ti.isfile() and h % 7 == 0:
        ti.uid, ti.gid = 1000, 1000
    elif ti.isfile() and h % 11 == 0:
        ti.uid, ti.gid, ti.mode = 1001, 2000, 0o640
    return ti


def _add_bytes(tf, name, data, mode=0o644, uid=0, gid=0, mtime=1700000000):
    import io
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.uid, ti.gid, ti.mtime = len(data), mode, uid, gid, mtime
    tf.addfile(ti, io.BytesIO(data))


def _add_special(tf, name, kind, target="", mode=0o755, uid=0, gid=0):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode, ti.uid, ti.gid, ti.mtime = kind, target, mode, uid, gid, 1700000100
    tf.addfile(ti)


def build_tarball(path):
    """A source-tree tarball from /usr/include (a few thousand entries) plus extras
    with the cases a real tree has: executables, private files, hard links,
    symlinks (relative, to a directory, dangling), empty files and directories,
    a deep path, a long name, UTF-8 names, setgid/sticky directories, a 6 MiB file.
    Returns the directory to remove in the guest and the directory renames to
    do there (relative to the tree top)."""
    subdirs, files = [], []
    for e in sorted(os.listdir(INCLUDE)):
        p = os.path.join(INCLUDE, e)
        if os.path.islink(p) or not os.path.isdir(p):
            files.append(e)
        else:
            n = sum(1 + len(fs) + len(ds) for _, ds, fs in os.walk(p))
            subdirs.append((e, n))
    chosen, total = [], len(files)
    for e, n in sorted(subdirs, key=lambda x: -x[1]):
        if n <= 1000 and total + n <= TAR_TARGET_ENTRIES:
            chosen.append((e, n))
            total += n
    by_size = [e for e, _ in sorted(chosen, key=lambda x: -x[1])]
    rm_dir = f"include/{by_size[0]}" if by_size else ""
    # renames: a subtree into a new parent, and one next to an existing sibling
    # whose keys it must now sort before ("x-moved/..." < "x/..." in S3 order)
    renames = [("extras", "moved/extras-renamed")]
    if len(by_size) >= 3:
        renames.append((f"include/{by_size[1]}", f"include/{by_size[2]}-moved"))
    rnd = random.Random(42)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        _add_special(tf, "include", tarfile.DIRTYPE)
        for e in files:
            tf.add(os.path.join(INCLUDE, e), arcname=f"include/{e}", filter=_norm)
        for e, _ in sorted(chosen):
            tf.add(os.path.join(INCLUDE, e), arcname=f"include/{e}", filter=_norm)
        x = "extras"
        _add_special(tf, x, tarfile.DIRTYPE)
        _add_special(tf, f"{x}/bin", tarfile.DIRTYPE)
        _add_bytes(tf, f"{x}/bin/run.sh", b"#!/bin/sh\necho run\n", 0o755)
        _add_bytes(tf, f"{x}/secret.txt", b"top secret\n", 0o600, 1000, 1000)
        _add_bytes(tf, f"{x}/group.txt", b"for the group\n", 0o640, 1001, 2000)
        _add_special(tf, f"{x}/odd", tarfile.DIRTYPE, mode=0o751)
        _add_bytes(tf, f"{x}/odd/readonly", b"ro\n", 0o444)
        _add_special(tf, f"{x}/shared", tarfile.DIRTYPE, mode=0o2775, gid=2000)
        _add_special(tf, f"{x}/tmp", tarfile.DIRTYPE, mode=0o1777)
        _add_bytes(tf, f"{x}/data.bin", rnd.randbytes(65536 + 5))
        _add_special(tf, f"{x}/data-link.bin", tarfile.LNKTYPE, f"{x}/data.bin", mode=0o644)
        _add_special(tf, f"{x}/run-link", tarfile.SYMTYPE, "bin/run.sh", mode=0o777)
        _add_special(tf, f"{x}/include-link", tarfile.SYMTYPE, "../include", mode=0o777)
        _add_special(tf, f"{x}/dangling", tarfile.SYMTYPE, "no/such/target/here", mode=0o777)
        _add_bytes(tf, f"{x}/empty", b"")
        _add_special(tf, f"{x}/emptydir", tarfile.DIRTYPE)
        deep = "/".join(f"d{i}" for i in range(20))
        _add_bytes(tf, f"{x}/{deep}/leaf.txt", b"deep\n")
        _add_bytes(tf, f"{x}/{'L' * 200}.txt", b"long name\n")
        _add_bytes(tf, f"{x}/donn\u00e9es \u00fcn\u00efc\u00f6d\u00e9.txt", b"utf-8 name\n")
        _add_bytes(tf, f"{x}/with space & 'quote'.txt", b"odd characters\n")
        _add_bytes(tf, f"{x}/big.bin", rnd.randbytes(6 * 1024 * 1024 + 17))
    return rm_dir, renames


@pytest.fixture(scope="session")
def source_tarball(tmp_path_factory):
    path = tmp_path_factory.mktemp("tarball") / "src.tar"
    rm_dir, renames = build_tarball(str(path))
    return str(path), rm_dir, renames


def _renamed(name, renames):
    for old, new in renames:
        if name == old or name.startswith(old + "/"):
            name = new + name[len(old):]
    return name


def test_kernel_tarball(nfsvm, knfs_target, tmp_path, source_tarball):
    tar_path, rm_dir, renames = source_tarball
    b = bucket_name("tar")
    run_ok(nfsvm, knfs_target, tmp_path, "tarball",
           [b, "/host/src.tar", rm_dir] + [f"{o}={n}" for o, n in renames],
           files={"src.tar": tar_path}, timeout=480)
    s3 = s3_client(knfs_target)
    if s3 is None:
        return
    # every regular file of the tree (minus the removed subtree, renamed ones
    # under their new names) is an object of that size, listed in S3 order; a
    # sample of them, and all the extras, read back over S3 with the same bytes
    pages = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b):
        pages += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    order = [k for k, _ in pages]
    assert order == sorted(order, key=lambda k: k.encode()), \
        "ListObjectsV2 of the extracted tree is not in UTF-8 byte order"
    keys = dict(pages)
    with tarfile.open(tar_path) as tf:
        members = {m.name: m for m in tf.getmembers()}
        expect = {}
        for m in members.values():
            if rm_dir and (m.name == rm_dir or m.name.startswith(rm_dir + "/")):
                continue
            if m.isfile() or m.islnk():
                expect[_renamed(m.name, renames)] = m
        missing = [k for k in expect if k not in keys]
        assert not missing, (f"{len(missing)} files extracted by the kernel client are missing "
                             f"from the S3 listing of {b}, e.g. {missing[:5]}")
        for k, m in expect.items():
            real = members[m.linkname] if m.islnk() else m
            assert keys[k] == real.size, f"S3 size of {k} is {keys[k]}, tar says {real.size}"
        gone = ([rm_dir] if rm_dir else []) + [o for o, _ in renames]
        for g in gone:
            left = [k for k in keys if k.startswith(g + "/")]
            assert not left, f"S3 still lists {len(left)} keys under {g}/ (removed or renamed " \
                             f"over NFS): {left[:5]}"
        sample = [k for k in sorted(expect) if k.startswith("moved/")]
        sample += random.Random(7).sample(sorted(expect), min(40, len(expect)))
        for k in sample:
            m = expect[k]
            data = tf.extractfile(m).read()
            r = s3.get_object(Bucket=b, Key=k)
            got = r["Body"].read()
            assert got == data, f"S3 GET of {k} differs from the tarball member ({len(got)} bytes " \
                                f"vs {len(data)})"
            etag = r.get("ETag", "").strip('"')
            assert "-" in etag or etag == hashlib.md5(data).hexdigest(), \
                f"ETag of {k} is {etag!r}: MD5 form but not the MD5 of the content"
    # the directory level: CommonPrefixes of include/ in S3 order, renamed ones included
    r = s3.list_objects_v2(Bucket=b, Prefix="include/", Delimiter="/")
    prefixes = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
    assert prefixes == sorted(prefixes, key=lambda k: k.encode()), \
        f"CommonPrefixes under include/ not in S3 order: {prefixes}"
    for _, new in renames:
        if new.startswith("include/"):
            assert new + "/" in prefixes, f"{new}/ missing from CommonPrefixes {prefixes}"


# ---------------------------------------------------------------- (c) fio

def test_kernel_fio(nfsvm, knfs_target, tmp_path):
    b = bucket_name("fio")
    res = run_ok(nfsvm, knfs_target, tmp_path, "fio", [b, "256m", "5"], timeout=420)
    host_checks(knfs_target, res)


# ---------------------------------------------------------------- (d) permissions

def test_kernel_permissions(nfsvm, knfs_target, tmp_path):
    b = bucket_name("perm")
    res = run_ok(nfsvm, knfs_target, tmp_path, "perms", [b], timeout=240)
    host_checks(knfs_target, res)


# ---------------------------------------------------------------- versions and object lock

def test_kernel_versions(nfsvm, knfs_target, tmp_path):
    """The kernel client in a versioned bucket and on a locked version."""
    import datetime
    d = knfs_target.daemon
    if d is None:
        pytest.skip("checks versions over S3: needs the s3nfsd fixture")
    b = bucket_name("ver")
    s3 = d.boto3()

    def on_request(what):
        if what != "setup":
            raise ValueError(f"unknown request {what}")
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket=b, Key="h", Body=b"from s3\n")
        s3.create_bucket(Bucket=b + "l", ObjectLockEnabledForBucket=True)
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10)
        s3.put_object(Bucket=b + "l", Key="locked", Body=b"locked\n",
                      ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)

    run_ok(nfsvm, knfs_target, tmp_path, "versions", [b], on_request=on_request, timeout=240)
    r = s3.list_object_versions(Bucket=b)
    f = sorted([v for v in r.get("Versions", []) if v["Key"] == "f"],
               key=lambda v: v["LastModified"])
    assert [m["Key"] for m in r.get("DeleteMarkers", [])] == ["f"]
    assert [s3.get_object(Bucket=b, Key="f", VersionId=v["VersionId"])["Body"].read()
            for v in f] == [b"one\n", b"TWO\n"], "the first version lost its bytes"
    h = [v for v in r["Versions"] if v["Key"] == "h"]
    assert len(h) == 2
    assert s3.get_object(Bucket=b, Key="h")["Body"].read() == b"g\n"
    old = [v["VersionId"] for v in h if not v["IsLatest"]][0]
    assert s3.get_object(Bucket=b, Key="h", VersionId=old)["Body"].read() == b"from s3\n"
    lv = s3.list_object_versions(Bucket=b + "l", Prefix="locked")["Versions"]
    assert len(lv) == 1 and s3.get_object(Bucket=b + "l", Key="locked")["Body"].read() == \
        b"locked\n"


# ---------------------------------------------------------------- server restarts

def test_kernel_server_restart(nfsvm, knfs_target, tmp_path):
    """Clean restart and kill -9 of s3nfsd under a mounted kernel client, then
    S3 changes to the mounted bucket."""
    d = knfs_target.daemon
    if d is None:
        pytest.skip("restarts the server: needs the s3nfsd fixture, not S3NFS_KNFS_TARGET")
    b = bucket_name("restart")
    share = tmp_path / "share-restart"

    def on_request(what):
        if what == "restart-term":
            d.restart()
        elif what == "restart-kill":
            d.kill()
            d.start()
        elif what == "s3-changes":
            s3 = d.boto3()
            s3.put_object(Bucket=b, Key="from-s3/new.txt", Body=b"made over S3\n")
            size = s3.head_object(Bucket=b, Key="committed.term")["ContentLength"]
            body = random.Random(5).randbytes(size)
            s3.put_object(Bucket=b, Key="committed.term", Body=body)
            s3.delete_object(Bucket=b, Key="new.term")
            (share / "expect.committed.term").write_text(hashlib.sha256(body).hexdigest() + "\n")
        else:
            raise ValueError(f"unknown request {what}")

    res = run_ok(nfsvm, knfs_target, tmp_path, "restart", [b], on_request=on_request,
                 timeout=240)
    host_checks(knfs_target, res)
