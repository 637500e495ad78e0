#include "export/loki/loki_encoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "wire/json_escape.hpp"

namespace opsight::exporting {

namespace {

// `text` cut to at most `limit` bytes, never inside a UTF-8 sequence.
std::string_view cut_utf8(std::string_view text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// Writes a span's log line straight into the push body, where it is a JSON string: the
// line's own quotes go in as \", and a string value is escaped for the line, then that
// again for the body. Most values (names, ids, ASCII attribute values) need no escaping at
// all and are copied in one go; building the line first and escaping it whole was 2x slower.
class LineWriter {
 public:
  explicit LineWriter(std::string& out) : out_(out) {}

  void structure(std::string_view already_escaped) { out_ += already_escaped; }

  void string(std::string_view text) {
    if (is_plain(text)) {
      out_ += "\\\"";
      out_ += text;
      out_ += "\\\"";
      return;
    }
    scratch_.clear();
    wire::append_json_string(scratch_, text);   // the line's escaping
    wire::append_json_escaped(out_, scratch_);  // the body's
  }

  void integer(int64_t value) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
    out_.append(digits, end);
  }

  void hex(uint64_t value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    char digits[16];
    for (int i = 0; i < 16; ++i) digits[i] = kDigits[(value >> (60 - 4 * i)) & 0xF];
    out_ += "\\\"";
    out_.append(digits, 16);
    out_ += "\\\"";
  }

  void trace_id(trace::TraceId id) {
    if (!(id == cached_trace_id_) || cached_trace_hex_.empty()) {
      cached_trace_id_ = id;
      cached_trace_hex_ = id.to_hex();
    }
    string(cached_trace_hex_);
  }

  void value(const AttributeValue& value) {
    switch (value.type) {
      case AttributeValue::Type::kString:
        string(value.string_value);
        return;
      case AttributeValue::Type::kBool:
        out_ += value.int_value ? "true" : "false";
        return;
      case AttributeValue::Type::kInt:
        integer(value.int_value);
        return;
      case AttributeValue::Type::kDouble:
        if (std::isfinite(value.double_value))
          fmt::format_to(std::back_inserter(out_), "{}", value.double_value);
        else
          string(value.to_string());  // "nan", "inf": not JSON numbers
        return;
    }
  }

 private:
  // Printable ASCII without quotes or backslashes: the same in the line and the body.
  static bool is_plain(std::string_view text) {
    for (char character : text) {
      auto byte = static_cast<unsigned char>(character);
      if (byte < 0x20 || byte >= 0x7F || byte == '"' || byte == '\\') return false;
    }
    return true;
  }

  std::string& out_;
  std::string scratch_;
  trace::TraceId cached_trace_id_{};
  std::string cached_trace_hex_;
};

// The log line of one span (a JSON object), written as a JSON string into the body.
void append_line(LineWriter& line, const SpanView& view, trace::RowIndex row,
                 std::vector<Attribute>& attributes) {
  line.structure(R"("{\"trace_id\":)");
  line.trace_id(view.trace_id(row));
  line.structure(R"(,\"span_id\":)");
  line.hex(view.span_id(row));
  if (uint64_t parent = view.parent_span_id(row)) {
    line.structure(R"(,\"parent_span_id\":)");
    line.hex(parent);
  }
  line.structure(R"(,\"name\":)");
  line.string(view.name(row));
  switch (view.kind(row)) {
    case SpanKind::kServer:
      line.structure(R"(,\"kind\":\"server\")");
      break;
    case SpanKind::kClient:
      line.structure(R"(,\"kind\":\"client\")");
      break;
    case SpanKind::kProducer:
      line.structure(R"(,\"kind\":\"producer\")");
      break;
    case SpanKind::kConsumer:
      line.structure(R"(,\"kind\":\"consumer\")");
      break;
    case SpanKind::kInternal:
    case SpanKind::kUnspecified:
      break;
  }
  line.structure(R"(,\"pid\":)");
  line.integer(view.resources()[view.resource_of(row)].pid);
  line.structure(R"(,\"duration_ns\":)");
  line.integer(view.end_unix_ns(row) - view.start_unix_ns(row));
  if (view.has_error(row)) {
    line.structure(R"(,\"error\":)");
    line.string(view.error_message(row));
  }
  auto links = view.links(row);
  if (!links.empty()) {
    line.structure(R"(,\"links\":[)");
    for (size_t i = 0; i < links.size(); ++i) {
      if (i) line.structure(",");
      line.hex(view.span_id(links[i]));
    }
    line.structure("]");
  }
  line.structure(R"(,\"attributes\":{)");
  view.attributes(row, attributes);
  for (size_t i = 0; i < attributes.size(); ++i) {
    if (i) line.structure(",");
    line.string(attributes[i].key);
    line.structure(":");
    line.value(attributes[i].value);
  }
  line.structure(R"(}}")");
}

}  // namespace

LokiStreams::LokiStreams(const SpanView& view, size_t max_span_names) {
  const trace::Trace& trace = view.trace();
  const auto& names = trace.slices.name;

  // Span names that get a label value of their own: all of them, or the most frequent.
  std::vector<uint32_t> spans_per_name(trace.strings.size(), 0);
  for (trace::RowIndex row : view.rows()) ++spans_per_name[names[row]];
  std::vector<trace::StringId> used;
  for (trace::StringId id = 0; id < spans_per_name.size(); ++id)
    if (spans_per_name[id] > 0) used.push_back(id);
  constexpr uint32_t kOther = UINT32_MAX;
  std::vector<uint32_t> name_label(trace.strings.size(), kOther);  // StringId -> label slot
  std::vector<std::string_view> name_labels;
  if (used.size() > max_span_names) {
    // The most frequent first; equal counts by name, so the choice does not depend on
    // the order strings were interned in.
    std::sort(used.begin(), used.end(), [&](trace::StringId a, trace::StringId b) {
      if (spans_per_name[a] != spans_per_name[b]) return spans_per_name[a] > spans_per_name[b];
      return trace.str(a) < trace.str(b);
    });
    used.resize(max_span_names);
  }
  for (trace::StringId id : used) {
    name_label[id] = static_cast<uint32_t>(name_labels.size());
    name_labels.push_back(trace.str(id));
  }

  // Services: one per distinct service name among the processes.
  std::vector<std::string_view> services;
  std::vector<uint32_t> service_of_resource;
  for (const ProcessResource& resource : view.resources()) {
    auto it = std::find(services.begin(), services.end(), resource.service_name);
    if (it == services.end()) it = services.insert(services.end(), resource.service_name);
    service_of_resource.push_back(static_cast<uint32_t>(it - services.begin()));
  }

  // Streams in order of first appearance among the view's rows.
  std::map<std::tuple<uint32_t, uint32_t, bool>, uint32_t> stream_index;
  stream_of_row_.assign(trace.slices.size(), 0);
  for (trace::RowIndex row : view.rows()) {
    uint32_t service = service_of_resource[view.resource_of(row)];
    uint32_t name = name_label[names[row]];
    bool error = view.has_error(row);
    auto [it, inserted] = stream_index.try_emplace({service, name, error},
                                                   static_cast<uint32_t>(labels_json_.size()));
    if (inserted) {
      std::string labels = R"({"service_name":)";
      wire::append_json_string(labels, cut_utf8(services[service], kMaxLabelValueBytes));
      labels += R"(,"span_name":)";
      wire::append_json_string(labels, cut_utf8(name == kOther ? kOtherSpanName : name_labels[name],
                                                kMaxLabelValueBytes));
      labels += error ? R"(,"status":"error"})" : R"(,"status":"ok"})";
      labels_json_.push_back(std::move(labels));
    }
    stream_of_row_[row] = it->second;
  }
}

std::string encode_loki_json(const SpanView& view, const LokiStreams& streams,
                             std::span<const trace::RowIndex> rows) {
  // The batch's rows by stream, then by start time.
  std::vector<std::pair<uint32_t, trace::RowIndex>> order;
  order.reserve(rows.size());
  for (trace::RowIndex row : rows) order.emplace_back(streams.stream_of(row), row);
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    int64_t start_a = view.start_unix_ns(a.second), start_b = view.start_unix_ns(b.second);
    if (start_a != start_b) return start_a < start_b;
    return a.second < b.second;
  });

