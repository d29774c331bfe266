#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configure and build s3nfs out of tree. Usage: scripts/build.sh BUILDDIR [configure args...]
# Says what it is doing on stderr (a first build takes a minute or more): each
# step, where its log goes, and while compiling, how many objects are done.
# S3NFS_BUILD_QUIET=1 silences the progress lines.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=$1; shift
cd "$top"
say() { [ "${S3NFS_BUILD_QUIET:-0}" = 1 ] || printf 'build: %s\n' "$*" >&2; }
# An in-tree configure blocks out-of-tree builds: clean it first.
if [ -f config.status ]; then make distclean >/dev/null 2>&1 || rm -f config.status; fi
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ -n "$(find . -name Makefile.inc -newer configure 2>/dev/null | head -1)" ] || [ Makefile.am -nt configure ]; then
    say "generating configure (autoreconf)"
    autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }
fi
mkdir -p "$bdir"
cd "$bdir"
bdir=$(pwd)
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
    say "configuring in $bdir (log: $bdir/configure.out)"
    "$top/configure" "$@" >configure.out 2>&1 || { tail -20 configure.out; exit 1; }
fi
# Sources in the build (C files of the tree, without tests/integration helpers).
total=$(find "$top/server" "$top/meta" "$top/s3api" "$top/nfs" "$top/tenants" "$top/qos" \
    "$top/tests/unit" "$top/tests/fuzz" "$top/bench/core" -name '*.c' 2>/dev/null | wc -l)
jobs=$(nproc)
say "compiling what changed (the tree has $total C files; -j$jobs; log: $bdir/make.out)"
start=$(date +%s)
make -j"$jobs" >make.out 2>&1 &
mk=$!
while kill -0 "$mk" 2>/dev/null; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 1
        kill -0 "$mk" 2>/dev/null || break 2
    done
    done_n=$(find . -name '*.o' -newermt "@$start" 2>/dev/null | wc -l)
    say "  ... $done_n objects compiled so far ($(( $(date +%s) - start )) s)"
done
if ! wait "$mk"; then
    grep -E 'error|Error' make.out | head -40
    say "failed: see $bdir/make.out"
    exit 1
fi
say "done in $(( $(date +%s) - start )) s: $bdir/s3nfsd, $bdir/s3nfsctl"
