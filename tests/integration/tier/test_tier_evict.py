# SPDX-License-Identifier: Apache-2.0
"""Eviction and recall of the remote tier, against the real Ceph RGW of the
session (`rgw`) and a second s3nfsd as a remote that can be slowed or stopped:

- files copied to the remote are evicted once not read for evict_after_s, or
  least recently read first while the store is over the high watermark;
  pinned prefixes stay local; metadata (HEAD, listing, GETATTR) is unchanged
  and never asks the remote; the state header says `evicted`;
- reads recall them: S3 GET (whole, ranged) and NFS READ give the file's bytes,
  the range a read asks for first (its first bytes long before the whole file
  is back), one recall shared by concurrent readers;
- a remote object overwritten or deleted behind our back is an error (S3 500,
  NFS EIO), never its bytes; a remote that is down is a retryable error (S3
  503, NFS JUKEBOX), then EIO after tier_recall_fail_ms;
- writes, truncation and renames of an evicted file keep their meaning;
- SIGKILL during evictions and during a recall: the store check is clean and
  every byte is there after a restart;
- read times survive a restart (clean or SIGKILL): right after it, a file not
  read is evicted by age while one read shortly before it stays;
- usage (quotas) keeps counting an evicted file; /metrics counts evictions and
  recalls."""
import hashlib
import os
import re
import subprocess
import sys
import threading
import time
import uuid

import botocore.exceptions
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from s3nfsd_harness import BIN  # noqa: E402
from tenutil import FILE_SYNC, Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402

MiB = 1024 * 1024
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_wait_ms=5000", "--set", "tier_recall_fail_ms=3000"]
JUKEBOX, EIO = 10008, 5


d = daemon_fixture("tier-evict", FAST)


def tiered_bucket(d, endpoint, akey, skey, rbucket, **policy):
    adm = Admin(d)
    r = add_remote(adm, endpoint, akey, skey, rbucket)
    b = "ev" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    body = {"remote": r["id"], "upload_after_s": 0}
    body.update(policy)
    got = adm.put(f"/tenants/1/buckets/{b}/tier", body)
    for k, v in policy.items():
        assert got[k] == v, got
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"] is not None,
             what="a first pass")
    return b


def new_remote_bucket(s3):
    return new_bucket(s3, "ev-")


def state(d, b, k):
    h = d.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state")


def metric(d, name):
    import urllib.request
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def get(d, b, k, rng=None):
    kw = {"Range": rng} if rng else {}
    return d.boto3().get_object(Bucket=b, Key=k, **kw)["Body"].read()


def s3_error(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"], r["Error"].get(
            "Message", "")
    raise AssertionError("no error")


