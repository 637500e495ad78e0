#include "export/batch_exporter.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace opsight::exporting {

namespace {
using Clock = std::chrono::steady_clock;
Clock::duration seconds_of(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, std::min(seconds, 1e6))));
}
}  // namespace

std::string ExportStats::drop_reasons() const {
  std::string reasons;
  auto add = [&](uint64_t spans, const char* why) {
    if (spans == 0) return;
    if (!reasons.empty()) reasons += ", ";
    reasons += std::to_string(spans) + " " + why;
  };
  add(spans_dropped_failed, "failed");
  add(spans_dropped_shutdown, "unsent when the export's time ran out");
  add(spans_dropped_queue_full, "found the export queue full");
  if (!reasons.empty() && !last_error.empty()) reasons += "; last error: " + last_error;
  return reasons;
}

BatchExporter::BatchExporter(std::unique_ptr<BatchSender> sender, BatchExporterOptions options)
    : BatchExporter(
          [&] {
            std::vector<std::unique_ptr<BatchSender>> senders;
            senders.push_back(std::move(sender));
            return senders;
          }(),
          options) {}

BatchExporter::BatchExporter(std::vector<std::unique_ptr<BatchSender>> senders,
                             BatchExporterOptions options)
    : senders_(std::move(senders)),
      options_(options),
      random_(options.random_seed != 0 ? options.random_seed : std::random_device{}()) {
  for (auto& sender : senders_) threads_.emplace_back([this, &sender] { run(*sender); });
}

BatchExporter::~BatchExporter() { shutdown(5); }

bool BatchExporter::room_for(size_t body_bytes) const {
  return closed_ || (queue_.size() < options_.max_queued_batches &&
                     (queue_.empty() || queued_bytes_ + body_bytes <= options_.max_queued_bytes));
}

bool BatchExporter::wait_for_room(size_t body_bytes, double wait_s) {
  std::unique_lock lock(mutex_);
  return state_changed_.wait_for(lock, seconds_of(wait_s), [&] { return room_for(body_bytes); });
}

bool BatchExporter::offer(EncodedBatch batch, double wait_s) {
  std::unique_lock lock(mutex_);
  stats_.spans_offered += batch.spans;
  auto has_room = [&] { return room_for(batch.body.size()); };
  if (!has_room() && wait_s > 0) state_changed_.wait_for(lock, seconds_of(wait_s), has_room);
  if (closed_ || !has_room()) {
    (closed_ ? stats_.spans_dropped_shutdown : stats_.spans_dropped_queue_full) += batch.spans;
    return false;
  }
  queued_bytes_ += batch.body.size();
  stats_.spans_pending += batch.spans;
  queue_.push_back(std::move(batch));
  work_ready_.notify_one();
  return true;
}

bool BatchExporter::flush(double timeout_s) {
  std::unique_lock lock(mutex_);
  return state_changed_.wait_for(lock, seconds_of(timeout_s),
                                 [&] { return queue_.empty() && in_flight_ == 0; });
}

void BatchExporter::shutdown(double timeout_s) {
  {
    std::unique_lock lock(mutex_);
    if (threads_.empty() || !threads_.front().joinable()) return;
    closed_ = true;
    state_changed_.notify_all();
    state_changed_.wait_for(lock, seconds_of(timeout_s),
                            [&] { return queue_.empty() && in_flight_ == 0; });
    stopping_ = true;
    work_ready_.notify_all();
  }
  // The sender thread gives up between attempts; an HTTP request under way ends by its
  // own timeout.
  for (std::thread& thread : threads_) thread.join();
  std::lock_guard lock(mutex_);
  for (const EncodedBatch& batch : queue_) {
    stats_.spans_dropped_shutdown += batch.spans;
    stats_.spans_pending -= batch.spans;
  }
  queue_.clear();
  queued_bytes_ = 0;
}

ExportStats BatchExporter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

bool BatchExporter::sleep_unless_stopping(double seconds) {
  std::unique_lock lock(mutex_);
  work_ready_.wait_for(lock, seconds_of(seconds), [&] { return stopping_; });
  return !stopping_;
}

void lower_thread_priority(int nice) {
  if (nice <= 0) return;
  static_cast<void>(setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice));
}

void BatchExporter::run(BatchSender& sender) {
  lower_thread_priority(options_.sender_nice);
  for (;;) {
    EncodedBatch batch;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= batch.body.size();
      ++in_flight_;
      state_changed_.notify_all();  // room for a waiting offer
    }
    Clock::time_point first_attempt = Clock::now();
    double backoff = options_.initial_backoff_s;
    enum class Ending { kSent, kFailed, kStopped } ending = Ending::kFailed;
    std::string error;
    size_t wire_bytes = batch.body.size();
    uint64_t rejected = 0;  // spans the server refused from a batch it took (partial success)
    for (;;) {
      SendResult result = sender.send_keyed(batch.key, batch.body);
      if (result.outcome == SendResult::Outcome::kSent) {
        ending = Ending::kSent;
        if (result.wire_bytes != 0) wire_bytes = result.wire_bytes;
        rejected = std::min<uint64_t>(result.rejected_spans, batch.spans);
        if (rejected > 0) error = result.message;
        break;
      }
      error = result.message;
      if (result.outcome == SendResult::Outcome::kFailed) break;
      double elapsed = std::chrono::duration<double>(Clock::now() - first_attempt).count();
      // Full jitter: a random wait in [0, backoff], at least what the server asked for.
      double wait;
      {
        std::lock_guard lock(mutex_);
        wait = std::uniform_real_distribution<double>(0, backoff)(random_);
      }
      if (result.retry_after_s) wait = std::max(wait, *result.retry_after_s);
      if (elapsed + wait > options_.max_elapsed_s) {
        error +=
            " (gave up after " + std::to_string(static_cast<int>(std::lround(elapsed))) + " s)";
        break;
      }
      backoff = std::min(backoff * 2, options_.max_backoff_s);
      {
        std::lock_guard lock(mutex_);
        ++stats_.retries;
      }
      if (!sleep_unless_stopping(wait)) {
        ending = Ending::kStopped;
        break;
      }
    }
    std::lock_guard lock(mutex_);
    stats_.spans_pending -= batch.spans;
    switch (ending) {
      case Ending::kSent:
        stats_.spans_sent += batch.spans - rejected;
        stats_.spans_dropped_failed += rejected;
        if (rejected > 0) stats_.last_error = error;
        stats_.bytes_sent += wire_bytes;
        ++stats_.batches_sent;
        break;
      case Ending::kFailed:
        stats_.spans_dropped_failed += batch.spans;
        stats_.last_error = error;
        break;
      case Ending::kStopped:
        stats_.spans_dropped_shutdown += batch.spans;
        stats_.last_error = error;
        break;
    }
    --in_flight_;
    state_changed_.notify_all();
  }
}

}  // namespace opsight::exporting
