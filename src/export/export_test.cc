// Golden tests of the export encoders: a small trace (two processes, nested spans with
// arguments, a server span, an exception, a flow, an unfinished span) encoded as OTLP
// protobuf (decoded back field by field with the wire walker), OTLP JSON, Zipkin JSON and
// Loki push JSON (parsed back with nlohmann::json), and Prometheus text; a Loki push to an
// HTTP server in this process; and how export targets are read from the command line and
// the OTEL_* environment (Kafka's too: brokers, topic, librdkafka properties).
#include "export/export.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "export/loki/loki_encoder.hpp"
#include "export/otlp/otlp_encoder.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "export/prometheus/prometheus_text.hpp"
#include "export/zipkin/zipkin_encoder.hpp"
#include "wire/proto_decoder_for_tests.hpp"

namespace {

using opsight::exporting::ResourceOptions;
using opsight::exporting::SpanView;
using opsight::trace::ArgValue;
using opsight::trace::RowIndex;
using opsight::trace::StringId;
using opsight::trace::Trace;
using opsight::wire::testing::decode_message;
using opsight::wire::testing::find_field;
using opsight::wire::testing::find_fields;
using opsight::wire::testing::ProtoField;
namespace otlp = opsight::exporting::otlp;

constexpr int64_t kUnixOffset = 1'700'000'000'000'000'000;

Trace sample_trace() {
  Trace trace;
  trace.run.command_line = "/usr/bin/python3 serve.py --port 80";
  trace.run.host = "gpu-7";
  trace.run.pid = 42;
  trace.run.trace_id = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = kUnixOffset;
  trace.run.overhead_ns = 2'500'000;
  trace.run.traced_ns = 1'000'000'000;
  trace.run.events_dropped = 3;
  auto main_track = trace.thread_track(42, 42);
  auto worker = trace.thread_track(42, 43);
  auto child = trace.thread_track(77, 77);
  trace.tracks[main_track].name = trace.intern("main");
  trace.process(77).parent_pid = 42;
  trace.process(77).name = trace.intern("worker process");
  auto request =
      trace.slices.add(1000, 9000, trace.intern("request"), trace.intern("http"), main_track);
  trace.slices.add(2000, 3000, trace.intern("preprocess \"fast\""), 0, main_track);
  auto job = trace.slices.add(1500, 500, trace.intern("job"), 0, worker);
  trace.slices.add(4000, 2500, trace.intern("child work"), 0, child,
                   opsight::trace::kSliceUnfinished);
  trace.slice_args.add(request, trace.intern("batch"), ArgValue::of_int(8));
  trace.slice_args.add(request, trace.intern("ratio"), ArgValue::of_double(0.25));
  trace.slice_args.add(request, trace.intern("cached"), ArgValue::of_bool(true));
  trace.slice_args.add(request, trace.intern("span.kind"),
                       ArgValue::of_string(trace.intern("server")));
  trace.slice_args.add(job, trace.intern("exception.type"),
                       ArgValue::of_string(trace.intern("ValueError")));
  trace.slice_args.add(job, trace.intern("exception.message"),
                       ArgValue::of_string(trace.intern("bad \"input\"\n")));
  trace.counters.add(1000, trace.counter_track(42, "process.rss_bytes", "bytes"), 1.5e6);
  trace.counters.add(9000, trace.counter_track(42, "process.rss_bytes", "bytes"), 2.5e6);
  trace.finalize();
  // The job was handed off by the request (a flow), after finalize() settled the rows.
  RowIndex request_row = 0, job_row = 0;
  for (RowIndex row = 0; row < trace.slices.size(); ++row) {
    if (trace.str(trace.slices.name[row]) == "request") request_row = row;
    if (trace.str(trace.slices.name[row]) == "job") job_row = row;
  }
  trace.flows.add(request_row, job_row, 5);
  return trace;
}

RowIndex row_named(const Trace& trace, std::string_view name) {
  for (RowIndex row = 0; row < trace.slices.size(); ++row)
    if (trace.str(trace.slices.name[row]) == name) return row;
  return opsight::trace::kNoRow;
}

std::string be_bytes(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (56 - 8 * i));
  return out;
}

std::vector<ProtoField> must_decode(std::string_view bytes) {
  auto decoded = decode_message(bytes);
  EXPECT_TRUE(decoded.has_value());
  return decoded.value_or(std::vector<ProtoField>{});
}

// An OTLP KeyValue list as "key=value" strings.
std::map<std::string, std::string> decode_attributes(const std::vector<ProtoField>& message,
                                                     uint32_t field) {
  std::map<std::string, std::string> out;
  for (const ProtoField* attribute : find_fields(message, field)) {
    auto key_value = must_decode(attribute->bytes);
    std::string key(find_field(key_value, otlp::key_value::kKey)->bytes);
    auto value = must_decode(find_field(key_value, otlp::key_value::kValue)->bytes);
    const ProtoField& any = value.at(0);
    switch (any.number) {
      case otlp::any_value::kStringValue:
        out[key] = "s:" + std::string(any.bytes);
        break;
      case otlp::any_value::kBoolValue:
        out[key] = any.value ? "b:true" : "b:false";
        break;
      case otlp::any_value::kIntValue:
        out[key] = "i:" + std::to_string(any.as_int());
        break;
      case otlp::any_value::kDoubleValue:
        out[key] = "d:" + std::to_string(any.as_double());
        break;
      default:
        out[key] = "?";
    }
  }
  return out;
}

