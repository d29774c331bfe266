#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/tier/daemon.py: the daemon's own upload and recall against `aws s3 cp`.

A one-node Ceph RGW on loopback (tests/integration/rgw.py) is the remote of a
tiered bucket of an s3nfsd started here (tests/integration/s3nfsd_harness.py).
One file of --size random bytes is PUT into the bucket, then:
  (a) upload: a flush barrier, timed until the daemon's uploader has copied the
      file (multipart, the remote's `parallel` parts in flight), against
      `aws s3 cp` of the same file to the same RGW (same part size and
      concurrency);
  (b) recall: the file is evicted (evict_after_s=1), then read whole by an S3
      GET (boto3, streamed) and, evicted again, by NFS READs of 1 MiB in order
      (the test suite's raw RPC client, one call at a time), each timed, against
      `aws s3 cp` of the remote object to a local file;
  (c) time to the first byte of a GET of the evicted file against a GET of the
      same file once local.
Prints MB/s (or ms) and the ratios daemon/aws (> 1: the daemon is faster; for
(c) recall/local). The reads are checked against the file. The S3 GET's reader
hashes every byte with SHA-256 in Python (about 1 ms of CPU per MiB on the same
cores as the servers) where `aws s3 cp` only writes a file, so a fairer row
reads the remote object from RGW with that very reader (same client, one GET):
"(b) same reader from RGW". Then, per read, the CPU per MiB of the daemon, of
RGW and of the client (user + system, /proc and getrusage) and the daemon's
page faults per GiB (minflt): on a shared machine steadier than MB/s. With --runs N every
measurement is taken N times, the daemon's and aws's in turn (the file is PUT
again before each upload, so each run uploads a new content), and the best of
each is kept: on a shared machine, one run says little. The default size is
small for shared disks; use --size 4G for the issue's figures (RGW's memstore
then needs (2 * runs + 1) * size of RAM, which at 4G squeezes the page cache
and slows every reader: --osd bluestore keeps RGW's copies on a sparse file in
the work folder instead, deleted at the end).

    bench/tier/daemon.py [--size 256M] [--part-size 16M] [--parallel 8] [--runs 1]
                         [--recall-chunk 8M] [--osd memstore|bluestore]
"""
import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "tenants"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "nfs"))
BUILD = os.environ.get("S3NFS_BUILD", os.path.join(TOP, "build"))
os.environ.setdefault("S3NFSD_BIN", os.path.join(BUILD, "s3nfsd"))
import rgw as rgwmod  # noqa: E402
from s3nfsd_harness import Daemon  # noqa: E402
from tenutil import Admin, Nfs  # noqa: E402


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def proc_stat(pid):
    """(CPU seconds, user + system; minor page faults) of process @pid."""
    with open(f"/proc/{pid}/stat") as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK"), int(x[7])


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wait_for(pred, timeout, step=0.05, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(step)
    sys.exit(f"bench/tier: timed out waiting for {what}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--part-size", type=size_arg, default=size_arg("16M"))
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--recall-chunk", type=size_arg, default=None,
                    help="the daemon's tier_recall_chunk_size (default: its own)")
    ap.add_argument("--osd", choices=("memstore", "bluestore"), default="memstore",
                    help="RGW's OSD: memstore holds every copy in RAM; bluestore keeps "
                    "them on a sparse file in the work folder (for sizes RAM cannot hold)")
    a = ap.parse_args()
    aws = shutil.which("aws", path="/usr/bin") or shutil.which("aws")
    if not aws:
        sys.exit("bench/tier: awscli missing (scripts/deps.sh --test)")
    why = rgwmod.ensure_installed()
    if why:
        sys.exit(f"bench/tier: no Ceph RGW: {why}")
    work = tempfile.mkdtemp(prefix="bench-tier-d-")
    need = (2 * a.runs + 1) * a.size + (1 << 30)
    r = rgwmod.Rgw(os.path.join(work, "rgw"), memstore_bytes=max(4 << 30, need), osd=a.osd,
                   bluestore_bytes=max(4 << 30, need + need // 2))
    dfile = max(1 << 30, 2 * a.size + (256 << 20))
    extra = ["--set", f"tier_recall_chunk_size={a.recall_chunk}"] if a.recall_chunk else []
    d = Daemon(os.path.join(work, "s3nfsd"),
               ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=100",
                "--set", f"tier_part_size={a.part_size}", "--set", f"data_file_size={dfile}",
                "--set", f"tier_recall_threads={a.parallel}"] + extra)
    os.makedirs(d.data_dir, exist_ok=True)
    try:
        r.start()
        d.start()
        rs3 = r.boto3()
        rs3.create_bucket(Bucket="bench")
        src = os.path.join(work, "file")
        h = hashlib.sha256()
        with open(src, "wb") as f:
            left = a.size
            while left:
                n = min(left, 16 << 20)
                blk = os.urandom(n)
                h.update(blk)
                f.write(blk)
                left -= n
        want = h.hexdigest()
        adm = Admin(d)
        rem = adm.post("/remotes", {"name": "bench", "endpoint": r.endpoint, "bucket": "bench",
                                    "access_key": r.access_key, "secret_key": r.secret_key,
                                    "prefix": "d/", "parallel": a.parallel,
                                    "max_conns": max(16, a.parallel * 2)})
        b = "b" + uuid.uuid4().hex[:8]
        s3 = d.boto3()
        s3.create_bucket(Bucket=b)
        pol = {"remote": rem["id"], "upload_after_s": 3600}
        adm.put(f"/tenants/1/buckets/{b}/tier", pol)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=r.access_key,
                   AWS_SECRET_ACCESS_KEY=r.secret_key, AWS_DEFAULT_REGION="us-east-1",
                   AWS_CONFIG_FILE=os.path.join(work, "awscfg"))
        with open(env["AWS_CONFIG_FILE"], "w") as f:
            f.write(f"[default]\nregion = us-east-1\ns3 =\n"
                    f"    max_concurrent_requests = {a.parallel}\n"
                    f"    multipart_chunksize = {a.part_size}\n"
                    f"    multipart_threshold = {a.part_size}\n"
                    f"    addressing_style = path\n")
        awsc = [aws, "--endpoint-url", r.endpoint, "--only-show-errors", "s3", "cp"]

        def state():
            hh = s3.head_object(Bucket=b, Key="f")["ResponseMetadata"]["HTTPHeaders"]
            return hh.get("x-s3nfs-tier-state")

        def daemon_upload():
            with open(src, "rb") as f:
                s3.upload_fileobj(f, b, "f")
            wait_for(lambda: state() == "local", 30, what="the uploader's pass")
            t0 = time.monotonic()
            bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush")[1]["barrier"]
            wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
                     3600, step=0.02, what="the upload")
            return time.monotonic() - t0

        def aws_cp(frm, to):
            t0 = time.monotonic()
            subprocess.run(awsc + [frm, to], env=env, check=True)
            return time.monotonic() - t0

        def evict():
            adm.put(f"/tenants/1/buckets/{b}/tier", dict(pol, evict_after_s=1))
            wait_for(lambda: state() == "evicted", 600, step=0.1, what="the eviction")
            adm.put(f"/tenants/1/buckets/{b}/tier", pol)  # no eviction during a read

        def s3_read(cli=None, bucket=None, key="f"):
            t = time.monotonic()
            body = (cli or s3).get_object(Bucket=bucket or b, Key=key)["Body"]
            hh, first = hashlib.sha256(), None
            for chunk in body.iter_chunks(1 << 20):
                if first is None:
                    first = time.monotonic() - t
                hh.update(chunk)
            if hh.hexdigest() != want:
                sys.exit("bench/tier: an S3 GET gave other bytes")
            return time.monotonic() - t, first

        def nfs_read():
            t0 = time.monotonic()
            hh = hashlib.sha256()
            with Nfs(d) as n:
                st, root = n.mount("/")
                st, bfh = n.lookup(root, b)
                st, fh = n.lookup(bfh, "f")
                off = 0
                while off < a.size:
                    st, res = n.read(fh, off, 1 << 20)
                    if st == 10008:  # JUKEBOX: the range is not back yet
                        time.sleep(0.05)
                        continue
                    if st != 0:
                        sys.exit(f"bench/tier: NFS READ at {off}: status {st}")
                    hh.update(res[0])
                    off += len(res[0])
            if hh.hexdigest() != want:
                sys.exit("bench/tier: the NFS reads gave other bytes")
            return time.monotonic() - t0

        best = {}
        cpu = {}  # per read: [daemon ms/MiB, daemon faults/GiB, RGW ms/MiB, client ms/MiB]
        mib = a.size / (1 << 20)
        rgw_pids = [p.pid for _, p, _ in r.procs]

        def note(name, t):
            best.setdefault(name, []).append(t)

        def measured(name, fn):
            """Run @fn, noting the CPU per MiB of the daemon, RGW and this client
            (in-process readers) or aws (a child), and the daemon's faults per GiB."""
            d0, g0 = proc_stat(d.proc.pid), sum(proc_stat(p)[0] for p in rgw_pids)
            p0, c0 = time.process_time(), children_cpu()
            out = fn()
            d1, g1 = proc_stat(d.proc.pid), sum(proc_stat(p)[0] for p in rgw_pids)
            cl = time.process_time() - p0 + children_cpu() - c0
            row = [(d1[0] - d0[0]) * 1000 / mib, (d1[1] - d0[1]) * 1024 / mib,
                   (g1 - g0) * 1000 / mib, cl * 1000 / mib]
            cpu.setdefault(name, []).append(row)
            return out

        for _ in range(a.runs):
            # (a) the daemon's upload, then aws's of the same bytes
            note("up", daemon_upload())
            note("aws up", aws_cp(src, "s3://bench/aws"))
            # (c) local first byte; (b) aws's download, the same reader as the recall's
            # from RGW, the S3 recall and its first byte, the NFS recall
            note("ttfb local", s3_read()[1])
            note("aws get", measured("aws get", lambda: aws_cp("s3://bench/d/f", src + ".aws")))
            os.unlink(src + ".aws")
            note("rgw get", measured("rgw get", lambda: s3_read(rs3, "bench", "d/f"))[0])
            evict()
            t_get, ttfb = measured("get", s3_read)
            note("get", t_get)
            note("ttfb recall", ttfb)
            evict()
            note("nfs", measured("nfs", nfs_read))
        t_up, t_aws_up, t_get, t_aws_get, t_nfs = (
            min(best[k]) for k in ("up", "aws up", "get", "aws get", "nfs"))
        ttfb_local, ttfb_recall = min(best["ttfb local"]), min(best["ttfb recall"])
        mb = a.size / 1e6
        print(f"bench/tier (daemon): {a.size >> 20} MiB, parts of {a.part_size >> 20} MiB, "
              f"{a.parallel} in parallel, remote Ceph RGW on loopback, best of {a.runs}")
        print(f"{'':24}{'s3nfsd MB/s':>12}{'aws MB/s':>10}{'ratio':>8}")
        for name, t, w in (("(a) upload", t_up, t_aws_up), ("(b) recall, S3 GET", t_get, t_aws_get),
                           ("(b) recall, NFS READ", t_nfs, t_aws_get)):
            print(f"{name:24}{mb / t:12.1f}{mb / w:10.1f}{w / t:8.2f}")
        t_rgw = min(best["rgw get"])
        print(f"{'(b) same reader from RGW':24}{mb / t_get:12.1f}{mb / t_rgw:10.1f}"
              f"{t_rgw / t_get:8.2f}  (boto3 + SHA-256 both sides)")
        print(f"(c) first byte: recall {ttfb_recall * 1000:.1f} ms, local "
              f"{ttfb_local * 1000:.1f} ms, ratio {ttfb_recall / ttfb_local:.1f}")
        print(f"CPU per MiB (ms) and daemon page faults per GiB, median of {a.runs}:")
        print(f"{'':28}{'s3nfsd':>8}{'faults/GiB':>12}{'RGW':>8}{'client':>8}")
        for name, what in (("aws get", "aws s3 cp from RGW"), ("rgw get", "same reader from RGW"),
                           ("get", "recall, S3 GET"), ("nfs", "recall, NFS READ")):
            rows = sorted(cpu[name])
            m = rows[len(rows) // 2]
            print(f"{what:28}{m[0]:8.2f}{m[1]:12.0f}{m[2]:8.2f}{m[3]:8.2f}")
    finally:
        d.stop()
        r.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
