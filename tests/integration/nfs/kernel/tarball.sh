#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Extract a real source tarball ($1, a guest path) onto the NFS export and onto
# tmpfs, drop caches, and compare a manifest of both trees: type, mode, owner,
# size, mtime, symlink target, and the SHA-256 of every file.
set -euo pipefail
TB=${1:?usage: tarball.sh TARBALL}
B=ktar-$$
mkdir "$B" /tmp/ref
tar -xf "$TB" -C /tmp/ref
tar -xf "$TB" -C "$B"
sync
echo 3 > /proc/sys/vm/drop_caches
manifest() {
    (cd "$1" &&
     find . -mindepth 1 -printf '%y %U:%G %p' \( -type l -printf ' -> %l\n' \) \
         -o \( -type d -printf ' %m\n' \) -o -printf ' %m %s %T@\n' | LC_ALL=C sort &&
     find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
manifest /tmp/ref > /tmp/m-ref
manifest "$B" > /tmp/m-nfs
echo "entries: $(find "$B" | wc -l), files: $(find "$B" -type f | wc -l)"
if ! cmp -s /tmp/m-ref /tmp/m-nfs; then
    echo "MANIFEST DIFFERS"
    diff /tmp/m-ref /tmp/m-nfs | head -40
    exit 1
fi
echo "manifest lines identical: $(wc -l < /tmp/m-nfs)"
rm -rf "$B"
[ ! -e "$B" ]
echo TARBALL OK
