# SPDX-License-Identifier: Apache-2.0
"""Files and directories: objects are files, common prefixes are directories,
`k/` markers are explicit directories, implicit parents come and go with S3,
clashes are refused both ways, links as S3 sees them (docs/cross-protocol.md,
"Files and directories")."""
import botocore.exceptions
import pytest

from crossutil import (NF_DIR, NF_LNK, NF_REG, NfsError, md5, rpc3, s3_error,
                       s3_list_all)


def keys(s3, b, prefix="", delimiter=None):
    k, p, _ = s3_list_all(s3, b, prefix, delimiter)
    return k, p


def clash(ei):
    assert s3_error(ei) == ("InvalidRequest", 409)


def test_object_is_file_and_back(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="a/b/c.bin", Body=b"from s3")
    a = nfs.stat(f"{bucket}/a/b/c.bin")
    assert a["type"] == NF_REG and a["size"] == 7
    assert nfs.stat(f"{bucket}/a")["type"] == NF_DIR
    assert nfs.stat(f"{bucket}/a/b")["type"] == NF_DIR
    assert nfs.get(f"{bucket}/a/b/c.bin") == b"from s3"
    nfs.mkdirs(f"{bucket}/x/y")
    nfs.put(f"{bucket}/x/y/z.bin", b"from nfs")
    assert s3.get_object(Bucket=bucket, Key="x/y/z.bin")["Body"].read() == b"from nfs"
    assert keys(s3, bucket) == (["a/b/c.bin", "x/y/z.bin"], [])
    assert keys(s3, bucket, delimiter="/") == ([], ["a/", "x/"])
    assert keys(s3, bucket, "x/", "/") == ([], ["x/y/"])
    assert keys(s3, bucket, "x/y/", "/") == (["x/y/z.bin"], [])
    # a directory is not an object under its bare name
    for k in ("a", "a/b", "x"):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.head_object(Bucket=bucket, Key=k)
        assert s3_error(ei)[1] == 404


