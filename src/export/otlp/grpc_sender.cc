#include "export/otlp/grpc_sender.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "export/http_sender.hpp"  // gzip_compress
#include "export/otlp/otlp_encoder.hpp"
#include "wire/proto_decoder.hpp"

#if OPSIGHT_WITH_GRPC
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdlib>
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
                            std::string_view response, std::string_view target,
                            std::string_view item) {
  SendResult result;
  if (code == 0) {
    result.outcome = SendResult::Outcome::kSent;
    PartialSuccess partial = decode_partial_success(response);
    if (partial.rejected_spans > 0) {
      result.rejected_spans = partial.rejected_spans;
      result.message = std::string(target) + " rejected " + std::to_string(partial.rejected_spans) +
                       " " + std::string(item) + (partial.rejected_spans == 1 ? "" : "s") +
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
    // A TLS handshake that failed ("Ssl handshake failed"), not a TCP connection attempt
    // grpc gave up ("tcp handshaker shutdown": a closed port, worth retrying).
    if (contains(message, "andshake failed") || contains(message, "CERTIFICATE_VERIFY_FAILED") ||
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

// grpc's C core API, not grpc++'s: a message gzip-compressed here (libdeflate, level 1, the
// HTTP path's gzip_compress) goes to grpc as a byte buffer marked compressed
// (grpc_raw_compressed_byte_buffer_create), which grpc sends as it is, with the channel's
// grpc-encoding: gzip and the message's compressed flag, where grpc++'s ByteBuffer can only
// hand grpc a plain message for grpc to compress itself (zlib at level 6, not settable:
// 2.5x the cost per byte). The wire is the same standard gzip message compression.
class GrpcSender : public BatchSender {
 public:
  GrpcSender(GrpcSenderOptions options, grpc_channel* channel)
      : options_(std::move(options)),
        channel_(channel),
        queue_(grpc_completion_queue_create_for_pluck(nullptr)) {}
  ~GrpcSender() override {
    grpc_channel_destroy(channel_);
    grpc_completion_queue_shutdown(queue_);
    grpc_completion_queue_destroy(queue_);
    grpc_shutdown();  // the grpc_init() of make_grpc_sender
  }
  GrpcSender(const GrpcSender&) = delete;
  GrpcSender& operator=(const GrpcSender&) = delete;

  SendResult send(std::string_view body) override {
    // Compressed here, on the sender's thread; when it fails the body goes plain (grpc then
    // compresses it itself, the channel's algorithm being gzip).
    std::string compressed = options_.gzip ? gzip_compress(body) : std::string();
    std::string_view message = compressed.empty() ? body : std::string_view(compressed);
    grpc_slice slice = grpc_slice_from_copied_buffer(message.data(), message.size());
    grpc_byte_buffer* request =
        compressed.empty() ? grpc_raw_byte_buffer_create(&slice, 1)
                           : grpc_raw_compressed_byte_buffer_create(&slice, 1, GRPC_COMPRESS_GZIP);
    grpc_slice_unref(slice);
    gpr_timespec deadline = gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_micros(static_cast<int64_t>(options_.timeout_s * 1e6), GPR_TIMESPAN));
    // options_ outlives the call: the method's bytes are not copied.
    grpc_slice method =
        grpc_slice_from_static_buffer(options_.method.data(), options_.method.size());
    grpc_call* call = grpc_channel_create_call(channel_, nullptr, GRPC_PROPAGATE_DEFAULTS, queue_,
                                               method, nullptr, deadline, nullptr);
    std::vector<grpc_metadata> metadata(options_.headers.size());
    for (size_t i = 0; i < options_.headers.size(); ++i) {
      metadata[i].key = grpc_slice_from_copied_string(options_.headers[i].first.c_str());
      metadata[i].value = grpc_slice_from_copied_buffer(options_.headers[i].second.data(),
                                                        options_.headers[i].second.size());
    }
    grpc_metadata_array initial_metadata, trailing_metadata;
    grpc_metadata_array_init(&initial_metadata);
    grpc_metadata_array_init(&trailing_metadata);
    grpc_byte_buffer* response = nullptr;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice status_message = grpc_empty_slice();
    std::array<grpc_op, 6> ops{};
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = metadata.size();
    ops[0].data.send_initial_metadata.metadata = metadata.data();
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_metadata;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing_metadata;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &status_message;
    SendResult result;
    grpc_call_error started = grpc_call_start_batch(call, ops.data(), ops.size(), this, nullptr);
    if (started == GRPC_CALL_OK) {
      // The deadline ends every call, so this wait is bounded by the timeout.
      grpc_completion_queue_pluck(queue_, this, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
      std::string answer, details;
      if (code == GRPC_STATUS_OK && response != nullptr) {
        grpc_byte_buffer_reader reader;
        if (grpc_byte_buffer_reader_init(&reader, response)) {
          grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
          answer.assign(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(all)),
                        GRPC_SLICE_LENGTH(all));
          grpc_slice_unref(all);
          grpc_byte_buffer_reader_destroy(&reader);
        }
      }
      for (size_t i = 0; i < trailing_metadata.count; ++i)
        if (grpc_slice_str_cmp(trailing_metadata.metadata[i].key, "grpc-status-details-bin") == 0)
          details.assign(reinterpret_cast<const char*>(
                             GRPC_SLICE_START_PTR(trailing_metadata.metadata[i].value)),
                         GRPC_SLICE_LENGTH(trailing_metadata.metadata[i].value));
      std::string text(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(status_message)),
                       GRPC_SLICE_LENGTH(status_message));
      result =
          grpc_send_result(static_cast<int>(code), text, details, answer, target(), options_.item);
      if (result.outcome == SendResult::Outcome::kSent) result.wire_bytes = message.size();
    } else {
      // Only a metadata key or value gRPC forbids gets here (the target's checks refuse them).
      result.outcome = SendResult::Outcome::kFailed;
      result.message = "gRPC refused the call to " + target() + " (call error " +
                       std::to_string(static_cast<int>(started)) +
                       ": a header gRPC forbids?; permanent: not retried)";
    }
    grpc_slice_unref(status_message);
    if (response != nullptr) grpc_byte_buffer_destroy(response);
    grpc_metadata_array_destroy(&initial_metadata);
    grpc_metadata_array_destroy(&trailing_metadata);
    for (grpc_metadata& entry : metadata) {
      grpc_slice_unref(entry.key);
      grpc_slice_unref(entry.value);
    }
    grpc_byte_buffer_destroy(request);
    grpc_call_unref(call);
    return result;
  }

  std::string describe() const override { return options_.label + " " + target(); }

 private:
  std::string target() const { return (options_.tls ? "https://" : "http://") + options_.address; }

  GrpcSenderOptions options_;
  grpc_channel* channel_;
  grpc_completion_queue* queue_;
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
  std::string root_certificates, certificate_chain, private_key;
  if (options.tls) {
    struct File {
      const std::string& path;
      std::string* contents;
    };
    for (const File& file : {File{options.ca_certificate_path, &root_certificates},
                             File{options.client_certificate_path, &certificate_chain},
                             File{options.client_key_path, &private_key}}) {
      if (file.path.empty()) continue;
      if (!read_file(file.path, file.contents)) {
        if (error) *error = "'" + file.path + "': cannot be read";
        return nullptr;
      }
    }
  }
  // grpc++'s channel arguments (its primary user agent "<ours> grpc-c++/<version>"), given to
  // the core's channel.
  grpc::ChannelArguments arguments;
  arguments.SetUserAgentPrefix(options.user_agent);
  // A collector that comes back is tried again within BatchExporter's own backoff. The
  // minimum reconnect backoff is left at grpc's default (20 s): grpc's core also takes it as
  // the connection attempt's minimum timeout, so 100 ms there failed any handshake slower
  // than that (TLS to a collector across a WAN) until the backoff had grown; each call's
  // deadline (OTEL_EXPORTER_OTLP_TIMEOUT) still bounds the wait.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // Two sender threads of one exporter get channels of their own (two connections), as
  // two HTTP senders do.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Every call says grpc-encoding: gzip; its message comes compressed already (send()).
  if (options.gzip) arguments.SetCompressionAlgorithm(GRPC_COMPRESS_GZIP);
  grpc_init();
  grpc_channel_credentials* credentials = nullptr;
  if (options.tls) {
    grpc_ssl_pem_key_cert_pair pair{private_key.c_str(), certificate_chain.c_str()};
    credentials = grpc_ssl_credentials_create(
        root_certificates.empty() ? nullptr : root_certificates.c_str(),
        private_key.empty() && certificate_chain.empty() ? nullptr : &pair, nullptr, nullptr);
  } else {
    credentials = grpc_insecure_credentials_create();
  }
  grpc_channel_args channel_arguments = arguments.c_channel_args();
  grpc_channel* channel =
      grpc_channel_create(options.address.c_str(), credentials, &channel_arguments);
  grpc_channel_credentials_release(credentials);
  if (channel == nullptr) {
    grpc_shutdown();
    if (error) *error = "gRPC could not make a channel to " + options.address;
    return nullptr;
  }
  return std::make_unique<GrpcSender>(std::move(options), channel);
}

#endif

}  // namespace opsight::exporting
