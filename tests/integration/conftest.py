# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures over s3nfsd_harness (see its docstring)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3nfsd_harness import ACCESS_KEY, ADMIN_TOKEN, BIN, CTL, SECRET_KEY, Daemon, free_port  # noqa: E402,F401


@pytest.fixture
def s3nfsd(tmp_path):
    d = Daemon(str(tmp_path)).start()
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def s3nfsd_module(tmp_path_factory):
    d = Daemon(str(tmp_path_factory.mktemp("s3nfsd"))).start()
    yield d
    d.cleanup()


@pytest.fixture
def daemon_factory(tmp_path):
    """Make (not start) daemons with extra args/env; all are stopped at the end."""
    made = []

    def make(extra_args=None, env=None, subdir=None):
        d = Daemon(str(tmp_path / (subdir or f"d{len(made)}")), extra_args, env)
        os.makedirs(d.data_dir, exist_ok=True)
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup()


@pytest.fixture(scope="session")
def rgw(tmp_path_factory):
    """A real Ceph RADOS Gateway on loopback for the whole session (rgw.py):
    yields the running Rgw (endpoint, access_key, secret_key, region, boto3()).
    Skips when the ceph packages are missing and cannot be installed."""
    import rgw as rgwmod
    why = rgwmod.ensure_installed()
    if why:
        pytest.skip(f"no Ceph RGW for the remote-tier tests: {why}")
    r = rgwmod.Rgw(str(tmp_path_factory.mktemp("rgw")))
    try:
        r.start()
    except rgwmod.RgwError as e:
        pytest.fail(str(e), pytrace=False)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def s3nfsd_remote(tmp_path_factory):
    """A second s3nfsd used as a remote object store (the tier's other test
    remote): started with a small data file and INFO request logs, one module."""
    d = Daemon(str(tmp_path_factory.mktemp("s3nfsd-remote")),
               ["--set", "data_file_size=1GiB"]).start()
    yield d
    d.cleanup()
