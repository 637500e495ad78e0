#!/usr/bin/env bash
# Makes build/device-prefix/: the Debian 12 packages the core builds against (headers, CMake
# and pkg-config files, shared libraries), unpacked with dpkg -x, for a GPU machine that has
# no network (scripts/device/gpu_check.sh; the device tool carries the folder, 64 MiB at
# most). pkg-config files are rewritten to point into the prefix.
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=$PWD/build/device-prefix
packages=(libsimdjson-dev libsimdjson14 nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9
  libxxhash-dev libxxhash0 libsqlite3-dev libsqlite3-0 libzstd-dev libzstd1 libgtest-dev
  libcpp-httplib-dev libcpp-httplib0.11 zlib1g-dev zlib1g libbrotli-dev libbrotli1 libssl-dev libssl3)
rm -rf "$prefix" build/device-debs
mkdir -p "$prefix" build/device-debs
(cd build/device-debs && apt-get download "${packages[@]}" > /dev/null)
for deb in build/device-debs/*.deb; do dpkg -x "$deb" "$prefix"; done
find "$prefix" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$prefix/usr|" {} +
# The prefix moves with the working tree: gpu_check.sh points CMake and pkg-config at it.
rm -rf "$prefix/usr/share/doc" "$prefix/usr/share/man" build/device-debs
du -sh "$prefix"
