// The streaming merged tree and breakdown (issue 28): what `opsight report --merged-tree`
// and `--breakdown` compute from the whole trace, collected from a native file's spans as
// the one slot decoder's streaming consumer (io::NativeTail) reads them, begin and end.
//
// A span's code path is known at its begin: the consumer keeps, beside the tail, the stack
// of the open spans of each lane (keyed by the tail's lane serial) and of each async id
// (keyed by process and id), each entry holding its span's node. A node holds its count,
// its self sum, its first start and a compact duration column (analyze::DurationColumn: 4
// bytes a span under 4.29 s); when the pass ends the nodes are laid out by
// AggregateTree::from_paths, as AggregateTree::build lays out the whole trace's, so the
// tree is the same. A breakdown keeps, per open inference, its phases' sums; when an
// inference ends they go into per-phase columns (4 bytes a value and 4 for the inference's
// number), its duration and uncovered time into two more, and analyze::finish_breakdown,
// compute_breakdown's end, makes the same breakdown from them.
//
// The whole-file reader numbers its rows in file order of the begins, async spans after
// every other span in (process, id, start, file order) order; the first row of a path or
// of a phase decides ties (a node's category, siblings that start together, the order of
// the phases), so the consumer keeps that rank of each node's and each phase's first span.
//
// Thread-safety: one owner, the thread that polls the tail.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyze/aggregate_tree.hpp"
#include "analyze/breakdown.hpp"
#include "analyze/duration_column.hpp"
#include "io/native/native_tail.hpp"
#include "trace/trace.hpp"

namespace opsight::report::internal {

// Where the whole-file reader puts a span's row (see above): comparable.
struct StreamRowRank {
  uint8_t async = 0;
  int64_t pid = 0;
  uint64_t id = 0;
  int64_t start_ns = 0;
  uint64_t begin = 0;  // the begin's number in file order
  auto operator<=>(const StreamRowRank&) const = default;
};

class StreamingPathViews {
 public:
  // `context` interns the names (the streaming summary's, which renders the views).
  // `breakdown_span`: empty for no breakdown.
  StreamingPathViews(trace::Trace& context, bool merged_tree, std::string breakdown_span,
                     analyze::PhaseGrouping grouping);

  // A span's begin and end, with its name and category as strings of the context.
  void on_begin(const io::BegunSpan& span, trace::StringId name, trace::StringId category);
  void on_span(const io::EndedSpan& span, trace::StringId name, trace::StringId category);

  // After the pass. take_tree() releases each node's column once it is summarized;
  // `largest_copy_bytes` is raised to the largest node's copy (8 bytes a value).
  analyze::AggregateTree take_tree(uint64_t* largest_copy_bytes);
  analyze::Breakdown take_breakdown(uint64_t* largest_copy_bytes);
  // A span of a GPU category ended: the whole-file breakdown leaves out inferences on GPU
  // tracks and adds a host/device split, which need the whole trace.
  bool saw_gpu_work() const { return saw_gpu_work_; }
  // The columns' bytes (their peak: before take_*).
  uint64_t column_bytes() const;
  // Ends whose begin the consumer did not see (0 unless the tail and it disagree).
  uint64_t unmatched_ends() const { return unmatched_ends_; }

 private:
  static constexpr uint32_t kNone = ~uint32_t{0};
  struct OpenEntry {
    uint32_t node = analyze::kNoNode;
    uint32_t inference = kNone;  // its slot in open_inferences_ when it is an inference
    uint64_t begin = 0;
    bool named = false;   // carries the breakdown's span name
    bool inside = false;  // an ancestor carries it
  };
  using Stack = std::vector<OpenEntry>;
  struct AsyncKey {
    int64_t pid;
    uint64_t id;
    bool operator==(const AsyncKey&) const = default;
  };
  struct AsyncKeyHash {
    size_t operator()(const AsyncKey& key) const {
      return static_cast<size_t>(
          trace::mix64(static_cast<uint64_t>(key.pid) * 0x9E3779B97F4A7C15u ^ key.id));
    }
  };
  struct PhaseKey {  // where a phase first appears: the inferences in time order, then rows
    int64_t inference_start_ns = 0;
    StreamRowRank inference;
    StreamRowRank child;
    auto operator<=>(const PhaseKey&) const = default;
  };
  struct InferencePhase {
    trace::StringId key = 0;
    int64_t sum = 0;
    uint64_t children = 0;
    StreamRowRank first_child;
  };
  struct OpenInference {
    int64_t start_ns = 0;
    StreamRowRank rank;
    int64_t covered = 0;
    std::vector<InferencePhase> phases;
  };
  struct PhaseState {
    trace::StringId key = 0;
    analyze::DurationColumn values;
    analyze::DurationColumn inferences;  // the inference number of each value
    uint64_t present_in = 0;
    uint64_t slices = 0;
    int64_t total_ns = 0;
    PhaseKey first;
  };

  Stack& stack_of(bool async, int64_t pid, uint64_t async_id, uint64_t lane_serial);
  uint32_t node_of(uint32_t parent_node, trace::StringId name, bool* created);
  void release_stack(bool async, int64_t pid, uint64_t async_id, uint64_t lane, uint64_t serial);
  bool is_breakdown_name(trace::StringId name);
  bool is_gpu_category(trace::StringId category);
  void end_inference(OpenInference& inference, int64_t duration, int64_t end_ns);

  trace::Trace& context_;
  bool merged_tree_;
  std::string breakdown_span_;
  analyze::PhaseGrouping grouping_;
  uint64_t next_begin_ = 0;
  uint64_t unmatched_ends_ = 0;
  bool saw_gpu_work_ = false;
  std::unordered_map<uint64_t, Stack> lanes_;  // by the tail's lane serial
  std::unordered_map<AsyncKey, Stack, AsyncKeyHash> async_;
  // The last lane's stack (a chunk holds one thread's events, so most events hit it).
  uint64_t cached_serial_ = 0;
  Stack* cached_stack_ = nullptr;

  // The merged tree: nodes in order of creation, by (parent node, name).
  std::unordered_map<uint64_t, uint32_t> node_of_path_;
  // Per node, and for the roots, the two children met last: most begins find their node
  // there without hashing.
  std::vector<std::array<uint32_t, 2>> recent_children_;  // by node
  std::array<uint32_t, 2> recent_roots_ = {analyze::kNoNode, analyze::kNoNode};
  std::vector<analyze::AggregatePath> nodes_;
  std::vector<StreamRowRank> node_rank_;  // of each node's first row
  std::vector<analyze::DurationColumn> node_durations_;

  // The breakdown.
  std::vector<int8_t> breakdown_name_;  // by StringId: -1 unknown, 0 no, 1 yes
  std::vector<int8_t> gpu_category_;    // likewise
  std::vector<OpenInference> open_inferences_;
  std::vector<uint32_t> free_inferences_;
  std::unordered_map<trace::StringId, uint32_t> phase_of_key_;
  std::vector<PhaseState> phases_;
  analyze::DurationColumn totals_, uncovered_;  // per inference, by its number
  uint64_t inference_count_ = 0;
  int64_t first_start_ns_ = 0, last_end_ns_ = 0;
};

}  // namespace opsight::report::internal
