#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check the C format against .clang-format (docs/architecture.md, "Format").
#
# Most of the tree predates .clang-format and differs from it in a few hundred
# places; reformatting it all at once would collide with every branch in
# flight. So the check covers:
#   - in full: the files listed in scripts/format-files.txt (kept clean) and
#     every .c/.h the branch adds relative to the base;
#   - the lines a branch changes in any other .c/.h relative to the base
#     (clang-format-diff), so the tree converges as it is edited.
# The base is $S3NFS_FORMAT_BASE, else the merge base with main (nothing to
# compare on main itself). Generated and third-party code is not checked.
#
# Usage: scripts/check-format.sh [--fix]   (--fix rewrites instead of failing)
# Prints what is off and exits 1, or prints "format: ok". Without clang-format
# (scripts/deps.sh --test installs it) it prints why it skipped and exits 0.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
fix=0
[ "${1:-}" = "--fix" ] && fix=1

cf=$(command -v clang-format || true)
cfd=$(command -v clang-format-diff || command -v clang-format-diff-14 || true)
if [ -z "$cf" ] || [ -z "$cfd" ]; then
    echo "format: skipped: clang-format (and clang-format-diff) not installed;" \
         "scripts/deps.sh --test installs the clang-format package"
    exit 0
fi

if [ ! -f .clang-format ]; then
    echo "format: skipped: no .clang-format here (a release tarball): nothing to check against"
    exit 0
fi

is_ours() { # .c/.h of ours: not generated (nfs/xdr), not bundled (llhttp)
    case $1 in
        *.c | *.h) ;;
        *) return 1 ;;
    esac
    case $1 in
        nfs/xdr/* | */llhttp/* | build*/*) return 1 ;;
    esac
    [ -f "$1" ]
}

bad=0
full=()
while IFS= read -r f; do
    f=${f%%#*}; f=${f//[[:space:]]/}
    [ -n "$f" ] && is_ours "$f" && full+=("$f")
done < scripts/format-files.txt

base=${S3NFS_FORMAT_BASE:-}
have_git=0
if git rev-parse --git-dir >/dev/null 2>&1; then
    have_git=1
    [ -n "$base" ] || base=$(git merge-base HEAD main 2>/dev/null || true)
fi
if [ $have_git = 1 ] && [ -n "$base" ]; then
    while IFS= read -r f; do is_ours "$f" && full+=("$f"); done \
        < <(git diff --name-only --diff-filter=A "$base" -- '*.c' '*.h')
else
    echo "format: no git base (not a checkout, or no branch main): checking the listed files only"
fi

declare -A seen
for f in "${full[@]}"; do
    [ -n "${seen[$f]:-}" ] && continue
    seen[$f]=1
    if [ $fix = 1 ]; then
        "$cf" -i --style=file "$f"
    elif ! "$cf" --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" -; then
        bad=1
    fi
done

if [ $have_git = 1 ] && [ -n "$base" ]; then
    changed=()
    while IFS= read -r f; do
        is_ours "$f" && [ -z "${seen[$f]:-}" ] && changed+=("$f")
    done < <(git diff --name-only --diff-filter=M "$base" -- '*.c' '*.h')
    if [ ${#changed[@]} -gt 0 ]; then
        if [ $fix = 1 ]; then
            git diff -U0 --no-color "$base" -- "${changed[@]}" | "$cfd" -p1 -i -style=file
        else
            out=$(git diff -U0 --no-color "$base" -- "${changed[@]}" | "$cfd" -p1 -style=file)
            if [ -n "$out" ]; then
                printf '%s\n' "$out"
                bad=1
            fi
        fi
    fi
fi

if [ $bad -ne 0 ]; then
    echo "format: differs from .clang-format (scripts/check-format.sh --fix rewrites it)"
    exit 1
fi
echo "format: ok"
