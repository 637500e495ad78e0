// Sends one encoded batch to an HTTP endpoint (cpp-httplib from Debian: HTTP/1.1 with
// keep-alive, TLS through OpenSSL for https:// URLs) and sorts the answer the way the
// OTLP specification sorts it: 2xx sent; 429, 502, 503, 504, a timeout or a refused
// connection worth retrying (with the server's Retry-After when it gives one); any other
// status a permanent failure, named ("HTTP 401 Unauthorized ... (permanent: not
// retried)"), whose body is kept for the message. A TLS handshake the server or the
// certificate check refuses is permanent too: retrying cannot mend a configuration; so
// is a plain-HTTP port that answers only HTTP/2 (a gRPC port), found when an answer
// cannot be read.
// Bodies may go gzip-compressed (OTEL_EXPORTER_OTLP_COMPRESSION=gzip; libdeflate or zlib), and
// every request names opsight in its User-Agent.
//
// Thread-safety: one HttpSender per thread (BatchExporter's sender thread owns its own).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opsight::exporting {

// An endpoint parsed from a URL: "http://127.0.0.1:4318/v1/traces".
struct Endpoint {
  std::string scheme = "http";  // http or https
  std::string host;
  int port = 0;
  std::string path = "/";
  // "user:password" from the URL (http://user:password@host/...), percent-decoded: sent as
  // HTTP basic authentication, never shown (origin() and url() leave it out).
  std::string user_info;
  std::string origin() const;  // "http://host:port"
  std::string url() const { return origin() + path; }
};

// `text` (a URL, or a target spec holding one) with the user information of its URL
// ("user:password@") written as "***@", for messages.
std::string hide_user_info(std::string_view text);

// Parses `url`; a URL without a path gets `default_path`. nullopt with `error` set when
// the URL is not http(s)://host[:port][/path].
std::optional<Endpoint> parse_endpoint(std::string_view url, std::string_view default_path,
                                       std::string* error);

struct SendResult {
  enum class Outcome { kSent, kRetryable, kFailed };
  Outcome outcome = Outcome::kFailed;
  int status = 0;                       // HTTP status, 0 when no answer came
  std::string message;                  // what went wrong, for the report
  std::optional<double> retry_after_s;  // the server's Retry-After, in seconds
  size_t wire_bytes = 0;  // the body's size as sent (gzip-compressed); 0: as it was offered
  // kSent, but the server took only part of the batch (an OTLP partial success): how many
  // spans it rejected; `message` says why.
  uint64_t rejected_spans = 0;
};

// What BatchExporter sends through: an HTTP endpoint, a Kafka producer (kafka_sender.hpp),
// or a test's script of answers.
class BatchSender {
 public:
  virtual ~BatchSender() = default;
  virtual SendResult send(std::string_view body) = 0;
  // A batch with a message key (Kafka's: the trace id). Senders without keys ignore it.
  virtual SendResult send_keyed(std::string_view key, std::string_view body) {
    (void)key;
    return send(body);
  }
  virtual std::string describe() const = 0;  // "otlp http://127.0.0.1:4318/v1/traces"
};

// "opsight/<version> (OTLP/HTTP; cpp-httplib)": what every request says it comes from, as
// the OTLP exporter specification asks of an exporter ("unknown" for an empty version).
std::string user_agent_for(std::string_view opsight_version);

struct HttpSenderOptions {
  std::string method = "POST";  // POST, or PUT (Pushgateway's replace)
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;
  double timeout_s = 10;
  std::string label;  // "otlp", "zipkin", ...: prefixes describe()
  bool gzip = false;  // the body gzip-compressed, with Content-Encoding: gzip
  // A 2xx answer's body is read as an OTLP protobuf Export*ServiceResponse: a partial
  // success's rejected items are counted as dropped, with the collector's reason.
  bool read_otlp_partial_success = false;
  std::string item = "span";  // what a partial success rejected ("log record" for OTLP logs)
  // https:// only: PEM files of the CA that signs the server's certificate (empty: the
  // system's CAs), and of this client's own certificate and key (mutual TLS).
  std::string ca_certificate_path, client_certificate_path, client_key_path;
  std::string user_agent = user_agent_for("");
};

// `body` as a gzip member (RFC 1952) at `level` (1 fastest .. 9 smallest; libdeflate also
// has 10..12), through libdeflate where the build found it (Debian's libdeflate-dev:
// whole-buffer compression, 2-3x zlib's speed at the same level for about the same size),
// else zlib. The senders use level 1 (export_benchmark.cc, docs/export.md *Speed*). Empty
// if compression fails. Thread-safe (libdeflate: a compressor per thread and level, kept).
std::string gzip_compress(std::string_view body, int level = 1);
// The two implementations, for the benchmark's comparison; gzip_compress_libdeflate is
// empty where the build has no libdeflate (gzip_uses_libdeflate() false).
std::string gzip_compress_zlib(std::string_view body, int level = 1);
std::string gzip_compress_libdeflate(std::string_view body, int level = 1);
bool gzip_uses_libdeflate();
// The reason phrase of an HTTP status ("Unauthorized" for 401); empty when unknown.
std::string_view http_status_phrase(int status);

// Whether the plain-TCP endpoint answers an HTTP/1.1 request with an HTTP/2 frame (a
// SETTINGS frame, as a gRPC server does: an OTLP/gRPC port given where OTLP/HTTP was
// meant). One connection, bounded by `timeout_s`; false when it cannot tell.
bool answers_only_http2(const Endpoint& endpoint, double timeout_s);

class HttpSender : public BatchSender {
 public:
  HttpSender(Endpoint endpoint, HttpSenderOptions options);
  ~HttpSender() override;
  SendResult send(std::string_view body) override;
  std::string describe() const override;

 private:
  struct Client;
  Endpoint endpoint_;
  HttpSenderOptions options_;
  std::unique_ptr<Client> client_;
  int http2_checks_ = 0;  // answers_only_http2 asked on an unreadable or cut-off answer
};

}  // namespace opsight::exporting
