"""Checks shared by the QoS tests of S3 and NFS (test_s3_qos.py, test_nfs_qos.py):
rates bounded above by the client's time (a cap not enforced fails at once), and below
by the seconds the daemon itself counted its requests waiting for admission, measured
again when a load spike misses them."""
import functools
import time
import urllib.request

BURST_MS = 100


def timed(fn, *a, **kw):
    t = time.monotonic()
    r = fn(*a, **kw)
    return time.monotonic() - t, r


def qos_waited(d):
    """The time the daemon's requests waited for QoS admission so far, in seconds
    (s3nfs_qos_throttled_seconds_total, all levels)."""
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        return sum(float(line.split()[-1]) for line in r.read().decode().splitlines()
                   if line.startswith("s3nfs_qos_throttled_seconds_total{"))


def timed_waits(d, fn, *a, **kw):
    """(client seconds, the seconds the daemon's requests waited for admission meanwhile,
    fn's answer)."""
    w0 = qos_waited(d)
    t, r = timed(fn, *a, **kw)
    return t, qos_waited(d) - w0, r


class SlowError(AssertionError):
    """A bound that a loaded machine misses now and then as well as a broken cap every
    time: requests waited for admission longer than the caps allow (debt or a cap charged
    twice; or the daemon's loop running seconds late, its lateness counting as waiting),
    or a client that stalled reading got a socket buffer's worth at once."""


def retry_slow(fn, tries=3):
    """@fn (a test, or a part of one that can run again), measured again when it missed
    a lower bound (SlowError), at most @tries times: a broken cap misses every time, a
    load spike once. Upper bounds (a cap not enforced) fail at once."""
    @functools.wraps(fn)
    def run(*a, **kw):
        for i in range(tries):
            try:
                return fn(*a, **kw)
            except SlowError as e:
                if i == tries - 1:
                    raise
                print(f"{fn.__name__}: {e}: measuring again")
    return run


def check_waited(waited, bound, what):
    """Not held back more than the caps allow: the seconds the daemon counted its requests
    waiting for admission stay within @bound. Not the client's time, which a loaded
    machine stretches by itself: debt left by an earlier request, or a cap charged twice,
    shows here as waits (the daemon's own lateness counts too: see retry_slow)."""
    if waited > bound:
        raise SlowError(
            f"{what}: requests waited {waited:.2f} s for admission, more than {bound:.2f} s")


def check_rate(nbytes, secs, cap, what, waited=None):
    """Within the cap (allowing the burst the bucket starts with), and near it: by the
    daemon's waits when given (check_waited), else by the client's time."""
    burst = cap * BURST_MS / 1000
    assert (nbytes - burst) / secs <= 1.1 * cap, \
        f"{what}: {nbytes} B in {secs:.2f} s is over the cap of {cap} B/s"
    if waited is not None:  # waits as if at 0.7 x cap at least (the client bound's room)
        check_waited(waited, nbytes / (0.7 * cap), what)
        return
    assert nbytes / secs >= 0.7 * cap, \
        f"{what}: {nbytes} B in {secs:.2f} s is far under the cap of {cap} B/s"


def check_ops(n, secs, cap, what, waited=None):
    burst = max(1, cap * BURST_MS / 1000)
    assert (n - burst) / secs <= 1.1 * cap, f"{what}: {n} ops in {secs:.2f} s over {cap}/s"
    if waited is not None:
        check_waited(waited, n / (0.7 * cap), what)
        return
    assert n / secs >= 0.7 * cap, f"{what}: {n} ops in {secs:.2f} s far under {cap}/s"
