# SPDX-License-Identifier: Apache-2.0
"""bench/ai leaves nothing behind when it is stopped part-way: its RGW (here on a
bluestore OSD, whose block file is the big thing to lose), its s3nfsd and its
work folder are gone after a SIGTERM (its own clean-up) and after a SIGKILL
(bench/reaper.py)."""
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BENCH = os.path.join(TOP, "bench", "ai", "run.py")
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import rgw as rgwmod  # noqa: E402

pytestmark = pytest.mark.slow


def procs_under(path):
    """PIDs of the processes whose command line names @p path (the bench's
    daemons: ceph.conf, the data dir, the reaper's argument)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if path in cmd and state != "Z":
            out.append(int(p))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_bench_ai_stopped_leaves_nothing(tmp_path, sig):
    why = rgwmod.ensure_installed()
    if why:
        pytest.skip(f"no Ceph RGW: {why}")
    p = subprocess.Popen([sys.executable, BENCH, "--model-size", "64M", "--samples", "20",
                          "--ckpt-size", "64M", "--only", "model", "--osd", "bluestore",
                          "--osd-size", "4G", "--dir", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    lines = []
    try:
        for line in p.stdout:  # up to the first shape: RGW and s3nfsd running
            lines.append(line)
            if line.startswith("(1) model load"):
                break
        assert lines and lines[-1].startswith("(1) model load"), "".join(lines)
        assert "OSD bluestore on a sparse file of 4.0 GiB" in "".join(lines)
        works = [os.path.join(tmp_path, d) for d in os.listdir(tmp_path)]
        assert len(works) == 1, works
        work = works[0]
        block = os.path.join(work, "rgw", "osd", "block")
        assert os.path.isfile(block)
        assert os.stat(block).st_size == 4 << 30
        assert os.stat(block).st_blocks * 512 < 1 << 30  # sparse
        before = procs_under(work)
        assert len(before) >= 5, before  # mon, osd, radosgw, s3nfsd, the reaper
        os.kill(p.pid, sig)
        rest = p.communicate(timeout=120)[0]
        if sig == signal.SIGTERM:
            assert p.returncode == 1, rest
            assert "interrupted" in rest, rest
        else:
            assert p.returncode == -signal.SIGKILL
        end = time.monotonic() + 90
        while time.monotonic() < end and (os.path.exists(work) or procs_under(work)):
            time.sleep(0.5)
        assert not procs_under(work), f"left running: {procs_under(work)}"
        assert not os.path.exists(work), os.listdir(work)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
