// The Traces page's list (trace_list.hpp) on a synthetic run of 1M slices: 8 threads of
// requests, each a root span (a trace of its own) over 16 operators, one in 64 carrying
// exception.type. Building the list once per run (what the first /traces request of a run
// pays) against its baseline, the TraceMembership pass alone that a trace:ID search makes;
// then a page of the list (what every later request pays), plain and filtered by name.
#include <benchmark/benchmark.h>

#include <string>

#include "server/trace_list.hpp"
#include "trace/trace_membership.hpp"

namespace opsight::server {
namespace {

trace::Trace trace_list_benchmark_trace(size_t count) {
  trace::Trace trace;
  trace::StringId operators[16], requests[4];
  for (int i = 0; i < 16; ++i) operators[i] = trace.intern("aten::op" + std::to_string(i));
  for (int i = 0; i < 4; ++i) requests[i] = trace.intern("request " + std::to_string(i));
  const trace::StringId exception = trace.intern("exception.type"),
                        error = trace.intern("RuntimeError");
  trace.slices.reserve(count);
  const size_t per_thread = count / 8;
  size_t request_number = 0;
  for (int thread = 0; thread < 8; ++thread) {
    trace::TrackId track = trace.thread_track(1, thread + 1);
    int64_t at = thread * 7;
    for (size_t written = 0; written + 17 <= per_thread; written += 17) {
      const int64_t length = 17 * 1000 + static_cast<int64_t>(request_number % 1000);
      trace.slices.add(at, length, requests[request_number % 4], 0, track);
      for (int op = 0; op < 16; ++op) {
        trace::RowIndex row = trace.slices.add(at + 10 + op * 1000, 900, operators[op], 0, track);
        if (op == 3 && request_number % 64 == 0)
          trace.slice_args.add(row, exception, trace::ArgValue::of_string(error));
      }
      at += 18 * 1000 + 1000;
      ++request_number;
    }
  }
  trace.finalize();
  return trace;
}

const trace::Trace& trace_list_benchmark_shared() {
  static const trace::Trace trace = trace_list_benchmark_trace(1 << 20);
  return trace;
}

void BM_TraceMembershipPass(benchmark::State& state) {  // the baseline
  const trace::Trace& trace = trace_list_benchmark_shared();
  for (auto _ : state) {
    trace::TraceMembership membership(trace);
    benchmark::DoNotOptimize(membership.trace_index_count());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(trace.slices.size()));
}
BENCHMARK(BM_TraceMembershipPass)->Unit(benchmark::kMillisecond);

void BM_TraceListBuild(benchmark::State& state) {
  const trace::Trace& trace = trace_list_benchmark_shared();
  for (auto _ : state) {
    TraceList list(trace);
    list.page({});  // the default order (by duration), sorted on the first page
    benchmark::DoNotOptimize(list.size());
    state.counters["traces"] = static_cast<double>(list.size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(trace.slices.size()));
}
BENCHMARK(BM_TraceListBuild)->Unit(benchmark::kMillisecond);

void trace_list_page(benchmark::State& state, const char* root_name, uint64_t offset) {
  const trace::Trace& trace = trace_list_benchmark_shared();
  static const TraceList list(trace);
  TraceListQuery query;
  query.root_name = root_name;
  query.offset = offset;
  list.page(query);  // the order sorted before timing
  for (auto _ : state) {
    TraceListPage page = list.page(query);
    benchmark::DoNotOptimize(page.rows.data());
  }
}

void BM_TraceListFirstPage(benchmark::State& state) { trace_list_page(state, "", 0); }
BENCHMARK(BM_TraceListFirstPage)->Unit(benchmark::kMicrosecond);

void BM_TraceListFilteredPage(benchmark::State& state) { trace_list_page(state, "request 2", 0); }
BENCHMARK(BM_TraceListFilteredPage)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace opsight::server
