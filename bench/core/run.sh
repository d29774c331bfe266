#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/core/run.sh: the namespace core vs fio on the same disk and folder, one run.
#
# Rows (fio job  ->  bench_core phase):
#   seq_write_qd1  fio: 1 MiB writes, O_DIRECT, psync (one in flight), fsync at end
#                  core: 1 MiB core_write UNSTABLE from 1 thread, core_commit at end
#   seq_read_qd1   fio: 1 MiB reads, O_DIRECT, psync   core: 1 MiB core_read, 1 thread
#   seq_write_qd8  fio: io_uring, iodepth 8            core: 8 threads
#   seq_read_qd8   fio: io_uring, iodepth 8            core: 8 threads
#   create_4k      fio: per file open(O_CREAT) + 4 KiB write + fsync + close, 64 jobs (--fio-jobs)
#                  core: core_create + 4 KiB core_write + core_commit, 256 threads
#                  (--create-threads: each thread has one op in flight, so this
#                  is how many operations a group commit can batch)
#   put_256m_t1    fio: 1 GiB in 1 MiB writes, O_DIRECT, io_uring iodepth 4, fsync at end
#                  core: 4 objects of 256 MiB through core_upload_* from 1 thread (4 MiB
#                  unaligned chunks, as S3 PutObject feeds it); put_256m_t1_cpu: the
#                  core's CPU per MiB (no fio counterpart)
# Sequential rows use a 2 GiB file (--size-mib); create rows --files files.
# Targets (docs/benchmarks.md): sequential >= 0.8 of fio, create_4k >= 20,000/s.
# Usage: bench/core/run.sh [--size-mib 2048] [--files 50000] [--fio-files 20000]
#                          [--create-threads 256] [--fio-jobs 64]
#                          [--bench-core PATH]   (default: build/bench/core/bench_core)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib.sh
. "$here/../lib.sh"

size=2048 files=50000 fio_files=20000 cthreads=256 fjobs=64
core_bin=${BENCH_CORE_BIN:-$BENCH_TOP/build/bench/core/bench_core}
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) bench_usage "$0"; exit 0 ;;
    --size-mib) size=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --fio-files) fio_files=$2; shift 2 ;;
    --create-threads) cthreads=$2; shift 2 ;;
    --fio-jobs) fjobs=$2; shift 2 ;;
    --bench-core) core_bin=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v fio >/dev/null || { echo "SKIP core bench: fio not installed" >&2; exit 1; }

bench_init core
W=$BENCH_WORK
: >"$W/fio.txt"
: >"$W/core.txt"

# fio_row METRIC JSONKEY(read|write) UNIT(MB/s|files/s) fio args...
fio_row() {
    local metric=$1 key=$2 unit=$3; shift 3
    if ! fio --output-format=json --output="$W/fio-$metric.json" "$@" >/dev/null 2>"$W/fio.err"; then
        echo "ERROR $metric fio failed: $(head -3 "$W/fio.err")" >>"$W/fio.txt"
        return
    fi
    "$PY" - "$W/fio-$metric.json" "$metric" "$key" "$unit" >>"$W/fio.txt" <<'EOF'
import json, sys
path, metric, key, unit = sys.argv[1:5]
with open(path) as f:
    text = f.read()
j = json.loads(text[text.index("{"):])   # fio may print notes before the JSON
d = j["jobs"][0][key]
if unit == "MB/s":
    print("RESULT %s %.1f MB/s" % (metric, d["bw_bytes"] / 1e6))
else:
    print("RESULT %s %.0f files/s" % (metric, d["iops"]))
EOF
}

seq_fio() {
    local qd=$1
    local eng=(--ioengine=psync --iodepth=1)
    [ "$qd" -gt 1 ] && eng=(--ioengine=io_uring --iodepth="$qd")
    local f="$W/fio-seq.dat"
    rm -f "$f"
    fio_row "seq_write_qd$qd" write MB/s --name=seqw --filename="$f" --rw=write --bs=1M \
        --size="${size}M" --direct=1 --end_fsync=1 "${eng[@]}"
    fio_row "seq_read_qd$qd" read MB/s --name=seqr --filename="$f" --rw=read --bs=1M \
        --size="${size}M" --direct=1 "${eng[@]}"
    rm -f "$f"
}

