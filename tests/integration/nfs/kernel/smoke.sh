#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Kernel NFS client smoke test (runs inside nfsvm, cwd = the mounted export,
# which is a tenant root: files live in buckets, so make one first).
set -euxo pipefail
B=ksmoke-$$
mkdir "$B"
cd "$B"
echo hello > a
[ "$(cat a)" = hello ]
mv a b
[ ! -e a ]
ln b c
ln -s b d
[ "$(readlink d)" = b ]
[ "$(cat d)" = hello ]
chmod 640 b
[ "$(stat -c %a b)" = 640 ]
[ "$(stat -c %h b)" = 2 ]
chown 1234:5678 b
[ "$(stat -c %u:%g b)" = 1234:5678 ]
touch -d '2001-02-03 04:05:06' b
[ "$(stat -c %Y b)" = "$(date -d '2001-02-03 04:05:06' +%s)" ]
dd if=/dev/urandom of=big bs=1M count=8 status=none
sync
s1=$(sha256sum < big)
echo 3 > /proc/sys/vm/drop_caches
s2=$(sha256sum < big)
[ "$s1" = "$s2" ]
truncate -s 1000 big
[ "$(stat -c %s big)" = 1000 ]
truncate -s 5000 big
[ "$(stat -c %s big)" = 5000 ]
[ "$(tail -c 4000 big | tr -d '\0' | wc -c)" = 0 ]
mkdir -p x/y/z
echo deep > x/y/z/f
mv x w
[ "$(cat w/y/z/f)" = deep ]
echo new > n && mv -f n b
[ "$(cat c)" = hello ] && [ "$(cat b)" = new ]
! mkfifo p 2>/dev/null
! rmdir w 2>/dev/null
[ "$(ls | sort | tr '\n' ' ')" = "b big c d w " ]
df -k . | tail -1
cd ..
rm -rf "$B"
[ ! -e "$B" ]
echo SMOKE OK
