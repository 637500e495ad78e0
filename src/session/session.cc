// opsight::Session: a recording session with an output. Native output streams straight to
// the file; Chrome JSON and Perfetto (.pftrace) output stream to "<output>.opsight.tmp" (so
// a crash still leaves a readable recording) and are converted when the session stops.
#include <unistd.h>

#include <cstdio>

#include "collect/metric_costs.hpp"
#include "collect/sampler.hpp"
#include "cuda/gpu_collection.hpp"
#include "cuda/gpu_trace_builder.hpp"
#include "io/io.hpp"
#include "io/trace_formats.hpp"
#include "opsight/opsight.hpp"
#include "record/recorder.hpp"
#include "session/control.hpp"
#include "session/flight_recorder.hpp"

namespace opsight {

struct Session::State {
  SessionOptions options;
  std::string stream_path;  // where the native stream goes; empty for memory
  io::FileFormat output_format = io::FileFormat::kNative;
  bool running = false;
  pid_t owner_pid = 0;  // a forked child inherits the object but not the recording
  std::string error;
  uint64_t events_dropped = 0;
  std::string native_bytes;
  std::unique_ptr<collect::Sampler> sampler;
  bool gpu_collecting = false;
  std::string gpu_status;
  std::unique_ptr<session::FlightRecorder> flight_recorder;  // with SessionOptions::ring
};

namespace {

// What the GPU collector gathered, as a trace to append to the recording (docs/gpu.md);
// nothing when it gathered nothing. `status` gets the one line that says what it was.
std::optional<cuda::GpuTrace> finish_gpu_collection(std::string& status) {
  cuda::GpuCollectionResult result = cuda::stop_gpu_collection();
  cuda::GpuTraceOptions options{getpid(), result.collector, result.clock_alignment};
  status = "GPU: " + std::to_string(result.log.kernels.size()) + " kernels, " +
           std::to_string(result.log.copies.size()) + " copies, " +
           std::to_string(result.log.api_calls.size()) + " CUDA API calls";
  uint64_t dropped = result.log.records_dropped_by_cupti + result.log.records_dropped_by_opsight;
  if (dropped > 0) status += ", " + std::to_string(dropped) + " records dropped";
  if (result.log.empty()) return std::nullopt;
  return cuda::build_gpu_trace(result.log, options);
}

// Appends the GPU trace to the native file at `path` (read, append, rewrite).
std::optional<std::string> append_to_native_file(const std::string& path, const trace::Trace& gpu) {
  io::ReadResult recording = io::read_trace_file(path);
  if (!recording.ok()) return recording.error->to_string(path);
  trace::append_trace(recording.trace, gpu);
  return io::write_trace_file(recording.trace, path);
}

}  // namespace

Session::Session(SessionOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  const std::string& output = state_->options.output;
  if (!output.empty()) {
    auto format = io::format_from_path(output);
    if (!format) {
      state_->error = io::unknown_output_format(output);
      return;
    }
    state_->output_format = *format;
    state_->stream_path = *format == io::FileFormat::kNative ? output : output + ".opsight.tmp";
  }
  record::RecordingOptions recording;
  recording.buffer_bytes = state_->options.buffer_bytes;
  recording.flush_interval_ms = state_->options.flush_interval_ms;
  recording.final_run_info = collect::metric_run_info;
  recording.sample_rate = state_->options.sample_rate;
  recording.sample_root = state_->options.sample_root;
  recording.sample_operators_only = state_->options.sample_operators_only;
  if (!state_->options.ring.empty()) {
    session::FlightRecorderOptions flight;
    auto limits = record::parse_ring_limits(state_->options.ring, &state_->error);
    if (!limits) return;
    flight.limits = *limits;
    auto rules = session::parse_slow_span_rules(state_->options.dump_on_slow, &state_->error);
    if (!rules) return;
    flight.slow_rules = std::move(*rules);
    flight.dump_on_exception = state_->options.dump_on_exception;
    flight.dump_prefix = state_->options.dump_prefix;
    if (flight.dump_prefix.empty())
      flight.dump_prefix = output.empty() ? "opsight-" + std::to_string(getpid())
                                          : output.substr(0, output.rfind('.'));
    state_->flight_recorder = std::make_unique<session::FlightRecorder>(std::move(flight));
  }
  // The file is opened (and truncated) only once the recorder has accepted the session.
  auto open_sink = [this](std::string* error) -> std::unique_ptr<record::ByteSink> {
    if (state_->flight_recorder) return state_->flight_recorder->make_sink();
    if (state_->stream_path.empty()) return std::make_unique<record::MemorySink>();
    return record::open_file_sink(state_->stream_path, error);
  };
  if (auto problem = record::start_recording(open_sink, recording)) {
    state_->error = *problem;
    state_->flight_recorder.reset();
    return;
  }
  if (state_->flight_recorder) {
    state_->flight_recorder->start();
    session::FlightRecorder* flight = state_->flight_recorder.get();
    session::set_control_dump_handler([flight] {
      session::DumpResult result = flight->dump("opsight ctl dump");
      return result.error.empty() ? result.path : "error: " + result.error;
    });
  }
  collect::reset_metric_costs();
  state_->running = true;
  state_->owner_pid = getpid();
  if (state_->options.cuda) start_gpu_tracing(state_->options.cupti_path);
  if (state_->options.sample_interval_ms > 0)
    state_->sampler = std::make_unique<collect::Sampler>(
        collect::SamplerOptions{std::chrono::milliseconds(state_->options.sample_interval_ms)});
}

Session::~Session() { stop(); }

void Session::pause() {
  if (!state_->running) return;
  record::pause_recording();
  if (state_->gpu_collecting) cuda::pause_gpu_collection();
}

void Session::resume() {
  if (!state_->running) return;
  record::resume_recording();
  if (state_->gpu_collecting) cuda::resume_gpu_collection();
}

bool Session::stop() {
  if (!state_->running) return ok();
  state_->running = false;
  // In a forked child the recorder was switched off at fork and the output belongs to the
  // parent: finishing it here would clobber the parent's file.
  if (getpid() != state_->owner_pid) {
    static_cast<void>(state_->sampler.release());  // its thread exists in the parent only
    return ok();
  }
  state_->sampler.reset();  // its last samples land before the recording ends
  std::optional<cuda::GpuTrace> gpu;
  if (state_->gpu_collecting) {
    state_->gpu_collecting = false;
    gpu = finish_gpu_collection(state_->gpu_status);
  }
  record::StopResult result = record::stop_recording();
  state_->events_dropped = result.events_dropped;
  if (result.error) state_->error = *result.error;
  if (state_->flight_recorder) {
    // The session's end is the last dump: the output gets what the ring holds.
    session::set_control_dump_handler({});
    state_->flight_recorder->stop();
    std::string snapshot = state_->flight_recorder->final_snapshot();
    if (state_->stream_path.empty()) {
      auto memory = std::make_unique<record::MemorySink>();
      memory->bytes() = std::move(snapshot);
      result.sink = std::move(memory);
    } else if (auto file = record::open_file_sink(state_->stream_path, &state_->error)) {
      if (!file->write(snapshot)) state_->error = file->error();
      result.sink = std::move(file);
    } else {
      return false;
    }
    if (!state_->error.empty()) return false;
  }
  if (state_->options.output.empty()) {
    if (auto* memory = dynamic_cast<record::MemorySink*>(result.sink.get()))
      state_->native_bytes = std::move(memory->bytes());
    if (gpu && state_->error.empty()) {
      io::ReadResult recording = io::read_native(state_->native_bytes);
      if (recording.ok()) {
        trace::append_trace(recording.trace, gpu->trace);
        state_->native_bytes = io::write_native(recording.trace);
      } else {
        state_->gpu_status += " (not added: " + recording.error->to_string("the recording") + ")";
      }
    }
    return ok();
  }
  result.sink.reset();  // closes the file
  if (state_->output_format == io::FileFormat::kNative && gpu && state_->error.empty()) {
    if (auto problem = append_to_native_file(state_->stream_path, gpu->trace))
      state_->gpu_status += " (not added: " + *problem + ")";
  }
  if (state_->output_format != io::FileFormat::kNative && state_->error.empty()) {
    io::ReadResult recording = io::read_trace_file(state_->stream_path);
    if (!recording.ok()) {
      state_->error = recording.error->to_string(state_->stream_path);
      return false;
    }
    if (gpu) trace::append_trace(recording.trace, gpu->trace);
    if (auto problem = io::write_trace_file(recording.trace, state_->options.output)) {
      state_->error = *problem;
      return false;
    }
    std::remove(state_->stream_path.c_str());
  }
  return ok();
}

bool Session::ok() const { return state_->error.empty(); }
const std::string& Session::error() const { return state_->error; }

uint64_t Session::events_dropped() const {
  return state_->running ? record::events_dropped_so_far() : state_->events_dropped;
}

std::string Session::take_native_bytes() { return std::move(state_->native_bytes); }

const std::string& Session::gpu_status() const { return state_->gpu_status; }

std::string Session::dump(std::string_view trigger, std::string* error) {
  if (!state_->flight_recorder || !state_->running) {
    *error = "no flight recorder: start the session with a ring (SessionOptions::ring)";
    return {};
  }
  session::DumpResult result = state_->flight_recorder->dump(trigger);
  if (!result.error.empty()) *error = result.error;
  return result.path;
}

const std::string& Session::start_gpu_tracing(const std::string& cupti_path) {
  if (state_->gpu_collecting) return state_->gpu_status;
  if (!state_->running || getpid() != state_->owner_pid) {
    state_->gpu_status = "GPU tracing off: the session is not recording in this process";
    return state_->gpu_status;
  }
  cuda::GpuCollectionOptions gpu;
  gpu.cupti_path = cupti_path;
  if (auto problem = cuda::start_gpu_collection(gpu)) {
    state_->gpu_status = *problem;
  } else {
    state_->gpu_status.clear();
    state_->gpu_collecting = true;
  }
  return state_->gpu_status;
}

}  // namespace opsight
