// Throughput of the Chrome JSON writer and reader, in bytes per second of JSON.
//
//   BM_WriteChromeJson         write_chrome_json of a synthetic 1M-slice trace
//   BM_ReadChromeJson          read_chrome_json of that writer's output (on a machine with
//                              two cores or more, windows parsed and decoded on two threads)
//   BM_ReadChromeJsonOneThread the same with read_chrome_json(bytes, 1): all on one thread
//   BM_SimdjsonParseOnly       baseline: simdjson DOM-parsing the same bytes with a warm
//                              parser, no model built
//   BM_SimdjsonParseWindows    baseline: the DOM parse the reader does, window by window
//   BM_SimdjsonParseWindowsTwoThreads  the same on two threads (every other window each):
//                              the ceiling of the reader's two threads on this machine
//   BM_ReadPyTorchLikeJson     read_chrome_json of a Kineto-like file (cpu_op X events with
//                              "External id", "Input Dims", ... args), 1M events
//   BM_ReadPyTorchLikeJsonOneThread  the same on one thread
//   BM_SimdjsonParseOnlyPyTorchLike  baseline for the previous one
//
// The reader/baseline ratio is the cost of building the trace tables on top of parsing.
// Reads are timed in wall-clock time (UseRealTime): the reader's helper thread does half
// the work, which the calling thread's CPU time would not count. Counters: the slice and
// slice-argument tables' allocated bytes per slice (slice_bytes_per_slice,
// arg_bytes_per_slice).
// Run: build/release/src/io/opsight_io_benchmarks --benchmark_filter='Read.*Json|Simdjson'
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "io/chrome_json/chrome_json_repair.hpp"
#include "io/chrome_json/chrome_json_windows.hpp"
#include "io/io.hpp"
#include "trace/trace.hpp"

