#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/tier/recall_ab.py: the recall of builds side by side, with server CPU per MiB.

One Ceph RGW on loopback (tests/integration/rgw.py) and, in turn, one s3nfsd per
binary given (in the order given, AB_ROUNDS times: A B A B ...), each with a
tiered bucket over the RGW: a file of SIZE random bytes is PUT, uploaded (flush
barrier), evicted, and read whole by one presigned GET with curl (into
/dev/null, then checked by a second GET's SHA-256), and with AB_NFS=1 evicted
again and read by NFS READs of 1 MiB one at a time. Printed per run: MB/s, the
first byte (ms), the daemon's and RGW's CPU per MiB recalled (user + system,
from /proc: steadier than MB/s on a shared machine), the load average at the
start, what the daemon read from and wrote to the disk (MiB, /proc/PID/io), and
its extent writes by path (through the page cache or O_DIRECT, /metrics).
AB_AWS=1 adds an `aws s3 cp` of the same bytes from the RGW each round (with
its CPU per MiB, its own and RGW's); AB_AWS=same copies, before each recall,
the very object the recall reads instead (no extra copy in RGW's memory);
AB_PERF=PREFIX records `perf record -g` of the daemon during each GET
(PREFIX.<round><binary>); AB_SET="name=value ..." passes daemon settings.
Everything it creates is deleted (RGW's memstore holds every run's copy:
(rounds * binaries + 2) * SIZE of RAM; RGW frees deleted objects later).

    bench/tier/recall_ab.py SIZE BINARY [BINARY...]
"""
import hashlib, os, resource, shutil, subprocess, sys, tempfile, time, uuid
TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "tenants"))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "nfs"))
import rgw as rgwmod
import s3nfsd_harness as H
from tenutil import Admin, Nfs

def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)

def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")

def rdio(pid):
    with open(f"/proc/{pid}/io") as f:
        d = dict(l.split(": ") for l in f.read().splitlines())
    return int(d["read_bytes"]) >> 20, int(d["write_bytes"]) >> 20

def store_writes(d):
    """The daemon's extent writes so far: (through the page cache, O_DIRECT)."""
    import urllib.request
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as f:
        m = f.read().decode()
    got = {}
    for l in m.splitlines():
        if l.startswith("s3nfs_store_writes_total{path="):
            got[l.split('"')[1]] = int(float(l.split()[-1]))
        if l.startswith("s3nfs_tier_recall_memory_read_bytes_total "):
            got["mem"] = int(float(l.split()[-1])) >> 20
    return got.get("cached", 0), got.get("direct", 0), got.get("mem", 0)

def wait_for(pred, timeout, step=0.05, what="cond"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(step)
    sys.exit("timeout " + what)

size = size_arg(sys.argv[1]); bins = sys.argv[2:]
rounds = int(os.environ.get("AB_ROUNDS", "2"))
do_nfs = bool(os.environ.get("AB_NFS"))
extra_set = os.environ.get("AB_SET", "").split()
work = tempfile.mkdtemp(prefix="recall-ab-")
r = rgwmod.Rgw(os.path.join(work, "rgw"), memstore_bytes=max(4 << 30, (rounds * len(bins) + 2) * size + (1 << 30)))
try:
    r.start()
    rgw_pids = [p.pid for _, p, _ in r.procs]
    rs3 = r.boto3(); rs3.create_bucket(Bucket="bench")
    src = os.path.join(work, "file"); h = hashlib.sha256()
    with open(src, "wb") as f:
        left = size
        while left:
            blk = os.urandom(min(left, 16 << 20)); h.update(blk); f.write(blk); left -= len(blk)
    want = h.hexdigest()
    res = []
    awsenv = dict(os.environ, AWS_ACCESS_KEY_ID=r.access_key, AWS_SECRET_ACCESS_KEY=r.secret_key, AWS_DEFAULT_REGION="us-east-1",
                  AWS_CONFIG_FILE=os.path.join(work, "awscfg"))
    with open(awsenv["AWS_CONFIG_FILE"], "w") as f:
        f.write("[default]\nregion = us-east-1\ns3 =\n    max_concurrent_requests = 8\n    multipart_chunksize = 16MB\n    multipart_threshold = 16MB\n    addressing_style = path\n")
    aws_same = os.environ.get("AB_AWS") == "same"
    if os.environ.get("AB_AWS") and not aws_same:
        rs3.upload_file(src, "bench", "aws")
    def aws_round(key="aws"):
        if not os.environ.get("AB_AWS"):
            return
        l0 = os.getloadavg()[0]
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN); g0 = sum(cpu(p) for p in rgw_pids)
        t0 = time.monotonic()
        subprocess.run(["aws", "--endpoint-url", r.endpoint, "--only-show-errors", "s3", "cp", f"s3://bench/{key}", src + ".aws"], env=awsenv, check=True)
        t = time.monotonic() - t0; os.unlink(src + ".aws")
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN); g1 = sum(cpu(p) for p in rgw_pids)
        aws_cpu = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) * 1000 / (size >> 20)
        print(f"aws_get_mbs={size/1e6/t:.1f} aws_cpu_ms_per_mib={aws_cpu:.1f} "
              f"rgw_ms_per_mib={(g1 - g0) * 1000 / (size >> 20):.1f} load={l0:.1f}", flush=True)
    for rnd in range(rounds):
        if not aws_same:
            aws_round()
        for bi, b in enumerate(bins):
            H.BIN = b
            d = H.Daemon(os.path.join(work, f"d{rnd}{bi}"),
                         ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=100",
                          "--set", "tier_part_size=16777216", "--set", f"data_file_size={max(1<<30, 2*size + (256<<20))}",
                          "--set", "tier_recall_threads=8"] + sum((["--set", s] for s in extra_set), []))
            os.makedirs(d.data_dir, exist_ok=True)
            d.start()
            try:
                adm = Admin(d)
                pre = f"d{rnd}{bi}/"
                rem = adm.post("/remotes", {"name": "bench", "endpoint": r.endpoint, "bucket": "bench",
                                            "access_key": r.access_key, "secret_key": r.secret_key,
                                            "prefix": pre, "parallel": 8, "max_conns": 16})
                bk = "b" + uuid.uuid4().hex[:8]
                s3 = d.boto3(); s3.create_bucket(Bucket=bk)
                pol = {"remote": rem["id"], "upload_after_s": 3600}
                adm.put(f"/tenants/1/buckets/{bk}/tier", pol)
                def state():
                    return s3.head_object(Bucket=bk, Key="f")["ResponseMetadata"]["HTTPHeaders"].get("x-s3nfs-tier-state")
                with open(src, "rb") as f:
                    s3.upload_fileobj(f, bk, "f")
                wait_for(lambda: state() == "local", 300)
                bar = adm.call("POST", f"/tenants/1/buckets/{bk}/tier/flush")[1]["barrier"]
                wait_for(lambda: adm.get(f"/tenants/1/buckets/{bk}/tier/flush?barrier={bar}")["done"], 600, 0.05)
                if aws_same:  # aws s3 cp of the very object the recall reads
                    aws_round(rs3.list_objects_v2(Bucket="bench", Prefix=pre)["Contents"][0]["Key"])
                def evict():
                    adm.put(f"/tenants/1/buckets/{bk}/tier", dict(pol, evict_after_s=1))
                    wait_for(lambda: state() == "evicted", 600, 0.1)
                    adm.put(f"/tenants/1/buckets/{bk}/tier", pol)
                url = s3.generate_presigned_url("get_object", Params={"Bucket": bk, "Key": "f"}, ExpiresIn=3600)
                evict()
                pid = d.proc.pid
                c0 = cpu(pid); g0 = sum(cpu(p) for p in rgw_pids); l0 = os.getloadavg()[0]; io0 = rdio(pid)
                w0 = store_writes(d)
                perf = None
                if os.environ.get("AB_PERF"):
                    perf = subprocess.Popen(["perf", "record", "-g", "-F", "499", "-p", str(pid), "-o", os.environ["AB_PERF"] + f".{rnd}{bi}"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1)
                t0 = time.monotonic()
                out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_starttransfer}", url],
                                     capture_output=True, text=True, check=True).stdout.split()
                t = time.monotonic() - t0
                c1 = cpu(pid); g1 = sum(cpu(p) for p in rgw_pids); io1 = rdio(pid); w1 = store_writes(d)
                if perf:
                    perf.send_signal(2); perf.wait()
                assert out[0] == "200", out
                sha = subprocess.run(f"curl -sS '{url}' | sha256sum", shell=True, capture_output=True, text=True).stdout.split()[0]
                assert sha == want, "bytes differ"
                row = dict(bin=b, get_mbs=size / 1e6 / t,
                           ttfb_ms=float(out[1]) * 1000, cpu_ms_per_mib=(c1 - c0) * 1000 / (size >> 20),
                           rgw_ms_per_mib=(g1 - g0) * 1000 / (size >> 20), load=l0,
                           disk_rd_mib=io1[0] - io0[0], disk_wr_mib=io1[1] - io0[1])
                row["writes_cached"] = w1[0] - w0[0]; row["writes_direct"] = w1[1] - w0[1]
                row["from_mem_mib"] = w1[2] - w0[2]
                if do_nfs:
                    evict()
                    c0 = cpu(pid); t0 = time.monotonic(); hh = hashlib.sha256(); io0 = rdio(pid); wn = store_writes(d)
                    with Nfs(d) as n:
                        st, root = n.mount("/"); st, bfh = n.lookup(root, bk); st, fh = n.lookup(bfh, "f")
                        off = 0
                        while off < size:
                            st, rr = n.read(fh, off, 1 << 20)
                            if st == 10008:
                                time.sleep(0.05); continue
                            assert st == 0, st
                            hh.update(rr[0]); off += len(rr[0])
                    t = time.monotonic() - t0
                    assert hh.hexdigest() == want
                    row["nfs_mbs"] = size / 1e6 / t
                    row["nfs_cpu_ms_per_mib"] = (cpu(pid) - c0) * 1000 / (size >> 20)
                    row["nfs_disk_rd_mib"] = rdio(pid)[0] - io0[0]
                    row["nfs_from_mem_mib"] = store_writes(d)[2] - wn[2]
                print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
                s3.delete_object(Bucket=bk, Key="f")
            finally:
                d.stop(); shutil.rmtree(d.data_dir, ignore_errors=True)
            # remote copy goes with the prefix: delete it
            for o in rs3.list_objects_v2(Bucket="bench", Prefix=pre).get("Contents", []):
                rs3.delete_object(Bucket="bench", Key=o["Key"])
finally:
    r.stop()
    shutil.rmtree(work, ignore_errors=True)
