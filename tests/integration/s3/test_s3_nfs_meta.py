# SPDX-License-Identifier: Apache-2.0
"""S3 metadata stays truthful when NFS rewrites an object: a stored additional
checksum is no longer returned (the content it covered is gone), while the
stored headers and user metadata survive and the ETag follows the content."""
import ctypes
import ctypes.util
import hashlib
import os

import pytest


class NfsUrl(ctypes.Structure):
    _fields_ = [("server", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("file", ctypes.c_char_p)]


def nfs_rewrite(d, path, data):
    name = ctypes.util.find_library("nfs")
    if not name:
        pytest.skip("libnfs not installed")
    lib = ctypes.CDLL(name)
    lib.nfs_init_context.restype = ctypes.c_void_p
    lib.nfs_parse_url_dir.restype = ctypes.POINTER(NfsUrl)
    lib.nfs_parse_url_dir.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nfs_mount.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.nfs_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_void_p)]
    lib.nfs_write.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p]
    lib.nfs_close.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.nfs_get_error.restype = ctypes.c_char_p
    lib.nfs_get_error.argtypes = [ctypes.c_void_p]
    lib.nfs_destroy_context.argtypes = [ctypes.c_void_p]
    nfs = lib.nfs_init_context()
    try:
        url = lib.nfs_parse_url_dir(nfs, d.nfs_url.encode())
        assert url, lib.nfs_get_error(nfs)
        assert lib.nfs_mount(nfs, b"127.0.0.1", b"/") == 0, lib.nfs_get_error(nfs)
        fh = ctypes.c_void_p()
        assert lib.nfs_open(nfs, path.encode(), os.O_WRONLY | os.O_TRUNC,
                            ctypes.byref(fh)) == 0, lib.nfs_get_error(nfs)
        assert lib.nfs_write(nfs, fh, len(data), data) == len(data), lib.nfs_get_error(nfs)
        assert lib.nfs_close(nfs, fh) == 0
    finally:
        lib.nfs_destroy_context(nfs)


def test_checksum_dropped_after_nfs_rewrite(s3nfsd):
    s3 = s3nfsd.boto3()
    s3.create_bucket(Bucket="xproto")
    s3.put_object(Bucket="xproto", Key="f.txt", Body=b"original", ChecksumAlgorithm="CRC32",
                  ContentType="text/x-kept", Metadata={"m": "kept"})
    assert s3.head_object(Bucket="xproto", Key="f.txt", ChecksumMode="ENABLED").get(
        "ChecksumCRC32")
    new = b"rewritten over NFS"
    nfs_rewrite(s3nfsd, "/xproto/f.txt", new)
    h = s3.head_object(Bucket="xproto", Key="f.txt", ChecksumMode="ENABLED")
    assert "ChecksumCRC32" not in h
    assert h["ETag"] == '"%s"' % hashlib.md5(new).hexdigest()
    assert h["ContentType"] == "text/x-kept" and h["Metadata"] == {"m": "kept"}
    g = s3.get_object(Bucket="xproto", Key="f.txt", ChecksumMode="ENABLED")
    assert g["Body"].read() == new
