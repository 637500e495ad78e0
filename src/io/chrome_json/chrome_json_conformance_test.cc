// Conformance of the Chrome JSON reader with what Perfetto's trace_processor documents for
// its JSON importer (the behaviours its public diff tests describe; the cases here are our
// own, written from those descriptions), and a round trip of every table through the
// writer. Golden style: a small JSON in, the expected rows out, one line per row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/chrome_json/chrome_json_test_support.hpp"
#include "io/io.hpp"
#include "trace/trace.hpp"

// Its own namespace: the rows are printed differently from chrome_json_test.cc's helpers of
// the same names, and a unity build compiles both files as one.
namespace opsight::io::conformance_test {
namespace {

using trace::Trace;

ReadResult read_ok(std::string_view json) {
  ReadResult result = read_chrome_json(json, 1);
  EXPECT_TRUE(result.ok()) << (result.error ? result.error->to_string("input") : "");
  return result;
}

std::string extra_value(const Trace& trace, std::string_view key) {
  for (const auto& [name, value] : trace.run.extra)
    if (name == key) return value;
  return "<absent>";
}

std::string arg_text(const Trace& trace, const trace::ArgValue& value) {
  return testing::arg_value_text(trace, value);
}

// "<track label> ts+dur depth name [cat] {args} unfinished", tracks by label, rows by time.
std::string slice_rows(const Trace& trace, bool with_args = true) {
  std::vector<std::string> lines;
  const auto& slices = trace.slices;
  for (size_t row = 0; row < slices.size(); ++row) {
    std::string line = trace.track_label(slices.track[row]) + " " + std::to_string(slices.ts[row]) +
                       "+" + std::to_string(slices.dur[row]) + " d" +
                       std::to_string(slices.depth[row]) + " " +
                       std::string(trace.str(slices.name[row]));
    if (slices.category[row] != 0)
      line += " [" + std::string(trace.str(slices.category[row])) + "]";
    if (with_args) {
      for (size_t arg = slices.args_begin[row]; arg < slices.args_begin[row + 1]; ++arg) {
        std::string key(trace.str(trace.slice_args.key[arg]));
        if (key.rfind("opsight.", 0) == 0) continue;
        line += " " + key + "=" + arg_text(trace, trace.slice_args.value[arg]);
      }
    }
    if (slices.flags[row] & trace::kSliceUnfinished) line += " unfinished";
    lines.push_back(line);
  }
  std::stable_sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::string slice_name(const Trace& trace, trace::RowIndex row) {
  return row == trace::kNoRow ? "<none>" : std::string(trace.str(trace.slices.name[row]));
}

// "out -> in #id name", sorted.
std::string flow_rows(const Trace& trace) {
  std::vector<std::string> lines;
  for (size_t row = 0; row < trace.flows.size(); ++row)
    lines.push_back(slice_name(trace, trace.flows.slice_out[row]) + " -> " +
                    slice_name(trace, trace.flows.slice_in[row]) + " #" +
                    std::to_string(trace.flows.id[row]) + " " +
                    std::string(trace.str(trace.flows.name[row])));
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::string counter_rows(const Trace& trace) {
  std::vector<std::string> lines;
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    const auto& track = trace.counter_tracks[trace.counters.counter_track[row]];
    std::ostringstream value;
    value << trace.counters.value[row];
    lines.push_back(std::to_string(track.pid) + " " + std::string(trace.str(track.name)) + " " +
                    std::to_string(trace.counters.ts[row]) + " " + value.str());
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::string instant_rows(const Trace& trace) {
  std::vector<std::string> lines;
  for (size_t row = 0; row < trace.instants.size(); ++row) {
    static const char* const kScopes[] = {"t", "p", "g"};
    lines.push_back(trace.track_label(trace.instants.track[row]) + " " +
                    std::to_string(trace.instants.ts[row]) + " " +
                    std::string(trace.str(trace.instants.name[row])) +
                    " s=" + kScopes[static_cast<int>(trace.instants.scope[row])]);
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

const trace::Track* find_track(const Trace& trace, int64_t pid, int64_t tid) {
  for (const auto& track : trace.tracks)
    if (track.pid == pid && track.tid == tid && track.kind == trace::TrackKind::kThread)
      return &track;
  return nullptr;
}

// ---- Identity and time ------------------------------------------------------------------

TEST(ChromeJsonConformance, StringPidAndTidNameTheProcessAndThreadAndPhKeepsItsFirstChar) {
  auto result = read_ok(R"({"traceEvents":[{"pid":"server","tid":"io","ts":5.1,"dur":500.1,
    "name":"exec","ph":"XYZ","cat":"c"}]})");
  const Trace& trace = result.trace;
  ASSERT_EQ(trace.slices.size(), 1u);
  EXPECT_EQ(trace.slices.ts[0], 5100);
  EXPECT_EQ(trace.slices.dur[0], 500100);
  EXPECT_EQ(trace.str(trace.processes[0].name), "server");
  EXPECT_EQ(trace.track_label(trace.slices.track[0]), "io");
}

TEST(ChromeJsonConformance, AnEventWithoutTidBelongsToItsProcessMainThread) {
  auto result = read_ok(R"([
    {"ph":"X","name":"child","ts":1,"dur":5,"pid":1},
    {"ph":"X","name":"parent","ts":1,"dur":10,"pid":1,"tid":1},
    {"ph":"X","name":"pid only","ts":20,"dur":1,"pid":33},
    {"ph":"X","name":"neither","ts":30,"dur":1}])");
  const Trace& trace = result.trace;
  // The first two share thread 1 of process 1 and nest, longer first at equal start.
  EXPECT_EQ(slice_rows(trace),
            "thread 0 30000+1000 d0 neither\n"
            "thread 1 1000+10000 d0 parent\n"
            "thread 1 1000+5000 d1 child\n"
            "thread 33 20000+1000 d0 pid only\n");
  EXPECT_NE(find_track(trace, 33, 33), nullptr);
  EXPECT_NE(find_track(trace, 0, 0), nullptr);
}

TEST(ChromeJsonConformance, TrailingCommaAndDisplayTimeUnitLeaveMicroseconds) {
  // displayTimeUnit only says how a viewer shows times; ts and dur stay microseconds.
  auto result = read_ok(R"({"displayTimeUnit":"ms","traceEvents":[
    {"name":"Foo","ph":"X","tid":0,"ts":3473608.458,"dur":295555.500},
    {"name":"Bar","ph":"X","tid":0,"ts":4890.000,"dur":3764289.708},
    ]})");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 0 3473608458+295555500 d1 Foo\n"
            "thread 0 4890000+3764289708 d0 Bar\n");
  EXPECT_EQ(extra_value(result.trace, "displayTimeUnit"), "ms");
}