def check_store(d):
    r = subprocess.run([BIN, "--data-dir", d.data_dir, "--set", "data_file_size=1GiB",
                        "--check-store"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"store check failed:\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "store check: consistent" in r.stdout


def nfs_fh(n, b, key):
    st, root = n.mount("/")
    assert st == 0
    st, fh = n.lookup(root, b)
    assert st == 0
    for part in key.split("/"):
        st, fh = n.lookup(fh, part)
        assert st == 0, (key, st)
    return fh


def test_evict_by_age_pins_metadata_and_recall(d, rgw):
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=2,
                      pin_prefixes=["keep/"])
    s3 = d.boto3()
    big = os.urandom(20 * MiB + 12345)
    small = os.urandom(300_000)
    pinned = os.urandom(3 * MiB)
    usage0 = Admin(d).get(f"/tenants/1/buckets/{b}/usage")["bytes"]
    s3.put_object(Bucket=b, Key="big.bin", Body=big, ContentType="application/x-big",
                  Metadata={"k": "v"})
    s3.put_object(Bucket=b, Key="dir/small.bin", Body=small)
    s3.put_object(Bucket=b, Key="keep/p.bin", Body=pinned)
    heads = {k: s3.head_object(Bucket=b, Key=k) for k in ("big.bin", "dir/small.bin")}
    usage1 = Admin(d).get(f"/tenants/1/buckets/{b}/usage")["bytes"]
    ev0 = metric(d, "s3nfs_tier_evictions_total") or 0
    wait_for(lambda: state(d, b, "big.bin") == "evicted", what="big evicted")
    wait_for(lambda: state(d, b, "dir/small.bin") == "evicted", what="small evicted")
    time.sleep(1)
    assert state(d, b, "keep/p.bin") == "uploaded"  # pinned: stays local
    # metadata unchanged: HEAD, listing, GETATTR; usage still counts the bytes
    for k, h0 in heads.items():
        h = s3.head_object(Bucket=b, Key=k)
        for f in ("ETag", "ContentLength", "LastModified", "ContentType", "Metadata"):
            assert h[f] == h0[f], (k, f)
        hh = h["ResponseMetadata"]["HTTPHeaders"]
        assert hh["x-s3nfs-tier-state"] == "evicted" and hh["x-s3nfs-tier-etag"]
    lst = {o["Key"]: o for o in s3.list_objects_v2(Bucket=b)["Contents"]}
    assert lst["big.bin"]["Size"] == len(big) and lst["big.bin"]["ETag"] == heads["big.bin"]["ETag"]
    with Nfs(d) as n:
        st, a = n.getattr(nfs_fh(n, b, "big.bin"))
        assert st == 0 and a["size"] == len(big)
    assert Admin(d).get(f"/tenants/1/buckets/{b}/usage")["bytes"] == usage1 > usage0
    info = Admin(d).get(f"/tenants/1/buckets/{b}/tier")
    assert info["evict_after_s"] == 2 and info["pin_prefixes"] == ["keep/"]
    up = wait_for(lambda: (lambda u: u if u["evicted_files"] == 2 else None)(
        Admin(d).get(f"/tenants/1/buckets/{b}/tier")["uploads"]), what="stats")
    assert up["evicted_bytes"] == len(big) + len(small)
    assert up["remote_bytes"] == len(big) + len(small) + len(pinned)
    # capacity: only the pinned file is local, and it may not be evicted
    assert len(pinned) <= up["local_bytes"] < len(pinned) + MiB, up
    assert up["evictable_bytes"] == 0, up
    lab = '{tenant="1",bucket="%s"}' % b
    for name, key in (("local", "local_bytes"), ("evictable", "evictable_bytes"),
                      ("remote", "remote_bytes"), ("evicted", "evicted_bytes")):
        assert metric(d, f"s3nfs_tier_{name}_bytes{lab}") == up[key], name
    assert metric(d, "s3nfs_tier_evictions_total") >= ev0 + 2
    # recall: a ranged GET of the last MiB, then the whole file
    rec0 = metric(d, "s3nfs_tier_recalled_bytes_total") or 0
    assert get(d, b, "big.bin", f"bytes={len(big) - MiB}-") == big[-MiB:]
    assert get(d, b, "big.bin", "bytes=1000-2999") == big[1000:3000]
    assert hashlib.md5(get(d, b, "big.bin")).digest() == hashlib.md5(big).digest()
    wait_for(lambda: state(d, b, "big.bin") == "uploaded", what="big local again")
    assert metric(d, "s3nfs_tier_recalled_bytes_total") >= rec0 + len(big)
    assert metric(d, "s3nfs_tier_recall_seconds_count") >= 1
    # NFS: random reads of the evicted small file (over the S3 GET above: evicted again)
    wait_for(lambda: state(d, b, "dir/small.bin") == "evicted", what="small evicted")
    import random
    rnd = random.Random(7)
    with Nfs(d) as n:
        fh = nfs_fh(n, b, "dir/small.bin")
        for _ in range(20):
            off = rnd.randrange(0, len(small))
            cnt = rnd.randrange(1, 70000)
            for _try in range(50):
                st, r = n.read(fh, off, cnt)
                if st != JUKEBOX:
                    break
                time.sleep(0.1)
            assert st == 0, st
            assert r[0] == small[off:off + cnt]
        assert n.read_all(fh) == small
    # what the remote has is what the file had
    assert rs3.get_object(Bucket=rb, Key="p/dir/small.bin")["Body"].read() == small


def test_recall_chunk_size_option(daemon_factory, rgw):
    """tier_recall_chunk_size reaches the recall: with 3 MiB chunks a 10 MiB + 5 file comes
    back in 3 GETs of 1 MiB (its first 3 MiB), then 3 MiB, 3 MiB and the last 1 MiB + 5."""
    dm = daemon_factory(extra_args=FAST + ["--set", "tier_recall_chunk_size=3MiB"]).start()
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=1)
    data = os.urandom(10 * MiB + 5)
    dm.boto3().put_object(Bucket=b, Key="f", Body=data)
    wait_for(lambda: state(dm, b, "f") == "evicted", what="f evicted")
    ok = 's3nfs_tier_recall_gets_total{result="ok"}'
    g0 = metric(dm, ok) or 0
    assert get(dm, b, "f", f"bytes={7 * MiB}-{7 * MiB + 99}") == data[7 * MiB:7 * MiB + 100]
    assert get(dm, b, "f") == data
    wait_for(lambda: state(dm, b, "f") == "uploaded", what="f local again")
    assert metric(dm, ok) - g0 == 6
    assert metric(dm, "s3nfs_tier_recalled_bytes_total") == len(data)


