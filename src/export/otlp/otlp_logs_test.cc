// OTLP logs and Loki log lines: the program's log records (instants in category "log", as
// the logging bridge writes them: schema/log_names.hpp) with the span each was logged in
// (LogView), the ExportLogsServiceRequest encode_otlp_logs writes decoded back field by
// field with the wire walker (python/tests/test_logs_bridge.py reads the same bytes with
// the opentelemetry-proto package's classes, tests/integration against VictoriaLogs and the
// OpenTelemetry Collector), the Loki push body of the same records, the targets' settings
// (the LOGS_ variables over the general ones), and both sinks through export_trace to a
// server in this process (the tenant header and basic authentication on loki-logs).
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "export/export.hpp"
#include "export/log_view.hpp"
#include "export/loki/loki_encoder.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "export/otlp/otlp_logs_encoder.hpp"
#include "schema/log_names.hpp"
#include "wire/proto_decoder_for_tests.hpp"
#include "wire/proto_encoder.hpp"

// A namespace of its own: the test program is a unity build, and export_test.cc has
// helpers of the same names.
namespace otlp_logs_test {
namespace {

using opsight::exporting::LogView;
using opsight::exporting::ResourceOptions;
using opsight::exporting::severity_number;
using opsight::exporting::SpanView;
using opsight::trace::ArgValue;
using opsight::trace::kNoRow;
using opsight::trace::RowIndex;
using opsight::trace::Trace;
using opsight::wire::testing::decode_message;
using opsight::wire::testing::find_field;
using opsight::wire::testing::find_fields;
using opsight::wire::testing::ProtoField;
namespace otlp = opsight::exporting::otlp;
namespace schema = opsight::schema;

constexpr int64_t kUnixOffset = 1'700'000'000'000'000'000;

// A log record as the bridge writes it: an instant named by its level, in category "log".
struct Logged {
  int64_t ts;
  int64_t level;
  std::string_view level_name;
  std::string_view message;
  std::string_view logger;
};

void add_record(Trace& trace, opsight::trace::TrackId track, const Logged& record,
                std::vector<std::pair<std::string_view, ArgValue>> more = {}) {
  RowIndex row = trace.instants.add(record.ts, trace.intern(record.level_name),
                                    trace.intern(schema::kLogCategory), track);
  trace.instant_args.add(row, trace.intern(schema::kLogLevel), ArgValue::of_int(record.level));
  trace.instant_args.add(row, trace.intern(schema::kLogMessage),
                         ArgValue::of_string(trace.intern(record.message)));
  trace.instant_args.add(row, trace.intern(schema::kLogLoggerName),
                         ArgValue::of_string(trace.intern(record.logger)));
  trace.instant_args.add(row, trace.intern("code.file.path"),
                         ArgValue::of_string(trace.intern("/app/serve.py")));
  trace.instant_args.add(row, trace.intern("code.line.number"), ArgValue::of_int(12));
  trace.instant_args.add(row, trace.intern("code.function.name"),
                         ArgValue::of_string(trace.intern("handle")));
  for (const auto& [key, value] : more) trace.instant_args.add(row, trace.intern(key), value);
}

// Two processes. Process 42, thread 42: request [1000, 10000) holding step [2000, 5000);
// thread 43: job [1500, 2000). Process 77: one span. Records: before any span, in
// request, in step, at step's end, in request after step, on thread 43 in job and after
// it, in process 77, and a plain instant (not a log record).
Trace sample_trace() {
  Trace trace;
  trace.run.command_line = "/usr/bin/python3 serve.py";
  trace.run.host = "gpu-7";
  trace.run.pid = 42;
  trace.run.trace_id = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = kUnixOffset;
  auto main_track = trace.thread_track(42, 42);
  auto worker = trace.thread_track(42, 43);
  auto child = trace.thread_track(77, 77);
  trace.tracks[main_track].name = trace.intern("MainThread");
  trace.slices.add(1000, 9000, trace.intern("request"), 0, main_track);
  trace.slices.add(2000, 3000, trace.intern("step"), 0, main_track);
  trace.slices.add(1500, 500, trace.intern("job"), 0, worker);
  trace.slices.add(100, 900, trace.intern("child work"), 0, child);
  add_record(trace, main_track, {500, 20, "INFO", "starting", "app"});
  add_record(trace, main_track, {1200, 30, "WARNING", "slow \"request\"\n", "app.http"});
  add_record(trace, main_track, {3000, 40, "ERROR", "step failed", "app"},
             {{"exception.type", ArgValue::of_string(trace.intern("ValueError"))},
              {"exception.message", ArgValue::of_string(trace.intern("bad input"))},
              {"exception.stacktrace", ArgValue::of_string(trace.intern("Traceback ..."))},
              {"user", ArgValue::of_int(7)}});
  add_record(trace, main_track, {5000, 50, "CRITICAL", "at step's end", "app"});
  add_record(trace, main_track, {6000, 10, "DEBUG", "after step", "app"});
  add_record(trace, worker, {1700, 20, "INFO", "in job", "app.worker"});
  add_record(trace, worker, {2100, 20, "INFO", "after job", "app.worker"});
  add_record(trace, child, {400, 25, "Level 25", "child", "child"});
  trace.instants.add(3500, trace.intern("checkpoint"), 0, main_track);
  trace.finalize();
  return trace;
}

RowIndex row_named(const Trace& trace, std::string_view name) {
  for (RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == name) return row;
  return kNoRow;
}

std::string hex_of(uint64_t span_id) { return opsight::trace::span_id_to_hex(span_id); }

std::vector<ProtoField> must_decode(std::string_view bytes) {
  auto decoded = decode_message(bytes);
  EXPECT_TRUE(decoded.has_value());
  return decoded.value_or(std::vector<ProtoField>{});
}

std::map<std::string, std::string> decode_attributes(const std::vector<ProtoField>& message,
                                                     uint32_t field) {
  std::map<std::string, std::string> out;
  for (const ProtoField* attribute : find_fields(message, field)) {
    auto key_value = must_decode(attribute->bytes);
    std::string key(find_field(key_value, otlp::key_value::kKey)->bytes);
    auto value = must_decode(find_field(key_value, otlp::key_value::kValue)->bytes);
    const ProtoField& any = value.at(0);
    if (any.number == otlp::any_value::kStringValue)
      out[key] = "s:" + std::string(any.bytes);
    else if (any.number == otlp::any_value::kIntValue)
      out[key] = "i:" + std::to_string(any.as_int());
    else
      out[key] = "?";
  }
  return out;
}

std::string bytes_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char byte : bytes) {
    out += kDigits[(static_cast<unsigned char>(byte) >> 4) & 0xF];
    out += kDigits[static_cast<unsigned char>(byte) & 0xF];
  }
  return out;
}

