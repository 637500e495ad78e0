# opsight: the two commands of the README, and the pieces they are made of.
#   make demo   install what is missing, build, trace the bundled example, print its report
#   make test   install what is missing, build, run every test (unit, sanitizers, fuzzers,
#               integration with the real PyTorch and ONNX Runtime profilers and the real
#               servers that traces, metrics and logs are exported to)
# After either, .venv/bin/opsight is the CLI and `import opsight` works in .venv/bin/python.

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 30
VENV := .venv
CTEST := ctest --output-on-failure --timeout 300 -j $(JOBS)

.PHONY: demo test sanitizer-suites python-web-suites setup-build setup-test build web install asan-test tsan-test fuzz-test python-test web-test bench bench-python bench-ui format format-check clean

# The demo builds only what it runs (the library, the command, the C++ demo program and the
# Python modules; no test or benchmark program), in build/release as make install does, so
# that a fresh machine's `make demo` compiles the core once and nothing else.
DEMO_TARGETS := opsight opsight_cli opsight_quick_start
demo: setup-build web
	cmake --preset release
	cmake --build --preset release -j $(JOBS) --target $(DEMO_TARGETS)
	cmake --install build/release --prefix $(VENV) --component Unspecified > /dev/null
	$(VENV)/bin/python -m pip install -q --no-build-isolation $(PIP_REUSE_RELEASE) \
	  -C build.targets="$(subst $(eval) ,;,$(DEMO_TARGETS) opsight_python_modules)" .
	$(VENV)/bin/opsight demo

# After the release suites, two independent chains at once: the sanitizer and fuzz builds
# (compiling, at low priority: nice) beside the Python and browser suites (which spend much
# of their time waiting on servers and subprocesses). Each chain's output is printed whole
# when it ends (--output-sync), so the two never interleave.
test: setup-test format-check install
	$(CTEST) --test-dir build/release
	$(MAKE) -j 2 --output-sync=recurse sanitizer-suites python-web-suites
	@echo "make test: all suites passed"

sanitizer-suites:
	nice -n 15 $(MAKE) -j 1 asan-test tsan-test fuzz-test

python-web-suites:
	$(MAKE) -j 1 python-test web-test

setup-build:
	scripts/setup.sh build

# + the real servers of the export tests (Jaeger, Zipkin, Prometheus, Pushgateway,
# VictoriaLogs, Kafka), built or fetched once into ~/.cache/opsight/servers/ (docs/servers.md).
setup-test:
	scripts/setup.sh test
	scripts/servers/install.sh

build: setup-build
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

# The web UI (web/, docs/ui.md): npm packages pinned by web/package-lock.json, installed
# with npm ci (again only when the lock changes; cache in ~/.cache/opsight/npm; no browser
# is downloaded), then type-checked and built by Vite into web/dist/.
NPM_CACHE ?= $(HOME)/.cache/opsight/npm
web:
	@if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then \
	  echo "web: npm ci"; cd web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --cache $(NPM_CACHE) --no-audit --no-fund; fi
	cd web && npm run --silent build

# The C++ library, headers, CMake package and demo program under .venv/ (for C++ users),
# then the Python package (pip install ., with the built web UI as opsight/web/), whose
# console script is .venv/bin/opsight. The core is compiled once: scikit-build-core builds
# the package in build/release itself, with the release preset's build type and options, so
# it adds only the Python modules (the release preset puts the install directories back).
PIP_REUSE_RELEASE := -C build-dir=build/release -C cmake.build-type=RelWithDebInfo -C install.strip=true \
  -C cmake.define.OPSIGHT_WITH_TESTS=ON -C cmake.define.OPSIGHT_WITH_BENCHMARKS=ON
install: build web
	cmake --install build/release --prefix $(VENV) --component Unspecified > /dev/null
	$(VENV)/bin/python -m pip install -q --no-build-isolation $(PIP_REUSE_RELEASE) .
	@echo "installed $(VENV)/bin/opsight and the opsight Python package"

