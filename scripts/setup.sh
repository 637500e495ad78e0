#!/usr/bin/env bash
# Installs what opsight needs on a fresh Debian 12 machine, skipping what is already there:
#   scripts/setup.sh build   Debian packages to build the C++ core and the CLI
#   scripts/setup.sh test    + the fuzzing/formatting tools and the Python test environment
# The Python environment is .venv/ with the pinned packages of requirements/*.txt (torch is
# large: pip's cache makes later installs fast).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-build}"

build_packages=(cmake ninja-build g++ pkg-config libsimdjson-dev nlohmann-json3-dev libcli11-dev
  libfmt-dev libxxhash-dev libsqlite3-dev libzstd-dev libgtest-dev libbenchmark-dev python3-venv
  libcpp-httplib-dev zlib1g-dev libdeflate-dev librdkafka-dev libgrpc++-dev)
# clang's runtime: ASan, libFuzzer; openssl: the TLS test's certificate; chromium: the web
# UI's browser tests (driven by playwright-core, which downloads no browser of its own).
test_packages=(clang clang-format libclang-rt-14-dev openssl chromium)

packages=("${build_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}")

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The web UI (web/) is built with Node.js 20 or newer and npm (make web).
node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || true)
if [ -z "$node_major" ] || [ "$node_major" -lt 20 ] || ! command -v npm > /dev/null; then
  echo "setup: the web UI needs Node.js 20 or newer with npm (found: $(node --version 2>/dev/null || echo none));" \
    "install it from https://nodejs.org or your distribution's NodeSource packages" >&2
  exit 1
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
requirements=requirements/base.txt
[ "$mode" = test ] && requirements=requirements/test.txt
stamp=.venv/.installed-$(basename "$requirements" .txt)-$(cat requirements/*.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages from $requirements"
  .venv/bin/python -m pip install -q -r "$requirements"
  touch "$stamp"
fi