TEST(OtlpLogs, SeverityNumbersAreOpenTelemetrysForPythonLevels) {
  EXPECT_EQ(severity_number(0), 0);  // NOTSET: unspecified
  EXPECT_EQ(severity_number(9), 0);
  EXPECT_EQ(severity_number(10), 5);  // DEBUG
  EXPECT_EQ(severity_number(11), 6);  // DEBUG2
  EXPECT_EQ(severity_number(13), 8);  // DEBUG4
  EXPECT_EQ(severity_number(19), 8);
  EXPECT_EQ(severity_number(20), 9);   // INFO
  EXPECT_EQ(severity_number(25), 12);  // INFO4
  EXPECT_EQ(severity_number(30), 13);  // WARN
  EXPECT_EQ(severity_number(40), 17);  // ERROR
  EXPECT_EQ(severity_number(50), 21);  // FATAL (CRITICAL)
  EXPECT_EQ(severity_number(53), 24);
  EXPECT_EQ(severity_number(54), 24);
  EXPECT_EQ(severity_number(1000), 24);
}

TEST(OtlpLogs, EachRecordHasTheInnermostSpanOpenOnItsTrackAtItsTime) {
  Trace trace = sample_trace();
  SpanView spans(trace, {});
  LogView logs(spans);
  ASSERT_EQ(logs.size(), 8u);  // the plain instant is not a log record
  std::map<std::string, std::string> span_of;
  std::vector<std::string> order;
  for (uint32_t record : logs.records()) {
    std::string message(logs.message(record));
    order.push_back(message);
    span_of[message] =
        logs.has_span(record) ? std::string(trace.str(trace.slices.name[logs.span(record)])) : "-";
  }
  EXPECT_EQ(span_of["starting"], "-");  // before any span: none
  EXPECT_EQ(span_of["slow \"request\"\n"], "request");
  EXPECT_EQ(span_of["step failed"], "step");    // the innermost
  EXPECT_EQ(span_of["at step's end"], "step");  // an end holds its time
  EXPECT_EQ(span_of["after step"], "request");  // step has ended: its parent
  EXPECT_EQ(span_of["in job"], "job");          // its own thread's span
  EXPECT_EQ(span_of["after job"], "-");         // not the other thread's request
  EXPECT_EQ(span_of["child"], "child work");
  // Grouped by process, by time within one.
  EXPECT_EQ(order,
            (std::vector<std::string>{"starting", "slow \"request\"\n", "in job", "after job",
                                      "step failed", "at step's end", "after step", "child"}));
  for (uint32_t record : logs.records()) {
    if (!logs.has_span(record)) {
      EXPECT_EQ(logs.span_id(record), 0u);
      EXPECT_EQ(logs.trace_id(record), opsight::trace::TraceId{});
      EXPECT_EQ(logs.trace_flags(record), 0);
      continue;
    }
    EXPECT_EQ(logs.span_id(record), trace.slices.span_id[logs.span(record)]);
    RowIndex root = logs.span(record);  // the record's trace: its span's root's own
    while (trace.slices.parent[root] != opsight::trace::kNoRow) root = trace.slices.parent[root];
    EXPECT_EQ(logs.trace_id(record), opsight::trace::root_trace_id(trace.slices.span_id[root]));
    EXPECT_EQ(logs.trace_flags(record), 1);
  }
}

