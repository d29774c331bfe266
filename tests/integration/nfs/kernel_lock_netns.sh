#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Kernel NLM test, run inside `unshare --net --mount` so that rpcbind on port
# 111 is private: rpcbind + s3nfsd (registering NFS, MOUNT, NLM, NSM) + an
# nfsvm guest mounting with locking (`run --lock`) that runs kernel/lock.py.
# Usage: kernel_lock_netns.sh S3NFSD NFSVM_RUN WORKDIR
set -euo pipefail
BIN=$1 RUN=$2 W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
ip link set lo up
mount -t tmpfs tmpfs /run
mkdir -p /run/rpcbind
rpcbind -f -w & RP=$!
trap 'kill $RP ${DP:-} 2>/dev/null; wait' EXIT
for _ in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
PORT=25049
S3NFS_ACCESS_KEY=AKIALOCKTEST01 S3NFS_SECRET_KEY=lock-test-secret-key "$BIN" --foreground \
    --data-dir "$W/data" --s3-listen 127.0.0.1:25000 --nfs-listen 127.0.0.1:$PORT \
    --admin-listen 127.0.0.1:25001 --set nfs_register_rpcbind=true \
    --log-level info,nfs=debug --set data_file_size=256MiB > "$W/log" 2>&1 & DP=$!
for _ in $(seq 100); do grep -q "registered NFS v3" "$W/log" 2>/dev/null && break; sleep 0.1; done
rpcinfo -p 127.0.0.1
"$RUN" --lock -p $PORT -m $PORT -e / --timeout 600 "$HERE/kernel/lock.py"
grep -c "NLM_LOCK from" "$W/log"
