# SPDX-License-Identifier: Apache-2.0
"""Names: which S3 keys are paths, which are refused, and exact round trips of
unusual bytes between S3 keys and NFS file names (docs/cross-protocol.md, "Names")."""
import botocore.exceptions
import pytest

from crossutil import (NF_DIR, NFS3ERR_NOTEMPTY, NfsError, rpc3, s3_error, s3_list_all, s3_raw,
                       s3_raw_list)

REFUSED = [
    ("a//b", "InvalidArgument"),         # empty segment
    ("/lead", "InvalidArgument"),        # empty first segment
    ("a//", "InvalidArgument"),          # empty segment before the marker slash
    (".", "InvalidArgument"),
    ("..", "InvalidArgument"),
    ("./a", "InvalidArgument"),
    ("a/./b", "InvalidArgument"),
    ("a/../b", "InvalidArgument"),
    ("a/..", "InvalidArgument"),
    ("a/.", "InvalidArgument"),
    ("../escape", "InvalidArgument"),
    ("s" * 256, "InvalidArgument"),      # one segment over 255 bytes
    ("d/" + "s" * 256 + "/f", "InvalidArgument"),
    ("é" * 128, "InvalidArgument"),      # 256 bytes of UTF-8 in 128 characters
    ("k" * 1025, "KeyTooLongError"),     # key over 1024 bytes
    ("/".join(["p" * 200] * 6), "KeyTooLongError"),
    ("nul\x00byte", "InvalidArgument"),
]


@pytest.mark.parametrize("key,code", REFUSED, ids=[repr(k[:24]) for k, _ in REFUSED])
def test_refused_keys_leave_no_trace(s3, nfs, bucket, key, code):
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object(Bucket=bucket, Key=key, Body=b"data")
    assert s3_error(ei) == (code, 400)
    # the refusal happened before anything was made: no implicit directory either
    assert nfs.listdir(bucket) == []
    assert s3_list_all(s3, bucket)[0] == []


@pytest.mark.parametrize("key,code", REFUSED[:6], ids=[repr(k[:24]) for k, _ in REFUSED[:6]])
def test_refused_keys_on_read_and_delete(s3, bucket, key, code):
    """A key that can never exist: GET/HEAD answer the same 400 as PUT (not NoSuchKey),
    DELETE too, so a client learns the key is unusable rather than merely absent."""
    for call in (s3.get_object, s3.delete_object):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            call(Bucket=bucket, Key=key)
        assert s3_error(ei) == (code, 400), call.__name__


def test_limits_exactly_at_the_edge(s3, nfs, bucket):
    seg255 = "s" * 255
    s3.put_object(Bucket=bucket, Key=f"{seg255}/{seg255}", Body=b"edge")
    assert nfs.get(f"{bucket}/{seg255}/{seg255}") == b"edge"
    # exactly 1024 bytes of key: 3 * (255 + 1) + 253 + 3
    k1024 = "/".join(["t" * 255] * 3 + ["t" * 253]) + "/ab"
    assert len(k1024.encode()) == 1024
    s3.put_object(Bucket=bucket, Key=k1024, Body=b"1024")
    assert nfs.get(f"{bucket}/{k1024}") == b"1024"
    assert k1024 in s3_list_all(s3, bucket)[0]
    # NFS: a 256-byte name is NAMETOOLONG, 255 is fine
    bfh = nfs.fh(bucket)
    assert nfs.create(bfh, "n" * 256)[0] == rpc3.NFS3ERR_NAMETOOLONG
    assert nfs.create(bfh, "n" * 255)[0] == 0
    assert "n" * 255 in s3_list_all(s3, bucket)[0]


def test_nfs_refuses_paths_longer_than_a_key(s3, nfs, bucket):
    """Over NFS a path could grow past 1024 bytes (deep directories); such a file
    could never be an object, so NFS refuses it (NAMETOOLONG), by create and by rename."""
    parts = ["q" * 250] * 4  # "q..q/" * 4 = 1004 bytes of directory key
    dfh = nfs.mkdirs(f"{bucket}/" + "/".join(parts))
    assert nfs.create(dfh, "ok" * 5)[0] == 0           # 1004 + 10 = 1014 bytes
    assert nfs.create(dfh, "x" * 30)[0] == rpc3.NFS3ERR_NAMETOOLONG  # 1034 bytes
    assert nfs.mkdir(dfh, "y" * 30)[0] == rpc3.NFS3ERR_NAMETOOLONG
    # rename of a directory whose subtree would exceed the limit at its new place
    nfs.mkdirs(f"{bucket}/short/sub")
    st, sfh = nfs.create(nfs.fh(f"{bucket}/short/sub"), "z" * 20)
    assert st == 0
    with pytest.raises(NfsError) as ei:
        nfs.rename(f"{bucket}/short", f"{bucket}/" + "/".join(parts) + "/" + "w" * 10)
    assert ei.value.status == rpc3.NFS3ERR_NAMETOOLONG
    assert nfs.exists(f"{bucket}/short/sub/" + "z" * 20)
    keys = s3_list_all(s3, bucket)[0]
    assert "short/sub/" + "z" * 20 in keys
    assert all(len(k.encode()) <= 1024 for k in keys)


