#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/nfs/run.sh: NFSv3 side by side, nfs-ganesha (FSAL VFS) vs s3nfsd, in one run.
#
# Builds bench_nfs (libnfs raw async API), then runs the same rows (every phase
# at 1 and 16 operations in flight, latency percentiles at 1, server CPU per
# operation; see bench_nfs.c) against
#  - nfs-ganesha exporting a local folder (same disk) with FSAL VFS, NFSv3 only,
#  - s3nfsd (build/s3nfsd or $S3NFSD_BIN), export "/", NFS and MOUNT on one port,
# on two kinds of server:
#  - fresh: a new server and an empty store for every round;
#  - hist:  one server per system for all rounds, which first got a history:
#           --hist-files files of 4 KiB (default 100000; empty with
#           --hist-empty) made over NFS, then --mix-secs of mixed load on them,
#           then a --size-mib file written and removed (bench_nfs --populate).
# Ganesha needs rpcbind, and at startup it unregisters and re-registers NFS and
# MOUNT with it, which would break another NFS server on this machine. So the
# whole run (rpcbind, ganesha, s3nfsd, bench_nfs) happens in a private network
# and mount namespace (unshare --net --mount: its own loopback, a private /run).
# Without root, only s3nfsd runs, on the host's loopback.
# Rounds alternate the two systems; each table shows the median of the rounds
# for every row, and the machine's load average over the run.
# Usage: bench/nfs/run.sh [--quick] [--rounds N] [--states fresh,hist]
#                         [--hist-files N] [--mix-secs S] [--only ganesha|s3nfsd]
#                         [--phases LIST] [bench_nfs options...]
#   --quick       256 MiB files, 1 s rate phases, 2,000-entry directory, 20,000
#                 history files, 5 s of mixed load (a smoke run)
#   --phases      bench_nfs's --only: a comma list of seq, read_4k, getattr, lookup,
#                 access, create_empty, create_4k, readdir, readdirplus (default: all;
#                 read_4k needs seq)
#   --million     the store of a million files the issue talks about, cheaply:
#                 --hist-files 1000000 --hist-empty (CREATE only; the mixed load
#                 still writes 4 KiB into some of them)
#   --placements LIST   run everything once per placement and print a table for
#                 each: any (nothing pinned), one (server and client on CPU 0),
#                 two (server on CPU 0, client on CPU 1); e.g. any,one,two.
#                 At 1 in flight the ratio depends on whether the client and the
#                 server's thread share a CPU (docs/benchmarks.md); pinned, both
#                 servers are compared in the same placement.
# Environment: BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS (taskset CPU lists) pin
# every thread of the server under test / bench_nfs; BENCH_PERF_EVENTS (perf
# stat -e list) counts events of the server's threads during each bench_nfs
# run and prints them as notes below the table.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
. "$here/../lib.sh"

only="" rounds=1 states="fresh,hist" hist_files=100000 mix_secs=10 inner="" args=()
quick="" phases="" hist_empty="" placements="" tag=""
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) bench_usage "$0"; exit 0 ;;
    --quick) quick=1; args+=(--size-mib 256 --secs 1 --dir-entries 2000); shift ;;
    --only) only=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --states) states=$2; shift 2 ;;
    --hist-files) hist_files=$2; shift 2 ;;
    --hist-empty) hist_empty=1; shift ;;
    --million) hist_files=1000000 hist_empty=1; shift ;;
    --mix-secs) mix_secs=$2; shift 2 ;;
    --inner) inner=$2; shift 2 ;;
    --placements) placements=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
if [ -n "$quick" ]; then
    [ "$hist_files" = 100000 ] && hist_files=20000
    [ "$mix_secs" = 10 ] && mix_secs=5
fi

