#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/s3/run.sh: S3 data path side by side, nginx (sendfile, DAV PUT) vs s3nfsd.
#
# Starts, on free loopback ports, in one temp dir on the same disk:
#  - nginx (Debian nginx-light: sendfile on, tcp_nodelay on, access log off,
#    PUT and DELETE through the dav module, which nginx-light has; nginx's PUT
#    is not durable: it writes a temp file and renames it, no fsync),
#  - s3nfsd (build/s3nfsd or $S3NFSD_BIN), bucket "bench" with the same objects,
# then measures each row with wrk against nginx and then s3nfsd, back to back:
#   get_4k / get_64m    GET of one 4 KiB / 64 MiB object (s3nfsd: presigned URL)
#   put_4k / put_64m    PUT of 4 KiB / 64 MiB bodies to 16 / 8 distinct keys round
#                       robin (s3nfsd: presigned PUT URLs, so SigV4 is checked on
#                       every request, UNSIGNED-PAYLOAD)
# at 1 and 16 connections (_c1 / _c16; get_4k also at 64), with the latency
# percentiles of the 1-connection cells (_p50 / _p99, wrk's) and the server CPU
# per request or MiB (_cpu); then get_64m_first_c1: 4 new 64 MiB objects PUT and
# each read once at once (curl, one connection), beside get_64m_warm_c1, the
# same 4 read again.
# Two kinds of server (--states):
#  - fresh: new servers with empty stores for every round;
#  - hist:  one server per system for all rounds, which first got a history:
#           --hist-objects objects of --hist-bytes (default 100000 of 4096; PUT
#           by wrk, --hist-conns connections, default 16) and --mix-secs of
#           mixed load (GET, PUT of 4 KiB, DELETE); then
#           ListObjectsV2 over the history's keys is timed (s3nfsd only: nginx has
#           no listing).
# Any request error (connect/read/write, timeout, HTTP >= 400) voids that cell.
# With --rounds N every cell runs N times (nginx, s3nfsd, nginx, s3nfsd, ...) and
# the tables show the median of each row.
# Usage: bench/s3/run.sh [--secs N (5)] [--rounds N (1)] [--states fresh,hist]
#                        [--hist-objects N (100000)] [--hist-bytes B (4096)]
#                        [--hist-conns C (16)] [--mix-secs S (10)]
#                        [--only nginx|s3nfsd] [--no-list]
#                        [--rows get_4k,get_64m,put_4k,put_64m,first (default: all)]
#   --million     the store of a million objects the issue talks about, cheaply:
#                 --hist-objects 1000000 --hist-bytes 0 --hist-conns 64 (the mixed
#                 load still GETs them and PUTs 4 KiB bodies over some of them)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
. "$here/../lib.sh"
export BENCH_S3_DIR=$here

secs=5 only="" do_list=1 rounds=1 rows="" states="fresh,hist" hist=100000 mix_secs=10
hist_bytes=4096 hist_conns=16
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) bench_usage "$0"; exit 0 ;;
    --secs) secs=$2; shift 2 ;;
    --keys | --hist-objects) hist=$2; shift 2 ;;
    --hist-bytes) hist_bytes=$2; shift 2 ;;
    --hist-conns) hist_conns=$2; shift 2 ;;
    --million) hist=1000000 hist_bytes=0 hist_conns=64; shift ;;
    --only) only=$2; shift 2 ;;
    --no-list) do_list=""; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --states) states=$2; shift 2 ;;
    --mix-secs) mix_secs=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
for t in wrk nginx curl; do
    command -v $t >/dev/null || { echo "SKIP s3 bench: $t not installed" >&2; exit 1; }
done

bench_init s3
W=$BENCH_WORK
head -c 4096 /dev/urandom >"$W/obj4k"
head -c "$hist_bytes" /dev/urandom >"$W/objhist"
head -c $((64 << 20)) /dev/urandom >"$W/obj64m"
echo /bench/obj4k >"$W/get4k.ngx"
echo /bench/obj64m >"$W/get64m.ngx"
for i in $(seq -w 0 15); do echo "/bench/put4k-$i"; done >"$W/put4k.ngx"
for i in $(seq -w 0 7); do echo "/bench/put64m-$i"; done >"$W/put64m.ngx"