TEST(OtlpLogs, ARecordInASpanThatJoinedARemoteTraceCarriesThatTrace) {
  Trace trace = sample_trace();
  RowIndex request = row_named(trace, "request");
  opsight::trace::TraceId remote{0x1111111111111111ULL, 0x2222222222222222ULL};
  trace.span_contexts.add(request, remote, 0xabcULL, 0);  // not sampled
  SpanView spans(trace, {});
  LogView logs(spans);
  for (uint32_t record : logs.records()) {
    if (logs.message(record) != "step failed") continue;
    EXPECT_EQ(logs.trace_id(record), remote);  // step inherits its parent's trace
    EXPECT_EQ(logs.span_id(record), trace.slices.span_id[row_named(trace, "step")]);
    EXPECT_EQ(logs.trace_flags(record), 0);
  }
}

TEST(OtlpLogs, ARequestPerProcessAScopePerLoggerAndEveryFieldOfEachRecord) {
  Trace trace = sample_trace();
  ResourceOptions resource;
  resource.service_name = "inference";
  resource.opsight_version = "0.1.0";
  SpanView spans(trace, resource);
  LogView logs(spans);
  std::string body = opsight::exporting::encode_otlp_logs(logs, logs.records());
  auto request = must_decode(body);
  auto resource_logs = find_fields(request, otlp::export_logs_request::kResourceLogs);
  ASSERT_EQ(resource_logs.size(), 2u);  // processes 42 and 77

  struct Seen {
    std::string scope, severity_text, body, trace_id, span_id;
    int64_t severity = -1, pid = 0;
    uint64_t time = 0, observed = 0, flags = 99;
    std::map<std::string, std::string> attributes;
  };
  std::map<std::string, Seen> seen;
  std::vector<std::string> scopes;
  for (const ProtoField* resource_field : resource_logs) {
    auto resource_message = must_decode(resource_field->bytes);
    auto resource_attributes = decode_attributes(
        must_decode(find_field(resource_message, otlp::resource_logs::kResource)->bytes),
        otlp::resource::kAttributes);
    EXPECT_EQ(resource_attributes["service.name"], "s:inference");
    EXPECT_EQ(resource_attributes["telemetry.sdk.name"], "s:opsight");
    int64_t pid = std::stoll(resource_attributes["process.pid"].substr(2));
    for (const ProtoField* scope_field :
         find_fields(resource_message, otlp::resource_logs::kScopeLogs)) {
      auto scope_logs = must_decode(scope_field->bytes);
      std::string scope(
          find_field(must_decode(find_field(scope_logs, otlp::scope_logs::kScope)->bytes),
                     otlp::scope::kName)
              ->bytes);
      scopes.push_back(std::to_string(pid) + ":" + scope);
      for (const ProtoField* record_field :
           find_fields(scope_logs, otlp::scope_logs::kLogRecords)) {
        auto record = must_decode(record_field->bytes);
        Seen entry;
        entry.scope = scope;
        entry.pid = pid;
        entry.time = find_field(record, otlp::log_record::kTimeUnixNano)->value;
        entry.observed = find_field(record, otlp::log_record::kObservedTimeUnixNano)->value;
        EXPECT_EQ(find_field(record, otlp::log_record::kTimeUnixNano)->wire_type, 1u);  // fixed64
        entry.severity = find_field(record, otlp::log_record::kSeverityNumber)->as_int();
        entry.severity_text = find_field(record, otlp::log_record::kSeverityText)->bytes;
        auto body_value = must_decode(find_field(record, otlp::log_record::kBody)->bytes);
        entry.body = find_field(body_value, otlp::any_value::kStringValue)->bytes;
        entry.attributes = decode_attributes(record, otlp::log_record::kAttributes);
        if (auto flags = find_field(record, otlp::log_record::kFlags)) {
          EXPECT_EQ(flags->wire_type, 5u);  // fixed32
          entry.flags = flags->value;
        }
        if (auto id = find_field(record, otlp::log_record::kTraceId))
          entry.trace_id = bytes_hex(id->bytes);
        if (auto id = find_field(record, otlp::log_record::kSpanId))
          entry.span_id = bytes_hex(id->bytes);
        seen[entry.body] = entry;
      }
    }
  }
  ASSERT_EQ(seen.size(), 8u);
  // A scope per logger, in order of first appearance within a process.
  EXPECT_EQ(scopes,
            (std::vector<std::string>{"42:app", "42:app.http", "42:app.worker", "77:child"}));

  const Seen& error = seen.at("step failed");
  EXPECT_EQ(error.scope, "app");
  EXPECT_EQ(error.time, static_cast<uint64_t>(kUnixOffset + 3000));
  EXPECT_EQ(error.observed, error.time);
  EXPECT_EQ(error.severity, 17);
  EXPECT_EQ(error.severity_text, "ERROR");
  EXPECT_EQ(
      error.trace_id,  // step's root: the request
      opsight::trace::root_trace_id(trace.slices.span_id[row_named(trace, "request")]).to_hex());
  EXPECT_EQ(error.span_id, hex_of(trace.slices.span_id[row_named(trace, "step")]));
  EXPECT_EQ(error.flags, 1u);
  EXPECT_EQ(error.attributes,
            (std::map<std::string, std::string>{{"logger.name", "s:app"},
                                                {"code.file.path", "s:/app/serve.py"},
                                                {"code.line.number", "i:12"},
                                                {"code.function.name", "s:handle"},
                                                {"exception.type", "s:ValueError"},
                                                {"exception.message", "s:bad input"},
                                                {"exception.stacktrace", "s:Traceback ..."},
                                                {"user", "i:7"},
                                                {"thread.id", "i:42"},
                                                {"thread.name", "s:MainThread"}}));

  const Seen& outside = seen.at("starting");
  EXPECT_EQ(outside.trace_id, "");  // no span: no ids, no flags
  EXPECT_EQ(outside.span_id, "");
  EXPECT_EQ(outside.flags, 99u);
  EXPECT_EQ(outside.severity, 9);

  EXPECT_EQ(seen.at("slow \"request\"\n").scope, "app.http");
  EXPECT_EQ(seen.at("slow \"request\"\n").span_id,
            hex_of(trace.slices.span_id[row_named(trace, "request")]));
  EXPECT_EQ(seen.at("at step's end").severity, 21);
  EXPECT_EQ(seen.at("after step").severity, 5);
  EXPECT_EQ(seen.at("in job").attributes.at("thread.id"), "i:43");
  EXPECT_EQ(seen.at("child").severity_text, "Level 25");
  EXPECT_EQ(seen.at("child").severity, 12);
  EXPECT_EQ(seen.at("child").span_id, hex_of(trace.slices.span_id[row_named(trace, "child work")]));

  // A batch: only its records.
  std::string two_body = opsight::exporting::encode_otlp_logs(logs, logs.records().subspan(0, 2));
  auto two = must_decode(two_body);
  size_t records = 0;
  // Each decoded message is held by a name: find_fields points into it.
  for (const ProtoField* resource_field :
       find_fields(two, otlp::export_logs_request::kResourceLogs)) {
    const auto resource_message = must_decode(resource_field->bytes);
    for (const ProtoField* scope_field :
         find_fields(resource_message, otlp::resource_logs::kScopeLogs)) {
      const auto scope_message = must_decode(scope_field->bytes);
      records += find_fields(scope_message, otlp::scope_logs::kLogRecords).size();
    }
  }
  EXPECT_EQ(records, 2u);
  EXPECT_EQ(opsight::exporting::encode_otlp_logs(logs, {}), "");  // no record: an empty request
}

