#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fio.sh BUCKET [SIZE [RUNTIME]]: data integrity under fio through the kernel client.
#
# In bucket BUCKET: sequential 1 MiB writes of SIZE (default 256m) carrying
# fio's crc32c verify headers every 4 KiB, then (caches dropped) a sequential
# verify pass over the whole file, 4 KiB random reads (O_DIRECT, libaio QD16,
# then psync QD1) for RUNTIME seconds each (default 5) verifying every block,
# and 4 KiB random writes with read-back verification on a second file. Any
# checksum mismatch or I/O error fails the step. Leaves seq.dat for the host.
. /host/lib.sh
B=${1:?usage: fio.sh BUCKET [SIZE [RUNTIME]]}
SIZE=${2:-256m}
RT=${3:-5}

# run_fio NAME ARGS...: run one fio job; fail on a non-zero exit or any verify error
run_fio() {
    local name=$1 rc=0; shift
    fio --name="$name" "$@" --output=/tmp/fio-"$name".out || rc=$?
    grep -E 'bw=|iops|err=' /tmp/fio-"$name".out | sed 's/^/    /' || true
    if [ $rc != 0 ] || grep -qE 'verify: bad|verify failed|bad magic|bad header|err= *[1-9]' /tmp/fio-"$name".out; then
        cat /tmp/fio-"$name".out
        fail "fio job $name failed (exit $rc)"
    fi
}

step "mkdir bucket"
mkdir "$B"
cd "$B"
VERIFY=(--verify=crc32c --verify_interval=4096 --verify_fatal=1)

step "sequential write $SIZE (1 MiB, crc32c headers)"
run_fio seqwrite --filename=seq.dat --size="$SIZE" --rw=write --bs=1M --ioengine=psync \
    --end_fsync=1 "${VERIFY[@]}" --do_verify=0
eq "$(stat -c %s seq.dat)" $(numfmt --from=iec "${SIZE^^}") "size of seq.dat"
drop_caches

step "sequential read + verify of every 4 KiB block"
run_fio seqcheck --filename=seq.dat --size="$SIZE" --rw=write --bs=1M --ioengine=psync \
    "${VERIFY[@]}" --verify_only=1
drop_caches

step "4 KiB random read, O_DIRECT, libaio QD16, verify (${RT}s)"
run_fio randread-qd16 --filename=seq.dat --size="$SIZE" --rw=randread --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=16 --runtime="$RT" --time_based "${VERIFY[@]}"

step "4 KiB random read, psync QD1, verify (${RT}s)"
run_fio randread-qd1 --filename=seq.dat --size="$SIZE" --rw=randread --bs=4k \
    --ioengine=psync --runtime="$RT" --time_based "${VERIFY[@]}"

step "4 KiB random write + read-back verify (16 MiB)"
run_fio randwrite --filename=rand.dat --size=16m --rw=randwrite --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=8 --end_fsync=1 "${VERIFY[@]}" --do_verify=1
drop_caches
run_fio randcheck --filename=rand.dat --size=16m --rw=randwrite --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=8 "${VERIFY[@]}" --verify_only=1
rm rand.dat

step "leave seq.dat for the host"
drop_caches
hostcheck "$B" seq.dat seq.dat
workload_ok fio