# nginx on a new, empty web root holding obj4k and obj64m; sets NGX_PID, NGX_PORT.
ngx_start() {
    [ "$only" = s3nfsd ] && return 1
    rm -rf "$W/www" "$W/nginx-tmp"
    mkdir -p "$W/www/bench" "$W/nginx-tmp"
    cp "$W/obj4k" "$W/obj64m" "$W/www/bench/"
    NGX_PORT=$(bench_free_port)
    cat >"$W/nginx.conf" <<EOF
user root;
worker_processes auto;
daemon off;
pid $W/nginx.pid;
error_log $W/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 60;
    keepalive_requests 1000000000;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    client_body_temp_path $W/nginx-tmp;
    proxy_temp_path $W/nginx-tmp/p;
    fastcgi_temp_path $W/nginx-tmp/f;
    uwsgi_temp_path $W/nginx-tmp/u;
    scgi_temp_path $W/nginx-tmp/s;
    server {
        listen 127.0.0.1:$NGX_PORT;
        root $W/www;
        location / {
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }
    }
}
EOF
    nginx -p "$W" -c "$W/nginx.conf" -e "$W/nginx-error.log" &
    NGX_PID=$!
    bench_track "$NGX_PID"
    if bench_wait_port "$NGX_PORT" &&
        [ "$(curl -s "http://127.0.0.1:$NGX_PORT/bench/obj4k" | wc -c)" = 4096 ]; then
        bench_log "s3: nginx $(nginx -v 2>&1 | sed 's/.*\///') pid $NGX_PID port $NGX_PORT"
        return 0
    fi
    echo "SKIP nginx: did not start (see $W/nginx-error.log)" >&2
    cat "$W/nginx-error.log" >&2
    return 1
}

ngx_stop() { bench_stop_pid "$NGX_PID"; rm -rf "$W/www"; }

# s3nfsd on a new store, bucket "bench" with obj4k and obj64m, wrk path files.
s3_start() {
    [ "$only" = nginx ] && return 1
    rm -rf "$W/s3nfsd"
    s3nfsd_start "$W/s3nfsd" || { echo "SKIP s3nfsd: daemon not available" >&2; return 1; }
    S3EP="http://127.0.0.1:$S3NFSD_S3_PORT"
    S3ARGS=(--endpoint "$S3EP" --access-key "$S3NFS_BENCH_ACCESS_KEY"
            --secret-key "$S3NFS_BENCH_SECRET_KEY")
    if "$PY" "$here/s3util.py" "${S3ARGS[@]}" prep "$W"; then
        bench_log "s3: s3nfsd pid $S3NFSD_PID port $S3NFSD_S3_PORT"
        return 0
    fi
    echo "SKIP s3nfsd: bucket/object setup failed (daemon log: $W/s3nfsd/s3nfsd.log)" >&2
    tail -15 "$W/s3nfsd/s3nfsd.log" >&2
    return 1
}

s3_stop() { bench_stop_pid "$S3NFSD_PID"; rm -rf "$W/s3nfsd/data"; }

# make_paths N: the history's, the mixed load's and the first-read row's path
# files for both servers (s3nfsd's presigned for the port it runs on now).
make_paths() {
    local ep=http://127.0.0.1:1
    [ -n "$s3_up" ] && ep=$S3EP
    "$PY" "$here/s3util.py" --endpoint "$ep" --access-key "$S3NFS_BENCH_ACCESS_KEY" \
        --secret-key "$S3NFS_BENCH_SECRET_KEY" histfiles "$W" "$1" 20000
}

# wrk_summary THREADS CONNS SECS SCRIPT URL [-- ARGS...]: wrk's "WRK ..." line.
wrk_summary() {
    local t=$1 c=$2 d=$3 script=$4; shift 4
    wrk -t"$t" -c"$c" -d"${d}s" --timeout 60s -s "$here/$script" "$@" 2>&1 | grep '^WRK'
}

