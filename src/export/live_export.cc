#include "export/live_export.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "export/otlp/otlp_metrics_encoder.hpp"
#include "schema/log_names.hpp"

namespace opsight::exporting {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
uint64_t live_export_unix_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

// Log records read since the last send, as a small trace of instants (times in Unix ns,
// offset 0) with each one's span as the tail saw it open (by instant row).
struct LiveSpanExporter::LogBatch {
  trace::Trace trace;
  std::vector<LogSpanIds> spans;
  std::vector<bool> in_run_trace;  // its span's trace is the run's (zero in the file)

  LogBatch() {
    trace.run.has_unix_offset = true;
    trace.run.unix_offset_ns = 0;
  }
  size_t size() const { return trace.instants.size(); }
};

// Spans that ended since the last send, as a small trace (times in Unix ns, offset 0)
// with the identity of each row.
struct LiveSpanExporter::Batch {
  trace::Trace trace;
  std::vector<SpanIdentity> identities;
  std::vector<std::pair<trace::RowIndex, std::pair<trace::StringId, trace::ArgValue>>> args;

  Batch() {
    trace.run.has_unix_offset = true;
    trace.run.unix_offset_ns = 0;
  }
  size_t size() const { return trace.slices.size(); }
};

LiveSpanExporter::LiveSpanExporter(std::string directory, std::string prefix, std::string suffix,
                                   std::vector<ExportTarget> targets, TraceExportOptions options,
                                   double poll_interval_s)
    : directory_(std::move(directory)),
      prefix_(std::move(prefix)),
      suffix_(std::move(suffix)),
      targets_(std::move(targets)),
      options_(std::move(options)),
      poll_interval_s_(poll_interval_s),
      pending_(std::make_unique<Batch>()),
      pending_logs_(std::make_unique<LogBatch>()) {}

LiveSpanExporter::~LiveSpanExporter() {
  if (thread_.joinable()) stop(1);
}

void LiveSpanExporter::start() {
  started_ = now_seconds();
  options_.exporter.sender_nice = kLiveExportNice;
  metrics_start_unix_ns_ = metrics_sent_unix_ns_ = live_export_unix_now_ns();
  for (const ExportTarget& target : targets_) {
    // An OTLP metrics target's export is bounded by OTEL_METRIC_EXPORT_TIMEOUT.
    BatchExporterOptions exporter = exporter_options_for(target, options_);
    if (target.sink->payload == SinkPayload::kLogs) {
      has_log_targets_ = true;
      // The batch log record processor's queue, in batches of its batch size.
      size_t batch = std::max<size_t>(1, options_.log_batch_records);
      exporter.max_queued_batches =
          std::max<size_t>(1, (options_.log_max_queue_records + batch - 1) / batch);
      if (options_.log_export_timeout_s > 0) exporter.max_elapsed_s = options_.log_export_timeout_s;
    }
    if (target.sink->payload == SinkPayload::kMetrics && target.sink->live_metrics_body)
      has_metrics_targets_ = true;
    exporters_.push_back(std::make_unique<BatchExporter>(make_senders(target, options_), exporter));
  }
  thread_ = std::thread([this] { run(); });
}

void LiveSpanExporter::run() {
  lower_thread_priority(kLiveExportNice);
  double last_send = now_seconds(), last_log_send = last_send, last_metrics_send = last_send;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::duration<double>(poll_interval_s_),
                   [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    poll_files(false);
    // A full batch goes at once; a partial one at least every schedule delay (1 s, or
    // OTEL_BSP_SCHEDULE_DELAY).
    if (pending_->size() > 0 && (pending_->size() >= options_.batch_spans ||
                                 now_seconds() - last_send >= options_.schedule_delay_s)) {
      send(*pending_);
      pending_ = std::make_unique<Batch>();
      last_send = now_seconds();
    }
    // Log records the same way, by OTEL_BLRP_MAX_EXPORT_BATCH_SIZE and _SCHEDULE_DELAY.
    if (pending_logs_->size() > 0 &&
        (pending_logs_->size() >= options_.log_batch_records ||
         now_seconds() - last_log_send >= options_.log_schedule_delay_s)) {
      send_logs();
      last_log_send = now_seconds();
    }
    // Metrics every OTEL_METRIC_EXPORT_INTERVAL.
    if (has_metrics_targets_ &&
        now_seconds() - last_metrics_send >= options_.metric_export_interval_s) {
      send_metrics();
      last_metrics_send = now_seconds();
    }
    lock.lock();
  }
}

void LiveSpanExporter::poll_files(bool final) {
  std::error_code error;
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, error)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(prefix_) && name.ends_with(suffix_))
      found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  for (const std::string& path : found)
    if (std::none_of(tails_.begin(), tails_.end(),
                     [&](const auto& tail) { return tail->path() == path; }))
      tails_.push_back(std::make_unique<io::NativeTail>(path));

  io::TailVisitor visitor;
  io::NativeTail* polled = nullptr;  // the tail the visitor is given events of
  visitor.on_span = [&](const io::EndedSpan& span) {
    if (has_metrics_targets_) {
      metrics_.add_span(span, polled->trace_id());
      if (metrics_pid_ < 0) metrics_pid_ = span.pid;
    }
    Batch& batch = *pending_;
    trace::Trace& trace = batch.trace;
    trace::TrackId track = span.async ? trace.process_async_track(span.pid, span.span_id)
                                      : trace.thread_track(span.pid, span.tid);
    if (!span.async && trace.tracks[track].name == 0 && !span.thread_name.empty())
      trace.tracks[track].name = trace.intern(span.thread_name);
    if (has_log_targets_ && !span.async && !span.thread_name.empty())
      thread_names_.try_emplace({span.pid, span.tid}, span.thread_name);
    trace::RowIndex row =
        trace.slices.add(span.start_unix_ns, span.end_unix_ns - span.start_unix_ns,
                         trace.intern(span.name), trace.intern(span.category), track,
                         span.unfinished ? trace::kSliceUnfinished : 0, span.span_id);
    batch.identities.push_back(
        {span.trace_id, span.parent_span_id, span.trace_flags, span.remote_parent,
         /*model_root=*/span.category == "module" && span.parent_category != "module"});
    for (const io::TailArg& arg : *span.args) {
      trace::ArgValue value = arg.value;
      if (value.type == trace::ArgType::kString) value.string_value = trace.intern(arg.text);
      batch.args.push_back({row, {trace.intern(arg.key), value}});
    }
    if (batch.size() >= options_.batch_spans * 4) {  // a burst: do not hold it all
      send(batch);
      pending_ = std::make_unique<Batch>();
    }
  };
  if (has_metrics_targets_)
    visitor.on_counter_sample = [&](const io::TailCounterSample& sample) {
      metrics_.add_counter_sample(sample);
      if (metrics_pid_ < 0) metrics_pid_ = sample.pid;
    };
  if (has_log_targets_)
    visitor.on_instant = [&](const io::TailInstant& instant) {
      if (instant.category != schema::kLogCategory) return;
      LogBatch& batch = *pending_logs_;
      trace::Trace& trace = batch.trace;
      trace::TrackId track = trace.thread_track(instant.pid, instant.tid);
      if (trace.tracks[track].name == 0)
        if (auto name = thread_names_.find({instant.pid, instant.tid}); name != thread_names_.end())
          trace.tracks[track].name = trace.intern(name->second);
      trace::RowIndex row = trace.instants.add(instant.unix_ns, trace.intern(instant.name),
                                               trace.intern(instant.category), track);
      // The track it was logged on: log.lane's key among its thread's, else its own.
      uint64_t lane = instant.lane;
      for (const io::TailArg& arg : instant.args ? *instant.args : std::vector<io::TailArg>()) {
        if (arg.key == schema::kLogLane && arg.value.type == trace::ArgType::kInt)
          lane = static_cast<uint64_t>(arg.value.int_value);
        trace::ArgValue value = arg.value;
        if (value.type == trace::ArgType::kString) value.string_value = trace.intern(arg.text);
        trace.instant_args.add(row, trace.intern(arg.key), value);
      }
      LogSpanIds ids;
      bool in_run_trace = false;
      if (auto open = polled->open_span(instant.pid, instant.tid, lane)) {
        ids = {open->trace_id, open->span_id, open->trace_flags};
        in_run_trace = open->trace_id == trace::TraceId{};
      }
      batch.spans.push_back(ids);
      batch.in_run_trace.push_back(in_run_trace);
      if (batch.size() >= options_.log_batch_records * 4) send_logs();  // a burst
    };
  for (auto& tail : tails_) {
    polled = tail.get();
    if (!tail->poll(visitor)) continue;
    if (!have_run_trace_id_ && tail->trace_id() != trace::TraceId{}) {
      run_trace_id_ = tail->trace_id();
      have_run_trace_id_ = true;
    }
    if (final || tail->finished()) tail->finish(visitor);
  }
}

