// Live span export: follows the trace files a run's processes are writing
// (io::NativeTail) and sends each span to the export targets soon after it ends, while
// the program runs, through the same BatchExporter (bounded queue, retries, counted drops)
// as `opsight export`. The traced processes do no export work: they write their files as
// they do anyway; this runs in the process that watches them (`opsight run --export-live`).
//
// A full queue holds the reading back instead of dropping: the spans wait in the files,
// which the processes write anyway, and the exporter catches up once the server takes
// them again (a server down for minutes costs lag, not spans). Only stop() gives up: what
// is still unsent when its timeout runs out is dropped and counted.
//
// Its threads (the polling and the senders) run at nice kLiveExportNice: on a machine
// short of cores the traced program's threads go first, and the export catches up in the
// time they leave (the files hold what it has not read yet).
//
// Spans carry the ids the whole-file reader gives them (so the stored run and the
// back-end agree), their parents' ids, the remote trace of a joined request, and their
// arguments. Spans not joined to a remote trace are sent in the trace of the first file
// seen (the run's first process, as the merged run is). Async spans get ids of their own
// (the file reader derives theirs only once the whole file is read).
//
// The same tails feed the other live targets. A metrics target that sends while the program
// runs (its sink's live_metrics_body: otlp-metrics) gets the run's metrics so far
// (LiveMetrics: span-duration histograms, counters, rate totals) every
// metric_export_interval_s (OTEL_METRIC_EXPORT_INTERVAL, 60 s) and once more at stop(),
// cumulative from the exporter's start, or with delta temporality what was added since the
// export before. A log target (otlp-logs, loki-logs) gets the program's log records as the
// files show them, with the span open on their track when they were logged
// (NativeTail::open_span), in batches of log_batch_records sent at least every
// log_schedule_delay_s (OTEL_BLRP_*); its queue holds log_max_queue_records.
//
// Thread-safety: start() and stop() from one thread; the polling runs on its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "export/export.hpp"
#include "export/metrics_endpoint.hpp"
#include "io/native/native_tail.hpp"

namespace opsight::exporting {

inline constexpr int kLiveExportNice = 19;

class LiveSpanExporter {
 public:
  // Follows the files of `directory` named prefix*suffix.
  LiveSpanExporter(std::string directory, std::string prefix, std::string suffix,
                   std::vector<ExportTarget> targets, TraceExportOptions options,
                   double poll_interval_s = 0.2);
  ~LiveSpanExporter();
  LiveSpanExporter(const LiveSpanExporter&) = delete;
  LiveSpanExporter& operator=(const LiveSpanExporter&) = delete;

  void start();
  // Reads what is left (spans still open in a finished file are sent unfinished), sends
  // it, and waits up to `timeout_s` for the targets; one report per target.
  std::vector<TargetReport> stop(double timeout_s);

 private:
  struct Batch;
  struct LogBatch;
  void run();
  void poll_files(bool final);
  void send(Batch& batch);
  void send_logs();
  // Sends the metrics so far to the live metrics targets (a data point count each).
  void send_metrics();
  // Waits (the polling thread only) until `exporter` has room for `body_bytes`, or the
  // deadline stop() set has passed.
  void wait_for_room(BatchExporter& exporter, size_t body_bytes);

  std::string directory_, prefix_, suffix_;
  std::vector<ExportTarget> targets_;
  TraceExportOptions options_;
  double poll_interval_s_;
  std::vector<std::unique_ptr<io::NativeTail>> tails_;
  std::vector<std::unique_ptr<BatchExporter>> exporters_;
  trace::TraceId run_trace_id_;
  bool have_run_trace_id_ = false;
  std::unique_ptr<Batch> pending_;
  std::unique_ptr<LogBatch> pending_logs_;
  bool has_log_targets_ = false, has_metrics_targets_ = false;
  LiveMetrics metrics_;
  MetricsSnapshot metrics_sent_;  // as of the last metrics export (for delta temporality)
  uint64_t metrics_start_unix_ns_ = 0, metrics_sent_unix_ns_ = 0;
  int64_t metrics_pid_ = -1;
  std::map<std::pair<int64_t, int64_t>, std::string>
      thread_names_;  // by (pid, tid), for logs  // the process whose resource the metrics carry
                      // (the first seen)
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<double> give_up_at_{std::numeric_limits<double>::infinity()};  // set by stop()
  std::thread thread_;
  double started_ = 0;
};

}  // namespace opsight::exporting
