// Metrics and log lines that are not spans, sent through the export module's sinks: metric
// families in Prometheus's text format PUT to a Pushgateway, and labelled log lines as
// Loki's push API JSON. opsight explain sends its graph-break counts and one line per break
// this way; both go through the same pipeline as traces (BatchExporter over the HTTP
// sender: retries with backoff, a timeout, failures counted and reported), so there is one
// HTTP client and one set of encoders.
//
//   families:  # HELP opsight_compile_graphs Graphs torch.compile made of the model.
//              # TYPE opsight_compile_graphs gauge
//              opsight_compile_graphs{model="bert",family="encoder",commit="abc"} 1
//   log lines: {"streams":[{"stream":{"model":"bert",...},"values":[["<unix ns>","<line>"]]}]}
//
// Names are made Prometheus-safe (prometheus_name), label values escaped as the text
// format requires; log lines with the same labels share a stream, their values sorted by
// time (loki_encoder.hpp's encode_loki_lines). A report counts samples or log lines where a
// trace's counts spans.
//
// Thread-safety: the functions keep no state; send_* block until sent or timed out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "export/export.hpp"
#include "export/loki/loki_encoder.hpp"
#include "export/prometheus/prometheus_text.hpp"

namespace opsight::exporting {

// PUTs `families` to a Pushgateway: `url` is http(s)://host:port[/metrics/job/...]; without
// a path the grouping key is /metrics/job/<default_job>.
TargetReport push_metric_families(std::string_view url, std::span<const MetricFamily> families,
                                  std::string_view default_job, double timeout_s);

// POSTs `lines` to Loki's push API at `url` (without a path: /loki/api/v1/push), in
// batches of at most `batch_lines`.
TargetReport push_log_lines(std::string_view url, std::span<const LogLine> lines,
                            size_t batch_lines, double timeout_s);

}  // namespace opsight::exporting
