# SPDX-License-Identifier: Apache-2.0
"""The remote killed in the middle of a recall (issue 12's proof, "remote killed
mid-recall"; docs/tiering.md § What a user sees): a second s3nfsd as the remote,
throttled by its QoS (4 MiB/s) so that the recall of a 24 MiB evicted file (2 MiB chunks)
lasts seconds, is SIGKILLed while an S3 GET streams the file and an NFS READ of
a far range waits for it:

- the S3 GET is answered 503 or cut before its Content-Length, and whatever
  bytes it got are the file's first bytes, never other bytes;
- NFS READs of a range not back answer JUKEBOX while the remote is down, then
  EIO once it has failed for tier_recall_fail_ms; no call hangs;
- the daemon keeps serving meanwhile: HEAD and GET of a local object, NFS
  GETATTR and READ of local data answer within seconds;
- once the remote is back, a GET returns the whole file and NFS READs their
  ranges, byte for byte, and the store check is clean."""
import os
import sys
import threading
import time

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from tenutil import Admin, Nfs  # noqa: E402
from test_tier_evict import (EIO, JUKEBOX, MiB, check_store, nfs_fh, state,  # noqa: E402
                             tiered_bucket)
from tierutil import wait_for  # noqa: E402

WAIT_MS, FAIL_MS = 4000, 3000
ARGS = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "tier_part_size=5MiB", "--set", "data_file_size=1GiB",
        "--set", "tier_recall_chunk_size=2MiB",
        "--set", f"tier_recall_wait_ms={WAIT_MS}", "--set", f"tier_recall_fail_ms={FAIL_MS}"]
SIZE = 24 * MiB + 12345
FAR = SIZE - 100_000  # in the last chunk: an NFS READ there waits for it
MID = 16 * MiB + 777  # far from what is back when the remote dies
PROMPT = 5.0  # seconds: a generous bound for requests that need no remote


def _stream_get(dm, b, k, out):
    """GET @k and read its body as it comes; @out gets the status, the
    Content-Length, the bytes received and how the body ended."""
    got = []
    t0 = time.time()
    try:
        r = dm.boto3().get_object(Bucket=b, Key=k)
    except botocore.exceptions.ClientError as e:
        out.update(status=e.response["ResponseMetadata"]["HTTPStatusCode"],
                   code=e.response["Error"]["Code"], body=b"", end="error", t=time.time() - t0)
        return
    except (botocore.exceptions.BotoCoreError, ConnectionError) as e:
        # closed before any answer: a cut too
        out.update(status=None, body=b"", end=f"cut: {type(e).__name__}", t=time.time() - t0)
        return
    out["status"] = r["ResponseMetadata"]["HTTPStatusCode"]
    out["length"] = r["ContentLength"]
    out["first_at"] = None
    body = r["Body"]
    try:
        while True:
            c = body.read(64 * 1024)
            if not c:
                out["end"] = "eof"
                break
            if out["first_at"] is None:
                out["first_at"] = time.time()
            got.append(c)
            out["n"] = out.get("n", 0) + len(c)
    except Exception as e:  # noqa: BLE001 - a cut connection, whatever layer reports it
        out["end"] = f"cut: {type(e).__name__}: {e}"
    out["body"] = b"".join(got)
    out["t"] = time.time() - t0


def _nfs_read(dm, fh, off, cnt, out):
    with Nfs(dm, timeout=30) as n:
        t0 = time.time()
        st, r = n.read(fh, off, cnt)
        out.update(st=st, data=r[0] if st == 0 else None, t=time.time() - t0)


def _timed(fn):
    t0 = time.time()
    v = fn()
    return v, time.time() - t0


def _served_promptly(dm, lb, local, fh, fh_local):
    """Requests that need no remote answer, each within PROMPT seconds."""
    s3 = dm.boto3()
    h, t = _timed(lambda: s3.head_object(Bucket=lb, Key="local"))
    assert h["ContentLength"] == len(local) and t < PROMPT, t
    g, t = _timed(lambda: s3.get_object(Bucket=lb, Key="local")["Body"].read())
    assert g == local and t < PROMPT, t
    with Nfs(dm, timeout=PROMPT + 5) as n:
        (st, a), t = _timed(lambda: n.getattr(fh))
        assert st == 0 and a["size"] == SIZE and t < PROMPT, (st, t)
        (st, r), t = _timed(lambda: n.read(fh_local, 1000, 4096))
        assert st == 0 and r[0] == local[1000:5096] and t < PROMPT, (st, t)


