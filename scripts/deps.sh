#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what s3nfs needs to build, run and test on Debian 12 (as root, or via sudo).
# Usage: scripts/deps.sh [--test|--bench]
#   --test adds the S3/NFS clients and tools the tests use; --bench what bench/ runs against
set -euo pipefail

BUILD_PKGS="build-essential autoconf automake libtool pkg-config libevent-dev libssl-dev
liblmdb-dev libtirpc-dev liburing-dev node-llhttp libjansson-dev libcmocka-dev rpcsvc-proto
libcurl4-openssl-dev zlib1g-dev"
TEST_PKGS="python3 python3-pytest python3-boto3 python3-prometheus-client awscli s3cmd rclone
python3-yaml libnfs-dev libnfs-utils fio nginx-light clang clang-format libclang-rt-14-dev curl
procps rpcbind qemu-system-x86 mmdebstrap passt e2fsprogs xz-utils ceph-mon ceph-osd radosgw
ceph-common chromium"
BENCH_PKGS="wrk fio nginx-light nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-dev python3-boto3"

pkgs="$BUILD_PKGS"
[ "${1:-}" = "--test" ] && pkgs="$pkgs $TEST_PKGS"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs $BENCH_PKGS"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