namespace opsight::io {
namespace {

constexpr size_t kSliceCount = 1'000'000;

// Four threads; on each, repeated trees of a request (depth 0) holding a forward pass
// (depth 1) holding four operators (depth 2); each slice has two or three args.
trace::Trace make_synthetic_trace(size_t slice_count) {
  trace::Trace trace;
  trace.run.source_format = "opsight";
  trace.process(1000).name = trace.intern("bench");
  const char* operator_names[] = {"aten::linear", "aten::relu", "aten::addmm", "aten::softmax"};
  auto batch_key = trace.intern("batch");
  auto shape_key = trace.intern("shape");
  auto flops_key = trace.intern("flops");
  auto shape = trace.intern("[8, 1024]");
  constexpr int kThreads = 4;
  trace::TrackId tracks[kThreads];
  for (int thread = 0; thread < kThreads; ++thread) {
    tracks[thread] = trace.thread_track(1000, 1000 + thread);
    trace.tracks[tracks[thread]].name = trace.intern(fmt::format("worker-{}", thread));
  }
  int64_t clock[kThreads] = {};
  size_t made = 0;
  for (uint64_t tree = 0; made < slice_count; ++tree) {
    int thread = static_cast<int>(tree % kThreads);
    auto track = tracks[thread];
    int64_t start = 1'000'000'000 + clock[thread];
    auto add = [&](int64_t ts, int64_t dur, std::string_view name, std::string_view category) {
      auto row = trace.slices.add(ts, dur, trace.intern(name), trace.intern(category), track);
      trace.slice_args.add(row, batch_key,
                           trace::ArgValue::of_int(static_cast<int64_t>(tree % 64)));
      trace.slice_args.add(row, shape_key, trace::ArgValue::of_string(shape));
      ++made;
      return row;
    };
    add(start, 10'000 + static_cast<int64_t>(tree % 997), "request", "python");
    add(start + 100, 9'000, "forward", "python");
    for (int op = 0; op < 4 && made < slice_count; ++op) {
      auto row = add(start + 200 + op * 2'000, 1'500 + static_cast<int64_t>(tree % 13),
                     operator_names[op], "cpu_op");
      trace.slice_args.add(row, flops_key,
                           trace::ArgValue::of_double(1.5e6 + static_cast<double>(op)));
    }
    clock[thread] += 12'000;
  }
  trace.finalize();
  return trace;
}

// A file shaped like the PyTorch profiler's: pretty-printed X events of cat cpu_op.
std::string make_pytorch_like_json(size_t event_count) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out),
                 "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"displayTimeUnit\": "
                 "\"ms\",\n  \"traceEvents\": [\n");
  const char* names[] = {"aten::linear", "aten::t",    "aten::transpose", "aten::as_strided",
                         "aten::addmm",  "aten::relu", "aten::clamp_min", "aten::empty"};
  double ts = 4403183387073.872;
  for (size_t event = 0; event < event_count; ++event) {
    size_t kind = event % 8;
    fmt::format_to(
        std::back_inserter(out),
        "  {{\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{}\", \"pid\": 4571, "
        "\"tid\": 4571,\n    \"ts\": {:.3f}, \"dur\": {:.3f},\n    \"args\": {{\n      "
        "\"External id\": {},\"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\"], "
        "\"Input type\": [\"float\", \"float\"], \"Input Strides\": [[16, 1], [1]], "
        "\"Input Dims\": [[8, {}], [32]], \"Ev Idx\": {}\n    }}\n  }}{}\n",
        names[kind], ts, 0.5 + static_cast<double>(kind), event + 1, 16 + kind, event,
        event + 1 == event_count ? "" : ",");
    ts += 1.25;
  }
  fmt::format_to(std::back_inserter(out), "  ],\n  \"traceName\": \"bench.json\"\n}}\n");
  return std::string(out.data(), out.size());
}

const trace::Trace& synthetic_trace() {
  static const trace::Trace trace = make_synthetic_trace(kSliceCount);
  return trace;
}

const std::string& synthetic_json() {
  static const std::string json = write_chrome_json(synthetic_trace());
  return json;
}

const std::string& pytorch_like_json() {
  static const std::string json = make_pytorch_like_json(kSliceCount);
  return json;
}

void BM_WriteChromeJson(benchmark::State& state) {
  const trace::Trace& trace = synthetic_trace();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string json = write_chrome_json(trace);
    bytes += json.size();
    benchmark::DoNotOptimize(json.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["slices"] = static_cast<double>(trace.slices.size());
}
BENCHMARK(BM_WriteChromeJson)->Unit(benchmark::kMillisecond);

// Bytes the slice table holds (capacity, not size) per slice: the memory bound.
template <typename T>
size_t column_bytes(const trace::Column<T>& column) {
  return column.capacity() * sizeof(T);
}
double slice_bytes_per_slice(const trace::SliceTable& slices) {
  size_t bytes = column_bytes(slices.ts) + column_bytes(slices.dur) + column_bytes(slices.name) +
                 column_bytes(slices.category) + column_bytes(slices.track) +
                 column_bytes(slices.depth) + column_bytes(slices.flags) +
                 column_bytes(slices.parent) + column_bytes(slices.span_id) +
                 column_bytes(slices.args_begin);
  return static_cast<double>(bytes) / static_cast<double>(std::max<size_t>(1, slices.size()));
}

// Bytes the slice-argument table holds (capacity) per slice.
double arg_bytes_per_slice(const trace::Trace& trace) {
  const trace::ArgTable& args = trace.slice_args;
  size_t bytes = column_bytes(args.owner) + column_bytes(args.key) + column_bytes(args.value);
  return static_cast<double>(bytes) / static_cast<double>(std::max<size_t>(1, trace.slices.size()));
}

// threads: 0 for read_chrome_json's own choice, else the count passed to it.
void read_benchmark(benchmark::State& state, const std::string& json, int threads = 0) {
  size_t slices = 0;
  double bytes_per_slice = 0;
  double arg_bytes = 0;
  for (auto _ : state) {
    ReadResult result = threads == 0 ? read_chrome_json(json) : read_chrome_json(json, threads);
    slices = result.trace.slices.size();
    bytes_per_slice = slice_bytes_per_slice(result.trace.slices);
    arg_bytes = arg_bytes_per_slice(result.trace);
    benchmark::DoNotOptimize(slices);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
  state.counters["slices"] = static_cast<double>(slices);
  state.counters["slice_bytes_per_slice"] = bytes_per_slice;
  state.counters["arg_bytes_per_slice"] = arg_bytes;
  state.counters["MB"] = static_cast<double>(json.size()) / 1e6;
}

// Parsing only, as the reader does it (copy into a padded buffer, DOM parse), with a
// parser made per iteration like the reader's.
// simdjson at its best: parser and padded input allocated once, outside the timed loop, so
// no page is faulted in while timing (the reader pays for its own memory).
void simdjson_baseline(benchmark::State& state, const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  for (auto _ : state) {
    simdjson::dom::element root;
    auto error = parser.parse(padded).get(root);
    benchmark::DoNotOptimize(error);
    benchmark::DoNotOptimize(root);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
}

// Touches every value under `value` as a reader that validates everything must: numbers
// parsed, strings unescaped, containers walked. Returns a checksum so nothing is elided.
uint64_t walk_on_demand(simdjson::ondemand::value value) {
  using simdjson::ondemand::json_type;
  json_type type;
  if (value.type().get(type)) return 0;
  switch (type) {
    case json_type::object: {
      uint64_t sum = 0;
      for (auto field : value.get_object()) {
        std::string_view key;
        if (field.unescaped_key().get(key)) return 0;
        sum += key.size() + walk_on_demand(field.value());
      }
      return sum;
    }
    case json_type::array: {
      uint64_t sum = 0;
      for (auto element : value.get_array()) sum += walk_on_demand(element.value());
      return sum;
    }
    case json_type::number: {
      double number = 0;
      if (value.get_double().get(number)) return 0;
      return static_cast<uint64_t>(number);
    }
    case json_type::string: {
      std::string_view text;
      if (value.get_string().get(text)) return 0;
      return text.size();
    }
    case json_type::boolean: {
      bool flag = false;
      if (value.get_bool().get(flag)) return 0;
      return flag ? 1 : 0;
    }
    case json_type::null:
      return value.is_null() ? 1 : 0;
  }
  return 0;
}

// simdjson On-Demand over the same bytes, every value touched (what a strict reader built
// on On-Demand would pay before building any row), parser and input reused.
void simdjson_on_demand_baseline(benchmark::State& state, const std::string& json) {
  simdjson::ondemand::parser parser(json.size() + 4096);
  simdjson::padded_string padded(json);
  for (auto _ : state) {
    auto document = parser.iterate(padded);
    uint64_t sum = walk_on_demand(document.get_value());
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
}

// The event array's windows as the reader cuts them, or nullopt (and the benchmark fails).
std::optional<chrome_json::ArrayWindows> benchmark_windows(benchmark::State& state,
                                                           const std::string& json) {
  auto array = chrome_json::find_event_array(json);
  auto windows =
      chrome_json::split_array_elements(json, array.value_or(0), chrome_json::kWindowBytes);
  if (!windows) state.SkipWithError("the benchmark's JSON has no event array");
  return windows;
}

// Copies window [begin, end) of `json` into `text` as the padded document "[...]", as the
// reader does; returns its length before the padding.
size_t copy_window(const std::string& json, size_t begin, size_t end, std::string& text) {
  text.assign("[");
  text.append(json, begin, end - begin);
  text.append("]");
  text.append(simdjson::SIMDJSON_PADDING, ' ');
  return end - begin + 2;
}

// Runs `parse_window(text, length)` over the event array window by window as the reader
// cuts it (about 1 MiB of whole events each, copied into a padded "[...]", `length` bytes
// before the padding), timing every pass; the sum of what it returns is kept.
template <typename ParseWindow>
void windows_baseline(benchmark::State& state, const std::string& json, ParseWindow parse_window) {
  auto windows = benchmark_windows(state, json);
  if (!windows) return;
  std::string window_text;
  for (auto _ : state) {
    uint64_t sum = 0;
    for (auto [begin, end] : windows->windows)
      sum += parse_window(window_text, copy_window(json, begin, end, window_text));
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
}

// On-Demand, window by window: the parse stays in cache.
void simdjson_on_demand_windows_baseline(benchmark::State& state, const std::string& json) {
  simdjson::ondemand::parser parser;
  windows_baseline(state, json, [&](const std::string& text, size_t length) {
    auto document = parser.iterate(text.data(), length, text.size());
    return walk_on_demand(document.get_value());
  });
}

// The DOM parse the reader does, window by window, with no model built: the reader's
// per-core parse ceiling.
void simdjson_dom_windows_baseline(benchmark::State& state, const std::string& json) {
  simdjson::dom::parser parser;
  windows_baseline(state, json, [&](const std::string& text, size_t length) -> uint64_t {
    simdjson::dom::array parsed;
    if (parser.parse(text.data(), length, false).get(parsed) != simdjson::SUCCESS) return 0;
    return parsed.size();
  });
}

// The same DOM parse on two threads, each parsing every other window with a parser of its
// own, no model built: what two cores of this machine can parse together, the ceiling of
// a two-thread reader (the reader shares its windows between its threads the same way).
void simdjson_dom_windows_two_threads_baseline(benchmark::State& state, const std::string& json) {
  auto windows = benchmark_windows(state, json);
  if (!windows) return;
  auto parse_every_other = [&](size_t first, uint64_t* sum) {
    simdjson::dom::parser parser;
    std::string window_text;
    for (size_t index = first; index < windows->windows.size(); index += 2) {
      auto [begin, end] = windows->windows[index];
      size_t length = copy_window(json, begin, end, window_text);
      simdjson::dom::array parsed;
      if (parser.parse(window_text.data(), length, false).get(parsed) == simdjson::SUCCESS)
        *sum += parsed.size();
    }
  };
  for (auto _ : state) {
    uint64_t sums[2] = {};
    std::thread helper(parse_every_other, 1, &sums[1]);
    parse_every_other(0, &sums[0]);
    helper.join();
    benchmark::DoNotOptimize(sums);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
}

// Stage 1 only (On-Demand's structural index of the whole input, nothing walked): the
// figure simdjson's "gigabytes per second" refers to.
void simdjson_stage1_baseline(benchmark::State& state, const std::string& json) {
  simdjson::ondemand::parser parser(json.size() + 4096);
  simdjson::padded_string padded(json);
  for (auto _ : state) {
    auto document = parser.iterate(padded);
    benchmark::DoNotOptimize(document);
  }
  state.SetBytesProcessed(static_cast<int64_t>(json.size() * state.iterations()));
}

void BM_ReadChromeJson(benchmark::State& state) { read_benchmark(state, synthetic_json()); }
BENCHMARK(BM_ReadChromeJson)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadChromeJsonOneThread(benchmark::State& state) {
  read_benchmark(state, synthetic_json(), 1);
}
BENCHMARK(BM_ReadChromeJsonOneThread)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonParseOnly(benchmark::State& state) { simdjson_baseline(state, synthetic_json()); }
BENCHMARK(BM_SimdjsonParseOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonOnDemandWalk(benchmark::State& state) {
  simdjson_on_demand_baseline(state, synthetic_json());
}
BENCHMARK(BM_SimdjsonOnDemandWalk)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonOnDemandWalkWindows(benchmark::State& state) {
  simdjson_on_demand_windows_baseline(state, synthetic_json());
}
BENCHMARK(BM_SimdjsonOnDemandWalkWindows)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonParseWindows(benchmark::State& state) {
  simdjson_dom_windows_baseline(state, synthetic_json());
}
BENCHMARK(BM_SimdjsonParseWindows)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonParseWindowsTwoThreads(benchmark::State& state) {
  simdjson_dom_windows_two_threads_baseline(state, synthetic_json());
}
BENCHMARK(BM_SimdjsonParseWindowsTwoThreads)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonParseWindowsPyTorchLike(benchmark::State& state) {
  simdjson_dom_windows_baseline(state, pytorch_like_json());
}
BENCHMARK(BM_SimdjsonParseWindowsPyTorchLike)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonStage1Only(benchmark::State& state) {
  simdjson_stage1_baseline(state, synthetic_json());
}
BENCHMARK(BM_SimdjsonStage1Only)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadPyTorchLikeJson(benchmark::State& state) { read_benchmark(state, pytorch_like_json()); }
BENCHMARK(BM_ReadPyTorchLikeJson)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadPyTorchLikeJsonOneThread(benchmark::State& state) {
  read_benchmark(state, pytorch_like_json(), 1);
}
BENCHMARK(BM_ReadPyTorchLikeJsonOneThread)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimdjsonParseOnlyPyTorchLike(benchmark::State& state) {
  simdjson_baseline(state, pytorch_like_json());
}
BENCHMARK(BM_SimdjsonParseOnlyPyTorchLike)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace opsight::io
