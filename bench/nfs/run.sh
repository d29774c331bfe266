#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/nfs/run.sh: NFSv3 side by side, nfs-ganesha (FSAL VFS) vs s3nfsd, in one run.
#
# Builds bench_nfs (libnfs raw async API), then runs the same phases against
#  - nfs-ganesha exporting a local folder (same disk) with FSAL VFS, NFSv3 only.
#    Ganesha needs rpcbind, and at startup it unregisters and re-registers NFS
#    and MOUNT with it, which would break another ganesha or NFS server on this
#    machine. So it runs, with its own rpcbind, in a private network and mount
#    namespace (unshare --net --mount; its loopback only, /run private).
#  - s3nfsd (build/s3nfsd or $S3NFSD_BIN) on free loopback ports, export "/",
#    NFS and MOUNT on one port.
# and prints one table with ratios (s3nfsd / ganesha; inverted for times).
# Needs root (unshare, ganesha), nfs-ganesha, nfs-ganesha-vfs, rpcbind, libnfs-dev.
# With --rounds N both halves run N times, alternating; the table keeps each
# side's best rate and lowest CPU cost.
# Usage: bench/nfs/run.sh [--quick] [--rounds N] [--only ganesha|s3nfsd] [--phases LIST]
#                         [bench_nfs options...]
#   --quick   256 MiB file, 1 s rate phases, 2,000-entry directory (a smoke run)
#   --phases  bench_nfs's --only: a comma list of seq_write, seq_read, getattr,
#             lookup, create, readdirplus (default: all)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
. "$here/../lib.sh"

only=""
rounds=1
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --quick) args+=(--size-mib 256 --secs 1 --dir-entries 2000); shift ;;
    --only) only=$2; shift 2 ;;
    --phases) args+=(--only "$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --ganesha-inner) shift; inner=1; break ;;
    *) args+=("$1"); shift ;;
    esac
done

# ---- inner half: runs inside the private namespace ----
if [ -n "${inner:-}" ]; then
    # $1 work dir, $2 bench_nfs binary, rest: bench_nfs options
    work=$1 bin=$2; shift 2
    ip link set lo up || exit 1
    mount -t tmpfs tmpfs /run || exit 1
    mkdir -p /var/lib/nfs && mount -t tmpfs tmpfs /var/lib/nfs || exit 1
    rpcbind -f -w & rp=$!
    gp=""
    trap 'for p in $gp $rp; do kill $p 2>/dev/null; done; wait' EXIT
    trap 'exit 143' TERM INT
    for i in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
    ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid" \
        -N NIV_WARN & gp=$!
    ok=""
    for i in $(seq 100); do
        rpcinfo -p 127.0.0.1 2>/dev/null | grep -q " $GANESHA_MNT_PORT " && { ok=1; break; }
        kill -0 "$gp" 2>/dev/null || break
        sleep 0.2
    done
    if [ -z "$ok" ]; then
        echo "ganesha did not start:" >&2; grep -E 'CRIT|FATAL' "$work/ganesha.log" | tail -5 >&2
        exit 1
    fi
    "$bin" --nfs-port "$GANESHA_NFS_PORT" --mount-port "$GANESHA_MNT_PORT" \
        --export "$work/export" --server-pid "$gp" "$@"
    exit $?
fi

bench_init nfs
work=$BENCH_WORK
bin=$work/bench_nfs
if ! cc -std=c11 -O2 -Wall -Wextra -Wno-unused-parameter -o "$bin" "$here/bench_nfs.c" \
    $(pkg-config --cflags --libs libnfs); then
    bench_log "cannot build bench_nfs (needs libnfs-dev)"; exit 1
fi

run_ganesha() {
    local out=$1
    if ! command -v ganesha.nfsd >/dev/null || [ ! -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ]; then
        echo "SKIP ganesha: nfs-ganesha / nfs-ganesha-vfs not installed" | tee -a "$out" >&2
        return 1
    fi
    if ! unshare --net --mount true 2>/dev/null; then
        echo "SKIP ganesha: unshare --net --mount not permitted (need root)" | tee -a "$out" >&2
        return 1
    fi
    mkdir -p "$work/export"
    # In the private namespace any port is free; these are fixed for simplicity.
    export GANESHA_NFS_PORT=22049 GANESHA_MNT_PORT=22050
    cat >"$work/ganesha.conf" <<EOF
NFS_CORE_PARAM {
    NFS_Port = $GANESHA_NFS_PORT;
    MNT_Port = $GANESHA_MNT_PORT;
    NLM_Port = 22051;
    Rquota_Port = 22052;
    Protocols = 3;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { Squash = No_Root_Squash; SecType = sys; }
EXPORT {
    Export_Id = 1;
    Path = $work/export;
    Pseudo = $work/export;
    Protocols = 3;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = WARN; }
EOF
    bench_log "nfs: ganesha (FSAL VFS, private netns) ..."
    unshare --net --mount "$here/run.sh" --ganesha-inner "$work" "$bin" "${args[@]}" \
        > >(tee -a "$out") &
    local p=$!
    bench_track "$p"
    wait "$p"
}

run_s3nfsd() {
    local out=$1
    if ! s3nfsd_start "$work/s3nfsd"; then
        echo "SKIP s3nfsd: daemon not available (see above)" | tee -a "$out" >&2
        return 1
    fi
    bench_log "nfs: s3nfsd pid $S3NFSD_PID nfs port $S3NFSD_NFS_PORT ..."
    "$bin" --nfs-port "$S3NFSD_NFS_PORT" --mount-port "$S3NFSD_NFS_PORT" --export / \
        --server-pid "$S3NFSD_PID" "${args[@]}" | tee -a "$out"
    local rc=${PIPESTATUS[0]}
    [ $rc -eq 0 ] || { bench_log "bench_nfs against s3nfsd failed; daemon log tail:";
                      tail -15 "$work/s3nfsd/s3nfsd.log" >&2; }
    bench_stop_pid "$S3NFSD_PID"
    return $rc
}

: >"$work/ganesha.txt"
: >"$work/s3nfsd.txt"
for r in $(seq "$rounds"); do
    [ "$only" = s3nfsd ] || run_ganesha "$work/ganesha.txt"
    bench_settle
    [ "$only" = ganesha ] || run_s3nfsd "$work/s3nfsd.txt"
    bench_settle
done
bench_best "$work/ganesha.txt"
bench_best "$work/s3nfsd.txt"
bench_table "NFSv3: nfs-ganesha 4 (FSAL VFS) vs s3nfsd" ganesha "$work/ganesha.txt" \
    s3nfsd "$work/s3nfsd.txt"
bench_targets "$work/ganesha.txt" "$work/s3nfsd.txt" 'seq*:1.0' 'getattr:1.0' 'lookup:1.0' \
    'create*:1.0' 'readdirplus*:1.0'
grep -h '^SKIP' "$work/ganesha.txt" "$work/s3nfsd.txt" || true
