// The export pipeline under failure: a scripted sender answers each attempt as a test
// says (sent, retryable with or without Retry-After, permanent failure, slow), and the
// pipeline must retry, give up, drop and shut down exactly as documented, with
// offered = sent + dropped for every span. The HTTP sender against a real HTTP server
// (cpp-httplib's, in this process) sorts statuses the OTLP way; the live /metrics endpoint
// follows a run's files across scrapes.
#include "export/batch_exporter.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "export/http_sender.hpp"
#include "export/metrics_endpoint.hpp"
#include "io/io.hpp"

namespace {

using opsight::exporting::BatchExporter;
using opsight::exporting::BatchExporterOptions;
using opsight::exporting::EncodedBatch;
using opsight::exporting::SendResult;

// Answers from a script; once the script is used up, every attempt is sent.
class ScriptedSender : public opsight::exporting::BatchSender {
 public:
  struct Shared {
    std::mutex mutex;
    std::deque<SendResult> script;
    std::vector<std::string> delivered;
    std::atomic<int> attempts{0};
    std::chrono::milliseconds delay{0};
  };
  explicit ScriptedSender(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  SendResult send(std::string_view body) override {
    ++shared_->attempts;
    std::this_thread::sleep_for(shared_->delay);
    std::lock_guard lock(shared_->mutex);
    SendResult result;
    result.outcome = SendResult::Outcome::kSent;
    if (!shared_->script.empty()) {
      result = shared_->script.front();
      shared_->script.pop_front();
    }
    if (result.outcome == SendResult::Outcome::kSent) shared_->delivered.emplace_back(body);
    return result;
  }
  std::string describe() const override { return "scripted"; }

 private:
  std::shared_ptr<Shared> shared_;
};

SendResult retryable(std::optional<double> retry_after = std::nullopt) {
  SendResult result;
  result.outcome = SendResult::Outcome::kRetryable;
  result.status = 503;
  result.message = "HTTP 503";
  result.retry_after_s = retry_after;
  return result;
}
SendResult failed() {
  SendResult result;
  result.outcome = SendResult::Outcome::kFailed;
  result.status = 400;
  result.message = "HTTP 400: bad request";
  return result;
}

BatchExporterOptions fast_options() {
  BatchExporterOptions options;
  options.initial_backoff_s = 0.001;
  options.max_backoff_s = 0.004;
  options.max_elapsed_s = 5;
  options.random_seed = 7;
  return options;
}

void expect_balanced(const opsight::exporting::ExportStats& stats) {
  EXPECT_EQ(stats.spans_offered, stats.spans_sent + stats.spans_dropped() + stats.spans_pending);
}

TEST(BatchExporter, RetriesRetryableAnswersThenDeliversInOrder) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->script = {retryable(), retryable(), failed()};
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), fast_options());
  exporter.offer({"first", 10});
  exporter.offer({"second", 5});
  ASSERT_TRUE(exporter.flush(10));
  auto stats = exporter.stats();
  EXPECT_EQ(stats.retries, 2u);
  EXPECT_EQ(stats.spans_sent, 5u);  // "first" was retried twice then refused
  EXPECT_EQ(stats.spans_dropped_failed, 10u);
  EXPECT_EQ(stats.last_error, "HTTP 400: bad request");
  EXPECT_EQ(shared->delivered, std::vector<std::string>{"second"});
  expect_balanced(stats);
}

TEST(BatchExporter, HonoursRetryAfterAndGivesUpPastMaxElapsed) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->script = {retryable(0.05), retryable(10.0)};
  auto options = fast_options();
  options.max_elapsed_s = 1;
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), options);
  auto start = std::chrono::steady_clock::now();
  exporter.offer({"batch", 3});
  ASSERT_TRUE(exporter.flush(10));
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto stats = exporter.stats();
  EXPECT_GE(waited, 0.05);  // the first Retry-After was honoured
  EXPECT_LT(waited, 5.0);   // the second (10 s) would pass max_elapsed: given up at once
  EXPECT_EQ(stats.spans_dropped_failed, 3u);
  EXPECT_NE(stats.last_error.find("gave up"), std::string::npos) << stats.last_error;
  EXPECT_EQ(shared->attempts.load(), 2);
  expect_balanced(stats);
}

