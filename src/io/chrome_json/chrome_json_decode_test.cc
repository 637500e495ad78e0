// The decode half of the Chrome JSON reader on its own: what each kind of event becomes,
// and the window-local string table. (The reader's tests check the merged model.)
#include "io/chrome_json/chrome_json_decode.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace opsight::io::chrome_json {
namespace {

// Decodes every element of the JSON array `json`.
DecodedEvents decode_all(const std::string& json, bool written_by_opsight = false,
                         int64_t time_base_ns = 0) {
  static simdjson::dom::parser parser;
  simdjson::dom::array events;
  EXPECT_EQ(parser.parse(json).get(events), simdjson::SUCCESS) << json;
  EventDecoder decoder(written_by_opsight, time_base_ns);
  DecodedEvents out;
  for (simdjson::dom::element event : events) decoder.decode(event, out);
  return out;
}

std::span<const DecodedArg> args_of(const DecodedEvents& decoded, size_t index) {
  uint32_t begin = index == 0 ? 0 : decoded.events[index - 1].args_end;
  return {decoded.args.data() + begin, decoded.events[index].args_end - begin};
}

TEST(LocalStrings, InternsEachStringOnceWithDenseIds) {
  LocalStrings strings;
  EXPECT_EQ(strings.intern(""), 0u);
  EXPECT_EQ(strings.get(0), "");
  uint32_t a = strings.intern("aten::linear");
  uint32_t b = strings.intern("cpu_op");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(strings.intern("aten::linear"), a);
  EXPECT_EQ(strings.get(b), "cpu_op");
  EXPECT_EQ(strings.size(), 3u);
  strings.clear();
  EXPECT_EQ(strings.size(), 1u);
  EXPECT_EQ(strings.intern("cpu_op"), 1u);
}

// Many strings (the table grows several times), some differing only in their middle, and
// every one asked for again: each keeps its id and its text.
TEST(LocalStrings, KeepsIdsAndTextsAcrossGrowth) {
  LocalStrings strings;
  std::vector<std::string> texts;
  std::mt19937_64 random(7);
  for (int index = 0; index < 5000; ++index) {
    std::string text = "request " + std::to_string(random() % 100000) + " of host-a.example";
    texts.push_back(text);
  }
  std::vector<uint32_t> ids;
  for (const std::string& text : texts) ids.push_back(strings.intern(text));
  std::set<std::string> distinct(texts.begin(), texts.end());
  EXPECT_EQ(strings.size(), distinct.size() + 1);
  for (size_t index = 0; index < texts.size(); ++index) {
    EXPECT_EQ(strings.intern(texts[index]), ids[index]);
    EXPECT_EQ(strings.get(ids[index]), texts[index]);
  }
}

TEST(EventDecoder, CompleteEventWithArgs) {
  auto decoded = decode_all(
      R"([{"ph":"X","name":"op","cat":"Node","pid":7,"tid":8,"ts":1.5,"dur":2.25,
           "args":{"n":3,"big":18446744073709551615,"f":0.5,"ok":true,"s":"op","z":null,
                   "dims":[[8,16],[32]]}}])");
  ASSERT_EQ(decoded.events.size(), 1u);
  const DecodedEvent& event = decoded.events[0];
  EXPECT_EQ(event.kind, EventKind::kSlice);
  EXPECT_EQ(event.ts, 1500);
  EXPECT_EQ(event.dur, 2250);
  EXPECT_EQ(event.pid, 7);
  EXPECT_EQ(event.tid, 8);
  EXPECT_EQ(decoded.strings.get(event.name), "op");
  EXPECT_EQ(decoded.strings.get(event.category), "Node");
  EXPECT_EQ(decoded.slices, 1u);
  EXPECT_TRUE(decoded.saw_onnxruntime_category);
  auto args = args_of(decoded, 0);
  ASSERT_EQ(args.size(), 7u);
  EXPECT_EQ(decoded.slice_args, 7u);
  EXPECT_EQ(decoded.strings.get(args[0].key), "n");
  EXPECT_EQ(args[0].value.type, trace::ArgType::kInt);
  EXPECT_EQ(args[0].value.int_value, 3);
  EXPECT_EQ(args[1].value.type, trace::ArgType::kDouble);  // beyond int64
  EXPECT_EQ(args[1].value.double_value, 18446744073709551615.0);
  EXPECT_EQ(args[2].value.double_value, 0.5);
  EXPECT_EQ(args[3].value.type, trace::ArgType::kBool);
  EXPECT_EQ(args[3].value.int_value, 1);
  EXPECT_EQ(args[4].value.string_value, event.name);  // "op" interned once in the window
  EXPECT_EQ(decoded.strings.get(args[5].value.string_value), "null");
  EXPECT_EQ(decoded.strings.get(args[6].value.string_value), "[[8,16],[32]]");
}

TEST(EventDecoder, TimeBaseNegativeDurationAndDurationAtTheLimit) {
  auto decoded = decode_all(R"([{"ph":"X","ts":1,"dur":-5},
                                        {"ph":"X","ts":9000000000000000,"dur":9000000000000000}])",
                            false, 40);
  ASSERT_EQ(decoded.events.size(), 2u);
  EXPECT_EQ(decoded.events[0].ts, 1040);
  EXPECT_EQ(decoded.events[0].dur, 0);
  EXPECT_EQ(decoded.events[1].ts + decoded.events[1].dur, std::numeric_limits<int64_t>::max());
}

