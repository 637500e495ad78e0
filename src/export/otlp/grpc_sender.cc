#include "export/otlp/grpc_sender.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "export/otlp/otlp_encoder.hpp"
#include "wire/proto_decoder.hpp"

#if OPSIGHT_WITH_GRPC
#include <grpc/compression.h>
#include <grpc/support/log.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#endif

namespace opsight::exporting {

namespace {

// gRPC's status codes (grpc/status.h, google.rpc.Code): facts of the protocol.
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
constexpr int kCancelled = 1, kDeadlineExceeded = 4, kResourceExhausted = 8, kAborted = 10,
              kOutOfRange = 11, kUnavailable = 14, kDataLoss = 15;

// google.rpc.Status, google.protobuf.Any, google.rpc.RetryInfo, google.protobuf.Duration:
// field numbers from their .proto files.
constexpr uint32_t kStatusDetails = 3;
constexpr uint32_t kAnyTypeUrl = 1, kAnyValue = 2;
constexpr uint32_t kRetryInfoRetryDelay = 1;
constexpr uint32_t kDurationSeconds = 1, kDurationNanos = 2;
constexpr std::string_view kRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo";

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace

std::string grpc_code_name(int code) {
  if (code >= 0 && code < static_cast<int>(kCodeNames.size())) return kCodeNames[code];
  return "code " + std::to_string(code);
}

std::string grpc_user_agent_for(std::string_view opsight_version) {
  return "opsight/" +
         (opsight_version.empty() ? std::string("unknown") : std::string(opsight_version)) +
         " (OTLP/gRPC)";
}

std::optional<double> grpc_retry_delay_s(std::string_view status_details) {
  if (status_details.empty()) return std::nullopt;
  try {
    wire::ProtoField field;
    wire::ProtoReader status(status_details, status_details.data(), "google.rpc.Status");
    while (status.next(field)) {
      if (field.number != kStatusDetails || field.wire_type != wire::kWireLengthDelimited) continue;
      std::string_view type_url, value;
      wire::ProtoReader any(field.bytes, status_details.data(), "google.protobuf.Any");
      wire::ProtoField any_field;
      while (any.next(any_field)) {
        if (any_field.wire_type != wire::kWireLengthDelimited) continue;
        if (any_field.number == kAnyTypeUrl) type_url = any_field.bytes;
        if (any_field.number == kAnyValue) value = any_field.bytes;
      }
      if (type_url != kRetryInfoType) continue;
      double seconds = 0;  // a RetryInfo without a delay: retry at once (our own backoff)
      wire::ProtoReader retry_info(value, status_details.data(), "google.rpc.RetryInfo");
      wire::ProtoField retry_field;
      while (retry_info.next(retry_field)) {
        if (retry_field.number != kRetryInfoRetryDelay ||
            retry_field.wire_type != wire::kWireLengthDelimited)
          continue;
        wire::ProtoReader duration(retry_field.bytes, status_details.data(),
                                   "google.protobuf.Duration");
        wire::ProtoField duration_field;
        while (duration.next(duration_field)) {
          if (duration_field.wire_type != wire::kWireVarint) continue;
          if (duration_field.number == kDurationSeconds)
            seconds += static_cast<double>(duration_field.as_int64());
          if (duration_field.number == kDurationNanos)
            seconds += static_cast<double>(static_cast<int32_t>(duration_field.value)) * 1e-9;
        }
      }
      return seconds < 0 ? 0.0 : seconds;
    }
  } catch (const wire::ProtoDecodeError&) {
    return std::nullopt;
  }
  return std::nullopt;
}

SendResult grpc_send_result(int code, std::string_view message, std::string_view details,
                            std::string_view response, std::string_view target) {
  SendResult result;
  if (code == 0) {
    result.outcome = SendResult::Outcome::kSent;
    PartialSuccess partial = decode_partial_success(response);
    if (partial.rejected_spans > 0) {
      result.rejected_spans = partial.rejected_spans;
      result.message = std::string(target) + " rejected " + std::to_string(partial.rejected_spans) +
                       " span" + (partial.rejected_spans == 1 ? "" : "s") +
                       " of the batch (OTLP partial success)" +
                       (partial.error_message.empty() ? "" : ": " + partial.error_message);
    }
    return result;
  }
  std::optional<double> delay = grpc_retry_delay_s(details);
  bool retryable = code == kCancelled || code == kDeadlineExceeded || code == kAborted ||
                   code == kOutOfRange || code == kUnavailable || code == kDataLoss ||
                   (code == kResourceExhausted && delay.has_value());
  std::string hint;
  if (code == kUnavailable) {
    // Waiting mends neither a refused certificate nor a port that speaks another protocol.
    if (contains(message, "andshake") || contains(message, "CERTIFICATE_VERIFY_FAILED") ||
        contains(message, "certificate")) {
      retryable = false;
      hint = " (TLS: check OTEL_EXPORTER_OTLP_CERTIFICATE and the endpoint's scheme)";
    } else if (contains(message, "http1.x") || contains(message, "HTTP/1")) {
      retryable = false;
      hint =
          " (the port answers HTTP/1.x, as an OTLP/HTTP port does: OTLP/gRPC is usually port "
          "4317, HTTP 4318)";
    }
  }
  result.outcome = retryable ? SendResult::Outcome::kRetryable : SendResult::Outcome::kFailed;
  if (delay) result.retry_after_s = *delay;
  result.message = "gRPC " + grpc_code_name(code) + " from " + std::string(target) +
                   (message.empty() ? "" : ": " + std::string(message).substr(0, 300)) + hint +
                   (retryable ? "" : " (permanent: not retried)");
  return result;
}

#if !OPSIGHT_WITH_GRPC

bool grpc_available() { return false; }

std::unique_ptr<BatchSender> make_grpc_sender(GrpcSenderOptions, std::string* error) {
  if (error)
    *error =
        "this opsight was built without OTLP/gRPC support (install libgrpc++-dev and rebuild; "
        "CMake option OPSIGHT_WITH_GRPC)";
  return nullptr;
}

#else

namespace {

bool read_file(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *contents = buffer.str();
  return static_cast<bool>(in) || in.eof();
}

class GrpcSender : public BatchSender {
 public:
  GrpcSender(GrpcSenderOptions options, std::shared_ptr<grpc::Channel> channel)
      : options_(std::move(options)), channel_(std::move(channel)), stub_(channel_) {}

