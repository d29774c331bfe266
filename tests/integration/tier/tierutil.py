# SPDX-License-Identifier: Apache-2.0
"""Helpers of the remote-tier tests: run tier_s3_tool (the tier's S3 client
from the command line) against a remote and read what it printed; make a
remote bucket; add a remote; wait for a condition; the module's daemon fixture."""
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from s3nfsd_harness import TOP, Daemon  # noqa: E402

BUILD = os.environ.get("S3NFS_BUILD", os.path.join(TOP, "build"))
TOOL = os.path.join(BUILD, "tests", "integration", "tier", "tier_s3_tool")


class Out:
    """What one tool run printed: JSON lines, the results (lines with "op"),
    the listed entries, and the client's counters."""

    def __init__(self, proc_rc, stdout, stderr):
        self.rc = proc_rc
        self.lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
        self.stderr = stderr
        self.results = [x for x in self.lines if "op" in x]
        self.keys = [x["key"] for x in self.lines if "key" in x and "op" not in x]
        self.prefixes = [x["prefix"] for x in self.lines if "prefix" in x and "op" not in x]
        self.entries = [x for x in self.lines if "key" in x and "op" not in x]
        st = [x["stats"] for x in self.lines if "stats" in x]
        self.stats = st[-1] if st else {}

    @property
    def res(self):
        assert self.results, f"no result printed (rc {self.rc}): {self.stderr}"
        return self.results[-1]


class Remote:
    """One remote bucket and how to reach it with the tool and with boto3."""

    def __init__(self, kind, endpoint, access_key, secret_key, s3, bucket, daemon=None):
        self.kind = kind
        self.endpoint = endpoint
        self.access_key = access_key
        self.secret_key = secret_key
        self.s3 = s3
        self.bucket = bucket
        self.daemon = daemon

    def env(self, **over):
        e = dict(os.environ)
        e.update({"TIER_S3_ENDPOINT": self.endpoint, "TIER_S3_BUCKET": self.bucket,
                  "TIER_S3_ACCESS_KEY": self.access_key, "TIER_S3_SECRET_KEY": self.secret_key,
                  "TIER_S3_REGION": "us-east-1"})
        for k, v in over.items():
            e["TIER_S3_" + k.upper()] = v
        return e

    def run(self, *args, ok=True, timeout=300, **over):
        r = subprocess.run([TOOL] + [str(a) for a in args], env=self.env(**over),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        out = Out(r.returncode, r.stdout, r.stderr)
        if ok:
            assert r.returncode == 0, f"tier_s3_tool {args} failed:\n{r.stdout}\n{r.stderr}"
        return out

    def popen(self, *args, **over):
        return subprocess.Popen([TOOL] + [str(a) for a in args], env=self.env(**over),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def new_bucket(s3, prefix="tier-"):
    """A new bucket of @s3 (a boto3 client), its name @prefix and random hex."""
    name = prefix + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    return name


def add_remote(adm, endpoint, akey, skey, bucket, prefix="p/"):
    """A new remote (POST /remotes through @adm, a tenutil.Admin) over @bucket of
    the S3 store at @endpoint, under a random name; what the API answered."""
    return adm.post("/remotes", {"name": "r" + uuid.uuid4().hex[:8], "endpoint": endpoint,
                                 "bucket": bucket, "access_key": akey, "secret_key": skey,
                                 "prefix": prefix})


def metrics(dm):
    """The uploader's counters from /metrics: requests by opcode (by their op name) and
    the unlabelled s3nfs_tier_* values (by their name)."""
    with urllib.request.urlopen(dm.admin_endpoint + "/metrics", timeout=30) as f:
        text = f.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("s3nfs_tier_upload_requests_total{op=\""):
            out[line.split('"')[1]] = int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("s3nfs_tier_") and " " in line and "{" not in line \
                and not line.startswith("#"):
            out[line.split(" ")[0]] = int(float(line.rsplit(" ", 1)[1]))
    return out


def delta(a, b):
    """What moved between two metrics() readings."""
    return {k: b[k] - a.get(k, 0) for k in b if b[k] != a.get(k, 0)}


def wait_for(pred, timeout=60, step=0.2, what="condition"):
    """pred()'s first true answer, asking every @step seconds for @timeout."""
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


def daemon_fixture(name, args):
    """A module-scoped fixture: an s3nfsd started with @args in a new temporary
    directory named after @name, cleaned up after the module's tests."""
    @pytest.fixture(scope="module")
    def d(tmp_path_factory):
        dm = Daemon(str(tmp_path_factory.mktemp(name)), args).start()
        yield dm
        dm.cleanup()
    return d
