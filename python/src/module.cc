// opsight._native: the core, seen from Python. Recording primitives and sessions (record),
// traces read from files or memory (io), and their reports (report). The traced-call
// types of the hot path are plain CPython types (traced_callables.cc); everything else is
// bound with nanobind. The Python package (python/opsight/) is the only intended caller.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyze/compare.hpp"
#include "analyze/metrics.hpp"
#include "cuda/gpu_collection.hpp"
#include "export/export.hpp"
#include "export/live_export.hpp"
#include "export/metrics_endpoint.hpp"
#include "export/record_export.hpp"
#include "io/io.hpp"
#include "module_call_recorder.hpp"
#include "opsight/metrics.hpp"
#include "opsight/opsight.hpp"
#include "record/ring_sink.hpp"
#include "recorder_api.h"
#include "report/report.hpp"
#include "schema/metric_names.hpp"
#include "session/control.hpp"
#include "session/flight_recorder.hpp"
#include "store/run_store.hpp"
#include "store/save_run.hpp"
#include "store/trace_source.hpp"
#include "trace/trace.hpp"
#include "traced_callables.hpp"

namespace nb = nanobind;

namespace opsight::python {
namespace {

// A trace in memory, with what its reader said about damage.
struct LoadedTrace {
  trace::Trace trace;
  std::optional<std::string> damage;  // "FILE: at byte N: ..." when it was read only in part
  std::string source_name;
};

LoadedTrace from_read_result(io::ReadResult result, const std::string& name) {
  if (result.error) throw std::invalid_argument(result.error->to_string(name));
  LoadedTrace loaded{std::move(result.trace), std::nullopt, name};
  if (result.damage) loaded.damage = result.damage->to_string(name);
  return loaded;
}

report::OutputFormat parse_format(std::string_view format) {
  if (format == "text") return report::OutputFormat::kText;
  if (format == "json") return report::OutputFormat::kJson;
  if (format == "csv") return report::OutputFormat::kCsv;
  throw std::invalid_argument("unknown report format '" + std::string(format) +
                              "' (expected text, json or csv)");
}

std::string render(const LoadedTrace& loaded, std::string_view view, std::string_view format,
                   const std::string& sort, size_t limit, size_t max_roots, const std::string& span,
                   bool by_category, const std::vector<std::string>& categories, size_t max_depth) {
  if (auto error = report::validate_sort_key(sort)) throw std::invalid_argument(*error);
  report::ReportOptions options;
  options.format = parse_format(format);
  options.sort = sort;
  options.limit = limit;
  options.max_roots = max_roots;
  options.max_depth = max_depth;
  options.source_name = loaded.source_name;
  options.breakdown_span = span;
  options.breakdown_by_category = by_category;
  options.operator_categories = categories;
  const report::ReportView* found = report::find_report_view(view);
  if (found == nullptr)
    throw std::invalid_argument("unknown report '" + std::string(view) + "' (expected " +
                                report::report_view_names() + ")");
  if (found->needs_span && span.empty())
    throw std::invalid_argument("the " + std::string(view) + " needs the name of a span");
  return found->render(loaded.trace, options);
}

std::string compare_traces(const LoadedTrace& a, const LoadedTrace& b, double alpha,
                           double min_change, uint64_t min_samples, double fail_threshold,
                           std::string_view format) {
  analyze::CompareOptions options;
  options.alpha = alpha;
  options.min_change = min_change;
  options.min_samples = min_samples;
  analyze::Comparison comparison = analyze::compare_traces(a.trace, b.trace, options);
  report::ReportOptions report_options;
  report_options.format = parse_format(format);
  return report::render_comparison(comparison, a.source_name, b.source_name, fail_threshold,
                                   report_options);
}

// A trace file or a run of the store, by the one rule of store/trace_source.hpp.
LoadedTrace load_source(const std::string& argument, const std::string& store_path) {
  store::LoadedTrace loaded = store::load_trace_argument(argument, store_path);
  if (!loaded.ok()) throw std::invalid_argument(*loaded.error);
  LoadedTrace result{std::move(loaded.trace), std::nullopt, loaded.label};
  if (!loaded.damage.empty()) result.damage = loaded.damage.front();
  return result;
}

store::KeyValues key_values(const std::vector<std::pair<std::string, std::string>>& pairs) {
  return store::KeyValues(pairs.begin(), pairs.end());
}

// store::save_trace(_files)'s outcome as a dict: {"run": {id, uuid, name, ...} or None,
// "store", "error", "damage", "notes"}.
nb::dict save_outcome(const store::SaveOutcome& outcome) {
  nb::dict result;
  if (outcome.run) {
    nb::dict run;
    run["id"] = outcome.run->id;
    run["uuid"] = outcome.run->uuid;
    run["name"] = outcome.run->metadata.name;
    run["slices"] = outcome.run->slice_count;
    run["duration_ns"] = outcome.run->duration_ns;
    run["created_unix_ns"] = outcome.run->created_unix_ns;
    run["command"] = outcome.run->metadata.command;
    run["git_commit"] = outcome.run->metadata.git_commit;
    run["host"] = outcome.run->metadata.host;
    nb::dict tags, versions;
    for (const auto& [key, value] : outcome.run->metadata.tags) tags[key.c_str()] = value;
    for (const auto& [key, value] : outcome.run->metadata.versions) versions[key.c_str()] = value;
    run["tags"] = tags;
    run["versions"] = versions;
    run["store"] = outcome.store_path;
    result["run"] = run;
  } else {
    result["run"] = nb::none();
  }
  result["store"] = outcome.store_path;
  if (outcome.error)
    result["error"] = *outcome.error;
  else
    result["error"] = nb::none();
  result["damage"] = outcome.damage;
  result["notes"] = outcome.notes;
  return result;
}

store::SaveRequest save_request(const std::string& store_path, const std::string& name,
                                const std::string& command, const std::string& working_directory,
                                const std::vector<std::pair<std::string, std::string>>& tags,
                                const std::vector<std::pair<std::string, std::string>>& versions) {
  store::SaveRequest request;
  request.store_path = store_path;
  request.name = name;
  request.command = command;
  request.working_directory = working_directory;
  request.tags = key_values(tags);
  request.versions = key_values(versions);
  return request;
}

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
nb::dict slice_columns(const LoadedTrace& loaded, bool metric_columns) {
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
  // Each span's trace (a run holds many: one per request served without a caller, one per
  // caller's trace joined), as the exporters send it (exporting::SpanView::trace_id).
  nb::list trace_id;
  {
    nb::str run_trace_hex(trace.run.trace_id.to_hex().c_str());
    if (trace.span_contexts.size() == 0) {
      for (size_t row = 0; row < rows; ++row) trace_id.append(run_trace_hex);
    } else {
      exporting::SpanView view(trace, {});
      std::map<std::pair<uint64_t, uint64_t>, nb::str> hex_of;
      for (trace::RowIndex row = 0; row < rows; ++row) {
        trace::TraceId id = view.trace_id(row);
        auto [it, added] = hex_of.try_emplace({id.high, id.low}, run_trace_hex);
        if (added) it->second = nb::str(id.to_hex().c_str());
        trace_id.append(it->second);
      }
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
nb::dict counter_columns(const LoadedTrace& loaded) {
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

// Trace.export(targets, ...): sends the trace to each target (export/export.hpp's specs)
// and returns one dict per target: what was sent and dropped, and the last error.
// The targets and options of an export from Python (ValueError for a bad target).
struct ExportRequest {
  std::vector<exporting::ExportTarget> targets;
  exporting::TraceExportOptions options;
  std::vector<std::string> warnings;
};
ExportRequest export_request(const std::vector<std::string>& specs, const std::string& service,
                             double timeout_s, size_t batch_spans) {
  exporting::Environment environment = exporting::process_environment();
  ExportRequest request;
  for (const std::string& spec : specs) {
    std::string error;
    auto target = exporting::parse_export_target(spec, environment, &error);
    if (!target) throw std::invalid_argument(error);
    request.targets.push_back(std::move(*target));
  }
  request.options.resource =
      exporting::resource_options_from(environment, service, &request.warnings);
  request.options.resource.opsight_version = opsight::version();
  request.options.timeout_s = timeout_s;
  // batch_spans 0: OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else 512; OTEL_BSP_* (export.hpp).
  request.options.batch_spans = batch_spans == 0 ? 512 : batch_spans;
  if (std::string error =
          exporting::apply_batch_environment(environment, batch_spans != 0, &request.options);
      !error.empty())
    throw std::invalid_argument(error);
  request.options.batch_spans = std::max<size_t>(1, request.options.batch_spans);
  return request;
}

nb::list export_reports(const std::vector<exporting::TargetReport>& reports,
                        const std::vector<std::string>& warnings);

// Records what an export did in the trace's run info ("export:<target>", see
// schema/metric_names.hpp), so that its reports, its file and its stored run show it.
void note_export(LoadedTrace& loaded, const std::string& target, uint64_t spans, uint64_t sent,
                 uint64_t dropped) {
  std::string key = std::string(schema::kExportPrefix) + target;
  std::erase_if(loaded.trace.run.extra, [&](const auto& entry) { return entry.first == key; });
  loaded.trace.run.extra.emplace_back(
      std::move(key),
      std::to_string(spans) + " " + std::to_string(sent) + " " + std::to_string(dropped));
}

nb::list export_trace(LoadedTrace& loaded, const std::vector<std::string>& specs,
                      const std::string& service, double timeout_s, size_t batch_spans) {
  ExportRequest request = export_request(specs, service, timeout_s, batch_spans);
  std::vector<exporting::TargetReport> reports;
  {
    nb::gil_scoped_release release;
    reports = exporting::export_trace(loaded.trace, request.targets, request.options);
  }
  for (const auto& report : reports)
    note_export(loaded, report.description, report.stats.spans_offered, report.stats.spans_sent,
                report.stats.spans_dropped());
  return export_reports(reports, request.warnings);
}

nb::list export_reports(const std::vector<exporting::TargetReport>& reports,
                        const std::vector<std::string>& warnings) {
  nb::list out;
  for (const auto& report : reports) {
    nb::dict entry;
    entry["target"] = report.description;
    entry["spans"] = report.stats.spans_offered;
    entry["sent"] = report.stats.spans_sent;
    entry["dropped"] = report.stats.spans_dropped();
    entry["requests"] = report.stats.batches_sent;
    entry["retries"] = report.stats.retries;
    entry["bytes"] = report.stats.bytes_sent;
    entry["seconds"] = report.seconds;
    // Every cause of a drop, with its count (a slow server's drops say why too).
    entry["error"] =
        report.stats.spans_dropped() > 0 ? report.stats.drop_reasons() : report.stats.last_error;
    entry["warnings"] = warnings;
    out.append(entry);
  }
  return out;
}

// Metrics and log lines that are not a trace's (export/record_export.hpp), for opsight
// explain: families as [(name, type, help, [(labels, value), ...]), ...], lines as
// [(labels, unix_ns, line), ...], labels as [(name, value), ...].
using LabelPairs = std::vector<std::pair<std::string, std::string>>;
using FamilyTuple =
    std::tuple<std::string, std::string, std::string, std::vector<std::pair<LabelPairs, double>>>;
using LineTuple = std::tuple<LabelPairs, int64_t, std::string>;

nb::dict push_metric_families(const std::string& url, const std::vector<FamilyTuple>& families,
                              const std::string& default_job, double timeout_s) {
  std::vector<exporting::MetricFamily> converted;
  for (const auto& [name, type, help, samples] : families) {
    exporting::MetricFamily family{name, type, help, {}};
    for (const auto& sample : samples) family.samples.push_back({sample.first, sample.second});
    converted.push_back(std::move(family));
  }
  exporting::TargetReport report;
  {
    nb::gil_scoped_release release;
    report = exporting::push_metric_families(url, converted, default_job, timeout_s);
  }
  return nb::borrow<nb::dict>(export_reports({report}, {})[0]);
}

nb::dict push_log_lines(const std::string& url, const std::vector<LineTuple>& lines,
                        size_t batch_lines, double timeout_s) {
  std::vector<exporting::LogLine> converted;
  converted.reserve(lines.size());
  for (const auto& line : lines)
    converted.push_back({std::get<0>(line), std::get<1>(line), std::get<2>(line)});
  exporting::TargetReport report;
  {
    nb::gil_scoped_release release;
    report = exporting::push_log_lines(url, converted, batch_lines, timeout_s);
  }
  return nb::borrow<nb::dict>(export_reports({report}, {})[0]);
}

nb::dict run_info(const LoadedTrace& loaded) {
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
void append_shifted(LoadedTrace& into, LoadedTrace& other, int64_t shift_ns) {
  if (&into == &other) throw std::invalid_argument("Trace.append: a trace cannot take itself");
  trace::shift_timestamps(other.trace, shift_ns);
  trace::append_trace(into.trace, other.trace);
  trace::shift_timestamps(other.trace, -shift_ns);
  if (!into.damage && other.damage) into.damage = other.damage;
}

// Trace.slice_times: (tid, start, end) of every slice named `name`, in row order.
nb::list slice_times(const LoadedTrace& loaded, std::string_view name) {
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

void add_python_arg(std::string_view key, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value)) {
    opsight::add_arg_bool(key, nb::cast<bool>(value));
  } else if (nb::isinstance<nb::int_>(value)) {
    int64_t number = 0;
    if (nb::try_cast(value, number))
      opsight::add_arg(key, number);
    else
      opsight::add_arg(key, std::string_view(nb::str(value).c_str()));
  } else if (nb::isinstance<nb::float_>(value)) {
    opsight::add_arg(key, nb::cast<double>(value));
  } else if (nb::isinstance<nb::str>(value)) {
    opsight::add_arg(key, nb::cast<std::string_view>(value));
  } else {
    opsight::add_arg(key, std::string_view(nb::str(value).c_str()));
  }
}

// The recorder as a table of C functions for the package's other native extensions (see
// recorder_api.h); static, so the capsule's pointer stays valid for the process.
const OpsightRecorderApi kRecorderApi = {
    OPSIGHT_RECORDER_API_VERSION,
    [](const char* name, size_t name_size, const char* category, size_t category_size) {
      return opsight::register_name(std::string_view(name, name_size),
                                    std::string_view(category, category_size));
    },
    [] { return opsight::recording() ? 1 : 0; },
    [](uint32_t name_id) { return opsight::begin(name_id) ? 1 : 0; },
    [] { opsight::end(); },
    [](const char* key, size_t key_size, const char* value, size_t value_size) {
      opsight::add_arg(std::string_view(key, key_size), std::string_view(value, value_size));
    },
    [](const char* key, size_t key_size, int64_t value) {
      opsight::add_arg(std::string_view(key, key_size), value);
    },
    [](double nanoseconds) { opsight::internal::add_overhead_ns(nanoseconds); },
    &opsight::internal::g_recording,
    [](void (*listener)(int)) {
      // One listener at a time (the torch observer's); the core's takes a bool.
      static std::atomic<void (*)(int)> g_listener{nullptr};
      g_listener.store(listener);
      opsight::set_sampling_listener(listener == nullptr ? nullptr : +[](bool sampled_out) {
        if (auto* current = g_listener.load()) current(sampled_out ? 1 : 0);
      });
    },
};

// `opsight ctl`: the core's control watcher (session/control.hpp) calls this on its own
// thread; it calls the Python callable that start_control_watcher() was given
// (opsight._capture.instrument.set_enabled, which also wraps and unwraps the targets).
// The callable is set and replaced with the GIL held, and held by the call while it runs.
PyObject* g_control_apply = nullptr;
// "requests N": opsight._session.live_control's handler, called with N; returns the state
// to publish. Set and replaced as g_control_apply is.
PyObject* g_control_apply_requests = nullptr;

bool python_is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

void apply_control_request(bool enabled) {
  // A watcher left running at exit must not take the GIL of an interpreter going away.
  if (!Py_IsInitialized() || python_is_finalizing()) return;
  nb::gil_scoped_acquire gil;
  PyObject* apply = g_control_apply;
  if (apply == nullptr) return;
  Py_INCREF(apply);
  PyObject* result = PyObject_CallOneArg(apply, enabled ? Py_True : Py_False);
  if (result == nullptr)
    PyErr_WriteUnraisable(apply);  // a warning on stderr, never an error in the program
  else
    Py_DECREF(result);
  Py_DECREF(apply);
}

std::string apply_control_requests(int64_t count) {
  const std::string unchanged = opsight::recording() ? "on" : "off";
  if (!Py_IsInitialized() || python_is_finalizing()) return unchanged;
  nb::gil_scoped_acquire gil;
  PyObject* apply = g_control_apply_requests;
  if (apply == nullptr) return unchanged;
  Py_INCREF(apply);
  std::string state = unchanged;
  PyObject* argument = PyLong_FromLongLong(count);
  PyObject* result = argument ? PyObject_CallOneArg(apply, argument) : nullptr;
  Py_XDECREF(argument);
  if (result == nullptr) {
    PyErr_WriteUnraisable(apply);
  } else {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_Check(result) ? PyUnicode_AsUTF8AndSize(result, &size) : nullptr;
    if (text != nullptr)
      state.assign(text, static_cast<size_t>(size));
    else
      PyErr_Clear();
    Py_DECREF(result);
  }
  Py_DECREF(apply);
  return state;
}

// Starts (or restarts) the process's watcher. The GIL is released while it stops an
// earlier watcher, whose thread may be waiting for it inside apply_control_request.
bool start_python_control_watcher(nb::callable apply, bool enabled,
                                  std::optional<nb::callable> apply_requests) {
  {
    nb::gil_scoped_release release;
    session::stop_control_watcher();
  }
  PyObject* callable = apply.ptr();
  Py_INCREF(callable);
  Py_XSETREF(g_control_apply, callable);
  PyObject* requests_callable = apply_requests ? apply_requests->ptr() : nullptr;
  Py_XINCREF(requests_callable);
  Py_XSETREF(g_control_apply_requests, requests_callable);
  return session::start_control_watcher(apply_control_request, enabled,
                                        apply_requests
                                            ? session::ControlRequestsApply(apply_control_requests)
                                            : session::ControlRequestsApply());
}

}  // namespace
}  // namespace opsight::python

NB_MODULE(_native, m) {
  using namespace opsight;
  using namespace opsight::python;
  m.doc() = "opsight's C++ core (private: use the opsight package)";
  if (!add_traced_callable_types(m.ptr())) throw nb::python_error();
  if (!add_module_call_recorder_type(m.ptr())) throw nb::python_error();

  m.def("version", [] { return std::string(opsight::version()); });
  m.attr("_recorder_api") = nb::steal(PyCapsule_New(const_cast<OpsightRecorderApi*>(&kRecorderApi),
                                                    OPSIGHT_RECORDER_API_CAPSULE, nullptr));
  m.def("register_name", &opsight::register_name, nb::arg("name"), nb::arg("category") = "",
        "Interns a span name once; returns its id.");
  m.def(
      "begin", [](uint32_t name_id) { return opsight::begin(name_id); }, nb::arg("name_id"),
      "Begins a span by name id; returns whether it recorded (call end() only then).");
  m.def("end", [] { opsight::end(); });
  m.def(
      "begin_async",
      [](std::string_view name, uint64_t id) { return opsight::begin_async(name, id); },
      nb::arg("name"), nb::arg("id"));
  m.def(
      "end_async", [](uint64_t id) { opsight::end_async(id); }, nb::arg("id"));
  m.def("new_flow_id", [] { return opsight::new_flow_id(); });
  // W3C trace context (opsight.hpp): the traceparent text in and out, and the two events.
  m.def(
      "parse_traceparent",
      [](std::string_view header) -> std::optional<std::tuple<std::string, uint64_t, int>> {
        auto context = opsight::parse_traceparent(header);
        if (!context) return std::nullopt;
        std::string hex = opsight::format_traceparent(*context).substr(3, 32);
        return std::make_tuple(hex, context->span_id, static_cast<int>(context->trace_flags));
      },
      nb::arg("header"), "(trace id hex, parent span id, flags) or None.");
  m.def(
      "format_traceparent",
      [](const std::string& trace_id_hex, uint64_t span_id, int flags) {
        auto context = opsight::parse_traceparent("00-" + trace_id_hex + "-0000000000000001-00");
        if (!context) throw std::invalid_argument("not a W3C trace id: '" + trace_id_hex + "'");
        context->span_id = span_id;
        context->trace_flags = static_cast<uint8_t>(flags);
        return opsight::format_traceparent(*context);
      },
      nb::arg("trace_id_hex"), nb::arg("span_id"), nb::arg("flags") = 1);
  m.def(
      "join_remote_trace",
      [](std::string_view traceparent) {
        auto context = opsight::parse_traceparent(traceparent);
        if (context) opsight::join_remote_trace(*context);
        return context.has_value();
      },
      nb::arg("traceparent"),
      "The innermost open span joins the caller's trace; False if the header does not parse.");
  m.def(
      "begin_trace",
      [](int flags) {
        opsight::TraceContext context = opsight::begin_trace(static_cast<uint8_t>(flags));
        if ((context.trace_id_high | context.trace_id_low) == 0) return std::string();
        context.span_id = 1;  // format_traceparent writes the trace id whatever the span
        return opsight::format_traceparent(context).substr(3, 32);
      },
      nb::arg("flags") = 1,
      "The innermost open span begins a trace of its own (its root); the new trace id in "
      "hex, or '' when not recording.");
  m.def(
      "set_span_id", [](uint64_t span_id) { opsight::set_span_id(span_id); }, nb::arg("span_id"));
  m.def("session_trace_id", [] {
    opsight::TraceContext context = opsight::session_trace_id();
    if ((context.trace_id_high | context.trace_id_low) == 0) return std::string();
    context.span_id = 1;
    return opsight::format_traceparent(context).substr(3, 32);
  });
  m.def("process_environment", [] {
    // The C library's environment as it is now (what a child gets when Popen's env is
    // None), including what native code changed with setenv behind os.environ's back.
    nb::dict environment;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      std::string_view text(*entry);
      size_t equals = text.find('=');
      if (equals == std::string_view::npos || equals == 0) continue;
      environment[nb::bytes(text.data(), equals)] =
          nb::bytes(text.data() + equals + 1, text.size() - equals - 1);
    }
    return environment;
  });
  m.def(
      "flow_out", [](uint64_t id) { opsight::flow_out(id); }, nb::arg("id"));
  m.def(
      "flow_in", [](uint64_t id) { opsight::flow_in(id); }, nb::arg("id"));
  m.def(
      "flow_step", [](uint64_t id) { opsight::flow_step(id); }, nb::arg("id"));
  m.def(
      "flow_into_next", [](uint64_t id) { opsight::flow_into_next(id); }, nb::arg("id"));
  m.def("set_pending_task_flow", &opsight::python::set_pending_task_flow, nb::arg("id"));
  m.def("take_pending_task_flow", &opsight::python::take_pending_task_flow);
  m.def(
      "note_task_flow",
      [](nb::handle task, uint64_t id) { opsight::python::note_task_flow(task.ptr(), id); },
      nb::arg("task"), nb::arg("id"));
  m.def("add_arg", &add_python_arg, nb::arg("key"), nb::arg("value"),
        "Adds an attribute to the calling thread's innermost open span.");
  m.def("instant", [](std::string_view name) { opsight::instant(name); });
  m.def("counter", [](std::string_view name, double value) { opsight::counter(name, value); });
  m.def("set_thread_name", [](std::string_view name) { opsight::set_thread_name(name); });
  m.def(
      "name_thread_if_unnamed",
      [](int64_t native_id, std::string_view name) {
        opsight::internal::name_thread_if_unnamed(native_id, name);
      },
      nb::arg("native_id"), nb::arg("name"),
      "Names the thread with this system id (threading.Thread.native_id) unless it named "
      "itself; a thread that has not recorded yet takes the name when it does.");
  m.def(
      "forget_unclaimed_thread_name",
      [](int64_t native_id) { opsight::internal::forget_unclaimed_thread_name(native_id); },
      nb::arg("native_id"), "The thread is ending: a name it never took is dropped.");
  m.def("recording", [] { return opsight::recording(); });
  m.def(
      "sampled_out", [] { return opsight::sampled_out(); },
      "Whether the calling thread's current track is inside a sampled-out unit.");
  m.def(
      "sampling_unit", [] { return static_cast<int>(opsight::current_sampling_unit()); },
      "The unit the calling thread is in: 0 none (or no sampling), 1 recorded, 2 sampled out.");
  m.def("decide_next_sampling_unit", &opsight::decide_next_sampling_unit, nb::arg("recorded"),
        "The next sampling unit the calling thread begins is recorded (or not) whatever the "
        "rate says; nothing when the session does not sample.");
  m.def("set_tracing_enabled", &set_python_tracing_enabled, nb::arg("enabled"));
  // GPU tracing follows the switch (opsight.integrations.cuda): false when none runs.
  m.def(
      "set_gpu_tracing_paused",
      [](bool paused) {
        return paused ? cuda::pause_gpu_collection() : cuda::resume_gpu_collection();
      },
      nb::arg("paused"));

  // Metrics (opsight._capture.metrics wraps these).
  nb::class_<opsight::MetricStart>(m, "MetricStart")
      .def_ro("groups", &opsight::MetricStart::groups);
  m.def("start_metrics", &opsight::start_metrics, nb::arg("groups"));
  m.def("finish_metrics", &opsight::finish_metrics, nb::arg("start"));
  m.def("metric_group_from_name", &opsight::metric_group_from_name, nb::arg("name"));
  m.def("count_network_bytes", &opsight::count_network_bytes, nb::arg("sent"), nb::arg("received"));
  m.def("metric_ticks", [] { return opsight::internal::now_ticks(); });
  m.def("account_metric_cost", &opsight::internal::account_metric_cost, nb::arg("group"),
        nb::arg("readings"), nb::arg("ticks"));
  m.def("set_session_metrics", &opsight::python::set_session_metrics, nb::arg("groups"),
        nb::arg("heap"));
  m.def("session_metrics", [] {
    return std::make_pair(opsight::python::session_metrics(), opsight::python::session_heap());
  });
  m.def("set_heap_hooks", [](nb::object start, nb::object finish) {
    opsight::python::set_heap_hooks(start.ptr(), finish.ptr());
  });
  m.def("tracing_enabled", &python_tracing_enabled);

  // Spans at times measured elsewhere, for a front end that records after the fact
  // (opsight bench writes its timed queries once they have run): `ticks` on the recorder's
  // clock, as metric_ticks() reads it. The calling thread writes each track's events in
  // time order; end_at closes the innermost open span of the thread's current track.
  m.def(
      "begin_at",
      [](uint32_t name_id, uint64_t ticks) {
        if (!opsight::recording()) return false;
        format::Slot* slot = internal::reserve(1);
        if (slot == nullptr) return false;
        internal::write_slot(slot, ticks, internal::slot_word(name_id, format::SlotKind::kBegin));
        internal::commit(1);
        return true;
      },
      nb::arg("name_id"), nb::arg("ticks"),
      "Begins a span at `ticks`; returns whether it recorded (call end_at() only then).");
  m.def(
      "end_at",
      [](uint64_t ticks) {
        format::Slot* slot = internal::reserve(1);
        if (slot == nullptr) {
          internal::note_lost_end();
          return;
        }
        internal::write_slot(slot, ticks, internal::slot_word(0, format::SlotKind::kEnd));
        internal::commit(1);
      },
      nb::arg("ticks"));
  m.def(
      "switch_track", [](uint64_t key, std::string_view name) { opsight::switch_track(key, name); },
      nb::arg("key"), nb::arg("name") = "",
      "The calling thread's following events belong to async track `key` (0: its own).");
  // opsight ctl (opsight._session.control wraps these; the protocol is session/control.hpp).
  m.def("control_directory", [] { return session::control_directory(); });
  m.def("start_control_watcher", &start_python_control_watcher, nb::arg("apply"),
        nb::arg("enabled"), nb::arg("apply_requests") = nb::none(),
        "Publishes this process's state and calls apply(enabled) on a request, "
        "apply_requests(N) on 'requests N' (its answer is the state published); false (after "
        "one warning on stderr) where the control directory is refused.");
  m.def("stop_control_watcher", &session::stop_control_watcher,
        nb::call_guard<nb::gil_scoped_release>());
  m.def("publish_control_state", &session::publish_control_state, nb::arg("state"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Rewrites this process's published state (no watcher: does nothing).");
  m.def(
      "control_state",
      [](int pid) {
        session::TracedProcessState found = session::traced_process_state(pid);
        return std::make_tuple(found.state_path, found.state, found.problem);
      },
      nb::arg("pid"), "(state file, its state or None, a refused directory's problem or '').");
  m.def(
      "control_request",
      [](int pid, std::string_view state) { return session::request_state(pid, state); },
      nb::arg("pid"), nb::arg("state"), "Asks process pid to switch; an error message or None.");
  m.def(
      "check_ring_options",
      [](const std::string& ring, const std::string& dump_on_slow) -> std::optional<std::string> {
        std::string error;
        if (!record::parse_ring_limits(ring, &error)) return error;
        if (!session::parse_slow_span_rules(dump_on_slow, &error)) return error;
        return std::nullopt;
      },
      nb::arg("ring"), nb::arg("dump_on_slow") = "",
      "What is wrong with a flight recorder's ring spec or dump-on-slow rules, or None.");
  m.def(
      "control_dumped",
      [](int pid) -> std::optional<std::pair<std::string, int64_t>> {
        return session::dumped_state(pid);
      },
      nb::arg("pid"), "(the answer to the last dump request, its modification time ns) or None.");
  m.def("control_published_states", [] {
    session::PublishedStates published = session::published_states();
    std::vector<std::pair<int, std::string>> processes(published.processes.begin(),
                                                       published.processes.end());
    return std::make_pair(std::move(processes), std::move(published.problems));
  });

  nb::class_<Session>(m, "Session")
      .def(
          "__init__",
          [](Session* self, const std::string& output, size_t buffer_mb, uint32_t flush_ms,
             uint32_t sample_ms, double sample_rate, const std::string& sample_root, bool cuda,
             const std::string& cupti_path, const std::string& ring, const std::string& dump_prefix,
             const std::string& dump_on_slow, bool dump_on_exception, bool sample_operators_only) {
            SessionOptions options;
            options.ring = ring;
            options.dump_prefix = dump_prefix;
            options.dump_on_slow = dump_on_slow;
            options.dump_on_exception = dump_on_exception;
            options.sample_operators_only = sample_operators_only;
            options.cuda = cuda;
            options.cupti_path = cupti_path;
            options.output = output;
            options.buffer_bytes = buffer_mb << 20;
            options.flush_interval_ms = flush_ms;
            options.sample_interval_ms = sample_ms;
            options.sample_rate = sample_rate;
            options.sample_root = sample_root;
            reset_task_tracks();
            new (self) Session(options);
          },
          nb::arg("output") = "", nb::arg("buffer_mb") = 64, nb::arg("flush_interval_ms") = 100,
          nb::arg("sample_interval_ms") = 0, nb::arg("sample_rate") = 1.0,
          nb::arg("sample_root") = "", nb::arg("cuda") = false, nb::arg("cupti_path") = "",
          nb::arg("ring") = "", nb::arg("dump_prefix") = "", nb::arg("dump_on_slow") = "",
          nb::arg("dump_on_exception") = true, nb::arg("sample_operators_only") = false)
      .def(
          "dump",
          [](Session& session, const std::string& trigger) {
            std::string error;
            std::string path = session.dump(trigger, &error);
            if (path.empty()) throw std::runtime_error(error);
            return path;
          },
          nb::arg("trigger"), nb::call_guard<nb::gil_scoped_release>(),
          "Writes what the flight recorder's ring holds to the next dump file; its path. "
          "RuntimeError without a ring.")
      .def("pause", &Session::pause)
      .def("resume", &Session::resume)
      .def("stop", &Session::stop, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("ok", &Session::ok)
      .def_prop_ro("error", &Session::error)
      .def_prop_ro("events_dropped", &Session::events_dropped)
      .def_prop_ro("gpu_status", &Session::gpu_status)
      .def(
          "start_gpu_tracing",
          [](Session& session, const std::string& cupti_path) {
            return session.start_gpu_tracing(cupti_path);
          },
          nb::arg("cupti_path") = "")
      .def("take_native_bytes", [](Session& session) {
        std::string bytes = session.take_native_bytes();
        return nb::bytes(bytes.data(), bytes.size());
      });

  // Export targets and OTEL_* settings checked before a program starts: ValueError naming
  // what is wrong (an unknown kind, a URL that is not one, a librdkafka property, an
  // OTEL_EXPORTER_OTLP_PROTOCOL opsight does not speak, a bad OTEL_BSP_* value).
  m.def(
      "check_export_targets",
      [](const std::vector<std::string>& targets) { export_request(targets, "", 1.0, 0); },
      nb::arg("targets"));
  m.def("otel_sdk_disabled",
        [] { return exporting::sdk_disabled(exporting::process_environment()); });

  // Live span export from the trace files of a run (export/live_export.hpp).
  nb::class_<exporting::LiveSpanExporter>(m, "LiveSpanExporter")
      .def(
          "__init__",
          [](exporting::LiveSpanExporter* self, const std::string& directory,
             const std::vector<std::string>& targets, const std::string& service,
             double timeout_s) {
            ExportRequest request = export_request(targets, service, timeout_s, 0);
            new (self)
                exporting::LiveSpanExporter(directory, "trace.", ".opsight",
                                            std::move(request.targets), std::move(request.options));
          },
          nb::arg("directory"), nb::arg("targets"), nb::arg("service") = "",
          nb::arg("timeout_s") = 10.0)
      .def("start", &exporting::LiveSpanExporter::start)
      .def(
          "stop",
          [](exporting::LiveSpanExporter& exporter, double timeout_s) {
            std::vector<exporting::TargetReport> reports;
            {
              nb::gil_scoped_release release;
              reports = exporter.stop(timeout_s);
            }
            return export_reports(reports, {});
          },
          nb::arg("timeout_s") = 10.0);

  // The live /metrics endpoint over the trace files of a run (export/metrics_endpoint.hpp).
  nb::class_<exporting::MetricsEndpoint>(m, "MetricsEndpoint")
      .def(nb::init<std::string, std::string, std::string>(), nb::arg("directory"),
           nb::arg("prefix") = "trace.", nb::arg("suffix") = ".opsight")
      .def(
          "start",
          [](exporting::MetricsEndpoint& endpoint, const std::string& host, int port) {
            if (std::string error = endpoint.start(host, port); !error.empty())
              throw std::runtime_error(error);
            return endpoint.port();
          },
          nb::arg("host") = "127.0.0.1", nb::arg("port") = 0)
      .def_prop_ro("port", &exporting::MetricsEndpoint::port)
      .def("scrape", &exporting::MetricsEndpoint::scrape, nb::call_guard<nb::gil_scoped_release>())
      .def("stop", &exporting::MetricsEndpoint::stop, nb::call_guard<nb::gil_scoped_release>());

  nb::class_<LoadedTrace>(m, "Trace")
      .def_prop_ro("damage", [](const LoadedTrace& loaded) { return loaded.damage; })
      .def_prop_ro("source_name", [](const LoadedTrace& loaded) { return loaded.source_name; })
      .def("render", &render, nb::arg("view"), nb::arg("format") = "text",
           nb::arg("sort") = "total", nb::arg("limit") = 0, nb::arg("max_roots") = 20,
           nb::arg("span") = "", nb::arg("by_category") = false,
           nb::arg("categories") = std::vector<std::string>{}, nb::arg("max_depth") = 0)
      .def("slice_columns", &slice_columns, nb::arg("metric_columns") = false)
      .def("counter_columns", &counter_columns)
      .def("append", &append_shifted, nb::arg("other"), nb::arg("shift_ns") = 0,
           nb::call_guard<nb::gil_scoped_release>(),
           "Appends other's events, their timestamps plus shift_ns, to this trace (threads "
           "shared by pid and tid are merged and nested again).")
      .def(
          "keep_time_window",
          [](LoadedTrace& loaded, int64_t begin_ns, int64_t end_ns) {
            trace::keep_time_window(loaded.trace, begin_ns, end_ns);
          },
          nb::arg("begin_ns"), nb::arg("end_ns"),
          "Drops the events that start outside [begin_ns, end_ns].")
      .def("slice_times", &slice_times, nb::arg("name"),
           "(tid, start, end) of every slice named `name`.")
      .def("run_info", &run_info)
      .def("note_export", &note_export, nb::arg("target"), nb::arg("spans"), nb::arg("sent"),
           nb::arg("dropped"),
           "Records what an export did (live export's reports) in the run info: reports show "
           "it in their overhead line, and the file and the run store keep it.")
      .def("export", &export_trace, nb::arg("targets"), nb::arg("service") = "",
           nb::arg("timeout_s") = 30.0, nb::arg("batch_spans") = 0,
           "Sends the trace to each target (otlp[=URL], otlp-json=URL, zipkin[=URL], "
           "pushgateway=URL, kafka[=BROKERS][?topic=T&PROPERTY=VALUE...], loki[=URL]); one "
           "dict per target, also recorded in the trace's run info (note_export).")
      .def(
          "write",
          [](const LoadedTrace& loaded, const std::string& path) {
            if (auto error = io::write_trace_file(loaded.trace, path))
              throw std::runtime_error(*error);
          },
          nb::arg("path"));

  m.def(
      "read_trace",
      [](const std::string& path) { return from_read_result(io::read_trace_file(path), path); },
      nb::arg("path"), "Reads a .opsight or Chrome JSON file.");
  m.def(
      "merge_trace_files",
      [](const std::vector<std::string>& paths, const std::string& name) {
        io::ReadFilesResult result = io::read_trace_files(paths);
        if (result.error) throw std::invalid_argument(*result.error);
        LoadedTrace loaded{std::move(result.trace), std::nullopt, name};
        if (!result.damage.empty()) {
          std::string damage = result.damage.front();
          if (result.damage.size() > 1)
            damage += " (and " + std::to_string(result.damage.size() - 1) + " more file" +
                      (result.damage.size() > 2 ? "s" : "") + " like it)";
          loaded.damage = damage;
        }
        return loaded;
      },
      nb::arg("paths"), nb::arg("name") = "run",
      "Reads the files of one run's processes and merges them into one trace.");
  m.def("compare", &compare_traces, nb::arg("a"), nb::arg("b"), nb::arg("alpha") = 0.01,
        nb::arg("min_change") = 0.02, nb::arg("min_samples") = 5, nb::arg("fail_threshold") = -1.0,
        nb::arg("format") = "json", "Compares two traces (opsight compare), rendered in `format`.");
  m.def("load", &load_source, nb::arg("source"), nb::arg("store_path") = "",
        nb::call_guard<nb::gil_scoped_release>(),
        "Reads a trace file or a run of the store (store/trace_source.hpp's rule).");
  m.def(
      "save_trace_files",
      [](const std::vector<std::string>& files, const std::string& store_path,
         const std::string& name, const std::string& command, const std::string& working_directory,
         const std::vector<std::pair<std::string, std::string>>& tags,
         const std::vector<std::pair<std::string, std::string>>& versions) {
        store::SaveRequest request =
            save_request(store_path, name, command, working_directory, tags, versions);
        request.files = files;
        store::SaveOutcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = store::save_trace_files(request);
        }
        return save_outcome(outcome);
      },
      nb::arg("files"), nb::arg("store_path") = "", nb::arg("name") = "", nb::arg("command") = "",
      nb::arg("working_directory") = "",
      nb::arg("tags") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("versions") = std::vector<std::pair<std::string, std::string>>{},
      "Saves trace files (one run's processes, merged) as a run of the store.");
  m.def(
      "save_trace",
      [](const LoadedTrace& loaded, const std::string& store_path, const std::string& name,
         const std::string& command, const std::string& working_directory,
         const std::vector<std::pair<std::string, std::string>>& tags,
         const std::vector<std::pair<std::string, std::string>>& versions) {
        store::SaveRequest request =
            save_request(store_path, name, command, working_directory, tags, versions);
        store::SaveOutcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = store::save_trace(loaded.trace, request);
        }
        return save_outcome(outcome);
      },
      nb::arg("trace"), nb::arg("store_path") = "", nb::arg("name") = "", nb::arg("command") = "",
      nb::arg("working_directory") = "",
      nb::arg("tags") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("versions") = std::vector<std::pair<std::string, std::string>>{},
      "Saves a trace in memory as a run of the store.");
  m.def(
      "report_views",
      [] {
        std::vector<std::string> names;
        for (const report::ReportView& view : report::report_views()) names.emplace_back(view.name);
        return names;
      },
      "The report views render() takes, in `opsight report`'s order.");
  m.def(
      "trace_from_native_bytes",
      [](nb::bytes bytes, const std::string& name) {
        return from_read_result(
            io::read_native(std::string_view(static_cast<const char*>(bytes.data()), bytes.size())),
            name);
      },
      nb::arg("bytes"), nb::arg("name") = "profile");
  m.def("push_metric_families", &push_metric_families, nb::arg("url"), nb::arg("families"),
        nb::arg("default_job") = "opsight", nb::arg("timeout_s") = 30.0,
        "PUTs metric families to a Pushgateway; returns the report (sent, dropped, error).");
  m.def("push_log_lines", &push_log_lines, nb::arg("url"), nb::arg("lines"),
        nb::arg("batch_lines") = 500, nb::arg("timeout_s") = 30.0,
        "POSTs labelled log lines to Loki's push API; returns the report.");
}