def test_marker_is_explicit_directory(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="m/", Body=b"")
    assert nfs.stat(f"{bucket}/m")["type"] == NF_DIR
    h = s3.head_object(Bucket=bucket, Key="m/")
    assert h["ContentLength"] == 0 and h["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    assert keys(s3, bucket) == (["m/"], [])
    assert keys(s3, bucket, delimiter="/") == ([], ["m/"])
    assert keys(s3, bucket, "m/", "/") == (["m/"], [])
    # a marker with a body is refused: a directory holds no bytes
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object(Bucket=bucket, Key="full/", Body=b"x")
    assert s3_error(ei)[1] == 400
    assert not nfs.exists(f"{bucket}/full")
    # a non-empty directory lists its entries, not itself
    s3.put_object(Bucket=bucket, Key="m/child", Body=b"c")
    assert keys(s3, bucket) == (["m/child"], [])
    # the marker made it explicit: deleting the last child keeps it
    s3.delete_object(Bucket=bucket, Key="m/child")
    assert nfs.stat(f"{bucket}/m")["type"] == NF_DIR
    assert keys(s3, bucket) == (["m/"], [])
    s3.delete_object(Bucket=bucket, Key="m/")
    assert not nfs.exists(f"{bucket}/m")
    assert keys(s3, bucket) == ([], [])


def test_nfs_mkdir_is_marker(s3, nfs, bucket):
    nfs.mkdirs(f"{bucket}/empty/deeper")
    assert keys(s3, bucket) == (["empty/deeper/"], [])
    assert keys(s3, bucket, "empty/", "/") == ([], ["empty/deeper/"])
    assert keys(s3, bucket, "empty/deeper/", "/") == (["empty/deeper/"], [])
    assert s3.head_object(Bucket=bucket, Key="empty/deeper/")["ContentLength"] == 0
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.get_object(Bucket=bucket, Key="empty/deeper")
    assert s3_error(ei) == ("NoSuchKey", 404)
    # S3 deletes the marker of an empty NFS directory: the directory goes
    s3.delete_object(Bucket=bucket, Key="empty/deeper/")
    assert not nfs.exists(f"{bucket}/empty/deeper")
    assert nfs.exists(f"{bucket}/empty"), "NFS-made parent is explicit: it stays"
    assert keys(s3, bucket) == (["empty/"], [])


def test_delete_marker_of_non_empty_directory(s3, nfs, bucket):
    """Deleting `k/` while `k/x` exists cannot remove the directory: 409, nothing lost."""
    s3.put_object(Bucket=bucket, Key="k/", Body=b"")
    s3.put_object(Bucket=bucket, Key="k/x", Body=b"x")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.delete_object(Bucket=bucket, Key="k/")
    assert s3_error(ei)[1] == 409
    assert nfs.get(f"{bucket}/k/x") == b"x"
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k/"}, {"Key": "k/x"}]})
    # batch order matters as in a file system: k/ first fails, k/x succeeds
    assert [e["Key"] for e in r.get("Errors", [])] == ["k/"]
    assert [e["Key"] for e in r.get("Deleted", [])] == ["k/x"]
    assert keys(s3, bucket) == (["k/"], [])


def test_implicit_parents_come_and_go(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="i1/i2/i3/obj", Body=b"1")
    s3.put_object(Bucket=bucket, Key="i1/side", Body=b"2")
    s3.delete_object(Bucket=bucket, Key="i1/i2/i3/obj")
    assert not nfs.exists(f"{bucket}/i1/i2"), "implicit i2, i3 removed with their last child"
    assert nfs.exists(f"{bucket}/i1/side")
    s3.delete_object(Bucket=bucket, Key="i1/side")
    assert nfs.listdir(bucket) == []
    assert keys(s3, bucket) == ([], [])

    # NFS-made directories are explicit and stay; implicit ones below them go
    nfs.mkdirs(f"{bucket}/n1")
    s3.put_object(Bucket=bucket, Key="n1/i/obj", Body=b"3")
    s3.delete_object(Bucket=bucket, Key="n1/i/obj")
    assert not nfs.exists(f"{bucket}/n1/i")
    assert nfs.exists(f"{bucket}/n1")
    assert keys(s3, bucket) == (["n1/"], [])

    # a marker PUT on an implicit directory makes it explicit
    s3.put_object(Bucket=bucket, Key="p/q/obj", Body=b"4")
    s3.put_object(Bucket=bucket, Key="p/q/", Body=b"")
    s3.delete_object(Bucket=bucket, Key="p/q/obj")
    assert nfs.exists(f"{bucket}/p/q")
    assert keys(s3, bucket, "p/") == (["p/q/"], [])


def test_implicit_directory_with_nfs_content(s3, nfs, bucket):
    """An implicit directory that NFS also uses stays while it has entries; NFS
    removing the last entry leaves it (NFS never removes a parent): it then lists
    as an empty directory `k/`, and an S3 delete of that marker removes it."""
    s3.put_object(Bucket=bucket, Key="imp/s3obj", Body=b"1")
    nfs.put(f"{bucket}/imp/nfsfile", b"2")
    s3.delete_object(Bucket=bucket, Key="imp/s3obj")
    assert nfs.exists(f"{bucket}/imp/nfsfile")
    nfs.unlink(f"{bucket}/imp/nfsfile")
    assert nfs.stat(f"{bucket}/imp")["type"] == NF_DIR
    assert keys(s3, bucket) == (["imp/"], [])
    s3.delete_object(Bucket=bucket, Key="imp/")
    assert nfs.listdir(bucket) == []


def test_clash_file_then_directory(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="f", Body=b"file")
    for k in ("f/", "f/g", "f/g/h"):
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.put_object(Bucket=bucket, Key=k, Body=b"")
        clash(ei)
    assert nfs.mkdir(nfs.fh(bucket), "f")[0] == rpc3.NFS3ERR_EXIST
    # NFS file, S3 directory
    nfs.put(f"{bucket}/nf", b"nfs file")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object(Bucket=bucket, Key="nf/below", Body=b"x")
    clash(ei)
    # copy and multipart land on the same rule
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.copy_object(Bucket=bucket, Key="f/copy", CopySource={"Bucket": bucket, "Key": "nf"})
    clash(ei)
    up = s3.create_multipart_upload(Bucket=bucket, Key="f/mpu")
    p = s3.upload_part(Bucket=bucket, Key="f/mpu", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"p" * 100)
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.complete_multipart_upload(Bucket=bucket, Key="f/mpu", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                 "ETag": p["ETag"]}]})
    clash(ei)
    assert nfs.get(f"{bucket}/f") == b"file" and nfs.get(f"{bucket}/nf") == b"nfs file"
    assert keys(s3, bucket) == (["f", "nf"], [])


def test_clash_directory_then_file(s3, nfs, bucket):
    s3.put_object(Bucket=bucket, Key="d/x", Body=b"x")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object(Bucket=bucket, Key="d", Body=b"would hide d/")
    clash(ei)
    assert nfs.create(nfs.fh(bucket), "d", how=1)[0] == rpc3.NFS3ERR_EXIST
    nfs.mkdirs(f"{bucket}/nd")
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        s3.put_object(Bucket=bucket, Key="nd", Body=b"x")
    clash(ei)
    s3.put_object(Bucket=bucket, Key="marker/", Body=b"")
    assert nfs.create(nfs.fh(bucket), "marker", how=1)[0] == rpc3.NFS3ERR_EXIST
    # NFS rename: file over directory and directory over file are refused
    nfs.put(f"{bucket}/plain", b"p")
    with pytest.raises(NfsError) as ei:
        nfs.rename(f"{bucket}/plain", f"{bucket}/nd")
    assert ei.value.status in (rpc3.NFS3ERR_EXIST, 21)  # ISDIR
    with pytest.raises(NfsError) as ei:
        nfs.rename(f"{bucket}/nd", f"{bucket}/plain")
    assert ei.value.status in (rpc3.NFS3ERR_EXIST, rpc3.NFS3ERR_NOTDIR)
    assert keys(s3, bucket) == (["d/x", "marker/", "nd/", "plain"], [])


