# SPDX-License-Identifier: Apache-2.0
"""Capacity and full stores: data files that start small and grow on demand,
the capacity lines of the banner and /metrics, a full store answering S3 with
507 InsufficientStorage (which boto3 and the aws cli do not retry) and NFS with
NFS3ERR_NOSPC on every write path, partial NFS files after a refused write
(every acknowledged byte kept), and a host file system filled from outside
while S3 and NFS clients write (clean errors, recovery without a restart, a
live daemon, everything acknowledged intact).

The file-system test mounts a tmpfs as the data dir: it needs root and is
skipped, saying why, when mounting is not permitted."""
import os
import re
import subprocess
import sys
import time
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tenants"))
from tenutil import NFS3ERR_NOSPC, FILE_SYNC, UNSTABLE, Nfs, s3_code  # noqa: E402
from rpc3 import COMMIT, SETATTR, Packer, sattr3  # noqa: E402

MiB = 1 << 20


def data_file(d, i=0):
    return os.path.join(d.data_dir, f"data.{i:03d}")


def metric(d, name):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\d+)$", text, re.M)
    assert m, name
    return int(m.group(1))


def bucket_fh(c, bucket, export="/"):
    """MNT @p export and LOOKUP @p bucket in it: the bucket's handle."""
    st, root = c.mount(export)
    assert st == 0
    st, bfh = c.lookup(root, bucket)
    assert st == 0
    return bfh


def commit(c, fh):
    st, _ = c.nfs(COMMIT, Packer().opaque(fh).u64(0).u32(0).bytes())
    return st


def setattr_size(c, fh, size):
    st, _ = c.nfs(SETATTR, Packer().opaque(fh).raw(sattr3(size=size)).u32(0).bytes())
    return st


def put_codes(s3, bucket, key, body):
    """None on success, else (HTTP status, S3 code)."""
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        return None
    except ClientError as e:
        return s3_code(e)


def access_lines(d, needle):
    with open(d.log_path, errors="replace") as f:
        return sum(1 for line in f if needle in line and " status=" in line)


def requests_for(d, path):
    """How many S3 PUTs of @p path the access log shows. Access lines are
    buffered per loop thread: wait until two later marker requests are logged
    (every buffer is written out in each round of the log's flusher)."""
    for i in range(2):
        marker = f"/marker-{os.urandom(4).hex()}"
        try:
            urllib.request.urlopen(d.s3_endpoint + marker, timeout=10)
        except OSError:
            pass
        for _ in range(400):
            if access_lines(d, f" {marker} "):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the access log never showed the marker request")
    return access_lines(d, f" PUT {path} ")


def fill_s3(s3, bucket, prefix, size=4 * MiB, most=200):
    """PUT objects until the store refuses one: the keys stored and the refusal."""
    stored = []
    for i in range(most):
        key = f"{prefix}{i}"
        body = bytes([i % 251]) * size
        err = put_codes(s3, bucket, key, body)
        if err:
            return stored, err
        stored.append(key)
    pytest.fail("the store never filled")


# ---- grow on demand ----

def test_fresh_store_starts_small_and_grows(daemon_factory):
    """A fresh daemon's data file is data_file_initial long, grows as data is
    written (never past data_file_size), and the banner and /metrics show it."""
    d = daemon_factory(extra_args=["--set", "data_file_initial=8MiB",
                                   "--set", "data_file_size=256MiB"]).start()
    assert os.path.getsize(data_file(d)) == 8 * MiB
    log = open(d.log_path).read()
    m = re.search(r"capacity: +(\S+ \S+) used of 8\.0 MiB; data files grow up to 256\.0 MiB "
                  r"\(data_file_size x data_files\); (\S+ \S+) free on the file system", log)
    assert m, log
    assert metric(d, "s3nfs_store_capacity_bytes") == 8 * MiB
    assert metric(d, "s3nfs_store_limit_bytes") == 256 * MiB
    assert metric(d, "s3nfs_store_fs_free_bytes") > 0
    with Nfs(d) as c:  # df over NFS: what may still be written, not the file's size now
        st, root = c.mount("/")
        st, fs = c.fsstat(root)
        assert st == 0
        room = min(256 * MiB, 8 * MiB + metric(d, "s3nfs_store_fs_free_bytes"))
        assert abs(fs["tbytes"] - room) <= 64 * MiB and fs["fbytes"] <= fs["tbytes"]
        assert fs["tbytes"] > 8 * MiB
    s3 = d.boto3()
    s3.create_bucket(Bucket="grow")
    bodies = {f"o{i}": os.urandom(3 * MiB) for i in range(10)}
    for k, v in bodies.items():
        s3.put_object(Bucket="grow", Key=k, Body=v)
    size = os.path.getsize(data_file(d))
    assert 30 * MiB <= size <= 256 * MiB
    assert metric(d, "s3nfs_store_capacity_bytes") == size
    d.restart()
    assert os.path.getsize(data_file(d)) == size
    assert metric(d, "s3nfs_store_capacity_bytes") == size
    for k, v in bodies.items():
        assert d.boto3().get_object(Bucket="grow", Key=k)["Body"].read() == v


