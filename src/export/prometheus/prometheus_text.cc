#include "export/prometheus/prometheus_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <unordered_map>

#include "export/optional_whitespace.hpp"

namespace opsight::exporting {

namespace {

void append_label_value(std::string& out, std::string_view value) {
  for (char character : value) {
    if (character == '\\')
      out += "\\\\";
    else if (character == '"')
      out += "\\\"";
    else if (character == '\n')
      out += "\\n";
    else
      out += character;
  }
}

void append_number(std::string& out, double value) {
  if (std::isnan(value))
    out += "NaN";
  else if (std::isinf(value))
    out += value > 0 ? "+Inf" : "-Inf";
  else
    fmt::format_to(std::back_inserter(out), "{}", value);
}

void family_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// ` # {trace_id="...",span_id="..."} value timestamp` after a bucket's count (OpenMetrics
// exemplar; its label set is 63 characters, under the format's limit of 128).
void append_exemplar(std::string& out, const Exemplar& exemplar) {
  if (exemplar.span_id == 0) return;
  out += " # {trace_id=\"";
  out += exemplar.trace_id.to_hex();
  out += "\",span_id=\"";
  out += trace::span_id_to_hex(exemplar.span_id);
  out += "\"} ";
  append_number(out, exemplar.value_seconds);
  int64_t seconds = exemplar.end_unix_ns / 1'000'000'000;
  int64_t nanoseconds = exemplar.end_unix_ns % 1'000'000'000;
  if (nanoseconds < 0) {
    nanoseconds += 1'000'000'000;
    --seconds;
  }
  fmt::format_to(std::back_inserter(out), " {}.{:09}", seconds, nanoseconds);
}

bool equals_ignoring_case(std::string_view left, std::string_view right) {
  return std::equal(left.begin(), left.end(), right.begin(), right.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

// OpenTelemetry's GenAI metrics (semantic conventions, gen-ai-metrics.md): each one's
// Prometheus name (OpenTelemetry's Prometheus compatibility rules: dots to underscores, the
// unit "s" as the suffix _seconds, an annotation unit like {token} dropped) and the bucket
// boundaries the conventions give it.
constexpr double kTokenBuckets[] = {1,     4,     16,     64,      256,     1024,     4096,
                                    16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
constexpr double kOperationBuckets[] = {0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                        1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
constexpr double kFirstTokenBuckets[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
constexpr double kPerOutputTokenBuckets[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                             0.3,  0.4,   0.5,  0.75,  1.0, 2.5};

using GenAiMetric = GenAiMetricInfo;

enum GenAiMetricIndex : int {
  kTokenUsage = 0,
  kClientOperationDuration,
  kClientTimeToFirstChunk,
  kClientTimePerOutputChunk,
  kServerRequestDuration,
  kServerTimeToFirstToken,
  kServerTimePerOutputToken,
};

constexpr GenAiMetric kGenAiMetrics[] = {
    {"gen_ai.client.token.usage", "gen_ai_client_token_usage", "{token}",
     "Number of input and output tokens used (OpenTelemetry gen_ai.client.token.usage).",
     kTokenBuckets},
    {"gen_ai.client.operation.duration", "gen_ai_client_operation_duration_seconds", "s",
     "GenAI operation duration, measured by the client (gen_ai.client.operation.duration).",
     kOperationBuckets},
    {"gen_ai.client.operation.time_to_first_chunk",
     "gen_ai_client_operation_time_to_first_chunk_seconds", "s",
     "Time to the first output chunk, measured by the client "
     "(gen_ai.client.operation.time_to_first_chunk).",
     kOperationBuckets},
    {"gen_ai.client.operation.time_per_output_chunk",
     "gen_ai_client_operation_time_per_output_chunk_seconds", "s",
     "Time from one output chunk to the next, measured by the client "
     "(gen_ai.client.operation.time_per_output_chunk).",
     kOperationBuckets},
    {"gen_ai.server.request.duration", "gen_ai_server_request_duration_seconds", "s",
     "Generative AI server request duration, to the last output token "
     "(gen_ai.server.request.duration).",
     kOperationBuckets},
    {"gen_ai.server.time_to_first_token", "gen_ai_server_time_to_first_token_seconds", "s",
     "Time to generate the first token for successful responses "
     "(gen_ai.server.time_to_first_token).",
     kFirstTokenBuckets},
    {"gen_ai.server.time_per_output_token", "gen_ai_server_time_per_output_token_seconds", "s",
     "Time per output token generated after the first token for successful responses "
     "(gen_ai.server.time_per_output_token).",
     kPerOutputTokenBuckets},
};

void add_label(std::string& labels, std::string_view name, std::string_view value) {
  if (value.empty()) return;  // Prometheus reads an empty label as an absent one
  if (!labels.empty()) labels += ',';
  labels += name;
  labels += "=\"";
  append_label_value(labels, value);
  labels += '"';
}

double number_of(const trace::ArgValue& value) {
  switch (value.type) {
    case trace::ArgType::kDouble:
      return value.double_value;
    case trace::ArgType::kInt:
    case trace::ArgType::kBool:
      return static_cast<double>(value.int_value);
    case trace::ArgType::kString:
      break;
  }
  return std::nan("");
}

}  // namespace

std::span<const GenAiMetricInfo> gen_ai_metrics() { return kGenAiMetrics; }

std::vector<std::pair<std::string, std::string>> gen_ai_attributes(std::string_view label_text) {
  // Prometheus's label names (add_label's) and the attributes they stand for, in order.
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"gen_ai_operation_name", "gen_ai.operation.name"},
      {"gen_ai_provider_name", "gen_ai.provider.name"},
      {"gen_ai_request_model", "gen_ai.request.model"},
      {"gen_ai_token_type", "gen_ai.token.type"},
      {"error_type", "error.type"},
      {"server_address", "server.address"},
      {"server_port", "server.port"}};
  std::vector<std::pair<std::string, std::string>> labels;
  size_t at = 0;
  while (at < label_text.size()) {
    size_t equals = label_text.find("=\"", at);
    if (equals == std::string_view::npos) break;
    std::string name(label_text.substr(at, equals - at));
    std::string value;
    size_t position = equals + 2;
    for (; position < label_text.size() && label_text[position] != '"'; ++position) {
      char character = label_text[position];
      if (character == '\\' && position + 1 < label_text.size()) {
        char next = label_text[++position];
        value += next == 'n' ? '\n' : next;
      } else {
        value += character;
      }
    }
    labels.emplace_back(std::move(name), std::move(value));
    at = position + 2;  // past the quote and the comma
  }
  std::vector<std::pair<std::string, std::string>> attributes;
  for (const auto& [prometheus, otel] : kNames)
    for (const auto& label : labels)
      if (label.first == prometheus) attributes.emplace_back(std::string(otel), label.second);
  return attributes;
}

void GenAiRequest::set(std::string_view key, const trace::ArgValue& value, std::string_view text) {
  if (!key.starts_with("gen_ai.") && !key.starts_with("error.") && !key.starts_with("server.") &&
      key != "span.kind")
    return;
  bool is_text = value.type == trace::ArgType::kString;
  double number = number_of(value);
  if (key == "gen_ai.operation.name" && is_text)
    operation = text;
  else if (key == "gen_ai.provider.name" && is_text)
    provider = text;
  else if (key == "gen_ai.request.model" && is_text)
    model = text;
  else if (key == "error.type")
    error_type = is_text ? text : std::string_view("_OTHER");
  else if (key == "server.address" && is_text)
    server_address = text;
  else if (key == "server.port" && !is_text && number >= 0)
    server_port = static_cast<int64_t>(number);
  else if (key == "span.kind" && is_text)
    client = text == "client";
  else if (key == "gen_ai.usage.input_tokens" && !is_text && number >= 0)
    input_tokens = static_cast<int64_t>(number);
  else if (key == "gen_ai.usage.output_tokens" && !is_text && number >= 0)
    output_tokens = static_cast<int64_t>(number);
  else if ((key == "gen_ai.server.time_to_first_token" ||
            key == "gen_ai.client.operation.time_to_first_chunk") &&
           !is_text && number >= 0)
    time_to_first_token = number;
  else if (key == "gen_ai.server.time_per_output_token" && !is_text && number >= 0)
    time_per_output_token = number;
}

void MetricsSnapshot::add_gen_ai_request(const GenAiRequest& request,
                                         std::span<const int64_t> chunk_ns,
                                         const SpanOrigin& origin) {
  const bool with_exemplar = origin.span_id != 0 && origin.trace_id != trace::TraceId{};
  std::string labels;  // in the order of the label names, as Prometheus sorts them
  std::string port = request.server_port >= 0 ? std::to_string(request.server_port) : "";
  auto labels_of = [&](bool with_error, std::string_view token_type) {
    labels.clear();
    if (with_error) add_label(labels, "error_type", request.error_type);
    add_label(labels, "gen_ai_operation_name", request.operation);
    add_label(labels, "gen_ai_provider_name", request.provider);
    add_label(labels, "gen_ai_request_model", request.model);
    add_label(labels, "gen_ai_token_type", token_type);
    add_label(labels, "server_address", request.server_address);
    add_label(labels, "server_port", port);
    return labels;
  };
  auto observe = [&](int metric, const std::string& label_text, double value) {
    BucketHistogram& histogram = gen_ai[{metric, label_text}];
    std::span<const double> bounds = kGenAiMetrics[metric].bounds;
    if (histogram.buckets.empty()) {
      histogram.buckets.resize(bounds.size());
      histogram.exemplars.resize(bounds.size() + 1);
    }
    size_t bucket =
        static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
    if (bucket < bounds.size()) ++histogram.buckets[bucket];
    if (with_exemplar)
      histogram.exemplars[bucket] = {origin.trace_id, origin.span_id, value, origin.end_unix_ns};
    ++histogram.count;
    histogram.sum += value;
  };
  bool failed = !request.error_type.empty();
  observe(request.client ? kClientOperationDuration : kServerRequestDuration, labels_of(true, ""),
          std::max(0.0, request.duration_seconds));
  if (failed) return;  // the other metrics are of successful responses
  if (request.input_tokens >= 0)
    observe(kTokenUsage, labels_of(false, "input"), static_cast<double>(request.input_tokens));
  if (request.output_tokens >= 0)
    observe(kTokenUsage, labels_of(false, "output"), static_cast<double>(request.output_tokens));
  labels_of(false, "");
  if (request.time_to_first_token >= 0)
    observe(request.client ? kClientTimeToFirstChunk : kServerTimeToFirstToken, labels,
            request.time_to_first_token);
  if (!request.client && request.time_per_output_token >= 0)
    observe(kServerTimePerOutputToken, labels, request.time_per_output_token);
  if (request.client)
    for (int64_t duration : chunk_ns)
      observe(kClientTimePerOutputChunk, labels,
              static_cast<double>(std::max<int64_t>(0, duration)) * 1e-9);
}

void DurationHistogram::add(int64_t duration_ns, const SpanOrigin& origin) {
  double seconds = static_cast<double>(std::max<int64_t>(0, duration_ns)) * 1e-9;
  size_t bucket = static_cast<size_t>(
      std::lower_bound(std::begin(kDurationBuckets), std::end(kDurationBuckets), seconds) -
      std::begin(kDurationBuckets));
  if (bucket < kDurationBucketCount) ++buckets[bucket];
  ++count;
  sum_seconds += seconds;
  if (origin.span_id != 0 && origin.trace_id != trace::TraceId{})
    exemplars[bucket] = {origin.trace_id, origin.span_id, seconds, origin.end_unix_ns};
}

void MetricsSnapshot::set_counter(std::string_view name, int64_t pid, double value, int64_t ns) {
  counters[{std::string(name), pid}] = value;
  if (!is_rate_counter(name)) return;
  RateTotal& rate = rate_totals[{std::string(name), pid}];
  if (rate.started && ns > rate.last_ns)
    rate.total += value * static_cast<double>(ns - rate.last_ns) / 1e9;
  if (!rate.started || ns > rate.last_ns) rate.last_ns = ns;
  rate.started = true;
}

void MetricsSnapshot::add_span(std::string_view name, int64_t duration_ns,
                               const SpanOrigin& origin) {
  auto it = spans.find(name);
  if (it == spans.end()) it = spans.emplace(std::string(name), DurationHistogram{}).first;
  it->second.add(duration_ns, origin);
}

ExpositionFormat exposition_format_for(std::string_view accept) {
  double openmetrics_quality = 0, text_quality = 0;  // the best q-value of each
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    size_t semicolon = range.find(';');
    std::string_view media_type = trim_optional_whitespace(range.substr(0, semicolon));
    double quality = 1;
    std::string_view version;
    while (semicolon != std::string_view::npos) {
      range = range.substr(semicolon + 1);
      semicolon = range.find(';');
      std::string_view parameter = trim_optional_whitespace(range.substr(0, semicolon));
      size_t equals = parameter.find('=');
      if (equals == std::string_view::npos) continue;
      std::string_view key = trim_optional_whitespace(parameter.substr(0, equals));
      std::string_view value = trim_optional_whitespace(parameter.substr(equals + 1));
      if (equals_ignoring_case(key, "q"))
        quality = std::strtod(std::string(value).c_str(), nullptr);
      else if (equals_ignoring_case(key, "version"))
        version = value;
    }
    if (equals_ignoring_case(media_type, "application/openmetrics-text")) {
      if (version.empty() || version == "1.0.0" || version == "0.0.1")
        openmetrics_quality = std::max(openmetrics_quality, quality);
    } else if (equals_ignoring_case(media_type, "text/plain") ||
               equals_ignoring_case(media_type, "text/*") ||
               equals_ignoring_case(media_type, "*/*")) {
      text_quality = std::max(text_quality, quality);
    }
  }
  return openmetrics_quality > 0 && openmetrics_quality >= text_quality
             ? ExpositionFormat::kOpenMetrics
             : ExpositionFormat::kPrometheusText;
}

std::string prometheus_name(std::string_view text) {
  std::string name;
  name.reserve(text.size());
  for (char character : text) {
    bool allowed = (character >= 'a' && character <= 'z') ||
                   (character >= 'A' && character <= 'Z') ||
                   (character >= '0' && character <= '9') || character == '_' || character == ':';
    name += allowed ? character : '_';
  }
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) name.insert(name.begin(), '_');
  return name;
}

MetricsSnapshot metrics_of(const trace::Trace& trace, const SpanView* ids) {
  MetricsSnapshot metrics;
  std::vector<DurationHistogram*> of_name(trace.strings.size(), nullptr);
  std::optional<trace::StringId> gen_ai_request = trace.strings.find(kGenAiRequestSpan);
  // Each request's chunk durations (its gen_ai.inter_token children), by the request's row.
  std::unordered_map<trace::RowIndex, std::vector<int64_t>> chunks;
  if (gen_ai_request)
    if (auto chunk = trace.strings.find(kGenAiChunkSpan))
      for (size_t row = 0; row < trace.slices.size(); ++row) {
        trace::RowIndex parent = trace.slices.parent[row];
        if (trace.slices.name[row] == *chunk && parent != trace::kNoRow &&
            trace.slices.name[parent] == *gen_ai_request)
          chunks[parent].push_back(trace.slices.dur[row]);
      }
  for (size_t row = 0; row < trace.slices.size(); ++row) {
    trace::StringId name = trace.slices.name[row];
    DurationHistogram*& histogram = of_name[name];
    if (histogram == nullptr) histogram = &metrics.spans[std::string(trace.str(name))];
    SpanOrigin origin;
    if (ids != nullptr) {
      auto index = static_cast<trace::RowIndex>(row);
      origin = {ids->trace_id(index), ids->span_id(index), ids->end_unix_ns(index)};
    }
    histogram->add(trace.slices.dur[row], origin);
    if (name != gen_ai_request || (trace.slices.flags[row] & trace::kSliceUnfinished)) continue;
    GenAiRequest request;
    request.duration_seconds = static_cast<double>(trace.slices.dur[row]) * 1e-9;
    const trace::ArgTable& args = trace.slice_args;
    for (auto arg = trace.slices.args_begin[row]; arg < trace.slices.args_begin[row + 1]; ++arg) {
      const trace::ArgValue& value = args.value[arg];
      request.set(trace.str(args.key[arg]), value,
                  value.type == trace::ArgType::kString ? trace.str(value.string_value)
                                                        : std::string_view());
    }
    auto found = chunks.find(static_cast<trace::RowIndex>(row));
    metrics.add_gen_ai_request(request,
                               found == chunks.end() ? std::span<const int64_t>()
                                                     : std::span<const int64_t>(found->second),
                               origin);
  }
  metrics.overhead_seconds = static_cast<double>(trace.run.overhead_ns) * 1e-9;
  metrics.traced_seconds = static_cast<double>(trace.run.traced_ns) * 1e-9;
  metrics.events_dropped = trace.run.events_dropped;
  std::vector<int64_t> last_ts(trace.counter_tracks.size(), INT64_MIN);
  for (size_t row = 0; row < trace.counters.size(); ++row) {
    uint32_t track = trace.counters.counter_track[row];
    if (trace.counters.ts[row] < last_ts[track]) continue;
    last_ts[track] = trace.counters.ts[row];
    metrics.set_counter(trace.str(trace.counter_tracks[track].name),
                        trace.counter_tracks[track].pid, trace.counters.value[row],
                        trace.counters.ts[row]);
  }
  return metrics;
}

std::string prometheus_exposition(const MetricsSnapshot& metrics, ExpositionFormat format) {
  const bool openmetrics = format == ExpositionFormat::kOpenMetrics;
  std::string out;
  if (!metrics.spans.empty()) {
    family_header(out, "opsight_span_duration_seconds", "histogram",
                  "Duration of the spans opsight recorded, per span name.");
    for (const auto& [name, histogram] : metrics.spans) {
      std::string label;
      append_label_value(label, name);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kDurationBucketCount; ++i) {
        cumulative += histogram.buckets[i];
        fmt::format_to(std::back_inserter(out),
                       "opsight_span_duration_seconds_bucket{{span=\"{}\",le=\"", label);
        append_number(out, kDurationBuckets[i]);
        fmt::format_to(std::back_inserter(out), "\"}} {}", cumulative);
        if (openmetrics) append_exemplar(out, histogram.exemplars[i]);
        out += '\n';
      }
      fmt::format_to(std::back_inserter(out),
                     "opsight_span_duration_seconds_bucket{{span=\"{}\",le=\"+Inf\"}} {}", label,
                     histogram.count);
      if (openmetrics) append_exemplar(out, histogram.exemplars[kDurationBucketCount]);
      out += '\n';
      fmt::format_to(std::back_inserter(out), "opsight_span_duration_seconds_sum{{span=\"{}\"}} ",
                     label);
      append_number(out, histogram.sum_seconds);
      fmt::format_to(std::back_inserter(out),
                     "\nopsight_span_duration_seconds_count{{span=\"{}\"}} {}\n", label,
                     histogram.count);
    }
  }
  for (auto it = metrics.gen_ai.begin(); it != metrics.gen_ai.end(); ++it) {
    const GenAiMetric& metric = kGenAiMetrics[it->first.first];
    if (it == metrics.gen_ai.begin() || std::prev(it)->first.first != it->first.first)
      family_header(out, metric.prometheus_name, "histogram", metric.help);
    const std::string& labels = it->first.second;
    const BucketHistogram& histogram = it->second;
    // name_suffix{labels[,le="bound"]} (no braces at all when there is no label)
    auto series = [&](std::string_view suffix, double bound, bool with_bound) {
      out += metric.prometheus_name;
      out += suffix;
      if (labels.empty() && !with_bound) return;
      out += '{';
      out += labels;
      if (with_bound) {
        out += labels.empty() ? "le=\"" : ",le=\"";
        append_number(out, bound);
        out += '"';
      }
      out += '}';
    };
    uint64_t cumulative = 0;
    for (size_t i = 0; i < metric.bounds.size(); ++i) {
      cumulative += histogram.buckets[i];
      series("_bucket", metric.bounds[i], true);
      fmt::format_to(std::back_inserter(out), " {}", cumulative);
      if (openmetrics) append_exemplar(out, histogram.exemplars[i]);
      out += '\n';
    }
    series("_bucket", std::numeric_limits<double>::infinity(), true);
    fmt::format_to(std::back_inserter(out), " {}", histogram.count);
    if (openmetrics) append_exemplar(out, histogram.exemplars[metric.bounds.size()]);
    out += '\n';
    series("_sum", 0, false);
    out += ' ';
    append_number(out, histogram.sum);
    out += '\n';
    series("_count", 0, false);
    fmt::format_to(std::back_inserter(out), " {}\n", histogram.count);
  }
  // `name` ends in _total: OpenMetrics names the family without it, its sample with it.
  auto counter = [&](std::string_view name, std::string_view help, double value) {
    family_header(out, openmetrics ? name.substr(0, name.size() - 6) : name, "counter", help);
    out += name;
    out += ' ';
    append_number(out, value);
    out += '\n';
  };
  if (metrics.overhead_seconds >= 0)
    counter("opsight_tracer_overhead_seconds_total", "Time the tracer spent on itself.",
            metrics.overhead_seconds);
  if (metrics.traced_seconds >= 0)
    counter("opsight_traced_seconds_total", "Wall time the tracer recorded.",
            metrics.traced_seconds);
  counter("opsight_events_dropped_total", "Events the tracer dropped at its memory bound.",
          static_cast<double>(metrics.events_dropped));

