#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# versions.sh BUCKET: the kernel client in a versioned bucket and on a locked
# version (docs/cross-protocol.md, "Versions and object lock").
#
# The host (host_request setup) makes BUCKET versioned with an object "h", and
# a bucket BUCKETl with object lock holding "locked" under GOVERNANCE
# retention. Here: a file is written and left to settle (settle_ms, 2 s by
# default), changed in place (a new version), removed (a delete marker); g is
# renamed over h; a hard link is refused; every change of the locked file is
# refused with EACCES. The host then checks the versions over S3.
. /host/lib.sh
B=${1:?usage: versions.sh BUCKET}

step "mkdir bucket; the host makes it versioned and makes the locked bucket"
mkdir "$B"
host_request setup
cd "$B"

step "write f and let it settle"
printf 'one\n' > f
sync
sleep 4

step "change f in place: a new version"
printf 'TWO' | dd of=f conv=notrunc,fsync status=none
drop_caches
eq "$(cat f)" "TWO" "f after the change"

step "remove f: a delete marker"
rm f
[ ! -e f ] || fail "f still there"

step "rename g over h, whose S3 object stays as a version"
printf 'g\n' > g
sync
mv g h
eq "$(cat h)" "g" "h after the rename"

step "hard links are refused in a versioned bucket (as across file systems)"
must_fail_with "Invalid cross-device link" ln h h2

step "the locked version: read, but no write, truncate, remove or rename"
cd "../${B}l"
eq "$(cat locked)" "locked" "the locked file"
must_fail_with "Permission denied" dd if=/dev/zero of=locked bs=1 count=1 conv=notrunc,fsync \
    status=none
must_fail_with "Permission denied" truncate -s 0 locked
must_fail_with "Permission denied" rm -f locked
must_fail_with "Permission denied" mv locked moved
printf 'o\n' > other
sync
must_fail_with "Permission denied" mv other locked
drop_caches
eq "$(cat locked)" "locked" "the locked file is unchanged"

workload_ok versions