# ---- a full store ----

@pytest.fixture
def small(daemon_factory):
    """A daemon whose store holds 64 MiB at most (the file grows to it)."""
    d = daemon_factory(extra_args=["--set", "data_file_initial=16MiB",
                                   "--set", "data_file_size=64MiB"]).start()
    d.boto3().create_bucket(Bucket="full")
    return d


def test_full_store_s3_507_not_retried(small):
    """A full store answers 507 InsufficientStorage; boto3 (legacy and standard
    retry modes) and the aws cli send each refused PUT once; deleting objects
    makes room again without a restart."""
    d = small
    s3 = d.boto3()
    stored, err = fill_s3(s3, "full", "k")
    assert err == (507, "InsufficientStorage")
    assert metric(d, "s3nfs_store_capacity_bytes") == 64 * MiB
    body = b"x" * (8 * MiB)
    for mode in ("legacy", "standard"):
        c = d.boto3(config=Config(s3={"addressing_style": "path"}, retries={"mode": mode}))
        assert put_codes(c, "full", f"r-{mode}", body) == (507, "InsufficientStorage")
        assert requests_for(d, f"/full/r-{mode}") == 1, mode
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1")
    env.pop("AWS_MAX_ATTEMPTS", None)
    env.pop("AWS_RETRY_MODE", None)
    src = os.path.join(os.path.dirname(d.data_dir), "body.bin")
    with open(src, "wb") as f:
        f.write(body)
    r = subprocess.run(["aws", "--endpoint-url", d.s3_endpoint, "s3api", "put-object",
                        "--bucket", "full", "--key", "r-cli", "--body", src],
                       env=env, capture_output=True, text=True, timeout=120)
    os.unlink(src)
    assert r.returncode != 0
    assert "InsufficientStorage" in r.stderr, r.stderr
    assert requests_for(d, "/full/r-cli") == 1
    # room again: delete two objects, the next PUT fits
    for k in stored[:2]:
        s3.delete_object(Bucket="full", Key=k)
    s3.put_object(Bucket="full", Key="after", Body=b"y" * (4 * MiB))
    for k in stored[2:]:
        i = int(k[1:])
        assert s3.get_object(Bucket="full", Key=k)["Body"].read() == bytes([i % 251]) * (4 * MiB)


