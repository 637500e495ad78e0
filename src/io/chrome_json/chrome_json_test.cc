// Golden tests of the Chrome Trace Event Format reader and writer: a small JSON input,
// the exact table contents out (printed one row per line so a failure shows the diff),
// plus round trips through the writer and two fixtures made by the real PyTorch profiler
// and ONNX Runtime (tests/data/generate_fixtures.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "io/chrome_json/chrome_json_repair.hpp"
#include "io/chrome_json/chrome_json_test_support.hpp"
#include "io/io.hpp"
#include "trace/trace.hpp"

namespace opsight::io {
namespace {

using trace::Trace;

std::string format_arg(const Trace& trace, const trace::ArgValue& value) {
  return testing::arg_value_text(trace, value);
}

std::string format_args(const Trace& trace, const trace::ArgTable& args, size_t begin, size_t end) {
  std::string text;
  for (size_t arg = begin; arg < end; ++arg) {
    text += text.empty() ? " {" : ", ";
    text += std::string(trace.str(args.key[arg])) + "=" + format_arg(trace, args.value[arg]);
  }
  return text.empty() ? text : text + "}";
}

// One line per slice: "pid/tid ts+dur depth=D name [cat] {args}" (+ " unfinished"), track
// by track in the order the tracks were created (the order across tracks is unspecified
// in the slice table itself).
std::string slice_rows(const Trace& trace) {
  std::string text;
  const auto& slices = trace.slices;
  for (trace::TrackId track_id = 0; track_id < trace.tracks.size(); ++track_id)
    for (size_t row = 0; row < slices.size(); ++row) {
      if (slices.track[row] != track_id) continue;
      const auto& track = trace.tracks[slices.track[row]];
      text += std::to_string(track.pid) + "/" + std::to_string(track.tid) + " " +
              std::to_string(slices.ts[row]) + "+" + std::to_string(slices.dur[row]) +
              " depth=" + std::to_string(slices.depth[row]) + " " +
              std::string(trace.str(slices.name[row]));
      if (slices.category[row] != 0)
        text += " [" + std::string(trace.str(slices.category[row])) + "]";
      text +=
          format_args(trace, trace.slice_args, slices.args_begin[row], slices.args_begin[row + 1]);
      if (slices.flags[row] & trace::kSliceUnfinished) text += " unfinished";
      text += "\n";
    }
  return text;
}

std::string instant_rows(const Trace& trace) {
  std::string text;
  const auto& instants = trace.instants;
  for (size_t row = 0; row < instants.size(); ++row) {
    const auto& track = trace.tracks[instants.track[row]];
    text += std::to_string(track.pid) + "/" + std::to_string(track.tid) + " " +
            std::to_string(instants.ts[row]) + " " + std::string(trace.str(instants.name[row]));
    if (instants.category[row] != 0)
      text += " [" + std::string(trace.str(instants.category[row])) + "]";
    text += format_args(trace, trace.instant_args, instants.args_begin[row],
                        instants.args_begin[row + 1]);
    text += "\n";
  }
  return text;
}

std::string counter_rows(const Trace& trace) {
  std::string text;
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    const auto& track = trace.counter_tracks[trace.counters.counter_track[row]];
    std::ostringstream value;
    value << trace.counters.value[row];
    text += std::to_string(track.pid) + " " + std::string(trace.str(track.name)) + " " +
            std::to_string(trace.counters.ts[row]) + " " + value.str() + "\n";
  }
  return text;
}

std::string extra_value(const Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "<absent>";
}

std::string process_name(const Trace& trace, int64_t pid) {
  for (const auto& process : trace.processes)
    if (process.pid == pid) return std::string(trace.str(process.name));
  return "<no process>";
}

std::string thread_name(const Trace& trace, int64_t pid, int64_t tid) {
  for (const auto& track : trace.tracks)
    if (track.pid == pid && track.tid == tid) return std::string(trace.str(track.name));
  return "<no track>";
}

ReadResult read_ok(std::string_view json) {
  ReadResult result = read_chrome_json(json);
  EXPECT_TRUE(result.ok()) << (result.error ? result.error->to_string("input") : "");
  return result;
}

std::string read_fixture(const std::string& name) {
  std::ifstream file(std::string(OPSIGHT_SOURCE_DIR) + "/tests/data/" + name, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// ---- Phases ---------------------------------------------------------------------------

TEST(ChromeJsonReader, CompleteEventsObjectForm) {
  auto result = read_ok(R"({"traceEvents":[
    {"ph":"X","name":"outer","cat":"cpu","pid":1,"tid":2,"ts":10,"dur":100,"args":{"n":3}},
    {"ph":"X","name":"inner","pid":1,"tid":2,"ts":20,"dur":30}
  ],"displayTimeUnit":"ms"})");
  EXPECT_EQ(slice_rows(result.trace),
            "1/2 10000+100000 depth=0 outer [cpu] {n=3}\n"
            "1/2 20000+30000 depth=1 inner\n");
  EXPECT_EQ(result.trace.run.source_format, "chrome-json");
  EXPECT_EQ(extra_value(result.trace, "displayTimeUnit"), "ms");
  EXPECT_FALSE(result.damage);
  EXPECT_EQ(result.trace.slices.parent[1], 0u);
}

TEST(ChromeJsonReader, BareArrayForm) {
  auto result = read_ok(R"([{"ph":"X","name":"a","pid":5,"tid":5,"ts":1,"dur":2}])");
  EXPECT_EQ(slice_rows(result.trace), "5/5 1000+2000 depth=0 a\n");
  EXPECT_EQ(result.trace.run.source_format, "chrome-json");
}

TEST(ChromeJsonReader, FractionalMicrosecondsRoundToNanoseconds) {
  auto result = read_ok(R"([
    {"ph":"X","name":"a","pid":1,"tid":1,"ts":1234.567,"dur":0.001},
    {"ph":"X","name":"b","pid":1,"tid":2,"ts":4403183387073.872,"dur":1101.263},
    {"ph":"X","name":"c","pid":1,"tid":3,"ts":0.0004,"dur":0.0006}
  ])");
  EXPECT_EQ(slice_rows(result.trace),
            "1/1 1234567+1 depth=0 a\n"
            "1/2 4403183387073872+1101263 depth=0 b\n"
            "1/3 0+1 depth=0 c\n");
}

TEST(ChromeJsonReader, BeginEndNestPerThread) {
  auto result = read_ok(R"([
    {"ph":"B","name":"outer","pid":1,"tid":1,"ts":0,"args":{"a":1}},
    {"ph":"B","name":"other thread","pid":1,"tid":2,"ts":1},
    {"ph":"B","name":"inner","pid":1,"tid":1,"ts":2},
    {"ph":"E","pid":1,"tid":1,"ts":5},
    {"ph":"E","pid":1,"tid":2,"ts":6},
    {"ph":"E","pid":1,"tid":1,"ts":9,"args":{"b":"end"}}
  ])");
  EXPECT_EQ(slice_rows(result.trace),
            "1/1 0+9000 depth=0 outer {a=1, b='end'}\n"
            "1/1 2000+3000 depth=1 inner\n"
            "1/2 1000+5000 depth=0 other thread\n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_end_events"), "<absent>");
}