ODD = [
    "with space", " lead and trail ", "plus+sign", "a+b c", "percent%", "pct%20encoded",
    "100%25", "uni-é-ü-ß", "日本語のファイル", "emoji-🙂-🚀", "tilde~star*quote'dq\"",
    "xml<&>chars", "q?hash#eq=amp&semi;", "back\\slash", "colon:comma,at@", "brackets[]{}()",
    "tab\tname", "nl\nname", "ctl\x01\x1f\x7f", "dots...", ".hidden", "..twodots", "trail.",
    "-dash", "comb-é-e\u0301",  # NFC and NFD forms are different names
]


def test_odd_keys_from_s3_are_exact_file_names(s3, nfs, bucket):
    for i, name in enumerate(ODD):
        s3.put_object(Bucket=bucket, Key=f"dir {i}/{name}", Body=f"v{i}".encode())
    for i, name in enumerate(ODD):
        names = [n for n, _, _ in nfs.listdir(f"{bucket}/dir {i}")]
        assert names == [name.encode()], (name, names)
        assert nfs.get(f"{bucket}/dir {i}/".encode() + name.encode()) == f"v{i}".encode()


def test_odd_file_names_from_nfs_are_exact_keys(s3, nfs, d, bucket):
    bfh = nfs.fh(bucket)
    for i, name in enumerate(ODD):
        st, fh = nfs.create(bfh, name.encode())
        assert st == 0, name
        nfs.write_all(fh, 0, f"w{i}".encode())
    keys = s3_list_all(s3, bucket)[0]
    assert sorted(keys, key=lambda k: k.encode()) == keys, "binary UTF-8 order"
    assert set(keys) == set(ODD)
    for i, name in enumerate(ODD):
        assert s3.get_object(Bucket=bucket, Key=name)["Body"].read() == f"w{i}".encode()
        assert s3.head_object(Bucket=bucket, Key=name)["ContentLength"] == len(f"w{i}")
    # and raw: the listing's url-encoded keys decode to the very bytes of the names
    raw, _ = s3_raw_list(d, bucket)
    assert set(raw) == {n.encode() for n in ODD}


def test_non_utf8_file_names(s3, nfs, d, bucket):
    """NFS names are bytes; S3 keys are UTF-8. A name that is not UTF-8 is listed
    with encoding-type=url as its percent-encoded bytes and can be read and deleted
    through the same bytes in the request path."""
    bfh = nfs.fh(bucket)
    bad = [b"latin1-\xe9t\xe9", b"ff-\xff\xfe", b"lone-\x80"]
    for i, name in enumerate(bad):
        st, fh = nfs.create(bfh, name)
        assert st == 0, name
        nfs.write_all(fh, 0, b"raw%d" % i)
    keys, _ = s3_raw_list(d, bucket)
    assert sorted(keys) == sorted(bad)
    for i, name in enumerate(bad):
        st, _, body = s3_raw(d, "GET", bucket, name)
        assert (st, body) == (200, b"raw%d" % i), (name, st, body)
    st, _, _ = s3_raw(d, "DELETE", bucket, bad[0])
    assert st == 204
    assert not nfs.exists(f"{bucket}/".encode() + bad[0])


def test_non_utf8_prefix_paging(s3, nfs, d, bucket):
    """Listing pages that end on a common prefix resume after it even when names under
    it hold bytes above 0xF4 (impossible in UTF-8, possible over NFS)."""
    for sub in (b"a", b"b", b"c"):
        dfh = nfs.mkdirs(f"{bucket}/".encode() + sub)
        for name in (b"x", b"\xff", b"\xff\xff"):
            assert nfs.create(dfh, name)[0] == 0
    keys, prefixes = s3_raw_list(d, bucket, delimiter="/", max_keys=1)
    assert (keys, prefixes) == ([], [b"a/", b"b/", b"c/"])
    keys, _ = s3_raw_list(d, bucket, max_keys=2)
    want = sorted(s + b"/" + n for s in (b"a", b"b", b"c") for n in (b"x", b"\xff", b"\xff\xff"))
    assert keys == want


def test_bucket_names_are_directories(s3, nfs):
    """Buckets are the top-level directories of the tenant root, both ways."""
    s3.create_bucket(Bucket="cross-made-by-s3")
    assert b"cross-made-by-s3" in [n for n, a, _ in nfs.listdir("") if a["type"] == NF_DIR]
    assert nfs.mkdir(nfs.root, "cross-made-by-nfs")[0] == 0
    assert "cross-made-by-nfs" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    # names S3 forbids are refused over NFS too (uppercase, underscore, too short)
    for bad in ("Upper", "under_score", "ab", "x" * 64, "-lead", "1.2.3.4"):
        assert nfs.mkdir(nfs.root, bad)[0] != 0, bad
    s3.put_object(Bucket="cross-made-by-nfs", Key="k", Body=b"1")
    assert nfs.get("cross-made-by-nfs/k") == b"1"
    with pytest.raises(NfsError) as ei:
        nfs.rmdir_path("cross-made-by-nfs")
    assert ei.value.status == NFS3ERR_NOTEMPTY
    s3.delete_object(Bucket="cross-made-by-nfs", Key="k")
    nfs.rmdir_path("cross-made-by-nfs")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.head_bucket(Bucket="cross-made-by-nfs")
    assert s3_error(ei)[1] == 404
    s3.delete_bucket(Bucket="cross-made-by-s3")
    assert not nfs.exists("cross-made-by-s3")
