#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/ai: three AI workload shapes through s3nfsd over a remote, cold and warm.

A one-node Ceph RGW on loopback (tests/integration/rgw.py) is the remote (bucket
"aibench"); an s3nfsd started here (tests/integration/s3nfsd_harness.py) fronts it.
NFS is libnfs (bench/benchlib.py: one context per thread, each pread/pwrite
larger than rsize/wsize goes out as several RPCs in flight); S3 is presigned
GETs from parallel threads over keep-alive connections.

  (1) model load: one file of --model-size read as --shards shards, each read
      in order by a thread of its own (8 MiB reads), over NFS and S3, cold
      (the bytes on the remote only) then warm (local), with preset
      MODEL_CHECKPOINT_RO and with NONE; against `aws s3 cp` and `rclone copy
      --multi-thread-streams 16` of the same remote object to a local file.
  (2) dataset: --samples samples of ~150 KB read once each in random order by
      --readers readers, over NFS and S3, cold then warm, DATASET_RO and NONE,
      in samples/s; against `rclone copy --transfers READERS` of the prefix.
      Each run first lists the sample directory as a data loader does (NFS
      READDIRPLUS, S3 ListObjectsV2 with delimiter /; timed with the run), which
      is what DATASET_RO's directory prefetch acts on; the output says what the
      prefetch recalled in each cold run (s3nfs_tier_prefetch_* before/after).
  (3) checkpoint: --ckpt-size bytes written over NFS by --writers writers in
      pieces of --piece (UNSTABLE WRITEs, COMMIT, RENAME from tmp/ into
      step/): the time until the last writer is acknowledged, and until the
      flush barrier set right then returns (everything on the remote); against
      `aws s3 cp --recursive` of the same bytes from local files to the remote.
      With --ckpt-rename dir, each writer leaves its shard in tmp/ and, once all
      are acknowledged, one RENAME moves tmp/ to step/ (the other common way
      to publish a checkpoint): shards uploaded under tmp/ meanwhile must then
      reach their step/ keys (a server-side copy, not a second upload).

The cold case: a bucket in **cache mode** over the remote prefix, pre-filled
with boto3 straight into RGW (names imported by one listing before the clock
starts; the bytes are fetched by the reads), when the daemon has cache mode
(PUT .../cache answers other than 404/405/501). Otherwise (cache mode not
built) a tiered bucket written through the daemon, uploaded (flush barrier)
and evicted; the output says which. Between runs, every file is evicted again
(evict_after_s = 1 until the bucket's counts show them all evicted). Presets
are set in the bucket's tier policy (`"preset"`) when the daemon knows them;
otherwise the preset rows print "n/a (presets not built)" and the runs use
the daemon's default behaviour (the one NONE names).

The shapes run one after the other; each deletes its objects on the remote
when done (and has RGW reclaim them), so RGW holds the largest shape at most.
RGW's OSD is memstore (RAM, about twice the stored bytes) when that needs at
most 6 GiB, else bluestore on a sparse file in the work folder (--osd,
--osd-size; the file grows as objects are written, 20 GiB at most by default).
Each shape prints the load average seen during it next to its figures, and
the CPU time s3nfsd, radosgw, the OSD and the client used in each run (ms per
MB or per sample): where the time went, whatever share of the cores it got.

Defaults finish in a few minutes on a small machine; the issue's sizes (a
bluestore OSD of 14 GiB, ~40 GiB of free disk checked first):
    bench/ai/run.py --model-size 8G --samples 20000 --ckpt-size 4G
Everything it creates is deleted (RGW's store, the daemon's data directory,
local copies), also on Ctrl-C, SIGTERM or SIGHUP, and by bench/reaper.py
when the bench itself is killed.

    bench/ai/run.py [--model-size 1G] [--shards 16] [--samples 2000] [--readers 8]
                    [--ckpt-size 512M] [--writers 8] [--piece 64M] [--ckpt-rename file|dir]
                    [--only model,dataset,ckpt] [--none-first] [--dir /var/tmp]
                    [--osd auto|memstore|bluestore] [--osd-size 14G]
                    [--daemon-set KEY=VALUE]... [--daemon-log PATH]
"""
import argparse
import ctypes
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "tenants"))
sys.path.insert(0, os.path.join(TOP, "bench"))
BUILD = os.environ.get("S3NFS_BUILD", os.path.join(TOP, "build"))
os.environ.setdefault("S3NFSD_BIN", os.path.join(BUILD, "s3nfsd"))
import rgw as rgwmod  # noqa: E402
from benchlib import MiB, Body, Nfs, NfsError, NfsLib, http_conn, http_do, size_arg  # noqa: E402
from reaper import Reaper  # noqa: E402
from s3nfsd_harness import Daemon  # noqa: E402
from tenutil import Admin  # noqa: E402

SAMPLE = 150 * 1000
READ = 8 * MiB  # one pread / ranged GET of the model load
PART = 16 * MiB  # the daemon's and aws's part size
NA_PRESET = "n/a (presets not built)"
MEMSTORE_MAX = 6 << 30  # --osd auto: memstore up to this (RAM ~2x it), then bluestore
BLUESTORE_MAX = 20 << 30  # the bluestore file's default size at most (a shared disk)


def log(msg):
    print(msg, flush=True)


def load():
    """The 1-minute load average (other work on the machine), as printed."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


