# SPDX-License-Identifier: Apache-2.0
"""Metadata of evicted files never touches the remote (issue 12: "listing,
stat, HEAD, GETATTR, READDIRPLUS never touch the remote"; docs/tiering.md
§ Eviction). The remote is a second s3nfsd, so what it was asked can be
counted on its side: its request log (one line per S3 request) and its
s3nfs_ops_total{proto="s3"} counters.

- files evicted, the remote up: S3 HEAD, ListObjectsV2 (flat, with a
  delimiter, with a prefix) and NFS LOOKUP, GETATTR, ACCESS, READDIR and
  READDIRPLUS of the files and their directories answer what they answered
  before eviction (size, ETag, Last-Modified, Content-Type, user metadata;
  mode, owner, size, times), each within a second, and the remote receives
  zero requests meanwhile (counted on the remote before and after); one S3
  GET then, which must recall, does reach the remote: the counting sees
  requests when there are some;
- the remote SIGKILLed: the same calls give the same answers just as
  quickly (nothing waits for a remote that is gone), while a read of an
  evicted file answers 503."""
import os
import re
import sys
import time
import urllib.request

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, wait_for  # noqa: E402

from rpc3 import Packer  # noqa: E402

MiB = 1024 * 1024
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_wait_ms=3000", "--set", "tier_recall_fail_ms=2000"]
ACCESS = 4
ACCESS_ALL = 0x3f  # READ LOOKUP MODIFY EXTEND DELETE EXECUTE
QUICK = 1.0  # seconds one metadata call may take (a local LMDB read; slack for a loaded box)

FILES = {"top.bin": 9 * MiB + 7, "dir/a.bin": 3 * MiB, "dir/b.bin": 200_000,
         "dir/sub/c.bin": 1 * MiB + 1}


def remote_s3_ops(d):
    """S3 operations the s3nfsd @d finished, all tenants and operations together."""
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(int(float(m.group(1))) for m in
               re.finditer(r'^s3nfs_ops_total\{proto="s3",[^}]*\} (\S+)$', text, re.M))


class RemoteRequests:
    """What the remote s3nfsd was asked since a mark: its request log lines and
    its S3 operation counters."""

    LINE = re.compile(r" S3 .* op=(\w+) ([A-Z]+) (\S+) status=(\d+)")

    def __init__(self, d):
        self.d = d
        self.mark()

    def mark(self):
        time.sleep(0.3)  # request log lines are written within SRV_LOG_FLUSH_MS (100 ms)
        self.pos = os.path.getsize(self.d.log_path)
        self.ops = remote_s3_ops(self.d)

    def since(self):
        """(log lines, counted operations) since the mark."""
        time.sleep(0.3)
        with open(self.d.log_path, encoding="utf-8", errors="replace") as f:
            f.seek(self.pos)
            lines = [m.group(0) for m in self.LINE.finditer(f.read())]
        return lines, remote_s3_ops(self.d) - self.ops


def timed(fn, *a, **kw):
    t0 = time.time()
    r = fn(*a, **kw)
    dt = time.time() - t0
    assert dt < QUICK, f"{getattr(fn, '__name__', fn)} took {dt:.2f} s"
    return r


def access(n, fh, mask=ACCESS_ALL):
    st, u = n.nfs(ACCESS, Packer().opaque(fh).u32(mask).bytes())
    u.post_op_attr()
    return st, (u.u32() if st == 0 else None)


def stable(a):
    """The attributes that must not move (not the atime: a read-time-free view)."""
    return {k: v for k, v in a.items() if k != "atime"}


def s3_view(s3, b):
    """Every S3 metadata answer about the bucket's files."""
    out = {}
    for k in FILES:
        h = timed(s3.head_object, Bucket=b, Key=k)
        hh = h["ResponseMetadata"]["HTTPHeaders"]
        out["HEAD " + k] = (h["ContentLength"], h["ETag"], h["LastModified"], h["ContentType"],
                            h["Metadata"], hh.get("x-s3nfs-tier-state"))
    for kw in ({}, {"Delimiter": "/"}, {"Prefix": "dir/"}, {"Prefix": "dir/", "Delimiter": "/"},
               {"Prefix": "dir/sub/c"}):
        r = timed(s3.list_objects_v2, Bucket=b, **kw)
        out["LIST " + repr(sorted(kw.items()))] = (
            [(o["Key"], o["Size"], o["ETag"], o["LastModified"]) for o in r.get("Contents", [])],
            [p["Prefix"] for p in r.get("CommonPrefixes", [])])
    return out


def nfs_view(d, b):
    """Every NFS metadata answer about the bucket's files and directories."""
    out = {}
    with Nfs(d) as n:
        st, root = n.mount("/")
        assert st == 0
        st, bfh = timed(n.lookup, root, b)
        assert st == 0
        dirs = {"": bfh}
        for k in FILES:
            fh = bfh
            parts = k.split("/")
            for i, part in enumerate(parts):
                st, fh = timed(n.lookup, fh, part)
                assert st == 0, (k, part, st)
                if i < len(parts) - 1:
                    dirs["/".join(parts[:i + 1])] = fh
            st, a = timed(n.getattr, fh)
            assert st == 0, (k, st)
            assert a["size"] == FILES[k]
            out["GETATTR " + k] = stable(a)
            out["ACCESS " + k] = timed(access, n, fh)
        for name, dfh in sorted(dirs.items()):
            st, a = timed(n.getattr, dfh)
            assert st == 0
            out["GETATTR dir " + name] = stable(a)
            out["ACCESS dir " + name] = timed(access, n, dfh)
            st, (ents, eof, _) = timed(n.readdir, dfh)
            assert st == 0 and eof
            out["READDIR " + name] = sorted((e[1], e[0]) for e in ents)
            st, (ents, eof, _, _) = timed(n.readdirplus, dfh, maxcount=65536)
            assert st == 0 and eof
            assert all(e["attr"] and e["fh"] for e in ents if e["name"] not in (".", "..")), ents
            out["READDIRPLUS " + name] = sorted(
                (e["name"], e["fileid"], stable(e["attr"]) if e["attr"] else None,
                 e["fh"] is not None) for e in ents)
    return out


