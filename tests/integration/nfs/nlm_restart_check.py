#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NLM lock recovery across s3nfsd restarts, run inside `unshare --net`
(private loopback, so the fake portmapper may take port 111).

Client host B calls from 127.0.0.2, where this script runs a fake portmapper
(port 111) and a fake status monitor (NSM, statd) that records SM_NOTIFY
calls. Host C (127.0.0.3) locks and unlocks (must be forgotten); host D
(127.0.0.4) locks but has no portmapper (unreachable: kept). Proves:
- after SIGTERM and after kill -9, B's statd gets SM_NOTIFY with the new NSM
  state (SM_STAT's), and only remembered hosts are notified;
- during the grace period a plain LOCK or TEST answers DENIED_GRACE_PERIOD,
  B's reclaim is granted and a conflicting reclaim denied; afterwards plain
  locking resumes and a late reclaim is refused;
- the remembered hosts survive restarts, a notified host that reclaims
  nothing is forgotten after the grace period, FREE_ALL and SM_NOTIFY from a
  host forget it, the grace period ends at once when no host could be
  notified, an unreachable host is kept for 3 starts, and a start with no
  host remembered has no grace period.
Usage: nlm_restart_check.py S3NFSD WORKDIR"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpc3 import Packer, RpcConn, rpc_listener, serve_rpc  # noqa: E402
from test_nfs import (NLM4_DENIED, NLM4_GRANTED, bucket_name, nlm_call,  # noqa: E402
                      nlm_lock_obj, nlm_unlock, root_fh)

BIN, WORK = sys.argv[1], sys.argv[2]
NLM4_DENIED_GRACE_PERIOD = 4
B_ADDR, C_ADDR, D_ADDR = "127.0.0.2", "127.0.0.3", "127.0.0.4"
PORT = 27049
notifies = []  # (mon_name, state, source address) received by B's statd








def statd_handler(prog, vers, proc, u, peer):
    assert (prog, vers, proc) == (100024, 1, 6), (prog, vers, proc)
    notifies.append((u.string(), u.u32(), peer[0]))
    return b""  # SM_NOTIFY: void


def wait_for(cond, what, secs=60):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    sys.exit(f"FAIL: {what}\n--- log ---\n{log_text()[-4000:]}")


def log_text():
    with open(os.path.join(WORK, "log"), "rb") as f:
        return f.read().decode(errors="replace")


def run_log():
    """The log of the current run only."""
    return log_text().split("==== start")[-1]


class Daemon:
    def __init__(self):
        self.p = None
        self.log = open(os.path.join(WORK, "log"), "ab")

    def start(self, grace):
        self.log.write(f"==== start, nlm_grace_period={grace}\n".encode())
        self.log.flush()
        env = dict(os.environ, S3NFS_ACCESS_KEY="AKIANLMRESTART", S3NFS_SECRET_KEY="nlm-restart")
        self.p = subprocess.Popen(
            [BIN, "--foreground", "--data-dir", os.path.join(WORK, "data"),
             "--s3-listen", "127.0.0.1:27000", "--nfs-listen", f"0.0.0.0:{PORT}",
             "--admin-listen", "127.0.0.1:27001", "--log-level", "info,nfs=debug",
             "--set", "data_file_size=256MiB", "--set", f"nlm_grace_period={grace}"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
                return
            except OSError:
                assert self.p.poll() is None, "s3nfsd exited"
                time.sleep(0.05)
        sys.exit("FAIL: s3nfsd did not listen")

    def stop(self, sig=signal.SIGTERM):
        self.p.send_signal(sig)
        self.p.wait(60)


def lock(c, host, fh, svid, off, length, reclaim=False, excl=True):
    args = (Packer().opaque(b"ck").u32(0).u32(int(excl))
            .raw(nlm_lock_obj(host, fh, svid, off, length)).u32(int(reclaim)).u32(1).bytes())
    u = nlm_call(c, 2, args)
    assert u.opaque() == b"ck"
    return u.u32()


def test(c, host, fh, svid, off, length):
    u = nlm_call(c, 1, Packer().opaque(b"t").u32(1)
                 .raw(nlm_lock_obj(host, fh, svid, off, length)).bytes())
    u.opaque()
    return u.u32()


def free_all(c, host):
    nlm_call(c, 23, Packer().string(host).u32(9).bytes())


def nsm_state(c):
    r = c.call(100024, 1, 1, Packer().string("probe").bytes())  # SM_STAT
    r.body.u32()
    return r.body.u32()


def conns():
    return (RpcConn(PORT), RpcConn(PORT, source=B_ADDR), RpcConn(PORT, source=C_ADDR),
            RpcConn(PORT, source=D_ADDR))


def close(*cs):
    for c in cs:
        c.close()


def main():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    statd = rpc_listener(B_ADDR, 0)
    statd_port = statd.getsockname()[1]
    pmap = rpc_listener(B_ADDR, 111)
    threading.Thread(target=serve_rpc, args=(pmap, lambda prog, vers, proc, u, peer: Packer().u32(
        statd_port if (prog, vers, proc) == (100000, 2, 3) and u.u32() == 100024 else 0)
        .bytes()), daemon=True).start()
    threading.Thread(target=serve_rpc, args=(statd, statd_handler), daemon=True).start()
    d = Daemon()
    try:
        # ---- run 1: nothing remembered yet: no grace period, nobody notified.
        d.start(8)
        a, b, cc, dd = conns()
        wait_for(lambda: "no grace period" in run_log(), "a first start has a grace period")
        st1 = nsm_state(a)
        root = root_fh(a)
        st, bfh = a.mkdir(root, bucket_name())
        st, fh = a.create(bfh, "locked")
        assert st == 0
        assert lock(b, "hostB", fh, 2, 0, 100) == NLM4_GRANTED
        assert lock(cc, "hostC", fh, 3, 200, 10) == NLM4_GRANTED
        assert nlm_unlock(cc, "hostC", fh, 3, 200, 10) == NLM4_GRANTED
        assert lock(dd, "hostD", fh, 4, 300, 10, excl=False) == NLM4_GRANTED
        log = log_text()
        assert "NLM host hostB" in log and "NLM host hostC" in log and "hostD" in log
        wait_for(lambda: "NLM host hostC forgotten (holds no lock)" in log_text(),
                 "hostC released everything but is still remembered")
        assert "NLM host hostB forgotten" not in log_text()
        close(a, b, cc, dd)
        d.stop(signal.SIGTERM)
        assert not notifies
        print("ok run 1: hosts remembered on lock, forgotten on release")

        # ---- run 2 (after SIGTERM): B and D remembered; grace period.
        d.start(8)
        a, b, cc, dd = conns()
        st2 = nsm_state(a)
        assert st2 == st1 + 2, (st1, st2)
        # plain locks and tests wait for the grace period; reclaims go
        assert lock(a, "hostA", fh, 1, 500, 10) == NLM4_DENIED_GRACE_PERIOD
        assert test(a, "hostA", fh, 1, 0, 100) == NLM4_DENIED_GRACE_PERIOD
        assert lock(b, "hostB", fh, 2, 0, 100, reclaim=True) == NLM4_GRANTED
        assert lock(a, "hostA", fh, 1, 50, 10, reclaim=True) == NLM4_DENIED, \
            "a reclaim conflicting with another reclaim is denied"
        wait_for(lambda: notifies, "B's statd got no SM_NOTIFY after SIGTERM")
        mon, state, src = notifies[0]
        assert state == st2, (notifies, st2)
        socket.inet_aton(mon)  # our address as B reaches us
        print(f"ok run 2: SM_NOTIFY(mon_name={mon}, state={state}) from {src}; "
              "grace: plain LOCK/TEST denied, reclaim granted")
        wait_for(lambda: "SM_NOTIFY to NLM host hostD at 127.0.0.4 not delivered" in log_text(),
                 "unreachable host D not logged")
        assert len(notifies) == 1 and "SM_NOTIFY to NLM host hostC" not in log_text()
        # after the grace period: plain locking resumes, B's reclaimed lock holds
        wait_for(lambda: lock(a, "hostA", fh, 1, 500, 10) == NLM4_GRANTED,
                 "plain locking did not resume after the grace period")
        assert lock(a, "hostA", fh, 1, 50, 10) == NLM4_DENIED, "B's reclaimed lock holds"
        assert test(a, "hostA", fh, 1, 50, 10) == NLM4_DENIED
        assert lock(cc, "hostC", fh, 3, 700, 10, reclaim=True) == NLM4_DENIED_GRACE_PERIOD, \
            "a reclaim after the grace period is refused"
        assert nlm_unlock(a, "hostA", fh, 1, 500, 10) == NLM4_GRANTED
        wait_for(lambda: "NLM grace period over" in run_log(), "no end of grace logged")
        free_all(a, "hostA")
        wait_for(lambda: "NLM host hostA forgotten (its locks were freed)" in run_log(),
                 "FREE_ALL did not forget hostA")
        close(a, b, cc, dd)
        # ---- crash while B holds its lock.
        d.stop(signal.SIGKILL)
        print("ok run 2: after grace plain locking resumes; late reclaim refused")

        # ---- run 3 (after kill -9): B (and unreachable D) still remembered.
        d.start(3)
        a, b, cc, dd = conns()
        st3 = nsm_state(a)
        assert st3 == st2 + 2
        wait_for(lambda: len(notifies) == 2, "B's statd got no SM_NOTIFY after kill -9")
        assert notifies[1][1] == st3, (notifies, st3)
        assert re.search(r"NLM: 2 client hosts held locks", run_log()), run_log()
        # D rebooted: its SM_NOTIFY forgets it; B does not reclaim: forgotten after grace
        dd.call(100024, 1, 6, Packer().string("hostD").u32(11).bytes())
        wait_for(lambda: "NLM host hostB forgotten (notified, reclaimed nothing)" in log_text(),
                 "B not forgotten after a grace period without reclaims")
        assert "NLM host hostD forgotten (its locks were freed)" in run_log()
        assert lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED, "B's old lock is gone"
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        free_all(a, "hostA")
        assert lock(dd, "hostD", fh, 4, 300, 10) == NLM4_GRANTED
        close(a, b, cc, dd)
        d.stop(signal.SIGTERM)
        print("ok run 3: SM_NOTIFY after kill -9; unreclaimed host and rebooted host forgotten")

        # ---- runs 4-6: only unreachable D remembered: the grace period (60 s) ends as soon
        # as its notification fails; D is kept for the next start, and given up after 3.
        for run in (4, 5, 6):
            d.start(60)
            a, b, cc, dd = conns()
            wait_for(lambda: "NLM grace period ended early" in run_log(),
                     "grace period not ended when nobody could be notified", secs=40)
            assert lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
            assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
            free_all(a, "hostA")
            if run < 6:
                time.sleep(0.2)
                assert "NLM host hostD forgotten" not in run_log()
            else:
                wait_for(lambda: "NLM host hostD could not be notified at 3 starts in a row: "
                         "given up" in run_log(), "unreachable D not given up")
            assert len(notifies) == 2
            close(a, b, cc, dd)
            d.stop(signal.SIGTERM)
        print("ok runs 4-6: grace period ended early when no host could be notified; "
              "unreachable host given up after 3 starts")

        # ---- run 7: nothing remembered: no grace period, nobody notified.
        d.start(60)
        a, b, cc, dd = conns()
        wait_for(lambda: "no grace period" in run_log(), "grace period with no host remembered")
        assert lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        time.sleep(0.5)
        assert len(notifies) == 2
        close(a, b, cc, dd)
        d.stop(signal.SIGTERM)
        print("ok run 7: no host remembered, no grace period")
        print("NLM RESTART OK")
    finally:
        if d.p and d.p.poll() is None:
            d.p.kill()
            d.p.wait(30)
        d.log.close()


main()
