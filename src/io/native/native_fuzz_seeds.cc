// Writes the native reader fuzzer's generated seeds: small traces that together fill every
// table the model writer knows (slices nested and unfinished, arguments of each type on
// slices and instants, instants of each scope, counters of one and of several series,
// thread lanes, process-wide async tracks, flows, process and thread metadata), each
// written by io::write_native into `<folder>/generated_<name>.opsight`. They are made at
// fuzz time (scripts/run_fuzzers.sh) rather than committed, so they follow the format
// whenever the writer learns a new chunk or slot kind: a table the writer does not write
// yet is simply absent from the bytes. Usage: native_fuzz_seeds FOLDER
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "io/io.hpp"
#include "trace/trace.hpp"

namespace {

using opsight::trace::ArgValue;
using opsight::trace::InstantScope;
using opsight::trace::RowIndex;
using opsight::trace::Trace;
using opsight::trace::TrackId;

constexpr int64_t kPid = 4242;

void describe_run(Trace& trace, std::string_view name) {
  trace.run.command_line = "native_fuzz_seeds " + std::string(name);
  trace.run.host = "fuzz-host";
  trace.run.source_format = "opsight";
  trace.run.clock = "clock_gettime";
  trace.run.pid = kPid;
  trace.run.start_unix_ns = 1'700'000'000'000'000'000;
  trace.run.unix_offset_ns = 1'699'999'000'000'000'000;
  trace.run.has_unix_offset = true;
  trace.run.overhead_ns = 1234;
  trace.run.traced_ns = 1'000'000;
  trace.run.events_dropped = 3;
  trace.run.extra.emplace_back("seed", std::string(name));
  auto& process = trace.process(kPid);
  process.name = trace.intern("fuzzed process");
  process.sort_index = 2;
  process.labels.push_back(trace.intern("rank 0"));
  process.parent_pid = 1;
}

// Two threads, nested slices, an unfinished one, every argument type.
void add_slices_and_args(Trace& trace) {
  TrackId main_thread = trace.thread_track(kPid, 100);
  TrackId worker = trace.thread_track(kPid, 101);
  trace.tracks[main_thread].name = trace.intern("main");
  trace.tracks[worker].name = trace.intern("worker");
  trace.tracks[worker].sort_index = 1;
  trace.tracks[main_thread].overhead_ns = 500;
  trace.tracks[main_thread].events_recorded = 12;
  trace.tracks[main_thread].events_dropped = 1;
  auto category = trace.intern("python");
  RowIndex outer = trace.slices.add(1'000, 9'000, trace.intern("request"), category, main_thread);
  RowIndex inner = trace.slices.add(2'000, 3'000, trace.intern("decode"), category, main_thread);
  trace.slices.add(6'000, 1'000, trace.intern("encode"), trace.intern("operator"), main_thread);
  trace.slices.add(1'500, 4'000, trace.intern("background"), category, worker);
  trace.slices.add(7'000, 2'000, trace.intern("killed"), category, worker,
                   opsight::trace::kSliceUnfinished);
  trace.slice_args.add(outer, trace.intern("batch"), ArgValue::of_int(-8));
  trace.slice_args.add(outer, trace.intern("ratio"), ArgValue::of_double(0.25));
  trace.slice_args.add(outer, trace.intern("model"), ArgValue::of_string(trace.intern("bert")));
  trace.slice_args.add(inner, trace.intern("cached"), ArgValue::of_bool(true));
  trace.slice_args.add(inner, trace.intern("empty"), ArgValue::of_string(trace.intern("")));
}

// Instants of each scope, with arguments.
void add_instants(Trace& trace) {
  TrackId thread = trace.thread_track(kPid, 100);
  auto category = trace.intern("annotation");
  RowIndex mark = trace.instants.add(2'500, trace.intern("checkpoint"), category, thread);
  trace.instants.add(3'500, trace.intern("gc"), category, thread, InstantScope::kProcess);
  trace.instants.add(4'500, trace.intern("clock step"), category, thread, InstantScope::kGlobal);
  trace.instant_args.add(mark, trace.intern("step"), ArgValue::of_int(7));
  trace.instant_args.add(mark, trace.intern("loss"), ArgValue::of_double(1.5));
  trace.instant_args.add(mark, trace.intern("phase"), ArgValue::of_string(trace.intern("eval")));
  trace.instant_args.add(mark, trace.intern("last"), ArgValue::of_bool(false));
}

// A counter of one series and one of two series.
void add_counters(Trace& trace) {
  uint32_t rss = trace.counter_track(kPid, "process.rss", "bytes");
  uint32_t heap = trace.counter_series(kPid, "memory", "heap", "bytes");
  uint32_t stack = trace.counter_series(kPid, "memory", "stack", "bytes");
  for (int64_t step = 0; step < 4; ++step) {
    trace.counters.add(1'000 + step * 2'000, rss, 1e6 + static_cast<double>(step));
    trace.counters.add(1'000 + step * 2'000, heap, static_cast<double>(step) * 0.5);
    trace.counters.add(1'000 + step * 2'000, stack, -1.0);
  }
}

// Two lanes of one thread (interleaved asyncio tasks), one reusing the other's key.
void add_lanes(Trace& trace) {
  TrackId first = trace.async_track(kPid, 100, 7, "task fetch");
  TrackId second = trace.async_track(kPid, 100, 8);
  TrackId reused = trace.async_track(kPid, 100, 7, "task fetch again");
  auto category = trace.intern("python");
  trace.slices.add(1'000, 2'000, trace.intern("fetch"), category, first);
  trace.slices.add(1'500, 500, trace.intern("parse"), category, second);
  trace.slices.add(4'000, 1'000, trace.intern("fetch"), category, reused);
}

// Process-wide async tracks (work that begins on one thread and ends on another) and
// flows between slices of different threads and tracks.
void add_async_and_flows(Trace& trace) {
  TrackId queue = trace.process_async_track(kPid, 0xfeed, "request queue");
  TrackId stream = trace.process_async_track(kPid, 3);
  TrackId sender = trace.thread_track(kPid, 200);
  TrackId receiver = trace.thread_track(kPid, 201);
  auto category = trace.intern("session");
  RowIndex waiting = trace.slices.add(1'000, 5'000, trace.intern("queued"), category, queue);
  trace.slices.add(2'000, 1'000, trace.intern("kernel"), trace.intern("gpu_kernel"), stream);
  RowIndex send = trace.slices.add(500, 400, trace.intern("submit"), category, sender);
  RowIndex serve = trace.slices.add(6'500, 800, trace.intern("serve"), category, receiver);
  trace.flows.add(send, waiting, 1, trace.intern("request"), category);
  trace.flows.add(waiting, serve, 1, trace.intern("request"), category);
  trace.add_flow_by_time({sender, 600, opsight::trace::FlowBinding::kEnclosingSlice},
                         {receiver, 6'000, opsight::trace::FlowBinding::kNextSlice}, 2);
}

struct Seed {
  std::string name;
  std::vector<void (*)(Trace&)> parts;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  const std::vector<Seed> seeds = {
      {"empty", {}},
      {"slices_and_args", {add_slices_and_args}},
      {"instants", {add_instants}},
      {"counters", {add_counters}},
      {"lanes", {add_lanes}},
      {"async_and_flows", {add_async_and_flows}},
      {"everything",
       {add_slices_and_args, add_instants, add_counters, add_lanes, add_async_and_flows}},
  };
  for (const Seed& seed : seeds) {
    Trace trace;
    describe_run(trace, seed.name);
    for (auto* add : seed.parts) add(trace);
    trace.finalize();
    std::string path = std::string(argv[1]) + "/generated_" + seed.name + ".opsight";
    std::string bytes = opsight::io::write_native(trace);
    std::ofstream file(path, std::ios::binary);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) {
      std::fprintf(stderr, "native_fuzz_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
    // What the reader gets back: a table the writer does not write yet reads as 0 here.
    opsight::io::ReadResult back = opsight::io::read_native(bytes);
    if (!back.ok()) {
      std::fprintf(stderr, "native_fuzz_seeds: %s does not read back: %s\n", path.c_str(),
                   back.error->message.c_str());
      return 1;
    }
    std::printf(
        "%s: %zu bytes, %zu slices (%zu args), %zu instants (%zu args), %zu counters, "
        "%zu tracks, %zu flows\n",
        path.c_str(), bytes.size(), back.trace.slices.size(), back.trace.slice_args.size(),
        back.trace.instants.size(), back.trace.instant_args.size(), back.trace.counters.size(),
        back.trace.tracks.size(), back.trace.flows.size());
  }
  return 0;
}
