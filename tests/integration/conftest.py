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
