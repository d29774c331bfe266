#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs inside `unshare --net --mount` (a private loopback and /run, so the
# host's rpcbind, if any, is untouched): start rpcbind, start s3nfsd with
# nfs_register_rpcbind, check that NFS v3 and MOUNT v3 are registered on its
# port, stop it and check they are gone. Usage: rpcbind_check.sh S3NFSD WORKDIR
set -euo pipefail
BIN=$1 W=$2
ip link set lo up
mount -t tmpfs tmpfs /run
mkdir -p /run/rpcbind
rpcbind -f -w & RP=$!
trap 'kill $RP ${DP:-} 2>/dev/null; wait' EXIT
for _ in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.1; done
PORT=23049
S3NFS_ACCESS_KEY=AKIARPCBINDTEST S3NFS_SECRET_KEY=rpcbind-secret-key "$BIN" --foreground \
    --data-dir "$W/data" --s3-listen 127.0.0.1:23000 --nfs-listen 127.0.0.1:$PORT \
    --admin-listen 127.0.0.1:23001 --set nfs_register_rpcbind=true --set data_file_size=256MiB \
    > "$W/log" 2>&1 & DP=$!
for _ in $(seq 100); do grep -q "registered NFS v3" "$W/log" 2>/dev/null && break; sleep 0.1; done
rpcinfo -p 127.0.0.1 | tee "$W/rpcinfo-up"
grep -Eq "100003 +3 +tcp +$PORT" "$W/rpcinfo-up"
grep -Eq "100005 +3 +tcp +$PORT" "$W/rpcinfo-up"
kill -TERM $DP
wait $DP || true
DP=
rpcinfo -p 127.0.0.1 | tee "$W/rpcinfo-down"
! grep -Eq "10000[35] +3 +tcp" "$W/rpcinfo-down"
echo RPCBIND OK