TEST(ChromeJsonConformance, NumbersWrittenAsStringsAndControlCharactersInStrings) {
  auto result = read_ok(std::string(R"([{"ph":"X","name":"tab)") + "\x01" +
                        R"(here","ts":"12.5","dur":"2","pid":1,"tid":1}])");
  ASSERT_EQ(result.trace.slices.size(), 1u);
  EXPECT_EQ(result.trace.slices.ts[0], 12500);
  EXPECT_EQ(result.trace.slices.dur[0], 2000);
  EXPECT_EQ(result.trace.str(result.trace.slices.name[0]), "tab\x01here");
}

TEST(ChromeJsonConformance, OffsetsAfterMendingCountInTheInputNotInTheMendedCopy) {
  // Two raw control characters (each becomes 6 bytes in the mended copy) and a trailing
  // comma before an invalid event: its offset must be the input's.
  std::string json =
      std::string(R"([{"ph":"X","name":"a)") + "\x01\x02" + R"(","ts":1,"dur":1,"pid":1,"tid":1},)";
  size_t invalid_at = json.size();
  json += R"({"ph":"X","name":"bad","ts":"soon","pid":1,"tid":1},])";
  auto result = read_ok(json);
  EXPECT_EQ(result.trace.slices.size(), 1u);
  std::string described = extra_value(result.trace, "first_invalid_event");
  EXPECT_NE(described.find("at byte " + std::to_string(invalid_at) + ":"), std::string::npos)
      << described;
  EXPECT_EQ(extra_value(result.trace, "mended_json"), "3");
}

TEST(ChromeJsonConformance, AnIncompleteArrayKeepsItsWholeEvents) {
  auto result = read_ok(R"([
    {"name":"typecheck","ph":"X","ts":4619295550.000,"dur":8000.000,"pid":306339,"tid":3},
  )");
  ASSERT_EQ(result.trace.slices.size(), 1u);
  EXPECT_EQ(result.trace.slices.ts[0], 4619295550000);
}

TEST(ChromeJsonConformance, MalformedDocumentStillGivesItsByteOffset) {
  ReadResult result = read_chrome_json(R"([{"ph":"X","ts":1,"dur":1},{"ph":"X" "ts":2}])", 1);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error->has_offset);
  EXPECT_EQ(result.error->byte_offset, 37u);
}

// ---- B/E ----------------------------------------------------------------------------------

TEST(ChromeJsonConformance, BeginEndArePairedByTimeNotFileOrder) {
  // The end of "outer" comes first in the file; the inner pair is written backwards.
  auto result = read_ok(R"([
    {"ph":"E","pid":1,"tid":1,"ts":50},
    {"ph":"B","pid":1,"tid":1,"ts":10,"name":"outer"},
    {"ph":"E","pid":1,"tid":1,"ts":30,"name":"inner","args":{"result":7}},
    {"ph":"B","pid":1,"tid":1,"ts":20,"name":"inner","args":{"input":1}}])");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 1 10000+40000 d0 outer\n"
            "thread 1 20000+10000 d1 inner input=1 result=7\n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_end_events"), "<absent>");
}

TEST(ChromeJsonConformance, AnEndClosesOnlyTheBeginOfItsName) {
  auto result = read_ok(R"([
    {"ph":"B","pid":10,"tid":11,"ts":100,"name":"BeginEvent","args":{"arg_int":123}},
    {"ph":"E","pid":10,"tid":11,"ts":200,"name":"EndEvent"},
    {"ph":"X","pid":10,"tid":11,"ts":300,"dur":1,"name":"later"}])");
  // The E names another slice: it is ignored and counted, and the B stays open to the
  // end of its thread's events.
  EXPECT_EQ(slice_rows(result.trace),
            "thread 11 100000+201000 d0 BeginEvent arg_int=123 unfinished\n"
            "thread 11 300000+1000 d1 later\n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_end_events"), "1");
  EXPECT_EQ(extra_value(result.trace, "unfinished_slices"), "1");
}

TEST(ChromeJsonConformance, AnEndOfAnOuterNameClosesTheInnerSlicesToo) {
  auto result = read_ok(R"([
    {"ph":"B","pid":1,"tid":1,"ts":1,"name":"a"},
    {"ph":"B","pid":1,"tid":1,"ts":2,"name":"b"},
    {"ph":"E","pid":1,"tid":1,"ts":5,"name":"a"}])");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 1 1000+4000 d0 a\n"
            "thread 1 2000+3000 d1 b unfinished\n");
  EXPECT_EQ(extra_value(result.trace, "slices_closed_by_an_outer_end"), "1");
}

