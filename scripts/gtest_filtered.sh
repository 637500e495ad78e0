#!/bin/sh
# gtest_filtered.sh BINARY FILTER: runs a GoogleTest binary on the tests FILTER selects and
# fails when it selects none (a renamed test would otherwise leave `make tsan-test` green
# while checking nothing; Debian's GoogleTest 1.12 has no flag for this).
set -eu
binary=$1
filter=$2
listed=$("$binary" --gtest_list_tests --gtest_filter="$filter" | grep -c '^  ' || true)
if [ "$listed" -eq 0 ]; then
  echo "gtest_filtered.sh: $binary: no test matches --gtest_filter='$filter'" >&2
  exit 1
fi
echo "gtest_filtered.sh: $binary: $listed tests match '$filter'"
exec "$binary" --gtest_filter="$filter"
