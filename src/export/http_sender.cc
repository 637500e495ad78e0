#include "export/http_sender.hpp"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>
#if OPSIGHT_WITH_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>

#include "export/otlp/otlp_encoder.hpp"
#include "export/span_view.hpp"  // percent_decode

namespace opsight::exporting {

std::string hide_user_info(std::string_view text) {
  std::string shown(text);
  size_t scheme_end = shown.find("://");
  if (scheme_end == std::string::npos) return shown;
  size_t authority_end = shown.find_first_of("/?#", scheme_end + 3);
  size_t at = shown.rfind('@', authority_end);
  if (at != std::string::npos && at > scheme_end)
    shown.replace(scheme_end + 3, at - scheme_end - 3, "***");
  return shown;
}

std::string user_agent_for(std::string_view opsight_version) {
  return "opsight/" +
         (opsight_version.empty() ? std::string("unknown") : std::string(opsight_version)) +
         " (OTLP/HTTP; cpp-httplib)";
}

std::string gzip_compress_zlib(std::string_view body, int level) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&stream, std::clamp(level, 0, 9), Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return {};
  std::string out(deflateBound(&stream, static_cast<uLong>(body.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  stream.avail_in = static_cast<uInt>(body.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int result = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return result == Z_STREAM_END ? out : std::string();
}

#if OPSIGHT_WITH_LIBDEFLATE

namespace {

// libdeflate's levels 0..12; zlib's 0..9 mean the same below 10.
constexpr int kGzipLibdeflateLevels = 13;

// A thread's libdeflate compressors, one per level, made at its first use and freed when the
// thread ends: making one allocates and clears its hash tables (hundreds of KB at level 6),
// a cost per batch otherwise.
struct GzipLibdeflateCompressors {
  std::array<libdeflate_compressor*, kGzipLibdeflateLevels> by_level{};
  GzipLibdeflateCompressors() = default;
  GzipLibdeflateCompressors(const GzipLibdeflateCompressors&) = delete;
  GzipLibdeflateCompressors& operator=(const GzipLibdeflateCompressors&) = delete;
  ~GzipLibdeflateCompressors() {
    for (libdeflate_compressor* compressor : by_level)
      if (compressor != nullptr) libdeflate_free_compressor(compressor);
  }
  libdeflate_compressor* at(int level) {
    libdeflate_compressor*& compressor = by_level[static_cast<size_t>(level)];
    if (compressor == nullptr) compressor = libdeflate_alloc_compressor(level);
    return compressor;
  }
};

}  // namespace

std::string gzip_compress_libdeflate(std::string_view body, int level) {
  thread_local GzipLibdeflateCompressors compressors;
  libdeflate_compressor* compressor =
      compressors.at(std::clamp(level, 0, kGzipLibdeflateLevels - 1));
  if (compressor == nullptr) return {};
  std::string out(libdeflate_gzip_compress_bound(compressor, body.size()), '\0');
  size_t written =
      libdeflate_gzip_compress(compressor, body.data(), body.size(), out.data(), out.size());
  out.resize(written);  // 0: it did not fit (cannot happen within the bound): empty, a failure
  return out;
}

bool gzip_uses_libdeflate() { return true; }

std::string gzip_compress(std::string_view body, int level) {
  return gzip_compress_libdeflate(body, level);
}

#else

std::string gzip_compress_libdeflate(std::string_view, int) { return {}; }

bool gzip_uses_libdeflate() { return false; }

std::string gzip_compress(std::string_view body, int level) {
  return gzip_compress_zlib(body, level);
}

#endif

std::string_view http_status_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return {};
  }
}

std::string Endpoint::origin() const {
  bool default_port = (scheme == "http" && port == 80) || (scheme == "https" && port == 443);
  return scheme + "://" + host + (default_port ? "" : ":" + std::to_string(port));
}

std::optional<Endpoint> parse_endpoint(std::string_view url, std::string_view default_path,
                                       std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Endpoint> {
    if (error) *error = "'" + hide_user_info(url) + "': " + why;
    return std::nullopt;
  };
  Endpoint endpoint;
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return fail("not a URL (write http://host:port/path)");
  endpoint.scheme = std::string(url.substr(0, scheme_end));
  if (endpoint.scheme != "http" && endpoint.scheme != "https")
    return fail("scheme '" + endpoint.scheme + "' is not http or https");
  std::string_view rest = url.substr(scheme_end + 3);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  endpoint.path = slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash));
  if (endpoint.path.empty() || endpoint.path == "/") endpoint.path = std::string(default_path);
  if (endpoint.path.empty()) endpoint.path = "/";
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    endpoint.user_info = percent_decode(authority.substr(0, at));
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority;
  endpoint.port = endpoint.scheme == "https" ? 443 : 80;
  if (!authority.empty() && authority.front() == '[') {  // [ipv6]:port
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return fail("junk after ']'");
    if (!authority.empty())
      authority.remove_prefix(1);
    else
      authority = {};
    if (!authority.empty()) {
      int port = 0;
      auto [end, code] =
          std::from_chars(authority.data(), authority.data() + authority.size(), port);
      if (code != std::errc() || end != authority.data() + authority.size() || port <= 0 ||
          port > 65535)
        return fail("port '" + std::string(authority) + "' is not 1-65535");
      endpoint.port = port;
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    std::string_view port_text = authority.substr(colon + 1);
    int port = 0;
    auto [end, code] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (code != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
        port > 65535)
      return fail("port '" + std::string(port_text) + "' is not 1-65535");
    endpoint.port = port;
  }
  if (host.empty()) return fail("no host");
  endpoint.host = std::string(host);
  return endpoint;
}

bool answers_only_http2(const Endpoint& endpoint, double timeout_s) {
  if (endpoint.scheme != "http") return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints,
                  &addresses) != 0)
    return false;
  bool http2 = false;
  timeval bound{static_cast<time_t>(timeout_s),
                static_cast<suseconds_t>(
                    (timeout_s - static_cast<double>(static_cast<time_t>(timeout_s))) * 1e6)};
  for (addrinfo* address = addresses; address != nullptr && !http2; address = address->ai_next) {
    int fd = socket(address->ai_family, address->ai_socktype, address->ai_protocol);
    if (fd < 0) continue;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
    if (connect(fd, address->ai_addr, address->ai_addrlen) == 0) {
      std::string request = "POST " + endpoint.path + " HTTP/1.1\r\nHost: " + endpoint.host +
                            "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        // An HTTP/2 frame header: 3 bytes of length, the type (4: SETTINGS), flags, stream 0.
        unsigned char frame[9];
        size_t got = 0;
        while (got < sizeof(frame)) {
          ssize_t n = recv(fd, frame + got, sizeof(frame) - got, 0);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
        http2 = got == sizeof(frame) && frame[3] == 0x04 && frame[5] == 0 && frame[6] == 0 &&
                frame[7] == 0 && frame[8] == 0;
      }
    }
    close(fd);
  }
  freeaddrinfo(addresses);
  return http2;
}