TEST(ChromeJsonConformance, EndWithoutNameClosesTheInnermost) {
  auto result = read_ok(R"([
    {"ph":"B","pid":30,"tid":32,"ts":900,"name":"EventMissingCatAndArgs"},
    {"ph":"E","pid":30,"tid":32,"ts":950}])");
  EXPECT_EQ(slice_rows(result.trace), "thread 32 900000+50000 d0 EventMissingCatAndArgs\n");
}

// ---- Instants, counters, metadata ---------------------------------------------------------

TEST(ChromeJsonConformance, InstantScopes) {
  auto result = read_ok(R"([
    {"ph":"I","pid":10,"tid":11,"ts":300,"name":"global","s":"g"},
    {"ph":"I","pid":10,"tid":0,"ts":310,"name":"process","s":"p"},
    {"ph":"I","pid":10,"tid":11,"ts":320,"name":"thread","s":"t"},
    {"ph":"i","pid":10,"tid":12,"ts":330,"name":"default"},
    {"ph":"R","pid":10,"tid":11,"ts":340,"name":"mark"}])");
  EXPECT_EQ(instant_rows(result.trace),
            "thread 0 310000 process s=p\n"
            "thread 11 300000 global s=g\n"
            "thread 11 320000 thread s=t\n"
            "thread 11 340000 mark s=t\n"
            "thread 12 330000 default s=t\n");
}

TEST(ChromeJsonConformance, CounterWithSeveralArgsKeepsEverySeriesAndParsesStrings) {
  auto result = read_ok(R"([
    {"ph":"C","pid":300,"ts":3000,"name":"mem","args":{
      "leading_dot":".75","trailing_dot":"246.","leading_zero":"01.23","plus":"+10.5",
      "int":-50,"float":100.5,"incomplete_exp":"1.5e","just_dot":".","just_minus":"-"}},
    {"ph":"C","pid":300,"ts":3001,"name":"single","args":{"bytes":"7"}},
    {"ph":"C","pid":300,"ts":3002,"name":"empty","args":{}},
    {"ph":"C","pid":300,"ts":3003,"name":"none"}])");
  const Trace& trace = result.trace;
  EXPECT_EQ(counter_rows(trace),
            "300 mem float 3000000 100.5\n"
            "300 mem int 3000000 -50\n"
            "300 mem leading_dot 3000000 0.75\n"
            "300 mem leading_zero 3000000 1.23\n"
            "300 mem plus 3000000 10.5\n"
            "300 mem trailing_dot 3000000 246\n"
            "300 single bytes 3001000 7\n");
  for (const auto& track : trace.counter_tracks) {
    if (trace.str(track.name) == "mem plus") {
      EXPECT_EQ(trace.str(track.group), "mem");
      EXPECT_EQ(trace.str(track.series), "plus");
    }
    if (trace.str(track.name) == "single bytes") {
      EXPECT_EQ(trace.str(track.group), "single");
      EXPECT_EQ(trace.str(track.series), "bytes");
    }
  }
}

TEST(ChromeJsonConformance, MetadataNamesSortIndicesAndLabels) {
  auto result = read_ok(R"([
    {"ph":"B","pid":30,"tid":31,"ts":790,"name":"work"},
    {"ph":"E","pid":30,"tid":31,"ts":815,"name":"work"},
    {"ph":"M","pid":30,"tid":0,"name":"process_name","args":{"name":"MyProcess30"}},
    {"ph":"M","pid":30,"tid":31,"name":"thread_name","args":{"name":"Renamed31"}},
    {"ph":"M","pid":30,"tid":0,"name":"process_sort_index","args":{"sort_index":-2}},
    {"ph":"M","pid":30,"tid":31,"name":"thread_sort_index","args":{"sort_index":5}},
    {"ph":"M","pid":30,"name":"process_labels","args":{"labels":"rank 0, GPU 1"}},
    {"ph":"M","pid":30,"name":"process_uptime_seconds","args":{"uptime":3}}])");
  const Trace& trace = result.trace;
  ASSERT_EQ(trace.processes.size(), 1u);
  const trace::Process& process = trace.processes[0];
  EXPECT_EQ(trace.str(process.name), "MyProcess30");
  EXPECT_EQ(process.sort_index, -2);
  ASSERT_EQ(process.labels.size(), 2u);
  EXPECT_EQ(trace.str(process.labels[0]), "rank 0");
  EXPECT_EQ(trace.str(process.labels[1]), "GPU 1");
  const trace::Track* thread = find_track(trace, 30, 31);
  ASSERT_NE(thread, nullptr);
  EXPECT_EQ(trace.str(thread->name), "Renamed31");
  EXPECT_EQ(thread->sort_index, 5);
  EXPECT_EQ(slice_rows(trace), "Renamed31 790000+25000 d0 work\n");
}

// ---- Async ----------------------------------------------------------------------------------

