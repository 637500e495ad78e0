#!/usr/bin/env bash
# Creates the benchmark environment .venv-bench/ (never the project's .venv/) for
# benchmarks/python/tracer_overhead.py: the pinned tracers of requirements/bench.txt
# (hiq-python, VizTracer; cProfile is the standard library's) and opsight built from this
# working tree.
#
#   scripts/setup_bench_env.sh && .venv-bench/bin/python benchmarks/python/tracer_overhead.py
#
# Re-running is cheap: the packages are installed again only when requirements/bench.txt
# changes; opsight is always reinstalled from the working tree (an incremental build in
# build/bench-python/, apart from the project's own build/python/, so that a benchmark
# build never disturbs the project's). PYTHON picks the interpreter (default python3;
# the pins were chosen for CPython 3.11). Needs g++ (py-itree compiles at install) and
# what scripts/setup.sh build installs (CMake, Ninja, the core's libraries).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=.venv-bench
if [ ! -x "$venv/bin/python" ]; then
  echo "setup_bench_env: creating $venv with $("$python" -V 2>&1)"
  "$python" -m venv "$venv"
fi

stamp="$venv/.installed-bench-$(sha256sum requirements/bench.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup_bench_env: installing requirements/bench.txt"
  "$venv/bin/python" -m pip install -q -r requirements/bench.txt
  rm -f "$venv"/.installed-bench-*
  touch "$stamp"
fi

echo "setup_bench_env: building and installing opsight from $(pwd)"
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
  -C build-dir='build/bench-python/{wheel_tag}' .

"$venv/bin/python" - <<'PY'
import importlib.metadata as metadata
import platform
names = ["opsight", "hiq-python", "py-itree", "viztracer"]
print("setup_bench_env: Python", platform.python_version(), "|",
      ", ".join(f"{name} {metadata.version(name)}" for name in names))
PY
