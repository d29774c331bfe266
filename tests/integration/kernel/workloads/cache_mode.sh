#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# cache_mode.sh RW_BUCKET RO_BUCKET: the kernel client over two cache-mode
# buckets (docs/tiering.md § Cache mode) whose remote objects were put there
# with boto3 and never listed before. Runs as root in the nfsvm guest with
# cwd = the mount of the tenant root. /host holds:
#   rw.sha256  `sha256sum` lines of every file of RW_BUCKET (paths from ./)
#   ro.sha256  the same for RO_BUCKET
#   payload.bin  the bytes to write back into RW_BUCKET
# The host checks what reached the remote after the guest has exited.
. /host/lib.sh
RW=${1:?usage: cache_mode.sh RW_BUCKET RO_BUCKET}
RO=${2:?usage: cache_mode.sh RW_BUCKET RO_BUCKET}
ROFS="Read-only file system"

cd "$RW" || fail "no bucket $RW"

step "find sees the remote's names (lazy import by READDIR)"
find . -type f | sort > /tmp/found
awk '{print $2}' /host/rw.sha256 | sort > /tmp/want
diff /tmp/want /tmp/found || fail "find in $RW differs from the remote's keys"

step "ls -R shows every directory and name"
ls -R . > /tmp/lsr
for p in $(cat /tmp/want); do
    d=$(dirname "$p")
    grep -qx "$d:" /tmp/lsr || fail "ls -R has no directory $d"
    grep -qx "$(basename "$p")" /tmp/lsr || fail "ls -R has no name $(basename "$p")"
done

step "every file reads through with the remote's bytes"
sha256sum --quiet -c /host/rw.sha256 || fail "checksums differ in $RW"

step "read again from the local copy after dropping caches"
drop_caches
sha256sum --quiet -c /host/rw.sha256 || fail "checksums differ in $RW on the second read"

step "create + write + fsync + rename into a new directory"
mkdir ckpt
dd if=/host/payload.bin of=ckpt/.step1.tmp bs=1M conv=fsync status=none
mv ckpt/.step1.tmp ckpt/step1.bin
cmp /host/payload.bin ckpt/step1.bin || fail "ckpt/step1.bin differs after the rename"

step "a new file in an imported directory"
echo "written in the guest" > img/a/note.txt
sync
eq "$(cat img/a/note.txt)" "written in the guest" "img/a/note.txt"

cd "${NFSVM_MNT:-..}/$RO" || fail "no bucket $RO"

step "read-only bucket: names and bytes"
find . -type f | sort > /tmp/found
awk '{print $2}' /host/ro.sha256 | sort > /tmp/want
diff /tmp/want /tmp/found || fail "find in $RO differs from the remote's keys"
sha256sum --quiet -c /host/ro.sha256 || fail "checksums differ in $RO"

step "read-only bucket: writes fail with EROFS"
f=$(head -n 1 /tmp/want)
must_fail_with "$ROFS" touch new.txt
must_fail_with "$ROFS" mkdir newdir
must_fail_with "$ROFS" rm -f "$f"
must_fail_with "$ROFS" mv "$f" moved
must_fail_with "$ROFS" truncate -s 0 "$f"
must_fail_with "$ROFS" ln -s "$f" link
[ ! -e new.txt ] || fail "new.txt exists after a refused create"
sha256sum --quiet -c /host/ro.sha256 || fail "checksums differ in $RO after the refusals"
workload_ok cache_mode
