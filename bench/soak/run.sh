#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/soak/run.sh: a long mixed S3 + NFS load against one real s3nfsd, with its
# memory, open files and threads sampled, and a verdict on whether anonymous
# memory levels off. Not part of any default test run (it takes an hour).
#
# The daemon runs on free loopback ports in a temp dir under $BENCH_DIR (default
# /var/tmp) with a small data store; the load, the sampling and the verdict are
# in soak.py beside this file (read its header for the mix and the criterion).
# Binary: $S3NFSD_BIN (default build/s3nfsd; built when missing).
# Usage: bench/soak/run.sh [--minutes N] [--asan] [--valgrind] [soak.py options...]
#   --minutes N   load duration (default 60)
#   --asan        run build-asan/s3nfsd (scripts/build.sh build-asan --enable-sanitizers)
#                 with LeakSanitizer on: leaks found at exit fail the run (the memory
#                 verdict is then only shown: ASan keeps freed memory in quarantine)
#   --valgrind    run the daemon under valgrind --leak-check=full (slow: use with a
#                 short --minutes and a light load, e.g. --idle-conns 20); its report
#                 goes to the daemon log, kept when the run fails
#   --csv FILE    where the samples go (default ./soak-<time>.csv)
# Exit status 0: memory leveled off, no request failed, the daemon exited 0.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=${S3NFSD_BIN:-$top/build/s3nfsd}
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --asan)
        bin=${S3NFSD_BIN:-$top/build-asan/s3nfsd}
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
        export LSAN_OPTIONS=${LSAN_OPTIONS:-exitcode=23}
        args+=(--leaks-only)
        shift ;;
    --valgrind)
        command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
        args+=(--leaks-only --wrap "valgrind --leak-check=full --show-leak-kinds=definite
               --errors-for-leak-kinds=definite --error-exitcode=23")
        shift ;;
    *) args+=("$1"); shift ;;
    esac
done
"$top/scripts/deps.sh" --test || exit 1
if [ ! -x "$bin" ]; then
    if [ "$bin" = "$top/build/s3nfsd" ]; then
        "$top/scripts/build.sh" "$top/build" --enable-werror || exit 1
    else
        echo "no daemon binary at $bin" >&2; exit 1
    fi
fi
echo "s3nfs soak, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)," \
    "commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
exec /usr/bin/python3 "$here/soak.py" --bin "$bin" "${args[@]}"