def test_recall_chunk_follows_part_size(daemon_factory, rgw):
    """tier_recall_chunk_size unset (0): a recall's GETs follow tier_part_size (within
    8..16 MiB), as `aws s3 cp`'s ranges follow its multipart_chunksize: with 12 MiB parts
    a 30 MiB + 5 file comes back in 12 GETs of 1 MiB (its first 12 MiB), then 12 MiB and
    the last 6 MiB + 5 (14 GETs; 8 MiB chunks would take 11)."""
    args = ["tier_part_size=12MiB" if a == "tier_part_size=5MiB" else a for a in FAST]
    assert "tier_part_size=12MiB" in args
    dm = daemon_factory(extra_args=args).start()
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=1)
    data = os.urandom(30 * MiB + 5)
    dm.boto3().put_object(Bucket=b, Key="f", Body=data)
    wait_for(lambda: state(dm, b, "f") == "evicted", what="f evicted")
    ok = 's3nfs_tier_recall_gets_total{result="ok"}'
    g0 = metric(dm, ok) or 0
    assert get(dm, b, "f") == data
    wait_for(lambda: state(dm, b, "f") == "uploaded", what="f local again")
    assert metric(dm, ok) - g0 == 14
    assert metric(dm, "s3nfs_tier_recalled_bytes_total") == len(data)


def test_evict_by_watermark_least_recently_read_first(daemon_factory, rgw):
    dm = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    s3 = dm.boto3()
    # the store's data file is 1 GiB: 3 x 8 MiB is about 2.4 % used
    b = "wm" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=b)
    data = {f"f{i}": os.urandom(8 * MiB) for i in range(3)}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
        time.sleep(2.1)  # distinct change times (whole seconds): f0 the least recent
    assert get(dm, b, "f0", "bytes=0-9") == data["f0"][:10]  # f0 read last now
    time.sleep(1.1)
    adm = Admin(dm)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb)
    # every file copied first (no watermark yet): an eviction pass then chooses among
    # all three; with the watermark at once, a pass could run while only some copies
    # are confirmed (uploads finish in any order on a loaded machine) and evict the
    # only candidates it has, f0 or f2, right or wrong order alike
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    for k in data:
        wait_for(lambda k=k: state(dm, b, k) == "uploaded", timeout=120, what=f"{k} uploaded")
    # high 1.5 %, low 1 % of about 1 GiB: one file of 8 MiB over low must go, the
    # least recently read (f1), then f2 if still over the low mark
    pol = adm.put(f"/tenants/1/buckets/{b}/tier",
                  {"remote": r["id"], "upload_after_s": 0,
                   "evict_watermark": {"high": 1.5, "low": 1.0}})
    assert pol["evict_watermark"] == {"high": 1.5, "low": 1.0}
    wait_for(lambda: state(dm, b, "f1") == "evicted", what="f1 evicted")
    # capacity is used + what may still be taken: evicting stops once under low
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"]["evicted_files"] >= 1,
             what="stats")
    sts = {k: state(dm, b, k) for k in data}
    assert sts["f0"] in ("uploaded", "evicted")
    if sts["f0"] == "evicted":  # only after the others
        assert sts["f2"] == "evicted"
    for k, v in data.items():
        assert get(dm, b, k) == v
    # bad watermarks are refused
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier",
                      {"remote": r["id"], "evict_watermark": {"high": 50, "low": 60}})
    assert st == 400 and "evict_watermark" in js["message"], js
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier",
                      {"remote": r["id"], "pin_prefixes": [""]})
    assert st == 400, js
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "preset": "x"})
    assert st == 400, js  # presets are built (test_tier_policy.py); not this one
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "evict": {}})
    assert st == 400 and "/cache" in js["message"], js  # cache mode: its own endpoint


