#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake NLM client host for kernel_lock_grace_netns.sh (inside `unshare
--net`): as hostB on 127.0.0.2 it takes one lock from s3nfsd on
127.0.0.1:PORT, prints "HOLDING", then records every SM_NOTIFY it gets in
WORKDIR/notifies (one "mon_name state" line each) until killed. Its
"status monitor" listens on 127.0.0.2:PORT: the private rpcbind (which also
answers on 127.0.0.2:111) names PORT for NSM, since s3nfsd registered its own
NSM there.
Usage: nlm_grace_holder.py PORT WORKDIR"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rpc3 import RpcConn, rpc_listener, serve_rpc  # noqa: E402
from test_nfs import NLM4_GRANTED, nlm_lock, root_fh  # noqa: E402

PORT, WORK = int(sys.argv[1]), sys.argv[2]
ADDR = "127.0.0.2"








def statd(prog, vers, proc, u, peer):
    if (prog, vers, proc) == (100024, 1, 6):
        mon, state = u.string(), u.u32()
        with open(os.path.join(WORK, "notifies"), "a") as f:
            f.write(f"{mon} {state}\n")
    return b""


def main():
    sd = rpc_listener(ADDR, PORT)
    threading.Thread(target=serve_rpc, args=(sd, statd), daemon=True).start()
    c = RpcConn(PORT, source=ADDR)
    assert nlm_lock(c, "hostB", root_fh(c), 7, 0, 1) == NLM4_GRANTED
    c.close()
    print("HOLDING", flush=True)
    while True:
        time.sleep(3600)


main()