TEST(ChromeJsonConformance, NestableAsyncEventsNestOnATrackPerId) {
  auto result = read_ok(R"([
    {"ph":"b","pid":1,"tid":1,"ts":10,"name":"request","cat":"net","id":"0x1","args":{"url":"a"}},
    {"ph":"b","pid":1,"tid":2,"ts":12,"name":"dns","cat":"net","id":"0x1"},
    {"ph":"n","pid":1,"tid":2,"ts":13,"name":"resolved","cat":"net","id":"0x1"},
    {"ph":"e","pid":1,"tid":3,"ts":15,"name":"dns","cat":"net","id":"0x1"},
    {"ph":"e","pid":1,"tid":3,"ts":40,"name":"request","cat":"net","id":"0x1","args":{"status":200}},
    {"ph":"b","pid":1,"tid":1,"ts":20,"name":"request","cat":"net","id":"0x2"},
    {"ph":"e","pid":1,"tid":1,"ts":30,"name":"request","cat":"net","id":"0x2"},
    {"ph":"b","pid":1,"tid":1,"ts":20,"name":"other cat","cat":"disk","id":"0x1"},
    {"ph":"e","pid":1,"tid":1,"ts":22,"name":"other cat","cat":"disk","id":"0x1"}])");
  const Trace& trace = result.trace;
  EXPECT_EQ(slice_rows(trace),
            "other cat 20000+2000 d0 other cat [disk]\n"
            "request 10000+30000 d0 request [net] url='a' status=200\n"
            "request 12000+3000 d1 dns [net]\n"
            "request 13000+0 d2 resolved [net]\n"
            "request 20000+10000 d0 request [net]\n");
  int async_tracks = 0;
  for (const auto& track : trace.tracks) {
    if (track.kind != trace::TrackKind::kAsync) continue;
    ++async_tracks;
    EXPECT_EQ(track.pid, 1);
    EXPECT_EQ(track.tid, 0);
  }
  EXPECT_EQ(async_tracks, 3);  // (net, 1), (net, 2), (disk, 1)
}

TEST(ChromeJsonConformance, GlobalIdsShareATrackAcrossProcessesLocalIdsDoNot) {
  auto result = read_ok(R"([
    {"ph":"b","pid":1,"ts":1,"name":"g","cat":"c","id2":{"global":"0x5"}},
    {"ph":"e","pid":2,"ts":9,"name":"g","cat":"c","id2":{"global":"0x5"}},
    {"ph":"b","pid":1,"ts":1,"name":"l","cat":"c","id2":{"local":"0x5"}},
    {"ph":"e","pid":2,"ts":9,"name":"l","cat":"c","id2":{"local":"0x5"}},
    {"ph":"b","pid":1,"ts":1,"name":"noid","cat":"c"},
    {"ph":"b","pid":1,"ts":1,"name":"emptykey","cat":"c","id2":{"":"x"}}])");
  const Trace& trace = result.trace;
  // The global pair is one slice on process 1's track; the local end names a slice of
  // process 2 that never began, so the local begin stays open.
  EXPECT_EQ(slice_rows(trace),
            "g 1000+8000 d0 g [c]\n"
            "l 1000+0 d0 l [c] unfinished\n");
  EXPECT_EQ(extra_value(trace, "unmatched_end_events"), "1");
  EXPECT_EQ(extra_value(trace, "invalid_events"), "2");  // no usable id
}

TEST(ChromeJsonConformance, LegacyAsyncStartStepFinishIsOneSliceWithZeroLengthSteps) {
  auto result = read_ok(R"([
    {"ph":"S","pid":1,"tid":1,"ts":0,"name":"load","id":7},
    {"ph":"T","pid":1,"tid":1,"ts":4,"name":"load","id":7,"args":{"step":"parsed"}},
    {"ph":"F","pid":1,"tid":1,"ts":10,"name":"load","id":7}])");
  EXPECT_EQ(slice_rows(result.trace),
            "load 0+10000 d0 load\n"
            "load 4000+0 d1 load step='parsed'\n");
}

// ---- Flows ----------------------------------------------------------------------------------

TEST(ChromeJsonConformance, FlowStartStepAndEndBindToSlicesByTheirRules) {
  auto result = read_ok(R"([
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":10,"name":"send"},
    {"ph":"X","pid":1,"tid":1,"ts":2,"dur":2,"name":"send inner"},
    {"ph":"s","pid":1,"tid":1,"ts":5,"name":"msg","cat":"ipc","id":"0x10"},
    {"ph":"X","pid":1,"tid":2,"ts":20,"dur":10,"name":"relay"},
    {"ph":"t","pid":1,"tid":2,"ts":25,"name":"msg","cat":"ipc","id":"0x10"},
    {"ph":"f","pid":1,"tid":3,"ts":35,"name":"msg","cat":"ipc","id":"0x10"},
    {"ph":"X","pid":1,"tid":3,"ts":40,"dur":5,"name":"receive"},
    {"ph":"X","pid":1,"tid":4,"ts":0,"dur":100,"name":"outer"},
    {"ph":"s","pid":1,"tid":4,"ts":1,"name":"e","id":1},
    {"ph":"X","pid":1,"tid":5,"ts":0,"dur":100,"name":"enclosing"},
    {"ph":"X","pid":1,"tid":5,"ts":60,"dur":1,"name":"next"},
    {"ph":"f","pid":1,"tid":5,"ts":50,"name":"e","id":1,"bp":"e"},
    {"ph":"f","pid":1,"tid":5,"ts":50,"name":"nobody","id":9}])");
  const Trace& trace = result.trace;
  EXPECT_EQ(flow_rows(trace),
            "outer -> enclosing #1 e\n"
            "relay -> receive #16 msg\n"
            "send -> relay #16 msg\n");
  EXPECT_EQ(extra_value(trace, "unmatched_flow_events"), "1");
}