def test_first_bytes_before_the_whole_file_and_shared_recall(daemon_factory, own_s3nfsd):
    """The remote (a second s3nfsd) sends at 8 MiB/s (its QoS): a 20 MiB recall lasts
    seconds; a ranged GET of the last MiB, and the first bytes of a whole GET, come long
    before that."""
    rem = own_s3nfsd
    dm = daemon_factory(extra_args=FAST).start()
    b = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket,
                      evict_after_s=1)
    s3 = dm.boto3()
    blobs = {k: os.urandom(20 * MiB) for k in ("a", "b", "c")}
    for k, v in blobs.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in blobs:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", what=f"{k} evicted")
    Admin(rem.daemon).put("/tenants/1/qos", {"read_bps": 8 * MiB})
    # the last MiB of a
    t0 = time.time()
    assert get(dm, b, "a", f"bytes={19 * MiB}-") == blobs["a"][19 * MiB:]
    t_range = time.time() - t0
    # the whole of b, and when its first byte came
    t0 = time.time()
    body = dm.boto3().get_object(Bucket=b, Key="b")["Body"]
    first = body.read(1)
    t_first = time.time() - t0
    rest = body.read()
    t_full = time.time() - t0
    assert first + rest == blobs["b"]
    assert t_full > 2, t_full  # 20 MiB at 8 MiB/s
    assert t_range < 0.7 * t_full, (t_range, t_full)
    assert t_first < 0.7 * t_full, (t_first, t_full)
    # concurrent readers of c share one recall
    r0 = metric(dm, "s3nfs_tier_recalls_total")
    w0 = metric(dm, "s3nfs_tier_recall_wakeups_total")
    f0 = metric(dm, "s3nfs_tier_recall_wakeups_futile_total")
    out = [None] * 4

    def rd(i):
        cl = dm.boto3()
        for _ in range(20):
            try:
                out[i] = cl.get_object(Bucket=b, Key="c")["Body"].read()
                return
            except botocore.exceptions.ClientError:
                time.sleep(0.2)

    ths = [threading.Thread(target=rd, args=(i,)) for i in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert all(o == blobs["c"] for o in out)
    assert metric(dm, "s3nfs_tier_recalls_total") == r0 + 1
    # the recall's threads and the four readers were woken for their chunks, each for its own
    woken = metric(dm, "s3nfs_tier_recall_wakeups_total") - w0
    assert woken > 0
    assert metric(dm, "s3nfs_tier_recall_wakeups_futile_total") - f0 <= woken
    Admin(rem.daemon).put("/tenants/1/qos", {})


def test_remote_changed_deleted_and_down(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    dm = daemon_factory(extra_args=FAST).start()
    b = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket,
                      evict_after_s=1)
    s3 = dm.boto3()
    vals = {k: os.urandom(3 * MiB + 7) for k in ("tampered", "deleted", "down")}
    for k, v in vals.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in vals:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", what=f"{k} evicted")
    rs3 = rem.daemon.boto3()
    # overwritten behind our back (same size): detected by its ETag, never served
    rs3.put_object(Bucket=rem.bucket, Key="p/tampered", Body=os.urandom(3 * MiB + 7))
    st, code, msg = s3_error(lambda: get(dm, b, "tampered"))
    assert st == 500 and "remote copy" in msg, (st, code, msg)
    with Nfs(dm) as n:
        fh = nfs_fh(n, b, "tampered")
        st, _ = n.read(fh, 0, 4096)
        if st == JUKEBOX:
            time.sleep(0.5)
            st, _ = n.read(fh, 0, 4096)
        assert st == EIO, st
    # deleted behind our back
    rs3.delete_object(Bucket=rem.bucket, Key="p/deleted")
    st, code, msg = s3_error(lambda: get(dm, b, "deleted", "bytes=0-99"))
    assert st == 500 and "remote copy" in msg, (st, code, msg)
    # metadata still answers without the remote
    assert dm.boto3().head_object(Bucket=b, Key="deleted")["ContentLength"] == 3 * MiB + 7
    # the remote is down: 503 / JUKEBOX, then EIO once it failed for tier_recall_fail_ms
    rem.daemon.stop()
    t0 = time.time()
    st, code, msg = s3_error(lambda: get(dm, b, "down"))
    assert st == 503 and code == "ServiceUnavailable", (st, code, msg)
    assert time.time() - t0 < 8  # never hangs
    seen = []
    with Nfs(dm) as n:
        fh = nfs_fh(n, b, "down")
        end = time.time() + 15
        while time.time() < end:
            st, _ = n.read(fh, 0, 4096)
            seen.append(st)
            if st == EIO:
                break
            time.sleep(0.3)
    assert JUKEBOX in seen and seen[-1] == EIO, seen
    rem.daemon.start()
    got = wait_for(lambda: (lambda r: r if r == vals["down"] else None)(
        _try_get(dm, b, "down")), timeout=30, what="recall after the remote is back")
    assert got == vals["down"]
    # a remote holding the only copy of evicted files cannot be deleted, even once no
    # policy names it
    adm = Admin(dm)
    rid = adm.get(f"/tenants/1/buckets/{b}/tier")["remote"]
    adm.delete(f"/tenants/1/buckets/{b}/tier")
    st, js = adm.call("DELETE", f"/remotes/{rid}")
    assert st == 409 and "only copy of evicted files" in js["message"], js
    assert dm.boto3().head_object(Bucket=b, Key="tampered")["ContentLength"] == 3 * MiB + 7


def test_recall_of_a_file_in_one_chunk_is_a_plain_get(daemon_factory, own_s3nfsd):
    """A file of up to 1 MiB (a recall's first piece: docs/tiering.md#recall) comes
    back by one GET without Range (status 200 in the remote's request log); a larger
    one by ranged GETs (206). Both are the file's bytes."""
    rem = own_s3nfsd
    dm = daemon_factory(extra_args=FAST).start()
    b = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket,
                      evict_after_s=1)
    s3 = dm.boto3()
    vals = {"small": os.urandom(150 * 1000 + 3), "big": os.urandom(9 * MiB + 5)}
    for k, v in vals.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in vals:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", what=f"{k} evicted")
    for k, v in vals.items():
        assert get(dm, b, k) == v
    # the remote's request log: "op=GetObject GET /bucket/p/key status=N"
    time.sleep(0.5)  # request log lines are flushed within SRV_LOG_FLUSH_MS
    log = open(rem.daemon.log_path, encoding="utf-8", errors="replace").read()

    def statuses(k):
        pat = rf"op=GetObject GET /{rem.bucket}/p/{k}\S* status=(\d+)"
        return sorted(set(re.findall(pat, log)))

    assert statuses("small") == ["200"], statuses("small")
    assert statuses("big") == ["206"], statuses("big")


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_read_times_survive_restart(daemon_factory, rgw, how):
    """Files' last read times are kept in their tierst records: after a restart (clean or
    SIGKILL, once a pass wrote them), a file read shortly before it is not evicted by
    age, while one only written before is (at its own time, not evict_after_s after the
    restart, as when the times were in memory only)."""
    after = 20
    dm = daemon_factory(extra_args=FAST).start()
    rb = new_remote_bucket(rgw.boto3())
    b = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb,
                      evict_after_s=after)
    s3 = dm.boto3()
    data = {k: os.urandom(MiB + 7) for k in ("read", "unread")}
    put_at = time.time()
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    for k in data:
        wait_for(lambda k=k: state(dm, b, k) == "uploaded", what=f"{k} uploaded")
    time.sleep(max(0.0, put_at + 8 - time.time()))
    assert get(dm, b, "read", "bytes=0-9") == data["read"][:10]  # read at about put + 8 s
    read_at = time.time()
    # a pass keeps the read time in its record: wait for one that began after the read
    # (a flush barrier is done at its end), not a fixed time a loaded machine may outlast
    adm = Admin(dm)
    bar = adm.call("POST", f"/tenants/1/buckets/{b}/tier/flush", want=200)[1]["barrier"]
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier/flush?barrier={bar}")["done"],
             what="a pass after the read")
    if how == "kill":
        dm.kill()
    else:
        dm.stop()
    dm.start()
    # the unread file goes at put + evict_after_s (in memory only: restart + evict_after_s)
    wait_for(lambda: state(dm, b, "unread") == "evicted", timeout=put_at + after + 8 - time.time(),
             what="the unread file evicted by age soon after the restart")
    assert time.time() < read_at + after - 1, "too slow to tell"
    assert state(dm, b, "read") == "uploaded"  # read 8 s later: not yet
    wait_for(lambda: state(dm, b, "read") == "evicted", timeout=after + 10,
             what="the read file evicted at its own time")
    assert time.time() >= read_at + after - 1
    assert get(dm, b, "read") == data["read"] and get(dm, b, "unread") == data["unread"]
    dm.stop()
    check_store(dm)


