#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Dataset in through S3, out through NFS.

An inference/training pipeline's typical hand-off: a dataset of many small files
is uploaded with `aws s3 sync`, then a training job reads it over NFS.

  1. make N small files locally (class_XXX/sample_NNNNNN.bin, 512 B .. 32 KiB)
     and a SHA-256 manifest;
  2. `aws s3 sync` them to s3://BUCKET/dataset/;
  3. walk dataset/ over NFS: the same file names and sizes, and every file's
     SHA-256 over NFS equals the manifest;
  4. `aws s3 sync` again: nothing to upload (sizes and times agree);
  5. the other way: a job writes N/100 result files over NFS; `aws s3 sync`
     downloads them and they match.

Usage (credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY):
  dataset_sync.py --endpoint http://127.0.0.1:9000 --nfs-port 2049 --files 20000
  dataset_sync.py --endpoint ... --nfs-mount /mnt/s3nfs          (kernel NFS mount of "/")
Prints a JSON summary; exits 1 on any mismatch.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nfsaccess  # noqa: E402


def aws(args, cmd):
    env = dict(os.environ)
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    p = subprocess.run([args.aws, "--endpoint-url", args.endpoint] + cmd, env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"aws {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n"
                 f"{p.stderr[-2000:]}")
    return p.stdout


def make_dataset(root, n, seed):
    rng = random.Random(seed)
    manifest, total = {}, 0
    per_class = 200
    for i in range(n):
        rel = f"class_{i // per_class:03d}/sample_{i:06d}.bin"
        size = rng.choice([512, 1024, 4096, rng.randrange(512, 32768)])
        data = rng.randbytes(size)
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        manifest[rel] = (size, hashlib.sha256(data).hexdigest())
        total += size
    return manifest, total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    nfsaccess.add_args(p)
    p.add_argument("--files", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--aws", default="/usr/bin/aws")
    p.add_argument("--workdir", help="local scratch (default: a temp dir, removed after)")
    args = p.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="s3nfs-dataset-")
    src, dst = os.path.join(work, "src"), os.path.join(work, "dst")
    summary = {"files": args.files, "bucket": args.bucket}
    ok = True
    try:
        t = time.monotonic()
        manifest, total = make_dataset(src, args.files, args.seed)
        summary["bytes"] = total
        summary["generate_s"] = round(time.monotonic() - t, 2)

        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        if args.bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
            s3.create_bucket(Bucket=args.bucket)

        t = time.monotonic()
        aws(args, ["s3", "sync", "--only-show-errors", src, f"s3://{args.bucket}/dataset/"])
        dt = time.monotonic() - t
        summary["s3_sync_up_s"] = round(dt, 2)
        summary["s3_sync_up_files_per_s"] = round(args.files / dt, 1)

        nfs = nfsaccess.open_nfs(args)
        t = time.monotonic()
        seen = nfs.walk(f"{args.bucket}/dataset")
        want = {k: v[0] for k, v in manifest.items()}
        if seen != want:
            ok = False
            missing = sorted(set(want) - set(seen))[:5]
            extra = sorted(set(seen) - set(want))[:5]
            wrong = sorted(k for k in set(seen) & set(want) if seen[k] != want[k])[:5]
            summary["walk_mismatch"] = {"missing": missing, "extra": extra, "size": wrong}
        bad = [rel for rel, (_, h) in manifest.items()
               if nfs.sha256(f"{args.bucket}/dataset/{rel}") != h]
        dt = time.monotonic() - t
        summary["nfs_read_check_s"] = round(dt, 2)
        summary["nfs_read_files_per_s"] = round(args.files / dt, 1)
        summary["nfs_checksum_mismatches"] = len(bad)
        ok = ok and not bad

        out = aws(args, ["s3", "sync", src, f"s3://{args.bucket}/dataset/"])
        again = [line for line in out.splitlines() if line.startswith("upload:")]
        summary["second_sync_uploads"] = len(again)
        ok = ok and not again

        # the other way: results written over NFS, fetched with aws s3 sync
        m = max(1, args.files // 100)
        rng = random.Random(args.seed + 1)
        written = {}
        nfs.mkdirs(f"{args.bucket}/dataset/results")
        t = time.monotonic()
        for i in range(m):
            data = rng.randbytes(rng.randrange(1, 65536))
            nfs.write_file(f"{args.bucket}/dataset/results/r{i:05d}.out", [data])
            written[f"r{i:05d}.out"] = hashlib.sha256(data).hexdigest()
        summary["nfs_write_results_s"] = round(time.monotonic() - t, 2)
        nfs.close()
        aws(args, ["s3", "sync", "--only-show-errors", f"s3://{args.bucket}/dataset/results/",
                   dst])
        got = {}
        for f in os.listdir(dst):
            with open(os.path.join(dst, f), "rb") as fh:
                got[f] = hashlib.sha256(fh.read()).hexdigest()
        summary["results_via_s3_match"] = got == written
        ok = ok and got == written

        n = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket,
                                                                Prefix="dataset/"):
            n += page.get("KeyCount", 0)
        summary["listed_keys"] = n
        ok = ok and n == args.files + m
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    summary["ok"] = ok
    print(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
