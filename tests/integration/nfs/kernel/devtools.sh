#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Everyday tools on the kernel client: git (lock files renamed into place,
# packed objects, fsync), make + gcc (many small writes, rename of outputs),
# sqlite3 (journal, fsync, byte-range writes), python mmap (page-cache writes
# flushed by msync), and find/du/cp -a of the result.
set -euxo pipefail
B=kdev-$$
mkdir "$B"
cd "$B"
git init -q repo
cd repo
git config user.email t@example.com
git config user.name tester
for i in $(seq 1 40); do
    mkdir -p "dir$((i % 5))"
    printf 'file %d\n%s\n' "$i" "$(head -c 300 /dev/urandom | base64)" > "dir$((i % 5))/f$i.txt"
done
git add -A
git commit -qm first
echo change >> dir1/f1.txt
git mv dir2 moved
git commit -qam second
git gc -q
git fsck --strict
[ "$(git log --oneline | wc -l)" = 2 ]
git status --porcelain | wc -l | grep -qx 0
cd ..
cat > hello.c <<'C'
#include <stdio.h>
int main(void) { puts("hello from nfs"); return 0; }
C
printf 'hello: hello.o\n\tcc -o $@ $^\nhello.o: hello.c\n\tcc -c -O1 -o $@ $<\n' > Makefile
make -s
[ "$(./hello)" = "hello from nfs" ]
touch hello.c
make -s
sqlite3 db.sqlite 'PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);'
for i in $(seq 1 20); do
    sqlite3 db.sqlite "BEGIN; $(for j in $(seq 1 50); do printf "INSERT INTO t(v) VALUES('%s');" "r$i-$j"; done) COMMIT;"
done
[ "$(sqlite3 db.sqlite 'SELECT count(*) FROM t')" = 1000 ]
[ "$(sqlite3 db.sqlite 'PRAGMA integrity_check')" = ok ]
python3 - <<'PY'
import mmap, os
fd = os.open("mm.bin", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 1 << 20)
m = mmap.mmap(fd, 1 << 20)
for i in range(0, 1 << 20, 4096):
    m[i:i + 8] = i.to_bytes(8, "little")
m.flush()
m.close()
os.close(fd)
PY
sync
echo 3 > /proc/sys/vm/drop_caches
python3 - <<'PY'
with open("mm.bin", "rb") as f:
    data = f.read()
assert len(data) == 1 << 20
for i in range(0, 1 << 20, 4096):
    assert int.from_bytes(data[i:i + 8], "little") == i, i
PY
cp -a repo repo-copy
diff -r repo repo-copy
du -sk . > /dev/null
cd ..
rm -rf "$B"
[ ! -e "$B" ]
echo DEVTOOLS OK
