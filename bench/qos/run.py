#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/qos: a noisy neighbour (checkpoint writer) against a dataset reader.

One s3nfsd, one tenant, two buckets:
  - the reader: --readers threads GET random samples of ~150 KB from bucket
    "dataset" (--samples objects, written first);
  - the writer: --writers writers, half over NFS (WRITE of 256 KiB, files in
    ckpt/run/), half over S3 (PUT of the whole object, keys ckpt/run/...),
    each --size bytes.
Three phases, the reader's rate in samples/s in each:
  1. solo: the reader alone for --secs seconds;
  2. noisy: the reader while the writer runs unthrottled;
  3. QoS: the reader while the writer runs with ckpt/run capped at --cap
     (a directory write cap) and bucket dataset (and its tenant) given a
     read minimum (--min).
Two checks: the reader with those policies set but no writer ("qos-0": what
admission itself costs), and solo again at the end (how much the shared
machine drifted meanwhile).
It prints the reader's rate in each, the ratio to solo (target: >= 0.90 in
phase 3) and the writer's achieved rate against its cap (target: +-5 %).
Readers and writers are separate processes (the client's own CPU would
otherwise be what they compete for); the S3 side uses presigned URLs over
keep-alive connections, so the client costs little. Everything the bench
creates is deleted (the daemon's data directory included).

    bench/qos/run.py [--writers 8] [--size 64M] [--readers 8] [--samples 400]
                     [--secs 10] [--cap 32M] [--min 32M]
    The issue's size: --size 256M.
"""
import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "nfs"))
sys.path.insert(0, os.path.join(TOP, "bench"))
from benchlib import Body, admin, http_conn, http_do, size_arg  # noqa: E402,F401

KiB, MiB = 1 << 10, 1 << 20
SAMPLE = 150 * 1000


# ---- the reader (its own process) ----

def reader_proc(urls, nthreads, secs, stop_evt, out_q):
    """Read random samples with @p nthreads threads for @p secs seconds, or until
    @p stop_evt is set if @p secs is 0. Puts (samples, bytes, seconds)."""
    done = [0] * nthreads
    nbytes = [0] * nthreads
    t0 = time.monotonic()

    def run(i):
        conns = {}
        rnd = random.Random(i)
        while True:
            if secs and time.monotonic() - t0 >= secs:
                break
            if not secs and stop_evt.is_set():
                break
            nbytes[i] += http_do(conns, rnd.choice(urls))
            done[i] += 1

    th = [threading.Thread(target=run, args=(i,)) for i in range(nthreads)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    out_q.put((sum(done), sum(nbytes), time.monotonic() - t0))


# ---- the writer (its own process) ----

def writer_proc(nfs_port, put_urls, nfs_names, size, out_q):
    """S3 writers PUT one object each; NFS writers write one file each in run/.
    Every writer first gets ready (S3: its connection; NFS: MOUNT, LOOKUPs,
    CREATE), then all start together: the writer's time runs from that common
    start to the end of the last one, so that it measures the server's
    admission, not the client's set-up (which, in one Python process next to
    a busy reader, took 1-2 s). Puts (bytes, seconds, errors)."""
    from rpc3 import RpcConn
    data = os.urandom(min(size, 8 * MiB))
    nthreads = len(put_urls) + len(nfs_names)
    ready = threading.Barrier(nthreads + 1)
    t0 = [0.0]
    ends = []
    errs = []
    ok = []

    def s3w(url):
        try:
            u = urllib.parse.urlsplit(url)
            conns = {u.netloc: http_conn(u.netloc)}
            conns[u.netloc].connect()
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(repr(e))
            ready.wait()
            return
        ready.wait()
        try:
            http_do(conns, url, "PUT", Body(data, size))
            ok.append(size)
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(repr(e))
        ends.append(time.monotonic())

    def nfsw(name):
        try:
            c = RpcConn(nfs_port, timeout=300)
            st, res = c.mnt("/")
            st, b = c.lookup(res[0], "ckpt")
            assert st == 0, st
            st, d = c.lookup(b, "run")
            assert st == 0, st
            st, fh = c.create(d, name)
            assert st == 0, st
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))
            ready.wait()
            return
        ready.wait()
        try:
            chunk = 256 * KiB
            for off in range(0, size, chunk):
                piece = data[off % len(data):off % len(data) + chunk]
                for _ in range(100):
                    st = c.write(fh, off, piece, stable=0)[0]
                    if st != 10008:  # NFS3ERR_JUKEBOX: QoS asked us to come back
                        break
                    time.sleep(0.05)
                assert st == 0, st
            c.close()
            ok.append(size)
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))
        ends.append(time.monotonic())

    th = [threading.Thread(target=s3w, args=(u,)) for u in put_urls]
    th += [threading.Thread(target=nfsw, args=(n,)) for n in nfs_names]
    for t in th:
        t.start()
    ready.wait()
    t0[0] = time.monotonic()
    for t in th:
        t.join()
    end = max(ends) if ends else time.monotonic()
    out_q.put((sum(ok), end - t0[0], errs))  # bytes of the writers that finished


def dir_admitted(d):
    """Write bytes admitted so far through directory-level policies (the
    daemon's metrics; 0 before one is set)."""
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=30) as r:
        text = r.read().decode()
    n = 0
    for ln in text.splitlines():
        if (ln.startswith("s3nfs_qos_admitted_bytes_total{") and 'level="dir"' in ln
                and 'class="write"' in ln):
            n += int(ln.rsplit(" ", 1)[1])
    return n


