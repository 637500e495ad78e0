// opsight._native.Trace (src/trace): a trace in memory, as columns for DataFrames, its run
// info, appended to and cut to a time window. The modules that act on a trace add their
// methods to the class (bind_io, bind_report, bind_export).

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyze/metrics.hpp"
#include "bindings.hpp"
#include "export/span_view.hpp"
#include "schema/metric_names.hpp"
#include "trace/trace.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

nb::object arg_to_python(const trace::Trace& trace, const trace::ArgValue& value) {
  switch (value.type) {
    case trace::ArgType::kInt:
      return nb::int_(value.int_value);
    case trace::ArgType::kDouble:
      return nb::float_(value.double_value);
    case trace::ArgType::kString:
      return nb::str(trace.strings.get(value.string_value).data(),
                     trace.strings.get(value.string_value).size());
    case trace::ArgType::kBool:
      return nb::bool_(value.int_value != 0);
  }
  return nb::none();
}

// One entry per slice, as columns (lists) for a pandas DataFrame; attributes become one
// column each, None where a slice lacks it. With `metric_columns`, metrics ("metric.cpu_ns")
// become float columns instead, named without the prefix ("cpu_ns"), NaN where a slice
// lacks them (a metric whose name another attribute has keeps its prefix); without, they
// are attributes like any other.
nb::dict slice_columns(const store::LoadedTrace& loaded, bool metric_columns) {
  const trace::Trace& trace = loaded.trace;
  const trace::SliceTable& slices = trace.slices;
  const size_t rows = slices.size();
  nb::list span_id, parent_span_id, linked_from_span_id, name, category, thread, pid, tid, start,
      end, dur, depth, unfinished;
  nb::dict attributes;
  // The first flow into each slice: the span that handed it its work (docs/trace-model.md).
  std::vector<trace::RowIndex> linked_from(trace.flows.size() > 0 ? rows : 0, trace::kNoRow);
  for (size_t flow = 0; flow < trace.flows.size(); ++flow)
    if (linked_from[trace.flows.slice_in[flow]] == trace::kNoRow)
      linked_from[trace.flows.slice_in[flow]] = trace.flows.slice_out[flow];
  const analyze::SliceMetricIndex metric_index(trace);
  std::vector<std::vector<double>> metric_values(
      metric_columns ? metric_index.names().size() : 0,
      std::vector<double>(rows, std::numeric_limits<double>::quiet_NaN()));
  // Each span's trace (a run holds many: one per root span, one per request served, one
  // per caller's trace joined), as the exporters send it (exporting::SpanView::trace_id).
  nb::list trace_id;
  {
    exporting::SpanView view(trace, {});
    std::map<std::pair<uint64_t, uint64_t>, nb::str> hex_of;
    for (trace::RowIndex row = 0; row < rows; ++row) {
      trace::TraceId id = view.trace_id(row);
      auto [it, added] = hex_of.try_emplace({id.high, id.low}, nb::str(""));
      if (added) it->second = nb::str(id.to_hex().c_str());
      trace_id.append(it->second);
    }
  }
  for (size_t row = 0; row < rows; ++row) {
    span_id.append(trace::span_id_to_hex(slices.span_id[row]));
    trace::RowIndex parent = slices.parent[row];
    if (parent == trace::kNoRow)
      parent_span_id.append(nb::none());
    else
      parent_span_id.append(trace::span_id_to_hex(slices.span_id[parent]));
    if (linked_from.empty() || linked_from[row] == trace::kNoRow)
      linked_from_span_id.append(nb::none());
    else
      linked_from_span_id.append(trace::span_id_to_hex(slices.span_id[linked_from[row]]));
    name.append(nb::str(trace.strings.get(slices.name[row]).data(),
                        trace.strings.get(slices.name[row]).size()));
    category.append(nb::str(trace.strings.get(slices.category[row]).data(),
                            trace.strings.get(slices.category[row]).size()));
    const trace::Track& track = trace.tracks[slices.track[row]];
    std::string_view track_name = trace.strings.get(track.name);
    if (track_name.empty())
      thread.append("thread " + std::to_string(track.tid));
    else
      thread.append(nb::str(track_name.data(), track_name.size()));
    pid.append(track.pid);
    tid.append(track.tid);
    start.append(slices.ts[row]);
    end.append(slices.ts[row] + slices.dur[row]);
    dur.append(slices.dur[row]);
    depth.append(slices.depth[row]);
    unfinished.append((slices.flags[row] & trace::kSliceUnfinished) != 0);
    for (trace::RowIndex arg = slices.args_begin[row]; arg < slices.args_begin[row + 1]; ++arg) {
      uint32_t metric = metric_index.metric_of_key(trace.slice_args.key[arg]);
      if (metric_columns && metric != analyze::SliceMetricIndex::kNotAMetric) {
        if (auto value = analyze::numeric_arg_value(trace.slice_args.value[arg])) {
          metric_values[metric][row] = *value;
          continue;
        }
      }
      std::string_view key = trace.strings.get(trace.slice_args.key[arg]);
      nb::str key_object(key.data(), key.size());
      if (!attributes.contains(key_object)) {
        nb::list column;
        for (size_t missing = 0; missing < row; ++missing) column.append(nb::none());
        attributes[key_object] = column;
      }
      nb::list column = nb::borrow<nb::list>(attributes[key_object]);
      while (column.size() < row) column.append(nb::none());
      column.append(arg_to_python(trace, trace.slice_args.value[arg]));
    }
  }
  for (auto item : attributes) {
    nb::list column = nb::borrow<nb::list>(item.second);
    while (column.size() < rows) column.append(nb::none());
  }
  for (size_t metric = 0; metric < metric_values.size(); ++metric) {
    const std::string& metric_name = metric_index.names()[metric];
    nb::str column_name(metric_name.c_str(), metric_name.size());
    if (attributes.contains(column_name))
      column_name = nb::str((std::string(schema::kMetricArgPrefix) + metric_name).c_str());
    nb::list column;
    for (double value : metric_values[metric]) column.append(nb::float_(value));
    attributes[column_name] = column;
  }
  nb::dict columns;
  columns["trace_id"] = trace_id;
  columns["span_id"] = span_id;
  columns["parent_span_id"] = parent_span_id;
  columns["linked_from_span_id"] = linked_from_span_id;
  columns["name"] = name;
  columns["category"] = category;
  columns["thread"] = thread;
  columns["pid"] = pid;
  columns["tid"] = tid;
  columns["start"] = start;
  columns["end"] = end;
  columns["dur"] = dur;
  columns["depth"] = depth;
  columns["unfinished"] = unfinished;
  columns["attributes"] = attributes;
  return columns;
}

