#include "export/otlp/otlp_logs_encoder.hpp"

#include <algorithm>
#include <vector>

#include "export/otlp/otlp_common.hpp"
#include "export/otlp/otlp_fields.hpp"

namespace opsight::exporting {

std::string encode_otlp_logs(const LogView& logs, std::span<const uint32_t> records) {
  using otlp::ProtoEncoder;
  std::string out;
  out.reserve(records.size() * 200 + 512);
  ProtoEncoder encoder(out);
  const SpanView& spans = logs.spans();
  std::vector<Attribute> attributes;
  std::vector<std::vector<uint32_t>> scopes;  // a process's records by logger
  std::vector<std::string_view> scope_names;
  char trace_id[16];
  char span_id[8];
  size_t begin = 0;
  while (begin < records.size()) {
    uint32_t resource_index = logs.resource_of(records[begin]);
    size_t end = begin + 1;
    while (end < records.size() && logs.resource_of(records[end]) == resource_index) ++end;
    // Loggers in order of first appearance, each one's records in the view's (time) order.
    scopes.clear();
    scope_names.clear();
    for (size_t i = begin; i < end; ++i) {
      std::string_view logger = logs.logger(records[i]);
      size_t scope = 0;
      while (scope < scope_names.size() && scope_names[scope] != logger) ++scope;
      if (scope == scope_names.size()) {
        scope_names.push_back(logger);
        scopes.emplace_back();
      }
      scopes[scope].push_back(records[i]);
    }
    size_t resource_logs = encoder.begin_message(otlp::export_logs_request::kResourceLogs);
    size_t resource_message = encoder.begin_message(otlp::resource_logs::kResource);
    for (const Attribute& attribute : spans.resources()[resource_index].attributes)
      otlp::write_attribute(encoder, otlp::resource::kAttributes, attribute);
    encoder.end_message(resource_message);
    for (size_t scope = 0; scope < scopes.size(); ++scope) {
      size_t scope_logs = encoder.begin_message(otlp::resource_logs::kScopeLogs);
      size_t scope_message = encoder.begin_message(otlp::scope_logs::kScope);
      encoder.bytes_field(otlp::scope::kName, scope_names[scope]);
      encoder.end_message(scope_message);
      for (uint32_t record : scopes[scope]) {
        size_t message = encoder.begin_message(otlp::scope_logs::kLogRecords);
        auto time = static_cast<uint64_t>(std::max<int64_t>(0, logs.time_unix_ns(record)));
        encoder.fixed64_field(otlp::log_record::kTimeUnixNano, time);
        encoder.varint_field(otlp::log_record::kSeverityNumber,
                             static_cast<uint64_t>(severity_number(logs.level(record))));
        encoder.bytes_field(otlp::log_record::kSeverityText, logs.level_name(record));
        size_t body = encoder.begin_message(otlp::log_record::kBody);
        encoder.bytes_field(otlp::any_value::kStringValue, logs.message(record));
        encoder.end_message(body);
        logs.attributes(record, attributes);
        for (const Attribute& attribute : attributes)
          otlp::write_attribute(encoder, otlp::log_record::kAttributes, attribute);
        if (logs.has_span(record)) {
          encoder.fixed32_field(otlp::log_record::kFlags, logs.trace_flags(record));
          otlp::put_trace_id(trace_id, logs.trace_id(record));
          encoder.bytes_field(otlp::log_record::kTraceId, std::string_view(trace_id, 16));
          otlp::put_span_id(span_id, logs.span_id(record));
          encoder.bytes_field(otlp::log_record::kSpanId, std::string_view(span_id, 8));
        }
        encoder.fixed64_field(otlp::log_record::kObservedTimeUnixNano, time);
        encoder.end_message(message);
      }
      encoder.end_message(scope_logs);
    }
    encoder.end_message(resource_logs);
    begin = end;
  }
  return out;
}

}  // namespace opsight::exporting
