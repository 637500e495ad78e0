#include "export/log_view.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "schema/log_names.hpp"

namespace opsight::exporting {

int severity_number(int64_t level) {
  if (level < 10) return 0;
  if (level > 53) return 24;
  int64_t band = level / 10;  // 1 DEBUG .. 5 FATAL
  int64_t step = std::min<int64_t>(level % 10, 3);
  return static_cast<int>((band - 1) * 4 + 5 + step);
}

LogView::LogView(const SpanView& spans) : spans_(spans) {
  const trace::Trace& trace = spans.trace();
  const trace::InstantTable& instants = trace.instants;
  auto category = trace.strings.find(schema::kLogCategory);
  if (!category || instants.size() == 0) return;
  if (auto key = trace.strings.find(schema::kLogLevel)) {
    level_key_ = *key;
    has_level_key_ = true;
  }
  if (auto key = trace.strings.find(schema::kLogMessage)) {
    message_key_ = *key;
    has_message_key_ = true;
  }
  if (auto key = trace.strings.find(schema::kLogLane)) {
    lane_key_ = *key;
    has_lane_key_ = true;
  }
  auto logger_key = trace.strings.find(schema::kLogLoggerName);
  const bool has_args = instants.args_begin.size() == instants.size() + 1;
  const trace::SliceTable& slices = trace.slices;

  // The tracks of each thread by key (0: its own), in the order they were made: a key
  // reused for a new task has a track per task.
  std::map<std::tuple<int64_t, int64_t, uint64_t>, std::vector<trace::TrackId>> tracks_by_key;
  for (trace::TrackId track = 0; track < trace.tracks.size(); ++track) {
    const trace::Track& info = trace.tracks[track];
    if (info.kind == trace::TrackKind::kThread)
      tracks_by_key[{info.pid, info.tid, 0}].push_back(track);
    else if (info.kind == trace::TrackKind::kThreadLane)
      tracks_by_key[{info.pid, info.tid, info.async_key}].push_back(track);
  }
  std::vector<int64_t> first_start;  // per track: its first slice's start (made on demand)
  // The track a record logged at `time` on the lane `key` of its instant's thread was on:
  // of that key's tracks, the last begun by then (the one a reused key stood for then).
  auto track_of_lane = [&](trace::TrackId instant_track, uint64_t key, int64_t time) {
    const trace::Track& info = trace.tracks[instant_track];
    auto found = tracks_by_key.find({info.pid, info.tid, key});
    if (found == tracks_by_key.end()) return instant_track;
    const std::vector<trace::TrackId>& candidates = found->second;
    if (candidates.size() == 1) return candidates.front();
    if (first_start.empty()) {
      first_start.assign(trace.tracks.size(), INT64_MAX);
      for (trace::RowIndex row = 0; row < slices.size(); ++row)
        first_start[slices.track[row]] = std::min(first_start[slices.track[row]], slices.ts[row]);
    }
    trace::TrackId chosen = candidates.front();
    for (trace::TrackId candidate : candidates)
      if (first_start[candidate] <= time) chosen = candidate;
    return chosen;
  };

  // The records, and the tracks they were logged on.
  std::unordered_map<trace::TrackId, std::vector<trace::RowIndex>> slices_of_track;
  for (trace::RowIndex row = 0; row < instants.size(); ++row) {
    if (instants.category[row] != *category) continue;
    Record record;
    record.instant = row;
    record.track = instants.track[row];
    bool has_lane = false;
    uint64_t lane = 0;
    if (has_args) {
      for (auto arg = instants.args_begin[row]; arg < instants.args_begin[row + 1]; ++arg) {
        trace::StringId key = trace.instant_args.key[arg];
        const trace::ArgValue& value = trace.instant_args.value[arg];
        if (has_level_key_ && key == level_key_ && value.type == trace::ArgType::kInt) {
          record.level = value.int_value;
        } else if (has_message_key_ && key == message_key_ &&
                   value.type == trace::ArgType::kString) {
          record.message = value.string_value;
        } else if (logger_key && key == *logger_key && value.type == trace::ArgType::kString) {
          record.logger = value.string_value;
        } else if (has_lane_key_ && key == lane_key_ && value.type == trace::ArgType::kInt) {
          has_lane = true;
          lane = static_cast<uint64_t>(value.int_value);
        }
      }
    }
    if (has_lane) record.track = track_of_lane(record.track, lane, instants.ts[row]);
    records_.push_back(record);
    slices_of_track.try_emplace(record.track);
  }
  if (records_.empty()) return;

  // Each such track's slices by start (an enclosing slice before those inside it).
  for (trace::RowIndex row = 0; row < slices.size(); ++row)
    if (auto it = slices_of_track.find(slices.track[row]); it != slices_of_track.end())
      it->second.push_back(row);
  for (auto& [track, rows] : slices_of_track)
    std::stable_sort(rows.begin(), rows.end(), [&](trace::RowIndex a, trace::RowIndex b) {
      if (slices.ts[a] != slices.ts[b]) return slices.ts[a] < slices.ts[b];
      return slices.dur[a] > slices.dur[b];
    });
  // A record's span: the last slice begun at or before its time, or the nearest of that
  // slice's ancestors still open then (a slice that holds the time holds every slice begun
  // before it and ended after it, so the innermost one is on that chain).
  for (Record& record : records_) {
    int64_t time = instants.ts[record.instant];
    const auto& rows = slices_of_track[record.track];
    auto after =
        std::upper_bound(rows.begin(), rows.end(), time,
                         [&](int64_t t, trace::RowIndex row) { return t < slices.ts[row]; });
    trace::RowIndex row = after == rows.begin() ? trace::kNoRow : *(after - 1);
    while (row != trace::kNoRow && slices.end(row) < time) row = slices.parent[row];
    record.span = row;
  }

  order_.resize(records_.size());
  for (uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    uint32_t resource_a = resource_of(a), resource_b = resource_of(b);
    if (resource_a != resource_b) return resource_a < resource_b;
    return instants.ts[records_[a].instant] < instants.ts[records_[b].instant];
  });
}

