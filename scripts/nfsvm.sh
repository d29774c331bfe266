#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run one kernel-client workload (tests/integration/kernel/workloads) against an
# NFS server that is already running on this host, in a QEMU guest booted by
# ../shared/nfsvm. Builds the guest image first if needed (root, ~1 min once).
#
# Usage: scripts/nfsvm.sh [-p NFSPORT] [-m MOUNTPORT] [-e EXPORT] [--file PATH]...
#                         [--out DIR] [--timeout SEC] [-v] WORKLOAD [ARGS...]
#   WORKLOAD   smoke | perms | fio | tarball, or a path to a script
#   -p         NFS port (default 2049); -m defaults to the same port (s3nfsd
#              serves MOUNT and NFS on one listener); -e defaults to /
#   --file     copy PATH into the guest's /host (e.g. a tarball); repeatable
# Examples:
#   scripts/nfsvm.sh -p 20490 smoke kbucket1
#   scripts/nfsvm.sh -p 20490 fio kbucket2 256m 5
#   scripts/nfsvm.sh -p 20490 --file /tmp/src.tar tarball kbucket3 /host/src.tar
# The same workloads run under pytest: tests/integration/kernel (S3NFS_KNFS_TARGET
# points them at a running server instead of a fresh s3nfsd).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
nfsvm=${S3NFS_NFSVM_DIR:-$(cd "$top/.." && pwd)/shared/nfsvm}
wl_dir=$top/tests/integration/kernel/workloads

port=2049 mport= export=/ out= timeout=900 verbose=()
files=()
while [ $# -gt 0 ]; do
    case $1 in
        -p) port=$2; shift 2 ;;
        -m) mport=$2; shift 2 ;;
        -e) export=$2; shift 2 ;;
        --file) files+=("$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        -v) verbose=(-v); shift ;;
        -h|--help) sed -n '3,19p' "$0"; exit 0 ;;
        -*) echo "nfsvm.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { sed -n '3,19p' "$0"; exit 2; }
wl=$1; shift
[ -f "$wl" ] || wl=$wl_dir/$wl.sh
[ -f "$wl" ] || { echo "nfsvm.sh: no workload $wl" >&2; exit 2; }
[ -x "$nfsvm/run" ] || { echo "nfsvm.sh: $nfsvm (nfsvm) is absent" >&2; exit 2; }

"$nfsvm/build-image" >&2
share=$(mktemp -d "${TMPDIR:-/tmp}/nfsvm-share.XXXXXX")
trap 'rm -rf "$share"' EXIT
cp "$wl_dir/lib.sh" "$share/"
for f in "${files[@]}"; do ln "$f" "$share/" 2>/dev/null || cp "$f" "$share/"; done
args=(-p "$port" -m "${mport:-$port}" -e "$export" -o soft,timeo=100,retrans=2
      --share "$share" --timeout "$timeout" "${verbose[@]}")
[ -n "$out" ] && args+=(--out "$out")
"$nfsvm/run" "${args[@]}" "$wl" "$@"
