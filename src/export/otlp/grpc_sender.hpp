// Sends each encoded batch as one OTLP/gRPC call: the unary Export method of the signal's
// service (GrpcSenderOptions::method: TraceService's for spans, MetricsService's for metrics,
// LogsService's for log records) with the very bytes the OTLP/HTTP path's encoder writes
// (an ExportTraceServiceRequest, ExportMetricsServiceRequest or ExportLogsServiceRequest) as
// the request message, through grpc's C core API (Debian's libgrpc++-dev, which brings it;
// grpc++'s channel arguments): no protoc, no generated code, no libprotobuf. The answer's
// bytes are the service's Export*ServiceResponse, read with the HTTP path's decoder (the
// three partial successes keep their count in field 1), so a partial success counts its
// rejected spans, data points or log records as dropped.
//
// The call's status sorts the attempt the way the OTLP specification sorts gRPC codes:
//   OK                                               sent
//   CANCELLED, DEADLINE_EXCEEDED, ABORTED,           retryable (BatchExporter backs off and
//   OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS             calls again; a RetryInfo's delay wins)
//   RESOURCE_EXHAUSTED with a google.rpc.RetryInfo   retryable after the server's delay
//   RESOURCE_EXHAUSTED without one, and every other  failed, named ("gRPC UNAUTHENTICATED
//   code                                             from ... (permanent: not retried)")
// Two UNAVAILABLE answers are failed too, because waiting cannot mend them: a TLS handshake
// the certificate check refuses, and a port that answers HTTP/1.x (an OTLP/HTTP port, 4318,
// given where gRPC's 4317 was meant).
//
// One channel per sender: plaintext for http://, TLS (SslCredentials: a CA file, and a
// client certificate and key for mutual TLS) for https://; the User-Agent names opsight
// (the channel's primary user agent); headers go as metadata (keys lowercased, as gRPC
// requires); gzip is gRPC's own message compression (grpc-encoding: gzip), the message
// compressed by the sender itself with gzip_compress (libdeflate, level 1) and handed to grpc
// marked as compressed, where grpc would use zlib at level 6; the timeout is each call's
// deadline.
// grpc's reconnect backoff is kept at most 5 s, BatchExporter's own, so a collector that
// comes back is reached at the next retry.
//
// Built when OPSIGHT_WITH_GRPC is on (the default where libgrpc++-dev is found); otherwise
// grpc_available() is false and make_grpc_sender() says how to get it. The status sorting
// (grpc_send_result) and RetryInfo's reading are built either way, for their tests.
//
// grpc's own log lines are kept off stderr unless GRPC_VERBOSITY or GRPC_TRACE is set.
//
// Thread-safety: one GrpcSender per thread (BatchExporter's sender thread owns its own);
// the free functions are thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "export/http_sender.hpp"

namespace opsight::exporting {

// The OTLP services' one method each, as gRPC paths.
inline constexpr std::string_view kOtlpTraceExportMethod =
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
inline constexpr std::string_view kOtlpMetricsExportMethod =
    "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
inline constexpr std::string_view kOtlpLogsExportMethod =
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export";

struct GrpcSenderOptions {
  std::string address;  // "host:port" (an IPv6 host in brackets)
  std::string method = std::string(kOtlpTraceExportMethod);  // the unary method called
  std::string label = "otlp-grpc";  // the sink's name, for describe() ("otlp-grpc http://...")
  std::string item = "span";        // what a partial success rejects, for its message
  bool tls = false;                 // https:// (SslCredentials), else plaintext
  // PEM files: the CA that signs the server's certificate (empty: the system's roots), this
  // client's certificate and key (mutual TLS; both or neither). Read when the sender is made.
  std::string ca_certificate_path, client_certificate_path, client_key_path;
  std::vector<std::pair<std::string, std::string>> headers;  // metadata on every call
  bool gzip = false;                                         // gRPC message compression
  double timeout_s = 10;                                     // each call's deadline
  std::string user_agent;  // the channel's primary user agent ("opsight/0.1.0 (OTLP/gRPC)")
};

// Whether this build has gRPC support (OPSIGHT_WITH_GRPC).
bool grpc_available();

// "opsight/<version> (OTLP/gRPC)"; gRPC appends its own "grpc-c++/<version> (...)" after
// it on the wire.
std::string grpc_user_agent_for(std::string_view opsight_version);

// A sender for `options`; nullptr with `error` set when a TLS file cannot be read or gRPC is
// not built in. Connecting happens at the first call: an unreachable collector shows up as
// retryable sends, not here.
std::unique_ptr<BatchSender> make_grpc_sender(GrpcSenderOptions options, std::string* error);

// The delay a google.rpc.Status's RetryInfo asks for (the bytes of gRPC's
// grpc-status-details-bin trailer: Status.details holds Any messages, one of them
// type.googleapis.com/google.rpc.RetryInfo with retry_delay, a Duration); nullopt when
// there is none or the bytes are not such a Status.
std::optional<double> grpc_retry_delay_s(std::string_view status_details);

// The gRPC status code's name ("UNAVAILABLE" for 14); "code N" for one outside 0..16.
std::string grpc_code_name(int code);

// Sorts a finished call (the table above): `code` is gRPC's status code, `message` its
// text, `details` the status details' bytes, `response` the answer's bytes (read for a
// partial success when `code` is 0), `target` the collector's address, for messages, `item`
// what the request carries ("span", "data point", "log record"), for a partial success's.
SendResult grpc_send_result(int code, std::string_view message, std::string_view details,
                            std::string_view response, std::string_view target,
                            std::string_view item = "span");

}  // namespace opsight::exporting
