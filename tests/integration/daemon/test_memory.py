# SPDX-License-Identifier: Apache-2.0
"""The daemon's own memory upkeep: the malloc_trim_s timer that gives the heap
memory glibc keeps free back to the kernel (bench/soak measures the effect over
an hour; docs/operations.md, section Memory)."""
import os
import re
import time

TRIM_LINE = re.compile(r"malloc_trim: anonymous memory (-?\d+) -> (-?\d+) KiB")


def trim_lines(d):
    with open(d.log_path, errors="replace") as f:
        return TRIM_LINE.findall(f.read())


def test_malloc_trim_timer_runs(daemon_factory):
    d = daemon_factory(["--set", "malloc_trim_s=1", "--log-level", "info,srv=debug",
                        "--set", "data_file_size=256MiB"]).start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="trim")
    for i in range(20):
        s3.put_object(Bucket="trim", Key="k%d" % i, Body=os.urandom(300_000))
        s3.get_object(Bucket="trim", Key="k%d" % i)["Body"].read()
    # Bounded wait for the timer (not a timing assertion: any pace passes).
    deadline = time.time() + 120
    while len(trim_lines(d)) < 2 and time.time() < deadline:
        time.sleep(0.5)
    runs = trim_lines(d)
    assert len(runs) >= 2, d.tail()
    assert all(int(before) > 0 and int(after) > 0 for before, after in runs), runs
    assert d.stop() == 0


def test_malloc_trim_off(daemon_factory):
    d = daemon_factory(["--set", "malloc_trim_s=0", "--log-level", "info,srv=debug",
                        "--set", "data_file_size=256MiB"]).start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="notrim")
    s3.put_object(Bucket="notrim", Key="k", Body=b"x" * 100_000)
    assert d.stop() == 0
    assert trim_lines(d) == []