// As the bridge lays them out: the instants on the thread's "logs" lane, each naming the
// track it was logged on (log.lane): the thread's own (0), or an asyncio task's lane, whose
// key a later task reuses (a track of its own). Each record's span is on that track.
TEST(OtlpLogs, ARecordOnTheLogsLaneHasTheSpanOfTheTrackItWasLoggedOn) {
  Trace trace;
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = kUnixOffset;
  auto own = trace.thread_track(9, 9);
  trace.tracks[own].name = trace.intern("MainThread");
  constexpr uint64_t kTaskKey = 0x7f00'0000'1000;
  auto first_task = trace.async_track(9, 9, kTaskKey, "asyncio Task-1 (handler)");
  auto logs_lane = trace.async_track(9, 9, schema::kLogLaneKey, schema::kLogLaneName);
  auto second_task = trace.async_track(9, 9, kTaskKey, "asyncio Task-2 (handler)");
  trace.slices.add(0, 1000, trace.intern("main"), 0, own);
  trace.slices.add(100, 200, trace.intern("task one"), 0, first_task);
  trace.slices.add(150, 100, trace.intern("task one inner"), 0, first_task);
  trace.slices.add(500, 200, trace.intern("task two"), 0, second_task);
  auto on_lane = [&](int64_t ts, std::string_view message, uint64_t lane) {
    add_record(trace, logs_lane, {ts, 20, "INFO", message, "app"},
               {{schema::kLogLane, ArgValue::of_int(static_cast<int64_t>(lane))}});
  };
  on_lane(50, "on the thread", 0);
  on_lane(160, "in task one", kTaskKey);
  on_lane(600, "in task two", kTaskKey);
  on_lane(650, "on the thread while task two ran", 0);
  trace.finalize();
  SpanView spans(trace, {});
  LogView logs(spans);
  std::map<std::string, std::string> span_of, thread_of;
  std::vector<opsight::exporting::Attribute> attributes;
  for (uint32_t record : logs.records()) {
    std::string message(logs.message(record));
    span_of[message] =
        logs.has_span(record) ? std::string(trace.str(trace.slices.name[logs.span(record)])) : "-";
    logs.attributes(record, attributes);
    for (const auto& attribute : attributes) {
      EXPECT_NE(attribute.key, schema::kLogLane);  // the lane is no attribute
      if (attribute.key == "thread.name") thread_of[message] = attribute.value.string_value;
    }
  }
  EXPECT_EQ(span_of["on the thread"], "main");
  EXPECT_EQ(span_of["in task one"], "task one inner");
  EXPECT_EQ(span_of["in task two"], "task two");  // the reused key's later track
  EXPECT_EQ(span_of["on the thread while task two ran"], "main");
  EXPECT_EQ(thread_of["in task one"], "asyncio Task-1 (handler)");  // its track's, not "logs"
  EXPECT_EQ(thread_of["on the thread"], "MainThread");
}