# run_wrk OUTFILE METRIC PORT SERVERPID OP SIZE CONNS PATHFILE
# Appends "RESULT METRIC value unit" (req/s for 4 KiB, MB/s for 64 MiB),
# "RESULT METRIC_cpu value us/req|us/MiB" (server CPU per request / per MiB
# moved) and, at one connection, METRIC_p50 / METRIC_p99 (us); or an "ERROR"
# line when wrk saw any error or nothing completed.
run_wrk() {
    local out=$1 metric=$2 port=$3 spid=$4 op=$5 size=$6 conns=$7 pathfile=$8
    local threads=1 line cpu0 cpu1 dur=$secs
    [ "$conns" -gt 1 ] && threads=2
    # A 64 MiB cell at 16 connections moves 1 GiB per round: give it twice as long.
    [ "$size" = 64m ] && dur=$((secs * 2))
    bench_load_note "$W/load.txt"
    cpu0=$(bench_cpu_us "$spid")
    if [ "$op" = GET ]; then
        line=$(wrk_summary "$threads" "$conns" "$dur" get.lua \
            "http://127.0.0.1:$port$(head -1 "$pathfile")")
    else
        line=$(wrk_summary "$threads" "$conns" "$dur" put.lua "http://127.0.0.1:$port/" -- \
            "$pathfile" "$W/obj$size")
    fi
    cpu1=$(bench_cpu_us "$spid")
    echo "$metric $line cpu_us=$((cpu1 - cpu0))" >>"$W/wrk.log"
    echo "$line" | awk -v m="$metric" -v sz="$size" -v cpu=$((cpu1 - cpu0)) -v secs="$dur" \
        -v op="$op" -v c="$conns" '
        {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["requests"] == "" ) { print "ERROR " m " wrk printed no summary"; exit }
            mib = (op == "GET") ? v["bytes"] / 1048576 : v["requests"] * 64
            if (v["requests"] == 0 && (sz == "4k" || mib < 1)) {
                printf "ERROR %s no request completed in %s s\n", m, secs; exit
            }
            if (v["errors"] > 0) {
                printf "ERROR %s %d of %d requests failed (%d HTTP >= 400)\n", m, v["errors"],
                       v["requests"], v["status_errors"]; exit
            }
            rps = v["requests"] / (v["duration_us"] / 1e6)
            if (sz == "4k") {
                printf "RESULT %s %.0f req/s\n", m, rps
                printf "RESULT %s_cpu %.0f us/req\n", m, cpu / v["requests"]
            } else {
                # GET: bytes received (partial responses count); PUT: whole bodies acknowledged.
                printf "RESULT %s %.1f MB/s\n", m, mib * 1048576 / v["duration_us"]
                printf "RESULT %s_cpu %.0f us/MiB\n", m, cpu / mib
            }
            if (c == 1) {
                printf "RESULT %s_p50 %d us\n", m, v["p50_us"]
                printf "RESULT %s_p99 %d us\n", m, v["p99_us"]
            }
        }' | tee -a "$out"
}

# curl_seq PORT PATHFILE [PUT]: one curl process, one keep-alive connection,
# every path of the file in turn (GET, or PUT of obj64m); prints one
# "code size" line per request.
curl_seq() {
    local port=$1 pathfile=$2 method=${3:-GET} p cargs=()
    while read -r p; do
        [ -n "$p" ] || continue
        cargs+=(-o /dev/null "http://127.0.0.1:$port$p")
        [ "$method" = PUT ] && cargs+=(-T "$W/obj64m")
    done <"$pathfile"
    curl -s -H 'Expect:' -w '%{http_code} %{size_download}\n' "${cargs[@]}"
}

