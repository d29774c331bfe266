#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs crash_core (SIGKILL at random moments, restart, verify acked writes,
# versions and the store check) in a temporary directory for CRASH_SECONDS
# (default 40).
set -e
dir=$(mktemp -d /tmp/crash-core-XXXXXX)
trap 'rm -rf "$dir"' EXIT
exe=$(dirname "$0")/crash_core
[ -x "$exe" ] || exe=./tests/unit/core/crash_core
"$exe" "$dir" "${CRASH_SECONDS:-40}" 2>"$dir/stderr.log" || {
    grep -v ' INFO ' "$dir/stderr.log" | tail -50 >&2
    exit 1
}