TEST(ChromeJsonReader, UnmatchedBeginIsClosedAtTrackEndAndUnmatchedEndIsCounted) {
  auto result = read_ok(R"([
    {"ph":"E","pid":1,"tid":1,"ts":1},
    {"ph":"B","name":"open","pid":1,"tid":1,"ts":2},
    {"ph":"X","name":"child","pid":1,"tid":1,"ts":3,"dur":4},
    {"ph":"E","pid":1,"tid":9,"ts":4}
  ])");
  EXPECT_EQ(slice_rows(result.trace),
            "1/1 2000+5000 depth=0 open unfinished\n"
            "1/1 3000+4000 depth=1 child\n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_end_events"), "2");
  EXPECT_EQ(extra_value(result.trace, "unfinished_slices"), "1");
}

TEST(ChromeJsonReader, Instants) {
  auto result = read_ok(R"([
    {"ph":"i","name":"mark","cat":"c","s":"t","pid":1,"tid":2,"ts":7,"args":{"why":"test","x":1.5}},
    {"ph":"I","name":"global","s":"g","pid":1,"tid":2,"ts":8}
  ])");
  EXPECT_EQ(instant_rows(result.trace),
            "1/2 7000 mark [c] {why='test', x=1.5d}\n"
            "1/2 8000 global\n");
  EXPECT_EQ(result.trace.slices.size(), 0u);
}

TEST(ChromeJsonReader, CountersOneTrackPerKey) {
  auto result = read_ok(R"([
    {"ph":"C","name":"memory","pid":3,"ts":1,"args":{"value":10}},
    {"ph":"C","name":"memory","pid":3,"ts":2,"args":{"value":12.5}},
    {"ph":"C","name":"io","pid":3,"ts":2,"args":{"read":1,"write":2,"label":"not a number"}}
  ])");
  EXPECT_EQ(counter_rows(result.trace),
            "3 memory 1000 10\n"
            "3 memory 2000 12.5\n"
            "3 io read 2000 1\n"
            "3 io write 2000 2\n");
}

TEST(ChromeJsonReader, MetadataNamesProcessesAndThreads) {
  auto result = read_ok(R"([
    {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"server"}},
    {"ph":"M","name":"thread_name","pid":1,"tid":7,"args":{"name":"worker"}},
    {"ph":"M","name":"process_sort_index","pid":1,"args":{"sort_index":3}},
    {"ph":"M","name":"thread_sort_index","pid":1,"tid":7,"args":{"sort_index":3}},
    {"ph":"X","name":"a","pid":1,"tid":7,"ts":0,"dur":1}
  ])");
  EXPECT_EQ(process_name(result.trace, 1), "server");
  EXPECT_EQ(thread_name(result.trace, 1, 7), "worker");
  EXPECT_EQ(result.trace.tracks.size(), 1u);
}

TEST(ChromeJsonReader, OtherPhasesAreSkippedAndCounted) {
  // Samples and object snapshots have no table in the model.
  auto result = read_ok(R"([
    {"ph":"P","name":"sample","pid":1,"tid":1,"ts":0},
    {"ph":"N","name":"obj","id":"0x1","pid":1,"tid":1,"ts":0},
    {"ph":"O","name":"obj","id":"0x1","pid":1,"tid":1,"ts":1,"args":{"snapshot":{}}},
    {"ph":"D","name":"obj","id":"0x1","pid":1,"tid":1,"ts":2},
    {"ph":"O","name":"obj","id":"0x1","pid":1,"tid":1,"ts":1},
    {"ph":"X","name":"kept","pid":1,"tid":1,"ts":0,"dur":1}
  ])");
  EXPECT_EQ(result.trace.slices.size(), 1u);
  EXPECT_EQ(extra_value(result.trace, "skipped_events.P"), "1");
  EXPECT_EQ(extra_value(result.trace, "skipped_events.N"), "1");
  EXPECT_EQ(extra_value(result.trace, "skipped_events.O"), "2");
  EXPECT_EQ(extra_value(result.trace, "skipped_events.D"), "1");
}

TEST(ChromeJsonReader, ArgTypesAndNestedValuesAsCompactJson) {
  auto result = read_ok(R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1,"args":{
    "int":-5, "big":18446744073709551615, "real":0.25, "yes":true, "no":false, "text":"h\u00e9\"",
    "none":null, "dims":[[8, 16], [32]], "object":{"k": [1, {"z": null}]}}}])");
  EXPECT_EQ(slice_rows(result.trace),
            "1/1 0+1000 depth=0 a {int=-5, big=1.84467e+19d, real=0.25d, yes=true, no=false, "
            "text='h\xC3\xA9\"', none='null', dims='[[8,16],[32]]', "
            "object='{\"k\":[1,{\"z\":null}]}'}\n");
}

TEST(ChromeJsonReader, StringAndNumericPidsAndTids) {
  auto result = read_ok(R"([
    {"ph":"X","name":"a","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":1},
    {"ph":"X","name":"b","pid":"42","tid":"7","ts":0,"dur":1},
    {"ph":"X","name":"c","pid":42.0,"tid":7,"ts":2,"dur":1},
    {"ph":"M","name":"process_name","pid":"Named","args":{"name":"explicit"}},
    {"ph":"X","name":"d","pid":"Named","tid":1,"ts":0,"dur":1}
  ])");
  const Trace& trace = result.trace;
  ASSERT_EQ(trace.tracks.size(), 3u);
  const auto& spans = trace.tracks[trace.slices.track[0]];
  EXPECT_EQ(trace.str(trace.slices.name[0]), "a");
  EXPECT_GE(spans.pid, int64_t{1} << 30);
  EXPECT_LT(spans.pid, int64_t{1} << 31);
  EXPECT_EQ(process_name(trace, spans.pid), "Spans");
  EXPECT_EQ(trace.str(spans.name), "PyTorch Profiler");
  // "42" and 42.0 are the same process as 42; "7" the same thread as 7.
  EXPECT_EQ(trace.tracks[trace.slices.track[1]].pid, 42);
  EXPECT_EQ(trace.slices.track[1], trace.slices.track[2]);
  EXPECT_EQ(trace.str(trace.tracks[trace.slices.track[1]].name), "");
  // A metadata name wins over the string itself.
  const auto& named = trace.tracks[trace.slices.track[3]];
  EXPECT_EQ(process_name(trace, named.pid), "explicit");
  // The mapping is stable: the same strings give the same numbers in another read.
  auto again = read_ok(R"([{"ph":"X","name":"z","pid":"Spans","tid":0,"ts":0,"dur":1}])");
  EXPECT_EQ(again.trace.tracks[0].pid, spans.pid);
}

// ---- Damaged and invalid input ------------------------------------------------------------