// Trace.counter_columns: one entry per counter sample, in time order (ties: track order),
// as columns for a pandas DataFrame: ts_ns (the trace's clock, as slices' start), track
// (its name), pid, unit (the track's, else the name's suffix: schema::metric_unit), value.
nb::dict counter_columns(const store::LoadedTrace& loaded) {
  const trace::Trace& trace = loaded.trace;
  const trace::CounterTable& counters = trace.counters;
  std::vector<size_t> order;
  order.reserve(counters.size());
  for (size_t row = 0; row < counters.size(); ++row)
    if (counters.counter_track[row] < trace.counter_tracks.size()) order.push_back(row);
  std::stable_sort(order.begin(), order.end(), [&counters](size_t a, size_t b) {
    return std::tie(counters.ts[a], counters.counter_track[a]) <
           std::tie(counters.ts[b], counters.counter_track[b]);
  });
  std::vector<nb::str> track_names, units;
  for (const trace::CounterTrack& track : trace.counter_tracks) {
    std::string_view track_name = trace.str(track.name);
    std::string_view unit = trace.str(track.unit);
    if (unit.empty()) unit = schema::metric_unit(track_name);
    track_names.emplace_back(track_name.data(), track_name.size());
    units.emplace_back(unit.data(), unit.size());
  }
  nb::list ts_ns, track, pid, unit, value;
  for (size_t row : order) {
    uint32_t index = counters.counter_track[row];
    ts_ns.append(counters.ts[row]);
    track.append(track_names[index]);
    pid.append(trace.counter_tracks[index].pid);
    unit.append(units[index]);
    value.append(counters.value[row]);
  }
  nb::dict columns;
  columns["ts_ns"] = ts_ns;
  columns["track"] = track;
  columns["pid"] = pid;
  columns["unit"] = unit;
  columns["value"] = value;
  return columns;
}