void LiveSpanExporter::send(Batch& batch) {
  if (batch.size() == 0) return;
  trace::Trace& trace = batch.trace;
  for (size_t i = 0; i < tails_.size() && !have_run_trace_id_; ++i)  // a burst in the first poll
    if (tails_[i]->trace_id() != trace::TraceId{}) {
      run_trace_id_ = tails_[i]->trace_id();
      have_run_trace_id_ = true;
    }
  trace.run.trace_id = run_trace_id_;
  // Args in row order, and args_begin, as finalize() would leave them (no reordering of
  // rows: the identities are per row).
  std::stable_sort(batch.args.begin(), batch.args.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [row, arg] : batch.args) trace.slice_args.add(row, arg.first, arg.second);
  trace.slices.args_begin.assign(trace.slices.size() + 1, 0);
  for (const auto& [row, arg] : batch.args) ++trace.slices.args_begin[row + 1];
  for (size_t row = 0; row < trace.slices.size(); ++row)
    trace.slices.args_begin[row + 1] += trace.slices.args_begin[row];
  trace.slices.depth.assign(trace.slices.size(), 0);
  trace.slices.parent.assign(trace.slices.size(), trace::kNoRow);
  SpanView view(trace, options_.resource, std::move(batch.identities));
  auto rows = view.rows();
  for (size_t i = 0; i < targets_.size(); ++i) {
    const ExportTarget& target = targets_[i];
    if (target.sink->payload != SinkPayload::kSpans)
      continue;  // metrics: at the end, or live /metrics
    encode_batches(view, rows, target, options_.batch_spans, [&](EncodedBatch encoded) {
      wait_for_room(*exporters_[i], encoded.body.size());
      exporters_[i]->offer(std::move(encoded));  // still full: past stop()'s deadline
    });
  }
}