  // A counter family per rate (its quantity's total), a sample per pid.
  std::map<std::string, std::vector<std::pair<int64_t, double>>> totals;
  for (const auto& [key, rate] : metrics.rate_totals) {
    std::string name = prometheus_name(rate_counter_quantity(key.first));
    bool nanoseconds = name.ends_with("_ns");
    if (nanoseconds) name = name.substr(0, name.size() - 3) + "_seconds";
    totals["opsight_" + name].emplace_back(key.second, nanoseconds ? rate.total / 1e9 : rate.total);
  }
  for (const auto& [family, samples] : totals) {
    family_header(out, openmetrics ? family : family + "_total", "counter",
                  "Total of the rate opsight sampled, since its first sample.");
    for (const auto& [pid, value] : samples) {
      fmt::format_to(std::back_inserter(out), "{}_total{{pid=\"{}\"}} ", family, pid);
      append_number(out, value);
      out += '\n';
    }
  }

  // One gauge family per counter name (but the rates: their totals above), a sample per pid.
  std::map<std::string, std::vector<std::pair<int64_t, double>>> families;
  for (const auto& [key, value] : metrics.counters) {
    if (is_rate_counter(key.first)) continue;
    std::string name = prometheus_name(key.first);
    bool nanoseconds = name.ends_with("_ns");
    if (nanoseconds) name = name.substr(0, name.size() - 3) + "_seconds";
    families["opsight_" + name].emplace_back(key.second, nanoseconds ? value * 1e-9 : value);
  }
  for (const auto& [family, samples] : families) {
    family_header(out, family, "gauge", "Last sample of the counter opsight recorded.");
    for (const auto& [pid, value] : samples) {
      fmt::format_to(std::back_inserter(out), "{}{{pid=\"{}\"}} ", family, pid);
      append_number(out, value);
      out += '\n';
    }
  }
  if (openmetrics) out += "# EOF\n";
  return out;
}

std::string prometheus_exposition(std::span<const MetricFamily> families) {
  std::string out;
  for (const MetricFamily& family : families) {
    std::string name = prometheus_name(family.name);
    std::string help;
    for (char character : family.help) help += character == '\n' ? ' ' : character;
    family_header(out, name, family.type.empty() ? "untyped" : family.type, help);
    for (const MetricSample& sample : family.samples) {
      out += name;
      if (!sample.labels.empty()) {
        out += '{';
        bool first = true;
        for (const auto& [label, value] : sample.labels) {
          if (!first) out += ',';
          first = false;
          out += prometheus_name(label);
          out += "=\"";
          append_label_value(out, value);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_number(out, sample.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace opsight::exporting
