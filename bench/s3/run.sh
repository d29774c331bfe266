#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/s3/run.sh: S3 data path side by side, nginx (sendfile, DAV PUT) vs s3nfsd.
#
# Starts, on free loopback ports, in one temp dir on the same disk:
#  - nginx (Debian nginx-light: sendfile on, tcp_nodelay on, access log off,
#    PUT through the dav module, which nginx-light has; nginx's PUT is not
#    durable: it writes a temp file and renames it, no fsync),
#  - s3nfsd (build/s3nfsd or $S3NFSD_BIN), bucket "bench" with the same objects,
# then measures each row with wrk against nginx and then s3nfsd, back to back:
#   get_4k / get_64m    GET of one 4 KiB / 64 MiB object (s3nfsd: presigned URL)
#   put_4k / put_64m    PUT of 4 KiB / 64 MiB bodies to 16 / 8 distinct keys round
#                       robin (s3nfsd: presigned PUT URLs, so SigV4 is checked on
#                       every request, UNSIGNED-PAYLOAD)
# at 1 and 16 connections (_c1 / _c16), then fills 100,000 keys into s3nfsd and
# times ListObjectsV2 over them (nginx has no equivalent: absolute numbers).
# Any request error (connect/read/write, timeout, HTTP >= 400) voids that cell.
# With --rounds N every cell runs N times (nginx, s3nfsd, nginx, s3nfsd, ...) and
# the table keeps each side's best rate and lowest CPU cost.
# Usage: bench/s3/run.sh [--secs N (default 5)] [--keys N (default 100000)]
#                        [--rounds N (default 1)] [--only nginx|s3nfsd] [--no-list]
#                        [--rows get_4k,put_64m,... (default: all four)]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
. "$here/../lib.sh"
export BENCH_S3_DIR=$here

secs=5 keys=100000 only="" do_list=1 rounds=1 rows=""
while [ $# -gt 0 ]; do
    case $1 in
    --secs) secs=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-list) do_list=""; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
for t in wrk nginx curl; do
    command -v $t >/dev/null || { echo "SKIP s3 bench: $t not installed" >&2; exit 1; }
done

bench_init s3
W=$BENCH_WORK
mkdir -p "$W/www/bench" "$W/nginx-tmp"
head -c 4096 /dev/urandom >"$W/obj4k"
head -c $((64 << 20)) /dev/urandom >"$W/obj64m"
cp "$W/obj4k" "$W/obj64m" "$W/www/bench/"
echo /bench/obj4k >"$W/get4k.ngx"
echo /bench/obj64m >"$W/get64m.ngx"
for i in $(seq -w 0 15); do echo "/bench/put4k-$i"; done >"$W/put4k.ngx"
for i in $(seq -w 0 7); do echo "/bench/put64m-$i"; done >"$W/put64m.ngx"

ngx_ok="" s3_ok=""
if [ "$only" != s3nfsd ]; then
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
            dav_methods PUT;
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
        ngx_ok=1
        bench_log "s3: nginx $(nginx -v 2>&1 | sed 's/.*\///') pid $NGX_PID port $NGX_PORT"
    else
        echo "SKIP nginx: did not start (see $W/nginx-error.log)" >&2
        cat "$W/nginx-error.log" >&2
    fi
fi

if [ "$only" != nginx ]; then
    if s3nfsd_start "$W/s3nfsd"; then
        S3EP="http://127.0.0.1:$S3NFSD_S3_PORT"
        S3ARGS=(--endpoint "$S3EP" --access-key "$S3NFS_BENCH_ACCESS_KEY"
                --secret-key "$S3NFS_BENCH_SECRET_KEY")
        if "$PY" "$here/s3util.py" "${S3ARGS[@]}" prep "$W"; then
            s3_ok=1
            bench_log "s3: s3nfsd pid $S3NFSD_PID port $S3NFSD_S3_PORT"
        else
            echo "SKIP s3nfsd: bucket/object setup failed (daemon log: $W/s3nfsd/s3nfsd.log)" >&2
            tail -15 "$W/s3nfsd/s3nfsd.log" >&2
        fi
    else
        echo "SKIP s3nfsd: daemon not available" >&2
    fi
fi

