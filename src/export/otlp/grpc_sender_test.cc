// OTLP over gRPC: the otlp-grpc target's settings from the OpenTelemetry environment (the
// endpoint without a path, INSECURE for a scheme-less endpoint, headers as lowercase
// metadata, gzip, the timeout, TLS files), the status codes sorted as the OTLP
// specification sorts them (RESOURCE_EXHAUSTED retried only with a RetryInfo, whose delay
// is read from the status details), and, where gRPC is built in, the sender against an
// in-process gRPC server that answers the Export method from a script: the request is the
// encoder's bytes, the metadata and User-Agent arrive, a partial success is counted, an
// UNAVAILABLE is retried through BatchExporter; otlp-metrics-grpc and otlp-logs-grpc (and the
// METRICS_/LOGS_ PROTOCOL variables that select them) call their services' Export with the
// bytes the HTTP sinks send. The proof against a real collector is
// tests/integration/test_export_servers.py (Jaeger's OTLP gRPC receiver) and, for metrics and
// logs, tests/integration/test_export_grpc_metrics_logs.py.
#include "export/otlp/grpc_sender.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "export/batch_exporter.hpp"
#include "export/export.hpp"
#include "export/log_view.hpp"
#include "export/otlp/otlp_fields.hpp"
#include "schema/log_names.hpp"
#include "wire/proto_encoder.hpp"

#if OPSIGHT_WITH_GRPC
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <deque>
#include <mutex>
#endif

namespace {

using opsight::exporting::ExportTarget;
using opsight::exporting::SendResult;

opsight::exporting::Environment variables(std::map<std::string, std::string> values) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(values));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::optional<ExportTarget> parse(std::string_view spec,
                                  std::map<std::string, std::string> environment,
                                  std::string* error) {
  return opsight::exporting::parse_export_target(spec, variables(std::move(environment)), error);
}

// A google.rpc.Status holding one Any: a RetryInfo of `seconds` and `nanos`, after an Any
// of another type (ErrorInfo), as a server may send both.
std::string status_with_retry_info(int64_t seconds, int32_t nanos) {
  std::string duration, retry_info, status;
  opsight::wire::ProtoEncoder(duration).int_field(1, seconds);
  opsight::wire::ProtoEncoder(duration).int_field(2, nanos);
  opsight::wire::ProtoEncoder(retry_info).bytes_field(1, duration);
  opsight::wire::ProtoEncoder out(status);
  out.int_field(1, 8);
  out.bytes_field(2, "slow down");
  std::string other, retry_any;
  opsight::wire::ProtoEncoder(other).bytes_field(1, "type.googleapis.com/google.rpc.ErrorInfo");
  opsight::wire::ProtoEncoder(other).bytes_field(2, "\x0a\x03why");
  out.bytes_field(3, other);
  opsight::wire::ProtoEncoder(retry_any).bytes_field(1, "type.googleapis.com/google.rpc.RetryInfo");
  opsight::wire::ProtoEncoder(retry_any).bytes_field(2, retry_info);
  out.bytes_field(3, retry_any);
  return status;
}

std::string partial_success_response(uint64_t rejected, std::string_view why) {
  std::string partial, response;
  opsight::wire::ProtoEncoder(partial).varint_field(
      opsight::exporting::otlp::partial_success::kRejectedSpans, rejected);
  opsight::wire::ProtoEncoder(partial).bytes_field(
      opsight::exporting::otlp::partial_success::kErrorMessage, why);
  opsight::wire::ProtoEncoder(response).bytes_field(
      opsight::exporting::otlp::export_response::kPartialSuccess, partial);
  return response;
}

}  // namespace

