# SPDX-License-Identifier: Apache-2.0
"""QoS admission on the S3 path: a tenant policy set through the admin API
throttles S3 requests (503 SlowDown once the wait would exceed
qos_max_wait_ms); removing it lifts the limit.

Shaping (the tests from test_put_shaped on): a large request is admitted in
pieces and its body moves at the admitted rate, every byte charged before it
is read or sent, and no debt is left for the next request. They measure the
achieved rate against the cap: by the token bucket, bytes <= burst + cap * t,
so (bytes - burst) / t must stay within 1.1 * cap, and bytes / t must reach
0.7 * cap (a loaded 2-core machine), or, where the client's time is too fragile under
load for that, the seconds the daemon counted its requests waiting for admission
(s3nfs_qos_throttled_seconds_total) must stay within bytes / (0.7 * cap) (check_waited;
a miss is measured again, at most 3 times: retry_slow).
Each of them fails with shaping switched
off: run with S3NFS_TEST_QOS_SHAPING=false (the daemon gets qos_shaping=false:
whole requests at once, with debt)."""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from s3util import connect, read_response, read_responses, signed_request  # noqa: E402
from qos_checks import BURST_MS, SlowError, check_ops, check_rate, check_waited  # noqa: E402
from qos_checks import qos_waited, retry_slow, timed, timed_waits  # noqa: E402


def admin(d, method, path, body=None):
    req = urllib.request.Request(d.admin_endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def test_qos_throttles_s3(daemon_factory):
    d = daemon_factory(extra_args=["--set", "qos_max_wait_ms=50"]).start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="qos-bucket")
    assert admin(d, "PUT", "/api/v1/tenants/1/qos", {"meta_iops": 1, "write_bps": 1000}) == 200
    # metadata ops: one per second; the next ones would wait ~1 s > 50 ms
    s = connect(d)
    s.sendall(b"".join(signed_request(d, "GET", "/qos-bucket")[0] for _ in range(4)))
    statuses = [r[0] for r in read_responses(s, 4)]
    assert 503 in statuses
    # bandwidth: 200 kB at 1000 B/s: the first piece (one burst) goes, the next one
    # would wait far longer than 50 ms, so the PUT itself fails mid-body (shaping)
    s.close()
    s = connect(d)
    s.sendall(signed_request(d, "PUT", "/qos-bucket/a", body=b"x" * 200000)[0])
    st, _, body = read_response(s)
    assert st == 503 and b"SlowDown" in body
    s.close()
    assert admin(d, "DELETE", "/api/v1/tenants/1/qos") in (200, 204)
    s = connect(d)
    s.sendall(b"".join(signed_request(d, "GET", "/qos-bucket")[0] for _ in range(4)))
    assert [r[0] for r in read_responses(s, 4)] == [200] * 4
    s.close()


# ---------------------------------------------------------------- shaping

MiB = 1 << 20
SHAPING = os.environ.get("S3NFS_TEST_QOS_SHAPING", "true")


@pytest.fixture(scope="module")
def qd(tmp_path_factory):
    from s3nfsd_harness import Daemon
    d = Daemon(str(tmp_path_factory.mktemp("s3qos")),
               ["--set", f"qos_shaping={SHAPING}", "--set", "data_file_size=512MiB"])
    os.makedirs(d.data_dir, exist_ok=True)
    d.start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="shape")
    s3.put_object(Bucket="shape", Key="src4", Body=os.urandom(4 * MiB))
    s3.put_object(Bucket="shape", Key="src1", Body=os.urandom(1 * MiB))
    s3.put_object(Bucket="shape", Key="tiny", Body=b"tiny")
    yield d
    d.cleanup()


def policy(d, path="/api/v1/tenants/1/qos", **caps):
    """Replace the policy (a fresh one starts with full buckets)."""
    try:
        admin(d, "DELETE", path)
    except urllib.error.HTTPError:
        pass
    if caps:
        caps.setdefault("burst_ms", BURST_MS)
        assert admin(d, "PUT", path, caps) == 200


@retry_slow
def test_put_shaped_then_small_not_delayed(qd):
    s3 = qd.boto3()
    policy(qd, write_bps=2 * MiB)
    body = os.urandom(4 * MiB)
    t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="big", Body=body)
    check_rate(len(body), t, 2 * MiB, "PUT 4 MiB", waited=w)
    # no debt left behind: the next small PUT goes at once
    t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="small", Body=b"14 bytes here.")
    check_waited(w, 0.5, "a small PUT after a large one (debt)")
    assert s3.get_object(Bucket="shape", Key="big")["Body"].read() == body
    policy(qd)


