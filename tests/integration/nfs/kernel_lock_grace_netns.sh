#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Kernel client during the NLM grace period, run inside `unshare --net --mount`
# (private rpcbind on port 111): a fake client host (nlm_grace_holder.py:
# hostB on 127.0.0.2 with its own "status monitor") takes a
# lock, s3nfsd is restarted (it remembers hostB and notifies it, so the grace
# period runs in full), then an nfsvm guest mounting with locking runs
# kernel/lock_grace.py while the grace period is on. A third start checks that
# the guest (behind NAT) is not "notified" through our own NSM.
# Usage: kernel_lock_grace_netns.sh S3NFSD NFSVM_RUN WORKDIR
set -euo pipefail
BIN=$1 RUN=$2 W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
ip link set lo up
mount -t tmpfs tmpfs /run
mkdir -p /run/rpcbind
rpcbind -f -w & RP=$!
trap 'kill $RP ${DP:-} 2>/dev/null; wait' EXIT
for _ in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
PORT=25149
start() {
    echo "==== start" >> "$W/log"
    S3NFS_ACCESS_KEY=AKIAGRACETEST01 S3NFS_SECRET_KEY=grace-test-secret-key "$BIN" --foreground \
        --data-dir "$W/data" --s3-listen 127.0.0.1:25100 --nfs-listen 127.0.0.1:$PORT \
        --admin-listen 127.0.0.1:25101 --set nfs_register_rpcbind=true \
        --set nlm_grace_period=45 --log-level info,nfs=debug --set data_file_size=256MiB \
        >> "$W/log" 2>&1 & DP=$!
    for _ in $(seq 100); do
        [ "$(grep -c 'registered NFS v3' "$W/log")" -ge "$1" ] && return; sleep 0.1
    done
    echo "s3nfsd did not register"; exit 1
}
start 1
/usr/bin/python3 "$HERE/nlm_grace_holder.py" $PORT "$W" > "$W/holder" 2>&1 & HP=$!
trap 'kill $RP ${DP:-} $HP 2>/dev/null; wait' EXIT
for _ in $(seq 100); do grep -q HOLDING "$W/holder" && break; sleep 0.1; done
grep -q HOLDING "$W/holder"
kill -TERM $DP; wait $DP || true
start 2
for _ in $(seq 100); do
    grep -q "SM_NOTIFY delivered to NLM host hostB" "$W/log" && break; sleep 0.1
done
grep -q "SM_NOTIFY delivered to NLM host hostB" "$W/log"
"$RUN" --lock -p $PORT -m $PORT -e / --timeout 600 "$HERE/kernel/lock_grace.py"
# The guest is remembered too (it locked), but behind NAT: its address is
# 127.0.0.1, whose portmapper names our own NSM. At the next start that
# notification counts as not delivered and the grace period ends at once.
kill -TERM $DP; wait $DP || true
start 3
for _ in $(seq 100); do grep -q "NLM grace period ended early" "$W/log" && break; sleep 0.1; done
