// Metrics and log lines that are not spans (record_export.hpp): the Prometheus text of
// labelled metric families, Loki push bodies of labelled lines (parsed back with
// nlohmann::json), and both pushed to an HTTP server in this process: path, method,
// content type and what the report counts, and a bad URL reported, not thrown.
#include "export/record_export.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace {

using opsight::exporting::LogLine;
using opsight::exporting::MetricFamily;

std::vector<MetricFamily> break_families() {
  MetricFamily breaks{"opsight_compile_graph_breaks_total",
                      "gauge",
                      "Graph breaks per model and reason.\nSecond line.",
                      {}};
  breaks.samples.push_back({{{"model", "bert"}, {"reason", "Tensor.item() \"call\""}}, 2});
  breaks.samples.push_back({{{"model", "gpt2"}, {"reason", "a\\b\nc"}}, 1});
  MetricFamily graphs{"opsight.compile graphs", "gauge", "Graphs.", {}};
  graphs.samples.push_back({{{"model.name", "bert"}}, 3});
  graphs.samples.push_back({{}, 0.5});
  return {breaks, graphs};
}

TEST(RecordExport, MetricFamiliesInTheTextFormatWithEscapedLabels) {
  auto families = break_families();
  EXPECT_EQ(opsight::exporting::prometheus_exposition(std::span<const MetricFamily>(families)),
            "# HELP opsight_compile_graph_breaks_total Graph breaks per model and reason. "
            "Second line.\n"
            "# TYPE opsight_compile_graph_breaks_total gauge\n"
            "opsight_compile_graph_breaks_total{model=\"bert\",reason=\"Tensor.item() "
            "\\\"call\\\"\"} 2\n"
            "opsight_compile_graph_breaks_total{model=\"gpt2\",reason=\"a\\\\b\\nc\"} 1\n"
            "# HELP opsight_compile_graphs Graphs.\n"
            "# TYPE opsight_compile_graphs gauge\n"
            "opsight_compile_graphs{model_name=\"bert\"} 3\n"
            "opsight_compile_graphs 0.5\n");
}

TEST(RecordExport, LogLinesGroupedInStreamsByLabelsAndSortedByTime) {
  std::vector<LogLine> lines = {
      {{{"model", "bert"}, {"reason", "item"}}, 300, "late \"quoted\""},
      {{{"model", "gpt2"}, {"reason", "item"}}, 100, "other stream"},
      {{{"model", "bert"}, {"reason", "item"}}, 200, "early"},
  };
  auto body = nlohmann::json::parse(opsight::exporting::encode_loki_lines(lines));
  ASSERT_EQ(body["streams"].size(), 2u);
  EXPECT_EQ(body["streams"][0]["stream"], (nlohmann::json{{"model", "bert"}, {"reason", "item"}}));
  EXPECT_EQ(body["streams"][0]["values"],
            nlohmann::json::array({nlohmann::json::array({"200", "early"}),
                                   nlohmann::json::array({"300", "late \"quoted\""})}));
  EXPECT_EQ(body["streams"][1]["values"],
            nlohmann::json::array({nlohmann::json::array({"100", "other stream"})}));
  EXPECT_EQ(nlohmann::json::parse(opsight::exporting::encode_loki_lines({}))["streams"].size(), 0u);
}

struct Received {
  std::string method, path, type, body;
};

class RecordingServer {
 public:
  RecordingServer() {
    auto record = [this](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard lock(mutex_);
      received_.push_back(
          {request.method, request.path, request.get_header_value("Content-Type"), request.body});
      response.status = 204;
    };
    server_.Put(R"(/.*)", record);
    server_.Post(R"(/.*)", record);
    server_.set_keep_alive_timeout(1);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~RecordingServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Received> received() {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Received> received_;
  int port_ = 0;
};

TEST(RecordExport, PushesFamiliesToThePushgatewaysJobPath) {
  RecordingServer server;
  auto families = break_families();
  auto report =
      opsight::exporting::push_metric_families(server.url(), families, "opsight explain", 10);
  EXPECT_EQ(report.stats.spans_sent, 4u) << report.stats.last_error;
  auto received = server.received();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].method, "PUT");
  EXPECT_EQ(received[0].path, "/metrics/job/opsight_explain");
  EXPECT_EQ(received[0].type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(received[0].body.find("opsight_compile_graphs{model_name=\"bert\"} 3\n"),
            std::string::npos);

  report = opsight::exporting::push_metric_families(server.url() + "/metrics/job/ci/commit/abc",
                                                    families, "unused", 10);
  EXPECT_EQ(server.received().back().path, "/metrics/job/ci/commit/abc");
}

TEST(RecordExport, PostsLogLinesInBatchesToLokisPushPath) {
  RecordingServer server;
  std::vector<LogLine> lines;
  for (int i = 0; i < 5; ++i) lines.push_back({{{"model", "m"}}, 1000 + i, "line"});
  auto report = opsight::exporting::push_log_lines(server.url(), lines, 2, 10);
  EXPECT_EQ(report.stats.spans_sent, 5u) << report.stats.last_error;
  auto received = server.received();
  ASSERT_EQ(received.size(), 3u);  // 2 + 2 + 1
  size_t values = 0;
  for (const Received& request : received) {
    EXPECT_EQ(request.method, "POST");
    EXPECT_EQ(request.path, "/loki/api/v1/push");
    EXPECT_EQ(request.type, "application/json");
    values += nlohmann::json::parse(request.body)["streams"][0]["values"].size();
  }
  EXPECT_EQ(values, 5u);
}

TEST(RecordExport, ABadUrlIsAReportNotAnException) {
  std::vector<LogLine> lines = {{{{"model", "m"}}, 1, "line"}};
  auto report = opsight::exporting::push_log_lines("ftp://nowhere", lines, 10, 1);
  EXPECT_EQ(report.stats.spans_sent, 0u);
  EXPECT_EQ(report.stats.spans_dropped(), 1u);
  EXPECT_FALSE(report.stats.last_error.empty());
}

}  // namespace