TEST(BatchExporter, AFullQueueDropsAndCountsWithoutBlocking) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->delay = std::chrono::milliseconds(50);  // a slow server
  auto options = fast_options();
  options.max_queued_batches = 2;
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), options);
  auto start = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 20; ++i) accepted += exporter.offer({"b" + std::to_string(i), 1}) ? 1 : 0;
  double offering = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(offering, 0.45);  // never waited for the server (20 waits would be 1 s)
  ASSERT_TRUE(exporter.flush(10));
  auto stats = exporter.stats();
  EXPECT_EQ(stats.spans_offered, 20u);
  EXPECT_EQ(stats.spans_sent, static_cast<uint64_t>(accepted));
  EXPECT_EQ(stats.spans_dropped_queue_full, static_cast<uint64_t>(20 - accepted));
  EXPECT_LT(accepted, 20);  // two queued, and what the sender took meanwhile: some were dropped
  expect_balanced(stats);
}

TEST(BatchExporter, OfferCanWaitForRoomWhenTheCallerMayBlock) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->delay = std::chrono::milliseconds(5);
  auto options = fast_options();
  options.max_queued_batches = 1;
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), options);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(exporter.offer({"b", 1}, 5.0));
  ASSERT_TRUE(exporter.flush(10));
  EXPECT_EQ(exporter.stats().spans_sent, 10u);
}

// What the live exporter does: ask for room before offering, so nothing is dropped; the
// wait is bounded, and a closed exporter answers at once (offer then counts the drop).
TEST(BatchExporter, WaitForRoomSaysWhenAnOfferWouldBeTakenWithoutADrop) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->script = {retryable(/*retry_after=*/0.3)};
  auto options = fast_options();
  options.max_queued_batches = 1;
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), options);
  EXPECT_TRUE(exporter.wait_for_room(4, 0));
  EXPECT_TRUE(exporter.offer({"held", 1}));  // being retried: in flight, not queued
  EXPECT_TRUE(exporter.wait_for_room(4, 1.0));
  EXPECT_TRUE(exporter.offer({"next", 1}));  // queued behind it: the queue is full
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(exporter.wait_for_room(4, 0.01));  // bounded: no room within 10 ms
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(exporter.wait_for_room(4, 10.0));  // the retry goes out, the queue drains
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(exporter.wait_for_room(4, 10.0));
    EXPECT_TRUE(exporter.offer({"more", 1}));
  }
  ASSERT_TRUE(exporter.flush(10));
  auto stats = exporter.stats();
  EXPECT_EQ(stats.spans_sent, 22u);
  EXPECT_EQ(stats.spans_dropped(), 0u);
  exporter.shutdown(1);
  EXPECT_TRUE(exporter.wait_for_room(4, 10.0));  // closed: at once
  EXPECT_FALSE(exporter.offer({"late", 1}));
  EXPECT_EQ(exporter.stats().spans_dropped_shutdown, 1u);
}

// Two senders keep two requests in flight: the sends overlap, and every span is counted.
TEST(BatchExporter, SeveralSendersSendConcurrentlyAndCountEverySpan) {
  struct Overlapping : opsight::exporting::BatchSender {
    std::shared_ptr<std::atomic<int>> now, most;
    SendResult send(std::string_view) override {
      int running = ++*now;
      int seen = most->load();
      while (running > seen && !most->compare_exchange_weak(seen, running)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      --*now;
      SendResult result;
      result.outcome = SendResult::Outcome::kSent;
      return result;
    }
    std::string describe() const override { return "overlapping"; }
  };
  auto now = std::make_shared<std::atomic<int>>(0);
  auto most = std::make_shared<std::atomic<int>>(0);
  std::vector<std::unique_ptr<opsight::exporting::BatchSender>> senders;
  for (int i = 0; i < 2; ++i) {
    auto sender = std::make_unique<Overlapping>();
    sender->now = now;
    sender->most = most;
    senders.push_back(std::move(sender));
  }
  BatchExporter exporter(std::move(senders), fast_options());
  for (int i = 0; i < 8; ++i) exporter.offer({"b", 3});
  ASSERT_TRUE(exporter.flush(10));
  EXPECT_EQ(most->load(), 2);
  EXPECT_EQ(exporter.stats().spans_sent, 24u);
  EXPECT_EQ(exporter.stats().batches_sent, 8u);
  expect_balanced(exporter.stats());
}

TEST(BatchExporter, ShutdownBoundsTheWaitAndCountsWhatItAbandons) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  for (int i = 0; i < 1000; ++i)
    shared->script.push_back(retryable(0.02));  // a server that never recovers
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared), fast_options());
  exporter.offer({"a", 4});
  exporter.offer({"b", 6});
  auto start = std::chrono::steady_clock::now();
  exporter.shutdown(0.2);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 3.0);  // retrying forever otherwise
  auto stats = exporter.stats();
  EXPECT_EQ(stats.spans_dropped_shutdown, 10u);
  EXPECT_EQ(stats.spans_pending, 0u);
  EXPECT_FALSE(exporter.offer({"late", 2}));
  EXPECT_EQ(exporter.stats().spans_dropped_shutdown, 12u);
  expect_balanced(exporter.stats());
}