# run_first OUTFILE PORT SERVERPID SUFFIX(s3|ngx): PUT 4 new 64 MiB objects, then
# time the first GET of each (get_64m_first_c1) and the second (get_64m_warm_c1).
run_first() {
    local out=$1 port=$2 spid=$3 sfx=$4 kind t0 t1 cpu0 cpu1 res
    if curl_seq "$port" "$W/first.put.$sfx" PUT | grep -vq '^20[01] '; then
        echo "ERROR get_64m_first_c1 a PUT of the 64 MiB objects failed" >>"$out"
        return
    fi
    for kind in first warm; do
        bench_load_note "$W/load.txt"
        cpu0=$(bench_cpu_us "$spid")
        t0=$(date +%s%N)
        res=$(curl_seq "$port" "$W/first.get.$sfx")
        t1=$(date +%s%N)
        cpu1=$(bench_cpu_us "$spid")
        if [ "$(echo "$res" | grep -c "^200 $((64 << 20))$")" != 4 ]; then
            echo "ERROR get_64m_${kind}_c1 GETs failed: $(echo "$res" | tr '\n' ' ')" >>"$out"
            continue
        fi
        awk -v m="get_64m_${kind}_c1" -v ns=$((t1 - t0)) -v cpu=$((cpu1 - cpu0)) 'BEGIN {
            printf "RESULT %s %.1f MB/s\n", m, 4 * 64 * 1048576 / (ns / 1e3)
            printf "RESULT %s_cpu %.0f us/MiB\n", m, cpu / 256 }' >>"$out"
    done
}

# The cells of one round: every row on both servers, back to back.
run_cells() {
    local ng=$1 s3=$2 row op size lop c m
    for row in "GET 4k" "GET 64m" "PUT 4k" "PUT 64m"; do
        set -- $row
        op=$1 size=$2
        lop=$(echo "$op" | tr A-Z a-z)
        case ",${rows:-${lop}_$size}," in *",${lop}_$size,"*) ;; *) continue ;; esac
        for c in 1 16 64; do
            [ "$c" = 64 ] && [ "$lop$size" != get4k ] && continue
            m="${lop}_${size}_c$c"
            [ -n "$ngx_up" ] && run_wrk "$ng" "$m" "$NGX_PORT" "$NGX_PID" "$op" "$size" "$c" \
                "$W/$lop$size.ngx" >/dev/null
            bench_settle
            [ -n "$s3_up" ] && run_wrk "$s3" "$m" "$S3NFSD_S3_PORT" "$S3NFSD_PID" "$op" "$size" \
                "$c" "$W/$lop$size.s3" >/dev/null
            bench_settle
            bench_log "s3: $m nginx: $(grep " $m " "$ng" | tail -1 | cut -d' ' -f3- )" \
                "s3nfsd: $(grep " $m " "$s3" | tail -1 | cut -d' ' -f3-)"
        done
    done
    case ",${rows:-first}," in *,first,*) ;; *) return ;; esac
    [ -n "$ngx_up" ] && run_first "$ng" "$NGX_PORT" "$NGX_PID" ngx
    bench_settle
    [ -n "$s3_up" ] && run_first "$s3" "$S3NFSD_S3_PORT" "$S3NFSD_PID" s3
    bench_settle
}

# history OUTFILE PORT SERVERPID SUFFIX: populate, then the mixed load.
history() {
    local out=$1 port=$2 spid=$3 sfx=$4 line cpu0 cpu1 t0
    t0=$(date +%s)
    bench_log "s3: history on port $port: $hist objects of $hist_bytes bytes ($hist_conns" \
        "connections), $mix_secs s of mixed load ..."
    cpu0=$(bench_cpu_us "$spid")
    rm -f "$W/popdone."*
    wrk -t2 -c"$hist_conns" -d36000s --timeout 60s -s "$here/populate.lua" \
        "http://127.0.0.1:$port/" -- "$W/hist.$sfx" "$W/objhist" 2 "$W/popdone." \
        >"$W/populate.out" 2>&1 &
    local wp=$!
    bench_track "$wp"
    while kill -0 "$wp" 2>/dev/null && [ ! -e "$W/popdone.0" -o ! -e "$W/popdone.1" ]; do
        sleep 0.2
    done
    kill -INT "$wp" 2>/dev/null
    wait "$wp"
    line=$(grep '^WRK' "$W/populate.out")
    cpu1=$(bench_cpu_us "$spid")
    echo "$line" | awk -v cpu=$((cpu1 - cpu0)) '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (v["requests"] == "" || v["errors"] > 0) {
            printf "ERROR hist_populate %d errors\n", v["errors"]; exit }
        printf "RESULT hist_populate %.0f req/s\n", v["requests"] / (v["duration_us"] / 1e6)
        printf "RESULT hist_populate_cpu %.0f us/req\n", cpu / v["requests"]
        printf "RESULT hist_populate_secs %.0f s\n", v["duration_us"] / 1e6 }' >>"$out"
    if [ "$mix_secs" -gt 0 ]; then
        line=$(wrk_summary 2 16 "$mix_secs" mix.lua "http://127.0.0.1:$port/" -- \
            "$W/mix.$sfx" "$W/obj4k")
        echo "$line" | awk '{
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            printf "RESULT hist_mix %.0f req/s\n", v["requests"] / (v["duration_us"] / 1e6) }' \
            >>"$out"
    fi
    local dir=$W/www
    [ "$sfx" = s3 ] && dir=$W/s3nfsd/data
    echo "NOTE history: $hist objects of $hist_bytes bytes + mixed load took" \
        "$(($(date +%s) - t0)) s; $(du -sm "$dir" | cut -f1) MiB on disk after it" >>"$out"
}

