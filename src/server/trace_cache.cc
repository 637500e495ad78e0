#include "server/trace_cache.hpp"

#include <algorithm>

namespace opsight::server {

LoadedRun::LoadedRun(trace::Trace trace, std::string label, std::vector<std::string> damage)
    : trace_(std::move(trace)),
      timeline_(trace_),
      label_(std::move(label)),
      damage_(std::move(damage)) {}

const TraceList& LoadedRun::traces() const {
  std::call_once(traces_once_, [this] { traces_ = std::make_unique<const TraceList>(trace_); });
  return *traces_;
}

TraceCache::TraceCache(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

std::shared_ptr<const LoadedRun> TraceCache::find_and_touch(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto found = std::find_if(entries_.begin(), entries_.end(),
                            [&](const auto& entry) { return entry.first == key; });
  if (found == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, found);
  return entries_.front().second;
}

LoadOutcome TraceCache::get(const std::string& key, const std::function<LoadOutcome()>& load) {
  if (auto run = find_and_touch(key)) return {std::move(run), {}, 200};
  std::lock_guard load_lock(load_mutex_);
  if (auto run = find_and_touch(key)) return {std::move(run), {}, 200};  // loaded meanwhile
  LoadOutcome outcome = load();
  if (!outcome.run) return outcome;
  std::lock_guard lock(mutex_);
  entries_.emplace_front(key, outcome.run);
  while (entries_.size() > capacity_) entries_.pop_back();
  return outcome;
}

std::vector<std::string> TraceCache::keys() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> keys;
  for (const auto& entry : entries_) keys.push_back(entry.first);
  return keys;
}

void TraceCache::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  entries_.remove_if([&](const auto& entry) { return entry.first == key; });
}

}  // namespace opsight::server