TEST(OtlpGrpcTarget, DefaultEndpointIsPort4317WithoutAPath) {
  std::string error;
  auto target = parse("otlp-grpc", {}, &error);
  if (!opsight::exporting::grpc_available()) {
    EXPECT_FALSE(target);
    EXPECT_NE(error.find("without OTLP/gRPC support"), std::string::npos) << error;
    GTEST_SKIP() << "built without gRPC";
  }
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->label(), "otlp-grpc");
  EXPECT_EQ(target->label(), "otlp-grpc");
  EXPECT_EQ(target->endpoint.url(), "http://localhost:4317/");
  // OTEL_EXPORTER_OTLP_PROTOCOL=grpc turns the plain `otlp` kind into gRPC.
  target = parse("otlp", {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->label(), "otlp-grpc");
  EXPECT_EQ(target->endpoint.port, 4317);
  // The signal-specific protocol wins over the general one, either way.
  target = parse("otlp",
                 {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                  {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}},
                 &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->label(), "otlp");
  EXPECT_EQ(target->endpoint.url(), "http://localhost:4318/v1/traces");
  EXPECT_FALSE(parse("otlp", {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift"}}, &error));
  EXPECT_NE(error.find("opsight speaks grpc, http/protobuf and http/json"), std::string::npos)
      << error;
}

TEST(OtlpGrpcTarget, EndpointVariablesAreUsedAsIsAndAPathIsRefused) {
  if (!opsight::exporting::grpc_available()) GTEST_SKIP() << "built without gRPC";
  std::string error;
  // The general endpoint gets no /v1/traces for gRPC; the signal's own wins.
  auto target =
      parse("otlp-grpc", {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.host, "collector");
  EXPECT_EQ(target->endpoint.path, "/");
  target = parse("otlp-grpc",
                 {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/"},
                  {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example:8443"}},
                 &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "https");
  EXPECT_EQ(target->endpoint.host, "traces.example");
  EXPECT_EQ(target->endpoint.port, 8443);
  // The URL in the spec wins over both.
  target = parse("otlp-grpc=http://127.0.0.1:14317",
                 {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example:8443"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://127.0.0.1:14317/");
  EXPECT_FALSE(parse("otlp-grpc=http://collector:4318/v1/traces", {}, &error));
  EXPECT_NE(error.find("'/v1/traces' is a path"), std::string::npos) << error;
  EXPECT_FALSE(parse("otlp-grpc=http://user:secret@collector:4317", {}, &error));
  EXPECT_NE(error.find("authorization=Basic"), std::string::npos) << error;
  EXPECT_EQ(error.find("secret"), std::string::npos) << error;
}

TEST(OtlpGrpcTarget, TheSenderDialsHostAndPortAnIpv6HostInBrackets) {
  if (!opsight::exporting::grpc_available()) GTEST_SKIP() << "built without gRPC";
  std::string error;
  auto target = parse("otlp-grpc=http://[::1]:14317", {}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(opsight::exporting::make_sender(*target, 5)->describe(),
            "otlp-grpc http://[::1]:14317");
  target = parse("otlp-grpc=https://collector", {}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(opsight::exporting::make_sender(*target, 5)->describe(),
            "otlp-grpc https://collector:443");
}

TEST(OtlpGrpcTarget, InsecureDecidesOnlyForAnEndpointWithoutAScheme) {
  if (!opsight::exporting::grpc_available()) GTEST_SKIP() << "built without gRPC";
  std::string error;
  auto target = parse("otlp-grpc=collector:4317", {}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "https");  // secure unless said otherwise
  target = parse("otlp-grpc=collector:4317", {{"OTEL_EXPORTER_OTLP_INSECURE", "TRUE"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "http");
  target = parse(
      "otlp-grpc=collector:4317",
      {{"OTEL_EXPORTER_OTLP_INSECURE", "true"}, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "false"}},
      &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "https");
  // A scheme says it all: INSECURE does not turn https into plaintext, nor http into TLS.
  target =
      parse("otlp-grpc=https://collector:4317", {{"OTEL_EXPORTER_OTLP_INSECURE", "true"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "https");
  target =
      parse("otlp-grpc=http://collector:4317", {{"OTEL_EXPORTER_OTLP_INSECURE", "false"}}, &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.scheme, "http");
  EXPECT_FALSE(
      parse("otlp-grpc=collector:4317", {{"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "yes"}}, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_TRACES_INSECURE 'yes' is not true or false"),
            std::string::npos)
      << error;
}

TEST(OtlpGrpcTarget, HeadersAreLowercaseMetadataWithGzipAndTheTimeout) {
  if (!opsight::exporting::grpc_available()) GTEST_SKIP() << "built without gRPC";
  std::string error;
  auto target = parse("otlp-grpc",
                      {{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20abc,X-Team=ml"},
                       {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"},
                       {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"}},
                      &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->headers, (std::vector<std::pair<std::string, std::string>>{
                                 {"authorization", "Bearer abc"}, {"x-team", "ml"}}));
  EXPECT_TRUE(target->gzip);
  EXPECT_DOUBLE_EQ(target->timeout_s, 2.5);
  EXPECT_FALSE(parse("otlp-grpc", {{"OTEL_EXPORTER_OTLP_HEADERS", "grpc-timeout=1"}}, &error));
  EXPECT_NE(error.find("cannot be gRPC metadata"), std::string::npos) << error;
  EXPECT_FALSE(parse("otlp-grpc", {{"OTEL_EXPORTER_OTLP_HEADERS", "a%20b=1"}}, &error));
  EXPECT_NE(error.find("'a b' cannot be gRPC metadata"), std::string::npos) << error;
  EXPECT_FALSE(parse("otlp-grpc", {{"OTEL_EXPORTER_OTLP_HEADERS", "x=line%0Abreak"}}, &error));
  EXPECT_NE(error.find("not printable ASCII"), std::string::npos) << error;
  // TLS files are checked as for HTTP: readable now, both halves of mutual TLS.
  EXPECT_FALSE(parse("otlp-grpc=https://c:4317",
                     {{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"}}, &error));
  EXPECT_NE(error.find("cannot be read"), std::string::npos) << error;
}

// otlp-metrics-grpc and otlp-logs-grpc, and the plain kinds turned into them by their
// signal's PROTOCOL (over the general one, as for traces).
TEST(OtlpGrpcTarget, MetricsAndLogsTakeGrpcFromTheirProtocol) {
  std::string error;
  if (!opsight::exporting::grpc_available()) {
    EXPECT_FALSE(parse("otlp-metrics-grpc", {}, &error));
    EXPECT_NE(error.find("without OTLP/gRPC support"), std::string::npos) << error;
    GTEST_SKIP() << "built without gRPC";
  }
  struct Signal {
    std::string lower, upper, item;
    opsight::exporting::SinkPayload payload;
  };
  for (const Signal& signal :
       {Signal{"metrics", "METRICS", "data point", opsight::exporting::SinkPayload::kMetrics},
        Signal{"logs", "LOGS", "log record", opsight::exporting::SinkPayload::kLogs}}) {
    SCOPED_TRACE(signal.lower);
    std::string plain = "otlp-" + signal.lower, grpc = plain + "-grpc";
    std::string own = "OTEL_EXPORTER_OTLP_" + signal.upper + "_PROTOCOL";
    auto target = parse(grpc, {}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), grpc);
    EXPECT_EQ(target->endpoint.url(), "http://localhost:4317/");
    EXPECT_EQ(target->sink->payload, signal.payload);
    EXPECT_EQ(target->sink->item, signal.item);
    // The -grpc kind is gRPC whatever the protocol says, as otlp-grpc is.
    target = parse(grpc, {{own, "http/protobuf"}}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), grpc);
    // The general protocol turns the plain kind into gRPC...
    target = parse(plain, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), grpc);
    EXPECT_EQ(target->endpoint.port, 4317);
    // ...and the signal's own wins over it, either way.
    target =
        parse(plain, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {own, "http/protobuf"}}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), plain);
    EXPECT_EQ(target->endpoint.url(), "http://localhost:4318/v1/" + signal.lower);
    target =
        parse(plain, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}, {own, "grpc"}}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), grpc);
    // The traces' protocol is not theirs.
    target = parse(plain, {{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}}, &error);
    ASSERT_TRUE(target) << error;
    EXPECT_EQ(target->label(), plain);
    EXPECT_FALSE(parse(plain, {{own, "thrift"}}, &error));
    EXPECT_NE(
        error.find(own + " 'thrift': opsight sends " + signal.lower + " as http/protobuf or grpc"),
        std::string::npos)
        << error;
  }
}

TEST(OtlpGrpcTarget, MetricsAndLogsReadTheirOwnVariablesWithGrpcsMeanings) {
  if (!opsight::exporting::grpc_available()) GTEST_SKIP() << "built without gRPC";
  std::string error;
  auto target = parse("otlp-logs-grpc",
                      {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4317"},
                       {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4317"},
                       {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "logs-collector:4317"},
                       {"OTEL_EXPORTER_OTLP_INSECURE", "false"},
                       {"OTEL_EXPORTER_OTLP_LOGS_INSECURE", "true"},
                       {"OTEL_EXPORTER_OTLP_HEADERS", "X-Team=ml"},
                       {"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "X-Tenant=logs"},
                       {"OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip"},
                       {"OTEL_EXPORTER_OTLP_TIMEOUT", "9000"},
                       {"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "1500"}},
                      &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "http://logs-collector:4317/");  // LOGS_INSECURE=true
  EXPECT_EQ(target->headers, (std::vector<std::pair<std::string, std::string>>{
                                 {"x-team", "ml"}, {"x-tenant", "logs"}}));
  EXPECT_TRUE(target->gzip);
  EXPECT_DOUBLE_EQ(target->timeout_s, 1.5);
  EXPECT_EQ(opsight::exporting::make_sender(*target, 5)->describe(),
            "otlp-logs-grpc http://logs-collector:4317");
  // The general endpoint gets no /v1/metrics over gRPC; a scheme-less one is TLS.
  target = parse("otlp-metrics-grpc",
                 {{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"},
                  {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"}},
                 &error);
  ASSERT_TRUE(target) << error;
  EXPECT_EQ(target->endpoint.url(), "https://collector:4317/");
  EXPECT_TRUE(target->delta_temporality);
  EXPECT_EQ(opsight::exporting::make_sender(*target, 5)->describe(),
            "otlp-metrics-grpc https://collector:4317");
  EXPECT_FALSE(parse("otlp-metrics-grpc",
                     {{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://c:4317/v1/metrics"}},
                     &error));
  EXPECT_NE(error.find("'/v1/metrics' is a path"), std::string::npos) << error;
  EXPECT_FALSE(
      parse("otlp-metrics-grpc=c:4317", {{"OTEL_EXPORTER_OTLP_METRICS_INSECURE", "yes"}}, &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_METRICS_INSECURE 'yes' is not true or false"),
            std::string::npos)
      << error;
  EXPECT_FALSE(parse("otlp-logs-grpc", {{"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "grpc-x=1"}}, &error));
  EXPECT_NE(error.find("cannot be gRPC metadata"), std::string::npos) << error;
  EXPECT_FALSE(parse("otlp-metrics-grpc=https://c:4317",
                     {{"OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE", "/nonexistent/c.pem"}},
                     &error));
  EXPECT_NE(error.find("OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE"), std::string::npos)
      << error;
}

TEST(OtlpGrpcStatus, RetryableCodesAsTheSpecificationListsThem) {
  using Outcome = SendResult::Outcome;
  // CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS.
  for (int code : {1, 4, 10, 11, 14, 15}) {
    SendResult result = opsight::exporting::grpc_send_result(code, "busy", "", "", "http://c:4317");
    EXPECT_EQ(result.outcome, Outcome::kRetryable) << code;
    EXPECT_FALSE(result.retry_after_s) << code;
  }
  // Everything else is permanent and named.
  for (int code : {2, 3, 5, 6, 7, 8, 9, 12, 13, 16}) {
    SendResult result = opsight::exporting::grpc_send_result(code, "no", "", "", "http://c:4317");
    EXPECT_EQ(result.outcome, Outcome::kFailed) << code;
    EXPECT_NE(result.message.find("(permanent: not retried)"), std::string::npos) << code;
  }
  SendResult unauthenticated =
      opsight::exporting::grpc_send_result(16, "bad token", "", "", "http://c:4317");
  EXPECT_EQ(unauthenticated.message,
            "gRPC UNAUTHENTICATED from http://c:4317: bad token (permanent: not retried)");
  EXPECT_EQ(opsight::exporting::grpc_code_name(42), "code 42");
}

TEST(OtlpGrpcStatus, ResourceExhaustedIsRetriedOnlyWithRetryInfoAfterItsDelay) {
  std::string details = status_with_retry_info(2, 500'000'000);
  auto delay = opsight::exporting::grpc_retry_delay_s(details);
  ASSERT_TRUE(delay);
  EXPECT_DOUBLE_EQ(*delay, 2.5);
  SendResult exhausted =
      opsight::exporting::grpc_send_result(8, "slow down", details, "", "http://c:4317");
  EXPECT_EQ(exhausted.outcome, SendResult::Outcome::kRetryable);
  ASSERT_TRUE(exhausted.retry_after_s);
  EXPECT_DOUBLE_EQ(*exhausted.retry_after_s, 2.5);
  // UNAVAILABLE with a RetryInfo takes its delay too.
  SendResult unavailable =
      opsight::exporting::grpc_send_result(14, "restarting", details, "", "http://c:4317");
  ASSERT_TRUE(unavailable.retry_after_s);
  EXPECT_DOUBLE_EQ(*unavailable.retry_after_s, 2.5);
  // Not a Status, or a Status without RetryInfo: no delay, and no retry of the quota.
  EXPECT_FALSE(opsight::exporting::grpc_retry_delay_s("\xff\xff"));
  std::string plain;
  opsight::wire::ProtoEncoder(plain).int_field(1, 8);
  EXPECT_FALSE(opsight::exporting::grpc_retry_delay_s(plain));
  EXPECT_EQ(opsight::exporting::grpc_send_result(8, "quota", plain, "", "x").outcome,
            SendResult::Outcome::kFailed);
}

TEST(OtlpGrpcStatus, RefusedCertificatesAndHttp1PortsAreNotRetried) {
  SendResult tls = opsight::exporting::grpc_send_result(
      14, "failed to connect to all addresses; last error: Ssl handshake failed", "", "",
      "https://c:4317");
  EXPECT_EQ(tls.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(tls.message.find("OTEL_EXPORTER_OTLP_CERTIFICATE"), std::string::npos);
  SendResult http1 = opsight::exporting::grpc_send_result(14, "Trying to connect an http1.x server",
                                                          "", "", "http://c:4318");
  EXPECT_EQ(http1.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(http1.message.find("usually port 4317"), std::string::npos) << http1.message;
  // A connection attempt grpc's TCP handshaker gave up (a closed port) is not TLS: retried.
  SendResult closed = opsight::exporting::grpc_send_result(
      14,
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: tcp handshaker "
      "shutdown",
      "", "", "http://c:4317");
  EXPECT_EQ(closed.outcome, SendResult::Outcome::kRetryable) << closed.message;
}

TEST(OtlpGrpcStatus, APartialSuccessCountsItsRejectedSpans) {
  SendResult result = opsight::exporting::grpc_send_result(
      0, "", "", partial_success_response(3, "too old"), "http://c:4317");
  EXPECT_EQ(result.outcome, SendResult::Outcome::kSent);
  EXPECT_EQ(result.rejected_spans, 3u);
  EXPECT_NE(result.message.find("rejected 3 spans of the batch (OTLP partial success): too old"),
            std::string::npos)
      << result.message;
  EXPECT_EQ(opsight::exporting::grpc_send_result(0, "", "", "", "http://c:4317").rejected_spans,
            0u);
  // Metrics and logs name what they carry.
  result = opsight::exporting::grpc_send_result(0, "", "", partial_success_response(1, ""),
                                                "http://c:4317", "data point");
  EXPECT_EQ(result.rejected_spans, 1u);
  EXPECT_NE(result.message.find("rejected 1 data point of the batch"), std::string::npos)
      << result.message;
}

#if OPSIGHT_WITH_GRPC

namespace {

// An in-process gRPC server on 127.0.0.1 answering every call from a script (an answer per
// call, the last one repeated), and keeping what each call brought.
class ScriptedCollector {
 public:
  struct Answer {
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message, details, response;
  };
  struct Call {
    std::string method, request;
    std::multimap<std::string, std::string> metadata;
  };

  // `accept_gzip` false: the server refuses gzip-compressed messages (UNIMPLEMENTED), which
  // tells a compressed request from a plain one (gRPC keeps grpc-encoding from the handler).
  explicit ScriptedCollector(std::deque<Answer> script, bool accept_gzip = true)
      : script_(std::move(script)) {
    grpc::ServerBuilder builder;
    if (!accept_gzip) builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedCollector() { server_->Shutdown(); }

  int port() const { return port_; }
  std::vector<Call> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* context, ScriptedCollector* collector)
        : context_(context), collector_(collector) {
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
        return;
      }
      Call call;
      call.method = context_->method();
      std::vector<grpc::Slice> slices;
      (void)request_.Dump(&slices);
      for (const grpc::Slice& slice : slices)
        call.request.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      for (const auto& [key, value] : context_->client_metadata())
        call.metadata.emplace(std::string(key.data(), key.size()),
                              std::string(value.data(), value.size()));
      Answer answer = collector_->answer(std::move(call));
      if (answer.code != grpc::StatusCode::OK) {
        Finish(grpc::Status(answer.code, answer.message, answer.details));
        return;
      }
      grpc::Slice slice(answer.response.data(), answer.response.size());
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* context_;
    ScriptedCollector* collector_;
    grpc::ByteBuffer request_, response_;
  };

  class Service : public grpc::CallbackGenericService {
   public:
    explicit Service(ScriptedCollector* collector) : collector_(collector) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* context) override {
      return new Reactor(context, collector_);
    }

   private:
    ScriptedCollector* collector_;
  };

  Answer answer(Call call) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
    Answer next = script_.front();
    if (script_.size() > 1) script_.pop_front();
    return next;
  }

  std::mutex mutex_;
  std::deque<Answer> script_;
  std::vector<Call> calls_;
  Service service_{this};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

opsight::exporting::GrpcSenderOptions options_for(int port) {
  opsight::exporting::GrpcSenderOptions options;
  options.address = "127.0.0.1:" + std::to_string(port);
  options.timeout_s = 5;
  options.user_agent = opsight::exporting::grpc_user_agent_for("9.8.7");
  return options;
}

}  // namespace

TEST(OtlpGrpcSender, SendsTheBytesToTheExportMethodWithMetadataAndUserAgent) {
  ScriptedCollector collector({ScriptedCollector::Answer{}});
  auto options = options_for(collector.port());
  options.headers = {{"authorization", "Bearer abc"}, {"x-team", "ml"}};
  options.gzip = true;
  std::string error;
  auto sender = opsight::exporting::make_grpc_sender(options, &error);
  ASSERT_TRUE(sender) << error;
  std::string body(3000, 'x');  // compressible, so gzip is used
  body[0] = '\x0a';
  SendResult result = sender->send(body);
  ASSERT_EQ(result.outcome, SendResult::Outcome::kSent) << result.message;
  // Compressed by the sender (gzip_compress) and sent marked compressed: what went out is
  // the small gzip member, which the server inflated back (below).
  EXPECT_LT(result.wire_bytes, body.size() / 10);
  EXPECT_EQ(sender->describe(), "otlp-grpc http://127.0.0.1:" + std::to_string(collector.port()));
  auto calls = collector.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "/opentelemetry.proto.collector.trace.v1.TraceService/Export");
  EXPECT_EQ(calls[0].request, body);  // decompressed by the server: the same bytes
  auto header = [&](const std::string& key) {
    auto it = calls[0].metadata.find(key);
    return it == calls[0].metadata.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(header("authorization"), "Bearer abc");
  EXPECT_EQ(header("x-team"), "ml");
  EXPECT_EQ(header("user-agent").rfind("opsight/9.8.7 (OTLP/gRPC) grpc-c++/", 0), 0u)
      << header("user-agent");

  // The same sender's messages are gzip-compressed: a server that refuses gzip says so,
  // and a sender without gzip gets through to it.
  ScriptedCollector plain_only({ScriptedCollector::Answer{}}, /*accept_gzip=*/false);
  options.address = "127.0.0.1:" + std::to_string(plain_only.port());
  auto gzip_sender = opsight::exporting::make_grpc_sender(options, &error);
  SendResult refused = gzip_sender->send(body);
  EXPECT_EQ(refused.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(refused.message.find("gRPC UNIMPLEMENTED"), std::string::npos) << refused.message;
  options.gzip = false;
  auto plain_sender = opsight::exporting::make_grpc_sender(options, &error);
  EXPECT_EQ(plain_sender->send(body).outcome, SendResult::Outcome::kSent);
  EXPECT_EQ(plain_only.calls().size(), 1u);
}

TEST(OtlpGrpcSender, UnavailableIsRetriedByTheBatchExporterAndPartialSuccessDropped) {
  using Code = grpc::StatusCode;
  ScriptedCollector collector({{Code::UNAVAILABLE, "restarting", "", ""},
                               {Code::OK, "", "", partial_success_response(2, "too old")}});
  std::string error;
  auto sender = opsight::exporting::make_grpc_sender(options_for(collector.port()), &error);
  ASSERT_TRUE(sender) << error;
  opsight::exporting::BatchExporterOptions exporter_options;
  exporter_options.initial_backoff_s = 0.01;
  opsight::exporting::BatchExporter exporter(std::move(sender), exporter_options);
  exporter.offer({std::string("\x0a\x00", 2), 10});
  exporter.shutdown(10);
  auto stats = exporter.stats();
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.spans_sent + stats.spans_dropped(), 10u);
  EXPECT_EQ(stats.spans_dropped_failed, 2u);
  EXPECT_NE(stats.last_error.find("too old"), std::string::npos) << stats.last_error;
  EXPECT_EQ(collector.calls().size(), 2u);
}

TEST(OtlpGrpcSender, APermanentCodeAndADeadPortAreBoundedAndNamed) {
  ScriptedCollector collector({{grpc::StatusCode::PERMISSION_DENIED, "tenant unknown", "", ""}});
  std::string error;
  auto sender = opsight::exporting::make_grpc_sender(options_for(collector.port()), &error);
  ASSERT_TRUE(sender) << error;
  SendResult denied = sender->send("\x0a\x00");
  EXPECT_EQ(denied.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(denied.message.find("gRPC PERMISSION_DENIED"), std::string::npos) << denied.message;
  EXPECT_NE(denied.message.find("tenant unknown"), std::string::npos) << denied.message;
  int dead_port = 0;
  {
    ScriptedCollector gone({ScriptedCollector::Answer{}});
    dead_port = gone.port();
  }
  auto options = options_for(dead_port);
  options.timeout_s = 2;
  auto dead = opsight::exporting::make_grpc_sender(options, &error);
  ASSERT_TRUE(dead) << error;
  auto start = std::chrono::steady_clock::now();
  SendResult refused = dead->send("\x0a\x00");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(refused.outcome, SendResult::Outcome::kRetryable) << refused.message;
  EXPECT_NE(refused.message.find("gRPC UNAVAILABLE"), std::string::npos) << refused.message;
}

namespace {

// Five "work" spans and three log records (instants the logging bridge would write), two
// of them inside a span.
opsight::trace::Trace grpc_signals_trace() {
  namespace schema = opsight::schema;
  using opsight::trace::ArgValue;
  opsight::trace::Trace trace;
  trace.run.has_unix_offset = true;
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  auto track = trace.thread_track(1, 1);
  for (int i = 0; i < 5; ++i) trace.slices.add(i * 100, 50, trace.intern("work"), 0, track);
  for (int i = 0; i < 3; ++i) {
    auto row = trace.instants.add(i * 100 + 10, trace.intern("INFO"),
                                  trace.intern(schema::kLogCategory), track);
    trace.instant_args.add(row, trace.intern(schema::kLogLevel), ArgValue::of_int(20));
    trace.instant_args.add(row, trace.intern(schema::kLogMessage),
                           ArgValue::of_string(trace.intern("record " + std::to_string(i))));
    trace.instant_args.add(row, trace.intern(schema::kLogLoggerName),
                           ArgValue::of_string(trace.intern("app")));
  }
  trace.finalize();
  return trace;
}

}  // namespace

// otlp-metrics-grpc and otlp-logs-grpc through export_trace: each calls its service's
// Export with the very request the OTLP/HTTP sink of its signal sends, and a partial
// success counts its rejected data points or log records as dropped.
TEST(OtlpGrpcSender, MetricsAndLogsCallTheirServicesWithTheHttpSinksRequests) {
  ScriptedCollector collector({{grpc::StatusCode::OK, "", "", partial_success_response(2, "old")}});
  opsight::trace::Trace trace = grpc_signals_trace();
  std::string url = "=http://127.0.0.1:" + std::to_string(collector.port()), error;
  auto metrics = parse("otlp-metrics-grpc" + url, {}, &error);
  ASSERT_TRUE(metrics) << error;
  auto logs = parse("otlp-logs-grpc" + url, {}, &error);
  ASSERT_TRUE(logs) << error;
  opsight::exporting::TraceExportOptions options;
  options.requests_in_flight = 1;
  auto reports = opsight::exporting::export_trace(trace, {*metrics, *logs}, options);
  ASSERT_EQ(reports.size(), 2u);

  // What the HTTP sinks would send (the same encoders, the same view).
  auto http_metrics = parse("otlp-metrics", {}, &error);
  auto http_logs = parse("otlp-logs", {}, &error);
  ASSERT_TRUE(http_metrics && http_logs) << error;
  opsight::exporting::SpanView view(trace, options.resource);
  uint64_t points = 0;
  std::string metrics_request =
      http_metrics->sink->metrics_body(trace, view, *http_metrics, &points);
  opsight::exporting::LogView records(view);
  std::string logs_request = http_logs->sink->logs_body(records, records.records());
  ASSERT_EQ(records.records().size(), 3u);

  std::map<std::string, std::string> requests;
  for (const auto& call : collector.calls()) requests[call.method] = call.request;
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests["/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"],
            metrics_request);
  EXPECT_EQ(requests["/opentelemetry.proto.collector.logs.v1.LogsService/Export"], logs_request);

  EXPECT_EQ(reports[0].description,
            "otlp-metrics-grpc http://127.0.0.1:" + std::to_string(collector.port()));
  EXPECT_EQ(reports[0].item, "data point");
  EXPECT_EQ(reports[0].stats.spans_offered, points);
  EXPECT_EQ(reports[0].stats.spans_sent, points - 2);
  EXPECT_EQ(reports[0].stats.spans_dropped_failed, 2u);
  EXPECT_NE(reports[0].stats.last_error.find(
                "rejected 2 data points of the batch (OTLP partial success): old"),
            std::string::npos)
      << reports[0].stats.last_error;
  EXPECT_EQ(reports[1].description,
            "otlp-logs-grpc http://127.0.0.1:" + std::to_string(collector.port()));
  EXPECT_EQ(reports[1].item, "log record");
  EXPECT_EQ(reports[1].stats.spans_offered, 3u);
  EXPECT_EQ(reports[1].stats.spans_sent, 1u);
  EXPECT_EQ(reports[1].stats.spans_dropped_failed, 2u);
  EXPECT_NE(reports[1].stats.last_error.find("rejected 2 log records of the batch"),
            std::string::npos)
      << reports[1].stats.last_error;
}

#endif  // OPSIGHT_WITH_GRPC