# ---- the run itself: in the private namespace (as root) or on the host ----
if [ -n "$inner" ]; then
    [ -n "$phases" ] && args+=(--only "$phases")
    work=$inner
    bin=$work/bench_nfs
    BENCH_WORK="" # the outer half removes the work dir
    trap bench_cleanup EXIT
    trap 'exit 143' TERM INT
    ganesha_ok=""
    if [ -n "${GANESHA_NETNS:-}" ]; then
        ip link set lo up || exit 1
        mount -t tmpfs tmpfs /run || exit 1
        mkdir -p /var/lib/nfs && mount -t tmpfs tmpfs /var/lib/nfs || exit 1
        rpcbind -f -w &
        bench_track $!
        for i in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
        ganesha_ok=1
    fi
    [ "$only" = s3nfsd ] && ganesha_ok=""
    GANESHA_NFS_PORT=22049 GANESHA_MNT_PORT=22050
    gcount=0

    # Start ganesha on a new, empty export; sets GANESHA_PID. @return 1 if it did not start.
    ganesha_start() {
        gcount=$((gcount + 1))
        GANESHA_EXPORT=$work/export-$gcount
        mkdir -p "$GANESHA_EXPORT"
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
    Path = $GANESHA_EXPORT;
    Pseudo = $GANESHA_EXPORT;
    Protocols = 3;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = WARN; }
