// The streaming summary (streaming_summary.hpp): NativeTail's spans folded into per-name
// accumulators, and a small trace::Trace (`context_`) holding what the rendering reads
// besides the statistics: the interned names and categories, the run's fields and the
// per-thread tracks with their overhead (computed as the whole-file reader computes them),
// and, for the text form's "metrics per span" table, one slice per span that carries
// "metric.*" arguments (with those arguments only).
#include "report/streaming_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analyze/distribution.hpp"
#include "analyze/duration_column.hpp"
#include "analyze/operators.hpp"
#include "analyze/statistics.hpp"
#include "io/io.hpp"
#include "io/native/native_tail.hpp"
#include "report/report_internal.hpp"
#include "report/streaming_views.hpp"
#include "schema/metric_names.hpp"

namespace opsight::report {

namespace {

using trace::StringId;

// The whole-file reader's bound on an overhead figure (native_reader.cc).
constexpr int64_t kMaxOverheadNs = int64_t{1} << 61;
int64_t overhead_ns(double value) {
  if (!(value > 0)) return 0;
  if (value >= static_cast<double>(kMaxOverheadNs)) return kMaxOverheadNs;
  return static_cast<int64_t>(std::llround(value));
}

class SummaryAccumulator {
 public:
  void on_span(const io::EndedSpan& span) {
    const int64_t duration = span.end_unix_ns - span.start_unix_ns;
    const FileName& file_name = file_name_of(span.name_id, span.name, span.category);
    const StringId name = file_name.name;
    ++slices_;
    extend(span.start_unix_ns, span.end_unix_ns);
    if (paths_) paths_->on_span(span, name, file_name.category);
    if (operators_) fold_operator(span, name, file_name.category, duration);
    if (!per_name_) return;
    NameState& state = state_of(name);
    state.durations.append(duration);
    ++state.count;
    analyze::add_saturating(state.self_ns, duration);
    const StringId category = file_name.category;
    if (state.count == 1) {
      state.first_category = category;
    } else if (category != state.first_category || !state.category_counts.empty()) {
      if (state.category_counts.empty())
        state.category_counts[state.first_category] = state.count - 1;
      ++state.category_counts[category];
    }
    if (span.has_local_parent) {
      const StringId parent = span.parent_name_id != 0 &&
                                      span.parent_name_id < file_names_.size() &&
                                      file_names_[span.parent_name_id].known
                                  ? file_names_[span.parent_name_id].name
                                  : intern_cached(span.parent_name);
      analyze::add_saturating(state_of(parent).self_ns, -duration);
    }
    if (span.args != nullptr && !span.args->empty()) keep_metrics(span, name, category, duration);
  }

  // A span's begin: only the merged tree and the breakdown need them.
  void on_begin(const io::BegunSpan& span) {
    const FileName& file_name = file_name_of(span.name_id, span.name, span.category);
    paths_->on_begin(span, file_name.name, file_name.category);
  }

  // Whether the per-name figures (--summary, --table) are wanted; the spans are still
  // counted for the views' headers.
  void keep_per_name(bool keep) { per_name_ = keep; }

  // Collects the merged tree and/or the breakdown too.
  internal::StreamingPathViews& collect_paths(bool merged_tree, const std::string& breakdown_span,
                                              analyze::PhaseGrouping grouping) {
    paths_.emplace(context_, merged_tree, breakdown_span, grouping);
    return *paths_;
  }

  // Counts the operators of these categories too (the --ops view).
  void count_operators(const std::vector<std::string>& categories) {
    operators_ = true;
    operator_categories_ = categories;
    for (const std::string& category : categories)
      operator_category_ids_.push_back(context_.intern(category));
  }

  // The operator table, as compute_operator_table builds it from the whole trace.
  analyze::OperatorTable take_operator_table() {
    analyze::OperatorTable table;
    table.categories = operator_categories_;
    table.operator_slices = operator_slices_;
    table.total_self_ns = operator_total_self_;
    std::vector<int64_t> durations;
    for (auto& entry : operator_rows_) {
      OperatorState& state = entry.second;
      analyze::OperatorRow row;
      row.name = std::string(context_.str(entry.first.second));
      row.category = std::string(context_.str(entry.first.first));
      durations.clear();
      state.durations.copy_to(durations);
      state.durations.clear();
      row.duration = analyze::summarize_distribution(durations);
      row.self_ns = state.self_ns;
      const int64_t category_total = operator_self_by_category_[entry.first.first];
      row.share = category_total > 0
                      ? static_cast<double>(row.self_ns) / static_cast<double>(category_total)
                      : 0.0;
      table.rows.push_back(std::move(row));
    }
    std::sort(table.rows.begin(), table.rows.end(),
              [](const analyze::OperatorRow& a, const analyze::OperatorRow& b) {
                if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
                if (a.name != b.name) return a.name < b.name;
                return a.category < b.category;
              });
    return table;
  }

