#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The Linux kernel client's lock manager during the server's NLM grace period
# (kernel_lock_grace_netns.sh restarted s3nfsd with a remembered client host):
# the first fcntl lock is answered NLM4_DENIED_GRACE_PERIOD, which lockd
# retries (every 5 s) until the grace period ends; then locking is normal:
# another process's attempt on the held range is refused.
import fcntl
import os
import sys
import time

B = f"kgrace-{os.getpid()}"
os.mkdir(B)
path = os.path.join(B, "f")
with open(path, "wb") as f:
    f.write(b"\0" * 4096)
fd = os.open(path, os.O_RDWR)
t0 = time.time()
fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)  # waits out the grace period
print(f"lock granted after {time.time() - t0:.1f} s")
pid = os.fork()
if pid == 0:
    fd2 = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 50)
        os._exit(1)
    except OSError:
        os._exit(0)
_, st = os.waitpid(pid, 0)
if os.WEXITSTATUS(st) != 0:
    sys.exit("FAIL: another process got the held range")
print("conflicting lock refused")
fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
os.close(fd)
os.unlink(path)
os.rmdir(B)
print("GRACE LOCK OK")
