#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its seed corpus (copied, so new inputs
# stay out of the repository; the native reader's also gets the seeds native_fuzz_seeds
# writes from the current writer), after replaying the saved regression inputs. Any crash
# fails the run and leaves the crashing input in build/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
mkdir -p build/fuzz/crashes
# target:module:seed corpus:regression folder (the report fuzzer runs the analyses on what
# the Chrome JSON reader makes of its inputs, so it starts from the same seeds).
for entry in native_reader:io:native:native chrome_json_reader:io:chrome_json:chrome_json \
    report:report:chrome_json:report; do
  IFS=: read -r target module corpus_name regressions <<< "$entry"
  fuzzer=build/fuzz/src/$module/${target}_fuzzer
  seeds=tests/fuzz_corpus/$corpus_name
  work=$(mktemp -d)
  cp -r "$seeds"/. "$work"/
  if [ "$target" = native_reader ]; then  # seeds of every table the writer knows, made now
    build/fuzz/src/io/native_fuzz_seeds "$work" > build/fuzz/native_seeds.log
  fi
  if [ -d tests/fuzz_regressions/$regressions ]; then
    echo "fuzz: replaying regression inputs of $target"
    "$fuzzer" -runs=0 tests/fuzz_regressions/$regressions >/dev/null 2>&1 || {
      echo "fuzz: a regression input crashes $target"; "$fuzzer" -runs=0 tests/fuzz_regressions/$regressions; exit 1; }
  fi
  echo "fuzz: $target for ${seconds}s"
  if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix=build/fuzz/crashes/${target}- "$work" > build/fuzz/$target.log 2>&1; then
    tail -40 build/fuzz/$target.log
    echo "fuzz: $target found a crash: see build/fuzz/crashes/"
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" build/fuzz/$target.log | tr '\n' ' '
  echo
  rm -rf "$work"
done