  void extend(int64_t first, int64_t last) {
    first_ns_ = std::min(first_ns_, first);
    last_ns_ = std::max(last_ns_, last);
  }

  // Fills the context's run and tracks from what the tail read, as the whole-file reader
  // does (native_reader.cc: read_run_info, fit_clock, finish_threads).
  void describe_run(const io::NativeTail& tail, const io::FileClock& clock) {
    trace::RunInfo& run = context_.run;
    run.source_format = "opsight";
    double ticks_per_second = 0;
    for (const auto& entry : tail.run_info()) {
      const std::string& key = entry.first;
      const std::string& value = entry.second;
      if (key == "command_line")
        run.command_line = value;
      else if (key == "host")
        run.host = value;
      else if (key == "opsight_version")
        run.opsight_version = value;
      else if (key == "clock")
        run.clock = value;
      else if (key == "pid")
        run.pid = std::strtoll(value.c_str(), nullptr, 10);
      else if (key.starts_with("process.") || key.starts_with("thread.") ||
               key.starts_with("async_track.") || key.starts_with("counter_series.") ||
               key == "parent_pid" || key == "process_name" || key == "event_cost_ns")
        continue;
      else if (key == "ticks_per_second")
        ticks_per_second = std::strtod(value.c_str(), nullptr);
      else if (key == "trace_id" && value.size() == 32)
        run.trace_id = tail.trace_id();
      else if (key == "source_format")
        converted_from_ = value;
      else
        run.extra.emplace_back(key, value);
    }
    if (!converted_from_.empty()) run.extra.emplace_back("converted_from", converted_from_);
    double slope = 1.0;
    if (clock.found) {
      const format::ClockSync& first = clock.first;
      const format::ClockSync& last = clock.last;
      if (last.ticks > first.ticks && last.monotonic_ns > first.monotonic_ns)
        slope = (static_cast<double>(last.monotonic_ns) - static_cast<double>(first.monotonic_ns)) /
                static_cast<double>(last.ticks - first.ticks);
      else
        slope = ticks_per_second > 0 ? 1e9 / ticks_per_second : 1.0;
      run.start_unix_ns = first.realtime_ns;
      run.has_unix_offset =
          !__builtin_sub_overflow(first.realtime_ns, first.monotonic_ns, &run.unix_offset_ns);
      if (!run.has_unix_offset) run.unix_offset_ns = 0;
      if (__builtin_sub_overflow(last.monotonic_ns, first.monotonic_ns, &run.traced_ns))
        run.traced_ns = 0;
    }
    // Without the syncs' span, the traced time is the events' span (traced_time_ns).
    if (run.traced_ns <= 0) {
      const internal::TraceExtent bounds = extent();
      run.traced_ns = bounds.last_ns - bounds.first_ns;
    }
    run.events_dropped = tail.events_dropped();
    run.complete = tail.finished();
    // Per thread with a track: its events times their cost; the stats add drops and
    // slow-path time (the reader's finish_threads).
    const double cost = tail.event_cost_ns();
    std::unordered_map<uint32_t, trace::TrackId> track_of_thread;
    for (const io::TailThread& thread : tail.threads()) {
      if (!thread.has_track) continue;
      trace::TrackId track = context_.thread_track(thread.pid, thread.tid);
      track_of_thread[thread.thread_index] = track;
      context_.tracks[track].events_recorded = thread.events;
      context_.tracks[track].overhead_ns = overhead_ns(static_cast<double>(thread.events) * cost);
    }
    for (const format::ThreadStats& stats : tail.thread_stats()) {
      auto found = track_of_thread.find(stats.thread_index);
      if (found == track_of_thread.end()) continue;
      trace::Track& track = context_.tracks[found->second];
      track.events_dropped = stats.events_dropped;
      track.overhead_ns = overhead_ns(static_cast<double>(track.events_recorded) * cost +
                                      static_cast<double>(stats.slow_path_ticks) * slope);
    }
    int64_t total = 0;
    for (const trace::Track& track : context_.tracks)
      total = std::min(total + track.overhead_ns, kMaxOverheadNs);
    run.overhead_ns = total;
  }