TEST(OtlpProtobuf, EverySpanWithItsIdsTimesAttributesEventsAndLinksPerProcess) {
  Trace trace = sample_trace();
  ResourceOptions resource;
  resource.opsight_version = "0.1.0";
  resource.attributes = {{"deployment.environment", "staging"}};
  SpanView view(trace, resource);
  std::string body = opsight::exporting::encode_otlp_protobuf(view, view.rows());
  auto request = must_decode(body);
  auto resource_spans = find_fields(request, otlp::export_request::kResourceSpans);
  ASSERT_EQ(resource_spans.size(), 2u);  // pid 42, pid 77

  auto first = must_decode(resource_spans[0]->bytes);
  auto resource_message = must_decode(find_field(first, otlp::resource_spans::kResource)->bytes);
  auto resource_attributes = decode_attributes(resource_message, otlp::resource::kAttributes);
  EXPECT_EQ(resource_attributes["service.name"], "s:serve.py");
  EXPECT_EQ(resource_attributes["host.name"], "s:gpu-7");
  EXPECT_EQ(resource_attributes["process.pid"], "i:42");
  EXPECT_EQ(resource_attributes["process.command_line"], "s:/usr/bin/python3 serve.py --port 80");
  EXPECT_EQ(resource_attributes["telemetry.sdk.name"], "s:opsight");
  EXPECT_EQ(resource_attributes["telemetry.sdk.version"], "s:0.1.0");
  EXPECT_EQ(resource_attributes["deployment.environment"], "s:staging");

  auto scope_spans = must_decode(find_field(first, otlp::resource_spans::kScopeSpans)->bytes);
  auto scope = must_decode(find_field(scope_spans, otlp::scope_spans::kScope)->bytes);
  EXPECT_EQ(find_field(scope, otlp::scope::kName)->bytes, "opsight");
  auto spans = find_fields(scope_spans, otlp::scope_spans::kSpans);
  ASSERT_EQ(spans.size(), 3u);  // request, job, preprocess: by start time

  std::map<std::string, std::vector<ProtoField>> by_name;
  for (const ProtoField* span : spans) {
    auto fields = must_decode(span->bytes);
    by_name[std::string(find_field(fields, otlp::span::kName)->bytes)] = fields;
  }
  const auto& request_span = by_name.at("request");
  // The request is a root: the root of a trace of its own.
  RowIndex request_row = row_named(trace, "request");
  const opsight::trace::TraceId request_trace =
      opsight::trace::root_trace_id(trace.slices.span_id[request_row]);
  std::string trace_id = be_bytes(request_trace.high) + be_bytes(request_trace.low);
  EXPECT_EQ(find_field(request_span, otlp::span::kTraceId)->bytes, trace_id);
  EXPECT_EQ(find_field(request_span, otlp::span::kSpanId)->bytes,
            be_bytes(trace.slices.span_id[request_row]));
  EXPECT_EQ(find_field(request_span, otlp::span::kParentSpanId), nullptr);  // a root
  EXPECT_EQ(find_field(request_span, otlp::span::kKind)->value, 2u);        // SERVER
  EXPECT_EQ(find_field(request_span, otlp::span::kStartTimeUnixNano)->value,
            static_cast<uint64_t>(kUnixOffset + 1000));
  EXPECT_EQ(find_field(request_span, otlp::span::kEndTimeUnixNano)->value,
            static_cast<uint64_t>(kUnixOffset + 10000));
  EXPECT_EQ(find_field(request_span, otlp::span::kFlags)->value, 0x101u);
  auto attributes = decode_attributes(request_span, otlp::span::kAttributes);
  EXPECT_EQ(attributes["batch"], "i:8");
  EXPECT_EQ(attributes["ratio"], "d:0.250000");
  EXPECT_EQ(attributes["cached"], "b:true");
  EXPECT_EQ(attributes["thread.id"], "i:42");
  EXPECT_EQ(attributes["thread.name"], "s:main");
  EXPECT_EQ(attributes["opsight.category"], "s:http");
  EXPECT_EQ(attributes.count("span.kind"), 0u);  // became the kind

  const auto& preprocess = by_name.at("preprocess \"fast\"");
  EXPECT_EQ(find_field(preprocess, otlp::span::kParentSpanId)->bytes,
            be_bytes(trace.slices.span_id[request_row]));
  EXPECT_EQ(find_field(preprocess, otlp::span::kKind)->value, 1u);  // INTERNAL

  const auto& job = by_name.at("job");
  EXPECT_EQ(decode_attributes(job, otlp::span::kAttributes).count("exception.type"), 0u);
  auto event = must_decode(find_field(job, otlp::span::kEvents)->bytes);
  EXPECT_EQ(find_field(event, otlp::event::kName)->bytes, "exception");
  EXPECT_EQ(find_field(event, otlp::event::kTimeUnixNano)->value,
            static_cast<uint64_t>(kUnixOffset + 2000));  // at the span's end
  auto event_attributes = decode_attributes(event, otlp::event::kAttributes);
  EXPECT_EQ(event_attributes["exception.type"], "s:ValueError");
  EXPECT_EQ(event_attributes["exception.message"], "s:bad \"input\"\n");
  auto status = must_decode(find_field(job, otlp::span::kStatus)->bytes);
  EXPECT_EQ(find_field(status, otlp::status::kCode)->value, 2u);
  EXPECT_EQ(find_field(status, otlp::status::kMessage)->bytes, "ValueError: bad \"input\"\n");
  auto link = must_decode(find_field(job, otlp::span::kLinks)->bytes);
  EXPECT_EQ(find_field(link, otlp::link::kSpanId)->bytes,
            be_bytes(trace.slices.span_id[request_row]));
  EXPECT_EQ(find_field(link, otlp::link::kTraceId)->bytes, trace_id);

  auto second = must_decode(resource_spans[1]->bytes);
  auto second_resource =
      decode_attributes(must_decode(find_field(second, otlp::resource_spans::kResource)->bytes),
                        otlp::resource::kAttributes);
  EXPECT_EQ(second_resource["process.pid"], "i:77");
  EXPECT_EQ(second_resource["process.parent_pid"], "i:42");
  EXPECT_EQ(second_resource["process.title"], "s:worker process");
  EXPECT_EQ(second_resource.count("process.command_line"), 0u);  // not this process's
  auto child_spans = must_decode(find_field(second, otlp::resource_spans::kScopeSpans)->bytes);
  auto child = must_decode(find_field(child_spans, otlp::scope_spans::kSpans)->bytes);
  EXPECT_EQ(decode_attributes(child, otlp::span::kAttributes)["opsight.unfinished"], "b:true");
}

// A request that came with a traceparent: its span and the spans under it are sent in the
// caller's trace, the request's parent the caller's span (a remote parent); every other
// root is a trace of its own.
TEST(SpanView, SpansUnderAJoinedRemoteTraceTakeItsIdAndTheRemoteParent) {
  Trace trace = sample_trace();
  RowIndex request = row_named(trace, "request");
  RowIndex preprocess = row_named(trace, "preprocess \"fast\"");
  RowIndex job = row_named(trace, "job");
  const opsight::trace::TraceId remote{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL};
  trace.span_contexts.add(request, remote, 0x00f067aa0ba902b7ULL, 1);
  SpanView view(trace, {});
  EXPECT_EQ(view.trace_id(request), remote);
  EXPECT_EQ(view.trace_id(preprocess), remote);  // under the request
  EXPECT_EQ(view.trace_id(job), opsight::trace::root_trace_id(trace.slices.span_id[job]));
  EXPECT_EQ(view.parent_span_id(request), 0x00f067aa0ba902b7ULL);
  EXPECT_TRUE(view.has_remote_parent(request));
  EXPECT_EQ(view.parent_span_id(preprocess), trace.slices.span_id[request]);
  EXPECT_FALSE(view.has_remote_parent(preprocess));

  std::string body = opsight::exporting::encode_otlp_protobuf(view, std::span(&request, 1));
  auto request_message = must_decode(body);
  auto resource_spans =
      must_decode(find_field(request_message, otlp::export_request::kResourceSpans)->bytes);
  auto scope_spans =
      must_decode(find_field(resource_spans, otlp::resource_spans::kScopeSpans)->bytes);
  auto span = must_decode(find_field(scope_spans, otlp::scope_spans::kSpans)->bytes);
  EXPECT_EQ(find_field(span, otlp::span::kTraceId)->bytes,
            be_bytes(remote.high) + be_bytes(remote.low));
  EXPECT_EQ(find_field(span, otlp::span::kParentSpanId)->bytes, be_bytes(0x00f067aa0ba902b7ULL));
  EXPECT_EQ(find_field(span, otlp::span::kFlags)->value, 0x301u);  // sampled, remote parent
}

