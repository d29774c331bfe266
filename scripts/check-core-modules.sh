#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check the order of the core's sub-modules (core/core_int.h):
#
#   ns      core_ns_int.h     namespace: POSIX ops, S3 ops, uploads, lifecycle
#   data    core_data_int.h   extents, pending writes, reads and writes, cache
#   quota   core_quota_int.h  usage, limits, reservations, rename marks
#   base    core_int.h        struct core, principals, permission bits
#
# A sub-module may use its own and the ones below it, never one above:
#  - every core/*.c belongs to one sub-module (the table below; a new file
#    must be added to it) and includes exactly one core private header, its
#    sub-module's;
#  - a private header includes only private headers below its own;
#  - a core__* function is declared in the header of the sub-module whose file
#    defines it, and no file calls a function (core__* or a public core_*)
#    defined in a sub-module above its own.
# Run by scripts/check-layers.sh. Prints each offence and exits 1 if there is
# any; prints "core modules: ok" otherwise.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/core"

declare -A module=(
    [core_perm.c]=base
    [core_quota.c]=quota [core_resv.c]=quota
    [core_extent.c]=data [core_data.c]=data [core_pend.c]=data [core_cache.c]=data
    [core_zc.c]=data [core_vdata.c]=data [core_tier.c]=data
    [core_ns.c]=ns [core_posix.c]=ns [core_s3.c]=ns [core_upload.c]=ns [core_main.c]=ns
    [core_bg.c]=ns [core_version.c]=ns [core_check.c]=ns [core_cmode.c]=ns [core_prefetch.c]=ns
)
declare -A header=([base]=core_int.h [quota]=core_quota_int.h [data]=core_data_int.h
    [ns]=core_ns_int.h)
declare -A rank=([base]=0 [quota]=1 [data]=2 [ns]=3)
declare -A hmod=([core_int.h]=base [core_quota_int.h]=quota [core_data_int.h]=data
    [core_ns_int.h]=ns)
bad=0
say() {
    echo "core/$*"
    bad=1
}

# C source without comments and string literals, one line per input line.
code() {
    awk '
    BEGIN { c = 0 }
    {
        out = ""; i = 1; n = length($0)
        while (i <= n) {
            ch = substr($0, i, 1); two = substr($0, i, 2)
            if (c) { if (two == "*/") { c = 0; i += 2 } else i++; continue }
            if (two == "/*") { c = 1; i += 2; continue }
            if (two == "//") break
            if (ch == "\"") {
                i++
                while (i <= n && substr($0, i, 1) != "\"") i += substr($0, i, 1) == "\\" ? 2 : 1
                i++; out = out "\"\""; continue
            }
            out = out ch; i++
        }
        print out
    }' "$1"
}

private_includes() { # file -> the core private headers it includes
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(core[a-z_]*_int\.h\)".*/\1/p' "$1"
}

# headers: only downwards
for h in "${!hmod[@]}"; do
    for inc in $(private_includes "$h"); do
        if [ "${rank[${hmod[$inc]}]}" -ge "${rank[${hmod[$h]}]}" ]; then
            say "$h: includes $inc (${hmod[$inc]}), not below ${hmod[$h]}"
        fi
    done
done

# files: known, one private header, their own
for f in *.c; do
    m=${module[$f]:-}
    if [ -z "$m" ]; then
        say "$f: not assigned to a sub-module (add it to scripts/check-core-modules.sh)"
        continue
    fi
    incs=$(private_includes "$f" | tr '\n' ' ')
    if [ "$incs" != "${header[$m]} " ]; then
        say "$f: includes ${incs:-no private header}; a $m file includes ${header[$m]} only"
    fi
done

# what each private header declares
declare -A declared
for h in "${!hmod[@]}"; do
    declared[$h]=" $(code "$h" | grep -o '\bcore__[a-z0-9_]*(' | tr -d '(' | tr '\n' ' ')"
done

# definitions: which sub-module each non-static core function belongs to (and the
# inline ones of each header)
declare -A defmod
for h in "${!hmod[@]}"; do
    while IFS= read -r name; do
        defmod[$name]=${hmod[$h]}
    done < <(code "$h" | sed -n 's/^static inline [^(;=]*[ *]\(core_[a-z0-9_]*\)(.*/\1/p')
done
for f in "${!module[@]}"; do
    [ -f "$f" ] || continue
    while IFS= read -r name; do
        defmod[$name]=${module[$f]}
        h=${header[${module[$f]}]}
        case $name in
        core__*)
            if [[ ${declared[$h]} != *" $name "* ]]; then
                say "$f: defines $name, not declared in $h"
            fi
            ;;
        esac
    done < <(code "$f" | grep -v '^static' |
        sed -n 's/^[a-z][^(;=]*[ *]\(core_[a-z0-9_]*\)(.*/\1/p')
done

# calls: never upwards
for f in "${!module[@]}"; do
    [ -f "$f" ] || continue
    m=${module[$f]}
    while IFS= read -r name; do
        d=${defmod[$name]:-}
        [ -n "$d" ] || continue
        if [ "${rank[$d]}" -gt "${rank[$m]}" ]; then
            say "$f: ($m) calls $name, defined in the $d sub-module above it"
        fi
    done < <(code "$f" | grep -o '\bcore_[a-z0-9_]*(' | tr -d '(' | sort -u)
done

if [ $bad -ne 0 ]; then
    echo "core modules: a sub-module uses one above it (see core/core_int.h)"
    exit 1
fi
echo "core modules: ok"
