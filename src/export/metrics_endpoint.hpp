// A live Prometheus /metrics endpoint over the trace files a run is writing: each scrape
// follows every file matching the pattern in the run's folder (new processes' files too)
// from where the last scrape stopped (io::NativeTail), adds the spans that ended since to
// the histograms (a gen_ai.request span to the GenAI ones too), and answers with
// prometheus_exposition(), in OpenMetrics (with exemplars: each bucket's latest span, by
// its trace and span ids) when the scraper's Accept header asks for it. The traced
// processes do no
// work for it: they only write their files, as they do anyway; the endpoint runs in the
// process that watches them (`opsight run --export prometheus=:9464`).
//
// Binds 127.0.0.1 unless told otherwise; GET /metrics only (anything else: 404/405).
//
// Thread-safety: start() and stop() from one thread; scrapes are served on the server's
// threads, one at a time (a mutex guards the tails and the metrics).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "export/prometheus/prometheus_text.hpp"
#include "io/native/native_tail.hpp"

namespace opsight::exporting {

// The metrics of the spans and counter samples NativeTails report, added as they come:
// what the live /metrics endpoint serves and what a live otlp-metrics target sends
// (LiveSpanExporter). A gen_ai.request span adds to the GenAI histograms with its chunks.
// Thread-safety: none; one owner.
class LiveMetrics {
 public:
  // `file_trace_id`: the trace of the file it came from (NativeTail::trace_id()), the
  // span's when it names none of its own.
  void add_span(const io::EndedSpan& span, const trace::TraceId& file_trace_id);
  void add_counter_sample(const io::TailCounterSample& sample) {
    metrics_.set_counter(sample.name, sample.pid, sample.value, sample.unix_ns);
  }
  MetricsSnapshot& snapshot() { return metrics_; }
  const MetricsSnapshot& snapshot() const { return metrics_; }

 private:
  MetricsSnapshot metrics_;
  // The chunk durations of gen_ai.request spans not ended yet, by their span id (a request
  // is written with its chunks, so this holds a few; bounded).
  std::unordered_map<uint64_t, std::vector<int64_t>> pending_chunks_;
};

class MetricsEndpoint {
 public:
  // Files in `directory` whose names start with `prefix` and end with `suffix`.
  MetricsEndpoint(std::string directory, std::string prefix, std::string suffix);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Starts serving on host:port (port 0: any free one); returns an error message or "".
  std::string start(const std::string& host, int port);
  int port() const { return port_; }
  void stop();

  // Reads what the files have gained and renders the metrics (what a scrape answers).
  std::string scrape() { return scrape_as(ExpositionFormat::kPrometheusText); }
  std::string scrape_as(ExpositionFormat format);

 private:
  struct Server;
  std::string directory_, prefix_, suffix_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<io::NativeTail>> tails_;
  LiveMetrics metrics_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace opsight::exporting
