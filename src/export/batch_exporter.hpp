// The one pipeline every exporter sends through: a bounded queue of encoded batches and a
// sender thread that posts them, retrying what is worth retrying with exponential backoff
// and full jitter (the server's Retry-After when longer), and giving up on a batch after
// `max_elapsed_s`. It never blocks the thread that offers (unless asked to wait, as
// `opsight export` does for a stored run), never throws, and counts every span exactly
// once: offered = sent + dropped (queue full + failed + unsent at shutdown) + pending.
//
// Thread-safety: offer(), flush(), stats() may be called from any thread; shutdown() and
// the destructor from one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "export/http_sender.hpp"

namespace opsight::exporting {

struct BatchExporterOptions {
  size_t max_queued_bytes = size_t{64} << 20;  // bodies waiting, in bytes
  size_t max_queued_batches = 256;
  double initial_backoff_s = 0.1;
  double max_backoff_s = 5;
  double max_elapsed_s = 60;  // per batch: then it is dropped and counted
  uint64_t random_seed = 0;   // 0: seeded from std::random_device
  // The sender threads' nice value (0: the process's own; 19: only time the process's
  // other threads leave): live export yields to the traced program's threads.
  int sender_nice = 0;
};

// Lowers the calling thread's scheduling priority to `nice` (Linux: a thread's own nice
// value); best effort, a failure changes nothing.
void lower_thread_priority(int nice);

struct ExportStats {
  uint64_t spans_offered = 0;
  uint64_t spans_sent = 0;
  uint64_t spans_dropped_queue_full = 0;
  uint64_t spans_dropped_failed = 0;    // permanent errors, or retried past max_elapsed_s
  uint64_t spans_dropped_shutdown = 0;  // still queued or retrying when shutdown ran out
  uint64_t spans_pending = 0;           // queued or being sent now
  uint64_t batches_sent = 0;
  uint64_t retries = 0;
  uint64_t bytes_sent = 0;  // as sent: gzip-compressed bodies count compressed
  std::string last_error;
  uint64_t spans_dropped() const {
    return spans_dropped_queue_full + spans_dropped_failed + spans_dropped_shutdown;
  }
  // Why spans were dropped, every cause with its count, then the last error: "300 failed,
  // 212 unsent when the export's time ran out; last error: HTTP 401 Unauthorized ...".
  // Empty when nothing was dropped.
  std::string drop_reasons() const;
};

struct EncodedBatch {
  std::string body;
  uint64_t spans = 0;
  std::string key = {};  // the message key, for senders that have one (Kafka: the trace id)
};

class BatchExporter {
 public:
  BatchExporter(std::unique_ptr<BatchSender> sender, BatchExporterOptions options = {});
  // Several senders: one thread each, so that as many requests are in flight (batches may
  // then arrive out of order; each is still retried and counted as above).
  BatchExporter(std::vector<std::unique_ptr<BatchSender>> senders,
                BatchExporterOptions options = {});
  ~BatchExporter();  // shutdown(5)
  BatchExporter(const BatchExporter&) = delete;
  BatchExporter& operator=(const BatchExporter&) = delete;

  // Queues `batch`; when the queue is full, waits up to `wait_s` for room, then drops it
  // (counted) and returns false. After shutdown, drops and returns false.
  bool offer(EncodedBatch batch, double wait_s = 0);
  // Waits up to `wait_s` until a batch of `body_bytes` would be queued without a drop;
  // returns whether it would (true after shutdown too: offer() then counts it).
  bool wait_for_room(size_t body_bytes, double wait_s);
  // Waits until everything offered so far is sent or dropped, at most `timeout_s`;
  // returns whether it got there.
  bool flush(double timeout_s);
  // Flushes for at most `timeout_s`, then stops the sender thread: what is still queued or
  // retrying is dropped and counted. Idempotent.
  void shutdown(double timeout_s);

  ExportStats stats() const;
  std::string describe() const { return senders_.front()->describe(); }

 private:
  void run(BatchSender& sender);
  // Waits up to `seconds` unless shutdown is stopping the sender; false if it is.
  bool sleep_unless_stopping(double seconds);
  bool room_for(size_t body_bytes) const;  // mutex_ held

  std::vector<std::unique_ptr<BatchSender>> senders_;
  BatchExporterOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;     // the sender thread waits on it
  std::condition_variable state_changed_;  // offer (room), flush (drained) wait on it
  std::deque<EncodedBatch> queue_;
  size_t queued_bytes_ = 0;
  size_t in_flight_ = 0;   // batches being sent now
  bool stopping_ = false;  // shutdown's deadline passed: abandon retries
  bool closed_ = false;    // no more offers
  ExportStats stats_;
  std::mt19937_64 random_;
  std::vector<std::thread> threads_;
};

}  // namespace opsight::exporting