@retry_slow
def test_long_single_put_holds_a_directory_cap(qd):
    """One long PUT (8 MiB, about 2 s) under a directory's write cap, timed from
    its first byte sent to its answer: it gets no more than the cap + 5 % (the
    issue's +-5 %), and waits for admission no longer than at 0.9 x the cap (the
    daemon's count: the client's time stretches on a loaded machine),
    and the directory level is charged for every byte. The bench's 8 x 256 MiB writer
    measures the same over a minute (bench/qos)."""
    cap = 4 * MiB
    s3 = qd.boto3()
    s3.put_object(Bucket="shape", Key="ckpt/", Body=b"")
    path = "/api/v1/tenants/1/buckets/shape/qos?dir=ckpt"
    policy(qd, path, write_bps=cap)
    body = os.urandom(8 * MiB)
    req = signed_request(qd, "PUT", "/shape/ckpt/long", body=body)[0]
    s = connect(qd)
    w0 = qos_waited(qd)
    try:
        t0 = time.monotonic()
        s.sendall(req)
        st, _, _ = read_response(s)
        secs = time.monotonic() - t0
    finally:
        s.close()
    assert st == 200
    burst = cap * BURST_MS / 1000
    assert (len(body) - burst) / secs <= 1.05 * cap, \
        f"{len(body)} B in {secs:.2f} s is over the cap of {cap} B/s"
    # not under 0.9 x the cap: by the daemon's waits (the client's time stretches on a
    # loaded machine)
    check_waited(qos_waited(qd) - w0, len(body) / (0.9 * cap),
                 "one 8 MiB PUT under a directory cap")
    with urllib.request.urlopen(qd.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    got = [int(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
           if ln.startswith("s3nfs_qos_admitted_bytes_total{") and 'level="dir"' in ln
           and 'class="write"' in ln]
    assert got and got[0] >= len(body), got
    policy(qd, path)
    s3.delete_object(Bucket="shape", Key="ckpt/long")


@retry_slow
def test_get_shaped_then_small_not_delayed(qd):
    s3 = qd.boto3()
    policy(qd, read_bps=2 * MiB)
    t, w, data = timed_waits(qd, lambda: s3.get_object(Bucket="shape", Key="src4")["Body"].read())
    assert len(data) == 4 * MiB
    check_rate(len(data), t, 2 * MiB, "GET 4 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: s3.get_object(Bucket="shape", Key="tiny")["Body"].read())
    check_waited(w, 0.5, "a small GET after a large one (debt)")
    policy(qd)


@retry_slow
def test_get_rate_holds_over_short_windows(qd):
    """Not only on average: over any window of a few bursts the body moves at most
    the burst plus the cap times the window (pieces are ~20 ms of the rate)."""
    s3 = qd.boto3()
    policy(qd, read_bps=1 * MiB)
    w0 = qos_waited(qd)
    body = s3.get_object(Bucket="shape", Key="src4", Range=f"bytes=0-{2 * MiB - 1}")["Body"]
    t0, got, marks = time.monotonic(), 0, []
    while True:
        chunk = body.read(16 * 1024)
        if not chunk:
            break
        got += len(chunk)
        marks.append((time.monotonic() - t0, got))
    assert got == 2 * MiB
    check_rate(got, marks[-1][0], 1 * MiB, "GET of 2 MiB", waited=qos_waited(qd) - w0)
    win, burst = 4 * BURST_MS / 1000, MiB * BURST_MS / 1000
    worst, j = 0, 0
    for i in range(len(marks)):  # the most bytes that arrived within any window
        while marks[i][0] - marks[j][0] > win:
            j += 1
        worst = max(worst, marks[i][1] - (marks[j - 1][1] if j else 0))
    if worst > burst + 1.1 * MiB * win + 16 * 1024:  # (every time without shaping)
        raise SlowError(f"{worst} B arrived within {win:.1f} s under a cap of {MiB} B/s")
    policy(qd)


@retry_slow
def test_get_ranged_charged_by_range(qd):
    s3 = qd.boto3()
    policy(qd, read_bps=1 * MiB)
    t, w, data = timed_waits(qd, lambda: s3.get_object(
        Bucket="shape", Key="src4", Range=f"bytes={MiB}-{2 * MiB - 1}")["Body"].read())
    assert len(data) == MiB
    # the range, not the object (charged the object: 3 s more of waits)
    check_rate(len(data), t, 1 * MiB, "ranged GET of 1 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: s3.get_object(Bucket="shape", Key="tiny")["Body"].read())
    check_waited(w, 0.5, "a small GET after a ranged one (debt)")
    policy(qd)


@retry_slow
def test_upload_part_shaped(qd):
    s3 = qd.boto3()
    policy(qd, write_bps=2 * MiB)
    up = s3.create_multipart_upload(Bucket="shape", Key="mp")["UploadId"]
    body = os.urandom(2 * MiB)
    t, w, r = timed_waits(qd, s3.upload_part, Bucket="shape", Key="mp", UploadId=up,
                          PartNumber=1, Body=body)
    check_rate(len(body), t, 2 * MiB, "UploadPart of 2 MiB", waited=w)
    t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="small2", Body=b"x")
    check_waited(w, 0.5, "a small PUT after a part (debt)")
    s3.complete_multipart_upload(Bucket="shape", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    policy(qd)


@pytest.mark.parametrize("side", ["read_bps", "write_bps"])
@retry_slow
def test_copy_object_shaped(qd, side):
    """A copy is charged by the bytes it copies on both sides: either cap holds it."""
    s3 = qd.boto3()
    policy(qd, **{side: 1 * MiB})
    t, w, _ = timed_waits(qd, s3.copy_object, Bucket="shape", Key=f"copy-{side}",
                          CopySource="shape/src1")
    check_rate(MiB, t, 1 * MiB, f"CopyObject of 1 MiB under {side}", waited=w)
    t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="small3", Body=b"x")
    t2, w2, _ = timed_waits(qd, lambda: s3.get_object(Bucket="shape", Key="tiny")["Body"].read())
    check_waited(w, 0.5, "a small PUT after a copy")
    check_waited(w2, 0.5, "a small GET after a copy")
    policy(qd)
    got = s3.get_object(Bucket="shape", Key=f"copy-{side}")["Body"].read()
    assert got == s3.get_object(Bucket="shape", Key="src1")["Body"].read()


@retry_slow
def test_upload_part_copy_shaped(qd):
    s3 = qd.boto3()
    policy(qd, read_bps=2 * MiB, write_bps=2 * MiB)
    up = s3.create_multipart_upload(Bucket="shape", Key="mpc")["UploadId"]
    t, w, r = timed_waits(qd, s3.upload_part_copy, Bucket="shape", Key="mpc", UploadId=up,
                          PartNumber=1, CopySource="shape/src4",
                          CopySourceRange=f"bytes=0-{2 * MiB - 1}")
    # its pieces wait for the read cap and for the write cap: half their waits each
    check_rate(2 * MiB, t, 2 * MiB, "UploadPartCopy of a 2 MiB range", waited=w / 2)
    s3.complete_multipart_upload(Bucket="shape", Key="mpc", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}]})
    policy(qd)
    got = s3.get_object(Bucket="shape", Key="mpc")["Body"].read()
    assert got == s3.get_object(Bucket="shape", Key="src4", Range=f"bytes=0-{2 * MiB - 1}")[
        "Body"].read()


