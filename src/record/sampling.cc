#include "record/sampling.hpp"

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "record/registry.hpp"

namespace opsight {
namespace internal {

std::atomic<bool> g_sampling{false};
thread_local constinit bool t_sampled_out __attribute__((tls_model("initial-exec"))) = false;

}  // namespace internal

namespace record::sampling {
namespace {

// The policy of the running session. Written by configure() while no thread records
// (before the session's g_recording goes up), read by every thread after.
struct Policy {
  uint64_t numerator = 1;  // rate = numerator / denominator
  uint64_t denominator = 1;
  std::string root_name;      // empty: every root span is a unit
  std::string root_category;  // "category:NAME" roots: units are spans of that category
  std::string text;           // the policy in words, for the run info
  // Only the front ends' hooks (torch operators) are switched off in a unit sampled out;
  // its spans are recorded like any other.
  bool operators_only = false;
};
Policy g_policy;
// Makes every thread's state stale when a session starts.
std::atomic<uint64_t> g_generation{0};
// Units the policy decided (its counter), units begun and units recorded.
std::atomic<uint64_t> g_policy_counter{0};
std::atomic<uint64_t> g_units_seen{0};
std::atomic<uint64_t> g_units_recorded{0};
std::atomic<void (*)(bool)> g_listener{nullptr};

// One track's unit: spans open outside any unit (recorded), whether a unit is open, and
// if recorded how many of its spans are open (its root included).
struct TrackUnit {
  uint32_t open_outside = 0;
  uint32_t open_inside = 0;
  bool in_unit = false;
  bool sampled_out = false;
  bool operators_off = false;  // operators_only: the unit runs with the hooks off
  bool idle() const { return open_outside == 0 && !in_unit; }
};

struct ThreadSampling {
  uint64_t generation = 0;
  uint64_t key = 0;  // the track the thread is on
  // decide_next_sampling_unit: the next begin of the thread, on whichever track, opens a
  // unit so decided (0 out, 1 recorded) unless it is inside one; -1: none pending.
  int8_t next_decision = -1;
  TrackUnit current;
  std::unordered_map<uint64_t, TrackUnit> parked;  // the thread's other tracks
  std::unordered_map<uint32_t, bool> is_root;      // by name id, for named roots
  std::unordered_map<uint32_t, bool> is_operator;  // by name id, for operators_only
};
thread_local constinit ThreadSampling* t_sampling = nullptr;
struct ThreadSamplingOwner {
  std::unique_ptr<ThreadSampling> state;
};
thread_local ThreadSamplingOwner t_sampling_owner;

void set_thread_sampled_out(bool sampled_out) {
  if (internal::t_sampled_out == sampled_out) return;
  internal::t_sampled_out = sampled_out;
  if (auto* listener = g_listener.load(std::memory_order_acquire)) listener(sampled_out);
}

// With operators_only: the listener hears the thread enter and leave a unit whose
// operators are off; the thread itself records on (t_sampled_out stays false).
thread_local constinit bool t_operators_off = false;
void set_thread_operators_off(bool off) {
  if (t_operators_off == off) return;
  t_operators_off = off;
  if (auto* listener = g_listener.load(std::memory_order_acquire)) listener(off);
}

// The calling thread's state in the running session (a stale one is reset).
ThreadSampling& thread_state() {
  if (t_sampling == nullptr) [[unlikely]] {
    t_sampling_owner.state = std::make_unique<ThreadSampling>();
    t_sampling = t_sampling_owner.state.get();
  }
  ThreadSampling& state = *t_sampling;
  uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (state.generation != generation) [[unlikely]] {
    state = ThreadSampling{};
    state.generation = generation;
    set_thread_sampled_out(false);
    set_thread_operators_off(false);
  }
  return state;
}

bool is_root_name(ThreadSampling& state, uint32_t name_id) {
  if (name_id == 0) return false;
  auto [found, inserted] = state.is_root.try_emplace(name_id, false);
  if (inserted) {
    Registry& reg = registry();
    std::lock_guard lock(reg.mutex);
    if (name_id <= reg.names.size()) {
      const NameEntry& entry = reg.names[name_id - 1];
      found->second = g_policy.root_name.empty() ? entry.category == g_policy.root_category
                                                 : entry.name == g_policy.root_name;
    }
  }
  return found->second;
}

// Whether a name is an operator's (the category trace::kCategoryOperator, which the torch
// observer gives operators, or "torchscript"): with operators_only, a unit whose root is an
// operator is left out whole, as without it (its spans are operators).
bool is_operator_name(ThreadSampling& state, uint32_t name_id) {
  if (name_id == 0) return false;
  auto [found, inserted] = state.is_operator.try_emplace(name_id, false);
  if (inserted) {
    Registry& reg = registry();
    std::lock_guard lock(reg.mutex);
    if (name_id <= reg.names.size()) {
      const std::string& category = reg.names[name_id - 1].category;
      found->second = category == "operator" || category == "torchscript";
    }
  }
  return found->second;
}

uint64_t ceil_div(uint64_t value, uint64_t divisor) { return (value + divisor - 1) / divisor; }

bool decide(int8_t given) {
  bool recorded;
  if (given >= 0) {
    recorded = given == 1;
  } else {
    uint64_t k = g_policy_counter.fetch_add(1, std::memory_order_relaxed);
    recorded = ceil_div((k + 1) * g_policy.numerator, g_policy.denominator) >
               ceil_div(k * g_policy.numerator, g_policy.denominator);
  }
  g_units_seen.fetch_add(1, std::memory_order_relaxed);
  if (recorded) g_units_recorded.fetch_add(1, std::memory_order_relaxed);
  return recorded;
}

}  // namespace

void configure(double rate, const std::string& root, bool operators_only) {
  g_policy_counter.store(0);
  g_units_seen.store(0);
  g_units_recorded.store(0);
  if (!(rate < 1.0)) {
    internal::g_sampling.store(false);
    g_generation.fetch_add(1);
    return;
  }
  Policy policy;
  double clamped = std::max(rate, 1e-9);
  double one_in = 1.0 / clamped;
  if (!(rate > 0.0)) {  // always off: ceil((k+1)·0) > ceil(k·0) never holds
    policy.numerator = 0;
    policy.denominator = 1;
  } else if (std::abs(one_in - std::round(one_in)) < 1e-9) {  // "1 in N": exact
    policy.numerator = 1;
    policy.denominator = static_cast<uint64_t>(std::llround(one_in));
  } else {
    policy.denominator = 1'000'000'000;
    policy.numerator = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(clamped * 1e9)));
  }
  constexpr std::string_view kCategoryPrefix = "category:";
  if (root.starts_with(kCategoryPrefix))
    policy.root_category = root.substr(kCategoryPrefix.size());
  else
    policy.root_name = root;
  std::string share = policy.numerator == 0   ? std::string("none (always off)")
                      : policy.numerator == 1 ? "1 in " + std::to_string(policy.denominator)
                                              : std::to_string(clamped);
  policy.operators_only = operators_only;
  policy.text =
      (operators_only ? "operators in " : "") + share + " of " +
      (root.empty()                    ? std::string("root spans")
       : !policy.root_category.empty() ? "spans of category '" + policy.root_category + "'"
                                       : "'" + root + "' spans");
  g_policy = std::move(policy);
  // Published by the generation (release): a thread reads the policy only after it has
  // acquired the generation in thread_state().
  g_generation.fetch_add(1, std::memory_order_release);
  internal::g_sampling.store(true);
}