TEST(ChromeJsonReader, CleanlyUnterminatedArrayIsNotDamage) {
  for (
      std::string_view json :
      {R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":1},)",
       R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":1}
  )",
       R"({"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1},{"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":1}],)"}) {
    auto result = read_ok(json);
    EXPECT_FALSE(result.damage) << json;
    EXPECT_EQ(slice_rows(result.trace), "1/1 0+1000 depth=0 a\n1/1 2000+1000 depth=0 b\n") << json;
    EXPECT_TRUE(result.trace.run.complete);
  }
  auto empty = read_ok("[");
  EXPECT_EQ(empty.trace.slices.size(), 0u);
  EXPECT_FALSE(empty.damage);
}

TEST(ChromeJsonReader, ArrayCutMidEventKeepsCompleteEventsAndReportsDamage) {
  std::string complete = R"({"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1},)";
  for (std::string_view tail : {R"({"ph":"X","na)", R"({"ph":"X","name":"b","args":{"x":[1,2)",
                                R"({"ph":"X","name":"b","ts":12)", R"({)"}) {
    std::string json = complete + " " + std::string(tail);
    auto result = read_ok(json);
    ASSERT_TRUE(result.damage) << json;
    EXPECT_EQ(result.damage->byte_offset, complete.size() + 1) << json;
    EXPECT_EQ(slice_rows(result.trace), "1/1 0+1000 depth=0 a\n") << json;
    EXPECT_FALSE(result.trace.run.complete);
  }
}

TEST(ChromeJsonReader, InvalidJsonGivesByteOffset) {
  std::string json = R"({"traceEvents":[{"ph":"X","name":"a" "ts":0}]})";
  auto result = read_chrome_json(json);
  ASSERT_FALSE(result.ok());
  ASSERT_TRUE(result.error->has_offset);
  EXPECT_EQ(result.error->byte_offset, json.find("\"ts\""));
  EXPECT_NE(result.error->message.find("invalid JSON"), std::string::npos) << result.error->message;
  EXPECT_EQ(result.error->to_string("t.json").rfind("t.json: at byte 37: invalid JSON", 0), 0u)
      << result.error->to_string("t.json");

  auto trailing = read_chrome_json(R"([] x)");
  ASSERT_FALSE(trailing.ok());
  EXPECT_EQ(trailing.error->byte_offset, 3u);

  auto bad_literal = read_chrome_json(R"([{"ph":tru}])");
  ASSERT_FALSE(bad_literal.ok());
  EXPECT_EQ(bad_literal.error->byte_offset, 10u);

  auto not_json = read_chrome_json("hello");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.error->byte_offset, 0u);

  auto scalar_events = read_chrome_json(R"({"traceEvents": 3})");
  ASSERT_FALSE(scalar_events.ok());
  EXPECT_EQ(scalar_events.error->byte_offset, 16u);

  auto no_events = read_chrome_json(R"({"something": []})");
  ASSERT_FALSE(no_events.ok());
}

TEST(ChromeJsonReader, EmptyInputIsAnError) {
  for (std::string_view json : {"", "   \n", "\xEF\xBB\xBF"}) {
    auto result = read_chrome_json(json);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.error->message.find("empty"), std::string::npos);
  }
  auto empty_events = read_ok(R"({"traceEvents":[]})");
  EXPECT_EQ(empty_events.trace.slices.size(), 0u);
}

TEST(ChromeJsonReader, MalformedEventsAreSkippedWithTheFirstOffset) {
  std::string json =
      R"([{"ph":"X","name":"ok","pid":1,"tid":1,"ts":0,"dur":1}, 42, {"name":"no phase"},
    {"ph":"X","name":"bad ts","ts":"soon"}, {"ph":"X","name":"bad dur","ts":1,"dur":"long"}, [1]])";
  auto result = read_ok(json);
  EXPECT_EQ(slice_rows(result.trace), "1/1 0+1000 depth=0 ok\n");
  EXPECT_EQ(extra_value(result.trace, "invalid_events"), "5");
  EXPECT_EQ(extra_value(result.trace, "first_invalid_event"),
            "event 1 at byte " + std::to_string(json.find("42")) + ": not a JSON object");
}

TEST(ChromeJsonReader, HugeNumbersAreRejectedPerEventWithoutOverflow) {
  auto result = read_ok(R"([
    {"ph":"X","name":"huge ts","pid":1,"tid":1,"ts":1e300,"dur":1},
    {"ph":"X","name":"huge int ts","pid":1,"tid":1,"ts":9223372036854775807,"dur":1},
    {"ph":"X","name":"beyond int64","pid":1,"tid":1,"ts":18446744073709551615,"dur":1},
    {"ph":"X","name":"huge dur","pid":1,"tid":1,"ts":1,"dur":1e16},
    {"ph":"X","name":"near limit","pid":1,"tid":1,"ts":9000000000000000,"dur":9000000000000000},
    {"ph":"X","name":"pid","pid":1e30,"tid":-1,"ts":0,"dur":1}
  ])");
  EXPECT_EQ(extra_value(result.trace, "invalid_events"), "4");
  EXPECT_EQ(slice_rows(result.trace),
            "1/1 9000000000000000000+223372036854775807 depth=0 near limit\n"
            "0/-1 0+1000 depth=0 pid\n");
  // A number beyond double range is invalid JSON.
  auto out_of_range = read_chrome_json(R"([{"ph":"X","ts":1e400}])");
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_EQ(out_of_range.error->byte_offset, 16u) << out_of_range.error->message;
}

TEST(ChromeJsonReader, DeepNesting) {
  std::string args_nested_ok(500, '[');
  args_nested_ok += std::string(500, ']');
  auto ok = read_ok(R"([{"ph":"X","name":"deep","pid":1,"tid":1,"ts":0,"dur":1,"args":{"d":)" +
                    args_nested_ok + "}}]");
  ASSERT_EQ(ok.trace.slice_args.size(), 1u);
  EXPECT_EQ(ok.trace.str(ok.trace.slice_args.value[0].string_value), args_nested_ok);

  std::string too_deep = R"([{"ph":"X","args":{"d":)" + std::string(100000, '[');
  too_deep += std::string(100000, ']') + "}}]";
  auto result = read_chrome_json(too_deep);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error->message.find("nested deeper"), std::string::npos)
      << result.error->message;
  ASSERT_TRUE(result.error->has_offset);

  std::string cut_deep = "[" + std::string(50000, '{');
  auto cut = read_chrome_json(cut_deep);  // must not crash; a cut first event leaves nothing
  EXPECT_TRUE(cut.ok());
  EXPECT_TRUE(cut.damage);
}

TEST(ChromeJsonReader, TopLevelKeysAndPyTorchDetection) {
  auto result = read_ok(R"({"schemaVersion":1,"deviceProperties":[{"id":0}],"traceName":"x.json",
    "host_name":"box","trace_id":"B9B92795DC184173AC96069D81FCB5F2","traceEvents":[]})");
  EXPECT_EQ(result.trace.run.source_format, "pytorch-profiler");
  EXPECT_EQ(extra_value(result.trace, "schemaVersion"), "1");
  EXPECT_EQ(extra_value(result.trace, "traceName"), "x.json");
  EXPECT_EQ(extra_value(result.trace, "deviceProperties"), R"([{"id":0}])");
  EXPECT_EQ(result.trace.run.host, "box");
  EXPECT_EQ(result.trace.run.trace_id.to_hex(), "b9b92795dc184173ac96069d81fcb5f2");
}