@retry_slow
def test_read_iops_after_large_get(qd):
    """GETs run at the read IOPS cap, right after a large shaped GET (no debt): not
    faster (the client's time), and not held longer than the caps need (the daemon's
    count of the time they waited for admission; a client on a loaded machine is slower
    by itself, and debt from the large GET would add its second of waits)."""
    s3 = qd.boto3()
    policy(qd, read_bps=1 * MiB, read_iops=20)
    t, w, data = timed_waits(qd, lambda: s3.get_object(Bucket="shape", Key="src1")["Body"].read())
    check_rate(len(data), t, 1 * MiB, "GET 1 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: [s3.get_object(Bucket="shape", Key="tiny")["Body"].read()
                                       for _ in range(16)])
    check_ops(16, t, 20, "GETs at read_iops=20", waited=w)
    policy(qd)


@retry_slow
def test_write_iops_after_large_put(qd):
    s3 = qd.boto3()
    policy(qd, write_bps=1 * MiB, write_iops=20)
    t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="w1", Body=os.urandom(MiB))
    check_rate(MiB, t, 1 * MiB, "PUT 1 MiB", waited=w)
    t, w, _ = timed_waits(qd, lambda: [s3.put_object(Bucket="shape", Key=f"w{i}", Body=b"x")
                                       for i in range(16)])
    check_ops(16, t, 20, "PUTs at write_iops=20", waited=w)
    policy(qd)


