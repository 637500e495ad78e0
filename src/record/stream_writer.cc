#include "record/stream_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "format/chunk_codec.hpp"
#include "record/clock.hpp"

namespace opsight::record {

namespace {

// Counts events (not their extra payload slots) in a run of slots.
uint64_t count_events(const format::Slot* slots, uint32_t count) {
  uint64_t events = 0;
  for (uint32_t i = 0; i < count; i += 1u + format::extra_slots_of(slots[i])) ++events;
  return events;
}

struct LiveChunk {
  ThreadRecord* thread;
  Chunk* chunk;
  uint32_t committed;
};

struct ThreadInfo {
  uint32_t index;
  int64_t tid;
  std::string name;
};

// The threads of finished writers, until they are joined.
class FinishedWriterThreads {
 public:
  ~FinishedWriterThreads() { join_all(); }
  void add(std::thread thread, std::shared_ptr<const std::atomic<bool>> exited) {
    std::lock_guard lock(mutex_);
    threads_.push_back({std::move(thread), std::move(exited)});
  }
  void join_all(bool exited_only = false) {
    std::vector<Finished> joining;
    {
      std::lock_guard lock(mutex_);
      auto to_join = std::partition(threads_.begin(), threads_.end(), [&](const Finished& entry) {
        return exited_only && !entry.exited->load();
      });
      std::move(to_join, threads_.end(), std::back_inserter(joining));
      threads_.erase(to_join, threads_.end());
    }
    for (Finished& entry : joining) entry.thread.join();
  }