TEST(ChromeJsonConformance, FlowEventsAreChainedInTimeOrderNotFileOrder) {
  // Threads flushed separately: the finish comes first in the file, the start later.
  auto result = read_ok(R"([
    {"ph":"X","pid":1,"tid":2,"ts":20,"dur":10,"name":"consume"},
    {"ph":"f","pid":1,"tid":2,"ts":25,"name":"job","id":3,"bp":"e"},
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":10,"name":"produce"},
    {"ph":"s","pid":1,"tid":1,"ts":5,"name":"job","id":3}])");
  EXPECT_EQ(flow_rows(result.trace), "produce -> consume #3 job\n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_flow_events"), "<absent>");
}

TEST(ChromeJsonConformance, FlowWithNoSliceToBindIsCountedUnbound) {
  auto result = read_ok(R"([
    {"ph":"s","pid":1,"tid":1,"ts":5,"name":"f","id":1},
    {"ph":"X","pid":1,"tid":2,"ts":0,"dur":10,"name":"b"},
    {"ph":"f","pid":1,"tid":2,"ts":5,"name":"f","id":1,"bp":"e"}])");
  EXPECT_EQ(result.trace.flows.size(), 0u);
  EXPECT_EQ(result.trace.unbound_flows, 1u);
}

TEST(ChromeJsonConformance, Version2FlowsOnTheSlicesThemselves) {
  auto result = read_ok(R"([
    {"ph":"X","pid":1,"tid":1,"ts":0,"dur":5,"name":"a","bind_id":"0xa","flow_out":true},
    {"ph":"B","pid":1,"tid":2,"ts":10,"name":"b","bind_id":"0xa","flow_in":true,"flow_out":true},
    {"ph":"E","pid":1,"tid":2,"ts":12},
    {"ph":"X","pid":1,"tid":3,"ts":20,"dur":5,"name":"c","bind_id":"0xa","flow_in":true},
    {"ph":"X","pid":1,"tid":3,"ts":30,"dur":5,"name":"d","bind_id":"0xb","flow_in":true}])");
  EXPECT_EQ(flow_rows(result.trace),
            "a -> b #10 \n"
            "b -> c #10 \n");
  EXPECT_EQ(extra_value(result.trace, "unmatched_flow_events"), "1");
}

// ---- Cases of Perfetto's JSON diff tests (parser/json, parser/parsing) ---------------------
// Each case is ours, written from the behaviour a diff test documents; docs/formats.md
// ("Chrome JSON: fidelity to Perfetto's importer") says, per diff test, whether opsight
// matches, and why where it deliberately does not.

TEST(ChromeJsonConformance, ArgsKeepTheirFileOrderEvenWhenAKeyWasSeenBefore) {
  // The second event's first key is interned after its second one was (by the first
  // event): the order must be the file's, not the interned ids'.
  auto result = read_ok(R"([
    {"name":"Event1","cat":"C","ph":"b","ts":40000,"pid":1,"id":1,"args":{"02.step2":2,}},
    {"name":"Event2","cat":"C","ph":"b","ts":40000,"pid":2,"id":1,"args":{"01.step1":1,"02.step2":2,}},
    {"name":"Plain","ph":"X","ts":1,"dur":1,"pid":1,"tid":1,"args":{"z":1,"a":2,"m":3}},
    {"name":"Pair","ph":"B","ts":2,"pid":1,"tid":1,"args":{"z":1,"a":2}},
    {"name":"Pair","ph":"E","ts":3,"pid":1,"tid":1,"args":{"m":3,"b":4}}])");
  const Trace& trace = result.trace;
  std::vector<std::string> rows;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    std::string line(trace.str(trace.slices.name[row]));
    for (size_t arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg)
      line += " " + std::string(trace.str(trace.slice_args.key[arg]));
    rows.push_back(line);
  }
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, (std::vector<std::string>{"Event1 02.step2", "Event2 01.step1 02.step2",
                                            "Pair z a m b", "Plain z a m"}));
}

TEST(ChromeJsonConformance, AsyncEventsWithoutCategoryAreKeptAndAnEmptyIdIsNoId) {
  auto result = read_ok(R"([
    {"ph":"b","pid":200,"tid":201,"ts":2000,"name":"AsyncMissingCat","id":"flow1"},
    {"ph":"e","pid":200,"tid":201,"ts":2100,"name":"AsyncMissingCat","id":"flow1"},
    {"ph":"b","pid":200,"tid":202,"ts":2200,"name":"AsyncEmptyStringId","cat":"c2","id":""},
    {"ph":"e","pid":200,"tid":202,"ts":2300,"name":"AsyncEmptyStringId","cat":"c2","id":""},
    {"ph":"b","pid":200,"tid":203,"ts":2400,"name":"Id2EmptyKey","cat":"c2","id2":{"":"x"}},
    {"ph":"S","pid":200,"tid":204,"ts":2500,"name":"LegacyMissingCat","id":7},
    {"ph":"F","pid":200,"tid":205,"ts":2600,"name":"LegacyMissingCat","id":7}])");
  EXPECT_EQ(slice_rows(result.trace),
            "AsyncMissingCat 2000000+100000 d0 AsyncMissingCat\n"
            "LegacyMissingCat 2500000+100000 d0 LegacyMissingCat\n");
  EXPECT_EQ(extra_value(result.trace, "invalid_events"), "3");
}

