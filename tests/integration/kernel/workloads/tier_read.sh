#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tier_read.sh BUCKET KEY: read an evicted file of a tiered bucket through the
# kernel client. Runs as root in the nfsvm guest with cwd = the mount of the
# tenant root. /host/payload.bin holds the file's bytes. The size must show
# without a recall (stat), then a read of its last MiB, then the whole file
# (after dropping caches) must equal the payload.
. /host/lib.sh
B=${1:?usage: tier_read.sh BUCKET KEY}
K=${2:?usage: tier_read.sh BUCKET KEY}
cd "$B" || fail "no bucket $B"

step "stat of the evicted file"
size=$(stat -c %s /host/payload.bin)
eq "$(stat -c %s "$K")" "$size" "size of $K"

step "read its last MiB"
tail -c 1048576 "$K" > /tmp/tail || fail "tail of $K failed"
tail -c 1048576 /host/payload.bin | cmp - /tmp/tail || fail "last MiB of $K differs"

step "read it whole"
drop_caches
cmp /host/payload.bin "$K" || fail "$K differs from the payload"
workload_ok tier_read
