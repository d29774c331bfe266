# SPDX-License-Identifier: Apache-2.0
"""Recall over NFS with a real NFS client library (issue 12's proof, "recall
over NFS (libnfs random reads)"): tier_nfs_ranges.c, compiled here against
libnfs (libnfs-dev, as tests/integration/nfs/nfs3_client.c is), mounts the
daemon and reads random ranges of evicted files with nfs_pread. Against both
remotes: the session's Ceph RGW and a second s3nfsd.

- a file under a directory whose policy turns `whole_file` off (1 MiB chunks,
  no read-ahead): every range reads the file's bytes, and the remote sent
  exactly the 1 MiB chunks the ranges cover (s3nfs_tier_recalled_bytes_total),
  not the file; the file stays `evicted`; the same ranges read again fetch
  nothing more;
- a file of the bucket's default policy (`whole_file` on): the same random
  reads read the right bytes, and the whole file comes back (recalled bytes =
  its size, state `uploaded`), as docs/tiering.md § Recall says."""
import os
import random
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin  # noqa: E402
from tierutil import add_remote, wait_for  # noqa: E402
from test_tier_evict import FAST, metric, state  # noqa: E402

MiB = 1024 * 1024
CHUNK = MiB
SIZE = 16 * MiB + 12345  # 17 chunks of 1 MiB, the last one short


@pytest.fixture(scope="session")
def ranges_tool(tmp_path_factory):
    """tier_nfs_ranges.c built once per session against the system's libnfs."""
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libnfs"], check=True,
                               capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("libnfs-dev (pkg-config libnfs) missing: scripts/deps.sh --test installs it")
    out = str(tmp_path_factory.mktemp("tiernfs") / "tier_nfs_ranges")
    subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-Werror", "-o", out,
                    os.path.join(HERE, "tier_nfs_ranges.c")] + flags, check=True)
    return out


def read_ranges(tool, d, path, ranges, tmp_path):
    """The bytes of @ranges ((offset, length) pairs) of @path read through libnfs,
    concatenated, and the tool's per-range lines."""
    out = str(tmp_path / f"ranges-{time.time_ns()}")
    stdin = "".join(f"{o} {n}\n" for o, n in ranges)
    p = subprocess.run([tool, d.nfs_url, path, out], input=stdin, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and "DONE" in p.stdout, \
        f"tier_nfs_ranges failed:\n{p.stdout}\n{p.stderr}\n--- daemon log ---\n{d.tail()}"
    with open(out, "rb") as f:
        got = f.read()
    os.unlink(out)
    return got, [x for x in p.stdout.splitlines() if x.startswith("ok ")]


def random_ranges(rnd, size, n):
    """@n random ranges over half of the file's chunks (some ranges cross into the
    next chunk), the file's last bytes among them."""
    nchunks = (size + CHUNK - 1) // CHUNK
    picked = rnd.sample(range(nchunks - 1), (nchunks - 1) // 2)
    out = [(size - 1000, 1000)]
    for c in picked[:n - 1]:
        off = c * CHUNK + rnd.randrange(0, CHUNK)
        out.append((off, min(rnd.randrange(1, 300_000), size - off)))
    rnd.shuffle(out)
    return out


def covered(ranges, size):
    """Bytes of the chunks the ranges touch."""
    chunks = set()
    for o, n in ranges:
        chunks.update(range(o // CHUNK, (o + n - 1) // CHUNK + 1))
    return sum(min(CHUNK, size - c * CHUNK) for c in chunks), chunks


def test_libnfs_random_reads_of_evicted_files(daemon_factory, remote, ranges_tool, tmp_path):
    dm = daemon_factory(extra_args=FAST).start()
    adm = Admin(dm)
    r = add_remote(adm, remote.endpoint, remote.access_key, remote.secret_key, remote.bucket)
    b = "ln" + os.urandom(4).hex()
    s3 = dm.boto3()
    s3.create_bucket(Bucket=b)
    data = {k: os.urandom(SIZE) for k in ("part/f.bin", "whole/f.bin")}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    base = f"/tenants/1/buckets/{b}/tier"
    adm.put(base, {"remote": r["id"], "upload_after_s": 0, "evict_after_s": 1})
    dp = adm.put(base + "?dir=part", {"recall": {"whole_file": False, "chunk_size": CHUNK,
                                                 "read_ahead": 0}})
    assert dp["effective"]["recall"]["whole_file"] is False
    for k in data:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", timeout=90, what=f"{k} evicted")
    # the remote copies are the files (read with boto3, not through s3nfs)
    for k, v in data.items():
        assert remote.s3.get_object(Bucket=remote.bucket, Key="p/" + k)["Body"].read() == v
    rnd = random.Random(12)

    # whole_file off: only the chunks the reads cover come back
    part = data["part/f.bin"]
    ranges = random_ranges(rnd, SIZE, 8)
    want_bytes, chunks = covered(ranges, SIZE)
    assert len(chunks) < SIZE // CHUNK, chunks  # the reads leave chunks out
    m0 = metric(dm, "s3nfs_tier_recalled_bytes_total") or 0
    got, lines = read_ranges(ranges_tool, dm, f"/{b}/part/f.bin", ranges, tmp_path)
    assert len(lines) == len(ranges)
    assert got == b"".join(part[o:o + n] for o, n in ranges)
    time.sleep(1)  # (a chunk's bytes are counted once its transaction is in)
    assert metric(dm, "s3nfs_tier_recalled_bytes_total") - m0 == want_bytes, (ranges, chunks)
    assert state(dm, b, "part/f.bin") == "evicted"
    # the same ranges again (and others inside those chunks): local now, nothing fetched
    again = ranges + [(c * CHUNK + 17, 4096) for c in sorted(chunks) if c * CHUNK + 4113 <= SIZE]
    got, _ = read_ranges(ranges_tool, dm, f"/{b}/part/f.bin", again, tmp_path)
    assert got == b"".join(part[o:o + n] for o, n in again)
    time.sleep(1)
    assert metric(dm, "s3nfs_tier_recalled_bytes_total") - m0 == want_bytes
    assert state(dm, b, "part/f.bin") == "evicted"

    # the default (whole_file on): random reads right, and the whole file comes back
    whole = data["whole/f.bin"]
    ranges = random_ranges(rnd, SIZE, 8)
    m1 = metric(dm, "s3nfs_tier_recalled_bytes_total")
    got, lines = read_ranges(ranges_tool, dm, f"/{b}/whole/f.bin", ranges, tmp_path)
    assert len(lines) == len(ranges)
    assert got == b"".join(whole[o:o + n] for o, n in ranges)
    wait_for(lambda: state(dm, b, "whole/f.bin") == "uploaded", timeout=90,
             what="whole/f.bin local again")
    assert metric(dm, "s3nfs_tier_recalled_bytes_total") - m1 == SIZE
    got, _ = read_ranges(ranges_tool, dm, f"/{b}/whole/f.bin", [(0, SIZE)], tmp_path)
    assert got == whole