HZ = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """CPU seconds (user + system) @p pid has used, or 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / HZ
    except (OSError, IndexError, ValueError):
        return 0.0


def proc_ctxsw(pid):
    """Voluntary context switches (waits: a thread blocked on a lock, a condition or
    I/O) of every thread @p pid has now (a thread that ended takes its count along),
    or 0 when it is gone. Involuntary ones are left out: they follow the load."""
    n = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for ln in f:
                    if ln.startswith("voluntary_ctxt_switches"):
                        n += int(ln.split()[1])
        except (OSError, ValueError):
            pass
    return n


class Cpu:
    """CPU seconds used during one timed run by s3nfsd, RGW's gateway and OSD, and
    the client (this bench's threads, or the tool it ran): where the time went,
    whatever share of the shared cores the run got; and s3nfsd's voluntary context
    switches ("cs": its threads' waits, on each other and on I/O)."""
    WHO = ("s3nfsd", "radosgw", "osd", "client")

    def __init__(self, bench):
        self.pids = {"s3nfsd": bench.d.proc.pid}
        for name, p, _ in bench.r.procs:
            if name.startswith("osd"):
                self.pids["osd"] = p.pid
            elif name.startswith("client.rgw"):
                self.pids["radosgw"] = p.pid

    def snap(self):
        t = os.times()
        v = {k: proc_cpu(p) for k, p in self.pids.items()}
        v["client"] = t.user + t.system + t.children_user + t.children_system
        v["cs"] = proc_ctxsw(self.pids["s3nfsd"])
        return v

    @staticmethod
    def diff(a, b):
        return {k: b[k] - a[k] for k in a}


def cpu_cols(c, unit):
    """@p c (CPU seconds by process) as ms per @p unit (MB, sample), then s3nfsd's
    voluntary context switches per @p unit."""
    if not c:
        return ""
    return (" ".join(f"{c.get(k, 0) * 1000 / unit:6.2f}" for k in Cpu.WHO)
            + f" {c.get('cs', 0) / unit:8.1f}")


class Loads:
    """The load averages seen during one shape (at its start, between its runs,
    at its end): printed next to its figures."""

    def __init__(self):
        self.seen = [os.getloadavg()[0]]

    def note(self):
        self.seen.append(os.getloadavg()[0])

    def __str__(self):
        return f"load {min(self.seen):.1f}-{max(self.seen):.1f}"


def wait_for(pred, timeout, step=0.1, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(step)
    sys.exit(f"bench/ai: timed out waiting for {what}")


class Repeat:
    """A read-only stream of @p size bytes: @p blk repeated (boto3's uploads; no
    file of the model's size is written)."""

    def __init__(self, blk, size):
        self.body = Body(blk, size)

    def read(self, n=-1):
        out = []  # whole reads: a short one would look like the end to s3transfer
        while n != 0:
            c = self.body.read(n)
            if not c:
                break
            out.append(bytes(c))
            n = n - len(c) if n > 0 else n
        return b"".join(out)


def retry_jukebox(fn, what):
    """NFS3ERR_JUKEBOX (the daemon asks to come back) is retried."""
    for _ in range(6000):
        try:
            return fn()
        except NfsError as e:
            if "JUKEBOX" not in str(e).upper() and "10008" not in str(e):
                raise
            time.sleep(0.05)
    raise NfsError(f"{what}: JUKEBOX for 5 minutes")


class Bench:
    def __init__(self, a, work, reaper):
        self.a, self.work, self.reaper = a, work, reaper
        self.lib = NfsLib()
        self.zero_reads = 0  # NFS READs that answered 0 bytes before the end (retried)

    # ---- set-up -------------------------------------------------------------------------
    def remote(self, name, prefix):
        r = self.r
        return self.adm.post("/remotes", {"name": name, "endpoint": r.endpoint, "bucket": "aibench",
                                          "access_key": r.access_key,
                                          "secret_key": r.secret_key, "prefix": prefix,
                                          "parallel": 8, "max_conns": 32})["id"]

    def probe(self):
        """What the daemon has: cache mode, presets (by the admin API's answers)."""
        s3 = self.s3
        s3.create_bucket(Bucket="probe")
        st, _ = self.adm.call("PUT", "/tenants/1/buckets/probe/cache", {"ttl_s": 60})
        self.cache = st not in (404, 405, 501)  # 409: built, needs a tier policy first
        rid = self.remote("probe", "probe/")
        self.adm.call("PUT", "/tenants/1/buckets/probe/tier", {"remote": rid,
                                                                "upload_after_s": 3600}, 200)
        st, js = self.adm.call("PUT", "/tenants/1/buckets/probe/tier",
                               {"remote": rid, "upload_after_s": 3600, "preset": "NONE"})
        self.presets = st == 200
        if st not in (200, 400, 501):
            sys.exit(f"bench/ai: a policy with a preset answered {st} {js}")
        self.adm.call("DELETE", "/tenants/1/buckets/probe/tier")
        s3.delete_bucket(Bucket="probe")
        self.adm.call("DELETE", f"/remotes/{rid}")

    def order(self, preset):
        """The order the runs take: the preset then NONE, or NONE first (--none-first; the
        first cold read of an object after the import is not the same as a later one)."""
        return ("NONE", preset) if self.a.none_first else (preset, "NONE")

    def tier(self, bucket):
        return f"/tenants/1/buckets/{bucket}/tier"

    def set_policy(self, bucket, preset, **kw):
        pol = dict(self.pols[bucket], **kw)
        if preset and self.presets:
            pol["preset"] = preset
        st, js = self.adm.call("PUT", self.tier(bucket), pol)
        if st != 200:
            sys.exit(f"bench/ai: PUT {self.tier(bucket)} {pol}: {st} {js}")

    def counts(self, bucket):
        return self.adm.get(self.tier(bucket)).get("uploads") or {}

    def evict(self, bucket, n, preset):
        """Every file of @p bucket back to the remote only (n files)."""
        t0 = time.monotonic()
        self.set_policy(bucket, preset, evict_after_s=1)

        def all_out():
            c = self.counts(bucket)
            return c.get("evicted_files", 0) >= n and c.get("evictable_files", 1) == 0
        wait_for(all_out, 600, what=f"the eviction of {bucket}")
        self.set_policy(bucket, preset)  # nothing evicted during a read
        return time.monotonic() - t0

    def flush(self, bucket):
        bar = self.adm.call("POST", self.tier(bucket) + "/flush", None, 200)[1]["barrier"]
        wait_for(lambda: self.adm.get(self.tier(bucket) + f"/flush?barrier={bar}")["done"],
                 3600, step=0.05, what=f"the flush of {bucket}")

    def source(self, bucket, prefix, objects, fill):
        """A bucket whose files (@p objects: key -> size) are on the remote only.
        @p fill(s3client, bucket, keyprefix) writes them."""
        rid = self.remote(bucket, prefix)
        self.s3.create_bucket(Bucket=bucket)
        self.pols[bucket] = {"remote": rid, "upload_after_s": 3600}
        self.set_policy(bucket, None)
        if self.cache:
            fill(self.rs3, "aibench", prefix)
            k, v = next(iter(objects.items()))
            got = self.rs3.head_object(Bucket="aibench", Key=prefix + k)["ContentLength"]
            if got != v:
                sys.exit(f"bench/ai: aibench/{prefix}{k}: {got} bytes on the remote, not {v}")
            self.adm.call("PUT", f"/tenants/1/buckets/{bucket}/cache", {"ttl_s": 86400}, 200)
            t0 = time.monotonic()
            n = 0
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                n += len(page.get("Contents", []))
            if n != len(objects):
                sys.exit(f"bench/ai: {bucket}: {n} names imported, {len(objects)} on the remote")
            log(f"  {bucket}: cache mode over aibench/{prefix}: {n} names imported in "
                f"{time.monotonic() - t0:.2f} s")
        else:
            fill(self.s3, bucket, "")
            t0 = time.monotonic()
            self.flush(bucket)
            t1 = time.monotonic()
            self.evict(bucket, len(objects), None)
            log(f"  {bucket}: no cache mode: tiered bucket, written through the daemon, "
                f"uploaded in {t1 - t0:.1f} s, evicted in {time.monotonic() - t1:.1f} s")

    def tools_env(self):
        r, work = self.r, self.work
        env = dict(os.environ, AWS_ACCESS_KEY_ID=r.access_key,
                   AWS_SECRET_ACCESS_KEY=r.secret_key, AWS_DEFAULT_REGION="us-east-1",
                   AWS_CONFIG_FILE=os.path.join(work, "awscfg"),
                   RCLONE_CONFIG=os.path.join(work, "rclone.conf"))
        env.pop("AWS_CA_BUNDLE", None)  # the remote is plain http; rclone refuses a bundle
        with open(env["AWS_CONFIG_FILE"], "w") as f:
            f.write(f"[default]\nregion = us-east-1\ns3 =\n"
                    f"    max_concurrent_requests = 16\n"
                    f"    multipart_chunksize = {PART}\n"
                    f"    multipart_threshold = {PART}\n"
                    f"    addressing_style = path\n")
        with open(env["RCLONE_CONFIG"], "w") as f:
            f.write(f"[rgw]\ntype = s3\nprovider = Ceph\nendpoint = {r.endpoint}\n"
                    f"access_key_id = {r.access_key}\nsecret_access_key = {r.secret_key}\n"
                    f"force_path_style = true\nregion = us-east-1\n")
        return env

    def tool(self, name, cmd):
        """@return seconds, or None when the tool is missing."""
        exe = shutil.which(cmd[0], path="/usr/bin:/usr/local/bin") or shutil.which(cmd[0])
        if not exe:
            log(f"  {name}: {cmd[0]} not installed")
            return None
        c0 = self.cpu.snap()
        t0 = time.monotonic()
        p = subprocess.run([exe] + cmd[1:], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        dt = time.monotonic() - t0
        self.cpu_of[name] = Cpu.diff(c0, self.cpu.snap())
        if p.returncode != 0:
            sys.exit(f"bench/ai: {name} failed:\n{p.stdout[-2000:]}")
        return dt

    def aws(self, *args):
        return ["aws", "--endpoint-url", self.r.endpoint, "--only-show-errors", "s3"] + list(args)

    # ---- parallel clients ---------------------------------------------------------------
    def run_threads(self, n, setup, body):
        """n threads: setup(i) (untimed) then body(i, state); @return the seconds from the
        common start to the end of the last one."""
        ready = threading.Barrier(n + 1)
        errs, ends = [], []

        def th(i):
            try:
                s = setup(i)
            except Exception as e:  # noqa: BLE001 (reported below)
                errs.append(repr(e))
                ready.wait()
                return
            ready.wait()
            try:
                body(i, s)
            except Exception as e:  # noqa: BLE001 (reported below)
                errs.append(repr(e))
            finally:
                ends.append(time.monotonic())
                if isinstance(s, Nfs):
                    s.close()

        ts = [threading.Thread(target=th, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        c0 = self.cpu.snap()
        ready.wait()
        t0 = time.monotonic()
        for t in ts:
            t.join()
        self.last_cpu = Cpu.diff(c0, self.cpu.snap())
        if errs:
            with open(self.d.log_path, errors="replace") as f:
                bad = [ln.rstrip()[:300] for ln in f if " WARN " in ln or " ERR" in ln]
            sys.exit(f"bench/ai: {len(errs)} client errors: {errs[:3]}\n"
                     + "\n".join(["the daemon's last warnings:"] + bad[-10:]))
        return max(ends) - t0

    def nfs(self, _i=0):
        return Nfs(self.lib, self.d.nfs_port)

    def nfs_read(self, n, path, off, size, buf):
        """pread of [off, off+size) into @p buf in READ pieces; @return bytes read."""
        L = n.L
        fh = ctypes.c_void_p()
        retry_jukebox(lambda: n.check(L.nfs_open(n.ctx, path.encode(), os.O_RDONLY,
                                                 ctypes.byref(fh)), "open"), "open")
        got = zeros = 0
        try:
            while got < size:
                want = min(len(buf), size - got)
                k = retry_jukebox(lambda: n.check(L.nfs_pread(n.ctx, fh, off + got, want, buf),
                                                  "read"), "read")
                if k == 0:  # short of the size known: see the zero-read count
                    self.zero_reads += 1
                    zeros += 1
                    if zeros > 200:
                        raise NfsError(f"{path}: end of file at {off + got}")
                    time.sleep(0.02)
                    continue
                got += k
        finally:
            L.nfs_close(n.ctx, fh)
        return got

    def s3_range(self, conns, url, off, size):
        u = urllib.parse.urlsplit(url)
        c = conns.get(u.netloc) or conns.setdefault(u.netloc, http_conn(u.netloc))
        c.request("GET", u.path + "?" + u.query,
                  headers={"Range": f"bytes={off}-{off + size - 1}"})
        r = c.getresponse()
        data = r.read()
        if r.status != 206 or len(data) != size:
            raise RuntimeError(f"GET {u.path} range {off}: {r.status}, {len(data)} bytes")
        return size

    # ---- (1) model load ----------------------------------------------------------------
    def model(self):
        a = self.a
        size = a.model_size - a.model_size % (a.shards * 4096)
        blk = os.urandom(16 * MiB)

        def fill(s3, bucket, kp):
            from boto3.s3.transfer import TransferConfig
            s3.upload_fileobj(Repeat(blk, size), bucket, kp + "model.bin",
                              Config=TransferConfig(multipart_threshold=64 * MiB,
                                                    multipart_chunksize=64 * MiB,
                                                    max_concurrency=4))
        log(f"(1) model load: {size / MiB:.0f} MiB, {a.shards} shards read in parallel")
        self.source("model", "m/", {"model.bin": size}, fill)
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": "model",
                                                                   "Key": "model.bin"},
                                             ExpiresIn=86400)
        shard = size // a.shards

        def read_nfs():
            def setup(i):
                n = self.nfs()
                n.buf = ctypes.create_string_buffer(READ)
                return n

            def body(i, n):
                self.nfs_read(n, "/model/model.bin", i * shard, shard, n.buf)
            return self.run_threads(a.shards, setup, body)

        def read_s3():
            def body(i, conns):
                for off in range(i * shard, (i + 1) * shard, READ):
                    self.s3_range(conns, url, off, min(READ, (i + 1) * shard - off))
            return self.run_threads(a.shards, lambda i: {}, body)

        res = {}
        ld = Loads()
        cold = True  # the bucket starts with its file on the remote only
        for preset in self.order("MODEL_CHECKPOINT_RO"):
            if preset != "NONE" and not self.presets:
                continue
            self.set_policy("model", preset)
            for proto, fn in (("NFS", read_nfs), ("S3", read_s3)):
                if not cold:
                    self.evict("model", 1, preset)
                res[(preset, proto, "cold")] = fn()
                self.cpu_of[f"{proto} cold, {preset}"] = self.last_cpu
                ld.note()
                res[(preset, proto, "warm")] = fn()
                self.cpu_of[f"{proto} warm, {preset}"] = self.last_cpu
                ld.note()
                cold = False
        # the tools, from the same remote object to a local file
        dst = os.path.join(self.work, "dl")
        os.makedirs(dst, exist_ok=True)
        t_aws = self.tool("aws s3 cp", self.aws("cp", "s3://aibench/m/model.bin", dst + "/aws.bin"))
        shutil.rmtree(dst, ignore_errors=True)
        os.makedirs(dst, exist_ok=True)
        t_rc = self.tool("rclone copy", ["rclone", "copy", "--multi-thread-streams",
                                         str(a.shards), "--multi-thread-cutoff", "16M",
                                         "rgw:aibench/m/model.bin", dst])
        shutil.rmtree(dst, ignore_errors=True)
        ld.note()
        mb = size / 1e6
        log(f"  {'':40}{'MB/s':>8}{'/aws':>7}{'/rclone':>8}{'/NONE':>7}   ({ld})")
        for preset in ("MODEL_CHECKPOINT_RO", "NONE"):
            for proto in ("NFS", "S3"):
                for phase in ("cold", "warm"):
                    name = f"{proto} {phase}, {preset if self.presets else 'default'}"
                    if preset != "NONE" and not self.presets:
                        log(f"  {f'{proto} {phase}, {preset}':40}  {NA_PRESET}")
                        continue
                    t = res[(preset, proto, phase)]
                    none = res.get(("NONE", proto, phase))
                    rel = (f"{none / t:7.2f}" if self.presets and preset != "NONE"
                           else f"{'':7}")
                    log(f"  {name:40}{mb / t:8.1f}"
                        f"{(t_aws / t if t_aws else float('nan')):7.2f}"
                        f"{(t_rc / t if t_rc else float('nan')):8.2f}{rel}")
        for name, t in (("aws s3 cp", t_aws), (f"rclone copy --multi-thread-streams "
                                                f"{a.shards}", t_rc)):
            log(f"  {name:40}" + (f"{mb / t:8.1f}" if t else "     n/a"))
        self.cpu_table("ms of CPU per MB", mb, [
            f"{proto} {phase}, {preset}" for preset in ("MODEL_CHECKPOINT_RO", "NONE")
            for proto in ("NFS", "S3") for phase in ("cold", "warm")] + ["aws s3 cp",
                                                                         "rclone copy"])
        self.results["model"] = (res, t_aws, t_rc, mb, str(ld))
        # room for the next shapes: the local copy evicted, the remote object deleted
        self.evict("model", 1, None)
        self.drop_remote("m/")

    # ---- (2) dataset -----------------------------------------------------------------------
    def dataset(self):
        a = self.a
        rnd = random.Random(1)
        sizes = {f"train/{i:06d}.bin": SAMPLE + rnd.randint(-20000, 20000)
                 for i in range(a.samples)}
        blk = os.urandom(1 * MiB)

        def fill(s3, bucket, kp):
            def put(kv):
                k, n = kv
                off = hash(k) % (len(blk) - n)
                s3.put_object(Bucket=bucket, Key=kp + k, Body=blk[off:off + n])
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(put, sizes.items()))
        log(f"(2) dataset: {a.samples} samples of ~150 KB, {a.readers} readers, random order")
        self.source("dataset", "d/", sizes, fill)
        keys = sorted(sizes)
        urls = {k: self.s3.generate_presigned_url("get_object", Params={"Bucket": "dataset",
                                                                        "Key": k},
                                                  ExpiresIn=86400) for k in keys}
        order = keys[:]
        random.Random(2).shuffle(order)
        parts = [order[i::a.readers] for i in range(a.readers)]

        # Each run starts as a data loader does: it lists the sample directory (an NFS
        # READDIRPLUS of /dataset/train, or ListObjectsV2 of train/ with delimiter /),
        # then its readers read the samples it found. The listing is what DATASET_RO's
        # directory prefetch acts on (docs/tiering.md § Directory prefetch): the names
        # were imported before the clock started by a listing without delimiter, which
        # prefetches nothing. It is timed with the run, as a loader's is.
        def list_nfs():
            n = self.nfs()
            try:
                got = [e for e in n.listdir("/dataset/train") if e not in (".", "..")]
            finally:
                n.close()
            if len(got) != a.samples:
                raise RuntimeError(f"READDIR /dataset/train: {len(got)} names")

        def list_s3():
            n = 0
            for page in self.s3.get_paginator("list_objects_v2").paginate(
                    Bucket="dataset", Prefix="train/", Delimiter="/"):
                n += len(page.get("Contents", []))
            if n != a.samples:
                raise RuntimeError(f"ListObjectsV2 train/: {n} keys")

        def read_nfs():
            bufs = [ctypes.create_string_buffer(SAMPLE + 20000) for _ in range(a.readers)]

            def body(i, n):
                for k in parts[i]:
                    self.nfs_read(n, "/dataset/" + k, 0, sizes[k], bufs[i])
            t0 = time.monotonic()
            list_nfs()
            return time.monotonic() - t0 + self.run_threads(a.readers, self.nfs, body)

        def read_s3():
            def body(i, conns):
                for k in parts[i]:
                    if http_do(conns, urls[k]) != sizes[k]:
                        raise RuntimeError(f"GET {k}: short")
            t0 = time.monotonic()
            list_s3()
            return time.monotonic() - t0 + self.run_threads(a.readers, lambda i: {}, body)

        res, pf = {}, {}
        ld = Loads()
        cold = True
        for preset in self.order("DATASET_RO"):
            if preset != "NONE" and not self.presets:
                continue
            self.set_policy("dataset", preset)
            for proto, fn in (("NFS", read_nfs), ("S3", read_s3)):
                if not cold:
                    self.evict("dataset", a.samples, preset)
                m0 = self.prefetch_counters()
                res[(preset, proto, "cold")] = fn()
                pf[(preset, proto)] = (m0, self.prefetch_counters())
                self.cpu_of[f"{proto} cold, {preset}"] = self.last_cpu
                ld.note()
                res[(preset, proto, "warm")] = fn()
                self.cpu_of[f"{proto} warm, {preset}"] = self.last_cpu
                ld.note()
                cold = False
        dst = os.path.join(self.work, "dl")
        os.makedirs(dst, exist_ok=True)
        t_rc = self.tool("rclone copy", ["rclone", "copy", "--transfers", str(a.readers),
                                         "--checkers", str(a.readers), "rgw:aibench/d/", dst])
        shutil.rmtree(dst, ignore_errors=True)
        ld.note()
        n = a.samples
        log(f"  {'':40}{'samples/s':>10}{'/rclone':>8}{'/NONE':>7}   ({ld})")
        for preset in ("DATASET_RO", "NONE"):
            for proto in ("NFS", "S3"):
                for phase in ("cold", "warm"):
                    if preset != "NONE" and not self.presets:
                        log(f"  {f'{proto} {phase}, {preset}':40}  {NA_PRESET}")
                        continue
                    name = f"{proto} {phase}, {preset if self.presets else 'default'}"
                    t = res[(preset, proto, phase)]
                    none = res.get(("NONE", proto, phase))
                    rel = (f"{none / t:7.2f}" if self.presets and preset != "NONE"
                           else f"{'':7}")
                    log(f"  {name:40}{n / t:10.1f}"
                        f"{(t_rc / t if t_rc else float('nan')):8.2f}{rel}")
        log(f"  {'rclone copy --transfers ' + str(a.readers):40}"
            + (f"{n / t_rc:10.1f}" if t_rc else "       n/a"))
        self.cpu_table("ms of CPU per sample", n, [
            f"{proto} {phase}, {preset}" for preset in ("DATASET_RO", "NONE")
            for proto in ("NFS", "S3") for phase in ("cold", "warm")] + ["rclone copy"])
        log("  cold runs, what the directory prefetch did (s3nfs_tier_prefetch_*, "
            "s3nfs_tier_recalls_total, s3nfs_tier_recalled_bytes_total, before/after each):")
        pfl = {}
        for (preset, proto), (m0, m1) in sorted(pf.items()):
            dm = {k: m1.get(k, 0) - m0.get(k, 0) for k in set(m0) | set(m1)}
            files = dm.get("s3nfs_tier_prefetch_files_total", 0)
            recalls = dm.get("s3nfs_tier_recalls_total", 0)
            full = dm.get('s3nfs_tier_prefetch_skipped_total{reason="full"}', 0)
            queue = dm.get('s3nfs_tier_prefetch_skipped_total{reason="queue"}', 0)
            mb = dm.get("s3nfs_tier_prefetch_bytes_total", 0) / 1e6
            rmb = dm.get("s3nfs_tier_recalled_bytes_total", 0) / 1e6
            line = (f"{dm.get('s3nfs_tier_prefetch_dirs_total', 0):.0f} listing(s) prefetched, "
                    f"{files:.0f} files ({mb:.0f} MB) recalled by the prefetch, "
                    f"{max(recalls - files, 0):.0f} other recalls; {rmb:.0f} MB recalled in all "
                    f"(the samples: {sum(sizes.values()) / 1e6:.0f} MB); skipped: full "
                    f"{full:.0f}, queue {queue:.0f}")
            pfl[(preset, proto)] = line
            log(f"  {f'{proto} cold, {preset}':40}{line}")
        self.results["dataset"] = (res, t_rc, n, str(ld), pfl)
        self.drop_remote("d/")

    # ---- (3) checkpoint --------------------------------------------------------------------
    def ckpt(self):
        a = self.a
        per = a.ckpt_size // a.writers
        per -= per % 4096
        total = per * a.writers
        piece = min(a.piece, per)
        data = os.urandom(piece)
        per_dir = a.ckpt_rename == "dir"
        log(f"(3) checkpoint: {total / MiB:.0f} MiB over NFS, {a.writers} writers of "
            f"{per / MiB:.0f} MiB in pieces of {piece / MiB:.0f} MiB, COMMIT, "
            + ("then one RENAME of tmp/ to step/" if per_dir else "RENAME"))
        rid = self.remote("ckpt", "c/")
        self.s3.create_bucket(Bucket="ckpt")
        self.pols["ckpt"] = {"remote": rid, "upload_after_s": 0}
        self.set_policy("ckpt", None)
        n0 = self.nfs()
        n0.mkdir("/ckpt/tmp")
        if not per_dir:
            n0.mkdir("/ckpt/step")
        L = n0.L

        def setup(i):
            n = self.nfs()
            fh = ctypes.c_void_p()
            n.check(L.nfs_create(n.ctx, f"/ckpt/tmp/shard-{i}".encode(),
                                 os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644,
                                 ctypes.byref(fh)), "create")
            return (n, fh)

        def body(i, s):
            n, fh = s
            try:
                for off in range(0, per, piece):
                    k = min(piece, per - off)
                    w = retry_jukebox(lambda: n.check(L.nfs_pwrite(n.ctx, fh, off, k, data),
                                                      "write"), "write")
                    if w != k:
                        raise NfsError(f"short write {w} of {k}")
                n.check(L.nfs_fsync(n.ctx, fh), "commit")
            finally:
                L.nfs_close(n.ctx, fh)
            if not per_dir:
                n.rename(f"/ckpt/tmp/shard-{i}", f"/ckpt/step/shard-{i}")
            n.close()

        ld = Loads()
        r0 = self.upload_requests()
        t_ack = self.run_threads(a.writers, setup, body)
        if per_dir:
            t0 = time.monotonic()
            n0.rename("/ckpt/tmp", "/ckpt/step")
            t_ack += time.monotonic() - t0
        self.cpu_of["writers acknowledged"] = self.last_cpu
        ld.note()
        c1 = self.cpu.snap()
        t1 = time.monotonic()
        self.flush("ckpt")
        t_flush = time.monotonic() - t1 + t_ack
        self.cpu_of["upload until the barrier"] = Cpu.diff(c1, self.cpu.snap())
        ld.note()
        reqs = self.requests_line(r0, self.upload_requests(), total)
        n0.close()
        # the same bytes from local files straight to the remote
        src = os.path.join(self.work, "ck")
        os.makedirs(src, exist_ok=True)
        for i in range(a.writers):
            with open(os.path.join(src, f"shard-{i}"), "wb") as f:
                for off in range(0, per, piece):
                    f.write(data[:min(piece, per - off)])
        t_aws = self.tool("aws s3 cp --recursive",
                          self.aws("cp", "--recursive", src, "s3://aibench/awsckpt/"))
        shutil.rmtree(src, ignore_errors=True)
        ld.note()
        mb = total / 1e6
        log(f"  {'':44}{'s':>7}{'MB/s':>8}{'aws/this':>9}   ({ld})")
        for name, t in (("writers acknowledged (NFS COMMIT+RENAME)", t_ack),
                        ("flush barrier returned (on the remote)", t_flush),
                        ("aws s3 cp --recursive to the remote", t_aws)):
            if t is None:
                log(f"  {name:44}    n/a")
                continue
            log(f"  {name:44}{t:7.2f}{mb / t:8.1f}"
                + (f"{t_aws / t:9.2f}" if t_aws else ""))
        self.cpu_table("ms of CPU per MB", mb, ["writers acknowledged",
                                                "upload until the barrier",
                                                "aws s3 cp --recursive"])
        log(f"  the daemon's requests to the remote: {reqs}")
        self.results["ckpt"] = (t_ack, t_flush, t_aws, mb, str(ld))

    def prefetch_counters(self):
        """The directory prefetch's counters (s3nfs_tier_prefetch_*, by their name and
        labels) and s3nfs_tier_recalls_total from the daemon's /metrics ({} without)."""
        import urllib.request
        try:
            with urllib.request.urlopen(self.d.admin_endpoint + "/metrics", timeout=30) as f:
                text = f.read().decode()
        except OSError as e:
            log(f"  /metrics: {e}")
            return {}
        out = {}
        for line in text.splitlines():
            if line.startswith(("s3nfs_tier_prefetch_", "s3nfs_tier_recalls_total ",
                                "s3nfs_tier_recalled_bytes_total ")):
                out[line.rsplit(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
        return out

    def upload_requests(self):
        """The uploader's counters from the daemon's /metrics (empty on a daemon
        without them): requests by S3 operation, body bytes sent, uploads given up."""
        import urllib.request
        try:
            with urllib.request.urlopen(self.d.admin_endpoint + "/metrics", timeout=30) as f:
                text = f.read().decode()
        except OSError as e:
            log(f"  /metrics: {e}")
            return {}
        out = {}
        for line in text.splitlines():
            if line.startswith("s3nfs_tier_upload_requests_total{op=\""):
                out[line.split('"')[1]] = int(float(line.rsplit(" ", 1)[1]))
            elif line.startswith(("s3nfs_tier_upload_body_bytes_total ",
                                  "s3nfs_tier_upload_changed_total ",
                                  "s3nfs_tier_copied_files_total ")):
                out[line.split(" ")[0]] = int(float(line.rsplit(" ", 1)[1]))
        return out

    @staticmethod
    def requests_line(r0, r1, total):
        """The requests between two upload_requests(), per GiB of @p total bytes."""
        if not r1:
            return "n/a (the daemon does not count them)"
        gib = total / (1 << 30)
        d = {k: r1[k] - r0.get(k, 0) for k in r1}
        body = d.pop("s3nfs_tier_upload_body_bytes_total", 0)
        changed = d.pop("s3nfs_tier_upload_changed_total", 0)
        copied = d.pop("s3nfs_tier_copied_files_total", 0)
        return (", ".join(f"{k} {v / gib:.0f}" for k, v in d.items() if v)
                + f" per GiB; body bytes sent {body / total:.2f} x the checkpoint; "
                f"{changed} uploads given up (file changed); {copied} files copied "
                f"server-side (renamed after their upload)")

    def cpu_table(self, unit, n, rows):
        """Where the CPU went in each run of the shape (ms per @p unit)."""
        log(f"  {unit + ':':40}" + " ".join(f"{k:>6}" for k in Cpu.WHO) + f" {'cs':>8}")
        for r in rows:
            key = r if r in self.cpu_of else next((k for k in self.cpu_of if
                                                   k.startswith(r)), None)
            if key:
                log(f"  {r:40}{cpu_cols(self.cpu_of[key], n)}")

    def drop_remote(self, prefix):
        """Delete every object under aibench/@p prefix and have RGW reclaim them
        now (gc), so that the next shape finds the room (memstore's RAM, the
        bluestore file's blocks)."""
        t0 = time.monotonic()
        n = 0
        for page in self.rs3.get_paginator("list_objects_v2").paginate(Bucket="aibench",
                                                                       Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for i in range(0, len(keys), 1000):
                self.rs3.delete_objects(Bucket="aibench",
                                        Delete={"Objects": keys[i:i + 1000], "Quiet": True})
            n += len(keys)
        self.r.gc()
        log(f"  aibench/{prefix}: {n} objects deleted and reclaimed in "
            f"{time.monotonic() - t0:.1f} s (OSD file {self.r.osd_bytes() / (1 << 30):.1f} GiB)"
            if self.r.osd == "bluestore" else
            f"  aibench/{prefix}: {n} objects deleted and reclaimed in "
            f"{time.monotonic() - t0:.1f} s")

    # ---- all ---------------------------------------------------------------------------
    def run(self):
        a = self.a
        total = a.model_size + a.samples * (SAMPLE + 20000) + a.ckpt_size
        osd, osd_bytes, mem_bytes = osd_plan(a)
        self.r = rgwmod.Rgw(os.path.join(self.work, "rgw"), memstore_bytes=mem_bytes,
                            osd=osd, bluestore_bytes=osd_bytes)
        self.r.on_spawn = self.reaper.watch
        room = max(2 << 30, 2 * total + (1 << 30))
        self.d = Daemon(os.path.join(self.work, "s3nfsd"),
                        ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=100",
                         "--set", f"tier_part_size={PART}",
                         "--set", f"data_file_size={room >> 20}MiB",
                         "--set", "tier_recall_threads=16"]
                        + [x for kv in a.daemon_set for x in ("--set", kv)])
        os.makedirs(self.d.data_dir, exist_ok=True)
        self.pols, self.results = {}, {}
        try:
            self.r.start()
            self.d.start()
            self.reaper.watch(self.d.proc.pid)
            self.rs3 = self.r.boto3()
            self.rs3.create_bucket(Bucket="aibench")
            self.s3 = self.d.boto3()
            self.adm = Admin(self.d)
            self.cpu = Cpu(self)
            self.cpu_of, self.last_cpu = {}, {}
            self.env = self.tools_env()
            self.probe()
            try:
                la = os.getloadavg()[0]
            except OSError:
                la = float("nan")
            log("bench/ai: remote Ceph RGW on loopback, OSD "
                + (f"bluestore on a sparse file of {osd_bytes / (1 << 30):.1f} GiB"
                   if osd == "bluestore" else f"memstore of {mem_bytes / (1 << 30):.1f} GiB")
                + "; cache mode: "
                f"{'yes' if self.cache else 'NOT BUILT: tiered buckets, files evicted'}; "
                f"presets: {'yes' if self.presets else 'not built'}; load {la:.2f}; "
                f"daemon {os.environ['S3NFSD_BIN']}")
            only = a.only.split(",")
            if "model" in only:
                self.model()
            if "dataset" in only:
                self.dataset()
            if "ckpt" in only:
                self.ckpt()
            self.summary()
        finally:
            self.d.stop()
            self.r.stop()
            if a.daemon_log and os.path.exists(self.d.log_path):
                shutil.copyfile(self.d.log_path, a.daemon_log)

    def summary(self):
        out = []
        if "model" in self.results:
            res, t_aws, t_rc, mb, ld = self.results["model"]
            p = "MODEL_CHECKPOINT_RO" if self.presets else "NONE"
            for proto in ("NFS", "S3"):
                c, w = res[(p, proto, "cold")], res[(p, proto, "warm")]
                s = f"model {proto} ({ld}): cold {mb / c:.0f} MB/s, warm {mb / w:.0f} MB/s"
                if t_aws:
                    s += f", cold/aws {t_aws / c:.2f}"
                if t_rc:
                    s += f", cold/rclone {t_rc / c:.2f}"
                if self.presets:
                    s += f", preset/NONE cold {res[('NONE', proto, 'cold')] / c:.2f}"
                out.append(s)
        if "dataset" in self.results:
            res, t_rc, n, ld, pfl = self.results["dataset"]
            p = "DATASET_RO" if self.presets else "NONE"
            for proto in ("NFS", "S3"):
                c, w = res[(p, proto, "cold")], res[(p, proto, "warm")]
                s = f"dataset {proto} ({ld}): cold {n / c:.0f}/s, warm {n / w:.0f}/s"
                if t_rc:
                    s += f", cold/rclone {t_rc / c:.2f}"
                if self.presets:
                    s += f", DATASET_RO/NONE cold {res[('NONE', proto, 'cold')] / c:.2f}"
                if (p, proto) in pfl:
                    s += f"; cold {p} prefetch: {pfl[(p, proto)]}"
                out.append(s)
        if "ckpt" in self.results:
            t_ack, t_flush, t_aws, mb, ld = self.results["ckpt"]
            s = f"checkpoint ({ld}): acknowledged {t_ack:.2f} s, on the remote {t_flush:.2f} s"
            if t_aws:
                s += f", aws s3 cp {t_aws:.2f} s (aws/ack {t_aws / t_ack:.2f}, " \
                     f"aws/flush {t_aws / t_flush:.2f})"
            out.append(s)
        if self.zero_reads:
            out.append(f"{self.zero_reads} NFS READs answered 0 bytes before the end of a file "
                       f"(retried)")
        for s in out:
            log("bench/ai: " + s)


def osd_plan(a):
    """RGW's OSD for these sizes: (kind, bluestore file bytes, memstore bytes).
    The shapes run one after the other and each deletes its remote objects when
    done (drop_remote), so the remote holds the largest shape at most: the model,
    the samples, or the checkpoint twice (the daemon's upload and aws's copy)."""
    only = a.only.split(",")
    peak = max([0] + [b for k, b in (("model", a.model_size),
                                      ("dataset", a.samples * (SAMPLE + 20000)),
                                      ("ckpt", 2 * a.ckpt_size)) if k in only])
    mem = max(4 << 30, 2 * peak + (1 << 30))  # memstore: ~2x the stored bytes in RAM
    osd = a.osd
    if osd == "auto":
        osd = "memstore" if mem <= MEMSTORE_MAX else "bluestore"
    blue = a.osd_size or min(BLUESTORE_MAX, max(4 << 30, peak * 3 // 2 + (2 << 30)))
    return osd, blue, mem


def on_signal(sig, _frame):
    """SIGTERM, SIGHUP: as Ctrl-C (the finally blocks stop the daemons and delete
    the work folder)."""
    raise KeyboardInterrupt(f"signal {sig}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-size", type=size_arg, default=size_arg("1G"))
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--ckpt-size", type=size_arg, default=size_arg("512M"))
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--piece", type=size_arg, default=size_arg("64M"))
    ap.add_argument("--ckpt-rename", choices=("file", "dir"), default="file",
                    help="checkpoint: each writer renames its shard into step/ (file), or "
                         "one rename of tmp/ to step/ once all are acknowledged (dir)")
    ap.add_argument("--none-first", action="store_true",
                    help="measure NONE before the preset (default: the preset first)")
    ap.add_argument("--only", default="model,dataset,ckpt",
                    help="comma list of model, dataset, ckpt")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/var/tmp"),
                    help="parent of the work folder (default $BENCH_DIR or /var/tmp)")
    ap.add_argument("--osd", choices=("auto", "memstore", "bluestore"), default="auto",
                    help="RGW's OSD: memstore (RAM, ~2x the stored bytes), bluestore (a sparse "
                         "file in the work folder); auto: memstore up to "
                         f"{MEMSTORE_MAX >> 30} GiB of it, else bluestore")
    ap.add_argument("--osd-size", type=size_arg, default=0,
                    help="the bluestore file's size (default: 1.5x the largest shape's remote "
                         f"bytes + 2 GiB, at least 4 GiB, at most {BLUESTORE_MAX >> 30} GiB)")
    ap.add_argument("--daemon-set", action="append", default=[], metavar="KEY=VALUE",
                    help="one more --set for s3nfsd (repeatable), e.g. log_level=info,tier=debug")
    ap.add_argument("--daemon-log", metavar="PATH",
                    help="copy s3nfsd's log there before the work folder is removed")
    a = ap.parse_args()
    if not os.access(os.environ["S3NFSD_BIN"], os.X_OK):
        sys.exit(f"bench/ai: {os.environ['S3NFSD_BIN']} not built (scripts/build.sh build)")
    why = rgwmod.ensure_installed()
    if why:
        sys.exit(f"bench/ai: no Ceph RGW: {why}")
    osd, osd_bytes, _ = osd_plan(a)
    # the disk: the bluestore file, the daemon's copies, a download or the checkpoint's files
    need = ((osd_bytes if osd == "bluestore" else 0) + a.model_size
            + a.samples * (SAMPLE + 20000) + a.ckpt_size + max(a.model_size, a.ckpt_size))
    st = os.statvfs(a.dir)
    if st.f_bavail * st.f_frsize < need + (4 << 30):
        sys.exit(f"bench/ai: {a.dir} has {st.f_bavail * st.f_frsize / (1 << 30):.1f} GiB free; "
                 f"these sizes need about {need / (1 << 30):.1f} GiB + 4 GiB to spare")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    work = tempfile.mkdtemp(prefix="bench-ai-", dir=a.dir)
    reaper = Reaper(work)  # stops the daemons and removes work even if this is killed
    try:
        Bench(a, work, reaper).run()
    except KeyboardInterrupt as e:
        sys.exit(f"bench/ai: interrupted ({e or 'SIGINT'}); daemons stopped, {work} removed")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        reaper.close()


if __name__ == "__main__":
    main()