TEST(ChromeJsonReader, OnnxRuntimeDetection) {
  auto result = read_ok(
      R"([{"cat":"Session","pid":1,"tid":1,"dur":5,"ts":1,"ph":"X","name":"model_run","args":{}}])");
  EXPECT_EQ(result.trace.run.source_format, "onnxruntime");
}

// ---- Category mapping ---------------------------------------------------------------------

// "track: name [category]" per slice, track by track in the order they were created.
std::string name_and_category_rows(const Trace& trace) {
  std::string text;
  for (trace::TrackId track = 0; track < trace.tracks.size(); ++track)
    for (size_t row = 0; row < trace.slices.size(); ++row)
      if (trace.slices.track[row] == track)
        text += trace.track_label(track) + ": " + std::string(trace.str(trace.slices.name[row])) +
                " [" + std::string(trace.str(trace.slices.category[row])) + "]\n";
  return text;
}

TEST(ChromeJsonReader, PyTorchCategoriesAreMappedAndTheMapIsRecorded) {
  // Shaped like torch.profiler's export_chrome_trace with CUDA activities and with_modules.
  auto result = read_ok(R"json({"schemaVersion":1,"deviceProperties":[],"traceEvents":[
    {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}},
    {"ph":"X","cat":"python_function","name":"nn.Module: Linear_0","pid":1,"tid":1,"ts":1,"dur":90},
    {"ph":"X","cat":"python_function","name":"torch/nn/modules/linear.py(125): forward","pid":1,"tid":1,"ts":2,"dur":80},
    {"ph":"X","cat":"user_annotation","name":"step","pid":1,"tid":1,"ts":0,"dur":100},
    {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":3,"dur":70,"args":{"External id":2}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":4,"dur":5},
    {"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":1,"tid":1,"ts":10,"dur":5},
    {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":30,"args":{"stream":7}},
    {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":7,"ts":11,"dur":8},
    {"ph":"X","cat":"gpu_memset","name":"Memset","pid":0,"tid":7,"ts":51,"dur":2},
    {"ph":"X","cat":"gpu_user_annotation","name":"step","pid":0,"tid":7,"ts":11,"dur":45},
    {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":200},
    {"ph":"X","cat":"something_new","name":"later","pid":1,"tid":1,"ts":150,"dur":1},
    {"ph":"i","cat":"cpu_op","name":"mark","pid":1,"tid":1,"ts":160,"s":"t"}]})json");
  const Trace& trace = result.trace;
  EXPECT_EQ(trace.run.source_format, "pytorch-profiler");
  EXPECT_EQ(name_and_category_rows(trace),
            "main: step [annotation]\n"
            "main: nn.Module: Linear_0 [module]\n"
            "main: torch/nn/modules/linear.py(125): forward [python]\n"
            "main: aten::linear [operator]\n"
            "main: cudaLaunchKernel [cuda_runtime]\n"
            "main: cuLaunchKernel [cuda_runtime]\n"
            "main: later [something_new]\n"
            "thread 7: step [annotation]\n"
            "thread 7: Memcpy HtoD [gpu_memcpy]\n"
            "thread 7: gemm [gpu_kernel]\n"
            "thread 7: Memset [gpu_memset]\n"
            "PyTorch Profiler: PyTorch Profiler (0) [profiler]\n");
  // Module -> Python function -> operator nest on the thread's own track.
  EXPECT_EQ(trace.tracks.size(), 3u);
  for (size_t row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == "aten::linear") {
      EXPECT_EQ(trace.slices.depth[row], 3);
      EXPECT_EQ(trace.str(trace.slices.name[trace.slices.parent[row]]),
                "torch/nn/modules/linear.py(125): forward");
    }
  EXPECT_EQ(instant_rows(trace), "1/1 160000 mark [operator]\n");
  // Only the entries that applied, in the table's order; identities are not listed.
  EXPECT_EQ(extra_value(trace, "category_map"),
            "cpu_op=operator,kernel=gpu_kernel,cuda_driver=cuda_runtime,"
            "python_function[nn.Module: *]=module,"
            "python_function=python,user_annotation=annotation,"
            "gpu_user_annotation=annotation,Trace=profiler");
}

TEST(ChromeJsonReader, OnnxRuntimeCategoriesAreMappedByEventName) {
  // Shaped like an ONNX Runtime profile (SessionOptions.enable_profiling); older releases
  // and some providers also write fence events around each node.
  auto result = read_ok(R"([
    {"cat":"Session","pid":9,"tid":9,"dur":100,"ts":0,"ph":"X","name":"model_run","args":{}},
    {"cat":"Session","pid":9,"tid":9,"dur":90,"ts":5,"ph":"X","name":"SequentialExecutor::Execute","args":{}},
    {"cat":"Node","pid":9,"tid":9,"dur":1,"ts":10,"ph":"X","name":"matmul_fence_before","args":{"op_name":"MatMul"}},
    {"cat":"Node","pid":9,"tid":9,"dur":40,"ts":11,"ph":"X","name":"matmul_kernel_time","args":{"op_name":"MatMul","provider":"CPUExecutionProvider","input_type_shape":[{"float":[4,16]},{"float":[16,8]}],"output_type_shape":[{"float":[4,8]}]}},
    {"cat":"Node","pid":9,"tid":9,"dur":1,"ts":52,"ph":"X","name":"matmul_fence_after","args":{"op_name":"MatMul"}},
    {"cat":"Node","pid":9,"tid":9,"dur":3,"ts":60,"ph":"X","name":"relu_other","args":{}}
  ])");
  const Trace& trace = result.trace;
  EXPECT_EQ(trace.run.source_format, "onnxruntime");
  EXPECT_EQ(slice_rows(trace),
            "9/9 0+100000 depth=0 model_run [session]\n"
            "9/9 5000+90000 depth=1 SequentialExecutor::Execute [session]\n"
            "9/9 10000+1000 depth=2 matmul_fence_before [operator_fence] {op_name='MatMul'}\n"
            "9/9 11000+40000 depth=2 matmul_kernel_time [operator] {op_name='MatMul', "
            "provider='CPUExecutionProvider', "
            "input_type_shape='[{\"float\":[4,16]},{\"float\":[16,8]}]', "
            "output_type_shape='[{\"float\":[4,8]}]'}\n"
            "9/9 52000+1000 depth=2 matmul_fence_after [operator_fence] {op_name='MatMul'}\n"
            "9/9 60000+3000 depth=2 relu_other [Node]\n");
  EXPECT_EQ(extra_value(trace, "category_map"),
            "Session=session,Node[*_kernel_time]=operator,Node[*_fence_before]=operator_fence,"
            "Node[*_fence_after]=operator_fence");
}