TEST(ChromeJsonConformance, LegacyAsyncIdsAreGlobalAndId2LocalIsPerProcess) {
  // S/T/F take the track rules of b/e/n: "id" and "id2.global" join processes, one track
  // per (category, id); "id2.local" is one track per (process, category, id).
  auto result = read_ok(R"([
    {"ph":"S","pid":1,"tid":1,"ts":0,"name":"global","cat":"c","id":"0x9"},
    {"ph":"T","pid":2,"tid":2,"ts":4,"name":"global","cat":"c","id":"0x9","args":{"step":"s1"}},
    {"ph":"F","pid":2,"tid":2,"ts":10,"name":"global","cat":"c","id":"0x9"},
    {"ph":"S","pid":1,"tid":1,"ts":0,"name":"local","cat":"c","id2":{"local":"0x9"}},
    {"ph":"F","pid":1,"tid":3,"ts":6,"name":"local","cat":"c","id2":{"local":"0x9"}},
    {"ph":"S","pid":2,"tid":2,"ts":1,"name":"local","cat":"c","id2":{"local":"0x9"}},
    {"ph":"F","pid":2,"tid":2,"ts":3,"name":"local","cat":"c","id2":{"local":"0x9"}}])");
  const Trace& trace = result.trace;
  EXPECT_EQ(slice_rows(trace),
            "global 0+10000 d0 global [c]\n"
            "global 4000+0 d1 global [c] step='s1'\n"
            "local 0+6000 d0 local [c]\n"
            "local 1000+2000 d0 local [c]\n");
  std::vector<std::string> async;
  for (const auto& track : trace.tracks)
    if (track.kind == trace::TrackKind::kAsync)
      async.push_back(std::string(trace.str(track.name)) + " pid=" + std::to_string(track.pid));
  std::sort(async.begin(), async.end());
  EXPECT_EQ(async, (std::vector<std::string>{"global pid=1", "local pid=1", "local pid=2"}));
}

TEST(ChromeJsonConformance, CounterTracksAreNamedByEventArgAndId) {
  // Each arg is a series "<name> <arg>"; with an "id", "<name> id: <id> <arg>" (the id
  // tells counters of one name apart). A lone "value" keeps the event's name (formats.md).
  auto result = read_ok(R"([
    {"ph":"C","pid":30,"tid":31,"ts":800,"name":"MyCounters","cat":"stats","id":"counter_group_1",
     "args":{"counter1_float":100.5,"counter2_int":-50,"counter3_str_num":"25.7"}},
    {"ph":"C","pid":30,"tid":31,"ts":810,"name":"EmptyArgsCounter","cat":"stats","args":{}},
    {"ph":"C","pid":30,"tid":31,"ts":820,"name":"NoArgsCounter","cat":"stats"},
    {"ph":"C","pid":"1000","ts":0,"name":"ctr","args":{"cats":0}},
    {"ph":"C","pid":"1000","ts":10,"name":"ctr","args":{"cats":10}},
    {"ph":"C","pid":"1000","ts":20,"name":"ctr","id":5,"args":{"cats":3}},
    {"ph":"C","pid":30,"ts":830,"name":"rss","args":{"value":5}},
    {"ph":"C","pid":30,"ts":840,"name":"rss","id":"0x2","args":{"value":6}},
    {"ph":"C","pid":300,"tid":301,"ts":3000,"name":"Edge","args":{
      "leading_dot":".75","trailing_dot":"246.","leading_zero_float":"01.23",
      "leading_zero_int_str":"050","incomplete_exp":"1.5e","exp_no_digit":"2e+","just_dot":".",
      "plus_val":"+10.5","just_plus":"+","just_minus":"-"}}])");
  const Trace& trace = result.trace;
  EXPECT_EQ(counter_rows(trace),
            "1000 ctr cats 0 0\n"
            "1000 ctr cats 10000 10\n"
            "1000 ctr id: 5 cats 20000 3\n"
            "30 MyCounters id: counter_group_1 counter1_float 800000 100.5\n"
            "30 MyCounters id: counter_group_1 counter2_int 800000 -50\n"
            "30 MyCounters id: counter_group_1 counter3_str_num 800000 25.7\n"
            "30 rss 830000 5\n"
            "30 rss id: 0x2 840000 6\n"
            "300 Edge leading_dot 3000000 0.75\n"
            "300 Edge leading_zero_float 3000000 1.23\n"
            "300 Edge leading_zero_int_str 3000000 50\n"
            "300 Edge plus_val 3000000 10.5\n"
            "300 Edge trailing_dot 3000000 246\n");
  for (const auto& track : trace.counter_tracks)
    if (trace.str(track.name) == "MyCounters id: counter_group_1 counter2_int") {
      EXPECT_EQ(trace.str(track.group), "MyCounters id: counter_group_1");
      EXPECT_EQ(trace.str(track.series), "counter2_int");
    }
}

TEST(ChromeJsonConformance, BeginEndOnProcessAndThreadZeroArePaired) {
  auto result = read_ok(R"([
    {"ph":"B","pid":0,"tid":0,"ts":10,"name":"zero"},
    {"ph":"B","pid":0,"tid":0,"ts":11,"name":"inner"},
    {"ph":"E","pid":0,"tid":0,"ts":12},
    {"ph":"E","pid":0,"tid":0,"ts":20},
    {"ph":"B","ts":30,"name":"no ids"},
    {"ph":"E","ts":40},
    {"ph":"B","pid":0,"ts":50,"name":"pid only"},
    {"ph":"E","pid":0,"tid":0,"ts":60}])");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 0 10000+10000 d0 zero\n"
            "thread 0 11000+1000 d1 inner\n"
            "thread 0 30000+10000 d0 no ids\n"
            "thread 0 50000+10000 d0 pid only\n");
  EXPECT_EQ(extra_value(result.trace, "unfinished_slices"), "<absent>");
  EXPECT_EQ(extra_value(result.trace, "unmatched_end_events"), "<absent>");
}