EOF
        ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid" \
            -N NIV_WARN &
        GANESHA_PID=$!
        bench_track "$GANESHA_PID"
        for i in $(seq 100); do
            rpcinfo -p 127.0.0.1 2>/dev/null | grep -q " $GANESHA_MNT_PORT " && return 0
            kill -0 "$GANESHA_PID" 2>/dev/null || break
            sleep 0.2
        done
        echo "SKIP ganesha: did not start: $(grep -E 'CRIT|FATAL' "$work/ganesha.log" | tail -3)" >&2
        return 1
    }
    ganesha_stop() {
        bench_stop_pid "$GANESHA_PID"
        rm -rf "$GANESHA_EXPORT"
    }
    s3_start() {
        rm -rf "$work/s3nfsd"
        s3nfsd_start "$work/s3nfsd" || { echo "SKIP s3nfsd: daemon not available" >&2; return 1; }
    }
    s3_stop() {
        bench_stop_pid "$S3NFSD_PID"
        rm -rf "$work/s3nfsd/data"
    }
    # history SYSTEM OUTFILE DIR: give a running server its history; notes its
    # duration and the disk use of DIR after it.
    history() {
        local sys=$1 out=$2 dir=$3 t0 rc hopt=()
        [ -n "$hist_empty" ] && hopt=(--hist-empty)
        t0=$(date +%s)
        bench_log "nfs: $sys: history of $hist_files ${hist_empty:+empty }files, $mix_secs s of" \
            "mixed load ..."
        bench "$sys" "$out" "${args[@]}" --populate "$hist_files" "${hopt[@]}" \
            --mix-secs "$mix_secs"
        rc=$?
        echo "NOTE history: $hist_files ${hist_empty:+empty }files + mixed load took" \
            "$(($(date +%s) - t0)) s; $(du -sm "$dir" | cut -f1) MiB on disk after it" >>"$out"
        return $rc
    }
    # bench SYSTEM OUTFILE [bench_nfs options...]: run bench_nfs against a running server.
    bench() {
        local sys=$1 out=$2 rc pin=(); shift 2
        bench_load_note "$work/load.txt"
        # Placement (issue 17): BENCH_SERVER_CPUS pins every thread of the
        # server, BENCH_CLIENT_CPUS the client (taskset CPU lists).
        if [ -n "${BENCH_SERVER_CPUS:-}" ]; then
            local spid=${S3NFSD_PID:-}
            [ "$sys" = ganesha ] && spid=$GANESHA_PID
            taskset -a -p -c "$BENCH_SERVER_CPUS" "$spid" >/dev/null || return 1
            echo "NOTE server threads pinned to CPUs $BENCH_SERVER_CPUS" >>"$out"
        fi
        if [ -n "${BENCH_CLIENT_CPUS:-}" ]; then
            pin=(taskset -c "$BENCH_CLIENT_CPUS")
            echo "NOTE client pinned to CPUs $BENCH_CLIENT_CPUS" >>"$out"
        fi
        # BENCH_PERF_EVENTS: perf stat of the server's threads during the run
        # (context switches, migrations, wake-ups per call), appended as NOTEs.
        local perfpid=""
        if [ -n "${BENCH_PERF_EVENTS:-}" ]; then
            local ppid=${S3NFSD_PID:-}
            [ "$sys" = ganesha ] && ppid=$GANESHA_PID
            perf stat -x, -e "$BENCH_PERF_EVENTS" -p "$ppid" -o "$work/perf.$sys" &
            perfpid=$!
        fi
        if [ "$sys" = ganesha ]; then
            "${pin[@]}" "$bin" --nfs-port "$GANESHA_NFS_PORT" --mount-port "$GANESHA_MNT_PORT" \
                --export "$GANESHA_EXPORT" --server-pid "$GANESHA_PID" "$@" >>"$out"
        else
            "${pin[@]}" "$bin" --nfs-port "$S3NFSD_NFS_PORT" --mount-port "$S3NFSD_NFS_PORT" --export / \
                --server-pid "$S3NFSD_PID" "$@" >>"$out"
        fi
        rc=$?
        if [ -n "$perfpid" ]; then
            kill -INT "$perfpid"; wait "$perfpid"
            grep -v '^#' "$work/perf.$sys" | grep . | sed 's/^/NOTE perf /' >>"$out"
        fi
        bench_load_note "$work/load.txt"
        if [ $rc -ne 0 ]; then
            echo "ERROR $sys: bench_nfs failed (exit $rc)" >>"$out"
            [ "$sys" = s3nfsd ] && tail -15 "$work/s3nfsd/s3nfsd.log" >&2
        fi
        return $rc
    }

    for state in ${states//,/ }; do
        g=$work/ganesha.$state$tag.txt s=$work/s3nfsd.$state$tag.txt
        : >"$g"; : >"$s"
        gup="" sup=""
        if [ "$state" = hist ]; then
            if [ -n "$ganesha_ok" ] && ganesha_start; then
                history ganesha "$g" "$GANESHA_EXPORT" && gup=1
            fi
            if [ "$only" != ganesha ] && s3_start; then
                history s3nfsd "$s" "$work/s3nfsd/data" && sup=1
            fi
        fi
        for r in $(seq "$rounds"); do
            if [ -n "$ganesha_ok" ]; then
                if [ "$state" = fresh ] && ganesha_start; then
                    bench_log "nfs: fresh ganesha, round $r ..."
                    bench ganesha "$g" "${args[@]}"
                    ganesha_stop
                elif [ -n "$gup" ]; then
                    bench_log "nfs: ganesha with history, round $r ..."
                    bench ganesha "$g" "${args[@]}"
                fi
                bench_settle
            fi
            if [ "$only" != ganesha ]; then
                if [ "$state" = fresh ] && s3_start; then
                    bench_log "nfs: fresh s3nfsd, round $r ..."
                    bench s3nfsd "$s" "${args[@]}"
                    s3_stop
                elif [ -n "$sup" ]; then
                    bench_log "nfs: s3nfsd with history, round $r ..."
                    bench s3nfsd "$s" "${args[@]}"
                fi
                bench_settle
            fi
        done
        [ -n "$gup" ] && ganesha_stop
        [ -n "$sup" ] && s3_stop
    done
    exit 0
fi

# ---- outer half ----
bench_init nfs
work=$BENCH_WORK
if ! cc -std=c11 -O2 -Wall -Wextra -Wno-unused-parameter -o "$work/bench_nfs" \
    "$here/bench_nfs.c" $(pkg-config --cflags --libs libnfs); then
    bench_log "cannot build bench_nfs (needs libnfs-dev)"; exit 1
fi
pass=(--rounds "$rounds" --states "$states" --hist-files "$hist_files" --mix-secs "$mix_secs"
      --inner "$work")
[ -n "$hist_empty" ] && pass+=(--hist-empty)
[ -n "$only" ] && pass+=(--only "$only")
[ -n "$phases" ] && pass+=(--phases "$phases")
gskip=""
if [ "$only" = s3nfsd ]; then
    gskip="not asked for (--only s3nfsd)"
elif ! command -v ganesha.nfsd >/dev/null ||
    [ ! -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ]; then
    gskip="nfs-ganesha / nfs-ganesha-vfs not installed"
elif ! unshare --net --mount true 2>/dev/null; then
    gskip="unshare --net --mount not permitted (need root)"
fi
# placement_cpus NAME: "SERVER_CPUS CLIENT_CPUS" for a --placements name.
placement_cpus() {
    case $1 in
    any) echo "- -" ;;
    one) echo "0 0" ;;
    two) echo "0 1" ;;
    *) return 1 ;;
    esac
}
placement_what() {
    case $1 in
    any) echo "nothing pinned" ;;
    one) echo "server and client pinned to CPU 0" ;;
    two) echo "server pinned to CPU 0, client to CPU 1" ;;
    esac
}
pls=("") # one pass, nothing pinned, tables without a placement
[ -n "$placements" ] && IFS=, read -ra pls <<<"$placements"
for pl in "${pls[@]}"; do
    [ -z "$pl" ] && continue
    placement_cpus "$pl" >/dev/null || { bench_log "unknown placement $pl (any, one, two)"; exit 2; }
    if [ "$pl" = two ] && [ "$(nproc)" -lt 2 ]; then
        bench_log "placement two needs 2 CPUs, this machine has $(nproc)"; exit 2
    fi