  // The rows, in StringId order (compute_name_statistics's), each name's column released
  // once its distribution is taken.
  std::vector<analyze::NameStatistics> take_rows(const io::NativeTail& tail,
                                                 StreamedReport& report) {
    for (const NameState& state : names_) report.column_bytes += state.durations.bytes();
    const std::vector<uint64_t> rank = category_ranks(tail);
    const double traced = static_cast<double>(analyze::traced_time_ns(context_));
    std::vector<analyze::NameStatistics> rows;
    std::vector<int64_t> durations;
    for (size_t name = 0; name < names_.size(); ++name) {
      NameState& state = names_[name];
      if (state.count == 0) continue;
      durations.clear();
      state.durations.copy_to(durations);
      report.largest_name_copy_bytes =
          std::max<uint64_t>(report.largest_name_copy_bytes, durations.capacity() * 8);
      state.durations.clear();
      analyze::NameStatistics entry;
      static_cast<analyze::Distribution&>(entry) = analyze::summarize_distribution(durations);
      entry.name = static_cast<StringId>(name);
      entry.category = state.first_category;
      if (!state.category_counts.empty()) {  // the most common; ties: the reader's first
        uint64_t best = 0;
        for (const auto& count : state.category_counts) {
          const bool better =
              count.second > best ||
              (count.second == best && rank_of(rank, count.first) < rank_of(rank, entry.category));
          if (better) {
            best = count.second;
            entry.category = count.first;
          }
        }
      }
      entry.self_ns = std::max<int64_t>(state.self_ns, 0);
      entry.share_of_traced = traced > 0.0 ? static_cast<double>(entry.total_ns) / traced : 0.0;
      rows.push_back(entry);
      std::vector<int64_t>().swap(durations);
    }
    return rows;
  }

  internal::TraceExtent extent() const {
    if (first_ns_ > last_ns_) return internal::TraceExtent{slices_, 0, 0};
    return internal::TraceExtent{slices_, first_ns_, last_ns_};
  }

  trace::Trace& context() { return context_; }
  uint64_t slices() const { return slices_; }

 private:
  struct NameState {
    analyze::DurationColumn durations;
    uint64_t count = 0;
    int64_t self_ns = 0;
    StringId first_category = 0;
    std::unordered_map<StringId, uint64_t> category_counts;  // only once a second one shows
  };

  NameState& state_of(StringId name) {
    if (name >= names_.size()) names_.resize(size_t{name} + 1);
    return names_[name];
  }

  // A span's name and category as the context's strings, by the file's name id (a vector
  // lookup: comparing the texts was 5% of the time); a name given inline (id 0) by text.
  struct FileName {
    StringId name = 0;
    StringId category = 0;
    bool known = false;
  };
  const FileName& file_name_of(uint32_t id, std::string_view name, std::string_view category) {
    if (id == 0) {
      inline_name_ = {intern_cached(name), category.empty() ? 0 : intern_cached(category), true};
      return inline_name_;
    }
    if (id >= file_names_.size()) file_names_.resize(size_t{id} + 1);
    FileName& entry = file_names_[id];
    if (!entry.known)
      entry = {intern_cached(name), category.empty() ? 0 : intern_cached(category), true};
    return entry;
  }

  // Interning costs a hash of the text; most spans carry one of a few names, so a small
  // cache keyed by the text's address answers first (checked against the text itself).
  StringId intern_cached(std::string_view text) {
    const auto address = reinterpret_cast<uintptr_t>(text.data());
    CacheEntry& entry = cache_[(address >> 4 ^ text.size()) % cache_.size()];
    if (entry.valid && entry.text == text) return entry.id;
    entry.id = context_.intern(text);
    entry.text.assign(text);
    entry.valid = true;
    return entry.id;
  }

  // The reader interns the names records' strings (name, then category) in file order
  // before any event: a category's rank there breaks ties between equally common ones.
  std::vector<uint64_t> category_ranks(const io::NativeTail& tail) const {
    std::vector<uint64_t> rank(context_.strings.size(), std::numeric_limits<uint64_t>::max());
    uint64_t next = 1;
    if (!rank.empty()) rank[0] = 0;  // the empty string is id 0 in both
    for (const auto& record : tail.names()) {
      for (std::string_view text : {record.first, record.second}) {
        if (auto id = context_.strings.find(text);
            id && *id < rank.size() && rank[*id] == std::numeric_limits<uint64_t>::max())
          rank[*id] = next++;
      }
    }
    return rank;
  }
  static uint64_t rank_of(const std::vector<uint64_t>& rank, StringId id) {
    return id < rank.size() ? rank[id] : std::numeric_limits<uint64_t>::max();
  }