def test_hard_link_is_one_object_under_two_keys(s3, nfs, bucket):
    nfs.mkdirs(f"{bucket}/sub")
    data = b"hard link content " * 1000
    nfs.put(f"{bucket}/orig", data)
    nfs.link(f"{bucket}/orig", f"{bucket}/sub/alias")
    assert nfs.stat(f"{bucket}/orig")["nlink"] == 2
    k, _, objs = s3_list_all(s3, bucket)
    assert k == ["orig", "sub/alias"]
    assert objs["orig"]["ETag"] == objs["sub/alias"]["ETag"] == f'"{md5(data)}"' or \
        s3.head_object(Bucket=bucket, Key="orig")["ETag"] == \
        s3.head_object(Bucket=bucket, Key="sub/alias")["ETag"] == f'"{md5(data)}"'
    for key in ("orig", "sub/alias"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    # an NFS write through one name shows under both keys
    fh = nfs.fh(f"{bucket}/sub/alias")
    nfs.write_all(fh, 0, b"HARD")
    for key in ("orig", "sub/alias"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"HARD" + data[4:]
    # an S3 PUT replaces the key with a new object: the other name keeps the old one
    s3.put_object(Bucket=bucket, Key="orig", Body=b"replaced")
    assert nfs.get(f"{bucket}/sub/alias") == b"HARD" + data[4:]
    assert nfs.stat(f"{bucket}/sub/alias")["nlink"] == 1
    # S3 delete of one name leaves the other
    nfs.link(f"{bucket}/sub/alias", f"{bucket}/again")
    s3.delete_object(Bucket=bucket, Key="again")
    assert nfs.stat(f"{bucket}/sub/alias")["nlink"] == 1
    assert s3.get_object(Bucket=bucket, Key="sub/alias")["Body"].read() == b"HARD" + data[4:]


def test_hard_link_across_buckets_refused(s3, nfs, bucket):
    other = bucket + "-o"
    s3.create_bucket(Bucket=other)
    nfs.put(f"{bucket}/f", b"x")
    with pytest.raises(NfsError) as ei:
        nfs.link(f"{bucket}/f", f"{other}/f")
    assert ei.value.status == rpc3.NFS3ERR_XDEV
    with pytest.raises(NfsError) as ei:
        nfs.rename(f"{bucket}/f", f"{other}/f")
    assert ei.value.status == rpc3.NFS3ERR_XDEV


def test_symlinks_are_hidden_from_s3(s3, nfs, bucket):
    nfs.put(f"{bucket}/target", b"t")
    nfs.mkdirs(f"{bucket}/dir")
    nfs.symlink(f"{bucket}/lnk", "target")
    nfs.symlink(f"{bucket}/dir/dlnk", "../target")
    nfs.symlink(f"{bucket}/dangling", "/etc/passwd")
    # "dir" is not empty (it holds a link), so it does not list as "dir/" but still
    # rolls up as a common prefix
    assert keys(s3, bucket) == (["target"], [])
    assert keys(s3, bucket, delimiter="/") == (["target"], ["dir/"])
    assert keys(s3, bucket, "dir/", "/") == ([], [])
    for k in ("lnk", "dir/dlnk", "dangling"):
        for call in (s3.head_object, s3.get_object):
            with pytest.raises(botocore.exceptions.ClientError) as ei:
                call(Bucket=bucket, Key=k)
            assert s3_error(ei)[1] == 404, (k, call.__name__)
        with pytest.raises(botocore.exceptions.ClientError) as ei:
            s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": k})
        assert s3_error(ei)[1] == 404
    # PUT at a link's key replaces the link with an object; DELETE removes the link
    s3.put_object(Bucket=bucket, Key="lnk", Body=b"now an object")
    assert nfs.stat(f"{bucket}/lnk")["type"] == NF_REG
    assert nfs.get(f"{bucket}/target") == b"t", "the link was replaced, not followed"
    s3.delete_object(Bucket=bucket, Key="dir/dlnk")
    assert not nfs.exists(f"{bucket}/dir/dlnk")
    nfs.symlink(f"{bucket}/lnk2", "target")
    # the links are still there for NFS
    assert nfs.readlink_fh(nfs.fh(f"{bucket}/lnk2")) == b"target"
    assert nfs.stat(f"{bucket}/dangling")["type"] == NF_LNK


def test_mount_a_bucket_directly(s3, nfs, d, bucket):
    s3.put_object(Bucket=bucket, Key="sub/obj", Body=b"mounted")
    for path, rel in ((f"/{bucket}", "sub/obj"), (f"/{bucket}/sub", "obj")):
        st, res = nfs.mnt(path)
        assert st == 0, f"MNT {path} -> {st}"
        fh = res[0]
        for name in rel.split("/"):
            st, fh = nfs.lookup(fh, name)
            assert st == 0
        assert nfs.read_fh(fh) == b"mounted"