TEST(ChromeJsonConformance, ZeroDurationSlicesAtOneTimeStackOnEachOther) {
  // Intervals are closed on the left and open on the right, except that zero-length
  // slices at one time stack (Perfetto's rule): a slice that ends where another begins is
  // its sibling, a zero-length one at the same time as another zero-length one its child.
  auto result = read_ok(R"([
    {"ph":"X","pid":1,"tid":1,"ts":10,"dur":0,"name":"first"},
    {"ph":"X","pid":1,"tid":1,"ts":10,"dur":0,"name":"second"},
    {"ph":"X","pid":1,"tid":1,"ts":10,"dur":0,"name":"third"},
    {"ph":"X","pid":1,"tid":2,"ts":10,"dur":5,"name":"ends at 15"},
    {"ph":"X","pid":1,"tid":2,"ts":15,"dur":0,"name":"instant at its end"},
    {"ph":"X","pid":1,"tid":2,"ts":15,"dur":5,"name":"next"},
    {"ph":"X","pid":1,"tid":3,"ts":20,"dur":0,"name":"zero first"},
    {"ph":"X","pid":1,"tid":3,"ts":20,"dur":4,"name":"longer"}])");
  EXPECT_EQ(slice_rows(result.trace, false),
            "thread 1 10000+0 d0 first\n"
            "thread 1 10000+0 d1 second\n"
            "thread 1 10000+0 d2 third\n"
            "thread 2 10000+5000 d0 ends at 15\n"
            "thread 2 15000+0 d1 instant at its end\n"
            "thread 2 15000+5000 d0 next\n"
            "thread 3 20000+0 d1 zero first\n"
            "thread 3 20000+4000 d0 longer\n");
}

TEST(ChromeJsonConformance, CompleteEventWithoutDurationIsDropped) {
  auto result = read_ok(R"([
    {"ph":"X","pid":100,"tid":101,"ts":1000,"name":"CompleteNoDur","cat":"test_missing"},
    {"ph":"B","pid":100,"tid":102,"ts":1100,"name":"BeginNoTTS","cat":"test_missing"},
    {"ph":"E","pid":100,"tid":102,"ts":1200,"name":"EndNoTTS","cat":"test_missing"},
    {"ph":"X","pid":100,"tid":103,"ts":1300,"dur":50,"name":"CompleteNoTDUR","tts":1290}])");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 102 1100000+100000 d0 BeginNoTTS [test_missing] unfinished\n"
            "thread 103 1300000+50000 d0 CompleteNoTDUR\n");
  EXPECT_EQ(extra_value(result.trace, "invalid_events"), "1");
  EXPECT_NE(extra_value(result.trace, "first_invalid_event").find("\"dur\""), std::string::npos);
}

TEST(ChromeJsonConformance, AnEndWithACategoryClosesOnlyABeginOfThatCategory) {
  auto result = read_ok(R"([
    {"ph":"B","pid":1,"tid":1,"ts":1,"name":"work","cat":"a"},
    {"ph":"B","pid":1,"tid":1,"ts":2,"name":"work","cat":"b"},
    {"ph":"E","pid":1,"tid":1,"ts":3,"name":"work","cat":"a"},
    {"ph":"B","pid":1,"tid":2,"ts":1,"name":"any","cat":"a"},
    {"ph":"E","pid":1,"tid":2,"ts":2}])");
  EXPECT_EQ(slice_rows(result.trace),
            "thread 1 1000+2000 d0 work [a]\n"
            "thread 1 2000+1000 d1 work [b] unfinished\n"
            "thread 2 1000+1000 d0 any [a]\n");
  EXPECT_EQ(extra_value(result.trace, "slices_closed_by_an_outer_end"), "1");
}

// ---- PyTorch --------------------------------------------------------------------------------

TEST(ChromeJsonConformance, PyTorchModulesEncloseTheirOperatorsOnTheThread) {
  // record_function's range opens inside __enter__ and closes inside __exit__: the Python
  // functions give way, the operators and ranges keep their times.
  auto result = read_ok(R"json({"schemaVersion":1,"traceEvents":[
    {"ph":"X","cat":"python_function","name":"nn.Module: Net_0","pid":1,"tid":1,"ts":0,"dur":100},
    {"ph":"X","cat":"python_function","name":"record_function.__enter__","pid":1,"tid":1,"ts":10,"dur":5},
    {"ph":"X","cat":"user_annotation","name":"block","pid":1,"tid":1,"ts":12,"dur":50},
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":20,"dur":10},
    {"ph":"X","cat":"python_function","name":"record_function.__exit__","pid":1,"tid":1,"ts":60,"dur":5}]})json");
  const Trace& trace = result.trace;
  EXPECT_EQ(slice_rows(trace, false),
            "thread 1 0+100000 d0 nn.Module: Net_0 [module]\n"
            "thread 1 10000+2000 d1 record_function.__enter__ [python]\n"
            "thread 1 12000+50000 d1 block [annotation]\n"
            "thread 1 20000+10000 d2 aten::mm [operator]\n"
            "thread 1 60000+2000 d2 record_function.__exit__ [python]\n");
  EXPECT_EQ(extra_value(trace, "python_functions_clipped"), "1");
  EXPECT_EQ(trace.tracks.size(), 1u);
}

