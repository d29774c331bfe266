#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fresh machine to running server: install dependencies, build, start s3nfsd on
# its embedded default (data in ./s3nfs-data). It prints its endpoints and credentials.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
echo "run: checking build dependencies (scripts/deps.sh; apt-get when some are missing)" >&2
"$top/scripts/deps.sh"
echo "run: building into $top/build (scripts/build.sh; logs in build/configure.out, build/make.out)" >&2
"$top/scripts/build.sh" "$top/build" --enable-werror
echo "run: starting $top/build/s3nfsd $*" >&2
exec "$top/build/s3nfsd" "$@"
