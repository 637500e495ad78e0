// Test support shared by the Perfetto writer's tests (perfetto_test.cc) and reader's tests
// (perfetto_reader_test.cc): the model with every feature the writer writes, which the
// writer's tests decode field by field and the reader's tests read back alike (round trip).
#pragma once

#include <string>

#include "trace/gpu_tracks.hpp"
#include "trace/trace.hpp"

namespace opsight::io::perfetto::testing {

// Every feature the writer writes: two processes (sorted, labelled, one with the command
// line), named threads with sort indexes, slices nested three deep with ties, args of
// every type, a lane, a process-wide async track, a GPU stream, flows (a chain across
// processes), instants of each scope, counters with each unit kind.
inline trace::Trace every_feature_trace() {
  trace::Trace trace;
  trace.run.pid = 10;
  trace.run.command_line = "python serve.py --port 8000";
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto& server = trace.process(10);
  server.name = trace.intern("server");
  server.sort_index = 5;
  server.labels.push_back(trace.intern("rank 0"));
  server.labels.push_back(trace.intern("GPU 1"));
  trace.process(20).name = trace.intern("worker");

  auto main_thread = trace.thread_track(10, 11);
  trace.tracks[main_thread].name = trace.intern("main");
  auto helper = trace.thread_track(10, 12);
  trace.tracks[helper].name = trace.intern("helper ✓");
  trace.tracks[helper].sort_index = -3;
  auto worker_thread = trace.thread_track(20, 21);
  auto lane = trace.async_track(10, 11, 7, "task 7");
  auto queue = trace.process_async_track(10, 99, "queue");
  auto stream = trace.process_async_track(10, trace::gpu_stream_track_key(1, 7),
                                          trace::gpu_stream_track_name(1, 7));
  trace.tracks[stream].sort_index = trace::kGpuTrackSortBase + 100'007;

  auto http = trace.intern("http");
  auto request = trace.slices.add(1000, 1000, trace.intern("request"), http, main_thread);
  auto parse = trace.slices.add(1100, 100, trace.intern("parse"), 0, main_thread);
  trace.slices.add(1120, 30, trace.intern("token"), 0, main_thread);
  trace.slices.add(1200, 0, trace.intern("parse"), 0, main_thread);
  trace.slices.add(3000, 500, trace.intern("request"), http, main_thread);
  trace.slices.add(1000, 10, trace.intern("assist"), 0, helper);
  auto served =
      trace.slices.add(1500, 200, trace.intern("serve"), trace.intern("cpu"), worker_thread);
  auto step = trace.slices.add(1300, 50, trace.intern("step"), 0, lane);
  trace.slices.add(1000, 2000, trace.intern("waiting"), 0, queue);
  auto kernel = trace.slices.add(1400, 80, trace.intern("gemm"), trace.intern("kernel"), stream);
  trace.slice_args.add(request, trace.intern("batch"), trace::ArgValue::of_int(-42));
  trace.slice_args.add(request, trace.intern("ratio"), trace::ArgValue::of_double(2.5));
  trace.slice_args.add(request, trace.intern("method"),
                       trace::ArgValue::of_string(trace.intern(std::string(300, 'G'))));
  trace.slice_args.add(request, trace.intern("cached"), trace::ArgValue::of_bool(true));
  trace.slice_args.add(parse, trace.intern("method"),
                       trace::ArgValue::of_string(trace.intern("GET")));
  trace.slice_args.add(kernel, trace.intern("grid"),
                       trace::ArgValue::of_string(trace.intern("[4,1,1]")));
  trace.flows.add(request, served, 5, trace.intern("handoff"));
  trace.flows.add(served, parse, 5);
  trace.flows.add(request, step, 6);
  trace.flows.add(step, kernel, 8);

  auto mark = trace.instants.add(1150, trace.intern("mark"), trace.intern("ui"), main_thread);
  trace.instant_args.add(mark, trace.intern("n"), trace::ArgValue::of_int(3));
  trace.instants.add(1160, trace.intern("fork"), 0, main_thread, trace::InstantScope::kProcess);
  trace.instants.add(1170, trace.intern("epoch"), 0, main_thread, trace::InstantScope::kGlobal);
  auto heap = trace.counter_series(10, "memory", "heap", "bytes");
  auto cpu = trace.counter_track(20, "cpu", "percent");
  auto wait = trace.counter_track(10, "wait", "ns");
  auto items = trace.counter_track(10, "items", "count");
  auto plain = trace.counter_track(10, "plain");
  trace.counters.add(1000, heap, 4096);
  trace.counters.add(2000, heap, 8192.5);
  trace.counters.add(1000, cpu, 12.5);
  trace.counters.add(1500, wait, 1e6);
  trace.counters.add(1500, items, 3);
  trace.counters.add(1600, plain, -1.25);
  trace.finalize();
  return trace;
}

}  // namespace opsight::io::perfetto::testing