TEST(OtlpLogs, ATraceWithoutLogRecordsHasNone) {
  Trace trace;
  auto track = trace.thread_track(1, 1);
  trace.slices.add(0, 10, trace.intern("work"), 0, track);
  trace.instants.add(5, trace.intern("mark"), trace.intern("other"), track);
  trace.finalize();
  SpanView spans(trace, {});
  EXPECT_EQ(LogView(spans).size(), 0u);
}

// Loki's push body: streams by service and level (lower case), values by time, the line a
// JSON object with the message, the span's ids and the attributes.
TEST(LokiLogs, StreamsByServiceAndLevelWithTheIdsInEachLine) {
  Trace trace = sample_trace();
  ResourceOptions resource;
  resource.service_name = "inference";
  SpanView spans(trace, resource);
  LogView logs(spans);
  auto body =
      nlohmann::json::parse(opsight::exporting::encode_loki_log_records(logs, logs.records()));
  std::map<std::string, std::vector<std::pair<std::string, nlohmann::json>>> streams;
  for (const auto& stream : body["streams"]) {
    std::string labels = stream["stream"]["service_name"].get<std::string>() + "|" +
                         stream["stream"]["level"].get<std::string>();
    EXPECT_EQ(stream["stream"].size(), 2u);  // service_name and level, nothing else
    for (const auto& value : stream["values"])
      streams[labels].emplace_back(value[0], nlohmann::json::parse(value[1].get<std::string>()));
  }
  EXPECT_EQ(streams.size(), 6u);
  const auto& info = streams.at("inference|info");
  ASSERT_EQ(info.size(), 3u);  // starting, in job, after job: by time
  EXPECT_EQ(info[0].first, std::to_string(kUnixOffset + 500));
  EXPECT_EQ(info[1].first, std::to_string(kUnixOffset + 1700));
  EXPECT_EQ(info[2].first, std::to_string(kUnixOffset + 2100));
  EXPECT_EQ(info[0].second["message"], "starting");
  EXPECT_FALSE(info[0].second.contains("trace_id"));  // outside every span
  EXPECT_EQ(info[1].second["span_id"], hex_of(trace.slices.span_id[row_named(trace, "job")]));
  EXPECT_EQ(info[1].second["trace_id"],  // the job is a root: a trace of its own
            opsight::trace::root_trace_id(trace.slices.span_id[row_named(trace, "job")]).to_hex());

  const nlohmann::json& error = streams.at("inference|error").at(0).second;
  EXPECT_EQ(error["message"], "step failed");
  EXPECT_EQ(error["span_id"], hex_of(trace.slices.span_id[row_named(trace, "step")]));
  EXPECT_EQ(error["attributes"]["exception.type"], "ValueError");
  EXPECT_EQ(error["attributes"]["user"], 7);  // typed
  EXPECT_EQ(error["attributes"]["code.line.number"], 12);
  EXPECT_EQ(error["attributes"]["logger.name"], "app");
  EXPECT_EQ(error["attributes"]["thread.name"], "MainThread");
  EXPECT_EQ(streams.at("inference|warning").at(0).second["message"], "slow \"request\"\n");
  EXPECT_EQ(streams.at("inference|level 25").at(0).second["message"], "child");
  EXPECT_EQ(opsight::exporting::encode_loki_log_records(logs, {}), R"({"streams":[]})");
}