def test_evicted_metadata_never_asks_the_remote(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    dm = daemon_factory(extra_args=FAST).start()
    adm = Admin(dm)
    r = add_remote(adm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket)
    b = "ml" + os.urandom(4).hex()
    s3 = dm.boto3()
    s3.create_bucket(Bucket=b)
    data = {k: os.urandom(n) for k, n in FILES.items()}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v, ContentType="application/x-" + k.replace("/", "-"),
                      Metadata={"name": k.replace("/", "_")})

    # what every metadata call answers while the files are local
    before_s3, before_nfs = s3_view(s3, b), nfs_view(dm, b)
    assert all(v[-1] is None for k, v in before_s3.items() if k.startswith("HEAD "))

    adm.put(f"/tenants/1/buckets/{b}/tier",
            {"remote": r["id"], "upload_after_s": 0, "evict_after_s": 1})
    for k in FILES:
        wait_for(lambda k=k: s3.head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
                 .get("x-s3nfs-tier-state") == "evicted", timeout=60, what=f"{k} evicted")
    up = wait_for(lambda: (lambda u: u if u and u["evicted_files"] == len(FILES) else None)(
        adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]), what="the stats to say evicted")
    assert up["local_bytes"] < MiB and up["pending_files"] == 0, up

    # the uploader is done with the remote (uploads confirmed, nothing pending): a quiet
    # second on the remote's side first, so what follows is counted from a still point
    rr = RemoteRequests(rem.daemon)
    time.sleep(1)
    quiet, nops = rr.since()
    assert quiet == [] and nops == 0, f"the remote still busy after the evictions: {quiet}"

    # the remote up: every metadata call, three rounds, asks it nothing
    rr.mark()
    for _ in range(3):
        evicted_s3, evicted_nfs = s3_view(s3, b), nfs_view(dm, b)
    lines, nops = rr.since()
    assert lines == [] and nops == 0, \
        f"metadata calls on evicted files reached the remote ({nops} operations): {lines}"

    # and they answer what they answered before eviction (the state header aside)
    for k, v in before_s3.items():
        got = evicted_s3[k]
        if k.startswith("HEAD "):
            assert got[:-1] == v[:-1], k
            assert got[-1] == "evicted", (k, got[-1])
        else:
            assert got == v, k
    for k, v in before_nfs.items():
        if k.startswith("GETATTR ") and not k.startswith("GETATTR dir"):
            g = evicted_nfs[k]
            for f in ("type", "mode", "nlink", "uid", "gid", "size", "fileid", "mtime", "ctime"):
                assert g[f] == v[f], (k, f, g[f], v[f])
        elif k.startswith("READDIRPLUS"):
            for e0, e1 in zip(v, evicted_nfs[k]):
                assert e0[:2] == e1[:2] and e0[3] == e1[3], k
                assert (e0[2] is None) == (e1[2] is None), (k, e0[0])
                if e0[2] is None:
                    continue
                for f in ("type", "mode", "size", "mtime", "ctime", "uid", "gid"):
                    assert e0[2][f] == e1[2][f], (k, e0[0], f)
        elif k.startswith("GETATTR dir"):
            g = evicted_nfs[k]
            for f in ("type", "mode", "uid", "gid", "fileid", "mtime"):
                assert g[f] == v[f], (k, f)
        else:
            assert evicted_nfs[k] == v, k
    for k in FILES:
        assert evicted_nfs["ACCESS " + k][0] == 0

    # the counting sees requests when there are some: a read of an evicted file recalls
    rr.mark()
    assert s3.get_object(Bucket=b, Key="dir/b.bin")["Body"].read() == data["dir/b.bin"]
    lines, nops = rr.since()
    assert nops >= 1 and any(" GET " in x and "/p/dir/b.bin" in x for x in lines), (nops, lines)
    wait_for(lambda: s3.head_object(Bucket=b, Key="dir/b.bin")["ResponseMetadata"]
             ["HTTPHeaders"].get("x-s3nfs-tier-state") == "evicted", timeout=60,
             what="dir/b.bin evicted again")

    # the remote gone: the same answers, as quickly
    rem.daemon.kill()
    down_s3, down_nfs = s3_view(s3, b), nfs_view(dm, b)
    assert down_s3 == evicted_s3
    for k, v in evicted_nfs.items():
        if k.startswith("GETATTR dir") or k.startswith("READDIRPLUS"):
            continue  # a directory's atime aside, compared above; the files' below
        assert down_nfs[k] == v, k
    for k in [k for k in evicted_nfs if k.startswith("READDIRPLUS")]:
        def files(ents):
            return [(e[0], e[1], e[2] and (e[2]["size"], e[2]["mtime"], e[2]["ctime"]))
                    for e in ents]
        assert files(down_nfs[k]) == files(evicted_nfs[k]), k
    # while reading the bytes needs the remote: a clear retryable error
    try:
        s3.get_object(Bucket=b, Key="dir/a.bin")["Body"].read()
        raise AssertionError("an evicted file read with its remote down")
    except botocore.exceptions.ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
