# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the remote-tier tests: the tier's S3 client driven through
tier_s3_tool (built by make), against two real remotes: Ceph RGW (the
session-wide `rgw` fixture of ../conftest.py) and a second s3nfsd
(`s3nfsd_remote`). `remote` is parametrized over both; each test gets a
bucket of its own."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tierutil import TOOL, Remote, new_bucket  # noqa: E402


@pytest.fixture(scope="session")
def tool():
    if not os.access(TOOL, os.X_OK):
        pytest.fail(f"{TOOL} not built (run make; or set S3NFS_BUILD)")
    return TOOL


@pytest.fixture(params=["rgw", "s3nfsd"])
def remote(request, tool):
    """A fresh bucket on RGW or on a second s3nfsd."""
    if request.param == "rgw":
        r = request.getfixturevalue("rgw")
        s3 = r.boto3()
        return Remote("rgw", r.endpoint, r.access_key, r.secret_key, s3, new_bucket(s3))
    d = request.getfixturevalue("s3nfsd_remote")
    s3 = d.boto3()
    return Remote("s3nfsd", d.s3_endpoint, d.access_key, d.secret_key, s3, new_bucket(s3), d)


@pytest.fixture
def own_s3nfsd(daemon_factory, tool):
    """A remote s3nfsd of the test's own (it may be killed), with a bucket."""
    d = daemon_factory(extra_args=["--set", "data_file_size=1GiB"]).start()
    s3 = d.boto3()
    return Remote("s3nfsd", d.s3_endpoint, d.access_key, d.secret_key, s3, new_bucket(s3), d)