def _try_get(d, b, k):
    try:
        return get(d, b, k)
    except (botocore.exceptions.ClientError, botocore.exceptions.ResponseStreamingError,
            botocore.exceptions.EndpointConnectionError, ConnectionError):
        return None


def test_writes_truncate_rename_overwrite_delete_of_evicted(d, rgw):
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(d, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=1)
    s3 = d.boto3()
    v = {k: os.urandom(5 * MiB + 3) for k in ("w", "t", "r", "o", "x", "c")}
    for k, val in v.items():
        s3.put_object(Bucket=b, Key=k, Body=val)
    for k in v:
        wait_for(lambda k=k: state(d, b, k) == "evicted", what=f"{k} evicted")

    def nfs_retry(fn):
        for _ in range(100):
            st = fn()
            if st != JUKEBOX:
                return st
            time.sleep(0.1)
        return st

    with Nfs(d) as n:
        # NFS WRITE in place: recalled first, then written
        fh = nfs_fh(n, b, "w")
        assert nfs_retry(lambda: n.write(fh, MiB, b"0123456789", FILE_SYNC)[0]) == 0
        # SETATTR size: truncated after a recall
        fh = nfs_fh(n, b, "t")
        args = Packer().opaque(fh).raw(rpc3.sattr3(size=1000)).u32(0).bytes()
        assert nfs_retry(lambda: n.nfs(rpc3.SETATTR, args)[0]) == 0
        # RENAME: a metadata operation; the content follows
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        assert n.rename(bfh, "r", bfh, "r2") == 0
    w = bytearray(v["w"])
    w[MiB:MiB + 10] = b"0123456789"
    assert get(d, b, "w") == bytes(w)
    assert get(d, b, "t") == v["t"][:1000]
    assert get(d, b, "r2") == v["r"]
    # an evicted file as a copy's source: its bytes are recalled for the copy
    s3.copy_object(Bucket=b, Key="c2", CopySource={"Bucket": b, "Key": "c"})
    assert get(d, b, "c2") == v["c"]
    # S3 overwrite and delete need no recall
    r0 = metric(d, "s3nfs_tier_recalls_total")
    s3.put_object(Bucket=b, Key="o", Body=b"new")
    assert get(d, b, "o") == b"new"
    s3.delete_object(Bucket=b, Key="x")
    assert metric(d, "s3nfs_tier_recalls_total") == r0
    # the changed files go up again; the deleted one and the old name leave the remote
    wait_for(lambda: _remote(rs3, rb, "p/w") == bytes(w), what="w re-uploaded")
    wait_for(lambda: _remote(rs3, rb, "p/t") == v["t"][:1000], what="t re-uploaded")
    wait_for(lambda: _remote(rs3, rb, "p/r2") == v["r"], what="r2 uploaded")
    wait_for(lambda: _remote(rs3, rb, "p/r") is None, what="old name gone")
    wait_for(lambda: _remote(rs3, rb, "p/x") is None, what="x gone")


