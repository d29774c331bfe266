#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fresh machine to full test run: install dependencies, build (release with
# -Werror, and ASan+UBSan), run the unit tests in both builds, the integration
# tests (real s3nfsd with stock S3 clients and libnfs; kernel NFS client via
# ../shared/nfsvm where present), the crash test and the fuzzers for a bounded
# time. Ends with one line "N passed, M failed"; exits non-zero on any failure.
#
# Env: S3NFS_FUZZ_SECONDS (default 30 per target), S3NFS_SKIP_ASAN=1, S3NFS_SKIP_FUZZ=1.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
logdir="$top/build/test-logs"
passed=0
failed=0
failures=()

note() { printf '== %s\n' "$*"; }
count_trs() { # count automake .trs results of one build dir
    local dir=$1 label=$2 p f name
    while IFS= read -r trs; do
        name=${trs#"$dir"/}; name=${name%.trs}
        if grep -q ':test-result: PASS' "$trs" || grep -q ':test-result: SKIP' "$trs"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); failures+=("$label $name")
        fi
    done < <(find "$dir/tests" -name '*.trs' 2>/dev/null | sort)
}

note "dependencies (scripts/deps.sh --test; apt-get when some are missing)"
"$top/scripts/deps.sh" --test || { echo "deps: install failed"; echo "0 passed, 1 failed"; exit 1; }

mkdir -p "$logdir"
note "build (release, -Werror; logs in build/configure.out, build/make.out)"
if ! "$top/scripts/build.sh" "$top/build" --enable-werror; then
    echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi

note "layers (#include points down the stack)"
if "$top/scripts/check-layers.sh"; then passed=$((passed + 1)); else
    failed=$((failed + 1)); failures+=("scripts/check-layers.sh"); fi

note "format (.clang-format: listed files and the lines changed since main)"
if "$top/scripts/check-format.sh"; then passed=$((passed + 1)); else
    failed=$((failed + 1)); failures+=("scripts/check-format.sh"); fi

note "unit tests (release; log: $logdir/check.out)"
before=$failed
(cd "$top/build" && make -j"$(nproc)" check >"$logdir/check.out" 2>&1)
rc=$?
count_trs "$top/build" unit
if [ $rc -ne 0 ] && [ $failed -eq $before ]; then
    failed=$((failed + 1)); failures+=("make check (release) exited $rc: see $logdir/check.out")
    grep -E 'error|Error' "$logdir/check.out" | head -10
fi
grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL)' "$logdir/check.out" | sed 's/^/   /'

if [ "${S3NFS_SKIP_ASAN:-0}" != 1 ]; then
    note "unit tests (ASan + UBSan)"
    if "$top/scripts/build.sh" "$top/build-asan" --enable-sanitizers --enable-werror; then
        before=$failed
        (cd "$top/build-asan" && ASAN_OPTIONS=detect_leaks=1 make -j"$(nproc)" check \
            >"$logdir/check-asan.out" 2>&1)
        rc=$?
        count_trs "$top/build-asan" asan
        if [ $rc -ne 0 ] && [ $failed -eq $before ]; then
            failed=$((failed + 1)); failures+=("make check (asan) exited $rc: see $logdir/check-asan.out")
        fi
        grep -E '^(PASS|FAIL|ERROR)' "$logdir/check-asan.out" | sed 's/^/   asan /'
    else
        failed=$((failed + 1)); failures+=("asan build")
    fi
fi

note "integration tests (pytest, real s3nfsd; log: $logdir/pytest.out)"
export S3NFSD_BIN="$top/build/s3nfsd" S3NFSCTL_BIN="$top/build/s3nfsctl" S3NFS_BUILD="$top/build"
ulimit -n 65536 2>/dev/null || true
/usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml="$logdir/pytest.xml" \
    "$top/tests/integration" 2>&1 | tee "$logdir/pytest.out" | tail -40
if [ -f "$logdir/pytest.xml" ]; then
    read -r pp pf < <(/usr/bin/python3 - "$logdir/pytest.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else list(r)
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
print(t - f, f)
PY
)
    passed=$((passed + pp)); failed=$((failed + pf))
    [ "$pf" -gt 0 ] && failures+=("pytest: $pf failed (see $logdir/pytest.out)")
else
    failed=$((failed + 1)); failures+=("pytest did not run")
fi

if [ "${S3NFS_SKIP_FUZZ:-0}" != 1 ] && command -v clang >/dev/null; then
    note "fuzzers (libFuzzer, ${S3NFS_FUZZ_SECONDS:-30}s each)"
    if "$top/scripts/build.sh" "$top/build-fuzz" CC=clang --enable-fuzz >/dev/null; then
        for f in "$top"/build-fuzz/tests/fuzz/fuzz_*; do
            [ -x "$f" ] || continue
            n=$(basename "$f"); corpus="$top/tests/fuzz/corpus/${n#fuzz_}"
            dict="$top/tests/fuzz/${n#fuzz_}.dict"
            mkdir -p "$logdir/fuzz-$n"
            if "$f" -max_total_time="${S3NFS_FUZZ_SECONDS:-30}" -rss_limit_mb=2048 \
                $( [ -f "$dict" ] && echo "-dict=$dict") \
                -artifact_prefix="$logdir/fuzz-$n/" "$logdir/fuzz-$n" \
                $( [ -d "$corpus" ] && echo "$corpus") >"$logdir/fuzz-$n.out" 2>&1; then
                passed=$((passed + 1)); echo "   PASS: $n"
            else
                failed=$((failed + 1)); failures+=("fuzz $n (see $logdir/fuzz-$n.out)")
                echo "   FAIL: $n"
            fi
        done
    else
        failed=$((failed + 1)); failures+=("fuzz build")
    fi
fi

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