  // A span with "metric.*" arguments: a slice of the context with those arguments, for the
  // text form's "metrics per span" table (analyze::SliceMetricIndex reads them there).
  void keep_metrics(const io::EndedSpan& span, StringId name, StringId category, int64_t duration) {
    bool any = false;
    for (const io::TailArg& arg : *span.args)
      any = any || arg.key.starts_with(schema::kMetricArgPrefix);
    if (!any) return;
    trace::TrackId track = context_.thread_track(span.pid, span.tid);
    trace::RowIndex row = context_.slices.add(span.start_unix_ns, duration, name, category, track);
    for (const io::TailArg& arg : *span.args) {
      if (!arg.key.starts_with(schema::kMetricArgPrefix)) continue;
      trace::ArgValue value = arg.value;
      if (value.type == trace::ArgType::kString) value.string_value = context_.intern(arg.text);
      context_.slice_args.add(row, context_.intern(arg.key), value);
    }
  }

  // An operator's self time is its duration minus those of the nearest operators below it,
  // through spans that are not operators (compute_operator_table's rule): each ended span
  // passes up to its parent either its own duration (an operator) or what its operators
  // below passed to it, so that only open spans hold a sum.
  void fold_operator(const io::EndedSpan& span, StringId name, StringId category,
                     int64_t duration) {
    int64_t below = 0;
    if (auto found = operator_time_below_.find(span.span_id); found != operator_time_below_.end()) {
      below = found->second;
      operator_time_below_.erase(found);
    }
    const bool is_operator = std::find(operator_category_ids_.begin(), operator_category_ids_.end(),
                                       category) != operator_category_ids_.end();
    int64_t passed_up = below;
    if (is_operator) {
      StringId key = name;
      if (span.args != nullptr)
        for (const io::TailArg& arg : *span.args)
          if (arg.key == "op_name" && arg.value.type == trace::ArgType::kString) {
            key = context_.intern(arg.text);
            break;
          }
      int64_t self = duration;
      analyze::add_saturating(self, -below);
      self = std::max<int64_t>(self, 0);
      OperatorState& state = operator_rows_[{category, key}];
      state.durations.append(duration);
      analyze::add_saturating(state.self_ns, self);
      analyze::add_saturating(operator_total_self_, self);
      analyze::add_saturating(operator_self_by_category_[category], self);
      ++operator_slices_;
      passed_up = duration;
    }
    if (span.has_local_parent && !span.remote_parent && passed_up != 0)
      analyze::add_saturating(operator_time_below_[span.parent_span_id], passed_up);
  }

  struct OperatorState {
    analyze::DurationColumn durations;
    int64_t self_ns = 0;
  };
  bool per_name_ = true;
  std::optional<internal::StreamingPathViews> paths_;
  bool operators_ = false;
  std::vector<std::string> operator_categories_;
  std::vector<StringId> operator_category_ids_;
  std::map<std::pair<StringId, StringId>, OperatorState> operator_rows_;  // (category, key)
  std::unordered_map<StringId, int64_t> operator_self_by_category_;
  std::unordered_map<uint64_t, int64_t> operator_time_below_;  // by open span id
  uint64_t operator_slices_ = 0;
  int64_t operator_total_self_ = 0;

  struct CacheEntry {
    // A copy of its own: a view of the context's string would dangle when the string
    // table grows (AddressSanitizer caught that).
    std::string text;
    StringId id = 0;
    bool valid = false;
  };

