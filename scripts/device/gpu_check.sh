#!/usr/bin/env bash
# The GPU timeline's proof (issue 27, docs/gpu.md), in one run on a GPU machine of at most
# 8 minutes: builds opsight there (CMake + the Python package, with the CUPTI collector),
# runs the collector's C++ tests on the real CUPTI, then scripts/device/gpu_proof.py (the
# kernels against torch.profiler, durations against CUDA events, overhead, CUDA graphs,
# torch.compile, NVTX). Figures land in $OUT (gpu_figures.json, the logs).
#
# The machine has CUDA 13, Python 3 with torch, nanobind, scikit-build-core, CMake, ninja
# and nvcc, and no network: the Debian -dev packages the core builds against travel with
# the working tree as build/device-prefix/ (made here by scripts/device/prepare_prefix.sh),
# passed with the device tool's carry. Usage, from this machine:
#   scripts/device/prepare_prefix.sh
#   run(command="scripts/device/gpu_check.sh", carry=["build/device-prefix"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
started=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - started )) s)"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || { echo "no GPU"; exit 2; }
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"

PREFIX=$PWD/build/device-prefix
if [ ! -d "$PREFIX/usr" ]; then
  echo "build/device-prefix is missing: run scripts/device/prepare_prefix.sh here and carry it"; exit 2
fi
# The prefix was unpacked on another machine: its pkg-config files point there.
find "$PREFIX" -name '*.pc' -exec sed -i "s|^prefix=.*|prefix=$PREFIX/usr|" {} +
export PKG_CONFIG_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$PREFIX/usr
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CPATH=$PREFIX/usr/include${CPATH:+:$CPATH}

step "configure and build the core's CUDA and session tests"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DOPSIGHT_WITH_CUDA=ON \
  -DOPSIGHT_WITH_BENCHMARKS=OFF -DOPSIGHT_WITH_KAFKA=OFF -DOPSIGHT_WITH_GRPC=OFF -DCMAKE_PREFIX_PATH="$PREFIX/usr" > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 3; }
cmake --build build/gpu -j "$(nproc)" --target opsight_cuda_tests opsight_session_tests > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 3; }
build/gpu/src/cuda/opsight_cuda_tests 2>&1 | tail -5
build/gpu/src/session/opsight_session_tests --gtest_filter='*Gpu*' 2>&1 | tail -5

step "install the Python package (scikit-build-core, CUPTI collector on)"
python3 -m venv --system-site-packages build/gpu-venv
build/gpu-venv/bin/python -m pip install -q --no-build-isolation --no-deps \
  -Ccmake.define.OPSIGHT_WITH_CUDA=ON -Ccmake.define.OPSIGHT_WITH_KAFKA=OFF -Ccmake.define.OPSIGHT_WITH_GRPC=OFF \
  -Ccmake.define.CMAKE_PREFIX_PATH="$PREFIX/usr" -Cbuild-dir=build/gpu-python . > "$OUT/pip.log" 2>&1 \
  || { tail -40 "$OUT/pip.log"; exit 4; }

step "opsight run of the demo model on CUDA, its kernel report and its Perfetto file"
( cd "$OUT" && timeout 180 "$OLDPWD/build/gpu-venv/bin/opsight" run --no-store --report none \
    -o demo-cuda.opsight -- python "$OLDPWD/scripts/device/demo_on_cuda.py" ) 2>&1 | tail -5
build/gpu-venv/bin/opsight report "$OUT/demo-cuda.opsight" --kernels --limit 15 | tee "$OUT/demo-kernels.txt"
build/gpu-venv/bin/opsight report "$OUT/demo-cuda.opsight" --kernels --format json > "$OUT/demo-kernels.json"
build/gpu-venv/bin/opsight convert "$OUT/demo-cuda.opsight" "$OUT/demo-cuda.pftrace"

step "the proof"
OUT=$OUT timeout 300 build/gpu-venv/bin/python scripts/device/gpu_proof.py
status=$?
step "done: $status failed checks; figures in $OUT/gpu_figures.json"
exit $status
