#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# smoke.sh BUCKET: everyday file operations through the Linux kernel NFS client.
#
# Runs as root in the nfsvm guest with cwd = the mount of the tenant root.
# Makes bucket BUCKET (mkdir at the root), then checks inside it: create/write/
# read-back (after dropping caches), partial overwrite and append, rename,
# rename-over (checkpoint pattern, with a reader holding the old file open),
# hard link, symlink/readlink, chmod/chown, truncate up/down, mkdir/rmdir,
# special files (mkfifo, mknod) refused,
# remove of an open file (silly rename), ls -la sizes, a directory with many
# entries, df. Leaves payload.bin, hello.txt and patch.bin for the host to GET.
# Inputs: /host/payload.bin (random bytes from the host), optional env
# KS_EXPECT_TOTAL / KS_EXPECT_ITOTAL (df size in bytes / inodes the server
# should report: the tenant quota).
. /host/lib.sh
B=${1:?usage: smoke.sh BUCKET}
M=$PWD

step "mkdir bucket"
mkdir "$B"
[ -d "$B" ] || fail "bucket directory $B missing after mkdir"
cd "$B"

step "create, write, read back"
printf 'hello kernel client\n' > hello.txt
eq "$(cat hello.txt)" "hello kernel client" "hello.txt content"
eq "$(stat -c %s hello.txt)" 20 "hello.txt size"
cp /host/payload.bin payload.bin
drop_caches
cmp /host/payload.bin payload.bin || fail "payload.bin differs from the host's after drop_caches"
eq "$(stat -c %s payload.bin)" "$(stat -c %s /host/payload.bin)" "payload.bin size"
: > empty
eq "$(stat -c %s empty)" 0 "empty file size"

step "partial overwrite and append"
cp /host/payload.bin /tmp/model
cp /host/payload.bin patch.bin
head -c 5000 /dev/urandom > /tmp/chunk
dd if=/tmp/chunk of=/tmp/model bs=1 seek=70001 conv=notrunc status=none
dd if=/tmp/chunk of=patch.bin bs=1 seek=70001 conv=notrunc status=none
dd if=/tmp/chunk of=/tmp/model bs=4096 seek=3 conv=notrunc status=none
dd if=/tmp/chunk of=patch.bin bs=4096 seek=3 conv=notrunc status=none
cat /tmp/chunk >> /tmp/model
cat /tmp/chunk >> patch.bin
drop_caches
cmp /tmp/model patch.bin || fail "patch.bin differs from the local model after overwrite+append"

step "rename"
printf 'a\n' > a
mv a b
[ ! -e a ] || fail "a still exists after mv a b"
eq "$(cat b)" a "b content after rename"
mkdir -p d1/d2
mv b d1/d2/b
eq "$(cat d1/d2/b)" a "content after rename into a subdirectory"
mv d1/d2/b b
mv d1 d1renamed
[ -d d1renamed/d2 ] || fail "directory rename lost its subdirectory"

step "rename-over (checkpoint pattern)"
head -c 300000 /dev/urandom > ckpt
sync
for v in 2 3; do
    head -c $((200000 + v * 777)) /dev/urandom > ckpt.tmp
    sha=$(sha256sum < ckpt.tmp)
    ino=$(stat -c %i ckpt.tmp)
    sync
    mv ckpt.tmp ckpt
    [ ! -e ckpt.tmp ] || fail "ckpt.tmp still exists after mv over ckpt (v$v)"
    eq "$(stat -c %i ckpt)" "$ino" "ckpt inode after rename-over (v$v)"
    drop_caches
    eq "$(sha256sum < ckpt)" "$sha" "ckpt content after rename-over (v$v)"
done
# a reader that opened the old checkpoint keeps reading the old bytes
old=$(sha256sum < ckpt)
exec 4< ckpt
head -c 123457 /dev/urandom > ckpt.tmp
sync
mv ckpt.tmp ckpt
eq "$(sha256sum <&4)" "$old" "old checkpoint read through an fd opened before the rename-over"
exec 4<&-
eq "$(stat -c %s ckpt)" 123457 "new checkpoint size"

step "hard link"
printf 'linked\n' > l1
ln l1 l2
eq "$(stat -c %h l1)" 2 "link count of l1"
eq "$(stat -c %h l2)" 2 "link count of l2"
eq "$(stat -c %i l2)" "$(stat -c %i l1)" "inode of l2 vs l1"
printf 'more\n' >> l2
drop_caches
eq "$(cat l1)" "$(printf 'linked\nmore')" "l1 content after append through l2"
rm l2
eq "$(stat -c %h l1)" 1 "link count of l1 after rm l2"

