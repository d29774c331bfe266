# SPDX-License-Identifier: Apache-2.0
"""bench/nfs/bench_nfs's history (--populate, the "hist" state of bench/nfs/run.sh):
with --hist-empty it makes empty files (CREATE only, the cheap way to a store of a
million files), runs the mixed load on them (its READs check each file's size and
bytes: empty, or the 4 KiB the mixed load wrote) and the churn file, and leaves
exactly the files it made, in directories of 1000. Without --hist-empty every
file holds 4 KiB. Checked through S3 (the history's directory is a bucket)."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def bench_nfs(tmp_path_factory):
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "libnfs"],
                            capture_output=True, text=True)
    if cflags.returncode != 0 or not shutil.which("cc"):
        pytest.skip("libnfs-dev (pkg-config libnfs) or cc missing")
    out = str(tmp_path_factory.mktemp("bench") / "bench_nfs")
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-Wno-unused-parameter", "-o", out,
                    os.path.join(ROOT, "bench", "nfs", "bench_nfs.c")] + cflags.stdout.split(),
                   check=True)
    return out


def run_history(bench_nfs, d, files, *extra):
    r = subprocess.run([bench_nfs, "--nfs-port", str(d.nfs_port), "--mount-port",
                        str(d.nfs_port), "--export", "/", "--size-mib", "8",
                        "--populate", str(files), "--mix-secs", "1", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + d.tail()
    rows = dict(re.findall(r"^RESULT (\S+) (\S+)", r.stdout, re.M))
    for row in ("hist_populate", "hist_mix", "hist_churn_write"):
        assert float(rows[row]) > 0, r.stdout
    return rows


def history_objects(d):
    s3 = d.boto3()
    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith("hist-")]
    assert len(buckets) == 1, buckets
    sizes = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=buckets[0]):
        for o in page.get("Contents", []):
            sizes[o["Key"]] = o["Size"]
    return sizes


@pytest.mark.parametrize("empty", [True, False])
def test_history_files(nfsd, bench_nfs, empty):
    files = 2100
    run_history(bench_nfs, nfsd, files, *(["--hist-empty"] if empty else []))
    sizes = history_objects(nfsd)
    want = {"d%05d/f%07d" % (i // 1000, i) for i in range(files)}
    assert set(sizes) == want  # every file, nothing else (the churn file is gone)
    counts = {}
    for s in sizes.values():
        counts[s] = counts.get(s, 0) + 1
    if empty:
        # the mixed load wrote 4 KiB into some of them, or replaced them with 4 KiB ones
        assert set(counts) <= {0, 4096} and counts.get(0, 0) > files // 2, counts
    else:
        assert counts == {4096: files}, counts