def test_remote_killed_mid_recall(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    dm = daemon_factory(extra_args=ARGS).start()
    b = tiered_bucket(dm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket,
                      evict_after_s=1)
    s3 = dm.boto3()
    data = os.urandom(SIZE)
    s3.put_object(Bucket=b, Key="f", Body=data)
    lb = b + "-local"  # no tier policy: its object never leaves the box
    s3.create_bucket(Bucket=lb)
    local = os.urandom(300_000)
    s3.put_object(Bucket=lb, Key="local", Body=local)
    wait_for(lambda: state(dm, b, "f") == "evicted", what="f evicted")
    with Nfs(dm) as n:
        fh = nfs_fh(n, b, "f")
        fh_local = nfs_fh(n, lb, "local")
    # 4 MiB/s: the whole recall would take about 6 s, its first 4 MiB about 1 s
    Admin(rem.daemon).put("/tenants/1/qos", {"read_bps": 4 * MiB})

    got = {}
    th_get = threading.Thread(target=_stream_get, args=(dm, b, "f", got))
    th_get.start()
    # the GET's first bytes (headers once its first 4 MiB window is back): mid-recall
    wait_for(lambda: got.get("first_at") or "end" in got, timeout=15, step=0.02,
             what="the GET's first bytes")
    far = {}
    th_far = threading.Thread(target=_nfs_read, args=(dm, fh, FAR, 65536, far))
    th_far.start()
    time.sleep(0.3)
    assert "end" not in got, got  # still streaming: the remote dies mid-recall
    rem.daemon.kill()
    killed_at = time.time()

    # the daemon serves what needs no remote while its readers wait for it
    _served_promptly(dm, lb, local, fh, fh_local)

    # the S3 GET: 503, or cut before Content-Length; never other bytes; never hangs
    th_get.join(timeout=WAIT_MS / 1000 + FAIL_MS / 1000 + 15)
    assert not th_get.is_alive(), f"the GET hangs: {got.get('n')} bytes so far"
    print("mid-recall GET:", {k: v for k, v in got.items() if k != "body"},
          "bytes", len(got["body"]))
    if got["status"] == 503:
        assert got["code"] in ("ServiceUnavailable", "SlowDown"), got
    elif got["status"] is not None:  # None: closed before any answer
        assert got["status"] == 200 and got["length"] == SIZE, got
        assert got["end"].startswith("cut"), (got["end"], len(got["body"]))
        assert len(got["body"]) < SIZE
    body = got["body"]
    assert body == data[:len(body)], f"the GET sent other bytes than the file's ({len(body)})"

    # the NFS READ of the far range that was waiting: its bytes if they came
    # before the kill, else a retryable or an I/O error; within its wait
    th_far.join(timeout=WAIT_MS / 1000 + 15)
    assert not th_far.is_alive(), "the NFS READ of the far range hangs"
    assert far["st"] in (0, JUKEBOX, EIO), far["st"]
    if far["st"] == 0:
        assert far["data"] == data[FAR:FAR + 65536]

    # NFS READs of a range not back: JUKEBOX while the remote is down, then EIO
    # once it has failed for tier_recall_fail_ms; each call within its wait
    seen = []
    with Nfs(dm, timeout=30) as n:
        end = time.time() + FAIL_MS / 1000 + 20
        while time.time() < end:
            (st, r), t = _timed(lambda: n.read(fh, MID, 65536))
            seen.append(st)
            assert t < WAIT_MS / 1000 + 3, (seen, t)
            assert st in (JUKEBOX, EIO), seen
            if st == EIO:
                break
            time.sleep(0.2)
    print("far READ:", far["st"], "in %.2f s;" % far["t"], "READs while down:", seen,
          "EIO %.2f s after the kill" % (time.time() - killed_at))
    assert JUKEBOX in seen and seen[-1] == EIO, seen
    assert time.time() - killed_at >= FAIL_MS / 1000 - 0.5, seen  # not EIO at once
    _served_promptly(dm, lb, local, fh, fh_local)

    # the remote back (unthrottled): the whole file and its ranges, byte for byte
    rem.daemon.start()
    Admin(rem.daemon).put("/tenants/1/qos", {})

    def whole():
        out = {}
        _stream_get(dm, b, "f", out)
        return out["body"] if out.get("end") == "eof" else None

    assert wait_for(whole, timeout=60, what="the whole file after the remote is back") == data
    with Nfs(dm) as n:
        for off in (MID, FAR, 0):
            for _ in range(100):
                st, r = n.read(fh, off, 65536)
                if st != JUKEBOX:
                    break
                time.sleep(0.1)
            assert st == 0 and r[0] == data[off:off + 65536], (off, st)
    wait_for(lambda: state(dm, b, "f") == "uploaded", what="f local again")
    dm.stop()
    check_store(dm)
