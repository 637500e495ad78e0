#include "export/metrics_endpoint.hpp"

#include <httplib.h>

#include <algorithm>
#include <filesystem>

namespace opsight::exporting {

namespace {
constexpr size_t kMaxPendingRequests = 100'000;
}  // namespace

struct MetricsEndpoint::Server {
  httplib::Server http;
};

MetricsEndpoint::MetricsEndpoint(std::string directory, std::string prefix, std::string suffix)
    : directory_(std::move(directory)), prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}

MetricsEndpoint::~MetricsEndpoint() { stop(); }

std::string MetricsEndpoint::scrape_as(ExpositionFormat format) {
  std::lock_guard lock(mutex_);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, error)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix_) || !name.ends_with(suffix_)) continue;
    std::string path = entry.path().string();
    bool known = std::any_of(tails_.begin(), tails_.end(),
                             [&](const auto& tail) { return tail->path() == path; });
    if (!known) tails_.push_back(std::make_unique<io::NativeTail>(path));
  }
  io::TailVisitor visitor;
  const io::NativeTail* polled = nullptr;  // the tail whose spans the visitor is given
  visitor.on_span = [&](const io::EndedSpan& span) { metrics_.add_span(span, polled->trace_id()); };
  visitor.on_counter_sample = [&](const io::TailCounterSample& sample) {
    metrics_.add_counter_sample(sample);
  };
  uint64_t dropped = 0;
  for (auto& tail : tails_) {
    polled = tail.get();
    tail->poll(visitor);
    dropped += tail->events_dropped();
  }
  metrics_.snapshot().events_dropped = dropped;
  return prometheus_exposition(metrics_.snapshot(), format);
}

void LiveMetrics::add_span(const io::EndedSpan& span, const trace::TraceId& file_trace_id) {
  // The span's trace as the live span exporter gives it: its own, else the file's (read
  // from the file before its spans).
  SpanOrigin origin{span.trace_id == trace::TraceId{} ? file_trace_id : span.trace_id, span.span_id,
                    span.end_unix_ns};
  metrics_.add_span(span.name, span.duration_ns, origin);
  if (span.name == kGenAiChunkSpan && span.parent_span_id != 0) {
    // Kept until its request ends; a file whose requests never end cannot grow this past
    // a bound (the oldest are then dropped all at once).
    if (pending_chunks_.size() >= kMaxPendingRequests) pending_chunks_.clear();
    pending_chunks_[span.parent_span_id].push_back(span.duration_ns);
    return;
  }
  if (span.name != kGenAiRequestSpan) return;
  auto chunks = pending_chunks_.extract(span.span_id);
  if (span.unfinished || span.args == nullptr) return;
  GenAiRequest request;
  request.duration_seconds = static_cast<double>(span.duration_ns) * 1e-9;
  for (const io::TailArg& arg : *span.args) request.set(arg.key, arg.value, arg.text);
  metrics_.add_gen_ai_request(
      request, chunks ? std::span<const int64_t>(chunks.mapped()) : std::span<const int64_t>(),
      origin);
}

std::string MetricsEndpoint::start(const std::string& host, int port) {
  if (server_) return "already serving";
  server_ = std::make_unique<Server>();
  server_->http.Get(
      "/metrics", [this](const httplib::Request& request, httplib::Response& response) {
        ExpositionFormat format = exposition_format_for(request.get_header_value("Accept"));
        response.set_content(scrape_as(format), std::string(format == ExpositionFormat::kOpenMetrics
                                                                ? kOpenMetricsContentType
                                                                : kPrometheusTextContentType));
      });
  bool bound = port == 0 ? (port_ = server_->http.bind_to_any_port(host)) > 0
                         : server_->http.bind_to_port(host, port);
  if (!bound) {
    server_.reset();
    return "cannot listen on " + host + ":" + std::to_string(port) +
           " (in use, or not an address of this machine)";
  }
  if (port != 0) port_ = port;
  thread_ = std::thread([this] { server_->http.listen_after_bind(); });
  return {};
}

void MetricsEndpoint::stop() {
  if (!server_) return;
  server_->http.stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace opsight::exporting