TEST(EventDecoder, MalformedEventsSayWhy) {
  auto decoded = decode_all(
      R"([5,{"name":"no phase"},{"ph":""},{"ph":"X"},{"ph":"X","ts":"soon"},
          {"ph":"X","ts":1,"dur":"long"},{"ph":"i","ts":1e300}])");
  std::vector<EventProblem> problems;
  for (const DecodedEvent& event : decoded.events) {
    EXPECT_EQ(event.kind, EventKind::kInvalid);
    problems.push_back(event.problem);
  }
  EXPECT_EQ(problems, (std::vector<EventProblem>{EventProblem::kNotAnObject, EventProblem::kNoPhase,
                                                 EventProblem::kNoPhase, EventProblem::kNoTs,
                                                 EventProblem::kBadTs, EventProblem::kBadDur,
                                                 EventProblem::kBadTs}));
  EXPECT_STREQ(describe(EventProblem::kBadDur), "\"dur\" is not a number of microseconds in range");
  EXPECT_TRUE(decoded.args.empty());
  EXPECT_EQ(decoded.slices, 0u);
}

TEST(EventDecoder, PhasesWithoutATableAreSkippedByName) {
  auto decoded =
      decode_all(R"([{"ph":"P","ts":1},{"ph":"ac2g","ts":2},{"ph":"M","name":"other"}])");
  EXPECT_EQ(decoded.events[0].kind, EventKind::kSkipped);
  EXPECT_EQ(decoded.strings.get(decoded.events[0].name), "P");
  EXPECT_EQ(decoded.strings.get(decoded.events[1].name), "ac2g");
  EXPECT_EQ(decoded.events[2].kind, EventKind::kIgnored);
}

TEST(EventDecoder, TextualIdsAreKeptAsTextForTheMerge) {
  auto decoded = decode_all(
      R"([{"ph":"B","ts":1,"pid":"server","tid":"12"},{"ph":"E","ts":2,"pid":3.9,"tid":true}])");
  const DecodedEvent& begin = decoded.events[0];
  EXPECT_EQ(begin.kind, EventKind::kBegin);
  EXPECT_TRUE(begin.flags & kPidIsText);
  EXPECT_TRUE(begin.flags & kTidIsText);
  EXPECT_EQ(decoded.strings.get(begin.pid_text), "server");
  EXPECT_EQ(decoded.strings.get(begin.tid_text), "12");
  const DecodedEvent& end = decoded.events[1];
  EXPECT_EQ(end.kind, EventKind::kEnd);
  EXPECT_EQ(end.flags, 0);
  EXPECT_EQ(end.pid, 3);  // a double is truncated
  EXPECT_EQ(end.tid, 0);  // neither number nor string
}

TEST(EventDecoder, CountersKeepTheirNumericSamplesOnly) {
  auto decoded = decode_all(
      R"([{"ph":"C","name":"mem","pid":1,"ts":3,"args":{"rss":5,"unit":"MB","on":false}}])");
  const DecodedEvent& counter = decoded.events[0];
  EXPECT_EQ(counter.kind, EventKind::kCounter);
  auto samples = args_of(decoded, 0);
  ASSERT_EQ(samples.size(), 2u);  // rss and on (a boolean counts as 0/1)
  EXPECT_EQ(decoded.strings.get(samples[0].key), "rss");
  EXPECT_EQ(samples[0].value.double_value, 5.0);
  EXPECT_EQ(samples[1].value.double_value, 0.0);
  EXPECT_EQ(decoded.slice_args, 0u);  // samples go to the counter table
}

TEST(EventDecoder, OpsightMarkersBecomeFieldsOnlyInOpsightFiles) {
  const std::string json =
      R"([{"ph":"X","ts":1,"dur":1,"args":{"opsight.span_id":"00000000000000ff",
           "opsight.parent_span_id":"0000000000000001","opsight.unfinished":true,"k":1}},
          {"ph":"E","ts":2,"args":{"opsight.span_id":"00000000000000ff"}},
          {"ph":"M","name":"thread_name","pid":1,"tid":1000001,
           "args":{"name":"task-1","opsight.async_key":"2a","opsight.tid":"worker"}}])";
  auto own = decode_all(json, true);
  EXPECT_EQ(own.events[0].span_id, 0xffu);
  EXPECT_TRUE(own.events[0].flags & kUnfinished);
  ASSERT_EQ(args_of(own, 0).size(), 1u);  // only "k"
  EXPECT_EQ(args_of(own, 1).size(), 1u);  // an E event's args are plain args
  EXPECT_EQ(own.events[2].kind, EventKind::kThreadName);
  EXPECT_EQ(own.events[2].span_id, 0x2au);  // the lane's key
  auto lane_thread = args_of(own, 2);
  ASSERT_EQ(lane_thread.size(), 1u);
  EXPECT_EQ(own.strings.get(lane_thread[0].value.string_value), "worker");

  auto foreign = decode_all(json, false);
  EXPECT_EQ(foreign.events[0].span_id, 0u);
  EXPECT_EQ(args_of(foreign, 0).size(), 4u);
  EXPECT_EQ(foreign.events[2].span_id, 0u);
  EXPECT_TRUE(args_of(foreign, 2).empty());
}

}  // namespace
}  // namespace opsight::io::chrome_json