def write_until_refused(c, fh, total, stable):
    """Write [0, total) sequentially in 1 MiB UNSTABLE/FILE_SYNC writes until one
    is refused: (the bytes acknowledged, the refusing status or 0)."""
    acked = bytearray()
    while len(acked) < total:
        chunk = bytes([(len(acked) // MiB * 7 + 1) % 256]) * MiB
        st, r = c.write(fh, len(acked), chunk, stable)
        if st != 0:
            return bytes(acked), st
        assert r["count"] == len(chunk)
        acked += chunk
    return bytes(acked), 0


def check_partial(d, c, fh, acked, bucket, key):
    """After a refused write: COMMIT succeeds, the file is exactly the acknowledged
    bytes (size included), over NFS and S3, and still after a restart."""
    assert commit(c, fh) == 0
    st, a = c.getattr(fh)
    assert st == 0 and a["size"] == len(acked)
    assert c.read_all(fh, chunk=MiB) == acked
    assert d.boto3().get_object(Bucket=bucket, Key=key)["Body"].read() == acked


def test_full_store_nfs_nospc(small):
    """Over NFS a full store answers NFS3ERR_NOSPC (not EIO) to UNSTABLE and
    FILE_SYNC writes; the UNSTABLE writes acknowledged before it filled commit
    (their space was taken when they were written) and the partial file keeps
    every acknowledged byte, also across a restart."""
    d = small
    d.boto3().put_object(Bucket="full", Key="ballast", Body=b"\0" * (52 * MiB))
    with Nfs(d) as c:
        bfh = bucket_fh(c, "full")
        st, fh = c.create(bfh, "unstable")
        assert st == 0
        acked, refused = write_until_refused(c, fh, 100 * MiB, UNSTABLE)
        assert refused == NFS3ERR_NOSPC
        assert 4 * MiB <= len(acked) <= 12 * MiB
        check_partial(d, c, fh, acked, "full", "unstable")
        st, fh2 = c.create(bfh, "sync")
        assert st == 0
        assert c.write(fh2, 0, b"z" * MiB, FILE_SYNC)[0] == NFS3ERR_NOSPC
        st, a = c.getattr(fh2)
        assert st == 0 and a["size"] == 0
    d.restart()
    assert d.boto3().get_object(Bucket="full", Key="unstable")["Body"].read() == acked


def test_partial_file_quota(daemon_factory):
    """A 40 MiB file written over NFS into a 10 MiB tenant quota: the writes
    up to the quota are acknowledged, the first past it answers NFS3ERR_DQUOT,
    COMMIT succeeds, and the file holds exactly the acknowledged bytes."""
    from tenutil import NFS3ERR_DQUOT, Admin, make_tenant
    d = daemon_factory().start()
    adm = Admin(d)
    t = make_tenant(adm, "partial", clients=["127.0.0.1/32"], export_path="/partial")
    adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": 10 * MiB})
    d.boto3(access_key=t.akey, secret_key=t.secret).create_bucket(Bucket="pquota")
    with Nfs(d) as c:
        bfh = bucket_fh(c, "pquota", "/partial")
        for stable in (UNSTABLE, FILE_SYNC):
            name = f"f{stable}"
            st, fh = c.create(bfh, name)
            assert st == 0
            acked, refused = write_until_refused(c, fh, 40 * MiB, stable)
            assert refused == NFS3ERR_DQUOT
            assert 0 < len(acked) <= 10 * MiB
            assert commit(c, fh) == 0
            st, a = c.getattr(fh)
            assert st == 0 and a["size"] == len(acked)
            assert c.read_all(fh, chunk=MiB) == acked
            assert c.remove(bfh, name) == 0


# ---- the host file system full ----

@pytest.fixture
def tmpfs(tmp_path):
    """A 192 MiB tmpfs for the data dir, unmounted afterwards."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs as a small file system")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)])


def fill_fs(path):
    """Write a filler file until the file system is full."""
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * MiB)
                f.flush()
        except OSError:
            pass
    while True:  # the last few pages
        try:
            with open(path, "ab") as f:
                f.write(b"\0" * 4096)
        except OSError:
            break


class Writers:
    """An S3 and an NFS client writing in threads until stopped: what each had
    acknowledged, and the errors they saw (after the first error, each keeps
    going until it has seen a few, so the full file system is hit for sure)."""

    def __init__(self, d, bfh):
        import threading
        self.d, self.bfh = d, bfh
        self.s3_acked, self.nfs_acked = {}, {}
        self.s3_errors, self.nfs_errors = set(), set()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.s3_loop),
                        threading.Thread(target=self.nfs_loop)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()

    def more(self, n):
        return not self.stopping.is_set() or n < 4

    def s3_loop(self):
        s3, n = self.d.boto3(), 0
        for i in range(10000):
            if not self.more(n):
                return
            body = os.urandom(MiB if i % 3 else 200)
            err = put_codes(s3, "disk", f"bg{i}", body)
            if err is None:
                self.s3_acked[f"bg{i}"] = body
            else:
                self.s3_errors.add(err)
                n += 1

    def nfs_loop(self):
        with Nfs(self.d) as c:
            n = 0
            for i in range(10000):
                if not self.more(n):
                    return
                st, fh = c.create(self.bfh, f"bgf{i}")
                if st != 0:
                    self.nfs_errors.add(st)
                    n += 1
                    continue
                data = os.urandom(MiB)
                st, pos = c.write_all(fh, data, chunk=256 << 10)
                self.nfs_acked[f"bgf{i}"] = data[:pos]
                if st != 0:
                    self.nfs_errors.add(st)
                    n += 1


def test_host_fs_full_recovers(tmpfs):
    """The data dir's file system filled from outside while S3 and NFS clients
    write (in threads, during the fill, then one by one): S3 gets 507, NFS gets
    NFS3ERR_NOSPC (WRITE, CREATE, SETATTR growing a file), the daemon stays up; once the filler is gone writes succeed again
    without a restart, and everything acknowledged reads back intact."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    from s3nfsd_harness import Daemon
    d = Daemon(tmpfs, ["--set", "data_file_initial=16MiB", "--set", "data_file_size=1GiB"])
    d.log_path = os.path.join(os.path.dirname(tmpfs), "s3nfsd.log")
    d.start()
    try:
        s3 = d.boto3()
        s3.create_bucket(Bucket="disk")
        kept = {}
        for i in range(4):
            kept[f"pre{i}"] = os.urandom(2 * MiB)
            s3.put_object(Bucket="disk", Key=f"pre{i}", Body=kept[f"pre{i}"])
        with Nfs(d) as c:
            bfh = bucket_fh(c, "disk")
            st, fh = c.create(bfh, "nfsfile")
            assert st == 0
            nfs_bytes = os.urandom(3 * MiB)
            assert c.write_all(fh, nfs_bytes, chunk=MiB)[0] == 0
            # clients keep writing while the file system fills from outside
            writers = Writers(d, bfh)
            writers.start()
            fill_fs(os.path.join(tmpfs, "filler"))
            writers.stop()
            assert writers.s3_errors <= {(507, "InsufficientStorage")}, writers.s3_errors
            assert writers.nfs_errors <= {NFS3ERR_NOSPC}, writers.nfs_errors
            assert writers.s3_errors and writers.nfs_errors, "the writers never saw it full"
            # S3: small (inline, metadata only) and large (data) objects
            codes = set()
            for i in range(12):
                body = os.urandom(100 if i % 2 else 3 * MiB)
                err = put_codes(s3, "disk", f"full{i}", body)
                if err is None:
                    kept[f"full{i}"] = body
                else:
                    codes.add(err)
            assert codes == {(507, "InsufficientStorage")}, codes
            # NFS: growing writes, a create, a size extension
            sts = set()
            # up to 48 MiB: room left inside the data files' last growth (more of it
            # when the writers stopped mid-allocation under load) is used up first
            for i in range(48):
                st, _ = c.write(fh, len(nfs_bytes) + i * MiB, b"n" * MiB, FILE_SYNC)
                sts.add(st)
                if i >= 7 and NFS3ERR_NOSPC in sts:
                    break
            assert NFS3ERR_NOSPC in sts and sts <= {0, NFS3ERR_NOSPC}, sts
            # CREATE needs metadata pages only: LMDB reuses freed ones until it must
            # grow its file, then the create fails cleanly
            creates = set()
            for i in range(3000):
                st = c.create(bfh, f"c{i:04d}-" + "x" * 200)[0]
                creates.add(st)
                if st == NFS3ERR_NOSPC:
                    break
            assert NFS3ERR_NOSPC in creates and creates <= {0, NFS3ERR_NOSPC}, creates
            st, big = c.create(bfh, "grown")
            if st == 0:
                assert setattr_size(c, big, 200 * MiB) in (0, NFS3ERR_NOSPC)
            assert d.proc.poll() is None, d.tail()
            # space back: no restart
            os.unlink(os.path.join(tmpfs, "filler"))
            s3.put_object(Bucket="disk", Key="after", Body=b"a" * (3 * MiB))
            kept["after"] = b"a" * (3 * MiB)
            st, fh3 = c.create(bfh, "after-nfs")
            assert st == 0
            assert c.write_all(fh3, b"b" * (2 * MiB), chunk=MiB)[0] == 0
            st, r = c.write(fh, 0, nfs_bytes[:MiB], FILE_SYNC)
            assert st == 0
            got = c.read_all(fh, chunk=MiB)
            assert got[:len(nfs_bytes)] == nfs_bytes
        for k, v in list(kept.items()) + list(writers.s3_acked.items()):
            assert s3.get_object(Bucket="disk", Key=k)["Body"].read() == v, k
        with Nfs(d) as c:
            for name, data in writers.nfs_acked.items():
                st, fh = c.lookup(bfh, name)
                assert st == 0, name
                assert c.read_all(fh, chunk=MiB)[:len(data)] == data, name
        log = open(d.log_path).read()
        assert " CRIT " not in log
        assert d.stop() == 0
    finally:
        d.stop()


def test_start_without_room_names_the_option(tmpfs):
    """A file system too small for data_file_initial: the start fails (non-zero
    exit, no half-made data file) with a log line naming the option to lower;
    one that cannot hold data_file_size gets a warning line in the banner."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    from s3nfsd_harness import Daemon
    d = Daemon(tmpfs, ["--set", "data_file_initial=512MiB"])
    d.log_path = os.path.join(os.path.dirname(tmpfs), "s3nfsd-noroom.log")
    with pytest.raises(RuntimeError):
        d.start()
    d.stop()
    log = open(d.log_path).read()
    assert "lower data_file_initial" in log, log
    assert not os.path.exists(data_file(d))
    d = Daemon(tmpfs, ["--set", "data_file_initial=16MiB", "--set", "data_file_size=1GiB"])
    d.log_path = os.path.join(os.path.dirname(tmpfs), "s3nfsd-warn.log")
    d.start()
    try:
        log = open(d.log_path).read()
        assert re.search(r"warning: +the data files may grow 1008\.0 MiB more but the file "
                         r"system has \S+ \S+ free: .*lower data_file_size", log), log
    finally:
        assert d.stop() == 0
