# SPDX-License-Identifier: Apache-2.0
"""bench/soak/soak.py: the driver of bench/soak/run.sh (run with /usr/bin/python3).

Starts one real s3nfsd on free loopback ports in a temp dir (small data store),
then for --minutes runs a mixed S3 + NFS load against it while sampling the
daemon's memory, open files and threads into a CSV:

  s3 workers     boto3 over keep-alive connections: PUT (1 KiB..4 MiB), GET with
                 an MD5 check, HEAD, LIST, COPY, DELETE, DeleteObjects, multipart
                 uploads (and some aborted ones); each keeps a bounded working set
  nfs workers    libnfs (ctypes, sync API): CREATE, WRITE + COMMIT, READ with a
                 check, READDIR, RENAME, GETATTR, REMOVE, MKDIR/RMDIR, and now and
                 then a fresh mount (MNT) on a new connection
  idle holders   --idle-conns connections to each listener held the whole run;
                 each sends a cheap request (a presigned GET, an RPC NULL) once
                 in a while and checks the answer, so the server keeps them open
  idle expiry    connections that send nothing and must be closed by the server
                 once the S3 idle timeout (s3_idle_timeout_s, set short here)
                 passes; NFS ones too when the daemon has nfs_idle_timeout_s
  churn          connect, one request, close, on both listeners
  reload         SIGHUP every --hup-secs, the config file toggling log levels

Every --interval seconds one CSV row: time, VmRSS, RssAnon, RssFile, anonymous
(smaps_rollup), VmHWM, open fds, threads, the store's used bytes and the
number of /metrics lines, and the request and error counts so far. At the end
a summary (first/last/max of each column, the RssAnon slope over the last half)
and a verdict. The exit status is 0 only when anonymous memory leveled off,
no request failed unexpectedly and the daemon lived through the run and then
exited 0 (for a sanitizer build: with no leak report in its log).

With --kernel-runs N the mixed load is replaced by N rounds of the Linux
kernel client's workloads (tests/integration/kernel/workloads, in a QEMU guest
through scripts/nfsvm.sh and ../shared/nfsvm or $S3NFS_NFSVM_DIR), one fresh bucket per round,
emptied over S3 afterwards, with a sample after each round: the pattern of
issue 10 (memory grew run after run). Its verdict: the last round may add at
most --max-growth-mb of RssAnon to the one before.

"Leveled off": split the samples of the last half of the run into two
quarters Q3 and Q4; growth = mean(Q4) - mean(Q3) of RssAnon must stay under
--max-growth-mb, and the last half cut into five equal slices must not rise
slice after slice by more than 2 MiB in all (a slow monotone creep).
"""
import argparse
import ctypes
import ctypes.util
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchlib import Nfs, NfsError, NfsLib  # noqa: E402,F401