TEST(OtlpLogs, TheLogsVariablesWinOverTheGeneralOnes) {
  std::map<std::string, std::string> variables;
  auto environment = [&](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
  std::string error;
  auto target = opsight::exporting::parse_export_target("otlp-logs", environment, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://localhost:4318/v1/logs");
  EXPECT_EQ(target->sink->payload, opsight::exporting::SinkPayload::kLogs);
  EXPECT_EQ(target->sink->item, "log record");

  target = opsight::exporting::parse_export_target("otlp-logs=http://collector:4318", environment,
                                                   &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://collector:4318/v1/logs");

  variables = {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/"},
               {"OTEL_EXPORTER_OTLP_HEADERS", "a=general,b=general"},
               {"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "b=logs"},
               {"OTEL_EXPORTER_OTLP_COMPRESSION", "none"},
               {"OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip"},
               {"OTEL_EXPORTER_OTLP_TIMEOUT", "9000"},
               {"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "1500"},
               {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces-only:4318/x"}};
  target = opsight::exporting::parse_export_target("otlp-logs", environment, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://base:4318/v1/logs");
  EXPECT_EQ(target->headers,
            (std::vector<std::pair<std::string, std::string>>{{"a", "general"}, {"b", "logs"}}));
  EXPECT_TRUE(target->gzip);
  EXPECT_DOUBLE_EQ(target->timeout_s, 1.5);

  variables["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = "http://logs:4318/custom/path";
  target = opsight::exporting::parse_export_target("otlp-logs", environment, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://logs:4318/custom/path");  // as is

  variables["OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"] = "http/json";  // grpc: otlp-logs-grpc
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp-logs", environment, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL 'http/json'"), std::string::npos) << error;
  variables.erase("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL");
  variables["OTEL_EXPORTER_OTLP_LOGS_COMPRESSION"] = "br";
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp-logs", environment, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION 'br'"), std::string::npos) << error;
}

// Both log sinks through export_trace to a server in this process: batches of records to
// the URL's path, counted as log records; loki-logs with Loki's tenant header and basic
// authentication.
TEST(OtlpLogs, ExportTraceSendsTheRecordsOfBothLogSinks) {
  httplib::Server server;
  std::mutex mutex;
  struct Request {
    std::string path, type, tenant, authorization, body;
  };
  std::vector<Request> requests;
  server.Post(R"(/.*)", [&](const httplib::Request& request, httplib::Response& response) {
    std::lock_guard lock(mutex);
    requests.push_back({request.path, request.get_header_value("Content-Type"),
                        request.get_header_value("X-Scope-OrgID"),
                        request.get_header_value("Authorization"), request.body});
    response.status = 200;
  });
  server.set_keep_alive_timeout(1);
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::map<std::string, std::string> variables{{"OPSIGHT_LOKI_TENANT", "team-a"},
                                               {"OPSIGHT_LOKI_BASIC_AUTH", "user:secret"}};
  auto environment = [&](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
  std::string base = "http://127.0.0.1:" + std::to_string(port), error;
  auto otlp_target =
      opsight::exporting::parse_export_target("otlp-logs=" + base, environment, &error);
  ASSERT_TRUE(otlp_target) << error;
  auto loki_target =
      opsight::exporting::parse_export_target("loki-logs=" + base, environment, &error);
  ASSERT_TRUE(loki_target) << error;
  Trace trace = sample_trace();
  opsight::exporting::TraceExportOptions options;
  options.batch_spans = 5;
  options.requests_in_flight = 1;
  auto reports = opsight::exporting::export_trace(trace, {*otlp_target, *loki_target}, options);
  server.stop();
  serving.join();
  ASSERT_EQ(reports.size(), 2u);
  for (const auto& report : reports) {
    EXPECT_EQ(report.item, "log record");
    EXPECT_EQ(report.stats.spans_offered, 8u);
    EXPECT_EQ(report.stats.spans_sent, 8u) << report.stats.last_error;
    EXPECT_EQ(report.stats.batches_sent, 2u);  // 5 + 3
  }
  EXPECT_EQ(reports[0].description, "otlp-logs " + base + "/v1/logs");
  EXPECT_EQ(reports[1].description, "loki-logs " + base + "/loki/api/v1/push");
  size_t otlp_requests = 0, loki_requests = 0;
  for (const Request& request : requests) {
    if (request.path == "/v1/logs") {
      ++otlp_requests;
      EXPECT_EQ(request.type, "application/x-protobuf");
      EXPECT_TRUE(decode_message(request.body).has_value());
      EXPECT_EQ(request.tenant, "");
    } else {
      ++loki_requests;
      EXPECT_EQ(request.path, "/loki/api/v1/push");
      EXPECT_EQ(request.type, "application/json");
      EXPECT_EQ(request.tenant, "team-a");
      EXPECT_EQ(request.authorization, "Basic dXNlcjpzZWNyZXQ=");  // user:secret
      EXPECT_TRUE(nlohmann::json::accept(request.body));
    }
  }
  EXPECT_EQ(otlp_requests, 2u);
  EXPECT_EQ(loki_requests, 2u);
}

// A collector's partial success for logs (ExportLogsServiceResponse: rejected_log_records
// under the traces' field numbers): counted as dropped, named log records.
TEST(OtlpLogs, APartialSuccessCountsRejectedLogRecords) {
  std::string partial, answer;
  opsight::wire::ProtoEncoder(partial).varint_field(
      opsight::exporting::otlp::partial_success::kRejectedSpans, 3);
  opsight::wire::ProtoEncoder(answer).bytes_field(
      opsight::exporting::otlp::export_response::kPartialSuccess, partial);
  httplib::Server server;
  server.Post("/v1/logs", [&](const httplib::Request&, httplib::Response& response) {
    response.set_content(answer, "application/x-protobuf");
  });
  server.set_keep_alive_timeout(1);
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string error;
  auto target = opsight::exporting::parse_export_target(
      "otlp-logs=http://127.0.0.1:" + std::to_string(port),
      [](const char*) -> const char* { return nullptr; }, &error);
  ASSERT_TRUE(target) << error;
  opsight::exporting::TraceExportOptions options;
  options.requests_in_flight = 1;
  auto reports = opsight::exporting::export_trace(sample_trace(), {*target}, options);
  server.stop();
  serving.join();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].stats.spans_offered, 8u);
  EXPECT_EQ(reports[0].stats.spans_sent, 5u);
  EXPECT_NE(reports[0].stats.last_error.find("rejected 3 log records of the batch"),
            std::string::npos)
      << reports[0].stats.last_error;
}

}  // namespace
}  // namespace otlp_logs_test