  std::string out;
  out.reserve(rows.size() * 420 + 64);
  out += R"({"streams":[)";
  LineWriter line(out);
  std::vector<Attribute> attributes;
  for (size_t i = 0; i < order.size(); ++i) {
    uint32_t stream = order[i].first;
    bool first_of_stream = i == 0 || order[i - 1].first != stream;
    if (first_of_stream) {
      if (i) out += "]},";
      out += R"({"stream":)";
      out += streams.labels_json(stream);
      out += R"(,"values":[)";
    } else {
      out += ',';
    }
    trace::RowIndex row = order[i].second;
    out += "[\"";
    line.integer(view.start_unix_ns(row));
    out += "\",";
    append_line(line, view, row, attributes);
    out += ']';
  }
  if (!order.empty()) out += "]}";
  out += "]}";
  return out;
}

std::string encode_loki_log_records(const LogView& logs, std::span<const uint32_t> records) {
  const SpanView& spans = logs.spans();
  // Streams by (service, level), in order of first appearance; each one's records by time.
  std::map<std::pair<std::string_view, std::string>, uint32_t> stream_index;
  std::vector<std::string> labels_json;
  std::vector<std::pair<uint32_t, uint32_t>> order;  // (stream, record)
  order.reserve(records.size());
  for (uint32_t record : records) {
    std::string_view service = spans.resources()[logs.resource_of(record)].service_name;
    std::string level(cut_utf8(logs.level_name(record), LokiStreams::kMaxLabelValueBytes));
    for (char& character : level)
      if (character >= 'A' && character <= 'Z')
        character = static_cast<char>(character - 'A' + 'a');
    auto [it, inserted] =
        stream_index.try_emplace({service, level}, static_cast<uint32_t>(labels_json.size()));
    if (inserted) {
      std::string labels = R"({"service_name":)";
      wire::append_json_string(labels, cut_utf8(service, LokiStreams::kMaxLabelValueBytes));
      labels += R"(,"level":)";
      wire::append_json_string(labels, level);
      labels += '}';
      labels_json.push_back(std::move(labels));
    }
    order.emplace_back(it->second, record);
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return logs.time_unix_ns(a.second) < logs.time_unix_ns(b.second);
  });

  std::string out;
  out.reserve(records.size() * 300 + 64);
  out += R"({"streams":[)";
  LineWriter line(out);
  std::vector<Attribute> attributes;
  for (size_t i = 0; i < order.size(); ++i) {
    auto [stream, record] = order[i];
    if (i == 0 || order[i - 1].first != stream) {
      if (i) out += "]},";
      out += R"({"stream":)";
      out += labels_json[stream];
      out += R"(,"values":[)";
    } else {
      out += ',';
    }
    out += "[\"";
    line.integer(logs.time_unix_ns(record));
    out += "\",";
    // The line: {"message":..,"trace_id":..,"span_id":..,"attributes":{..}} (the ids only
    // for a record logged inside a span).
    line.structure(R"("{\"message\":)");
    line.string(logs.message(record));
    if (logs.has_span(record)) {
      line.structure(R"(,\"trace_id\":)");
      line.trace_id(logs.trace_id(record));
      line.structure(R"(,\"span_id\":)");
      line.hex(logs.span_id(record));
    }
    line.structure(R"(,\"attributes\":{)");
    logs.attributes(record, attributes);
    for (size_t a = 0; a < attributes.size(); ++a) {
      if (a) line.structure(",");
      line.string(attributes[a].key);
      line.structure(":");
      line.value(attributes[a].value);
    }
    line.structure(R"(}}")");
    out += ']';
  }
  if (!order.empty()) out += "]}";
  out += "]}";
  return out;
}