TEST(ChromeJsonReader, CategoriesOfGenericChromeJsonAreKept) {
  // Neither PyTorch's top-level keys nor ONNX Runtime's categories: nothing is mapped,
  // even categories that PyTorch would map.
  auto result = read_ok(R"({"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2},
    {"ph":"X","cat":"kernel","name":"b","pid":1,"tid":1,"ts":5,"dur":2}]})");
  EXPECT_EQ(result.trace.run.source_format, "chrome-json");
  EXPECT_EQ(name_and_category_rows(result.trace), "thread 1: a [cpu_op]\nthread 1: b [kernel]\n");
  EXPECT_EQ(extra_value(result.trace, "category_map"), "<absent>");
}

TEST(ChromeJsonReader, MappedCategoriesSurviveARoundTripWithoutBeingMappedTwice) {
  auto first = read_ok(R"({"schemaVersion":1,"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2},
    {"ph":"X","cat":"python_function","name":"nn.Module: Net_0","pid":1,"tid":1,"ts":0,"dur":5}]})");
  auto second = read_ok(write_chrome_json(first.trace));
  EXPECT_EQ(second.trace.run.source_format, "pytorch-profiler");
  EXPECT_EQ(name_and_category_rows(second.trace),
            "thread 1: nn.Module: Net_0 [module]\nthread 1: aten::mm [operator]\n");
  EXPECT_EQ(extra_value(second.trace, "category_map"),
            "cpu_op=operator,python_function[nn.Module: *]=module");
}

// ---- Fixtures from the real tools ---------------------------------------------------------

TEST(ChromeJsonReader, PyTorchProfilerFixture) {
  std::string json = read_fixture("pytorch_profiler_small.json");
  ASSERT_FALSE(json.empty()) << "run tests/data/generate_fixtures.py";
  auto result = read_ok(json);
  const Trace& trace = result.trace;
  EXPECT_FALSE(result.damage);
  EXPECT_EQ(trace.run.source_format, "pytorch-profiler");
  EXPECT_EQ(trace.slices.size(), 70u);
  EXPECT_EQ(trace.instants.size(), 2u);
  EXPECT_EQ(trace.counters.size(), 0u);
  EXPECT_EQ(extra_value(trace, "schemaVersion"), "1");
  EXPECT_EQ(extra_value(trace, "displayTimeUnit"), "ms");
  EXPECT_EQ(extra_value(trace, "invalid_events"), "<absent>");
  std::map<std::string, int> count_by_name;
  std::map<std::string, int64_t> total_by_name;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    std::string name(trace.str(trace.slices.name[row]));
    ++count_by_name[name];
    total_by_name[name] += trace.slices.dur[row];
  }
  EXPECT_EQ(count_by_name["inference_step"], 3);
  EXPECT_EQ(count_by_name["aten::linear"], 6);
  EXPECT_EQ(count_by_name["aten::relu"], 3);
  EXPECT_EQ(count_by_name["PyTorch Profiler (0)"], 1);
  EXPECT_EQ(total_by_name["PyTorch Profiler (0)"], 2115595);
  // The profiler's own span sits on a string pid/tid, named after them.
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    if (trace.str(trace.slices.name[row]) != "PyTorch Profiler (0)") continue;
    const auto& track = trace.tracks[trace.slices.track[row]];
    EXPECT_EQ(process_name(trace, track.pid), "Spans");
    EXPECT_EQ(trace.str(track.name), "PyTorch Profiler");
  }
  // Every cpu_op keeps its "Input Dims" as compact JSON.
  auto key = trace.strings.find("Input Dims");
  ASSERT_TRUE(key);
  int with_dims = 0;
  for (size_t arg = 0; arg < trace.slice_args.size(); ++arg)
    if (trace.slice_args.key[arg] == *key) ++with_dims;
  int cpu_ops = 0;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.category[row]) == "operator") ++cpu_ops;
  EXPECT_EQ(with_dims, cpu_ops);
  EXPECT_EQ(cpu_ops, 66);
  EXPECT_EQ(extra_value(trace, "category_map"),
            "cpu_op=operator,user_annotation=annotation,Trace=profiler");
}

TEST(ChromeJsonReader, OnnxRuntimeFixture) {
  std::string json = read_fixture("onnxruntime_profile_small.json");
  ASSERT_FALSE(json.empty()) << "run tests/data/generate_fixtures.py";
  auto result = read_ok(json);
  const Trace& trace = result.trace;
  EXPECT_EQ(trace.run.source_format, "onnxruntime");
  EXPECT_EQ(trace.slices.size(), 11u);
  std::map<std::string, int> count_by_category;
  for (size_t row = 0; row < trace.slices.size(); ++row)
    ++count_by_category[std::string(trace.str(trace.slices.category[row]))];
  EXPECT_EQ(count_by_category["session"], 8);
  EXPECT_EQ(count_by_category["operator"], 3);
  auto op_name = trace.strings.find("op_name");
  ASSERT_TRUE(op_name);
  int op_names = 0;
  for (size_t arg = 0; arg < trace.slice_args.size(); ++arg)
    if (trace.slice_args.key[arg] == *op_name) ++op_names;
  EXPECT_EQ(op_names, 3);
}

// ---- Writer and round trip ----------------------------------------------------------------

Trace make_sample_trace() {
  Trace trace;
  trace.run.source_format = "opsight";
  trace.run.opsight_version = "0.1.0";
  trace.run.command_line = "python serve.py --name \"x\"";
  trace.run.host = "host\x01\xFF";
  trace.run.pid = 77;
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1700000000000000000;
  trace.run.trace_id = trace::TraceId{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  trace.run.overhead_ns = 1234;
  trace.run.extra.emplace_back("model", "mlp");
  trace.process(77).name = trace.intern("serve");
  auto main_track = trace.thread_track(77, 77);
  trace.tracks[main_track].name = trace.intern("main");
  auto worker = trace.thread_track(77, 80);
  auto root = trace.slices.add(4403183387073872, 5000, trace.intern("request"), trace.intern("py"),
                               main_track);
  trace.slice_args.add(root, trace.intern("batch"), trace::ArgValue::of_int(8));
  trace.slice_args.add(root, trace.intern("ratio"), trace::ArgValue::of_double(1.0));
  trace.slice_args.add(root, trace.intern("path"),
                       trace::ArgValue::of_string(trace.intern("a\"b\\c\n\t\x02\xC3\xA9")));
  trace.slice_args.add(root, trace.intern("ok"), trace::ArgValue::of_bool(true));
  trace.slices.add(4403183387073873, 1, trace.intern("step"), 0, main_track);
  trace.slices.add(-1500, 999, trace.intern("negative"), 0, worker, trace::kSliceUnfinished);
  auto mark = trace.instants.add(12, trace.intern("mark"), trace.intern("c"), worker);
  trace.instant_args.add(mark, trace.intern("third"), trace::ArgValue::of_double(1.0 / 3));
  auto memory = trace.counter_track(77, "memory");
  trace.counters.add(10, memory, 1.5e9);
  trace.counters.add(20, memory, 2);
  trace.finalize();
  return trace;
}

TEST(ChromeJsonWriter, WritesExactEvents) {
  Trace trace = make_sample_trace();
  std::string json = write_chrome_json(trace);
  EXPECT_EQ(json.rfind("{\"traceEvents\":[\n", 0), 0u);
  EXPECT_NE(
      json.find(R"({"ph":"M","name":"process_name","pid":77,"tid":0,"args":{"name":"serve"}})"),
      std::string::npos);
  EXPECT_NE(
      json.find(R"({"ph":"M","name":"thread_name","pid":77,"tid":77,"args":{"name":"main"}})"),
      std::string::npos);
  std::string root_span = trace::span_id_to_hex(trace.slices.span_id[0]);
  EXPECT_NE(
      json.find(
          R"({"ph":"X","pid":77,"tid":77,"ts":4403183387075.372,"dur":5.000,"name":"request","cat":"py","args":{"opsight.span_id":")" +
          root_span + R"(","batch":8,"ratio":1.0,"path":"a\"b\\c\n\t\u0002é","ok":true}})"),
      std::string::npos)
      << json;
  // Timestamps are relative to the first one (-1500 ns), which otherData carries.
  EXPECT_NE(json.find(R"("time_base_ns":-1500)"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":0.000,"dur":0.999,"name":"negative","args":{"opsight.span_id":")"),
            std::string::npos);
  EXPECT_NE(json.find(R"(","opsight.unfinished":true}})"), std::string::npos);
  EXPECT_NE(
      json.find(
          R"({"ph":"i","s":"t","pid":77,"tid":80,"ts":1.512,"name":"mark","cat":"c","args":{"third":0.3333333333333333}})"),
      std::string::npos);
  EXPECT_NE(
      json.find(R"({"ph":"C","pid":77,"ts":1.510,"name":"memory","args":{"value":1500000000.0}})"),
      std::string::npos);
  EXPECT_NE(json.find(R"("opsight.parent_span_id":")" + root_span + "\""), std::string::npos);
  EXPECT_NE(json.find("\"host\":\"host\\u0001\xEF\xBF\xBD\""), std::string::npos);
  EXPECT_NE(json.find(R"(],"displayTimeUnit":"ns","otherData":{"writer":"opsight")"),
            std::string::npos);
}