  trace::Trace context_;
  std::vector<NameState> names_;  // by StringId of the context
  std::vector<CacheEntry> cache_ = std::vector<CacheEntry>(256);
  std::vector<FileName> file_names_;  // by the file's name id
  FileName inline_name_;
  std::string converted_from_;
  uint64_t slices_ = 0;
  int64_t first_ns_ = std::numeric_limits<int64_t>::max();
  int64_t last_ns_ = std::numeric_limits<int64_t>::min();
};

}  // namespace

bool view_streams(std::string_view view_name) {
  return view_name == "summary" || view_name == "table" || view_name == "operators" ||
         view_name == "merged_tree" || view_name == "breakdown";
}

StreamedReport render_streaming(const std::string& path, const std::vector<std::string>& views,
                                const ReportOptions& options) {
  StreamedReport report;
  for (const std::string& view : views)
    if (!view_streams(view)) {
      report.error = "the " + view + " view does not stream";
      return report;
    }
  io::FileClock clock;
  if (auto problem = io::scan_file_clock(path, &clock)) {
    report.error = *problem;
    return report;
  }
  io::NativeTail tail(path);
  if (clock.found) tail.use_clock(clock.first, clock.last);
  auto wants = [&views](std::string_view name) {
    return std::find(views.begin(), views.end(), name) != views.end();
  };
  SummaryAccumulator summary;
  summary.keep_per_name(wants("summary") || wants("table"));
  if (wants("operators"))
    summary.count_operators(options.operator_categories.empty()
                                ? analyze::default_operator_categories()
                                : options.operator_categories);
  internal::StreamingPathViews* paths = nullptr;
  const bool breakdown = wants("breakdown") && !options.breakdown_span.empty();
  if (wants("merged_tree") || breakdown)
    paths = &summary.collect_paths(
        wants("merged_tree"), breakdown ? options.breakdown_span : std::string(),
        options.breakdown_by_category ? analyze::PhaseGrouping::kChildCategory
                                      : analyze::PhaseGrouping::kChildName);
  io::TailVisitor visitor;
  visitor.on_span = [&summary](const io::EndedSpan& span) { summary.on_span(span); };
  if (paths != nullptr)
    visitor.on_begin = [&summary](const io::BegunSpan& span) { summary.on_begin(span); };
  visitor.on_instant = [&summary](const io::TailInstant& instant) {
    summary.extend(instant.unix_ns, instant.unix_ns);
  };
  visitor.on_counter_sample = [&summary](const io::TailCounterSample& sample) {
    summary.extend(sample.unix_ns, sample.unix_ns);
  };
  if (!tail.poll(visitor)) {
    report.error = tail.error();
    return report;
  }
  tail.finish(visitor);
  if (!tail.finished())
    report.damage = path + ": at byte " + std::to_string(tail.bytes_read()) +
                    ": the recording has no end (the process stopped before the session did)";
  std::vector<analyze::NameStatistics> rows;
  analyze::OperatorTable operator_table;
  analyze::AggregateTree tree;
  analyze::Breakdown breakdown_result;
  std::optional<io::ReadResult> whole;  // a breakdown of a file with GPU work reads it whole
  const std::string failed = internal::render_guarded([&] {
    summary.describe_run(tail, clock);
    if (paths != nullptr) report.column_bytes += paths->column_bytes();
    rows = summary.take_rows(tail, report);
    operator_table = summary.take_operator_table();
    if (wants("merged_tree")) tree = paths->take_tree(&report.largest_name_copy_bytes);
    if (breakdown && paths->saw_gpu_work()) {
      whole = io::read_trace_file(path);
      report.whole_file_views.push_back("breakdown");
    } else if (breakdown) {
      breakdown_result = paths->take_breakdown(&report.largest_name_copy_bytes);
    }
    summary.context().finalize();
    return std::string();
  });
  for (const std::string& view : views) {
    if (!failed.empty()) {
      report.texts.push_back(failed);
      continue;
    }
    report.texts.push_back(internal::render_guarded([&] {
      if (view == "table")
        return internal::render_table_rows(summary.context(), rows, options, summary.extent());
      if (view == "operators")
        return internal::render_operator_table(summary.context(), operator_table, options,
                                               summary.extent());
      if (view == "merged_tree")
        return internal::render_merged_tree_nodes(summary.context(), tree, options,
                                                  summary.extent());
      if (view == "breakdown") {
        if (whole && !whole->ok())
          return "opsight: cannot render the report: " + whole->error->to_string(path) + "\n";
        if (whole) return render_breakdown(whole->trace, options);
        breakdown_result.span_name = options.breakdown_span;
        return internal::render_breakdown_result(summary.context(), breakdown_result, std::nullopt,
                                                 options, summary.extent());
      }
      return internal::render_summary_rows(summary.context(), rows, options, summary.extent());
    }));
  }
  if (!report.texts.empty()) report.text = report.texts.front();
  report.slices = summary.slices();
  return report;
}

StreamedReport render_summary_streaming(const std::string& path, const ReportOptions& options) {
  return render_streaming(path, {"summary"}, options);
}

}  // namespace opsight::report