step "symlink and readlink"
ln -s l1 s1
eq "$(readlink s1)" l1 "readlink s1"
eq "$(stat -c %F s1)" "symbolic link" "type of s1"
eq "$(head -1 s1)" linked "content read through s1"
ln -s /nonexistent/target-with-a-long-name dangling
eq "$(readlink dangling)" /nonexistent/target-with-a-long-name "readlink of a dangling symlink"
[ ! -e dangling ] || fail "dangling symlink resolves"
ln -s d1renamed sdir
[ -d sdir/d2 ] || fail "symlink to a directory does not resolve"
drop_caches
eq "$(readlink s1)" l1 "readlink s1 after drop_caches"

step "chmod and chown as root"
chmod 640 l1
eq "$(stat -c %a l1)" 640 "mode after chmod 640"
chmod 755 l1
eq "$(stat -c %a l1)" 755 "mode after chmod 755"
chmod 1777 d1renamed
eq "$(stat -c %a d1renamed)" 1777 "directory mode after chmod 1777"
chown 1234:5678 l1
eq "$(stat -c %u:%g l1)" 1234:5678 "owner after chown 1234:5678"
chgrp 42 l1
eq "$(stat -c %u:%g l1)" 1234:42 "owner after chgrp 42"
drop_caches
eq "$(stat -c %a:%u:%g l1)" 755:1234:42 "mode and owner after drop_caches"
chown 0:0 l1

step "truncate up and down"
printf 'abcdefghij' > tr
truncate -s 1048576 tr
eq "$(stat -c %s tr)" 1048576 "size after truncate up"
{ printf 'abcdefghij'; head -c $((1048576 - 10)) /dev/zero; } > /tmp/trmodel
drop_caches
cmp /tmp/trmodel tr || fail "content after truncate up is not the old bytes + zeros"
truncate -s 3 tr
eq "$(stat -c %s tr)" 3 "size after truncate down"
drop_caches
eq "$(cat tr)" abc "content after truncate down"
truncate -s 0 tr
eq "$(stat -c %s tr)" 0 "size after truncate to 0"
# shrink then grow: the cut bytes must come back as zeros
printf 'XYZXYZXYZ' > tr2
truncate -s 2 tr2
truncate -s 6 tr2
eq "$(od -An -c tr2 | tr -s ' ')" " X Y \\0 \\0 \\0 \\0" "content after shrink+grow"

step "mkdir and rmdir"
mkdir -p x/y/z
[ -d x/y/z ] || fail "x/y/z missing after mkdir -p"
rmdir x/y/z
[ ! -e x/y/z ] || fail "x/y/z still there after rmdir"
touch x/y/f
must_fail_with "not empty" rmdir x/y
must_fail_with "exists" mkdir x
rm -rf x
[ ! -e x ] || fail "x still there after rm -rf"

step "special files are refused (MKNOD)"
must_fail_with "mkfifo" mkfifo fifo
must_fail_with "mknod" mknod cdev c 1 3
[ ! -e fifo ] && [ ! -e cdev ] || fail "a refused MKNOD left a name behind"

step "directory rename over an empty and a non-empty directory"
mkdir e1 e2 e3
touch e1/in-e1 e3/in-e3
mv -T e1 e2
[ -e e2/in-e1 ] || fail "e2/in-e1 missing after renaming e1 over empty e2"
[ ! -e e1 ] || fail "e1 still exists after mv -T e1 e2"
must_fail_with e3 mv -T e2 e3
[ -e e2/in-e1 ] && [ -e e3/in-e3 ] || fail "a failed rename over a non-empty directory changed something"
must_fail_with e3 mv -T l1 e3
rm -rf e2 e3

step "exclusive create (O_EXCL)"
( set -C; echo first > excl )
must_fail_with "cannot overwrite existing file" bash -c 'set -C; echo second > excl'
eq "$(cat excl)" first "excl content"
eq "$(stat -c %a excl)" 644 "mode of a file made by O_EXCL create (umask 022)"
age=$(( $(date +%s) - $(stat -c %Y excl) ))
[ "$age" -ge -300 ] && [ "$age" -le 300 ] || \
    fail "mtime of the O_EXCL-created file is $(stat -c %y excl) (the create verifier leaked?)"

step "timestamps"
touch -m -d @1600000000 l1
touch -a -d @1500000000 l1
drop_caches
eq "$(stat -c %Y l1)" 1600000000 "mtime after touch -m"
eq "$(stat -c %X l1)" 1500000000 "atime after touch -a"
touch -d '2001-02-03 04:05:06.123456789' l1
drop_caches
eq "$(stat -c %y l1 | cut -c1-19)" "2001-02-03 04:05:06" "mtime after touch -d with nanoseconds"
before=$(stat -c %Y l1)
echo x >> l1
drop_caches
[ "$(stat -c %Y l1)" -gt "$before" ] || fail "mtime did not move forward on write"

