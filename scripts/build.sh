#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configure and build s3nfs out of tree. Usage: scripts/build.sh BUILDDIR [configure args...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=$1; shift
cd "$top"
# An in-tree configure blocks out-of-tree builds: clean it first.
if [ -f config.status ]; then make distclean >/dev/null 2>&1 || rm -f config.status; fi
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ -n "$(find . -name Makefile.inc -newer configure 2>/dev/null | head -1)" ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi >/dev/null
fi
mkdir -p "$bdir"
cd "$bdir"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
    "$top/configure" "$@" >configure.out 2>&1 || { tail -20 configure.out; exit 1; }
fi
make -j"$(nproc)" >make.out 2>&1 || { grep -E 'error|Error' make.out | head -40; exit 1; }