 private:
  struct Finished {
    std::thread thread;
    std::shared_ptr<const std::atomic<bool>> exited;
  };
  std::mutex mutex_;
  std::vector<Finished> threads_;
};

FinishedWriterThreads& finished_writer_threads() {
  static FinishedWriterThreads threads;
  return threads;
}

format::ThreadStats stats_of(const ThreadRecord& thread) {
  return {thread.index, 0, thread.events_streamed,
          thread.events_dropped.load(std::memory_order_relaxed),
          thread.slow_path_ticks.load(std::memory_order_relaxed)};
}

}  // namespace

StreamWriter::StreamWriter(std::unique_ptr<ByteSink> sink, const RecordingOptions& options,
                           double event_cost_ns, double ticks_per_second)
    : sink_(std::move(sink)),
      flush_interval_ms_(std::max<uint32_t>(1, options.flush_interval_ms)),
      event_cost_ns_(event_cost_ns),
      final_run_info_(options.final_run_info) {
  format::append_file_header(buffer_);
  auto run_info = options.run_info;
  run_info.emplace_back("clock", clock_name());
  run_info.emplace_back("ticks_per_second", std::to_string(ticks_per_second));
  run_info.emplace_back("event_cost_ns", std::to_string(event_cost_ns));
  format::append_run_info_chunk(buffer_, run_info);
  format::ClockSync sync = take_clock_sync();
  format::append_chunk(buffer_, format::ChunkType::kClockSync,
                       std::string_view(reinterpret_cast<const char*>(&sync), sizeof(sync)));
  write_out(buffer_);
  // Everything the thread reads is passed in: it may first run after finish() returned.
  thread_ = std::thread(&StreamWriter::run, this, shared_, flush_interval_ms_);
}

StreamWriter::~StreamWriter() {
  if (!finished_) finish();
}

void StreamWriter::notify() {
  {
    std::lock_guard lock(shared_->wake_mutex);
    shared_->wake_requested = true;
  }
  shared_->wake.notify_one();
}

void StreamWriter::flush() {
  std::lock_guard drain_lock(shared_->drain_mutex);
  if (!shared_->stop_requested.load()) drain(false);
}

// The writer's thread. `writer` is used only under the drain lock while no stop is
// requested: after finish() it may be gone.
void StreamWriter::run(StreamWriter* writer, const std::shared_ptr<ThreadShared>& shared,
                       uint32_t flush_interval_ms) {
  // A second sync point early on gives crash-truncated files a measured tick rate.
  bool early_sync_done = false;
  while (true) {
    {
      std::unique_lock lock(shared->wake_mutex);
      auto wait = early_sync_done
                      ? std::chrono::milliseconds(flush_interval_ms)
                      : std::chrono::milliseconds(std::min<uint32_t>(5, flush_interval_ms));
      shared->wake.wait_for(
          lock, wait, [&] { return shared->wake_requested || shared->stop_requested.load(); });
      if (shared->stop_requested.load()) break;
      shared->wake_requested = false;
    }
    early_sync_done = true;
    std::lock_guard drain_lock(shared->drain_mutex);
    if (shared->stop_requested.load()) break;
    writer->drain(false);
  }
  shared->exited.store(true);
}

void StreamWriter::write_out(std::string& bytes) {
  index_.add_chunks(bytes, bytes_written_);
  bytes_written_ += bytes.size();
  if (!bytes.empty() && sink_ && !error_ && !sink_->write(bytes)) error_ = sink_->error();
  bytes.clear();
}

void StreamWriter::drain(bool final_round) {
  Registry& reg = registry();
  std::vector<Chunk*> full;
  std::vector<LiveChunk> live;
  std::vector<NameEntry> new_names;
  std::vector<ThreadInfo> thread_infos;
  size_t first_new_name = 0;
  {
    std::lock_guard lock(reg.mutex);
    full.assign(reg.full_chunks.begin(), reg.full_chunks.end());
    reg.full_chunks.clear();
    for (auto& thread : reg.threads) {
      if (thread->current != nullptr)
        live.push_back(
            {thread.get(), thread->current, thread->writer->used.load(std::memory_order_acquire)});
      if (!thread->seen_this_session || thread->name_changed) {
        thread_infos.push_back({thread->index, thread->tid, thread->name});
        thread->seen_this_session = true;
        thread->name_changed = false;
      }
    }
    first_new_name = names_written_;
    new_names.assign(reg.names.begin() + static_cast<ptrdiff_t>(names_written_), reg.names.end());
    names_written_ = reg.names.size();
  }

  std::string& out = buffer_;
  if (!new_names.empty()) {
    size_t header = format::begin_chunk(out);
    for (size_t i = 0; i < new_names.size(); ++i) {
      const NameEntry& entry = new_names[i];
      auto clip = [](const std::string& text) { return std::string_view(text).substr(0, 0xFFFF); };
      format::NameRecordHeader record{static_cast<uint32_t>(first_new_name + i + 1),
                                      entry.line,
                                      static_cast<uint16_t>(clip(entry.name).size()),
                                      static_cast<uint16_t>(clip(entry.category).size()),
                                      static_cast<uint16_t>(clip(entry.file).size()),
                                      0};
      format::append_pod(out, record);
      out.append(clip(entry.name));
      out.append(clip(entry.category));
      out.append(clip(entry.file));
    }
    format::end_chunk(out, header, format::ChunkType::kNames);
  }
  const int64_t pid = getpid();
  for (const ThreadInfo& info : thread_infos) {
    size_t header = format::begin_chunk(out);
    format::ThreadRecordHeader record{info.index, static_cast<uint32_t>(info.name.size()), pid,
                                      info.tid};
    format::append_pod(out, record);
    out.append(info.name);
    format::end_chunk(out, header, format::ChunkType::kThread);
  }

  // Events are not copied: each kEvents chunk is its 32 header bytes (kept in
  // events_pieces_) followed by the committed slots, written straight from the recorder's
  // chunk. The chunks go back to the pool only after the write.
  events_pieces_.clear();
  auto add_events = [&](ThreadRecord* thread, Chunk* chunk, uint32_t until) {
    if (until <= chunk->flushed) return;
    uint32_t count = until - chunk->flushed;
    EventsPiece piece;
    piece.slots = reinterpret_cast<const char*>(chunk->slots + chunk->flushed);
    piece.bytes = size_t{count} * sizeof(format::Slot);
    piece.thread_index = thread->index;
    format::EventsHeader events{thread->index, count, thread->slots_streamed};
    format::ChunkHeader header = format::make_chunk_header(
        format::ChunkType::kEvents, static_cast<uint32_t>(sizeof(events) + piece.bytes),
        format::checksum32(&events, sizeof(events), piece.slots, piece.bytes));
    std::memcpy(piece.header, &header, sizeof(header));
    std::memcpy(piece.header + sizeof(header), &events, sizeof(events));
    events_pieces_.push_back(piece);
    thread->events_streamed += count_events(chunk->slots + chunk->flushed, count);
    thread->slots_streamed += count;
    chunk->flushed = until;
  };
  // A chunk handed over is complete: its committed count no longer moves.
  for (Chunk* chunk : full) add_events(chunk->owner, chunk, chunk->committed);
  for (const LiveChunk& entry : live) add_events(entry.thread, entry.chunk, entry.committed);

  std::string& tail = tail_;
  format::ClockSync sync = take_clock_sync();
  format::append_chunk(tail, format::ChunkType::kClockSync,
                       std::string_view(reinterpret_cast<const char*>(&sync), sizeof(sync)));
  // Outside the registry lock: the callback may take locks of its own.
  if (final_round && final_run_info_) {
    auto entries = final_run_info_();
    if (!entries.empty()) format::append_run_info_chunk(tail, entries);
  }
  {
    std::lock_guard lock(reg.mutex);
    // Forget threads that have exited and have nothing left to stream, keeping their
    // counts for the footer.
    if (!final_round) {
      std::erase_if(reg.threads, [&](const std::unique_ptr<ThreadRecord>& thread) {
        if (thread->alive || thread->current != nullptr) return false;
        if (std::any_of(reg.full_chunks.begin(), reg.full_chunks.end(),
                        [&](Chunk* chunk) { return chunk->owner == thread.get(); }))
          return false;
        // A thread that registered after this round listed the threads (and may have
        // exited already) has no thread record in the file yet: it stays until the next
        // round writes one, so that its track and its drops are never lost.
        if (!thread->seen_this_session) return false;
        reg.exited_thread_stats.push_back(stats_of(*thread));
        reg.exited_events_dropped += thread->events_dropped.load(std::memory_order_relaxed);
        return true;
      });
    }
    // The footer at the end; before it, the same counts whenever drops grew, so that a
    // process killed mid-session leaves a file that still says what it lost. Counted over
    // the threads whose records the file holds (one that registered after this round listed
    // the threads comes in the next round): the counts written only rise and name their
    // threads.
    uint64_t dropped = reg.exited_events_dropped;
    for (auto& thread : reg.threads)
      if (thread->seen_this_session) dropped += thread->events_dropped.load();
    if (final_round || dropped > drops_written_) {
      std::vector<format::ThreadStats> per_thread = reg.exited_thread_stats;
      for (auto& thread : reg.threads)
        if (thread->seen_this_session) per_thread.push_back(stats_of(*thread));
      dropped = 0;  // the same counts, read once more with the entries that carry them
      for (const auto& entry : per_thread) dropped += entry.events_dropped;
      format::SessionStats stats{sync.ticks, 0, 0, event_cost_ns_};
      stats.events_dropped = dropped;
      stats.thread_count = per_thread.size();
      size_t header = format::begin_chunk(tail);
      format::append_pod(tail, stats);
      for (const auto& entry : per_thread) format::append_pod(tail, entry);
      format::end_chunk(tail, header,
                        final_round ? format::ChunkType::kStats : format::ChunkType::kDropsSoFar);
      drops_written_ = dropped;
    }
  }

  // The index learns where each chunk lands; the last round ends the file with it.
  uint64_t position = bytes_written_;
  index_.add_chunks(out, position);
  position += out.size();
  for (const EventsPiece& piece : events_pieces_) {
    index_.add_events(position, piece.thread_index, piece.slots,
                      static_cast<uint32_t>(piece.bytes / sizeof(format::Slot)));
    position += sizeof(piece.header) + piece.bytes;
  }
  index_.add_chunks(tail, position);
  position += tail.size();
  // A part of the index whenever one fills up (the writer holds one part at most), the
  // last part and its trailer at the end.
  if (final_round || index_.part_full()) {
    size_t before = tail.size();
    if (final_round)
      index_.append_index(tail, position);
    else
      index_.append_part(tail, position);
    position += tail.size() - before;
  }
  bytes_written_ = position;

  pieces_.clear();
  pieces_.push_back(out);
  for (const EventsPiece& piece : events_pieces_) {
    pieces_.emplace_back(piece.header, sizeof(piece.header));
    pieces_.emplace_back(piece.slots, piece.bytes);
  }
  pieces_.push_back(tail);
  if (sink_ && !error_ && !sink_->write_pieces(pieces_)) error_ = sink_->error();
  out.clear();
  tail.clear();

  std::lock_guard lock(reg.mutex);
  for (Chunk* chunk : full) reg.return_chunk(chunk);
}

StopResult StreamWriter::finish() {
  finished_ = true;
  {
    std::lock_guard lock(shared_->wake_mutex);
    shared_->stop_requested.store(true);
  }
  shared_->wake.notify_one();
  { std::lock_guard drain_lock(shared_->drain_mutex); }  // a drain in progress ends
  finished_writer_threads().add(
      std::move(thread_), std::shared_ptr<const std::atomic<bool>>(shared_, &shared_->exited));
  drain(true);
  StopResult result;
  result.error = error_;
  result.sink = std::move(sink_);
  return result;
}

void join_finished_writer_threads(bool exited_only) {
  finished_writer_threads().join_all(exited_only);
}

}  // namespace opsight::record