void LiveSpanExporter::send_logs() {
  std::unique_ptr<LogBatch> batch = std::move(pending_logs_);
  pending_logs_ = std::make_unique<LogBatch>();
  if (batch->size() == 0) return;
  trace::Trace& trace = batch->trace;
  for (size_t i = 0; i < tails_.size() && !have_run_trace_id_; ++i)
    if (tails_[i]->trace_id() != trace::TraceId{}) {
      run_trace_id_ = tails_[i]->trace_id();
      have_run_trace_id_ = true;
    }
  trace.run.trace_id = run_trace_id_;
  for (size_t row = 0; row < batch->spans.size(); ++row)
    if (batch->in_run_trace[row] && batch->spans[row].span_id != 0)
      batch->spans[row].trace_id = run_trace_id_;
  // args_begin as finalize() would leave it (the args were added in row order).
  trace.instants.args_begin.assign(trace.instants.size() + 1, 0);
  for (size_t arg = 0; arg < trace.instant_args.size(); ++arg)
    ++trace.instants.args_begin[trace.instant_args.owner[arg] + 1];
  for (size_t row = 0; row < trace.instants.size(); ++row)
    trace.instants.args_begin[row + 1] += trace.instants.args_begin[row];
  trace.instants.scope.resize(trace.instants.size(), trace::InstantScope::kThread);
  SpanView view(trace, options_.resource);
  LogView logs(view, std::move(batch->spans));
  for (size_t i = 0; i < targets_.size(); ++i) {
    const ExportTarget& target = targets_[i];
    if (target.sink->payload != SinkPayload::kLogs) continue;
    encode_log_batches(logs, target, options_.log_batch_records, [&](EncodedBatch encoded) {
      wait_for_room(*exporters_[i], encoded.body.size());
      exporters_[i]->offer(std::move(encoded));
    });
  }
}

void LiveSpanExporter::send_metrics() {
  if (!has_metrics_targets_) return;
  uint64_t now_ns = live_export_unix_now_ns();
  uint64_t dropped = 0;
  for (const auto& tail : tails_) dropped += tail->events_dropped();
  metrics_.snapshot().events_dropped = dropped;
  // The resource: the first process's, as the span targets give it.
  trace::Trace resource_trace;
  if (metrics_pid_ >= 0) resource_trace.thread_track(metrics_pid_, metrics_pid_);
  SpanView view(resource_trace, options_.resource);
  std::span<const Attribute> resource;
  if (!view.resources().empty()) resource = view.resources().front().attributes;
  std::optional<MetricsSnapshot> delta;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const ExportTarget& target = targets_[i];
    if (target.sink->payload != SinkPayload::kMetrics || !target.sink->live_metrics_body) continue;
    if (target.delta_temporality && !delta)
      delta = metrics_since(metrics_.snapshot(), metrics_sent_);
    uint64_t items = 0;
    std::string body = target.sink->live_metrics_body(
        target.delta_temporality ? *delta : metrics_.snapshot(), resource,
        target.delta_temporality ? metrics_sent_unix_ns_ : metrics_start_unix_ns_, now_ns, target,
        &items);
    wait_for_room(*exporters_[i], body.size());
    exporters_[i]->offer({std::move(body), items});
  }
  metrics_sent_ = metrics_.snapshot();
  metrics_sent_unix_ns_ = now_ns;
}

void LiveSpanExporter::wait_for_room(BatchExporter& exporter, size_t body_bytes) {
  constexpr double kLook = 0.2;  // seconds between looks at stop()'s deadline
  while (!exporter.wait_for_room(body_bytes, kLook))
    if (now_seconds() >= give_up_at_.load(std::memory_order_relaxed)) return;
}

std::vector<TargetReport> LiveSpanExporter::stop(double timeout_s) {
  const double give_up_at = now_seconds() + timeout_s;
  give_up_at_.store(give_up_at, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  poll_files(true);
  send(*pending_);
  pending_ = std::make_unique<Batch>();
  send_logs();
  send_metrics();  // once more at the end: what the last interval added
  std::vector<TargetReport> reports;
  for (size_t i = 0; i < exporters_.size(); ++i) {
    BatchExporter& exporter = *exporters_[i];
    exporter.shutdown(std::max(0.0, give_up_at - now_seconds()));
    reports.push_back({exporter.describe(), exporter.stats(), now_seconds() - started_,
                       i < targets_.size() ? std::string(targets_[i].sink->item) : "span"});
  }
  exporters_.clear();
  return reports;
}

}  // namespace opsight::exporting
