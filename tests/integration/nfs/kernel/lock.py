#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# POSIX record locks over NFSv3 + NLM (mounted without nolock): a child
# process holds an exclusive lock on a range; the parent's non-blocking
# attempt on that range fails and succeeds on another range; once the child
# releases, the parent gets it; a blocking attempt waits for the holder.
import fcntl
import os
import sys
import time

B = f"klock-{os.getpid()}"
os.mkdir(B)
path = os.path.join(B, "f")
with open(path, "wb") as f:
    f.write(b"\0" * 4096)

r, w = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)  # bytes 0..99
    os.write(w, b"L")
    os.read(r2, 1)  # wait for the parent's go
    time.sleep(2)
    fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0)
    os._exit(0)

os.read(r, 1)
fd = os.open(path, os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 50)
    sys.exit("FAIL: got a lock that another process holds")
except OSError as e:
    print(f"conflicting lock refused: {e.strerror}")
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 100)  # bytes 100..199: free
print("disjoint range granted")
os.write(w2, b"g")
t0 = time.time()
fcntl.lockf(fd, fcntl.LOCK_EX, 10, 50)  # blocks until the child unlocks
print(f"blocking lock granted after {time.time() - t0:.1f} s")
os.waitpid(pid, 0)
fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
os.close(fd)
os.unlink(path)
os.rmdir(B)
print("LOCK OK")
