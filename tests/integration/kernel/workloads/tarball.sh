#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tarball.sh BUCKET TARBALL [RMDIR [FROM=TO...]]: extract a real source tree through the
# kernel client.
#
# Extracts TARBALL (a path in the guest, e.g. /host/src.tar) into bucket
# BUCKET on NFS and onto tmpfs in the guest, drops caches, and compares a
# manifest of every entry: type, mode, owner, link count, size, mtime, symlink
# target and SHA-256 of every regular file. Then removes the subtree RMDIR
# (relative to the top of the extracted tree) with rm -rf and checks it is
# gone, and renames each directory FROM to TO (the server must move the whole
# subtree, S3 key index included); the rest stays for the host to compare over S3.
. /host/lib.sh
B=${1:?usage: tarball.sh BUCKET TARBALL [RMDIR [FROM=TO...]]}
TB=${2:?usage: tarball.sh BUCKET TARBALL [RMDIR [FROM=TO...]]}
RMD=${3:-}
shift $(( $# < 3 ? $# : 3 ))
L=/tmp/local
now() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.1f\", $2-$1}"; }

# manifest DIR: one line per entry; directory sizes and link counts differ
# between filesystems and tar does not restore symlink times: not compared
manifest() {
    (cd "$1" && find . -mindepth 1 \
        \( -type d -printf '%y %m %U:%G %p\n' \) -o \
        \( -type l -printf '%y %U:%G %p -> %l\n' \) -o \
        -printf '%y %m %U:%G n=%n %s %T@ %p\n' | sort &&
     find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

step "mkdir bucket"
mkdir "$B"
cd "$B"

step "extract onto tmpfs"
mkdir -p $L
t0=$(now)
tar --numeric-owner -xf "$TB" -C $L
echo "tmpfs extract: $(el "$t0" "$(now)") s, $(find $L | wc -l) entries," \
     "$(find $L -type f | wc -l) files, $(du -sm $L | cut -f1) MiB"

step "extract onto NFS"
t0=$(now)
tar --numeric-owner -xf "$TB"
t1=$(now)
sync
echo "NFS extract: $(el "$t0" "$t1") s + sync $(el "$t1" "$(now)") s"

step "compare every entry after drop_caches"
drop_caches
t0=$(now)
manifest . > /tmp/manifest-nfs
echo "NFS manifest (read back + sha256 of every file): $(el "$t0" "$(now)") s"
manifest $L > /tmp/manifest-local
if ! cmp -s /tmp/manifest-local /tmp/manifest-nfs; then
    { diff /tmp/manifest-local /tmp/manifest-nfs || true; } | head -40
    fail "manifest differs in $({ diff /tmp/manifest-local /tmp/manifest-nfs || true; } | grep -c '^[<>]') lines"
fi
echo "manifest identical: $(wc -l < /tmp/manifest-nfs) lines"

step "ls -lR listing matches"
# directories (sizes) and symlinks (times) differ between filesystems: left out
lsr() { (cd "$1" && ls -lnR --time-style=+%s . | awk '$1 != "total" && $1 !~ /^[dl]/'); }
lsr $L > /tmp/ls-local
lsr . > /tmp/ls-nfs
if ! cmp -s /tmp/ls-local /tmp/ls-nfs; then
    { diff /tmp/ls-local /tmp/ls-nfs || true; } | head -20
    fail "ls -lnR differs"
fi

if [ -n "$RMD" ]; then
    step "rm -rf $RMD"
    [ -d "$RMD" ] || fail "$RMD is not a directory in the extracted tree"
    n=$(find "$RMD" | wc -l)
    t0=$(now)
    rm -rf "$RMD"
    echo "rm -rf of $n entries: $(el "$t0" "$(now)") s"
    [ ! -e "$RMD" ] || fail "$RMD still exists after rm -rf"
    drop_caches
    [ ! -e "$RMD" ] || fail "$RMD exists again after drop_caches"
    rm -rf "${L:?}/$RMD"
    (cd $L && find . | sort) > /tmp/names-local
    find . | sort > /tmp/names-nfs
    if ! cmp -s /tmp/names-local /tmp/names-nfs; then
        { diff /tmp/names-local /tmp/names-nfs || true; } | head -20
        fail "the entries left after rm -rf $RMD differ"
    fi
fi

for mv in "$@"; do
    from=${mv%%=*} to=${mv#*=}
    step "rename directory $from to $to"
    [ -d "$from" ] || fail "$from is not a directory in the extracted tree"
    mkdir -p "$(dirname "$to")" "$L/$(dirname "$to")"
    mv -T "$from" "$to"
    mv -T "$L/$from" "$L/$to"
    [ ! -e "$from" ] || fail "$from still exists after the rename"
    drop_caches
    # whole tree without contents, then the moved subtree with contents
    (cd $L && find . -printf '%y %m %U:%G %p\n' | sort) > /tmp/names-local
    find . -printf '%y %m %U:%G %p\n' | sort > /tmp/names-nfs
    manifest "$to" > /tmp/manifest-nfs
    manifest "$L/$to" > /tmp/manifest-local
    for f in names manifest; do
        if ! cmp -s /tmp/$f-local /tmp/$f-nfs; then
            { diff /tmp/$f-local /tmp/$f-nfs || true; } | head -20
            fail "tree differs after renaming $from to $to ($f)"
        fi
    done
done
workload_ok tarball