TEST(ChromeJsonWriter, EscapesControlCharactersAndReplacesInvalidUtf8) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  // Truncated 3-byte sequence, lone continuation, overlong '/', UTF-16 surrogate, > U+10FFFF,
  // then valid 2-, 3- and 4-byte sequences and DEL.
  trace.slices.add(0, 1,
                   trace.intern("\xE2\x82|\x80|\xC0\xAF|\xED\xA0\x80|\xF4\x90\x80\x80|"
                                "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F\x1F"),
                   0, track);
  trace.finalize();
  std::string json = write_chrome_json(trace);
  EXPECT_NE(
      json.find(
          "\"name\":\"\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD|"
          "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
          "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F\\u001f\""),
      std::string::npos)
      << json;
  EXPECT_TRUE(read_chrome_json(json).ok());
}

TEST(ChromeJsonWriter, RoundTripKeepsSlicesArgsIdsAndRunInfo) {
  Trace original = make_sample_trace();
  auto result = read_ok(write_chrome_json(original));
  const Trace& copy = result.trace;
  EXPECT_FALSE(result.damage);
  EXPECT_EQ(slice_rows(copy), slice_rows(original));
  EXPECT_EQ(instant_rows(copy), instant_rows(original));
  EXPECT_EQ(counter_rows(copy), counter_rows(original));
  EXPECT_EQ(copy.slices.span_id, original.slices.span_id);
  EXPECT_EQ(copy.slices.parent, original.slices.parent);
  EXPECT_EQ(copy.slices.depth, original.slices.depth);
  EXPECT_EQ(process_name(copy, 77), "serve");
  EXPECT_EQ(thread_name(copy, 77, 77), "main");
  EXPECT_EQ(copy.run.source_format, "opsight");
  EXPECT_EQ(copy.run.opsight_version, "0.1.0");
  EXPECT_EQ(copy.run.command_line, original.run.command_line);
  EXPECT_EQ(copy.run.pid, 77);
  EXPECT_TRUE(copy.run.has_unix_offset);
  EXPECT_EQ(copy.run.unix_offset_ns, original.run.unix_offset_ns);
  EXPECT_EQ(copy.run.trace_id, original.run.trace_id);
  EXPECT_EQ(copy.run.overhead_ns, 1234);
  EXPECT_EQ(extra_value(copy, "model"), "mlp");
  // Written again, the file is the same.
  EXPECT_EQ(write_chrome_json(copy), write_chrome_json(original));
}

TEST(ChromeJsonWriter, RoundTripOfForeignFixtures) {
  for (const char* name : {"pytorch_profiler_small.json", "onnxruntime_profile_small.json"}) {
    auto first = read_ok(read_fixture(name));
    auto second = read_ok(write_chrome_json(first.trace));
    EXPECT_EQ(slice_rows(second.trace), slice_rows(first.trace)) << name;
    EXPECT_EQ(instant_rows(second.trace), instant_rows(first.trace)) << name;
    EXPECT_EQ(second.trace.run.source_format, first.trace.run.source_format) << name;
  }
}

TEST(ChromeJsonWriter, UnfinalizedTraceAndEmptyTrace) {
  Trace empty;
  auto empty_back = read_ok(write_chrome_json(empty));
  EXPECT_EQ(empty_back.trace.slices.size(), 0u);

  Trace raw;  // never finalized: args_begin empty, args out of owner order
  auto track = raw.thread_track(1, 1);
  raw.slices.add(0, 10, raw.intern("a"), 0, track);
  raw.slices.add(20, 10, raw.intern("b"), 0, track);
  raw.slice_args.add(1, raw.intern("k"), trace::ArgValue::of_int(2));
  raw.slice_args.add(0, raw.intern("k"), trace::ArgValue::of_int(1));
  auto back = read_ok(write_chrome_json(raw));
  EXPECT_EQ(slice_rows(back.trace), "1/1 0+10 depth=0 a {k=1}\n1/1 20+10 depth=0 b {k=2}\n");
}

}  // namespace
}  // namespace opsight::io

namespace opsight::io {
namespace {

// Inputs the fuzzer (chrome_json_reader_fuzzer) found problems with. The first made the
// reader memcpy from a null pointer (an empty suffix) — undefined behaviour that UBSan
// reports in the asan and fuzz builds.
// The vectorised splitter must cut exactly where the portable one does, whatever falls on
// its 64-byte block boundaries: strings holding brackets, commas and escaped quotes, runs
// of backslashes, a string or a nesting level open across a block, arrays that never close.
TEST(ChromeJsonSplitter, VectorisedAndPortableSplitsAgree) {
  const char* pieces[] = {R"({"a":1})",
                          R"("x,]}")",
                          R"("q\"[")",
                          R"("\\")",
                          R"(["\\\"",2])",
                          R"({"k":[[],{}]})",
                          R"(" \\\\ ")",
                          "  ",
                          "3",
                          R"({"s":"}]}]"})",
                          "\n",
                          R"("\u005d")"};
  std::mt19937 random(12345);
  int compared = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = "[";
    size_t elements = random() % 40;
    for (size_t element = 0; element < elements; ++element) {
      if (element > 0) text += ',';
      size_t parts = 1 + random() % 3;
      std::string value;
      for (size_t part = 0; part < parts; ++part) value += pieces[random() % std::size(pieces)];
      text += (random() % 2 == 0) ? "[" + value + "]" : value;
    }
    if (random() % 8 != 0) text += "]";            // sometimes never closed
    if (random() % 8 == 0) text.insert(0, "   ");  // the array not at offset 0
    if (random() % 8 == 0) text += std::string(random() % 70, ' ');
    size_t array_start = text.find('[');
    for (size_t window : {size_t{0}, size_t{1}, size_t{17}, size_t{64}, size_t{200}}) {
      auto fast = chrome_json::split_array_elements(text, array_start, window);
      auto portable = chrome_json::split_array_elements_portable(text, array_start, window);
      ASSERT_EQ(fast.has_value(), portable.has_value()) << text;
      if (!fast) continue;
      EXPECT_EQ(fast->windows, portable->windows) << text << " window " << window;
      EXPECT_EQ(fast->array_end, portable->array_end) << text;
      ++compared;
    }
  }
  EXPECT_GT(compared, 5000);  // most inputs close their array
}