  SendResult send(std::string_view body) override {
    grpc::ClientContext context;
    auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::duration<double>(options_.timeout_s));
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    for (const auto& [key, value] : options_.headers) context.AddMetadata(key, value);
    if (options_.gzip) context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    grpc::Slice slice(body.data(), body.size());  // copied: the batch may go away
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    std::future<grpc::Status> finished = done.get_future();
    stub_.UnaryCall(&context, std::string(kOtlpTraceExportMethod), grpc::StubOptions(), &request,
                    &response, [&done](grpc::Status status) { done.set_value(std::move(status)); });
    // The deadline ends every call, so this wait is bounded by the timeout.
    grpc::Status status = finished.get();
    std::string answer;
    if (status.ok()) {
      std::vector<grpc::Slice> slices;
      if (response.Dump(&slices).ok())
        for (const grpc::Slice& part : slices)
          answer.append(reinterpret_cast<const char*>(part.begin()), part.size());
    }
    SendResult result =
        grpc_send_result(static_cast<int>(status.error_code()), status.error_message(),
                         status.error_details(), answer, target());
    if (result.outcome == SendResult::Outcome::kSent) result.wire_bytes = body.size();
    return result;
  }

  std::string describe() const override { return "otlp-grpc " + target(); }

 private:
  std::string target() const { return (options_.tls ? "https://" : "http://") + options_.address; }

  GrpcSenderOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
};

}  // namespace

bool grpc_available() { return true; }

std::unique_ptr<BatchSender> make_grpc_sender(GrpcSenderOptions options, std::string* error) {
  // grpc logs its errors (a refused TLS handshake...) to stderr, the traced program's; each
  // one also ends up in SendResult::message. Kept quiet unless the user asks grpc to speak
  // (GRPC_VERBOSITY or GRPC_TRACE set), as librdkafka's logs are unless `debug` is set.
  // Process-wide: a program linking this same libgrpc gets it too (Python's grpcio carries
  // its own). gpr_set_log_function is grpc 1.51's (Debian 12); later grpc logs through absl.
  static std::once_flag quiet_logs;
  std::call_once(quiet_logs, [] {
    if (std::getenv("GRPC_VERBOSITY") == nullptr && std::getenv("GRPC_TRACE") == nullptr)
      gpr_set_log_function([](gpr_log_func_args*) {});
  });
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls) {
    grpc::SslCredentialsOptions tls;
    struct File {
      const std::string& path;
      std::string* contents;
    };
    for (const File& file : {File{options.ca_certificate_path, &tls.pem_root_certs},
                             File{options.client_certificate_path, &tls.pem_cert_chain},
                             File{options.client_key_path, &tls.pem_private_key}}) {
      if (file.path.empty()) continue;
      if (!read_file(file.path, file.contents)) {
        if (error) *error = "'" + file.path + "': cannot be read";
        return nullptr;
      }
    }
    credentials = grpc::SslCredentials(tls);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments arguments;
  arguments.SetUserAgentPrefix(options.user_agent);
  // A collector that comes back is tried again within BatchExporter's own backoff.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // Two sender threads of one exporter get channels of their own (two connections), as
  // two HTTP senders do.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(options.address, credentials, arguments);
  if (!channel) {
    if (error) *error = "gRPC could not make a channel to " + options.address;
    return nullptr;
  }
  return std::make_unique<GrpcSender>(std::move(options), std::move(channel));
}

#endif

}  // namespace opsight::exporting
