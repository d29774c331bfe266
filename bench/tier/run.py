#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/tier: the tier's S3 client against `aws s3 cp`, same remote, same file.

A one-node Ceph RGW on loopback (tests/integration/rgw.py) is the remote.
One file of --size bytes (random) is
  (a) uploaded by tier_s3_tool (multipart, --parallel parts of --part-size)
      and by `aws s3 cp` (same part size and concurrency), and
  (b) downloaded by tier_s3_tool (parallel ranged GETs) and by `aws s3 cp`.
Each is timed --runs times (best kept); the script prints MB/s and the
ratio tier/aws (> 1: the tier client is faster). The downloads are checked
against the file. This is the skeleton of issue 12's bench (a)/(b), which
will later go through the daemon (upload after the stability delay, recall
of an evicted file); the default size is small, use --size 1G (or 4G) for
real numbers. Needs the build (tier_s3_tool), the ceph packages and awscli
(scripts/deps.sh --test).

    bench/tier/run.py [--size 256M] [--part-size 16M] [--parallel 8] [--runs 1]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import rgw as rgwmod  # noqa: E402

BUILD = os.environ.get("S3NFS_BUILD", os.path.join(TOP, "build"))
TOOL = os.path.join(BUILD, "tests", "integration", "tier", "tier_s3_tool")


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def timed(cmd, env):
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    dt = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"bench/tier: {' '.join(cmd[:3])}... failed:\n{r.stdout[-2000:]}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--part-size", type=size_arg, default=size_arg("16M"))
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    if not os.access(TOOL, os.X_OK):
        sys.exit(f"bench/tier: {TOOL} not built (scripts/build.sh build)")
    aws = shutil.which("aws", path="/usr/bin") or shutil.which("aws")
    if not aws:
        sys.exit("bench/tier: awscli missing (scripts/deps.sh --test)")
    why = rgwmod.ensure_installed()
    if why:
        sys.exit(f"bench/tier: no Ceph RGW: {why}")

    work = tempfile.mkdtemp(prefix="bench-tier-")
    r = rgwmod.Rgw(os.path.join(work, "rgw"), memstore_bytes=max(4 << 30, 3 * a.size + (1 << 30)))
    try:
        r.start()
        s3 = r.boto3()
        s3.create_bucket(Bucket="bench")
        src = os.path.join(work, "file")
        with open(src, "wb") as f:
            left = a.size
            while left:
                n = min(left, 16 << 20)
                f.write(os.urandom(n))
                left -= n
        want = sha(src)
        env = dict(os.environ, TIER_S3_ENDPOINT=r.endpoint, TIER_S3_BUCKET="bench",
                   TIER_S3_ACCESS_KEY=r.access_key, TIER_S3_SECRET_KEY=r.secret_key,
                   AWS_ACCESS_KEY_ID=r.access_key, AWS_SECRET_ACCESS_KEY=r.secret_key,
                   AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.path.join(work, "awscfg"))
        with open(env["AWS_CONFIG_FILE"], "w") as f:
            f.write(f"[default]\nregion = us-east-1\ns3 =\n"
                    f"    max_concurrent_requests = {a.parallel}\n"
                    f"    multipart_chunksize = {a.part_size}\n"
                    f"    multipart_threshold = {a.part_size}\n"
                    f"    addressing_style = path\n")
        tool = [TOOL, "--max-conns", str(a.parallel)]
        awsc = [aws, "--endpoint-url", r.endpoint, "--only-show-errors", "s3", "cp"]
        best = {}
        for _ in range(a.runs):
            for name, cmd in (
                    ("tier put", tool + ["mpu-put", "t", src, "--part-size", str(a.part_size),
                                         "--parallel", str(a.parallel)]),
                    ("aws put", awsc + [src, "s3://bench/a"]),
                    ("tier get", tool + ["pget", "t", src + ".t", "--part-size",
                                         str(a.part_size), "--parallel", str(a.parallel)]),
                    ("aws get", awsc + ["s3://bench/a", src + ".a"])):
                dt = timed(cmd, env)
                best[name] = min(dt, best.get(name, dt))
        for f in (src + ".t", src + ".a"):
            if sha(f) != want:
                sys.exit(f"bench/tier: {f} differs from what was uploaded")
        mb = a.size / 1e6
        print(f"bench/tier: {a.size >> 20} MiB, parts of {a.part_size >> 20} MiB, "
              f"{a.parallel} in parallel, remote Ceph RGW on loopback, best of {a.runs}")
        print(f"{'':14}{'tier MB/s':>12}{'aws MB/s':>12}{'ratio':>8}")
        for op in ("put", "get"):
            t, w = mb / best[f"tier {op}"], mb / best[f"aws {op}"]
            print(f"{'(a) upload' if op == 'put' else '(b) download':14}{t:12.1f}{w:12.1f}"
                  f"{t / w:8.2f}")
    finally:
        r.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
