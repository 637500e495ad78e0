#include "export/loki/loki_sink.hpp"

#include "export/export.hpp"
#include "export/loki/loki_encoder.hpp"

namespace opsight::exporting::loki {

namespace {

// Loki's streams are decided once over the export's rows, so that every batch labels alike.
class Encoder : public SpanBatchEncoder {
 public:
  explicit Encoder(const SpanView& view) : view_(view), streams_(view) {}
  void encode(std::span<const trace::RowIndex> rows, EncodedBatch& out) override {
    out.body = encode_loki_json(view_, streams_, rows);
  }

 private:
  const SpanView& view_;
  LokiStreams streams_;
};

std::optional<std::string> parse(std::string_view, std::string_view rest,
                                 const Environment& environment, ExportTarget& target) {
  if (auto why =
          set_http_endpoint(target, rest.empty() ? "http://localhost:3100/loki/api/v1/push" : rest,
                            "/loki/api/v1/push"))
    return why;
  // Loki's multi-tenancy header, and basic authentication kept off the command line.
  if (auto tenant = environment_value(environment, "OPSIGHT_LOKI_TENANT"); !tenant.empty())
    target.headers.emplace_back("X-Scope-OrgID", std::string(tenant));
  if (auto basic = environment_value(environment, "OPSIGHT_LOKI_BASIC_AUTH");
      !basic.empty() && target.endpoint.user_info.empty()) {
    if (basic.find(':') == std::string_view::npos)
      return "OPSIGHT_LOKI_BASIC_AUTH is not user:password";
    target.endpoint.user_info = std::string(basic);
  }
  return std::nullopt;
}

}  // namespace

const SinkDescription& sink() {
  static const SinkDescription description{
      .name = "loki",
      .syntax = "loki[=URL]",
      .summary =
          "Loki's push API, one JSON line per span; default "
          "http://localhost:3100/loki/api/v1/push",
      .parse = parse,
      .make_encoder = [](const SpanView& view) -> std::unique_ptr<SpanBatchEncoder> {
        return std::make_unique<Encoder>(view);
      },
      .http_content_type = "application/json",
  };
  return description;
}

const SinkDescription& logs_sink() {
  static const SinkDescription description{
      .name = "loki-logs",
      .syntax = "loki-logs[=URL]",
      .summary =
          "the program's log records (Python logging) through Loki's push API, JSON lines "
          "with the trace and span ids; default http://localhost:3100/loki/api/v1/push",
      .payload = SinkPayload::kLogs,
      .item = "log record",
      .parse = parse,
      .logs_body = encode_loki_log_records,
      .http_content_type = "application/json",
  };
  return description;
}

}  // namespace opsight::exporting::loki