LogView::LogView(const SpanView& spans, std::vector<LogSpanIds> given) : LogView(spans) {
  given_ = std::move(given);
  given_.resize(spans.trace().instants.size());
}

uint32_t LogView::resource_of(uint32_t record) const {
  return spans_.resource_of_track(records_[record].track);
}

int64_t LogView::time_unix_ns(uint32_t record) const {
  const trace::Trace& trace = spans_.trace();
  return trace.instants.ts[records_[record].instant] +
         (trace.run.has_unix_offset ? trace.run.unix_offset_ns : 0);
}

bool LogView::has_span(uint32_t record) const {
  if (!given_.empty()) return given_[records_[record].instant].span_id != 0;
  return records_[record].span != trace::kNoRow;
}

trace::TraceId LogView::trace_id(uint32_t record) const {
  if (!given_.empty()) return given_[records_[record].instant].trace_id;
  return has_span(record) ? spans_.trace_id(records_[record].span) : trace::TraceId{};
}

uint64_t LogView::span_id(uint32_t record) const {
  if (!given_.empty()) return given_[records_[record].instant].span_id;
  return has_span(record) ? spans_.span_id(records_[record].span) : 0;
}

uint8_t LogView::trace_flags(uint32_t record) const {
  if (!given_.empty()) return given_[records_[record].instant].trace_flags;
  return has_span(record) ? spans_.trace_flags(records_[record].span) : 0;
}

std::string_view LogView::level_name(uint32_t record) const {
  const trace::Trace& trace = spans_.trace();
  return trace.str(trace.instants.name[records_[record].instant]);
}

std::string_view LogView::message(uint32_t record) const {
  return spans_.trace().str(records_[record].message);
}

std::string_view LogView::logger(uint32_t record) const {
  return spans_.trace().str(records_[record].logger);
}

void LogView::attributes(uint32_t record, std::vector<Attribute>& out) const {
  out.clear();
  const trace::Trace& trace = spans_.trace();
  const trace::InstantTable& instants = trace.instants;
  trace::RowIndex row = records_[record].instant;
  if (instants.args_begin.size() == instants.size() + 1) {
    for (auto arg = instants.args_begin[row]; arg < instants.args_begin[row + 1]; ++arg) {
      trace::StringId key = trace.instant_args.key[arg];
      if ((has_level_key_ && key == level_key_) || (has_message_key_ && key == message_key_) ||
          (has_lane_key_ && key == lane_key_))
        continue;
      const trace::ArgValue& value = trace.instant_args.value[arg];
      AttributeValue attribute;
      switch (value.type) {
        case trace::ArgType::kInt:
          attribute = AttributeValue::of(value.int_value);
          break;
        case trace::ArgType::kBool:
          attribute = AttributeValue::of_bool(value.int_value != 0);
          break;
        case trace::ArgType::kDouble:
          attribute = AttributeValue::of(value.double_value);
          break;
        case trace::ArgType::kString:
          attribute = AttributeValue::of(trace.str(value.string_value));
          break;
      }
      out.push_back({trace.str(key), attribute});
    }
  }
  trace::TrackId track = records_[record].track;
  out.push_back({"thread.id", AttributeValue::of(trace.tracks[track].tid)});
  out.push_back({"thread.name", AttributeValue::of(spans_.thread_name(track))});
}

}  // namespace opsight::exporting