void clear() { internal::g_sampling.store(false); }

std::vector<std::pair<std::string, std::string>> run_info() {
  if (!internal::g_sampling.load()) return {};
  return {{"sampling", g_policy.text},
          {"sampling_units", std::to_string(g_units_seen.load())},
          {"sampling_units_recorded", std::to_string(g_units_recorded.load())}};
}

void on_switch_track(uint64_t key) {
  if (!internal::g_sampling.load(std::memory_order_relaxed)) return;
  ThreadSampling& state = thread_state();
  if (key == state.key) return;
  if (!state.current.idle()) state.parked[state.key] = state.current;
  TrackUnit next;
  if (auto found = state.parked.find(key); found != state.parked.end()) {
    next = found->second;
    state.parked.erase(found);
  }
  state.current = next;
  state.key = key;
  set_thread_sampled_out(next.in_unit && next.sampled_out);
  set_thread_operators_off(next.in_unit && next.operators_off);
}

}  // namespace record::sampling

namespace internal {

namespace {
// A recorded unit's last span ended.
void close_unit(record::sampling::TrackUnit& unit) {
  unit.in_unit = false;
  if (unit.operators_off) {
    unit.operators_off = false;
    record::sampling::set_thread_operators_off(false);
  }
}
}  // namespace

Admission admit_begin(uint32_t name_id) {
  using namespace record::sampling;
  ThreadSampling& state = thread_state();
  TrackUnit& unit = state.current;
  int8_t given = state.next_decision;
  state.next_decision = -1;  // for this begin only, taken or not
  if (unit.in_unit) {
    if (unit.sampled_out) return Admission::kSkip;
    ++unit.open_inside;
    return Admission::kWrite;
  }
  bool root = given >= 0 || (g_policy.root_name.empty() && g_policy.root_category.empty()
                                 ? unit.open_outside == 0
                                 : is_root_name(state, name_id));
  if (!root) {
    ++unit.open_outside;
    return Admission::kWrite;
  }
  unit.in_unit = true;
  if (!decide(given)) {
    // Recorded, with the operators off until it closes (a unit that is an operator is
    // left out whole).
    if (g_policy.operators_only && !is_operator_name(state, name_id)) {
      unit.operators_off = true;
      set_thread_operators_off(true);
      unit.open_inside = 1;
      return Admission::kWrite;
    }
    unit.sampled_out = true;
    set_thread_sampled_out(true);
    return Admission::kSampledOutRoot;
  }
  unit.open_inside = 1;
  return Admission::kWrite;
}

void undo_admit() {
  using namespace record::sampling;
  TrackUnit& unit = thread_state().current;
  if (unit.in_unit && !unit.sampled_out) {
    if (unit.open_inside > 0 && --unit.open_inside == 0) close_unit(unit);
  } else if (unit.open_outside > 0) {
    --unit.open_outside;
  }
}

bool admit_end() {
  using namespace record::sampling;
  TrackUnit& unit = thread_state().current;
  if (unit.in_unit) {
    if (unit.sampled_out) {  // the sampled-out root's end: nothing inside called end()
      unit.in_unit = false;
      unit.sampled_out = false;
      set_thread_sampled_out(false);
      return false;
    }
    if (unit.open_inside > 0 && --unit.open_inside == 0) close_unit(unit);
    return true;
  }
  if (unit.open_outside > 0) --unit.open_outside;
  return true;
}

bool begin_sampled(uint32_t name_id) {
  switch (admit_begin(name_id)) {
    case Admission::kSkip:
      return false;
    case Admission::kSampledOutRoot:
      return true;
    case Admission::kWrite:
      break;
  }
  if (write_begin(name_id)) return true;
  undo_admit();
  return false;
}

void end_sampled() {
  if (admit_end()) write_end();
}

}  // namespace internal

void decide_next_sampling_unit(bool recorded) {
  if (!internal::g_sampling.load(std::memory_order_relaxed)) return;
  record::sampling::thread_state().next_decision = recorded ? 1 : 0;
}

SamplingUnit current_sampling_unit() {
  if (!internal::g_sampling.load(std::memory_order_relaxed)) return SamplingUnit::kNone;
  const record::sampling::TrackUnit& unit = record::sampling::thread_state().current;
  if (!unit.in_unit) return SamplingUnit::kNone;
  return unit.sampled_out ? SamplingUnit::kSampledOut : SamplingUnit::kRecorded;
}

void set_sampling_listener(void (*listener)(bool sampled_out)) {
  record::sampling::g_listener.store(listener, std::memory_order_release);
}

}  // namespace opsight
