#!/usr/bin/env bash
# Runs every benchmark program of the release build and prints the figures
# docs/performance.md quotes: each hot path as a ratio to its baseline from the same run.
#   scripts/run_benchmarks.sh [extra Google Benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/release/benchmarks
mkdir -p "$out"
# Every *_benchmark.cc program: the recorder, readers and writers, analyses, metric
# sources, exporters and the UI server's timeline index.
for program in src/record/opsight_record_benchmarks src/io/opsight_io_benchmarks \
  src/analyze/opsight_analyze_benchmarks src/collect/opsight_collect_benchmarks \
  src/export/opsight_export_benchmarks src/server/opsight_server_benchmarks; do
  name=$(basename "$program")
  echo "bench: $name" >&2
  build/release/$program --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@" > /dev/null
done
.venv/bin/python scripts/benchmark_table.py "$out"/*.json