def test_meta_iops_beside_shaped_put(qd):
    """Metadata operations keep their own cap while a large PUT of the same tenant is
    shaped (its pieces take no operations)."""
    s3 = qd.boto3()
    policy(qd, write_bps=1 * MiB, meta_iops=20)
    res = {}

    def big():
        res["t"], _ = timed(s3.put_object, Bucket="shape", Key="m1", Body=os.urandom(2 * MiB))
    th = threading.Thread(target=big)
    w0 = qos_waited(qd)
    th.start()
    s3b = qd.boto3()
    t, _ = timed(lambda: [s3b.head_object(Bucket="shape", Key="tiny") for _ in range(16)])
    th.join()
    w = qos_waited(qd) - w0
    # (waited=0.0: each only bounded above here; their waits together just below)
    check_ops(16, t, 20, "HEADs at meta_iops=20", waited=0.0)
    check_rate(2 * MiB, res["t"], 1 * MiB, "PUT 2 MiB beside metadata ops", waited=0.0)
    # both wait at the tenant: the sum of their waits is bounded as each one's would be
    # (HEADs held behind the PUT's pieces would add the PUT's seconds)
    check_waited(w, 2 * MiB / (0.7 * MiB) + 16 / (0.7 * 20), "PUT 2 MiB beside 16 HEADs")
    policy(qd)


def test_user_cap_shaped(qd):
    """A user's own cap shapes its requests (the tenant has no policy)."""
    s3 = qd.boto3()
    with urllib.request.urlopen(urllib.request.Request(
            qd.admin_endpoint + "/api/v1/tenants/1/users", method="POST",
            data=json.dumps({"name": "shaper"}).encode(),
            headers={"Authorization": f"Bearer {qd.admin_token}",
                     "Content-Type": "application/json"}), timeout=10) as r:
        uid = json.loads(r.read())["id"]
    with urllib.request.urlopen(urllib.request.Request(
            qd.admin_endpoint + f"/api/v1/tenants/1/users/{uid}/keys", method="POST",
            headers={"Authorization": f"Bearer {qd.admin_token}"}), timeout=10) as r:
        k = json.loads(r.read())
    us3 = qd.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    us3.create_bucket(Bucket="shape-user")
    path = f"/api/v1/tenants/1/users/{uid}/qos"

    @retry_slow
    def measure():
        policy(qd, path, write_bps=2 * MiB)
        t, w, _ = timed_waits(qd, us3.put_object, Bucket="shape-user", Key="u",
                              Body=os.urandom(2 * MiB))
        check_rate(2 * MiB, t, 2 * MiB, "a user's PUT of 2 MiB", waited=w)
        # the tenant's other users are not held to it
        t, w, _ = timed_waits(qd, s3.put_object, Bucket="shape", Key="other",
                              Body=os.urandom(2 * MiB))
        check_waited(w, 0.5, "another user's PUT (not held to this user's cap)")
    measure()
    policy(qd, path)


def test_tls_put_get_shaped(daemon_factory, tmp_path):
    """With TLS (no zero-copy: bodies go through worker reads) a GET of up to 1 MiB
    used to be read whole before its admission: now it is charged and sent piece by
    piece too, and so is an upload."""
    import subprocess
    import urllib3
    from botocore.config import Config
    import boto3
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    d = daemon_factory(extra_args=["--set", f"s3_tls_cert={cert}", "--set", f"s3_tls_key={key}",
                                   "--set", f"qos_shaping={SHAPING}"])
    d.s3_endpoint = d.s3_endpoint.replace("http://", "https://")
    d.start()
    urllib3.disable_warnings()
    s3 = boto3.client("s3", endpoint_url=d.s3_endpoint, aws_access_key_id=d.access_key,
                      aws_secret_access_key=d.secret_key, region_name="us-east-1", verify=False,
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 1}))
    s3.create_bucket(Bucket="tls-shape")
    body = os.urandom(MiB)

    @retry_slow
    def measure():
        policy(d, read_bps=1 * MiB, write_bps=1 * MiB)
        t, w, _ = timed_waits(d, s3.put_object, Bucket="tls-shape", Key="k", Body=body)
        check_rate(MiB, t, 1 * MiB, "TLS PUT of 1 MiB", waited=w)
        t, w, got = timed_waits(d, lambda: s3.get_object(Bucket="tls-shape",
                                                         Key="k")["Body"].read())
        assert got == body
        check_rate(MiB, t, 1 * MiB, "TLS GET of 1 MiB", waited=w)
        t, w, got = timed_waits(d, lambda: s3.get_object(Bucket="tls-shape", Key="k",
                                                         Range="bytes=0-524287")["Body"].read())
        assert got == body[:524288]
        check_rate(524288, t, 1 * MiB, "TLS ranged GET of 512 KiB", waited=w)
    measure()