// Span ids in opsight's files are 16 hex digits, converted 8 at a time: every digit class,
// both cases, and the bytes just outside each range ('/' ':' '@' 'G' '`' 'g', a byte above
// 0x7F) at every position; an id that is not 16 hex digits stays an ordinary argument.
TEST(ChromeJsonReader, SpanIdsOfEveryHexDigitAndNonDigit) {
  auto span_id_of = [](const std::string& text) -> std::optional<uint64_t> {
    std::string json =
        R"({"otherData":{"writer":"opsight"},"traceEvents":[)"
        R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1,"args":{"opsight.span_id":")" +
        text + R"("}}]})";
    auto result = read_ok(json);
    if (result.trace.slices.size() != 1) return std::nullopt;
    if (result.trace.slice_args.size() != 0) return std::nullopt;  // kept as an argument
    return result.trace.slices.span_id[0];
  };
  EXPECT_EQ(span_id_of("0123456789abcdef"), 0x0123456789abcdefULL);
  EXPECT_EQ(span_id_of("FEDCBA9876543210"), 0xfedcba9876543210ULL);
  EXPECT_EQ(span_id_of("a0B1c2D3e4F5a6B7"), 0xa0b1c2d3e4f5a6b7ULL);
  EXPECT_EQ(span_id_of("00000000000000ff"), 0xffULL);
  EXPECT_EQ(span_id_of("abc"), 0xabcULL);  // shorter ids take the digit-by-digit path
  EXPECT_EQ(span_id_of("0123456789abcdef0"), std::nullopt);
  for (size_t position = 0; position < 16; ++position) {
    for (char bad : {'/', ':', '@', 'G', '`', 'g', ' ', '\xC3'}) {
      std::string text = "0123456789abcdef";
      text[position] = bad;
      if (bad == '\xC3') {  // a whole two-byte UTF-8 character ("é"), length kept
        if (position == 15) continue;
        text[position + 1] = '\xA9';
      }
      EXPECT_EQ(span_id_of(text), std::nullopt) << text;
    }
  }
}

// Inputs of several 1 MiB windows are parsed and decoded on both threads while the calling
// thread merges them into the model: the result must be the one a single thread gets,
// slice for slice, including begin/end pairs that span windows, and a bad window must
// still give the byte offset of the problem.
TEST(ChromeJsonReader, HelperThreadReadsWhatOneThreadReads) {
  std::string json = R"({"traceEvents":[)";
  constexpr int kEvents = 60000;  // about 4.7 MB: five windows
  for (int event = 0; event < kEvents; ++event) {
    if (event > 0) json += ",\n";
    int tid = event % 3;
    switch (event % 4) {
      case 0:
        json += R"({"ph":"B","name":"outer","pid":1,"tid":)" + std::to_string(tid) + R"(,"ts":)" +
                std::to_string(event * 10) + "}";
        break;
      case 3:
        json += R"({"ph":"E","pid":1,"tid":)" + std::to_string(tid) + R"(,"ts":)" +
                std::to_string(event * 10 + 5) + "}";
        break;
      default:
        json += R"({"ph":"X","name":"op)" + std::to_string(event % 7) +
                R"(","cat":"c","pid":1,"tid":)" + std::to_string(tid) + R"(,"ts":)" +
                std::to_string(event * 10) + R"(.5,"dur":2,"args":{"dims":[[8,)" +
                std::to_string(event % 5) + R"(],[1]],"k":"v"}})";
    }
  }
  json += "]}";
  ASSERT_GT(json.size(), size_t{4} << 20);
  auto one = read_chrome_json(json, 1);
  auto two = read_chrome_json(json, 2);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(one.trace.slices.size(), size_t{kEvents} * 3 / 4);
  EXPECT_EQ(slice_rows(one.trace), slice_rows(two.trace));
  EXPECT_EQ(one.trace.run.extra, two.trace.run.extra);

  // A bad window anywhere (the first, one the helper may be decoding while the caller
  // merges, the last) stops the read, and the careful path names the byte.
  for (int bad_event : {10, 36001, 59990}) {
    std::string broken = json;
    size_t bad = broken.find(R"("ts":)" + std::to_string(bad_event * 10) + ".5");
    ASSERT_NE(bad, std::string::npos) << bad_event;
    broken[bad + 5] = 'x';
    auto broken_one = read_chrome_json(broken, 1);
    auto broken_two = read_chrome_json(broken, 2);
    ASSERT_FALSE(broken_one.ok()) << bad_event;
    ASSERT_FALSE(broken_two.ok()) << bad_event;
    EXPECT_EQ(broken_one.error->byte_offset, bad + 5) << bad_event;
    EXPECT_EQ(broken_two.error->byte_offset, bad + 5) << bad_event;
  }
}

TEST(ChromeJsonReader, FuzzRegressions) {
  for (
      std::string_view input : {std::string_view(
          R"([{"ph":"X","ts":1e300},42,{"name":"no ph"},{"ph":"X","ts":"x"},{"ph":"E","ts":1}])")}) {
    ReadResult result = read_chrome_json(input);
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result.trace.slices.size(), 0u);
    ReadResult again = read_chrome_json(write_chrome_json(result.trace));
    EXPECT_TRUE(again.ok());
  }
}

}  // namespace
}  // namespace opsight::io

namespace opsight::io {
namespace {

TEST(ChromeJsonWriter, ArgsNamedLikeTheWritersOwnSurviveARoundTrip) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  auto row = trace.slices.add(0, 10, trace.intern("a"), 0, track);
  trace.slices.add(20, 10, trace.intern("b"), 0, track);
  trace.slice_args.add(row, trace.intern("span_id"),
                       trace::ArgValue::of_string(trace.intern("00000000000000aa")));
  trace.slice_args.add(row, trace.intern("parent_span_id"), trace::ArgValue::of_int(5));
  trace.finalize();
  auto back = read_chrome_json(write_chrome_json(trace));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back.trace.slices.size(), 2u);
  EXPECT_EQ(back.trace.slices.span_id[0], trace.slices.span_id[0]);
  EXPECT_NE(back.trace.slices.span_id[0], back.trace.slices.span_id[1]);
  ASSERT_EQ(back.trace.slice_args.size(), 2u);
  EXPECT_EQ(back.trace.str(back.trace.slice_args.key[0]), "span_id");
  EXPECT_EQ(back.trace.str(back.trace.slice_args.key[1]), "parent_span_id");
}

