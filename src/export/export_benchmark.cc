// Encoding speed of the exporters, against the Perfetto writer on the same trace (a
// protobuf encoder doing comparable work per slice) measured in the same run:
//   BM_EncodeOtlpProtobuf, BM_EncodeOtlpJson, BM_EncodeZipkinJson, BM_EncodeLokiJson
//                                                                       spans/s of one core
//   BM_EncodeOtlpProtobufGzip/libdeflate:0|1/level:N  the protobuf encoding, then gzip by
//   zlib (0) or libdeflate (1) at level N, on the same thread            spans/s of one core
//   BM_GzipOtlpBatches/libdeflate:0|1/level:N  compression alone of the encoded batches
//                                                   spans/s, input bytes/s, ratio
// Each encoder is timed whole, as the Perfetto writer is: building the SpanView (a sort of
// every row, link and trace resolution) is inside the timed loop, once per iteration, as
// export_trace builds it once per export. (BM_EncodeLokiJson also decides the trace's
// streams, once per iteration, as export_trace does once per Loki target.)
// The trace: 100k spans over 4 threads, nested 4 deep, two arguments each.
// Encoding and sending, to a server in this process on 127.0.0.1 that answers every request
// at once (so the server's cost is in the figure too); argument 0 OTLP/HTTP protobuf
// (HttpSender, cpp-httplib's server), 1 OTLP/gRPC (the gRPC sender, grpc++'s callback
// generic server), 2 and 3 the same gzip-compressed:
//   BM_EncodeAndSendOtlp/N  one sender on this thread: encoding, compression and sending
//                           one after the other (one core's work)      spans/s
//   BM_ExportTrace/N        the whole export_trace call: this thread encodes while the two
//                           sender threads compress and send (the pipeline `opsight
//                           export` runs)          spans/s (wall clock), and per CPU
//                           second of the exporting thread
// The live /metrics endpoint's two costs (metrics_endpoint.hpp), exemplars against none:
//   BM_AddSpansToHistograms/0 (the baseline: durations only), /1 (each span's trace and span
//   id kept as its bucket's exemplar)                    spans/s, allocations per span
//   BM_RenderMetrics/0 (the Prometheus text, the baseline), /1 (OpenMetrics with an exemplar
//   on every bucket)                                     one scrape of 200 span names
#include <benchmark/benchmark.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "export/export.hpp"
#include "export/http_sender.hpp"
#include "export/loki/loki_encoder.hpp"
#include "export/otlp/grpc_sender.hpp"
#include "export/otlp/otlp_encoder.hpp"
#include "export/otlp/otlp_sinks.hpp"
#include "export/prometheus/prometheus_text.hpp"
#include "export/zipkin/zipkin_encoder.hpp"
#include "io/io.hpp"

#if OPSIGHT_WITH_GRPC
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#endif

namespace {

std::atomic<uint64_t> allocations{0};  // operator new calls, for allocations per span

}  // namespace

// Replacing the global operator new and delete (malloc and free underneath) counts the
// allocations; GCC takes the pairing of the replacements for a mismatch, hence the pragma.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }
#pragma GCC diagnostic pop