done
bench_log "nfs: states $states, $rounds round(s), history $hist_files files${placements:+, placements $placements}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for pl in "${pls[@]}"; do
    ptag="" penv=()
    if [ -n "$pl" ]; then
        read -r scpus ccpus < <(placement_cpus "$pl")
        ptag=.$pl
        [ "$scpus" != - ] && penv=(BENCH_SERVER_CPUS="$scpus" BENCH_CLIENT_CPUS="$ccpus")
        bench_log "nfs: placement $pl: $(placement_what "$pl")"
    fi
    if [ -z "$gskip" ]; then
        env "${penv[@]}" GANESHA_NETNS=1 unshare --net --mount "$here/run.sh" "${pass[@]}" \
            --tag "$ptag" "${args[@]}" &
    else
        env "${penv[@]}" "$here/run.sh" "${pass[@]}" --tag "$ptag" "${args[@]}" &
    fi
    p=$!
    bench_track "$p"
    wait "$p"
done

for pl in "${pls[@]}"; do
for state in ${states//,/ }; do
    ptag=${pl:+.$pl}
    g=$work/ganesha.$state$ptag.txt s=$work/s3nfsd.$state$ptag.txt
    bench_median "$g"
    bench_median "$s"
    case $state in
    fresh) what="fresh servers, empty stores" ;;
    hist)
        what="servers with history: $hist_files files of 4 KiB, $mix_secs s of mixed load"
        [ -n "$hist_empty" ] && what="servers with history: $hist_files empty files, $mix_secs s of mixed load" ;;
    esac
    [ -n "$pl" ] && what="$what; placement $pl: $(placement_what "$pl")"
    bench_table "NFSv3, $what: nfs-ganesha (FSAL VFS) vs s3nfsd, median of $rounds round(s)" \
        ganesha "$g" s3nfsd "$s"
    bench_targets "$g" "$s" 'seq_*:1.0' 'read_4k_*:1.0' 'getattr_*:1.0' 'lookup_*:1.0' \
        'access_*:1.0' 'readdir*:1.0' 'create_*:x'
    echo "(create_* rows are excepted from the 1.0 target: NFSv3 CREATE must be durable before" \
        "its reply, so s3nfsd syncs the new directory entry (group-committed), where ganesha" \
        "does not sync the directory at all; see docs/benchmarks.md)"
    grep -h '^NOTE' "$g" | sed 's/^NOTE /ganesha: /'
    grep -h '^NOTE' "$s" | sed 's/^NOTE /s3nfsd: /'
    grep -h '^ERROR' "$g" | sed 's/^/ganesha: /'
    grep -h '^ERROR' "$s" | sed 's/^/s3nfsd: /'
done
done
bench_load_summary "$work/load.txt"
[ -n "$gskip" ] && echo "ganesha: did not run: $gskip"
exit 0
