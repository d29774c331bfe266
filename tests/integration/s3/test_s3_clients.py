# SPDX-License-Identifier: Apache-2.0
"""Stock S3 clients against s3nfsd: the aws cli (s3 and s3api, a >100 MiB
multipart upload), s3cmd and rclone, each with a success and a main failure."""
import hashlib
import os
import shutil
import subprocess

import pytest

AWS = "/usr/bin/aws"


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def aws(d, *args, check=True, tmp=None):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")
    r = subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, *args], env=env,
                       capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_s3(d, tmp_path):
    aws(d, "s3", "mb", "s3://cli-bucket")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(20000))
    aws(d, "s3", "cp", str(src / "a.txt"), "s3://cli-bucket/a.txt")
    aws(d, "s3", "sync", str(src), "s3://cli-bucket/synced/")
    out = aws(d, "s3", "ls", "--recursive", "s3://cli-bucket/").stdout
    assert "synced/sub/b.bin" in out and "a.txt" in out
    dst = tmp_path / "dst"
    aws(d, "s3", "sync", "s3://cli-bucket/synced/", str(dst))
    assert sha(dst / "sub" / "b.bin") == sha(src / "sub" / "b.bin")
    aws(d, "s3", "rm", "s3://cli-bucket/a.txt")
    r = aws(d, "s3", "cp", "s3://cli-bucket/a.txt", str(tmp_path / "x"), check=False)
    assert r.returncode != 0 and ("404" in r.stderr or "Not Found" in r.stderr)
    r = aws(d, "s3", "ls", "s3://no-such-cli-bucket", check=False)
    assert r.returncode != 0 and "NoSuchBucket" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_multipart_large(d, tmp_path):
    aws(d, "s3", "mb", "s3://cli-big")
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for _ in range(105):
            f.write(os.urandom(1 << 20))
    aws(d, "s3", "cp", str(big), "s3://cli-big/big.bin")  # multipart (8 MiB parts)
    head = aws(d, "s3api", "head-object", "--bucket", "cli-big", "--key", "big.bin").stdout
    assert '"ContentLength": 110100480' in head
    assert '-14\\""' in head or "-14" in head  # md5-of-md5s-N ETag
    back = tmp_path / "back.bin"
    aws(d, "s3", "cp", "s3://cli-big/big.bin", str(back))
    assert sha(back) == sha(big)


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_s3api(d, tmp_path):
    aws(d, "s3api", "create-bucket", "--bucket", "api-bucket")
    f = tmp_path / "f"
    f.write_bytes(b"s3api body")
    aws(d, "s3api", "put-object", "--bucket", "api-bucket", "--key", "k", "--body", str(f),
        "--metadata", "x=y")
    out = aws(d, "s3api", "head-object", "--bucket", "api-bucket", "--key", "k").stdout
    assert '"x": "y"' in out
    up = aws(d, "s3api", "create-multipart-upload", "--bucket", "api-bucket", "--key",
             "mp").stdout
    import json
    uid = json.loads(up)["UploadId"]
    part = json.loads(aws(d, "s3api", "upload-part", "--bucket", "api-bucket", "--key", "mp",
                          "--part-number", "1", "--upload-id", uid, "--body", str(f)).stdout)
    mpu = tmp_path / "mpu.json"
    mpu.write_text(json.dumps({"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}))
    aws(d, "s3api", "complete-multipart-upload", "--bucket", "api-bucket", "--key", "mp",
        "--upload-id", uid, "--multipart-upload", f"file://{mpu}")
    out = aws(d, "s3api", "list-objects-v2", "--bucket", "api-bucket").stdout
    assert '"Key": "mp"' in out and '"Key": "k"' in out
    r = aws(d, "s3api", "get-object", "--bucket", "api-bucket", "--key", "nope",
            str(tmp_path / "o"), check=False)
    assert r.returncode != 0 and "NoSuchKey" in r.stderr
    r = aws(d, "s3api", "delete-bucket", "--bucket", "api-bucket", check=False)
    assert r.returncode != 0 and "BucketNotEmpty" in r.stderr


def s3cmd(d, tmp_path, *args, check=True, v2=False):
    """Run s3cmd against @d (SigV4, or the legacy SigV2 with @v2)."""
    cfg = tmp_path / "s3cfg"
    host = d.s3_endpoint.split("//")[1]
    cfg.write_text(f"""[default]
access_key = {d.access_key}
secret_key = {d.secret_key}
host_base = {host}
host_bucket = {host}
use_https = False
signature_v2 = {v2}
bucket_location = us-east-1
check_ssl_certificate = False
""")
    r = subprocess.run(["s3cmd", "-c", str(cfg), *args], capture_output=True, text=True,
                       timeout=300)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.skipif(not shutil.which("s3cmd"), reason="s3cmd not installed")
def test_s3cmd(d, tmp_path):
    s3cmd(d, tmp_path, "mb", "s3://s3cmd-bucket")
    f = tmp_path / "file.bin"
    f.write_bytes(os.urandom(17 * 1024 * 1024))  # s3cmd multipart (15 MiB chunks)
    s3cmd(d, tmp_path, "put", str(f), "s3://s3cmd-bucket/dir/file.bin")
    out = s3cmd(d, tmp_path, "ls", "s3://s3cmd-bucket/dir/").stdout
    assert "file.bin" in out
    g = tmp_path / "got.bin"
    s3cmd(d, tmp_path, "get", "s3://s3cmd-bucket/dir/file.bin", str(g))
    assert sha(g) == sha(f)
    s3cmd(d, tmp_path, "del", "s3://s3cmd-bucket/dir/file.bin")
    r = s3cmd(d, tmp_path, "get", "s3://s3cmd-bucket/dir/file.bin", str(tmp_path / "n"),
              check=False)
    assert r.returncode != 0
    s3cmd(d, tmp_path, "rb", "s3://s3cmd-bucket")


def rclone(d, tmp_path, *args, check=True):
    cfg = tmp_path / "rclone.conf"
    cfg.write_text(f"""[s3n]
type = s3
provider = Other
access_key_id = {d.access_key}
secret_access_key = {d.secret_key}
endpoint = {d.s3_endpoint}
region = us-east-1
force_path_style = true
""")
    # AWS_CA_BUNDLE (set by some CI images) makes rclone's SDK refuse its own transport
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    r = subprocess.run(["rclone", "--config", str(cfg), *args], capture_output=True, text=True,
                       timeout=300, env=env)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.skipif(not shutil.which("rclone"), reason="rclone not installed")
def test_rclone(d, tmp_path):
    rclone(d, tmp_path, "mkdir", "s3n:rclone-bucket")
    src = tmp_path / "tree"
    (src / "x" / "y").mkdir(parents=True)
    for i in range(20):
        (src / "x" / "y" / f"f{i}").write_bytes(os.urandom(1000 + i))
    (src / "large").write_bytes(os.urandom(12 * 1024 * 1024))
    rclone(d, tmp_path, "copy", str(src), "s3n:rclone-bucket/tree")
    rclone(d, tmp_path, "check", str(src), "s3n:rclone-bucket/tree")
    out = rclone(d, tmp_path, "lsf", "-R", "s3n:rclone-bucket/tree").stdout
    assert "x/y/f19" in out and "large" in out
    back = tmp_path / "back"
    rclone(d, tmp_path, "sync", "s3n:rclone-bucket/tree", str(back))
    assert sha(back / "large") == sha(src / "large")
    rclone(d, tmp_path, "deletefile", "s3n:rclone-bucket/tree/large")
    rclone(d, tmp_path, "copyto", "s3n:rclone-bucket/tree/large", str(tmp_path / "gone"),
           check=False)
    assert not (tmp_path / "gone").exists()
    r = rclone(d, tmp_path, "ls", "s3n:no-such-rclone-bucket", check=False)
    assert r.returncode != 0