TEST(ChromeJsonWriter, LargeTimestampsKeepEveryNanosecond) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(1'700'000'000'000'000'123, 7, trace.intern("epoch"), 0, track);
  trace.slices.add(1'700'000'000'000'001'001, 3, trace.intern("later"), 0, track);
  trace.finalize();
  auto back = read_chrome_json(write_chrome_json(trace));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back.trace.slices.size(), 2u);
  EXPECT_EQ(back.trace.slices.ts[0], 1'700'000'000'000'000'123);
  EXPECT_EQ(back.trace.slices.ts[1], 1'700'000'000'000'001'001);
  EXPECT_EQ(back.trace.slices.dur[1], 3);
}

}  // namespace
}  // namespace opsight::io

namespace opsight::io {
namespace {

// A thread with its own span and two async lanes (one key used twice), plus a real thread
// whose tid is the first synthetic one, which the writer must then skip.
Trace async_lanes_trace() {
  Trace trace;
  auto main_thread = trace.thread_track(7, 100);
  trace.tracks[main_thread].name = trace.intern("main");
  auto clash = trace.thread_track(7, int64_t{1} << 29);
  trace.tracks[clash].name = trace.intern("clash");
  auto first_task = trace.async_track(7, 100, 0xabc, "Task-1 (serve)");
  auto reused = trace.async_track(7, 100, 0xabc, "Task-9 (serve)");
  trace.slices.add(0, 100, trace.intern("loop"), 0, main_thread);
  trace.slices.add(5, 20, trace.intern("other thread"), 0, clash);
  trace.slices.add(10, 50, trace.intern("handle"), 0, first_task);
  trace.slices.add(20, 10, trace.intern("parse"), 0, first_task);
  trace.slices.add(70, 20, trace.intern("handle"), 0, reused);
  trace.instants.add(25, trace.intern("mark"), 0, first_task);
  trace.finalize();
  return trace;
}

TEST(ChromeJsonWriter, AsyncLanesAreThreadsOfTheirOwnAndReadBackAsLanes) {
  Trace trace = async_lanes_trace();
  std::string json = write_chrome_json(trace);
  // Synthetic tids from 2^29 up, skipping the one a real thread has.
  EXPECT_NE(
      json.find(
          R"json({"ph":"M","name":"thread_name","pid":7,"tid":536870913,"args":{"name":"Task-1 (serve)","opsight.async_key":"0000000000000abc","opsight.tid":100}})json"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find(R"json("tid":536870914,"args":{"name":"Task-9 (serve)")json"),
            std::string::npos);
  EXPECT_NE(
      json.find(
          R"json({"ph":"X","pid":7,"tid":536870913,"ts":0.020,"dur":0.010,"name":"parse")json"),
      std::string::npos);
  EXPECT_NE(json.find(R"json({"ph":"i","s":"t","pid":7,"tid":536870913,)json"), std::string::npos);

  auto back = read_ok(json);
  const Trace& copy = back.trace;
  EXPECT_EQ(slice_rows(copy), slice_rows(trace));
  ASSERT_EQ(copy.tracks.size(), trace.tracks.size());
  size_t lanes = 0;
  for (const auto& track : copy.tracks) {
    if (!track.is_async()) continue;
    ++lanes;
    EXPECT_EQ(track.pid, 7);
    EXPECT_EQ(track.tid, 100);
    EXPECT_EQ(track.async_key, 0xabcu);
  }
  EXPECT_EQ(lanes, 2u);
  EXPECT_EQ(copy.track_label(copy.slices.track[3]), "Task-1 (serve)");
  EXPECT_EQ(copy.slices.depth[3], 1);  // parse in the first handle
  EXPECT_EQ(copy.track_label(copy.instants.track[0]), "Task-1 (serve)");
  EXPECT_EQ(write_chrome_json(copy), json);
}

TEST(ChromeJsonReader, LaneMarkersOutsideOpsightFilesAreOrdinaryArgs) {
  auto result = read_ok(R"({"traceEvents":[
    {"ph":"M","name":"thread_name","pid":1,"tid":9,"args":{"name":"t","opsight.async_key":"01","opsight.tid":1}},
    {"ph":"X","pid":1,"tid":9,"ts":1,"dur":1,"name":"a"}]})");
  ASSERT_EQ(result.trace.tracks.size(), 1u);
  EXPECT_FALSE(result.trace.tracks[0].is_async());
  EXPECT_EQ(result.trace.tracks[0].tid, 9);
}

// read_trace_file maps a file and lets the pages of merged windows go (every 8 MiB): what
// it reads must be what read_chrome_json reads from the same bytes in memory, including
// the byte offset of a bad event found after those pages went, and a cut file's damage.
TEST(ChromeJsonReader, AMappedFileReadsAsTheSameBytesInMemory) {
  std::string json = "{\"traceEvents\":[\n";
  for (int event = 0; event < 240'000; ++event)
    json += "{\"ph\":\"X\",\"cat\":\"op\",\"name\":\"n" + std::to_string(event % 7) +
            "\",\"pid\":1,\"tid\":" + std::to_string(event % 3) +
            ",\"ts\":" + std::to_string(event * 10) + ",\"dur\":5,\"args\":{\"k\":\"" +
            std::to_string(event) + "\"}},\n";
  json += "{\"ph\":\"X\",\"name\":\"bad ts\",\"ts\":\"soon\"},\n";
  json += "{\"ph\":\"X\",\"name\":\"last\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}]}\n";
  ASSERT_GT(json.size(), size_t{20} << 20);
  auto path = std::filesystem::temp_directory_path() /
              ("opsight_mapped_" + std::to_string(::getpid()) + ".json");
  for (std::string bytes : {json, json.substr(0, json.size() - 30)}) {
    {
      std::ofstream file(path, std::ios::binary);
      file << bytes;
    }
    auto mapped = read_trace_file(path.string());
    auto in_memory = read_chrome_json(bytes);
    std::filesystem::remove(path);
    ASSERT_TRUE(mapped.ok());
    ASSERT_TRUE(in_memory.ok());
    EXPECT_EQ(mapped.trace.slices.size(), in_memory.trace.slices.size());
    EXPECT_EQ(slice_rows(mapped.trace), slice_rows(in_memory.trace));
    EXPECT_NE(extra_value(mapped.trace, "first_invalid_event"), "<absent>");
    EXPECT_EQ(extra_value(mapped.trace, "first_invalid_event"),
              extra_value(in_memory.trace, "first_invalid_event"));
    EXPECT_EQ(mapped.damage.has_value(), in_memory.damage.has_value());
    if (mapped.damage && in_memory.damage) {
      EXPECT_EQ(mapped.damage->byte_offset, in_memory.damage->byte_offset);
    }
  }
}

}  // namespace
}  // namespace opsight::io