# run_wrk OUTFILE METRIC PORT SERVERPID OP SIZE CONNS PATHFILE
# Appends "RESULT METRIC value unit" (req/s for 4 KiB, MB/s for 64 MiB) and
# "RESULT METRIC_cpu value us/req|us/MiB" (server CPU per request / per MiB
# moved), or an "ERROR" line when wrk saw any error or nothing completed.
run_wrk() {
    local out=$1 metric=$2 port=$3 spid=$4 op=$5 size=$6 conns=$7 pathfile=$8
    local threads=1 line cpu0 cpu1 dur=$secs
    [ "$conns" -gt 1 ] && threads=2
    # A 64 MiB cell at 16 connections moves 1 GiB per round: give it twice as long.
    [ "$size" = 64m ] && dur=$((secs * 2))
    cpu0=$(bench_cpu_us "$spid")
    if [ "$op" = GET ]; then
        line=$(wrk -t"$threads" -c"$conns" -d"${dur}s" --timeout 60s -s "$here/get.lua" \
            "http://127.0.0.1:$port$(head -1 "$pathfile")" 2>&1 | grep '^WRK')
    else
        line=$(wrk -t"$threads" -c"$conns" -d"${dur}s" --timeout 60s -s "$here/put.lua" \
            "http://127.0.0.1:$port/" -- "$pathfile" "$W/obj$size" 2>&1 | grep '^WRK')
    fi
    cpu1=$(bench_cpu_us "$spid")
    echo "$metric $line cpu_us=$((cpu1 - cpu0))" >>"$W/wrk.log"
    echo "$line" | awk -v m="$metric" -v sz="$size" -v cpu=$((cpu1 - cpu0)) -v secs="$dur" -v op="$op" '
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
        }' | tee -a "$out"
}

: >"$W/nginx.txt"
: >"$W/s3nfsd.txt"
for row in "GET 4k" "GET 64m" "PUT 4k" "PUT 64m"; do
    set -- $row
    op=$1 size=$2
    lop=$(echo "$op" | tr A-Z a-z)
    case ",${rows:-${lop}_$size}," in *",${lop}_$size,"*) ;; *) continue ;; esac
    for c in 1 16; do
        m="${lop}_${size}_c$c"
        for r in $(seq "$rounds"); do
            [ -n "$ngx_ok" ] && run_wrk "$W/nginx.txt" "$m" "$NGX_PORT" "$NGX_PID" "$op" "$size" \
                "$c" "$W/$lop$size.ngx" >/dev/null
            bench_settle
            [ -n "$s3_ok" ] && run_wrk "$W/s3nfsd.txt" "$m" "$S3NFSD_S3_PORT" "$S3NFSD_PID" "$op" \
                "$size" "$c" "$W/$lop$size.s3" >/dev/null
            bench_settle
        done
        bench_log "s3: $m nginx: $(grep " $m " "$W/nginx.txt" | cut -d' ' -f3- | tr '\n' ' ')" \
            "s3nfsd: $(grep " $m " "$W/s3nfsd.txt" | cut -d' ' -f3- | tr '\n' ' ')"
    done
done

if [ -n "$s3_ok" ] && [ -n "$do_list" ]; then
    bench_log "s3: filling $keys keys for ListObjectsV2 ..."
    if "$PY" "$here/s3util.py" "${S3ARGS[@]}" fill "$keys" --threads 16; then
        "$PY" "$here/s3util.py" "${S3ARGS[@]}" list --expect "$keys" | tee -a "$W/s3nfsd.txt" >/dev/null ||
            echo "ERROR list ListObjectsV2 failed" >>"$W/s3nfsd.txt"
    else
        echo "ERROR list fill of $keys keys failed" >>"$W/s3nfsd.txt"
    fi
fi

bench_best "$W/nginx.txt"
bench_best "$W/s3nfsd.txt"
[ -n "$ngx_ok" ] && ngx_name="nginx" || ngx_name="nginx(n/a)"
bench_table "S3 over HTTP: nginx $(nginx -v 2>&1 | sed 's/.*\///') vs s3nfsd" "$ngx_name" \
    "$W/nginx.txt" s3nfsd "$W/s3nfsd.txt"
bench_targets "$W/nginx.txt" "$W/s3nfsd.txt" get_64m_c1:0.8 get_64m_c16:0.8 get_4k_c1:0.5 \
    get_4k_c16:0.5
grep -h '^ERROR' "$W/nginx.txt" | sed 's/^/nginx: /'
grep -h '^ERROR' "$W/s3nfsd.txt" | sed 's/^/s3nfsd: /'
[ -n "$ngx_ok" ] || echo "nginx: did not run"
[ -n "$s3_ok" ] || echo "s3nfsd: did not run (not built, not healthy, or S3 setup failed)"
exit 0
