#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The training-job checkpoint pattern on the kernel client: several writers
# write shards in parallel (large sequential writes, fsync), then a manifest
# is written to a temporary name and renamed over the live one, while a
# reader keeps opening the live manifest. The reader must only ever see a
# complete manifest whose shards all verify; after drop_caches every shard
# of the last round must match its checksum.
import hashlib
import os
import sys
import threading

B = f"kckpt-{os.getpid()}"
os.mkdir(B)
os.chdir(B)
ROUNDS, SHARDS, SIZE = 4, 4, 6 << 20
stop = threading.Event()
errors = []
reads = [0]


def write_shard(rnd, i, sums):
    data = os.urandom(SIZE)
    name = f"r{rnd}-shard{i}.pt"
    with open(name + ".tmp", "wb") as f:
        for off in range(0, SIZE, 1 << 20):
            f.write(data[off:off + (1 << 20)])
        f.flush()
        os.fsync(f.fileno())
    os.rename(name + ".tmp", name)
    sums[name] = hashlib.sha256(data).hexdigest()


def reader():
    while not stop.is_set():
        try:
            with open("latest", "r") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        lines = text.splitlines()
        if not lines or lines[-1] != "END":
            errors.append(f"partial manifest seen: {text!r:.200}")
            return
        reads[0] += 1


t = threading.Thread(target=reader)
t.start()
for rnd in range(ROUNDS):
    sums = {}
    ws = [threading.Thread(target=write_shard, args=(rnd, i, sums)) for i in range(SHARDS)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    body = "".join(f"{n} {s}\n" for n, s in sorted(sums.items())) + "END\n"
    with open("latest.tmp", "w") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.rename("latest.tmp", "latest")
    for old in (n for n in os.listdir(".") if n.startswith(f"r{rnd - 1}-")):
        os.unlink(old)
stop.set()
t.join()
if errors:
    sys.exit("FAIL: " + errors[0])
os.sync()
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
for line in open("latest").read().splitlines()[:-1]:
    name, want = line.split()
    got = hashlib.sha256(open(name, "rb").read()).hexdigest()
    if got != want:
        sys.exit(f"FAIL: {name} checksum {got} != {want}")
print(f"reader saw {reads[0]} complete manifests; {SHARDS} shards verified")
os.chdir("..")
for n in os.listdir(B):
    os.unlink(os.path.join(B, n))
os.rmdir(B)
print("CHECKPOINT OK")