def phase(d, s3, a, urls, tag, writer):
    """Run the reader (and the writer if @p writer) and @return (reader samples/s,
    writer bytes/s or None)."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    stop = ctx.Event()
    wq = ctx.Queue()
    wp = None
    if writer:
        names = [f"{tag}-{i}" for i in range(a.writers)]
        s3n, nfsn = names[:a.writers // 2], names[a.writers // 2:]
        put_urls = [s3.generate_presigned_url("put_object", Params={"Bucket": "ckpt",
                                                                    "Key": f"run/{n}"},
                                              ExpiresIn=3600) for n in s3n]
        wp = ctx.Process(target=writer_proc, args=(d.nfs_port, put_urls, nfsn, a.size, wq))
    rp = ctx.Process(target=reader_proc,
                     args=(urls, a.readers, 0 if writer else a.secs, stop, q))
    rp.start()  # with a writer: the reader runs exactly as long as the writer
    if wp:
        wp.start()
    wres = None
    samples = []  # (time, bytes the directory level admitted), once a second
    if wp:
        done = threading.Event()

        def poll():
            while not done.wait(1.0 if samples else 0):
                samples.append((time.monotonic(), dir_admitted(d)))

        pt = threading.Thread(target=poll)
        pt.start()
        wres = wq.get()
        done.set()
        pt.join()
        wp.join()
        stop.set()
    n, nb, secs = q.get()
    rp.join()
    rate = n / secs
    if wres and wres[2]:
        print(f"  writer errors ({len(wres[2])}; their bytes are not counted): {wres[2][:3]}")
    if writer:  # checkpoints are rewritten, not kept: make room for the next phase
        for o in s3.list_objects_v2(Bucket="ckpt", Prefix="run/").get("Contents", []):
            if o["Key"] != "run/":
                s3.delete_object(Bucket="ckpt", Key=o["Key"])
    wbps = wres[0] / wres[1] if wres else None
    win = [(b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in zip(samples, samples[1:])][1:-1]
    if win and max(win) > 0:  # the first and last windows are partial
        win.sort()
        print(f"  {tag:6s}: server, directory level: 1 s windows median "
              f"{win[len(win) // 2] / MiB:.1f} MiB/s, min {win[0] / MiB:.1f}, max "
              f"{win[-1] / MiB:.1f} ({len(win)} windows)", flush=True)
    print(f"  {tag:6s}: reader {rate:8.1f} samples/s ({nb / secs / MiB:6.1f} MiB/s, {secs:5.1f} s)"
          + (f"; writer {wbps / MiB:6.1f} MiB/s ({wres[0] / MiB:.0f} MiB in {wres[1]:.1f} s)"
             if wres else ""), flush=True)
    return rate, wbps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--size", type=size_arg, default=size_arg("64M"))
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--secs", type=float, default=10)
    ap.add_argument("--cap", type=size_arg, default=size_arg("32M"))
    ap.add_argument("--min", type=size_arg, default=size_arg("32M"))
    ap.add_argument("--capacity-read", type=size_arg, default=0,
                    help="qos_capacity_read_bps (default 0: the daemon's start-up probe)")
    ap.add_argument("--capacity-iops", type=int, default=0,
                    help="qos_capacity_iops (default 0: the daemon's start-up probe)")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/var/tmp"),
                    help="parent of the work folder (default $BENCH_DIR or /var/tmp)")
    a = ap.parse_args()
    from s3nfsd_harness import Daemon
    tmp = tempfile.mkdtemp(prefix="bench-qos-", dir=a.dir)
    room = max(4 << 30, 2 * a.writers * a.size + (1 << 30))
    d = Daemon(tmp, ["--set", f"data_file_size={room >> 20}MiB",
                     "--set", f"qos_capacity_read_bps={a.capacity_read}",
                     "--set", f"qos_capacity_iops={a.capacity_iops}"])
    try:
        os.makedirs(d.data_dir, exist_ok=True)
        d.start()
        s3 = d.boto3()
        s3.create_bucket(Bucket="dataset")
        s3.create_bucket(Bucket="ckpt")
        s3.put_object(Bucket="ckpt", Key="run/", Body=b"")
        rnd = random.Random(1)
        for i in range(a.samples):
            s3.put_object(Bucket="dataset", Key=f"s/{i:06d}",
                          Body=rnd.randbytes(SAMPLE + rnd.randint(-20000, 20000)))
        urls = [s3.generate_presigned_url("get_object", Params={"Bucket": "dataset",
                                                                "Key": f"s/{i:06d}"},
                                          ExpiresIn=3600) for i in range(a.samples)]
        print(f"bench/qos: {a.readers} readers of {a.samples} samples of ~150 KB; writer "
              f"{a.writers} x {a.size / MiB:.0f} MiB (half NFS, half S3); cap {a.cap / MiB:.0f} "
              f"MiB/s on ckpt/run, minimum {a.min / MiB:.0f} MiB/s on dataset", flush=True)
        solo, _ = phase(d, s3, a, urls, "solo", False)
        noisy, wfree = phase(d, s3, a, urls, "noisy", True)
        admin(d, "PUT", "/tenants/1/qos", {"min_read_bps": a.min})
        admin(d, "PUT", "/tenants/1/buckets/dataset/qos", {"min_read_bps": a.min})
        admin(d, "PUT", "/tenants/1/buckets/ckpt/qos?dir=run", {"write_bps": a.cap, "burst_ms": 100})
        qidle, _ = phase(d, s3, a, urls, "qos-0", False)
        qos, wcap = phase(d, s3, a, urls, "qos", True)
        solo2, _ = phase(d, s3, a, urls, "solo-2", False)
        with open(d.log_path, errors="replace") as f:
            probe = [ln.strip() for ln in f if "capacity measured" in ln]
        if probe:
            print(f"  daemon: {probe[0][probe[0].index('QoS'):]}")
        print(f"bench/qos: reader solo {solo:.1f}/s; with the writer unthrottled {noisy:.1f}/s "
              f"({noisy / solo:.2f} of solo; writer {wfree / MiB:.1f} MiB/s); with QoS "
              f"{qos:.1f}/s ({qos / solo:.2f} of solo, target >= 0.90); writer "
              f"{wcap / MiB:.1f} MiB/s against a cap of {a.cap / MiB:.1f} "
              f"({wcap / a.cap:.3f}, target 0.95..1.05)")
        print(f"bench/qos: checks: the reader with the policies set and no writer {qidle:.1f}/s "
              f"({qidle / solo:.2f} of solo: the cost of admission); solo again at the end "
              f"{solo2:.1f}/s ({solo2 / solo:.2f} of the first: the machine's drift)")
    finally:
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