struct HttpSender::Client {
  Client(const std::string& origin, const std::string& certificate, const std::string& key)
      : client(origin, certificate, key) {}
  httplib::Client client;
};

HttpSender::HttpSender(Endpoint endpoint, HttpSenderOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)) {
  client_ = std::make_unique<Client>(endpoint_.origin(), options_.client_certificate_path,
                                     options_.client_key_path);
  if (!options_.ca_certificate_path.empty())
    client_->client.set_ca_cert_path(options_.ca_certificate_path);
  if (!endpoint_.user_info.empty()) {
    size_t colon = endpoint_.user_info.find(':');
    client_->client.set_basic_auth(
        endpoint_.user_info.substr(0, colon),
        colon == std::string::npos ? std::string() : endpoint_.user_info.substr(colon + 1));
  }
  auto seconds = static_cast<time_t>(options_.timeout_s);
  auto microseconds =
      static_cast<time_t>((options_.timeout_s - static_cast<double>(seconds)) * 1e6);
  client_->client.set_connection_timeout(seconds, microseconds);
  client_->client.set_read_timeout(seconds, microseconds);
  client_->client.set_write_timeout(seconds, microseconds);
  client_->client.set_keep_alive(true);
  // The headers and the body go in separate writes: without TCP_NODELAY a small body (a
  // gzip-compressed batch) waits for the server's delayed ACK, about 40 ms a request.
  client_->client.set_tcp_nodelay(true);
}

HttpSender::~HttpSender() = default;

