#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the core's unit tests again with the metadata in meta's in-memory engine
# (S3NFS_TEST_META=mem: core_test_util.h sets core_config.meta_mem), so the
# core is checked against the backend contract of meta.h, not against LMDB.
set -e
dir=$(dirname "$0")
[ -x "$dir/test_core_posix" ] || dir=./tests/unit/core
for t in test_core_posix test_core_s3 test_core_data test_core_quota test_core_zc test_core_version \
    test_core_main; do
    echo "== $t (metadata in memory)"
    S3NFS_TEST_META=mem "$dir/$t"
done
