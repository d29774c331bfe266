#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# restart.sh BUCKET: the kernel client keeps working across server restarts and S3 changes.
#
# Needs the host test to restart the server on request (/host is writable:
# `host_request restart-term` asks for a clean stop + start, `host_request
# restart-kill` for kill -9 + start, same ports and data). For each kind:
#  - before: a file written and fsynced (committed), a file open for reading,
#    a file with writes not yet synced (the client holds them as UNSTABLE or
#    dirty), a directory listing cached;
#  - after: the file handles the client already holds still work (no ESTALE),
#    the open file reads the same bytes, fsync of the unsynced file succeeds
#    (the client resends when the write verifier changed) and every byte reads
#    back after drop_caches, new files can be made, and the listing is complete.
# Then (`host_request s3-changes`) the host changes the bucket over S3 while the
# client has it mounted; the client must see the new, replaced and deleted
# objects when it opens them.
. /host/lib.sh
B=${1:?usage: restart.sh BUCKET}

step "mkdir bucket"
mkdir "$B"
cd "$B"
mkdir dir
for i in $(seq 1 50); do echo "$i" > "dir/f$i"; done

# nfsops OP...: how many of each NFS operation this mount has sent so far
nfsops() {
    local op out=
    for op in "$@"; do
        out+="$op=$(awk -v o="$op:" '$1 == o {print $2; exit}' /proc/self/mountstats) "
    done
    echo "$out"
}
for kind in term kill; do
    step "before $kind restart: committed, open and unsynced files"
    head -c $((4 * 1024 * 1024 + 11)) /dev/urandom > /tmp/committed.$kind
    cp /tmp/committed.$kind committed.$kind
    sync
    exec 5< committed.$kind
    head -c $((6 * 1024 * 1024 + 5)) /dev/urandom > /tmp/unsynced.$kind
    exec 6> unsynced.$kind
    ops0=$(nfsops WRITE COMMIT)
    cat /tmp/unsynced.$kind >&6    # no fsync
    ls dir > /dev/null
    # send the dirty pages as UNSTABLE WRITEs and wait for the replies without an
    # fsync (the client may still COMMIT on its own; the counts show what it did)
    python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
# SYNC_FILE_RANGE_WRITE (2) | SYNC_FILE_RANGE_WAIT_AFTER (4)
if libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(0), 6) != 0:
    sys.exit("sync_file_range: " + os.strerror(ctypes.get_errno()))' unsynced.$kind
    echo "WRITE/COMMIT RPCs before the unsynced write: $ops0, now: $(nfsops WRITE COMMIT)"

    step "server restart ($kind)"
    host_request restart-$kind

    step "after $kind restart: handles held by the client still work"
    eq "$(stat -c %s committed.$kind)" $((4 * 1024 * 1024 + 11)) "size of committed.$kind"
    eq "$(sha256sum <&5)" "$(sha256sum < /tmp/committed.$kind)" "read through the fd opened before"
    exec 5<&-
    eq "$(cat dir/f7)" 7 "dir/f7"

    step "after $kind restart: unsynced writes reach the server"
    sync unsynced.$kind || fail "fsync of unsynced.$kind failed"
    exec 6>&-
    drop_caches
    cmp /tmp/unsynced.$kind unsynced.$kind || fail "unsynced.$kind differs after the restart"
    cmp /tmp/committed.$kind committed.$kind || fail "committed.$kind differs after the restart"

    step "after $kind restart: create, list, remove"
    echo "after $kind" > new.$kind
    eq "$(cat new.$kind)" "after $kind" "new.$kind"
    eq "$(ls dir | wc -l)" 50 "entries in dir"
    rm dir/f1
    echo 1 > dir/f1
done

step "S3 changes while mounted (seen on open: close-to-open revalidation)"
cat new.term > /dev/null         # cached in the client
cat committed.term > /dev/null
host_request s3-changes          # host: PUT from-s3/new.txt, overwrite committed.term, DELETE new.term
eq "$(cat from-s3/new.txt)" "made over S3" "from-s3/new.txt (PUT over S3)"
eq "$(sha256sum < committed.term | cut -d' ' -f1)" "$(cat /host/expect.committed.term)" \
    "committed.term after an S3 PUT replaced it (same size)"
must_fail_with "No such file" cat new.term
drop_caches
eq "$(ls from-s3)" new.txt "listing of from-s3"
eq "$(sha256sum < committed.term | cut -d' ' -f1)" "$(cat /host/expect.committed.term)" \
    "committed.term after drop_caches"
[ ! -e new.term ] || fail "new.term (deleted over S3) still exists after drop_caches"

step "leave files for the host"
hostcheck "$B" committed.kill committed.kill
hostcheck "$B" unsynced.term unsynced.term
hostcheck "$B" unsynced.kill unsynced.kill
workload_ok restart