step "file names: 255 bytes work, 256 are refused"
n255=$(printf 'n%.0s' $(seq 1 255))
echo ok > "$n255"
eq "$(cat "$n255")" ok "content of the 255-byte name"
must_fail_with "File name too long" bash -c "echo x > ${n255}x"
rm "$n255"

step "sparse file"
printf 'tail' | dd of=sparse bs=1 seek=$((100 * 1024 * 1024)) conv=notrunc status=none
eq "$(stat -c %s sparse)" $((100 * 1024 * 1024 + 4)) "size of the sparse file"
drop_caches
eq "$(dd if=sparse bs=1M skip=50 count=1 status=none | tr -d '\0' | wc -c)" 0 "bytes in the hole"
eq "$(tail -c 4 sparse)" tail "bytes after the hole"
rm sparse

step "mmap write"
head -c 65536 /dev/urandom > mm
python3 - <<'PY'
import mmap, os
fd = os.open("mm", os.O_RDWR)
m = mmap.mmap(fd, 65536)
m[100:105] = b"MMAP!"
m[65530:65536] = b"ENDEND"
m.flush()
m.close()
os.close(fd)
PY
drop_caches
eq "$(dd if=mm bs=1 skip=100 count=5 status=none)" "MMAP!" "bytes written through mmap"
eq "$(tail -c 6 mm)" ENDEND "last bytes written through mmap"

step "rm of an open file (silly rename)"
printf 'still readable\n' > open.txt
exec 3< open.txt
rm open.txt
[ ! -e open.txt ] || fail "open.txt still visible after rm"
eq "$(cat <&3)" "still readable" "content read through the fd after rm"
silly() { ls -a > /tmp/ls-a.out; grep '^\.nfs' /tmp/ls-a.out || true; }
[ -n "$(silly)" ] || fail "no .nfs* silly-renamed file while the removed file is open"
exec 3<&-
for _ in $(seq 1 50); do
    [ -n "$(silly)" ] || break
    sleep 0.2
done
[ -z "$(silly)" ] || fail "silly-renamed file left behind after close: $(silly)"

step "ls -la sizes"
mkdir sizes
for n in 0 1 4095 4096 4097 65537 1048577; do
    head -c $n /dev/urandom > sizes/s_$n
done
drop_caches
ls -la sizes > /tmp/ls.out
cat /tmp/ls.out
for n in 0 1 4095 4096 4097 65537 1048577; do
    eq "$(awk -v f=s_$n '$NF == f {print $5}' /tmp/ls.out)" $n "ls -la size of s_$n"
done
eq "$(grep -c ' s_' /tmp/ls.out)" 7 "number of s_* entries listed"
eq "$(awk '$NF == "." || $NF == ".." {c++} END {print c}' /tmp/ls.out)" 2 "'.' and '..' entries"

step "directory with many entries"
# 1000 long names: listing takes several READDIRPLUS replies, and the removal
# unlinks entries between getdents calls, so the server's cookies must stay
# valid while the directory shrinks (or entries are skipped)
mkdir many
cd many
for i in $(seq -w 1 1000); do     # stops at the first error (set -e)
    : > "entry-with-a-fairly-long-name-to-fill-readdir-pages-and-getdents-$i"
done
cd ..
drop_caches
eq "$(ls many | wc -l)" 1000 "entries listed by ls"
eq "$(ls many | sort -u | wc -l)" 1000 "distinct entries listed by ls"
eq "$(find many -type f | wc -l)" 1000 "entries found by find"
# unlink each entry as the listing returns it (readdir and remove interleaved)
eq "$(python3 -c '
import os
n = 0
for e in os.scandir("many"):
    os.unlink(e.path)
    n += 1
print(n)')" 1000 "entries seen while removing during the listing"
eq "$(ls -A many | wc -l)" 0 "entries left after removing during the listing"
rmdir many
[ ! -e many ] || fail "many still there after rmdir"

step "df"
df -P -B1 "$M" | tee /tmp/df.out
read -r _ total used avail _ < <(tail -1 /tmp/df.out)
[ "$total" -gt 0 ] || fail "df total is $total"
[ "$avail" -le "$total" ] || fail "df available $avail > total $total"
[ "$used" -le "$total" ] || fail "df used $used > total $total"
if [ -n "${KS_EXPECT_TOTAL:-}" ]; then
    eq "$total" "$KS_EXPECT_TOTAL" "df total (the quota)"
fi
df -P -i "$M"
read -r _ itotal _ < <(df -P -i "$M" | tail -1)
[ "$itotal" -gt 0 ] || fail "df -i total is $itotal"
if [ -n "${KS_EXPECT_ITOTAL:-}" ]; then
    eq "$itotal" "$KS_EXPECT_ITOTAL" "df -i total (the inode quota)"
fi

step "leave files for the host"
hostcheck "$B" hello.txt hello.txt
hostcheck "$B" payload.bin payload.bin
hostcheck "$B" patch.bin patch.bin
workload_ok smoke
