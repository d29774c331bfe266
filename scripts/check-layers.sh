#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check that every #include "..." of the daemon's sources points down the stack
# (docs/architecture.md):
#
#   server                          composition root: may use everything below
#   s3api  nfs  admin               front ends: never each other
#   tenants
#   qos
#   core
#   tier
#   meta
#   store
#   sigv4
#   common                          includes nothing of ours
#
# tools/s3nfsctl is a client: it may use sigv4 and common only. A header is
# found by its basename (basenames are unique across the tree); headers that
# are generated (nfs/xdr) belong to nfs. A private header (NAME_int.h) may be
# included only from its own folder. System headers of an engine stay with the
# layer that hides it: <lmdb.h> only under meta/. Then checks the order of the
# core's sub-modules (scripts/check-core-modules.sh). Prints each offending
# include and exits 1 if there is any; prints "layers: ok" otherwise.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

rank() { # folder -> rank (lower = higher in the stack); equal ranks may not mix
    case $1 in
        server) echo 0 ;;
        s3api | nfs | admin) echo 1 ;;
        tenants) echo 2 ;;
        qos) echo 3 ;;
        core) echo 4 ;;
        tier) echo 5 ;;
        meta) echo 6 ;;
        store) echo 7 ;;
        sigv4) echo 8 ;;
        common) echo 9 ;;
        *) echo "" ;;
    esac
}
folders="server s3api nfs admin tenants qos core tier meta store sigv4 common"

declare -A home
for d in $folders; do
    [ -d "$d" ] || continue
    while IFS= read -r h; do home[$(basename "$h")]=$d; done < <(find "$d" -name '*.h' -o -name '*.x')
done
for x in nfs/xdr/*.x; do [ -e "$x" ] && home[$(basename "${x%.x}").h]=nfs; done

bad=0
check_file() { # file, its folder, allowed-folder predicate
    local f=$1 from=$2 inc to
    while IFS= read -r inc; do
        to=${home[$(basename "$inc")]:-}
        [ -n "$to" ] || continue          # system or unknown header: not ours
        [ "$to" = "$from" ] && continue
        case $(basename "$inc") in
        *_int.h)
            echo "$f: includes \"$inc\", private to $to/"
            bad=1
            continue
            ;;
        esac
        if ! allowed "$from" "$to"; then
            echo "$f: includes \"$inc\" ($to/) from $from/: points up or across the stack"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    # system headers that belong to one layer
    if [ "$from" != meta ] &&
        grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*<lmdb\.h>' "$f"; then
        echo "$f: includes <lmdb.h> from $from/: only meta/ may (the engine stays behind meta.h)"
        bad=1
    fi
}
allowed() { # from to
    local rf rt
    if [ "$1" = tools ]; then
        [ "$2" = sigv4 ] || [ "$2" = common ]
        return
    fi
    rf=$(rank "$1"); rt=$(rank "$2")
    [ "$rt" -gt "$rf" ]
}

for d in $folders; do
    [ -d "$d" ] || continue
    while IFS= read -r f; do check_file "$f" "$d"; done < <(find "$d" -name '*.c' -o -name '*.h')
done
while IFS= read -r f; do check_file "$f" tools; done < <(find tools -name '*.c' -o -name '*.h')

if [ $bad -ne 0 ]; then
    echo "layers: an #include points up or across the stack (see docs/architecture.md)"
fi
# the order of the core's own sub-modules
"$top/scripts/check-core-modules.sh" || bad=1
[ $bad -eq 0 ] || exit 1
echo "layers: ok"
