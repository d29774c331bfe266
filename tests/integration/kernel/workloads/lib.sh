# SPDX-License-Identifier: Apache-2.0
# lib.sh: helpers sourced by the guest workloads (bash, inside the nfsvm guest).
#
# The test harness copies this file into the directory shared with the guest
# (/host), so a workload starts with `. /host/lib.sh`. Every workload announces
# its steps with `step NAME`; the first failing command or check prints
#   FAIL [NAME]: what went wrong
# and exits non-zero, so the host side can tell exactly which step broke. A
# workload that gets to the end prints `WORKLOAD OK <name>`.
# Lines `HOSTCHECK <bucket> <key> <size> <sha256>` ask the host to GET the
# object over S3 after the VM has exited and compare size and SHA-256.

set -Eeuo pipefail
STEP=start
export LC_ALL=C

step() { STEP=$*; echo "== STEP $STEP"; }
fail() { echo "FAIL [$STEP]: $*"; exit 1; }
trap 'rc=$?; echo "FAIL [$STEP]: command failed (exit $rc) at line $LINENO: $BASH_COMMAND"; exit $rc' ERR

# eq ACTUAL EXPECTED WHAT
eq() { [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"; }

# drop the guest's page cache, dentries and inodes: the next read goes to the server
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# as UID GID[,SUPPLEMENTARY...] CMD...: run CMD with those credentials (AUTH_SYS
# on the wire carries exactly these ids)
as() {
    local uid=$1 gids=$2; shift 2
    local gid=${gids%%,*}
    setpriv --reuid="$uid" --regid="$gid" --groups="$gids" -- "$@"
}

# must_fail_with MESSAGE CMD...: CMD must fail and its stderr must contain MESSAGE
must_fail_with() {
    local msg=$1 err; shift
    if err=$("$@" 2>&1 >/dev/null); then
        fail "'$*' succeeded, expected failure with '$msg'"
    fi
    case $err in
        *"$msg"*) ;;
        *) fail "'$*' failed with '$err', expected '$msg'" ;;
    esac
}

# hostcheck BUCKET KEY FILE: have the host GET s3://BUCKET/KEY and compare with FILE
hostcheck() {
    echo "HOSTCHECK $1 $2 $(stat -c %s "$3") $(sha256sum < "$3" | cut -d' ' -f1)"
}

# workload_ok NAME: report success, then detach the mount ourselves. The
# harness's plain `umount` runs umount.nfs, which first asks the host's rpcbind
# (port 111) and, with passt dropping that connection silently, waits 10 s per
# boot; `umount -i` skips the helper (no MOUNT UMNT call; data is synced first).
# The NFS statistics are saved to $NFSVM_OUT/mountstats before.
workload_ok() {
    echo "WORKLOAD OK $1"
    cat /proc/self/mountstats > "${NFSVM_OUT:-/tmp}/mountstats" 2>/dev/null || true
    cd /
    sync
    if [ "${KS_FAST_UMOUNT:-1}" = 1 ] && [ -n "${NFSVM_MNT:-}" ]; then
        umount -i -l "$NFSVM_MNT" 2>/dev/null || true
    fi
}

# host_request WHAT [TIMEOUT]: ask the host test for an action (e.g. a server
# restart) through the writable share and wait until it is done
host_request() {
    local what=$1 t=${2:-120} i
    : > "/host/request.$what"
    for ((i = 0; i < t * 5; i++)); do
        [ -e "/host/done.$what" ] && return 0
        [ -e "/host/failed.$what" ] && fail "host could not do '$what': $(cat "/host/failed.$what")"
        sleep 0.2
    done
    fail "host did not answer request '$what' within ${t}s"
}
