#include "export/zipkin/zipkin_sink.hpp"

#include "export/export.hpp"
#include "export/zipkin/zipkin_encoder.hpp"

namespace opsight::exporting::zipkin {

namespace {

std::optional<std::string> parse(std::string_view, std::string_view rest, const Environment&,
                                 ExportTarget& target) {
  return set_http_endpoint(target, rest.empty() ? "http://localhost:9411/api/v2/spans" : rest,
                           "/api/v2/spans");
}

}  // namespace

const SinkDescription& sink() {
  static const SinkDescription description{
      .name = "zipkin",
      .syntax = "zipkin[=URL]",
      .summary = "Zipkin v2 JSON; default http://localhost:9411/api/v2/spans",
      .parse = parse,
      .make_encoder = stateless_encoder<encode_zipkin_json>,
      .http_content_type = "application/json",
  };
  return description;
}

}  // namespace opsight::exporting::zipkin