seq_core() {
    local qd=$1
    rm -rf "$W/core-data"
    if ! "$core_bin" --dir "$W/core-data" --only write,read --size-mib "$size" --threads "$qd" \
        >>"$W/core.txt" 2>"$W/core-$qd.err"; then
        echo "ERROR seq_qd$qd bench_core failed: $(grep bench_core "$W/core-$qd.err" | head -2)" \
            >>"$W/core.txt"
    fi
    rm -rf "$W/core-data"
}

have_core=1
if [ ! -x "$core_bin" ] && [ -f "$BENCH_TOP/build/libcore.a" ]; then
    # Not built by make (bench/Makefile.inc not included?): link it here against
    # the build folder's libraries.
    b=$BENCH_TOP/build
    if cc -std=c11 -O2 -D_GNU_SOURCE -I"$BENCH_TOP/common" -I"$BENCH_TOP/core" -I"$BENCH_TOP/meta" -I"$BENCH_TOP/store" \
        -o "$W/bench_core" "$here/bench_core.c" "$b/libcore.a" "$b/libmeta.a" "$b/libstore.a" \
        "$b/libcommon.a" $(pkg-config --libs lmdb liburing libcrypto libevent libevent_pthreads \
        jansson) -lpthread -lm; then
        core_bin=$W/bench_core
        bench_log "core: linked $core_bin against $b"
    fi
fi
if [ ! -x "$core_bin" ]; then
    have_core=""
    echo "SKIP core: $core_bin not built (make bench/core/bench_core, or --bench-core PATH)" >&2
fi

for qd in 1 8; do
    bench_log "core: sequential, $qd in flight: fio ..."
    seq_fio "$qd"
    bench_settle
    if [ -n "$have_core" ]; then
        bench_log "core: sequential, $qd in flight: bench_core ..."
        seq_core "$qd"
    fi
done

bench_log "core: create_4k: fio ($fio_files files, $fjobs jobs) ..."
mkdir -p "$W/fio-files"
per_job=$((fio_files / fjobs))
fio_row create_4k write files/s --name=create --directory="$W/fio-files" --rw=write --bs=4k \
    --filesize=4k --nrfiles="$per_job" --numjobs="$fjobs" --openfiles=1 --create_on_open=1 \
    --file_service_type=sequential --fsync=1 --fallocate=none --ioengine=psync \
    --group_reporting=1
rm -rf "$W/fio-files"
bench_settle
if [ -n "$have_core" ]; then
    bench_log "core: create_4k: bench_core ($files files, $cthreads threads) ..."
    rm -rf "$W/core-data"
    if ! "$core_bin" --dir "$W/core-data" --only create --files "$files" --file-threads "$cthreads" \
        >>"$W/core.txt" 2>"$W/core-create.err"; then
        echo "ERROR create_4k bench_core failed: $(grep bench_core "$W/core-create.err" | head -2)" \
            >>"$W/core.txt"
    fi
    grep 'group commits' "$W/core-create.err" >&2
    rm -rf "$W/core-data"
fi

bench_log "core: put_256m_t1: fio ..."
rm -f "$W/fio-put.dat"
fio_row put_256m_t1 write MB/s --name=put --filename="$W/fio-put.dat" --rw=write --bs=1M \
    --size=1024M --direct=1 --end_fsync=1 --ioengine=io_uring --iodepth=4
rm -f "$W/fio-put.dat"
bench_settle
if [ -n "$have_core" ]; then
    bench_log "core: put_256m_t1: bench_core ..."
    rm -rf "$W/core-data"
    if ! "$core_bin" --dir "$W/core-data" --only upload --size-mib 1 --up-mib 256 --up-objects 4 \
        --up-threads 1 >>"$W/core.txt" 2>"$W/core-upload.err"; then
        echo "ERROR put_256m_t1 bench_core failed: $(grep bench_core "$W/core-upload.err" | head -2)" \
            >>"$W/core.txt"
    fi
    rm -rf "$W/core-data"
fi

bench_table "namespace core vs fio, same folder ($W)" fio "$W/fio.txt" core "$W/core.txt"
grep -h '^ERROR' "$W/fio.txt" | sed 's/^/fio: /'
grep -h '^ERROR' "$W/core.txt" | sed 's/^/core: /'
[ -n "$have_core" ] || echo "core: bench_core not built, core column empty"
bench_targets "$W/fio.txt" "$W/core.txt" 'seq*:0.8'
if [ -n "$have_core" ]; then
    awk '$1 == "RESULT" && $2 == "create_4k" {
        printf "target create_4k >= 20000 files/s: %s (%s)\n", ($3 >= 20000 ? "met" : "NOT met"), $3 }' \
        "$W/core.txt"
fi
exit 0
