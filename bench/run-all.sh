#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/run-all.sh: every side-by-side benchmark in one go (core vs fio, S3 vs
# nginx, NFS vs nfs-ganesha), each printing its own table with ratios. The whole
# output is also saved to $BENCH_OUT (default ./bench-results-<UTC time>.txt).
# Binaries: $S3NFSD_BIN (default build/s3nfsd) and $BENCH_CORE_BIN (default
# build/bench/core/bench_core); build them first with `scripts/build.sh build`
# and `make -C build s3nfsd bench/core/bench_core`. A benchmark whose system
# under test is missing still runs its reference half and says what is missing.
# Usage: bench/run-all.sh [--quick]   (--quick: small sizes, ~8 minutes in all)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/../scripts/deps.sh" --bench || exit 1
if [ ! -x "${S3NFSD_BIN:-$here/../build/s3nfsd}" ]; then
    "$here/../scripts/build.sh" "$here/../build" --enable-werror || exit 1
fi
out=${BENCH_OUT:-$PWD/bench-results-$(date -u +%Y%m%dT%H%MZ).txt}
core_args=() s3_args=() nfs_args=()
if [ "${1:-}" = --quick ]; then
    core_args=(--size-mib 512 --files 10000 --fio-files 8000)
    s3_args=(--secs 2 --hist-objects 20000 --mix-secs 5)
    nfs_args=(--quick)
fi
{
    echo "s3nfs benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores," \
        "commit $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
    "$here/core/run.sh" "${core_args[@]}"
    "$here/s3/run.sh" "${s3_args[@]}"
    "$here/nfs/run.sh" "${nfs_args[@]}"
} 2>&1 | tee "$out"
echo "saved to $out"