std::string encode_loki_lines(std::span<const LogLine> lines) {
  // Streams by label set, in order of first appearance; each stream's lines by time.
  std::map<std::vector<std::pair<std::string, std::string>>, uint32_t> stream_index;
  std::vector<const LogLine*> first_of_stream;
  std::vector<std::pair<uint32_t, size_t>> order;  // (stream, line index)
  order.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    auto [it, inserted] =
        stream_index.try_emplace(lines[i].labels, static_cast<uint32_t>(first_of_stream.size()));
    if (inserted) first_of_stream.push_back(&lines[i]);
    order.emplace_back(it->second, i);
  }
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (lines[a.second].unix_ns != lines[b.second].unix_ns)
      return lines[a.second].unix_ns < lines[b.second].unix_ns;
    return a.second < b.second;
  });
  std::string out = R"({"streams":[)";
  for (size_t i = 0; i < order.size(); ++i) {
    uint32_t stream = order[i].first;
    if (i == 0 || order[i - 1].first != stream) {
      if (i) out += "]},";
      out += R"({"stream":{)";
      bool first = true;
      for (const auto& [label, value] : first_of_stream[stream]->labels) {
        if (!first) out += ',';
        first = false;
        wire::append_json_string(out, label);
        out += ':';
        wire::append_json_string(out, cut_utf8(value, LokiStreams::kMaxLabelValueBytes));
      }
      out += R"(},"values":[)";
    } else {
      out += ',';
    }
    const LogLine& line = lines[order[i].second];
    fmt::format_to(std::back_inserter(out), R"(["{}",)", line.unix_ns);
    wire::append_json_string(out, line.line);
    out += ']';
  }
  if (!order.empty()) out += "]}";
  out += "]}";
  return out;
}

}  // namespace opsight::exporting
