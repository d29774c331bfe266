#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NLM GRANTED callbacks, run inside `unshare --net` (private loopback).

Client B talks to s3nfsd from 127.0.0.2, where this script runs a fake
portmapper (port 111) and a fake client lock manager; s3nfsd must call B back
with NLMPROC4_GRANTED once A releases the lock B waits for, and must release
the lock again when B's lock manager refuses the grant.
Usage: nlm_callback_check.py S3NFSD WORKDIR"""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpc3 import Packer, RpcConn, rpc_listener, serve_rpc  # noqa: E402
from test_nfs import (NLM4_BLOCKED, NLM4_DENIED, NLM4_GRANTED, bucket_name, nlm_call,  # noqa
                      nlm_lock, nlm_lock_obj, nlm_test, nlm_unlock, root_fh)

BIN, WORK = sys.argv[1], sys.argv[2]
B_ADDR = "127.0.0.2"
granted_calls = []
lockd_answer = [NLM4_GRANTED]








def lockd_handler(prog, vers, proc, u, peer):
    assert (prog, vers, proc) == (100021, 4, 5), (prog, vers, proc)
    cookie, excl = u.opaque(), u.u32()
    caller, fh, oh, svid = u.string(), u.opaque(), u.opaque(), u.u32()
    off, length = u.u64(), u.u64()
    granted_calls.append((caller, svid, off, length, excl, cookie))
    return Packer().opaque(cookie).u32(lockd_answer[0]).bytes()


def wait_for(cond, what, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    sys.exit(f"FAIL: {what}")


def main():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    lockd = rpc_listener(B_ADDR, 0)
    lockd_port = lockd.getsockname()[1]
    pmap = rpc_listener(B_ADDR, 111)
    threading.Thread(target=serve_rpc, args=(pmap, lambda prog, vers, proc, u, peer: Packer().u32(
        lockd_port if (prog, vers, proc) == (100000, 2, 3) and u.u32() == 100021 else 0)
        .bytes()), daemon=True).start()
    threading.Thread(target=serve_rpc, args=(lockd, lockd_handler), daemon=True).start()

    port = 26049
    env = dict(os.environ, S3NFS_ACCESS_KEY="AKIANLMCALLBACK", S3NFS_SECRET_KEY="nlm-cb-secret")
    log = open(os.path.join(WORK, "log"), "wb")
    d = subprocess.Popen([BIN, "--foreground", "--data-dir", os.path.join(WORK, "data"),
                          "--s3-listen", "127.0.0.1:26000", "--nfs-listen", f"0.0.0.0:{port}",
                          "--admin-listen", "127.0.0.1:26001", "--log-level", "info,nfs=debug",
                          "--set", "data_file_size=256MiB"],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        a = RpcConn(port)
        b = RpcConn(port, source=B_ADDR)
        root = root_fh(a)
        st, bfh = a.mkdir(root, bucket_name())
        st, fh = a.create(bfh, "shared")
        assert st == 0

        # 1: B waits, A unlocks: B is called back and holds the lock.
        assert nlm_lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_lock(b, "hostB", fh, 2, 0, 100, block=True, cookie=b"bk1") == NLM4_BLOCKED
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_test(a, "hostA", fh, 1, 0, 100)[0] == NLM4_DENIED, "granted to B at once"
        wait_for(lambda: granted_calls, "no GRANTED callback reached B")
        assert granted_calls[0][:5] == ("hostB", 2, 0, 100, 1), granted_calls
        assert granted_calls[0][5] == b"bk1", "the callback carries the request's cookie"
        print("ok GRANTED callback delivered")

        # 2: B's lock manager refuses the grant: the lock is released again.
        assert nlm_unlock(b, "hostB", fh, 2, 0, 100) == NLM4_GRANTED
        assert nlm_lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_lock(b, "hostB", fh, 3, 0, 100, block=True) == NLM4_BLOCKED
        lockd_answer[0] = NLM4_DENIED
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        wait_for(lambda: len(granted_calls) == 2, "no second callback")
        wait_for(lambda: nlm_test(a, "hostA", fh, 1, 0, 100)[0] == NLM4_GRANTED,
                 "a refused grant was not released")
        print("ok refused GRANTED releases the lock")

        # 3: a cancelled request is not granted.
        lockd_answer[0] = NLM4_GRANTED
        assert nlm_lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_lock(b, "hostB", fh, 4, 0, 100, block=True) == NLM4_BLOCKED
        cancel = Packer().opaque(b"c").u32(1).u32(1).raw(nlm_lock_obj("hostB", fh, 4, 0, 100))
        u = nlm_call(b, 3, cancel.bytes())
        u.opaque()
        assert u.u32() == NLM4_GRANTED
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_test(a, "hostA", fh, 1, 0, 100)[0] == NLM4_GRANTED, "cancelled: not granted"
        print("ok CANCEL forgets the request")

        # 4: FREE_ALL of the waiting host forgets its requests too.
        assert nlm_lock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_lock(b, "hostB", fh, 5, 0, 100, block=True) == NLM4_BLOCKED
        nlm_call(b, 23, Packer().string("hostB").u32(7).bytes())
        assert nlm_unlock(a, "hostA", fh, 1, 0, 100) == NLM4_GRANTED
        assert nlm_test(a, "hostA", fh, 1, 0, 100)[0] == NLM4_GRANTED
        print("ok FREE_ALL forgets the host's requests")
        a.close()
        b.close()
        print("NLM CALLBACK OK")
    finally:
        d.terminate()
        d.wait(30)
        log.close()


main()