def _remote(s3, bucket, key):
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None


def test_sigkill_during_eviction_and_recall(daemon_factory, rgw):
    dm = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=1)
    s3 = dm.boto3()
    files = {f"k{i:02d}": os.urandom(MiB + i * 4099) for i in range(24)}
    files["big"] = os.urandom(24 * MiB + 5)
    for k, val in files.items():
        s3.put_object(Bucket=b, Key=k, Body=val)
    # killed while evictions go on
    wait_for(lambda: any(state(dm, b, k) == "evicted" for k in files), step=0.05,
             what="a first eviction")
    dm.kill()
    check_store(dm)
    dm.start()
    wait_for(lambda: state(dm, b, "big") == "evicted", what="big evicted after restart")
    # killed in the middle of a recall of big
    th = threading.Thread(target=_try_get, args=(dm, b, "big"))
    th.start()
    time.sleep(0.15)
    dm.kill()
    th.join()
    check_store(dm)
    dm.start()
    for k, val in files.items():
        got = wait_for(lambda k=k: _try_get(dm, b, k), timeout=30, what=f"{k} readable")
        assert got == val, k
    dm.stop()
    check_store(dm)


def _rss_anon_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) >> 10
    return 0


def _minflt(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def test_recall_read_slowly_reuses_its_buffers(daemon_factory, rgw):
    """A 512 MiB file recalled by a GET whose reader is slower than the recall (as a
    client hashing what it reads is): the recall's chunk buffers are reused, so the
    daemon takes far fewer page faults than the file has pages (issue 12: buffers freed
    to malloc and taken anew from fresh memory faulted in and zeroed every recalled
    byte, one fault per 4 KiB), and its anonymous memory stays within its recall
    buffers (the memory table, the pool, the chunks in flight: 3 x 32 MiB here), and
    none of the recall's extents is written through the page cache. /metrics counts
    the buffers: a few mapped, every other chunk reusing one; a second file's recall
    right after maps at most a couple; all are given back seconds later."""
    dm = daemon_factory(extra_args=FAST + ["--set", "tier_recall_threads=2"]).start()
    rs3 = rgw.boto3()
    rb = new_remote_bucket(rs3)
    b = tiered_bucket(dm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, evict_after_s=1)
    block = os.urandom(4 * MiB)
    data = block * 128
    want = hashlib.sha256(data).hexdigest()
    dm.boto3().put_object(Bucket=b, Key="f", Body=data)
    del data
    small = os.urandom(48 * MiB)
    dm.boto3().put_object(Bucket=b, Key="g", Body=small)
    wait_for(lambda: state(dm, b, "f") == "evicted", timeout=120, what="f evicted")
    wait_for(lambda: state(dm, b, "g") == "evicted", timeout=120, what="g evicted")
    pid = dm.proc.pid
    base = peak = _rss_anon_mib(pid)
    f0 = _minflt(pid)
    cached0 = metric(dm, 's3nfs_store_writes_total{path="cached"}') or 0
    maps0 = metric(dm, "s3nfs_tier_recall_buffer_maps_total")
    reuses0 = metric(dm, "s3nfs_tier_recall_buffer_reuses_total")
    assert metric(dm, "s3nfs_tier_recall_buffers") == 0
    body = dm.boto3().get_object(Bucket=b, Key="f")["Body"]
    h, n = hashlib.sha256(), 0
    for chunk in body.iter_chunks(MiB):
        h.update(chunk)
        n += 1
        if n % 4 == 0:
            time.sleep(0.01)  # slower than the recall
            peak = max(peak, _rss_anon_mib(pid))
    faults = _minflt(pid) - f0
    assert h.hexdigest() == want
    # 131072 pages of 4 KiB: one fault each when every buffer is fresh memory
    assert faults < 512 * MiB // 8192, faults
    assert peak - base < 192, (base, peak)
    # 8 MiB chunks but the first 8 in 1 MiB pieces: 71 chunks, each took a buffer,
    # mapped anew (at most the table, the pool and the chunks in flight: 3 x 4 + 8 of
    # 1 MiB) or reused (a chunk fetched again after a failed GET takes one more)
    maps = metric(dm, "s3nfs_tier_recall_buffer_maps_total") - maps0
    reuses = metric(dm, "s3nfs_tier_recall_buffer_reuses_total") - reuses0
    assert 1 <= maps <= 20, maps
    assert 71 <= maps + reuses <= 75, (maps, reuses)
    live = metric(dm, "s3nfs_tier_recall_buffers")
    assert 1 <= live <= maps, (live, maps)
    assert metric(dm, "s3nfs_tier_recall_buffer_bytes") <= 3 * 32 * MiB + 8 * MiB
    # a second file right after (8 pieces of 1 MiB, 5 chunks of 8 MiB) takes the
    # buffers the first left: at most a couple mapped anew (the pool's bytes are bounded:
    # a buffer of one size coming back while it is full of the other is let go of)
    assert get(dm, b, "g") == small
    maps2 = metric(dm, "s3nfs_tier_recall_buffer_maps_total") - maps0 - maps
    reuses2 = metric(dm, "s3nfs_tier_recall_buffer_reuses_total") - reuses0 - reuses
    assert maps2 <= 2 and maps2 + reuses2 >= 13, (maps2, reuses2)
    # given back once no recalled chunk is left in memory (3 s after the last)
    wait_for(lambda: metric(dm, "s3nfs_tier_recall_buffers") == 0, timeout=15,
             what="the recall buffers given back")
    assert metric(dm, "s3nfs_tier_recall_buffer_bytes") == 0
    # the recall's extents go O_DIRECT whatever data_write_cache says (on here, the default):
    # its reader took the bytes from memory, a copy into the page cache would be for nothing
    assert metric(dm, 's3nfs_store_writes_total{path="cached"}') == cached0
