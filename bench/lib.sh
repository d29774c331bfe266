# SPDX-License-Identifier: Apache-2.0
# bench/lib.sh: helpers shared by the bench/*/run.sh scripts (sourced, not run).
#
# Every daemon a benchmark starts is recorded with bench_track PID and stopped
# by that PID (SIGTERM, then SIGKILL) when the script exits; nothing is ever
# stopped by name. Results are lines "RESULT <metric> <value> <unit>" in one
# file per system; bench_table puts two such files side by side with ratios.

BENCH_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_PIDS=()
PY=/usr/bin/python3

# Print the calling script's usage: its header comment from the "# Usage:" line
# to the first line that is not a comment.
bench_usage() {
    awk '/^# Usage:/ { p = 1 } p && !/^#/ { exit } p { sub(/^# ?/, ""); print }' "$1"
}

bench_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# A free TCP port on 127.0.0.1 (the kernel picks it).
bench_free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

bench_track() { BENCH_PIDS+=("$1"); }

# Stop one tracked process by PID: TERM, wait up to 10 s, then KILL.
bench_stop_pid() {
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

bench_cleanup() {
    local p
    for p in "${BENCH_PIDS[@]}"; do bench_stop_pid "$p"; done
    BENCH_PIDS=()
    if [ -n "${BENCH_WORK:-}" ] && [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$BENCH_WORK"; fi
}

# Make the work dir (under $BENCH_DIR, default /var/tmp, i.e. the same disk as
# everything else here) and arrange cleanup.
bench_init() {
    local name=$1
    BENCH_WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/s3nfs-bench-$name.XXXXXX")
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

# s3nfsd: the binary under test.
S3NFSD_BIN=${S3NFSD_BIN:-$BENCH_TOP/build/s3nfsd}
S3NFS_BENCH_ACCESS_KEY=S3NFSBENCHACCESSKEY1
S3NFS_BENCH_SECRET_KEY=s3nfs/bench/secret/key/0123456789abcdefgh
S3NFS_BENCH_ADMIN_TOKEN=s3nfs-bench-admin-token-0123456789

# Start s3nfsd in DIR on free loopback ports; sets S3NFSD_PID, S3NFSD_S3_PORT,
# S3NFSD_NFS_PORT, S3NFSD_ADMIN_PORT. Returns 1 (with a reason on stderr)
# if the binary is missing or the daemon is not healthy within 30 s.
s3nfsd_start() {
    local dir=$1 i
    if [ ! -x "$S3NFSD_BIN" ]; then
        bench_log "s3nfsd not found at $S3NFSD_BIN (build with scripts/build.sh build)"
        return 1
    fi
    mkdir -p "$dir/data"
    S3NFSD_S3_PORT=$(bench_free_port)
    S3NFSD_NFS_PORT=$(bench_free_port)
    S3NFSD_ADMIN_PORT=$(bench_free_port)
    S3NFS_ACCESS_KEY=$S3NFS_BENCH_ACCESS_KEY S3NFS_SECRET_KEY=$S3NFS_BENCH_SECRET_KEY \
        S3NFS_ADMIN_TOKEN=$S3NFS_BENCH_ADMIN_TOKEN \
        "$S3NFSD_BIN" --foreground --data-dir "$dir/data" \
        --s3-listen "127.0.0.1:$S3NFSD_S3_PORT" --nfs-listen "127.0.0.1:$S3NFSD_NFS_PORT" \
        --admin-listen "127.0.0.1:$S3NFSD_ADMIN_PORT" ${S3NFSD_ARGS:-} \
        >"$dir/s3nfsd.log" 2>&1 &
    S3NFSD_PID=$!
    bench_track "$S3NFSD_PID"
    for i in $(seq 300); do
        if ! kill -0 "$S3NFSD_PID" 2>/dev/null; then
            bench_log "s3nfsd exited at startup:"; tail -20 "$dir/s3nfsd.log" >&2
            return 1
        fi
        if curl -sf -o /dev/null "http://127.0.0.1:$S3NFSD_ADMIN_PORT/healthz"; then
            return 0
        fi
        sleep 0.1
    done
    bench_log "s3nfsd not healthy within 30 s:"; tail -20 "$dir/s3nfsd.log" >&2
    return 1
}

# CPU time (microseconds, user + system, all threads) used so far by PID and
# its direct children (nginx's workers). Sampled before and after a run, it
# gives server CPU per request, which shared-machine noise disturbs far less
# than throughput does.
bench_cpu_us() {
    local pid=$1
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$pid" -v hz="$(getconf CLK_TCK)" '
        { # comm (field 2) may hold spaces: index fields after the closing paren
          i = index($0, ") "); split(substr($0, i + 2), f, " ")
          pid = $1; ppid = f[2]
          if (pid == root || ppid == root) t += f[12] + f[13] }
        END { printf "%.0f\n", t * 1e6 / hz }'
}

# Flush dirty data of the previous half (nginx's PUTs are not fsynced, ganesha's
# directory fill is not committed) so its writeback does not land on the next
# system's timed run. Not timed.
bench_settle() { sync; sleep 0.5; }

# Wait until something accepts TCP connections on 127.0.0.1:PORT (up to 20 s).
bench_wait_port() {
    local port=$1 i
    for i in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

# bench_median FILE: collapse repeated RESULT lines of one metric (from several
# rounds) into their median (the mean of the middle two for an even count).
# A metric that failed in any round (an "ERROR <metric> ..." line) keeps its
# ERROR line and loses its number. Other lines (ERROR, SKIP) are kept once each.
bench_median() {
    local f=$1
    [ -f "$f" ] || return 0
    awk '
        $1 == "ERROR" { bad[$2] = 1 }
        $1 != "RESULT" { if (!($0 in seen)) { seen[$0] = 1; other[no++] = $0 }; next }
        {
            k = $2
            if (!(k in cnt)) { order[n++] = k; u[k] = $4 }
            v[k, cnt[k]++] = $3 + 0
        }
        END {
            for (i = 0; i < n; i++) {
                k = order[i]; m = cnt[k]; base = k
                sub(/_(cpu|p50|p99)$/, "", base)
                if (base in bad) continue
                for (a = 0; a < m; a++) x[a] = v[k, a]
                for (a = 1; a < m; a++) {      # insertion sort: a few rounds
                    t = x[a]; b = a - 1
                    while (b >= 0 && x[b] > t) { x[b + 1] = x[b]; b-- }
                    x[b + 1] = t
                }
                med = (m % 2) ? x[int(m / 2)] : (x[m / 2 - 1] + x[m / 2]) / 2
                print "RESULT", k, (med == int(med) ? med : sprintf("%.1f", med)), u[k]
            }
            for (i = 0; i < no; i++) print other[i]
        }' "$f" >"$f.med" && mv "$f.med" "$f"
}

# bench_load_note FILE: append the 1-minute load average now (the machine is shared).
bench_load_note() { cut -d' ' -f1 /proc/loadavg >>"$1"; }

# bench_load_summary FILE: one line: the load averages noted during the run.
bench_load_summary() {
    [ -s "$1" ] || return 0
    sort -n "$1" | awk -v c="$(nproc)" '
        { v[n++] = $1 }
        END { printf "machine load during the run (1-min load average, %d cores): " \
                     "min %.1f, median %.1f, max %.1f\n", c, v[0], v[int(n / 2)], v[n - 1] }'
}

# bench_table TITLE REFNAME REF.txt OURNAME OURS.txt
# Joins RESULT lines by metric. ratio = ours/ref for rates, ref/ours for
# times (unit ms or s), so > 1 always means s3nfsd is better. A metric
# missing on one side prints "-" and "n/a". Rows follow the order of REF.txt,
# then metrics only OURS.txt has.
bench_table() {
    local title=$1 rname=$2 rfile=$3 oname=$4 ofile=$5
    [ -f "$rfile" ] || : >"$rfile"
    [ -f "$ofile" ] || : >"$ofile"
    echo
    echo "== $title ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores) =="
    awk -v rn="$rname" -v on="$oname" '
        FNR == 1 { f = (FILENAME == ARGV[1]) ? 1 : 2 } # an empty first file has no FNR 1
        $1 != "RESULT" { next }
        f == 1 { if (!($2 in ref)) order[n++] = $2; ref[$2] = $3; unit[$2] = $4 }
        f == 2 { if (!($2 in ref) && !($2 in ours)) extra[m++] = $2; ours[$2] = $3; unit[$2] = $4 }
        END {
            printf "%-24s %-8s %14s %14s %8s\n", "metric", "unit", rn, on, "ratio"
            for (i = 0; i < n + m; i++) {
                k = i < n ? order[i] : extra[i - n]
                r = (k in ref) ? ref[k] : "-"; o = (k in ours) ? ours[k] : "-"
                ratio = "n/a"
                if ((k in ref) && (k in ours) && r + 0 > 0 && o + 0 > 0) {
                    if (unit[k] == "ms" || unit[k] == "s" || unit[k] ~ /^us/)
                        ratio = sprintf("%.2f", r / o)
                    else ratio = sprintf("%.2f", o / r)
                }
                printf "%-24s %-8s %14s %14s %8s\n", k, unit[k], r, o, ratio
            }
        }' "$rfile" "$ofile"
    echo "(ratio > 1: s3nfsd better; times are compared inverted)"
}

# bench_targets REF.txt OURS.txt METRIC:MINRATIO...
# Prints, for each named metric, its ratio (computed as in bench_table) and
# whether it meets MINRATIO; a metric missing on either side is "not measured".
# METRIC may end in '*' to name every metric with that prefix (not the _cpu,
# _p50 and _p99 rows). MINRATIO "x" marks the rows as excepted from the targets
# (the caller prints why).
bench_targets() {
    local rfile=$1 ofile=$2; shift 2
    awk -v specs="$*" '
        FNR == 1 { f = (FILENAME == ARGV[1]) ? 1 : 2 } # an empty first file has no FNR 1
        $1 != "RESULT" { next }
        f == 1 { ref[$2] = $3; unit[$2] = $4; if (!($2 in seen)) { order[n++] = $2; seen[$2] = 1 } }
        f == 2 { ours[$2] = $3; unit[$2] = $4; if (!($2 in seen)) { order[n++] = $2; seen[$2] = 1 } }
        function ratio(k) {
            if (!(k in ref) || !(k in ours) || ref[k] + 0 <= 0 || ours[k] + 0 <= 0) return -1
            if (unit[k] == "ms" || unit[k] == "s" || unit[k] ~ /^us/) return ref[k] / ours[k]
            return ours[k] / ref[k]
        }
        function check(k, min,   r) {
            r = ratio(k)
            if (min == "x") {
                if (r < 0) printf "target %-22s excepted: not measured\n", k
                else printf "target %-22s excepted  (%.2f)\n", k, r
                return
            }
            if (r < 0) printf "target %-22s >= %.2f: not measured\n", k, min
            else printf "target %-22s >= %.2f: %-7s (%.2f)\n", k, min, (r >= min ? "met" : "NOT met"), r
        }
        END {
            ns = split(specs, sp, " ")
            for (i = 1; i <= ns; i++) {
                split(sp[i], kv, ":")
                if (kv[1] ~ /\*$/) {
                    pre = substr(kv[1], 1, length(kv[1]) - 1)
                    for (j = 0; j < n; j++)
                        if (index(order[j], pre) == 1 && order[j] !~ /_(cpu|p50|p99)$/)
                            check(order[j], kv[2])
                } else check(kv[1], kv[2])
            }
        }' "$rfile" "$ofile"
}