// OpenTelemetry's semantic conventions set error.type only when an operation failed (an
// HTTP server span that answered 5xx carries error.type "500"): an error status, whose
// message is that value, without an exception event.
TEST(SpanView, ErrorTypeIsAnErrorStatusWithoutAnExceptionEvent) {
  Trace trace;
  trace.run.pid = 42;
  trace.run.trace_id = {1, 2};
  auto track = trace.thread_track(42, 42);
  auto request_slice = trace.slices.add(1000, 9000, trace.intern("request"), 0, track);
  auto job_slice = trace.slices.add(2000, 500, trace.intern("job"), 0, track);
  trace.slice_args.add(request_slice, trace.intern("error.type"),
                       ArgValue::of_string(trace.intern("500")));
  trace.slice_args.add(job_slice, trace.intern("exception.type"),
                       ArgValue::of_string(trace.intern("ValueError")));
  trace.slice_args.add(job_slice, trace.intern("exception.message"),
                       ArgValue::of_string(trace.intern("bad \"input\"\n")));
  trace.finalize();
  RowIndex request = row_named(trace, "request");
  RowIndex job = row_named(trace, "job");
  SpanView view(trace, {});
  EXPECT_TRUE(view.has_error(request));
  EXPECT_FALSE(view.has_exception(request));
  EXPECT_EQ(view.error_message(request), "500");
  EXPECT_TRUE(view.has_error(job) && view.has_exception(job));  // exception.type: both
  EXPECT_EQ(view.error_message(job), "ValueError: bad \"input\"\n");

  std::string body = opsight::exporting::encode_otlp_protobuf(view, std::span(&request, 1));
  auto request_message = must_decode(body);
  auto resource_spans =
      must_decode(find_field(request_message, otlp::export_request::kResourceSpans)->bytes);
  auto scope_spans =
      must_decode(find_field(resource_spans, otlp::resource_spans::kScopeSpans)->bytes);
  auto span = must_decode(find_field(scope_spans, otlp::scope_spans::kSpans)->bytes);
  EXPECT_EQ(find_field(span, otlp::span::kEvents), nullptr);
  auto status = must_decode(find_field(span, otlp::span::kStatus)->bytes);
  EXPECT_EQ(find_field(status, otlp::status::kCode)->value, 2u);
  EXPECT_EQ(find_field(status, otlp::status::kMessage)->bytes, "500");
  EXPECT_EQ(decode_attributes(span, otlp::span::kAttributes)["error.type"], "s:500");

  auto json =
      nlohmann::json::parse(opsight::exporting::encode_otlp_json(view, std::span(&request, 1)));
  const auto& json_span = json["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  EXPECT_FALSE(json_span.contains("events"));
  EXPECT_EQ(json_span["status"]["code"], 2);
  EXPECT_EQ(json_span["status"]["message"], "500");
  auto zipkin =
      nlohmann::json::parse(opsight::exporting::encode_zipkin_json(view, std::span(&request, 1)));
  EXPECT_EQ(zipkin[0]["tags"]["error"], "500");
}

TEST(OtlpProtobuf, ABatchOfSomeRowsHoldsJustThose) {
  Trace trace = sample_trace();
  SpanView view(trace, {});
  auto rows = view.rows().subspan(1, 2);
  std::string body = opsight::exporting::encode_otlp_protobuf(view, rows);
  auto request = must_decode(body);
  size_t spans = 0;
  for (const ProtoField* resource_spans :
       find_fields(request, otlp::export_request::kResourceSpans)) {
    auto message = must_decode(resource_spans->bytes);
    for (const ProtoField* scope : find_fields(message, otlp::resource_spans::kScopeSpans))
      spans += find_fields(must_decode(scope->bytes), otlp::scope_spans::kSpans).size();
  }
  EXPECT_EQ(spans, 2u);
}

TEST(OtlpJson, TheJsonMappingHexIdsStringIntegersAndNumericEnums) {
  Trace trace = sample_trace();
  SpanView view(trace, {});
  auto document = nlohmann::json::parse(opsight::exporting::encode_otlp_json(view, view.rows()));
  ASSERT_EQ(document["resourceSpans"].size(), 2u);
  const auto& spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.size(), 3u);
  const nlohmann::json* request = nullptr;
  const nlohmann::json* job = nullptr;
  for (const auto& span : spans) {
    if (span["name"] == "request") request = &span;
    if (span["name"] == "job") job = &span;
  }
  ASSERT_TRUE(request && job);
  EXPECT_EQ(
      (*request)["traceId"],
      opsight::trace::root_trace_id(trace.slices.span_id[row_named(trace, "request")]).to_hex());
  EXPECT_EQ((*request)["spanId"],
            opsight::trace::span_id_to_hex(trace.slices.span_id[row_named(trace, "request")]));
  EXPECT_EQ((*request)["kind"], 2);
  EXPECT_EQ((*request)["startTimeUnixNano"], std::to_string(kUnixOffset + 1000));
  EXPECT_EQ((*request)["endTimeUnixNano"], std::to_string(kUnixOffset + 10000));
  std::map<std::string, nlohmann::json> attributes;
  for (const auto& attribute : (*request)["attributes"])
    attributes[attribute["key"]] = attribute["value"];
  EXPECT_EQ(attributes["batch"]["intValue"], "8");
  EXPECT_EQ(attributes["ratio"]["doubleValue"], 0.25);
  EXPECT_EQ(attributes["cached"]["boolValue"], true);
  EXPECT_EQ((*job)["status"]["code"], 2);
  EXPECT_EQ((*job)["events"][0]["name"], "exception");
  EXPECT_EQ((*job)["links"][0]["spanId"], (*request)["spanId"]);
  EXPECT_EQ(document["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "serve.py");
}

TEST(ZipkinJson, MicrosecondsThatNeverShrinkAKindAndStringTags) {
  Trace trace = sample_trace();
  ResourceOptions resource;
  resource.service_name = "inference";
  SpanView view(trace, resource);
  auto spans = nlohmann::json::parse(opsight::exporting::encode_zipkin_json(view, view.rows()));
  ASSERT_EQ(spans.size(), 4u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& span : spans) by_name[span["name"]] = span;
  const auto& request = by_name.at("request");
  EXPECT_EQ(
      request["traceId"],
      opsight::trace::root_trace_id(trace.slices.span_id[row_named(trace, "request")]).to_hex());
  EXPECT_EQ(request["kind"], "SERVER");
  EXPECT_EQ(request["timestamp"], (kUnixOffset + 1000) / 1000);
  EXPECT_EQ(request["duration"], 9);
  EXPECT_EQ(request["localEndpoint"]["serviceName"], "inference");
  EXPECT_EQ(request["tags"]["batch"], "8");
  EXPECT_EQ(request["tags"]["cached"], "true");
  EXPECT_FALSE(request.contains("parentId"));
  const auto& job = by_name.at("job");  // 1500..2000 ns: under a microsecond, written as 1
  EXPECT_EQ(job["duration"], 1);
  EXPECT_EQ(job["tags"]["error"], "ValueError: bad \"input\"\n");
  EXPECT_EQ(job["tags"]["opsight.linked_from"], request["id"]);
  EXPECT_FALSE(job.contains("kind"));
  EXPECT_EQ(by_name.at("preprocess \"fast\"")["parentId"], request["id"]);
}

// The Loki push body as {labels -> [[timestamp, line as JSON], ...]}.
std::map<std::string, std::vector<std::pair<std::string, nlohmann::json>>> loki_streams_of(
    const std::string& body) {
  std::map<std::string, std::vector<std::pair<std::string, nlohmann::json>>> out;
  auto document = nlohmann::json::parse(body);
  for (const auto& stream : document.at("streams")) {
    std::string labels = stream.at("stream").at("service_name").get<std::string>() + "|" +
                         stream.at("stream").at("span_name").get<std::string>() + "|" +
                         stream.at("stream").at("status").get<std::string>();
    EXPECT_EQ(stream.at("stream").size(), 3u);  // no other labels
    EXPECT_EQ(out.count(labels), 0u) << "one entry per stream: " << labels;
    for (const auto& value : stream.at("values"))
      out[labels].emplace_back(value.at(0).get<std::string>(),
                               nlohmann::json::parse(value.at(1).get<std::string>()));
  }
  return out;
}

TEST(LokiJson, OneLinePerSpanInStreamsLabelledByServiceSpanNameAndStatus) {
  Trace trace = sample_trace();
  ResourceOptions resource;
  resource.service_name = "inference";
  SpanView view(trace, resource);
  opsight::exporting::LokiStreams streams(view);
  EXPECT_EQ(streams.stream_count(), 4u);
  auto by_stream =
      loki_streams_of(opsight::exporting::encode_loki_json(view, streams, view.rows()));
  ASSERT_EQ(by_stream.size(), 4u);
  std::string request_id =
      opsight::trace::span_id_to_hex(trace.slices.span_id[row_named(trace, "request")]);

  const auto& request = by_stream.at("inference|request|ok");
  ASSERT_EQ(request.size(), 1u);
  EXPECT_EQ(request[0].first, std::to_string(kUnixOffset + 1000));  // the start, in ns
  const nlohmann::json& line = request[0].second;
  EXPECT_EQ(
      line["trace_id"],
      opsight::trace::root_trace_id(trace.slices.span_id[row_named(trace, "request")]).to_hex());
  EXPECT_EQ(line["span_id"], request_id);
  EXPECT_FALSE(line.contains("parent_span_id"));  // a root
  EXPECT_EQ(line["name"], "request");
  EXPECT_EQ(line["kind"], "server");
  EXPECT_EQ(line["pid"], 42);
  EXPECT_EQ(line["duration_ns"], 9000);
  EXPECT_EQ(line["attributes"]["batch"], 8);  // typed: numbers stay numbers
  EXPECT_EQ(line["attributes"]["ratio"], 0.25);
  EXPECT_EQ(line["attributes"]["cached"], true);
  EXPECT_EQ(line["attributes"]["thread.name"], "main");
  EXPECT_EQ(line["attributes"]["opsight.category"], "http");
  EXPECT_FALSE(line["attributes"].contains("span.kind"));  // it became the kind
  EXPECT_FALSE(line.contains("error"));

  const nlohmann::json& preprocess = by_stream.at("inference|preprocess \"fast\"|ok").at(0).second;
  EXPECT_EQ(preprocess["parent_span_id"], request_id);
  EXPECT_FALSE(preprocess.contains("kind"));  // internal

  const auto& job = by_stream.at("inference|job|error");
  ASSERT_EQ(job.size(), 1u);
  EXPECT_EQ(job[0].second["error"], "ValueError: bad \"input\"\n");
  EXPECT_EQ(job[0].second["links"], nlohmann::json::array({request_id}));
  EXPECT_EQ(job[0].second["attributes"]["thread.id"], 43);
  EXPECT_FALSE(job[0].second["attributes"].contains("exception.type"));  // in "error"

  const nlohmann::json& child = by_stream.at("inference|child work|ok").at(0).second;
  EXPECT_EQ(child["pid"], 77);
  EXPECT_EQ(child["attributes"]["opsight.unfinished"], true);
}

TEST(LokiJson, SpanNamesPastTheCapShareOneLabelValueInEveryBatch) {
  Trace trace;
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = kUnixOffset;
  auto track = trace.thread_track(1, 1);
  // a x3, b x2, c and d once each, interleaved in time.
  int64_t ts = 0;
  for (std::string_view name : {"a", "c", "b", "a", "d", "b", "a"}) {
    auto row = trace.slices.add(ts, 10, trace.intern(name), 0, track);
    if (name == "d")
      trace.slice_args.add(row, trace.intern("ratio"),
                           ArgValue::of_double(std::numeric_limits<double>::quiet_NaN()));
    ts += 100;
  }
  trace.finalize();
  SpanView view(trace, {});
  opsight::exporting::LokiStreams streams(view, /*max_span_names=*/2);
  EXPECT_EQ(streams.stream_count(), 3u);  // a, b, (other)

  // Two batches: the first holds c, the second d; both go to the one "(other)" stream.
  auto rows = view.rows();
  std::vector<std::string> other_names;
  std::vector<std::string> other_times;
  for (auto batch : {rows.subspan(0, 3), rows.subspan(3)}) {
    auto by_stream = loki_streams_of(opsight::exporting::encode_loki_json(view, streams, batch));
    for (const auto& [labels, values] : by_stream) {
      EXPECT_TRUE(labels == "opsight|a|ok" || labels == "opsight|b|ok" ||
                  labels == "opsight|(other)|ok")
          << labels;
      for (size_t i = 1; i < values.size(); ++i)  // in time order within a stream
        EXPECT_LT(std::stoll(values[i - 1].first), std::stoll(values[i].first));
      if (labels != "opsight|(other)|ok") continue;
      for (const auto& [time, line] : values) {
        other_names.push_back(line["name"]);
        other_times.push_back(time);
        if (line["name"] == "d") {
          EXPECT_EQ(line["attributes"]["ratio"], "nan");  // not a JSON number
        }
      }
    }
  }
  EXPECT_EQ(other_names, (std::vector<std::string>{"c", "d"}));  // the real names in the lines
  EXPECT_EQ(other_times, (std::vector<std::string>{std::to_string(kUnixOffset + 100),
                                                   std::to_string(kUnixOffset + 400)}));
  EXPECT_EQ(opsight::exporting::encode_loki_json(view, streams, {}), R"({"streams":[]})");
}

// export_trace to a Loki push endpoint served in this process: JSON posted to the path
// the URL names, every span in one line.
TEST(LokiJson, ExportTracePostsThePushBodyToTheUrlsPath) {
  httplib::Server server;
  std::mutex mutex;
  std::vector<std::string> bodies, paths, types;
  server.Post(R"(/.*)", [&](const httplib::Request& request, httplib::Response& response) {
    std::lock_guard lock(mutex);
    bodies.push_back(request.body);
    paths.push_back(request.path);
    types.push_back(request.get_header_value("Content-Type"));
    response.status = 204;
  });
  server.set_keep_alive_timeout(1);
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::string error;
  auto none = [](const char*) -> const char* { return nullptr; };
  auto target = opsight::exporting::parse_export_target(
      "loki=http://127.0.0.1:" + std::to_string(port) + "/insert/loki/api/v1/push", none, &error);
  ASSERT_TRUE(target) << error;
  Trace trace = sample_trace();
  opsight::exporting::TraceExportOptions options;
  options.batch_spans = 3;
  auto reports = opsight::exporting::export_trace(trace, {*target}, options);
  server.stop();
  serving.join();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].description,
            "loki http://127.0.0.1:" + std::to_string(port) + "/insert/loki/api/v1/push");
  EXPECT_EQ(reports[0].stats.spans_sent, 4u) << reports[0].stats.last_error;
  ASSERT_EQ(bodies.size(), 2u);  // 3 + 1
  size_t lines = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(paths[i], "/insert/loki/api/v1/push");
    EXPECT_EQ(types[i], "application/json");
    for (const auto& [labels, values] : loki_streams_of(bodies[i])) lines += values.size();
  }
  EXPECT_EQ(lines, 4u);
}