def qos_waiting(d):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        return sum(int(float(line.split()[-1])) for line in r.read().decode().splitlines()
                   if line.startswith("s3nfs_qos_waiting{"))


def qos_quiet(d, quiet=1.0, within=10.0):
    """Whether, within `within` seconds, no request waits for admission for `quiet`
    seconds in a row. The gauge counts the pieces queued at the moment it is read: a
    transfer still moving reads 0 between two of its pieces (one admitted, the next not
    asked yet; longer on a loaded machine), so one zero says nothing. Pieces last about
    20 ms at the rate: a second without any is a transfer that stopped."""
    end = time.monotonic() + within
    since = None
    while time.monotonic() < end:
        now = time.monotonic()
        if qos_waiting(d):
            since = None
        elif since is None:
            since = now
        elif now - since >= quiet:
            return True
        time.sleep(0.02)
    return False


def test_client_vanishes_while_piece_waits(qd):
    """A client that goes away while a piece of its upload or GET waits for admission
    frees everything (the piece is withdrawn once the daemon sees it go: an upload's
    bytes already in the socket buffer are read at the rate first); the daemon serves
    on. (A copy whose client closes goes on like any request after a half-close.)"""
    policy(qd, read_bps=256 * 1024, write_bps=256 * 1024)
    body = os.urandom(2 * MiB)
    req = signed_request(qd, "PUT", "/shape/gone-put", body=body)[0]
    s = connect(qd)
    s.sendall(req[:len(req) - len(body) + 256 * 1024])  # part of the body, then gone
    time.sleep(0.3)
    s.close()
    s = connect(qd)
    s.sendall(signed_request(qd, "GET", "/shape/src4")[0])
    s.recv(65536)
    time.sleep(0.3)
    s.close()
    # the upload's bytes still on their way to the daemon's socket buffer (of its 256 KiB,
    # about a second at the rate) are read before its end of input reaches the daemon;
    # then nothing may wait any more
    assert qos_quiet(qd), "pieces still wait for admission after both clients went"
    assert qos_waiting(qd) == 0
    policy(qd)
    s3 = qd.boto3()
    names = [o["Key"] for o in s3.list_objects_v2(Bucket="shape").get("Contents", [])]
    assert "gone-put" not in names
    assert s3.get_object(Bucket="shape", Key="tiny")["Body"].read() == b"tiny"


def test_vanished_upload_withdrawn_at_its_end(qd):
    """An upload whose client went away while its next piece waits is dropped as soon
    as its end of input reaches the daemon (the bytes before it all in the daemon's
    socket buffer, too few for the body), not after those bytes were admitted and read
    at the rate: 32 KiB at 8 KiB/s would keep pieces queued (and charged to the
    tenant) for about 4 s."""
    policy(qd, write_bps=8 * 1024)
    body = os.urandom(MiB)
    req = signed_request(qd, "PUT", "/shape/gone-put2", body=body)[0]
    s = connect(qd)
    s.sendall(req[:len(req) - len(body) + 32 * 1024])
    deadline = time.monotonic() + 5
    while not qos_waiting(qd) and time.monotonic() < deadline:  # a piece of it waits
        time.sleep(0.02)
    time.sleep(0.2)
    s.close()
    t0 = time.monotonic()
    assert qos_quiet(qd, quiet=1.0, within=3.0), \
        "pieces of the upload still queued 2 s after its client went"
    assert time.monotonic() - t0 < 2.5
    policy(qd)
    s3 = qd.boto3()
    names = [o["Key"] for o in s3.list_objects_v2(Bucket="shape").get("Contents", [])]
    assert "gone-put2" not in names
