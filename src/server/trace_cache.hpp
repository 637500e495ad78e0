// The traces the UI server has loaded, at most a fixed number at once (least recently used
// goes first), so that a server left open over a store of a hundred runs keeps the memory
// of a few. A loaded run is the trace, its timeline index (timeline_index.hpp), its list of
// traces (trace_list.hpp, built on first ask) and what the pages show about where it came
// from; it is shared (shared_ptr) so that a request still
// reading an evicted run keeps it alive until it is done.
//
// Thread-safety: every method may be called from any thread. Loads are serialized (one at
// a time: two requests for the same cold run load it once); hits never wait for a load.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/timeline_index.hpp"
#include "server/trace_list.hpp"
#include "trace/trace.hpp"

namespace opsight::server {

// A trace with its timeline index. Built once, then only read.
class LoadedRun {
 public:
  LoadedRun(trace::Trace trace, std::string label, std::vector<std::string> damage);
  LoadedRun(const LoadedRun&) = delete;
  LoadedRun& operator=(const LoadedRun&) = delete;

  const trace::Trace& trace() const { return trace_; }
  const TimelineIndex& timeline() const { return timeline_; }
  const std::string& label() const { return label_; }  // "run 12 (nightly)", "x.opsight"
  const std::vector<std::string>& damage() const { return damage_; }
  // The run's traces (trace_list.hpp): built on the first ask (one pass over the run),
  // then kept with the run; a request asking meanwhile waits for that one build.
  const TraceList& traces() const;

 private:
  trace::Trace trace_;
  TimelineIndex timeline_;  // refers to trace_, declared after it
  std::string label_;
  std::vector<std::string> damage_;
  mutable std::once_flag traces_once_;
  mutable std::unique_ptr<const TraceList> traces_;  // refers to trace_
};

// What a load gives: the run, or a message and the HTTP status that says whose fault it is.
struct LoadOutcome {
  std::shared_ptr<const LoadedRun> run;
  std::string error;
  int status = 200;
};

class TraceCache {
 public:
  // capacity >= 1: how many runs stay loaded.
  explicit TraceCache(size_t capacity);

  // The run cached under `key`, else load()'s result, cached when it holds a run.
  LoadOutcome get(const std::string& key, const std::function<LoadOutcome()>& load);

  // Keys, most recently used first.
  std::vector<std::string> keys() const;
  size_t capacity() const { return capacity_; }
  void forget(const std::string& key);

 private:
  std::shared_ptr<const LoadedRun> find_and_touch(const std::string& key);

  size_t capacity_;
  mutable std::mutex mutex_;  // guards entries_
  std::mutex load_mutex_;     // one load at a time
  std::list<std::pair<std::string, std::shared_ptr<const LoadedRun>>> entries_;  // MRU first
};

}  // namespace opsight::server