TEST(PrometheusText, CumulativeHistogramsPerSpanNameCountersAndGauges) {
  Trace trace = sample_trace();
  std::string text = opsight::exporting::prometheus_exposition(trace);
  EXPECT_NE(text.find("# TYPE opsight_span_duration_seconds histogram\n"), std::string::npos);
  // request: 9 µs; le=1e-05 holds it and every later bucket too.
  EXPECT_NE(text.find("opsight_span_duration_seconds_bucket{span=\"request\",le=\"1e-05\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("opsight_span_duration_seconds_bucket{span=\"request\",le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("opsight_span_duration_seconds_count{span=\"preprocess \\\"fast\\\"\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("opsight_span_duration_seconds_sum{span=\"request\"} 9e-06\n"),
            std::string::npos);
  EXPECT_NE(text.find("opsight_tracer_overhead_seconds_total 0.0025\n"), std::string::npos);
  EXPECT_NE(text.find("opsight_events_dropped_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE opsight_process_rss_bytes "
                      "gauge\nopsight_process_rss_bytes{pid=\"42\"} 2500000\n"),
            std::string::npos);
  EXPECT_EQ(opsight::exporting::prometheus_name("gpu0.power-watts"), "gpu0_power_watts");
  EXPECT_EQ(opsight::exporting::prometheus_name("0bad"), "_0bad");
}

// gen_ai.request spans (opsight.llm's) become OpenTelemetry's GenAI histograms, named as
// OpenTelemetry's Prometheus rules say, with the conventions' buckets: a client's span
// (span.kind client) gives the gen_ai_client_* ones, any other the gen_ai_server_* ones; a
// failed request counts only in the duration, with its error_type.
TEST(PrometheusText, GenAiRequestSpansGiveTheConventionsHistograms) {
  Trace trace;
  auto track = trace.thread_track(42, 42);
  auto name = trace.intern("gen_ai.request");
  auto add_request = [&](int64_t start, int64_t duration, bool client, const char* error,
                         double ttft, double tpot) {
    auto row = trace.slices.add(start, duration, name, trace.intern("gen_ai"), track);
    auto text = [&](const char* key, const char* value) {
      trace.slice_args.add(row, trace.intern(key), ArgValue::of_string(trace.intern(value)));
    };
    text("gen_ai.operation.name", "chat");
    text("gen_ai.request.model", "gpt2 \"tiny\"");
    trace.slice_args.add(row, trace.intern("gen_ai.usage.input_tokens"), ArgValue::of_int(20));
    trace.slice_args.add(row, trace.intern("gen_ai.usage.output_tokens"), ArgValue::of_int(5));
    trace.slice_args.add(row,
                         trace.intern(client ? "gen_ai.client.operation.time_to_first_chunk"
                                             : "gen_ai.server.time_to_first_token"),
                         ArgValue::of_double(ttft));
    trace.slice_args.add(row, trace.intern("gen_ai.server.time_per_output_token"),
                         ArgValue::of_double(tpot));
    if (client) text("span.kind", "client");
    if (error != nullptr) text("error.type", error);
  };
  add_request(0, 300'000'000, false, nullptr, 0.03, 0.07);  // 0.3 s
  add_request(1'000'000'000, 50'000'000, false, nullptr, 0.003, 0.009);
  add_request(2'000'000'000, 10'000'000, false, "timeout", 0.5, 0.5);
  add_request(3'000'000'000, 90'000'000, true, nullptr, 0.02, 0.01);
  // Chunks after the first: the client's give gen_ai.client.operation.time_per_output_chunk;
  // a server's do not (its TPOT is the per-request figure).
  auto chunk = trace.intern("gen_ai.inter_token");
  trace.slices.add(3'020'000'000, 30'000'000, chunk, 0, track);
  trace.slices.add(3'050'000'000, 40'000'000, chunk, 0, track);
  trace.slices.add(1'020'000'000, 30'000'000, chunk, 0, track);
  trace.finalize();
  std::string text = opsight::exporting::prometheus_exposition(trace);
  auto has = [&](std::string_view line) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  };
  const std::string labels =
      "gen_ai_operation_name=\"chat\",gen_ai_request_model=\"gpt2 \\\"tiny\\\"\"";
  has("# TYPE gen_ai_server_request_duration_seconds histogram\n");
  has("gen_ai_server_request_duration_seconds_bucket{" + labels + ",le=\"0.32\"} 2\n");
  has("gen_ai_server_request_duration_seconds_bucket{" + labels + ",le=\"0.16\"} 1\n");
  has("gen_ai_server_request_duration_seconds_count{" + labels + "} 2\n");
  has("gen_ai_server_request_duration_seconds_count{error_type=\"timeout\"," + labels + "} 1\n");
  has("# TYPE gen_ai_server_time_to_first_token_seconds histogram\n");
  has("gen_ai_server_time_to_first_token_seconds_bucket{" + labels + ",le=\"0.005\"} 1\n");
  has("gen_ai_server_time_to_first_token_seconds_bucket{" + labels + ",le=\"0.04\"} 2\n");
  has("gen_ai_server_time_to_first_token_seconds_bucket{" + labels + ",le=\"+Inf\"} 2\n");
  has("gen_ai_server_time_to_first_token_seconds_sum{" + labels + "} 0.033\n");
  has("gen_ai_server_time_per_output_token_seconds_bucket{" + labels + ",le=\"0.01\"} 1\n");
  has("gen_ai_server_time_per_output_token_seconds_count{" + labels + "} 2\n");
  // Tokens of the three successful requests, both sides; the unit {token} adds no suffix.
  has("# TYPE gen_ai_client_token_usage histogram\n");
  has("gen_ai_client_token_usage_bucket{" + labels + ",gen_ai_token_type=\"input\",le=\"16\"} 0\n");
  has("gen_ai_client_token_usage_bucket{" + labels + ",gen_ai_token_type=\"input\",le=\"64\"} 3\n");
  has("gen_ai_client_token_usage_sum{" + labels + ",gen_ai_token_type=\"output\"} 15\n");
  has("gen_ai_client_operation_duration_seconds_count{" + labels + "} 1\n");
  has("gen_ai_client_operation_time_to_first_chunk_seconds_bucket{" + labels + ",le=\"0.02\"} 1\n");
  // Each family's header comes once, before its series.
  size_t headers = 0;
  for (size_t at = text.find("# TYPE gen_ai_"); at != std::string::npos;
       at = text.find("# TYPE gen_ai_", at + 1))
    ++headers;
  EXPECT_EQ(headers, 7u);  // no client time per output token: the conventions have none
  EXPECT_EQ(text.find("gen_ai_client_time_per_output_token"), std::string::npos);
}

opsight::exporting::Environment environment_of(std::map<std::string, std::string> variables) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(variables));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(ExportTargets, KindsUrlsAndTheOtelEnvironment) {
  std::string error;
  auto none = environment_of({});
  auto otlp = opsight::exporting::parse_export_target("otlp=http://127.0.0.1:4318", none, &error);
  ASSERT_TRUE(otlp) << error;
  EXPECT_EQ(otlp->label(), "otlp");
  EXPECT_EQ(otlp->endpoint.url(), "http://127.0.0.1:4318/v1/traces");
  auto defaulted = opsight::exporting::parse_export_target("otlp", none, &error);
  EXPECT_EQ(defaulted->endpoint.url(), "http://localhost:4318/v1/traces");

  auto env = environment_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                             {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret%20one, x-team=ml"},
                             {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=infra"}});
  auto from_env = opsight::exporting::parse_export_target("otlp", env, &error);
  ASSERT_TRUE(from_env) << error;
  EXPECT_EQ(from_env->label(), "otlp-json");
  EXPECT_EQ(from_env->endpoint.url(), "http://collector:4318/v1/traces");
  EXPECT_EQ(from_env->headers, (std::vector<std::pair<std::string, std::string>>{
                                   {"api-key", "secret one"}, {"x-team", "infra"}}));
  auto traces_endpoint =
      environment_of({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otel.example:443/custom"}});
  auto custom = opsight::exporting::parse_export_target("otlp", traces_endpoint, &error);
  EXPECT_EQ(custom->endpoint.url(), "https://otel.example/custom");

  auto zipkin = opsight::exporting::parse_export_target("zipkin=http://[::1]:9411", none, &error);
  ASSERT_TRUE(zipkin) << error;
  EXPECT_EQ(zipkin->endpoint.host, "::1");
  EXPECT_EQ(zipkin->endpoint.path, "/api/v2/spans");

  EXPECT_FALSE(opsight::exporting::parse_export_target("jaeger=http://x", none, &error));
  EXPECT_NE(error.find("unknown kind 'jaeger'"), std::string::npos) << error;
  EXPECT_NE(error.find("kafka, loki or loki-logs"), std::string::npos) << error;
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp=ftp://x", none, &error));
  EXPECT_NE(error.find("scheme 'ftp'"), std::string::npos) << error;
  EXPECT_FALSE(opsight::exporting::parse_export_target("zipkin=http://host:99999", none, &error));
  EXPECT_NE(error.find("port '99999'"), std::string::npos) << error;
  EXPECT_FALSE(opsight::exporting::parse_export_target("pushgateway", none, &error));
  EXPECT_NE(error.find("needs its URL"), std::string::npos) << error;
  auto thrift = environment_of({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift"}});
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp", thrift, &error));
  EXPECT_NE(error.find("'http/thrift' is not supported"), std::string::npos) << error;
}

// OTEL_EXPORTER_OTLP_COMPRESSION and _TIMEOUT, the signal-specific variable winning over
// the general one (the specification's rule), and values opsight cannot honour refused.
TEST(ExportTargets, OtlpCompressionAndTimeoutWithSignalSpecificOverrides) {
  std::string error;
  auto general = environment_of(
      {{"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"}, {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}});
  auto target = opsight::exporting::parse_export_target("otlp", general, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_TRUE(target->gzip);
  EXPECT_DOUBLE_EQ(target->timeout_s, 2.5);
  auto overridden = environment_of({{"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                                    {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"},
                                    {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
                                    {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "300"}});
  target = opsight::exporting::parse_export_target("otlp-json=http://x:4318", overridden, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_FALSE(target->gzip);
  EXPECT_DOUBLE_EQ(target->timeout_s, 0.3);
  auto none = environment_of({});
  target = opsight::exporting::parse_export_target("otlp", none, &error);
  EXPECT_FALSE(target->gzip);
  EXPECT_EQ(target->timeout_s, 0.0);
  auto brotli = environment_of({{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "br"}});
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp", brotli, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION 'br' is not gzip or none"),
            std::string::npos)
      << error;
  auto soon = environment_of({{"OTEL_EXPORTER_OTLP_TIMEOUT", "soon"}});
  EXPECT_FALSE(opsight::exporting::parse_export_target("otlp", soon, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_TIMEOUT 'soon'"), std::string::npos) << error;
  // Zipkin is not OTLP: the OTLP variables leave it alone.
  target = opsight::exporting::parse_export_target("zipkin", general, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_FALSE(target->gzip);
}

// OTEL_BSP_*: the batch span processor's settings, onto the export's options.
TEST(ExportTargets, BatchSpanProcessorVariables) {
  opsight::exporting::TraceExportOptions options;
  auto env = environment_of({{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100"},
                             {"OTEL_BSP_MAX_QUEUE_SIZE", "1000"},
                             {"OTEL_BSP_SCHEDULE_DELAY", "250"},
                             {"OTEL_BSP_EXPORT_TIMEOUT", "1500"}});
  EXPECT_EQ(opsight::exporting::apply_batch_environment(env, false, &options), "");
  EXPECT_EQ(options.batch_spans, 100u);
  EXPECT_EQ(options.exporter.max_queued_batches, 10u);
  EXPECT_DOUBLE_EQ(options.schedule_delay_s, 0.25);
  EXPECT_DOUBLE_EQ(options.exporter.max_elapsed_s, 1.5);

  opsight::exporting::TraceExportOptions given;  // --batch-size given: it wins
  given.batch_spans = 64;
  EXPECT_EQ(opsight::exporting::apply_batch_environment(env, true, &given), "");
  EXPECT_EQ(given.batch_spans, 64u);
  EXPECT_EQ(given.exporter.max_queued_batches, 16u);  // ceil(1000 / 64)

  opsight::exporting::TraceExportOptions small_queue;  // a batch never exceeds the queue
  auto queue = environment_of({{"OTEL_BSP_MAX_QUEUE_SIZE", "100"}});
  EXPECT_EQ(opsight::exporting::apply_batch_environment(queue, false, &small_queue), "");
  EXPECT_EQ(small_queue.batch_spans, 100u);
  EXPECT_EQ(small_queue.exporter.max_queued_batches, 1u);

  opsight::exporting::TraceExportOptions untouched;
  EXPECT_EQ(opsight::exporting::apply_batch_environment(environment_of({}), false, &untouched), "");
  EXPECT_EQ(untouched.batch_spans, 512u);
  EXPECT_EQ(untouched.exporter.max_queued_batches, 256u);
  EXPECT_DOUBLE_EQ(untouched.schedule_delay_s, 1.0);

  auto bad = environment_of({{"OTEL_BSP_SCHEDULE_DELAY", "5s"}});
  EXPECT_NE(opsight::exporting::apply_batch_environment(bad, false, &untouched)
                .find("OTEL_BSP_SCHEDULE_DELAY '5s' is not a positive whole number"),
            std::string::npos);
}

TEST(ExportTargets, OtelSdkDisabledIsTrueCaseInsensitively) {
  EXPECT_TRUE(opsight::exporting::sdk_disabled(environment_of({{"OTEL_SDK_DISABLED", "true"}})));
  EXPECT_TRUE(opsight::exporting::sdk_disabled(environment_of({{"OTEL_SDK_DISABLED", "TRUE"}})));
  EXPECT_FALSE(opsight::exporting::sdk_disabled(environment_of({{"OTEL_SDK_DISABLED", "false"}})));
  EXPECT_FALSE(opsight::exporting::sdk_disabled(environment_of({{"OTEL_SDK_DISABLED", "1"}})));
  EXPECT_FALSE(opsight::exporting::sdk_disabled(environment_of({})));
}

// A request without a caller began a trace of its own (a span context with no parent
// span): its spans are in that trace, it is a root with no remote parent.
TEST(SpanView, ARequestThatBeganItsOwnTraceIsItsRoot) {
  Trace trace = sample_trace();
  RowIndex request = row_named(trace, "request");
  RowIndex preprocess = row_named(trace, "preprocess \"fast\"");
  const opsight::trace::TraceId own{0x1111222233334444ULL, 0x5555666677778888ULL};
  trace.span_contexts.add(request, own, 0, 1);
  SpanView view(trace, {});
  EXPECT_EQ(view.trace_id(request), own);
  EXPECT_EQ(view.trace_id(preprocess), own);
  EXPECT_EQ(view.parent_span_id(request), 0u);
  EXPECT_FALSE(view.has_remote_parent(request));
  EXPECT_EQ(view.parent_span_id(preprocess), trace.slices.span_id[request]);
}

// Basic authentication from a URL's user info (never shown), Loki's tenant header and
// OPSIGHT_LOKI_BASIC_AUTH (credentials off the command line).
TEST(ExportTargets, UserInfoTenantAndBasicAuthentication) {
  std::string error;
  auto none = environment_of({});
  auto target =
      opsight::exporting::parse_export_target("loki=https://ml:s%40cret@logs:3100", none, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.user_info, "ml:s@cret");
  EXPECT_EQ(target->endpoint.host, "logs");
  EXPECT_EQ(target->endpoint.url(), "https://logs:3100/loki/api/v1/push");  // no password
  auto env =
      environment_of({{"OPSIGHT_LOKI_TENANT", "team-a"}, {"OPSIGHT_LOKI_BASIC_AUTH", "ml:token"}});
  target = opsight::exporting::parse_export_target("loki=http://logs:3100", env, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->headers,
            (std::vector<std::pair<std::string, std::string>>{{"X-Scope-OrgID", "team-a"}}));
  EXPECT_EQ(target->endpoint.user_info, "ml:token");
  target = opsight::exporting::parse_export_target("otlp=http://collector:4318", env, &error);
  EXPECT_TRUE(target->headers.empty());  // Loki's settings stay Loki's
  EXPECT_TRUE(target->endpoint.user_info.empty());
  EXPECT_FALSE(
      opsight::exporting::parse_export_target("loki=http://ml:hunter2@logs:99999", none, &error));
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;  // the password is not shown
  EXPECT_NE(error.find("'http://***@logs:99999'"), std::string::npos) << error;
  auto bad = environment_of({{"OPSIGHT_LOKI_BASIC_AUTH", "token-only"}});
  EXPECT_FALSE(opsight::exporting::parse_export_target("loki", bad, &error));
  EXPECT_NE(error.find("OPSIGHT_LOKI_BASIC_AUTH is not user:password"), std::string::npos);
}

TEST(ExportTargets, LokiUrlsAndTheirDefaultPath) {
  std::string error;
  auto none = environment_of({});
  auto defaulted = opsight::exporting::parse_export_target("loki", none, &error);
  ASSERT_TRUE(defaulted) << error;
  EXPECT_EQ(defaulted->label(), "loki");
  EXPECT_EQ(defaulted->label(), "loki");
  EXPECT_EQ(defaulted->endpoint.url(), "http://localhost:3100/loki/api/v1/push");
  auto bare = opsight::exporting::parse_export_target("loki=http://logs:3100", none, &error);
  EXPECT_EQ(bare->endpoint.url(), "http://logs:3100/loki/api/v1/push");
  auto victoria = opsight::exporting::parse_export_target(
      "loki=http://127.0.0.1:9428/insert/loki/api/v1/push", none, &error);
  EXPECT_EQ(victoria->endpoint.path, "/insert/loki/api/v1/push");
  EXPECT_FALSE(opsight::exporting::parse_export_target("loki=logs:3100", none, &error));
  EXPECT_NE(error.find("not a URL"), std::string::npos) << error;
}

#if OPSIGHT_WITH_KAFKA
TEST(ExportTargets, KafkaBrokersTopicAndLibrdkafkaProperties) {
  std::string error;
  auto none = environment_of({});
  auto defaulted = opsight::exporting::parse_export_target("kafka", none, &error);
  ASSERT_TRUE(defaulted) << error;
  EXPECT_EQ(defaulted->label(), "kafka");
  EXPECT_EQ(defaulted->label(), "kafka");
  EXPECT_EQ(defaulted->kafka.brokers, "localhost:9092");
  EXPECT_EQ(defaulted->kafka.topic, "otlp_spans");
  EXPECT_TRUE(defaulted->kafka.properties.empty());

  auto full = opsight::exporting::parse_export_target(
      "kafka=k1:9092,k2:9093?topic=opsight-spans&security.protocol=SASL_SSL"
      "&sasl.mechanisms=PLAIN&sasl.username=ml&sasl.password=p%26ss%2Cword&debug=broker,msg",
      none, &error);
  ASSERT_TRUE(full) << error;
  EXPECT_EQ(full->kafka.brokers, "k1:9092,k2:9093");
  EXPECT_EQ(full->kafka.topic, "opsight-spans");
  EXPECT_EQ(full->kafka.properties,
            (std::vector<std::pair<std::string, std::string>>{{"security.protocol", "SASL_SSL"},
                                                              {"sasl.mechanisms", "PLAIN"},
                                                              {"sasl.username", "ml"},
                                                              {"sasl.password", "p&ss,word"},
                                                              {"debug", "broker,msg"}}));
  auto default_broker = opsight::exporting::parse_export_target("kafka?topic=spans", none, &error);
  ASSERT_TRUE(default_broker) << error;
  EXPECT_EQ(default_broker->kafka.brokers, "localhost:9092");
  EXPECT_EQ(default_broker->kafka.topic, "spans");

  // Secrets from the environment; the spec's properties come after them, and win.
  auto env = environment_of(
      {{"OPSIGHT_KAFKA_PROPERTIES", "sasl.password=from%20env,sasl.username=env-user"}});
  auto with_env =
      opsight::exporting::parse_export_target("kafka=k:9092?sasl.username=spec-user", env, &error);
  ASSERT_TRUE(with_env) << error;
  EXPECT_EQ(with_env->kafka.properties,
            (std::vector<std::pair<std::string, std::string>>{{"sasl.password", "from env"},
                                                              {"sasl.username", "env-user"},
                                                              {"sasl.username", "spec-user"}}));

  auto fails = [&](const std::string& spec, const std::string& expected) {
    EXPECT_FALSE(opsight::exporting::parse_export_target(spec, none, &error)) << spec;
    EXPECT_NE(error.find(expected), std::string::npos) << spec << ": " << error;
  };
  fails("kafka=k:9092?securty.protocol=SSL", "'securty.protocol'");
  fails("kafka=k:9092?acks=several", "'acks'");
  fails("kafka=k:9092?topic=no spaces", "is not a Kafka topic name");
  fails("kafka=k:9092?topic=", "is not a Kafka topic name");
  fails("kafka=k:9092?bootstrap.servers=x:1", "the brokers go before the '?'");
  fails("kafka=k1:9092,,k2:9092", "an empty broker");
  fails("kafka=http://k:9092/path", "is not a broker address");
  fails("kafka=http://k:9092", "Kafka is not HTTP");
  EXPECT_TRUE(
      opsight::exporting::parse_export_target("kafka=SSL://k:9093,[::1]:9092", none, &error))
      << error;
  fails("kafka=k:9092?message.timeout.ms=0", "opsight bounds every send");
  fails("kafka=k:9092?novalue", "'novalue' is not property=value");
}
#else
TEST(ExportTargets, KafkaSaysHowToGetItWhenNotBuiltIn) {
  std::string error;
  EXPECT_FALSE(opsight::exporting::parse_export_target("kafka=k:9092", environment_of({}), &error));
  EXPECT_NE(error.find("built without Kafka support"), std::string::npos) << error;
  EXPECT_NE(error.find("librdkafka-dev"), std::string::npos) << error;
}
#endif

TEST(ExportTargets, ServiceNameFromFlagThenOtelServiceNameThenResourceAttributes) {
  auto env =
      environment_of({{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,team=ml,broken"}});
  std::vector<std::string> warnings;
  auto options = opsight::exporting::resource_options_from(env, "", &warnings);
  EXPECT_EQ(options.service_name, "from-attrs");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'broken'"), std::string::npos);
  auto with_name = environment_of(
      {{"OTEL_SERVICE_NAME", "svc"}, {"OTEL_RESOURCE_ATTRIBUTES", "service.name=x"}});
  EXPECT_EQ(opsight::exporting::resource_options_from(with_name, "", nullptr).service_name, "svc");
  EXPECT_EQ(opsight::exporting::resource_options_from(with_name, "flag", nullptr).service_name,
            "flag");
}

// A collector's ExportTraceServiceResponse: partial_success (1) { rejected_spans (1),
// error_message (2) }; anything else reads as a full success.
TEST(OtlpProtobuf, APartialSuccessAnswerIsDecoded) {
  std::string partial = std::string("\x08\x05\x12\x07too old", 11);
  std::string response = "\x0a" + std::string(1, static_cast<char>(partial.size())) + partial;
  auto decoded = opsight::exporting::decode_partial_success(response);
  EXPECT_EQ(decoded.rejected_spans, 5u);
  EXPECT_EQ(decoded.error_message, "too old");
  EXPECT_EQ(opsight::exporting::decode_partial_success("").rejected_spans, 0u);
  EXPECT_EQ(opsight::exporting::decode_partial_success(std::string("\x0a\x00", 2)).rejected_spans,
            0u);  // an empty partial_success: all taken
  EXPECT_EQ(opsight::exporting::decode_partial_success("{\"partialSuccess\":{}}").rejected_spans,
            0u);  // not protobuf
  EXPECT_EQ(
      opsight::exporting::decode_partial_success(std::string("\x0a\x09\x08", 3)).rejected_spans,
      0u);  // cut short
}

// With no name given, the service is the program's: the script `opsight run` starts
// through its capture module, not that module.
TEST(SpanView, TheDefaultServiceNameIsTheScriptOpsightRunStarts) {
  auto service_of = [](const char* command_line) {
    Trace trace = sample_trace();
    trace.run.command_line = command_line;
    SpanView view(trace, {});
    return view.resources()[0].service_name;
  };
  EXPECT_EQ(service_of("/usr/bin/python3 -m opsight._capture.script /tmp/x/prog.py --n 3"),
            "prog.py");
  EXPECT_EQ(service_of("python3 -m opsight._capture.script -m serve.app --port 80"), "serve.app");
  EXPECT_EQ(service_of("python3 -u serve.py"), "serve.py");
  EXPECT_EQ(service_of("python3 -m uvicorn app:app"), "uvicorn");
  EXPECT_EQ(service_of("/opt/bin/inference --threads 4"), "inference");
}

TEST(ExportTargets, GenAiConventionsOnlyWithTheirOptIn) {
  auto options = [](const char* opt_in) {
    return opsight::exporting::resource_options_from(
        environment_of({{"OTEL_SEMCONV_STABILITY_OPT_IN", opt_in}}), "", nullptr);
  };
  EXPECT_FALSE(opsight::exporting::resource_options_from(environment_of({}), "", nullptr)
                   .gen_ai_conventions);
  EXPECT_TRUE(options("gen_ai_latest_experimental").gen_ai_conventions);
  EXPECT_TRUE(options("http, gen_ai_latest_experimental ,database").gen_ai_conventions);
  EXPECT_FALSE(options("http,gen_ai").gen_ai_conventions);
  EXPECT_FALSE(options("gen_ai_latest_experimentalx").gen_ai_conventions);
}

// A model's outermost module call and an ONNX Runtime run are model inferences: with the
// opt-in they carry gen_ai.*, the span's own values first; inner modules and other spans
// never do.
TEST(SpanView, GenAiAttributesGoOnModelInferenceSpansWithTheOptIn) {
  Trace trace;
  trace.run.pid = 42;
  auto track = trace.thread_track(42, 42);
  StringId module = trace.intern("module");
  auto outer = trace.slices.add(1000, 9000, trace.intern("BertModel"), module, track);
  trace.slices.add(2000, 5000, trace.intern("encoder"), module, track);
  auto run = trace.slices.add(20000, 3000, trace.intern("onnxruntime.run resnet.onnx"),
                              trace.intern("session"), track);
  auto step = trace.slices.add(30000, 9000, trace.intern("step"), trace.intern("python"), track);
  trace.slices.add(31000, 5000, trace.intern("Classifier"), module, track);  // a model in a step
  trace.slice_args.add(run, trace.intern("gen_ai.request.model"),
                       ArgValue::of_string(trace.intern("resnet50-v2")));
  static_cast<void>(outer);
  static_cast<void>(step);
  trace.finalize();
  auto attributes_of = [&](const SpanView& view, const char* name) {
    std::vector<opsight::exporting::Attribute> attributes;
    view.attributes(row_named(trace, name), attributes);
    std::map<std::string, std::string> found;
    for (const auto& attribute : attributes)
      if (attribute.key.starts_with("gen_ai."))
        found[std::string(attribute.key)] = attribute.value.to_string();
    return found;
  };
  SpanView plain(trace, {});
  EXPECT_TRUE(attributes_of(plain, "BertModel").empty());
  EXPECT_TRUE(attributes_of(plain, "onnxruntime.run resnet.onnx").size() == 1u);  // its own

  ResourceOptions opt_in;
  opt_in.gen_ai_conventions = true;
  SpanView view(trace, opt_in);
  using Attributes = std::map<std::string, std::string>;
  EXPECT_EQ(attributes_of(view, "BertModel"), (Attributes{{"gen_ai.operation.name", "inference"},
                                                          {"gen_ai.provider.name", "pytorch"},
                                                          {"gen_ai.request.model", "BertModel"}}));
  EXPECT_EQ(attributes_of(view, "Classifier"),
            (Attributes{{"gen_ai.operation.name", "inference"},
                        {"gen_ai.provider.name", "pytorch"},
                        {"gen_ai.request.model", "Classifier"}}));
  EXPECT_EQ(attributes_of(view, "onnxruntime.run resnet.onnx"),
            (Attributes{{"gen_ai.operation.name", "inference"},
                        {"gen_ai.provider.name", "onnxruntime"},
                        {"gen_ai.request.model", "resnet50-v2"}}));
  EXPECT_TRUE(attributes_of(view, "encoder").empty());  // inside a module span
  EXPECT_TRUE(attributes_of(view, "step").empty());

  // The live exporter's batches have no parent rows: their identities say which is a root.
  std::vector<opsight::exporting::SpanIdentity> identities(trace.slices.size());
  identities[row_named(trace, "encoder")].model_root = true;
  SpanView live(trace, opt_in, identities);
  EXPECT_EQ(attributes_of(live, "encoder").size(), 3u);
  EXPECT_TRUE(attributes_of(live, "BertModel").empty());
}

}  // namespace
