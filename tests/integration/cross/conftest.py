# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the cross-protocol tests: one daemon per module (tests use their
own bucket), an S3 client, an NFS connection mounted at "/" (the bootstrap
tenant's root: buckets are its top-level directories)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crossutil import Admin, Nfs, bucket_name  # noqa: E402


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


@pytest.fixture(scope="module")
def s3(d):
    return d.boto3()


@pytest.fixture
def nfs(d):
    c = Nfs(d.nfs_port)
    yield c
    c.close()


@pytest.fixture
def admin(d):
    return Admin(d)


@pytest.fixture
def bucket(s3):
    """A fresh bucket made through S3."""
    b = bucket_name("c")
    s3.create_bucket(Bucket=b)
    return b
