#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fresh machine to running server: install dependencies, build, start s3nfsd on
# its embedded default (data in ./s3nfs-data). It prints its endpoints and credentials.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build" --enable-werror
exec "$top/build/s3nfsd" "$@"
