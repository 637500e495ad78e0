#include "export/live_export.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace opsight::exporting {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

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
      pending_(std::make_unique<Batch>()) {}

LiveSpanExporter::~LiveSpanExporter() {
  if (thread_.joinable()) stop(1);
}

void LiveSpanExporter::start() {
  started_ = now_seconds();
  options_.exporter.sender_nice = kLiveExportNice;
  for (const ExportTarget& target : targets_) {
    exporters_.push_back(
        std::make_unique<BatchExporter>(make_senders(target, options_), options_.exporter));
  }
  thread_ = std::thread([this] { run(); });
}

void LiveSpanExporter::run() {
  lower_thread_priority(kLiveExportNice);
  double last_send = now_seconds();
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
  visitor.on_span = [&](const io::EndedSpan& span) {
    Batch& batch = *pending_;
    trace::Trace& trace = batch.trace;
    trace::TrackId track = span.async ? trace.process_async_track(span.pid, span.span_id)
                                      : trace.thread_track(span.pid, span.tid);
    if (!span.async && trace.tracks[track].name == 0 && !span.thread_name.empty())
      trace.tracks[track].name = trace.intern(span.thread_name);
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
  for (auto& tail : tails_) {
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
  std::vector<TargetReport> reports;
  for (auto& exporter : exporters_) {
    exporter->shutdown(std::max(0.0, give_up_at - now_seconds()));
    reports.push_back({exporter->describe(), exporter->stats(), now_seconds() - started_});
  }
  exporters_.clear();
  return reports;
}

}  // namespace opsight::exporting