// Starts `server` on a free port of 127.0.0.1 in `serving`; returns the port once it
// accepts. Short keep-alive: stop() waits for open keep-alive connections.
int serve_in_background(httplib::Server& server, std::thread& serving) {
  server.set_keep_alive_timeout(1);
  int port = server.bind_to_any_port("127.0.0.1");
  serving = std::thread([&server] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

TEST(HttpSender, SortsAnswersTheOtlpWayAgainstARealHttpServer) {
  httplib::Server server;
  std::atomic<int> calls{0};
  std::string received_body, received_type, received_header;
  server.Post("/v1/traces", [&](const httplib::Request& request, httplib::Response& response) {
    int call = ++calls;
    received_body = request.body;
    received_type = request.get_header_value("Content-Type");
    received_header = request.get_header_value("api-key");
    if (call == 1) response.status = 200;
    if (call == 2) {
      response.status = 429;
      response.set_header("Retry-After", "3");
    }
    if (call == 3) {
      response.status = 400;
      response.set_content("field 'x' invalid", "text/plain");
    }
  });
  std::thread serving;
  int port = serve_in_background(server, serving);

  std::string error;
  auto endpoint = opsight::exporting::parse_endpoint("http://127.0.0.1:" + std::to_string(port),
                                                     "/v1/traces", &error);
  ASSERT_TRUE(endpoint) << error;
  opsight::exporting::HttpSenderOptions options;
  options.content_type = "application/x-protobuf";
  options.headers = {{"api-key", "secret"}};
  opsight::exporting::HttpSender sender(*endpoint, options);
  SendResult ok = sender.send("payload");
  EXPECT_EQ(ok.outcome, SendResult::Outcome::kSent);
  EXPECT_EQ(received_body, "payload");
  EXPECT_EQ(received_type, "application/x-protobuf");
  EXPECT_EQ(received_header, "secret");
  SendResult throttled = sender.send("x");
  EXPECT_EQ(throttled.outcome, SendResult::Outcome::kRetryable);
  EXPECT_EQ(throttled.retry_after_s, 3.0);
  SendResult refused = sender.send("x");
  EXPECT_EQ(refused.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(refused.message.find("HTTP 400"), std::string::npos);
  EXPECT_NE(refused.message.find("field 'x' invalid"), std::string::npos);
  server.stop();
  serving.join();

  // Nobody listening any more: retryable at once, with a message naming where.
  auto before = std::chrono::steady_clock::now();
  SendResult down = sender.send("x");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  EXPECT_LT(seconds, 3.0);  // a timeout would be 10 s
  EXPECT_EQ(down.outcome, SendResult::Outcome::kRetryable);
  EXPECT_NE(down.message.find("127.0.0.1"), std::string::npos) << down.message;
}

// OTEL_EXPORTER_OTLP_COMPRESSION=gzip, the User-Agent, and permanent errors named: against
// a real HTTP server (cpp-httplib's, which inflates a gzip body it is sent).
TEST(HttpSender, GzipBodiesAUserAgentAndPermanentErrorsNamed) {
  httplib::Server server;
  std::atomic<int> calls{0};
  std::string received_body, received_encoding, received_agent;
  server.Post("/v1/traces", [&](const httplib::Request& request, httplib::Response& response) {
    int call = ++calls;
    received_body = request.body;
    received_encoding = request.get_header_value("Content-Encoding");
    received_agent = request.get_header_value("User-Agent");
    response.status = call == 1 ? 200 : call == 2 ? 401 : 404;
  });
  std::thread serving;
  int port = serve_in_background(server, serving);

  std::string error;
  auto endpoint = opsight::exporting::parse_endpoint("http://127.0.0.1:" + std::to_string(port),
                                                     "/v1/traces", &error);
  ASSERT_TRUE(endpoint) << error;
  opsight::exporting::HttpSenderOptions options;
  options.content_type = "application/x-protobuf";
  options.gzip = true;
  options.user_agent = opsight::exporting::user_agent_for("1.2.3");
  opsight::exporting::HttpSender sender(*endpoint, options);
  std::string payload(4000, 'a');
  EXPECT_EQ(sender.send(payload).outcome, SendResult::Outcome::kSent);
  EXPECT_EQ(received_encoding, "gzip");
  EXPECT_EQ(received_body, payload);  // inflated by the server: the gzip was whole
  EXPECT_EQ(received_agent, "opsight/1.2.3 (OTLP/HTTP; cpp-httplib)");
  SendResult unauthorized = sender.send("x");
  EXPECT_EQ(unauthorized.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(unauthorized.message.find("HTTP 401 Unauthorized"), std::string::npos)
      << unauthorized.message;
  EXPECT_NE(unauthorized.message.find("permanent: not retried"), std::string::npos);
  SendResult missing = sender.send("x");
  EXPECT_EQ(missing.outcome, SendResult::Outcome::kFailed);
  EXPECT_NE(missing.message.find("HTTP 404 Not Found"), std::string::npos) << missing.message;
  server.stop();
  serving.join();
}

TEST(HttpSender, GzipCompressIsAWholeGzipMemberThatInflatesBack) {
  std::string body;
  for (int i = 0; i < 2000; ++i) body += "span " + std::to_string(i % 50) + ";";
  std::string compressed = opsight::exporting::gzip_compress(body);
  ASSERT_GE(compressed.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(compressed[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(compressed[1]), 0x8b);
  EXPECT_LT(compressed.size(), body.size() / 5);
  z_stream stream{};
  ASSERT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
  std::string inflated(body.size() + 16, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(inflated.data());
  stream.avail_out = static_cast<uInt>(inflated.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  inflated.resize(stream.total_out);
  inflateEnd(&stream);
  EXPECT_EQ(inflated, body);
}

// An OTLP partial success: the server took the batch but rejected some spans. Those are
// dropped (failed) with its reason; the rest are sent; the counts still balance.
TEST(BatchExporter, APartialSuccessCountsTheRejectedSpansAsDropped) {
  auto shared = std::make_shared<ScriptedSender::Shared>();
  SendResult partial;
  partial.outcome = SendResult::Outcome::kSent;
  partial.rejected_spans = 3;
  partial.message = "rejected 3 spans of the batch (OTLP partial success): too old";
  shared->script.push_back(partial);
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared));
  exporter.offer({"first", 10});
  exporter.offer({"second", 5});
  exporter.shutdown(5);
  auto stats = exporter.stats();
  EXPECT_EQ(stats.spans_sent, 12u);
  EXPECT_EQ(stats.spans_dropped_failed, 3u);
  EXPECT_EQ(stats.batches_sent, 2u);
  EXPECT_EQ(stats.drop_reasons(),
            "3 failed; last error: rejected 3 spans of the batch (OTLP partial success): too old");
  expect_balanced(stats);
}

// Every cause of a drop is named with its count: a slow server's drops (still queued when
// the time ran out) say so too, not only a failure's.
TEST(BatchExporter, DropReasonsNameEveryCause) {
  opsight::exporting::ExportStats stats;
  EXPECT_EQ(stats.drop_reasons(), "");
  stats.spans_dropped_shutdown = 212;
  EXPECT_EQ(stats.drop_reasons(), "212 unsent when the export's time ran out");
  stats.spans_dropped_failed = 300;
  stats.spans_dropped_queue_full = 7;
  stats.last_error = "HTTP 401 Unauthorized";
  EXPECT_EQ(stats.drop_reasons(),
            "300 failed, 212 unsent when the export's time ran out, 7 found the export queue "
            "full; last error: HTTP 401 Unauthorized");

  // A sender slower than the export's time: the report says why the spans were dropped.
  auto shared = std::make_shared<ScriptedSender::Shared>();
  shared->delay = std::chrono::milliseconds(300);
  BatchExporter exporter(std::make_unique<ScriptedSender>(shared));
  for (int i = 0; i < 4; ++i) exporter.offer({"body", 10});
  exporter.shutdown(0.1);
  auto slow = exporter.stats();
  EXPECT_GT(slow.spans_dropped_shutdown, 0u);
  EXPECT_NE(slow.drop_reasons().find("unsent when the export's time ran out"), std::string::npos)
      << slow.drop_reasons();
}

}  // namespace

namespace {

// The live /metrics endpoint over a folder of trace files: a file that appears later and
// one that grows are both followed, scrape after scrape, over real HTTP.
TEST(MetricsEndpoint, FollowsTheRunsFilesAcrossScrapes) {
  auto folder =
      std::filesystem::temp_directory_path() / ("opsight-metrics-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  auto write_trace = [&](const std::string& file, int spans, size_t cut_from_end) {
    opsight::trace::Trace trace;
    trace.run.pid = 7;
    auto track = trace.thread_track(7, 7);
    for (int i = 0; i < spans; ++i) trace.slices.add(i * 100, 50, trace.intern("step"), 0, track);
    trace.finalize();
    std::string bytes = opsight::io::write_native(trace);
    std::FILE* out = std::fopen((folder / file).c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size() - cut_from_end, out);
    std::fclose(out);
    return bytes;
  };
  opsight::exporting::MetricsEndpoint endpoint(folder.string(), "trace.", ".opsight");
  ASSERT_EQ(endpoint.start("127.0.0.1", 0), "");
  httplib::Client client("127.0.0.1", endpoint.port());
  auto count_of_steps = [&]() -> std::string {
    auto response = client.Get("/metrics");
    if (!response || response->status != 200) return "no answer";
    const std::string key = "opsight_span_duration_seconds_count{span=\"step\"} ";
    auto at = response->body.find(key);
    if (at == std::string::npos) return "none";
    auto line_end = response->body.find('\n', at);
    return response->body.substr(at + key.size(), line_end - at - key.size());
  };
  EXPECT_EQ(count_of_steps(), "none");
  write_trace("trace.1.opsight", 10, 0);
  write_trace("ignored.json", 99, 0);
  EXPECT_EQ(count_of_steps(), "10");
  EXPECT_EQ(count_of_steps(), "10");  // scraped again: nothing counted twice
  write_trace("trace.2.opsight", 5, 0);
  EXPECT_EQ(count_of_steps(), "15");
  EXPECT_EQ(client.Post("/metrics", "", "text/plain")->status, 404);
  endpoint.stop();
  std::filesystem::remove_all(folder);
}

// The live endpoint gives the GenAI histograms from a run's growing file: a client's
// request and its chunks (which end, and are read, before it) and a server's request.
TEST(MetricsEndpoint, GivesTheGenAiHistogramsOfTheRequestsThatEnded) {
  auto folder = std::filesystem::temp_directory_path() /
                ("opsight-metrics-gen-ai-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  opsight::trace::Trace trace;
  trace.run.pid = 7;
  trace.run.trace_id = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  auto track = trace.thread_track(7, 7);
  auto request = trace.intern("gen_ai.request");
  auto add = [&](int64_t start, int64_t duration, bool client) {
    auto row = trace.slices.add(start, duration, request, 0, track);
    trace.slice_args.add(row, trace.intern("gen_ai.operation.name"),
                         opsight::trace::ArgValue::of_string(trace.intern("chat")));
    trace.slice_args.add(row, trace.intern("gen_ai.usage.output_tokens"),
                         opsight::trace::ArgValue::of_int(3));
    trace.slice_args.add(row,
                         trace.intern(client ? "gen_ai.client.operation.time_to_first_chunk"
                                             : "gen_ai.server.time_to_first_token"),
                         opsight::trace::ArgValue::of_double(0.003));
    if (client)
      trace.slice_args.add(row, trace.intern("span.kind"),
                           opsight::trace::ArgValue::of_string(trace.intern("client")));
  };
  add(0, 100'000'000, true);
  trace.slices.add(20'000'000, 30'000'000, trace.intern("gen_ai.inter_token"), 0, track);
  trace.slices.add(50'000'000, 50'000'000, trace.intern("gen_ai.inter_token"), 0, track);
  add(200'000'000, 50'000'000, false);
  trace.finalize();
  std::string bytes = opsight::io::write_native(trace);
  std::FILE* out = std::fopen((folder / "trace.1.opsight").c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), out);
  std::fclose(out);
  opsight::exporting::MetricsEndpoint endpoint(folder.string(), "trace.", ".opsight");
  std::string text = endpoint.scrape();
  const std::string labels = "{gen_ai_operation_name=\"chat\"";
  for (const std::string& line :
       {"gen_ai_client_operation_duration_seconds_count" + labels + "} 1\n",
        "gen_ai_client_operation_time_per_output_chunk_seconds_count" + labels + "} 2\n",
        "gen_ai_client_operation_time_per_output_chunk_seconds_bucket" + labels +
            ",le=\"0.04\"} 1\n",
        "gen_ai_client_operation_time_per_output_chunk_seconds_bucket" + labels +
            ",le=\"0.08\"} 2\n",
        "gen_ai_server_time_to_first_token_seconds_count" + labels + "} 1\n",
        "gen_ai_client_token_usage_sum" + labels + ",gen_ai_token_type=\"output\"} 6\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(endpoint.scrape(), text);  // scraped again: nothing counted twice
  // In OpenMetrics, a GenAI bucket's exemplar is its request span (the client's is row 0),
  // with the observed value: the request's 0.1 s, the time between chunks' 0.03 s.
  opsight::io::ReadResult read = opsight::io::read_native(bytes);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read.trace.str(read.trace.slices.name[0]), "gen_ai.request");
  std::string exemplar =  // the request is a root: a trace of its own
      "} 1 # {trace_id=\"" + opsight::trace::root_trace_id(read.trace.slices.span_id[0]).to_hex() +
      "\",span_id=\"" + opsight::trace::span_id_to_hex(read.trace.slices.span_id[0]) + "\"} ";
  std::string openmetrics = endpoint.scrape_as(opsight::exporting::ExpositionFormat::kOpenMetrics);
  for (const std::string& line :
       {"\ngen_ai_client_operation_duration_seconds_bucket" + labels + ",le=\"0.16\"" + exemplar +
            "0.1 ",
        "\ngen_ai_client_operation_time_per_output_chunk_seconds_bucket" + labels + ",le=\"0.04\"" +
            exemplar + "0.03",
        "\ngen_ai_client_operation_duration_seconds_bucket" + labels + ",le=\"0.08\"} 0\n"})
    EXPECT_NE(openmetrics.find(line), std::string::npos) << line << "\n" << openmetrics;
  std::filesystem::remove_all(folder);
}

// The scraper's Accept header picks the format: OpenMetrics when it asks for it at least as
// much as for the Prometheus text (Prometheus 2.x's and 3.x's default headers do).
TEST(MetricsEndpoint, AcceptHeaderChoosesOpenMetricsOrPrometheusText) {
  using opsight::exporting::exposition_format_for;
  using opsight::exporting::ExpositionFormat;
  constexpr auto kOpenMetrics = ExpositionFormat::kOpenMetrics;
  constexpr auto kText = ExpositionFormat::kPrometheusText;
  EXPECT_EQ(exposition_format_for(""), kText);
  EXPECT_EQ(exposition_format_for("*/*"), kText);
  EXPECT_EQ(exposition_format_for("text/plain;version=0.0.4"), kText);
  EXPECT_EQ(exposition_format_for("application/openmetrics-text"), kOpenMetrics);
  // Prometheus 2.42's default
  EXPECT_EQ(exposition_format_for("application/openmetrics-text;version=1.0.0,application/"
                                  "openmetrics-text;version=0.0.1;q=0.75,text/"
                                  "plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            kOpenMetrics);
  // Prometheus 3's default (protobuf first, which opsight does not serve)
  EXPECT_EQ(exposition_format_for(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                "encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,"
                "application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,"
                "*/*;q=0.1"),
            kOpenMetrics);
  EXPECT_EQ(exposition_format_for("Application/OpenMetrics-Text; Version=1.0.0; Q=0.9"),
            kOpenMetrics);
  EXPECT_EQ(exposition_format_for("text/plain;version=0.0.4,application/openmetrics-text;q=0.5"),
            kText);
  EXPECT_EQ(exposition_format_for("application/openmetrics-text;q=0"), kText);
  EXPECT_EQ(exposition_format_for("application/openmetrics-text;version=2.0.0"), kText);
}

// A small run's whole OpenMetrics exposition, every line: two spans of one name in two
// buckets, each bucket's exemplar the span's trace id (the run's) and span id (as the file
// reader, hence every span exporter, gives it), its duration and its end (Unix seconds);
// counters' families without _total; # EOF. Over HTTP, the Accept header decides the format
// and the content type.
TEST(MetricsEndpoint, OpenMetricsWithExemplarsOfTheSpansTraceAndSpanIds) {
  auto folder = std::filesystem::temp_directory_path() /
                ("opsight-metrics-openmetrics-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  opsight::trace::Trace trace;
  trace.run.pid = 7;
  trace.run.trace_id = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  trace.run.unix_offset_ns = 1'700'000'000'000'000'000;
  trace.run.has_unix_offset = true;
  auto track = trace.thread_track(7, 7);
  trace.slices.add(100, 50'000, trace.intern("step"), 0, track);         // 50 µs
  trace.slices.add(100'000, 3'000'000, trace.intern("step"), 0, track);  // 3 ms
  trace.finalize();
  std::string bytes = opsight::io::write_native(trace);
  std::FILE* out = std::fopen((folder / "trace.1.opsight").c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), out);
  std::fclose(out);
  opsight::io::ReadResult read = opsight::io::read_native(bytes);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read.trace.slices.size(), 2u);
  std::string fast_id = opsight::trace::span_id_to_hex(read.trace.slices.span_id[0]);
  std::string slow_id = opsight::trace::span_id_to_hex(read.trace.slices.span_id[1]);
  ASSERT_NE(fast_id, slow_id);
  // Each step is a root: the root of a trace of its own.
  auto exemplar_of = [&](size_t row) {
    return " # {trace_id=\"" +
           opsight::trace::root_trace_id(read.trace.slices.span_id[row]).to_hex() + "\",span_id=\"";
  };
  std::string expected =
      "# HELP opsight_span_duration_seconds Duration of the spans opsight recorded, per span "
      "name.\n"
      "# TYPE opsight_span_duration_seconds histogram\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"1e-05\"} 0\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.0001\"} 1" +
      exemplar_of(0) + fast_id +
      "\"} 5e-05 1700000000.000050100\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.00025\"} 1\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.0005\"} 1\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.001\"} 1\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.0025\"} 1\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.005\"} 2" +
      exemplar_of(1) + slow_id +
      "\"} 0.003 1700000000.003100000\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.01\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.025\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.05\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.1\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.25\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.5\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"1\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"2.5\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"5\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"10\"} 2\n"
      "opsight_span_duration_seconds_bucket{span=\"step\",le=\"+Inf\"} 2\n"
      "opsight_span_duration_seconds_sum{span=\"step\"} 0.00305\n"
      "opsight_span_duration_seconds_count{span=\"step\"} 2\n"
      "# HELP opsight_events_dropped Events the tracer dropped at its memory bound.\n"
      "# TYPE opsight_events_dropped counter\n"
      "opsight_events_dropped_total 0\n"
      "# EOF\n";
  opsight::exporting::MetricsEndpoint endpoint(folder.string(), "trace.", ".opsight");
  ASSERT_EQ(endpoint.start("127.0.0.1", 0), "");
  httplib::Client client("127.0.0.1", endpoint.port());
  auto openmetrics = client.Get(
      "/metrics", {{"Accept", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"}});
  ASSERT_TRUE(openmetrics);
  EXPECT_EQ(openmetrics->get_header_value("Content-Type"),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_EQ(openmetrics->body, expected);
  auto text = client.Get("/metrics");  // no Accept header: the Prometheus text, no exemplar
  ASSERT_TRUE(text);
  EXPECT_EQ(text->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(text->body.find(" # {"), std::string::npos) << text->body;
  EXPECT_EQ(text->body.find("# EOF"), std::string::npos);
  EXPECT_NE(text->body.find("# TYPE opsight_events_dropped_total counter\n"
                            "opsight_events_dropped_total 0\n"),
            std::string::npos);
  EXPECT_NE(text->body.find("opsight_span_duration_seconds_bucket{span=\"step\",le=\"0.005\"} 2\n"),
            std::string::npos);
  endpoint.stop();
  std::filesystem::remove_all(folder);
}

}  // namespace
