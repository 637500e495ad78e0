// The timeline's search and area summary on a synthetic trace of 8 threads, each a run of
// requests > 16 operators, every operator with two args (a string and an int): a search by
// name, by name and arg value, the last page of a search that matches most slices, and an
// area of the whole trace and of a narrow window (what a shift+drag asks for).
#include <benchmark/benchmark.h>

#include <string>

#include "server/timeline_area.hpp"
#include "server/timeline_search.hpp"

namespace opsight::server {
namespace {

trace::Trace requests_of_operators_trace(size_t count) {
  trace::Trace trace;
  trace::StringId request = trace.intern("request"), shape = trace.intern("shape"),
                  seq = trace.intern("seq");
  trace::StringId operators[16], shapes[64];
  for (int i = 0; i < 16; ++i) operators[i] = trace.intern("aten::op" + std::to_string(i));
  for (int i = 0; i < 64; ++i) shapes[i] = trace.intern("[" + std::to_string(i * 8) + ", 768]");
  trace.slices.reserve(count);
  const size_t per_thread = count / 8;
  for (int thread = 0; thread < 8; ++thread) {
    trace::TrackId track = trace.thread_track(1, thread + 1);
    int64_t at = thread * 7;
    for (size_t written = 0; written + 17 <= per_thread; written += 17) {
      trace.slices.add(at, 17 * 1000, request, 0, track);
      for (int op = 0; op < 16; ++op) {
        trace::RowIndex row = trace.slices.add(at + 10 + op * 1000, 900, operators[op], 0, track);
        trace.slice_args.add(row, shape, trace::ArgValue::of_string(shapes[(written + op) % 64]));
        trace.slice_args.add(row, seq, trace::ArgValue::of_int(static_cast<int64_t>(written + op)));
      }
      at += 18 * 1000;
    }
  }
  trace.finalize();
  return trace;
}

const trace::Trace& shared_trace() {
  static const trace::Trace trace = requests_of_operators_trace(1 << 20);
  return trace;
}

SliceSearchQuery query_of(std::string_view text) {
  std::string error;
  return *parse_slice_search(text, error);
}

void search(benchmark::State& state, std::string_view text, bool last_page) {
  const trace::Trace& trace = shared_trace();
  SliceSearchQuery query = query_of(text);
  uint64_t total = search_slices(trace, query, 0, 1).total;
  for (auto _ : state) {
    SliceSearchResult result = search_slices(trace, query, last_page ? total - 1 : 0, 1000);
    benchmark::DoNotOptimize(result.rows.data());
  }
  state.counters["matches"] = static_cast<double>(total);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(trace.slices.size()));
}

void BM_SearchName(benchmark::State& state) { search(state, "name:op7", false); }
BENCHMARK(BM_SearchName)->Unit(benchmark::kMillisecond);

void BM_SearchNameOrArgValue(benchmark::State& state) { search(state, "768", false); }
BENCHMARK(BM_SearchNameOrArgValue)->Unit(benchmark::kMillisecond);

void BM_SearchNumericArg(benchmark::State& state) { search(state, "arg:seq=4242", false); }
BENCHMARK(BM_SearchNumericArg)->Unit(benchmark::kMillisecond);

void BM_SearchLastPageOfMost(benchmark::State& state) { search(state, "aten", true); }
BENCHMARK(BM_SearchLastPageOfMost)->Unit(benchmark::kMillisecond);

void area(benchmark::State& state, bool whole) {
  const trace::Trace& trace = shared_trace();
  TimelineIndex index(trace);
  auto [first, last] = trace.time_bounds();
  std::vector<trace::TrackId> tracks;
  for (trace::TrackId track = 0; track < trace.tracks.size(); ++track) tracks.push_back(track);
  const int64_t middle = (first + last) / 2;
  AreaQuery query{whole ? first : middle, whole ? last + 1 : middle + 2'000'000, tracks};
  for (auto _ : state) {
    AreaSummary summary = summarize_area(trace, index, query);
    benchmark::DoNotOptimize(summary.names.data());
    state.counters["slices"] = static_cast<double>(summary.slice_count);
  }
}

void BM_AreaWholeTrace(benchmark::State& state) { area(state, true); }
BENCHMARK(BM_AreaWholeTrace)->Unit(benchmark::kMillisecond);

void BM_AreaTwoMilliseconds(benchmark::State& state) { area(state, false); }
BENCHMARK(BM_AreaTwoMilliseconds)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace opsight::server
