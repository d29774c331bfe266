#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checkpoint out through NFS, picked up through S3.

A training job writes a multi-GiB checkpoint over NFS the safe way: into
ckpt.tmp, COMMIT (fsync), then rename over ckpt. An inference service polls the
key over S3 and loads each new checkpoint with parallel ranged GETs, as model
loaders do. The rename is atomic in the namespace, so the poller only ever sees
a whole checkpoint: old or new.

The writer embeds a 64-byte header (magic, version, body length, SHA-256 of the
body) so the poller can prove each checkpoint it loads is whole. Ranged GETs
carry If-Match with the ETag the poller started with: if the checkpoint is
replaced mid-load, a range answers 412 and the poller starts over on the new
version, instead of stitching two versions together.

Usage (credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY):
  checkpoint.py --endpoint http://127.0.0.1:9000 --nfs-port 2049 --size 4GiB --versions 3
  checkpoint.py --endpoint ... --nfs-mount /mnt/s3nfs            (kernel NFS mount of "/")
Prints a JSON summary; exits 1 if the poller loaded anything that was not whole,
or never loaded the last version.
"""
import argparse
import hashlib
import json
import os
import random
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nfsaccess  # noqa: E402

MAGIC = b"S3NFSCKP"
HDR = 64
CHUNK = 1 << 20


def parse_size(s):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower().removesuffix("ib").removesuffix("b")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def body_chunks(version, size, digest):
    """Deterministic pseudo-random body of @p size bytes, hashed as it is made."""
    base = random.Random(version).randbytes(CHUNK)
    off = 0
    while off < size:
        r = (off // CHUNK * 4099) % CHUNK
        c = (base[r:] + base[:r])[:min(CHUNK, size - off)]
        digest.update(c)
        off += len(c)
        yield c


def writer(args, nfs, state):
    d = f"{args.bucket}/{args.prefix}"
    nfs.mkdirs(d)
    body = args.size - HDR
    for v in range(1, args.versions + 1):
        h = hashlib.sha256()
        t = time.monotonic()
        # the header holds the body's digest: the body goes first, the header last
        nfs.write_file(f"{d}/ckpt.tmp", body_chunks(v, body, h), header_len=HDR,
                       header=lambda: (MAGIC + struct.pack(">QQ", v, body) +
                                       h.digest()).ljust(HDR, b"\0"))
        nfs.rename(f"{d}/ckpt.tmp", f"{d}/ckpt")
        dt = time.monotonic() - t
        state["written"].append({"version": v, "seconds": round(dt, 2),
                                 "MiB_per_s": round(args.size / dt / (1 << 20), 1)})
        state["last_written"] = v
        if args.interval:
            time.sleep(args.interval)


def load(args, s3, key, etag, size, path, stats):
    """Parallel ranged GETs with If-Match into @p path. @return True, or False if
    the object was replaced meanwhile (412) or vanished (404)."""
    import botocore.exceptions
    ranges = [(o, min(o + args.range_size, size) - 1) for o in range(0, size, args.range_size)]
    lock = threading.Lock()
    failed = []

    def worker():
        with open(path, "r+b") as f:
            while not failed:
                with lock:
                    if not ranges:
                        return
                    a, b = ranges.pop()
                try:
                    r = s3.get_object(Bucket=args.bucket, Key=key, Range=f"bytes={a}-{b}",
                                      IfMatch=etag)
                    body = r["Body"]
                    f.seek(a)
                    for c in iter(lambda: body.read(CHUNK), b""):
                        f.write(c)
                except botocore.exceptions.ClientError as e:
                    code = e.response["Error"]["Code"]
                    failed.append(code)
                    with lock:
                        stats["412" if code in ("PreconditionFailed", "412") else "404"] += 1
                    return

    with open(path, "wb") as f:
        f.truncate(size)
    ts = [threading.Thread(target=worker) for _ in range(args.streams)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return not failed


def verify(path, size):
    """(version, whole) of a loaded checkpoint file."""
    with open(path, "rb") as f:
        hdr = f.read(HDR)
        if len(hdr) < HDR or hdr[:8] != MAGIC:
            return None, False
        v, blen = struct.unpack(">QQ", hdr[8:24])
        h = hashlib.sha256()
        for c in iter(lambda: f.read(1 << 22), b""):
            h.update(c)
    return v, blen == size - HDR and h.digest() == hdr[24:56]


def poller(args, s3, state, stop):
    import botocore.exceptions
    key = f"{args.prefix}/ckpt"
    path = os.path.join(args.workdir, "loaded.ckpt")
    last = None
    stats = state["poller"]
    while not stop.is_set():
        try:
            h = s3.head_object(Bucket=args.bucket, Key=key)
        except botocore.exceptions.ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                if state["last_written"]:
                    stats["404"] += 1  # should never happen once ckpt exists
                time.sleep(0.05)
                continue
            raise
        if h["ETag"] == last:
            if state["last_written"] == args.versions and state["loaded"] and \
                    state["loaded"][-1]["version"] == args.versions:
                return
            time.sleep(0.05)
            continue
        t = time.monotonic()
        if not load(args, s3, key, h["ETag"], h["ContentLength"], path, stats):
            continue  # replaced or vanished mid-load: look again
        dt = time.monotonic() - t
        v, whole = verify(path, h["ContentLength"])
        state["loaded"].append({"version": v, "whole": whole, "etag": h["ETag"].strip('"'),
                                "seconds": round(dt, 2),
                                "MiB_per_s": round(h["ContentLength"] / dt / (1 << 20), 1)})
        last = h["ETag"]
    if os.path.exists(path):
        os.unlink(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    nfsaccess.add_args(p)
    p.add_argument("--prefix", default="train-run")
    p.add_argument("--size", type=parse_size, default=parse_size("4GiB"))
    p.add_argument("--versions", type=int, default=3)
    p.add_argument("--interval", type=float, default=0.0, help="seconds between checkpoints")
    p.add_argument("--streams", type=int, default=8, help="parallel ranged GETs")
    p.add_argument("--range-size", type=parse_size, default=parse_size("64MiB"))
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--workdir", default=tempfile.gettempdir())
    args = p.parse_args()
    if args.size <= HDR:
        sys.exit("--size must exceed 64 bytes")

    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"},
                                    max_pool_connections=args.streams + 2))
    if args.bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=args.bucket)
    nfs = nfsaccess.open_nfs(args)
    state = {"written": [], "loaded": [], "last_written": 0,
             "poller": {"412": 0, "404": 0}}
    stop = threading.Event()
    errors = []

    def run_poller():
        try:
            poller(args, s3, state, stop)
        except Exception as e:  # noqa: BLE001 - reported in the summary
            errors.append(f"poller: {type(e).__name__}: {e}")

    pt = threading.Thread(target=run_poller)
    pt.start()
    try:
        writer(args, nfs, state)
    except Exception as e:  # noqa: BLE001 - reported in the summary
        errors.append(f"writer: {type(e).__name__}: {e}")
        stop.set()
    pt.join(args.timeout)
    stop.set()
    pt.join()
    nfs.close()
    loaded = state["loaded"]
    ok = (not errors and bool(loaded) and all(x["whole"] for x in loaded) and
          loaded[-1]["version"] == args.versions)
    head = s3.head_object(Bucket=args.bucket, Key=f"{args.prefix}/ckpt")
    summary = {"size": args.size, "versions": args.versions, "written": state["written"],
               "loaded": loaded, "restarts_on_412": state["poller"]["412"],
               "not_found_after_first_checkpoint": state["poller"]["404"],
               "final_etag": head["ETag"].strip('"'), "final_size": head["ContentLength"],
               "errors": errors, "ok": ok}
    print(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