std::string HttpSender::describe() const {
  return options_.label.empty() ? endpoint_.url() : options_.label + " " + endpoint_.url();
}

SendResult HttpSender::send(std::string_view body) {
  httplib::Headers headers;
  for (const auto& [key, value] : options_.headers) headers.emplace(key, value);
  if (!options_.user_agent.empty()) headers.emplace("User-Agent", options_.user_agent);
  std::string compressed;
  if (options_.gzip) {
    // Here, on the sender's thread: the encoding thread never waits for zlib.
    compressed = gzip_compress(body);
    if (!compressed.empty()) {  // else (zlib failed) the body goes as it is
      body = compressed;
      headers.emplace("Content-Encoding", "gzip");
    }
  }
  auto started = std::chrono::steady_clock::now();
  httplib::Result response = options_.method == "PUT"
                                 ? client_->client.Put(endpoint_.path, headers, body.data(),
                                                       body.size(), options_.content_type)
                                 : client_->client.Post(endpoint_.path, headers, body.data(),
                                                        body.size(), options_.content_type);
  SendResult result;
  if (!response) {
    httplib::Error error = response.error();
    bool tls = error == httplib::Error::SSLConnection || error == httplib::Error::SSLLoadingCerts ||
               error == httplib::Error::SSLServerVerification;
    // A refused TLS handshake or certificate is a configuration to mend, not a moment to
    // wait out.
    result.outcome = tls ? SendResult::Outcome::kFailed : SendResult::Outcome::kRetryable;
    result.message = (tls ? "TLS with " : "no answer from ") + endpoint_.origin() + " (" +
                     httplib::to_string(error) + " error" +
                     (tls ? "; permanent: not retried)" : ")");
    // An answer that is not HTTP/1, or a connection closed while the body was still being
    // written (an HTTP/2-only server closes once it has read a request line that is not
    // its preface, so which of the two the client sees is a matter of timing): see whether
    // the port speaks HTTP/2 only, twice at most, within what is left of the request's
    // timeout (an HTTP/2-only server closes at once; a read that took the whole timeout is a
    // server that does not answer, and the request ends at its timeout).
    double left_s =
        options_.timeout_s -
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if ((error == httplib::Error::Read || error == httplib::Error::Write) && http2_checks_ < 2 &&
        left_s > 0.01) {
      ++http2_checks_;
      if (answers_only_http2(endpoint_, std::min(left_s, 5.0))) {
        result.outcome = SendResult::Outcome::kFailed;
        result.message = endpoint_.origin() +
                         " answers in HTTP/2 only, as an OTLP/gRPC port does (OTLP/HTTP is "
                         "usually port 4318, gRPC 4317); permanent: not retried";
      }
    }
    return result;
  }
  result.status = response->status;
  if (response->status >= 200 && response->status < 300) {
    result.outcome = SendResult::Outcome::kSent;
    result.wire_bytes = body.size();
    if (options_.read_otlp_partial_success && !response->body.empty()) {
      PartialSuccess partial = decode_partial_success(response->body);
      if (partial.rejected_spans > 0) {
        result.rejected_spans = partial.rejected_spans;
        result.message = endpoint_.url() + " rejected " + std::to_string(partial.rejected_spans) +
                         " " + options_.item + (partial.rejected_spans == 1 ? "" : "s") +
                         " of the batch (OTLP partial success)" +
                         (partial.error_message.empty() ? "" : ": " + partial.error_message);
      }
    }
    return result;
  }
  bool retryable = response->status == 429 || response->status == 502 || response->status == 503 ||
                   response->status == 504;
  result.outcome = retryable ? SendResult::Outcome::kRetryable : SendResult::Outcome::kFailed;
  std::string snippet = response->body.substr(0, 300);
  std::string_view phrase = http_status_phrase(response->status);
  result.message = "HTTP " + std::to_string(response->status) +
                   (phrase.empty() ? "" : " " + std::string(phrase)) + " from " + endpoint_.url() +
                   (retryable ? "" : " (permanent: not retried)") +
                   (snippet.empty() ? "" : ": " + snippet);
  if (response->has_header("Retry-After")) {
    std::string value = response->get_header_value("Retry-After");
    char* end = nullptr;
    double seconds = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && seconds >= 0) result.retry_after_s = seconds;
  }
  return result;
}

}  // namespace opsight::exporting
