#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its seed corpus (copied, so new inputs
# stay out of the repository; the native reader's also gets the seeds native_fuzz_seeds
# writes from the current writer), after replaying the saved regression inputs with every
# check on each (OPSIGHT_FUZZ_ALL_CHECKS: while fuzzing, the report fuzzer renders its views
# for a sample of the inputs). Any crash fails the run and leaves the crashing input in
# build/fuzz/crashes/.
#
# FUZZ_JOBS fuzzing processes (default: one per core, at most 4) share each target's working
# corpus, each picking up what the others add (libFuzzer rereads the folder); the line
# printed per target sums their executions. The corpus goes to /dev/shm where there is one:
# libFuzzer writes a file for every new or reduced input (thousands a minute at first), and
# creating them on an ext4 disk took up to 8% of a run. Measured rates: docs/performance.md,
# "Fuzzer throughput".
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
cores=$(nproc)
jobs="${FUZZ_JOBS:-$((cores < 4 ? cores : 4))}"
mkdir -p build/fuzz/crashes
work=""
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -n "$work" ]; then rm -rf "$work"; fi  # a corpus in /dev/shm holds memory
}
trap cleanup EXIT
# target:module:seed corpus:regression folder (the report fuzzer runs the analyses on what
# the Chrome JSON reader makes of its inputs, so it starts from the same seeds; the Perfetto
# reader's seeds are small files of opsight's writer and of Perfetto's own protos).
for entry in native_reader:io:native:native chrome_json_reader:io:chrome_json:chrome_json \
    pftrace_reader:io:pftrace:pftrace report:report:chrome_json:report; do
  IFS=: read -r target module corpus_name regressions <<< "$entry"
  fuzzer=build/fuzz/src/$module/${target}_fuzzer
  seeds=tests/fuzz_corpus/$corpus_name
  work=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
  cp -r "$seeds"/. "$work"/
  if [ "$target" = native_reader ]; then  # seeds of every table the writer knows, made now
    build/fuzz/src/io/native_fuzz_seeds "$work" > build/fuzz/native_seeds.log
  fi
  if [ -d tests/fuzz_regressions/$regressions ]; then
    echo "fuzz: replaying regression inputs of $target"
    OPSIGHT_FUZZ_ALL_CHECKS=1 "$fuzzer" -runs=0 tests/fuzz_regressions/$regressions >/dev/null 2>&1 || {
      echo "fuzz: a regression input crashes $target"
      OPSIGHT_FUZZ_ALL_CHECKS=1 "$fuzzer" -runs=0 tests/fuzz_regressions/$regressions; exit 1; }
  fi
  echo "fuzz: $target for ${seconds}s, $jobs process(es)"
  rm -f build/fuzz/$target.log build/fuzz/$target.*.log
  pids=()
  started=$(date +%s%N)
  for ((job = 0; job < jobs; job++)); do
    "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix=build/fuzz/crashes/${target}- "$work" > build/fuzz/$target.$job.log 2>&1 &
    pids+=($!)
  done
  failed=""
  for job in "${!pids[@]}"; do
    wait "${pids[$job]}" || failed="$failed $job"
  done
  pids=()
  elapsed_ms=$((($(date +%s%N) - started) / 1000000))
  if [ -n "$failed" ]; then
    for job in $failed; do tail -40 build/fuzz/$target.$job.log; done
    echo "fuzz: $target found a crash: see build/fuzz/crashes/"
    exit 1
  fi
  cat build/fuzz/$target.*.log | awk -v jobs="$jobs" -v ms="$elapsed_ms" '
    /stat::number_of_executed_units/ { executions += $2 }
    /stat::new_units_added/ { added += $2 }
    END { printf "stat::number_of_executed_units: %d in %.1f s (%d/s, %d process(es)) " \
                 "stat::new_units_added: %d\n", executions, ms / 1000, executions * 1000 / ms, jobs, added }'
  rm -rf "$work"
done