nb::dict run_info(const store::LoadedTrace& loaded) {
  const trace::RunInfo& run = loaded.trace.run;
  nb::dict info;
  info["command_line"] = run.command_line;
  info["host"] = run.host;
  info["opsight_version"] = run.opsight_version;
  info["source_format"] = run.source_format;
  info["clock"] = run.clock;
  info["pid"] = run.pid;
  info["start_unix_ns"] = run.start_unix_ns;
  if (run.has_unix_offset) info["unix_offset_ns"] = run.unix_offset_ns;  // start + it: Unix ns
  info["trace_id"] = run.trace_id.to_hex();
  info["overhead_ns"] = run.overhead_ns;
  info["traced_ns"] = run.traced_ns;
  info["events_dropped"] = run.events_dropped;
  info["complete"] = run.complete;
  info["slices"] = loaded.trace.slices.size();
  info["processes"] = loaded.trace.processes.size();
  // What readers kept beyond the fields above: "category_map" (the categories a foreign
  // trace's were mapped from), "converted_from", a tool's schema version...
  nb::dict extra;
  for (const auto& [key, value] : run.extra) extra[nb::str(key.data(), key.size())] = value;
  info["extra"] = extra;
  return info;
}

// Trace.append: `other`'s events join `into`, their timestamps moved by shift_ns (how
// opsight.onnxruntime brings ONNX Runtime's profile onto a profile's clock). `other` is
// shifted in place for the copy and shifted back afterwards.
void append_shifted(store::LoadedTrace& into, store::LoadedTrace& other, int64_t shift_ns) {
  if (&into == &other) throw std::invalid_argument("Trace.append: a trace cannot take itself");
  trace::shift_timestamps(other.trace, shift_ns);
  trace::append_trace(into.trace, other.trace);
  trace::shift_timestamps(other.trace, -shift_ns);
  if (into.damage.empty() && !other.damage.empty()) into.damage = other.damage;
}

// Trace.slice_times: (tid, start, end) of every slice named `name`, in row order.
nb::list slice_times(const store::LoadedTrace& loaded, std::string_view name) {
  nb::list times;
  const trace::Trace& trace = loaded.trace;
  std::optional<trace::StringId> id = trace.strings.find(name);
  if (!id) return times;
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    if (trace.slices.name[row] != *id) continue;
    times.append(nb::make_tuple(trace.tracks[trace.slices.track[row]].tid, trace.slices.ts[row],
                                trace.slices.end(static_cast<trace::RowIndex>(row))));
  }
  return times;
}

}  // namespace

TraceClass bind_trace(nb::module_& m) {
  TraceClass trace_class(m, "Trace");
  trace_class.def_prop_ro("damage", &first_damage)
      .def_prop_ro("source_name", [](const store::LoadedTrace& loaded) { return loaded.label; })
      .def("slice_columns", &slice_columns, nb::arg("metric_columns") = false)
      .def("counter_columns", &counter_columns)
      .def("append", &append_shifted, nb::arg("other"), nb::arg("shift_ns") = 0,
           nb::call_guard<nb::gil_scoped_release>(),
           "Appends other's events, their timestamps plus shift_ns, to this trace (threads "
           "shared by pid and tid are merged and nested again).")
      .def(
          "keep_time_window",
          [](store::LoadedTrace& loaded, int64_t begin_ns, int64_t end_ns) {
            trace::keep_time_window(loaded.trace, begin_ns, end_ns);
          },
          nb::arg("begin_ns"), nb::arg("end_ns"),
          "Drops the events that start outside [begin_ns, end_ns].")
      .def("slice_times", &slice_times, nb::arg("name"),
           "(tid, start, end) of every slice named `name`.")
      .def("run_info", &run_info);
  return trace_class;
}

}  // namespace opsight::python