namespace {

const opsight::trace::Trace& sample() {
  static opsight::trace::Trace trace = [] {
    opsight::trace::Trace built;
    built.run.command_line = "python serve.py";
    built.run.host = "bench";
    built.run.pid = 1;
    built.run.has_unix_offset = true;
    built.run.unix_offset_ns = 1'700'000'000'000'000'000;
    opsight::trace::StringId names[4] = {built.intern("request"), built.intern("forward"),
                                         built.intern("aten::linear"), built.intern("aten::addmm")};
    opsight::trace::StringId batch = built.intern("batch"), shape = built.intern("shape");
    opsight::trace::StringId shape_value = built.intern("[4, 64, 768]");
    for (int thread = 0; thread < 4; ++thread) {
      auto track = built.thread_track(1, 100 + thread);
      int64_t ts = 0;
      for (int i = 0; i < 25'000 / 4; ++i) {
        for (int depth = 0; depth < 4; ++depth) {
          auto row = built.slices.add(ts + depth * 10, 1000 - depth * 20, names[depth], 0, track);
          built.slice_args.add(row, batch, opsight::trace::ArgValue::of_int(4));
          built.slice_args.add(row, shape, opsight::trace::ArgValue::of_string(shape_value));
        }
        ts += 2000;
      }
    }
    built.finalize();
    return built;
  }();
  return trace;
}

template <typename Encode>
void run_encoder(benchmark::State& state, Encode encode) {
  const auto& trace = sample();
  size_t bytes = 0;
  for (auto _ : state) {
    opsight::exporting::SpanView view(trace, {});
    auto rows = view.rows();
    for (size_t begin = 0; begin < rows.size(); begin += 512) {
      std::string body =
          encode(view, rows.subspan(begin, std::min<size_t>(512, rows.size() - begin)));
      bytes += body.size();
      benchmark::DoNotOptimize(body.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_EncodeOtlpProtobuf(benchmark::State& state) {
  run_encoder(state, opsight::exporting::encode_otlp_protobuf);
}
BENCHMARK(BM_EncodeOtlpProtobuf)->Unit(benchmark::kMillisecond);

// The gzip path (OTEL_EXPORTER_OTLP_COMPRESSION=gzip) on one thread: each batch encoded,
// then compressed at the level given by the implementation given (first argument: 0 zlib,
// 1 libdeflate, what gzip_compress uses where built); bytes/s counts the compressed bytes.
std::string export_bench_gzip(std::string_view body, int implementation, int level) {
  return implementation == 0 ? opsight::exporting::gzip_compress_zlib(body, level)
                             : opsight::exporting::gzip_compress_libdeflate(body, level);
}

void BM_EncodeOtlpProtobufGzip(benchmark::State& state) {
  int implementation = static_cast<int>(state.range(0)), level = static_cast<int>(state.range(1));
  if (implementation == 1 && !opsight::exporting::gzip_uses_libdeflate())
    return state.SkipWithError("built without libdeflate");
  run_encoder(state, [implementation, level](const opsight::exporting::SpanView& view,
                                             std::span<const opsight::trace::RowIndex> rows) {
    return export_bench_gzip(opsight::exporting::encode_otlp_protobuf(view, rows), implementation,
                             level);
  });
}
BENCHMARK(BM_EncodeOtlpProtobufGzip)
    ->ArgNames({"libdeflate", "level"})
    ->Args({0, 1})
    ->Args({0, 6})
    ->Args({1, 1})
    ->Args({1, 6})
    ->Unit(benchmark::kMillisecond);

// Compression alone, of the same trace's OTLP protobuf batches (encoded once, before):
// spans/s, bytes/s of the input, and the ratio (input bytes / compressed bytes).
void BM_GzipOtlpBatches(benchmark::State& state) {
  int implementation = static_cast<int>(state.range(0)), level = static_cast<int>(state.range(1));
  if (implementation == 1 && !opsight::exporting::gzip_uses_libdeflate())
    return state.SkipWithError("built without libdeflate");
  const auto& trace = sample();
  opsight::exporting::SpanView view(trace, {});
  auto rows = view.rows();
  std::vector<std::string> bodies;
  size_t input_bytes = 0, output_bytes = 0;
  for (size_t begin = 0; begin < rows.size(); begin += 512) {
    bodies.push_back(opsight::exporting::encode_otlp_protobuf(
        view, rows.subspan(begin, std::min<size_t>(512, rows.size() - begin))));
    input_bytes += bodies.back().size();
  }
  for (auto _ : state) {
    output_bytes = 0;
    for (const std::string& body : bodies) {
      std::string compressed = export_bench_gzip(body, implementation, level);
      output_bytes += compressed.size();
      benchmark::DoNotOptimize(compressed.data());
    }
  }
  state.counters["ratio"] =
      static_cast<double>(input_bytes) / static_cast<double>(std::max<size_t>(1, output_bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input_bytes));
}
BENCHMARK(BM_GzipOtlpBatches)
    ->ArgNames({"libdeflate", "level"})
    ->Args({0, 1})
    ->Args({0, 6})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({1, 4})
    ->Args({1, 6})
    ->Unit(benchmark::kMillisecond);

void BM_EncodeOtlpJson(benchmark::State& state) {
  run_encoder(state, opsight::exporting::encode_otlp_json);
}
BENCHMARK(BM_EncodeOtlpJson)->Unit(benchmark::kMillisecond);

void BM_EncodeZipkinJson(benchmark::State& state) {
  run_encoder(state, opsight::exporting::encode_zipkin_json);
}
BENCHMARK(BM_EncodeZipkinJson)->Unit(benchmark::kMillisecond);

void BM_EncodeLokiJson(benchmark::State& state) {
  const auto& trace = sample();
  size_t bytes = 0;
  for (auto _ : state) {
    opsight::exporting::SpanView view(trace, {});
    auto rows = view.rows();
    opsight::exporting::LokiStreams streams(view);
    for (size_t begin = 0; begin < rows.size(); begin += 512) {
      std::string body = opsight::exporting::encode_loki_json(
          view, streams, rows.subspan(begin, std::min<size_t>(512, rows.size() - begin)));
      bytes += body.size();
      benchmark::DoNotOptimize(body.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_EncodeLokiJson)->Unit(benchmark::kMillisecond);

#if OPSIGHT_WITH_GRPC
// A gRPC server that answers every call with an empty message (an
// ExportTraceServiceResponse with no partial success).
class AnsweringGrpcServer {
 public:
  AnsweringGrpcServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~AnsweringGrpcServer() { server_->Shutdown(); }
  int port() const { return port_; }

 private:
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
      grpc::Slice empty("", 0);
      response_ = grpc::ByteBuffer(&empty, 1);  // a default ByteBuffer is no message
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer request_, response_;
  };
  class Service : public grpc::CallbackGenericService {
    grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
      return new Reactor();
    }
  };
  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};
#endif

// A server in this process that answers every OTLP request at once: cpp-httplib's for
// OTLP/HTTP, or the gRPC one above; target() is an ExportTarget for it.
class ExportBenchServer {
 public:
  ExportBenchServer(bool grpc, bool gzip) {
    target_.gzip = gzip;
    target_.endpoint.host = "127.0.0.1";
    if (grpc) {
#if OPSIGHT_WITH_GRPC
      grpc_server_ = std::make_unique<AnsweringGrpcServer>();
      target_.sink = &opsight::exporting::otlp::grpc_sink();
      target_.endpoint.port = grpc_server_->port();
#endif
      return;
    }
    http_server_.Post("/v1/traces", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("", "application/x-protobuf");
    });
    int port = http_server_.bind_to_any_port("127.0.0.1");
    http_thread_ = std::thread([this] { http_server_.listen_after_bind(); });
    while (!http_server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    target_.sink = &opsight::exporting::otlp::protobuf_sink();
    target_.endpoint.port = port;
    target_.endpoint.path = "/v1/traces";
  }
  ~ExportBenchServer() {
    if (http_thread_.joinable()) {
      http_server_.stop();
      http_thread_.join();
    }
  }
  // False when gRPC was asked of a build without it.
  bool ready() const { return target_.sink != nullptr; }
  const opsight::exporting::ExportTarget& target() const { return target_; }

 private:
  opsight::exporting::ExportTarget target_;
  httplib::Server http_server_;
  std::thread http_thread_;
#if OPSIGHT_WITH_GRPC
  std::unique_ptr<AnsweringGrpcServer> grpc_server_;
#endif
};

void BM_EncodeAndSendOtlp(benchmark::State& state) {
  bool grpc = state.range(0) % 2 == 1, gzip = state.range(0) >= 2;
  const auto& trace = sample();
  ExportBenchServer server(grpc, gzip);
  if (!server.ready()) return state.SkipWithError("built without gRPC");
  std::unique_ptr<opsight::exporting::BatchSender> sender =
      opsight::exporting::make_sender(server.target(), 10);
  uint64_t failed = 0;
  for (auto _ : state) {
    opsight::exporting::SpanView view(trace, {});
    auto rows = view.rows();
    for (size_t begin = 0; begin < rows.size(); begin += 512) {
      std::string body = opsight::exporting::encode_otlp_protobuf(
          view, rows.subspan(begin, std::min<size_t>(512, rows.size() - begin)));
      if (sender->send(body).outcome != opsight::exporting::SendResult::Outcome::kSent) ++failed;
    }
  }
  if (failed > 0) state.SkipWithError("a batch was not sent");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
}
BENCHMARK(BM_EncodeAndSendOtlp)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole export call, as `opsight export` makes it: export_trace encodes on this thread
// while its two sender threads (requests_in_flight) compress, when gzip is on, and send, to
// the answering server above; timed from the call to every span sent. The argument is
// BM_EncodeAndSendOtlp's: 0 OTLP/HTTP, 1 OTLP/gRPC, 2 and 3 the same with gzip. Wall-clock
// spans/s; the CPU column is this (the exporting) thread's alone.
double export_bench_thread_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

void BM_ExportTrace(benchmark::State& state) {
  bool grpc = state.range(0) % 2 == 1, gzip = state.range(0) >= 2;
  const auto& trace = sample();
  ExportBenchServer server(grpc, gzip);
  if (!server.ready()) return state.SkipWithError("built without gRPC");
  opsight::exporting::TraceExportOptions options;
  uint64_t unsent = 0, wire_bytes = 0;
  double thread_cpu_s = 0;
  for (auto _ : state) {
    double cpu_before = export_bench_thread_cpu_s();
    auto reports = opsight::exporting::export_trace(trace, {server.target()}, options);
    thread_cpu_s += export_bench_thread_cpu_s() - cpu_before;
    unsent += reports.front().stats.spans_offered - reports.front().stats.spans_sent;
    wire_bytes += reports.front().stats.bytes_sent;
  }
  if (unsent > 0) state.SkipWithError("a span was not sent");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
  // The exporting thread's own rate: spans per second of its CPU time (encoding, offering,
  // waiting for the senders costs it nothing).
  state.counters["exporting_thread_spans_per_cpu_s"] =
      static_cast<double>(state.iterations() * trace.slices.size()) / thread_cpu_s;
  state.counters["wire_MB_per_export"] =
      static_cast<double>(wire_bytes) / 1e6 / static_cast<double>(state.iterations());
}
BENCHMARK(BM_ExportTrace)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// The baseline: the same trace written as Perfetto protobuf.
void BM_WritePerfettoBaseline(benchmark::State& state) {
  const auto& trace = sample();
  for (auto _ : state) {
    std::string out = opsight::io::write_perfetto(trace);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
}
BENCHMARK(BM_WritePerfettoBaseline)->Unit(benchmark::kMillisecond);

constexpr opsight::trace::TraceId kBenchTraceId{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

// The endpoint's work per ended span: its duration into its name's histogram, and with
// argument 1 its trace and span id into the bucket's exemplar slot. One snapshot for the
// whole run, as the endpoint keeps one.
void BM_AddSpansToHistograms(benchmark::State& state) {
  const auto& trace = sample();
  const bool with_exemplars = state.range(0) == 1;
  std::vector<std::string_view> names(trace.slices.size());
  for (size_t row = 0; row < trace.slices.size(); ++row)
    names[row] = trace.str(trace.slices.name[row]);
  opsight::exporting::MetricsSnapshot metrics;
  uint64_t allocations_before = 0;
  bool first = true;
  for (auto _ : state) {
    for (size_t row = 0; row < trace.slices.size(); ++row) {
      int64_t duration = trace.slices.dur[row];
      opsight::exporting::SpanOrigin origin;
      if (with_exemplars)
        origin = {kBenchTraceId, trace.slices.span_id[row],
                  trace.run.unix_offset_ns + trace.slices.ts[row] + duration};
      metrics.add_span(names[row], duration, origin);
    }
    if (first) {  // the first pass creates the histograms: not counted
      allocations_before = allocations.load(std::memory_order_relaxed);
      first = false;
    }
  }
  uint64_t spans_after_first = (state.iterations() - 1) * trace.slices.size();
  state.counters["allocations_per_span"] =
      spans_after_first == 0
          ? 0.0
          : static_cast<double>(allocations.load(std::memory_order_relaxed) - allocations_before) /
                static_cast<double>(spans_after_first);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * trace.slices.size()));
}
BENCHMARK(BM_AddSpansToHistograms)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// One scrape's rendering: 200 span names, every bucket holding spans (and, with argument 1,
// rendered as OpenMetrics, an exemplar each).
void BM_RenderMetrics(benchmark::State& state) {
  const bool openmetrics = state.range(0) == 1;
  opsight::exporting::MetricsSnapshot metrics;
  for (int name = 0; name < 200; ++name) {
    std::string span_name = "module.layer" + std::to_string(name) + ".forward";
    for (int64_t duration = 5'000; duration < 20'000'000'000; duration = duration * 3 / 2)
      metrics.add_span(span_name, duration,
                       {kBenchTraceId, static_cast<uint64_t>(duration + name),
                        1'700'000'000'000'000'000 + duration});
  }
  metrics.overhead_seconds = 0.25;
  metrics.traced_seconds = 10;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = opsight::exporting::prometheus_exposition(
        metrics, openmetrics ? opsight::exporting::ExpositionFormat::kOpenMetrics
                             : opsight::exporting::ExpositionFormat::kPrometheusText);
    bytes += text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_RenderMetrics)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
