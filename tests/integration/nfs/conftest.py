# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the NFS integration tests (the shared ones are in ../conftest.py)."""
import shutil

import pytest


@pytest.fixture
def nfsd(daemon_factory):
    """A daemon of its own with a small data file, its data removed afterwards
    (a module of many tests must not hold a 2 GiB preallocated store per test
    until the session ends)."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB"]).start()
    yield d
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)