bench_log "s3: states $states, $rounds round(s), history $hist objects of $hist_bytes bytes;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
for state in ${states//,/ }; do
    ng=$W/nginx.$state.txt s3=$W/s3nfsd.$state.txt
    : >"$ng"; : >"$s3"
    ngx_up="" s3_up=""
    if [ "$state" = hist ]; then
        ngx_start && ngx_up=1
        s3_start && s3_up=1
        make_paths "$hist" || exit 1
        [ -n "$ngx_up" ] && history "$ng" "$NGX_PORT" "$NGX_PID" ngx
        bench_settle
        [ -n "$s3_up" ] && history "$s3" "$S3NFSD_S3_PORT" "$S3NFSD_PID" s3
        bench_settle
        if [ -n "$s3_up" ] && [ -n "$do_list" ]; then
            "$PY" "$here/s3util.py" "${S3ARGS[@]}" list --prefix hist/ --expect "$hist" \
                >>"$s3" || echo "ERROR list ListObjectsV2 failed" >>"$s3"
        fi
    fi
    for r in $(seq "$rounds"); do
        if [ "$state" = fresh ]; then
            ngx_up="" s3_up=""
            ngx_start && ngx_up=1
            s3_start && s3_up=1
            make_paths 16 || exit 1
        fi
        bench_log "s3: $state servers, round $r ..."
        run_cells "$ng" "$s3"
        if [ "$state" = fresh ]; then
            [ -n "$ngx_up" ] && ngx_stop
            [ -n "$s3_up" ] && s3_stop
        fi
    done
    if [ "$state" = hist ]; then
        [ -n "$ngx_up" ] && ngx_stop
        [ -n "$s3_up" ] && s3_stop
    fi
done

for state in ${states//,/ }; do
    ng=$W/nginx.$state.txt s3=$W/s3nfsd.$state.txt
    bench_median "$ng"
    bench_median "$s3"
    case $state in
    fresh) what="fresh servers, empty stores" ;;
    hist) what="servers with history: $hist objects of $hist_bytes bytes, $mix_secs s of mixed load" ;;
    esac
    bench_table "S3 over HTTP, $what: nginx $(nginx -v 2>&1 | sed 's/.*\///') vs s3nfsd, median of $rounds round(s)" \
        nginx "$ng" s3nfsd "$s3"
    bench_targets "$ng" "$s3" get_4k_c1:0.9 get_4k_c16:1.0 get_4k_c64:1.0 get_64m_c1:0.8 \
        get_64m_c16:0.8 put_64m_c16:0.8
    echo "(nginx's PUT is not durable: no fsync; s3nfsd acknowledges a PUT once data and" \
        "metadata are on disk)"
    grep -h '^NOTE' "$ng" | sed 's/^NOTE /nginx: /'
    grep -h '^NOTE' "$s3" | sed 's/^NOTE /s3nfsd: /'
    grep -h '^ERROR' "$ng" | sed 's/^/nginx: /'
    grep -h '^ERROR' "$s3" | sed 's/^/s3nfsd: /'
done
bench_load_summary "$W/load.txt"
exit 0