# ASan+UBSan over every C++ test.
asan-test:
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	$(CTEST) --test-dir build/asan

# TSan over the recorder's multi-thread tests, the metric sources (sampler, peaks), the
# control watcher of opsight ctl (in the session tests), the Chrome JSON reader's two threads,
# and the UI server's cache of loaded runs (its HTTP tests stay out: TSan reports races
# inside Debian's uninstrumented libcpp-httplib.so that it cannot see synchronized).
tsan-test:
	cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS) --target opsight_record_tests opsight_session_tests opsight_collect_tests opsight_io_tests opsight_server_tests
	TSAN_OPTIONS=halt_on_error=1 build/tsan/src/record/opsight_record_tests
	TSAN_OPTIONS=halt_on_error=1 build/tsan/src/session/opsight_session_tests
	TSAN_OPTIONS=halt_on_error=1 build/tsan/src/collect/opsight_collect_tests
	TSAN_OPTIONS=halt_on_error=1 scripts/gtest_filtered.sh build/tsan/src/io/opsight_io_tests 'ChromeJsonReader.HelperThread*'
	TSAN_OPTIONS=halt_on_error=1 scripts/gtest_filtered.sh build/tsan/src/server/opsight_server_tests 'TraceCache.*'

# libFuzzer over the native, Chrome JSON and Perfetto readers and the reports, FUZZ_SECONDS
# each, from the seed corpus. Only the fuzzers and what they link are compiled.
FUZZ_TARGETS := native_reader_fuzzer chrome_json_reader_fuzzer pftrace_reader_fuzzer report_fuzzer native_fuzz_seeds
fuzz-test:
	cmake --preset fuzz
	cmake --build --preset fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	scripts/run_fuzzers.sh $(FUZZ_SECONDS)

# Two runs: each suite has its own conftest.py, imported as `conftest` by its tests.
# OPSIGHT_REQUIRE names what setup installed: a test needing one of them fails instead of
# skipping when it is missing; any other skip is listed with its reason (-rs).
OPSIGHT_REQUIRE ?= torch,transformers,matplotlib,onnxruntime,onnx,numpy,pandas,perfetto,fastapi,starlette,uvicorn,flask,waitress,requests,httpx,ray,opentelemetry.proto,opentelemetry.propagators.b3,openssl,jaeger,otelcol,zipkin,prometheus,pushgateway,victorialogs,kafka
python-test:
	OPSIGHT_REQUIRE=$(OPSIGHT_REQUIRE) $(VENV)/bin/python -m pytest -q -rs python/tests
	OPSIGHT_REQUIRE=$(OPSIGHT_REQUIRE) $(VENV)/bin/python -m pytest -q -rs tests/integration

# The web UI (after make install): Vitest unit tests, then the browser tests (web/e2e/):
# the installed `opsight ui` on runs recorded by the test, in Debian's Chromium through
# playwright-core.
web-test:
	cd web && npx vitest run
	cd web && OPSIGHT_CLI=$(CURDIR)/$(VENV)/bin/opsight node --test e2e/*.test.mjs

bench: build
	scripts/run_benchmarks.sh

# The Python tracing overhead beside cProfile, VizTracer and hiq-python, in its own
# environment .venv-bench/ (docs/performance.md).
bench-python:
	scripts/setup_bench_env.sh
	.venv-bench/bin/python benchmarks/python/tracer_overhead.py $(BENCH_PYTHON_ARGS)

# The timeline at scale: a synthetic run of UI_BENCH_SLICES slices (default 10M), first
# drawing and pan/zoom frame times measured in Chromium (docs/performance.md).
UI_BENCH_SLICES ?= 10000000
bench-ui: install
	cd web && OPSIGHT_CLI=$(CURDIR)/$(VENV)/bin/opsight node e2e/benchmark_timeline.mjs $(UI_BENCH_SLICES)

format:
	clang-format -i $$(git ls-files '*.cc' '*.hpp')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.cc' '*.hpp')

clean:
	rm -rf build