// ---- Round trip -----------------------------------------------------------------------------

// A model with every table the writer must keep: nested slices (a child starting at its
// parent's start), two flows leaving one slice, a process-wide async track with nesting,
// sort indices, labels, instant scopes and a counter group.
Trace model_with_everything() {
  Trace trace;
  trace.run.source_format = "opsight";
  trace::TrackId main_thread = trace.thread_track(7, 70);
  trace::TrackId worker = trace.thread_track(7, 71);
  trace.tracks[worker].name = trace.intern("worker");
  trace.tracks[worker].sort_index = 3;
  trace.process(7).name = trace.intern("server");
  trace.process(7).sort_index = -1;
  trace.process(7).labels = {trace.intern("rank 0"), trace.intern("GPU 1")};
  trace::TrackId queue = trace.process_async_track(7, 0xabc, "queue");
  trace.tracks[queue].sort_index = 2;
  auto parent =
      trace.slices.add(1000, 5000, trace.intern("handle"), trace.intern("app"), main_thread);
  auto child = trace.slices.add(1000, 2000, trace.intern("parse"), 0, main_thread);
  auto served = trace.slices.add(8000, 1000, trace.intern("serve"), 0, worker);
  auto logged = trace.slices.add(9500, 100, trace.intern("log"), 0, worker);
  auto waiting = trace.slices.add(1500, 6000, trace.intern("waiting"), trace.intern("q"), queue);
  trace.slices.add(1500, 0, trace.intern("enqueued"), 0, queue);
  trace.slices.add(2000, 500, trace.intern("inner"), 0, queue);
  trace.slice_args.add(waiting, trace.intern("depth"), trace::ArgValue::of_int(4));
  trace.flows.add(parent, served, 1, trace.intern("request"), trace.intern("ipc"));
  trace.flows.add(parent, logged, 2, trace.intern("log"));
  trace.flows.add(child, waiting, 3);
  trace.instants.add(1200, trace.intern("t"), 0, main_thread, trace::InstantScope::kThread);
  trace.instants.add(1300, trace.intern("p"), 0, main_thread, trace::InstantScope::kProcess);
  trace.instants.add(1400, trace.intern("g"), 0, worker, trace::InstantScope::kGlobal);
  trace.counters.add(1000, trace.counter_series(7, "memory", "heap"), 10);
  trace.counters.add(1000, trace.counter_series(7, "memory", "stack"), 2);
  trace.counters.add(2000, trace.counter_series(7, "memory", "heap"), 11);
  trace.counters.add(2000, trace.counter_track(7, "queue depth"), 3);
  trace.finalize();
  return trace;
}

std::string track_rows(const Trace& trace) {
  std::vector<std::string> lines;
  for (trace::TrackId id = 0; id < trace.tracks.size(); ++id) {
    const auto& track = trace.tracks[id];
    lines.push_back(trace.track_label(id) + " pid=" + std::to_string(track.pid) +
                    " tid=" + std::to_string(track.tid) +
                    " kind=" + std::to_string(static_cast<int>(track.kind)) + " key=" +
                    std::to_string(track.async_key) + " sort=" + std::to_string(track.sort_index));
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::string process_rows(const Trace& trace) {
  std::string text;
  for (const auto& process : trace.processes) {
    text += std::to_string(process.pid) + " " + std::string(trace.str(process.name)) +
            " sort=" + std::to_string(process.sort_index);
    for (auto label : process.labels) text += " [" + std::string(trace.str(label)) + "]";
    text += "\n";
  }
  return text;
}

std::string counter_track_rows(const Trace& trace) {
  std::vector<std::string> lines;
  for (const auto& track : trace.counter_tracks)
    lines.push_back(std::string(trace.str(track.name)) +
                    " group=" + std::string(trace.str(track.group)) +
                    " series=" + std::string(trace.str(track.series)));
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

TEST(ChromeJsonRoundTrip, KeepsEveryTable) {
  Trace original = model_with_everything();
  ASSERT_EQ(original.flows.size(), 3u);
  std::string json = write_chrome_json(original);
  auto read_back = read_ok(json);
  if (!read_back.ok()) ADD_FAILURE() << json;
  const Trace& copy = read_back.trace;
  EXPECT_EQ(slice_rows(copy), slice_rows(original));
  EXPECT_EQ(flow_rows(copy), flow_rows(original));
  EXPECT_EQ(instant_rows(copy), instant_rows(original));
  EXPECT_EQ(counter_rows(copy), counter_rows(original));
  EXPECT_EQ(counter_track_rows(copy), counter_track_rows(original));
  EXPECT_EQ(track_rows(copy), track_rows(original));
  EXPECT_EQ(process_rows(copy), process_rows(original));
  EXPECT_EQ(copy.unbound_flows, 0u);
  // Span ids and the exact slices each flow joins survive.
  for (size_t row = 0; row < original.flows.size(); ++row) {
    bool found = false;
    for (size_t other = 0; other < copy.flows.size(); ++other)
      found |= copy.slices.span_id[copy.flows.slice_out[other]] ==
                   original.slices.span_id[original.flows.slice_out[row]] &&
               copy.slices.span_id[copy.flows.slice_in[other]] ==
                   original.slices.span_id[original.flows.slice_in[row]];
    EXPECT_TRUE(found) << "flow " << row;
  }
  // And a second trip writes the same bytes.
  EXPECT_EQ(write_chrome_json(copy), write_chrome_json(read_ok(write_chrome_json(copy)).trace));
}

}  // namespace
}  // namespace opsight::io::conformance_test