ACCESS_KEY = "S3NFSSOAKACCESSKEY01"
SECRET_KEY = "s3nfs/soak/secret/key/0123456789abcdefghij"
ADMIN_TOKEN = "s3nfs-soak-admin-token-0123456789"
BUCKET = "soak"
MIB = 1024 * 1024


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stats:
    """Request and error counters shared by every load thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {}
        self.errors = {}
        self.first_errors = []

    def ok(self, what, n=1):
        with self.lock:
            self.ops[what] = self.ops.get(what, 0) + n

    def fail(self, what, detail):
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1
            if len(self.first_errors) < 20:
                self.first_errors.append("%s %s: %s" % (time.strftime("%H:%M:%S"), what, detail))
        log("FAIL %s: %s" % (what, detail))

    def totals(self):
        with self.lock:
            return sum(self.ops.values()), sum(self.errors.values())


# ---------------------------------------------------------------- the daemon

class Daemon:
    def __init__(self, a, work):
        self.a = a
        self.work = work
        self.data_dir = os.path.join(work, "data")
        self.log_path = os.path.join(work, "s3nfsd.log")
        self.conf_path = os.path.join(work, "s3nfsd.conf")
        self.s3_port, self.nfs_port, self.admin_port = free_port(), free_port(), free_port()
        self.s3_endpoint = "http://127.0.0.1:%d" % self.s3_port
        self.admin_endpoint = "http://127.0.0.1:%d" % self.admin_port
        self.proc = None
        self.hup_state = 0
        self.write_conf()

    def write_conf(self):
        # The reloadable part the SIGHUPs toggle: the log level of one subsystem.
        level = ("info", "info,nfs=warn,s3=warn")[self.hup_state % 2]
        with open(self.conf_path + ".tmp", "w") as f:
            f.write("# written by bench/soak/soak.py\nlog_level = %s\n" % level)
        os.replace(self.conf_path + ".tmp", self.conf_path)

    def start(self):
        env = dict(os.environ, S3NFS_ACCESS_KEY=ACCESS_KEY, S3NFS_SECRET_KEY=SECRET_KEY,
                   S3NFS_ADMIN_TOKEN=ADMIN_TOKEN)
        args = list(self.a.wrap.split()) if self.a.wrap else []
        args += [self.a.bin, "--foreground", "--config", self.conf_path,
                 "--data-dir", self.data_dir,
                 "--s3-listen", "127.0.0.1:%d" % self.s3_port,
                 "--nfs-listen", "127.0.0.1:%d" % self.nfs_port,
                 "--admin-listen", "127.0.0.1:%d" % self.admin_port,
                 "--set", "data_file_size=%s" % self.a.data_file_size,
                 "--set", "s3_idle_timeout_s=%d" % self.a.idle_timeout]
        if self.a.nfs_idle:
            args += ["--set", "nfs_idle_timeout_s=%d" % self.a.idle_timeout]
        for s in self.a.set or []:
            args += ["--set", s]
        self.logf = open(self.log_path, "ab")
        log("starting: %s" % " ".join(args))
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + (300 if self.a.wrap else 60)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("s3nfsd exited with %d:\n%s" % (self.proc.returncode,
                                                                 self.tail()))
            try:
                with urllib.request.urlopen(self.admin_endpoint + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("s3nfsd not healthy in time:\n" + self.tail())

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def hup(self):
        self.hup_state += 1
        self.write_conf()
        self.proc.send_signal(signal.SIGHUP)

    def stop(self, timeout=120):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("s3nfsd did not stop in %d s: SIGKILL" % timeout)
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        return self.proc.returncode

    def tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def metrics(self):
        req = urllib.request.Request(self.admin_endpoint + "/metrics",
                                     headers={"Authorization": "Bearer " + ADMIN_TOKEN})
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.read().decode()


def s3_client(d):
    cfg = Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                 retries={"max_attempts": 1}, connect_timeout=20, read_timeout=60,
                 max_pool_connections=4)
    return boto3.client("s3", endpoint_url=d.s3_endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1", config=cfg)


# ---------------------------------------------------------------- S3 load

def s3_worker(a, d, st, stop, wid):
    rnd = random.Random(1000 + wid)
    s3 = s3_client(d)
    prefix = "s3w%d/" % wid
    live = {}        # key -> md5 hex
    it = 0

    def put(key, size):
        body = rnd.randbytes(size)
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        live[key] = hashlib.md5(body).hexdigest()
        st.ok("s3.put")

    while not stop.is_set():
        it += 1
        op = "?"
        try:
            op = "s3.put"
            size = rnd.choice((1024, 4096, 16384, 65536, 200000)) if rnd.random() < 0.9 \
                else rnd.randint(1, 4) * MIB
            put("%sobj-%d" % (prefix, rnd.randrange(a.s3_keys * 2)), size)
            if live:
                op = "s3.get"
                key = rnd.choice(list(live))
                body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                if hashlib.md5(body).hexdigest() != live[key]:
                    st.fail("s3.get", "%s: content differs" % key)
                else:
                    st.ok("s3.get")
                op = "s3.head"
                s3.head_object(Bucket=BUCKET, Key=key)
                st.ok("s3.head")
                if rnd.random() < 0.3:
                    op = "s3.get_range"
                    r = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-99")
                    r["Body"].read()
                    st.ok("s3.get_range")
            if it % 5 == 0:
                op = "s3.list"
                n = 0
                for page in s3.get_paginator("list_objects_v2").paginate(
                        Bucket=BUCKET, Prefix=prefix, PaginationConfig={"PageSize": 50}):
                    n += len(page.get("Contents", []))
                    st.ok("s3.list")
                if n != len(live):
                    st.fail("s3.list", "%d keys listed, %d expected" % (n, len(live)))
            if it % 7 == 0 and live:
                op = "s3.copy"
                src = rnd.choice(list(live))
                dst = prefix + "copy-%d" % rnd.randrange(8)
                if dst == src:
                    dst += "b"
                s3.copy_object(Bucket=BUCKET, Key=dst, CopySource={"Bucket": BUCKET, "Key": src})
                live[dst] = live[src]
                st.ok("s3.copy")
            if it % 11 == 0:
                op = "s3.multipart"
                key = prefix + "mp-%d" % rnd.randrange(4)
                up = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
                parts, h = [], []
                sizes = (5 * MIB, rnd.randint(1, 512) * 1024)
                for n, size in enumerate(sizes, 1):
                    body = rnd.randbytes(size)
                    h.append(body)
                    e = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=n,
                                       Body=body)["ETag"]
                    parts.append({"PartNumber": n, "ETag": e})
                if rnd.random() < 0.25:
                    s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up)
                    st.ok("s3.mp_abort")
                else:
                    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up,
                                                 MultipartUpload={"Parts": parts})
                    live[key] = hashlib.md5(b"".join(h)).hexdigest()
                    st.ok("s3.multipart")
            # Bounded working set: delete down to s3_keys, one by one or in a batch.
            while len(live) > a.s3_keys:
                if rnd.random() < 0.5:
                    op = "s3.delete"
                    key = rnd.choice(list(live))
                    s3.delete_object(Bucket=BUCKET, Key=key)
                    del live[key]
                    st.ok("s3.delete")
                else:
                    op = "s3.delete_objects"
                    keys = rnd.sample(list(live), min(5, len(live)))
                    r = s3.delete_objects(Bucket=BUCKET, Delete={
                        "Objects": [{"Key": k} for k in keys], "Quiet": True})
                    if r.get("Errors"):
                        st.fail(op, str(r["Errors"][:2]))
                    for k in keys:
                        live.pop(k, None)
                    st.ok(op)
        except Exception as e:  # noqa: BLE001 - every failure is counted and shown
            if stop.is_set():
                break
            st.fail(op, "%s: %s" % (type(e).__name__, str(e)[:300]))
            time.sleep(1)
    # Leave nothing behind.
    for key in list(live):
        try:
            s3.delete_object(Bucket=BUCKET, Key=key)
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------- NFS load (libnfs: benchlib.Nfs)

def nfs_worker(a, d, st, stop, wid, lib):
    rnd = random.Random(2000 + wid)
    base = "/%s/nfsw%d" % (BUCKET, wid)
    nfs = None
    live = {}        # name -> md5 hex
    it = 0
    while not stop.is_set():
        it += 1
        op = "nfs.mount"
        try:
            if nfs is None or it % 200 == 0:
                if nfs is not None:
                    nfs.close()
                nfs = Nfs(lib, d.nfs_port)
                st.ok("nfs.mount")
                if it == 1:
                    op = "nfs.mkdir"
                    nfs.mkdir(base)
                    st.ok(op)
            op = "nfs.write"
            name = "f%d" % rnd.randrange(a.nfs_files * 2)
            data = rnd.randbytes(rnd.choice((100, 4096, 32768, 150000, 1 * MIB)))
            nfs.write_file("%s/%s" % (base, name), data)
            live[name] = (hashlib.md5(data).hexdigest(), len(data))
            st.ok(op)
            op = "nfs.read"
            name = rnd.choice(list(live))
            got = nfs.read_file("%s/%s" % (base, name), live[name][1])
            if hashlib.md5(got).hexdigest() != live[name][0]:
                st.fail(op, "%s/%s: content differs (%d bytes)" % (base, name, len(got)))
            else:
                st.ok(op)
            op = "nfs.getattr"
            nfs.stat("%s/%s" % (base, name))
            st.ok(op)
            if it % 4 == 0:
                op = "nfs.rename"
                new = "r%d" % rnd.randrange(a.nfs_files * 2)
                if new not in live:
                    nfs.rename("%s/%s" % (base, name), "%s/%s" % (base, new))
                    live[new] = live.pop(name)
                    st.ok(op)
            if it % 10 == 0:
                op = "nfs.readdir"
                names = set(nfs.listdir(base))
                if names != set(live):
                    st.fail(op, "%d names, %d expected (diff %s)" % (
                        len(names), len(live), sorted(names ^ set(live))[:5]))
                else:
                    st.ok(op)
            if it % 25 == 0:
                op = "nfs.mkdir"
                sub = "%s/d%d" % (base, it)
                nfs.mkdir(sub)
                nfs.write_file(sub + "/x", b"x" * 10)
                nfs.unlink(sub + "/x")
                nfs.rmdir(sub)
                st.ok(op)
            while len(live) > a.nfs_files:
                op = "nfs.remove"
                name = rnd.choice(list(live))
                nfs.unlink("%s/%s" % (base, name))
                del live[name]
                st.ok(op)
        except Exception as e:  # noqa: BLE001
            if stop.is_set():
                break
            st.fail(op, "%s: %s" % (type(e).__name__, str(e)[:300]))
            if nfs is not None:
                nfs.close()
                nfs = None
            time.sleep(1)
    try:
        if nfs is None:
            nfs = Nfs(lib, d.nfs_port)
        for name in list(live):
            nfs.unlink("%s/%s" % (base, name))
        nfs.rmdir(base)
    except Exception:  # noqa: BLE001
        pass
    if nfs is not None:
        nfs.close()


# ---------------------------------------------------------------- idle, expiry, churn

def rpc_null_call(xid):
    body = struct.pack(">IIIIII", xid, 0, 2, 100003, 3, 0) + struct.pack(">IIII", 0, 0, 0, 0)
    return struct.pack(">I", 0x80000000 | len(body)) + body


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise ConnectionError("closed by server")
        out += b
    return out


def rpc_null(s, xid):
    s.sendall(rpc_null_call(xid))
    mark = struct.unpack(">I", recv_exact(s, 4))[0]
    rec = recv_exact(s, mark & 0x7fffffff)
    rxid, mtype, stat = struct.unpack(">III", rec[:12])
    if rxid != xid or mtype != 1 or stat != 0:
        raise ConnectionError("bad NULL reply xid=%d type=%d stat=%d" % (rxid, mtype, stat))


def http_get(s, path, host):
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(4096)
        if not b:
            raise ConnectionError("closed by server")
        head += b
    hdr, rest = head.split(b"\r\n\r\n", 1)
    status = int(hdr.split()[1])
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", hdr)
    need = int(m.group(1)) if m else 0
    while len(rest) < need:
        b = s.recv(65536)
        if not b:
            raise ConnectionError("closed mid-body")
        rest += b
    if status != 200:
        raise ConnectionError("HTTP %d: %s" % (status, rest[:200]))


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def idle_holders(a, d, st, stop, get_path):
    """--idle-conns connections per listener, each pinged every ping period
    (shorter than the idle timeout) and reconnected only if the server closed
    it, which counts as a failure: an active connection must stay open."""
    host = "127.0.0.1:%d" % d.s3_port
    period = max(2.0, a.idle_timeout * 0.5)
    conns = []
    for i in range(a.idle_conns):
        for kind in ("s3", "nfs"):
            conns.append({"kind": kind, "sock": None, "next": time.time() + rnd_jitter(period),
                          "xid": 1})
    while not stop.is_set():
        now = time.time()
        busy = 0
        for c in conns:
            if stop.is_set():
                break
            if c["sock"] is not None and c["next"] > now:
                continue
            busy += 1
            what = "idle." + c["kind"]
            try:
                if c["sock"] is None:
                    c["sock"] = connect(d.s3_port if c["kind"] == "s3" else d.nfs_port)
                    st.ok(what + "_connect")
                if c["kind"] == "s3":
                    http_get(c["sock"], get_path, host)
                else:
                    c["xid"] += 1
                    rpc_null(c["sock"], c["xid"])
                st.ok(what)
            except Exception as e:  # noqa: BLE001
                if not stop.is_set():
                    st.fail(what, "%s: %s" % (type(e).__name__, e))
                try:
                    c["sock"].close()
                except Exception:  # noqa: BLE001
                    pass
                c["sock"] = None
            c["next"] = time.time() + period
        if not busy:
            stop.wait(0.5)
    for c in conns:
        if c["sock"] is not None:
            c["sock"].close()


def rnd_jitter(period):
    return random.uniform(0, period)


def idle_expiry(a, d, st, stop):
    """Connections that never send anything; the server must close each within
    the idle timeout plus a margin. NFS ones only with --nfs-idle."""
    kinds = ["s3"] + (["nfs"] if a.nfs_idle else [])
    margin = 30 + (60 if a.wrap else 0)
    while not stop.is_set():
        socks = []
        for kind in kinds:
            for _ in range(a.expiry_conns):
                try:
                    socks.append((kind, connect(d.s3_port if kind == "s3" else d.nfs_port)))
                except OSError as e:
                    st.fail("expiry." + kind, "connect: %s" % e)
        t0 = time.time()
        for kind, s in socks:
            s.settimeout(max(1.0, t0 + a.idle_timeout + margin - time.time()))
            try:
                b = s.recv(4096)
                if b and kind == "s3":
                    # An idle-timeout answer (408) before the close is fine.
                    while b:
                        b = s.recv(4096)
                elif b:
                    st.fail("expiry." + kind, "unexpected %d bytes" % len(b))
                st.ok("expiry." + kind)
            except socket.timeout:
                if not stop.is_set():
                    st.fail("expiry." + kind, "not closed %d s after connect" % (
                        time.time() - t0))
            except OSError:
                st.ok("expiry." + kind)   # reset by the server: closed too
            finally:
                s.close()
            if stop.is_set():
                break
        stop.wait(5)
    return


def churn(a, d, st, stop, get_path, lib):
    host = "127.0.0.1:%d" % d.s3_port
    it = 0
    while not stop.is_set():
        it += 1
        what = "churn.s3"
        try:
            with connect(d.s3_port) as s:
                http_get(s, get_path, host)
            st.ok(what)
            what = "churn.nfs"
            with connect(d.nfs_port) as s:
                rpc_null(s, it)
            st.ok(what)
            if it % 20 == 0:
                what = "churn.mount"
                Nfs(lib, d.nfs_port).close()
                st.ok(what)
        except Exception as e:  # noqa: BLE001
            if not stop.is_set():
                st.fail(what, "%s: %s" % (type(e).__name__, e))
        stop.wait(1.0 / a.churn_rate)


def reloader(a, d, st, stop):
    while not stop.wait(a.hup_secs):
        try:
            d.hup()
            st.ok("sighup")
        except Exception as e:  # noqa: BLE001
            st.fail("sighup", str(e))


# ---------------------------------------------------------------- sampling

COLS = ["t_s", "vmrss_kb", "rssanon_kb", "rssfile_kb", "anon_smaps_kb", "vmhwm_kb", "fds",
        "threads", "store_used_mb", "metrics_lines", "requests", "errors"]


def sample(d, st, t0):
    pid = d.proc.pid
    row = {"t_s": round(time.time() - t0, 1)}
    with open("/proc/%d/status" % pid) as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    kb = lambda k: int(status.get(k, "0 kB").split()[0])  # noqa: E731
    row.update(vmrss_kb=kb("VmRSS"), rssanon_kb=kb("RssAnon"), rssfile_kb=kb("RssFile"),
               vmhwm_kb=kb("VmHWM"), threads=kb("Threads"))
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            m = re.search(r"^Anonymous:\s+(\d+)", f.read(), re.M)
            row["anon_smaps_kb"] = int(m.group(1)) if m else -1
    except OSError:
        row["anon_smaps_kb"] = -1
    row["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    try:
        text = d.metrics()
        cap = re.search(r"^s3nfs_store_capacity_bytes\S* (\d+)", text, re.M)
        free = re.search(r"^s3nfs_store_free_bytes\S* (\d+)", text, re.M)
        row["store_used_mb"] = (round((int(cap.group(1)) - int(free.group(1))) / MIB, 1)
                                if cap and free else -1)
        row["metrics_lines"] = text.count("\n")
    except Exception as e:  # noqa: BLE001
        st.fail("metrics", str(e))
        row["store_used_mb"] = row["metrics_lines"] = -1
    row["requests"], row["errors"] = st.totals()
    return row


def slope_mb_per_h(rows, col):
    xs = [r["t_s"] for r in rows]
    ys = [r[col] / 1024 for r in rows]
    if len(xs) < 3:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600


def verdict(rows, max_growth_mb):
    """(leveled: bool, text) for RssAnon over the last half of the samples."""
    half = rows[len(rows) // 2:]
    if len(half) < 10:
        return False, "too few samples (%d in the last half) to judge" % len(half)
    q3, q4 = half[:len(half) // 2], half[len(half) // 2:]
    growth = (statistics.fmean(r["rssanon_kb"] for r in q4)
              - statistics.fmean(r["rssanon_kb"] for r in q3)) / 1024
    k = len(half) // 5
    slices = [statistics.fmean(r["rssanon_kb"] for r in half[i * k:(i + 1) * k]) / 1024
              for i in range(5)]
    monotone = all(b > a for a, b in zip(slices, slices[1:])) and slices[-1] - slices[0] > 2
    text = ("last-half RssAnon: Q4-Q3 mean growth %+.1f MiB (limit %.0f), slope %+.1f MiB/h, "
            "fifths %s MiB" % (growth, max_growth_mb, slope_mb_per_h(half, "rssanon_kb"),
                               " ".join("%.1f" % s for s in slices)))
    if growth >= max_growth_mb:
        return False, "GROWING: " + text
    if monotone:
        return False, "GROWING (monotone creep): " + text
    return True, "LEVELED OFF: " + text


# ---------------------------------------------------------------- kernel-client rounds

def empty_bucket(s3, bucket):
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    # What the S3 listing does not show (empty directories made over NFS) goes
    # with the bucket: delete it, retrying once the last keys are gone.
    for _ in range(3):
        try:
            s3.delete_bucket(Bucket=bucket)
            return
        except Exception:  # noqa: BLE001
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def kernel_rounds(a, d, st, t0, rows, csv):
    """--kernel-runs rounds of the kernel-client workloads, a sample after each."""
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    s3 = s3_client(d)
    # smoke.sh copies /host/payload.bin (as tests/integration/kernel passes it).
    payload = os.path.join(d.work, "payload.bin")
    with open(payload, "wb") as f:
        f.write(random.Random(20261121).randbytes(3 * MIB + 123))
    for n in range(1, a.kernel_runs + 1):
        for wl in a.kernel_workloads.split(","):
            bucket = "k%d%s" % (n, wl)
            cmd = [os.path.join(top, "scripts", "nfsvm.sh"), "-p", str(d.nfs_port)]
            cmd += (["--file", payload] if wl == "smoke" else []) + [wl, bucket]
            log("round %d: %s" % (n, " ".join(cmd)))
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if p.returncode != 0:
                st.fail("kernel." + wl, "exit %d:\n%s\n%s" % (p.returncode, p.stdout[-2000:],
                                                               p.stderr[-2000:]))
                if p.returncode == 2:   # nfsvm.sh's usage/setup error (no nfsvm, no workload)
                    return
            else:
                st.ok("kernel." + wl)
            try:
                empty_bucket(s3, bucket)
            except s3.exceptions.NoSuchBucket:
                pass
            except Exception as e:  # noqa: BLE001
                st.fail("kernel.cleanup", "%s: %s" % (bucket, e))
        if not d.alive():
            st.fail("daemon", "s3nfsd died (status %s):\n%s" % (d.proc.returncode, d.tail()))
            return
        time.sleep(5)
        row = sample(d, st, t0)
        rows.append(row)
        csv.write(",".join(str(row[c]) for c in COLS) + "\n")
        csv.flush()
        log("after round %d: rss %d MiB anon %d MiB fds %d threads %d store %s MiB" % (
            n, row["vmrss_kb"] // 1024, row["rssanon_kb"] // 1024, row["fds"], row["threads"],
            row["store_used_mb"]))


def kernel_verdict(rows, max_growth_mb):
    anon = [r["rssanon_kb"] / 1024 for r in rows[1:]]   # rows[0]: before the first round
    text = "RssAnon after each round: %s MiB" % " -> ".join("%.1f" % x for x in anon)
    if len(anon) < 2:
        return False, "too few rounds to judge; " + text
    if anon[-1] - anon[-2] >= max_growth_mb:
        return False, "GROWING: %s (last round %+.1f MiB, limit %.0f)" % (
            text, anon[-1] - anon[-2], max_growth_mb)
    return True, "LEVELED OFF: %s (last round %+.1f MiB, limit %.0f)" % (
        text, anon[-1] - anon[-2], max_growth_mb)


# ---------------------------------------------------------------- main

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--wrap", default="", help="command prefix, e.g. 'valgrind --leak-check=full'")
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--interval", type=float, default=10, help="seconds between samples")
    p.add_argument("--s3-workers", type=int, default=4)
    p.add_argument("--nfs-workers", type=int, default=3)
    p.add_argument("--s3-keys", type=int, default=40, help="objects kept per S3 worker")
    p.add_argument("--nfs-files", type=int, default=60, help="files kept per NFS worker")
    p.add_argument("--idle-conns", type=int, default=200, help="held per listener")
    p.add_argument("--expiry-conns", type=int, default=20, help="per round and listener")
    p.add_argument("--churn-rate", type=float, default=5, help="connect+request+close per s")
    p.add_argument("--idle-timeout", type=int, default=20, help="s3_idle_timeout_s for the run")
    p.add_argument("--nfs-idle", action="store_true",
                   help="the daemon has nfs_idle_timeout_s: set it and expect NFS expiry")
    p.add_argument("--hup-secs", type=float, default=60)
    p.add_argument("--data-file-size", default="1GiB")
    p.add_argument("--max-growth-mb", type=float, default=8)
    p.add_argument("--set", action="append", help="extra daemon option NAME=VALUE")
    p.add_argument("--kernel-runs", type=int, default=0,
                   help="instead of the mixed load: N rounds of kernel-client workloads")
    p.add_argument("--kernel-workloads", default="smoke,fio",
                   help="comma list of tests/integration/kernel/workloads (default smoke,fio)")
    p.add_argument("--leaks-only", action="store_true",
                   help="memory verdict for information only (a sanitizer or valgrind keeps "
                        "freed memory in quarantine): fail on leaks and failed requests")
    p.add_argument("--csv", default="")
    p.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = p.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = tempfile.mkdtemp(prefix="s3nfs-soak.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    csv_path = a.csv or os.path.join(os.getcwd(), "soak-%s.csv" % time.strftime("%Y%m%dT%H%M"))
    d = Daemon(a, work)
    st = Stats()
    stop = threading.Event()
    threads = []
    rows = []
    rc = 1
    try:
        lib = NfsLib()
        d.start()
        log("s3nfsd pid %d, S3 %d, NFS %d, admin %d, work %s" % (
            d.proc.pid, d.s3_port, d.nfs_port, d.admin_port, work))
        s3 = s3_client(d)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="ping", Body=b"p" * 512)
        url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "ping"},
                                        ExpiresIn=7 * 24 * 3600)
        u = urllib.parse.urlsplit(url)
        get_path = u.path + "?" + u.query
        if a.kernel_runs:
            t0 = time.time()
            with open(csv_path, "w") as csv:
                csv.write(",".join(COLS) + "\n")
                rows.append(sample(d, st, t0))
                csv.write(",".join(str(rows[0][c]) for c in COLS) + "\n")
                kernel_rounds(a, d, st, t0, rows, csv)
        else:
            specs = [(s3_worker, (a, d, st, stop, i)) for i in range(a.s3_workers)]
            specs += [(nfs_worker, (a, d, st, stop, i, lib)) for i in range(a.nfs_workers)]
            specs += [(idle_holders, (a, d, st, stop, get_path)), (idle_expiry, (a, d, st, stop)),
                      (churn, (a, d, st, stop, get_path, lib)), (reloader, (a, d, st, stop))]
            for fn, args in specs:
                t = threading.Thread(target=fn, args=args, name=fn.__name__, daemon=True)
                t.start()
                threads.append(t)
            t0 = time.time()
            end = t0 + a.minutes * 60
            with open(csv_path, "w") as csv:
                csv.write(",".join(COLS) + "\n")
                while True:
                    if not d.alive():
                        st.fail("daemon", "s3nfsd died (status %s):\n%s" % (d.proc.returncode,
                                                                            d.tail()))
                        break
                    row = sample(d, st, t0)
                    rows.append(row)
                    csv.write(",".join(str(row[c]) for c in COLS) + "\n")
                    csv.flush()
                    if len(rows) % max(1, int(60 / a.interval)) == 1:
                        log("t=%4.0fs rss %d MiB anon %d MiB fds %d threads %d store %s MiB "
                            "requests %d errors %d" % (
                                row["t_s"], row["vmrss_kb"] // 1024, row["rssanon_kb"] // 1024,
                                row["fds"], row["threads"], row["store_used_mb"], row["requests"],
                                row["errors"]))
                    if time.time() >= end:
                        break
                    time.sleep(max(0.0, min(a.interval, end - time.time())))
        stop.set()
        log("load stopping")
        for t in threads:
            t.join(120)
        if d.alive() and not a.kernel_runs:
            rows.append(sample(d, st, t0))   # after the load: idle connections closed
        rc = 0
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        stop.set()
    finally:
        stop.set()
        exit_code = d.stop()

    # ---- summary
    print("\n== s3nfs soak: %.1f min, %d samples, CSV %s" % (a.minutes, len(rows), csv_path))
    print("daemon: %s%s, exit status %s" % (a.wrap + " " if a.wrap else "", a.bin, exit_code))
    if rows:
        print("%-16s %12s %12s %12s" % ("column", "first", "last", "max"))
        for c in COLS[1:10]:
            vals = [r[c] for r in rows]
            print("%-16s %12s %12s %12s" % (c, vals[0], vals[-1], max(vals)))
        # The last row may be the after-load sample: judge the samples under load.
        if a.kernel_runs:
            leveled, text = kernel_verdict(rows, a.max_growth_mb)
        else:
            leveled, text = verdict(rows[:-1] if len(rows) > 10 else rows, a.max_growth_mb)
    else:
        leveled, text = False, "no samples"
    print("requests by kind:")
    with st.lock:
        for k in sorted(st.ops):
            print("  %-20s %9d" % (k, st.ops[k]))
        total_ops, total_err = sum(st.ops.values()), sum(st.errors.values())
        print("requests %d, unexpected failures %d %s" % (total_ops, total_err,
                                                          dict(sorted(st.errors.items()))))
        for line in st.first_errors:
            print("  " + line)
    try:
        with open(d.log_path, "rb") as f:
            dlog = f.read().decode(errors="replace")
    except OSError:
        dlog = ""
    leaks = re.findall(r"ERROR: (LeakSanitizer|AddressSanitizer)[^\n]*|"
                       r"definitely lost: [1-9][\d,]* bytes[^\n]*|runtime error:[^\n]*", dlog)
    if leaks:
        print("sanitizer/valgrind findings in the daemon log (%s):" % d.log_path)
        for m in sorted(set(leaks))[:10]:
            print("  " + m)
    print("verdict: " + text)
    if a.leaks_only:
        print("(--leaks-only: the memory verdict does not count)")
    ok = (rc == 0 and (leveled or a.leaks_only) and total_err == 0 and exit_code == 0
          and not leaks)
    print("RESULT %s" % ("PASS" if ok else "FAIL"))
    if a.keep or not ok:
        print("work dir kept: %s (daemon log: %s)" % (work, d.log_path))
        # The data store is no use for a post-mortem; the log is.
        shutil.rmtree(d.data_dir, ignore_errors=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
