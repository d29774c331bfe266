#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run both cross-protocol examples against a private s3nfsd on loopback ports.
#
#   examples/run.sh                                  full scale: 20,000 files, 3 x 4 GiB checkpoints
#   FILES=500 CKPT_SIZE=64MiB VERSIONS=3 examples/run.sh        reduced scale (about 30 s)
#
# Env: S3NFSD (binary, default build/s3nfsd), FILES, CKPT_SIZE, VERSIONS, WORKDIR (kept if set),
#      NFS_MOUNT (a kernel NFS mount of the daemon's "/" to use instead of the user-space
#      client; mount it yourself once the daemon prints its port, see examples/README.md).
# The daemon is started in a temp dir and stopped by its PID at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bin=${S3NFSD:-$top/build/s3nfsd}
files=${FILES:-20000}
size=${CKPT_SIZE:-4GiB}
versions=${VERSIONS:-3}
py=/usr/bin/python3
[ -x "$bin" ] || { echo "s3nfsd not found at $bin (set S3NFSD)" >&2; exit 2; }

work=${WORKDIR:-$(mktemp -d /tmp/s3nfs-examples.XXXXXX)}
mkdir -p "$work"
port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3p=$(port); nfsp=$(port); admp=$(port)
bytes=$("$py" -c "import sys; sys.path.insert(0, '$here'); import checkpoint as c; print(c.parse_size('$size'))")
# room for the old checkpoint, the new one and the temp file, plus the dataset
dfs=$(( (bytes * 4 / 1073741824) + 2 ))GiB

export AWS_ACCESS_KEY_ID=EXAMPLEACCESSKEY0001 AWS_SECRET_ACCESS_KEY=example/secret/key/for/the/examples/0001
export AWS_DEFAULT_REGION=us-east-1
S3NFS_ACCESS_KEY=$AWS_ACCESS_KEY_ID S3NFS_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
S3NFS_ADMIN_TOKEN=example-admin-token-0123456789abcdef \
    "$bin" --foreground --data-dir "$work/data" --s3-listen "127.0.0.1:$s3p" \
    --nfs-listen "127.0.0.1:$nfsp" --admin-listen "127.0.0.1:$admp" \
    --set "data_file_size=$dfs" >"$work/s3nfsd.log" 2>&1 &
pid=$!
stop() { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$admp/healthz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work/s3nfsd.log"; exit 1; }
    sleep 0.1
done
echo "s3nfsd pid $pid: S3 http://127.0.0.1:$s3p, NFS+MOUNT port $nfsp, log $work/s3nfsd.log"
nfsargs=(--nfs-port "$nfsp")
[ -n "${NFS_MOUNT:-}" ] && nfsargs=(--nfs-mount "$NFS_MOUNT")

rc=0
echo "== dataset: $files files up with aws s3 sync, read back over NFS"
"$py" "$here/dataset_sync.py" --endpoint "http://127.0.0.1:$s3p" "${nfsargs[@]}" \
    --files "$files" --bucket datasets | tee "$work/dataset.json" || rc=1
echo "== checkpoint: $versions x $size over NFS (tmp + COMMIT + rename), polled over S3"
"$py" "$here/checkpoint.py" --endpoint "http://127.0.0.1:$s3p" "${nfsargs[@]}" \
    --size "$size" --versions "$versions" --bucket checkpoints --workdir "$work" \
    | tee "$work/checkpoint.json" || rc=1
[ -z "${WORKDIR:-}" ] && [ $rc -eq 0 ] && { stop; trap - EXIT; rm -rf "$work"; }
exit $rc
